//! Two snapshots turned into the window's figures, each traceable to the counter delta it
//! comes from (`DbMetrics::counters`), and the warnings a reader of them must see.

use dbio_core::stats::dbstats::{
    CacheControl, DbMetrics, DeviceMetrics, MAX_PHYSICAL_RATIO, MIN_PHYSICAL_RATIO, TableIo,
};

use super::snapshot::Snapshot;

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
    if major < 14 {
        // pg-stats §1: active_time and pg_stat_wal came with 14.
        m.null_reasons.insert(
            "db_time_s".into(),
            "PostgreSQL 13 has no pg_stat_database.active_time (added in 14): the DB time is the wait sampler's \
             (samples x period, in the wait profile)"
                .into(),
        );
        for field in ["wal_writes_per_s", "wal_syncs_per_s"] {
            m.null_reasons.insert(
                field.into(),
                "PostgreSQL 13 has no pg_stat_wal (added in 14): WAL writes and syncs are not counted; WAL bytes \
                 come from the WAL position (pg_current_wal_lsn)"
                    .into(),
            );
        }
    }
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

/// Warnings about reads that did not come from storage: served by the OS page cache (device
/// reads well below database reads) or by shared_buffers (almost no database reads).
pub fn cache_warnings(db: &DbMetrics, device: Option<&DeviceMetrics>) -> Vec<String> {
    let mut w = Vec::new();
    if let Some(ratio) = device.and_then(|d| d.physical_read_ratio)
        && ratio > MAX_PHYSICAL_RATIO
    {
        w.push(format!(
            "the device served {:.2} reads per database read: it read more than this run asked for. \
             Read-ahead (the kernel's, or PostgreSQL's read streams and prefetch) and other work on the \
             same device (other databases, backups, other servers sharing it) both do this; the device \
             figures then are not this run's alone",
            ratio
        ));
    }
    if let Some(ratio) = device.and_then(|d| d.physical_read_ratio)
        && ratio < MIN_PHYSICAL_RATIO
    {
        let dev = device.map(|d| d.reads_per_s).unwrap_or(0.0);
        let advice = if device.is_some_and(|d| d.cache_control == CacheControl::DroppedPageCache) {
            "The page cache was dropped before the window, but the data set was read back into it \
             during the run: make it larger than RAM, or on PostgreSQL 16+ start the server with \
             debug_io_direct=data"
        } else {
            "Use --drop-caches (root, server on this host), a data set larger than RAM, or on \
             PostgreSQL 16+ a server started with debug_io_direct=data"
        };
        w.push(format!(
            "only {:.0}% of the database's reads reached the device ({:.0} database reads/s, {:.0} device reads/s): \
             the OS page cache served the rest, so read IOPS and latency describe memory, not storage. {advice}",
            100.0 * ratio,
            db.read_iops,
            dev
        ));
    }
    if let Some(hit) = db.buffer_hit_ratio
        && hit >= 0.99
    {
        w.push(format!(
            "the run was served from shared_buffers ({:.1}% buffer hits, {:.0} reads/s): the data set, or its \
             hot part, fits in the buffer cache; raise data.scale or data.schemas, or lower shared_buffers",
            100.0 * hit,
            db.read_iops
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

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

    /// A device that read `ratio` blocks per database read.
    fn device(ratio: Option<f64>) -> DeviceMetrics {
        DeviceMetrics {
            device: "vda".into(),
            path: "/data".into(),
            seconds: 10.0,
            reads_per_s: 100.0,
            writes_per_s: 0.0,
            read_kib_per_op: Some(8.0),
            avg_read_wait_ms: Some(0.2),
            avg_write_wait_ms: None,
            physical_read_ratio: ratio,
            cache_control: CacheControl::None,
            major_minor: None,
            source: None,
            read_mib_per_s: None,
            await_ms: None,
            avg_queue_depth: None,
            busy_pct: None,
            tables: Vec::new(),
        }
    }

    #[test]
    fn page_cache_and_buffer_cache_runs_are_flagged() {
        let db = DbMetrics {
            read_iops: 1000.0,
            buffer_hit_ratio: Some(0.5),
            ..DbMetrics::default()
        };
        let w = cache_warnings(&db, Some(&device(Some(0.1))));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("only 10%") && w[0].contains("page cache"));
        assert!(cache_warnings(&db, Some(&device(Some(0.95)))).is_empty());
        assert!(cache_warnings(&db, Some(&device(Some(1.05)))).is_empty());
        let more = cache_warnings(&db, Some(&device(Some(1.8))));
        assert_eq!(more.len(), 1);
        assert!(
            more[0].contains("1.80 reads per database read") && more[0].contains("Read-ahead"),
            "{more:?}"
        );
        let cached = DbMetrics {
            read_iops: 1.0,
            buffer_hit_ratio: Some(0.999),
            ..DbMetrics::default()
        };
        assert!(cache_warnings(&cached, None)[0].contains("shared_buffers"));
    }

    // Seen: a calibration of another device, block size and write mix set beside the run's
    // device without a word.
}
