//! The names a run matches: the defaults in `queries/*.scm` plus what the
//! configuration adds (`hook-bases`, `hook-methods`, `registrars`,
//! `fence-spellings`, `decorator`). Extra method and registrar names are
//! spliced into the queries' own `#any-of?` predicates, so the patterns stay
//! in one place and the prefilter reads its needles from the same text.

use std::collections::{BTreeSet, HashMap};

use crate::analysis::prefilter::{Context, Needle};
use crate::config;
use crate::queries::{self, Classes, Combined, HookMethods, Registrations};

/// Protocol bases whose `pre_forward`/`post_forward` subclasses implement.
pub const DEFAULT_PROTOCOL_BASES: &[&str] = &["ModelHook"];

/// The decorator the decorate strategy inserts, without the `@`.
pub const DEFAULT_DECORATOR: &str = "torch.compiler.disable()";

pub struct Vocabulary {
    /// What it was built from.
    settings: config::Settings,
    /// Protocol methods found by use (see [`crate::found::Discovered`]): a
    /// method of that name in any class is a hook, whatever its bases.
    pub discovered_protocols: std::collections::BTreeMap<String, crate::found::Found>,
    /// The spliced `hook_methods.scm` and `registrations.scm`.
    hook_methods_scm: String,
    registrations_scm: String,
    /// Compiled on first use: a run in which no file needs parsing never
    /// compiles them.
    /// Shared by the vocabularies of later rounds whose queries spell the
    /// same text: compiled once per run, not once per round.
    compiled: std::sync::Arc<std::sync::OnceLock<CompiledVocabulary>>,
    /// Registrars whose hook is not the first positional argument.
    pub registrar_positions: HashMap<String, usize>,
    pub protocol_bases: Vec<String>,
    /// Extra dotted names that count as a fence.
    pub fence_spellings: Vec<String>,
    /// What the decorate strategy inserts after `@`.
    pub decorator: String,
    /// The names whose presence (where their query could match them) makes
    /// a file worth parsing.
    pub needles: BTreeSet<Needle>,
    /// Every word a match of the `scan` query must contain (see
    /// [`Vocabulary::anchor_ranges`]).
    anchors: Vec<String>,
}

/// The queries a vocabulary compiles to.
pub struct CompiledVocabulary {
    /// `classes`, `fullgraph`, `hook_methods` and `registrations` in one
    /// walk, in that order: what every parsed file needs.
    pub scan: Combined,
    pub classes: Classes,
    /// `@fullgraph.argument` in `scan`.
    pub fullgraph_argument: u32,
    pub hook_methods: HookMethods,
    pub registrations: Registrations,
}

/// The function the wrap strategy's helper module defines.
pub const WRAP_HELPER_FUNCTION: &str = "no_compile";

/// The method a forward replacement replaces (kept with the prefilter,
/// which searches for it).
pub use crate::analysis::prefilter::FORWARD;

/// Builtin constructors of containers: what they return holds no hook.
pub const BUILTIN_CONTAINERS: &[&str] = &[
    "set",
    "dict",
    "list",
    "tuple",
    "frozenset",
    "collections.defaultdict",
    "defaultdict",
    "collections.OrderedDict",
    "OrderedDict",
    "collections.deque",
    "deque",
    "collections.Counter",
    "Counter",
];

/// Method names too common to look up by name alone on a receiver of
/// unknown type: tensor and module API, containers, I/O, lifecycle (a call
/// `x.to(...)` is a move in its own right, not a call of the project's `to`).
pub const GENERIC_METHODS: &[&str] = &[
    "to",
    "cuda",
    "cpu",
    "float",
    "half",
    "double",
    "bfloat16",
    "type",
    "view",
    "reshape",
    "get",
    "set",
    "update",
    "append",
    "extend",
    "items",
    "keys",
    "values",
    "pop",
    "copy",
    "clone",
    "detach",
    "forward",
    "apply",
    "run",
    "start",
    "stop",
    "step",
    "train",
    "eval",
    "save",
    "load",
    "close",
    "open",
    "read",
    "write",
    "format",
    "join",
    "split",
    "replace",
    "strip",
    "encode",
    "decode",
    "sum",
    "mean",
    "max",
    "min",
    "size",
    "item",
    "numpy",
    "tolist",
    "contiguous",
    // More of the tensor API: a tensor's method, never the project's.
    "pin_memory",
    "share_memory_",
    "untyped_storage",
    "data_ptr",
    "numel",
    "element_size",
    "index_select",
    "narrow",
    "transpose",
    "permute",
    "flatten",
    "unsqueeze",
    "squeeze",
    "requires_grad_",
    "chunk",
    "cat",
    "add",
    "remove",
    "clear",
    "call",
    "wait",
    "parameters",
    "named_parameters",
    "buffers",
    "modules",
    "children",
    "state_dict",
    "register_forward_hook",
    "register_forward_pre_hook",
    "zero_",
    "fill_",
    "copy_",
    "record",
    "synchronize",
    "info",
    "debug",
    "warning",
    "error",
    "log",
];

/// Adds `extra` strings to the `#any-of?` predicate on `@capture` in `scm`.
fn splice(scm: &str, capture: &str, extra: &[String]) -> String {
    let marker = format!("#any-of? @{capture}");
    let Some(at) = scm.find(&marker) else {
        return scm.to_owned();
    };
    let insert_at = at + marker.len();
    let quoted: String = extra.iter().map(|n| format!(" \"{n}\"")).collect();
    format!("{}{quoted}{}", &scm[..insert_at], &scm[insert_at..])
}

impl Vocabulary {
    pub fn new(settings: &config::Settings) -> Vocabulary {
        // `torch.autograd.graph.register_multi_grad_hook(tensors, fn)`
        // takes its hook second (`queries/registrations.scm`).
        let mut registrar_positions = HashMap::from([("register_multi_grad_hook".to_owned(), 1)]);
        let mut registrar_names = Vec::new();
        for registrar in &settings.registrars {
            let (name, index) = registrar.split_once(':').unwrap_or((registrar, "0"));
            registrar_names.push(name.to_owned());
            if let Ok(index) = index.parse::<usize>()
                && index > 0
            {
                registrar_positions.insert(name.to_owned(), index);
            }
        }
        let hook_methods_scm = splice(
            queries::HOOK_METHODS_SCM,
            "hook.name",
            &settings.hook_methods,
        );
        let registrations_scm = splice(
            queries::REGISTRATIONS_SCM,
            "registration.method",
            &registrar_names,
        );
        let protocol_bases: Vec<String> = DEFAULT_PROTOCOL_BASES
            .iter()
            .map(|s| s.to_string())
            .chain(settings.hook_bases.iter().cloned())
            .collect();
        let decorator = settings
            .decorator
            .clone()
            .unwrap_or_else(|| DEFAULT_DECORATOR.to_owned());
        let mut fence_spellings = settings.fence_spellings.clone();
        // What hookfence inserts must count as a fence, or a second run
        // would fence again.
        let inserted = decorator
            .split_once('(')
            .map_or(decorator.as_str(), |(c, _)| c);
        fence_spellings.push(inserted.to_owned());

        let in_context = |scm: &str, context| {
            queries::predicate_strings(scm)
                .into_iter()
                .map(move |name| Needle { name, context })
        };
        let needles: BTreeSet<Needle> = in_context(&hook_methods_scm, Context::Defined)
            .chain(in_context(&registrations_scm, Context::Called))
            .chain(protocol_bases.iter().map(Needle::word))
            .chain([Needle::anywhere(
                crate::analysis::prefilter::SUPPRESSION_MARK,
            )])
            .chain([Needle::replaced(FORWARD)])
            // A class swapped in (`m.__class__ = C`, `queries/index.scm`).
            .chain([Needle::replaced(crate::analysis::prefilter::CLASS_SWAP)])
            .collect();

        // A class statement starts with the keyword `class`; the other parts
        // of `scan` match names their predicates spell out.
        let anchors: Vec<String> = ["class".to_owned()]
            .into_iter()
            .chain(queries::predicate_strings(queries::FULLGRAPH_SCM))
            .chain(queries::predicate_strings(&hook_methods_scm))
            .chain(queries::predicate_strings(&registrations_scm))
            .collect();
        Vocabulary {
            settings: settings.clone(),
            discovered_protocols: Default::default(),
            anchors,
            hook_methods_scm,
            registrations_scm,
            compiled: Default::default(),
            registrar_positions,
            protocol_bases,
            fence_spellings,
            decorator,
            needles,
        }
    }

    /// This vocabulary plus what was found by use: the protocol methods
    /// become hook methods (matched in any class), and files defining the
    /// discovered functions are parsed.
    pub fn with_discovered(&self, discovered: &crate::found::Discovered) -> Vocabulary {
        let mut settings = self.settings.clone();
        let mut protocols = self.discovered_protocols.clone();
        for (name, why) in &discovered.protocols {
            if !settings.hook_methods.contains(name) {
                settings.hook_methods.push(name.clone());
            }
            protocols.entry(name.clone()).or_insert_with(|| why.clone());
        }
        let mut vocabulary = Vocabulary::new(&settings);
        vocabulary.discovered_protocols = protocols;
        if vocabulary.hook_methods_scm == self.hook_methods_scm
            && vocabulary.registrations_scm == self.registrations_scm
        {
            vocabulary.compiled = std::sync::Arc::clone(&self.compiled);
        }
        vocabulary
            .needles
            .extend(discovered.function_names().map(Needle::defined));
        vocabulary
    }

    /// The compiled queries, compiling them on first use.
    pub fn compiled(&self) -> &CompiledVocabulary {
        self.compiled.get_or_init(|| {
            let scan = Combined::new(&[
                queries::CLASSES_SCM,
                queries::FULLGRAPH_SCM,
                &self.hook_methods_scm,
                &self.registrations_scm,
            ]);
            CompiledVocabulary {
                classes: Classes::new(&scan),
                fullgraph_argument: scan.capture("fullgraph.argument"),
                hook_methods: HookMethods::new(&scan),
                registrations: Registrations::new(&scan),
                scan,
            }
        })
    }

    /// The places in `text` a match of the `scan` query must overlap: every
    /// occurrence of `class` and of the names its predicates spell out,
    /// overlapping ones merged. Every such match holds one of them (a class
    /// statement its keyword, the others a name their predicate fixes), so
    /// looking only there finds exactly what a walk of the whole tree finds.
    pub fn anchor_ranges(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        // Keywords and names are whole words (`classmethod` is no class
        // statement); a non-ASCII neighbour is given the benefit of the doubt.
        crate::analysis::prefilter::word_ranges(text, &self.anchors, &[])
    }

    pub fn is_protocol_base(&self, name: &str) -> bool {
        self.protocol_bases.iter().any(|b| b == name)
    }
}

impl Default for Vocabulary {
    fn default() -> Vocabulary {
        Vocabulary::new(&config::Settings::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_are_spliced_into_the_queries() {
        let settings = config::Settings {
            hook_methods: vec!["offload_step".into()],
            registrars: vec!["add_hook:1".into(), "attach".into()],
            hook_bases: vec!["OffloadProtocol".into()],
            ..Default::default()
        };
        let vocabulary = Vocabulary::new(&settings);
        for name in [
            "pre_forward",
            "offload_step",
            "add_hook",
            "attach",
            "register_forward_hook",
            "OffloadProtocol",
            "ModelHook",
        ] {
            assert!(vocabulary.needles.iter().any(|n| n.name == name), "{name}");
        }
        assert_eq!(vocabulary.registrar_positions.get("add_hook"), Some(&1));
        assert_eq!(vocabulary.registrar_positions.get("attach"), None);
        assert!(
            vocabulary
                .fence_spellings
                .contains(&"torch.compiler.disable".to_owned())
        );
    }
}
