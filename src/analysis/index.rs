//! The project index: what each parsed module defines (functions, classes,
//! imports, the calls each function makes, the offload signs in its own
//! body, whether its authors fenced it), built once per file while its tree
//! is at hand, and then asked across modules: which project function does
//! this call reach, and does any function reachable from a hook do offload
//! work?
//!
//! Modules the run did not parse (the prefilter skipped them, or they lie
//! outside the given paths) are read, parsed and indexed on demand when a
//! call resolves into them through an import, so a hook's evidence does not
//! depend on which files were named.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tree_sitter::Node;

use crate::analysis::evidence::{self, Sign};
use crate::analysis::scope::SemanticModel;
use crate::analysis::vocabulary::{FORWARD, Vocabulary};
use crate::found::{Discovered, Found, identity};
use crate::queries::QUERIES;
use crate::syntax::{Enclosing, Qualnames, capture, dotted_name, text_of};

/// Builtin constructors of containers: what they return holds no hook.
const BUILTIN_CONTAINERS: &[&str] = &[
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
const GENERIC_METHODS: &[&str] = &[
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

/// How deep calls are followed from a hook.
pub const MOST_CALL_DEPTH: usize = 6;
/// A method called on a receiver of unknown type is looked up by name among
/// the indexed classes only when at most this many define it.
pub const MOST_UNTYPED_TARGETS: usize = 3;

/// A call a function makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callee {
    /// `f(...)`
    Name(String),
    /// `receiver.method(...)`; the receiver as written, or `None` when it is
    /// no plain dotted name (a call, a subscript).
    Method {
        receiver: Option<String>,
        method: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallFact {
    pub callee: Callee,
    pub line: usize,
    /// Start byte, for the order of calls in a body.
    pub start: usize,
    /// The first positional argument as written (`module`, `*args`).
    pub first_argument: Option<String>,
    /// The callee's name (a receiver's first part) is bound here by
    /// something other than an import — a parameter, an assignment, a loop,
    /// `with`/`except` target, walrus, comprehension variable or `match`
    /// capture, asked of the file's scope model — so it is not the imported
    /// function of that name, whatever the module imports.
    pub not_the_import: bool,
}

/// A value installed as a module's forward, or returned by a factory, as far
/// as the index follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A bare name.
    Name(String),
    /// `self.m`, `Cls.m`, `obj.m`.
    Attribute(String),
    /// A lambda (its index in [`ModuleFacts::functions`]).
    Function(usize),
    /// The value a call returns (`make_wrapper(m)`).
    Returned(String),
    /// Anything else, as written.
    Other(String),
}

/// `m.forward = value` (or `setattr(m, "forward", value)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardReplacement {
    pub line: usize,
    /// The module whose forward is replaced, as written (`module`, `m.__class__`).
    pub target: String,
    pub value: Value,
    /// The function the assignment stands in, if any.
    pub scope: Option<usize>,
}

/// One `def` or `lambda` of a module.
#[derive(Debug, Clone)]
pub struct FunctionFact {
    /// Python's `__qualname__`.
    pub qualname: String,
    pub name: String,
    /// 1-based line and column of the `def` / `lambda`.
    pub line: usize,
    pub column: usize,
    /// The class whose `self` its body sees: the class it is defined in, or
    /// for a closure, the class of the method around it.
    pub self_class: Option<String>,
    /// Whether it is defined directly in that class's body (a method).
    pub is_method: bool,
    /// The start byte of the function it is nested in, if any.
    pub outer: Option<usize>,
    pub start: usize,
    /// How its authors fenced it, if they did (`@compiler.disable`).
    pub fenced: Option<String>,
    pub signs: Vec<Sign>,
    pub calls: Vec<CallFact>,
    /// Local names whose class an assignment tells (`h = Handle(...)`).
    pub locals: HashMap<String, String>,
    pub parameters: Vec<String>,
    /// What its `return` statements hand back.
    pub returns: Vec<Value>,
    /// Names it binds to an original forward (`old = m.forward`).
    pub saved_forwards: Vec<String>,
    /// `name = value` in its body, in the order of the text.
    pub assigned: Vec<(String, Value)>,
}

/// A call that registers a hook with torch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Where the call starts (as the matcher reports an unresolved one).
    pub line: usize,
    pub column: usize,
    pub value: Value,
    /// The function the call stands in, if any.
    pub scope: Option<usize>,
}

/// One class of a module.
#[derive(Debug, Clone, Default)]
pub struct ClassFacts {
    pub name: String,
    pub bases: Vec<String>,
    /// `self.x = Cls(...)` anywhere in the class: `x -> Cls`.
    pub attributes: HashMap<String, String>,
    /// Its methods, as indices into [`ModuleFacts::functions`].
    pub methods: Vec<usize>,
    /// `self.x = value` in its methods: `(x, value, method)`.
    pub attribute_values: Vec<(String, Value, usize)>,
}

/// What the index knows of one module.
#[derive(Debug, Clone, Default)]
pub struct ModuleFacts {
    pub path: PathBuf,
    /// Dotted module name, when the file sits in a package (or at a root).
    pub module: String,
    pub functions: Vec<FunctionFact>,
    pub classes: HashMap<String, ClassFacts>,
    /// Bound name -> absolute dotted path (relative imports resolved).
    pub imports: HashMap<String, String>,
    pub forward_replacements: Vec<ForwardReplacement>,
    pub registrations: Vec<Registration>,
    /// `name = value` at module level.
    pub assigned: Vec<(String, Value)>,
    /// [`ModuleFacts::functions`] by name, in order: a call's callee is a
    /// look-up, not a scan of every function.
    by_name: HashMap<String, Vec<usize>>,
}

impl ModuleFacts {
    /// Indexes one parsed module.
    /// `given_model`: the file's scope model where the matcher built one
    /// (else it is built here when a call's name could be an import).
    pub fn build(
        path: &Path,
        root: Node<'_>,
        text: &str,
        vocabulary: &Vocabulary,
        given_model: Option<&SemanticModel>,
    ) -> ModuleFacts {
        let module = module_name(path);
        let package = package_of(path, &module);
        let mut facts = ModuleFacts {
            path: path.to_path_buf(),
            module,
            ..ModuleFacts::default()
        };

        // Imports, through the same reading the matcher uses.
        let mut import_matches = Vec::new();
        // Every import statement holds the word `import`: only there.
        let import_ranges = crate::analysis::prefilter::word_ranges(text, &["import"], &[]);
        crate::syntax::each_match_in(
            &QUERIES.resolve.query,
            root,
            text,
            &import_ranges,
            |pattern, captures| {
                if QUERIES.resolve.part(pattern) == 0 {
                    import_matches.push(captures.to_vec());
                }
            },
        );
        let bindings = crate::analysis::matcher::Bindings::collect(&import_matches, text);
        for (name, path) in &bindings.any_scope {
            facts.imports.insert(name.clone(), absolute(path, &package));
        }

        let q = &QUERIES.index;
        let mut by_start: HashMap<usize, usize> = HashMap::new();
        let mut classes_by_start: HashMap<usize, String> = HashMap::new();
        let mut calls = Vec::new();
        let mut locals = Vec::new();
        let mut attributes = Vec::new();
        let mut replacements = Vec::new();
        let mut saved = Vec::new();
        let mut returned = Vec::new();
        let mut assigned = Vec::new();
        let mut self_attributes = Vec::new();
        let mut defs: Vec<(Node<'_>, String)> = Vec::new();
        let mut class_nodes: Vec<Node<'_>> = Vec::new();
        crate::syntax::each_match(&q.combined.query, root, text, |_, captures| {
            if let Some(def) = capture(captures, q.def).or_else(|| capture(captures, q.lambda)) {
                let name = capture(captures, q.def_name)
                    .map_or("<lambda>".to_owned(), |n| text_of(n, text).to_owned());
                defs.push((def, name));
            } else if let (Some(class), Some(name)) =
                (capture(captures, q.class), capture(captures, q.class_name))
            {
                let name = text_of(name, text).to_owned();
                classes_by_start.insert(class.start_byte(), name.clone());
                class_nodes.push(class);
                facts.classes.entry(name.clone()).or_insert(ClassFacts {
                    name,
                    bases: crate::analysis::matcher::class_bases(class, text),
                    ..ClassFacts::default()
                });
            } else if let (Some(fwd), Some(target), Some(value)) = (
                capture(captures, q.fwd),
                capture(captures, q.fwd_target),
                capture(captures, q.fwd_value),
            ) {
                replacements.push((fwd, target, value));
            } else if let Some(name) = capture(captures, q.saved) {
                saved.push(name);
            } else if let Some(value) = capture(captures, q.returned) {
                returned.push(value);
            } else if let (Some(name), Some(value)) = (
                capture(captures, q.assigned),
                capture(captures, q.assigned_value),
            ) {
                assigned.push((name, value));
            } else if let (Some(name), Some(value)) = (
                capture(captures, q.self_attr),
                capture(captures, q.self_attr_value),
            ) {
                self_attributes.push((name, value));
            } else if let Some(call) = capture(captures, q.call) {
                let callee = match (
                    capture(captures, q.call_name),
                    capture(captures, q.call_method),
                ) {
                    (Some(name), _) => Callee::Name(text_of(name, text).to_owned()),
                    (None, Some(method)) => Callee::Method {
                        receiver: capture(captures, q.call_receiver)
                            .and_then(|r| dotted_name(r, text)),
                        method: text_of(method, text).to_owned(),
                    },
                    _ => return,
                };
                calls.push((call, callee));
            } else if let (Some(local), Some(class)) =
                (capture(captures, q.local), capture(captures, q.local_class))
            {
                locals.push((
                    local,
                    text_of(local, text).to_owned(),
                    dotted_name(class, text),
                ));
            } else if let (Some(attr), Some(class)) =
                (capture(captures, q.attr), capture(captures, q.attr_class))
            {
                attributes.push((
                    attr,
                    text_of(attr, text).to_owned(),
                    dotted_name(class, text),
                ));
            }
        });

        // Every def and lambda, and every class, is captured above: the
        // innermost one around a node is found from their spans.
        let functions = Enclosing::new(defs.iter().map(|(def, _)| *def).collect());
        let qualnames = Qualnames::new(
            defs.iter()
                .map(|(def, _)| *def)
                .filter(|d| d.kind() != "lambda")
                .chain(class_nodes.iter().copied())
                .collect(),
            text,
        );
        let classes = Enclosing::new(class_nodes);
        let class_of = |node: Node<'_>| classes.around(node);
        for (def, name) in defs {
            by_start.insert(def.start_byte(), facts.functions.len());
            let mut fact =
                function_fact(def, name, text, &bindings, vocabulary, &functions, &classes);
            fact.qualname = qualnames.of(def);
            facts.functions.push(fact);
        }
        let owner_of = |node: Node<'_>| {
            functions
                .around(node)
                .and_then(|f| by_start.get(&f.start_byte()).copied())
        };
        // Whether a call's name is the import of that name is asked of the
        // scope model: the matcher's, else one built here, only if a call
        // names an import at all.
        let names_an_import = calls.iter().any(|(_, callee)| {
            import_named_by(callee).is_some_and(|name| facts.imports.contains_key(name))
        });
        let built;
        let model = match given_model {
            _ if !names_an_import => None,
            Some(given) if !given.scopes().is_empty() => Some(given),
            _ => {
                built = SemanticModel::build(root, text);
                Some(&built)
            }
        };
        for (call, callee) in calls {
            let Some(owner) = owner_of(call) else {
                continue;
            };
            let first_argument = call
                .child_by_field_name("arguments")
                .and_then(|a| a.named_child(0))
                .filter(|a| a.kind() != "keyword_argument")
                .map(|a| text_of(a, text).to_owned());
            let not_the_import = import_named_by(&callee)
                .filter(|name| facts.imports.contains_key(*name))
                .is_some_and(|name| {
                    model.is_some_and(|m| !m.may_be_import(name, call.start_byte()))
                });
            facts.functions[owner].calls.push(CallFact {
                callee,
                line: call.start_position().row + 1,
                start: call.start_byte(),
                first_argument,
                not_the_import,
            });
        }
        for function in &mut facts.functions {
            function.calls.sort_by_key(|c| c.start);
        }
        for (fwd, target, value) in replacements {
            facts.forward_replacements.push(ForwardReplacement {
                line: fwd.start_position().row + 1,
                target: text_of(target, text).to_owned(),
                value: value_of(value, text, &by_start),
                scope: owner_of(fwd),
            });
        }
        for name in saved {
            if let Some(owner) = owner_of(name) {
                facts.functions[owner]
                    .saved_forwards
                    .push(text_of(name, text).to_owned());
            }
        }
        for value in returned {
            if let Some(owner) = owner_of(value) {
                let value = value_of(value, text, &by_start);
                facts.functions[owner].returns.push(value);
            }
        }
        assigned.sort_by_key(|(name, _)| name.start_byte());
        for (name, value) in assigned {
            let entry = (
                text_of(name, text).to_owned(),
                value_of(value, text, &by_start),
            );
            match owner_of(name) {
                Some(owner) => facts.functions[owner].assigned.push(entry),
                None if class_of(name).is_none() => facts.assigned.push(entry),
                None => {}
            }
        }
        for (name, value) in self_attributes {
            let (Some(owner), Some(class)) = (
                owner_of(name),
                class_of(name).and_then(|c| classes_by_start.get(&c.start_byte())),
            ) else {
                continue;
            };
            let value = value_of(value, text, &by_start);
            if let Some(class) = facts.classes.get_mut(class) {
                class
                    .attribute_values
                    .push((text_of(name, text).to_owned(), value, owner));
            }
        }

        // Registrations with torch, with the hook each is handed.
        let compiled = vocabulary.compiled();
        // A register call holds its registrar's name: only around the
        // scan query's anchors.
        let scan_ranges = vocabulary.anchor_ranges(text);
        crate::syntax::each_match_in(
            &compiled.scan.query,
            root,
            text,
            &scan_ranges,
            |pattern, captures| {
                if compiled.scan.part(pattern) != 3 {
                    return;
                }
                let (Some(call), Some(arguments)) = (
                    capture(captures, compiled.registrations.call),
                    capture(captures, compiled.registrations.arguments),
                ) else {
                    return;
                };
                // Backward hooks are listed, never fenced (see
                // `resolve::BACKWARD_NOT_FENCED`): one the matcher cannot follow
                // stays unresolved rather than becoming a forward hook here.
                if capture(captures, compiled.registrations.backward).is_some() {
                    return;
                }
                let method = call
                    .child_by_field_name("function")
                    .map(|f| match f.child_by_field_name("attribute") {
                        Some(attribute) => text_of(attribute, text),
                        None => text_of(f, text),
                    })
                    .unwrap_or_default();
                let position = vocabulary
                    .registrar_positions
                    .get(method)
                    .copied()
                    .unwrap_or(0);
                let Some(hook) = crate::analysis::matcher::hook_argument(arguments, text, position)
                else {
                    return;
                };
                let (line, column) = line_column(call, text);
                facts.registrations.push(Registration {
                    line,
                    column,
                    value: value_of(hook, text, &by_start),
                    scope: owner_of(call),
                });
            },
        );
        for (node, name, class) in locals {
            if let (Some(class), Some(owner)) = (class, owner_of(node)) {
                facts.functions[owner].locals.insert(name, class);
            }
        }
        for (node, name, class) in attributes {
            let owner = class_of(node).and_then(|c| classes_by_start.get(&c.start_byte()));
            if let (Some(class), Some(owner)) = (class, owner)
                && let Some(facts) = facts.classes.get_mut(owner)
            {
                facts.attributes.entry(name).or_insert(class);
            }
        }

        // Signs, each given to the innermost function around it.
        for (owner, sign) in evidence::signs_in_file_with(root, text, &functions) {
            if let Some(index) = owner.and_then(|o| by_start.get(&o)) {
                facts.functions[*index].signs.push(sign);
            }
        }

        // Methods, and the function each closure is nested in.
        for (index, function) in facts.functions.iter().enumerate() {
            if function.is_method
                && let Some(class) = function
                    .self_class
                    .as_ref()
                    .and_then(|c| facts.classes.get_mut(c))
            {
                class.methods.push(index);
            }
            facts
                .by_name
                .entry(function.name.clone())
                .or_default()
                .push(index);
        }
        facts
    }

    fn function_at(&self, line: usize, column: usize) -> Option<usize> {
        self.functions
            .iter()
            .position(|f| f.line == line && f.column == column)
    }

    /// Module-level functions (and closures of `outer`) named `name`.
    fn functions_named(&self, name: &str, outer: Option<usize>) -> Vec<usize> {
        let all: Vec<usize>;
        let named: &[usize] = match self.by_name.get(name) {
            Some(named) => named,
            None if self.by_name.is_empty() => {
                all = (0..self.functions.len())
                    .filter(|&i| self.functions[i].name == name)
                    .collect();
                &all
            }
            None => &[],
        };
        let mut found: Vec<usize> = Vec::new();
        if let Some(outer) = outer {
            found.extend(
                named
                    .iter()
                    .copied()
                    .filter(|&i| self.functions[i].outer == Some(outer)),
            );
        }
        if found.is_empty() {
            found.extend(named.iter().copied().filter(|&i| {
                let f = &self.functions[i];
                f.outer.is_none() && !f.is_method
            }));
        }
        found
    }
}

fn function_fact(
    def: Node<'_>,
    name: String,
    text: &str,
    bindings: &crate::analysis::matcher::Bindings,
    vocabulary: &Vocabulary,
    functions: &Enclosing<'_>,
    classes: &Enclosing<'_>,
) -> FunctionFact {
    let class = classes.around(def);
    let outer = functions.around(def);
    // Directly in the class body (maybe decorated): no function between.
    let is_method = class.is_some_and(|c| outer.is_none_or(|f| f.start_byte() < c.start_byte()));
    let fenced = crate::analysis::matcher::decorators(def)
        .into_iter()
        .find_map(|d| {
            let callee = crate::analysis::matcher::decorator_callee(d, text)?;
            crate::analysis::matcher::is_fence_path(&bindings.resolve(&callee), vocabulary)
                .then(|| text_of(d, text).split_whitespace().collect::<String>())
        });
    let offset = def.start_byte();
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    FunctionFact {
        qualname: String::new(),
        name,
        line: def.start_position().row + 1,
        column: text[line_start..offset].chars().count() + 1,
        self_class: class
            .and_then(|c| c.child_by_field_name("name"))
            .map(|n| text_of(n, text).to_owned()),
        is_method,
        outer: outer.map(|f| f.start_byte()),
        start: def.start_byte(),
        fenced,
        signs: Vec::new(),
        calls: Vec::new(),
        locals: HashMap::new(),
        parameters: crate::syntax::parameter_names(def, text),
        returns: Vec::new(),
        saved_forwards: Vec::new(),
        assigned: Vec::new(),
    }
}

/// 1-based line and column (in characters) of where `node` starts.
fn line_column(node: Node<'_>, text: &str) -> (usize, usize) {
    let offset = node.start_byte();
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    (
        node.start_position().row + 1,
        text[line_start..offset].chars().count() + 1,
    )
}

/// What an installed or returned value is, as far as one file tells:
/// wrappers that keep the function (`functools.partial`, `types.MethodType`,
/// `functools.update_wrapper`, `f.__get__(m)`) are seen through.
fn value_of(node: Node<'_>, text: &str, functions: &HashMap<usize, usize>) -> Value {
    match node.kind() {
        "identifier" => Value::Name(text_of(node, text).to_owned()),
        "attribute" => match dotted_name(node, text) {
            Some(dotted) => Value::Attribute(dotted),
            None => Value::Other(crate::syntax::short(text_of(node, text))),
        },
        "lambda" => match functions.get(&node.start_byte()) {
            Some(&i) => Value::Function(i),
            None => Value::Other("lambda".to_owned()),
        },
        "parenthesized_expression" => match node.named_child(0) {
            Some(inner) => value_of(inner, text, functions),
            None => Value::Other(String::new()),
        },
        "call" => {
            let function = node.child_by_field_name("function");
            let first = node
                .child_by_field_name("arguments")
                .and_then(|a| a.named_child(0));
            let callee = function.and_then(|f| dotted_name(f, text));
            let last = callee.as_deref().map(|c| c.rsplit('.').next().unwrap_or(c));
            if let Some(last) = last
                && matches!(
                    last,
                    "partial" | "MethodType" | "update_wrapper" | "partialmethod"
                )
                && let Some(first) = first
            {
                return value_of(first, text, functions);
            }
            if last == Some("__get__")
                && let Some(object) = function.and_then(|f| f.child_by_field_name("object"))
            {
                return value_of(object, text, functions);
            }
            // `functools.wraps(f)(wrapper)`
            if let Some(f) = function
                && f.kind() == "call"
                && f.child_by_field_name("function")
                    .and_then(|g| dotted_name(g, text))
                    .is_some_and(|g| g == "wraps" || g.ends_with(".wraps"))
                && let Some(first) = first
            {
                return value_of(first, text, functions);
            }
            match callee {
                Some(callee) => Value::Returned(callee),
                None => Value::Other(crate::syntax::short(text_of(node, text))),
            }
        }
        _ => Value::Other(crate::syntax::short(text_of(node, text))),
    }
}

/// The dotted module name of a file: its stem, under every enclosing
/// directory that holds an `__init__.py`.
pub fn module_name(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem != "__init__" {
        parts.push(stem);
    }
    let mut dir = path.parent();
    while let Some(d) = dir {
        if !d.join("__init__.py").is_file() {
            break;
        }
        match d.file_name() {
            Some(name) => parts.push(name.to_string_lossy().into_owned()),
            None => break,
        }
        dir = d.parent();
    }
    parts.reverse();
    parts.join(".")
}

/// The name a call looks up that an import could bind: the callee's own
/// name, or the first part of its receiver.
fn import_named_by(callee: &Callee) -> Option<&str> {
    match callee {
        Callee::Name(name) => Some(name),
        Callee::Method {
            receiver: Some(r), ..
        } => r.split('.').next(),
        Callee::Method { receiver: None, .. } => None,
    }
}

/// The package a module's relative imports start from.
fn package_of(path: &Path, module: &str) -> String {
    let is_package = path.file_stem().is_some_and(|s| s == "__init__");
    if is_package {
        module.to_owned()
    } else {
        module
            .rsplit_once('.')
            .map_or(String::new(), |(p, _)| p.to_owned())
    }
}

/// A relative import's path, as the matcher spells it (`{module}.{name}`:
/// `.x.y` for `from .x import y`, `..y` for `from . import y`), made absolute
/// from `package`; absolute paths as they are.
fn absolute(path: &str, package: &str) -> String {
    let mut dots = path.chars().take_while(|&c| c == '.').count();
    if dots == 0 {
        return path.to_owned();
    }
    // `from . import y` reads `..y`: one dot is the joint.
    if dots >= 2 && !path[dots..].contains('.') {
        dots -= 1;
    }
    let mut base: Vec<&str> = if package.is_empty() {
        Vec::new()
    } else {
        package.split('.').collect()
    };
    for _ in 1..dots {
        base.pop();
    }
    let rest = &path[dots..];
    let rest = rest.trim_start_matches('.');
    if !rest.is_empty() {
        base.push(rest);
    }
    base.join(".")
}

/// The directory a file's top-level package is imported from.
fn import_root(path: &Path, module: &str) -> Option<PathBuf> {
    let depth = module.split('.').count();
    let mut root = path.parent()?;
    let is_package = path.file_stem().is_some_and(|s| s == "__init__");
    let up = if is_package { depth } else { depth - 1 };
    for _ in 0..up {
        root = root.parent()?;
    }
    Some(root.to_path_buf())
}

/// One step of an evidence chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub qualname: String,
    pub path: PathBuf,
    pub line: usize,
}

/// Why a hook counts as offload work through what it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// From the first callee to the function holding the sign.
    pub steps: Vec<Step>,
    /// The sign found there, or `None` when the last step is a function its
    /// authors fenced.
    pub sign: Option<Sign>,
    pub fenced: Option<String>,
}

impl Chain {
    /// `fetches ... via a -> b (path:line, fenced)`.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.steps.iter().map(|s| s.qualname.as_str()).collect();
        let last = self.steps.last();
        let place = last.map_or(String::new(), |s| {
            format!(" ({}:{}", s.path.display(), s.line)
        });
        match (&self.sign, &self.fenced) {
            (Some(sign), _) => format!("{} via {}{place})", sign.detail, names.join(" -> ")),
            (None, Some(_)) => format!(
                "calls a function its authors fenced: {}{place}, fenced)",
                names.join(" -> ")
            ),
            (None, None) => names.join(" -> "),
        }
    }
}

type FunctionRef = (Arc<ModuleFacts>, usize);

/// Modules read on demand, by file (`None`: could not be read or parsed),
/// kept across the rounds of one run.
///
/// A module that could not be read, decoded or parsed is kept as `None`,
/// and its error once, for the run to report: a file whose contents the
/// analysis would use is a file whose errors are reported.
#[derive(Debug, Default)]
pub struct ModuleCache {
    modules: Mutex<HashMap<PathBuf, Option<Arc<ModuleFacts>>>>,
    errors: Mutex<Vec<crate::error::FileError>>,
    /// Where modules may be read from (see [`crate::confine`]).
    pub confinement: Arc<crate::confine::Confinement>,
}

impl ModuleCache {
    /// A cache whose reads are confined by `confinement`.
    pub fn confined(confinement: crate::confine::Confinement) -> ModuleCache {
        ModuleCache {
            confinement: Arc::new(confinement),
            ..ModuleCache::default()
        }
    }

    /// The errors of the modules read on demand so far, each file once;
    /// taken, so that a later call gives only newer ones.
    pub fn take_errors(&self) -> Vec<crate::error::FileError> {
        let mut errors = std::mem::take(
            &mut *self
                .errors
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        errors.sort_by(|a, b| a.path().cmp(b.path()));
        errors.dedup_by(|a, b| a.path() == b.path());
        errors
    }
}

/// Every indexed module, and the modules read on demand.
pub struct ProjectIndex<'v> {
    modules: Vec<Arc<ModuleFacts>>,
    by_path: HashMap<PathBuf, usize>,
    /// Modules read on demand, by file; `None` for a file that could not be
    /// read or parsed (it is context only, never reported).
    loaded: Arc<ModuleCache>,
    /// Directories modules are imported from.
    roots: Vec<PathBuf>,
    vocabulary: &'v Vocabulary,
    /// The texts (in NFKC) of files read to tell whether they spell a name.
    texts: Mutex<HashMap<PathBuf, Option<Arc<str>>>>,
    /// [`ProjectIndex::module_file`]'s answers, by dotted name and the
    /// import root of the module asking: asked for every import of every
    /// module a chain passes, and each answer costs file-system look-ups.
    module_files: Mutex<HashMap<(String, Option<PathBuf>), ModuleFile>>,
}

/// Where a dotted module name is: an indexed module, or the file that holds it.
type ModuleFile = Option<Result<Arc<ModuleFacts>, PathBuf>>;

impl<'v> ProjectIndex<'v> {
    pub fn new(
        modules: Vec<Arc<ModuleFacts>>,
        vocabulary: &'v Vocabulary,
        loaded: Arc<ModuleCache>,
    ) -> ProjectIndex<'v> {
        let mut roots: Vec<PathBuf> = Vec::new();
        for module in &modules {
            if let Some(root) = import_root(&module.path, &module.module)
                && !roots.contains(&root)
            {
                roots.push(root);
            }
        }
        let by_path = modules
            .iter()
            .enumerate()
            .map(|(i, m)| (m.path.clone(), i))
            .collect();
        ProjectIndex {
            modules,
            by_path,
            loaded,
            roots,
            vocabulary,
            texts: Mutex::default(),
            module_files: Mutex::default(),
        }
    }

    pub fn module(&self, path: &Path) -> Option<Arc<ModuleFacts>> {
        self.by_path
            .get(path)
            .map(|&i| Arc::clone(&self.modules[i]))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Option<Arc<ModuleFacts>>>> {
        self.loaded
            .modules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The module with dotted name `name`, read from disk if it is not
    /// indexed yet.
    fn module_named(&self, name: &str, near: &ModuleFacts) -> Option<Arc<ModuleFacts>> {
        match self.module_file(name, near)? {
            Ok(found) => Some(found),
            Err(path) => self.load(&path),
        }
    }

    /// The module with dotted name `name` if it is indexed, else the file
    /// that holds it.
    fn module_file(&self, name: &str, near: &ModuleFacts) -> ModuleFile {
        let near_root = import_root(&near.path, &near.module);
        let key = (name.to_owned(), near_root);
        let lock = || {
            self.module_files
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(&key) {
            return known.clone();
        }
        let found = self.find_module_file(name, key.1.clone());
        lock().insert(key, found.clone());
        found
    }

    /// [`ProjectIndex::module_file`], looked up.
    fn find_module_file(&self, name: &str, near_root: Option<PathBuf>) -> ModuleFile {
        if let Some(found) = self.modules.iter().find(|m| m.module == name) {
            return Some(Ok(Arc::clone(found)));
        }
        let relative: PathBuf = name.split('.').collect();
        let mut roots: Vec<PathBuf> = near_root.into_iter().collect();
        roots.extend(self.roots.iter().cloned());
        for root in roots {
            for candidate in [
                root.join(&relative).with_extension("py"),
                root.join(&relative).join("__init__.py"),
            ] {
                if candidate.is_file() && self.loaded.confinement.allows(&candidate) {
                    return Some(Err(candidate));
                }
            }
        }
        None
    }

    /// Whether the file at `path` may define `word` with `keyword`: its
    /// text (in NFKC, as CPython reads names) has `keyword word`, with only
    /// blanks and line continuations between. A file that cannot be read
    /// defines nothing (it is never indexed either).
    fn may_define(&self, path: &Path, keyword: &str, word: &str) -> bool {
        if self.by_path.contains_key(path) || self.lock().contains_key(path) {
            // Indexed already: its definitions are at hand.
            return true;
        }
        let text = {
            let mut texts = self
                .texts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            texts
                .entry(path.to_path_buf())
                .or_insert_with(|| {
                    let raw = crate::source::read_file_limited(
                        path,
                        crate::source::MAX_SOURCE_BYTES,
                        "a Python source",
                    )
                    .ok()?;
                    let source = crate::source::Source::decode(raw).ok()?;
                    Some(Arc::from(
                        crate::analysis::shadow::nfkc(&source.text).as_ref(),
                    ))
                })
                .clone()
        };
        text.is_some_and(|text| defines(&text, keyword, word))
    }

    /// Whether some leading part of the dotted path `full` is a module of
    /// the project (as code in `near` imports it).
    fn in_project(&self, full: &str, near: &ModuleFacts) -> bool {
        let mut prefix = String::new();
        for part in full.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            if self.module_file(&prefix, near).is_some() {
                return true;
            }
        }
        false
    }

    fn load(&self, path: &Path) -> Option<Arc<ModuleFacts>> {
        if let Some(i) = self.by_path.get(path) {
            return Some(Arc::clone(&self.modules[*i]));
        }
        if let Some(found) = self.lock().get(path) {
            return found.clone();
        }
        // Read without the lock held: two threads may read one module at
        // once (the same facts; its error is reported once).
        let facts = match read_module(path, self.vocabulary) {
            Ok(facts) => Some(Arc::new(facts)),
            Err(err) => {
                self.loaded
                    .errors
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(err);
                None
            }
        };
        self.lock().insert(path.to_path_buf(), facts.clone());
        facts
    }

    /// Every class named `name` that code in `module` can mean: one it
    /// defines or imports, else any indexed class of that name.
    fn classes_named(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
    ) -> Vec<(Arc<ModuleFacts>, String)> {
        let last = name.rsplit('.').next().unwrap_or(name).to_owned();
        if !name.contains('.') && module.classes.contains_key(name) {
            return vec![(Arc::clone(module), last)];
        }
        let first = name.split('.').next().unwrap_or(name);
        if let Some(path) = module.imports.get(first) {
            let full = match name.split_once('.') {
                Some((_, rest)) => format!("{path}.{rest}"),
                None => path.clone(),
            };
            if let Some((module_path, class)) = full.rsplit_once('.')
                && let Some(target) = self.module_named(module_path, module)
                && target.classes.contains_key(class)
            {
                return vec![(target, class.to_owned())];
            }
            if !self.in_project(&full, module) {
                // Imported from outside the project (`nn.Module`).
                return Vec::new();
            }
        }
        self.neighbourhood(module, "class", &last)
            .into_iter()
            .filter(|m| m.classes.contains_key(&last))
            .map(|m| (m, last.clone()))
            .collect()
    }

    /// The method `method` of class `class` in `module`, or of its bases.
    fn method_of(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        method: &str,
        seen: &mut HashSet<(PathBuf, String)>,
    ) -> Vec<FunctionRef> {
        if !seen.insert((module.path.clone(), class.to_owned())) || seen.len() > 64 {
            return Vec::new();
        }
        let Some(facts) = module.classes.get(class) else {
            return Vec::new();
        };
        if let Some(&found) = facts
            .methods
            .iter()
            .find(|&&i| module.functions[i].name == method)
        {
            return vec![(Arc::clone(module), found)];
        }
        for base in &facts.bases {
            for (base_module, base_class) in self.classes_named(module, base) {
                let found = self.method_of(&base_module, &base_class, method, seen);
                if !found.is_empty() {
                    return found;
                }
            }
        }
        Vec::new()
    }

    /// The project functions a call in `function` can reach.
    fn targets(
        &self,
        module: &Arc<ModuleFacts>,
        function: usize,
        call: &CallFact,
    ) -> Vec<FunctionRef> {
        let caller = &module.functions[function];
        match &call.callee {
            Callee::Name(name) if call.not_the_import => module
                .functions_named(name, Some(caller.start))
                .into_iter()
                .map(|i| (Arc::clone(module), i))
                .collect(),
            Callee::Name(name) => self.named_function(module, name, Some(caller.start)),
            Callee::Method { receiver, method } => {
                let receiver = receiver.as_deref();
                let self_class = caller.self_class.as_deref();
                match (receiver, self_class) {
                    (Some("self" | "cls"), Some(class)) => {
                        return self.method_of(module, class, method, &mut HashSet::new());
                    }
                    (Some(r), Some(class)) if r.starts_with("self.") && !r[5..].contains('.') => {
                        let attribute = &r[5..];
                        let typed = module
                            .classes
                            .get(class)
                            .and_then(|c| c.attributes.get(attribute))
                            .cloned();
                        if let Some(typed) = typed {
                            return self
                                .classes_named(module, &typed)
                                .into_iter()
                                .flat_map(|(m, c)| {
                                    self.method_of(&m, &c, method, &mut HashSet::new())
                                })
                                .collect();
                        }
                    }
                    _ => {}
                }
                if let Some(r) = receiver {
                    // A local whose class is known, a class, or a module.
                    if let Some(class) = caller.locals.get(r) {
                        return self
                            .classes_named(module, class)
                            .into_iter()
                            .flat_map(|(m, c)| self.method_of(&m, &c, method, &mut HashSet::new()))
                            .collect();
                    }
                    if module.classes.contains_key(r) {
                        return self.method_of(module, r, method, &mut HashSet::new());
                    }
                    if call.not_the_import {
                        // A local value that is no import: of no known type.
                        return self.untyped(module, method);
                    }
                    if let Some(path) = module.imports.get(r.split('.').next().unwrap_or(r)) {
                        let full = match r.split_once('.') {
                            Some((_, rest)) => format!("{path}.{rest}"),
                            None => path.clone(),
                        };
                        if let Some(target) = self.module_named(&full, module) {
                            return target
                                .functions_named(method, None)
                                .into_iter()
                                .map(|i| (Arc::clone(&target), i))
                                .collect();
                        }
                        if let Some((module_path, class)) = full.rsplit_once('.')
                            && let Some(target) = self.module_named(module_path, module)
                            && target.classes.contains_key(class)
                        {
                            return self.method_of(&target, class, method, &mut HashSet::new());
                        }
                        // Something imported from outside the project.
                        return Vec::new();
                    }
                }
                self.untyped(module, method)
            }
        }
    }

    /// The indexed methods named `method`, when few classes define one.
    fn untyped(&self, module: &Arc<ModuleFacts>, method: &str) -> Vec<FunctionRef> {
        if method.starts_with("__") || GENERIC_METHODS.contains(&method) {
            return Vec::new();
        }
        let mut found: Vec<FunctionRef> = Vec::new();
        for module in self.neighbourhood(module, "def", method) {
            for class in module.classes.values() {
                for &i in &class.methods {
                    if module.functions[i].name == method {
                        found.push((Arc::clone(&module), i));
                    }
                }
            }
        }
        if found.len() > MOST_UNTYPED_TARGETS {
            return Vec::new();
        }
        found
    }

    /// `module` and the project modules it imports (read from disk by
    /// name) that may define `word` with `keyword` (`def`, `class`): where a
    /// name of unknown origin is looked up. It does not depend on which
    /// files the run happened to parse, so the prefilter cannot change an
    /// answer; a module whose text cannot define the name is not parsed for
    /// it.
    fn neighbourhood(
        &self,
        module: &Arc<ModuleFacts>,
        keyword: &str,
        word: &str,
    ) -> Vec<Arc<ModuleFacts>> {
        let mut found: Vec<Arc<ModuleFacts>> = vec![Arc::clone(module)];
        let mut paths: Vec<&String> = module.imports.values().collect();
        paths.sort();
        paths.dedup();
        for path in paths {
            let target = self.module_file(path, module).or_else(|| {
                path.rsplit_once('.')
                    .and_then(|(parent, _)| self.module_file(parent, module))
            });
            let target = match target {
                Some(Ok(indexed)) => indexed,
                Some(Err(file)) if self.may_define(&file, keyword, word) => {
                    match self.load(&file) {
                        Some(loaded) => loaded,
                        None => continue,
                    }
                }
                _ => continue,
            };
            if !found.iter().any(|m| m.path == target.path) {
                found.push(target);
            }
        }
        found
    }

    /// The shortest chain of calls from the function at `line:column` of
    /// `path` to a function with a counted sign or a fence of its authors,
    /// breadth first, at most [`MOST_CALL_DEPTH`] calls deep, cycles cut.
    pub fn chain_from(&self, path: &Path, line: usize, column: usize) -> Option<Chain> {
        let module = self.module(path)?;
        let start = module.function_at(line, column)?;
        let mut queue: VecDeque<(FunctionRef, Vec<Step>)> = VecDeque::new();
        let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
        seen.insert((module.path.clone(), start));
        queue.push_back(((module, start), Vec::new()));
        while let Some(((module, function), steps)) = queue.pop_front() {
            if steps.len() >= MOST_CALL_DEPTH {
                continue;
            }
            let calls = module.functions[function].calls.clone();
            for call in &calls {
                for (target_module, target) in self.targets(&module, function, call) {
                    if !seen.insert((target_module.path.clone(), target)) {
                        continue;
                    }
                    let fact = &target_module.functions[target];
                    let mut next = steps.clone();
                    next.push(Step {
                        qualname: fact.qualname.clone(),
                        path: target_module.path.clone(),
                        line: fact.line,
                    });
                    if let Some(fence) = &fact.fenced {
                        return Some(Chain {
                            steps: next,
                            sign: fact.signs.iter().find(|s| s.counts()).cloned(),
                            fenced: Some(fence.clone()),
                        });
                    }
                    if let Some(sign) = fact.signs.iter().find(|s| s.counts()) {
                        return Some(Chain {
                            steps: next,
                            sign: Some(sign.clone()),
                            fenced: None,
                        });
                    }
                    queue.push_back(((Arc::clone(&target_module), target), next));
                }
            }
        }
        None
    }
}

/// Whether a callee's name spells an original forward (`forward`,
/// `_old_forward`, `orig_forward`, `forward_orig`, ...).
pub fn is_forward_name(name: &str) -> bool {
    let name = name.trim_start_matches('_').to_ascii_lowercase();
    let Some(at) = name.find("forward") else {
        return false;
    };
    let (before, after) = (&name[..at], &name[at + "forward".len()..]);
    let before = before.trim_end_matches('_');
    let after = after.trim_start_matches('_');
    const AROUND: &[&str] = &[
        "",
        "old",
        "orig",
        "original",
        "saved",
        "prev",
        "previous",
        "wrapped",
        "base",
        "inner",
        "hf_hook_original",
        "fn",
        "func",
        "function",
        "method",
    ];
    AROUND.contains(&before) && AROUND.contains(&after)
}

impl ProjectIndex<'_> {
    /// The project functions a value can be, through names, methods,
    /// lambdas and the returns of factories.
    fn functions_of(
        &self,
        module: &Arc<ModuleFacts>,
        scope: Option<usize>,
        value: &Value,
        depth: usize,
    ) -> Vec<FunctionRef> {
        if depth > 4 {
            return Vec::new();
        }
        let as_call = |callee: &str| CallFact {
            callee: match callee.rsplit_once('.') {
                Some((receiver, method)) => Callee::Method {
                    receiver: Some(receiver.to_owned()),
                    method: method.to_owned(),
                },
                None => Callee::Name(callee.to_owned()),
            },
            line: 0,
            start: 0,
            first_argument: None,
            not_the_import: false,
        };
        let through = |callee: &str| -> Vec<FunctionRef> {
            match scope {
                Some(scope) => self.targets(module, scope, &as_call(callee)),
                None => self.module_level_targets(module, &as_call(callee)),
            }
        };
        match value {
            Value::Function(i) => vec![(Arc::clone(module), *i)],
            Value::Name(name) => {
                let found = through(name);
                if !found.is_empty() {
                    return found;
                }
                // A variable: what was assigned to it, innermost scope first.
                let mut scope = scope;
                loop {
                    let assigned = match scope {
                        Some(i) => &module.functions[i].assigned,
                        None => &module.assigned,
                    };
                    let values: Vec<&Value> = assigned
                        .iter()
                        .filter(|(n, v)| n == name && v != value)
                        .map(|(_, v)| v)
                        .collect();
                    if !values.is_empty() {
                        return values
                            .into_iter()
                            .flat_map(|v| self.functions_of(module, scope, v, depth + 1))
                            .collect();
                    }
                    match scope {
                        Some(i) => {
                            scope = module.functions[i].outer.and_then(|start| {
                                module.functions.iter().position(|f| f.start == start)
                            });
                        }
                        None => return Vec::new(),
                    }
                }
            }
            Value::Attribute(name) => {
                let found = through(name);
                if !found.is_empty() {
                    return found;
                }
                // `self.x`, assigned in a method of the class.
                let (Some(attribute), Some(class)) = (
                    name.strip_prefix("self.").filter(|a| !a.contains('.')),
                    scope.and_then(|i| module.functions[i].self_class.as_ref()),
                ) else {
                    return Vec::new();
                };
                let values: Vec<(Value, usize)> = module
                    .classes
                    .get(class)
                    .map(|c| {
                        c.attribute_values
                            .iter()
                            .filter(|(a, _, _)| a == attribute)
                            .map(|(_, v, m)| (v.clone(), *m))
                            .collect()
                    })
                    .unwrap_or_default();
                values
                    .iter()
                    .filter(|(v, _)| v != value)
                    .flat_map(|(v, method)| self.functions_of(module, Some(*method), v, depth + 1))
                    .collect()
            }
            Value::Returned(callee) => {
                let mut found = Vec::new();
                for (factory_module, factory) in through(callee) {
                    let returns = factory_module.functions[factory].returns.clone();
                    for returned in &returns {
                        found.extend(self.functions_of(
                            &factory_module,
                            Some(factory),
                            returned,
                            depth + 1,
                        ));
                    }
                }
                found
            }
            Value::Other(_) => Vec::new(),
        }
    }

    /// The functions a bare name called in `module` means: a closure of
    /// `outer` or a module-level def there, else the function it imports.
    fn named_function(
        &self,
        module: &Arc<ModuleFacts>,
        name: &str,
        outer: Option<usize>,
    ) -> Vec<FunctionRef> {
        let here = module.functions_named(name, outer);
        if !here.is_empty() {
            return here.into_iter().map(|i| (Arc::clone(module), i)).collect();
        }
        if let Some(path) = module.imports.get(name)
            && let Some((module_path, function_name)) = path.rsplit_once('.')
            && let Some(target) = self.module_named(module_path, module)
        {
            return target
                .functions_named(function_name, None)
                .into_iter()
                .map(|i| (Arc::clone(&target), i))
                .collect();
        }
        Vec::new()
    }

    /// [`ProjectIndex::targets`] for code at module level.
    fn module_level_targets(&self, module: &Arc<ModuleFacts>, call: &CallFact) -> Vec<FunctionRef> {
        match &call.callee {
            Callee::Name(name) => self.named_function(module, name, None),
            Callee::Method {
                receiver: Some(r),
                method,
            } if module.classes.contains_key(r) => {
                self.method_of(module, r, method, &mut HashSet::new())
            }
            Callee::Method { .. } => Vec::new(),
        }
    }

    /// What the forward wrappers of every indexed module call around the
    /// original forward: the hooks they run.
    pub fn discover(&self, unresolved: &HashSet<(PathBuf, usize, usize)>) -> Discovered {
        let mut discovered = Discovered::default();
        for module in &self.modules {
            if !unresolved.is_empty() {
                let path = identity(&module.path);
                for registration in &module.registrations {
                    let at = (path.clone(), registration.line, registration.column);
                    if !unresolved.contains(&at) {
                        continue;
                    }
                    let targets =
                        self.functions_of(module, registration.scope, &registration.value, 0);
                    let why = Found {
                        how: "registration",
                        detail: format!(
                            "registered at {}:{}",
                            module.path.display(),
                            registration.line
                        ),
                        path: module.path.clone(),
                        line: registration.line,
                    };
                    for (target_module, target) in &targets {
                        let fact = &target_module.functions[*target];
                        discovered.names.insert(fact.name.clone());
                        discovered
                            .functions
                            .entry((identity(&target_module.path), fact.line, fact.column))
                            .or_insert_with(|| why.clone());
                    }
                    if !targets.is_empty() {
                        discovered.resolved.insert(at);
                    }
                }
            }
            for replacement in &module.forward_replacements {
                let wrappers = self.functions_of(module, replacement.scope, &replacement.value, 0);
                for (wrapper_module, wrapper) in wrappers {
                    self.hooks_of_wrapper(
                        &wrapper_module,
                        wrapper,
                        module,
                        replacement,
                        &mut discovered,
                    );
                }
            }
        }
        discovered
    }

    fn hooks_of_wrapper(
        &self,
        module: &Arc<ModuleFacts>,
        wrapper: usize,
        installed_in: &ModuleFacts,
        replacement: &ForwardReplacement,
        discovered: &mut Discovered,
    ) {
        let function = &module.functions[wrapper];
        // The original forward: a name kept from `m.forward` here or around,
        // or a callee that spells one.
        let mut saved: Vec<&str> = function.saved_forwards.iter().map(String::as_str).collect();
        let mut outer = function.outer;
        while let Some(start) = outer {
            let Some(around) = module.functions.iter().find(|f| f.start == start) else {
                break;
            };
            saved.extend(around.saved_forwards.iter().map(String::as_str));
            outer = around.outer;
        }
        let is_original = |call: &CallFact| match &call.callee {
            Callee::Name(name) => saved.contains(&name.as_str()) || is_forward_name(name),
            Callee::Method { method, .. } => is_forward_name(method),
        };
        let Some(original) = function.calls.iter().position(is_original) else {
            return;
        };
        // The module as the wrapper sees it: its first parameter (bound by
        // `partial` / `MethodType`), or the name whose forward was replaced.
        let mut module_names: Vec<&str> = Vec::new();
        // (A method's own `self` is not the module; a plain function's first
        // parameter is, whatever its name: `MethodType(f, m)` binds `self`.)
        let first = if function.is_method {
            function.parameters.get(1)
        } else {
            function.parameters.first()
        };
        if let Some(first) = first {
            module_names.push(first);
        }
        let target_root = replacement
            .target
            .split('.')
            .next()
            .unwrap_or(&replacement.target);
        module_names.push(target_root);
        let place = format!(
            "{} at {}:{}",
            function.qualname,
            installed_in.path.display(),
            replacement.line
        );
        for (i, call) in function.calls.iter().enumerate() {
            if i == original {
                continue;
            }
            let Some(first) = call.first_argument.as_deref() else {
                continue;
            };
            if !module_names.contains(&first) {
                continue;
            }
            let when = if i < original { "before" } else { "after" };
            let why = Found {
                how: "forward replacement",
                detail: format!(
                    "called {when} the original forward by the forward wrapper {place}"
                ),
                path: installed_in.path.clone(),
                line: replacement.line,
            };
            match &call.callee {
                Callee::Method { receiver, method } => {
                    let receiver = receiver.as_deref();
                    let receiver_root = receiver.map(|r| r.split('.').next().unwrap_or(r));
                    if receiver.is_some_and(|r| module_names.contains(&r))
                        || method.starts_with("__")
                    {
                        continue;
                    }
                    // A value the wrapper makes itself (a literal, a builtin
                    // container) is no hook object.
                    let made_here = receiver_root.is_some_and(|r| {
                        function.assigned.iter().any(|(name, value)| {
                            name == r
                                && match value {
                                    Value::Other(_) => true,
                                    Value::Returned(callee) => {
                                        BUILTIN_CONTAINERS.contains(&callee.as_str())
                                    }
                                    _ => false,
                                }
                        })
                    });
                    if made_here {
                        continue;
                    }
                    // A method of a known object (`self`, a typed attribute
                    // or local): that very function is the hook.
                    let known = receiver_root.is_some_and(|r| {
                        matches!(r, "self" | "cls")
                            || function.locals.contains_key(r)
                            || module.classes.contains_key(r)
                            || module.imports.contains_key(r)
                    });
                    if known {
                        let targets = self.targets(module, wrapper, call);
                        for (target_module, target) in targets {
                            let fact = &target_module.functions[target];
                            discovered.names.insert(fact.name.clone());
                            discovered
                                .functions
                                .entry((identity(&target_module.path), fact.line, fact.column))
                                .or_insert_with(|| why.clone());
                        }
                        continue;
                    }
                    // Any class's method of this name would become a hook:
                    // never for a name every other class uses (`add`, `get`).
                    if GENERIC_METHODS.contains(&method.as_str()) {
                        continue;
                    }
                    discovered
                        .protocols
                        .entry(method.clone())
                        .or_insert_with(|| why.clone());
                }
                Callee::Name(_) => {
                    for (target_module, target) in self.targets(module, wrapper, call) {
                        let fact = &target_module.functions[target];
                        discovered.names.insert(fact.name.clone());
                        discovered
                            .functions
                            .entry((identity(&target_module.path), fact.line, fact.column))
                            .or_insert_with(|| why.clone());
                    }
                }
            }
        }
    }
}

/// Reads, parses and indexes a module only needed as context, through the
/// same checks as a file the run was given.
fn read_module(
    path: &Path,
    vocabulary: &Vocabulary,
) -> Result<ModuleFacts, crate::error::FileError> {
    use crate::error::FileError;
    let raw =
        crate::source::read_file_limited(path, crate::source::MAX_SOURCE_BYTES, "a Python source")
            .map_err(|source| FileError::Read {
                path: path.to_path_buf(),
                source,
            })?;
    let source =
        crate::source::Source::decode(raw).map_err(|e| FileError::decode(path.to_path_buf(), e))?;
    let parsed = crate::parse::parse_checked(&source.text).map_err(|p| FileError::Syntax {
        path: path.to_path_buf(),
        at: p.at,
        what: format!("{}; the module was read through an import", p.what),
    })?;
    let build = || {
        ModuleFacts::build(
            path,
            parsed.tree.root_node(),
            &source.text,
            vocabulary,
            None,
        )
    };
    Ok(if parsed.is_deep() {
        crate::parse::on_big_stack(build)
    } else {
        build()
    })
}

/// Whether `text` can replace a module's forward as `queries/index.scm`
/// matches it: `forward` as an attribute assigned to (`.forward =`,
/// `.forward: T =`) or as a whole string (`setattr(m, "forward", ...)`).
/// Blanks and line continuations may stand around the `.` and the `=`.
pub fn may_replace_forward(text: &str) -> bool {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let blank = [' ', '\t', '\x0c', '\\', '\n', '\r'];
    memchr::memmem::find_iter(bytes, FORWARD.as_bytes()).any(|at| {
        let end = at + FORWARD.len();
        let (before, after) = (bytes[..at].last(), bytes.get(end));
        if before.is_some_and(|&b| matches!(b, b'"' | b'\''))
            && after.is_some_and(|&b| matches!(b, b'"' | b'\''))
        {
            return true;
        }
        if before.is_some_and(|&b| is_word(b)) || after.is_some_and(|&b| is_word(b)) {
            return false;
        }
        let dotted = text[..at].trim_end_matches(blank).ends_with('.');
        let rest = text[end..].trim_start_matches(blank).as_bytes();
        dotted
            && match rest {
                [b'=', b'=', ..] => false,
                [b'=', ..] | [b':', ..] => true,
                _ => false,
            }
    })
}

/// Whether `text` has `keyword` and then `word`, each a whole word, with
/// only blanks and backslash continuations between (how a `def` or `class`
/// statement spells its name).
fn defines(text: &str, keyword: &str, word: &str) -> bool {
    let bytes = text.as_bytes();
    let is_word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    memchr::memmem::find_iter(bytes, word.as_bytes()).any(|at| {
        let end = at + word.len();
        if bytes.get(end).is_some_and(|&b| is_word(b)) {
            return false;
        }
        let before = text[..at].trim_end_matches([' ', '\t', '\x0c', '\\', '\n', '\r']);
        before.len() < at
            && before.ends_with(keyword)
            && !before[..before.len() - keyword.len()]
                .bytes()
                .next_back()
                .is_some_and(is_word)
    })
}

/// Sorted, for stable output in tests.
pub fn describe_functions(module: &ModuleFacts) -> BTreeMap<String, (Option<String>, usize)> {
    module
        .functions
        .iter()
        .map(|f| (f.qualname.clone(), (f.fenced.clone(), f.calls.len())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_replacement_is_told_from_its_text() {
        // The text test says yes wherever the index query finds one.
        let replacements = |text: &str| {
            let tree = crate::parse::parse(text).unwrap();
            let root = tree.root_node();
            ModuleFacts::build(Path::new("m.py"), root, text, &Vocabulary::default(), None)
                .forward_replacements
                .len()
        };
        for text in [
            "m.forward = wrapper\n",
            "module . forward=partial(f, m)\n",
            "m.__class__.forward: Callable = w\n",
            "m.\\\n    forward \\\n = w\n",
            "setattr(m, \"forward\", w)\n",
            "setattr(m, 'forward', w)\n",
        ] {
            assert!(may_replace_forward(text), "{text:?}");
            assert_eq!(replacements(text), 1, "{text:?}");
        }
        for text in [
            "def forward(self, x): ...\n",
            "y = self.forward(x)\n",
            "if m.forward == f: ...\n",
            "m.forward_pre = w\n",
            "old = m.forward\n",
            "doc = \"the forward pass\"\n",
        ] {
            assert!(!may_replace_forward(text), "{text:?}");
            assert_eq!(replacements(text), 0, "{text:?}");
        }
    }

    #[test]
    fn a_definition_is_told_from_its_text() {
        assert!(defines(
            "class A:\n    def  fetch(self): ...\n",
            "def",
            "fetch"
        ));
        assert!(defines("async def \\\n  fetch(): ...\n", "def", "fetch"));
        assert!(defines("class Hook(Base):\n", "class", "Hook"));
        assert!(!defines(
            "x = fetch()\ndef fetch_all(): ...\n",
            "def",
            "fetch"
        ));
        assert!(!defines("undef fetch\n", "def", "fetch"));
        assert!(!defines("def_fetch = 1\n", "def", "fetch"));
        assert!(!defines("deffetch = 1\n", "def", "fetch"));
        assert!(!defines("obj.fetch(x)\n", "def", "fetch"));
    }

    #[test]
    fn relative_imports_resolve_from_the_package() {
        // from .b import c
        assert_eq!(absolute(".b.c", "pkg.sub"), "pkg.sub.b.c");
        // from ..b import c
        assert_eq!(absolute("..b.c", "pkg.sub"), "pkg.b.c");
        // from . import c
        assert_eq!(absolute("..c", "pkg.sub"), "pkg.sub.c");
        // from .. import c
        assert_eq!(absolute("...c", "pkg.sub"), "pkg.c");
        assert_eq!(absolute("x.y", "pkg"), "x.y");
    }
}
