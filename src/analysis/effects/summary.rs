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

use std::collections::HashMap;
use std::sync::Arc;

use crate::analysis::effects::local::{Acts, CallValues};
use crate::analysis::effects::record::SummaryMemo;
pub use crate::analysis::effects::record::{Effect, FnKey, Link, Summaries, Summary, Target};
use crate::analysis::effects::value::{Root, Shape, Val, Vals};
use crate::analysis::module_facts::{CallFact, Callee, FunctionFact, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::Step;
use crate::analysis::reached::Through;

/// Most rounds of the fixpoint inside one component.
const MOST_ROUNDS: usize = 64;

fn key_of(function: &FunctionRef) -> FnKey {
    (
        function.0.path.clone(),
        function.0.functions[function.1].start,
    )
}

/// One node of the search: a function and the functions each of its calls
/// reaches.
struct Node {
    function: FunctionRef,
    /// Per call (in [`FunctionFact::calls`] order), its targets.
    callees: Vec<Vec<FunctionRef>>,
}

impl ProjectIndex<'_> {
    /// The summary of `function`, computed with every function it reaches
    /// that is not summarised yet.
    pub fn summary(&self, function: &FunctionRef) -> Arc<Summary> {
        let summaries = &self.loaded.summaries;
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

    /// Tarjan's strongly connected components from `root`, iteratively;
    /// each component is summarised as soon as it is complete (callees
    /// first).
    fn tarjan(&self, root: &FunctionRef, memo: &mut SummaryMemo) {
        struct Frame {
            node: usize,
            call: usize,
            target: usize,
        }
        #[derive(Default)]
        struct Search {
            nodes: Vec<Node>,
            index_of: HashMap<FnKey, usize>,
            lowlink: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<usize>,
        }
        let open = |function: &FunctionRef, search: &mut Search| -> usize {
            let (module, index) = function;
            let callees = module.functions[*index]
                .calls
                .iter()
                .map(|call| self.call_targets(module, *index, call))
                .collect();
            let id = search.nodes.len();
            search.nodes.push(Node {
                function: (Arc::clone(module), *index),
                callees,
            });
            search.index_of.insert(key_of(function), id);
            search.lowlink.push(id);
            search.on_stack.push(true);
            search.stack.push(id);
            id
        };
        let mut search = Search::default();
        let mut frames: Vec<Frame> = Vec::new();
        let first = open(root, &mut search);
        frames.push(Frame {
            node: first,
            call: 0,
            target: 0,
        });
        while let Some(frame) = frames.last_mut() {
            let node = frame.node;
            // The next callee of this node not looked at yet.
            let mut next: Option<FunctionRef> = None;
            while frame.call < search.nodes[node].callees.len() {
                let targets = &search.nodes[node].callees[frame.call];
                if frame.target < targets.len() {
                    let target = &targets[frame.target];
                    frame.target += 1;
                    next = Some((Arc::clone(&target.0), target.1));
                    break;
                }
                frame.call += 1;
                frame.target = 0;
            }
            if let Some(callee) = next {
                let key = key_of(&callee);
                if memo.done.contains_key(&key) {
                    continue;
                }
                match search.index_of.get(&key) {
                    Some(&seen) => {
                        if search.on_stack[seen] {
                            search.lowlink[node] = search.lowlink[node].min(seen);
                        }
                    }
                    None => {
                        let id = open(&callee, &mut search);
                        frames.push(Frame {
                            node: id,
                            call: 0,
                            target: 0,
                        });
                    }
                }
                continue;
            }
            // Every callee looked at: close the node.
            frames.pop();
            if let Some(parent) = frames.last() {
                search.lowlink[parent.node] = search.lowlink[parent.node].min(search.lowlink[node]);
            }
            if search.lowlink[node] == node {
                let mut component = Vec::new();
                while let Some(member) = search.stack.pop() {
                    search.on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                self.summarise_component(&search.nodes, &component, memo);
            }
        }
    }

    /// Summarises one component: once if it is a single function that does
    /// not call itself, else to a fixpoint.
    fn summarise_component(&self, nodes: &[Node], component: &[usize], memo: &mut SummaryMemo) {
        let mut members: Vec<usize> = component.to_vec();
        members.sort_by_key(|&m| key_of(&nodes[m].function));
        let keys: Vec<FnKey> = members
            .iter()
            .map(|&m| key_of(&nodes[m].function))
            .collect();
        let mut working: HashMap<FnKey, Arc<Summary>> = keys
            .iter()
            .map(|k| (k.clone(), Arc::new(Summary::default())))
            .collect();
        let recursive = members.len() > 1
            || nodes[members[0]]
                .callees
                .iter()
                .flatten()
                .any(|t| key_of(t) == keys[0]);
        for _ in 0..MOST_ROUNDS {
            let mut changed = false;
            for (&member, key) in members.iter().zip(&keys) {
                let summary = self.summarise(&nodes[member], |callee| {
                    let key = key_of(callee);
                    working.get(&key).or_else(|| memo.done.get(&key)).cloned()
                });
                if *working[key] != summary {
                    working.insert(key.clone(), Arc::new(summary));
                    changed = true;
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
    }

    /// One function's summary from its own effects and its callees'.
    fn summarise(
        &self,
        node: &Node,
        summary_of: impl Fn(&FunctionRef) -> Option<Arc<Summary>>,
    ) -> Summary {
        let (module, index) = &node.function;
        let function = &module.functions[*index];
        let resolver = Resolver {
            node,
            module,
            function,
            summary_of: &summary_of,
        };
        let mut effects: Vec<Effect> = Vec::new();
        for local in &function.local.effects {
            if local.discount.is_some() {
                continue;
            }
            let targets = match &local.on {
                None => vec![Target::Device],
                Some(val) => resolver.targets(val, 0),
            };
            for target in targets {
                effects.push(Effect {
                    kind: local.kind,
                    target,
                    detail: local.detail.clone(),
                    via: local.on.as_ref().and_then(|v| v.via.clone()),
                    path: module.path.clone(),
                    line: local.line,
                    chain: None,
                    length: 0,
                    acts: local.acts,
                });
            }
        }
        for (i, (call, callees)) in function.calls.iter().zip(&node.callees).enumerate() {
            for callee in callees {
                let Some(summary) = summary_of(callee) else {
                    continue;
                };
                if summary.effects.is_empty() {
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
                let step = Step {
                    qualname: callee_fact.qualname.clone(),
                    path: callee.0.path.clone(),
                    line: callee_fact.line,
                    through: call.through.clone(),
                    fenced: callee_fact.fenced.clone(),
                    call_line: Some(call.line),
                };
                for effect in &summary.effects {
                    for target in
                        resolver.map_target(&effect.target, effect.acts, i, callee_fact, 0)
                    {
                        effects.push(Effect {
                            target,
                            chain: Some(Arc::new(Link {
                                step: step.clone(),
                                next: effect.chain.clone(),
                            })),
                            length: effect.length + 1,
                            ..effect.clone()
                        });
                    }
                }
            }
        }
        // `self.<attr>` of a class that only stores its own data there.
        effects.retain_mut(|effect| judge_attribute(&mut effect.target, module, function));
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
        let mut summary = Summary::from_effects(effects);
        summary.returns = returns;
        summary
    }
}

/// Most values a summary says a function returns.
const MOST_RETURNS: usize = 8;

/// Deepest nesting of calls in one expression followed to what they return.
const MOST_RETURN_DEPTH: usize = 8;

/// Names one function's values in its own terms, following what its calls
/// return through their callees' summaries.
struct Resolver<'a, F> {
    node: &'a Node,
    module: &'a ModuleFacts,
    function: &'a FunctionFact,
    summary_of: &'a F,
}

impl<F: Fn(&FunctionRef) -> Option<Arc<Summary>>> Resolver<'_, F> {
    /// A value as targets; none for a value made here.
    fn targets(&self, val: &Val, depth: usize) -> Vec<Target> {
        match &val.root {
            Root::Returned(start) => self.returned(*start, val, depth),
            _ => targets_of(val, self.module, self.function),
        }
    }

    /// What the call at `start` returns, in this function's terms.
    fn returned(&self, start: usize, val: &Val, depth: usize) -> Vec<Target> {
        if depth > MOST_RETURN_DEPTH {
            return vec![Target::Unknown];
        }
        let mut found: Vec<Target> = Vec::new();
        let mut resolved = false;
        for (i, call) in self.function.calls.iter().enumerate() {
            if call.start != start || call.through.is_some() {
                continue;
            }
            for callee in &self.node.callees[i] {
                let Some(summary) = (self.summary_of)(callee) else {
                    continue;
                };
                resolved = true;
                let callee_fact = &callee.0.functions[callee.1];
                for target in &summary.returns {
                    for mut mapped in
                        self.map_target(target, Acts::Tensor, i, callee_fact, depth + 1)
                    {
                        // `get()[k].attr`: the attribute taken of what it returned.
                        if let (Some(attr), Target::Param { attr: mine, .. })
                        | (Some(attr), Target::Captured { attr: mine, .. }) =
                            (&val.attr, &mut mapped)
                            && mine.is_none()
                        {
                            *mine = Some(attr.clone());
                        }
                        if let Target::Param { shape, .. } = &mut mapped
                            && val.shape == Shape::Tensor
                        {
                            *shape = Shape::Tensor;
                        }
                        if !found.contains(&mapped) {
                            found.push(mapped);
                        }
                    }
                }
            }
        }
        if !resolved {
            found.push(Target::Unknown);
        }
        found
    }

    /// A callee's target in this function's terms, at its call `call` (an
    /// index into [`FunctionFact::calls`]); none when the effect acts on
    /// something this function made, or on a value it hands over that is no
    /// module state.
    fn map_target(
        &self,
        target: &Target,
        acts: Acts,
        call: usize,
        callee: &FunctionFact,
        depth: usize,
    ) -> Vec<Target> {
        let Target::Param {
            index,
            attr,
            judged,
            shape,
        } = target
        else {
            return vec![target.clone()];
        };
        let call_fact = &self.function.calls[call];
        let values = self.function.local.call_at(call_fact.start);
        let bound = match bind(
            *index,
            call_fact,
            values,
            callee,
            self.module,
            self.function,
        ) {
            Bound::Vals(vals) => vals,
            Bound::Unknown => return vec![Target::Handed],
            Bound::Dropped => return Vec::new(),
        };
        let mut found = Vec::new();
        for val in bound.iter() {
            // A tensor handed to a function that moves its argument in place
            // (a module's `.to`): a tensor's copy, no move.
            if acts != Acts::Tensor
                && *shape == Shape::Object
                && val.shape == Shape::Tensor
                && attr.is_none()
            {
                continue;
            }
            // A module is not moved by moving a copy of it.
            if val.copied.is_some() {
                continue;
            }
            for mut mapped in self.targets(val, depth) {
                match &mut mapped {
                    Target::Param {
                        attr: mine,
                        judged: j,
                        shape: s,
                        ..
                    } if mine.is_none() => {
                        *mine = attr.clone();
                        *j = *judged;
                        if attr.is_some() {
                            *s = *shape;
                        }
                    }
                    Target::Captured {
                        attr: mine,
                        judged: j,
                        ..
                    } if mine.is_none() => {
                        *mine = attr.clone();
                        *j = *judged;
                    }
                    _ => {}
                }
                found.push(mapped);
            }
        }
        found
    }
}

/// What a callee's parameter is bound to at a call.
enum Bound {
    Vals(Vals),
    /// Something the analysis cannot name (it may be module state).
    Unknown,
    /// Nothing the callee is handed is module state here (a tensor hook's
    /// gradient, a replayed hook's inputs).
    Dropped,
}

fn bind(
    param: u16,
    call: &CallFact,
    values: Option<&CallValues>,
    callee: &FunctionFact,
    module: &ModuleFacts,
    caller: &FunctionFact,
) -> Bound {
    let param = param as usize;
    let Some(values) = values else {
        return Bound::Unknown;
    };
    match &call.through {
        Some(Through::Replayed { .. }) => {
            // hook(submodule, args...): the submodule, then its inputs.
            return if param == 0 {
                Bound::Unknown
            } else {
                Bound::Dropped
            };
        }
        Some(Through::HandedTo(to)) => {
            if let Callee::Method { method, .. } = &call.callee {
                // `Fn.apply(*args)`: `forward(ctx, *args)`, `backward(ctx, *grads)`.
                return match (param, method.as_str()) {
                    (0, _) => Bound::Unknown,
                    (k, "forward") => values
                        .positional
                        .get(k - 1)
                        .cloned()
                        .map_or(Bound::Unknown, Bound::Vals),
                    _ => Bound::Dropped,
                };
            }
            if to.ends_with(".apply") && param == 0 {
                // `module.apply(fn)`: each submodule of the receiver.
                return values.receiver.clone().map_or(Bound::Unknown, |r| {
                    Bound::Vals(r.map(|v| v.shaped(Shape::Object)))
                });
            }
            // `queue_callback(partial(f, module))`: what the partial binds.
            let partial =
                values
                    .positional
                    .iter()
                    .flat_map(Vals::iter)
                    .find_map(|v| match v.root {
                        Root::Returned(start) => caller.local.call_at(start).filter(|c| c.partial),
                        _ => None,
                    });
            if let Some(partial) = partial
                && let Some(vals) = partial.positional.get(param + 1)
            {
                return Bound::Vals(vals.clone());
            }
            return Bound::Dropped;
        }
        None => {}
    }
    let class_receiver = match &call.callee {
        Callee::Method {
            receiver: Some(r), ..
        } => {
            module.classes.contains_key(r.as_str())
                || (!r.contains('.')
                    && r.starts_with(|c: char| c.is_ascii_uppercase())
                    && !caller.parameters.iter().any(|p| p == r)
                    && !caller.locals.contains_key(r.as_str()))
        }
        _ => false,
    };
    // An instance method called on an instance, or a classmethod anyhow:
    // its first parameter is bound by the call, not passed.
    let shift =
        callee.is_method && !callee.static_method && (callee.class_method || !class_receiver);
    let position = if shift {
        if param == 0 {
            return match (&call.callee, &values.receiver) {
                (Callee::Method { .. }, Some(receiver)) => Bound::Vals(receiver.clone()),
                _ => Bound::Unknown,
            };
        }
        param - 1
    } else {
        param
    };
    if let Some(vals) = values.positional.get(position) {
        return Bound::Vals(vals.clone());
    }
    if let Some(name) = callee.parameters.get(param)
        && let Some((_, vals)) = values.keywords.iter().find(|(k, _)| **k == **name)
    {
        return Bound::Vals(vals.clone());
    }
    if values.splat {
        return Bound::Unknown;
    }
    // A default value: the callee's own.
    Bound::Dropped
}

/// A value of `function` as targets in its own terms; none for a value
/// made there.
pub(crate) fn targets_of(val: &Val, module: &ModuleFacts, function: &FunctionFact) -> Vec<Target> {
    match &val.root {
        Root::Param(index) => vec![Target::Param {
            index: *index,
            attr: val.attr.clone(),
            judged: false,
            shape: val.shape,
        }],
        Root::Outer(name) => captured(name, val.attr.clone(), module, function.outer, 0),
        Root::Global(name) => vec![Target::Global(name.clone())],
        Root::Fresh => Vec::new(),
        Root::Unknown | Root::Returned(_) => vec![Target::Unknown],
    }
}

/// What the name `name` of a function around (starting at `outer`) holds.
fn captured(
    name: &str,
    attr: Option<Box<str>>,
    module: &ModuleFacts,
    outer: Option<usize>,
    depth: usize,
) -> Vec<Target> {
    let Some(outer) = outer.and_then(|start| module.function_starting(start)) else {
        return vec![Target::Global(name.into())];
    };
    if depth > 16 {
        return vec![Target::Unknown];
    }
    let function = &module.functions[outer];
    let key = (module.path.clone(), function.start);
    if let Some(index) = function.parameters.iter().position(|p| p == name)
        && !function.local.locals.iter().any(|(n, _)| &**n == name)
    {
        return vec![Target::Captured {
            function: key,
            index: index as u16,
            attr,
            judged: false,
        }];
    }
    let Some((_, vals)) = function.local.locals.iter().find(|(n, _)| &**n == name) else {
        return captured(name, attr, module, function.outer, depth + 1);
    };
    let mut found = Vec::new();
    for val in vals.iter() {
        let attr = val.attr.clone().or_else(|| attr.clone());
        match &val.root {
            Root::Param(index) => found.push(Target::Captured {
                function: key.clone(),
                index: *index,
                attr,
                judged: false,
            }),
            Root::Outer(name) => {
                found.extend(captured(name, attr, module, function.outer, depth + 1))
            }
            Root::Global(name) => found.push(Target::Global(name.clone())),
            Root::Fresh => {}
            Root::Unknown | Root::Returned(_) => found.push(Target::Unknown),
        }
    }
    found
}

/// Keeps `target` unless it is `self.<attr>` (of the function's class, or
/// of the method a closure captures `self` from) where the class stores
/// only its own data; marks it judged when kept.
fn judge_attribute(target: &mut Target, module: &ModuleFacts, function: &FunctionFact) -> bool {
    match target {
        Target::Param {
            index: 0,
            attr: Some(attr),
            judged,
            ..
        } if !*judged && function.is_method && !function.static_method => {
            match function
                .self_class
                .as_ref()
                .and_then(|c| module.classes.get(c))
            {
                Some(class) if class.owns(attr) => false,
                Some(_) => {
                    *judged = true;
                    true
                }
                None => true,
            }
        }
        Target::Captured {
            function: (path, start),
            index: 0,
            attr: Some(attr),
            judged,
        } if !*judged && *path == module.path => {
            let Some(outer) = module.function_starting(*start) else {
                return true;
            };
            let outer = &module.functions[outer];
            if !outer.is_method || outer.static_method {
                return true;
            }
            match outer
                .self_class
                .as_ref()
                .and_then(|c| module.classes.get(c))
            {
                Some(class) if class.owns(attr) => false,
                Some(_) => {
                    *judged = true;
                    true
                }
                None => true,
            }
        }
        _ => true,
    }
}
