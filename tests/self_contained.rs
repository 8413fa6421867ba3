//! A clone is enough: no script, configuration or document of the repository
//! names a path outside it (such as `../shared/...` beside the checkout,
//! which a clone does not have).
//!
//! `git grep` finds every `..` path component in the tracked (and untracked,
//! not ignored) files, except Rust sources (their `../` are inside throwaway
//! test projects), the Python under test (`tests/fixtures/`, `examples/`,
//! where `..` is a relative import), snapshots, Cargo.lock and CHANGELOG.md
//! (history may name what is gone). Each `..` must be anchored to the file's
//! own directory — `$(dirname "$0")/..`, or `$VAR/..` where the file sets
//! `VAR` from `dirname` of `$0`, `BASH_SOURCE` or `__file__` — and must not
//! climb above the repository root from there. Anything else (`../x`,
//! `$REPO/../x`, `cd ..`) is reported as path:line:col.

#![allow(clippy::unwrap_used)] // a panic is the failure report

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const PATHSPEC: &[&str] = &[
    ".",
    ":!*.rs",
    ":!snapshots/",
    ":!tests/fixtures/",
    ":!examples/",
    ":!Cargo.lock",
    ":!CHANGELOG.md",
];

fn path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// The text of the `$( ... )` that ends at `prefix`'s last byte (a `)`).
fn substitution_before(prefix: &str) -> Option<&str> {
    let bytes = prefix.as_bytes();
    let mut depth = 0usize;
    for i in (0..bytes.len()).rev() {
        match bytes[i] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return (i > 0 && bytes[i - 1] == b'$')
                        .then(|| &prefix[i + 1..prefix.len() - 1]);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_own_dir(expr: &str) -> bool {
    expr.contains("dirname")
        && (expr.contains("$0") || expr.contains("BASH_SOURCE") || expr.contains("__file__"))
}

/// Whether `prefix` (the text before `/..`) names the file's own directory.
fn anchored(prefix: &str, file_text: &str) -> bool {
    if prefix.ends_with(')') {
        return substitution_before(prefix).is_some_and(is_own_dir);
    }
    let var = regex::Regex::new(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$").unwrap();
    let Some(name) = var.captures(prefix).map(|c| c[1].to_string()) else {
        return false;
    };
    let assignment = regex::Regex::new(&format!(
        r"(?m)^\s*(?:local\s+|export\s+|readonly\s+)?{name}=(.*)$"
    ))
    .unwrap();
    assignment
        .captures_iter(file_text)
        .any(|c| is_own_dir(&c[1]))
}

/// The `..` paths on `line` of `path` that leave the repository or are not
/// anchored to the file's directory: (1-based column, why).
fn escapes(path: &str, file_text: &str, line: &str) -> Vec<(usize, String)> {
    let bytes = line.as_bytes();
    let depth = Path::new(path)
        .parent()
        .map_or(0, |p| p.components().count());
    let mut found = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        let starts = &bytes[i..i + 2] == b"..";
        if !starts || (i > 0 && path_char(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        let mut ups = 0;
        while bytes[j..].starts_with(b"..") {
            ups += 1;
            j += 2;
            if bytes[j..].starts_with(b"/..") {
                j += 1;
            } else {
                break;
            }
        }
        if j < bytes.len() && path_char(bytes[j]) {
            i = j;
            continue;
        }
        let why = if i > 0 && bytes[i - 1] == b'/' && anchored(&line[..i - 1], file_text) {
            (ups > depth).then(|| {
                format!("climbs {ups} levels from {path}'s directory, above the repository root")
            })
        } else {
            Some("`..` not anchored to the file's own directory (`$(dirname \"$0\")/..`): a path outside the repository".to_string())
        };
        if let Some(why) = why {
            found.push((i + 1, why));
        }
        i = j;
    }
    found
}

#[test]
fn no_file_of_the_repository_names_a_path_outside_it() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("git")
        .args(["grep", "--untracked", "-I", "-n", "-z", "-E"])
        .arg(r"(^|[^.A-Za-z0-9_])\.\.($|[^.A-Za-z0-9_])")
        .arg("--")
        .args(PATHSPEC)
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "this test reads the repository's files with `git grep`; run it in a git checkout: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut hits = 0;
    for record in stdout.lines() {
        let mut fields = record.splitn(3, '\0');
        let (path, lineno, line) = (
            fields.next().unwrap(),
            fields.next().unwrap(),
            fields.next().unwrap(),
        );
        hits += 1;
        let text = texts
            .entry(path.to_string())
            .or_insert_with(|| std::fs::read_to_string(Path::new(root).join(path)).unwrap());
        for (col, why) in escapes(path, text, line) {
            problems.push(format!("{path}:{lineno}:{col}: {} ({why})", line.trim()));
        }
    }
    // The scripts that find the repository root from their own place are
    // seen, so the search itself works.
    assert!(
        hits >= 3,
        "git grep found only {hits} `..` paths:\n{stdout}"
    );
    assert!(
        problems.is_empty(),
        "paths outside the repository:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_rule_allows_only_paths_anchored_inside_the_repository() {
    // (file, its text, the 1-based columns reported)
    let cases: &[(&str, &str, &[usize])] = &[
        // Anchored to the script's own directory and staying inside.
        ("tests/corpus/run.sh", r#"cd "$(dirname "$0")/../..""#, &[]),
        (".ci/run", r#"cd "$(dirname "$0")/..""#, &[]),
        (
            "tests/packaging/run.sh",
            r#"ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"#,
            &[],
        ),
        (
            "tests/torch/run.sh",
            "HERE=\"$(cd \"$(dirname \"$0\")\" && pwd)\"\nROOT=\"$(cd \"$HERE/../..\" && pwd)\"",
            &[],
        ),
        // Not paths: ranges, ellipses, relative imports, dotted names.
        (
            "README.md",
            "HEAD..main, 0..n, `...`, `..utils`, a...b, x..y",
            &[],
        ),
        // Outside the repository.
        ("README.md", "from `../shared/bench/make-corpus.sh`", &[7]),
        (
            "bench/run.sh",
            "M=${M:-$REPO/../shared/bench/make-corpus.sh}",
            &[14],
        ),
        (
            "tests/corpus/run.sh",
            r#"for c in "$top/../shared"; do"#,
            &[16],
        ),
        (
            "tests/corpus/run.sh",
            r#"cd "$(dirname "$0")/../../..""#,
            &[21],
        ),
        ("tests/x.py", r#"ROOT = os.path.join(HERE, "..")"#, &[28]),
        ("tests/x.sh", "cd ..", &[4]),
        ("tests/x.sh", "cat ../x ../../y", &[5, 10]),
        // A variable or command that is not the file's own directory.
        ("tests/x/run.sh", "DIR=$PWD\ncd \"$DIR/..\"", &[10]),
        ("tests/x/run.sh", "cd \"$(pwd)/..\"", &[12]),
    ];
    for (path, text, want) in cases {
        let got: Vec<usize> = text
            .lines()
            .flat_map(|line| escapes(path, text, line))
            .map(|(col, _)| col)
            .collect();
        assert_eq!(&got, want, "{path}: {text}");
    }
}
