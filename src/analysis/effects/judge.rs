//! A hook's effects judged where it runs: torch hands a hook its module and
//! the module's inputs (and output), so an effect on the module (or on what
//! a hook factory was given, or on a hook object's attribute that can hold
//! module state) is weight work, and one on an input or output is work on
//! activations, which dynamo traces as ordinary compute.

use crate::analysis::effects::local::{Acts, Kind, LocalFacts};
use crate::analysis::effects::record::{Effect, Summary, Target};
use crate::analysis::module_facts::{FunctionFact, ModuleFacts};
use crate::analysis::reached::Step;
use crate::found::{Discovered, EntryPoint};

/// What a hook's parameter is, by where torch puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The hook object (`self` of a protocol method or a bound method).
    SelfObject,
    /// Bound before the module (`partial(hook, name)`): context.
    Context,
    /// A module-level value (a global, a class attribute) handed down: a
    /// context no module holds. Judged as [`Role::Context`], except that a
    /// wait on a handle kept there is no weight work of a forward's step.
    ModuleLevel,
    /// The module the hook runs for.
    Module,
    /// A tensor of module state handed over (`step(self.weight)`): acting
    /// on it in place is weight work; moving it makes a copy.
    State,
    /// An input, an output, a gradient: an activation.
    Activation,
}

/// Names that hold a hook's inputs, outputs or gradients.
pub fn is_activation_name(name: &str) -> bool {
    let lower = name.trim_start_matches('_').to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "x" | "y"
            | "out"
            | "res"
            | "inp"
            | "input"
            | "inputs"
            | "output"
            | "outputs"
            | "args"
            | "arg"
            | "kwargs"
            | "result"
            | "results"
            | "unused"
            | "grad"
            | "grads"
            | "tensor"
            | "tensors"
            | "a"
            | "_"
    ) || [
        "hidden",
        "grad_",
        "input_",
        "output_",
        "args_",
        "out_",
        "logits",
        "activation",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

/// Names that hold the module a hook runs for.
fn is_module_name(name: &str) -> bool {
    matches!(
        name.trim_start_matches('_').to_ascii_lowercase().as_str(),
        "module"
            | "mod"
            | "m"
            | "model"
            | "layer"
            | "block"
            | "submodule"
            | "sub_module"
            | "net"
            | "mdl"
            | "md"
            | "target_module"
    )
}

/// Each parameter's role in a hook with these parameters; one with a
/// default value (`target=next_layer`) is bound where the hook is defined:
/// context, never passed by torch.
pub fn roles_with_defaults(parameters: &[String], defaulted: &[bool], method: bool) -> Vec<Role> {
    let mut roles = roles(parameters, method);
    for (role, default) in roles.iter_mut().zip(defaulted) {
        if *default && *role == Role::Activation {
            *role = Role::Context;
        }
    }
    roles
}

/// Each parameter's role in a hook with these parameters.
pub fn roles(parameters: &[String], method: bool) -> Vec<Role> {
    let mut roles = Vec::with_capacity(parameters.len());
    let skip = usize::from(method && !parameters.is_empty());
    if skip == 1 {
        roles.push(Role::SelfObject);
    }
    let rest = &parameters[skip..];
    // A parameter named for the module, else the first that names no
    // activation; what comes before it is bound context.
    let module = rest
        .iter()
        .position(|p| is_module_name(p))
        .or_else(|| rest.iter().position(|p| !is_activation_name(p)));
    for (i, _) in rest.iter().enumerate() {
        roles.push(match module {
            Some(m) if i < m => Role::Context,
            Some(m) if i == m => Role::Module,
            _ => Role::Activation,
        });
    }
    roles
}

/// A hook's effects, judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judged {
    /// The effect on module state that decides it, if any: the best-ranked.
    pub evidence: Option<Effect>,
    /// Signs that are no weight work, each with where and why.
    pub discounted: Vec<String>,
    /// Every effect on module state it counts, best-ranked first (the
    /// first is the evidence), by its index in the summary's effects.
    pub counted: Vec<usize>,
}

/// Most discounts listed for one hook.
const MOST_DISCOUNTS: usize = 8;

/// Judges the summary of `hook` (a function of `module`) as a hook.
pub fn judge(summary: &Summary, module: &ModuleFacts, hook: &FunctionFact) -> Judged {
    let roles = roles_with_defaults(
        &hook.parameters,
        &hook.defaulted,
        hook.is_method && !hook.static_method,
    );
    judge_with(summary, module, hook, &roles)
}

/// What torch hands a hook registered with the tensor or autograd
/// registrar `registrar`: nothing to the engine's `queue_callback`, the
/// parameter itself (module state) to `register_post_accumulate_grad_hook`,
/// a gradient (or a sequence of them) to the others.
fn handed_by(registrar: &str) -> &'static [Role] {
    match registrar {
        "queue_callback" => &[],
        "register_post_accumulate_grad_hook" => &[Role::State],
        _ => &[Role::Activation],
    }
}

/// Roles in a hook registered with the tensor or autograd registrar
/// `registrar` (`t.register_hook(f)`, `queue_callback(f)`), never handed
/// the module: the last of its plain positional parameters take what
/// torch hands (see [`handed_by`]; with a `*args` that may land there
/// instead, read as an activation). The ones before are bound where it is
/// registered (`partial(release, module)`), read as a hook's are by
/// their names. `self` is the hook object; a parameter with a default
/// value is context.
pub fn tensor_hook_roles(hook: &FunctionFact, registrar: &str) -> Vec<Role> {
    let method = hook.is_method && !hook.static_method;
    let splat = |i: usize| hook.splats.get(i).copied().unwrap_or(false);
    let defaulted = |i: usize| hook.defaulted.get(i).copied().unwrap_or(false);
    let skip = usize::from(method && !hook.parameters.is_empty());
    // Torch passes by position only: a keyword-only parameter is bound
    // where it is registered (`partial(release, module=m)`).
    let positional = hook.keyword_only.unwrap_or(hook.parameters.len());
    let plain: Vec<usize> = (skip..positional.max(skip))
        .filter(|&i| !splat(i) && !defaulted(i))
        .collect();
    let handed = handed_by(registrar);
    let torch_hands = if (skip..hook.parameters.len()).any(splat) {
        0
    } else {
        handed.len().min(plain.len())
    };
    let (bound, from_torch) = plain.split_at(plain.len() - torch_hands);
    let bound_names: Vec<String> = bound.iter().map(|&i| hook.parameters[i].clone()).collect();
    let bound_roles = roles(&bound_names, false);
    (0..hook.parameters.len())
        .map(|i| {
            if i < skip {
                Role::SelfObject
            } else if let Some(at) = bound.iter().position(|&b| b == i) {
                bound_roles[at]
            } else if i >= positional && !splat(i) && !defaulted(i) {
                // Keyword-only, bound where it is registered: read by its
                // name as a bound parameter is.
                roles(std::slice::from_ref(&hook.parameters[i]), false)[0]
            } else if let Some(at) = from_torch.iter().position(|&t| t == i) {
                handed[handed.len() - from_torch.len() + at]
            } else if splat(i) {
                Role::Activation
            } else {
                Role::Context
            }
        })
        .collect()
}

/// A tensor or autograd hook's ordering of streams, syncs and waits are
/// no weight work by themselves: what they order may be the gradients it
/// is handed (a gradient reduction's wait). Its evidence is the best
/// counted effect that acts on module state otherwise; the rest become
/// discounts.
fn ordering_alone_is_no_weight_work(summary: &Summary, module: &ModuleFacts, judged: &mut Judged) {
    let (ordering, kept): (Vec<usize>, Vec<usize>) = judged
        .counted
        .iter()
        .partition(|&&i| summary.effects[i].kind.orders_or_waits());
    for i in ordering {
        let effect = &summary.effects[i];
        push_discount(
            &mut judged.discounted,
            format!(
                "{}: {} (a tensor hook's ordering or wait: what it orders may be the gradients)",
                discount_place(effect, module),
                effect.detail
            ),
        );
    }
    let evidence_kept = judged
        .evidence
        .as_ref()
        .is_some_and(|e| !e.kind.orders_or_waits());
    if !evidence_kept {
        judged.evidence = kept.first().map(|&i| summary.effects[i].clone());
    }
    judged.counted = kept;
}

/// Roles where a forward runs: `self` (or a forward wrapper's first
/// parameter, the module it is bound to) is the module; everything it is
/// handed is an activation.
pub fn forward_roles(function: &FunctionFact) -> Vec<Role> {
    (0..function.parameters.len())
        .map(|i| match i {
            0 if function.is_method && !function.static_method => Role::SelfObject,
            // A wrapper installed as a forward gets the module first only
            // where it is bound to it; `*args` holds the inputs.
            0 if !function.is_method && function.splats.first() != Some(&true) => Role::Module,
            _ => Role::Activation,
        })
        .collect()
}

/// Roles where nothing says how a function is called (a neighbour of a
/// step, asked whether it moves module state): a method's `self` is the
/// object; a plain function's parameter is the module only where its name
/// says so (`module`, `layer`), since it is no forward wrapper bound to one.
pub fn neighbour_roles(function: &FunctionFact) -> Vec<Role> {
    if function.is_method {
        return forward_roles(function);
    }
    function
        .parameters
        .iter()
        .map(|p| {
            if is_module_name(p) {
                Role::Module
            } else {
                Role::Activation
            }
        })
        .collect()
}

/// Where a discounted sign is, as its discount line starts: its line in
/// the hook's file (`module`), else its file and line.
pub(crate) fn discount_place(effect: &Effect, module: &ModuleFacts) -> String {
    if effect.path == module.path {
        format!("line {}", effect.line)
    } else {
        format!("{}:{}", effect.path.display(), effect.line)
    }
}

/// Judges `summary` as the effects of `hook`, whose parameters play `roles`.
pub fn judge_with(
    summary: &Summary,
    module: &ModuleFacts,
    hook: &FunctionFact,
    roles: &[Role],
) -> Judged {
    let mut judged = Judged::default();
    let mut counted: Vec<usize> = Vec::new();
    for (index, effect) in summary.effects.iter().enumerate() {
        // A sync next to timing or memory statistics: in the hook or a
        // function it calls directly where the hook measures (itself or
        // through what it calls directly), deeper where the function
        // holding it, one it calls directly or its caller does.
        let why = if matches!(effect.kind, Kind::Sync)
            && (effect.measured || (effect.length <= 1 && summary.measures))
        {
            Some(
                "synchronize() stands next to timing or memory statistics calls: it measures"
                    .to_owned(),
            )
        } else {
            why_not(effect, roles, module, hook)
        };
        match why {
            None => counted.push(index),
            Some(why) => {
                push_discount(
                    &mut judged.discounted,
                    format!(
                        "{}: {} ({why})",
                        discount_place(effect, module),
                        effect.detail
                    ),
                );
            }
        }
    }
    own_discounts(&hook.local, &mut judged.discounted);
    for discount in &summary.discounts {
        push_discount(&mut judged.discounted, discount.clone());
    }
    // Stable: of effects ranked alike, the first in the summary leads.
    counted.sort_by_key(|&i| {
        let e = &summary.effects[i];
        (e.length, e.kind.device_wide(), &e.path, e.line)
    });
    judged.evidence = counted.first().map(|&i| summary.effects[i].clone());
    judged.counted = counted;
    judged
}

/// The signs of a function's own body that are no effect, as discounts.
pub fn own_discounts(local: &LocalFacts, discounted: &mut Vec<String>) {
    for effect in &local.effects {
        if let Some(why) = &effect.discount {
            push_discount(discounted, format!("line {}: {why}", effect.line));
        }
    }
}

fn push_discount(discounted: &mut Vec<String>, line: String) {
    if discounted.len() < MOST_DISCOUNTS && !discounted.contains(&line) {
        discounted.push(line);
    }
}

/// Why an effect on `target` is no weight work for this hook, if it is not.
fn why_not(
    effect: &Effect,
    roles: &[Role],
    module: &ModuleFacts,
    hook: &FunctionFact,
) -> Option<String> {
    // A module moved (or unsharded) in place, whatever gave it.
    let in_place = effect.acts == Acts::Object;
    // RNG state is the generator's, not the module's: reported, never
    // weight work by itself (a randomized SVD forks the RNG).
    if effect.kind == Kind::Rng {
        return Some("RNG state, not module state".to_owned());
    }
    // A future's job is the object's own work unless its class keeps
    // there the future of a job that acts on module state
    // (`ProjectIndex::awaited_jobs` asks).
    if effect.acts == Acts::Job {
        return Some(
            "a future's wait: the job it stands for is no weight work unless the object keeps there the future of a job that is"
                .to_owned(),
        );
    }
    // What the object keeps is its own unless its class keeps copies of
    // module state there (`ProjectIndex::released_copies` asks).
    if effect.kind == Kind::Release {
        return Some(
            "the object's own data unless its class keeps gathered or moved weights there"
                .to_owned(),
        );
    }
    if let Target::Param { index, .. } = &effect.target
        && roles.get(*index as usize) == Some(&Role::Activation)
    {
        let name = hook
            .parameters
            .get(*index as usize)
            .map_or("?", String::as_str);
        let what = match effect.kind {
            Kind::Cast => "casting it to a dtype",
            Kind::Move => "moving it",
            _ => "acting on it",
        };
        return Some(format!(
            "`{name}` is a value the hook is handed, an activation: {what} is compute dynamo traces"
        ));
    }
    // `.to(d)` whose value is used moves in place only the module itself.
    if effect.acts == Acts::Rebound {
        let module_itself = matches!(
            &effect.target,
            Target::Param { index, attr: None, .. }
                if matches!(roles.get(*index as usize), Some(Role::Module | Role::Context | Role::ModuleLevel | Role::SelfObject))
        );
        if !module_itself {
            return Some(
                "a moved copy used as a value: only a module the hook was given moves in place, and this is none"
                    .to_owned(),
            );
        }
    }
    match &effect.target {
        Target::Device | Target::Handed | Target::Captured { .. } => None,
        Target::Global(name) if !in_place => Some(format!(
            "`{name}` is a module-level value, not the module the hook runs for"
        )),
        Target::Unknown if !in_place => Some(
            "acts on a value a call returned (a tensor made there), not on module state".to_owned(),
        ),
        Target::Global(_) | Target::Unknown => None,
        Target::Param {
            index,
            attr,
            judged,
            ..
        } => {
            let name = hook
                .parameters
                .get(*index as usize)
                .map_or("?", String::as_str);
            match roles.get(*index as usize) {
                Some(Role::SelfObject) => {
                    let (Some(attr), false) = (attr, judged) else {
                        return None;
                    };
                    let owns = hook
                        .self_class
                        .as_ref()
                        .and_then(|c| module.classes.get(c))
                        .is_some_and(|c| c.owns(attr));
                    owns.then(|| {
                        format!(
                            "`{name}.{attr}` is the hook object's own data: its class only stores values it makes there"
                        )
                    })
                }
                _ => None,
            }
        }
    }
}

/// The steps of a judged effect, and the sign, as the verdict shows them.
pub fn described(effect: &Effect) -> (Vec<Step>, String) {
    let steps = effect.steps();
    let mut detail = effect.detail.clone();
    if let Some(via) = &effect.via {
        detail.push_str(&format!(" ({} at line {})", via.text, via.line));
    }
    (steps, detail)
}

/// Whether an effect kind is weight work on its own (not only through what
/// it acts on).
pub fn device_wide(kind: Kind) -> bool {
    kind.device_wide()
}

/// The signs of `function`'s own body (a `def` or `lambda` of the file
/// `text`), judged as a hook as far as the body alone tells: an effect on
/// the module counts, one on an activation or on something made there is
/// discounted, and one on a hook object's attribute or a closure's capture
/// waits for the project (it is left out here).
pub fn own_signs(
    function: tree_sitter::Node<'_>,
    text: &str,
    imports: &std::collections::HashMap<String, String>,
) -> Vec<crate::analysis::evidence::Sign> {
    use crate::analysis::effects::value::Root;
    use crate::analysis::evidence::Sign;
    let nested = crate::syntax::enclosing_function(function).is_some();
    let method = function.kind() == "function_definition"
        && crate::syntax::enclosing_class(function).is_some_and(|class| {
            crate::syntax::enclosing_function(function)
                .is_none_or(|f| f.start_byte() < class.start_byte())
        });
    let outer_binds = |_: &str| nested;
    let context = crate::analysis::effects::local::Context {
        imports,
        outer_binds: &outer_binds,
        method,
        outer_self: None,
        keep_locals: false,
        class_method: false,
    };
    let parameters = crate::syntax::parameter_names(function, text);
    let roles = roles_with_defaults(
        &parameters,
        &crate::syntax::parameter_defaults(function),
        method,
    );
    let local = crate::analysis::effects::local::local_facts(function, text, &context);
    let mut signs = Vec::new();
    for effect in local.effects {
        let sign = |discounted: Option<String>| Sign {
            kind: effect.kind.name(),
            detail: effect.detail.clone(),
            line: effect.line,
            discounted,
        };
        let Some(val) = &effect.on else {
            let discount = match effect.kind {
                Kind::Rng => Some("RNG state, not module state".to_owned()),
                // A sync counts only where nothing the hook calls measures:
                // the project decides.
                Kind::Sync if effect.discount.is_none() => continue,
                _ => effect.discount.clone(),
            };
            signs.push(sign(discount));
            continue;
        };
        if effect.discount.is_some() {
            signs.push(sign(effect.discount.clone()));
            continue;
        }
        // What a call returned is judged through its summary: the project
        // decides.
        if effect.source.is_some() {
            continue;
        }
        match &val.root {
            Root::Param(i) => match roles.get(*i as usize) {
                Some(Role::Module | Role::Context | Role::ModuleLevel | Role::State) | None => {
                    signs.push(sign(None))
                }
                Some(Role::Activation) => {
                    let name = parameters.get(*i as usize).map_or("?", String::as_str);
                    let what = match effect.kind {
                        Kind::Cast => "casting it to a dtype",
                        Kind::Move => "moving it",
                        _ => "acting on it",
                    };
                    signs.push(sign(Some(format!(
                        "`{name}` is a value the hook is handed, an activation: {what} is compute dynamo traces"
                    ))));
                }
                Some(Role::SelfObject) if val.attr.is_none() => signs.push(sign(None)),
                Some(Role::SelfObject) => {}
            },
            Root::Global(_) | Root::Unknown if effect.acts == Acts::Object => {
                signs.push(sign(None));
            }
            Root::Global(name) => signs.push(sign(Some(format!(
                "`{name}` is a module-level value, not the module the hook runs for"
            )))),
            Root::Unknown | Root::Returned(_) | Root::Outer(_) => {}
            Root::Fresh => signs.push(sign(effect.discount.clone())),
        }
    }
    signs
}

impl crate::analysis::project::ProjectIndex<'_> {
    /// The hook at `line:column` of `path` judged from its summary; `None`
    /// when the project does not hold it.
    pub fn judge_hook(&self, path: &std::path::Path, line: usize, column: usize) -> Option<Judged> {
        let module = self.module(path)?;
        self.judge_function(module, line, column, None)
    }

    /// [`ProjectIndex::judge_hook`] of a hook registered with the tensor or
    /// autograd registrar `registrar` (see [`tensor_hook_roles`]).
    pub fn judge_tensor_hook(
        &self,
        path: &std::path::Path,
        line: usize,
        column: usize,
        registrar: &str,
    ) -> Option<Judged> {
        let module = self.module(path)?;
        self.judge_function(module, line, column, Some(registrar))
    }

    /// The lines where the function at `line:column` of `path` calls, in
    /// its own body, a function its authors fenced: traced, the hook breaks
    /// the graph at each of them.
    pub fn fenced_calls(&self, path: &std::path::Path, line: usize, column: usize) -> Vec<usize> {
        let Some(module) = self.module(path) else {
            return Vec::new();
        };
        let Some(function) = module.function_at(line, column) else {
            return Vec::new();
        };
        let caller = self.caller(&(std::sync::Arc::clone(&module), function));
        let mut lines: Vec<usize> = module.functions[function]
            .calls
            .iter()
            .enumerate()
            .filter(|(i, call)| {
                call.through.is_none()
                    && caller
                        .callees(*i)
                        .iter()
                        .any(|(m, f)| m.functions[*f].fenced.is_some())
            })
            .map(|(_, call)| call.line)
            .collect();
        lines.sort_unstable();
        lines
    }

    /// [`ProjectIndex::judge_hook`] of a function of `module`.
    fn judge_function(
        &self,
        module: std::sync::Arc<ModuleFacts>,
        line: usize,
        column: usize,
        tensor_hook: Option<&str>,
    ) -> Option<Judged> {
        let function = module.function_at(line, column)?;
        let summary = self.summary(&(std::sync::Arc::clone(&module), function));
        let fact = &module.functions[function];
        let mut judged = match tensor_hook {
            Some(registrar) => {
                judge_with(&summary, &module, fact, &tensor_hook_roles(fact, registrar))
            }
            None => judge(&summary, &module, fact),
        };
        self.released_copies(&module, function, &summary, &mut judged);
        self.awaited_jobs(&module, function, &summary, &mut judged);
        if tensor_hook.is_some() {
            ordering_alone_is_no_weight_work(&summary, &module, &mut judged);
        }
        // A step of a forward is judged in the forward's terms: its caller
        // binds its parameters, so what each is (a weight, an activation)
        // is known there. Its own judge reads its parameters as torch hands
        // a hook's (context, the module, then activations), which says
        // nothing of a function torch never calls (`Fn.forward(ctx, x,
        // weight, bias, module)` would make `x` context). So is an
        // attribute accessor of a swapped class, judged where it is found.
        let step = self
            .loaded
            .step_evidence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(
                crate::found::identity(&module.path),
                module.functions[function].start,
            ))
            .map(|(effect, _)| effect.clone());
        if let Some(step) = step {
            // The sign that decides is no discount.
            if step.path == module.path {
                let decided = format!("{}: ", discount_place(&step, &module));
                judged.discounted.retain(|d| !d.starts_with(&decided));
            }
            judged.evidence = Some(step);
        }
        Some(judged)
    }

    /// What covers the protocol method `method` found by use: where every
    /// function that calls it on hook objects is fenced in the source, or
    /// is a registered hook this run fences (it does offload work and no
    /// comment leaves it alone; not in a review, which may decline it),
    /// the method runs eagerly whenever they call it. The entry points in
    /// words (`_pre_forward_module_hook at pkg/hooks.py:12 (fenced by this
    /// run)`), or `None` where one of them leaves it traced.
    pub fn covering(&self, method: &str, reviewed: bool, known: &Discovered) -> Option<String> {
        let mut entries: std::collections::BTreeSet<&EntryPoint> =
            std::collections::BTreeSet::new();
        entries.extend(known.dispatchers.get(method).into_iter().flatten());
        entries.extend(
            self.dispatchers
                .get()
                .and_then(|d| d.get(method))
                .into_iter()
                .flatten(),
        );
        self.covering_entries(entries, reviewed)
    }

    /// What covers a function found only inside steps (on their evidence
    /// chains, `at` its `(path, line, column)`): where every such step is
    /// fenced in the source or by this run, the function runs eagerly
    /// whenever they call it. As [`ProjectIndex::covering`] says it.
    pub fn covering_inside(
        &self,
        at: &(std::path::PathBuf, usize, usize),
        reviewed: bool,
        known: &Discovered,
    ) -> Option<String> {
        let entries: std::collections::BTreeSet<&EntryPoint> =
            known.inside.get(at).into_iter().flatten().collect();
        self.covering_entries(entries, reviewed)
    }

    /// [`ProjectIndex::covering`] for the entry points found.
    fn covering_entries(
        &self,
        entries: std::collections::BTreeSet<&EntryPoint>,
        reviewed: bool,
    ) -> Option<String> {
        if entries.is_empty() {
            return None;
        }
        // A fence that leaves what the function calls to the compiler
        // (`recursive=False`) covers nothing.
        let recursive = |how: &str| !how.replace(' ', "").contains("recursive=False");
        let mut described: Vec<String> = Vec::new();
        let mut seen: std::collections::BTreeSet<(std::path::PathBuf, usize, usize)> =
            std::collections::BTreeSet::new();
        for entry in entries {
            if !seen.insert((
                crate::found::identity(&entry.path),
                entry.line,
                entry.column,
            )) {
                continue;
            }
            let module = self.load(&entry.path)?;
            let function = module.function_at(entry.line, entry.column)?;
            let fact = &module.functions[function];
            let how = match &fact.fenced {
                Some(how) if recursive(how) => format!("fenced by {how}"),
                Some(_) => return None,
                None if reviewed
                    || !entry.registered
                    || fact.left_alone
                    || !recursive(&self.vocabulary.decorator) =>
                {
                    return None;
                }
                None => {
                    self.judge_function(
                        std::sync::Arc::clone(&module),
                        entry.line,
                        entry.column,
                        None,
                    )?
                    .evidence?;
                    "fenced by this run".to_owned()
                }
            };
            described.push(format!(
                "{} at {}:{} ({how})",
                entry.qualname,
                entry.path.display(),
                entry.line
            ));
        }
        Some(described.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn roles_follow_where_torch_puts_each_value() {
        use Role::*;
        assert_eq!(
            roles(&names(&["module", "args"]), false),
            [Module, Activation]
        );
        assert_eq!(
            roles(&names(&["self", "module", "args", "output"]), true),
            [SelfObject, Module, Activation, Activation]
        );
        // `partial(hook, name)`: the bound name comes first.
        assert_eq!(
            roles(&names(&["name", "module", "inputs"]), false),
            [Context, Module, Activation]
        );
        assert_eq!(
            roles(&names(&["blocks", "i", "module", "grad_output"]), false),
            [Context, Context, Module, Activation]
        );
        assert_eq!(roles(&names(&["x"]), false), [Activation]);
    }
}
