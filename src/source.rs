//! A Python source file as bytes on disk and as text to parse.
//!
//! Policy (PEP 263 / PEP 3120): a UTF-8 BOM is kept aside and restored on
//! output; a `coding:` cookie in the first two lines names the encoding,
//! otherwise the file must be valid UTF-8. Text in another encoding is decoded
//! for parsing and encoded back on output, and only if decoding then encoding
//! gives back the very same bytes: a file that would not round-trip is
//! reported and never rewritten. Everything hookfence inserts is ASCII, so an
//! edited file always encodes.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::bytes::Regex;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// The encoding a file is stored in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    /// Python's `latin-1` / `iso-8859-1`: every byte is the code point of the same value.
    Latin1,
    /// Any other encoding known to the WHATWG registry, checked to
    /// round-trip, with the CPython codec whose stricter tables the bytes
    /// are checked against first, where hookfence has them.
    Other(&'static encoding_rs::Encoding, Option<&'static str>),
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Latin1 => "latin-1",
            Encoding::Other(enc, _) => enc.name(),
        }
    }

    /// Encodes text that came from a file of this encoding, plus ASCII insertions.
    pub fn encode(self, text: &str) -> Cow<'_, [u8]> {
        match self {
            Encoding::Utf8 => Cow::Borrowed(text.as_bytes()),
            // Decoded from latin-1 plus ASCII: every char is below U+0100.
            Encoding::Latin1 => Cow::Owned(text.chars().map(|c| c as u32 as u8).collect()),
            Encoding::Other(enc, _) => match enc.encode(text) {
                (Cow::Borrowed(b), _, _) => Cow::Owned(b.to_vec()),
                (Cow::Owned(b), _, _) => Cow::Owned(b),
            },
        }
    }
}

/// Why bytes could not be turned into text. Positions are 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    InvalidUtf8 {
        line: usize,
        column: usize,
    },
    UnknownEncoding {
        line: usize,
        name: String,
    },
    NotRoundTrip {
        encoding: &'static str,
    },
    /// A byte sequence CPython's codec does not decode (WHATWG's may).
    Undecodable {
        line: usize,
        column: usize,
        codec: &'static str,
        byte: u8,
    },
    NulByte {
        line: usize,
        column: usize,
    },
}

/// A decoded source file.
#[derive(Debug, Clone)]
pub struct Source {
    /// The bytes as read.
    pub raw: Vec<u8>,
    pub bom: bool,
    pub encoding: Encoding,
    /// The text to parse: decoded, without the BOM.
    pub text: String,
}

/// One mebibyte, the unit the read limits are given in.
pub const MIB: u64 = 1 << 20;

/// The most bytes hookfence reads from one Python source, a file or stdin:
/// far beyond any real module (the largest generated ones run to tens of
/// MiB), and small enough that `hookfence - < /dev/zero` stops at once.
pub const MAX_SOURCE_BYTES: u64 = 256 * MIB;

/// The error for an input of more than `limit` bytes; `what` names the kind
/// of input ("a Python source").
pub fn too_large(limit: u64, what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!(
            "more than {} MiB, the most hookfence reads from {what}",
            limit / MIB
        ),
    )
}

/// Reads all of `reader`, or fails with [`too_large`] as soon as it has
/// given more than `limit` bytes: an endless input (`/dev/zero`, a pipe
/// that never closes its write end while writing) costs `limit` bytes of
/// memory, not all of it.
pub fn read_limited(
    reader: impl std::io::Read,
    limit: u64,
    what: &str,
) -> std::io::Result<Vec<u8>> {
    read_limited_into(reader, limit, what, Vec::new())
}

/// [`read_limited`] on a file, its buffer sized from the file's length
/// where it has one.
pub fn read_file_limited(
    path: &std::path::Path,
    limit: u64,
    what: &str,
) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let hint = file.metadata().map_or(0, |m| m.len()).min(limit);
    let buffer = Vec::with_capacity(usize::try_from(hint).unwrap_or(0).saturating_add(1));
    read_limited_into(file, limit, what, buffer)
}

fn read_limited_into(
    reader: impl std::io::Read,
    limit: u64,
    what: &str,
    mut buffer: Vec<u8>,
) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    reader
        .take(limit.saturating_add(1))
        .read_to_end(&mut buffer)?;
    if buffer.len() as u64 > limit {
        return Err(too_large(limit, what));
    }
    Ok(buffer)
}

static COOKIE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t\x0C]*#.*?coding[:=][ \t]*([-\w.]+)").expect("cookie regex is valid")
});

/// A file's bytes read as text, borrowing them where they are UTF-8: what
/// the prefilter reads, with no copy of files it then drops.
#[derive(Debug)]
pub struct View<'a> {
    pub bom: bool,
    pub encoding: Encoding,
    /// The text to parse: decoded, without the BOM.
    pub text: Cow<'a, str>,
}

impl Source {
    /// Reads bytes as text under the policy above (every check of
    /// [`Source::decode`], without taking a copy).
    pub fn view(raw: &[u8]) -> Result<View<'_>, DecodeError> {
        let bom = raw.starts_with(UTF8_BOM);
        let body = if bom { &raw[UTF8_BOM.len()..] } else { raw };
        let encoding = if bom {
            Encoding::Utf8
        } else {
            detect_cookie(body)?
        };
        let text: Cow<'_, str> = match encoding {
            Encoding::Utf8 => match std::str::from_utf8(body) {
                Ok(text) => Cow::Borrowed(text),
                Err(err) => {
                    let (line, column) = byte_position(body, err.valid_up_to());
                    return Err(DecodeError::InvalidUtf8 { line, column });
                }
            },
            Encoding::Latin1 => Cow::Owned(body.iter().map(|&b| b as char).collect()),
            Encoding::Other(enc, codec) => {
                if let Some(codec) = codec
                    && let Some(at) = crate::cpython_codecs::first_undecodable(codec, body)
                {
                    let (line, column) = byte_position(body, at);
                    return Err(DecodeError::Undecodable {
                        line,
                        column,
                        codec,
                        byte: body[at],
                    });
                }
                let (text, _, had_errors) = enc.decode(body);
                let text = text.into_owned();
                if had_errors || *encoding.encode(&text) != *body {
                    return Err(DecodeError::NotRoundTrip {
                        encoding: enc.name(),
                    });
                }
                Cow::Owned(text)
            }
        };
        if let Some(at) = memchr::memchr(0, text.as_bytes()) {
            let (line, column) = text_position(&text, at);
            return Err(DecodeError::NulByte { line, column });
        }
        Ok(View {
            bom,
            encoding,
            text,
        })
    }

    pub fn decode(raw: Vec<u8>) -> Result<Source, DecodeError> {
        let View {
            bom,
            encoding,
            text,
        } = Source::view(&raw)?;
        let text = text.into_owned();
        Ok(Source {
            raw,
            bom,
            encoding,
            text,
        })
    }

    /// The file `view` reads `raw` as, owning its bytes and text.
    pub fn from_view(raw: &[u8], view: View<'_>) -> Source {
        Source {
            raw: raw.to_vec(),
            bom: view.bom,
            encoding: view.encoding,
            text: view.text.into_owned(),
        }
    }

    /// The bytes to write for `text` (which must come from this file's text
    /// with ASCII edits).
    pub fn encode(&self, text: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len() + 3);
        if self.bom {
            out.extend_from_slice(UTF8_BOM);
        }
        out.extend_from_slice(&self.encoding.encode(text));
        out
    }

    /// The offset in the file's bytes of an offset into `text` (they differ
    /// by the BOM, and for encodings other than UTF-8).
    pub fn file_offset(&self, offset: usize) -> usize {
        let bom = if self.bom { UTF8_BOM.len() } else { 0 };
        match self.encoding {
            Encoding::Utf8 => bom + offset,
            _ => bom + self.encoding.encode(&self.text[..offset]).len(),
        }
    }

    /// 1-based line and character column of a byte offset into `text`.
    pub fn position(&self, offset: usize) -> (usize, usize) {
        text_position(&self.text, offset)
    }
}

fn detect_cookie(body: &[u8]) -> Result<Encoding, DecodeError> {
    // PEP 263: the cookie counts on line 1, or on line 2 if line 1 is a comment
    // or blank.
    for (index, line) in body.split(|&b| b == b'\n').take(2).enumerate() {
        if let Some(caps) = COOKIE.captures(line) {
            let name = String::from_utf8_lossy(&caps[1]).into_owned();
            return encoding_for_label(&name).ok_or(DecodeError::UnknownEncoding {
                line: index + 1,
                name,
            });
        }
        let trimmed = line.trim_ascii_start();
        if !(trimmed.is_empty() || trimmed.starts_with(b"#")) {
            break;
        }
    }
    Ok(Encoding::Utf8)
}

/// Python's own normalisation of cookie names (`Parser/tokenizer.c`), then the
/// WHATWG registry for everything else.
fn encoding_for_label(name: &str) -> Option<Encoding> {
    let normal = name.to_ascii_lowercase().replace('_', "-");
    let is = |base: &str| normal == base || normal.starts_with(&format!("{base}-"));
    if is("utf-8") || normal == "utf8" {
        return Some(Encoding::Utf8);
    }
    if is("latin-1") || is("iso-8859-1") || is("iso-latin-1") || normal == "latin1" {
        return Some(Encoding::Latin1);
    }
    if normal == "ascii" || normal == "us-ascii" {
        // ASCII is a subset of UTF-8; non-ASCII bytes are an error either way.
        return Some(Encoding::Utf8);
    }
    let enc = encoding_rs::Encoding::for_label(normal.as_bytes())?;
    if enc == encoding_rs::UTF_8 {
        Some(Encoding::Utf8)
    } else {
        // A WHATWG label CPython knows no codec for is CPython's error.
        use crate::cpython_codecs::{Cookie, codec_for};
        let codec = match codec_for(name) {
            Cookie::Unknown => return None,
            Cookie::Checked(codec) => Some(codec),
            Cookie::Unchecked => None,
        };
        Some(Encoding::Other(enc, codec))
    }
}

fn byte_position(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}

/// 1-based line and character column of a byte offset into a string.
pub fn text_position(text: &str, offset: usize) -> (usize, usize) {
    let offset = floor_char_boundary(text, offset);
    let before = &text[..offset];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// The byte offset where the line holding `offset` starts.
pub fn line_start(text: &str, offset: usize) -> usize {
    text[..offset].rfind('\n').map_or(0, |p| p + 1)
}

/// The byte offset just past the line holding `offset` (after its newline), or
/// the end of the text.
pub fn next_line_start(text: &str, offset: usize) -> usize {
    text[offset..]
        .find('\n')
        .map_or(text.len(), |p| offset + p + 1)
}

/// The line ending to use for a line inserted before the line starting at
/// `at`: that line's own ending, else the previous line's, else the file's first.
pub fn line_ending_at(text: &str, at: usize) -> &'static str {
    let ending_of = |newline: usize| {
        if newline > 0 && text.as_bytes()[newline - 1] == b'\r' {
            "\r\n"
        } else {
            "\n"
        }
    };
    if let Some(p) = text[at..].find('\n') {
        return ending_of(at + p);
    }
    if at > 0 && text.as_bytes()[at - 1] == b'\n' {
        return ending_of(at - 1);
    }
    text.find('\n').map_or("\n", ending_of)
}

/// The leading whitespace of the line that starts at `line_start`.
pub fn indentation_at(text: &str, line_start: usize) -> &str {
    let rest = &text[line_start..];
    let width = rest
        .bytes()
        .take_while(|&b| b == b' ' || b == b'\t' || b == b'\x0C')
        .count();
    &rest[..width]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_bom_is_kept_aside_and_restored() {
        let src = Source::decode(b"\xEF\xBB\xBFx = 1\n".to_vec()).unwrap();
        assert!(src.bom);
        assert_eq!(src.text, "x = 1\n");
        assert_eq!(src.encode("y = 2\n"), b"\xEF\xBB\xBFy = 2\n");
    }

    #[test]
    fn latin1_cookie_round_trips() {
        let raw = b"# -*- coding: latin-1 -*-\ns = '\xE9'\n".to_vec();
        let src = Source::decode(raw.clone()).unwrap();
        assert_eq!(src.encoding, Encoding::Latin1);
        assert!(src.text.contains('\u{e9}'));
        assert_eq!(src.encode(&src.text), raw);
    }

    #[test]
    fn cookie_on_second_line_only_after_comment() {
        let raw = b"#!/usr/bin/env python\n# coding: latin-1\ns = '\xE9'\n".to_vec();
        assert_eq!(Source::decode(raw).unwrap().encoding, Encoding::Latin1);
        let raw = b"x = 1\n# coding: latin-1\ns = '\xE9'\n".to_vec();
        assert!(matches!(
            Source::decode(raw),
            Err(DecodeError::InvalidUtf8 { line: 3, column: 6 })
        ));
    }

    #[test]
    fn other_encodings_go_through_encoding_rs() {
        let raw = b"# coding: cp1252\ns = '\x80'\n".to_vec();
        let src = Source::decode(raw.clone()).unwrap();
        assert!(src.text.contains('\u{20ac}'));
        assert_eq!(src.encode(&src.text), raw);
    }

    #[test]
    fn unknown_cookie_and_nul_are_errors() {
        assert!(matches!(
            Source::decode(b"# coding: klingon\n".to_vec()),
            Err(DecodeError::UnknownEncoding { line: 1, .. })
        ));
        assert!(matches!(
            Source::decode(b"x = 1\ny\0 = 2\n".to_vec()),
            Err(DecodeError::NulByte { line: 2, column: 2 })
        ));
    }

    #[test]
    fn reads_stop_one_byte_past_the_limit() {
        let read = |n: usize| read_limited(&vec![b'x'; n][..], 4, "a test input");
        assert_eq!(read(4).unwrap(), b"xxxx");
        let err = read(5).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
        // An endless reader stops too.
        let err = read_limited(std::io::repeat(0), MIB, "a test input").unwrap_err();
        assert_eq!(
            err.to_string(),
            "more than 1 MiB, the most hookfence reads from a test input"
        );
    }

    #[test]
    fn line_helpers_follow_the_file() {
        let text = "a\r\n  b\nc";
        assert_eq!(line_ending_at(text, 0), "\r\n");
        assert_eq!(line_ending_at(text, 3), "\n");
        assert_eq!(line_ending_at(text, 7), "\n");
        assert_eq!(indentation_at(text, 3), "  ");
        assert_eq!(line_start(text, 5), 3);
        assert_eq!(next_line_start(text, 3), 7);
        assert_eq!(text_position(text, 5), (2, 3));
    }
}
