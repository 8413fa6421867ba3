//! Discovery: the files a run looks at.
//!
//! Directories are walked with `ignore` (`.gitignore`, `.ignore` and
//! `.git/info/exclude` honoured inside a git work tree, hidden files and
//! folders skipped, symlinks not followed); only `*.py` files are taken. A
//! path named on the command line is always processed, whatever its name or
//! ignore status.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;

use crate::config::Filter;
use crate::error::FileError;

/// Which walked files to take: `--include` globs (if any, a file must match
/// one), `--exclude` globs and the configuration's `exclude` (a file or any
/// of its directories matching one is skipped).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub include: Option<Filter>,
    pub exclude: Vec<Filter>,
}

impl Selection {
    pub fn takes(&self, path: &Path) -> bool {
        self.include.as_ref().is_none_or(|f| f.matches(path))
            && !self.exclude.iter().any(|f| f.matches(path))
    }
}

/// Walks `paths` on `threads` threads and hands every file to process to
/// `visit` as soon as it is found, on the thread that found it, so reading
/// and parsing overlap the walk. Returns what `visit` gave per file, sorted
/// by path, plus the paths that could not be walked (in no particular order).
///
/// A file reached more than once (named twice, named and walked, through a
/// symlink and as its target, through `..`, as two hard links, by
/// overlapping directories) is processed once, under its first spelling:
/// the one from the earliest path on the command line, and among those
/// walked from one directory the one that sorts first.
pub fn visit_all<T, F>(
    paths: &[PathBuf],
    selection: &Selection,
    threads: usize,
    visit: F,
) -> (Vec<(PathBuf, T)>, Vec<FileError>)
where
    T: Send,
    F: Fn(&Path) -> T + Sync,
{
    let visited = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    let claims = Mutex::new(HashMap::new());
    let found = |path: PathBuf| {
        let outcome = visit(&path);
        lock(&visited).push((path, outcome));
    };
    let mut roots = Vec::new();
    let mut files = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => roots.push((index, path)),
            Ok(meta) if meta.is_file() => {
                let path = clean(path);
                if claim(&claims, &path, &meta, index) {
                    files.push(path);
                }
            }
            Ok(_) => lock(&errors).push(FileError::NotAFile { path: path.clone() }),
            Err(source) => lock(&errors).push(FileError::Read {
                path: path.clone(),
                source,
            }),
        }
    }
    // Files named on the command line (pre-commit passes hundreds) share
    // out over the pool; directories are walked by `ignore`'s own threads.
    files.into_par_iter().for_each(found);
    let root_paths: Vec<&PathBuf> = roots.iter().map(|(_, p)| *p).collect();
    if let Some(((_, first), rest)) = roots.split_first() {
        let mut builder = ignore::WalkBuilder::new(first);
        for (_, root) in rest {
            builder.add(root);
        }
        builder.threads(threads.max(1)).build_parallel().run(|| {
            Box::new(|entry| {
                match entry {
                    Ok(entry) => {
                        let is_file = entry.file_type().is_some_and(|t| t.is_file());
                        if is_file
                            && entry.path().extension().is_some_and(|e| e == "py")
                            && selection.takes(entry.path())
                        {
                            let path = clean(entry.path());
                            let rank = root_of(entry.path(), &roots);
                            let fresh = match entry.metadata() {
                                Ok(meta) => claim(&claims, &path, &meta, rank),
                                Err(_) => true,
                            };
                            if fresh {
                                found(path);
                            }
                        }
                    }
                    Err(err) => lock(&errors).push(walk_error(err, &root_paths)),
                }
                ignore::WalkState::Continue
            })
        });
    }
    let mut visited = visited.into_inner().unwrap_or_else(|e| e.into_inner());
    // Where a better spelling of a file turned up after the first one was
    // visited (the walk runs in parallel), the file is visited again under
    // it: rare, and the result does not depend on the walk's timing.
    let claims = claims.into_inner().unwrap_or_else(|e| e.into_inner());
    let respell: HashMap<PathBuf, PathBuf> = claims
        .into_values()
        .filter(|c| c.best != c.visited)
        .map(|c| (c.visited.1, c.best.1))
        .collect();
    if !respell.is_empty() {
        visited = visited
            .into_iter()
            .map(|(path, outcome)| match respell.get(&path) {
                Some(better) => (better.clone(), visit(better)),
                None => (path, outcome),
            })
            .collect();
    }
    visited.sort_by(|a, b| a.0.cmp(&b.0));
    visited.dedup_by(|a, b| a.0 == b.0);
    (
        visited,
        errors.into_inner().unwrap_or_else(|e| e.into_inner()),
    )
}

/// What makes two paths the same file: device and inode where the platform
/// has them (a hard link is the same file too), else the canonical path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileId {
    #[cfg(unix)]
    Inode { device: u64, inode: u64 },
    #[cfg_attr(unix, allow(dead_code))]
    Path(PathBuf),
}

impl FileId {
    #[cfg(unix)]
    fn of(_path: &Path, meta: &std::fs::Metadata) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        Some(FileId::Inode {
            device: meta.dev(),
            inode: meta.ino(),
        })
    }

    #[cfg(not(unix))]
    fn of(path: &Path, _meta: &std::fs::Metadata) -> Option<FileId> {
        std::fs::canonicalize(path).ok().map(FileId::Path)
    }
}

/// A spelling of a file: the index of the command-line path it came from,
/// then the path itself. The least one is kept.
type Spelling = (usize, PathBuf);

/// The spellings of one file seen so far.
struct Claim {
    /// The one handed to `visit`.
    visited: Spelling,
    /// The least seen.
    best: Spelling,
}

/// Records that `path` (from the `rank`-th command-line path) was reached;
/// true if it is the first spelling of its file seen, which is then to be
/// visited.
fn claim(
    claims: &Mutex<HashMap<FileId, Claim>>,
    path: &Path,
    meta: &std::fs::Metadata,
    rank: usize,
) -> bool {
    let Some(id) = FileId::of(path, meta) else {
        return true;
    };
    let spelling = (rank, path.to_path_buf());
    let mut claims = lock(claims);
    match claims.get_mut(&id) {
        Some(claim) => {
            if spelling < claim.best {
                claim.best = spelling;
            }
            false
        }
        None => {
            claims.insert(
                id,
                Claim {
                    visited: spelling.clone(),
                    best: spelling,
                },
            );
            true
        }
    }
}

/// The index on the command line of the directory `path` was walked from:
/// the deepest one it lies in (`src/../src/a.py` lies in `src` and in
/// `src/../src`, and came from the second), the first of equals.
fn root_of(path: &Path, roots: &[(usize, &PathBuf)]) -> usize {
    roots
        .iter()
        .filter(|(_, root)| path.starts_with(root))
        .max_by_key(|(index, root)| (root.components().count(), std::cmp::Reverse(*index)))
        .map_or(usize::MAX, |(index, _)| *index)
}

/// A lock no panic elsewhere can make unusable: the data is only ever pushed to.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn walk_error(err: ignore::Error, roots: &[&PathBuf]) -> FileError {
    let path = match &err {
        ignore::Error::WithPath { path, .. } => path.clone(),
        _ => roots.first().map_or_else(PathBuf::new, |r| r.to_path_buf()),
    };
    FileError::Read {
        path,
        source: std::io::Error::other(err.to_string()),
    }
}

/// `./a/b.py` -> `a/b.py`, so diff headers read `a/a/b.py` as git writes them.
fn clean(path: &Path) -> PathBuf {
    path.strip_prefix(".").unwrap_or(path).to_path_buf()
}
