//! hookfence: find PyTorch offload hooks in a Python tree and fence them from
//! `torch.compile` with `@torch.compiler.disable()`.
//!
//! Stages, arrows one way: [`discover`] (walk paths) -> [`source`] (bytes,
//! encoding, BOM) -> [`parse`] (CPython's tokenizer rules, tree-sitter) ->
//! [`queries`] (compiled `.scm`) and [`syntax`] (questions about nodes) ->
//! [`analysis`] (per-file facts, the project, hooks found by use, evidence,
//! the verdict; see its files' order there) -> [`plan`] (edits, pure) ->
//! [`edit`] (apply) -> [`render`] (diff, notes, summary) / [`write`](mod@write) (atomic).
//! [`pipeline`] drives those stages over a run's files and [`run`](mod@run)
//! does what the command line asks with the result; this file holds the
//! crate's public surface only.

pub mod analysis;
pub mod aside;
pub mod cli;
pub mod config;
pub mod confine;
pub mod cpython_codecs;
pub mod discover;
pub mod edit;
pub mod error;
pub mod exit;
pub mod found;
pub mod guard;
pub mod interrupt;
pub mod lexical;
pub mod options;
pub mod parse;
pub mod pipeline;
pub mod plan;
pub mod pyrules;
pub mod queries;
pub mod render;
pub mod report;
pub mod results;
pub mod review;
pub mod run;
pub mod source;
pub mod syntax;
pub mod vcs;
pub mod wrap;
pub mod write;

pub use confine::project_root_of;
pub use options::{Mode, Options};
pub use pipeline::{analyze, analyze_source};
pub use results::{Analysis, FileReport, NewFile};
pub use run::run;
