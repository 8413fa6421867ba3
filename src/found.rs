//! How a hook was found: the rule and the place that make a function a hook
//! (`--list`'s "why", JSON's `discovered_by`, `--explain`), and what a run
//! found by use: the hooks the project's forward wrappers run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One reason a function is a hook.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Found {
    /// `registration`, `forward replacement`, `protocol` or `configuration`.
    pub how: &'static str,
    /// The reason in words, as `--list` prints it.
    pub detail: String,
    /// Where the rule fired: the register call, the forward replacement, the
    /// class statement.
    pub path: PathBuf,
    pub line: usize,
    /// Found only through a backward registrar (its name): listed with
    /// status `backward`, never fenced (the status says it in JSON).
    #[serde(skip)]
    pub backward: Option<String>,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// A function through which a hook found by use is reached: the registered
/// hook (or a closure it makes) that calls a protocol method on hook
/// objects. Where every entry point of a method is fenced, or fenced by the
/// run, the method runs eagerly already: it is `covered`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryPoint {
    /// Its file (as the walk spelled it) and its `def`'s place.
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub qualname: String,
    /// Registered with torch for forward (the run fences it when it does
    /// offload work), not a closure it makes nor torch's function dispatch.
    pub registered: bool,
}

/// Hooks found by use: what the forward wrappers of the project call around
/// the original forward.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Register calls the matcher could not follow and the index did:
    /// `(file, line, column)` of the call.
    pub resolved: BTreeSet<(PathBuf, usize, usize)>,
    /// The discovered functions' names (for the prefilter).
    pub names: BTreeSet<String>,
    /// Protocol methods (`pre_forward`, `pre_fwd_exec`) called on hook objects,
    /// with why: every override of one in the project is a hook.
    pub protocols: BTreeMap<String, Found>,
    /// Plain functions called with the module: `(path, line, column) -> why`.
    pub functions: BTreeMap<(PathBuf, usize, usize), Found>,
    /// Every function that calls each protocol method of `protocols` on
    /// hook objects.
    pub dispatchers: BTreeMap<String, BTreeSet<EntryPoint>>,
    /// For each function found on the evidence chain of a step
    /// (`(path, line, column)`), the steps it runs inside.
    pub inside: BTreeMap<(PathBuf, usize, usize), BTreeSet<EntryPoint>>,
}

impl Discovered {
    pub fn is_empty(&self) -> bool {
        self.protocols.is_empty() && self.functions.is_empty()
    }

    /// Everything in `other` that is not here yet.
    pub fn adds_to(&self, other: &Discovered) -> bool {
        other
            .protocols
            .keys()
            .any(|k| !self.protocols.contains_key(k))
            || other
                .functions
                .keys()
                .any(|k| !self.functions.contains_key(k))
    }

    pub fn merge(&mut self, other: Discovered) {
        for (k, v) in other.protocols {
            self.protocols.entry(k).or_insert(v);
        }
        for (k, v) in other.functions {
            self.functions.entry(k).or_insert(v);
        }
        self.names.extend(other.names);
        self.resolved.extend(other.resolved);
        for (method, entries) in other.dispatchers {
            self.dispatchers.entry(method).or_default().extend(entries);
        }
        for (at, entries) in other.inside {
            self.inside.entry(at).or_default().extend(entries);
        }
    }

    /// Whether the register call at `line:column` of `path` was followed by
    /// the index.
    pub fn resolves(&self, path: &Path, line: usize, column: usize) -> bool {
        !self.resolved.is_empty() && self.resolved.contains(&(identity(path), line, column))
    }

    /// The discovered functions of the file at `path` (any spelling):
    /// `(line, column, why)`.
    pub fn functions_in(&self, path: &Path) -> Vec<(usize, usize, Found)> {
        if self.functions.is_empty() {
            return Vec::new();
        }
        let path = identity(path);
        self.functions
            .iter()
            .filter(|((p, _, _), _)| *p == path)
            .map(|((_, line, column), why)| (*line, *column, why.clone()))
            .collect()
    }

    /// The files (by identity) whose discovered functions or resolved
    /// registrations differ between `self` and `before`.
    pub fn files_changed_since(&self, before: &Discovered) -> HashSet<PathBuf> {
        let mut files: HashSet<PathBuf> = HashSet::new();
        for ((path, line, column), why) in &self.functions {
            if before.functions.get(&(path.clone(), *line, *column)) != Some(why) {
                files.insert(path.clone());
            }
        }
        for key in before.functions.keys() {
            if !self.functions.contains_key(key) {
                files.insert(key.0.clone());
            }
        }
        // A registration now followed is no longer reported unresolved.
        for (path, _, _) in self.resolved.symmetric_difference(&before.resolved) {
            files.insert(path.clone());
        }
        files
    }

    /// The names of the discovered functions.
    pub fn function_names(&self) -> impl Iterator<Item = String> + '_ {
        self.names.iter().cloned()
    }
}

/// One spelling per file, for comparing paths reached different ways: the
/// canonical path. A file that is not a link is its canonical directory
/// (remembered for the run: a project has few directories and many files,
/// and each canonicalisation costs a system call per path component) joined
/// with its name, at the cost of one `lstat`.
pub fn identity(path: &Path) -> PathBuf {
    static DIRECTORIES: std::sync::LazyLock<std::sync::Mutex<HashMap<PathBuf, PathBuf>>> =
        std::sync::LazyLock::new(Default::default);
    let whole = || std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return whole();
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_symlink() => {}
        _ => return whole(),
    }
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let lock = || DIRECTORIES.lock().unwrap_or_else(|e| e.into_inner());
    let known = lock().get(parent).cloned();
    let directory = match known {
        Some(directory) => directory,
        None => match std::fs::canonicalize(parent) {
            Ok(directory) => {
                lock().insert(parent.to_path_buf(), directory.clone());
                directory
            }
            Err(_) => return whole(),
        },
    };
    directory.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn identity_is_the_canonical_path_through_links_and_dots() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("pkg")).unwrap();
        std::fs::write(real.join("pkg/a.py"), "").unwrap();
        std::os::unix::fs::symlink(real.join("pkg"), real.join("linked")).unwrap();
        std::os::unix::fs::symlink(real.join("pkg/a.py"), real.join("pkg/b.py")).unwrap();
        let a = real.join("pkg/a.py");
        for spelling in [
            real.join("pkg/a.py"),
            real.join("linked/a.py"),
            real.join("pkg/b.py"),
            real.join("linked/b.py"),
            real.join("pkg/./a.py"),
            real.join("linked/../pkg/a.py"),
        ] {
            // Twice: the second answer comes from what the first remembered.
            assert_eq!(identity(&spelling), a, "{}", spelling.display());
            assert_eq!(identity(&spelling), a, "{}", spelling.display());
        }
        // A file that does not exist is its own spelling.
        let missing = real.join("pkg/missing.py");
        assert_eq!(identity(&missing), missing);
    }
}
