//! The data a summary holds, below the project that computes it: what an
//! effect acts on ([`Target`]), the effect with the chain that shows it
//! ([`Effect`], [`Link`]), a function's [`Summary`], and the run's memo of
//! summaries ([`Summaries`]), which the module cache keeps across rounds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::analysis::effects::local::{Acts, Kind};
use crate::analysis::effects::value::{Shape, Via};
use crate::analysis::reached::Step;

/// A function of the project: its file and the start byte of its `def`.
pub type FnKey = (PathBuf, usize);

/// What an effect acts on, in the summarised function's terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Its parameter `index` (`self` is 0 in a method), or the attribute
    /// `attr` of it. `judged`: `attr` was asked of the class that owns it
    /// and found able to hold module state.
    Param {
        index: u16,
        attr: Option<Box<str>>,
        judged: bool,
        shape: Shape,
    },
    /// A parameter of a function around it (a closure's capture).
    Captured {
        function: FnKey,
        index: u16,
        attr: Option<Box<str>>,
        judged: bool,
    },
    /// A module-level name.
    Global(Box<str>),
    /// What a call the analysis cannot see into returned.
    Unknown,
    /// What the function is handed where no call is written: a replayed
    /// hook's submodule, a custom autograd Function's `ctx`, arguments
    /// passed on with `*args`.
    Handed,
    /// The device as a whole (a sync, an RNG change).
    Device,
}

/// One link of a persistent list of steps: extending a chain by a call costs
/// one link, whatever its length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub step: Step,
    pub next: Option<Arc<Link>>,
}

impl Drop for Link {
    /// Unlinks the rest of the chain in a loop: a chain as long as a call
    /// chain (10,000 links) dropped link by link would recurse once per
    /// link, past a thread's stack in a debug build.
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(link) = next {
            next = match Arc::try_unwrap(link) {
                Ok(mut link) => link.next.take(),
                // Still shared: whoever holds it drops the rest.
                Err(_) => None,
            };
        }
    }
}

/// One effect of a function, with how it is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub kind: Kind,
    pub target: Target,
    /// What the sign does: "moves `p` via .to(...) and stores it in `p.data`".
    pub detail: String,
    /// How the value acted on came to be module state, where it did.
    pub via: Option<Arc<Via>>,
    /// Where the sign is.
    pub path: PathBuf,
    pub line: usize,
    /// The calls from the summarised function to the one holding the sign;
    /// `None` when the sign is in its own body.
    pub chain: Option<Arc<Link>>,
    pub length: u32,
    /// What the value acted on must be for this to touch module state.
    pub acts: Acts,
    /// A sync that stands next to timing or memory statistics: the function
    /// holding it, one it calls directly, or the function that calls it
    /// reads a clock, a timer or memory statistics.
    pub measured: bool,
}

impl Effect {
    /// The sign `local` of the body of a function of the file `path`, on
    /// `target` (`kind` and `detail` as the summary words them), in that
    /// function's own body.
    pub(crate) fn own(
        local: &crate::analysis::effects::local::LocalEffect,
        kind: Kind,
        target: Target,
        detail: String,
        path: &std::path::Path,
    ) -> Effect {
        Effect {
            kind,
            target,
            detail,
            via: local.on.as_ref().and_then(|v| v.via.clone()),
            path: path.to_path_buf(),
            line: local.line,
            chain: None,
            length: 0,
            acts: local.acts,
            measured: false,
        }
    }

    /// The steps of its chain, in order.
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut link = self.chain.as_deref();
        while let Some(l) = link {
            steps.push(l.step.clone());
            link = l.next.as_deref();
        }
        steps
    }

    /// Shorter chains first, then by place: a deterministic best.
    pub(crate) fn rank(&self) -> (u32, &Path, usize, &str) {
        (self.length, &self.path, self.line, &self.detail)
    }
}

/// A function's effects (at most one per kind and target, the
/// best-ranked) and what it returns, in its own terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub effects: Vec<Effect>,
    /// Copies of tensors it did not make taken to a device for one use,
    /// directly or through what it calls (see `LocalFacts::staged`): no
    /// effect; only a leaf layer's own forward is judged by them.
    pub staged: Vec<Effect>,
    pub returns: Vec<Target>,
    /// What it returns is new storage (`torch.empty(0, ...)`, or what a
    /// callee that does so returns): stored into `p.data`, it frees or
    /// allocates that weight's storage.
    pub returns_storage: bool,
    /// It (or a function it calls directly) reads a clock, a timer or
    /// memory statistics: a sync next to that measures.
    pub measures: bool,
    /// Signs of its own body set aside when summarised, each with where and
    /// why (`line 43: ... (a value computed by a call)`).
    pub discounts: Vec<String>,
}

/// Most effects one summary keeps (the best-ranked): a function that
/// touches hundreds of values is judged by its first ones.
const MOST_EFFECTS: usize = 64;

impl Summary {
    pub(crate) fn from_effects(effects: Vec<Effect>) -> Summary {
        let mut best = BestEffects::default();
        for effect in effects {
            best.add(effect);
        }
        best.into_summary()
    }
}

/// The best-ranked effect of each kind, target and way of acting, kept as
/// effects are found: what [`Summary::from_effects`] keeps of them, in
/// memory that grows with the distinct keys, not with the effects found
/// (a function that calls many others with effects many times).
#[derive(Debug, Default)]
pub(crate) struct BestEffects {
    best: BTreeMap<(Kind, Target, Acts), Effect>,
}

impl BestEffects {
    /// Keeps `effect` where it ranks before the one of its key (the first
    /// of equals stays).
    pub(crate) fn add(&mut self, effect: Effect) {
        let key = (effect.kind, effect.target.clone(), effect.acts);
        match self.best.get(&key) {
            Some(known) if known.rank() <= effect.rank() => {}
            _ => {
                self.best.insert(key, effect);
            }
        }
    }

    pub(crate) fn into_summary(self) -> Summary {
        let mut effects: Vec<Effect> = self.best.into_values().collect();
        if effects.len() > MOST_EFFECTS {
            effects.sort_by(|a, b| a.rank().cmp(&b.rank()));
            effects.truncate(MOST_EFFECTS);
            effects.sort_by(|a, b| (a.kind, &a.target, a.acts).cmp(&(b.kind, &b.target, b.acts)));
        }
        Summary {
            effects,
            staged: Vec::new(),
            returns: Vec::new(),
            returns_storage: false,
            measures: false,
            discounts: Vec::new(),
        }
    }
}

/// The evidence of a step a forward calls, in the forward's terms, by the
/// step's file (its identity) and start byte; and whether it is the rest of
/// a chain the function was found inside (a step's own evidence wins over
/// that).
pub(crate) type StepEvidence = (FnKey, Effect, bool);

/// The summaries of one run, kept across its rounds.
#[derive(Debug, Default)]
pub struct Summaries {
    memo: Mutex<SummaryMemo>,
    /// How many callee effects were mapped into a caller's terms (one per
    /// effect, call and callee followed): the work the summaries did.
    mapped: std::sync::atomic::AtomicUsize,
}

#[derive(Debug, Default)]
pub(crate) struct SummaryMemo {
    /// The indexed modules the summaries were computed over (see
    /// [`Summaries::start_index`]).
    pub(crate) modules: std::collections::HashSet<PathBuf>,
    pub(crate) done: crate::analysis::FastMap<FnKey, Arc<Summary>>,
    /// What the final summaries of a target list's functions tell, by the
    /// list's address: calls that share a list (hooks replaying one table)
    /// ask it once, and the summaries' search skips a list whose functions
    /// are all summarised.
    pub(crate) lists: crate::analysis::FastMap<usize, ListFacts>,
    /// How many functions were summarised (each once).
    pub(crate) computed: usize,
    /// How many edges the summaries' searches followed (a function to a
    /// target list, a list to a function): the work of finding components.
    pub(crate) edges: usize,
}

/// What the summaries of a target list's functions tell its callers.
#[derive(Debug, Clone)]
pub(crate) struct ListFacts {
    /// The list (a `project::Targets`), held so that its address names it
    /// while the entry lives.
    pub(crate) _list: Arc<[(Arc<crate::analysis::module_facts::ModuleFacts>, usize)]>,
    /// None of its functions has effects.
    pub(crate) quiet: bool,
    /// One of them reads a clock, a timer or memory statistics.
    pub(crate) measures: bool,
}

impl Summaries {
    /// Starts a project index over the indexed modules `modules`: a
    /// call's targets are looked up among them, so where they include a
    /// module the summaries were not computed over (a later round, which
    /// indexes more), every summary is dropped; over the same modules or
    /// fewer (a run on one file after its project was read for context),
    /// every one is kept.
    pub fn start_index(&self, modules: &[&Path]) {
        let mut memo = self.lock();
        if modules.iter().all(|m| memo.modules.contains(*m)) {
            return;
        }
        memo.modules = modules.iter().map(|m| m.to_path_buf()).collect();
        memo.done.clear();
        memo.lists.clear();
    }

    /// How many functions have been summarised so far.
    pub fn computed(&self) -> usize {
        self.lock().computed
    }

    /// How many call-graph edges the summaries' searches have followed.
    pub fn edges(&self) -> usize {
        self.lock().edges
    }

    /// How many callee effects have been mapped into a caller's terms.
    pub fn mapped(&self) -> usize {
        self.mapped.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn count_mapped(&self, effects: usize) {
        self.mapped
            .fetch_add(effects, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether `key` is summarised, as far as can be told without waiting:
    /// `false` while another thread holds the summaries.
    pub(crate) fn known_now(&self, key: &FnKey) -> bool {
        match self.memo.try_lock() {
            Ok(memo) => memo.done.contains_key(key),
            Err(std::sync::TryLockError::Poisoned(memo)) => {
                memo.into_inner().done.contains_key(key)
            }
            Err(std::sync::TryLockError::WouldBlock) => false,
        }
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, SummaryMemo> {
        self.memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
