//! The values the effect analysis follows through one function: where a
//! value comes from (a parameter, a name of an enclosing function, a module
//! global, something made here), what it is known to be (a tensor of module
//! state, or an object that may be a module), and whether it is a moved or
//! cast copy rather than the value itself.
//!
//! Values are judged later, not here: "moves the parameters of its 1st
//! argument" is module state or not depending on what a caller passes there
//! (see [`super::summary`] and [`super::judge`]).

use std::sync::Arc;

/// Where a value comes from, as far as one function's text tells.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Root {
    /// The function's parameter at this index (`self` is 0 in a method).
    Param(u16),
    /// A name bound in a function around this one: a closure's capture.
    Outer(Box<str>),
    /// A module-level name or an import, as written (`_CACHE`, `torch`).
    Global(Box<str>),
    /// Made here: a tensor factory, arithmetic, a literal, a container.
    Fresh,
    /// What the call starting at this byte of the function returns: the
    /// callee's summary says (see [`super::summary`]).
    Returned(usize),
    /// Of no known origin: the result of a call the analysis cannot see into.
    Unknown,
}

/// What a value is known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// Any object: a module, a hook object, a container of them.
    Object,
    /// A tensor of module state: a parameter, a buffer, `.data`, `.weight`,
    /// an item of `parameters()` or `state_dict()`.
    Tensor,
    /// Data about a tensor, not a tensor: `.device`, `.dtype`, `.shape`,
    /// numbers and strings.
    Meta,
}

/// A copy made by `.to(...)`, `.cuda()`, `.cpu()`, `.half()`, `.pin_memory()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Copied {
    /// To a device (or of unknown target: a variable argument).
    pub device: bool,
    /// To a dtype.
    pub dtype: bool,
    /// With `non_blocking=`: an asynchronous transfer.
    pub non_blocking: bool,
    /// To pinned memory.
    pub pinned: bool,
    /// The target could not be told (`.to(dt)`, `.to(**kwargs)`): counted
    /// as a device in `device`.
    pub unknown: bool,
}

/// How a value came to be module state, for the chain a user reads: "`p`
/// comes from `module.parameters()` at 41".
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Via {
    pub text: String,
    pub line: usize,
}

/// One value an expression can have.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Val {
    pub root: Root,
    /// The first attribute taken of the root: `group` in
    /// `self.group.modules[0]`.
    pub attr: Option<Box<str>>,
    pub shape: Shape,
    pub copied: Option<Copied>,
    pub via: Option<Arc<Via>>,
    /// The class it is an instance of, as written where it was made
    /// (`Offloader` in `Offloader(p)`), where that is known.
    pub class: Option<Box<str>>,
}

impl Val {
    pub fn new(root: Root, shape: Shape) -> Val {
        Val {
            root,
            attr: None,
            shape,
            copied: None,
            via: None,
            class: None,
        }
    }

    /// What the call starting at `start` returns; an instance of `class`
    /// where the callee is one.
    pub fn returned(start: usize, class: Option<&str>) -> Val {
        Val {
            class: class.map(Into::into),
            ..Val::new(Root::Returned(start), Shape::Object)
        }
    }

    pub fn fresh() -> Val {
        Val::new(Root::Fresh, Shape::Object)
    }

    pub fn meta() -> Val {
        Val::new(Root::Fresh, Shape::Meta)
    }

    pub fn unknown() -> Val {
        Val::new(Root::Unknown, Shape::Object)
    }

    pub fn is_fresh(&self) -> bool {
        self.root == Root::Fresh
    }

    /// The value with `attr` taken (kept only where it is the first).
    pub fn attribute(mut self, attr: &str) -> Val {
        if self.attr.is_none() && !matches!(self.root, Root::Fresh | Root::Unknown) {
            self.attr = Some(attr.into());
        }
        self.class = None;
        self
    }

    pub fn shaped(mut self, shape: Shape) -> Val {
        self.shape = shape;
        self
    }

    pub fn with_via(mut self, text: String, line: usize) -> Val {
        if self.via.is_none() && !self.is_fresh() {
            self.via = Some(Arc::new(Via { text, line }));
        }
        self
    }
}

/// The values an expression can have (at most [`MOST_VALUES`], the first
/// ones kept: a name rebound in many branches is judged by its first few).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Vals(pub Vec<Val>);

pub const MOST_VALUES: usize = 4;

impl Vals {
    pub fn one(val: Val) -> Vals {
        Vals(vec![val])
    }

    pub fn fresh() -> Vals {
        Vals::one(Val::fresh())
    }

    pub fn meta() -> Vals {
        Vals::one(Val::meta())
    }

    pub fn unknown() -> Vals {
        Vals::one(Val::unknown())
    }

    pub fn add(&mut self, val: Val) {
        if self.0.len() < MOST_VALUES && !self.0.contains(&val) {
            self.0.push(val);
        }
    }

    pub fn extend(&mut self, other: Vals) {
        for val in other.0 {
            self.add(val);
        }
    }

    pub fn map(self, f: impl Fn(Val) -> Val) -> Vals {
        let mut out = Vals::default();
        for val in self.0 {
            out.add(f(val));
        }
        out
    }

    pub fn iter(&self) -> impl Iterator<Item = &Val> {
        self.0.iter()
    }

    /// Whether every value is made here (or there is none).
    pub fn all_fresh(&self) -> bool {
        self.0.iter().all(Val::is_fresh)
    }

    pub fn copied(&self) -> Option<Copied> {
        self.0.iter().find_map(|v| v.copied)
    }
}
