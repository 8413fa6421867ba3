//! Planning: the edits that fence each hook, as pure data. No I/O.

use crate::edit::{Edit, Fix};
use crate::matcher::{FileFacts, Target};
use crate::resolve::HookSite;
use crate::source::line_ending_at;

/// The fence hookfence inserts, written with the module's name for torch.
pub fn fence_callee(torch_name: &str) -> String {
    format!("{torch_name}.compiler.disable")
}

/// One fix per site: its decorator (or lambda wrap) plus, when torch is not
/// bound at module level, the `import torch` line.
pub fn plan(facts: &FileFacts, text: &str, sites: &[&HookSite]) -> Vec<Fix> {
    let torch_name = facts.torch_name.as_deref().unwrap_or("torch");
    let callee = fence_callee(torch_name);
    let import = facts.torch_name.is_none().then(|| {
        let at = facts.import_at;
        Edit::insert(at, format!("import torch{}", line_ending_at(text, at)))
    });
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
                    format!("{indent}@{callee}(){line_ending}"),
                )),
                Target::Lambda { start, end } => {
                    edits.push(Edit::insert(*start, format!("{callee}(")));
                    edits.push(Edit::insert(*end, ")"));
                }
            }
            Fix { edits }
        })
        .collect()
}
