//! Per-file facts: the classes a file defines, every hook candidate in it (a
//! protocol method or a function handed to a register call), how each is
//! already fenced, where a fence would go, and the evidence that it does
//! offload work. Patterns come from `queries/`; Python meaning (imports,
//! scoping, what counts as a fence) is resolved here.

use std::collections::{BTreeMap, HashMap, HashSet};

use tree_sitter::{Node, Query, QueryCursor, StreamingIterator, Tree};

use crate::analysis::scope::{BindingKind, ScopeId, SemanticModel};
use crate::analysis::vocabulary::Vocabulary;
use crate::error::Position;
use crate::queries::{Combined, QUERIES};
use crate::source::{indentation_at, line_ending_at, line_start};

/// Decorators that must stay outermost: the fence goes directly below them.
const OUTERMOST_DECORATORS: &[&str] =
    &["staticmethod", "classmethod", "property", "cached_property"];

/// A class statement, for the cross-file class index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassFact {
    pub name: String,
    /// Bases as written, dotted (`accelerate.hooks.ModelHook`).
    pub bases: Vec<String>,
}

/// How a candidate is already fenced, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FenceState {
    Unfenced,
    /// Fenced; the text says how (`@torch.compiler.disable()`).
    Fenced(String),
    /// A commented-out disable decorator stands right above it.
    OptedOut {
        line: usize,
    },
    /// `# hookfence: ignore[reason]` on its line or right above.
    Suppressed {
        line: usize,
        reason: Option<String>,
    },
}

/// Where a fence goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A `def`: a decorator line inserted at `insert_at` (a line start).
    Def {
        insert_at: usize,
        indent: String,
        line_ending: &'static str,
    },
    /// A lambda, wrapped in place. `comment_at` is the line start where a
    /// comment about it can stand (its own line's, or the nearest above
    /// that is not inside a string or after a backslash continuation).
    Lambda {
        start: usize,
        end: usize,
        comment_at: usize,
    },
}

/// The class a protocol method is defined in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub class: String,
    pub bases: Vec<String>,
}

/// Where a fence of a candidate is evaluated: the scope its decorator (or
/// the call around its lambda) runs in, and the offset there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceAt {
    pub scope: ScopeId,
    pub at: usize,
}

/// A function that may be an offload hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Python's `__qualname__` (`CpuOffload.pre_forward`, `attach.<locals>.hook`).
    pub qualname: String,
    /// Position of the `def` (or `lambda`) keyword.
    pub at: Position,
    /// Byte range of the whole definition, decorators included.
    pub span: (usize, usize),
    /// Set for `pre_forward`/`post_forward` defined in a class body.
    pub owner: Option<Owner>,
    /// Where it is handed to a register call, if it is.
    pub registered_at: Option<Position>,
    /// Why it is a hook when it was found by use: what calls it around the
    /// original forward (see [`crate::found::Discovered`]).
    pub discovered: Option<crate::found::Found>,
    /// Whether its body does nothing: `pass`, `...`, a docstring, or returns
    /// its own parameters (a protocol base's pass-through).
    pub trivial: bool,
    /// The backward registrar (`register_full_backward_hook`, ...) it is
    /// handed to, when every register call that takes it is a backward one.
    pub backward: Option<String>,
    pub fence: FenceState,
    pub target: Target,
    /// Where its fence would be evaluated (see [`FileFacts::model`]).
    pub fence_at: FenceAt,
    /// The signs in its own body, counted or discounted (see
    /// [`crate::analysis::evidence`]).
    pub signs: Vec<crate::analysis::evidence::Sign>,
}

impl Candidate {
    /// The first sign in its own body that counts as offload work.
    pub fn own_evidence(&self) -> Option<&crate::analysis::evidence::Sign> {
        self.signs.iter().find(|s| s.counts())
    }
}

impl Candidate {
    /// A register call takes it: the first one is where it is registered,
    /// and it stays a backward hook only while every one is backward.
    fn note_registration(&mut self, at: Position, backward: Option<String>) {
        if self.registered_at.is_none() {
            self.registered_at = Some(at);
            self.backward = backward;
        } else if backward.is_none() {
            self.backward = None;
        }
    }
}

/// A register call whose hook cannot be found statically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub at: Position,
    pub what: String,
}

/// Everything hookfence needs from one file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    pub classes: Vec<ClassFact>,
    pub candidates: Vec<Candidate>,
    pub unresolved: Vec<Unresolved>,
    /// Names imports bind at module level, with the dotted path each stands for.
    pub module_bindings: BTreeMap<String, String>,
    /// Where `import torch` goes when it is needed.
    pub import_at: usize,
    /// Just past the last import of the imports that open the module: where
    /// the wrap strategy imports its helper.
    pub import_block_end: usize,
    /// Whether the file imports its siblings relatively (`from .x import y`).
    pub uses_relative_imports: bool,
    /// Every `fullgraph=True` argument.
    pub fullgraph: Vec<Position>,
    /// Every `# hookfence: ignore` comment, by line.
    pub suppressions: Vec<usize>,
    /// The file's scopes and bindings (built only for a file with
    /// candidates): what the fence's name means where each is evaluated.
    pub model: SemanticModel,
}

impl FileFacts {
    /// Maps the facts the matcher found in `shadow`'s text back to `original`.
    pub fn restore(&mut self, shadow: &crate::analysis::shadow::Shadow, original: &str) {
        use crate::source::{indentation_at, line_ending_at};
        for c in &mut self.candidates {
            c.at = shadow.position(original, c.at);
            c.registered_at = c.registered_at.map(|at| shadow.position(original, at));
            c.span = (shadow.offset(c.span.0), shadow.offset(c.span.1));
            match &mut c.target {
                Target::Def {
                    insert_at,
                    indent,
                    line_ending,
                } => {
                    *insert_at = shadow.insertion(original, *insert_at);
                    *indent = indentation_at(original, *insert_at).to_owned();
                    *line_ending = line_ending_at(original, *insert_at);
                }
                Target::Lambda {
                    start,
                    end,
                    comment_at,
                } => {
                    *start = shadow.offset(*start);
                    *end = shadow.offset(*end);
                    *comment_at = shadow.insertion(original, *comment_at);
                }
            }
        }
        for u in &mut self.unresolved {
            u.at = shadow.position(original, u.at);
        }
        shadow.restore_positions(&mut self.fullgraph, original);
        self.import_at = shadow.insertion(original, self.import_at);
        self.import_block_end = shadow.insertion(original, self.import_block_end);
    }
}

/// Runs `query` over `node` and calls `each` with every match's captures.
fn for_each_match<'t>(
    query: &Query,
    node: Node<'t>,
    text: &str,
    mut each: impl FnMut(&[tree_sitter::QueryCapture<'t>]),
) {
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(query, node, text.as_bytes());
    while let Some(m) = matches.next() {
        each(m.captures());
    }
}

/// Runs a [`Combined`] query over `node` and calls `each` with the index of
/// the part each match belongs to and its captures. With `ranges`, only
/// matches that overlap one of them are looked for (each once, though it may
/// overlap several): the cursor skips every subtree outside them instead of
/// walking the whole tree.
fn for_each_combined<'t>(
    combined: &Combined,
    node: Node<'t>,
    text: &str,
    ranges: Option<&[std::ops::Range<usize>]>,
    mut each: impl FnMut(usize, &[tree_sitter::QueryCapture<'t>]),
) {
    // Each range is a walk down from `node`: past a few hundred, one range
    // around all of them costs less (and finds the same matches).
    const MOST_RANGES: usize = 256;
    let mut cursor = QueryCursor::new();
    let mut seen: HashSet<(usize, Vec<usize>)> = HashSet::new();
    let everything = 0..text.len();
    let spanned;
    let ranges = match ranges {
        Some([first, .., last]) if ranges.is_some_and(|r| r.len() > MOST_RANGES) => {
            spanned = first.start..last.end;
            Some(std::slice::from_ref(&spanned))
        }
        other => other,
    };
    for range in ranges.unwrap_or(std::slice::from_ref(&everything)) {
        cursor.set_byte_range(range.clone());
        let mut matches = cursor.matches(&combined.query, node, text.as_bytes());
        while let Some(m) = matches.next() {
            if ranges.is_some() {
                let key = m.captures().iter().map(|c| c.node.id()).collect();
                if !seen.insert((m.pattern_index, key)) {
                    continue;
                }
            }
            each(combined.part(m.pattern_index), m.captures());
        }
    }
}

fn capture<'t>(captures: &[tree_sitter::QueryCapture<'t>], index: u32) -> Option<Node<'t>> {
    captures.iter().find(|c| c.index == index).map(|c| c.node)
}

fn node_text<'a>(node: Node<'_>, text: &'a str) -> &'a str {
    &text[node.byte_range()]
}

/// The dotted name an identifier/attribute chain spells (`torch.compiler.disable`),
/// or `None` for anything else (a subscript, a call, ...).
fn dotted(node: Node<'_>, text: &str) -> Option<String> {
    match node.kind() {
        "identifier" => Some(node_text(node, text).to_owned()),
        "attribute" => {
            let object = dotted(node.child_by_field_name("object")?, text)?;
            let attribute = node.child_by_field_name("attribute")?;
            Some(format!("{object}.{}", node_text(attribute, text)))
        }
        _ => None,
    }
}

/// Where `node` starts. The line comes from the tree and the column from the
/// line's own text, so the cost does not grow with the offset (counting lines
/// from the top for every hook made large files quadratic).
fn position(node: Node<'_>, text: &str) -> Position {
    let offset = node.start_byte();
    let column = text[line_start(text, offset)..offset].chars().count() + 1;
    Position {
        line: node.start_position().row + 1,
        column,
    }
}

/// Whether a resolved dotted path is torch's disable (or a project's, such
/// as DeepSpeed's `deepspeed.runtime.compiler.disable`), or the `no_compile`
/// helper of the wrap strategy.
/// A disable path, or a configured fence spelling (matched on the resolved
/// path or as its last dotted segments).
pub(crate) fn is_fence_path(path: &str, vocabulary: &Vocabulary) -> bool {
    is_disable_path(path)
        || vocabulary
            .fence_spellings
            .iter()
            .any(|s| path == s || path.ends_with(&format!(".{s}")))
}

fn is_disable_path(path: &str) -> bool {
    let mut segments = path.rsplit('.');
    matches!(
        (segments.next(), segments.next()),
        (Some("disable"), Some("compiler" | "_dynamo" | "dynamo"))
            | (Some("_disable_dynamo"), Some("torch"))
            | (Some(crate::analysis::vocabulary::WRAP_HELPER_FUNCTION), _)
    )
}

/// Import bindings of one file.
#[derive(Default)]
pub(crate) struct Bindings {
    /// Every import in the file, whatever its scope: name -> dotted path.
    pub(crate) any_scope: HashMap<String, String>,
    /// Imports at module level (not under a def, a class or `if TYPE_CHECKING`).
    module_level: BTreeMap<String, String>,
    /// Where the first module-level import of each of those names starts.
    module_level_at: HashMap<String, usize>,
    /// Whether any `from .x import y` appears.
    relative: bool,
}

impl Bindings {
    pub(crate) fn collect(matches: &[Vec<tree_sitter::QueryCapture<'_>>], text: &str) -> Bindings {
        let q = &QUERIES.imports;
        let mut bindings = Bindings::default();
        for captures in matches {
            let relative = capture(captures, q.relative);
            bindings.relative |= relative.is_some();
            let Some(module) = capture(captures, q.module).or(relative) else {
                continue;
            };
            let module = strip_space(node_text(module, text));
            let name = capture(captures, q.name).map(|n| strip_space(node_text(n, text)));
            let alias = capture(captures, q.alias).map(|n| node_text(n, text).to_owned());
            let (bound, path) = match (name, alias) {
                (Some(name), alias) => {
                    let bound = alias.unwrap_or_else(|| name.clone());
                    (bound, format!("{module}.{name}"))
                }
                (None, Some(alias)) => (alias, module),
                (None, None) => {
                    let first = module.split('.').next().unwrap_or_default().to_owned();
                    (first.clone(), first)
                }
            };
            let statement = captures[0].node;
            if is_module_level(statement, text) {
                bindings.module_level.insert(bound.clone(), path.clone());
                let at = bindings
                    .module_level_at
                    .entry(bound.clone())
                    .or_insert(statement.start_byte());
                *at = (*at).min(statement.start_byte());
            }
            bindings.any_scope.insert(bound, path);
        }
        bindings
    }

    /// Resolves the first segment of a dotted name through the imports.
    pub(crate) fn resolve(&self, dotted: &str) -> String {
        let (first, rest) = dotted.split_once('.').unwrap_or((dotted, ""));
        match self.any_scope.get(first) {
            Some(path) if rest.is_empty() => path.clone(),
            Some(path) => format!("{path}.{rest}"),
            None => dotted.to_owned(),
        }
    }
}

fn strip_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// True when nothing but `if`/`try`/`with` blocks stands between `node` and
/// the module, and none of them is `if TYPE_CHECKING:`.
fn is_module_level(node: Node<'_>, text: &str) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_definition" | "class_definition" | "lambda" => return false,
            "if_statement" => {
                if let Some(condition) = n.child_by_field_name("condition")
                    && node_text(condition, text).contains("TYPE_CHECKING")
                {
                    return false;
                }
            }
            _ => {}
        }
        current = n.parent();
    }
    true
}

/// The scope a definition binds its name in: the nearest enclosing function or
/// class (by node id), or `None` for the module.
fn binding_scope(node: Node<'_>) -> Option<(usize, &'static str)> {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_definition" => return Some((n.id(), "function")),
            "class_definition" => return Some((n.id(), "class")),
            _ => {}
        }
        current = n.parent();
    }
    None
}

fn enclosing_class(node: Node<'_>) -> Option<Node<'_>> {
    let mut current = node.parent();
    while let Some(n) = current {
        if n.kind() == "class_definition" {
            return Some(n);
        }
        current = n.parent();
    }
    None
}

/// Python's `__qualname__` of a definition node.
pub(crate) fn qualname(def: Node<'_>, text: &str) -> String {
    let mut parts = Vec::new();
    let name_of = |n: Node<'_>| {
        n.child_by_field_name("name")
            .map_or("?", |name| node_text(name, text))
            .to_owned()
    };
    if def.kind() != "lambda" {
        parts.push(name_of(def));
    } else {
        parts.push("<lambda>".to_owned());
    }
    let mut current = def.parent();
    while let Some(n) = current {
        match n.kind() {
            "class_definition" => parts.push(name_of(n)),
            "function_definition" => parts.push(format!("{}.<locals>", name_of(n))),
            _ => {}
        }
        current = n.parent();
    }
    parts.reverse();
    parts.join(".")
}

/// The decorated_definition wrapping a def, if any.
fn decorated(def: Node<'_>) -> Option<Node<'_>> {
    def.parent().filter(|p| p.kind() == "decorated_definition")
}

pub(crate) fn decorators(def: Node<'_>) -> Vec<Node<'_>> {
    let Some(wrapper) = decorated(def) else {
        return Vec::new();
    };
    let mut cursor = wrapper.walk();
    wrapper
        .named_children(&mut cursor)
        .filter(|n| n.kind() == "decorator")
        .collect()
}

/// The expression a decorator applies, minus a trailing call: `@a.b(x)` -> `a.b`.
pub(crate) fn decorator_callee(decorator: Node<'_>, text: &str) -> Option<String> {
    let expression = decorator.named_child(0)?;
    let callee = if expression.kind() == "call" {
        expression.child_by_field_name("function")?
    } else {
        expression
    };
    dotted(callee, text)
}

/// What one file knows about fences: the names that fence a function when
/// called or used as a decorator, and what is fenced by reassignment.
struct Fences {
    /// Module-level functions whose body calls a disable: `_compiler_disable`.
    wrappers: HashSet<String>,
    /// `(Class, method)` fenced by `Cls.m = disable(Cls.m)`, with its line.
    patched_methods: HashMap<(String, String), usize>,
    /// Module-level functions fenced by `f = disable(f)`, with its line.
    patched_functions: HashMap<String, usize>,
    /// Lines holding a commented-out disable decorator.
    optout_lines: HashSet<usize>,
    /// Lines holding `# hookfence: ignore`, with the reason given, if any.
    suppressions: BTreeMap<usize, Option<String>>,
}

struct FileContext<'t> {
    text: &'t str,
    vocabulary: &'t Vocabulary,
    bindings: Bindings,
    fences: Fences,
    /// Function definitions and `name = value` assignments, by name.
    names: Resolve<'t>,
    /// Classes by name.
    classes: HashMap<String, Vec<Node<'t>>>,
    model: SemanticModel,
}

impl<'t> FileContext<'t> {
    fn is_fence_callee(&self, dotted: &str) -> bool {
        self.fences.wrappers.contains(dotted)
            || is_fence_path(&self.bindings.resolve(dotted), self.vocabulary)
    }

    fn is_partial(&self, dotted: &str) -> bool {
        dotted == "partial" || self.bindings.resolve(dotted) == "functools.partial"
    }
}

/// The last dotted segment every fence's spelling ends with: torch's
/// disables, the wrap helper, the configured spellings. A callee can only
/// resolve to a fence if it ends with one of them or is an import alias of
/// one (see [`fence_words`]).
fn fence_final_segments(vocabulary: &Vocabulary) -> Vec<String> {
    [
        "disable",
        "_disable_dynamo",
        crate::analysis::vocabulary::WRAP_HELPER_FUNCTION,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(
        vocabulary
            .fence_spellings
            .iter()
            .map(|s| s.rsplit('.').next().unwrap_or(s).to_owned()),
    )
    .collect()
}

/// The words a call to a fence must contain: a final segment of a fence
/// spelling, or a name an import binds to a fence.
fn fence_words(bindings: &Bindings, vocabulary: &Vocabulary) -> Vec<String> {
    let mut words = fence_final_segments(vocabulary);
    words.extend(
        bindings
            .any_scope
            .iter()
            .filter(|(_, path)| is_fence_path(path, vocabulary))
            .map(|(name, _)| name.clone()),
    );
    words.sort();
    words.dedup();
    words
}

/// What the `resolve` query (imports, fences, functions) finds in one file.
///
/// Without anchoring, one walk of the whole tree finds everything. With it,
/// each part runs only where its matches must be: imports around `import`;
/// calls and patches that can be fences around the words a fence is spelled
/// with (see [`fence_words`]), opt-out comments around `disable`;
/// assignments around the fence words their value may hold. Both give the
/// same answer to every question asked. (What a registered name is bound to
/// is asked of the file's [`SemanticModel`], built from a whole walk.)
struct Resolve<'t> {
    root: Node<'t>,
    text: &'t str,
    anchored: bool,
    imports: Vec<Vec<tree_sitter::QueryCapture<'t>>>,
    /// Every fence-part match (whole walk), or none yet (anchored).
    fences: Vec<Vec<tree_sitter::QueryCapture<'t>>>,
    /// What binds each name (whole walk only).
    named: HashMap<String, Named<'t>>,
}

/// The definitions and assignments that bind one name, in the order of the
/// text.
#[derive(Clone, Default)]
struct Named<'t> {
    defs: Vec<Node<'t>>,
    /// (assignment, value)
    assignments: Vec<(Node<'t>, Node<'t>)>,
}

impl<'t> Resolve<'t> {
    fn collect(root: Node<'t>, text: &'t str, anchored: bool) -> Resolve<'t> {
        let mut imports = Vec::new();
        let mut fences = Vec::new();
        let mut named: HashMap<String, Named<'t>> = HashMap::new();
        let ranges =
            anchored.then(|| crate::analysis::prefilter::word_ranges(text, &["import"], &[]));
        for_each_combined(
            &QUERIES.resolve,
            root,
            text,
            ranges.as_deref(),
            |part, captures| match part {
                0 => imports.push(captures.to_vec()),
                _ if anchored => {}
                1 => fences.push(captures.to_vec()),
                _ => bind(&mut named, captures, text),
            },
        );
        for binding in named.values_mut() {
            binding.sort();
        }
        Resolve {
            root,
            text,
            anchored,
            imports,
            fences,
            named,
        }
    }

    /// The fence-part matches that can matter: every call whose callee can
    /// resolve to a fence, every opt-out comment, every module-level patch
    /// whose fence is one or one of `wrappers` (see [`collect_fences`]).
    fn fence_matches(
        &self,
        bindings: &Bindings,
        vocabulary: &Vocabulary,
        wrappers: &[String],
    ) -> Vec<Vec<tree_sitter::QueryCapture<'t>>> {
        if !self.anchored {
            return self.fences.clone();
        }
        let words = fence_words(bindings, vocabulary);
        let words: Vec<&str> = words.iter().chain(wrappers).map(String::as_str).collect();
        // An opt-out comment holds `disable` anywhere in its callee.
        let ranges = crate::analysis::prefilter::word_ranges(self.text, &words, &["disable"]);
        let mut found = Vec::new();
        for_each_combined(
            &QUERIES.resolve,
            self.root,
            self.text,
            Some(&ranges),
            |part, captures| {
                if part == 1 {
                    found.push(captures.to_vec());
                }
            },
        );
        found
    }

    /// Assignments whose value mentions one of `words` (every assignment,
    /// without anchoring), in the order of the text: (name, assignment,
    /// value).
    fn assignments_mentioning(&self, words: &[String]) -> Vec<(String, Node<'t>, Node<'t>)> {
        let mut found: Vec<(String, Node<'t>, Node<'t>)> = Vec::new();
        if self.anchored {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let ranges = crate::analysis::prefilter::word_ranges(self.text, &words, &[]);
            for_each_combined(
                &QUERIES.resolve,
                self.root,
                self.text,
                Some(&ranges),
                |part, captures| {
                    if part == 2
                        && let Some(assignment) = assignment_of(captures, self.text)
                    {
                        found.push(assignment);
                    }
                },
            );
        } else {
            // Without anchoring, `named` holds every name.
            for (name, binding) in self.named.iter() {
                found.extend(
                    binding
                        .assignments
                        .iter()
                        .map(|&(a, v)| (name.clone(), a, v)),
                );
            }
        }
        found.sort_by_key(|(_, assignment, _)| assignment.start_byte());
        found
    }
}

impl Named<'_> {
    fn sort(&mut self) {
        self.defs.sort_by_key(|def| def.start_byte());
        self.assignments
            .sort_by_key(|(assignment, _)| assignment.start_byte());
    }
}

/// Records a definition or assignment match of `functions.scm` under its name.
fn bind<'t>(
    named: &mut HashMap<String, Named<'t>>,
    captures: &[tree_sitter::QueryCapture<'t>],
    text: &str,
) {
    let qf = &QUERIES.functions;
    if let (Some(def), Some(name)) = (capture(captures, qf.def), capture(captures, qf.name)) {
        named
            .entry(node_text(name, text).to_owned())
            .or_default()
            .defs
            .push(def);
    } else if let Some((name, assignment, value)) = assignment_of(captures, text) {
        named
            .entry(name)
            .or_default()
            .assignments
            .push((assignment, value));
    }
}

/// The (name, assignment, value) of an assignment match of `functions.scm`.
fn assignment_of<'t>(
    captures: &[tree_sitter::QueryCapture<'t>],
    text: &str,
) -> Option<(String, Node<'t>, Node<'t>)> {
    let qf = &QUERIES.functions;
    let name = capture(captures, qf.assignment_name)?;
    let value = capture(captures, qf.assignment_value)?;
    Some((node_text(name, text).to_owned(), name.parent()?, value))
}

fn collect_fences<'t>(
    root: Node<'t>,
    matches: &[Vec<tree_sitter::QueryCapture<'t>>],
    text: &'t str,
    bindings: &Bindings,
    vocabulary: &Vocabulary,
) -> Fences {
    let q = &QUERIES.fences;
    let mut disable_calls = Vec::new();
    let mut patches = Vec::new();
    let mut optout_lines = HashSet::new();
    for captures in matches {
        if let Some(function) = capture(captures, q.call_function) {
            if let Some(name) = dotted(function, text)
                && is_fence_path(&bindings.resolve(&name), vocabulary)
            {
                disable_calls.push(function);
            }
        } else if let Some(comment) = capture(captures, q.optout_comment) {
            optout_lines.insert(comment.start_position().row + 1);
        } else if let (Some(fence), Some(target)) = (
            capture(captures, q.patch_fence),
            capture(captures, q.patch_target),
        ) {
            let owner = capture(captures, q.patch_owner);
            let attribute = capture(captures, q.patch_attribute);
            let function = capture(captures, q.patch_function);
            patches.push((fence, target, owner, attribute, function));
        }
    }

    let mut wrappers = HashSet::new();
    for call in disable_calls {
        // The outermost function around the call, if it is a module-level one.
        let mut outermost = None;
        let mut current = call.parent();
        let mut in_class = false;
        while let Some(n) = current {
            match n.kind() {
                "function_definition" => outermost = Some(n),
                "class_definition" => in_class = true,
                _ => {}
            }
            current = n.parent();
        }
        if let (Some(def), false) = (outermost, in_class)
            && let Some(name) = def.child_by_field_name("name")
        {
            wrappers.insert(node_text(name, text).to_owned());
        }
    }

    let mut patched_methods = HashMap::new();
    let mut patched_functions = HashMap::new();
    for (fence, target, owner, attribute, function) in patches {
        let Some(fence_name) = dotted(fence, text) else {
            continue;
        };
        if !(wrappers.contains(&fence_name)
            || is_fence_path(&bindings.resolve(&fence_name), vocabulary))
        {
            continue;
        }
        let line = fence.start_position().row + 1;
        let target = strip_space(node_text(target, text));
        match (owner, attribute, function) {
            (Some(owner), Some(attribute), _) => {
                let owner = node_text(owner, text).to_owned();
                let attribute = node_text(attribute, text).to_owned();
                if target == format!("{owner}.{attribute}") {
                    patched_methods.insert((owner, attribute), line);
                }
            }
            (_, _, Some(function)) => {
                let function = node_text(function, text).to_owned();
                if target == function {
                    patched_functions.insert(function, line);
                }
            }
            _ => {}
        }
    }
    Fences {
        wrappers,
        patched_methods,
        patched_functions,
        optout_lines,
        suppressions: collect_suppressions(root, text),
    }
}

/// Every `# hookfence: ignore` comment, by line, with its reason. Skips the
/// tree walk when the text cannot hold one.
fn collect_suppressions(root: Node<'_>, text: &str) -> BTreeMap<usize, Option<String>> {
    let mut suppressions = BTreeMap::new();
    if !text.contains(crate::analysis::prefilter::SUPPRESSION_MARK) {
        return suppressions;
    }
    let q = &QUERIES.suppressions;
    for_each_match(&q.compiled.query, root, text, |captures| {
        if let Some(comment) = capture(captures, q.comment) {
            let line = comment.start_position().row + 1;
            suppressions.insert(line, suppression_reason(node_text(comment, text)));
        }
    });
    suppressions
}

/// The reason in `# hookfence: ignore[reason]`, if one is given.
fn suppression_reason(comment: &str) -> Option<String> {
    let after = comment.split_once("ignore")?.1;
    let inside = after.strip_prefix('[')?;
    let reason = inside.split_once(']').map_or(inside, |(r, _)| r).trim();
    (!reason.is_empty()).then(|| reason.to_owned())
}

pub(crate) fn class_bases(class: Node<'_>, text: &str) -> Vec<String> {
    let Some(list) = class.child_by_field_name("superclasses") else {
        return Vec::new();
    };
    let mut cursor = list.walk();
    list.named_children(&mut cursor)
        .filter_map(|base| match base.kind() {
            "identifier" | "attribute" => dotted(base, text),
            // `Base[T]`
            "subscript" => base
                .child_by_field_name("value")
                .and_then(|v| dotted(v, text)),
            _ => None,
        })
        .collect()
}

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
                    let name = node_text(name, text).to_owned();
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
            _ => {
                if let (Some(call), Some(arguments)) =
                    (capture(captures, qr.call), capture(captures, qr.arguments))
                {
                    let backward = capture(captures, qr.backward).is_some();
                    registrations.push((call, arguments, backward));
                }
            }
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
    registrations.sort_by_key(|(call, _, _)| call.start_byte());

    let import_at = import_insertion_point(root, text);
    if hook_methods.is_empty() && registrations.is_empty() && discovered.is_empty() {
        return FileFacts {
            classes: class_facts,
            fullgraph,
            import_at,
            import_block_end: import_at,
            suppressions: collect_suppressions(root, text).into_keys().collect(),
            ..FileFacts::default()
        };
    }

    // What resolving names and fences needs: imports, fences, functions and
    // assignments (see `Resolve`).
    let resolve = Resolve::collect(root, text, anchored);
    let bindings = Bindings::collect(&resolve.imports, text);
    let mut fences = collect_fences(
        root,
        &resolve.fence_matches(&bindings, vocabulary, &[]),
        text,
        &bindings,
        vocabulary,
    );
    if resolve.anchored && !fences.wrappers.is_empty() {
        // A module-level patch may use a wrapper as its fence: look around
        // the wrappers' names too.
        let wrappers: Vec<String> = fences.wrappers.iter().cloned().collect();
        fences = collect_fences(
            root,
            &resolve.fence_matches(&bindings, vocabulary, &wrappers),
            text,
            &bindings,
            vocabulary,
        );
    }

    // `_compiler_disable = torch.compiler.disable` at module level: an alias
    // of a fence is a fence, and an alias of an alias too. (Its value names
    // a fence word, an import alias of one, a wrapper or an alias found
    // before, so the anchored lookup finds it.)
    let mut words: Vec<String> = fence_words(&bindings, vocabulary)
        .into_iter()
        .chain(fences.wrappers.iter().cloned())
        .collect();
    while !words.is_empty() {
        let mut found = Vec::new();
        for (name, assignment, value) in resolve.assignments_mentioning(&words) {
            if !fences.wrappers.contains(&name)
                && binding_scope(assignment).is_none()
                && let Some(value) = dotted(value, text)
                && (fences.wrappers.contains(&value)
                    || is_fence_path(&bindings.resolve(&value), vocabulary))
            {
                fences.wrappers.insert(name.clone());
                found.push(name);
            }
        }
        words = found;
    }

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
            .child_by_field_name("name")
            .map_or("", |n| node_text(n, text))
            .to_owned();
        let mut candidate = def_candidate(&ctx, def);
        candidate.owner = Some(Owner {
            bases: class_bases(class, text),
            class: class_name,
        });
        candidates.insert(def.start_byte(), candidate);
    }

    for (call, arguments, backward) in registrations {
        let at = position(call, text);
        let method = call
            .child_by_field_name("function")
            .map(|f| match f.child_by_field_name("attribute") {
                Some(attribute) => node_text(attribute, text),
                None => node_text(f, text),
            })
            .unwrap_or_default();
        let position = vocabulary
            .registrar_positions
            .get(method)
            .copied()
            .unwrap_or(0);
        let Some(hook) = hook_argument(arguments, text, position) else {
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
                    entry.note_registration(at, backward.clone());
                }
                Resolved::Lambda(lambda) => {
                    let entry = candidates
                        .entry(lambda.start_byte())
                        .or_insert_with(|| lambda_candidate(&ctx, lambda, FenceState::Unfenced));
                    entry.note_registration(at, backward.clone());
                }
                Resolved::FencedInPlace(expression, spelling) => {
                    let mut candidate =
                        lambda_candidate(&ctx, expression, FenceState::Fenced(spelling));
                    candidate.qualname = strip_space(node_text(expression, text));
                    candidate.note_registration(at, backward.clone());
                    candidates
                        .entry(expression.start_byte())
                        .or_insert(candidate);
                }
                Resolved::Unresolved(what) => unresolved.push(Unresolved { at, what }),
            }
        }
    }

    for (line, column, why) in discovered {
        if let Some(def) = def_at(root, text, *line, *column) {
            let entry = candidates.entry(def.start_byte()).or_insert_with(|| {
                if def.kind() == "lambda" {
                    lambda_candidate(&ctx, def, FenceState::Unfenced)
                } else {
                    def_candidate(&ctx, def)
                }
            });
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
    FileFacts {
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
    }
}

/// The hook a register call receives: `hook=`, else its positional argument
/// number `position` (0 for torch's registrars). `None` when a splat comes
/// first, hiding which argument it is.
pub(crate) fn hook_argument<'t>(
    arguments: Node<'t>,
    text: &str,
    position: usize,
) -> Option<Node<'t>> {
    let mut cursor = arguments.walk();
    let mut positional = Vec::new();
    let mut splat_before = false;
    for argument in arguments.named_children(&mut cursor) {
        match argument.kind() {
            "keyword_argument" => {
                let name = argument.child_by_field_name("name")?;
                if node_text(name, text) == "hook" {
                    return argument.child_by_field_name("value");
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

enum Resolved<'t> {
    Def(Node<'t>),
    Lambda(Node<'t>),
    /// `torch.compiler.disable(fn)` passed directly: already fenced.
    FencedInPlace(Node<'t>, String),
    Unresolved(String),
}

/// Follows a hook expression to the definitions it can name, the way
/// Python's scoping would at `site` (the register call, or the assignment a
/// name was followed through): one for each definition that can be bound
/// there.
fn resolve_hook<'t>(
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
        "identifier" => return resolve_name(ctx, node_text(expression, text), site, depth),
        "attribute" => {
            let (Some(object), Some(attribute)) = (
                expression.child_by_field_name("object"),
                expression.child_by_field_name("attribute"),
            ) else {
                return vec![Resolved::Unresolved("unreadable attribute".to_owned())];
            };
            let method = node_text(attribute, text);
            let object_text = node_text(object, text);
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
                    strip_space(node_text(expression, text))
                )),
            }
        }
        "call" => {
            let callee = expression
                .child_by_field_name("function")
                .and_then(|f| dotted(f, text));
            let first_argument = expression
                .child_by_field_name("arguments")
                .and_then(|a| a.named_child(0));
            match (callee, first_argument) {
                (Some(callee), _) if ctx.is_fence_callee(&callee) => {
                    Resolved::FencedInPlace(expression, format!("{callee}(...)"))
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
                    short(node_text(expression, text))
                )),
            }
        }
        _ => Resolved::Unresolved(format!(
            "hook is `{}`, not a function hookfence can find",
            short(node_text(expression, text))
        )),
    };
    vec![one]
}

fn short(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 40 {
        format!("{}...", flat.chars().take(37).collect::<String>())
    } else {
        flat
    }
}

/// Looks a bare name up from `site` with Python's scoping (see
/// [`SemanticModel::possible_bindings`]): every definition that can be bound
/// to it when `site` runs is a hook, each followed through assignments.
fn resolve_name<'t>(
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
                    "decorated_definition" => n.child_by_field_name("definition"),
                    _ => Some(n),
                });
                if let Some(def) = def.filter(|d| d.kind() == "function_definition") {
                    resolved.push(Resolved::Def(def));
                }
            }
            BindingKind::Assignment => {
                let assignment = std::iter::successors(node, |n| n.parent())
                    .find(|n| n.kind() == "assignment" && n.byte_range() == binding.node);
                let value = assignment.and_then(|a| {
                    let left = a.child_by_field_name("left")?;
                    (left.kind() == "identifier" && node_text(left, ctx.text) == name)
                        .then(|| a.child_by_field_name("right"))
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

/// Whether a binding gives the name a value that may be a hook.
fn is_value_binding(kind: &BindingKind) -> bool {
    !matches!(
        kind,
        BindingKind::Deletion | BindingKind::ExceptCleared | BindingKind::Annotation
    )
}

/// A method named `name` in `class` or, failing that, in its bases defined in
/// the same file.
fn find_method<'t>(
    ctx: &FileContext<'t>,
    class: Node<'t>,
    name: &str,
    depth: usize,
) -> Option<Node<'t>> {
    if depth > 16 {
        return None;
    }
    let body = class.child_by_field_name("body")?;
    let mut cursor = body.walk();
    for statement in body.named_children(&mut cursor) {
        let def = match statement.kind() {
            "function_definition" => statement,
            "decorated_definition" => match statement.child_by_field_name("definition") {
                Some(d) if d.kind() == "function_definition" => d,
                _ => continue,
            },
            _ => continue,
        };
        if def
            .child_by_field_name("name")
            .is_some_and(|n| node_text(n, ctx.text) == name)
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

fn is_outermost_decorator(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    OUTERMOST_DECORATORS.contains(&last) || matches!(last, "setter" | "getter" | "deleter")
}

fn def_candidate<'t>(ctx: &FileContext<'t>, def: Node<'t>) -> Candidate {
    let text = ctx.text;
    let decorators = decorators(def);
    let name = def
        .child_by_field_name("name")
        .map_or("", |n| node_text(n, text));
    let owner_class = enclosing_class(def)
        .filter(|c| binding_scope(def).map(|(id, _)| id) == Some(c.id()))
        .and_then(|c| c.child_by_field_name("name"))
        .map(|n| node_text(n, text).to_owned());

    // Already fenced?
    let mut fence = decorators
        .iter()
        .find(|d| decorator_callee(**d, text).is_some_and(|c| ctx.is_fence_callee(&c)))
        .map(|d| FenceState::Fenced(strip_space(node_text(*d, text))))
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
        if let Some(line) = patched {
            fence = FenceState::Fenced(format!("reassigned through a disable at line {line}"));
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
        let first_line = decorators
            .first()
            .map_or(def.start_position().row, |d| d.start_position().row)
            + 1;
        let def_line = def.start_position().row + 1;
        let block_start = crate::pyrules::logical_line_start(root, text, anchor_of_block(def));
        let block_line = first_line
            - text[block_start..line_start(text, anchor_of_block(def))]
                .matches('\n')
                .count();
        let above = comment_lines_above(text, block_start, block_line);
        let attached: Vec<usize> = (first_line..=def_line).chain(above).collect();
        fence = attached_fence(ctx, &attached);
    }

    let span_start = decorated(def).map_or(def.start_byte(), |d| d.start_byte());
    Candidate {
        qualname: qualname(def, text),
        at: position(def, text),
        span: (span_start, def.end_byte()),
        owner: None,
        registered_at: None,
        discovered: None,
        trivial: is_trivial(def, text),
        backward: None,
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
        signs: crate::analysis::evidence::signs_in_function(def, text),
    }
}

/// Whether a `def`'s body only passes, holds a docstring or `...`, or
/// returns its own parameters unchanged.
fn is_trivial(def: Node<'_>, text: &str) -> bool {
    let Some(body) = def.child_by_field_name("body") else {
        return false;
    };
    let parameters = crate::syntax::parameter_names(def, text);
    let mut cursor = body.walk();
    body.named_children(&mut cursor)
        .all(|statement| match statement.kind() {
            "pass_statement" | "comment" => true,
            "expression_statement" => statement
                .named_child(0)
                .is_some_and(|e| matches!(e.kind(), "string" | "ellipsis")),
            "return_statement" => match statement.named_child(0) {
                None => true,
                Some(value) => node_text(value, text)
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .filter(|w| !w.is_empty())
                    .all(|w| parameters.iter().any(|p| p == w) || w == "None"),
            },
            _ => false,
        })
}

/// The `def` (or `async def`) or `lambda` whose keyword stands at 1-based
/// `line` and `column` (in characters).
fn def_at<'t>(root: Node<'t>, text: &str, line: usize, column: usize) -> Option<Node<'t>> {
    let line_text = text.split('\n').nth(line.checked_sub(1)?)?;
    let byte_column: usize = line_text
        .chars()
        .take(column.checked_sub(1)?)
        .map(char::len_utf8)
        .sum();
    let point = tree_sitter::Point::new(line - 1, byte_column);
    let mut node = root.descendant_for_point_range(point, point)?;
    loop {
        if matches!(node.kind(), "function_definition" | "lambda") && node.start_position() == point
        {
            return Some(node);
        }
        node = node.parent()?;
    }
}

/// Where a definition's block starts: its first decorator, or the `def`.
fn anchor_of_block(def: Node<'_>) -> usize {
    decorators(def)
        .first()
        .map_or(def.start_byte(), |d| d.start_byte())
}

/// The numbers of the comment-only lines right above the line that starts at
/// `block_start` (line `first_line`), nearest first.
fn comment_lines_above(text: &str, block_start: usize, first_line: usize) -> Vec<usize> {
    text[..block_start]
        .lines()
        .rev()
        .take_while(|l| l.trim_start().starts_with('#'))
        .enumerate()
        .map(|(i, _)| first_line - 1 - i)
        .collect()
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
        fence,
        target: Target::Lambda {
            start: lambda.start_byte(),
            end: lambda.end_byte(),
            comment_at,
        },
        signs: crate::analysis::evidence::signs_in_function(lambda, text),
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
}
