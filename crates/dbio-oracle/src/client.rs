//! The Oracle backend through the `oracle` crate (ODPI-C). Every call blocks: setup and the
//! collector run on the caller's thread, and each measured session is a `driver::Session` on
//! its own OS thread with one connection, as SLOB's one SQL*Plus per session.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use dbio_core::dataset::DataSetPlan;
use dbio_core::driver::{Canceller, OpError, Session};
use oracle::{Connection, Connector, InitParams, Statement};

use crate::metrics::{EventRow, HistRow, InstanceRow, Snapshot, StatRow};
use crate::{ConnectString, OracleError, schema_password, sql};

type Result<T> = std::result::Result<T, OracleError>;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
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

/// Connects as `cs`; a missing client library becomes the DPI-1047 message.
pub fn connect(cs: &ConnectString, client_identifier: Option<&str>) -> Result<Connection> {
    init_client()?;
    let password = cs.password.clone().unwrap_or_default();
    let conn = Connector::new(&cs.user, &password, &cs.connect)
        .connect()
        .map_err(|e| {
            OracleError::from_client(&format!("connecting to {}", cs.redacted()), e.to_string())
        })?;
    if let Some(id) = client_identifier {
        let tag = |r: oracle::Result<()>| {
            r.map_err(|e| OracleError::from_client("setting MODULE/ACTION", e.to_string()))
        };
        tag(conn.set_module("dbio"))?;
        tag(conn.set_action("run"))?;
        tag(conn.set_client_identifier(id))?;
    }
    Ok(conn)
}

fn failed(context: &str) -> impl Fn(oracle::Error) -> OracleError + '_ {
    move |e| OracleError::from_client(context, e.to_string())
}

/// The mark a complete schema's CF1 carries.
fn mark(state: &str, scale_blocks: u64) -> String {
    format!("{{\"state\":\"{state}\",\"scale_blocks\":{scale_blocks}}}")
}

/// Users dbio created (their CF1 carries the mark), among USER1..USERn.
fn marked(conn: &Connection, user: &str) -> Result<Option<String>> {
    match conn.query_row_as::<Option<String>>(sql::TABLE_MARK, &[&user]) {
        Ok(c) => Ok(c.filter(|c| c.starts_with(sql::MARK))),
        Err(e) if e.kind() == oracle::ErrorKind::NoDataFound => Ok(None),
        Err(e) => Err(failed("reading the marks")(e)),
    }
}

fn user_exists(conn: &Connection, user: &str) -> Result<bool> {
    conn.query_row_as::<i64>(
        "SELECT COUNT(*) FROM all_users WHERE username = :1",
        &[&user],
    )
    .map(|n| n > 0)
    .map_err(failed("looking up users"))
}

/// SLOB's setup: per schema a user with quota, CF1 one row per block, the keys loaded in
/// random order on the server, I_CF1, optimizer statistics, the mark. A user that exists and
/// was not made by dbio is refused (before anything is created); one dbio made is rebuilt
/// only with `force` or when incomplete. Schemas load `data.parallel` at a time, each on its
/// own connection and thread. Returns one line per schema.
pub fn setup(admin: &ConnectString, plan: &DataSetPlan, force: bool) -> Result<Vec<String>> {
    let conn = connect(admin, None)?;
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
                let conn = match connect(admin, None) {
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
                    let r = setup_schema(&conn, plan, n, force);
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

fn setup_schema(conn: &Connection, plan: &DataSetPlan, n: u32, force: bool) -> Result<String> {
    let user = sql::user_name(&plan.prefix, n);
    let started = Instant::now();
    if user_exists(conn, &user)? {
        let m = marked(conn, &user)?.unwrap_or_default();
        let complete = m.contains("\"complete\"")
            && m.contains(&format!("\"scale_blocks\":{}", plan.scale_blocks));
        if complete && !force {
            return Ok(format!(
                "{user}: kept (complete, {} blocks)",
                plan.scale_blocks
            ));
        }
        conn.execute(&sql::drop_user(&user), &[])
            .map_err(failed(&format!("dropping {user} to rebuild it")))?;
    }
    let password = schema_password(&user, env("DBIO_ORACLE_USER_PASSWORD"));
    let ts = plan.tablespace.as_deref();
    let steps: Vec<(String, String)> = [
        ("creating the user", sql::create_user(&user, &password, ts)),
        ("granting CREATE SESSION", sql::grant_session(&user)),
        ("creating CF1", sql::create_table(&user, ts)),
        (
            "marking CF1 as loading",
            sql::comment_table(&user, &mark("loading", plan.scale_blocks)),
        ),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .chain(
        sql::one_row_per_block(&user)
            .into_iter()
            .map(|s| ("one row per block".into(), s)),
    )
    .chain(
        sql::load(
            &user,
            plan.scale_blocks,
            plan.seed.wrapping_add(u64::from(n)),
        )
        .into_iter()
        .map(|s| ("loading".into(), s)),
    )
    .chain([
        ("creating I_CF1".to_string(), sql::create_index(&user, ts)),
        ("gathering statistics".to_string(), sql::gather_stats(&user)),
        (
            "marking CF1 complete".to_string(),
            sql::comment_table(&user, &mark("complete", plan.scale_blocks)),
        ),
    ])
    .collect();
    for (what, text) in steps {
        conn.execute(&text, &[])
            .map_err(failed(&format!("{user}: {what}")))?;
        conn.commit().map_err(failed(&format!("{user}: {what}")))?;
    }
    Ok(format!(
        "{user}: loaded {} rows in {:.1} s",
        plan.scale_blocks,
        started.elapsed().as_secs_f64()
    ))
}

/// `check`: every schema complete, rows = keys = distinct blocks (one row per block).
pub fn check(admin: &ConnectString, plan: &DataSetPlan) -> Result<(bool, Vec<String>)> {
    let conn = connect(admin, None)?;
    let mut ok = true;
    let mut lines = Vec::new();
    for n in 1..=plan.schemas {
        let user = sql::user_name(&plan.prefix, n);
        let Some(m) = marked(&conn, &user)? else {
            ok = false;
            lines.push(format!(
                "{user}: missing or not created by dbio: run `dbio setup`"
            ));
            continue;
        };
        if !m.contains("\"complete\"") {
            ok = false;
            lines.push(format!("{user}: load incomplete: rerun `dbio setup`"));
            continue;
        }
        let (rows, blocks, lo, hi) = conn
            .query_row_as::<(i64, i64, Option<i64>, Option<i64>)>(&sql::rows_and_blocks(&user), &[])
            .map_err(failed(&format!("{user}: counting rows and blocks")))?;
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

/// Drops the users dbio created (marked CF1) among `<prefix>1..`; others are never touched.
pub fn teardown(admin: &ConnectString, prefix: &str, yes: bool) -> Result<Vec<String>> {
    let conn = connect(admin, None)?;
    let like = format!("{}%", prefix.to_uppercase());
    let users: Vec<String> = conn
        .query_as::<String>(
            "SELECT username FROM all_users WHERE username LIKE :1 ORDER BY username",
            &[&like],
        )
        .map_err(failed("listing users"))?
        .filter_map(|r| r.ok())
        .collect();
    let mut lines = Vec::new();
    for user in users {
        if marked(&conn, &user)?.is_none() {
            continue;
        }
        let foreign: Vec<String> = conn
            .query_as::<String>(sql::FOREIGN_OBJECTS, &[&user])
            .map_err(failed("listing the user's objects"))?
            .filter_map(|r| r.ok())
            .collect();
        match (yes, foreign.is_empty()) {
            (true, true) => {
                conn.execute(&sql::drop_user(&user), &[])
                    .map_err(failed(&format!("dropping {user}")))?;
                lines.push(format!("dropped user {user}"));
            }
            (true, false) => {
                conn.execute(&sql::drop_table(&user), &[])
                    .map_err(failed(&format!("dropping {user}.CF1")))?;
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

/// A measured session: one connection as the schema's user, the read and update prepared.
pub struct OraSession {
    conn: Arc<Connection>,
    read: Statement,
    update: Statement,
}

impl OraSession {
    pub fn open(target: &ConnectString, user: &str, name: &str, heavy: bool) -> Result<OraSession> {
        let cs = ConnectString {
            user: user.to_string(),
            password: Some(schema_password(user, env("DBIO_ORACLE_USER_PASSWORD"))),
            connect: target.connect.clone(),
        };
        let conn = connect(&cs, Some(name))?;
        let read = conn
            .statement(&sql::read_range(user))
            .build()
            .map_err(failed(&format!("{name}: preparing the read")))?;
        let update = conn
            .statement(&sql::update_range(user, heavy))
            .build()
            .map_err(failed(&format!("{name}: preparing the update")))?;
        Ok(OraSession {
            conn: Arc::new(conn),
            read,
            update,
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

impl Session for OraSession {
    fn read(&mut self, lo: i64, hi: i64) -> std::result::Result<u64, OpError> {
        let n: i64 = self.read.query_row_as(&[&lo, &hi]).map_err(op_error)?;
        Ok(n.max(0) as u64)
    }

    fn update(&mut self, lo: i64, hi: i64, value: &str) -> std::result::Result<u64, OpError> {
        self.update.execute(&[&lo, &hi, &value]).map_err(op_error)?;
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

/// One snapshot of GV$INSTANCE, GV$SYSSTAT and GV$SYSTEM_EVENT (needs SELECT on them, e.g.
/// SELECT_CATALOG_ROLE).
pub fn snapshot(conn: &Connection) -> Result<Snapshot> {
    let f = failed("reading the V$ views (grant SELECT_CATALOG_ROLE to the admin user)");
    let instances = conn
        .query_as::<(u32, String, String, String)>(sql::INSTANCES, &[])
        .map_err(&f)?
        .filter_map(|r| r.ok())
        .map(
            |(inst_id, instance_name, startup_time, version)| InstanceRow {
                inst_id,
                instance_name,
                startup_time,
                version,
            },
        )
        .collect();
    let sysstat = conn
        .query_as::<(u32, String, f64)>(&sql::sysstat_query(), &[])
        .map_err(&f)?
        .filter_map(|r| r.ok())
        .map(|(inst_id, name, value)| StatRow {
            inst_id,
            name,
            value,
        })
        .collect();
    let events = conn
        .query_as::<(u32, String, String, u64, u64)>(sql::SYSTEM_EVENT, &[])
        .map_err(&f)?
        .filter_map(|r| r.ok())
        .map(
            |(inst_id, event, wait_class, total_waits, time_waited_micro)| EventRow {
                inst_id,
                event,
                wait_class,
                total_waits,
                time_waited_micro,
            },
        )
        .collect();
    // GV$EVENT_HISTOGRAM_MICRO exists from 12.1; before that the distribution is left out.
    let has_micro = conn
        .query_row_as::<i64>(sql::HAS_HISTOGRAM_MICRO, &[])
        .map_err(&f)?
        > 0;
    let histogram = if has_micro {
        conn.query_as::<(u32, String, u64, u64)>(&sql::event_histogram_query(), &[])
            .map_err(&f)?
            .filter_map(|r| r.ok())
            .map(|(inst_id, event, wait_time_micro, wait_count)| HistRow {
                inst_id,
                event,
                wait_time_micro,
                wait_count,
            })
            .collect()
    } else {
        Vec::new()
    };
    Ok(Snapshot {
        instances,
        sysstat,
        events,
        histogram,
    })
}

/// Takes an AWR snapshot (Diagnostics Pack licence); returns its id.
pub fn awr_snapshot(conn: &Connection) -> Result<i64> {
    conn.query_row_as::<i64>(sql::AWR_SNAPSHOT, &[])
        .map_err(failed(
            "taking an AWR snapshot (collector.awr needs the Diagnostics Pack)",
        ))
}

/// The AWR text report between two snapshots.
pub fn awr_report(conn: &Connection, begin: i64, end: i64) -> Result<String> {
    let lines: Vec<String> = conn
        .query_as::<Option<String>>(sql::AWR_REPORT, &[&begin, &end])
        .map_err(failed("reading the AWR report"))?
        .filter_map(|r| r.ok())
        .map(Option::unwrap_or_default)
        .collect();
    Ok(lines.join("\n"))
}

/// The server's version banner.
pub fn server_version(conn: &Connection) -> Result<String> {
    conn.server_version()
        .map(|(v, banner)| format!("{v} ({banner})"))
        .map_err(failed("reading the server version"))
}

/// What the session sampler saw: per `Class:Event` (or `CPU`), the samples that caught a dbio
/// session in it (ASH-like, from GV$SESSION, no licence needed).
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
    pub fn start(admin: &ConnectString, period: Duration) -> Result<Sampler> {
        let conn = connect(admin, None)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("dbio-sampler".into())
            .spawn(move || {
                let mut out = Samples::default();
                let started = Instant::now();
                let mut stmt = conn
                    .statement(sql::SESSION_SAMPLE)
                    .build()
                    .map_err(failed("preparing the session sample"))?;
                while !flag.load(Ordering::Acquire) {
                    let next = Instant::now() + period;
                    let rows = stmt
                        .query_as::<(u32, Option<String>, String, String)>(&[])
                        .map_err(failed("sampling GV$SESSION"))?;
                    for (_, _, _, event) in rows.flatten() {
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
