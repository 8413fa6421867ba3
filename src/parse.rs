//! Parsing with tree-sitter: one parser per worker thread, reused for every
//! file it handles.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

use crate::error::Position;
use crate::queries::language;
use crate::source::text_position;

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new({
        let mut parser = Parser::new();
        parser
            .set_language(&language())
            .expect("the bundled Python grammar matches the tree-sitter version");
        parser
    });
}

/// Parses Python text. `None` only if tree-sitter gave up (it never does
/// without a timeout or cancellation flag, which hookfence does not set).
pub fn parse(text: &str) -> Option<Tree> {
    PARSER.with(|parser| parser.borrow_mut().parse(text, None))
}

/// The first syntax error in a tree, as a position and a short description.
pub fn first_error(tree: &Tree, text: &str) -> Option<(Position, String)> {
    let root = tree.root_node();
    if !root.has_error() {
        return None;
    }
    let node = find_error(root)?;
    let (line, column) = text_position(text, node.start_byte());
    let what = if node.is_missing() {
        format!("syntax error: expected {:?}", node.kind())
    } else {
        let snippet: String = text[node.byte_range()]
            .chars()
            .take_while(|&c| c != '\n')
            .take(30)
            .collect();
        if snippet.trim().is_empty() {
            "syntax error".to_owned()
        } else {
            format!("syntax error near {:?}", snippet.trim())
        }
    };
    Some((Position { line, column }, what))
}

fn find_error(node: Node<'_>) -> Option<Node<'_>> {
    if node.is_error() || node.is_missing() {
        return Some(node);
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        if child.has_error()
            && let Some(found) = find_error(child)
        {
            return Some(found);
        }
    }
    None
}
