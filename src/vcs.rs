//! Git, asked before writing: `--apply` refuses to rewrite a file that git
//! could not give back, so every rewrite can be reviewed with `git diff` and
//! undone with `git checkout`: one with uncommitted changes, one not
//! tracked, and one git ignores (no `git checkout` restores it). What is
//! asked about is the file that would be written, which for a symlink is its
//! target (in whichever work tree holds it). Outside a work tree, or without
//! git, there is nothing to protect and no check. Any other failure of git (a
//! corrupt index, a repository git will not read because another user owns
//! it) is not taken for "clean": it is an error naming the file and git's
//! message, and nothing is written.

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

/// Git failed while asked about a file: the file cannot be known to be safe
/// to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitFailed {
    pub path: PathBuf,
    /// What git printed (its first line), or why it could not be run.
    pub message: String,
}

impl std::fmt::Display for GitFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: cannot tell whether git can give this file back: {} \
             (fix the repository, or pass --allow-dirty to write without the check)",
            self.path.display(),
            self.message
        )
    }
}

/// The files among `files` git could not give back, sorted by path; or the
/// first file git failed on.
pub fn unprotected(files: &[&Path]) -> Result<Vec<Unprotected>, GitFailed> {
    // Group by work tree: one `git` per file, one `rev-parse` per directory.
    let mut by_repo: BTreeMap<PathBuf, Vec<(&Path, PathBuf)>> = BTreeMap::new();
    let mut roots: BTreeMap<PathBuf, Option<PathBuf>> = BTreeMap::new();
    for &file in files {
        // The file written: a symlink is written through (see `write`).
        let Ok(real) = std::fs::canonicalize(file) else {
            continue;
        };
        let dir = real.parent().unwrap_or(Path::new("/")).to_path_buf();
        let root = match roots.get(&dir) {
            Some(root) => root.clone(),
            None => {
                let root = work_tree(&dir).map_err(|message| GitFailed {
                    path: file.to_path_buf(),
                    message,
                })?;
                roots.insert(dir, root.clone());
                root
            }
        };
        if let Some(root) = root {
            by_repo.entry(root).or_default().push((file, real));
        }
    }
    let mut found = Vec::new();
    for (root, files) in by_repo {
        for (file, real) in files {
            let output = git()
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
            let failed = |message| GitFailed {
                path: file.to_path_buf(),
                message,
            };
            let output = output.map_err(|e| failed(format!("cannot run git: {e}")))?;
            if !output.status.success() {
                return Err(failed(first_line(&output.stderr)));
            }
            if output.stdout.is_empty() {
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
    Ok(found)
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

/// Git with its messages in English, whatever the user's locale, so that
/// "not a repository" can be told from a failure.
fn git() -> Command {
    let mut command = Command::new("git");
    command.env("LC_ALL", "C").env("LANGUAGE", "C");
    command
}

/// The work tree that holds `dir`: `Ok(None)` when git is not installed or
/// `dir` is in no work tree (outside any repository, or in a bare one);
/// `Err` with git's message for any other failure.
fn work_tree(dir: &Path) -> Result<Option<PathBuf>, String> {
    let output = match git()
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot run git: {e}")),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if outside_work_tree(&stderr) {
            return Ok(None);
        }
        return Err(first_line(&output.stderr));
    }
    let root = String::from_utf8(output.stdout)
        .map_err(|_| "git printed a work tree path that is not UTF-8".to_string())?;
    Ok(Some(PathBuf::from(root.trim_end_matches(['\n', '\r']))))
}

/// Whether git's message says there is no work tree here (and so nothing to
/// protect), as opposed to a repository it could not read.
fn outside_work_tree(stderr: &str) -> bool {
    stderr.contains("not a git repository") || stderr.contains("must be run in a work tree")
}

fn first_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("git failed without a message");
    line.to_string()
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
