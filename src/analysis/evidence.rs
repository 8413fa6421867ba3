//! A sign of work in one function's own body, as a hook candidate carries
//! it: counted, or discounted with a reason a user can check. Signs are
//! read and judged by [`crate::analysis::effects`]; this is the plain data
//! the matcher hands on.

use serde::Serialize;

/// One sign found in a function's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sign {
    /// `move`, `cast`, `swap`, `storage`, `copy`, `collective`, `wait`,
    /// `stream`, `sync`, `rng` or `delegate` (see
    /// [`crate::analysis::effects::local::Kind`]).
    pub kind: &'static str,
    /// What it does, in words: `moves module state via .to(...)`.
    pub detail: String,
    /// 1-based line of the sign.
    pub line: usize,
    /// Why it does not count as offload work, when it does not.
    pub discounted: Option<String>,
}

impl Sign {
    pub fn counts(&self) -> bool {
        self.discounted.is_none()
    }
}
