//! Copies dropped: a hook that drops what an attribute of its object keeps
//! (`del self.gathered[m]`, `self.cache.pop(k)`) frees weights only where
//! the class keeps copies of module state there: what a call that gathers,
//! moves or copies module state returned (`out, handle =
//! all_gather(module.weight, async_op=True)`, then `self.gathered[module] =
//! out`). Dropping the last reference frees the gathered full weight, as
//! ZeRO-3 and FSDP-style wrappers release their unsharded parameters after
//! forward. Anything else kept on the object (statistics, handles, records)
//! is its own data. So is a future the object waits on
//! (`self.futures.pop(i).result()`), unless its class keeps there the
//! future of a job that acts on module state (`self.futures[i] =
//! pool.submit(swap_blocks, ...)`): then the wait is for a weight transfer.

use std::sync::Arc;

use crate::analysis::effects::judge::{
    Judged, Role, discount_place, forward_roles, judge, judge_with,
};
use crate::analysis::effects::local::{Acts, Kind};
use crate::analysis::effects::record::{Effect, Summary, Target};
use crate::analysis::effects::resolve::judge_attribute;
use crate::analysis::effects::value::Root;
use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::project::ProjectIndex;
use crate::analysis::reached::Through;

/// Most methods of one class looked at for what they keep.
const MOST_METHODS: usize = 256;

impl ProjectIndex<'_> {
    /// Where `judged` (the hook `function` of `module`, judged on `summary`)
    /// found no weight work: a release of what `self.<attr>` keeps counts
    /// where the hook's class keeps copies of module state there. The
    /// release is then the evidence, and no longer a discount.
    pub(crate) fn released_copies(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        summary: &Summary,
        judged: &mut Judged,
    ) {
        let fact = &module.functions[function];
        if judged.evidence.is_some() || !fact.is_method || fact.static_method {
            return;
        }
        let Some(class) = fact.self_class.as_deref() else {
            return;
        };
        for effect in &summary.effects {
            let Target::Param {
                index: 0,
                attr: Some(attr),
                ..
            } = &effect.target
            else {
                continue;
            };
            if effect.kind != Kind::Release {
                continue;
            }
            let Some(kept) = self.keeps_copies(module, class, attr) else {
                continue;
            };
            let place = format!("{}: ", discount_place(effect, module));
            judged
                .discounted
                .retain(|d| !(d.starts_with(&place) && d.contains(&effect.detail)));
            let mut evidence = effect.clone();
            evidence.detail = format!("{}, where {kept}", effect.detail);
            judged.evidence = Some(evidence);
            return;
        }
    }

    /// Where `judged` (the hook `function` of `module`, judged on `summary`)
    /// found no weight work: a wait on a future that `self.<attr>` keeps
    /// (`self.futures.pop(i).result()`) counts where the hook's class keeps
    /// there the future of a job that acts on module state
    /// (`self.futures[i] = pool.submit(swap_blocks, ...)`): the hook waits
    /// for that weight transfer. The wait is then the evidence.
    pub(crate) fn awaited_jobs(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        summary: &Summary,
        judged: &mut Judged,
    ) {
        if judged.evidence.is_some() {
            return;
        }
        let Some(evidence) = self
            .awaited_job(module, function, summary)
            .or_else(|| self.awaited_job_on_the_way(summary))
        else {
            return;
        };
        let place = format!("{}: ", discount_place(&evidence, module));
        judged
            .discounted
            .retain(|d| !(d.starts_with(&place) && d.contains("via .result()")));
        judged.evidence = Some(evidence);
    }

    /// A wait in `summary` on a future kept by an object the hook reaches
    /// through calls (`self.swapper.await_block(i)`, where the swapper's
    /// class keeps the futures): asked of each function on the wait's chain,
    /// in that function's own terms. The hook's effect, with the reason
    /// found there.
    fn awaited_job_on_the_way(&self, summary: &Summary) -> Option<Effect> {
        summary
            .effects
            .iter()
            .filter(|effect| effect.acts == Acts::Job)
            .find_map(|effect| {
                effect.steps().iter().find_map(|step| {
                    let (module, index) = self.function_of_step(step)?;
                    let own = self.summary(&(Arc::clone(&module), index));
                    let found = self.awaited_job(&module, index, &own)?;
                    let reason = found.detail.split_once(", where ")?.1.to_owned();
                    let mut evidence = effect.clone();
                    evidence.detail = format!("{}, where {reason}", effect.detail);
                    Some(evidence)
                })
            })
    }

    /// The first wait in `summary` (of `function` of `module`) on a future
    /// that `self.<attr>` keeps where the function's class keeps there the
    /// future of a job that acts on module state, said with that reason.
    pub(crate) fn awaited_job(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        summary: &Summary,
    ) -> Option<Effect> {
        let fact = &module.functions[function];
        if !fact.is_method || fact.static_method {
            return None;
        }
        let class = fact.self_class.as_deref()?;
        summary.effects.iter().find_map(|effect| {
            let Target::Param {
                index: 0,
                attr: Some(attr),
                ..
            } = &effect.target
            else {
                return None;
            };
            if effect.acts != Acts::Job {
                return None;
            }
            let kept = self.keeps_jobs(module, class, attr)?;
            let mut evidence = effect.clone();
            evidence.detail = format!("{}, where {kept}", effect.detail);
            Some(evidence)
        })
    }

    /// Where a method of `class` (of `module`) stores into `self.<attr>`
    /// (or its items) the future an executor's `submit(job, ...)` returned
    /// for a job that gathers, moves or copies module state, as the
    /// method's own judge reads it: said in words.
    ///
    /// The class's bases (followed across files) are asked too: a base
    /// class often submits the jobs its subclasses wait for.
    fn keeps_jobs(&self, module: &Arc<ModuleFacts>, class: &str, attr: &str) -> Option<String> {
        let mut pending: std::collections::VecDeque<(Arc<ModuleFacts>, String)> =
            std::collections::VecDeque::from([(Arc::clone(module), class.to_owned())]);
        let mut seen: std::collections::HashSet<(std::path::PathBuf, String)> =
            std::collections::HashSet::new();
        while let Some((at, name)) = pending.pop_front() {
            if seen.len() >= MOST_METHODS || !seen.insert((at.path.clone(), name.clone())) {
                continue;
            }
            let Some(facts) = at.classes.get(&name) else {
                continue;
            };
            if let Some(kept) = self.keeps_jobs_in(&at, facts, attr) {
                return Some(kept);
            }
            for base in &facts.bases {
                pending.extend(self.classes_named(&at, base));
            }
        }
        None
    }

    /// The roles of the parameters of `method` (of a class) where it
    /// submits a job whose future it keeps: `self` is the object; any other
    /// parameter is the module where some call in the project passes
    /// module state there (a model's forward handing its blocks to the
    /// swapper, `offloader.submit_move_blocks(self.blocks, i)`, through
    /// helpers), else an activation (an input batch copied to the device
    /// on a worker thread is no weight work).
    fn submitter_roles(&self, module: &Arc<ModuleFacts>, method: usize) -> Vec<Role> {
        let fact = &module.functions[method];
        let at = (Arc::clone(module), method);
        forward_roles(fact)
            .into_iter()
            .enumerate()
            .map(|(k, role)| match role {
                Role::Activation if self.passes_module_state(&at, k) => Role::Module,
                role => role,
            })
            .collect()
    }

    /// [`ProjectIndex::keeps_jobs`] of the methods of one class.
    fn keeps_jobs_in(
        &self,
        module: &Arc<ModuleFacts>,
        facts: &crate::analysis::module_facts::ClassFacts,
        attr: &str,
    ) -> Option<String> {
        facts.methods.iter().take(MOST_METHODS).find_map(|&method| {
            let line = self.keeps_what_a_call_returned(
                module,
                method,
                attr,
                |through| {
                    matches!(
                        through,
                        Some(Through::HandedTo(to)) if to == "submit" || to.ends_with(".submit")
                    )
                },
                &[
                    Kind::Collective,
                    Kind::Move,
                    Kind::CopyIn,
                    Kind::Swap,
                    Kind::Storage,
                ],
                true,
            )?;
            Some(format!(
                "{} keeps there the future of a job that acts on module state (line {line})",
                module.functions[method].qualname
            ))
        })
    }

    /// Where `method` of `module` stores into `self.<attr>` (or its items)
    /// what one of its calls returned, the call taken by `call_taken` (by
    /// how it reaches its callee), and that callee does one of `kinds` to
    /// module state as the method's own judge reads it: the call's line.
    fn keeps_what_a_call_returned(
        &self,
        module: &Arc<ModuleFacts>,
        method: usize,
        attr: &str,
        call_taken: impl Fn(Option<&Through>) -> bool,
        kinds: &[Kind],
        by_callers: bool,
    ) -> Option<usize> {
        let fact = &module.functions[method];
        // `by_callers`: what acts in place (a module moved as a statement,
        // storage swapped) changes module state whatever the method is
        // handed, and is judged as before; a copy whose value is used
        // (`return batch.to(d)`) is weight work only where the method's
        // callers hand it module state (see
        // [`ProjectIndex::submitter_roles`]).
        let roles = std::cell::OnceCell::new();
        let judged = |mapped: &Summary| -> Judged {
            if !by_callers {
                return judge(mapped, module, fact);
            }
            let mut in_place = mapped.clone();
            in_place.effects.retain(|e| e.acts != Acts::Rebound);
            let judged = judge(&in_place, module, fact);
            if judged.evidence.is_some() {
                return judged;
            }
            let mut copies = mapped.clone();
            copies.effects.retain(|e| e.acts == Acts::Rebound);
            judge_with(
                &copies,
                module,
                fact,
                roles.get_or_init(|| self.submitter_roles(module, method)),
            )
        };
        let returned: Vec<usize> = fact
            .local
            .self_stores
            .iter()
            .filter(|s| &*s.attr == attr)
            .flat_map(|s| s.vals.iter())
            .filter_map(|v| match v.root {
                Root::Returned(start) if v.attr.is_none() => Some(start),
                _ => None,
            })
            .collect();
        if returned.is_empty() {
            return None;
        }
        let at = (Arc::clone(module), method);
        let caller = self.caller(&at);
        for (i, call) in fact.calls.iter().enumerate() {
            if !call_taken(call.through.as_ref()) || !returned.contains(&call.start) {
                continue;
            }
            for callee in caller.callees(i) {
                let mut mapped = self.effects_at_call(&caller, i, callee);
                mapped.effects.retain(|e| kinds.contains(&e.kind));
                if !mapped.effects.is_empty() && judged(&mapped).evidence.is_some() {
                    return Some(call.line);
                }
            }
        }
        None
    }

    /// Where a method of `class` (of `module`) stores into `self.<attr>`
    /// (or its items) a copy of module state moved to a device, or what a
    /// call returned that gathers, moves or copies module state, as the
    /// method's own judge reads it: said in words.
    fn keeps_copies(&self, module: &Arc<ModuleFacts>, class: &str, attr: &str) -> Option<String> {
        let facts = module.classes.get(class)?;
        for &method in facts.methods.iter().take(MOST_METHODS) {
            let fact = &module.functions[method];
            // `self.x[k] = block.weight.to("cuda")`: a moved copy.
            let moved = fact
                .local
                .self_stores
                .iter()
                .filter(|s| &*s.attr == attr)
                .flat_map(|s| s.vals.iter())
                .any(|v| {
                    let Root::Param(index) = v.root else {
                        return false;
                    };
                    if !v.copied.is_some_and(|c| c.device || c.pinned) {
                        return false;
                    }
                    let mut target = Target::Param {
                        index,
                        attr: v.attr.clone(),
                        judged: false,
                        shape: v.shape,
                    };
                    if !judge_attribute(&mut target, module, fact) {
                        return false;
                    }
                    let copy = Summary {
                        effects: vec![Effect {
                            kind: Kind::Move,
                            target,
                            detail: String::new(),
                            via: None,
                            path: module.path.clone(),
                            line: fact.line,
                            chain: None,
                            length: 0,
                            acts: Acts::Tensor,
                            measured: false,
                        }],
                        ..Summary::default()
                    };
                    judge(&copy, module, fact).evidence.is_some()
                });
            if moved {
                return Some(format!(
                    "{} keeps moved copies of module state there",
                    fact.qualname
                ));
            }
            if let Some(line) = self.keeps_what_a_call_returned(
                module,
                method,
                attr,
                |through| through.is_none(),
                &[Kind::Collective, Kind::Move, Kind::CopyIn],
                false,
            ) {
                return Some(format!(
                    "{} keeps there what a call that gathers, moves or copies module state returned (line {line})",
                    fact.qualname
                ));
            }
        }
        None
    }
}
