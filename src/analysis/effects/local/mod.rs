//! One function's own effects, read from its body in one walk: which values
//! it moves, casts, frees, swaps, gathers or waits on (each named by where
//! the value comes from, [`Val`]), what its receiver and arguments are at
//! every call it makes, what it stores on `self`, and what its locals hold
//! for the closures inside it. Plain data: no tree is kept.
//!
//! What torch does decides what is an effect, not names:
//! - `module.to(d)`, `.cuda()`, `.cpu()`, `.half()` on an object move it in
//!   place (a module); on a tensor they return a copy, which is an effect
//!   only where it is stored back into module state (`p.data = p.data.to(d)`,
//!   `module._parameters[k] = ...`, `self.w = self.w.to(d)`) or handed to an
//!   asynchronous transfer (`non_blocking=True`, pinned memory). A copy bound
//!   to a local (`w = self.weight.to(x.device)`) is ordinary compute.
//! - `.data =`, `set_`, `untyped_storage().resize_` swap, free or allocate a
//!   tensor's storage; `copy_` into a tensor from another device is a
//!   transfer, a same-device `copy_` (a KV cache) is not.
//! - collectives, waits on their handles, stream and event waits,
//!   `synchronize()` and RNG changes, through [`super::models`].

use std::collections::HashMap;

use tree_sitter::Node;

use crate::analysis::effects::models::{self};
use crate::analysis::effects::value::{Root, Shape, Val, Vals};
use crate::syntax::Field;
use crate::syntax::text_of;

mod calls;
mod copies;
mod env;
mod expr;
mod flow;
mod loops;
mod self_state;
mod store;

/// What an effect does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Moves module state to another device.
    Move,
    /// Casts module state to another dtype in place.
    Cast,
    /// Points module state at other storage (`.data =`, `set_`).
    Swap,
    /// Frees or allocates storage (`untyped_storage().resize_`).
    Storage,
    /// Copies into a tensor from another device or pinned memory.
    CopyIn,
    /// Gathers, broadcasts or scatters tensors across ranks.
    Collective,
    /// Waits for an asynchronous collective or a future.
    Wait,
    /// Orders streams or keeps a tensor alive on one.
    Stream,
    /// Waits for the device.
    Sync,
    /// Changes RNG state.
    Rng,
    /// Runs other hooks' `pre_forward` / `post_forward`.
    Delegate,
    /// Drops what an attribute of the object keeps (`del self.x[k]`,
    /// `self.x.pop(k)`, `self.x[k] = None`): weight work only where its
    /// class keeps gathered or moved copies of module state there (see
    /// `ProjectIndex::keeps_copies`).
    Release,
}

impl Kind {
    /// The name the JSON output and `--explain` use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Move => "move",
            Kind::Cast => "cast",
            Kind::Swap => "swap",
            Kind::Storage => "storage",
            Kind::CopyIn => "copy",
            Kind::Collective => "collective",
            Kind::Wait => "wait",
            Kind::Stream => "stream",
            Kind::Sync => "sync",
            Kind::Rng => "rng",
            Kind::Delegate => "delegate",
            Kind::Release => "release",
        }
    }

    /// Effects on the device as a whole, not on one value.
    pub fn device_wide(self) -> bool {
        matches!(self, Kind::Sync | Kind::Rng | Kind::Delegate)
    }

    /// Ordering streams, waiting, or changing RNG state: no weight work of
    /// its own in a `backward`, where what it orders may be the gradients'.
    pub fn orders_or_waits(self) -> bool {
        matches!(self, Kind::Stream | Kind::Sync | Kind::Wait | Kind::Rng)
    }
}

/// One effect (or a sign that is none, with the reason) in a function's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEffect {
    pub kind: Kind,
    pub line: usize,
    /// What it does, in words: "moves `module` to a device via .to(...)".
    pub detail: String,
    /// The value it acts on; `None` for the device as a whole.
    pub on: Option<Val>,
    /// Why it is no effect on module state, when that is clear here.
    pub discount: Option<String>,
    /// What the value acted on must be for this to act on module state.
    pub acts: Acts,
    /// A swap whose new storage is what the call starting here returns
    /// (`p.data = p.ca_attr.payload()`): an effect only where that is
    /// storage held somewhere, as the callee's summary tells.
    pub source: Option<usize>,
}

/// What an effect's value must be for the effect to touch module state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Acts {
    /// Acts in place on an object that is a module if it is anything
    /// (`m.to(d)` as a statement, `m.unshard()`): module state whatever
    /// gave the object.
    Object,
    /// Acts on a tensor (a collective's argument, `.data =`, a storage):
    /// module state only where the tensor comes from the module.
    #[default]
    Tensor,
    /// `x = x.to(d)`: a module moved in place if `x` is the module, a
    /// tensor's copy rebound otherwise.
    Rebound,
    /// `future.result()`: waits for the job the future stands for, which
    /// acts on module state only where the object keeps there the future
    /// of a job that does (see `ProjectIndex::awaited_jobs`).
    Job,
}

/// One store into `self.<attr>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfStore {
    pub attr: Box<str>,
    /// What was stored was made here (the object's own data): a tensor it
    /// created, a literal, a container, or the attribute's own value again.
    pub own: bool,
    /// What was stored tells nothing of whose data the attribute holds:
    /// only the attribute's own value again (`self.bias =
    /// self.bias.to(x.dtype)`), or `None` (`self.weight = None` in
    /// `__init__`: a place kept for what is set later).
    pub says_nothing: bool,
    /// The classes of the instances stored, where they were made by a
    /// class's call (`self.offloaders[k] = Offloader(p)`).
    pub classes: Vec<Box<str>>,
    /// What was stored, in the method's terms (`params` of `__init__`).
    pub vals: Vals,
}

/// The receiver and arguments of one call.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CallValues {
    pub start: usize,
    pub receiver: Option<Vals>,
    pub positional: Vec<Vals>,
    pub keywords: Vec<(Box<str>, Vals)>,
    /// `*args` or `**kwargs` among the arguments: positions after it are
    /// unknown.
    pub splat: bool,
    /// What the `*args` and `**kwargs` among the arguments spread (kept
    /// boxed: most calls spread nothing).
    pub splatted: Option<Box<Vals>>,
    /// The positional arguments after a `*args` (`f(*xs, a, b)`): they bind
    /// the callee's last parameters where it takes a fixed number.
    pub after_splat: Vec<Vals>,
    /// A `functools.partial(f, *bound)`: its value calls `f` with these
    /// arguments first.
    pub partial: bool,
    /// Its value is entered (`with f():`) or iterated (`for x in f():`)
    /// here, so a generator it calls runs.
    pub entered: bool,
    /// The arguments written as a bare name (`helper(m, Fn, run_later)`),
    /// by position or keyword: where a function or class is handed on by
    /// name, a callee that calls or applies that parameter runs it.
    pub names: Box<[ArgumentName]>,
}

/// An argument written as a bare name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ArgumentName {
    /// Its position among the positional arguments, or its keyword.
    pub at: ArgumentAt,
    pub name: Box<str>,
}

/// Where an argument is written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ArgumentAt {
    Position(usize),
    Keyword(Box<str>),
}

impl CallValues {
    /// The name written as the argument at `at`, if it is a bare name.
    pub fn name_at(&self, at: &ArgumentAt) -> Option<&str> {
        self.names.iter().find(|n| n.at == *at).map(|n| &*n.name)
    }
}

/// One function's facts for the effect analysis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalFacts {
    pub effects: Vec<LocalEffect>,
    /// Copies of a tensor it did not make, taken to a device for one use
    /// (`w = self.weight.to(x.device)`, `F.linear(x, layer.bias.cuda())`):
    /// compute dynamo traces, kept apart from `effects` (no hook's verdict
    /// reads them); only a leaf layer's own forward is judged by them, where
    /// the tensor is its own weight (see `ProjectIndex::layer_transfers`).
    pub staged: Vec<LocalEffect>,
    /// By start byte, in order.
    pub calls: Vec<CallValues>,
    /// `self.<attr>` set (or filled: `append`, `[k] =`) here.
    pub self_stores: Vec<SelfStore>,
    /// What its locals hold, for the functions nested in it.
    pub locals: Vec<(Box<str>, Vals)>,
    /// What its `return` statements (a lambda's body) hand back.
    pub returns: Vals,
    /// `ctx.<attr> = ...` where `ctx` is the first parameter of a function
    /// that is no method (a custom autograd Function's `forward` saving
    /// what its `backward` reads): what each attribute was given.
    pub first_param_stores: Vec<(Box<str>, Vals)>,
    /// A `return` hands back new storage (`torch.empty(0, ...)`).
    pub returns_storage: bool,
    /// A `return` hands back a moved or cast copy of a value it did not
    /// make (`return t.to(device)`, `return weight, bias` after `weight =
    /// layer.weight.to(...)`, a tensor filled from one): it brings a tensor
    /// over for its caller rather than computing with it.
    pub returns_copy: bool,
    /// Its body yields: calling it runs none of it (a generator, or the
    /// function under `@contextmanager`); only iterating or entering the
    /// result does.
    pub generator: bool,
    /// It reads a clock, a timer or the allocator's memory statistics: a
    /// sync next to such a call (here or in a caller) measures, it does not
    /// wait for a transfer.
    pub measures: bool,
}

impl LocalFacts {
    pub fn call_at(&self, start: usize) -> Option<&CallValues> {
        self.calls
            .binary_search_by_key(&start, |c| c.start)
            .ok()
            .map(|i| &self.calls[i])
    }
}

/// What the walk needs to know of the function's surroundings.
pub struct Context<'a> {
    /// Bound name -> absolute dotted path, for the module's imports.
    pub imports: &'a HashMap<String, String>,
    /// Whether a function around this one binds the name.
    pub outer_binds: &'a dyn Fn(&str) -> bool,
    /// Whether the function is a method whose first parameter is the
    /// instance.
    pub method: bool,
    /// In a closure inside a method: the name the method's instance has
    /// there (`self`), seen by the closure.
    pub outer_self: Option<&'a str>,
    /// Keep the locals (the function has closures).
    pub keep_locals: bool,
    /// A `@classmethod`: its first parameter is the class, and an instance
    /// it makes (`self = cls()`) is one of the class's own.
    pub class_method: bool,
}

/// Deepest expression nesting followed; deeper is of unknown value.
pub(super) const MOST_DEPTH: usize = 200;

/// Reads the effects of `function` (a `def` or `lambda`).
pub fn local_facts(function: Node<'_>, text: &str, context: &Context<'_>) -> LocalFacts {
    let params = crate::syntax::parameter_names(function, text);
    let mut walker = Walker {
        text,
        function,
        params,
        context,
        env: env::Env::default(),
        assigning: false,
        facts: LocalFacts::default(),
        depth: 0,
        timing: None,
        storage_held: Vec::new(),
        filled: Vec::new(),
        self_aliases: Vec::new(),
        instances: Vec::new(),
        loops: loops::Loops::of(function),
    };
    if let Some(body) = function.field("body") {
        if function.kind() == "lambda" {
            walker.facts.returns_storage = walker.frees_storage(body);
            let vals = walker.eval(body);
            walker.facts.returns.extend(vals);
        } else {
            walker.block(body);
        }
    }
    let mut facts = walker.facts;
    facts.calls.sort_by_key(|c| c.start);
    facts.calls.dedup_by_key(|c| c.start);
    if context.keep_locals {
        let mut locals: Vec<(Box<str>, Vals)> = walker
            .env
            .into_locals()
            .into_iter()
            .map(|(name, vals)| (name.into_boxed_str(), vals))
            .collect();
        for (i, name) in walker.params.iter().enumerate() {
            if !locals.iter().any(|(n, _)| **n == **name) {
                locals.push((
                    name.clone().into_boxed_str(),
                    Vals::one(Val::new(Root::Param(i as u16), Shape::Object)),
                ));
            }
        }
        facts.locals = locals;
    }
    facts.shrink();
    facts
}

impl LocalFacts {
    /// Gives back what the walk's growth left unused: the facts are kept
    /// for the whole run.
    fn shrink(&mut self) {
        fn shrink_vals(vals: &mut Vals) {
            vals.0.shrink_to_fit();
        }
        self.effects.shrink_to_fit();
        self.staged.shrink_to_fit();
        for call in &mut self.calls {
            if let Some(receiver) = &mut call.receiver {
                shrink_vals(receiver);
            }
            call.positional.iter_mut().for_each(shrink_vals);
            call.positional.shrink_to_fit();
            call.keywords.iter_mut().for_each(|(_, v)| shrink_vals(v));
            call.keywords.shrink_to_fit();
            call.after_splat.iter_mut().for_each(shrink_vals);
            call.after_splat.shrink_to_fit();
        }
        self.calls.shrink_to_fit();
        self.self_stores.shrink_to_fit();
        self.locals.iter_mut().for_each(|(_, v)| shrink_vals(v));
        self.locals.shrink_to_fit();
        shrink_vals(&mut self.returns);
        self.first_param_stores
            .iter_mut()
            .for_each(|(_, v)| shrink_vals(v));
        self.first_param_stores.shrink_to_fit();
    }
}

struct Walker<'a, 't> {
    text: &'a str,
    function: Node<'t>,
    params: Vec<String>,
    context: &'a Context<'a>,
    env: env::Env,
    /// Whether the names being stored are a plain assignment's targets
    /// (see [`env::Env::assign`]).
    assigning: bool,
    facts: LocalFacts,
    depth: usize,
    /// Whether the function times itself or reads memory statistics (asked
    /// once, when a sync is met).
    timing: Option<Option<&'static str>>,
    /// Names given new storage here (`buf = torch.empty(0)`,
    /// `CACHE[key] = torch.empty(0)`): returning them returns that storage.
    storage_held: Vec<String>,
    /// Names of tensors made here and filled from one it did not make
    /// (`r = torch.empty_like(w, device=d); r.copy_(w, non_blocking=True)`):
    /// returning them hands back a copy (see [`LocalFacts::returns_copy`]).
    filled: Vec<String>,
    /// Local names of containers kept in an attribute of `self` too
    /// (`blocks = []; self.blocks[k] = blocks`), with that attribute:
    /// filling the name fills the attribute (the same object).
    self_aliases: Vec<(String, String)>,
    /// Local names bound to an instance a class method makes of its own
    /// class (`self = cls()`): what it stores on them, it stores on an
    /// object of its class.
    instances: Vec<String>,
    /// What a loop's next iteration brings in (see `flow.rs`).
    loops: loops::Loops,
}

impl<'t> Walker<'_, 't> {
    fn line(node: Node<'_>) -> usize {
        node.start_position().row + 1
    }

    fn spelled(&self, node: Node<'_>) -> String {
        crate::syntax::short(text_of(node, self.text))
    }

    fn effect(&mut self, kind: Kind, node: Node<'_>, detail: String, on: Option<Val>) {
        let discount = match &on {
            Some(val) if val.is_fresh() => Some(format!(
                "`{}` is made here: {} acts on no module state",
                self.root_spelling(node),
                kind.name()
            )),
            _ => None,
        };
        self.facts.effects.push(LocalEffect {
            kind,
            line: Self::line(node),
            detail,
            on,
            discount,
            acts: Acts::Tensor,
            source: None,
        });
    }

    fn discount(
        &mut self,
        kind: Kind,
        node: Node<'_>,
        detail: String,
        on: Option<Val>,
        why: String,
    ) {
        self.facts.effects.push(LocalEffect {
            kind,
            line: Self::line(node),
            detail,
            on,
            discount: Some(why),
            acts: Acts::Tensor,
            source: None,
        });
    }

    /// The leftmost name of an expression, for messages.
    pub(super) fn root_spelling(&self, node: Node<'_>) -> String {
        crate::syntax::root_name(node, self.text).map_or_else(|| self.spelled(node), str::to_owned)
    }

    // -- statements ---------------------------------------------------------

    fn block(&mut self, block: Node<'t>) {
        let mut cursor = block.walk();
        let children: Vec<Node<'t>> = block.named_children(&mut cursor).collect();
        for statement in children {
            self.statement(statement);
        }
    }

    fn statement(&mut self, node: Node<'t>) {
        match node.kind() {
            "expression_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "assignment" => self.assignment(child),
                        "augmented_assignment" => self.augmented(child),
                        "call" => {
                            // `self.x.pop(k)`, `self.x.clear()` as a
                            // statement: what `self.x` kept is dropped.
                            if let Some(callee) = child.field("function")
                                && callee.kind() == "attribute"
                                && let Some(method) = callee.field("attribute")
                                && let dropping @ ("pop" | "clear" | "popitem") =
                                    text_of(method, self.text)
                                && let Some(object) = callee.field("object")
                            {
                                self.released(object, &format!("`.{dropping}(...)`"));
                            }
                            self.call(child, true);
                        }
                        _ => {
                            self.eval(child);
                        }
                    }
                }
            }
            "delete_statement" => {
                let mut cursor = node.walk();
                let targets: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for target in targets {
                    let parts: Vec<Node<'t>> = if target.kind() == "expression_list" {
                        let mut inner = target.walk();
                        target.named_children(&mut inner).collect()
                    } else {
                        vec![target]
                    };
                    for part in parts {
                        self.released(part, "`del`");
                    }
                }
            }
            "return_statement" => {
                if let Some(value) = node.named_child(0) {
                    self.facts.returns_storage |= self.frees_storage(value)
                        || held_name(value, self.text)
                            .is_some_and(|name| self.storage_held.iter().any(|h| h == name));
                    let vals = self.eval(value);
                    self.facts.returns_copy |= vals.iter().any(|v| {
                        v.copied.is_some()
                            && v.shape != Shape::Meta
                            && matches!(v.root, Root::Param(_) | Root::Outer(_) | Root::Global(_))
                    }) || self.returns_filled(value);
                    self.facts.returns.extend(vals);
                }
            }
            "for_statement" => {
                let right = node.field("right");
                let items = right.map(|r| self.eval(r)).unwrap_or_default();
                if let Some(right) = right {
                    self.entered(right);
                }
                if let Some(left) = node.field("left") {
                    self.bind_items(left, items);
                }
                self.in_loop(node, |walker| {
                    for field in ["body", "alternative"] {
                        if let Some(body) = node.field(field) {
                            walker.nested(body);
                        }
                    }
                });
            }
            "with_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "with_clause" => self.with_clause(child),
                        // Its context manager may swallow an exception.
                        "block" => self.partially(true, |walker| walker.block(child)),
                        _ => {}
                    }
                }
            }
            "function_definition" | "class_definition" => {
                if let Some(name) = node.field("name") {
                    let name = text_of(name, self.text).to_owned();
                    self.env.set(name, Vals::fresh());
                }
            }
            "decorated_definition" => {
                if let Some(definition) = node.field("definition") {
                    self.statement(definition);
                }
            }
            "import_statement" | "import_from_statement" | "future_import_statement" => {
                self.local_import(node);
            }
            // An `except` block may start after any statement of the body.
            "try_statement" => self.partially(true, |walker| walker.nested(node)),
            "while_statement" => {
                self.in_loop(node, |walker| walker.nested(node));
            }
            "global_statement" | "nonlocal_statement" | "pass_statement" | "break_statement"
            | "continue_statement" | "comment" => {}
            _ => self.nested(node),
        }
    }

    /// A compound statement's parts: blocks walked, conditions evaluated.
    fn nested(&mut self, node: Node<'t>) {
        if node.kind() == "block" {
            self.arm(node);
            return;
        }
        let mut cursor = node.walk();
        let children: Vec<Node<'t>> = node.named_children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "block" => self.arm(child),
                "elif_clause"
                | "else_clause"
                | "except_clause"
                | "finally_clause"
                | "case_clause"
                | "except_group_clause" => self.nested(child),
                k if k.ends_with("_statement") => self.statement(child),
                "comment" => {}
                _ => {
                    self.eval(child);
                }
            }
        }
    }

    fn with_clause(&mut self, clause: Node<'t>) {
        let mut cursor = clause.walk();
        let items: Vec<Node<'t>> = clause.named_children(&mut cursor).collect();
        for item in items {
            let Some(value) = item.field("value") else {
                continue;
            };
            if value.kind() == "as_pattern" {
                let entered = value.named_child(0);
                let vals = entered.map(|v| self.eval(v)).unwrap_or_default();
                if let Some(entered) = entered {
                    self.entered(entered);
                }
                if let Some(alias) = value.field("alias") {
                    self.bind(alias, vals);
                }
            } else {
                self.eval(value);
                self.entered(value);
            }
        }
    }

    /// Marks the call `node` (if it is one) as entered or iterated.
    fn entered(&mut self, node: Node<'t>) {
        let node = match node.kind() {
            "parenthesized_expression" | "await" => match node.named_child(0) {
                Some(inner) => inner,
                None => return,
            },
            _ => node,
        };
        if node.kind() != "call" {
            return;
        }
        let start = node.start_byte();
        if let Some(values) = self.facts.calls.iter_mut().rev().find(|c| c.start == start) {
            values.entered = true;
        }
    }

    fn local_import(&mut self, node: Node<'t>) {
        // `import torch.distributed as dist` inside the function.
        let text = self.text;
        let module = node
            .field("module_name")
            .map(|m| crate::syntax::strip_space(text_of(m, text)));
        let mut cursor = node.walk();
        for name in node.children_by_field_name("name", &mut cursor) {
            let (dotted, alias) = match name.kind() {
                "aliased_import" => (name.field("name"), name.field("alias")),
                _ => (Some(name), None),
            };
            let Some(dotted) = dotted else { continue };
            let dotted = crate::syntax::strip_space(text_of(dotted, text));
            let full = match &module {
                Some(module) => format!("{module}.{dotted}"),
                None => dotted.clone(),
            };
            let bound = match alias {
                Some(alias) => text_of(alias, text).to_owned(),
                None if module.is_none() => dotted.split('.').next().unwrap_or("").to_owned(),
                None => dotted.clone(),
            };
            let path = if alias.is_none() && module.is_none() {
                bound.clone()
            } else {
                full
            };
            self.env.set(
                bound,
                Vals::one(Val::new(Root::Global(path.into()), Shape::Object)),
            );
        }
    }

    fn assignment(&mut self, node: Node<'t>) {
        let Some(right) = node.field("right") else {
            return;
        };
        // A name (or a cache) given empty storage holds it until it is
        // given anything else.
        if let Some(name) = node.field("left").and_then(|l| held_name(l, self.text)) {
            if self.frees_storage(right) {
                self.storage_held.push(name.to_owned());
            } else {
                self.storage_held.retain(|held| held != name);
            }
        }
        let vals = if right.kind() == "assignment" {
            self.assignment(right);
            right
                .field("left")
                .map(|l| self.eval(l))
                .unwrap_or_default()
        } else {
            self.eval(right)
        };
        if let Some(left) = node.field("left") {
            let assigning = std::mem::replace(&mut self.assigning, true);
            self.store(left, vals, Some(right));
            self.assigning = assigning;
        }
    }

    fn augmented(&mut self, node: Node<'t>) {
        if let Some(right) = node.field("right") {
            self.eval(right);
        }
        if let Some(left) = node.field("left") {
            self.eval(left);
            // `self.total += x`: the object's own data, computed.
            if let Some(attr) = self.self_attribute(left) {
                self.self_store(attr, &Vals::fresh());
            }
        }
    }
}

/// Whether a callee's name says it is a class (`Offloader`, `mod.Hook`):
/// PEP 8's CapWords, not a CONSTANT.
pub(super) fn names_a_class(dotted: &str) -> bool {
    let last = dotted.rsplit('.').next().unwrap_or(dotted);
    last.starts_with(|c: char| c.is_ascii_uppercase())
        && last.chars().any(|c| c.is_ascii_lowercase())
}

impl Walker<'_, '_> {
    /// Whether `node` makes empty storage with torch (`torch.empty(0)`,
    /// `torch.zeros((0,), ...)`): stored into a weight's `.data`, it frees
    /// the weight's storage.
    fn frees_storage(&self, node: Node<'_>) -> bool {
        if node.kind() != "call" {
            return false;
        }
        let made_by_torch = node
            .field("function")
            .and_then(|f| self.library_path(f))
            .is_some_and(|path| {
                matches!(
                    path.as_str(),
                    "torch.empty" | "torch.zeros" | "torch.empty_strided"
                )
            });
        let size = node.field("arguments").and_then(|a| a.named_child(0));
        let zero = |n: Node<'_>| n.kind() == "integer" && text_of(n, self.text) == "0";
        made_by_torch
            && size.is_some_and(|size| {
                zero(size)
                    || (matches!(size.kind(), "tuple" | "list") && {
                        let mut cursor = size.walk();
                        size.named_children(&mut cursor).any(zero)
                    })
            })
    }
}

/// The name a place or a value is held under: `buf`, `CACHE` of
/// `CACHE[key]`.
fn held_name<'a>(node: Node<'_>, text: &'a str) -> Option<&'a str> {
    match node.kind() {
        "identifier" => Some(text_of(node, text)),
        "subscript" => node
            .field("value")
            .filter(|v| v.kind() == "identifier")
            .map(|v| text_of(v, text)),
        _ => None,
    }
}

/// Whether `node` is a call of a storage factory (`torch.empty(0)`).
pub(super) fn allocates_storage(node: Node<'_>, text: &str) -> bool {
    node.kind() == "call"
        && node
            .field("function")
            .and_then(|f| crate::syntax::dotted_name(f, text))
            .is_some_and(|d| {
                let last = d.rsplit('.').next().unwrap_or(&d);
                models::STORAGE_FACTORIES.contains(&last)
            })
}

pub(super) fn string_content(node: Node<'_>, text: &str) -> String {
    text_of(node, text)
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .trim_matches(|c| c == '"' || c == '\'')
        .to_owned()
}
