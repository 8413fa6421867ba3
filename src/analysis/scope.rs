//! A per-file semantic model: Python's scopes (module, class, function,
//! lambda, comprehension) and every binding of a name in each, with where it
//! takes effect and where it is known to hold. Built once per file from
//! `queries/bindings.scm`; questions are asked afterwards, by scope and
//! offset, without the tree:
//!
//! - [`SemanticModel::possible_bindings`]: which bindings of a name can be
//!   the one in effect when code at an offset of a scope runs, following
//!   Python's rules (local if bound anywhere in a function; class bodies not
//!   seen from nested scopes; `global`/`nonlocal`; a class body falls back to
//!   the globals; code inside a function runs at some later time, so every
//!   later binding of an enclosing scope counts too);
//! - [`SemanticModel::means_module`]: whether a name certainly names an
//!   imported module there (the fence's `torch`);
//! - [`SemanticModel::is_unused_name`]: whether a name is bound nowhere and
//!   named nowhere in the file, so that a new import of it shadows nothing.
//!
//! The flow analysis is deliberately simple and errs on the side of "may":
//! a binding *holds* at an offset only when it stands earlier in a block
//! that contains the offset (so it ran whenever the offset runs); any other
//! binding that can run in between (earlier in the text, or anywhere in a
//! loop around the offset, or in a function declaring the name `global`) may
//! be in effect as well.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use tree_sitter::Node;

/// A scope of the file; `ScopeId::MODULE` is the module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScopeId(pub usize);

impl ScopeId {
    pub const MODULE: ScopeId = ScopeId(0);
}

/// A binding of the file, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingId(pub usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    Lambda,
    Comprehension,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub kind: ScopeKind,
    /// The enclosing scope (`None` for the module).
    pub parent: Option<ScopeId>,
    /// Byte range of the node that makes the scope (the whole `def`, `class`,
    /// `lambda`, comprehension; the whole text for the module).
    pub node: Range<usize>,
    /// Names declared `global` here.
    pub globals: BTreeSet<String>,
    /// Names declared `nonlocal` here.
    pub nonlocals: BTreeSet<String>,
    /// `for`/`while` statements that run directly in this scope.
    pub(super) loops: Vec<Range<usize>>,
}

/// How a name is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindingKind {
    /// `import a.b` (binds `a`, path `a`), `import a.b as c` (path `a.b`),
    /// `from m import x [as y]` (path `m.x`; relative: `.m.x`).
    Import {
        path: String,
    },
    /// `from m import *`: binds names nobody can list.
    StarImport {
        module: String,
    },
    /// `x = ...` (also a target in `a, *x = ...` or `x: T = ...`).
    Assignment,
    /// `x: T` with no value: makes `x` local, binds nothing.
    Annotation,
    /// `x += ...`
    Augmented,
    /// `del x`
    Deletion,
    Parameter,
    /// The target of a `for` loop or of a comprehension's `for`.
    LoopTarget,
    /// `with ... as x`
    WithTarget,
    /// `except E as x`
    ExceptTarget,
    /// The implicit `del x` at the end of an `except E as x:` handler.
    ExceptCleared,
    /// `x := ...`
    Walrus,
    /// A capture pattern of `match`.
    MatchCapture,
    Def,
    Class,
}

impl BindingKind {
    /// In words, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            BindingKind::Import { .. } => "an import",
            BindingKind::StarImport { .. } => "a star import",
            BindingKind::Assignment => "an assignment",
            BindingKind::Annotation => "an annotation",
            BindingKind::Augmented => "an augmented assignment",
            BindingKind::Deletion => "a `del`",
            BindingKind::Parameter => "a parameter",
            BindingKind::LoopTarget => "a loop target",
            BindingKind::WithTarget => "a `with ... as` target",
            BindingKind::ExceptTarget | BindingKind::ExceptCleared => "an `except ... as` target",
            BindingKind::Walrus => "an assignment expression",
            BindingKind::MatchCapture => "a `match` capture",
            BindingKind::Def => "a def",
            BindingKind::Class => "a class",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub name: String,
    pub kind: BindingKind,
    /// The scope the name is bound in (for `global x; x = 1` in a function:
    /// the module).
    pub scope: ScopeId,
    /// Byte range of what binds: the `def`/`class` (decorators included),
    /// the `assignment`, the import statement, the target, the parameter.
    pub node: Range<usize>,
    /// The name is bound from this offset on.
    pub point: usize,
    /// Where the binding, once made, is known to hold: the block it stands
    /// in (empty when it never is, as for a walrus inside an expression).
    pub holds_in: Range<usize>,
    /// Made by code of another scope that runs at a time nobody knows (a
    /// function declaring the name `global` or `nonlocal`).
    pub deferred: bool,
}

/// Where a binding is: see the fields of [`Binding`] with these names.
pub(super) struct Extent {
    pub(super) node: Range<usize>,
    pub(super) point: usize,
    pub(super) holds_in: Range<usize>,
}

/// The bindings that can be in effect for a name at one place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lookup {
    /// In the order of the text.
    pub bindings: Vec<BindingId>,
    /// The name may be unbound there (no binding certainly ran before it).
    pub maybe_unbound: bool,
    /// A star import may bind it too.
    pub unknown: bool,
    /// The scope the name resolved in (`None`: bound in no scope on the way).
    pub scope: Option<ScopeId>,
}

/// The scopes and bindings of one file.
#[derive(Debug, Clone, Default)]
pub struct SemanticModel {
    pub(super) scopes: Vec<Scope>,
    pub(super) bindings: Vec<Binding>,
    /// Binding ids by (scope, name), sorted by point.
    pub(super) by_name: BTreeMap<(ScopeId, String), Vec<BindingId>>,
    /// Scope of each scope-making node, by its byte range and kind.
    pub(super) by_node: BTreeMap<(usize, usize, u16), ScopeId>,
    /// Whether a star import stands anywhere at module level.
    pub(super) star_import: bool,
}

/// A scope-making node's key in [`SemanticModel::by_node`].
pub(super) fn node_key(node: Node<'_>) -> (usize, usize, u16) {
    (node.start_byte(), node.end_byte(), node.kind_id())
}

pub(super) fn is_field(parent: Node<'_>, field: &str, child: Node<'_>) -> bool {
    let mut cursor = parent.walk();
    parent
        .children_by_field_name(field, &mut cursor)
        .any(|c| c.id() == child.id())
}

impl SemanticModel {
    /// The scope whose code evaluates `node`: a def's name, decorators,
    /// defaults and annotations belong to the scope around the def; its
    /// parameters and body to the def. A class's bases belong outside, its
    /// body inside. A comprehension's first iterable is evaluated outside.
    pub fn scope_of(&self, node: Node<'_>) -> ScopeId {
        self.scope_with(node, |n| n.parent())
    }

    /// [`SemanticModel::scope_of`], with each node's parent told by
    /// `parent_of` (a tree-sitter node finds its parent by a search from
    /// the root; a model being built looks it up in a map made by one walk).
    pub(super) fn scope_with<'t>(
        &self,
        node: Node<'t>,
        parent_of: impl Fn(Node<'t>) -> Option<Node<'t>>,
    ) -> ScopeId {
        let mut child = node;
        let mut in_default = false;
        let mut in_first_iterable = false;
        let mut current = parent_of(node);
        while let Some(parent) = current {
            let inside = match parent.kind() {
                "default_parameter" | "typed_default_parameter" | "typed_parameter" => {
                    if is_field(parent, "value", child) || is_field(parent, "type", child) {
                        in_default = true;
                    }
                    false
                }
                "function_definition" => {
                    let inside = is_field(parent, "body", child)
                        || (is_field(parent, "parameters", child) && !in_default);
                    in_default = false;
                    inside
                }
                "lambda" => {
                    let inside = is_field(parent, "body", child)
                        || (is_field(parent, "parameters", child) && !in_default);
                    in_default = false;
                    inside
                }
                "class_definition" => is_field(parent, "body", child),
                "for_in_clause" => {
                    if is_field(parent, "right", child) {
                        let first = parent_of(parent).and_then(|comprehension| {
                            let mut cursor = comprehension.walk();
                            comprehension
                                .named_children(&mut cursor)
                                .find(|c| c.kind() == "for_in_clause")
                        });
                        in_first_iterable = first.is_some_and(|f| f.id() == parent.id());
                    }
                    false
                }
                "list_comprehension"
                | "set_comprehension"
                | "dictionary_comprehension"
                | "generator_expression" => {
                    let inside = !in_first_iterable;
                    in_first_iterable = false;
                    inside
                }
                _ => false,
            };
            if inside && let Some(&id) = self.by_node.get(&node_key(parent)) {
                return id;
            }
            child = parent;
            current = parent_of(parent);
        }
        ScopeId::MODULE
    }

    /// The innermost scope whose node spans `offset`, found from the spans
    /// (scopes are kept in the order of their starts), without the tree.
    /// Unlike [`SemanticModel::scope_of`], a def's defaults and decorators
    /// count as inside it.
    pub fn scope_at(&self, offset: usize) -> ScopeId {
        let after = self.scopes.partition_point(|s| s.node.start <= offset);
        let mut id = ScopeId(after.saturating_sub(1));
        loop {
            let Some(scope) = self.scopes.get(id.0) else {
                return ScopeId::MODULE;
            };
            if scope.node.contains(&offset) {
                return id;
            }
            match scope.parent {
                Some(parent) => id = parent,
                None => return ScopeId::MODULE,
            }
        }
    }

    /// Whether `name`, looked up by code at `offset`, can be bound by an
    /// import there (or by a star import, or by nothing the file shows).
    /// False where every binding that can be in effect is something else: a
    /// parameter, an assignment, a loop, `with` or `except` target, a walrus,
    /// a comprehension variable, a `match` capture, a def or a class.
    pub fn may_be_import(&self, name: &str, offset: usize) -> bool {
        if self.scopes.is_empty() {
            return true;
        }
        let found = self.possible_bindings(name, self.scope_at(offset), offset);
        let is_import = |id: &BindingId| {
            matches!(
                self.binding(*id).kind,
                BindingKind::Import { .. } | BindingKind::StarImport { .. }
            )
        };
        if found.bindings.is_empty()
            && let Some(scope) = found.scope.filter(|&s| s != ScopeId::MODULE)
        {
            // Local there, and not bound yet in the order of the text: a
            // comprehension's element runs after its `for` binds the name.
            let local = self.bindings_in(scope, name);
            return local.is_empty() || local.iter().any(is_import);
        }
        found.unknown || found.bindings.is_empty() || found.bindings.iter().any(is_import)
    }

    /// Whether `name`, looked up by code at `offset`, is bound there by an
    /// import and by nothing else that can be in effect.
    pub fn only_import(&self, name: &str, offset: usize) -> bool {
        if self.scopes.is_empty() {
            return false;
        }
        let found = self.possible_bindings(name, self.scope_at(offset), offset);
        !found.unknown
            && !found.bindings.is_empty()
            && found
                .bindings
                .iter()
                .all(|id| matches!(self.binding(*id).kind, BindingKind::Import { .. }))
    }

    /// Every scope, the module first.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    pub fn scope(&self, id: ScopeId) -> &Scope {
        &self.scopes[id.0]
    }

    pub fn binding(&self, id: BindingId) -> &Binding {
        &self.bindings[id.0]
    }

    /// Every binding, in the order they were found.
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The bindings of `name` in `scope` itself, in the order of the text.
    pub fn bindings_in(&self, scope: ScopeId, name: &str) -> &[BindingId] {
        self.by_name
            .get(&(scope, name.to_owned()))
            .map_or(&[], Vec::as_slice)
    }

    /// Whether a star import stands at module level.
    pub fn has_star_import(&self) -> bool {
        self.star_import
    }

    /// The scope a name assigned in `scope` is bound in: the module for a
    /// `global` name, the enclosing function for a `nonlocal` one (with
    /// whether the binding is deferred, made by other code).
    pub(super) fn binding_scope(&self, scope: ScopeId, name: &str) -> (ScopeId, bool) {
        let s = &self.scopes[scope.0];
        if s.kind != ScopeKind::Module && s.globals.contains(name) {
            return (ScopeId::MODULE, true);
        }
        if s.nonlocals.contains(name) {
            let mut up = s.parent;
            while let Some(p) = up {
                let ps = &self.scopes[p.0];
                if matches!(ps.kind, ScopeKind::Function | ScopeKind::Lambda)
                    && (ps.nonlocals.contains(name) || self.binds_locally(p, name))
                {
                    return (self.binding_scope(p, name).0, true);
                }
                up = ps.parent;
            }
        }
        (scope, false)
    }

    /// Whether `name` has a binding of its own in `scope` (declarations
    /// aside).
    pub(super) fn binds_locally(&self, scope: ScopeId, name: &str) -> bool {
        self.by_name
            .get(&(scope, name.to_owned()))
            .is_some_and(|ids| ids.iter().any(|id| !self.bindings[id.0].deferred))
    }

    /// Where code at `at` in `scope` stands as seen from the enclosing
    /// scope `to`: the offset there, and whether it runs at a time not
    /// known (inside a function called later).
    fn position_in(&self, from: ScopeId, to: ScopeId, at: usize, anytime: bool) -> (usize, bool) {
        let (mut at, mut anytime) = (at, anytime);
        let mut current = from;
        while current != to {
            let s = &self.scopes[current.0];
            if matches!(s.kind, ScopeKind::Function | ScopeKind::Lambda) {
                at = s.node.start;
                anytime = true;
            }
            match s.parent {
                Some(p) => current = p,
                None => break,
            }
        }
        (at, anytime)
    }

    /// The bindings of `name` that can be in effect when code at offset `at`
    /// of `scope` looks the name up.
    pub fn possible_bindings(&self, name: &str, scope: ScopeId, at: usize) -> Lookup {
        if self.scopes.is_empty() {
            return Lookup {
                maybe_unbound: true,
                ..Lookup::default()
            };
        }
        self.lookup(name, scope, at, false)
    }

    fn lookup(&self, name: &str, scope: ScopeId, at: usize, anytime: bool) -> Lookup {
        let s = &self.scopes[scope.0];
        if s.kind != ScopeKind::Module && s.globals.contains(name) {
            let (at, anytime) = self.position_in(scope, ScopeId::MODULE, at, anytime);
            return self.flow(name, ScopeId::MODULE, at, anytime);
        }
        if s.nonlocals.contains(name) {
            let mut up = s.parent;
            while let Some(p) = up {
                let ps = &self.scopes[p.0];
                if matches!(ps.kind, ScopeKind::Function | ScopeKind::Lambda)
                    && (self.binds_locally(p, name) || ps.nonlocals.contains(name))
                {
                    let (at, anytime) = self.position_in(scope, p, at, anytime);
                    return self.lookup(name, p, at, anytime);
                }
                up = ps.parent;
            }
        }
        if self.binds_locally(scope, name) || (scope == ScopeId::MODULE) {
            let mut found = self.flow(name, scope, at, anytime);
            if s.kind == ScopeKind::Class && found.maybe_unbound {
                // A class body falls back to the globals, not to the
                // functions around it.
                let (at, anytime) = self.position_in(scope, ScopeId::MODULE, at, anytime);
                let globals = self.flow(name, ScopeId::MODULE, at, anytime);
                found.bindings.extend(globals.bindings);
                found.maybe_unbound = globals.maybe_unbound;
                found.unknown |= globals.unknown;
            }
            return found;
        }
        // Free here: the enclosing scopes, class bodies skipped.
        let mut up = s.parent;
        while let Some(p) = up {
            if self.scopes[p.0].kind != ScopeKind::Class {
                let (at, anytime) = self.position_in(scope, p, at, anytime);
                return self.lookup(name, p, at, anytime);
            }
            up = self.scopes[p.0].parent;
        }
        Lookup {
            maybe_unbound: true,
            unknown: self.star_import,
            ..Lookup::default()
        }
    }

    /// The bindings of `name` in `scope` that can be in effect at `at` (and,
    /// with `anytime`, at any time after it).
    fn flow(&self, name: &str, scope: ScopeId, at: usize, anytime: bool) -> Lookup {
        let ids = self.bindings_in(scope, name);
        let get = |id: &BindingId| &self.bindings[id.0];
        let holding = ids.iter().rev().find(|id| {
            let b = get(id);
            !b.deferred && b.point <= at && b.holds_in.start <= at && at < b.holds_in.end
        });
        let holding_point = holding.map(|id| get(id).point);
        let holding_start = holding.map(|id| get(id).node.start);
        let loops: Vec<&Range<usize>> = self.scopes[scope.0]
            .loops
            .iter()
            .filter(|l| l.contains(&at))
            .collect();
        let bindings = ids
            .iter()
            .copied()
            .filter(|id| {
                let b = get(id);
                Some(*id) == holding.copied()
                    || b.deferred
                    || (b.point <= at && holding_point.is_none_or(|h| b.point > h))
                    || (anytime && b.point > at)
                    || loops.iter().any(|l| {
                        l.contains(&b.node.start) && holding_start.is_none_or(|h| !l.contains(&h))
                    })
            })
            .collect();
        let maybe_unbound = holding.is_none_or(|id| {
            matches!(
                get(id).kind,
                BindingKind::Deletion | BindingKind::ExceptCleared | BindingKind::Annotation
            )
        });
        Lookup {
            bindings,
            maybe_unbound,
            unknown: scope == ScopeId::MODULE && self.star_import,
            scope: Some(scope),
        }
    }

    /// Whether `name`, looked up at `at` in `scope`, certainly names the
    /// module `module` (bound by `import module` or `import module as
    /// name`, and by nothing else that can be in effect there).
    pub fn means_module(&self, name: &str, module: &str, scope: ScopeId, at: usize) -> bool {
        let found = self.possible_bindings(name, scope, at);
        !found.maybe_unbound
            && !found.unknown
            && !found.bindings.is_empty()
            && found.bindings.iter().all(|id| {
                matches!(&self.bindings[id.0].kind, BindingKind::Import { path } if path == module)
            })
    }

    /// The names bound in any scope by an import of exactly `module`, the
    /// module's own name first when it is one of them.
    pub fn import_names_of(&self, module: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| matches!(&b.kind, BindingKind::Import { path } if path == module))
            .map(|b| b.name.clone())
            .collect();
        names.sort_by_key(|n| (n != module, n.clone()));
        names.dedup();
        names
    }

    /// Every binding of `name` in any scope.
    pub fn all_bindings_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Binding> {
        self.bindings.iter().filter(move |b| b.name == name)
    }

    /// This model with `import module [as name]` added at module level at
    /// offset `at`, holding for the rest of the module: what the file would
    /// be after hookfence inserts that import.
    pub fn with_import(&self, name: &str, module: &str, at: usize) -> SemanticModel {
        let mut model = self.clone();
        if model.scopes.is_empty() {
            return model;
        }
        let end = model.scopes[0].node.end;
        model.push(
            Binding {
                name: name.to_owned(),
                kind: BindingKind::Import {
                    path: module.to_owned(),
                },
                scope: ScopeId::MODULE,
                node: at..at,
                point: at,
                holds_in: at..end.max(at) + 1,
                deferred: false,
            },
            ScopeId::MODULE,
        );
        let key = (ScopeId::MODULE, name.to_owned());
        if let Some(ids) = model.by_name.get_mut(&key) {
            let bindings = &model.bindings;
            ids.sort_by_key(|id| (bindings[id.0].point, id.0));
        }
        model
    }

    /// Whether `name` is bound in no scope and appears nowhere in `text` as
    /// a word, so that binding it shadows nothing and changes no lookup.
    pub fn is_unused_name(&self, name: &str, text: &str) -> bool {
        self.all_bindings_of(name).next().is_none()
            && crate::analysis::prefilter::word_ranges(text, &[name], &[]).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(text: &str) -> (tree_sitter::Tree, SemanticModel) {
        let tree = crate::parse::parse(text).expect("parses");
        let model = SemanticModel::build(tree.root_node(), text);
        (tree, model)
    }

    /// Whether `torch` means the module torch where `marker` (a unique
    /// identifier in the text) is evaluated.
    fn torch_at(text: &str, marker: &str) -> bool {
        let (tree, model) = built(text);
        let at = text.find(marker).expect("marker in text");
        let node = tree
            .root_node()
            .descendant_for_byte_range(at, at + marker.len())
            .expect("node at marker");
        let scope = model.scope_of(node);
        model.means_module("torch", "torch", scope, at)
    }

    #[test]
    fn a_plain_import_means_torch_in_every_scope() {
        let text =
            "import torch\nclass A:\n    X\n    def f(self):\n        Y\n        g = lambda: Z\n";
        for marker in ["X", "Y", "Z"] {
            assert!(torch_at(text, marker), "{marker}");
        }
        assert!(torch_at("import torch.nn\nX\n", "X"));
        assert!(!torch_at("import torch.nn as nn\nX\n", "X"));
        assert!(!torch_at("X\nimport torch\n", "X"));
    }

    #[test]
    fn module_level_rebindings_make_torch_uncertain() {
        for text in [
            "import torch\ndel torch\nX\n",
            "import torch\ntorch = None\nX\n",
            "try:\n    import torch\nexcept ImportError:\n    torch = None\nX\n",
            "import torch\nfor torch in []:\n    pass\nX\n",
            "import torch\nif (torch := 1):\n    pass\nX\n",
            "import torch\nwith open('f') as torch:\n    pass\nX\n",
            "import torch\ntry:\n    pass\nexcept Exception as torch:\n    pass\nX\n",
            "import torch\nmatch 1:\n    case torch:\n        pass\nX\n",
            "import torch\nmatch 1:\n    case [1, *torch]:\n        pass\nX\n",
            "import torch\nmatch 1:\n    case int() as torch:\n        pass\nX\n",
            "import torch\ndef torch():\n    pass\nX\n",
            "import torch\nclass torch:\n    pass\nX\n",
            "import torch\nfrom m import *\nX\n",
            "import torch\ntorch, a = 1, 2\nX\n",
            "import torch\ntorch += 1\nX\n",
            "if TYPE_CHECKING:\n    import torch\nX\n",
        ] {
            assert!(!torch_at(text, "X"), "{text}");
        }
        // A value pattern binds nothing; an attribute target neither.
        assert!(torch_at(
            "import torch\nmatch 1:\n    case torch.x:\n        pass\nX\n",
            "X"
        ));
        assert!(torch_at("import torch\ntorch.x = 1\nX\n", "X"));
    }

    #[test]
    fn a_later_rebinding_counts_for_code_that_runs_later() {
        // In a function body: the call may come after `torch = None`.
        let text = "import torch\ndef f():\n    X\ntorch = None\n";
        assert!(!torch_at(text, "X"));
        // At module level, only what ran before.
        assert!(torch_at("import torch\nX\ntorch = None\n", "X"));
        // In a loop, what comes later in the loop runs before the next turn.
        assert!(!torch_at(
            "import torch\nfor i in r:\n    X\n    torch = i\n",
            "X"
        ));
        // ... unless an import in the loop comes first each time.
        assert!(torch_at(
            "for i in r:\n    import torch\n    X\n    torch = i\n",
            "X"
        ));
    }

    #[test]
    fn local_bindings_follow_python_scoping() {
        // A parameter, a local assignment, a class attribute.
        assert!(!torch_at("import torch\ndef f(torch):\n    X\n", "X"));
        assert!(!torch_at("import torch\ndef f(*, torch=1):\n    X\n", "X"));
        assert!(!torch_at(
            "import torch\ndef f():\n    X\n    torch = 1\n",
            "X"
        ));
        assert!(!torch_at(
            "import torch\nclass A:\n    torch = None\n    X\n",
            "X"
        ));
        // A class attribute is not seen from a method's body.
        assert!(torch_at(
            "import torch\nclass A:\n    torch = None\n    def f(self):\n        X\n",
            "X"
        ));
        // A class attribute defined after the lookup: the class body falls
        // back to the globals, where torch is bound.
        assert!(torch_at(
            "import torch\nclass A:\n    X\n    torch = None\n",
            "X"
        ));
        // A default value is evaluated outside the function.
        assert!(torch_at(
            "import torch\ndef f(a=X, torch=1):\n    pass\n",
            "X"
        ));
        // Closure: the enclosing function's local.
        assert!(!torch_at(
            "import torch\ndef f():\n    torch = 1\n    def g():\n        X\n",
            "X"
        ));
        assert!(torch_at(
            "def f():\n    import torch\n    def g():\n        X\n",
            "X"
        ));
        // A comprehension's own target; a walrus in one binds outside it.
        assert!(!torch_at("import torch\n[X for torch in r]\n", "X"));
        assert!(!torch_at(
            "import torch\ndef f():\n    [y for y in r if (torch := y)]\n    X\n",
            "X"
        ));
    }

    #[test]
    fn global_and_nonlocal_declarations_move_the_binding() {
        // A function that rebinds the global may run before the lookup.
        assert!(!torch_at(
            "import torch\ndef f():\n    global torch\n    torch = None\nX\n",
            "X"
        ));
        // `global torch` inside a function: the module's binding.
        assert!(torch_at(
            "import torch\ndef f():\n    global torch\n    X\n",
            "X"
        ));
        assert!(!torch_at(
            "import torch\ndef f():\n    torch = 1\n    def g():\n        nonlocal torch\n        torch = None\n    X\n",
            "X"
        ));
    }

    #[test]
    fn aliases_are_modules_until_rebound() {
        let text = "import torch as th\nX\nth = 3\nY\n";
        let (tree, model) = built(text);
        let node = |m: &str| {
            let at = text.find(m).unwrap();
            (
                model.scope_of(tree.root_node().descendant_for_byte_range(at, at).unwrap()),
                at,
            )
        };
        let (s, x) = node("X");
        assert!(model.means_module("th", "torch", s, x));
        let (s, y) = node("Y");
        assert!(!model.means_module("th", "torch", s, y));
        assert_eq!(model.import_names_of("torch"), ["th"]);
    }

    #[test]
    fn conditional_definitions_are_all_possible() {
        let text = "if c:\n    def fn(): pass\nelse:\n    def fn(): pass\nX\n";
        let (_, model) = built(text);
        let at = text.find('X').unwrap();
        let found = model.possible_bindings("fn", ScopeId::MODULE, at);
        assert_eq!(found.bindings.len(), 2);
        assert!(found.maybe_unbound);
        // An unconditional later definition replaces both.
        let text = "if c:\n    def fn(): pass\nelse:\n    def fn(): pass\ndef fn(): pass\nX\n";
        let (_, model) = built(text);
        let at = text.find('X').unwrap();
        let found = model.possible_bindings("fn", ScopeId::MODULE, at);
        assert_eq!(found.bindings.len(), 1);
        assert!(!found.maybe_unbound);
    }

    #[test]
    fn fresh_names_are_bound_and_named_nowhere() {
        let text = "import torch\n_torch = 1\ndef f(_hookfence_torch): pass\nx = '_t'\n";
        let (_, model) = built(text);
        assert!(!model.is_unused_name("_torch", text));
        assert!(!model.is_unused_name("_hookfence_torch", text));
        assert!(model.is_unused_name("_t2", text));
        // With an inserted import, the new name means torch everywhere.
        let added = model.with_import("_t2", "torch", 0);
        assert!(added.means_module("_t2", "torch", ScopeId::MODULE, text.len()));
    }
}
