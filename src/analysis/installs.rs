//! What a module installs on modules at run time, as facts: forward
//! replacements, classes swapped in, hook registrations.

use crate::analysis::hook_values::Value;
use crate::syntax::Field;

/// `m.forward = value` (or `setattr(m, "forward", value)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardReplacement {
    pub line: usize,
    /// The module whose forward is replaced, as written (`module`, `m.__class__`).
    pub target: String,
    pub value: Value,
    /// The function the assignment stands in, if any.
    pub scope: Option<usize>,
    /// Whether the installed function gets the module as its first
    /// argument: bound to it (`MethodType(f, m)`, `partial(f, m)`,
    /// `f.__get__(m)`) or put on a class (`Cls.forward = f`,
    /// `m.__class__.forward = f`). A plain function or a factory's closure
    /// set on an instance (`m.forward = make(m)`) is called with the
    /// inputs alone: its first parameter is an input.
    pub bound: bool,
}

/// The module expression a forward is set on, as the analysis reads it:
/// `type(m)` is `m`'s class, as `m.__class__` is (a forward set there
/// replaces the forward of every instance of that class, bound to each).
pub(crate) fn target_as_written(target: tree_sitter::Node<'_>, text: &str) -> String {
    use crate::syntax::text_of;
    // What holds `m`: the arguments of `type(m)`, or, as tree-sitter-python
    // reads `type(m).forward = f` (a type alias statement, see
    // `queries/index.scm`), the parentheses `(m)`.
    let holder = match target.kind() {
        "call"
            if target
                .field("function")
                .is_some_and(|f| text_of(f, text) == "type") =>
        {
            target.field("arguments")
        }
        "parenthesized_expression"
            if target
                .parent()
                .and_then(|attribute| attribute.parent())
                .is_some_and(|parent| parent.kind() == "type") =>
        {
            Some(target)
        }
        _ => None,
    };
    if let Some(holder) = holder
        && holder.named_child_count() == 1
        && let Some(object) = holder.named_child(0)
        && matches!(object.kind(), "identifier" | "attribute")
    {
        return format!("{}.__class__", text_of(object, text));
    }
    text_of(target, text).to_owned()
}

/// Whether the value installed at `value` as `target`'s forward gets the
/// module as its first argument (see [`ForwardReplacement::bound`]).
pub(crate) fn binds_module(target: &str, value: tree_sitter::Node<'_>, text: &str) -> bool {
    // A class by Python's conventions: CapWords (PEP 8), or `cls` as a
    // class is passed around (`cls`, `vision_cls`).
    let last = target.rsplit('.').next().unwrap_or(target);
    let on_class = target.ends_with("__class__")
        || last
            .chars()
            .find(|c| *c != '_')
            .is_some_and(char::is_uppercase)
        || last == "cls"
        || last.ends_with("_cls")
        || last.ends_with("_class");
    if on_class {
        return true;
    }
    let mut value = value;
    while value.kind() == "parenthesized_expression" {
        match value.named_child(0) {
            Some(inner) => value = inner,
            None => return false,
        }
    }
    if value.kind() != "call" {
        return false;
    }
    let Some(function) = value.field("function") else {
        return false;
    };
    let callee = crate::syntax::dotted_name(function, text).unwrap_or_default();
    let last = callee.rsplit('.').next().unwrap_or(&callee);
    let arguments = value.field("arguments");
    let first = arguments.and_then(|a| a.named_child(0));
    let arguments = arguments.map_or(0, |a| a.named_child_count());
    // `functools.wraps(old)(f)`: the function wrapped is what is installed.
    if function.kind() == "call"
        && function
            .field("function")
            .and_then(|g| crate::syntax::dotted_name(g, text))
            .is_some_and(|g| g == "wraps" || g.ends_with(".wraps"))
    {
        return first.is_some_and(|f| binds_module("", f, text));
    }
    match last {
        // `update_wrapper(f, old)`: as `f` is.
        "update_wrapper" => first.is_some_and(|f| binds_module("", f, text)),
        // `partial(f, m)`, `MethodType(f, m)`: something bound after `f`.
        "partial" | "MethodType" => arguments >= 2,
        // `f.__get__(m)`, `f.__get__(m, type(m))`.
        "__get__" => arguments >= 1,
        _ => false,
    }
}

/// What `setattr(m, name, f)`'s with a variable name ask of one file,
/// kept while its tree is at hand: the calls by the name they call (read
/// once), and the answer for each function and parameter (asked once), so
/// a file of many such calls costs one walk.
#[derive(Default)]
pub(crate) struct ForwardNames<'t> {
    calls: Option<std::collections::HashMap<&'t str, Vec<tree_sitter::Node<'t>>>>,
    answers: std::collections::HashMap<(usize, usize), bool>,
}

impl<'t> ForwardNames<'t> {
    /// Whether the variable `name`, the attribute name of
    /// `setattr(m, name, f)`, can hold `"forward"` where it stands: the
    /// target of a `for` around it over literal names one of which is
    /// `"forward"` (`for name in ("forward", "encode"): setattr(m, name,
    /// wrap(m, name))`), or a parameter of the function around it that a
    /// call in the same module passes `"forward"`, written so or through
    /// such a loop at the call (`for name in ["forward", "decode"]:
    /// patch(name)`). Any other value is not followed: a name read from a
    /// list kept elsewhere may be anything.
    pub(crate) fn names_forward(&mut self, name: tree_sitter::Node<'t>, text: &'t str) -> bool {
        use crate::syntax::{enclosing_class, enclosing_function, parameter_names, text_of};
        let variable = text_of(name, text);
        if looped_over_forward(name, variable, text) {
            return true;
        }
        let Some(function) = enclosing_function(name).filter(|f| f.kind() == "function_definition")
        else {
            return false;
        };
        let Some(position) = parameter_names(function, text)
            .iter()
            .position(|p| p == variable)
        else {
            return false;
        };
        if let Some(&known) = self.answers.get(&(function.start_byte(), position)) {
            return known;
        }
        let Some(function_name) = function.field("name").map(|n| text_of(n, text)) else {
            return false;
        };
        // A method is called with its instance bound: `self.patch(name)`.
        let method = enclosing_class(function).is_some_and(|class| {
            enclosing_function(function).is_none_or(|f| class.start_byte() > f.start_byte())
        });
        let answer = position.checked_sub(usize::from(method)).is_some_and(|at| {
            self.calls_named(function, text)
                .get(function_name)
                .into_iter()
                .flatten()
                .filter_map(|call| argument_for(*call, function_name, method, variable, at, text))
                .any(|argument| {
                    is_forward_string(argument, text)
                        || (argument.kind() == "identifier"
                            && looped_over_forward(argument, text_of(argument, text), text))
                })
        });
        self.answers
            .insert((function.start_byte(), position), answer);
        answer
    }

    /// The file's calls by the last name of what they call, read once.
    fn calls_named(
        &mut self,
        any: tree_sitter::Node<'t>,
        text: &'t str,
    ) -> &std::collections::HashMap<&'t str, Vec<tree_sitter::Node<'t>>> {
        self.calls.get_or_insert_with(|| {
            let mut root = any;
            while let Some(parent) = root.parent() {
                root = parent;
            }
            let mut calls: std::collections::HashMap<&'t str, Vec<tree_sitter::Node<'t>>> =
                std::collections::HashMap::new();
            crate::syntax::preorder(root, |node| {
                if node.kind() == "call"
                    && let Some(callee) = node.field("function")
                {
                    let last = match callee.kind() {
                        "identifier" => Some(callee),
                        "attribute" => callee.field("attribute"),
                        _ => None,
                    };
                    if let Some(last) = last {
                        calls
                            .entry(crate::syntax::text_of(last, text))
                            .or_default()
                            .push(node);
                    }
                }
            });
            calls
        })
    }
}

/// What the call `call` of `function_name` (a method: through an
/// attribute) passes for the parameter `variable` at `position`: by keyword,
/// else positionally where no splat comes before it.
fn argument_for<'t>(
    call: tree_sitter::Node<'t>,
    function_name: &str,
    method: bool,
    variable: &str,
    position: usize,
    text: &str,
) -> Option<tree_sitter::Node<'t>> {
    use crate::syntax::text_of;
    let callee = call.field("function")?;
    let named = match callee.kind() {
        "identifier" => !method && text_of(callee, text) == function_name,
        "attribute" => {
            method
                && callee
                    .field("attribute")
                    .is_some_and(|a| text_of(a, text) == function_name)
        }
        _ => false,
    };
    if !named {
        return None;
    }
    let arguments = call.field("arguments")?;
    let mut cursor = arguments.walk();
    let mut positional = Vec::new();
    let mut splat = false;
    for argument in arguments.named_children(&mut cursor) {
        match argument.kind() {
            "keyword_argument"
                if argument
                    .field("name")
                    .is_some_and(|n| text_of(n, text) == variable) =>
            {
                return argument.field("value");
            }
            "keyword_argument" | "comment" => {}
            "list_splat" | "dictionary_splat" => splat = true,
            _ if !splat => positional.push(argument),
            _ => {}
        }
    }
    positional.get(position).copied()
}

/// Whether the name `variable` at `at` is the target of a `for` around it
/// whose iterable is a literal list, tuple or set of names holding
/// `"forward"`.
fn looped_over_forward(at: tree_sitter::Node<'_>, variable: &str, text: &str) -> bool {
    let mut current = at.parent();
    while let Some(node) = current {
        if crate::syntax::is_function(node) || node.kind() == "class_definition" {
            return false;
        }
        if node.kind() == "for_statement"
            && node.field("left").is_some_and(|l| {
                l.kind() == "identifier" && crate::syntax::text_of(l, text) == variable
            })
            && let Some(right) = node.field("right")
            && matches!(right.kind(), "list" | "tuple" | "set")
        {
            let mut cursor = right.walk();
            return right
                .named_children(&mut cursor)
                .any(|item| is_forward_string(item, text));
        }
        current = node.parent();
    }
    false
}

/// Whether `node` is the plain string literal `"forward"` (any quotes; no
/// interpolation, no implicit concatenation).
fn is_forward_string(node: tree_sitter::Node<'_>, text: &str) -> bool {
    if node.kind() != "string" {
        return false;
    }
    let mut cursor = node.walk();
    let parts: Vec<tree_sitter::Node<'_>> = node.named_children(&mut cursor).collect();
    let content: Vec<&tree_sitter::Node<'_>> = parts
        .iter()
        .filter(|p| !matches!(p.kind(), "string_start" | "string_end"))
        .collect();
    matches!(content.as_slice(), [only] if only.kind() == "string_content"
        && crate::syntax::text_of(**only, text) == crate::analysis::prefilter::FORWARD)
}

/// A class swapped in (`x.__class__ = C`), or a function a class made by
/// `type(name, bases, {...})` holds where attribute reads or the forward
/// run (`{"__getattr__": f}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwappedClass {
    pub line: usize,
    /// `__getattr__`, `__getattribute__` or `forward` for a namespace
    /// entry; empty for a class swapped in (each of those it defines).
    pub slot: String,
    /// The function put there, or the class swapped in.
    pub value: Value,
    /// The function the statement stands in, if any.
    pub scope: Option<usize>,
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
    /// A backward registrar (`register_full_backward_hook`).
    pub backward: bool,
}

#[cfg(test)]
mod tests {
    use crate::syntax::Field;

    /// `target_as_written` on the target of `statement`'s forward.
    fn target_of(statement: &str) -> String {
        let tree = crate::parse::parse(statement).expect("parses");
        let mut found = None;
        let mut stack = vec![tree.root_node()];
        while let Some(node) = stack.pop() {
            if node.kind() == "attribute"
                && node
                    .field("attribute")
                    .is_some_and(|a| crate::syntax::text_of(a, statement) == "forward")
            {
                found = node.field("object");
            }
            let mut cursor = node.walk();
            stack.extend(node.named_children(&mut cursor));
        }
        super::target_as_written(found.expect("a forward set"), statement)
    }

    /// `type(m)` is `m`'s class however the parser reads the statement;
    /// parentheses around a module in an ordinary assignment are the
    /// module itself.
    #[test]
    fn a_forward_set_on_type_of_an_instance_is_set_on_its_class() {
        assert_eq!(target_of("type(m).forward = f\n"), "m.__class__");
        assert_eq!(
            target_of("x = type(self.m).forward = f\n"),
            "self.m.__class__"
        );
        assert_eq!(target_of("(m).forward = f\n"), "(m)");
        assert_eq!(target_of("m.forward = f\n"), "m");
    }

    /// `binds_module` on `target.forward = value`, as written.
    fn binds(target: &str, value: &str) -> bool {
        let text = format!("{target}.forward = {value}\n");
        let tree = crate::parse::parse(&text).expect("parses");
        let assignment = tree
            .root_node()
            .named_child(0)
            .and_then(|s| s.named_child(0))
            .expect("an assignment");
        let right = assignment.field("right").expect("a value");
        super::binds_module(target, right, &text)
    }

    #[test]
    fn bound_where_python_passes_the_module_first() {
        assert!(binds("m", "types.MethodType(f, m)"));
        assert!(binds("m", "MethodType(f, m)"));
        assert!(binds("m", "functools.partial(f, m)"));
        assert!(binds(
            "m",
            "functools.update_wrapper(functools.partial(f, m), old)"
        ));
        assert!(binds("m", "functools.wraps(old)(partial(f, m))"));
        assert!(binds("m", "f.__get__(m, type(m))"));
        assert!(binds("m", "(f.__get__(m))"));
        assert!(binds("Block", "f"));
        assert!(binds("m.__class__", "f"));
        assert!(binds("cls", "make(cls.forward)"));
        assert!(binds("vision_cls", "f"));
    }

    #[test]
    fn unbound_where_set_on_an_instance() {
        assert!(!binds("m", "f"));
        assert!(!binds("pipe.unet", "make_forward(pipe.unet)"));
        assert!(!binds("m", "functools.partial(f)"));
        assert!(!binds("m", "functools.update_wrapper(f, old)"));
        assert!(!binds("m", "lambda x: f(x)"));
        assert!(!binds("layer", "MethodType(f)"));
    }
}
