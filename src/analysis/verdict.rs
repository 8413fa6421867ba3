//! Decisions that need the whole tree: which classes derive from a hook
//! protocol base (through classes in any scanned file), and so which
//! candidates are offload hooks to fence.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

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
}

fn last_segment(dotted: &str) -> &str {
    dotted.rsplit('.').next().unwrap_or(dotted)
}

impl ClassIndex {
    pub fn add(&mut self, classes: &[ClassFact]) {
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

    /// The chain of class names from `bases` up to a protocol base, shortest
    /// first found: `["CpuOffload", "ModelHook"]`. `None` if there is none.
    pub fn lineage(&self, bases: &[String], protocol_bases: &[String]) -> Option<Vec<String>> {
        let mut queue: VecDeque<Vec<String>> = bases
            .iter()
            .map(|b| vec![last_segment(b).to_owned()])
            .collect();
        let mut seen = HashSet::new();
        while let Some(path) = queue.pop_front() {
            let Some(current) = path.last() else { continue };
            if protocol_bases.contains(current) {
                return Some(path);
            }
            if !seen.insert(current.clone()) {
                continue;
            }
            for base_list in self.bases.get(current).into_iter().flatten() {
                for base in base_list {
                    let mut next = path.clone();
                    next.push(base.clone());
                    queue.push_back(next);
                }
            }
        }
        None
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
    let mut lineage = Vec::new();
    if let Some(owner) = &candidate.owner
        && !vocabulary.is_protocol_base(&owner.class)
        && let Some(chain) = index.lineage(&owner.bases, &vocabulary.protocol_bases)
    {
        let base = chain.last().cloned().unwrap_or_default();
        let detail = if chain.len() > 1 {
            format!("subclass of {base} via {}", chain[0])
        } else {
            format!("subclass of {base}")
        };
        let how = if crate::analysis::vocabulary::DEFAULT_PROTOCOL_BASES.contains(&base.as_str()) {
            "protocol"
        } else {
            "configuration"
        };
        found.push(here(how, detail, candidate.at.line));
        lineage = chain;
    }
    if let Some(owner) = &candidate.owner
        && lineage.is_empty()
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
    match (candidate.registered_at, &candidate.backward) {
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
    if let Some(by_use) = &candidate.discovered
        && !(candidate.registered_at.is_some() && by_use.how == "registration")
    {
        found.push(by_use.clone());
    }
    // A protocol hook that is also registered for backward stays a forward
    // hook.
    let backward = candidate.backward.clone().filter(|_| lineage.is_empty());
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
    let mut names: BTreeSet<String> = protocol_bases.iter().cloned().collect();
    loop {
        let before = names.len();
        for class in classes.clone() {
            if !names.contains(&class.name)
                && class
                    .bases
                    .iter()
                    .any(|b| names.contains(b.rsplit('.').next().unwrap_or(b)))
            {
                names.insert(class.name.clone());
            }
        }
        if names.len() == before {
            return names;
        }
    }
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
            index.lineage(&["Device".to_owned()], &bases),
            Some(vec![
                "Device".into(),
                "OffloadBase".into(),
                "ModelHook".into()
            ])
        );
        assert_eq!(index.lineage(&["A".to_owned()], &bases), None);
        assert_eq!(
            index.lineage(&["hooks.ModelHook".to_owned()], &bases),
            Some(vec!["ModelHook".into()])
        );
    }
}
