//! One file's facts, as the matcher hands them on: its classes, every hook
//! candidate (a protocol method or a function handed to a register call)
//! with how it is fenced and where a fence would go, the register calls it
//! could not follow, and where imports go. Plain data: no tree.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::scope::{ScopeId, SemanticModel};
use crate::error::Position;

/// A class statement, for the cross-file class index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassFact {
    pub name: String,
    /// Bases as written, dotted (`accelerate.hooks.ModelHook`).
    pub bases: Vec<String>,
}

/// The classes that derive from one of `roots`, directly or through other
/// classes of `classes` (each a name and its bases, read by their last
/// dotted name): one walk down the subclass links, each class once. A root
/// is in the answer only where it derives from a root itself.
pub fn subclasses_of<'a>(
    classes: impl IntoIterator<Item = (&'a str, &'a [String])>,
    roots: &[&str],
) -> HashSet<&'a str> {
    let mut derived: HashMap<&str, Vec<&'a str>> = HashMap::new();
    for (name, bases) in classes {
        for base in bases {
            derived
                .entry(base.rsplit('.').next().unwrap_or(base))
                .or_default()
                .push(name);
        }
    }
    let mut found: HashSet<&'a str> = HashSet::new();
    let mut pending: Vec<&str> = roots.to_vec();
    while let Some(name) = pending.pop() {
        for &child in derived.get(name).into_iter().flatten() {
            if found.insert(child) {
                pending.push(child);
            }
        }
    }
    found
}

/// How a candidate is already fenced, if it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FenceState {
    Unfenced,
    /// Fenced; `how` says how (`@torch.compiler.disable()`), `by` what
    /// fences it, as a check at run time must look for it.
    Fenced {
        how: String,
        by: FencedBy,
    },
    /// A commented-out disable decorator stands right above it.
    OptedOut {
        line: usize,
    },
    /// `# hookfence: ignore[reason]` on its line or right above.
    Suppressed {
        line: usize,
        reason: Option<String>,
    },
}

/// Where a fence goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A `def`: a decorator line inserted at `insert_at` (a line start).
    Def {
        insert_at: usize,
        indent: String,
        line_ending: &'static str,
    },
    /// A lambda, wrapped in place. `comment_at` is the line start where a
    /// comment about it can stand (its own line's, or the nearest above
    /// that is not inside a string or after a backslash continuation).
    Lambda {
        start: usize,
        end: usize,
        comment_at: usize,
    },
}

/// The class a protocol method is defined in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub class: String,
    pub bases: Vec<String>,
}

/// What fences a function that is fenced already: what the guard
/// (`--emit-pytest`) checks at run time, so that it passes exactly where
/// `--check` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FencedBy {
    /// torch's disable: the function bound at the hook's name carries
    /// dynamo's marker.
    Torch,
    /// The wrap strategy's helper (`no_compile`), which calls torch's
    /// disable and records the hook: the marker, and the helper module's
    /// audit. `path` is the import path the file binds it to (relative as
    /// written: `._no_compile.no_compile`).
    Helper { path: String },
    /// A function of the project that fences what it is given, at once or
    /// on the first call (accelerate's lazy `_compiler_disable`), or a
    /// configured spelling: `path` is the import path the file binds it to
    /// (relative as written), or, when `local`, the name of a module-level
    /// function of the file itself.
    Wrapper { path: String, local: bool },
}

/// Where a fence of a candidate is evaluated: the scope its decorator (or
/// the call around its lambda) runs in, and the offset there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceAt {
    pub scope: ScopeId,
    pub at: usize,
}

/// A function that may be an offload hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Python's `__qualname__` (`CpuOffload.pre_forward`, `attach.<locals>.hook`).
    pub qualname: String,
    /// Position of the `def` (or `lambda`) keyword.
    pub at: Position,
    /// Byte range of the whole definition, decorators included.
    pub span: (usize, usize),
    /// Set for `pre_forward`/`post_forward` defined in a class body.
    pub owner: Option<Owner>,
    /// Where it is handed to a register call, if it is.
    pub registered_at: Option<Position>,
    /// Why it is a hook when it was found by use: what calls it around the
    /// original forward (see [`crate::found::Discovered`]).
    pub discovered: Option<crate::found::Found>,
    /// Whether its body does nothing: `pass`, `...`, a docstring, or returns
    /// its own parameters (a protocol base's pass-through).
    pub trivial: bool,
    /// The backward registrar (`register_full_backward_hook`, ...) it is
    /// handed to, when every register call that takes it is a backward one.
    pub backward: Option<String>,
    /// The backward or tensor registrar of the register call where it is
    /// registered first (`registered_at`), if that one is such; said in
    /// its reasons even where a forward finding makes it a forward hook.
    pub registered_with: Option<String>,
    /// Whether every register call that takes it is a tensor or autograd
    /// one (`t.register_hook(f)`): torch hands it gradients, never the
    /// module (see [`crate::analysis::effects::judge::tensor_hook_roles`]).
    pub tensor_hook: bool,
    /// Of an unfenced `def`, its decorators whose name an import binds:
    /// the callee as written and the decorator's text. One may be a fence
    /// another module of the project defines (see
    /// [`crate::analysis::project::ProjectIndex::imported_fence`]).
    pub imported_decorators: Vec<(String, String)>,
    pub fence: FenceState,
    pub target: Target,
    /// Where its fence would be evaluated (see [`FileFacts::model`]).
    pub fence_at: FenceAt,
    /// The signs in its own body, counted or discounted (see
    /// [`crate::analysis::evidence`]).
    pub signs: Vec<crate::analysis::evidence::Sign>,
}

impl Candidate {
    /// The first sign in its own body that counts as offload work.
    pub fn own_evidence(&self) -> Option<&crate::analysis::evidence::Sign> {
        self.signs.iter().find(|s| s.counts())
    }

    /// Where torch calls it only as a tensor or autograd hook (no protocol
    /// method, nothing found by use, every register call a tensor one):
    /// the registrar, which tells what torch hands it (never the module).
    pub fn autograd_registrar(&self) -> Option<&str> {
        if !self.tensor_hook || self.owner.is_some() || self.discovered.is_some() {
            return None;
        }
        self.backward.as_deref()
    }
}

impl Candidate {
    /// A register call takes it: the first one is where it is registered
    /// (the first forward one, where there is one), and it stays a backward
    /// hook only while every one is backward, a tensor hook only while
    /// every one is a tensor one.
    pub(super) fn note_registration(
        &mut self,
        at: Position,
        backward: Option<String>,
        tensor: bool,
    ) {
        if self.registered_at.is_none() {
            self.registered_at = Some(at);
            self.registered_with.clone_from(&backward);
            self.backward = backward;
            self.tensor_hook = tensor;
        } else {
            if backward.is_none() {
                self.backward = None;
                // The first forward registration is where it is said to
                // be registered: a forward hook.
                if self.registered_with.is_some() {
                    self.registered_at = Some(at);
                    self.registered_with = None;
                }
            }
            self.tensor_hook &= tensor;
        }
    }
}

/// A register call whose hook cannot be found statically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub at: Position,
    pub what: String,
}

/// Everything hookfence needs from one file.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    pub classes: Vec<ClassFact>,
    pub candidates: Vec<Candidate>,
    pub unresolved: Vec<Unresolved>,
    /// Names imports bind at module level, with the dotted path each stands for.
    pub module_bindings: BTreeMap<String, String>,
    /// Where `import torch` goes when it is needed.
    pub import_at: usize,
    /// Just past the last import of the imports that open the module: where
    /// the wrap strategy imports its helper.
    pub import_block_end: usize,
    /// Whether the file imports its siblings relatively (`from .x import y`).
    pub uses_relative_imports: bool,
    /// Every `fullgraph=True` argument.
    pub fullgraph: Vec<Position>,
    /// Every `# hookfence: ignore` comment, by line.
    pub suppressions: Vec<usize>,
    /// The file's scopes and bindings (built only for a file with
    /// candidates): what the fence's name means where each is evaluated.
    pub model: SemanticModel,
}

impl FileFacts {
    /// Maps the facts the matcher found in `shadow`'s text back to `original`.
    pub fn restore(&mut self, shadow: &crate::analysis::shadow::Shadow, original: &str) {
        use crate::source::{indentation_at, line_ending_at};
        for c in &mut self.candidates {
            c.at = shadow.position(original, c.at);
            c.registered_at = c.registered_at.map(|at| shadow.position(original, at));
            c.span = (shadow.offset(c.span.0), shadow.offset(c.span.1));
            match &mut c.target {
                Target::Def {
                    insert_at,
                    indent,
                    line_ending,
                } => {
                    *insert_at = shadow.insertion(original, *insert_at);
                    *indent = indentation_at(original, *insert_at).to_owned();
                    *line_ending = line_ending_at(original, *insert_at);
                }
                Target::Lambda {
                    start,
                    end,
                    comment_at,
                } => {
                    *start = shadow.offset(*start);
                    *end = shadow.offset(*end);
                    *comment_at = shadow.insertion(original, *comment_at);
                }
            }
        }
        for u in &mut self.unresolved {
            u.at = shadow.position(original, u.at);
        }
        shadow.restore_positions(&mut self.fullgraph, original);
        self.import_at = shadow.insertion(original, self.import_at);
        self.import_block_end = shadow.insertion(original, self.import_block_end);
    }
}
