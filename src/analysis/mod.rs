//! The analysis: from one file's text to a verdict on each hook site.
//!
//! Its files, in the one direction they depend on each other (a file uses
//! only those above it, and the syntax layer below the folder: `parse`,
//! `queries`, `syntax`, `pyrules`, `source`):
//!
//! - [`prefilter`]: the names a file must spell to matter, searched in its bytes;
//! - [`vocabulary`]: what the tool knows by name (hook methods, registrars,
//!   protocol bases, fence spellings) and the queries compiled from it;
//! - [`shadow`]: the text tree-sitter must read where CPython reads names
//!   otherwise (NFKC, joined lines);
//! - [`scope`]: one file's scopes and bindings;
//! - [`evidence`]: the offload signs in a function's own body;
//! - [`matcher`]: one file's hook candidates, classes, bindings and fences;
//! - [`index`]: every module's facts linked into a project: imports, calls,
//!   hooks found by use, evidence chains through calls;
//! - [`verdict`]: each hook site's status, reason and evidence.
//!
//! Above the folder, `plan` turns verdicts into edits.

pub mod evidence;
pub mod index;
pub mod matcher;
pub mod prefilter;
pub mod scope;
pub mod shadow;
pub mod verdict;
pub mod vocabulary;
