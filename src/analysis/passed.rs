//! Hooks a helper registers for its callers: the functions the project
//! passes by name to a parameter the helper registers
//! (`def add(m, fn): m.register_forward_pre_hook(fn)`), or calls from a
//! closure it registers (`def wrapped(*a): return fn(*a)`, a hook that can
//! be switched off). Those functions run as the hook runs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::analysis::applied::argument_name;
use crate::analysis::effects::value::Root;
use crate::analysis::hook_values::Value;
use crate::analysis::installs::Registration;
use crate::analysis::module_facts::{Callee, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::found::{Discovered, Found};

/// How many helpers deep a name passed on as a parameter is followed
/// (`outer(fn)` calling `add(m, fn)`).
const MOST_PASSED_DEPTH: usize = 2;

/// Most files read for the callers of one helper: a helper whose name many
/// files call (`register(...)`) is looked for in the indexed modules only.
const MOST_CALLING_FILES: usize = 256;

/// A function passed to a helper by name, with the call that passes it.
pub(super) struct Passed {
    pub(super) function: FunctionRef,
    pub(super) path: PathBuf,
    pub(super) line: usize,
}

impl ProjectIndex<'_> {
    /// The functions registered through `registration` where it registers
    /// a parameter of the helper it stands in (`m.register_forward_hook(fn)`
    /// in `def add(m, fn)`): what the helper's callers pass there, each with
    /// why (`backward`: the registrar, where it is a backward one).
    pub(super) fn passed_to_registrar(
        &self,
        module: &Arc<ModuleFacts>,
        registration: &Registration,
        backward: &Option<String>,
    ) -> Vec<(FunctionRef, Found)> {
        // A parameter reads as `Other` (no function of the file).
        let (Value::Name(name) | Value::Local(name) | Value::Other(name)) = &registration.value
        else {
            return Vec::new();
        };
        let Some(scope) = registration.scope else {
            return Vec::new();
        };
        let helper = &module.functions[scope];
        let Some(param) = helper.parameters.iter().position(|p| p == name) else {
            return Vec::new();
        };
        let registrar = match backward {
            Some(registrar) => format!("registered with {registrar}"),
            None => "registered".to_owned(),
        };
        self.passed_for(&(Arc::clone(module), scope), param)
            .into_iter()
            .map(|passed| {
                let why = Found {
                    how: "registration",
                    detail: format!(
                        "{registrar} through {} at {}:{} (its parameter `{name}`), passed at {}:{}",
                        helper.qualname,
                        module.path.display(),
                        registration.line,
                        passed.path.display(),
                        passed.line
                    ),
                    path: passed.path.clone(),
                    line: passed.line,
                    backward: backward.clone(),
                };
                (passed.function, why)
            })
            .collect()
    }

    /// The functions a registered closure `hook` calls through a parameter
    /// of the helper that makes it (`def wrapped(*a): return fn(*a)` in
    /// `def add(m, fn)`): what the helper's callers pass there run as the
    /// hook runs. Recorded as found by use.
    pub(super) fn passed_to_closure(
        &self,
        hook_module: &Arc<ModuleFacts>,
        hook: usize,
        module: &ModuleFacts,
        registration: &Registration,
        discovered: &mut Discovered,
    ) {
        let closure = &hook_module.functions[hook];
        let Some(helper) = closure
            .outer
            .and_then(|start| hook_module.function_starting(start))
        else {
            return;
        };
        let helper_fact = &hook_module.functions[helper];
        for call in &closure.calls {
            let Callee::Name(name) = &call.callee else {
                continue;
            };
            if call.through.is_some() || closure.parameters.contains(name) {
                continue;
            }
            let Some(param) = helper_fact.parameters.iter().position(|p| p == name) else {
                continue;
            };
            // Run as the hook: handed what torch hands the closure (its first
            // parameter first, or its `*args` passed on), not one input.
            let passes_on = closure.local.call_at(call.start).is_some_and(|values| {
                match values.positional.first() {
                    Some(first) => first
                        .iter()
                        .any(|v| v.attr.is_none() && v.root == Root::Param(0)),
                    None => values.splat && closure.splats.first() == Some(&true),
                }
            });
            if !passes_on {
                continue;
            }
            for passed in self.passed_for(&(Arc::clone(hook_module), helper), param) {
                let why = Found {
                    how: "registration",
                    detail: format!(
                        "called as `{name}` by the hook {} registered at {}:{}, passed to {} at {}:{}",
                        closure.qualname,
                        module.path.display(),
                        registration.line,
                        helper_fact.qualname,
                        passed.path.display(),
                        passed.line
                    ),
                    path: passed.path.clone(),
                    line: passed.line,
                    backward: None,
                };
                discovered.add_function(&passed.function.0, passed.function.1, &why);
            }
        }
    }

    /// The project functions passed by name (a bare name, by position or
    /// keyword) for parameter `param` of `helper`, by any call of it below
    /// its import root; a name that is a parameter of the calling function
    /// is followed to that function's callers in turn.
    pub(super) fn passed_for(&self, helper: &FunctionRef, param: usize) -> Vec<Passed> {
        let mut found = Vec::new();
        self.passed_into(helper, param, 0, &mut found);
        found
    }

    fn passed_into(
        &self,
        helper: &FunctionRef,
        param: usize,
        depth: usize,
        found: &mut Vec<Passed>,
    ) {
        let fact = &helper.0.functions[helper.1];
        for (module, index, i) in self.calls_of(helper) {
            let function = &module.functions[index];
            let call = &function.calls[i];
            let Some(values) = function.local.call_at(call.start) else {
                continue;
            };
            let Some(name) = argument_name(values, call, fact, param, &module, function) else {
                continue;
            };
            if let Some(passed_on) = function.parameters.iter().position(|p| p == name) {
                if depth < MOST_PASSED_DEPTH {
                    self.passed_into(&(Arc::clone(&module), index), passed_on, depth + 1, found);
                }
                continue;
            }
            for target in self.named_at(&module, name, index) {
                if !found
                    .iter()
                    .any(|p| p.function.1 == target.1 && p.function.0.path == target.0.path)
                {
                    found.push(Passed {
                        function: target,
                        path: module.path.clone(),
                        line: call.line,
                    });
                }
            }
        }
    }

    /// Every call in the project that reaches `helper`: the calling
    /// module, the function's index there and the call's index in it
    /// (looked for in the modules that may call its name).
    fn calls_of(&self, helper: &FunctionRef) -> Vec<(Arc<ModuleFacts>, usize, usize)> {
        let fact = &helper.0.functions[helper.1];
        let mut found = Vec::new();
        for module in self.modules_calling(&helper.0, &fact.name) {
            for (index, function) in module.functions.iter().enumerate() {
                let mut caller = None;
                for (i, call) in function.calls.iter().enumerate() {
                    let named = match &call.callee {
                        Callee::Name(name) => *name == fact.name,
                        Callee::Method { method, .. } => *method == fact.name,
                    };
                    if !named || call.through.is_some() {
                        continue;
                    }
                    let caller =
                        caller.get_or_insert_with(|| self.caller(&(Arc::clone(&module), index)));
                    if caller
                        .callees(i)
                        .iter()
                        .any(|t| t.1 == helper.1 && t.0.path == helper.0.path)
                    {
                        found.push((Arc::clone(&module), index, i));
                    }
                }
            }
        }
        found
    }

    /// Whether some call of `helper` in the project passes module state for
    /// its parameter `param`: `self` or one of its attributes in a method
    /// of a class that may be an `nn.Module` (`offloader.submit(self.blocks,
    /// i)` in a model's forward), or a parameter of the calling function
    /// that a call of it passes module state for in turn
    /// ([`MOST_PASSED_DEPTH`] deep). Where nothing says how a method is
    /// called, its parameters are what its callers hand it.
    pub(crate) fn passes_module_state(&self, helper: &FunctionRef, param: usize) -> bool {
        let mut asked = std::collections::HashMap::new();
        let mut known = crate::analysis::lineage::ModuleClasses::new();
        self.passes_module_state_at(helper, param, 0, &mut asked, &mut known)
    }

    /// [`ProjectIndex::passes_module_state`] at `depth`; each function,
    /// parameter and depth asked once (`asked`, where a cycle of helpers
    /// handing a parameter on finds `false`).
    fn passes_module_state_at(
        &self,
        helper: &FunctionRef,
        param: usize,
        depth: usize,
        asked: &mut std::collections::HashMap<(usize, usize, usize, usize), bool>,
        known: &mut crate::analysis::lineage::ModuleClasses,
    ) -> bool {
        let key = (Arc::as_ptr(&helper.0) as usize, helper.1, param, depth);
        if let Some(&answer) = asked.get(&key) {
            return answer;
        }
        asked.insert(key, false);
        let fact = &helper.0.functions[helper.1];
        let mut answer = false;
        'calls: for (module, index, i) in self.calls_of(helper) {
            let function = &module.functions[index];
            let call = &function.calls[i];
            let Some(vals) = function.local.call_at(call.start).and_then(|values| {
                crate::analysis::applied::argument_vals(
                    values, call, fact, param, &module, function,
                )
            }) else {
                continue;
            };
            // `self`, not a classmethod's `cls`.
            let own_object =
                function.is_method && !function.static_method && !function.class_method;
            for val in vals.iter() {
                let passes = match val.root {
                    Root::Param(0) if own_object => function
                        .self_class
                        .as_deref()
                        .is_some_and(|class| self.may_be_module(&module, class, known)),
                    Root::Param(k) => {
                        depth < MOST_PASSED_DEPTH
                            && self.passes_module_state_at(
                                &(Arc::clone(&module), index),
                                usize::from(k),
                                depth + 1,
                                asked,
                                known,
                            )
                    }
                    _ => false,
                };
                if passes {
                    answer = true;
                    break 'calls;
                }
            }
        }
        asked.insert(key, answer);
        answer
    }

    /// The modules that may call `name`: those indexed, and every file
    /// below `module`'s import root whose text calls it (`name(`), read
    /// once per run and name (at most [`MOST_CALLING_FILES`] of them).
    fn modules_calling(&self, module: &Arc<ModuleFacts>, name: &str) -> Vec<Arc<ModuleFacts>> {
        let mut modules: Vec<Arc<ModuleFacts>> = self.modules.clone();
        let Some(root) = &module.import_root else {
            return modules;
        };
        let files = self.files_calling(root, name);
        if files.len() > MOST_CALLING_FILES {
            return modules;
        }
        for file in files.iter() {
            if modules.iter().any(|m| m.path == *file) || !self.loaded.confinement.allows(file) {
                continue;
            }
            if let Some(loaded) = self.load(file) {
                modules.push(loaded);
            }
        }
        modules
    }

    /// The files below `root` whose text calls `name`, read once per run
    /// and name.
    fn files_calling(&self, root: &Path, name: &str) -> Arc<[PathBuf]> {
        let key = (root.to_path_buf(), Box::<str>::from(name));
        crate::analysis::module_cache::once(&self.loaded.callers, key, || {
            read_files_calling(root, name)
        })
    }
}

/// [`ProjectIndex::files_calling`], read from the files.
fn read_files_calling(root: &Path, name: &str) -> Arc<[PathBuf]> {
    let mut found: Vec<PathBuf> = crate::analysis::module_cache::python_files_below(root)
        .filter(|path| {
            crate::source::read_file_limited(
                path,
                crate::source::MAX_SOURCE_BYTES,
                "a Python source",
            )
            .is_ok_and(|text| calls_name(&text, name.as_bytes()))
        })
        .collect();
    found.sort();
    found.into()
}

/// Whether `text` spells a call of `name`: the name, not inside a longer
/// one, then `(` after blanks.
fn calls_name(text: &[u8], name: &[u8]) -> bool {
    let identifier = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80;
    memchr::memmem::find_iter(text, name).any(|at| {
        let before = at.checked_sub(1).map(|i| text[i]);
        if before.is_some_and(identifier) {
            return false;
        }
        text[at + name.len()..]
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t'))
            .is_some_and(|&b| b == b'(')
            && !text.get(at + name.len()).copied().is_some_and(identifier)
    })
}

#[cfg(test)]
mod tests {
    use super::calls_name;

    #[test]
    fn a_call_is_the_name_then_a_parenthesis() {
        assert!(calls_name(b"x = add_hook(m, f)", b"add_hook"));
        assert!(calls_name(b"self.add_hook (m, f)", b"add_hook"));
        assert!(!calls_name(b"readd_hook(m, f)", b"add_hook"));
        assert!(!calls_name(b"add_hooks(m, f)", b"add_hook"));
        assert!(!calls_name(b"def_add_hook = add_hook", b"add_hook"));
    }
}
