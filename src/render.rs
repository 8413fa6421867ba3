//! What the user sees: git-style unified diffs (stdout), one note per hook
//! left alone (stderr), and a one-line summary (stderr).

use std::io::{self, Write};

use anstyle::{AnsiColor, Style as AnsiStyle};

use crate::analysis::verdict::Status;
use crate::options::Mode;
use crate::results::{Analysis, FileReport};

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

/// A path's bytes as git names them: the real bytes on Unix (a name that
/// is not UTF-8 keeps them), `/`-separated elsewhere.
fn path_bytes(path: &std::path::Path) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        path.to_string_lossy().replace('\\', "/").into_bytes()
    }
}

/// `prefix` and `name` as git writes a name in a diff header (its
/// `quote_c_style` with the default `core.quotePath=true`): as is, unless
/// a byte needs quoting (a control character, DEL, `"`, `\`, or any byte
/// above 0x7F), and then in double quotes with C escapes (`\t`, `\n`,
/// `\"`, `\\`, ...) and three-digit octal for every other such byte.
/// A name with a space is followed by a tab, as git does, so that `patch`
/// does not cut it at the space.
pub fn git_header_name(prefix: &str, name: &[u8]) -> Vec<u8> {
    let needs_quote = |b: u8| b < 0x20 || b == 0x7F || b == b'"' || b == b'\\' || b >= 0x80;
    let mut out = Vec::with_capacity(prefix.len() + name.len() + 3);
    if name.iter().any(|&b| needs_quote(b)) {
        out.push(b'"');
        out.extend_from_slice(prefix.as_bytes());
        for &b in name {
            let escape: Option<&[u8]> = match b {
                0x07 => Some(b"\\a"),
                0x08 => Some(b"\\b"),
                b'\t' => Some(b"\\t"),
                b'\n' => Some(b"\\n"),
                0x0B => Some(b"\\v"),
                0x0C => Some(b"\\f"),
                b'\r' => Some(b"\\r"),
                b'"' => Some(b"\\\""),
                b'\\' => Some(b"\\\\"),
                _ => None,
            };
            match escape {
                Some(e) => out.extend_from_slice(e),
                None if needs_quote(b) => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
                None => out.push(b),
            }
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(name);
    }
    if name.contains(&b' ') {
        out.push(b'\t');
    }
    out
}

/// One header line (`--- a/<path>`), bold on a terminal.
fn write_header(out: &mut dyn Write, marker: &str, name: &[u8], style: &Style) -> io::Result<()> {
    if style.enabled {
        let bold = AnsiStyle::new().bold();
        write!(out, "{bold}")?;
        out.write_all(marker.as_bytes())?;
        out.write_all(name)?;
        writeln!(out, "{bold:#}")
    } else {
        out.write_all(marker.as_bytes())?;
        out.write_all(name)?;
        writeln!(out)
    }
}

/// The lines of `text` as git counts them: split after each `\n` only (a
/// lone `\r` is part of its line, as CPython accepts it inside one), the
/// last line possibly without an ending.
fn git_lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// A hunk range as git writes it: `start,count`, only `start` when the count
/// is 1, and the line before when it is 0.
fn hunk_range(start: usize, len: usize) -> String {
    match len {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{len}", start + 1),
    }
}

/// The hunks of the unified diff from `old` to `new` with 3 lines of context,
/// lines split as git splits them, each hunk as its text. A last line
/// without a newline is followed by `\ No newline at end of file`.
pub fn unified_hunks(old: &str, new: &str) -> Vec<String> {
    let old_lines = git_lines(old);
    let new_lines = git_lines(new);
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &old_lines, &new_lines);
    let mut hunks = Vec::new();
    for group in similar::group_diff_ops(ops, 3) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let (old_start, new_start) = (first.old_range().start, first.new_range().start);
        let old_len = last.old_range().end - old_start;
        let new_len = last.new_range().end - new_start;
        let mut hunk = format!(
            "@@ -{} +{} @@\n",
            hunk_range(old_start, old_len),
            hunk_range(new_start, new_len)
        );
        let mut line = |mark: char, text: &str| {
            hunk.push(mark);
            hunk.push_str(text);
            if !text.ends_with('\n') {
                hunk.push_str("\n\\ No newline at end of file\n");
            }
        };
        for op in &group {
            for change in op.iter_changes(&old_lines, &new_lines) {
                let mark = match change.tag() {
                    similar::ChangeTag::Equal => ' ',
                    similar::ChangeTag::Delete => '-',
                    similar::ChangeTag::Insert => '+',
                };
                line(mark, change.value());
            }
        }
        hunks.push(hunk);
    }
    hunks
}

/// The diff that creates a file: `--- /dev/null`, `+++ b/<path>`.
fn write_new_file(
    out: &mut dyn Write,
    new: &crate::results::NewFile,
    style: &Style,
) -> io::Result<()> {
    write_header(out, "--- ", b"/dev/null", style)?;
    write_header(
        out,
        "+++ ",
        &git_header_name("b/", &path_bytes(&new.path)),
        style,
    )?;
    for hunk in unified_hunks("", new.text.as_str()) {
        write_hunk(out, &hunk, crate::source::Encoding::Utf8, style)?;
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
    let name = path_bytes(&file.path);
    write_header(out, "--- ", &git_header_name("a/", &name), style)?;
    write_header(out, "+++ ", &git_header_name("b/", &name), style)?;
    for hunk in unified_hunks(&old, &new) {
        write_hunk(out, &hunk, file.source.encoding, style)?;
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
                    "skipped {}: not offload: {} ({}); {}",
                    c.qualname,
                    site.not_offload_reason(),
                    site.why_hook,
                    if c.backward.is_some() {
                        "backward hooks are never fenced"
                    } else {
                        "--all-hooks fences it"
                    }
                ),
                // `--all-hooks` lists a backward hook with no offload work
                // as backward too: say which it is.
                Status::Backward { evidence, .. } if evidence == "--all-hooks" => format!(
                    "skipped {}: backward hook, not offload: {} ({}); {}",
                    c.qualname,
                    site.not_offload_reason(),
                    site.why_hook,
                    crate::analysis::verdict::BACKWARD_NOT_FENCED
                ),
                Status::Backward { evidence, .. } => format!(
                    "skipped {}: backward hook that {evidence} ({}); {}",
                    c.qualname,
                    site.why_hook,
                    crate::analysis::verdict::BACKWARD_NOT_FENCED
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
                Status::Covered { entry, .. } => {
                    format!("skipped {}: covered: runs only inside {entry}", c.qualname)
                }
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
    let covered = count(|s| matches!(s, Status::Covered { .. }));
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
    // Only a tree with covered hooks names them.
    let fenced = if covered > 0 {
        format!("{fenced} already fenced, {covered} covered by fenced entry points")
    } else {
        format!("{fenced} already fenced")
    };
    // Hooks to fence whose offload work runs in functions fenced already:
    // named, so that "0 already fenced" does not hide those fences.
    let past_fences: usize = analysis
        .files
        .iter()
        .flat_map(|f| &f.sites)
        .filter(|s| matches!(s.status, Status::Unfenced { .. }))
        .filter(|s| s.fenced_callees().next().is_some())
        .count();
    let fenced = if past_fences > 0 {
        format!("{fenced}, {past_fences} to fence with fenced callees")
    } else {
        fenced
    };
    format!(
        "{head} ({fenced}, {not_offload} not offload, {opted_out} opted out{backward}, {unresolved} unresolved; {} scanned, {} skipped)",
        plural(analysis.scanned, "file", "files"),
        analysis.errors.len(),
    )
}
