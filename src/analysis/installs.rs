//! What a module installs on modules at run time, as facts: forward
//! replacements, classes swapped in, hook registrations.

use crate::analysis::hook_values::Value;

/// `m.forward = value` (or `setattr(m, "forward", value)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardReplacement {
    pub line: usize,
    /// The module whose forward is replaced, as written (`module`, `m.__class__`).
    pub target: String,
    pub value: Value,
    /// The function the assignment stands in, if any.
    pub scope: Option<usize>,
}

/// A class swapped in (`x.__class__ = C`), or a function a class made by
/// `type(name, bases, {...})` holds where attribute reads or the forward
/// run (`{"__getattr__": f}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwappedClass {
    pub line: usize,
    /// `__getattr__`, `__getattribute__` or `forward` for a namespace
    /// entry; empty for a class swapped in (each of those it defines).
    pub slot: String,
    /// The function put there, or the class swapped in.
    pub value: Value,
    /// The function the statement stands in, if any.
    pub scope: Option<usize>,
}

/// A call that registers a hook with torch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Where the call starts (as the matcher reports an unresolved one).
    pub line: usize,
    pub column: usize,
    pub value: Value,
    /// The function the call stands in, if any.
    pub scope: Option<usize>,
    /// The registrar's name (`register_forward_pre_hook`).
    pub registrar: String,
    /// A backward registrar (`register_full_backward_hook`).
    pub backward: bool,
}
