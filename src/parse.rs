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

/// Parses `new_text`, which is `old_text` after `made` (edits of
/// `old_text`, in the order of the text), reusing `old_tree` for everything
/// the edits did not touch: tree-sitter's incremental parse gives the tree a
/// fresh parse would, for a fraction of the work.
pub fn reparse(
    old_tree: &Tree,
    old_text: &str,
    made: &[crate::edit::Edit],
    new_text: &str,
) -> Option<Tree> {
    let mut tree = old_tree.clone();
    // From the last edit back, so each one's offsets are still those of the
    // original text when it is recorded.
    for edit in made.iter().rev() {
        let start_position = point_at(old_text, edit.start);
        let old_end_position = point_at(old_text, edit.end);
        let new_end_position = match edit.replacement.rfind('\n') {
            Some(last) => tree_sitter::Point {
                row: start_position.row + edit.replacement.matches('\n').count(),
                column: edit.replacement.len() - last - 1,
            },
            None => tree_sitter::Point {
                row: start_position.row,
                column: start_position.column + edit.replacement.len(),
            },
        };
        tree.edit(&tree_sitter::InputEdit {
            start_byte: edit.start,
            old_end_byte: edit.end,
            new_end_byte: edit.start + edit.replacement.len(),
            start_position,
            old_end_position,
            new_end_position,
        });
    }
    PARSER.with(|parser| parser.borrow_mut().parse(new_text, Some(&tree)))
}

/// Row and byte column of a byte offset, as tree-sitter counts them.
fn point_at(text: &str, offset: usize) -> tree_sitter::Point {
    let before = &text.as_bytes()[..offset];
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |p| p + 1);
    tree_sitter::Point {
        row: memchr::memchr_iter(b'\n', before).count(),
        column: offset - line_start,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::{Edit, Fix, apply};

    /// Every node with its kind, byte range and start and end points.
    fn nodes(tree: &Tree) -> Vec<String> {
        let mut out = Vec::new();
        let mut cursor = tree.walk();
        loop {
            let n = cursor.node();
            out.push(format!(
                "{} {:?} {:?} {:?}",
                n.kind(),
                n.byte_range(),
                n.start_position(),
                n.end_position()
            ));
            if cursor.goto_first_child() || cursor.goto_next_sibling() {
                continue;
            }
            loop {
                if !cursor.goto_parent() {
                    return out;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
            }
        }
    }

    #[test]
    fn an_incremental_reparse_gives_the_tree_a_fresh_parse_gives() {
        let old = "import os\n\nclass H:\n    def pre_forward(self, m):\n        m.to('cuda')\n\ndef f(x):\n    return x\n";
        let def_at = old.find("    def pre_forward").unwrap();
        let f_at = old.find("def f").unwrap();
        let cases = [
            vec![Edit::insert(def_at, "    @torch.compiler.disable()\n")],
            vec![
                Edit::insert(0, "import torch\n"),
                Edit::insert(def_at, "    @torch.compiler.disable()\n"),
                Edit::insert(f_at, "@no_compile\n"),
            ],
            // A replacement, and an edit that breaks the syntax.
            vec![Edit {
                start: f_at,
                end: f_at + 5,
                replacement: "async def g".to_owned(),
            }],
            vec![Edit::insert(f_at, "@disable(x=[)\n")],
        ];
        let old_tree = parse(old).unwrap();
        for edits in cases {
            let applied = apply(old, &[Fix { edits }]);
            let fresh = parse(&applied.text).unwrap();
            let reused = reparse(&old_tree, old, &applied.made, &applied.text).unwrap();
            assert_eq!(nodes(&reused), nodes(&fresh), "{}", applied.text);
            assert_eq!(
                first_error(&reused, &applied.text),
                first_error(&fresh, &applied.text)
            );
        }
    }
}
