//! The analysis: from one file's text to a verdict on each hook site.
//!
//! Its files, in the one direction they depend on each other (a file uses
//! only those above it, and the syntax layer below the folder: `parse`,
//! `queries`, `syntax`, `pyrules`, `source`):
//!
//! - [`in_place_moves`]: whether a file's text may move a module in place,
//!   read before it is parsed (a sign the prefilter asks for);
//! - [`leaf_layers`]: torch's weight-holding layers by name, and whether a
//!   file's text may subclass one (another sign the prefilter asks for);
//! - [`prefilter`]: the names a file must spell to matter, searched in its bytes;
//! - [`unparsed`]: what the prefilter keeps of a file it does not parse;
//! - [`vocabulary`]: what the tool knows by name (hook methods, registrars,
//!   protocol bases, fence spellings) and the queries compiled from it;
//! - [`shadow`]: the text tree-sitter must read where CPython reads names
//!   otherwise (NFKC, joined lines);
//! - [`scope`]: one file's scopes and bindings, and questions about them;
//! - [`scope_builder`]: builds that model in one walk of the file's tree;
//! - [`arguments`]: what a sign's receiver and arguments are (device, dtype,
//!   module state, an activation passed on, a copy aside);
//! - [`effects`]: what each function does to module state: read from its body
//!   (`effects::local`, with the library models), summarised over the call
//!   graph (`effects::summary`, above [`project`]) and judged at a hook
//!   (`effects::judge`);
//! - [`evidence`]: the offload signs in a function's own body, judged;
//! - [`file_facts`]: what the matcher hands on for one file (plain data);
//! - [`fences`]: what fences a function in one file, and what its names mean;
//! - [`hook_values`]: what a register call hands over, followed to definitions;
//! - [`matcher`]: one file's hook candidates, classes and fences;
//! - [`reached`]: how a function is reached when no call of it is written;
//! - [`listings`]: what the directories of a run hold, each read once;
//! - [`module_names`]: Python's names for files (modules, packages, roots);
//! - [`function_facts`]: one function's facts (calls, returns, decorators,
//!   its own effects);
//! - [`installs`]: what a module installs on modules at run time (forward
//!   replacements, swapped classes, registrations);
//! - [`module_facts`]: one module's facts for the project, gathered once;
//! - [`project`]: every module's facts linked by name: what a call reaches,
//!   with modules read on demand;
//! - [`lineage`]: whether a class may be an `nn.Module`, by its bases;
//! - [`fence_imports`]: fences another module of the project defines;
//! - [`chain`]: evidence through calls, from a hook to offload work;
//! - [`discovery`]: hooks found by use (forward wrappers, register calls);
//! - [`compute`]: what runs a model's compute (never fenced itself);
//! - [`layer_transfer`]: a leaf layer whose forward brings its own weight in
//!   for each call, the fence point of that one layer;
//! - [`roots`], [`inside`]: the steps a forward calls, and what runs inside
//!   each step (covered where the step is fenced);
//! - [`verdict`]: each hook site's status, reason and evidence.
//!
//! Above the folder, `plan` turns verdicts into edits.

/// A map asked on every call a summary resolves (by path, name or
/// address): hashed with foldhash, not SipHash (a path's bytes hashed with
/// SipHash cost more than the look-up); none of these maps is iterated
/// where its order could reach an answer.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The set of [`FastMap`]'s kind.
pub(crate) type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

pub mod annotated;
pub mod applied;
pub mod arguments;
pub mod bound;
pub mod chain;
pub mod compile_decorators;
pub mod compute;
pub mod discovery;
pub mod effects;
pub mod evidence;
pub mod fence_imports;
pub mod fences;
pub mod file_facts;
pub mod function_facts;
pub mod function_values;
pub mod hook_values;
pub mod in_place_moves;
pub mod inline_work;
pub mod inside;
pub mod installs;
pub mod layer_transfer;
pub mod leaf_layers;
pub mod lineage;
pub mod listings;
pub mod matcher;
pub mod module_cache;
pub mod module_facts;
pub mod module_finder;
pub mod module_names;
pub mod neighbourhood;
pub mod passed;
pub mod prefilter;
pub mod project;
pub mod reached;
pub mod roots;
pub mod scope;
pub mod scope_builder;
pub mod shadow;
pub mod swapped;
pub mod unparsed;
pub mod verdict;
pub mod vocabulary;
