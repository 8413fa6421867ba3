//! Git, asked before writing: `--apply` refuses to rewrite a file that has
//! uncommitted changes (or is untracked) in a git work tree, so every rewrite
//! can be reviewed with `git diff` and undone with `git checkout`. Outside a
//! work tree, or without git, there is nothing to protect and no check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The files among `files` with uncommitted changes, staged or not, or not
/// tracked at all, in the git work trees that hold them.
pub fn uncommitted(files: &[&Path]) -> Vec<PathBuf> {
    // Group by work tree: one `git status` per repository.
    let mut by_repo: BTreeMap<PathBuf, Vec<&Path>> = BTreeMap::new();
    for file in files {
        let dir = match file.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Some(root) = work_tree(dir) {
            by_repo.entry(root).or_default().push(file);
        }
    }
    let mut dirty = Vec::new();
    for (root, files) in by_repo {
        for file in files {
            let Ok(absolute) = std::path::absolute(file) else {
                continue;
            };
            let output = Command::new("git")
                .arg("-C")
                .arg(&root)
                .args(["status", "--porcelain", "--untracked-files=all", "--"])
                .arg(&absolute)
                .output();
            if let Ok(output) = output
                && output.status.success()
                && !output.stdout.is_empty()
            {
                dirty.push(file.to_path_buf());
            }
        }
    }
    dirty.sort();
    dirty
}

fn work_tree(dir: &Path) -> Option<PathBuf> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let root = String::from_utf8(output.stdout).ok()?;
    Some(PathBuf::from(root.trim_end_matches(['\n', '\r'])))
}
