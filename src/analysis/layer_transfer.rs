//! A leaf layer whose weights live elsewhere: the `forward` of a subclass
//! of one of torch's weight-holding layers (`nn.Linear`, `nn.Conv2d`,
//! `nn.Embedding`, `nn.LayerNorm`, ...) that copies its own weight or bias
//! to a device on every call (`weight = self.weight.to(x.device,
//! non_blocking=True)`, through a helper `cast(self, x)` too) and computes
//! with the copy. Its weights are kept on another device (the host, pinned
//! memory, a disk-backed buffer) and streamed in per call: an offloaded
//! layer installed in place of torch's (a layer-offload engine's operations,
//! a cache that swaps its modules' classes for autocasting ones).
//!
//! A moved copy of a weight used as a value is compute anywhere else (see
//! `LocalFacts::staged`): a model's forward that takes its weight to the
//! input's device is traced by dynamo like any op. A leaf layer is the one
//! place where that copy is the transfer itself, around the compute of one
//! layer: no smaller function holds it, so that forward is the fence point,
//! and that one layer runs eagerly while the rest of the model compiles.
//! What it calls on the way to the copy runs inside it (`covered`).

use std::collections::HashSet;
use std::sync::Arc;

use crate::analysis::effects::local::{Acts, Kind};
use crate::analysis::effects::models;
use crate::analysis::effects::record::{Effect, StepEvidence, Target};
use crate::analysis::effects::value::{Root, Shape, Val};
use crate::analysis::function_facts::Callee;
use crate::analysis::leaf_layers::names_leaf_layer;
use crate::analysis::module_facts::{CallFact, FunctionFact, ModuleFacts};
use crate::analysis::project::ProjectIndex;
use crate::found::{Discovered, Found};

/// The leaf layer each class derives from (`None`: none), by its file and
/// name, as [`ProjectIndex::leaf_layer_base`] finds it.
pub(crate) type LeafLayers =
    std::collections::HashMap<(std::path::PathBuf, String), Option<String>>;

/// How many classes of a layer's lineage tell its own methods from others'
/// (a method of a class further up counts as another class's): a bound on
/// the work per layer, far past real lineages.
const MOST_ANCESTORS: usize = 64;

impl<'p> ProjectIndex<'p> {
    /// The leaf layer `class` of `module` derives from, its bases followed
    /// across files, or `None`. Each class's answer is kept in `known`
    /// (asked of every layer of a run, each ancestor is read once: a
    /// lineage 2,000 classes deep costs one pass, not one per class), in
    /// post-order on a stack of its own (no recursion).
    pub(super) fn leaf_layer_base(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        known: &mut LeafLayers,
    ) -> Option<String> {
        enum Visit {
            Enter(Arc<ModuleFacts>, String),
            Leave(Arc<ModuleFacts>, String),
        }
        let mut stack = vec![Visit::Enter(Arc::clone(module), class.to_owned())];
        while let Some(visit) = stack.pop() {
            match visit {
                Visit::Enter(at, name) => {
                    let key = (at.path.clone(), name.clone());
                    if known.contains_key(&key) {
                        continue;
                    }
                    // Asked while its bases are (a cycle): none.
                    known.insert(key, None);
                    stack.push(Visit::Leave(Arc::clone(&at), name.clone()));
                    for (base_module, base) in self.project_bases(&at, &name) {
                        stack.push(Visit::Enter(base_module, base));
                    }
                }
                Visit::Leave(at, name) => {
                    let answer = at.classes.get(&name).and_then(|facts| {
                        facts.bases.iter().find_map(|base| {
                            let base = base.split('[').next().unwrap_or(base).trim();
                            at.imported_path(base)
                                .filter(|full| names_leaf_layer(full))
                                .or_else(|| {
                                    self.classes_named(&at, base)
                                        .into_iter()
                                        .find_map(|(m, c)| {
                                            known.get(&(m.path.clone(), c)).cloned().flatten()
                                        })
                                })
                        })
                    });
                    known.insert((at.path.clone(), name), answer);
                }
            }
        }
        known
            .get(&(module.path.clone(), class.to_owned()))
            .cloned()
            .flatten()
    }

    /// The project classes `class` of `module` names as its bases.
    fn project_bases(&self, at: &Arc<ModuleFacts>, class: &str) -> Vec<(Arc<ModuleFacts>, String)> {
        let Some(facts) = at.classes.get(class) else {
            return Vec::new();
        };
        facts
            .bases
            .iter()
            .flat_map(|base| {
                let base = base.split('[').next().unwrap_or(base).trim();
                self.classes_named(at, base)
            })
            .collect()
    }

    /// The copy of its own weight (an attribute of `self` holding a
    /// tensor) that the `forward` `method` of `module` takes to a device
    /// for its call, directly or through what it calls, where there is one:
    /// the best-ranked (shortest chain, then first in the file).
    pub(super) fn own_weight_copied(
        &self,
        module: &Arc<ModuleFacts>,
        method: usize,
    ) -> Option<Effect> {
        let fact = &module.functions[method];
        if !fact.is_method || fact.static_method || fact.name != "forward" {
            return None;
        }
        let summary = self.summary(&(Arc::clone(module), method));
        let tensors = self.own_tensors(module, fact.self_class.as_deref());
        // A tensor of `self` its class stores a parameter in (`self.weight`,
        // `self.scale`).
        let own_weight = |target: &Target| matches!(target, Target::Param { index: 0, attr: Some(attr), .. } if tensors.holds(attr));
        // A copy taken of a tensor of `self` to a device named, made by a
        // function the layer hands itself or its weight to
        // (`cast_to_device(self.weight, x.device)`), not by its own class.
        summary
            .staged
            .iter()
            .filter(|e| {
                own_weight(&e.target) && self.handed_off(e, module, fact.self_class.as_deref())
            })
            // Its weight moved and stored back in its own body (`self.weight
            // = self.weight.to(device)`): placement no smaller function
            // holds (one that does is a step of the forward, see `roots`).
            .chain(summary.effects.iter().filter(|e| {
                e.kind == Kind::Move
                    && e.acts != Acts::Rebound
                    && e.chain.is_none()
                    && own_weight(&e.target)
            }))
            .min_by(|a, b| a.rank().cmp(&b.rank()))
            .cloned()
    }

    /// The `forward` `method` of the leaf layer `class` (derived from
    /// `base`), which copies its own weight in for each call (`copied`):
    /// the fence point itself (see `layer_transfer`), found by use
    /// (`discovered_by: layer-transfer`); what it calls on the way to the
    /// copy runs inside it.
    pub(super) fn layer_forward(
        &self,
        module: &Arc<ModuleFacts>,
        method: usize,
        (class, base): (&str, &str),
        copied: Effect,
        discovered: &mut Discovered,
        evidence_found: &mut Vec<StepEvidence>,
    ) {
        let function = &module.functions[method];
        let found = Found {
            how: "layer-transfer",
            detail: format!(
                "the forward of the layer {class} (a {base}) copies its own weight to a device on every call: its weights are kept elsewhere and streamed in, so this one layer runs eagerly"
            ),
            path: module.path.clone(),
            line: function.line,
            backward: None,
        };
        evidence_found.push((
            (crate::found::identity(&module.path), function.start),
            copied,
            false,
        ));
        discovered.add_layer_forward(module, method, &found);
        self.inside_step(
            &(Arc::clone(module), method),
            &[],
            discovered,
            evidence_found,
        );
    }

    /// Whether the forward `method` of `module` may copy its own weight in,
    /// asked before its summary is (most forwards do not, and a model's
    /// forward reaches the whole model): it, or a method of its own it
    /// calls, hands `self` or one of its tensors (`self.weight`) to a
    /// function that is not torch's (`fetch(self, x)`,
    /// `cast_to_device(self.weight, d)`), or moves its own tensor in its
    /// own body.
    pub(super) fn may_copy_own_weight(&self, module: &Arc<ModuleFacts>, method: usize) -> bool {
        let tensors = self.own_tensors(module, module.functions[method].self_class.as_deref());
        let own_value = |v: &Val| {
            v.root == Root::Param(0) && v.attr.as_deref().is_none_or(|a| tensors.holds(a))
        };
        own_calls(module, method).into_iter().any(|at| {
            let fact = &module.functions[at];
            fact.local
                .effects
                .iter()
                .any(|e| e.kind == Kind::Move && e.on.as_ref().is_some_and(own_value))
                || fact.calls.iter().any(|call| {
                    let callee = match &call.callee {
                        Callee::Name(name) => name.as_str(),
                        Callee::Method {
                            receiver: Some(receiver),
                            ..
                        } if receiver != "self" => receiver.as_str(),
                        Callee::Method { .. } => return false,
                    };
                    !from_torch(module, callee) && handed(fact, call).any(own_value)
                })
        })
    }

    /// Whether the forward `method` of `module` runs one op: its class
    /// keeps no object it makes but parameters and buffers, and neither it
    /// nor a method of its own it calls (followed within its class) calls a
    /// model's compute (see `compute::calls_compute`: another forward, a
    /// submodule held in an attribute), a callable bound there, a method of
    /// an object it holds, or hands such an object to a function.
    ///
    /// One walk answers both questions [`OneOp`] tells apart: whether it
    /// runs one op on its own, and whether it does once the forward it
    /// inherits (`super().forward(x)`) is taken for the one op (the class
    /// derives from a one-op layer).
    pub(super) fn runs_one_op(&self, module: &Arc<ModuleFacts>, method: usize) -> OneOp {
        let class = module.functions[method].self_class.as_ref();
        let tensors = self.own_tensors(module, class.map(String::as_str));
        // An object its class makes and keeps (`self.layers =
        // nn.ModuleList(...)`, `self.proj = nn.Linear(...)`) may be a
        // submodule, whatever way the forward calls it; a parameter or a
        // buffer is its own weight.
        let holds_objects = class
            .and_then(|c| module.classes.get(c))
            .is_some_and(|own| {
                own.methods.iter().any(|&m| {
                    module.functions[m]
                        .local
                        .self_stores
                        .iter()
                        .any(|store| store.classes.iter().any(|c| !names_a_tensor_class(c)))
                })
            });
        // An object it holds other than its own tensors.
        let held_object = |attr: &str| !tensors.holds(attr);
        if holds_objects {
            return OneOp::No;
        }
        // Whether it runs the forward it inherits.
        let mut inherited = false;
        let one_op = own_calls(module, method).into_iter().all(|at| {
            let fact = &module.functions[at];
            !fact.calls.iter().any(|call| {
                let compute = crate::analysis::compute::is_compute_call(module, fact, call)
                        // A method of its own class (`self._cast_forward(x)`):
                        // its body is read here too.
                        && !own_method_call(module, fact, call);
                if compute && crate::analysis::compute::is_base_forward(fact, call) {
                    inherited = true;
                    return false;
                }
                compute
            }) && fact.calls.iter().all(|call| {
                let callee = match &call.callee {
                    // A callable bound here (`for layer in
                    // self.layers: layer(x)`) may be a submodule.
                    Callee::Name(_) if call.opaque || call.not_the_import => return false,
                    // A builtin that only looks at what it is handed
                    // (`len(self.patches)`, `isinstance(p, C)`).
                    Callee::Name(name)
                        if crate::analysis::leaf_layers::LOOKS_ONLY.contains(&name.as_str())
                            && module.imported_path(name).is_none() =>
                    {
                        return true;
                    }
                    Callee::Name(name) => name.as_str(),
                    Callee::Method {
                        receiver: Some(receiver),
                        ..
                    } if receiver != "self" => {
                        // `self.blocks.run(x)`; `self.up.flatten(1)`
                        // is a tensor's method no module has.
                        if receiver.strip_prefix("self.").is_some_and(held_object)
                            && !call_is_a_tensor_view(&call.callee)
                        {
                            return false;
                        }
                        receiver.as_str()
                    }
                    Callee::Method { .. } => return true,
                };
                // An object it holds handed to a function of the
                // project (`run_all(self.blocks, x)`).
                from_torch(module, callee)
                    || !handed(fact, call).any(|v| {
                        // A tensor or data about one (`patch.weight`,
                        // `x.device`) is no object to run.
                        v.root == Root::Param(0)
                            && v.shape == Shape::Object
                            && v.attr.as_deref().is_some_and(held_object)
                    })
            })
        });
        match (one_op, inherited) {
            (false, _) => OneOp::No,
            (true, false) => OneOp::Plain,
            (true, true) => OneOp::ButInherited,
        }
    }

    /// The attributes of `class` of `module` that hold its own tensors
    /// (see [`OwnTensors`]).
    pub(super) fn own_tensors<'i>(
        &'i self,
        module: &'i Arc<ModuleFacts>,
        class: Option<&'i str>,
    ) -> OwnTensors<'i, 'p> {
        OwnTensors {
            index: self,
            module,
            class,
            declared: std::cell::OnceCell::new(),
        }
    }

    /// What makes the class of the `forward` `method` of `module` one
    /// layer, where no torch layer is among its bases (see
    /// [`ProjectIndex::leaf_layer_base`]): it runs one op on its own
    /// tensors and calls no submodule (see [`ProjectIndex::runs_one_op`]),
    /// or it does so but for the forward it inherits (`super().forward(x)`)
    /// from a class that is one layer itself: a one-op module of the
    /// project that holds a parameter, or a library's class the run does
    /// not hold (`from normlib import RMSNorm`), whose `weight` and `bias`
    /// are the layer's.
    ///
    /// `plain`: a module that derives from no layer counts (not in a file
    /// indexed for its leaf layers alone, whose other forwards are not
    /// asked for).
    pub(super) fn layer_of_its_own(
        &self,
        module: &Arc<ModuleFacts>,
        method: usize,
        plain: bool,
    ) -> Option<String> {
        let one_op = self.runs_one_op(module, method);
        if plain && one_op == OneOp::Plain {
            return Some("module that calls no submodule".to_owned());
        }
        let class = module.functions[method].self_class.as_deref()?;
        if one_op == OneOp::No {
            return None;
        }
        let lineage = self.lineage(module, class);
        lineage
            .iter()
            .skip(1)
            .find_map(|(at, name)| {
                let facts = at.classes.get(name)?;
                let one_op = facts.methods.iter().any(|&m| {
                    at.functions[m].name == "forward" && self.runs_one_op(at, m) == OneOp::Plain
                });
                (one_op && !self.own_tensors(at, Some(name)).declared().is_empty())
                    .then(|| format!("{name}, a one-op layer of the project"))
            })
            .or_else(|| {
                lineage.iter().find_map(|(at, name)| {
                    at.classes.get(name)?.bases.iter().find_map(|base| {
                        self.library_base(at, base)
                            .map(|full| format!("{full}, a library's layer"))
                    })
                })
            })
    }

    /// Whether `copied`, a copy of a layer's weight, is made on the way
    /// through a function the layer hands itself or its weight to (a plain
    /// function, a method of another class): the project's own way of
    /// bringing a layer's weights in, shared by its layers
    /// (`weights_manual_cast(self, x)`, `cast_to_device(self.weight,
    /// x.device)`). A copy a layer's own methods take of its weight
    /// (`self.weight.to(device=x.device, dtype=x.dtype) * x` in a norm) keeps
    /// the weight beside what it is applied to, wherever the module was
    /// put: compute, as anywhere else.
    fn handed_off(&self, copied: &Effect, module: &Arc<ModuleFacts>, class: Option<&str>) -> bool {
        let Some(mut link) = copied.chain.as_deref() else {
            return false;
        };
        let lineage = class.map(|c| self.lineage(module, c)).unwrap_or_default();
        let mut handed = false;
        loop {
            let function = self.function_of_step(&link.step);
            if let Some(function) = &function {
                let fact = &function.0.functions[function.1];
                handed |= !(fact.is_method
                    && fact.self_class.as_ref().is_some_and(|c| {
                        lineage
                            .iter()
                            .any(|(at, name)| name == c && Arc::ptr_eq(at, &function.0))
                    }));
            }
            match link.next.as_deref() {
                Some(next) => link = next,
                // The function that takes the copy hands back a copy
                // (`return t.to(device)`, `return weight, bias`, a tensor it
                // filled): it brings a weight in for its caller's op, rather
                // than computing with it (`torch.lerp(table[i], ...)`).
                None => {
                    return handed
                        && function.is_some_and(|f| f.0.functions[f.1].local.returns_copy);
                }
            }
        }
    }

    /// `class` of `module` and its bases the run can read, followed across
    /// files (a list, not a recursion), the first [`MOST_ANCESTORS`].
    fn lineage(&self, module: &Arc<ModuleFacts>, class: &str) -> Vec<(Arc<ModuleFacts>, String)> {
        let mut pending: Vec<(Arc<ModuleFacts>, String)> =
            vec![(Arc::clone(module), class.to_owned())];
        let mut found: Vec<(Arc<ModuleFacts>, String)> = Vec::new();
        let mut seen: HashSet<(std::path::PathBuf, String)> = HashSet::new();
        while let Some((at, name)) = pending.pop() {
            if found.len() == MOST_ANCESTORS || !seen.insert((at.path.clone(), name.clone())) {
                continue;
            }
            pending.extend(self.project_bases(&at, &name));
            found.push((at, name));
        }
        found
    }
}

/// The attributes of `self` that hold a layer's own tensors: those torch
/// gives a layer's tensors (`weight`, `bias`, `data`), and those its
/// class, or a class it derives from, stores a parameter or a buffer in
/// (`self.scale = nn.Parameter(torch.ones(n))`), whatever their names. The
/// lineage is read only when an attribute of another name is asked of.
pub(super) struct OwnTensors<'i, 'p> {
    index: &'i ProjectIndex<'p>,
    module: &'i Arc<ModuleFacts>,
    class: Option<&'i str>,
    declared: std::cell::OnceCell<HashSet<String>>,
}

impl OwnTensors<'_, '_> {
    /// Whether `attr` (`scale`, `weight.data`) is one of them.
    pub(super) fn holds(&self, attr: &str) -> bool {
        let first = attr.split('.').next().unwrap_or(attr);
        models::state_attribute(first) || self.declared().contains(first)
    }

    /// The attributes the lineage stores a parameter or a buffer in.
    fn declared(&self) -> &HashSet<String> {
        self.declared.get_or_init(|| {
            let mut attrs = HashSet::new();
            let lineage = self
                .class
                .map(|c| self.index.lineage(self.module, c))
                .unwrap_or_default();
            for (at, name) in lineage {
                let Some(facts) = at.classes.get(&name) else {
                    continue;
                };
                for (attr, classes) in &facts.element_classes {
                    if classes.iter().any(|c| names_a_tensor_class(c)) {
                        attrs.insert(attr.clone());
                    }
                }
            }
            attrs
        })
    }
}

/// The forward `method` of `module` and the methods of its own class it
/// calls on `self`, followed within the class, each once.
fn own_calls(module: &ModuleFacts, method: usize) -> Vec<usize> {
    let own = module.functions[method]
        .self_class
        .as_ref()
        .and_then(|c| module.classes.get(c));
    let mut found = vec![method];
    let mut seen: HashSet<usize> = HashSet::from([method]);
    let mut next = 0;
    while let Some(&at) = found.get(next) {
        next += 1;
        for call in &module.functions[at].calls {
            if let (
                Callee::Method {
                    receiver: Some(receiver),
                    method: name,
                },
                Some(own),
            ) = (&call.callee, own)
                && receiver == "self"
            {
                for &m in &own.methods {
                    if module.functions[m].name == *name && seen.insert(m) {
                        found.push(m);
                    }
                }
            }
        }
    }
    found
}

/// Whether `callee` is one of [`models::TENSOR_ONLY_METHODS`].
fn call_is_a_tensor_view(callee: &Callee) -> bool {
    matches!(callee, Callee::Method { method, .. } if crate::analysis::effects::models::TENSOR_ONLY_METHODS.contains(&method.as_str()))
}

/// Whether `call` (of `fact`, in `module`) calls a method of `fact`'s own
/// class on `self` (which [`own_calls`] follows).
fn own_method_call(module: &ModuleFacts, fact: &FunctionFact, call: &CallFact) -> bool {
    let Callee::Method {
        receiver: Some(receiver),
        method,
    } = &call.callee
    else {
        return false;
    };
    receiver == "self"
        && fact.is_method
        && !fact.static_method
        && fact
            .self_class
            .as_ref()
            .and_then(|c| module.classes.get(c))
            .is_some_and(|own| {
                own.methods
                    .iter()
                    .any(|&m| module.functions[m].name == *method)
            })
}

/// Whether the callee spelled `callee` (a name or a receiver) comes from
/// torch, by the first part of its name.
fn from_torch(module: &ModuleFacts, callee: &str) -> bool {
    let first = callee.split('.').next().unwrap_or(callee);
    module
        .imported_path(first)
        .is_some_and(|full| full == "torch" || full.starts_with("torch."))
}

/// The values `call` (of `fact`) hands over, by position or keyword.
fn handed<'f>(fact: &'f FunctionFact, call: &CallFact) -> impl Iterator<Item = &'f Val> {
    fact.local
        .call_at(call.start)
        .into_iter()
        .flat_map(|values| {
            values
                .positional
                .iter()
                .chain(values.keywords.iter().map(|(_, v)| v))
        })
        .flat_map(|vals| vals.iter())
}

/// What one walk of a forward tells of its layer (see
/// [`ProjectIndex::runs_one_op`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OneOp {
    /// It runs one op on its own tensors and calls no submodule.
    Plain,
    /// So, but for the forward it inherits (`super().forward(x)`), which
    /// is the one op where its base is one layer.
    ButInherited,
    /// It runs a model's compute, or holds objects that may.
    No,
}

/// Whether the class path `class` names a module's own tensor: a
/// parameter or a buffer (`torch.nn.Parameter`, `nn.Buffer`).
fn names_a_tensor_class(class: &str) -> bool {
    matches!(class.rsplit('.').next(), Some("Parameter" | "Buffer"))
}
