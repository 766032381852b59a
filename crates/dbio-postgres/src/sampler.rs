//! The wait sampler (ASH-like): on its own connection, every period, one autocommit query of
//! pg_stat_activity (a fresh statement each time, so the view is not frozen by a
//! transaction's statistics snapshot). Foreground rows are dbio's sessions, told apart by
//! their backend PIDs (and parallel workers by their leader's); background rows are the
//! server's own processes (checkpointer, background writer, walwriter, autovacuum of this
//! database, io workers); other sessions active in this database are counted apart, with
//! their share. An active row without a wait event counts as CPU.
//!
//! When the host's files are readable, each sample also reads `/proc/<pid>/io` of dbio's
//! backends and of the io workers, enumerated afresh every sample (PostgreSQL 19 scales the
//! pool during a run): a backend's last reading before it exits is its total.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use dbio_core::stats::dbstats::{DbMetrics, SHARD_WAIT_NOTE, WaitProfile, WaitRow};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::Result;
use crate::host::{self, HostAccess, IoCounts, PidIo};

const SAMPLE: &str = "SELECT pid, coalesce(backend_type, ''), coalesce(leader_pid, 0), \
     coalesce(wait_event_type || ':' || wait_event, 'CPU'), coalesce(wait_event_type, ''), \
     coalesce(application_name ~ '(^|/)dbio-(reader|writer)-[0-9]+$', false) \
     FROM pg_stat_activity \
     WHERE pid <> pg_backend_pid() AND ( \
       (backend_type IN ('client backend', 'background worker') AND state = 'active' \
          AND datname = current_database()) \
       OR backend_type = 'io worker' \
       OR (backend_type NOT IN ('client backend', 'background worker') \
          AND (datname IS NULL OR datname = current_database()) \
          AND wait_event_type IS DISTINCT FROM 'Activity'))";

/// Does the sampler's role see every role's sessions and the server's processes?
const SEES_ALL: &str = "SELECT rolsuper OR pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') \
     FROM pg_roles WHERE rolname = current_user";

/// Whose state a sample row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Who {
    /// dbio's sessions (and their parallel workers).
    Dbio,
    /// The server's own processes.
    Background,
    /// Sessions of others active in this database.
    Other,
}

/// What the sampler saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub period: Duration,
    pub samples: u64,
    pub elapsed: Duration,
    /// (whose, event) -> samples that saw a process in it.
    pub counts: BTreeMap<(Who, String), u64>,
    /// Sample queries that failed (counted, not fatal).
    pub errors: u64,
    /// The role saw every role's sessions (pg_read_all_stats or superuser).
    pub sees_all: bool,
    /// "backend PID" or "application_name".
    pub sessions_by: String,
    /// read_bytes of dbio's backends and the io workers, first and last reading.
    pub pid_io: PidIo,
    /// Every io worker pid seen.
    pub io_workers: BTreeSet<i32>,
    /// Transactions the sampler's connection committed from its connection on (its
    /// start-up, its settings, every sample and /proc read, its closing flush): they are in
    /// the database's commit count, and the collector leaves them out of it.
    pub transactions: u64,
    /// PostgreSQL 18+: the sessions' asynchronous I/O handles in flight (pg_aios), per
    /// sample.
    pub aio: AioCounts,
}

/// The sessions' pg_aios handles in flight over the samples (PostgreSQL 18+).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AioCounts {
    pub samples: u64,
    pub sum: u64,
    pub max: u64,
    /// Why pg_aios could not be read (once: the sampler stops asking).
    pub error: Option<String>,
}

/// How to tell dbio's sessions apart, and what else to read each sample.
#[derive(Debug, Clone, Default)]
pub struct SamplerOptions {
    pub period: Duration,
    /// The sessions' backend PIDs; empty: by application_name (`dbio-reader-<n>`).
    pub session_pids: Vec<i32>,
    /// The collector's own connection, never counted.
    pub collector_pid: Option<i32>,
    /// Read /proc/<pid>/io through this each sample.
    pub host: Option<HostAccess>,
    /// read_bytes at the window's start.
    pub io_before: BTreeMap<i32, IoCounts>,
    /// The server's major version: 15+ publishes the sampler's own statistics before it
    /// stops (pg_stat_force_next_flush), 13/14 when its connection closes.
    pub major: i32,
}

pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Samples>,
}

impl Sampler {
    /// Connects and starts sampling at once.
    pub async fn start_with(target: &Target, opts: SamplerOptions) -> Result<Sampler> {
        let client = target.connect("dbio-sampler").await?;
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(sample_loop(client, opts, rx));
        Ok(Sampler { stop, task })
    }

    pub async fn stop(self) -> Samples {
        self.stop.send_replace(true);
        self.task.await.unwrap_or_default()
    }
}

/// One row of a sample: pid, backend_type, leader_pid, event, event class, dbio's name.
type Row = (i32, String, i32, String, String, bool);

fn classify(row: &Row, opts: &SamplerOptions) -> Option<Who> {
    let (pid, backend_type, leader, _, class, named) = row;
    match backend_type.as_str() {
        "client backend" | "background worker" => {
            let ours = if opts.session_pids.is_empty() {
                *named || backend_type == "background worker"
            } else {
                opts.session_pids.contains(pid) || opts.session_pids.contains(leader)
            };
            if ours {
                Some(Who::Dbio)
            } else if Some(*pid) == opts.collector_pid {
                None
            } else {
                Some(Who::Other)
            }
        }
        // An idle io worker waits in Activity:IoWorkerMain.
        _ if class == "Activity" => None,
        _ => Some(Who::Background),
    }
}

/// Transactions a connection of dbio's commits before its first statement: the server's
/// start-up transaction and dbio's own settings (`Target::connect`, one simple query), as
/// pg_stat_database counts them (measured: five connections of one `SELECT 1` each add 10
/// to xact_commit).
pub const CONNECT_TRANSACTIONS: u64 = 2;

async fn sample_loop(
    client: Client,
    opts: SamplerOptions,
    mut stop: watch::Receiver<bool>,
) -> Samples {
    let started = Instant::now();
    let mut transactions = CONNECT_TRANSACTIONS;
    let sees_all = match client.query_one(SEES_ALL, &[]).await {
        Ok(r) => {
            transactions += crate::sql::QUERY_TRANSACTIONS;
            r.try_get::<_, Option<bool>>(0)
                .ok()
                .flatten()
                .unwrap_or(false)
        }
        Err(_) => false,
    };
    let mut out = Samples {
        transactions,
        period: opts.period,
        sees_all,
        sessions_by: if opts.session_pids.is_empty() {
            "application_name".into()
        } else {
            "backend PID".into()
        },
        ..Samples::default()
    };
    out.pid_io.record(&opts.io_before);
    let mut ticker = tokio::time::interval(opts.period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        // A server that stopped answering must not hold the samples taken so far. On 18+
        // pg_aios is asked in the same round trip (pipelined).
        let aio_wanted = opts.major >= 18 && out.aio.error.is_none();
        let pids: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&opts.session_pids];
        let both = async {
            if aio_wanted {
                let (rows, aio) = tokio::join!(
                    client.query(SAMPLE, &[]),
                    client.query_one(crate::sql::AIOS_IN_FLIGHT, &pids)
                );
                (rows, Some(aio))
            } else {
                (client.query(SAMPLE, &[]).await, None)
            }
        };
        let (answer, aio) = tokio::select! {
            r = both => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        match aio {
            Some(Ok(row)) => {
                out.transactions += crate::sql::QUERY_TRANSACTIONS;
                let n = row.try_get::<_, i64>(0).unwrap_or(0).max(0) as u64;
                out.aio.samples += 1;
                out.aio.sum += n;
                out.aio.max = out.aio.max.max(n);
            }
            Some(Err(e)) => {
                out.aio.error = Some(
                    e.as_db_error()
                        .map(|d| d.message().to_string())
                        .unwrap_or_else(|| e.to_string()),
                );
            }
            None => {}
        }
        let rows = match answer {
            Ok(rows) => rows,
            Err(_) => {
                out.errors += 1;
                continue;
            }
        };
        out.samples += 1;
        out.transactions += crate::sql::QUERY_TRANSACTIONS;
        let mut workers = Vec::new();
        for r in rows {
            let row: Row = match (
                r.try_get(0),
                r.try_get(1),
                r.try_get(2),
                r.try_get(3),
                r.try_get(4),
                r.try_get(5),
            ) {
                (Ok(a), Ok(b), Ok(c), Ok(d), Ok(e), Ok(f)) => (a, b, c, d, e, f),
                _ => continue,
            };
            if row.1 == "io worker" {
                workers.push(row.0);
            }
            if let Some(who) = classify(&row, &opts) {
                *out.counts.entry((who, row.3.clone())).or_default() += 1;
            }
        }
        if let Some(access) = &opts.host {
            let mut pids = opts.session_pids.clone();
            pids.extend(&workers);
            let (readings, transactions) = tokio::select! {
                r = host::read_pid_io(&client, access, &pids) => r,
                _ = stop.wait_for(|s| *s) => break,
            };
            out.transactions += transactions;
            out.pid_io.record(&readings);
        }
        out.io_workers.extend(workers);
    }
    // The samples cover the time from the first to the stop (at the window's end): the
    // period they stand for is that over their count, whatever the window was.
    out.elapsed = started.elapsed();
    // 15+: this backend's statistics (its commits among them) are published before the
    // reply, so the "after" snapshot counts every one of them; 13/14 publish at exit.
    if opts.major >= 15
        && tokio::time::timeout(
            std::time::Duration::from_secs(2),
            client.batch_execute(crate::sql::FORCE_FLUSH),
        )
        .await
        .is_ok_and(|r| r.is_ok())
    {
        out.transactions += 1;
    }
    out
}

/// The waits PostgreSQL 18+ times as read_time in pg_stat_io: a backend waiting for its own
/// read (DataFileRead, the synchronous path) or for one in flight in an io worker or
/// io_uring (bufmgr.c WaitReadBuffers; pg-aio-host-stats §1c-1d). With measured read times
/// they are one row.
const AIO_READ_WAITS: [&str; 3] = [
    "IO:AioIoCompletion",
    "IO:AioIoUringExecution",
    "IO:AioIoUringSubmit",
];

/// The top-events tables: sampled time for every event (samples x achieved period), replaced
/// by the database's own counts and times where it has them (pg-stats §7.5). % of DB time is
/// over dbio's sessions only; `device_await_ms` (the device's r_await) goes beside the
/// measured read row.
pub fn wait_profile(
    s: &Samples,
    m: &DbMetrics,
    major: i32,
    device_await_ms: Option<f64>,
    shard_of_many: bool,
) -> WaitProfile {
    // Each sample stands for the sampler's own time over its samples (it stops at the
    // window's end): seen on 13/14, dividing the window by samples that ran 1.2 s past it
    // made the period 79.7-89.1 ms for 100 and DB time 12-21% low.
    let p = if s.samples > 0 && !s.elapsed.is_zero() {
        s.elapsed.as_secs_f64() / s.samples as f64
    } else {
        s.period.as_secs_f64()
    };
    let sampled = |who: Who| -> BTreeMap<String, u64> {
        s.counts
            .iter()
            .filter(|((w, _), _)| *w == who)
            .map(|((_, e), n)| (e.clone(), *n))
            .collect()
    };
    let mut fg_samples = sampled(Who::Dbio);
    let other_samples = sampled(Who::Other);
    let active: u64 = fg_samples.values().sum();
    let others: u64 = other_samples.values().sum();
    // pg_stat_database.active_time is the whole database's: it is dbio's DB time only when
    // nothing else was active there (and the sampler could have seen it).
    let (db_time_s, db_time_source) = match m.db_time_s {
        Some(t) if others == 0 && s.sees_all && !shard_of_many => {
            (t, "measured (pg_stat_database.active_time)".to_string())
        }
        _ => (
            active as f64 * p,
            format!(
                "sampled (dbio's sessions by {} x period)",
                if s.sessions_by.is_empty() {
                    "backend PID"
                } else {
                    s.sessions_by.as_str()
                }
            ),
        ),
    };
    let c = |k: &str| m.counters.get(k).copied();
    // Measured rows: (event, waits, time in ms).
    let mut measured: Vec<(&str, Option<f64>, Option<f64>)> = Vec::new();
    if m.avg_read_latency_us.is_some() {
        let (waits, time) = if major >= 16 {
            (c("io.fg_reads"), c("io.fg_read_time"))
        } else {
            (c("db.blks_read"), c("db.blk_read_time"))
        };
        measured.push(("IO:DataFileRead", waits, time));
        if major >= 16 {
            measured.push(("IO:DataFileWrite", c("io.fg_writes"), c("io.fg_write_time")));
        }
    }
    // 17 renamed the WAL wait events (WALWrite -> WalWrite, WALSync -> WalSync).
    let (wal_write, wal_sync) = if major >= 17 {
        ("IO:WalWrite", "IO:WalSync")
    } else {
        ("IO:WALWrite", "IO:WALSync")
    };
    if major >= 18 {
        measured.push((wal_write, c("io.wal_writes"), c("io.wal_write_time")));
        measured.push((wal_sync, c("io.wal_fsyncs"), c("io.wal_fsync_time")));
    } else if major >= 14 {
        measured.push((wal_write, c("wal.wal_write"), c("wal.wal_write_time")));
        measured.push((wal_sync, c("wal.wal_sync"), c("wal.wal_sync_time")));
    }
    let mut fg: Vec<WaitRow> = Vec::new();
    for (event, waits, time_ms) in measured {
        // A zero time with waits means the timing GUC was off: keep the sampled time.
        let (Some(waits), Some(time_ms)) = (waits, time_ms) else {
            continue;
        };
        if waits <= 0.0 || time_ms <= 0.0 {
            continue;
        }
        let read = event == "IO:DataFileRead";
        let mut samples = fg_samples.get(event).copied().unwrap_or(0);
        let mut note = None;
        if read && major >= 18 {
            // The same waits, sampled under their AIO names: one row, not two.
            for aio in AIO_READ_WAITS {
                samples += fg_samples.remove(aio).unwrap_or(0);
            }
            note = Some(
                "PostgreSQL 18+: pg_stat_io read_time is time spent waiting for reads (IO:DataFileRead and \
                 IO:AioIoCompletion / IO:AioIoUringExecution, counted once here), not device latency; \
                 the device's own read wait is beside it"
                    .to_string(),
            );
        }
        if shard_of_many {
            note = Some(format!(
                "{}{SHARD_WAIT_NOTE}",
                note.map(|n| format!("{n}; ")).unwrap_or_default()
            ));
        }
        fg.push(WaitRow {
            event: event.to_string(),
            waits: Some(waits as u64),
            time_s: time_ms / 1000.0,
            avg_us: Some(1000.0 * time_ms / waits),
            pct_db_time: None,
            measured: true,
            samples,
            note,
            device_await_ms: if read { device_await_ms } else { None },
        });
    }
    for (event, n) in fg_samples {
        if fg.iter().any(|r| r.event == event) {
            continue;
        }
        fg.push(sampled_row(&event, n, p));
    }
    let mut bg: Vec<WaitRow> = sampled(Who::Background)
        .into_iter()
        .map(|(e, n)| sampled_row(&e, n, p))
        .collect();
    let mut other: Vec<WaitRow> = other_samples
        .into_iter()
        .map(|(e, n)| sampled_row(&e, n, p))
        .collect();
    for rows in [&mut fg, &mut bg, &mut other] {
        for r in rows.iter_mut() {
            let whole_database = shard_of_many && r.measured;
            r.pct_db_time =
                (db_time_s > 0.0 && !whole_database).then(|| 100.0 * r.time_s / db_time_s);
        }
        rows.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    }
    WaitProfile {
        period_ms: s.period.as_secs_f64() * 1000.0,
        achieved_period_ms: p * 1000.0,
        samples: s.samples,
        transactions: s.transactions,
        db_time_s,
        db_time_source,
        foreground: fg,
        background: bg,
        sessions_by: s.sessions_by.clone(),
        other_sessions: other,
        other_sessions_pct: (active + others > 0 && s.samples > 0)
            .then(|| 100.0 * others as f64 / (active + others) as f64),
        visibility_note: (!s.sees_all && s.samples > 0).then(|| {
            "the sampler's role lacks pg_read_all_stats: it sees only its own role's sessions, so the server's \
             processes (background table, io workers) and other roles' sessions are missing: GRANT pg_read_all_stats TO the role"
                .to_string()
        }),
    }
}

fn sampled_row(event: &str, n: u64, period_s: f64) -> WaitRow {
    WaitRow {
        event: event.to_string(),
        waits: None,
        time_s: n as f64 * period_s,
        avg_us: None,
        pct_db_time: None,
        measured: false,
        samples: n,
        note: None,
        device_await_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_rows_replace_sampled_ones_and_cpu_is_sampled() {
        let s = Samples {
            period: Duration::from_millis(100),
            samples: 100,
            elapsed: Duration::from_secs(10),
            counts: BTreeMap::from([
                ((Who::Dbio, "IO:DataFileRead".to_string()), 60),
                ((Who::Dbio, "CPU".to_string()), 30),
                ((Who::Background, "IO:DataFileWrite".to_string()), 5),
            ]),
            sees_all: true,
            sessions_by: "backend PID".into(),
            ..Samples::default()
        };
        let mut m = DbMetrics {
            avg_read_latency_us: Some(250.0),
            db_time_s: Some(20.0),
            ..DbMetrics::default()
        };
        m.counters.insert("db.blks_read".into(), 40_000.0);
        m.counters.insert("db.blk_read_time".into(), 10_000.0);
        let w = wait_profile(&s, &m, 15, None, false);
        assert_eq!(w.db_time_s, 20.0);
        let top = &w.foreground[0];
        assert_eq!(top.event, "IO:DataFileRead");
        assert!(top.measured);
        assert_eq!(top.waits, Some(40_000));
        assert_eq!(top.time_s, 10.0);
        assert_eq!(top.avg_us, Some(250.0));
        assert_eq!(top.pct_db_time, Some(50.0));
        let cpu = w.foreground.iter().find(|r| r.event == "CPU").unwrap();
        assert!(!cpu.measured && (cpu.time_s - 3.0).abs() < 1e-9);
        assert_eq!(w.background[0].event, "IO:DataFileWrite");
    }

    // PostgreSQL 18, io_method=worker: the measured DataFileRead row (read_time is wait
    // time) and the sampled AioIoCompletion of the same waits made 192% of DB time.
    #[test]
    fn pg18_aio_waits_are_counted_once_and_others_apart() {
        let s = Samples {
            period: Duration::from_millis(100),
            samples: 100,
            elapsed: Duration::from_secs(10),
            counts: BTreeMap::from([
                ((Who::Dbio, "IO:AioIoCompletion".to_string()), 85),
                ((Who::Dbio, "IO:DataFileRead".to_string()), 5),
                ((Who::Dbio, "CPU".to_string()), 10),
                ((Who::Background, "IO:DataFileRead".to_string()), 270),
                ((Who::Other, "CPU".to_string()), 25),
            ]),
            sees_all: true,
            sessions_by: "backend PID".into(),
            ..Samples::default()
        };
        let mut m = DbMetrics {
            avg_read_latency_us: Some(900.0),
            db_time_s: Some(12.5),
            ..DbMetrics::default()
        };
        m.counters.insert("io.fg_reads".into(), 10_000.0);
        m.counters.insert("io.fg_read_time".into(), 9_000.0);
        let w = wait_profile(&s, &m, 18, Some(0.4), false);
        // Another session was active: DB time is dbio's sampled time, not the database's.
        assert!(
            w.db_time_source.starts_with("sampled"),
            "{}",
            w.db_time_source
        );
        assert!((w.db_time_s - 10.0).abs() < 1e-9);
        let read = &w.foreground[0];
        assert_eq!((read.event.as_str(), read.samples), ("IO:DataFileRead", 90));
        assert!(read.note.as_deref().unwrap_or("").contains("waiting"));
        assert_eq!(read.device_await_ms, Some(0.4));
        assert!(w.foreground.iter().all(|r| r.event != "IO:AioIoCompletion"));
        let total: f64 = w.foreground.iter().filter_map(|r| r.pct_db_time).sum();
        assert!(total <= 101.0, "{total}");
        assert_eq!(w.background[0].event, "IO:DataFileRead");
        assert_eq!(w.other_sessions_pct, Some(20.0));
        assert!(w.visibility_note.is_none());
    }
}
