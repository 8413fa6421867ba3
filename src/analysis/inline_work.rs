//! A forward that does weight work in its own body. A function installed
//! as a module's forward (`m.forward = f`, `Cls.forward = f`, the `forward`
//! of a class swapped in under a live module) usually hands the weight work
//! to steps it calls, which are fenced on their own (see `roots`). Where
//! the work sits in the installed function's own body instead (`self.to(
//! x.device)` before the original forward runs), no smaller function holds
//! it: the installed forward itself is the fence point. That one module's
//! forward then runs eagerly, and the rest of the model still compiles.
//!
//! A class's own `forward` runs the compute of the model or block it
//! belongs to and is never fenced for work in its body (see `roots`); a
//! function installed as a forward, or swapped in, is per-module plumbing,
//! judged here by what its own body does to module state.

use crate::analysis::effects::judge::{Role, judge_with};
use crate::analysis::effects::local::Kind;
use crate::analysis::effects::record::{StepEvidence, Summary};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::found::{Discovered, Found, identity};

impl ProjectIndex<'_> {
    /// Finds `installed` (a function installed as a forward, its parameters
    /// playing `roles`) as a hook where its own body, not a function it
    /// calls, acts on module state; `why` says where it was installed. Its
    /// evidence is that effect, in the terms of `roles`.
    fn inline_work(
        &self,
        installed: &FunctionRef,
        roles: &[Role],
        why: &Found,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let fact = &installed.0.functions[installed.1];
        if fact.fenced.is_some() {
            return;
        }
        let summary = self.summary(installed);
        let own = Summary {
            effects: summary
                .effects
                .iter()
                .filter(|e| e.chain.is_none() && places_weights(e.kind))
                .cloned()
                .collect(),
            measures: summary.measures,
            ..Default::default()
        };
        if own.effects.is_empty() {
            return;
        }
        let Some(evidence) = judge_with(&own, &installed.0, fact, roles).evidence else {
            return;
        };
        discovered.add_function(&installed.0, installed.1, why);
        evidence_found.push(((identity(&installed.0.path), fact.start), evidence, false));
    }

    /// [`ProjectIndex::inline_work`] for a forward installed by the
    /// statement at `place` (`path:line`), a class swapped in under a live
    /// module where `swapped`: the reason names it.
    pub(super) fn installed_inline_work(
        &self,
        installed: &FunctionRef,
        roles: &[Role],
        (place, swapped): ((&std::path::Path, usize), bool),
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        // The forward of a class swapped in is judged by its body (a
        // quantized `nn.Linear` subclass moving itself). A model's own
        // method put back or put in as its forward (`m.forward =
        // MethodType(Model.forward, m)`, `Model.forward =
        // Model.forward_fast`) runs that model's compute: never fenced for
        // its body (a fence on a method fences every instance of its class).
        let fact = &installed.0.functions[installed.1];
        if !swapped
            && let Some(class) = &fact.self_class
            && fact.is_method
            && (fact.name == "forward"
                || self.may_be_module(
                    &installed.0,
                    class,
                    &mut crate::analysis::lineage::ModuleClasses::new(),
                ))
        {
            return;
        }
        let (how, installed_as) = match swapped {
            true => ("swapped class", "the forward of a class swapped in"),
            false => ("forward replacement", "installed as a forward"),
        };
        let why = Found {
            how,
            detail: format!(
                "{installed_as} at {}:{}, it does weight work in its own body: fenced, that module's forward runs eagerly",
                place.0.display(),
                place.1
            ),
            path: place.0.to_path_buf(),
            line: place.1,
            backward: None,
        };
        self.inline_work(installed, roles, &why, discovered, evidence_found);
    }
}

/// Whether an effect of this kind changes where or how module state is
/// stored: moved, cast, pointed at other storage, freed or allocated,
/// copied into. Collectives, waits, stream work and syncs in an installed
/// forward's own body are not taken for weight work of its own (in a whole
/// model's replaced forward they are most often the activations' own
/// communication: a classifier-free-guidance or sequence-parallel gather
/// into buffers made from the output), and a call of other hooks'
/// `pre_forward` is a step, fenced on its own.
fn places_weights(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Move | Kind::Cast | Kind::Swap | Kind::Storage | Kind::CopyIn
    )
}
