//! What runs a model's compute: a forward that calls another forward, a
//! submodule held in an attribute, a function it is handed or one handed to
//! `checkpoint`. Such a function is never fenced (that would leave the model
//! uncompiled); see `roots` and `layer_transfer`.

use std::collections::HashSet;

use crate::analysis::module_facts::{CallFact, Callee, FunctionFact, ModuleFacts};

/// Methods every `nn.Module` has: `self.to(...)` is no call of a submodule.
const MODULE_METHODS: &[&str] = &[
    "to",
    "cuda",
    "cpu",
    "half",
    "float",
    "double",
    "bfloat16",
    "type",
    "apply",
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "state_dict",
    "load_state_dict",
    "train",
    "eval",
    "requires_grad_",
    "zero_grad",
    "get_submodule",
    "get_parameter",
    "get_buffer",
    "register_buffer",
    "register_parameter",
    "register_module",
    "add_module",
    "extra_repr",
    "_get_name",
];

/// Whether `fact` (of `module`) calls a model's compute: an original
/// forward, a submodule held in an attribute (`self.module(...)`), a
/// function it is handed, or a function handed to `checkpoint`.
pub(super) fn calls_compute(module: &ModuleFacts, fact: &FunctionFact) -> bool {
    fact.calls
        .iter()
        .any(|call| is_compute_call(module, fact, call))
}

/// Whether `call` (of `fact`, in `module`) runs a model's compute (see
/// [`calls_compute`]).
pub(super) fn is_compute_call(module: &ModuleFacts, fact: &FunctionFact, call: &CallFact) -> bool {
    match &call.callee {
        Callee::Name(name) => {
            crate::analysis::discovery::is_forward_name(name)
                || name.rsplit('.').next() == Some("checkpoint")
                || (call.opaque && fact.parameters.iter().any(|p| p == name))
        }
        Callee::Method { receiver, method } => {
            if crate::analysis::discovery::is_forward_name(method) || method == "checkpoint" {
                return true;
            }
            // `self.block(x)`: an attribute called, not a method.
            receiver.as_deref() == Some("self")
                && fact.is_method
                && !fact.static_method
                && !MODULE_METHODS.contains(&method.as_str())
                && !method.starts_with("__")
                && fact
                    .self_class
                    .as_ref()
                    .is_some_and(|class| !defines_method(module, class, method))
        }
    }
}

/// Whether `call` (of `fact`) runs the `forward` its class inherits
/// (`super().forward(x)`): a method called on what `super()` returns, the
/// two calls starting at the same byte.
pub(super) fn is_base_forward(fact: &FunctionFact, call: &CallFact) -> bool {
    matches!(&call.callee, Callee::Method { receiver: None, method } if method == "forward")
        && fact.calls.iter().any(|other| {
            other.start == call.start
                && matches!(&other.callee, Callee::Name(name) if name == "super")
        })
}

/// Whether `class` of `module`, or a base class defined in the same module,
/// defines `method` (bases in other files are not read: a name called on
/// `self` that no class at hand defines counts as an attribute called).
fn defines_method(module: &ModuleFacts, class: &str, method: &str) -> bool {
    let mut pending = vec![class];
    let mut seen: HashSet<&str> = HashSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name) {
            continue;
        }
        let Some(facts) = module.classes.get(name) else {
            continue;
        };
        if facts
            .methods
            .iter()
            .any(|&i| module.functions[i].name == method)
        {
            return true;
        }
        pending.extend(
            facts
                .bases
                .iter()
                .map(|b| b.rsplit('.').next().unwrap_or(b)),
        );
    }
    false
}
