//! Discovery: the files a run looks at.
//!
//! Directories are walked with `ignore` (`.gitignore`, `.ignore` and
//! `.git/info/exclude` honoured inside a git work tree, hidden files and
//! folders skipped, symlinks not followed); only `*.py` files are taken. A
//! path named on the command line is always processed, whatever its name or
//! ignore status.

use std::path::{Path, PathBuf};

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

/// The files to process, sorted and without duplicates, plus the paths that
/// could not be walked.
pub fn discover(paths: &[PathBuf], selection: &Selection) -> (Vec<PathBuf>, Vec<FileError>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => walk(path, selection, &mut files, &mut errors),
            Ok(meta) if meta.is_file() => files.push(clean(path)),
            Ok(_) => errors.push(FileError::NotAFile { path: path.clone() }),
            Err(source) => errors.push(FileError::Read {
                path: path.clone(),
                source,
            }),
        }
    }
    files.sort();
    files.dedup();
    (files, errors)
}

fn walk(root: &Path, selection: &Selection, files: &mut Vec<PathBuf>, errors: &mut Vec<FileError>) {
    for entry in ignore::WalkBuilder::new(root).build() {
        match entry {
            Ok(entry) => {
                let is_file = entry.file_type().is_some_and(|t| t.is_file());
                if is_file
                    && entry.path().extension().is_some_and(|e| e == "py")
                    && selection.takes(entry.path())
                {
                    files.push(clean(entry.path()));
                }
            }
            Err(err) => {
                let path = match &err {
                    ignore::Error::WithPath { path, .. } => path.clone(),
                    _ => root.to_path_buf(),
                };
                errors.push(FileError::Read {
                    path,
                    source: std::io::Error::other(err.to_string()),
                });
            }
        }
    }
}

/// `./a/b.py` -> `a/b.py`, so diff headers read `a/a/b.py` as git writes them.
fn clean(path: &Path) -> PathBuf {
    path.strip_prefix(".").unwrap_or(path).to_path_buf()
}
