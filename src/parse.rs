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
    match depth_of(&tree, MAX_TREE_DEPTH, SHALLOW_DEPTH) {
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
/// node deeper than `limit`. Exact where it is over `exact_above` (below
/// `limit`); where it is not, some depth up to `exact_above`. A walk with a
/// cursor, no recursion, that does not enter a subtree with too few nodes
/// to reach past `exact_above` (a node at depth d with n nodes below it
/// holds none deeper than d + n): the first node deeper than `limit` is the
/// one a full walk meets first.
pub fn depth_of(tree: &Tree, limit: usize, exact_above: usize) -> Result<usize, usize> {
    depth_walk(tree, limit, exact_above).0
}

/// [`depth_of`], with the number of nodes the walk landed on.
fn depth_walk(tree: &Tree, limit: usize, exact_above: usize) -> (Result<usize, usize>, usize) {
    let mut cursor = tree.walk();
    let (mut depth, mut deepest, mut visited) = (0usize, 0usize, 1usize);
    loop {
        // `descendant_count` counts the node itself.
        let may_reach_past =
            depth + cursor.node().descendant_count().saturating_sub(1) > exact_above;
        if may_reach_past && cursor.goto_first_child() {
            depth += 1;
            visited += 1;
            if depth > limit {
                return (Err(cursor.node().start_byte()), visited);
            }
            deepest = deepest.max(depth);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                visited += 1;
                break;
            }
            if !cursor.goto_parent() {
                return (Ok(deepest), visited);
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

/// `count` small module-level defs, one after another: a flat file of
/// thousands of nodes, for tests of walks that should step over them.
#[cfg(test)]
pub(crate) fn flat_defs(count: usize) -> String {
    (0..count)
        .map(|i| format!("def f{i}(a, b):\n    return [a + b * {i} for _ in a]\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::{Edit, Fix, apply};

    /// Texts from flat to nested past every bound below.
    fn nested_texts() -> Vec<String> {
        let mut texts = vec![
            "import os\nclass A:\n    def f(self, x):\n        return [y for y in x if y]\n"
                .to_owned(),
        ];
        for n in [10, 100, 300, 700] {
            texts.push(format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n)));
            texts.push(format!("y = 1{}\n", " + 1".repeat(n)));
            texts.push(format!(
                "def f():\n    z = {}0{}\n    return z\n",
                "[".repeat(n),
                "]".repeat(n)
            ));
        }
        texts
    }

    #[test]
    fn the_depth_walk_is_exact_past_its_bound_and_errs_where_a_full_walk_does() {
        for text in nested_texts() {
            let tree = parse(&text).expect("parses");
            for (limit, exact_above) in [(MAX_TREE_DEPTH, SHALLOW_DEPTH), (400, 50), (120, 100)] {
                let full = depth_of(&tree, limit, 0);
                let pruned = depth_of(&tree, limit, exact_above);
                match full {
                    Ok(depth) if depth > exact_above => assert_eq!(pruned, full, "{text:.40}"),
                    Ok(_) => assert!(matches!(pruned, Ok(d) if d <= exact_above), "{text:.40}"),
                    Err(_) => assert_eq!(pruned, full, "{text:.40}"),
                }
            }
        }
    }

    #[test]
    fn the_depth_walk_does_not_enter_small_subtrees() {
        let text = flat_defs(200);
        let tree = parse(&text).expect("parses");
        let (depth, visited) = depth_walk(&tree, MAX_TREE_DEPTH, SHALLOW_DEPTH);
        assert!(matches!(depth, Ok(d) if d <= SHALLOW_DEPTH));
        // The module and its 200 defs, not the thousands of nodes inside.
        assert!(visited <= 201, "{visited}");
        assert!(tree.root_node().descendant_count() > 5_000);
        assert!(depth_walk(&tree, MAX_TREE_DEPTH, 0).1 > 5_000);
    }

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
