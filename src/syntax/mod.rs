//! Small questions about tree-sitter nodes that every analysis module asks:
//! a node's text, the dotted name it spells, the function around it. No
//! Python meaning lives here.

use std::collections::HashSet;

use tree_sitter::{Node, Query, QueryCapture, QueryCursor, StreamingIterator};

use crate::error::Position;
use crate::queries::Combined;
use crate::source::line_start;

mod fields;
pub use fields::Field;

pub fn text_of<'a>(node: Node<'_>, text: &'a str) -> &'a str {
    &text[node.byte_range()]
}

/// The first capture with index `index`.
pub fn capture<'t>(captures: &[QueryCapture<'t>], index: u32) -> Option<Node<'t>> {
    captures.iter().find(|c| c.index == index).map(|c| c.node)
}

/// Visits `root` and every node under it, in document order (each node
/// before its children): one cursor, no recursion, so depth costs no stack.
pub fn preorder<'t>(root: Node<'t>, mut each: impl FnMut(Node<'t>)) {
    let mut cursor = root.walk();
    'walk: loop {
        each(cursor.node());
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.node().id() == root.id() {
                break 'walk;
            }
            if cursor.goto_next_sibling() {
                continue 'walk;
            }
            if !cursor.goto_parent() {
                break 'walk;
            }
        }
    }
}

/// Runs `query` over `node` and calls `each` with every match's pattern index
/// and captures.
pub fn each_match<'t>(
    query: &Query,
    node: Node<'t>,
    text: &str,
    mut each: impl FnMut(usize, &[QueryCapture<'t>]),
) {
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(query, node, text.as_bytes());
    while let Some(m) = matches.next() {
        each(m.pattern_index, m.captures());
    }
}

/// [`each_match`], looking only at matches that overlap one of `ranges`
/// (each match once, though it may overlap several).
pub fn each_match_in<'t>(
    query: &Query,
    node: Node<'t>,
    text: &str,
    ranges: &[std::ops::Range<usize>],
    mut each: impl FnMut(usize, &[QueryCapture<'t>]),
) {
    let mut cursor = QueryCursor::new();
    let mut seen = std::collections::HashSet::new();
    for range in ranges {
        cursor.set_byte_range(range.clone());
        let mut matches = cursor.matches(query, node, text.as_bytes());
        while let Some(m) = matches.next() {
            let key: Vec<usize> = m.captures().iter().map(|c| c.node.id()).collect();
            if seen.insert((m.pattern_index, key)) {
                each(m.pattern_index, m.captures());
            }
        }
    }
}

/// The receiver and the method name of a method call's callee (an
/// `attribute` node: `self.coordinator.fetch` -> `self.coordinator`,
/// `fetch`), as `calls.scm` captures it.
pub fn method_callee(attribute: Node<'_>) -> Option<(Node<'_>, Node<'_>)> {
    let method = attribute.field("attribute")?;
    (method.kind() == "identifier").then_some(())?;
    Some((attribute.field("object")?, method))
}

/// The dotted name an identifier/attribute chain spells (`torch.compiler.disable`),
/// or `None` for anything else (a subscript, a call, ...).
pub fn dotted_name(node: Node<'_>, text: &str) -> Option<String> {
    match node.kind() {
        "identifier" => Some(text_of(node, text).to_owned()),
        "attribute" => {
            let object = dotted_name(node.field("object")?, text)?;
            let attribute = node.field("attribute")?;
            Some(format!("{object}.{}", text_of(attribute, text)))
        }
        _ => None,
    }
}

/// Runs a [`Combined`] query over `node` and calls `each` with the index of
/// the part each match belongs to and its captures. With `ranges`, only
/// matches that overlap one of them are looked for (each once, though it may
/// overlap several): the cursor skips every subtree outside them instead of
/// walking the whole tree.
pub fn for_each_combined<'t>(
    combined: &Combined,
    node: Node<'t>,
    text: &str,
    ranges: Option<&[std::ops::Range<usize>]>,
    mut each: impl FnMut(usize, &[tree_sitter::QueryCapture<'t>]),
) {
    // Each range is a walk down from `node`: past a few hundred, one range
    // around all of them costs less (and finds the same matches).
    const MOST_RANGES: usize = 256;
    let mut cursor = QueryCursor::new();
    let mut seen: HashSet<(usize, Vec<usize>)> = HashSet::new();
    let everything = 0..text.len();
    let spanned;
    let ranges = match ranges {
        Some([first, .., last]) if ranges.is_some_and(|r| r.len() > MOST_RANGES) => {
            spanned = first.start..last.end;
            Some(std::slice::from_ref(&spanned))
        }
        other => other,
    };
    for range in ranges.unwrap_or(std::slice::from_ref(&everything)) {
        cursor.set_byte_range(range.clone());
        let mut matches = cursor.matches(&combined.query, node, text.as_bytes());
        while let Some(m) = matches.next() {
            if ranges.is_some() {
                let key = m.captures().iter().map(|c| c.node.id()).collect();
                if !seen.insert((m.pattern_index, key)) {
                    continue;
                }
            }
            each(combined.part(m.pattern_index), m.captures());
        }
    }
}

/// Where `node` starts. The line comes from the tree and the column from the
/// line's own text, so the cost does not grow with the offset (counting lines
/// from the top for every hook made large files quadratic).
pub fn position(node: Node<'_>, text: &str) -> Position {
    let offset = node.start_byte();
    let column = text[line_start(text, offset)..offset].chars().count() + 1;
    Position {
        line: node.start_position().row + 1,
        column,
    }
}

pub fn enclosing_class(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind() == "class_definition" {
            return Some(n);
        }
        current = n.parent();
    }
    None
}

/// Python's `__qualname__` of a definition node.
pub fn qualname(def: Node<'_>, text: &str) -> String {
    let mut parts = Vec::new();
    let name_of = |n: Node<'_>| {
        n.field("name")
            .map_or("?", |name| text_of(name, text))
            .to_owned()
    };
    if def.kind() != "lambda" {
        parts.push(name_of(def));
    } else {
        parts.push("<lambda>".to_owned());
    }
    let mut current = def.parent();
    while let Some(n) = current {
        match n.kind() {
            "class_definition" => parts.push(name_of(n)),
            "function_definition" => parts.push(format!("{}.<locals>", name_of(n))),
            _ => {}
        }
        current = n.parent();
    }
    parts.reverse();
    parts.join(".")
}

pub fn class_bases(class: Node<'_>, text: &str) -> Vec<String> {
    let Some(list) = class.field("superclasses") else {
        return Vec::new();
    };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter_map(|base| match base.kind() {
            "identifier" | "attribute" => dotted_name(base, text),
            // `Base[T]`
            "subscript" => base.field("value").and_then(|v| dotted_name(v, text)),
            _ => None,
        })
        .collect()
}

/// Whether a base of the class statement `class` is an expression that
/// [`class_bases`] leaves out (a call, `base or other`): not a name, not a
/// subscripted name, not a keyword (`metaclass=...`).
pub fn has_computed_base(class: Node<'_>) -> bool {
    let Some(list) = class.field("superclasses") else {
        return false;
    };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .any(|base| match base.kind() {
            "identifier" | "attribute" | "keyword_argument" | "comment" => false,
            "subscript" => base
                .field("value")
                .is_none_or(|v| !matches!(v.kind(), "identifier" | "attribute")),
            _ => true,
        })
}

/// Whether `node` is a scope that owns the statements in it: a `def` or a
/// `lambda`.
pub fn is_function(node: Node<'_>) -> bool {
    matches!(node.kind(), "function_definition" | "lambda")
}

/// The innermost `def` or `lambda` strictly around `node`.
pub fn enclosing_function(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if is_function(n) {
            return Some(n);
        }
        current = n.parent();
    }
    None
}

/// The leftmost name of an expression chain: `self` in
/// `self.blocks[i].weight.to(...)`, `torch` in `torch.cuda.current_stream()`.
pub fn root_name<'a>(node: Node<'_>, text: &'a str) -> Option<&'a str> {
    let mut current = node;
    loop {
        match current.kind() {
            "identifier" => return Some(text_of(current, text)),
            "attribute" => current = current.field("object")?,
            "subscript" => current = current.field("value")?,
            "call" => current = current.field("function")?,
            "parenthesized_expression" => current = current.named_child(0)?,
            _ => return None,
        }
    }
}

/// The names a function's parameters bind, in order (`self` included).
pub fn parameter_names(function: Node<'_>, text: &str) -> Vec<String> {
    let Some(parameters) = function.field("parameters") else {
        return Vec::new();
    };
    let mut cursor = parameters.walk();
    parameters
        .named_children(&mut cursor)
        .filter_map(parameter_name)
        .map(|name| text_of(name, text).to_owned())
        .collect()
}

/// The name a parameter node binds, where it binds one.
fn parameter_name(parameter: Node<'_>) -> Option<Node<'_>> {
    let name = match parameter.kind() {
        "identifier" => Some(parameter),
        "default_parameter" | "typed_default_parameter" => parameter.field("name"),
        "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => {
            parameter.named_child(0)
        }
        _ => None,
    };
    name.and_then(|n| match n.kind() {
        "identifier" => Some(n),
        _ => n.named_child(0).filter(|c| c.kind() == "identifier"),
    })
}

/// Where a bare `*` stands among a `def`'s parameters: how many of
/// [`parameter_names`] come before it (those after are keyword-only).
pub fn keyword_only_from(function: Node<'_>) -> Option<usize> {
    let parameters = function.field("parameters")?;
    let mut cursor = parameters.walk();
    let mut before = 0;
    for parameter in parameters.named_children(&mut cursor) {
        if parameter.kind() == "keyword_separator" {
            return Some(before);
        }
        before += usize::from(parameter_name(parameter).is_some());
    }
    None
}

/// For each name [`parameter_names`] gives, the class its annotation names,
/// where it names one: `h: Offloader`, `h: mod.Offloader`,
/// `h: Optional[Offloader]`, `h: Offloader | None`, `h: "Offloader"`.
pub fn parameter_annotations(function: Node<'_>, text: &str) -> Vec<Option<String>> {
    let Some(parameters) = function.field("parameters") else {
        return Vec::new();
    };
    let mut annotations = Vec::new();
    let mut cursor = parameters.walk();
    for parameter in parameters.named_children(&mut cursor) {
        match parameter.kind() {
            "identifier"
            | "list_splat_pattern"
            | "dictionary_splat_pattern"
            | "default_parameter" => annotations.push(None),
            "typed_parameter" | "typed_default_parameter" => annotations.push(
                parameter
                    .field("type")
                    .and_then(|t| annotated_class(t, text, 0)),
            ),
            _ => {}
        }
    }
    annotations
}

/// The one class an annotation names, seen through `Optional[...]`,
/// `X | None` and a string.
fn annotated_class(node: Node<'_>, text: &str, depth: usize) -> Option<String> {
    if depth > 4 {
        return None;
    }
    match node.kind() {
        "type" => annotated_class(node.named_child(0)?, text, depth + 1),
        "identifier" | "attribute" => {
            let name = dotted_name(node, text)?;
            (name != "None").then_some(name)
        }
        "string" => {
            let inner = text_of(node, text).trim_matches(|c| c == '"' || c == '\'');
            (!inner.is_empty()
                && inner.split('.').all(|part| {
                    !part.is_empty() && part.chars().all(|c| c == '_' || c.is_alphanumeric())
                }))
            .then(|| inner.to_owned())
        }
        "binary_operator" => {
            let left = node.field("left")?;
            let right = node.field("right")?;
            let named: Vec<String> = [left, right]
                .into_iter()
                .filter_map(|n| annotated_class(n, text, depth + 1))
                .collect();
            (named.len() == 1).then(|| named[0].clone())
        }
        "generic_type" | "subscript" => {
            let head = node.field("value").or_else(|| node.named_child(0))?;
            let head = text_of(head, text);
            if head.rsplit('.').next() != Some("Optional") {
                return None;
            }
            let mut cursor = node.walk();
            let inner: Vec<Node<'_>> = node.named_children(&mut cursor).skip(1).collect();
            match inner.as_slice() {
                [one] if one.kind() == "type_parameter" => {
                    annotated_class(one.named_child(0)?, text, depth + 1)
                }
                [one] => annotated_class(*one, text, depth + 1),
                _ => None,
            }
        }
        _ => None,
    }
}

/// For each name [`parameter_names`] gives, whether it has a default value
/// (`target=next_layer`): bound where the function is defined, never passed
/// by the code that calls a hook.
pub fn parameter_defaults(function: Node<'_>) -> Vec<bool> {
    counted_parameters(function)
        .iter()
        .map(|p| matches!(p.kind(), "default_parameter" | "typed_default_parameter"))
        .collect()
}

/// The parameters of a `def` or `lambda` that bind a name, in order:
/// plain, typed, with defaults, `*args` and `**kwargs` (not a bare `*` or
/// `/`).
fn counted_parameters(function: Node<'_>) -> Vec<Node<'_>> {
    let Some(parameters) = function.field("parameters") else {
        return Vec::new();
    };
    let mut cursor = parameters.walk();
    parameters
        .named_children(&mut cursor)
        .filter(|p| {
            matches!(
                p.kind(),
                "identifier"
                    | "typed_parameter"
                    | "list_splat_pattern"
                    | "dictionary_splat_pattern"
                    | "default_parameter"
                    | "typed_default_parameter"
            )
        })
        .collect()
}

/// The parameters (by their place among those [`parameter_defaults`]
/// counts) whose default is a bare name: `m=m` binds, when the `def` runs,
/// what `m` names around it (a loop's module, in `for m in ...: def f(x,
/// m=m)`).
pub fn parameter_default_names(function: Node<'_>, text: &str) -> Vec<(usize, Box<str>)> {
    counted_parameters(function)
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let value = p.field("value")?;
            (matches!(p.kind(), "default_parameter" | "typed_default_parameter")
                && value.kind() == "identifier")
                .then(|| (i, text_of(value, text).into()))
        })
        .collect()
}

/// For each parameter [`parameter_defaults`] counts, whether it collects
/// the arguments left (`*args`, `**kwargs`, typed or not).
pub fn parameter_splats(function: Node<'_>) -> Vec<bool> {
    let Some(parameters) = function.field("parameters") else {
        return Vec::new();
    };
    let splat = |kind: &str| matches!(kind, "list_splat_pattern" | "dictionary_splat_pattern");
    let mut splats = Vec::new();
    let mut cursor = parameters.walk();
    for parameter in parameters.named_children(&mut cursor) {
        match parameter.kind() {
            "identifier" | "default_parameter" | "typed_default_parameter" => splats.push(false),
            kind if splat(kind) => splats.push(true),
            "typed_parameter" => {
                splats.push(parameter.named_child(0).is_some_and(|c| splat(c.kind())));
            }
            _ => {}
        }
    }
    splats
}

/// Whether a `def`'s body only passes, holds a docstring or `...`, raises
/// `NotImplementedError`, or returns its own parameters unchanged: a
/// protocol base's placeholder.
pub fn does_nothing(def: Node<'_>, text: &str) -> bool {
    let Some(body) = def.field("body") else {
        return false;
    };
    let parameters = crate::syntax::parameter_names(def, text);
    let mut cursor = body.walk();
    body.named_children(&mut cursor)
        .all(|statement| match statement.kind() {
            "pass_statement" | "comment" => true,
            "raise_statement" => statement
                .named_child(0)
                .is_some_and(|e| text_of(e, text).starts_with("NotImplementedError")),
            "expression_statement" => statement
                .named_child(0)
                .is_some_and(|e| matches!(e.kind(), "string" | "ellipsis")),
            "return_statement" => match statement.named_child(0) {
                None => true,
                Some(value) => text_of(value, text)
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .all(|w| parameters.iter().any(|p| p == w) || w == "None"),
            },
            _ => false,
        })
}

/// A dotted name spelled across blanks or lines (`a . b`), written solid.
pub fn strip_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Flattens a name to at most 40 characters on one line, for messages.
pub fn short(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 40 {
        format!("{}...", flat.chars().take(37).collect::<String>())
    } else {
        flat
    }
}

/// The innermost function or class around a node, found from byte spans
/// rather than by walking up the tree (tree-sitter finds a node's parent by
/// descending from the root, so each step up costs a walk down).
pub struct Enclosing<'t> {
    /// Nodes sorted by start (outer first at equal starts), with the index
    /// of the innermost one around each.
    spans: Vec<(usize, usize, Node<'t>, Option<usize>)>,
}

impl<'t> Enclosing<'t> {
    /// The spans of `nodes`, which must nest (syntax nodes do).
    pub fn new(mut nodes: Vec<Node<'t>>) -> Enclosing<'t> {
        nodes.sort_by_key(|n| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
        nodes.dedup_by_key(|n| n.id());
        let mut spans: Vec<(usize, usize, Node<'t>, Option<usize>)> = Vec::new();
        let mut open: Vec<usize> = Vec::new();
        for node in nodes {
            let (start, end) = (node.start_byte(), node.end_byte());
            while let Some(&last) = open.last() {
                if spans[last].1 >= end && spans[last].0 <= start {
                    break;
                }
                open.pop();
            }
            spans.push((start, end, node, open.last().copied()));
            open.push(spans.len() - 1);
        }
        Enclosing { spans }
    }

    /// Every function (`def`, `lambda`) under `root`, `root` included.
    pub fn functions_under(root: Node<'t>) -> Enclosing<'t> {
        let mut found = Vec::new();
        preorder(root, |node| {
            if is_function(node) {
                found.push(node);
            }
        });
        Enclosing::new(found)
    }

    /// The innermost node of the set strictly around `node` (never `node`
    /// itself, nor a node it wraps).
    pub fn around(&self, node: Node<'_>) -> Option<Node<'t>> {
        let (start, end) = (node.start_byte(), node.end_byte());
        let mut at = self.spans.partition_point(|s| s.0 <= start).checked_sub(1);
        while let Some(i) = at {
            let (s, e, candidate, parent) = self.spans[i];
            // A node with the same span as a function is the function or
            // a node wrapping it (a class body that is one `def`): no
            // child of a `def` or `lambda` spans all of it.
            if s <= start && end <= e && (s, e) != (start, end) {
                return Some(candidate);
            }
            at = parent;
        }
        None
    }
}

/// Python's `__qualname__` of definitions, from spans instead of walks up
/// the tree: a definition's name under the qualnames of the classes and
/// functions around it (`f.<locals>.C.m`; a lambda is `<lambda>`, and only
/// `def`s and classes make the path). Each qualname is computed once.
pub struct Qualnames<'t> {
    /// The `def`s and classes of the file.
    outer: Enclosing<'t>,
    text: &'t str,
    memo: std::cell::RefCell<std::collections::HashMap<usize, String>>,
}

impl<'t> Qualnames<'t> {
    /// `definitions`: every `function_definition` and `class_definition`
    /// of the file (lambdas are left out of qualnames' paths).
    pub fn new(definitions: Vec<Node<'t>>, text: &'t str) -> Qualnames<'t> {
        Qualnames {
            outer: Enclosing::new(definitions),
            text,
            memo: Default::default(),
        }
    }

    /// The qualname of a `def`, `lambda` or `class` node.
    pub fn of(&self, definition: Node<'_>) -> String {
        let own = match definition.kind() {
            "lambda" => "<lambda>".to_owned(),
            _ => definition
                .field("name")
                .map_or("?", |name| text_of(name, self.text))
                .to_owned(),
        };
        // Definitions nest by indentation (at most 99 levels), so this goes
        // at most that many levels up.
        match self.outer.around(definition) {
            None => own,
            Some(outer) => {
                let key = outer.start_byte();
                let known = self.memo.borrow().get(&key).cloned();
                let prefix = known.unwrap_or_else(|| {
                    let prefix = self.of(outer);
                    self.memo.borrow_mut().insert(key, prefix.clone());
                    prefix
                });
                if outer.kind() == "class_definition" {
                    format!("{prefix}.{own}")
                } else {
                    format!("{prefix}.<locals>.{own}")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node under `root`, `root` first, in document order.
    fn all_nodes(root: Node<'_>) -> Vec<Node<'_>> {
        let mut nodes = Vec::new();
        preorder(root, |node| nodes.push(node));
        nodes
    }

    /// The walk stays under the node it starts from, whatever follows it.
    #[test]
    fn preorder_visits_the_subtree_only_in_document_order() {
        let text = "def f(a):\n    return a\n\n\nx = 1\n";
        let tree = crate::parse::parse(text).unwrap();
        let root = tree.root_node();
        let def = root.named_child(0).unwrap();
        let mut kinds = Vec::new();
        preorder(def, |node| kinds.push(node.kind()));
        assert_eq!(kinds.first(), Some(&"function_definition"));
        assert!(kinds.contains(&"return_statement"), "{kinds:?}");
        assert!(!kinds.contains(&"expression_statement"), "{kinds:?}");
        let mut starts = Vec::new();
        preorder(root, |node| starts.push(node.start_byte()));
        assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
        assert_eq!(starts.len(), root.descendant_count());
    }

    /// A default that is a bare name is kept with its parameter's place,
    /// counted as `parameter_names` counts (past `*args`, not past a bare
    /// `*`); a literal, a call or an attribute is not.
    #[test]
    fn defaults_naming_a_value_around_are_kept_by_place() {
        let text = "def f(a, b=c, *d, e: int = g, h=1, i=j.k, *, l=m, **n): pass\n";
        let tree = crate::parse::parse(text).unwrap();
        let def = tree.root_node().named_child(0).unwrap();
        let names: Vec<(usize, String)> = parameter_default_names(def, text)
            .into_iter()
            .map(|(i, n)| (i, n.into()))
            .collect();
        assert_eq!(
            names,
            [
                (1, "c".to_owned()),
                (3, "g".to_owned()),
                (6, "m".to_owned())
            ]
        );
        assert_eq!(
            parameter_defaults(def),
            [false, true, false, true, true, true, true, false]
        );
    }

    /// `Qualnames` gives what walking up the tree gives, for every
    /// definition.
    #[test]
    fn qualnames_from_spans_agree_with_the_tree() {
        let text = "def f(a=lambda: 1):\n    def g():\n        return lambda x: (lambda: x)\n\
                    class C:\n    def m(self):\n        class D:\n            def n(self): pass\n\
                    @dec\nasync def h():\n    w = [lambda: 3 for _ in ()]\n";
        let tree = crate::parse::parse(text).unwrap();
        let definitions: Vec<Node<'_>> = all_nodes(tree.root_node())
            .into_iter()
            .filter(|n| {
                matches!(
                    n.kind(),
                    "function_definition" | "class_definition" | "lambda"
                )
            })
            .collect();
        let qualnames = Qualnames::new(
            definitions
                .iter()
                .copied()
                .filter(|d| d.kind() != "lambda")
                .collect(),
            text,
        );
        assert!(definitions.len() > 10);
        for definition in definitions {
            assert_eq!(
                qualnames.of(definition),
                crate::syntax::qualname(definition, text),
                "{definition:?}"
            );
        }
    }

    /// `around` gives what walking up the tree gives, for every node.
    #[test]
    fn enclosing_agrees_with_the_tree() {
        let text = "def f(a=lambda: 1):\n    def g():\n        return lambda x: x\n    y = 2\n\
                    class C:\n    def m(self):\n        z = [lambda: 3 for _ in ()]\n\
                    async def h():\n    pass\nw = lambda: (lambda: 0)\n";
        let tree = crate::parse::parse(text).unwrap();
        let root = tree.root_node();
        let functions = Enclosing::functions_under(root);
        let nodes = all_nodes(root);
        assert!(nodes.len() > 50);
        for node in nodes {
            assert_eq!(
                functions.around(node).map(|n| n.id()),
                enclosing_function(node).map(|n| n.id()),
                "{node:?}"
            );
        }
    }

    /// The class an annotation names, through `Optional`, `| None` and a
    /// string; none where it names several or none.
    #[test]
    fn annotations_name_one_class() {
        let text = "def f(self, a: Off, b: m.Off = None, c: Optional[Off], d: Off | None, \
                    e: 'Off', f: int | str, g, *h, i: list[Off], j: None | typing.Optional[m.Off], **k): pass\n";
        let tree = crate::parse::parse(text).unwrap();
        let def = tree.root_node().named_child(0).unwrap();
        let names = parameter_names(def, text);
        let annotations = parameter_annotations(def, text);
        assert_eq!(names.len(), annotations.len(), "{}", def.to_sexp());
        let off = Some("Off".to_owned());
        assert_eq!(
            annotations,
            vec![
                None,
                off.clone(),
                Some("m.Off".to_owned()),
                off.clone(),
                off.clone(),
                off,
                Some("int".to_owned()).filter(|_| false),
                None,
                None,
                None,
                Some("m.Off".to_owned()),
                None,
            ],
            "{}",
            def.to_sexp()
        );
    }

    /// What `calls.scm` captures of every call, in text order: a bare name,
    /// or a method call read from its callee's fields.
    #[test]
    fn calls_are_read_from_the_callee_fields() {
        let text = "f(x)\na.b.c(y)\nm.a().b()\nx[0].go()\ng()()\n";
        let tree = crate::parse::parse(text).unwrap();
        let q = &crate::queries::QUERIES.calls;
        let mut seen = Vec::new();
        each_match(&q.compiled.query, tree.root_node(), text, |_, captures| {
            let call = capture(captures, q.call).unwrap();
            let what = match (
                capture(captures, q.name),
                capture(captures, q.attribute).and_then(method_callee),
            ) {
                (Some(name), _) => text_of(name, text).to_owned(),
                (None, Some((receiver, method))) => {
                    format!("{} . {}", text_of(receiver, text), text_of(method, text))
                }
                (None, None) => "?".to_owned(),
            };
            seen.push((call.start_byte(), call.end_byte(), what));
        });
        seen.sort();
        let seen: Vec<&str> = seen.iter().map(|(_, _, what)| what.as_str()).collect();
        // `g()()` calls what a call returns: only its inner call is named.
        assert_eq!(
            seen,
            ["f", "a.b . c", "m . a", "m.a() . b", "x[0] . go", "g"]
        );
    }
}
