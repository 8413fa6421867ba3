//! Calls through the library models: what a modelled function or method
//! does to its arguments, and the stores a call makes (`append`, `setattr`).

use tree_sitter::Node;

use super::copies::{copy_of, move_words};
use super::{Acts, CallValues, Kind, Walker, string_content};
use crate::analysis::effects::models::{FunctionModel, MethodModel};
use crate::analysis::effects::value::{Copied, Root, Shape, Val, Vals};
use crate::syntax::Field;
use crate::syntax::text_of;

impl<'t> Walker<'_, 't> {
    pub(super) fn function_model(
        &mut self,
        model: FunctionModel,
        node: Node<'t>,
        values: &CallValues,
        argument_nodes: &[Node<'t>],
        keyword_nodes: &[(String, Node<'t>)],
        path: &str,
    ) -> Vals {
        let short = path.rsplit('.').next().unwrap_or(path);
        match model {
            FunctionModel::Collective => {
                let mut result = Vals::default();
                let mut tensors: Vec<(Node<'t>, &Vals)> = argument_nodes
                    .iter()
                    .copied()
                    .zip(values.positional.iter())
                    .collect();
                for (name, value) in keyword_nodes {
                    if let Some((_, vals)) = values.keywords.iter().find(|(n, _)| **n == **name)
                        && (name.contains("tensor") || name == "output" || name == "input")
                    {
                        tensors.push((*value, vals));
                    }
                }
                let mut any = false;
                for (argument, vals) in tensors {
                    for val in vals.iter().filter(|v| v.shape != Shape::Meta) {
                        if val.is_fresh() {
                            continue;
                        }
                        any = true;
                        result.add(val.clone());
                        let spelled = self.spelled(argument);
                        self.effect(
                            Kind::Collective,
                            node,
                            format!("{short}(...) of `{spelled}` across ranks"),
                            Some(val.clone()),
                        );
                    }
                }
                if !any {
                    self.discount(
                        Kind::Collective,
                        node,
                        format!("{short}(...) across ranks"),
                        None,
                        format!("{short}(...) acts only on tensors made here"),
                    );
                }
                if result.0.is_empty() {
                    Vals::fresh()
                } else {
                    result
                }
            }
            FunctionModel::SetModuleTensor => {
                let module = values
                    .positional
                    .first()
                    .cloned()
                    .unwrap_or_else(Vals::unknown);
                let spelled = argument_nodes
                    .first()
                    .map_or_else(|| "module".to_owned(), |n| self.spelled(*n));
                for val in module.0 {
                    self.effect(
                        Kind::Move,
                        node,
                        format!("moves a tensor of `{spelled}` to a device via {short}(...)"),
                        Some(val),
                    );
                    self.acts_on_object();
                }
                Vals::meta()
            }
            FunctionModel::SendToDevice => values
                .positional
                .first()
                .cloned()
                .unwrap_or_default()
                .map(|mut v| {
                    v.copied = Some(Copied {
                        device: true,
                        ..Copied::default()
                    });
                    v
                }),
            FunctionModel::Synchronize => {
                self.sync(node, format!("waits for the device via {short}()"));
                Vals::meta()
            }
            FunctionModel::Rng => {
                self.effect(
                    Kind::Rng,
                    node,
                    format!("changes RNG state via {short}(...)"),
                    None,
                );
                Vals::meta()
            }
            FunctionModel::Factory => Vals::fresh(),
            FunctionModel::SwapTensors => {
                // Both are changed; the first named, the second where the
                // first is made here.
                let mut named = false;
                for (vals, argument) in values.positional.iter().zip(argument_nodes).take(2) {
                    if named {
                        break;
                    }
                    let spelled = self.spelled(*argument);
                    for val in vals.0.iter().filter(|v| !v.is_fresh()).cloned() {
                        named = true;
                        self.effect(
                            Kind::Swap,
                            node,
                            format!("swaps the contents of `{spelled}` via {short}(...)"),
                            Some(val),
                        );
                    }
                }
                Vals::meta()
            }
            // A parameter: the tensor it wraps, now an instance of torch's
            // `Parameter` (what a class stores it in holds its own tensor).
            FunctionModel::Parameter => values
                .positional
                .first()
                .cloned()
                .unwrap_or_else(Vals::fresh)
                .map(|v| {
                    let mut v = v.shaped(Shape::Tensor);
                    v.class = Some("torch.nn.Parameter".into());
                    v
                }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn method_model(
        &mut self,
        model: MethodModel,
        method: &str,
        node: Node<'t>,
        receiver_node: Option<Node<'t>>,
        receiver: Vals,
        values: &CallValues,
        argument_nodes: &[Node<'t>],
        statement: bool,
    ) -> Vals {
        let text = self.text;
        let spelled = receiver_node.map_or_else(String::new, |r| self.spelled(r));
        let line = Self::line(node);
        match model {
            MethodModel::Move => {
                let copied = copy_of(method, node, text);
                let moved = receiver.clone().map(|mut v| {
                    if v.shape != Shape::Meta {
                        v.copied = Some(copied);
                    }
                    v
                });
                // A value it did not make (module state, or what it is
                // handed), copied to a device it names and used; a copy
                // handed to the host (`.cpu()`, for logging or a check) is
                // none brought in.
                if !statement
                    && method != "cpu"
                    && ((copied.device && !copied.unknown) || copied.pinned)
                {
                    for val in receiver.0.iter().filter(|v| {
                        v.shape != Shape::Meta
                            && v.copied.is_none()
                            && matches!(v.root, Root::Param(_) | Root::Outer(_) | Root::Global(_))
                    }) {
                        self.staged(
                            receiver_node.unwrap_or(node),
                            format!(
                                "copies `{spelled}` to a device via .{method}(...) for its use here"
                            ),
                            val.clone(),
                        );
                    }
                }
                if statement || method == "to_empty" {
                    for val in receiver.0.into_iter().filter(|v| v.shape != Shape::Meta) {
                        self.moved_in_place(
                            receiver_node.unwrap_or(node),
                            val,
                            copied,
                            &format!(".{method}(...)"),
                        );
                    }
                } else {
                    // Its value used (`m = m.to(d)`, `return m.to(d)`): a
                    // module handed in moves in place all the same; a
                    // tensor's copy is compute. Judged where the value comes
                    // from (see `Acts::Rebound`).
                    for val in receiver.0.into_iter().filter(|v| {
                        v.shape == Shape::Object
                            && matches!(v.root, Root::Param(_) | Root::Outer(_) | Root::Global(_))
                    }) {
                        self.moved_in_place(
                            receiver_node.unwrap_or(node),
                            val,
                            copied,
                            &format!(".{method}(...)"),
                        );
                        if let Some(last) = self.facts.effects.last_mut() {
                            last.acts = Acts::Rebound;
                        }
                    }
                }
                moved
            }
            MethodModel::Pin => receiver.map(|mut v| {
                v.copied = Some(Copied {
                    pinned: true,
                    ..Copied::default()
                });
                v
            }),
            MethodModel::StateItems | MethodModel::Submodules => {
                let shape = if model == MethodModel::StateItems {
                    Shape::Tensor
                } else {
                    Shape::Object
                };
                let via = format!("comes from `{spelled}.{method}()`");
                receiver.map(|v| v.shaped(shape).with_via(via.clone(), line))
            }
            MethodModel::CopyInto => {
                let source = values.positional.first().cloned().unwrap_or_default();
                let non_blocking = values.keywords.iter().any(|(n, _)| &**n == "non_blocking")
                    || values.positional.len() > 1;
                let from_elsewhere = source
                    .iter()
                    .any(|v| v.copied.is_some_and(|c| c.device || c.pinned));
                let from_state = source
                    .iter()
                    .any(|v| v.shape == Shape::Tensor && !v.is_fresh());
                let source_spelled = argument_nodes
                    .first()
                    .map_or_else(String::new, |n| self.spelled(*n));
                let detail = format!("copies `{source_spelled}` into `{spelled}` via .copy_(...)");
                if non_blocking || from_elsewhere || from_state {
                    let into_fresh = receiver.all_fresh();
                    // A tensor made here filled from one it did not make,
                    // across devices: a copy taken for its use.
                    if into_fresh && (non_blocking || from_elsewhere) {
                        for val in source.iter().filter(|v| {
                            v.shape != Shape::Meta
                                && matches!(
                                    v.root,
                                    Root::Param(_) | Root::Outer(_) | Root::Global(_)
                                )
                        }) {
                            self.staged(node, detail.clone(), val.clone());
                        }
                        if let Some(name) = receiver_node.filter(|r| r.kind() == "identifier") {
                            let name = text_of(name, text).to_owned();
                            self.filled.push(name);
                        }
                    }
                    let targets = if into_fresh { source } else { receiver.clone() };
                    for val in targets.0 {
                        self.effect(Kind::CopyIn, node, detail.clone(), Some(val));
                    }
                } else {
                    let on = receiver.0.first().cloned();
                    self.discount(
                        Kind::CopyIn,
                        node,
                        detail,
                        on,
                        format!(
                            "a copy_ of `{source_spelled}` on the same device (no non_blocking=, no moved or pinned source): traceable compute"
                        ),
                    );
                }
                receiver
            }
            MethodModel::SetStorage => {
                for val in receiver.0.clone() {
                    self.effect(
                        Kind::Swap,
                        node,
                        format!("points `{spelled}` at other storage via .set_(...)"),
                        Some(val),
                    );
                }
                // `torch.empty(0).set_(buffer, offset, shape)`: the tensor
                // made here now views the storage handed to it, which is
                // what its value holds (`p.data = ...` of it swaps that
                // storage in).
                match values.positional.first() {
                    Some(storage) if receiver.all_fresh() && !storage.0.is_empty() => {
                        storage.clone().map(|v| v.shaped(Shape::Tensor))
                    }
                    _ => receiver,
                }
            }
            MethodModel::Storage => receiver,
            MethodModel::Resize => {
                let owner = receiver_node
                    .and_then(|r| r.field("function"))
                    .and_then(|f| f.field("object"))
                    .map_or_else(|| spelled.clone(), |o| self.spelled(o));
                for val in receiver.0.clone() {
                    self.effect(
                        Kind::Storage,
                        node,
                        format!("frees or allocates the storage of `{owner}` via .{method}(...)"),
                        Some(val),
                    );
                }
                receiver
            }
            MethodModel::RecordStream => {
                for val in receiver.0.clone() {
                    self.effect(
                        Kind::Stream,
                        node,
                        format!("keeps `{spelled}` on a stream via .record_stream(...)"),
                        Some(val),
                    );
                }
                Vals::meta()
            }
            MethodModel::StreamWait => {
                let timing = self.timing();
                let detail = format!("orders streams via .{method}(...)");
                match timing {
                    Some("timing") => self.discount(
                        Kind::Stream,
                        node,
                        detail,
                        None,
                        format!("{method}() stands next to timing calls: it times the forward"),
                    ),
                    _ => self.effect(Kind::Stream, node, detail, None),
                }
                Vals::meta()
            }
            MethodModel::Synchronize => {
                self.sync(node, "waits for the device via .synchronize()".to_owned());
                Vals::meta()
            }
            MethodModel::Wait => {
                if receiver.all_fresh() {
                    return Vals::meta();
                }
                for val in receiver.0 {
                    self.effect(
                        Kind::Wait,
                        node,
                        format!("waits on `{spelled}` via .wait()"),
                        Some(val),
                    );
                }
                Vals::meta()
            }
            MethodModel::FutureResult => {
                // What the job returned, as any call's value.
                let returned = Vals::one(Val::returned(node.start_byte(), None));
                if receiver.all_fresh() {
                    return returned;
                }
                for val in receiver.0 {
                    self.effect(
                        Kind::Wait,
                        node,
                        format!("waits on `{spelled}` via .result()"),
                        Some(val),
                    );
                    if let Some(last) = self.facts.effects.last_mut() {
                        last.acts = Acts::Job;
                    }
                }
                returned
            }
            MethodModel::Shard => {
                for val in receiver.0.clone() {
                    self.effect(
                        Kind::Collective,
                        node,
                        format!("{method}s the parameters of `{spelled}` via .{method}()"),
                        Some(val),
                    );
                    self.acts_on_object();
                }
                receiver
            }
            MethodModel::Rng => {
                self.effect(
                    Kind::Rng,
                    node,
                    format!("changes RNG state via .{method}(...)"),
                    None,
                );
                Vals::meta()
            }
            MethodModel::Same => receiver,
            MethodModel::LoadState | MethodModel::ApplyToTensors => {
                // A module's (an object's) tensors rewritten in place; a
                // tensor has no such method.
                for val in receiver.0.clone() {
                    if val.shape != Shape::Object {
                        continue;
                    }
                    // A module a call made (a loader building a model, a
                    // copy), or a class's method called unbound: no work
                    // on the module state a hook runs for. An object held
                    // on another (`self.opt`, `module.scheduler`) may be
                    // an optimizer, whose state dict is no weight: only
                    // the object itself loads module state.
                    if matches!(
                        val.root,
                        Root::Returned(_) | Root::Unknown | Root::Fresh | Root::Global(_)
                    ) || (model == MethodModel::LoadState && val.attr.is_some())
                    {
                        continue;
                    }
                    let (kind, what) = if model == MethodModel::LoadState {
                        (Kind::CopyIn, "loads a state dict into")
                    } else {
                        (Kind::Move, "replaces every tensor of")
                    };
                    self.effect(
                        kind,
                        node,
                        format!("{what} `{spelled}` via .{method}(...)"),
                        Some(val),
                    );
                    self.acts_on_object();
                }
                Vals::meta()
            }
        }
    }

    pub(super) fn sync(&mut self, node: Node<'t>, detail: String) {
        match self.timing() {
            Some("timing") => self.discount(
                Kind::Sync,
                node,
                detail,
                None,
                "synchronize() stands next to timing calls: it times the forward".to_owned(),
            ),
            Some(_) => self.discount(
                Kind::Sync,
                node,
                detail,
                None,
                "synchronize() stands next to memory statistics calls: it measures memory"
                    .to_owned(),
            ),
            None => self.effect(Kind::Sync, node, detail, None),
        }
    }

    /// `Some("timing")` when the function reads a clock, `Some("memory")`
    /// when it reads memory statistics.
    pub(super) fn timing(&mut self) -> Option<&'static str> {
        if let Some(known) = self.timing {
            return known;
        }
        let found = if crate::analysis::arguments::times_itself(self.function, self.text) {
            Some("timing")
        } else if crate::analysis::arguments::reads_memory_stats(self.function, self.text) {
            Some("memory")
        } else {
            None
        };
        self.timing = Some(found);
        found
    }

    /// `self.x.append(v)`, `.extend`, `.insert`, `.add`, `.update`: the
    /// object's attribute filled.
    pub(super) fn container_store(
        &mut self,
        receiver: Option<Node<'t>>,
        method: &str,
        values: &CallValues,
    ) {
        if !matches!(
            method,
            "append" | "extend" | "insert" | "add" | "update" | "setdefault" | "__setitem__"
        ) {
            return;
        }
        let Some(receiver) = receiver else { return };
        // What was put in.
        let mut stored = Vals::default();
        for vals in &values.positional {
            stored.extend(vals.clone());
        }
        if let Some(attr) = self.self_attribute(receiver) {
            self.self_store(attr, &stored);
        }
        // A local container filled: it holds what was put in.
        if receiver.kind() == "identifier" {
            let name = text_of(receiver, self.text);
            self.env.fill(name, stored.clone());
            // A set's `add` is no list's or dict's: a tensor has one too.
            if method != "add" {
                self.fill_self_alias(name, &stored);
            }
        }
    }

    pub(super) fn setattr(
        &mut self,
        node: Node<'t>,
        values: &CallValues,
        argument_nodes: &[Node<'t>],
    ) {
        let (Some(objects), Some(vals)) = (values.positional.first(), values.positional.get(2))
        else {
            return;
        };
        let spelled = argument_nodes
            .first()
            .map_or_else(String::new, |n| self.spelled(*n));
        if let Some(object) = argument_nodes.first()
            && object.kind() == "identifier"
            && self.is_self(text_of(*object, self.text))
            && let Some(attr) = argument_nodes
                .get(1)
                .filter(|n| n.kind() == "string")
                .map(|n| string_content(*n, self.text))
        {
            self.self_store(attr, vals);
        }
        for object in objects.0.clone() {
            if object.is_fresh() {
                continue;
            }
            if let Some(copied) = vals.copied() {
                let (kind, what) = move_words(copied);
                self.effect(
                    kind,
                    node,
                    format!("{what} and sets it on `{spelled}` via setattr(...)"),
                    Some(object),
                );
            } else if !vals.all_fresh() && vals.iter().any(|v| v.shape == Shape::Tensor) {
                self.effect(
                    Kind::Swap,
                    node,
                    format!("sets other storage on `{spelled}` via setattr(...)"),
                    Some(object),
                );
            }
        }
    }
}
