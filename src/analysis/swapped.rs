//! Swapped classes: an installer that swaps a live module's class
//! (`m.__class__ = C`, `type(name, bases, {...})`) makes `C`'s attribute
//! lookup run on every read its forward makes, and its `forward` a root.

use std::sync::Arc;

use crate::analysis::effects::local::{Acts, Kind};
use crate::analysis::effects::record::{Effect, Target};
use crate::analysis::hook_values::Value;
use crate::analysis::module_facts::CallFact;
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::found::{Discovered, Found};

impl ProjectIndex<'_> {
    /// Classes swapped in under live objects (`m.__class__ = C`) and
    /// functions a class made by `type(name, bases, {...})` holds: a
    /// `__getattr__` or `__getattribute__` there runs on every attribute
    /// read the forward makes (a weight moved when it is read), so it is
    /// a hook found by use (`swapped class`), judged by what it does; a
    /// `forward` there is a root like any forward.
    pub(super) fn swapped_class_roots(&self, discovered: &mut Discovered) {
        const SLOTS: [&str; 3] = ["__getattr__", "__getattribute__", "forward"];
        for module in &self.modules {
            for swap in &module.swapped_classes {
                let mut slots: Vec<(FunctionRef, String)> = Vec::new();
                if swap.slot.is_empty() {
                    // A name bound here by an assignment (`C = Plain`) is
                    // not the class of that name.
                    let (Value::Name(name) | Value::Attribute(name)) = &swap.value else {
                        continue;
                    };
                    for (class_module, class) in self.classes_named(module, name) {
                        let Some(facts) = class_module.classes.get(&class) else {
                            continue;
                        };
                        let mut methods: Vec<usize> = facts
                            .methods
                            .iter()
                            .copied()
                            .filter(|&m| SLOTS.contains(&class_module.functions[m].name.as_str()))
                            .collect();
                        methods.sort_unstable();
                        for m in methods {
                            let slot = class_module.functions[m].name.clone();
                            slots.push(((Arc::clone(&class_module), m), slot));
                        }
                    }
                } else {
                    for function in self.functions_of(module, swap.scope, &swap.value, 0) {
                        slots.push((function, swap.slot.clone()));
                    }
                }
                let place = format!("{}:{}", module.path.display(), swap.line);
                for ((at, function), slot) in slots {
                    if slot == "forward" {
                        let qualname = at.functions[function].qualname.clone();
                        let why = |call: &CallFact, via: Option<&str>| Found {
                            how: "forward-call",
                            detail: match via {
                                Some(via) => format!(
                                    "called by {via}, which the forward {qualname} of a class swapped in at {place} runs (line {})",
                                    call.line
                                ),
                                None => format!(
                                    "called by the forward {qualname} of a class swapped in at {place} (line {})",
                                    call.line
                                ),
                            },
                            path: module.path.clone(),
                            line: swap.line,
                            backward: None,
                        };
                        let mut evidence = Vec::new();
                        // Put on the class: bound, `self` is the module.
                        let roles =
                            crate::analysis::effects::judge::forward_roles(&at.functions[function]);
                        let installed = (Arc::clone(&at), function);
                        self.installed_inline_work(
                            &installed,
                            &roles,
                            ((&module.path, swap.line), true),
                            discovered,
                            &mut evidence,
                        );
                        self.steps_of(&at, function, roles, &why, discovered, &mut evidence);
                        self.keep_step_evidence(evidence);
                    } else {
                        let found = Found {
                            how: "swapped class",
                            detail: format!(
                                "`{slot}` of a class swapped in at {place}: it runs on every attribute read"
                            ),
                            path: module.path.clone(),
                            line: swap.line,
                            backward: None,
                        };
                        discovered.add_function(&at, function, &found);
                        let accessor = (Arc::clone(&at), function);
                        if let Some(served) = self.served_moved(&accessor) {
                            self.keep_step_evidence(vec![(
                                (
                                    crate::found::identity(&at.path),
                                    at.functions[function].start,
                                ),
                                served,
                                false,
                            )]);
                        }
                    }
                }
            }
        }
    }

    /// What an attribute accessor of a swapped class (`__getattr__`) serves
    /// moved: the value it makes of its own object's data (`p` of
    /// `self.__dict__['_parameters'][name]`, `self._buffers[name]`) moved
    /// to another device or cast is the attribute every read in the
    /// forward sees, so each weight the forward reads crosses devices
    /// there, though nothing is stored back (a copy made and used as a
    /// value elsewhere is compute).
    fn served_moved(&self, accessor: &FunctionRef) -> Option<Effect> {
        let summary = self.summary(accessor);
        summary
            .effects
            .iter()
            .filter(|e| {
                matches!(e.kind, Kind::Move | Kind::Cast)
                    && e.acts == Acts::Rebound
                    && matches!(e.target, Target::Param { index: 0, .. })
            })
            .min_by(|a, b| a.rank().cmp(&b.rank()))
            .map(|e| {
                let mut served = e.clone();
                served.detail = format!("{}: the copy is what each read is served", e.detail);
                served
            })
    }
}
