//! Planning: the edits that fence each hook, as pure data. No I/O.

use crate::analysis::file_facts::{Candidate, FileFacts, Target};
use crate::analysis::scope::SemanticModel;
use crate::analysis::verdict::HookSite;
use crate::analysis::vocabulary::WRAP_HELPER_FUNCTION;
use crate::edit::{Edit, Fix};
use crate::source::line_ending_at;

/// How hooks are fenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `@torch.compiler.disable()` on each hook.
    #[default]
    Decorate,
    /// `@no_compile` from a helper module that also records each hook.
    Wrap,
}

/// The text a strategy writes into one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spelling {
    /// The decorator line's text after the indentation, without `@`.
    pub decorator: String,
    /// The callee that wraps a lambda in place.
    pub callee: String,
    /// The import line to add, and where, when the file lacks the name.
    pub import: Option<(usize, String)>,
}

impl Spelling {
    /// `decorator` (by default `torch.compiler.disable()`) for the
    /// candidates in `fenced`, its first segment (the module, `torch`)
    /// spelled with a name that certainly means that module where each of
    /// their fences is evaluated (Python's scoping at that point: see
    /// [`crate::analysis::scope::SemanticModel::means_module`]):
    /// - a name the file already binds to it (`torch`, or an alias such as
    ///   `th`), if it holds at every fence;
    /// - else the module's own name with `import <module>` added after the
    ///   docstring and `__future__` imports, if that import would make it
    ///   hold at every fence (nothing else in the file binds the name to
    ///   anything else);
    /// - else `import <module> as <fresh>`, a name bound nowhere and named
    ///   nowhere in the file, so it shadows none of the user's names.
    pub fn decorate(
        facts: &FileFacts,
        text: &str,
        decorator: &str,
        fenced: &[&Candidate],
    ) -> Spelling {
        let (root, rest) = decorator.split_once('.').unwrap_or((decorator, ""));
        let model = &facts.model;
        let holds_everywhere = |model: &SemanticModel, name: &str| {
            fenced
                .iter()
                .all(|c| model.means_module(name, root, c.fence_at.scope, c.fence_at.at))
        };
        let (name, import) = if let Some(name) = model
            .import_names_of(root)
            .into_iter()
            .find(|name| holds_everywhere(model, name))
        {
            (name, None)
        } else if holds_everywhere(&model.with_import(root, root, facts.import_at), root) {
            (root.to_owned(), Some(format!("import {root}")))
        } else {
            let fresh = fresh_name(model, text, root);
            let import = format!("import {root} as {fresh}");
            (fresh, Some(import))
        };
        let decorator = if rest.is_empty() {
            name
        } else {
            format!("{name}.{rest}")
        };
        let callee = decorator
            .split_once('(')
            .map_or(decorator.as_str(), |(c, _)| c)
            .to_owned();
        Spelling {
            decorator,
            callee,
            import: import.map(|line| (facts.import_at, line)),
        }
    }

    /// `@no_compile`, imported after the module's opening imports with
    /// `import_line` unless the module already binds it.
    pub fn wrap(facts: &FileFacts, import_line: String) -> Spelling {
        let bound = facts
            .module_bindings
            .keys()
            .any(|name| name == WRAP_HELPER_FUNCTION);
        Spelling {
            decorator: WRAP_HELPER_FUNCTION.to_owned(),
            callee: WRAP_HELPER_FUNCTION.to_owned(),
            import: (!bound).then_some((facts.import_block_end, import_line)),
        }
    }
}

/// One fix per site: its decorator (or lambda wrap) plus, when needed, the
/// import line; fixes share the import edit, which is applied once.
pub fn plan(text: &str, sites: &[&HookSite], spelling: &Spelling) -> Vec<Fix> {
    let import = spelling
        .import
        .as_ref()
        .map(|(at, line)| Edit::insert(*at, format!("{line}{}", line_ending_at(text, *at))));
    sites
        .iter()
        .map(|site| {
            let mut edits: Vec<Edit> = import.iter().cloned().collect();
            match &site.candidate.target {
                Target::Def {
                    insert_at,
                    indent,
                    line_ending,
                } => edits.push(Edit::insert(
                    *insert_at,
                    format!("{indent}@{}{line_ending}", spelling.decorator),
                )),
                Target::Lambda { start, end, .. } => {
                    edits.push(Edit::insert(*start, format!("{}(", spelling.callee)));
                    edits.push(Edit::insert(*end, ")"));
                }
            }
            Fix { edits }
        })
        .collect()
}

/// A name for `module` that `text` binds nowhere and names nowhere:
/// `_torch`, else `_hookfence_torch`, else `_hookfence_torch_2`, ...
fn fresh_name(model: &SemanticModel, text: &str, module: &str) -> String {
    let free = |name: &str| model.is_unused_name(name, text);
    let first = format!("_{module}");
    if free(&first) {
        return first;
    }
    let second = format!("_hookfence_{module}");
    if free(&second) {
        return second;
    }
    (2..)
        .map(|n| format!("_hookfence_{module}_{n}"))
        .find(|name| free(name))
        .unwrap_or(second)
}
