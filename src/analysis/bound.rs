//! What a name means where it is used, asked of the file's scope model
//! for the facts the index keeps: whether a callee is the import of that
//! name, bound only by what no fact follows, or bound by no definition, and
//! how a value handed to torch reads there.

use std::collections::HashMap;

use crate::analysis::function_facts::Callee;
use crate::analysis::hook_values::Value;
use crate::analysis::scope::SemanticModel;

/// `value` as the name it starts with is bound at `at`, with Python's
/// scoping (the rule plain calls obey, for every value handed to torch):
/// a bare name bound there by no `def`, class or import (an assignment) is
/// [`Value::Local`], followed only through what is assigned to it; a name
/// bound there only by what no fact follows (a parameter, its default
/// included, a loop, `with` or `except` target, a match capture) is
/// [`Value::Other`], as is a dotted name whose first segment is such a name
/// or an import bound there by something else.
pub(super) fn as_bound_at<'m>(
    value: Value,
    imports: &HashMap<String, String>,
    model: &dyn Fn() -> &'m SemanticModel,
    at: usize,
) -> Value {
    let first = match &value {
        Value::Name(name) => name.as_str(),
        Value::Attribute(dotted) => dotted.split('.').next().unwrap_or(""),
        _ => return value,
    };
    if first == "self" || first == "cls" {
        return value;
    }
    let model = model();
    let unfollowed = bound_only_by_unfollowed(model, first, at);
    let not_the_import = imports.contains_key(first) && !model.may_be_import(first, at);
    match value {
        Value::Name(name) if unfollowed => Value::Other(name),
        Value::Name(name) if not_the_import || bound_by_no_definition(model, &name, at) => {
            Value::Local(name)
        }
        // `handle.pre` with `handle` assigned here stays: the attribute is
        // looked up on what is assigned.
        Value::Attribute(dotted) if unfollowed || not_the_import => Value::Other(dotted),
        value => value,
    }
}

/// Whether `name`, looked up at `at`, is certainly bound there and only by
/// what no fact follows: a parameter (its default included), a loop, `with`
/// or `except` target, a match capture.
fn bound_only_by_unfollowed(model: &SemanticModel, name: &str, at: usize) -> bool {
    use crate::analysis::scope::BindingKind;
    let found = model.possible_bindings(name, model.scope_at(at), at);
    !found.bindings.is_empty()
        && !found.maybe_unbound
        && found.bindings.iter().all(|id| {
            matches!(
                model.binding(*id).kind,
                BindingKind::Parameter
                    | BindingKind::LoopTarget
                    | BindingKind::WithTarget
                    | BindingKind::ExceptTarget
                    | BindingKind::MatchCapture
            )
        })
}

/// Whether `name`, looked up at `at`, is bound there and by no `def`,
/// class or import (nor a star import that may bind it).
pub(super) fn bound_by_no_definition(model: &SemanticModel, name: &str, at: usize) -> bool {
    use crate::analysis::scope::BindingKind;
    let found = model.possible_bindings(name, model.scope_at(at), at);
    !found.unknown
        && !found.bindings.is_empty()
        && found.bindings.iter().all(|id| {
            !matches!(
                model.binding(*id).kind,
                BindingKind::Def
                    | BindingKind::Class
                    | BindingKind::Import { .. }
                    | BindingKind::StarImport { .. }
            )
        })
}

/// Whether `name`, looked up at `at`, can only be a parameter of the
/// function it is looked up in (no assignment, loop or other binding in
/// its body may have replaced it there).
pub(super) fn only_a_parameter(model: &SemanticModel, name: &str, at: usize) -> bool {
    use crate::analysis::scope::BindingKind;
    let found = model.possible_bindings(name, model.scope_at(at), at);
    !found.unknown
        && !found.maybe_unbound
        && !found.bindings.is_empty()
        && found
            .bindings
            .iter()
            .all(|id| model.binding(*id).kind == BindingKind::Parameter)
}

/// The scopes whose `def`s of `name` can be what a call at `at` means:
/// each the start byte of the function whose body binds it, `None` for
/// module level (see [`crate::analysis::function_facts::CallFact::def_scopes`]).
/// `None` where the scope model cannot tell: no model, a star import, or a
/// `def` in a class body (a call in that body).
pub(super) fn def_scopes(
    model: &SemanticModel,
    name: &str,
    at: usize,
) -> Option<Box<[Option<usize>]>> {
    use crate::analysis::scope::{BindingKind, ScopeKind};
    if model.scopes().is_empty() {
        return None;
    }
    let found = model.possible_bindings(name, model.scope_at(at), at);
    if found.unknown {
        return None;
    }
    let mut scopes: Vec<Option<usize>> = Vec::new();
    for id in &found.bindings {
        let binding = model.binding(*id);
        if binding.kind != BindingKind::Def {
            continue;
        }
        let scope = model.scope(binding.scope);
        let start = match scope.kind {
            ScopeKind::Module => None,
            ScopeKind::Function | ScopeKind::Lambda => Some(scope.node.start),
            ScopeKind::Class | ScopeKind::Comprehension => return None,
        };
        if !scopes.contains(&start) {
            scopes.push(start);
        }
    }
    Some(scopes.into_boxed_slice())
}

pub(super) fn import_named_by(callee: &Callee) -> Option<&str> {
    match callee {
        Callee::Name(name) => Some(name),
        Callee::Method {
            receiver: Some(r), ..
        } => r.split('.').next(),
        Callee::Method { receiver: None, .. } => None,
    }
}
