//! The AWR-like collector: one snapshot of the server's cumulative statistics before the
//! window and one after, each in a single transaction with `stats_fetch_consistency =
//! snapshot` (15+), and the deltas turned into figures. The queries depend on the major
//! version (13-18); the formulas follow pg-stats §7.4 and cite the view each comes from.
//!
//! Snapshots are maps of `view.column` to a number, so every figure can name the counter
//! delta it comes from (`DbMetrics::counters`), and a counter that went backwards or a
//! changed `stats_reset` marks the run invalid.

use std::collections::BTreeMap;

use std::path::PathBuf;
use std::time::Duration;

use dbio_core::dbstats::{DbMetrics, DeviceMetrics, TableIo, WaitProfile, cache_warnings};
use dbio_core::device::{self, Device, DiskCounters};
use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::sampler::{self, Sampler};

/// Counters (`view.column` -> value) and reset stamps (`view` -> stats_reset text).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub major: i32,
    pub values: BTreeMap<String, f64>,
    pub resets: BTreeMap<String, String>,
}

/// The statements of one snapshot for a major version. Each returns one row; columns named
/// `reset:<view>` are text stamps, the others numbers.
pub fn snapshot_queries(major: i32) -> Vec<&'static str> {
    let mut q = vec![if major >= 14 { DB_14 } else { DB_13 }, TABLES];
    match major {
        ..=13 => q.push(LSN),
        14..=17 => q.push(WAL_14),
        _ => q.push(WAL_18),
    }
    match major {
        ..=16 => q.push(BGWRITER_13),
        17 => q.extend([CHECKPOINTER_17, BGWRITER_17]),
        _ => q.extend([CHECKPOINTER_18, BGWRITER_17]),
    }
    match major {
        ..=15 => {}
        16 | 17 => q.push(IO_16),
        _ => q.push(IO_18),
    }
    q
}

/// pg_stat_statements (when installed and preloaded): dbio's own statements, this database
/// and role. Updated at statement end, with no flush delay (pg-stats §2.6); 17 renamed
/// blk_read_time to shared_blk_read_time.
pub fn pgss_query(major: i32) -> String {
    let read_time = if major >= 17 {
        "shared_blk_read_time"
    } else {
        "blk_read_time"
    };
    format!(
        "SELECT coalesce(sum(calls), 0)::float8 AS \"pgss.calls\", \
         coalesce(sum(shared_blks_read), 0)::float8 AS \"pgss.shared_blks_read\", \
         coalesce(sum(shared_blks_hit), 0)::float8 AS \"pgss.shared_blks_hit\", \
         coalesce(sum({read_time}), 0)::float8 AS \"pgss.read_time\" \
         FROM pg_stat_statements \
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND userid = (SELECT oid FROM pg_roles WHERE rolname = current_user) \
           AND query ~ '\\.cf1 (WHERE|SET) .*custid BETWEEN'"
    )
}

/// Is pg_stat_statements installed in this database and loaded (it errors when not preloaded)?
pub async fn pgss_available(client: &Client, major: i32) -> bool {
    client.query_one(&pgss_query(major), &[]).await.is_ok()
}

const DB_13: &str = concat!(
    "SELECT xact_commit::float8 AS \"db.xact_commit\", xact_rollback::float8 AS \"db.xact_rollback\", ",
    "blks_read::float8 AS \"db.blks_read\", blks_hit::float8 AS \"db.blks_hit\", ",
    "blk_read_time::float8 AS \"db.blk_read_time\", blk_write_time::float8 AS \"db.blk_write_time\", ",
    "tup_updated::float8 AS \"db.tup_updated\", temp_bytes::float8 AS \"db.temp_bytes\", ",
    "stats_reset::text AS \"reset:pg_stat_database\" ",
    "FROM pg_stat_database WHERE datname = current_database()"
);

/// 14+: active_time is a measured DB time (ms executing statements).
const DB_14: &str = concat!(
    "SELECT xact_commit::float8 AS \"db.xact_commit\", xact_rollback::float8 AS \"db.xact_rollback\", ",
    "blks_read::float8 AS \"db.blks_read\", blks_hit::float8 AS \"db.blks_hit\", ",
    "blk_read_time::float8 AS \"db.blk_read_time\", blk_write_time::float8 AS \"db.blk_write_time\", ",
    "tup_updated::float8 AS \"db.tup_updated\", temp_bytes::float8 AS \"db.temp_bytes\", ",
    "active_time::float8 AS \"db.active_time\", ",
    "stats_reset::text AS \"reset:pg_stat_database\" ",
    "FROM pg_stat_database WHERE datname = current_database()"
);

/// dbio's tables in the schemas `$1`, summed.
const TABLES: &str = "SELECT coalesce(sum(io.heap_blks_read), 0)::float8 AS \"tables.heap_blks_read\", \
     coalesce(sum(io.heap_blks_hit), 0)::float8 AS \"tables.heap_blks_hit\", \
     coalesce(sum(io.idx_blks_read), 0)::float8 AS \"tables.idx_blks_read\", \
     coalesce(sum(io.idx_blks_hit), 0)::float8 AS \"tables.idx_blks_hit\", \
     coalesce(sum(t.idx_scan), 0)::float8 AS \"tables.idx_scan\", \
     coalesce(sum(t.n_tup_upd), 0)::float8 AS \"tables.n_tup_upd\", \
     coalesce(sum(t.autovacuum_count), 0)::float8 AS \"tables.autovacuum_count\", \
     coalesce(sum(t.autoanalyze_count), 0)::float8 AS \"tables.autoanalyze_count\" \
     FROM pg_statio_user_tables io JOIN pg_stat_user_tables t USING (relid) \
     WHERE io.schemaname = ANY($1::text[]) AND io.relname = 'cf1'";

/// 13 has no pg_stat_wal: WAL bytes from the LSN (NULL on a standby).
const LSN: &str = "SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn() END, '0/0')::float8 \
     AS \"wal.wal_bytes\"";

const WAL_14: &str = "SELECT wal_records::float8 AS \"wal.wal_records\", wal_fpi::float8 AS \"wal.wal_fpi\", \
     wal_bytes::float8 AS \"wal.wal_bytes\", wal_buffers_full::float8 AS \"wal.wal_buffers_full\", \
     wal_write::float8 AS \"wal.wal_write\", wal_sync::float8 AS \"wal.wal_sync\", \
     wal_write_time::float8 AS \"wal.wal_write_time\", wal_sync_time::float8 AS \"wal.wal_sync_time\", \
     stats_reset::text AS \"reset:pg_stat_wal\" FROM pg_stat_wal";

/// 18 moved WAL write and sync counts to pg_stat_io (object 'wal').
const WAL_18: &str = "SELECT wal_records::float8 AS \"wal.wal_records\", wal_fpi::float8 AS \"wal.wal_fpi\", \
     wal_bytes::float8 AS \"wal.wal_bytes\", wal_buffers_full::float8 AS \"wal.wal_buffers_full\", \
     stats_reset::text AS \"reset:pg_stat_wal\" FROM pg_stat_wal";

const BGWRITER_13: &str = "SELECT checkpoints_timed::float8 AS \"ckpt.timed\", checkpoints_req::float8 AS \"ckpt.requested\", \
     buffers_checkpoint::float8 AS \"ckpt.buffers_written\", checkpoint_write_time::float8 AS \"ckpt.write_time\", \
     checkpoint_sync_time::float8 AS \"ckpt.sync_time\", buffers_clean::float8 AS \"bgwriter.buffers_clean\", \
     buffers_backend::float8 AS \"bgwriter.buffers_backend\", \
     stats_reset::text AS \"reset:pg_stat_bgwriter\" FROM pg_stat_bgwriter";

/// 17: checkpoint columns moved to pg_stat_checkpointer and were renamed.
const CHECKPOINTER_17: &str = "SELECT num_timed::float8 AS \"ckpt.timed\", num_requested::float8 AS \"ckpt.requested\", \
     buffers_written::float8 AS \"ckpt.buffers_written\", write_time::float8 AS \"ckpt.write_time\", \
     sync_time::float8 AS \"ckpt.sync_time\", stats_reset::text AS \"reset:pg_stat_checkpointer\" \
     FROM pg_stat_checkpointer";

/// 18 adds num_done: checkpoints completed (num_timed and num_requested include skipped ones).
const CHECKPOINTER_18: &str = "SELECT num_timed::float8 AS \"ckpt.timed\", num_requested::float8 AS \"ckpt.requested\", \
     num_done::float8 AS \"ckpt.done\", buffers_written::float8 AS \"ckpt.buffers_written\", \
     write_time::float8 AS \"ckpt.write_time\", sync_time::float8 AS \"ckpt.sync_time\", \
     stats_reset::text AS \"reset:pg_stat_checkpointer\" FROM pg_stat_checkpointer";

const BGWRITER_17: &str = "SELECT buffers_clean::float8 AS \"bgwriter.buffers_clean\", \
     stats_reset::text AS \"reset:pg_stat_bgwriter\" FROM pg_stat_bgwriter";

/// 16-17: pg_stat_io counts reads and writes in blocks. Foreground = client backends and
/// parallel workers ('background worker').
const IO_16: &str = "SELECT \
     coalesce(sum(reads) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_reads\", \
     coalesce(sum(read_time) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_time\", \
     coalesce(sum(reads) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.reads\", \
     coalesce(sum(hits) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.hits\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.writes\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_writes\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_write_time\", \
     max(stats_reset)::text AS \"reset:pg_stat_io\" FROM pg_stat_io";

/// 18: a read may cover several blocks (read_bytes); WAL I/O is object 'wal'.
const IO_18: &str = "SELECT \
     coalesce(sum(reads) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_reads\", \
     coalesce(sum(read_bytes) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_bytes\", \
     coalesce(sum(read_time) FILTER (WHERE object = 'relation' AND backend_type IN ('client backend', 'background worker')), 0)::float8 AS \"io.fg_read_time\", \
     coalesce(sum(reads) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.reads\", \
     coalesce(sum(hits) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.hits\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation'), 0)::float8 AS \"io.writes\", \
     coalesce(sum(writes) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_writes\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'relation' AND backend_type = 'client backend'), 0)::float8 AS \"io.fg_write_time\", \
     coalesce(sum(writes) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_writes\", \
     coalesce(sum(fsyncs) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_fsyncs\", \
     coalesce(sum(write_time) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_write_time\", \
     coalesce(sum(fsync_time) FILTER (WHERE object = 'wal'), 0)::float8 AS \"io.wal_fsync_time\", \
     max(stats_reset)::text AS \"reset:pg_stat_io\" FROM pg_stat_io";

/// Takes one snapshot in one transaction (15+: with a consistent statistics snapshot).
pub async fn take_snapshot(
    client: &Client,
    major: i32,
    schemas: &[String],
    pgss: bool,
) -> Result<Snapshot> {
    let ctx = "taking a statistics snapshot";
    let mut begin = String::from("BEGIN ISOLATION LEVEL REPEATABLE READ");
    if major >= 15 {
        begin.push_str("; SET LOCAL stats_fetch_consistency = snapshot");
    }
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| PgError::from_db(ctx, &e))?;
    let mut snap = Snapshot {
        major,
        ..Snapshot::default()
    };
    let pgss_sql = pgss_query(major);
    let mut queries: Vec<&str> = snapshot_queries(major);
    if pgss {
        queries.push(&pgss_sql);
    }
    for q in queries {
        let params: Vec<&(dyn ToSql + Sync)> = if q.contains("$1") {
            vec![&schemas]
        } else {
            vec![]
        };
        let rows = match client.query(q, &params).await {
            Ok(rows) => rows,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(PgError::from_db(ctx, &e));
            }
        };
        let Some(row) = rows.first() else { continue };
        for (i, col) in row.columns().iter().enumerate() {
            let name = col.name();
            if let Some(view) = name.strip_prefix("reset:") {
                if let Ok(Some(text)) = row.try_get::<_, Option<String>>(i) {
                    snap.resets.insert(view.to_string(), text);
                }
            } else if let Ok(Some(v)) = row.try_get::<_, Option<f64>>(i) {
                snap.values.insert(name.to_string(), v);
            }
        }
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| PgError::from_db(ctx, &e))?;
    Ok(snap)
}

/// How the sessions timed their reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoTiming {
    /// track_io_timing was on in every measured session.
    On,
    /// Off, and the role may not turn it on.
    Off,
}

/// Turns two snapshots into the window's figures.
pub fn metrics(
    before: &Snapshot,
    after: &Snapshot,
    seconds: f64,
    block_size: u64,
    timing: IoTiming,
    user: &str,
) -> DbMetrics {
    let mut m = DbMetrics {
        seconds,
        valid: true,
        ..DbMetrics::default()
    };
    for (view, stamp) in &before.resets {
        if after.resets.get(view) != Some(stamp) {
            m.valid = false;
            m.invalid_reasons.push(format!(
                "{view} was reset inside the window (stats_reset changed)"
            ));
        }
    }
    for (key, b) in &before.values {
        let Some(a) = after.values.get(key) else {
            continue;
        };
        let d = a - b;
        if d < 0.0 {
            m.valid = false;
            m.invalid_reasons.push(format!(
                "{key} went backwards ({b} -> {a}): a reset or a crash inside the window"
            ));
        }
        m.counters.insert(key.clone(), d.max(0.0));
    }
    let c = |k: &str| m.counters.get(k).copied();
    let d = |k: &str| c(k).unwrap_or(0.0);
    let rate = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
    let major = after.major;

    // Reads and their latency: pg_stat_io from 16 (foreground backends, relation data),
    // pg_stat_database before.
    let (reads, read_time_ms) = if major >= 16 {
        m.source = "pg_stat_io (client backends and parallel workers, object relation)".into();
        (d("io.fg_reads"), d("io.fg_read_time"))
    } else {
        m.source = "pg_stat_database (this database)".into();
        (d("db.blks_read"), d("db.blk_read_time"))
    };
    m.read_iops = rate(reads);
    m.read_blocks_per_s = match c("io.fg_read_bytes") {
        Some(bytes) if major >= 18 => rate(bytes / block_size.max(1) as f64),
        _ => m.read_iops,
    };
    match timing {
        IoTiming::On if reads > 0.0 => m.avg_read_latency_us = Some(1000.0 * read_time_ms / reads),
        IoTiming::On => {}
        IoTiming::Off => {
            m.read_latency_note = Some(format!(
                "track_io_timing was off and role `{user}` may not turn it on, so the database did not time its reads: \
                 ALTER SYSTEM SET track_io_timing = on; SELECT pg_reload_conf(); or, on PostgreSQL 15+, \
                 GRANT SET ON PARAMETER track_io_timing TO {user}"
            ))
        }
    }
    m.write_iops = if major >= 16 {
        rate(d("io.writes"))
    } else {
        rate(
            d("ckpt.buffers_written") + d("bgwriter.buffers_clean") + d("bgwriter.buffers_backend"),
        )
    };
    let (hits, misses) = (d("db.blks_hit"), d("db.blks_read"));
    m.buffer_hits_per_s = rate(hits);
    m.buffer_hit_ratio = (hits + misses > 0.0).then(|| hits / (hits + misses));
    m.wal_bytes_per_s = c("wal.wal_bytes").map(rate);
    (m.wal_writes_per_s, m.wal_syncs_per_s) = if major >= 18 {
        (c("io.wal_writes").map(rate), c("io.wal_fsyncs").map(rate))
    } else {
        (c("wal.wal_write").map(rate), c("wal.wal_sync").map(rate))
    };
    m.commits_per_s = rate(d("db.xact_commit"));
    // A requested checkpoint (CHECKPOINT, a full WAL) always runs. Timed ones are skipped on
    // an idle server, and 17 counts the skipped ones too, so they count only when they wrote.
    let wrote =
        d("ckpt.buffers_written") > 0.0 || d("ckpt.write_time") > 0.0 || d("ckpt.sync_time") > 0.0;
    m.checkpoints = match c("ckpt.done") {
        Some(done) => done,
        None => d("ckpt.requested") + if wrote { d("ckpt.timed") } else { 0.0 },
    } as u64;
    m.autovacuum_runs = d("tables.autovacuum_count") as u64;
    m.autoanalyze_runs = d("tables.autoanalyze_count") as u64;
    m.db_time_s = c("db.active_time").map(|ms| ms / 1000.0);
    m.dbio_tables = TableIo {
        heap_blks_read: d("tables.heap_blks_read") as u64,
        heap_blks_hit: d("tables.heap_blks_hit") as u64,
        idx_blks_read: d("tables.idx_blks_read") as u64,
        idx_blks_hit: d("tables.idx_blks_hit") as u64,
        idx_scan: d("tables.idx_scan") as u64,
        n_tup_upd: d("tables.n_tup_upd") as u64,
    };
    m
}

/// Warnings a reader of the figures must see.
pub fn warnings(m: &DbMetrics) -> Vec<String> {
    let mut w = Vec::new();
    if !m.valid {
        w.push(format!(
            "database figures are INVALID: {}",
            m.invalid_reasons.join("; ")
        ));
    }
    if m.checkpoints > 0 {
        w.push(format!(
            "{} checkpoint(s) ran inside the window: their writes, and the full-page images written after them, are in the figures",
            m.checkpoints
        ));
    }
    if m.autovacuum_runs + m.autoanalyze_runs > 0 {
        w.push(format!(
            "autovacuum ran on dbio's tables inside the window ({} vacuum, {} analyze): its reads and writes are in the figures",
            m.autovacuum_runs, m.autoanalyze_runs
        ));
    }
    if let Some(note) = &m.read_latency_note {
        w.push(format!("database read latency is null: {note}"));
    }
    w
}

/// What the collector gathered around one window.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub db: Option<DbMetrics>,
    pub waits: Option<WaitProfile>,
    pub device: Option<DeviceMetrics>,
    pub warnings: Vec<String>,
}

impl Collected {
    /// Nothing collected, for this reason.
    pub fn skipped(reason: String) -> Collected {
        Collected {
            warnings: vec![reason],
            ..Collected::default()
        }
    }
}

/// Longest the "after" snapshot may take, reconnecting included: a server that stopped
/// answering must not keep the result from being written.
const AFTER_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(5);

/// The collector around one run window: `begin` just before the window opens (drop caches,
/// "before" snapshot, device counters, sampler), `end` after the sessions have flushed or
/// disconnected.
pub struct WindowCollector {
    target: Target,
    client: Client,
    major: i32,
    block_size: u64,
    schemas: Vec<String>,
    timing: IoTiming,
    /// The device under the data and the path it was found from, for a local server.
    device: Option<(Device, PathBuf)>,
    drop_caches: bool,
    cache_control: String,
    sample_period: Duration,
    started: Option<(Snapshot, Option<DiskCounters>, Sampler)>,
    notes: Vec<String>,
    /// pg_stat_statements can be read (installed and preloaded).
    pgss: bool,
}

pub struct CollectorOptions {
    pub major: i32,
    pub block_size: u64,
    pub schemas: Vec<String>,
    pub timing: IoTiming,
    /// Data directory or tablespace location, when the role may read it.
    pub data_path: Option<PathBuf>,
    pub drop_caches: bool,
    /// The server reads with O_DIRECT (debug_io_direct includes `data`).
    pub direct_io: bool,
    pub sample_period: Duration,
}

impl WindowCollector {
    pub async fn connect(target: &Target, opts: CollectorOptions) -> Result<WindowCollector> {
        let client = target.connect("dbio-collector").await?;
        let mut notes = Vec::new();
        let pgss = pgss_available(&client, opts.major).await;
        let device = if !target.is_local() {
            notes.push(
                "device statistics need the server on this host; the target is remote".to_string(),
            );
            None
        } else {
            match &opts.data_path {
                None => {
                    notes.push(
                        "device statistics need the data directory's path, which this role may not read: \
                         GRANT pg_read_all_settings to it"
                            .to_string(),
                    );
                    None
                }
                Some(path) => match device::device_for_path(path) {
                    Some(d) => Some((d, path.clone())),
                    None => {
                        notes.push(format!(
                            "{} is not on a block device listed in /proc/diskstats (tmpfs or overlay?): no device statistics",
                            path.display()
                        ));
                        None
                    }
                },
            }
        };
        let cache_control = if opts.drop_caches {
            "dropped page cache".to_string()
        } else if opts.direct_io {
            "debug_io_direct=data".to_string()
        } else {
            "none".to_string()
        };
        Ok(WindowCollector {
            target: target.clone(),
            client,
            major: opts.major,
            block_size: opts.block_size,
            schemas: opts.schemas,
            timing: opts.timing,
            device,
            drop_caches: opts.drop_caches,
            cache_control,
            sample_period: opts.sample_period,
            started: None,
            notes,
            pgss,
        })
    }

    /// Just before the window: the error text fails the run before anything is measured.
    pub async fn begin(&mut self) -> std::result::Result<(), String> {
        if self.drop_caches {
            device::drop_page_cache()?;
        }
        let snap = take_snapshot(&self.client, self.major, &self.schemas, self.pgss)
            .await
            .map_err(|e| e.to_string())?;
        let disk = self
            .device
            .as_ref()
            .and_then(|(d, _)| device::read_counters(d));
        let sampler = Sampler::start(&self.target, self.sample_period)
            .await
            .map_err(|e| e.to_string())?;
        self.started = Some((snap, disk, sampler));
        Ok(())
    }

    /// After the window: the "after" snapshot and the figures. Failures become warnings:
    /// what the client measured is kept either way, and so are the device figures and the
    /// wait samples when the snapshot cannot be had.
    pub async fn end(mut self, window_s: f64) -> Collected {
        let mut out = Collected {
            warnings: self.notes.clone(),
            ..Collected::default()
        };
        let Some((before, disk_before, sampler)) = self.started.take() else {
            out.warnings.push(
                "database statistics were not collected: the run stopped before its window opened"
                    .into(),
            );
            return out;
        };
        if self.major < 15 {
            // 13/14 publish a session's statistics when it disconnects, through the stats
            // collector, which writes them at most every 500 ms.
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
        let samples = sampler.stop().await;
        let disk_after = self
            .device
            .as_ref()
            .and_then(|(d, _)| device::read_counters(d));
        let after = match tokio::time::timeout(
            AFTER_SNAPSHOT_TIMEOUT,
            self.after_snapshot(&mut out),
        )
        .await
        {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                out.warnings.push(format!(
                    "database figures are null: the statistics could not be read after the run: {e}"
                ));
                None
            }
            Err(_) => {
                out.warnings.push(format!(
                        "database figures are null: the server did not answer the \"after\" snapshot within {} s \
                         (stopped, overloaded, or a network partition?); device figures and wait samples are kept",
                        AFTER_SNAPSHOT_TIMEOUT.as_secs()
                    ));
                None
            }
        };
        let Some(after) = after else {
            if let (Some((dev, path)), Some(b), Some(a)) = (&self.device, disk_before, disk_after) {
                out.device = Some(device::device_metrics(
                    dev,
                    path,
                    b,
                    a,
                    window_s,
                    None,
                    &self.cache_control,
                ));
            }
            let sampled_only = DbMetrics::default();
            out.waits = Some(sampler::wait_profile(
                &samples,
                &sampled_only,
                window_s,
                self.major,
            ));
            return out;
        };
        let m = metrics(
            &before,
            &after,
            window_s,
            self.block_size,
            self.timing,
            &self.target.user,
        );
        out.warnings.extend(warnings(&m));
        if let (Some((dev, path)), Some(b), Some(a)) = (&self.device, disk_before, disk_after) {
            out.device = Some(device::device_metrics(
                dev,
                path,
                b,
                a,
                window_s,
                Some(m.read_iops * window_s),
                &self.cache_control,
            ));
        }
        out.warnings.extend(cache_warnings(&m, out.device.as_ref()));
        if samples.errors > 0 {
            out.warnings.push(format!(
                "{} wait samples failed (of {})",
                samples.errors,
                samples.errors + samples.samples
            ));
        }
        out.waits = Some(sampler::wait_profile(&samples, &m, window_s, self.major));
        out.db = Some(m);
        out
    }

    /// The "after" snapshot. The collector's connection sat idle through the window; when
    /// it was lost anyway (a server-side timeout, a terminated backend), a new connection
    /// takes the snapshot: the counters are server-wide, so the deltas hold.
    async fn after_snapshot(&mut self, out: &mut Collected) -> Result<Snapshot> {
        if !self.client.is_closed() {
            match take_snapshot(&self.client, self.major, &self.schemas, self.pgss).await {
                Ok(s) => return Ok(s),
                Err(e) if !self.client.is_closed() => return Err(e),
                Err(_) => {}
            }
        }
        self.client = self.target.connect("dbio-collector").await?;
        out.warnings.push(
            "the collector's connection was lost during the window; it reconnected for the \"after\" snapshot \
             (the counters are server-wide, so the figures hold)"
                .into(),
        );
        take_snapshot(&self.client, self.major, &self.schemas, self.pgss).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(major: i32, pairs: &[(&str, f64)]) -> Snapshot {
        Snapshot {
            major,
            values: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            resets: BTreeMap::from([(
                "pg_stat_database".to_string(),
                "2026-11-30 10:00:00+00".to_string(),
            )]),
        }
    }

    #[test]
    fn pg_stat_statements_column_follows_the_version() {
        assert!(pgss_query(16).contains("sum(blk_read_time)"));
        assert!(pgss_query(17).contains("sum(shared_blk_read_time)"));
    }

    #[test]
    fn queries_follow_the_version() {
        let q15 = snapshot_queries(15).join("\n");
        assert!(
            q15.contains("pg_stat_bgwriter")
                && q15.contains("active_time")
                && !q15.contains("pg_stat_io")
        );
        let q13 = snapshot_queries(13).join("\n");
        assert!(q13.contains("pg_current_wal_lsn") && !q13.contains("active_time"));
        let q17 = snapshot_queries(17).join("\n");
        assert!(
            q17.contains("pg_stat_checkpointer")
                && q17.contains("pg_stat_io")
                && q17.contains("wal_write")
        );
        assert!(
            !q17.contains("buffers_backend"),
            "17 dropped buffers_backend"
        );
        let q18 = snapshot_queries(18).join("\n");
        assert!(
            q18.contains("num_done") && q18.contains("read_bytes") && !q18.contains("wal_write::")
        );
    }

    #[test]
    fn pg15_reads_and_latency_come_from_pg_stat_database() {
        let before = snap(
            15,
            &[
                ("db.blks_read", 1000.0),
                ("db.blk_read_time", 100.0),
                ("db.blks_hit", 9000.0),
            ],
        );
        let after = snap(
            15,
            &[
                ("db.blks_read", 21_000.0),
                ("db.blk_read_time", 2100.0),
                ("db.blks_hit", 29_000.0),
            ],
        );
        let m = metrics(&before, &after, 10.0, 8192, IoTiming::On, "bench");
        assert_eq!(m.read_iops, 2000.0);
        assert_eq!(m.avg_read_latency_us, Some(100.0));
        assert_eq!(m.buffer_hit_ratio, Some(0.5));
        assert!(m.valid);
        assert_eq!(m.counters.get("db.blks_read"), Some(&20_000.0));
        assert!(m.source.contains("pg_stat_database"));
    }

    #[test]
    fn pg17_reads_come_from_pg_stat_io_and_timing_off_nulls_latency() {
        let before = snap(17, &[("io.fg_reads", 0.0), ("io.fg_read_time", 0.0)]);
        let after = snap(17, &[("io.fg_reads", 500.0), ("io.fg_read_time", 0.0)]);
        let m = metrics(&before, &after, 5.0, 8192, IoTiming::Off, "bench");
        assert_eq!(m.read_iops, 100.0);
        assert_eq!(m.avg_read_latency_us, None);
        assert!(
            m.read_latency_note
                .as_deref()
                .unwrap_or("")
                .contains("GRANT SET ON PARAMETER track_io_timing TO bench")
        );
        assert!(warnings(&m).iter().any(|w| w.contains("latency is null")));
    }

    #[test]
    fn resets_and_backward_counters_invalidate() {
        let before = snap(15, &[("db.blks_read", 1000.0)]);
        let mut after = snap(15, &[("db.blks_read", 10.0)]);
        let m = metrics(&before, &after, 1.0, 8192, IoTiming::On, "u");
        assert!(!m.valid && m.invalid_reasons[0].contains("went backwards"));
        after.values.insert("db.blks_read".into(), 2000.0);
        after
            .resets
            .insert("pg_stat_database".into(), "2026-11-30 11:00:00+00".into());
        let m = metrics(&before, &after, 1.0, 8192, IoTiming::On, "u");
        assert!(!m.valid && m.invalid_reasons[0].contains("reset"));
        assert!(warnings(&m)[0].contains("INVALID"));
    }

    #[test]
    fn timed_checkpoints_count_only_when_they_wrote() {
        let before = snap(
            17,
            &[
                ("ckpt.timed", 1.0),
                ("ckpt.requested", 0.0),
                ("ckpt.buffers_written", 0.0),
            ],
        );
        let idle = snap(
            17,
            &[
                ("ckpt.timed", 2.0),
                ("ckpt.requested", 0.0),
                ("ckpt.buffers_written", 0.0),
            ],
        );
        assert_eq!(
            metrics(&before, &idle, 1.0, 8192, IoTiming::On, "u").checkpoints,
            0
        );
        let forced = snap(
            17,
            &[
                ("ckpt.timed", 1.0),
                ("ckpt.requested", 1.0),
                ("ckpt.buffers_written", 0.0),
            ],
        );
        let m = metrics(&before, &forced, 1.0, 8192, IoTiming::On, "u");
        assert_eq!(m.checkpoints, 1);
        assert!(warnings(&m).iter().any(|w| w.contains("checkpoint")));
    }
}
