//! Exit codes, stable for scripts and CI.

/// Nothing to fence (or, without `--check`, the run went fine).
pub const SUCCESS: i32 = 0;
/// `--check` found offload hooks without a fence.
pub const UNFENCED: i32 = 1;
/// Some file could not be read, decoded, parsed or written, or the
/// command line was wrong.
pub const ERROR: i32 = 2;
