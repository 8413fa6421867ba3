//! Expressions: the values an expression can have, and the calls in it
//! with their receivers and arguments.

use tree_sitter::Node;

use super::{
    Acts, ArgumentAt, ArgumentName, CallValues, Kind, LocalEffect, MOST_DEPTH, Walker,
    names_a_class, string_content,
};
use crate::analysis::effects::models::{self, SAVED_TENSORS};
use crate::analysis::effects::value::{Root, Shape, Val, Vals};
use crate::syntax::Field;
use crate::syntax::text_of;

/// The attribute `getattr(obj, name)` reads where `name` is computed.
const COMPUTED_ATTRIBUTE: &str = "<computed>";

impl<'t> Walker<'_, 't> {
    pub(super) fn value_of_name(&self, name: &str) -> Vals {
        if let Some(vals) = self.env.get(name) {
            return vals;
        }
        if let Some(i) = self.params.iter().position(|p| p == name) {
            return Vals::one(Val::new(Root::Param(i as u16), Shape::Object));
        }
        if (self.context.outer_binds)(name) {
            return Vals::one(Val::new(Root::Outer(name.into()), Shape::Object));
        }
        if matches!(name, "None" | "True" | "False") {
            return Vals::meta();
        }
        Vals::one(Val::new(Root::Global(name.into()), Shape::Object))
    }

    /// Whether `name` is bound in this function (not an import or global).
    pub(super) fn is_local(&self, name: &str) -> bool {
        self.env.contains_key(name)
            || self.params.iter().any(|p| p == name)
            || (self.context.outer_binds)(name)
    }

    /// The absolute dotted path a callee spells through the module's
    /// imports, unless its first name is bound here.
    pub(super) fn library_path(&self, callee: Node<'_>) -> Option<String> {
        let dotted = crate::syntax::dotted_name(callee, self.text)?;
        let (first, rest) = match dotted.split_once('.') {
            Some((first, rest)) => (first, Some(rest)),
            None => (dotted.as_str(), None),
        };
        if self.is_local(first) {
            return None;
        }
        let base = self
            .context
            .imports
            .get(first)
            .cloned()
            .unwrap_or_else(|| first.to_owned());
        Some(match rest {
            Some(rest) => format!("{base}.{rest}"),
            None => base,
        })
    }

    pub(super) fn eval(&mut self, node: Node<'t>) -> Vals {
        if self.depth > MOST_DEPTH {
            return Vals::unknown();
        }
        self.depth += 1;
        let vals = self.eval_inner(node);
        self.depth -= 1;
        vals
    }

    pub(super) fn eval_inner(&mut self, node: Node<'t>) -> Vals {
        let text = self.text;
        match node.kind() {
            "identifier" => self.value_of_name(text_of(node, text)),
            "attribute" => {
                let attr = node.field("attribute").map_or("", |a| text_of(a, text));
                let Some(object) = node.field("object") else {
                    return Vals::unknown();
                };
                let objects = self.eval(object);
                if models::meta_attribute(attr) || attr == "grad" {
                    return Vals::meta();
                }
                let state = models::state_attribute(attr);
                objects.map(|val| {
                    let shape = if state { Shape::Tensor } else { val.shape };
                    val.attribute(attr).shaped(shape)
                })
            }
            "subscript" => {
                let Some(value) = node.field("value") else {
                    return Vals::unknown();
                };
                let mut cursor = node.walk();
                let indices: Vec<Node<'t>> = node
                    .children_by_field_name("subscript", &mut cursor)
                    .collect();
                for index in &indices {
                    self.eval(*index);
                }
                // What no literal tells (`[::2]`, `[i]`) is a saved tensor at
                // no known position.
                let saved_at = match indices.as_slice() {
                    [index] if !self.context.method => {
                        Some(saved_position(*index, text).unwrap_or_else(|| "[?]".to_owned()))
                    }
                    _ => None,
                };
                self.eval(value).map(|mut v| {
                    v.copied = v.copied.filter(|_| v.shape != Shape::Meta);
                    // `ctx.saved_tensors[-1]`, `ctx.saved_tensors[1:]`:
                    // what the forward saved there.
                    if let Some(at) = &saved_at
                        && v.root == Root::Param(0)
                        && v.attr.as_deref() == Some(SAVED_TENSORS)
                    {
                        v.attr = Some(format!("{SAVED_TENSORS}{at}").into());
                    }
                    v
                })
            }
            "call" => self.call(node, false),
            "parenthesized_expression"
            | "await"
            | "list_splat"
            | "dictionary_splat"
            | "not_operator"
            | "keyword_argument"
            | "type" => {
                let mut out = Vals::default();
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                let keyword_value = node.field("value");
                for child in children {
                    if node.kind() == "keyword_argument" && Some(child) != keyword_value {
                        continue;
                    }
                    out.extend(self.eval(child));
                }
                if node.kind() == "not_operator" {
                    return Vals::meta();
                }
                out
            }
            "conditional_expression"
            | "boolean_operator"
            | "list"
            | "tuple"
            | "set"
            | "expression_list"
            | "dictionary"
            | "pair" => {
                let mut out = Vals::default();
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                let pair_key = node.field("key");
                for (i, child) in children.into_iter().enumerate() {
                    let vals = self.eval(child);
                    // The condition of `a if c else b` is no value of it.
                    let condition = node.kind() == "conditional_expression" && i == 1;
                    if !condition && Some(child) != pair_key {
                        out.extend(vals);
                    }
                }
                if out.0.is_empty() {
                    return Vals::fresh();
                }
                out
            }
            "list_comprehension"
            | "set_comprehension"
            | "generator_expression"
            | "dictionary_comprehension" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in &children {
                    if child.kind() == "for_in_clause" {
                        let items = child
                            .field("right")
                            .map(|r| self.eval(r))
                            .unwrap_or_default();
                        if let Some(left) = child.field("left") {
                            self.bind_items(left, items);
                        }
                    } else if child.kind() == "if_clause" {
                        self.eval(*child);
                    }
                }
                match node.field("body") {
                    Some(body) => self.eval(body),
                    None => Vals::fresh(),
                }
            }
            "named_expression" => {
                let vals = node
                    .field("value")
                    .map(|v| self.eval(v))
                    .unwrap_or_default();
                if let Some(name) = node.field("name") {
                    self.bind(name, vals.clone());
                }
                vals
            }
            "binary_operator" | "unary_operator" | "comparison_operator" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.eval(child);
                }
                if node.kind() == "comparison_operator" {
                    Vals::meta()
                } else {
                    Vals::fresh()
                }
            }
            "string"
            | "concatenated_string"
            | "integer"
            | "float"
            | "true"
            | "false"
            | "none"
            | "ellipsis" => Vals::meta(),
            "lambda" => Vals::fresh(),
            "yield" => {
                self.facts.generator = true;
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.eval(child);
                }
                Vals::unknown()
            }
            _ => {
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.eval(child);
                }
                Vals::unknown()
            }
        }
    }

    /// A call: its arguments' values recorded, its effect (through the
    /// models) noted, and its value. `statement`: its value is dropped.
    /// `x.attr` where `x` is a tensor and `attr` no attribute torch's
    /// `Tensor` defines: a Python object the code attached to the tensor.
    fn attached_to_tensor(&self, receiver: Node<'t>) -> bool {
        receiver.kind() == "attribute"
            && receiver
                .field("attribute")
                .map(|a| text_of(a, self.text))
                .is_some_and(|attr| {
                    !models::tensor_attribute(attr)
                        && !models::state_attribute(attr)
                        && !models::meta_attribute(attr)
                })
    }

    pub(super) fn call(&mut self, node: Node<'t>, statement: bool) -> Vals {
        let text = self.text;
        let Some(function) = node.field("function") else {
            return Vals::unknown();
        };
        let mut values = CallValues {
            start: node.start_byte(),
            partial: crate::syntax::dotted_name(function, text)
                .is_some_and(|d| d == "partial" || d.ends_with(".partial")),
            ..CallValues::default()
        };
        let mut argument_nodes: Vec<Node<'t>> = Vec::new();
        let mut keyword_nodes: Vec<(String, Node<'t>)> = Vec::new();
        let mut names: Vec<ArgumentName> = Vec::new();
        if let Some(arguments) = node.field("arguments") {
            if arguments.kind() == "generator_expression" {
                values.positional.push(self.eval(arguments));
                argument_nodes.push(arguments);
            } else {
                let mut cursor = arguments.walk();
                let children: Vec<Node<'t>> = arguments.named_children(&mut cursor).collect();
                for argument in children {
                    match argument.kind() {
                        "keyword_argument" => {
                            let name = argument
                                .field("name")
                                .map_or("", |n| text_of(n, text))
                                .to_owned();
                            let vals = argument
                                .field("value")
                                .map(|v| self.eval(v))
                                .unwrap_or_default();
                            if let Some(value) = argument.field("value") {
                                if value.kind() == "identifier" {
                                    names.push(ArgumentName {
                                        at: ArgumentAt::Keyword(name.as_str().into()),
                                        name: text_of(value, text).into(),
                                    });
                                }
                                keyword_nodes.push((name.clone(), value));
                            }
                            values.keywords.push((name.into(), vals));
                        }
                        "list_splat" | "dictionary_splat" => {
                            values.splat = true;
                            match argument.named_child(0) {
                                Some(spread) => {
                                    let vals = self.eval(spread);
                                    values
                                        .splatted
                                        .get_or_insert_with(Box::default)
                                        .extend(vals);
                                }
                                None => {
                                    self.eval(argument);
                                }
                            }
                        }
                        "comment" => {}
                        _ => {
                            let vals = self.eval(argument);
                            if !values.splat {
                                if argument.kind() == "identifier" {
                                    names.push(ArgumentName {
                                        at: ArgumentAt::Position(values.positional.len()),
                                        name: text_of(argument, text).into(),
                                    });
                                }
                                values.positional.push(vals);
                                argument_nodes.push(argument);
                            } else {
                                values.after_splat.push(vals);
                            }
                        }
                    }
                }
            }
        }
        values.names = names.into();
        let positional = values.positional.len();
        // A clock, a timer or memory statistics read here.
        let called = match function.kind() {
            "attribute" => function.field("attribute"),
            "identifier" => Some(function),
            _ => None,
        }
        .map(|n| text_of(n, text));
        if let Some(called) = called
            && (crate::analysis::arguments::TIMING_CALLEES.contains(&called)
                || crate::analysis::arguments::MEMORY_STAT_CALLEES.contains(&called)
                || called.to_ascii_lowercase().contains("timer"))
        {
            self.facts.measures = true;
        }
        let result = match function.kind() {
            "attribute" => {
                let method = function
                    .field("attribute")
                    .map_or("", |a| text_of(a, text))
                    .to_owned();
                if let Some(path) = self.library_path(function) {
                    if let Some(model) = models::function_model(&path) {
                        let result = self.function_model(
                            model,
                            node,
                            &values,
                            &argument_nodes,
                            &keyword_nodes,
                            &path,
                        );
                        self.facts.calls.push(values);
                        return result;
                    }
                    if matches!(
                        path.as_str(),
                        "itertools.chain" | "itertools.chain.from_iterable" | "itertools.islice"
                    ) {
                        let mut out = Vals::default();
                        for vals in &values.positional {
                            out.extend(vals.clone());
                        }
                        self.facts.calls.push(values);
                        return out;
                    }
                }
                let receiver_node = function.field("object");
                let receiver = receiver_node.map(|r| self.eval(r)).unwrap_or_default();
                values.receiver = Some(receiver.clone());
                match models::method_model(&method, positional) {
                    Some(model) => self.method_model(
                        model,
                        &method,
                        node,
                        receiver_node,
                        receiver,
                        &values,
                        &argument_nodes,
                        statement,
                    ),
                    None if matches!(method.as_str(), "pre_forward" | "post_forward") => {
                        self.facts.effects.push(LocalEffect {
                            kind: Kind::Delegate,
                            line: Self::line(node),
                            detail: format!("delegates to other hooks' {method}"),
                            on: None,
                            discount: None,
                            acts: Acts::Tensor,
                            source: None,
                        });
                        Vals::one(Val::returned(node.start_byte(), None))
                    }
                    // `super().__getattr__(name)`, `nn.Module.__getattr__(self,
                    // name)`: an attribute of that object, read through
                    // the lookup torch's Module defines (a parameter, a
                    // buffer or a submodule of it).
                    None if matches!(method.as_str(), "__getattr__" | "__getattribute__") => {
                        let unbound = !receiver.0.is_empty()
                            && receiver.iter().all(|v| matches!(v.root, Root::Global(_)))
                            && positional >= 2;
                        if unbound {
                            values.positional[0].clone()
                        } else {
                            receiver
                        }
                    }
                    None if method == "save_for_backward" => {
                        self.saved_for_backward(&receiver, &values);
                        Vals::default()
                    }
                    None => {
                        self.container_store(receiver_node, &method, &values);
                        if matches!(
                            method.as_str(),
                            "get" | "pop" | "setdefault" | "__getitem__"
                        ) {
                            receiver
                        } else if !receiver.0.is_empty()
                            && receiver.iter().all(|v| v.shape == Shape::Tensor)
                            && receiver_node.is_some_and(|r| self.attached_to_tensor(r))
                            && receiver.iter().all(|v| !v.is_fresh())
                            && values.positional.is_empty()
                            && values.keywords.is_empty()
                            && !values.splat
                        {
                            // A method of an object attached to a weight,
                            // handed nothing (`p.holder.payload()`): what
                            // it hands back is held there, storage of that
                            // weight's own. Handed values (`p.mask.apply(
                            // p.data)`), it computes.
                            receiver
                        } else if !receiver.0.is_empty()
                            && receiver.iter().all(|v| v.shape == Shape::Tensor)
                        {
                            // A tensor's method: a new tensor.
                            Vals::fresh()
                        } else if !receiver.0.is_empty()
                            && receiver.iter().all(Val::is_fresh)
                            && models::TENSOR_ONLY_METHODS.contains(&method.as_str())
                        {
                            // A view or copy of a tensor made here
                            // (`torch.eye(n).unsqueeze(0).repeat(k, 1, 1)`):
                            // made here too.
                            receiver
                        } else {
                            let class = crate::syntax::dotted_name(function, text)
                                .filter(|d| names_a_class(d));
                            Vals::one(Val::returned(node.start_byte(), class.as_deref()))
                        }
                    }
                }
            }
            "identifier" => {
                let name = text_of(function, text);
                if self.is_local(name) {
                    Vals::one(Val::returned(node.start_byte(), None))
                } else if let Some(path) = self.library_path(function)
                    && let Some(model) = models::function_model(&path)
                {
                    self.function_model(
                        model,
                        node,
                        &values,
                        &argument_nodes,
                        &keyword_nodes,
                        &path,
                    )
                } else if name == "super" {
                    self.value_of_name(self.params.first().map_or("self", String::as_str))
                } else if name == "getattr" {
                    let object = values.positional.first().cloned().unwrap_or_default();
                    let attr = argument_nodes
                        .get(1)
                        .filter(|n| n.kind() == "string")
                        .map(|n| string_content(*n, text));
                    match attr {
                        Some(attr) if models::meta_attribute(&attr) => Vals::meta(),
                        Some(attr) => object.map(|v| {
                            let shape = if models::state_attribute(&attr) {
                                Shape::Tensor
                            } else {
                                v.shape
                            };
                            v.attribute(&attr).shaped(shape)
                        }),
                        // An attribute of the object whose name is computed
                        // (`getattr(self, name)`): one of its attributes,
                        // never the object itself, so a moved copy of it is
                        // no module moved in place.
                        None => object.map(|v| v.attribute(COMPUTED_ATTRIBUTE)),
                    }
                } else if name == "setattr" {
                    self.setattr(node, &values, &argument_nodes);
                    Vals::meta()
                } else if models::passes_through(name) || name == "map" {
                    let mut out = Vals::default();
                    for vals in &values.positional {
                        out.extend(vals.clone());
                    }
                    if out.0.is_empty() { Vals::fresh() } else { out }
                } else if models::makes_meta(name) {
                    Vals::meta()
                } else {
                    let class = Some(name).filter(|n| names_a_class(n));
                    Vals::one(Val::returned(node.start_byte(), class))
                }
            }
            // `make(m)(x)`: a call of what a call returned starts where
            // that call does, so its start would name the inner call's
            // result; what calling that returns is not followed.
            "call" => {
                self.eval(function);
                Vals::one(Val::unknown())
            }
            _ => {
                self.eval(function);
                Vals::one(Val::returned(node.start_byte(), None))
            }
        };
        self.facts.calls.push(values);
        result
    }
}

/// The position a literal index or slice of `ctx.saved_tensors` names, as
/// the attribute's suffix: `[2]`, `[-1]` (from the end), `[1:]` (a slice
/// whose items are unpacked from there); `None` where no literal tells.
fn saved_position(index: Node<'_>, text: &str) -> Option<String> {
    fn literal(node: Node<'_>, text: &str) -> Option<i64> {
        match node.kind() {
            "integer" => text_of(node, text).parse().ok(),
            "unary_operator" => {
                let operand = node.field("argument")?;
                let sign = node.field("operator")?;
                let value = literal(operand, text)?;
                match text_of(sign, text) {
                    "-" => Some(-value),
                    "+" => Some(value),
                    _ => None,
                }
            }
            "parenthesized_expression" => literal(node.named_child(0)?, text),
            _ => None,
        }
    }
    if index.kind() == "slice" {
        // `[a:]`, `[a:b]` and `[:b]` start at `a` (0); a step changes what
        // the positions mean.
        let mut start = 0;
        let mut colons = 0;
        let mut cursor = index.walk();
        for child in index.children(&mut cursor) {
            if child.kind() == ":" {
                colons += 1;
            } else if colons == 0 {
                start = literal(child, text)?;
            } else if colons == 2 {
                return None;
            }
        }
        return Some(format!("[{start}:]"));
    }
    literal(index, text).map(|i| format!("[{i}]"))
}
