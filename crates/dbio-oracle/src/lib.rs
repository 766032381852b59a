//! dbio-oracle: the Oracle backend, SLOB's own database. `sql` builds every statement (SLOB's
//! USERn / CF1 / I_CF1 schema, server-side load, the sessions' read and update, dbio's catalog,
//! the checks' and the collector's queries), each with the names it binds; `mark` is the data
//! set's identity (catalog rows and marks, judged together); `loader` decides setup's
//! statements and setup's and teardown's actions from the server's facts and the records;
//! `privileges`, `checks`, `snapshots` and `plan` are the rules applied before a command
//! changes anything or a run opens a session; `metrics` turns two V$ (or Statspack) snapshots
//! into the engine-neutral figures of result.json and SLOB's awr_info line; `signals` keeps
//! dbio's signal handlers across the Oracle client's initialisation; `client` (cargo feature
//! `client`, on by default) runs them through the `oracle` crate, one OS thread and one
//! connection per session.
//!
//! What has run where: the SQL builders, the rules and the arithmetic are unit-tested, the
//! latter on the totals of a real SLOB AWR report (and the same window as Statspack rows) and on
//! composed PDB and RAC fixtures; the client has never run against an Oracle database in this
//! project's CI (none can be had there). The error a machine without Oracle Instant Client
//! meets is tested with the real binary.

pub mod checks;
pub mod loader;
pub mod mark;
pub mod metrics;
pub mod plan;
pub mod privileges;
pub mod signals;
pub mod snapshots;
pub mod sql;

#[cfg(feature = "client")]
pub mod backend;
#[cfg(feature = "client")]
pub mod client;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum OracleError {
    /// ODPI-C could not load libclntsh (DPI-1047). `hint` says what to install for libaio on
    /// this host.
    #[error(
        "Oracle Instant Client was not found, and dbio's Oracle backend needs it at run time \
         (DPI-1047). Install Oracle Instant Client 19c or later (the Basic or Basic Light \
         package from oracle.com) and libaio ({hint}), then make its folder known: export \
         LD_LIBRARY_PATH=/opt/oracle/instantclient_23_x (or add it to /etc/ld.so.conf.d/ and run \
         ldconfig), or set DBIO_ORACLE_CLIENT_LIB_DIR to it. Details: {details}"
    )]
    NoClient { details: String, hint: String },
    /// This binary was built without the `oracle` cargo feature.
    #[error(
        "this dbio was built without the Oracle backend (cargo feature `oracle`); rebuild with \
         default features, or use engine: postgres"
    )]
    NotBuilt,
    #[error("{0}")]
    Usage(String),
    /// The target cannot be reached (no listener, unknown service, host down, timeout).
    #[error("{context}: the target cannot be reached: {message}")]
    Unreachable { context: String, message: String },
    /// Ctrl-C, SIGTERM or SIGHUP stopped the command; what it left behind is said.
    #[error("{0}")]
    Interrupted(String),
    #[error("{context}: {message}")]
    Failed { context: String, message: String },
}

/// Oracle Net errors that mean the target cannot be reached, or will not take a connection
/// now (ORA-12154 unresolvable name, 12170/12535 timeout, 12505/12514 unknown SID or
/// service, 12516/12519/12520 no handler, 12526/12528 restricted or blocked, 12541 no
/// listener, 12543/12545 host unreachable or unknown, 12547/12537 connection lost, 01034
/// ORACLE not available, 12560 protocol adapter error).
const UNREACHABLE: &[&str] = &[
    "ORA-12154",
    "ORA-12170",
    "ORA-12535",
    "ORA-12505",
    "ORA-12514",
    "ORA-12516",
    "ORA-12519",
    "ORA-12520",
    "ORA-12526",
    "ORA-12528",
    "ORA-12541",
    "ORA-12543",
    "ORA-12545",
    "ORA-12547",
    "ORA-12537",
    "ORA-01034",
    "ORA-12560",
    "DPI-1080",
];

impl OracleError {
    /// What kind of failure this is (the CLI decides the exit code from it): a missing
    /// client library or bad input is the user's to fix, like an unreachable target.
    pub fn kind(&self) -> dbio_core::ErrorKind {
        use dbio_core::ErrorKind;
        match self {
            OracleError::NoClient { .. } | OracleError::NotBuilt | OracleError::Usage(_) => {
                ErrorKind::Usage
            }
            OracleError::Unreachable { .. } => ErrorKind::Unreachable,
            OracleError::Failed { .. } => ErrorKind::Failed,
            OracleError::Interrupted(_) => ErrorKind::Interrupted,
        }
    }

    /// Classifies an error message from the Oracle client: a missing client library becomes
    /// `NoClient`, with what to install; anything else stays a failure of `context`.
    pub fn from_client(context: &str, message: String) -> OracleError {
        if message.contains("DPI-1047") || message.contains("libclntsh") {
            let os_release = std::fs::read_to_string("/etc/os-release").ok();
            OracleError::NoClient {
                hint: checks::libaio_hint(os_release.as_deref()),
                details: message,
            }
        } else {
            OracleError::Failed {
                context: context.to_string(),
                message,
            }
        }
    }

    /// A failed connection attempt: unreachable (exit 2), wrong credentials (exit 2, as bad
    /// configuration), or whatever `from_client` makes of it.
    pub fn connect_failed(context: &str, message: String) -> OracleError {
        if UNREACHABLE.iter().any(|c| message.contains(c)) {
            return OracleError::Unreachable {
                context: context.to_string(),
                message,
            };
        }
        if ["ORA-01017", "ORA-28000", "ORA-28001", "ORA-01045"]
            .iter()
            .any(|c| message.contains(c))
        {
            return OracleError::Usage(format!(
                "{context}: the target refused the logon (check the user and password): {message}"
            ));
        }
        OracleError::from_client(context, message)
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
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(OracleError::Unreachable {
            context: what.to_string(),
            message: format!(
                "no answer within {timeout:?} (target.connect_timeout): check the host, port and \
                 service, or raise target.connect_timeout"
            ),
        }),
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

/// An Oracle target as the user wrote it (`user[/password]@connect`), without what could be a
/// password: `dbio config` and every error show it so.
pub fn redact(dsn: &str) -> String {
    match dsn.rsplit_once('@') {
        Some((cred, connect)) => format!("{}@{connect}", cred.split('/').next().unwrap_or("")),
        // No user part: an EZConnect string is safe to show; "user/password" is not.
        None if dsn.starts_with("//") => dsn.to_string(),
        None => format!("{}/...", dsn.split('/').next().unwrap_or("")),
    }
}

/// Opens `n` things (sessions' connections) with at most `width` attempts at once, in index
/// order, and stops starting new ones after the first failure: SLOB pauses every 17 logons for
/// the same reason (a listener refuses a logon storm, ORA-12516/12520, and a wrong password
/// repeated by every session locks the account). Returns what was opened, in index order,
/// or the first error.
pub fn open_staggered<T: Send, E: Send>(
    n: usize,
    width: usize,
    open: impl Fn(usize) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results = std::sync::Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..width.clamp(1, n.max(1)) {
            scope.spawn(|| {
                loop {
                    if failed.load(Ordering::Acquire) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::AcqRel);
                    if i >= n {
                        break;
                    }
                    let r = open(i);
                    if r.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    if let Ok(mut all) = results.lock() {
                        all.push((i, r));
                    }
                }
            });
        }
    });
    let mut all = results.into_inner().unwrap_or_default();
    all.sort_by_key(|(i, _)| *i);
    let mut out = Vec::with_capacity(all.len());
    let mut first_err = None;
    for (_, r) in all {
        match r {
            Ok(t) => out.push(t),
            Err(e) if first_err.is_none() => first_err = Some(e),
            Err(_) => {}
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(out),
    }
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
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("Instant Client")
                && m.contains("LD_LIBRARY_PATH")
                && m.contains("DBIO_ORACLE_CLIENT_LIB_DIR"),
            "{m}"
        );
        let other = OracleError::from_client("loading USER1", "ORA-01653: unable to extend".into());
        assert_eq!(other.kind(), dbio_core::ErrorKind::Failed);
    }

    // Regression: an unreachable target exited 1 where the README promises 2.
    #[test]
    fn an_unreachable_target_exits_2() {
        for m in [
            "ORA-12541: TNS:no listener",
            "ORA-12514: TNS:listener does not currently know of service requested",
            "ORA-12170: TNS:Connect timeout occurred",
            "ORA-12545: Connect failed because target host or object does not exist",
            "ORA-01034: ORACLE not available",
        ] {
            let e = OracleError::connect_failed("connecting to u@//db/X", m.into());
            assert!(matches!(e, OracleError::Unreachable { .. }), "{m}");
            // The CLI's exit code of Unreachable is 2 (dbio_cli::exit_code).
            assert_eq!(e.kind(), dbio_core::ErrorKind::Unreachable, "{m}");
            assert!(e.to_string().contains("cannot be reached"), "{e}");
        }
        let e = OracleError::connect_failed(
            "connecting",
            "ORA-01017: invalid username/password".into(),
        );
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("refused the logon"), "{e}");
        let e = OracleError::connect_failed("connecting", "ORA-00600: internal error".into());
        assert_eq!(e.kind(), dbio_core::ErrorKind::Failed);
    }

    // Regression: every session connected at once (a logon storm the listener refuses, and a
    // wrong password repeated by each session locks the account).
    #[test]
    fn sessions_open_a_few_at_a_time_and_stop_at_the_first_failure() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;
        let (now, most, tried) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let opened = open_staggered(40, 4, |i| {
            tried.fetch_add(1, Ordering::SeqCst);
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            now.fetch_sub(1, Ordering::SeqCst);
            Ok::<usize, String>(i)
        })
        .unwrap();
        assert_eq!(opened, (0..40).collect::<Vec<_>>(), "in index order");
        assert!(
            most.load(Ordering::SeqCst) <= 4,
            "{}",
            most.load(Ordering::SeqCst)
        );
        tried.store(0, Ordering::SeqCst);
        // Each logon takes 10 ms: the other opener stops within a logon or two of the
        // failure, far below the 100 asked for (CI, busy host: instant logons ran to 20
        // before the failing thread had said so).
        let e = open_staggered(100, 2, |i| {
            tried.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(10));
            if i == 3 {
                Err(format!("failed {i}"))
            } else {
                Ok(i)
            }
        })
        .unwrap_err();
        assert_eq!(e, "failed 3");
        assert!(
            tried.load(Ordering::SeqCst) <= 30,
            "{}",
            tried.load(Ordering::SeqCst)
        );
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
        assert_eq!(e.kind(), dbio_core::ErrorKind::Unreachable);
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
    }
}
