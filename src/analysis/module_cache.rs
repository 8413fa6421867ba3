//! The modules a run reads on demand and what it learns of them, kept
//! across the rounds of one run: their facts, their errors, the summaries of
//! their functions and the evidence of the steps forwards call.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::analysis::module_facts::ModuleFacts;

/// Modules read on demand, by file, kept across the rounds of one run.
///
/// A module that could not be read, decoded or parsed is kept as `None`,
/// and its error once, for the run to report: a file whose contents the
/// analysis would use is a file whose errors are reported.
#[derive(Debug, Default)]
pub struct ModuleCache {
    pub(crate) modules: Mutex<crate::analysis::FastMap<PathBuf, ModuleCell>>,
    pub(crate) errors: Mutex<Vec<crate::error::FileError>>,
    /// Where modules may be read from (see [`crate::confine`]).
    pub confinement: Arc<crate::confine::Confinement>,
    /// The functions summarised so far (see
    /// [`crate::analysis::effects::summary`]), kept across the rounds of a
    /// run.
    pub summaries: crate::analysis::effects::record::Summaries,
    /// The evidence of each step a forward calls, in the forward's terms
    /// (what it passes there), by the step's file and start byte, kept
    /// across rounds: the verdict on a step its own parameters do not tell
    /// (an autograd Function's `forward` handed a weight) reads it here.
    /// With it, whether it is the rest of a chain the function was found
    /// inside (replaced by a step's own evidence found later).
    pub(crate) step_evidence:
        Mutex<HashMap<(PathBuf, usize), (crate::analysis::effects::record::Effect, bool)>>,
    /// For each import root: the files below it that define each name with
    /// `def`, read once per run (see `ProjectIndex::project_definers`).
    pub(crate) definers: Mutex<HashMap<PathBuf, Once<Definers>>>,
    /// For each import root and name: the files below it whose text calls
    /// that name (see `ProjectIndex::passed_for`), read once per run.
    pub(crate) callers: Mutex<HashMap<CallersKey, Once<Callers>>>,
    /// The names each file read to tell whether it spells one defines with
    /// a keyword (`def`, `class`), by file, in the order of the keywords:
    /// read once per run (see `ProjectIndex::may_define`).
    pub(crate) defined: Mutex<crate::analysis::FastMap<PathBuf, Once<[DefinedWords; 2]>>>,
    /// The directories looked in for modules, each read once per run.
    pub listings: crate::analysis::listings::Listings,
}

/// One module read on demand: filled once, by the first thread that asks
/// for it (`None`: it could not be read or parsed); the others wait for it.
pub(crate) type ModuleCell = Once<Option<Arc<ModuleFacts>>>;

/// The names a file defines with one keyword, as read from its text
/// (`None`: it could not be read).
pub(crate) type DefinedWords = Option<Arc<crate::analysis::unparsed::WordSet>>;

/// An answer worked out once per run, by the first thread that asks for it;
/// a thread asking while it is being worked out waits for it.
pub(crate) type Once<T> = Arc<std::sync::OnceLock<T>>;

/// The answer kept in `map` at `key`, worked out by `work` where no thread
/// has yet: the lock is held only to find the key's cell, not while the
/// work runs (which may read files and take other locks). `work` must not
/// ask `map` for the same key, directly or through another cell's work (a
/// thread would wait for itself), nor run rayon jobs (a worker waiting
/// inside one could take a job that asks for the key); none does: reading
/// a module, a file's names or a root's files asks for no other answer
/// than a file's names.
pub(crate) fn once<K, T, S>(
    map: &Mutex<std::collections::HashMap<K, Once<T>, S>>,
    key: K,
    work: impl FnOnce() -> T,
) -> T
where
    K: std::hash::Hash + Eq,
    T: Clone,
    S: std::hash::BuildHasher,
{
    let cell = Arc::clone(
        map.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_default(),
    );
    cell.get_or_init(work).clone()
}

/// The files that define each name with `def`.
pub(crate) type Definers = Arc<DefinerIndex>;

/// The files below an import root, and for each name the ones (by index,
/// in the order of their paths) that define it with `def`: each path kept
/// once, however many names its file defines.
#[derive(Debug, Default)]
pub(crate) struct DefinerIndex {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) words: HashMap<Box<str>, Vec<u32>>,
}

impl DefinerIndex {
    /// The files that define `word`, in the order of their paths.
    pub(crate) fn defining(&self, word: &str) -> Vec<&PathBuf> {
        self.words
            .get(word)
            .into_iter()
            .flatten()
            .map(|&i| &self.files[i as usize])
            .collect()
    }
}

/// The Python files (`*.py`) below the import root `root`, as `ignore`
/// walks it (ignore files honoured), each spelled as the modules an import
/// reaches are: `root` joined with the path below it (an empty root, the
/// working directory, gives paths relative to it).
pub(crate) fn python_files_below(root: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    let top = if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        root
    };
    ignore::WalkBuilder::new(top)
        .build()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry.file_type().is_some_and(|t| t.is_file())
                && entry.path().extension().is_some_and(|e| e == "py")
        })
        .map(move |entry| {
            let below = entry.path().strip_prefix(top).unwrap_or(entry.path());
            root.join(below)
        })
}

/// The files whose text calls a name.
pub(crate) type Callers = Arc<[PathBuf]>;

/// An import root and a name called below it.
pub(crate) type CallersKey = (PathBuf, Box<str>);

impl ModuleCache {
    /// A cache whose reads are confined by `confinement`.
    pub fn confined(confinement: crate::confine::Confinement) -> ModuleCache {
        ModuleCache {
            confinement: Arc::new(confinement),
            ..ModuleCache::default()
        }
    }

    /// The errors of the modules read on demand so far, each file once;
    /// taken, so that a later call gives only newer ones.
    pub fn take_errors(&self) -> Vec<crate::error::FileError> {
        let mut errors = std::mem::take(
            &mut *self
                .errors
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        errors.sort_by(|a, b| a.path().cmp(b.path()));
        errors.dedup_by(|a, b| a.path() == b.path());
        errors
    }
}

/// Reads, parses and indexes a module only needed as context, through the
/// same checks as a file the run was given.
pub(crate) fn read_module(
    path: &Path,
    vocabulary: &crate::analysis::vocabulary::Vocabulary,
    listings: &crate::analysis::listings::Listings,
) -> Result<ModuleFacts, crate::error::FileError> {
    use crate::error::FileError;
    let raw =
        crate::source::read_file_limited(path, crate::source::MAX_SOURCE_BYTES, "a Python source")
            .map_err(|source| FileError::Read {
                path: path.to_path_buf(),
                source,
            })?;
    let source =
        crate::source::Source::decode(raw).map_err(|e| FileError::decode(path.to_path_buf(), e))?;
    let parsed = crate::parse::parse_checked(&source.text).map_err(|p| FileError::Syntax {
        path: path.to_path_buf(),
        at: p.at,
        what: format!("{}; the module was read through an import", p.what),
    })?;
    let build = || {
        ModuleFacts::build(
            path,
            parsed.tree.root_node(),
            &source.text,
            vocabulary,
            None,
            None,
            listings,
        )
    };
    Ok(if parsed.is_deep() {
        crate::parse::on_big_stack(build)
    } else {
        build()
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier, Mutex};

    use super::{ModuleCache, Once, once};
    use crate::analysis::project::ProjectIndex;
    use crate::analysis::vocabulary::Vocabulary;

    #[test]
    fn the_python_files_below_a_root_are_its_py_files_spelled_from_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::create_dir_all(root.join("looks_like.py")).unwrap();
        for file in [
            "a.py",
            "pkg/__init__.py",
            "pkg/sub/b.py",
            "notes.txt",
            "pkg/c.pyi",
        ] {
            std::fs::write(root.join(file), "x = 1\n").unwrap();
        }
        let mut found: Vec<_> = super::python_files_below(root).collect();
        found.sort();
        let expected: Vec<_> = ["a.py", "pkg/__init__.py", "pkg/sub/b.py"]
            .iter()
            .map(|file| root.join(file))
            .collect();
        assert_eq!(found, expected);
    }

    /// Threads asking at once for one module that is not indexed read its
    /// file once: the others wait for that reading. Counted by the error a
    /// reading of a broken file records (a large file, so that every
    /// thread asks while the first is still parsing it).
    #[test]
    fn a_module_asked_for_by_many_threads_at_once_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.py");
        let mut text = String::new();
        for i in 0..20_000 {
            text.push_str(&format!("def f{i}(m):\n    m.to('cuda')\n"));
        }
        text.push_str("def broken(:\n");
        std::fs::write(&path, &text).unwrap();
        let vocabulary = Vocabulary::default();
        let cache = Arc::new(ModuleCache::default());
        let index = ProjectIndex::new(Vec::new(), &vocabulary, Arc::clone(&cache));
        const THREADS: usize = 8;
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    barrier.wait();
                    assert!(index.load(&path).is_none());
                });
            }
        });
        assert_eq!(cache.errors.lock().unwrap().len(), 1);
        // A module that reads well: every thread holds the same facts.
        let good = dir.path().join("good.py");
        std::fs::write(&good, "def f(m):\n    m.to('cuda')\n").unwrap();
        let read: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| scope.spawn(|| index.load(&good).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(read.iter().all(|m| Arc::ptr_eq(m, &read[0])));
        assert_eq!(cache.errors.lock().unwrap().len(), 1);
    }

    /// Threads asking at once for one key's answer (the files below a
    /// root that define a name, those that call one) work it out once;
    /// another key has an answer of its own.
    #[test]
    fn an_answer_asked_for_by_many_threads_at_once_is_worked_out_once() {
        let map: Mutex<HashMap<&str, Once<usize>>> = Mutex::default();
        let worked = AtomicUsize::new(0);
        let barrier = Barrier::new(8);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    barrier.wait();
                    let answer = once(&map, "root", || {
                        worked.fetch_add(1, Ordering::SeqCst);
                        // Long enough that every thread asks meanwhile.
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        7
                    });
                    assert_eq!(answer, 7);
                });
            }
        });
        assert_eq!(worked.load(Ordering::SeqCst), 1);
        assert_eq!(once(&map, "other", || 3), 3);
        assert_eq!(once(&map, "root", || 8), 7);
    }
}
