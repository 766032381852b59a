//! The PostgreSQL backend's errors. Each keeps the server's own message and SQLSTATE and adds
//! what the user should do; none of them ever carries a password.

use std::path::PathBuf;

use dbio_core::ErrorKind;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PgError {
    /// The target could not be reached or refused us: [`ErrorKind::Unreachable`].
    #[error("cannot connect to {target}: {cause}. {hint}")]
    Connect {
        target: String,
        cause: String,
        hint: String,
    },

    /// The server refused an operation for a reason the user must fix (privileges, a missing
    /// object, a foreign object in the way): [`ErrorKind::Usage`].
    #[error("{context}: {message}{}", hint_suffix(hint))]
    Refused {
        context: String,
        message: String,
        hint: Option<String>,
    },

    /// An operation failed on the server (disk full, a crash, a bug): [`ErrorKind::Failed`].
    #[error("{context}: {message}{}", hint_suffix(hint))]
    Failed {
        context: String,
        message: String,
        hint: Option<String>,
    },

    /// Bad input or a state that forbids the command: [`ErrorKind::Usage`].
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
    /// What kind of failure this is (the CLI decides the exit code from it).
    pub fn kind(&self) -> ErrorKind {
        match self {
            PgError::Connect { .. } => ErrorKind::Unreachable,
            PgError::Refused { .. } | PgError::Usage(_) => ErrorKind::Usage,
            PgError::Scratch { usage: true, .. } => ErrorKind::Usage,
            PgError::Scratch { usage: false, .. } | PgError::Failed { .. } | PgError::Io { .. } => {
                ErrorKind::Failed
            }
            PgError::Interrupted(_) => ErrorKind::Interrupted,
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
        let position = match db.position() {
            Some(tokio_postgres::error::ErrorPosition::Original(p)) => Some(*p),
            _ => None,
        };
        // The server's words, DETAIL and HINT included; `hint` is only dbio's own advice.
        let message = server_words(db.message(), code, position, db.detail(), db.hint());
        let refused = |hint: Option<String>| PgError::Refused {
            context: context.clone(),
            message: message.clone(),
            hint,
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
            // query_canceled: by statement_timeout (a limit, not the user), or by a cancel
            // request (Ctrl-C, pg_cancel_backend).
            "57014" if is_statement_timeout(db.message()) => PgError::Failed {
                context,
                message,
                hint: Some(STATEMENT_TIMEOUT_HINT.into()),
            },
            "57014" => PgError::Interrupted(format!("{context}: {message}")),
            _ => PgError::Failed {
                context,
                message,
                hint: None,
            },
        }
    }
}

/// The server's words on one line: `message (SQLSTATE code, at character N); DETAIL: ...;
/// HINT: ...`, each part only where the server sent it. Used for tokio-postgres errors and
/// for the measured sessions' own client alike, so an error reads the same everywhere.
pub fn server_words(
    message: &str,
    code: &str,
    position: Option<u32>,
    detail: Option<&str>,
    hint: Option<&str>,
) -> String {
    let mut text = format!("{message} (SQLSTATE {code}");
    if let Some(p) = position {
        text.push_str(&format!(", at character {p}"));
    }
    text.push(')');
    if let Some(d) = detail {
        text.push_str("; DETAIL: ");
        text.push_str(d);
    }
    if let Some(h) = hint {
        text.push_str("; HINT: ");
        text.push_str(h);
    }
    text
}

/// SQLSTATE 57014 raised by statement_timeout rather than by a cancel request
/// (postgres.c: "canceling statement due to statement timeout").
pub fn is_statement_timeout(message: &str) -> bool {
    message.contains("statement timeout")
}

const STATEMENT_TIMEOUT_HINT: &str = "statement_timeout ended it, not an interrupt: dbio sets it to 0 on its own \
     connections and to target.statement_timeout (--statement-timeout) on the sessions; see also \
     `options` in the DSN, PGOPTIONS and the role's settings (SELECT * FROM pg_db_role_setting)";

/// What to do when the server refused a connection: SQLSTATE `code` with its `message`,
/// as role `user` to database `dbname`.
pub fn connect_hint(code: &str, message: &str, user: &str, dbname: &str) -> String {
    match code {
        "28P01" | "28000" => format!(
            "check the password of user `{user}` (PGPASSWORD, ~/.pgpass or the DSN) and pg_hba.conf"
        ),
        "3D000" => format!(
            "create the database (createdb {dbname}) or name another one with --dsn \"dbname=...\""
        ),
        // postinit.c: the role's own CONNECTION LIMIT, not the server's max_connections.
        "53300" if message.contains("too many connections for role") => format!(
            "role `{user}` has reached its CONNECTION LIMIT: run fewer sessions, or raise it with \
             ALTER ROLE {user} CONNECTION LIMIT n (-1 = none); SELECT rolconnlimit FROM pg_roles shows it"
        ),
        "53300" if message.contains("too many connections for database") => format!(
            "database `{dbname}` has reached its CONNECTION LIMIT: run fewer sessions, or raise it with \
             ALTER DATABASE {dbname} CONNECTION LIMIT n (-1 = none)"
        ),
        // superuser_reserved_connections (and 16+ reserved_connections) keep the last slots.
        "53300" if message.contains("reserved") => format!(
            "the server's free connection slots are reserved (superuser_reserved_connections, \
             reserved_connections on 16+) and role `{user}` may not use them: run fewer sessions, \
             raise max_connections, or on 16+ GRANT pg_use_reserved_connections TO {user}"
        ),
        "53300" => {
            "the server has no free connection slots: raise max_connections or run fewer sessions"
                .into()
        }
        "57P03" => "the server is starting up or shutting down: try again in a moment".into(),
        _ => "check --dsn and the PG* environment variables".into(),
    }
}

/// What to do when no server answered at `host` (a host name or a socket directory) and
/// `port`, or it asked for what dbio cannot give.
pub fn unreachable_hint(host: &str, port: u16, user: &str, cause: &str) -> String {
    if cause.contains("password missing") {
        format!(
            "the server asks for a password for user `{user}`: set PGPASSWORD, add it to ~/.pgpass, or put password=... in the DSN"
        )
    } else if host.starts_with('/') {
        // A socket directory: ENOENT (no socket file) or ECONNREFUSED (a stale one).
        format!(
            "no server is listening on the Unix socket {host}/.s.PGSQL.{port}: is the server running, with \
             unix_socket_directories = '{host}' and port {port}? Check host= (the socket directory) and port= \
             in --dsn, PGHOST and PGPORT"
        )
    } else {
        "is the server running and accepting TCP connections there? Check --dsn, PGHOST and PGPORT"
            .into()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_words_keep_detail_hint_and_position() {
        assert_eq!(
            server_words(
                "boom",
                "P0001",
                None,
                Some("row 7"),
                Some("fix the trigger")
            ),
            "boom (SQLSTATE P0001); DETAIL: row 7; HINT: fix the trigger"
        );
        assert_eq!(
            server_words(
                "syntax error at or near \"x\"",
                "42601",
                Some(8),
                None,
                None
            ),
            "syntax error at or near \"x\" (SQLSTATE 42601, at character 8)"
        );
    }

    // A role's CONNECTION LIMIT was answered with "raise max_connections"; a missing Unix
    // socket with a hint about TCP.
    #[test]
    fn hints_fit_the_cause() {
        let role = connect_hint(
            "53300",
            "too many connections for role \"bench\"",
            "bench",
            "db",
        );
        assert!(role.contains("ALTER ROLE bench CONNECTION LIMIT"), "{role}");
        assert!(!role.contains("max_connections"), "{role}");
        let reserved = connect_hint(
            "53300",
            "remaining connection slots are reserved for roles with the SUPERUSER attribute",
            "bench",
            "db",
        );
        assert!(reserved.contains("reserved"), "{reserved}");
        let full = connect_hint("53300", "sorry, too many clients already", "bench", "db");
        assert!(full.contains("max_connections"), "{full}");
        let socket = unreachable_hint(
            "/tmp/nowhere",
            5433,
            "bench",
            "No such file or directory (os error 2)",
        );
        assert!(
            socket.contains("/tmp/nowhere/.s.PGSQL.5433") && !socket.contains("TCP"),
            "{socket}"
        );
        assert!(unreachable_hint("db.example", 5432, "u", "refused").contains("TCP"));
        assert!(is_statement_timeout(
            "canceling statement due to statement timeout"
        ));
        assert!(!is_statement_timeout(
            "canceling statement due to user request"
        ));
    }
}
