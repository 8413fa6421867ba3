//! Stores: what binding or storing a value does (a moved copy stored back
//! into module state, `.data =`, a self attribute filled), and loop targets.

use tree_sitter::Node;

use super::copies::move_words;
use super::{Acts, CallValues, Kind, Walker, allocates_storage};
use crate::analysis::effects::models::{self, SAVED_TENSORS, is_saved_tensor};
use crate::analysis::effects::value::{Copied, Root, Shape, Val, Vals};
use crate::syntax::Field;
use crate::syntax::text_of;

/// Most `ctx.<attr> = ...` stores kept for one function.
const MOST_FIRST_PARAM_STORES: usize = 48;

/// Kept where the positions of what was saved cannot be told.
const SAVED_UNKNOWN: &str = "saved_tensors[?]";

/// The `i`-th tensor `ctx.saved_tensors` hands back, as an attribute of
/// `ctx` of its own; `i` below 0 counts from the end.
fn saved_tensor(i: i64) -> String {
    format!("{SAVED_TENSORS}[{i}]")
}

/// Whether an attribute of `ctx` names a saved tensor by its position from
/// the end (`saved_tensors[-1]`).
fn from_the_end(attr: &str) -> bool {
    attr.strip_prefix(SAVED_TENSORS)
        .is_some_and(|rest| rest.starts_with("[-"))
}

/// Where the tensors an attribute of `ctx` unpacks start among those
/// saved: `saved_tensors` at 0, `saved_tensors[a:]` at `a`.
fn saved_slice_start(attr: &str) -> Option<i64> {
    let rest = attr.strip_prefix(SAVED_TENSORS)?;
    if rest.is_empty() {
        return Some(0);
    }
    rest.strip_prefix('[')?.strip_suffix(":]")?.parse().ok()
}

impl<'t> Walker<'_, 't> {
    /// Binds `vals` to a target: a name, a pattern, or a place
    /// (`obj.attr`, `obj[k]`), where storing may be an effect.
    pub(super) fn store(&mut self, left: Node<'t>, vals: Vals, right: Option<Node<'t>>) {
        // A plain assignment's targets are the names it binds, not a
        // comprehension's or a walrus's inside a subscript or an object.
        let assigning = std::mem::replace(&mut self.assigning, false);
        match left.kind() {
            "identifier" => {
                let name = text_of(left, self.text);
                // `p` of `for p in m.parameters()`: the data-flow step
                // names it.
                let vals = vals.map(|mut v| {
                    if let Some(via) = &v.via
                        && via.text.starts_with("comes from")
                    {
                        v.via = Some(std::sync::Arc::new(crate::analysis::effects::value::Via {
                            text: format!("`{name}` {}", via.text),
                            line: via.line,
                        }));
                    }
                    v
                });
                // A parameter rebound: what it was handed is what it held
                // on entry (replaced by an assignment in the body's own
                // straight line, joined after an arm; see `env`).
                if !self.env.contains_key(name) {
                    let first = self.value_of_name(name);
                    if first.iter().any(|v| matches!(v.root, Root::Param(_))) {
                        self.env.seed(name, first);
                    }
                }
                match assigning {
                    true => self.env.assign(name, vals),
                    false => self.env.add(name, vals),
                }
                self.note_alias_of_self(name, right);
                self.note_instance(name, right);
            }
            "attribute" => {
                let Some(object) = left.field("object") else {
                    return;
                };
                let attr = left
                    .field("attribute")
                    .map_or("", |a| text_of(a, self.text))
                    .to_owned();
                let objects = self.eval(object);
                if !self.context.method
                    && object.kind() == "identifier"
                    && !objects.0.is_empty()
                    && objects
                        .iter()
                        .all(|o| o.root == Root::Param(0) && o.attr.is_none())
                    && self.facts.first_param_stores.len() < MOST_FIRST_PARAM_STORES
                {
                    self.facts
                        .first_param_stores
                        .push((attr.as_str().into(), vals.clone()));
                }
                if let Some(attr_of_self) = self.self_attribute(left) {
                    self.note_self_alias(right, &attr_of_self);
                    match right.is_some_and(|r| r.kind() == "none") {
                        true => self.self_store_none(attr_of_self),
                        false => self.self_store(attr_of_self, &vals),
                    }
                }
                self.store_into(left, &objects, &attr, &vals, right);
            }
            "subscript" => {
                let Some(object) = left.field("value") else {
                    return;
                };
                if let Some(index) = left.field("subscript") {
                    self.eval(index);
                }
                let containers = self.eval(object);
                if object.kind() == "identifier" {
                    let name = text_of(object, self.text);
                    self.env.fill(name, vals.clone());
                    self.fill_self_alias(name, &vals);
                }
                if let Some(attr_of_self) = self.self_attribute(left) {
                    self.note_self_alias(right, &attr_of_self);
                    self.self_store(attr_of_self, &vals);
                    // `self.x[k] = None`: what it kept there is dropped.
                    if right.is_some_and(|r| r.kind() == "none") {
                        self.released(left, "`= None`");
                    }
                }
                self.store_into(left, &containers, "", &vals, right);
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple"
            | "list" => {
                let mut cursor = left.walk();
                let parts: Vec<Node<'t>> = left.named_children(&mut cursor).collect();
                // `x, w = ctx.saved_tensors` (or `= ctx.saved_tensors[1:]`):
                // each what the forward saved at its position (up to a
                // starred part).
                let start = if self.context.method || vals.0.is_empty() {
                    None
                } else {
                    let starts: Vec<Option<i64>> = vals
                        .iter()
                        .map(|v| {
                            (v.root == Root::Param(0))
                                .then(|| v.attr.as_deref().and_then(saved_slice_start))
                                .flatten()
                        })
                        .collect();
                    starts
                        .first()
                        .copied()
                        .flatten()
                        .filter(|s| starts.iter().all(|t| *t == Some(*s)))
                };
                let count = i64::try_from(parts.len()).unwrap_or(i64::MAX);
                let starred = parts.iter().any(|p| p.kind() == "list_splat_pattern");
                // `x, w = (None, *ctx.saved_tensors)`: the parts past the
                // leading items are the saved tensors, counted from the end.
                let splat_after = right
                    .filter(|_| !starred && start.is_none() && !self.context.method)
                    .and_then(|r| self.saved_splat_after(r, &vals));
                let mut positional = start.is_some();
                let start = start.unwrap_or(0);
                for (i, part) in parts.into_iter().enumerate() {
                    positional &= part.kind() != "list_splat_pattern";
                    let i = i64::try_from(i).unwrap_or(i64::MAX);
                    let at = start + i;
                    // Past the end of a slice counted from the end.
                    positional &= start >= 0 || at < 0;
                    let vals = if positional {
                        // Unpacked to the end with no starred part: also
                        // its position from the end.
                        let from_end = (!starred && at >= 0).then_some(i - count);
                        let mut out = Vals::default();
                        for at in std::iter::once(at).chain(from_end) {
                            out.extend(vals.clone().map(|v| Val {
                                attr: Some(format!("{SAVED_TENSORS}[{at}]").into()),
                                ..v
                            }));
                        }
                        out
                    } else if let Some((leading, saved)) = &splat_after
                        && i >= *leading
                    {
                        saved.clone().map(|v| Val {
                            attr: Some(format!("{SAVED_TENSORS}[{}]", i - count).into()),
                            ..v
                        })
                    } else {
                        vals.clone()
                    };
                    self.assigning = assigning;
                    self.store(part, vals, None);
                }
            }
            "list_splat_pattern" | "parenthesized_expression" => {
                if let Some(inner) = left.named_child(0) {
                    self.assigning = assigning;
                    self.store(inner, vals, right);
                }
            }
            _ => {}
        }
    }

    /// `(a, *ctx.saved_tensors)` as written: how many items lead the splat
    /// (its last item) and what the splat's value is, where that is what
    /// the forward saved: of `vals` (the right side as evaluated), the
    /// first parameter's `saved_tensors`.
    fn saved_splat_after(&self, right: Node<'t>, vals: &Vals) -> Option<(i64, Vals)> {
        let mut right = right;
        while right.kind() == "parenthesized_expression" {
            right = right.named_child(0)?;
        }
        if !matches!(right.kind(), "tuple" | "list" | "expression_list") {
            return None;
        }
        let mut cursor = right.walk();
        let items: Vec<Node<'t>> = right.named_children(&mut cursor).collect();
        let (last, leading) = items.split_last()?;
        if last.kind() != "list_splat" || leading.iter().any(|i| i.kind() == "list_splat") {
            return None;
        }
        // Only the splat may spell `saved_tensors`: then what the right
        // side holds of it is the splat's.
        let spells_saved = |node: Node<'t>| {
            node.kind() == "attribute"
                && node
                    .field("attribute")
                    .is_some_and(|a| text_of(a, self.text) == SAVED_TENSORS)
        };
        let value = last.named_child(0)?;
        if !spells_saved(value) || leading.iter().any(|&i| spells_saved(i)) {
            return None;
        }
        let saved = Vals(
            vals.iter()
                .filter(|v| v.root == Root::Param(0) && v.attr.as_deref() == Some(SAVED_TENSORS))
                .cloned()
                .collect(),
        );
        if saved.0.is_empty() {
            return None;
        }
        Some((i64::try_from(leading.len()).ok()?, saved))
    }

    /// `ctx.save_for_backward(a, b)` in a function that is no method (a
    /// custom autograd Function's `forward`): `ctx.saved_tensors` hands
    /// each back by position in `backward`, kept as the first parameter's
    /// attribute `saved_tensors[i]` (what `ctx.w = w` keeps as `w`).
    pub(super) fn saved_for_backward(&mut self, receiver: &Vals, values: &CallValues) {
        if self.context.method
            || receiver.0.is_empty()
            || !receiver
                .iter()
                .all(|o| o.root == Root::Param(0) && o.attr.is_none())
        {
            return;
        }
        // Saved with another number of tensors elsewhere in the body
        // (`save_for_backward(x, w)` in one branch, `(w)` in the other):
        // positions from the start mean different tensors there, so none
        // is kept; positions from the end are (`w` is last in both).
        let stores = &mut self.facts.first_param_stores;
        let saved_before: Vec<&str> = stores
            .iter()
            .filter(|(attr, _)| is_saved_tensor(attr))
            .map(|(attr, _)| &**attr)
            .collect();
        let count = if values.splat {
            usize::MAX
        } else {
            values.positional.len()
        };
        let last = i64::try_from(count).unwrap_or(i64::MAX).saturating_sub(1);
        if !saved_before.is_empty() {
            let agrees = saved_before.iter().all(|a| *a != SAVED_UNKNOWN)
                && saved_before.contains(&saved_tensor(last).as_str())
                && !saved_before.contains(&saved_tensor(last + 1).as_str());
            if !agrees {
                stores.retain(|(attr, _)| !is_saved_tensor(attr) || from_the_end(attr));
                if !stores.iter().any(|(attr, _)| &**attr == SAVED_UNKNOWN) {
                    stores.push((SAVED_UNKNOWN.into(), Vals::default()));
                }
                if values.splat {
                    stores.retain(|(attr, _)| !from_the_end(attr));
                    return;
                }
                let count = i64::try_from(values.positional.len()).unwrap_or(i64::MAX);
                for (i, vals) in values.positional.iter().enumerate() {
                    if stores.len() >= MOST_FIRST_PARAM_STORES {
                        break;
                    }
                    let i = i64::try_from(i).unwrap_or(i64::MAX);
                    stores.push((saved_tensor(i - count).into(), vals.clone()));
                }
                return;
            }
        }
        if values.splat {
            stores.push((SAVED_UNKNOWN.into(), Vals::default()));
            return;
        }
        // Each by its position and by its position from the end
        // (`ctx.saved_tensors[-1]`).
        let count = values.positional.len();
        for (i, vals) in values.positional.iter().enumerate() {
            if stores.len() + 2 > MOST_FIRST_PARAM_STORES {
                break;
            }
            let i = i64::try_from(i).unwrap_or(i64::MAX);
            let from_end = i - i64::try_from(count).unwrap_or(i64::MAX);
            stores.push((saved_tensor(i).into(), vals.clone()));
            stores.push((saved_tensor(from_end).into(), vals.clone()));
        }
    }

    /// `object.attr = vals` (`attr` empty: `object[k] = vals`).
    pub(super) fn store_into(
        &mut self,
        place: Node<'t>,
        objects: &Vals,
        attr: &str,
        vals: &Vals,
        right: Option<Node<'t>>,
    ) {
        let text = self.text;
        let spelled = self.spelled(place);
        let into_state = attr == "data"
            || objects
                .iter()
                .any(|o| o.shape == Shape::Tensor && attr.is_empty())
            || models::state_attribute(attr);
        let storage_factory = right.is_some_and(|r| allocates_storage(r, text));
        let source = right.map_or_else(|| "a value".to_owned(), |r| self.moved_spelling(r));
        for object in objects.iter().cloned() {
            if let Some(copied) = vals.copied() {
                // A moved copy stored into a place: back into module state,
                // where it came from, or handed to an async transfer.
                for val in vals.iter().filter(|v| v.copied.is_some()) {
                    // Into module state: the tensor whose storage changes
                    // (`p.data = ...`, `m._parameters[k] = ...`).
                    // Only a copy of storage held somewhere (a parameter,
                    // a capture, an attribute of one) moves or casts into
                    // it; a value computed here or by a call (`(w -
                    // delta).to(dtype)`, `torch.mul(...).to(d)`) is a value
                    // written, not storage moved.
                    let held = matches!(val.root, Root::Param(_) | Root::Outer(_));
                    let into = (attr == "data" || into_state) && !object.is_fresh() && held;
                    // Back where it came from (`self.w = self.w.to(d)`).
                    let back = val.root == object.root
                        && (val.attr.is_none() || val.attr == object.clone().attribute(attr).attr);
                    if into || back || copied.non_blocking || copied.pinned {
                        let (kind, what) = move_words(copied);
                        let target = if into {
                            if attr == "data" || attr.is_empty() {
                                object.clone()
                            } else {
                                object.clone().attribute(attr)
                            }
                        } else if val.is_fresh() {
                            object.clone()
                        } else {
                            val.clone()
                        };
                        self.effect(
                            kind,
                            place,
                            format!("{what} `{source}` and stores it in `{spelled}`"),
                            Some(target),
                        );
                    } else {
                        self.discount(
                            Kind::Move,
                            place,
                            format!("stores a moved copy in `{spelled}`"),
                            Some(val.clone()),
                            format!(
                                "a copy kept aside in `{spelled}`: nothing is stored back into module state"
                            ),
                        );
                    }
                }
                continue;
            }
            if !into_state || object.is_fresh() {
                continue;
            }
            // Other storage held somewhere (`p._shard`, `self.gpu[name]`,
            // a parameter handed in) swapped in; what a call computes here
            // (`x.abs().amax()`) is a value written, not storage moved.
            // A view of the same tensor (`p.data = p.T.contiguous()`, `p.data
            // = p.data.view(...)`) is its own storage, or a copy of it.
            let own_view = |v: &crate::analysis::effects::value::Val| {
                v.root == object.root
                    && v.attr.as_deref().is_none_or(models::tensor_attribute)
                    && object.attr.is_none()
            };
            let held = vals.iter().any(|v| {
                matches!(v.root, Root::Param(_) | Root::Outer(_) | Root::Global(_)) && !own_view(v)
            });
            // What a call returns: the callee's summary tells whether it is
            // storage held somewhere.
            let returned = vals.iter().find_map(|v| match v.root {
                Root::Returned(start) => Some(start),
                _ => None,
            });
            let swapped = held || storage_factory || returned.is_some();
            if swapped {
                let what = if storage_factory {
                    "frees or allocates the storage of"
                } else {
                    "points at other storage:"
                };
                self.effect(
                    if storage_factory {
                        Kind::Storage
                    } else {
                        Kind::Swap
                    },
                    place,
                    format!("{what} `{spelled}`"),
                    Some(object),
                );
                if !held
                    && !storage_factory
                    && let Some(last) = self.facts.effects.last_mut()
                {
                    last.source = returned;
                }
            } else {
                self.discount(
                    Kind::Swap,
                    place,
                    format!("writes a computed value into `{spelled}`"),
                    Some(object),
                    format!(
                        "`{spelled}` is given a value computed here (or by a call), not storage moved, freed or gathered"
                    ),
                );
            }
        }
    }

    pub(super) fn moved_in_place(&mut self, node: Node<'t>, val: Val, copied: Copied, via: &str) {
        let (kind, what) = move_words(copied);
        let name = self.spelled(node);
        if val.shape == Shape::Tensor {
            self.discount(
                kind,
                node,
                format!("{what} `{name}` via {via}"),
                Some(val),
                format!("`{name}` is a tensor: {via} makes a copy, and nothing is stored back"),
            );
        } else {
            self.effect(kind, node, format!("{what} `{name}` via {via}"), Some(val));
            self.acts_on_object();
        }
    }

    /// The effect just noted acts in place on an object (see [`Acts`]).
    pub(super) fn acts_on_object(&mut self) {
        if let Some(last) = self.facts.effects.last_mut() {
            last.acts = Acts::Object;
        }
    }

    pub(super) fn bind(&mut self, target: Node<'t>, vals: Vals) {
        self.store(target, vals, None);
    }

    /// Binds the items of `vals` (a loop over them) to `target`.
    pub(super) fn bind_items(&mut self, target: Node<'t>, vals: Vals) {
        match target.kind() {
            // `for name, p in m.named_parameters()`: the first part names.
            "pattern_list" | "tuple_pattern" | "tuple" => {
                let mut cursor = target.walk();
                let parts: Vec<Node<'t>> = target.named_children(&mut cursor).collect();
                let last = parts.len().saturating_sub(1);
                for (i, part) in parts.into_iter().enumerate() {
                    let vals = if i < last && vals.iter().all(|v| v.via.is_some()) {
                        Vals::meta()
                    } else {
                        vals.clone()
                    };
                    self.bind(part, vals);
                }
            }
            _ => self.bind(target, vals),
        }
    }

    // -- expressions --------------------------------------------------------
}

impl Walker<'_, '_> {
    /// What a chain of moves and casts acts on, spelled: `self.vae` for
    /// `self.vae.cuda()`, `p` for `p.data.to(d)`; else the root name.
    pub(super) fn moved_spelling(&self, node: Node<'_>) -> String {
        let mut current = node;
        while current.kind() == "call" {
            let moved = current
                .field("function")
                .filter(|f| f.kind() == "attribute")
                .filter(|f| {
                    f.field("attribute").is_some_and(|a| {
                        matches!(
                            models::method_model(text_of(a, self.text), 0),
                            Some(models::MethodModel::Move | models::MethodModel::Pin)
                        )
                    })
                })
                .and_then(|f| f.field("object"));
            // A wrapper of the moved copy (`nn.Parameter(w.to(d))`): what
            // its first argument moves.
            let wrapped = || {
                current
                    .field("arguments")
                    .and_then(|a| a.named_child(0))
                    .filter(|a| a.kind() == "call")
            };
            match moved.or_else(wrapped) {
                Some(object) => current = object,
                None => return self.root_spelling(node),
            }
        }
        if current.kind() == "attribute"
            && current
                .field("attribute")
                .is_some_and(|a| text_of(a, self.text) == "data")
        {
            current = current.field("object").unwrap_or(current);
        }
        if matches!(current.kind(), "identifier" | "attribute") && current != node {
            self.spelled(current)
        } else {
            self.root_spelling(node)
        }
    }
}
