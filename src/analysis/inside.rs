//! What runs inside a step: the functions on the chains of the effects a
//! step counts are found `inside` it, and are `covered` where every step
//! they were found inside is fenced (see `ProjectIndex::covering_inside`).

use std::sync::Arc;

use crate::analysis::effects::record::StepEvidence;
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::found::{Discovered, Found};

impl ProjectIndex<'_> {
    /// The functions on the evidence chain of `step` (the last evidence
    /// kept for it): each runs only where the step calls it, inside the
    /// step's fence, so it is found `inside` the step (status `covered` where
    /// that is the only way it is found and the step is fenced; see
    /// `ProjectIndex::covering_inside`). Its evidence is the chain's rest. A
    /// function its authors fenced ends the walk; compute on the way is left
    /// out (no fence is asked of it).
    pub(super) fn inside_step(
        &self,
        step: &FunctionRef,
        others: &[crate::analysis::effects::record::Effect],
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let Some((_, evidence, _)) = evidence_found.last() else {
            return;
        };
        let evidence = evidence.clone();
        let fact = &step.0.functions[step.1];
        let mut inside: Vec<(FunctionRef, crate::analysis::effects::record::Effect)> = Vec::new();
        // The chain of every effect the step counts, its evidence first: a
        // function on any of them runs there.
        for effect in std::iter::once(&evidence).chain(others) {
            let mut length = effect.length;
            let mut link = effect.chain.clone();
            while let Some(at) = link {
                if at.step.fenced.is_some() {
                    break;
                }
                length = length.saturating_sub(1);
                let found = self.load(&at.step.path).and_then(|module| {
                    let index = module
                        .functions
                        .iter()
                        .position(|f| f.line == at.step.line && f.qualname == at.step.qualname)?;
                    Some((module, index))
                });
                if let Some(function) = found.filter(|f| !self.runs_compute(f))
                    && !inside
                        .iter()
                        .any(|(f, _)| Arc::ptr_eq(&f.0, &function.0) && f.1 == function.1)
                {
                    let rest = crate::analysis::effects::record::Effect {
                        chain: at.next.clone(),
                        length,
                        ..effect.clone()
                    };
                    inside.push((function, rest));
                }
                link = at.next.clone();
            }
        }
        for (function, rest) in inside {
            let why = Found {
                how: "inside",
                detail: format!(
                    "reached from the step {} ({}:{})",
                    fact.qualname,
                    step.0.path.display(),
                    fact.line
                ),
                path: step.0.path.clone(),
                line: fact.line,
                backward: None,
            };
            discovered.add_function(&function.0, function.1, &why);
            discovered.add_inside(&function.0, function.1, &step.0, step.1);
            evidence_found.push((
                (
                    crate::found::identity(&function.0.path),
                    function.0.functions[function.1].start,
                ),
                rest,
                true,
            ));
        }
    }
}
