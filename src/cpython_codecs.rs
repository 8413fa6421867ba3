//! CPython's codecs where they are stricter than the WHATWG tables hookfence
//! decodes with (encoding_rs): which cookie names CPython knows at all, and
//! which byte sequences its codec for one decodes. A file CPython cannot
//! decode is its syntax error, never rewritten (cp1252 0x81, gbk 0x80,
//! euc-jp 0xADA1 and big5 0xF9FE decode under WHATWG's tables, not
//! CPython's). The tables are generated from CPython by
//! `src/cpython_codecs/generate.py`.

use std::collections::HashMap;
use std::sync::LazyLock;

/// WHATWG labels as CPython normalises a cookie, with the codec CPython
/// names for each (`-`: none).
static LABELS: LazyLock<HashMap<&'static str, &'static str>> = LazyLock::new(|| {
    include_str!("cpython_codecs/labels.txt")
        .lines()
        .filter_map(|line| line.split_once(' '))
        .collect()
});

/// A cookie's name as CPython's codec lookup normalises it: lowercase, each
/// run of characters other than letters, digits and `.` one `_`.
fn normal(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut gap = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    out
}

/// What CPython makes of a cookie's encoding name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cookie {
    /// CPython knows no such encoding.
    Unknown,
    /// CPython's codec of that name, whose tables hookfence has.
    Checked(&'static str),
    /// No tables here: the WHATWG decoding stands.
    Unchecked,
}

/// What CPython makes of a cookie naming `name`, where the WHATWG registry
/// knows it.
pub fn codec_for(name: &str) -> Cookie {
    match LABELS.get(normal(name).as_str()) {
        Some(&"-") => Cookie::Unknown,
        Some(&codec) if tables(codec).is_some() => Cookie::Checked(codec),
        // A codec without tables, or a spelling not in the list.
        _ => Cookie::Unchecked,
    }
}

fn tables(codec: &str) -> Option<&'static [u8]> {
    macro_rules! table {
        ($($name:literal),* $(,)?) => {
            match codec {
                $($name => Some(include_bytes!(concat!("cpython_codecs/", $name, ".bin")).as_slice()),)*
                _ => None,
            }
        };
    }
    table!(
        "big5",
        "big5hkscs",
        "cp1250",
        "cp1251",
        "cp1252",
        "cp1253",
        "cp1254",
        "cp1255",
        "cp1256",
        "cp1257",
        "cp1258",
        "cp866",
        "cp932",
        "euc_jp",
        "euc_kr",
        "gb2312",
        "gbk",
        "iso8859-1",
        "iso8859-10",
        "iso8859-11",
        "iso8859-13",
        "iso8859-14",
        "iso8859-15",
        "iso8859-16",
        "iso8859-2",
        "iso8859-3",
        "iso8859-4",
        "iso8859-5",
        "iso8859-6",
        "iso8859-7",
        "iso8859-8",
        "iso8859-9",
        "koi8-r",
        "koi8-u",
        "mac-roman",
        "shift_jis",
        "tis-620",
    )
}

fn bit(table: &[u8], index: usize) -> bool {
    table
        .get(index / 8)
        .is_some_and(|byte| byte & (1 << (index % 8)) != 0)
}

/// The offset of the first byte sequence of `body` that `codec` (a name
/// [`codec_for`] gave) does not decode, if any.
pub fn first_undecodable(codec: &str, body: &[u8]) -> Option<usize> {
    let table = tables(codec)?;
    let (single, pairs, triples) = (
        &table[..16],
        table.get(16..16 + 4096),
        table.get(16 + 4096..),
    );
    let mut i = 0;
    while i < body.len() {
        let b = body[i];
        if b < 0x80 {
            i += 1;
            continue;
        }
        if bit(single, usize::from(b - 0x80)) {
            i += 1;
            continue;
        }
        let Some(pairs) = pairs else {
            return Some(i);
        };
        if b == 0x8F
            && let Some(triples) = triples
            && let (Some(&b2), Some(&b3)) = (body.get(i + 1), body.get(i + 2))
            && bit(triples, usize::from(b2) * 256 + usize::from(b3))
        {
            i += 3;
            continue;
        }
        match body.get(i + 1) {
            Some(&trail) if bit(pairs, usize::from(b - 0x80) * 256 + usize::from(trail)) => i += 2,
            _ => return Some(i),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cpython_refuses_and_whatwg_takes_is_found() {
        for (codec, body, at) in [
            ("cp1252", &b"s = '\x80\x81'\n"[..], Some(6)),
            ("cp1252", b"s = '\x80\xe9'\n", None),
            ("gbk", b"s = '\xc4\xe3\x80'\n", Some(7)),
            ("gbk", b"s = '\x81\x30\x81\x30'\n", Some(5)),
            ("gbk", b"s = '\xc4\xe3\xba\xc3'\n", None),
            ("euc_jp", b"s = '\xad\xa1'\n", Some(5)),
            ("euc_jp", b"s = '\xa4\xa2\x8e\xb1\x8f\xa2\xaf'\n", None),
            ("big5", b"s = '\xf9\xfe'\n", Some(5)),
            ("big5", b"s = '\xa1\x40'\n", None),
            ("shift_jis", b"s = '\x82\xa0\xb1'\n", None),
            ("shift_jis", b"s = '\x80'\n", Some(5)),
            ("euc_kr", b"s = '\x81\x41'\n", Some(5)),
        ] {
            assert_eq!(first_undecodable(codec, body), at, "{codec} {body:?}");
            // The oracle: CPython's own verdict, recorded by hand.
        }
    }

    #[test]
    fn cookie_names_cpython_does_not_know_are_refused() {
        assert_eq!(codec_for("x-cp1252"), Cookie::Unknown);
        assert_eq!(codec_for("windows-31j"), Cookie::Unknown);
        assert_eq!(codec_for("cp1252"), Cookie::Checked("cp1252"));
        assert_eq!(codec_for("Windows_1252"), Cookie::Checked("cp1252"));
        assert_eq!(codec_for("euc-jp"), Cookie::Checked("euc_jp"));
        assert_eq!(codec_for("gb18030"), Cookie::Unchecked);
    }
}
