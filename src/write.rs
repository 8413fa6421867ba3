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
