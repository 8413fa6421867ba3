//! Hooks found in what runs inside a traced forward: the steps a module's
//! `forward` (or a forward replacement) calls around the compute it runs.
//!
//! A wrapper module (a sharded data-parallel block, a layer-offload
//! checkpoint wrapper) registers nothing: its own `forward` gathers or loads
//! the weights, runs the wrapped module and frees or offloads them again.
//! Dynamo traces that forward, and every call it makes. So each call of a
//! forward is looked at: a callee that runs compute (another forward, the
//! wrapped module, the original forward, a function handed to
//! `checkpoint`) is never fenced, since fencing it would leave the model
//! uncompiled, but its own calls are looked at the same way; any other
//! callee whose effect summary touches module state is a step of the
//! forward, a hook found by use (`discovered_by: forward-call`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::analysis::effects::judge::{Role, forward_roles, judge_with, neighbour_roles};
use crate::analysis::effects::local::Kind;
use crate::analysis::effects::record::{Effect, StepEvidence, Target};
use crate::analysis::effects::value::Root;
use crate::analysis::module_facts::{CallFact, Callee, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::Through;
use crate::found::{Discovered, Found};

/// What one root yields: the steps it calls and their evidence, and the
/// copy of its own weight it takes where it is a layer's forward (with what
/// makes its class one layer, where no torch layer is among its bases).
type RootFound = (
    Discovered,
    Vec<StepEvidence>,
    Option<(Effect, Option<String>)>,
);

/// How deep the compute a forward runs is followed for its steps
/// (`forward` -> the function handed to `checkpoint` -> ...).
const MOST_COMPUTE_DEPTH: usize = 4;

/// How many calls deep from a parameter subclass's `__torch_function__`
/// hook objects are looked for.
const MOST_DISPATCH_DEPTH: usize = 3;

/// A function whose calls are still to look at: it, how deep in the compute
/// the root runs it is, the root's call that leads there (its index and
/// the compute function it calls) where it is not the root, and the roles
/// its parameters play (what the forward hands it).
type Pending = (FunctionRef, usize, Option<(usize, String)>, Vec<Role>);

impl ProjectIndex<'_> {
    /// The steps every module forward of the project calls: each class's
    /// `forward` that its authors did not fence. The forwards are looked at
    /// in parallel and what each finds is kept in the modules' order, so
    /// the answer is the same on any number of threads.
    pub(super) fn forward_steps(&self, discovered: &mut Discovered) {
        use rayon::prelude::*;
        // In each module, in the order of its functions (its classes are a
        // map, whose order differs from run to run): the first reason
        // found for a step is the one kept.
        // Only where the class may be an `nn.Module` (see `lineage`): a
        // pipeline stage's or a runner's `forward` is no model's. That is
        // asked only of a forward whose steps found something, after the
        // steps: most forwards run compute alone, and a class's lineage can
        // take reading the modules of its bases.
        let mut roots: Vec<(&Arc<ModuleFacts>, usize, Option<&str>)> = Vec::new();
        for module in &self.modules {
            let mut methods: Vec<(usize, Option<&str>)> = Vec::new();
            for (name, class) in &module.classes {
                methods.extend(
                    class
                        .methods
                        .iter()
                        .copied()
                        .filter(|&method| {
                            let function = &module.functions[method];
                            function.name == "forward" && function.fenced.is_none()
                        })
                        .map(|method| (method, Some(name.as_str()))),
                );
            }
            // A function compiled where it is defined (`@torch.compile`) is
            // traced whatever its class: a runner's compiled `infer`.
            methods.extend(
                module
                    .functions
                    .iter()
                    .enumerate()
                    .filter_map(|(i, f)| (f.compiled && f.fenced.is_none()).then_some((i, None))),
            );
            methods.sort_unstable();
            methods.dedup_by_key(|(method, _)| *method);
            roots.extend(
                methods
                    .into_iter()
                    .map(|(method, class)| (module, method, class)),
            );
        }
        // Whether each forward of a class may copy its own weight in (see
        // `layer_transfer`), and the leaf layer its class derives from where
        // it may (one pass over their lineages, kept).
        // The first question on its own (in parallel: it may read the
        // modules of a class's bases), the memoised lineage walk only where
        // it says yes.
        let may_copy: Vec<bool> = roots
            .par_iter()
            .map(|&(module, method, class)| {
                class.is_some()
                    && !module.functions[method].compiled
                    && self.may_copy_own_weight(module, method)
            })
            .collect();
        let mut layers = crate::analysis::layer_transfer::LeafLayers::new();
        let copies: Vec<(bool, Option<String>)> = roots
            .iter()
            .zip(may_copy)
            .map(|(&(module, _, class), may_copy)| match class {
                Some(class) if may_copy => (true, self.leaf_layer_base(module, class, &mut layers)),
                _ => (false, None),
            })
            .collect();
        let found: Vec<RootFound> = roots
            .par_iter()
            .enumerate()
            .map(|(index, &(module, method, _))| {
                let function = &module.functions[method];
                let (how, root) = match function.compiled && function.name != "forward" {
                    true => ("compile-call", "compiled function"),
                    false => ("forward-call", "forward"),
                };
                let why = |call: &CallFact, via: Option<&str>| Found {
                    how,
                    detail: match via {
                        Some(via) => format!(
                            "called by {via}, which the {root} {} runs, at {}:{}",
                            function.qualname,
                            module.path.display(),
                            call.line
                        ),
                        None => format!(
                            "called by the {root} {} at {}:{}",
                            function.qualname,
                            module.path.display(),
                            call.line
                        ),
                    },
                    path: module.path.clone(),
                    line: call.line,
                    backward: None,
                };
                let mut found = Discovered::default();
                let mut evidence = Vec::new();
                // The copy of its own weight a leaf layer's forward takes;
                // in a file indexed for its leaf layers alone, only theirs.
                let (may_copy, leaf) = &copies[index];
                let own_layer = (*may_copy && leaf.is_none())
                    .then(|| self.layer_of_its_own(module, method, !module.layers_only))
                    .flatten();
                let copied = (*may_copy && (leaf.is_some() || own_layer.is_some()))
                    .then(|| self.own_weight_copied(module, method))
                    .flatten()
                    .map(|copied| (copied, own_layer));
                if module.layers_only {
                    return (found, evidence, copied);
                }
                let roles = match how {
                    // A compiled plain function is handed inputs, no module.
                    "compile-call" if !function.is_method => {
                        vec![Role::Activation; function.parameters.len()]
                    }
                    _ => forward_roles(function),
                };
                self.steps_of(module, method, roles, &why, &mut found, &mut evidence);
                (found, evidence, copied)
            })
            .collect();
        let mut known = crate::analysis::lineage::ModuleClasses::new();
        for (index, (&(module, method, class), (mut found, mut evidence, copied))) in
            roots.iter().zip(found).enumerate()
        {
            if let (Some(class), Some((copied, own_layer))) = (class, copied)
                && let Some(base) = copies[index].1.clone().or_else(|| {
                    // A module of the project's own that runs one op with its
                    // own weight, calling no submodule (but the forward of
                    // the one-op layer it derives from).
                    own_layer.filter(|_| self.may_be_module(module, class, &mut known))
                })
            {
                // The steps it calls run inside it: covered where it is
                // fenced, their evidence kept as theirs.
                let steps = std::mem::take(&mut found);
                for kept in &mut evidence {
                    kept.2 = true;
                }
                self.layer_forward(
                    module,
                    method,
                    (class, &base),
                    copied,
                    &mut found,
                    &mut evidence,
                );
                found.absorb_inside(steps, module, method);
            }
            if found == Discovered::default() && evidence.is_empty() {
                continue;
            }
            let compiled = module.functions[method].compiled;
            if let Some(class) = class
                && !compiled
                && !self.may_be_module(module, class, &mut known)
            {
                continue;
            }
            discovered.absorb(found);
            self.keep_step_evidence(evidence);
        }
    }

    /// Hook objects a parameter subclass dispatches to. Torch calls a
    /// tensor subclass's `__torch_function__` for every op on its
    /// instances, inside the traced forward; where the subclass is a
    /// parameter (`nn.Parameter` among its bases), what it calls runs
    /// around each op on the weight — a parameter-op hook manager looping
    /// over hook objects (`for hook in hooks: hook.pre_forward(params)`)
    /// makes that method a hook protocol, found by use (`dispatch`).
    pub(super) fn torch_function_dispatch(&self, discovered: &mut Discovered) {
        for module in &self.modules {
            let parameters = parameter_classes(module);
            let mut roots: Vec<usize> = module
                .classes
                .iter()
                .filter(|(name, _)| parameters.contains(name.as_str()))
                .flat_map(|(_, class)| class.methods.iter().copied())
                .filter(|&m| module.functions[m].name == "__torch_function__")
                .collect();
            roots.sort_unstable();
            for root in roots {
                // Its callees, and theirs, a few calls deep.
                let mut seen: HashSet<(std::path::PathBuf, usize)> = HashSet::new();
                let mut pending: Vec<(FunctionRef, usize)> = vec![((Arc::clone(module), root), 0)];
                while let Some((at, depth)) = pending.pop() {
                    if depth > 0 {
                        self.dispatch_of_hook(&at.0, at.1, false, discovered);
                    }
                    if depth == MOST_DISPATCH_DEPTH {
                        continue;
                    }
                    let caller = self.caller(&at);
                    for i in 0..at.0.functions[at.1].calls.len() {
                        for target in caller.callees(i) {
                            let key = (target.0.path.clone(), target.0.functions[target.1].start);
                            if seen.insert(key) {
                                pending.push((target.clone(), depth + 1));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Keeps the evidence of steps: the first found for each step, its own
    /// before the rest of a chain it was found inside.
    pub(super) fn keep_step_evidence(&self, evidence: Vec<StepEvidence>) {
        let mut kept = self
            .loaded
            .step_evidence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, effect, inside) in evidence {
            match kept.entry(key) {
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert((effect, inside));
                }
                std::collections::hash_map::Entry::Occupied(mut entry) => {
                    if entry.get().1 && !inside {
                        entry.insert((effect, inside));
                    }
                }
            }
        }
    }

    /// The steps `root` (a forward, or a forward replacement) calls: for each
    /// callee that is no compute and touches module state, `why(call, via)`
    /// (`via`: the compute function between, if any).
    pub(super) fn steps_of(
        &self,
        module: &Arc<ModuleFacts>,
        root: usize,
        roles: Vec<Role>,
        why: &dyn Fn(&CallFact, Option<&str>) -> Found,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let mut seen: HashSet<(std::path::PathBuf, usize)> = HashSet::new();
        seen.insert((module.path.clone(), module.functions[root].start));
        // The backwards of applied Functions kept as steps (an `.apply`
        // call reaches `backward` as a callee too, seen by then).
        let mut backwards_kept: HashSet<(std::path::PathBuf, usize)> = HashSet::new();
        // (function, its depth, the first call of the root on the way)
        let mut pending: Vec<Pending> = vec![((Arc::clone(module), root), 0, None, roles)];
        // The roles of the parameters of every function looked at, for the
        // closures they hold.
        let mut frames: HashMap<(std::path::PathBuf, usize), Vec<Role>> = HashMap::new();
        while let Some((at, depth, via, roles)) = pending.pop() {
            let function = &at.0.functions[at.1];
            let caller = self.caller(&at);
            frames.insert((at.0.path.clone(), function.start), roles.clone());
            for (i, call) in function.calls.iter().enumerate() {
                if matches!(call.through, Some(Through::Replayed { .. }))
                    || handed_for_backward(&at.0, call)
                {
                    continue;
                }
                // `checkpoint(fn, *args)` runs `fn` now: compute whose own
                // calls are followed.
                for handed in self.checkpointed(&at, call) {
                    if depth < MOST_COMPUTE_DEPTH
                        && seen.insert((handed.0.path.clone(), handed.0.functions[handed.1].start))
                    {
                        let name = handed.0.functions[handed.1].qualname.clone();
                        let via = via.clone().or(Some((i, name)));
                        let roles = self.roles_at_call(&caller, i, &handed, &roles, true);
                        pending.push((handed, depth + 1, via, roles));
                    }
                }
                // A custom autograd Function applied here: its `forward` and
                // `backward` are the fence point where they touch the module
                // state they are handed (one layer's compute runs eagerly).
                let applied =
                    matches!(&call.through, Some(Through::HandedTo(to)) if to.ends_with(".apply"));
                // `with Cls(...):` runs `Cls.__enter__` before the block and
                // `Cls.__exit__` after it: steps, never compute.
                let entered = self.entered_methods(&at, call);
                // A step found: its evidence kept, and named from the
                // root's call that leads here.
                let keep = |step: &FunctionRef,
                            evidence: crate::analysis::effects::record::Effect,
                            others: &[crate::analysis::effects::record::Effect],
                            discovered: &mut Discovered,
                            evidence_found: &mut Vec<StepEvidence>| {
                    evidence_found.push((
                        (
                            crate::found::identity(&step.0.path),
                            step.0.functions[step.1].start,
                        ),
                        evidence,
                        false,
                    ));
                    let found = match &via {
                        Some((first, name)) => {
                            why(&module.functions[root].calls[*first], Some(name))
                        }
                        None => why(call, None),
                    };
                    discovered.add_function(&step.0, step.1, &found);
                    self.inside_step(step, others, discovered, evidence_found);
                };
                let called = caller.callees(i).iter().map(|t| (t, false));
                for (target, entered) in called.chain(entered.iter().map(|t| (t, true))) {
                    // Its `backward` runs when autograd reaches the
                    // Function's output, in the graph of that forward;
                    // asked at every application (what each hands the
                    // forward differs), before the forward is skipped as
                    // seen.
                    if applied
                        && let Some((backward, evidence)) =
                            self.applied_backward(&caller, i, target, &roles)
                        && backwards_kept.insert((
                            backward.0.path.clone(),
                            backward.0.functions[backward.1].start,
                        ))
                    {
                        keep(&backward, evidence, &[], discovered, evidence_found);
                    }
                    let fact = &target.0.functions[target.1];
                    if !seen.insert((target.0.path.clone(), fact.start)) {
                        continue;
                    }
                    if !applied && !entered && self.runs_compute(target) {
                        if depth < MOST_COMPUTE_DEPTH {
                            let via = via.clone().or_else(|| Some((i, fact.qualname.clone())));
                            let roles = self.roles_at_call(&caller, i, target, &roles, false);
                            pending.push((
                                (Arc::clone(&target.0), target.1),
                                depth + 1,
                                via,
                                roles,
                            ));
                        }
                        continue;
                    }
                    // What the call does to the forward's own values: its
                    // module state, not the activations it hands over.
                    let mut mapped = self.effects_at_call(&caller, i, target);
                    if applied {
                        // A Function applied to activations is compute: only
                        // what it does to the module state it is handed (a
                        // weight) makes it the fence point.
                        // Waiting on a handle kept in a value handed down
                        // from module level (an element of a dict of
                        // handles; not an attribute of a module held there)
                        // is no weight work of its own: the handle may be
                        // the gradients' communication (an all-reduce of
                        // `grad_input` another Function's `backward`
                        // launched).
                        // Nor is waiting on a handle a closure of the
                        // callee captured (a collective's the callee ran
                        // on what it was handed) unless it is kept on an
                        // object.
                        mapped.effects.retain(|e| match &e.target {
                            Target::Param { index, attr, .. } => {
                                e.kind != Kind::Wait
                                    || attr.is_some()
                                    || roles.get(*index as usize) != Some(&Role::ModuleLevel)
                            }
                            Target::Captured { attr, .. } => e.kind != Kind::Wait || attr.is_some(),
                            _ => false,
                        });
                    }
                    // A closure's capture of an activation a function
                    // around it was handed is an activation too.
                    mapped.effects.retain(|e| match &e.target {
                        Target::Captured {
                            function, index, ..
                        } => {
                            frames
                                .get(function)
                                .and_then(|roles| roles.get(*index as usize))
                                != Some(&Role::Activation)
                        }
                        _ => true,
                    });
                    if mapped.effects.is_empty() {
                        continue;
                    }
                    let judged = judge_with(&mapped, &at.0, function, &roles);
                    let Some(mut evidence) = judged.evidence else {
                        // A wait on a future the step's object keeps, for a
                        // job that acts on module state (see
                        // `ProjectIndex::awaited_jobs`): its own evidence.
                        let own = self.summary(target);
                        if let Some(evidence) = self.awaited_job(&target.0, target.1, &own) {
                            keep(target, evidence, &[], discovered, evidence_found);
                        }
                        continue;
                    };
                    // Only ordering streams or waiting for the device: weight
                    // work where the step's class (or file) moves module
                    // state elsewhere; compute overlapping communication
                    // orders streams too.
                    if evidence.target == Target::Device
                        && !self
                            .moves_state_nearby(target, &evidence, &mapped, &at.0, function, &roles)
                    {
                        continue;
                    }
                    // Named from the step on: the chain past its call.
                    let from_step = |evidence: &mut crate::analysis::effects::record::Effect| {
                        if let Some(first) = evidence.chain.take() {
                            evidence.chain = first.next.clone();
                            evidence.length = evidence.length.saturating_sub(1);
                        }
                    };
                    from_step(&mut evidence);
                    let mut others: Vec<_> = judged.counted[1..]
                        .iter()
                        .map(|&i| mapped.effects[i].clone())
                        .collect();
                    others.iter_mut().for_each(from_step);
                    keep(target, evidence, &others, discovered, evidence_found);
                }
            }
        }
    }

    /// The `backward` of the custom autograd Function whose `forward` is
    /// applied at `caller`'s call `call`, with its evidence, where it acts
    /// on what its `ctx` holds and the forward is handed module state to
    /// keep there (`ctx.model = model`): the weight work of that backward
    /// runs in the graph of the forward that applied it. What it does to
    /// the gradients it is handed is compute.
    fn applied_backward(
        &self,
        caller: &crate::analysis::effects::summary::Caller,
        call: usize,
        forward: &FunctionRef,
        roles: &[Role],
    ) -> Option<(FunctionRef, crate::analysis::effects::record::Effect)> {
        let fact = &forward.0.functions[forward.1];
        if fact.name != "forward" {
            return None;
        }
        let class = forward.0.classes.get(fact.self_class.as_ref()?)?;
        let backward = class
            .methods
            .iter()
            .copied()
            .find(|&m| forward.0.functions[m].name == "backward")?;
        let handed = self.roles_at_call(caller, call, forward, roles, false);
        if !handed
            .iter()
            .skip(1)
            .any(|r| matches!(r, Role::Module | Role::State | Role::SelfObject))
        {
            return None;
        }
        // The attributes of `ctx` the forward gives module state it is
        // handed (`ctx.model = model`).
        let held_attrs: Vec<&str> = fact
            .local
            .first_param_stores
            .iter()
            .filter(|(_, vals)| {
                vals.iter().any(|v| match v.root {
                    Root::Param(j) if j > 0 => matches!(
                        handed.get(j as usize),
                        Some(Role::Module | Role::State | Role::SelfObject)
                    ),
                    _ => false,
                })
            })
            .map(|(attr, _)| &**attr)
            .collect();
        if held_attrs.is_empty() {
            return None;
        }
        let backward = (Arc::clone(&forward.0), backward);
        let evidence = self.judged_backward(&backward, &|e| {
            matches!(&e.target, Target::Param { index: 0, attr: Some(attr), .. }
                if held_attrs.contains(&&**attr))
                // Ordering streams or waiting alone is no weight work of
                // its own there: what it orders may be the gradients.
                && !e.kind.orders_or_waits()
        })?;
        Some((backward, evidence))
    }

    /// Whether a step whose evidence only orders streams or waits for the
    /// device belongs with weight work: some effect it has is on module
    /// state, or a method of its class (for a function, one of its file)
    /// moves, casts or frees module state — `self`'s attributes or what it
    /// is handed as the module (a plain function's parameter only where its
    /// name says so: nothing binds it to a module), its other parameters
    /// read as activations, what calls return left out.
    fn moves_state_nearby(
        &self,
        step: &FunctionRef,
        evidence: &crate::analysis::effects::record::Effect,
        mapped: &crate::analysis::effects::record::Summary,
        module: &ModuleFacts,
        function: &crate::analysis::module_facts::FunctionFact,
        roles: &[Role],
    ) -> bool {
        let state_only = crate::analysis::effects::record::Summary {
            effects: mapped
                .effects
                .iter()
                .filter(|e| e.target != Target::Device)
                .cloned()
                .collect(),
            ..Default::default()
        };
        if judge_with(&state_only, module, function, roles)
            .evidence
            .is_some()
        {
            return true;
        }
        // Where the sign is: the step, or the function its chain ends in
        // when that lies in another file (a cache's stream, a library's
        // event), whose own class then answers.
        let mut owner = step.clone();
        let mut link = evidence.chain.as_deref();
        let mut last = None;
        while let Some(current) = link {
            last = Some(&current.step);
            link = current.next.as_deref();
        }
        if let Some(last) = last
            && last.path != step.0.path
        {
            let Some(module) = self.load(&last.path) else {
                return false;
            };
            let Some(index) = module
                .functions
                .iter()
                .position(|f| f.qualname == last.qualname && f.line == last.line)
            else {
                return false;
            };
            owner = (module, index);
        }
        let (file, index) = &owner;
        let fact = &file.functions[*index];
        let neighbours: Vec<usize> = match fact.self_class.as_deref() {
            Some(class) => file
                .classes
                .get(class)
                .map(|c| c.methods.clone())
                .unwrap_or_default(),
            None => (0..file.functions.len()).collect(),
        };
        neighbours.into_iter().any(|i| {
            let neighbour = &file.functions[i];
            // What a constructor does to the weights (a cast when they are
            // made) runs before any forward: no transfer of its is pending
            // for a stream to order.
            if matches!(neighbour.name.as_str(), "__init__" | "__post_init__") {
                return false;
            }
            let summary = self.summary(&(Arc::clone(file), i));
            let roles = neighbour_roles(neighbour);
            // What it holds: `self`'s attributes, what it is handed as the
            // module, a module-level value; not what a call it cannot see
            // into returned (a tensor made by compute).
            let state_only = crate::analysis::effects::record::Summary {
                effects: summary
                    .effects
                    .iter()
                    .filter(|e| match &e.target {
                        Target::Param { index, .. } => matches!(
                            roles.get(usize::from(*index)),
                            Some(Role::SelfObject | Role::Module)
                        ),
                        Target::Captured { .. } | Target::Global(_) => true,
                        Target::Unknown | Target::Handed | Target::Device => false,
                    })
                    .cloned()
                    .collect(),
                ..Default::default()
            };
            judge_with(&state_only, file, neighbour, &roles)
                .evidence
                .is_some()
        })
    }

    /// `__enter__` and `__exit__` of the class a call constructs where the
    /// function enters what it makes (`with GatheredParameters(ps):`).
    fn entered_methods(&self, at: &FunctionRef, call: &CallFact) -> Vec<FunctionRef> {
        let function = &at.0.functions[at.1];
        if call.through.is_some()
            || call.opaque
            || !function
                .local
                .call_at(call.start)
                .is_some_and(|values| values.entered)
        {
            return Vec::new();
        }
        let Some(class) = call.constructed_class() else {
            return Vec::new();
        };
        self.classes_named(&at.0, &class)
            .into_iter()
            .flat_map(|(module, class)| {
                ["__enter__", "__exit__"]
                    .into_iter()
                    .flat_map(|method| self.method_of(&module, &class, method, &mut HashSet::new()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The function a call of `checkpoint` hands over as its first
    /// argument (`checkpoint(self._run, x)`), which it runs now.
    fn checkpointed(&self, at: &FunctionRef, call: &CallFact) -> Vec<FunctionRef> {
        let name = match &call.callee {
            Callee::Name(name) => name.as_str(),
            Callee::Method { method, .. } => method.as_str(),
        };
        if name != "checkpoint" {
            return Vec::new();
        }
        let Some(first) = call.first_argument.as_deref() else {
            return Vec::new();
        };
        let callee = match first.split_once('.') {
            Some((receiver, method)) if !method.contains('.') => Callee::Method {
                receiver: Some(receiver.to_owned()),
                method: method.to_owned(),
            },
            None if !first.starts_with('*') => Callee::Name(first.to_owned()),
            _ => return Vec::new(),
        };
        let handed = CallFact {
            callee,
            through: None,
            opaque: false,
            ..call.clone()
        };
        self.targets(&at.0, at.1, &handed).to_vec()
    }

    /// Whether `function` runs a model's compute: it is a forward (or
    /// `__call__`), or it calls one — an original forward, a submodule held
    /// in an attribute (`self.module(...)`), a function it is handed, or a
    /// function handed to `checkpoint`.
    pub(super) fn runs_compute(&self, function: &FunctionRef) -> bool {
        let (module, index) = function;
        let module: &ModuleFacts = module;
        let fact = &module.functions[*index];
        crate::analysis::discovery::is_forward_name(&fact.name)
            || fact.name == "__call__"
            || crate::analysis::compute::calls_compute(module, fact)
    }
}

/// The classes of `module` that are parameters: `nn.Parameter` (any
/// spelling ending in `Parameter`) among their bases, directly or through a
/// base class of the same module. Once per module, in time linear in its
/// classes and bases.
fn parameter_classes(module: &ModuleFacts) -> HashSet<&str> {
    crate::analysis::file_facts::subclasses_of(
        module
            .classes
            .iter()
            .map(|(name, class)| (name.as_str(), class.bases.as_slice())),
        &["Parameter"],
    )
}

/// Whether `call` hands a function to a tensor or autograd registrar
/// registered here (`out.register_hook(f)`, `queue_callback(f)`): it runs
/// at backward time, a backward hook its registration lists, never a step
/// of the forward that hands it over.
fn handed_for_backward(module: &ModuleFacts, call: &CallFact) -> bool {
    let Some(Through::HandedTo(to)) = &call.through else {
        return false;
    };
    let registrar = to.rsplit('.').next().unwrap_or(to);
    module
        .registrations
        .iter()
        .any(|r| r.backward && r.line == call.line && r.registrar == registrar)
}

#[cfg(test)]
mod tests {
    use super::parameter_classes;

    #[test]
    fn parameter_classes_follow_bases_of_the_module_through_cycles() {
        let mut text = String::from("import torch\n\n\nclass P0(torch.nn.Parameter):\n    pass\n");
        for i in 1..2_000 {
            text.push_str(
                &format!("\n\nclass P{i}(P{})\n    pass\n", i - 1).replace(")\n", "):\n"),
            );
        }
        text.push_str("\n\nclass A(B):\n    pass\n\n\nclass B(A):\n    pass\n");
        text.push_str("\n\nclass Loop(Loop, P5):\n    pass\n");
        let tree = crate::parse::parse(&text).expect("parses");
        let module = crate::analysis::module_facts::ModuleFacts::build(
            std::path::Path::new("m.py"),
            tree.root_node(),
            &text,
            &crate::analysis::vocabulary::Vocabulary::default(),
            None,
            None,
            &crate::analysis::listings::Listings::default(),
        );
        let found = parameter_classes(&module);
        assert!((0..2_000).all(|i| found.contains(format!("P{i}").as_str())));
        assert!(found.contains("Loop"));
        assert!(!found.contains("A") && !found.contains("B"));
        assert_eq!(found.len(), 2_001);
    }
}
