//! A whole run as the command line asks for it: analyse, then print the
//! diff, the list or the report, or write the files, with the exit code.

use std::path::Path;

use crate::error::FileError;
use crate::options::Mode;
use crate::pipeline::{analyze, analyze_source};
use crate::results::Analysis;
use crate::{cli, exit, guard, interrupt, parse, render, report, review, source, vcs, write};

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
        let unprotected = match vcs::unprotected(&touched) {
            Ok(unprotected) => unprotected,
            Err(failed) => {
                let err_style = render::Style::new(settings.color_stderr);
                writeln!(
                    stderr,
                    "{}",
                    err_style.error(&format!("{failed} \u{2014} nothing was written"))
                )?;
                return Ok(exit::ERROR);
            }
        };
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

    let mut written = Written::default();
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
        } else if !guard::checks_anything(&analysis) {
            writeln!(
                stderr,
                "hookfence: note: {}: the guard checks nothing (no fenced hook can be imported by name, no helper module)",
                out.display()
            )?;
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
            // Files that hold hooks: a helper module created is none.
            render::summary(&analysis, settings.mode, written.sources)
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
            "hookfence: interrupted: {} of {planned} files written, every other file left unchanged",
            written.helpers + written.sources
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

/// How many files a run wrote.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Written {
    /// The wrap strategy's helper modules created.
    pub helpers: usize,
    /// The sources rewritten: the files that hold the hooks.
    pub sources: usize,
}

/// Writes the helpers, then every rewritten file, each atomically; returns
/// how many files were written and records failures as errors.
pub(crate) fn write_all(analysis: &mut Analysis) -> Written {
    let mut written = Written::default();
    let mut write_errors = Vec::new();
    // Helpers first: a file is rewritten to import its helper only once
    // the helper exists.
    let mut missing_helpers = Vec::new();
    for created in &analysis.created {
        if interrupt::interrupted() {
            break;
        }
        match write::create_new(&created.path, created.text.as_bytes()) {
            Ok(()) => written.helpers += 1,
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
            Ok(()) => written.sources += 1,
            Err(err) => write_errors.push(err),
        }
    }
    analysis.errors.extend(write_errors);
    analysis.errors.sort_by(|a, b| a.path().cmp(b.path()));
    written
}
