//! Steps of evidence through calls: each call from a hook toward the
//! function that does the work, and the hook tables a function replays.

use std::path::Path;

use crate::analysis::project::ProjectIndex;
use crate::analysis::reached::Through;

pub use crate::analysis::reached::Step;

impl ProjectIndex<'_> {
    /// The hook tables the function at `line:column` of `path` replays by
    /// hand (`sub._forward_pre_hooks`), in the order of its calls.
    pub fn replayed_tables(&self, path: &Path, line: usize, column: usize) -> Vec<String> {
        let Some(module) = self.module(path) else {
            return Vec::new();
        };
        let Some(function) = module.function_at(line, column) else {
            return Vec::new();
        };
        let mut tables: Vec<String> = Vec::new();
        for call in &module.functions[function].calls {
            if let Some(Through::Replayed { table, .. }) = &call.through
                && !tables.contains(table)
            {
                tables.push(table.clone());
            }
        }
        tables
    }
}
