//! The project: every module's facts linked by name. It answers which
//! project function a call, a name or a value can be (through imports,
//! classes, methods and factories' returns), reading, parsing and indexing
//! on demand a module the run did not parse when a call resolves into it,
//! so that an answer does not depend on which files were named.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::analysis::FastMap;
use crate::analysis::module_facts::{CallFact, Callee, ModuleFacts};
use crate::analysis::reached::Through;
use crate::analysis::vocabulary::Vocabulary;

/// A method called on a receiver of unknown type is looked up by name among
/// the indexed classes only when at most this many define it.
pub const MOST_UNTYPED_TARGETS: usize = 3;

pub(super) type FunctionRef = (Arc<ModuleFacts>, usize);

/// The functions one call can reach. Calls that reach the same functions
/// by the same route (an attribute set to many functions and called many
/// times) share one list, so memory and the walks over it grow with the
/// calls and the functions, not their product.
pub(crate) type Targets = Arc<[FunctionRef]>;

/// The targets of each call of one function, in the order of its calls.
pub(crate) type CallTargets = Arc<Vec<Targets>>;

pub use crate::analysis::module_cache::ModuleCache;

/// Every indexed module, and the modules read on demand.
pub struct ProjectIndex<'v> {
    pub(super) modules: Vec<Arc<ModuleFacts>>,
    pub(super) by_path: FastMap<PathBuf, usize>,
    /// Modules read on demand, by file; `None` for a file that could not be
    /// read or parsed (it is context only, never reported).
    pub(super) loaded: Arc<ModuleCache>,
    /// Directories modules are imported from.
    pub(super) roots: Vec<PathBuf>,
    pub(super) vocabulary: &'v Vocabulary,
    /// [`ProjectIndex::neighbourhood`]'s answers, by module, keyword and
    /// name: asked for every call of a method on a value of unknown type.
    /// Keyed by the module's facts (their address; the entry holds them).
    pub(super) neighbourhoods: Mutex<FastMap<usize, Neighbourhoods>>,
    /// [`ProjectIndex::imported`]'s answers, by the module's facts (their
    /// address; the entry holds them).
    pub(super) imported: Mutex<FastMap<usize, (Arc<ModuleFacts>, Imported)>>,
    /// [`ProjectIndex::module_file`]'s answers, by dotted name and the
    /// import root of the module asking: asked for every import of every
    /// module a chain passes, and each answer costs file-system look-ups.
    /// Keyed by the import root and whether the file found is spelled
    /// from the working directory (see `module_finder`).
    pub(super) module_files: Mutex<FastMap<ModuleFilesKey, FastMap<String, ModuleFile>>>,
    /// [`ProjectIndex::module_file`]'s answers, by the asking module's
    /// facts (their address, with their path to check it) and dotted name.
    pub(super) module_files_near: Mutex<FastMap<usize, NearModuleFiles>>,
    /// [`ProjectIndex::search_roots`]'s answers, by import root and the
    /// first part of the dotted name.
    pub(super) search_roots: Mutex<FastMap<Option<PathBuf>, SearchRoots>>,
    /// The indexed modules by dotted name.
    pub(super) by_module_name: HashMap<String, Vec<usize>>,
    /// [`ProjectIndex::held_targets`]'s answers, by the module's facts
    /// (their address), attribute and method.
    held: Mutex<HeldAnswers>,
    /// [`ProjectIndex::replayed`]'s answers, by registrar.
    replayed: Mutex<HashMap<String, Arc<[FunctionRef]>>>,
    /// [`ProjectIndex::caller`]'s call targets, by the module's facts
    /// (their address) and the function's index.
    pub(super) callers: Mutex<FastMap<(usize, usize), CallTargets>>,
    /// The functions and target lists whose calls some thread has resolved
    /// ahead of the summaries' search (see `ProjectIndex::resolve_reachable`),
    /// by address (a list's index is `usize::MAX`).
    pub(super) resolved_ahead: Mutex<std::collections::HashSet<(usize, usize)>>,
    /// What [`ProjectIndex::discover`] found calls each protocol method on
    /// hook objects (see [`crate::found::Discovered::dispatchers`]).
    pub(super) dispatchers: std::sync::OnceLock<Dispatchers>,
}

/// The functions that call each protocol method on hook objects.
pub(super) type Dispatchers =
    std::collections::BTreeMap<String, std::collections::BTreeSet<crate::found::EntryPoint>>;

/// For one module and keyword (`def`, `class`): the modules that may
/// define each name.
/// [`ProjectIndex::module_files`]' key: the import root, whether the
/// files found are spelled from the working directory, and the directory
/// that holds a package the importing file lies in under the name the
/// import starts with (see `module_finder::own_package_parent`).
pub(super) type ModuleFilesKey = (Option<PathBuf>, bool, Option<PathBuf>);

pub(super) type NeighbourhoodWords = FastMap<Box<str>, Arc<[Arc<ModuleFacts>]>>;

/// One module's neighbourhoods, by keyword and name, with the module's
/// facts (held, so that their address keys the entry while it lives).
pub(super) type Neighbourhoods = (Arc<ModuleFacts>, [NeighbourhoodWords; 2]);

/// The module files one module's imports name, with that module's path
/// (to check the address the entry is keyed by).
pub(super) type NearModuleFiles = (PathBuf, FastMap<Box<str>, ModuleFile>);

/// What attributes of a module hold, by the module's facts (their
/// address), attribute and method.
type HeldAnswers = FastMap<(usize, String, Option<String>), Arc<[FunctionRef]>>;

/// Where a dotted module name is: an indexed module, or the file that holds it.
/// The modules one module imports: each indexed, or the file that holds it.
pub(super) type Imported = Arc<[Result<Arc<ModuleFacts>, PathBuf>]>;

/// For one import root: the directories searched, by the first part of a
/// dotted name.
pub(super) type SearchRoots = FastMap<String, Arc<[PathBuf]>>;

pub(super) type ModuleFile = Option<Result<Arc<ModuleFacts>, PathBuf>>;

impl<'v> ProjectIndex<'v> {
    pub fn new(
        modules: Vec<Arc<ModuleFacts>>,
        vocabulary: &'v Vocabulary,
        loaded: Arc<ModuleCache>,
    ) -> ProjectIndex<'v> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for module in &modules {
            if let Some(root) = &module.import_root
                && !roots.contains(root)
            {
                roots.push(root.clone());
            }
        }
        let by_path = modules
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect();
        // Summaries computed over fewer indexed modules may miss targets.
        let paths: Vec<&Path> = modules.iter().map(|m| m.path.as_path()).collect();
        loaded.summaries.start_index(&paths);
        let mut by_module_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, module) in modules.iter().enumerate() {
            by_module_name
                .entry(module.module.clone())
                .or_default()
                .push(i);
        }
        ProjectIndex {
            by_module_name,
            search_roots: Mutex::default(),
            modules,
            by_path,
            loaded,
            roots,
            vocabulary,
            neighbourhoods: Mutex::default(),
            imported: Mutex::default(),
            module_files: Mutex::default(),
            module_files_near: Mutex::default(),
            callers: Mutex::default(),
            resolved_ahead: Mutex::default(),
            held: Mutex::default(),
            replayed: Mutex::default(),
            dispatchers: std::sync::OnceLock::new(),
        }
    }

    /// Frees the index on a thread of its own (see [`crate::aside`]): its
    /// memos hold an entry per call resolved, and the modules it indexed
    /// may be held nowhere else.
    pub fn drop_aside(self) {
        let ProjectIndex {
            modules,
            by_path,
            loaded,
            roots,
            vocabulary: _,
            neighbourhoods,
            imported,
            module_files,
            module_files_near,
            search_roots,
            by_module_name,
            held,
            replayed,
            callers,
            resolved_ahead,
            dispatchers,
        } = self;
        crate::aside::drop_aside((
            (modules, by_path, loaded, roots, neighbourhoods),
            (imported, module_files, search_roots, by_module_name, held),
            (
                replayed,
                callers,
                resolved_ahead,
                dispatchers,
                module_files_near,
            ),
        ));
    }

    pub fn module(&self, path: &Path) -> Option<Arc<ModuleFacts>> {
        self.by_path
            .get(path)
            .map(|&i| Arc::clone(&self.modules[i]))
    }

    /// The module with dotted name `name`, read from disk if it is not
    /// indexed yet.
    pub(super) fn module_named(&self, name: &str, near: &ModuleFacts) -> Option<Arc<ModuleFacts>> {
        match self.module_file(name, near)? {
            Ok(found) => Some(found),
            Err(path) => self.load(&path),
        }
    }

    /// The function a step of an evidence chain names (its file, `def`
    /// line and qualname).
    pub(super) fn function_of_step(
        &self,
        step: &crate::analysis::reached::Step,
    ) -> Option<FunctionRef> {
        let module = self.load(&step.path)?;
        let index = module
            .functions
            .iter()
            .position(|f| f.line == step.line && f.qualname == step.qualname)?;
        Some((module, index))
    }

    pub(super) fn load(&self, path: &Path) -> Option<Arc<ModuleFacts>> {
        if let Some(i) = self.by_path.get(path) {
            return Some(Arc::clone(&self.modules[*i]));
        }
        // Read once: a thread asking for a module another is reading waits
        // for those facts instead of reading the file again.
        crate::analysis::module_cache::once(&self.loaded.modules, path.to_path_buf(), || {
            match crate::analysis::module_cache::read_module(
                path,
                self.vocabulary,
                &self.loaded.listings,
            ) {
                Ok(facts) => Some(Arc::new(facts)),
                Err(err) => {
                    self.loaded
                        .errors
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(err);
                    None
                }
            }
        })
    }

    /// Every class named `name` that code in `module` can mean: one it
    /// defines or imports, else any indexed class of that name.
    /// The class at the dotted path `full`, following the re-exports of
    /// the modules on the way (`pkg/__init__.py`: `from .impl import Cls`).
    fn class_at(
        &self,
        full: &str,
        module: &Arc<ModuleFacts>,
    ) -> Option<(Arc<ModuleFacts>, String)> {
        let mut full = full.to_owned();
        for _ in 0..8 {
            let (module_path, class) = full.rsplit_once('.')?;
            let target = self.module_named(module_path, module)?;
            if target.classes.contains_key(class) {
                return Some((target, class.to_owned()));
            }
            full = target.imports.get(class)?.clone();
        }
        None
    }

    pub(super) fn classes_named(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
    ) -> Vec<(Arc<ModuleFacts>, String)> {
        let last = name.rsplit('.').next().unwrap_or(name).to_owned();
        if !name.contains('.') && module.classes.contains_key(name) {
            return vec![(Arc::clone(module), last)];
        }
        if let Some(full) = module.imported_path(name) {
            if let Some(found) = self.class_at(&full, module) {
                return vec![found];
            }
            if !self.in_project(&full, module) {
                // Imported from outside the project (`nn.Module`).
                return Vec::new();
            }
        }
        self.neighbourhood(module, "class", &last)
            .iter()
            .filter(|m| m.classes.contains_key(&last))
            .map(|m| (Arc::clone(m), last.clone()))
            .collect()
    }

    /// The `forward` of the class `method` (a custom autograd Function's
    /// `backward`, say) is defined in, its bases followed: where what a
    /// `forward` kept on `ctx` is read back.
    pub(super) fn forward_beside(&self, method: &FunctionRef) -> Vec<FunctionRef> {
        let Some(class) = method.0.functions[method.1].self_class.as_deref() else {
            return Vec::new();
        };
        self.method_of(&method.0, class, "forward", &mut HashSet::new())
    }

    /// The method `method` of class `class` in `module`, or of its bases.
    pub(super) fn method_of(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        method: &str,
        seen: &mut HashSet<(PathBuf, String)>,
    ) -> Vec<FunctionRef> {
        if !seen.insert((module.path.clone(), class.to_owned())) || seen.len() > 64 {
            return Vec::new();
        }
        let Some(facts) = module.classes.get(class) else {
            return Vec::new();
        };
        if let Some(&found) = facts
            .methods
            .iter()
            .find(|&&i| module.functions[i].name == method)
        {
            return vec![(Arc::clone(module), found)];
        }
        for base in &facts.bases {
            for (base_module, base_class) in self.classes_named(module, base) {
                let found = self.method_of(&base_module, &base_class, method, seen);
                if !found.is_empty() {
                    return found;
                }
            }
        }
        Vec::new()
    }

    /// Every hook the project registers with `registrar` (the table a
    /// replay loop calls), each once; the same for every replay, so answered
    /// once per registrar.
    fn replayed(&self, registrar: &str) -> Arc<[FunctionRef]> {
        let lock = || {
            self.replayed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(registrar) {
            return Arc::clone(known);
        }
        let mut found: Vec<FunctionRef> = Vec::new();
        let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
        for registering in &self.modules {
            for registration in &registering.registrations {
                if registration.registrar != registrar {
                    continue;
                }
                for target in
                    self.functions_of(registering, registration.scope, &registration.value, 0)
                {
                    if seen.insert((target.0.path.clone(), target.1)) {
                        found.push(target);
                    }
                }
            }
        }
        let found: Arc<[FunctionRef]> = found.into();
        Arc::clone(lock().entry(registrar.to_owned()).or_insert(found))
    }

    /// The project functions a call in `function` can reach.
    pub(super) fn targets(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        call: &CallFact,
    ) -> Targets {
        let caller = &module.functions[function];
        match &call.callee {
            // Every hook the project registers in a replayed table.
            _ if let Some(Through::Replayed { registrar, .. }) = &call.through => {
                self.replayed(registrar)
            }
            Callee::Name(_) if call.opaque => Targets::default(),
            // The `def`s Python's scoping makes the name mean there, else
            // (none of them binds it) its import.
            Callee::Name(name) if let Some(scopes) = &call.def_scopes => {
                let here = module.functions_defined_in(name, scopes);
                if !here.is_empty() {
                    here.into_iter().map(|i| (Arc::clone(module), i)).collect()
                } else if call.not_the_import {
                    Targets::default()
                } else {
                    self.imported_function(module, name).into()
                }
            }
            Callee::Name(name) if call.not_the_import => module
                .functions_visible(name, Some(function))
                .into_iter()
                .map(|i| (Arc::clone(module), i))
                .collect(),
            Callee::Name(name) => self.named_function(module, name, Some(function)).into(),
            // A method a call only stands for (`Fn.apply(...)` runs
            // `Fn.forward` and `Fn.backward`): followed on a class only.
            Callee::Method {
                receiver: Some(class),
                method,
            } if call.through.is_some() => {
                let first = class.split('.').next().unwrap_or(class);
                let names_a_class = !call.not_the_import
                    && !call.opaque
                    && !caller.locals.contains_key(class)
                    && (module.classes.contains_key(class.as_str())
                        || module.imports.contains_key(first));
                if !names_a_class {
                    // `x.attr.apply`: the class `attr` is set to in this module.
                    let attribute = class.rsplit('.').next().unwrap_or(class);
                    return match class.contains('.') {
                        true => self.held_targets(module, attribute, Some(method)),
                        false => self.assigned_class_targets(module, function, class, method),
                    };
                }
                self.classes_named(module, class)
                    .into_iter()
                    .flat_map(|(m, c)| self.method_of(&m, &c, method, &mut HashSet::new()))
                    .collect()
            }
            Callee::Method { receiver, method } => {
                let receiver = receiver.as_deref();
                let self_class = caller.self_class.as_deref();
                match (receiver, self_class) {
                    // `self.block(x)` where the class stores `self.block = ...`
                    // and defines no method of that name: the instance's own
                    // attribute shadows any method a base class has (a
                    // function on a class is no data descriptor), so the
                    // call is of the value stored, not a method. (One case
                    // reads otherwise: an `nn.Module` keeps a submodule in
                    // `_modules`, where a base's method of the same name
                    // would win; a name clash no model relies on.)
                    (Some("self"), Some(class))
                        if module.classes.get(class).is_some_and(|c| {
                            c.stores.contains_key(method.as_str())
                                && !c
                                    .methods
                                    .iter()
                                    .any(|&i| module.functions[i].name == *method)
                        }) =>
                    {
                        return self.stored_functions(module, class, method, None).into();
                    }
                    (Some(receiver @ ("self" | "cls")), Some(class)) => {
                        let found = self.method_of(module, class, method, &mut HashSet::new());
                        if found.is_empty() && receiver == "self" {
                            // Stored by a base class (`self.infer = ...` in
                            // the base's `__init__`).
                            return self.stored_by_bases(module, class, method).into();
                        }
                        return found.into();
                    }
                    (Some(r), Some(class)) if r.starts_with("self.") && !r[5..].contains('.') => {
                        let attribute = &r[5..];
                        let typed = module
                            .classes
                            .get(class)
                            .and_then(|c| c.attributes.get(attribute))
                            .cloned();
                        if let Some(typed) = typed {
                            return self
                                .classes_named(module, &typed)
                                .into_iter()
                                .flat_map(|(m, c)| {
                                    self.method_of(&m, &c, method, &mut HashSet::new())
                                })
                                .collect();
                        }
                    }
                    _ => {}
                }
                if let Some(r) = receiver {
                    // A local whose class is known, a class, or a module.
                    if let Some(class) = caller.locals.get(r) {
                        let typed: Vec<FunctionRef> = self
                            .classes_named(module, class)
                            .into_iter()
                            .flat_map(|(m, c)| self.method_of(&m, &c, method, &mut HashSet::new()))
                            .collect();
                        // `x = make()`: a call that is no class of the
                        // project tells nothing of the type.
                        if !typed.is_empty() {
                            return typed.into();
                        }
                        return self.untyped_or_held(module, method, None);
                    }
                    if module.classes.contains_key(r) {
                        return self
                            .method_of(module, r, method, &mut HashSet::new())
                            .into();
                    }
                    if call.not_the_import {
                        // A local value that is no import: of no known type.
                        return self.untyped_or_held(module, method, Some((caller, call)));
                    }
                    if let Some(full) = module.imported_path(r) {
                        if let Some(target) = self.module_named(&full, module) {
                            return target
                                .functions_named(method, None)
                                .into_iter()
                                .map(|i| (Arc::clone(&target), i))
                                .collect();
                        }
                        if let Some((module_path, class)) = full.rsplit_once('.')
                            && let Some(target) = self.module_named(module_path, module)
                            && target.classes.contains_key(class)
                        {
                            return self
                                .method_of(&target, class, method, &mut HashSet::new())
                                .into();
                        }
                        // Something imported from outside the project.
                        return Targets::default();
                    }
                }
                self.untyped_or_held(module, method, Some((caller, call)))
            }
        }
    }

    /// What the attribute `attribute` is set to by name in `module`: the
    /// functions of that name the assignment sees, or with `method`, that
    /// method of the class of that name.
    pub(super) fn held_targets(
        &self,
        module: &Arc<ModuleFacts>,
        attribute: &str,
        method: Option<&str>,
    ) -> Targets {
        let Some(values) = module.held.get(attribute) else {
            return Targets::default();
        };
        // Asked for every call of the attribute: answered once per module,
        // attribute and method.
        let key = (
            Arc::as_ptr(module) as usize,
            attribute.to_owned(),
            method.map(str::to_owned),
        );
        let lock = || {
            self.held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(&key) {
            return Arc::clone(known);
        }
        let mut found: Vec<FunctionRef> = Vec::new();
        let mut seen: HashSet<(usize, usize)> = HashSet::new();
        for (value, from) in values {
            let targets = match method {
                Some(method) if module.classes.contains_key(value.as_str()) => {
                    self.method_of(module, value, method, &mut HashSet::new())
                }
                Some(_) => Vec::new(),
                None => module
                    .functions_visible(value, *from)
                    .into_iter()
                    .map(|i| (Arc::clone(module), i))
                    .collect(),
            };
            for target in targets {
                // One function once (facts of one file are one allocation).
                if seen.insert((Arc::as_ptr(&target.0) as usize, target.1)) {
                    found.push(target);
                }
            }
        }
        // The module's facts are held by the answer kept, so the address
        // names them for as long as the entry lives.
        let kept: Targets = found.into();
        Arc::clone(lock().entry(key).or_insert(kept))
    }
}
