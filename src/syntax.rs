//! Small questions about tree-sitter nodes that every analysis module asks:
//! a node's text, the dotted name it spells, the function around it. No
//! Python meaning lives here.

use tree_sitter::{Node, Query, QueryCapture, QueryCursor, StreamingIterator};

pub fn text_of<'a>(node: Node<'_>, text: &'a str) -> &'a str {
    &text[node.byte_range()]
}

/// The first capture with index `index`.
pub fn capture<'t>(captures: &[QueryCapture<'t>], index: u32) -> Option<Node<'t>> {
    captures.iter().find(|c| c.index == index).map(|c| c.node)
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

/// The dotted name an identifier/attribute chain spells (`torch.compiler.disable`),
/// or `None` for anything else (a subscript, a call, ...).
pub fn dotted_name(node: Node<'_>, text: &str) -> Option<String> {
    match node.kind() {
        "identifier" => Some(text_of(node, text).to_owned()),
        "attribute" => {
            let object = dotted_name(node.child_by_field_name("object")?, text)?;
            let attribute = node.child_by_field_name("attribute")?;
            Some(format!("{object}.{}", text_of(attribute, text)))
        }
        _ => None,
    }
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
            "attribute" => current = current.child_by_field_name("object")?,
            "subscript" => current = current.child_by_field_name("value")?,
            "call" => current = current.child_by_field_name("function")?,
            "parenthesized_expression" => current = current.named_child(0)?,
            _ => return None,
        }
    }
}

/// The names a function's parameters bind, in order (`self` included).
pub fn parameter_names(function: Node<'_>, text: &str) -> Vec<String> {
    let Some(parameters) = function.child_by_field_name("parameters") else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut cursor = parameters.walk();
    for parameter in parameters.named_children(&mut cursor) {
        let name = match parameter.kind() {
            "identifier" => Some(parameter),
            "default_parameter" | "typed_default_parameter" => {
                parameter.child_by_field_name("name")
            }
            "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => {
                parameter.named_child(0)
            }
            _ => None,
        };
        let name = name.and_then(|n| match n.kind() {
            "identifier" => Some(n),
            _ => n.named_child(0).filter(|c| c.kind() == "identifier"),
        });
        if let Some(name) = name {
            names.push(text_of(name, text).to_owned());
        }
    }
    names
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
