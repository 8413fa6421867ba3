//! One file read, checked and parsed into facts: the prefilter's reading
//! (kept while it names nothing a round looks for), the parse, the shadow
//! where tree-sitter would read names otherwise than CPython, and the
//! file's facts for the matcher and the project.

use std::path::{Path, PathBuf};

use crate::analysis::file_facts::FileFacts;
use crate::analysis::verdict::ClassIndex;
use crate::analysis::{file_facts, matcher, module_facts, prefilter, shadow, unparsed};
use crate::error::FileError;
use crate::options::Options;
use crate::pipeline::finish::finish;
use crate::results::FileReport;
use crate::source::Source;
use crate::{parse, source};

/// A parsed file. The source is kept only where there is something to plan.
pub(crate) struct Loaded {
    pub(crate) path: PathBuf,
    /// Its classes, for the class index.
    pub(crate) classes: Vec<file_facts::ClassFact>,
    /// Whether it has hook candidates (then `fullgraph=True` matters).
    pub(crate) has_candidates: bool,
    /// What the project index records of it.
    pub(crate) module: Option<std::sync::Arc<module_facts::ModuleFacts>>,
    pub(crate) work: Work,
    /// Matched whole (not read only for its `fullgraph=True` note): what
    /// it holds depends on the vocabulary's queries and the functions found
    /// by use in it, not on the prefilter's needles.
    pub(crate) matched: bool,
}

/// What is left to do for a parsed file.
pub(crate) enum Work {
    /// Nothing in it to report.
    Nothing,
    /// Its hooks are decided once every file's classes are known.
    Waiting(Box<(Source, FileFacts)>),
    /// Decided and planned while the other files were read: none of its
    /// hooks is a protocol method, so no other file can change the answer.
    Done(Box<Result<FileReport, FileError>>),
}

/// A file the prefilter has not parsed (yet), with what one reading of it
/// found out.
pub(crate) struct Pending {
    pub(crate) path: PathBuf,
    /// Where it may pass `fullgraph=...` (see [`prefilter::Scan`]): its
    /// `fullgraph=True` arguments, found when it was first read. Used only
    /// if the run finds hooks.
    pub(crate) fullgraph: Option<Box<Result<Loaded, FileError>>>,
    /// The words in its class statements' base lists, when a cheap reading
    /// could bound them (see [`unparsed::class_base_words`]).
    pub(crate) class_bases: Option<Vec<String>>,
    /// The names it defines, when it was read (see
    /// [`unparsed::DefinedNames`]).
    pub(crate) defined: Option<unparsed::DefinedNames>,
}

/// What became of one file in one prefilter round.
pub(crate) enum Outcome {
    Parsed(Box<Loaded>),
    /// Read fine, but holds no needle of this round: maybe a later one.
    NotYet(Pending),
    Failed(FileError),
}

thread_local! {
    /// Each worker reads every file into the same buffer: the files the
    /// prefilter drops cost no allocation and no copy.
    pub(crate) static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads a whole file into `buffer` (grown as needed, never shrunk below what
/// it holds) and returns its bytes; more than [`source::MAX_SOURCE_BYTES`] is
/// an error.
pub(crate) fn read_into<'b>(path: &Path, buffer: &'b mut Vec<u8>) -> std::io::Result<&'b [u8]> {
    use std::io::Read;
    let limit = usize::try_from(source::MAX_SOURCE_BYTES).unwrap_or(usize::MAX);
    let mut file = std::fs::File::open(path)?;
    let mut filled = 0;
    loop {
        if filled > limit {
            return Err(source::too_large(
                source::MAX_SOURCE_BYTES,
                "a Python source",
            ));
        }
        if filled == buffer.len() {
            let more = buffer.len().max(64 * 1024);
            // One byte past the limit is enough to tell.
            let len = (buffer.len() + more)
                .min(limit.saturating_add(1))
                .max(filled + 1);
            buffer.resize(len, 0);
        }
        match file.read(&mut buffer[filled..]) {
            Ok(0) => return Ok(&buffer[..filled]),
            Ok(n) => filled += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// Parses a file's text (see [`parse::parse_checked`]); a syntax error, or
/// nesting too deep to analyse, is an error naming the file.
pub(crate) fn parse_checked(path: &Path, text: &str) -> Result<parse::Parsed, FileError> {
    parse::parse_checked(text).map_err(|p| FileError::Syntax {
        path: path.to_path_buf(),
        at: p.at,
        what: p.what,
    })
}

/// Parses and matches one decoded file; a deep tree is analysed on a
/// thread with a big stack (see [`parse::SHALLOW_DEPTH`]).
pub(crate) fn load(
    path: &Path,
    source: Source,
    options: &Options,
    anchored: bool,
) -> Result<Loaded, FileError> {
    let parsed = parse_checked(path, &source.text)?;
    if parsed.is_deep() {
        return parse::on_big_stack(|| load_parsed(path, source, parsed.tree, options, anchored));
    }
    load_parsed(path, source, parsed.tree, options, anchored)
}

/// [`load`] once the file has parsed.
pub(crate) fn load_parsed(
    path: &Path,
    source: Source,
    tree: tree_sitter::Tree,
    options: &Options,
    anchored: bool,
) -> Result<Loaded, FileError> {
    // Where tree-sitter would read the file otherwise than CPython, the
    // matcher reads its shadow (see `shadow`), and the original's tree is
    // not at hand to check the rewrite incrementally.
    let shadow = shadow::Shadow::of(&tree, &source.text).map_err(|e| FileError::Syntax {
        path: path.to_path_buf(),
        at: e.at,
        what: e.what,
    })?;
    let discovered = options.discovered.functions_in(path);
    // The project index records a parsed file only where it can be asked
    // of it: the file has hooks or registrations the matcher could not
    // follow (their chains start there), or it can replace a module's
    // forward, swap its class or define a forward (hooks found by use); every other module is read by name when a call
    // reaches it. The same rule with and without the prefilter, so that
    // it cannot change an answer.
    let index_of = |facts: &FileFacts,
                    register_calls: &[module_facts::RegisterCall<'_>],
                    root: tree_sitter::Node<'_>,
                    text: &str| {
        // Asked of the file's own text, as the prefilter asks it, not of
        // the shadow the matcher reads (which blanks lines CPython joins).
        let original = source.text.as_str();
        let other_reason = !facts.candidates.is_empty()
            || !facts.unresolved.is_empty()
            || prefilter::may_replace_forward(original)
            || prefilter::may_swap_class(original);
        let roots = prefilter::may_root_forwards(original);
        (other_reason || roots != crate::analysis::leaf_layers::ForwardRoots::None).then(|| {
            let mut module = module_facts::ModuleFacts::build(
                path,
                root,
                text,
                &options.vocabulary,
                Some(&facts.model),
                Some(register_calls),
                &options.module_cache.listings,
            );
            module.layers_only =
                !other_reason && roots == crate::analysis::leaf_layers::ForwardRoots::LayersOnly;
            std::sync::Arc::new(module)
        })
    };
    let (mut facts, module, tree) = match &shadow {
        None => {
            let (facts, register_calls) = matcher::analyze_scanned(
                &tree,
                &source.text,
                &options.vocabulary,
                anchored,
                &discovered,
            );
            let module = index_of(&facts, &register_calls, tree.root_node(), &source.text);
            (facts, module, Some(tree))
        }
        Some(shadow) => {
            let shadow_tree = parse_checked(path, &shadow.text)?.tree;
            let (mut facts, register_calls) = matcher::analyze_scanned(
                &shadow_tree,
                &shadow.text,
                &options.vocabulary,
                anchored,
                &discovered,
            );
            let module = index_of(
                &facts,
                &register_calls,
                shadow_tree.root_node(),
                &shadow.text,
            );
            facts.restore(shadow, &source.text);
            (facts, module, None)
        }
    };
    let classes = std::mem::take(&mut facts.classes);
    let has_candidates = !facts.candidates.is_empty();
    let nothing = !has_candidates
        && facts.unresolved.is_empty()
        && facts.fullgraph.is_empty()
        && facts.suppressions.is_empty();
    let work = if nothing {
        Work::Nothing
    } else if facts
        .candidates
        .iter()
        .all(|c| c.owner.is_none() && c.fence != file_facts::FenceState::Unfenced)
    {
        // Every hook is fenced or marked already: neither the class index
        // (protocol methods) nor the project index (what each unfenced hook
        // does, by data flow) can change a decision, so plan now, while the
        // other files are read (and while the tree is at hand to check the
        // rewrite incrementally). A hook whose own body shows a sign waits
        // for the project too: a sign read by names alone (`x = x.to(...)`
        // in a Function's `forward(ctx, x, ..., module)`) is no evidence
        // until its caller says what `x` is.
        let index = ClassIndex::default();
        Work::Done(Box::new(finish(
            path.to_path_buf(),
            source,
            facts,
            &index,
            None,
            options,
            tree.as_ref(),
        )))
    } else {
        // The tree is not kept for later: memory stays flat.
        Work::Waiting(Box::new((source, facts)))
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        classes,
        has_candidates,
        module,
        work,
        matched: true,
    })
}

/// Parses a file the prefilter would not parse but for `fullgraph=`: nothing
/// else in it can matter (a hook, or a class on the way to one, would have
/// made it a candidate), so only the `fullgraph=True` arguments are looked
/// for.
pub(crate) fn fullgraph_only(path: &Path, source: Source) -> Result<Loaded, FileError> {
    // Nothing reaches tree-sitter that CPython's tokenizer refuses, not even
    // a prefix of it.
    parse::check_tokens(&source.text).map_err(|p| FileError::Syntax {
        path: path.to_path_buf(),
        at: p.at,
        what: p.what,
    })?;
    let fullgraph = if shadow::changes_under_nfkc(&source.text) {
        // `ｆullgraph=True` is `fullgraph=True` to CPython: read the shadow.
        let tree = parse_checked(path, &source.text)?.tree;
        match shadow::Shadow::of(&tree, &source.text) {
            Ok(Some(shadow)) => {
                let shadow_tree = parse_checked(path, &shadow.text)?.tree;
                let mut at = matcher::fullgraph_arguments(&shadow_tree, &shadow.text);
                shadow.restore_positions(&mut at, &source.text);
                at
            }
            Ok(None) | Err(_) => matcher::fullgraph_arguments(&tree, &source.text),
        }
    } else {
        // The statements up to the last `fullgraph=True` are enough when they
        // parse cleanly on their own (see `prefilter::fullgraph_prefix_end`).
        let prefix = prefilter::fullgraph_prefix_end(&source.text)
            .map(|end| &source.text[..end])
            .and_then(|prefix| Some((parse::parse(prefix)?, prefix)))
            .filter(|(tree, _)| !tree.root_node().has_error());
        let (tree, text) = match prefix {
            Some(parsed) => parsed,
            None => (
                parse_checked(path, &source.text)?.tree,
                source.text.as_str(),
            ),
        };
        matcher::fullgraph_arguments(&tree, text)
    };
    let work = if fullgraph.is_empty() {
        Work::Nothing
    } else {
        let facts = FileFacts {
            fullgraph,
            ..FileFacts::default()
        };
        Work::Waiting(Box::new((source, facts)))
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        classes: Vec::new(),
        has_candidates: false,
        module: None,
        work,
        matched: false,
    })
}

/// Reads one file and parses it if `needles` (none: always) says it can
/// matter; `anchored` as in [`matcher::analyze`].
pub(crate) fn visit(
    pending: Pending,
    needles: Option<&prefilter::Needles>,
    options: &Options,
    anchored: bool,
) -> Outcome {
    let path = pending.path;
    let visited = READ_BUFFER.with_borrow_mut(|buffer| {
        let raw = read_into(&path, buffer).map_err(|source| FileError::Read {
            path: path.clone(),
            source,
        })?;
        let view = Source::view(raw).map_err(|e| FileError::decode(path.clone(), e))?;
        if let Some(needles) = needles {
            let scan = needles.scan(&view.text);
            if !scan.needed && !prefilter::may_define_forward(&view.text) {
                let class_bases = unparsed::class_base_words(&view.text);
                let defined = Some(unparsed::DefinedNames::of(&view.text));
                // Parsed now, while the other files are read, rather than in
                // a last pass of its own.
                let fullgraph = pending.fullgraph.or_else(|| {
                    scan.fullgraph
                        .then(|| Box::new(fullgraph_only(&path, Source::from_view(raw, view))))
                });
                return Ok(Err(Pending {
                    path: path.clone(),
                    fullgraph,
                    class_bases,
                    defined,
                }));
            }
        }
        Ok(Ok(Source::from_view(raw, view)))
    });
    // Parsed with the buffer free again.
    match visited {
        Ok(Ok(source)) => match load(&path, source, options, anchored) {
            Ok(loaded) => Outcome::Parsed(Box::new(loaded)),
            Err(err) => Outcome::Failed(err),
        },
        Ok(Err(pending)) => Outcome::NotYet(pending),
        Err(err) => Outcome::Failed(err),
    }
}
