//! CPython's tokenizer rules that tree-sitter's grammar does not enforce,
//! checked on the text before it is parsed: at most 99 levels of
//! indentation, consistent tabs and spaces (`TabError`), a dedent to a level
//! that was open, at most 200 nested brackets, and no number run into a name
//! (`0def`). Indentation that CPython accepts but tree-sitter's scanner
//! reads into other blocks (it counts a tab as 8 columns wherever it stands
//! and keeps columns in 16 bits) is refused too: the tree would not be the
//! program CPython runs. Text that breaks one is CPython's syntax error, reported as the
//! input's own; it is never handed to tree-sitter, whose indentation scanner
//! aborts the process past about 500 levels.
//!
//! One pass over the bytes with an explicit stack (strings, f-string
//! replacement fields and format specs nest without recursion), so the cost
//! is linear in the text and the stack is bounded whatever the input.

/// CPython's `MAXINDENT` (100): the indentation stack holds at most 99
/// levels above the first column.
pub const MAX_INDENT_LEVELS: usize = 99;

/// CPython's `MAXLEVEL`: at most 200 brackets open at once.
pub const MAX_BRACKETS: usize = 200;

/// A rule CPython's tokenizer enforces, broken at byte `at` of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub at: usize,
    pub what: &'static str,
    /// CPython refuses the text too (else only tree-sitter would misread
    /// it).
    pub cpython_refuses: bool,
}

/// Where the scanner stands inside strings and f-string fields.
#[derive(Debug, Clone, Copy)]
enum Frame {
    /// A string literal; `formatted` for f- and t-strings.
    Str {
        quote: u8,
        triple: bool,
        raw: bool,
        formatted: bool,
    },
    /// The expression of a replacement field opened at bracket depth `depth`.
    Field { depth: usize },
    /// The format spec of the innermost field.
    Spec,
}

fn is_name_byte(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80
}

/// Characters tree-sitter's grammar skips as whitespace but CPython's
/// tokenizer refuses between tokens (a byte-order mark only counts at the
/// very start, where decoding strips it): the first in `word`, with its
/// offset.
fn invisible_in(word: &[u8]) -> Option<(usize, &'static str)> {
    const INVISIBLE: [(&[u8], &str); 3] = [
        (b"\xe2\x80\x8b", "invalid non-printable character U+200B"),
        (b"\xe2\x81\xa0", "invalid non-printable character U+2060"),
        (b"\xef\xbb\xbf", "invalid non-printable character U+FEFF"),
    ];
    if word.is_ascii() {
        return None;
    }
    INVISIBLE
        .iter()
        .filter_map(|(bytes, what)| memchr::memmem::find(word, bytes).map(|offset| (offset, *what)))
        .min_by_key(|(offset, _)| *offset)
}

/// The first rule `text` breaks, if any.
pub fn check(text: &str) -> Result<(), Violation> {
    Scanner {
        bytes: text.as_bytes(),
        i: 0,
        brackets: 0,
        indents: vec![0],
        alt_indents: vec![0],
        scanner_indents: vec![0],
        line_start: true,
        frames: Vec::new(),
    }
    .run()
}

struct Scanner<'t> {
    bytes: &'t [u8],
    i: usize,
    brackets: usize,
    /// Columns of the open indentation levels, the first column first.
    indents: Vec<usize>,
    /// The same levels counted with a tab as one column (CPython's
    /// `altindstack`: both readings must order lines alike).
    alt_indents: Vec<usize>,
    /// The same levels as tree-sitter's scanner keeps them: a tab adds 8
    /// wherever it stands, and a level is stored in 16 bits.
    scanner_indents: Vec<u16>,
    /// At the start of a logical line: its indentation is still to be read.
    line_start: bool,
    frames: Vec<Frame>,
}

impl Scanner<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.i + ahead).copied()
    }

    fn run(mut self) -> Result<(), Violation> {
        while self.i < self.bytes.len() {
            match self.frames.last().copied() {
                Some(Frame::Str {
                    quote,
                    triple,
                    raw,
                    formatted,
                }) => self.in_string(quote, triple, raw, formatted, false),
                Some(Frame::Spec) => {
                    let Some(Frame::Str {
                        quote, triple, raw, ..
                    }) = self.enclosing_string()
                    else {
                        self.frames.pop();
                        continue;
                    };
                    self.in_string(quote, triple, raw, true, true);
                }
                Some(Frame::Field { depth }) => self.in_code(Some(depth))?,
                None => {
                    if self.line_start {
                        self.indentation()?;
                        continue;
                    }
                    self.in_code(None)?;
                }
            }
        }
        Ok(())
    }

    fn enclosing_string(&self) -> Option<Frame> {
        self.frames
            .iter()
            .rev()
            .find(|f| matches!(f, Frame::Str { .. }))
            .copied()
    }

    /// Reads the indentation of a line; a logical line's decides the level.
    fn indentation(&mut self) -> Result<(), Violation> {
        let start = self.i;
        let (mut column, mut alt, mut scanner) = (0usize, 0usize, 0u32);
        while let Some(b) = self.peek(0) {
            match b {
                b' ' => {
                    column += 1;
                    alt += 1;
                    scanner = scanner.saturating_add(1);
                }
                b'\t' => {
                    column = (column / 8 + 1) * 8;
                    alt += 1;
                    scanner = scanner.saturating_add(8);
                }
                b'\x0c' => (column, alt, scanner) = (0, 0, 0),
                _ => break,
            }
            self.i += 1;
        }
        match self.peek(0) {
            None => return Ok(()),
            // A blank line sets no level; the next line is read the same way.
            Some(b'\n') => {
                self.i += 1;
                return Ok(());
            }
            Some(b'\r') => {
                self.i += if self.peek(1) == Some(b'\n') { 2 } else { 1 };
                return Ok(());
            }
            // Nor does a comment-only line, or a lone continuation.
            Some(b'#' | b'\\') => {
                self.line_start = false;
                return Ok(());
            }
            Some(_) => {}
        }
        self.line_start = false;
        let inconsistent = Violation {
            at: start,
            what: "inconsistent use of tabs and spaces in indentation",
            cpython_refuses: true,
        };
        // CPython's levels: how many it opens (1) or closes.
        let top = self.indents.last().copied().unwrap_or(0);
        let alt_top = self.alt_indents.last().copied().unwrap_or(0);
        let (opened, closed) = if column == top {
            if alt != alt_top {
                return Err(inconsistent);
            }
            (false, 0)
        } else if column > top {
            if self.indents.len() > MAX_INDENT_LEVELS {
                return Err(Violation {
                    at: start,
                    what: "too many levels of indentation",
                    cpython_refuses: true,
                });
            }
            if alt <= alt_top {
                return Err(inconsistent);
            }
            self.indents.push(column);
            self.alt_indents.push(alt);
            (true, 0)
        } else {
            let mut closed = 0;
            while self.indents.len() > 1 && self.indents.last().is_some_and(|&c| column < c) {
                self.indents.pop();
                self.alt_indents.pop();
                closed += 1;
            }
            if self.indents.last() != Some(&column) {
                return Err(Violation {
                    at: start,
                    what: "unindent does not match any outer indentation level",
                    cpython_refuses: true,
                });
            }
            if self.alt_indents.last() != Some(&alt) {
                return Err(inconsistent);
            }
            (false, closed)
        };
        // The scanner's levels for the same line, as its decisions go: one
        // opened where the column is past the last level, else closed while
        // below it.
        let scanner_top = u32::from(self.scanner_indents.last().copied().unwrap_or(0));
        let (scanner_opened, mut scanner_closed) = (scanner > scanner_top, 0);
        if scanner_opened {
            // Kept in 16 bits: 65,536 columns are column 0 to it.
            self.scanner_indents.push(scanner as u16);
        } else {
            while self.scanner_indents.len() > 1
                && self
                    .scanner_indents
                    .last()
                    .is_some_and(|&c| scanner < u32::from(c))
            {
                self.scanner_indents.pop();
                scanner_closed += 1;
            }
        }
        if (scanner_opened, scanner_closed) != (opened, closed) {
            return Err(Violation {
                at: start,
                what: "indentation tree-sitter would read into another block than CPython does (a tab after spaces, or 65,536 columns or more)",
                cpython_refuses: false,
            });
        }
        Ok(())
    }

    /// One token of code; `field` is the depth of the replacement field the
    /// code stands in, if any.
    fn in_code(&mut self, field: Option<usize>) -> Result<(), Violation> {
        let b = self.bytes[self.i];
        match b {
            b'#' => {
                while self.peek(0).is_some_and(|b| b != b'\n' && b != b'\r') {
                    self.i += 1;
                }
            }
            b'\\' if matches!(self.peek(1), Some(b'\n' | b'\r')) => {
                let at = self.i;
                let crlf = self.peek(1) == Some(b'\r') && self.peek(2) == Some(b'\n');
                self.i += if crlf { 3 } else { 2 };
                // A continuation into the end of the file continues nothing.
                if self.i >= self.bytes.len() {
                    return Err(Violation {
                        at,
                        what: "unexpected EOF while parsing",
                        cpython_refuses: true,
                    });
                }
            }
            b'\\' if self.i + 1 == self.bytes.len() => {
                return Err(Violation {
                    at: self.i,
                    what: "unexpected EOF while parsing",
                    cpython_refuses: true,
                });
            }
            // Whitespace to tree-sitter, no character at all to CPython's
            // tokenizer (outside strings and comments).
            b'\x0b' => {
                return Err(Violation {
                    at: self.i,
                    what: "invalid non-printable character U+000B",
                    cpython_refuses: true,
                });
            }
            b'\n' | b'\r' => {
                self.i += 1;
                if b == b'\r' && self.peek(0) == Some(b'\n') {
                    self.i += 1;
                }
                if self.brackets == 0 && self.frames.is_empty() {
                    self.line_start = true;
                }
            }
            b'(' | b'[' | b'{' => {
                self.brackets += 1;
                if self.brackets > MAX_BRACKETS {
                    return Err(Violation {
                        at: self.i,
                        what: "too many nested parentheses",
                        cpython_refuses: true,
                    });
                }
                self.i += 1;
            }
            b'}' if field.is_some_and(|d| self.brackets == d + 1) => {
                self.brackets -= 1;
                self.frames.pop();
                self.i += 1;
            }
            b':' if field.is_some_and(|d| self.brackets == d + 1) => {
                if let Some(Frame::Field { .. }) = self.frames.pop() {
                    self.frames.push(Frame::Spec);
                }
                self.i += 1;
            }
            b')' | b']' | b'}' => {
                self.brackets = self.brackets.saturating_sub(1);
                self.i += 1;
            }
            b'"' | b'\'' => self.open_string(""),
            b'0'..=b'9' => self.number()?,
            b'.' if self.peek(1).is_some_and(|b| b.is_ascii_digit()) => self.number()?,
            _ if is_name_byte(b) => {
                let start = self.i;
                while self.peek(0).is_some_and(is_name_byte) {
                    self.i += 1;
                }
                let word = &self.bytes[start..self.i];
                if let Some((offset, what)) = invisible_in(word) {
                    return Err(Violation {
                        at: start + offset,
                        what,
                        cpython_refuses: true,
                    });
                }
                if matches!(self.peek(0), Some(b'"' | b'\''))
                    && word.len() <= 2
                    && word
                        .iter()
                        .all(|c| matches!(c.to_ascii_lowercase(), b'r' | b'b' | b'u' | b'f' | b't'))
                {
                    let prefix = std::str::from_utf8(word).unwrap_or("");
                    self.open_string(prefix);
                }
            }
            _ => self.i += 1,
        }
        Ok(())
    }

    fn open_string(&mut self, prefix: &str) {
        let quote = self.bytes[self.i];
        let triple = self.peek(1) == Some(quote) && self.peek(2) == Some(quote);
        self.i += if triple { 3 } else { 1 };
        let lower = prefix.to_ascii_lowercase();
        self.frames.push(Frame::Str {
            quote,
            triple,
            raw: lower.contains('r'),
            formatted: lower.contains('f') || lower.contains('t'),
        });
    }

    /// Part of a string's text (or of a format spec, `spec`) up to its end,
    /// a replacement field, or the end of the line of a one-line string.
    fn in_string(&mut self, quote: u8, triple: bool, raw: bool, formatted: bool, spec: bool) {
        while let Some(b) = self.peek(0) {
            match b {
                b'\\' => {
                    let next = self.peek(1);
                    // A backslash escapes the next character, except a brace
                    // of an f-string (`\{x}` still opens a field) and, in a
                    // raw string, anything but a quote, a backslash or a
                    // line break.
                    let alone = (formatted && matches!(next, Some(b'{' | b'}')))
                        || (raw
                            && !matches!(next, Some(b'\\') | Some(b'\n') | Some(b'\r'))
                            && next != Some(quote));
                    if alone {
                        self.i += 1;
                    } else {
                        self.i += 2;
                        if next == Some(b'\r') && self.peek(0) == Some(b'\n') {
                            self.i += 1;
                        }
                    }
                }
                b'\n' | b'\r' if !triple => {
                    // Unterminated: the parser reports it; the line ends here.
                    while self
                        .frames
                        .pop()
                        .is_some_and(|f| !matches!(f, Frame::Str { .. }))
                    {}
                    return;
                }
                _ if b == quote
                    && (!triple
                        || (self.peek(1) == Some(quote) && self.peek(2) == Some(quote))) =>
                {
                    self.i += if triple { 3 } else { 1 };
                    // A format spec cannot hold the end of its string: the
                    // string ends, and so do the field and spec it holds.
                    while self
                        .frames
                        .pop()
                        .is_some_and(|f| !matches!(f, Frame::Str { .. }))
                    {}
                    return;
                }
                b'{' if formatted => {
                    if !spec && self.peek(1) == Some(b'{') {
                        self.i += 2;
                        continue;
                    }
                    self.frames.push(Frame::Field {
                        depth: self.brackets,
                    });
                    self.brackets += 1;
                    self.i += 1;
                    return;
                }
                b'}' if formatted => {
                    if spec {
                        self.brackets = self.brackets.saturating_sub(1);
                        self.frames.pop();
                        self.i += 1;
                        return;
                    }
                    self.i += if self.peek(1) == Some(b'}') { 2 } else { 1 };
                }
                _ => self.i += 1,
            }
        }
    }

    /// A number literal, and what follows it.
    fn number(&mut self) -> Result<(), Violation> {
        let start = self.i;
        let digits_of = |kind: u8| -> fn(u8) -> bool {
            match kind {
                b'x' => |c: u8| c.is_ascii_hexdigit() || c == b'_',
                b'o' => |c: u8| matches!(c, b'0'..=b'7' | b'_'),
                b'b' => |c: u8| matches!(c, b'0' | b'1' | b'_'),
                _ => |c: u8| c.is_ascii_digit() || c == b'_',
            }
        };
        let radix = match (self.peek(0), self.peek(1).map(|c| c.to_ascii_lowercase())) {
            (Some(b'0'), Some(k @ (b'x' | b'o' | b'b'))) => {
                self.i += 2;
                k
            }
            _ => b'd',
        };
        let digit = digits_of(radix);
        while self.peek(0).is_some_and(digit) {
            self.i += 1;
        }
        let mut what = match radix {
            b'x' => "invalid hexadecimal literal",
            b'o' => "invalid octal literal",
            b'b' => "invalid binary literal",
            _ => "invalid decimal literal",
        };
        if radix == b'd' {
            if self.peek(0) == Some(b'.') {
                self.i += 1;
                while self.peek(0).is_some_and(digit) {
                    self.i += 1;
                }
            }
            if matches!(self.peek(0), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
                if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1 + sign;
                    while self.peek(0).is_some_and(digit) {
                        self.i += 1;
                    }
                }
            }
            if matches!(self.peek(0), Some(b'j' | b'J')) {
                self.i += 1;
                what = "invalid imaginary literal";
            }
        }
        let literal = &self.bytes[start..self.i];
        if literal.ends_with(b"_") {
            return Err(Violation {
                at: start,
                what,
                cpython_refuses: true,
            });
        }
        let rest = &self.bytes[self.i..self.bytes.len().min(self.i + 3)];
        if let Some((0, what)) = invisible_in(rest) {
            return Err(Violation {
                at: self.i,
                what,
                cpython_refuses: true,
            });
        }
        if self.peek(0).is_some_and(is_name_byte) {
            // `1if x else y`, `1or 2`: CPython warns and reads on.
            let rest = &self.bytes[self.i..];
            let keyword = ["and", "else", "for", "if", "in", "is", "not", "or"]
                .iter()
                .any(|k| rest.starts_with(k.as_bytes()));
            if !keyword {
                return Err(Violation {
                    at: start,
                    what,
                    cpython_refuses: true,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested_ifs(n: usize) -> String {
        let mut text: String = (0..n)
            .map(|i| format!("{}if x:\n", "    ".repeat(i)))
            .collect();
        text.push_str(&"    ".repeat(n));
        text.push_str("pass\n");
        text
    }

    fn parens(n: usize) -> String {
        format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n))
    }

    #[test]
    fn ninety_nine_levels_of_indentation_pass_and_a_hundredth_is_refused() {
        assert_eq!(check(&nested_ifs(99)), Ok(()));
        let text = nested_ifs(100);
        let err = check(&text).unwrap_err();
        assert_eq!(err.what, "too many levels of indentation");
        // The line of the 100th level, as CPython reports it.
        assert_eq!(text[..err.at].matches('\n').count() + 1, 101);
        assert!(check(&nested_ifs(550)).is_err());
    }

    #[test]
    fn two_hundred_brackets_pass_and_one_more_is_refused() {
        assert_eq!(check(&parens(200)), Ok(()));
        let err = check(&parens(201)).unwrap_err();
        assert_eq!(err.what, "too many nested parentheses");
        assert_eq!(err.at, 4 + 200);
        assert!(check(&parens(5000)).is_err());
        // Mixed kinds count together; closed ones give their level back.
        let text = format!("{}\n{}", "[(".repeat(100) + &")]".repeat(100), parens(200));
        assert_eq!(check(&text), Ok(()));
    }

    #[test]
    fn indentation_inside_brackets_strings_and_continuations_sets_no_level() {
        let deep = " ".repeat(400);
        let text = format!(
            "x = (\n{deep}1)\ns = '''\n{deep}a\n'''\ny = 1 + \\\n{deep}2\n# c\n{deep}# comment\n\n"
        );
        assert_eq!(check(&text), Ok(()));
        let many: String = (0..150)
            .map(|i| format!("{}# {i}\n", " ".repeat(i)))
            .collect();
        assert_eq!(check(&many), Ok(()));
    }

    #[test]
    fn a_number_run_into_a_name_is_refused_but_a_keyword_after_it_is_read_on() {
        let err = check("class A:\n    0def f(self): pass\n").unwrap_err();
        assert_eq!((err.at, err.what), (13, "invalid decimal literal"));
        assert_eq!(
            check("x = 0x1fand 3\n").unwrap_err().what,
            "invalid hexadecimal literal"
        );
        assert_eq!(
            check("x = 1_\n").unwrap_err().what,
            "invalid decimal literal"
        );
        assert_eq!(
            check("x = 2jx\n").unwrap_err().what,
            "invalid imaginary literal"
        );
        // `0o` starts an octal literal, whatever follows (CPython alike).
        assert_eq!(
            check("x = 0or 1\n").unwrap_err().what,
            "invalid octal literal"
        );
        for fine in [
            "x = 1if y else 2\n",
            "x = 0x1f + 0o17 + 0b1_0 + 1_000 + 1.5e-3 + .5 + 1e5j + 3J\n",
            "x = [0for _ in y]\n",
            "a0b = x1.y2\n",
            "x = 1 if 0in y else 1or 1\n",
            "x = 1.if y else 0_0\n",
            "t = x[1:2]\n",
        ] {
            assert_eq!(check(fine), Ok(()), "{fine}");
        }
    }

    #[test]
    fn strings_comments_and_fstring_fields_are_read_as_cpython_reads_them() {
        for fine in [
            "s = '0def'\n",
            "s = \"0def\" # 0def\n",
            "s = r'\\'0def'\n",
            "s = b'''\n0def\n'''\n",
            "s = f'{x!r:>{width}} 0def {{0def}}'\n",
            "s = f\"{x['0def']}\"\n",
            "s = f\"{d[\"k\"]} 0def\"\n",
            "s = f'''{\n  x\n}''' \n",
            "s = rf'\\{x}0def'\n",
            "s = f'{x:{\"0def\"}}'\n",
            "s = 'unterminated\nx = 1\n",
        ] {
            assert_eq!(check(fine), Ok(()), "{fine}");
        }
        // Code in a replacement field is code.
        assert!(check("s = f'{0def}'\n").is_err());
        assert!(
            check(&format!(
                "s = f'{{{}1{}}}'\n",
                "(".repeat(201),
                ")".repeat(201)
            ))
            .is_err()
        );
    }

    #[test]
    fn tabs_and_form_feeds_count_columns_as_cpython_does() {
        let text: String = (0..99)
            .map(|i| format!("{}if x:\n", "\t".repeat(i)))
            .collect();
        assert_eq!(check(&format!("{text}{}pass\n", "\t".repeat(99))), Ok(()));
        assert!(
            check(&format!(
                "{text}{}if x:\n{}pass\n",
                "\t".repeat(99),
                "\t".repeat(100)
            ))
            .is_err()
        );
        assert_eq!(check("if x:\n\x0c    pass\n"), Ok(()));
    }

    #[test]
    fn tabs_and_spaces_that_cpython_refuses_are_its_tab_error() {
        // A tab after a space is column 8 to CPython but column 2 with a tab
        // as one column; eight spaces are 8 and 8: the two disagree.
        let err = check("if x:\n \tif y:\n        pass\n").unwrap_err();
        assert_eq!(
            err.what,
            "inconsistent use of tabs and spaces in indentation"
        );
        assert_eq!(err.at, 14);
        // A dedent to a column no open level has.
        let err = check("if x:\n        a\n    b\n").unwrap_err();
        assert_eq!(
            err.what,
            "unindent does not match any outer indentation level"
        );
        // Tabs alone, spaces alone, and a tab-then-spaces pattern repeated
        // consistently are fine.
        assert_eq!(check("if x:\n\tif y:\n\t\tpass\n\tb\n"), Ok(()));
        assert_eq!(check("if x:\n\t  a\n\t  b\n"), Ok(()));
    }

    #[test]
    fn what_cpython_refuses_between_tokens_and_at_the_end_is_refused() {
        for (text, what, at) in [
            ("x = 1 \\\n", "unexpected EOF while parsing", 6),
            (
                "if x:\n    y = 1 \\\r\n",
                "unexpected EOF while parsing",
                16,
            ),
            ("x = 1 \\", "unexpected EOF while parsing", 6),
            (
                "x = 1\x0b+ 2\n",
                "invalid non-printable character U+000B",
                5,
            ),
            (
                "x = 1\u{200b}+ 2\n",
                "invalid non-printable character U+200B",
                5,
            ),
            (
                "x\u{2060} = 1\n",
                "invalid non-printable character U+2060",
                1,
            ),
            (
                "x = 1 \u{feff}\n",
                "invalid non-printable character U+FEFF",
                6,
            ),
        ] {
            let err = check(text).unwrap_err();
            assert_eq!((err.what, err.at), (what, at), "{text:?}");
        }
        // CPython takes these: a continuation into a blank line or a
        // comment, the characters inside strings and comments, a name
        // with other non-ASCII letters.
        for text in [
            "x = 1 \\\n\n",
            "x = 1 \\\n# c\n",
            "# a\x0b\u{200b}\n",
            "s = '\x0b\u{200b}\u{2060}'\n",
            "caf\u{e9} = 1\n",
        ] {
            assert_eq!(check(text), Ok(()), "{text:?}");
        }
    }

    #[test]
    fn indentation_tree_sitter_reads_differently_is_refused() {
        // 65,536 columns: CPython opens a level, tree-sitter's scanner keeps
        // it as 0, so the next line's dedent is no dedent to it.
        let deep = " ".repeat(65_536);
        let text = format!("if x:\n{deep}a\n{deep}b\nc\n");
        let err = check(&text).unwrap_err();
        assert!(
            err.what.starts_with("indentation tree-sitter would read"),
            "{err:?}"
        );
        // Just below the limit both agree.
        let wide = " ".repeat(65_535);
        assert_eq!(check(&format!("if x:\n{wide}a\n{wide}b\nc\n")), Ok(()));
        // A space then a tab: column 8 to CPython, 9 to the scanner; nine
        // spaces below it open a block to CPython (9 > 8; 9 > 2 with a tab
        // as one column, so no TabError) and none to the scanner (9 > 9).
        let text = "if x:\n \tif x:\n         pass\n";
        let err = check(text).unwrap_err();
        assert!(
            err.what.starts_with("indentation tree-sitter would read"),
            "{err:?}"
        );
        assert_eq!(err.at, 14);
        // Written with spaces alone, the same program passes.
        let text = "if x:\n        if x:\n         pass\n";
        assert_eq!(check(text), Ok(()));
    }
}
