//! Calls of methods resolved through what the receiver is: an instance of a
//! class made where the value comes from (`h = Offloader(p)`; `self.x[k] =
//! Offloader(p)` in the class, then `self.x[k].onload()`), or a function a
//! module of the project attaches to objects under that name
//! (`param.partition = partition`, then `p.partition()` in another module).

use std::collections::HashSet;
use std::sync::Arc;

use crate::analysis::effects::value::{Root, Val};
use crate::analysis::module_facts::{CallFact, Callee, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex, Targets};

/// Most classes a receiver is resolved through.
const MOST_CLASSES: usize = 8;

impl ProjectIndex<'_> {
    /// The functions a call of `function` reaches: through the receiver's
    /// class where the values tell it, else by name (see
    /// [`ProjectIndex::targets`]), else a function attached under that name
    /// by a module it imports.
    pub(crate) fn call_targets(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        call: &CallFact,
    ) -> Targets {
        let typed = self.typed_targets(module, function, call);
        if !typed.is_empty() {
            return self.past_placeholders(module, typed.into(), call);
        }
        let found = self.targets(module, function, call);
        if !found.is_empty() || call.through.is_some() {
            return self.past_placeholders(module, found, call);
        }
        match &call.callee {
            Callee::Method { method, .. }
                if !crate::analysis::vocabulary::GENERIC_METHODS.contains(&method.as_str())
                    && !method.starts_with("__") =>
            {
                let attached = self.attached_elsewhere(module, method);
                if !attached.is_empty() {
                    return attached.into();
                }
                self.protocol_methods(module, method).into()
            }
            _ => Targets::default(),
        }
    }

    /// `found`, or where it is only a protocol base's placeholders and the
    /// method is a protocol found by use, every definition of it.
    fn past_placeholders(&self, module: &ModuleFacts, found: Targets, call: &CallFact) -> Targets {
        let Callee::Method { method, .. } = &call.callee else {
            return found;
        };
        if !found.is_empty() && found.iter().all(|(m, f)| m.functions[*f].placeholder) {
            let every = self.protocol_methods(module, method);
            if !every.is_empty() {
                return every.into();
            }
        }
        found
    }

    /// The method called, in the classes the receiver's values are
    /// instances of.
    fn typed_targets(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        call: &CallFact,
    ) -> Vec<FunctionRef> {
        let Callee::Method { method, .. } = &call.callee else {
            return Vec::new();
        };
        if call.through.is_some() {
            return Vec::new();
        }
        let caller = &module.functions[function];
        let Some(receiver) = caller
            .local
            .call_at(call.start)
            .and_then(|v| v.receiver.as_ref())
        else {
            return Vec::new();
        };
        let mut classes: Vec<String> = Vec::new();
        for val in receiver.iter() {
            classes.extend(self.classes_of(module, function, val, 0));
        }
        classes.sort();
        classes.dedup();
        classes.truncate(MOST_CLASSES);
        let mut found: Vec<FunctionRef> = Vec::new();
        for class in classes {
            for (class_module, class_name) in self.classes_named(module, &class) {
                for target in
                    self.method_of(&class_module, &class_name, method, &mut HashSet::new())
                {
                    if !found
                        .iter()
                        .any(|f| f.1 == target.1 && f.0.path == target.0.path)
                    {
                        found.push(target);
                    }
                }
            }
        }
        found
    }

    /// The classes `val` (a value of `function`) is an instance of, as far
    /// as the module tells.
    fn classes_of(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        val: &Val,
        depth: usize,
    ) -> Vec<String> {
        if let Some(class) = &val.class {
            return vec![class.to_string()];
        }
        let fact = &module.functions[function];
        match (&val.root, &val.attr) {
            (Root::Param(0), Some(attr)) if fact.is_method && !fact.static_method => fact
                .self_class
                .as_ref()
                .and_then(|c| module.classes.get(c))
                .map(|class| {
                    let mut found: Vec<String> = class
                        .element_classes
                        .get(&**attr)
                        .cloned()
                        .unwrap_or_default();
                    if let Some(single) = class.attributes.get(&**attr) {
                        found.push(single.clone());
                    }
                    found
                })
                .unwrap_or_default(),
            // A parameter annotated with a class (`conductor: Conductor`).
            (Root::Param(i), None) => fact
                .annotations
                .get(*i as usize)
                .cloned()
                .flatten()
                .into_iter()
                .collect(),
            (Root::Outer(name), _) if depth < 8 => {
                // The value the name holds in the function around.
                let mut scope = fact.outer;
                while let Some(start) = scope {
                    let Some(outer) = module.function_starting(start) else {
                        break;
                    };
                    let around = &module.functions[outer];
                    let held: Vec<Val> =
                        match around.local.locals.iter().find(|(n, _)| **n == **name) {
                            Some((_, vals)) => vals.iter().cloned().collect(),
                            None => match around.parameters.iter().position(|p| p == &**name) {
                                Some(i) => vec![Val::new(
                                    Root::Param(i as u16),
                                    crate::analysis::effects::value::Shape::Object,
                                )],
                                None => {
                                    scope = around.outer;
                                    continue;
                                }
                            },
                        };
                    let mut found = Vec::new();
                    for mut held in held {
                        if held.attr.is_none() {
                            held.attr = val.attr.clone();
                        }
                        found.extend(self.classes_of(module, outer, &held, depth + 1));
                    }
                    return found;
                }
                Vec::new()
            }
            (Root::Returned(start), _) if depth < 8 => {
                // What the callee returns: `self.coordinator` of its class.
                let mut found = Vec::new();
                for call in fact
                    .calls_starting(*start)
                    .iter()
                    .filter(|c| c.through.is_none())
                {
                    for (callee_module, callee) in self.targets(module, function, call).iter() {
                        for returned in callee_module.functions[*callee].local.returns.iter() {
                            found.extend(self.classes_of(
                                callee_module,
                                *callee,
                                returned,
                                depth + 1,
                            ));
                        }
                    }
                }
                found
            }
            _ => Vec::new(),
        }
    }

    /// Every indexed class's method `method`, where `method` is a hook
    /// protocol found by use (a hook hands its module to it on objects it
    /// loops over): the call dispatches to any of them under the caller's
    /// own import root (a run over several projects does not let one
    /// project's hook objects answer another's calls).
    fn protocol_methods(&self, caller: &ModuleFacts, method: &str) -> Vec<FunctionRef> {
        if !self.vocabulary.discovered_protocols.contains_key(method) {
            return Vec::new();
        }
        let own = import_root(caller);
        let mut found: Vec<FunctionRef> = Vec::new();
        for module in self.modules.iter().filter(|m| import_root(m) == own) {
            for class in module.classes.values() {
                for &i in &class.methods {
                    if module.functions[i].name == method {
                        found.push((Arc::clone(module), i));
                    }
                }
            }
        }
        found.sort_by(|a, b| (&a.0.path, a.1).cmp(&(&b.0.path, b.1)));
        found
    }

    /// A function attached to objects under the name `method` by `module` or
    /// a module it imports that defines a function of that name
    /// (`param.partition = partition`).
    fn attached_elsewhere(&self, module: &Arc<ModuleFacts>, method: &str) -> Vec<FunctionRef> {
        let mut found: Vec<FunctionRef> = Vec::new();
        for neighbour in self.neighbourhood(module, "def", method).iter() {
            if Arc::ptr_eq(neighbour, module) {
                continue;
            }
            for target in self.held_targets(neighbour, method, None).iter() {
                if !found
                    .iter()
                    .any(|f| f.1 == target.1 && f.0.path == target.0.path)
                {
                    found.push(target.clone());
                }
            }
        }
        found
    }
}

/// The directory `module` is imported from: its path less one directory per
/// package its dotted name is inside (`root/a/b/c.py` as `a.b.c`, and
/// `root/a/b/__init__.py` as `a.b`, are both under `root`).
fn import_root(module: &ModuleFacts) -> Option<&std::path::Path> {
    let depth = module.module.split('.').count();
    let is_package = module.path.file_stem().is_some_and(|s| s == "__init__");
    let up = if is_package { depth + 1 } else { depth };
    module.path.ancestors().nth(up)
}
