//! How a function is reached when no call of it is written: handed over to
//! be called on the module's behalf, or replayed from a module's hook table
//! (`queries/handed.scm`). The project follows these like calls, and each
//! evidence step reached this way says how.

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
