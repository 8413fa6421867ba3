//! Effects: what each function does to module state, read once from its
//! body ([`local`]), summarised once over the project's call graph
//! ([`summary`]) and judged where a hook runs ([`judge`]), with the models
//! of library code the project calls ([`models`]) and the values followed
//! through a function ([`value`]).
//!
//! Arrows one way: `value` <- `models` <- `local` (per-file facts, built
//! while the tree is at hand) <- `record` (what a summary holds) <- the
//! project <- `dispatch` (calls through the receiver's class), `resolve`
//! (a function's values in its own terms) <- `summary` (the components) <-
//! `judge` (a hook's summary where torch runs it) <- `release` (copies of
//! module state an object keeps, dropped by a hook).

pub mod dispatch;
pub mod judge;
pub mod local;
pub mod models;
pub mod record;
pub mod release;
pub mod resolve;
pub mod summary;
pub mod value;

#[cfg(test)]
mod tests;
