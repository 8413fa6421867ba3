//! What the prefilter keeps of a file it leaves unparsed, so that a later
//! round reads it again only when it must: the words of its class
//! statements' base lists (a class on the way to a hook base), and the
//! names it defines with `def` (a hook found by use).

use crate::analysis::prefilter::{Context, Needle, is_ascii_word, is_gap};

/// Every word in the base lists of `text`'s class statements, read without
/// parsing, or `None` when some class statement cannot be bounded this way.
///
/// Sound for the prefilter's rounds: a class deriving from `X` names `X` (or
/// `pkg.X`) in its base list, so its file holds the word `X` here. Anything
/// this reading cannot vouch for — a comment, string or backslash inside a
/// base list, type parameters (`class A[T](B)`), an unbalanced or very long
/// list, a name not on the `class` line — gives `None`, and the file is read
/// again and searched in full in later rounds. Text that only looks like a
/// class statement (inside a string) adds words, which costs a parse at most;
/// text that cannot be one in valid Python (`class` then two words) is
/// skipped. (A file that is not valid Python adds no class when parsed.)
pub fn class_base_words(text: &str) -> Option<Vec<String>> {
    const LONGEST_BASE_LIST: usize = 4096;
    let bytes = text.as_bytes();
    // Tree-sitter also skips a vertical tab and the zero-width characters
    // U+200B, U+2060 and U+FEFF between tokens (CPython does not): in a file
    // holding one, this reading cannot vouch for anything.
    if memchr::memchr(b'\x0b', bytes).is_some()
        || ["\u{200b}", "\u{2060}", "\u{feff}"]
            .iter()
            .any(|c| memchr::memmem::find(bytes, c.as_bytes()).is_some())
    {
        return None;
    }
    // A name spelled with compatibility characters is another name to
    // CPython (NFKC): this reading cannot vouch for it either.
    if crate::analysis::shadow::changes_under_nfkc(text) {
        return None;
    }
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let mut words = Vec::new();
    for at in memchr::memmem::find_iter(bytes, b"class") {
        let after = at + 5;
        if at > 0 && is_word(bytes[at - 1]) {
            continue;
        }
        match bytes.get(after) {
            Some(b' ' | b'\t' | b'\x0c') => {}
            Some(b'\\') => return None,
            _ => continue,
        }
        // A class statement starts its line (after indentation; a lone CR
        // ends a line too), or follows a `;` or `:` on it, which tree-sitter
        // accepts.
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n' || b == b'\r')
            .map_or(0, |p| p + 1);
        let before = bytes[line_start..at].trim_ascii_end();
        if !(before.is_empty() || before.ends_with(b";") || before.ends_with(b":")) {
            continue;
        }
        let mut i = after;
        while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\x0c')) {
            i += 1;
        }
        let name_start = i;
        while bytes.get(i).is_some_and(|&b| is_word(b)) {
            i += 1;
        }
        if i == name_start {
            // In valid Python `class` is followed by a name: this is prose
            // (a docstring's "the class (see below)"), unless it continues
            // on the next line.
            match bytes.get(i) {
                Some(b'\\') | None => return None,
                _ => continue,
            }
        }
        while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\x0c')) {
            i += 1;
        }
        match bytes.get(i) {
            Some(b':') => continue,
            Some(b'(') => {}
            // After the name only `(`, `:` or `[` can follow; another word
            // ("class implements both ...") is prose.
            Some(&b) if is_word(b) => continue,
            _ => return None,
        }
        let mut depth = 0usize;
        let mut word_start = None;
        let start = i;
        loop {
            let &b = bytes.get(i)?;
            if i - start > LONGEST_BASE_LIST {
                return None;
            }
            if is_word(b) {
                word_start.get_or_insert(i);
            } else {
                if let Some(ws) = word_start.take() {
                    words.push(text[ws..i].to_owned());
                }
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            break;
                        }
                    }
                    b'#' | b'"' | b'\'' | b'\\' => return None,
                    _ => {}
                }
            }
            i += 1;
        }
    }
    words.sort();
    words.dedup();
    Some(words)
}

/// The names `text` defines with `def`, as [`Context::Defined`] reads them
/// (after NFKC): a file left unparsed keeps them, so that a later round whose
/// added needles are all such names reads again only the files that define
/// one of them. Kept as sorted hashes: a collision only costs a read.
#[derive(Debug, Clone, Default)]
pub struct DefinedNames(Vec<u64>);

impl DefinedNames {
    pub fn of(text: &str) -> DefinedNames {
        let normal = crate::analysis::shadow::nfkc(text);
        let bytes = normal.as_bytes();
        let mut hashes = Vec::new();
        for at in memchr::memmem::find_iter(bytes, b"def") {
            if at > 0 && is_ascii_word(bytes[at - 1]) {
                continue;
            }
            // [`stands_in`]: gaps, then the name as a whole word.
            let mut start = at + 3;
            while start < bytes.len() && is_gap(bytes[start]) {
                start += 1;
            }
            if start == at + 3 {
                continue;
            }
            let end = start
                + bytes[start..]
                    .iter()
                    .take_while(|&&b| is_ascii_word(b))
                    .count();
            if end > start {
                hashes.push(name_hash(&bytes[start..end]));
            }
        }
        hashes.sort_unstable();
        hashes.dedup();
        DefinedNames(hashes)
    }

    /// Whether the file may hold one of `needles`: false only when every
    /// needle is an ASCII name in [`Context::Defined`] and none is defined.
    pub fn may_hold(&self, needles: &[Needle]) -> bool {
        needles.iter().any(|n| {
            n.context != Context::Defined
                || n.name.is_empty()
                || !n.name.bytes().all(is_ascii_word)
                || self.0.binary_search(&name_hash(n.name.as_bytes())).is_ok()
        })
    }
}

fn name_hash(name: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    name.hash(&mut hasher);
    hasher.finish()
}

/// Whether `text` has `keyword` and then `word`, each a whole word, with
/// only blanks and backslash continuations between (how a `def` or `class`
/// statement spells its name). The oracle [`defined_words`] is tested
/// against.
#[cfg(test)]
pub(crate) fn defines(text: &str, keyword: &str, word: &str) -> bool {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    memchr::memmem::find_iter(bytes, word.as_bytes()).any(|at| {
        let end = at + word.len();
        if bytes.get(end).is_some_and(|&b| is_word(b)) {
            return false;
        }
        let before = text[..at].trim_end_matches([' ', '\t', '\x0c', '\\', '\n', '\r']);
        before.len() < at
            && before.ends_with(keyword)
            && !before[..before.len() - keyword.len()]
                .bytes()
                .next_back()
                .is_some_and(is_word)
    })
}

/// Every name `text` spells after `keyword` as [`defines`] reads it: the
/// keyword a whole word, then blanks or backslash continuations, then the
/// name up to the first byte that is no name byte. `defines(text, keyword,
/// word)` is `defined_words(text, keyword).contains(word)` for every name
/// `word`; a file's set is made once and asked for many names.
pub(crate) fn defined_words(text: &str, keyword: &str) -> WordSet {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let is_blank = |b: u8| matches!(b, b' ' | b'\t' | b'\x0c' | b'\\' | b'\n' | b'\r');
    let mut words = WordSet::default();
    for at in memchr::memmem::find_iter(bytes, keyword.as_bytes()) {
        if at > 0 && is_word(bytes[at - 1]) {
            continue;
        }
        let mut start = at + keyword.len();
        while start < bytes.len() && is_blank(bytes[start]) {
            start += 1;
        }
        if start == at + keyword.len() {
            continue;
        }
        let end = start + bytes[start..].iter().take_while(|&&b| is_word(b)).count();
        // A name ends on a character boundary (its bytes >= 0x80 are all
        // name bytes), so the slice is whole characters.
        if end > start
            && let Some(name) = text.get(start..end)
        {
            words.push(name);
        }
    }
    words.seal();
    words
}

/// A set of names in two allocations: their text one after another, and
/// their spans there, sorted by name (a file's names are made once and
/// asked for many times; one allocation per name cost more than the
/// asking).
#[derive(Debug, Default, Clone)]
pub(crate) struct WordSet {
    text: String,
    spans: Vec<(u32, u32)>,
}

impl WordSet {
    fn push(&mut self, word: &str) {
        // A file is far below 4 GiB (see `source::MAX_SOURCE_BYTES`).
        let (Ok(start), Ok(end)) = (
            u32::try_from(self.text.len()),
            u32::try_from(self.text.len() + word.len()),
        ) else {
            return;
        };
        self.text.push_str(word);
        self.spans.push((start, end));
    }

    fn word(&self, (start, end): (u32, u32)) -> &str {
        &self.text[start as usize..end as usize]
    }

    /// Sorts the names and drops repeats, each name's text kept once and
    /// nothing left over from growing (a file's names are kept for the
    /// run).
    fn seal(&mut self) {
        let mut spans = std::mem::take(&mut self.spans);
        spans.sort_unstable_by(|&a, &b| self.word(a).cmp(self.word(b)));
        spans.dedup_by(|a, b| self.word(*a) == self.word(*b));
        // Each name's text once, in order, in a buffer of its own size.
        let mut sealed = WordSet {
            text: String::with_capacity(spans.iter().map(|&(s, e)| (e - s) as usize).sum()),
            spans: Vec::with_capacity(spans.len()),
        };
        for &span in &spans {
            sealed.push(self.word(span));
        }
        *self = sealed;
    }

    pub(crate) fn contains(&self, word: &str) -> bool {
        self.spans
            .binary_search_by(|&span| self.word(span).cmp(word))
            .is_ok()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The names, in order, each once.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.spans.iter().map(|&span| self.word(span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_word_set_keeps_each_name_once() {
        let text = "class A:\n    def forward(self):\n        pass\n".repeat(30)
            + "def zeta():\n    pass\ndef alpha():\n    pass\n";
        let words = defined_words(&text, "def");
        assert_eq!(
            words.iter().collect::<Vec<_>>(),
            ["alpha", "forward", "zeta"]
        );
        assert_eq!(words.text, "alphaforwardzeta");
        assert!(words.contains("forward") && words.contains("zeta"));
        assert!(!words.contains("A") && !words.contains("forwar"));
    }
    use crate::analysis::prefilter::Needles;

    /// The set made once answers what the scan for one name answers.
    #[test]
    fn defined_words_agree_with_defines() {
        let texts = [
            "def f(x): pass\nclass  C(B):\n    def \\\n  g(self): ...\n",
            "undef h(): pass\nxdef k(): pass\n_def m(): pass\nclassy = 1\n",
            "def\tcafé(): pass\nclass Ünïcode: pass\ndef  f2 (): pass\ndef(\n",
            "x = 'def in_string'\n# class InComment\ndef f\ndef",
        ];
        let words = [
            "f",
            "C",
            "g",
            "h",
            "k",
            "m",
            "café",
            "Ünïcode",
            "f2",
            "in_string",
            "InComment",
            "B",
            "x",
            "def",
            "class",
            "",
        ];
        for text in texts {
            for keyword in ["def", "class"] {
                let set = defined_words(text, keyword);
                for word in words.iter().filter(|w| !w.is_empty()) {
                    assert_eq!(
                        defines(text, keyword, word),
                        set.contains(word),
                        "{keyword} {word} in {text:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn class_base_words_bound_every_base_or_give_up() {
        let words = |t: &str| class_base_words(t).map(|w| w.join(" "));
        assert_eq!(
            words("class A(hooks.ModelHook, metaclass=M):\n    x = 'class B(C)'\nclass D:\n"),
            Some("M ModelHook hooks metaclass".into())
        );
        assert_eq!(
            words("class A(\n    Base[T],\n    Other,\n):\n    pass\nsubclass = 1\nclasses(x)\n"),
            Some("Base Other T".into())
        );
        // What a cheap reading cannot vouch for makes the file be read again.
        assert_eq!(words("class A(  # (comment\n    B):\n"), None);
        assert_eq!(words("class A(B, x='s'):\n"), None);
        assert_eq!(words("class A[T](B):\n"), None);
        assert_eq!(words("class \\\n    A(B):\n"), None);
        assert_eq!(words("class A(B\n"), None);
        assert_eq!(words("class A\n"), None);
        // Line breaks and separators tree-sitter accepts.
        assert_eq!(
            words("from b import B\r\rclass A(B):\r    pass\r"),
            Some("B".into())
        );
        assert_eq!(words("x = 1\rclass A(B):\n    pass\n"), Some("B".into()));
        assert_eq!(words("x = 1; class A(B): pass\n"), Some("B".into()));
        assert_eq!(words("if x: class A(B): pass\n"), Some("B".into()));
        for odd in [
            "class\x0bA(B):",
            "\u{200b}class A(B):",
            "class A(\u{feff}B):",
            "class\u{2060} A(B):",
        ] {
            assert_eq!(words(odd), None, "{odd:?}");
        }
        // Prose that cannot be a class statement is skipped.
        assert_eq!(
            words(
                "    \"\"\"\n    class implements both a save and\n    class (see below)\n\"\"\"\nclass A(B): pass\n"
            ),
            Some("B".into())
        );
        // Not class statements.
        assert_eq!(
            words("x = 1  # class A(B)\nprint('class', 1)\n"),
            Some(String::new())
        );
    }

    #[test]
    fn defined_names_hold_every_name_the_scan_finds_defined() {
        let texts = [
            "def pre_forward(self): ...\n",
            "async def pre_forward(self): ...\n",
            "class H:\n    def  post_forward (self, m): ...\n",
            "def\\\n    pre_forward(m): ...\n",
            "x = 1; def pre_forward(): pass\n",
            "def \u{ff50}re_forward(m): ...\n",
            "def\u{a0}pre_forward(m): ...\n",
            "undef pre_forward\nredefine(post_forward)\n",
            "def pre_forward_x(m): ...\n# def  post_forward in a comment\n",
            "s = 'def offload_step'\n",
        ];
        let names = [
            "pre_forward",
            "post_forward",
            "offload_step",
            "pre_forward_x",
            "other",
        ];
        for text in texts {
            let held = DefinedNames::of(text);
            for name in names {
                let scanned = Needles::new([Needle::defined(name)]).scan(text).needed;
                let kept = held.may_hold(&[Needle::defined(name)]);
                // Sound: whatever the scan would find is kept.
                assert!(!scanned || kept, "{name} in {text:?}");
                // And exact here (no hash collision among these names).
                assert_eq!(scanned, kept, "{name} in {text:?}");
            }
        }
        // A needle it cannot judge by defined names is always read for.
        let held = DefinedNames::of("x = 1\n");
        assert!(!held.may_hold(&[Needle::defined("pre_forward")]));
        assert!(held.may_hold(&[Needle::word("ModelHook")]));
        assert!(held.may_hold(&[Needle::defined("caf\u{e9}")]));
        assert!(held.may_hold(&[Needle::defined("pre_forward"), Needle::anywhere("x")]));
    }

    #[test]
    fn a_definition_is_told_from_its_text() {
        assert!(defines(
            "class A:\n    def  fetch(self): ...\n",
            "def",
            "fetch"
        ));
        assert!(defines("async def \\\n  fetch(): ...\n", "def", "fetch"));
        assert!(defines("class Hook(Base):\n", "class", "Hook"));
        assert!(!defines(
            "x = fetch()\ndef fetch_all(): ...\n",
            "def",
            "fetch"
        ));
        assert!(!defines("undef fetch\n", "def", "fetch"));
        assert!(!defines("def_fetch = 1\n", "def", "fetch"));
        assert!(!defines("deffetch = 1\n", "def", "fetch"));
        assert!(!defines("obj.fetch(x)\n", "def", "fetch"));
    }
}
