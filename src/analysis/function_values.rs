//! What a value can be as a function of the project: a name (a `def` the
//! scoping makes it mean, else its import), a lambda, a method, what an
//! attribute holds (`self.run = self._run_offloaded`, stored by the class
//! or a base class), or what a factory returns.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::analysis::module_facts::{CallFact, Callee, ModuleFacts, Value};
use crate::analysis::project::{FunctionRef, ProjectIndex};

impl ProjectIndex<'_> {
    /// The project functions a value can be, through names, methods,
    /// lambdas and the returns of factories.
    pub(super) fn functions_of(
        &self,
        module: &Arc<ModuleFacts>,
        scope: Option<usize>,
        value: &Value,
        depth: usize,
    ) -> Vec<FunctionRef> {
        if depth > 4 {
            return Vec::new();
        }
        let as_call = |callee: &str| CallFact {
            callee: match callee.rsplit_once('.') {
                Some((receiver, method)) => Callee::Method {
                    receiver: Some(receiver.to_owned()),
                    method: method.to_owned(),
                },
                None => Callee::Name(callee.to_owned()),
            },
            line: 0,
            start: 0,
            first_argument: None,
            not_the_import: false,
            opaque: false,
            def_scopes: None,
            through: None,
        };
        let through = |callee: &str| -> Vec<FunctionRef> {
            let call = as_call(callee);
            match scope {
                Some(scope) => self.targets(module, scope, &call).to_vec(),
                None => self.module_level_targets(module, &call),
            }
        };
        match value {
            Value::Function(i) => vec![(Arc::clone(module), *i)],
            Value::Name(name) | Value::Local(name) => {
                if let Value::Name(_) = value {
                    let found = through(name);
                    if !found.is_empty() {
                        return found;
                    }
                }
                // A variable: what was assigned to it, innermost scope first.
                let mut scope = scope;
                loop {
                    let assigned = match scope {
                        Some(i) => &module.functions[i].assigned,
                        None => &module.assigned,
                    };
                    let values: Vec<&Value> = assigned
                        .iter()
                        .filter(|(n, v)| n == name && v != value)
                        .map(|(_, v)| v)
                        .collect();
                    if !values.is_empty() {
                        return values
                            .into_iter()
                            .flat_map(|v| self.functions_of(module, scope, v, depth + 1))
                            .collect();
                    }
                    match scope {
                        Some(i) => {
                            scope = module.functions[i]
                                .outer
                                .and_then(|start| module.function_starting(start));
                        }
                        None => return Vec::new(),
                    }
                }
            }
            Value::Attribute(name) => {
                let found = through(name);
                if !found.is_empty() {
                    return found;
                }
                // `self.x`, assigned in a method of the class.
                let (Some(attribute), Some(class)) = (
                    name.strip_prefix("self.").filter(|a| !a.contains('.')),
                    scope.and_then(|i| module.functions[i].self_class.as_ref()),
                ) else {
                    return Vec::new();
                };
                let values: Vec<(Value, usize)> = module
                    .classes
                    .get(class)
                    .map(|c| {
                        c.attribute_values
                            .iter()
                            .filter(|(a, _, _)| a == attribute)
                            .map(|(_, v, m)| (v.clone(), *m))
                            .collect()
                    })
                    .unwrap_or_default();
                values
                    .iter()
                    .filter(|(v, _)| v != value)
                    .flat_map(|(v, method)| self.functions_of(module, Some(*method), v, depth + 1))
                    .collect()
            }
            Value::Returned(callee) => {
                let mut found = Vec::new();
                for (factory_module, factory) in through(callee) {
                    let returns = factory_module.functions[factory].returns.clone();
                    for returned in &returns {
                        found.extend(self.functions_of(
                            &factory_module,
                            Some(factory),
                            returned,
                            depth + 1,
                        ));
                    }
                }
                found
            }
            Value::Other(_) => Vec::new(),
        }
    }

    /// The functions a bare name called in `module` means: a closure of
    /// `outer` or a module-level def there, else the function it imports.
    pub(super) fn named_function(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
        from: Option<usize>,
    ) -> Vec<FunctionRef> {
        // Only where the scope model was not asked (a value handed to
        // torch, a factory it calls): the defs of `from` and of each
        // function around it, else the module's. A call's name goes by its
        // `def_scopes`.
        let here = module.functions_visible(name, from);
        if !here.is_empty() {
            return here.into_iter().map(|i| (Arc::clone(module), i)).collect();
        }
        self.imported_function(module, name)
    }

    /// The project functions the class `class` stores in `self.<attribute>`
    /// (`self.infer = self._infer_offloaded` in `__init__`): a call of the
    /// attribute calls one of them. A submodule or any other value stored
    /// there is no function of the project, and adds nothing. `instance`:
    /// the class of the object where that is a subclass of `class`; a bound
    /// method stored (`self._infer`) is looked up on the object's own class,
    /// as Python does, so a subclass's override is the one called.
    pub(super) fn stored_functions(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        attribute: &str,
        instance: Option<(&Arc<ModuleFacts>, &str)>,
    ) -> Vec<FunctionRef> {
        thread_local! {
            /// How many attribute look-ups are under way on this thread: a
            /// value stored there may be another such attribute
            /// (`self.a = self.b`, `self.b = self.a`), looked up through
            /// [`ProjectIndex::targets`] again.
            static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        const MOST_STORED_DEPTH: usize = 4;
        let Some(facts) = module.classes.get(class) else {
            return Vec::new();
        };
        if DEPTH.get() >= MOST_STORED_DEPTH {
            return Vec::new();
        }
        DEPTH.set(DEPTH.get() + 1);
        let mut found: Vec<FunctionRef> = Vec::new();
        for (_, value, method) in facts
            .attribute_values
            .iter()
            .filter(|(a, _, _)| a == attribute)
        {
            // The attribute itself is no value of it (`self.f = self.f`).
            if matches!(value, Value::Attribute(name) if name.strip_prefix("self.") == Some(attribute))
            {
                continue;
            }
            let bound = match (value, instance) {
                (Value::Attribute(name), Some((at, own))) => name
                    .strip_prefix("self.")
                    .filter(|m| !m.contains('.'))
                    .map(|m| self.method_of(at, own, m, &mut HashSet::new()))
                    .filter(|found| !found.is_empty()),
                _ => None,
            };
            let targets = match bound {
                Some(found) => found,
                None => self.functions_of(module, Some(*method), value, 1),
            };
            for target in targets {
                if !found
                    .iter()
                    .any(|f| Arc::ptr_eq(&f.0, &target.0) && f.1 == target.1)
                {
                    found.push(target);
                }
            }
        }
        DEPTH.set(DEPTH.get() - 1);
        found
    }

    /// [`ProjectIndex::stored_functions`] of the nearest base class of
    /// `class` (followed across files) that stores `self.<attribute>`.
    pub(super) fn stored_by_bases(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        attribute: &str,
    ) -> Vec<FunctionRef> {
        let mut pending: std::collections::VecDeque<(Arc<ModuleFacts>, String)> =
            std::collections::VecDeque::from([(Arc::clone(module), class.to_owned())]);
        let mut seen: HashSet<(PathBuf, String)> = HashSet::new();
        while let Some((at, name)) = pending.pop_front() {
            if !seen.insert((at.path.clone(), name.clone())) {
                continue;
            }
            let Some(facts) = at.classes.get(&name) else {
                continue;
            };
            if facts.stores.contains_key(attribute) {
                return self.stored_functions(&at, &name, attribute, Some((module, class)));
            }
            for base in &facts.bases {
                pending.extend(self.classes_named(&at, base));
            }
        }
        Vec::new()
    }

    /// The functions the name `name` is imported as in `module`: by its
    /// own import, else through a star import.
    pub(super) fn imported_function(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
    ) -> Vec<FunctionRef> {
        if let Some(path) = module.imports.get(name)
            && let Some((module_path, function_name)) = path.rsplit_once('.')
            && let Some(target) = self.module_named(module_path, module)
        {
            return target
                .functions_named(function_name, None)
                .into_iter()
                .map(|i| (Arc::clone(&target), i))
                .collect();
        }
        // `from a.b import *` binds the functions a.b defines.
        for star in &module.star_imports {
            if let Some(target) = self.module_named(star, module) {
                let found = target.functions_named(name, None);
                if !found.is_empty() {
                    return found
                        .into_iter()
                        .map(|i| (Arc::clone(&target), i))
                        .collect();
                }
            }
        }
        Vec::new()
    }

    /// [`ProjectIndex::targets`] for code at module level.
    pub(super) fn module_level_targets(
        &self,
        module: &Arc<ModuleFacts>,
        call: &CallFact,
    ) -> Vec<FunctionRef> {
        match &call.callee {
            Callee::Name(name) => self.named_function(module, name, None),
            Callee::Method {
                receiver: Some(r),
                method,
            } if module.classes.contains_key(r) => {
                self.method_of(module, r, method, &mut HashSet::new())
            }
            Callee::Method { .. } => Vec::new(),
        }
    }
}
