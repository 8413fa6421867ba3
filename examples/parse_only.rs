//! The tree-sitter limit for `bench/run.sh`: walk the given paths the way
//! hookfence does (`ignore` defaults, `*.py` only), read every file and parse
//! it with tree-sitter-python on a rayon pool (one thread per core, or
//! `RAYON_NUM_THREADS`). No queries, no decoding, no output but a count.
//!
//! Usage: `cargo run --release --example parse_only -- PATH...`
//! Prints `files=N bytes=B syntax_errors=E`; exits 1 if a path cannot be read.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use tree_sitter::Parser;

fn python_files(roots: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for root in roots {
        if root.is_file() {
            files.push(root.clone());
            continue;
        }
        for entry in ignore::WalkBuilder::new(root).build() {
            let entry = entry.with_context(|| format!("walking {}", root.display()))?;
            let is_file = entry.file_type().is_some_and(|t| t.is_file());
            if is_file && entry.path().extension().is_some_and(|e| e == "py") {
                files.push(entry.into_path());
            }
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn new_parser() -> Parser {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .expect("the bundled Python grammar matches the tree-sitter version");
    parser
}

fn main() -> Result<()> {
    let roots: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if roots.is_empty() {
        bail!("usage: parse_only PATH...");
    }
    let files = python_files(&roots)?;
    let bytes = AtomicUsize::new(0);
    let syntax_errors = AtomicUsize::new(0);
    files
        .par_iter()
        .map_init(new_parser, |parser, path| -> Result<()> {
            let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            bytes.fetch_add(raw.len(), Ordering::Relaxed);
            let tree = parser
                .parse(&raw, None)
                .with_context(|| format!("tree-sitter gave up on {}", path.display()))?;
            if tree.root_node().has_error() {
                syntax_errors.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .collect::<Result<()>>()?;
    println!(
        "files={} bytes={} syntax_errors={}",
        files.len(),
        bytes.into_inner(),
        syntax_errors.into_inner()
    );
    Ok(())
}
