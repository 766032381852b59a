//! The wait sampler (ASH-like): on its own connection, every period, one autocommit query of
//! pg_stat_activity (a fresh statement each time, so the view is not frozen by a
//! transaction's statistics snapshot). Foreground rows are dbio's sessions in this database;
//! background rows are the server's own processes (checkpointer, background writer,
//! walwriter, autovacuum of this database). An active row without a wait event counts as CPU.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use dbio_core::dbstats::{DbMetrics, WaitProfile, WaitRow};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::Result;

const SAMPLE: &str = "SELECT backend_type = 'client backend' OR backend_type = 'background worker', \
     coalesce(wait_event_type || ':' || wait_event, 'CPU') \
     FROM pg_stat_activity \
     WHERE pid <> pg_backend_pid() AND ( \
       (backend_type = 'client backend' AND state = 'active' AND datname = current_database() \
          AND application_name ~ '(^|/)dbio-(reader|writer)-[0-9]+$') \
       OR (backend_type = 'background worker' AND state = 'active' AND datname = current_database()) \
       OR (backend_type NOT IN ('client backend', 'background worker') \
          AND (datname IS NULL OR datname = current_database()) \
          AND wait_event_type IS DISTINCT FROM 'Activity'))";

/// What the sampler saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub period: Duration,
    pub samples: u64,
    pub elapsed: Duration,
    /// (foreground?, event) -> samples that saw a session in it.
    pub counts: BTreeMap<(bool, String), u64>,
    /// Sample queries that failed (counted, not fatal).
    pub errors: u64,
}

pub struct Sampler {
    stop: watch::Sender<bool>,
    task: JoinHandle<Samples>,
}

impl Sampler {
    /// Connects and starts sampling at once.
    pub async fn start(target: &Target, period: Duration) -> Result<Sampler> {
        let client = target.connect("dbio-sampler").await?;
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(sample_loop(client, period, rx));
        Ok(Sampler { stop, task })
    }

    pub async fn stop(self) -> Samples {
        self.stop.send_replace(true);
        self.task.await.unwrap_or_default()
    }
}

async fn sample_loop(client: Client, period: Duration, mut stop: watch::Receiver<bool>) -> Samples {
    let started = Instant::now();
    let mut out = Samples {
        period,
        ..Samples::default()
    };
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        // A server that stopped answering must not hold the samples taken so far.
        let answer = tokio::select! {
            r = client.query(SAMPLE, &[]) => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        match answer {
            Ok(rows) => {
                out.samples += 1;
                for r in rows {
                    let fg: bool = r.get(0);
                    let event: String = r.get(1);
                    *out.counts.entry((fg, event)).or_default() += 1;
                }
            }
            Err(_) => out.errors += 1,
        }
    }
    out.elapsed = started.elapsed();
    out
}

/// The top-events tables: sampled time for every event (samples x achieved period), replaced
/// by the database's own counts and times where it has them (pg-stats §7.5).
pub fn wait_profile(s: &Samples, m: &DbMetrics, window_s: f64, major: i32) -> WaitProfile {
    let p = if s.samples > 0 {
        window_s / s.samples as f64
    } else {
        s.period.as_secs_f64()
    };
    let sampled = |fg: bool| -> BTreeMap<String, u64> {
        s.counts
            .iter()
            .filter(|((f, _), _)| *f == fg)
            .map(|((_, e), n)| (e.clone(), *n))
            .collect()
    };
    let fg_samples = sampled(true);
    let active: u64 = fg_samples.values().sum();
    let (db_time_s, db_time_source) = match m.db_time_s {
        Some(t) => (t, "measured (pg_stat_database.active_time)".to_string()),
        None => (
            active as f64 * p,
            "sampled (active dbio sessions x period)".to_string(),
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
        fg.push(WaitRow {
            event: event.to_string(),
            waits: Some(waits as u64),
            time_s: time_ms / 1000.0,
            avg_us: Some(1000.0 * time_ms / waits),
            pct_db_time: None,
            measured: true,
            samples: fg_samples.get(event).copied().unwrap_or(0),
        });
    }
    for (event, n) in fg_samples {
        if fg.iter().any(|r| r.event == event) {
            continue;
        }
        fg.push(sampled_row(&event, n, p));
    }
    let mut bg: Vec<WaitRow> = sampled(false)
        .into_iter()
        .map(|(e, n)| sampled_row(&e, n, p))
        .collect();
    for rows in [&mut fg, &mut bg] {
        for r in rows.iter_mut() {
            r.pct_db_time = (db_time_s > 0.0).then(|| 100.0 * r.time_s / db_time_s);
        }
        rows.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    }
    WaitProfile {
        period_ms: s.period.as_secs_f64() * 1000.0,
        achieved_period_ms: p * 1000.0,
        samples: s.samples,
        db_time_s,
        db_time_source,
        foreground: fg,
        background: bg,
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
                ((true, "IO:DataFileRead".to_string()), 60),
                ((true, "CPU".to_string()), 30),
                ((false, "IO:DataFileWrite".to_string()), 5),
            ]),
            errors: 0,
        };
        let mut m = DbMetrics {
            avg_read_latency_us: Some(250.0),
            db_time_s: Some(20.0),
            ..DbMetrics::default()
        };
        m.counters.insert("db.blks_read".into(), 40_000.0);
        m.counters.insert("db.blk_read_time".into(), 10_000.0);
        let w = wait_profile(&s, &m, 10.0, 15);
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
}
