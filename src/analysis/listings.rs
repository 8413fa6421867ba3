//! What the directories of a run hold, each listed once: the answers to
//! "is there a file (a directory) at this path" that finding modules asks
//! tens of thousands of times (`pkg/__init__.py`, `root/functools.py` from
//! every import root), one directory read instead of one `stat` each.
//!
//! A directory whose own parent lists no directory of its name is never
//! read: a module looked for under a root that lacks its first part costs
//! nothing past the root's listing. Symbolic links are followed, as
//! [`Path::is_file`] follows them.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// What a path names, as the file system says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Directory,
    /// A socket, a device, a broken link.
    Other,
}

/// What one directory holds.
#[derive(Debug)]
enum Listing {
    /// Its entries, by name.
    Listed(HashMap<OsString, Kind>),
    /// No directory there.
    Absent,
    /// A directory that cannot be read (search permission without read
    /// permission): each path below it is asked of the file system.
    Unreadable,
}

/// Directories listed so far in one run. Kept for one run only: a later
/// run lists them afresh.
#[derive(Debug, Default)]
pub struct Listings {
    /// By the directory's path as spelled, always plainly (see
    /// [`spelled_plainly`]): its bytes hash faster than its components.
    listed: Mutex<crate::analysis::FastMap<OsString, Arc<Listing>>>,
    /// How many directories were read, for tests.
    reads: std::sync::atomic::AtomicUsize,
}

impl Listings {
    /// Whether `path` is a file (following links), as [`Path::is_file`].
    pub fn is_file(&self, path: &Path) -> bool {
        self.kind(path) == Some(Kind::File)
    }

    /// Whether `path` is a directory (following links), as
    /// [`Path::is_dir`].
    pub fn is_dir(&self, path: &Path) -> bool {
        self.kind(path) == Some(Kind::Directory)
    }

    fn kind(&self, path: &Path) -> Option<Kind> {
        // `a/../b` depends on what `a` links to: asked as it is.
        if path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return kind_of(path);
        }
        // `a/./b` is `a/b`; a path spelled so already is used as it is.
        let path: std::borrow::Cow<'_, Path> = match spelled_plainly(path) {
            true => std::borrow::Cow::Borrowed(path),
            false => std::borrow::Cow::Owned(path.components().collect()),
        };
        let Some(name) = path.file_name() else {
            return kind_of(&path);
        };
        // A bare name lies in `.`.
        let parent = match path.parent() {
            Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
            Some(parent) => parent,
            None => return kind_of(&path),
        };
        match &*self.listing(parent) {
            Listing::Listed(entries) => entries.get(name).copied(),
            Listing::Absent => None,
            Listing::Unreadable => kind_of(&path),
        }
    }

    /// What `dir` holds, listed once. Read only where its parent's listing
    /// holds it as a directory (the root and `.` are read directly).
    fn listing(&self, dir: &Path) -> Arc<Listing> {
        let lock = || {
            self.listed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(known) = lock().get(dir.as_os_str()) {
            return Arc::clone(known);
        }
        let has_parent =
            dir.file_name().is_some() && dir.parent().is_some_and(|p| !p.as_os_str().is_empty());
        let listed = if has_parent && !self.is_dir(dir) {
            Listing::Absent
        } else {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            read_listing(dir)
        };
        Arc::clone(
            lock()
                .entry(dir.as_os_str().to_owned())
                .or_insert(Arc::new(listed)),
        )
    }
}

/// Whether `path` is spelled as its components put together again spell
/// it: no `//`, no `/./`, no trailing `/` or `/.` (a leading `./` stays).
/// Only asked on Unix, where `/` is the one separator; elsewhere every path
/// is rebuilt.
fn spelled_plainly(path: &Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    cfg!(unix)
        && bytes.len() > 1
        && !bytes.ends_with(b"/")
        && !bytes.ends_with(b"/.")
        && memchr::memmem::find(bytes, b"//").is_none()
        && memchr::memmem::find(bytes, b"/./").is_none()
}

/// What `path` is, asked of the file system (following links).
fn kind_of(path: &Path) -> Option<Kind> {
    let metadata = std::fs::metadata(path).ok()?;
    Some(if metadata.is_file() {
        Kind::File
    } else if metadata.is_dir() {
        Kind::Directory
    } else {
        Kind::Other
    })
}

/// Reads `dir`'s entries and what each is, following links.
fn read_listing(dir: &Path) -> Listing {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(_) if dir.is_dir() => return Listing::Unreadable,
        Err(_) => return Listing::Absent,
    };
    let mut listing = HashMap::new();
    for entry in entries.filter_map(Result::ok) {
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let kind = if file_type.is_symlink() {
            kind_of(&entry.path()).unwrap_or(Kind::Other)
        } else if file_type.is_file() {
            Kind::File
        } else if file_type.is_dir() {
            Kind::Directory
        } else {
            Kind::Other
        };
        listing.insert(entry.file_name(), kind);
    }
    Listing::Listed(listing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_as_the_file_system_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
        std::fs::write(root.join("pkg/sub/mod.py"), "").unwrap();
        let listings = Listings::default();
        let cases = [
            "pkg",
            "pkg/__init__.py",
            "pkg/sub",
            "pkg/sub/mod.py",
            "pkg/sub/__init__.py",
            "pkg/missing/__init__.py",
            "missing/deeper/x.py",
            "pkg/__init__.py/x",
            "pkg/sub/..",
            "pkg/./sub",
            "pkg//sub",
            "pkg/sub/",
            "pkg/sub/.",
            "pkg//sub//mod.py",
            "pkg/./sub/./mod.py",
        ];
        for case in cases {
            let path = root.join(case);
            assert_eq!(listings.is_file(&path), path.is_file(), "{case}");
            assert_eq!(listings.is_dir(&path), path.is_dir(), "{case}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/a.py"), "").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("linked")).unwrap();
        std::os::unix::fs::symlink(root.join("real/a.py"), root.join("b.py")).unwrap();
        std::os::unix::fs::symlink(root.join("nowhere"), root.join("broken.py")).unwrap();
        let listings = Listings::default();
        assert!(listings.is_dir(&root.join("linked")));
        assert!(listings.is_file(&root.join("linked/a.py")));
        assert!(listings.is_file(&root.join("b.py")));
        assert!(!listings.is_file(&root.join("broken.py")));
    }

    #[test]
    fn a_missing_directory_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let listings = Listings::default();
        assert!(!listings.is_file(&dir.path().join("x.py")));
        let reads = listings.reads.load(std::sync::atomic::Ordering::Relaxed);
        // `a` is not in the temporary directory's listing: nothing below
        // it is read, and nothing is read twice.
        assert!(!listings.is_file(&dir.path().join("a/b/c/d.py")));
        assert!(!listings.is_dir(&dir.path().join("a/b")));
        assert!(!listings.is_file(&dir.path().join("x.py")));
        assert_eq!(
            listings.reads.load(std::sync::atomic::Ordering::Relaxed),
            reads
        );
    }
}
