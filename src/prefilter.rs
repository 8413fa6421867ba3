//! A sound byte prefilter: parse only files that can hold a hook candidate or
//! a class on the way to a hook protocol base.
//!
//! Every hook candidate is found through a name that must appear literally
//! in the file (`pre_forward`, `register_forward_hook`, ...): those names are
//! read from the `#any-of?` predicates of the queries that find candidates,
//! so the two cannot drift apart. Class hierarchies that cross files are
//! followed to a fixpoint: a class can only derive from `X` if the bytes `X`
//! appear in its file, so the files naming a protocol base are parsed first,
//! then the files naming any class found to derive from one, and so on until
//! no new class name turns up. Everything else cannot change the result and
//! is never parsed.

use std::collections::BTreeSet;

use aho_corasick::AhoCorasick;

use crate::matcher::ClassFact;

/// The literal every `# hookfence: ignore` comment holds (see
/// `queries/suppressions.scm`): files with one are parsed so that a
/// suppression matching nothing is reported.
pub const SUPPRESSION_MARK: &str = "hookfence:";

/// Names whose presence makes a file worth parsing.
pub struct Needles {
    automaton: Option<AhoCorasick>,
    /// The SIMD ("Teddy") searcher for the same patterns, where the CPU has it.
    packed: Option<aho_corasick::packed::Searcher>,
    /// Patterns from this index on are the `fullgraph` keyword, not names.
    names: usize,
}

/// What one pass over a file's text found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// A needle name: the file must be parsed.
    pub needed: bool,
    /// A `fullgraph=` keyword argument may be there (see [`fullgraph_at`]).
    pub fullgraph: bool,
}

impl Needles {
    /// Needles for `names`, plus (in the same automaton, so one pass over
    /// the text answers both) the `fullgraph` keyword.
    pub fn new<I, S>(names: I) -> Needles
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut patterns: Vec<Vec<u8>> = names.into_iter().map(|n| n.as_ref().to_vec()).collect();
        let names = patterns.len();
        patterns.push(fullgraph_keyword().as_bytes().to_vec());
        let automaton = (names > 0).then(|| {
            // Leftmost-first lets aho-corasick use its SIMD "Teddy" searcher;
            // which needle wins an overlap does not matter here.
            AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(&patterns)
                .expect("plain literal needles always build")
        });
        let packed = (names > 0)
            .then(|| {
                let mut builder = aho_corasick::packed::Config::new()
                    .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                    .builder();
                builder.extend(&patterns);
                builder.build()
            })
            .flatten();
        Needles {
            automaton,
            packed,
            names,
        }
    }

    /// One pass over `text`: stops at the first needle name.
    pub fn scan(&self, text: &str) -> Scan {
        let mut scan = Scan {
            needed: false,
            fullgraph: false,
        };
        let Some(automaton) = &self.automaton else {
            return scan;
        };
        let found: Box<dyn Iterator<Item = aho_corasick::Match>> = match &self.packed {
            Some(packed) => Box::new(packed.find_iter(text.as_bytes())),
            None => Box::new(automaton.find_iter(text.as_bytes())),
        };
        for found in found {
            if found.pattern().as_usize() < self.names {
                scan.needed = true;
                return scan;
            }
            if !scan.fullgraph && fullgraph_at(text, found.start()) {
                scan.fullgraph = true;
            }
        }
        scan
    }
}

fn fullgraph_keyword() -> &'static str {
    static KEYWORD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::vocabulary::predicate_strings(crate::queries::FULLGRAPH_SCM)
            .into_iter()
            .next()
            .unwrap_or_else(|| "fullgraph".to_owned())
    });
    KEYWORD.as_str()
}

/// Whether the `fullgraph` keyword at `at` reads as a keyword argument: a
/// whole word, then `=` (not `==`). Names that merely end in it, like
/// transformers' `_can_compile_fullgraph`, do not count.
fn fullgraph_at(text: &str, at: usize) -> bool {
    let keyword = fullgraph_keyword();
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric();
    let before_ok = at == 0 || !is_word(bytes[at - 1]);
    let rest = text[at + keyword.len()..].trim_start_matches([' ', '\t', '\\', '\r', '\n']);
    before_ok && rest.starts_with('=') && !rest.starts_with("==")
}

/// Every word in the base lists of `text`'s class statements, read without
/// parsing, or `None` when some class statement cannot be bounded this way.
///
/// Sound for the prefilter's rounds: a class deriving from `X` names `X` (or
/// `pkg.X`) in its base list, so its file holds the word `X` here. Anything
/// this reading cannot vouch for — a comment, string or backslash inside a
/// base list, type parameters (`class A[T](B)`), an unbalanced or very long
/// list, a name not on the `class` line — gives `None`, and the file is read
/// again and searched in full in later rounds. Text that only looks like a
/// class statement (inside a string) adds words, which costs a parse at most.
pub fn class_base_words(text: &str) -> Option<Vec<String>> {
    const LONGEST_BASE_LIST: usize = 4096;
    let bytes = text.as_bytes();
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
        // A class statement starts its line (after indentation).
        let line = &bytes[text[..at].rfind('\n').map_or(0, |p| p + 1)..at];
        if !line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\x0c')) {
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
            return None;
        }
        while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\x0c')) {
            i += 1;
        }
        match bytes.get(i) {
            Some(b':') => continue,
            Some(b'(') => {}
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

/// The protocol bases and every class name that derives from one through
/// `classes` (by last dotted segment, as the class index resolves them).
pub fn hook_class_names<'a>(
    classes: impl Iterator<Item = &'a ClassFact> + Clone,
    protocol_bases: &[String],
) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = protocol_bases.iter().cloned().collect();
    loop {
        let before = names.len();
        for class in classes.clone() {
            if !names.contains(&class.name)
                && class
                    .bases
                    .iter()
                    .any(|b| names.contains(b.rsplit('.').next().unwrap_or(b)))
            {
                names.insert(class.name.clone());
            }
        }
        if names.len() == before {
            return names;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names_come_from_the_queries() {
        let names = crate::vocabulary::Vocabulary::default().candidate_names;
        for expected in [
            "pre_forward",
            "post_forward",
            "register_forward_pre_hook",
            "register_forward_hook",
            "register_module_forward_pre_hook",
            "register_module_forward_hook",
            "ModelHook",
        ] {
            assert!(
                names.contains(expected),
                "{expected} missing from {names:?}"
            );
        }
    }

    #[test]
    fn hook_class_names_reach_a_fixpoint() {
        let class = |name: &str, bases: &[&str]| ClassFact {
            name: name.into(),
            bases: bases.iter().map(|b| b.to_string()).collect(),
        };
        let classes = [
            class("C", &["B"]),
            class("B", &["hooks.A"]),
            class("A", &["accelerate.hooks.ModelHook"]),
            class("Other", &["object"]),
        ];
        let names = hook_class_names(classes.iter(), &["ModelHook".to_owned()]);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["A", "B", "C", "ModelHook"]
        );
    }

    #[test]
    fn fullgraph_mentions_are_whole_keyword_arguments() {
        let mentions = |text: &str| Needles::new(["pre_forward"]).scan(text).fullgraph;
        assert!(mentions("torch.compile(m, fullgraph=True)"));
        assert!(mentions("compile(m,\n    fullgraph = True)"));
        assert!(!mentions("_can_compile_fullgraph = True"));
        assert!(!mentions("if fullgraph == True:"));
        assert!(!mentions("no mention here"));
    }

    #[test]
    fn one_scan_answers_names_and_fullgraph() {
        let needles = Needles::new(["pre_forward"]);
        let scan = needles.scan("m = torch.compile(m, fullgraph=True)\n");
        assert_eq!(
            scan,
            Scan {
                needed: false,
                fullgraph: true
            }
        );
        let scan = needles.scan("_can_compile_fullgraph = True\ndef pre_forward(): pass\n");
        assert_eq!(
            scan,
            Scan {
                needed: true,
                fullgraph: false
            }
        );
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
        // Not class statements.
        assert_eq!(
            words("x = 1  # class A(B)\nprint('class', 1)\n"),
            Some(String::new())
        );
    }

    #[test]
    fn needles_match_substrings() {
        let needles = Needles::new(["pre_forward"]);
        assert!(needles.scan("def pre_forward(self): pass").needed);
        assert!(!needles.scan("def forward(self): pass").needed);
        assert!(!Needles::new(Vec::<String>::new()).scan("anything").needed);
    }
}
