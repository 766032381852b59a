//! The Oracle backend through the `oracle` crate (ODPI-C). Every call blocks: setup and the
//! collector run on the caller's thread, and each measured session is a `driver::Session` on
//! its own OS thread with one connection, as SLOB's one SQL*Plus per session.
//!
//! Every statement comes from `sql` as a [`Stmt`] and is bound by name only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use dbio_core::dataset::DataSetPlan;
use dbio_core::driver::{Canceller, OpError, Session};
use oracle::RowValue;
use oracle::sql_type::ToSql;
use oracle::{Connection, Connector, InitParams, Statement};

use crate::loader::{self, Container, Mark, Tablespace};
use crate::metrics::{EventRow, HistRow, InstanceRow, Snapshot, StatRow, TimeModelRow};
use crate::sql::{self, Stmt, Value};
use crate::{ConnectString, OracleError, schema_password, within};

type Result<T> = std::result::Result<T, OracleError>;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

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
            let r = InitParams::new()
                .oracle_client_lib_dir(&dir)
                .and_then(|p| p.init().map(|_| ()));
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

/// Connects as `cs` within `timeouts.connect` (see [`within`]); a missing client library
/// becomes the DPI-1047 message.
pub fn connect(
    cs: &ConnectString,
    client_identifier: Option<&str>,
    timeouts: &Timeouts,
) -> Result<Connection> {
    init_client()?;
    let password = cs.password.clone().unwrap_or_default();
    let (user, target, shown) = (cs.user.clone(), cs.connect.clone(), cs.redacted());
    let what = format!("connecting to {shown}");
    let conn = within(timeouts.connect, &what.clone(), move || {
        Connector::new(&user, &password, &target)
            .connect()
            .map_err(|e| OracleError::from_client(&what, e.to_string()))
    })?;
    if let Some(id) = client_identifier {
        let tag = |r: oracle::Result<()>| {
            r.map_err(|e| OracleError::from_client("setting MODULE/ACTION", e.to_string()))
        };
        tag(conn.set_module(sql::MODULE))?;
        tag(conn.set_action("run"))?;
        tag(conn.set_client_identifier(id))?;
        tag(conn.set_call_timeout(timeouts.call))?;
    }
    Ok(conn)
}

fn failed(context: &str) -> impl Fn(oracle::Error) -> OracleError + '_ {
    move |e| OracleError::from_client(context, e.to_string())
}

/// A statement's binds as the crate's named parameters.
fn named(s: &Stmt) -> Vec<(&str, &dyn ToSql)> {
    s.binds
        .iter()
        .map(|(name, v)| {
            let v: &dyn ToSql = match v {
                Value::Int(i) => i,
                Value::Text(t) => t,
            };
            (*name, v)
        })
        .collect()
}

fn execute(conn: &Connection, s: &Stmt, context: &str) -> Result<()> {
    conn.execute_named(&s.text, &named(s))
        .map(|_| ())
        .map_err(failed(context))
}

fn query_row<T: RowValue>(conn: &Connection, s: &Stmt, context: &str) -> Result<T> {
    conn.query_row_as_named::<T>(&s.text, &named(s))
        .map_err(failed(context))
}

/// Every row of a query; a row that cannot be read fails the query (never dropped).
fn query_all<T: RowValue>(conn: &Connection, s: &Stmt, context: &str) -> Result<Vec<T>> {
    conn.query_as_named::<T>(&s.text, &named(s))
        .map_err(failed(context))?
        .map(|r| r.map_err(failed(context)))
        .collect()
}

/// One optional row: NoDataFound is None.
fn query_opt<T: RowValue>(conn: &Connection, s: &Stmt, context: &str) -> Result<Option<T>> {
    match conn.query_row_as_named::<T>(&s.text, &named(s)) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == oracle::ErrorKind::NoDataFound => Ok(None),
        Err(e) => Err(failed(context)(e)),
    }
}

/// The mark of a user's CF1, when dbio made it.
fn marked(conn: &Connection, user: &str) -> Result<Option<Mark>> {
    let comment = query_opt::<Option<String>>(conn, &sql::table_mark(user), "reading the marks")?;
    Ok(comment.flatten().as_deref().and_then(Mark::parse))
}

fn user_exists(conn: &Connection, user: &str) -> Result<bool> {
    query_row::<i64>(conn, &sql::user_exists(user), "looking up users").map(|n| n > 0)
}

/// Where the session is (container, CDB or not); before 12.1, a non-CDB.
pub fn container(conn: &Connection) -> Result<Container> {
    let c = conn.query_row_as_named::<(Option<String>, Option<i64>, Option<i64>, Option<String>)>(
        &sql::container().text,
        &[],
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
                query_row::<(String, i64)>(conn, &sql::non_cdb_database(), "reading V$DATABASE")?;
            Container {
                con_name: name,
                con_id: 0,
                con_dbid: dbid,
                cdb: false,
                pdbs: Vec::new(),
            }
        }
        Err(e) => return Err(failed("reading the container (SYS_CONTEXT, V$DATABASE)")(e)),
    };
    if container.is_root() {
        container.pdbs = query_all::<String>(conn, &sql::pdbs(), "listing the PDBs (V$PDBS)")?;
    }
    Ok(container)
}

/// The facts setup and run need before anything else: the container (CDB$ROOT refused), the
/// data set's tablespace and its block size, the standard block size and the buffer caches.
#[derive(Debug, Clone)]
pub struct ServerFacts {
    pub container: Container,
    pub tablespace: Tablespace,
    pub db_block_size: u64,
    /// GV$SGA_DYNAMIC_COMPONENTS buffer caches: (instance, component, bytes).
    pub caches: Vec<(u32, String, u64)>,
    pub version: String,
}

const CATALOG: &str = "(grant SELECT_CATALOG_ROLE to the admin user)";

pub fn server_facts(conn: &Connection, configured: Option<&str>) -> Result<ServerFacts> {
    let container = container(conn)?;
    container.check()?;
    let default = query_opt::<String>(
        conn,
        &sql::default_tablespace(),
        "reading DATABASE_PROPERTIES",
    )?;
    let name = loader::tablespace_name(configured, default.as_deref())?;
    let ts = query_opt::<(i64, String, String)>(
        conn,
        &sql::tablespace(&name),
        &format!("reading DBA_TABLESPACES {CATALOG}"),
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
    let db_block_size = query_row::<i64>(
        conn,
        &sql::db_block_size(),
        &format!("reading V$PARAMETER {CATALOG}"),
    )?
    .max(0) as u64;
    let caches = query_all::<(u32, String, i64)>(
        conn,
        &sql::buffer_caches(),
        &format!("reading GV$SGA_DYNAMIC_COMPONENTS {CATALOG}"),
    )?
    .into_iter()
    .map(|(i, c, b)| (i, c, b.max(0) as u64))
    .collect();
    Ok(ServerFacts {
        container,
        tablespace,
        db_block_size,
        caches,
        version: server_version(conn)?,
    })
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

/// SLOB's setup: per schema a user with its default tablespace and quota there, CF1 one row
/// per block, the keys loaded in random order on the server, I_CF1, optimizer statistics,
/// the mark (see `loader::schema_steps`). A user that exists and was not made by dbio is
/// refused (before anything is created); one dbio made is rebuilt only with `force` or when
/// incomplete. Schemas load `data.parallel` at a time, each on its own connection and thread.
/// `plan` is in blocks of `facts.tablespace.block_size`. Returns one line per schema.
pub fn setup(
    admin: &ConnectString,
    plan: &DataSetPlan,
    facts: &ServerFacts,
    force: bool,
    timeouts: &Timeouts,
) -> Result<Vec<String>> {
    let conn = connect(admin, None, timeouts)?;
    for n in 1..=plan.schemas {
        let user = sql::user_name(&plan.prefix, n);
        if user_exists(&conn, &user)? && marked(&conn, &user)?.is_none() {
            return Err(OracleError::Usage(format!(
                "user {user} exists and was not created by dbio; choose another data.prefix"
            )));
        }
    }
    drop(conn);
    let next = std::sync::atomic::AtomicU32::new(1);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..plan.parallel.clamp(1, plan.schemas.max(1)) {
            scope.spawn(|| {
                let conn = match connect(admin, None, timeouts) {
                    Ok(c) => c,
                    Err(e) => {
                        if let Ok(mut r) = results.lock() {
                            r.push((0, Err(e)));
                        }
                        return;
                    }
                };
                loop {
                    let n = next.fetch_add(1, Ordering::AcqRel);
                    if n > plan.schemas {
                        break;
                    }
                    let r = setup_schema(&conn, plan, &facts.tablespace, n, force);
                    let failed = r.is_err();
                    if let Ok(mut all) = results.lock() {
                        all.push((n, r));
                    }
                    if failed {
                        break;
                    }
                }
            });
        }
    });
    let mut all = results.into_inner().unwrap_or_default();
    all.sort_by_key(|(n, _)| *n);
    all.into_iter().map(|(_, r)| r).collect()
}

fn setup_schema(
    conn: &Connection,
    plan: &DataSetPlan,
    ts: &Tablespace,
    n: u32,
    force: bool,
) -> Result<String> {
    let user = sql::user_name(&plan.prefix, n);
    let started = Instant::now();
    if user_exists(conn, &user)? {
        let complete = marked(conn, &user)?.is_some_and(|m| {
            m.complete()
                && m.scale_blocks == plan.scale_blocks
                && m.block_size.unwrap_or(ts.block_size) == ts.block_size
        });
        if complete && !force {
            return Ok(format!(
                "{user}: kept (complete, {} blocks)",
                plan.scale_blocks
            ));
        }
        execute(
            conn,
            &sql::drop_user(&user),
            &format!("dropping {user} to rebuild it"),
        )?;
    }
    let password = schema_password(&user, env("DBIO_ORACLE_USER_PASSWORD"));
    for step in loader::schema_steps(plan, n, &password, ts) {
        let context = format!("{user}: {}", step.what);
        execute(conn, &step.stmt, &context)?;
        conn.commit().map_err(failed(&context))?;
    }
    Ok(format!(
        "{user}: loaded {} rows of {} kB blocks into {} in {:.1} s",
        plan.scale_blocks,
        ts.block_size / 1024,
        ts.name,
        started.elapsed().as_secs_f64()
    ))
}

/// `check`: every schema complete, rows = keys = distinct blocks (one row per block), by a
/// full scan of each table (DBMS_ROWID).
pub fn check(
    admin: &ConnectString,
    plan: &DataSetPlan,
    timeouts: &Timeouts,
) -> Result<(bool, Vec<String>)> {
    let conn = connect(admin, None, timeouts)?;
    let mut ok = true;
    let mut lines = Vec::new();
    for n in 1..=plan.schemas {
        let user = sql::user_name(&plan.prefix, n);
        match marked(&conn, &user)? {
            None => {
                ok = false;
                lines.push(format!(
                    "{user}: missing or not created by dbio: run `dbio setup`"
                ));
                continue;
            }
            Some(m) if !m.complete() => {
                ok = false;
                lines.push(format!("{user}: load incomplete: rerun `dbio setup`"));
                continue;
            }
            Some(_) => {}
        }
        let (rows, blocks, lo, hi) = query_row::<(i64, i64, Option<i64>, Option<i64>)>(
            &conn,
            &sql::rows_and_blocks(&user),
            &format!("{user}: counting rows and blocks"),
        )?;
        let want = plan.scale_blocks as i64;
        let good = rows == want && blocks == want && lo == Some(1) && hi == Some(want);
        ok &= good;
        lines.push(format!(
            "{user}: {} rows in {blocks} blocks, keys {}..{} ({})",
            rows,
            lo.unwrap_or(0),
            hi.unwrap_or(0),
            if good {
                "ok: one row per block"
            } else {
                "WRONG: expected one row per block for every key"
            }
        ));
    }
    Ok((ok, lines))
}

/// run's preflight: every schema marked complete at the planned scale, and its optimizer
/// statistics agree (one row per block). Reads only the dictionary: no table scan just
/// before the window. Returns the reasons a schema is not fit, empty when all are.
pub fn run_preflight(
    admin: &ConnectString,
    plan: &DataSetPlan,
    timeouts: &Timeouts,
) -> Result<Vec<String>> {
    let conn = connect(admin, None, timeouts)?;
    let mut unfit = Vec::new();
    for n in 1..=plan.schemas {
        let user = sql::user_name(&plan.prefix, n);
        let mark = marked(&conn, &user)?;
        let stats = query_opt::<(Option<i64>, Option<i64>)>(
            &conn,
            &sql::table_stats(&user),
            &format!("{user}: reading the optimizer statistics"),
        )?;
        unfit.extend(loader::preflight(
            &user,
            mark.as_ref(),
            stats,
            plan.scale_blocks,
        ));
    }
    Ok(unfit)
}

/// Drops the users dbio created (marked CF1) among `<prefix>1..`; others are never touched.
pub fn teardown(
    admin: &ConnectString,
    prefix: &str,
    yes: bool,
    timeouts: &Timeouts,
) -> Result<Vec<String>> {
    let conn = connect(admin, None, timeouts)?;
    let users = query_all::<String>(&conn, &sql::users_like(prefix), "listing users")?;
    let mut lines = Vec::new();
    for user in users {
        if marked(&conn, &user)?.is_none() {
            continue;
        }
        let foreign = query_all::<String>(
            &conn,
            &sql::foreign_objects(&user),
            "listing the user's objects",
        )?;
        match (yes, foreign.is_empty()) {
            (true, true) => {
                execute(&conn, &sql::drop_user(&user), &format!("dropping {user}"))?;
                lines.push(format!("dropped user {user}"));
            }
            (true, false) => {
                execute(
                    &conn,
                    &sql::drop_table(&user),
                    &format!("dropping {user}.CF1"),
                )?;
                lines.push(format!(
                    "dropped {user}.CF1 only; user {user} stays because it owns objects dbio did not create: {}",
                    foreign.join(", ")
                ));
            }
            (false, true) => lines.push(format!("would drop user {user} (CF1, I_CF1)")),
            (false, false) => lines.push(format!(
                "would drop {user}.CF1 only; user {user} owns objects dbio did not create: {}",
                foreign.join(", ")
            )),
        }
    }
    Ok(lines)
}

/// A measured session: one connection as the schema's user, the read and update prepared,
/// each with its placeholder names.
pub struct OraSession {
    conn: Arc<Connection>,
    read: Statement,
    read_names: Vec<&'static str>,
    update: Statement,
    update_names: Vec<&'static str>,
}

impl OraSession {
    pub fn open(
        target: &ConnectString,
        user: &str,
        name: &str,
        heavy: bool,
        timeouts: &Timeouts,
    ) -> Result<OraSession> {
        let cs = ConnectString {
            user: user.to_string(),
            password: Some(schema_password(user, env("DBIO_ORACLE_USER_PASSWORD"))),
            connect: target.connect.clone(),
        };
        let conn = connect(&cs, Some(name), timeouts)?;
        let (read_sql, update_sql) = (sql::read_range(user), sql::update_range(user, heavy));
        let read = conn
            .statement(&read_sql.text)
            .build()
            .map_err(failed(&format!("{name}: preparing the read")))?;
        let update = conn
            .statement(&update_sql.text)
            .build()
            .map_err(failed(&format!("{name}: preparing the update")))?;
        Ok(OraSession {
            conn: Arc::new(conn),
            read,
            read_names: read_sql.names(),
            update,
            update_names: update_sql.names(),
        })
    }
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
        let params = range_params(&self.read_names, &lo, &hi, &lo);
        let n: i64 = self.read.query_row_as_named(&params).map_err(op_error)?;
        Ok(n.max(0) as u64)
    }

    fn update(&mut self, lo: i64, hi: i64, value: &str) -> std::result::Result<u64, OpError> {
        let params = range_params(&self.update_names, &lo, &hi, &value);
        self.update.execute_named(&params).map_err(op_error)?;
        let rows = self.update.row_count().map_err(op_error)?;
        self.conn.commit().map_err(op_error)?;
        Ok(rows)
    }

    fn canceller(&self) -> Canceller {
        let conn = Arc::clone(&self.conn);
        Arc::new(move || {
            let _ = conn.break_execution();
        })
    }

    /// Oracle's V$ views are current as soon as a call returns.
    fn flush_stats(&mut self) {}
}

/// One snapshot of GV$INSTANCE, GV$SYSSTAT, GV$SYS_TIME_MODEL, GV$SYSTEM_EVENT and (12.1+)
/// GV$EVENT_HISTOGRAM_MICRO (needs SELECT on them, e.g. SELECT_CATALOG_ROLE).
pub fn snapshot(conn: &Connection) -> Result<Snapshot> {
    let ctx = format!("reading the V$ views {CATALOG}");
    // CON_ID exists from 12.1.
    let has_con_id = conn
        .server_version()
        .map_err(failed("reading the server version"))?
        .0
        .major()
        >= 12;
    let instances = query_all::<(u32, String, String, String)>(conn, &sql::instances(), &ctx)?
        .into_iter()
        .map(
            |(inst_id, instance_name, startup_time, version)| InstanceRow {
                inst_id,
                instance_name,
                startup_time,
                version,
            },
        )
        .collect();
    let sysstat =
        query_all::<(u32, Option<u32>, String, f64)>(conn, &sql::sysstat(has_con_id), &ctx)?
            .into_iter()
            .map(|(inst_id, con_id, name, value)| StatRow {
                inst_id,
                con_id: con_id.unwrap_or(0),
                name,
                value,
            })
            .collect();
    let time_model =
        query_all::<(u32, Option<u32>, String, f64)>(conn, &sql::time_model(has_con_id), &ctx)?
            .into_iter()
            .map(|(inst_id, con_id, stat_name, value)| TimeModelRow {
                inst_id,
                con_id: con_id.unwrap_or(0),
                stat_name,
                value,
            })
            .collect();
    type EventTuple = (
        u32,
        Option<u32>,
        String,
        String,
        u64,
        u64,
        Option<u64>,
        Option<u64>,
    );
    let events = query_all::<EventTuple>(conn, &sql::system_event(has_con_id), &ctx)?
        .into_iter()
        .map(
            |(inst_id, con_id, event, wait_class, tw, tm, fw, fm)| EventRow {
                inst_id,
                con_id: con_id.unwrap_or(0),
                event,
                wait_class,
                total_waits: tw,
                time_waited_micro: tm,
                total_waits_fg: fw,
                time_waited_micro_fg: fm,
            },
        )
        .collect();
    // GV$EVENT_HISTOGRAM_MICRO exists from 12.1; before that the distribution is left out.
    let has_micro = query_row::<i64>(conn, &sql::has_histogram_micro(), &ctx)? > 0;
    let histogram = if has_micro {
        query_all::<(u32, Option<u32>, String, u64, u64)>(conn, &sql::event_histogram(), &ctx)?
            .into_iter()
            .map(
                |(inst_id, con_id, event, wait_time_micro, wait_count)| HistRow {
                    inst_id,
                    con_id: con_id.unwrap_or(0),
                    event,
                    wait_time_micro,
                    wait_count,
                },
            )
            .collect()
    } else {
        Vec::new()
    };
    Ok(Snapshot {
        instances,
        sysstat,
        time_model,
        events,
        histogram,
    })
}

/// Takes an AWR snapshot (Diagnostics Pack licence); returns its id.
pub fn awr_snapshot(conn: &Connection) -> Result<i64> {
    query_row::<i64>(
        conn,
        &sql::awr_snapshot(),
        "taking an AWR snapshot (collector.awr needs the Diagnostics Pack)",
    )
}

/// The AWR text report between two snapshots: the global report over every instance on RAC,
/// the instance's own otherwise; `dbid` is the container's.
pub fn awr_report(
    conn: &Connection,
    dbid: i64,
    instances: &[u32],
    begin: i64,
    end: i64,
) -> Result<String> {
    let stmt = match instances {
        [one] => sql::awr_report(dbid, i64::from(*one), begin, end),
        _ => sql::awr_global_report(dbid, begin, end),
    };
    let lines = query_all::<Option<String>>(conn, &stmt, "reading the AWR report")?;
    Ok(lines
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The server's version banner.
pub fn server_version(conn: &Connection) -> Result<String> {
    conn.server_version()
        .map(|(v, banner)| format!("{v} ({banner})"))
        .map_err(failed("reading the server version"))
}

/// What the session sampler saw: per `Class:Event` (or `CPU`), the samples that caught an
/// active dbio session in it (ASH-like, from GV$SESSION, no licence needed; idle waits are
/// not sampled).
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub samples: u64,
    pub achieved_period_ms: f64,
    pub by_event: BTreeMap<String, u64>,
}

/// Polls GV$SESSION for dbio's sessions (MODULE 'dbio') on its own connection and thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<Samples>>,
}

impl Sampler {
    pub fn start(admin: &ConnectString, period: Duration, timeouts: &Timeouts) -> Result<Sampler> {
        let conn = connect(admin, None, timeouts)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("dbio-sampler".into())
            .spawn(move || {
                let mut out = Samples::default();
                let started = Instant::now();
                let sample = sql::session_sample();
                let mut stmt = conn
                    .statement(&sample.text)
                    .build()
                    .map_err(failed("preparing the session sample"))?;
                while !flag.load(Ordering::Acquire) {
                    let next = Instant::now() + period;
                    let rows = stmt
                        .query_as_named::<(u32, Option<String>, String, String)>(&named(&sample))
                        .map_err(failed("sampling GV$SESSION"))?;
                    for row in rows {
                        let (_, _, _, event) = row.map_err(failed("sampling GV$SESSION"))?;
                        *out.by_event.entry(event).or_default() += 1;
                    }
                    out.samples += 1;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                if out.samples > 0 {
                    out.achieved_period_ms =
                        started.elapsed().as_secs_f64() * 1e3 / out.samples as f64;
                }
                Ok(out)
            })
            .map_err(|e| OracleError::Failed {
                context: "starting the sampler".into(),
                message: e.to_string(),
            })?;
        Ok(Sampler { stop, handle })
    }

    pub fn finish(self) -> Result<Samples> {
        self.stop.store(true, Ordering::Release);
        self.handle.join().map_err(|_| OracleError::Failed {
            context: "the sampler".into(),
            message: "its thread ended abnormally".into(),
        })?
    }
}
