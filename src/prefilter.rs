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
}

impl Needles {
    pub fn new<I, S>(names: I) -> Needles
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let names: Vec<S> = names.into_iter().collect();
        let automaton = if names.is_empty() {
            None
        } else {
            Some(AhoCorasick::new(&names).expect("plain literal needles always build"))
        };
        Needles { automaton }
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.automaton
            .as_ref()
            .is_some_and(|a| a.is_match(text.as_bytes()))
    }
}

/// Whether `text` may pass a `fullgraph=` keyword argument: the keyword
/// name from `queries/fullgraph.scm` as a whole word, then `=` (not `==`).
/// Names that merely end in it, like transformers' `_can_compile_fullgraph`,
/// do not count.
pub fn mentions_fullgraph(text: &str) -> bool {
    static KEYWORD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::vocabulary::predicate_strings(crate::queries::FULLGRAPH_SCM)
            .into_iter()
            .next()
            .unwrap_or_else(|| "fullgraph".to_owned())
    });
    let keyword = KEYWORD.as_str();
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric();
    text.match_indices(keyword).any(|(at, _)| {
        let before_ok = at == 0 || !is_word(bytes[at - 1]);
        let rest = text[at + keyword.len()..].trim_start_matches([' ', '\t', '\\', '\r', '\n']);
        before_ok && rest.starts_with('=') && !rest.starts_with("==")
    })
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
        assert!(mentions_fullgraph("torch.compile(m, fullgraph=True)"));
        assert!(mentions_fullgraph("compile(m,\n    fullgraph = True)"));
        assert!(!mentions_fullgraph("_can_compile_fullgraph = True"));
        assert!(!mentions_fullgraph("if fullgraph == True:"));
        assert!(!mentions_fullgraph("no mention here"));
    }

    #[test]
    fn needles_match_substrings() {
        let needles = Needles::new(["pre_forward"]);
        assert!(needles.is_match("def pre_forward(self): pass"));
        assert!(!needles.is_match("def forward(self): pass"));
        assert!(!Needles::new(Vec::<String>::new()).is_match("anything"));
    }
}
