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
//! loop whose body reads a name before any binding of it in the same
//! iteration is walked twice: once to learn what its body leaves in that
//! name (its `else` not walked, nothing recorded), then for real with that
//! carried into the body's start, where an assignment replaces it like any
//! the body makes. Only such names are carried; a `for`'s own target never
//! is (it is bound again before each run); `x += ...` binds nothing new for
//! the walk. A loop with a `break` of its own carries nothing: what is bound
//! on the way to the `break` never reaches another iteration, and the walk
//! does not tell those paths apart. A loop walked to learn what it carries
//! walks the loops inside it once. Looking at loops and walking them twice
//! costs at most [`BUDGET_FACTOR`] times the function's length in one
//! function; past that a loop is walked once, as a one-pass walk would.

use std::collections::HashMap;

use tree_sitter::Node;

use crate::analysis::effects::value::Vals;
use crate::syntax::{Field, text_of};

/// Looking at a function's loops and walking them twice costs at most this
/// many times the function's length (in bytes of the loops looked at).
pub(super) const BUDGET_FACTOR: usize = 4;

/// The walk's state for loops.
#[derive(Debug, Default)]
pub(super) struct Loops {
    /// Walking a loop's body only to learn what it leaves in its names.
    pub(super) probing: bool,
    /// What is left of the function's budget, in bytes of loops.
    budget: usize,
    /// What the next block the walk enters (the loop's body) starts with.
    pub(super) carry_in: Option<Vec<(String, Vals)>>,
}

impl Loops {
    /// The state for the walk of `function`.
    pub(super) fn of(function: Node<'_>) -> Loops {
        Loops {
            budget: BUDGET_FACTOR * (function.end_byte() - function.start_byte()),
            ..Loops::default()
        }
    }

    /// Spends the cost of looking at (or walking again) `loop_statement`,
    /// if the budget allows.
    pub(super) fn spend(&mut self, loop_statement: Node<'_>) -> bool {
        let cost = loop_statement.end_byte() - loop_statement.start_byte();
        match self.budget.checked_sub(cost) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => false,
        }
    }
}

/// The names `loop_statement` (a `for` or `while`) reads in an iteration
/// before any binding of them in the same iteration (in the order the text
/// is evaluated: `a, b = b, a` reads both, then binds) and binds in its
/// body: what the next iteration reads there is what this one bound. A
/// `for`'s iterable is read once, not per iteration, and its target is
/// bound again before each run of the body, so never carried; nested
/// functions, classes and lambdas run elsewhere; a comprehension's own
/// variables are its own.
pub(super) fn carried(loop_statement: Node<'_>, text: &str) -> Vec<String> {
    // For each name: where it is first read, and where it is first bound.
    let mut first_read: HashMap<&str, usize> = HashMap::new();
    let mut first_bound: HashMap<&str, usize> = HashMap::new();
    let is_for = loop_statement.kind() == "for_statement";
    // Each node, with where it binds the names in it if it is a target (at
    // the end of its statement), and the comprehension variables in scope
    // there (an index into `scopes`).
    let mut scopes: Vec<Vec<&str>> = vec![Vec::new()];
    let mut pending: Vec<(Node<'_>, Option<usize>, usize)> = Vec::new();
    for (child, field) in named_children(loop_statement) {
        if !(is_for && matches!(field, Some("left" | "right"))) {
            pending.push((child, None, 0));
        }
    }
    while let Some((node, bound, scope)) = pending.pop() {
        match node.kind() {
            "function_definition" | "class_definition" | "lambda" => continue,
            "identifier" => {
                let name = text_of(node, text);
                if let Some(bound_at) = bound {
                    let at = first_bound.entry(name).or_insert(usize::MAX);
                    *at = (*at).min(bound_at);
                } else if !scopes[scope].contains(&name) {
                    let at = first_read.entry(name).or_insert(usize::MAX);
                    *at = (*at).min(node.start_byte());
                }
                continue;
            }
            "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => {
                let mut own = scopes[scope].clone();
                own.extend(comprehension_variables(node, text));
                scopes.push(own);
                let inner = scopes.len() - 1;
                for (child, _) in named_children(node) {
                    pending.push((child, None, inner));
                }
                continue;
            }
            _ => {}
        }
        let kind = node.kind();
        for (child, field) in named_children(node) {
            let binds = match (kind, field) {
                ("assignment" | "named_expression", Some("left" | "name"))
                | ("as_pattern", Some("alias")) => Some(node.end_byte()),
                // A nested loop binds its target before each run of its body.
                ("for_statement", Some("left")) => Some(
                    node.field("body")
                        .map_or(node.end_byte(), |b| b.start_byte()),
                ),
                // `a.b`: `b` is no name; `f(k=v)`: `k` is none either; a
                // comprehension's variables are bound where it runs.
                ("attribute", Some("attribute"))
                | ("keyword_argument", Some("name"))
                | ("for_in_clause", Some("left")) => continue,
                // `x += 1` reads `x` (the walk binds nothing new there).
                _ => bound.filter(|_| is_pattern(kind)),
            };
            pending.push((child, binds, scope));
        }
    }
    // A `for`'s own target is bound again before each run of its body.
    let targets: Vec<&str> = loop_statement
        .field("left")
        .filter(|_| is_for)
        .map(|left| names_bound_by(left, text))
        .unwrap_or_default();
    let mut names: Vec<String> = first_bound
        .into_iter()
        .filter(|(name, _)| !targets.contains(name))
        .filter(|(name, bound_at)| first_read.get(name).is_some_and(|read| read < bound_at))
        .map(|(name, _)| name.to_owned())
        .collect();
    names.sort();
    names
}

/// The names a comprehension's `for` clauses bind.
fn comprehension_variables<'a>(comprehension: Node<'_>, text: &'a str) -> Vec<&'a str> {
    named_children(comprehension)
        .into_iter()
        .filter(|(clause, _)| clause.kind() == "for_in_clause")
        .filter_map(|(clause, _)| clause.field("left"))
        .flat_map(|left| names_bound_by(left, text))
        .collect()
}

/// The names the target `node` binds (`x`, `a, (b, *c)`), as the scope
/// model reads them.
fn names_bound_by<'a>(node: Node<'_>, text: &'a str) -> Vec<&'a str> {
    let mut names = Vec::new();
    crate::analysis::scope_builder::target_names(node, &mut names);
    names.into_iter().map(|name| text_of(name, text)).collect()
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
            | "as_pattern_target"
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
    fn a_while_condition_and_a_tuple_target_carry_and_an_augmented_assignment_does_not() {
        let source = "def f(m):\n    i = 0\n    while i < n:\n        a.go()\n        a, b = b, c\n        i += 1\n";
        assert_eq!(carried_in(source), ["a", "b"]);
    }

    #[test]
    fn names_bound_before_read_targets_attributes_and_nested_defs_are_not() {
        let source = "def f(m, xs):\n    for x in xs:\n        y = x\n        y.go(k=1)\n        m.w = y.w\n        g = lambda: z\n        z = 1\n        def h():\n            return q\n        q = 2\n";
        assert!(carried_in(source).is_empty(), "{:?}", carried_in(source));
    }

    #[test]
    fn names_an_iteration_binds_before_reading_them_are_not_carried() {
        // An inner loop's target, a walrus, an `if` and a `with ... as`
        // bind before the reads; a comprehension's variable is its own.
        let source = "def f(m, xs):\n    for l in m.layers:\n        for t in xs:\n            t.go()\n        if (w := xs[0]) is not None:\n            w.go()\n        if c:\n            u = 1\n        u.go()\n        with g() as v:\n            v.go()\n        [p.go() for p in xs]\n        t = w = u = v = p = l.weight\n";
        assert!(carried_in(source).is_empty(), "{:?}", carried_in(source));
    }

    #[test]
    fn a_for_target_rebound_in_the_body_is_not_carried() {
        let source = "def f(m):\n    for p, (q, r) in m.items():\n        seen[p] = q\n        p = local(p)\n        q = r = other(q)\n";
        assert!(carried_in(source).is_empty(), "{:?}", carried_in(source));
    }
}
