//! One fixture per behaviour in `tests/fixtures/`, each snapshotted as the
//! user sees it (the hooks found, then the diff) in the top-level
//! `snapshots/`. The same loop checks invariants on every fixture:
//! - the rewritten file parses (tree-sitter) and CPython compiles it
//!   (`compile()`, which also enforces what `ast.parse` does not, such as
//!   where `from __future__` imports stand), in its own encoding;
//! - no byte of the original is removed or changed: the only differences are
//!   inserted decorator lines, an `import torch` line, or a lambda wrap;
//! - line endings, BOM and encoding are the file's own;
//! - a second run on the output plans nothing.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hookfence::analysis::verdict::Status;
use hookfence::{Analysis, FileReport};
use similar::{ChangeTag, TextDiff};

fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

/// The hooks found and the diff, as text for a snapshot. Paths are shown
/// relative to `root` so snapshots do not depend on where the test runs.
fn describe(analysis: &Analysis, root: &Path) -> String {
    let mut out = String::new();
    for file in &analysis.files {
        let rel = file.path.strip_prefix(root).unwrap_or(&file.path);
        for site in &file.sites {
            let c = &site.candidate;
            let status = match &site.status {
                Status::Unfenced { evidence } => format!("fence ({evidence})"),
                Status::Fenced(how) => format!("fenced ({how})"),
                // What was looked at and set aside, so a fixture's negatives
                // show why.
                Status::NotOffload if site.discounted.is_empty() => "not-offload".to_owned(),
                Status::NotOffload => format!("not-offload ({})", site.discounted.join("; ")),
                Status::OptedOut { line } => format!("opted-out (line {line})"),
                Status::Suppressed { line, reason } => {
                    format!(
                        "suppressed (line {line}: {})",
                        reason.as_deref().unwrap_or("-")
                    )
                }
                Status::Declined { note, .. } => format!("declined ({note})"),
                Status::Backward { evidence, .. } => format!("backward, not fenced ({evidence})"),
                Status::Covered { evidence, entry } => format!(
                    "covered ({evidence}; inside {})",
                    entry.replace(&format!("{}/", root.display()), "")
                ),
            };
            out.push_str(&format!(
                "{}:{} {} {status} [{}]\n",
                rel.display(),
                c.at,
                c.qualname,
                site.why_hook
            ));
        }
        for line in &file.unused_suppressions {
            out.push_str(&format!("{}:{line} unused suppression\n", rel.display()));
        }
        for at in &file.fullgraph {
            out.push_str(&format!("{}:{at} note: fullgraph=True\n", rel.display()));
        }
        for u in &file.unresolved {
            out.push_str(&format!(
                "{}:{} unresolved: {}\n",
                rel.display(),
                u.at,
                u.what
            ));
        }
    }
    for err in &analysis.errors {
        out.push_str(&format!("error: {}\n", err.report()));
    }
    out.push('\n');
    let mut diff = Vec::new();
    hookfence::render::write_diffs(&mut diff, analysis, &hookfence::render::Style::new(false))
        .unwrap();
    out.push_str(&String::from_utf8_lossy(&diff).replace('\r', "\u{240d}"));
    // Paths relative to the fixture root, wherever the test runs.
    out.replace(&format!("{}/", root.display()), "")
}

fn cpython_compiles(bytes: &[u8]) -> Result<(), String> {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import sys; compile(sys.stdin.buffer.read(), 'fixture.py', 'exec', dont_inherit=True)",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the CPython oracle");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every difference between `old` and `new` must be an insertion of one of
/// the things hookfence writes; nothing of the original may go.
fn assert_only_fence_insertions(path: &Path, old: &str, new: &str) {
    let diff = TextDiff::from_chars(old, new);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            assert_ne!(
                change.tag(),
                ChangeTag::Delete,
                "{}: byte removed from the original: {:?}",
                path.display(),
                change.value()
            );
        }
    }
    // Line by line: an added line is a decorator or the import; a changed
    // line is a lambda wrapped in place, nothing else.
    let lines = TextDiff::from_lines(old, new);
    for op in lines.ops() {
        let (removed, added): (Vec<_>, Vec<_>) = lines
            .iter_changes(op)
            .filter(|c| c.tag() != ChangeTag::Equal)
            .partition(|c| c.tag() == ChangeTag::Delete);
        if removed.is_empty() {
            for line in &added {
                let line = line.value().trim();
                assert!(
                    matches!(line, "import torch" | "@no_compile")
                        || fence_alias(line, "@", ".compiler.disable()").is_some()
                        || fence_alias(line, "import torch as ", "").is_some()
                        || (line.starts_with("from ") && line.ends_with(" import no_compile")),
                    "{}: unexpected added line {line:?}",
                    path.display()
                );
            }
        } else {
            let before: String = removed.iter().map(|c| c.value()).collect();
            let after: String = added.iter().map(|c| c.value()).collect();
            let wraps = after.matches(".compiler.disable(lambda").count()
                + after.matches("no_compile(lambda").count();
            assert!(
                wraps > 0,
                "{}: changed line is no lambda wrap: {after:?}",
                path.display()
            );
            let mut unwrapped = after.replace("no_compile(lambda", "lambda");
            for alias in ["_hookfence_torch", "_torch", "torch", "th"] {
                unwrapped =
                    unwrapped.replace(&format!("{alias}.compiler.disable(lambda"), "lambda");
            }
            assert_eq!(
                unwrapped.len() - before.len(),
                wraps,
                "{}: a wrap adds exactly one ')'",
                path.display()
            );
        }
    }
}

/// The name in `<prefix><name><suffix>` when it is a Python identifier: the
/// alias a fence line uses (`@th.compiler.disable()`, `import torch as _torch`).
fn fence_alias<'a>(line: &'a str, prefix: &str, suffix: &str) -> Option<&'a str> {
    let name = line.strip_prefix(prefix)?.strip_suffix(suffix)?;
    let identifier = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    identifier.then_some(name)
}

fn check_invariants(file: &FileReport) {
    let path = &file.path;
    let Some(new_text) = &file.new_text else {
        return;
    };
    let old = &file.source.text;
    assert_only_fence_insertions(path, old, new_text);

    let bytes = file.source.encode(new_text);
    if let Err(err) = cpython_compiles(&bytes) {
        panic!(
            "{}: CPython does not compile the output:\n{err}",
            path.display()
        );
    }
    // The file's own line endings: a CRLF-only file stays CRLF-only.
    let bare_lf = |t: &str| t.matches('\n').count() - t.matches("\r\n").count();
    if old.contains("\r\n") && bare_lf(old) == 0 {
        assert_eq!(bare_lf(new_text), 0, "{}: bare LF inserted", path.display());
    }
    if !old.contains('\r') {
        assert!(!new_text.contains('\r'), "{}: CR inserted", path.display());
    }
    assert_eq!(
        old.ends_with('\n'),
        new_text.ends_with('\n'),
        "{}: final newline state changed",
        path.display()
    );
    // BOM and encoding round-trip: decoding the output gives the new text.
    let again = hookfence::source::Source::decode(bytes.clone()).expect("output decodes");
    assert_eq!(&again.text, new_text);
    assert_eq!(again.bom, file.source.bom);
    assert_eq!(again.encoding, file.source.encoding);
}

/// Writes every rewritten file of `analysis` into a copy of `root` and
/// re-runs: nothing may be planned the second time.
fn assert_second_run_plans_nothing(analysis: &Analysis, root: &Path, options: &hookfence::Options) {
    let copy = tempfile::tempdir().unwrap();
    copy_tree(root, copy.path());
    for file in &analysis.files {
        if let Some(text) = &file.new_text {
            let rel = file.path.strip_prefix(root).unwrap_or(&file.path);
            let dest = if rel.as_os_str().is_empty() || file.path == root {
                copy.path().join(root.file_name().unwrap())
            } else {
                copy.path().join(rel)
            };
            std::fs::write(dest, file.source.encode(text)).unwrap();
        }
    }
    for created in &analysis.created {
        let rel = created
            .path
            .strip_prefix(if root.is_file() {
                root.parent().unwrap()
            } else {
                root
            })
            .unwrap();
        std::fs::write(copy.path().join(rel), &created.text).unwrap();
    }
    let target = if root.is_file() {
        copy.path().join(root.file_name().unwrap())
    } else {
        copy.path().to_path_buf()
    };
    let second = hookfence::analyze(
        std::slice::from_ref(&target),
        &hookfence::Options {
            project_root: Some(target.clone()),
            ..options.clone()
        },
    );
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert!(
        second.created.is_empty(),
        "second run creates {:?}",
        second.created
    );
    for file in &second.files {
        assert!(
            file.new_text.is_none(),
            "{}: second run plans more edits:\n{}",
            file.path.display(),
            file.new_text.as_deref().unwrap_or_default()
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_file() {
        std::fs::copy(from, to.join(from.file_name().unwrap())).unwrap();
        return;
    }
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

fn options(all_hooks: bool) -> hookfence::Options {
    hookfence::Options {
        all_hooks,
        ..hookfence::Options::default()
    }
}

fn wrap() -> hookfence::Options {
    hookfence::Options {
        strategy: hookfence::plan::Strategy::Wrap,
        ..hookfence::Options::default()
    }
}

fn run_fixture(path: &Path, all_hooks: bool) -> String {
    run_fixture_with(path, &options(all_hooks))
}

fn run_fixture_with(path: &Path, options: &hookfence::Options) -> String {
    // Each fixture is a project of its own (the repository around it is not
    // its context).
    let options = &hookfence::Options {
        project_root: Some(path.to_path_buf()),
        ..options.clone()
    };
    let analysis = hookfence::analyze(&[path.to_path_buf()], options);
    for file in &analysis.files {
        check_invariants(file);
    }
    for created in &analysis.created {
        if let Err(err) = cpython_compiles(created.text.as_bytes()) {
            panic!(
                "{}: CPython does not compile the helper:\n{err}",
                created.path.display()
            );
        }
    }
    assert_second_run_plans_nothing(&analysis, path, options);
    let root = if path.is_file() {
        path.parent().unwrap()
    } else {
        path
    };
    describe(&analysis, root)
}

#[test]
fn fixtures() {
    snapshot_settings().bind(|| {
        insta::glob!("fixtures/*.py", |path| {
            insta::assert_snapshot!(run_fixture(path, false));
        });
    });
}

#[test]
fn fixtures_give_the_same_answer_with_and_without_the_prefilter() {
    // Without the prefilter every file is parsed and every tree walked
    // whole; with it, queries run only around the words their matches must
    // hold. Every fixture must come out the same either way.
    let whole = hookfence::Options {
        prefilter: false,
        ..hookfence::Options::default()
    };
    let mut paths: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
    paths.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/offload_project"));
    paths.sort();
    for path in paths {
        for all_hooks in [false, true] {
            let anchored = run_fixture(&path, all_hooks);
            let walked = run_fixture_with(
                &path,
                &hookfence::Options {
                    all_hooks,
                    ..whole.clone()
                },
            );
            assert_eq!(
                anchored,
                walked,
                "{} (all_hooks: {all_hooks})",
                path.display()
            );
        }
    }
}

#[test]
fn fixtures_with_all_hooks_keep_every_invariant() {
    // --all-hooks fences more; the invariants must hold all the same.
    snapshot_settings().bind(|| {
        insta::glob!("fixtures/*.py", |path| {
            run_fixture(path, true);
        });
    });
}

#[test]
fn cross_file_hierarchy() {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cross_file_hierarchy");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("cross_file_hierarchy", run_fixture(&root, false));
    });
}

#[test]
fn example_project() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/offload_project");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("example_project", run_fixture(&root, false));
    });
}

#[test]
fn fixtures_with_wrap_strategy_keep_every_invariant() {
    snapshot_settings().bind(|| {
        insta::glob!("fixtures/*.py", |path| {
            // Inside a regular package: the wrap strategy refuses a loose
            // module whose import name it cannot know.
            let dir = tempfile::tempdir().unwrap();
            let pkg = dir.path().join("pkg");
            std::fs::create_dir(&pkg).unwrap();
            std::fs::write(pkg.join("__init__.py"), "").unwrap();
            std::fs::copy(path, pkg.join(path.file_name().unwrap())).unwrap();
            let errors = hookfence::analyze(&[dir.path().to_path_buf()], &wrap()).errors;
            let unexpected: Vec<String> = errors
                .iter()
                .filter(|e| matches!(e, hookfence::error::FileError::Helper { .. }))
                .map(ToString::to_string)
                .collect();
            assert!(unexpected.is_empty(), "{unexpected:?}");
            run_fixture_with(dir.path(), &wrap());
        });
    });
}

#[test]
fn example_project_with_wrap_strategy() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/offload_project");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("example_project_wrap", run_fixture_with(&root, &wrap()));
    });
}

#[test]
fn cross_file_hierarchy_with_wrap_strategy() {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cross_file_hierarchy");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!(
            "cross_file_hierarchy_wrap",
            run_fixture_with(&root, &wrap())
        );
    });
}

/// The multi-file projects under `tests/projects/`, one snapshot each.
fn project_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/projects"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
    roots.sort();
    roots
}

#[test]
fn projects() {
    snapshot_settings().bind(|| {
        for root in project_roots() {
            let name = root.file_name().unwrap().to_string_lossy().into_owned();
            insta::assert_snapshot!(format!("projects@{name}"), run_fixture(&root, false));
        }
    });
}

#[test]
fn projects_give_the_same_answer_with_and_without_the_prefilter_and_from_each_file() {
    // The verdicts on a project's hooks do not depend on the prefilter, nor
    // on whether the whole tree or only the hook's own file is named.
    let whole = hookfence::Options {
        prefilter: false,
        ..hookfence::Options::default()
    };
    for root in project_roots() {
        let own = |options: hookfence::Options| hookfence::Options {
            project_root: Some(root.clone()),
            ..options
        };
        let anchored = hookfence::analyze(std::slice::from_ref(&root), &own(options(false)));
        let walked = hookfence::analyze(std::slice::from_ref(&root), &own(whole.clone()));
        assert_eq!(
            describe(&anchored, &root),
            describe(&walked, &root),
            "{}",
            root.display()
        );
        for file in &anchored.files {
            let in_project = hookfence::Options {
                project_root: Some(root.clone()),
                ..options(false)
            };
            let alone = hookfence::analyze(std::slice::from_ref(&file.path), &in_project);
            let statuses = |a: &Analysis| -> Vec<(String, String)> {
                a.files
                    .iter()
                    .flat_map(|f| &f.sites)
                    .map(|s| (s.candidate.qualname.clone(), format!("{:?}", s.status)))
                    .collect()
            };
            let together: Vec<(String, String)> = file
                .sites
                .iter()
                .map(|s| (s.candidate.qualname.clone(), format!("{:?}", s.status)))
                .collect();
            assert_eq!(statuses(&alone), together, "{}", file.path.display());
        }
    }
}

#[test]
fn a_rewrite_cpython_would_reject_is_refused_naming_the_file() {
    // A vertical tab is blank to tree-sitter, so the re-parse accepts the
    // decorator line; CPython does not: the guard refuses the rewrite. (The
    // command line refuses such a decorator earlier; the library is asked
    // directly here, so the last guard is what stops it.)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hooks.py");
    std::fs::write(
        &path,
        "import torch\n\n\ndef _h(m, a):\n    m.to('cuda')\n\n\ndef attach(model):\n    model.register_forward_pre_hook(_h)\n",
    )
    .unwrap();
    let settings = hookfence::config::Settings {
        decorator: Some("torch.compiler.disable\u{b}()".to_owned()),
        ..Default::default()
    };
    let options = hookfence::Options {
        vocabulary: std::sync::Arc::new(hookfence::analysis::vocabulary::Vocabulary::new(
            &settings,
        )),
        ..hookfence::Options::default()
    };
    let analysis = hookfence::analyze(std::slice::from_ref(&path), &options);
    assert!(analysis.files.iter().all(|f| f.new_text.is_none()));
    assert_eq!(analysis.errors.len(), 1, "{:?}", analysis.errors);
    let report = analysis.errors[0].report();
    assert!(
        report.starts_with(&format!("{}:4:1: ", path.display()))
            && report.contains("CPython would reject it")
            && report.contains("control character"),
        "{report}"
    );
}

/// Imports the module in each file named on the command line with CPython,
/// every module they import that is not installed (and torch always)
/// replaced by a permissive stub: attribute access, calls, iteration and
/// subclassing all work, and a stub called with one function returns it (so
/// `torch.compiler.disable()` decorates). Prints one line per file: `ok`, or
/// the traceback with its newlines escaped.
const IMPORT_WITH_STUBS: &str = r#"
import importlib.abc, importlib.machinery, importlib.util, sys, traceback, types

class Stub:
    def __init__(self, name="stub"):
        self._name = name
    def __getattr__(self, key):
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        return Stub(self._name + "." + key)
    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Stub(self._name + "()")
    def __mro_entries__(self, bases):
        return (object,)
    def __iter__(self):
        return iter(())
    def __bool__(self):
        return False
    def __getitem__(self, key):
        return Stub(self._name + "[]")
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False

class StubModule(types.ModuleType):
    def __getattr__(self, key):
        if key.startswith("__") and key.endswith("__"):
            raise AttributeError(key)
        return Stub(self.__name__ + "." + key)

class Stubs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, only=None):
        self.only = only
    def find_spec(self, name, path, target=None):
        if self.only and name.split(".")[0] not in self.only:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec):
        return StubModule(spec.name)
    def exec_module(self, module):
        module.__path__ = []

sys.meta_path.insert(0, Stubs(only={"torch"}))
sys.meta_path.append(Stubs())
for number, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"fixture_under_test_{number}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        print("ok", flush=True)
    except BaseException:
        print("".join(traceback.format_exc()).replace("\n", "\\n"), flush=True)
"#;

/// Imports each file of `paths` with CPython against stubs (see
/// [`IMPORT_WITH_STUBS`]), in one process: `Err` holds the traceback.
fn cpython_imports(paths: &[PathBuf]) -> Vec<Result<(), String>> {
    let out = Command::new("python3")
        .args(["-c", IMPORT_WITH_STUBS])
        .args(paths)
        .stdin(Stdio::null())
        .output()
        .expect("python3 is needed for the import oracle");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<Result<(), String>> = stdout
        .lines()
        .map(|line| match line {
            "ok" => Ok(()),
            error => Err(error.replace("\\n", "\n")),
        })
        .collect();
    assert_eq!(
        results.len(),
        paths.len(),
        "the import oracle stopped early:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    results
}

#[test]
fn rewritten_fixtures_import_with_cpython_where_the_input_did() {
    // Output imports where the input did: each fixture whose input imports
    // (against a stub torch) must import rewritten, with and without
    // --all-hooks.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    paths.sort();
    let scratch = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut rewritten = Vec::new();
    for (path, input) in paths.iter().zip(cpython_imports(&paths)) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The fixtures of the shapes that once broke imports must be
        // importable, or this test could not catch them.
        if (name.starts_with("shadowed_") || name.starts_with("conditional_"))
            && let Err(err) = &input
        {
            failures.push(format!("{name}: the input does not import:\n{err}"));
        }
        if input.is_err() {
            continue;
        }
        for all_hooks in [false, true] {
            let analysis = hookfence::analyze(std::slice::from_ref(path), &options(all_hooks));
            for file in &analysis.files {
                let Some(text) = &file.new_text else {
                    continue;
                };
                let out = scratch.path().join(format!("{all_hooks}_{name}"));
                std::fs::write(&out, file.source.encode(text)).unwrap();
                rewritten.push((
                    format!("{name} (all_hooks: {all_hooks})"),
                    out,
                    text.clone(),
                ));
            }
        }
    }
    let outputs: Vec<PathBuf> = rewritten.iter().map(|(_, out, _)| out.clone()).collect();
    for ((what, _, text), result) in rewritten.iter().zip(cpython_imports(&outputs)) {
        if let Err(err) = result {
            failures.push(format!(
                "{what}: the rewrite no longer imports:\n{err}\n{text}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        rewritten.len() >= 80,
        "only {} rewrites imported",
        rewritten.len()
    );
}
