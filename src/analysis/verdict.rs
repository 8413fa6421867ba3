//! Decisions that need the whole tree: which classes derive from a hook
//! protocol base (through classes in any scanned file), and so which
//! candidates are offload hooks to fence.

use std::collections::{BTreeSet, HashMap, VecDeque};

use crate::analysis::file_facts::{Candidate, ClassFact, FenceState};
use crate::found::Found;

/// What hookfence does with one hook site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// An offload hook with no fence: hookfence fences it.
    Unfenced { evidence: String },
    /// Already fenced; the text says how.
    Fenced(String),
    /// A hook that does no offload work (left alone unless `--all-hooks`).
    NotOffload,
    /// A commented-out disable decorator on this line opts it out.
    OptedOut { line: usize },
    /// `# hookfence: ignore[reason]` on this line.
    Suppressed { line: usize, reason: Option<String> },
    /// An offload hook the review (`--interactive`, `--replay`) left
    /// unfenced; `note` tells the user why.
    Declined { evidence: String, note: String },
    /// A hook only ever registered as a module backward hook that does
    /// offload work (or any, with `--all-hooks`): listed, never fenced.
    /// Under torch.compile dynamo does not trace module backward hooks
    /// without compiled autograd, and with it a fence adds a graph break per
    /// call (tests/torch/RESULTS.md, "Backward hooks").
    Backward { evidence: String, registrar: String },
    /// An offload hook found by use that runs only inside entry points
    /// that are fenced, or that the run fences: it runs eagerly already,
    /// so it gets no fence of its own. `entry` says which and how.
    Covered { evidence: String, entry: String },
}

impl Status {
    /// The name `--list` and the JSON output use.
    pub fn name(&self) -> &'static str {
        match self {
            Status::Unfenced { .. } => "unfenced",
            Status::Fenced(_) => "fenced",
            Status::NotOffload => "not-offload",
            Status::OptedOut { .. } => "opted-out",
            Status::Suppressed { .. } => "suppressed",
            Status::Declined { .. } => "declined",
            Status::Backward { .. } => "backward",
            Status::Covered { .. } => "covered",
        }
    }
}

/// Why a backward hook is listed and not fenced, as `--list` and the notes
/// say it.
pub const BACKWARD_NOT_FENCED: &str = "backward hooks are not fenced: dynamo does not trace them without compiled autograd, and with it a fence adds a graph break per call";

/// A hook found in a file, with what hookfence makes of it.
#[derive(Debug, Clone)]
pub struct HookSite {
    pub candidate: Candidate,
    pub status: Status,
    /// Why it is a hook: "subclass of ModelHook via CpuOffload" or
    /// "registered at line 12".
    pub why_hook: String,
    /// The edits that fence it, when it is unfenced.
    pub fix: Option<crate::edit::Fix>,
    /// From the hook to the sign of offload work that decided it (empty when
    /// none did).
    pub evidence: Vec<EvidenceStep>,
    /// Signs in its own body that were not counted, each with the reason.
    pub discounted: Vec<String>,
    /// How it was found to be a hook, each rule with its place.
    pub discovered_by: Vec<Found>,
    /// The lines of its own body where it calls a function its authors
    /// fenced (each a graph break while the hook is traced), when its
    /// evidence runs through one.
    pub fenced_calls: Vec<usize>,
}

/// What a hook that is no offload hook does, as every output says it.
pub const NO_EFFECT: &str = "no effect on module state in its body or in what it calls";

impl HookSite {
    /// Why it is no offload hook: its discounted signs, or that none was
    /// found. The list, the JSON, `--explain` and the stderr note say the
    /// same.
    pub fn not_offload_reason(&self) -> String {
        if self.discounted.is_empty() {
            NO_EFFECT.to_owned()
        } else {
            format!("no offload work ({})", self.discounted.join("; "))
        }
    }
}

impl HookSite {
    /// The steps of its evidence into functions their authors fenced: the
    /// offload work they lead to runs eagerly already.
    pub fn fenced_callees(&self) -> impl Iterator<Item = &EvidenceStep> {
        self.evidence.iter().filter(|step| step.fenced.is_some())
    }
}

/// One step from a hook to its evidence: a call into another function, or
/// the sign itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EvidenceStep {
    /// `call`, `handed`, `replayed`, or the sign's kind (`move`, `params`, ...).
    pub kind: String,
    pub detail: String,
    pub path: std::path::PathBuf,
    pub line: usize,
    /// For a step into a function its authors fenced: how
    /// (`@torch.compiler.disable()`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fenced: Option<String>,
}

/// Every class name in the scanned tree and the bases each definition of it
/// names (last dotted segment: `accelerate.hooks.ModelHook` -> `ModelHook`).
#[derive(Debug, Default)]
pub struct ClassIndex {
    bases: HashMap<String, Vec<Vec<String>>>,
    /// The way up to a protocol base, for the protocol bases it was asked
    /// with (one run asks with one set): computed once for every class.
    ways: std::sync::OnceLock<(Vec<String>, Ways)>,
}

/// Every class's shortest way up to a protocol base: how many steps, the
/// base to take first (the first of the shortest, in the order the bases
/// are written), and the protocol base it ends at.
#[derive(Debug, Default, Clone)]
struct Ways {
    steps: HashMap<String, usize>,
    next: HashMap<String, String>,
    end: HashMap<String, String>,
    /// How many base links were looked at to compute them.
    work: usize,
}

/// A class's way up to a protocol base, as [`ClassIndex::lineage`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The first class on the way: one of the bases asked about.
    pub via: String,
    /// The protocol base at the end.
    pub base: String,
    /// How many classes the way names, `via` and `base` included.
    pub length: usize,
}

fn last_segment(dotted: &str) -> &str {
    dotted.rsplit('.').next().unwrap_or(dotted)
}

impl ClassIndex {
    pub fn add(&mut self, classes: &[ClassFact]) {
        self.ways = std::sync::OnceLock::new();
        for class in classes {
            self.bases.entry(class.name.clone()).or_default().push(
                class
                    .bases
                    .iter()
                    .map(|b| last_segment(b).to_owned())
                    .collect(),
            );
        }
    }

    /// The way from `bases` up to a protocol base: the shortest, and of
    /// those the first in the order the bases are written (what a
    /// breadth-first search from them finds first). `None` if there is
    /// none. Every class's way is computed once, in time linear in the
    /// classes and their bases; each question is then a look-up.
    pub fn lineage(&self, bases: &[String], protocol_bases: &[String]) -> Option<Lineage> {
        let ways = self.ways(protocol_bases);
        let (via, steps) = bases
            .iter()
            .map(|b| last_segment(b))
            .filter_map(|b| ways.steps.get(b).map(|&steps| (b, steps)))
            .min_by_key(|&(_, steps)| steps)?;
        Some(Lineage {
            via: via.to_owned(),
            base: ways.end.get(via).cloned().unwrap_or_else(|| via.to_owned()),
            length: steps + 1,
        })
    }

    /// The chain of class names of [`ClassIndex::lineage`]'s way, `bases`
    /// first: `["CpuOffload", "ModelHook"]` (for tests and messages; each
    /// name is one look-up).
    pub fn chain(&self, bases: &[String], protocol_bases: &[String]) -> Option<Vec<String>> {
        let lineage = self.lineage(bases, protocol_bases)?;
        let ways = self.ways(protocol_bases);
        let mut chain = vec![lineage.via];
        while let Some(next) = chain.last().and_then(|c| ways.next.get(c)) {
            chain.push(next.clone());
        }
        Some(chain)
    }

    /// How many base links were looked at to find every class's way up
    /// (with `protocol_bases`).
    pub fn lineage_work(&self, protocol_bases: &[String]) -> usize {
        self.ways(protocol_bases).work
    }

    fn ways(&self, protocol_bases: &[String]) -> std::borrow::Cow<'_, Ways> {
        let (asked, ways) = self
            .ways
            .get_or_init(|| (protocol_bases.to_vec(), self.compute_ways(protocol_bases)));
        if asked.as_slice() == protocol_bases {
            std::borrow::Cow::Borrowed(ways)
        } else {
            // Asked with other protocol bases than the first time.
            std::borrow::Cow::Owned(self.compute_ways(protocol_bases))
        }
    }

    /// Breadth-first from the protocol bases down the subclass links: each
    /// class's steps up; then, in order of steps, the base it takes first
    /// (its first base, as written, one step nearer) and where it ends.
    fn compute_ways(&self, protocol_bases: &[String]) -> Ways {
        let mut ways = Ways::default();
        let mut derived: HashMap<&str, Vec<&str>> = HashMap::new();
        for (class, definitions) in &self.bases {
            for base in definitions.iter().flatten() {
                derived
                    .entry(base.as_str())
                    .or_default()
                    .push(class.as_str());
            }
        }
        let mut order: Vec<&str> = Vec::new();
        let mut queue: VecDeque<&str> = VecDeque::new();
        for base in protocol_bases {
            if !ways.steps.contains_key(base.as_str()) {
                ways.steps.insert(base.clone(), 0);
                queue.push_back(base);
            }
        }
        while let Some(class) = queue.pop_front() {
            order.push(class);
            let steps = ways.steps[class];
            for &child in derived.get(class).into_iter().flatten() {
                ways.work += 1;
                if !ways.steps.contains_key(child) {
                    ways.steps.insert(child.to_owned(), steps + 1);
                    queue.push_back(child);
                }
            }
        }
        for class in order {
            let steps = ways.steps[class];
            if steps == 0 {
                ways.end.insert(class.to_owned(), class.to_owned());
                continue;
            }
            let next = self
                .bases
                .get(class)
                .into_iter()
                .flatten()
                .flatten()
                .find(|b| ways.steps.get(b.as_str()) == Some(&(steps - 1)));
            if let Some(next) = next {
                ways.work += 1;
                let end = ways.end.get(next.as_str()).cloned().unwrap_or_default();
                ways.next.insert(class.to_owned(), next.clone());
                ways.end.insert(class.to_owned(), end);
            }
        }
        ways
    }
}

/// Decides what a candidate is. `None`: not a hook at all (a `pre_forward`
/// of a class that is no hook, or the protocol base's own no-op). `judge`:
/// the candidate's effects judged from its summary over the project (see
/// [`crate::analysis::effects`]); without one, its own body's signs decide.
pub fn decide(
    candidate: Candidate,
    index: &ClassIndex,
    all_hooks: bool,
    vocabulary: &crate::analysis::vocabulary::Vocabulary,
    path: &std::path::Path,
    judge: impl FnOnce(&Candidate) -> Option<crate::analysis::effects::judge::Judged>,
) -> Option<HookSite> {
    let mut found: Vec<Found> = Vec::new();
    let here = |how: &'static str, detail: String, line: usize| Found {
        how,
        detail,
        path: path.to_path_buf(),
        line,
        backward: None,
    };
    let mut lineage: Option<Lineage> = None;
    if let Some(owner) = &candidate.owner
        && !vocabulary.is_protocol_base(&owner.class)
        && let Some(way) = index.lineage(&owner.bases, &vocabulary.protocol_bases)
    {
        let base = way.base.clone();
        let detail = if way.length > 1 {
            format!("subclass of {base} via {}", way.via)
        } else {
            format!("subclass of {base}")
        };
        let how = if crate::analysis::vocabulary::DEFAULT_PROTOCOL_BASES.contains(&base.as_str()) {
            "protocol"
        } else {
            "configuration"
        };
        found.push(here(how, detail, candidate.at.line));
        lineage = Some(way);
    }
    if let Some(owner) = &candidate.owner
        && lineage.is_none()
        && !vocabulary.is_protocol_base(&owner.class)
        && let Some(by_use) = candidate
            .qualname
            .rsplit('.')
            .next()
            .and_then(|method| vocabulary.discovered_protocols.get(method))
    {
        if candidate.trivial {
            // The protocol's own pass-through: nothing to fence.
            return None;
        }
        found.push(Found {
            detail: format!("hook protocol method, {}", by_use.detail),
            ..by_use.clone()
        });
    }
    match (candidate.registered_at, &candidate.registered_with) {
        (Some(at), Some(registrar)) => found.push(here(
            "registration",
            format!(
                "registered with {registrar} at {}:{}",
                path.display(),
                at.line
            ),
            at.line,
        )),
        (Some(at), None) => found.push(here(
            "registration",
            format!("registered at {}:{}", path.display(), at.line),
            at.line,
        )),
        (None, _) => {}
    }
    // A registration found again by the project (the same call) is said
    // once; one in another file is said too.
    if let Some(by_use) = &candidate.discovered
        && !(by_use.how == "registration"
            && by_use.path == path
            && candidate
                .registered_at
                .is_some_and(|at| at.line == by_use.line))
    {
        found.push(by_use.clone());
    }
    // A protocol hook that is also registered for backward stays a forward
    // hook.
    let backward = candidate.backward.clone().filter(|_| lineage.is_none());
    let why: Vec<String> = found.iter().map(|f| f.detail.clone()).collect();
    if why.is_empty() {
        return None;
    }
    let mut evidence: Vec<EvidenceStep> = Vec::new();
    let discounted: Vec<String>;
    let described = match judge(&candidate) {
        Some(judged) => {
            discounted = judged.discounted;
            judged.evidence.map(|effect| {
                let (steps, detail) = crate::analysis::effects::judge::described(&effect);
                for step in &steps {
                    evidence.push(EvidenceStep {
                        kind: match &step.through {
                            None => "call".to_owned(),
                            Some(crate::analysis::reached::Through::HandedTo(_)) => {
                                "handed".to_owned()
                            }
                            Some(crate::analysis::reached::Through::Replayed { .. }) => {
                                "replayed".to_owned()
                            }
                        },
                        detail: step.describe(),
                        path: step.path.clone(),
                        line: step.line,
                        fenced: step.fenced.clone(),
                    });
                }
                evidence.push(EvidenceStep {
                    kind: effect.kind.name().to_owned(),
                    detail: detail.clone(),
                    path: effect.path.clone(),
                    line: effect.line,
                    fenced: None,
                });
                if steps.is_empty() {
                    detail
                } else {
                    let names: Vec<String> = steps.iter().map(|s| s.describe()).collect();
                    format!(
                        "{detail} via {} ({}:{})",
                        names.join(" -> "),
                        effect.path.display(),
                        effect.line
                    )
                }
            })
        }
        None => {
            discounted = candidate
                .signs
                .iter()
                .filter_map(|s| {
                    s.discounted
                        .as_ref()
                        .map(|d| format!("line {}: {d}", s.line))
                })
                .collect();
            candidate.own_evidence().cloned().map(|sign| {
                evidence.push(EvidenceStep {
                    kind: sign.kind.to_owned(),
                    detail: sign.detail.clone(),
                    path: path.to_path_buf(),
                    line: sign.line,
                    fenced: None,
                });
                sign.detail
            })
        }
    };
    let status = match &candidate.fence {
        FenceState::Fenced { how, .. } => Status::Fenced(how.clone()),
        FenceState::OptedOut { line } => Status::OptedOut { line: *line },
        FenceState::Suppressed { line, reason } => Status::Suppressed {
            line: *line,
            reason: reason.clone(),
        },
        FenceState::Unfenced => {
            // Evidence decides, never a name (a class called `...Offload`
            // that moves nothing is no offload hook).
            match &described {
                Some(evidence) if let Some(registrar) = backward => Status::Backward {
                    evidence: evidence.clone(),
                    registrar,
                },
                None if all_hooks && let Some(registrar) = backward => Status::Backward {
                    evidence: "--all-hooks".to_owned(),
                    registrar,
                },
                None if backward.is_some() => Status::NotOffload,
                Some(evidence) => Status::Unfenced {
                    evidence: evidence.clone(),
                },
                None if all_hooks => Status::Unfenced {
                    evidence: "--all-hooks".to_owned(),
                },
                None => Status::NotOffload,
            }
        }
    };
    Some(HookSite {
        candidate,
        status,
        why_hook: why.join(", "),
        fix: None,
        evidence,
        discounted,
        discovered_by: found,
        fenced_calls: Vec::new(),
    })
}

/// The protocol bases and every class name that derives from one through
/// `classes` (by last dotted segment, as the class index resolves them).
pub fn hook_class_names<'a>(
    classes: impl Iterator<Item = &'a ClassFact> + Clone,
    protocol_bases: &[String],
) -> BTreeSet<String> {
    let roots: Vec<&str> = protocol_bases.iter().map(String::as_str).collect();
    let derived = crate::analysis::file_facts::subclasses_of(
        classes.map(|class| (class.name.as_str(), class.bases.as_slice())),
        &roots,
    );
    protocol_bases
        .iter()
        .cloned()
        .chain(derived.into_iter().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_class_names_reach_a_fixpoint() {
        let class = |name: &str, bases: &[&str]| ClassFact {
            name: name.into(),
            bases: bases.iter().map(|b| b.to_string()).collect(),
        };
        let classes = [
            class("C", &["B"]),
            class("B", &["hooks.A"]),
            class("A", &["accelerate.hooks.ModelHook"]),
            class("Other", &["object"]),
        ];
        let names = hook_class_names(classes.iter(), &["ModelHook".to_owned()]);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["A", "B", "C", "ModelHook"]
        );
    }

    /// The search [`ClassIndex::lineage`] stands for: breadth-first from
    /// `bases`, whole paths kept, the first to reach a protocol base wins.
    fn searched_chain(
        index: &ClassIndex,
        bases: &[String],
        protocol_bases: &[String],
    ) -> Option<Vec<String>> {
        let mut queue: VecDeque<Vec<String>> = bases
            .iter()
            .map(|b| vec![last_segment(b).to_owned()])
            .collect();
        let mut seen = std::collections::HashSet::new();
        while let Some(path) = queue.pop_front() {
            let current = path.last()?.clone();
            if protocol_bases.contains(&current) {
                return Some(path);
            }
            if !seen.insert(current.clone()) {
                continue;
            }
            for base in index.bases.get(&current).into_iter().flatten().flatten() {
                let mut next = path.clone();
                next.push(base.clone());
                queue.push_back(next);
            }
        }
        None
    }

    #[test]
    fn lineage_is_the_breadth_first_search_on_graphs_with_cycles_and_ties() {
        // Small random class graphs (fixed seed): self-bases, cycles, names
        // defined twice, several bases with ways of the same length.
        let mut seed: u64 = 0x5eed;
        let mut next = |bound: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % bound
        };
        let protocol = ["P".to_owned(), "Q".to_owned()];
        let name = |i: u64| match i {
            0 => "P".to_owned(),
            1 => "Q".to_owned(),
            i => format!("C{i}"),
        };
        for _ in 0..300 {
            let mut index = ClassIndex::default();
            let classes = 2 + next(10);
            let mut facts = Vec::new();
            for _ in 0..classes + next(4) {
                let bases: Vec<String> = (0..next(4)).map(|_| name(next(classes))).collect();
                facts.push(ClassFact {
                    name: name(2 + next(classes)),
                    bases,
                });
            }
            index.add(&facts);
            for c in 0..classes + 2 {
                let bases = vec![format!("pkg.{}", name(c)), name(next(classes + 2))];
                let want = searched_chain(&index, &bases, &protocol);
                assert_eq!(
                    index.chain(&bases, &protocol),
                    want,
                    "{facts:?} from {bases:?}"
                );
                let lineage = index.lineage(&bases, &protocol);
                assert_eq!(
                    lineage.as_ref().map(|l| l.length),
                    want.as_ref().map(Vec::len)
                );
                assert_eq!(
                    lineage.map(|l| (l.via, l.base)),
                    want.map(|w| (w[0].clone(), w[w.len() - 1].clone()))
                );
            }
        }
    }

    #[test]
    fn lineage_of_a_deep_chain_is_linear_work() {
        let depth = 2_000;
        let mut index = ClassIndex::default();
        let mut facts = vec![class("C0", &["accelerate.hooks.ModelHook"])];
        for i in 1..depth {
            facts.push(ClassFact {
                name: format!("C{i}"),
                bases: vec![format!("C{}", i - 1)],
            });
        }
        // Written deepest first: a pass in file order learns one class.
        facts.reverse();
        index.add(&facts);
        let protocol = ["ModelHook".to_owned()];
        for i in 0..depth {
            let lineage = index.lineage(&[format!("C{i}")], &protocol).unwrap();
            assert_eq!(
                (lineage.length, lineage.base.as_str()),
                (i + 2, "ModelHook")
            );
        }
        // Every class's way, once: one look at each link down and one at
        // the base each class takes, not one search per class.
        assert!(
            index.lineage_work(&protocol) <= 2 * depth,
            "{}",
            index.lineage_work(&protocol)
        );
        let names = hook_class_names(facts.iter(), &protocol);
        assert_eq!(names.len(), depth + 1);
    }

    fn class(name: &str, bases: &[&str]) -> ClassFact {
        ClassFact {
            name: name.to_owned(),
            bases: bases.iter().map(|b| b.to_string()).collect(),
        }
    }

    #[test]
    fn lineage_follows_bases_across_files_and_survives_cycles() {
        let mut index = ClassIndex::default();
        index.add(&[class("OffloadBase", &["accelerate.hooks.ModelHook"])]);
        index.add(&[
            class("Device", &["OffloadBase"]),
            class("A", &["B"]),
            class("B", &["A"]),
        ]);
        let bases = ["ModelHook".to_owned()];
        assert_eq!(
            index.chain(&["Device".to_owned()], &bases),
            Some(vec![
                "Device".into(),
                "OffloadBase".into(),
                "ModelHook".into()
            ])
        );
        assert_eq!(index.chain(&["A".to_owned()], &bases), None);
        assert_eq!(
            index.chain(&["hooks.ModelHook".to_owned()], &bases),
            Some(vec!["ModelHook".into()])
        );
    }
}
