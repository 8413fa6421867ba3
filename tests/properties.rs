//! Property tests over the planner and the edit applier (proptest; `cargo
//! fuzz` needs a nightly toolchain this project does not use).
//!
//! - Arbitrary bytes, and Python-ish sources with random bytes spliced in,
//!   never make the analysis panic.
//! - For generated sources that parse (tree-sitter is the oracle here;
//!   Python's `ast` per case would be too slow), the rewritten text parses,
//!   keeps every byte of the original in order, adds only fence forms, and a
//!   second analysis of it plans nothing.
//! - `edit::apply` matches a simple model on random edits.
//! - CPython compiles every output whose input it compiled (48 cases: each
//!   runs `python3`).
//! - The diff of a file with an odd name (tab, newline, quote, backslash,
//!   bytes that are no UTF-8) and lone CRs inside its lines goes through the
//!   real `git apply` and gives the rewritten file (48 cases).
//!
//! Sources are built from fragments (hook classes, registrations, lambdas,
//! decorators, comments, docstrings, strings), optionally nested in blocks,
//! then varied: CRLF or mixed line endings, tab or two-space indentation, a
//! BOM, no final newline. `PROPTEST_CASES` sets the number of cases (256 by
//! default); failing inputs are kept in `tests/properties.proptest-regressions`
//! and replayed first on every run.
//!
//! Every run draws the same cases: the generator's seed is fixed
//! ([`SEED`]), so a run that passed once passes again. `PROPTEST_RNG_SEED`
//! draws other cases, to explore; a failure found so is saved to the
//! regressions file and replayed from then on.
//!
//! "Parses" means what CPython means: tree-sitter reads some text CPython
//! rejects (`0def f(): ...`), and that is a syntax error of the input, not
//! a source to rewrite.

#![allow(clippy::unwrap_used)] // test helpers: a panic is the failure report

use std::path::PathBuf;

use hookfence::edit::{Edit, Fix};
use hookfence::{Analysis, Options};
use proptest::prelude::*;
use similar::{ChangeTag, TextDiff};

const FRAGMENTS: &[&str] = &[
    "import torch\n",
    "import torch as th\n",
    "from torch.compiler import disable as nd\n",
    "import functools\nfrom functools import partial\n",
    "from accelerate.hooks import ModelHook\n",
    "from accelerate import hooks\n",
    "from __future__ import annotations\n",
    "\"\"\"Module docstring: def pre_forward(self): module.to('cuda').\"\"\"\n",
    "#!/usr/bin/env python3\n",
    "# -*- coding: utf-8 -*-\n",
    "# a comment mentioning register_forward_hook(hook)\n",
    "\n",
    "x = 1\n",
    "pass\n",
    "s = 'class Fake(ModelHook):\\n    def pre_forward(self): pass'\n",
    "class ModelHook:\n    def pre_forward(self, module, *args, **kwargs):\n        return args, kwargs\n\n    def post_forward(self, module, output):\n        return output\n",
    "class CpuOffload(ModelHook):\n    def pre_forward(self, module, *args, **kwargs):\n        module.to(\"cuda\")\n        return args, kwargs\n",
    "class Dotted(hooks.ModelHook):\n    def post_forward(self, module, output):\n        module.cpu()\n        return output\n",
    "class Child(CpuOffload):\n    def post_forward(self, module, output):\n        return output\n",
    "class Logging(ModelHook):\n    def pre_forward(self, module, *args):\n        print(module)\n        return args, {}\n",
    "class OneLine(ModelHook):\n    def pre_forward(self, m, *a, **k): return m.to('cuda'), a, k\n",
    "class Multi(ModelHook):\n    def pre_forward(\n        self,\n        module,  # the module\n        *args,\n    ):\n        module.to('cuda')\n        return args\n",
    "class Static(ModelHook):\n    @staticmethod\n    def pre_forward(module, *args):\n        module.to('cuda')\n        return args\n",
    "class Deco(ModelHook):\n    @functools.wraps(print)\n    # a comment between decorators\n    @staticmethod\n    def post_forward(module, output):\n        module.cpu()\n        return output\n",
    "class Fenced(ModelHook):\n    @torch.compiler.disable()\n    def pre_forward(self, module):\n        module.to('cuda')\n",
    "class AliasFenced(ModelHook):\n    @nd\n    def pre_forward(self, module):\n        module.to('cuda')\n",
    "class OptOut(ModelHook):\n    # @torch.compiler.disable()\n    def pre_forward(self, module):\n        module.to('cuda')\n",
    "class Suppressed(ModelHook):\n    # hookfence: ignore[traced on purpose]\n    def pre_forward(self, module):\n        module.to('cuda')\n",
    "class Async(ModelHook):\n    async def pre_forward(self, module):\n        module.to('cuda')\n",
    "class Prop(ModelHook):\n    @property\n    def pre_forward(self):\n        return self.m.to('cuda')\n",
    "def offload_hook(module, args):\n    module.to('cpu', non_blocking=True)\n",
    "model.register_forward_pre_hook(offload_hook)\n",
    "model.register_forward_hook(hook=offload_hook)\n",
    "model.register_forward_hook(lambda m, a, out: out.to('cpu'))\n",
    "model.register_forward_pre_hook(lambda m, a: (m.cuda(), a)[1])\n",
    "model.register_forward_pre_hook(functools.partial(offload_hook))\n",
    "model.register_forward_pre_hook(partial(offload_hook, x=1))\n",
    "model.register_forward_pre_hook(torch.compiler.disable(offload_hook))\n",
    "def install(model):\n    def inner(m, a):\n        m.cuda()\n    model.register_forward_pre_hook(inner)\n    return model\n",
    "class Installer:\n    def _pre(self, m, a):\n        m.to('cuda')\n\n    def install(self, model):\n        model.register_forward_pre_hook(self._pre)\n",
    "model.register_forward_pre_hook(make_hook(1))\n",
    "model.register_forward_pre_hook(*hooks_list)\n",
    "CpuOffload.pre_forward = torch.compiler.disable(CpuOffload.pre_forward)\n",
    "compiled = torch.compile(model, fullgraph=True)\n",
    "@decorator\ndef plain(a, b):\n    return a + b\n",
    "if True:\n    pass\nelse:\n    x = [\n        1,\n    ]\n",
    "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
    "value = '''\nclass InString(ModelHook):\n    def pre_forward(self): module.to('cuda')\n'''\n",
    "class Semi(ModelHook):\n    x = 1; y = 2\n    def pre_forward(self, m): m.to('cuda'); return m\n",
    "class Back(ModelHook):\n    def pre_forward(self, m): \\\n        return m.to('cuda')\n",
    "class Docstr(ModelHook):\n    \"\"\"Doc.\"\"\"\n    def post_forward(self, module, output):\n        \"\"\"Moves.\"\"\"\n        return output.to('cpu')\n",
    "@dataclass\nclass DC(ModelHook):\n    @torch.no_grad()\n    def pre_forward(self, m):\n        m.cuda()\n",
    "class Commented(ModelHook):\n    # leading comment\n\n    # another\n    def pre_forward(self, m):  # trailing\n        m.cpu()\n",
    "class Multi2(ModelHook):\n    @decorator(\n        arg=1,\n    )\n    def pre_forward(self, m):\n        m.cuda()\n",
    "model.register_forward_hook(\n    lambda m, a, out: out.to('cpu'),\n    prepend=True,\n)\n",
    "model.register_forward_pre_hook((lambda m, a: m.cuda()))\n",
    "model.register_forward_hook(lambda m, a, o, f=lambda x: x: o.cpu())\n",
    "hook_fn = offload_hook\nmodel.register_forward_pre_hook(hook_fn)\n",
    "class \u{dc}n\u{ef}(ModelHook):\n    def pre_forward(self, m):\n        m.to('cuda')  # \u{e9}\n",
    "\u{c}\n",
    "import torch.nn as nn\n",
    "import torch.nn\n",
    "if TYPE_CHECKING:\n    import torch\n",
    "class Empty(ModelHook): pass\n",
    // What CPython reads otherwise than tree-sitter: a backslash-only line
    // opening a class body, names spelled with compatibility characters
    // (NFKC), a statement after a multi-line string, a continued line.
    "class Slash(ModelHook):\n    \\\n    def pre_forward(self, m):\n        m.to('cuda')\n",
    "class \u{ff37}ide(ModelHook):\n    def \u{ff50}re_forward(self, m):\n        m.\u{ff54}o('cuda')\n",
    "s = '''\n'''; model.register_forward_hook(lambda m, a, o: o.to('cpu'))\n",
    "x = 1 + \\\n    model.register_forward_hook(lambda m, a, o: o.to('cpu'))\n",
    "(\"doc\"\n \"string\")\n",
];

/// A fragment, or a fragment nested in a block.
fn piece() -> impl Strategy<Value = String> {
    let fragment = proptest::sample::select(FRAGMENTS).prop_map(str::to_owned);
    (fragment, 0..4u8).prop_map(|(text, nest)| match nest {
        0 | 1 => text,
        2 => format!("if cond:\n{}", indent(&text)),
        _ => format!("def factory():\n{}", indent(&text)),
    })
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_owned()
            } else {
                format!("    {l}\n")
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Ending {
    Lf,
    Crlf,
    Mixed,
}

#[derive(Debug, Clone, Copy)]
enum Indent {
    Spaces,
    Tabs,
    TwoSpaces,
}

/// A generated module with its variations applied.
fn python_source() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(piece(), 0..10),
        prop_oneof![Just(Ending::Lf), Just(Ending::Crlf), Just(Ending::Mixed)],
        prop_oneof![
            Just(Indent::Spaces),
            Just(Indent::Tabs),
            Just(Indent::TwoSpaces)
        ],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(pieces, ending, indent, bom, strip_newline)| {
            let mut text = pieces.join("\n");
            text = match indent {
                Indent::Spaces => text,
                Indent::Tabs => text.replace("    ", "\t"),
                Indent::TwoSpaces => text.replace("    ", "  "),
            };
            text = match ending {
                Ending::Lf => text,
                Ending::Crlf => text.replace('\n', "\r\n"),
                Ending::Mixed => text
                    .split_inclusive('\n')
                    .enumerate()
                    .map(|(i, l)| {
                        if i % 3 == 1 {
                            l.replace('\n', "\r\n")
                        } else {
                            l.to_owned()
                        }
                    })
                    .collect(),
            };
            if strip_newline {
                while text.ends_with('\n') || text.ends_with('\r') {
                    text.pop();
                }
            }
            let mut bytes = Vec::new();
            if bom {
                bytes.extend_from_slice(b"\xEF\xBB\xBF");
            }
            bytes.extend_from_slice(text.as_bytes());
            bytes
        })
}

/// A generated module with random bytes written over or spliced into it.
fn corrupted_source() -> impl Strategy<Value = Vec<u8>> {
    (
        python_source(),
        proptest::collection::vec(
            (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
            1..6,
        ),
    )
        .prop_map(|(mut bytes, changes)| {
            for (at, byte, insert) in changes {
                if bytes.is_empty() || insert {
                    let i = at.index(bytes.len() + 1);
                    bytes.insert(i, byte);
                } else {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
            }
            bytes
        })
}

/// An empty directory for the generated files' project: a case is one file
/// alone (left to find its own, a relative name would take the checkout it
/// runs in as its project and read all of it for context, in every case).
fn empty_project() -> PathBuf {
    static EMPTY: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    EMPTY
        .get_or_init(|| tempfile::tempdir().unwrap())
        .path()
        .to_path_buf()
}

fn options(all_hooks: bool) -> Options {
    Options {
        all_hooks,
        project_root: Some(empty_project()),
        ..Options::default()
    }
}

fn analyze(bytes: &[u8], all_hooks: bool) -> Analysis {
    hookfence::analyze_source(
        PathBuf::from("generated.py"),
        bytes.to_vec(),
        &options(all_hooks),
    )
}

/// The seed of every property's cases, unless `PROPTEST_RNG_SEED` says
/// otherwise.
const SEED: u64 = 0x686f_6f6b_6665_6e63;

/// proptest's configuration (`PROPTEST_*` variables honoured) with the
/// fixed seed.
fn config() -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = proptest::test_runner::RngSeed::Fixed(SEED);
    }
    config
}

/// Whether tree-sitter reads the input without error once it decodes.
fn tree_sitter_parses(bytes: &[u8]) -> bool {
    match hookfence::source::Source::decode(bytes.to_vec()) {
        Ok(source) => hookfence::parse::parse(&source.text)
            .is_some_and(|tree| hookfence::parse::first_error(&tree, &source.text).is_none()),
        Err(_) => false,
    }
}

/// Whether the input is something hookfence should rewrite: it decodes,
/// tree-sitter parses it without error, and CPython compiles it.
fn parses(bytes: &[u8]) -> bool {
    tree_sitter_parses(bytes) && cpython_compiles(bytes).is_ok()
}

/// A line hookfence adds: `import torch`, or the decorator under torch's
/// name in the module (`@torch...`, `@th...` for `import torch as th`).
fn is_fence_line(line: &str) -> bool {
    let line = line.trim();
    line == "import torch"
        || line
            .strip_prefix("import torch as ")
            .is_some_and(is_identifier)
        || line
            .strip_prefix('@')
            .and_then(|l| l.strip_suffix(".compiler.disable()"))
            .is_some_and(is_identifier)
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// `<alias>.compiler.disable(lambda` -> `lambda`, counting the wraps.
fn unwrap_lambdas(text: &str) -> (String, usize) {
    let needle = ".compiler.disable(lambda";
    let mut out = String::new();
    let mut rest = text;
    let mut wraps = 0;
    while let Some(at) = rest.find(needle) {
        let head = &rest[..at];
        let alias_start = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map_or(0, |i| {
                i + head[i..].chars().next().map_or(1, char::len_utf8)
            });
        if is_identifier(&head[alias_start..]) {
            out.push_str(&head[..alias_start]);
            out.push_str("lambda");
            wraps += 1;
        } else {
            out.push_str(&rest[..at + needle.len()]);
        }
        rest = &rest[at + needle.len()..];
    }
    out.push_str(rest);
    (out, wraps)
}

/// Every difference between old and new is an insertion of a fence form.
fn only_fence_insertions(old: &str, new: &str) -> Result<(), String> {
    let chars = TextDiff::from_chars(old, new);
    if let Some(change) = chars
        .iter_all_changes()
        .find(|c| c.tag() == ChangeTag::Delete)
    {
        return Err(format!("original text removed: {:?}", change.value()));
    }
    let lines = TextDiff::from_lines(old, new);
    for op in lines.ops() {
        let (removed, added): (Vec<_>, Vec<_>) = lines
            .iter_changes(op)
            .filter(|c| c.tag() != ChangeTag::Equal)
            .partition(|c| c.tag() == ChangeTag::Delete);
        if removed.is_empty() {
            for line in added {
                if !is_fence_line(line.value()) {
                    return Err(format!("unexpected added line {:?}", line.value()));
                }
            }
        } else {
            let before: String = removed.iter().map(|c| c.value()).collect();
            let after: String = added
                .iter()
                .map(|c| c.value())
                .filter(|l| !is_fence_line(l))
                .collect();
            let (unwrapped, wraps) = unwrap_lambdas(&after);
            if wraps == 0 || unwrapped.len() != before.len() + wraps {
                return Err(format!(
                    "changed lines are no lambda wrap: {before:?} -> {after:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The `@<name>.compiler.disable()` lines with no `import torch [as name]`
/// above them. A decorator runs when its `def` does (for a class body, at
/// import time), so `@torch...` above the only `import torch` would raise
/// NameError.
fn unbound_fences(text: &str) -> Vec<String> {
    let mut unbound = Vec::new();
    let mut imported: Vec<String> = Vec::new();
    for line in text.lines() {
        let code = line.trim();
        // `import torch` and `import torch.nn` bind `torch`; `import torch as
        // th` binds `th`; `import torch.nn as nn` binds neither.
        if let Some(rest) = code.strip_prefix("import torch") {
            let (module, alias) = match rest.split_once(" as ") {
                Some((module, alias)) => (module.trim(), Some(alias.trim())),
                None => (rest.trim(), None),
            };
            match alias {
                None if module.is_empty() || module.starts_with('.') => {
                    imported.push("torch".to_owned());
                }
                Some(alias) if module.is_empty() => imported.push(alias.to_owned()),
                _ => {}
            }
        }
        let used = code
            .strip_prefix('@')
            .and_then(|l| l.strip_suffix(".compiler.disable()"));
        if let Some(name) = used
            && !imported.iter().any(|n| n == name)
        {
            unbound.push(code.to_owned());
        }
    }
    unbound
}

/// The full property for a source that parses.
fn check_parseable(bytes: &[u8], all_hooks: bool) -> Result<(), TestCaseError> {
    let analysis = analyze(bytes, all_hooks);
    prop_assert!(
        analysis.errors.is_empty(),
        "a parseable source gave errors: {:?}",
        analysis.errors
    );
    for file in &analysis.files {
        let Some(new_text) = &file.new_text else {
            continue;
        };
        let tree = hookfence::parse::parse(new_text).unwrap();
        prop_assert_eq!(hookfence::parse::first_error(&tree, new_text), None);
        if let Err(why) = only_fence_insertions(&file.source.text, new_text) {
            return Err(TestCaseError::fail(format!(
                "{why}\n--- old ---\n{}\n--- new ---\n{new_text}",
                file.source.text
            )));
        }
        // A source may already misuse a name; the rewrite must add no such use.
        let unbound_before = unbound_fences(&file.source.text);
        let unbound_after = unbound_fences(new_text);
        if unbound_after.len() > unbound_before.len() {
            return Err(TestCaseError::fail(format!(
                "fence above any import binding its name: {unbound_after:?}\n--- new ---\n{new_text}"
            )));
        }
        let written = file.source.encode(new_text);
        prop_assert_eq!(written.starts_with(b"\xEF\xBB\xBF"), file.source.bom);
        let second = analyze(&written, all_hooks);
        prop_assert!(second.errors.is_empty(), "{:?}", second.errors);
        for again in &second.files {
            prop_assert!(
                again.new_text.is_none(),
                "second run plans more:\n{}",
                again.new_text.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// Statements that rebind `torch` (or the alias `th`) at module level, each
/// with the name it takes away from the module. The fence must not use that
/// name in a module holding one of them before the hook.
const MODULE_SHADOWS: &[(&str, &str)] = &[
    ("del torch\n", "torch"),
    ("torch = None\n", "torch"),
    (
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
        "torch",
    ),
    ("for torch in ():\n    pass\n", "torch"),
    ("with open(__file__) as torch:\n    pass\n", "torch"),
    (
        "try:\n    pass\nexcept Exception as torch:\n    pass\n",
        "torch",
    ),
    ("if (torch := 0):\n    pass\n", "torch"),
    ("match 0:\n    case [*torch]:\n        pass\n", "torch"),
    ("def torch():\n    pass\n", "torch"),
    ("class torch:\n    pass\n", "torch"),
    ("from os.path import *\n", "torch"),
    (
        "def reset():\n    global torch\n    torch = None\n",
        "torch",
    ),
    ("th = 3\n", "th"),
    ("th, other = None, 1\n", "th"),
];

/// Statements that mention `torch` without taking it away from the hook.
const MODULE_HARMLESS: &[&str] = &[
    "x = torch\n",
    "torch.x = 1\n",
    "def g(torch):\n    return torch\n",
    "class K:\n    torch = None\n",
    "ys = [torch for torch in ()]\n",
    "match 0:\n    case torch.float16:\n        pass\n",
];

/// Where the hook stands, with a binding of `torch` local to the scope its
/// decorator is evaluated in (or none).
#[derive(Debug, Clone, Copy)]
enum HookPlace {
    /// A protocol method; the class body may bind `torch` itself.
    Method { class_binds: bool },
    /// A closure registered by the function that defines it, with one of
    /// [`FUNCTION_LOCALS`] (or none).
    Closure { local: Option<usize> },
}

const FUNCTION_LOCALS: &[&str] = &[
    "    torch = 1\n",
    "    for torch in ():\n        pass\n",
    "    import torch.nn as torch\n",
    "    try:\n        pass\n    except Exception as torch:\n        pass\n",
];

/// A module whose torch names may be shadowed before (or where) the hook's
/// fence is evaluated, and the names the fence must not use.
fn shadowed_source() -> impl Strategy<Value = (String, Vec<&'static str>)> {
    (
        prop_oneof![Just("import torch\n"), Just("import torch as th\n"), Just("")],
        proptest::collection::vec(
            prop_oneof![
                proptest::sample::select(MODULE_SHADOWS).prop_map(|(s, n)| (s, Some(n))),
                proptest::sample::select(MODULE_HARMLESS).prop_map(|s| (s, None)),
            ],
            0..4,
        ),
        prop_oneof![
            any::<bool>().prop_map(|class_binds| HookPlace::Method { class_binds }),
            proptest::option::of(0..FUNCTION_LOCALS.len())
                .prop_map(|local| HookPlace::Closure { local }),
        ],
        any::<bool>(),
    )
        .prop_map(|(header, statements, place, parameter)| {
            let mut text = String::from("from accelerate.hooks import ModelHook\n");
            text.push_str(header);
            let mut taken: Vec<&'static str> = Vec::new();
            for (statement, shadows) in statements {
                text.push_str(statement);
                taken.extend(shadows);
            }
            match place {
                HookPlace::Method { class_binds } => {
                    text.push_str("class H(ModelHook):\n");
                    if class_binds {
                        text.push_str("    torch = None\n");
                        taken.push("torch");
                    }
                    text.push_str(
                        "    def pre_forward(self, module, *args):\n        module.to('cuda')\n        return args\n",
                    );
                }
                HookPlace::Closure { local } => {
                    if parameter {
                        text.push_str("def attach(model, torch=None):\n");
                        taken.push("torch");
                    } else {
                        text.push_str("def attach(model):\n");
                    }
                    if let Some(local) = local {
                        text.push_str(FUNCTION_LOCALS[local]);
                        taken.push("torch");
                    }
                    text.push_str(
                        "    def hook(module, args):\n        module.to('cuda')\n        return args\n    model.register_forward_pre_hook(hook)\n",
                    );
                }
            }
            (text, taken)
        })
}

/// The name in `@<name>.compiler.disable()`, on each fence line of `text`.
fn fence_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix('@')?
                .strip_suffix(".compiler.disable()")
                .map(str::to_owned)
        })
        .collect()
}

/// The kinds of block a conditional definition can stand in, each with the
/// number of arms it has (every arm defines `fn`).
#[derive(Debug, Clone, Copy)]
enum Construct {
    IfElse(usize),
    TryExcept,
    Match(usize),
    /// A def after the register call inside a loop: bound there from the
    /// second turn on.
    LoopAfterCall,
    With,
}

/// One `def fn` per arm, each tagged `# arm N` on its `def` line.
fn arm(n: usize, indent: &str) -> String {
    format!(
        "{indent}def fn(module, args):  # arm {n}\n{indent}    module.to('cuda:{n}')\n{indent}    return args\n"
    )
}

fn construct_text(construct: Construct, indent: &str, first_arm: usize) -> (String, usize, bool) {
    let inner = format!("{indent}    ");
    let mut text = String::new();
    let mut arms = 0;
    let mut registers = false;
    match construct {
        Construct::IfElse(n) => {
            for i in 0..n {
                let head = match i {
                    0 => format!("if flag == {i}:"),
                    _ if i == n - 1 => "else:".to_owned(),
                    _ => format!("elif flag == {i}:"),
                };
                text.push_str(&format!("{indent}{head}\n{}", arm(first_arm + i, &inner)));
                arms += 1;
            }
        }
        Construct::TryExcept => {
            text.push_str(&format!("{indent}try:\n{}", arm(first_arm, &inner)));
            text.push_str(&format!(
                "{indent}except Exception:\n{}",
                arm(first_arm + 1, &inner)
            ));
            arms = 2;
        }
        Construct::Match(n) => {
            text.push_str(&format!("{indent}match flag:\n"));
            for i in 0..n {
                let pattern = if i == n - 1 {
                    "_".to_owned()
                } else {
                    i.to_string()
                };
                text.push_str(&format!(
                    "{inner}case {pattern}:\n{}",
                    arm(first_arm + i, &format!("{inner}    "))
                ));
                arms += 1;
            }
        }
        Construct::LoopAfterCall => {
            text.push_str(&format!(
                "{indent}for m in models:\n{inner}m.register_forward_pre_hook(fn)\n{}",
                arm(first_arm, &inner)
            ));
            arms = 1;
            registers = true;
        }
        Construct::With => {
            text.push_str(&format!("{indent}with ctx:\n{}", arm(first_arm, &inner)));
            arms = 1;
        }
    }
    (text, arms, registers)
}

/// A module (or a function) defining `fn` conditionally and registering it,
/// with the arms that must be fenced and the arm that must not (a def
/// replaced by another before anything could register it).
fn conditional_source() -> impl Strategy<Value = (String, Vec<usize>, Option<usize>)> {
    (
        prop_oneof![
            (2..5usize).prop_map(Construct::IfElse),
            Just(Construct::TryExcept),
            (2..4usize).prop_map(Construct::Match),
            Just(Construct::LoopAfterCall),
            Just(Construct::With),
        ],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(construct, in_function, dead_before, live_before)| {
            let indent = if in_function { "    " } else { "" };
            let mut text = String::from("import torch\n");
            if in_function {
                text.push_str("def install(model, models, flag, ctx):\n");
            }
            // Arms 0 and 1: a def replaced by another def right away (the
            // first is dead), then the construct's arms from 2 on.
            let mut expected = Vec::new();
            let mut dead = None;
            if dead_before {
                text.push_str(&arm(0, indent));
                if live_before {
                    dead = Some(0);
                } else {
                    expected.push(0);
                }
            }
            if live_before {
                text.push_str(&arm(1, indent));
            }
            let (body, arms, registers) = construct_text(construct, indent, 2);
            text.push_str(&body);
            expected.extend(2..2 + arms);
            if !registers {
                text.push_str(&format!("{indent}model.register_forward_pre_hook(fn)\n"));
            }
            (text, expected, dead)
        })
}

/// The arms (`# arm N`) of `text` whose `def` line has a fence right above.
fn fenced_arms(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let n = line.split_once("# arm ")?.1.trim().parse().ok()?;
            let above = lines.get(i.checked_sub(1)?)?.trim();
            above.ends_with(".compiler.disable()").then_some(n)
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        analyze(&bytes, false);
        analyze(&bytes, true);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        analyze(text.as_bytes(), true);
    }

    #[test]
    fn corrupted_sources_never_panic_and_fence_cleanly_when_they_parse(bytes in corrupted_source()) {
        let analysis = analyze(&bytes, true);
        if !tree_sitter_parses(&bytes) {
            // What does not decode or parse is reported and planned nothing.
            prop_assert_eq!(analysis.errors.len(), 1);
            prop_assert!(analysis.files.iter().all(|f| f.new_text.is_none()));
        } else if cpython_compiles(&bytes).is_ok() {
            check_parseable(&bytes, true)?;
        } else {
            // CPython rejects what tree-sitter reads: hookfence may not see
            // why, but where it refuses, the error is the input's own.
            for err in &analysis.errors {
                prop_assert!(
                    !matches!(err, hookfence::error::FileError::RewriteInvalid { .. })
                        || !err.to_string().contains("syntax error near"),
                    "the input's syntax error blamed on the rewrite: {err}"
                );
            }
        }
    }

    #[test]
    fn generated_sources_fence_cleanly_and_converge(bytes in python_source(), all_hooks in any::<bool>()) {
        // Every fragment parses alone; joined and varied, nearly all do.
        prop_assume!(parses(&bytes));
        check_parseable(&bytes, all_hooks)?;
    }

    #[test]
    fn edit_apply_matches_a_model(
        text in "[a-z\\n é]{0,60}",
        raw in proptest::collection::vec(
            proptest::collection::vec((any::<prop::sample::Index>(), 0..3usize, "[A-Z]{0,3}"), 1..3),
            0..6,
        ),
    ) {
        // Edits on char boundaries of `text`, grouped into fixes.
        let bounds: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
        let fixes: Vec<Fix> = raw
            .into_iter()
            .map(|edits| Fix {
                edits: edits
                    .into_iter()
                    .map(|(at, len, replacement)| {
                        let i = at.index(bounds.len());
                        let j = (i + len).min(bounds.len() - 1);
                        Edit { start: bounds[i], end: bounds[j], replacement }
                    })
                    .collect(),
            })
            .collect();
        let applied = hookfence::edit::apply(&text, &fixes);

        // Model: accept fixes in order unless an edit overlaps an accepted
        // one; identical edits count once.
        let overlaps = |a: &Edit, b: &Edit| a.start < b.end && b.start < a.end;
        let mut accepted: Vec<Edit> = Vec::new();
        let mut skipped = Vec::new();
        for (index, fix) in fixes.iter().enumerate() {
            let fresh: Vec<&Edit> = fix.edits.iter().filter(|e| !accepted.contains(e)).collect();
            let conflict = fresh.iter().enumerate().any(|(i, e)| {
                accepted.iter().any(|a| overlaps(a, e)) || fresh[..i].iter().any(|f| overlaps(f, e))
            });
            if conflict {
                skipped.push(index);
                continue;
            }
            accepted.extend(fresh.into_iter().cloned());
        }
        prop_assert_eq!(&applied.skipped, &skipped);
        let removed: usize = accepted.iter().map(|e| e.end - e.start).sum();
        let added: usize = accepted.iter().map(|e| e.replacement.len()).sum();
        prop_assert_eq!(applied.text.len(), text.len() - removed + added);
        // Without replacements, the original survives in order.
        if accepted.iter().all(|e| e.start == e.end) {
            let mut rest = applied.text.chars();
            prop_assert!(text.chars().all(|c| rest.any(|d| d == c)));
        }
    }

    #[test]
    fn shadowed_torch_names_are_never_used_by_a_fence((text, taken) in shadowed_source()) {
        let analysis = analyze(text.as_bytes(), false);
        prop_assert!(analysis.errors.is_empty(), "{:?}", analysis.errors);
        let new_text = analysis.files.iter().find_map(|f| f.new_text.clone());
        let Some(new_text) = new_text else {
            return Err(TestCaseError::fail(format!("the hook was not fenced:\n{text}")));
        };
        let names = fence_names(&new_text);
        prop_assert_eq!(names.len(), 1, "{}", new_text);
        let name = names[0].as_str();
        prop_assert!(!taken.contains(&name), "fence uses shadowed `{}`:\n{}", name, new_text);
        // The name is bound to torch: by the file's own import of it, or by
        // the one hookfence adds (a fresh name is named nowhere in the input).
        let own = (name == "torch" && text.contains("import torch\n"))
            || (name == "th" && text.contains("import torch as th\n"));
        let added = if name == "torch" {
            "import torch\n".to_owned()
        } else {
            format!("import torch as {name}\n")
        };
        let added_it = new_text.matches(added.as_str()).count() > text.matches(added.as_str()).count();
        prop_assert!(own || added_it, "`{}` is not bound to torch:\n{}", name, new_text);
        if added_it && name != "torch" {
            prop_assert!(!text.contains(name), "fresh `{}` is named in the input", name);
        }
        // Precision: an untouched `import torch` is used as it is.
        if taken.is_empty() && text.contains("import torch\n") {
            prop_assert_eq!(name, "torch");
            prop_assert!(!added_it, "an import was added:\n{}", new_text);
        }
        only_fence_insertions(&text, &new_text).map_err(TestCaseError::fail)?;
        let second = analyze(new_text.as_bytes(), false);
        prop_assert!(second.files.iter().all(|f| f.new_text.is_none()), "second run plans more");
    }

    #[test]
    fn every_conditional_definition_of_a_registered_hook_is_fenced(
        (text, expected, dead) in conditional_source()
    ) {
        let analysis = analyze(text.as_bytes(), false);
        prop_assert!(analysis.errors.is_empty(), "{:?}", analysis.errors);
        let new_text = analysis
            .files
            .iter()
            .find_map(|f| f.new_text.clone())
            .unwrap_or_default();
        let fenced = fenced_arms(&new_text);
        for arm in &expected {
            prop_assert!(fenced.contains(arm), "arm {} not fenced:\n{}", arm, new_text);
        }
        if let Some(dead) = dead {
            prop_assert!(!fenced.contains(&dead), "dead def {} fenced:\n{}", dead, new_text);
        }
        only_fence_insertions(&text, &new_text).map_err(TestCaseError::fail)?;
    }

}

/// A file name with the bytes git quotes in diff headers: tab, newline, `"`,
/// backslash, space, DEL, other control characters, UTF-8 and bytes that are
/// no UTF-8 at all.
#[cfg(unix)]
fn odd_file_name() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\t".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\x7f".to_vec()),
        Just(b"\x01".to_vec()),
        Just(b"\r".to_vec()),
        Just("\u{e9}".as_bytes().to_vec()),
        Just(b"\xff".to_vec()),
        Just(b"\xc3".to_vec()),
        "[a-z_]{1,3}".prop_map(String::into_bytes),
    ];
    proptest::collection::vec(piece, 1..5).prop_map(|pieces| {
        let mut name = pieces.concat();
        name.extend_from_slice(b".py");
        name
    })
}

/// A generated module with lone CRs put inside lines: in comments, in
/// strings, and between tokens.
fn source_with_lone_crs() -> impl Strategy<Value = Vec<u8>> {
    (
        python_source(),
        proptest::collection::vec(any::<prop::sample::Index>(), 1..4),
    )
        .prop_map(|(bytes, spots)| {
            let mut bytes = bytes;
            // Only after a byte that is neither a line break nor a CR, so
            // each CR stands alone inside a line.
            let inside: Vec<usize> = (1..bytes.len())
                .filter(|&i| !matches!(bytes[i - 1], b'\n' | b'\r') && bytes[i] != b'\n')
                .collect();
            let mut at: Vec<usize> = spots
                .iter()
                .filter(|_| !inside.is_empty())
                .map(|s| inside[s.index(inside.len())])
                .collect();
            at.sort_unstable();
            at.dedup();
            for i in at.into_iter().rev() {
                bytes.insert(i, b'\r');
            }
            bytes
        })
}

/// Runs git in `dir`; its output, or why it failed.
#[cfg(unix)]
fn git(dir: &std::path::Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The diff hookfence prints for `bytes` in a file named `name` goes
/// through the real `git apply`, which must give the rewritten file; whether
/// there was a diff. A source that does not parse gets none.
#[cfg(unix)]
fn git_applies(name: &[u8], bytes: &[u8]) -> Result<bool, TestCaseError> {
    use std::os::unix::ffi::OsStrExt;
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(name));
    let analysis = hookfence::analyze_source(path.clone(), bytes.to_vec(), &options(true));
    let Some(file) = analysis.files.iter().find(|f| f.new_text.is_some()) else {
        return Ok(false);
    };
    // Lone CRs are line breaks to CPython, blanks to tree-sitter: what this
    // property checks is the diff's transport, so tree-sitter's reading is
    // the premise here.
    prop_assert!(
        tree_sitter_parses(bytes),
        "a source that does not parse was rewritten"
    );
    let expected = file
        .source
        .encode(file.new_text.as_deref().unwrap_or_default());
    let mut diff = Vec::new();
    hookfence::render::write_diffs(&mut diff, &analysis, &hookfence::render::Style::new(false))
        .unwrap();
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join(&path), bytes).unwrap();
    std::fs::write(repo.path().join("hookfence.diff"), &diff).unwrap();
    let shown = String::from_utf8_lossy(&diff).into_owned();
    git(repo.path(), &["init", "-q"]).map_err(TestCaseError::fail)?;
    git(repo.path(), &["apply", "hookfence.diff"])
        .map_err(|e| TestCaseError::fail(format!("git apply refused: {e}\n{shown:?}")))?;
    let applied = std::fs::read(repo.path().join(&path)).unwrap();
    prop_assert!(
        applied == expected,
        "git apply gave another file:\n{shown:?}"
    );
    Ok(true)
}

/// Whether CPython compiles `bytes`, or its complaint.
fn cpython_compiles(bytes: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys; compile(sys.stdin.buffer.read(), 'generated.py', 'exec', dont_inherit=True)",
        ])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed for the CPython oracle");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Runs `test` on `cases` values of `strategy`, whatever `PROPTEST_CASES`
/// says (each case here runs a process: git or CPython).
#[cfg(unix)]
fn run_cases<S: Strategy>(
    cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..config()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    if let Err(failure) = runner.run(&strategy, test) {
        panic!("{failure}");
    }
}

/// Cases of the process-running properties.
#[cfg(unix)]
const PROCESS_CASES: u32 = 48;

#[cfg(unix)]
#[test]
fn output_compiles_with_cpython_where_the_input_did() {
    run_cases(
        PROCESS_CASES,
        (python_source(), any::<bool>()),
        |(bytes, all_hooks)| {
            prop_assume!(parses(&bytes));
            let analysis = analyze(&bytes, all_hooks);
            for file in &analysis.files {
                if let Some(new_text) = &file.new_text {
                    let written = file.source.encode(new_text);
                    if let Err(why) = cpython_compiles(&written) {
                        return Err(TestCaseError::fail(format!(
                            "{why}\n--- new ---\n{new_text}"
                        )));
                    }
                }
            }
            Ok(())
        },
    );
}

#[cfg(unix)]
#[test]
fn diffs_of_odd_file_names_and_lone_crs_go_through_git_apply() {
    // A lone CR can leave a source tree-sitter does not parse; such a case
    // still runs (nothing may be rewritten), rather than being rejected
    // until proptest gives up, and enough cases must get a diff.
    let applied = std::sync::atomic::AtomicUsize::new(0);
    run_cases(
        PROCESS_CASES,
        (odd_file_name(), source_with_lone_crs()),
        |(name, bytes)| {
            if git_applies(&name, &bytes)? {
                applied.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(())
        },
    );
    let applied = applied.into_inner();
    assert!(
        applied >= PROCESS_CASES as usize / 8,
        "only {applied} of {PROCESS_CASES} cases had a diff to apply"
    );
}

#[cfg(unix)]
#[test]
fn git_quotes_names_in_headers_as_hookfence_does() {
    // git's own `diff` of a committed file, against hookfence's header.
    use std::os::unix::ffi::OsStrExt;
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]).unwrap();
    let names: &[&[u8]] = &[
        b"a\tb.py",
        b"new\nline.py",
        b"q\"uote.py",
        b"back\\slash.py",
        b"sp ace.py",
        b"del\x7f.py",
        b"bell\x07\x08\x0b\x0c\r.py",
        "caf\u{e9}.py".as_bytes(),
        b"latin\xe9.py",
        b"plain_name.py",
    ];
    for name in names {
        let path = repo.path().join(std::ffi::OsStr::from_bytes(name));
        std::fs::write(&path, "x = 1\n").unwrap();
        git(
            repo.path(),
            &["add", "--", std::str::from_utf8(b".").unwrap()],
        )
        .unwrap();
        git(
            repo.path(),
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "x",
            ],
        )
        .unwrap();
        std::fs::write(&path, "x = 2\n").unwrap();
        let diff = git(repo.path(), &["-c", "core.quotePath=true", "diff"]).unwrap();
        let minus = diff
            .split(|&b| b == b'\n')
            .find(|l| l.starts_with(b"--- "))
            .unwrap()
            .to_vec();
        let mut ours = b"--- ".to_vec();
        ours.extend(hookfence::render::git_header_name("a/", name));
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&minus),
            "{name:?}"
        );
        git(repo.path(), &["checkout", "-q", "--", "."]).unwrap();
    }
}
