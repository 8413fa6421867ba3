//! What an interactive review decides, and the file it saves: the planned
//! fences in review order, one answer each, and the `--decisions` /
//! `--replay` file that records them (matched back to sites by path and
//! qualname), with where such a file may be written.

use std::io::{self};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis::verdict::Status;
use crate::results::Analysis;

/// The version of the decisions file's shape.
pub const DECISIONS_VERSION: u32 = 1;

/// What to do with one planned fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// Write the fence.
    Fence,
    /// Leave the hook unfenced.
    Skip,
    /// Write a `# hookfence: ignore` comment instead of the fence.
    Suppress,
}

/// One saved answer. `line` is informational: replay matches on `path`
/// and `qualname`, so that edits elsewhere in the file do not matter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The file, relative to the working directory, `/`-separated.
    pub path: String,
    pub qualname: String,
    pub line: usize,
    pub answer: Answer,
}

/// The `--decisions` / `--replay` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    pub version: u32,
    pub decisions: Vec<Decision>,
}

impl Decisions {
    pub fn new(decisions: Vec<Decision>) -> Decisions {
        Decisions {
            version: DECISIONS_VERSION,
            decisions,
        }
    }

    /// Reads a decisions file's text. The version is checked first, so a
    /// file from another version is reported as such, whatever its shape.
    pub fn parse(text: &str) -> Result<Decisions, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not a decisions file: {e}"))?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(DECISIONS_VERSION) => {}
            Some(v) => {
                return Err(format!(
                    "unsupported decisions file version {v} (this hookfence reads version {DECISIONS_VERSION})"
                ));
            }
            None => return Err("not a decisions file: no \"version\" number".to_owned()),
        }
        serde_json::from_value(value).map_err(|e| format!("not a decisions file: {e}"))
    }

    /// The file's text: pretty JSON with a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// A planned fence: a site with a fix, by index into `analysis.files` and
/// that file's `sites`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    pub file: usize,
    pub site: usize,
}

/// What the review made of one planned fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Answered(Answer),
    /// Not answered (the review was quit, or replay has no decision): left
    /// unfenced, with this note for the user.
    Unanswered(String),
}

/// The planned fences (unfenced sites with a fix), in path order, then
/// position order.
pub fn planned(analysis: &Analysis) -> Vec<Planned> {
    let mut files: Vec<usize> = (0..analysis.files.len()).collect();
    files.sort_by(|&a, &b| analysis.files[a].path.cmp(&analysis.files[b].path));
    let mut planned = Vec::new();
    for file in files {
        let sites = &analysis.files[file].sites;
        let mut here: Vec<usize> = (0..sites.len())
            .filter(|&i| {
                matches!(sites[i].status, Status::Unfenced { .. }) && sites[i].fix.is_some()
            })
            .collect();
        here.sort_by_key(|&i| sites[i].candidate.at);
        planned.extend(here.into_iter().map(|site| Planned { file, site }));
    }
    planned
}

/// How a decision names a file: relative to the working directory (when
/// given absolute and below it), without `.` components, `/`-separated, so
/// that `hookfence .` and `hookfence pkg` agree.
pub fn path_key(path: &Path) -> String {
    let relative = if path.is_absolute() {
        std::env::current_dir()
            .ok()
            .and_then(|cwd| pathdiff::diff_paths(path, cwd))
            .filter(|p| !p.starts_with(".."))
            .unwrap_or_else(|| path.to_path_buf())
    } else {
        path.to_path_buf()
    };
    let mut parts = Vec::new();
    let mut root = "";
    for component in relative.components() {
        match component {
            Component::CurDir => {}
            Component::RootDir => root = "/",
            Component::Prefix(p) => parts.push(p.as_os_str().to_string_lossy().into_owned()),
            Component::ParentDir => parts.push("..".to_owned()),
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
        }
    }
    format!("{root}{}", parts.join("/"))
}

/// The decisions to save: one per answered planned fence, in review order.
pub fn record(analysis: &Analysis, planned: &[Planned], verdicts: &[Verdict]) -> Decisions {
    let decisions = planned
        .iter()
        .zip(verdicts)
        .filter_map(|(p, verdict)| match verdict {
            Verdict::Answered(answer) => {
                let file = &analysis.files[p.file];
                let site = &file.sites[p.site];
                Some(Decision {
                    path: path_key(&file.path),
                    qualname: site.candidate.qualname.clone(),
                    line: site.candidate.at.line,
                    answer: *answer,
                })
            }
            Verdict::Unanswered(_) => None,
        })
        .collect();
    Decisions::new(decisions)
}

/// The verdicts saved `decisions` give the planned fences. Decisions are
/// matched to sites by (path, qualname), in order when several share them;
/// a decision matching no site at all (fenced or not) is an error, naming
/// `file`. A planned fence without a decision is left unfenced, with a note.
pub fn replay(
    analysis: &Analysis,
    planned: &[Planned],
    decisions: &Decisions,
    file: &Path,
) -> Result<Vec<Verdict>, String> {
    // Every site, in path and position order, by key.
    let mut sites: Vec<(String, String, usize, usize)> = Vec::new();
    for (f, report) in analysis.files.iter().enumerate() {
        let key = path_key(&report.path);
        let mut here: Vec<usize> = (0..report.sites.len()).collect();
        here.sort_by_key(|&i| report.sites[i].candidate.at);
        for s in here {
            sites.push((
                key.clone(),
                report.sites[s].candidate.qualname.clone(),
                f,
                s,
            ));
        }
    }
    sites.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    // The n-th decision for a key goes to the n-th site with that key.
    let mut taken: std::collections::HashMap<(&str, &str), usize> = Default::default();
    let mut by_site: std::collections::HashMap<(usize, usize), Answer> = Default::default();
    for d in &decisions.decisions {
        let n = taken
            .entry((d.path.as_str(), d.qualname.as_str()))
            .or_insert(0);
        let site = sites
            .iter()
            .filter(|(p, q, ..)| *p == d.path && *q == d.qualname)
            .nth(*n);
        *n += 1;
        match site {
            Some((.., f, s)) => {
                by_site.insert((*f, *s), d.answer);
            }
            None => {
                return Err(format!(
                    "{}: decision for {} {} matches no hook any more; review again with --interactive",
                    file.display(),
                    d.path,
                    d.qualname
                ));
            }
        }
    }
    Ok(planned
        .iter()
        .map(|p| match by_site.get(&(p.file, p.site)) {
            Some(answer) => Verdict::Answered(*answer),
            None => Verdict::Unanswered(format!(
                "no decision recorded for {} in {}; left unfenced",
                analysis.files[p.file].sites[p.site].candidate.qualname,
                file.display()
            )),
        })
        .collect())
}

/// The most bytes read from a `--replay` file: a few hundred thousand
/// answers, and `--replay /dev/zero` stops at once.
pub const MAX_DECISIONS_BYTES: u64 = 64 * crate::source::MIB;

/// Where `--decisions PATH` will save the answers, as found when it was
/// checked: the same rule is asked again at the moment of writing
/// ([`save_decisions`]), so nothing that appears there meanwhile is replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveAt {
    /// Nothing was there: only a new file is made.
    New(PathBuf),
    /// A decisions file saved before, with the bytes it held: replaced only
    /// while it is still that regular file with those bytes.
    Saved { path: PathBuf, bytes: Vec<u8> },
}

/// Whether `--decisions PATH` may write `path`: nothing is there, or a
/// decisions file (of any version) saved before. Anything else (a source
/// file, a directory, a symlink, the user's notes) is refused, never
/// overwritten.
pub fn may_save_decisions_at(path: &Path) -> Result<SaveAt, String> {
    let metadata = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(SaveAt::New(path.to_path_buf()));
        }
        Err(e) => {
            return Err(format!(
                "{}: cannot save the decisions there: {e}",
                path.display()
            ));
        }
        Ok(metadata) => metadata,
    };
    let refuse = |why: &str| {
        Err(format!(
            "{}: {why}; --decisions writes only a new file or a decisions file saved before, so it was left as it is",
            path.display()
        ))
    };
    if !metadata.is_file() {
        return refuse("exists and is not a regular file");
    }
    let bytes =
        crate::source::read_file_limited(path, MAX_DECISIONS_BYTES, "a decisions file").ok();
    let saved = bytes
        .as_ref()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .is_some_and(|value| {
            value.get("version").is_some_and(serde_json::Value::is_u64)
                && value
                    .get("decisions")
                    .is_some_and(serde_json::Value::is_array)
        });
    match bytes {
        Some(bytes) if saved => Ok(SaveAt::Saved {
            path: path.to_path_buf(),
            bytes,
        }),
        _ => refuse("exists and is not a hookfence decisions file"),
    }
}

/// Saves the answers where [`may_save_decisions_at`] allowed, asking its rule
/// again now: a file or link that appeared at a path that was free, or a
/// saved file replaced or edited meanwhile, is left as it is (an error).
pub fn save_decisions(at: &SaveAt, text: &str) -> Result<(), String> {
    let path = match at {
        SaveAt::New(path) | SaveAt::Saved { path, .. } => path,
    };
    let changed = || {
        format!(
            "{}: changed while the questions were answered; --decisions writes only a new file or a decisions file saved before, so it was left as it is",
            path.display()
        )
    };
    let now = may_save_decisions_at(path).map_err(|_| changed())?;
    if now != *at {
        return Err(changed());
    }
    crate::interrupt::critical(|| match at {
        SaveAt::New(path) => crate::write::create_new(path, text.as_bytes()),
        SaveAt::Saved { path, bytes } => {
            crate::write::replace_unchanged(path, bytes, text.as_bytes())
        }
    })
    .map_err(|e| match e {
        crate::error::FileError::ChangedOnDisk { .. } => changed(),
        e => format!("cannot save the decisions: {e}"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn decisions_round_trip_and_reject_other_versions() {
        let decisions = Decisions::new(vec![Decision {
            path: "pkg/hooks.py".into(),
            qualname: "_offload".into(),
            line: 13,
            answer: Answer::Suppress,
        }]);
        let text = decisions.to_json();
        assert!(text.contains("\"answer\": \"suppress\""), "{text}");
        assert_eq!(Decisions::parse(&text), Ok(decisions));
        let err = Decisions::parse(r#"{"version": 2, "whatever": []}"#).unwrap_err();
        assert!(err.contains("version 2"), "{err}");
        assert!(Decisions::parse("not json").is_err());
        assert!(Decisions::parse(r#"{"decisions": []}"#).is_err());
        let err = Decisions::parse(
            r#"{"version": 1, "decisions": [{"path": "a", "qualname": "b", "line": 1, "answer": "maybe"}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("maybe"), "{err}");
    }

    #[test]
    fn path_keys_ignore_dot_components() {
        assert_eq!(path_key(Path::new("./pkg/./a.py")), "pkg/a.py");
        assert_eq!(path_key(Path::new("pkg/a.py")), "pkg/a.py");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(path_key(&cwd.join("pkg/a.py")), "pkg/a.py");
    }
}
