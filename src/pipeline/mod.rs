//! The pipeline that drives a run's stages over its files: [`analyze`] (the
//! given paths, with what the rest of their project tells) and
//! [`analyze_source`] (one file on stdin). Its parts: [`load`] (one file
//! read and parsed into facts), [`rounds`] (the prefilter's rounds and the
//! decisions once every class is known), [`finish`] (one file decided,
//! planned and checked).

pub mod finish;
pub mod load;
pub mod rounds;

use std::path::PathBuf;

use crate::analysis::project;
use crate::error::FileError;
use crate::options::Options;
use crate::pipeline::load::load;
use crate::pipeline::rounds::{Concluded, analyze_rounds, conclude};
use crate::results::{Analysis, refuse_missing_helpers};
use crate::source::Source;
use crate::{confine, found};

/// Runs discovery, matching and planning over `paths`. Reads files; writes
/// nothing. The result does not depend on `options.prefilter` nor on the
/// number of threads.
pub fn analyze(paths: &[PathBuf], options: &Options) -> Analysis {
    let options = with_project_context(paths, &confined(paths, options));
    let mut analysis = analyze_rounds(paths, &options).0;
    report_read_on_demand(&mut analysis, &options);
    crate::aside::drop_aside(options);
    analysis
}

pub use confine::project_root_of;

/// `options` with a fresh cache of the modules read on demand, confined to
/// the roots of `paths` (see [`confine`]).
pub(crate) fn confined(paths: &[PathBuf], options: &Options) -> Options {
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
pub(crate) fn report_read_on_demand(analysis: &mut Analysis, options: &Options) {
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
pub(crate) fn with_project_context(paths: &[PathBuf], options: &Options) -> Options {
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
    // like the given paths (`pkg/x.py`, not an absolute path; an absolute
    // path where the paths given are absolute).
    let absolute = paths.iter().all(|p| p.is_absolute());
    if !absolute && let Ok(cwd) = std::env::current_dir() {
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
        spelled_from_cwd: true,
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
