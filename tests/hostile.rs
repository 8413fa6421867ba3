//! Hostile inputs aimed at the project-wide analysis (the index, evidence
//! through calls, hooks found by use, modules read on demand): each test
//! pins one class of failure a second adversarial trial found, through the
//! real binary. The crashes must give the file one `path:line:col` error and
//! exit 2 while every other file is still processed, with and without the
//! prefilter and for files read on demand; divergences must give the same
//! answer whatever the flags; reads stay inside the project.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{BIN, Project, Run};

/// A registered offload hook: one file of a project that must still be
/// processed when another file of it cannot be.
const GOOD: &str = "import torch\n\n\ndef pre(m, a):\n    m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n";

fn run_in(dir: &Path, args: &[&str]) -> Run {
    run_with_stdin(dir, args, None)
}

/// hookfence with `args` in `dir`, fed `input` on stdin (none: stdin is
/// closed).
fn run_with_stdin(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Run {
    use std::io::Write as _;
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = child.stdin.take().map(|mut stdin| {
        let input = input.unwrap_or_default().to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        })
    });
    let run: Run = common::finish(child, &format!("hookfence {args:?}")).into();
    if let Some(feeder) = feeder {
        feeder.join().unwrap();
    }
    run
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// A project with a marker, `bad.py` holding `bad` and `good.py` a hook.
fn with_bad_file(bad: &str) -> Project {
    Project::new(&[
        ("pyproject.toml", b""),
        ("bad.py", bad.as_bytes()),
        ("good.py", GOOD.as_bytes()),
    ])
}

/// The run named `bad.py` once, at `bad.py:LINE:COL: ...` with `message`,
/// exited 2, and still fenced `good.py` (in the diff, or on disk with
/// `--apply`).
fn assert_one_error_and_the_rest_processed(p: &Project, run: &Run, message: &str) {
    assert_eq!(run.code, Some(2), "{run}");
    let named: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("bad.py:"))
        .collect();
    assert_eq!(named.len(), 1, "{run}");
    let rest = named[0]["bad.py:".len()..].split(':').collect::<Vec<_>>();
    assert!(
        rest.len() >= 3 && rest[0].parse::<usize>().is_ok() && rest[1].parse::<usize>().is_ok(),
        "no line:col in {:?}",
        named[0]
    );
    assert!(named[0].contains(message), "{run}");
    assert!(!run.stderr.contains("overflow"), "{run}");
    let fenced = String::from_utf8_lossy(&run.stdout).contains("+@torch.compiler.disable()")
        || p.read_str("good.py").contains("@torch.compiler.disable()");
    assert!(fenced, "good.py was not processed\n{run}");
}

/// A project with a function moving a module to the device at `module`
/// (a path), and `user.py` registering a hook that calls it, imported
/// `from {import} import helper`; plus `extra` files.
fn project_calling_helper(module: &str, import: &str, extra: &[(&str, &[u8])]) -> Project {
    let user = format!(
        "from {import} import helper\n\n\ndef pre(m, a):\n    helper(m)\n\n\nmodel.register_forward_pre_hook(pre)\n"
    );
    let mut files: Vec<(&str, &[u8])> = vec![
        ("pyproject.toml", b""),
        (
            module,
            b"import torch\n\n\ndef helper(m):\n    m.to('cuda')\n",
        ),
        ("user.py", user.as_bytes()),
    ];
    files.extend_from_slice(extra);
    Project::new(&files)
}

/// `bad` as `bad.py` beside a good file, run with and without the
/// prefilter: refused at `at` with `message`, the good file processed.
fn assert_refused_with_and_without_the_prefilter(bad: &str, message: &str, at: &str) {
    for flags in [&[][..], &["--no-prefilter"]] {
        let p = with_bad_file(bad);
        let mut args = flags.to_vec();
        args.push(".");
        let run = run_in(p.root(), &args);
        assert_one_error_and_the_rest_processed(&p, &run, message);
        assert!(run.stderr.contains(at), "{run}");
    }
}

fn attribute_chain(n: usize) -> String {
    format!("{GOOD}y = module{}\n", ".a".repeat(n))
}

// --- Crashes -------------------------------------------------------------

#[test]
fn a_deep_attribute_chain_in_a_hook_file_is_one_error_not_a_crash() {
    for flags in [&[][..], &["--no-prefilter"], &["-j", "1"], &["--apply"]] {
        let p = with_bad_file(&attribute_chain(8_000));
        let mut args = flags.to_vec();
        args.push(".");
        let run = run_in(p.root(), &args);
        assert_one_error_and_the_rest_processed(&p, &run, "nested more than 5000 levels deep");
        assert_eq!(p.read_str("bad.py"), attribute_chain(8_000));
    }
    // Within the bound, the same shape is analysed like any other file.
    let p = with_bad_file(&attribute_chain(4_000));
    let run = run_in(p.root(), &["--check", "."]);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(!run.stderr.contains("bad.py:"), "{run}");
}

#[test]
fn a_deep_module_read_only_through_an_import_is_one_error_not_a_crash() {
    let deep = format!(
        "import torch\n\n\ndef helper(m):\n    m.to('cuda')\n\n\ny = module{}\n",
        ".a".repeat(8_000)
    );
    let user = "from deep import helper\n\n\ndef pre(m, a):\n    helper(m)\n\n\nmodel.register_forward_pre_hook(pre)\n";
    let p = Project::new(&[
        ("pyproject.toml", b""),
        ("deep.py", deep.as_bytes()),
        ("user.py", user.as_bytes()),
    ]);
    for args in [&["user.py"][..], &["--no-prefilter", "user.py"], &["."]] {
        let run = run_in(p.root(), args);
        assert_eq!(run.code, Some(2), "{args:?}\n{run}");
        assert!(
            run.stderr.lines().any(|l| l.starts_with("deep.py:")
                && l.contains("nested more than 5000 levels deep")
                && l.contains("read through an import")),
            "{args:?}\n{run}"
        );
    }
    // stdin with its project (as an editor or pre-commit passes one file).
    let run = run_with_stdin(
        p.root(),
        &["--stdin-filename", "user.py", "-"],
        Some(user.as_bytes()),
    );
    assert_eq!(run.code, Some(2), "{run}");
    assert!(run.stderr.contains("deep.py:"), "{run}");
}

#[test]
fn more_than_99_indentation_levels_are_a_syntax_error_never_parsed() {
    let mut bad = GOOD.to_owned();
    for i in 0..550 {
        bad.push_str(&format!("{}if x:\n", "  ".repeat(i)));
    }
    bad.push_str(&format!(
        "{}def f():\n{}  pass\n",
        "  ".repeat(550),
        "  ".repeat(550)
    ));
    // At the line CPython names: the 100th level.
    assert_refused_with_and_without_the_prefilter(
        &bad,
        "too many levels of indentation",
        "bad.py:109:1:",
    );
}

#[test]
fn more_than_200_nested_brackets_are_a_syntax_error_never_parsed() {
    let bad = format!("{GOOD}y = {}1{}\n", "(".repeat(5_000), ")".repeat(5_000));
    assert_refused_with_and_without_the_prefilter(
        &bad,
        "too many nested parentheses",
        "bad.py:9:205:",
    );
}

// --- Divergences ---------------------------------------------------------

#[test]
fn every_spelling_of_a_forward_replacement_is_seen_with_and_without_the_prefilter() {
    for spelling in [
        "m.forward: Callable = nf",
        "setattr(m, r'forward', nf)",
        "setattr(m, '''forward''', nf)",
        "setattr(m, f'forward', nf)",
        "setattr(m, \"forward\", nf)",
    ] {
        let installer = format!(
            "import helpers\n\n\ndef install(m):\n    orig = m.forward\n\n    def nf(*args):\n        helpers.onload(m)\n        return orig(*args)\n\n    {spelling}\n"
        );
        let p = Project::new(&[
            ("pyproject.toml", b""),
            ("install.py", installer.as_bytes()),
            (
                "helpers.py",
                b"import torch\n\n\ndef onload(module):\n    module.to('cuda')\n",
            ),
        ]);
        let default = run_in(p.root(), &["--check", "."]);
        let full = run_in(p.root(), &["--check", "--no-prefilter", "."]);
        assert_eq!(default.code, Some(1), "{spelling}\n{default}");
        assert_eq!(full.code, default.code, "{spelling}\n{full}");
        assert_eq!(full.stdout, default.stdout, "{spelling}");
    }
}

#[test]
fn a_project_root_that_is_no_directory_is_refused_naming_it() {
    let p = Project::new(&[("hook.py", GOOD.as_bytes()), ("file.txt", b"")]);
    mkfifo(&p.path("fifo"));
    for root in ["does-not-exist", "file.txt", "/dev/null", "fifo"] {
        let run = run_in(p.root(), &["--check", "--project-root", root, "hook.py"]);
        assert_eq!(run.code, Some(2), "{root}\n{run}");
        assert!(
            run.stderr.contains(&format!("--project-root {root}")),
            "{root}\n{run}"
        );
        assert!(run.stdout.is_empty(), "{root}\n{run}");
    }
    let run = run_in(p.root(), &["--check", "--project-root", ".", "hook.py"]);
    assert_eq!(run.code, Some(1), "{run}");
}

#[test]
fn a_project_root_that_does_not_hold_the_file_is_refused_naming_it() {
    // D5: reads are confined to the root, so a file outside it would be
    // judged without its imports and `--check` would pass on what it cannot
    // see. Every spelling of "outside" is refused before anything runs.
    let p = Project::new(&[
        ("app/pkg/__init__.py", b""),
        ("app/pkg/moves.py", b"def onload(module):\n    module.cuda()\n"),
        (
            "app/pkg/hooks.py",
            b"from pkg.moves import onload\n\n\ndef pre(module, args):\n    onload(module)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(pre)\n",
        ),
        ("other/__init__.py", b""),
    ]);
    std::os::unix::fs::symlink(p.path("app/pkg"), p.path("other/link")).unwrap();
    let before = p.read("app/pkg/hooks.py");
    for (root, file) in [
        ("other", "app/pkg/hooks.py"),
        ("app/pkg/../../other", "app/pkg/hooks.py"),
        ("other", "other/link/hooks.py"),
    ] {
        for mode in ["--check", "--apply"] {
            let run = run_in(
                p.root(),
                &[mode, "--allow-dirty", "--project-root", root, file],
            );
            assert_eq!(run.code, Some(2), "{root} {file}\n{run}");
            assert!(
                run.stderr
                    .contains(&format!("{file}: not inside --project-root {root}")),
                "{root} {file}\n{run}"
            );
            assert!(run.stdout.is_empty(), "{root} {file}\n{run}");
        }
    }
    // stdin named as a file outside the root.
    let mut child = Command::new(BIN)
        .current_dir(p.root())
        .args([
            "--check",
            "--project-root",
            "other",
            "--stdin-filename",
            "app/pkg/new.py",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    // The run refuses before it reads its input: under load it may have
    // exited already, and the write then meets a closed pipe.
    let _ = child.stdin.take().unwrap().write_all(b"x = 1\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not inside --project-root other"));
    assert_eq!(p.read("app/pkg/hooks.py"), before, "nothing is written");
    // The root that holds it: the hook is seen through its import.
    let run = run_in(
        p.root(),
        &["--check", "--project-root", "app", "app/pkg/hooks.py"],
    );
    assert_eq!(run.code, Some(1), "{run}");
    let run = run_in(
        p.root(),
        &["--check", "--project-root", "app", "other/link/hooks.py"],
    );
    // Inside the root once resolved: not refused (the file is judged with
    // its module name as the symlink spells it).
    assert_ne!(
        run.code,
        Some(2),
        "a symlink into the root is inside it\n{run}"
    );
}

#[test]
fn an_imported_module_that_does_not_parse_is_named_and_fails_the_run() {
    let p = Project::new(&[
        ("pyproject.toml", b""),
        (
            "helpers.py",
            b"import torch\n\n\ndef helper(module):\n    module.to('cuda'\n",
        ),
        (
            "user.py",
            b"from helpers import helper\n\n\ndef pre(m, a):\n    helper(m)\n\n\nmodel.register_forward_pre_hook(pre)\n",
        ),
    ]);
    for args in [&["user.py"][..], &["--no-prefilter", "user.py"]] {
        let run = run_in(p.root(), args);
        assert_eq!(run.code, Some(2), "{args:?}\n{run}");
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with("helpers.py:") && l.contains("syntax error")),
            "{args:?}\n{run}"
        );
        // Its error-recovered tree decided nothing.
        assert!(!run.stdout_str().contains("+@torch"), "{args:?}\n{run}");
    }
}

// --- Wrong edits ---------------------------------------------------------

#[test]
fn a_local_binding_that_shadows_an_imported_callee_is_not_followed() {
    let bodies = [
        ("parameter", "def pre(m, a, helper):\n    helper(m)\n"),
        ("default", "def pre(m, a, helper=print):\n    helper(m)\n"),
        (
            "assignment",
            "def pre(m, a):\n    helper = print\n    helper(m)\n",
        ),
        (
            "for",
            "def pre(m, a):\n    for helper in (print,):\n        helper(m)\n",
        ),
        (
            "with",
            "def pre(m, a):\n    with ctx() as helper:\n        helper(m)\n",
        ),
        (
            "walrus",
            "def pre(m, a):\n    if (helper := print):\n        helper(m)\n",
        ),
        (
            "except",
            "def pre(m, a):\n    try:\n        pass\n    except Exception as helper:\n        helper(m)\n",
        ),
        (
            "comprehension",
            "def pre(m, a):\n    [helper(m) for helper in (print,)]\n",
        ),
        (
            "match",
            "def pre(m, a):\n    match a:\n        case helper:\n            helper(m)\n",
        ),
        ("receiver", "def pre(m, a, helpers):\n    helpers.move(m)\n"),
    ];
    for (shape, body) in bodies {
        let user = format!(
            "from helpers import helper\nimport helpers\n\n\n{body}\n\nmodel.register_forward_pre_hook(pre)\n"
        );
        let p = Project::new(&[
            ("pyproject.toml", b""),
            (
                "helpers.py",
                b"import torch\n\n\ndef helper(module):\n    module.to('cuda')\n\n\ndef move(module):\n    module.to('cuda')\n",
            ),
            ("user.py", user.as_bytes()),
        ]);
        let run = run_in(p.root(), &["--list", "user.py"]);
        assert!(
            run.stdout_str().contains("not-offload"),
            "{shape}: a call shadowed locally was followed\n{run}"
        );
    }
    // Unshadowed, the same call is followed.
    let p = project_calling_helper("helpers.py", "helpers", &[]);
    let run = run_in(p.root(), &["--list", "user.py"]);
    assert!(run.stdout_str().contains("unfenced"), "{run}");
}

#[test]
fn generic_method_names_called_by_a_forward_wrapper_make_no_protocol_hooks() {
    let p = Project::new(&[
        ("pyproject.toml", b""),
        (
            "a.py",
            b"import torch\n\n\nclass Registry:\n    def add(self, m):\n        m.to('cuda')\n\n\nclass Cfg:\n    def get(self, key):\n        return key.cuda()\n\n\ndef install(model, t):\n    orig = model.forward\n\n    def wrapper(*args):\n        t.add(model)\n        t.get(model)\n        seen = set()\n        seen.discard(model)\n        return orig(*args)\n\n    model.forward = wrapper\n",
        ),
    ]);
    for args in [&["--list", "."][..], &["--list", "--all-hooks", "."]] {
        let run = run_in(p.root(), args);
        let out = run.stdout_str();
        assert!(
            !out.contains("Registry.add") && !out.contains("Cfg.get"),
            "{args:?}\n{run}"
        );
    }
    // A specific name still makes a protocol hook.
    let p = Project::new(&[
        ("pyproject.toml", b""),
        (
            "a.py",
            b"import torch\n\n\nclass Offloader:\n    def onload_weights(self, m):\n        m.to('cuda')\n\n\ndef install(model, t):\n    orig = model.forward\n\n    def wrapper(*args):\n        t.onload_weights(model)\n        return orig(*args)\n\n    model.forward = wrapper\n",
        ),
    ]);
    let run = run_in(p.root(), &["--list", "."]);
    assert!(
        run.stdout_str().contains("Offloader.onload_weights"),
        "{run}"
    );
}

// --- Reading outside the project -------------------------------------------

#[test]
fn reads_on_demand_follow_no_link_out_of_the_project() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("pkg")).unwrap();
    std::fs::write(
        outside.path().join("pkg/__init__.py"),
        "import torch\n\n\ndef helper(m):\n    m.to('cuda')\n",
    )
    .unwrap();
    // Opened, a FIFO would hang the run: the timeout fails the test.
    let fifo = outside.path().join("fifo.py");
    mkfifo(&fifo);
    let p = Project::new(&[
        ("pyproject.toml", b""),
        (
            "user.py",
            b"from pkg import helper\nimport secret\nimport piped\n\n\ndef pre(m, a):\n    helper(m)\n    secret.move(m)\n    piped.move(m)\n\n\nmodel.register_forward_pre_hook(pre)\n",
        ),
    ]);
    std::os::unix::fs::symlink(outside.path().join("pkg"), p.path("pkg")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", p.path("secret.py")).unwrap();
    std::os::unix::fs::symlink(&fifo, p.path("piped.py")).unwrap();
    for args in [
        &["--list", "user.py"][..],
        &["--list", "--no-prefilter", "."],
    ] {
        let run = run_in(p.root(), args);
        assert_eq!(run.code, Some(0), "{args:?}\n{run}");
        assert!(run.stdout_str().contains("not-offload"), "{args:?}\n{run}");
        assert!(!run.stderr.contains("passwd"), "{args:?}\n{run}");
    }
    // The same package inside the project is read.
    let inside = project_calling_helper("pkg/__init__.py", "pkg", &[]);
    let run = run_in(inside.root(), &["--list", "user.py"]);
    assert!(run.stdout_str().contains("unfenced"), "{run}");
}

#[test]
fn reads_on_demand_skip_what_the_walk_ignores() {
    let p = project_calling_helper(
        "generated/helpers.py",
        "generated.helpers",
        &[(".gitignore", b"generated/\n")],
    );
    let before = run_in(p.root(), &["--list", "user.py"]);
    assert!(before.stdout_str().contains("unfenced"), "{before}");
    std::fs::create_dir_all(p.path(".git")).unwrap();
    let after = run_in(p.root(), &["--list", "user.py"]);
    assert!(after.stdout_str().contains("not-offload"), "{after}");
}

// --- The input's error, not the rewrite's ------------------------------------

#[test]
fn a_number_run_into_a_keyword_is_the_inputs_syntax_error() {
    let bad = "import torch\n\n\nclass H(ModelHook):\n    0def post_forward(self, module, output):\n        module.to('cpu')\n";
    let p = with_bad_file(bad);
    let run = run_in(p.root(), &["."]);
    assert_one_error_and_the_rest_processed(&p, &run, "invalid decimal literal");
    assert!(run.stderr.contains("bad.py:5:5:"), "{run}");
    assert!(!run.stderr.contains("rewritten file"), "{run}");
}

#[test]
fn a_package_wins_over_a_module_of_the_same_name_as_in_cpython() {
    // W4: with both `pkg/util.py` and `pkg/util/__init__.py`, CPython's path
    // finder imports the package. The hook's evidence follows it: the
    // package's `mv` moves the module, the module file's does nothing.
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/util.py", b"def mv(m):\n    print(m)\n"),
        ("pkg/util/__init__.py", b"def mv(m):\n    m.to('cuda')\n"),
        (
            "pkg/hooks.py",
            b"from .util import mv\n\n\ndef pre(module, args):\n    mv(module)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(pre)\n",
        ),
    ]);
    for args in [&["--list", "pkg"][..], &["--list", "pkg/hooks.py"]] {
        let run = run_in(p.root(), args);
        run.expect_code(0);
        let out = run.stdout_str();
        assert!(
            out.contains("unfenced  pre  moves `m` via .to(...) via mv (pkg/util/__init__.py:2)"),
            "{args:?}: {out}"
        );
    }
    // Without the package, the module file is what CPython imports.
    std::fs::remove_dir_all(p.path("pkg/util")).unwrap();
    let run = run_in(p.root(), &["--list", "pkg"]);
    assert!(run.stdout_str().contains("not-offload  pre"), "{run}");
}

#[test]
fn a_namespace_package_root_imports_from_its_parent() {
    // `ns/` has no `__init__.py` (PEP 420); `ns/core/` is a package. A hook
    // in it imports `ns.core.moves` by its full name.
    let p = Project::new(&[
        ("ns/core/__init__.py", b""),
        ("ns/core/moves.py", b"def onload(module):\n    module.cuda()\n"),
        (
            "ns/core/hooks.py",
            b"from ns.core.moves import onload\n\n\ndef pre(module, args):\n    onload(module)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(pre)\n",
        ),
    ]);
    let run = run_in(p.root(), &["--list", "ns/core/hooks.py"]);
    run.expect_code(0);
    assert!(
        run.stdout_str()
            .contains("unfenced  pre  moves `module` via .cuda(...) via onload"),
        "{run}"
    );
}

/// W3: a name a hook hands on, calls or registers is looked up with
/// Python's scoping. Bound where it is used by a parameter (its default
/// included), a loop target or a local assignment, it is not the imported
/// function nor the file's `def` of that name, on every evidence path:
/// handed to `module.apply`, called, registered, `Fn.apply` of a class.
#[test]
fn a_name_bound_locally_is_not_the_function_of_that_name_on_any_path() {
    const MOVES: &[u8] = b"def mv(module, *args):\n    for p in module.parameters():\n        p.data = p.data.to('cuda')\n";
    const LOCAL_DEF: &str = "def mv(module, *args):\n    module.cuda()\n";
    const ATTACH: &str = "\n\ndef attach(model):\n    model.register_forward_pre_hook(pre)\n";
    // (hook body with the name shadowed, the same body using the function)
    let shapes: &[(&str, &str)] = &[
        (
            "def pre(module, args):\n    mv = print\n    module.apply(mv)\n",
            "def pre(module, args):\n    module.apply(mv)\n",
        ),
        (
            "def pre(module, args, mv=print):\n    module.apply(mv)\n",
            "def pre(module, args, other=print):\n    module.apply(mv)\n",
        ),
        (
            "def pre(module, args):\n    for mv in args:\n        module.apply(mv)\n",
            "def pre(module, args):\n    for other in args:\n        module.apply(mv)\n",
        ),
        (
            "def pre(module, args, mv=print):\n    mv(module)\n",
            "def pre(module, args, other=print):\n    mv(module)\n",
        ),
    ];
    for (shadowed, plain) in shapes {
        for head in ["from moves import mv\n", LOCAL_DEF] {
            for (body, expected) in [(shadowed, "not-offload  pre"), (plain, "unfenced  pre")] {
                let text = format!("{head}\n\n{body}{ATTACH}");
                let p = Project::new(&[("moves.py", MOVES), ("case.py", text.as_bytes())]);
                let run = run_in(p.root(), &["--list", "case.py"]);
                assert!(run.stdout_str().contains(expected), "{text}\n{run}");
            }
        }
    }
    // `Fn.apply` where `Fn` is a parameter, not the class of that name.
    let function = "import torch\n\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, module):\n        module.cuda()\n        return module\n\n\n";
    for (body, expected) in [
        (
            "def pre(module, args, Fn=None):\n    Fn.apply(module)\n",
            "not-offload  pre",
        ),
        (
            "def pre(module, args):\n    Fn.apply(module)\n",
            "unfenced  pre",
        ),
    ] {
        let text = format!("{function}{body}{ATTACH}");
        let p = Project::new(&[("case.py", text.as_bytes())]);
        let run = run_in(p.root(), &["--list", "case.py"]);
        assert!(run.stdout_str().contains(expected), "{text}\n{run}");
    }
    // The registered name itself: a default parameter, a loop target, a
    // replay loop's variable rebound: unresolved, never the function.
    for body in [
        "def attach(model, mv=print):\n    model.register_forward_pre_hook(mv)\n",
        "def attach(model, fns):\n    for mv in fns:\n        model.register_forward_pre_hook(mv)\n",
        "def attach(model, sub):\n    for hook in sub._forward_pre_hooks.values():\n        mv = hook\n        model.register_forward_pre_hook(mv)\n",
    ] {
        for head in ["from moves import mv\n", LOCAL_DEF] {
            let text = format!("{head}\n\n{body}");
            let p = Project::new(&[("moves.py", MOVES), ("case.py", text.as_bytes())]);
            let run = run_in(p.root(), &["--list", "."]);
            assert!(!run.stdout_str().contains("unfenced"), "{text}\n{run}");
            assert!(run.stdout_str().contains("unresolved"), "{text}\n{run}");
        }
    }
}

/// D6: indentation CPython and tree-sitter's scanner read differently (a tab
/// after a space, 65,536 columns) would drop a hook's body from the tree;
/// indentation CPython refuses (`TabError`) is its syntax error. Either is
/// one `path:line:col` error, exit 2, the file untouched, in every mode.
#[test]
fn indentation_read_differently_by_cpython_and_tree_sitter_is_refused() {
    let hook = |indent: &str, body: &str| {
        format!(
            "import torch\n\n\ndef pre(m, a):\n{indent}if a:\n{body}m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n"
        )
    };
    let deep = " ".repeat(65_536);
    let cases = [
        // CPython: column 8 then 9, a block; the scanner: 9 then 9, none.
        (
            hook(" \t", "         "),
            "hooks.py:6:1: indentation tree-sitter would read into another block than CPython does",
        ),
        // CPython: a tab after a space is 8 against eight spaces' 8, but 2
        // against 8 with a tab as one column.
        (
            hook(" \t", "        "),
            "hooks.py:6:1: syntax error: inconsistent use of tabs and spaces in indentation",
        ),
        (
            format!(
                "import torch\n\n\ndef pre(m, a):\n{deep}m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n"
            ),
            "hooks.py:8:1: indentation tree-sitter would read into another block than CPython does",
        ),
    ];
    for (text, expected) in cases {
        let p = Project::new(&[("hooks.py", text.as_bytes())]);
        for mode in ["--check", "--list", "--apply"] {
            let run = run_in(p.root(), &[mode, "--allow-dirty", "hooks.py"]);
            assert_eq!(run.code, Some(2), "{mode}\n{run}");
            assert!(run.stderr.contains(expected), "{mode}: {expected}\n{run}");
        }
        assert_eq!(p.read("hooks.py"), text.as_bytes());
    }
    // The control: the same hook indented with spaces alone is found.
    let p = Project::new(&[("hooks.py", hook("        ", "         ").as_bytes())]);
    let run = run_in(p.root(), &["--check", "hooks.py"]);
    assert_eq!(run.code, Some(1), "{run}");
}

/// U2: input every CPython refuses is the input's syntax error, never
/// rewritten: a backslash continuation into the end of the file, and a
/// vertical tab, U+200B, U+2060 or U+FEFF between tokens (whitespace to
/// tree-sitter). One `path:line:col` error, exit 2, the file untouched.
#[test]
fn input_cpython_refuses_between_tokens_or_at_the_end_is_never_rewritten() {
    let hook = "import torch\n\n\ndef pre(m, a):\n    m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n";
    let cases: [(String, &str); 5] = [
        (
            format!("{hook}x = 1 \\\n"),
            "hooks.py:9:7: syntax error: unexpected EOF while parsing",
        ),
        (
            hook.replace("m.to('cuda')", "m.to(\x0b'cuda')"),
            "hooks.py:5:10: syntax error: invalid non-printable character U+000B",
        ),
        (
            hook.replace("m.to('cuda')", "m\u{200b}.to('cuda')"),
            "hooks.py:5:6: syntax error: invalid non-printable character U+200B",
        ),
        (
            hook.replace("def pre(m, a)", "def pre(m, a\u{2060})"),
            "hooks.py:4:13: syntax error: invalid non-printable character U+2060",
        ),
        (
            hook.replace("m.to('cuda')", "m.to('cuda') \u{feff}"),
            "hooks.py:5:18: syntax error: invalid non-printable character U+FEFF",
        ),
    ];
    for (text, expected) in cases {
        let p = Project::new(&[("hooks.py", text.as_bytes())]);
        for mode in ["--check", "--apply"] {
            let run = run_in(p.root(), &[mode, "--allow-dirty", "hooks.py"]);
            assert_eq!(run.code, Some(2), "{text:?}\n{run}");
            assert!(run.stderr.contains(expected), "{expected}\n{run}");
        }
        assert_eq!(p.read("hooks.py"), text.as_bytes());
    }
}

/// U2: bytes the declared codec does not define in CPython (its tables are
/// stricter than the WHATWG ones hookfence decodes with) and cookie names
/// CPython does not know are CPython's error: one `path:line:col` error,
/// exit 2, the file untouched. The same file with a byte CPython decodes is
/// fenced.
#[test]
fn bytes_cpythons_codec_does_not_define_are_never_rewritten() {
    let hook = |cookie: &str, bytes: &[u8]| {
        let mut text = format!("# coding: {cookie}\nimport torch\n\ns = '").into_bytes();
        text.extend_from_slice(bytes);
        text.extend_from_slice(
            b"'\n\n\ndef pre(m, a):\n    m.to('cuda')\n\n\nmodel.register_forward_pre_hook(pre)\n",
        );
        text
    };
    for (cookie, bytes, expected) in [
        (
            "cp1252",
            &b"\x80\x81"[..],
            "hooks.py:4:7: syntax error: the cp1252 codec cannot decode byte 0x81",
        ),
        (
            "gbk",
            b"\x80",
            "hooks.py:4:6: syntax error: the gbk codec cannot decode byte 0x80",
        ),
        (
            "euc-jp",
            b"\xad\xa1",
            "hooks.py:4:6: syntax error: the euc_jp codec cannot decode byte 0xad",
        ),
        (
            "big5",
            b"\xf9\xfe",
            "hooks.py:4:6: syntax error: the big5 codec cannot decode byte 0xf9",
        ),
        (
            "x-cp1252",
            b"\x80",
            "hooks.py:1:1: unknown encoding \"x-cp1252\" in coding cookie",
        ),
    ] {
        let text = hook(cookie, bytes);
        let p = Project::new(&[("hooks.py", &text)]);
        for mode in ["--check", "--apply"] {
            let run = run_in(p.root(), &[mode, "--allow-dirty", "hooks.py"]);
            assert_eq!(run.code, Some(2), "{cookie}\n{run}");
            assert!(run.stderr.contains(expected), "{expected}\n{run}");
        }
        assert_eq!(p.read("hooks.py"), text);
    }
    for (cookie, bytes) in [
        ("cp1252", &b"\x80"[..]),
        ("gbk", b"\xc4\xe3"),
        ("euc-jp", b"\xa4\xa2"),
        ("big5", b"\xa1\x40"),
    ] {
        let text = hook(cookie, bytes);
        let p = Project::new(&[("hooks.py", &text)]);
        let run = run_in(p.root(), &["--check", "hooks.py"]);
        assert_eq!(run.code, Some(1), "{cookie}\n{run}");
    }
}

/// D4: a hook replaying `sub._forward_pre_hooks` gets the same verdict
/// whether the whole tree runs, its file alone, with `--project-root`, or
/// on stdin with `--stdin-filename`: partial runs see the project's
/// registrations too (pre-commit passes what CI passes).
#[test]
fn a_replayed_table_gives_the_same_verdict_in_partial_runs() {
    let fused = b"def fused_pre(module, args):\n    for sub in module.children():\n        for hook in sub._forward_pre_hooks.values():\n            hook(sub, args)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(fused_pre)\n";
    for (registering, extra) in [
        (
            &b"def onload(module, args):\n    for p in module.parameters():\n        p.data = p.data.to('cuda')\n\n\ndef install(model):\n    for sub in model.modules():\n        sub.register_forward_pre_hook(onload)\n"[..],
            None,
        ),
        (
            b"from pkg.moves import onload\n\n\ndef install(model):\n    for sub in model.modules():\n        sub.register_forward_pre_hook(onload)\n",
            Some(&b"def onload(module, args):\n    module.cuda()\n"[..]),
        ),
    ] {
        let mut files: Vec<(&str, &[u8])> = vec![
            ("pyproject.toml", b""),
            ("pkg/__init__.py", b""),
            ("pkg/reg.py", registering),
            ("pkg/fused.py", fused),
        ];
        if let Some(moves) = extra {
            files.push(("pkg/moves.py", moves));
        }
        let p = Project::new(&files);
        let verdict = |run: &Run| {
            run.stdout_str()
                .lines()
                .find(|l| l.starts_with("pkg/fused.py:1:1"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
        };
        let whole = run_in(p.root(), &["--list", "."]);
        assert_eq!(verdict(&whole).as_deref(), Some("unfenced"), "{whole}");
        for args in [
            &["--list", "pkg/fused.py"][..],
            &["--list", "--project-root", ".", "pkg/fused.py"],
        ] {
            let run = run_in(p.root(), args);
            assert_eq!(verdict(&run), verdict(&whole), "{args:?}\n{run}");
        }
        let run = run_with_stdin(
            p.root(),
            &["--list", "--stdin-filename", "pkg/fused.py", "-"],
            Some(fused),
        );
        assert_eq!(verdict(&run), verdict(&whole), "stdin\n{run}");
    }
}

/// S2: a module read on demand through an import is read only if the walk
/// would take it, with the walk's own precedence: a directory ignored above
/// is never entered (a whitelist below does not bring a file back), a
/// parent's `.ignore` beats a deeper `.gitignore` whitelist, and `.ignore`
/// counts outside git. A file the walk skips decides no verdict.
#[test]
fn on_demand_reads_skip_exactly_what_the_walk_skips() {
    let hooks = b"from gen.moves import onload\n\n\ndef pre(module, args):\n    onload(module)\n\n\ndef attach(model):\n    model.register_forward_pre_hook(pre)\n";
    let moves = b"def onload(module):\n    module.cuda()\n";
    type Files<'a> = Vec<(&'a str, &'a [u8])>;
    let shapes: [(&str, Files); 3] = [
        (
            "ignored above, re-included below",
            vec![
                (".git/HEAD", b"ref: refs/heads/main\n"),
                (".gitignore", b"gen/\n"),
                ("gen/.gitignore", b"!moves.py\n"),
            ],
        ),
        (
            "a parent's .ignore over a deeper .gitignore whitelist",
            vec![
                (".git/HEAD", b"ref: refs/heads/main\n"),
                (".ignore", b"gen/moves.py\n"),
                ("gen/.gitignore", b"!moves.py\n"),
            ],
        ),
        ("an .ignore outside git", vec![(".ignore", b"gen/\n")]),
    ];
    for (shape, extra) in shapes {
        let mut files: Vec<(&str, &[u8])> = vec![
            ("pyproject.toml", b""),
            ("hooks.py", hooks),
            ("gen/__init__.py", b""),
            ("gen/moves.py", moves),
        ];
        files.extend(extra);
        let p = Project::new(&files);
        let run = run_in(p.root(), &["--list", "."]);
        let out = run.stdout_str();
        assert!(
            !out.contains("gen/moves.py"),
            "{shape}: the walk takes it\n{run}"
        );
        assert!(out.contains("not-offload  pre"), "{shape}\n{run}");
        // The file alone reads the same project the same way.
        let alone = run_in(p.root(), &["--list", "hooks.py"]);
        assert!(
            alone.stdout_str().contains("not-offload  pre"),
            "{shape}\n{alone}"
        );
    }
}
