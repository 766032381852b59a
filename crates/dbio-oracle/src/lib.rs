//! dbio-oracle: the Oracle backend, SLOB's own database. `sql` builds every statement (SLOB's
//! USERn / CF1 / I_CF1 schema, server-side load, the sessions' read and update, the V$
//! collector's queries), each with the names it binds; `loader` decides setup's statements
//! from the server's facts (container, tablespace, block size); `metrics` turns two V$
//! snapshots into the engine-neutral figures of result.json; `client` (cargo feature
//! `client`, on by default) runs them through the `oracle` crate, one OS thread and one
//! connection per session.
//!
//! What has run where: the SQL builders and the V$ arithmetic are unit-tested, the latter on
//! the totals of a real SLOB AWR report and on composed PDB and RAC fixtures; the client has
//! never run against an Oracle database in this project's CI (none can be had there). The
//! error a machine without Oracle Instant Client meets is tested with the real binary.

pub mod loader;
pub mod metrics;
pub mod sql;

#[cfg(feature = "client")]
pub mod backend;
#[cfg(feature = "client")]
pub mod client;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum OracleError {
    /// ODPI-C could not load libclntsh (DPI-1047).
    #[error(
        "Oracle Instant Client was not found, and dbio's Oracle backend needs it at run time \
         (DPI-1047). Install Oracle Instant Client 19c or later (the Basic or Basic Light \
         package from oracle.com; on Debian/Ubuntu also `apt-get install libaio1`), then make its \
         folder known: export LD_LIBRARY_PATH=/opt/oracle/instantclient_23_x (or add it to \
         /etc/ld.so.conf.d/ and run ldconfig), or set DBIO_ORACLE_CLIENT_LIB_DIR to it. \
         Details: {0}"
    )]
    NoClient(String),
    /// This binary was built without the `oracle` cargo feature.
    #[error(
        "this dbio was built without the Oracle backend (cargo feature `oracle`); rebuild with \
         default features, or use engine: postgres"
    )]
    NotBuilt,
    #[error("{0}")]
    Usage(String),
    #[error("{context}: {message}")]
    Failed { context: String, message: String },
}

impl OracleError {
    /// 2 for what the user must fix (no client library, bad input), 1 for a failed operation.
    pub fn exit_code(&self) -> u8 {
        match self {
            OracleError::NoClient(_) | OracleError::NotBuilt | OracleError::Usage(_) => 2,
            OracleError::Failed { .. } => 1,
        }
    }

    /// Classifies an error message from the Oracle client: a missing client library becomes
    /// `NoClient`, with what to install; anything else stays a failure of `context`.
    pub fn from_client(context: &str, message: String) -> OracleError {
        if message.contains("DPI-1047") || message.contains("libclntsh") {
            OracleError::NoClient(message)
        } else {
            OracleError::Failed {
                context: context.to_string(),
                message,
            }
        }
    }
}

/// Runs `attempt` on its own thread and waits at most `timeout` for it. The `oracle` crate's
/// Connector has no connect timeout, so a connection attempt to a host that never answers
/// would hang dbio; past the deadline the attempt is abandoned (its thread ends when the
/// network gives up) and the user is told which setting to raise. Exit 2, as for an
/// unreachable target.
pub fn within<T: Send + 'static>(
    timeout: std::time::Duration,
    what: &str,
    attempt: impl FnOnce() -> Result<T, OracleError> + Send + 'static,
) -> Result<T, OracleError> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("dbio-oracle-connect".into())
        .spawn(move || {
            let _ = tx.send(attempt());
        })
        .map_err(|e| OracleError::Failed {
            context: format!("starting {what}"),
            message: e.to_string(),
        })?;
    match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(OracleError::Usage(format!(
            "{what} did not finish within {timeout:?} (target.connect_timeout): check the host, port \
             and service, or raise target.connect_timeout"
        ))),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(OracleError::Failed {
            context: what.to_string(),
            message: "the attempt ended abnormally".into(),
        }),
    }
}

/// The parts of an Oracle connect string: `user[/password]@connect_identifier`
/// (EZConnect `//host:port/service`, a TNS alias, or a full descriptor).
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectString {
    pub user: String,
    pub password: Option<String>,
    pub connect: String,
}

impl std::fmt::Debug for ConnectString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl ConnectString {
    /// Parses `user[/password]@connect`; the password may instead come from
    /// DBIO_ORACLE_PASSWORD (never printed either way).
    pub fn parse(dsn: &str, env_password: Option<String>) -> Result<ConnectString, OracleError> {
        let bad = || {
            OracleError::Usage(format!(
                "the Oracle target \"{}\" is not valid: write it as user@//host:port/service \
                 (the password in DBIO_ORACLE_PASSWORD, or user/password@...)",
                redact(dsn)
            ))
        };
        let (cred, connect) = dsn.rsplit_once('@').ok_or_else(bad)?;
        let (user, password) = match cred.split_once('/') {
            Some((u, p)) => (u, Some(p.to_string())),
            None => (cred, env_password),
        };
        if user.is_empty() || connect.is_empty() {
            return Err(bad());
        }
        Ok(ConnectString {
            user: user.to_string(),
            password,
            connect: connect.to_string(),
        })
    }

    /// `user@connect`, never the password.
    pub fn redacted(&self) -> String {
        format!("{}@{}", self.user, self.connect)
    }
}

/// The target as the user wrote it, without what could be a password.
fn redact(dsn: &str) -> String {
    match dsn.rsplit_once('@') {
        Some((cred, connect)) => format!("{}@{connect}", cred.split('/').next().unwrap_or("")),
        // No user part: an EZConnect string is safe to show; "user/password" is not.
        None if dsn.starts_with("//") => dsn.to_string(),
        None => format!("{}/...", dsn.split('/').next().unwrap_or("")),
    }
}

/// The password of the schema users: DBIO_ORACLE_USER_PASSWORD, else SLOB's habit (the user
/// name).
pub fn schema_password(user: &str, env: Option<String>) -> String {
    env.filter(|p| !p.is_empty())
        .unwrap_or_else(|| user.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_client_library_says_what_to_install() {
        let e = OracleError::from_client(
            "connecting",
            "DPI Error: DPI-1047: Cannot locate a 64-bit Oracle Client library: \"libclntsh.so: cannot open shared object file\"".into(),
        );
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(
            m.contains("Instant Client")
                && m.contains("LD_LIBRARY_PATH")
                && m.contains("DBIO_ORACLE_CLIENT_LIB_DIR"),
            "{m}"
        );
        let other =
            OracleError::from_client("connecting", "ORA-01017: invalid username/password".into());
        assert_eq!(other.exit_code(), 1);
    }

    #[test]
    fn a_connection_attempt_that_hangs_is_given_up_at_the_connect_timeout() {
        use std::time::{Duration, Instant};
        let started = Instant::now();
        let e = within(Duration::from_millis(200), "connecting to u@//db/X", || {
            std::thread::sleep(Duration::from_secs(30));
            Ok(())
        })
        .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(
            m.contains("connecting to u@//db/X") && m.contains("target.connect_timeout"),
            "{m}"
        );
        // An attempt that answers in time passes its own result through, error or not.
        assert_eq!(within(Duration::from_secs(5), "x", || Ok(7)).unwrap(), 7);
        let e = within::<()>(Duration::from_secs(5), "x", || {
            Err(OracleError::from_client(
                "connecting",
                "ORA-12514: no listener".into(),
            ))
        })
        .unwrap_err();
        assert!(e.to_string().contains("ORA-12514"));
    }

    #[test]
    fn connect_strings_keep_the_password_out_of_sight() {
        let c = ConnectString::parse("system/manager@//db:1521/ORCLPDB1", None).unwrap();
        assert_eq!(c.user, "system");
        assert_eq!(c.password.as_deref(), Some("manager"));
        assert_eq!(c.connect, "//db:1521/ORCLPDB1");
        assert_eq!(c.redacted(), "system@//db:1521/ORCLPDB1");
        assert!(!format!("{c:?}").contains("manager"));
        let c = ConnectString::parse("system@//db/X", Some("pw".into())).unwrap();
        assert_eq!(c.password.as_deref(), Some("pw"));
        let e = ConnectString::parse("system/secret", None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("user@//host:port/service") && !e.contains("secret"),
            "{e}"
        );
        assert_eq!(schema_password("USER1", None), "USER1");
        assert_eq!(schema_password("USER1", Some("x".into())), "x");
    }
}
