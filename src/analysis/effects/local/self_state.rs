//! What a method does to its own object's attributes: `self.<attr>` stored
//! or filled, and what it keeps there dropped (`del self.x[k]`).

use tree_sitter::Node;

use super::{Acts, Kind, LocalEffect, SelfStore, Walker};
use crate::analysis::effects::value::{Root, Shape, Vals};
use crate::syntax::Field;
use crate::syntax::text_of;

impl<'t> Walker<'_, 't> {
    /// `self.<attr>` (or `self.<attr>[k]`) as written on the left.
    pub(super) fn self_attribute(&self, node: Node<'_>) -> Option<String> {
        let mut current = node;
        loop {
            match current.kind() {
                "subscript" => current = current.field("value")?,
                "attribute" => {
                    let object = current.field("object")?;
                    if object.kind() == "identifier" && self.is_self(text_of(object, self.text)) {
                        return Some(text_of(current.field("attribute")?, self.text).to_owned());
                    }
                    current = object;
                }
                _ => return None,
            }
        }
    }

    /// `del self.x[k]`, `del self.x`, `self.x.pop(k)`, `self.x[k] = None`:
    /// what `self.x` keeps is dropped (`how` names the way).
    pub(super) fn released(&mut self, place: Node<'t>, how: &str) {
        if !matches!(place.kind(), "subscript" | "attribute") {
            return;
        }
        let Some(attr) = self.self_attribute(place) else {
            return;
        };
        // `self.x` itself, whatever is taken of it.
        let mut object = place;
        while let Some(inner) = match object.kind() {
            "subscript" => object.field("value"),
            "attribute"
                if object
                    .field("attribute")
                    .is_none_or(|a| text_of(a, self.text) != attr) =>
            {
                object.field("object")
            }
            _ => None,
        } {
            object = inner;
        }
        let detail = format!("drops what `self.{attr}` keeps ({how})");
        for val in self
            .eval(object)
            .iter()
            .take(4)
            .cloned()
            .collect::<Vec<_>>()
        {
            self.facts.effects.push(LocalEffect {
                kind: Kind::Release,
                line: Self::line(place),
                detail: detail.clone(),
                on: Some(val),
                discount: None,
                acts: Acts::Tensor,
                source: None,
            });
        }
    }

    /// Notes a store of `vals` into `self.<attr>`.
    pub(super) fn self_store(&mut self, attr: String, vals: &Vals) {
        let is_self = |root: &Root| match root {
            Root::Param(0) => self.context.method,
            Root::Outer(name) => self.context.outer_self == Some(&**name),
            _ => false,
        };
        // A tensor made here but wrapped as module state
        // (`nn.Parameter(torch.ones(n))`) is the module's, not the object's
        // own data.
        let again_of = |v: &crate::analysis::effects::value::Val| {
            is_self(&v.root) && v.attr.as_deref() == Some(attr.as_str())
        };
        let own = vals
            .iter()
            .all(|v| (v.is_fresh() && v.shape != Shape::Tensor) || again_of(v))
            && !vals.0.is_empty();
        let says_nothing = !vals.0.is_empty() && vals.iter().all(again_of);
        let mut classes: Vec<Box<str>> = Vec::new();
        for val in vals.iter() {
            if let Some(class) = &val.class
                && !classes.contains(class)
            {
                classes.push(class.clone());
            }
        }
        self.facts.self_stores.push(SelfStore {
            attr: attr.into(),
            own,
            says_nothing,
            classes,
            vals: vals.clone(),
        });
    }

    /// Notes `self.<attr> = None`: a store that tells nothing of whose
    /// data the attribute holds.
    pub(super) fn self_store_none(&mut self, attr: String) {
        self.facts.self_stores.push(SelfStore {
            attr: attr.into(),
            own: false,
            says_nothing: true,
            classes: Vec::new(),
            vals: Vals::default(),
        });
    }

    /// Notes that `right`, where it is a local name, is kept in
    /// `self.<attr>` too (`self.blocks[k] = blocks`).
    pub(super) fn note_self_alias(&mut self, right: Option<Node<'_>>, attr: &str) {
        let Some(right) = right.filter(|r| r.kind() == "identifier") else {
            return;
        };
        let name = text_of(right, self.text);
        if self.env.contains_key(name) && !self.is_self(name) {
            self.add_self_alias(name.to_owned(), attr.to_owned());
        }
    }

    /// Notes the local `name` as the container `self.<attr>` (once).
    fn add_self_alias(&mut self, name: String, attr: String) {
        let alias = (name, attr);
        if !self.self_aliases.contains(&alias) {
            self.self_aliases.push(alias);
        }
    }

    /// Notes that the local `name` is bound to an attribute of `self` or
    /// an item of one (`blocks = self.blocks[k]`, `blocks =
    /// self.blocks.get(k)`, `blocks = self.blocks.setdefault(k, [])`): the
    /// same object.
    pub(super) fn note_alias_of_self(&mut self, name: &str, right: Option<Node<'_>>) {
        let Some(mut right) = right else { return };
        if right.kind() == "call" {
            // `.get(k)` or `.setdefault(k, [])`: the item kept there; a
            // default `.get(k, [])` hands back is kept nowhere.
            let arguments = right
                .field("arguments")
                .map_or(0, |a| a.named_child_count());
            match right.field("function").filter(|f| f.kind() == "attribute") {
                Some(function)
                    if function.field("attribute").is_some_and(|a| {
                        let method = text_of(a, self.text);
                        (method == "get" && arguments == 1) || method == "setdefault"
                    }) =>
                {
                    let Some(object) = function.field("object") else {
                        return;
                    };
                    right = object;
                }
                _ => return,
            }
        }
        if !matches!(right.kind(), "attribute" | "subscript") {
            return;
        }
        // A slice is a copy (`todo = self.pending[:]`).
        let mut place = right;
        while place.kind() == "subscript" {
            if place
                .field("subscript")
                .is_some_and(|index| index.kind() == "slice")
            {
                return;
            }
            match place.field("value") {
                Some(value) => place = value,
                None => break,
            }
        }
        if let Some(attr) = self.self_attribute(right) {
            self.add_self_alias(name.to_owned(), attr);
        }
    }

    /// `name.append(v)`, `name[k] = v` on a local container that is an
    /// attribute of `self` or an item of one (see [`Self::note_self_alias`],
    /// [`Self::note_alias_of_self`]): a store into that attribute.
    pub(super) fn fill_self_alias(&mut self, name: &str, stored: &Vals) {
        if stored.0.is_empty() {
            return;
        }
        let attrs: Vec<String> = self
            .self_aliases
            .iter()
            .filter(|(alias, _)| alias == name)
            .map(|(_, attr)| attr.clone())
            .collect();
        for attr in attrs {
            self.self_store(attr, stored);
        }
    }

    /// Notes `name = cls(...)` in a class method: an instance of its own
    /// class (see [`Walker::is_self`]).
    pub(super) fn note_instance(&mut self, name: &str, right: Option<Node<'_>>) {
        if !self.context.class_method {
            return;
        }
        let Some(class) = self.params.first() else {
            return;
        };
        let made = right
            .filter(|r| r.kind() == "call")
            .and_then(|r| r.field("function"))
            .is_some_and(|f| f.kind() == "identifier" && text_of(f, self.text) == class);
        if made && !self.instances.iter().any(|n| n == name) {
            self.instances.push(name.to_owned());
        }
    }

    pub(super) fn is_self(&self, name: &str) -> bool {
        if self.instances.iter().any(|n| n == name) {
            return true;
        }
        if self.env.contains_key(name) {
            return false;
        }
        (self.context.method && self.params.first().is_some_and(|p| p == name))
            || (self.context.outer_self == Some(name) && !self.params.iter().any(|p| p == name))
    }
}
