//! Database-side figures over the run window, engine-neutral. A backend snapshots its own
//! statistics before and after the window and fills these; every figure names the counter
//! delta it comes from in `counters`, so a reader can trace it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the database itself counted during the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DbMetrics {
    /// Views the I/O figures come from, e.g. "pg_stat_database" or "pg_stat_io".
    pub source: String,
    /// Seconds the rates are computed over (the run's measured window).
    pub seconds: f64,
    /// Read requests per second into data files (PostgreSQL: reads that missed
    /// shared_buffers; they may still be served by the OS page cache).
    pub read_iops: f64,
    /// Blocks read per second (equals read_iops where each read is one block).
    pub read_blocks_per_s: f64,
    /// Data-file block writes per second (backends, checkpointer, background writer).
    pub write_iops: f64,
    /// Average data-file read latency in µs; null when the database did not time reads.
    pub avg_read_latency_us: Option<f64>,
    /// Why the latency is null, and how to fix it.
    pub read_latency_note: Option<String>,
    /// Buffer hits per second (logical reads served from shared_buffers).
    pub buffer_hits_per_s: f64,
    /// hits / (hits + reads); shared_buffers only, never the OS cache.
    pub buffer_hit_ratio: Option<f64>,
    pub wal_bytes_per_s: Option<f64>,
    pub wal_writes_per_s: Option<f64>,
    pub wal_syncs_per_s: Option<f64>,
    /// Transactions committed per second in this database (pg_stat_database.xact_commit),
    /// less dbio's own collector and sampler transactions (`own_transactions`).
    pub commits_per_s: f64,
    /// dbio's own collector and sampler transactions inside the window, left out of
    /// `commits_per_s` (null: not counted, they are in it).
    #[serde(default)]
    pub own_transactions: Option<u64>,
    /// Figures that are null, by field name, with the reason (and the fix where there is
    /// one): e.g. `db_time_s` on PostgreSQL 13, which has no active_time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub null_reasons: BTreeMap<String, String>,
    /// Checkpoints that started inside the window.
    pub checkpoints: u64,
    /// Autovacuum and autoanalyze runs on dbio's tables inside the window.
    pub autovacuum_runs: u64,
    pub autoanalyze_runs: u64,
    /// Seconds the database spent executing statements (measured), when available.
    pub db_time_s: Option<f64>,
    /// dbio's own tables (all schemas): blocks read and hit, index scans, rows updated.
    pub dbio_tables: TableIo,
    /// False when a statistics reset or a counter going backwards makes the deltas wrong.
    pub valid: bool,
    pub invalid_reasons: Vec<String>,
    /// The raw counter deltas behind the figures, by `view.column`.
    pub counters: BTreeMap<String, f64>,
    /// Oracle: the run's line as SLOB's misc/awr_info.sh computes it from an AWR report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awr_info: Option<AwrInfo>,
}

/// One run's figures in the columns of SLOB's misc/awr_info.sh (`FILE|SESSIONS|ELAPSED|DB CPU|
/// DB Tm|EXECUTES|LIO|PREADS|READ_MBS|PWRITES|WRITE_MBS|REDO_MBS|DFSR_LAT|DPR_LAT|DFPR_LAT|
/// DFPW_LAT|LFPW_LAT|TOP WAIT|`), computed as awr_info.sh reads them from an AWR report: per
/// second over the window; DB CPU is the Load Profile's "DB CPU(s)" plus "Background CPU(s)";
/// READ_MBS/WRITE_MBS are 'physical read/write total bytes' (all files) while PREADS/PWRITES
/// are 'physical read/write IO requests' (data files); the latencies are total wait time ÷
/// waits in µs of the foreground 'db file sequential read' (DFSR), 'direct path read' (DPR) and
/// 'db file parallel read' (DFPR) and the background 'db file parallel write' (DFPW) and 'log
/// file parallel write' (LFPW); TOP WAIT is the first row of the top foreground events (DB CPU
/// included). A latency is null where the event had no waits (awr_info prints 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwrInfo {
    pub elapsed_s: f64,
    /// DB CPU + background CPU, seconds per second; null where the time model is missing.
    pub db_cpu_per_s: Option<f64>,
    pub db_time_per_s: f64,
    pub executes_per_s: f64,
    pub lio_per_s: f64,
    pub preads_per_s: f64,
    pub read_mib_per_s: f64,
    pub pwrites_per_s: f64,
    pub write_mib_per_s: f64,
    pub redo_mib_per_s: f64,
    pub dfsr_lat_us: Option<f64>,
    pub dpr_lat_us: Option<f64>,
    pub dfpr_lat_us: Option<f64>,
    pub dfpw_lat_us: Option<f64>,
    pub lfpw_lat_us: Option<f64>,
    /// `event waits time(s) avg(ms) %DBtime class`, or `DB CPU time(s) %DBtime`.
    pub top_wait: Option<String>,
}

impl AwrInfo {
    /// awr_info.sh's header line, exactly.
    pub const HEADER: &'static str = "FILE|SESSIONS|ELAPSED|DB CPU|DB Tm|EXECUTES|LIO|PREADS|READ_MBS|PWRITES|WRITE_MBS|REDO_MBS|DFSR_LAT|DPR_LAT|DFPR_LAT|DFPW_LAT|LFPW_LAT|TOP WAIT|";

    /// The line as awr_info.sh prints its columns: ELAPSED, EXECUTES, LIO, PREADS and PWRITES
    /// truncated to integers, READ_MBS with one decimal, WRITE_MBS rounded to an integer,
    /// REDO_MBS truncated to one decimal, latencies rounded to whole µs (0 without waits).
    pub fn line(&self, file: &str, sessions: u32) -> String {
        let lat = |v: Option<f64>| format!("{:.0}", v.unwrap_or(0.0));
        format!(
            "{file}|{sessions}|{}|{}|{:.1}|{}|{}|{}|{:.1}|{}|{:.0}|{:.1}|{}|{}|{}|{}|{}|{}|",
            self.elapsed_s.trunc() as u64,
            self.db_cpu_per_s
                .map(|c| format!("{c:.1}"))
                .unwrap_or_default(),
            self.db_time_per_s,
            self.executes_per_s.trunc() as u64,
            self.lio_per_s.trunc() as u64,
            self.preads_per_s.trunc() as u64,
            self.read_mib_per_s,
            self.pwrites_per_s.trunc() as u64,
            self.write_mib_per_s,
            (self.redo_mib_per_s * 10.0).trunc() / 10.0,
            lat(self.dfsr_lat_us),
            lat(self.dpr_lat_us),
            lat(self.dfpr_lat_us),
            lat(self.dfpw_lat_us),
            lat(self.lfpw_lat_us),
            self.top_wait.as_deref().unwrap_or("")
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct TableIo {
    pub heap_blks_read: u64,
    pub heap_blks_hit: u64,
    pub idx_blks_read: u64,
    pub idx_blks_hit: u64,
    pub idx_scan: u64,
    pub n_tup_upd: u64,
}

/// One line of the top-events table (AWR form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRow {
    /// `Class:Event` (PostgreSQL wait_event_type:wait_event), or `CPU` for active sessions
    /// without a wait event.
    pub event: String,
    /// Number of waits where the database counts them; null for sampled-only rows.
    pub waits: Option<u64>,
    pub time_s: f64,
    /// 1e6 · time / waits, when waits are counted.
    pub avg_us: Option<f64>,
    /// time / DB time.
    pub pct_db_time: Option<f64>,
    /// True: waits and time are the database's counters; false: estimated from samples.
    pub measured: bool,
    /// Samples that saw this event.
    pub samples: u64,
    /// What the row's figures mean where that is not obvious (PostgreSQL 18+: read_time is
    /// time spent waiting for reads, not device latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The device's own average read wait (iostat r_await, ms) beside a measured read row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_await_ms: Option<f64>,
}

/// What a shard's measured wait row says of itself (the database's count covers every
/// shard's sessions, the shard's DB time its own); `dbio merge` drops it from the merged row.
pub const SHARD_WAIT_NOTE: &str = "the database's count covers every shard's sessions, this shard's DB time only its own: \
     its % of DB time is in the merged result (`dbio merge`)";

/// The wait profile: sampled session states (ASH-like), with measured rows where the
/// database counts waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WaitProfile {
    /// Intended and achieved sampling period.
    pub period_ms: f64,
    pub achieved_period_ms: f64,
    pub samples: u64,
    /// Transactions the sampler's own connection committed (its samples among them): the
    /// database's commit count includes them, and `DbMetrics::commits_per_s` leaves them out.
    #[serde(default)]
    pub transactions: u64,
    pub db_time_s: f64,
    /// "measured (pg_stat_database.active_time)" or "sampled".
    pub db_time_source: String,
    /// dbio's sessions.
    pub foreground: Vec<WaitRow>,
    /// Background processes (checkpointer, background writer, walwriter, autovacuum, io
    /// workers, ...).
    pub background: Vec<WaitRow>,
    /// How dbio's sessions were told apart: "backend PID" (each session's pid from its
    /// connection's BackendKeyData) or "application_name".
    #[serde(default)]
    pub sessions_by: String,
    /// Other sessions active in this database during the window (not dbio's): their events.
    #[serde(default)]
    pub other_sessions: Vec<WaitRow>,
    /// Their share of the active session samples in this database, in %.
    #[serde(default)]
    pub other_sessions_pct: Option<f64>,
    /// Set when the sampler could not see every role's sessions (no pg_read_all_stats).
    #[serde(default)]
    pub visibility_note: Option<String>,
}

/// How a run made its reads reach the device, as result.json names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CacheControl {
    /// Nothing: the OS page cache may serve reads.
    #[serde(rename = "none")]
    None,
    /// `collector.drop_caches`: the page cache was synced and dropped before the window.
    #[serde(rename = "dropped page cache")]
    DroppedPageCache,
    /// The server reads with O_DIRECT (PostgreSQL 16+ `debug_io_direct=data`).
    #[serde(rename = "debug_io_direct=data")]
    DirectIo,
}

impl CacheControl {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheControl::None => "none",
            CacheControl::DroppedPageCache => "dropped page cache",
            CacheControl::DirectIo => "debug_io_direct=data",
        }
    }
}

impl std::fmt::Display for CacheControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// OS block-device figures from /proc/diskstats for the device under the data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMetrics {
    /// Device name in /proc/diskstats, e.g. `vda` or `nvme0n1p2`.
    pub device: String,
    /// The path whose device was measured (data directory or tablespace).
    pub path: String,
    pub seconds: f64,
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub read_kib_per_op: Option<f64>,
    /// Average time a read spent, in ms (ms reading / reads completed).
    pub avg_read_wait_ms: Option<f64>,
    pub avg_write_wait_ms: Option<f64>,
    /// Device reads / database reads: near 1 when reads are physical, near 0 when the OS
    /// page cache served them.
    pub physical_read_ratio: Option<f64>,
    /// How reads were made physical for this run: "dropped page cache", "debug_io_direct=data",
    /// or "none".
    pub cache_control: CacheControl,
    /// The device number (`major:minor`, as in /proc/self/mountinfo and /proc/diskstats).
    #[serde(default)]
    pub major_minor: Option<String>,
    /// Where the counters were read: the server's own /proc through the connection, or this
    /// host's /proc for a server proven to run here.
    #[serde(default)]
    pub source: Option<String>,
    /// Read MiB/s (sectors read x 512).
    #[serde(default)]
    pub read_mib_per_s: Option<f64>,
    /// Average wait of all I/Os, in ms (iostat await: ms reading + writing / I/Os).
    #[serde(default)]
    pub await_ms: Option<f64>,
    /// Average number of I/Os in the device's queue (iostat aqu-sz: weighted ms doing I/O /
    /// elapsed ms).
    #[serde(default)]
    pub avg_queue_depth: Option<f64>,
    /// % of the window the device had I/O in flight (iostat %util: ms doing I/O / elapsed
    /// ms); near 100 for a device kept busy (a device that serves I/Os in parallel can do
    /// more at 100%).
    #[serde(default)]
    pub busy_pct: Option<f64>,
    /// The data set's tables measured on this device (`schema.table` at their directory).
    #[serde(default)]
    pub tables: Vec<String>,
}

/// The database host's own figures over the window, from its /proc: what dbio's backends
/// really fetched from storage, the host's memory and CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HostMetrics {
    /// Where the figures were read (the server's /proc through pg_read_file, or this host's
    /// /proc for a server proven local).
    pub source: String,
    pub seconds: f64,
    /// Bytes dbio's session backends fetched from storage (`/proc/<pid>/io` read_bytes, "bytes
    /// really fetched from the storage layer", proc_pid_io(5)), summed over the window.
    pub session_read_bytes: Option<u64>,
    /// Bytes the io workers fetched (PostgreSQL 18+, io_method=worker: they submit the
    /// asynchronous reads, of every backend, not only dbio's).
    pub io_worker_read_bytes: Option<u64>,
    /// Bytes the same session backends read through the kernel (`/proc/<pid>/io` rchar: their
    /// read(2)/pread(2) calls, page-cache hits included): their database reads.
    #[serde(default)]
    pub session_kernel_read_bytes: Option<u64>,
    /// The io workers' rchar, likewise.
    #[serde(default)]
    pub io_worker_kernel_read_bytes: Option<u64>,
    /// Backends whose `/proc/<pid>/io` was read.
    pub backends_read: u32,
    /// (session + io worker read_bytes) / block size / seconds.
    pub physical_blocks_per_s: Option<f64>,
    /// (session + io worker read_bytes) / (their rchar): of the bytes these processes read,
    /// the share fetched from storage; near 1 when every read went to storage, near 0 when
    /// the OS page cache served them. Each process's own counters, so a shard's is its own
    /// sessions' whatever the others do.
    pub physical_read_ratio: Option<f64>,
    /// /proc/meminfo at the window's end.
    pub mem_total_bytes: Option<u64>,
    /// The server's memory cgroup limit (memory.max on v2, memory.limit_in_bytes on v1), when
    /// below mem_total_bytes: in a memory-capped container /proc/meminfo is the host's.
    #[serde(default)]
    pub mem_limit_bytes: Option<u64>,
    pub mem_available_bytes: Option<u64>,
    pub page_cache_bytes: Option<u64>,
    /// /proc/stat over the window, % of all CPUs' time.
    pub cpu_user_pct: Option<f64>,
    pub cpu_system_pct: Option<f64>,
    pub cpu_iowait_pct: Option<f64>,
    pub cpu_idle_pct: Option<f64>,
    /// Why a figure is missing or how to read one.
    pub notes: Vec<String>,
}

/// A figure the run could not have for want of a right, and the GRANT that gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingRight {
    /// The figures that are missing (or limited) without the right.
    pub figures: String,
    /// The statement to run, as a superuser, to give it.
    pub grant: String,
}

/// The line DBAs compare across runs (awr_info habit): top I/O event, its waits, time,
/// latency and the IOPS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoEventLine {
    pub event: String,
    pub waits: u64,
    pub time_s: f64,
    pub latency_us: Option<f64>,
    pub iops: f64,
}

impl DbMetrics {
    /// Several targets' figures as one: rates, counts and counter deltas summed, the read
    /// latency weighted by each target's reads (null unless every target timed its reads),
    /// the hit ratio recomputed from the sums, valid only when every part is. `seconds` is
    /// the longest part's.
    pub fn sum(parts: &[&DbMetrics]) -> Option<DbMetrics> {
        parts.first()?;
        let add = |f: fn(&DbMetrics) -> f64| parts.iter().map(|p| f(p)).sum::<f64>();
        let add_opt = |f: fn(&DbMetrics) -> Option<f64>| -> Option<f64> {
            parts.iter().map(|p| f(p)).sum::<Option<f64>>()
        };
        let read_iops = add(|d| d.read_iops);
        let buffer_hits_per_s = add(|d| d.buffer_hits_per_s);
        // A part without reads weighs nothing (an idle target has no latency to give).
        let weighted: Option<f64> = parts
            .iter()
            .filter(|p| p.read_iops > 0.0)
            .map(|p| p.avg_read_latency_us.map(|l| l * p.read_iops))
            .sum();
        // Each part's accesses as its own ratio counts them (hits / ratio), so the total is
        // the same kind of ratio as the parts'.
        let accesses: f64 = parts
            .iter()
            .map(|p| match p.buffer_hit_ratio {
                Some(r) if r > 0.0 => p.buffer_hits_per_s / r,
                _ => p.buffer_hits_per_s + p.read_iops,
            })
            .sum();
        let mut counters = BTreeMap::new();
        for p in parts {
            for (k, v) in &p.counters {
                *counters.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        let t = |f: fn(&TableIo) -> u64| parts.iter().map(|p| f(&p.dbio_tables)).sum::<u64>();
        let mut sources: Vec<&str> = Vec::new();
        for p in parts {
            if !sources.contains(&p.source.as_str()) {
                sources.push(&p.source);
            }
        }
        Some(DbMetrics {
            source: format!("sum over {} targets: {}", parts.len(), sources.join("; ")),
            seconds: parts.iter().map(|p| p.seconds).fold(0.0, f64::max),
            read_iops,
            read_blocks_per_s: add(|d| d.read_blocks_per_s),
            write_iops: add(|d| d.write_iops),
            avg_read_latency_us: weighted.and_then(|w| (read_iops > 0.0).then(|| w / read_iops)),
            read_latency_note: parts.iter().find_map(|p| p.read_latency_note.clone()),
            buffer_hits_per_s,
            buffer_hit_ratio: (accesses > 0.0).then(|| buffer_hits_per_s / accesses),
            wal_bytes_per_s: add_opt(|d| d.wal_bytes_per_s),
            wal_writes_per_s: add_opt(|d| d.wal_writes_per_s),
            wal_syncs_per_s: add_opt(|d| d.wal_syncs_per_s),
            commits_per_s: add(|d| d.commits_per_s),
            own_transactions: parts.iter().map(|p| p.own_transactions).sum(),
            null_reasons: parts.iter().flat_map(|p| p.null_reasons.clone()).collect(),
            checkpoints: parts.iter().map(|p| p.checkpoints).sum(),
            autovacuum_runs: parts.iter().map(|p| p.autovacuum_runs).sum(),
            autoanalyze_runs: parts.iter().map(|p| p.autoanalyze_runs).sum(),
            db_time_s: add_opt(|d| d.db_time_s),
            dbio_tables: TableIo {
                heap_blks_read: t(|x| x.heap_blks_read),
                heap_blks_hit: t(|x| x.heap_blks_hit),
                idx_blks_read: t(|x| x.idx_blks_read),
                idx_blks_hit: t(|x| x.idx_blks_hit),
                idx_scan: t(|x| x.idx_scan),
                n_tup_upd: t(|x| x.n_tup_upd),
            },
            valid: parts.iter().all(|p| p.valid),
            invalid_reasons: parts
                .iter()
                .flat_map(|p| p.invalid_reasons.iter().cloned())
                .collect(),
            counters,
            // SLOB's line describes one database's report; a sum over targets has none.
            awr_info: None,
        })
    }

    /// Leaves dbio's own `own` transactions (its collector's and sampler's, inside the
    /// window) out of the commit rate, and records them.
    pub fn exclude_own_transactions(&mut self, own: u64) {
        let all = self.commits_per_s * self.seconds;
        self.commits_per_s = if self.seconds > 0.0 {
            (all - own as f64).max(0.0) / self.seconds
        } else {
            0.0
        };
        self.own_transactions = Some(self.own_transactions.unwrap_or(0) + own);
    }

    /// The line of a measured wait row: its event, waits, time and average wait, beside the
    /// read IOPS (Oracle: the foreground 'db file sequential read', not the read requests,
    /// which also count multiblock and parallel reads).
    pub fn io_event_line_of(&self, row: &WaitRow) -> IoEventLine {
        IoEventLine {
            event: row
                .event
                .rsplit(':')
                .next()
                .unwrap_or(&row.event)
                .to_string(),
            waits: row.waits.unwrap_or(0),
            time_s: row.time_s,
            latency_us: row.avg_us,
            iops: self.read_iops,
        }
    }

    pub fn io_event_line(&self, event: &str) -> IoEventLine {
        let waits = (self.read_iops * self.seconds).round() as u64;
        IoEventLine {
            event: event.to_string(),
            waits,
            time_s: self
                .avg_read_latency_us
                .map(|l| l * waits as f64 / 1e6)
                .unwrap_or(0.0),
            latency_us: self.avg_read_latency_us,
            iops: self.read_iops,
        }
    }
}

/// A device's own figures (`dbio calibrate`) that a run's database reads are put beside at
/// the same load. dbio-calibrate implements it; core asks it once per run.
pub trait DeviceBaseline: Sync {
    /// The device's figures at `sessions` outstanding I/Os (or the nearest level below)
    /// beside the database's read IOPS and average read latency (µs); None when the
    /// calibration has no such level.
    fn compare_at(
        &self,
        sessions: u32,
        db_read_iops: Option<f64>,
        db_latency_us: Option<f64>,
    ) -> Option<CalibrationCompare>;
}

/// The run's database reads next to the raw device's, measured by `dbio calibrate` at the
/// same number of outstanding I/Os (load level = reader sessions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationCompare {
    /// The calibrate.json used.
    pub file: String,
    /// The load level compared (the readers, or the nearest level below).
    pub level: u32,
    pub raw_small_iops: f64,
    pub raw_mean_latency_us: Option<f64>,
    pub raw_p99_latency_us: Option<u64>,
    pub db_read_iops: Option<f64>,
    /// DB read IOPS / raw device IOPS at that level.
    pub iops_ratio: Option<f64>,
    /// DB average read latency / raw device mean latency.
    pub latency_ratio: Option<f64>,
    /// The calibrated path's device number (`major:minor`) on the host that runs dbio,
    /// null when the path is gone or unreadable.
    #[serde(default)]
    pub device: Option<String>,
    /// The calibration's small I/O size, bytes.
    #[serde(default)]
    pub block_bytes: Option<u64>,
    /// The calibration's share of writes among its small I/Os, %.
    #[serde(default)]
    pub write_pct: Option<u32>,
}

impl CalibrationCompare {
    /// What makes this calibration another measurement than the run beside it: another
    /// device (by device number; a partition of the run's disk is not the same device),
    /// another I/O size than the run's block size, another mix of writes (the run's
    /// sessions write when it has writers or update_pct > 0). One warning, or none.
    pub fn mismatch(
        &self,
        run_device: Option<&DeviceMetrics>,
        block_size: u64,
        run_writes: bool,
    ) -> Option<String> {
        let mut apart = Vec::new();
        match (
            self.device.as_deref(),
            run_device.and_then(|d| d.major_minor.as_deref()),
        ) {
            (Some(cal), Some(run)) if cal != run => apart.push(format!(
                "it measured device {cal} and the run's tables are on {} ({run})",
                run_device.map(|d| d.device.as_str()).unwrap_or("-")
            )),
            (Some(_), Some(_)) => {}
            (cal, run) => apart.push(format!(
                "its device is not known to be the run's ({})",
                match (cal, run) {
                    (None, _) => "the calibrated path is not on this host any more".to_string(),
                    _ => "the run's device was not measured".to_string(),
                }
            )),
        }
        if let Some(b) = self.block_bytes.filter(|b| *b != block_size) {
            apart.push(format!(
                "it used {b}-byte I/Os and the run reads {block_size}-byte blocks"
            ));
        }
        if let Some(w) = self.write_pct
            && (w > 0) != run_writes
        {
            apart.push(if run_writes {
                format!("it wrote {w}% of its I/Os and the run writes")
            } else {
                format!("it wrote {w}% of its I/Os and the run only reads")
            });
        }
        (!apart.is_empty()).then(|| {
            format!(
                "the calibration {} is not this run's device at this run's I/O: {}; the database/raw ratios compare \
                 different things (calibrate the run's device with --block {block_size} and the run's write mix, --write-pct)",
                self.file,
                apart.join("; ")
            )
        })
    }
}

/// Below this share of database reads reaching the device, the run measured the page cache.
pub const MIN_PHYSICAL_RATIO: f64 = 0.5;

/// Above this share, the device read more than the database asked for.
pub const MAX_PHYSICAL_RATIO: f64 = 1.1;

impl HostMetrics {
    /// The physical-read ratio and physical blocks/s from the byte counts (see the fields),
    /// over `seconds` and blocks of `block_size`; unchanged where the counts are missing.
    pub fn derive_ratio(&mut self, block_size: u64) {
        let Some(bytes) = self.session_read_bytes else {
            return;
        };
        let physical = bytes + self.io_worker_read_bytes.unwrap_or(0);
        let blocks = physical as f64 / block_size.max(1) as f64;
        self.physical_blocks_per_s = (self.seconds > 0.0).then(|| blocks / self.seconds);
        let kernel = self
            .session_kernel_read_bytes
            .map(|k| k + self.io_worker_kernel_read_bytes.unwrap_or(0));
        // Below one block read through the kernel there is nothing to judge.
        self.physical_read_ratio = kernel
            .filter(|k| *k >= block_size.max(1))
            .map(|k| physical as f64 / k as f64);
    }
}

/// Warnings from the backends' own physical reads (`/proc/<pid>/io`): the page cache served
/// the database's reads when the bytes its backends fetched from storage are far below the
/// bytes they read.
pub fn host_cache_warnings(db: &DbMetrics, host: Option<&HostMetrics>) -> Vec<String> {
    let Some(ratio) = host.and_then(|h| h.physical_read_ratio) else {
        return Vec::new();
    };
    if ratio >= MIN_PHYSICAL_RATIO || db.read_iops <= 0.0 {
        return Vec::new();
    }
    vec![format!(
        "dbio's backends fetched {:.0}% of the bytes they read from storage (/proc/<pid>/io read_bytes over rchar; \
         {:.0} database reads/s): the page cache served the rest, so read IOPS and latency describe memory, not storage",
        100.0 * ratio,
        db.read_iops
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_calibration_of_another_device_or_io_is_named() {
        let c = CalibrationCompare {
            file: "cal/calibrate.json".into(),
            level: 1,
            raw_small_iops: 1000.0,
            raw_mean_latency_us: None,
            raw_p99_latency_us: None,
            db_read_iops: None,
            iops_ratio: None,
            latency_ratio: None,
            device: Some("254:0".into()),
            block_bytes: Some(8192),
            write_pct: Some(0),
        };
        let mut dev = device(Some(1.0));
        dev.major_minor = Some("254:0".into());
        assert_eq!(c.mismatch(Some(&dev), 8192, false), None);
        dev.major_minor = Some("8:16".into());
        let w = c.mismatch(Some(&dev), 4096, true).unwrap();
        assert!(
            w.contains("it measured device 254:0 and the run's tables are on vda (8:16)")
                && w.contains("8192-byte I/Os and the run reads 4096-byte blocks")
                && w.contains("wrote 0% of its I/Os and the run writes"),
            "{w}"
        );
        let w = c.mismatch(None, 8192, false).unwrap();
        assert!(w.contains("the run's device was not measured"), "{w}");
    }

    #[test]
    fn io_line_multiplies_out() {
        let db = DbMetrics {
            seconds: 10.0,
            read_iops: 500.0,
            avg_read_latency_us: Some(200.0),
            ..DbMetrics::default()
        };
        let l = db.io_event_line("IO:DataFileRead");
        assert_eq!((l.waits, l.time_s, l.iops), (5000, 1.0, 500.0));
    }

    #[test]
    fn targets_sum_rates_and_weight_latency_by_reads() {
        let a = DbMetrics {
            source: "pg_stat_database".into(),
            seconds: 10.0,
            read_iops: 300.0,
            avg_read_latency_us: Some(100.0),
            buffer_hits_per_s: 700.0,
            dbio_tables: TableIo {
                idx_scan: 40,
                ..TableIo::default()
            },
            valid: true,
            ..DbMetrics::default()
        };
        let b = DbMetrics {
            source: "pg_stat_io".into(),
            seconds: 10.5,
            read_iops: 100.0,
            avg_read_latency_us: Some(500.0),
            buffer_hits_per_s: 900.0,
            dbio_tables: TableIo {
                idx_scan: 2,
                ..TableIo::default()
            },
            valid: true,
            ..DbMetrics::default()
        };
        let s = DbMetrics::sum(&[&a, &b]).unwrap();
        assert_eq!(s.read_iops, 400.0);
        assert_eq!(s.avg_read_latency_us, Some(200.0));
        assert_eq!(s.buffer_hit_ratio, Some(0.8));
        assert_eq!(s.dbio_tables.idx_scan, 42);
        assert_eq!(s.seconds, 10.5);
        assert!(s.valid);
        assert!(
            s.source.contains("pg_stat_database; pg_stat_io"),
            "{}",
            s.source
        );
        // A target that did not time its reads leaves the total's latency null.
        let untimed = DbMetrics {
            avg_read_latency_us: None,
            valid: false,
            ..b
        };
        let s = DbMetrics::sum(&[&a, &untimed]).unwrap();
        assert_eq!(s.avg_read_latency_us, None);
        assert!(!s.valid);
        // A target without reads (no sessions this step) leaves the latency to the others.
        let idle = DbMetrics {
            read_iops: 0.0,
            avg_read_latency_us: None,
            ..DbMetrics::default()
        };
        let s = DbMetrics::sum(&[&a, &idle]).unwrap();
        assert_eq!(s.avg_read_latency_us, Some(100.0));
        assert!(DbMetrics::sum(&[]).is_none());
    }
}
