//! Hooks found by use: the functions and protocol methods the project's
//! forward wrappers and register calls reach, which no rule names.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::analysis::effects::record::StepEvidence;
use crate::analysis::module_facts::{CallFact, Callee, ForwardReplacement, ModuleFacts, Value};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::vocabulary::{BUILTIN_CONTAINERS, GENERIC_METHODS};
use crate::found::{Discovered, EntryPoint, Found, identity};

/// Whether a callee's name spells an original forward (`forward`,
/// `_old_forward`, `orig_forward`, `forward_orig`, ...).
pub fn is_forward_name(name: &str) -> bool {
    let name = name.trim_start_matches('_').to_ascii_lowercase();
    let Some(at) = name.find("forward") else {
        return false;
    };
    let (before, after) = (&name[..at], &name[at + "forward".len()..]);
    let before = before.trim_end_matches('_');
    let after = after.trim_start_matches('_');
    const AROUND: &[&str] = &[
        "",
        "old",
        "orig",
        "original",
        "saved",
        "prev",
        "previous",
        "wrapped",
        "base",
        "inner",
        "hf_hook_original",
        "fn",
        "func",
        "function",
        "method",
    ];
    AROUND.contains(&before) && AROUND.contains(&after)
}

impl ProjectIndex<'_> {
    /// What the forward wrappers of every indexed module call around the
    /// original forward: the hooks they run.
    pub fn discover(&self, unresolved: &HashSet<(PathBuf, usize, usize)>) -> Discovered {
        use rayon::prelude::*;
        // Each module's register calls and forward replacements on their
        // own (in parallel), then what each found taken in the modules'
        // order: the first reason found for a function is the one kept,
        // as if they had been followed one module after another.
        let found: Vec<(Discovered, Vec<StepEvidence>)> = self
            .modules
            .par_iter()
            .map(|module| self.discover_in(module, unresolved))
            .collect();
        let mut discovered = Discovered::default();
        for (found, evidence) in found {
            discovered.absorb(found);
            self.keep_step_evidence(evidence);
        }
        self.swapped_class_roots(&mut discovered);
        self.forward_steps(&mut discovered);
        self.torch_function_dispatch(&mut discovered);
        let _ = self.dispatchers.set(discovered.dispatchers.clone());
        discovered
    }

    /// What `module`'s register calls and forward replacements reach (see
    /// [`ProjectIndex::discover`]), with the evidence of the steps they
    /// call, in the order found.
    fn discover_in(
        &self,
        module: &Arc<ModuleFacts>,
        unresolved: &HashSet<(PathBuf, usize, usize)>,
    ) -> (Discovered, Vec<StepEvidence>) {
        let mut discovered = Discovered::default();
        let mut step_evidence: Vec<StepEvidence> = Vec::new();
        {
            // What a helper's callers pass to the registrations of its
            // parameter, by registration: asked once per registration.
            let mut passed_by_registration: HashMap<usize, Vec<FunctionRef>> = HashMap::new();
            if !unresolved.is_empty() {
                let path = identity(&module.path);
                for (index, registration) in module.registrations.iter().enumerate() {
                    let at = (path.clone(), registration.line, registration.column);
                    if !unresolved.contains(&at) {
                        continue;
                    }
                    let mut targets =
                        self.functions_of(module, registration.scope, &registration.value, 0);
                    let backward = registration
                        .backward
                        .then(|| registration.registrar.clone());
                    if targets.is_empty() {
                        // A helper that registers its parameter: what its
                        // callers pass there.
                        let passed = self.passed_to_registrar(module, registration, &backward);
                        for (function, why) in passed {
                            discovered.add_function(&function.0, function.1, &why);
                            targets.push(function);
                        }
                        if !registration.backward {
                            passed_by_registration.insert(index, targets.clone());
                        }
                    }
                    let why = Found {
                        how: "registration",
                        detail: match &backward {
                            Some(registrar) => format!(
                                "registered with {registrar} at {}:{}",
                                module.path.display(),
                                registration.line
                            ),
                            None => format!(
                                "registered at {}:{}",
                                module.path.display(),
                                registration.line
                            ),
                        },
                        path: module.path.clone(),
                        line: registration.line,
                        backward,
                    };
                    for (target_module, target) in &targets {
                        discovered.add_function(target_module, *target, &why);
                    }
                    if !targets.is_empty() {
                        discovered.resolved.insert(at);
                    }
                }
            }
            for (index, registration) in module
                .registrations
                .iter()
                .enumerate()
                .filter(|(_, r)| !r.backward)
            {
                let mut hooks =
                    self.functions_of(module, registration.scope, &registration.value, 0);
                if hooks.is_empty() {
                    // Registered through a helper: what its callers pass.
                    hooks = match passed_by_registration.remove(&index) {
                        Some(passed) => passed,
                        None => self
                            .passed_to_registrar(module, registration, &None)
                            .into_iter()
                            .map(|(function, _)| function)
                            .collect(),
                    };
                }
                for (hook_module, hook) in hooks {
                    self.dispatch_of_hook(&hook_module, hook, true, &mut discovered);
                    let mut evidence = Vec::new();
                    self.applied_by_hook(&hook_module, hook, &mut discovered, &mut evidence);
                    step_evidence.append(&mut evidence);
                    self.passed_to_closure(
                        &hook_module,
                        hook,
                        module,
                        registration,
                        &mut discovered,
                    );
                    // Closures it makes run on the module's behalf later
                    // (handed to an autograd Function, a tensor hook).
                    let start = hook_module.functions[hook].start;
                    for &nested in hook_module.nested_in(start) {
                        self.dispatch_of_hook(&hook_module, nested, false, &mut discovered);
                    }
                }
            }
            for replacement in &module.forward_replacements {
                let wrappers = self.functions_of(module, replacement.scope, &replacement.value, 0);
                for (wrapper_module, wrapper) in wrappers {
                    self.hooks_of_wrapper(
                        &wrapper_module,
                        wrapper,
                        module,
                        replacement,
                        &mut discovered,
                    );
                    // Whatever else the wrapper calls that touches module
                    // state is a step of the forward it installs.
                    let place = format!(
                        "{} at {}:{}",
                        wrapper_module.functions[wrapper].qualname,
                        module.path.display(),
                        replacement.line
                    );
                    let why = |call: &CallFact, via: Option<&str>| Found {
                        how: "forward replacement",
                        detail: match via {
                            Some(via) => format!(
                                "called by {via}, which the forward wrapper {place} runs (line {})",
                                call.line
                            ),
                            None => format!(
                                "called by the forward wrapper {place} (line {})",
                                call.line
                            ),
                        },
                        path: module.path.clone(),
                        line: replacement.line,
                        backward: None,
                    };
                    let mut evidence = Vec::new();
                    // Its first parameter is the module only where the
                    // wrapper is bound to it (or put on the class); a
                    // function set on an instance gets the inputs alone.
                    let wrapper_fact = &wrapper_module.functions[wrapper];
                    let mut roles = if read_as_bound(replacement, wrapper_fact) {
                        crate::analysis::effects::judge::forward_roles(wrapper_fact)
                    } else {
                        vec![
                            crate::analysis::effects::judge::Role::Activation;
                            wrapper_fact.parameters.len()
                        ]
                    };
                    // `def f(x, m=m)`: a default naming the module the
                    // forward is set on (or whose class it is set on)
                    // binds that module.
                    let module_named = replacement
                        .target
                        .strip_suffix(".__class__")
                        .unwrap_or(&replacement.target);
                    for (i, name) in &wrapper_fact.default_names {
                        if **name == *module_named
                            && let Some(role) = roles.get_mut(*i)
                        {
                            *role = crate::analysis::effects::judge::Role::Module;
                        }
                    }
                    let installed = (Arc::clone(&wrapper_module), wrapper);
                    self.installed_inline_work(
                        &installed,
                        &roles,
                        ((&module.path, replacement.line), false),
                        &mut discovered,
                        &mut evidence,
                    );
                    self.steps_of(
                        &wrapper_module,
                        wrapper,
                        roles,
                        &why,
                        &mut discovered,
                        &mut evidence,
                    );
                    step_evidence.append(&mut evidence);
                }
            }
        }
        (discovered, step_evidence)
    }

    fn hooks_of_wrapper(
        &self,
        module: &Arc<ModuleFacts>,
        wrapper: usize,
        installed_in: &ModuleFacts,
        replacement: &ForwardReplacement,
        discovered: &mut Discovered,
    ) {
        let function = &module.functions[wrapper];
        // The original forward: a name kept from `m.forward` here or around,
        // or a callee that spells one.
        let mut saved: Vec<&str> = function.saved_forwards.iter().map(String::as_str).collect();
        let mut outer = function.outer;
        while let Some(start) = outer {
            let Some(around) = module
                .function_starting(start)
                .map(|i| &module.functions[i])
            else {
                break;
            };
            saved.extend(around.saved_forwards.iter().map(String::as_str));
            outer = around.outer;
        }
        let is_original = |call: &CallFact| match &call.callee {
            Callee::Name(name) => saved.contains(&name.as_str()) || is_forward_name(name),
            Callee::Method { method, .. } => is_forward_name(method),
        };
        let Some(original) = function.calls.iter().position(is_original) else {
            return;
        };
        // The module as the wrapper sees it: its first parameter (bound by
        // `partial` / `MethodType`), or the name whose forward was replaced.
        let mut module_names: Vec<&str> = Vec::new();
        // (A method's own `self` is not the module; a plain function's first
        // parameter is, whatever its name, where it is read as bound:
        // `MethodType(f, m)` binds it.)
        // `*args` holds the inputs: no module.
        let first = usize::from(function.is_method);
        let first = function
            .parameters
            .get(first)
            .filter(|_| function.splats.get(first) != Some(&true))
            .filter(|_| read_as_bound(replacement, function));
        if let Some(first) = first {
            module_names.push(first);
        }
        let target_root = replacement
            .target
            .split('.')
            .next()
            .unwrap_or(&replacement.target);
        module_names.push(target_root);
        let place = format!(
            "{} at {}:{}",
            function.qualname,
            installed_in.path.display(),
            replacement.line
        );
        for (i, call) in function.calls.iter().enumerate() {
            if i == original {
                continue;
            }
            let Some(first) = call.first_argument.as_deref() else {
                continue;
            };
            if !module_names.contains(&first) {
                continue;
            }
            let when = if i < original { "before" } else { "after" };
            let why = Found {
                how: "forward replacement",
                detail: format!(
                    "called {when} the original forward by the forward wrapper {place}"
                ),
                path: installed_in.path.clone(),
                line: replacement.line,
                backward: None,
            };
            match &call.callee {
                Callee::Method { receiver, method } => {
                    let receiver = receiver.as_deref();
                    let receiver_root = receiver.map(|r| r.split('.').next().unwrap_or(r));
                    if receiver.is_some_and(|r| module_names.contains(&r))
                        || method.starts_with("__")
                    {
                        continue;
                    }
                    // A value the wrapper makes itself (a literal, a builtin
                    // container) is no hook object.
                    let made_here = receiver_root.is_some_and(|r| {
                        function.assigned.iter().any(|(name, value)| {
                            name == r
                                && match value {
                                    Value::Other(_) => true,
                                    Value::Returned(callee) => {
                                        BUILTIN_CONTAINERS.contains(&callee.as_str())
                                    }
                                    _ => false,
                                }
                        })
                    });
                    if made_here {
                        continue;
                    }
                    // A method of a known object (`self`, a typed attribute
                    // or local): that very function is the hook.
                    let known = receiver_root.is_some_and(|r| {
                        matches!(r, "self" | "cls")
                            || function.locals.contains_key(r)
                            || module.classes.contains_key(r)
                            || module.imports.contains_key(r)
                    });
                    if known {
                        for (target_module, target) in self.targets(module, wrapper, call).iter() {
                            discovered.add_function(target_module, *target, &why);
                        }
                        continue;
                    }
                    // Any class's method of this name would become a hook:
                    // never for a name every other class uses (`add`, `get`).
                    if GENERIC_METHODS.contains(&method.as_str()) {
                        continue;
                    }
                    discovered
                        .protocols
                        .entry(method.clone())
                        .or_insert_with(|| why.clone());
                    // A forward wrapper runs inside the traced forward and
                    // is never fenced: the method it calls is not covered.
                    discovered.add_dispatcher(method, module, wrapper, false);
                }
                Callee::Name(_) => {
                    for (target_module, target) in self.targets(module, wrapper, call).iter() {
                        discovered.add_function(target_module, *target, &why);
                    }
                }
            }
        }
    }
}

impl ProjectIndex<'_> {
    /// A registered hook that hands its module to a method of objects it
    /// loops over (`for hook in hooks: hook.pre_fwd_exec(module, *args)`):
    /// that method is a hook protocol, whatever class defines it, and every
    /// definition of it in the project is a hook found by use.
    /// `registered`: `hook` is registered with torch itself (not a closure
    /// it makes), so a run that fences it covers the methods it calls.
    pub(super) fn dispatch_of_hook(
        &self,
        module: &Arc<ModuleFacts>,
        hook: usize,
        registered: bool,
        discovered: &mut Discovered,
    ) {
        use crate::analysis::effects::judge::{Role, roles};
        use crate::analysis::effects::value::Root;
        let function = &module.functions[hook];
        let roles = roles(
            &function.parameters,
            function.is_method && !function.static_method,
        );
        // A custom autograd Function's `forward`/`backward`: torch passes
        // its `ctx` first, and what `forward` saved there (`ctx.params`) is
        // what the dispatch hands on.
        let autograd_ctx = function.static_method
            && matches!(function.name.as_str(), "forward" | "backward")
            && function
                .self_class
                .as_ref()
                .and_then(|c| module.classes.get(c))
                .is_some_and(|c| {
                    c.bases
                        .iter()
                        .any(|b| b.rsplit('.').next() == Some("Function"))
                });
        let module_param = if autograd_ctx && !function.parameters.is_empty() {
            0
        } else {
            let Some(module_param) = roles.iter().position(|r| *r == Role::Module) else {
                return;
            };
            module_param
        };
        let module_name = &function.parameters[module_param];
        for call in &function.calls {
            let Callee::Method {
                receiver: Some(receiver),
                method,
            } = &call.callee
            else {
                continue;
            };
            if call.through.is_some()
                || method.starts_with("__")
                || GENERIC_METHODS.contains(&method.as_str())
                || receiver.split('.').next() == Some(module_name.as_str())
                || matches!(receiver.split('.').next(), Some("self" | "cls"))
            {
                continue;
            }
            let hands_the_module = function.local.call_at(call.start).is_some_and(|values| {
                values.positional.iter().flat_map(|v| v.iter()).any(|val| {
                    val.root == Root::Param(module_param as u16)
                        && (val.attr.is_none() || autograd_ctx)
                })
            });
            // A method of objects (not a module's function): resolved to
            // methods of classes, or not at all (the objects come from
            // elsewhere); each class's method of that name is a hook.
            let imported = module
                .imports
                .contains_key(receiver.split('.').next().unwrap_or(""));
            let resolved = self.call_targets(module, hook, call);
            if !hands_the_module
                || imported
                || resolved.iter().any(|(m, f)| !m.functions[*f].is_method)
            {
                continue;
            }
            discovered
                .protocols
                .entry(method.clone())
                .or_insert_with(|| Found {
                    how: "dispatch",
                    detail: format!(
                        "called on hook objects by {} at {}:{}",
                        function.qualname,
                        module.path.display(),
                        call.line
                    ),
                    path: module.path.clone(),
                    line: call.line,
                    backward: None,
                });
            discovered.add_dispatcher(method, module, hook, registered);
        }
    }
}

impl Discovered {
    /// Records `module`'s function `function` as found by use, for `why`
    /// (the first reason found is kept).
    pub(super) fn add_function(&mut self, module: &ModuleFacts, function: usize, why: &Found) {
        let fact = &module.functions[function];
        self.names.insert(fact.name.clone());
        self.add_found((identity(&module.path), fact.line, fact.column), why);
    }

    /// Records a leaf layer's own `forward` as found by use, for `why`: its
    /// name is no needle for the prefilter (every model file defines a
    /// `forward`; the layer's file is parsed already).
    pub(super) fn add_layer_forward(&mut self, module: &ModuleFacts, function: usize, why: &Found) {
        let fact = &module.functions[function];
        self.add_found((identity(&module.path), fact.line, fact.column), why);
    }

    /// Records the function at `at` as found by use, for `why` (the first
    /// reason found is kept, a forward one over a backward one).
    fn add_found(&mut self, at: (PathBuf, usize, usize), why: &Found) {
        let entry = self.functions.entry(at).or_insert_with(|| why.clone());
        // Registered for forward anywhere: a forward hook. Found in its own
        // right anywhere: more than a function inside a step.
        if (entry.backward.is_some() && why.backward.is_none())
            || (entry.how == "inside" && why.how != "inside")
        {
            *entry = why.clone();
        }
    }

    /// Records `module`'s function `function` as running inside the step
    /// `step` of `at` (on the step's evidence chain).
    pub(super) fn add_inside(
        &mut self,
        module: &ModuleFacts,
        function: usize,
        at: &ModuleFacts,
        step: usize,
    ) {
        let fact = &module.functions[function];
        let step = &at.functions[step];
        self.inside
            .entry((identity(&module.path), fact.line, fact.column))
            .or_default()
            .insert(EntryPoint {
                path: at.path.clone(),
                line: step.line,
                column: step.column,
                qualname: step.qualname.clone(),
                registered: true,
            });
    }

    /// Takes the functions of `steps` (what a forward's steps found, and
    /// what runs inside them) as running inside `at`'s function `step`
    /// (that forward, fenced as a whole): each is found `inside` it, its
    /// evidence kept as its own.
    pub(super) fn absorb_inside(&mut self, steps: Discovered, at: &ModuleFacts, step: usize) {
        let fact = &at.functions[step];
        let entry = EntryPoint {
            path: at.path.clone(),
            line: fact.line,
            column: fact.column,
            qualname: fact.qualname.clone(),
            registered: true,
        };
        for (key, _) in steps.functions {
            let why = Found {
                how: "inside",
                detail: format!(
                    "reached from the step {} ({}:{})",
                    fact.qualname,
                    at.path.display(),
                    fact.line
                ),
                path: at.path.clone(),
                line: fact.line,
                backward: None,
            };
            self.add_found(key.clone(), &why);
            self.inside.entry(key).or_default().insert(entry.clone());
        }
        self.names.extend(steps.names);
        // What ran inside those steps runs inside the forward too.
        for key in steps.inside.into_keys() {
            self.inside.entry(key).or_default().insert(entry.clone());
        }
    }

    /// Records `module`'s function `function` as calling the protocol
    /// method `method` on hook objects (`registered`: see [`EntryPoint`]).
    pub(super) fn add_dispatcher(
        &mut self,
        method: &str,
        module: &ModuleFacts,
        function: usize,
        registered: bool,
    ) {
        let fact = &module.functions[function];
        self.dispatchers
            .entry(method.to_owned())
            .or_default()
            .insert(EntryPoint {
                path: module.path.clone(),
                line: fact.line,
                column: fact.column,
                qualname: fact.qualname.clone(),
                registered,
            });
    }

    /// Everything `other` found, added as it was found there: a function's
    /// first reason is kept (a forward one over a backward one), and so is
    /// a protocol's.
    pub(super) fn absorb(&mut self, other: Discovered) {
        self.resolved.extend(other.resolved);
        for (method, why) in other.protocols {
            self.protocols.entry(method).or_insert(why);
        }
        for (method, entries) in other.dispatchers {
            self.dispatchers.entry(method).or_default().extend(entries);
        }
        for (at, entries) in other.inside {
            self.inside.entry(at).or_default().extend(entries);
        }
        self.absorb_functions(other.functions, other.names);
    }

    /// The functions `other` found by use, added as [`Discovered::add_function`]
    /// adds each, in order.
    pub(super) fn absorb_functions(
        &mut self,
        functions: std::collections::BTreeMap<(PathBuf, usize, usize), Found>,
        names: std::collections::BTreeSet<String>,
    ) {
        self.names.extend(names);
        for (at, why) in functions {
            self.add_found(at, &why);
        }
    }
}

/// Whether `function`, installed by `replacement`, is read as a bound
/// forward (its parameters as `forward_roles` gives them): bound to the
/// module or put on a class (see `ForwardReplacement::bound`), a method, or
/// written to be bound (`def forward(self, *args)`). Else it is called with
/// the inputs alone.
fn read_as_bound(
    replacement: &crate::analysis::installs::ForwardReplacement,
    function: &crate::analysis::module_facts::FunctionFact,
) -> bool {
    replacement.bound
        || function.is_method
        || function.parameters.first().is_some_and(|p| p == "self")
}
