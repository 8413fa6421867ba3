//! Rules CPython enforces that tree-sitter's grammar does not: where a line
//! may be inserted without splitting a logical line or landing in a string,
//! what CPython counts as the module docstring, where `from __future__`
//! imports may stand, and what an inserted line may hold. The matcher asks
//! these questions to place its insertions; [`check_rewrite`] asks them
//! again of every rewrite before it is written, so that a rewrite CPython
//! would reject is refused even where tree-sitter accepts it.

use tree_sitter::{Node, Tree};

use crate::edit::Edit;
use crate::source::line_start;

/// Python's hard keywords: never a name, even where tree-sitter reads one.
pub const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// The root of the tree `node` belongs to.
pub fn root_of(node: Node<'_>) -> Node<'_> {
    let mut node = node;
    while let Some(parent) = node.parent() {
        node = parent;
    }
    node
}

/// The nodes that strictly contain `offset` (start < offset < end), innermost first.
fn spanning(root: Node<'_>, offset: usize) -> impl Iterator<Item = Node<'_>> {
    let first = root.descendant_for_byte_range(offset, offset);
    std::iter::successors(first, |n| n.parent())
        .filter(move |n| n.start_byte() < offset && offset < n.end_byte())
}

/// Whether `offset` lies inside a string literal (f-strings and their
/// replacement fields included).
fn inside_string(root: Node<'_>, offset: usize) -> bool {
    spanning(root, offset).any(|n| n.kind() == "string")
}

/// Node kinds whose direct children are statements, blocks and clauses,
/// never a bracket.
const STATEMENT_CONTAINERS: &[&str] = &[
    "module",
    "block",
    "decorated_definition",
    "function_definition",
    "class_definition",
    "if_statement",
    "elif_clause",
    "else_clause",
    "for_statement",
    "while_statement",
    "try_statement",
    "except_clause",
    "except_group_clause",
    "finally_clause",
    "with_statement",
    "match_statement",
    "case_clause",
    "expression_statement",
];

/// Whether `offset` lies between an opening bracket and its closing one.
fn inside_brackets(root: Node<'_>, offset: usize) -> bool {
    spanning(root, offset).any(|n| {
        // Statements and their lists hold no bracket of their own (a
        // statement's brackets belong to an expression node in it): their
        // children, thousands in a long body, are not counted for nothing.
        if STATEMENT_CONTAINERS.contains(&n.kind()) {
            return false;
        }
        let mut depth = 0i32;
        let mut cursor = n.walk();
        for child in n.children(&mut cursor) {
            if child.end_byte() > offset {
                break;
            }
            match child.kind() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                _ => {}
            }
        }
        depth > 0
    })
}

/// Whether the physical line before the one starting at `line_start` ends
/// with a backslash that continues it (one outside a comment).
fn continued_from_above(root: Node<'_>, text: &str, line_start: usize) -> bool {
    let before = &text.as_bytes()[..line_start];
    let Some(body) = before.strip_suffix(b"\n") else {
        return false;
    };
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    if !body.ends_with(b"\\") {
        return false;
    }
    let at = body.len() - 1;
    root.descendant_for_byte_range(at, at + 1)
        .is_none_or(|n| n.kind() != "comment")
}

/// Whether a comment line inserted at the line start `at` is a comment to
/// CPython: not inside a string, not after a line that a backslash
/// continues (a comment there would end the logical line early).
pub fn comment_may_go_at(root: Node<'_>, text: &str, at: usize) -> bool {
    !inside_string(root, at) && !continued_from_above(root, text, at)
}

/// Whether the line start `at` starts a logical line: a line of code
/// (a decorator, an import) inserted there splits nothing.
pub fn is_logical_line_start(root: Node<'_>, text: &str, at: usize) -> bool {
    comment_may_go_at(root, text, at) && !inside_brackets(root, at)
}

/// The start of the nearest line at or above the one holding `offset` that
/// `fits` (the start of the file always does).
fn up_to(text: &str, offset: usize, fits: impl Fn(usize) -> bool) -> usize {
    let mut at = line_start(text, offset);
    while at > 0 && !fits(at) {
        at = line_start(text, at - 1);
    }
    at
}

/// The start of the logical line holding `offset`.
pub fn logical_line_start(root: Node<'_>, text: &str, offset: usize) -> usize {
    up_to(text, offset, |at| is_logical_line_start(root, text, at))
}

/// Where a comment about the code at `offset` can stand: the start of its
/// line, or of the nearest line above where a comment is a comment.
pub fn comment_line_start(root: Node<'_>, text: &str, offset: usize) -> usize {
    up_to(text, offset, |at| comment_may_go_at(root, text, at))
}

/// The first logical line start at or after `offset` (the end of the text
/// if there is none).
pub fn next_logical_line_start(root: Node<'_>, text: &str, offset: usize) -> usize {
    let mut at = offset;
    loop {
        if at >= text.len() {
            return text.len();
        }
        if (at == 0 || text.as_bytes()[at - 1] == b'\n') && is_logical_line_start(root, text, at) {
            return at;
        }
        at = crate::source::next_line_start(text, at);
    }
}

/// Whether a string literal node is a plain `str` constant to CPython (not
/// an f-string, not bytes).
fn is_str_literal(node: Node<'_>, text: &str) -> bool {
    match node.kind() {
        "string" => {
            let prefix: String = text[node.byte_range()]
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .collect::<String>()
                .to_ascii_lowercase();
            !prefix.contains('f') && !prefix.contains('b') && !prefix.contains('t')
        }
        "concatenated_string" => {
            let mut cursor = node.walk();
            node.named_children(&mut cursor)
                .all(|part| part.kind() != "string" || is_str_literal(part, text))
        }
        _ => false,
    }
}

/// Whether `statement`, a module's first statement, is its docstring as
/// CPython sees it: an expression statement whose value, once any
/// parentheses are taken off, is a `str` literal (a concatenation of them
/// included; not an f-string, not bytes).
pub fn is_docstring(statement: Node<'_>, text: &str) -> bool {
    if statement.kind() != "expression_statement" || statement.named_child_count() != 1 {
        return false;
    }
    let mut value = statement.named_child(0);
    while let Some(v) = value.filter(|v| v.kind() == "parenthesized_expression") {
        value = (v.named_child_count() == 1)
            .then(|| v.named_child(0))
            .flatten();
    }
    value.is_some_and(|v| is_str_literal(v, text))
}

/// The module's statements that CPython allows before a `from __future__`
/// import and the future imports themselves: the docstring, then future
/// imports (comments and blank lines do not count). The last of them, if any.
pub fn future_prefix_end<'t>(root: Node<'t>, text: &str) -> Option<Node<'t>> {
    let mut cursor = root.walk();
    let mut last = None;
    let mut first = true;
    for child in root.named_children(&mut cursor) {
        if child.kind() == "comment" {
            continue;
        }
        let allowed =
            (first && is_docstring(child, text)) || child.kind() == "future_import_statement";
        first = false;
        if !allowed {
            break;
        }
        last = Some(child);
    }
    last
}

/// The first `from __future__` import CPython would reject for standing
/// after other code, if there is one.
pub fn misplaced_future_import<'t>(root: Node<'t>, text: &str) -> Option<Node<'t>> {
    let allowed_end = future_prefix_end(root, text).map_or(0, |n| n.end_byte());
    let mut cursor = root.walk();
    root.named_children(&mut cursor)
        .find(|n| n.kind() == "future_import_statement" && n.start_byte() >= allowed_end)
}

/// Whether `name` is a Python identifier (and no keyword).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && !KEYWORDS.contains(&name)
}

/// Whether `path` is a dotted name of identifiers, optionally led by dots
/// (a relative module).
fn is_dotted(path: &str, relative: bool) -> bool {
    let path = if relative {
        path.trim_start_matches('.')
    } else {
        path
    };
    !path.is_empty() && path.split('.').all(is_identifier)
}

/// Why a line hookfence inserts (without its indentation and line ending)
/// is not one CPython reads as meant, if it is not.
fn line_problem(line: &str) -> Option<String> {
    if let Some(c) = line.chars().find(|c| c.is_control() && *c != '\t') {
        return Some(format!(
            "the inserted line {line:?} holds the control character {c:?}"
        ));
    }
    if line.starts_with('#') {
        return None;
    }
    let ok = if let Some(decorator) = line.strip_prefix('@') {
        is_call_or_name(decorator)
    } else if let Some(module) = line.strip_prefix("import ") {
        match module.split_once(" as ") {
            Some((module, alias)) => is_dotted(module, false) && is_identifier(alias),
            None => is_dotted(module, false),
        }
    } else if let Some(rest) = line.strip_prefix("from ") {
        rest.split_once(" import ")
            .is_some_and(|(module, name)| is_dotted(module, true) && is_identifier(name))
    } else {
        false
    };
    (!ok).then(|| format!("the inserted line {line:?} is no decorator or import of Python names"))
}

/// `dotted` or `dotted(...)` with balanced brackets and nothing after.
fn is_call_or_name(text: &str) -> bool {
    match text.split_once('(') {
        None => is_dotted(text, false),
        Some((callee, rest)) => {
            is_dotted(callee, false) && rest.ends_with(')') && {
                let mut depth = 1i32;
                rest.chars().all(|c| {
                    depth += match c {
                        '(' | '[' | '{' => 1,
                        ')' | ']' | '}' => -1,
                        _ => 0,
                    };
                    depth >= 0
                }) && depth == 0
            }
        }
    }
}

/// A rewrite CPython would reject: where (an offset into the new text) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: usize,
    pub what: String,
}

/// Checks a rewrite against the rules above: every inserted line stands at
/// a logical line start (a comment: where a comment is a comment) and holds
/// a decorator, import or comment of valid names; every inserted wrap is a
/// dotted callee; and no `from __future__` import stands after other code
/// unless one already did in `old`. `made` are the edits of `old` that give
/// `new`, in text order; `tree` is `new`'s tree.
pub fn check_rewrite(old: &str, made: &[Edit], new: &str, tree: &Tree) -> Result<(), Violation> {
    let root = tree.root_node();
    let mut shift: isize = 0;
    for edit in made {
        let at = edit.start.saturating_add_signed(shift);
        shift += edit.replacement.len() as isize - (edit.end - edit.start) as isize;
        let whole_lines = edit.start == edit.end
            && line_start(old, edit.start) == edit.start
            && edit.replacement.ends_with('\n');
        if whole_lines {
            for line in edit.replacement.split_inclusive('\n') {
                let body = line
                    .trim_end_matches(['\n', '\r'])
                    .trim_start_matches([' ', '\t', '\x0c']);
                if let Some(what) = line_problem(body) {
                    return Err(Violation { at, what });
                }
                let fits = if body.starts_with('#') {
                    comment_may_go_at(root, new, at)
                } else {
                    is_logical_line_start(root, new, at)
                };
                if !fits {
                    let what = if inside_string(root, at) {
                        "an inserted line would land inside a string literal"
                    } else {
                        "an inserted line would split a logical line (after a backslash continuation or inside brackets)"
                    };
                    return Err(Violation {
                        at,
                        what: what.to_owned(),
                    });
                }
            }
        } else if edit.start == edit.end {
            // A lambda wrap: `callee(` before it, `)` after it.
            let text = edit.replacement.as_str();
            let ok = text == ")" || text.strip_suffix('(').is_some_and(|c| is_dotted(c, false));
            if !ok {
                return Err(Violation {
                    at,
                    what: format!("the inserted text {text:?} is no call of a Python name"),
                });
            }
        }
    }
    if let Some(future) = misplaced_future_import(root, new) {
        let was_misplaced = crate::parse::parse(old)
            .is_some_and(|t| misplaced_future_import(t.root_node(), old).is_some());
        if !was_misplaced {
            return Err(Violation {
                at: future.start_byte(),
                what:
                    "a `from __future__` import would no longer stand at the beginning of the file"
                        .to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn root_and(text: &str, f: impl FnOnce(Node<'_>)) {
        let tree = crate::parse::parse(text).unwrap();
        f(tree.root_node());
    }

    #[test]
    fn logical_line_starts_skip_continuations_brackets_and_strings() {
        let text = "x = 1 + \\\n2\ny = (\n    3)\ns = '''\nz\n'''\n# c \\\nw = 1\n";
        root_and(text, |root| {
            let line = |n: usize| {
                text.split_inclusive('\n')
                    .take(n - 1)
                    .map(str::len)
                    .sum::<usize>()
            };
            let starts: Vec<bool> = (1..=9)
                .map(|n| is_logical_line_start(root, text, line(n)))
                .collect();
            assert_eq!(
                starts,
                [true, false, true, false, true, false, false, true, true]
            );
            // A comment may go inside brackets, never in a string or after `\`.
            assert!(comment_may_go_at(root, text, line(4)));
            assert!(!comment_may_go_at(root, text, line(6)));
            assert!(!comment_may_go_at(root, text, line(2)));
            assert_eq!(logical_line_start(root, text, line(2) + 1), 0);
            assert_eq!(comment_line_start(root, text, line(7)), line(5));
            assert_eq!(next_logical_line_start(root, text, 3), line(3));
        });
    }

    #[test]
    fn docstrings_are_what_cpython_calls_one() {
        for (text, is) in [
            ("\"doc\"\n", true),
            ("(\"doc\")\n", true),
            ("((\"a\"\n  \"b\"))\n", true),
            ("r'''doc'''\n", true),
            ("u'doc'\n", true),
            ("b'doc'\n", false),
            ("f'doc'\n", false),
            ("'a' f'b'\n", false),
            ("('doc', 1)\n", false),
            ("x = 'doc'\n", false),
        ] {
            root_and(text, |root| {
                assert_eq!(
                    is_docstring(root.named_child(0).unwrap(), text),
                    is,
                    "{text}"
                );
            });
        }
    }

    #[test]
    fn future_imports_after_other_code_are_found() {
        for (text, misplaced) in [
            (
                "(\"doc\")\n# c\nfrom __future__ import annotations\n",
                false,
            ),
            (
                "\"doc\"\nfrom __future__ import a\nfrom __future__ import b\n",
                false,
            ),
            ("import torch\nfrom __future__ import annotations\n", true),
            (
                "import torch\n(\"doc\")\nfrom __future__ import annotations\n",
                true,
            ),
            ("b\"doc\"\nfrom __future__ import annotations\n", true),
        ] {
            root_and(text, |root| {
                assert_eq!(
                    misplaced_future_import(root, text).is_some(),
                    misplaced,
                    "{text}"
                );
            });
        }
    }

    #[test]
    fn inserted_imports_may_bind_an_alias() {
        // The decorate strategy binds torch under a fresh name where `torch`
        // may mean something else (see `scope`).
        assert_eq!(line_problem("import torch as _torch"), None);
        assert_eq!(line_problem("import torch as _hookfence_torch"), None);
        assert!(line_problem("import torch as 3").is_some());
        assert!(line_problem("import torch as class").is_some());
        assert!(line_problem("import torch as a b").is_some());
    }

    #[test]
    fn rewrites_cpython_would_reject_are_caught() {
        let check = |old: &str, edits: Vec<Edit>| {
            let applied = crate::edit::apply(old, &[crate::edit::Fix { edits }]);
            let tree = crate::parse::parse(&applied.text).unwrap();
            check_rewrite(old, &applied.made, &applied.text, &tree)
        };
        let old = "x = 1 + \\\n2\ns = '''\nz\n'''\ndef f(): pass\n";
        let at = |s: &str| old.find(s).unwrap();
        assert!(
            check(
                old,
                vec![Edit::insert(at("def"), "@torch.compiler.disable()\n")]
            )
            .is_ok()
        );
        assert!(check(old, vec![Edit::insert(at("2\n"), "# hookfence: ignore\n")]).is_err());
        assert!(check(old, vec![Edit::insert(at("z\n"), "# hookfence: ignore\n")]).is_err());
        assert!(check(old, vec![Edit::insert(at("def"), "import to rch\n")]).is_err());
        assert!(check(old, vec![Edit::insert(at("def"), "@no_compile\u{b}\n")]).is_err());
        assert!(
            check(
                old,
                vec![Edit::insert(at("def"), "from .a.b import no_compile\n")]
            )
            .is_ok()
        );
        assert!(
            check(
                old,
                vec![Edit::insert(at("def"), "from a b import no_compile\n")]
            )
            .is_err()
        );
        let old = "\"\"\"doc\"\"\"\nfrom __future__ import annotations\n";
        assert!(check(old, vec![Edit::insert(0, "import torch\n")]).is_err());
        assert!(check(old, vec![Edit::insert(old.len(), "import torch\n")]).is_ok());
    }
}
