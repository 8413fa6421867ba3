//! Fences another module of the project defines. A decorator whose name an
//! import binds fences the function when the module it comes from defines
//! that name as a module-level function that calls a disable, or assigns it
//! one ([`ModuleFacts::fences`]), followed through re-exports
//! (`from .typing import disable_compiler` in a package's `__init__`).

use std::sync::Arc;

use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::project::ProjectIndex;

/// How many re-exports a fence's name is followed through.
const MOST_REEXPORTS: usize = 4;

impl ProjectIndex<'_> {
    /// The absolute dotted path of the fence that `callee`, a decorator as
    /// written in `module`, names, when a module of the project defines
    /// one there; the modules on the way are read on demand, so a run over
    /// one file answers as a run over the whole tree.
    pub fn imported_fence(&self, module: &ModuleFacts, callee: &str) -> Option<String> {
        let (first, rest) = callee.split_once('.').unwrap_or((callee, ""));
        let bound = module.imports.get(first)?;
        let mut full = if rest.is_empty() {
            bound.clone()
        } else {
            format!("{bound}.{rest}")
        };
        let mut near: Option<Arc<ModuleFacts>> = None;
        for _ in 0..=MOST_REEXPORTS {
            let (owner, name) = full.rsplit_once('.')?;
            let facts = self.module_named(owner, near.as_deref().unwrap_or(module))?;
            if facts.fences.contains(name) {
                return Some(full);
            }
            full = facts.imports.get(name)?.clone();
            near = Some(facts);
        }
        None
    }
}
