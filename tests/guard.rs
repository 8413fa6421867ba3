//! The guard `--emit-pytest` writes checks what `--check` checks: hooks
//! fenced by torch's disable carry its marker, hooks fenced by the project's
//! own wrapper (eager or lazy, as accelerate's `_compiler_disable`) are what
//! that wrapper makes and reach torch's disable, and the wrap helper's
//! registry is audited however the guard is regenerated. Its tests are
//! called by hand with CPython and stand-ins for torch and pytest (see
//! `common::python_imports`); `tests/torch/run.sh` runs them with pytest and
//! real torch on accelerate.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::{HOOK, Project, python_imports, wrap_project};

/// A lazy fence as accelerate ships it since PR #3947: torch's disable is
/// called on the first call, not at decoration.
const LAZY: &str = r#"import functools

import torch


def _compiler_disable(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not hasattr(wrapper, "_compiled_fn"):
            wrapper._compiled_fn = torch.compiler.disable(fn)
        return wrapper._compiled_fn(*args, **kwargs)

    return wrapper


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs


class CpuOffload(ModelHook):
    @_compiler_disable
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs


class DiskOffload(ModelHook):
    @_compiler_disable
    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;

/// An eager fence of the project's own, kept in a closure cell.
const EAGER: &str = r#"import torch


def fence(fn):
    disabled = torch.compiler.disable(fn)
    return disabled


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs


class Stage(ModelHook):
    @fence
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#;

/// Every test of the generated guard `test_fences`, called by hand.
const RUN_GUARD: &str = "for m, q, w in test_fences.HOOKS:
    test_fences.test_hook_is_disabled_for_torch_compile(m, q, w)
for h in test_fences.HELPERS:
    test_fences.test_helper_registry_is_all_disabled(h)";

fn project() -> Project {
    Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/lazy.py", LAZY.as_bytes()),
        ("pkg/eager.py", EAGER.as_bytes()),
    ])
}

#[test]
fn the_guard_passes_where_check_passes_and_fails_where_it_fails_for_a_projects_wrappers() {
    let p = project();
    p.hookfence(&["--check", "pkg"]).expect_code(0);
    p.hookfence(&["-q", "--emit-pytest", "test_fences.py", "pkg"])
        .expect_code(0);
    let guard = p.read_str("test_fences.py");
    for line in [
        "(\"pkg.lazy\", \"CpuOffload.pre_forward\", \"pkg.lazy._compiler_disable\"),",
        "(\"pkg.lazy\", \"DiskOffload.post_forward\", \"pkg.lazy._compiler_disable\"),",
        "(\"pkg.eager\", \"Stage.pre_forward\", \"pkg.eager.fence\"),",
    ] {
        assert!(guard.contains(line), "{line} missing:\n{guard}");
    }
    python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap();

    // One lazy fence removed: --check fails, and so does the guard.
    let lazy = p.read_str("pkg/lazy.py");
    p.write(
        "pkg/lazy.py",
        lazy.replacen(
            "    @_compiler_disable\n    def post_forward",
            "    def post_forward",
            1,
        ),
    );
    p.hookfence(&["--check", "pkg"]).expect_code(1);
    let err = python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap_err();
    assert!(
        err.contains(
            "pkg.lazy.DiskOffload.post_forward is not fenced by pkg.lazy._compiler_disable"
        ),
        "{err}"
    );
    p.write("pkg/lazy.py", &lazy);

    // The eager one removed: the same.
    let eager = p.read_str("pkg/eager.py");
    p.write("pkg/eager.py", eager.replace("    @fence\n", ""));
    p.hookfence(&["--check", "pkg"]).expect_code(1);
    let err = python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap_err();
    assert!(
        err.contains("pkg.eager.Stage.pre_forward is not fenced"),
        "{err}"
    );
    p.write("pkg/eager.py", &eager);

    // A wrapper that no longer fences anything (it wraps, but never calls
    // torch's disable) no longer passes --check, nor the guard written when
    // it did.
    p.write(
        "pkg/lazy.py",
        lazy.replace("torch.compiler.disable(fn)", "functools.partial(fn)"),
    );
    p.hookfence(&["--check", "pkg"]).expect_code(1);
    let err = python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap_err();
    assert!(
        err.contains("is not fenced by pkg.lazy._compiler_disable"),
        "{err}"
    );
}

#[test]
fn a_guard_regenerated_on_a_rewritten_tree_checks_what_the_rewriting_run_did() {
    for strategy in ["decorate", "wrap"] {
        let p = wrap_project();
        p.hookfence(&[
            "-q",
            "--apply",
            "--strategy",
            strategy,
            "--emit-pytest",
            "first.py",
            "pkg",
        ])
        .expect_code(0);
        let first = p.read_str("first.py");
        // Later, on the rewritten tree: with the strategy, and without one.
        for args in [
            &["--check", "--strategy", strategy][..],
            &["--check"][..],
            &["--list"][..],
        ] {
            p.hookfence(&[args, &["-q", "--emit-pytest", "again.py", "pkg"]].concat())
                .expect_code(0);
            assert_eq!(
                p.read_str("again.py"),
                first,
                "{strategy} {args:?}: the regenerated guard differs"
            );
        }
        let audits = first.contains("def test_helper_registry_is_all_disabled");
        assert_eq!(audits, strategy == "wrap", "{first}");
        if strategy == "wrap" {
            assert!(first.contains("    \"pkg._no_compile\",\n"), "{first}");
        }
        python_imports(
            p.root(),
            &["first"],
            &RUN_GUARD.replace("test_fences", "first"),
        )
        .unwrap();
    }
}

#[test]
fn a_guard_holds_no_test_that_can_only_skip() {
    // Hooks fenced by torch, no helper: no helper test (pytest would skip it
    // for an empty parameter set).
    let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", HOOK.as_bytes())]);
    p.hookfence(&["-q", "--apply", "--emit-pytest", "guard.py", "pkg"])
        .expect_code(0);
    let guard = p.read_str("guard.py");
    assert!(guard.contains("def test_hook_is_disabled_for_torch_compile"));
    assert!(!guard.contains("def test_helper_registry"), "{guard}");
    assert!(!guard.contains("def _fenced_by"), "{guard}");

    // Nothing to check at all: no test, and a note says so.
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/model.py", b"def forward(x):\n    return x\n"),
    ]);
    let run = p.hookfence(&["--emit-pytest", "guard.py", "pkg"]);
    run.expect_code(0);
    assert!(
        run.stderr
            .contains("guard.py: the guard checks nothing (no fenced hook can be imported by name, no helper module)"),
        "{run}"
    );
    let guard = p.read_str("guard.py");
    assert!(!guard.contains("def test_"), "{guard}");
    python_imports(p.root(), &["guard"], "").unwrap();
}

/// Fences another module of the package defines: a lazy wrapper, an alias
/// of torch's disable re-exported by a subpackage's `__init__`, and a
/// decorator of the project that fences nothing.
fn imported_fences_project() -> Project {
    Project::new(&[
        ("pkg/__init__.py", b""),
        (
            "pkg/compat/fences.py",
            br#"import functools

import torch


def lazy_disable(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not hasattr(wrapper, "_compiled_fn"):
            wrapper._compiled_fn = torch.compiler.disable(fn)
        return wrapper._compiled_fn(*args, **kwargs)

    return wrapper


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper
"#,
        ),
        (
            "pkg/compat/__init__.py",
            b"from .fences import lazy_disable\nfrom .fences import torch as _torch\n\nno_trace = _torch.compiler.disable\n",
        ),
        (
            "pkg/hooks.py",
            br#"import pkg.compat.fences as fences
from pkg.compat import lazy_disable, no_trace


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class CpuOffload(ModelHook):
    @lazy_disable
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    @no_trace
    def post_forward(self, module, output):
        module.to("cpu")
        return output


class DiskOffload(ModelHook):
    @fences.lazy_disable
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs

    @fences.traced
    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#,
        ),
    ])
}

#[test]
fn a_fence_another_module_defines_is_a_fence_for_check_apply_and_the_guard() {
    let p = imported_fences_project();
    // Only the project decorator that fences nothing leaves a hook unfenced,
    // whether the run reads the whole package or the one file.
    for target in ["pkg", "pkg/hooks.py"] {
        let run = p.hookfence(&["--check", target]);
        run.expect_code(1);
        assert!(
            run.stdout_str()
                .contains("unfenced offload hook DiskOffload.post_forward"),
            "{target}: {run}"
        );
        assert!(
            run.stderr
                .contains("1 offload hook unfenced in 1 file (3 already fenced"),
            "{target}: {run}"
        );
    }
    let list = p.hookfence(&["--list", "pkg"]).stdout_str();
    for fenced in [
        "fenced  CpuOffload.pre_forward  fenced by @lazy_disable;",
        "fenced  CpuOffload.post_forward  fenced by @no_trace;",
        "fenced  DiskOffload.pre_forward  fenced by @fences.lazy_disable;",
    ] {
        assert!(list.contains(fenced), "{fenced}:\n{list}");
    }

    // --apply fences that one alone; the guard names each fence by the
    // path that defines it, passes, and fails once one is removed.
    p.hookfence(&["-q", "--apply", "--emit-pytest", "test_fences.py", "pkg"])
        .expect_code(0);
    let hooks = p.read_str("pkg/hooks.py");
    assert_eq!(
        hooks.matches("@torch.compiler.disable()").count(),
        1,
        "{hooks}"
    );
    p.hookfence(&["--check", "pkg"]).expect_code(0);
    let guard = p.read_str("test_fences.py");
    for line in [
        "(\"pkg.hooks\", \"CpuOffload.pre_forward\", \"pkg.compat.fences.lazy_disable\"),",
        "(\"pkg.hooks\", \"CpuOffload.post_forward\", \"pkg.compat.no_trace\"),",
        "(\"pkg.hooks\", \"DiskOffload.pre_forward\", \"pkg.compat.fences.lazy_disable\"),",
        "(\"pkg.hooks\", \"DiskOffload.post_forward\", None),",
    ] {
        assert!(guard.contains(line), "{line} missing:\n{guard}");
    }
    python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap();
    p.write("pkg/hooks.py", hooks.replacen("    @no_trace\n", "", 1));
    p.hookfence(&["--check", "pkg"]).expect_code(1);
    let err = python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap_err();
    assert!(
        err.contains("pkg.hooks.CpuOffload.post_forward is not fenced by pkg.compat.no_trace"),
        "{err}"
    );
}

#[test]
fn an_imported_fence_rebound_or_imported_only_for_type_checking_fences_nothing() {
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        (
            "pkg/fences.py",
            b"import torch\n\n\ndef no_trace(fn):\n    return torch.compiler.disable(fn)\n",
        ),
        (
            "pkg/hooks.py",
            br#"from typing import TYPE_CHECKING

from pkg.fences import no_trace
from pkg.fences import no_trace as shadowed

if TYPE_CHECKING:
    from pkg.fences import no_trace as typing_only
else:
    def typing_only(fn):
        return fn


def shadowed(fn):
    return fn


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs


class Fenced(ModelHook):
    @no_trace
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs


class Shadowed(ModelHook):
    @shadowed
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs


class TypingOnly(ModelHook):
    @typing_only
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#,
        ),
    ]);
    let list = p.hookfence(&["--list", "pkg"]).stdout_str();
    assert!(
        list.contains("  fenced  Fenced.pre_forward  fenced by @no_trace;"),
        "{list}"
    );
    assert!(
        list.contains("  unfenced  Shadowed.pre_forward  "),
        "{list}"
    );
    assert!(
        list.contains("  unfenced  TypingOnly.pre_forward  "),
        "{list}"
    );
}

#[test]
fn a_run_from_inside_the_package_names_its_modules_as_python_does() {
    // `hookfence --check hooks.py` run in `pkg/`, or `../pkg/hooks.py` from
    // `pkg/sub/`: the module is `pkg.hooks` all the same, so its imports
    // (here, a fence in `pkg.fences`) resolve, and the guard names it so.
    let p = imported_fences_project();
    let whole = p.hookfence(&["--check", "pkg/hooks.py"]);
    for (dir, file) in [("pkg", "hooks.py"), ("pkg/compat", "../hooks.py")] {
        let run = p.hookfence_in(dir, &["--check", file]);
        assert_eq!(
            run.code, whole.code,
            "{dir} {file}: {run}\nfrom the root: {whole}"
        );
        assert!(
            run.stderr
                .contains("1 offload hook unfenced in 1 file (3 already fenced"),
            "{dir} {file}: {run}"
        );
    }
    p.hookfence_in(
        "pkg",
        &["-q", "--emit-pytest", "../from_inside.py", "hooks.py"],
    )
    .expect_code(0);
    let guard = p.read_str("from_inside.py");
    assert!(
        guard.contains(
            "(\"pkg.hooks\", \"CpuOffload.pre_forward\", \"pkg.compat.fences.lazy_disable\"),"
        ),
        "{guard}"
    );
}

#[test]
fn the_guard_checks_a_wrapper_that_takes_the_hooks_arguments_and_a_fence_factory() {
    // A lazy wrapper with named positional parameters, and a factory used
    // as `@fence(...)`: --check accepts both, and so does the guard.
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        (
            "pkg/hooks.py",
            br#"import torch


def lazy(fn):
    def wrapper(self, module, *args, **kwargs):
        return torch.compiler.disable(fn)(self, module, *args, **kwargs)

    return wrapper


def fence(recursive=True):
    def deco(fn):
        return torch.compiler.disable(fn, recursive=recursive)

    return deco


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs


class A(ModelHook):
    @lazy
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs


class B(ModelHook):
    @fence(recursive=True)
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#,
        ),
    ]);
    p.hookfence(&["--check", "pkg"]).expect_code(0);
    p.hookfence(&["-q", "--emit-pytest", "test_fences.py", "pkg"])
        .expect_code(0);
    let guard = p.read_str("test_fences.py");
    assert!(
        guard.contains("(\"pkg.hooks\", \"A.pre_forward\", \"pkg.hooks.lazy\"),"),
        "{guard}"
    );
    assert!(
        guard.contains("(\"pkg.hooks\", \"B.pre_forward\", None),"),
        "{guard}"
    );
    python_imports(p.root(), &["test_fences"], RUN_GUARD).unwrap();
}
