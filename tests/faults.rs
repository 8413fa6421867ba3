//! Fault injection: the binary under read-only files and directories, files
//! changed behind its back, a full disk, odd file types, signals and a second
//! hookfence on the same tree. Each fault must leave the original intact (or
//! whole and new), be named on stderr, make the run exit 2 (130 for a signal),
//! and not stop the other files from being processed.
//!
//! Real kernel faults are used where this machine allows them (`chattr +i`,
//! a read-only bind mount, a tiny tmpfs, real signals); a test whose
//! mechanism is unavailable says so on stderr and is skipped for that
//! mechanism only. Every such fault is also covered by the debug-only
//! injection hooks of `src/write.rs` (`HOOKFENCE_FAULT`,
//! `HOOKFENCE_TEST_PAUSE_*`), which do not exist in a release build.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::{BIN, HOOK, HOOK_FENCED, Project, Run, TIMEOUT};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Says, past the test harness's capture, why part of a test was skipped.
fn skip(test: &str, reason: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "faults::{test}: SKIPPED the real-kernel part: {reason} (the injected fault still runs)"
    );
}

/// The injection hooks are compiled into debug builds only.
fn injection_available(test: &str) -> bool {
    if !cfg!(debug_assertions) {
        skip(
            test,
            "release build: HOOKFENCE_FAULT / HOOKFENCE_TEST_PAUSE_* are compiled out",
        );
    }
    cfg!(debug_assertions)
}

impl Project {
    fn symlink(&self, target: &str, link: &str) {
        let path = self.path(link);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    fn mkfifo(&self, rel: &str) -> PathBuf {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let status = Command::new("mkfifo").arg(&path).status().unwrap();
        assert!(status.success(), "mkfifo {} failed", path.display());
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(BIN);
        command
            .current_dir(self.root())
            .args(args)
            .env_remove("HOOKFENCE_FAULT")
            .env_remove("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME")
            .env_remove("HOOKFENCE_TEST_PAUSE_IN_ANALYSIS");
        command
    }

    fn run(&self, args: &[&str]) -> Run {
        run(self.command(args))
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = self.command(args);
        for (k, v) in env {
            command.env(k, v);
        }
        run(command)
    }

    fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut command = self.command(args);
        for (k, v) in env {
            command.env(k, v);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Every regular file below the root, with its bytes (symlinks, FIFOs
    /// and devices are not read).
    fn contents(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        common::file_contents(self.root())
    }
}

fn assert_no_temp_files(root: &Path) {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with(".hookfence-") || name.ends_with(".tmp") {
                found.push(path.clone());
            }
            if fs::symlink_metadata(&path).unwrap().is_dir() {
                walk(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(root, &mut found);
    assert!(found.is_empty(), "temporary files left: {found:?}");
}

impl Run {
    /// The stderr line naming `path`, which must say the file was left alone.
    fn error_for(&self, path: &str) -> &str {
        let line = self
            .stderr
            .lines()
            .find(|l| l.starts_with(&format!("{path}:")))
            .unwrap_or_else(|| panic!("no error naming {path}\n{self}"));
        assert!(
            line.ends_with("\u{2014} left unchanged"),
            "error line without `— left unchanged`: {line:?}"
        );
        line
    }
}

fn run(mut command: Command) -> Run {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    wait(child)
}

/// Waits for a child (draining its output), failing the test after [`TIMEOUT`].
fn wait(child: Child) -> Run {
    common::finish(child, "hookfence").into()
}

/// Sends a signal with kill(1) (the crate forbids `unsafe`, so no libc::kill).
fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} failed");
}

/// Opens the FIFO a paused hookfence is about to read: returns once the child
/// has reached the pause. The child goes on when the returned file is dropped.
fn hold(fifo: &Path) -> fs::File {
    let (tx, rx) = mpsc::channel();
    let path = fifo.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(fs::OpenOptions::new().write(true).open(&path));
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(file) => file.unwrap(),
        Err(_) => {
            // Unblock the opener before failing.
            let _ = fs::File::open(fifo);
            panic!("hookfence never reached the pause at {}", fifo.display());
        }
    }
}

/// Runs a command as root's tools do; `Err` carries its stderr.
fn sh(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `chattr +i` on a path, undone on drop (an immutable file cannot even be
/// deleted by root, so the temporary directory could not be removed).
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Result<Immutable, String> {
        sh("chattr", &["+i", path.to_str().unwrap()])?;
        Ok(Immutable(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = sh("chattr", &["-i", self.0.to_str().unwrap()]);
    }
}

/// A mount, unmounted on drop.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Result<Mount, String> {
        fs::create_dir_all(dir).unwrap();
        let options = format!("size={size}");
        sh(
            "mount",
            &[
                "-t",
                "tmpfs",
                "-o",
                &options,
                "tmpfs",
                dir.to_str().unwrap(),
            ],
        )?;
        Ok(Mount(dir.to_path_buf()))
    }

    /// `dir` bind-mounted onto itself, read-only.
    fn read_only(dir: &Path) -> Result<Mount, String> {
        let d = dir.to_str().unwrap();
        sh("mount", &["--bind", d, d])?;
        let mount = Mount(dir.to_path_buf());
        sh("mount", &["-o", "remount,ro,bind", d, d])?;
        Ok(mount)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = sh("umount", &["-l", self.0.to_str().unwrap()]);
    }
}

// ---------------------------------------------------------------------------
// Python sources
// ---------------------------------------------------------------------------

/// A project with the file under test (`target`) and a good file elsewhere
/// that must be fenced whatever happens to the target.
fn target_and_good(target: &str) -> Project {
    Project::new(&[
        (target, HOOK.as_bytes()),
        ("good/hooks.py", HOOK.as_bytes()),
    ])
}

/// The checks every write fault shares: exit 2, the target named and left
/// byte for byte, the good file fenced, no temporary file anywhere.
fn assert_write_fault(p: &Project, run: &Run, target: &str, message: &str) {
    run.expect_code(2);
    let line = run.error_for(target);
    assert!(
        line.contains(message),
        "error for {target} does not say {message:?}: {line:?}"
    );
    assert_eq!(p.read_str(target), HOOK, "{target} changed");
    assert_eq!(
        p.read_str("good/hooks.py"),
        HOOK_FENCED,
        "good file not fenced"
    );
    assert_no_temp_files(p.root());
}

// ---------------------------------------------------------------------------
// 1. Read-only file, unwritable directory
// ---------------------------------------------------------------------------

#[test]
fn read_only_file_is_named_left_alone_and_the_rest_written() {
    // Root ignores permission bits: an immutable file is read-only to root too.
    let p = target_and_good("ro/hooks.py");
    match Immutable::set(&p.path("ro/hooks.py")) {
        Ok(_guard) => {
            let run = p.run(&["--apply", "ro", "good"]);
            assert_write_fault(
                &p,
                &run,
                "ro/hooks.py",
                "cannot write: Operation not permitted",
            );
        }
        Err(why) => skip("read_only_file", &format!("chattr +i unavailable: {why}")),
    }

    if injection_available("read_only_file") {
        let p = target_and_good("ro/hooks.py");
        let run = p.run_env(
            &["--apply", "ro", "good"],
            &[("HOOKFENCE_FAULT", "rename:ro/hooks.py")],
        );
        assert_write_fault(
            &p,
            &run,
            "ro/hooks.py",
            "cannot write: Operation not permitted",
        );
    }
}

#[test]
fn unwritable_directory_is_named_left_alone_and_the_rest_written() {
    let p = target_and_good("ro/hooks.py");
    match Immutable::set(&p.path("ro")) {
        Ok(_guard) => {
            let run = p.run(&["--apply", "ro", "good"]);
            assert_write_fault(&p, &run, "ro/hooks.py", "cannot write:");
        }
        Err(why) => skip(
            "unwritable_directory",
            &format!("chattr +i unavailable: {why}"),
        ),
    }

    let p = target_and_good("ro/hooks.py");
    match Mount::read_only(&p.path("ro")) {
        Ok(_mount) => {
            let run = p.run(&["--apply", "ro", "good"]);
            assert_write_fault(&p, &run, "ro/hooks.py", "Read-only file system");
        }
        Err(why) => skip(
            "unwritable_directory",
            &format!("read-only bind mount unavailable: {why}"),
        ),
    }

    if injection_available("unwritable_directory") {
        let p = target_and_good("ro/hooks.py");
        let run = p.run_env(
            &["--apply", "ro", "good"],
            &[("HOOKFENCE_FAULT", "create:ro/hooks.py")],
        );
        assert_write_fault(&p, &run, "ro/hooks.py", "cannot write: Permission denied");
    }
}

#[test]
fn helper_module_that_cannot_be_created_keeps_its_importers_unchanged() {
    // The wrap strategy: a file rewritten to import a helper that does not
    // exist would break at import time. It must stay as it was.
    if !injection_available("helper_module") {
        return;
    }
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/hooks.py", HOOK.as_bytes()),
        ("other/__init__.py", b""),
        ("other/hooks.py", HOOK.as_bytes()),
    ]);
    let run = p.run_env(
        &["--apply", "--strategy", "wrap", "pkg", "other"],
        &[("HOOKFENCE_FAULT", "create:pkg/_no_compile.py")],
    );
    run.expect_code(2);
    assert!(run.stderr.contains("pkg/_no_compile.py"), "{run}");
    assert!(run.stderr.contains("pkg/hooks.py"), "{run}");
    assert_eq!(p.read_str("pkg/hooks.py"), HOOK);
    assert!(!p.path("pkg/_no_compile.py").exists());
    assert!(p.path("other/_no_compile.py").exists());
    assert!(p.read_str("other/hooks.py").contains("@no_compile"));
    assert_no_temp_files(p.root());
}

/// The dry run and `--apply` on `args`: both exit 2 with the same error for
/// `file`, which says `message`, and the tree is left as it was.
fn assert_refused_alike(p: &Project, args: &[&str], file: &str, message: &str) {
    let before = p.contents();
    let dry = p.run(args);
    dry.expect_code(2);
    let mut apply_args = vec!["--apply"];
    apply_args.extend(args);
    let apply = p.run(&apply_args);
    apply.expect_code(2);
    let line = dry.error_for(file);
    assert!(line.contains(message), "{line:?} does not say {message:?}");
    assert_eq!(line, apply.error_for(file), "dry run and --apply differ");
    assert_eq!(p.contents(), before);
    assert_no_temp_files(p.root());
}

#[test]
fn dry_run_fails_where_apply_would_for_a_helper_it_cannot_create() {
    // Writability of every file a run would create is checked while
    // planning, so the dry run does not promise what --apply cannot do.
    let files: &[(&str, &[u8])] = &[("pkg/__init__.py", b""), ("pkg/hooks.py", HOOK.as_bytes())];
    let args = ["--strategy", "wrap", "pkg"];
    let p = Project::new(files);
    match Immutable::set(&p.path("pkg")) {
        Ok(_guard) => {
            assert_refused_alike(&p, &args, "pkg/hooks.py", "Operation not permitted");
        }
        Err(why) => skip("dry_run_helper", &format!("chattr +i unavailable: {why}")),
    }
    let p = Project::new(files);
    match Mount::read_only(&p.path("pkg")) {
        Ok(_mount) => {
            assert_refused_alike(&p, &args, "pkg/hooks.py", "Read-only file system");
        }
        Err(why) => skip(
            "dry_run_helper",
            &format!("read-only bind mount unavailable: {why}"),
        ),
    }
}

#[test]
fn emit_pytest_into_an_unwritable_directory_writes_nothing_in_any_mode() {
    let p = Project::new(&[("pkg/hooks.py", HOOK.as_bytes()), ("ro/keep.txt", b"")]);
    let check = |p: &Project, message: &str| {
        for mode in [&["--check"][..], &[], &["--apply"]] {
            let before = p.contents();
            let mut args = mode.to_vec();
            args.extend(["--emit-pytest", "ro/test_fences.py", "pkg"]);
            let run = p.run(&args);
            run.expect_code(2);
            assert!(
                run.stderr.contains("ro/test_fences.py: cannot write: ")
                    && run.stderr.contains(message)
                    && run.stderr.contains("nothing was written"),
                "{args:?}: {run}"
            );
            assert_eq!(p.contents(), before, "{args:?}");
            assert_no_temp_files(p.root());
        }
    };
    match Immutable::set(&p.path("ro")) {
        Ok(_guard) => check(&p, "Operation not permitted"),
        Err(why) => skip(
            "emit_pytest_unwritable",
            &format!("chattr +i unavailable: {why}"),
        ),
    }
    match Mount::read_only(&p.path("ro")) {
        Ok(_mount) => check(&p, "Read-only file system"),
        Err(why) => skip(
            "emit_pytest_unwritable",
            &format!("read-only bind mount unavailable: {why}"),
        ),
    }
}

#[test]
fn owner_and_group_are_kept() {
    // As root, a rewrite must not hand another user's file to root.
    let p = Project::new(&[("hooks.py", HOOK.as_bytes())]);
    let path = p.path("hooks.py");
    if let Err(err) = std::os::unix::fs::chown(&path, Some(4242), Some(4343)) {
        skip(
            "owner_and_group",
            &format!("cannot chown (not root?): {err}"),
        );
        return;
    }
    p.run(&["--apply", "hooks.py"]).expect_code(0);
    assert_eq!(p.read_str("hooks.py"), HOOK_FENCED);
    let meta = fs::metadata(&path).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (4242, 4343));
    assert_no_temp_files(p.root());
}

#[test]
fn setuid_setgid_and_sticky_bits_are_kept_with_the_owner() {
    // Root rewriting another user's file: the owner change clears setuid and
    // setgid, so the mode must be set after it, every bit kept.
    use std::os::unix::fs::PermissionsExt;
    for mode in [0o6755, 0o2775, 0o4750, 0o1644] {
        let p = Project::new(&[("hooks.py", HOOK.as_bytes())]);
        let path = p.path("hooks.py");
        if let Err(err) = std::os::unix::fs::chown(&path, Some(4242), Some(4343)) {
            skip("setuid_setgid", &format!("cannot chown (not root?): {err}"));
            return;
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        p.run(&["--apply", "hooks.py"]).expect_code(0);
        assert_eq!(p.read_str("hooks.py"), HOOK_FENCED);
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (4242, 4343), "{mode:o}");
        assert_eq!(meta.permissions().mode() & 0o7777, mode, "{mode:o}");
        assert_no_temp_files(p.root());
    }
}

/// A git work tree holding `hooks.py` (committed) and `dirty.py` (committed,
/// then edited), for the dirty-tree guard.
fn committed_tree() -> Project {
    let p = Project::new(&[("hooks.py", HOOK.as_bytes()), ("dirty.py", b"x = 1\n")]);
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .current_dir(p.root())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["-c", "init.defaultBranch=main", "init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    p.write("dirty.py", HOOK);
    p
}

#[test]
fn a_git_that_fails_is_a_refusal_not_a_clean_tree() {
    // git failing on the work tree (here: a truncated index) must not read as
    // "clean": exit 2 naming the file and git's message, nothing written.
    let p = committed_tree();
    let index = p.path(".git/index");
    let bytes = fs::read(&index).unwrap();
    fs::write(&index, &bytes[..20]).unwrap();
    let before = p.contents();
    let run = p.run_env(&["--apply", "."], &[("GIT_CONFIG_GLOBAL", "/dev/null")]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("dirty.py") || run.stderr.contains("hooks.py"),
        "{run}"
    );
    assert!(
        run.stderr.contains("index file smaller than expected"),
        "{run}"
    );
    assert!(run.stderr.contains("nothing was written"), "{run}");
    assert_eq!(p.contents(), before);
    // --allow-dirty is the user's way past the check.
    p.run_env(
        &["-q", "--apply", "--allow-dirty", "."],
        &[("GIT_CONFIG_GLOBAL", "/dev/null")],
    )
    .expect_code(0);
    assert_eq!(p.read_str("dirty.py"), HOOK_FENCED);
}

#[test]
fn a_repository_git_will_not_read_is_a_refusal() {
    // Root on another user's checkout: git refuses ("dubious ownership");
    // that is no licence to write into a file with uncommitted edits.
    let p = committed_tree();
    let chown = Command::new("chown")
        .args(["-R", "4242:4343"])
        .arg(p.root())
        .status();
    if !matches!(chown, Ok(s) if s.success()) || !nix_is_root() {
        skip(
            "dubious_ownership",
            "not root: cannot make another user's checkout",
        );
        return;
    }
    let before = p.contents();
    let run = p.run_env(&["--apply", "."], &[("GIT_CONFIG_GLOBAL", "/dev/null")]);
    run.expect_code(2);
    assert!(run.stderr.contains("dubious ownership"), "{run}");
    assert!(run.stderr.contains("nothing was written"), "{run}");
    assert_eq!(p.contents(), before);
}

/// Whether this process is root (files it makes are owned by uid 0).
fn nix_is_root() -> bool {
    let probe = std::env::temp_dir().join(format!("hookfence-uid-{}", std::process::id()));
    let _ = fs::write(&probe, b"");
    let root = fs::metadata(&probe).is_ok_and(|m| m.uid() == 0);
    let _ = fs::remove_file(&probe);
    root
}

// ---------------------------------------------------------------------------
// 2. The file changes between read and write
// ---------------------------------------------------------------------------

#[test]
fn file_changed_between_read_and_write_keeps_the_newer_content() {
    if !injection_available("file_changed") {
        return;
    }
    // a.py is written first (paths are written in order), then b.py, which
    // another program edits while hookfence holds it just before the rename.
    let p = Project::new(&[("a.py", HOOK.as_bytes()), ("b.py", HOOK.as_bytes())]);
    let fifo = p.mkfifo("pause");
    let child = p.spawn(
        &["--apply", "a.py", "b.py"],
        &[("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME", fifo.to_str().unwrap())],
    );
    drop(hold(&fifo)); // a.py: go on
    // Wait for a.py to be in place, so that the next open of the FIFO meets
    // b.py's pause and not the end of a.py's.
    let deadline = Instant::now() + TIMEOUT;
    while p.read_str("a.py") != HOOK_FENCED {
        assert!(Instant::now() < deadline, "a.py never written");
        std::thread::sleep(Duration::from_millis(5));
    }
    let gate = hold(&fifo); // b.py: held in the window
    let newer = format!("{HOOK}\n# edited by someone else\n");
    p.write("b.py", &newer);
    drop(gate);
    let run = wait(child);
    run.expect_code(2);
    let line = run.error_for("b.py");
    assert!(
        line.contains("changed on disk while hookfence ran; the newer content was kept"),
        "{line:?}"
    );
    assert_eq!(p.read_str("b.py"), newer);
    assert_eq!(p.read_str("a.py"), HOOK_FENCED);
    assert_no_temp_files(p.root());

    // Same size, same mtime second: hookfence compares content, not metadata.
    let p = Project::new(&[("b.py", HOOK.as_bytes())]);
    let fifo = p.mkfifo("pause");
    let child = p.spawn(
        &["--apply", "b.py"],
        &[("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME", fifo.to_str().unwrap())],
    );
    let gate = hold(&fifo);
    let same_size = HOOK.replace("cuda", "cudb");
    let mtime = fs::metadata(p.path("b.py")).unwrap().modified().unwrap();
    p.write("b.py", &same_size);
    fs::File::options()
        .write(true)
        .open(p.path("b.py"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    drop(gate);
    let run = wait(child);
    run.expect_code(2);
    run.error_for("b.py");
    assert_eq!(p.read_str("b.py"), same_size);
    assert_no_temp_files(p.root());
}

#[test]
fn file_deleted_between_read_and_write_is_not_recreated() {
    if !injection_available("file_deleted") {
        return;
    }
    let p = Project::new(&[("b.py", HOOK.as_bytes())]);
    let fifo = p.mkfifo("pause");
    let child = p.spawn(
        &["--apply", "b.py"],
        &[("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME", fifo.to_str().unwrap())],
    );
    let gate = hold(&fifo);
    fs::remove_file(p.path("b.py")).unwrap();
    drop(gate);
    let run = wait(child);
    run.expect_code(2);
    run.error_for("b.py");
    assert!(!p.path("b.py").exists(), "a deleted file came back");
    assert_no_temp_files(p.root());
}

// ---------------------------------------------------------------------------
// 3. The disk fills up during the write
// ---------------------------------------------------------------------------

#[test]
fn full_disk_leaves_no_truncated_file_and_no_temporary_file() {
    // Real: a 64 KiB tmpfs holding a ~24 KiB hook file and a filler that
    // leaves less free space than the new version needs.
    let p = Project::new(&[("good/hooks.py", HOOK.as_bytes())]);
    let padding = "# padding padding padding padding padding padding padding padding\n".repeat(360);
    let big = format!("{HOOK}{padding}");
    match Mount::tmpfs(&p.path("full"), "64k") {
        Ok(_mount) => {
            p.write("full/hooks.py", &big);
            // Fill the rest, leaving a few KiB: enough to create a file, not
            // enough for the new version.
            let mut filler = fs::File::create(p.path("full/filler.bin")).unwrap();
            let chunk = vec![0u8; 4096];
            while filler.write_all(&chunk).is_ok() {}
            drop(filler);
            let len = fs::metadata(p.path("full/filler.bin")).unwrap().len();
            fs::File::options()
                .write(true)
                .open(p.path("full/filler.bin"))
                .unwrap()
                .set_len(len.saturating_sub(8192))
                .unwrap();
            let run = p.run(&["--apply", "full/hooks.py", "good"]);
            run.expect_code(2);
            let line = run.error_for("full/hooks.py");
            assert!(line.contains("No space left on device"), "{line:?}");
            assert_eq!(p.read_str("full/hooks.py"), big, "truncated or changed");
            assert_eq!(p.read_str("good/hooks.py"), HOOK_FENCED);
            assert_no_temp_files(p.root());
        }
        Err(why) => skip("full_disk", &format!("cannot mount a tmpfs: {why}")),
    }

    if injection_available("full_disk") {
        let p = target_and_good("full/hooks.py");
        let run = p.run_env(
            &["--apply", "full", "good"],
            &[("HOOKFENCE_FAULT", "write-enospc:full/hooks.py")],
        );
        assert_write_fault(&p, &run, "full/hooks.py", "No space left on device");
    }
}

// ---------------------------------------------------------------------------
// 4. Odd files
// ---------------------------------------------------------------------------

#[test]
fn symlink_loops_do_not_hang_and_are_named_when_given() {
    let p = Project::new(&[("src/good.py", HOOK.as_bytes())]);
    p.symlink("self.py", "src/self.py");
    p.symlink("b.py", "src/a.py");
    p.symlink("a.py", "src/b.py");
    p.symlink("..", "src/up");
    p.symlink("loopdir", "src/loopdir");

    // Walked: links are not followed, so no loop is entered.
    let run = p.run(&["--apply", "src"]);
    run.expect_code(0);
    assert_eq!(p.read_str("src/good.py"), HOOK_FENCED);

    // Named: a loop cannot be read, and says so; the rest is processed.
    p.write("src/good.py", HOOK);
    let run = p.run(&["--apply", "src/self.py", "src/a.py", "src/good.py"]);
    run.expect_code(2);
    for name in ["src/self.py", "src/a.py"] {
        let line = run
            .stderr
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} not named\n{run}"));
        assert!(line.contains("symbolic links"), "{line:?}");
    }
    assert_eq!(p.read_str("src/good.py"), HOOK_FENCED);
    assert!(
        fs::symlink_metadata(p.path("src/self.py"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn symlink_out_of_the_tree_is_not_followed_unless_named() {
    let p = Project::new(&[("outside/hooks.py", HOOK.as_bytes())]);
    p.symlink("../outside/hooks.py", "tree/linked.py");
    let run = p.run(&["--apply", "tree"]);
    run.expect_code(0);
    assert_eq!(p.read_str("outside/hooks.py"), HOOK, "followed a link");

    // Named explicitly: written through, the link stays a link.
    let run = p.run(&["--apply", "tree/linked.py"]);
    run.expect_code(0);
    assert_eq!(p.read_str("outside/hooks.py"), HOOK_FENCED);
    assert!(
        fs::symlink_metadata(p.path("tree/linked.py"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_no_temp_files(p.root());
}

#[test]
fn fifo_and_devices_named_py_are_skipped_when_walked_and_named_when_given() {
    let p = Project::new(&[("d/good.py", HOOK.as_bytes())]);
    p.mkfifo("d/fifo.py");
    // Character devices: the null and the zero device (reading the latter
    // would never end).
    let mut devices = vec!["d/fifo.py"];
    for (name, minor) in [("d/null.py", "3"), ("d/zero.py", "5")] {
        match sh("mknod", &[p.path(name).to_str().unwrap(), "c", "1", minor]) {
            Ok(()) => devices.push(name),
            Err(why) => skip("devices", &format!("mknod unavailable: {why}")),
        }
    }

    let run = p.run(&["--apply", "d"]);
    run.expect_code(0);
    assert_eq!(p.read_str("d/good.py"), HOOK_FENCED);

    p.write("d/good.py", HOOK);
    let mut args = vec!["--apply"];
    args.extend(&devices);
    args.push("d/good.py");
    let run = p.run(&args);
    run.expect_code(2);
    for name in &devices {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with(&format!("{name}: not a regular file"))),
            "{name} not named\n{run}"
        );
        let kind = fs::symlink_metadata(p.path(name)).unwrap().file_type();
        assert!(kind.is_fifo() || kind.is_char_device(), "{name} replaced");
    }
    assert_eq!(p.read_str("d/good.py"), HOOK_FENCED);
}

#[test]
fn binary_nul_and_undecodable_files_are_named_and_left_alone() {
    // Each holds a hook, so a rewrite would show.
    let mut elf = b"\x7fELF\x02\x01\x01\x00\x00\x00".to_vec();
    elf.extend_from_slice(HOOK.as_bytes());
    let nul = HOOK.replace("return args, kwargs\n", "return args, kwargs\0\n");
    let mut latin1 = b"# caf\xe9\n".to_vec();
    latin1.extend_from_slice(HOOK.as_bytes());
    let mut random: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    random.extend_from_slice(HOOK.as_bytes());
    let p = Project::new(&[
        ("elf.py", &elf),
        ("nul.py", nul.as_bytes()),
        ("latin1_no_cookie.py", &latin1),
        ("random.py", &random),
        ("good.py", HOOK.as_bytes()),
    ]);
    let before = p.contents();
    let run = p.run(&["--apply", "."]);
    run.expect_code(2);
    assert!(run.error_for("nul.py").contains("NUL byte"), "{run}");
    assert!(
        run.error_for("latin1_no_cookie.py")
            .contains("latin1_no_cookie.py:1:6: invalid UTF-8 and no PEP 263 coding cookie"),
        "{run}"
    );
    run.error_for("elf.py");
    run.error_for("random.py");
    for name in ["elf.py", "nul.py", "latin1_no_cookie.py", "random.py"] {
        assert_eq!(p.read(name), before[Path::new(name)], "{name} changed");
    }
    assert_eq!(p.read_str("good.py"), HOOK_FENCED);
    assert!(
        run.stderr.lines().last().unwrap().contains("4 skipped"),
        "{run}"
    );
}

#[test]
fn mixed_line_endings_are_kept_line_by_line() {
    // Odd lines end in LF, even ones in CRLF: each inserted line takes the
    // ending of the line it goes above, and nothing else changes.
    let mixed: String = HOOK
        .lines()
        .enumerate()
        .map(|(i, l)| format!("{l}{}", if i % 2 == 1 { "\r\n" } else { "\n" }))
        .collect();
    let p = Project::new(&[("mixed.py", mixed.as_bytes())]);
    p.run(&["--apply", "mixed.py"]).expect_code(0);
    let after = p.read_str("mixed.py");
    let def = "    def pre_forward(self, module, *args, **kwargs):";
    let at = after.rfind(def).unwrap();
    let ending = &after[at + def.len()..][..2];
    let expected_decorator = format!("    @torch.compiler.disable(){}", {
        if ending == "\r\n" { "\r\n" } else { "\n" }
    });
    assert!(
        after[..at].ends_with(&expected_decorator),
        "decorator does not take its line's ending: {after:?}"
    );
    assert_eq!(after.replacen(&expected_decorator, "", 1), mixed);
    // Converged.
    p.run(&["--check", "mixed.py"]).expect_code(0);
}

#[test]
fn large_generated_file_is_fenced_within_the_timeout() {
    // 50 MB takes ~40 s with a release build (RELIABILITY.md); the debug
    // build used by tests gets 2 MiB (HOOKFENCE_LARGE_MIB to change it).
    let mib: usize = std::env::var("HOOKFENCE_LARGE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let mut text = String::from("from accelerate.hooks import ModelHook\n\n\n");
    let mut hooks = 0;
    let mut i = 0;
    while text.len() < mib << 20 {
        text.push_str(&format!(
            "def helper_{i}(x, y=None):\n    \"\"\"Plain function {i}.\"\"\"\n    total = 0\n    for k in range(10):\n        total += k * x + (y or 0)\n    return {{\"value\": total}}\n\n\n"
        ));
        if i % 100 == 0 {
            text.push_str(&format!(
                "class Offload{i}(ModelHook):\n    def pre_forward(self, module, *args, **kwargs):\n        module.to(\"cuda\")\n        return args, kwargs\n\n\n"
            ));
            hooks += 1;
        }
        i += 1;
    }
    let p = Project::new(&[("big.py", text.as_bytes())]);
    let start = Instant::now();
    let run = p.run(&["--apply", "big.py"]);
    run.expect_code(0);
    let took = start.elapsed();
    let after = p.read_str("big.py");
    assert_eq!(
        after
            .matches("    @torch.compiler.disable()\n    def pre_forward")
            .count(),
        hooks
    );
    assert_eq!(
        after
            .replace("    @torch.compiler.disable()\n", "")
            .replacen("import torch\n", "", 1),
        text
    );
    let _ = writeln!(
        std::io::stderr(),
        "faults::large_generated_file: {mib} MiB, {hooks} hooks, --apply in {took:?} (debug build)"
    );
}

// ---------------------------------------------------------------------------
// 5. Signals
// ---------------------------------------------------------------------------

/// `n` files, each holding one hook.
fn many_files(n: usize) -> Project {
    let p = Project::new(&[]);
    for i in 0..n {
        p.write(&format!("pkg/m{i:03}.py"), HOOK);
    }
    p
}

/// Every file is entirely the original or entirely fenced; returns how many
/// are fenced.
fn assert_old_or_new(p: &Project) -> usize {
    let mut fenced = 0;
    for (rel, bytes) in p.contents() {
        if rel.starts_with("pkg") {
            if bytes == HOOK_FENCED.as_bytes() {
                fenced += 1;
            } else {
                assert_eq!(
                    bytes,
                    HOOK.as_bytes(),
                    "{} is neither old nor new",
                    rel.display()
                );
            }
        }
    }
    assert_no_temp_files(p.root());
    fenced
}

#[test]
fn signal_during_analysis_exits_130_and_writes_nothing() {
    if !injection_available("signal_during_analysis") {
        return;
    }
    for sig in ["INT", "TERM"] {
        let p = many_files(5);
        let fifo = p.mkfifo("pause");
        let child = p.spawn(
            &["--apply", "pkg"],
            &[("HOOKFENCE_TEST_PAUSE_IN_ANALYSIS", fifo.to_str().unwrap())],
        );
        let gate = hold(&fifo);
        signal(&child, sig);
        let run = wait(child);
        drop(gate);
        run.expect_code(130);
        assert!(
            run.stderr.contains("interrupted; no file was rewritten"),
            "{run}"
        );
        assert_eq!(assert_old_or_new(&p), 0);
    }
}

#[test]
fn signal_during_writes_finishes_the_file_and_starts_no_other() {
    if !injection_available("signal_during_writes") {
        return;
    }
    for sig in ["INT", "TERM"] {
        let p = many_files(5);
        let fifo = p.mkfifo("pause");
        let child = p.spawn(
            &["--apply", "pkg"],
            &[("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME", fifo.to_str().unwrap())],
        );
        // The first file's new content is in its temporary file, synced; the
        // signal arrives now.
        let gate = hold(&fifo);
        signal(&child, sig);
        // Give the handler thread time to raise the flag before the write
        // goes on (otherwise the next file would wait at the pause: a hang).
        std::thread::sleep(Duration::from_millis(1000));
        drop(gate);
        let run = wait(child);
        run.expect_code(130);
        assert!(
            run.stderr
                .contains("interrupted: 1 of 5 files written, every other file left unchanged"),
            "{run}"
        );
        assert_eq!(p.read_str("pkg/m000.py"), HOOK_FENCED);
        assert_eq!(assert_old_or_new(&p), 1);

        // A later run finishes the job.
        p.run(&["--apply", "pkg"]).expect_code(0);
        assert_eq!(assert_old_or_new(&p), 5);
    }
}

#[test]
fn signals_at_random_moments_leave_every_file_old_or_new() {
    if !injection_available("signals_at_random_moments") {
        return;
    }
    // 40 files, each write held 10 ms before its rename. Some signals land
    // at a time after the start (mostly during analysis), others at a time
    // after the first file was written (during the writes).
    let p = many_files(40);
    let mut outcomes = Vec::new();
    let moments = [
        (false, 0u64),
        (false, 30),
        (false, 100),
        (true, 0),
        (true, 20),
        (true, 50),
        (true, 90),
        (true, 140),
    ];
    for (round, (after_first_write, delay_ms)) in moments.into_iter().enumerate() {
        for i in 0..40 {
            p.write(&format!("pkg/m{i:03}.py"), HOOK);
        }
        let sig = if round % 2 == 0 { "TERM" } else { "INT" };
        let mut child = p.spawn(
            &["--apply", "pkg"],
            &[("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME", "10")],
        );
        if after_first_write {
            let deadline = Instant::now() + TIMEOUT;
            while p.read("pkg/m000.py") != HOOK_FENCED.as_bytes() {
                assert!(Instant::now() < deadline, "no file written");
                assert!(child.try_wait().unwrap().is_none(), "run ended early");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(&child, sig);
        let run = wait(child);
        let fenced = assert_old_or_new(&p);
        match run.code {
            Some(130) if run.stderr.contains("no file was rewritten") => {
                assert_eq!(fenced, 0, "{run}");
            }
            Some(130) => {
                let said = format!("interrupted: {fenced} of 40 files written");
                assert!(run.stderr.contains(&said), "expected {said:?}\n{run}");
            }
            Some(0) => assert_eq!(fenced, 40, "{run}"),
            // Killed before the handler was installed: nothing written yet.
            None => assert_eq!(fenced, 0, "{run}"),
            Some(code) => panic!("unexpected exit {code}\n{run}"),
        }
        if after_first_write {
            assert!(fenced >= 1, "{run}");
            assert_eq!(run.code, Some(130), "{run}");
        }
        outcomes.push((sig, after_first_write, delay_ms, run.code, fenced));
        p.run(&["--apply", "pkg"]).expect_code(0);
        assert_eq!(assert_old_or_new(&p), 40);
    }
    let _ = writeln!(
        std::io::stderr(),
        "faults::signals_at_random_moments: (signal, after the first write, delay ms, exit, files written) {outcomes:?}"
    );
}

// ---------------------------------------------------------------------------
// 6. Two runs at once
// ---------------------------------------------------------------------------

#[test]
fn two_concurrent_runs_end_with_a_correct_idempotent_tree() {
    let n = 60;
    let p = many_files(n);
    let mut races = Vec::new();
    for round in 0..4 {
        for i in 0..n {
            p.write(&format!("pkg/m{i:03}.py"), HOOK);
        }
        let first = p.spawn(&["--apply", "pkg"], &[]);
        let second = p.spawn(&["--apply", "pkg"], &[]);
        let runs = [wait(first), wait(second)];
        for run in &runs {
            match run.code {
                Some(0) => {}
                // The loser of a race on a file: it is named, and the
                // winner's (identical) content is kept.
                Some(2) => {
                    for line in run.stderr.lines().filter(|l| l.ends_with("left unchanged")) {
                        assert!(
                            line.contains("changed on disk while hookfence ran"),
                            "round {round}: unexpected error {line:?}\n{run}"
                        );
                    }
                }
                _ => panic!("round {round}: unexpected exit\n{run}"),
            }
        }
        assert_eq!(assert_old_or_new(&p), n, "round {round}: not all fenced");
        races.push([runs[0].code, runs[1].code]);
        let before = p.contents();
        p.run(&["--apply", "pkg"]).expect_code(0);
        assert_eq!(p.contents(), before, "a third run changed something");
        p.run(&["--check", "pkg"]).expect_code(0);
    }
    let _ = writeln!(
        std::io::stderr(),
        "faults::two_concurrent_runs: exit codes per round {races:?}"
    );
}
