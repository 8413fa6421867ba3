//! Builds a file's [`SemanticModel`] in one walk of its tree: every scope
//! (module, class, function, lambda, comprehension) and every binding in it
//! (imports, definitions, assignments and their targets, parameters, `for`,
//! `with`, `except`, walrus, `match` captures, `global`/`nonlocal`).

use std::collections::BTreeSet;
use std::ops::Range;

use tree_sitter::{Node, QueryCursor, StreamingIterator};

use crate::analysis::scope::{
    Binding, BindingId, BindingKind, Extent, Scope, ScopeId, ScopeKind, SemanticModel, is_field,
    node_key,
};
use crate::queries::QUERIES;
use crate::syntax::Field;
use crate::syntax::{strip_space, text_of};

fn scope_kind(kind: &str) -> Option<ScopeKind> {
    Some(match kind {
        "function_definition" => ScopeKind::Function,
        "class_definition" => ScopeKind::Class,
        "lambda" => ScopeKind::Lambda,
        "list_comprehension"
        | "set_comprehension"
        | "dictionary_comprehension"
        | "generator_expression" => ScopeKind::Comprehension,
        _ => return None,
    })
}

/// The names a target binds: `x`, `a, (b, *c)`, `[d]`; attributes and
/// subscripts bind none.
pub(crate) fn target_names<'t>(node: Node<'t>, out: &mut Vec<Node<'t>>) {
    match node.kind() {
        "identifier" => out.push(node),
        "pattern_list"
        | "tuple_pattern"
        | "list_pattern"
        | "tuple"
        | "list"
        | "expression_list"
        | "parenthesized_expression"
        | "list_splat_pattern"
        | "list_splat"
        | "as_pattern_target" => {
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                target_names(child, out);
            }
        }
        _ => {}
    }
}

/// The names a parameter list binds.
fn parameter_names<'t>(parameters: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut cursor = parameters.walk();
    for parameter in parameters.named_children(&mut cursor) {
        match parameter.kind() {
            "identifier" => out.push(parameter),
            "default_parameter" | "typed_default_parameter" => {
                if let Some(name) = parameter.field("name") {
                    target_names(name, out);
                }
            }
            "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => {
                let mut inner = parameter.walk();
                for child in parameter.named_children(&mut inner) {
                    match child.kind() {
                        "identifier" => out.push(child),
                        "list_splat_pattern" | "dictionary_splat_pattern" => {
                            parameter_names_of_splat(child, out);
                        }
                        _ => {}
                    }
                }
            }
            "tuple_pattern" => target_names(parameter, out),
            _ => {}
        }
    }
}

fn parameter_names_of_splat<'t>(splat: Node<'t>, out: &mut Vec<Node<'t>>) {
    let mut cursor = splat.walk();
    out.extend(
        splat
            .named_children(&mut cursor)
            .filter(|c| c.kind() == "identifier"),
    );
}

/// The statement a node stands in: the nearest ancestor (or itself) whose
/// parent is a block or the module; a decorated definition as a whole.
fn statement_of<'t>(node: Node<'t>, parents: &Parents<'t>) -> Node<'t> {
    let mut current = node;
    while let Some(parent) = parents.parent(current) {
        if matches!(parent.kind(), "block" | "module") {
            return current;
        }
        current = parent;
    }
    current
}

/// Where a statement-level binding holds: the block (or module) it stands in.
fn enclosing_block<'t>(statement: Node<'t>, parents: &Parents<'t>) -> Range<usize> {
    parents
        .parent(statement)
        .map_or(statement.byte_range(), |p| p.byte_range())
}

fn ancestor_of_kind<'t>(node: Node<'t>, kind: &str, parents: &Parents<'t>) -> Option<Node<'t>> {
    let mut current = parents.parent(node);
    while let Some(n) = current {
        if n.kind() == kind {
            return Some(n);
        }
        current = parents.parent(n);
    }
    None
}

/// The captures of `bindings.scm` in one file: the nodes that make a scope,
/// and each statement that binds a name with its capture's name.
#[derive(Default)]
pub struct BindingCaptures<'t> {
    scopes: Vec<Node<'t>>,
    binders: Vec<(&'static str, Node<'t>)>,
}

impl<'t> BindingCaptures<'t> {
    /// Adds one match's captures, named by `names` (the capture names of
    /// the query the match comes from).
    pub fn add(&mut self, names: &[&'static str], captures: &[tree_sitter::QueryCapture<'t>]) {
        for c in captures {
            let name = names[c.index as usize];
            if name.starts_with("scope.") {
                self.scopes.push(c.node);
            } else {
                self.binders.push((name, c.node));
            }
        }
    }
}

impl SemanticModel {
    /// Builds the model of the file whose tree has `root`.
    pub fn build(root: Node<'_>, text: &str) -> SemanticModel {
        let q = &QUERIES.bindings;
        let mut captures = BindingCaptures::default();
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(&q.compiled.query, root, text.as_bytes());
        while let Some(m) = matches.next() {
            captures.add(q.compiled.query.capture_names(), m.captures());
        }
        SemanticModel::from_captures(root, text, &captures)
    }

    /// Builds the model of the file whose tree has `root` from the
    /// captures of `bindings.scm`, gathered by whatever walk ran it.
    pub fn from_captures<'t>(
        root: Node<'t>,
        text: &str,
        captures: &BindingCaptures<'t>,
    ) -> SemanticModel {
        let mut scope_nodes = captures.scopes.clone();
        let binders = &captures.binders;
        let mut model = SemanticModel {
            scopes: vec![Scope {
                kind: ScopeKind::Module,
                parent: None,
                node: 0..text.len(),
                globals: BTreeSet::new(),
                nonlocals: BTreeSet::new(),
                loops: Vec::new(),
            }],
            ..SemanticModel::default()
        };
        // The parents of the nodes asked about, from one walk toward them.
        let targets: Vec<Node<'t>> = scope_nodes
            .iter()
            .copied()
            .chain(binders.iter().map(|&(_, node)| node))
            .collect();
        let parents = Parents::toward(root, &targets);
        let parent_of = |n| parents.parent(n);
        // Outer scopes first, so each finds its parent already there.
        scope_nodes.sort_by_key(|n| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
        scope_nodes.dedup_by_key(|n| n.id());
        for node in scope_nodes {
            let Some(kind) = scope_kind(node.kind()) else {
                continue;
            };
            let parent = model.scope_with(node, parent_of);
            let id = ScopeId(model.scopes.len());
            model.scopes.push(Scope {
                kind,
                parent: Some(parent),
                node: node.byte_range(),
                globals: BTreeSet::new(),
                nonlocals: BTreeSet::new(),
                loops: Vec::new(),
            });
            model.by_node.insert(node_key(node), id);
            if kind == ScopeKind::Function || kind == ScopeKind::Lambda {
                model.bind_parameters(node, id, text);
            }
            if kind == ScopeKind::Function || kind == ScopeKind::Class {
                model.bind_definition(node, parent, kind, text, &parents);
            }
        }
        // Declarations first: they decide where the bindings below go.
        for &(name, node) in binders {
            let scope = model.scope_with(node, parent_of);
            let declared = match name {
                "binding.global" => &mut model.scopes[scope.0].globals,
                "binding.nonlocal" => &mut model.scopes[scope.0].nonlocals,
                _ => continue,
            };
            let mut cursor = node.walk();
            for identifier in node.named_children(&mut cursor) {
                declared.insert(text_of(identifier, text).to_owned());
            }
        }
        for &(name, node) in binders {
            model.bind_capture(name, node, text, &parents);
        }
        for ids in model.by_name.values_mut() {
            ids.sort_by_key(|id| (model.bindings[id.0].point, id.0));
        }
        model
    }

    pub(super) fn push(&mut self, mut binding: Binding, evaluated_in: ScopeId) {
        let (scope, deferred) = self.binding_scope(evaluated_in, &binding.name);
        binding.scope = scope;
        binding.deferred |= deferred;
        if binding.deferred {
            binding.holds_in = 0..0;
        }
        let id = BindingId(self.bindings.len());
        self.by_name
            .entry((scope, binding.name.clone()))
            .or_default()
            .push(id);
        self.bindings.push(binding);
    }

    /// Records a binding of the identifier `name`, made in `scope`.
    fn simple(
        &mut self,
        name: Node<'_>,
        kind: BindingKind,
        extent: Extent,
        scope: ScopeId,
        text: &str,
    ) {
        self.push(
            Binding {
                name: text_of(name, text).to_owned(),
                kind,
                scope,
                node: extent.node,
                point: extent.point,
                holds_in: extent.holds_in,
                deferred: false,
            },
            scope,
        );
    }

    fn bind_parameters(&mut self, def: Node<'_>, scope: ScopeId, text: &str) {
        let Some(parameters) = def.field("parameters") else {
            return;
        };
        let mut names = Vec::new();
        parameter_names(parameters, &mut names);
        for name in names {
            self.simple(
                name,
                BindingKind::Parameter,
                Extent {
                    node: name.byte_range(),
                    point: parameters.start_byte(),
                    holds_in: def.byte_range(),
                },
                scope,
                text,
            );
        }
    }

    fn bind_definition<'t>(
        &mut self,
        def: Node<'t>,
        scope: ScopeId,
        kind: ScopeKind,
        text: &str,
        parents: &Parents<'t>,
    ) {
        let Some(name) = def.field("name") else {
            return;
        };
        let statement = statement_of(def, parents);
        let kind = if kind == ScopeKind::Class {
            BindingKind::Class
        } else {
            BindingKind::Def
        };
        self.simple(
            name,
            kind,
            Extent {
                node: statement.byte_range(),
                point: statement.end_byte(),
                holds_in: enclosing_block(statement, parents),
            },
            scope,
            text,
        );
    }

    fn bind_capture<'t>(
        &mut self,
        capture: &str,
        node: Node<'t>,
        text: &str,
        parents: &Parents<'t>,
    ) {
        let scope = self.scope_with(node, |n| parents.parent(n));
        let statement = statement_of(node, parents);
        let in_block = enclosing_block(statement, parents);
        match capture {
            "binding.import" => self.bind_import(node, scope, text, parents),
            "binding.assignment" | "binding.augmented" | "binding.delete" => {
                let kind = match capture {
                    "binding.augmented" => BindingKind::Augmented,
                    "binding.delete" => BindingKind::Deletion,
                    _ if node.field("right").is_none() => BindingKind::Annotation,
                    _ => BindingKind::Assignment,
                };
                let mut targets = Vec::new();
                if capture == "binding.delete" {
                    let mut cursor = node.walk();
                    for child in node.named_children(&mut cursor) {
                        target_names(child, &mut targets);
                    }
                } else if let Some(left) = node.field("left") {
                    target_names(left, &mut targets);
                }
                for target in targets {
                    self.simple(
                        target,
                        kind.clone(),
                        Extent {
                            node: node.byte_range(),
                            point: statement.end_byte(),
                            holds_in: in_block.clone(),
                        },
                        scope,
                        text,
                    );
                }
            }
            "binding.for" | "binding.while" => {
                self.scopes[scope.0].loops.push(node.byte_range());
                if capture == "binding.for"
                    && let Some(left) = node.field("left")
                {
                    let body = node.field("body").map_or(0..0, |b| b.byte_range());
                    let mut targets = Vec::new();
                    target_names(left, &mut targets);
                    for target in targets {
                        self.simple(
                            target,
                            BindingKind::LoopTarget,
                            Extent {
                                node: target.byte_range(),
                                point: left.end_byte(),
                                holds_in: body.clone(),
                            },
                            scope,
                            text,
                        );
                    }
                }
            }
            "binding.comprehension_for" => {
                if let Some(left) = node.field("left") {
                    let scope = self.scope_with(left, |n| parents.parent(n));
                    let holds = parents.parent(node).map_or(0..0, |p| p.byte_range());
                    let mut targets = Vec::new();
                    target_names(left, &mut targets);
                    for target in targets {
                        self.simple(
                            target,
                            BindingKind::LoopTarget,
                            Extent {
                                node: target.byte_range(),
                                point: left.end_byte(),
                                holds_in: holds.clone(),
                            },
                            scope,
                            text,
                        );
                    }
                }
            }
            "binding.with" => {
                let body = ancestor_of_kind(node, "with_statement", parents)
                    .and_then(|w| w.field("body"))
                    .map_or(0..0, |b| b.byte_range());
                let mut targets = Vec::new();
                target_names(node, &mut targets);
                for target in targets {
                    self.simple(
                        target,
                        BindingKind::WithTarget,
                        Extent {
                            node: target.byte_range(),
                            point: node.end_byte(),
                            holds_in: body.clone(),
                        },
                        scope,
                        text,
                    );
                }
            }
            "binding.except" => {
                let Some(clause) = ancestor_of_kind(node, "except_clause", parents) else {
                    return;
                };
                let handler = {
                    let mut cursor = clause.walk();
                    clause
                        .named_children(&mut cursor)
                        .find(|c| c.kind() == "block")
                        .map_or(0..0, |b| b.byte_range())
                };
                let mut targets = Vec::new();
                target_names(node, &mut targets);
                for target in targets {
                    self.simple(
                        target,
                        BindingKind::ExceptTarget,
                        Extent {
                            node: target.byte_range(),
                            point: node.end_byte(),
                            holds_in: handler.clone(),
                        },
                        scope,
                        text,
                    );
                    // Python deletes the name when the handler ends.
                    self.simple(
                        target,
                        BindingKind::ExceptCleared,
                        Extent {
                            node: clause.byte_range(),
                            point: clause.end_byte(),
                            holds_in: 0..0,
                        },
                        scope,
                        text,
                    );
                }
            }
            "binding.walrus" => {
                // Binds in the scope around any comprehensions (PEP 572).
                let mut scope = scope;
                while self.scopes[scope.0].kind == ScopeKind::Comprehension {
                    scope = self.scopes[scope.0].parent.unwrap_or(ScopeId::MODULE);
                }
                let expression = parents.parent(node).unwrap_or(node);
                self.simple(
                    node,
                    BindingKind::Walrus,
                    Extent {
                        node: expression.byte_range(),
                        point: expression.end_byte(),
                        holds_in: 0..0,
                    },
                    scope,
                    text,
                );
            }
            "binding.capture" => {
                let case = ancestor_of_kind(node, "case_clause", parents);
                let holds = case
                    .and_then(|c| c.field("consequence"))
                    .map_or(0..0, |b| b.byte_range());
                let point = case
                    .and_then(|c| c.field("consequence"))
                    .map_or(node.end_byte(), |b| b.start_byte());
                self.simple(
                    node,
                    BindingKind::MatchCapture,
                    Extent {
                        node: node.byte_range(),
                        point,
                        holds_in: holds,
                    },
                    scope,
                    text,
                );
            }
            _ => {}
        }
    }

    fn bind_import<'t>(
        &mut self,
        statement: Node<'t>,
        scope: ScopeId,
        text: &str,
        parents: &Parents<'t>,
    ) {
        let holds = enclosing_block(statement, parents);
        let point = statement.end_byte();
        let module = statement
            .field("module_name")
            .map(|m| strip_space(text_of(m, text)));
        let mut cursor = statement.walk();
        let children: Vec<Node<'_>> = statement.named_children(&mut cursor).collect();
        for child in children {
            if child.kind() == "wildcard_import" {
                if scope == ScopeId::MODULE {
                    self.star_import = true;
                }
                let module = module.clone().unwrap_or_default();
                self.push(
                    Binding {
                        name: "*".to_owned(),
                        kind: BindingKind::StarImport { module },
                        scope,
                        node: statement.byte_range(),
                        point,
                        holds_in: holds.clone(),
                        deferred: false,
                    },
                    scope,
                );
                continue;
            }
            if !is_field(statement, "name", child) {
                continue;
            }
            let (bound, dotted) = match child.kind() {
                "aliased_import" => {
                    let (Some(name), Some(alias)) = (child.field("name"), child.field("alias"))
                    else {
                        continue;
                    };
                    (alias, strip_space(text_of(name, text)))
                }
                "dotted_name" => {
                    let Some(first) = child.named_child(0) else {
                        continue;
                    };
                    let dotted = strip_space(text_of(child, text));
                    match &module {
                        // `import a.b` binds `a` to `a`.
                        None => (first, text_of(first, text).to_owned()),
                        Some(_) => (first, dotted),
                    }
                }
                _ => continue,
            };
            let path = match &module {
                Some(module) if module.ends_with('.') => format!("{module}{dotted}"),
                Some(module) => format!("{module}.{dotted}"),
                None => dotted,
            };
            self.simple(
                bound,
                BindingKind::Import { path },
                Extent {
                    node: statement.byte_range(),
                    point,
                    holds_in: holds.clone(),
                },
                scope,
                text,
            );
        }
    }
}

/// The parents of the nodes the model asks about, found by one forward
/// walk of a cursor toward them in source order: a subtree that cannot hold
/// the next of them is stepped over, not entered, so only the nodes on the
/// way are visited (tree-sitter itself finds a parent by walking down from
/// the root). Every node the cursor lands on has its parent recorded, so a
/// target's ancestors are known too; a node off the way is asked of
/// tree-sitter. Keyed by node id with a fast hash.
pub(super) struct Parents<'t> {
    by_child: foldhash::HashMap<usize, Node<'t>>,
}

impl<'t> Parents<'t> {
    /// The parents of `targets` and of every node above them, below `root`.
    pub(super) fn toward(root: Node<'t>, targets: &[Node<'t>]) -> Parents<'t> {
        let mut order: Vec<Node<'t>> = targets.to_vec();
        order.sort_by_key(|n| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
        order.dedup_by_key(|n| n.id());
        let mut by_child: foldhash::HashMap<usize, Node<'t>> =
            foldhash::HashMap::with_capacity_and_hasher(
                order.len() * 4,
                foldhash::fast::RandomState::default(),
            );
        let mut cursor = root.walk();
        // The nodes above the cursor's, outermost first.
        let mut above: Vec<Node<'t>> = Vec::new();
        for target in order {
            if target.id() == root.id() || by_child.contains_key(&target.id()) {
                continue;
            }
            // Forward from where the last target was; should that miss it
            // (nodes of one span met out of order), once more from the root.
            for _ in 0..2 {
                if walk_to(&mut cursor, &mut above, &mut by_child, target) {
                    break;
                }
                cursor = root.walk();
                above.clear();
            }
        }
        Parents { by_child }
    }

    pub(super) fn parent(&self, node: Node<'t>) -> Option<Node<'t>> {
        match self.by_child.get(&node.id()) {
            Some(&parent) => Some(parent),
            None => node.parent(),
        }
    }
}

/// Moves `cursor` forward in source order to `target`, entering only the
/// nodes whose span holds the target's and recording the parent of every
/// node it lands on; `above` holds the nodes above the cursor's. False when
/// the walk ran out before it (the cursor is then back at its root).
fn walk_to<'t>(
    cursor: &mut tree_sitter::TreeCursor<'t>,
    above: &mut Vec<Node<'t>>,
    by_child: &mut foldhash::HashMap<usize, Node<'t>>,
    target: Node<'t>,
) -> bool {
    loop {
        let node = cursor.node();
        if node.id() == target.id() {
            return true;
        }
        let holds =
            node.start_byte() <= target.start_byte() && target.end_byte() <= node.end_byte();
        if holds && cursor.goto_first_child() {
            above.push(node);
            by_child.insert(cursor.node().id(), node);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                if let Some(&parent) = above.last() {
                    by_child.insert(cursor.node().id(), parent);
                }
                break;
            }
            if !cursor.goto_parent() {
                return false;
            }
            above.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "import os, torch as t\nfrom a.b import (c, d as e)\n\n@deco(1)\nclass A(B, metaclass=M):\n    x: int = 1\n    def f(self, a, *b, c=lambda: 0, **d):\n        global g\n        with open(a) as (h, i), t.no_grad():\n            y = [z for z in b if (w := z)]\n        try:\n            pass\n        except (E, F) as err:\n            pass\n        match a:\n            case [k, *rest] if k: return rest\n        return lambda q=y: q + 1\n\nfor m, n in {}.items():\n    del m\n";

    /// Every node below `root` with its parent, from a full walk.
    fn every_node(root: Node<'_>) -> Vec<Node<'_>> {
        let mut nodes = Vec::new();
        crate::syntax::preorder(root, |node| nodes.push(node));
        nodes
    }

    #[test]
    fn parents_toward_any_targets_are_the_trees_parents() {
        let tree = crate::parse::parse(TEXT).expect("parses");
        let root = tree.root_node();
        let nodes = every_node(root);
        // Every node a target; every third, in reverse order; one node only.
        let every_third: Vec<Node<'_>> = nodes.iter().rev().step_by(3).copied().collect();
        let last_identifier = *nodes
            .iter()
            .rev()
            .find(|n| n.kind() == "identifier")
            .expect("an identifier");
        for targets in [nodes.clone(), every_third, vec![last_identifier]] {
            let parents = Parents::toward(root, &targets);
            for target in &targets {
                if target.id() != root.id() {
                    assert!(parents.by_child.contains_key(&target.id()), "{target:?}");
                }
            }
            for node in &nodes {
                assert_eq!(parents.parent(*node), node.parent(), "{node:?}");
            }
        }
    }

    #[test]
    fn parents_toward_one_node_step_over_the_rest_of_the_file() {
        let mut text = crate::parse::flat_defs(200);
        text.push_str("def last(q):\n    return q\n");
        let tree = crate::parse::parse(&text).expect("parses");
        let root = tree.root_node();
        let mut cursor = root.walk();
        let target = root
            .named_children(&mut cursor)
            .last()
            .expect("the last def");
        let parents = Parents::toward(root, &[target]);
        assert_eq!(parents.parent(target), Some(root));
        // The cursor lands on the 201 statements of the module, not on the
        // thousands of nodes inside the first 200.
        assert!(parents.by_child.len() <= 201, "{}", parents.by_child.len());
        assert!(root.descendant_count() > 5_000);
    }
}
