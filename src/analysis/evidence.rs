//! Offload evidence in one function's own body: the signs
//! `queries/offload_evidence.scm` finds, each judged as offload work or
//! discounted with a reason a user can check.
//!
//! A move or cast is offload work when it moves **module state** (the hook's
//! module or an attribute of it or of the hook object, parameters, buffers,
//! `.data`, tensors taken from `parameters()` / `state_dict()` ...), or moves
//! a value the hook passes on to a **device**. It is not when it only casts an
//! activation to a dtype, copies an activation aside (to hash, log or keep
//! it), or calls `synchronize()` to time the forward.

use serde::Serialize;
use tree_sitter::Node;

use crate::queries::QUERIES;
use crate::syntax::{parameter_names, root_name, text_of};

/// One sign found in a function's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sign {
    /// `move`, `transfer`, `stream`, `onload`, `params`, `prefetch`,
    /// `storage`, `rng`, `non_blocking`, `data` or `delegate`.
    pub kind: &'static str,
    /// What it does, in words: `moves module state via .to(...)`.
    pub detail: String,
    /// 1-based line of the sign.
    pub line: usize,
    /// Why it does not count as offload work, when it does not.
    pub discounted: Option<String>,
}

impl Sign {
    pub fn counts(&self) -> bool {
        self.discounted.is_none()
    }
}

/// Every sign in a file, each with the start byte of the innermost `def` or
/// `lambda` it stands in (`None` at module or class level), in text order.
pub fn signs_in_file(root: Node<'_>, text: &str) -> Vec<(Option<usize>, Sign)> {
    signs_in_file_with(root, text, &crate::syntax::Enclosing::functions_under(root))
}

/// [`signs_in_file`], with every function of the tree at `root` given.
pub fn signs_in_file_with(
    root: Node<'_>,
    text: &str,
    functions: &crate::syntax::Enclosing<'_>,
) -> Vec<(Option<usize>, Sign)> {
    let q = &QUERIES.offload_evidence;
    let names = q.compiled.query.capture_names();
    let mut found: Vec<(usize, Option<usize>, Sign)> = Vec::new();
    crate::syntax::each_match(&q.compiled.query, root, text, |_, captures| {
        let call = crate::syntax::capture(captures, q.call);
        for c in captures {
            let name = names[c.index as usize];
            let Some(kind) = name.strip_prefix("evidence.") else {
                continue;
            };
            if matches!(kind, "call" | "storage_of") {
                continue;
            }
            let owner = functions.around(c.node);
            let detail = text_of(c.node, text);
            let sign = judge(kind, detail, c.node, call, owner, text);
            let Some(sign) = sign else { continue };
            found.push((c.node.start_byte(), owner.map(|o| o.start_byte()), sign));
        }
    });
    found.sort_by_key(|(at, _, _)| *at);
    found.dedup_by_key(|(at, _, _)| *at);
    found
        .into_iter()
        .map(|(_, owner, sign)| (owner, sign))
        .collect()
}

/// Every sign in the body of `function` (a `def` or `lambda`), nested
/// functions excluded.
pub fn signs_in_function(function: Node<'_>, text: &str) -> Vec<Sign> {
    let Some(body) = function.child_by_field_name("body") else {
        return Vec::new();
    };
    signs_in_file_with(
        body,
        text,
        &crate::syntax::Enclosing::functions_under(function),
    )
    .into_iter()
    .filter(|(owner, _)| owner.is_none() || *owner == Some(function.start_byte()))
    .map(|(_, sign)| sign)
    .collect()
}

fn judge(
    kind: &'static str,
    detail: &str,
    node: Node<'_>,
    call: Option<Node<'_>>,
    owner: Option<Node<'_>>,
    text: &str,
) -> Option<Sign> {
    let line = node.start_position().row + 1;
    let sign = |detail: String, discounted: Option<String>| Sign {
        kind,
        detail,
        line,
        discounted,
    };
    Some(match kind {
        "move" => {
            let call = call?;
            let (detail, discounted) = judge_move(detail, call, owner, text);
            sign(detail, discounted)
        }
        "transfer" => sign(format!("moves tensors via {detail}(...)"), None),
        "stream" if detail == "synchronize" => {
            let timing = owner.is_some_and(|f| times_itself(f, text));
            sign(
                "synchronizes the device via .synchronize()".to_owned(),
                timing.then(|| {
                    "synchronize() stands next to timing calls: it times the forward".to_owned()
                }),
            )
        }
        "stream" => {
            // An event waited on next to `elapsed_time()`: a timer's, not offload.
            let timing = owner.is_some_and(|f| times_itself(f, text));
            sign(
                format!("waits on or records streams via .{detail}(...)"),
                timing.then(|| {
                    format!("{detail}() stands next to timing calls: it times the forward")
                }),
            )
        }
        "onload" => sign(format!("on/offloads via {detail}(...)"), None),
        "params" => {
            let activation = call.and_then(|c| activation_argument(c, owner, text));
            sign(
                format!("gathers, fetches or releases parameters via {detail}(...)"),
                activation.map(|a| {
                    format!("`{a}` is an activation: {detail}(...) of it is a collective on activations, not parameter movement")
                }),
            )
        }
        "prefetch" => sign(format!("prefetches weights via {detail}(...)"), None),
        "storage" => sign(
            "resizes parameter storage via .untyped_storage().resize_(...)".to_owned(),
            None,
        ),
        "rng" => sign(
            format!("saves or restores RNG state via {detail}(...)"),
            None,
        ),
        "non_blocking" => {
            // Inside a `.to(...)`, the move speaks for it.
            let in_move = node
                .parent()
                .and_then(|kw| kw.parent())
                .and_then(|args| args.parent())
                .and_then(|c| c.child_by_field_name("function"))
                .and_then(|f| f.child_by_field_name("attribute"))
                .is_some_and(|a| matches!(text_of(a, text), "to" | "cuda" | "cpu"));
            if in_move {
                return None;
            }
            sign("copies with non_blocking=".to_owned(), None)
        }
        "data" => sign("assigns to .data".to_owned(), None),
        "delegate" => sign(format!("delegates to other hooks' {detail}"), None),
        _ => return None,
    })
}

/// What a `.to(...)` / `.cuda(...)` / `.cpu(...)` call does: its description
/// and, when it is no offload work, why.
fn judge_move(
    method: &str,
    call: Node<'_>,
    owner: Option<Node<'_>>,
    text: &str,
) -> (String, Option<String>) {
    let receiver = call
        .child_by_field_name("function")
        .and_then(|f| f.child_by_field_name("object"));
    let mut device = matches!(method, "cuda" | "cpu");
    let mut dtype = false;
    let mut unknown = false;
    if let Some(arguments) = call.child_by_field_name("arguments") {
        let mut cursor = arguments.walk();
        for argument in arguments.named_children(&mut cursor) {
            match argument_kind(argument, text) {
                Argument::Device => device = true,
                Argument::Dtype => dtype = true,
                Argument::Unknown => unknown = true,
                Argument::Neither => {}
            }
        }
    }
    let via = format!(".{method}(...)");
    let state = receiver.is_some_and(|r| is_module_state(r, owner, text));
    if state {
        let what = if device {
            "moves module state"
        } else if dtype {
            "casts module state"
        } else {
            "moves or casts module state"
        };
        return (format!("{what} via {via}"), None);
    }
    let name = receiver.map_or("a tensor".to_owned(), |r| {
        crate::syntax::short(text_of(r, text))
    });
    if let Some(aside) = copied_aside(call, text) {
        return (
            format!("copies `{name}` via {via}"),
            Some(format!(
                "`{name}` is an activation copied aside to {aside}, not module state"
            )),
        );
    }
    if dtype && !device {
        return (
            format!("casts `{name}` via {via}"),
            Some(format!(
                "`{name}` is cast to a dtype, not moved: an activation cast, not module state"
            )),
        );
    }
    // Only the hook's own inputs or outputs (its parameters, or items taken
    // from them) passed on count: a tensor it makes and returns is no
    // weight on its way to a device.
    let hook_value = owner.is_some_and(|f| {
        receiver
            .and_then(|r| root_name(r, text))
            .is_some_and(|root| is_hook_value(f, root, text))
    });
    let passed_on = hook_value && owner.is_some_and(|f| passes_on(call, f, text));
    if (device || unknown) && passed_on {
        return (
            format!("moves `{name}`, which it passes on, to a device via {via}"),
            None,
        );
    }
    (
        format!("moves `{name}` via {via}"),
        Some(format!(
            "`{name}` is not module state and the moved value is not passed on"
        )),
    )
}

enum Argument {
    Device,
    Dtype,
    /// A value that may be either (a variable, another tensor).
    Unknown,
    /// Neither (`copy=True`, `memory_format=...`).
    Neither,
}

const DEVICE_PREFIXES: &[&str] = &["cpu", "cuda", "mps", "meta", "xpu", "npu", "hpu", "xla"];
const TORCH_DTYPES: &[&str] = &[
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

fn argument_kind(argument: Node<'_>, text: &str) -> Argument {
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
const STATE_PARTS: &[&str] = &[
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
const STATE_SOURCES: &[&str] = &[
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
const STATE_WORDS: &[&str] = &[
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
fn is_module_state(receiver: Node<'_>, owner: Option<Node<'_>>, text: &str) -> bool {
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
fn activation_argument(call: Node<'_>, owner: Option<Node<'_>>, text: &str) -> Option<String> {
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
fn is_hook_value(function: Node<'_>, name: &str, text: &str) -> bool {
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
fn is_activation_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [
        "input", "output", "arg", "hidden", "logit", "x", "out", "tensor", "result", "grad",
    ]
    .iter()
    .any(|w| lower == *w || lower.starts_with(w))
}

/// Whether `name` is the target of a `for` loop in `function` whose iterable
/// yields module state (`for p in module.parameters():`).
fn loop_over_state(function: Node<'_>, name: &str, text: &str) -> bool {
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
const ASIDE_CALLEES: &[&str] = &[
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
fn copied_aside(call: Node<'_>, text: &str) -> Option<String> {
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
fn passes_on(call: Node<'_>, function: Node<'_>, text: &str) -> bool {
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
fn returned_words(function: Node<'_>, text: &str) -> Vec<String> {
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
const TIMING_CALLEES: &[&str] = &[
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
fn times_itself(function: Node<'_>, text: &str) -> bool {
    let q = &QUERIES.calls;
    let mut timing = false;
    crate::syntax::each_match(&q.compiled.query, function, text, |_, captures| {
        if timing {
            return;
        }
        let callee = crate::syntax::capture(captures, q.name)
            .or_else(|| crate::syntax::capture(captures, q.method))
            .map(|n| text_of(n, text));
        let receiver = crate::syntax::capture(captures, q.receiver).map(|n| text_of(n, text));
        timing = callee.is_some_and(|c| TIMING_CALLEES.contains(&c))
            || receiver.is_some_and(|r| r.to_ascii_lowercase().contains("timer"))
            || callee.is_some_and(|c| c.to_ascii_lowercase().contains("timer"));
    });
    timing
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs(source: &str) -> Vec<Sign> {
        let tree = crate::parse::parse(source).unwrap();
        let root = tree.root_node();
        let function = root.named_child(0).unwrap();
        signs_in_function(function, source)
    }

    fn counted(source: &str) -> Vec<String> {
        signs(source)
            .into_iter()
            .filter(Sign::counts)
            .map(|s| s.detail)
            .collect()
    }

    #[test]
    fn module_state_moves_count() {
        assert_eq!(
            counted("def h(module, args):\n    module.to('cuda')\n"),
            ["moves module state via .to(...)"]
        );
        assert_eq!(
            counted(
                "def h(m, args):\n    for p in m.parameters():\n        p.data = p.data.to(dev)\n"
            ),
            [
                "assigns to .data",
                "moves or casts module state via .to(...)"
            ]
        );
        assert_eq!(
            counted("def pre(self, mod):\n    self.blocks[0].cpu()\n"),
            ["moves module state via .cpu(...)"]
        );
    }

    #[test]
    fn activation_casts_and_copies_are_discounted() {
        for source in [
            "def h(m, args, out):\n    return out.to(out.dtype)\n",
            "def h(m, args, out):\n    states = out.to(torch.float32)\n    return states\n",
            "def h(m, args, out):\n    key = hash(out.cpu())\n",
            "def h(m, args, out):\n    self.seen.append(out.cpu())\n",
            "def h(m, args, out):\n    arr = out.cpu().numpy()\n",
            "def h(self, model, input, output):\n    self.svd.fit(states.to(torch.float32))\n",
            "def h(m, args, out):\n    hidden_states.to(torch.bfloat16)\n",
            "def make(self, batch):\n    return torch.full((batch, 2), 0.5).to(self.device)\n",
        ] {
            let found = signs(source);
            assert_eq!(found.len(), 1, "{source}");
            assert!(found[0].discounted.is_some(), "{source}: {found:?}");
        }
    }

    #[test]
    fn values_passed_on_to_a_device_count() {
        assert_eq!(
            counted("def h(m, args, out):\n    return out.to('cpu', non_blocking=True)\n"),
            ["moves `out`, which it passes on, to a device via .to(...)"]
        );
        assert_eq!(
            counted("def h(m, args):\n    args = tuple(a.cuda() for a in args)\n    return args\n"),
            ["moves `a`, which it passes on, to a device via .cuda(...)"]
        );
    }

    #[test]
    fn timing_synchronize_is_discounted_and_plain_synchronize_counts() {
        let timed =
            signs("def h(m, args):\n    torch.cuda.synchronize()\n    m.__start__ = time.time()\n");
        assert_eq!(timed.len(), 1);
        assert!(timed[0].discounted.as_deref().unwrap().contains("timing"));
        assert_eq!(
            counted("def h(m, args):\n    torch.cuda.synchronize()\n"),
            ["synchronizes the device via .synchronize()"]
        );
        // A timer's event wait is timing too.
        let timer = signs(
            "def get_elapsed(self):\n    stream.wait_event(self.end)\n    return self.start.elapsed_time(self.end)\n",
        );
        assert_eq!(timer.len(), 1);
        assert!(timer[0].discounted.is_some(), "{timer:?}");
    }

    #[test]
    fn parameter_movement_vocabulary_counts() {
        for (source, kind) in [
            ("def h(m):\n    coordinator.fetch_sub_module(m)\n", "params"),
            ("def h(m):\n    self._unshard(m)\n", "params"),
            ("def h(m):\n    p.untyped_storage().resize_(0)\n", "storage"),
            ("def h(m):\n    stream.wait_stream(other)\n", "stream"),
            ("def h(m):\n    self.prefetch_next(m)\n", "prefetch"),
            ("def h(m):\n    state = torch.cuda.get_rng_state()\n", "rng"),
        ] {
            let found = signs(source);
            assert_eq!(
                found.iter().map(|s| s.kind).collect::<Vec<_>>(),
                [kind],
                "{source}"
            );
            assert!(found[0].counts(), "{source}");
        }
        // Collectives on activations are not parameter movement.
        assert!(signs("def h(m, a, out):\n    return all_gather(out)\n").is_empty());
        assert!(signs("def h(m, a, out):\n    return unshard_anything(out, mesh)\n").is_empty());
        let unsharded =
            signs("def h(m, a, output):\n    return Sharder.unshard(output[0], 1, mesh)\n");
        assert_eq!(unsharded.len(), 1);
        assert!(
            unsharded[0]
                .discounted
                .as_deref()
                .unwrap()
                .contains("activation")
        );
        assert!(signs("def h(self, m, a):\n    self.handle.unshard()\n")[0].counts());
    }

    #[test]
    fn nested_functions_keep_their_own_signs() {
        let source =
            "def outer(m):\n    def inner(mod, args):\n        mod.to('cuda')\n    return inner\n";
        assert!(signs(source).is_empty());
    }
}
