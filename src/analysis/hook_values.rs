//! What a register call hands over: its hook argument, followed through
//! names (with Python's scoping), assignments, `functools.partial`, methods
//! and lambdas to the definitions it can be.

use std::collections::{HashMap, HashSet};

use tree_sitter::Node;

use crate::analysis::fences::FileContext;
use crate::analysis::scope::BindingKind;
use crate::analysis::vocabulary::Vocabulary;
use crate::syntax::Field;
use crate::syntax::strip_space;
use crate::syntax::{class_bases, enclosing_class};
use crate::syntax::{dotted_name, short, text_of};

/// A register call the scan query matched: the call, its argument list,
/// whether it registers a backward hook, and whether a tensor or autograd
/// one (`t.register_hook(f)`, handed gradients).
pub type RegisterCall<'t> = (Node<'t>, Node<'t>, bool, bool);

/// The register call a match of `registrations.scm` captured: the call,
/// its argument list, whether its registrar is a backward one, and whether
/// it is a tensor or autograd one.
pub(crate) fn register_call<'t>(
    registrations: &crate::queries::Registrations,
    captures: &[tree_sitter::QueryCapture<'t>],
) -> Option<RegisterCall<'t>> {
    use crate::syntax::capture;
    Some((
        capture(captures, registrations.call)?,
        capture(captures, registrations.arguments)?,
        capture(captures, registrations.backward).is_some(),
        capture(captures, registrations.tensor).is_some(),
    ))
}

/// The registrar a register call `call` (argument list `arguments`) names
/// (the callee's last segment), and its hook argument at the position that
/// registrar takes it (see [`hook_argument`]).
pub fn registrar_and_hook<'t, 'a>(
    call: Node<'t>,
    arguments: Node<'t>,
    text: &'a str,
    vocabulary: &Vocabulary,
) -> (&'a str, Option<Node<'t>>) {
    let registrar = call
        .field("function")
        .map(|f| match f.field("attribute") {
            Some(attribute) => text_of(attribute, text),
            None => text_of(f, text),
        })
        .unwrap_or_default();
    let position = vocabulary
        .registrar_positions
        .get(registrar)
        .copied()
        .unwrap_or(0);
    (registrar, hook_argument(arguments, text, position))
}

/// The hook a register call receives: `hook=` (or `fn=`), else its positional argument
/// number `position` (0 for torch's registrars). `None` when a splat comes
/// first, hiding which argument it is.
pub fn hook_argument<'t>(arguments: Node<'t>, text: &str, position: usize) -> Option<Node<'t>> {
    let mut cursor = arguments.walk();
    let mut positional = Vec::new();
    let mut splat_before = false;
    for argument in arguments.named_children(&mut cursor) {
        match argument.kind() {
            "keyword_argument" => {
                let name = argument.field("name")?;
                // `fn=`: `register_multi_grad_hook(ts, fn=f)`.
                if matches!(text_of(name, text), "hook" | "fn") {
                    return argument.field("value");
                }
            }
            "list_splat" | "dictionary_splat" => {
                if positional.len() <= position {
                    splat_before = true;
                }
            }
            "comment" => {}
            _ => positional.push(argument),
        }
    }
    if splat_before {
        return None;
    }
    positional.get(position).copied()
}

pub(super) enum Resolved<'t> {
    Def(Node<'t>),
    Lambda(Node<'t>),
    /// `torch.compiler.disable(fn)` passed directly: already fenced; the
    /// callee as written.
    FencedInPlace(Node<'t>, String),
    Unresolved(String),
}

/// Follows a hook expression to the definitions it can name, the way
/// Python's scoping would at `site` (the register call, or the assignment a
/// name was followed through): one for each definition that can be bound
/// there.
pub(super) fn resolve_hook<'t>(
    ctx: &FileContext<'t>,
    expression: Node<'t>,
    site: Node<'t>,
    depth: usize,
) -> Vec<Resolved<'t>> {
    let text = ctx.text;
    if depth > 8 {
        return vec![Resolved::Unresolved(
            "hook bound through too many names".to_owned(),
        )];
    }
    let one = match expression.kind() {
        "parenthesized_expression" => match expression.named_child(0) {
            Some(inner) => return resolve_hook(ctx, inner, site, depth + 1),
            None => Resolved::Unresolved("empty parentheses".to_owned()),
        },
        "lambda" => Resolved::Lambda(expression),
        "identifier" => return resolve_name(ctx, text_of(expression, text), site, depth),
        "attribute" => {
            let (Some(object), Some(attribute)) =
                (expression.field("object"), expression.field("attribute"))
            else {
                return vec![Resolved::Unresolved("unreadable attribute".to_owned())];
            };
            let method = text_of(attribute, text);
            let object_text = text_of(object, text);
            let class = if object.kind() == "identifier"
                && (object_text == "self" || object_text == "cls")
            {
                enclosing_class(site)
            } else if object.kind() == "identifier" {
                ctx.classes
                    .get(object_text)
                    .and_then(|defs| defs.first().copied())
            } else {
                None
            };
            match class.and_then(|class| find_method(ctx, class, method, 0)) {
                Some(def) => Resolved::Def(def),
                None => Resolved::Unresolved(format!(
                    "`{}` is a method of an object hookfence cannot follow",
                    strip_space(text_of(expression, text))
                )),
            }
        }
        "call" => {
            let callee = expression
                .field("function")
                .and_then(|f| dotted_name(f, text));
            let first_argument = expression.field("arguments").and_then(|a| a.named_child(0));
            match (callee, first_argument) {
                (Some(callee), _) if ctx.is_fence_callee(&callee) => {
                    Resolved::FencedInPlace(expression, callee)
                }
                (Some(callee), Some(inner)) if ctx.is_partial(&callee) => {
                    return resolve_hook(ctx, inner, site, depth + 1);
                }
                // An instance of a class defined in this file: its `__call__`.
                (Some(callee), _)
                    if let Some(class) = ctx.classes.get(&callee).and_then(|c| c.first())
                        && let Some(def) = find_method(ctx, *class, "__call__", 0) =>
                {
                    Resolved::Def(def)
                }
                _ => Resolved::Unresolved(format!(
                    "hook is the value returned by `{}`",
                    short(text_of(expression, text))
                )),
            }
        }
        _ => Resolved::Unresolved(format!(
            "hook is `{}`, not a function hookfence can find",
            short(text_of(expression, text))
        )),
    };
    vec![one]
}

/// Looks a bare name up from `site` with Python's scoping (see
/// [`SemanticModel::possible_bindings`]): every definition that can be bound
/// to it when `site` runs is a hook, each followed through assignments.
pub(super) fn resolve_name<'t>(
    ctx: &FileContext<'t>,
    name: &str,
    site: Node<'t>,
    depth: usize,
) -> Vec<Resolved<'t>> {
    let model = &ctx.model;
    let found = model.possible_bindings(name, model.scope_of(site), site.start_byte());
    let mut ids = found.bindings.clone();
    if !ids
        .iter()
        .any(|&id| is_value_binding(&model.binding(id).kind))
    {
        // Nothing bound yet where the call stands: a def further down the
        // same scope is still bound when the hook runs later.
        if let Some(scope) = found.scope {
            ids = model.bindings_in(scope, name).to_vec();
        }
    }
    let mut resolved = Vec::new();
    let mut none_values = 0;
    for id in ids {
        let binding = model.binding(id);
        let node = ctx
            .names
            .root
            .descendant_for_byte_range(binding.node.start, binding.node.end);
        match &binding.kind {
            BindingKind::Def => {
                let def = node.and_then(|n| match n.kind() {
                    "decorated_definition" => n.field("definition"),
                    _ => Some(n),
                });
                if let Some(def) = def.filter(|d| d.kind() == "function_definition") {
                    resolved.push(Resolved::Def(def));
                }
            }
            BindingKind::Assignment => {
                let assignment = node.and_then(|n| assignment_of(n, &binding.node));
                let value = assignment.and_then(|a| {
                    let left = a.field("left")?;
                    (left.kind() == "identifier" && text_of(left, ctx.text) == name)
                        .then(|| a.field("right"))
                        .flatten()
                });
                match (assignment, value) {
                    (Some(_), Some(value)) if value.kind() == "none" => none_values += 1,
                    (Some(assignment), Some(value)) => {
                        resolved.extend(resolve_hook(ctx, value, assignment, depth + 1));
                    }
                    _ => resolved.push(Resolved::Unresolved(format!(
                        "`{name}` is bound by unpacking, which hookfence cannot follow"
                    ))),
                }
            }
            BindingKind::LoopTarget
                if let Some((site, items)) = node.and_then(|n| loop_items(ctx, n, name)) =>
            {
                // `for hook in (pre, post):` binds each item in turn.
                for item in items {
                    resolved.extend(resolve_hook(ctx, item, site, depth + 1));
                }
            }
            BindingKind::Import { path } => resolved.push(Resolved::Unresolved(format!(
                "`{name}` is imported from `{path}`"
            ))),
            BindingKind::Deletion | BindingKind::ExceptCleared | BindingKind::Annotation => {}
            BindingKind::Parameter => resolved.push(Resolved::Unresolved(format!(
                "`{name}` is not a function defined in this file (a parameter or a global?)"
            ))),
            kind => resolved.push(Resolved::Unresolved(format!(
                "`{name}` is bound by {}, which hookfence cannot follow",
                kind.describe()
            ))),
        }
    }
    if resolved.is_empty() && none_values > 0 {
        resolved.push(Resolved::Unresolved(format!("`{name}` is None")));
    }
    if resolved.is_empty() {
        resolved.push(Resolved::Unresolved(format!(
            "`{name}` is not a function defined in this file (a parameter or a global?)"
        )));
    }
    // One entry per definition, and one note per distinct reason.
    let mut seen = HashSet::new();
    resolved.retain(|r| {
        seen.insert(match r {
            Resolved::Def(n) | Resolved::Lambda(n) | Resolved::FencedInPlace(n, _) => {
                format!("{}", n.start_byte())
            }
            Resolved::Unresolved(what) => what.clone(),
        })
    });
    resolved
}

/// The items a loop binds to `name` (its target `target`, the whole
/// target): the elements of a list, tuple or set written out as the
/// iterable, or assigned once to the name iterated over; with the loop, the
/// site they are looked up from. `None` when the items are not written out.
fn loop_items<'t>(
    ctx: &FileContext<'t>,
    target: Node<'t>,
    name: &str,
) -> Option<(Node<'t>, Vec<Node<'t>>)> {
    let text = ctx.text;
    let parent = target.parent()?;
    if !matches!(parent.kind(), "for_statement" | "for_in_clause")
        || parent.field("left") != Some(target)
        || target.kind() != "identifier"
        || text_of(target, text) != name
    {
        return None;
    }
    let mut iterable = parent.field("right")?;
    if iterable.kind() == "identifier" {
        // `hooks = [pre, post]` once, then `for hook in hooks:`.
        let iterated = text_of(iterable, text);
        let model = &ctx.model;
        let found = model.possible_bindings(iterated, model.scope_of(parent), parent.start_byte());
        let [id] = found.bindings.as_slice() else {
            return None;
        };
        let binding = model.binding(*id);
        if found.maybe_unbound || binding.kind != BindingKind::Assignment {
            return None;
        }
        let assignment = ctx
            .names
            .root
            .descendant_for_byte_range(binding.node.start, binding.node.end)
            .and_then(|n| assignment_of(n, &binding.node))?;
        let left = assignment.field("left")?;
        if left.kind() != "identifier" || text_of(left, text) != iterated {
            return None;
        }
        // Named nowhere else in the file: nothing appends to it, aliases
        // it or hands it to a function that could.
        if mentions(ctx.names.root, text, iterated) != 2 {
            return None;
        }
        iterable = assignment.field("right")?;
    }
    while iterable.kind() == "parenthesized_expression" {
        iterable = iterable.named_child(0)?;
    }
    if !matches!(iterable.kind(), "list" | "tuple" | "set") {
        return None;
    }
    let mut cursor = iterable.walk();
    let items: Vec<Node<'t>> = iterable
        .named_children(&mut cursor)
        .filter(|n| n.kind() != "comment")
        .collect();
    if items.iter().any(|n| n.kind().ends_with("splat")) {
        return None;
    }
    Some((parent, items))
}

/// The assignment statement spanning `range` (an assignment binding's),
/// from a node inside it.
fn assignment_of<'t>(node: Node<'t>, range: &std::ops::Range<usize>) -> Option<Node<'t>> {
    std::iter::successors(Some(node), |n| n.parent())
        .find(|n| n.kind() == "assignment" && n.byte_range() == *range)
}

/// How many identifiers below `node` spell `name`.
fn mentions(node: Node<'_>, text: &str, name: &str) -> usize {
    let mut count = 0;
    crate::syntax::preorder(node, |here| {
        if here.kind() == "identifier" && text_of(here, text) == name {
            count += 1;
        }
    });
    count
}

/// Whether a binding gives the name a value that may be a hook.
pub(super) fn is_value_binding(kind: &BindingKind) -> bool {
    !matches!(
        kind,
        BindingKind::Deletion | BindingKind::ExceptCleared | BindingKind::Annotation
    )
}

/// A method named `name` in `class` or, failing that, in its bases defined in
/// the same file.
pub(super) fn find_method<'t>(
    ctx: &FileContext<'t>,
    class: Node<'t>,
    name: &str,
    depth: usize,
) -> Option<Node<'t>> {
    if depth > 16 {
        return None;
    }
    let body = class.field("body")?;
    let mut cursor = body.walk();
    for statement in body.named_children(&mut cursor) {
        let def = match statement.kind() {
            "function_definition" => statement,
            "decorated_definition" => match statement.field("definition") {
                Some(d) if d.kind() == "function_definition" => d,
                _ => continue,
            },
            _ => continue,
        };
        if def
            .field("name")
            .is_some_and(|n| text_of(n, ctx.text) == name)
        {
            return Some(def);
        }
    }
    for base in class_bases(class, ctx.text) {
        let base_name = base.rsplit('.').next().unwrap_or(&base);
        if let Some(base_class) = ctx.classes.get(base_name).and_then(|d| d.first().copied())
            && base_class.id() != class.id()
            && let Some(def) = find_method(ctx, base_class, name, depth + 1)
        {
            return Some(def);
        }
    }
    None
}

/// A value installed as a module's forward, or returned by a factory, as far
/// as the index follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A bare name.
    Name(String),
    /// A bare name bound here by no `def`, class or import (an assignment):
    /// only what is assigned to it, never a function of that name.
    Local(String),
    /// `self.m`, `Cls.m`, `obj.m`.
    Attribute(String),
    /// A lambda (its index in [`ModuleFacts::functions`]).
    Function(usize),
    /// The value a call returns (`make_wrapper(m)`).
    Returned(String),
    /// Anything else, as written.
    Other(String),
}

/// The values an expression can be: each arm of a conditional expression
/// (`A if c else B`, nested ones flattened), else the expression itself.
pub(crate) fn alternatives(node: Node<'_>) -> Vec<Node<'_>> {
    let mut found = Vec::new();
    let mut pending = vec![node];
    while let Some(node) = pending.pop() {
        match node.kind() {
            "conditional_expression" => {
                // Named children: the value, the condition, the other value.
                if let Some(other) = node.named_child(2) {
                    pending.push(other);
                }
                if let Some(value) = node.named_child(0) {
                    pending.push(value);
                }
            }
            "parenthesized_expression" if node.named_child_count() == 1 => {
                pending.extend(node.named_child(0));
            }
            _ => found.push(node),
        }
    }
    found
}

/// What an installed or returned value is, as far as one file tells:
/// wrappers that keep the function (`functools.partial`, `types.MethodType`,
/// `functools.update_wrapper`, `f.__get__(m)`) are seen through.
pub(crate) fn value_of(node: Node<'_>, text: &str, functions: &HashMap<usize, usize>) -> Value {
    match node.kind() {
        "identifier" => Value::Name(text_of(node, text).to_owned()),
        "attribute" => match dotted_name(node, text) {
            Some(dotted) => Value::Attribute(dotted),
            None => Value::Other(crate::syntax::short(text_of(node, text))),
        },
        "lambda" => match functions.get(&node.start_byte()) {
            Some(&i) => Value::Function(i),
            None => Value::Other("lambda".to_owned()),
        },
        "parenthesized_expression" => match node.named_child(0) {
            Some(inner) => value_of(inner, text, functions),
            None => Value::Other(String::new()),
        },
        "call" => {
            let function = node.field("function");
            let first = node.field("arguments").and_then(|a| a.named_child(0));
            let callee = function.and_then(|f| dotted_name(f, text));
            let last = callee.as_deref().map(|c| c.rsplit('.').next().unwrap_or(c));
            if let Some(last) = last
                && matches!(
                    last,
                    "partial" | "MethodType" | "update_wrapper" | "partialmethod"
                )
                && let Some(first) = first
            {
                return value_of(first, text, functions);
            }
            if last == Some("__get__")
                && let Some(object) = function.and_then(|f| f.field("object"))
            {
                return value_of(object, text, functions);
            }
            // `functools.wraps(f)(wrapper)`
            if let Some(f) = function
                && f.kind() == "call"
                && f.field("function")
                    .and_then(|g| dotted_name(g, text))
                    .is_some_and(|g| g == "wraps" || g.ends_with(".wraps"))
                && let Some(first) = first
            {
                return value_of(first, text, functions);
            }
            match callee {
                Some(callee) => Value::Returned(callee),
                None => Value::Other(crate::syntax::short(text_of(node, text))),
            }
        }
        _ => Value::Other(crate::syntax::short(text_of(node, text))),
    }
}
