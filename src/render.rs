//! What the user sees: git-style unified diffs (stdout), one note per hook
//! left alone (stderr), and a one-line summary (stderr).

use std::io::{self, Write};

use anstyle::{AnsiColor, Style as AnsiStyle};
use similar::TextDiff;

use crate::resolve::Status;
use crate::{Analysis, FileReport, Mode};

/// Colours, or none.
pub struct Style {
    enabled: bool,
}

impl Style {
    pub fn new(enabled: bool) -> Style {
        Style { enabled }
    }

    fn paint(&self, style: AnsiStyle, text: &str) -> String {
        if self.enabled {
            format!("{style}{text}{style:#}")
        } else {
            text.to_owned()
        }
    }

    /// An error line (`path:line:col: ... — left unchanged`), in red on a terminal.
    pub fn error(&self, line: &str) -> String {
        self.paint(AnsiStyle::new().fg_color(Some(AnsiColor::Red.into())), line)
    }
}

/// Writes every diff of a run, files to change and files to create, in path
/// order.
pub fn write_diffs(out: &mut dyn Write, analysis: &Analysis, style: &Style) -> io::Result<()> {
    let mut changed = analysis
        .files
        .iter()
        .filter(|f| f.new_text.is_some())
        .peekable();
    let mut created = analysis.created.iter().peekable();
    loop {
        let file_first = match (changed.peek(), created.peek()) {
            (Some(f), Some(c)) => f.path <= c.path,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Ok(()),
        };
        if file_first {
            if let Some(file) = changed.next() {
                write_diff(out, file, style)?;
            }
        } else if let Some(new) = created.next() {
            write_new_file(out, new, style)?;
        }
    }
}

/// The header path as git writes it.
fn header_path(path: &std::path::Path) -> String {
    let mut path = path.to_string_lossy().into_owned();
    if cfg!(windows) {
        path = path.replace('\\', "/");
    }
    // As git does: a name with a space ends with a tab, so that `patch`
    // does not cut it at the space.
    if path.contains(' ') {
        path.push('\t');
    }
    path
}

/// The diff that creates a file: `--- /dev/null`, `+++ b/<path>`.
fn write_new_file(out: &mut dyn Write, new: &crate::NewFile, style: &Style) -> io::Result<()> {
    let bold = AnsiStyle::new().bold();
    writeln!(out, "{}", style.paint(bold, "--- /dev/null"))?;
    writeln!(
        out,
        "{}",
        style.paint(bold, &format!("+++ b/{}", header_path(&new.path)))
    )?;
    let diff = TextDiff::from_lines("", new.text.as_str());
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        write_hunk(out, &hunk.to_string(), crate::source::Encoding::Utf8, style)?;
    }
    Ok(())
}

pub(crate) fn write_hunk(
    out: &mut dyn Write,
    text: &str,
    encoding: crate::source::Encoding,
    style: &Style,
) -> io::Result<()> {
    if !style.enabled {
        return out.write_all(encoding.encode(text).as_ref());
    }
    for line in text.split_inclusive('\n') {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let color = match body.as_bytes().first() {
            Some(b'+') => Some(AnsiColor::Green),
            Some(b'-') => Some(AnsiColor::Red),
            Some(b'@') => Some(AnsiColor::Cyan),
            _ => None,
        };
        let painted = match color {
            Some(c) => style.paint(AnsiStyle::new().fg_color(Some(c.into())), body),
            None => body.to_owned(),
        };
        out.write_all(encoding.encode(&painted).as_ref())?;
        out.write_all(newline.as_bytes())?;
    }
    Ok(())
}

/// Writes the unified diff of one file, in the file's own encoding and line
/// endings, so that `git apply` and `patch -p1` take it.
pub fn write_diff(out: &mut dyn Write, file: &FileReport, style: &Style) -> io::Result<()> {
    let Some(new_text) = &file.new_text else {
        return Ok(());
    };
    let bom = if file.source.bom { "\u{feff}" } else { "" };
    let old = format!("{bom}{}", file.source.text);
    let new = format!("{bom}{new_text}");
    let diff = TextDiff::from_lines(&old, &new);
    let path = header_path(&file.path);
    let bold = AnsiStyle::new().bold();
    writeln!(out, "{}", style.paint(bold, &format!("--- a/{path}")))?;
    writeln!(out, "{}", style.paint(bold, &format!("+++ b/{path}")))?;
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        write_hunk(out, &hunk.to_string(), file.source.encoding, style)?;
    }
    Ok(())
}

/// One line per hook hookfence saw but did not fence, per register call it
/// could not follow, and per fix it could not apply: `path:line:col: ...`.
pub fn notes(analysis: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    // fullgraph=True only matters where hooks are fenced.
    let any_fence = analysis.files.iter().any(|f| {
        f.sites
            .iter()
            .any(|s| matches!(s.status, Status::Fenced(_) | Status::Unfenced { .. }))
    });
    for file in &analysis.files {
        let path = file.path.display();
        let mut file_lines: Vec<(crate::error::Position, String)> = Vec::new();
        for site in &file.sites {
            let c = &site.candidate;
            let what = match &site.status {
                Status::NotOffload => format!(
                    "skipped {}: not offload: no device move, cast, stream sync or delegation in its body ({}); {}",
                    c.qualname,
                    site.why_hook,
                    if c.backward.is_some() {
                        "backward hooks are never fenced"
                    } else {
                        "--all-hooks fences it"
                    }
                ),
                Status::Backward { evidence, .. } => format!(
                    "skipped {}: backward hook that {evidence} ({}); {}",
                    c.qualname,
                    site.why_hook,
                    crate::resolve::BACKWARD_NOT_FENCED
                ),
                Status::OptedOut { line } => format!(
                    "skipped {}: opted out by the commented-out disable decorator on line {line}",
                    c.qualname
                ),
                Status::Suppressed { line, reason } => format!(
                    "skipped {}: suppressed by `# hookfence: ignore` on line {line}{}",
                    c.qualname,
                    reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                Status::Declined { note, .. } => note.clone(),
                _ => continue,
            };
            file_lines.push((c.at, what));
        }
        for &line in &file.unused_suppressions {
            file_lines.push((
                crate::error::Position { line, column: 1 },
                "unused suppression: this `# hookfence: ignore` matches no hook".to_owned(),
            ));
        }
        for u in &file.unresolved {
            file_lines.push((
                u.at,
                format!("cannot follow the hook registered here: {}", u.what),
            ));
        }
        if any_fence {
            for at in &file.fullgraph {
                file_lines.push((
                    *at,
                    "note: fullgraph=True raises as soon as a disabled hook runs; use the default mode, or compile the children below the hooked module".to_owned(),
                ));
            }
        }
        for qualname in &file.conflicts {
            file_lines.push((
                crate::error::Position { line: 1, column: 1 },
                format!(
                    "not fenced {qualname}: its edit overlaps another fix; run hookfence again"
                ),
            ));
        }
        file_lines.sort();
        lines.extend(
            file_lines
                .into_iter()
                .map(|(at, what)| format!("{path}:{at}: {what}")),
        );
    }
    lines
}

/// In `--check` mode, one line per hook that would be fenced:
/// `path:line:col: unfenced offload hook Class.pre_forward (evidence)`.
pub fn unfenced(analysis: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    for file in &analysis.files {
        for site in &file.sites {
            if let Status::Unfenced { evidence } = &site.status {
                lines.push(format!(
                    "{}:{}: unfenced offload hook {} ({evidence})",
                    file.path.display(),
                    site.candidate.at,
                    site.candidate.qualname
                ));
            }
        }
    }
    lines
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The one-line summary.
pub fn summary(analysis: &Analysis, mode: Mode, written: usize) -> String {
    let count =
        |pred: fn(&Status) -> bool| -> usize { analysis.files.iter().map(|f| f.count(pred)).sum() };
    let to_fence = count(|s| matches!(s, Status::Unfenced { .. }));
    let fenced = count(|s| matches!(s, Status::Fenced(_)));
    let not_offload = count(|s| matches!(s, Status::NotOffload));
    let opted_out = count(|s| matches!(s, Status::OptedOut { .. }));
    let declined = count(|s| matches!(s, Status::Declined { .. }));
    let backward = count(|s| matches!(s, Status::Backward { .. }));
    let unresolved: usize = analysis.files.iter().map(|f| f.unresolved.len()).sum();
    let changed = analysis
        .files
        .iter()
        .filter(|f| f.new_text.is_some())
        .count();
    let head = match mode {
        Mode::Diff => format!(
            "Would fence {} in {}",
            plural(to_fence, "hook", "hooks"),
            plural(changed, "file", "files")
        ),
        Mode::Apply => format!(
            "Fenced {} in {}",
            plural(to_fence, "hook", "hooks"),
            plural(written, "file", "files")
        ),
        Mode::Check | Mode::List if to_fence == 0 => "No unfenced offload hooks".to_owned(),
        Mode::Check | Mode::List => format!(
            "{} unfenced in {}",
            plural(to_fence, "offload hook", "offload hooks"),
            plural(changed, "file", "files")
        ),
    };
    // Only a review declines; other runs keep the summary as it was.
    let head = if declined > 0 {
        format!("{head}, left {declined} unfenced")
    } else {
        head
    };
    // Only a tree with offload backward hooks names them.
    let backward = if backward > 0 {
        format!(
            ", {} left unfenced",
            plural(backward, "backward hook", "backward hooks")
        )
    } else {
        String::new()
    };
    format!(
        "{head} ({fenced} already fenced, {not_offload} not offload, {opted_out} opted out{backward}, {unresolved} unresolved; {} scanned, {} skipped)",
        plural(analysis.scanned, "file", "files"),
        analysis.errors.len(),
    )
}
