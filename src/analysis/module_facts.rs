//! One module's facts for the project: the functions it defines (with the
//! calls each makes, its returns and decorators, the offload signs in its
//! own body, whether its authors fenced it), its classes, imports, forward
//! replacements and registrations; gathered once while its tree is at hand,
//! and plain data afterwards (no tree is kept). A module read on demand
//! through an import gets the same facts through the same code
//! ([`crate::analysis::project`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use tree_sitter::Node;

use crate::analysis::bound::{
    as_bound_at, bound_by_no_definition, def_scopes, import_named_by, only_a_parameter,
};
use crate::analysis::effects::local::Context;
pub use crate::analysis::function_facts::{CallFact, Callee, FunctionFact};
use crate::analysis::function_facts::{function_fact, left_alone};
use crate::analysis::hook_values::value_of;
pub use crate::analysis::hook_values::{RegisterCall, Value};
use crate::analysis::module_names::{absolute, module_name, package_of};
use crate::analysis::reached::{Through, registrar_of_table};
use crate::analysis::scope::SemanticModel;
use crate::analysis::vocabulary::Vocabulary;
use crate::queries::QUERIES;
use crate::syntax::Field;
use crate::syntax::{Enclosing, Qualnames, capture, dotted_name, text_of};

pub use crate::analysis::installs::{ForwardReplacement, Registration, SwappedClass};

/// One class of a module.
#[derive(Debug, Clone, Default)]
pub struct ClassFacts {
    pub name: String,
    pub bases: Vec<String>,
    /// Whether a base is an expression no name spells (`class A(make())`),
    /// left out of [`ClassFacts::bases`]: the class may be anything.
    pub computed_base: bool,
    /// `self.x = Cls(...)` anywhere in the class: `x -> Cls`.
    pub attributes: HashMap<String, String>,
    /// Its methods, as indices into [`ModuleFacts::functions`].
    pub methods: Vec<usize>,
    /// `self.x = value` in its methods: `(x, value, method)`.
    pub attribute_values: Vec<(String, Value, usize)>,
    /// `self.x` stored (or filled) in its methods: whether every store put
    /// a value the class made itself there (a tensor it created, a literal,
    /// a container), by attribute.
    pub stores: HashMap<String, bool>,
    /// The classes of the instances stored in `self.x` (or in its items),
    /// by attribute, where a class's call made them.
    pub element_classes: HashMap<String, Vec<String>>,
}

impl ClassFacts {
    /// Whether `self.<attr>` only ever holds the object's own data: every
    /// store there (at least one) puts a value made in the class, so it can
    /// hold no module state (an observer's statistics, a tracer's records).
    pub fn owns(&self, attr: &str) -> bool {
        self.stores.get(attr).copied().unwrap_or(false)
    }
}

/// What the index knows of one module.
#[derive(Debug, Clone, Default)]
pub struct ModuleFacts {
    pub path: PathBuf,
    /// Dotted module name, when the file sits in a package (or at a root).
    pub module: String,
    /// The directory its top-level package is imported from.
    pub import_root: Option<PathBuf>,
    pub functions: Vec<FunctionFact>,
    pub classes: HashMap<String, ClassFacts>,
    /// Bound name -> absolute dotted path (relative imports resolved).
    pub imports: HashMap<String, String>,
    /// The modules of its `from a.b import *` (absolute).
    pub star_imports: Vec<String>,
    pub forward_replacements: Vec<ForwardReplacement>,
    pub swapped_classes: Vec<SwappedClass>,
    pub registrations: Vec<Registration>,
    /// `name = value` at module level.
    pub assigned: Vec<(String, Value)>,
    /// Module-level names that fence what they decorate: functions whose
    /// body calls a disable (`_compiler_disable`) and aliases of one
    /// (`disable = torch.compiler.disable`).
    pub fences: HashSet<String>,
    /// `x.attr = name` anywhere in the module, by attribute: the name and
    /// the function the assignment stands in (`queries/handed.scm`).
    pub held: HashMap<String, Vec<(String, Option<usize>)>>,
    /// Indexed only for the forwards of its leaf layers (see
    /// `crate::analysis::leaf_layers::ForwardRoots::LayersOnly`): its other forwards' steps
    /// are not asked for.
    pub layers_only: bool,
    /// [`ModuleFacts::functions`] by name, then by the function they are
    /// nested in, in order: a call's callee is a look-up, not a scan of
    /// every function (nor of every nested function of that name).
    by_name: HashMap<String, HashMap<Option<usize>, Vec<usize>>>,
    /// [`ModuleFacts::functions`] by start byte.
    by_start: HashMap<usize, usize>,
    /// [`ModuleFacts::functions`] by the line and column of their start.
    by_place: HashMap<(usize, usize), usize>,
    /// The functions defined directly in each function, by its start byte.
    by_outer: HashMap<usize, Vec<usize>>,
}

impl ModuleFacts {
    /// Indexes one parsed module.
    /// `given_model`: the file's scope model where the matcher built one
    /// (else it is built here when a call's name could be an import).
    /// `given_registrations`: the register calls the matcher's scan found
    /// in this same tree (else the scan runs here).
    pub fn build<'t>(
        path: &Path,
        root: Node<'t>,
        text: &str,
        vocabulary: &Vocabulary,
        given_model: Option<&SemanticModel>,
        given_registrations: Option<&[RegisterCall<'t>]>,
        listings: &crate::analysis::listings::Listings,
    ) -> ModuleFacts {
        let module = module_name(path, listings);
        let package = package_of(path, &module);
        let mut facts = ModuleFacts {
            path: path.to_path_buf(),
            import_root: crate::analysis::module_names::import_root(path, &module),
            module,
            ..ModuleFacts::default()
        };

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
        let mut forward_names = crate::analysis::installs::ForwardNames::default();
        let mut saved = Vec::new();
        let mut swaps: Vec<(Node<'_>, &str, Node<'_>)> = Vec::new();
        let mut returned = Vec::new();
        let mut assigned = Vec::new();
        let mut self_attributes = Vec::new();
        let mut defs: Vec<(Node<'_>, String)> = Vec::new();
        let mut class_nodes: Vec<Node<'_>> = Vec::new();
        // The matcher's scope model, where it built one; else the model is
        // built here from captures of this same walk.
        let given_model = given_model.filter(|given| !given.scopes().is_empty());
        let mut binding_captures = crate::analysis::scope_builder::BindingCaptures::default();
        let capture_names = q.combined.query.capture_names();
        // Imports, read as the matcher reads them (`imports.scm`, its
        // captures numbered as in the resolve query), in this same walk.
        let mut import_matches: Vec<Vec<tree_sitter::QueryCapture<'_>>> = Vec::new();
        crate::syntax::each_match(&q.combined.query, root, text, |pattern, captures| {
            let part = q.combined.part(pattern);
            if part == q.imports_part {
                import_matches.push(
                    captures
                        .iter()
                        .map(|c| tree_sitter::QueryCapture {
                            node: c.node,
                            index: q.as_resolve_capture[c.index as usize],
                        })
                        .collect(),
                );
            } else if part == q.bindings_part {
                if given_model.is_none() {
                    binding_captures.add(capture_names, captures);
                }
            } else if let Some(def) =
                capture(captures, q.def).or_else(|| capture(captures, q.lambda))
            {
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
                    computed_base: crate::syntax::has_computed_base(class),
                    ..ClassFacts::default()
                });
            } else if let (Some(fwd), Some(target), Some(value)) = (
                capture(captures, q.fwd),
                capture(captures, q.fwd_target),
                capture(captures, q.fwd_value),
            ) {
                // `setattr(m, name, f)`: where `name` holds "forward".
                let named = capture(captures, q.fwd_named_by)
                    .is_none_or(|name| forward_names.names_forward(name, text));
                if named {
                    replacements.push((fwd, target, value));
                }
            } else if let (Some(swap), Some(value)) =
                (capture(captures, q.swap), capture(captures, q.swap_value))
            {
                swaps.push((swap, "", value));
            } else if let (Some(ns), Some(slot), Some(value)) = (
                capture(captures, q.ns),
                capture(captures, q.ns_slot),
                capture(captures, q.ns_value),
            ) {
                swaps.push((ns, text_of(slot, text), value));
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
                let method =
                    capture(captures, q.call_attribute).and_then(crate::syntax::method_callee);
                let callee = match (capture(captures, q.call_name), method) {
                    (Some(name), _) => Callee::Name(text_of(name, text).to_owned()),
                    (None, Some((receiver, method))) => Callee::Method {
                        receiver: dotted_name(receiver, text),
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

        facts.fences =
            crate::analysis::fences::module_fences(root, text, vocabulary, &import_matches);
        let bindings = crate::analysis::fences::Bindings::collect(&import_matches, text);
        for (name, path) in &bindings.any_scope {
            facts.imports.insert(name.clone(), absolute(path, &package));
        }
        facts.star_imports = bindings
            .star
            .iter()
            .map(|module| absolute(module, &package))
            .collect();

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
        defs.sort_by_key(|(def, _)| def.start_byte());
        let left_alone_lines = crate::analysis::fences::left_alone_lines(root, text);
        let fences = facts.fences.clone();
        for (def, name) in &defs {
            by_start.insert(def.start_byte(), facts.functions.len());
            let mut fact = function_fact(
                *def,
                name.clone(),
                text,
                (&bindings, &fences),
                vocabulary,
                &functions,
                &classes,
            );
            fact.left_alone = left_alone(*def, text, &left_alone_lines);
            fact.qualname = qualnames.of(*def);
            facts.functions.push(fact);
        }
        // Effects, outer functions first: a closure's names are looked up in
        // the functions around it.
        let has_closures: std::collections::HashSet<usize> =
            facts.functions.iter().filter_map(|f| f.outer).collect();
        // A closure in a method sees the method's instance by name: the
        // nearest method around each function, found once per function.
        let mut instances: Vec<Option<Option<String>>> = vec![None; defs.len()];
        for (i, (def, _)) in defs.iter().enumerate() {
            let outer = facts.functions[i].outer;
            let functions_ref = &facts.functions;
            let by_start_ref = &by_start;
            let outer_binds = |name: &str| {
                let mut scope = outer;
                while let Some(start) = scope {
                    let Some(&o) = by_start_ref.get(&start) else {
                        return false;
                    };
                    let around = &functions_ref[o];
                    if around.parameters.iter().any(|p| p == name)
                        || around.local.locals.iter().any(|(n, _)| &**n == name)
                    {
                        return true;
                    }
                    scope = around.outer;
                }
                false
            };
            let outer_self = instance_around(&mut instances, i, functions_ref, by_start_ref);
            let context = Context {
                imports: &facts.imports,
                outer_binds: &outer_binds,
                method: facts.functions[i].is_method && !facts.functions[i].static_method,
                outer_self: outer_self.as_deref(),
                keep_locals: has_closures.contains(&def.start_byte()),
                class_method: facts.functions[i].class_method,
            };
            let local = crate::analysis::effects::local::local_facts(*def, text, &context);
            facts.functions[i].local = local;
        }
        let owner_of = |node: Node<'_>| {
            functions
                .around(node)
                .and_then(|f| by_start.get(&f.start_byte()).copied())
        };
        // Whether a call's name is the import of that name, or a name bound
        // only by what no fact follows, is asked of the scope model: the
        // matcher's, else one built here, only if a call names an import or
        // a function of the file.
        let built: std::cell::OnceCell<SemanticModel> = std::cell::OnceCell::new();
        let scope_model = || {
            given_model.unwrap_or_else(|| {
                built.get_or_init(|| SemanticModel::from_captures(root, text, &binding_captures))
            })
        };
        // Calls in the order of the text, and a method-call chain's inner
        // calls (which start where the outer ones do) first.
        calls.sort_by_key(|(call, _)| (call.start_byte(), call.end_byte()));
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
        // Asked for every call: a set, not a scan of the functions.
        let function_names: HashSet<String> =
            facts.functions.iter().map(|f| f.name.clone()).collect();
        for (call, callee, through) in calls {
            let Some(owner) = owner_of(call) else {
                continue;
            };
            let first_argument = call
                .field("arguments")
                .and_then(|a| a.named_child(0))
                .filter(|a| a.kind() != "keyword_argument")
                .map(|a| text_of(a, text).to_owned());
            let at = call.start_byte();
            let mut lookup_at = at;
            // `def wrapped(*a, _pre=pre): _pre(*a)`: a parameter whose
            // default is a bare name holds, where no argument is passed for
            // it (a forward wrapper is called with the inputs alone), what
            // that name meant where the `def` ran; that is looked up there.
            let callee = match callee {
                Callee::Name(name) => {
                    let function = &facts.functions[owner];
                    let default = function
                        .default_names
                        .iter()
                        .find(|(i, _)| function.parameters.get(*i) == Some(&name))
                        .map(|(_, default)| default.to_string())
                        .filter(|default| *default != name)
                        .filter(|_| only_a_parameter(scope_model(), &name, at));
                    match default {
                        Some(default) => {
                            lookup_at = function.start.saturating_sub(1);
                            Callee::Name(default)
                        }
                        None => Callee::Name(name),
                    }
                }
                other => other,
            };
            let not_the_import = import_named_by(&callee)
                .filter(|name| facts.imports.contains_key(*name))
                .is_some_and(|name| !scope_model().may_be_import(name, lookup_at));
            // A bare name bound here by no `def`, class or import (a
            // parameter, a loop target, a local assignment): never a function
            // of that name elsewhere (and a replay loop's own variable is
            // the point of the replay).
            let opaque = match (&callee, &through) {
                (_, Some(Through::Replayed { .. })) => false,
                (Callee::Name(name), _)
                    if facts.imports.contains_key(name)
                        || !facts.star_imports.is_empty()
                        || function_names.contains(name.as_str()) =>
                {
                    bound_by_no_definition(scope_model(), name, lookup_at)
                }
                // `Fn.apply(...)` with `Fn` a parameter, not the class.
                (
                    Callee::Method {
                        receiver: Some(receiver),
                        ..
                    },
                    Some(_),
                ) if !receiver.contains('.')
                    && (facts.imports.contains_key(receiver)
                        || facts.classes.contains_key(receiver)) =>
                {
                    bound_by_no_definition(scope_model(), receiver, lookup_at)
                }
                _ => false,
            };
            let def_scopes = match (&callee, &through) {
                (Callee::Name(name), None) if function_names.contains(name.as_str()) => {
                    def_scopes(scope_model(), name, lookup_at)
                }
                _ => None,
            };
            facts.functions[owner].calls.push(CallFact {
                callee,
                line: call.start_position().row + 1,
                start: at,
                first_argument,
                not_the_import,
                opaque,
                def_scopes,
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
        // What an installed value is where it stands.
        let installed = |value: Node<'_>, imports: &HashMap<String, String>| {
            as_bound_at(
                value_of(value, text, &by_start),
                imports,
                &scope_model,
                value.start_byte(),
            )
        };
        for (fwd, target, value) in replacements {
            let target = crate::analysis::installs::target_as_written(target, text);
            let bound = crate::analysis::installs::binds_module(&target, value, text);
            let value = installed(value, &facts.imports);
            facts.forward_replacements.push(ForwardReplacement {
                line: fwd.start_position().row + 1,
                target,
                value,
                scope: owner_of(fwd),
                bound,
            });
        }
        for (statement, slot, value) in swaps {
            let value = installed(value, &facts.imports);
            facts.swapped_classes.push(SwappedClass {
                line: statement.start_position().row + 1,
                slot: slot.to_owned(),
                value,
                scope: owner_of(statement),
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
            // `impl = A if weight_parallel else B`: the name holds either.
            for value in crate::analysis::hook_values::alternatives(value) {
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
        }
        let mut annotated_attributes: Vec<(String, String, String)> = Vec::new();
        for (name, value) in self_attributes {
            let (Some(owner), Some(class)) = (
                owner_of(name),
                class_of(name).and_then(|c| classes_by_start.get(&c.start_byte())),
            ) else {
                continue;
            };
            let value = value_of(value, text, &by_start);
            // `self.x = x` of a parameter annotated with a class: `x`'s class.
            let annotated = match &value {
                Value::Name(given) => {
                    let method = &facts.functions[owner];
                    method
                        .parameters
                        .iter()
                        .position(|p| p == given)
                        .and_then(|i| method.annotations.get(i).cloned().flatten())
                }
                _ => None,
            };
            if let Some(class) = facts.classes.get_mut(class) {
                let attr = text_of(name, text).to_owned();
                if let Some(annotated) = annotated {
                    annotated_attributes.push((class.name.clone(), attr.clone(), annotated));
                }
                class.attribute_values.push((attr, value, owner));
            }
        }

        // Registrations with torch, with the hook each is handed: the
        // register calls the matcher's scan found in this tree, else the
        // scan's own (a register call holds its registrar's name: only
        // around the scan query's anchors).
        let scanned: Vec<RegisterCall<'_>>;
        let register_calls = match given_registrations {
            Some(given) => given,
            None => {
                let compiled = vocabulary.compiled();
                let scan_ranges = vocabulary.anchor_ranges(text);
                let mut found = Vec::new();
                crate::syntax::each_match_in(
                    &compiled.scan.query,
                    root,
                    text,
                    &scan_ranges,
                    |pattern, captures| {
                        if compiled.scan.part(pattern) == 3 {
                            found.extend(crate::analysis::hook_values::register_call(
                                &compiled.registrations,
                                captures,
                            ));
                        }
                    },
                );
                scanned = found;
                &scanned
            }
        };
        for &(call, arguments, backward, _) in register_calls {
            // Backward hooks are listed, never fenced (see
            // `verdict::BACKWARD_NOT_FENCED`): one the matcher cannot
            // follow is resolved here as a backward hook, never a forward
            // one.
            let (method, hook) =
                crate::analysis::hook_values::registrar_and_hook(call, arguments, text, vocabulary);
            let Some(hook) = hook else {
                continue;
            };
            let (line, column) = line_column(call, text);
            let value = as_bound_at(
                value_of(hook, text, &by_start),
                &facts.imports,
                &scope_model,
                hook.start_byte(),
            );
            facts.registrations.push(Registration {
                line,
                column,
                value,
                scope: owner_of(call),
                registrar: method.to_owned(),
                backward,
            });
        }
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
        // Classes a constructor call tells come first.
        for (class, attr, annotated) in annotated_attributes {
            if let Some(facts) = facts.classes.get_mut(&class) {
                facts.attributes.entry(attr).or_insert(annotated);
            }
        }

        // Methods, what they (and closures inside them) store on `self`,
        // and the function each closure is nested in.
        for (index, function) in facts.functions.iter().enumerate() {
            if let Some(class) = function
                .self_class
                .as_ref()
                .and_then(|c| facts.classes.get_mut(c))
            {
                if function.is_method {
                    class.methods.push(index);
                }
                for store in &function.local.self_stores {
                    // The attribute's own value put back (moved, cast), or
                    // `None`, tells nothing of whose data it holds.
                    if !store.says_nothing {
                        let entry = class.stores.entry(store.attr.to_string()).or_insert(true);
                        *entry &= store.own;
                    }
                    let classes = class
                        .element_classes
                        .entry(store.attr.to_string())
                        .or_default();
                    for stored in &store.classes {
                        if !classes.iter().any(|c| **c == **stored) {
                            classes.push(stored.to_string());
                        }
                    }
                }
            }
            facts
                .by_name
                .entry(function.name.clone())
                .or_default()
                .entry(function.outer)
                .or_default()
                .push(index);
            if let Some(outer) = function.outer {
                facts.by_outer.entry(outer).or_default().push(index);
            }
        }
        facts.by_start = by_start;
        for (index, f) in facts.functions.iter().enumerate() {
            facts.by_place.entry((f.line, f.column)).or_insert(index);
        }
        // Kept for the whole run: what growing them left unused goes back.
        for function in &mut facts.functions {
            function.calls.shrink_to_fit();
        }
        facts.functions.shrink_to_fit();
        facts.registrations.shrink_to_fit();
        facts
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

/// The name of the instance parameter of the nearest (non-static) method
/// around function `i`, if any. `instances` memoises the answer for every
/// function asked, so a nest of n functions costs n steps in all, not the
/// square of its depth.
fn instance_around(
    instances: &mut [Option<Option<String>>],
    i: usize,
    functions: &[FunctionFact],
    by_start: &HashMap<usize, usize>,
) -> Option<String> {
    // Walk out until a method, the module, or a function already answered.
    let mut path = Vec::new();
    let mut at = i;
    let answer = loop {
        if let Some(known) = &instances[at] {
            break known.clone();
        }
        path.push(at);
        let Some(o) = functions[at]
            .outer
            .and_then(|start| by_start.get(&start).copied())
        else {
            break None;
        };
        let around = &functions[o];
        if around.is_method && !around.static_method {
            break around.parameters.first().cloned();
        }
        at = o;
    };
    for function in path {
        instances[function] = Some(answer.clone());
    }
    answer
}

mod lookup;
#[cfg(test)]
pub(crate) mod tests;
