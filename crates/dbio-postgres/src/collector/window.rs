//! The collector around one run window: what it reads before the window opens and after it
//! closes, and what it hands back (`Collected`).

use std::path::PathBuf;
use std::time::Duration;

use dbio_core::dbstats::{DbMetrics, DeviceMetrics, WaitProfile, cache_warnings};
use dbio_core::device::{self, Device, DiskCounters};
use tokio_postgres::Client;

use super::metrics::{IoTiming, metrics, warnings};
use super::snapshot::{Snapshot, pgss_available, take_snapshot};
use crate::conn::Target;
use crate::error::Result;
use crate::sampler::{self, Sampler};

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
