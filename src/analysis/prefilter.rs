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

use crate::analysis::leaf_layers::ForwardRoots;
use aho_corasick::AhoCorasick;

/// The method a forward replacement replaces, and the attribute a class
/// swap assigns (`m.__class__ = C`).
pub const FORWARD: &str = "forward";
pub const CLASS_SWAP: &str = "__class__";

/// The literal every `# hookfence: ignore` comment holds (see
/// `queries/suppressions.scm`): files with one are parsed so that a
/// suppression matching nothing is reported.
pub const SUPPRESSION_MARK: &str = "hookfence:";

/// Where a needle name must stand to count: the shape the query that reads
/// the name gives it. Anything a query could match passes its check, so the
/// checks only drop files that cannot match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Context {
    /// Anywhere at all: the suppression mark.
    Anywhere,
    /// As a whole word: protocol bases and the class names followed through
    /// base lists (the class index compares a base's last dotted segment
    /// with them, so `ModelHooks` is not `ModelHook`).
    Word,
    /// As the name of a `def` (`queries/hook_methods.scm` matches method
    /// definitions): after the word `def` and blanks.
    Defined,
    /// As the callee of a call (`queries/registrations.scm` matches calls):
    /// a whole word followed, past blanks and comments, by `(`.
    Called,
    /// As an attribute assigned to (`m.forward = f`, `m.forward: T = f` as
    /// a statement: `queries/index.scm`'s forward replacements; see
    /// `annotated`) or as a string (`setattr(m, "forward", f)`).
    Replaced,
}

/// A name to search for, and where it must stand.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Needle {
    pub name: String,
    pub context: Context,
}

impl Needle {
    pub fn anywhere(name: impl Into<String>) -> Needle {
        Needle {
            name: name.into(),
            context: Context::Anywhere,
        }
    }

    pub fn word(name: impl Into<String>) -> Needle {
        Needle {
            name: name.into(),
            context: Context::Word,
        }
    }

    pub fn defined(name: impl Into<String>) -> Needle {
        Needle {
            name: name.into(),
            context: Context::Defined,
        }
    }

    pub fn replaced(name: impl Into<String>) -> Needle {
        Needle {
            name: name.into(),
            context: Context::Replaced,
        }
    }
}

/// Names whose presence makes a file worth parsing.
pub struct Needles {
    automaton: Option<AhoCorasick>,
    /// The SIMD ("Teddy") searcher for the same patterns, where the CPU has it.
    packed: Option<aho_corasick::packed::Searcher>,
    /// Every pattern in automaton order: names (each with its contexts), then `fullgraph`.
    patterns: Vec<(Vec<u8>, Vec<Context>)>,
}

/// What one pass over a file's text found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// A needle name where its query could match it: the file must be parsed.
    pub needed: bool,
    /// A `fullgraph=True` keyword argument may be there (see [`fullgraph_at`]).
    pub fullgraph: bool,
}

impl Needles {
    /// Needles for `needles`, plus (in the same automaton, so one pass over
    /// the text answers both) the `fullgraph` keyword.
    pub fn new<I: IntoIterator<Item = Needle>>(needles: I) -> Needles {
        let mut by_name: std::collections::BTreeMap<Vec<u8>, Vec<Context>> = Default::default();
        for needle in needles {
            let contexts = by_name.entry(needle.name.into_bytes()).or_default();
            if !contexts.contains(&needle.context) {
                contexts.push(needle.context);
            }
        }
        let any = !by_name.is_empty();
        let mut patterns: Vec<(Vec<u8>, Vec<Context>)> = by_name.into_iter().collect();
        patterns.push((fullgraph_keyword().as_bytes().to_vec(), Vec::new()));
        let literals: Vec<&[u8]> = patterns.iter().map(|(p, _)| p.as_slice()).collect();
        let automaton = any.then(|| {
            // Leftmost-first lets aho-corasick use its SIMD "Teddy" searcher;
            // every pattern starting where a match starts is checked below,
            // so which one the searcher reports does not matter.
            AhoCorasick::builder()
                .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                .build(&literals)
                .expect("plain literal needles always build")
        });
        let packed = any
            .then(|| {
                let mut builder = aho_corasick::packed::Config::new()
                    .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                    .builder();
                builder.extend(&literals);
                builder.build()
            })
            .flatten();
        Needles {
            automaton,
            packed,
            patterns,
        }
    }

    /// The first place at or after `from` where some pattern starts.
    fn next_start(&self, bytes: &[u8], from: usize) -> Option<usize> {
        let span = aho_corasick::Span {
            start: from,
            end: bytes.len(),
        };
        match (&self.packed, &self.automaton) {
            (Some(packed), _) => packed.find_in(bytes, span).map(|m| m.start()),
            (None, Some(automaton)) => automaton
                .find(aho_corasick::Input::new(bytes).span(span))
                .map(|m| m.start()),
            (None, None) => None,
        }
    }

    /// One pass over `text`: stops at the first needle name standing where
    /// its query could match it.
    pub fn scan(&self, text: &str) -> Scan {
        // Names are compared as CPython reads them, after NFKC: the text is
        // searched in that form wherever it differs.
        self.scan_normal(&crate::analysis::shadow::nfkc(text))
    }

    /// [`Needles::scan`] of a text already in the form its names are read in.
    fn scan_normal(&self, text: &str) -> Scan {
        let mut scan = Scan {
            needed: false,
            fullgraph: false,
        };
        let bytes = text.as_bytes();
        let fullgraph = self.patterns.len() - 1;
        let setattr = std::cell::OnceCell::new();
        let mut from = 0;
        // Every start of every pattern is visited: the searcher reports the
        // leftmost start, every pattern beginning there is checked, and the
        // search goes on one byte later (a rejected name must not hide an
        // overlapping one).
        while let Some(start) = self.next_start(bytes, from) {
            for (index, (pattern, contexts)) in self.patterns.iter().enumerate() {
                if !bytes[start..].starts_with(pattern) {
                    continue;
                }
                if index == fullgraph {
                    scan.fullgraph |= fullgraph_at(text, start);
                } else if contexts
                    .iter()
                    .any(|&c| stands_in(bytes, start, start + pattern.len(), c, &setattr))
                {
                    scan.needed = true;
                    return scan;
                }
            }
            from = start + 1;
        }
        scan
    }
}

pub(super) use super::annotated::{is_ascii_word, is_gap};

/// Whether `start..end` of `bytes` is not part of a longer ASCII name.
pub fn is_whole_word(bytes: &[u8], start: usize, end: usize) -> bool {
    (start == 0 || !is_ascii_word(bytes[start - 1]))
        && bytes.get(end).is_none_or(|&b| !is_ascii_word(b))
}

/// The whole-word occurrences of `words` in `text` (and the occurrences of
/// `anywhere`, inside longer words too), as sorted ranges with the
/// overlapping ones merged: where a query anchored to those words must look.
pub fn word_ranges<W: AsRef<str>>(
    text: &str,
    words: &[W],
    anywhere: &[&str],
) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
    for (word, whole) in words
        .iter()
        .map(|w| (w.as_ref(), true))
        .chain(anywhere.iter().map(|w| (*w, false)))
    {
        if word.is_empty() {
            continue;
        }
        ranges.extend(
            memchr::memmem::find_iter(bytes, word.as_bytes())
                .map(|at| at..at + word.len())
                .filter(|r| !whole || is_whole_word(bytes, r.start, r.end)),
        );
    }
    merged_ranges(ranges)
}

/// `ranges` in order, those that overlap or touch merged into one.
pub fn merged_ranges(mut ranges: Vec<std::ops::Range<usize>>) -> Vec<std::ops::Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<usize>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

/// Where `text` can hold a commented-out disable decorator as
/// `queries/fences.scm` matches it (`# @torch.compiler.disable()`): each
/// `disable` that a dotted name starts before, with only `@`, `#` and
/// blanks between that name and the line's `#` (`#[ \t]*@[ \t]*` then the
/// name). Every such comment holds one, so the query looks only there.
pub fn optout_ranges(text: &str) -> Vec<std::ops::Range<usize>> {
    const WORD: &[u8] = b"disable";
    let bytes = text.as_bytes();
    memchr::memmem::find_iter(bytes, WORD)
        .filter(|&at| {
            let mut i = at;
            while i > 0
                && (bytes[i - 1].is_ascii_alphanumeric() || matches!(bytes[i - 1], b'_' | b'.'))
            {
                i -= 1;
            }
            if !(bytes[i].is_ascii_alphabetic() || bytes[i] == b'_') {
                return false;
            }
            crate::analysis::compile_decorators::at_sign_before(bytes, i)
                .is_some_and(|i| i > 0 && bytes[i - 1] == b'#')
        })
        .map(|at| at..at + WORD.len())
        .collect()
}

/// Whether the name at `start..end` could be what a query with `context`
/// matches.
/// `setattr`: whether the text spells `setattr` anywhere, searched the
/// first time a needle asks and kept for the rest of the scan (once per
/// file, however many strings it has).
fn stands_in(
    bytes: &[u8],
    start: usize,
    end: usize,
    context: Context,
    setattr: &std::cell::OnceCell<bool>,
) -> bool {
    let whole_word = is_whole_word(bytes, start, end);
    match context {
        Context::Anywhere => true,
        Context::Word => whole_word,
        Context::Defined => {
            let mut i = start;
            while i > 0 && is_gap(bytes[i - 1]) {
                i -= 1;
            }
            whole_word
                && i < start
                && bytes[..i].ends_with(b"def")
                && (i == 3 || !is_ascii_word(bytes[i - 4]))
        }
        // A comment can sit between the name and `(` inside brackets.
        Context::Called => whole_word && bytes.get(skip_blanks(bytes, end)) == Some(&b'('),
        Context::Replaced => {
            if !whole_word {
                return false;
            }
            let mut i = start;
            while i > 0 && is_gap(bytes[i - 1]) {
                i -= 1;
            }
            let before = i.checked_sub(1).map(|i| bytes[i]);
            let after = skip_blanks(bytes, end);
            match before {
                // `m.forward = f`, and annotated: `m.forward: T = f`.
                Some(b'.') => match bytes.get(after) {
                    Some(b'=') => bytes.get(after + 1) != Some(&b'='),
                    Some(b':') => super::annotated::may_start_statement(bytes, i - 1),
                    _ => false,
                },
                // `setattr(m, "forward", f)`: the string (in any quotes,
                // with any prefix: `r'forward'`, triple quotes,
                // `f"forward"`) follows a comma, and the file calls
                // `setattr`; or it opens a list, tuple or call, or is a
                // keyword's value, where a loop or a call hands it to
                // `setattr(m, name, f)` (`analysis::installs::names_forward`).
                Some(quote @ (b'"' | b'\'')) => {
                    let mut j = i - 1;
                    while j > 0 && bytes[j - 1] == quote && i - j < 3 {
                        j -= 1;
                    }
                    let mut letters = 0;
                    while j > 0 && letters < 2 && b"rRuUfFbBtT".contains(&bytes[j - 1]) {
                        j -= 1;
                        letters += 1;
                    }
                    while j > 0 && is_gap(bytes[j - 1]) {
                        j -= 1;
                    }
                    bytes.get(end) == Some(&quote)
                        && j > 0
                        && matches!(bytes[j - 1], b',' | b'(' | b'[' | b'=')
                        && *setattr
                            .get_or_init(|| memchr::memmem::find(bytes, b"setattr").is_some())
                }
                _ => false,
            }
        }
    }
}

/// The keyword `queries/fullgraph.scm` names (`fullgraph`).
pub fn fullgraph_keyword() -> &'static str {
    static KEYWORD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::queries::predicate_strings(crate::queries::FULLGRAPH_SCM)
            .into_iter()
            .next()
            .unwrap_or_else(|| "fullgraph".to_owned())
    });
    KEYWORD.as_str()
}

/// Whether the `fullgraph` keyword at `at` reads as `fullgraph=True`, as
/// `queries/fullgraph.scm` matches it: a whole word, `=` (not `==`), then
/// `True` (blanks and comments may sit between). Names that merely end in it,
/// like transformers' `_can_compile_fullgraph`, and other values do not count.
fn fullgraph_at(text: &str, at: usize) -> bool {
    let bytes = text.as_bytes();
    if at > 0 && is_ascii_word(bytes[at - 1]) {
        return false;
    }
    let i = skip_blanks(bytes, at + fullgraph_keyword().len());
    if bytes.get(i) != Some(&b'=') || bytes.get(i + 1) == Some(&b'=') {
        return false;
    }
    let i = skip_blanks(bytes, i + 1);
    bytes[i..].starts_with(b"True") && bytes.get(i + 4).is_none_or(|&b| !is_ascii_word(b))
}

/// The first byte at or after `i` that is not blank, a line continuation or
/// part of a comment (all of which can sit between two tokens in brackets).
fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    loop {
        match bytes.get(i) {
            Some(&b) if is_gap(b) => i += 1,
            Some(b'#') => i = memchr::memchr(b'\n', &bytes[i..]).map_or(bytes.len(), |n| i + n),
            _ => return i,
        }
    }
}

/// Where to stop parsing a file read only for its `fullgraph=True`
/// arguments: the start of the first line after the last `fullgraph=True` that
/// begins at column 0 with a name or a decorator, as a top-level statement
/// does. `None` if there is no such line (or no `fullgraph`).
///
/// Only a guess, checked by the parser: if the text before it does not parse
/// cleanly (the line was inside brackets or a string after all), the whole
/// file is parsed instead. If it does, it is a run of whole statements, and
/// every `fullgraph=True` in it parses as in the whole file.
pub fn fullgraph_prefix_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    // The last `fullgraph=True`: later mentions (`fullgraph=False`, a
    // comment) cannot be matches.
    let last = memchr::memmem::find_iter(bytes, fullgraph_keyword().as_bytes())
        .filter(|&at| fullgraph_at(text, at))
        .last()?;
    let mut line = last + memchr::memchr(b'\n', &bytes[last..])? + 1;
    while line < bytes.len() {
        if matches!(bytes[line], b'@' | b'_') || bytes[line].is_ascii_alphabetic() {
            return Some(line);
        }
        line += memchr::memchr(b'\n', &bytes[line..])? + 1;
    }
    None
}

/// Signs of weight work a file that holds a wrapper module's forward has,
/// spelled as weight work spells them (not as a model's weight
/// initialisation does, `w.data.normal_()`, `named_parameters()`): storage
/// swapped (`.data =`, `._parameters`, `.set_(`, `resize_(`,
/// `untyped_storage`), transfers (`non_blocking`, `pin_memory`, `.cuda(`,
/// `.cpu(`, not where it hands a tensor to the host as data, see
/// `in_place_moves::spells_a_sign`), collectives (`all_gather`, `all_reduce`, `reduce_scatter`, `.broadcast(`) and the streams and
/// events that order them. A module moved in place (a dropped `.to(...)`,
/// see `in_place_moves::moves_a_module_in_place`) is a sign too.
pub const FORWARD_ROOT_SIGNS: &[&str] = &[
    ".data =",
    ".data=",
    "._parameters",
    ".set_(",
    "resize_(",
    "untyped_storage",
    "non_blocking",
    "pin_memory",
    ".cuda(",
    ".cpu(",
    "all_gather",
    "all_reduce",
    "reduce_scatter",
    ".broadcast(",
    "wait_stream",
    "wait_event",
    "record_stream",
    "synchronize(",
];

/// Whether `text` can hold a module forward the analysis takes as a root
/// (see `analysis::roots`): it defines `forward` (after `def`, as the
/// prefilter's [`Context::Defined`] reads it) and holds a sign of weight
/// work ([`FORWARD_ROOT_SIGNS`]), or a torch leaf layer's subclass (for its
/// forwards only, [`ForwardRoots`]). The same test with and without the
/// prefilter, so that it cannot change an answer; a forward in a file with
/// no such sign is not looked at (a model's forward). A file defining a
/// tensor subclass's `__torch_function__` is indexed whatever it spells (it
/// may dispatch to hook objects), and so is one that compiles a function
/// where it is defined (`@torch.compile`, see `compile_decorators`).
pub fn may_define_forward(text: &str) -> bool {
    may_root_forwards(text) != ForwardRoots::None
}

/// [`may_define_forward`], saying which forwards.
pub fn may_root_forwards(text: &str) -> ForwardRoots {
    static NEEDLES: std::sync::LazyLock<Needles> =
        std::sync::LazyLock::new(|| Needles::new([Needle::defined(FORWARD)]));
    static SIGNS: std::sync::LazyLock<AhoCorasick> = std::sync::LazyLock::new(|| {
        AhoCorasick::new(FORWARD_ROOT_SIGNS).expect("plain literal signs always build")
    });
    static TORCH_FUNCTION: std::sync::LazyLock<Needles> =
        std::sync::LazyLock::new(|| Needles::new([Needle::defined(TORCH_FUNCTION_HOOK)]));
    let normal = crate::analysis::shadow::nfkc(text);
    let spells = |name: &str| memchr::memmem::find(normal.as_bytes(), name.as_bytes()).is_some();
    let defines_forward = spells(FORWARD) && NEEDLES.scan_normal(&normal).needed;
    if (defines_forward
        && (crate::analysis::in_place_moves::spells_a_sign(&SIGNS, text)
            || crate::analysis::in_place_moves::moves_a_module_in_place(text)))
        || (spells(TORCH_FUNCTION_HOOK) && TORCH_FUNCTION.scan_normal(&normal).needed)
        || ((spells("compile") || spells("optimize"))
            && crate::analysis::compile_decorators::compiles_where_defined(&normal))
    {
        ForwardRoots::All
    } else if defines_forward && crate::analysis::leaf_layers::may_define_a_transfer_layer(text) {
        ForwardRoots::LayersOnly
    } else {
        ForwardRoots::None
    }
}

/// A tensor subclass's op hook: torch calls it for every op on its
/// instances (see `analysis::roots`' parameter-op dispatch).
pub const TORCH_FUNCTION_HOOK: &str = "__torch_function__";

/// Whether `text` can replace a module's forward as `queries/index.scm`
/// matches it: `forward` as an attribute assigned to (`.forward =`,
/// `.forward: T =`) or as a whole string after a comma with `setattr`
/// shortly before (`setattr(m, "forward", ...)`). Blanks and line
/// continuations may stand around the `.` and the `=`. It is the
/// prefilter's own needle for it ([`Context::Replaced`]), so a file parsed
/// without the prefilter is indexed for it exactly where the prefilter
/// would have parsed it for it (a `"forward"` in a comment is neither).
pub fn may_replace_forward(text: &str) -> bool {
    static NEEDLES: std::sync::LazyLock<Needles> =
        std::sync::LazyLock::new(|| Needles::new([Needle::replaced(FORWARD)]));
    NEEDLES.scan(text).needed
}

/// Whether `text` can swap an object's class as `queries/index.scm`
/// matches it (`m.__class__ = C`, `setattr(m, "__class__", C)`), by the
/// same rule as [`may_replace_forward`].
pub fn may_swap_class(text: &str) -> bool {
    static NEEDLES: std::sync::LazyLock<Needles> =
        std::sync::LazyLock::new(|| Needles::new([Needle::replaced(CLASS_SWAP)]));
    NEEDLES.scan(text).needed
}

#[cfg(test)]
mod tests {
    /// Every comment `queries/fences.scm` takes for a commented-out disable
    /// decorator holds a range; the rest of a file's `disable`s do not.
    #[test]
    fn optout_ranges_hold_every_commented_out_decorator_and_little_else() {
        let pattern = regex::Regex::new("^#[ \t]*@[ \t]*[A-Za-z_][A-Za-z0-9_.]*disable([ \t(]|$)")
            .expect("the query's pattern");
        for comment in [
            "# @torch.compiler.disable()",
            "#@torch._dynamo.disable",
            "#\t@ \tmy_disable(recursive=False)",
            "# @torch.disable_x.disable()",
            "# @a.disable # trailing words",
        ] {
            assert!(pattern.is_match(comment), "{comment}");
            for text in [comment.to_owned(), format!("x = 1  {comment}\n")] {
                let ranges = super::optout_ranges(&text);
                let at = text.find('#').expect("a comment");
                assert!(ranges.iter().any(|r| r.start > at), "{text:?}: {ranges:?}");
            }
        }
        for text in [
            "torch.compiler.disable()\n",
            "@torch.compiler.disable()\ndef f(): pass\n",
            "x = '@disable'  # disable this\n",
            "# @ 1disable\n",
            "# see @torch.compiler disable\n",
        ] {
            assert!(super::optout_ranges(text).is_empty(), "{text:?}");
        }
    }

    /// A forward is a root where its file spells weight work as weight work
    /// spells it, not where a model initialises its weights.
    #[test]
    fn forward_roots_need_a_sign_of_weight_work() {
        for text in [
            "def forward(self, x):\n    p.data = p._shard\n",
            "def  forward(self):\n    torch.cuda.current_stream().wait_stream(s)\n",
            "def forward(self):\n    w.to('cuda', non_blocking=True)\n",
            "def forward(self):\n    m._parameters['w'] = w\n",
            "class P(nn.Parameter):\n    def __torch_function__(cls, f, t, a=()): ...\n",
            // `ｆorward` is `forward` to CPython (NFKC).
            "def \u{ff46}orward(self, x):\n    p.data = p._shard\n",
            "def __torch_\u{ff46}unction__(cls, f, t, a=()): ...\n",
            // Compiled where defined, whatever else the file spells.
            "class R:\n    @torch.compile(disable=x)\n    def infer(self): ...\n",
            "@torch.compile\ndef step(x): ...\n",
            "@ torch._dynamo.optimize('inductor')  \ndef step(x): ...\n",
            "@compile\r\ndef step(x): ...\n",
            "from torch import compile as torch_compile\n@torch_compile(dynamic=True)\ndef step(x): ...\n",
            "tc = torch.compile\n\n@tc\ndef step(x): ...\n",
        ] {
            assert!(super::may_define_forward(text), "{text:?}");
        }
        for text in [
            "def forward(self, x):\n    return self.inner(x).cpu().float().numpy()\n",
            "def _init_weights(self, m):\n    m.weight.data.normal_()\n\
             def forward(self, x):\n    return x\n",
            "n = sum(p.numel() for p in m.named_parameters())\ndef forward(self, x): ...\n",
            "p.data = q\ndef forward_hook(m): ...\n",
            "x = torch_function\ndef __torch_function__x(): ...\n",
            "p = re.compile('x')\n@functools.cache\ndef f(): ...\n",
            "@torch.compiler.disable\ndef f(): ...\n",
            "@compile_compatible_method_lru_cache(maxsize=1)\ndef f(): ...\n",
            "from torch import compile as tc\n@tcx\ndef f(): ...\n",
            "# @torch.compile\ndef f(): ...\n",
        ] {
            assert!(!super::may_define_forward(text), "{text:?}");
        }
    }

    use super::*;

    #[test]
    fn needles_come_from_the_queries_with_their_shape() {
        let needles = crate::analysis::vocabulary::Vocabulary::default().needles;
        let has = |name: &str, context| {
            needles.contains(&Needle {
                name: name.into(),
                context,
            })
        };
        for name in ["pre_forward", "post_forward"] {
            assert!(
                has(name, Context::Defined),
                "{name} missing from {needles:?}"
            );
        }
        for name in [
            "register_forward_pre_hook",
            "register_forward_hook",
            "register_module_forward_pre_hook",
            "register_module_forward_hook",
        ] {
            assert!(
                has(name, Context::Called),
                "{name} missing from {needles:?}"
            );
        }
        assert!(has("ModelHook", Context::Word));
        assert!(has(SUPPRESSION_MARK, Context::Anywhere));
    }

    #[test]
    fn fullgraph_mentions_are_whole_keyword_arguments() {
        let mentions = |text: &str| {
            Needles::new([Needle::defined("pre_forward")])
                .scan(text)
                .fullgraph
        };
        assert!(mentions("torch.compile(m, fullgraph=True)"));
        assert!(mentions("compile(m,\n    fullgraph = True)"));
        assert!(mentions("compile(m, fullgraph=  # always\n    True)"));
        assert!(mentions("compile(m, fullgraph\x0b=True)"));
        assert!(!mentions("torch.compile(m, fullgraph=False)"));
        assert!(!mentions("torch.compile(m, fullgraph=flag)"));
        assert!(!mentions("torch.compile(m, fullgraph=Trueish)"));
        assert!(!mentions("_can_compile_fullgraph = True"));
        assert!(!mentions("if fullgraph == True:"));
        assert!(!mentions("no mention here"));
    }

    #[test]
    fn a_fullgraph_file_is_cut_after_the_statement_that_names_it() {
        let text = "import torch\nm = torch.compile(\n    m,\n    fullgraph=True,\n)\n\n# done\n    x\nprint(m)\ny = 1\n";
        assert_eq!(fullgraph_prefix_end(text), text.find("print"));
        assert_eq!(fullgraph_prefix_end("f(fullgraph=True)\n"), None);
        assert_eq!(fullgraph_prefix_end("f(fullgraph=True)"), None);
        assert_eq!(fullgraph_prefix_end("x = 1\n"), None);
        // Later mentions that cannot match do not push the cut back.
        let text = "f(fullgraph=True)\ng(1)\nh(fullgraph=False)\n# fullgraph\nk(2)\n";
        assert_eq!(fullgraph_prefix_end(text), text.find("g(1)"));
        assert_eq!(
            fullgraph_prefix_end("f(fullgraph=True)\n@dec\ndef g(): pass\n"),
            Some(18)
        );
    }

    #[test]
    fn one_scan_answers_names_and_fullgraph() {
        let needles = Needles::new([Needle::defined("pre_forward")]);
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
    fn forward_replacements_count_in_every_spelling_the_index_matches() {
        let needed = |text: &str| {
            Needles::new([Needle {
                name: FORWARD.to_owned(),
                context: Context::Replaced,
            }])
            .scan(text)
            .needed
        };
        for spelling in [
            "m.forward = nf",
            "m.forward: T = nf",
            "m.forward : Callable = nf",
            "setattr(m, 'forward', nf)",
            "setattr(m, \"forward\", nf)",
            "setattr(m, r'forward', nf)",
            "setattr(m, '''forward''', nf)",
            "setattr(m, \"\"\"forward\"\"\", nf)",
            "setattr(m, f'forward', nf)",
            "setattr(m, Rb\"forward\", nf)",
            "setattr(m,\n    'forward', nf)",
        ] {
            assert!(needed(spelling), "{spelling}");
        }
        for other in [
            "m.forward(x)",
            "m.forward == nf",
            "y = m.forward",
            "print('forward')",
            "d = {'forward': 1}",
            "if cls != m.forward:",
        ] {
            assert!(!needed(other), "{other}");
        }
    }

    fn called(name: &str) -> Needle {
        Needle {
            name: name.into(),
            context: Context::Called,
        }
    }

    #[test]
    fn names_anywhere_match_as_substrings() {
        let needles = Needles::new([Needle::anywhere("ModelHook")]);
        assert!(needles.scan("from hooks import ModelHook").needed);
        assert!(needles.scan("x = MyModelHooks").needed);
        assert!(!needles.scan("class A(Hook): pass").needed);
        assert!(!Needles::new(Vec::<Needle>::new()).scan("anything").needed);
    }

    #[test]
    fn class_names_count_as_whole_words() {
        let needles = Needles::new([Needle::word("ModelHook")]);
        assert!(needles.scan("class H(hooks.ModelHook):").needed);
        assert!(needles.scan("from hooks import ModelHook\n").needed);
        assert!(!needles.scan("class LightningModule(ModelHooks):").needed);
        assert!(!needles.scan("class A(MyModelHook):").needed);
    }

    #[test]
    fn hook_method_names_count_only_where_a_def_names_them() {
        let needed = |text: &str| {
            Needles::new([Needle::defined("pre_forward")])
                .scan(text)
                .needed
        };
        assert!(needed("    def pre_forward(self, module):"));
        assert!(needed("    async def pre_forward(self):"));
        assert!(needed("def\\\n    pre_forward(self): pass"));
        assert!(needed("def pre_forward"));
        assert!(!needed("module._hf_hook.pre_forward(module)"));
        assert!(!needed("# call pre_forward first"));
        assert!(!needed("def pre_forward_hook(self): pass"));
        assert!(!needed("undef pre_forward"));
        assert!(!needed("def forward(self): pass"));
    }

    #[test]
    fn registrar_names_count_only_where_they_are_called() {
        let needed = |text: &str| {
            Needles::new([called("register_forward_hook")])
                .scan(text)
                .needed
        };
        assert!(needed("m.register_forward_hook(hook)"));
        assert!(needed("register_forward_hook (hook)"));
        assert!(needed("(m.register_forward_hook  # why\n    (hook))"));
        assert!(needed("m.register_forward_hook\\\n(hook)"));
        assert!(needed("m.register_forward_hook\x0b(hook)"));
        assert!(!needed("see `register_forward_hook` in the docs"));
        assert!(!needed("f = m.register_forward_hook\n"));
        assert!(!needed("m.register_forward_hooks(hook)"));
        assert!(!needed("m.my_register_forward_hook(hook)"));
    }

    #[test]
    fn a_rejected_name_does_not_hide_one_starting_inside_it() {
        // "pre_forward" (not defined here) overlaps "forward_x(" (called).
        let needles = Needles::new([Needle::defined("pre_forward"), called("forward_x")]);
        assert!(!needles.scan("a = xpre_forward_x(1)").needed);
        assert!(needles.scan("a = pre_forward + forward_x(1)").needed);
        let needles = Needles::new([Needle::defined("m.pre"), called("pre_forward")]);
        assert!(needles.scan("m.pre_forward(1)").needed);
        // Two names starting at one place: whichever the searcher reports,
        // both are checked.
        let needles = Needles::new([called("hook"), Needle::defined("hook_x")]);
        assert!(needles.scan("def hook_x(): pass").needed);
        assert!(needles.scan("hook(1)").needed);
        let needles = Needles::new([Needle::anywhere("x"), Needle::defined("x")]);
        assert!(needles.scan("y = x").needed);
    }

    #[test]
    fn a_name_in_two_shapes_counts_in_either() {
        let needles = Needles::new([Needle::defined("attach"), called("attach")]);
        assert!(needles.scan("def attach(self): pass").needed);
        assert!(needles.scan("m.attach(h)").needed);
        assert!(!needles.scan("m.attach = h").needed);
    }
}
