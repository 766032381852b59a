//! The core crate's errors. Each variant says what was wrong and, where it can, what to do.

use std::path::PathBuf;

use thiserror::Error;

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

    /// Every core error is a usage or configuration problem: exit code 2.
    pub fn exit_code(&self) -> u8 {
        match self {
            CoreError::Io { .. } | CoreError::NotWritten { .. } => 1,
            _ => 2,
        }
    }
}
