//! What a registered hook runs later through a custom autograd Function it
//! applies (`discovered_by: applied`).
//!
//! A forward hook that applies a Function to the module's output
//! (`Fn.apply(out)`, `helper(module.pre_bwd_fn.apply, out)`) runs nothing
//! of it yet: `Fn.backward` runs when autograd reaches that output. Dynamo
//! traces a Function's `backward` with its `forward`, so a `backward` that
//! gathers or frees the module's weights there is a hook of its own. The
//! same holds for a function the hook hands to the Function to keep on
//! `ctx` and call at backward time: `forward` saves its parameter
//! (`ctx.pre_backward_function = pre_backward_function`) and `backward`
//! calls it (`ctx.pre_backward_function(ctx.module)`), whether the hook
//! applies the Function itself (`Fn.apply(module, run_later, out)`) or
//! hands both to a helper that does (`helper(module, Fn, run_later, out)`
//! whose body is `functional.apply(module, backward_function, out)`).
//! Such a function is judged as a hook by what it does; where it does
//! weight work, the hook that hands it over carries that evidence too.

use std::sync::Arc;

use crate::analysis::effects::judge::judge;
use crate::analysis::effects::local::{ArgumentAt, CallValues};
use crate::analysis::effects::record::{Effect, Link};
use crate::analysis::effects::value::Root;
use crate::analysis::module_facts::{CallFact, Callee, FunctionFact, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::{Step, Through};
use crate::analysis::roots::StepEvidence;
use crate::found::{Discovered, Found, identity};

impl ProjectIndex<'_> {
    /// The `backward`s of the Functions registered hook `hook` applies, and
    /// the functions it hands them to run at backward time, that do weight
    /// work: hooks found by use. The hook's own evidence, where its body
    /// shows none, is the first such function's.
    pub(super) fn applied_by_hook(
        &self,
        module: &Arc<ModuleFacts>,
        hook: usize,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let function = &module.functions[hook];
        let at = (Arc::clone(module), hook);
        let caller = self.caller(&at);
        for (i, call) in function.calls.iter().enumerate() {
            let applied =
                matches!(&call.through, Some(Through::HandedTo(to)) if to.ends_with(".apply"));
            for target in caller.callees(i) {
                let fact = &target.0.functions[target.1];
                if applied && fact.name == "backward" {
                    let why = self.why_applied(
                        module,
                        function,
                        call,
                        &format!("the backward of {}", class_of(target)),
                        None,
                    );
                    self.keep_if_offload(target, &why, None, discovered, evidence_found);
                    // `Fn.apply(module, run_later, out)`: what it hands
                    // the Function to call at backward time.
                    let values = function.local.call_at(call.start);
                    for (position, attr) in self.relayed(target) {
                        let name = values.and_then(|v| v.name_at(&ArgumentAt::Position(position)));
                        for later in name.map(|n| visible(module, n, hook)).unwrap_or_default() {
                            let why = self.why_applied(
                                module,
                                function,
                                call,
                                &format!("ctx.{attr} of {}.backward", class_of(target)),
                                None,
                            );
                            let to = match &call.through {
                                Some(Through::HandedTo(to)) => Some(to.as_str()),
                                _ => None,
                            };
                            let chain = [step_to(target, call, to), step_to(&later, call, None)];
                            self.keep_if_offload(
                                &later,
                                &why,
                                Some((&at, &chain)),
                                discovered,
                                evidence_found,
                            );
                        }
                    }
                } else if call.through.is_none() {
                    self.relayed_through_helper(&at, call, target, discovered, evidence_found);
                }
            }
        }
    }

    /// `helper(module, Fn, run_later, out)` at `call` of the hook `at`,
    /// where `helper` applies its parameter `Fn` handing on its parameter
    /// `run_later`, which `Fn.backward` calls.
    fn relayed_through_helper(
        &self,
        at: &FunctionRef,
        call: &CallFact,
        helper: &FunctionRef,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let (module, hook) = (&at.0, at.1);
        let function = &module.functions[hook];
        let helper_fact = &helper.0.functions[helper.1];
        let Some(values) = function.local.call_at(call.start) else {
            return;
        };
        for inner in &helper_fact.calls {
            let (
                Some(Through::HandedTo(to)),
                Callee::Method {
                    receiver: Some(receiver),
                    method,
                },
            ) = (&inner.through, &inner.callee)
            else {
                continue;
            };
            if method != "backward" || !to.ends_with(".apply") || receiver.contains('.') {
                continue;
            }
            let Some(class_param) = helper_fact.parameters.iter().position(|p| p == receiver)
            else {
                continue;
            };
            let Some(class) = argument_name(values, call, helper_fact, class_param) else {
                continue;
            };
            let inner_values = helper_fact.local.call_at(inner.start);
            for (class_module, class_name) in self.classes_named(module, class) {
                let backwards = self.method_of(
                    &class_module,
                    &class_name,
                    "backward",
                    &mut std::collections::HashSet::new(),
                );
                for backward in backwards {
                    for (position, attr) in self.relayed(&backward) {
                        // The helper's parameter handed on there, and what
                        // the hook passes for it.
                        let params = inner_values
                            .and_then(|v| v.positional.get(position))
                            .into_iter()
                            .flat_map(|vals| vals.iter())
                            .filter(|v| v.attr.is_none())
                            .filter_map(|v| match v.root {
                                Root::Param(j) => Some(j as usize),
                                _ => None,
                            });
                        for param in params.collect::<Vec<_>>() {
                            let Some(name) = argument_name(values, call, helper_fact, param) else {
                                continue;
                            };
                            for later in visible(module, name, hook) {
                                let why = self.why_applied(
                                    module,
                                    function,
                                    call,
                                    &format!("ctx.{attr} of {class_name}.backward"),
                                    Some(&helper_fact.qualname),
                                );
                                let chain = [
                                    step_to(helper, call, None),
                                    step_to(&backward, inner, Some(to)),
                                    step_to(&later, inner, None),
                                ];
                                self.keep_if_offload(
                                    &later,
                                    &why,
                                    Some((at, &chain)),
                                    discovered,
                                    evidence_found,
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The positions among `Fn.apply`'s arguments of the functions
    /// `backward` (a Function's) calls at backward time: its `forward`
    /// saves its parameter on `ctx` (`ctx.run = run`) and `backward` calls
    /// that attribute (`ctx.run(ctx.module)`). With the attribute.
    fn relayed(&self, backward: &FunctionRef) -> Vec<(usize, String)> {
        let fact = &backward.0.functions[backward.1];
        let Some(ctx) = fact.parameters.first() else {
            return Vec::new();
        };
        let Some(class) = fact.self_class.as_deref() else {
            return Vec::new();
        };
        let forwards = self.method_of(
            &backward.0,
            class,
            "forward",
            &mut std::collections::HashSet::new(),
        );
        let called: Vec<&str> = fact
            .calls
            .iter()
            .filter_map(|c| match &c.callee {
                Callee::Method {
                    receiver: Some(r),
                    method,
                } if r == ctx && c.through.is_none() => Some(method.as_str()),
                _ => None,
            })
            .collect();
        let mut found = Vec::new();
        for forward in forwards {
            let forward_fact = &forward.0.functions[forward.1];
            for (attr, vals) in &forward_fact.local.first_param_stores {
                if !called.contains(&&**attr) {
                    continue;
                }
                for val in vals.iter().filter(|v| v.attr.is_none()) {
                    // `forward(ctx, *args)`: its parameter k is
                    // `apply`'s argument k - 1.
                    if let Root::Param(k) = val.root
                        && k > 0
                        && !found.iter().any(|(p, _)| *p == k as usize - 1)
                    {
                        found.push((k as usize - 1, attr.to_string()));
                    }
                }
            }
        }
        found
    }

    /// Why a function the hook hands on is a hook: `what` runs it.
    fn why_applied(
        &self,
        module: &ModuleFacts,
        hook: &FunctionFact,
        call: &CallFact,
        what: &str,
        helper: Option<&str>,
    ) -> Found {
        let through = helper.map_or_else(String::new, |h| format!(" through {h}"));
        Found {
            how: "applied",
            detail: format!(
                "run by {what} when autograd reaches the output of the Function the hook {} applies{through} at {}:{}",
                hook.qualname,
                module.path.display(),
                call.line
            ),
            path: module.path.clone(),
            line: call.line,
            backward: None,
        }
    }

    /// Records `function` as found by use where, judged as a hook, it does
    /// weight work; `handed_by`: the hook that hands it over and the steps
    /// from that hook to it, which carry its evidence to the hook.
    fn keep_if_offload(
        &self,
        function: &FunctionRef,
        why: &Found,
        handed_by: Option<(&FunctionRef, &[Step])>,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let fact = &function.0.functions[function.1];
        let summary = self.summary(function);
        let Some(evidence) = judge(&summary, &function.0, fact).evidence else {
            return;
        };
        discovered.add_function(&function.0, function.1, why);
        if let Some((hook, steps)) = handed_by {
            let mut chain = evidence.chain.clone();
            for step in steps.iter().rev() {
                chain = Some(Arc::new(Link {
                    step: step.clone(),
                    next: chain,
                }));
            }
            let hook_fact = &hook.0.functions[hook.1];
            evidence_found.push((
                (identity(&hook.0.path), hook_fact.start),
                Effect {
                    chain,
                    length: evidence.length + steps.len() as u32,
                    ..evidence
                },
            ));
        }
    }
}

/// The class a method belongs to, for the reason a user reads.
fn class_of(method: &FunctionRef) -> String {
    let fact = &method.0.functions[method.1];
    fact.qualname
        .rsplit_once('.')
        .map_or_else(|| fact.qualname.clone(), |(class, _)| class.to_owned())
}

/// A step of the chain from a hook to what it hands on.
fn step_to(to: &FunctionRef, call: &CallFact, handed_to: Option<&str>) -> Step {
    let fact = &to.0.functions[to.1];
    Step {
        qualname: fact.qualname.clone(),
        path: to.0.path.clone(),
        line: fact.line,
        through: handed_to.map(|h| Through::HandedTo(h.to_owned())),
        fenced: fact.fenced.clone(),
        call_line: Some(call.line),
    }
}

/// The name the call writes for `callee`'s parameter `param`, if a bare
/// name: by position (after the receiver, for a method called on an
/// instance) or by keyword.
pub(super) fn argument_name<'v>(
    values: &'v CallValues,
    call: &CallFact,
    callee: &FunctionFact,
    param: usize,
) -> Option<&'v str> {
    let bound =
        callee.is_method && !callee.static_method && matches!(call.callee, Callee::Method { .. });
    let position = param.checked_sub(usize::from(bound))?;
    values.name_at(&ArgumentAt::Position(position)).or_else(|| {
        let keyword = callee.parameters.get(param)?;
        values.name_at(&ArgumentAt::Keyword(keyword.as_str().into()))
    })
}

/// The functions named `name` that code in `function` sees.
fn visible(module: &Arc<ModuleFacts>, name: &str, function: usize) -> Vec<FunctionRef> {
    module
        .functions_visible(name, Some(function))
        .into_iter()
        .map(|i| (Arc::clone(module), i))
        .collect()
}
