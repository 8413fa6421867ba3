//! Copies: what a `.to(...)`-like call copies to, and the copies of values
//! a function did not make that it takes to a device for one use (see
//! [`LocalFacts::staged`](super::LocalFacts::staged)) or hands back (see
//! [`LocalFacts::returns_copy`](super::LocalFacts::returns_copy)).

use tree_sitter::Node;

use super::{Acts, Kind, LocalEffect, Walker};
use crate::analysis::effects::value::{Copied, Val};
use crate::syntax::Field;
use crate::syntax::text_of;

impl Walker<'_, '_> {
    /// A copy of `val` taken to a device for one use (see
    /// [`LocalFacts::staged`]).
    pub(super) fn staged(&mut self, node: Node<'_>, detail: String, val: Val) {
        self.facts.staged.push(LocalEffect {
            kind: Kind::Move,
            line: Self::line(node),
            detail,
            on: Some(val),
            discount: None,
            acts: Acts::Tensor,
            source: None,
        });
    }

    /// Whether `value` (a returned expression) is, or lists, a name filled
    /// from a tensor it did not make.
    pub(super) fn returns_filled(&self, value: Node<'_>) -> bool {
        let named = |n: Node<'_>| {
            n.kind() == "identifier" && self.filled.iter().any(|f| f == text_of(n, self.text))
        };
        let mut cursor = value.walk();
        named(value)
            || (matches!(value.kind(), "expression_list" | "tuple")
                && value.named_children(&mut cursor).any(named))
    }
}

/// What a `.to(...)`-like call copies to: a device, a dtype, either.
pub(super) fn copy_of(method: &str, call: Node<'_>, text: &str) -> Copied {
    let mut copied = Copied::default();
    match method {
        "cuda" | "cpu" | "xpu" | "npu" | "to_empty" => copied.device = true,
        "half" | "float" | "double" | "bfloat16" | "type" => copied.dtype = true,
        _ => {}
    }
    if let Some(arguments) = call.field("arguments") {
        let mut cursor = arguments.walk();
        for argument in arguments.named_children(&mut cursor) {
            if argument.kind() == "keyword_argument"
                && argument
                    .field("name")
                    .is_some_and(|n| text_of(n, text) == "non_blocking")
            {
                copied.non_blocking = argument
                    .field("value")
                    .is_none_or(|v| text_of(v, text) != "False");
                continue;
            }
            match crate::analysis::arguments::argument_kind(argument, text) {
                crate::analysis::arguments::Argument::Device => copied.device = true,
                crate::analysis::arguments::Argument::Dtype => copied.dtype = true,
                crate::analysis::arguments::Argument::Unknown => {
                    copied.device = true;
                    copied.unknown = true;
                }
                crate::analysis::arguments::Argument::Neither => {}
            }
        }
    }
    if !copied.device && !copied.dtype {
        copied.device = true;
    }
    copied
}

pub(super) fn move_words(copied: Copied) -> (Kind, &'static str) {
    if copied.device || copied.pinned {
        (Kind::Move, "moves")
    } else {
        (Kind::Cast, "casts")
    }
}
