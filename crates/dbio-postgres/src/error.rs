//! The PostgreSQL backend's errors. Each keeps the server's own message and SQLSTATE and adds
//! what the user should do; none of them ever carries a password.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum PgError {
    /// The target could not be reached or refused us: a usage problem (exit 2).
    #[error("cannot connect to {target}: {cause}. {hint}")]
    Connect {
        target: String,
        cause: String,
        hint: String,
    },

    /// The server refused an operation for a reason the user must fix (privileges, a missing
    /// object, a foreign object in the way): exit 2.
    #[error("{context}: {message}{}", hint_suffix(hint))]
    Refused {
        context: String,
        message: String,
        hint: Option<String>,
    },

    /// An operation failed on the server (disk full, a crash, a bug): exit 1.
    #[error("{context}: {message}{}", hint_suffix(hint))]
    Failed {
        context: String,
        message: String,
        hint: Option<String>,
    },

    /// Bad input or a state that forbids the command: exit 2.
    #[error("{0}")]
    Usage(String),

    /// The scratch-cluster manager could not do its work.
    #[error("scratch cluster: {message}")]
    Scratch { message: String, usage: bool },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Ctrl-C or a cancel request stopped the work.
    #[error("interrupted: {0}")]
    Interrupted(String),
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(". {h}"),
        None => String::new(),
    }
}

impl PgError {
    /// The process exit code the CLI should use: 2 for usage and connection problems, 1 for a
    /// failure of the work itself.
    pub fn exit_code(&self) -> u8 {
        match self {
            PgError::Connect { .. } | PgError::Refused { .. } | PgError::Usage(_) => 2,
            PgError::Scratch { usage, .. } => {
                if *usage {
                    2
                } else {
                    1
                }
            }
            PgError::Failed { .. } | PgError::Io { .. } | PgError::Interrupted(_) => 1,
        }
    }

    pub fn scratch_usage(message: impl Into<String>) -> Self {
        PgError::Scratch {
            message: message.into(),
            usage: true,
        }
    }

    pub fn scratch_failed(message: impl Into<String>) -> Self {
        PgError::Scratch {
            message: message.into(),
            usage: false,
        }
    }

    /// Classifies a tokio-postgres error raised while doing `context`, keeping the server's
    /// message (tokio-postgres' Display alone prints only "db error").
    pub fn from_db(context: impl Into<String>, e: &tokio_postgres::Error) -> Self {
        let context = context.into();
        let Some(db) = e.as_db_error() else {
            if e.is_closed() {
                return PgError::Failed {
                    context,
                    message: "the server closed the connection".into(),
                    hint: Some("see the server log; it may have restarted or crashed".into()),
                };
            }
            return PgError::Failed {
                context,
                message: source_chain(e),
                hint: None,
            };
        };
        let code = db.code().code();
        let mut message = format!("{} (SQLSTATE {code})", db.message());
        if let Some(detail) = db.detail() {
            message.push_str(&format!("; {detail}"));
        }
        let server_hint = db.hint().map(str::to_string);
        let refused = |hint: Option<String>| PgError::Refused {
            context: context.clone(),
            message: message.clone(),
            hint: hint.or_else(|| server_hint.clone()),
        };
        match code {
            // insufficient_privilege
            "42501" => refused(Some(
                "grant the privilege to the role dbio connects as, or connect as a role that has it".into(),
            )),
            // undefined_object / undefined_table / invalid_schema_name
            "42704" | "42P01" | "3F000" => refused(None),
            // disk_full, out of space
            "53100" => PgError::Failed {
                context,
                message,
                hint: Some("the server's disk is full: free space, or load into another --tablespace".into()),
            },
            "57014" => PgError::Interrupted(format!("{context}: the statement was cancelled")),
            _ => PgError::Failed {
                context,
                message,
                hint: server_hint,
            },
        }
    }
}

/// The error and its sources on one line: "error connecting to server: Connection refused".
pub fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        cur = s.source();
    }
    text
}

pub type Result<T, E = PgError> = std::result::Result<T, E>;
