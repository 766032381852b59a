//! What the collector reads around the window: the V$ (or, in a PDB, V$CON_*) snapshots, AWR
//! or Statspack snapshots and their figures, the session sampler, and the reader's plans.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Conn, Result, Timeouts, connect, named};
use crate::metrics::{
    self, EventRow, HistRow, InstanceRow, Snapshot, StatRow, StatspackSnap, TimeModelRow,
};
use crate::sql::{self, Views};
use crate::{ConnectString, OracleError};

const CATALOG_ROLE: &str = "(grant SELECT_CATALOG_ROLE to the admin user)";

/// One snapshot of GV$INSTANCE and the statistics `views` name (GV$SYSSTAT,
/// GV$SYS_TIME_MODEL, GV$SYSTEM_EVENT and, 12.1+, GV$EVENT_HISTOGRAM_MICRO, or their
/// GV$CON_* forms in a PDB), as the session sees them.
pub fn snapshot(conn: &Conn, views: Views) -> Result<Snapshot> {
    let ctx = format!("reading the V$ views {CATALOG_ROLE}");
    let instances = conn
        .query_all::<(u32, String, String, String)>(None, &sql::instances(), &ctx)?
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
    let sysstat = conn
        .query_all::<(u32, Option<u32>, String, f64)>(None, &sql::sysstat(views), &ctx)?
        .into_iter()
        .map(|(inst_id, con_id, name, value)| StatRow {
            inst_id,
            con_id: con_id.unwrap_or(0),
            name,
            value,
        })
        .collect();
    let time_model = conn
        .query_all::<(u32, Option<u32>, String, f64)>(None, &sql::time_model(views), &ctx)?
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
    let events = conn
        .query_all::<EventTuple>(None, &sql::system_event(views), &ctx)?
        .into_iter()
        .map(|(inst_id, con_id, event, class, tw, tm, fw, fm)| {
            EventRow::of(inst_id, con_id.unwrap_or(0), (event, class, tw, tm, fw, fm))
        })
        .collect();
    // The microsecond histogram exists from 12.1; before that the distribution is left out.
    let has_micro = conn.query_row::<i64>(&sql::has_histogram_micro(views), &ctx)? > 0;
    let histogram = if has_micro {
        conn.query_all::<(u32, Option<u32>, String, u64, u64)>(
            None,
            &sql::event_histogram(views),
            &ctx,
        )?
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
        source: match views {
            Views::Container => views.names().to_string(),
            _ => String::new(),
        },
    })
}

/// Takes an AWR snapshot (only where `snapshots` allowed it); returns its id.
pub fn awr_snapshot(conn: &Conn) -> Result<i64> {
    conn.query_row::<i64>(&sql::awr_snapshot(), "taking an AWR snapshot")
}

/// The AWR text report between two snapshots: the global report over every instance on RAC,
/// the instance's own otherwise; `dbid` is the container's.
pub fn awr_report(
    conn: &Conn,
    dbid: i64,
    instances: &[u32],
    begin: i64,
    end: i64,
) -> Result<String> {
    let stmt = match instances {
        [one] => sql::awr_report(dbid, i64::from(*one), begin, end),
        _ => sql::awr_global_report(dbid, begin, end),
    };
    let lines = conn.query_all::<Option<String>>(None, &stmt, "reading the AWR report")?;
    Ok(lines
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Takes a Statspack snapshot of the instance the session is on and reads it back from the
/// STATS$ tables, in the collector's shape (`metrics::statspack_snapshot`).
pub fn statspack(conn: &Conn) -> Result<(StatspackSnap, Snapshot)> {
    let ctx = "taking a Statspack snapshot (PERFSTAT.STATSPACK.SNAP)";
    let snap_id = conn.execute_out(&sql::statspack_snap(), "snap_id", ctx)?;
    conn.call(None, |c| c.commit(), ctx)?;
    let read = "reading the Statspack snapshot (PERFSTAT.STATS$ tables)";
    let (dbid, instance_number, snap_time, startup_time, instance_name, version) = conn
        .query_row::<(i64, u32, String, String, String, String)>(
            &sql::statspack_snapshot(snap_id),
            read,
        )?;
    let snap = StatspackSnap {
        snap_id,
        dbid,
        instance_number,
        snap_time,
        startup_time,
        instance_name,
        version,
    };
    let inst = i64::from(instance_number);
    let sysstat =
        conn.query_all::<(String, f64)>(None, &sql::statspack_sysstat(snap_id, dbid, inst), read)?;
    let time_model = conn.query_all::<(String, f64)>(
        None,
        &sql::statspack_time_model(snap_id, dbid, inst),
        read,
    )?;
    let events = conn.query_all::<metrics::EventCounts>(
        None,
        &sql::statspack_events(snap_id, dbid, inst),
        read,
    )?;
    let snapshot = metrics::statspack_snapshot(&snap, sysstat, time_model, events);
    Ok((snap, snapshot))
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
                let failed = |e: oracle::Error| {
                    OracleError::from_client("sampling GV$SESSION", e.to_string())
                };
                let mut stmt = conn.raw().statement(&sample.text).build().map_err(failed)?;
                while !flag.load(Ordering::Acquire) {
                    let next = Instant::now() + period;
                    let rows = stmt
                        .query_as_named::<(u32, Option<String>, String, String)>(&named(&sample))
                        .map_err(failed)?;
                    for row in rows {
                        let (_, _, _, event) = row.map_err(failed)?;
                        *out.by_event.entry(event).or_default() += 1;
                    }
                    out.samples += 1;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                if out.samples > 0 {
                    out.achieved_period_ms =
                        started.elapsed().as_secs_f64() * 1e3 / out.samples as f64;
                }
                // The statement goes before the connection logs off (on this thread).
                drop(stmt);
                drop(conn);
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
