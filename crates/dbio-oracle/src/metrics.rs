//! The collector's arithmetic, without a database: two snapshots of GV$INSTANCE,
//! GV$SYSSTAT, GV$SYS_TIME_MODEL, GV$SYSTEM_EVENT and GV$EVENT_HISTOGRAM_MICRO (one row set
//! per instance, so RAC is covered) become the engine-neutral `DbMetrics` and `WaitProfile`
//! that result.json and report.txt show for PostgreSQL too, computed as AWR and SLOB's
//! awr_info compute them:
//!
//! - read and write IOPS from I/O *requests*, as awr_info: 'physical read IO requests' and
//!   'physical write IO requests' (data files); the 'total' ones (redo, control file, archive,
//!   backup too) are kept beside them in `counters` and per instance;
//! - DB time and DB CPU from V$SYS_TIME_MODEL (AWR's Load Profile), not 'CPU used by this
//!   session' (which misses calls under 10 ms and is not foreground-only);
//! - the foreground events from TOTAL_WAITS_FG / TIME_WAITED_MICRO_FG (AWR's "Foreground Wait
//!   Events"), the background ones as total - foreground ("Background Wait Events"), idle
//!   events out of both;
//! - read latency from the foreground 'db file sequential read' (awr_info's DFSR_LAT), with
//!   'db file parallel read' (DFPR_LAT) beside it and a warning when it is a large share.
//!
//! Containers: every row carries CON_ID. Per view, the rows of CON_ID 0 (the whole instance:
//! a non-CDB, or a CDB seen from its root) are used when present, else the rows of the one
//! container the session sees (a PDB's own figures); `source` says which. An instance that
//! restarted inside the window (its startup time changed, or a counter went backwards) makes
//! the figures invalid, and says so.

use std::collections::{BTreeMap, BTreeSet};

use dbio_core::stats::dbstats::{AwrInfo, DbMetrics, TableIo, WaitProfile, WaitRow};
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
    #[serde(default)]
    pub con_id: u32,
    pub name: String,
    pub value: f64,
}

/// One row of GV$SYS_TIME_MODEL (microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeModelRow {
    pub inst_id: u32,
    #[serde(default)]
    pub con_id: u32,
    pub stat_name: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub inst_id: u32,
    #[serde(default)]
    pub con_id: u32,
    pub event: String,
    pub wait_class: String,
    pub total_waits: u64,
    pub time_waited_micro: u64,
    /// Foreground sessions' share (11.1+); null before.
    pub total_waits_fg: Option<u64>,
    pub time_waited_micro_fg: Option<u64>,
}

impl EventRow {
    /// An event's counts (`EventCounts`) as a row of instance `inst_id` and container `con_id`.
    pub fn of(inst_id: u32, con_id: u32, counts: EventCounts) -> EventRow {
        let (
            event,
            wait_class,
            total_waits,
            time_waited_micro,
            total_waits_fg,
            time_waited_micro_fg,
        ) = counts;
        EventRow {
            inst_id,
            con_id,
            event,
            wait_class,
            total_waits,
            time_waited_micro,
            total_waits_fg,
            time_waited_micro_fg,
        }
    }
}

/// An event's counts as V$SYSTEM_EVENT and STATS$SYSTEM_EVENT give them: event, wait class,
/// total waits, time waited (µs), and the foreground's (null before 11.1).
pub type EventCounts = (String, String, u64, u64, Option<u64>, Option<u64>);

/// One bucket of GV$EVENT_HISTOGRAM_MICRO (12.1+): waits of `event` that took less than
/// `wait_time_micro` µs (and at least half of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistRow {
    pub inst_id: u32,
    #[serde(default)]
    pub con_id: u32,
    pub event: String,
    pub wait_time_micro: u64,
    pub wait_count: u64,
}

/// One snapshot of the V$ views the collector reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    pub instances: Vec<InstanceRow>,
    pub sysstat: Vec<StatRow>,
    #[serde(default)]
    pub time_model: Vec<TimeModelRow>,
    pub events: Vec<EventRow>,
    /// Empty before 12.1, where the view does not exist.
    #[serde(default)]
    pub histogram: Vec<HistRow>,
    /// The views (or tables) the rows were read from, for `db.source`; empty: the
    /// instance's GV$ views.
    #[serde(default)]
    pub source: String,
}

/// Per-instance figures (RAC: one per instance; the totals are their sums).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceFigures {
    pub inst_id: u32,
    pub instance_name: String,
    /// 'physical read IO requests' / s (awr_info's PREADS).
    pub read_iops: f64,
    /// 'physical read total IO requests' / s.
    pub read_iops_total: f64,
    /// 'physical write IO requests' / s (awr_info's PWRITES).
    pub write_iops: f64,
    /// 'physical write total IO requests' / s.
    pub write_iops_total: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub db: DbMetrics,
    pub waits: WaitProfile,
    pub instances: Vec<InstanceFigures>,
    /// What a DBA should know about these figures (e.g. many 'db file parallel read').
    pub warnings: Vec<String>,
}

/// The request counters behind the IOPS: awr_info's (data files) and the totals.
const IO_REQUESTS: [&str; 4] = [
    "physical read IO requests",
    "physical read total IO requests",
    "physical write IO requests",
    "physical write total IO requests",
];

/// 'db file parallel read', 'db file scattered read' or 'direct path read' above this share
/// of the foreground read wait time draws a warning.
pub const PARALLEL_READ_WARN_SHARE: f64 = 0.05;

/// At or above this buffer hit ratio the run measured the buffer cache, not storage.
pub const CACHED_HIT_RATIO: f64 = 0.99;

/// The container whose rows a view's figures come from: 0 (the whole instance) when present,
/// else the lowest CON_ID seen (a PDB sees only its own).
fn scope(ids: impl Iterator<Item = u32>) -> Option<u32> {
    let ids: BTreeSet<u32> = ids.collect();
    ids.first().copied()
}

fn scope_label(con: Option<u32>) -> String {
    match con {
        Some(0) | None => "CON_ID 0: the whole instance".to_string(),
        Some(1) => "CON_ID 1: CDB$ROOT only".to_string(),
        Some(n) => {
            format!("CON_ID {n}: this PDB only; the CDB's background work is not in these counters")
        }
    }
}

/// Deltas of one view's counters, per (instance, name), over the instances up at both ends.
struct Deltas {
    values: BTreeMap<(u32, String), f64>,
}

impl Deltas {
    fn new(
        view: &str,
        before: &[(u32, u32, String, f64)],
        after: &[(u32, u32, String, f64)],
        ids: &[u32],
        reasons: &mut Vec<String>,
    ) -> Deltas {
        let con = scope(after.iter().map(|r| r.1));
        let pick = |rows: &[(u32, u32, String, f64)]| -> BTreeMap<(u32, String), f64> {
            rows.iter()
                .filter(|r| Some(r.1) == con && ids.contains(&r.0))
                .map(|r| ((r.0, r.2.clone()), r.3))
                .collect()
        };
        let (b, a) = (pick(before), pick(after));
        let mut values = BTreeMap::new();
        for (key, av) in a {
            let Some(bv) = b.get(&key) else { continue };
            if av < *bv {
                reasons.push(format!(
                    "{view} '{}' of instance {} went backwards ({bv} -> {av})",
                    key.1, key.0
                ));
            }
            values.insert(key, av - bv);
        }
        Deltas { values }
    }

    fn of(&self, inst: u32, name: &str) -> f64 {
        self.values
            .get(&(inst, name.to_string()))
            .copied()
            .unwrap_or(0.0)
    }

    fn sum(&self, name: &str) -> f64 {
        self.values
            .iter()
            .filter(|((_, n), _)| n == name)
            .map(|(_, v)| v)
            .sum()
    }

    fn has(&self, name: &str) -> bool {
        self.values.keys().any(|(_, n)| n == name)
    }
}

/// An event's deltas over the window, summed over instances.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct EventDelta {
    waits: u64,
    micros: u64,
    waits_fg: u64,
    micros_fg: u64,
}

impl EventDelta {
    fn bg(&self) -> (u64, u64) {
        (
            self.waits.saturating_sub(self.waits_fg),
            self.micros.saturating_sub(self.micros_fg),
        )
    }
}

fn avg_us(waits: u64, micros: u64) -> Option<f64> {
    (waits > 0).then(|| micros as f64 / waits as f64)
}

/// The deltas of two snapshots over `seconds` (the run's measured window).
pub fn window(before: &Snapshot, after: &Snapshot, seconds: f64) -> Window {
    let secs = seconds.max(1e-9);
    let mut reasons = Vec::new();
    let mut warnings = Vec::new();
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

    let stat_rows = |s: &Snapshot| -> Vec<(u32, u32, String, f64)> {
        s.sysstat
            .iter()
            .map(|r| (r.inst_id, r.con_id, r.name.clone(), r.value))
            .collect()
    };
    let tm_rows = |s: &Snapshot| -> Vec<(u32, u32, String, f64)> {
        s.time_model
            .iter()
            .map(|r| (r.inst_id, r.con_id, r.stat_name.clone(), r.value))
            .collect()
    };
    let stats = Deltas::new(
        "v$sysstat",
        &stat_rows(before),
        &stat_rows(after),
        &ids,
        &mut reasons,
    );
    let tm = Deltas::new(
        "v$sys_time_model",
        &tm_rows(before),
        &tm_rows(after),
        &ids,
        &mut reasons,
    );
    let con = scope(after.sysstat.iter().map(|r| r.con_id));

    let mut counters: BTreeMap<String, f64> = BTreeMap::new();
    for name in crate::sql::SYSSTAT_NAMES {
        counters.insert(format!("gv$sysstat.{name}"), stats.sum(name));
    }
    // RAC: each instance's I/O requests too, so its share is traceable in result.json.
    if ids.len() > 1 {
        for &id in &ids {
            for name in IO_REQUESTS {
                counters.insert(format!("gv$sysstat.inst{id}.{name}"), stats.of(id, name));
            }
        }
    }
    for name in crate::sql::TIME_MODEL_NAMES {
        if tm.has(name) {
            counters.insert(format!("gv$sys_time_model.{name}"), tm.sum(name));
        }
    }
    let reads = stats.sum("physical read IO requests");
    let reads_total = stats.sum("physical read total IO requests");
    let writes = stats.sum("physical write IO requests");
    let writes_total = stats.sum("physical write total IO requests");
    let blocks = stats.sum("physical reads");
    let direct = stats.sum("physical reads direct") + stats.sum("physical reads direct (lob)");
    let logical = stats.sum("session logical reads");
    let redo = stats.sum("redo size");
    let commits = stats.sum("user commits");
    // DB time and DB CPU: V$SYS_TIME_MODEL (µs), as AWR; V$SYSSTAT 'DB time' (cs) only where
    // the time model is missing.
    let (db_time_s, db_time_source) = if tm.has("DB time") {
        (
            tm.sum("DB time") / 1e6,
            "measured (gv$sys_time_model 'DB time')",
        )
    } else {
        (
            stats.sum("DB time") / 100.0,
            "measured (gv$sysstat 'DB time')",
        )
    };
    let db_cpu_s = tm.has("DB CPU").then(|| tm.sum("DB CPU") / 1e6);

    // Events: deltas per event summed over instances, in the events' scope.
    let ev_con = scope(after.events.iter().map(|r| r.con_id));
    let mut events: BTreeMap<&str, (EventDelta, &str)> = BTreeMap::new();
    let mut fg_missing = false;
    for a in &after.events {
        if !ids.contains(&a.inst_id) || Some(a.con_id) != ev_con {
            continue;
        }
        // Idle events are no work: out of both tables, as AWR lists them apart.
        if a.wait_class == "Idle" {
            continue;
        }
        let b = before
            .events
            .iter()
            .find(|b| b.inst_id == a.inst_id && b.con_id == a.con_id && b.event == a.event);
        let get = |r: Option<&EventRow>| {
            r.map_or((0, 0, Some(0), Some(0)), |r| {
                (
                    r.total_waits,
                    r.time_waited_micro,
                    r.total_waits_fg,
                    r.time_waited_micro_fg,
                )
            })
        };
        let (bw, bt, bfw, bft) = get(b);
        let (aw, at, afw, aft) = get(Some(a));
        let (fw, ft) = match (bfw, bft, afw, aft) {
            (Some(bfw), Some(bft), Some(afw), Some(aft)) => {
                (afw.wrapping_sub(bfw), aft.wrapping_sub(bft))
            }
            _ => {
                fg_missing = true;
                (aw.wrapping_sub(bw), at.wrapping_sub(bt))
            }
        };
        if aw < bw || at < bt || fw > aw.wrapping_sub(bw) || ft > at.wrapping_sub(bt) {
            reasons.push(format!(
                "v$system_event '{}' of instance {} went backwards",
                a.event, a.inst_id
            ));
            continue;
        }
        let e = events
            .entry(&a.event)
            .or_insert((EventDelta::default(), &a.wait_class));
        e.0.waits += aw - bw;
        e.0.micros += at - bt;
        e.0.waits_fg += fw;
        e.0.micros_fg += ft;
    }
    if fg_missing {
        warnings.push(
            "v$system_event has no TOTAL_WAITS_FG / TIME_WAITED_MICRO_FG here (before 11.1): the \
             foreground events include background waits"
                .into(),
        );
    }
    for (name, (d, _)) in &events {
        let key = |c: &str| format!("gv$system_event.{name}.{c}");
        counters.insert(key("total_waits"), d.waits as f64);
        counters.insert(key("time_waited_micro"), d.micros as f64);
        counters.insert(key("total_waits_fg"), d.waits_fg as f64);
        counters.insert(key("time_waited_micro_fg"), d.micros_fg as f64);
    }
    // Latency distribution of the key events, per bucket, summed over instances.
    let h_con = scope(after.histogram.iter().map(|r| r.con_id));
    let mut buckets: BTreeMap<(&str, u64), u64> = BTreeMap::new();
    for a in &after.histogram {
        if !ids.contains(&a.inst_id) || Some(a.con_id) != h_con {
            continue;
        }
        let b = before
            .histogram
            .iter()
            .find(|b| {
                b.inst_id == a.inst_id
                    && b.con_id == a.con_id
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

    let fg = |name: &str| {
        events
            .get(name)
            .map_or((0, 0), |(d, _)| (d.waits_fg, d.micros_fg))
    };
    let (seq_w, seq_t) = fg("db file sequential read");
    let (par_w, par_t) = fg("db file parallel read");
    let (sca_w, sca_t) = fg("db file scattered read");
    let (dpr_w, dpr_t) = fg("direct path read");
    let read_time = (seq_t + par_t + sca_t + dpr_t) as f64;
    let share = |t: u64| 100.0 * t as f64 / read_time;
    let avg_read_latency_us = avg_us(seq_w, seq_t);
    if par_t > 0 && par_t as f64 >= PARALLEL_READ_WARN_SHARE * read_time {
        warnings.push(format!(
            "'db file parallel read' took {:.0}% of the foreground read wait time ({par_w} waits, average {:.0} µs, \
             beside {seq_w} 'db file sequential read' waits averaging {:.0} µs): batched table access and \
             prefetching turned single-block reads into vector reads, so the single-block latency and the read \
             IOPS do not describe the same reads. SLOB forces single-block reads with _db_block_prefetch_limit=0, \
             _db_block_prefetch_quota=0 and _db_file_noncontig_mblock_read_count=0 (its simple.ora)",
            share(par_t),
            avg_us(par_w, par_t).unwrap_or(0.0),
            avg_read_latency_us.unwrap_or(0.0)
        ));
    }
    // Multiblock reads are full scans (SLOB's index reads make none): buffered ('db file
    // scattered read') or into the session's memory ('direct path read', awr_info's DPR).
    for (event, w, t, how) in [
        (
            "db file scattered read",
            sca_w,
            sca_t,
            "multiblock reads into the buffer cache: full scans of a table or index",
        ),
        (
            "direct path read",
            dpr_w,
            dpr_t,
            "multiblock reads that bypass the buffer cache: full scans (serial direct reads or parallel query)",
        ),
    ] {
        if t > 0 && t as f64 >= PARALLEL_READ_WARN_SHARE * read_time {
            warnings.push(format!(
                "'{event}' took {:.0}% of the foreground read wait time ({w} waits, average {:.0} µs): {how}. \
                 SLOB's reads are index range scans, one block each; the read IOPS and latency mix these in. Look \
                 for other work on the database, or a plan that is not an index range scan",
                share(t),
                avg_us(w, t).unwrap_or(0.0)
            ));
        }
    }

    let pct = |t: f64| (db_time_s > 0.0).then(|| 100.0 * t / db_time_s);
    let row =
        |name: &str, class: &str, waits: u64, micros: u64, pct_db_time: Option<f64>| WaitRow {
            event: format!("{class}:{name}"),
            waits: Some(waits),
            time_s: micros as f64 / 1e6,
            avg_us: avg_us(waits, micros),
            pct_db_time,
            measured: true,
            samples: 0,
            note: None,
            device_await_ms: None,
        };
    let mut foreground: Vec<WaitRow> = events
        .iter()
        .filter(|(_, (d, _))| d.waits_fg > 0)
        .map(|(name, (d, class))| {
            row(
                name,
                class,
                d.waits_fg,
                d.micros_fg,
                pct(d.micros_fg as f64 / 1e6),
            )
        })
        .collect();
    if let Some(cpu) = db_cpu_s {
        foreground.push(WaitRow {
            event: DB_CPU.into(),
            waits: None,
            time_s: cpu,
            avg_us: None,
            pct_db_time: pct(cpu),
            measured: true,
            samples: 0,
            note: None,
            device_await_ms: None,
        });
    }
    foreground.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    // Background rows: their time is not DB time, so no share of it.
    let mut background: Vec<WaitRow> = events
        .iter()
        .filter(|(_, (d, _))| d.bg().0 > 0)
        .map(|(name, (d, class))| {
            let (w, t) = d.bg();
            row(name, class, w, t, None)
        })
        .collect();
    background.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));

    let instances = ids
        .iter()
        .map(|&id| InstanceFigures {
            inst_id: id,
            instance_name: after
                .instances
                .iter()
                .find(|i| i.inst_id == id)
                .map(|i| i.instance_name.clone())
                .unwrap_or_default(),
            read_iops: stats.of(id, "physical read IO requests") / secs,
            read_iops_total: stats.of(id, "physical read total IO requests") / secs,
            write_iops: stats.of(id, "physical write IO requests") / secs,
            write_iops_total: stats.of(id, "physical write total IO requests") / secs,
        })
        .collect();

    let hit_ratio = (logical > 0.0).then(|| 1.0 - ((blocks - direct).max(0.0) / logical).min(1.0));
    if let Some(hit) = hit_ratio
        && hit >= CACHED_HIT_RATIO
    {
        warnings.push(format!(
            "the run was served from the buffer cache ({:.1}% buffer hits, {:.0} read requests/s): the data set, or \
             its hot part, fits in the cache; raise data.scale or data.schemas, or shrink db_cache_size (SLOB's \
             simple.ora uses 128M)",
            100.0 * hit,
            reads / secs
        ));
    }
    let bg_of = |name: &str| events.get(name).map_or((0, 0), |(d, _)| d.bg());
    let mib = |bytes: f64| bytes / secs / (1u64 << 20) as f64;
    let (dfpw_w, dfpw_t) = bg_of("db file parallel write");
    let (lfpw_w, lfpw_t) = bg_of("log file parallel write");
    let awr_info = AwrInfo {
        elapsed_s: seconds,
        db_cpu_per_s: db_cpu_s.map(|c| (c + tm.sum("background cpu time") / 1e6) / secs),
        db_time_per_s: db_time_s / secs,
        executes_per_s: stats.sum("execute count") / secs,
        lio_per_s: logical / secs,
        preads_per_s: reads / secs,
        read_mib_per_s: mib(stats.sum("physical read total bytes")),
        pwrites_per_s: writes / secs,
        write_mib_per_s: mib(stats.sum("physical write total bytes")),
        redo_mib_per_s: mib(redo),
        dfsr_lat_us: avg_read_latency_us,
        dpr_lat_us: avg_us(dpr_w, dpr_t),
        dfpr_lat_us: avg_us(par_w, par_t),
        dfpw_lat_us: avg_us(dfpw_w, dfpw_t),
        lfpw_lat_us: avg_us(lfpw_w, lfpw_t),
        top_wait: foreground.first().map(top_wait),
    };
    let views = if after.source.is_empty() {
        "gv$sysstat, gv$sys_time_model, gv$system_event"
    } else {
        after.source.as_str()
    };
    let db = DbMetrics {
        source: format!(
            "{views} ({}); read and write IOPS are I/O requests to data files \
             ('physical read/write IO requests', as SLOB's awr_info); all files: {:.1} read and {:.1} write requests/s \
             ('physical read/write total IO requests')",
            scope_label(con),
            reads_total / secs,
            writes_total / secs
        ),
        seconds,
        read_iops: reads / secs,
        read_blocks_per_s: blocks / secs,
        write_iops: writes / secs,
        avg_read_latency_us,
        read_latency_note: avg_read_latency_us
            .is_none()
            .then(|| "no foreground 'db file sequential read' waits inside the window".to_string()),
        buffer_hits_per_s: (logical - blocks).max(0.0) / secs,
        // AWR's Buffer Hit %: direct reads bypass the cache.
        buffer_hit_ratio: hit_ratio,
        wal_bytes_per_s: Some(redo / secs),
        wal_writes_per_s: Some(stats.sum("redo writes") / secs),
        wal_syncs_per_s: events
            .get("log file sync")
            .map(|(d, _)| d.waits_fg as f64 / secs),
        commits_per_s: commits / secs,
        checkpoints: 0,
        autovacuum_runs: 0,
        autoanalyze_runs: 0,
        db_time_s: Some(db_time_s),
        dbio_tables: TableIo::default(),
        valid: reasons.is_empty(),
        invalid_reasons: reasons,
        counters,
        awr_info: Some(awr_info),
    };
    let waits = WaitProfile {
        period_ms: 0.0,
        achieved_period_ms: 0.0,
        samples: 0,
        db_time_s,
        db_time_source: db_time_source.into(),
        foreground,
        background,
        sessions_by: "the database's foreground/background split (V$SYSTEM_EVENT)".into(),
        other_sessions: Vec::new(),
        other_sessions_pct: None,
        visibility_note: None,
    };
    Window {
        db,
        waits,
        instances,
        warnings,
    }
}

/// The measured CPU row's name (AWR's); the sampler's on-CPU samples count towards it.
pub const DB_CPU: &str = "DB CPU";

/// The top foreground row as awr_info.sh's TOP WAIT shows the report's: `event waits time(s)
/// avg(ms) %DBtime class`, or `DB CPU time(s) %DBtime`.
fn top_wait(r: &WaitRow) -> String {
    let pct = r
        .pct_db_time
        .map(|p| format!(" {p:.1}"))
        .unwrap_or_default();
    match (r.event.split_once(':'), r.waits) {
        (Some((class, event)), Some(waits)) => format!(
            "{event} {waits} {:.0} {:.0}{pct} {class}",
            r.time_s,
            r.avg_us.unwrap_or(0.0) / 1e3
        ),
        _ => format!("{} {:.0}{pct}", r.event, r.time_s),
    }
}

/// One row of STATS$SNAPSHOT (with its instance's name and version from
/// STATS$DATABASE_INSTANCE); times `YYYY-MM-DDTHH:MI:SS`, DATEs of one-second resolution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatspackSnap {
    pub snap_id: i64,
    pub dbid: i64,
    pub instance_number: u32,
    pub snap_time: String,
    pub startup_time: String,
    pub instance_name: String,
    pub version: String,
}

/// The seconds between two Statspack snapshots as its report counts them: the difference of
/// their SNAP_TIMEs (whole seconds). None when a time is unreadable or they are not in order.
pub fn statspack_seconds(begin: &StatspackSnap, end: &StatspackSnap) -> Option<f64> {
    let t = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S").ok();
    let secs = (t(&end.snap_time)? - t(&begin.snap_time)?).num_seconds();
    (secs > 0).then_some(secs as f64)
}

/// statspack.txt: the figures of the two Statspack snapshots around the window, computed from
/// the STATS$ tables as `window` computes them from V$, in a Statspack report's words, with
/// the awr_info line and how to make the full report.
pub fn statspack_text(
    begin: &StatspackSnap,
    end: &StatspackSnap,
    w: &Window,
    sessions: u32,
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let secs = w.db.seconds.max(1e-9);
    let _ = writeln!(
        o,
        "Statspack figures of snapshots {} -> {} (DBID {}, instance {} {}, {}), computed by dbio from PERFSTAT's STATS$ tables",
        begin.snap_id,
        end.snap_id,
        begin.dbid,
        begin.instance_number,
        begin.instance_name,
        begin.version
    );
    let _ = writeln!(
        o,
        "Begin Snap {}  End Snap {}  Elapsed {:.0} s (the snapshots' SNAP_TIME, whole seconds)",
        begin.snap_time, end.snap_time, secs
    );
    if !w.db.valid {
        let _ = writeln!(o, "INVALID: {}", w.db.invalid_reasons.join("; "));
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Load Profile                     Per Second");
    let c = |k: &str| {
        w.db.counters
            .get(&format!("gv$sysstat.{k}"))
            .copied()
            .unwrap_or(0.0)
            / secs
    };
    let rows: [(&str, f64); 8] = [
        ("DB time(s)", w.db.db_time_s.unwrap_or(0.0) / secs),
        (
            "DB CPU(s)",
            w.waits
                .foreground
                .iter()
                .find(|r| r.event == DB_CPU)
                .map_or(0.0, |r| r.time_s / secs),
        ),
        ("Redo size (bytes)", c("redo size")),
        ("Logical reads", c("session logical reads")),
        ("Physical reads (blocks)", c("physical reads")),
        ("Physical read IO requests", c("physical read IO requests")),
        (
            "Physical write IO requests",
            c("physical write IO requests"),
        ),
        ("Executes", c("execute count")),
    ];
    for (name, v) in rows {
        let _ = writeln!(o, "  {name:<28} {v:>14.1}");
    }
    for (title, list, pct) in [
        ("Top 5 Timed Foreground Events", &w.waits.foreground, true),
        ("Top 5 Background Wait Events", &w.waits.background, false),
    ] {
        let _ = writeln!(o);
        let _ = writeln!(o, "{title}");
        let _ = writeln!(
            o,
            "  {:<40} {:>12} {:>10} {:>9} {:>7}",
            "Event",
            "Waits",
            "Time(s)",
            "Avg(ms)",
            if pct { "%DB" } else { "" }
        );
        for r in list.iter().take(5) {
            let _ = writeln!(
                o,
                "  {:<40} {:>12} {:>10.0} {:>9} {:>7}",
                r.event,
                r.waits.map(|x| x.to_string()).unwrap_or_default(),
                r.time_s,
                r.avg_us
                    .map(|a| format!("{:.1}", a / 1e3))
                    .unwrap_or_default(),
                r.pct_db_time.map(|p| format!("{p:.1}")).unwrap_or_default()
            );
        }
    }
    if let Some(a) = &w.db.awr_info {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "SLOB's awr_info.sh columns (statspack_info.sh reads the same from a report):"
        );
        let _ = writeln!(o, "{}", AwrInfo::HEADER);
        let _ = writeln!(o, "{}", a.line("statspack.txt", sessions));
    }
    for warning in &w.warnings {
        let _ = writeln!(o, "warning: {warning}");
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "The full Statspack report: connect as PERFSTAT with SQL*Plus on the database host and run \
         @?/rdbms/admin/spreport (begin_snap {}, end_snap {}).",
        begin.snap_id, end.snap_id
    );
    o
}

/// One Statspack snapshot (STATS$SNAPSHOT, STATS$SYSSTAT, STATS$SYS_TIME_MODEL,
/// STATS$SYSTEM_EVENT of one instance) in the collector's shape, so that two of them give the
/// same figures as two V$ snapshots: `window` over them is what a Statspack report of the
/// interval shows. Statspack keeps no CON_ID (the rows are the instance's) and no
/// microsecond histogram.
pub fn statspack_snapshot(
    snap: &StatspackSnap,
    sysstat: Vec<(String, f64)>,
    time_model: Vec<(String, f64)>,
    events: Vec<EventCounts>,
) -> Snapshot {
    let inst_id = snap.instance_number;
    Snapshot {
        instances: vec![InstanceRow {
            inst_id,
            instance_name: snap.instance_name.clone(),
            startup_time: snap.startup_time.clone(),
            version: snap.version.clone(),
        }],
        sysstat: sysstat
            .into_iter()
            .map(|(name, value)| StatRow {
                inst_id,
                con_id: 0,
                name,
                value,
            })
            .collect(),
        time_model: time_model
            .into_iter()
            .map(|(stat_name, value)| TimeModelRow {
                inst_id,
                con_id: 0,
                stat_name,
                value,
            })
            .collect(),
        events: events
            .into_iter()
            .map(|counts| EventRow::of(inst_id, 0, counts))
            .collect(),
        histogram: Vec::new(),
        source: "perfstat.stats$sysstat, stats$sys_time_model, stats$system_event".into(),
    }
}

/// Puts the sampler's counts beside the measured rows: `samples` of each event, and rows for
/// events the sampler saw that V$SYSTEM_EVENT did not time (marked estimated). The sampler's
/// `CPU` is AWR's `DB CPU`.
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
        let name = if event == "CPU" { DB_CPU } else { event };
        match waits.foreground.iter_mut().find(|r| r.event == name) {
            Some(row) => row.samples = *n,
            None => waits.foreground.push(WaitRow {
                event: name.to_string(),
                waits: None,
                time_s: *n as f64 * achieved_period_ms / 1e3,
                avg_us: None,
                pct_db_time: None,
                measured: false,
                samples: *n,
                note: None,
                device_await_ms: None,
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

    /// Within `rel` of the report's printed figure.
    fn close(got: f64, report: f64, rel: f64) -> bool {
        (got - report).abs() <= rel * report.abs().max(1e-9)
    }

    fn find<'a>(rows: &'a [WaitRow], event: &str) -> &'a WaitRow {
        rows.iter()
            .find(|r| r.event == event)
            .unwrap_or_else(|| panic!("{event} not in {rows:?}"))
    }

    fn fg<'a>(w: &'a Window, event: &str) -> &'a WaitRow {
        find(&w.waits.foreground, event)
    }

    fn bg<'a>(w: &'a Window, event: &str) -> &'a WaitRow {
        find(&w.waits.background, event)
    }

    /// SLOB's own AWR report (advanced_topics/awr.txt.128 of SLOB 2.5.3.1: 128 sessions,
    /// 11.2.0.3, snaps 160-161): the before/after fixture holds that report's totals, and dbio
    /// must print the report's per-second rates and average waits.
    const AWR_ELAPSED_S: f64 = 304.408;

    #[test]
    fn slobs_awr_report_is_reproduced_rates() {
        let w = window(
            &fixture("awr-slob-128-before"),
            &fixture("awr-slob-128-after"),
            AWR_ELAPSED_S,
        );
        let db = &w.db;
        assert!(db.valid, "{:?}", db.invalid_reasons);
        // Instance Activity Stats "per Second" column (awr_info's PREADS and PWRITES).
        assert!(close(db.read_iops, 71_553.3, 5e-6), "{}", db.read_iops);
        assert!(close(db.write_iops, 25_884.2, 5e-6), "{}", db.write_iops);
        let inst = &w.instances[0];
        assert!(close(inst.read_iops_total, 71_556.5, 5e-6), "{inst:?}");
        assert!(close(inst.write_iops_total, 25_955.5, 5e-6), "{inst:?}");
        assert!(
            db.source
                .contains("71556.5 read and 25955.5 write requests/s"),
            "{}",
            db.source
        );
        // Load Profile: Physical reads, Logical reads, Redo size, DB Time(s), DB CPU(s).
        assert!(close(db.read_blocks_per_s, 71_554.1, 5e-6));
        assert!(close(
            db.buffer_hits_per_s + db.read_blocks_per_s,
            119_749.6,
            5e-6
        ));
        assert!(close(db.wal_bytes_per_s.unwrap(), 113_458_715.9, 5e-7));
        assert!(close(db.db_time_s.unwrap() / AWR_ELAPSED_S, 126.5, 5e-4));
        let cpu = fg(&w, DB_CPU);
        assert!(
            close(cpu.time_s / AWR_ELAPSED_S, 5.7, 1e-2),
            "{}",
            cpu.time_s
        );
        assert!(close(
            db.counters["gv$sysstat.execute count"] / AWR_ELAPSED_S,
            370.8,
            5e-4
        ));
        assert!(close(db.commits_per_s, 0.4, 0.06));
        // Instance Efficiency: Buffer Hit % 40.25 (direct reads left out, as AWR).
        let hit = 100.0 * db.buffer_hit_ratio.unwrap();
        assert!((hit - 40.25).abs() < 0.005, "{hit}");
        // Time Model: DB time 38,493.3 s, DB CPU 1,730.8 s, 4.5 % of DB time.
        assert!((db.db_time_s.unwrap() - 38_493.3).abs() < 0.05);
        assert!((cpu.pct_db_time.unwrap() - 4.5).abs() < 0.05);
    }

    #[test]
    fn slobs_awr_report_is_reproduced_waits() {
        let w = window(
            &fixture("awr-slob-128-before"),
            &fixture("awr-slob-128-after"),
            AWR_ELAPSED_S,
        );
        // Top 5 Timed Foreground Events, in the report's order and with its figures.
        let top: Vec<&str> = w.waits.foreground[..5]
            .iter()
            .map(|r| r.event.as_str())
            .collect();
        assert_eq!(
            top,
            [
                "User I/O:db file sequential read",
                "Configuration:log buffer space",
                "Configuration:free buffer waits",
                DB_CPU,
                "Commit:log file sync"
            ]
        );
        let seq = fg(&w, "User I/O:db file sequential read");
        assert_eq!(seq.waits, Some(21_628_695), "foreground waits only");
        // awr_info's DFSR_LAT: 16,407 s / 21,628,695 waits = 759 µs.
        assert!(
            (seq.avg_us.unwrap() - 758.6).abs() < 0.05,
            "{:?}",
            seq.avg_us
        );
        assert!((w.db.avg_read_latency_us.unwrap() - 758.6).abs() < 0.05);
        assert!((seq.pct_db_time.unwrap() - 42.6).abs() < 0.05);
        let lbs = fg(&w, "Configuration:log buffer space");
        assert_eq!(lbs.waits, Some(25_753));
        assert!((lbs.avg_us.unwrap() / 1e3 - 491.0).abs() < 0.5);
        assert!((lbs.pct_db_time.unwrap() - 32.8).abs() < 0.05);
        let fbw = fg(&w, "Configuration:free buffer waits");
        assert!((fbw.avg_us.unwrap() / 1e3 - 11.0).abs() < 0.5);
        assert!((fbw.pct_db_time.unwrap() - 17.2).abs() < 0.05);
        let lfs = fg(&w, "Commit:log file sync");
        assert!((lfs.avg_us.unwrap() / 1e3 - 1717.0).abs() < 0.5);
        // Background Wait Events: total - foreground.
        let bseq = bg(&w, "User I/O:db file sequential read");
        assert_eq!(bseq.waits, Some(154_359));
        assert!((bseq.time_s - 111.0).abs() < 1e-6);
        let lfpw = bg(&w, "System I/O:log file parallel write");
        assert!(
            (lfpw.avg_us.unwrap() / 1e3 - 440.0).abs() < 1.0,
            "{:?}",
            lfpw.avg_us
        );
        assert_eq!(
            bg(&w, "System I/O:db file parallel write").waits,
            Some(32_033)
        );
        assert!(bseq.pct_db_time.is_none(), "background time is not DB time");
        assert!(
            !w.waits
                .foreground
                .iter()
                .any(|r| r.event.contains("log file parallel write")),
            "LGWR's writes are background only"
        );
        // Idle waits (SQL*Net message from client, rdbms ipc message) are in neither table.
        for r in w.waits.foreground.iter().chain(&w.waits.background) {
            assert!(!r.event.starts_with("Idle:"), "{}", r.event);
        }
        // SLOB's kit forced single-block reads: no parallel-read warning.
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    }

    #[test]
    fn a_restart_inside_the_window_voids_the_figures() {
        let w = window(
            &fixture("awr-slob-128-before"),
            &fixture("awr-slob-128-after-restart"),
            AWR_ELAPSED_S,
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
    fn a_pdb_uses_its_own_rows_and_warns_of_parallel_reads() {
        let before = fixture("pdb-before");
        let after = fixture("pdb-after");
        let w = window(&before, &after, 300.0);
        assert!(w.db.valid, "{:?}", w.db.invalid_reasons);
        assert!(
            w.db.source.contains("CON_ID 3: this PDB only"),
            "{}",
            w.db.source
        );
        // 12,000,000 data-file read requests in 300 s.
        assert!(
            (w.db.read_iops - 40_000.0).abs() < 1e-6,
            "{}",
            w.db.read_iops
        );
        let seq = fg(&w, "User I/O:db file sequential read");
        assert_eq!(seq.waits, Some(9_000_000));
        assert!((seq.avg_us.unwrap() - 400.0).abs() < 1e-9);
        let par = fg(&w, "User I/O:db file parallel read");
        assert_eq!(par.waits, Some(600_000));
        assert!((par.avg_us.unwrap() - 1_500.0).abs() < 1e-9);
        let warn = w.warnings.join(" ");
        assert!(
            warn.contains("'db file parallel read' took 20%")
                && warn.contains("_db_block_prefetch_limit=0")
                && warn.contains("_db_block_prefetch_quota=0")
                && warn.contains("_db_file_noncontig_mblock_read_count=0"),
            "{warn}"
        );
        // The micro histogram, per bucket, of the PDB's rows.
        let c = &w.db.counters;
        let key = |b: u64| format!("gv$event_histogram_micro.db file sequential read.lt_{b}us");
        let sum: f64 = [256, 512, 1024, 2048].iter().map(|b| c[&key(*b)]).sum();
        assert_eq!(
            sum,
            c["gv$system_event.db file sequential read.total_waits"]
        );
        assert_eq!(c[&key(512)], 7_000_000.0);
        // Where rows of CON_ID 0 (the whole instance) are there too, they win, never summed.
        let widen = |s: &Snapshot, factor: f64| {
            let mut s = s.clone();
            let extra: Vec<StatRow> = s
                .sysstat
                .iter()
                .map(|r| StatRow {
                    con_id: 0,
                    value: r.value * factor,
                    ..r.clone()
                })
                .collect();
            s.sysstat.extend(extra);
            s
        };
        let w0 = window(&widen(&before, 2.0), &widen(&after, 2.0), 300.0);
        assert!(
            (w0.db.read_iops - 80_000.0).abs() < 1e-6,
            "{}",
            w0.db.read_iops
        );
        assert!(w0.db.source.contains("CON_ID 0: the whole instance"));
    }

    #[test]
    fn samples_join_the_measured_rows_and_cpu_is_db_cpu() {
        let mut w = window(&fixture("pdb-before"), &fixture("pdb-after"), 300.0).waits;
        let mut seen = BTreeMap::new();
        seen.insert("User I/O:db file sequential read".to_string(), 2_500u64);
        seen.insert("Concurrency:read by other session".to_string(), 40u64);
        seen.insert("CPU".to_string(), 300u64);
        add_samples(&mut w, 100.0, 101.0, 2_950, &seen);
        assert_eq!(w.samples, 2_950);
        let top = w
            .foreground
            .iter()
            .find(|r| r.event == "User I/O:db file sequential read")
            .unwrap();
        assert_eq!((top.samples, top.measured), (2_500, true));
        let cpu = w.foreground.iter().find(|r| r.event == DB_CPU).unwrap();
        assert_eq!((cpu.samples, cpu.measured), (300, true));
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
        assert!(w.instances[0].read_iops_total > w.instances[0].read_iops);
        let c = &w.db.counters;
        assert_eq!(
            c["gv$sysstat.inst2.physical read IO requests"],
            39_500.0 * 120.0
        );
        assert_eq!(
            c["gv$sysstat.inst1.physical read IO requests"]
                + c["gv$sysstat.inst2.physical read IO requests"],
            c["gv$sysstat.physical read IO requests"]
        );
        // Foreground waits of both instances, from the _FG columns.
        let seq = fg(&w, "User I/O:db file sequential read");
        assert_eq!(seq.waits, Some(9_480_000 + 9_120_000));
        let bseq = bg(&w, "User I/O:db file sequential read");
        assert_eq!(bseq.waits, Some(12_000 + 10_000));
        assert!((w.db.avg_read_latency_us.unwrap() - 500.0).abs() < 1e-6);
        let cpu = fg(&w, DB_CPU);
        assert!((cpu.time_s - 2.0 * 96.0).abs() < 1e-9);
    }

    // awr_info.sh on SLOB's awr.txt.128 prints (11.2, no "Background CPU(s)" row in its Load
    // Profile, so its DB CPU is 5.7 there):
    // awr.txt.128|128|304|5.7|126.5|370|119749|71553|559.1|25884|329|108.2|759|0|0|312|440653|db file sequential read ...
    #[test]
    fn slobs_awr_report_gives_awr_infos_line() {
        let w = window(
            &fixture("awr-slob-128-before"),
            &fixture("awr-slob-128-after"),
            AWR_ELAPSED_S,
        );
        let a = w.db.awr_info.as_ref().unwrap();
        assert!((a.db_time_per_s - 126.45).abs() < 0.01, "{a:?}");
        // DB CPU + background CPU: (1,730.76 + 385.1) s / 304.408 s.
        assert!((a.db_cpu_per_s.unwrap() - 6.951).abs() < 0.001, "{a:?}");
        assert!((a.read_mib_per_s - 559.07).abs() < 0.01, "{a:?}");
        assert!((a.write_mib_per_s - 329.42).abs() < 0.01, "{a:?}");
        assert!((a.dfsr_lat_us.unwrap() - 758.58).abs() < 0.01, "{a:?}");
        assert_eq!(a.dpr_lat_us, None, "no foreground direct path read");
        assert!((a.dfpw_lat_us.unwrap() - 312.18).abs() < 0.01, "{a:?}");
        assert!((a.lfpw_lat_us.unwrap() - 440_652.8).abs() < 0.1, "{a:?}");
        assert_eq!(
            a.line("awr.txt.128", 128),
            "awr.txt.128|128|304|7.0|126.5|370|119749|71553|559.1|25884|329|108.2|759|0|0|312|440653|\
             db file sequential read 21628695 16407 1 42.6 User I/O|"
        );
        assert_eq!(
            AwrInfo::HEADER,
            "FILE|SESSIONS|ELAPSED|DB CPU|DB Tm|EXECUTES|LIO|PREADS|READ_MBS|PWRITES|WRITE_MBS|REDO_MBS|DFSR_LAT|DPR_LAT|DFPR_LAT|DFPW_LAT|LFPW_LAT|TOP WAIT|"
        );
    }

    #[derive(serde::Deserialize)]
    struct StatspackFixture {
        snapshot: StatspackSnap,
        sysstat: Vec<(String, f64)>,
        time_model: Vec<(String, f64)>,
        events: Vec<EventCounts>,
    }

    fn statspack_fixture(name: &str) -> (StatspackSnap, Snapshot) {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let f: StatspackFixture =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let snap = statspack_snapshot(&f.snapshot, f.sysstat, f.time_model, f.events);
        (f.snapshot, snap)
    }

    // The same window in Statspack's tables (fixtures/README.md): its report divides by the
    // snapshots' SNAP_TIME difference, 13:53:40 -> 13:58:45 = 305 s (DATEs, whole seconds),
    // not AWR's 304.408 s, so every rate is 0.2% lower.
    #[test]
    fn a_statspack_window_gives_its_reports_figures() {
        let (b, before) = statspack_fixture("statspack-slob-128-before");
        let (e, after) = statspack_fixture("statspack-slob-128-after");
        let secs = statspack_seconds(&b, &e).unwrap();
        assert_eq!(secs, 305.0);
        let w = window(&before, &after, secs);
        assert!(w.db.valid, "{:?}", w.db.invalid_reasons);
        assert!(
            w.db.source.starts_with("perfstat.stats$sysstat"),
            "{}",
            w.db.source
        );
        // 21,781,404 data-file read requests / 305 s.
        assert!(
            (w.db.read_iops - 71_414.4).abs() < 0.05,
            "{}",
            w.db.read_iops
        );
        assert!(
            (w.db.write_iops - 25_833.9).abs() < 0.05,
            "{}",
            w.db.write_iops
        );
        // The waits are the same counts; the average wait does not depend on the window.
        let seq = fg(&w, "User I/O:db file sequential read");
        assert_eq!(seq.waits, Some(21_628_695));
        assert!((seq.avg_us.unwrap() - 758.58).abs() < 0.01);
        assert!((seq.pct_db_time.unwrap() - 42.6).abs() < 0.05);
        let a = w.db.awr_info.as_ref().unwrap();
        assert!(a.line("statspack.txt", 128).starts_with("statspack.txt|128|305|6.9|126.2|370|119517|71414|558.0|25833|329|107.9|759|0|0|312|440653|"), "{}", a.line("statspack.txt", 128));
        let text = statspack_text(&b, &e, &w, 128);
        assert!(
            text.contains("snapshots 160 -> 161 (DBID 3541062017, instance 1 SLOB")
                && text.contains("Elapsed 305 s")
                && text.contains("  Physical read IO requests           71414.4\n")
                && text.contains("User I/O:db file sequential read")
                && text.contains(AwrInfo::HEADER)
                && text.contains("@?/rdbms/admin/spreport (begin_snap 160, end_snap 161)"),
            "{text}"
        );
        // Snapshots out of order or unreadable give no window.
        assert_eq!(statspack_seconds(&e, &b), None);
    }

    // Regression: 'direct path read' and 'db file scattered read' were never flagged.
    #[test]
    fn full_scans_are_flagged_beside_parallel_reads() {
        let before = fixture("pdb-before");
        let mut after = fixture("pdb-after");
        let add = |s: &mut Snapshot, event: &str, waits: u64, micros: u64| {
            s.events.push(EventRow {
                inst_id: 1,
                con_id: 3,
                event: event.into(),
                wait_class: "User I/O".into(),
                total_waits: waits,
                time_waited_micro: micros,
                total_waits_fg: Some(waits),
                time_waited_micro_fg: Some(micros),
            });
        };
        // 600 s of direct path reads and 300 s of scattered reads beside 3,600 s sequential.
        add(&mut after, "direct path read", 100_000, 600_000_000);
        add(&mut after, "db file scattered read", 50_000, 300_000_000);
        let w = window(&before, &after, 300.0);
        let all = w.warnings.join("\n");
        assert!(
            all.contains("'direct path read' took") && all.contains("bypass the buffer cache"),
            "{all}"
        );
        assert!(all.contains("'db file scattered read' took"), "{all}");
        let a = w.db.awr_info.unwrap();
        assert_eq!(a.dpr_lat_us, Some(6_000.0));
        assert_eq!(a.dfpr_lat_us, Some(1_500.0));
        // SLOB's own report has neither.
        let slob = window(
            &fixture("awr-slob-128-before"),
            &fixture("awr-slob-128-after"),
            AWR_ELAPSED_S,
        );
        assert!(slob.warnings.is_empty(), "{:?}", slob.warnings);
    }

    // Regression: the post-run buffer-hit warning was PostgreSQL's only.
    #[test]
    fn a_run_served_by_the_buffer_cache_is_warned() {
        let before = fixture("awr-slob-128-before");
        let mut after = fixture("awr-slob-128-after");
        for r in &mut after.sysstat {
            if r.name == "session logical reads" {
                // 100 x the physical reads: 99% hits.
                r.value = 17_000_051.0 + 100.0 * 21_781_641.0;
            }
        }
        let w = window(&before, &after, AWR_ELAPSED_S);
        assert!(w.db.buffer_hit_ratio.unwrap() >= CACHED_HIT_RATIO);
        let all = w.warnings.join("\n");
        assert!(
            all.contains("served from the buffer cache") && all.contains("db_cache_size"),
            "{all}"
        );
    }
}
