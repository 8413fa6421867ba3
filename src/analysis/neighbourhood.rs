//! Where a name of unknown origin is looked up: a module and the project
//! modules it imports that may define the name, told from each file's text
//! without parsing it (the names it spells after `def` or `class`, read once
//! per file) and answered once per module and name; and a method called on
//! a receiver of unknown type, looked up there by name.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::analysis::hook_values::Value;
use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::module_facts::{CallFact, FunctionFact};
use crate::analysis::project::{
    FunctionRef, Imported, MOST_UNTYPED_TARGETS, ProjectIndex, Targets,
};
use crate::analysis::vocabulary::GENERIC_METHODS;

impl ProjectIndex<'_> {
    /// `module` and the project modules it imports (read from disk by
    /// name) that may define `word` with `keyword` (`def`, `class`): where a
    /// name of unknown origin is looked up. It does not depend on which
    /// files the run happened to parse, so the prefilter cannot change an
    /// answer; a module whose text cannot define the name is not parsed for
    /// it.
    pub(super) fn neighbourhood(
        &self,
        module: &Arc<ModuleFacts>,
        keyword: &'static str,
        word: &str,
    ) -> Arc<[Arc<ModuleFacts>]> {
        let slot = keyword_slot(keyword);
        let lock = || {
            self.neighbourhoods
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        // By the module's facts (their address; the entry holds them).
        let address = Arc::as_ptr(module) as usize;
        if let Some(known) = lock()
            .get(&address)
            .and_then(|(_, words)| words[slot].get(word))
        {
            return known.clone();
        }
        let found: Arc<[Arc<ModuleFacts>]> = self.find_neighbourhood(module, keyword, word).into();
        lock()
            .entry(address)
            .or_insert_with(|| (Arc::clone(module), Default::default()))
            .1[slot]
            .entry(word.into())
            .or_insert(found)
            .clone()
    }

    /// [`ProjectIndex::neighbourhood`], looked up.
    fn find_neighbourhood(
        &self,
        module: &Arc<ModuleFacts>,
        keyword: &'static str,
        word: &str,
    ) -> Vec<Arc<ModuleFacts>> {
        let mut found: Vec<Arc<ModuleFacts>> = vec![Arc::clone(module)];
        for target in self.imported(module).iter() {
            let target = match target {
                Ok(indexed) => Arc::clone(indexed),
                Err(file) if self.may_define(file, keyword, word) => match self.load(file) {
                    Some(loaded) => loaded,
                    None => continue,
                },
                Err(_) => continue,
            };
            // One path, one module's facts: the index and the cache of
            // modules read on demand hand out the same facts for a path.
            if !found.iter().any(|m| Arc::ptr_eq(m, &target)) {
                found.push(target);
            }
        }
        found
    }

    /// The project modules `module` imports (or the package around a name
    /// it imports from one), in the order of their dotted names: each an
    /// indexed module or the file that holds it; once per module.
    fn imported(&self, module: &Arc<ModuleFacts>) -> Imported {
        let lock = || {
            self.imported
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let address = Arc::as_ptr(module) as usize;
        if let Some((_, known)) = lock().get(&address) {
            return Arc::clone(known);
        }
        let mut paths: Vec<&String> = module
            .imports
            .values()
            .chain(module.star_imports.iter())
            .collect();
        paths.sort();
        paths.dedup();
        let targets: Imported = paths
            .into_iter()
            .filter_map(|path| {
                self.module_file(path, module).or_else(|| {
                    path.rsplit_once('.')
                        .and_then(|(parent, _)| self.module_file(parent, module))
                })
            })
            .collect();
        Arc::clone(
            &lock()
                .entry(address)
                .or_insert_with(|| (Arc::clone(module), targets))
                .1,
        )
    }

    /// Whether the file at `path` may define `word` with `keyword`: its
    /// text (in NFKC, as CPython reads names) has `keyword word`, with only
    /// blanks and line continuations between. A file that cannot be read
    /// defines nothing (it is never indexed either). Asked of the text
    /// alone, whether or not some thread has read the module by now: the
    /// answer must not depend on the order the workers ran in.
    fn may_define(&self, path: &Path, keyword: &str, word: &str) -> bool {
        if self.by_path.contains_key(path) {
            // Indexed: its definitions are at hand.
            return true;
        }
        let words = self.defined_in(path)[keyword_slot(keyword)].clone();
        words.is_some_and(|words| words.contains(word))
    }
}

impl ProjectIndex<'_> {
    /// `method` of the classes a local of `function` is assigned
    /// (`impl = Gathered if sharded else Plain; impl.apply(...)`): a call
    /// that stands for a method of a class (`.apply` runs `forward` and
    /// `backward`) through a variable holding the class.
    pub(super) fn assigned_class_targets(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        local: &str,
        method: &str,
    ) -> crate::analysis::project::Targets {
        let mut found: Vec<FunctionRef> = Vec::new();
        let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
        for (name, value) in &module.functions[function].assigned {
            let (Value::Name(class) | Value::Attribute(class)) = value else {
                continue;
            };
            if name != local || class == local {
                continue;
            }
            for (at, class) in self.classes_named(module, class) {
                for target in self.method_of(&at, &class, method, &mut HashSet::new()) {
                    if seen.insert((target.0.path.clone(), target.1)) {
                        found.push(target);
                    }
                }
            }
        }
        found.into()
    }
}

impl ProjectIndex<'_> {
    /// The modules below `module`'s import root that define `word` with
    /// `def`, when at most `most` files do: where a method of a value of
    /// unknown type is looked up when neither its module nor what that
    /// imports defines it (`param.colo_attr.set_data_none()`, the class
    /// set on the weight in a module nobody imports). Every Python file
    /// there is read once per run for the names it defines, whichever files
    /// the run parsed, so the prefilter and a run over one file give the
    /// same answer. `package`: only the files of `module`'s own top-level
    /// package count (none where it is in no package: a folder of scripts
    /// is no one program).
    pub(super) fn project_definers(
        &self,
        module: &Arc<ModuleFacts>,
        word: &str,
        most: usize,
        package: bool,
    ) -> Vec<Arc<ModuleFacts>> {
        let Some(root) = &module.import_root else {
            return Vec::new();
        };
        let definers = self.definers_below(root);
        let files = definers.defining(word);
        let files: Vec<&PathBuf> = match package {
            false => files,
            true => {
                let Some((top, _)) = module.module.split_once('.') else {
                    return Vec::new();
                };
                let top = root.join(top);
                files
                    .into_iter()
                    .filter(|file| file.starts_with(&top))
                    .collect()
            }
        };
        if files.len() > most {
            return Vec::new();
        }
        let from_cwd = crate::analysis::module_finder::spelled_from_cwd(module);
        files
            .into_iter()
            .filter(|file| self.loaded.confinement.allows(file))
            .filter_map(|file| match from_cwd {
                true => self.load(&crate::analysis::module_finder::from_working_directory(
                    file.clone(),
                )),
                false => self.load(file),
            })
            .collect()
    }

    /// The files below `root` that define each name with `def`, read once.
    fn definers_below(&self, root: &Path) -> crate::analysis::module_cache::Definers {
        crate::analysis::module_cache::once(&self.loaded.definers, root.to_path_buf(), || {
            self.read_definers(root)
        })
    }

    /// [`ProjectIndex::definers_below`], read from the files.
    fn read_definers(&self, root: &Path) -> crate::analysis::module_cache::Definers {
        let mut found = crate::analysis::module_cache::DefinerIndex::default();
        for path in crate::analysis::module_cache::python_files_below(root) {
            // Both keywords' names from the one read, kept for
            // [`ProjectIndex::may_define`] too.
            let [defs, _] = self.defined_in(&path);
            let Some(words) = defs.filter(|w| !w.is_empty()) else {
                continue;
            };
            let Ok(index) = u32::try_from(found.files.len()) else {
                break;
            };
            found.files.push(path);
            for word in words.iter() {
                match found.words.get_mut(word) {
                    Some(files) => files.push(index),
                    None => {
                        found.words.insert(word.into(), vec![index]);
                    }
                }
            }
        }
        let files = &found.files;
        for indices in found.words.values_mut() {
            indices.sort_by(|&a, &b| files[a as usize].cmp(&files[b as usize]));
        }
        Arc::new(found)
    }
}

impl ProjectIndex<'_> {
    /// The names the file at `path` defines with `def` and with `class`,
    /// read once per run.
    fn defined_in(&self, path: &Path) -> [crate::analysis::module_cache::DefinedWords; 2] {
        crate::analysis::module_cache::once(&self.loaded.defined, path.to_path_buf(), || {
            defined_by_keyword(path).map(|words| words.map(Arc::new))
        })
    }
}

/// The names the file at `path` defines with `def` and with `class` (in
/// the order of [`keyword_slot`]), as CPython reads names (NFKC), from one
/// read of the file; `None` twice for a file that cannot be read or
/// decoded.
fn defined_by_keyword(path: &Path) -> [Option<crate::analysis::unparsed::WordSet>; 2] {
    let Some(source) =
        crate::source::read_file_limited(path, crate::source::MAX_SOURCE_BYTES, "a Python source")
            .ok()
            .and_then(|raw| crate::source::Source::decode(raw).ok())
    else {
        return [None, None];
    };
    let text = crate::analysis::shadow::nfkc(&source.text);
    ["def", "class"].map(|keyword| Some(crate::analysis::unparsed::defined_words(&text, keyword)))
}

/// Where answers for `keyword` are kept: `def` first, `class` second.
fn keyword_slot(keyword: &str) -> usize {
    usize::from(keyword != "def")
}

impl ProjectIndex<'_> {
    /// [`ProjectIndex::untyped`], else what an attribute of that name is
    /// set to in the module (`ctx.post_backward = _run_after_backward`).
    /// `at`: the caller and its call, where the receiver may be a value the
    /// caller holds (see [`Held`]), which may be of a class of the project
    /// no module at hand defines.
    pub(super) fn untyped_or_held(
        &self,
        module: &Arc<ModuleFacts>,
        method: &str,
        at: Option<(&FunctionFact, &CallFact)>,
    ) -> Targets {
        let held = at.map_or(Held::Not, |(caller, call)| held_receiver(caller, call));
        let found = self.untyped(module, method, held);
        if !found.is_empty() || GENERIC_METHODS.contains(&method) {
            return found.into();
        }
        self.held_targets(module, method, None)
    }

    /// The indexed methods named `method`, when few classes define one.
    pub(super) fn untyped(
        &self,
        module: &Arc<ModuleFacts>,
        method: &str,
        held: Held,
    ) -> Vec<FunctionRef> {
        if method.starts_with("__") || GENERIC_METHODS.contains(&method) {
            return Vec::new();
        }
        let mut found: Vec<FunctionRef> = Vec::new();
        let methods_in = |module: &Arc<ModuleFacts>, found: &mut Vec<FunctionRef>| {
            if !module.may_define_function(method) {
                return;
            }
            // In the order of the module's functions, not of its class map
            // (whose order differs from run to run).
            let mut methods: Vec<usize> = module
                .classes
                .values()
                .flat_map(|class| class.methods.iter().copied())
                .filter(|&i| module.functions[i].name == method)
                .collect();
            methods.sort_unstable();
            found.extend(methods.into_iter().map(|i| (Arc::clone(module), i)));
        };
        for module in self.neighbourhood(module, "def", method).iter() {
            methods_in(module, &mut found);
        }
        let most = match held {
            Held::Not => 0,
            Held::Weight => MOST_UNTYPED_TARGETS,
            Held::Object => 1,
        };
        if found.is_empty() && most > 0 {
            // Defined nowhere near: the project's few definitions of it. Not
            // for what a call returned: that call tells the class, and one
            // the analysis cannot see into hands back objects of the library
            // it belongs to, not the project's.
            // An object of one class only, and of its own program's.
            let package = held == Held::Object;
            for module in self.project_definers(module, method, most, package) {
                methods_in(&module, &mut found);
            }
            if found.len() > most {
                return Vec::new();
            }
        }
        if found.len() > MOST_UNTYPED_TARGETS {
            return Vec::new();
        }
        found
    }
}

/// What the receiver of a call of unknown type is, where the caller holds
/// it: a parameter, a capture or a module-level name, or what one of them
/// holds; never what a call returned or what the function made. The
/// project's definitions of the method called on it are looked up by name
/// where neither its module nor what that imports defines it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Held {
    /// Not held: looked up nowhere else.
    Not,
    /// A weight, or an object attached to one (`param.colo_attr`): any of
    /// the project's few definitions ([`MOST_UNTYPED_TARGETS`]), since a
    /// weight's class and what is attached to it come from the project's
    /// parameter management, which a module that uses them seldom imports.
    Weight,
    /// Any other object (`self.buffers[i].to_cuda_async()`): the one
    /// definition in the caller's own top-level package, if only one.
    Object,
}

/// Whether and how `caller` holds the receiver of `call` (see [`Held`]).
fn held_receiver(caller: &FunctionFact, call: &CallFact) -> Held {
    use crate::analysis::effects::value::{Root, Shape};
    let Some(receiver) = caller
        .local
        .call_at(call.start)
        .and_then(|values| values.receiver.as_ref())
        .filter(|receiver| receiver.iter().next().is_some())
    else {
        return Held::Not;
    };
    let held = |val: &crate::analysis::effects::value::Val| {
        matches!(val.root, Root::Param(_) | Root::Outer(_) | Root::Global(_))
    };
    if receiver
        .iter()
        .all(|val| val.shape == Shape::Tensor && held(val))
    {
        Held::Weight
    } else if receiver
        .iter()
        .all(|val| val.shape == Shape::Object && held(val))
    {
        Held::Object
    } else {
        Held::Not
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use crate::analysis::module_facts::ModuleFacts;
    use crate::analysis::project::{ModuleCache, ProjectIndex};
    use crate::analysis::vocabulary::Vocabulary;

    /// Where a name is looked up does not depend on which modules some
    /// worker happened to read before: a module the run read for another
    /// reason is no neighbour for a name its text does not define.
    #[test]
    fn a_neighbourhood_does_not_depend_on_what_was_read_before() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("pkg/__init__.py", ""),
            (
                "pkg/a.py",
                "from pkg import b, c\n\ndef run(x):\n    x.helper()\n",
            ),
            ("pkg/b.py", "def helper(self):\n    pass\n"),
            ("pkg/c.py", "def other():\n    pass\n"),
        ];
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
        }
        let vocabulary = Vocabulary::default();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let a_path = dir.path().join("pkg/a.py");
        let a_text = files[1].1;
        let tree = crate::parse::parse(a_text).unwrap();
        let a = Arc::new(ModuleFacts::build(
            &a_path,
            tree.root_node(),
            a_text,
            &vocabulary,
            None,
            None,
            &crate::analysis::listings::Listings::default(),
        ));
        let names = |read_first: bool| {
            let index = ProjectIndex::new(
                vec![Arc::clone(&a)],
                &vocabulary,
                Arc::new(ModuleCache::confined(crate::confine::Confinement::new(
                    std::slice::from_ref(&root),
                    crate::discover::Selection::default(),
                ))),
            );
            if read_first {
                index.load(&dir.path().join("pkg/c.py")).unwrap();
            }
            let mut names: Vec<String> = index
                .neighbourhood(&a, "def", "helper")
                .iter()
                .map(|m| m.module.clone())
                .collect();
            names.sort();
            names
        };
        assert_eq!(names(false), ["pkg.a", "pkg.b"]);
        assert_eq!(names(true), names(false));
    }

    /// What a file defines is read once per run, not once per project
    /// index (a run builds several, over its rounds): a later index sharing
    /// the run's cache answers from the first reading, even where the file
    /// changed on disk since.
    #[test]
    fn what_a_file_defines_is_read_once_per_run_across_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("helpers.py");
        std::fs::write(&path, "def gather(m):\n    pass\n").unwrap();
        let vocabulary = Vocabulary::default();
        let cache = Arc::new(ModuleCache::default());
        let first = ProjectIndex::new(Vec::new(), &vocabulary, Arc::clone(&cache));
        assert!(first.may_define(&path, "def", "gather"));
        assert!(!first.may_define(&path, "class", "gather"));
        std::fs::write(&path, "def release(m):\n    pass\n").unwrap();
        let later = ProjectIndex::new(Vec::new(), &vocabulary, Arc::clone(&cache));
        assert!(later.may_define(&path, "def", "gather"));
        assert!(!later.may_define(&path, "def", "release"));
        // A run of its own reads the file as it is now.
        let fresh = ProjectIndex::new(Vec::new(), &vocabulary, Arc::new(ModuleCache::default()));
        assert!(fresh.may_define(&path, "def", "release"));
    }
}
