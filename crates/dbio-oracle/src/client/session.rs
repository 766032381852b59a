//! The measured sessions: one connection each as its schema's user, the read and update
//! prepared. They are opened a few at a time (`open_staggered`), each schema user's first
//! logon before any other session of it, so a wrong password fails once per user and the
//! account cannot lock. A session's statement is broken at the window's end only while a call
//! is in flight, and the session logs off on its own thread within [`LOGOFF_DEADLINE`].
//!
//! [`LOGOFF_DEADLINE`]: super::LOGOFF_DEADLINE

use std::collections::BTreeMap;
use std::sync::Arc;

use dbio_core::driver::{Canceller, OpError, Session, SessionSpec};
use oracle::Statement;
use oracle::sql_type::ToSql;

use super::records::Password;
use super::{Conn, Result, Timeouts, break_if_in_call, connect};
use crate::{ConnectString, OracleError, checks, open_staggered, sql};

/// Connection attempts in flight at once (SLOB's runit.sh pauses after every 17 sqlplus).
pub const CONNECT_WIDTH: usize = 8;

/// A measured session. Field order matters: the statements are dropped (closed) before the
/// connection logs off.
pub struct OraSession {
    read: Statement,
    read_names: Vec<&'static str>,
    update: Statement,
    update_names: Vec<&'static str>,
    conn: Conn,
}

impl OraSession {
    fn open(
        target: &str,
        spec: &SessionSpec,
        password: &Password,
        heavy: bool,
        timeouts: &Timeouts,
    ) -> Result<OraSession> {
        let user = &spec.schema;
        let cs = ConnectString {
            user: user.clone(),
            password: Some(password.secret.clone()),
            connect: target.to_string(),
        };
        let conn = match connect(&cs, Some(&spec.name), timeouts) {
            Ok(c) => c,
            Err(OracleError::Usage(m)) if m.contains("refused the logon") => {
                return Err(checks::logon_failure(user, &password.source, &m));
            }
            Err(e) => return Err(e),
        };
        let (read_sql, update_sql) = (sql::read_range(user), sql::update_range(user, heavy));
        let prepare = |text: &str, what: &str| {
            conn.raw().statement(text).build().map_err(|e| {
                OracleError::from_client(
                    &format!("{}: preparing the {what}", spec.name),
                    e.to_string(),
                )
            })
        };
        let read = prepare(&read_sql.text, "read")?;
        let update = prepare(&update_sql.text, "update")?;
        Ok(OraSession {
            read,
            read_names: read_sql.names(),
            update,
            update_names: update_sql.names(),
            conn,
        })
    }

    /// Marks the call in flight around `f` (the canceller breaks only such a call).
    fn in_call<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        use std::sync::atomic::Ordering;
        self.conn.inner.in_call.store(true, Ordering::SeqCst);
        let r = f(self);
        self.conn.inner.in_call.store(false, Ordering::SeqCst);
        r
    }
}

/// Opens the sessions of `specs` (each with its connect identifier) as their schemas' users:
/// the first session of every user first, at most one logon attempt per user, then the rest,
/// `CONNECT_WIDTH` at a time; the first failure stops the opening.
pub fn open_sessions(
    specs: &[(SessionSpec, String)],
    passwords: &BTreeMap<String, Password>,
    heavy: bool,
    timeouts: &Timeouts,
) -> Result<Vec<(SessionSpec, OraSession)>> {
    let password = |user: &str| {
        passwords.get(user).ok_or_else(|| OracleError::Failed {
            context: format!("opening a session of {user}"),
            message: "the run's preflight found no password for this schema".into(),
        })
    };
    let mut firsts: Vec<usize> = Vec::new();
    let mut rest: Vec<usize> = Vec::new();
    for (i, (spec, _)) in specs.iter().enumerate() {
        if firsts.iter().any(|&f| specs[f].0.schema == spec.schema) {
            rest.push(i);
        } else {
            firsts.push(i);
        }
    }
    let open = |idx: &[usize]| {
        open_staggered(idx.len(), CONNECT_WIDTH, |k| {
            let (spec, target) = &specs[idx[k]];
            OraSession::open(target, spec, password(&spec.schema)?, heavy, timeouts)
                .map(|s| (spec.clone(), s))
        })
    };
    let mut all = open(&firsts)?;
    all.extend(open(&rest)?);
    all.sort_by_key(|(s, _)| s.index);
    Ok(all)
}

fn op_error(e: oracle::Error) -> OpError {
    let message = e.to_string();
    // ORA-03113/03114/03135: the connection is gone; ORA-00028: session killed.
    let fatal = [
        "ORA-03113",
        "ORA-03114",
        "ORA-03135",
        "ORA-00028",
        "DPI-1010",
        "DPI-1080",
    ]
    .iter()
    .any(|c| message.contains(c));
    OpError { message, fatal }
}

/// The range's named parameters: `lo` and `hi` the keys, every other name (the update's
/// filler columns) the value.
fn range_params<'a>(
    names: &[&'static str],
    lo: &'a i64,
    hi: &'a i64,
    value: &'a dyn ToSql,
) -> Vec<(&'static str, &'a dyn ToSql)> {
    names
        .iter()
        .map(|&n| {
            let v: &dyn ToSql = match n {
                "lo" => lo,
                "hi" => hi,
                _ => value,
            };
            (n, v)
        })
        .collect()
}

impl Session for OraSession {
    fn read(&mut self, lo: i64, hi: i64) -> std::result::Result<u64, OpError> {
        self.in_call(|s| {
            let params = range_params(&s.read_names, &lo, &hi, &lo);
            let n: i64 = s.read.query_row_as_named(&params).map_err(op_error)?;
            Ok(n.max(0) as u64)
        })
    }

    fn update(&mut self, lo: i64, hi: i64, value: &str) -> std::result::Result<u64, OpError> {
        self.in_call(|s| {
            let params = range_params(&s.update_names, &lo, &hi, &value);
            s.update.execute_named(&params).map_err(op_error)?;
            let rows = s.update.row_count().map_err(op_error)?;
            s.conn.raw().commit().map_err(op_error)?;
            Ok(rows)
        })
    }

    /// Breaks the session's call, only while one is in flight: an idle session (between
    /// calls, in a think time, done) gets no break, which would land on its next call. The
    /// canceller holds no reference that keeps the connection open: logoff stays the
    /// session thread's.
    fn canceller(&self) -> Canceller {
        let handle = self.conn.breaker_handle();
        Arc::new(move || break_if_in_call(&handle))
    }

    /// Oracle's V$ views are current as soon as a call returns.
    fn flush_stats(&mut self) {}
}
