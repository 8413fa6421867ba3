//! One story per verdict: `--list`, the JSON, `--explain` and the stderr
//! notes render the same evidence for a site; a verdict never says "no
//! evidence" and "offload" at once; a hook whose offload work runs in a
//! function its authors fenced says so in every output and in the summary;
//! summaries count only files that hold hooks.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

mod common;

use common::{Project, Run};

/// Three hooks: one whose offload work is in a fenced method of another
/// class, one that moves its module itself, one that does nothing to
/// module state.
const HOOKS: &str = r#"import torch


class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

    def post_forward(self, module, output):
        return output


class Group:
    def __init__(self, module):
        self.module = module

    @torch.compiler.disable()
    def onload_(self):
        self.module.to("cuda")


class GroupHook(ModelHook):
    def __init__(self, module):
        self.group = Group(module)

    def pre_forward(self, module, *args, **kwargs):
        self.group.onload_()
        return args, kwargs


class Quiet(ModelHook):
    def post_forward(self, module, output):
        return output * 2


class Offload(ModelHook):
    def post_forward(self, module, output):
        module.to("cpu")
        return output
"#;

fn project() -> Project {
    Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", HOOKS.as_bytes())])
}

/// What `--explain AT` prints for the package.
fn explained(p: &Project, at: &str) -> String {
    p.hookfence(&["--explain", at, "pkg"]).stdout_str()
}

/// The JSON site of the hook `qualname`.
fn site_named<'a>(doc: &'a serde_json::Value, qualname: &str) -> &'a serde_json::Value {
    doc["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["qualname"] == qualname)
        .unwrap_or_else(|| panic!("no site {qualname}: {doc}"))
}

fn json(run: &Run) -> serde_json::Value {
    serde_json::from_slice(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run}"))
}

/// Every site of the JSON document, checked against `--list` and
/// `--explain` run with the same `extra` options.
fn check_every_site_tells_one_story(p: &Project, extra: &[&str]) {
    let doc = json(&p.hookfence(&[&["--format", "json"], extra, &["pkg"]].concat()));
    let list = p.hookfence(&[&["--list"], extra, &["pkg"]].concat());
    let list = list.stdout_str();
    let sites = doc["sites"].as_array().unwrap();
    assert!(sites.len() >= 3, "{doc}");
    for site in sites {
        let at = format!("{}:{}", site["path"].as_str().unwrap(), site["line"]);
        let status = site["status"].as_str().unwrap();
        let qualname = site["qualname"].as_str().unwrap();
        let reason = site["reason"].as_str().unwrap();
        let listed = format!("{at}:{}  {status}  {qualname}  {reason}", site["column"]);
        assert!(
            list.lines().any(|l| l == listed),
            "{extra:?}: --list lacks `{listed}`:\n{list}"
        );

        let explain = p.hookfence(&[&["--explain", at.as_str()], extra, &["pkg"]].concat());
        let explain = explain.stdout_str();
        let decision = explain
            .lines()
            .find_map(|l| l.strip_prefix("  decision: "))
            .unwrap_or_else(|| panic!("no decision:\n{explain}"));
        assert!(
            decision.starts_with(status),
            "{extra:?} {at}: JSON says {status}, --explain decides `{decision}`"
        );
        let evidence = site["evidence"].as_array().unwrap();
        for step in evidence {
            let line = format!(
                "    {}: {} ({}:{})",
                step["kind"].as_str().unwrap(),
                step["detail"].as_str().unwrap(),
                step["path"].as_str().unwrap(),
                step["line"]
            );
            assert!(
                explain.lines().any(|l| l == line),
                "{extra:?} {at}: --explain lacks the JSON's step `{line}`:\n{explain}"
            );
        }
        let says_none = explain.contains("\n  evidence:\n    none: ");
        assert_eq!(says_none, evidence.is_empty(), "{extra:?} {at}:\n{explain}");
        assert!(
            !(says_none && decision.contains("offload hook")),
            "{extra:?} {at}: no evidence, yet an offload hook:\n{explain}"
        );
        if status == "unfenced" && !evidence.is_empty() {
            assert!(
                reason.starts_with(evidence.last().unwrap()["detail"].as_str().unwrap()),
                "{extra:?} {at}: the reason does not start from the sign: {reason}"
            );
        }
    }
}

#[test]
fn every_output_renders_the_same_evidence_for_a_site() {
    let p = project();
    check_every_site_tells_one_story(&p, &[]);
    check_every_site_tells_one_story(&p, &["--all-hooks"]);

    // The stderr note for a skipped hook gives the --list reason.
    let run = p.hookfence(&["pkg"]);
    assert!(
        run.stderr.contains(
            "pkg/hooks.py:31:5: skipped Quiet.post_forward: not offload: no effect on module state in its body or in what it calls (subclass of ModelHook); --all-hooks fences it"
        ),
        "{run}"
    );

    // Under --all-hooks, a hook with no offload work is fenced, and
    // --explain says why without calling it an offload hook.
    let explain = p.hookfence(&["--all-hooks", "--explain", "pkg/hooks.py:31", "pkg"]);
    assert!(
        explain
            .stdout_str()
            .contains("  decision: unfenced hook with no offload work: --all-hooks fences it"),
        "{explain}"
    );
}

#[test]
fn a_hook_whose_offload_work_is_fenced_in_a_callee_says_so_everywhere() {
    let p = project();
    let doc = json(&p.hookfence(&["--format", "json", "pkg"]));
    let site = site_named(&doc, "GroupHook.pre_forward");
    assert_eq!(site["status"], "unfenced");
    assert_eq!(
        site["evidence"][0]["fenced"], "@torch.compiler.disable()",
        "{site}"
    );
    assert_eq!(site["fenced_calls"], serde_json::json!([26]), "{site}");
    assert!(
        site["reason"]
            .as_str()
            .unwrap()
            .contains("via Group.onload_ (fenced)"),
        "{site}"
    );

    let explain = explained(&p, "pkg/hooks.py:25");
    assert!(
        explain.contains(
            "  fenced callees:\n    Group.onload_ by @torch.compiler.disable() (pkg/hooks.py:17)\n    their work runs eagerly already; the hook calls one of them (line 26): fenced as well, its one graph break moves to the hook's call and none of the hook is traced (no break saved there)\n"
        ),
        "{explain}"
    );
    // The hook that moves its module itself names no fenced callee.
    let explain = explained(&p, "pkg/hooks.py:36");
    assert!(!explain.contains("fenced callees"), "{explain}");

    // The summary names it beside "0 already fenced", in every mode.
    for args in [
        &["pkg"][..],
        &["--check", "pkg"][..],
        &["--list", "pkg"][..],
    ] {
        let run = p.hookfence(args);
        assert!(
            run.stderr
                .contains("(0 already fenced, 1 to fence with fenced callees, 1 not offload"),
            "{args:?}: {run}"
        );
    }
    // Once fenced, it is no longer counted there.
    p.hookfence(&["-q", "--apply", "pkg"]).expect_code(0);
    let run = p.hookfence(&["--check", "pkg"]);
    run.expect_code(0);
    assert!(
        run.stderr
            .contains("No unfenced offload hooks (2 already fenced, 1 not offload"),
        "{run}"
    );
}

#[test]
fn a_summary_counts_only_files_that_hold_hooks() {
    // The wrap strategy creates a helper module beside the hooks: the
    // summary counts the one file with hooks, in a dry run and in --apply.
    let p = project();
    let run = p.hookfence(&["--strategy", "wrap", "pkg"]);
    assert!(
        run.stderr.contains("Would fence 2 hooks in 1 file ("),
        "{run}"
    );
    let run = p.hookfence(&["--apply", "--strategy", "wrap", "pkg"]);
    run.expect_code(0);
    assert!(run.stderr.contains("Fenced 2 hooks in 1 file ("), "{run}");
    assert!(p.path("pkg/_no_compile.py").is_file());
}

#[test]
fn a_callee_fenced_by_the_modules_own_wrapper_is_a_fenced_callee() {
    // accelerate ≥ 1.13's way: a module-level function that calls the
    // disable (here on first call) fences what it decorates.
    let lazy = HOOKS.replace(
        "class Group:",
        "def _compiler_disable(fn):\n    def wrapper(*args, **kwargs):\n        return torch.compiler.disable(fn)(*args, **kwargs)\n\n    return wrapper\n\n\nclass Group:",
    )
    .replace("    @torch.compiler.disable()\n    def onload_", "    @_compiler_disable\n    def onload_");
    let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", lazy.as_bytes())]);
    let doc = json(&p.hookfence(&["--format", "json", "pkg"]));
    let site = site_named(&doc, "GroupHook.pre_forward");
    assert_eq!(
        site["evidence"][0]["fenced"], "@_compiler_disable",
        "{site}"
    );
}

#[test]
fn explain_counts_the_graph_breaks_fencing_the_hook_as_well_saves() {
    // Two calls into the fenced method: traced, two breaks; fenced, one.
    let twice = HOOKS.replace(
        "        self.group.onload_()\n",
        "        self.group.onload_()\n        self.group.onload_()\n",
    );
    let p = Project::new(&[("pkg/__init__.py", b""), ("pkg/hooks.py", twice.as_bytes())]);
    let explain = explained(&p, "pkg/hooks.py:25");
    assert!(
        explain.contains(
            "    their work runs eagerly already; the hook calls them 2 times (lines 26, 27): traced, that is 2 graph breaks; fenced as well, it is one (saves 1)\n"
        ),
        "{explain}"
    );
    // Reached only through a helper of its own: no call of its own body.
    let helper = HOOKS.replace(
        "        self.group.onload_()\n        return args, kwargs\n",
        "        self._bring_in()\n        return args, kwargs\n\n    def _bring_in(self):\n        self.group.onload_()\n",
    );
    let p = Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/hooks.py", helper.as_bytes()),
    ]);
    let explain = explained(&p, "pkg/hooks.py:25");
    assert!(
        explain.contains(
            "    their work runs eagerly already; the hook reaches them through other functions: traced, it runs up to them and breaks the graph there; fenced as well, it is one graph break and none of it is traced\n"
        ),
        "{explain}"
    );
}
