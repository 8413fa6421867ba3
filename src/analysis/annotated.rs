//! Whether `target.name:` in a text can be an annotated assignment
//! (`m.forward: T = f`), read backwards from the `.` without a parse.
//!
//! An annotated assignment is a statement of its own: its target, a
//! primary (names joined by `.`, calls and subscripts), starts a logical
//! line or follows the `;` or `:` that ends the statement or header before
//! it. `if cls != rep.__class__:`, `while m.forward:`, a dict's
//! `{m.forward: 1}`, a slice's `x[m.forward:]` or `class A(m.__class__):`
//! put something else before the primary, and none of them assigns. Where
//! the bytes are anything this reading does not follow (a string, a number,
//! an unbalanced bracket, a line continuation), the answer is yes: a needle
//! that counts costs a parse, one that does not can lose a match.
//!
//! The byte classes the prefilter reads names with live here too.

/// An ASCII identifier byte. Anything else (including every byte of a
/// non-ASCII character) may end or separate a name for these checks: when in
/// doubt a name counts.
pub(crate) fn is_ascii_word(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric()
}

/// What tree-sitter may skip between two tokens on one logical line: blanks,
/// line continuations, and the bytes of non-ASCII characters (its grammar
/// allows some Unicode spaces).
pub(crate) fn is_gap(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r' | b'\n' | b'\\') || b >= 0x80
}

/// Whether the primary that ends just before the `.` at `dot` can start a
/// statement.
pub(crate) fn may_start_statement(bytes: &[u8], dot: usize) -> bool {
    let mut end = dot;
    loop {
        // One operand of the primary ends at `end` (exclusive).
        let (before, crossed) = back_over_gaps(bytes, end);
        if crossed {
            // A line break between a `.` and its operand: inside brackets
            // or after a continuation, not followed here.
            return true;
        }
        let Some(&last) = before.checked_sub(1).and_then(|i| bytes.get(i)) else {
            return true;
        };
        let start = if last == b')' || last == b']' {
            let Some(open) = matching_open(bytes, before - 1) else {
                return true;
            };
            // A call or subscript trails another operand; a bare group is
            // the primary's first atom.
            let (ahead, crossed) = back_over_gaps(bytes, open);
            match ahead.checked_sub(1).map(|i| bytes[i]) {
                Some(b) if !crossed && (is_ascii_word(b) || b == b')' || b == b']') => {
                    end = ahead;
                    continue;
                }
                _ => open,
            }
        } else if is_ascii_word(last) {
            let mut i = before - 1;
            while i > 0 && is_ascii_word(bytes[i - 1]) {
                i -= 1;
            }
            i
        } else {
            return true;
        };
        let (ahead, crossed) = back_over_gaps(bytes, start);
        match ahead.checked_sub(1).map(|i| bytes[i]) {
            // Start of the text, or of a line.
            None => return true,
            _ if crossed => return true,
            Some(b'.') => end = ahead - 1,
            Some(b';' | b':' | b'\\') => return true,
            Some(_) => return false,
        }
    }
}

/// The position after the last non-gap byte before `end`, and whether the
/// gap skipped holds a line break.
fn back_over_gaps(bytes: &[u8], end: usize) -> (usize, bool) {
    let mut i = end;
    let mut crossed = false;
    while i > 0 && is_gap(bytes[i - 1]) {
        crossed |= bytes[i - 1] == b'\n' || bytes[i - 1] == b'\r';
        i -= 1;
    }
    (i, crossed)
}

/// The `(` or `[` that the bracket at `close` closes, found by counting
/// brackets backwards; `None` where a quote or a comment's `#` stands in
/// between (their brackets need not balance) or nothing opens it.
fn matching_open(bytes: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = close + 1;
    while i > 0 {
        i -= 1;
        match bytes[i] {
            b')' | b']' | b'}' => depth += 1,
            b'(' | b'[' | b'{' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' | b'\'' | b'#' => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::may_start_statement;

    /// Whether the `.` before the last `forward` or `__class__` in `text`
    /// can end an annotated assignment's target.
    fn starts(text: &str) -> bool {
        let at = text.rfind(".forward").or_else(|| text.rfind(".__class__"));
        may_start_statement(text.as_bytes(), at.expect("a needle"))
    }

    #[test]
    fn an_annotated_target_starts_its_statement() {
        for text in [
            "m.forward: T = f",
            "x = 1\n    m.forward: T = f",
            "x = 1; m.forward: T = f",
            "if ready: m.forward: T = f",
            "self.layers[i].forward: T = f",
            "self.layers [ i ] .forward: T = f",
            "get(m)(k).forward: T = f",
            "(m).forward: T = f",
            "a.b.\\\n    c.forward: T = f",
            "x = (1,\n    2)\nm.forward: T = f",
            // What is not followed counts.
            "'a'.forward: T = f",
            "x[')'].forward: T = f",
            "(\n  m).forward: T = f",
        ] {
            assert!(starts(text), "{text}");
        }
    }

    #[test]
    fn a_comparison_condition_or_literal_is_no_assignment() {
        for text in [
            "if cls != rep.__class__:",
            "    if self.__class__ == other.__class__:",
            "if type(other) is not self.__class__:",
            "while m.forward:",
            "elif m.forward:",
            "d = {m.forward: 1}",
            "x[m.forward:]",
            "class A(m.__class__):",
            "if f(x).forward:",
            "assert a[0].forward:",
        ] {
            assert!(!starts(text), "{text}");
        }
    }
}
