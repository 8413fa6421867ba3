//! End-to-end tests of the review flags: `--interactive` driven for real
//! through a pseudo-terminal, `--decisions` and `--replay` on throwaway
//! projects in temporary directories.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::{BIN, COVERED, Project, Run, TIMEOUT};
use rexpect::process::WaitStatus;
use rexpect::session::PtySession;

// ---------------------------------------------------------------------------
// Helpers (a small copy of those in tests/cli.rs)
// ---------------------------------------------------------------------------

const PROMPT: &str = "fence? [y]es [n]o [s]uppress [a]ll [q]uit";

/// A throwaway project directory.
impl Project {
    /// Every regular file below the root, with its bytes.
    fn contents(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        common::file_contents(self.root())
    }

    /// Runs hookfence with `args` at the project root, stdin closed and
    /// stdout/stderr piped (so: no terminal).
    fn run(&self, args: &[&str]) -> Run {
        let child = Command::new(BIN)
            .args(args)
            .current_dir(self.root())
            .env_remove("NO_COLOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::finish(child, &format!("hookfence {args:?}")).into()
    }

    /// Starts hookfence with `args` at the project root on a fresh
    /// pseudo-terminal (stdin, stdout and stderr).
    fn spawn_pty(&self, args: &[&str]) -> PtySession {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.root())
            .env_remove("NO_COLOR")
            .env("TERM", "xterm");
        rexpect::session::spawn_command(command, Some(TIMEOUT.as_millis() as u64))
            .expect("spawn hookfence on a pty")
    }
}

/// Waits for a pty session's process to end; its exit code.
fn exit_code(session: &mut PtySession) -> i32 {
    session.exp_eof().expect("hookfence ends");
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => code,
        other => panic!("hookfence did not exit normally: {other:?}"),
    }
}

/// Expects the header of one planned fence, then its prompt; returns all
/// the output up to the prompt (the hunk included).
fn expect_fence(session: &mut PtySession, header: &str) -> String {
    let before = session
        .exp_string(header)
        .unwrap_or_else(|e| panic!("expected {header:?}: {e}"));
    let hunk = session
        .exp_string(PROMPT)
        .unwrap_or_else(|e| panic!("expected the prompt after {header:?}: {e}"));
    format!("{before}{header}{hunk}")
}

// ---------------------------------------------------------------------------
// The project under review: four planned fences in two files
// ---------------------------------------------------------------------------

const A_PY: &str = r#"import torch
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;

const B_PY: &str = r#"import torch


def _to_cuda(module, args):
    module.to("cuda")


def attach(model):
    model.register_forward_pre_hook(_to_cuda)
    model.register_forward_hook(lambda m, a, out: m.to("cpu"))
"#;

const PRE: &str = "pkg/a.py:6:5  CpuOffload.pre_forward  (";
const POST: &str = "pkg/a.py:10:5  CpuOffload.post_forward  (";
const TO_CUDA: &str = "pkg/b.py:4:1  _to_cuda  (";
const LAMBDA: &str = "pkg/b.py:10:33  attach.<locals>.<lambda>  (";

fn project() -> Project {
    Project::new(&[("pkg/a.py", A_PY.as_bytes()), ("pkg/b.py", B_PY.as_bytes())])
}

fn decisions(project: &Project, rel: &str) -> serde_json::Value {
    serde_json::from_str(&project.read_str(rel)).unwrap()
}

fn decision(path: &str, qualname: &str, line: u64, answer: &str) -> serde_json::Value {
    serde_json::json!({"path": path, "qualname": qualname, "line": line, "answer": answer})
}

// ---------------------------------------------------------------------------
// --interactive, on a pseudo-terminal
// ---------------------------------------------------------------------------

#[test]
fn interactive_fences_skips_suppresses_and_quits() {
    let project = project();
    let original = project.contents();
    let mut session = project.spawn_pty(&[
        "--interactive",
        "--decisions",
        "d.json",
        "--color",
        "never",
        ".",
    ]);

    let shown = expect_fence(&mut session, PRE);
    assert!(
        shown.contains("+    @torch.compiler.disable()\r\n     def pre_forward"),
        "the hunk of the first fence:\n{shown}"
    );
    assert!(shown.contains("(1/4) "), "{shown}");
    // An empty line and an unknown answer ask again.
    session.send_line("").unwrap();
    session.exp_string(PROMPT).unwrap();
    session.send_line("maybe").unwrap();
    session.exp_string(PROMPT).unwrap();
    session.send_line("y").unwrap();

    let shown = expect_fence(&mut session, POST);
    assert!(
        shown.contains("+    @torch.compiler.disable()\r\n     def post_forward"),
        "only this fence's hunk:\n{shown}"
    );
    assert!(!shown.contains("def pre_forward"), "{shown}");
    session.send_line("N").unwrap();

    expect_fence(&mut session, TO_CUDA);
    session.send_line("s").unwrap();

    let shown = expect_fence(&mut session, LAMBDA);
    assert!(
        shown.contains("torch.compiler.disable(lambda m, a, out: m.to(\"cpu\"))"),
        "{shown}"
    );
    session.send_line("q").unwrap();

    let rest = session.exp_eof().unwrap();
    assert!(!rest.contains(PROMPT), "asked again after q:\n{rest}");
    assert!(
        rest.contains("skipped CpuOffload.post_forward: declined in review"),
        "{rest}"
    );
    assert!(
        rest.contains("skipped attach.<locals>.<lambda>: not reviewed"),
        "{rest}"
    );
    assert!(
        rest.contains("Fenced 1 hook in 2 files, left 2 unfenced"),
        "{rest}"
    );
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => assert_eq!(code, 0, "{rest}"),
        other => panic!("{other:?}"),
    }

    // y: fenced; n: untouched; s: a suppression line; q: untouched.
    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def pre_forward",
            "    @torch.compiler.disable()\n    def pre_forward"
        )
    );
    assert_eq!(
        project.read_str("pkg/b.py"),
        B_PY.replace("def _to_cuda", "# hookfence: ignore\ndef _to_cuda")
    );
    // Nothing else was written.
    let mut after = project.contents();
    for rel in ["pkg/a.py", "pkg/b.py", "d.json"] {
        after.remove(Path::new(rel));
    }
    assert!(after.is_empty(), "unexpected files: {:?}", after.keys());
    assert_eq!(original.len(), 2);

    assert_eq!(
        decisions(&project, "d.json"),
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/a.py", "CpuOffload.pre_forward", 6, "fence"),
                decision("pkg/a.py", "CpuOffload.post_forward", 10, "skip"),
                decision("pkg/b.py", "_to_cuda", 4, "suppress"),
            ],
        })
    );

    // What is left unfenced is exactly what was declined or not reviewed.
    let check = project.run(&["--check", "."]);
    assert_eq!(check.code, Some(1), "{check}");
    let stdout = check.stdout_str();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{check}");
    assert!(
        lines[0].starts_with("pkg/a.py:11:5: unfenced offload hook CpuOffload.post_forward"),
        "{check}"
    );
    assert!(
        lines[1].starts_with("pkg/b.py:11:33: unfenced offload hook attach.<locals>.<lambda>"),
        "{check}"
    );
    assert!(
        check
            .stderr
            .contains("skipped _to_cuda: suppressed by `# hookfence: ignore` on line 4"),
        "{check}"
    );
}

#[test]
fn interactive_all_fences_the_rest_and_replay_reproduces_it() {
    let project = project();
    let fresh = project.contents();
    // Default colours: on, since stderr is a terminal.
    let mut session = project.spawn_pty(&["--interactive", "--decisions", "d.json", "."]);
    let shown = expect_fence(&mut session, PRE);
    assert!(
        shown.contains("\u{1b}[32m+    @torch.compiler.disable()"),
        "the added line in green:\n{shown:?}"
    );
    session.send_line("n").unwrap();
    expect_fence(&mut session, POST);
    session.send_line("a").unwrap();
    let rest = session.exp_eof().unwrap();
    assert!(!rest.contains(PROMPT), "asked again after a:\n{rest}");
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => assert_eq!(code, 0, "{rest}"),
        other => panic!("{other:?}"),
    }

    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def post_forward",
            "    @torch.compiler.disable()\n    def post_forward"
        )
    );
    assert_eq!(
        project.read_str("pkg/b.py"),
        B_PY.replace("def _to_cuda", "@torch.compiler.disable()\ndef _to_cuda")
            .replace(
                "register_forward_hook(lambda m, a, out: m.to(\"cpu\"))",
                "register_forward_hook(torch.compiler.disable(lambda m, a, out: m.to(\"cpu\")))"
            )
    );
    assert_eq!(
        decisions(&project, "d.json"),
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/a.py", "CpuOffload.pre_forward", 6, "skip"),
                decision("pkg/a.py", "CpuOffload.post_forward", 10, "fence"),
                decision("pkg/b.py", "_to_cuda", 4, "fence"),
                decision("pkg/b.py", "attach.<locals>.<lambda>", 10, "fence"),
            ],
        })
    );

    // --replay on a fresh copy of the original writes the same bytes,
    // without a terminal.
    let copy = Project::new(&[]);
    for (rel, bytes) in &fresh {
        copy.write(rel.to_str().unwrap(), bytes);
    }
    copy.write("d.json", project.read_str("d.json"));
    let run = copy.run(&["--replay", "d.json", "."]);
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(copy.contents(), project.contents());

    let check = project.run(&["--check", "."]);
    assert_eq!(check.code, Some(1), "{check}");
    assert_eq!(check.stdout_str().lines().count(), 1, "{check}");
    assert!(
        check.stdout_str().contains("CpuOffload.pre_forward"),
        "{check}"
    );
}

#[test]
fn interactive_suppress_and_fence_replay_identically() {
    let project = project();
    let fresh = project.contents();
    let mut session = project.spawn_pty(&[
        "--interactive",
        "--decisions",
        "review/d.json",
        "--color=never",
        "pkg",
    ]);
    for (header, answer) in [(PRE, "s"), (POST, "y"), (TO_CUDA, "n"), (LAMBDA, "s")] {
        expect_fence(&mut session, header);
        session.send_line(answer).unwrap();
    }
    assert_eq!(exit_code(&mut session), 0);
    // A suppression of a method goes where its decorator would.
    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def pre_forward",
            "    # hookfence: ignore\n    def pre_forward"
        )
        .replace(
            "    def post_forward",
            "    @torch.compiler.disable()\n    def post_forward"
        )
    );
    assert_eq!(
        project.read_str("pkg/b.py"),
        B_PY.replace(
            "    model.register_forward_hook(lambda",
            "    # hookfence: ignore\n    model.register_forward_hook(lambda"
        )
    );

    let copy = Project::new(&[]);
    for (rel, bytes) in &fresh {
        copy.write(rel.to_str().unwrap(), bytes);
    }
    copy.write("review/d.json", project.read_str("review/d.json"));
    // Paths are matched whatever spelling named the files.
    let run = copy.run(&["--replay", "review/d.json", "./pkg/a.py", "pkg/b.py"]);
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(copy.contents(), project.contents());

    // Replaying again over the result changes nothing and is no error.
    let again = copy.run(&["--replay", "review/d.json", "."]);
    assert_eq!(again.code, Some(0), "{again}");
    assert_eq!(copy.contents(), project.contents());
}

#[test]
fn interactive_with_nothing_to_fence_asks_nothing() {
    let project = Project::new(&[("a.py", b"x = 1\n")]);
    let mut session = project.spawn_pty(&["--interactive", "--decisions", "d.json", "."]);
    let rest = session.exp_eof().unwrap();
    assert!(!rest.contains(PROMPT), "{rest}");
    match session.process().wait().unwrap() {
        WaitStatus::Exited(_, code) => assert_eq!(code, 0, "{rest}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        decisions(&project, "d.json"),
        serde_json::json!({"version": 1, "decisions": []})
    );
    assert_eq!(project.read_str("a.py"), "x = 1\n");
}

#[test]
fn interactive_end_of_input_quits_and_keeps_the_answers() {
    let project = project();
    let mut session = project.spawn_pty(&["--interactive", "--decisions", "d.json", "."]);
    expect_fence(&mut session, PRE);
    session.send_line("y").unwrap();
    expect_fence(&mut session, POST);
    session.send_control('d').unwrap();
    assert_eq!(exit_code(&mut session), 0);
    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def pre_forward",
            "    @torch.compiler.disable()\n    def pre_forward"
        )
    );
    assert_eq!(project.read_str("pkg/b.py"), B_PY);
    assert_eq!(
        decisions(&project, "d.json")["decisions"],
        serde_json::json!([decision("pkg/a.py", "CpuOffload.pre_forward", 6, "fence")])
    );
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

#[test]
fn decisions_never_overwrite_a_file_they_did_not_save() {
    // A source file, the user's notes, an empty file, a directory: refused
    // before any question (exit 2, naming the path), every file as it was.
    for (target, what) in [
        ("pkg/a.py", "exists and is not a hookfence decisions file"),
        ("notes.json", "exists and is not a hookfence decisions file"),
        ("empty.json", "exists and is not a hookfence decisions file"),
        ("pkg", "exists and is not a regular file"),
    ] {
        let project = project();
        project.write("notes.json", b"{\"todo\": [\"keep me\"]}\n");
        project.write("empty.json", b"");
        let before = project.contents();
        let mut session = project.spawn_pty(&["--interactive", "--decisions", target, "."]);
        let rest = session.exp_eof().unwrap();
        assert!(!rest.contains(PROMPT), "{target}: asked anyway: {rest}");
        assert!(
            rest.contains(target) && rest.contains(what),
            "{target}: {rest}"
        );
        match session.process().wait().unwrap() {
            WaitStatus::Exited(_, code) => assert_eq!(code, 2, "{target}: {rest}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(project.contents(), before, "{target}: a file changed");
    }
}

#[test]
fn decisions_replace_a_decisions_file_saved_before() {
    let project = project();
    project.write("d.json", b"{\"version\": 1, \"decisions\": []}\n");
    let mut session = project.spawn_pty(&["--interactive", "--decisions", "d.json", "."]);
    expect_fence(&mut session, PRE);
    session.send_line("y").unwrap();
    expect_fence(&mut session, POST);
    session.send_line("q").unwrap();
    assert_eq!(exit_code(&mut session), 0);
    assert_eq!(
        decisions(&project, "d.json")["decisions"],
        serde_json::json!([decision("pkg/a.py", "CpuOffload.pre_forward", 6, "fence")])
    );
}

#[test]
fn decisions_never_replace_what_appears_at_the_path_while_the_user_answers() {
    // The no-clobber rule is asked again when the answers are written: a
    // file, or a symlink to one, that appears at a path that was free, and a
    // saved decisions file edited meanwhile, are all left as they are (exit
    // 2, naming the path), and no source file is written.
    let notes = "{\"todo\": [\"keep me\"]}\n";
    let saved = "{\"version\": 1, \"decisions\": []}\n";
    for case in ["file", "symlink", "edited"] {
        let project = project();
        project.write("notes.json", notes.as_bytes());
        if case == "edited" {
            project.write("d.json", saved.as_bytes());
        }
        let mut session = project.spawn_pty(&["--interactive", "--decisions", "d.json", "."]);
        expect_fence(&mut session, PRE);
        match case {
            "file" => project.write("d.json", notes.as_bytes()),
            "symlink" => std::os::unix::fs::symlink("notes.json", project.path("d.json")).unwrap(),
            _ => project.write(
                "d.json",
                b"{\"version\": 1, \"decisions\": [], \"mine\": 1}\n",
            ),
        }
        let before = project.contents();
        session.send_line("y").unwrap();
        expect_fence(&mut session, POST);
        session.send_line("q").unwrap();
        let rest = session.exp_eof().unwrap();
        assert!(
            rest.contains("d.json") && rest.contains("changed while the questions were answered"),
            "{case}: {rest}"
        );
        match session.process().wait().unwrap() {
            WaitStatus::Exited(_, code) => assert_eq!(code, 2, "{case}: {rest}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(project.contents(), before, "{case}: a file changed");
        assert_eq!(project.read_str("notes.json"), notes, "{case}");
        if case == "symlink" {
            assert!(
                std::fs::symlink_metadata(project.path("d.json"))
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "the link was replaced"
            );
        }
    }
}

#[test]
fn interactive_without_a_terminal_is_refused() {
    let project = project();
    let before = project.contents();
    let run = project.run(&["--interactive", "--decisions", "d.json", "."]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("terminal"), "{run}");
    assert!(run.stderr.contains("--replay"), "{run}");
    assert!(!run.stderr.contains(PROMPT), "{run}");
    assert_eq!(project.contents(), before, "nothing written");
}

fn assert_usage_error(project: &Project, args: &[&str]) {
    let before = project.contents();
    let run = project.run(args);
    assert_eq!(run.code, Some(2), "{args:?}: {run}");
    assert!(run.stderr.contains("--decisions"), "{args:?}: {run}");
    assert!(run.stderr.contains("Usage"), "{args:?}: {run}");
    assert_eq!(project.contents(), before, "{args:?}: nothing written");
}

#[test]
fn decisions_without_interactive_is_a_usage_error() {
    let project = project();
    assert_usage_error(&project, &["--decisions", "d.json", "."]);
    let run = project.run(&["--decisions", "d.json", "."]);
    assert!(run.stderr.contains("--interactive"), "{run}");
}

#[test]
fn decisions_with_another_mode_is_a_usage_error() {
    let project = project();
    assert_usage_error(&project, &["--apply", "--decisions", "d.json", "."]);
    assert_usage_error(&project, &["--check", "--decisions", "d.json", "."]);
    assert_usage_error(
        &project,
        &["--replay", "r.json", "--decisions", "d.json", "."],
    );
}

#[test]
fn replay_and_interactive_are_modes() {
    let project = project();
    let before = project.contents();
    let run = project.run(&["--replay", "d.json", "--check", "."]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("cannot be used with"), "{run}");
    let run = project.run(&["--replay", "d.json", "-"]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("not stdin"), "{run}");
    assert_eq!(project.contents(), before);
}

#[test]
fn replay_of_a_hook_that_no_longer_exists_writes_nothing() {
    let project = project();
    project.write(
        "d.json",
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/a.py", "CpuOffload.pre_forward", 6, "fence"),
                decision("pkg/b.py", "_renamed_hook", 4, "fence"),
            ],
        })
        .to_string(),
    );
    let before = project.contents();
    let run = project.run(&["--replay", "d.json", "."]);
    assert_eq!(run.code, Some(2), "{run}");
    assert_eq!(
        run.stderr.trim_end(),
        "hookfence: d.json: decision for pkg/b.py _renamed_hook matches no hook any more; review again with --interactive",
        "{run}"
    );
    assert_eq!(project.contents(), before, "nothing written");

    // A file that is no longer scanned counts as gone too.
    let run = project.run(&["--replay", "d.json", "pkg/a.py"]);
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("pkg/b.py _renamed_hook"), "{run}");
    assert_eq!(project.contents(), before, "nothing written");
}

#[test]
fn replay_of_a_bad_file_names_it() {
    let project = project();
    project.write("garbage.json", "fence everything, please\n");
    project.write(
        "v2.json",
        r#"{"version": 2, "decisions": [{"path": "pkg/a.py"}]}"#,
    );
    project.write("shape.json", r#"{"version": 1, "decisions": {}}"#);
    project.write(
        "answer.json",
        r#"{"version": 1, "decisions": [{"path": "pkg/a.py", "qualname": "CpuOffload.pre_forward", "line": 6, "answer": "yes"}]}"#,
    );
    let before = project.contents();
    for (file, says) in [
        ("garbage.json", "not a decisions file"),
        ("v2.json", "version 2"),
        ("shape.json", "not a decisions file"),
        ("answer.json", "yes"),
        ("missing.json", "cannot read"),
    ] {
        let run = project.run(&["--replay", file, "."]);
        assert_eq!(run.code, Some(2), "{file}: {run}");
        assert!(
            run.stderr.starts_with(&format!("hookfence: {file}: ")),
            "{file}: {run}"
        );
        assert!(run.stderr.contains(says), "{file}: {run}");
        assert_eq!(project.contents(), before, "{file}: nothing written");
    }
}

#[test]
fn replay_without_a_decision_leaves_the_hook_unfenced_with_a_note() {
    let project = project();
    project.write(
        "d.json",
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/b.py", "_to_cuda", 4, "fence"),
                decision("pkg/a.py", "CpuOffload.post_forward", 10, "suppress"),
            ],
        })
        .to_string(),
    );
    let run = project.run(&["--replay", "d.json", "."]);
    assert_eq!(run.code, Some(0), "{run}");
    for note in [
        "pkg/a.py:6:5: no decision recorded for CpuOffload.pre_forward in d.json; left unfenced",
        "pkg/b.py:10:33: no decision recorded for attach.<locals>.<lambda> in d.json; left unfenced",
    ] {
        assert!(run.stderr.contains(note), "{note}\n{run}");
    }
    assert!(
        run.stderr
            .contains("Fenced 1 hook in 2 files, left 2 unfenced"),
        "{run}"
    );
    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def post_forward",
            "    # hookfence: ignore\n    def post_forward"
        )
    );
    assert_eq!(
        project.read_str("pkg/b.py"),
        B_PY.replace("def _to_cuda", "@torch.compiler.disable()\ndef _to_cuda")
    );
}

#[test]
fn replay_with_the_wrap_strategy_creates_the_helper_only_when_used() {
    let files: [(&str, &[u8]); 3] = [
        ("pkg/__init__.py", b""),
        ("pkg/a.py", A_PY.as_bytes()),
        ("pkg/b.py", B_PY.as_bytes()),
    ];
    let skip_all = serde_json::json!({
        "version": 1,
        "decisions": [
            decision("pkg/a.py", "CpuOffload.pre_forward", 6, "skip"),
            decision("pkg/a.py", "CpuOffload.post_forward", 10, "suppress"),
            decision("pkg/b.py", "_to_cuda", 4, "skip"),
            decision("pkg/b.py", "attach.<locals>.<lambda>", 10, "skip"),
        ],
    });

    let project = Project::new(&files);
    project.write("d.json", skip_all.to_string());
    let run = project.run(&["--replay", "d.json", "--strategy", "wrap", "."]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(!project.path("pkg/_no_compile.py").exists(), "{run}");
    // The suppression is written, without the helper's import.
    assert_eq!(
        project.read_str("pkg/a.py"),
        A_PY.replace(
            "    def post_forward",
            "    # hookfence: ignore\n    def post_forward"
        )
    );
    assert_eq!(project.read_str("pkg/b.py"), B_PY);

    let mut one = skip_all.clone();
    one["decisions"][2]["answer"] = "fence".into();
    let project = Project::new(&files);
    project.write("d.json", one.to_string());
    let run = project.run(&["--replay", "d.json", "--strategy", "wrap", "."]);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(project.path("pkg/_no_compile.py").exists(), "{run}");
    let b = project.read_str("pkg/b.py");
    assert!(b.contains("@no_compile\ndef _to_cuda"), "{b}");
    assert!(!project.read_str("pkg/a.py").contains("no_compile"));
}

#[test]
fn replayed_suppressions_stand_where_cpython_reads_a_comment() {
    // The lambda's line starts inside a multi-line f-string; the method
    // follows a backslash-only line. Each comment goes above the logical
    // line, so no string changes and no line is cut short.
    let text = "import torch\nfrom accelerate.hooks import ModelHook\n\n\nclass Offload(ModelHook):\n    \\\n    def pre_forward(self, module):\n        module.to(\"cuda\")\n\n\ndef attach(model):\n    note = f\"\"\"\n{model}\n\"\"\"; model.register_forward_hook(lambda m, a, out: m.to(\"cpu\"))\n";
    let project = Project::new(&[("pkg/c.py", text.as_bytes())]);
    project.write(
        "d.json",
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/c.py", "Offload.pre_forward", 7, "suppress"),
                decision("pkg/c.py", "attach.<locals>.<lambda>", 14, "suppress"),
            ],
        })
        .to_string(),
    );
    let run = project.run(&["--replay", "d.json", "."]);
    assert_eq!(run.code, Some(0), "{run}");
    let expected = text
        .replace(
            "    \\\n    def pre_forward",
            "    # hookfence: ignore\n    \\\n    def pre_forward",
        )
        .replace(
            "    note = f\"\"\"",
            "    # hookfence: ignore\n    note = f\"\"\"",
        );
    assert_eq!(project.read_str("pkg/c.py"), expected);
    let compiled = Command::new("python3")
        .args([
            "-c",
            "import sys; compile(open(sys.argv[1], 'rb').read(), 'c.py', 'exec')",
        ])
        .arg(project.root().join("pkg/c.py"))
        .status()
        .unwrap();
    assert!(compiled.success());
    // Both hooks now read as suppressed, and no suppression is unused.
    let check = project.run(&["--check", "--all-hooks", "."]);
    assert_eq!(check.code, Some(0), "{check}");
    assert!(!check.stderr.contains("unused suppression"), "{check}");
}

#[test]
fn a_review_covers_only_through_fences_already_written() {
    // The review may leave `leave` unfenced, so what only `leave` calls is
    // not covered by it: `send_back` is asked for on its own. What only the
    // fence the authors wrote calls (`bring_in`) stays covered.
    let project = Project::new(COVERED);
    project.write(
        "d.json",
        serde_json::json!({
            "version": 1,
            "decisions": [
                decision("pkg/install.py", "install.<locals>.leave", 14, "skip"),
                decision("pkg/stages.py", "DeviceStage.send_back", 9, "fence"),
                decision("pkg/stages.py", "DeviceStage.refresh", 13, "fence"),
            ],
        })
        .to_string(),
    );
    let run = project.run(&["--replay", "d.json", "pkg"]);
    assert_eq!(run.code, Some(0), "{run}");
    let stages = project.read_str("pkg/stages.py");
    assert_eq!(
        stages.matches("@torch.compiler.disable()").count(),
        2,
        "{stages}"
    );
    assert!(
        stages.contains("@torch.compiler.disable()\n    def send_back"),
        "{stages}"
    );
    assert!(
        !project
            .read_str("pkg/install.py")
            .contains("disable()\n    def leave")
    );
    // Outside a review, the fence the authors wrote still covers.
    let list = project.run(&["--list", "pkg"]);
    assert!(
        list.stdout_str().contains("covered  DeviceStage.bring_in"),
        "{list}"
    );
}
