//! hookfence: find PyTorch offload hooks in a Python tree and fence them from
//! `torch.compile` with `@torch.compiler.disable()`.
//!
//! Stages, arrows one way: [`discover`] (walk paths) -> [`source`] (bytes,
//! encoding, BOM) -> [`parse`] (CPython's tokenizer rules, tree-sitter) ->
//! [`queries`] (compiled `.scm`) and [`syntax`] (questions about nodes) ->
//! [`analysis`] (per-file facts, the project, hooks found by use, evidence,
//! the verdict; see its files' order there) -> [`plan`] (edits, pure) ->
//! [`edit`] (apply) -> [`render`] (diff, notes, summary) / [`write`](mod@write) (atomic).
//! This file holds the crate's public surface and the pipeline that drives
//! those stages over a run's files.

pub mod analysis;
pub mod cli;
pub mod config;
pub mod confine;
pub mod discover;
pub mod edit;
pub mod error;
pub mod found;
pub mod guard;
pub mod interrupt;
pub mod lexical;
pub mod parse;
pub mod plan;
pub mod pyrules;
pub mod queries;
pub mod render;
pub mod report;
pub mod review;
pub mod source;
pub mod syntax;
pub mod vcs;
pub mod wrap;
pub mod write;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::analysis::file_facts::{FileFacts, Unresolved};
use crate::analysis::verdict::{ClassIndex, HookSite, Status};
use crate::analysis::{
    file_facts, matcher, module_facts, prefilter, project, shadow, verdict, vocabulary,
};
use crate::error::{FileError, Position};
use crate::source::Source;

/// Exit codes, stable for scripts and CI.
pub mod exit {
    /// Nothing to fence (or, without `--check`, the run went fine).
    pub const SUCCESS: i32 = 0;
    /// `--check` found offload hooks without a fence.
    pub const UNFENCED: i32 = 1;
    /// Some file could not be read, decoded, parsed or written, or the
    /// command line was wrong.
    pub const ERROR: i32 = 2;
}

/// What a run does with what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Print the diff; write nothing.
    Diff,
    /// Write the changes.
    Apply,
    /// Write nothing; exit 1 if anything would change.
    Check,
    /// Print every hook site with its status; write nothing.
    List,
}

/// One file with hooks, after planning.
#[derive(Debug)]
pub struct FileReport {
    /// The path as discovered (as given on the command line, or below it).
    pub path: PathBuf,
    pub source: Source,
    pub sites: Vec<HookSite>,
    pub unresolved: Vec<Unresolved>,
    /// The rewritten text, when anything changes.
    pub new_text: Option<String>,
    /// Hooks whose fix overlapped another one and was not applied.
    pub conflicts: Vec<String>,
    /// With the wrap strategy, the helper module this file's fences import.
    pub helper: Option<wrap::Helper>,
    /// Every `fullgraph=True` argument in the file.
    pub fullgraph: Vec<Position>,
    /// Lines with a `# hookfence: ignore` that suppresses no hook.
    pub unused_suppressions: Vec<usize>,
}

impl FileReport {
    pub fn count(&self, pred: impl Fn(&Status) -> bool) -> usize {
        self.sites.iter().filter(|s| pred(&s.status)).count()
    }
}

/// Everything a run found, sorted by path.
#[derive(Debug, Default)]
pub struct Analysis {
    pub files: Vec<FileReport>,
    /// Files to create: the wrap strategy's helper modules, where missing.
    pub created: Vec<NewFile>,
    pub errors: Vec<FileError>,
    /// How many files were read.
    pub scanned: usize,
}

/// A file hookfence creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub path: PathBuf,
    pub text: String,
}

/// What an analysis run looks for and how.
#[derive(Clone)]
pub struct Options {
    /// Fence hooks that do no offload work too.
    pub all_hooks: bool,
    /// Parse only files that can matter (see [`prefilter`]), and query only
    /// the parts of a tree that can match (see [`matcher::analyze`]); off
    /// parses every file and walks every tree whole.
    pub prefilter: bool,
    pub strategy: plan::Strategy,
    /// `--helper-module`: the wrap strategy's helper, as a dotted module name.
    pub helper_module: Option<String>,
    /// The names matched: defaults plus configuration.
    pub vocabulary: std::sync::Arc<vocabulary::Vocabulary>,
    /// Which walked files to take (`--include`) and skip (`--exclude`, the
    /// configuration's `exclude`); files named explicitly are always taken.
    pub selection: discover::Selection,
    /// A progress bar to advance per file read; drawn only once a run has
    /// taken over a second.
    pub progress: Option<indicatif::ProgressBar>,
    /// Hooks found by use in an earlier round of the same run.
    pub discovered: std::sync::Arc<found::Discovered>,
    /// `--project-root`: the project the given paths belong to. Without it,
    /// the nearest directory above each path that holds `pyproject.toml`,
    /// `setup.py`, `setup.cfg` or `.git`.
    pub project_root: Option<PathBuf>,
    /// Classes of the project outside the given paths (for the class index
    /// of a partial run).
    pub context_classes: std::sync::Arc<Vec<file_facts::ClassFact>>,
    /// Modules the project index read on demand, kept across rounds.
    pub module_cache: std::sync::Arc<project::ModuleCache>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            all_hooks: false,
            prefilter: true,
            strategy: plan::Strategy::Decorate,
            helper_module: None,
            vocabulary: std::sync::Arc::new(vocabulary::Vocabulary::default()),
            selection: discover::Selection::default(),
            progress: None,
            discovered: std::sync::Arc::default(),
            project_root: None,
            context_classes: std::sync::Arc::default(),
            module_cache: std::sync::Arc::default(),
        }
    }
}

/// A parsed file. The source is kept only where there is something to plan.
struct Loaded {
    path: PathBuf,
    /// Its classes, for the class index.
    classes: Vec<file_facts::ClassFact>,
    /// Whether it has hook candidates (then `fullgraph=True` matters).
    has_candidates: bool,
    /// What the project index records of it.
    module: Option<std::sync::Arc<module_facts::ModuleFacts>>,
    work: Work,
}

/// What is left to do for a parsed file.
enum Work {
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
struct Pending {
    path: PathBuf,
    /// Where it may pass `fullgraph=...` (see [`prefilter::Scan`]): its
    /// `fullgraph=True` arguments, found when it was first read. Used only
    /// if the run finds hooks.
    fullgraph: Option<Box<Result<Loaded, FileError>>>,
    /// The words in its class statements' base lists, when a cheap reading
    /// could bound them (see [`prefilter::class_base_words`]).
    class_bases: Option<Vec<String>>,
    /// The names it defines, when it was read (see
    /// [`prefilter::DefinedNames`]).
    defined: Option<prefilter::DefinedNames>,
}

/// What became of one file in one prefilter round.
enum Outcome {
    Parsed(Box<Loaded>),
    /// Read fine, but holds no needle of this round: maybe a later one.
    NotYet(Pending),
    Failed(FileError),
}

thread_local! {
    /// Each worker reads every file into the same buffer: the files the
    /// prefilter drops cost no allocation and no copy.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads a whole file into `buffer` (grown as needed, never shrunk below what
/// it holds) and returns its bytes; more than [`source::MAX_SOURCE_BYTES`] is
/// an error.
fn read_into<'b>(path: &Path, buffer: &'b mut Vec<u8>) -> std::io::Result<&'b [u8]> {
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
fn parse_checked(path: &Path, text: &str) -> Result<parse::Parsed, FileError> {
    parse::parse_checked(text).map_err(|p| FileError::Syntax {
        path: path.to_path_buf(),
        at: p.at,
        what: p.what,
    })
}

/// Parses and matches one decoded file; a deep tree is analysed on a
/// thread with a big stack (see [`parse::SHALLOW_DEPTH`]).
fn load(
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
fn load_parsed(
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
    // forward (hooks found by use); every other module is read by name when a call
    // reaches it. The same rule with and without the prefilter, so that
    // it cannot change an answer.
    let index_of = |facts: &FileFacts, root: tree_sitter::Node<'_>, text: &str| {
        (!facts.candidates.is_empty()
            || !facts.unresolved.is_empty()
            || module_facts::may_replace_forward(text))
        .then(|| {
            std::sync::Arc::new(module_facts::ModuleFacts::build(
                path,
                root,
                text,
                &options.vocabulary,
                Some(&facts.model),
            ))
        })
    };
    let (mut facts, module, tree) = match &shadow {
        None => {
            let facts = matcher::analyze_with(
                &tree,
                &source.text,
                &options.vocabulary,
                anchored,
                &discovered,
            );
            let module = index_of(&facts, tree.root_node(), &source.text);
            (facts, module, Some(tree))
        }
        Some(shadow) => {
            let shadow_tree = parse_checked(path, &shadow.text)?.tree;
            let mut facts = matcher::analyze_with(
                &shadow_tree,
                &shadow.text,
                &options.vocabulary,
                anchored,
                &discovered,
            );
            let module = index_of(&facts, shadow_tree.root_node(), &shadow.text);
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
    } else if facts.candidates.iter().all(|c| {
        c.owner.is_none()
            && (c.fence != file_facts::FenceState::Unfenced || c.own_evidence().is_some())
    }) {
        // Only the class index could change a decision, and only for
        // protocol methods; only the project index, and only for hooks
        // whose own body shows no offload work: plan now, while the other
        // files are read (and while the tree is at hand to check the
        // rewrite incrementally).
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
    })
}

/// Parses a file the prefilter would not parse but for `fullgraph=`: nothing
/// else in it can matter (a hook, or a class on the way to one, would have
/// made it a candidate), so only the `fullgraph=True` arguments are looked
/// for.
fn fullgraph_only(path: &Path, source: Source) -> Result<Loaded, FileError> {
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
    })
}

/// Reads one file and parses it if `needles` (none: always) says it can
/// matter; `anchored` as in [`matcher::analyze`].
fn visit(
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
            if !scan.needed {
                let class_bases = prefilter::class_base_words(&view.text);
                let defined = Some(prefilter::DefinedNames::of(&view.text));
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

/// Decides, plans and applies the fences for one file, and checks that the
/// result still parses.
/// `tree`, the source's tree if it is still at hand, makes that check an
/// incremental parse.
fn finish(
    path: PathBuf,
    source: Source,
    mut facts: FileFacts,
    index: &ClassIndex,
    project: Option<&project::ProjectIndex<'_>>,
    options: &Options,
    tree: Option<&tree_sitter::Tree>,
) -> Result<FileReport, FileError> {
    let chain = |c: &file_facts::Candidate| {
        project.and_then(|p| p.chain_from(&path, c.at.line, c.at.column))
    };
    let mut sites: Vec<HookSite> = std::mem::take(&mut facts.candidates)
        .into_iter()
        .filter_map(|c| {
            verdict::decide(
                c,
                index,
                options.all_hooks,
                &options.vocabulary,
                &path,
                chain,
            )
        })
        .collect();
    let to_fence: Vec<usize> = (0..sites.len())
        .filter(|&i| matches!(sites[i].status, Status::Unfenced { .. }))
        .collect();
    let fenced: Vec<&file_facts::Candidate> =
        to_fence.iter().map(|&i| &sites[i].candidate).collect();
    let decorate =
        || plan::Spelling::decorate(&facts, &source.text, &options.vocabulary.decorator, &fenced);
    let (spelling, helper) = match options.strategy {
        plan::Strategy::Decorate => (decorate(), None),
        plan::Strategy::Wrap if to_fence.is_empty() => (decorate(), None),
        plan::Strategy::Wrap => {
            let helper = wrap::Helper::for_file(
                &path,
                options.helper_module.as_deref(),
                facts.uses_relative_imports,
            )
            .map_err(|what| FileError::Helper {
                path: path.clone(),
                what,
            })?;
            let line = helper.import_line(&path, facts.uses_relative_imports);
            (plan::Spelling::wrap(&facts, line), Some(helper))
        }
    };
    let fixes = {
        let targets: Vec<&HookSite> = to_fence.iter().map(|&i| &sites[i]).collect();
        plan::plan(&source.text, &targets, &spelling)
    };
    for (&i, fix) in to_fence.iter().zip(fixes) {
        sites[i].fix = Some(fix);
    }
    let used: Vec<usize> = sites
        .iter()
        .filter_map(|s| match s.status {
            Status::Suppressed { line, .. } => Some(line),
            _ => None,
        })
        .collect();
    let unresolved = facts
        .unresolved
        .into_iter()
        .filter(|u| !options.discovered.resolves(&path, u.at.line, u.at.column))
        .collect();
    let mut report = FileReport {
        path,
        source,
        sites,
        unresolved,
        new_text: None,
        conflicts: Vec::new(),
        helper,
        fullgraph: facts.fullgraph,
        unused_suppressions: facts
            .suppressions
            .into_iter()
            .filter(|line| !used.contains(line))
            .collect(),
    };
    let (new_text, conflicts) = report.rewrite_reusing(|_| true, &[], tree)?;
    report.new_text = new_text;
    report.conflicts = conflicts;
    Ok(report)
}

impl FileReport {
    /// The file with the fixes of the sites `accept` keeps applied, checked to
    /// parse, and the qualnames of fixes skipped for overlapping; `None` when
    /// nothing changes.
    pub fn rewrite(
        &self,
        accept: impl Fn(&HookSite) -> bool,
    ) -> Result<(Option<String>, Vec<String>), FileError> {
        self.rewrite_with(accept, &[])
    }

    /// [`FileReport::rewrite`], with `extra` fixes applied after the chosen
    /// ones (so that at one offset their edits come last).
    pub fn rewrite_with(
        &self,
        accept: impl Fn(&HookSite) -> bool,
        extra: &[edit::Fix],
    ) -> Result<(Option<String>, Vec<String>), FileError> {
        self.rewrite_reusing(accept, extra, None)
    }

    /// [`FileReport::rewrite_with`]; the check that the result parses reuses
    /// `tree`, the original text's tree, where there is one.
    fn rewrite_reusing(
        &self,
        accept: impl Fn(&HookSite) -> bool,
        extra: &[edit::Fix],
        tree: Option<&tree_sitter::Tree>,
    ) -> Result<(Option<String>, Vec<String>), FileError> {
        let chosen: Vec<&HookSite> = self
            .sites
            .iter()
            .filter(|s| s.fix.is_some() && accept(s))
            .collect();
        let mut fixes: Vec<edit::Fix> = chosen.iter().filter_map(|s| s.fix.clone()).collect();
        fixes.extend_from_slice(extra);
        let applied = edit::apply(&self.source.text, &fixes);
        let conflicts = applied
            .skipped
            .iter()
            .filter_map(|&i| chosen.get(i).map(|s| s.candidate.qualname.clone()))
            .collect();
        if applied.text == self.source.text {
            return Ok((None, conflicts));
        }
        let reparsed = match tree {
            Some(tree) => parse::reparse(tree, &self.source.text, &applied.made, &applied.text),
            None => parse::parse(&applied.text),
        };
        let error = match reparsed {
            Some(tree) => parse::first_error(&tree, &applied.text).or_else(|| {
                // What CPython rejects and tree-sitter accepts.
                pyrules::check_rewrite(&self.source.text, &applied.made, &applied.text, &tree)
                    .err()
                    .map(|v| {
                        let (line, column) = source::text_position(&applied.text, v.at);
                        (
                            Position { line, column },
                            format!("CPython would reject it: {}", v.what),
                        )
                    })
            }),
            None => Some((
                Position { line: 1, column: 1 },
                "the parser gave up".to_owned(),
            )),
        };
        if let Some((at, what)) = error {
            return Err(FileError::RewriteInvalid {
                path: self.path.clone(),
                at,
                what,
            });
        }
        Ok((Some(applied.text), conflicts))
    }
}

/// The helper modules the wrap strategy needs and that do not exist yet, in
/// the line ending of the first file that uses each.
fn helpers_to_create(files: &[FileReport]) -> Vec<NewFile> {
    let mut created: Vec<NewFile> = Vec::new();
    for file in files {
        let (Some(helper), Some(_)) = (&file.helper, &file.new_text) else {
            continue;
        };
        if helper.exists || created.iter().any(|c| c.path == helper.path) {
            continue;
        }
        let ending = source::line_ending_at(&file.source.text, 0);
        created.push(NewFile {
            path: helper.path.clone(),
            text: wrap::helper_source(ending),
        });
    }
    created.sort_by(|a, b| a.path.cmp(&b.path));
    created
}

/// Runs discovery, matching and planning over `paths`. Reads files; writes
/// nothing. The result does not depend on `options.prefilter` nor on the
/// number of threads.
pub fn analyze(paths: &[PathBuf], options: &Options) -> Analysis {
    let options = with_project_context(paths, &confined(paths, options));
    let mut analysis = analyze_rounds(paths, &options).0;
    report_read_on_demand(&mut analysis, &options);
    analysis
}

pub use confine::project_root_of;

/// `options` with a fresh cache of the modules read on demand, confined to
/// the roots of `paths` (see [`confine`]).
fn confined(paths: &[PathBuf], options: &Options) -> Options {
    let roots = confine::roots_of(paths, options.project_root.as_deref());
    Options {
        module_cache: std::sync::Arc::new(project::ModuleCache::confined(
            confine::Confinement::new(&roots, options.selection.clone()),
        )),
        ..options.clone()
    }
}

/// Adds the errors of the modules read on demand to `analysis`, each file
/// once and none already reported.
fn report_read_on_demand(analysis: &mut Analysis, options: &Options) {
    let reported: std::collections::HashSet<PathBuf> = analysis
        .errors
        .iter()
        .map(|e| found::identity(e.path()))
        .collect();
    let analysed: std::collections::HashSet<PathBuf> = analysis
        .files
        .iter()
        .map(|f| found::identity(&f.path))
        .collect();
    for err in options.module_cache.take_errors() {
        let id = found::identity(err.path());
        if !reported.contains(&id) && !analysed.contains(&id) {
            analysis.errors.push(err);
        }
    }
    analysis.errors.sort_by(|a, b| a.path().cmp(b.path()));
}

/// `options` with what the rest of the project tells about hooks in
/// `paths`: the hooks found by use and the classes, when `paths` do not
/// cover their whole project (pre-commit's changed files, `--files-from`,
/// stdin with `--stdin-filename`). Only `paths` are reported and rewritten.
fn with_project_context(paths: &[PathBuf], options: &Options) -> Options {
    let mut roots: Vec<PathBuf> = Vec::new();
    for path in paths {
        let root = match &options.project_root {
            Some(root) => Some(root.clone()),
            None => project_root_of(path),
        };
        if let Some(root) = root
            && !roots.contains(&root)
        {
            roots.push(root);
        }
    }
    let covered = |root: &PathBuf| {
        paths.iter().any(|p| {
            std::path::absolute(p).ok().as_ref() == Some(root)
                || std::fs::canonicalize(p).ok() == std::fs::canonicalize(root).ok()
        })
    };
    roots.retain(|root| !covered(root));
    if roots.is_empty() {
        return options.clone();
    }
    // Walked as the user would name them, so that places found there read
    // like the given paths (`pkg/x.py`, not an absolute path).
    if let Ok(cwd) = std::env::current_dir() {
        for root in &mut roots {
            if let Some(relative) = pathdiff::diff_paths(&*root, &cwd) {
                *root = if relative.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    relative
                };
            }
        }
    }
    let context = Options {
        progress: None,
        ..options.clone()
    };
    let (_, discovered, classes) = analyze_rounds(&roots, &context);
    let mut options = options.clone();
    if !discovered.is_empty() {
        options.vocabulary = std::sync::Arc::new(options.vocabulary.with_discovered(&discovered));
    }
    options.discovered = std::sync::Arc::new(discovered);
    options.context_classes = std::sync::Arc::new(classes);
    options
}

/// Rounds of [`analyze_once`] until the hooks found by use are all known:
/// they can lie in files the first round did not parse, or be methods the
/// vocabulary did not name. Returns the analysis, what was found by use and
/// the classes of every parsed file.
///
/// A later round does not start over: a file's facts depend on the
/// vocabulary only through the names it spells, so only the files that
/// spell a name the round added (or hold a function newly found by use)
/// are read again; every other file keeps what the earlier round found.
fn analyze_rounds(
    paths: &[PathBuf],
    options: &Options,
) -> (Analysis, found::Discovered, Vec<file_facts::ClassFact>) {
    const MOST_ROUNDS: usize = 4;
    let mut options = options.clone();
    let mut round = 1;
    let mut carry: Option<Carry> = None;
    loop {
        let ended = analyze_once(paths, &options, round < MOST_ROUNDS, carry.take());
        let (found, earlier) = match ended {
            Round::Ended(analysis, found, classes) => {
                let mut discovered = (*options.discovered).clone();
                discovered.merge(found);
                return (analysis, discovered, classes);
            }
            Round::Again(found, earlier) => (found, earlier),
        };
        let mut discovered = (*options.discovered).clone();
        discovered.merge(found);
        let vocabulary = options.vocabulary.with_discovered(&discovered);
        let added: BTreeSet<prefilter::Needle> = vocabulary
            .needles
            .iter()
            .filter(|n| !options.vocabulary.needles.contains(n))
            .cloned()
            .collect();
        carry = Some(Carry {
            added: added.into_iter().collect(),
            discovered: std::sync::Arc::clone(&options.discovered),
            ..earlier
        });
        options.vocabulary = std::sync::Arc::new(vocabulary);
        options.discovered = std::sync::Arc::new(discovered);
        round += 1;
    }
}

/// What one round of [`analyze_once`] hands the next.
struct Carry {
    loaded: Vec<Loaded>,
    pending: Vec<Pending>,
    errors: Vec<FileError>,
    scanned: usize,
    /// The class names already searched for (see [`analyze_once`]).
    searched: BTreeSet<String>,
    /// The needles the new round's vocabulary adds.
    added: Vec<prefilter::Needle>,
    /// What was found by use when the earlier round ran.
    discovered: std::sync::Arc<found::Discovered>,
}

/// How a round of [`analyze_once`] ended.
enum Round {
    /// The analysis, what was found by use, and the classes of every parsed
    /// file.
    Ended(Analysis, found::Discovered, Vec<file_facts::ClassFact>),
    /// Hooks were found by use that the round's vocabulary did not know: what
    /// was found, and what the next round can keep.
    Again(found::Discovered, Carry),
}

/// Whether the file at `path` must be read again in a round that adds the
/// needles `added`, where what was found by use changed for the files
/// `changed` (functions found in them, registrations of theirs now
/// followed): it spells one of the added names where its query could match
/// it, or is one of those files. A file that cannot be
/// read now is read again (and fails then).
fn read_again(
    path: &Path,
    added: Option<&prefilter::Needles>,
    changed: &std::collections::HashSet<PathBuf>,
) -> bool {
    if !changed.is_empty() && changed.contains(&found::identity(path)) {
        return true;
    }
    let Some(added) = added else {
        return false;
    };
    READ_BUFFER.with_borrow_mut(|buffer| match read_into(path, buffer) {
        Ok(raw) => match Source::view(raw) {
            Ok(view) => added.scan(&view.text).needed,
            Err(_) => true,
        },
        Err(_) => true,
    })
}

/// One round of [`analyze`]. With `may_repeat`, a round that finds hooks by
/// use that `options` did not know stops before planning (the next round
/// plans).
fn analyze_once(
    paths: &[PathBuf],
    options: &Options,
    may_repeat: bool,
    carry: Option<Carry>,
) -> Round {
    let vocabulary = &options.vocabulary;
    let progress = options.progress.as_ref();
    // The queries compile in the background from the start, so the first
    // file that needs them seldom waits, and a run where none does never
    // waits for them.
    let background = std::sync::Arc::clone(vocabulary);
    rayon::spawn(move || {
        background.compiled();
    });
    rayon::spawn(|| {
        std::sync::LazyLock::force(&queries::QUERIES);
    });
    let mut loaded: Vec<Loaded> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut errors: Vec<FileError>;
    let scanned;
    let mut searched: BTreeSet<String>;
    match carry {
        None => {
            // The names already searched as class names: a needle searched
            // only in another shape (a hook method after `def`) is not, so a
            // class named `post_forward` is still followed.
            searched = vocabulary
                .needles
                .iter()
                .filter(|n| {
                    matches!(
                        n.context,
                        prefilter::Context::Word | prefilter::Context::Anywhere
                    )
                })
                .map(|n| n.name.clone())
                .collect();
            let first_needles = options
                .prefilter
                .then(|| prefilter::Needles::new(vocabulary.needles.iter().cloned()));
            // The first round: every file is read (and parsed if it names a
            // hook) as the walk finds it.
            let visited;
            (visited, errors) = discover::visit_all(
                paths,
                &options.selection,
                rayon::current_num_threads(),
                |path| {
                    let pending = Pending {
                        path: path.to_path_buf(),
                        fullgraph: None,
                        class_bases: None,
                        defined: None,
                    };
                    let outcome =
                        visit(pending, first_needles.as_ref(), options, options.prefilter);
                    if let Some(bar) = progress {
                        advance(bar);
                    }
                    outcome
                },
            );
            scanned = visited.len();
            for (_, outcome) in visited {
                match outcome {
                    Outcome::Parsed(file) => loaded.push(*file),
                    Outcome::NotYet(p) => pending.push(p),
                    Outcome::Failed(err) => errors.push(err),
                }
            }
        }
        Some(carry) => {
            // A later round: the parsed files that spell an added name are
            // parsed again with the new vocabulary, the others are kept; the
            // files not parsed yet are searched for the added names only.
            errors = carry.errors;
            scanned = carry.scanned;
            searched = carry.searched;
            searched.extend(
                carry
                    .added
                    .iter()
                    .filter(|n| {
                        matches!(
                            n.context,
                            prefilter::Context::Word | prefilter::Context::Anywhere
                        )
                    })
                    .map(|n| n.name.clone()),
            );
            let changed = options.discovered.files_changed_since(&carry.discovered);
            let added = (!carry.added.is_empty())
                .then(|| prefilter::Needles::new(carry.added.iter().cloned()));
            let outcomes: Vec<Outcome> = carry
                .loaded
                .into_par_iter()
                .map(|file| {
                    // A file read only for its `fullgraph=True` note (no
                    // module facts) is searched like one not parsed yet.
                    let again = read_again(&file.path, added.as_ref(), &changed);
                    if !again {
                        return Outcome::Parsed(Box::new(file));
                    }
                    let pending = Pending {
                        path: file.path,
                        fullgraph: None,
                        class_bases: None,
                        defined: None,
                    };
                    visit(pending, None, options, options.prefilter)
                })
                .chain(carry.pending.into_par_iter().map(|p| {
                    if !changed.is_empty() && changed.contains(&found::identity(&p.path)) {
                        // It holds a function newly found by use: parsed outright.
                        return visit(p, None, options, true);
                    }
                    match &added {
                        // Read again only if it can hold an added name.
                        Some(_)
                            if p.defined
                                .as_ref()
                                .is_some_and(|d| !d.may_hold(&carry.added)) =>
                        {
                            Outcome::NotYet(p)
                        }
                        Some(needles) => visit(p, Some(needles), options, true),
                        None => Outcome::NotYet(p),
                    }
                }))
                .collect();
            for outcome in outcomes {
                match outcome {
                    Outcome::Parsed(file) => loaded.push(*file),
                    Outcome::NotYet(p) => pending.push(p),
                    Outcome::Failed(err) => errors.push(err),
                }
            }
        }
    }
    let mut sort = |outcome, loaded: &mut Vec<Loaded>, pending: &mut Vec<Pending>| match outcome {
        Outcome::Parsed(file) => loaded.push(*file),
        Outcome::NotYet(p) => pending.push(p),
        Outcome::Failed(err) => errors.push(err),
    };

    // Later rounds: the names of classes found to derive from a protocol
    // base, until none is new.
    while options.prefilter && !pending.is_empty() {
        let names: BTreeSet<String> = verdict::hook_class_names(
            loaded.iter().flat_map(|l| l.classes.iter()),
            &vocabulary.protocol_bases,
        )
        .into_iter()
        .filter(|n| !searched.contains(n))
        .collect();
        if names.is_empty() {
            break;
        }
        let needles = prefilter::Needles::new(names.iter().map(prefilter::Needle::word));
        // A file is read again only when the cheap reading of its class
        // statements could not bound their bases, or when one of those
        // bases is a newly found hook class (then it is parsed outright).
        let (visit_now, keep): (Vec<Pending>, Vec<Pending>) =
            pending.into_iter().partition(|p| match &p.class_bases {
                Some(bases) => bases.iter().any(|b| names.contains(b)),
                None => true,
            });
        let outcomes: Vec<Outcome> = visit_now
            .into_par_iter()
            .map(|p| {
                let needles = Some(&needles).filter(|_| p.class_bases.is_none());
                visit(p, needles, options, true)
            })
            .collect();
        pending = keep;
        for outcome in outcomes {
            sort(outcome, &mut loaded, &mut pending);
        }
        searched.extend(names);
    }

    // `fullgraph=True` only matters where there are hooks.
    if loaded.iter().any(|l| l.has_candidates) {
        let mut rest = Vec::new();
        for mut p in pending {
            match p.fullgraph.take().map(|found| *found) {
                Some(Ok(file)) => loaded.push(file),
                Some(Err(err)) => errors.push(err),
                None => rest.push(p),
            }
        }
        pending = rest;
    }

    let concluded = conclude(loaded, errors, scanned, options, may_repeat);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    match concluded {
        Concluded::Ended(analysis, found, classes) => Round::Ended(analysis, found, classes),
        Concluded::Again(found, loaded, errors) => Round::Again(
            found,
            Carry {
                loaded,
                pending,
                errors,
                scanned,
                searched,
                added: Vec::new(),
                discovered: std::sync::Arc::clone(&options.discovered),
            },
        ),
    }
}

/// How [`conclude`] ended.
enum Concluded {
    Ended(Analysis, found::Discovered, Vec<file_facts::ClassFact>),
    /// Found by use, with the files and errors handed back for the next round.
    Again(found::Discovered, Vec<Loaded>, Vec<FileError>),
}

/// One more file read; the bar appears once the run has taken a second.
fn advance(bar: &indicatif::ProgressBar) {
    bar.inc(1);
    if bar.is_hidden() && bar.elapsed() > std::time::Duration::from_secs(1) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }
}

/// Builds the class index from every parsed file (in path order, whatever
/// the prefilter rounds were), then decides and plans each file with hooks.
fn conclude(
    mut loaded: Vec<Loaded>,
    mut errors: Vec<FileError>,
    scanned: usize,
    options: &Options,
    may_repeat: bool,
) -> Concluded {
    loaded.sort_by(|a, b| a.path.cmp(&b.path));
    let mut index = ClassIndex::default();
    index.add(&options.context_classes);
    for file in &loaded {
        index.add(&file.classes);
    }
    let classes: Vec<file_facts::ClassFact> = loaded
        .iter()
        .flat_map(|l| l.classes.iter().cloned())
        .collect();
    let project = project::ProjectIndex::new(
        loaded.iter().filter_map(|l| l.module.clone()).collect(),
        &options.vocabulary,
        std::sync::Arc::clone(&options.module_cache),
    );
    // The register calls the matcher could not follow, for the index to try.
    let mut unresolved = std::collections::HashSet::new();
    for file in &loaded {
        let at: Vec<&file_facts::Unresolved> = match &file.work {
            Work::Waiting(work) => work.1.unresolved.iter().collect(),
            Work::Done(report) => match report.as_ref() {
                Ok(report) => report.unresolved.iter().collect(),
                Err(_) => Vec::new(),
            },
            Work::Nothing => Vec::new(),
        };
        if !at.is_empty() {
            let path = found::identity(&file.path);
            unresolved.extend(
                at.into_iter()
                    .map(|u| (path.clone(), u.at.line, u.at.column)),
            );
        }
    }
    let discovered = project.discover(&unresolved);
    if may_repeat && options.discovered.adds_to(&discovered) {
        drop(project);
        return Concluded::Again(discovered, loaded, errors);
    }
    let mut finished: Vec<Result<FileReport, FileError>> = Vec::new();
    let mut waiting: Vec<(PathBuf, Source, FileFacts)> = Vec::new();
    for file in loaded {
        match file.work {
            Work::Nothing => {}
            Work::Waiting(work) => {
                let (source, facts) = *work;
                waiting.push((file.path, source, facts));
            }
            Work::Done(report) => finished.push(*report),
        }
    }
    // Largest first, so a big file does not finish alone at the end.
    waiting.sort_by_key(|(_, source, _)| std::cmp::Reverse(source.text.len()));
    finished.par_extend(waiting.into_par_iter().map(|(path, source, facts)| {
        finish(path, source, facts, &index, Some(&project), options, None)
    }));
    let mut reports = Vec::new();
    for result in finished {
        match result {
            Ok(report)
                if !report.sites.is_empty()
                    || !report.unresolved.is_empty()
                    || !report.fullgraph.is_empty()
                    || !report.unused_suppressions.is_empty() =>
            {
                reports.push(report)
            }
            Ok(_) => {}
            Err(err) => errors.push(err),
        }
    }
    reports.sort_by(|a, b| a.path.cmp(&b.path));
    errors.sort_by(|a, b| a.path().cmp(b.path()));
    let analysis = Analysis {
        created: helpers_to_create(&reports),
        files: reports,
        errors,
        scanned,
    };
    Concluded::Ended(analysis, discovered, classes)
}

/// Analyzes one file given as bytes (stdin), named `path` in messages. With
/// a real name (`--stdin-filename`), the project around it is read for
/// context as for a named file; as `-`, only its own classes are known.
pub fn analyze_source(path: PathBuf, raw: Vec<u8>, options: &Options) -> Analysis {
    let confined = confined(std::slice::from_ref(&path), options);
    let with_context;
    let options = if path.as_os_str() == "-" {
        &confined
    } else {
        with_context = with_project_context(std::slice::from_ref(&path), &confined);
        &with_context
    };
    let loaded = Source::decode(raw)
        .map_err(|e| FileError::decode(path.clone(), e))
        .and_then(|source| load(&path, source, options, options.prefilter));
    match loaded {
        Ok(file) => {
            let Concluded::Ended(mut analysis, _, _) =
                conclude(vec![file], Vec::new(), 1, options, false)
            else {
                unreachable!("a conclusion that may not repeat ends")
            };
            refuse_missing_helpers(&mut analysis);
            report_read_on_demand(&mut analysis, options);
            analysis
        }
        Err(err) => {
            let mut analysis = Analysis {
                errors: vec![err],
                scanned: 1,
                ..Analysis::default()
            };
            report_read_on_demand(&mut analysis, options);
            analysis
        }
    }
}

/// stdin is never written back, so nothing creates the helper a file read
/// from it would import: such a file is refused (not printed rewritten),
/// unless the helper hookfence generated is already where the import points.
fn refuse_missing_helpers(analysis: &mut Analysis) {
    if analysis.created.is_empty() {
        return;
    }
    let created = std::mem::take(&mut analysis.created);
    let (refused, kept): (Vec<FileReport>, Vec<FileReport>) = std::mem::take(&mut analysis.files)
        .into_iter()
        .partition(|f| {
            f.new_text.is_some()
                && f.helper
                    .as_ref()
                    .is_some_and(|h| created.iter().any(|c| c.path == h.path))
        });
    analysis.files = kept;
    for file in refused {
        let helper = file.helper.as_ref().map_or_else(String::new, |h| {
            format!("{} ({})", h.parts.join("."), h.path.display())
        });
        analysis.errors.push(FileError::Helper {
            what: format!(
                "{}: the helper module {helper} it would import does not exist, and a run on stdin creates no files; run `hookfence --strategy wrap --apply` on the package once, or use --strategy decorate",
                file.path.display()
            ),
            path: file.path,
        });
    }
}

/// Runs hookfence with already parsed settings, printing to the given
/// streams. Returns the exit code.
pub fn run(
    settings: &cli::Settings,
    stdout: &mut dyn std::io::Write,
    stderr: &mut dyn std::io::Write,
) -> std::io::Result<i32> {
    let options = &settings.options;
    let writes = settings.mode == Mode::Apply && settings.stdin_name.is_none();
    if writes {
        interrupt::arm();
        interrupt::test_pause("HOOKFENCE_TEST_PAUSE_IN_ANALYSIS");
    }
    let stdin_raw = match &settings.stdin_name {
        Some(name) => {
            let read = source::read_limited(
                std::io::stdin(),
                source::MAX_SOURCE_BYTES,
                "a Python source",
            );
            match read {
                Ok(raw) => Some(raw),
                Err(err) => {
                    writeln!(stderr, "{}: cannot read stdin: {err}", name.display())?;
                    return Ok(exit::ERROR);
                }
            }
        }
        None => None,
    };
    let work = || match (&settings.stdin_name, &stdin_raw) {
        (Some(name), Some(raw)) => analyze_source(name.clone(), raw.clone(), options),
        _ => analyze(&settings.paths, options),
    };
    let jobs = settings.jobs;
    let mut analysis = match rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .stack_size(parse::WORKER_STACK_BYTES)
        .build()
    {
        Ok(pool) => pool.install(work),
        Err(err) => {
            writeln!(stderr, "hookfence: cannot start {jobs} threads: {err}")?;
            return Ok(exit::ERROR);
        }
    };

    // The test file's place is checked before anything is written: a run
    // that cannot write it writes nothing.
    let pytest_target = match &settings.emit_pytest {
        Some(out) => match guard::check_target(out, &analysis) {
            Ok(target) => Some(target),
            Err(err) => {
                let err_style = render::Style::new(settings.color_stderr);
                writeln!(
                    stderr,
                    "{}",
                    err_style.error(&format!("{err} \u{2014} nothing was written"))
                )?;
                return Ok(exit::ERROR);
            }
        },
        None => None,
    };

    // Checked before any question is asked: every file that may be written.
    if writes && !settings.allow_dirty {
        let touched: Vec<&Path> = analysis
            .files
            .iter()
            .filter(|f| f.new_text.is_some())
            .map(|f| f.path.as_path())
            .collect();
        let unprotected = vcs::unprotected(&touched);
        if !unprotected.is_empty() {
            writeln!(stderr, "hookfence: {}", vcs::refusal(&unprotected))?;
            return Ok(exit::ERROR);
        }
    }

    if let Some(how) = &settings.review
        && let Err(message) = review::review(&mut analysis, how, settings)
    {
        writeln!(stderr, "hookfence: {message}")?;
        return Ok(exit::ERROR);
    }

    let mut written = 0;
    if writes {
        // A signal from here on lets the file being written finish.
        if !interrupt::begin_writes() {
            return Ok(interrupt::EXIT_CODE);
        }
        written = write_all(&mut analysis);
    }
    let interrupted = || writes && interrupt::interrupted();
    if let Some(target) = pytest_target.as_ref().filter(|_| !interrupted()) {
        let out = settings.emit_pytest.as_deref().unwrap_or(Path::new(""));
        let text = guard::pytest_module(&analysis, out);
        if let Err(err) = guard::write_target(target, &text) {
            analysis.errors.push(err);
        }
    }

    let style = render::Style::new(settings.color_stdout);
    let err_style = render::Style::new(settings.color_stderr);
    match settings.format {
        cli::Format::Json | cli::Format::Sarif => {
            let doc = if settings.format == cli::Format::Json {
                report::json(&analysis, settings.mode, options.strategy)
            } else {
                report::sarif(&analysis)
            };
            let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
            writeln!(stdout, "{text}")?;
        }
        cli::Format::Github => {
            for line in report::github(&analysis) {
                writeln!(stdout, "{line}")?;
            }
        }
        cli::Format::Diff => match (settings.mode, &settings.stdin_name) {
            (Mode::List, _) if let Some(target) = &settings.explain => {
                match report::explain(&analysis, target) {
                    Some(lines) => {
                        for line in lines {
                            writeln!(stdout, "{line}")?;
                        }
                    }
                    None => {
                        writeln!(
                            stderr,
                            "hookfence: --explain {target}: no hook site there (`hookfence --list` shows every site)"
                        )?;
                        return Ok(exit::ERROR);
                    }
                }
            }
            (Mode::List, _) => {
                for line in report::list_lines(&analysis) {
                    writeln!(stdout, "{line}")?;
                }
            }
            (Mode::Check, _) => {
                for line in render::unfenced(&analysis) {
                    writeln!(stdout, "{line}")?;
                }
            }
            // stdin: the file itself, rewritten or not, for editors.
            (_, Some(_)) => match analysis.files.first() {
                Some(file) => {
                    let text = file.new_text.as_deref().unwrap_or(&file.source.text);
                    stdout.write_all(&file.source.encode(text))?;
                }
                None => {
                    if analysis.errors.is_empty()
                        && let Some(raw) = &stdin_raw
                    {
                        stdout.write_all(raw)?;
                    }
                }
            },
            (Mode::Diff, None) => render::write_diffs(stdout, &analysis, &style)?,
            (Mode::Apply, None) => {}
        },
    }
    stdout.flush()?;
    // The audit already holds every hook left alone.
    if !settings.quiet && settings.mode != Mode::List {
        for line in render::notes(&analysis) {
            writeln!(stderr, "{line}")?;
        }
    }
    for err in &analysis.errors {
        writeln!(stderr, "{}", err_style.error(&err.report()))?;
    }
    if !settings.quiet || !analysis.errors.is_empty() {
        writeln!(
            stderr,
            "{}",
            render::summary(&analysis, settings.mode, written)
        )?;
    }

    if interrupted() {
        let planned = analysis.created.len()
            + analysis
                .files
                .iter()
                .filter(|f| f.new_text.is_some())
                .count();
        writeln!(
            stderr,
            "hookfence: interrupted: {written} of {planned} files written, every other file left unchanged"
        )?;
        return Ok(interrupt::EXIT_CODE);
    }
    let unfenced = !analysis.created.is_empty()
        || analysis
            .files
            .iter()
            .any(|f| f.new_text.is_some() || !f.conflicts.is_empty());
    Ok(if !analysis.errors.is_empty() {
        exit::ERROR
    } else if settings.mode == Mode::Check && unfenced {
        exit::UNFENCED
    } else {
        exit::SUCCESS
    })
}

/// Writes the helpers, then every rewritten file, each atomically; returns
/// how many files were written and records failures as errors.
fn write_all(analysis: &mut Analysis) -> usize {
    let mut written = 0;
    let mut write_errors = Vec::new();
    // Helpers first: a file is rewritten to import its helper only once
    // the helper exists.
    let mut missing_helpers = Vec::new();
    for created in &analysis.created {
        if interrupt::interrupted() {
            break;
        }
        match write::create_new(&created.path, created.text.as_bytes()) {
            Ok(()) => written += 1,
            Err(err) => {
                missing_helpers.push(created.path.clone());
                write_errors.push(err);
            }
        }
    }
    for file in &analysis.files {
        let Some(text) = &file.new_text else { continue };
        if interrupt::interrupted() {
            break;
        }
        if let Some(helper) = file
            .helper
            .as_ref()
            .filter(|h| missing_helpers.contains(&h.path))
        {
            write_errors.push(FileError::Helper {
                path: file.path.clone(),
                what: format!(
                    "{}: not rewritten, its helper module {} could not be created",
                    file.path.display(),
                    helper.path.display()
                ),
            });
            continue;
        }
        match write::write_atomic(&file.path, &file.source.raw, &file.source.encode(text)) {
            Ok(()) => written += 1,
            Err(err) => write_errors.push(err),
        }
    }
    analysis.errors.extend(write_errors);
    analysis.errors.sort_by(|a, b| a.path().cmp(b.path()));
    written
}
