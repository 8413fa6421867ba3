//! One summary per function: its effects, directly or through what it
//! calls, each with the chain of calls that shows it, computed once over the
//! project's call graph bottom-up by strongly connected components (Tarjan's
//! algorithm, iterative, so a deep chain costs no stack), with recursion and
//! mutual recursion across files solved as a fixpoint inside the component.
//! A hook's evidence is a look-up of its summary (see [`super::judge`]); a
//! callee reached from many hooks is summarised once per run.
//!
//! Effects are named by what they act on in the summarised function's own
//! terms ([`Target`]): "moves the parameters of its 1st argument". A caller
//! turns that into its own terms through what it passes there; what it
//! passes made here (a tensor it creates) drops the effect, and an effect
//! on `self.<attr>` of a class that only ever stores its own data there (an
//! observer's running statistics) is dropped where the class is known.

use std::sync::Arc;

use crate::analysis::effects::judge::Role;
use crate::analysis::effects::local::CallValues;
use crate::analysis::effects::record::{BestEffects, ListFacts, SummaryMemo};
pub use crate::analysis::effects::record::{Effect, FnKey, Link, Summaries, Summary, Target};
use crate::analysis::effects::resolve::{Node, Resolver, judge_attribute};
use crate::analysis::effects::value::Shape;
use crate::analysis::function_facts::Callee;
use crate::analysis::project::{CallTargets, FunctionRef, ProjectIndex, Targets};
use crate::analysis::reached::Step;
use crate::analysis::{FastMap, FastSet};

/// Most rounds of the fixpoint inside one component.
const MOST_ROUNDS: usize = 64;

/// A target list's identity: calls that share the list share the address.
fn list_id(list: &Targets) -> usize {
    Arc::as_ptr(list).cast::<()>() as usize
}

/// The distinct target lists of a function's calls, each once.
fn distinct_lists(callees: &[Targets]) -> impl Iterator<Item = &Targets> {
    let mut seen: FastSet<usize> = FastSet::default();
    callees
        .iter()
        .filter(move |list| seen.insert(list_id(list)))
}

fn key_of(function: &FunctionRef) -> FnKey {
    (
        function.0.path.clone(),
        function.0.functions[function.1].start,
    )
}

impl ProjectIndex<'_> {
    /// The summary of `function`, computed with every function it reaches
    /// that is not summarised yet.
    pub fn summary(&self, function: &FunctionRef) -> Arc<Summary> {
        let summaries = &self.loaded.summaries;
        if let Some(done) = summaries.lock().done.get(&key_of(function)) {
            return Arc::clone(done);
        }
        self.resolve_reachable(function);
        let mut memo = summaries.lock();
        if let Some(done) = memo.done.get(&key_of(function)) {
            return Arc::clone(done);
        }
        self.tarjan(function, &mut memo);
        memo.done
            .get(&key_of(function))
            .cloned()
            .unwrap_or_default()
    }

    /// Resolves the calls of the functions `root` reaches that are not
    /// summarised yet, before the summaries are locked: threads that
    /// summarise at once (the forwards' steps) then resolve calls, and read
    /// modules on demand, in parallel, and the search under the lock finds
    /// the targets resolved. Each function and target list is taken by one
    /// thread; a function another thread took may still be unresolved when
    /// the search reaches it, which then resolves it itself. Nothing here
    /// changes an answer: the targets are the same whoever resolves them.
    pub(super) fn resolve_reachable(&self, root: &FunctionRef) {
        let take = |key: (usize, usize)| {
            self.resolved_ahead
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key)
        };
        let mut pending: Vec<FunctionRef> = vec![root.clone()];
        while let Some(function) = pending.pop() {
            if !take((Arc::as_ptr(&function.0) as usize, function.1))
                || self.loaded.summaries.known_now(&key_of(&function))
            {
                continue;
            }
            let Caller(node) = self.caller(&function);
            for list in node.callees.iter() {
                if take((list_id(list), usize::MAX)) {
                    pending.extend(list.iter().cloned());
                }
            }
        }
    }

    /// Tarjan's strongly connected components from `root`, iteratively;
    /// each component is summarised as soon as it is complete (callees
    /// first).
    fn tarjan(&self, root: &FunctionRef, memo: &mut SummaryMemo) {
        /// A vertex of the search: a function, or one of the target lists
        /// its calls share. A list is a vertex of its own so that it is
        /// walked once per search, whoever else calls through it (n hooks
        /// replaying one table of n functions are n + n edges, not n × n).
        enum Vertex {
            Function(Node),
            List(Targets),
        }
        struct Frame {
            vertex: usize,
            /// The next of its successors to look at.
            next: usize,
        }
        #[derive(Default)]
        struct Search {
            vertices: Vec<Vertex>,
            functions: FastMap<FnKey, usize>,
            lists: FastMap<usize, usize>,
            lowlink: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<usize>,
        }
        impl Search {
            fn open(&mut self, vertex: Vertex) -> usize {
                let id = self.vertices.len();
                match &vertex {
                    Vertex::Function(node) => self.functions.insert(key_of(&node.function), id),
                    Vertex::List(list) => self.lists.insert(list_id(list), id),
                };
                self.vertices.push(vertex);
                self.lowlink.push(id);
                self.on_stack.push(true);
                self.stack.push(id);
                id
            }
        }
        /// An edge from `vertex` to `seen`, a vertex opened already: on the
        /// stack, it is in `vertex`'s component or one around it.
        fn back_edge(lowlink: &mut [usize], on_stack: &[bool], vertex: usize, seen: usize) {
            if on_stack[seen] {
                lowlink[vertex] = lowlink[vertex].min(seen);
            }
        }
        let mut search = Search::default();
        let Caller(node) = self.caller(root);
        let first = search.open(Vertex::Function(node));
        let mut frames: Vec<Frame> = vec![Frame {
            vertex: first,
            next: 0,
        }];
        while let Some(frame) = frames.last_mut() {
            let vertex = frame.vertex;
            // The next successor of this vertex not summarised yet.
            let mut opened = None;
            match &search.vertices[vertex] {
                Vertex::Function(node) => {
                    while let Some(list) = node.callees.get(frame.next) {
                        frame.next += 1;
                        memo.edges += 1;
                        let id = list_id(list);
                        // A list whose facts are final leads only to
                        // functions summarised already.
                        if memo.lists.contains_key(&id) {
                            continue;
                        }
                        if let Some(&seen) = search.lists.get(&id) {
                            back_edge(&mut search.lowlink, &search.on_stack, vertex, seen);
                        } else {
                            opened = Some(Vertex::List(Arc::clone(list)));
                            break;
                        }
                    }
                }
                Vertex::List(list) => {
                    while let Some(target) = list.get(frame.next) {
                        frame.next += 1;
                        memo.edges += 1;
                        let key = key_of(target);
                        if memo.done.contains_key(&key) {
                            continue;
                        }
                        if let Some(&seen) = search.functions.get(&key) {
                            back_edge(&mut search.lowlink, &search.on_stack, vertex, seen);
                        } else {
                            let Caller(node) = self.caller(target);
                            opened = Some(Vertex::Function(node));
                            break;
                        }
                    }
                }
            }
            if let Some(successor) = opened {
                let id = search.open(successor);
                frames.push(Frame {
                    vertex: id,
                    next: 0,
                });
                continue;
            }
            // Every successor looked at: close the vertex.
            frames.pop();
            if let Some(parent) = frames.last() {
                search.lowlink[parent.vertex] =
                    search.lowlink[parent.vertex].min(search.lowlink[vertex]);
            }
            if search.lowlink[vertex] == vertex {
                let mut component = Vec::new();
                while let Some(member) = search.stack.pop() {
                    search.on_stack[member] = false;
                    if let Vertex::Function(node) = &search.vertices[member] {
                        component.push(node);
                    }
                    if member == vertex {
                        break;
                    }
                }
                if !component.is_empty() {
                    self.summarise_component(&component, memo);
                }
            }
        }
    }

    /// Summarises one component: once if it is a single function that does
    /// not call itself, else to a fixpoint.
    fn summarise_component(&self, component: &[&Node], memo: &mut SummaryMemo) {
        let mut members: Vec<&Node> = component.to_vec();
        members.sort_by_key(|node| key_of(&node.function));
        let keys: Vec<FnKey> = members.iter().map(|node| key_of(&node.function)).collect();
        let mut working: FastMap<FnKey, Arc<Summary>> = keys
            .iter()
            .map(|k| (k.clone(), Arc::new(Summary::default())))
            .collect();
        let recursive = members.len() > 1
            || distinct_lists(&members[0].callees)
                .flat_map(|list| list.iter())
                .any(|t| key_of(t) == keys[0]);
        // What each target list tells while no working summary changes
        // (members that share a list, as hooks replaying one table each
        // other do, ask it once per change, not once each). Outside a
        // recursive component every callee's summary is final, so it is
        // kept for every later caller.
        let mut current: FastMap<usize, ListFacts> = FastMap::default();
        for _ in 0..MOST_ROUNDS {
            let mut changed = false;
            for (&member, key) in members.iter().zip(&keys) {
                let summary = self.summarise(
                    member,
                    |callee| {
                        let key = key_of(callee);
                        working.get(&key).or_else(|| memo.done.get(&key)).cloned()
                    },
                    (!recursive).then_some(&memo.lists),
                    &mut current,
                );
                if *working[key] != summary {
                    working.insert(key.clone(), Arc::new(summary));
                    changed = true;
                    if recursive {
                        current.clear();
                    }
                }
            }
            if !changed || !recursive {
                break;
            }
        }
        for key in keys {
            if let Some(summary) = working.remove(&key) {
                memo.done.insert(key, summary);
                memo.computed += 1;
            }
        }
        if !recursive {
            for (id, facts) in current {
                memo.lists.entry(id).or_insert(facts);
            }
        }
    }

    /// One function's summary from its own effects and its callees'.
    fn summarise(
        &self,
        node: &Node,
        summary_of: impl Fn(&FunctionRef) -> Option<Arc<Summary>>,
        final_lists: Option<&FastMap<usize, ListFacts>>,
        current_lists: &mut FastMap<usize, ListFacts>,
    ) -> Summary {
        let resolver = Resolver::of(self, node, &summary_of);
        let (module, function) = (resolver.module, resolver.function);
        let mut effects = BestEffects::default();
        let mut discounts: Vec<String> = Vec::new();
        // Effects on `self.<attr>` of a class that only stores its own data
        // there, set aside (after the other discounts).
        let mut own_data: Vec<String> = Vec::new();
        let mut keep = |mut effect: Effect, effects: &mut BestEffects| {
            if judge_attribute(&mut effect.target, module, function) {
                effects.add(effect);
            } else if effect.chain.is_none() {
                own_data.push(format!(
                    "line {}: {} (the object's own data: its class only stores values it makes there)",
                    effect.line, effect.detail
                ));
            }
        };
        // The call starting at `start` hands back new storage.
        let storage_returned_at = |start: usize| {
            function
                .calls
                .iter()
                .zip(node.callees.iter())
                .filter(|(call, _)| call.start == start && call.through.is_none())
                .flat_map(|(_, callees)| callees.iter())
                .any(|callee| summary_of(callee).is_some_and(|s| s.returns_storage))
        };
        for local in &function.local.effects {
            if local.discount.is_some() {
                continue;
            }
            // New storage a call returned: an effect only where the call
            // hands back storage held somewhere (not a value it computes);
            // empty storage it makes frees what it is stored into.
            let mut kind = local.kind;
            let mut detail = local.detail.clone();
            if let Some(start) = local.source {
                if storage_returned_at(start) {
                    kind = crate::analysis::effects::local::Kind::Storage;
                    detail = format!(
                        "frees or allocates the storage of {} with the new storage a call returns",
                        local
                            .detail
                            .strip_prefix("points at other storage: ")
                            .unwrap_or(&local.detail)
                    );
                } else {
                    let source = resolver.targets(
                        &crate::analysis::effects::value::Val::returned(start, None),
                        0,
                    );
                    if !source
                        .iter()
                        .any(|t| !matches!(t, Target::Unknown | Target::Global(_) | Target::Device))
                    {
                        discounts.push(format!(
                            "line {}: {} (the call's value is computed, no storage held elsewhere)",
                            local.line, local.detail
                        ));
                        continue;
                    }
                }
            }
            let targets = match &local.on {
                None => vec![Target::Device],
                Some(val) => resolver.targets(val, 0),
            };
            for target in targets {
                keep(
                    Effect::own(local, kind, target, detail.clone(), &module.path),
                    &mut effects,
                );
            }
        }
        // Copies taken to a device for one use: their own list.
        let mut staged = BestEffects::default();
        for local in &function.local.staged {
            let Some(val) = &local.on else { continue };
            for mut target in resolver.targets(val, 0) {
                if matches!(target, Target::Param { .. })
                    && judge_attribute(&mut target, module, function)
                {
                    staged.add(Effect::own(
                        local,
                        local.kind,
                        target,
                        local.detail.clone(),
                        &module.path,
                    ));
                }
            }
        }
        let mut measures = false;
        let mut repeated: FastSet<(usize, &Callee, CallValues)> = FastSet::default();
        for (i, (call, callees)) in function.calls.iter().zip(node.callees.iter()).enumerate() {
            // Whether the target list holds a callee with effects: once per
            // list (calls that share a list ask the same question).
            let id = list_id(callees);
            let list = match final_lists.and_then(|lists| lists.get(&id)) {
                Some(known) => known,
                None => current_lists.entry(id).or_insert_with(|| {
                    let (mut quiet, mut measures) = (true, false);
                    for callee in callees.iter() {
                        if let Some(summary) = summary_of(callee) {
                            measures |= callee.0.functions[callee.1].local.measures;
                            quiet &= summary.effects.is_empty() && summary.staged.is_empty();
                        }
                    }
                    ListFacts {
                        _list: Arc::clone(callees),
                        quiet,
                        measures,
                    }
                }),
            };
            measures |= list.measures;
            if list.quiet {
                continue;
            }
            // A call that reaches the same functions, by the same callee
            // and with the same arguments, as an earlier one adds nothing:
            // its effects have the same kinds, targets and ranks, and the
            // first of equals is kept (`ctx.rel(m)` after each of many
            // `ctx.rel = r`).
            if call.through.is_none() && call.constructed_class().is_none() {
                let mut values = function
                    .local
                    .call_at(call.start)
                    .cloned()
                    .unwrap_or_default();
                values.start = 0;
                if !repeated.insert((list_id(callees), &call.callee, values)) {
                    continue;
                }
            }
            for callee in callees.iter() {
                let Some(summary) = summary_of(callee) else {
                    continue;
                };
                measures |= callee.0.functions[callee.1].local.measures;
                if summary.effects.is_empty() && summary.staged.is_empty() {
                    continue;
                }
                let callee_fact = &callee.0.functions[callee.1];
                // Calling a generator runs none of its body; entering or
                // iterating what it returns does.
                if callee_fact.local.generator
                    && call.through.is_none()
                    && !function
                        .local
                        .call_at(call.start)
                        .is_some_and(|values| values.entered)
                {
                    continue;
                }
                for effect in resolver.effects_through(i, callee, &summary.effects) {
                    keep(effect, &mut effects);
                }
                // Followed a few calls up (a layer's forward, its cast
                // method, the shared fetch, the helper that copies), and
                // only as what the function was handed: a copy of
                // something else is no layer's weight.
                for mut effect in resolver.effects_through(i, callee, &summary.staged) {
                    if effect.length <= MOST_STAGED_LENGTH
                        && matches!(effect.target, Target::Param { .. })
                        && judge_attribute(&mut effect.target, module, function)
                    {
                        staged.add(effect);
                    }
                }
            }
        }
        discounts.append(&mut own_data);
        let mut returns: Vec<Target> = Vec::new();
        for val in function.local.returns.iter() {
            for mut target in resolver.targets(val, 0) {
                if judge_attribute(&mut target, module, function)
                    && returns.len() < MOST_RETURNS
                    && !returns.contains(&target)
                {
                    returns.push(target);
                }
            }
        }
        returns.sort();
        let mut summary = effects.into_summary();
        summary.staged = staged.into_summary().effects;
        summary.returns = returns;
        summary.returns_storage = function.local.returns_storage
            || function.local.returns.iter().any(|val| match val.root {
                crate::analysis::effects::value::Root::Returned(start) => {
                    storage_returned_at(start)
                }
                _ => false,
            });
        summary.measures = function.local.measures || measures;
        // A sync of its own body stands next to its timing, or to that of
        // a function it calls directly.
        for effect in &mut summary.effects {
            if effect.chain.is_none() && effect.kind == crate::analysis::effects::local::Kind::Sync
            {
                effect.measured = summary.measures;
            }
        }
        discounts.truncate(4);
        summary.discounts = discounts;
        summary
    }
}

/// A function with the targets of each of its calls, to name its callees'
/// effects in its own terms (see [`ProjectIndex::effects_at_call`]).
pub struct Caller(Node);

impl Caller {
    /// The targets of its call `call` (an index into its calls).
    pub fn callees(&self, call: usize) -> &[FunctionRef] {
        self.0.callees.get(call).map_or(&[], |list| list)
    }
}

impl ProjectIndex<'_> {
    /// `function` with the targets of its calls resolved, once per run of
    /// the index: a forward's steps and the summaries' search ask for the
    /// same functions.
    pub fn caller(&self, function: &FunctionRef) -> Caller {
        let (module, index) = function;
        // The module's facts are held by the answer kept here, so the
        // address names them for as long as the entry lives.
        let key = (Arc::as_ptr(module) as usize, *index);
        let lock = || {
            self.callers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let known = lock().get(&key).cloned();
        let callees = match known {
            Some(known) => known,
            None => {
                let callees: CallTargets = Arc::new(
                    module.functions[*index]
                        .calls
                        .iter()
                        .map(|call| self.call_targets(module, *index, call))
                        .collect(),
                );
                Arc::clone(lock().entry(key).or_insert(callees))
            }
        };
        Caller(Node {
            function: (Arc::clone(module), *index),
            callees,
        })
    }

    /// The effects of `callee` where `caller` calls it at its call `call`,
    /// in the caller's terms (what it passes there): what the call does to
    /// the caller's values, each chain starting with the call.
    pub fn effects_at_call(&self, caller: &Caller, call: usize, callee: &FunctionRef) -> Summary {
        let summary = self.summary(callee);
        let summary_of = |f: &FunctionRef| Some(self.summary(f));
        let resolver = Resolver::of(self, &caller.0, &summary_of);
        let (module, function) = (resolver.module, resolver.function);
        let mut effects = resolver.effects_through(call, callee, &summary.effects);
        effects.retain_mut(|effect| judge_attribute(&mut effect.target, module, function));
        let mut mapped = Summary::from_effects(effects);
        mapped.measures = summary.measures || callee.0.functions[callee.1].local.measures;
        mapped
    }
}

impl ProjectIndex<'_> {
    /// The roles of `callee`'s parameters where `caller` (whose parameters
    /// play `caller_roles`) calls it at its call `call` (`handed`: the call
    /// hands `callee` over and runs it with its other arguments, as
    /// `checkpoint(fn, *args)` does). A parameter bound to module state the
    /// caller holds (the module, `self`, one of their attributes) is the
    /// module; one bound to a value the caller was handed as an activation,
    /// or made, is an activation. A method's own object is its `self`.
    pub fn roles_at_call(
        &self,
        caller: &Caller,
        call: usize,
        callee: &FunctionRef,
        caller_roles: &[Role],
        handed: bool,
    ) -> Vec<Role> {
        let summary_of = |f: &FunctionRef| Some(self.summary(f));
        let resolver = Resolver::of(self, &caller.0, &summary_of);
        let fact = &callee.0.functions[callee.1];
        (0..fact.parameters.len())
            .map(|param| {
                if param == 0 && fact.is_method && !fact.static_method {
                    return Role::SelfObject;
                }
                let Some(targets) = resolver.parameter_targets(call, fact, param, handed) else {
                    return Role::Activation;
                };
                targets
                    .iter()
                    .map(|target| role_of_target(target, caller_roles))
                    .max_by_key(|role| role_rank(*role))
                    .unwrap_or(Role::Activation)
            })
            .collect()
    }
}

/// What a value the caller passes is, by what it names in the caller.
fn role_of_target(target: &Target, caller_roles: &[Role]) -> Role {
    match target {
        Target::Param {
            index, attr, shape, ..
        } => {
            let role = caller_roles
                .get(*index as usize)
                .copied()
                .unwrap_or(Role::Activation);
            match (role, attr) {
                (Role::Activation, _) => Role::Activation,
                (Role::SelfObject, None) => Role::SelfObject,
                (Role::State, _) => Role::State,
                (_, Some(_)) if *shape == Shape::Tensor => Role::State,
                (_, Some(_)) => Role::Module,
                (role, None) => role,
            }
        }
        Target::Captured { .. } => Role::Context,
        Target::Global(_) => Role::ModuleLevel,
        Target::Device | Target::Handed | Target::Unknown => Role::Activation,
    }
}

/// Which role wins where a parameter may be bound to several values: the
/// one that keeps the most effects counted.
fn role_rank(role: Role) -> u8 {
    match role {
        Role::Activation => 0,
        Role::Context | Role::ModuleLevel => 1,
        Role::State => 2,
        Role::SelfObject => 3,
        Role::Module => 4,
    }
}

impl<F: Fn(&FunctionRef) -> Option<Arc<Summary>>> Resolver<'_, '_, F> {
    /// `summary`'s effects (the summary of `callee`, which this function
    /// calls at its call `call`) in this function's terms, each chain
    /// starting with the call.
    fn effects_through(
        &self,
        call: usize,
        callee: &FunctionRef,
        summary: &[Effect],
    ) -> Vec<Effect> {
        let callee_fact = &callee.0.functions[callee.1];
        let call_fact = &self.function.calls[call];
        let step = Step {
            qualname: callee_fact.qualname.clone(),
            path: callee.0.path.clone(),
            line: callee_fact.line,
            through: call_fact.through.clone(),
            fenced: callee_fact.fenced.clone(),
            call_line: Some(call_fact.line),
        };
        let mut effects = Vec::new();
        self.index.loaded.summaries.count_mapped(summary.len());
        let ctx_held = self.ctx_held_arguments(call, callee);
        for effect in summary {
            let targets = match ctx_held(&effect.target) {
                // A tensor saved for backward is never moved in place: a
                // moved or cast copy of it used as a value is compute; and
                // ordering streams or waiting on it is no weight work of
                // its own (what it orders may be the gradients').
                Some(_)
                    if matches!(&effect.target, Target::Param { attr: Some(a), .. }
                            if crate::analysis::effects::models::is_saved_tensor(a))
                        && (effect.acts == crate::analysis::effects::local::Acts::Rebound
                            || effect.kind.orders_or_waits()) =>
                {
                    continue;
                }
                Some(targets) => targets,
                None => self.map_target(&effect.target, effect.acts, call, callee_fact, 0),
            };
            for target in targets {
                effects.push(Effect {
                    target,
                    chain: Some(Arc::new(Link {
                        step: step.clone(),
                        next: effect.chain.clone(),
                    })),
                    length: effect.length + 1,
                    // A sync of the callee's own body stands next to this
                    // function's timing too.
                    measured: effect.measured
                        || (effect.chain.is_none() && self.function.local.measures),
                    ..effect.clone()
                });
            }
        }
        effects
    }
}

/// How many calls up a copy taken for one use is followed (see
/// [`Summary::staged`]).
const MOST_STAGED_LENGTH: u32 = 4;

/// Most values a summary says a function returns.
const MOST_RETURNS: usize = 8;
