//! Atomic writes. The new content goes to a temporary file in the same
//! directory (same filesystem, so the rename is atomic), is flushed to disk,
//! gets the original's permissions and owner, and replaces the original by
//! rename, but only if the original still holds the bytes hookfence read: a
//! file changed by someone else meanwhile is left with the newer content.
//! After the rename the directory is flushed too, so that after a crash the
//! file is whole, old or new. A symlink named on the command line is written
//! through: its target is replaced, the link stays.
//!
//! On every failure (the directory is not writable, the disk fills up, the
//! file is immutable, ...) the temporary file is removed and the original is
//! left as it was.
//!
//! Debug builds read two test hooks from the environment, never compiled into
//! a release: `HOOKFENCE_TEST_PAUSE_BEFORE_RENAME` (see
//! [`crate::interrupt::test_pause`]) holds each write just before its last
//! look at the original, and `HOOKFENCE_FAULT=<kind>:<path>` makes the write
//! of a file whose path ends with `<path>` fail where the kernel would:
//! `create` (no temporary file can be made: `EACCES`), `write-enospc` (the
//! disk fills up halfway through the content: `ENOSPC`), `rename` (the
//! original cannot be replaced: `EPERM`).

use std::fs;
use std::path::Path;

use crate::error::FileError;

pub fn write_atomic(path: &Path, expected: &[u8], contents: &[u8]) -> Result<(), FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let target = fs::canonicalize(path).map_err(err)?;
    let dir = target
        .parent()
        .ok_or_else(|| err(std::io::Error::other("file has no parent directory")))?;
    let metadata = fs::metadata(&target).map_err(err)?;

    fault::inject(path, fault::Kind::Create).map_err(err)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".hookfence-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    // From here on, an early return drops `temp`, which removes the file.
    fault::write_all(path, temp.as_file_mut(), contents).map_err(err)?;
    temp.as_file().sync_all().map_err(err)?;
    // Owner first: a change of owner clears the setuid and setgid bits, so
    // the mode is set after it, bits and all.
    keep_owner(temp.as_file(), &metadata).map_err(err)?;
    temp.as_file()
        .set_permissions(metadata.permissions())
        .map_err(err)?;
    keep_mode(temp.as_file(), &metadata).map_err(err)?;

    crate::interrupt::test_pause("HOOKFENCE_TEST_PAUSE_BEFORE_RENAME");
    // Last look before the rename: is the original still what was read?
    let current = fs::read(&target).map_err(err)?;
    if current != expected {
        return Err(FileError::ChangedOnDisk {
            path: path.to_path_buf(),
        });
    }
    fault::inject(path, fault::Kind::Rename).map_err(err)?;
    temp.persist(&target).map_err(|e| err(e.error))?;
    sync_dir(dir);
    Ok(())
}

/// Gives the temporary file the original's owner and group, where they
/// differ (a run as root on another user's tree must not hand the files to
/// root). A user who may not do that gets an error, and the original stays.
#[cfg(unix)]
fn keep_owner(file: &fs::File, original: &fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let now = file.metadata()?;
    if (now.uid(), now.gid()) == (original.uid(), original.gid()) {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(original.uid()), Some(original.gid())).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot give the new file the original's owner {}:{} ({e})",
                original.uid(),
                original.gid()
            ),
        )
    })
}

/// Checks the new file's mode is the original's, every bit (setuid, setgid
/// and sticky included): a kernel or filesystem that will not set one gets
/// an error, and the original stays.
#[cfg(unix)]
fn keep_mode(file: &fs::File, original: &fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let want = original.permissions().mode() & 0o7777;
    let now = file.metadata()?.permissions().mode() & 0o7777;
    if now == want {
        return Ok(());
    }
    Err(std::io::Error::other(format!(
        "cannot give the new file the original's mode {want:o} (it got {now:o})"
    )))
}

#[cfg(not(unix))]
fn keep_mode(_file: &fs::File, _original: &fs::Metadata) -> std::io::Result<()> {
    Ok(())
}

#[cfg(not(unix))]
fn keep_owner(_file: &fs::File, _original: &fs::Metadata) -> std::io::Result<()> {
    Ok(())
}

/// Flushes a directory's entries (the rename) to disk. Best effort: the file
/// is already in place, and some filesystems cannot sync a directory.
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(handle) = fs::File::open(dir) {
        let _ = handle.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Checks, without creating anything, that a new file could be made at
/// `path` now: nothing is there (not even a dangling symlink), its directory
/// exists, is a directory, and this process may write it (asked of the
/// kernel with `faccessat(2)`, which also sees read-only mounts and
/// immutable directories, as root too). The dry run asks this of every file
/// a run would create, so it fails where `--apply` would.
pub fn check_creatable(path: &Path) -> Result<(), FileError> {
    let refuse = |kind, what: String| FileError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::new(kind, what),
    };
    if fs::symlink_metadata(path).is_ok() {
        return Err(refuse(
            std::io::ErrorKind::AlreadyExists,
            "something is already there".to_owned(),
        ));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    match fs::metadata(dir) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(
                err.kind(),
                format!(
                    "its directory {} does not exist (hookfence creates no directories)",
                    dir.display()
                ),
            ));
        }
        Err(err) => return Err(refuse(err.kind(), format!("{}: {err}", dir.display()))),
        Ok(meta) if !meta.is_dir() => {
            return Err(refuse(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(_) => {}
    }
    may_write(dir).map_err(|err| refuse(err.kind(), format!("{}: {err}", dir.display())))
}

/// Whether this process may create files in `dir`.
#[cfg(unix)]
fn may_write(dir: &Path) -> std::io::Result<()> {
    use rustix::fs::{Access, AtFlags, CWD};
    rustix::fs::accessat(
        CWD,
        dir,
        Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::EACCESS,
    )
    .map_err(std::io::Error::from)
}

#[cfg(not(unix))]
fn may_write(dir: &Path) -> std::io::Result<()> {
    if fs::metadata(dir)?.permissions().readonly() {
        return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
    }
    Ok(())
}

fn temp_in(path: &Path) -> Result<tempfile::NamedTempFile, FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fault::inject(path, fault::Kind::Create).map_err(err)?;
    tempfile::Builder::new()
        .prefix(".hookfence-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)
}

/// A temporary file beside `path` holding `contents`, flushed to disk, with
/// the usual mode of a new module (a temporary file is created 0600; the
/// umask still applies to what the user has not granted).
fn new_file_temp(path: &Path, contents: &[u8]) -> Result<tempfile::NamedTempFile, FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut temp = temp_in(path)?;
    fault::write_all(path, temp.as_file_mut(), contents).map_err(err)?;
    temp.as_file().sync_all().map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o644)).map_err(err)?;
    }
    fault::inject(path, fault::Kind::Rename).map_err(err)?;
    Ok(temp)
}

fn sync_parent(path: &Path) {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}

/// Creates a file that must not exist yet, atomically: it appears whole or
/// not at all, and an existing file of that name is never replaced.
pub fn create_new(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    let temp = new_file_temp(path, contents)?;
    temp.persist_noclobber(path).map_err(|e| FileError::Write {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_parent(path);
    Ok(())
}

/// Replaces a file hookfence wrote before (the `--decisions` record),
/// atomically, only while `path` is still a regular file (not a link)
/// holding `expected`: anything else found there at the last look is left as
/// it is ([`FileError::ChangedOnDisk`]). The link itself, never its target,
/// would be what the rename replaces.
pub fn replace_unchanged(path: &Path, expected: &[u8], contents: &[u8]) -> Result<(), FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let temp = new_file_temp(path, contents)?;
    let still = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
        && fs::read(path).is_ok_and(|now| now == expected);
    if !still {
        return Err(FileError::ChangedOnDisk {
            path: path.to_path_buf(),
        });
    }
    temp.persist(path).map_err(|e| err(e.error))?;
    sync_parent(path);
    Ok(())
}

/// Fault injection for tests (debug builds only; see the module docs).
mod fault {
    use std::io::Write;
    use std::path::Path;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Kind {
        Create,
        WriteEnospc,
        Rename,
    }

    /// The fault `HOOKFENCE_FAULT` asks for at `path`, if any.
    #[cfg(debug_assertions)]
    fn wanted(path: &Path, kind: Kind) -> bool {
        let Some(spec) = std::env::var_os("HOOKFENCE_FAULT") else {
            return false;
        };
        let Some(spec) = spec.to_str() else {
            return false;
        };
        spec.split(';').any(|one| {
            let Some((name, suffix)) = one.split_once(':') else {
                return false;
            };
            let named = match name {
                "create" => Kind::Create,
                "write-enospc" => Kind::WriteEnospc,
                "rename" => Kind::Rename,
                _ => return false,
            };
            named == kind && path.ends_with(suffix)
        })
    }

    #[cfg(not(debug_assertions))]
    #[inline(always)]
    fn wanted(_path: &Path, _kind: Kind) -> bool {
        false
    }

    /// Fails as the kernel would for `kind`, if asked to.
    pub(super) fn inject(path: &Path, kind: Kind) -> std::io::Result<()> {
        if !wanted(path, kind) {
            return Ok(());
        }
        let errno = match kind {
            Kind::Create => 13,      // EACCES
            Kind::WriteEnospc => 28, // ENOSPC
            Kind::Rename => 1,       // EPERM
        };
        Err(std::io::Error::from_raw_os_error(errno))
    }

    /// `file.write_all(contents)`, or half of it and then `ENOSPC`.
    pub(super) fn write_all(
        path: &Path,
        file: &mut std::fs::File,
        contents: &[u8],
    ) -> std::io::Result<()> {
        if wanted(path, Kind::WriteEnospc) {
            file.write_all(&contents[..contents.len() / 2])?;
            return inject(path, Kind::WriteEnospc);
        }
        file.write_all(contents)
    }
}
