//! What runs inside a step: the functions on the chains of the effects a
//! step counts, and every other function the step reaches that does part
//! of that work, are found `inside` it, and are `covered` where every step
//! they were found inside is fenced (see `ProjectIndex::covering_inside`).

/// Deepest call the walk from a step follows.
const MOST_DEPTH: usize = 8;

/// Most functions the walk from one step looks at.
const MOST_FUNCTIONS: usize = 256;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use crate::analysis::effects::local::Acts;
use crate::analysis::effects::local::Kind;
use crate::analysis::effects::record::Target;
use crate::analysis::effects::record::{Effect, StepEvidence};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::Through;
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
                let found = self.function_of_step(&at.step);
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
        self.sharing_signs(step, &evidence, others, &mut inside);
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

    /// The functions `step` reaches through calls (not past compute or a
    /// function its authors fenced) whose own summary holds a sign the step
    /// counts, the same kind at the same place: each does part of the
    /// step's work where the step calls it (an override of the method the
    /// chain went through, a second helper whose sign ranks behind the
    /// first's). Added to `inside` with that effect as its evidence. A
    /// function the step calls directly is inside it too where what it
    /// does, in the step's terms, is what the step's summary kept from a
    /// counted sign (the same kind, value and way of acting): a summary
    /// keeps one effect of each, so a second helper that moves the same
    /// module state (`shard.drop()` beside `shard.load()`) leaves no sign of
    /// its own there; its own signs count below it in turn.
    fn sharing_signs(
        &self,
        step: &FunctionRef,
        evidence: &Effect,
        others: &[Effect],
        inside: &mut Vec<(FunctionRef, Effect)>,
    ) {
        let signs: HashSet<(&PathBuf, usize, Kind)> = std::iter::once(evidence)
            .chain(others)
            .map(|e| (&e.path, e.line, e.kind))
            .collect();
        // The signs of helpers found inside by what they do in the step's
        // terms (few): they count below them.
        let mut added: Vec<(PathBuf, usize, Kind)> = Vec::new();
        let counted = |added: &[(PathBuf, usize, Kind)], e: &Effect| {
            signs.contains(&(&e.path, e.line, e.kind))
                || added
                    .iter()
                    .any(|(path, line, kind)| *path == e.path && *line == e.line && *kind == e.kind)
        };
        // What the step's own summary kept from a counted sign, in its
        // terms.
        let kept: Vec<(Kind, Target, Acts)> = self
            .summary(step)
            .effects
            .iter()
            .filter(|e| counted(&added, e))
            .map(|e| (e.kind, e.target.clone(), e.acts))
            .collect();
        let key = |f: &FunctionRef| (Arc::as_ptr(&f.0) as usize, f.1);
        let mut seen: HashSet<(usize, usize)> = HashSet::from([key(step)]);
        let mut pending: Vec<(FunctionRef, usize)> = vec![(step.clone(), 0)];
        while let Some((at, depth)) = pending.pop() {
            if depth >= MOST_DEPTH {
                continue;
            }
            let caller = self.caller(&at);
            for (i, call) in at.0.functions[at.1].calls.iter().enumerate() {
                if matches!(call.through, Some(Through::Replayed { .. })) {
                    continue;
                }
                for callee in caller.callees(i) {
                    if seen.len() >= MOST_FUNCTIONS || !seen.insert(key(callee)) {
                        continue;
                    }
                    if callee.0.functions[callee.1].fenced.is_some() || self.runs_compute(callee) {
                        continue;
                    }
                    let summary = self.summary(callee);
                    let shared = summary
                        .effects
                        .iter()
                        .find(|e| counted(&added, e))
                        .cloned()
                        .or_else(|| {
                            (depth == 0 && !kept.is_empty())
                                .then(|| self.effects_at_call(&caller, i, callee))
                                .and_then(|mapped| {
                                    mapped.effects.into_iter().find(|e| {
                                        kept.iter().any(|(kind, target, acts)| {
                                            *kind == e.kind
                                                && *target == e.target
                                                && *acts == e.acts
                                        })
                                    })
                                })
                                .map(|mut effect| {
                                    // Its own signs count below it.
                                    added.push((effect.path.clone(), effect.line, effect.kind));
                                    if let Some(first) = effect.chain.take() {
                                        effect.chain = first.next.clone();
                                        effect.length = effect.length.saturating_sub(1);
                                    }
                                    effect
                                })
                        });
                    if let Some(effect) = shared
                        && !inside
                            .iter()
                            .any(|(f, _)| Arc::ptr_eq(&f.0, &callee.0) && f.1 == callee.1)
                    {
                        inside.push((callee.clone(), effect));
                    }
                    pending.push((callee.clone(), depth + 1));
                }
            }
        }
    }
}
