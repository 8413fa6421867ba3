//! Errors that stop one file from being processed. Each names the file and,
//! where there is one, a 1-based `line:col`. None of them aborts a run: the
//! file is left byte-for-byte as it was and the run exits 2 at the end.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::source::DecodeError;

/// A 1-based position in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },

    #[error("{}: not a regular file", path.display())]
    NotAFile { path: PathBuf },

    #[error("{}:{at}: {what}", path.display())]
    Decode {
        path: PathBuf,
        at: Position,
        what: String,
    },

    #[error("{}:{at}: {what}", path.display())]
    Syntax {
        path: PathBuf,
        at: Position,
        what: String,
    },

    #[error("{}:{at}: the rewritten file would not parse ({what}); nothing was written", path.display())]
    RewriteInvalid {
        path: PathBuf,
        at: Position,
        what: String,
    },

    #[error("{}: changed on disk while hookfence ran; the newer content was kept", path.display())]
    ChangedOnDisk { path: PathBuf },

    #[error("{}: cannot write: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },

    #[error("{what}")]
    Helper { path: PathBuf, what: String },
}

impl FileError {
    pub fn decode(path: PathBuf, err: DecodeError) -> FileError {
        let (at, what) = match err {
            DecodeError::InvalidUtf8 { line, column } => (
                Position { line, column },
                "invalid UTF-8 and no PEP 263 coding cookie".to_owned(),
            ),
            DecodeError::UnknownEncoding { line, name } => (
                Position { line, column: 1 },
                format!("unknown encoding {name:?} in coding cookie"),
            ),
            DecodeError::Undecodable {
                line,
                column,
                codec,
                byte,
            } => (
                Position { line, column },
                format!(
                    "syntax error: the {codec} codec cannot decode byte 0x{byte:02x} (CPython rejects it)"
                ),
            ),
            DecodeError::NotRoundTrip { encoding } => (
                Position { line: 1, column: 1 },
                format!("{encoding} text that does not decode and encode back to the same bytes"),
            ),
            DecodeError::NulByte { line, column } => {
                (Position { line, column }, "NUL byte in source".to_owned())
            }
        };
        FileError::Decode { path, at, what }
    }

    pub fn path(&self) -> &std::path::Path {
        match self {
            FileError::Read { path, .. }
            | FileError::NotAFile { path }
            | FileError::Decode { path, .. }
            | FileError::Syntax { path, .. }
            | FileError::RewriteInvalid { path, .. }
            | FileError::ChangedOnDisk { path }
            | FileError::Write { path, .. }
            | FileError::Helper { path, .. } => path,
        }
    }

    /// The line printed for the user: the error, then what happened to the file.
    pub fn report(&self) -> String {
        format!("{self} \u{2014} left unchanged")
    }
}
