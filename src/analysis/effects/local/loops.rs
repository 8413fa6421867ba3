//! A loop's next iteration. Its body runs again with the names as the
//! previous run left them: in
//!
//! ```python
//! upcoming = None
//! for layer in module.layers:
//!     if upcoming is not None:
//!         upcoming.data = upcoming.data.to("cuda", non_blocking=True)
//!     upcoming = layer.weight
//! ```
//!
//! `upcoming.data = ...` stores into the weight bound at the end of the
//! previous iteration. The walk is one pass in the order of the text, so a
//! name the body reads before it binds it is walked twice: once to learn
//! what the body leaves in it (nothing recorded), then for real with that
//! carried into the body's start. Only the names read before their last
//! binding are carried; a loop walked to learn that walks the loops inside
//! it once, and at most [`MOST_PROBES`] loops of one function are walked
//! twice (the rest once, as a one-pass walk would).

use std::collections::HashMap;

use tree_sitter::Node;

use crate::analysis::effects::value::Vals;
use crate::syntax::{Field, text_of};

/// Most loops of one function walked twice.
pub(super) const MOST_PROBES: u32 = 8;

/// The walk's state for loops.
#[derive(Debug, Default)]
pub(super) struct Loops {
    /// Walking a loop's body only to learn what it leaves in its names.
    pub(super) probing: bool,
    /// Loops walked twice so far.
    pub(super) probes: u32,
    /// What the next block the walk enters (the loop's body) starts with.
    pub(super) carry_in: Option<Vec<(String, Vals)>>,
}

/// The names `loop_statement` (a `for` or `while`) binds in its body that
/// a statement of it reads at a place before (in the text) the last place
/// it binds them: what the next iteration reads there is what this one
/// bound. A `for`'s iterable is read once, not per iteration, and its
/// target is bound again before each run of the body, so never carried;
/// nested functions, classes and lambdas run elsewhere.
pub(super) fn carried(loop_statement: Node<'_>, text: &str) -> Vec<String> {
    // For each name: where it is first read, and where it is last bound.
    let mut first_read: HashMap<&str, usize> = HashMap::new();
    let mut last_bound: HashMap<&str, usize> = HashMap::new();
    let is_for = loop_statement.kind() == "for_statement";
    // Each node, with where it binds the names in it if it is a target: at
    // the end of its statement (`a, b = b, a` reads both, then binds).
    let mut pending: Vec<(Node<'_>, Option<usize>)> = Vec::new();
    for (child, field) in named_children(loop_statement) {
        if !(is_for && matches!(field, Some("left" | "right"))) {
            pending.push((child, None));
        }
    }
    while let Some((node, bound)) = pending.pop() {
        match node.kind() {
            "function_definition" | "class_definition" | "lambda" => continue,
            "identifier" => {
                let name = text_of(node, text);
                if let Some(bound_at) = bound {
                    let at = last_bound.entry(name).or_insert(0);
                    *at = (*at).max(bound_at);
                } else {
                    let at = first_read.entry(name).or_insert(usize::MAX);
                    *at = (*at).min(node.start_byte());
                }
                continue;
            }
            _ => {}
        }
        let kind = node.kind();
        for (child, field) in named_children(node) {
            let binds = match (kind, field) {
                ("assignment" | "named_expression", Some("left" | "name")) => Some(node.end_byte()),
                // A nested loop binds its target before each run of its body.
                ("for_statement", Some("left")) => Some(
                    node.field("body")
                        .map_or(node.end_byte(), |b| b.start_byte()),
                ),
                // `x += 1` reads `x`, then binds it.
                ("augmented_assignment", Some("left")) => {
                    if child.kind() == "identifier" {
                        pending.push((child, None));
                    }
                    Some(node.end_byte())
                }
                // `a.b`: `b` is no name; `f(k=v)`: `k` is none either; a
                // comprehension's variables are its own.
                ("attribute", Some("attribute"))
                | ("keyword_argument", Some("name"))
                | ("for_in_clause", Some("left")) => continue,
                _ => bound.filter(|_| is_pattern(kind)),
            };
            pending.push((child, binds));
        }
    }
    // A `for`'s own target is bound again before each run of its body.
    let mut targets: Vec<&str> = Vec::new();
    let mut target_nodes: Vec<Node<'_>> = loop_statement
        .field("left")
        .filter(|_| is_for)
        .into_iter()
        .collect();
    while let Some(node) = target_nodes.pop() {
        if node.kind() == "identifier" {
            targets.push(text_of(node, text));
        } else if is_pattern(node.kind()) {
            target_nodes.extend(named_children(node).into_iter().map(|(child, _)| child));
        }
    }
    let mut names: Vec<String> = last_bound
        .into_iter()
        .filter(|(name, _)| !targets.contains(name))
        .filter(|(name, bound_at)| first_read.get(name).is_some_and(|read| read < bound_at))
        .map(|(name, _)| name.to_owned())
        .collect();
    names.sort();
    names
}

/// The named children of `node`, each with the field it is in.
fn named_children(node: Node<'_>) -> Vec<(Node<'_>, Option<&str>)> {
    let mut children = Vec::new();
    let mut cursor = node.walk();
    if cursor.goto_first_child() {
        loop {
            let child = cursor.node();
            if child.is_named() {
                children.push((child, cursor.field_name()));
            }
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    children
}

/// A target pattern whose names a binding binds (`a, (b, *c) = ...`).
fn is_pattern(kind: &str) -> bool {
    matches!(
        kind,
        "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "list_splat_pattern"
            | "parenthesized_expression"
    )
}

#[cfg(test)]
mod tests {
    fn carried_in(source: &str) -> Vec<String> {
        let tree = crate::parse::parse(source).expect("parses");
        let function = tree.root_node().named_child(0).expect("a def");
        let body = function.child_by_field_name("body").expect("a body");
        let mut cursor = body.walk();
        let found = body
            .named_children(&mut cursor)
            .find(|n| matches!(n.kind(), "for_statement" | "while_statement"))
            .expect("a loop");
        super::carried(found, source)
    }

    #[test]
    fn a_name_read_before_its_last_binding_is_carried() {
        let source = "def f(m):\n    nxt = None\n    for l in m.layers:\n        if nxt is not None:\n            nxt.cpu()\n        nxt = l\n";
        assert_eq!(carried_in(source), ["nxt"]);
    }

    #[test]
    fn a_while_condition_an_augmented_assignment_and_a_tuple_target_carry() {
        let source = "def f(m):\n    i = 0\n    while i < n:\n        a.go()\n        a, b = b, c\n        i += 1\n";
        assert_eq!(carried_in(source), ["a", "b", "i"]);
    }

    #[test]
    fn names_bound_before_read_targets_attributes_and_nested_defs_are_not() {
        let source = "def f(m, xs):\n    for x in xs:\n        y = x\n        y.go(k=1)\n        m.w = y.w\n        g = lambda: z\n        z = 1\n        def h():\n            return q\n        q = 2\n";
        assert!(carried_in(source).is_empty(), "{:?}", carried_in(source));
    }

    #[test]
    fn a_for_target_rebound_in_the_body_is_not_carried() {
        let source = "def f(m):\n    for p, (q, r) in m.items():\n        seen[p] = q\n        p = local(p)\n        q = r = other(q)\n";
        assert!(carried_in(source).is_empty(), "{:?}", carried_in(source));
    }
}
