//! End-to-end tests of the command-line contract: the real binary, run on
//! throwaway projects in temporary directories.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

mod common;
use common::{BIN, COVERED, HOOK, HOOK_FENCED, Project, Run, python_imports, wrap_project};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

impl Project {
    fn chmod(&self, rel: &str, mode: u32) {
        fs::set_permissions(self.path(rel), fs::Permissions::from_mode(mode)).unwrap();
    }

    fn mode(&self, rel: &str) -> u32 {
        fs::metadata(self.path(rel)).unwrap().permissions().mode() & 0o7777
    }

    fn mkfifo(&self, rel: &str) {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("run mkfifo");
        assert!(status.success(), "mkfifo {} failed", path.display());
    }

    fn symlink(&self, target: &str, link: &str) {
        let path = self.path(link);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// A hookfence command with its cwd at the project root.
    fn cmd(&self) -> Cmd {
        let mut cmd = Cmd::new(BIN, self.root());
        cmd.env_remove("NO_COLOR");
        cmd
    }

    /// Runs hookfence with `args` at the project root.
    fn run(&self, args: &[&str]) -> Run {
        self.cmd().args(args).run()
    }

    /// Runs `git` at the project root and asserts it succeeded.
    fn git(&self, args: &[&str]) -> Run {
        let run = git_cmd(self.root()).args(args).run();
        assert_eq!(run.code, Some(0), "git {args:?} failed:\n{run}");
        run
    }

    /// Makes the project a git work tree.
    fn git_init(&self) {
        self.git(&["-c", "init.defaultBranch=main", "init", "-q"]);
    }

    /// Copies the project's regular files (with their permissions) into a
    /// new project.
    fn copy(&self) -> Project {
        let copy = Project::new(&[]);
        for (rel, state) in self.snapshot().0 {
            if let Kind::File(bytes) = &state.kind {
                let rel = rel.to_str().unwrap();
                copy.write(rel, bytes);
                copy.chmod(rel, state.mode);
            }
        }
        copy
    }

    /// Every entry below the root (except `.git`), with what identifies a
    /// change: bytes, mtime, inode, mode, kind.
    fn snapshot(&self) -> Snapshot {
        let mut entries = BTreeMap::new();
        snapshot_into(self.root(), self.root(), &mut entries);
        Snapshot(entries)
    }

    /// Just the regular files' bytes.
    fn contents(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.snapshot()
            .0
            .into_iter()
            .filter_map(|(rel, s)| match s.kind {
                Kind::File(bytes) => Some((rel, bytes)),
                _ => None,
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink(PathBuf),
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct EntryState {
    kind: Kind,
    mtime: SystemTime,
    ino: u64,
    mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot(BTreeMap<PathBuf, EntryState>);

impl Snapshot {
    fn get(&self, rel: &str) -> &EntryState {
        self.0
            .get(Path::new(rel))
            .unwrap_or_else(|| panic!("{rel} not in snapshot"))
    }

    /// Asserts that nothing at all changed between two snapshots, naming
    /// what did.
    fn assert_same(&self, after: &Snapshot, what: &str) {
        let changed: Vec<_> = self
            .0
            .keys()
            .chain(after.0.keys())
            .filter(|k| self.0.get(*k) != after.0.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "{what}: entries changed on disk: {changed:?}"
        );
    }
}

fn snapshot_into(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, EntryState>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap().to_path_buf();
        if rel == Path::new(".git") {
            continue;
        }
        let meta = fs::symlink_metadata(&path).unwrap();
        let kind = if meta.file_type().is_symlink() {
            Kind::Symlink(fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
            Kind::Dir
        } else if meta.is_file() {
            Kind::File(fs::read(&path).unwrap())
        } else {
            Kind::Other
        };
        let is_dir = kind == Kind::Dir;
        out.insert(
            rel,
            EntryState {
                kind,
                // A directory's mtime changes whenever a temporary file comes
                // and goes; files are what matter.
                mtime: if is_dir {
                    SystemTime::UNIX_EPOCH
                } else {
                    meta.modified().unwrap()
                },
                ino: meta.ino(),
                mode: meta.mode() & 0o7777,
            },
        );
        if is_dir {
            snapshot_into(root, &path, out);
        }
    }
}

/// A command to run with a timeout and captured output.
struct Cmd {
    command: Command,
}

impl Cmd {
    fn new(program: impl AsRef<std::ffi::OsStr>, cwd: &Path) -> Cmd {
        let mut command = Command::new(program);
        command.current_dir(cwd);
        Cmd { command }
    }

    fn arg(mut self, arg: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.command.arg(arg);
        self
    }

    fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Cmd {
        self.command.env(key, value);
        self
    }

    fn env_remove(&mut self, key: &str) {
        self.command.env_remove(key);
    }

    fn current_dir(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.command.current_dir(dir);
        self
    }

    /// Runs to completion (stdin closed, stdout/stderr piped), failing the
    /// test if it takes longer than [`TIMEOUT`].
    fn run(mut self) -> Run {
        let child = self
            .command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", self.command));
        common::finish(child, &format!("{:?}", self.command)).into()
    }
}

fn git_cmd(cwd: &Path) -> Cmd {
    // Keep the user's and the system's git configuration out, and stop git
    // from finding a repository above the temporary directory.
    let ceiling = cwd.parent().unwrap_or(cwd).to_path_buf();
    Cmd::new("git", cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CEILING_DIRECTORIES", ceiling)
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("stdout is UTF-8")
    }

    /// The paths of the `--- a/<path>` diff headers, in output order, each
    /// checked to be followed by its `+++ b/<path>`. A tab ends the name, as
    /// in any unified diff.
    fn diff_paths(&self) -> Vec<String> {
        let stdout = String::from_utf8_lossy(&self.stdout);
        let lines: Vec<&str> = stdout.lines().collect();
        let name = |line: &str, prefix: &str| {
            line.strip_prefix(prefix)
                .map(|rest| rest.split('\t').next().unwrap_or(rest).to_owned())
        };
        let mut paths = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some(path) = name(line, "--- a/") {
                assert_eq!(
                    lines.get(i + 1).and_then(|l| name(l, "+++ b/")),
                    Some(path.clone()),
                    "`--- a/{path}` not followed by its `+++` header\n{self}"
                );
                paths.push(path);
            }
        }
        paths
    }

    fn stderr_lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }

    /// The last stderr line: the summary.
    fn summary(&self) -> &str {
        self.stderr.lines().last().unwrap_or("")
    }
}

fn has_ansi(bytes: &[u8]) -> bool {
    bytes.windows(2).any(|w| w == b"\x1b[")
}

fn assert_no_temp_files(project: &Project) {
    let leftovers: Vec<_> = project
        .snapshot()
        .0
        .into_keys()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".hookfence-") || n.ends_with(".tmp"))
        })
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

// ---------------------------------------------------------------------------
// Python sources
// ---------------------------------------------------------------------------

/// An accelerate-style hook with two offload entry points.
const ALIGN: &str = r#"import torch
from accelerate.hooks import ModelHook
from accelerate.utils import send_to_device, set_module_tensor_to_device


class AlignDevicesHook(ModelHook):
    def __init__(self, execution_device=None):
        self.execution_device = execution_device

    def pre_forward(self, module, *args, **kwargs):
        set_module_tensor_to_device(module, "weight", self.execution_device)
        return send_to_device(args, self.execution_device), kwargs

    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;

/// A hook that does no offload work: left alone, with a note.
const NOT_OFFLOAD: &str = r#"import torch
from accelerate.hooks import ModelHook


class LoggingHook(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        print("forward", type(module).__name__)
        return args, kwargs
"#;

/// A module docstring, no torch import, one offload hook.
const DOC_NO_TORCH: &str = r#""""Hooks that move modules between devices."""
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#;

/// [`DOC_NO_TORCH`] after hookfence.
const DOC_NO_TORCH_FENCED: &str = r#""""Hooks that move modules between devices."""
import torch
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    @torch.compiler.disable()
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#;

/// [`HOOK`] followed by a syntax error on line 12. It holds a hook so that
/// no shortcut can skip parsing it.
fn syntax_error() -> String {
    format!("{HOOK}\ndef f(:\n")
}

/// No hooks at all.
const PLAIN: &str = "def helper(x):\n    return x + 1\n";

/// `HOOK` with CRLF line endings.
fn crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

/// `HOOK` without its final newline.
fn no_final_newline(text: &str) -> String {
    text.strip_suffix('\n').unwrap().to_owned()
}

// ---------------------------------------------------------------------------
// 1. Dry run
// ---------------------------------------------------------------------------

#[test]
fn dry_run_prints_sorted_diff_and_changes_nothing() {
    let p = Project::new(&[
        ("b.py", HOOK.as_bytes()),
        ("a.py", HOOK.as_bytes()),
        ("pkg/c.py", ALIGN.as_bytes()),
        ("pkg/util.py", PLAIN.as_bytes()),
        ("README.md", b"# demo\n"),
    ]);
    let before = p.snapshot();

    let run = p.run(&[]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["a.py", "b.py", "pkg/c.py"], "\n{run}");
    let stdout = run.stdout();
    assert!(stdout.contains("+    @torch.compiler.disable()\n"), "{run}");
    assert_eq!(
        stdout.matches("+    @torch.compiler.disable()").count(),
        4,
        "one added line per offload hook\n{run}"
    );
    assert!(!stdout.contains("--- a/pkg/util.py"), "{run}");
    let lines = run.stderr_lines();
    assert_eq!(lines.len(), 1, "stderr is just the summary\n{run}");
    assert!(
        lines[0].starts_with("Would fence 4 hooks in 3 files"),
        "{run}"
    );
    before.assert_same(&p.snapshot(), "dry run");

    // Paths as given, relative to cwd, in sorted order whatever the argument order.
    let run = p.run(&["pkg", "b.py", "./a.py"]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["a.py", "b.py", "pkg/c.py"], "\n{run}");
    let run = p.run(&["./pkg"]);
    assert_eq!(run.diff_paths(), ["pkg/c.py"], "\n{run}");
    let run = p.cmd().current_dir(p.path("pkg")).arg("c.py").run();
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["c.py"], "\n{run}");
    let run = p.cmd().current_dir(p.path("pkg")).run();
    assert_eq!(run.diff_paths(), ["c.py"], "\n{run}");

    before.assert_same(&p.snapshot(), "dry runs");
}

/// Run from inside a package whose import root lies above the working
/// directory, the modules a step's evidence passes through print as the
/// walk spells files (`weights.py:9`), never as absolute paths, and the
/// answer is the one a run from the project root gives.
#[test]
fn evidence_from_inside_a_package_is_spelled_like_the_walk() {
    const RUNNER: &str = "import torch\n\nfrom pkg.offload.manager import Streamer\n\n\nclass Runner:\n    def __init__(self):\n        self.streamer = Streamer()\n\n    @torch.compile\n    def infer(self, blocks, x):\n        return self._run(blocks, x)\n\n    def _run(self, blocks, x):\n        for i in range(len(blocks)):\n            self.streamer.prefetch(blocks, i)\n            x = x @ blocks[i].weight\n        return x\n";
    const MANAGER: &str = "import torch\n\n\nclass Streamer:\n    def __init__(self):\n        self.active = [None, None]\n        self.load_stream = torch.cuda.Stream()\n\n    def prefetch(self, blocks, index):\n        with torch.cuda.stream(self.load_stream):\n            self.active[1] = blocks[index]\n            self.active[1].load_async()\n";
    const WEIGHTS: &str = "class BlockWeights:\n    def load(self, state):\n        self.weight = state[\"weight\"]\n\n    def load_async(self):\n        self.weight = self.weight.cuda(non_blocking=True)\n";
    let p = Project::new(&[
        ("pyproject.toml", b""),
        ("pkg/__init__.py", b""),
        ("pkg/runner.py", RUNNER.as_bytes()),
        ("pkg/offload/manager.py", MANAGER.as_bytes()),
        ("pkg/weights.py", WEIGHTS.as_bytes()),
    ]);
    let from_root = p.run(&["--list", "."]);
    from_root.expect_code(0);
    assert!(
        from_root
            .stdout()
            .contains("pkg/runner.py:14:5  unfenced  Runner._run"),
        "{from_root}"
    );
    assert!(
        from_root.stdout().contains("(pkg/weights.py:6)"),
        "{from_root}"
    );
    let inside = p
        .cmd()
        .current_dir(p.path("pkg"))
        .args(["--list", "."])
        .run();
    inside.expect_code(0);
    let stdout = inside.stdout();
    assert!(
        !stdout.contains(&p.root().display().to_string()),
        "no absolute path\n{inside}"
    );
    assert!(
        stdout.contains("runner.py:14:5  unfenced  Runner._run"),
        "{inside}"
    );
    assert!(stdout.contains("(weights.py:6)"), "{inside}");
    assert_eq!(
        stdout.replace("pkg/", ""),
        from_root.stdout().replace("pkg/", ""),
        "the same answer from the root and from inside the package"
    );
}

#[test]
fn dry_run_with_nothing_to_do_prints_no_diff() {
    let p = Project::new(&[("a.py", HOOK_FENCED.as_bytes()), ("b.py", PLAIN.as_bytes())]);
    let run = p.run(&[]);
    run.expect_code(0);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(
        run.summary().starts_with("Would fence 0 hooks in 0 files"),
        "{run}"
    );
}

// ---------------------------------------------------------------------------
// 2. The diff applies, and gives what --apply gives
// ---------------------------------------------------------------------------

#[test]
fn diff_applies_with_git_and_patch_and_matches_apply() {
    let mut latin1 = b"# -*- coding: latin-1 -*-\n# Auteur: Ren\xE9\n".to_vec();
    latin1.extend_from_slice(HOOK.as_bytes());
    let mut bom = b"\xEF\xBB\xBF".to_vec();
    bom.extend_from_slice(HOOK.as_bytes());
    // BOM, CRLF and no torch import: the first line is in the hunk.
    let mut bom_crlf = b"\xEF\xBB\xBF".to_vec();
    bom_crlf.extend_from_slice(crlf(DOC_NO_TORCH).as_bytes());
    let p = Project::new(&[
        ("crlf.py", crlf(HOOK).as_bytes()),
        ("no_newline.py", no_final_newline(ALIGN).as_bytes()),
        ("no_newline_hook_last.py", no_final_newline(HOOK).as_bytes()),
        ("pkg/align.py", ALIGN.as_bytes()),
        ("pkg/latin1.py", &latin1),
        ("pkg/bom.py", &bom),
        ("pkg/bom_crlf.py", &bom_crlf),
        ("pkg/plain.py", PLAIN.as_bytes()),
    ]);
    let applied = p.copy();
    let original = p.contents();

    let run = p.run(&[]);
    run.expect_code(0);
    assert_eq!(
        run.diff_paths(),
        [
            "crlf.py",
            "no_newline.py",
            "no_newline_hook_last.py",
            "pkg/align.py",
            "pkg/bom.py",
            "pkg/bom_crlf.py",
            "pkg/latin1.py"
        ],
        "\n{run}"
    );
    let patch_dir = tempfile::tempdir().unwrap();
    let patch = patch_dir.path().join("fence.patch");
    fs::write(&patch, &run.stdout).unwrap();

    let check = git_cmd(p.root())
        .args(["apply", "--check"])
        .arg(&patch)
        .run();
    assert_eq!(check.code, Some(0), "git apply --check\n{check}");
    let dry = Cmd::new("patch", p.root())
        .args(["-p1", "--dry-run", "--batch", "-i"])
        .arg(&patch)
        .run();
    assert_eq!(dry.code, Some(0), "patch -p1 --dry-run\n{dry}");
    assert!(!dry.stderr.contains("Stripping trailing CRs"), "{dry}");
    assert_eq!(p.contents(), original, "checks changed files");

    let apply = git_cmd(p.root()).arg("apply").arg(&patch).run();
    assert_eq!(apply.code, Some(0), "git apply\n{apply}");

    let run = applied.run(&["--apply"]);
    run.expect_code(0);
    let patched = p.contents();
    let written = applied.contents();
    for (path, bytes) in &written {
        assert_eq!(
            patched.get(path).map(|b| String::from_utf8_lossy(b)),
            Some(String::from_utf8_lossy(bytes)),
            "{}: git apply and --apply disagree",
            path.display()
        );
    }
    assert_eq!(patched, written);
    assert_ne!(written, original, "--apply changed something");

    // The special cases came out right.
    assert_eq!(
        applied.read_str("crlf.py"),
        crlf(HOOK_FENCED),
        "CRLF kept, also on the inserted line"
    );
    assert_eq!(
        applied.read_str("no_newline_hook_last.py"),
        no_final_newline(HOOK_FENCED)
    );
    assert!(!applied.read("no_newline.py").ends_with(b"\n"));
    assert!(applied.read("pkg/bom.py").starts_with(b"\xEF\xBB\xBF"));
    let mut expected = b"\xEF\xBB\xBF".to_vec();
    expected.extend_from_slice(crlf(DOC_NO_TORCH_FENCED).as_bytes());
    assert_eq!(
        String::from_utf8_lossy(&applied.read("pkg/bom_crlf.py")),
        String::from_utf8_lossy(&expected)
    );
    assert!(
        applied
            .read("pkg/latin1.py")
            .windows(5)
            .any(|w| w == b"Ren\xE9\n"),
        "latin-1 bytes kept"
    );
    assert_eq!(applied.read("pkg/plain.py"), PLAIN.as_bytes());
}

/// Runs the dry run on `p` and checks that `git apply --check` and
/// `patch -p1 --dry-run` both take its diff.
fn assert_diff_applies(p: &Project) {
    let run = p.run(&["-q"]);
    run.expect_code(0);
    assert!(!run.stdout.is_empty(), "{run}");
    let patch_dir = tempfile::tempdir().unwrap();
    let patch = patch_dir.path().join("fence.patch");
    fs::write(&patch, &run.stdout).unwrap();
    let check = git_cmd(p.root())
        .args(["apply", "--check"])
        .arg(&patch)
        .run();
    assert_eq!(check.code, Some(0), "git apply --check\n{check}\n{run}");
    let dry = Cmd::new("patch", p.root())
        .args(["-p1", "--dry-run", "--batch", "-i"])
        .arg(&patch)
        .run();
    assert_eq!(dry.code, Some(0), "patch -p1 --dry-run\n{dry}\n{run}");
}

#[test]
fn diff_with_non_ascii_path_applies() {
    assert_diff_applies(&Project::new(&[("caf\u{e9}/hook.py", HOOK.as_bytes())]));
}

// GNU patch ends an unquoted name at whitespace unless a tab follows it, so a
// name with a space ends with a tab, as `git diff` writes it.
#[test]
fn diff_with_spaces_in_path_applies() {
    assert_diff_applies(&Project::new(&[("my dir/my hook.py", HOOK.as_bytes())]));
}

// On Unix a backslash is part of the file name, not a separator.
#[test]
fn diff_with_backslash_in_file_name_applies() {
    assert_diff_applies(&Project::new(&[("we\\ird.py", HOOK.as_bytes())]));
}

// ---------------------------------------------------------------------------
// 3. --apply
// ---------------------------------------------------------------------------

#[test]
fn apply_writes_atomically_and_keeps_permissions() {
    let tool = format!("#!/usr/bin/env python3\n{HOOK}");
    let p = Project::new(&[
        ("hooks.py", HOOK.as_bytes()),
        ("bin/tool.py", tool.as_bytes()),
        ("plain.py", PLAIN.as_bytes()),
        ("pkg/notes.txt", HOOK.as_bytes()),
        ("pkg/fenced.py", HOOK_FENCED.as_bytes()),
    ]);
    p.chmod("hooks.py", 0o640);
    p.chmod("bin/tool.py", 0o755);
    let before = p.snapshot();

    let run = p.run(&["--apply"]);
    run.expect_code(0);
    assert!(run.stdout.is_empty(), "--apply prints no diff\n{run}");
    assert!(
        run.summary().starts_with("Fenced 2 hooks in 2 files"),
        "{run}"
    );

    assert_eq!(p.read_str("hooks.py"), HOOK_FENCED);
    assert_eq!(
        p.read_str("bin/tool.py"),
        format!("#!/usr/bin/env python3\n{HOOK_FENCED}")
    );
    assert_eq!(p.mode("hooks.py"), 0o640);
    assert_eq!(p.mode("bin/tool.py"), 0o755);
    assert_no_temp_files(&p);

    let after = p.snapshot();
    for untouched in ["plain.py", "pkg/notes.txt", "pkg/fenced.py"] {
        assert_eq!(
            before.get(untouched),
            after.get(untouched),
            "{untouched} was touched"
        );
    }

    // Idempotent: a second run changes nothing at all.
    let run = p.run(&["--apply"]);
    run.expect_code(0);
    assert!(
        run.summary().starts_with("Fenced 0 hooks in 0 files"),
        "{run}"
    );
    after.assert_same(&p.snapshot(), "second --apply");

    let run = p.run(&["--check"]);
    run.expect_code(0);
    assert!(
        run.summary().starts_with("No unfenced offload hooks"),
        "{run}"
    );
    let run = p.run(&[]);
    run.expect_code(0);
    assert!(run.stdout.is_empty(), "{run}");
}

// ---------------------------------------------------------------------------
// 4. --check
// ---------------------------------------------------------------------------

#[test]
fn check_exits_1_on_unfenced_hook_and_writes_nothing() {
    let p = Project::new(&[("a.py", HOOK.as_bytes()), ("b.py", HOOK_FENCED.as_bytes())]);
    let before = p.snapshot();
    let run = p.run(&["--check"]);
    run.expect_code(1);
    assert!(
        run.summary()
            .starts_with("1 offload hook unfenced in 1 file"),
        "{run}"
    );
    before.assert_same(&p.snapshot(), "--check");
    assert_no_temp_files(&p);

    // Only the unfenced file matters.
    p.run(&["--check", "b.py"]).expect_code(0);
    p.run(&["--check", "a.py"]).expect_code(1);
}

#[test]
fn check_exits_0_on_clean_tree() {
    let p = Project::new(&[
        ("a.py", HOOK_FENCED.as_bytes()),
        ("b.py", PLAIN.as_bytes()),
        ("c.py", NOT_OFFLOAD.as_bytes()),
    ]);
    let run = p.run(&["--check"]);
    run.expect_code(0);
    assert!(
        run.summary().starts_with("No unfenced offload hooks"),
        "{run}"
    );
    // An empty directory is clean too.
    let empty = Project::new(&[]);
    empty.run(&["--check"]).expect_code(0);
}

#[test]
fn check_with_all_hooks_counts_hooks_without_offload_work() {
    let p = Project::new(&[("c.py", NOT_OFFLOAD.as_bytes())]);
    p.run(&["--check"]).expect_code(0);
    p.run(&["--check", "--all-hooks"]).expect_code(1);
}

const BACKWARD_SWAP: &str = "import torch\n\n\ndef evict(module, grad_input, grad_output):\n    module.to(\"cpu\", non_blocking=True)\n\n\ndef attach(block):\n    block.register_full_backward_hook(evict)\n";

#[test]
fn backward_offload_hooks_are_listed_not_fenced_and_check_passes() {
    // tests/torch/RESULTS.md ("Backward hooks"): fencing a backward hook
    // changes nothing without compiled autograd and adds graph breaks with
    // it, so hookfence names it and leaves it alone, even with --all-hooks.
    let p = Project::new(&[("swap.py", BACKWARD_SWAP.as_bytes())]);
    let before = p.snapshot();
    for args in [&["--check"][..], &["--check", "--all-hooks"], &["--apply"]] {
        let run = p.run(args);
        run.expect_code(0);
        assert!(
            run.summary().contains("1 backward hook left unfenced"),
            "{args:?}\n{run}"
        );
        assert!(
            run.stderr.contains(
                "swap.py:4:1: skipped evict: backward hook that moves `module` via .to(...) (registered with register_full_backward_hook at swap.py:9); backward hooks are not fenced"
            ),
            "{args:?}\n{run}"
        );
    }
    before.assert_same(&p.snapshot(), "--apply on a backward hook");
    let list = p.run(&["--list"]);
    list.expect_code(0);
    assert!(
        list.stdout_str().contains("swap.py:4:1  backward  evict  moves `module` via .to(...); backward hooks are not fenced"),
        "{list}"
    );
    let run = p.run(&["--format", "json", "."]);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["sites"][0]["status"], "backward", "{run}");
    assert_eq!(doc["summary"]["unfenced"], 0, "{run}");
}

#[test]
fn backward_hooks_without_offload_work_are_not_offload_and_all_hooks_does_not_fence_them() {
    let logging = "import logging\n\nlog = logging.getLogger(__name__)\n\n\ndef grads(module, grad_input, grad_output):\n    log.info(\"%s\", [g.norm().item() for g in grad_output])\n\n\ndef watch(layer):\n    layer.register_full_backward_hook(grads)\n";
    let p = Project::new(&[("watch.py", logging.as_bytes())]);
    let before = p.snapshot();
    let run = p.run(&["--check"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains(
            "watch.py:6:1: skipped grads: not offload: no effect on module state in its body or in what it calls (registered with register_full_backward_hook at watch.py:11); backward hooks are never fenced"
        ),
        "{run}"
    );
    let list = p.run(&["--list"]);
    assert!(
        list.stdout_str()
            .contains("watch.py:6:1  not-offload  grads"),
        "{list}"
    );
    // --all-hooks fences every forward hook, but a backward one stays listed.
    p.run(&["--check", "--all-hooks"]).expect_code(0);
    p.run(&["--apply", "--all-hooks"]).expect_code(0);
    let list = p.run(&["--list", "--all-hooks"]);
    assert!(
        list.stdout_str()
            .contains("watch.py:6:1  backward  grads  --all-hooks"),
        "{list}"
    );
    before.assert_same(&p.snapshot(), "--apply --all-hooks on a backward hook");
}

#[test]
fn check_and_apply_together_is_a_usage_error() {
    let p = Project::new(&[("a.py", HOOK.as_bytes())]);
    let before = p.snapshot();
    for args in [["--check", "--apply"], ["--apply", "--check"]] {
        let run = p.run(&args);
        run.expect_code(2);
        assert!(run.stdout.is_empty(), "{run}");
        assert!(run.stderr.contains("--check"), "{run}");
        assert!(run.stderr.contains("--apply"), "{run}");
        assert!(run.stderr.contains("Usage:"), "{run}");
    }
    before.assert_same(&p.snapshot(), "usage error");
    // Other usage errors are 2 as well.
    p.run(&["--no-such-flag"]).expect_code(2);
    p.run(&["--color", "sometimes"]).expect_code(2);
    p.run(&["-j", "many"]).expect_code(2);
    before.assert_same(&p.snapshot(), "usage errors");
}

// ---------------------------------------------------------------------------
// 5. Errors
// ---------------------------------------------------------------------------

/// The stderr line that reports `path` at `line:<col>`, checked to have the
/// shape `path:line:col: message — left unchanged`.
fn error_line<'a>(run: &'a Run, path: &str, line: usize) -> &'a str {
    let prefix = format!("{path}:{line}:");
    let found = run
        .stderr_lines()
        .into_iter()
        .find(|l| l.contains(&prefix))
        .unwrap_or_else(|| panic!("no error for {prefix}\n{run}"));
    let rest = &found[found.find(&prefix).unwrap() + prefix.len()..];
    let (col, msg) = rest.split_once(": ").unwrap_or(("", ""));
    assert!(
        col.parse::<usize>().is_ok_and(|c| c >= 1),
        "no column in {found:?}"
    );
    assert!(!msg.is_empty(), "no message in {found:?}");
    assert!(
        found.ends_with(" \u{2014} left unchanged"),
        "no `— left unchanged` tail in {found:?}"
    );
    found
}

#[test]
fn bad_files_are_reported_and_left_alone_while_good_ones_are_fixed() {
    // Both bad files hold a hook, so being rewritten would show.
    let syntax = syntax_error();
    let mut invalid = b"import torch\n# caf\xE9\n".to_vec();
    invalid.extend_from_slice(HOOK.strip_prefix("import torch\n").unwrap().as_bytes());
    let p = Project::new(&[
        ("bad_syntax.py", syntax.as_bytes()),
        ("bad_utf8.py", &invalid),
        ("good.py", HOOK.as_bytes()),
    ]);

    // Dry run: the good file's diff, the errors, exit 2.
    let run = p.run(&[]);
    run.expect_code(2);
    assert_eq!(run.diff_paths(), ["good.py"], "\n{run}");
    error_line(&run, "bad_syntax.py", 12);
    let utf8 = error_line(&run, "bad_utf8.py", 2);
    assert!(utf8.contains("bad_utf8.py:2:6: "), "{utf8:?}");
    assert!(run.summary().contains("2 skipped"), "{run}");

    // --apply: the good file is rewritten, the bad ones are not.
    let run = p.run(&["--apply"]);
    run.expect_code(2);
    error_line(&run, "bad_syntax.py", 12);
    error_line(&run, "bad_utf8.py", 2);
    assert_eq!(p.read("bad_syntax.py"), syntax.as_bytes());
    assert_eq!(p.read("bad_utf8.py"), invalid);
    assert_eq!(p.read_str("good.py"), HOOK_FENCED);
    assert_no_temp_files(&p);

    // --check still reports errors with 2, not 1.
    p.write("good.py", HOOK);
    p.run(&["--check"]).expect_code(2);
}

#[test]
fn nonexistent_path_is_an_error_but_the_rest_is_processed() {
    let p = Project::new(&[("good.py", HOOK.as_bytes())]);
    let run = p.run(&["missing.py"]);
    run.expect_code(2);
    assert!(run.stderr.contains("missing.py"), "{run}");

    let run = p.run(&["--apply", "missing_dir", "good.py"]);
    run.expect_code(2);
    assert!(run.stderr.contains("missing_dir"), "{run}");
    assert_eq!(p.read_str("good.py"), HOOK_FENCED);
    assert!(!p.path("missing_dir").exists());
}

#[test]
fn fifo_in_a_walked_directory_is_skipped_without_hanging() {
    let p = Project::new(&[("d/good.py", HOOK.as_bytes())]);
    p.mkfifo("d/x.py");

    let run = p.run(&["d"]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["d/good.py"], "\n{run}");

    let run = p.run(&["--apply", "d"]);
    run.expect_code(0);
    assert_eq!(p.read_str("d/good.py"), HOOK_FENCED);
    assert!(
        fs::symlink_metadata(p.path("d/x.py"))
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO is still a FIFO"
    );
}

#[test]
fn fifo_named_explicitly_is_not_a_regular_file() {
    let p = Project::new(&[("good.py", HOOK.as_bytes())]);
    p.mkfifo("x.py");
    let run = p.run(&["x.py", "good.py"]);
    run.expect_code(2);
    assert!(
        run.stderr_lines()
            .iter()
            .any(|l| l.contains("x.py: not a regular file")),
        "{run}"
    );
    assert_eq!(run.diff_paths(), ["good.py"], "\n{run}");
}

// ---------------------------------------------------------------------------
// 6. Discovery
// ---------------------------------------------------------------------------

#[test]
fn discovery_honours_gitignore_hidden_dirs_and_extensions() {
    let p = Project::new(&[
        (".gitignore", b"build/\n*.gen.py\n"),
        ("build/hook.py", HOOK.as_bytes()),
        ("src/model.gen.py", HOOK.as_bytes()),
        (".venv/lib/site.py", HOOK.as_bytes()),
        (".hidden.py", HOOK.as_bytes()),
        ("src/hook.py", HOOK.as_bytes()),
        ("src/hook.txt", HOOK.as_bytes()),
        ("src/hook.pyi", HOOK.as_bytes()),
        ("src/hook.py.bak", HOOK.as_bytes()),
        ("src/Makefile", HOOK.as_bytes()),
        ("scripts/train", HOOK.as_bytes()),
    ]);
    p.git_init();

    let run = p.run(&[]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["src/hook.py"], "\n{run}");
    assert!(run.summary().contains("1 file scanned"), "{run}");

    let run = p.run(&["src"]);
    assert_eq!(run.diff_paths(), ["src/hook.py"], "\n{run}");

    // Named explicitly: processed whatever the ignore rules say.
    let run = p.run(&[
        "build/hook.py",
        ".venv/lib/site.py",
        "src/model.gen.py",
        "src",
    ]);
    run.expect_code(0);
    assert_eq!(
        run.diff_paths(),
        [
            ".venv/lib/site.py",
            "build/hook.py",
            "src/hook.py",
            "src/model.gen.py"
        ],
        "\n{run}"
    );

    // Whatever its name, too.
    let run = p.run(&["scripts/train", "src/hook.pyi"]);
    run.expect_code(0);
    assert_eq!(
        run.diff_paths(),
        ["scripts/train", "src/hook.pyi"],
        "\n{run}"
    );

    let run = p.run(&["--apply", "--allow-dirty", "build/hook.py", "scripts/train"]);
    run.expect_code(0);
    assert_eq!(p.read_str("build/hook.py"), HOOK_FENCED);
    assert_eq!(p.read_str("scripts/train"), HOOK_FENCED);
    assert_eq!(p.read_str("src/hook.py"), HOOK);
    assert_eq!(p.read_str("src/hook.txt"), HOOK);
}

#[test]
fn duplicate_paths_are_processed_once() {
    let p = Project::new(&[("pkg/a.py", HOOK.as_bytes())]);
    let run = p.run(&["pkg", "pkg/a.py", "./pkg/a.py"]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["pkg/a.py"], "\n{run}");
    let run = p.run(&["--apply", "pkg", "pkg/a.py"]);
    run.expect_code(0);
    assert_eq!(p.read_str("pkg/a.py"), HOOK_FENCED);
}

// ---------------------------------------------------------------------------
// 7. Colour
// ---------------------------------------------------------------------------

fn colour_project() -> Project {
    // A hook to diff plus a bad file, so both streams have something to colour.
    Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("bad.py", syntax_error().as_bytes()),
    ])
}

#[test]
fn no_colour_when_not_a_terminal() {
    let p = colour_project();
    let run = p.run(&[]);
    run.expect_code(2);
    assert!(!run.stdout.is_empty());
    assert!(!has_ansi(&run.stdout), "{run}");
    assert!(!has_ansi(run.stderr.as_bytes()), "{run}");

    let run = p.run(&["--color", "never"]);
    assert!(
        !has_ansi(&run.stdout) && !has_ansi(run.stderr.as_bytes()),
        "{run}"
    );

    let run = p.cmd().env("NO_COLOR", "1").args(["--color", "auto"]).run();
    assert!(
        !has_ansi(&run.stdout) && !has_ansi(run.stderr.as_bytes()),
        "{run}"
    );
}

#[test]
fn colour_always_colours_both_streams() {
    let p = colour_project();
    let run = p.run(&["--color", "always"]);
    run.expect_code(2);
    assert!(has_ansi(&run.stdout), "{run}");
    assert!(has_ansi(run.stderr.as_bytes()), "{run}");
    // An explicit request beats NO_COLOR.
    let run = p
        .cmd()
        .env("NO_COLOR", "1")
        .args(["--color", "always"])
        .run();
    assert!(has_ansi(&run.stdout), "{run}");
    // Without the escapes, the coloured diff is the plain one.
    let plain = p.run(&[]);
    let stripped = regex::bytes::Regex::new(r"\x1b\[[0-9;]*m")
        .unwrap()
        .replace_all(&run.stdout, &b""[..])
        .into_owned();
    assert_eq!(stripped, plain.stdout);
}

/// Runs hookfence on a pseudo-terminal via util-linux `script`, so that
/// `--color auto` sees a terminal.
fn run_on_tty(p: &Project, no_color: Option<&str>, args: &str) -> Run {
    let available = Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        available,
        "this test needs util-linux `script` to get a pseudo-terminal"
    );
    let mut cmd = Cmd::new("script", p.root())
        .args(["-q", "-e", "-c"])
        .arg(format!("'{BIN}' {args}"))
        .arg("/dev/null");
    cmd.env_remove("NO_COLOR");
    if let Some(value) = no_color {
        cmd = cmd.env("NO_COLOR", value);
    }
    cmd.run()
}

#[test]
fn colour_auto_on_a_terminal_respects_no_color() {
    let p = Project::new(&[("a.py", HOOK.as_bytes())]);
    let run = run_on_tty(&p, None, "--color auto");
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("a/a.py"),
        "{run}"
    );
    assert!(has_ansi(&run.stdout), "auto colours a terminal\n{run}");

    let run = run_on_tty(&p, Some("1"), "--color auto");
    assert_eq!(run.code, Some(0), "{run}");
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("a/a.py"),
        "{run}"
    );
    assert!(!has_ansi(&run.stdout), "NO_COLOR=1 turns it off\n{run}");

    // NO_COLOR set but empty does not count (no-color.org).
    let run = run_on_tty(&p, Some(""), "");
    assert!(has_ansi(&run.stdout), "{run}");
}

// ---------------------------------------------------------------------------
// 8. Quiet
// ---------------------------------------------------------------------------

#[test]
fn quiet_suppresses_notes_and_summary() {
    let p = Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("logging_hook.py", NOT_OFFLOAD.as_bytes()),
    ]);
    // Without -q: a note for the hook left alone, and the summary.
    let loud = p.run(&[]);
    loud.expect_code(0);
    assert!(
        loud.stderr_lines()
            .iter()
            .any(|l| l.starts_with("logging_hook.py:6:") && l.contains("LoggingHook.pre_forward")),
        "{loud}"
    );
    assert!(loud.summary().starts_with("Would fence 1 hook"), "{loud}");

    let quiet = p.run(&["-q"]);
    quiet.expect_code(0);
    assert_eq!(quiet.stderr, "", "{quiet}");
    assert_eq!(quiet.stdout, loud.stdout, "-q keeps the diff");

    let quiet = p.run(&["--quiet", "--apply"]);
    quiet.expect_code(0);
    assert_eq!(quiet.stderr, "", "{quiet}");
    assert_eq!(p.read_str("a.py"), HOOK_FENCED);

    let quiet = p.run(&["-q", "--check"]);
    quiet.expect_code(0);
    assert_eq!(quiet.stderr, "", "{quiet}");

    // Errors still get through.
    p.write("bad.py", syntax_error());
    let quiet = p.run(&["-q"]);
    quiet.expect_code(2);
    assert!(quiet.stderr.contains("bad.py:12:"), "{quiet}");
    assert!(!quiet.stderr.contains("LoggingHook"), "{quiet}");
}

// ---------------------------------------------------------------------------
// 9. Help and version
// ---------------------------------------------------------------------------

#[test]
fn help_documents_modes_and_exit_codes() {
    let p = Project::new(&[]);
    for flag in ["--help", "-h"] {
        let run = p.run(&[flag]);
        run.expect_code(0);
        let help = run.stdout();
        for needle in [
            "Usage: hookfence",
            "Mode:",
            "Selection:",
            "Output:",
            "--apply",
            "--check",
            "--all-hooks",
            "--quiet",
            "--color",
            "--jobs",
            "Exit codes:",
            "  0  ",
            "  1  --check",
            "  2  ",
        ] {
            assert!(help.contains(needle), "{flag} lacks {needle:?}\n{run}");
        }
    }
}

#[test]
fn version_prints_the_crate_version() {
    let p = Project::new(&[]);
    for flag in ["--version", "-V"] {
        let run = p.run(&[flag]);
        run.expect_code(0);
        assert_eq!(
            run.stdout().trim_end(),
            format!("hookfence {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

// ---------------------------------------------------------------------------
// 10. Symlinks
// ---------------------------------------------------------------------------

#[test]
fn symlink_named_explicitly_is_written_through() {
    let p = Project::new(&[("real/hooks.py", HOOK.as_bytes())]);
    p.chmod("real/hooks.py", 0o640);
    p.symlink("real/hooks.py", "link.py");

    let run = p.run(&["link.py"]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["link.py"], "\n{run}");

    let run = p.run(&["--apply", "link.py"]);
    run.expect_code(0);
    let meta = fs::symlink_metadata(p.path("link.py")).unwrap();
    assert!(meta.file_type().is_symlink(), "link.py is still a symlink");
    assert_eq!(
        fs::read_link(p.path("link.py")).unwrap(),
        Path::new("real/hooks.py")
    );
    assert_eq!(p.read_str("real/hooks.py"), HOOK_FENCED);
    assert_eq!(p.mode("real/hooks.py"), 0o640);
    assert_no_temp_files(&p);
}

#[test]
fn symlink_inside_a_walked_directory_is_not_followed() {
    let p = Project::new(&[
        ("outside/hooks.py", HOOK.as_bytes()),
        ("outside/pkg/more.py", HOOK.as_bytes()),
        ("src/own.py", PLAIN.as_bytes()),
    ]);
    p.symlink("../outside/hooks.py", "src/linked.py");
    p.symlink("../outside/pkg", "src/linked_pkg");
    let before = p.snapshot();

    let run = p.run(&["src"]);
    run.expect_code(0);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.summary().contains("1 file scanned"), "{run}");

    let run = p.run(&["--apply", "src"]);
    run.expect_code(0);
    before.assert_same(&p.snapshot(), "--apply on a directory with symlinks");
}

// ---------------------------------------------------------------------------
// 11. Determinism
// ---------------------------------------------------------------------------

#[test]
fn output_does_not_depend_on_thread_count() {
    let mut files: Vec<(String, String)> = vec![(
        "pkg/base.py".into(),
        "import torch\nfrom accelerate.hooks import ModelHook\n\n\nclass OffloadBase(ModelHook):\n    def pre_forward(self, module, *args, **kwargs):\n        module.to(\"cuda\")\n        return args, kwargs\n".into(),
    )];
    for i in 0..20 {
        let (path, text) = match i % 5 {
            0 => (format!("pkg/m{i:02}.py"), HOOK.to_owned()),
            1 => (format!("pkg/sub/m{i:02}.py"), ALIGN.to_owned()),
            2 => (format!("m{i:02}.py"), NOT_OFFLOAD.to_owned()),
            3 => (
                format!("pkg/sub/deep/m{i:02}.py"),
                format!(
                    "import torch\nfrom pkg.base import OffloadBase\n\n\nclass Child{i}(OffloadBase):\n    def post_forward(self, module, output):\n        module.to(\"cpu\")\n        return output\n"
                ),
            ),
            _ => (format!("z{i:02}.py"), crlf(HOOK)),
        };
        files.push((path, text));
    }
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, t)| (p.as_str(), t.as_bytes()))
        .collect();
    let p = Project::new(&files);

    let one = p.run(&["-j", "1"]);
    one.expect_code(0);
    assert!(one.diff_paths().len() >= 16, "\n{one}");
    let mut sorted = one.diff_paths();
    sorted.sort();
    assert_eq!(one.diff_paths(), sorted);
    for args in [&["-j", "2"][..], &["--jobs", "8"], &[]] {
        for _ in 0..3 {
            let other = p.run(args);
            other.expect_code(0);
            assert!(one.stdout == other.stdout, "{args:?}: stdout differs");
            assert_eq!(one.stderr, other.stderr, "{args:?}: stderr differs");
        }
    }
    let one = p.run(&["-j", "1", "--check"]);
    let two = p.run(&["-j", "2", "--check"]);
    assert_eq!((one.code, &one.stderr), (two.code, &two.stderr));
}

// ---------------------------------------------------------------------------
// 12. `import torch` added when missing
// ---------------------------------------------------------------------------

#[test]
fn import_torch_is_added_after_the_docstring() {
    let source = r#""""Hooks that move modules between devices."""
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;
    let expected = r#""""Hooks that move modules between devices."""
import torch
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    @torch.compiler.disable()
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    @torch.compiler.disable()
    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;
    let p = Project::new(&[("hooks.py", source.as_bytes())]);
    let run = p.run(&["--apply"]);
    run.expect_code(0);
    assert_eq!(p.read_str("hooks.py"), expected);
    assert_eq!(
        p.read_str("hooks.py").matches("import torch").count(),
        1,
        "imported once for two hooks"
    );
    let run = p.run(&["--check"]);
    run.expect_code(0);
}

#[test]
fn import_torch_goes_after_a_multiline_docstring_and_future_import() {
    let source = "#!/usr/bin/env python3\n\"\"\"Offload hooks.\n\nMore text.\n\"\"\"\nfrom __future__ import annotations\n\nfrom accelerate.hooks import ModelHook\n\n\nclass CpuOffload(ModelHook):\n    def pre_forward(self, module, *args, **kwargs):\n        module.to(\"cuda\")\n        return args, kwargs\n";
    let p = Project::new(&[("hooks.py", source.as_bytes())]);
    p.run(&["--apply"]).expect_code(0);
    let text = p.read_str("hooks.py");
    let import = text.find("import torch\n").expect("import torch added");
    let future = text.find("from __future__ import annotations").unwrap();
    let docstring_end = text.find("\"\"\"\nfrom").unwrap();
    assert!(import > future, "after the __future__ import:\n{text}");
    assert!(import > docstring_end, "after the docstring:\n{text}");
    assert!(text.starts_with("#!/usr/bin/env python3\n"), "{text}");
    assert!(
        text.contains("    @torch.compiler.disable()\n    def pre_forward"),
        "{text}"
    );
}

// ---- --strategy wrap and --emit-pytest ------------------------------------

/// A package with a hook in a subpackage that imports its siblings
/// relatively, and one at the top that imports absolutely.
#[test]
fn a_registered_lambda_keeps_its_name_once_fenced() {
    // `--list` names the lambda by its qualname before the fence and after
    // it, with either strategy, never by the text of the wrapping call.
    for strategy in ["decorate", "wrap"] {
        let p = Project::new(&[
            ("pkg/__init__.py", b""),
            (
                "pkg/model.py",
                b"def enable(model):\n    model.register_forward_hook(lambda m, a, out: m.to(\"cpu\", non_blocking=True) and out)\n",
            ),
        ]);
        let name = |run: &Run| -> Vec<String> {
            run.stdout_str()
                .lines()
                .map(|l| l.split_whitespace().nth(2).unwrap_or("").to_owned())
                .collect()
        };
        let before = p.run(&["--list", "pkg"]);
        p.run(&["-q", "--apply", "--strategy", strategy, "pkg"])
            .expect_code(0);
        let after = p.run(&["--list", "pkg"]);
        assert_eq!(name(&before), vec!["enable.<locals>.<lambda>"], "{before}");
        assert_eq!(name(&after), name(&before), "{strategy}: {after}");
        assert!(after.stdout_str().contains("  fenced  "), "{after}");
    }
}

#[test]
fn the_summary_counts_the_files_that_hold_hooks_not_the_helper_created() {
    // Two hook files; the wrap strategy also creates `pkg/_no_compile.py`,
    // which holds no hook: the dry run and --apply name the same files.
    let p = wrap_project();
    let dry = p.run(&["--strategy", "wrap", "pkg"]);
    dry.expect_code(0);
    assert!(
        dry.stderr.contains("Would fence 2 hooks in 2 files"),
        "{dry}"
    );
    let apply = p.run(&["--apply", "--strategy", "wrap", "pkg"]);
    apply.expect_code(0);
    assert!(
        apply.stderr.contains("Fenced 2 hooks in 2 files"),
        "{apply}"
    );
    assert!(p.root().join("pkg/_no_compile.py").is_file());
}

#[test]
fn wrap_creates_one_helper_and_imports_it_the_packages_way() {
    let p = wrap_project();
    let dry = p.run(&["-q", "--strategy", "wrap", "pkg"]);
    dry.expect_code(0);
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert!(
        stdout.contains("--- /dev/null\n+++ b/pkg/_no_compile.py\n"),
        "{dry}"
    );
    assert!(
        stdout.contains("+from pkg._no_compile import no_compile"),
        "{dry}"
    );
    assert!(
        stdout.contains("+from .._no_compile import no_compile"),
        "{dry}"
    );
    assert!(
        !p.path("pkg/_no_compile.py").exists(),
        "a dry run creates nothing"
    );

    // The dry-run diff, applied by git, gives exactly what --apply writes.
    let applied = p.copy();
    let patch = tempfile::NamedTempFile::new().unwrap();
    fs::write(patch.path(), &dry.stdout).unwrap();
    let git = git_cmd(applied.root()).arg("apply").arg(patch.path()).run();
    assert_eq!(git.code, Some(0), "{git}");
    p.run(&["-q", "--apply", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    assert_eq!(p.contents(), applied.contents());
    assert_eq!(p.mode("pkg/_no_compile.py"), 0o644);
    assert!(
        p.read_str("pkg/sub/offload.py")
            .contains("    @no_compile\n    def post_forward")
    );

    // Converged: nothing more to do, and the guard is green.
    let before = p.snapshot();
    p.run(&["-q", "--apply", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    assert_eq!(p.snapshot(), before);
    p.run(&["-q", "--check", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    p.run(&["-q", "--check", "pkg"]).expect_code(0);
}

#[test]
fn wrap_leaves_decorated_hooks_alone() {
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/hooks.py", HOOK_FENCED.as_bytes()),
    ]);
    let run = p.run(&["--strategy", "wrap", "pkg"]);
    run.expect_code(0);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(run.stderr.contains("1 already fenced"), "{run}");
}

#[test]
fn helper_module_option_places_the_helper() {
    let p = wrap_project();
    let run = p.run(&[
        "-q",
        "--apply",
        "--strategy",
        "wrap",
        "--helper-module",
        "pkg.sub.fences",
        "pkg",
    ]);
    run.expect_code(0);
    assert!(p.path("pkg/sub/fences.py").is_file());
    assert!(
        p.read_str("pkg/sub/offload.py")
            .contains("from .fences import no_compile")
    );
    assert!(
        p.read_str("pkg/hooks.py")
            .contains("from pkg.sub.fences import no_compile")
    );
}

#[test]
fn helper_module_outside_the_package_is_an_error_naming_the_file() {
    let p = wrap_project();
    let before = p.snapshot();
    let run = p.run(&[
        "--apply",
        "--strategy",
        "wrap",
        "--helper-module",
        "elsewhere.fences",
        "pkg",
    ]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("pkg/hooks.py: helper module elsewhere.fences is not inside"),
        "{run}"
    );
    assert_eq!(p.snapshot(), before);
}

#[test]
fn emit_pytest_lists_every_importable_fenced_hook() {
    let p = wrap_project();
    fs::create_dir(p.path("tests")).unwrap();
    let run = p.run(&[
        "-q",
        "--apply",
        "--strategy",
        "wrap",
        "--emit-pytest",
        "tests/test_fences.py",
        "pkg",
    ]);
    run.expect_code(0);
    let guard = p.read_str("tests/test_fences.py");
    assert!(
        guard.contains("(\"pkg.hooks\", \"CpuOffload.pre_forward\", None),"),
        "{guard}"
    );
    assert!(
        guard.contains("(\"pkg.sub.offload\", \"DiskOffload.post_forward\", None),"),
        "{guard}"
    );
    assert!(guard.contains("    \"pkg._no_compile\","), "{guard}");
    assert!(
        guard.contains("    \"..\","),
        "the package root, relative to the guard: {guard}"
    );
    assert!(!guard.contains("ModelHook.pre_forward"), "{guard}");
    let ast = Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
        .arg(p.path("tests/test_fences.py"))
        .status()
        .unwrap();
    assert!(ast.success());
}

#[test]
fn emit_pytest_never_overwrites_a_source_or_any_file_it_did_not_generate() {
    // In every mode, whatever is at the path: a scanned source with hooks,
    // one without, any other file, a directory, a symlink, a FIFO, a place
    // whose directory does not exist. Exit 2 naming it, nothing written.
    let p = Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("b.py", b"x = 1\n"),
        ("notes.txt", b"keep me\n"),
        ("dir/keep.py", b""),
    ]);
    p.symlink("notes.txt", "link.py");
    p.mkfifo("pipe.py");
    let modes: [&[&str]; 4] = [&["--check"], &[], &["--apply"], &["--list"]];
    for mode in modes {
        for target in [
            "a.py",
            "b.py",
            "notes.txt",
            "dir",
            "link.py",
            "pipe.py",
            "missing/test_fences.py",
            "new_dir/",
            "..",
        ] {
            let before = p.snapshot();
            let mut args = mode.to_vec();
            args.extend(["--emit-pytest", target, "a.py", "b.py"]);
            let run = p.run(&args);
            run.expect_code(2);
            assert!(
                run.stderr.contains(&format!("{target}: cannot write: "))
                    && run.stderr.contains("nothing was written"),
                "{args:?}: {run}"
            );
            assert_eq!(p.snapshot(), before, "{args:?} changed the tree");
        }
    }
    assert_eq!(p.read_str("a.py"), HOOK);

    // Nor the helper module the same run creates, however its path is
    // spelled (U1): `..`, `.`, a symlinked directory; dry run or --apply.
    let p = wrap_project();
    p.symlink("pkg", "link");
    let before = p.snapshot();
    for target in [
        "pkg/_no_compile.py",
        "pkg/../pkg/_no_compile.py",
        "./pkg/./_no_compile.py",
        "link/_no_compile.py",
    ] {
        for apply in [true, false] {
            let mut args = vec!["--strategy", "wrap", "--emit-pytest", target, "pkg"];
            if apply {
                args.insert(0, "--apply");
            }
            let run = p.run(&args);
            run.expect_code(2);
            assert!(
                run.stderr
                    .contains(&format!("{target}: cannot write: it is the helper module")),
                "{args:?}: {run}"
            );
            assert_eq!(p.snapshot(), before, "{args:?} changed the tree");
        }
    }
}

#[test]
fn emit_pytest_creates_a_new_file_and_replaces_only_its_own() {
    let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", HOOK.as_bytes())]);
    fs::create_dir(p.path("tests")).unwrap();
    let guard = "tests/test_fences.py";
    p.run(&["-q", "--check", "--emit-pytest", guard, "pkg"])
        .expect_code(1);
    let first = p.read_str(guard);
    assert!(
        first.contains("(\"pkg.hooks\", \"CpuOffload.pre_forward\", None),"),
        "{first}"
    );

    // Its own earlier file, even edited by hand and with its own mode, is
    // replaced (atomically, keeping the mode).
    p.write(guard, format!("{first}\n# a local note\n"));
    p.chmod(guard, 0o600);
    p.run(&["-q", "--apply", "--emit-pytest", guard, "pkg"])
        .expect_code(0);
    assert_eq!(p.read_str(guard), first);
    assert_eq!(p.mode(guard), 0o600);

    // Without the header it is not its own any more.
    p.write(
        guard,
        first.replacen("Generated by hookfence", "Written by hand", 1),
    );
    let before = p.snapshot();
    p.run(&["--emit-pytest", guard, "pkg"]).expect_code(2);
    assert_eq!(p.snapshot(), before);
}

#[test]
fn helper_module_must_be_a_dotted_python_name() {
    let p = wrap_project();
    let before = p.snapshot();
    for bad in [
        "pkg.fen\nces",
        "pkg.fen\rces",
        "pkg.fen\u{b}ces",
        "pkg.fen ces",
        "pkg.",
        ".pkg",
        "pkg..x",
        "",
        "pkg.class",
        "pkg.__init__",
        "pkg.1x",
        "pkg/x",
        "pkg.x-y",
    ] {
        let run = p.run(&[
            "--apply",
            "--strategy",
            "wrap",
            "--helper-module",
            bad,
            "pkg",
        ]);
        run.expect_code(2);
        assert!(
            run.stderr.contains("is not a dotted Python module name"),
            "{bad:?}: {run}"
        );
        assert_eq!(p.snapshot(), before, "{bad:?} changed the tree");
    }
}

/// Runs a dry run and `--apply`, and asserts both refuse the same way: exit
/// 2, an error naming `file` that says `reason`, and the tree unchanged.
fn assert_refused_in_both_modes(p: &Project, args: &[&str], file: &str, reason: &str) {
    let before = p.snapshot();
    let mut lines = Vec::new();
    for mode in [None, Some("--apply")] {
        let mut all: Vec<&str> = mode.into_iter().collect();
        all.extend(args);
        let run = p.run(&all);
        run.expect_code(2);
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("{file}: ")))
            .unwrap_or_else(|| panic!("{all:?}: no error names {file}\n{run}"))
            .to_owned();
        assert!(
            line.contains(reason),
            "{all:?}: {line:?} does not say {reason:?}"
        );
        assert_eq!(p.snapshot(), before, "{all:?} changed the tree");
        lines.push(line);
    }
    assert_eq!(
        lines[0], lines[1],
        "the dry run fails otherwise than --apply"
    );
}

#[test]
fn wrap_refuses_a_helper_that_is_not_importable_by_the_name_it_writes() {
    let wrap = ["--strategy", "wrap", "pkg"];
    let with = |helper: &str| -> Vec<String> {
        ["--strategy", "wrap", "--helper-module", helper, "pkg"]
            .map(str::to_owned)
            .to_vec()
    };
    type Setup = Box<dyn Fn(&Project)>;
    let cases: Vec<(&str, Setup, Vec<String>, &str)> = vec![
        (
            "an unrelated module at the helper's path",
            Box::new(|p| p.write("pkg/_no_compile.py", "def no_compile(fn):\n    return fn\n")),
            wrap.map(str::to_owned).to_vec(),
            "hookfence did not generate it",
        ),
        (
            "the package itself",
            Box::new(|_| {}),
            with("pkg"),
            "Python would import it",
        ),
        (
            "the hook file itself",
            Box::new(|_| {}),
            with("pkg.hooks"),
            "this file itself (the import would be circular)",
        ),
        (
            "a package of the helper's name",
            Box::new(|p| p.write("pkg/_no_compile/__init__.py", "")),
            wrap.map(str::to_owned).to_vec(),
            "Python would import it",
        ),
        (
            "an extension module of the helper's name",
            Box::new(|p| p.write("pkg/_no_compile.cpython-311-x86_64-linux-gnu.so", "")),
            wrap.map(str::to_owned).to_vec(),
            "extension module",
        ),
        (
            "a dangling symlink at the helper's path",
            Box::new(|p| p.symlink("gone.py", "pkg/_no_compile.py")),
            wrap.map(str::to_owned).to_vec(),
            "symbolic link to nothing",
        ),
        (
            "a FIFO at the helper's path",
            Box::new(|p| p.mkfifo("pkg/_no_compile.py")),
            wrap.map(str::to_owned).to_vec(),
            "not a regular file",
        ),
        (
            "a directory at the helper's path",
            Box::new(|p| fs::create_dir(p.path("pkg/_no_compile.py")).unwrap()),
            wrap.map(str::to_owned).to_vec(),
            "not a regular file",
        ),
        (
            "a helper in a directory that does not exist",
            Box::new(|_| {}),
            with("pkg.missing.fences"),
            "pkg/missing is not a regular package",
        ),
        (
            "a helper in a namespace directory",
            Box::new(|p| fs::create_dir(p.path("pkg/nsdir")).unwrap()),
            with("pkg.nsdir.fences"),
            "pkg/nsdir is not a regular package",
        ),
    ];
    // A package directory whose name Python cannot import.
    let p = Project::new(&[
        ("my-pkg/__init__.py", b""),
        ("my-pkg/hooks.py", HOOK.as_bytes()),
    ]);
    assert_refused_in_both_modes(
        &p,
        &["--strategy", "wrap", "my-pkg"],
        "my-pkg/hooks.py",
        "the helper's name my-pkg._no_compile is not a Python module name",
    );
    for (what, setup, args, reason) in cases {
        let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", HOOK.as_bytes())]);
        setup(&p);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        eprintln!("case: {what}");
        assert_refused_in_both_modes(&p, &args, "pkg/hooks.py", reason);
    }
}

#[test]
fn wrap_refuses_a_module_outside_a_regular_package() {
    // A namespace package (no __init__.py): `from _no_compile import` would
    // fail when it is imported as `ns.mod`, `from ns._no_compile import`
    // when it is run as a script. Which one it is cannot be told.
    let p = Project::new(&[
        ("ns/mod.py", HOOK.as_bytes()),
        ("ns/deep/more.py", HOOK.as_bytes()),
        ("site/pkg/__init__.py", b""),
        ("reg/__init__.py", b""),
        ("reg/portion/sub/__init__.py", b""),
        ("reg/portion/mod.py", HOOK.as_bytes()),
        (
            "site/member.py",
            format!("from . import pkg\n{HOOK}").as_bytes(),
        ),
    ]);
    for (file, reason) in [
        ("ns/mod.py", "not inside a regular package"),
        ("ns/deep/more.py", "not inside a regular package"),
        // A namespace portion of a regular package, imported as
        // `reg.portion.mod`, though it holds a package.
        ("reg/portion/mod.py", "not inside a regular package"),
        // Beside a package, but a relative import says it is a member of one.
        ("site/member.py", "yet it uses relative imports"),
    ] {
        assert_refused_in_both_modes(&p, &["--strategy", "wrap", file], file, reason);
    }

    // In the current directory, or beside a regular package (an import
    // root, as site-packages is), it is a top-level module: the helper goes
    // beside it, and everything imports with CPython.
    let p = Project::new(&[("hooks.py", HOOK.as_bytes())]);
    p.run(&["-q", "--apply", "--strategy", "wrap", "hooks.py"])
        .expect_code(0);
    assert!(
        p.read_str("hooks.py")
            .contains("from _no_compile import no_compile")
    );
    python_imports(
        p.root(),
        &["hooks", "_no_compile"],
        "_no_compile.assert_all_disabled()",
    )
    .unwrap();
    let p = Project::new(&[
        ("site/pkg/__init__.py", b""),
        ("site/pkg/hooks.py", HOOK.as_bytes()),
        ("site/plain.py", HOOK.as_bytes()),
    ]);
    p.run(&["-q", "--apply", "--strategy", "wrap", "site"])
        .expect_code(0);
    assert!(p.path("site/_no_compile.py").is_file());
    assert!(p.path("site/pkg/_no_compile.py").is_file());
    python_imports(
        &p.path("site"),
        &["plain", "pkg.hooks", "_no_compile", "pkg._no_compile"],
        "_no_compile.assert_all_disabled()\npkg._no_compile.assert_all_disabled()",
    )
    .unwrap();
}

#[test]
fn wrap_of_a_top_level_package_init_keeps_the_helper_inside_the_package() {
    let p = Project::new(&[("pkg/__init__.py", HOOK.as_bytes())]);
    p.run(&["-q", "--apply", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    assert!(p.path("pkg/_no_compile.py").is_file());
    assert!(
        !p.path("_no_compile.py").exists(),
        "helper outside the package"
    );
    assert!(
        p.read_str("pkg/__init__.py")
            .contains("from pkg._no_compile import no_compile"),
        "{}",
        p.read_str("pkg/__init__.py")
    );
    python_imports(
        p.root(),
        &["pkg", "pkg._no_compile"],
        "assert len(pkg._no_compile.registered_hooks()) == 1\npkg._no_compile.assert_all_disabled()",
    )
    .unwrap();
}

#[test]
fn wrapped_packages_import_with_cpython_and_reuse_their_helper() {
    let p = wrap_project();
    p.run(&[
        "-q",
        "--apply",
        "--strategy",
        "wrap",
        "--emit-pytest",
        "test_fences.py",
        "pkg",
    ])
    .expect_code(0);
    // The generated guard passes right after --apply: every test of it,
    // called by hand.
    python_imports(
        p.root(),
        &["test_fences"],
        "for m, q, w in test_fences.HOOKS:\n    test_fences.test_hook_is_disabled_for_torch_compile(m, q, w)\nfor h in test_fences.HELPERS:\n    test_fences.test_helper_registry_is_all_disabled(h)\nassert len(test_fences.HOOKS) == 2 and test_fences.HELPERS == ['pkg._no_compile']",
    )
    .unwrap();
    let audit = "assert len(pkg._no_compile.registered_hooks()) == 2\npkg._no_compile.assert_all_disabled()";
    python_imports(
        p.root(),
        &["pkg.hooks", "pkg.sub.offload", "pkg._no_compile"],
        audit,
    )
    .unwrap();

    // A new hook later: the generated helper is reused, not recreated.
    let helper = p.snapshot().0[Path::new("pkg/_no_compile.py")].clone();
    p.write("pkg/late.py", HOOK.replace("CpuOffload", "LateOffload"));
    let run = p.run(&["--strategy", "wrap", "pkg"]);
    run.expect_code(0);
    assert!(!run.stdout_str().contains("/dev/null"), "{run}");
    p.run(&["-q", "--apply", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    assert_eq!(p.snapshot().0[Path::new("pkg/_no_compile.py")], helper);
    python_imports(
        p.root(),
        &["pkg.late", "pkg._no_compile"],
        "pkg._no_compile.assert_all_disabled()",
    )
    .unwrap();

    // --helper-module inside a subpackage.
    let p = wrap_project();
    p.run(&[
        "-q",
        "--apply",
        "--strategy",
        "wrap",
        "--helper-module",
        "pkg.sub.fences",
        "pkg",
    ])
    .expect_code(0);
    python_imports(
        p.root(),
        &["pkg.hooks", "pkg.sub.offload", "pkg.sub.fences"],
        "assert len(pkg.sub.fences.registered_hooks()) == 2",
    )
    .unwrap();
}

#[test]
fn fullgraph_true_gets_a_note_when_the_tree_has_hooks() {
    let p = Project::new(&[
        ("hooks.py", HOOK.as_bytes()),
        (
            "train.py",
            b"import torch\n\nmodel = torch.compile(torch.nn.Linear(2, 2), fullgraph=True)\n",
        ),
    ]);
    let run = p.run(&["."]);
    run.expect_code(0);
    assert!(
        run.stderr
            .contains("train.py:3:46: note: fullgraph=True raises"),
        "{run}"
    );

    let no_hooks = Project::new(&[(
        "train.py",
        b"import torch\n\nmodel = torch.compile(torch.nn.Linear(2, 2), fullgraph=True)\n",
    )]);
    let run = no_hooks.run(&["."]);
    assert!(!run.stderr.contains("fullgraph"), "{run}");
}

// ---- Review and scripting: audit, formats, configuration, selection -------

/// One project with a hook site of every status.
fn audit_project() -> Project {
    Project::new(&[(
        "hooks.py",
        br#"import torch
from accelerate.hooks import ModelHook


class CpuOffload(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    @torch.compiler.disable()
    def post_forward(self, module, output):
        module.to("cpu")
        return output


class CacheHook(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs


class Traced(ModelHook):
    # hookfence: ignore[custom op stays in the graph]
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    # @torch.compiler.disable()
    def post_forward(self, module, output):
        module.cpu()
        return output


def attach(model, make_hook):
    model.register_forward_pre_hook(make_hook(0))
"#,
    )])
}

#[test]
fn a_rewrite_that_would_not_parse_is_refused_on_either_path() {
    // The configured decorator passes the string checks (a dotted name and a
    // call) but is not valid Python, and the debug-only hook lets it past
    // the parse of the decorator alone: the check that every rewrite parses
    // must catch it, both for a registered hook (planned while the walk
    // goes on, checked by an incremental parse) and for a protocol method
    // (planned once every class is known, checked by a full parse).
    let registered = "import torch\n\ndef hook(m, args):\n    m.to(\"cuda\")\n\nmodel.register_forward_pre_hook(hook)\n";
    let p = Project::new(&[
        (
            "pyproject.toml",
            b"[tool.hookfence]\ndecorator = \"torch.compiler.disable(x=[)\"\n",
        ),
        ("registered.py", registered.as_bytes()),
        ("hooks.py", HOOK.as_bytes()),
    ]);
    let before = p.snapshot();
    let run = p
        .cmd()
        .env("HOOKFENCE_TEST_UNCHECKED_DECORATOR", "1")
        .args(["--apply", "--allow-dirty", "."])
        .run();
    run.expect_code(2);
    for expected in [
        "hooks.py:8:32: the rewritten file would not parse (syntax error: expected \"]\"); nothing was written",
        "registered.py:3:28: the rewritten file would not parse (syntax error: expected \"]\"); nothing was written",
    ] {
        assert!(run.stderr.contains(expected), "{expected}\n{run}");
    }
    assert_eq!(p.snapshot(), before, "nothing is written");
}

/// The same run with and without the prefilter: stdout, stderr and exit code.
fn both_modes(p: &Project, args: &[&str]) -> (String, String) {
    let mut fast = args.to_vec();
    fast.push(".");
    let mut full = vec!["--no-prefilter"];
    full.extend_from_slice(args);
    full.push(".");
    let show = |run: Run| {
        format!(
            "exit {:?}\n{}\n{}",
            run.code,
            String::from_utf8_lossy(&run.stdout),
            run.stderr
        )
    };
    (show(p.run(&fast)), show(p.run(&full)))
}

#[test]
fn prefilter_and_full_parse_agree_on_odd_but_parsable_text() {
    // Cases a review found where the prefilter used to drop a file that
    // tree-sitter parses into a hook (or a link in a hook's class chain):
    // lone CR line ends, a class after `;`, a vertical tab or a zero-width
    // character between tokens (now refused alike, as CPython refuses
    // them), a hook class named like a hook method.
    const BASE: &[u8] =
        b"from accelerate.hooks import ModelHook\n\nclass Base(ModelHook):\n    pass\n";
    const SUB: &[u8] =
        b"from mid import Mid\n\nclass H(Mid):\n    def pre_forward(self, m):\n        m.to(\"cuda\")\n";
    const REGISTERED: &[u8] = b"import torch\n\ndef hook(m, args):\n    m.to(\"cuda\")\n\nmodel = torch.nn.Linear(1, 1)\nmodel.register_forward_pre_hook(hook)\n";
    let chain = |mid: &'static [u8]| vec![("base.py", BASE), ("mid.py", mid), ("h.py", SUB)];
    type Files = Vec<(&'static str, &'static [u8])>;
    let cases: Vec<(&str, Files)> = vec![
        ("lone CR", chain(b"from base import Base\r\rclass Mid(Base):\r    pass\r")),
        ("CR then class", chain(b"from base import Base\nx = 1\rclass Mid(Base):\n    pass\n")),
        ("class after ;", chain(b"from base import Base\nx = 1; class Mid(Base): pass\n")),
        ("VT after class", chain(b"from base import Base\n\nclass\x0bMid(Base):\n    pass\n")),
        ("ZWSP before class", chain("from base import Base\n\n\u{200b}class Mid(Base):\n    pass\n".as_bytes())),
        ("BOM mid-file", chain("from base import Base\n\n\u{feff}class Mid(Base):\n    pass\n".as_bytes())),
        ("WJ after class", chain("from base import Base\n\nclass\u{2060}Mid(Base):\n    pass\n".as_bytes())),
        ("ZWSP in bases", chain("from base import Base\n\nclass Mid(\u{200b}Base):\n    pass\n".as_bytes())),
        ("BOM in bases", chain("from base import Base\n\nclass Mid(Base\u{feff}):\n    pass\n".as_bytes())),
        (
            "class named post_forward",
            vec![
                ("base.py", b"from accelerate.hooks import ModelHook\n\nclass post_forward(ModelHook):\n    pass\n"),
                ("mid.py", b"from base import post_forward\n\nclass Mid(post_forward):\n    pass\n"),
                ("h.py", SUB),
            ],
        ),
        (
            "VT before (",
            vec![("a.py", b"import torch\n\ndef hook(m, args):\n    m.to(\"cuda\")\n\nmodel = torch.nn.Linear(1, 1)\nmodel.register_forward_pre_hook\x0b(hook)\n")],
        ),
        (
            "VT before =True",
            vec![("a.py", REGISTERED), ("b.py", b"import torch\nm = torch.compile(m, fullgraph\x0b=True)\n")],
        ),
    ];
    for (name, files) in cases {
        let p = Project::new(&files);
        for args in [
            &[][..],
            &["--all-hooks"],
            &["--format", "json"],
            &["--list"],
        ] {
            let (fast, full) = both_modes(&p, args);
            assert_eq!(fast, full, "{name} {args:?}");
        }
        // Each case has something to find, so agreeing on nothing would not
        // do. An invisible character between tokens is whitespace to
        // tree-sitter but CPython's syntax error (U2): both modes refuse the
        // file, naming the character.
        let (fast, _) = both_modes(&p, &[]);
        let cpython_refuses = ["VT", "ZWSP", "BOM", "WJ"]
            .iter()
            .any(|c| name.starts_with(c) || name.contains(&format!(" {c} ")));
        if cpython_refuses {
            assert!(
                fast.contains("syntax error: invalid non-printable character U+"),
                "{name}: {fast}"
            );
        } else {
            assert!(
                fast.contains("Would fence 1 hook in 1 file")
                    || fast.contains("fullgraph=True raises"),
                "{name}: {fast}"
            );
        }
    }
}

#[test]
fn an_unused_suppression_is_reported_in_a_file_without_hooks() {
    let p = Project::new(&[
        ("hooks.py", HOOK.as_bytes()),
        (
            "plain.py",
            b"def step(x):  # hookfence: ignore[left from an old hook]\n    return x\n",
        ),
    ]);
    let run = p.run(&["."]);
    run.expect_code(0);
    assert!(
        run.stderr.contains(
            "plain.py:1:1: unused suppression: this `# hookfence: ignore` matches no hook"
        ),
        "{run}"
    );
}

#[test]
fn list_prints_every_site_with_status_qualname_and_reason() {
    let p = audit_project();
    let before = p.snapshot();
    let run = p.run(&["--list", "."]);
    run.expect_code(0);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{run}");
    let expect = [
        ("hooks.py:6:5  unfenced  CpuOffload.pre_forward  moves `module` via .to(...); subclass of ModelHook"),
        ("hooks.py:11:5  fenced  CpuOffload.post_forward  fenced by @torch.compiler.disable()"),
        ("hooks.py:17:5  not-offload  CacheHook.pre_forward  "),
        ("hooks.py:23:5  suppressed  Traced.pre_forward  hookfence: ignore on line 22 (custom op stays in the graph)"),
        ("hooks.py:28:5  opted-out  Traced.post_forward  commented-out disable decorator on line 27"),
        ("hooks.py:34:5  unresolved  -  hook is the value returned by `make_hook(0)`"),
    ];
    for (line, expected) in lines.iter().zip(expect) {
        assert!(
            line.starts_with(expected),
            "{line:?} should start with {expected:?}"
        );
    }
    assert_eq!(p.snapshot(), before, "--list writes nothing");
    // --check counts only `unfenced`.
    p.run(&["-q", "--check", "."]).expect_code(1);
    p.run(&["-q", "--apply", "."]).expect_code(0);
    p.run(&["-q", "--check", "."]).expect_code(0);
}

#[test]
fn json_document_parses_and_each_field_is_right() {
    let p = audit_project();
    let run = p.run(&["--format", "json", "."]);
    run.expect_code(0);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["version"], 1);
    assert_eq!(doc.as_object().unwrap().keys().next().unwrap(), "version");
    assert_eq!(doc["mode"], "diff");
    assert_eq!(doc["strategy"], "decorate");
    let sites = doc["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 6);
    let first = &sites[0];
    assert_eq!(first["path"], "hooks.py");
    assert_eq!(first["line"], 6);
    assert_eq!(first["column"], 5);
    assert_eq!(first["status"], "unfenced");
    assert_eq!(first["kind"], "method");
    assert_eq!(first["qualname"], "CpuOffload.pre_forward");
    let bytes = p.read("hooks.py");
    let start = first["byte_range"][0].as_u64().unwrap() as usize;
    let end = first["byte_range"][1].as_u64().unwrap() as usize;
    assert!(bytes[start..end].starts_with(b"def pre_forward"));
    assert!(bytes[..end].ends_with(b"return args, kwargs"));
    let edit = &first["edits"][0];
    assert_eq!(edit["insert"], "    @torch.compiler.disable()\n");
    let at = edit["start"].as_u64().unwrap() as usize;
    assert_eq!(edit["end"].as_u64().unwrap() as usize, at);
    assert!(bytes[at..].starts_with(b"    def pre_forward"));
    assert_eq!(sites[1]["edits"].as_array().unwrap().len(), 0);
    assert_eq!(sites[5]["status"], "unresolved");
    assert_eq!(sites[5]["qualname"], serde_json::Value::Null);
    let summary = &doc["summary"];
    assert_eq!(summary["files_scanned"], 1);
    assert_eq!(summary["files_changed"], 1);
    assert_eq!(summary["unfenced"], 1);
    assert_eq!(summary["fenced"], 1);
    assert_eq!(summary["not_offload"], 1);
    assert_eq!(summary["suppressed"], 1);
    assert_eq!(summary["opted_out"], 1);
    assert_eq!(summary["unresolved"], 1);
    assert_eq!(doc["errors"].as_array().unwrap().len(), 0);
}

#[test]
fn json_byte_offsets_count_file_bytes_in_latin1_and_bom_files() {
    let mut latin1 = b"# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch\n".to_vec();
    latin1.extend_from_slice(&HOOK.as_bytes()[13..]);
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(HOOK.as_bytes());
    let p = Project::new(&[("a.py", &latin1), ("b.py", &bom)]);
    let run = p.run(&["--format", "json", "."]);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    for site in doc["sites"].as_array().unwrap() {
        let bytes = p.read(site["path"].as_str().unwrap());
        let at = site["edits"][0]["start"].as_u64().unwrap() as usize;
        assert!(bytes[at..].starts_with(b"    def pre_forward"), "{site}");
    }
}

#[test]
fn sarif_is_2_1_0_with_a_result_and_fix_per_unfenced_hook() {
    let p = audit_project();
    let run = p.run(&["--format", "sarif", "."]);
    run.expect_code(0);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(doc["version"], "2.1.0");
    let sarif_run = &doc["runs"][0];
    assert_eq!(sarif_run["tool"]["driver"]["name"], "hookfence");
    assert_eq!(sarif_run["tool"]["driver"]["rules"][0]["id"], "HF001");
    let results = sarif_run["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    let result = &results[0];
    assert_eq!(result["ruleId"], "HF001");
    assert_eq!(result["level"], "error");
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "hooks.py");
    assert_eq!(location["region"]["startLine"], 6);
    assert_eq!(location["region"]["startColumn"], 5);
    let replacement = &result["fixes"][0]["artifactChanges"][0]["replacements"][0];
    assert_eq!(
        replacement["insertedContent"]["text"],
        "    @torch.compiler.disable()\n"
    );
    assert_eq!(replacement["deletedRegion"]["byteLength"], 0);
    assert_eq!(sarif_run["invocations"][0]["executionSuccessful"], true);
}

#[test]
fn github_format_prints_escaped_workflow_annotations() {
    let p = Project::new(&[("a,b/hook.py", HOOK.as_bytes())]);
    let run = p.run(&["--check", "--format", "github", "."]);
    run.expect_code(1);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.starts_with("::error file=a%2Cb/hook.py,line=8,col=5,title=Unfenced offload hook::CpuOffload.pre_forward runs inside torch.compile"),
        "{run}"
    );
    assert_eq!(stdout.lines().count(), 1, "{run}");
}

#[test]
fn unknown_format_is_a_usage_error() {
    let p = Project::new(&[("hook.py", HOOK.as_bytes())]);
    let run = p.run(&["--format", "xml", "."]);
    run.expect_code(2);
    assert!(run.stderr.contains("xml"), "{run}");
}

const CUSTOM: &str = r#"import torch


class OffloadProtocol:
    pass


class DiskStep(OffloadProtocol):
    def offload_step(self, module):
        module.to("cpu")


def _onload(module, args):
    module.to("cuda")


def _already(module, args):
    module.cuda()


_already = mylib.skip_trace(_already)


def install(model):
    add_hook(model, _onload)
    add_hook(model, _already)
"#;

#[test]
fn configuration_extends_what_is_matched_and_inserted() {
    let p = Project::new(&[
        ("pkg/hooks.py", CUSTOM.as_bytes()),
        ("pkg/vendored/hooks.py", HOOK.as_bytes()),
        (
            "pyproject.toml",
            br#"[project]
name = "demo"

[tool.hookfence]
hook-bases = ["OffloadProtocol"]
hook-methods = ["offload_step"]
registrars = ["add_hook:1"]
fence-spellings = ["mylib.skip_trace"]
decorator = "torch._dynamo.disable()"
exclude = ["vendored"]
"#,
        ),
    ]);
    let run = p.run(&["-q", "--apply", "pkg"]);
    run.expect_code(0);
    let hooks = p.read_str("pkg/hooks.py");
    assert!(
        hooks.contains("    @torch._dynamo.disable()\n    def offload_step"),
        "{hooks}"
    );
    assert!(
        hooks.contains("@torch._dynamo.disable()\ndef _onload"),
        "{hooks}"
    );
    assert!(
        !hooks.contains("@torch._dynamo.disable()\ndef _already"),
        "{hooks}"
    );
    assert_eq!(
        p.read_str("pkg/vendored/hooks.py"),
        HOOK,
        "excluded by the config"
    );
    p.run(&["-q", "--check", "pkg"]).expect_code(0);

    // --isolated reads no configuration: the default vocabulary applies.
    let run = p.run(&["--list", "--isolated", "pkg"]);
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("pkg/vendored/hooks.py"),
        "{run}"
    );
}

#[test]
fn explicit_config_and_all_hooks_key() {
    let p = Project::new(&[
        ("hooks.py", b"from accelerate.hooks import ModelHook\n\n\nclass Cache(ModelHook):\n    def pre_forward(self, module, *args, **kwargs):\n        return args, kwargs\n"),
        ("ci/hookfence.toml", b"all-hooks = true\n"),
    ]);
    p.run(&["-q", "--check", "."]).expect_code(0);
    p.run(&["-q", "--check", "--config", "ci/hookfence.toml", "."])
        .expect_code(1);
}

#[test]
fn bad_configuration_names_the_file_the_key_and_what_is_accepted() {
    let p = Project::new(&[
        ("hook.py", HOOK.as_bytes()),
        ("pyproject.toml", b"[tool.hookfence]\nhook-base = [\"X\"]\n"),
    ]);
    let before = p.snapshot();
    let run = p.run(&["--apply", "."]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("pyproject.toml:2:1: [tool.hookfence]: unknown field `hook-base`"),
        "{run}"
    );
    assert!(run.stderr.contains("`hook-bases`"), "{run}");
    assert_eq!(p.snapshot(), before);

    p.write(
        "pyproject.toml",
        "[tool.hookfence]\nregistrars = [\"add_hook:first\"]\n",
    );
    let run = p.run(&["."]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("registrars: \"add_hook:first\" is not accepted"),
        "{run}"
    );

    let run = p.run(&["--config", "missing.toml", "."]);
    run.expect_code(2);
    assert!(run.stderr.contains("missing.toml: cannot read"), "{run}");
}

#[test]
fn include_and_exclude_globs_select_walked_files_only() {
    let p = Project::new(&[
        ("src/a.py", HOOK.as_bytes()),
        ("src/gen/b.py", HOOK.as_bytes()),
        ("tests/c.py", HOOK.as_bytes()),
    ]);
    let run = p.run(&["--include", "src/**", "."]);
    assert_eq!(run.diff_paths(), ["src/a.py", "src/gen/b.py"], "{run}");
    let run = p.run(&["--exclude", "gen", "--exclude", "tests/", "."]);
    assert_eq!(run.diff_paths(), ["src/a.py"], "{run}");
    // A file named explicitly is processed whatever the globs say.
    let run = p.run(&["--exclude", "gen", "src/gen/b.py"]);
    assert_eq!(run.diff_paths(), ["src/gen/b.py"], "{run}");
    let run = p.run(&["--include", "[", "."]);
    run.expect_code(2);
    assert!(run.stderr.contains("--include"), "{run}");
}

fn run_with_stdin(p: &Project, args: &[&str], input: &[u8]) -> Run {
    use std::io::Write as _;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(p.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

#[test]
fn stdin_with_wrap_needs_the_generated_helper_where_the_import_points() {
    let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/other.py", HOOK.as_bytes())]);
    let args = [
        "--strategy",
        "wrap",
        "-",
        "--stdin-filename",
        "pkg/hooks.py",
    ];
    // No helper yet: nothing may print an import of a module that is not there.
    let before = p.snapshot();
    let run = run_with_stdin(&p, &args, HOOK.as_bytes());
    run.expect_code(2);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(
        run.stderr
            .contains("pkg/hooks.py: the helper module pkg._no_compile")
            && run.stderr.contains("does not exist"),
        "{run}"
    );
    assert_eq!(p.snapshot(), before);

    // A module there that hookfence did not generate is no helper either.
    p.write("pkg/_no_compile.py", "no_compile = None\n");
    let run = run_with_stdin(&p, &args, HOOK.as_bytes());
    run.expect_code(2);
    assert!(run.stdout.is_empty(), "{run}");
    assert!(
        run.stderr.contains("hookfence did not generate it"),
        "{run}"
    );

    // Once a run has generated it, stdin gets the rewritten file.
    fs::remove_file(p.path("pkg/_no_compile.py")).unwrap();
    p.run(&["-q", "--apply", "--strategy", "wrap", "pkg"])
        .expect_code(0);
    let run = run_with_stdin(&p, &args, HOOK.as_bytes());
    run.expect_code(0);
    let out = run.stdout_str();
    assert!(
        out.contains("from pkg._no_compile import no_compile"),
        "{run}"
    );
    assert!(
        out.contains("    @no_compile\n    def pre_forward"),
        "{run}"
    );
}

#[test]
fn files_from_takes_a_list_from_a_file_or_stdin() {
    let p = Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("b.py", HOOK.as_bytes()),
        ("c.py", HOOK.as_bytes()),
        ("list.txt", b"c.py\n\na.py\n"),
    ]);
    let run = p.run(&["--files-from", "list.txt"]);
    run.expect_code(0);
    assert_eq!(run.diff_paths(), ["a.py", "c.py"], "{run}");
    let run = run_with_stdin(&p, &["--files-from", "-"], b"b.py\r\n");
    assert_eq!(run.diff_paths(), ["b.py"], "{run}");
    let run = p.run(&["--files-from", "nope.txt"]);
    run.expect_code(2);
    assert!(run.stderr.contains("--files-from nope.txt"), "{run}");
}

#[test]
fn stdin_mode_writes_the_rewritten_file_to_stdout() {
    let p = Project::new(&[]);
    let run = run_with_stdin(
        &p,
        &["-", "--stdin-filename", "pkg/hooks.py"],
        HOOK.as_bytes(),
    );
    run.expect_code(0);
    assert_eq!(String::from_utf8_lossy(&run.stdout), HOOK_FENCED);
    // Unchanged input comes back unchanged; --check says whether it would change.
    let run = run_with_stdin(&p, &["-"], HOOK_FENCED.as_bytes());
    assert_eq!(String::from_utf8_lossy(&run.stdout), HOOK_FENCED);
    let run = run_with_stdin(&p, &["--check", "-"], b"x = 1\n");
    run.expect_code(0);
    assert_eq!(String::from_utf8_lossy(&run.stdout), "");
    let run = run_with_stdin(&p, &["-q", "--check", "-"], HOOK.as_bytes());
    run.expect_code(1);
    // Errors name the --stdin-filename.
    let run = run_with_stdin(
        &p,
        &["-", "--stdin-filename", "pkg/bad.py"],
        b"def f(:\n  pass\n  x.register_forward_hook(f)\n",
    );
    run.expect_code(2);
    assert!(run.stderr.contains("pkg/bad.py:1:"), "{run}");
    assert!(run.stdout.is_empty());
    let run = p.run(&["-", "a.py"]);
    run.expect_code(2);
}

#[test]
fn apply_refuses_files_with_uncommitted_changes_unless_allowed() {
    let p = Project::new(&[("clean.py", HOOK.as_bytes()), ("dirty.py", b"x = 1\n")]);
    p.git_init();
    p.git(&["add", "."]);
    p.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-qm",
        "init",
    ]);
    p.write("dirty.py", HOOK);
    let before = p.snapshot();
    let run = p.run(&["--apply", "."]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("refusing to write: dirty.py has uncommitted changes"),
        "{run}"
    );
    assert!(run.stderr.contains("--allow-dirty"), "{run}");
    assert_eq!(p.snapshot(), before, "nothing written");
    // Only files it would touch count: clean.py alone is fine.
    p.run(&["-q", "--apply", "clean.py"]).expect_code(0);
    p.run(&["-q", "--apply", "--allow-dirty", "."])
        .expect_code(0);
    assert_eq!(p.read_str("dirty.py"), HOOK_FENCED);
}

// ---------------------------------------------------------------------------
// Resource bounds, options and configuration (issue 12, items 14 to 19)
// ---------------------------------------------------------------------------

/// Runs hookfence on `args` at the project root with stdin from `stdin`,
/// its address space capped at 1.5 GiB, so that an unbounded read fails
/// fast instead of eating the machine's memory.
fn run_capped(p: &Project, args: &[&str], stdin: &Path) -> Run {
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1572864 && exec \"$@\"")
        .arg("sh")
        .arg(BIN)
        .args(["-j", "2"])
        .args(args)
        .current_dir(p.root())
        .stdin(fs::File::open(stdin).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::finish(child, &format!("hookfence {args:?}")).into()
}

/// A sparse file of `len` bytes (zeros, no disk used).
fn sparse(p: &Project, rel: &str, len: u64) {
    p.write(rel, b"");
    fs::OpenOptions::new()
        .write(true)
        .open(p.path(rel))
        .unwrap()
        .set_len(len)
        .unwrap();
}

const MIB: u64 = 1 << 20;

#[test]
fn every_input_is_read_up_to_a_limit_and_beyond_it_is_an_error_naming_it() {
    let p = Project::new(&[("hook.py", HOOK.as_bytes())]);
    let zero = Path::new("/dev/zero");
    let null = Path::new("/dev/null");
    let before = p.snapshot();
    let cases: &[(&[&str], &Path, &str)] = &[
        (
            &["--config", "/dev/zero", "--apply", "hook.py"],
            null,
            "/dev/zero: cannot read: more than 4 MiB, the most hookfence reads from a configuration file",
        ),
        (
            &["--files-from", "/dev/zero", "--apply"],
            null,
            "--files-from /dev/zero: more than 256 MiB, the most hookfence reads from a --files-from list",
        ),
        (
            &["--files-from", "-", "--apply"],
            zero,
            "--files-from -: cannot read stdin: more than 256 MiB",
        ),
        (
            &["--replay", "/dev/zero", "hook.py"],
            null,
            "/dev/zero: cannot read: more than 64 MiB, the most hookfence reads from a decisions file",
        ),
        (
            &["-", "--stdin-filename", "pkg/hooks.py"],
            zero,
            "pkg/hooks.py: cannot read stdin: more than 256 MiB, the most hookfence reads from a Python source",
        ),
    ];
    for (args, stdin, message) in cases {
        let run = run_capped(&p, args, stdin);
        run.expect_code(2);
        assert!(run.stderr.contains(message), "{args:?}: {run}");
        assert!(run.stdout.is_empty(), "{args:?}: {run}");
        before.assert_same(&p.snapshot(), &format!("{args:?}"));
    }

    // Files: a discovered configuration file and a Python source one byte
    // over their limits (sparse, so they cost no disk), among good files.
    sparse(&p, "pyproject.toml", 4 * MIB + 1);
    let run = run_capped(&p, &["--apply", "hook.py"], null);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("pyproject.toml: cannot read: more than 4 MiB"),
        "{run}"
    );
    fs::remove_file(p.path("pyproject.toml")).unwrap();
    sparse(&p, "pkg/generated.py", 256 * MIB + 1);
    p.write("pkg/hook.py", HOOK);
    let run = run_capped(&p, &["--apply", "--allow-dirty", "pkg"], null);
    run.expect_code(2);
    assert!(
        run.stderr.contains(
            "pkg/generated.py: cannot read: more than 256 MiB, the most hookfence reads from a Python source"
        ),
        "{run}"
    );
    assert_eq!(
        p.read_str("pkg/hook.py"),
        HOOK_FENCED,
        "the other file is fenced"
    );
}

#[test]
fn a_discovered_configuration_file_that_is_not_valid_is_an_error_at_its_line() {
    let p = Project::new(&[("src/hook.py", HOOK.as_bytes())]);
    let before_files = p.snapshot();
    // (file, text, what stderr must say), each found from `src/hook.py`
    // and from `src`, in the directory above or two above.
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "pyproject.toml",
            b"[tool.hookfence]\nexclude = [\"src\"\n",
            "pyproject.toml:2:17: unclosed array",
        ),
        (
            "pyproject.toml",
            b"[project]\nname = \"x\"\nname = \"y\"\n",
            "pyproject.toml:3:1: duplicate key",
        ),
        (
            "src/pyproject.toml",
            b"[project\n",
            "src/pyproject.toml:1:9: unclosed table",
        ),
        (
            "pyproject.toml",
            b"[tool]\nhookfence = 3\n",
            "pyproject.toml:2:13: [tool.hookfence]: invalid type",
        ),
        (
            "pyproject.toml",
            b"[tool.hookfence]\nexclude = \"src\"\n",
            "pyproject.toml:2:11: [tool.hookfence]: invalid type",
        ),
        (
            "pyproject.toml",
            b"# caf\xe9\n[tool.hookfence]\n",
            "pyproject.toml:1:6: not UTF-8",
        ),
        (
            "hookfence.toml",
            b"exclude = [\n",
            "hookfence.toml:1:12: unclosed array",
        ),
    ];
    for (file, text, message) in cases {
        p.write(file, text);
        let before = p.snapshot();
        for target in ["src/hook.py", "src"] {
            let run = p.run(&["--apply", target]);
            run.expect_code(2);
            assert!(run.stderr.contains(message), "{file} {text:?}: {run}");
            assert_eq!(p.snapshot(), before, "{file}: nothing written");
        }
        // The same file named with --config gives the same error.
        let run = p.run(&["--config", file, "src"]);
        run.expect_code(2);
        assert!(run.stderr.contains(message), "--config {file}: {run}");
        // --isolated reads none.
        p.run(&["-q", "--isolated", "src"]).expect_code(0);
        fs::remove_file(p.path(file)).unwrap();
    }
    assert_eq!(p.snapshot(), before_files);
}

#[test]
fn a_configured_decorator_must_parse_and_be_recognised_as_a_fence() {
    let p = Project::new(&[("hook.py", HOOK.as_bytes())]);
    // As written in the TOML file (basic strings: escapes are TOML's).
    let rejected = [
        r#""torch.compiler.disable()()""#,
        r#""torch.compiler.disable(x) or (y)""#,
        r#""torch.compiler.disable()[0]()""#,
        r#""torch.compiler.disable() #)""#,
        r#""torch.compiler.disable(\"\n\")""#,
        r#""torch.compiler.disable()\n""#,
        r#""torch.compiler.disable(\r)""#,
        r#""torch.compiler.disable(\u000b)""#,
        r#""torch.compiler.disable(\f)""#,
        r#""torch.compiler.disable(\t1)""#,
        r#""torch.compiler.disable(\u2028)""#,
        r#""torch.compiler.disable(\u0000)""#,
        r#""disable()""#,
        r#"" torch.compiler.disable()""#,
    ];
    for decorator in rejected {
        p.write(
            "pyproject.toml",
            format!("[tool.hookfence]\ndecorator = {decorator}\n"),
        );
        let before = p.snapshot();
        for mode in ["--apply", "--check"] {
            let run = p.run(&[mode, "hook.py"]);
            run.expect_code(2);
            assert!(
                run.stderr.contains("pyproject.toml: decorator: "),
                "{decorator}: {run}"
            );
            assert!(run.stderr.contains("torch.compiler.disable()\")"), "{run}");
            assert_eq!(p.snapshot(), before, "{decorator}");
        }
    }
    // What is accepted is recognised: a second --apply changes nothing.
    for decorator in [
        "torch.compiler.disable(recursive=False)",
        "torch._dynamo.disable",
        "mylib.compile.skip(\\\"why\\\")",
    ] {
        let p = Project::new(&[("hook.py", HOOK.as_bytes())]);
        p.write(
            "pyproject.toml",
            format!("[tool.hookfence]\ndecorator = \"{decorator}\"\n"),
        );
        p.run(&["-q", "--apply", "hook.py"]).expect_code(0);
        let once = p.read_str("hook.py");
        assert!(
            once.contains(&format!("    @{}\n", decorator.replace("\\\"", "\""))),
            "{once}"
        );
        p.run(&["-q", "--check", "hook.py"]).expect_code(0);
        p.run(&["-q", "--apply", "hook.py"]).expect_code(0);
        assert_eq!(p.read_str("hook.py"), once, "{decorator}: idempotent");
    }
}

#[test]
fn a_file_reached_by_several_spellings_is_processed_once_under_the_first() {
    let p = Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("sub/keep.txt", b""),
        ("pkg/m.py", HOOK.as_bytes()),
    ]);
    p.symlink("a.py", "link.py");
    fs::hard_link(p.path("a.py"), p.path("hard.py")).unwrap();
    fs::hard_link(p.path("pkg/m.py"), p.path("pkg/m_twin.py")).unwrap();
    let abs_a = p.path("a.py").to_str().unwrap().to_owned();
    let abs_m = p.path("pkg/m.py").to_str().unwrap().to_owned();
    p.write("list.txt", format!("sub/../a.py\n{abs_a}\nhard.py\n"));
    // (arguments, the diff's paths): the first spelling wins, in the order
    // of the command line; walked from one directory, the least path.
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["a.py", "sub/../a.py", &abs_a], vec!["a.py"]),
        (vec!["sub/../a.py", "a.py"], vec!["sub/../a.py"]),
        (vec!["link.py", "a.py"], vec!["link.py"]),
        (vec!["a.py", "link.py", "hard.py"], vec!["a.py"]),
        (vec!["hard.py", "a.py"], vec!["hard.py"]),
        (vec!["--files-from", "list.txt"], vec!["sub/../a.py"]),
        (vec!["a.py", "--files-from", "list.txt"], vec!["a.py"]),
        // Hard links in a walked directory.
        (vec!["pkg"], vec!["pkg/m.py"]),
        // Named and walked, whichever comes first.
        (vec![&abs_m, "pkg"], vec![&abs_m]),
        (vec!["pkg", &abs_m], vec!["pkg/m.py"]),
        (vec!["pkg/m_twin.py", "pkg"], vec!["pkg/m_twin.py"]),
        // Overlapping directories.
        (vec!["pkg/../pkg", "pkg"], vec!["pkg/../pkg/m.py"]),
        (vec!["pkg", "pkg/../pkg"], vec!["pkg/m.py"]),
    ];
    for (args, paths) in &cases {
        // Twice: the walk is parallel, the answer must not depend on it.
        for _ in 0..2 {
            let run = p.run(args);
            run.expect_code(0);
            assert_eq!(&run.diff_paths(), paths, "{args:?}\n{run}");
            assert!(run.summary().contains("1 file scanned"), "{args:?}\n{run}");
        }
    }
    // --apply writes each file once and succeeds.
    let run = p.run(&[
        "--apply", "a.py", "link.py", "hard.py", &abs_a, "pkg", &abs_m,
    ]);
    run.expect_code(0);
    assert_eq!(p.read_str("a.py"), HOOK_FENCED);
    assert_eq!(p.read_str("pkg/m.py"), HOOK_FENCED);
    p.run(&["--check", "a.py", "link.py", "pkg/m.py"])
        .expect_code(0);
}

#[test]
fn the_dirty_tree_guard_checks_the_file_written_and_refuses_what_git_cannot_restore() {
    let p = Project::new(&[
        ("repo/real.py", HOOK.as_bytes()),
        ("repo/clean.py", HOOK.as_bytes()),
        ("repo/gen/hook.py", HOOK.as_bytes()),
        ("repo/.gitignore", b"gen/\n"),
        ("other/theirs.py", HOOK.as_bytes()),
    ]);
    p.symlink("real.py", "repo/link.py");
    p.symlink("../other/theirs.py", "repo/elsewhere.py");
    p.symlink("clean.py", "repo/new_link.py");
    let commit = |dir: &str| {
        let cwd = p.path(dir);
        for args in [
            &["-c", "init.defaultBranch=main", "init", "-q"][..],
            &["add", "."],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                "commit",
                "-qm",
                "init",
            ],
        ] {
            let run = git_cmd(&cwd).args(args).run();
            assert_eq!(run.code, Some(0), "git {args:?}: {run}");
        }
    };
    commit("other");
    fs::remove_file(p.path("repo/new_link.py")).unwrap();
    commit("repo");
    p.symlink("clean.py", "repo/new_link.py");
    // Committed clean links whose targets have uncommitted edits, in the
    // same work tree and in another one.
    p.write("repo/real.py", format!("{HOOK}# edited\n"));
    p.write("other/theirs.py", format!("{HOOK}# edited\n"));
    p.write("repo/untracked.py", HOOK);
    let real = fs::canonicalize(p.path("repo/real.py")).unwrap();
    let theirs = fs::canonicalize(p.path("other/theirs.py")).unwrap();
    // `git status` may refresh the index: only the work trees' files count.
    let work_files = || {
        let mut files = p.contents();
        files.retain(|path, _| !path.components().any(|c| c.as_os_str() == ".git"));
        files
    };
    let before = work_files();
    let cases = [
        (
            "link.py",
            format!(
                "link.py (a link to {}) has uncommitted changes",
                real.display()
            ),
        ),
        (
            "elsewhere.py",
            format!(
                "elsewhere.py (a link to {}) has uncommitted changes",
                theirs.display()
            ),
        ),
        (
            "gen/hook.py",
            "gen/hook.py is ignored by git, so `git checkout` cannot restore it".to_owned(),
        ),
        (
            "untracked.py",
            "untracked.py is not tracked by git".to_owned(),
        ),
    ];
    let cwd = p.path("repo");
    for (file, message) in &cases {
        let run = p.cmd().current_dir(&cwd).args(["--apply", file]).run();
        run.expect_code(2);
        assert!(
            run.stderr
                .contains(&format!("refusing to write: {message}")),
            "{file}: {run}"
        );
        assert!(run.stderr.contains("--allow-dirty"), "{run}");
        assert!(work_files() == before, "{file}: nothing written");
    }
    // An untracked link to a clean committed file writes that file, which
    // `git checkout` can restore.
    let run = p
        .cmd()
        .current_dir(&cwd)
        .args(["-q", "--apply", "new_link.py"])
        .run();
    run.expect_code(0);
    assert_eq!(p.read_str("repo/clean.py"), HOOK_FENCED);
    // --allow-dirty writes them all.
    let run = p
        .cmd()
        .current_dir(&cwd)
        .args([
            "-q",
            "--apply",
            "--allow-dirty",
            "link.py",
            "elsewhere.py",
            "gen/hook.py",
        ])
        .run();
    run.expect_code(0);
    assert_eq!(p.read_str("repo/gen/hook.py"), HOOK_FENCED);
    assert!(
        p.read_str("other/theirs.py")
            .contains("@torch.compiler.disable()")
    );
}

#[test]
fn the_thread_pool_is_capped_at_the_work_and_at_a_few_threads_per_core() {
    use clap::Parser as _;
    use hookfence::cli::{Args, MAX_JOBS_PER_CORE, Settings};
    let p = Project::new(&[
        ("a.py", HOOK.as_bytes()),
        ("pkg/b.py", HOOK.as_bytes()),
        ("list.txt", b"a.py\n"),
    ]);
    let path = |rel: &str| p.path(rel).to_str().unwrap().to_owned();
    let jobs = |args: &[String]| {
        let argv = ["hookfence", "--isolated"]
            .into_iter()
            .map(str::to_owned)
            .chain(args.iter().cloned());
        Settings::from_args(Args::parse_from(argv)).unwrap().jobs
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let many = "2048".to_owned();
    // Files known in advance: one thread per file, plus one.
    assert_eq!(jobs(&["-j".into(), many.clone(), path("a.py")]), 2);
    assert_eq!(
        jobs(&["-j".into(), many.clone(), path("a.py"), path("pkg/b.py")]),
        3
    );
    assert_eq!(jobs(&["-j".into(), many.clone(), "-".into()]), 2, "stdin");
    assert_eq!(jobs(&[path("a.py")]), cores.min(2), "the default too");
    // A directory to walk: a few per core at most.
    assert!(MAX_JOBS_PER_CORE * cores < 2048);
    assert_eq!(
        jobs(&["-j".into(), many.clone(), path("pkg")]),
        MAX_JOBS_PER_CORE * cores
    );
    assert_eq!(
        jobs(&[
            "-j".into(),
            many.clone(),
            "--files-from".into(),
            path("list.txt")
        ]),
        2,
        "--files-from: the paths listed count"
    );
    assert_eq!(
        jobs(&["-j".into(), "3".into(), path("pkg")]),
        3.min(MAX_JOBS_PER_CORE * cores)
    );
    assert_eq!(jobs(&[path("pkg")]), cores);
    assert_eq!(jobs(&["-j".into(), "0".into(), path("pkg")]), cores);
}

#[test]
fn completions_are_printed_for_each_shell() {
    let p = Project::new(&[]);
    for shell in ["bash", "zsh", "fish"] {
        let run = p.run(&["--completions", shell]);
        run.expect_code(0);
        let script = String::from_utf8_lossy(&run.stdout);
        assert!(
            script.contains("hookfence") && script.contains("strategy"),
            "{shell}: {run}"
        );
    }
    p.run(&["--completions", "tcsh"]).expect_code(2);
}

#[test]
fn help_is_golden() {
    let p = Project::new(&[]);
    let run = p.run(&["--help"]);
    run.expect_code(0);
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("help", String::from_utf8_lossy(&run.stdout)));
}

const EXPLAINED: &[(&str, &[u8])] = &[
    ("pkg/__init__.py", b""),
    (
        "pkg/hooks.py",
        b"import torch\n\nfrom .moves import swap_in\n\n\ndef _pre(module, args):\n    swap_in(module)\n\n\ndef _post(module, args, output):\n    return output.to(torch.float32)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(_pre)\n    model.register_forward_hook(_post)\n",
    ),
    (
        "pkg/moves.py",
        b"def swap_in(module):\n    for p in module.parameters():\n        p.data = p.data.cuda(non_blocking=True)\n",
    ),
];

#[test]
fn explain_names_how_a_site_was_found_its_evidence_chain_and_the_decision() {
    let p = Project::new(EXPLAINED);
    let run = p.run(&["--explain", "pkg/hooks.py:7"]);
    run.expect_code(0);
    let text = run.stdout_str();
    for expected in [
        "pkg/hooks.py:6:1  _pre",
        "registration: registered at pkg/hooks.py:15 (pkg/hooks.py:15)",
        "call: swap_in (pkg/moves.py:1)",
        // The data-flow step: what `p` is.
        "move: moves `p` and stores it in `p.data` (`p` comes from `module.parameters()` at line 2) (pkg/moves.py:3)",
        "decision: unfenced offload hook",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    // A qualified name works too, and says what was discounted.
    let run = p.run(&["--explain", "_post", "pkg"]);
    run.expect_code(0);
    let text = run.stdout_str();
    assert!(
        text.contains(
            "`output` is a value the hook is handed, an activation: casting it to a dtype"
        ),
        "{text}"
    );
    assert!(text.contains("decision: not-offload"), "{text}");
    // No site there: exit 2, saying so.
    let run = p.run(&["--explain", "pkg/moves.py:1"]);
    run.expect_code(2);
    assert!(run.stderr.contains("no hook site there"), "{run}");
}

#[test]
fn json_sites_carry_the_evidence_chain_and_how_they_were_found() {
    let p = Project::new(EXPLAINED);
    let run = p.run(&["--format", "json", "pkg"]);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let site = doc["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["qualname"] == "_pre")
        .unwrap();
    assert_eq!(site["evidence"][0]["kind"], "call");
    assert_eq!(site["evidence"][0]["detail"], "swap_in");
    assert_eq!(site["evidence"][0]["path"], "pkg/moves.py");
    assert_eq!(site["evidence"][1]["kind"], "move");
    assert_eq!(site["evidence"][1]["line"], 3);
    assert_eq!(site["discovered_by"][0]["how"], "registration");
    assert_eq!(site["discovered_by"][0]["line"], 15);
    let post = doc["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["qualname"] == "_post")
        .unwrap();
    assert_eq!(post["status"], "not-offload");
    assert!(
        post["discounted"][0]
            .as_str()
            .unwrap()
            .contains("casting it to a dtype")
    );
}

/// Hooks reached through other objects (issue 17): the JSON evidence names
/// how each step was reached, and a hook replaying a table of hooks that
/// move nothing says so.
#[test]
fn json_evidence_names_handed_and_replayed_steps() {
    let sites = |file: &str| -> Vec<serde_json::Value> {
        let text = std::fs::read(format!("tests/fixtures/{file}")).unwrap();
        let p = Project::new(&[(file, text.as_slice())]);
        let run = p.run(&["--list", "--format", "json", "."]);
        let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        doc["sites"].as_array().unwrap().clone()
    };
    let site = |sites: &[serde_json::Value], name: &str| {
        sites
            .iter()
            .find(|s| s["qualname"] == name)
            .unwrap_or_else(|| panic!("{name} in {sites:?}"))
            .clone()
    };
    let backward = sites("backward_offload_setup.py");
    let queued = site(&backward, "queue_release");
    assert_eq!(queued["status"], "unfenced", "{queued}");
    assert_eq!(queued["evidence"][0]["kind"], "handed");
    assert_eq!(
        queued["evidence"][0]["detail"],
        "release_params (handed to torch.autograd.Variable._execution_engine.queue_callback)"
    );
    let applied = site(&backward, "wrap_outputs");
    assert_eq!(applied["evidence"][0]["kind"], "handed");
    assert_eq!(
        applied["evidence"][0]["detail"],
        "FetchForBackward.backward (handed to FetchForBackward.apply)"
    );
    for name in ["scale_gradients", "apply_a_value", "init_on_first_call"] {
        assert_eq!(site(&backward, name)["status"], "not-offload", "{name}");
    }
    let replayed = sites("replayed_hook_tables.py");
    let fused = site(&replayed, "fused_pre_hook");
    assert_eq!(fused["status"], "unfenced", "{fused}");
    assert_eq!(fused["evidence"][0]["kind"], "replayed");
    assert!(
        fused["reason"]
            .as_str()
            .unwrap()
            .contains("_all_gather_hook (registered hook replayed from sub._forward_pre_hooks)"),
        "{fused}"
    );
    let post = site(&replayed, "fused_post_hook");
    assert_eq!(post["status"], "not-offload", "{post}");
    assert_eq!(
        post["discounted"][0],
        "replays registered hooks from sub._forward_hooks: none the project registers there does offload work"
    );
}

#[test]
fn a_method_reached_only_inside_fenced_entry_points_is_covered_in_every_format() {
    let p = Project::new(COVERED);
    let doc: serde_json::Value =
        serde_json::from_slice(&p.run(&["--format", "json", "pkg"]).stdout).unwrap();
    let site = |qualname: &str| -> serde_json::Value {
        doc["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["qualname"] == qualname)
            .unwrap_or_else(|| panic!("{qualname} in {doc:#}"))
            .clone()
    };
    // Only `enter` calls it, and its authors fenced `enter`.
    let bring_in = site("DeviceStage.bring_in");
    assert_eq!(bring_in["status"], "covered", "{bring_in:#}");
    assert!(
        bring_in["reason"]
            .as_str()
            .unwrap()
            .contains("runs only inside install.<locals>.enter at pkg/install.py:10 (fenced by @torch.compiler.disable())"),
        "{bring_in:#}"
    );
    assert_eq!(bring_in["edits"], serde_json::json!([]));
    // Only `leave` calls it, and the run fences `leave`.
    let send_back = site("DeviceStage.send_back");
    assert_eq!(send_back["status"], "covered", "{send_back:#}");
    assert!(
        send_back["reason"]
            .as_str()
            .unwrap()
            .contains("install.<locals>.leave at pkg/install.py:14 (fenced by this run)"),
        "{send_back:#}"
    );
    // `again` is left alone by a comment: `refresh` keeps its own fence.
    assert_eq!(site("DeviceStage.refresh")["status"], "unfenced");
    assert_eq!(site("install.<locals>.leave")["status"], "unfenced");
    assert_eq!(doc["summary"]["covered"], 2, "{doc:#}");
    assert_eq!(doc["summary"]["unfenced"], 2, "{doc:#}");

    // SARIF: an informational result per covered hook, an error per
    // unfenced one.
    let sarif: serde_json::Value =
        serde_json::from_slice(&p.run(&["--format", "sarif", "pkg"]).stdout).unwrap();
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let informational: Vec<&serde_json::Value> = results
        .iter()
        .filter(|r| r["kind"] == "informational")
        .collect();
    assert_eq!(informational.len(), 2, "{sarif:#}");
    assert!(
        informational
            .iter()
            .all(|r| r["level"] == "none" && r["ruleId"] == "HF002")
    );
    assert_eq!(
        sarif["runs"][0]["tool"]["driver"]["rules"][1]["id"], "HF002",
        "{sarif:#}"
    );
    assert_eq!(results.iter().filter(|r| r["level"] == "error").count(), 2);
    // GitHub: a notice per covered hook.
    let github = p.run(&["--format", "github", "pkg"]).stdout_str();
    assert_eq!(github.matches("::notice ").count(), 2, "{github}");
    assert!(
        github.contains("DeviceStage.send_back needs no fence"),
        "{github}"
    );
    // The list, the summary and --explain.
    let list = p.run(&["--list", "pkg"]).stdout_str();
    assert!(
        list.contains("pkg/stages.py:9:5  covered  DeviceStage.send_back"),
        "{list}"
    );
    let diff = p.run(&["pkg"]);
    assert!(
        diff.stderr.contains("2 covered by fenced entry points"),
        "{diff}"
    );
    assert!(
        diff.stderr.contains(
            "skipped DeviceStage.bring_in: covered: runs only inside install.<locals>.enter"
        ),
        "{diff}"
    );
    let explain = p.run(&["--explain", "pkg/stages.py:9", "pkg"]).stdout_str();
    assert!(
        explain.contains("dispatch: hook protocol method"),
        "{explain}"
    );
    assert!(
        explain.contains("decision: covered:") && explain.contains("install.<locals>.leave"),
        "{explain}"
    );

    // --check counts a covered hook as fenced: it names only the two
    // unfenced ones, and the file that holds only covered ones passes.
    let check = p.run(&["--check", "pkg"]);
    check.expect_code(1);
    let out = check.stdout_str();
    let named: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split(" unfenced offload hook ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    assert_eq!(
        named,
        ["install.<locals>.leave", "DeviceStage.refresh"],
        "{check}"
    );
    // The same verdicts from the file alone.
    let alone = p.run(&["--format", "json", "--project-root", ".", "pkg/stages.py"]);
    let alone: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
    let statuses: Vec<&str> = alone["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["covered", "covered", "unfenced"], "{alone:#}");

    // Once applied, everything is fenced or covered; nothing is fenced twice.
    p.run(&["--apply", "pkg"]).expect_code(0);
    p.run(&["--check", "pkg"]).expect_code(0);
    let stages = String::from_utf8(p.read("pkg/stages.py")).unwrap();
    assert_eq!(
        stages.matches("@torch.compiler.disable()").count(),
        1,
        "{stages}"
    );
    assert!(
        stages.contains("@torch.compiler.disable()\n    def refresh"),
        "{stages}"
    );
}

#[test]
fn a_forward_wrapper_or_a_non_recursive_fence_covers_nothing() {
    // `lift` is dispatched by a registered hook the run fences, and also by
    // a forward wrapper, which runs traced; `drop_` only by a hook fenced
    // with `recursive=False`, under which dynamo still compiles what it
    // calls. Neither is covered.
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        (
            "pkg/objects.py",
            b"class Lifter:
    def lift(self, module):
        module.to(\"cuda\")

    def drop_(self, module):
        module.to(\"cpu\")
",
        ),
        (
            "pkg/install.py",
            b"import torch


def install(model, hooks):
    def enter(module, args):
        for hook in hooks:
            hook.lift(module)

    @torch.compiler.disable(recursive=False)
    def leave(module, args, output):
        for hook in hooks:
            hook.drop_(module)

    for sub in model.modules():
        sub.register_forward_pre_hook(enter)
        sub.register_forward_hook(leave)


def wrap(module, hooks):
    old_forward = module.forward

    def new_forward(*args, **kwargs):
        for hook in hooks:
            hook.lift(module)
        return old_forward(*args, **kwargs)

    module.forward = new_forward
",
        ),
    ]);
    let doc: serde_json::Value =
        serde_json::from_slice(&p.run(&["--format", "json", "pkg"]).stdout).unwrap();
    let status = |qualname: &str| -> String {
        doc["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["qualname"] == qualname)
            .unwrap_or_else(|| panic!("{qualname} in {doc:#}"))["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(status("Lifter.lift"), "unfenced", "{doc:#}");
    assert_eq!(status("Lifter.drop_"), "unfenced", "{doc:#}");
    assert_eq!(doc["summary"]["covered"], 0, "{doc:#}");
    // Without the wrapper, the fenced `enter` covers `lift`.
    let text = String::from_utf8(p.read("pkg/install.py")).unwrap();
    p.write(
        "pkg/install.py",
        &text[..text.find("\n\ndef wrap").unwrap() + 1],
    );
    let list = p.run(&["--list", "pkg"]).stdout_str();
    assert!(list.contains("covered  Lifter.lift"), "{list}");
    assert!(list.contains("unfenced  Lifter.drop_"), "{list}");
}

/// A hook that hands a helper an autograd Function and a function to call
/// at backward time; the helper applies the one, handing it the other.
const APPLIED: &[(&str, &[u8])] = &[
    ("pkg/__init__.py", b""),
    (
        "pkg/relay.py",
        b"import torch\n\n\ndef on_tensors(owner, fn_cls, later, out):\n    return fn_cls.apply(owner, later, out)\n\n\nclass Later(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, owner, later, t):\n        ctx.owner = owner\n        ctx.later = later\n        return t.detach()\n\n    @staticmethod\n    def backward(ctx, grad):\n        ctx.later(ctx.owner)\n        return None, None, grad\n",
    ),
    (
        "pkg/hooks.py",
        b"from .relay import Later, on_tensors\n\n\ndef attach(model):\n    def after(module, args, out):\n        def reload(m):\n            m.to('cuda')\n\n        return on_tensors(module, Later, reload, out)\n\n    model.register_forward_hook(after)\n",
    ),
];

#[test]
fn a_function_a_hook_hands_to_a_functions_backward_is_found_by_use_in_json_and_explain() {
    let p = Project::new(APPLIED);
    let run = p.run(&["--format", "json", "pkg"]);
    let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let sites = doc["sites"].as_array().unwrap();
    let reload = sites
        .iter()
        .find(|s| s["qualname"] == "attach.<locals>.after.<locals>.reload")
        .unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(reload["status"], "unfenced", "{reload}");
    assert_eq!(reload["discovered_by"][0]["how"], "applied", "{reload}");
    assert_eq!(reload["discovered_by"][0]["path"], "pkg/hooks.py");
    assert_eq!(reload["discovered_by"][0]["line"], 9);
    // The hook that hands it over carries its evidence, through the helper
    // and the Function's backward.
    let after = sites
        .iter()
        .find(|s| s["qualname"] == "attach.<locals>.after")
        .unwrap();
    assert_eq!(after["status"], "unfenced", "{after}");
    let steps: Vec<&str> = after["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["detail"].as_str().unwrap())
        .collect();
    assert!(steps[0].starts_with("on_tensors"), "{steps:?}");
    assert!(steps[1].starts_with("Later.backward"), "{steps:?}");
    assert_eq!(after["evidence"][1]["kind"], "handed");
    let run = p.run(&["--explain", "attach.<locals>.after.<locals>.reload", "pkg"]);
    run.expect_code(0);
    let text = run.stdout_str();
    assert!(
        text.contains("applied: run by ctx.later of Later.backward"),
        "{text}"
    );
}
