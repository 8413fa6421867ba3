//! Discovery: the files a run looks at.
//!
//! Directories are walked with `ignore` (`.gitignore`, `.ignore` and
//! `.git/info/exclude` honoured inside a git work tree, hidden files and
//! folders skipped, symlinks not followed); only `*.py` files are taken. A
//! path named on the command line is always processed, whatever its name or
//! ignore status.

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
    fn takes(&self, path: &Path) -> bool {
        self.include.as_ref().is_none_or(|f| f.matches(path))
            && !self.exclude.iter().any(|f| f.matches(path))
    }
}

/// Walks `paths` on `threads` threads and hands every file to process to
/// `visit` as soon as it is found, on the thread that found it, so reading
/// and parsing overlap the walk. Returns what `visit` gave per file, sorted
/// by path and without duplicates (a file reached twice is kept once), plus
/// the paths that could not be walked (in no particular order).
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
    let found = |path: PathBuf| {
        let outcome = visit(&path);
        lock(&visited).push((path, outcome));
    };
    let mut roots = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => roots.push(path),
            Ok(meta) if meta.is_file() => files.push(clean(path)),
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
    if let Some((first, rest)) = roots.split_first() {
        let mut builder = ignore::WalkBuilder::new(first);
        for root in rest {
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
                            found(clean(entry.path()));
                        }
                    }
                    Err(err) => lock(&errors).push(walk_error(err, &roots)),
                }
                ignore::WalkState::Continue
            })
        });
    }
    let mut visited = visited.into_inner().unwrap_or_else(|e| e.into_inner());
    visited.sort_by(|a, b| a.0.cmp(&b.0));
    visited.dedup_by(|a, b| a.0 == b.0);
    (
        visited,
        errors.into_inner().unwrap_or_else(|e| e.into_inner()),
    )
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
