//! The collector's arithmetic, without a database: two snapshots of GV$INSTANCE,
//! GV$SYSSTAT and GV$SYSTEM_EVENT (one row set per instance, so RAC is covered) become the
//! engine-neutral `DbMetrics` and `WaitProfile` that result.json and report.txt show for
//! PostgreSQL too. IOPS come from I/O requests ("physical read total IO requests"), never
//! from blocks. An instance that restarted inside the window (its startup time changed, or a
//! counter went backwards) makes the figures invalid, and says so.

use std::collections::BTreeMap;

use dbio_core::dbstats::{DbMetrics, TableIo, WaitProfile, WaitRow};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRow {
    pub inst_id: u32,
    pub instance_name: String,
    /// GV$INSTANCE.STARTUP_TIME as `YYYY-MM-DDTHH:MI:SS`.
    pub startup_time: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatRow {
    pub inst_id: u32,
    pub name: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub inst_id: u32,
    pub event: String,
    pub wait_class: String,
    pub total_waits: u64,
    pub time_waited_micro: u64,
}

/// One bucket of GV$EVENT_HISTOGRAM_MICRO (12.1+): waits of `event` that took less than
/// `wait_time_micro` µs (and at least half of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistRow {
    pub inst_id: u32,
    pub event: String,
    pub wait_time_micro: u64,
    pub wait_count: u64,
}

/// One snapshot of the V$ views the collector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    pub instances: Vec<InstanceRow>,
    pub sysstat: Vec<StatRow>,
    pub events: Vec<EventRow>,
    /// Empty before 12.1, where the view does not exist.
    #[serde(default)]
    pub histogram: Vec<HistRow>,
}

/// Per-instance figures (RAC: one per instance; the totals are their sums).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceFigures {
    pub inst_id: u32,
    pub instance_name: String,
    pub read_iops: f64,
    pub write_iops: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub db: DbMetrics,
    pub waits: WaitProfile,
    pub instances: Vec<InstanceFigures>,
}

fn stat(s: &Snapshot, inst: u32, name: &str) -> Option<f64> {
    s.sysstat
        .iter()
        .find(|r| r.inst_id == inst && r.name == name)
        .map(|r| r.value)
}

/// The deltas of two snapshots over `seconds` (the run's measured window).
pub fn window(before: &Snapshot, after: &Snapshot, seconds: f64) -> Window {
    let secs = seconds.max(1e-9);
    let mut reasons = Vec::new();
    // Instances: the same set, none restarted.
    for a in &after.instances {
        match before.instances.iter().find(|b| b.inst_id == a.inst_id) {
            None => reasons.push(format!(
                "instance {} ({}) was not up when the window opened",
                a.inst_id, a.instance_name
            )),
            Some(b) if b.startup_time != a.startup_time => reasons.push(format!(
                "instance {} ({}) restarted inside the window (startup_time {} -> {}): its counters started again from zero",
                a.inst_id, a.instance_name, b.startup_time, a.startup_time
            )),
            Some(_) => {}
        }
    }
    for b in &before.instances {
        if !after.instances.iter().any(|a| a.inst_id == b.inst_id) {
            reasons.push(format!(
                "instance {} ({}) was down when the window closed",
                b.inst_id, b.instance_name
            ));
        }
    }
    let ids: Vec<u32> = after
        .instances
        .iter()
        .map(|i| i.inst_id)
        .filter(|id| before.instances.iter().any(|b| b.inst_id == *id))
        .collect();

    // Sums of deltas over instances, by statistic.
    let mut counters: BTreeMap<String, f64> = BTreeMap::new();
    let mut delta = |name: &str, reasons: &mut Vec<String>| -> f64 {
        let mut total = 0.0;
        for &id in &ids {
            let (Some(b), Some(a)) = (stat(before, id, name), stat(after, id, name)) else {
                continue;
            };
            if a < b {
                reasons.push(format!(
                    "v$sysstat '{name}' of instance {id} went backwards ({b} -> {a})"
                ));
            }
            total += a - b;
        }
        counters.insert(format!("gv$sysstat.{name}"), total);
        total
    };
    let reads = delta("physical read total IO requests", &mut reasons);
    let writes = delta("physical write total IO requests", &mut reasons);
    let _ = delta("physical read IO requests", &mut reasons);
    let _ = delta("physical write IO requests", &mut reasons);
    let blocks = delta("physical reads", &mut reasons);
    let _ = delta("physical read total bytes", &mut reasons);
    let _ = delta("physical write total bytes", &mut reasons);
    let logical = delta("session logical reads", &mut reasons);
    let redo = delta("redo size", &mut reasons);
    let commits = delta("user commits", &mut reasons);
    let _ = delta("execute count", &mut reasons);
    // DB time and CPU used are in centiseconds.
    let db_time_s = delta("DB time", &mut reasons) / 100.0;
    let cpu_s = delta("CPU used by this session", &mut reasons) / 100.0;

    // Events: deltas per event summed over instances.
    let mut events: BTreeMap<&str, (u64, u64, &str)> = BTreeMap::new();
    for a in &after.events {
        if !ids.contains(&a.inst_id) {
            continue;
        }
        let b = before
            .events
            .iter()
            .find(|b| b.inst_id == a.inst_id && b.event == a.event);
        let (bw, bt) = b.map_or((0, 0), |b| (b.total_waits, b.time_waited_micro));
        if a.total_waits < bw || a.time_waited_micro < bt {
            reasons.push(format!(
                "v$system_event '{}' of instance {} went backwards",
                a.event, a.inst_id
            ));
            continue;
        }
        let e = events.entry(&a.event).or_insert((0, 0, &a.wait_class));
        e.0 += a.total_waits - bw;
        e.1 += a.time_waited_micro - bt;
    }
    for (name, (waits, micros, _)) in &events {
        counters.insert(format!("gv$system_event.{name}.total_waits"), *waits as f64);
        counters.insert(
            format!("gv$system_event.{name}.time_waited_micro"),
            *micros as f64,
        );
    }
    // Latency distribution of the key events, per bucket, summed over instances.
    let mut buckets: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    for a in &after.histogram {
        if !ids.contains(&a.inst_id) {
            continue;
        }
        let b = before
            .histogram
            .iter()
            .find(|b| {
                b.inst_id == a.inst_id
                    && b.event == a.event
                    && b.wait_time_micro == a.wait_time_micro
            })
            .map_or(0, |b| b.wait_count);
        if a.wait_count < b {
            reasons.push(format!(
                "v$event_histogram_micro '{}' of instance {} went backwards",
                a.event, a.inst_id
            ));
            continue;
        }
        *buckets.entry((&a.event, a.wait_time_micro)).or_default() += a.wait_count - b;
    }
    for ((event, upper), n) in &buckets {
        counters.insert(
            format!("gv$event_histogram_micro.{event}.lt_{upper}us"),
            *n as f64,
        );
    }
    let sequential = events.get("db file sequential read");
    let avg_read_latency_us = sequential
        .filter(|(w, _, _)| *w > 0)
        .map(|(w, t, _)| *t as f64 / *w as f64);

    let pct = |t: f64| (db_time_s > 0.0).then(|| 100.0 * t / db_time_s);
    let mut foreground: Vec<WaitRow> = events
        .iter()
        .filter(|(_, (w, _, _))| *w > 0)
        .map(|(name, (w, t, class))| {
            let time_s = *t as f64 / 1e6;
            WaitRow {
                event: format!("{class}:{name}"),
                waits: Some(*w),
                time_s,
                avg_us: Some(*t as f64 / *w as f64),
                pct_db_time: pct(time_s),
                measured: true,
                samples: 0,
            }
        })
        .collect();
    foreground.push(WaitRow {
        event: "CPU".into(),
        waits: None,
        time_s: cpu_s,
        avg_us: None,
        pct_db_time: pct(cpu_s),
        measured: true,
        samples: 0,
    });
    foreground.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));

    let instances = ids
        .iter()
        .map(|&id| {
            let d =
                |n: &str| stat(after, id, n).unwrap_or(0.0) - stat(before, id, n).unwrap_or(0.0);
            InstanceFigures {
                inst_id: id,
                instance_name: after
                    .instances
                    .iter()
                    .find(|i| i.inst_id == id)
                    .map(|i| i.instance_name.clone())
                    .unwrap_or_default(),
                read_iops: d("physical read total IO requests") / secs,
                write_iops: d("physical write total IO requests") / secs,
            }
        })
        .collect();

    let db = DbMetrics {
        source: "gv$sysstat, gv$system_event".into(),
        seconds,
        read_iops: reads / secs,
        read_blocks_per_s: blocks / secs,
        write_iops: writes / secs,
        avg_read_latency_us,
        read_latency_note: avg_read_latency_us
            .is_none()
            .then(|| "no 'db file sequential read' waits inside the window".to_string()),
        buffer_hits_per_s: (logical - blocks).max(0.0) / secs,
        buffer_hit_ratio: (logical > 0.0).then(|| 1.0 - (blocks / logical).min(1.0)),
        wal_bytes_per_s: Some(redo / secs),
        wal_writes_per_s: events
            .get("log file parallel write")
            .map(|(w, _, _)| *w as f64 / secs),
        wal_syncs_per_s: events
            .get("log file sync")
            .map(|(w, _, _)| *w as f64 / secs),
        commits_per_s: commits / secs,
        checkpoints: 0,
        autovacuum_runs: 0,
        autoanalyze_runs: 0,
        db_time_s: Some(db_time_s),
        dbio_tables: TableIo::default(),
        valid: reasons.is_empty(),
        invalid_reasons: reasons,
        counters,
    };
    let waits = WaitProfile {
        period_ms: 0.0,
        achieved_period_ms: 0.0,
        samples: 0,
        db_time_s,
        db_time_source: "measured (gv$sysstat 'DB time')".into(),
        foreground,
        background: Vec::new(),
    };
    Window {
        db,
        waits,
        instances,
    }
}

/// Puts the sampler's counts beside the measured rows: `samples` of each event, and rows for
/// events the sampler saw that V$SYSTEM_EVENT did not time (marked estimated).
pub fn add_samples(
    waits: &mut WaitProfile,
    period_ms: f64,
    achieved_period_ms: f64,
    samples: u64,
    by_event: &BTreeMap<String, u64>,
) {
    waits.period_ms = period_ms;
    waits.achieved_period_ms = achieved_period_ms;
    waits.samples = samples;
    for (event, n) in by_event {
        match waits.foreground.iter_mut().find(|r| &r.event == event) {
            Some(row) => row.samples = *n,
            None => waits.foreground.push(WaitRow {
                event: event.clone(),
                waits: None,
                time_s: *n as f64 * achieved_period_ms / 1e3,
                avg_us: None,
                pct_db_time: None,
                measured: false,
                samples: *n,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Snapshot {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_slob_window_gives_iops_from_requests_and_latency_from_waits() {
        let w = window(&fixture("single-before"), &fixture("single-after"), 300.0);
        let db = &w.db;
        assert!(db.valid, "{:?}", db.invalid_reasons);
        // 15,210,000 read requests in 300 s; 'physical reads' (blocks) is larger (multiblock).
        assert!((db.read_iops - 50_700.0).abs() < 0.01, "{}", db.read_iops);
        assert!(
            (db.read_blocks_per_s - 51_300.0).abs() < 0.01,
            "{}",
            db.read_blocks_per_s
        );
        assert!((db.write_iops - 1_840.0).abs() < 0.01, "{}", db.write_iops);
        // db file sequential read: 14,985,000 waits, 6,443,550 s·1e6 µs -> 430 µs each.
        let lat = db.avg_read_latency_us.unwrap();
        assert!((lat - 430.0).abs() < 0.01, "{lat}");
        assert!((db.commits_per_s - 98.0).abs() < 0.01);
        assert!((db.db_time_s.unwrap() - 7_560.0).abs() < 0.01);
        let hit = db.buffer_hit_ratio.unwrap();
        assert!(
            (hit - (1.0 - 15_390_000.0 / 46_200_000.0)).abs() < 1e-9,
            "{hit}"
        );
        assert_eq!(
            db.counters["gv$sysstat.physical read total IO requests"],
            15_210_000.0
        );
        // The top event is the single-block read, measured, with its share of DB time.
        let top = &w.waits.foreground[0];
        assert_eq!(top.event, "User I/O:db file sequential read");
        assert_eq!(top.waits, Some(14_985_000));
        assert!(top.measured);
        assert!((top.pct_db_time.unwrap() - 100.0 * 6_443.55 / 7_560.0).abs() < 1e-6);
        let cpu = w
            .waits
            .foreground
            .iter()
            .find(|r| r.event == "CPU")
            .unwrap();
        assert!((cpu.time_s - 1_020.0).abs() < 1e-9);
        assert_eq!(w.instances.len(), 1);
    }

    #[test]
    fn the_micro_histogram_becomes_bucket_deltas() {
        let w = window(&fixture("single-before"), &fixture("single-after"), 300.0);
        let c = &w.db.counters;
        let key = |b: u64| format!("gv$event_histogram_micro.db file sequential read.lt_{b}us");
        assert_eq!(c[&key(256)], 1_200_000.0);
        assert_eq!(c[&key(512)], 11_985_000.0);
        assert_eq!(c[&key(1024)], 1_500_000.0);
        assert_eq!(c[&key(2048)], 300_000.0);
        // The buckets account for every wait the event counted.
        let sum: f64 = [256, 512, 1024, 2048].iter().map(|b| c[&key(*b)]).sum();
        assert_eq!(
            sum,
            c["gv$system_event.db file sequential read.total_waits"]
        );
    }

    #[test]
    fn a_restart_inside_the_window_voids_the_figures() {
        let w = window(
            &fixture("single-before"),
            &fixture("single-after-restart"),
            300.0,
        );
        assert!(!w.db.valid);
        let why = w.db.invalid_reasons.join("; ");
        assert!(
            why.contains("instance 1 (SLOB) restarted inside the window"),
            "{why}"
        );
        assert!(why.contains("went backwards"), "{why}");
    }

    #[test]
    fn samples_join_the_measured_rows() {
        let mut w = window(&fixture("single-before"), &fixture("single-after"), 300.0).waits;
        let mut seen = BTreeMap::new();
        seen.insert("User I/O:db file sequential read".to_string(), 2_500u64);
        seen.insert("Concurrency:read by other session".to_string(), 40u64);
        add_samples(&mut w, 100.0, 101.0, 2_950, &seen);
        assert_eq!(w.samples, 2_950);
        let top = w
            .foreground
            .iter()
            .find(|r| r.event == "User I/O:db file sequential read")
            .unwrap();
        assert_eq!((top.samples, top.measured), (2_500, true));
        let est = w
            .foreground
            .iter()
            .find(|r| r.event == "Concurrency:read by other session")
            .unwrap();
        assert!(!est.measured && est.waits.is_none());
        assert!((est.time_s - 4.04).abs() < 1e-9);
    }

    #[test]
    fn rac_sums_instances_and_keeps_each() {
        let w = window(&fixture("rac-before"), &fixture("rac-after"), 120.0);
        assert!(w.db.valid, "{:?}", w.db.invalid_reasons);
        assert_eq!(w.instances.len(), 2);
        let sum: f64 = w.instances.iter().map(|i| i.read_iops).sum();
        assert!((w.db.read_iops - sum).abs() < 1e-6);
        assert!(
            (w.instances[0].read_iops - 41_000.0).abs() < 0.01,
            "{:?}",
            w.instances
        );
        assert!(
            (w.instances[1].read_iops - 39_500.0).abs() < 0.01,
            "{:?}",
            w.instances
        );
    }
}
