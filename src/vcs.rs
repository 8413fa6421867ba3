//! Git, asked before writing: `--apply` refuses to rewrite a file that git
//! could not give back, so every rewrite can be reviewed with `git diff` and
//! undone with `git checkout`: one with uncommitted changes, one not
//! tracked, and one git ignores (no `git checkout` restores it). What is
//! asked about is the file that would be written, which for a symlink is its
//! target (in whichever work tree holds it). Outside a work tree, or without
//! git, there is nothing to protect and no check.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why git could not give a file back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// Modified or staged: the rewrite would mix with the user's edits.
    Uncommitted,
    /// Never added: there is nothing to go back to.
    Untracked,
    /// Ignored: `git status` does not even show it.
    Ignored,
}

/// A file `--apply` would write and git could not give back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprotected {
    /// The path as given.
    pub path: PathBuf,
    /// The file written, where it is not `path` (a symlink's target).
    pub written: Option<PathBuf>,
    pub why: Why,
}

/// The files among `files` git could not give back, sorted by path.
pub fn unprotected(files: &[&Path]) -> Vec<Unprotected> {
    // Group by work tree: one `git` per file, one `rev-parse` per directory.
    let mut by_repo: BTreeMap<PathBuf, Vec<(&Path, PathBuf)>> = BTreeMap::new();
    let mut roots: BTreeMap<PathBuf, Option<PathBuf>> = BTreeMap::new();
    for &file in files {
        // The file written: a symlink is written through (see `write`).
        let Ok(real) = std::fs::canonicalize(file) else {
            continue;
        };
        let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
        let root = roots
            .entry(dir)
            .or_insert_with_key(|dir| work_tree(dir))
            .clone();
        if let Some(root) = root {
            by_repo.entry(root).or_default().push((file, real));
        }
    }
    let mut found = Vec::new();
    for (root, files) in by_repo {
        for (file, real) in files {
            let output = Command::new("git")
                .arg("-C")
                .arg(&root)
                .args([
                    "status",
                    "--porcelain",
                    "--untracked-files=all",
                    "--ignored=matching",
                    "--",
                ])
                .arg(&real)
                .output();
            let Ok(output) = output else { continue };
            if !output.status.success() || output.stdout.is_empty() {
                continue;
            }
            let why = match output.stdout.get(..2) {
                Some(b"!!") => Why::Ignored,
                Some(b"??") => Why::Untracked,
                _ => Why::Uncommitted,
            };
            let written = std::path::absolute(file)
                .ok()
                .filter(|given| *given != real)
                .map(|_| real.clone());
            found.push(Unprotected {
                path: file.to_path_buf(),
                written,
                why,
            });
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// The message `--apply` refuses with: each file, what git says of it, and
/// what the user can do.
pub fn refusal(files: &[Unprotected]) -> String {
    let mut parts = Vec::new();
    for why in [Why::Uncommitted, Why::Untracked, Why::Ignored] {
        let names: Vec<String> = files
            .iter()
            .filter(|f| f.why == why)
            .map(|f| match &f.written {
                Some(written) => format!("{} (a link to {})", f.path.display(), written.display()),
                None => f.path.display().to_string(),
            })
            .collect();
        if names.is_empty() {
            continue;
        }
        let one = names.len() == 1;
        let what = match why {
            Why::Uncommitted if one => "has uncommitted changes",
            Why::Uncommitted => "have uncommitted changes",
            Why::Untracked if one => "is not tracked by git",
            Why::Untracked => "are not tracked by git",
            Why::Ignored if one => "is ignored by git, so `git checkout` cannot restore it",
            Why::Ignored => "are ignored by git, so `git checkout` cannot restore them",
        };
        parts.push(format!("{} {what}", names.join(", ")));
    }
    format!(
        "refusing to write: {} (commit or stash them so the rewrite can be reviewed and undone, or pass --allow-dirty)",
        parts.join("; ")
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_each_file_with_what_git_says_of_it() {
        let file = |path: &str, written: Option<&str>, why| Unprotected {
            path: PathBuf::from(path),
            written: written.map(PathBuf::from),
            why,
        };
        let message = refusal(&[
            file("a.py", None, Why::Uncommitted),
            file("l.py", Some("/src/real.py"), Why::Uncommitted),
            file("gen.py", None, Why::Ignored),
        ]);
        assert_eq!(
            message,
            "refusing to write: a.py, l.py (a link to /src/real.py) have uncommitted changes; \
             gen.py is ignored by git, so `git checkout` cannot restore it \
             (commit or stash them so the rewrite can be reviewed and undone, or pass --allow-dirty)"
        );
    }
}
