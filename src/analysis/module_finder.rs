//! Where a module of a dotted name is, as CPython's path finder looks for
//! it from the module that imports it: an indexed module, or the file that
//! holds it; each answer once per import root and name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::analysis::FastMap;
use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::project::{ModuleFile, ProjectIndex};

/// How many directories above an import root a namespace package is
/// looked for.
const MOST_NAMESPACE_DEPTH: usize = 4;

impl ProjectIndex<'_> {
    /// The module with dotted name `name` if it is indexed, else the file
    /// that holds it.
    pub(super) fn module_file(&self, name: &str, near: &ModuleFacts) -> ModuleFile {
        // Asked for every import of every module a chain passes: answered
        // by the asking module's facts (their address, checked against
        // their path) before its key below is built.
        let address = std::ptr::from_ref(near) as usize;
        let by_near = || {
            self.module_files_near
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some((path, names)) = by_near().get(&address)
            && *path == near.path
            && let Some(known) = names.get(name)
        {
            return known.clone();
        }
        let found = self.module_file_by_root(name, near);
        let mut by_near = by_near();
        let entry = by_near
            .entry(address)
            .or_insert_with(|| (near.path.clone(), FastMap::default()));
        if entry.0 != near.path {
            *entry = (near.path.clone(), FastMap::default());
        }
        entry.1.insert(name.into(), found.clone());
        found
    }

    /// [`ProjectIndex::module_file`], answered by import root.
    fn module_file_by_root(&self, name: &str, near: &ModuleFacts) -> ModuleFile {
        let near_root = &near.import_root;
        let from_cwd = spelled_from_cwd(near);
        let first = name.split('.').next().unwrap_or(name);
        let own = own_package_parent(&near.path, first, near_root.as_deref());
        let key = (near_root.clone(), from_cwd, own.clone());
        let lock = || {
            self.module_files
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(&key).and_then(|names| names.get(name)) {
            return known.clone();
        }
        let found = self.find_module_file(name, near_root, from_cwd, own.as_deref());
        lock()
            .entry(key)
            .or_default()
            .insert(name.to_owned(), found.clone());
        found
    }

    /// Whether some leading part of the dotted path `full` is a module of
    /// the project (as code in `near` imports it).
    pub(super) fn in_project(&self, full: &str, near: &ModuleFacts) -> bool {
        let mut prefix = String::new();
        for part in full.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            if self.module_file(&prefix, near).is_some() {
                return true;
            }
        }
        false
    }

    /// [`ProjectIndex::module_file`], looked up.
    fn find_module_file(
        &self,
        name: &str,
        near_root: &Option<PathBuf>,
        from_cwd: bool,
        own: Option<&Path>,
    ) -> ModuleFile {
        let spell = |path: PathBuf| match from_cwd {
            true => from_working_directory(path),
            false => path,
        };
        // CPython's path finder: in each directory a package
        // (`util/__init__.py`) wins over a module (`util.py`).
        let indexed = |package: bool| {
            self.by_module_name
                .get(name)
                .into_iter()
                .flatten()
                .map(|&i| &self.modules[i])
                .find(|m| m.path.file_stem().is_some_and(|s| s == "__init__") == package)
        };
        let relative: PathBuf = name.split('.').collect();
        let first = name.split('.').next().unwrap_or(name);
        let searched = self.search_roots(near_root, first);
        // Last, the directory above the package the importing file lies in
        // under that name: vendored code imports itself by its own name
        // once its parent is put on `sys.path`.
        let own = own.filter(|own| !searched.iter().any(|r| r == own));
        for root in searched.iter().map(PathBuf::as_path).chain(own) {
            let package = spell(root.join(&relative).join("__init__.py"));
            let module = spell(root.join(&relative).with_extension("py"));
            if let Some(found) = indexed(true).filter(|m| m.path == package) {
                return Some(Ok(Arc::clone(found)));
            }
            if self.loaded.listings.is_file(&package) && self.loaded.confinement.allows(&package) {
                return Some(Err(package));
            }
            if let Some(found) = indexed(false).filter(|m| m.path == module) {
                return Some(Ok(Arc::clone(found)));
            }
            if self.loaded.listings.is_file(&module) && self.loaded.confinement.allows(&module) {
                return Some(Err(module));
            }
        }
        indexed(true)
            .or_else(|| indexed(false))
            .map(|found| Ok(Arc::clone(found)))
    }

    /// The directories a module whose dotted name starts with `first` is
    /// looked for in, from a module imported from `near_root`, in order;
    /// once per import root and first part.
    fn search_roots(&self, near_root: &Option<PathBuf>, first: &str) -> Arc<[PathBuf]> {
        let lock = || {
            self.search_roots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(near_root).and_then(|firsts| firsts.get(first)) {
            return Arc::clone(known);
        }
        let mut roots: Vec<PathBuf> = near_root.iter().cloned().collect();
        roots.extend(self.roots.iter().cloned());
        // A root that is itself a namespace package (`megatron/` holding
        // `core/__init__.py` and no `__init__.py`) imports from its parent.
        let namespaced: Vec<PathBuf> = roots
            .iter()
            .filter(|r| r.file_name().is_some_and(|n| n == first))
            .filter_map(|r| r.parent().map(Path::to_path_buf))
            .collect();
        roots.extend(namespaced);
        // A namespace package (no `__init__.py`, as in `modules/util/x.py`
        // imported as `modules.util.x`) is found from the directory a
        // script runs in: a directory above a root that holds the first
        // part of the name.
        let above: Vec<PathBuf> = roots
            .iter()
            .flat_map(|r| r.ancestors().skip(1).take(MOST_NAMESPACE_DEPTH))
            .filter(|a| self.loaded.listings.is_dir(&a.join(first)))
            .map(Path::to_path_buf)
            .collect();
        for dir in above {
            if !roots.contains(&dir) {
                roots.push(dir);
            }
        }
        let roots: Arc<[PathBuf]> = roots.into();
        lock()
            .entry(near_root.clone())
            .or_default()
            .entry(first.to_owned())
            .or_insert(roots)
            .clone()
    }
}

/// The directory holding the package named `first` that the file at
/// `path` lies in, below its import root (`.../ltx2` for
/// `.../ltx2/ltx_core/block_streaming/wrapper.py` and `first` `ltx_core`):
/// where code that puts that directory on `sys.path` (vendored packages)
/// imports the package by its own name. The innermost such package.
pub(super) fn own_package_parent(path: &Path, first: &str, root: Option<&Path>) -> Option<PathBuf> {
    path.parent()?
        .ancestors()
        .take_while(|dir| Some(*dir) != root && !dir.as_os_str().is_empty())
        .find(|dir| dir.file_name().is_some_and(|n| n == first))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

/// Whether the files `near` reaches through its absolute import root are
/// spelled from the working directory: the walk spelled `near` relative
/// to it (`weights.py`, run from inside `pkg`), so that what it imports is
/// spelled the same way (`runner.py`, not `/…/pkg/runner.py`): a module the
/// run parsed is then that module, not a second copy read on demand, and
/// paths print as the walk's do.
pub(super) fn spelled_from_cwd(near: &ModuleFacts) -> bool {
    near.path.is_relative() && near.import_root.as_ref().is_some_and(|r| r.is_absolute())
}

/// `path` as spelled from the working directory (`../other/x.py` where it
/// lies outside it): an absolute path, or one that goes through `..` (the
/// project-context pass's `../pkg/x.py`, run from inside `pkg`, is `x.py`);
/// any other path as it is.
pub(crate) fn from_working_directory(path: PathBuf) -> PathBuf {
    static CWD: std::sync::LazyLock<Option<PathBuf>> =
        std::sync::LazyLock::new(|| std::env::current_dir().ok());
    let through_parent = || {
        path.components()
            .any(|c| c == std::path::Component::ParentDir)
    };
    match CWD.as_ref() {
        Some(cwd) if path.is_absolute() => pathdiff::diff_paths(&path, cwd).unwrap_or(path),
        Some(cwd) if through_parent() => {
            let absolute = crate::analysis::module_names::lexical_absolute(&path);
            pathdiff::diff_paths(absolute, cwd).unwrap_or(path)
        }
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::own_package_parent;
    use std::path::{Path, PathBuf};

    #[test]
    fn a_file_imports_the_package_it_lies_in_from_the_directory_above_it() {
        let file = Path::new("repo/app/native/streaming/sub/wrapper.py");
        let root = Some(Path::new("repo"));
        assert_eq!(
            own_package_parent(file, "streaming", root),
            Some(PathBuf::from("repo/app/native"))
        );
        // The innermost package of that name.
        assert_eq!(
            own_package_parent(Path::new("repo/a/pkg/b/pkg/x.py"), "pkg", root),
            Some(PathBuf::from("repo/a/pkg/b"))
        );
        // A name no package around the file has, or one only at or above
        // the import root, is left to the usual search.
        assert_eq!(own_package_parent(file, "torch", root), None);
        assert_eq!(own_package_parent(file, "repo", root), None);
        assert_eq!(own_package_parent(Path::new("x.py"), "x", None), None);
    }
}
