//! Summaries over small projects written to a temporary directory: what a
//! function does, through what it calls, judged at a hook.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;

use crate::analysis::effects::local::Kind;
use crate::analysis::effects::summary::Target;
use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::project::{ModuleCache, ProjectIndex};
use crate::analysis::vocabulary::Vocabulary;

/// A project of `files`, every module indexed.
struct Project {
    _dir: tempfile::TempDir,
    modules: Vec<Arc<ModuleFacts>>,
    cache: Arc<ModuleCache>,
    vocabulary: Vocabulary,
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let vocabulary = Vocabulary::default();
        let mut modules = Vec::new();
        for (path, text) in files {
            let full: PathBuf = dir.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, text).unwrap();
            let tree = crate::parse::parse(text).unwrap();
            modules.push(Arc::new(ModuleFacts::build(
                &full,
                tree.root_node(),
                text,
                &vocabulary,
                None,
                None,
                &crate::analysis::listings::Listings::default(),
            )));
        }
        Project {
            _dir: dir,
            modules,
            cache: Arc::new(ModuleCache::default()),
            vocabulary,
        }
    }

    fn index(&self) -> ProjectIndex<'_> {
        ProjectIndex::new(
            self.modules.clone(),
            &self.vocabulary,
            Arc::clone(&self.cache),
        )
    }

    /// The module of `file` and the index of its function `qualname`.
    fn function(&self, file: &str, qualname: &str) -> (Arc<ModuleFacts>, usize) {
        let module = self
            .modules
            .iter()
            .find(|m| m.path.ends_with(file))
            .unwrap();
        let index = module
            .functions
            .iter()
            .position(|f| f.qualname == qualname)
            .unwrap_or_else(|| panic!("{qualname} not in {file}"));
        (Arc::clone(module), index)
    }

    /// The hook `qualname` of `file` judged: its evidence's detail, if any.
    fn evidence(&self, file: &str, qualname: &str) -> Option<String> {
        let index = self.index();
        let (module, function) = self.function(file, qualname);
        let fact = &module.functions[function];
        index
            .judge_hook(&module.path, fact.line, fact.column)
            .unwrap()
            .evidence
            .map(|e| e.detail)
    }
}

#[test]
fn recursion_reaches_a_fixpoint_with_the_effect() {
    let p = Project::new(&[(
        "m.py",
        "def walk(module, depth):\n    if depth:\n        walk(module, depth - 1)\n    module.to('cuda')\n\n\
         def hook(module, args):\n    walk(module, 3)\n",
    )]);
    let index = p.index();
    let summary = index.summary(&p.function("m.py", "walk"));
    assert!(
        summary
            .effects
            .iter()
            .any(|e| e.kind == Kind::Move && matches!(e.target, Target::Param { index: 0, .. })),
        "{summary:?}"
    );
    assert!(p.evidence("m.py", "hook").is_some());
}

#[test]
fn mutual_recursion_across_two_files_is_one_component() {
    let p = Project::new(&[
        ("pkg/__init__.py", ""),
        (
            "pkg/a.py",
            "from pkg.b import pong\n\n\ndef ping(module, n):\n    if n:\n        pong(module, n - 1)\n\n\n\
             def hook(module, args):\n    ping(module, 4)\n",
        ),
        (
            "pkg/b.py",
            "from pkg.a import ping\n\n\ndef pong(module, n):\n    for p in module.parameters():\n        p.data = p.data.to('cpu')\n    ping(module, n)\n",
        ),
    ]);
    let index = p.index();
    for (file, name) in [("pkg/a.py", "ping"), ("pkg/b.py", "pong")] {
        let summary = index.summary(&p.function(file, name));
        assert!(
            summary
                .effects
                .iter()
                .any(|e| matches!(e.target, Target::Param { index: 0, .. })),
            "{name}: {summary:?}"
        );
    }
    let evidence = p.evidence("pkg/a.py", "hook").unwrap();
    assert!(evidence.contains("p.data"), "{evidence}");
}

#[test]
fn a_callee_reached_from_many_hooks_is_summarised_once() {
    let mut text = String::from("def move(module):\n    module.to('cuda')\n\n\n");
    for i in 0..20 {
        text.push_str(&format!(
            "def hook_{i}(module, args):\n    move(module)\n\n\n"
        ));
    }
    let p = Project::new(&[("m.py", &text)]);
    for i in 0..20 {
        assert!(p.evidence("m.py", &format!("hook_{i}")).is_some());
    }
    // Twenty hooks and `move`: each summarised once.
    assert_eq!(p.cache.summaries.computed(), 21);
}

#[test]
fn calls_sharing_their_targets_and_arguments_are_followed_once() {
    // One attribute set to n functions that move the module, and called
    // after each assignment (B7 of the hardening issue): every call reaches
    // the same n functions with the same argument.
    let summarised = |n: usize| {
        let mut text = String::new();
        for i in 0..n {
            text.push_str(&format!("def r{i}(m):\n    m.to('cuda')\n\n\n"));
        }
        text.push_str("def hook(m, args):\n    ctx = object()\n");
        for i in 0..n {
            text.push_str(&format!("    ctx.rel = r{i}\n    ctx.rel(m)\n"));
        }
        let p = Project::new(&[("m.py", &text)]);
        let evidence = p.evidence("m.py", "hook").unwrap();
        assert!(evidence.contains(".to("), "{evidence}");
        p.cache.summaries.mapped()
    };
    // Each function's effect is mapped into the hook once, not once per
    // call: the work grows with n, not with n * n.
    assert_eq!(summarised(50), 50);
    assert_eq!(summarised(100), 100);
}

#[test]
fn hooks_replaying_one_table_walk_it_once() {
    // n hooks replaying the table that n registrations fill (B8 of the
    // hardening issue): every replaying hook is registered too, so all of
    // them call each other through one shared list of 2n functions.
    let searched = |n: usize| {
        let mut text = String::from("def mover(m, a):\n    m.to('cuda')\n\n\n");
        text.push_str("model.register_forward_pre_hook(mover)\n\n\n");
        for i in 0..n {
            text.push_str(&format!(
                "def h{i}(m, a):\n    return None\n\n\nmodel.register_forward_pre_hook(h{i})\n\n\n"
            ));
        }
        for i in 0..n {
            text.push_str(&format!(
                "def fused{i}(module, args):\n    for sub in module.children():\n        \
                 for hook in sub._forward_pre_hooks.values():\n            hook(sub, args)\n\n\n\
                 model.register_forward_pre_hook(fused{i})\n\n\n"
            ));
        }
        let p = Project::new(&[("m.py", &text)]);
        let evidence = p.evidence("m.py", "fused0").unwrap();
        assert!(evidence.contains(".to("), "{evidence}");
        p.cache.summaries.edges()
    };
    // The list is walked once per search, not once per hook that replays
    // it: the edges grow with n, not with n * n.
    let (small, large) = (searched(40), searched(80));
    assert!(large <= 2 * small + 8, "{small} edges at 40, {large} at 80");
}

#[test]
fn a_ten_thousand_link_call_chain_is_summarised_in_linear_work() {
    // hook -> f0 -> f1 -> ... -> f9999, and only the last moves the
    // module: its effect reaches the hook through every link (no depth
    // cut-off), each function summarised once, each edge followed once.
    const LINKS: usize = 10_000;
    let mut text = String::from("def hook(m, args):\n    f0(m)\n\n\n");
    for i in 0..LINKS - 1 {
        text.push_str(&format!("def f{i}(m):\n    f{}(m)\n\n\n", i + 1));
    }
    text.push_str(&format!("def f{}(m):\n    m.to('cuda')\n", LINKS - 1));
    let p = Project::new(&[("m.py", &text)]);
    let evidence = p.evidence("m.py", "hook").unwrap();
    assert!(evidence.contains(".to("), "{evidence}");
    let summaries = &p.cache.summaries;
    assert_eq!(summaries.computed(), LINKS + 1);
    // A function to its call's list, the list to the function: two edges
    // per link.
    assert!(
        summaries.edges() <= 2 * (LINKS + 1),
        "{}",
        summaries.edges()
    );
}

#[test]
fn a_fenced_callee_keeps_its_effects_and_says_it_is_fenced() {
    let p = Project::new(&[(
        "m.py",
        "import torch\n\n\n@torch.compiler.disable()\ndef fetch(module):\n    module.to('cuda')\n\n\n\
         @torch.compiler.disable()\ndef log(module):\n    print(module)\n\n\n\
         def hook(module, args):\n    fetch(module)\n\n\n\
         def quiet(module, args):\n    log(module)\n",
    )]);
    let index = p.index();
    let (module, hook) = p.function("m.py", "hook");
    let fact = &module.functions[hook];
    let judged = index
        .judge_hook(&module.path, fact.line, fact.column)
        .unwrap();
    let effect = judged.evidence.unwrap();
    let steps = effect.steps();
    assert_eq!(steps.len(), 1);
    assert!(steps[0].fenced.is_some(), "{steps:?}");
    assert!(steps[0].describe().ends_with("(fenced)"));
    // A fence on a callee that does nothing is no evidence.
    assert_eq!(p.evidence("m.py", "quiet"), None);
}

#[test]
fn an_argument_is_module_state_for_one_caller_and_an_activation_for_another() {
    let p = Project::new(&[(
        "m.py",
        "import torch.distributed as dist\n\n\n\
         def gather(tensor, out):\n    dist.all_gather_into_tensor(out, tensor)\n    return out\n\n\n\
         def weights(module, args):\n    gather(module.weight, None)\n\n\n\
         def outputs(module, args, output):\n    return gather(output, None)\n",
    )]);
    let index = p.index();
    let summary = index.summary(&p.function("m.py", "gather"));
    assert!(
        summary
            .effects
            .iter()
            .any(|e| e.kind == Kind::Collective
                && matches!(e.target, Target::Param { index: 0, .. })),
        "{summary:?}"
    );
    assert!(p.evidence("m.py", "weights").is_some());
    assert_eq!(p.evidence("m.py", "outputs"), None);
}

#[test]
fn a_value_made_by_the_caller_drops_the_effect() {
    let p = Project::new(&[(
        "m.py",
        "import torch\n\n\ndef free(t):\n    t.untyped_storage().resize_(0)\n\n\n\
         def scratch(module, args):\n    buf = torch.empty(4)\n    free(buf)\n\n\n\
         def release(module, args):\n    for p in module.parameters():\n        free(p)\n",
    )]);
    assert_eq!(p.evidence("m.py", "scratch"), None);
    let evidence = p.evidence("m.py", "release").unwrap();
    assert!(evidence.contains("storage"), "{evidence}");
}

#[test]
fn an_observers_own_statistics_are_not_module_state() {
    let p = Project::new(&[(
        "m.py",
        "import torch\n\n\nclass Observer:\n    def __init__(self):\n        self.total = torch.zeros(4)\n\n\
         \x20   def observe(self, x):\n        self.total = self.total.to(x.device, non_blocking=True)\n        self.total += x.sum(0)\n\n\n\
         class Offloader:\n    def __init__(self, params):\n        self.params = params\n\n\
         \x20   def onload(self):\n        for p in self.params:\n            p.data = p.data.to('cuda', non_blocking=True)\n\n\n\
         def attach(model, params):\n    observer = Observer()\n    offloader = Offloader(params)\n\n\
         \x20   def stats(module, args):\n        observer.observe(args[0])\n\n\
         \x20   def onload(module, args):\n        offloader.onload()\n\n\
         \x20   model.register_forward_pre_hook(stats)\n    model.register_forward_pre_hook(onload)\n",
    )]);
    assert_eq!(p.evidence("m.py", "attach.<locals>.stats"), None);
    assert!(p.evidence("m.py", "attach.<locals>.onload").is_some());
}

#[test]
fn summaries_are_kept_over_the_same_modules_and_dropped_over_others() {
    let p = Project::new(&[
        (
            "a.py",
            "from b import Offloader\n\n\ndef install(model, hooks):\n    def hook(module, args):\n        for h in hooks:\n            h.unload_all(module)\n    model.register_forward_pre_hook(hook)\n",
        ),
        (
            "b.py",
            "class Offloader:\n    def unload_all(self, module):\n        module.to('cpu')\n",
        ),
    ]);
    let only_a = || {
        ProjectIndex::new(
            vec![Arc::clone(&p.modules[0])],
            &p.vocabulary,
            Arc::clone(&p.cache),
        )
    };
    let hook = p.function("a.py", "install.<locals>.hook");
    let first = only_a().summary(&hook);
    let computed = p.cache.summaries.computed();
    // A later round over the same modules reuses every summary.
    let again = only_a().summary(&hook);
    assert!(Arc::ptr_eq(&first, &again));
    assert_eq!(p.cache.summaries.computed(), computed);
    // One over more modules computes them again: a call's targets are
    // looked up among the indexed modules.
    let both = p.index().summary(&hook);
    assert!(p.cache.summaries.computed() > computed);
    assert!(
        both.effects
            .iter()
            .any(|e| matches!(e.target, Target::Param { index: 0, .. })),
        "{both:?}"
    );
    // A run over fewer modules (one file, after its project was read for
    // context) keeps the summaries computed over more.
    let computed = p.cache.summaries.computed();
    let after = only_a().summary(&hook);
    assert!(Arc::ptr_eq(&both, &after));
    assert_eq!(p.cache.summaries.computed(), computed);
}

#[test]
fn calls_are_resolved_ahead_of_the_summaries_once_per_function_and_list() {
    // A chain and a table: every function the hook reaches has its calls
    // resolved before the summaries are locked (so threads resolve in
    // parallel), each function and each shared target list taken once.
    let resolved = |n: usize| {
        let mut text = String::from("def hook(m, args):\n    f0(m)\n\n\n");
        for i in 0..n {
            text.push_str(&format!("def f{i}(m):\n    f{}(m)\n\n\n", i + 1));
        }
        text.push_str(&format!("def f{n}(m):\n    m.to('cuda')\n"));
        let p = Project::new(&[("m.py", &text)]);
        let index = p.index();
        let hook = p.function("m.py", "hook");
        index.resolve_reachable(&hook);
        let functions = index.callers.lock().unwrap().len();
        let taken = index.resolved_ahead.lock().unwrap().len();
        // Nothing is left for the search to resolve, and it finds the
        // effect at the end of the chain.
        let evidence = p.evidence("m.py", "hook").unwrap();
        assert!(evidence.contains(".to("), "{evidence}");
        (functions, taken)
    };
    let (functions, taken) = resolved(200);
    assert_eq!(functions, 202, "the hook and f0..=f200");
    // One entry per function, one per call's target list.
    assert!(taken <= 2 * 202, "{taken}");
    let (_, larger) = resolved(400);
    assert!(larger <= 2 * taken + 4, "{taken} at 200, {larger} at 400");
}

#[test]
fn what_modules_find_in_parallel_keeps_the_first_reason_in_module_order() {
    // Eight modules install forward wrappers that call one loader: the
    // loader is found by use once, for the first module's wrapper, however
    // the modules' discovery is spread over threads.
    let installer = "from hooks import load\n\n\ndef install(m):\n    old = m.forward\n\n    \
                     def wrapper(*args):\n        load(m)\n        return old(*args)\n\n    \
                     m.forward = wrapper\n";
    let names: Vec<String> = (0..8).map(|i| format!("install_{i}.py")).collect();
    let mut files: Vec<(&str, &str)> = vec![("hooks.py", "def load(m):\n    m.to('cuda')\n")];
    files.extend(names.iter().map(|n| (n.as_str(), installer)));
    let p = Project::new(&files);
    for _ in 0..4 {
        let discovered = p.index().discover(&std::collections::HashSet::new());
        let reasons: Vec<&crate::found::Found> = discovered
            .functions
            .iter()
            .filter(|((path, _, _), _)| path.ends_with("hooks.py"))
            .map(|(_, why)| why)
            .collect();
        assert_eq!(reasons.len(), 1, "{reasons:?}");
        assert!(reasons[0].path.ends_with("install_0.py"), "{reasons:?}");
    }
}

#[test]
fn a_leaf_layer_lineage_is_read_once_whatever_its_depth() {
    // A chain of 2,000 classes, each deriving from the one before, the
    // first from torch's `nn.Linear`, asked from the deepest: every class
    // of the chain gets its answer in that one pass, so asking each of the
    // others afterwards reads nothing more (the work is linear in the
    // chain, not quadratic).
    let mut text = String::from("import torch\n\nclass C0(torch.nn.Linear):\n    pass\n");
    for i in 1..2000 {
        text.push_str(&format!("\nclass C{i}(C{}):\n    pass\n", i - 1));
    }
    let project = Project::new(&[("layers.py", &text)]);
    let index = project.index();
    let module = &project.modules[0];
    let mut known = crate::analysis::layer_transfer::LeafLayers::new();
    assert_eq!(
        index
            .leaf_layer_base(module, "C1999", &mut known)
            .as_deref(),
        Some("torch.nn.Linear")
    );
    assert_eq!(known.len(), 2000, "one answer per class of the chain");
    for i in 0..2000 {
        assert_eq!(
            index
                .leaf_layer_base(module, &format!("C{i}"), &mut known)
                .as_deref(),
            Some("torch.nn.Linear")
        );
    }
    assert_eq!(known.len(), 2000, "nothing read twice");
    // A class whose lineage ends in `nn.Module` is no leaf layer.
    let project = Project::new(&[(
        "blocks.py",
        "import torch\n\nclass B(torch.nn.Module):\n    pass\n\nclass D(B):\n    pass\n",
    )]);
    let index = project.index();
    let mut known = crate::analysis::layer_transfer::LeafLayers::new();
    assert_eq!(
        index.leaf_layer_base(&project.modules[0], "D", &mut known),
        None
    );
}
