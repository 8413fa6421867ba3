//! One module's facts for the project: the functions it defines (with the
//! calls each makes, its returns and decorators, the offload signs in its
//! own body, whether its authors fenced it), its classes, imports, forward
//! replacements and registrations; gathered once while its tree is at hand,
//! and plain data afterwards (no tree is kept). A module read on demand
//! through an import gets the same facts through the same code
//! ([`crate::analysis::project`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tree_sitter::Node;

use crate::analysis::evidence::{self, Sign};
use crate::analysis::module_names::{absolute, module_name, package_of};
use crate::analysis::reached::{Through, registrar_of_table};
use crate::analysis::scope::SemanticModel;
use crate::analysis::vocabulary::Vocabulary;
use crate::queries::QUERIES;
use crate::syntax::{Enclosing, Qualnames, capture, dotted_name, text_of};

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
    /// Not a call written here but a function reached another way
    /// (`queries/handed.scm`).
    pub through: Option<Through>,
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
    /// The registrar's name (`register_forward_pre_hook`).
    pub registrar: String,
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
    /// `x.attr = name` anywhere in the module, by attribute: the name and
    /// the function the assignment stands in (`queries/handed.scm`).
    pub held: HashMap<String, Vec<(String, Option<usize>)>>,
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
        let bindings = crate::analysis::fences::Bindings::collect(&import_matches, text);
        for (name, path) in &bindings.any_scope {
            facts.imports.insert(name.clone(), absolute(path, &package));
        }

        let q = &QUERIES.index;
        let mut by_start: HashMap<usize, usize> = HashMap::new();
        let mut classes_by_start: HashMap<usize, String> = HashMap::new();
        let mut calls = Vec::new();
        let mut handed = Vec::new();
        let mut held: Vec<(Node<'_>, String)> = Vec::new();
        let mut replays: Vec<(std::ops::Range<usize>, String, Through)> = Vec::new();
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
                    bases: crate::syntax::class_bases(class, text),
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
            } else if let (Some(call), Some(to), Some(function)) = (
                capture(captures, q.handed_call),
                capture(captures, q.handed_callee),
                capture(captures, q.handed_fn),
            ) {
                let to = dotted_name(to, text)
                    .unwrap_or_else(|| crate::syntax::short(text_of(to, text)));
                handed.push((
                    call,
                    Callee::Name(text_of(function, text).to_owned()),
                    Through::HandedTo(to),
                ));
            } else if let (Some(call), Some(class)) = (
                capture(captures, q.applying),
                capture(captures, q.applied_class),
            ) {
                let class = text_of(class, text).to_owned();
                for method in ["forward", "backward"] {
                    handed.push((
                        call,
                        Callee::Method {
                            receiver: Some(class.clone()),
                            method: method.to_owned(),
                        },
                        Through::HandedTo(format!("{class}.apply")),
                    ));
                }
            } else if let (Some(attr), Some(value)) = (
                capture(captures, q.held_attr),
                capture(captures, q.held_value),
            ) {
                held.push((attr, text_of(value, text).to_owned()));
            } else if let (Some(applying), Some(holder)) = (
                capture(captures, q.held_applying),
                capture(captures, q.held_holder),
            ) {
                let holder = crate::syntax::short(text_of(holder, text));
                for method in ["forward", "backward"] {
                    handed.push((
                        applying,
                        Callee::Method {
                            receiver: Some(holder.clone()),
                            method: method.to_owned(),
                        },
                        Through::HandedTo(format!("{holder}.apply")),
                    ));
                }
            } else if let (Some(lp), Some(var), Some(table), Some(name)) = (
                capture(captures, q.replay_loop),
                capture(captures, q.replay_var),
                capture(captures, q.replay_table),
                capture(captures, q.replay_name),
            ) {
                replays.push((
                    lp.byte_range(),
                    text_of(var, text).to_owned(),
                    Through::Replayed {
                        table: crate::syntax::short(text_of(table, text)),
                        registrar: registrar_of_table(text_of(name, text)),
                    },
                ));
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
        // A call of a replay loop's variable in its body replays the table.
        let replayed: Vec<(Node<'_>, Callee, Through)> = calls
            .iter()
            .filter_map(|(call, callee)| {
                let Callee::Name(name) = callee else {
                    return None;
                };
                replays
                    .iter()
                    .find(|(range, var, _)| var == name && range.contains(&call.start_byte()))
                    .map(|(_, _, through)| (*call, callee.clone(), through.clone()))
            })
            .collect();
        let calls = calls
            .into_iter()
            .map(|(call, callee)| (call, callee, None))
            .chain(
                handed
                    .into_iter()
                    .chain(replayed)
                    .map(|(call, callee, through)| (call, callee, Some(through))),
            );
        for (call, callee, through) in calls {
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
                through,
            });
        }
        for function in &mut facts.functions {
            function.calls.sort_by_key(|c| c.start);
        }
        for (attr, value) in held {
            facts
                .held
                .entry(text_of(attr, text).to_owned())
                .or_default()
                .push((value, owner_of(attr)));
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
                let (method, hook) = crate::analysis::hook_values::registrar_and_hook(
                    call, arguments, text, vocabulary,
                );
                let Some(hook) = hook else {
                    return;
                };
                let (line, column) = line_column(call, text);
                facts.registrations.push(Registration {
                    line,
                    column,
                    value: value_of(hook, text, &by_start),
                    scope: owner_of(call),
                    registrar: method.to_owned(),
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

    pub(super) fn function_at(&self, line: usize, column: usize) -> Option<usize> {
        self.functions
            .iter()
            .position(|f| f.line == line && f.column == column)
    }

    /// The functions named `name` that code in function `from` (or at
    /// module level) sees: closures of `from` and of each function around
    /// it, innermost first, else module-level functions.
    pub(super) fn functions_visible(&self, name: &str, from: Option<usize>) -> Vec<usize> {
        let mut scope = from;
        while let Some(function) = scope {
            let start = self.functions[function].start;
            let closures: Vec<usize> = self
                .functions_named(name, Some(start))
                .into_iter()
                .filter(|&i| self.functions[i].outer == Some(start))
                .collect();
            if !closures.is_empty() {
                return closures;
            }
            scope = self.functions[function]
                .outer
                .and_then(|outer| self.functions.iter().position(|f| f.start == outer));
        }
        self.functions_named(name, None)
    }

    /// Module-level functions (and closures of `outer`) named `name`.
    pub(super) fn functions_named(&self, name: &str, outer: Option<usize>) -> Vec<usize> {
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
    bindings: &crate::analysis::fences::Bindings,
    vocabulary: &Vocabulary,
    functions: &Enclosing<'_>,
    classes: &Enclosing<'_>,
) -> FunctionFact {
    let class = classes.around(def);
    let outer = functions.around(def);
    // Directly in the class body (maybe decorated): no function between.
    let is_method = class.is_some_and(|c| outer.is_none_or(|f| f.start_byte() < c.start_byte()));
    let fenced = crate::analysis::fences::decorators(def)
        .into_iter()
        .find_map(|d| {
            let callee = crate::analysis::fences::decorator_callee(d, text)?;
            crate::analysis::fences::is_fence_path(&bindings.resolve(&callee), vocabulary)
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
            assert!(
                crate::analysis::prefilter::may_replace_forward(text),
                "{text:?}"
            );
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
            assert!(
                !crate::analysis::prefilter::may_replace_forward(text),
                "{text:?}"
            );
            assert_eq!(replacements(text), 0, "{text:?}");
        }
    }
}
