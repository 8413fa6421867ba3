//! A file's hooks decided, planned and applied in memory, with the result
//! checked to parse.

use std::path::PathBuf;

use crate::analysis::file_facts::FileFacts;
use crate::analysis::verdict::{ClassIndex, HookSite, Status};
use crate::analysis::{file_facts, project, verdict};
use crate::error::FileError;
use crate::options::Options;
use crate::results::FileReport;
use crate::source::Source;
use crate::{plan, wrap};

/// Decides, plans and applies the fences for one file, and checks that the
/// result still parses.
/// `tree`, the source's tree if it is still at hand, makes that check an
/// incremental parse.
pub(crate) fn finish(
    path: PathBuf,
    source: Source,
    mut facts: FileFacts,
    index: &ClassIndex,
    project: Option<&project::ProjectIndex<'_>>,
    options: &Options,
    tree: Option<&tree_sitter::Tree>,
) -> Result<FileReport, FileError> {
    let judge = |c: &file_facts::Candidate| {
        project.and_then(|p| match c.autograd_registrar() {
            Some(registrar) => p.judge_tensor_hook(&path, c.at.line, c.at.column, registrar),
            None => p.judge_hook(&path, c.at.line, c.at.column),
        })
    };
    let mut candidates = std::mem::take(&mut facts.candidates);
    // A decorator another module of the project defines as a fence fences
    // the function, as one the file defines does.
    if let Some((project, module)) = project.and_then(|p| Some((p, p.module(&path)?))) {
        for candidate in &mut candidates {
            let found = candidate
                .imported_decorators
                .iter()
                .find_map(|(callee, how)| Some((project.imported_fence(&module, callee)?, how)));
            if let Some((path, how)) = found {
                candidate.fence = file_facts::FenceState::Fenced {
                    how: how.clone(),
                    by: crate::analysis::matcher::for_decorator(
                        file_facts::FencedBy::Wrapper { path, local: false },
                        how,
                    ),
                };
            }
        }
    }
    let mut sites: Vec<HookSite> = candidates
        .into_iter()
        .filter_map(|c| {
            verdict::decide(
                c,
                index,
                options.all_hooks,
                &options.vocabulary,
                &path,
                judge,
            )
        })
        .collect();
    // A hook whose offload work runs in functions fenced already: where it
    // calls them.
    if let Some(project) = project {
        for site in &mut sites {
            if site.fenced_callees().next().is_some() {
                let at = site.candidate.at;
                site.fenced_calls = project.fenced_calls(&path, at.line, at.column);
            }
        }
    }
    // A hook that replays registered hooks none of which does offload work
    // says so.
    if let Some(project) = project {
        for site in &mut sites {
            if site.status != Status::NotOffload {
                continue;
            }
            let at = site.candidate.at;
            for table in project.replayed_tables(&path, at.line, at.column) {
                site.discounted.push(format!(
                    "replays registered hooks from {table}: none the project registers there does offload work"
                ));
            }
        }
    }
    // A hook found only by use through entry points that are all fenced (or
    // that the run fences) runs eagerly already: covered, no fence. A
    // protocol method through the dispatchers that call it on hook objects;
    // a function on the evidence chains of steps through those steps.
    if let Some(project) = project {
        for site in &mut sites {
            let Status::Unfenced { evidence } = &site.status else {
                continue;
            };
            let how = site.discovered_by.first().map(|f| f.how);
            if site.discovered_by.iter().any(|f| Some(f.how) != how) {
                continue;
            }
            let entry = match how {
                Some("dispatch") => {
                    let method = site.candidate.qualname.rsplit('.').next().unwrap_or("");
                    project.covering(method, options.reviewed, &options.discovered)
                }
                Some("inside") => {
                    let at = (
                        crate::found::identity(&path),
                        site.candidate.at.line,
                        site.candidate.at.column,
                    );
                    project.covering_inside(&at, options.reviewed, &options.discovered)
                }
                _ => None,
            };
            if let Some(entry) = entry {
                site.status = Status::Covered {
                    evidence: evidence.clone(),
                    entry,
                };
            }
        }
    }
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
