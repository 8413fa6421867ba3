//! Planning: the edits that fence each hook, as pure data. No I/O.

use crate::edit::{Edit, Fix};
use crate::matcher::{FileFacts, Target};
use crate::resolve::HookSite;
use crate::source::line_ending_at;

/// The function the wrap strategy's helper module defines.
pub const WRAP_HELPER_FUNCTION: &str = "no_compile";

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
    /// `decorator` (by default `torch.compiler.disable()`), written with the
    /// module's own name for its first segment when that is torch under an
    /// alias, and `import <first segment>` after the docstring and
    /// `__future__` imports when the module does not bind it.
    pub fn decorate(facts: &FileFacts, decorator: &str) -> Spelling {
        let (root, rest) = decorator.split_once('.').unwrap_or((decorator, ""));
        let bound_as = if root == "torch" {
            facts.torch_name.clone()
        } else {
            facts
                .module_bindings
                .contains_key(root)
                .then(|| root.to_owned())
        };
        let name = bound_as.as_deref().unwrap_or(root);
        let decorator = if rest.is_empty() {
            name.to_owned()
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
            import: bound_as
                .is_none()
                .then(|| (facts.import_at, format!("import {root}"))),
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
