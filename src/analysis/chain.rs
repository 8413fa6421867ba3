//! Evidence through calls: the shortest chain of calls from a hook to a
//! function that does offload work (or that its authors fenced).

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::analysis::evidence::Sign;
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::Through;

/// One step of an evidence chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub qualname: String,
    pub path: PathBuf,
    pub line: usize,
    /// Reached not by a call written there but another way (handed to
    /// `register_hook`, replayed from a hook table).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<Through>,
}

impl Step {
    /// `fetch_params`, or `fetch_params (handed to PreBackwardFunction.apply)`.
    pub fn describe(&self) -> String {
        match &self.through {
            Some(through) => format!("{} ({})", self.qualname, through.describe()),
            None => self.qualname.clone(),
        }
    }
}

/// Why a hook counts as offload work through what it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// From the first callee to the function holding the sign.
    pub steps: Vec<Step>,
    /// The sign found there, or `None` when the last step is a function its
    /// authors fenced.
    pub sign: Option<Sign>,
    pub fenced: Option<String>,
}

impl Chain {
    /// `fetches ... via a -> b (path:line, fenced)`.
    pub fn describe(&self) -> String {
        let names: Vec<String> = self.steps.iter().map(Step::describe).collect();
        let last = self.steps.last();
        let place = last.map_or(String::new(), |s| {
            format!(" ({}:{}", s.path.display(), s.line)
        });
        match (&self.sign, &self.fenced) {
            (Some(sign), _) => format!("{} via {}{place})", sign.detail, names.join(" -> ")),
            (None, Some(_)) => format!(
                "calls a function its authors fenced: {}{place}, fenced)",
                names.join(" -> ")
            ),
            (None, None) => names.join(" -> "),
        }
    }
}

/// How deep calls are followed from a hook.
pub const MOST_CALL_DEPTH: usize = 6;

impl ProjectIndex<'_> {
    /// The shortest chain of calls from the function at `line:column` of
    /// `path` to a function with a counted sign or a fence of its authors,
    /// breadth first, at most [`MOST_CALL_DEPTH`] calls deep, cycles cut.
    pub fn chain_from(&self, path: &Path, line: usize, column: usize) -> Option<Chain> {
        let module = self.module(path)?;
        let start = module.function_at(line, column)?;
        let mut queue: VecDeque<(FunctionRef, Vec<Step>)> = VecDeque::new();
        let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
        seen.insert((module.path.clone(), start));
        queue.push_back(((module, start), Vec::new()));
        while let Some(((module, function), steps)) = queue.pop_front() {
            if steps.len() >= MOST_CALL_DEPTH {
                continue;
            }
            let calls = module.functions[function].calls.clone();
            for call in &calls {
                for (target_module, target) in self.targets(&module, function, call) {
                    if !seen.insert((target_module.path.clone(), target)) {
                        continue;
                    }
                    let fact = &target_module.functions[target];
                    let mut next = steps.clone();
                    next.push(Step {
                        qualname: fact.qualname.clone(),
                        path: target_module.path.clone(),
                        line: fact.line,
                        through: call.through.clone(),
                    });
                    if let Some(fence) = &fact.fenced {
                        return Some(Chain {
                            steps: next,
                            sign: fact.signs.iter().find(|s| s.counts()).cloned(),
                            fenced: Some(fence.clone()),
                        });
                    }
                    if let Some(sign) = fact.signs.iter().find(|s| s.counts()) {
                        return Some(Chain {
                            steps: next,
                            sign: Some(sign.clone()),
                            fenced: None,
                        });
                    }
                    queue.push_back(((Arc::clone(&target_module), target), next));
                }
            }
        }
        None
    }

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
