//! The text the matcher reads where tree-sitter would read a file otherwise
//! than CPython does, at the same byte offsets and on the same lines:
//!
//! - identifiers are compared after NFKC normalisation, as CPython does
//!   (`ｐre_forward` defines `pre_forward`): each identifier that changes is
//!   written in its normal form, padded with spaces to its original length;
//! - a line holding only a backslash continuation (and blanks) at the start
//!   of a logical line, which CPython joins to the next line and tree-sitter
//!   misreads (as the first line of a class body it takes the methods out of
//!   the class), is read as a comment line: the `\` becomes `#`.
//!
//! The matcher runs on the shadow text; [`FileFacts::restore`] then maps what
//! it found back to the original: positions, the ends of renamed
//! identifiers, and insertion points, which go above the joined lines so
//! that no inserted line follows a continuation.
//!
//! [`FileFacts::restore`]: crate::analysis::file_facts::FileFacts::restore

use tree_sitter::{Node, Tree};
use unicode_normalization::UnicodeNormalization;

use crate::error::Position;
use crate::source::{line_start, text_position};

/// Whether NFKC changes some character of `text` taken alone (false for
/// ASCII text, which is checked first and fast).
pub fn changes_under_nfkc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = first_non_ascii(&bytes[at..]) {
        at += offset;
        let c = text[at..].chars().next().unwrap_or_default();
        if changes_alone(c) {
            return true;
        }
        at += c.len_utf8();
    }
    false
}

/// The offset of the first non-ASCII byte of `bytes`: ASCII runs are
/// skipped a block at a time (`is_ascii` reads a word at a time), since
/// almost all of a source file is ASCII.
fn first_non_ascii(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 64;
    let mut at = 0;
    while at + BLOCK <= bytes.len() && bytes[at..at + BLOCK].is_ascii() {
        at += BLOCK;
    }
    bytes[at..].iter().position(|&b| b >= 0x80).map(|i| at + i)
}

/// Whether NFKC changes `c` taken alone; remembered per thread for the
/// Basic Multilingual Plane, where almost every character of real text is.
fn changes_alone(c: char) -> bool {
    use std::cell::RefCell;
    thread_local! {
        /// 0: not known yet, 1: stays, 2: changes.
        static KNOWN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    let changes = |c: char| !c.nfkc().eq(std::iter::once(c));
    let Ok(i) = u16::try_from(u32::from(c)) else {
        return changes(c);
    };
    KNOWN.with_borrow_mut(|known| {
        if known.is_empty() {
            known.resize(1 << 16, 0);
        }
        let slot = &mut known[usize::from(i)];
        if *slot == 0 {
            *slot = if changes(c) { 2 } else { 1 };
        }
        *slot == 2
    })
}

/// `text` with every line on which some character changes under NFKC in
/// NFKC: the names CPython reads (the prefilter searches it, so that it
/// stays sound). A line break neither composes nor decomposes, so this is
/// the NFKC of those lines as they stand in the whole text, and the other
/// lines are copied as they are rather than normalised.
pub fn nfkc(text: &str) -> std::borrow::Cow<'_, str> {
    if !changes_under_nfkc(text) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut normal = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if changes_under_nfkc(line) {
            normal.extend(line.nfkc());
        } else {
            normal.push_str(line);
        }
    }
    std::borrow::Cow::Owned(normal)
}

/// A file hookfence cannot read in place: an identifier whose NFKC form is
/// longer than its spelling (`ⅷ` is `viii`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub at: Position,
    pub what: String,
}

/// The shadow of a file (see the module documentation).
#[derive(Debug, Clone)]
pub struct Shadow {
    pub text: String,
    /// Identifiers rewritten: start, end of the normal form, end of the
    /// original spelling; in text order.
    renamed: Vec<(usize, usize, usize)>,
    /// The starts of the backslash-only lines read as comments.
    joined: Vec<usize>,
}

impl Shadow {
    /// The shadow of `text` (whose tree is `tree`), or `None` where it would
    /// be `text` itself.
    pub fn of(tree: &Tree, text: &str) -> Result<Option<Shadow>, Unreadable> {
        let root = tree.root_node();
        let mut shadow: Option<Vec<u8>> = None;
        let mut renamed = Vec::new();
        let mut joined = Vec::new();
        if !text.is_ascii() {
            let mut skip_to = 0;
            for (i, c) in text.char_indices() {
                if c.is_ascii() || i < skip_to {
                    continue;
                }
                let Some(node) = root.descendant_for_byte_range(i, i + c.len_utf8()) else {
                    continue;
                };
                if node.kind() != "identifier" {
                    if node.child_count() == 0 {
                        // A comment or a string's text: nothing to rename in it.
                        skip_to = node.end_byte();
                    }
                    continue;
                }
                skip_to = node.end_byte();
                let (start, end) = (node.start_byte(), node.end_byte());
                let name = &text[start..end];
                let normal: String = name.nfkc().collect();
                if normal == name || crate::pyrules::KEYWORDS.contains(&normal.as_str()) {
                    continue;
                }
                if normal.len() > name.len() {
                    let (line, column) = text_position(text, start);
                    return Err(Unreadable {
                        at: Position { line, column },
                        what: format!(
                            "the name {name:?} is {normal:?} to CPython (NFKC), which hookfence cannot read in place"
                        ),
                    });
                }
                let bytes = shadow.get_or_insert_with(|| text.as_bytes().to_vec());
                bytes[start..start + normal.len()].copy_from_slice(normal.as_bytes());
                bytes[start + normal.len()..end].fill(b' ');
                renamed.push((start, start + normal.len(), end));
            }
        }
        for at in memchr::memchr_iter(b'\\', text.as_bytes()) {
            let begin = line_start(text, at);
            let alone = text.as_bytes()[begin..at]
                .iter()
                .all(|b| matches!(b, b' ' | b'\t' | b'\x0c'));
            let ends_line = matches!(&text.as_bytes()[at + 1..], [b'\n', ..] | [b'\r', b'\n', ..]);
            let continuation = root
                .descendant_for_byte_range(at, at + 1)
                .is_some_and(|n: Node<'_>| n.kind() == "line_continuation");
            if alone
                && ends_line
                && continuation
                && crate::pyrules::is_logical_line_start(root, text, begin)
            {
                shadow.get_or_insert_with(|| text.as_bytes().to_vec())[at] = b'#';
                joined.push(begin);
            }
        }
        let Some(bytes) = shadow else {
            return Ok(None);
        };
        // Only ASCII was written over whole characters: still UTF-8.
        let text = String::from_utf8(bytes).map_err(|_| Unreadable {
            at: Position { line: 1, column: 1 },
            what: "names hookfence cannot normalise in place".to_owned(),
        })?;
        Ok(Some(Shadow {
            text,
            renamed,
            joined,
        }))
    }

    /// The offset in the original of an offset into the shadow: one inside
    /// a renamed identifier's padding (or its normal form) is its end.
    pub fn offset(&self, offset: usize) -> usize {
        let i = self.renamed.partition_point(|&(start, ..)| start < offset);
        match i.checked_sub(1).map(|i| self.renamed[i]) {
            Some((_, _, end)) if offset < end => end,
            _ => offset,
        }
    }

    /// The position in the original of a position in the shadow (columns
    /// count characters, which renaming changes).
    pub fn position(&self, original: &str, at: Position) -> Position {
        if self.renamed.is_empty() {
            return at;
        }
        let begin = original
            .match_indices('\n')
            .nth(at.line.saturating_sub(2))
            .map_or(0, |(i, _)| i + 1);
        let begin = if at.line <= 1 { 0 } else { begin };
        let offset = self.text[begin..]
            .char_indices()
            .nth(at.column.saturating_sub(1))
            .map_or(self.text.len(), |(i, _)| begin + i);
        let (line, column) = text_position(original, self.offset(offset));
        Position { line, column }
    }

    /// The line start to insert at in the original for one found in the
    /// shadow: above the backslash-only lines that continue into it.
    pub fn insertion(&self, original: &str, mut at: usize) -> usize {
        while at > 0 {
            let above = line_start(original, at - 1);
            if self.joined.binary_search(&above).is_err() {
                break;
            }
            at = above;
        }
        at
    }

    /// Maps positions found in the shadow back to `original`.
    pub fn restore_positions(&self, positions: &mut [Position], original: &str) {
        for at in positions {
            *at = self.position(original, *at);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn shadow(text: &str) -> Result<Option<Shadow>, Unreadable> {
        Shadow::of(&crate::parse::parse(text).unwrap(), text)
    }

    #[test]
    fn names_are_normalised_in_place_and_positions_map_back() {
        let text = "def \u{ff50}re_forward(self): \u{ff4d} = x\n";
        let s = shadow(text).unwrap().unwrap();
        assert_eq!(s.text.len(), text.len());
        assert!(
            s.text.starts_with("def pre_forward  (self): m   = x\n"),
            "{:?}",
            s.text
        );
        // The column of `=` in the shadow is that of `=` in the original.
        let eq_shadow = s.text.find('=').unwrap();
        let (line, column) = text_position(&s.text, eq_shadow);
        let at = s.position(text, Position { line, column });
        assert_eq!(
            (at.line, at.column),
            text_position(text, text.find('=').unwrap())
        );
        // An offset inside the padding is the end of the original name.
        assert_eq!(s.offset(5), "def \u{ff50}re_forward".len());
        // Nothing to do: no shadow; strings and comments are left as they are.
        assert!(shadow("x = '\u{ff50}'  # \u{ff50}\n").unwrap().is_none());
        assert!(shadow("x = 1\n").unwrap().is_none());
        // Longer normal forms cannot be read in place.
        assert!(shadow("\u{2177} = 1\n").is_err());
    }

    #[test]
    fn backslash_only_lines_at_a_logical_line_start_become_comments() {
        let text =
            "class A:\n    \\\n    def f(self): pass\nx = (1,\n\\\n2)\ny = 1 + \\\n  \\\n  2\n";
        let s = shadow(text).unwrap().unwrap();
        assert_eq!(
            s.text,
            "class A:\n    #\n    def f(self): pass\nx = (1,\n\\\n2)\ny = 1 + \\\n  \\\n  2\n"
        );
        let def = text.find("    def").unwrap();
        assert_eq!(s.insertion(text, def), text.find("    \\").unwrap());
    }

    #[test]
    fn nfkc_is_applied_only_where_it_changes_something() {
        assert!(!changes_under_nfkc("plain ascii"));
        assert!(!changes_under_nfkc("caf\u{e9} \u{4e2d}"));
        assert!(changes_under_nfkc("\u{ff50}re_forward"));
        assert_eq!(nfkc("\u{fb01}x"), "fix");
        // Found wherever it stands against the blocks ASCII is skipped by.
        for pad in [0, 1, 63, 64, 65, 127, 128, 200] {
            let text = format!("{}\u{ff50}re_forward", "a".repeat(pad));
            assert!(changes_under_nfkc(&text), "after {pad} ASCII bytes");
            assert_eq!(first_non_ascii(text.as_bytes()), Some(pad));
            assert!(!changes_under_nfkc(&"a".repeat(pad)));
        }
        // Only the lines that change are normalised.
        assert_eq!(
            nfkc("caf\u{e9} \u{2026}\nplain \u{e9}\n\u{ff50}re_forward\n"),
            "caf\u{e9} ...\nplain \u{e9}\npre_forward\n"
        );
    }
}
