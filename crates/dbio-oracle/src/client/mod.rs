//! The Oracle backend through the `oracle` crate (ODPI-C). Every call blocks: setup, check,
//! teardown and the collector run on blocking threads, and each measured session is a
//! `driver::Session` on its own OS thread with one connection, as SLOB's one SQL*Plus per
//! session.
//!
//! Every statement comes from `sql` as a [`Stmt`] and is bound by name only. Every connection
//! is a [`Conn`]: it knows whether a call is in flight, so an interrupt ([`Breaker`]) breaks
//! only connections that are in a call, and it logs off on the thread that owns it, within
//! [`LOGOFF_DEADLINE`], so a server that stopped answering cannot hang the end of a command.

mod collect;
mod records;
mod session;
mod setup;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

use oracle::RowValue;
use oracle::sql_type::{OracleType, ToSql};
use oracle::{Connection, Connector, InitParams};

use crate::loader::{self, Container, Tablespace};
use crate::sql::{self, Stmt, Value};
use crate::{ConnectString, OracleError, within};

pub use collect::{Sampler, Samples, awr_report, awr_snapshot, snapshot, statspack};
pub use records::{PackAndPlan, RunFacts, data_sets, pack_facts, run_preflight};
pub use session::{OraSession, open_sessions};
pub use setup::{check, setup, teardown, teardown_plan};

type Result<T> = std::result::Result<T, OracleError>;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The longest a logoff may take: past it the connection is dropped without waiting for the
/// server (its process is then cleaned up by the server's dead connection detection).
pub const LOGOFF_DEADLINE: Duration = Duration::from_secs(3);

/// How long a connection attempt, and one round trip of a measured session, may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// target.connect_timeout.
    pub connect: Duration,
    /// target.statement_timeout (None = no limit): the measured sessions' call timeout
    /// (dpiConn_setCallTimeout; a timed-out call fails with DPI-1067 and the connection stays
    /// usable, or ORA-03114 when the cleanup did not finish in time).
    pub call: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            call: None,
        }
    }
}

/// Points ODPI-C at DBIO_ORACLE_CLIENT_LIB_DIR when it is set (once per process).
fn init_client() -> Result<()> {
    static INIT: Once = Once::new();
    let mut failure = None;
    INIT.call_once(|| {
        if let Some(dir) = env("DBIO_ORACLE_CLIENT_LIB_DIR") {
            let (r, _) = crate::signals::keep_handlers(|| {
                InitParams::new()
                    .oracle_client_lib_dir(&dir)
                    .and_then(|p| p.init().map(|_| ()))
            });
            if let Err(e) = r {
                failure = Some(OracleError::from_client(
                    "loading Oracle Instant Client from DBIO_ORACLE_CLIENT_LIB_DIR",
                    e.to_string(),
                ));
            }
        }
    });
    failure.map_or(Ok(()), Err)
}

/// A connection and whether a call is in flight on it.
struct Tracked {
    conn: Connection,
    in_call: AtomicBool,
}

/// A connection dbio owns. Its calls go through `Conn::call`, which marks them in flight;
/// it logs off when dropped, on the dropping thread, within [`LOGOFF_DEADLINE`].
pub struct Conn {
    inner: Arc<Tracked>,
}

impl Conn {
    fn new(conn: Connection) -> Conn {
        Conn {
            inner: Arc::new(Tracked {
                conn,
                in_call: AtomicBool::new(false),
            }),
        }
    }

    /// Runs one call on the connection, marked in flight; `stop` (an interrupt) seen just
    /// before the call starts stops it there.
    fn call<T>(
        &self,
        breaker: Option<&Breaker>,
        f: impl FnOnce(&Connection) -> oracle::Result<T>,
        context: &str,
    ) -> Result<T> {
        self.inner.in_call.store(true, Ordering::SeqCst);
        if let Some(b) = breaker
            && let Some(by) = b.stopped()
        {
            self.inner.in_call.store(false, Ordering::SeqCst);
            return Err(OracleError::Interrupted(format!(
                "{context}: not started, interrupted by {by}"
            )));
        }
        let r = f(&self.inner.conn);
        self.inner.in_call.store(false, Ordering::SeqCst);
        r.map_err(|e| match breaker.and_then(Breaker::stopped) {
            Some(by) => OracleError::Interrupted(format!("{context}: interrupted by {by} ({e})")),
            None => OracleError::from_client(context, e.to_string()),
        })
    }

    fn raw(&self) -> &Connection {
        &self.inner.conn
    }

    /// A handle that breaks this connection's call, if one is in flight; it does not keep the
    /// connection alive.
    fn breaker_handle(&self) -> Weak<Tracked> {
        Arc::downgrade(&self.inner)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Logoff is a round trip: bounded, so a dead server cannot hang whoever drops it.
        let _ = self.inner.conn.set_call_timeout(Some(LOGOFF_DEADLINE));
        let _ = self.inner.conn.close();
    }
}

/// Breaks a connection's call when one is in flight; an idle connection is left alone (a
/// break sent to an idle connection would land on its next call).
fn break_if_in_call(t: &Weak<Tracked>) {
    if let Some(t) = t.upgrade()
        && t.in_call.load(Ordering::SeqCst)
    {
        let _ = t.conn.break_execution();
    }
}

/// The interrupt of a setup, check or teardown: once stopped, it breaks the calls in flight
/// on every connection registered with it, and every later call refuses to start.
#[derive(Clone, Default)]
pub struct Breaker {
    inner: Arc<BreakerInner>,
}

#[derive(Default)]
struct BreakerInner {
    stopped: AtomicBool,
    by: Mutex<Option<String>>,
    conns: Mutex<Vec<Weak<Tracked>>>,
}

impl Breaker {
    pub fn new() -> Breaker {
        Breaker::default()
    }

    fn register(&self, c: &Conn) {
        if let Ok(mut all) = self.inner.conns.lock() {
            all.retain(|w| w.strong_count() > 0);
            all.push(c.breaker_handle());
        }
    }

    /// Stops: `by` names the interrupt (`Ctrl-C`, `SIGTERM`). Blocking (each break is a
    /// message to the server): call it off the async runtime's workers.
    pub fn stop(&self, by: &str) {
        if let Ok(mut b) = self.inner.by.lock() {
            b.get_or_insert_with(|| by.to_string());
        }
        self.inner.stopped.store(true, Ordering::SeqCst);
        let conns: Vec<Weak<Tracked>> = self
            .inner
            .conns
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        for c in &conns {
            break_if_in_call(c);
        }
    }

    /// The interrupt that stopped it, if any.
    pub fn stopped(&self) -> Option<String> {
        if !self.inner.stopped.load(Ordering::SeqCst) {
            return None;
        }
        self.inner
            .by
            .lock()
            .ok()
            .and_then(|b| b.clone())
            .or_else(|| Some("an interrupt".into()))
    }
}

/// Connects as `cs` within `timeouts.connect` (see [`within`]), keeping dbio's signal
/// handlers (see `signals`); an unreachable target is exit 2, a missing client library the
/// DPI-1047 message. `tag`: MODULE/ACTION/CLIENT_IDENTIFIER and the call timeout of a
/// measured session.
pub(crate) fn connect(cs: &ConnectString, tag: Option<&str>, timeouts: &Timeouts) -> Result<Conn> {
    init_client()?;
    let password = cs.password.clone().unwrap_or_default();
    let (user, target, shown) = (cs.user.clone(), cs.connect.clone(), cs.redacted());
    let what = format!("connecting to {shown}");
    let conn = within(timeouts.connect, &what.clone(), move || {
        let (r, _) =
            crate::signals::keep_handlers(|| Connector::new(&user, &password, &target).connect());
        r.map_err(|e| OracleError::connect_failed(&what, e.to_string()))
    })?;
    let conn = Conn::new(conn);
    if let Some(id) = tag {
        let set = |r: oracle::Result<()>| {
            r.map_err(|e| OracleError::from_client("setting MODULE/ACTION", e.to_string()))
        };
        set(conn.raw().set_module(sql::MODULE))?;
        set(conn.raw().set_action("run"))?;
        set(conn.raw().set_client_identifier(id))?;
        set(conn.raw().set_call_timeout(timeouts.call))?;
    }
    Ok(conn)
}

/// A statement's binds as the crate's named parameters.
fn named(s: &Stmt) -> Vec<(&str, &dyn ToSql)> {
    const NULL: Option<String> = None;
    const OUT_INT: OracleType = OracleType::Int64;
    s.binds
        .iter()
        .map(|(name, v)| {
            let v: &dyn ToSql = match v {
                Value::Int(i) => i,
                Value::Text(t) => t,
                Value::Null => &NULL,
                Value::OutInt => &OUT_INT,
            };
            (*name, v)
        })
        .collect()
}

impl Conn {
    fn execute(&self, b: Option<&Breaker>, s: &Stmt, context: &str) -> Result<()> {
        self.call(
            b,
            |c| c.execute_named(&s.text, &named(s)).map(|_| ()),
            context,
        )
    }

    /// Executes and commits: every step of setup is its own transaction (DDL commits anyway).
    fn execute_commit(&self, b: Option<&Breaker>, s: &Stmt, context: &str) -> Result<()> {
        self.execute(b, s, context)?;
        self.call(b, |c| c.commit(), context)
    }

    /// A PL/SQL block's OUT number (`Value::OutInt`) named `out`.
    fn execute_out(&self, s: &Stmt, out: &str, context: &str) -> Result<i64> {
        self.call(
            None,
            |c| {
                let st = c.execute_named(&s.text, &named(s))?;
                st.bind_value::<&str, i64>(out)
            },
            context,
        )
    }

    fn query_row<T: RowValue>(&self, s: &Stmt, context: &str) -> Result<T> {
        self.call(
            None,
            |c| c.query_row_as_named::<T>(&s.text, &named(s)),
            context,
        )
    }

    /// Every row of a query; a row that cannot be read fails the query (never dropped).
    fn query_all<T: RowValue>(
        &self,
        b: Option<&Breaker>,
        s: &Stmt,
        context: &str,
    ) -> Result<Vec<T>> {
        self.call(
            b,
            |c| {
                c.query_as_named::<T>(&s.text, &named(s))?
                    .collect::<oracle::Result<Vec<T>>>()
            },
            context,
        )
    }

    /// One optional row: NoDataFound is None.
    fn query_opt<T: RowValue>(
        &self,
        b: Option<&Breaker>,
        s: &Stmt,
        context: &str,
    ) -> Result<Option<T>> {
        self.call(
            b,
            |c| match c.query_row_as_named::<T>(&s.text, &named(s)) {
                Ok(v) => Ok(Some(v)),
                Err(e) if e.kind() == oracle::ErrorKind::NoDataFound => Ok(None),
                Err(e) => Err(e),
            },
            context,
        )
    }

    /// The server's (major, minor) version and its banner.
    fn version(&self) -> Result<((u32, u32), String)> {
        let (v, banner) = self
            .raw()
            .server_version()
            .map_err(|e| OracleError::from_client("reading the server version", e.to_string()))?;
        let part = |n: i32| u32::try_from(n).unwrap_or(0);
        Ok((
            (part(v.major()), part(v.minor())),
            format!("{v} ({banner})"),
        ))
    }
}

/// Where the session is (container, CDB or not); before 12.1, a non-CDB.
fn container(conn: &Conn) -> Result<Container> {
    let c = conn.query_row::<(Option<String>, Option<i64>, Option<i64>, Option<String>)>(
        &sql::container(),
        "reading the container (SYS_CONTEXT, V$DATABASE)",
    );
    let mut container = match c {
        Ok((name, id, dbid, cdb)) => Container {
            con_name: name.unwrap_or_default(),
            con_id: id.unwrap_or(0).max(0) as u32,
            con_dbid: dbid.unwrap_or(0),
            cdb: cdb.as_deref() == Some("YES"),
            pdbs: Vec::new(),
        },
        // ORA-02003 (no CON_NAME) or ORA-00904 (no V$DATABASE.CDB): before 12.1.
        Err(e)
            if ["ORA-02003", "ORA-00904"]
                .iter()
                .any(|c| e.to_string().contains(c)) =>
        {
            let (name, dbid) =
                conn.query_row::<(String, i64)>(&sql::non_cdb_database(), "reading V$DATABASE")?;
            Container {
                con_name: name,
                con_id: 0,
                con_dbid: dbid,
                cdb: false,
                pdbs: Vec::new(),
            }
        }
        Err(e) => return Err(e),
    };
    if container.is_root() {
        container.pdbs =
            conn.query_all::<String>(None, &sql::pdbs(), "listing the PDBs (V$PDBS)")?;
    }
    Ok(container)
}

/// The facts setup and run need before anything else: the container (CDB$ROOT refused), the
/// data set's tablespace and its block size, the standard block size, the buffer caches, the
/// server's version and the admin user's name (whose schema holds dbio's catalog).
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub container: Container,
    pub tablespace: Tablespace,
    pub db_block_size: u64,
    /// GV$SGA_DYNAMIC_COMPONENTS buffer caches: (instance, component, bytes).
    pub caches: Vec<(u32, String, u64)>,
    pub version: String,
    /// (major, minor).
    pub version_num: (u32, u32),
    /// SYS_CONTEXT('USERENV', 'SESSION_USER').
    pub admin: String,
    /// The dynamic views the collector reads here (V$CON_* in a PDB from 12.2).
    pub views: sql::Views,
}

const CATALOG_ROLE: &str = "(grant SELECT_CATALOG_ROLE to the admin user)";

fn server_facts(conn: &Conn, configured: Option<&str>) -> Result<ServerFacts> {
    let container = container(conn)?;
    container.check()?;
    let default = conn.query_opt::<String>(
        None,
        &sql::default_tablespace(),
        "reading DATABASE_PROPERTIES",
    )?;
    let name = loader::tablespace_name(configured, default.as_deref())?;
    let ts = conn
        .query_opt::<(i64, String, String)>(
            None,
            &sql::tablespace(&name),
            &format!("reading DBA_TABLESPACES {CATALOG_ROLE}"),
        )?
        .ok_or_else(|| {
            OracleError::Usage(format!(
                "tablespace {name} does not exist (DBA_TABLESPACES); create it or set data.tablespace"
            ))
        })?;
    let tablespace = Tablespace {
        name,
        block_size: ts.0.max(0) as u64,
        contents: ts.1,
        status: ts.2,
    };
    tablespace.check()?;
    let db_block_size = conn
        .query_row::<i64>(
            &sql::db_block_size(),
            &format!("reading V$PARAMETER {CATALOG_ROLE}"),
        )?
        .max(0) as u64;
    let caches = conn
        .query_all::<(u32, String, i64)>(
            None,
            &sql::buffer_caches(),
            &format!("reading GV$SGA_DYNAMIC_COMPONENTS {CATALOG_ROLE}"),
        )?
        .into_iter()
        .map(|(i, c, b)| (i, c, b.max(0) as u64))
        .collect();
    let (version_num, version) = conn.version()?;
    let admin = conn.query_row::<String>(&sql::session_user(), "reading the session user")?;
    Ok(ServerFacts {
        views: sql::Views::choose(version_num, container.con_id),
        container,
        tablespace,
        db_block_size,
        caches,
        version,
        version_num,
        admin,
    })
}

/// An admin connection (the collector's).
pub fn connect_admin(admin: &ConnectString, timeouts: &Timeouts) -> Result<Conn> {
    connect(admin, None, timeouts)
}

/// The collector's check after the window: every cursor of `user`'s reader statement in
/// V$SQL_PLAN an index range scan.
pub fn judge_reader_cursors(conn: &Conn, user: &str) -> Result<()> {
    records::judge_cursors(conn, None, user).map(|_| ())
}

/// Connects as the admin user and reads the server's facts.
pub fn preflight(
    admin: &ConnectString,
    tablespace: Option<&str>,
    timeouts: &Timeouts,
) -> Result<ServerFacts> {
    let conn = connect(admin, None, timeouts)?;
    server_facts(&conn, tablespace)
}
