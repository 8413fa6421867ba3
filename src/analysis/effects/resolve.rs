//! Naming a function's values in its own terms for its summary: what a
//! callee's parameter is bound to at a call, what a call returns (through the
//! callee's summary), what an instance's constructor stored in an attribute,
//! what a closure's capture is in the function around it, and whether a
//! `self.<attr>` can hold module state.

use std::sync::Arc;

use crate::analysis::effects::local::{Acts, CallValues};
use crate::analysis::effects::record::{Summary, Target};
use crate::analysis::effects::value::{Root, Shape, Val, Vals};
use crate::analysis::module_facts::{CallFact, Callee, FunctionFact, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::Through;

/// One node of the search: a function and the functions each of its calls
/// reaches.
pub(super) struct Node {
    pub(super) function: FunctionRef,
    /// Per call (in [`FunctionFact::calls`] order), its targets.
    pub(super) callees: crate::analysis::project::CallTargets,
}

/// Deepest nesting of calls in one expression followed to what they return.
const MOST_RETURN_DEPTH: usize = 8;

/// Names one function's values in its own terms, following what its calls
/// return through their callees' summaries.
pub(super) struct Resolver<'a, 'v, F> {
    pub(super) index: &'a ProjectIndex<'v>,
    pub(super) node: &'a Node,
    pub(super) module: &'a ModuleFacts,
    pub(super) function: &'a FunctionFact,
    pub(super) summary_of: &'a F,
}

impl<'a, 'v, F> Resolver<'a, 'v, F> {
    /// The resolver of `node`'s function, its module and facts taken from
    /// the node.
    pub(super) fn of(index: &'a ProjectIndex<'v>, node: &'a Node, summary_of: &'a F) -> Self {
        let (module, function) = &node.function;
        Resolver {
            index,
            node,
            module,
            function: &module.functions[*function],
            summary_of,
        }
    }
}

impl<F: Fn(&FunctionRef) -> Option<Arc<Summary>>> Resolver<'_, '_, F> {
    /// A value as targets; none for a value made here.
    pub(super) fn targets(&self, val: &Val, depth: usize) -> Vec<Target> {
        match &val.root {
            Root::Returned(start) => self.returned(*start, val, depth),
            _ => targets_of(val, self.module, self.function),
        }
    }

    /// The targets of what the constructor of `val`'s class stored at
    /// `self.<attr>`, where `val` is an instance made here (or by a function
    /// around this one) by calling a class of this module; `None` when it
    /// is no such instance.
    fn instance_attribute(&self, val: &Val, attr: &str, depth: usize) -> Option<Vec<Target>> {
        if depth > MOST_RETURN_DEPTH {
            return None;
        }
        match &val.root {
            Root::Returned(start) => {
                let class = val.class.as_deref()?;
                let values = self.function.local.call_at(*start)?;
                let stored = self.constructor_stores(class, attr, values)?;
                let mut found = Vec::new();
                for val in stored.iter() {
                    found.extend(self.targets(val, depth + 1));
                }
                Some(found)
            }
            Root::Outer(name) => {
                // The instance a closure captures: made by a function around.
                let mut scope = self.function.outer;
                while let Some(start) = scope {
                    let outer = self.module.function_starting(start)?;
                    let around = &self.module.functions[outer];
                    let Some((_, held)) = around.local.locals.iter().find(|(n, _)| **n == **name)
                    else {
                        scope = around.outer;
                        continue;
                    };
                    let mut found = Vec::new();
                    let mut any = false;
                    for held in held.iter() {
                        let (Root::Returned(made), Some(class)) =
                            (&held.root, held.class.as_deref())
                        else {
                            continue;
                        };
                        let Some(values) = around.local.call_at(*made) else {
                            continue;
                        };
                        let Some(stored) = self.constructor_stores(class, attr, values) else {
                            continue;
                        };
                        any = true;
                        for val in stored.iter() {
                            found.extend(in_frame_of(val, self.module, outer));
                        }
                    }
                    return any.then_some(found);
                }
                None
            }
            _ => None,
        }
    }

    /// What the constructor of `class` (as this module names it, here or
    /// imported) stores at `self.<attr>`, as the call `values` passes it.
    fn constructor_stores(&self, class: &str, attr: &str, values: &CallValues) -> Option<Vals> {
        let here = &self.node.function.0;
        self.index
            .classes_named(here, class)
            .into_iter()
            .find_map(|(module, class)| constructor_stores(&module, &class, attr, values))
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
            for callee in self.node.callees[i].iter() {
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
    pub(super) fn map_target(
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
            // `obj.attr` of an instance the caller made (`Offloader(params)`):
            // what its constructor stored there, as the caller passed it.
            if let Some(attr) = attr
                && let Some(stored) = self.instance_attribute(val, attr, depth)
            {
                found.extend(stored);
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

impl<F: Fn(&FunctionRef) -> Option<Arc<Summary>>> Resolver<'_, '_, F> {
    /// What the callee's parameter `param` is bound to at this function's
    /// call `call`, in this function's terms; `handed` when the call hands
    /// the callee over as its first argument and runs it with the rest
    /// (`checkpoint(fn, *args)`). `None` when the analysis cannot name it.
    pub(super) fn parameter_targets(
        &self,
        call: usize,
        callee: &FunctionFact,
        param: usize,
        handed: bool,
    ) -> Option<Vec<Target>> {
        let call_fact = &self.function.calls[call];
        let values = self.function.local.call_at(call_fact.start);
        let bound = if handed {
            // A bound method handed over (`checkpoint(self._run, x)`): its
            // first parameter is its own object.
            let shift = usize::from(callee.is_method && !callee.static_method);
            let position = param.checked_sub(shift)?;
            let values = values?;
            match values.positional.get(position + 1) {
                Some(vals) => Bound::Vals(vals.clone()),
                None if values.splat => Bound::Unknown,
                None => Bound::Dropped,
            }
        } else {
            bind(
                u16::try_from(param).ok()?,
                call_fact,
                values,
                callee,
                self.module,
                self.function,
            )
        };
        match bound {
            Bound::Vals(vals) => Some(vals.iter().flat_map(|v| self.targets(v, 0)).collect()),
            Bound::Unknown => None,
            Bound::Dropped => Some(Vec::new()),
        }
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
                        .or_else(|| right_aligned(values, callee, k))
                        .cloned()
                        .map_or(Bound::Unknown, Bound::Vals),
                    _ => Bound::Dropped,
                };
            }
            if to.ends_with(".submit") {
                // `pool.submit(f, a, b)`: `f(a, b)`.
                return values
                    .positional
                    .get(param + 1)
                    .cloned()
                    .map_or(Bound::Dropped, Bound::Vals);
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
    // `with Cls(...):` runs `__enter__` and `__exit__` on the instance the
    // call makes.
    if param == 0
        && callee.is_method
        && matches!(callee.name.as_str(), "__enter__" | "__exit__")
        && let Some(class) = call.constructed_class()
    {
        return Bound::Vals(Vals::one(Val::returned(call.start, Some(&class))));
    }
    let shift = binds_first_parameter(call, callee, module, caller);
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
    if let Some(vals) = values
        .positional
        .get(position)
        .or_else(|| right_aligned(values, callee, param))
    {
        return Bound::Vals(vals.clone());
    }
    if let Some(name) = callee.parameters.get(param)
        && let Some((_, vals)) = values.keywords.iter().find(|(k, _)| **k == **name)
    {
        return Bound::Vals(vals.clone());
    }
    if values.splat {
        // The caller's own `*args` and `**kwargs` spread on to the callee's
        // own (`self.helper(*args, **kwargs)` into `def helper(self, *args,
        // **kwargs)`): the same items, judged as the caller's. A plain
        // parameter takes one item the analysis cannot place (torch hands a
        // `def hook(*args)` the module first), and one with a default may
        // keep it: still unknown.
        let filled = callee.splats.get(param).copied().unwrap_or(false);
        if filled
            && let Some(splatted) = values.splatted.as_deref()
            && !splatted.0.is_empty()
            && splatted.iter().all(|v| {
                matches!(v.root, Root::Param(_)) && v.attr.is_none() && caller_splats(caller, v)
            })
        {
            return Bound::Vals(splatted.clone());
        }
        return Bound::Unknown;
    }
    // A default value: the callee's own.
    Bound::Dropped
}

/// What binds the callee's parameter `param` (its index among all its
/// parameters) where the call passes `*args` and then more positional
/// arguments: those fill the callee's last parameters, when it takes a
/// fixed number of them (no `*args`, no defaults, no keyword-only
/// parameter after `*`), so `Fn.apply(*inputs, dummy, self)` hands `self`
/// to `forward`'s last parameter.
fn right_aligned<'v>(
    values: &'v CallValues,
    callee: &FunctionFact,
    param: usize,
) -> Option<&'v Vals> {
    let after = values.after_splat.len();
    let count = callee.parameters.len();
    if after == 0
        || callee.splats.iter().any(|&s| s)
        || callee.defaulted.iter().any(|&d| d)
        || callee.keyword_only.is_some()
        || param >= count
        || param + after < count
    {
        return None;
    }
    values.after_splat.get(param + after - count)
}

/// A value of the function `outer` of `module` as a closure inside it
/// names it: its parameters are captures.
fn in_frame_of(val: &Val, module: &ModuleFacts, outer: usize) -> Vec<Target> {
    let function = &module.functions[outer];
    match &val.root {
        Root::Param(index) => vec![Target::Captured {
            function: (module.path.clone(), function.start),
            index: *index,
            attr: val.attr.clone(),
            judged: false,
        }],
        // Anything else reads as it does in the function itself.
        _ => targets_of(val, module, function),
    }
}

/// What the constructor (`__init__`) of `class` (of `module`) stores at
/// `self.<attr>`, as the call `values` passes it (in the caller's terms).
fn constructor_stores(
    module: &ModuleFacts,
    class: &str,
    attr: &str,
    values: &CallValues,
) -> Option<Vals> {
    let facts = module.classes.get(class)?;
    let init = facts
        .methods
        .iter()
        .map(|&i| &module.functions[i])
        .find(|f| f.name == "__init__")?;
    let mut found = Vals::default();
    let mut any = false;
    for store in init.local.self_stores.iter().filter(|s| &*s.attr == attr) {
        any = true;
        for val in store.vals.iter() {
            match val.root {
                Root::Param(index) if index > 0 => {
                    let index = index as usize;
                    let passed = values.positional.get(index - 1).cloned().or_else(|| {
                        let name = init.parameters.get(index)?;
                        values
                            .keywords
                            .iter()
                            .find(|(k, _)| **k == **name)
                            .map(|(_, v)| v.clone())
                    });
                    match passed {
                        Some(vals) => found.extend(vals),
                        None if values.splat => found.add(Val::unknown()),
                        None => {}
                    }
                }
                _ => {}
            }
        }
    }
    any.then_some(found)
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
pub(super) fn judge_attribute(
    target: &mut Target,
    module: &ModuleFacts,
    function: &FunctionFact,
) -> bool {
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

/// Whether `call` binds `callee`'s first parameter itself rather than
/// passing it: an instance method called on an instance (not on its class,
/// `Cls.m(obj, ...)`), or a classmethod anyhow.
pub(crate) fn binds_first_parameter(
    call: &CallFact,
    callee: &FunctionFact,
    module: &ModuleFacts,
    caller: &FunctionFact,
) -> bool {
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
    callee.is_method && !callee.static_method && (callee.class_method || !class_receiver)
}

impl<F: Fn(&FunctionRef) -> Option<Arc<Summary>>> Resolver<'_, '_, F> {
    /// Where this function's call `call` applies a custom autograd Function
    /// (`Fn.apply(a, b, out)`) and reaches its `backward` (`callee`): what
    /// an attribute of `ctx` the `forward` set to one of its parameters
    /// (`ctx.act = t`) is in this function's terms, `apply`'s argument for
    /// that parameter. An activation kept on `ctx` is no module state
    /// because the backward moves or frees it. `None` for any other target,
    /// or where the forward keeps something else there.
    pub(super) fn ctx_held_arguments(
        &self,
        call: usize,
        callee: &FunctionRef,
    ) -> impl Fn(&Target) -> Option<Vec<Target>> + '_ {
        let call_fact = &self.function.calls[call];
        let fact = &callee.0.functions[callee.1];
        let applied = matches!(&call_fact.through, Some(Through::HandedTo(to)) if to.ends_with(".apply"))
            && fact.name == "backward";
        // The real `Fn.apply(...)` call, not a value handed over.
        let values =
            self.function.local.call_at(call_fact.start).filter(|v| {
                applied && v.start == call_fact.start && v.receiver.is_some() && !v.splat
            });
        let stores: Vec<(Box<str>, Vals)> = match values {
            Some(_) => self
                .index
                .forward_beside(callee)
                .iter()
                .flat_map(|forward| {
                    forward.0.functions[forward.1]
                        .local
                        .first_param_stores
                        .clone()
                })
                .collect(),
            None => Vec::new(),
        };
        move |target: &Target| {
            let values = values?;
            let Target::Param {
                index: 0,
                attr: Some(attr),
                ..
            } = target
            else {
                return None;
            };
            let kept: Vec<&Val> = stores
                .iter()
                .filter(|(a, _)| a == attr)
                .flat_map(|(_, vals)| vals.iter())
                .collect();
            if kept.is_empty() {
                return None;
            }
            let mut found = Vec::new();
            for val in kept {
                let (Root::Param(k), None) = (&val.root, &val.attr) else {
                    return None;
                };
                let argument = values.positional.get(usize::from(*k).checked_sub(1)?)?;
                for v in argument.iter() {
                    found.extend(self.targets(v, 0));
                }
            }
            Some(found)
        }
    }
}

/// Whether `v` is one of the `*args` / `**kwargs` parameters of `caller`.
fn caller_splats(caller: &FunctionFact, v: &Val) -> bool {
    match v.root {
        Root::Param(i) => caller.splats.get(i as usize).copied().unwrap_or(false),
        _ => false,
    }
}
