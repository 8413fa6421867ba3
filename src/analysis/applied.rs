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

use crate::analysis::effects::judge::{Role, judge, judge_with, roles_with_defaults};
use crate::analysis::effects::local::{ArgumentAt, CallValues};
use crate::analysis::effects::record::StepEvidence;
use crate::analysis::effects::record::{Effect, Link, Summary, Target};
use crate::analysis::effects::value::{Root, Vals};
use crate::analysis::hook_values::Value;
use crate::analysis::module_facts::{CallFact, Callee, FunctionFact, ModuleFacts};
use crate::analysis::project::{FunctionRef, ProjectIndex};
use crate::analysis::reached::{Step, Through};
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
        let module_param = module_parameter(function);
        // Whether a target list (by address: calls that share a list, as n
        // calls of one attribute rebound n times do, share it) holds a
        // function either branch below can act on: a `backward`, or a
        // helper that applies a Function. Asked once per list, not once
        // per call and member.
        let mut may_act: crate::analysis::FastMap<usize, bool> =
            crate::analysis::FastMap::default();
        for (i, call) in function.calls.iter().enumerate() {
            let applied =
                matches!(&call.through, Some(Through::HandedTo(to)) if to.ends_with(".apply"));
            let targets = caller.callees(i);
            let acts = *may_act
                .entry(targets.as_ptr() as usize)
                .or_insert_with(|| targets.iter().any(may_relay));
            if !acts {
                continue;
            }
            for target in targets {
                let fact = &target.0.functions[target.1];
                if applied && fact.name == "backward" {
                    // What the hook passes `Fn.apply` (none where it hands
                    // `Fn.apply` over): is argument k the hook's module?
                    let values = function
                        .local
                        .call_at(call.start)
                        .filter(|v| v.start == call.start);
                    let is_module = |k: usize| {
                        values
                            .and_then(|v| v.positional.get(k))
                            .is_some_and(|vals| names_parameter(vals, module_param))
                    };
                    let why = self.why_applied(
                        module,
                        function,
                        call,
                        &format!("the backward of {}", class_of(target)),
                        None,
                    );
                    let evidence = self.backward_evidence(target, &is_module);
                    self.keep_if_offload(target, &why, None, evidence, discovered, evidence_found);
                    // `Fn.apply(module, run_later, out)`: what it hands
                    // the Function to call at backward time, with the
                    // module.
                    let to = match &call.through {
                        Some(Through::HandedTo(to)) => Some(to.as_str()),
                        _ => None,
                    };
                    for relay in self.relayed(target) {
                        if !relay.passes.is_some_and(&is_module) && !relay.captured {
                            continue;
                        }
                        let name =
                            values.and_then(|v| v.name_at(&ArgumentAt::Position(relay.position)));
                        for later in name
                            .map(|n| self.named_at(module, n, hook))
                            .unwrap_or_default()
                        {
                            let why = self.why_applied(
                                module,
                                function,
                                call,
                                &format!("ctx.{} of {}.backward", relay.attr, class_of(target)),
                                None,
                            );
                            let chain = [step_to(target, call, to), step_to(&later, call, None)];
                            let evidence = self.judged(&later);
                            self.keep_if_offload(
                                &later,
                                &why,
                                Some((&at, &chain)),
                                evidence,
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
        // Asked for every callee of every call of a hook: most apply no
        // Function, and are done with before anything is computed.
        if !applies_a_function(helper_fact) {
            return;
        }
        let Some(values) = function.local.call_at(call.start) else {
            return;
        };
        let module_param = module_parameter(function);
        for inner in &helper_fact.calls {
            let Some((to, receiver)) = applies_backward(inner) else {
                continue;
            };
            let Some(class_param) = helper_fact.parameters.iter().position(|p| p == receiver)
            else {
                continue;
            };
            let Some(class) =
                argument_name(values, call, helper_fact, class_param, module, function)
            else {
                continue;
            };
            let inner_values = helper_fact.local.call_at(inner.start);
            // What the helper hands on at `position` of the apply, as the
            // helper's parameter.
            let helper_param = |position: usize| -> Vec<usize> {
                inner_values
                    .and_then(|v| v.positional.get(position))
                    .into_iter()
                    .flat_map(|vals| vals.iter())
                    .filter(|v| v.attr.is_none())
                    .filter_map(|v| match v.root {
                        Root::Param(j) => Some(j as usize),
                        _ => None,
                    })
                    .collect()
            };
            for (class_module, class_name) in self.classes_named(module, class) {
                let backwards = self.method_of(
                    &class_module,
                    &class_name,
                    "backward",
                    &mut std::collections::HashSet::new(),
                );
                for backward in backwards {
                    for relay in self.relayed(&backward) {
                        // The backward hands the function the module: what
                        // the hook passes the helper there.
                        let with_module = relay.captured
                            || relay.passes.is_some_and(|k| {
                                helper_param(k).into_iter().any(|j| {
                                    argument_vals(values, call, helper_fact, j, module, function)
                                        .is_some_and(|vals| names_parameter(vals, module_param))
                                })
                            });
                        if !with_module {
                            continue;
                        }
                        for param in helper_param(relay.position) {
                            let Some(name) =
                                argument_name(values, call, helper_fact, param, module, function)
                            else {
                                continue;
                            };
                            for later in self.named_at(module, name, hook) {
                                let why = self.why_applied(
                                    module,
                                    function,
                                    call,
                                    &format!("ctx.{} of {class_name}.backward", relay.attr),
                                    Some(&helper_fact.qualname),
                                );
                                let chain = [
                                    step_to(helper, call, None),
                                    step_to(&backward, inner, Some(to)),
                                    step_to(&later, inner, None),
                                ];
                                let evidence = self.judged(&later);
                                self.keep_if_offload(
                                    &later,
                                    &why,
                                    Some((at, &chain)),
                                    evidence,
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

    /// What `backward` (a Function's) calls at backward time through `ctx`:
    /// its `forward` saves its parameter there (`ctx.run = run`) and
    /// `backward` calls that attribute handing it another one
    /// (`ctx.run(ctx.module)`), not a gradient.
    fn relayed(&self, backward: &FunctionRef) -> Vec<Relay> {
        let fact = &backward.0.functions[backward.1];
        let Some(ctx) = fact.parameters.first() else {
            return Vec::new();
        };
        let forwards = self.forward_beside(backward);
        // The attributes called, each with the attribute its first
        // argument is (`ctx.module`).
        let called: Vec<(&str, &str)> = fact
            .calls
            .iter()
            .filter_map(|c| match &c.callee {
                Callee::Method {
                    receiver: Some(r),
                    method,
                } if r == ctx && c.through.is_none() => {
                    let first = fact.local.call_at(c.start)?.positional.first()?;
                    let handed = first.iter().find_map(|v| match (&v.root, &v.attr) {
                        (Root::Param(0), Some(attr)) => Some(&**attr),
                        _ => None,
                    })?;
                    Some((method.as_str(), handed))
                }
                _ => None,
            })
            .collect();
        let mut found: Vec<Relay> = Vec::new();
        for forward in forwards {
            let stores = &forward.0.functions[forward.1].local.first_param_stores;
            for (attr, vals) in stores {
                let Some(&(_, handed)) = called.iter().find(|(a, _)| *a == &**attr) else {
                    continue;
                };
                let handed_vals = stores
                    .iter()
                    .filter(|(a, _)| &**a == handed)
                    .flat_map(|(_, v)| v.iter());
                let (mut passes, mut captured) = (None, false);
                for val in handed_vals.filter(|v| v.attr.is_none()) {
                    match val.root {
                        Root::Param(k) if k > 0 => passes = passes.or(Some(k as usize - 1)),
                        Root::Outer(_) => captured = true,
                        _ => {}
                    }
                }
                for val in vals.iter().filter(|v| v.attr.is_none()) {
                    // `forward(ctx, *args)`: its parameter k is
                    // `apply`'s argument k - 1.
                    if let Root::Param(k) = val.root
                        && k > 0
                        && !found.iter().any(|r| r.position == k as usize - 1)
                    {
                        found.push(Relay {
                            position: k as usize - 1,
                            attr: attr.to_string(),
                            passes,
                            captured,
                        });
                    }
                }
            }
        }
        found
    }

    /// The evidence of a Function's `backward` applied by a hook, judged on
    /// what its `forward` kept on `ctx` of the module: an attribute set to
    /// a name of a function around it (`ctx.module = module`, the module
    /// being registered) or to `apply`'s argument k where `is_module(k)`;
    /// and what it does to state held around it. What it does to the
    /// gradients, or to activations saved on `ctx`, is compute.
    fn backward_evidence(
        &self,
        backward: &FunctionRef,
        is_module: &dyn Fn(usize) -> bool,
    ) -> Option<Effect> {
        let forwards = self.forward_beside(backward);
        let mut held: Vec<&str> = Vec::new();
        for forward in &forwards {
            for (attr, vals) in &forward.0.functions[forward.1].local.first_param_stores {
                let of_module = vals
                    .iter()
                    .filter(|v| v.attr.is_none())
                    .any(|v| match v.root {
                        Root::Outer(_) => true,
                        Root::Param(k) => k > 0 && is_module(k as usize - 1),
                        _ => false,
                    });
                if of_module {
                    held.push(attr);
                }
            }
        }
        self.judged_backward(backward, &|e: &Effect| match &e.target {
            Target::Param {
                index: 0,
                attr: Some(attr),
                ..
            } => held.contains(&&**attr),
            Target::Captured { .. } | Target::Global(_) => true,
            _ => false,
        })
    }

    /// A Function's `backward` judged on the effects of its summary that
    /// `keep` keeps, its `ctx` read as holding the module and its other
    /// parameters (the gradients) as activations.
    pub(super) fn judged_backward(
        &self,
        backward: &FunctionRef,
        keep: &dyn Fn(&Effect) -> bool,
    ) -> Option<Effect> {
        let fact = &backward.0.functions[backward.1];
        let summary = self.summary(backward);
        let kept = Summary {
            effects: summary
                .effects
                .iter()
                .filter(|e| keep(e))
                .cloned()
                .collect(),
            measures: summary.measures,
            ..Default::default()
        };
        if kept.effects.is_empty() {
            return None;
        }
        let mut roles = vec![Role::Module];
        roles.resize(fact.parameters.len().max(1), Role::Activation);
        judge_with(&kept, &backward.0, fact, &roles).evidence
    }

    /// `function` judged as a hook (its first parameter the module).
    fn judged(&self, function: &FunctionRef) -> Option<Effect> {
        let fact = &function.0.functions[function.1];
        judge(&self.summary(function), &function.0, fact).evidence
    }

    /// The functions a name means where `function` of `module` passes it:
    /// what the function assigned to it, else what it names (a def around
    /// it, a module-level one, an import).
    pub(super) fn named_at(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
        function: usize,
    ) -> Vec<FunctionRef> {
        let fact = &module.functions[function];
        let value = if fact.assigned.iter().any(|(n, _)| n == name)
            || fact.parameters.iter().any(|p| p == name)
        {
            Value::Local(name.to_owned())
        } else {
            Value::Name(name.to_owned())
        };
        self.functions_of(module, Some(function), &value, 0)
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
        evidence: Option<Effect>,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let Some(evidence) = evidence else {
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
                false,
            ));
        }
    }
}

/// A function a Function's `backward` calls through `ctx`.
struct Relay {
    /// Its position among `apply`'s arguments.
    position: usize,
    /// The attribute of `ctx` it is kept in.
    attr: String,
    /// The position among `apply`'s arguments of what `backward` hands it.
    passes: Option<usize>,
    /// What `backward` hands it is a name of a function around the
    /// Function (the module being registered).
    captured: bool,
}

/// Whether `target` is a function [`ProjectIndex::applied_by_hook`] can
/// act on as a hook's callee: a Function's `backward`, or a helper that
/// applies a Function ([`applies_backward`]).
fn may_relay(target: &FunctionRef) -> bool {
    let fact = &target.0.functions[target.1];
    fact.name == "backward" || applies_a_function(fact)
}

/// Whether one of `function`'s calls applies a Function it is handed.
fn applies_a_function(function: &FunctionFact) -> bool {
    function
        .calls
        .iter()
        .any(|inner| applies_backward(inner).is_some())
}

/// `Fn.backward` handed to `Fn.apply` by a plain name `Fn` at `inner`:
/// what it is handed to, and `Fn`.
fn applies_backward(inner: &CallFact) -> Option<(&str, &str)> {
    let (
        Some(Through::HandedTo(to)),
        Callee::Method {
            receiver: Some(receiver),
            method,
        },
    ) = (&inner.through, &inner.callee)
    else {
        return None;
    };
    (method == "backward" && to.ends_with(".apply") && !receiver.contains('.'))
        .then_some((to.as_str(), receiver.as_str()))
}

/// The index of a hook's parameter that torch binds to the module.
fn module_parameter(hook: &FunctionFact) -> Option<usize> {
    roles_with_defaults(
        &hook.parameters,
        &hook.defaulted,
        hook.is_method && !hook.static_method,
    )
    .iter()
    .position(|r| *r == Role::Module)
}

/// Whether `vals` is the parameter `param` itself.
fn names_parameter(vals: &Vals, param: Option<usize>) -> bool {
    param.is_some_and(|p| {
        vals.iter()
            .any(|v| v.attr.is_none() && v.root == Root::Param(p as u16))
    })
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

/// Where the call writes `callee`'s parameter `param`: its position among
/// the positional arguments (after the receiver, for a method called on an
/// instance, not on its class) and its keyword.
fn argument_at<'c>(
    call: &CallFact,
    callee: &'c FunctionFact,
    param: usize,
    module: &ModuleFacts,
    caller: &FunctionFact,
) -> (Option<usize>, Option<&'c str>) {
    let bound = matches!(call.callee, Callee::Method { .. })
        && crate::analysis::effects::resolve::binds_first_parameter(call, callee, module, caller);
    (
        param.checked_sub(usize::from(bound)),
        callee.parameters.get(param).map(String::as_str),
    )
}

/// The name the call writes for `callee`'s parameter `param`, if a bare
/// name: by position or by keyword.
pub(super) fn argument_name<'v>(
    values: &'v CallValues,
    call: &CallFact,
    callee: &FunctionFact,
    param: usize,
    module: &ModuleFacts,
    caller: &FunctionFact,
) -> Option<&'v str> {
    let (position, keyword) = argument_at(call, callee, param, module, caller);
    position
        .and_then(|p| values.name_at(&ArgumentAt::Position(p)))
        .or_else(|| values.name_at(&ArgumentAt::Keyword(keyword?.into())))
}

/// The values the call passes for `callee`'s parameter `param`.
pub(super) fn argument_vals<'v>(
    values: &'v CallValues,
    call: &CallFact,
    callee: &FunctionFact,
    param: usize,
    module: &ModuleFacts,
    caller: &FunctionFact,
) -> Option<&'v Vals> {
    let (position, keyword) = argument_at(call, callee, param, module, caller);
    position.and_then(|p| values.positional.get(p)).or_else(|| {
        let keyword = keyword?;
        values
            .keywords
            .iter()
            .find(|(k, _)| &**k == keyword)
            .map(|(_, v)| v)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::applies_backward;

    /// The calls of a function that stand for `Fn.backward` handed to
    /// `Fn.apply` with `Fn` a plain name (a parameter): the only ones a
    /// hook's helper is searched for; a function applying nothing is
    /// passed over at once.
    #[test]
    fn only_a_plain_named_functions_apply_stands_for_its_backward() {
        let text = "\
def relay(owner, function_cls, at_backward, outputs):
    return function_cls.apply(owner, at_backward, outputs)


def dotted(owner, holder, outputs):
    return holder.cls.apply(owner, outputs)


def plain(m):
    m.to('cuda')
    return m
";
        let facts = crate::analysis::module_facts::tests::facts_of(text);
        let applied = |name: &str| -> Vec<(String, String)> {
            let function = facts.functions.iter().find(|f| f.name == name).unwrap();
            function
                .calls
                .iter()
                .filter_map(applies_backward)
                .map(|(to, receiver)| (to.to_owned(), receiver.to_owned()))
                .collect()
        };
        assert_eq!(
            applied("relay"),
            [("function_cls.apply".to_owned(), "function_cls".to_owned())]
        );
        assert!(applied("dotted").is_empty());
        assert!(applied("plain").is_empty());
    }
}
