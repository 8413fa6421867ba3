//! Which files the analysis may read on demand (a module reached through an
//! import, a file read to see whether it spells a name): the walk's own
//! rules, applied to a path the walk did not take. A file is read only if
//! it is a regular file that lies, once every link is resolved, inside a
//! root the run may read (the project root, else the import root of the
//! files it was given); no directory or file below that root on the way to
//! it is hidden; no `--exclude` or configured `exclude` names it; and inside
//! a git work tree no `.gitignore`, `.ignore` or `.git/info/exclude` ignores
//! it. A link that leads out of the root (a package directory linked to
//! `../../outside`, a module linked to `/etc/passwd`) is never followed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::discover::Selection;

/// The roots a run may read below, and the answers given so far.
#[derive(Debug, Default)]
pub struct Confinement {
    /// Canonical roots.
    roots: Vec<PathBuf>,
    selection: Selection,
    answers: Mutex<HashMap<PathBuf, bool>>,
    /// The files the walk takes in each directory asked about, by
    /// directory: one pruned walk per directory, not per file.
    taken: Mutex<HashMap<PathBuf, std::sync::Arc<std::collections::HashSet<PathBuf>>>>,
    /// How many directories of each root were walked to, pruned.
    pruned_walks: Mutex<HashMap<PathBuf, usize>>,
    /// The files the walk takes below each root walked whole (past
    /// [`MOST_PRUNED_WALKS`] directories asked about).
    whole: Mutex<HashMap<PathBuf, std::sync::Arc<std::collections::HashSet<PathBuf>>>>,
}

/// After this many directories of one root walked to one by one, the root
/// is walked whole, once: each pruned walk lists every directory on its
/// way again.
const MOST_PRUNED_WALKS: usize = 32;

impl Confinement {
    /// Confinement to `roots` (resolved here; a root that does not exist
    /// confines to nothing), with the run's file selection.
    pub fn new(roots: &[PathBuf], selection: Selection) -> Confinement {
        let mut canonical: Vec<PathBuf> = roots
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect();
        canonical.sort();
        canonical.dedup();
        Confinement {
            roots: canonical,
            selection,
            ..Confinement::default()
        }
    }

    /// Whether `path` may be read.
    pub fn allows(&self, path: &Path) -> bool {
        if let Some(&known) = lock(&self.answers).get(path) {
            return known;
        }
        let answer = self.decide(path);
        lock(&self.answers).insert(path.to_path_buf(), answer);
        answer
    }

    fn decide(&self, path: &Path) -> bool {
        let Ok(canonical) = std::fs::canonicalize(path) else {
            return false;
        };
        if !std::fs::metadata(&canonical).is_ok_and(|m| m.is_file()) {
            return false;
        }
        let Some(root) = self.roots.iter().find(|r| canonical.starts_with(r)) else {
            return false;
        };
        let below = canonical.strip_prefix(root).unwrap_or(&canonical);
        let hidden = below
            .components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        if hidden || !self.selection.takes(path) || !self.selection.takes(&canonical) {
            return false;
        }
        self.walk_takes(root, &canonical)
    }

    /// Whether the run's walk takes `file` (canonical, below the canonical
    /// `root`): the walk itself, with the walk's settings, pruned to the
    /// directories on the way to it. So every rule the walk obeys holds: a
    /// directory ignored above is never entered (a whitelist below it does
    /// not bring a file back), `.ignore` counts outside git and over any
    /// `.gitignore`, the deepest match of each kind decides, and the ignore
    /// files above the root, git's excludes and its global excludes count.
    /// The walk lists every file of `file`'s directory at once (whether it
    /// takes a file depends only on the directories above it and the
    /// file's own name), kept for the next file asked there.
    fn walk_takes(&self, root: &Path, file: &Path) -> bool {
        if let Some(all) = lock(&self.whole).get(root).cloned() {
            return all.contains(file);
        }
        let Some(dir) = file.parent() else {
            return false;
        };
        if let Some(taken) = lock(&self.taken).get(dir).cloned() {
            return taken.contains(file);
        }
        let walks = {
            let mut walks = lock(&self.pruned_walks);
            let count = walks.entry(root.to_path_buf()).or_insert(0);
            *count += 1;
            *count
        };
        // Walked without the lock held.
        if walks > MOST_PRUNED_WALKS {
            let all = std::sync::Arc::new(Confinement::files_taken_below(root));
            return lock(&self.whole)
                .entry(root.to_path_buf())
                .or_insert(all)
                .contains(file);
        }
        let taken = std::sync::Arc::new(Confinement::files_taken_in(root, dir));
        lock(&self.taken)
            .entry(dir.to_path_buf())
            .or_insert(taken)
            .contains(file)
    }

    /// The files (and links) the walk from `root` takes anywhere below it.
    fn files_taken_below(root: &Path) -> std::collections::HashSet<PathBuf> {
        ignore::WalkBuilder::new(root)
            .build()
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_type().is_some_and(|t| t.is_dir()))
            .map(|entry| entry.path().to_path_buf())
            .collect()
    }

    /// The files (and links) the walk from `root` takes directly in `dir`.
    fn files_taken_in(root: &Path, dir: &Path) -> std::collections::HashSet<PathBuf> {
        let on_the_way = dir.to_path_buf();
        let mut builder = ignore::WalkBuilder::new(root);
        builder.filter_entry(move |entry| {
            let path = entry.path();
            on_the_way.starts_with(path)
                || (path.parent() == Some(on_the_way.as_path())
                    && !entry.file_type().is_some_and(|t| t.is_dir()))
        });
        builder
            .build()
            .filter_map(Result::ok)
            .filter(|entry| entry.path().parent() == Some(dir))
            .map(|entry| entry.path().to_path_buf())
            .collect()
    }
}

/// The directory that holds the project `path` belongs to: the nearest one
/// at or above it with `pyproject.toml`, `setup.py`, `setup.cfg` or `.git`.
pub fn project_root_of(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    let mut dir = if absolute.is_dir() {
        Some(absolute.as_path())
    } else {
        absolute.parent()
    };
    while let Some(d) = dir {
        if ["pyproject.toml", "setup.py", "setup.cfg", ".git"]
            .iter()
            .any(|marker| d.join(marker).exists())
        {
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

/// The directory `path`'s top-level package is imported from: the parent
/// of the outermost directory above it (or it, for a directory) that holds
/// an `__init__.py`.
pub fn import_root_of(path: &Path) -> Option<PathBuf> {
    let absolute = std::path::absolute(path).ok()?;
    let mut dir = if absolute.is_dir() {
        absolute
    } else {
        absolute.parent()?.to_path_buf()
    };
    while dir.join("__init__.py").is_file() {
        match dir.parent() {
            Some(parent) => dir = parent.to_path_buf(),
            None => break,
        }
    }
    Some(dir)
}

/// The roots a run on `paths` may read below: `project_root` if given,
/// else each path's project root, else its import root.
pub fn roots_of(paths: &[PathBuf], project_root: Option<&Path>) -> Vec<PathBuf> {
    if let Some(root) = project_root {
        return vec![root.to_path_buf()];
    }
    let mut roots: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| project_root_of(p).or_else(|| import_root_of(p)))
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn links_out_of_the_root_hidden_ignored_and_excluded_files_are_not_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("mod.py"), "x = 1\n").unwrap();
        let project = tempfile::tempdir().unwrap();
        let root = project.path();
        std::fs::create_dir_all(root.join("pkg")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        std::fs::create_dir_all(root.join(".git/info")).unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        for file in [
            "pkg/a.py",
            ".hidden/b.py",
            "build/c.py",
            "pkg/d.py",
            "pkg/e.py",
        ] {
            std::fs::write(root.join(file), "x = 1\n").unwrap();
        }
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::write(root.join(".git/info/exclude"), "pkg/e.py\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("linked")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("passwd.py")).unwrap();
        std::os::unix::fs::symlink(root.join("pkg/a.py"), root.join("inside.py")).unwrap();
        let exclude =
            crate::config::Filter::new(&["pkg/d.py".to_owned()], root.to_path_buf()).unwrap();
        let selection = Selection {
            include: None,
            exclude: vec![exclude],
        };
        let confinement = Confinement::new(&[root.to_path_buf()], selection);
        assert!(confinement.allows(&root.join("pkg/a.py")));
        // Another file of the same directory is answered by the same walk.
        assert!(!confinement.allows(&root.join("pkg/e.py")));
        assert_eq!(lock(&confinement.taken).len(), 1);
        assert!(lock(&confinement.whole).is_empty());
        // A link that stays inside is the file it names.
        assert!(confinement.allows(&root.join("inside.py")));
        for refused in [
            "linked/mod.py",
            "passwd.py",
            ".hidden/b.py",
            "build/c.py",
            "pkg/e.py",
            "pkg",
            "missing.py",
        ] {
            assert!(!confinement.allows(&root.join(refused)), "{refused}");
        }
        assert!(!confinement.allows(&outside.path().join("mod.py")));
        // Asked again, the same answer (from the cache).
        assert!(!confinement.allows(&root.join("passwd.py")));
    }

    /// Past [`MOST_PRUNED_WALKS`] directories the root is walked whole, and
    /// every answer stays what the walk pruned to the file's directory
    /// gives.
    #[test]
    fn a_root_walked_whole_answers_as_the_pruned_walks_do() {
        let project = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(project.path()).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let dirs = MOST_PRUNED_WALKS + 8;
        for d in 0..dirs {
            std::fs::create_dir_all(root.join(format!("d{d}/sub"))).unwrap();
            for file in ["a.py", "b.py", "sub/c.py"] {
                std::fs::write(root.join(format!("d{d}/{file}")), "x = 1\n").unwrap();
            }
        }
        std::fs::write(root.join(".gitignore"), "d*/b.py\nd5/\nd38/\n!d38/a.py\n").unwrap();
        std::fs::write(root.join("d39/.gitignore"), "a.py\n").unwrap();
        let confinement = Confinement::new(std::slice::from_ref(&root), Selection::default());
        let mut asked = 0;
        for d in 0..dirs {
            for file in ["a.py", "b.py", "sub/c.py"] {
                let path = root.join(format!("d{d}/{file}"));
                let expected =
                    Confinement::files_taken_in(&root, path.parent().unwrap()).contains(&path);
                assert_eq!(confinement.allows(&path), expected, "{}", path.display());
                asked += usize::from(expected);
            }
        }
        assert!(!lock(&confinement.whole).is_empty());
        // Each directory's b.py, all of d5 and d38 (a directory ignored
        // above is never entered), and d39's a.py are refused.
        assert_eq!(asked, 3 * dirs - dirs - 2 * 2 - 1);
    }
}

/// `path` made absolute with its longest existing prefix resolved
/// (symlinks and `..`), the rest appended as written.
pub fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut head = absolute.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(head) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (head.parent(), head.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                head = parent;
            }
            _ => return absolute,
        }
    }
}
