//! How a hook was found: the rule and the place that make a function a hook
//! (`--list`'s "why", JSON's `discovered_by`, `--explain`).

use std::path::PathBuf;

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
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}
