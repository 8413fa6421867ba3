//! How a function is reached when no call of it is written: handed over to
//! be called on the module's behalf, or replayed from a module's hook table
//! (`queries/handed.scm`). The project follows these like calls, and each
//! evidence step reached this way says how.

use std::path::PathBuf;

use serde::Serialize;

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
    /// How its authors fenced it, if they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced: Option<String>,
    /// The line of the call (in the function before it) that reaches it.
    #[serde(skip)]
    pub call_line: Option<usize>,
}

impl Step {
    /// `fetch_params`, `fetch_params (handed to PreBackwardFunction.apply)`,
    /// `onload_ (fenced)`.
    pub fn describe(&self) -> String {
        let mut text = self.qualname.clone();
        if let Some(through) = &self.through {
            text.push_str(&format!(" ({})", through.describe()));
        }
        if self.fenced.is_some() {
            text.push_str(" (fenced)");
        }
        text
    }
}

/// How a function is reached when no call of it is written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Through {
    /// Handed over to be called on the module's behalf, now or at backward
    /// time: to what (`tensor.register_hook`, `PreBackwardFunction.apply`).
    HandedTo(String),
    /// A hook of a module's hook table (`sub._forward_pre_hooks`), replayed
    /// by hand: every hook the project registers with `registrar`.
    Replayed {
        table: String,
        registrar: &'static str,
    },
}

impl Through {
    /// `handed to tensor.register_hook`, `replayed from sub._forward_pre_hooks`.
    pub fn describe(&self) -> String {
        match self {
            Through::HandedTo(to) => format!("handed to {to}"),
            Through::Replayed { table, .. } => format!("registered hook replayed from {table}"),
        }
    }
}

/// The registrar that fills a module's hook table.
pub(super) fn registrar_of_table(table: &str) -> &'static str {
    if table.starts_with("_forward_pre_hooks") {
        "register_forward_pre_hook"
    } else {
        "register_forward_hook"
    }
}
