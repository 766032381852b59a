//! The collector around one run window: what it reads before the window opens and after it
//! closes, and what it hands back (`Collected`).
//!
//! Host figures (device, the backends' physical reads, RAM, CPU) are read where the server
//! runs: through the connection when the role may read server files, else from this host's
//! /proc when the server is proven to run here (`host::proven_local`), else not at all, with
//! the GRANT that would give them (`rights`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use dbio_core::limits::{AioSamples, Limits, OutstandingIo};
use dbio_core::stats::dbstats::{
    CacheControl, DbMetrics, DeviceMetrics, HostMetrics, MissingRight, WaitProfile,
    host_cache_warnings,
};
use dbio_core::stats::device::{self, Device, DiskCounters};
use tokio_postgres::Client;

use super::metrics::{IoTiming, cache_warnings, metrics, warnings};
use super::snapshot::{Snapshot, pgss_available, take_snapshot};
use crate::caps::{CapCounters, CapsProbe};
use crate::conn::Target;
use crate::cpu::{CpuProbe, CpuSnapshot};
use crate::error::PgError;
use crate::error::Result;
use crate::host::{self, CpuTicks, HostAccess, IoCounts};
use crate::residency::{Reading, ResidencyProbe};
use crate::rights::RoleRights;
use crate::sampler::{self, Sampler, SamplerOptions};
use crate::sql;

/// What the collector gathered around one window.
#[derive(Debug, Clone, Default)]
pub struct Collected {
    pub db: Option<DbMetrics>,
    pub waits: Option<WaitProfile>,
    pub device: Option<DeviceMetrics>,
    /// The database host's own figures, when they could be read.
    pub host: Option<HostMetrics>,
    /// Figures missing for want of a right, with the GRANT for each.
    pub missing_rights: Vec<MissingRight>,
    /// Residency, the server's cgroup I/O caps and CPU, its asynchronous I/O (the limiter's).
    pub limits: Option<Limits>,
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

/// Longest the collector waits for the sessions' backends to exit after the window.
const BACKEND_EXIT_WAIT: Duration = Duration::from_secs(2);

/// Returns once none of `pids` is in pg_stat_activity (or the server does not say); `asked`
/// counts the collector's own transactions they commit.
async fn backends_gone(client: &Client, pids: &[i32], asked: &mut u64) {
    loop {
        let answer = client.query_one(sql::BACKENDS_LEFT, &[&pids]).await.ok();
        *asked += u64::from(answer.is_some()) * sql::QUERY_TRANSACTIONS;
        let left = answer.and_then(|r| r.try_get::<_, i64>(0).ok());
        if left.is_none_or(|n| n == 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The device under the data set's tables.
struct Measured {
    device: Device,
    path: PathBuf,
    tables: Vec<String>,
}

/// Readings at the window's start.
struct Started {
    snapshot: Snapshot,
    disk: Option<DiskCounters>,
    cpu: Option<CpuTicks>,
    sampler: Sampler,
    residency: Option<Reading>,
    caps: CapCounters,
    server_cpu: CpuSnapshot,
}

/// What the limiter needs read around the window (the server's collector only); each part
/// that cannot be had is named with the reason.
#[derive(Default)]
struct LimitProbes {
    residency: Option<ResidencyProbe>,
    caps: Option<CapsProbe>,
    cpu: Option<CpuProbe>,
    null_reasons: BTreeMap<String, String>,
    notes: Vec<String>,
}

impl LimitProbes {
    async fn find(
        client: &Client,
        opts: &CollectorOptions,
        superuser: bool,
        data_dir: Option<&std::path::Path>,
        access: Option<&HostAccess>,
        device: Option<&Device>,
        pid: Option<i32>,
    ) -> LimitProbes {
        let mut p = LimitProbes::default();
        let local = match data_dir {
            Some(d) => host::proven_local(client, d).await.map(|_| d.to_path_buf()),
            None => {
                Err("the role may not read data_directory (GRANT pg_read_all_settings)".to_string())
            }
        };
        match ResidencyProbe::prepare(client, &opts.schemas, opts.block_size, superuser, local)
            .await
        {
            Ok(r) => p.residency = Some(r),
            Err(e) => {
                p.null_reasons.insert(
                    "residency".into(),
                    format!("the data set's relations could not be listed: {e}"),
                );
            }
        }
        let Some(access) = access else {
            let why = "the server's files cannot be read (see the device figures' note and missing_rights)";
            p.null_reasons.insert("caps".into(), why.into());
            p.null_reasons.insert("server_cpu".into(), why.into());
            return p;
        };
        let Some(pid) = pid else {
            let why = "the collector's backend pid could not be read";
            p.null_reasons.insert("caps".into(), why.into());
            p.null_reasons.insert("server_cpu".into(), why.into());
            return p;
        };
        match device {
            Some(d) => match CapsProbe::find(client, access, pid, d).await {
                Ok(c) => p.caps = Some(c),
                Err(e) => {
                    p.null_reasons.insert("caps".into(), e);
                }
            },
            None => {
                p.null_reasons.insert(
                    "caps".into(),
                    "the device under the data set is not known (see the device figures' note)"
                        .into(),
                );
            }
        }
        match CpuProbe::find(client, access, pid).await {
            Ok(c) => p.cpu = Some(c),
            Err(e) => {
                p.null_reasons.insert("server_cpu".into(), e);
            }
        }
        p
    }
}

/// The collector around one run window: `begin` just before the window opens (drop caches,
/// "before" snapshot, device and host counters, sampler), `end` after the sessions have
/// flushed or disconnected.
pub struct WindowCollector {
    target: Target,
    client: Client,
    major: i32,
    block_size: u64,
    schemas: Vec<String>,
    timing: IoTiming,
    /// Where host files are read, when they may be.
    access: Option<HostAccess>,
    /// The server's memory cgroup limit, read once before the window.
    memory_cap: Option<crate::cgroup::MemoryCap>,
    device: Option<Measured>,
    drop_caches: bool,
    cache_control: CacheControl,
    sample_period: Duration,
    backend_pids: Vec<i32>,
    collector_pid: Option<i32>,
    started: Option<Started>,
    notes: Vec<String>,
    missing_rights: Vec<MissingRight>,
    /// pg_stat_statements can be read (installed and preloaded).
    pgss: bool,
    scope: Scope,
    shard_of_many: bool,
    /// When the connection was made (13/14 publish its statistics at most every 500 ms).
    connected_at: std::time::Instant,
    limits: LimitProbes,
}

/// What a collector measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The server: statistics snapshots, the device, the host's memory and CPU, and the
    /// sessions' waits and physical reads.
    Server,
    /// The sessions of this process only (a shard that does not collect the server's
    /// figures): their waits and physical reads, which `dbio merge` sums over the shards.
    Sessions,
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
    /// The measured sessions' backend PIDs (from each connection's BackendKeyData), so that
    /// the sampler tells them apart from every other session; empty: by application_name.
    pub backend_pids: Vec<i32>,
    pub scope: Scope,
    /// This run is one shard of several: the database's counters include the other shards'
    /// sessions.
    pub shard_of_many: bool,
}

impl WindowCollector {
    pub async fn connect(target: &Target, opts: CollectorOptions) -> Result<WindowCollector> {
        let client = target.connect("dbio-collector").await?;
        let mut notes = Vec::new();
        let pgss = pgss_available(&client, opts.major).await;
        let collector_pid = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .ok()
            .and_then(|r| r.try_get::<_, i32>(0).ok());
        let rights = RoleRights::read(&client, opts.major).await.ok();
        let missing_rights = rights.as_ref().map(RoleRights::missing).unwrap_or_default();
        let data_dir: Option<PathBuf> = client
            .query_opt(sql::DATA_DIRECTORY, &[])
            .await
            .ok()
            .flatten()
            .and_then(|r| r.try_get::<_, Option<String>>(0).ok().flatten())
            .map(PathBuf::from);
        let (access, device) = match opts.scope {
            Scope::Server => {
                locate(
                    &client,
                    &opts,
                    rights.as_ref(),
                    data_dir.clone(),
                    &mut notes,
                )
                .await
            }
            Scope::Sessions => {
                let mut why_not = Vec::new();
                let access =
                    host_access(&client, rights.as_ref(), data_dir.clone(), &mut why_not).await;
                if access.is_none() {
                    notes.push(format!(
                        "this shard's sessions' physical reads are null: {}. See missing_rights for the GRANT",
                        why_not.join("; ")
                    ));
                }
                (access, None)
            }
        };
        let memory_cap = match (&access, opts.scope) {
            (Some(a), Scope::Server) => host::memory_cap(&client, a).await,
            _ => None,
        };
        let limits = match opts.scope {
            Scope::Server => {
                LimitProbes::find(
                    &client,
                    &opts,
                    rights.as_ref().is_some_and(|r| r.superuser),
                    data_dir.as_deref(),
                    access.as_ref(),
                    device.as_ref().map(|m| &m.device),
                    collector_pid,
                )
                .await
            }
            Scope::Sessions => LimitProbes::default(),
        };
        let cache_control = if opts.drop_caches {
            CacheControl::DroppedPageCache
        } else if opts.direct_io {
            CacheControl::DirectIo
        } else {
            CacheControl::None
        };
        Ok(WindowCollector {
            target: target.clone(),
            client,
            major: opts.major,
            block_size: opts.block_size,
            schemas: opts.schemas,
            timing: opts.timing,
            access,
            memory_cap,
            device,
            drop_caches: opts.drop_caches,
            cache_control,
            sample_period: opts.sample_period,
            backend_pids: opts.backend_pids,
            collector_pid,
            started: None,
            notes,
            missing_rights,
            pgss,
            scope: opts.scope,
            shard_of_many: opts.shard_of_many,
            connected_at: std::time::Instant::now(),
            limits,
        })
    }

    /// The figures this run cannot have for want of a right.
    pub fn missing_rights(&self) -> &[MissingRight] {
        &self.missing_rights
    }

    async fn read_disk(&self) -> Option<DiskCounters> {
        let (access, m) = (self.access.as_ref()?, self.device.as_ref()?);
        let text = access.read(&self.client, "/proc/diskstats").await.ok()?;
        device::counters_in(&text, &m.device)
    }

    async fn read_cpu(&self) -> Option<CpuTicks> {
        if self.scope == Scope::Sessions {
            return None;
        }
        let access = self.access.as_ref()?;
        let text = access.read(&self.client, "/proc/stat").await.ok()?;
        host::parse_cpu(&text)
    }

    /// The counters of the sessions' backends and (for the server's collector) the io
    /// workers now.
    async fn read_io(&self) -> BTreeMap<i32, IoCounts> {
        let Some(access) = &self.access else {
            return BTreeMap::new();
        };
        let mut pids = self.backend_pids.clone();
        if self.scope == Scope::Server {
            pids.extend(host::io_worker_pids(&self.client, self.major).await);
        }
        host::read_pid_io(&self.client, access, &pids).await.0
    }

    /// Publishes this connection's own statistics (its transactions among them) so that the
    /// snapshot that follows counts them: 15+ at once; 13/14 send a backend's counts at most
    /// every 500 ms (PGSTAT_STAT_INTERVAL), when it goes idle, so the first statement more
    /// than that after the last sends them. False when the statement failed.
    async fn publish_own(&self) -> bool {
        if self.major >= 15 {
            return self.client.batch_execute(sql::FORCE_FLUSH).await.is_ok();
        }
        let due = self.connected_at + Duration::from_millis(600);
        tokio::time::sleep_until(due.into()).await;
        self.client.batch_execute("SELECT 1").await.is_ok()
    }

    /// Just before the window: an error fails the run before anything is measured.
    /// The host's counters first and the statistics snapshot last, so that none of the
    /// collector's own statements falls inside the window but the snapshot's commit.
    pub async fn begin(&mut self) -> Result<(), PgError> {
        if self.drop_caches && self.scope == Scope::Server {
            device::drop_page_cache().map_err(|e| {
                PgError::Usage(format!(
                    "cannot drop the page cache ({e}); --drop-caches needs root on the server's host"
                ))
            })?;
        }
        // The caches first (pg_buffercache and the files' pages), then the counters.
        let residency = match &self.limits.residency {
            Some(p) => Some(p.read(&self.client, &mut self.limits.notes).await),
            None => None,
        };
        let caps = match (&self.limits.caps, &self.access) {
            (Some(p), Some(a)) => p.counters(&self.client, a).await,
            _ => CapCounters::default(),
        };
        let server_cpu = match &self.limits.cpu {
            Some(p) => p.read(&self.client).await,
            None => CpuSnapshot::default(),
        };
        let disk = self.read_disk().await;
        let cpu = self.read_cpu().await;
        let io_before = self.read_io().await;
        let snapshot = match self.scope {
            Scope::Server => {
                self.publish_own().await;
                take_snapshot(&self.client, self.major, &self.schemas, self.pgss).await?
            }
            Scope::Sessions => Snapshot::default(),
        };
        let sampler = Sampler::start_with(
            &self.target,
            SamplerOptions {
                period: self.sample_period,
                session_pids: self.backend_pids.clone(),
                collector_pid: self.collector_pid,
                host: self.access.clone(),
                io_before,
                major: self.major,
            },
        )
        .await?;
        self.started = Some(Started {
            snapshot,
            disk,
            cpu,
            sampler,
            residency,
            caps,
            server_cpu,
        });
        Ok(())
    }

    /// After the window: the "after" snapshot and the figures. Failures become warnings:
    /// what the client measured is kept either way, and so are the device figures and the
    /// wait samples when the snapshot cannot be had.
    pub async fn end(mut self, window_s: f64) -> Collected {
        let mut out = Collected {
            warnings: self.notes.clone(),
            missing_rights: self.missing_rights.clone(),
            ..Collected::default()
        };
        let Some(started) = self.started.take() else {
            out.warnings.push(
                "database statistics were not collected: the run stopped before its window opened"
                    .into(),
            );
            return out;
        };
        // The sampler stops with the window: the waits are the window's. So are the CPU
        // readings: the host's /proc/stat now, not after the waits below (idle time would
        // dilute its busy share).
        let mut samples = started.sampler.stop().await;
        // One deadline for every read after the window: a server that stopped answering
        // must not keep the result from being written (the CPU readings go through the
        // connection too: a stopped server once held a Ctrl-C'd run here for good).
        let deadline = tokio::time::Instant::now() + AFTER_SNAPSHOT_TIMEOUT;
        let cpu_after = tokio::time::timeout_at(deadline, self.read_cpu())
            .await
            .ok()
            .flatten();
        let server_stat = match &self.limits.cpu {
            Some(p) => tokio::time::timeout_at(deadline, p.read_stat(&self.client))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        // A session's backend publishes its last statistics as it exits (before_shmem_exit,
        // ahead of leaving pg_stat_activity): on a busy host the "after" snapshot could
        // otherwise run before the last sessions' counts are in.
        let mut own = 0u64;
        if !self.backend_pids.is_empty() {
            let by = (tokio::time::Instant::now() + BACKEND_EXIT_WAIT).min(deadline);
            let _ = tokio::time::timeout_at(
                by,
                backends_gone(&self.client, &self.backend_pids, &mut own),
            )
            .await;
        }
        if self.major < 15 && self.scope == Scope::Server {
            // 13/14 publish a session's statistics when it disconnects, through the stats
            // collector, which writes them at most every 500 ms.
            tokio::time::sleep(Duration::from_millis(1200)).await;
        }
        let after = match self.scope {
            Scope::Sessions => None,
            Scope::Server => {
                if tokio::time::timeout_at(deadline, self.publish_own())
                    .await
                    .is_ok_and(|ok| ok)
                {
                    own += 1;
                }
                match tokio::time::timeout_at(deadline, self.after_snapshot(&mut out, &mut own))
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
                }
            }
        };
        let mut residency_notes = std::mem::take(&mut self.limits.notes);
        let host_reads = async {
            let disk = self.read_disk().await;
            let io = self.read_io().await;
            let meminfo = match (&self.access, self.scope) {
                (Some(a), Scope::Server) => a.read(&self.client, "/proc/meminfo").await.ok(),
                _ => None,
            };
            let residency = match &self.limits.residency {
                Some(p) => Some(p.read(&self.client, &mut residency_notes).await),
                None => None,
            };
            let caps = match (&self.limits.caps, &self.access) {
                (Some(p), Some(a)) => p.counters(&self.client, a).await,
                _ => CapCounters::default(),
            };
            let server_cpu = match &self.limits.cpu {
                Some(p) => Some(p.read_after(&self.client, server_stat).await),
                None => None,
            };
            (disk, io, meminfo, residency, caps, server_cpu)
        };
        let (disk_after, io_after, meminfo, residency_after, caps_after, server_cpu_after) =
            match tokio::time::timeout_at(deadline, host_reads).await {
                Ok(r) => r,
                Err(_) => {
                    out.warnings.push(format!(
                        "device and host figures are null: the server did not answer their reading within {} s",
                        AFTER_SNAPSHOT_TIMEOUT.as_secs()
                    ));
                    (
                        None,
                        BTreeMap::new(),
                        None,
                        None,
                        CapCounters::default(),
                        None,
                    )
                }
            };
        samples.pid_io.record(&io_after);
        // The "before" snapshot's commit, the collector's statements until the "after" one,
        // and the sampler's: dbio's own, not the workload's.
        own += 1 + samples.transactions;
        let m = after.map(|after| {
            let mut m = metrics(
                &started.snapshot,
                &after,
                window_s,
                self.block_size,
                self.timing,
                &self.target.user,
            );
            m.exclude_own_transactions(own);
            m
        });
        if let (Some(d), Some(b), Some(a)) = (&self.device, started.disk, disk_after) {
            let mut dm = device::device_metrics(
                &d.device,
                &d.path,
                b,
                a,
                window_s,
                m.as_ref().map(|m| m.read_iops * window_s),
                self.cache_control,
            );
            dm.source = self.access.as_ref().map(HostAccess::source);
            dm.tables = d.tables.clone();
            out.device = Some(dm);
        }
        if let Some(access) = &self.access {
            out.host = Some(self.host_metrics(
                access,
                &samples,
                window_s,
                started.cpu,
                cpu_after,
                meminfo.as_deref(),
            ));
        }
        if self.scope == Scope::Server {
            out.limits = Some(self.limits(
                (
                    started.residency.as_ref(),
                    started.caps,
                    &started.server_cpu,
                ),
                residency_after,
                caps_after,
                server_cpu_after,
                residency_notes,
                &samples,
                window_s,
            ));
        }
        if samples.errors > 0 {
            out.warnings.push(format!(
                "{} wait samples failed (of {})",
                samples.errors,
                samples.errors + samples.samples
            ));
        }
        let await_ms = out.device.as_ref().and_then(|d| d.avg_read_wait_ms);
        let Some(m) = m else {
            let sampled_only = DbMetrics::default();
            out.waits = Some(sampler::wait_profile(
                &samples,
                &sampled_only,
                self.major,
                await_ms,
                self.shard_of_many,
            ));
            return out;
        };
        out.warnings.extend(warnings(&m));
        out.warnings.extend(cache_warnings(&m, out.device.as_ref()));
        out.warnings
            .extend(host_cache_warnings(&m, out.host.as_ref()));
        out.waits = Some(sampler::wait_profile(
            &samples,
            &m,
            self.major,
            await_ms,
            self.shard_of_many,
        ));
        out.db = Some(m);
        out
    }

    /// The limiter's figures over the window, each part that could not be had named with
    /// its reason.
    #[allow(clippy::too_many_arguments)]
    fn limits(
        &self,
        (residency_before, caps_before, cpu_before): (Option<&Reading>, CapCounters, &CpuSnapshot),
        residency_after: Option<Reading>,
        caps_after: CapCounters,
        server_cpu_after: Option<CpuSnapshot>,
        residency_notes: Vec<String>,
        samples: &sampler::Samples,
        window_s: f64,
    ) -> Limits {
        let mut l = Limits {
            null_reasons: self.limits.null_reasons.clone(),
            ..Limits::default()
        };
        if let (Some(p), Some(before), Some(after)) =
            (&self.limits.residency, residency_before, &residency_after)
        {
            l.residency = Some(p.residency(before, after, residency_notes));
        } else if self.limits.residency.is_some() {
            l.null_because(
                "residency",
                "the server did not answer its reading after the window",
            );
        }
        if let Some(p) = &self.limits.caps {
            l.caps = Some(p.caps(caps_before, caps_after, window_s));
        }
        match (&self.limits.cpu, server_cpu_after) {
            (Some(p), Some(after)) => match p.server_cpu(cpu_before, &after, window_s) {
                Some(c) => l.server_cpu = Some(c),
                None => l.null_because(
                    "server_cpu",
                    "the server's /proc/stat could not be read around the window",
                ),
            },
            (Some(_), None) => {
                l.null_because("server_cpu", "the server did not answer after the window")
            }
            (None, _) => {}
        }
        if self.major >= 18 {
            let a = &samples.aio;
            if a.samples > 0 {
                l.outstanding = Some(OutstandingIo {
                    aio: Some(AioSamples {
                        source: "pg_aios, sampled with the waits (handles of dbio's sessions defined, staged or submitted)"
                            .into(),
                        samples: a.samples,
                        mean_in_flight: a.sum as f64 / a.samples as f64,
                        max_in_flight: a.max,
                    }),
                    ..OutstandingIo::default()
                });
            } else if let Some(e) = &a.error {
                l.null_because(
                    "outstanding.aio",
                    format!("pg_aios could not be read ({e}): GRANT pg_read_all_stats to the role"),
                );
            }
        }
        l
    }

    /// The database host's figures over the window: what the sessions' backends (and, for
    /// the server's collector, the io workers) read from storage and through the kernel,
    /// and the host's memory and CPU.
    fn host_metrics(
        &self,
        access: &HostAccess,
        samples: &sampler::Samples,
        window_s: f64,
        cpu_before: Option<CpuTicks>,
        cpu_after: Option<CpuTicks>,
        meminfo: Option<&str>,
    ) -> HostMetrics {
        let mut h = HostMetrics {
            source: access.source(),
            seconds: window_s,
            ..HostMetrics::default()
        };
        let (sessions, n) = samples.pid_io.delta(Some(&self.backend_pids));
        if self.backend_pids.is_empty() || n == 0 {
            h.notes.push(
                "the sessions' backends could not be read (/proc/<pid>/io): no physical-read figure"
                    .into(),
            );
        } else {
            h.session_read_bytes = Some(sessions.read_bytes);
            h.session_kernel_read_bytes = Some(sessions.rchar);
            h.backends_read = n;
        }
        let workers: Vec<i32> = samples.io_workers.iter().copied().collect();
        if self.scope == Scope::Sessions {
            h.notes.push(
                "this shard's own sessions only; the io workers, the host's memory and CPU are the collecting shard's"
                    .into(),
            );
        } else if !workers.is_empty() {
            let (bytes, n) = samples.pid_io.delta(Some(&workers));
            h.io_worker_read_bytes = Some(bytes.read_bytes);
            h.io_worker_kernel_read_bytes = Some(bytes.rchar);
            h.backends_read += n;
            h.notes.push(format!(
                "{} io worker(s) read for every backend of the server, not only dbio's (io_method=worker)",
                workers.len()
            ));
        } else if self.major >= 18 {
            h.notes.push(
                "no io worker was seen (io_method is not worker, or the role may not see them: pg_read_all_stats)"
                    .into(),
            );
        }
        h.derive_ratio(self.block_size);
        if let Some(text) = meminfo {
            (h.mem_total_bytes, h.mem_available_bytes, h.page_cache_bytes) =
                host::parse_meminfo(text);
        }
        // /proc/meminfo is the host's, inside a container too: the server's memory (its
        // page cache included) is capped by its cgroup when that limit is lower.
        if let (Some(cap), Some(total)) = (&self.memory_cap, h.mem_total_bytes)
            && cap.bytes < total
        {
            h.mem_limit_bytes = Some(cap.bytes);
            h.notes.push(format!(
                "the server's memory is capped at {} by its cgroup ({}); the host has {}: the page cache its reads may fill is within the cap",
                dbio_core::units::format_bytes(cap.bytes),
                cap.file,
                dbio_core::units::format_bytes(total)
            ));
        }
        if let Some([u, s, w, i]) = cpu_before
            .zip(cpu_after)
            .and_then(|(a, b)| host::cpu_pct(a, b))
        {
            (
                h.cpu_user_pct,
                h.cpu_system_pct,
                h.cpu_iowait_pct,
                h.cpu_idle_pct,
            ) = (Some(u), Some(s), Some(w), Some(i));
        }
        h
    }

    /// The "after" snapshot. The collector's connection sat idle through the window; when
    /// it was lost anyway (a server-side timeout, a terminated backend), a new connection
    /// takes the snapshot: the counters are server-wide, so the deltas hold. `own` counts
    /// the new connection's own transactions.
    async fn after_snapshot(&mut self, out: &mut Collected, own: &mut u64) -> Result<Snapshot> {
        if !self.client.is_closed() {
            match take_snapshot(&self.client, self.major, &self.schemas, self.pgss).await {
                Ok(s) => return Ok(s),
                Err(e) if !self.client.is_closed() => return Err(e),
                Err(_) => {}
            }
        }
        self.client = self.target.connect("dbio-collector").await?;
        *own += sampler::CONNECT_TRANSACTIONS;
        out.warnings.push(
            "the collector's connection was lost during the window; it reconnected for the \"after\" snapshot \
             (the counters are server-wide, so the figures hold)"
                .into(),
        );
        take_snapshot(&self.client, self.major, &self.schemas, self.pgss).await
    }
}

/// Where host files can be read: the server's own, through the connection, when the role
/// may; else this host's, when the server is proven to run here; else nowhere, with the
/// reasons pushed onto `why_not`.
async fn host_access(
    client: &Client,
    rights: Option<&RoleRights>,
    data_dir: Option<PathBuf>,
    why_not: &mut Vec<String>,
) -> Option<HostAccess> {
    if rights.is_some_and(RoleRights::reads_server_files) {
        match host::server_files_readable(client).await {
            Ok(()) => return Some(HostAccess::Server),
            Err(e) => why_not.push(format!("the server's files could not be read ({e})")),
        }
    } else {
        why_not.push(
            "the role may not read the server's files (pg_read_server_files and EXECUTE on pg_read_file)"
                .to_string(),
        );
    }
    match &data_dir {
        Some(dir) => match host::proven_local(client, dir).await {
            Ok((pid, proof)) => return Some(HostAccess::Local { pid, proof }),
            Err(e) => why_not.push(format!("the server is not proven to run on this host: {e}")),
        },
        None => why_not.push(
            "the server is not proven to run on this host: the role may not read data_directory (pg_read_all_settings)"
                .to_string(),
        ),
    }
    None
}

/// Where host files can be read, and the device under the data set's tables. Each figure
/// that cannot be had leaves a note saying why.
async fn locate(
    client: &Client,
    opts: &CollectorOptions,
    rights: Option<&RoleRights>,
    data_dir: Option<PathBuf>,
    notes: &mut Vec<String>,
) -> (Option<HostAccess>, Option<Measured>) {
    let mut why_not = Vec::new();
    let access = host_access(client, rights, data_dir.clone(), &mut why_not).await;
    let Some(access) = access else {
        notes.push(format!(
            "device and host figures (device IOPS, await, queue depth; the backends' physical reads; the server's RAM and CPU) \
             are null: {}. See missing_rights for the GRANT",
            why_not.join("; ")
        ));
        return (None, None);
    };
    let tables = match host::table_locations(client, &opts.schemas, data_dir.as_deref()).await {
        Ok(t) => t,
        Err(e) => {
            notes.push(format!(
                "device figures are null: the tables' locations could not be read: {e}"
            ));
            return (Some(access), None);
        }
    };
    // The data set's tables by directory; the device of the first table's directory is
    // measured, and tables elsewhere are named.
    let dir = tables
        .iter()
        .find_map(|(_, d)| d.clone())
        .or_else(|| opts.data_path.clone());
    let Some(dir) = dir else {
        notes.push(
            "device figures are null: the data directory's path is hidden from this role: GRANT pg_read_all_settings to it"
                .to_string(),
        );
        return (Some(access), None);
    };
    let device = match host::device_under(client, &access, &dir).await {
        Ok(d) => d,
        Err(e) => {
            notes.push(format!("device figures are null: {e}"));
            return (Some(access), None);
        }
    };
    let mut on = Vec::new();
    let mut elsewhere = Vec::new();
    for (table, d) in &tables {
        match d {
            Some(d) if *d == dir => on.push(table.clone()),
            Some(d) => elsewhere.push(format!("{table} ({})", d.display())),
            None => elsewhere.push(format!("{table} (location hidden)")),
        }
    }
    if !elsewhere.is_empty() {
        notes.push(format!(
            "the device figures are {}'s under {}; these tables live elsewhere and are not in them: {}",
            device.name,
            dir.display(),
            elsewhere.join(", ")
        ));
    }
    (
        Some(access),
        Some(Measured {
            device,
            path: dir,
            tables: on,
        }),
    )
}
