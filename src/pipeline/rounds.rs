//! The rounds of a run: files read as the walk finds them, the prefilter's
//! later rounds (classes on the way to a protocol base, hooks found by use),
//! then every file with hooks decided once all classes are known.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::analysis::file_facts::FileFacts;
use crate::analysis::verdict::ClassIndex;
use crate::analysis::vocabulary::Vocabulary;
use crate::analysis::{file_facts, prefilter, project, verdict};
use crate::error::FileError;
use crate::options::Options;
use crate::pipeline::finish::finish;
use crate::pipeline::load::{Loaded, Outcome, Pending, READ_BUFFER, Work, read_into, visit};
use crate::results::helpers_to_create;
use crate::results::{Analysis, FileReport};
use crate::source::Source;
use crate::{discover, found, queries};

/// Rounds of [`analyze_once`] until the hooks found by use are all known:
/// they can lie in files the first round did not parse, or be methods the
/// vocabulary did not name. Returns the analysis, what was found by use and
/// the classes of every parsed file.
///
/// A later round does not start over: a file's facts depend on the
/// vocabulary only through the names it spells, so only the files that
/// spell a name the round added (or hold a function newly found by use)
/// are read again; every other file keeps what the earlier round found.
pub(crate) fn analyze_rounds(
    paths: &[PathBuf],
    options: &Options,
) -> (Analysis, found::Discovered, Vec<file_facts::ClassFact>) {
    const MOST_ROUNDS: usize = 4;
    let mut options = options.clone();
    let mut round = 1;
    let mut carry: Option<Carry> = None;
    loop {
        let ended = analyze_once(paths, &options, round < MOST_ROUNDS, carry.take());
        let (found, earlier) = match ended {
            Round::Ended(analysis, found, classes) => {
                let mut discovered = (*options.discovered).clone();
                discovered.merge(found);
                return (analysis, discovered, classes);
            }
            Round::Again(found, earlier) => (found, earlier),
        };
        let mut discovered = (*options.discovered).clone();
        discovered.merge(found);
        let vocabulary = options.vocabulary.with_discovered(&discovered);
        let (added, added_to_matching) =
            added_needles(&options.vocabulary, &vocabulary, &discovered);
        carry = Some(Carry {
            added,
            added_to_matching,
            discovered: std::sync::Arc::clone(&options.discovered),
            ..earlier
        });
        options.vocabulary = std::sync::Arc::new(vocabulary);
        options.discovered = std::sync::Arc::new(discovered);
        round += 1;
    }
}

/// The needles `new` adds to `old`, where `new` is `old` with what was
/// found by use (`discovered`, cumulative), and those of them that can
/// change what a file matched whole holds: the hook methods of protocols
/// found by use. The names of functions found by use are needles only so
/// that the prefilter parses the files defining them; the functions
/// themselves are found by place (see [`found::Discovered::files_changed_since`]).
fn added_needles(
    old: &Vocabulary,
    new: &Vocabulary,
    discovered: &found::Discovered,
) -> (Vec<prefilter::Needle>, Vec<prefilter::Needle>) {
    let added = |vocabulary: &Vocabulary| -> Vec<prefilter::Needle> {
        vocabulary
            .needles
            .iter()
            .filter(|n| !old.needles.contains(n))
            .cloned()
            .collect()
    };
    let matching = old.with_discovered(&found::Discovered {
        protocols: discovered.protocols.clone(),
        ..found::Discovered::default()
    });
    (added(new), added(&matching))
}

/// What one round of [`analyze_once`] hands the next.
pub(crate) struct Carry {
    pub(crate) loaded: Vec<Loaded>,
    pub(crate) pending: Vec<Pending>,
    pub(crate) errors: Vec<FileError>,
    pub(crate) scanned: usize,
    /// The class names already searched for (see [`analyze_once`]).
    pub(crate) searched: BTreeSet<String>,
    /// The needles the new round's vocabulary adds.
    pub(crate) added: Vec<prefilter::Needle>,
    /// Those of `added` that a file matched whole can match differently
    /// for: the hook methods of protocols found by use.
    pub(crate) added_to_matching: Vec<prefilter::Needle>,
    /// What was found by use when the earlier round ran.
    pub(crate) discovered: std::sync::Arc<found::Discovered>,
}

/// How a round of [`analyze_once`] ended.
pub(crate) enum Round {
    /// The analysis, what was found by use, and the classes of every parsed
    /// file.
    Ended(Analysis, found::Discovered, Vec<file_facts::ClassFact>),
    /// Hooks were found by use that the round's vocabulary did not know: what
    /// was found, and what the next round can keep.
    Again(found::Discovered, Carry),
}

/// Whether the file at `path` must be read again in a round that adds the
/// needles `added`, where what was found by use changed for the files
/// `changed` (functions found in them, registrations of theirs now
/// followed): it spells one of the added names where its query could match
/// it, or is one of those files. A file that cannot be
/// read now is read again (and fails then).
pub(crate) fn read_again(
    path: &Path,
    added: Option<&prefilter::Needles>,
    changed: &std::collections::HashSet<PathBuf>,
) -> bool {
    if !changed.is_empty() && changed.contains(&found::identity(path)) {
        return true;
    }
    let Some(added) = added else {
        return false;
    };
    READ_BUFFER.with_borrow_mut(|buffer| match read_into(path, buffer) {
        Ok(raw) => match Source::view(raw) {
            Ok(view) => added.scan(&view.text).needed,
            Err(_) => true,
        },
        Err(_) => true,
    })
}

/// One round of [`analyze`]. With `may_repeat`, a round that finds hooks by
/// use that `options` did not know stops before planning (the next round
/// plans).
pub(crate) fn analyze_once(
    paths: &[PathBuf],
    options: &Options,
    may_repeat: bool,
    carry: Option<Carry>,
) -> Round {
    let vocabulary = &options.vocabulary;
    let progress = options.progress.as_ref();
    // The queries compile in the background from the start, so the first
    // file that needs them seldom waits, and a run where none does never
    // waits for them.
    let background = std::sync::Arc::clone(vocabulary);
    rayon::spawn(move || {
        background.compiled();
    });
    rayon::spawn(|| {
        std::sync::LazyLock::force(&queries::QUERIES);
    });
    let mut loaded: Vec<Loaded> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut errors: Vec<FileError>;
    let scanned;
    let mut searched: BTreeSet<String>;
    match carry {
        None => {
            // The names already searched as class names: a needle searched
            // only in another shape (a hook method after `def`) is not, so a
            // class named `post_forward` is still followed.
            searched = vocabulary
                .needles
                .iter()
                .filter(|n| {
                    matches!(
                        n.context,
                        prefilter::Context::Word | prefilter::Context::Anywhere
                    )
                })
                .map(|n| n.name.clone())
                .collect();
            let first_needles = options
                .prefilter
                .then(|| prefilter::Needles::new(vocabulary.needles.iter().cloned()));
            // The first round: every file is read (and parsed if it names a
            // hook) as the walk finds it.
            let visited;
            (visited, errors) = discover::visit_all(
                paths,
                &options.selection,
                rayon::current_num_threads(),
                |path| {
                    let pending = Pending {
                        // A walk spelled from an absolute root stays absolute,
                        // as the given paths it stands beside are.
                        path: match options.spelled_from_cwd && path.is_relative() {
                            true => crate::analysis::module_finder::from_working_directory(
                                path.to_path_buf(),
                            ),
                            false => path.to_path_buf(),
                        },
                        fullgraph: None,
                        class_bases: None,
                        defined: None,
                    };
                    let outcome =
                        visit(pending, first_needles.as_ref(), options, options.prefilter);
                    if let Some(bar) = progress {
                        advance(bar);
                    }
                    outcome
                },
            );
            scanned = visited.len();
            for (_, outcome) in visited {
                match outcome {
                    Outcome::Parsed(file) => loaded.push(*file),
                    Outcome::NotYet(p) => pending.push(p),
                    Outcome::Failed(err) => errors.push(err),
                }
            }
        }
        Some(carry) => {
            // A later round: the parsed files that spell an added name are
            // parsed again with the new vocabulary, the others are kept; the
            // files not parsed yet are searched for the added names only.
            errors = carry.errors;
            scanned = carry.scanned;
            searched = carry.searched;
            searched.extend(
                carry
                    .added
                    .iter()
                    .filter(|n| {
                        matches!(
                            n.context,
                            prefilter::Context::Word | prefilter::Context::Anywhere
                        )
                    })
                    .map(|n| n.name.clone()),
            );
            let changed = options.discovered.files_changed_since(&carry.discovered);
            let added = (!carry.added.is_empty())
                .then(|| prefilter::Needles::new(carry.added.iter().cloned()));
            let added_to_matching = (!carry.added_to_matching.is_empty())
                .then(|| prefilter::Needles::new(carry.added_to_matching.iter().cloned()));
            let outcomes: Vec<Outcome> = carry
                .loaded
                .into_par_iter()
                .map(|file| {
                    // A file read only for its `fullgraph=True` note (no
                    // module facts) is searched like one not parsed yet.
                    // A file matched whole would match to the same facts
                    // unless it spells a new hook method: the names of
                    // functions found by use do not change a match (what
                    // was found in it does: `changed`).
                    let needles = if file.matched {
                        added_to_matching.as_ref()
                    } else {
                        added.as_ref()
                    };
                    let again = read_again(&file.path, needles, &changed);
                    if !again {
                        return Outcome::Parsed(Box::new(file));
                    }
                    let pending = Pending {
                        path: file.path,
                        fullgraph: None,
                        class_bases: None,
                        defined: None,
                    };
                    visit(pending, None, options, options.prefilter)
                })
                .chain(carry.pending.into_par_iter().map(|p| {
                    if !changed.is_empty() && changed.contains(&found::identity(&p.path)) {
                        // It holds a function newly found by use: parsed outright.
                        return visit(p, None, options, true);
                    }
                    match &added {
                        // Read again only if it can hold an added name.
                        Some(_)
                            if p.defined
                                .as_ref()
                                .is_some_and(|d| !d.may_hold(&carry.added)) =>
                        {
                            Outcome::NotYet(p)
                        }
                        Some(needles) => visit(p, Some(needles), options, true),
                        None => Outcome::NotYet(p),
                    }
                }))
                .collect();
            for outcome in outcomes {
                match outcome {
                    Outcome::Parsed(file) => loaded.push(*file),
                    Outcome::NotYet(p) => pending.push(p),
                    Outcome::Failed(err) => errors.push(err),
                }
            }
        }
    }
    let mut sort = |outcome, loaded: &mut Vec<Loaded>, pending: &mut Vec<Pending>| match outcome {
        Outcome::Parsed(file) => loaded.push(*file),
        Outcome::NotYet(p) => pending.push(p),
        Outcome::Failed(err) => errors.push(err),
    };

    // Later rounds: the names of classes found to derive from a protocol
    // base, until none is new.
    while options.prefilter && !pending.is_empty() {
        let names: BTreeSet<String> = verdict::hook_class_names(
            loaded.iter().flat_map(|l| l.classes.iter()),
            &vocabulary.protocol_bases,
        )
        .into_iter()
        .filter(|n| !searched.contains(n))
        .collect();
        if names.is_empty() {
            break;
        }
        let needles = prefilter::Needles::new(names.iter().map(prefilter::Needle::word));
        // A file is read again only when the cheap reading of its class
        // statements could not bound their bases, or when one of those
        // bases is a newly found hook class (then it is parsed outright).
        let (visit_now, keep): (Vec<Pending>, Vec<Pending>) =
            pending.into_iter().partition(|p| match &p.class_bases {
                Some(bases) => bases.iter().any(|b| names.contains(b)),
                None => true,
            });
        let outcomes: Vec<Outcome> = visit_now
            .into_par_iter()
            .map(|p| {
                let needles = Some(&needles).filter(|_| p.class_bases.is_none());
                visit(p, needles, options, true)
            })
            .collect();
        pending = keep;
        for outcome in outcomes {
            sort(outcome, &mut loaded, &mut pending);
        }
        searched.extend(names);
    }

    // `fullgraph=True` only matters where there are hooks.
    if loaded.iter().any(|l| l.has_candidates) {
        let mut rest = Vec::new();
        for mut p in pending {
            match p.fullgraph.take().map(|found| *found) {
                Some(Ok(file)) => loaded.push(file),
                Some(Err(err)) => errors.push(err),
                None => rest.push(p),
            }
        }
        pending = rest;
    }

    let concluded = conclude(loaded, errors, scanned, options, may_repeat);
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    match concluded {
        Concluded::Ended(analysis, found, classes) => Round::Ended(analysis, found, classes),
        Concluded::Again(found, loaded, errors) => Round::Again(
            found,
            Carry {
                loaded,
                pending,
                errors,
                scanned,
                searched,
                added: Vec::new(),
                added_to_matching: Vec::new(),
                discovered: std::sync::Arc::clone(&options.discovered),
            },
        ),
    }
}

/// How [`conclude`] ended.
pub(crate) enum Concluded {
    Ended(Analysis, found::Discovered, Vec<file_facts::ClassFact>),
    /// Found by use, with the files and errors handed back for the next round.
    Again(found::Discovered, Vec<Loaded>, Vec<FileError>),
}

/// One more file read; the bar appears once the run has taken a second.
pub(crate) fn advance(bar: &indicatif::ProgressBar) {
    bar.inc(1);
    if bar.is_hidden() && bar.elapsed() > std::time::Duration::from_secs(1) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    }
}

/// Builds the class index from every parsed file (in path order, whatever
/// the prefilter rounds were), then decides and plans each file with hooks.
pub(crate) fn conclude(
    mut loaded: Vec<Loaded>,
    mut errors: Vec<FileError>,
    scanned: usize,
    options: &Options,
    may_repeat: bool,
) -> Concluded {
    loaded.sort_by(|a, b| a.path.cmp(&b.path));
    let mut index = ClassIndex::default();
    index.add(&options.context_classes);
    for file in &loaded {
        index.add(&file.classes);
    }
    let classes: Vec<file_facts::ClassFact> = loaded
        .iter()
        .flat_map(|l| l.classes.iter().cloned())
        .collect();
    let project = project::ProjectIndex::new(
        loaded.iter().filter_map(|l| l.module.clone()).collect(),
        &options.vocabulary,
        std::sync::Arc::clone(&options.module_cache),
    );
    // The register calls the matcher could not follow, for the index to try.
    let mut unresolved = std::collections::HashSet::new();
    for file in &loaded {
        let at: Vec<&file_facts::Unresolved> = match &file.work {
            Work::Waiting(work) => work.1.unresolved.iter().collect(),
            Work::Done(report) => match report.as_ref() {
                Ok(report) => report.unresolved.iter().collect(),
                Err(_) => Vec::new(),
            },
            Work::Nothing => Vec::new(),
        };
        if !at.is_empty() {
            let path = found::identity(&file.path);
            unresolved.extend(
                at.into_iter()
                    .map(|u| (path.clone(), u.at.line, u.at.column)),
            );
        }
    }
    let discovered = project.discover(&unresolved);
    if may_repeat && options.discovered.adds_to(&discovered) {
        project.drop_aside();
        return Concluded::Again(discovered, loaded, errors);
    }
    let mut finished: Vec<Result<FileReport, FileError>> = Vec::new();
    let mut waiting: Vec<(PathBuf, Source, FileFacts)> = Vec::new();
    for file in loaded {
        match file.work {
            Work::Nothing => {}
            Work::Waiting(work) => {
                let (source, facts) = *work;
                waiting.push((file.path, source, facts));
            }
            Work::Done(report) => finished.push(*report),
        }
    }
    // Largest first, so a big file does not finish alone at the end.
    waiting.sort_by_key(|(_, source, _)| std::cmp::Reverse(source.text.len()));
    finished.par_extend(waiting.into_par_iter().map(|(path, source, facts)| {
        finish(path, source, facts, &index, Some(&project), options, None)
    }));
    let mut reports = Vec::new();
    for result in finished {
        match result {
            Ok(report)
                if !report.sites.is_empty()
                    || !report.unresolved.is_empty()
                    || !report.fullgraph.is_empty()
                    || !report.unused_suppressions.is_empty() =>
            {
                reports.push(report)
            }
            Ok(_) => {}
            Err(err) => errors.push(err),
        }
    }
    project.drop_aside();
    reports.sort_by(|a, b| a.path.cmp(&b.path));
    errors.sort_by(|a, b| a.path().cmp(b.path()));
    let analysis = Analysis {
        created: helpers_to_create(&reports),
        files: reports,
        errors,
        scanned,
    };
    Concluded::Ended(analysis, discovered, classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_functions_found_by_use_do_not_make_a_matched_file_read_again() {
        let old = Vocabulary::default();
        let mut discovered = found::Discovered::default();
        discovered.names.insert("unmerge".into());
        let (added, matching) = added_needles(&old, &old.with_discovered(&discovered), &discovered);
        assert!(added.iter().any(|n| n.name == "unmerge"), "{added:?}");
        assert!(matching.is_empty(), "{matching:?}");
        // A protocol found by use is a hook method: a file that spells it
        // matches differently.
        discovered.protocols.insert(
            "pre_fwd_exec".into(),
            found::Found {
                how: "dispatch",
                detail: String::new(),
                path: PathBuf::from("m.py"),
                line: 1,
                backward: None,
            },
        );
        let (added, matching) = added_needles(&old, &old.with_discovered(&discovered), &discovered);
        assert!(added.iter().any(|n| n.name == "unmerge"));
        assert!(
            matching.iter().any(|n| n.name == "pre_fwd_exec"),
            "{matching:?}"
        );
        assert!(matching.iter().all(|n| n.name != "unmerge"), "{matching:?}");
    }
}
