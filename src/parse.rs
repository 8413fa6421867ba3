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

/// The deepest nesting of syntax the analysis walks: deeper trees are refused
/// before any question is asked of them, so that every walk over syntax,
/// recursive or not, runs on a bounded stack (each worker thread has
/// [`WORKER_STACK_BYTES`]). CPython 3.12's parser allows about as much
/// (its `MAXSTACK` is 6,000) and 3.11's compiler less.
pub const MAX_TREE_DEPTH: usize = 5_000;

/// The stack a file deeper than [`SHALLOW_DEPTH`] is analysed on: room for
/// [`MAX_TREE_DEPTH`] levels of the deepest walk with a wide margin
/// (measured: 4,000 levels of an attribute chain fit in 2 MiB in a release
/// build). The worker pool's threads and the main thread have it too.
pub const WORKER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Trees at most this deep are analysed on any thread (the directory
/// walker's own threads have the platform's default stack); deeper ones on
/// a thread of [`WORKER_STACK_BYTES`] (see [`on_big_stack`]).
pub const SHALLOW_DEPTH: usize = 256;

/// A file's tree, checked, with the depth of its deepest node.
pub struct Parsed {
    pub tree: Tree,
    pub depth: usize,
}

impl Parsed {
    /// Whether the analysis of this tree must run on a big stack.
    pub fn is_deep(&self) -> bool {
        self.depth > SHALLOW_DEPTH
    }
}

/// Runs `work` on a new thread with a stack of [`WORKER_STACK_BYTES`], and
/// waits for it (inline, where no thread can be started).
pub fn on_big_stack<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    let work = std::sync::Mutex::new(Some(work));
    let take = || {
        work.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    };
    let outcome = std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("hookfence-deep".to_owned())
            .stack_size(WORKER_STACK_BYTES)
            .spawn_scoped(scope, || take().map(|w| w()));
        spawned.map(|handle| handle.join())
    });
    match outcome {
        Ok(Ok(Some(result))) => result,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        // No thread could start: the work runs here.
        Ok(Ok(None)) | Err(_) => match take() {
            Some(work) => work(),
            None => unreachable!("the work ran or was left to run here"),
        },
    }
}

/// Why a text is not analysed: CPython's syntax error, or nesting past
/// [`MAX_TREE_DEPTH`]; at a 1-based position of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxProblem {
    pub at: Position,
    pub what: String,
}

/// Parses a file's text for analysis: CPython's tokenizer rules first (see
/// [`crate::lexical`]; text that breaks one never reaches tree-sitter), then
/// tree-sitter's syntax errors, then the nesting bound. Every file whose
/// contents the analysis uses, named or read on demand, comes through here.
pub fn parse_checked(text: &str) -> Result<Parsed, SyntaxProblem> {
    let at = |offset: usize| {
        let (line, column) = text_position(text, offset);
        Position { line, column }
    };
    check_tokens(text)?;
    let tree = parse(text).ok_or_else(|| SyntaxProblem {
        at: at(0),
        what: "the parser gave up".to_owned(),
    })?;
    if let Some((position, what)) = first_error(&tree, text) {
        return Err(SyntaxProblem { at: position, what });
    }
    match depth_of(&tree, MAX_TREE_DEPTH) {
        Ok(depth) => Ok(Parsed { tree, depth }),
        Err(deepest) => Err(SyntaxProblem {
            at: at(deepest),
            what: format!(
                "nested more than {MAX_TREE_DEPTH} levels deep: too deep for hookfence to analyse"
            ),
        }),
    }
}

/// CPython's tokenizer rules (see [`crate::lexical`]): what breaks one is
/// the input's syntax error, and is never handed to tree-sitter.
pub fn check_tokens(text: &str) -> Result<(), SyntaxProblem> {
    crate::lexical::check(text).map_err(|v| {
        let (line, column) = text_position(text, v.at);
        SyntaxProblem {
            at: Position { line, column },
            what: match v.cpython_refuses {
                true => format!("syntax error: {} (CPython rejects it)", v.what),
                false => format!(
                    "{}: hookfence cannot analyse it as CPython reads it",
                    v.what
                ),
            },
        }
    })
}

/// The depth of the deepest node below the root, or the start of the first
/// node deeper than `limit`. A walk with a cursor, no recursion.
pub fn depth_of(tree: &Tree, limit: usize) -> Result<usize, usize> {
    let mut cursor = tree.walk();
    let (mut depth, mut deepest) = (0usize, 0usize);
    loop {
        if cursor.goto_first_child() {
            depth += 1;
            if depth > limit {
                return Err(cursor.node().start_byte());
            }
            deepest = deepest.max(depth);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return Ok(deepest);
            }
            depth -= 1;
        }
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

/// The first error or missing node in document order, going down only into
/// nodes that hold one (no recursion: a loop down the tree).
fn find_error(node: Node<'_>) -> Option<Node<'_>> {
    let mut node = node;
    'down: loop {
        if node.is_error() || node.is_missing() {
            return Some(node);
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.has_error() {
                node = child;
                continue 'down;
            }
        }
        return None;
    }
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
