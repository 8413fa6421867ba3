//! One function's facts for the project, gathered while its module's tree
//! is at hand: the calls it makes, its returns and decorators, how its
//! authors fenced it, and its own effects (see
//! [`crate::analysis::effects::local`]).

use std::collections::HashMap;

use tree_sitter::Node;

use crate::analysis::effects::local::LocalFacts;
use crate::analysis::hook_values::Value;
use crate::analysis::reached::Through;
use crate::analysis::vocabulary::Vocabulary;
use crate::syntax::Field;
use crate::syntax::{Enclosing, text_of};

/// A call a function makes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// A bare callee name bound here only by what no fact follows (a
    /// parameter, its default included, a loop, `with` or `except` target, a
    /// match capture): no function of the project of that name is called.
    pub opaque: bool,
    /// For a bare callee name some `def` of the file binds: the scopes
    /// whose `def`s Python's scoping can make it mean there, each the start
    /// byte of the function whose body binds it (`None`: module level),
    /// asked of the scope model (`global`, `nonlocal`, imports and class
    /// bodies in between obeyed). `None` where not asked.
    pub def_scopes: Option<Box<[Option<usize>]>>,
    /// Not a call written here but a function reached another way
    /// (`queries/handed.scm`).
    pub through: Option<Through>,
}

impl CallFact {
    /// The class the call names as written, where it names one by
    /// Python's convention (`Gathered(ps)`, `zero.Gathered(ps)`): a
    /// capitalised last name.
    pub fn constructed_class(&self) -> Option<String> {
        let (name, last) = match &self.callee {
            Callee::Name(name) => (name.clone(), name.rsplit('.').next().unwrap_or(name)),
            Callee::Method {
                receiver: Some(receiver),
                method,
            } => (format!("{receiver}.{method}"), method.as_str()),
            Callee::Method { .. } => return None,
        };
        last.starts_with(|c: char| c.is_ascii_uppercase())
            .then(|| name.clone())
    }
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
    /// Decorated with `torch.compile` (`@torch.compile`,
    /// `@torch.compile(...)`, `@torch._dynamo.optimize(...)`): dynamo traces
    /// its body and what it calls whenever it runs, as it does a compiled
    /// module's forward.
    pub compiled: bool,
    /// The start byte of the function it is nested in, if any.
    pub outer: Option<usize>,
    pub start: usize,
    /// How its authors fenced it, if they did (`@compiler.disable`).
    pub fenced: Option<String>,
    /// A comment leaves it alone: `# hookfence: ignore` or a commented-out
    /// disable decorator where the matcher reads one for it. A run never
    /// fences it.
    pub left_alone: bool,
    /// Its calls, in the order of their start byte.
    pub calls: Vec<CallFact>,
    /// Local names whose class an assignment tells (`h = Handle(...)`).
    pub locals: HashMap<String, String>,
    pub parameters: Vec<String>,
    /// For each parameter, the class its annotation names, if one.
    pub annotations: Vec<Option<String>>,
    /// For each parameter, whether it has a default value.
    pub defaulted: Vec<bool>,
    /// The parameters whose default is a bare name, with that name.
    pub default_names: Vec<(usize, Box<str>)>,
    /// For each parameter, whether it collects the arguments left
    /// (`*args`, `**kwargs`).
    pub splats: Vec<bool>,
    /// Where keyword-only parameters follow a bare `*`: how many
    /// parameters come before it.
    pub keyword_only: Option<usize>,
    /// What its `return` statements hand back.
    pub returns: Vec<Value>,
    /// Names it binds to an original forward (`old = m.forward`).
    pub saved_forwards: Vec<String>,
    /// `name = value` in its body, in the order of the text.
    pub assigned: Vec<(String, Value)>,
    /// Decorated `@staticmethod`: no instance is bound to its first
    /// parameter.
    pub static_method: bool,
    /// Decorated `@classmethod`: the class is bound to its first parameter.
    pub class_method: bool,
    /// Its body does nothing (`pass`, `...`, a docstring, `raise
    /// NotImplementedError`, returning its own parameters): a protocol
    /// base's placeholder, which calls of it dispatch past.
    pub placeholder: bool,
    /// Its own effects and the values at its calls (see
    /// [`crate::analysis::effects::local`]).
    pub local: LocalFacts,
}

impl FunctionFact {
    /// Its calls that start at byte `start` (`f(x)(y)`: the outer and the
    /// inner call both start at `f`), found by halving: [`Self::calls`] is
    /// in the order of their start.
    pub fn calls_starting(&self, start: usize) -> &[CallFact] {
        let from = self.calls.partition_point(|c| c.start < start);
        let to = from + self.calls[from..].partition_point(|c| c.start == start);
        &self.calls[from..to]
    }
}

pub(crate) fn function_fact(
    def: Node<'_>,
    name: String,
    text: &str,
    (bindings, fences): (
        &crate::analysis::fences::Bindings,
        &std::collections::HashSet<String>,
    ),
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
            (fences.contains(&callee)
                || crate::analysis::fences::is_fence_path(&bindings.resolve(&callee), vocabulary))
            .then(|| text_of(d, text).split_whitespace().collect::<String>())
        });
    let compiled = crate::analysis::fences::decorators(def)
        .into_iter()
        .filter_map(|d| crate::analysis::fences::decorator_callee(d, text))
        .any(|callee| is_compile_path(&bindings.resolve(&callee)));
    let offset = def.start_byte();
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    FunctionFact {
        qualname: String::new(),
        name,
        line: def.start_position().row + 1,
        column: text[line_start..offset].chars().count() + 1,
        self_class: class
            .and_then(|c| c.field("name"))
            .map(|n| text_of(n, text).to_owned()),
        is_method,
        compiled,
        outer: outer.map(|f| f.start_byte()),
        start: def.start_byte(),
        fenced,
        left_alone: false,
        static_method: decorated_with(def, text, "staticmethod"),
        class_method: decorated_with(def, text, "classmethod"),
        placeholder: crate::syntax::does_nothing(def, text),
        local: LocalFacts::default(),
        calls: Vec::new(),
        locals: HashMap::new(),
        parameters: crate::syntax::parameter_names(def, text),
        annotations: crate::syntax::parameter_annotations(def, text),
        defaulted: crate::syntax::parameter_defaults(def),
        default_names: crate::syntax::parameter_default_names(def, text),
        splats: crate::syntax::parameter_splats(def),
        keyword_only: crate::syntax::keyword_only_from(def),
        returns: Vec::new(),
        saved_forwards: Vec::new(),
        assigned: Vec::new(),
    }
}

/// Whether a comment on one of `lines` (see
/// [`crate::analysis::fences::left_alone_lines`]) leaves `def` alone.
pub(crate) fn left_alone(
    def: Node<'_>,
    text: &str,
    lines: &std::collections::HashSet<usize>,
) -> bool {
    !lines.is_empty() && {
        let speaking = match def.kind() {
            // A lambda is left alone from its own line or the line above.
            "lambda" => vec![def.start_position().row + 1, def.start_position().row],
            _ => crate::analysis::fences::lines_speaking_for(def, text),
        };
        speaking.iter().any(|line| lines.contains(line))
    }
}

/// Whether the dotted path (imports resolved) is torch's compiler entry
/// point: `torch.compile`, or dynamo's older `torch._dynamo.optimize`.
pub(crate) fn is_compile_path(path: &str) -> bool {
    matches!(path, "torch.compile" | "torch._dynamo.optimize")
}

/// Whether `def` carries the decorator `@name` (bare).
fn decorated_with(def: Node<'_>, text: &str, name: &str) -> bool {
    crate::analysis::fences::decorators(def)
        .into_iter()
        .any(|d| text_of(d, text).trim_start_matches('@').trim() == name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn the_calls_starting_at_a_byte_are_every_call_there_and_no_other() {
        let text = "def f(m):\n    g(m)\n    h(m).to(m)\n    k = h(m)\n    h(m)\n";
        let facts = crate::analysis::module_facts::tests::facts_of(text);
        let function = facts.functions.iter().find(|f| f.name == "f").unwrap();
        let starts: Vec<usize> = function.calls.iter().map(|c| c.start).collect();
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        assert_eq!(starts, sorted, "calls are in the order of their start");
        let at = |needle: &str| text.find(needle).unwrap();
        // `h(m).to(m)`: the outer call and the inner one start at `h`.
        assert_eq!(function.calls_starting(at("h(m).to")).len(), 2);
        assert_eq!(function.calls_starting(at("g(m)")).len(), 1);
        assert_eq!(
            function.calls_starting(text.rfind("h(m)").unwrap()).len(),
            1
        );
        // A byte where no call starts, and one past every call.
        assert!(function.calls_starting(at("k =")).is_empty());
        assert!(function.calls_starting(text.len()).is_empty());
    }
}
