//! What a run found and planned: a [`FileReport`] for each file with hooks
//! (its sites, verdicts and planned edits, and the rewrite they make), the
//! files it could not process, and the helper modules to create.

use std::path::PathBuf;

use crate::analysis::file_facts::Unresolved;
use crate::analysis::verdict::{HookSite, Status};
use crate::error::{FileError, Position};
use crate::source::Source;
use crate::{edit, parse, pyrules, source, wrap};

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
    pub(crate) fn rewrite_reusing(
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
pub(crate) fn helpers_to_create(files: &[FileReport]) -> Vec<NewFile> {
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

/// stdin is never written back, so nothing creates the helper a file read
/// from it would import: such a file is refused (not printed rewritten),
/// unless the helper hookfence generated is already where the import points.
pub(crate) fn refuse_missing_helpers(analysis: &mut Analysis) {
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
