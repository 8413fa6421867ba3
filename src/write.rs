//! Atomic writes. The new content goes to a temporary file in the same
//! directory (same filesystem, so the rename is atomic), is flushed to disk,
//! gets the original's permissions, and replaces the original by rename, but
//! only if the original still holds the bytes hookfence read: a file changed
//! by someone else meanwhile is left with the newer content. A symlink named on
//! the command line is written through: its target is replaced, the link stays.

use std::fs;
use std::io::Write;
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
    let permissions = fs::metadata(&target).map_err(err)?.permissions();

    let mut temp = tempfile::Builder::new()
        .prefix(".hookfence-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)?;
    temp.write_all(contents).map_err(err)?;
    temp.as_file().sync_all().map_err(err)?;
    fs::set_permissions(temp.path(), permissions).map_err(err)?;

    // Last look before the rename: is the original still what was read?
    let current = fs::read(&target).map_err(err)?;
    if current != expected {
        return Err(FileError::ChangedOnDisk {
            path: path.to_path_buf(),
        });
    }
    // On failure the temporary file is removed when `temp` drops.
    temp.persist(&target).map_err(|e| err(e.error))?;
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
    tempfile::Builder::new()
        .prefix(".hookfence-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(err)
}

/// Creates a file that must not exist yet, atomically: it appears whole or
/// not at all, and an existing file of that name is never replaced.
pub fn create_new(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut temp = temp_in(path)?;
    temp.write_all(contents).map_err(err)?;
    temp.as_file().sync_all().map_err(err)?;
    // A temporary file is created 0600; a new module gets the usual 0644
    // (less the umask bits the user has not granted anyway).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o644)).map_err(err)?;
    }
    temp.persist_noclobber(path).map_err(|e| err(e.error))?;
    Ok(())
}

/// Writes a file hookfence owns (the generated pytest), atomically, replacing
/// any previous version.
pub fn replace(path: &Path, contents: &[u8]) -> Result<(), FileError> {
    let err = |source| FileError::Write {
        path: path.to_path_buf(),
        source,
    };
    let mut temp = temp_in(path)?;
    temp.write_all(contents).map_err(err)?;
    temp.as_file().sync_all().map_err(err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(temp.path(), fs::Permissions::from_mode(0o644)).map_err(err)?;
    }
    temp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}
