//! What limited a run: the figures beside the database's own (cache residency per relation,
//! the server's cgroup I/O caps, client and server CPU, the I/O really outstanding) and the
//! verdict drawn from them ("limited by storage", "capped at 400 IOPS", ...).
//!
//! A backend measures what only it can reach (residency through its catalog, the server's
//! cgroup and CPU through its connection) and returns it as [`Limits`], each part naming its
//! source; core adds what it measures itself (this host's CPU, the outstanding I/O from the
//! device and database figures) and judges ([`verdict::judge`], [`flat::judge_ramp`]). Core
//! knows no SQL: every figure here is engine-neutral.

pub mod cpu;
pub mod flat;
pub mod verdict;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use cpu::{ClientCpu, CpuReading, ServerCpu};
pub use verdict::{Evidence, Limiter, LimiterVerdict, judge};

/// The figures a limiter verdict is drawn from, beside the database's and the device's.
/// A part that could not be had is null, with the reason in `null_reasons`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Limits {
    /// The data set's relations in the database's buffer cache and in the OS page cache,
    /// before and after the window.
    pub residency: Option<Residency>,
    /// The server's cgroup I/O limits and its own I/O counters over the window.
    pub caps: Option<IoCaps>,
    /// The CPU of the host that ran dbio, per core, and dbio's own.
    pub client_cpu: Option<ClientCpu>,
    /// The CPU of the server's host, per core, and the server's processes'.
    pub server_cpu: Option<ServerCpu>,
    /// The I/O in flight beside the session count: the device's queue, Little's law, and
    /// the database's own asynchronous I/O handles where it has them.
    pub outstanding: Option<OutstandingIo>,
    /// A null part's name (`residency`, `caps`, `server_cpu`, `residency.page_cache`, ...) and
    /// why it is null, with the fix where there is one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub null_reasons: BTreeMap<String, String>,
}

impl Limits {
    /// Records why `part` is null (the first reason given is kept).
    pub fn null_because(&mut self, part: &str, why: impl Into<String>) {
        self.null_reasons
            .entry(part.to_string())
            .or_insert_with(|| why.into());
    }
}

/// A relation of the data set: its table or its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    Table,
    Index,
}

impl RelationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RelationKind::Table => "table",
            RelationKind::Index => "index",
        }
    }
}

/// How many of a relation's blocks were cached at one moment. A count that could not be
/// read is null (the reason is in [`Residency::notes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CacheCounts {
    /// Blocks in the database's buffer cache (PostgreSQL: shared_buffers, pg_buffercache).
    pub shared_buffers_blocks: Option<u64>,
    /// Blocks whose pages are in the OS page cache of the server's host.
    pub page_cache_blocks: Option<u64>,
    /// Blocks in both at once (double-buffered).
    pub both_blocks: Option<u64>,
}

impl CacheCounts {
    /// Blocks cached in either (shared_buffers + page cache - both); null without all three.
    pub fn either_blocks(&self) -> Option<u64> {
        Some(
            (self.shared_buffers_blocks? + self.page_cache_blocks?)
                .saturating_sub(self.both_blocks?),
        )
    }

    fn add(&mut self, o: &CacheCounts) {
        let sum = |a: Option<u64>, b: Option<u64>| Some(a? + b?);
        self.shared_buffers_blocks = sum(self.shared_buffers_blocks, o.shared_buffers_blocks);
        self.page_cache_blocks = sum(self.page_cache_blocks, o.page_cache_blocks);
        self.both_blocks = sum(self.both_blocks, o.both_blocks);
    }
}

/// One relation's residency before and after the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelationResidency {
    /// `schema.name`.
    pub relation: String,
    pub kind: RelationKind,
    /// Its size in blocks (main fork), when residency was read before the window.
    pub blocks: u64,
    pub before: CacheCounts,
    pub after: CacheCounts,
}

/// The data set's relations in the caches, before and after the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Residency {
    /// How the buffer-cache counts were read (`pg_buffercache`), or null.
    pub shared_buffers_source: Option<String>,
    /// How the page-cache counts were read (`cachestat(2) on this host's files`,
    /// `pgfincore`), or null.
    pub page_cache_source: Option<String>,
    /// How the blocks in both were found, or null.
    pub both_source: Option<String>,
    pub block_size: u64,
    pub relations: Vec<RelationResidency>,
    /// Why a count is null, what dbio did to read them (an extension it installed).
    pub notes: Vec<String>,
}

/// The sums over every relation (or those of one kind).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ResidencyTotals {
    pub blocks: u64,
    pub before: CacheCounts,
    pub after: CacheCounts,
}

impl ResidencyTotals {
    /// `part` of the blocks, in %.
    pub fn pct(&self, part: Option<u64>) -> Option<f64> {
        (self.blocks > 0).then_some(100.0 * part? as f64 / self.blocks as f64)
    }
}

impl Residency {
    /// Sums over the relations (of `kind`, or all).
    pub fn totals(&self, kind: Option<RelationKind>) -> ResidencyTotals {
        let mut t = ResidencyTotals {
            before: CacheCounts {
                shared_buffers_blocks: Some(0),
                page_cache_blocks: Some(0),
                both_blocks: Some(0),
            },
            ..ResidencyTotals::default()
        };
        t.after = t.before;
        for r in self
            .relations
            .iter()
            .filter(|r| kind.is_none_or(|k| r.kind == k))
        {
            t.blocks += r.blocks;
            t.before.add(&r.before);
            t.after.add(&r.after);
        }
        if t.blocks == 0 {
            t.before = CacheCounts::default();
            t.after = CacheCounts::default();
        }
        t
    }

    /// The share of the database's reads (those that miss its buffer cache) that should
    /// reach the device, from the residency at the window's start: a block not in
    /// shared_buffers is in the page cache with probability (page cache - both) / (blocks -
    /// shared_buffers), for reads spread evenly over the data set (SLOB's random keys).
    /// Null without the buffer-cache and page-cache counts.
    pub fn expected_physical_ratio(&self) -> Option<f64> {
        let t = self.totals(None);
        expected_ratio(t.blocks, &t.before)
    }

    /// The same from the residency at the window's end.
    pub fn expected_physical_ratio_after(&self) -> Option<f64> {
        let t = self.totals(None);
        expected_ratio(t.blocks, &t.after)
    }
}

/// The share of reads missing the buffer cache that find no copy in the page cache, for
/// `blocks` blocks of which `c` are cached.
fn expected_ratio(blocks: u64, c: &CacheCounts) -> Option<f64> {
    let sb = c.shared_buffers_blocks?;
    let pc = c.page_cache_blocks?;
    let outside = blocks.checked_sub(sb).filter(|b| *b > 0)?;
    // Without the blocks in both, the two caches are taken as independent.
    let cached_outside = match c.both_blocks {
        Some(both) => pc.saturating_sub(both),
        None => pc * outside / blocks,
    }
    .min(outside);
    Some(1.0 - cached_outside as f64 / outside as f64)
}

/// One I/O limit of the server's cgroup on the data's device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoLimit {
    /// `read_iops`, `write_iops`, `read_bps` or `write_bps`.
    pub kind: String,
    /// I/Os per second, or bytes per second.
    pub value: u64,
    /// The file that sets it (`io.max`, `blkio.throttle.read_iops_device`).
    pub file: String,
    /// The cgroup it is set on (the server's, or an ancestor's: the tightest applies).
    pub cgroup: String,
}

/// The server's cgroup I/O limits on the device under the data set, and the cgroup's own
/// I/O over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct IoCaps {
    /// Where they were read (the server's `/proc/<pid>/cgroup` and /sys/fs/cgroup, through the
    /// connection or on this host).
    pub source: String,
    /// `v1` (blkio controller) or `v2` (io controller).
    pub cgroup_version: String,
    /// The server's cgroup, as `/proc/<pid>/cgroup` names it.
    pub cgroup: String,
    /// The device the limits are read for (`major:minor`; the whole disk of a partition).
    pub device: Option<String>,
    /// The tightest limit of each kind over the cgroup and its ancestors; empty when none is
    /// set.
    pub limits: Vec<IoLimit>,
    /// The cgroup's reads and writes on the device per second over the window
    /// (blkio.throttle.io_serviced / io.stat rios, wios).
    pub read_ios_per_s: Option<f64>,
    pub write_ios_per_s: Option<f64>,
    /// cgroup v2 io.pressure: % of the window in which some (or all) of the cgroup's tasks
    /// were stalled on I/O.
    pub pressure_some_pct: Option<f64>,
    pub pressure_full_pct: Option<f64>,
    pub notes: Vec<String>,
}

impl IoCaps {
    /// The tightest limit of `kind`.
    pub fn limit(&self, kind: &str) -> Option<&IoLimit> {
        self.limits
            .iter()
            .filter(|l| l.kind == kind)
            .min_by_key(|l| l.value)
    }
}

/// The database's asynchronous I/O handles in flight, sampled (PostgreSQL 18+ pg_aios).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AioSamples {
    pub source: String,
    pub samples: u64,
    /// Handles of dbio's sessions in flight (defined, staged or submitted), mean and maximum
    /// over the samples.
    pub mean_in_flight: f64,
    pub max_in_flight: u64,
}

/// The I/O outstanding beside the sessions that ask for it: SLOB's premise is one read at a
/// time per session, which read-ahead and asynchronous I/O break.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct OutstandingIo {
    /// Sessions of the run (readers + writers).
    pub sessions: u32,
    /// The device's average queue (iostat aqu-sz).
    pub device_queue_depth: Option<f64>,
    /// Little's law on the device's reads: reads/s x average read wait. What the device held
    /// in flight; a cgroup throttle holds I/Os before the device, outside this figure.
    pub device_reads_in_flight: Option<f64>,
    /// Little's law on the database's reads: read requests/s x database-timed read wait. The
    /// sessions waiting on a read, on average: at most the sessions when each reads one block
    /// at a time; PostgreSQL 18+ times waits, not reads, so read-ahead hides in it.
    pub db_reads_in_flight: Option<f64>,
    /// The database's own asynchronous I/O handles, sampled, where it has them.
    pub aio: Option<AioSamples>,
    pub notes: Vec<String>,
}

impl OutstandingIo {
    /// From the device's and the database's figures over the window.
    pub fn of(
        sessions: u32,
        device: Option<&crate::stats::dbstats::DeviceMetrics>,
        db: Option<&crate::stats::dbstats::DbMetrics>,
        aio: Option<AioSamples>,
    ) -> OutstandingIo {
        OutstandingIo {
            sessions,
            device_queue_depth: device.and_then(|d| d.avg_queue_depth),
            device_reads_in_flight: device
                .and_then(|d| d.avg_read_wait_ms.map(|w| d.reads_per_s * w / 1000.0)),
            db_reads_in_flight: db
                .and_then(|d| d.avg_read_latency_us.map(|l| d.read_iops * l / 1e6)),
            aio,
            notes: Vec::new(),
        }
    }
}

/// A backend's limits (or none) with what core measures added: this host's CPU and the
/// outstanding I/O of `sessions` from the device's and the database's figures (the
/// backend's sampled asynchronous I/O kept).
pub fn complete(
    limits: Option<Limits>,
    client_cpu: Option<ClientCpu>,
    sessions: u32,
    device: Option<&crate::stats::dbstats::DeviceMetrics>,
    db: Option<&crate::stats::dbstats::DbMetrics>,
) -> Limits {
    let mut l = limits.unwrap_or_default();
    if client_cpu.is_none() {
        l.null_because(
            "client_cpu",
            "this host's /proc/stat could not be read around the window",
        );
    }
    l.client_cpu = client_cpu;
    let aio = l.outstanding.take().and_then(|o| o.aio);
    l.outstanding = Some(OutstandingIo::of(sessions, device, db, aio));
    l
}

/// Judges a run's limiter, and each target's in a run over several: the run's is the
/// client's CPU when that held, else the targets' when they agree, else unknown naming
/// each target's.
pub fn judge_result(r: &mut crate::result::RunResult) {
    for t in &mut r.targets {
        let inputs = verdict::Inputs {
            engine: r.engine,
            sessions: t.readers + t.writers,
            seconds: r.window.measured_s,
            db: t.db.as_ref(),
            waits: t.waits.as_ref(),
            device: t.device.as_ref(),
            host: t.host.as_ref(),
            limits: t.limits.as_ref(),
        };
        t.limiter = Some(judge(&inputs));
    }
    let own = judge(&verdict::Inputs::of(r));
    if r.targets.is_empty() || own.limiter == Limiter::ClientCpu {
        r.limiter = Some(own);
        return;
    }
    let each: Vec<&LimiterVerdict> = r
        .targets
        .iter()
        .filter_map(|t| t.limiter.as_ref())
        .collect();
    let Some(first) = each.first() else {
        r.limiter = Some(own);
        return;
    };
    r.limiter = Some(if each.iter().all(|v| v.limiter == first.limiter) {
        LimiterVerdict {
            limiter: first.limiter,
            line: format!("every target: {}", first.line),
            evidence: first.evidence.clone(),
            missing: first.missing.clone(),
        }
    } else {
        let names: Vec<String> = r
            .targets
            .iter()
            .filter_map(|t| {
                t.limiter
                    .as_ref()
                    .map(|v| format!("target {} {}", t.index + 1, v.limiter.name(r.engine)))
            })
            .collect();
        LimiterVerdict {
            limiter: Limiter::Unknown,
            line: format!(
                "unknown: the targets were limited by different things ({}); see each target's",
                names.join(", ")
            ),
            evidence: Vec::new(),
            missing: Vec::new(),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(blocks: u64, sb: u64, pc: u64, both: u64) -> RelationResidency {
        let c = CacheCounts {
            shared_buffers_blocks: Some(sb),
            page_cache_blocks: Some(pc),
            both_blocks: Some(both),
        };
        RelationResidency {
            relation: "user1.cf1".into(),
            kind: RelationKind::Table,
            blocks,
            before: c,
            after: c,
        }
    }

    #[test]
    fn totals_and_the_expected_physical_ratio() {
        let r = Residency {
            block_size: 8192,
            relations: vec![rel(8000, 1000, 4000, 500), rel(2000, 1000, 0, 0)],
            ..Residency::default()
        };
        let t = r.totals(None);
        assert_eq!(t.blocks, 10_000);
        assert_eq!(t.before.either_blocks(), Some(5500));
        assert_eq!(t.pct(t.before.shared_buffers_blocks), Some(20.0));
        // 8000 blocks outside shared_buffers, 3500 of them in the page cache.
        let e = r.expected_physical_ratio().unwrap();
        assert!((e - (1.0 - 3500.0 / 8000.0)).abs() < 1e-12, "{e}");
        let mut unknown = r.clone();
        unknown.relations[1].before.page_cache_blocks = None;
        assert_eq!(unknown.totals(None).before.page_cache_blocks, None);
        assert_eq!(unknown.expected_physical_ratio(), None);
    }

    #[test]
    fn little_law_in_flight() {
        let device = crate::stats::dbstats::DeviceMetrics {
            device: "vda".into(),
            path: "/d".into(),
            seconds: 10.0,
            reads_per_s: 4000.0,
            writes_per_s: 0.0,
            read_kib_per_op: None,
            avg_read_wait_ms: Some(0.5),
            avg_write_wait_ms: None,
            physical_read_ratio: None,
            cache_control: crate::stats::dbstats::CacheControl::None,
            major_minor: None,
            source: None,
            read_mib_per_s: None,
            await_ms: None,
            avg_queue_depth: Some(2.1),
            busy_pct: None,
            tables: Vec::new(),
        };
        let db = crate::stats::dbstats::DbMetrics {
            read_iops: 400.0,
            avg_read_latency_us: Some(10_000.0),
            ..Default::default()
        };
        let o = OutstandingIo::of(4, Some(&device), Some(&db), None);
        assert_eq!(o.device_reads_in_flight, Some(2.0));
        assert_eq!(o.db_reads_in_flight, Some(4.0));
        assert_eq!(o.device_queue_depth, Some(2.1));
    }
}
