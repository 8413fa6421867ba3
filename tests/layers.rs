//! The shape of `src/`: modules depend on each other one way (no import
//! cycle, not even through the crate root's re-exports), and no source file
//! grows past [`MOST_LINES`] lines.
//!
//! Module references are read from the source text: every `crate::a::b`
//! path, every `use crate::{...}` tree, every `super::x`, each taken to the
//! longest module it names (the crate root, `lib.rs`, for an item it
//! re-exports). Comments, strings and `#[cfg(test)]` modules are left out:
//! a test may use any module as an oracle.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The most lines a source file may have.
const MOST_LINES: usize = 800;

/// The crate root's name in the graph.
const ROOT: &str = "crate";

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` is the root;
/// `src/main.rs` (the binary) is no module of the library.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [only] if only == "main" => None,
        [only] if only == "lib" => Some(ROOT.to_owned()),
        _ => Some(parts.join("::")),
    }
}

/// The code of a Rust source: comments and string literals blanked, and
/// everything from a `#[cfg(test)]` module on dropped.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            // A char literal (`'"'`, `'\''`), not a lifetime (`'t`).
            b'\'' if bytes.get(i + 2) == Some(&b'\'') => {
                i += 3;
                out.push_str("' '");
            }
            b'\'' if bytes.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < bytes.len() && bytes[i] != b'\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            }
            _ => {
                let c = text[i..].chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c == '_' || c.is_ascii_alphanumeric()
}

/// The paths a `use` tree names, from just after `prefix::`: `{a, b::{c, d}}`
/// or `a::b`, each as its segments after `prefix`.
fn use_tree(text: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    use_tree(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        use_tree(&inner[start..], prefix, out);
        return;
    }
    if text.is_empty() {
        return;
    }
    match text.find("::") {
        Some(at) if !text[..at].contains('{') => {
            let mut longer = prefix.to_vec();
            longer.push(text[..at].trim().to_owned());
            use_tree(&text[at + 2..], &longer, out);
        }
        _ => {
            let name = text.split_whitespace().next().unwrap_or_default();
            let mut path = prefix.to_vec();
            if name != "self" && name != "*" {
                path.push(name.to_owned());
            }
            out.push(path);
        }
    }
}

/// Every module path `code` names from module `me`: with `crate::`, with
/// `super::`, or with the name of one of its own child modules (`use
/// a::Thing` in the root), each maybe a `use` tree (`crate::{a, b::{c, d}}`).
fn named_paths(code: &str, me: &str, modules: &BTreeSet<String>) -> Vec<Vec<String>> {
    let own: Vec<String> = match me {
        ROOT => Vec::new(),
        _ => me.split("::").map(str::to_owned).collect(),
    };
    let parent: Vec<String> = own[..own.len().saturating_sub(1)].to_vec();
    let mut starts: Vec<(String, Vec<String>)> = vec![
        ("crate::".to_owned(), Vec::new()),
        ("super::".to_owned(), parent),
    ];
    // A child module named bare (`rounds::x` in `pipeline`, `a::T` in the root).
    for module in modules {
        let parts: Vec<&str> = module.split("::").collect();
        if parts.len() == own.len() + 1 && parts[..own.len()] == own[..] {
            starts.push((format!("{}::", parts[own.len()]), own.clone()));
        }
    }
    let mut out = Vec::new();
    for (keyword, base) in starts {
        let keyword = keyword.as_str();
        let child = !matches!(keyword, "crate::" | "super::");
        let mut from = 0;
        while let Some(found) = code[from..].find(keyword) {
            let at = from + found;
            from = at + keyword.len();
            let before = code[..at].trim_end();
            if at > 0 && code[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            // `x::a::` is a path through `x`, not this module's child `a`.
            if child && before.ends_with("::") {
                continue;
            }
            let base = if child {
                let mut named = base.clone();
                named.push(keyword.trim_end_matches(':').to_owned());
                named
            } else {
                base.clone()
            };
            let rest = &code[from..];
            if rest.starts_with('{') {
                let end = matching_brace(rest);
                use_tree(&rest[..end], &base, &mut out);
                continue;
            }
            // A plain path: segments while they are `name::`, the last one
            // maybe a braced tree.
            let mut path = base.clone();
            let mut tail = rest;
            loop {
                let len = tail.chars().take_while(|&c| is_ident(c)).count();
                if len == 0 {
                    break;
                }
                path.push(tail[..len].to_owned());
                tail = &tail[len..];
                match tail.strip_prefix("::") {
                    Some(next) if next.starts_with('{') => {
                        let end = matching_brace(next);
                        use_tree(&next[..end], &path, &mut out);
                        path.clear();
                        break;
                    }
                    Some(next) => tail = next,
                    None => break,
                }
            }
            if !path.is_empty() {
                out.push(path);
            }
        }
    }
    out
}

fn matching_brace(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// The longest known module `path` names; the root for an item of the root.
fn module_named(path: &[String], modules: &BTreeSet<String>) -> String {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| modules.contains(m))
        .unwrap_or_else(|| ROOT.to_owned())
}

/// Each module with the modules it names, and one spelling per edge.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn graph_of(src: &Path) -> Graph {
    let mut files = Vec::new();
    source_files(src, &mut files);
    let sources: Vec<(String, String)> = files
        .iter()
        .filter_map(|f| Some((module_of(src, f)?, std::fs::read_to_string(f).unwrap())))
        .collect();
    let modules: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = Graph::new();
    for (me, text) in &sources {
        let edges = graph.entry(me.clone()).or_default();
        for path in named_paths(&code_of(text), me, &modules) {
            let to = module_named(&path, &modules);
            // A module naming its own items, or a parent naming a child it
            // declares (`pub mod x;` is no use of `x`), is no edge.
            if &to != me {
                edges.entry(to).or_insert_with(|| path.join("::"));
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    // Kosaraju: finishing order on the graph, then components on its reverse.
    let nodes: Vec<&String> = graph.keys().collect();
    let successors = |n: &String| -> Vec<String> {
        graph
            .get(n)
            .map(|e| e.keys().cloned().collect())
            .unwrap_or_default()
    };
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for &start in &nodes {
        if !seen.insert(start.clone()) {
            continue;
        }
        // Each frame: a node and the successors still to visit.
        let mut stack = vec![(start.clone(), successors(start))];
        while let Some((node, rest)) = stack.last_mut() {
            match rest.pop() {
                Some(next) => {
                    if seen.insert(next.clone()) {
                        let more = successors(&next);
                        stack.push((next, more));
                    }
                }
                None => {
                    order.push(node.clone());
                    stack.pop();
                }
            }
        }
    }
    let mut reverse: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (from, edges) in graph {
        for to in edges.keys() {
            reverse.entry(to).or_default().push(from);
        }
    }
    let mut assigned = BTreeSet::new();
    let mut components = Vec::new();
    for node in order.iter().rev() {
        if !assigned.insert(node.clone()) {
            continue;
        }
        let mut component = vec![node.clone()];
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            for &prev in reverse.get(n).into_iter().flatten() {
                if assigned.insert(prev.clone()) {
                    component.push(prev.clone());
                    stack.push(prev);
                }
            }
        }
        if component.len() > 1 {
            component.sort();
            components.push(component);
        }
    }
    components
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn modules_depend_on_each_other_one_way() {
    let graph = graph_of(&src());
    assert!(
        graph.contains_key("analysis::matcher"),
        "{:?}",
        graph.keys()
    );
    let found = cycles(&graph);
    let mut report = String::new();
    for component in &found {
        report.push_str(&format!("cycle: {}\n", component.join(", ")));
        for from in component {
            for (to, spelling) in &graph[from] {
                if component.contains(to) {
                    report.push_str(&format!("  {from} -> {to} (`{spelling}`)\n"));
                }
            }
        }
    }
    assert!(found.is_empty(), "{report}");
}

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let mut files = Vec::new();
    source_files(&src(), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, lines)| *lines > MOST_LINES)
        .map(|(f, lines)| format!("{}: {lines} lines", f.display()))
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "over {MOST_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_reader_sees_every_way_a_module_is_named_and_a_cycle_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("layer")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod layer;\npub use a::Thing;\n",
    );
    // `a` names `b` only in a comment, a string and its tests: no edge.
    write(
        "a.rs",
        "// crate::b::x\npub struct Thing;\nconst S: &str = \"crate::b::y\";\n\
         #[cfg(test)]\nmod tests {\n    use crate::b::Other;\n}\n",
    );
    write(
        "b.rs",
        "use crate::{layer::{low, high::Up}};\npub struct Other;\n",
    );
    write("layer/mod.rs", "pub mod high;\npub mod low;\n");
    write("layer/low.rs", "pub fn f() {}\n");
    // `high` names the root's re-export of `a`'s item, and `low` by super.
    write(
        "layer/high.rs",
        "use super::low::f;\npub fn g() -> crate::Thing { crate::Thing }\n",
    );
    let graph = graph_of(&src);
    let edges = |m: &str| graph[m].keys().cloned().collect::<Vec<_>>();
    assert_eq!(edges("a"), Vec::<String>::new());
    assert_eq!(edges("b"), ["layer::high", "layer::low"]);
    assert_eq!(edges("layer::high"), ["crate", "layer::low"]);
    assert_eq!(edges("crate"), ["a"]);
    assert!(cycles(&graph).is_empty());
    // `a` naming `layer::high` closes a cycle through the root's re-export.
    write(
        "a.rs",
        "pub struct Thing;\nfn h() { crate::layer::high::g(); }\n",
    );
    let found = cycles(&graph_of(&src));
    assert_eq!(found, [["a", "crate", "layer::high"]]);
}
