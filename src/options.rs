//! What a run is asked to do: its mode and options.

use std::path::PathBuf;

use crate::analysis::{file_facts, project, vocabulary};
use crate::{discover, found, plan};

/// What a run does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Print the diff; write nothing.
    Diff,
    /// Write the changes.
    Apply,
    /// Write nothing; exit 1 if anything would change.
    Check,
    /// Print every hook site with its status; write nothing.
    List,
}

/// What an analysis run looks for and how.
#[derive(Clone)]
pub struct Options {
    /// Fence hooks that do no offload work too.
    pub all_hooks: bool,
    /// Parse only files that can matter (see [`prefilter`]), and query only
    /// the parts of a tree that can match (see [`matcher::analyze`]); off
    /// parses every file and walks every tree whole.
    pub prefilter: bool,
    pub strategy: plan::Strategy,
    /// `--helper-module`: the wrap strategy's helper, as a dotted module name.
    pub helper_module: Option<String>,
    /// The names matched: defaults plus configuration.
    pub vocabulary: std::sync::Arc<vocabulary::Vocabulary>,
    /// Which walked files to take (`--include`) and skip (`--exclude`, the
    /// configuration's `exclude`); files named explicitly are always taken.
    pub selection: discover::Selection,
    /// A progress bar to advance per file read; drawn only once a run has
    /// taken over a second.
    pub progress: Option<indicatif::ProgressBar>,
    /// Hooks found by use in an earlier round of the same run.
    pub discovered: std::sync::Arc<found::Discovered>,
    /// `--project-root`: the project the given paths belong to. Without it,
    /// the nearest directory above each path that holds `pyproject.toml`,
    /// `setup.py`, `setup.cfg` or `.git`.
    pub project_root: Option<PathBuf>,
    /// Classes of the project outside the given paths (for the class index
    /// of a partial run).
    pub context_classes: std::sync::Arc<Vec<file_facts::ClassFact>>,
    /// Modules the project index read on demand, kept across rounds.
    pub module_cache: std::sync::Arc<project::ModuleCache>,
    /// A review (`--interactive`, `--replay`) decides which hooks get a
    /// fence: only a fence already in the source covers what a hook calls.
    pub reviewed: bool,
    /// The files a walk finds through `..` are spelled from the working
    /// directory (the project-context pass over a root above it: its
    /// `../pkg/x.py` is the given run's `x.py`).
    pub spelled_from_cwd: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            all_hooks: false,
            prefilter: true,
            strategy: plan::Strategy::Decorate,
            helper_module: None,
            vocabulary: std::sync::Arc::new(vocabulary::Vocabulary::default()),
            selection: discover::Selection::default(),
            progress: None,
            discovered: std::sync::Arc::default(),
            project_root: None,
            context_classes: std::sync::Arc::default(),
            module_cache: std::sync::Arc::default(),
            reviewed: false,
            spelled_from_cwd: false,
        }
    }
}
