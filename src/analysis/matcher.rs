//! One file's hook candidates: the classes it defines, every protocol method
//! and every function handed to a register call (through [`hook_values`]),
//! how each is already fenced (through [`fences`]) and where a fence would
//! go; handed on as [`FileFacts`]. Patterns come from `queries/`.
//!
//! [`hook_values`]: crate::analysis::hook_values
//! [`fences`]: crate::analysis::fences
//! [`FileFacts`]: crate::analysis::file_facts::FileFacts

use std::collections::{BTreeMap, HashMap};

use tree_sitter::{Node, QueryCursor, StreamingIterator, Tree};

use crate::analysis::fences::{
    FileContext, collect_suppressions, decorated, decorator_callee, decorators, file_fences,
};
use crate::analysis::fences::{binding_scope, comment_lines_above, lines_speaking_for};
use crate::analysis::file_facts::{
    Candidate, ClassFact, FenceAt, FenceState, FencedBy, FileFacts, Owner, Target, Unresolved,
};
use crate::analysis::hook_values::{Resolved, registrar_and_hook, resolve_hook};
use crate::analysis::scope::{BindingKind, SemanticModel};
use crate::analysis::vocabulary::Vocabulary;
use crate::error::Position;
use crate::queries::QUERIES;
use crate::source::{indentation_at, line_ending_at};
use crate::syntax::Field;
use crate::syntax::strip_space;
use crate::syntax::{capture, for_each_combined, position, text_of};
use crate::syntax::{class_bases, enclosing_class, qualname};

/// Decorators that must stay outermost: the fence goes directly below them.
const OUTERMOST_DECORATORS: &[&str] =
    &["staticmethod", "classmethod", "property", "cached_property"];

/// Every `fullgraph=True` argument in a file the prefilter kept only for the
/// `fullgraph` keyword: the query runs on the places that name it, not on
/// the whole tree.
pub fn fullgraph_arguments(tree: &Tree, text: &str) -> Vec<Position> {
    let keyword = crate::analysis::prefilter::fullgraph_keyword();
    let query = &QUERIES.fullgraph;
    let mut found = BTreeMap::new();
    let mut cursor = QueryCursor::new();
    for at in memchr::memmem::find_iter(text.as_bytes(), keyword) {
        // Matches are the ones whose nodes overlap the range: an argument
        // whose name is this occurrence.
        cursor.set_byte_range(at..at + keyword.len());
        let mut matches = cursor.matches(&query.compiled.query, tree.root_node(), text.as_bytes());
        while let Some(m) = matches.next() {
            if let Some(argument) = capture(m.captures(), query.argument) {
                found
                    .entry(argument.start_byte())
                    .or_insert_with(|| position(argument, text));
            }
        }
    }
    found.into_values().collect()
}

/// Extracts every fact hookfence needs from a parsed file. Files with no
/// protocol method and no register call stop after the class index and the
/// `fullgraph=True` scan. With `anchored`, that first scan visits only the
/// places that name what it looks for (see [`Vocabulary::anchor_ranges`])
/// instead of the whole tree; the facts are the same.
pub fn analyze(tree: &Tree, text: &str, vocabulary: &Vocabulary, anchored: bool) -> FileFacts {
    analyze_with(tree, text, vocabulary, anchored, &[])
}

/// [`analyze`], with functions found by use in this file (`line`, `column`
/// of the `def`, and why each is a hook) made candidates too.
pub fn analyze_with(
    tree: &Tree,
    text: &str,
    vocabulary: &Vocabulary,
    anchored: bool,
    discovered: &[(usize, usize, crate::found::Found)],
) -> FileFacts {
    analyze_scanned(tree, text, vocabulary, anchored, discovered).0
}

/// [`analyze_with`], with the register calls its scan found (in the order
/// of the text), for the module facts of the same tree.
pub fn analyze_scanned<'t>(
    tree: &'t Tree,
    text: &str,
    vocabulary: &Vocabulary,
    anchored: bool,
    discovered: &[(usize, usize, crate::found::Found)],
) -> (
    FileFacts,
    Vec<crate::analysis::module_facts::RegisterCall<'t>>,
) {
    let root = tree.root_node();
    let ranges = anchored.then(|| vocabulary.anchor_ranges(text));

    // One walk for what every parsed file needs.
    let mut class_facts = Vec::new();
    let mut classes: HashMap<String, Vec<Node<'_>>> = HashMap::new();
    let mut fullgraph = Vec::new();
    let mut hook_methods = Vec::new();
    let mut registrations = Vec::new();
    let compiled = vocabulary.compiled();
    let (qc, qh, qr) = (
        &compiled.classes,
        &compiled.hook_methods,
        &compiled.registrations,
    );
    for_each_combined(
        &compiled.scan,
        root,
        text,
        ranges.as_deref(),
        |part, captures| match part {
            0 => {
                if let (Some(def), Some(name)) =
                    (capture(captures, qc.def), capture(captures, qc.name))
                {
                    let name = text_of(name, text).to_owned();
                    class_facts.push((
                        def.start_byte(),
                        ClassFact {
                            name: name.clone(),
                            bases: class_bases(def, text),
                        },
                    ));
                    classes.entry(name).or_default().push(def);
                }
            }
            1 => {
                if let Some(argument) = capture(captures, compiled.fullgraph_argument) {
                    fullgraph.push(position(argument, text));
                }
            }
            2 => {
                if let (Some(class), Some(def)) =
                    (capture(captures, qh.class), capture(captures, qh.def))
                {
                    hook_methods.push((class, def));
                }
            }
            _ => registrations.extend(crate::analysis::hook_values::register_call(qr, captures)),
        },
    );

    // In the order of the text, however the matches were found.
    class_facts.sort_by_key(|(start, _)| *start);
    let class_facts: Vec<ClassFact> = class_facts.into_iter().map(|(_, fact)| fact).collect();
    for defs in classes.values_mut() {
        defs.sort_by_key(|def| def.start_byte());
    }
    fullgraph.sort();
    hook_methods.sort_by_key(|(_, def)| def.start_byte());
    registrations.sort_by_key(|(call, _, _, _)| call.start_byte());
    let register_calls = registrations.clone();

    let import_at = import_insertion_point(root, text);
    if hook_methods.is_empty() && registrations.is_empty() && discovered.is_empty() {
        let facts = FileFacts {
            classes: class_facts,
            fullgraph,
            import_at,
            import_block_end: import_at,
            suppressions: collect_suppressions(root, text).into_keys().collect(),
            ..FileFacts::default()
        };
        return (facts, register_calls);
    }

    let (resolve, bindings, fences) = file_fences(root, text, anchored, vocabulary);

    let mut ctx = FileContext {
        text,
        vocabulary,
        bindings,
        fences,
        names: resolve,
        classes,
        model: SemanticModel::build(root, text),
    };

    // Candidates, keyed by the start of their node so a def found twice (a
    // protocol method that is also registered) is one candidate.
    let mut candidates: BTreeMap<usize, Candidate> = BTreeMap::new();
    let mut unresolved = Vec::new();

    for (class, def) in hook_methods {
        let class_name = class
            .field("name")
            .map_or("", |n| text_of(n, text))
            .to_owned();
        let mut candidate = def_candidate(&ctx, def);
        candidate.owner = Some(Owner {
            bases: class_bases(class, text),
            class: class_name,
        });
        candidates.insert(def.start_byte(), candidate);
    }

    for (call, arguments, backward, tensor) in registrations {
        let at = position(call, text);
        let (method, hook) = registrar_and_hook(call, arguments, text, vocabulary);
        // A one-argument `x.register_hook(f)` where the file defines a
        // function of that name itself (a registry of its own) is no
        // tensor hook.
        if tensor
            && ctx
                .model
                .all_bindings_of(method)
                .any(|b| matches!(b.kind, BindingKind::Def))
        {
            continue;
        }
        // A tensor hook that cannot be followed is not reported: it is no
        // module hook, and what it is handed is gradients.
        let Some(hook) = hook else {
            if tensor {
                continue;
            }
            unresolved.push(Unresolved {
                at,
                what: "hook passed in a form hookfence cannot follow (`*args` or `**kwargs`)"
                    .to_owned(),
            });
            continue;
        };
        let backward = backward.then(|| method.to_owned());
        for resolved in resolve_hook(&ctx, hook, call, 0) {
            match resolved {
                Resolved::Def(def) => {
                    let entry = candidates
                        .entry(def.start_byte())
                        .or_insert_with(|| def_candidate(&ctx, def));
                    entry.note_registration(at, backward.clone(), tensor);
                }
                Resolved::Lambda(lambda) => {
                    let entry = candidates
                        .entry(lambda.start_byte())
                        .or_insert_with(|| lambda_candidate(&ctx, lambda, FenceState::Unfenced));
                    entry.note_registration(at, backward.clone(), tensor);
                }
                Resolved::FencedInPlace(expression, callee) => {
                    let fence = FenceState::Fenced {
                        how: format!("{callee}(...)"),
                        by: ctx.fenced_by(&callee),
                    };
                    let mut candidate = lambda_candidate(&ctx, expression, fence);
                    // Named as the lambda it wraps was named before the
                    // fence: one site, one name, fenced or not.
                    let wrapped = expression
                        .field("arguments")
                        .and_then(|a| a.named_child(0))
                        .filter(|n| n.kind() == "lambda");
                    candidate.qualname = match wrapped {
                        Some(lambda) => {
                            lambda_candidate(&ctx, lambda, FenceState::Unfenced).qualname
                        }
                        None => strip_space(text_of(expression, text)),
                    };
                    candidate.note_registration(at, backward.clone(), tensor);
                    candidates
                        .entry(expression.start_byte())
                        .or_insert(candidate);
                }
                Resolved::Unresolved(_) if tensor => {}
                Resolved::Unresolved(what) => unresolved.push(Unresolved { at, what }),
            }
        }
    }

    // Where each line starts, found once: a file with many functions found
    // by use asks for many of them.
    let line_starts: Vec<usize> = if discovered.is_empty() {
        Vec::new()
    } else {
        line_starts(text)
    };
    for (line, column, why) in discovered {
        if let Some(def) = def_at(root, text, &line_starts, *line, *column) {
            let entry = candidates.entry(def.start_byte()).or_insert_with(|| {
                if def.kind() == "lambda" {
                    lambda_candidate(&ctx, def, FenceState::Unfenced)
                } else {
                    def_candidate(&ctx, def)
                }
            });
            // Found only through a backward registration: listed as a
            // backward hook, unless registered for forward as well. Found
            // for forward (a step of a forward, by use, registered for
            // forward in another file), it runs in the traced forward: a
            // forward hook, whatever backward or tensor registration takes
            // it too.
            match &why.backward {
                None => {
                    entry.backward = None;
                    if entry
                        .discovered
                        .as_ref()
                        .is_some_and(|d| d.backward.is_some())
                    {
                        entry.discovered = Some(why.clone());
                    }
                }
                Some(_) if entry.registered_at.is_none() && entry.discovered.is_none() => {
                    entry.backward.clone_from(&why.backward);
                }
                Some(_) => {}
            }
            entry.discovered.get_or_insert_with(|| why.clone());
        }
    }

    // A name imported only below the first hook does not count as bound: a
    // class body runs at import time, so `@torch.compiler.disable()` above a
    // late `import torch` would raise NameError. Such a file gets its own
    // `import torch` at the top.
    let first_hook = candidates.values().map(|c| c.span.0).min();
    if let Some(first_hook) = first_hook {
        let at = std::mem::take(&mut ctx.bindings.module_level_at);
        ctx.bindings
            .module_level
            .retain(|name, _| at.get(name).is_some_and(|&at| at < first_hook));
    }
    let facts = FileFacts {
        classes: class_facts,
        candidates: candidates.into_values().collect(),
        unresolved,
        uses_relative_imports: ctx.bindings.relative,
        module_bindings: ctx.bindings.module_level,
        import_at,
        import_block_end: import_block_end(root, text).unwrap_or(import_at),
        fullgraph,
        suppressions: ctx.fences.suppressions.keys().copied().collect(),
        model: ctx.model,
    };
    (facts, register_calls)
}

/// What fences through a decorator written `how`: a project's fencing
/// function applied through a call (`@fence_factory(...)`) is a factory
/// whose arguments the guard cannot replay, so it is checked by the marker
/// its product leaves, as torch's own disable is.
pub(crate) fn for_decorator(by: FencedBy, how: &str) -> FencedBy {
    match by {
        FencedBy::Wrapper { .. } if how.ends_with(')') => FencedBy::Torch,
        by => by,
    }
}

fn is_outermost_decorator(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    OUTERMOST_DECORATORS.contains(&last) || matches!(last, "setter" | "getter" | "deleter")
}

fn def_candidate<'t>(ctx: &FileContext<'t>, def: Node<'t>) -> Candidate {
    let text = ctx.text;
    let decorators = decorators(def);
    let name = def.field("name").map_or("", |n| text_of(n, text));
    let owner_class = enclosing_class(def)
        .filter(|c| binding_scope(def).map(|(id, _)| id) == Some(c.id()))
        .and_then(|c| c.field("name"))
        .map(|n| text_of(n, text).to_owned());

    // Already fenced?
    let mut fence = decorators
        .iter()
        .find_map(|d| {
            let callee = decorator_callee(*d, text).filter(|c| ctx.is_fence_callee(c))?;
            let how = strip_space(text_of(*d, text));
            Some(FenceState::Fenced {
                by: for_decorator(ctx.fenced_by(&callee), &how),
                how,
            })
        })
        .unwrap_or(FenceState::Unfenced);
    if fence == FenceState::Unfenced {
        let patched = match &owner_class {
            Some(class) => ctx
                .fences
                .patched_methods
                .get(&(class.clone(), name.to_owned())),
            None if binding_scope(def).is_none() => ctx.fences.patched_functions.get(name),
            None => None,
        };
        if let Some((line, by)) = patched {
            fence = FenceState::Fenced {
                how: format!("reassigned through a disable at line {line}"),
                by: by.clone(),
            };
        }
    }

    // Where the fence goes: directly below the last decorator that must stay
    // outermost, else above every decorator.
    let keep_above = decorators
        .iter()
        .rposition(|d| decorator_callee(*d, text).is_some_and(|c| is_outermost_decorator(&c)));
    let anchor = match keep_above {
        Some(i) => decorators
            .get(i + 1)
            .map_or(def.start_byte(), |d| d.start_byte()),
        None => decorators
            .first()
            .map_or(def.start_byte(), |d| d.start_byte()),
    };
    // At the start of the logical line: not below a line a backslash
    // continues (`\\` alone on the line above, as CPython allows).
    let root = crate::pyrules::root_of(def);
    let insert_at = crate::pyrules::logical_line_start(root, text, anchor);
    let indent = indentation_at(text, insert_at).to_owned();

    // The lines that speak for this definition: its `def` line, its
    // decorators' lines (and comments between them), and the comment lines
    // right above. A suppression there wins over an opt-out.
    if fence == FenceState::Unfenced {
        fence = attached_fence(ctx, &lines_speaking_for(def, text));
    }

    let span_start = decorated(def).map_or(def.start_byte(), |d| d.start_byte());
    Candidate {
        qualname: qualname(def, text),
        at: position(def, text),
        span: (span_start, def.end_byte()),
        owner: None,
        registered_at: None,
        discovered: None,
        trivial: crate::syntax::does_nothing(def, text),
        backward: None,
        registered_with: None,
        tensor_hook: false,
        imported_decorators: if fence == FenceState::Unfenced {
            decorators
                .iter()
                .filter_map(|d| {
                    let callee = decorator_callee(*d, text)?;
                    let first = callee.split('.').next().unwrap_or(&callee);
                    // Bound there by a module-level import (not one under
                    // `if TYPE_CHECKING:`) and by nothing else.
                    (ctx.bindings.module_level.contains_key(first)
                        && ctx.model.only_import(first, d.start_byte()))
                    .then(|| (callee, strip_space(text_of(*d, text))))
                })
                .collect()
        } else {
            Vec::new()
        },
        fence,
        target: Target::Def {
            insert_at,
            line_ending: line_ending_at(text, insert_at),
            indent,
        },
        // Decorators run in the scope the `def` stands in, before it binds.
        fence_at: FenceAt {
            scope: ctx.model.scope_of(def),
            at: span_start,
        },
        signs: crate::analysis::effects::judge::own_signs(def, text, &ctx.bindings.any_scope),
    }
}

/// The byte where each line of `text` starts, the first line's (0) first.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
        .collect()
}

/// The `def` (or `async def`) or `lambda` whose keyword stands at 1-based
/// `line` and `column` (in characters), `line_starts` being the text's
/// [`line_starts`].
fn def_at<'t>(
    root: Node<'t>,
    text: &str,
    line_starts: &[usize],
    line: usize,
    column: usize,
) -> Option<Node<'t>> {
    let start = *line_starts.get(line.checked_sub(1)?)?;
    let end = line_starts.get(line).map_or(text.len(), |&next| next - 1);
    let line_text = text.get(start..end)?;
    let byte_column: usize = line_text
        .chars()
        .take(column.checked_sub(1)?)
        .map(char::len_utf8)
        .sum();
    let point = tree_sitter::Point::new(line - 1, byte_column);
    let mut node = root.descendant_for_point_range(point, point)?;
    loop {
        // The `lambda` keyword token has the kind of the expression it
        // opens: only the named node is the function.
        if matches!(node.kind(), "function_definition" | "lambda")
            && node.is_named()
            && node.start_position() == point
        {
            return Some(node);
        }
        node = node.parent()?;
    }
}

/// The fence state the comments on `lines` give: a suppression, else an
/// opt-out, else none.
fn attached_fence(ctx: &FileContext<'_>, lines: &[usize]) -> FenceState {
    if let Some(line) = lines
        .iter()
        .find(|l| ctx.fences.suppressions.contains_key(l))
    {
        return FenceState::Suppressed {
            line: *line,
            reason: ctx.fences.suppressions[line].clone(),
        };
    }
    match lines.iter().find(|l| ctx.fences.optout_lines.contains(l)) {
        Some(line) => FenceState::OptedOut { line: *line },
        None => FenceState::Unfenced,
    }
}

fn lambda_candidate<'t>(ctx: &FileContext<'t>, lambda: Node<'t>, fence: FenceState) -> Candidate {
    let text = ctx.text;
    // A lambda is suppressed from its own line or the line above.
    // A comment goes where it is a comment: on the comment lines right
    // above the nearest line at or above the lambda's where one can stand
    // (not in a string, not after a backslash continuation).
    let comment_at = crate::pyrules::comment_line_start(
        crate::pyrules::root_of(lambda),
        text,
        lambda.start_byte(),
    );
    let fence = if fence == FenceState::Unfenced {
        let line = lambda.start_position().row + 1;
        let comment_line = text[..comment_at].matches('\n').count() + 1;
        let mut attached = vec![line, line.saturating_sub(1)];
        attached.extend(comment_lines_above(text, comment_at, comment_line));
        attached_fence(ctx, &attached)
    } else {
        fence
    };
    Candidate {
        qualname: qualname(lambda, text),
        at: position(lambda, text),
        span: (lambda.start_byte(), lambda.end_byte()),
        owner: None,
        registered_at: None,
        discovered: None,
        trivial: false,
        backward: None,
        registered_with: None,
        tensor_hook: false,
        imported_decorators: Vec::new(),
        fence,
        target: Target::Lambda {
            start: lambda.start_byte(),
            end: lambda.end_byte(),
            comment_at,
        },
        signs: crate::analysis::effects::judge::own_signs(lambda, text, &ctx.bindings.any_scope),
        fence_at: FenceAt {
            scope: ctx.model.scope_of(lambda),
            at: lambda.start_byte(),
        },
    }
}

/// Where `import torch` goes: after the module docstring and any
/// `from __future__` imports (the statements CPython allows before a future
/// import, see [`crate::pyrules::future_prefix_end`]), at the next logical
/// line; or else after the comments (shebang, coding cookie, licence) that
/// open the file.
fn import_insertion_point(root: Node<'_>, text: &str) -> usize {
    if let Some(last) = crate::pyrules::future_prefix_end(root, text) {
        return crate::pyrules::next_logical_line_start(root, text, last.end_byte());
    }
    let mut cursor = root.walk();
    let first_statement = root
        .named_children(&mut cursor)
        .find(|child| child.kind() != "comment");
    match first_statement {
        Some(statement) => crate::pyrules::logical_line_start(root, text, statement.start_byte()),
        None => text.len(),
    }
}

/// Just past the last import of the block of imports that opens the module
/// (after its docstring, `from __future__` imports and comments), at the
/// next logical line; `None` when it opens with none.
fn import_block_end(root: Node<'_>, text: &str) -> Option<usize> {
    let after = crate::pyrules::future_prefix_end(root, text).map_or(0, |n| n.end_byte());
    let mut cursor = root.walk();
    let mut last = None;
    for child in root.named_children(&mut cursor) {
        if child.end_byte() <= after {
            continue;
        }
        match child.kind() {
            "comment" => {}
            "import_statement" | "import_from_statement" => last = Some(child),
            _ => break,
        }
    }
    last.map(|node| crate::pyrules::next_logical_line_start(root, text, node.end_byte()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts with queries anchored to the words their matches hold, and
    /// with every tree walked whole.
    fn both_ways(text: &str) -> (String, String) {
        let vocabulary = Vocabulary::default();
        let tree = crate::parse::parse(text).unwrap();
        let anchored = analyze(&tree, text, &vocabulary, true);
        let walked = analyze(&tree, text, &vocabulary, false);
        (format!("{anchored:?}"), format!("{walked:?}"))
    }

    #[test]
    fn many_hooks_registered_by_name_resolve_as_with_a_whole_walk() {
        // Past a few dozen names the lookups switch to one whole walk.
        let mut text = String::from("import torch\n\n");
        for i in 0..80 {
            let body = if i % 2 == 0 {
                "m.to('cuda')"
            } else {
                "return None"
            };
            text.push_str(&format!("def hook_{i}(m, args):\n    {body}\n\n"));
            text.push_str(&format!("alias_{i} = hook_{i}\n"));
        }
        for i in 0..80 {
            text.push_str(&format!("model.register_forward_pre_hook(alias_{i})\n"));
        }
        let (anchored, walked) = both_ways(&text);
        assert_eq!(anchored, walked);
        assert_eq!(anchored.matches("qualname: \"hook_").count(), 80);
    }

    #[test]
    fn many_classes_and_fences_are_found_as_with_a_whole_walk() {
        // Past a few hundred places the anchored walk spans them all at once.
        let mut text = String::from("import torch\nfrom hooks import ModelHook\n\n");
        for i in 0..400 {
            let fence = if i % 3 == 0 {
                "    @torch.compiler.disable()\n"
            } else {
                ""
            };
            text.push_str(&format!(
                "class H{i}(ModelHook):\n{fence}    def pre_forward(self, m):\n        m.to('cuda')\n\n"
            ));
        }
        let (anchored, walked) = both_ways(&text);
        assert_eq!(anchored, walked);
        assert_eq!(anchored.matches("ClassFact").count(), 400);
    }

    #[test]
    fn a_function_found_by_use_is_found_by_its_line_and_column() {
        let text = "x = 1\r\ndef f():\r\n    pass\n\n\u{e9} = lambda: 0\ndef last(): pass";
        let tree = crate::parse::parse(text).unwrap();
        let root = tree.root_node();
        let starts = line_starts(text);
        let at = |line, column| def_at(root, text, &starts, line, column).map(|n| n.start_byte());
        assert_eq!(at(2, 1), text.find("def f"));
        // Columns count characters: the lambda stands after a two-byte one.
        assert_eq!(at(5, 5), text.find("lambda"));
        assert_eq!(at(6, 1), text.find("def last"));
        assert_eq!(at(3, 5), None);
        assert_eq!(at(7, 1), None);
        assert_eq!(at(0, 1), None);
    }
}
