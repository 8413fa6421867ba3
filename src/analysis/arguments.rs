//! What a sign's receiver and arguments are, read from the function's own
//! text: a device or a dtype, module state (the hook's module, its
//! parameters and buffers, `.data`), an activation the hook passes on, a copy
//! kept aside (to hash, log or keep), or a timing call around the forward.

use tree_sitter::Node;

use crate::queries::QUERIES;
use crate::syntax::{parameter_names, root_name, text_of};

pub(super) enum Argument {
    Device,
    Dtype,
    /// A value that may be either (a variable, another tensor).
    Unknown,
    /// Neither (`copy=True`, `memory_format=...`).
    Neither,
}

pub(super) const DEVICE_PREFIXES: &[&str] =
    &["cpu", "cuda", "mps", "meta", "xpu", "npu", "hpu", "xla"];

pub(super) const TORCH_DTYPES: &[&str] = &[
    "float32",
    "float",
    "float16",
    "half",
    "bfloat16",
    "float64",
    "double",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "int",
    "long",
    "bool",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
];

pub(super) fn argument_kind(argument: Node<'_>, text: &str) -> Argument {
    match argument.kind() {
        "string" => {
            let content = text_of(argument, text)
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .trim_matches(|c| c == '"' || c == '\'');
            if DEVICE_PREFIXES.iter().any(|p| content.starts_with(p)) {
                Argument::Device
            } else {
                Argument::Unknown
            }
        }
        "integer" => Argument::Device,
        "keyword_argument" => {
            let name = argument
                .child_by_field_name("name")
                .map_or("", |n| text_of(n, text));
            match name {
                "device" => Argument::Device,
                "dtype" => Argument::Dtype,
                "non_blocking" => Argument::Device,
                _ => Argument::Neither,
            }
        }
        "call" => {
            let callee = argument
                .child_by_field_name("function")
                .and_then(|f| crate::syntax::dotted_name(f, text))
                .unwrap_or_default();
            if callee.ends_with("device") {
                Argument::Device
            } else {
                Argument::Unknown
            }
        }
        "identifier" | "attribute" => {
            let spelled = text_of(argument, text);
            let last = spelled
                .rsplit('.')
                .next()
                .unwrap_or(spelled)
                .to_ascii_lowercase();
            if last.contains("device") {
                Argument::Device
            } else if last.contains("dtype")
                || (spelled.starts_with("torch.") && TORCH_DTYPES.contains(&last.as_str()))
            {
                Argument::Dtype
            } else {
                Argument::Unknown
            }
        }
        _ => Argument::Unknown,
    }
}

/// Methods and attributes that reach a module's state.
pub(super) const STATE_PARTS: &[&str] = &[
    ".parameters(",
    ".named_parameters(",
    ".buffers(",
    ".named_buffers(",
    ".state_dict(",
    ".weight",
    ".bias",
    ".data",
    "._parameters",
    "._buffers",
];

/// Iterables whose items are module state.
pub(super) const STATE_SOURCES: &[&str] = &[
    "parameters(",
    "named_parameters(",
    "buffers(",
    "named_buffers(",
    "state_dict(",
    "modules(",
    "named_modules(",
    "children(",
    "named_children(",
    "_parameters",
    "_buffers",
];

/// Names that hold modules or their state by convention.
pub(super) const STATE_WORDS: &[&str] = &[
    "param",
    "weight",
    "module",
    "model",
    "layer",
    "block",
    "buffer",
    "submodule",
];

/// Whether `receiver` is module state: the hook's module, an attribute of it
/// or of the hook object, its parameters and buffers, or a tensor taken from
/// them.
pub(super) fn is_module_state(receiver: Node<'_>, owner: Option<Node<'_>>, text: &str) -> bool {
    let spelled = text_of(receiver, text);
    if STATE_PARTS.iter().any(|p| spelled.contains(p)) {
        return true;
    }
    let Some(root) = root_name(receiver, text) else {
        return false;
    };
    if root == "self" {
        return receiver.kind() != "identifier";
    }
    if let Some(function) = owner {
        let parameters = parameter_names(function, text);
        let first = parameters
            .iter()
            .find(|p| p.as_str() != "self" && p.as_str() != "cls");
        if first.is_some_and(|p| p == root) && !is_activation_name(root) {
            return true;
        }
        if loop_over_state(function, root, text) {
            return true;
        }
    }
    let lower = root.to_ascii_lowercase();
    // `hidden_states`, `layer_outputs`: activations, whatever else they say.
    let activation = [
        "output",
        "input",
        "hidden",
        "logit",
        "activation",
        "states",
        "grad",
    ]
    .iter()
    .any(|w| lower.contains(w));
    !activation && STATE_WORDS.iter().any(|w| lower.contains(w))
}

/// The first argument of `call` when it is an activation: the hook's inputs
/// or output (its parameters after the module), or a name that holds one by
/// convention.
pub(super) fn activation_argument(
    call: Node<'_>,
    owner: Option<Node<'_>>,
    text: &str,
) -> Option<String> {
    let first = call
        .child_by_field_name("arguments")?
        .named_child(0)
        .filter(|a| a.kind() != "keyword_argument")?;
    let root = root_name(first, text)?;
    let parameters = owner.map(|f| parameter_names(f, text)).unwrap_or_default();
    let mut after_module = parameters
        .iter()
        .filter(|p| !matches!(p.as_str(), "self" | "cls"))
        .skip(1);
    let hook_value = after_module.any(|p| p == root);
    (hook_value || is_activation_name(root)).then(|| crate::syntax::short(text_of(first, text)))
}

/// Whether `name` in `function` is one of its parameters, or a loop variable
/// over one (`for a in args`, `tuple(a.cuda() for a in args)`).
pub(super) fn is_hook_value(function: Node<'_>, name: &str, text: &str) -> bool {
    let parameters = parameter_names(function, text);
    if parameters.iter().any(|p| p == name && p != "self") {
        return true;
    }
    let Some(body) = function.child_by_field_name("body") else {
        return function.kind() == "lambda";
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if matches!(node.kind(), "for_statement" | "for_in_clause")
            && let (Some(left), Some(right)) = (
                node.child_by_field_name("left"),
                node.child_by_field_name("right"),
            )
        {
            let words = |n: Node<'_>| -> Vec<String> {
                text_of(n, text)
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            if words(left).iter().any(|w| w == name)
                && words(right)
                    .iter()
                    .any(|w| parameters.contains(w) && w != "self")
            {
                return true;
            }
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if !crate::syntax::is_function(child) {
                stack.push(child);
            }
        }
    }
    false
}

/// Names that, by convention, hold activations, not modules.
pub(super) fn is_activation_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "input", "output", "arg", "hidden", "logit", "x", "out", "tensor", "result", "grad",
    ]
    .iter()
    .any(|w| lower == *w || lower.starts_with(w))
}

/// Whether `name` is the target of a `for` loop in `function` whose iterable
/// yields module state (`for p in module.parameters():`).
pub(super) fn loop_over_state(function: Node<'_>, name: &str, text: &str) -> bool {
    let Some(body) = function.child_by_field_name("body") else {
        return false;
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if matches!(node.kind(), "for_statement" | "for_in_clause")
            && let (Some(left), Some(right)) = (
                node.child_by_field_name("left"),
                node.child_by_field_name("right"),
            )
        {
            let binds = text_of(left, text)
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == name);
            let source = text_of(right, text);
            if binds && STATE_SOURCES.iter().any(|s| source.contains(s)) {
                return true;
            }
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if !crate::syntax::is_function(child) {
                stack.push(child);
            }
        }
    }
    false
}

/// Callees that take a copy of an activation aside: hashing, printing,
/// logging, keeping it in a list or a dict, turning it into Python values.
pub(super) const ASIDE_CALLEES: &[&str] = &[
    "hash",
    "print",
    "str",
    "repr",
    "format",
    "append",
    "extend",
    "add",
    "log",
    "info",
    "debug",
    "warning",
    "warn",
    "save",
    "numpy",
    "tolist",
    "item",
    "update",
    "put",
    "write",
    "record",
    "observe",
    "sha256",
    "md5",
    "hexdigest",
    "setdefault",
    "insert",
];

/// What a moved value is taken aside for (`hash`, `append`, ...), if it is:
/// the call is an argument (or the receiver) of such a call, or the receiver
/// chain of the move ends in one (`x.cpu().numpy()`).
pub(super) fn copied_aside(call: Node<'_>, text: &str) -> Option<String> {
    // `x.cpu().numpy()`: the move is the object of an attribute that is called.
    if let Some(parent) = call.parent()
        && parent.kind() == "attribute"
        && let Some(attribute) = parent.child_by_field_name("attribute")
        && ASIDE_CALLEES.contains(&text_of(attribute, text))
    {
        return Some(format!("{}()", text_of(attribute, text)));
    }
    let mut current = call.parent();
    while let Some(node) = current {
        match node.kind() {
            "call" => {
                let callee = node.child_by_field_name("function");
                let last = callee.map(|f| match f.child_by_field_name("attribute") {
                    Some(a) => text_of(a, text),
                    None => text_of(f, text),
                });
                if let Some(last) = last
                    && (ASIDE_CALLEES.contains(&last) || last.starts_with("log"))
                {
                    return Some(format!("{last}()"));
                }
            }
            "expression_statement" | "return_statement" | "assignment" | "block" => break,
            _ if crate::syntax::is_function(node) => break,
            _ => {}
        }
        current = node.parent();
    }
    // `self.cache[key] = x.cpu()`: stored aside in a subscript or attribute.
    if let Some(assignment) = call.parent().filter(|p| p.kind() == "assignment")
        && let Some(left) = assignment.child_by_field_name("left")
        && left.kind() == "subscript"
    {
        return Some("store it".to_owned());
    }
    None
}

/// Whether the value of `call` is what `function` passes on: it stands in a
/// `return` or `yield`, or is assigned to a parameter or to a name that a
/// `return` of the function mentions.
pub(super) fn passes_on(call: Node<'_>, function: Node<'_>, text: &str) -> bool {
    if function.kind() == "lambda" {
        return true;
    }
    let mut current = call.parent();
    let mut assigned: Vec<String> = Vec::new();
    while let Some(node) = current {
        if node.id() == function.id() {
            break;
        }
        match node.kind() {
            "return_statement" | "yield" => return true,
            "assignment" | "augmented_assignment" => {
                if let Some(left) = node.child_by_field_name("left") {
                    assigned.extend(
                        text_of(left, text)
                            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .filter(|w| !w.is_empty())
                            .map(str::to_owned),
                    );
                }
            }
            _ => {}
        }
        current = node.parent();
    }
    if assigned.is_empty() {
        return false;
    }
    let parameters = parameter_names(function, text);
    if assigned
        .iter()
        .any(|a| parameters.contains(a) && a != "self")
    {
        return true;
    }
    returned_words(function, text)
        .iter()
        .any(|w| assigned.contains(w))
}

/// The words the `return` statements of `function` (not of nested functions)
/// mention.
pub(super) fn returned_words(function: Node<'_>, text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let Some(body) = function.child_by_field_name("body") else {
        return words;
    };
    let mut stack = vec![body];
    while let Some(node) = stack.pop() {
        if node.kind() == "return_statement" {
            words.extend(
                text_of(node, text)
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty() && *w != "return")
                    .map(str::to_owned),
            );
            continue;
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if !crate::syntax::is_function(child) {
                stack.push(child);
            }
        }
    }
    words
}

/// Calls that read a clock or a timer.
pub(super) const TIMING_CALLEES: &[&str] = &[
    "time",
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "process_time",
    "time_ns",
    "elapsed_time",
    "elapsed",
    "default_timer",
];

/// Whether `function` reads a clock or a timer (then a `synchronize()` in it
/// is there to time the forward).
pub(super) fn times_itself(function: Node<'_>, text: &str) -> bool {
    calls_any(function, text, |callee, receiver| {
        callee.is_some_and(|c| TIMING_CALLEES.contains(&c))
            || receiver.is_some_and(|r| r.to_ascii_lowercase().contains("timer"))
            || callee.is_some_and(|c| c.to_ascii_lowercase().contains("timer"))
    })
}

/// Whether some call in `function` satisfies `wanted`, asked with the
/// callee's name (a bare name or a method) and the receiver as written.
fn calls_any(
    function: Node<'_>,
    text: &str,
    wanted: impl Fn(Option<&str>, Option<&str>) -> bool,
) -> bool {
    let q = &QUERIES.calls;
    let mut found = false;
    crate::syntax::each_match(&q.compiled.query, function, text, |_, captures| {
        if found {
            return;
        }
        let callee = crate::syntax::capture(captures, q.name)
            .or_else(|| crate::syntax::capture(captures, q.method))
            .map(|n| text_of(n, text));
        let receiver = crate::syntax::capture(captures, q.receiver).map(|n| text_of(n, text));
        found = wanted(callee, receiver);
    });
    found
}

/// The device argument of a `.to(...)` when it comes from another activation
/// (`x.to(y.device)`, `x.to(device=y.device)`, `x.to(y)` with `y` a value
/// the function was handed, not module state): the tensor only follows
/// another tensor, and no weight moves. `None` when any device argument
/// comes from elsewhere (a string, configuration, module state), or there
/// is none.
pub(super) fn activation_device(
    arguments: Node<'_>,
    owner: Option<Node<'_>>,
    text: &str,
) -> Option<String> {
    let owner = owner?;
    let mut found = None;
    let mut cursor = arguments.walk();
    for argument in arguments.named_children(&mut cursor) {
        let value = match argument.kind() {
            "keyword_argument" => {
                let name = argument.child_by_field_name("name")?;
                if text_of(name, text) != "device" {
                    continue;
                }
                argument.child_by_field_name("value")?
            }
            "comment" => continue,
            _ => argument,
        };
        // `y.device`, or a tensor `y` itself.
        let tensor = match value.kind() {
            "attribute"
                if value
                    .child_by_field_name("attribute")
                    .is_some_and(|a| text_of(a, text) == "device") =>
            {
                value.child_by_field_name("object")?
            }
            // A name that says it is a device is one (`device`, `target_device`).
            "identifier" if matches!(argument_kind(value, text), Argument::Device) => return None,
            "identifier" => value,
            _ => match argument_kind(argument, text) {
                // A dtype, `copy=True`: no device here.
                Argument::Dtype | Argument::Neither => continue,
                _ => return None,
            },
        };
        let root = root_name(tensor, text)?;
        if root == "self"
            || !is_hook_value(owner, root, text)
            || is_module_state(tensor, Some(owner), text)
        {
            return None;
        }
        found = Some(text_of(value, text).to_owned());
    }
    found
}

/// Calls that read the allocator's memory statistics: a `synchronize()`
/// next to one is there to measure memory, not to wait for a transfer.
pub(super) const MEMORY_STAT_CALLEES: &[&str] = &[
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "mem_get_info",
];

/// Whether `function` reads memory statistics (see [`MEMORY_STAT_CALLEES`]).
pub(super) fn reads_memory_stats(function: Node<'_>, text: &str) -> bool {
    calls_any(function, text, |callee, _| {
        callee.is_some_and(|c| MEMORY_STAT_CALLEES.contains(&c))
    })
}
