//! hookfence on released code from PyPI: accelerate 1.12.0 (before upstream's
//! fix, PR #3888), accelerate 1.15.0 (after it) and diffusers 0.42.1.
//!
//! Wheels are downloaded once, hash-pinned, into `$HOOKFENCE_CACHE` (default
//! `~/.cache/hookfence`), never into the repository.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cache_dir() -> PathBuf {
    std::env::var_os("HOOKFENCE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set")).join(".cache/hookfence")
        })
        .join("wheels")
}

/// Downloads (once) and unpacks a pinned wheel into a fresh temp dir.
fn unpack(requirement: &str, sha256: &str) -> tempfile::TempDir {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let (name, version) = requirement.split_once("==").unwrap();
    let wheel = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    if !wheel.exists() {
        let reqs = dir.join(format!("{name}-{version}.txt"));
        std::fs::write(&reqs, format!("{requirement} --hash=sha256:{sha256}\n")).unwrap();
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
            ])
            .arg("--require-hashes")
            .arg("-r")
            .arg(&reqs)
            .arg("-d")
            .arg(&dir)
            .status()
            .expect("python3 -m pip runs");
        assert!(status.success(), "pip download {requirement} failed");
    }
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(&wheel)
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

fn hookfence(args: &[&str], cwd: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hookfence"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Every file's bytes under `root`, by relative path.
fn snapshot_tree(root: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                files.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    files
}

/// Python's own view of which functions carry `@torch.compiler.disable()`,
/// as `module:qualname`.
fn fenced_by_ast(root: &Path, package: &str) -> BTreeSet<String> {
    let script = r#"
import ast, pathlib, sys
root = pathlib.Path(sys.argv[1])
for path in sorted(root.rglob("*.py")):
    tree = ast.parse(path.read_bytes())
    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in child.decorator_list:
                    if ast.unparse(d) == "torch.compiler.disable()":
                        print(f"{path.relative_to(root)}:{prefix}{child.name}")
                walk(child, prefix + child.name + ".<locals>.")
            else:
                walk(child, prefix)
    walk(tree, "")
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(root.join(package))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn all_parse(root: &Path) {
    let out = Command::new("python3")
        .args([
            "-c",
            "import ast, pathlib, sys\nfor p in pathlib.Path(sys.argv[1]).rglob('*.py'): ast.parse(p.read_bytes(), str(p))",
        ])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn accelerate_1_12_gets_exactly_upstreams_seven_fences() {
    let tree = unpack(
        "accelerate==1.12.0",
        "3e2091cd341423207e2f084a6654b1efcd250dc326f2a37d6dde446e07cabb11",
    );
    let root = tree.path();
    let before = snapshot_tree(root);
    assert!(fenced_by_ast(root, "accelerate").is_empty());

    let out = hookfence(&["--apply", "accelerate"], root);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // What upstream's fix (PR #3888) fenced, and nothing else.
    let expected: BTreeSet<String> = [
        "SequentialHook.pre_forward",
        "SequentialHook.post_forward",
        "AlignDevicesHook.pre_forward",
        "AlignDevicesHook.post_forward",
        "CpuOffload.pre_forward",
        "LayerwiseCastingHook.pre_forward",
        "LayerwiseCastingHook.post_forward",
    ]
    .iter()
    .map(|q| format!("hooks.py:{q}"))
    .collect();
    assert_eq!(fenced_by_ast(root, "accelerate"), expected);

    // Nothing else changed: every other file is byte-identical, and hooks.py
    // differs by exactly seven added decorator lines.
    let after = snapshot_tree(root);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (path, old) in &before {
        let new = &after[path];
        if path.ends_with("accelerate/hooks.py") {
            let old = String::from_utf8(old.clone()).unwrap();
            let new = String::from_utf8(new.clone()).unwrap();
            let diff = similar::TextDiff::from_lines(&old, &new);
            let added: Vec<_> = diff
                .iter_all_changes()
                .filter(|c| c.tag() != similar::ChangeTag::Equal)
                .map(|c| (c.tag(), c.value().to_owned()))
                .collect();
            assert_eq!(added.len(), 7, "{added:?}");
            for (tag, line) in added {
                assert_eq!(tag, similar::ChangeTag::Insert);
                assert_eq!(line, "    @torch.compiler.disable()\n");
            }
        } else {
            assert_eq!(old, new, "{} changed", path.display());
        }
    }
    all_parse(&root.join("accelerate"));

    // Idempotent, and the CI guard is satisfied.
    let again = hookfence(&["--check", "accelerate"], root);
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(snapshot_tree(root), after);
}

#[test]
fn accelerate_1_12_check_fails_before_the_fix() {
    let tree = unpack(
        "accelerate==1.12.0",
        "3e2091cd341423207e2f084a6654b1efcd250dc326f2a37d6dde446e07cabb11",
    );
    let out = hookfence(&["--check", "accelerate"], tree.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("7 offload hooks unfenced in 1 file"),
        "{stderr}"
    );
}

#[test]
fn accelerate_1_15_needs_no_change() {
    let tree = unpack(
        "accelerate==1.15.0",
        "97eacca0b73e45cb867dbf8c5d5d4dc32219544300e0c8992c7334dc2ef33cec",
    );
    let root = tree.path();
    let out = hookfence(&["accelerate"], root);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Its `@_compiler_disable` wrapper counts as a fence on all seven.
    assert!(
        stderr.contains("Would fence 0 hooks in 0 files (7 already fenced"),
        "{stderr}"
    );
    assert_eq!(
        hookfence(&["--check", "accelerate"], root).status.code(),
        Some(0)
    );
}

#[test]
fn diffusers_offload_hooks_are_fenced_and_cache_guidance_parallel_hooks_are_not() {
    let tree = unpack(
        "diffusers==0.42.1",
        "9154faa704ce00e0b77f568e0d64786064368528aab5fc14eeea92f87d788014",
    );
    let root = tree.path();
    // diffusers fences some of its own helpers (`ModuleGroup.onload_`) already.
    let before = fenced_by_ast(root, "diffusers");
    let out = hookfence(&["--apply", "diffusers"], root);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected: BTreeSet<String> = [
        "hooks/group_offloading.py:GroupOffloadingHook.pre_forward",
        "hooks/group_offloading.py:GroupOffloadingHook.post_forward",
        "hooks/layerwise_casting.py:LayerwiseCastingHook.pre_forward",
        "hooks/layerwise_casting.py:LayerwiseCastingHook.post_forward",
        "modular_pipelines/components_manager.py:CustomOffloadHook.pre_forward",
    ]
    .iter()
    .map(|q| q.to_string())
    .collect();
    let after = fenced_by_ast(root, "diffusers");
    assert_eq!(
        after.difference(&before).cloned().collect::<BTreeSet<_>>(),
        expected
    );
    assert!(before.is_subset(&after));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for left_alone in [
        "ContextParallelSplitHook.pre_forward: not offload",
        "ContextParallelGatherHook.post_forward: not offload",
        "SmoothedEnergyGuidanceHook.post_forward: not offload",
        "SeaCacheRootHook.pre_forward: not offload",
        // It removes tracker hooks and sets up the prefetch order of the
        // groups; the transfers happen in the groups' own hooks.
        "LazyPrefetchGroupOffloadingHook.post_forward: not offload",
    ] {
        assert!(
            stderr.contains(left_alone),
            "{left_alone} missing from:\n{stderr}"
        );
    }
    all_parse(&root.join("diffusers"));
    assert_eq!(
        hookfence(&["--check", "diffusers"], root).status.code(),
        Some(0)
    );
}

/// Downloads (once, hash-checked) and unpacks DeepSpeed 0.16.5's sdist.
fn deepspeed_sdist() -> tempfile::TempDir {
    const SHA256: &str = "29e007a2bdafb1431b7a021126dace0126ce53c57eb79db1ba85a1484c0b770e";
    let dir = cache_dir().with_file_name("sdists");
    std::fs::create_dir_all(&dir).unwrap();
    let sdist = dir.join("deepspeed-0.16.5.tar.gz");
    if !sdist.exists() {
        let reqs = dir.join("deepspeed-0.16.5.txt");
        std::fs::write(&reqs, format!("deepspeed==0.16.5 --hash=sha256:{SHA256}\n")).unwrap();
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
            ])
            // pip prepares an sdist's metadata before it saves it: in an
            // isolated build environment, so that the machine's own
            // setuptools (without `wheel`) does not decide whether it can.
            .arg("--require-hashes")
            .arg("-r")
            .arg(&reqs)
            .arg("-d")
            .arg(&dir)
            .status()
            .expect("python3 -m pip runs");
        assert!(status.success(), "pip download deepspeed==0.16.5 failed");
    }
    let digest = Command::new("sha256sum").arg(&sdist).output().unwrap();
    assert!(
        String::from_utf8_lossy(&digest.stdout).starts_with(SHA256),
        "{} does not hash to the pin",
        sdist.display()
    );
    let out = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&sdist)
        .arg("-C")
        .arg(out.path())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

#[test]
fn deepspeed_zero3_hooks_are_offload_through_their_calls_and_timing_hooks_are_not() {
    let tree = deepspeed_sdist();
    let root = tree.path().join("deepspeed-0.16.5");
    let out = hookfence(&["--list", "deepspeed"], &root);
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let line_of = |qualname: &str| -> String {
        list.lines()
            .find(|l| l.split_whitespace().nth(2) == Some(qualname))
            .unwrap_or_else(|| panic!("{qualname} missing from:\n{list}"))
            .to_owned()
    };
    for (hook, callee, sign) in [
        (
            "DeepSpeedZeRoOffload._register_deepspeed_module.<locals>._pre_forward_module_hook",
            "DeepSpeedZeRoOffload.pre_sub_module_forward_function",
            "fetch_sub_module",
        ),
        // Its shortest chain: the external parameters it all-gathers
        // itself (`actual_external_param.all_gather()`), before the release.
        (
            "DeepSpeedZeRoOffload._register_deepspeed_module.<locals>._post_forward_module_hook",
            "Init._convert_to_deepspeed_param.<locals>.all_gather",
            "Init._allgather_param",
        ),
    ] {
        let line = line_of(hook);
        assert!(line.contains("  unfenced  "), "{line}");
        assert!(
            line.contains(sign) && line.contains(&format!("via {callee}")),
            "{line}"
        );
        assert!(
            line.contains("deepspeed/runtime/zero/parameter_offload.py:"),
            "{line}"
        );
    }
    // DeepSpeed 0.16.6 fenced `_post_backward_module_hook` next to
    // `_pre_forward_module_hook`: forward hooks that set up backward-time
    // offload through a custom autograd Function the module holds
    // (`module.post_bwd_fn.apply`), whose backward runs the release.
    for (hook, function) in [
        (
            "DeepSpeedZeRoOffload._register_deepspeed_module.<locals>._post_backward_module_hook",
            "PostBackwardFunctionModule.backward (handed to module.post_bwd_fn.apply)",
        ),
        (
            "DeepSpeedZeRoOffload._register_deepspeed_module.<locals>._pre_backward_module_hook",
            "PreBackwardFunctionForModule.backward (handed to module.pre_bwd_fn.apply)",
        ),
    ] {
        let line = line_of(hook);
        assert!(line.contains("  unfenced  "), "{line}");
        assert!(line.contains(function), "{line}");
    }
    for timing in [
        "InferenceEngine._pre_forward_hook",
        "InferenceEngine._post_forward_hook",
        "FlopsProfiler.start_profile.<locals>.register_module_hooks.<locals>.start_time_hook",
        "FlopsProfiler.start_profile.<locals>.register_module_hooks.<locals>.end_time_hook",
    ] {
        let line = line_of(timing);
        assert!(line.contains("  not-offload  "), "{line}");
    }
    let explained = hookfence(
        &[
            "--explain",
            "deepspeed/runtime/zero/parameter_offload.py:292",
        ],
        &root,
    );
    let text = String::from_utf8_lossy(&explained.stdout);
    assert_eq!(explained.status.code(), Some(0), "{text}");
    assert!(text.contains("registration: registered at"), "{text}");
    assert!(
        text.contains("call: DeepSpeedZeRoOffload.pre_sub_module_forward_function"),
        "{text}"
    );
    // The parameter fetch DeepSpeed fenced itself, and the wait on the
    // all-gather handles inside it.
    assert!(
        text.contains("call: PartitionedParameterCoordinator.fetch_sub_module (fenced)"),
        "{text}"
    );
    assert!(text.contains("wait: waits on"), "{text}");
}
