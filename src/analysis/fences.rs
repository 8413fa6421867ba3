//! What fences a function in one file, and what its names mean: the names
//! imports bind, the definitions and assignments by name, calls to a
//! disable and the names that wrap one, methods and functions fenced by
//! reassignment, opt-out comments and `# hookfence: ignore` suppressions;
//! gathered into the `FileContext` the matcher asks.

use std::collections::{BTreeMap, HashMap, HashSet};

use tree_sitter::Node;

use crate::analysis::file_facts::FencedBy;
use crate::analysis::scope::SemanticModel;
use crate::analysis::vocabulary::Vocabulary;
use crate::queries::QUERIES;
use crate::syntax::Field;
use crate::syntax::{capture, dotted_name, each_match, for_each_combined, strip_space, text_of};

/// Whether a resolved dotted path is torch's disable (or a project's, such
/// as DeepSpeed's `deepspeed.runtime.compiler.disable`), or the `no_compile`
/// helper of the wrap strategy.
/// A disable path, or a configured fence spelling (matched on the resolved
/// path or as its last dotted segments).
pub fn is_fence_path(path: &str, vocabulary: &Vocabulary) -> bool {
    is_disable_path(path)
        || vocabulary
            .fence_spellings
            .iter()
            .any(|s| path == s || path.ends_with(&format!(".{s}")))
}

pub(super) fn is_disable_path(path: &str) -> bool {
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
pub struct Bindings {
    /// Every import in the file, whatever its scope: name -> dotted path.
    pub(crate) any_scope: HashMap<String, String>,
    /// Imports at module level (not under a def, a class or `if TYPE_CHECKING`).
    pub(super) module_level: BTreeMap<String, String>,
    /// Where the first module-level import of each of those names starts.
    pub(super) module_level_at: HashMap<String, usize>,
    /// Whether any `from .x import y` appears.
    pub(super) relative: bool,
    /// The modules of `from a.b import *` (relative ones as written).
    pub(crate) star: Vec<String>,
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
            let module = strip_space(text_of(module, text));
            if capture(captures, q.star).is_some() {
                if !bindings.star.contains(&module) {
                    bindings.star.push(module);
                }
                continue;
            }
            let name = capture(captures, q.name).map(|n| strip_space(text_of(n, text)));
            let alias = capture(captures, q.alias).map(|n| text_of(n, text).to_owned());
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

/// True when nothing but `if`/`try`/`with` blocks stands between `node` and
/// the module, and none of them is `if TYPE_CHECKING:`.
pub(super) fn is_module_level(node: Node<'_>, text: &str) -> bool {
    let mut current = node.parent();
    while let Some(n) = current {
        match n.kind() {
            "function_definition" | "class_definition" | "lambda" => return false,
            "if_statement" => {
                if let Some(condition) = n.field("condition")
                    && text_of(condition, text).contains("TYPE_CHECKING")
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
pub(super) fn binding_scope(node: Node<'_>) -> Option<(usize, &'static str)> {
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

/// The decorated_definition wrapping a def, if any. A lambda has none, and
/// is not asked: tree-sitter finds a node's parent by walking down from the
/// root, so asking it of every lambda in a nest costs the square of its depth.
pub(super) fn decorated(def: Node<'_>) -> Option<Node<'_>> {
    if def.kind() == "lambda" {
        return None;
    }
    def.parent().filter(|p| p.kind() == "decorated_definition")
}

pub fn decorators(def: Node<'_>) -> Vec<Node<'_>> {
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
pub fn decorator_callee(decorator: Node<'_>, text: &str) -> Option<String> {
    let expression = decorator.named_child(0)?;
    let callee = if expression.kind() == "call" {
        expression.field("function")?
    } else {
        expression
    };
    dotted_name(callee, text)
}

/// What one file knows about fences: the names that fence a function when
/// called or used as a decorator, and what is fenced by reassignment.
pub(super) struct Fences {
    /// Module-level functions whose body calls a disable
    /// (`_compiler_disable`), and module-level names assigned a disable or
    /// one of those (`disable = torch.compiler.disable`).
    pub(super) wrappers: HashSet<String>,
    /// `(Class, method)` fenced by `Cls.m = disable(Cls.m)`, with its line
    /// and what fences it.
    pub(super) patched_methods: HashMap<(String, String), (usize, FencedBy)>,
    /// Module-level functions fenced by `f = disable(f)`, with its line and
    /// what fences it.
    pub(super) patched_functions: HashMap<String, (usize, FencedBy)>,
    /// Lines holding a commented-out disable decorator.
    pub(super) optout_lines: HashSet<usize>,
    /// Lines holding `# hookfence: ignore`, with the reason given, if any.
    pub(super) suppressions: BTreeMap<usize, Option<String>>,
}

pub(super) struct FileContext<'t> {
    pub(super) text: &'t str,
    pub(super) vocabulary: &'t Vocabulary,
    pub(super) bindings: Bindings,
    pub(super) fences: Fences,
    /// Function definitions and `name = value` assignments, by name.
    pub(super) names: Resolve<'t>,
    /// Classes by name.
    pub(super) classes: HashMap<String, Vec<Node<'t>>>,
    pub(super) model: SemanticModel,
}

impl<'t> FileContext<'t> {
    pub(super) fn is_fence_callee(&self, dotted: &str) -> bool {
        self.fences.wrappers.contains(dotted)
            || is_fence_path(&self.bindings.resolve(dotted), self.vocabulary)
    }

    /// What a fence spelled `callee` in this file is (see [`FencedBy`]).
    pub(super) fn fenced_by(&self, callee: &str) -> FencedBy {
        fenced_by(callee, &self.fences.wrappers, &self.bindings)
    }

    pub(super) fn is_partial(&self, dotted: &str) -> bool {
        dotted == "partial" || self.bindings.resolve(dotted) == "functools.partial"
    }
}

/// What a fence spelled `callee` is, given the file's wrappers and imports:
/// a module-level wrapper of the file, the wrap helper, torch's disable, or
/// anything else the file imports as a fence (a project's wrapper, a
/// configured spelling).
fn fenced_by(callee: &str, wrappers: &HashSet<String>, bindings: &Bindings) -> FencedBy {
    if wrappers.contains(callee) {
        return FencedBy::Wrapper {
            path: callee.to_owned(),
            local: true,
        };
    }
    let path = bindings.resolve(callee);
    if path.rsplit('.').next() == Some(crate::analysis::vocabulary::WRAP_HELPER_FUNCTION) {
        FencedBy::Helper { path }
    } else if is_disable_path(&path) {
        FencedBy::Torch
    } else {
        FencedBy::Wrapper { path, local: false }
    }
}

/// The last dotted segment every fence's spelling ends with: torch's
/// disables, the wrap helper, the configured spellings. A callee can only
/// resolve to a fence if it ends with one of them or is an import alias of
/// one (see [`fence_words`]).
pub(super) fn fence_final_segments(vocabulary: &Vocabulary) -> Vec<String> {
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
pub(super) fn fence_words(bindings: &Bindings, vocabulary: &Vocabulary) -> Vec<String> {
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
pub(super) struct Resolve<'t> {
    pub(super) root: Node<'t>,
    pub(super) text: &'t str,
    pub(super) anchored: bool,
    pub(super) imports: Vec<Vec<tree_sitter::QueryCapture<'t>>>,
    /// Every fence-part match (whole walk), or none yet (anchored).
    pub(super) fences: Vec<Vec<tree_sitter::QueryCapture<'t>>>,
    /// What binds each name (whole walk only).
    pub(super) named: HashMap<String, Named<'t>>,
}

/// The definitions and assignments that bind one name, in the order of the
/// text.
#[derive(Clone, Default)]
pub(super) struct Named<'t> {
    pub(super) defs: Vec<Node<'t>>,
    /// (assignment, value)
    pub(super) assignments: Vec<(Node<'t>, Node<'t>)>,
}

impl<'t> Resolve<'t> {
    pub(super) fn collect(root: Node<'t>, text: &'t str, anchored: bool) -> Resolve<'t> {
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
    pub(super) fn fence_matches(
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
        // And where an opt-out comment can be.
        let mut ranges = crate::analysis::prefilter::word_ranges(self.text, &words, &[]);
        ranges.extend(crate::analysis::prefilter::optout_ranges(self.text));
        let ranges = crate::analysis::prefilter::merged_ranges(ranges);
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
    pub(super) fn assignments_mentioning(
        &self,
        words: &[String],
    ) -> Vec<(String, Node<'t>, Node<'t>)> {
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
    pub(super) fn sort(&mut self) {
        self.defs.sort_by_key(|def| def.start_byte());
        self.assignments
            .sort_by_key(|(assignment, _)| assignment.start_byte());
    }
}

/// Records a definition or assignment match of `functions.scm` under its name.
pub(super) fn bind<'t>(
    named: &mut HashMap<String, Named<'t>>,
    captures: &[tree_sitter::QueryCapture<'t>],
    text: &str,
) {
    let qf = &QUERIES.functions;
    if let (Some(def), Some(name)) = (capture(captures, qf.def), capture(captures, qf.name)) {
        named
            .entry(text_of(name, text).to_owned())
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
pub(super) fn assignment_of<'t>(
    captures: &[tree_sitter::QueryCapture<'t>],
    text: &str,
) -> Option<(String, Node<'t>, Node<'t>)> {
    let qf = &QUERIES.functions;
    let name = capture(captures, qf.assignment_name)?;
    let value = capture(captures, qf.assignment_value)?;
    Some((text_of(name, text).to_owned(), name.parent()?, value))
}

pub(super) fn collect_fences<'t>(
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
            if let Some(name) = dotted_name(function, text)
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
            && let Some(name) = def.field("name")
        {
            wrappers.insert(text_of(name, text).to_owned());
        }
    }

    let mut patched_methods = HashMap::new();
    let mut patched_functions = HashMap::new();
    for (fence, target, owner, attribute, function) in patches {
        let Some(fence_name) = dotted_name(fence, text) else {
            continue;
        };
        if !(wrappers.contains(&fence_name)
            || is_fence_path(&bindings.resolve(&fence_name), vocabulary))
        {
            continue;
        }
        let line = fence.start_position().row + 1;
        let by = fenced_by(&fence_name, &wrappers, bindings);
        let target = strip_space(text_of(target, text));
        match (owner, attribute, function) {
            (Some(owner), Some(attribute), _) => {
                let owner = text_of(owner, text).to_owned();
                let attribute = text_of(attribute, text).to_owned();
                if target == format!("{owner}.{attribute}") {
                    patched_methods.insert((owner, attribute), (line, by));
                }
            }
            (_, _, Some(function)) => {
                let function = text_of(function, text).to_owned();
                if target == function {
                    patched_functions.insert(function, (line, by));
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

/// The module-level names of a file that fence what they decorate (see
/// [`Fences::wrappers`]), given its `imports.scm` matches (every one, as
/// [`Resolve::collect`] finds them); none without a fence word in its text.
pub(super) fn module_fences<'t>(
    root: Node<'t>,
    text: &'t str,
    vocabulary: &Vocabulary,
    imports: &[Vec<tree_sitter::QueryCapture<'t>>],
) -> HashSet<String> {
    if !fence_final_segments(vocabulary)
        .iter()
        .any(|word| text.contains(word.as_str()))
    {
        return HashSet::new();
    }
    let resolve = Resolve {
        root,
        text,
        anchored: true,
        imports: imports.to_vec(),
        fences: Vec::new(),
        named: HashMap::new(),
    };
    fences_of(resolve, vocabulary).2.wrappers
}

/// What resolving names and fences needs in one file: its imports,
/// functions and assignments (see [`Resolve`]), its import bindings, and
/// its fences: the module-level functions that call a disable (wrappers)
/// and the module-level names assigned one (aliases), and what is fenced by
/// reassignment.
pub(super) fn file_fences<'t>(
    root: Node<'t>,
    text: &'t str,
    anchored: bool,
    vocabulary: &Vocabulary,
) -> (Resolve<'t>, Bindings, Fences) {
    // What resolving names and fences needs: imports, fences, functions and
    // assignments (see `Resolve`).
    fences_of(Resolve::collect(root, text, anchored), vocabulary)
}

/// [`file_fences`] once `resolve` is collected.
fn fences_of<'t>(resolve: Resolve<'t>, vocabulary: &Vocabulary) -> (Resolve<'t>, Bindings, Fences) {
    let (root, text) = (resolve.root, resolve.text);
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
                && let Some(value) = dotted_name(value, text)
                && (fences.wrappers.contains(&value)
                    || is_fence_path(&bindings.resolve(&value), vocabulary))
            {
                fences.wrappers.insert(name.clone());
                found.push(name);
            }
        }
        words = found;
    }
    (resolve, bindings, fences)
}

/// Every `# hookfence: ignore` comment, by line, with its reason. Skips the
/// tree walk when the text cannot hold one.
pub(super) fn collect_suppressions(root: Node<'_>, text: &str) -> BTreeMap<usize, Option<String>> {
    let mut suppressions = BTreeMap::new();
    if !text.contains(crate::analysis::prefilter::SUPPRESSION_MARK) {
        return suppressions;
    }
    let q = &QUERIES.suppressions;
    each_match(&q.compiled.query, root, text, |_, captures| {
        if let Some(comment) = capture(captures, q.comment) {
            let line = comment.start_position().row + 1;
            suppressions.insert(line, suppression_reason(text_of(comment, text)));
        }
    });
    suppressions
}

/// The lines whose comments speak for the definition `def`: its `def` line,
/// its decorators' lines (and comments between them), and the comment lines
/// right above.
pub(crate) fn lines_speaking_for(def: Node<'_>, text: &str) -> Vec<usize> {
    let root = crate::pyrules::root_of(def);
    let first_line = decorators(def)
        .first()
        .map_or(def.start_position().row, |d| d.start_position().row)
        + 1;
    let def_line = def.start_position().row + 1;
    let block_start = crate::pyrules::logical_line_start(root, text, anchor_of_block(def));
    let block_line = first_line
        - text[block_start..crate::source::line_start(text, anchor_of_block(def))]
            .matches('\n')
            .count();
    let above = comment_lines_above(text, block_start, block_line);
    (first_line..=def_line).chain(above).collect()
}

/// Where a definition's block starts: its first decorator, or the `def`.
fn anchor_of_block(def: Node<'_>) -> usize {
    decorators(def)
        .first()
        .map_or(def.start_byte(), |d| d.start_byte())
}

/// The numbers of the comment-only lines right above the line that starts at
/// `block_start` (line `first_line`), nearest first.
pub(crate) fn comment_lines_above(text: &str, block_start: usize, first_line: usize) -> Vec<usize> {
    text[..block_start]
        .lines()
        .rev()
        .take_while(|l| l.trim_start().starts_with('#'))
        .enumerate()
        .map(|(i, _)| first_line - 1 - i)
        .collect()
}

/// The lines of every comment that leaves a hook alone: a `# hookfence:
/// ignore` or a commented-out disable decorator. Skips the tree walk when
/// the text can hold neither.
pub(crate) fn left_alone_lines(root: Node<'_>, text: &str) -> HashSet<usize> {
    let mut lines: HashSet<usize> = collect_suppressions(root, text).into_keys().collect();
    let ranges = crate::analysis::prefilter::optout_ranges(text);
    if ranges.is_empty() {
        return lines;
    }
    let q = &QUERIES.fences;
    crate::syntax::for_each_combined(
        &QUERIES.resolve,
        root,
        text,
        Some(&ranges),
        |part, captures| {
            if part == 1
                && let Some(comment) = capture(captures, q.optout_comment)
            {
                lines.insert(comment.start_position().row + 1);
            }
        },
    );
    lines
}

/// The reason in `# hookfence: ignore[reason]`, if one is given.
pub(super) fn suppression_reason(comment: &str) -> Option<String> {
    let after = comment.split_once("ignore")?.1;
    let inside = after.strip_prefix('[')?;
    let reason = inside.split_once(']').map_or(inside, |(r, _)| r).trim();
    (!reason.is_empty()).then(|| reason.to_owned())
}
