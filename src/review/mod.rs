//! Review before writing: `--interactive` asks about each planned fence on
//! the terminal, `--decisions FILE` saves the answers, `--replay FILE`
//! applies saved answers without asking.
//!
//! The parts: [`planned`] lists the fences to review; the terminal loop
//! ([`session`]) or the saved answers ([`replay`]) give a [`Verdict`] for
//! each; [`apply`] narrows the analysis to them. [`Decisions`] is the saved
//! file. Only [`review`] and the loop touch the terminal or the disk.

pub mod decisions;

use std::io::{self, BufRead, Write};
use std::path::Path;

use crate::analysis::file_facts::Target;
use crate::analysis::verdict::Status;
use crate::cli::{Review, Settings};
use crate::edit::{Edit, Fix};
use crate::render::Style;
use crate::results::{Analysis, FileReport};
use crate::review::decisions::{
    Answer, Decisions, MAX_DECISIONS_BYTES, Planned, Verdict, may_save_decisions_at, planned,
    record, replay, save_decisions,
};
use crate::source::{indentation_at, line_ending_at};

/// The reason a suppression written by the review carries in reports.
pub const SUPPRESSED_IN_REVIEW: &str = "suppressed in review";

/// The prompt, after the hunk.
pub const PROMPT: &str = "fence? [y]es [n]o [s]uppress [a]ll [q]uit ";

/// The `# hookfence: ignore` line that suppresses a hook: where a def's
/// decorator would go (the start of its logical line), or above a lambda's
/// line, indented like that line; where that line starts inside a string or
/// continues the line above, above the nearest line where a comment is a
/// comment (see [`crate::pyrules::comment_may_go_at`]).
pub fn suppression(text: &str, target: &Target) -> Edit {
    let (at, indent, ending) = match target {
        Target::Def {
            insert_at,
            indent,
            line_ending,
        } => (*insert_at, indent.as_str(), *line_ending),
        Target::Lambda { comment_at, .. } => {
            let at = *comment_at;
            (at, indentation_at(text, at), line_ending_at(text, at))
        }
    };
    Edit::insert(at, format!("{indent}# hookfence: ignore{ending}"))
}

/// The 1-based line the (first) edit of `fixes[own]` lands on once all of
/// `fixes` are applied in order: at one offset, earlier fixes' edits come
/// first; identical edits count once, as [`crate::edit::apply`] does.
fn landing_line(text: &str, fixes: &[Fix], own: usize) -> usize {
    let newlines = |s: &str| s.matches('\n').count();
    let Some(target) = fixes.get(own).and_then(|f| f.edits.first()) else {
        return 0;
    };
    let mut seen: Vec<&Edit> = vec![target];
    let mut line = 1 + newlines(&text[..target.start]);
    for (i, fix) in fixes.iter().enumerate() {
        for edit in &fix.edits {
            if seen.contains(&edit) {
                continue;
            }
            seen.push(edit);
            let before = edit.start < target.start || (i < own && edit.start == target.start);
            if before && edit.end <= target.start {
                line = line + newlines(&edit.replacement) - newlines(&text[edit.start..edit.end]);
            }
        }
    }
    line
}

/// Narrows `analysis` to the verdicts: accepted fences stay planned,
/// skipped and unanswered ones become [`Status::Declined`], suppressed ones
/// [`Status::Suppressed`] with a `# hookfence: ignore` line. Rewrites the
/// `new_text` of every file reviewed, and drops helper modules no fence
/// uses any more. A file whose rewrite would not parse is left unchanged
/// and reported as an error.
pub fn apply(analysis: &mut Analysis, planned: &[Planned], verdicts: &[Verdict]) {
    let mut suppressed: Vec<Vec<(usize, Edit)>> = vec![Vec::new(); analysis.files.len()];
    for (p, verdict) in planned.iter().zip(verdicts) {
        let file = &mut analysis.files[p.file];
        let text = &file.source.text;
        let site = &mut file.sites[p.site];
        let evidence = match &site.status {
            Status::Unfenced { evidence } => evidence.clone(),
            _ => continue,
        };
        let qualname = &site.candidate.qualname;
        let note = match verdict {
            Verdict::Answered(Answer::Fence) => continue,
            Verdict::Answered(Answer::Skip) => format!("skipped {qualname}: declined in review"),
            Verdict::Answered(Answer::Suppress) => {
                suppressed[p.file].push((p.site, suppression(text, &site.candidate.target)));
                site.fix = None;
                site.status = Status::Suppressed {
                    line: 0, // set below, once the file's edits are known
                    reason: Some(SUPPRESSED_IN_REVIEW.to_owned()),
                };
                continue;
            }
            Verdict::Unanswered(note) => note.clone(),
        };
        site.fix = None;
        site.status = Status::Declined { evidence, note };
    }

    let mut reviewed: Vec<usize> = planned.iter().map(|p| p.file).collect();
    reviewed.dedup();
    let mut errors = Vec::new();
    for f in reviewed {
        let file = &mut analysis.files[f];
        let extra: Vec<Fix> = suppressed[f]
            .iter()
            .map(|(_, edit)| Fix {
                edits: vec![edit.clone()],
            })
            .collect();
        let mut all: Vec<Fix> = file.sites.iter().filter_map(|s| s.fix.clone()).collect();
        let fences = all.len();
        all.extend_from_slice(&extra);
        for (i, (site, _)) in suppressed[f].iter().enumerate() {
            let line = landing_line(&file.source.text, &all, fences + i);
            if let Status::Suppressed { line: at, .. } = &mut file.sites[*site].status {
                *at = line;
            }
        }
        if fences == 0 {
            file.helper = None;
        }
        match file.rewrite_with(|_| true, &extra) {
            Ok((new_text, conflicts)) => {
                file.new_text = new_text;
                file.conflicts = conflicts;
            }
            Err(err) => {
                file.new_text = None;
                errors.push(err);
            }
        }
    }
    if !errors.is_empty() {
        analysis.errors.extend(errors);
        analysis.errors.sort_by(|a, b| a.path().cmp(b.path()));
    }

    let files = &analysis.files;
    analysis.created.retain(|created| {
        files.iter().any(|f| {
            f.new_text.is_some() && f.helper.as_ref().is_some_and(|h| h.path == created.path)
        })
    });
}

/// The unified diff hunks of `file` with only `fix` applied.
pub fn hunk(file: &FileReport, fix: &Fix, style: &Style) -> String {
    let old = file.source.text.as_str();
    let new = crate::edit::apply(old, std::slice::from_ref(fix)).text;
    let mut out = Vec::new();
    for hunk in crate::render::unified_hunks(old, new.as_str()) {
        let _ = crate::render::write_hunk(&mut out, &hunk, crate::source::Encoding::Utf8, style);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A key the user pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Yes,
    No,
    Suppress,
    All,
    Quit,
}

/// Asks until a line starts with a known key (case-insensitive). The end
/// of the input quits.
fn ask(input: &mut dyn BufRead, out: &mut dyn Write, progress: &str) -> io::Result<Key> {
    loop {
        write!(out, "{progress}{PROMPT}")?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            writeln!(out)?;
            return Ok(Key::Quit);
        }
        let key = match line.trim().chars().next().map(|c| c.to_ascii_lowercase()) {
            Some('y') => Key::Yes,
            Some('n') => Key::No,
            Some('s') => Key::Suppress,
            Some('a') => Key::All,
            Some('q') => Key::Quit,
            _ => {
                writeln!(
                    out,
                    "y: fence it, n: leave it unfenced, s: write `# hookfence: ignore` instead, a: fence it and all the rest, q: stop (the rest stay unfenced)"
                )?;
                continue;
            }
        };
        return Ok(key);
    }
}

/// The terminal loop: shows each planned fence's hunk on `out` and reads
/// the answer from `input`. `a` accepts the rest without asking; `q` (or
/// the end of the input) leaves the rest unanswered.
pub fn session(
    analysis: &Analysis,
    planned: &[Planned],
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    style: &Style,
) -> io::Result<Vec<Verdict>> {
    let mut verdicts = Vec::with_capacity(planned.len());
    let mut all = false;
    for (n, p) in planned.iter().enumerate() {
        if all {
            verdicts.push(Verdict::Answered(Answer::Fence));
            continue;
        }
        let file = &analysis.files[p.file];
        let site = &file.sites[p.site];
        let (Status::Unfenced { evidence }, Some(fix)) = (&site.status, &site.fix) else {
            continue;
        };
        writeln!(
            out,
            "{}:{}  {}  ({evidence})",
            file.path.display(),
            site.candidate.at,
            site.candidate.qualname
        )?;
        out.write_all(hunk(file, fix, style).as_bytes())?;
        let progress = format!("({}/{}) ", n + 1, planned.len());
        let answer = match ask(input, out, &progress)? {
            Key::Yes => Answer::Fence,
            Key::No => Answer::Skip,
            Key::Suppress => Answer::Suppress,
            Key::All => {
                all = true;
                Answer::Fence
            }
            Key::Quit => break,
        };
        verdicts.push(Verdict::Answered(answer));
    }
    for p in &planned[verdicts.len()..] {
        verdicts.push(Verdict::Unanswered(format!(
            "skipped {}: not reviewed (the review was quit before it)",
            analysis.files[p.file].sites[p.site].candidate.qualname
        )));
    }
    Ok(verdicts)
}

/// Narrows `analysis` to the fences the review accepts (rewriting each
/// file's `new_text`), adding a `# hookfence: ignore` line for each hook the
/// user suppresses. An `Err` stops the run before anything is written.
pub fn review(analysis: &mut Analysis, how: &Review, settings: &Settings) -> Result<(), String> {
    let planned = planned(analysis);
    let verdicts = match how {
        Review::Interactive { decisions } => {
            // The answers go only into a new file or one saved before:
            // refused before any question, so no answer is given in vain.
            let save_at = match decisions {
                Some(path) => Some(may_save_decisions_at(path)?),
                None => None,
            };
            // Where the answers go must exist before they are given.
            if let Some(dir) = decisions
                .as_deref()
                .and_then(Path::parent)
                .filter(|d| !d.as_os_str().is_empty())
            {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            let style = Style::new(settings.color_stderr);
            let mut input = io::stdin().lock();
            let mut out = io::stderr().lock();
            let verdicts = session(analysis, &planned, &mut input, &mut out, &style)
                .map_err(|e| format!("cannot talk to the terminal: {e}"))?;
            if let Some(at) = &save_at {
                let text = record(analysis, &planned, &verdicts).to_json();
                save_decisions(at, &text)?;
            }
            verdicts
        }
        Review::Replay(path) => {
            let bytes =
                crate::source::read_file_limited(path, MAX_DECISIONS_BYTES, "a decisions file")
                    .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("{}: cannot read: not UTF-8", path.display()))?;
            let decisions =
                Decisions::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            replay(analysis, &planned, &decisions, path)?
        }
    };
    apply(analysis, &planned, &verdicts);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::options::Options;
    use crate::review::decisions::Decision;

    const HOOKS: &str = "\
import torch


def install(model):
    model.register_forward_hook(lambda m, a, out: m.to(\"cpu\"))


def _to_cuda(module, args):
    module.to(\"cuda\")
    return args


def _offload(module, args, output):
    module.to(\"cpu\")
    return output


def attach(model):
    model.register_forward_pre_hook(_to_cuda)
    model.register_forward_hook(_offload)
";

    fn analysis(text: &str) -> Analysis {
        // A project of its own (the checkout the test runs in is not).
        let project = tempfile::tempdir().unwrap();
        let options = Options {
            project_root: Some(project.path().to_path_buf()),
            ..Options::default()
        };
        let analysis = crate::pipeline::analyze_source(
            "pkg/hooks.py".into(),
            text.as_bytes().to_vec(),
            &options,
        );
        assert!(analysis.errors.is_empty(), "{:?}", analysis.errors);
        analysis
    }

    fn names(analysis: &Analysis, planned: &[Planned]) -> Vec<String> {
        planned
            .iter()
            .map(|p| {
                analysis.files[p.file].sites[p.site]
                    .candidate
                    .qualname
                    .clone()
            })
            .collect()
    }

    #[test]
    fn planned_fences_come_in_position_order() {
        let a = analysis(HOOKS);
        let planned = planned(&a);
        assert_eq!(
            names(&a, &planned),
            ["install.<locals>.<lambda>", "_to_cuda", "_offload"]
        );
    }

    #[test]
    fn apply_fences_skips_and_suppresses() {
        let mut a = analysis(HOOKS);
        let planned = planned(&a);
        let verdicts = [
            Verdict::Answered(Answer::Suppress),
            Verdict::Answered(Answer::Skip),
            Verdict::Answered(Answer::Fence),
        ];
        apply(&mut a, &planned, &verdicts);
        let file = &a.files[0];
        let text = file.new_text.as_deref().unwrap();
        assert_eq!(
            text,
            HOOKS
                .replace(
                    "    model.register_forward_hook(lambda",
                    "    # hookfence: ignore\n    model.register_forward_hook(lambda"
                )
                .replace("def _offload", "@torch.compiler.disable()\ndef _offload")
        );
        let statuses: Vec<&str> = planned
            .iter()
            .map(|p| file.sites[p.site].status.name())
            .collect();
        assert_eq!(statuses, ["suppressed", "declined", "unfenced"]);
        let Status::Suppressed { line, reason } = &file.sites[planned[0].site].status else {
            unreachable!()
        };
        assert_eq!(text.lines().nth(line - 1), Some("    # hookfence: ignore"));
        assert_eq!(reason.as_deref(), Some(SUPPRESSED_IN_REVIEW));
        // Rewritten, the suppressed hook is suppressed and the declined one
        // still unfenced.
        let again = analysis(text);
        let statuses: Vec<(&str, &str)> = again.files[0]
            .sites
            .iter()
            .map(|s| (s.candidate.qualname.as_str(), s.status.name()))
            .collect();
        assert!(statuses.contains(&("install.<locals>.<lambda>", "suppressed")));
        assert!(statuses.contains(&("_to_cuda", "unfenced")));
        assert!(statuses.contains(&("_offload", "fenced")));
    }

    #[test]
    fn suppression_lands_below_an_import_added_at_the_same_place() {
        // No `import torch`: the fence of `_b` adds it at offset 0, where the
        // suppression of `_a` goes too; the comment must stay on `_a`.
        let text = "\
def _a(module, args):
    module.to(\"cuda\")


def _b(module, args):
    module.to(\"cpu\")


def attach(model):
    model.register_forward_pre_hook(_a)
    model.register_forward_pre_hook(_b)
";
        let mut a = analysis(text);
        let planned = planned(&a);
        assert_eq!(names(&a, &planned), ["_a", "_b"]);
        apply(
            &mut a,
            &planned,
            &[
                Verdict::Answered(Answer::Suppress),
                Verdict::Answered(Answer::Fence),
            ],
        );
        let new = a.files[0].new_text.clone().unwrap();
        assert!(
            new.starts_with("import torch\n# hookfence: ignore\ndef _a("),
            "{new}"
        );
        let Status::Suppressed { line, .. } = a.files[0].sites[planned[0].site].status else {
            unreachable!()
        };
        assert_eq!(line, 2);
    }

    /// Whether CPython compiles `text`, or its complaint.
    fn cpython_compiles(text: &str) -> Result<(), String> {
        use std::io::Write as _;
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys; compile(sys.stdin.buffer.read(), 'f.py', 'exec')",
            ])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3 is needed for the CPython oracle");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    #[test]
    fn a_suppression_never_lands_in_a_string_or_after_a_continuation() {
        // The lambda's line starts inside a multi-line str, f-string or
        // bytes literal, or continues the line above: the comment goes
        // above the statement, where it is a comment.
        let hook = "model.register_forward_hook(lambda m, a, o: m.to(\"cpu\"))";
        let cases = [
            format!("s = \"\"\"\nline\n\"\"\"; {hook}\n"),
            format!("s = f'''\n{{1}}\n'''; {hook}\n"),
            format!("s = rb'''\n\\x00\n'''; {hook}\n"),
            format!("x = 1 + \\\n{hook}\n"),
            format!("\\\n{hook}\n"),
            format!("x = 1 + \\\n    \\\n{hook}\n"),
            format!("if x:\n    y = [\n        1,\n    ] + \\\n    {hook}\n"),
            format!("s = (\"\"\"\n\"\"\"\n     + \\\n  \"\"); {hook}\n"),
        ];
        for body in cases {
            let text = format!("import torch\nmodel = None\n{body}");
            cpython_compiles(&text).unwrap();
            let mut a = analysis(&text);
            let planned = planned(&a);
            assert_eq!(names(&a, &planned).len(), 1, "{text}");
            apply(&mut a, &planned, &[Verdict::Answered(Answer::Suppress)]);
            assert!(a.errors.is_empty(), "{:?}", a.errors);
            let new = a.files[0].new_text.clone().unwrap();
            cpython_compiles(&new).unwrap_or_else(|e| panic!("{e}\n{new}"));
            // Only a comment line was added: the program is the same.
            let without: String = new
                .split_inclusive('\n')
                .filter(|l| l.trim() != "# hookfence: ignore")
                .collect();
            assert_eq!(without, text, "{new}");
            let Status::Suppressed { line, .. } = a.files[0].sites[planned[0].site].status else {
                unreachable!()
            };
            assert_eq!(
                new.lines().nth(line - 1).map(str::trim),
                Some("# hookfence: ignore"),
                "{new}"
            );
            // And it suppresses the hook on the next run.
            let again = analysis(&new);
            assert_eq!(again.files[0].sites[0].status.name(), "suppressed", "{new}");
            assert!(again.files[0].unused_suppressions.is_empty(), "{new}");
        }
    }

    #[test]
    fn declining_everything_changes_nothing() {
        let mut a = analysis(HOOKS);
        let planned = planned(&a);
        let verdicts = vec![Verdict::Unanswered("not reviewed".into()); planned.len()];
        apply(&mut a, &planned, &verdicts);
        assert_eq!(a.files[0].new_text, None);
        assert!(
            a.files[0]
                .sites
                .iter()
                .all(|s| !matches!(s.status, Status::Unfenced { .. }) && s.fix.is_none())
        );
    }

    #[test]
    fn replay_matches_by_path_and_qualname() {
        let a = analysis(HOOKS);
        let planned = planned(&a);
        let decision = |qualname: &str, answer| Decision {
            path: "pkg/hooks.py".into(),
            qualname: qualname.into(),
            line: 999, // lines do not matter
            answer,
        };
        let file = Path::new("d.json");
        let decisions = Decisions::new(vec![
            decision("_offload", Answer::Fence),
            decision("_to_cuda", Answer::Skip),
        ]);
        let verdicts = replay(&a, &planned, &decisions, file).unwrap();
        assert_eq!(
            verdicts,
            [
                Verdict::Unanswered(
                    "no decision recorded for install.<locals>.<lambda> in d.json; left unfenced"
                        .into()
                ),
                Verdict::Answered(Answer::Skip),
                Verdict::Answered(Answer::Fence),
            ]
        );
        // A decision for a hook that is gone, or one too many for a name.
        for gone in [
            decision("_moved_away", Answer::Fence),
            decision("_offload", Answer::Fence),
        ] {
            let mut decisions = decisions.clone();
            decisions.decisions.push(gone.clone());
            let err = replay(&a, &planned, &decisions, file).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "d.json: decision for pkg/hooks.py {} matches no hook any more; review again with --interactive",
                    gone.qualname
                )
            );
        }
        // A decision for a hook that is fenced by now is no error.
        let mut a = a;
        apply(
            &mut a,
            &planned,
            &vec![Verdict::Answered(Answer::Fence); planned.len()],
        );
        let fenced = analysis(a.files[0].new_text.as_deref().unwrap());
        assert!(replay(&fenced, &[], &decisions, file).is_ok());
    }

    #[test]
    fn recorded_decisions_replay_to_the_same_verdicts() {
        let a = analysis(HOOKS);
        let planned = planned(&a);
        let verdicts = vec![
            Verdict::Answered(Answer::Suppress),
            Verdict::Answered(Answer::Fence),
            Verdict::Unanswered("quit".into()),
        ];
        let decisions = record(&a, &planned, &verdicts);
        assert_eq!(decisions.decisions.len(), 2);
        let replayed = replay(&a, &planned, &decisions, Path::new("d.json")).unwrap();
        assert_eq!(replayed[..2], verdicts[..2]);
        assert!(matches!(replayed[2], Verdict::Unanswered(_)));
    }

    #[test]
    fn session_reads_answers_and_reasks() {
        let a = analysis(HOOKS);
        let planned = planned(&a);
        let mut input: &[u8] = b"\nwhat\nS\nyes\nq\n";
        let mut out = Vec::new();
        let verdicts = session(&a, &planned, &mut input, &mut out, &Style::new(false)).unwrap();
        assert_eq!(verdicts[0], Verdict::Answered(Answer::Suppress));
        assert_eq!(verdicts[1], Verdict::Answered(Answer::Fence));
        assert!(matches!(verdicts[2], Verdict::Unanswered(_)));
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.matches(PROMPT).count(), 5, "{out}");
        assert!(out.contains("pkg/hooks.py:8:1  _to_cuda  ("), "{out}");
        assert!(
            out.contains("+@torch.compiler.disable()\n def _to_cuda"),
            "{out}"
        );
        assert!(out.contains("(2/3) fence?"), "{out}");
    }

    #[test]
    fn session_all_accepts_the_rest_and_end_of_input_quits() {
        let a = analysis(HOOKS);
        let planned = planned(&a);
        let mut input: &[u8] = b"n\na\n";
        let verdicts = session(
            &a,
            &planned,
            &mut input,
            &mut Vec::new(),
            &Style::new(false),
        );
        assert_eq!(
            verdicts.unwrap(),
            [
                Verdict::Answered(Answer::Skip),
                Verdict::Answered(Answer::Fence),
                Verdict::Answered(Answer::Fence),
            ]
        );
        let mut input: &[u8] = b"y\n";
        let verdicts = session(
            &a,
            &planned,
            &mut input,
            &mut Vec::new(),
            &Style::new(false),
        );
        let verdicts = verdicts.unwrap();
        assert_eq!(verdicts[0], Verdict::Answered(Answer::Fence));
        assert!(matches!(verdicts[1], Verdict::Unanswered(_)));
    }
}
