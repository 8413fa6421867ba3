//! What a call's arguments are, read from the function's own text: a
//! device or a dtype; and whether the function times itself or reads memory
//! statistics (then a `synchronize()` in it measures, not waits for a
//! transfer).

use tree_sitter::Node;

use crate::queries::QUERIES;
use crate::syntax::Field;
use crate::syntax::text_of;

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
            let name = argument.field("name").map_or("", |n| text_of(n, text));
            match name {
                "device" => Argument::Device,
                "dtype" => Argument::Dtype,
                "non_blocking" => Argument::Device,
                _ => Argument::Neither,
            }
        }
        "call" => {
            let callee = argument
                .field("function")
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

/// Calls that read a clock or a timer.
pub(crate) const TIMING_CALLEES: &[&str] = &[
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
        let method =
            crate::syntax::capture(captures, q.attribute).and_then(crate::syntax::method_callee);
        let (callee, receiver) = match (crate::syntax::capture(captures, q.name), method) {
            (Some(name), _) => (name, None),
            (None, Some((receiver, method))) => (method, Some(text_of(receiver, text))),
            // A method call whose name is not a plain identifier.
            (None, None) => return,
        };
        found = wanted(Some(text_of(callee, text)), receiver);
    });
    found
}

/// Calls that read the allocator's memory statistics: a `synchronize()`
/// next to one is there to measure memory, not to wait for a transfer.
pub(crate) const MEMORY_STAT_CALLEES: &[&str] = &[
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
