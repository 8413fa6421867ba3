//! The tree-sitter queries in `queries/*.scm`, compiled once, with their
//! capture indices looked up by name at start: a missing name is a bug that
//! panics on first use in any test, never a silent "no matches".

use std::sync::LazyLock;

use tree_sitter::{Language, Query};

pub fn language() -> Language {
    tree_sitter_python::LANGUAGE.into()
}

/// One compiled query and the index of each capture name it exports.
pub struct Compiled {
    pub query: Query,
    /// Its source, so several queries can be run as one (see [`Combined`]).
    pub source: String,
}

impl Compiled {
    pub fn new(name: &str, text: &str) -> Compiled {
        let query = Query::new(&language(), text)
            .unwrap_or_else(|err| panic!("queries/{name}.scm does not compile: {err}"));
        Compiled {
            query,
            source: text.to_owned(),
        }
    }

    pub fn capture(&self, name: &str) -> u32 {
        self.query
            .capture_index_for_name(name)
            .unwrap_or_else(|| panic!("query has no capture @{name}"))
    }
}

/// Several queries compiled as one, so a single walk of the tree serves them
/// all: each match is handed back with the index of the query it belongs to
/// and its capture indices translated to that query's own, so code written
/// against one query's captures reads a combined match unchanged.
pub struct Combined {
    pub query: Query,
    /// Per part: the end of its pattern range, and for every capture of the
    /// combined query the part's own index (`u32::MAX` where it has none).
    parts: Vec<(usize, Vec<u32>)>,
}

impl Combined {
    pub fn new(parts: &[&Compiled]) -> Combined {
        let source: String = parts.iter().map(|p| format!("{}\n", p.source)).collect();
        let query = Query::new(&language(), &source)
            .unwrap_or_else(|err| panic!("combined queries do not compile: {err}"));
        let names = query.capture_names();
        let mut end = 0;
        let parts = parts
            .iter()
            .map(|part| {
                end += part.query.pattern_count();
                let remap = names
                    .iter()
                    .map(|name| part.query.capture_index_for_name(name).unwrap_or(u32::MAX))
                    .collect();
                (end, remap)
            })
            .collect();
        Combined { query, parts }
    }

    /// Which part a pattern of the combined query comes from, and its
    /// capture remapping.
    pub fn part(&self, pattern: usize) -> (usize, &[u32]) {
        let index = self
            .parts
            .iter()
            .position(|(end, _)| pattern < *end)
            .unwrap_or(self.parts.len().saturating_sub(1));
        (index, &self.parts[index].1)
    }
}

pub struct HookMethods {
    pub compiled: Compiled,
    pub class: u32,
    pub def: u32,
}

impl HookMethods {
    pub fn new(compiled: Compiled) -> HookMethods {
        HookMethods {
            class: compiled.capture("hook.class"),
            def: compiled.capture("hook.def"),
            compiled,
        }
    }
}

pub struct Classes {
    pub compiled: Compiled,
    pub def: u32,
    pub name: u32,
    pub bases: u32,
}

pub struct Functions {
    pub compiled: Compiled,
    pub def: u32,
    pub name: u32,
    pub assignment_name: u32,
    pub assignment_value: u32,
}

pub struct Registrations {
    pub compiled: Compiled,
    pub call: u32,
    pub method: u32,
    pub arguments: u32,
}

impl Registrations {
    pub fn new(compiled: Compiled) -> Registrations {
        Registrations {
            call: compiled.capture("registration.call"),
            method: compiled.capture("registration.method"),
            arguments: compiled.capture("registration.arguments"),
            compiled,
        }
    }
}

pub struct OffloadEvidence {
    pub compiled: Compiled,
}

pub struct Imports {
    pub compiled: Compiled,
    pub relative: u32,
    pub module: u32,
    pub name: u32,
    pub alias: u32,
}

pub struct Fences {
    pub compiled: Compiled,
    pub call_function: u32,
    pub patch_owner: u32,
    pub patch_attribute: u32,
    pub patch_function: u32,
    pub patch_fence: u32,
    pub patch_target: u32,
    pub optout_comment: u32,
}

pub struct Suppressions {
    pub compiled: Compiled,
    pub comment: u32,
}

pub struct Fullgraph {
    pub compiled: Compiled,
    pub argument: u32,
}

/// The queries whose patterns the configuration does not change (the hook
/// method and registrar queries live in [`crate::vocabulary::Vocabulary`]).
pub struct Queries {
    pub classes: Classes,
    pub functions: Functions,
    pub offload_evidence: OffloadEvidence,
    pub imports: Imports,
    pub fences: Fences,
    pub fullgraph: Fullgraph,
    pub suppressions: Suppressions,
    /// `imports`, `fences` and `functions` in one walk, in that order.
    pub resolve: Combined,
}

macro_rules! scm {
    ($name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/queries/",
            $name,
            ".scm"
        ))
    };
}

/// Query sources the prefilter reads its names from.
pub const HOOK_METHODS_SCM: &str = scm!("hook_methods");
pub const REGISTRATIONS_SCM: &str = scm!("registrations");
pub const FULLGRAPH_SCM: &str = scm!("fullgraph");

macro_rules! load {
    ($name:literal) => {
        Compiled::new($name, scm!($name))
    };
}

impl Queries {
    fn compile() -> Queries {
        let classes = load!("classes");
        let functions = load!("functions");
        let offload_evidence = load!("offload_evidence");
        let imports = load!("imports");
        let fences = load!("fences");
        let fullgraph = load!("fullgraph");
        let suppressions = load!("suppressions");
        let resolve = Combined::new(&[&imports, &fences, &functions]);
        Queries {
            resolve,
            classes: Classes {
                def: classes.capture("class.def"),
                name: classes.capture("class.name"),
                bases: classes.capture("class.bases"),
                compiled: classes,
            },
            functions: Functions {
                def: functions.capture("function.def"),
                name: functions.capture("function.name"),
                assignment_name: functions.capture("assignment.name"),
                assignment_value: functions.capture("assignment.value"),
                compiled: functions,
            },
            offload_evidence: OffloadEvidence {
                compiled: offload_evidence,
            },
            imports: Imports {
                relative: imports.capture("import.relative"),
                module: imports.capture("import.module"),
                name: imports.capture("import.name"),
                alias: imports.capture("import.alias"),
                compiled: imports,
            },
            fences: Fences {
                call_function: fences.capture("call.function"),
                patch_owner: fences.capture("patch.owner"),
                patch_attribute: fences.capture("patch.attribute"),
                patch_function: fences.capture("patch.function"),
                patch_fence: fences.capture("patch.fence"),
                patch_target: fences.capture("patch.target"),
                optout_comment: fences.capture("optout.comment"),
                compiled: fences,
            },
            suppressions: Suppressions {
                comment: suppressions.capture("suppression.comment"),
                compiled: suppressions,
            },
            fullgraph: Fullgraph {
                argument: fullgraph.capture("fullgraph.argument"),
                compiled: fullgraph,
            },
        }
    }
}

pub static QUERIES: LazyLock<Queries> = LazyLock::new(Queries::compile);

#[cfg(test)]
mod tests {
    use super::*;
    use tree_sitter::{Parser, QueryCursor, StreamingIterator};

    fn count(compiled: &Compiled, source: &str) -> usize {
        let mut parser = Parser::new();
        parser.set_language(&language()).unwrap();
        let tree = parser.parse(source, None).unwrap();
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(&compiled.query, tree.root_node(), source.as_bytes());
        let mut n = 0;
        while matches.next().is_some() {
            n += 1;
        }
        n
    }

    #[test]
    fn every_query_compiles_and_matches_a_positive_and_not_a_negative_sample() {
        let q = &*QUERIES;
        let vocabulary = crate::vocabulary::Vocabulary::default();
        let v = vocabulary.compiled();
        let hook = "class H(ModelHook):\n    def pre_forward(self, m):\n        pass\n";
        assert_eq!(count(&v.hook_methods.compiled, hook), 1);
        assert_eq!(
            count(&v.hook_methods.compiled, "def pre_forward(m):\n    pass\n"),
            0
        );
        assert_eq!(
            count(
                &v.hook_methods.compiled,
                "class H:\n    def forward(self):\n        pass\n"
            ),
            0
        );

        assert_eq!(
            count(&q.classes.compiled, "class A(B, metaclass=M):\n    pass\n"),
            1
        );
        assert_eq!(count(&q.classes.compiled, "A = type('A', (), {})\n"), 0);

        assert_eq!(count(&q.functions.compiled, "def f():\n    g = 1\n"), 2);
        assert_eq!(count(&q.functions.compiled, "a.b = 1\n"), 0);

        assert_eq!(
            count(
                &v.registrations.compiled,
                "m.register_forward_pre_hook(f)\n"
            ),
            1
        );
        assert_eq!(
            count(
                &v.registrations.compiled,
                "register_module_forward_hook(f)\n"
            ),
            1
        );
        assert_eq!(
            count(
                &v.registrations.compiled,
                "m.register_full_backward_hook(f)\n"
            ),
            0
        );
        assert_eq!(
            count(&v.registrations.compiled, "'m.register_forward_hook(f)'\n"),
            0
        );

        let evidence = &q.offload_evidence.compiled;
        assert_eq!(count(evidence, "m.to('cuda')\n"), 1);
        assert_eq!(count(evidence, "send_to_device(x, d)\n"), 1);
        assert_eq!(count(evidence, "s.synchronize()\n"), 1);
        assert_eq!(count(evidence, "self.group.onload_()\n"), 1);
        assert_eq!(count(evidence, "f(x, non_blocking=True)\n"), 1);
        assert_eq!(count(evidence, "p.data = w\n"), 1);
        assert_eq!(count(evidence, "h.pre_forward(m)\n"), 1);
        assert_eq!(
            count(
                evidence,
                "x = a + b\ny = _synchronize_decision(x)\nz = t.item()\n"
            ),
            0
        );
        assert_eq!(count(evidence, "download(x)\nreload(y)\n"), 0);

        assert_eq!(
            count(
                &q.imports.compiled,
                "import torch as th\nfrom a.b import c, d as e\n"
            ),
            3
        );
        assert_eq!(
            count(
                &q.imports.compiled,
                "from . import x\nfrom ..a import b as c\n"
            ),
            2
        );
        assert_eq!(count(&q.imports.compiled, "x = 1\n"), 0);

        let fullgraph = &q.fullgraph.compiled;
        assert_eq!(count(fullgraph, "torch.compile(m, fullgraph=True)\n"), 1);
        assert_eq!(count(fullgraph, "torch.compile(m, fullgraph=False)\n"), 0);
        assert_eq!(count(fullgraph, "'fullgraph=True'\n"), 0);

        let fences = &q.fences.compiled;
        assert_eq!(count(fences, "A.pre_forward = d(A.pre_forward)\n"), 2);
        assert_eq!(count(fences, "# @torch.compiler.disable()\n"), 1);
        assert_eq!(count(fences, "# torch.compiler.disable is used below\n"), 0);
        let suppressions = &q.suppressions.compiled;
        assert_eq!(
            count(
                suppressions,
                "def f():  # hookfence: ignore[traced on purpose]\n    pass\n"
            ),
            1
        );
        assert_eq!(
            count(
                suppressions,
                "s = '# hookfence: ignore'\n# hookfence is nice\n"
            ),
            0
        );
        assert_eq!(count(fences, "x = 1\n"), 0);
    }
}
