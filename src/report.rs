//! Reports for people and scripts beyond the diff: the `--list` audit, and
//! `--format json`, `sarif` and `github`.

use serde_json::{Value, json};

use crate::analysis::verdict::{HookSite, Status};
use crate::options::Mode;
use crate::plan::Strategy;
use crate::results::{Analysis, FileReport};

/// The version of the JSON document's shape; bumped on incompatible change.
pub const JSON_VERSION: u32 = 1;

/// The reason `--list` and the JSON give for a site's status.
fn reason(site: &HookSite) -> String {
    let why = &site.why_hook;
    match &site.status {
        Status::Unfenced { evidence } => format!("{evidence}; {why}"),
        Status::Fenced(how) => format!("fenced by {how}; {why}"),
        Status::NotOffload => format!("{}; {why}", site.not_offload_reason()),
        Status::OptedOut { line } => {
            format!("commented-out disable decorator on line {line}; {why}")
        }
        Status::Suppressed { line, reason } => match reason {
            Some(reason) => format!("hookfence: ignore on line {line} ({reason}); {why}"),
            None => format!("hookfence: ignore on line {line}; {why}"),
        },
        Status::Declined { evidence, .. } => {
            format!("{evidence}; left unfenced in review; {why}")
        }
        Status::Backward { evidence, .. } => {
            format!(
                "{evidence}; {}; {why}",
                crate::analysis::verdict::BACKWARD_NOT_FENCED
            )
        }
        Status::Covered { evidence, entry } => {
            format!("{evidence}; covered: runs only inside {entry}; {why}")
        }
    }
}

/// What fencing a hook changes when its offload work runs in functions
/// fenced already, which it calls on `lines` of its own body: traced, it
/// breaks the graph at each of those calls; fenced, it is one break.
fn fencing_the_hook_as_well(lines: &[usize]) -> String {
    let at = |lines: &[usize]| {
        lines
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match lines {
        [] => "the hook reaches them through other functions: traced, it runs up to them and breaks the graph there; fenced as well, it is one graph break and none of it is traced".to_owned(),
        [line] => format!(
            "the hook calls one of them (line {line}): fenced as well, its one graph break moves to the hook's call and none of the hook is traced (no break saved there)"
        ),
        lines => format!(
            "the hook calls them {} times (lines {}): traced, that is {} graph breaks; fenced as well, it is one (saves {})",
            lines.len(),
            at(lines),
            lines.len(),
            lines.len() - 1
        ),
    }
}

/// One entry of the audit: a hook site or a registration hookfence could
/// not follow.
struct Entry<'a> {
    file: &'a FileReport,
    line: usize,
    column: usize,
    status: &'static str,
    qualname: String,
    reason: String,
    site: Option<&'a HookSite>,
}

fn entries(analysis: &Analysis) -> Vec<Entry<'_>> {
    let mut entries = Vec::new();
    for file in &analysis.files {
        for site in &file.sites {
            entries.push(Entry {
                file,
                line: site.candidate.at.line,
                column: site.candidate.at.column,
                status: site.status.name(),
                qualname: site.candidate.qualname.clone(),
                reason: reason(site),
                site: Some(site),
            });
        }
        for u in &file.unresolved {
            entries.push(Entry {
                file,
                line: u.at.line,
                column: u.at.column,
                status: "unresolved",
                qualname: "-".to_owned(),
                reason: u.what.clone(),
                site: None,
            });
        }
    }
    entries.sort_by(|a, b| {
        (a.file.path.as_path(), a.line, a.column).cmp(&(b.file.path.as_path(), b.line, b.column))
    });
    entries
}

/// `path:line:col  <status>  <qualname>  <reason>`, one per hook site, sorted.
pub fn list_lines(analysis: &Analysis) -> Vec<String> {
    entries(analysis)
        .into_iter()
        .map(|e| {
            format!(
                "{}:{}:{}  {}  {}  {}",
                e.file.path.display(),
                e.line,
                e.column,
                e.status,
                e.qualname,
                e.reason
            )
        })
        .collect()
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Diff => "diff",
        Mode::Apply => "apply",
        Mode::Check => "check",
        Mode::List => "list",
    }
}

/// Counts for the summary, shared by every format.
pub struct Counts {
    pub unfenced: usize,
    pub fenced: usize,
    pub covered: usize,
    pub not_offload: usize,
    pub opted_out: usize,
    pub suppressed: usize,
    pub unresolved: usize,
    pub files_changed: usize,
}

impl Counts {
    pub fn of(analysis: &Analysis) -> Counts {
        let count = |name: &str| -> usize {
            analysis
                .files
                .iter()
                .flat_map(|f| &f.sites)
                .filter(|s| s.status.name() == name)
                .count()
        };
        Counts {
            unfenced: count("unfenced"),
            fenced: count("fenced"),
            covered: count("covered"),
            not_offload: count("not-offload"),
            opted_out: count("opted-out"),
            suppressed: count("suppressed"),
            unresolved: analysis.files.iter().map(|f| f.unresolved.len()).sum(),
            files_changed: analysis
                .files
                .iter()
                .filter(|f| f.new_text.is_some())
                .count()
                + analysis.created.len(),
        }
    }
}

/// The `--format json` document (schema in the README).
pub fn json(analysis: &Analysis, mode: Mode, strategy: Strategy) -> Value {
    let sites: Vec<Value> = entries(analysis)
        .into_iter()
        .map(|e| {
            let source = &e.file.source;
            let (range, edits, kind) = match e.site {
                Some(site) => {
                    let (start, end) = site.candidate.span;
                    let edits: Vec<Value> = site
                        .fix
                        .iter()
                        .flat_map(|f| &f.edits)
                        .map(|edit| {
                            json!({
                                "start": source.file_offset(edit.start),
                                "end": source.file_offset(edit.end),
                                "insert": edit.replacement,
                            })
                        })
                        .collect();
                    let kind = match (&site.candidate.owner, &site.candidate.target) {
                        (_, crate::analysis::file_facts::Target::Lambda { .. }) => "lambda",
                        (Some(_), _) => "method",
                        (None, _) => "function",
                    };
                    (
                        json!([source.file_offset(start), source.file_offset(end)]),
                        edits,
                        kind,
                    )
                }
                None => (Value::Null, Vec::new(), "registration"),
            };
            let mut entry = json!({
                "path": e.file.path.to_string_lossy(),
                "line": e.line,
                "column": e.column,
                "byte_range": range,
                "status": e.status,
                "kind": kind,
                "qualname": if e.site.is_some() { Value::from(e.qualname) } else { Value::Null },
                "reason": e.reason,
                "evidence": e.site.map_or(Value::Array(Vec::new()), |s| json!(s.evidence)),
                "discounted": e.site.map_or(Value::Array(Vec::new()), |s| json!(s.discounted)),
                "discovered_by": e.site.map_or(Value::Array(Vec::new()), |s| json!(s.discovered_by)),
                "edits": edits,
            });
            // Where its own body calls functions fenced already (see
            // `--explain`), only for a site whose evidence runs through one.
            if let Some(site) = e.site.filter(|s| s.fenced_callees().next().is_some()) {
                entry["fenced_calls"] = json!(site.fenced_calls);
            }
            entry
        })
        .collect();
    let created: Vec<Value> = analysis
        .created
        .iter()
        .map(|c| json!({"path": c.path.to_string_lossy(), "content": c.text}))
        .collect();
    let errors: Vec<Value> = analysis
        .errors
        .iter()
        .map(|e| json!({"path": e.path().to_string_lossy(), "message": e.to_string()}))
        .collect();
    let counts = Counts::of(analysis);
    json!({
        "version": JSON_VERSION,
        "tool": {"name": "hookfence", "version": env!("CARGO_PKG_VERSION")},
        "mode": mode_name(mode),
        "strategy": match strategy { Strategy::Decorate => "decorate", Strategy::Wrap => "wrap" },
        "sites": sites,
        "created": created,
        "errors": errors,
        "summary": {
            "files_scanned": analysis.scanned,
            "files_changed": counts.files_changed,
            "files_with_errors": analysis.errors.len(),
            "unfenced": counts.unfenced,
            "fenced": counts.fenced,
            "covered": counts.covered,
            "not_offload": counts.not_offload,
            "opted_out": counts.opted_out,
            "suppressed": counts.suppressed,
            "unresolved": counts.unresolved,
        },
    })
}

const RULE_ID: &str = "HF001";
/// The informational rule of a covered hook: nothing to fix.
const COVERED_RULE_ID: &str = "HF002";

/// SARIF 2.1.0, as GitHub code scanning takes it: one result per unfenced
/// offload hook, with its fix, and an informational one (level `none`) per
/// covered hook; files that could not be processed as tool notifications.
pub fn sarif(analysis: &Analysis) -> Value {
    let mut results = Vec::new();
    for file in &analysis.files {
        let uri = file.path.to_string_lossy().replace('\\', "/");
        for site in &file.sites {
            if let Status::Covered { .. } = &site.status {
                // Nothing to fix: recorded so the audit shows why.
                results.push(json!({
                    "ruleId": COVERED_RULE_ID,
                    "kind": "informational",
                    "level": "none",
                    "message": {"text": format!(
                        "{} needs no fence of its own: {}",
                        site.candidate.qualname, reason(site)
                    )},
                    "locations": [{"physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": {"startLine": site.candidate.at.line, "startColumn": site.candidate.at.column},
                    }}],
                }));
                continue;
            }
            let Status::Unfenced { evidence } = &site.status else {
                continue;
            };
            let mut result = json!({
                "ruleId": RULE_ID,
                "level": "error",
                "message": {"text": format!(
                    "{} is an offload hook without a fence ({evidence}; {}): torch.compile will trace it",
                    site.candidate.qualname, site.why_hook
                )},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": {"startLine": site.candidate.at.line, "startColumn": site.candidate.at.column},
                }}],
            });
            if let Some(fix) = &site.fix {
                let replacements: Vec<Value> = fix
                    .edits
                    .iter()
                    .map(|edit| {
                        json!({
                            "deletedRegion": {
                                "byteOffset": file.source.file_offset(edit.start),
                                "byteLength": file.source.file_offset(edit.end) - file.source.file_offset(edit.start),
                            },
                            "insertedContent": {"text": edit.replacement},
                        })
                    })
                    .collect();
                result["fixes"] = json!([{
                    "description": {"text": "fence the hook from torch.compile"},
                    "artifactChanges": [{"artifactLocation": {"uri": uri}, "replacements": replacements}],
                }]);
            }
            results.push(result);
        }
    }
    let notifications: Vec<Value> = analysis
        .errors
        .iter()
        .map(|e| {
            json!({
                "level": "error",
                "message": {"text": e.report()},
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": e.path().to_string_lossy().replace('\\', "/")}}}],
            })
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "hookfence",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://pypi.org/project/hookfence/",
                "rules": [{
                    "id": RULE_ID,
                    "name": "UnfencedOffloadHook",
                    "shortDescription": {"text": "Offload hook not fenced from torch.compile"},
                    "fullDescription": {"text": "A hook that moves, casts or syncs module state runs inside torch.compile's traced forward; fence it with @torch.compiler.disable()."},
                    "defaultConfiguration": {"level": "error"},
                }, {
                    "id": COVERED_RULE_ID,
                    "name": "CoveredOffloadHook",
                    "shortDescription": {"text": "Offload hook that runs only inside fenced entry points"},
                    "fullDescription": {"text": "A hook that moves module state, reached only through entry points fenced from torch.compile: it runs eagerly already and needs no fence of its own."},
                    "defaultConfiguration": {"level": "none"},
                }],
            }},
            "invocations": [{
                "executionSuccessful": analysis.errors.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    })
}

/// Escapes a GitHub workflow-command message.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a GitHub workflow-command property value.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub Actions workflow commands: an `::error` annotation per unfenced
/// hook and per file that could not be processed, a `::warning` per
/// registration hookfence could not follow, a `::notice` per covered hook.
pub fn github(analysis: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    for e in entries(analysis) {
        let (level, title, message) = match (e.status, e.site) {
            ("unfenced", Some(site)) => (
                "error",
                "Unfenced offload hook",
                format!(
                    "{} runs inside torch.compile's trace ({}); fence it with @torch.compiler.disable() or run hookfence --apply",
                    site.candidate.qualname,
                    reason(site)
                ),
            ),
            ("covered", Some(site)) => (
                "notice",
                "Offload hook covered by a fenced entry point",
                format!(
                    "{} needs no fence of its own ({})",
                    site.candidate.qualname,
                    reason(site)
                ),
            ),
            ("unresolved", None) => (
                "warning",
                "Hook hookfence cannot follow",
                format!("{}: fence it by hand if it moves weights", e.reason),
            ),
            _ => continue,
        };
        lines.push(format!(
            "::{level} file={},line={},col={},title={}::{}",
            escape_property(&e.file.path.to_string_lossy()),
            e.line,
            e.column,
            escape_property(title),
            escape_data(&message)
        ));
    }
    for err in &analysis.errors {
        lines.push(format!(
            "::error file={},title={}::{}",
            escape_property(&err.path().to_string_lossy()),
            escape_property("hookfence could not process this file"),
            escape_data(&err.report())
        ));
    }
    lines
}

/// Whether `site` of `file` is what `--explain TARGET` names: `PATH:LINE`
/// with LINE anywhere in its definition, or its qualified name.
fn names_site(target: &str, file: &FileReport, site: &HookSite) -> bool {
    if site.candidate.qualname == target {
        return true;
    }
    let Some((path, line)) = target.rsplit_once(':') else {
        return false;
    };
    let Ok(line) = line.parse::<usize>() else {
        return false;
    };
    let same_file = std::path::Path::new(path) == file.path
        || std::fs::canonicalize(path).ok() == std::fs::canonicalize(&file.path).ok();
    if !same_file {
        return false;
    }
    let text = &file.source.text;
    let (start, end) = site.candidate.span;
    let first = text[..start.min(text.len())].matches('\n').count() + 1;
    let last = text[..end.min(text.len())].matches('\n').count() + 1;
    (first..=last).contains(&line) || line == site.candidate.at.line
}

/// What `--explain TARGET` prints for each site it names (the innermost
/// first when a line falls in nested definitions); `None` when it names none.
pub fn explain(analysis: &Analysis, target: &str) -> Option<Vec<String>> {
    let mut named: Vec<(&FileReport, &HookSite)> = analysis
        .files
        .iter()
        .flat_map(|f| f.sites.iter().map(move |s| (f, s)))
        .filter(|(f, s)| names_site(target, f, s))
        .collect();
    if named.is_empty() {
        return None;
    }
    // The innermost definition around the line: the shortest span.
    named.sort_by_key(|(_, s)| s.candidate.span.1 - s.candidate.span.0);
    let (file, site) = named[0];
    let at = &site.candidate.at;
    let mut lines = vec![format!(
        "{}:{}:{}  {}",
        file.path.display(),
        at.line,
        at.column,
        site.candidate.qualname
    )];
    lines.push("  found by:".to_owned());
    for found in &site.discovered_by {
        lines.push(format!(
            "    {}: {} ({}:{})",
            found.how,
            found.detail,
            found.path.display(),
            found.line
        ));
    }
    lines.push("  evidence:".to_owned());
    if site.evidence.is_empty() {
        lines.push(format!("    none: {}", crate::analysis::verdict::NO_EFFECT));
    }
    for step in &site.evidence {
        lines.push(format!(
            "    {}: {} ({}:{})",
            step.kind,
            step.detail,
            step.path.display(),
            step.line
        ));
    }
    lines.push("  discounted:".to_owned());
    if site.discounted.is_empty() {
        lines.push("    nothing".to_owned());
    }
    for discounted in &site.discounted {
        lines.push(format!("    {discounted}"));
    }
    let fenced_callees: Vec<_> = site.fenced_callees().collect();
    if !fenced_callees.is_empty() {
        lines.push("  fenced callees:".to_owned());
        for step in &fenced_callees {
            lines.push(format!(
                "    {} by {} ({}:{})",
                step.detail
                    .strip_suffix(" (fenced)")
                    .unwrap_or(&step.detail),
                step.fenced.as_deref().unwrap_or_default(),
                step.path.display(),
                step.line
            ));
        }
        if matches!(site.status, Status::Unfenced { .. }) {
            lines.push(format!(
                "    their work runs eagerly already; {}",
                fencing_the_hook_as_well(&site.fenced_calls)
            ));
        }
    }
    let decision = match &site.status {
        // --all-hooks fences a hook that shows no offload work: say so,
        // rather than "offload hook" below "evidence: none".
        Status::Unfenced { .. } if site.evidence.is_empty() => {
            "unfenced hook with no offload work: --all-hooks fences it".to_owned()
        }
        Status::Unfenced { .. } if site.fix.is_some() => {
            "unfenced offload hook: hookfence fences it (--check fails until it is)".to_owned()
        }
        status => format!("{}: {}", status.name(), reason(site)),
    };
    lines.push(format!("  decision: {decision}"));
    Some(lines)
}
