//! The tree-sitter queries in `queries/*.scm`, compiled once, with their
//! capture indices looked up by name at start: a missing name is a bug that
//! panics on first use in any test, never a silent "no matches".

use std::sync::LazyLock;

use tree_sitter::{Language, Query};

pub fn language() -> Language {
    tree_sitter_python::LANGUAGE.into()
}

/// One compiled query, run on its own.
pub struct Compiled {
    pub query: Query,
}

impl Compiled {
    pub fn new(name: &str, text: &str) -> Compiled {
        let query = Query::new(&language(), text)
            .unwrap_or_else(|err| panic!("queries/{name}.scm does not compile: {err}"));
        Compiled { query }
    }

    pub fn capture(&self, name: &str) -> u32 {
        self.query
            .capture_index_for_name(name)
            .unwrap_or_else(|| panic!("query has no capture @{name}"))
    }
}

/// Several queries compiled as one, so a single walk of the tree serves them
/// all: each match is handed back with the index of the query it belongs to.
/// Capture names are unique across the queries (each file prefixes its own:
/// `@class.*`, `@hook.*`, ...), so captures are looked up by name in the
/// combined query itself and no query is compiled twice.
pub struct Combined {
    pub query: Query,
    /// The part each pattern comes from.
    pattern_parts: Vec<usize>,
}

impl Combined {
    /// Compiles `parts` (query sources) as one query.
    pub fn new(parts: &[&str]) -> Combined {
        let mut source = String::new();
        let mut starts = Vec::new();
        for part in parts {
            starts.push(source.len());
            source.push_str(part);
            source.push('\n');
        }
        let query = Query::new(&language(), &source)
            .unwrap_or_else(|err| panic!("combined queries do not compile: {err}"));
        let pattern_parts = (0..query.pattern_count())
            .map(|pattern| {
                let at = query.start_byte_for_pattern(pattern);
                starts.iter().rposition(|&start| start <= at).unwrap_or(0)
            })
            .collect();
        Combined {
            query,
            pattern_parts,
        }
    }

    /// Which part a pattern of the combined query comes from.
    pub fn part(&self, pattern: usize) -> usize {
        self.pattern_parts[pattern]
    }

    pub fn capture(&self, name: &str) -> u32 {
        self.query
            .capture_index_for_name(name)
            .unwrap_or_else(|| panic!("combined query has no capture @{name}"))
    }
}

/// Captures of `hook_methods.scm`, as numbered in the query it is part of.
pub struct HookMethods {
    pub class: u32,
    pub def: u32,
}

impl HookMethods {
    pub fn new(combined: &Combined) -> HookMethods {
        HookMethods {
            class: combined.capture("hook.class"),
            def: combined.capture("hook.def"),
        }
    }
}

/// Captures of `classes.scm`, as numbered in the query it is part of.
pub struct Classes {
    pub def: u32,
    pub name: u32,
}

impl Classes {
    pub fn new(combined: &Combined) -> Classes {
        Classes {
            def: combined.capture("class.def"),
            name: combined.capture("class.name"),
        }
    }
}

/// Captures of `functions.scm`, as numbered in [`Queries::resolve`].
pub struct Functions {
    pub def: u32,
    pub name: u32,
    pub assignment_name: u32,
    pub assignment_value: u32,
}

/// Captures of `registrations.scm`, as numbered in the query it is part of.
pub struct Registrations {
    pub call: u32,
    pub arguments: u32,
    /// Present when the registrar is a backward one.
    pub backward: u32,
    /// Present when the registrar is a tensor or autograd one (its hook is
    /// handed gradients, never the module).
    pub tensor: u32,
}

impl Registrations {
    pub fn new(combined: &Combined) -> Registrations {
        Registrations {
            call: combined.capture("registration.call"),
            arguments: combined.capture("registration.arguments"),
            backward: combined.capture("registration.backward"),
            tensor: combined.capture("registration.tensor"),
        }
    }
}

/// `index.scm`, `calls.scm`, `handed.scm` and `bindings.scm` as one walk,
/// for the project index and the file's scope model.
pub struct Index {
    pub combined: Combined,
    /// The part of [`Index::combined`] that is `bindings.scm`.
    pub bindings_part: usize,
    /// The part of [`Index::combined`] that is `imports.scm`.
    pub imports_part: usize,
    /// For each capture of [`Index::combined`], its index in
    /// [`Queries::resolve`], where `imports.scm` captures are read
    /// ([`Imports`]); `u32::MAX` for the others.
    pub as_resolve_capture: Vec<u32>,
    pub def: u32,
    pub def_name: u32,
    pub lambda: u32,
    pub class: u32,
    pub class_name: u32,
    pub local: u32,
    pub local_class: u32,
    pub attr: u32,
    pub attr_class: u32,
    pub fwd: u32,
    pub fwd_target: u32,
    pub fwd_value: u32,
    pub fwd_named_by: u32,
    pub saved: u32,
    pub swap: u32,
    pub swap_value: u32,
    pub ns: u32,
    pub ns_slot: u32,
    pub ns_value: u32,
    pub returned: u32,
    pub assigned: u32,
    pub assigned_value: u32,
    pub self_attr: u32,
    pub self_attr_value: u32,
    pub call: u32,
    pub call_name: u32,
    /// A method call's callee (`receiver.method`).
    pub call_attribute: u32,
    /// `queries/handed.scm`: a function handed to a tensor hook, the
    /// autograd engine or an autograd Function, and `Fn.apply(...)`.
    pub handed_call: u32,
    pub handed_callee: u32,
    pub handed_fn: u32,
    pub applying: u32,
    pub applied_class: u32,
    /// `queries/handed.scm`: registered hooks replayed by hand.
    pub replay_loop: u32,
    pub replay_var: u32,
    pub replay_table: u32,
    pub replay_name: u32,
    /// `queries/handed.scm`: attributes set to a name, and `x.attr.apply`.
    pub held_attr: u32,
    pub held_value: u32,
    pub held_applying: u32,
    pub held_holder: u32,
}

/// Captures of `calls.scm`.
pub struct Calls {
    pub compiled: Compiled,
    pub call: u32,
    pub name: u32,
    /// A method call's callee; see [`crate::syntax::method_callee`].
    pub attribute: u32,
}

/// Captures of `imports.scm`, as numbered in [`Queries::resolve`].
pub struct Imports {
    pub relative: u32,
    pub module: u32,
    pub name: u32,
    pub alias: u32,
    pub star: u32,
}

/// Captures of `fences.scm`, as numbered in [`Queries::resolve`].
pub struct Fences {
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

/// `bindings.scm`, run alone by [`crate::analysis::scope::SemanticModel::build`]
/// (and as part of [`Index`]), which tells its captures apart by name
/// (`scope.*`, `binding.*`).
pub struct Bindings {
    pub compiled: Compiled,
}

pub struct Fullgraph {
    pub compiled: Compiled,
    pub argument: u32,
}

/// The queries whose patterns the configuration does not change (the hook
/// method and registrar queries, and the `scan` query they are part of, live
/// in [`crate::analysis::vocabulary::Vocabulary`]).
pub struct Queries {
    pub functions: Functions,
    pub calls: Calls,
    pub index: Index,
    pub imports: Imports,
    pub fences: Fences,
    pub fullgraph: Fullgraph,
    pub suppressions: Suppressions,
    pub bindings: Bindings,
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
pub const CLASSES_SCM: &str = scm!("classes");

macro_rules! load {
    ($name:literal) => {
        Compiled::new($name, scm!($name))
    };
}

impl Queries {
    fn compile() -> Queries {
        let resolve = Combined::new(&[scm!("imports"), scm!("fences"), scm!("functions")]);
        let c = |name| resolve.capture(name);
        Queries {
            functions: Functions {
                def: c("function.def"),
                name: c("function.name"),
                assignment_name: c("assignment.name"),
                assignment_value: c("assignment.value"),
            },
            imports: Imports {
                relative: c("import.relative"),
                module: c("import.module"),
                name: c("import.name"),
                alias: c("import.alias"),
                star: c("import.star"),
            },
            fences: Fences {
                call_function: c("call.function"),
                patch_owner: c("patch.owner"),
                patch_attribute: c("patch.attribute"),
                patch_function: c("patch.function"),
                patch_fence: c("patch.fence"),
                patch_target: c("patch.target"),
                optout_comment: c("optout.comment"),
            },
            index: {
                let parts = [
                    scm!("index"),
                    scm!("calls"),
                    scm!("handed"),
                    scm!("bindings"),
                    scm!("imports"),
                ];
                let part_of = |source: &str| {
                    parts
                        .iter()
                        .position(|part| *part == source)
                        .expect("one of the index's parts")
                };
                let bindings_part = part_of(scm!("bindings"));
                let imports_part = part_of(scm!("imports"));
                let combined = Combined::new(&parts);
                let as_resolve_capture = combined
                    .query
                    .capture_names()
                    .iter()
                    .map(|name| match name.starts_with("import.") {
                        true => resolve.capture(name),
                        false => u32::MAX,
                    })
                    .collect();
                let c = |name| combined.capture(name);
                Index {
                    def: c("index.def"),
                    def_name: c("index.def_name"),
                    lambda: c("index.lambda"),
                    class: c("index.class"),
                    class_name: c("index.class_name"),
                    local: c("index.local"),
                    local_class: c("index.local_class"),
                    attr: c("index.attr"),
                    attr_class: c("index.attr_class"),
                    fwd: c("index.fwd"),
                    fwd_target: c("index.fwd_target"),
                    fwd_value: c("index.fwd_value"),
                    fwd_named_by: c("index.fwd_named_by"),
                    saved: c("index.saved"),
                    swap: c("index.swap"),
                    swap_value: c("index.swap_value"),
                    ns: c("index.ns"),
                    ns_slot: c("index.ns_slot"),
                    ns_value: c("index.ns_value"),
                    returned: c("index.returned"),
                    assigned: c("index.assigned"),
                    assigned_value: c("index.assigned_value"),
                    self_attr: c("index.self_attr"),
                    self_attr_value: c("index.self_attr_value"),
                    call: c("callsite.call"),
                    call_name: c("callsite.name"),
                    call_attribute: c("callsite.attribute"),
                    handed_call: c("handed.call"),
                    handed_callee: c("handed.callee"),
                    handed_fn: c("handed.fn"),
                    applying: c("handed.applying"),
                    applied_class: c("handed.class"),
                    replay_loop: c("replay.loop"),
                    replay_var: c("replay.var"),
                    replay_table: c("replay.table"),
                    replay_name: c("replay.name"),
                    held_attr: c("held.attr"),
                    held_value: c("held.value"),
                    held_applying: c("held.applying"),
                    held_holder: c("held.holder"),
                    bindings_part,
                    imports_part,
                    as_resolve_capture,
                    combined,
                }
            },
            calls: {
                let compiled = load!("calls");
                Calls {
                    call: compiled.capture("callsite.call"),
                    name: compiled.capture("callsite.name"),
                    attribute: compiled.capture("callsite.attribute"),
                    compiled,
                }
            },
            suppressions: {
                let compiled = load!("suppressions");
                Suppressions {
                    comment: compiled.capture("suppression.comment"),
                    compiled,
                }
            },
            fullgraph: {
                let compiled = load!("fullgraph");
                Fullgraph {
                    argument: compiled.capture("fullgraph.argument"),
                    compiled,
                }
            },
            bindings: Bindings {
                compiled: load!("bindings"),
            },
            resolve,
        }
    }
}

/// The strings of every `#any-of?` and `#eq?` predicate in a query source.
pub fn predicate_strings(query_source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for marker in ["#any-of?", "#eq?"] {
        for predicate in query_source.split(marker).skip(1) {
            let body = predicate.split(')').next().unwrap_or_default();
            out.extend(body.split('"').skip(1).step_by(2).map(str::to_owned));
        }
    }
    out
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
    fn combined_parts_keep_their_patterns_and_capture_names() {
        let combined = Combined::new(&[CLASSES_SCM, FULLGRAPH_SCM, REGISTRATIONS_SCM]);
        let parts: Vec<usize> = (0..combined.query.pattern_count())
            .map(|p| combined.part(p))
            .collect();
        assert_eq!(parts, [0, 1, 2, 2, 2, 2]);
        // Every capture name belongs to exactly one part of each combined
        // query hookfence runs, so looking it up in the whole is unambiguous.
        let vocabulary = crate::analysis::vocabulary::Vocabulary::default();
        let scan_parts = [
            CLASSES_SCM,
            FULLGRAPH_SCM,
            HOOK_METHODS_SCM,
            REGISTRATIONS_SCM,
        ];
        let resolve_parts = [scm!("imports"), scm!("fences"), scm!("functions")];
        for (combined, parts) in [
            (&vocabulary.compiled().scan, &scan_parts[..]),
            (&QUERIES.resolve, &resolve_parts[..]),
        ] {
            for name in combined.query.capture_names() {
                let owners = parts
                    .iter()
                    .filter(|source| {
                        source.match_indices(&format!("@{name}")).any(|(at, m)| {
                            !source[at + m.len()..]
                                .starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '.')
                        })
                    })
                    .count();
                assert_eq!(owners, 1, "@{name}");
            }
        }
    }

    #[test]
    fn every_query_compiles_and_matches_a_positive_and_not_a_negative_sample() {
        let q = &*QUERIES;
        // The queries that only ever run combined, compiled alone here.
        let hook_methods = load!("hook_methods");
        let registrations = load!("registrations");
        let classes = load!("classes");
        let functions = load!("functions");
        let imports = load!("imports");
        let fences = load!("fences");
        let handed = load!("handed");
        for (text, matches) in [
            // Handed to a tensor hook, by name and through partial.
            ("t.register_hook(release)\n", 1),
            ("engine.queue_callback(functools.partial(release, m))\n", 1),
            // Fn.apply (and each name handed to it), and an attribute's class
            // applied (as a value too).
            ("Fn.apply(m, out)\n", 3),
            ("run(module.post_bwd_fn.apply, inputs)\n", 1),
            // An attribute set to a name; a replayed table.
            ("ctx.release = _release\n", 1),
            (
                "for h in sub._forward_pre_hooks.values():\n    h(sub, a)\n",
                1,
            ),
            (
                "for _, h in sub._forward_hooks_with_kwargs.items():\n    h(sub, a, k, o)\n",
                1,
            ),
            // No function handed over, no table, no name assigned.
            ("t.register_hook(lambda g: g * 2)\n", 0),
            ("print(release)\n", 0),
            ("for h in hooks.values():\n    h(m)\n", 0),
            ("ctx.release = make()\n", 0),
        ] {
            assert_eq!(count(&handed, text), matches, "{text:?}");
        }
        let hook = "class H(ModelHook):\n    def pre_forward(self, m):\n        pass\n";
        assert_eq!(count(&hook_methods, hook), 1);
        assert_eq!(count(&hook_methods, "def pre_forward(m):\n    pass\n"), 0);
        assert_eq!(
            count(
                &hook_methods,
                "class H:\n    def forward(self):\n        pass\n"
            ),
            0
        );

        assert_eq!(count(&classes, "class A(B, metaclass=M):\n    pass\n"), 1);
        assert_eq!(count(&classes, "A = type('A', (), {})\n"), 0);

        assert_eq!(count(&functions, "def f():\n    g = 1\n"), 2);
        assert_eq!(count(&functions, "a.b = 1\n"), 0);

        assert_eq!(count(&registrations, "m.register_forward_pre_hook(f)\n"), 1);
        assert_eq!(
            count(&registrations, "register_module_forward_hook(f)\n"),
            1
        );
        assert_eq!(
            count(&registrations, "m.register_full_backward_hook(f)\n"),
            1
        );
        assert_eq!(count(&registrations, "m.register_backward_hook(f)\n"), 0);
        assert_eq!(count(&registrations, "'m.register_forward_hook(f)'\n"), 0);
        // Tensor and autograd hooks: one argument, or the multi-grad
        // registrar's two; a registry's `register_hook(hook, name)` is none.
        for tensor_hook in [
            "t.register_hook(f)\n",
            "acc.register_prehook(f)\n",
            "p.register_post_accumulate_grad_hook(f)\n",
            "Variable._execution_engine.queue_callback(f)\n",
            "torch.autograd.graph.register_multi_grad_hook(ts, f)\n",
            "register_multi_grad_hook(ts, f, mode='any')\n",
        ] {
            assert_eq!(count(&registrations, tensor_hook), 1, "{tensor_hook:?}");
        }
        assert_eq!(
            count(&registrations, "registry.register_hook(h, name)\n"),
            0
        );
        assert_eq!(count(&registrations, "register_hook(f)\n"), 0);
        assert_eq!(count(&registrations, "t.register_hook()\n"), 0);

        assert_eq!(
            count(&imports, "import torch as th\nfrom a.b import c, d as e\n"),
            3
        );
        assert_eq!(
            count(&imports, "from . import x\nfrom ..a import b as c\n"),
            2
        );
        assert_eq!(count(&imports, "x = 1\n"), 0);

        let fullgraph = &q.fullgraph.compiled;
        assert_eq!(count(fullgraph, "torch.compile(m, fullgraph=True)\n"), 1);
        assert_eq!(count(fullgraph, "torch.compile(m, fullgraph=False)\n"), 0);
        assert_eq!(count(fullgraph, "'fullgraph=True'\n"), 0);

        let fences = &fences;
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
