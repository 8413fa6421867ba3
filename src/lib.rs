//! hookfence: find PyTorch offload hooks in a Python tree and fence them from
//! `torch.compile` with `@torch.compiler.disable()`.
//!
//! Stages, one module each: [`discover`] (walk paths) -> [`source`] (bytes,
//! encoding, BOM) -> [`parse`] (tree-sitter) -> [`queries`] (compiled `.scm`)
//! -> [`matcher`] (per-file hook candidates) -> [`resolve`] (cross-file class
//! index, offload decision) -> [`plan`] (edits, pure) -> [`edit`] (apply) ->
//! [`render`] (diff, notes, summary) / [`write`] (atomic).

pub mod cli;
pub mod discover;
pub mod edit;
pub mod error;
pub mod matcher;
pub mod parse;
pub mod plan;
pub mod queries;
pub mod render;
pub mod resolve;
pub mod source;
pub mod write;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{FileError, Position};
use crate::matcher::{FileFacts, Unresolved};
use crate::resolve::{ClassIndex, HookSite, Status};
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
    pub errors: Vec<FileError>,
    /// How many files were read.
    pub scanned: usize,
}

struct Loaded {
    path: PathBuf,
    source: Source,
    facts: FileFacts,
}

/// Reads, decodes, parses and matches one file.
fn load(path: &Path) -> Result<Loaded, FileError> {
    let raw = std::fs::read(path).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let source = Source::decode(raw).map_err(|e| FileError::decode(path.to_path_buf(), e))?;
    let tree = parse::parse(&source.text).ok_or_else(|| FileError::Syntax {
        path: path.to_path_buf(),
        at: Position { line: 1, column: 1 },
        what: "the parser gave up".to_owned(),
    })?;
    if let Some((at, what)) = parse::first_error(&tree, &source.text) {
        return Err(FileError::Syntax {
            path: path.to_path_buf(),
            at,
            what,
        });
    }
    let facts = matcher::analyze(&tree, &source.text);
    Ok(Loaded {
        path: path.to_path_buf(),
        source,
        facts,
    })
}

/// Decides, plans and applies the fences for one file, and checks that the
/// result still parses.
fn finish(loaded: Loaded, index: &ClassIndex, all_hooks: bool) -> Result<FileReport, FileError> {
    let Loaded {
        path,
        source,
        mut facts,
    } = loaded;
    let sites: Vec<HookSite> = std::mem::take(&mut facts.candidates)
        .into_iter()
        .filter_map(|c| resolve::decide(c, index, all_hooks))
        .collect();
    let to_fence: Vec<&HookSite> = sites
        .iter()
        .filter(|s| matches!(s.status, Status::Unfenced { .. }))
        .collect();
    let fixes = plan::plan(&facts, &source.text, &to_fence);
    let applied = edit::apply(&source.text, &fixes);
    let conflicts = applied
        .skipped
        .iter()
        .map(|&i| to_fence[i].candidate.qualname.clone())
        .collect();
    let new_text = (applied.text != source.text).then_some(applied.text);
    if let Some(text) = &new_text {
        let tree = parse::parse(text);
        let error = match &tree {
            Some(tree) => parse::first_error(tree, text),
            None => Some((
                Position { line: 1, column: 1 },
                "the parser gave up".to_owned(),
            )),
        };
        if let Some((at, what)) = error {
            return Err(FileError::RewriteInvalid { path, at, what });
        }
    }
    Ok(FileReport {
        path,
        source,
        sites,
        unresolved: facts.unresolved,
        new_text,
        conflicts,
    })
}

/// Runs discovery, matching and planning over `paths`. Reads files; writes
/// nothing.
pub fn analyze(paths: &[PathBuf], all_hooks: bool) -> Analysis {
    let (files, mut errors) = discover::discover(paths);
    let results: Vec<Result<Loaded, FileError>> = files.par_iter().map(|p| load(p)).collect();
    let scanned = results.len();

    let mut index = ClassIndex::default();
    let mut interesting = Vec::new();
    for result in results {
        match result {
            Ok(loaded) => {
                index.add(&loaded.facts.classes);
                if !loaded.facts.candidates.is_empty() || !loaded.facts.unresolved.is_empty() {
                    interesting.push(loaded);
                }
            }
            Err(err) => errors.push(err),
        }
    }

    let finished: Vec<Result<FileReport, FileError>> = interesting
        .into_par_iter()
        .map(|loaded| finish(loaded, &index, all_hooks))
        .collect();
    let mut reports = Vec::new();
    for result in finished {
        match result {
            Ok(report) if !report.sites.is_empty() || !report.unresolved.is_empty() => {
                reports.push(report)
            }
            Ok(_) => {}
            Err(err) => errors.push(err),
        }
    }
    reports.sort_by(|a, b| a.path.cmp(&b.path));
    errors.sort_by(|a, b| a.path().cmp(b.path()));
    Analysis {
        files: reports,
        errors,
        scanned,
    }
}

/// Runs hookfence with already parsed settings, printing to the given
/// streams. Returns the exit code.
pub fn run(
    settings: &cli::Settings,
    stdout: &mut dyn std::io::Write,
    stderr: &mut dyn std::io::Write,
) -> std::io::Result<i32> {
    if let Some(jobs) = settings.jobs {
        // Only the first call in a process takes effect; later ones (tests
        // running in one process) keep the pool they have.
        let _ = rayon::ThreadPoolBuilder::new()
            .num_threads(jobs)
            .build_global();
    }
    let mut analysis = analyze(&settings.paths, settings.all_hooks);

    let mut written = 0;
    if settings.mode == Mode::Apply {
        let mut write_errors = Vec::new();
        for file in &analysis.files {
            if let Some(text) = &file.new_text {
                match write::write_atomic(&file.path, &file.source.raw, &file.source.encode(text)) {
                    Ok(()) => written += 1,
                    Err(err) => write_errors.push(err),
                }
            }
        }
        analysis.errors.extend(write_errors);
        analysis.errors.sort_by(|a, b| a.path().cmp(b.path()));
    }

    let style = render::Style::new(settings.color_stdout);
    let err_style = render::Style::new(settings.color_stderr);
    match settings.mode {
        Mode::Diff => {
            for file in &analysis.files {
                render::write_diff(stdout, file, &style)?;
            }
        }
        Mode::Check => {
            for line in render::unfenced(&analysis) {
                writeln!(stdout, "{line}")?;
            }
        }
        Mode::Apply => {}
    }
    stdout.flush()?;
    if !settings.quiet {
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

    let unfenced = analysis
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
