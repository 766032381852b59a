//! The core crate's errors. Each variant says what was wrong and, where it can, what to do.

use std::path::PathBuf;

use thiserror::Error;

/// What kind of failure an error is. Library crates say the kind; the CLI alone maps it to
/// an exit code (1 the work failed or was interrupted, 2 bad usage, bad config or an
/// unreachable target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad usage, a bad config or input, or a state the user must change first.
    Usage,
    /// The target could not be reached, or refused the connection.
    Unreachable,
    /// The work itself failed.
    Failed,
    /// Ctrl-C, SIGTERM or SIGHUP stopped the work.
    Interrupted,
}

#[derive(Debug, Error)]
pub enum CoreError {
    #[error("config {}: {message}", path.display())]
    Config { path: PathBuf, message: String },

    /// A result file that cannot be used: missing, malformed, truncated or newer.
    #[error("result {}: {message}", path.display())]
    Result { path: PathBuf, message: String },

    #[error("{key} = {value} is out of range; allowed {allowed}")]
    OutOfRange {
        key: String,
        value: String,
        allowed: String,
    },

    #[error("{key}: {message}")]
    Invalid { key: String, message: String },

    /// A result folder that cannot receive the results: not a folder, already used, or
    /// not writable.
    #[error("result folder {}: {message}", path.display())]
    OutDir { path: PathBuf, message: String },

    /// A result that could not be written where it belongs (what was kept instead is named).
    #[error("{message}")]
    NotWritten { message: String },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CoreError {
    pub fn invalid(key: &str, message: impl Into<String>) -> Self {
        CoreError::Invalid {
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// A result that could not be written failed; every other core error is a usage or
    /// configuration problem.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CoreError::Io { .. } | CoreError::NotWritten { .. } => ErrorKind::Failed,
            _ => ErrorKind::Usage,
        }
    }
}
