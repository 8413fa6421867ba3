//! Look-ups over one module's facts: the functions nested in a function,
//! a function by its start byte or place, and the functions a name can
//! mean from a scope.

use super::ModuleFacts;

impl ModuleFacts {
    /// The dotted path a name spelled here stands for through the module's
    /// imports (`nn.Module` -> `torch.nn.Module` after `from torch import
    /// nn`), where its first part is imported.
    pub(in crate::analysis) fn imported_path(&self, dotted: &str) -> Option<String> {
        let path = self
            .imports
            .get(dotted.split('.').next().unwrap_or(dotted))?;
        Some(match dotted.split_once('.') {
            Some((_, rest)) => format!("{path}.{rest}"),
            None => path.clone(),
        })
    }

    /// The functions (and lambdas) defined directly in the function that
    /// starts at byte `start`, in order.
    pub fn nested_in(&self, start: usize) -> &[usize] {
        self.by_outer.get(&start).map_or(&[], Vec::as_slice)
    }

    /// The function whose `def` (or `lambda`) starts at byte `start`.
    pub fn function_starting(&self, start: usize) -> Option<usize> {
        self.by_start.get(&start).copied()
    }

    pub(in crate::analysis) fn function_at(&self, line: usize, column: usize) -> Option<usize> {
        self.by_place.get(&(line, column)).copied()
    }

    /// The `def`s named `name` directly in the bodies of `scopes` (each the
    /// start byte of a function, `None` for module level); never a method.
    pub(in crate::analysis) fn functions_defined_in(
        &self,
        name: &str,
        scopes: &[Option<usize>],
    ) -> Vec<usize> {
        let mut found: Vec<usize> = Vec::new();
        for scope in scopes {
            let defs = match scope {
                None => self.functions_named(name, None),
                Some(start) => self
                    .functions_named(name, Some(*start))
                    .into_iter()
                    .filter(|&i| {
                        let f = &self.functions[i];
                        f.outer == Some(*start) && !f.is_method
                    })
                    .collect(),
            };
            found.extend(defs);
        }
        found
    }

    /// The functions named `name` that code in function `from` (or at
    /// module level) sees: closures of `from` and of each function around
    /// it, innermost first, else module-level functions.
    pub(in crate::analysis) fn functions_visible(
        &self,
        name: &str,
        from: Option<usize>,
    ) -> Vec<usize> {
        let mut scope = from;
        while let Some(function) = scope {
            let start = self.functions[function].start;
            // A method of a class defined here is no def the code sees.
            let closures: Vec<usize> = self
                .functions_named(name, Some(start))
                .into_iter()
                .filter(|&i| self.functions[i].outer == Some(start) && !self.functions[i].is_method)
                .collect();
            if !closures.is_empty() {
                return closures;
            }
            scope = self.functions[function]
                .outer
                .and_then(|outer| self.function_starting(outer));
        }
        self.functions_named(name, None)
    }

    /// Whether some function of the module (a method, a closure) may be
    /// named `name`: a look-up, where the module has its index of names.
    pub(in crate::analysis) fn may_define_function(&self, name: &str) -> bool {
        self.by_name.is_empty() || self.by_name.contains_key(name)
    }

    /// Module-level functions (and closures of `outer`) named `name`.
    pub(in crate::analysis) fn functions_named(
        &self,
        name: &str,
        outer: Option<usize>,
    ) -> Vec<usize> {
        let Some(named) = self.by_name.get(name) else {
            if !self.by_name.is_empty() {
                return Vec::new();
            }
            // Facts without the look-up (built by hand): a scan.
            let named: Vec<usize> = (0..self.functions.len())
                .filter(|&i| self.functions[i].name == name)
                .collect();
            let mut found: Vec<usize> = Vec::new();
            if let Some(outer) = outer {
                found.extend(
                    named
                        .iter()
                        .copied()
                        .filter(|&i| self.functions[i].outer == Some(outer)),
                );
            }
            if found.is_empty() {
                found.extend(named.iter().copied().filter(|&i| {
                    let f = &self.functions[i];
                    f.outer.is_none() && !f.is_method
                }));
            }
            return found;
        };
        if let Some(outer) = outer
            && let Some(nested) = named.get(&Some(outer))
            && !nested.is_empty()
        {
            return nested.clone();
        }
        named.get(&None).map_or_else(Vec::new, |top| {
            top.iter()
                .copied()
                .filter(|&i| !self.functions[i].is_method)
                .collect()
        })
    }
}
