//! dbio-calibrate: what the storage does without a database, the way Oracle's Orion measures
//! it. At each load level (outstanding I/Os), small random reads give IOPS and a latency
//! distribution, large random reads give MB/s. Every I/O is O_DIRECT, so the page cache never
//! answers. The psync engine keeps `level` I/Os outstanding with `level` threads doing
//! pread(2)/pwrite(2); the io_uring engine keeps them in flight from one thread.
//!
//! Writes never land in data that is not dbio's: `--create` makes a new file (never an
//! existing one) whose first block is dbio's mark, and only such a file takes writes unless
//! the user says `--destroy-data`. Any other file or device is measured read-only.
//!
//! Layout: `target` decides what the path is and what may be done with it, `engine` holds
//! the psync and io_uring engines, [`model`] the measured points, [`report`] the text and CSV
//! files.

mod baseline;
mod engine;
pub mod model;
pub mod report;
mod target;

use std::path::{Path, PathBuf};
use std::time::Duration;

use dbio_core::stats::{LatencySummary, encode_histogram};
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use baseline::Baseline;
pub use model::{Calibration, CalibrationStatus, Point};

use engine::{ALIGN, Load, Region};
use target::{FileMark, Target};

#[derive(Debug, Error)]
pub enum CalibrateError {
    /// Bad usage.
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    /// A calibration file (`run.calibration`, `history ... --calibration`) that cannot be used:
    /// unreadable, not a dbio calibrate.json, or figures no calibration produces.
    #[error("calibration {}: {message}", path.display())]
    Calibration { path: PathBuf, message: String },
}

impl CalibrateError {
    /// What kind of failure this is (the CLI decides the exit code from it).
    pub fn kind(&self) -> dbio_core::ErrorKind {
        match self {
            CalibrateError::Usage(_) | CalibrateError::Calibration { .. } => {
                dbio_core::ErrorKind::Usage
            }
            CalibrateError::Io { .. } => dbio_core::ErrorKind::Failed,
        }
    }
}

type Result<T> = std::result::Result<T, CalibrateError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// One thread per outstanding I/O, pread/pwrite.
    Psync,
    /// One thread keeping `level` I/Os in flight through io_uring.
    IoUring,
}

impl Engine {
    /// The spelling `--engine` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Psync => "psync",
            Engine::IoUring => "io_uring",
        }
    }
}

#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    pub path: PathBuf,
    /// Size to create, or the part of an existing file or device to use.
    pub size: Option<u64>,
    pub create: bool,
    pub block: u64,
    pub large: u64,
    pub levels: Vec<u32>,
    pub duration: Duration,
    /// Percent of the small I/Os that are writes.
    pub write_pct: u32,
    /// Allows writes to a block device or to a file dbio did not create, destroying its data.
    pub destroy_data: bool,
    pub engine: Engine,
    pub seed: u64,
}

fn io_err(path: &Path, e: std::io::Error) -> CalibrateError {
    CalibrateError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Checks the options and what the path holds, changing nothing (the CLI calls it before it
/// makes the result folder).
pub fn preflight(o: &CalibrateOptions) -> Result<()> {
    validate(o)?;
    target::inspect(o).map(|_| ())
}

fn validate(o: &CalibrateOptions) -> Result<()> {
    for (name, v) in [("--block", o.block), ("--large", o.large)] {
        if v == 0 || v % ALIGN as u64 != 0 {
            return Err(CalibrateError::Usage(format!(
                "{name} must be a multiple of 4096 bytes (O_DIRECT alignment), not {v}"
            )));
        }
    }
    if o.levels.is_empty() || o.levels.iter().any(|l| *l == 0 || *l > 1024) {
        return Err(CalibrateError::Usage(
            "--levels must list load levels between 1 and 1024".into(),
        ));
    }
    if o.write_pct > 100 {
        return Err(CalibrateError::Usage(format!(
            "--write-pct {} is out of range; allowed 0..=100",
            o.write_pct
        )));
    }
    if o.duration < Duration::from_millis(100) {
        return Err(CalibrateError::Usage(
            "--duration must be at least 100ms".into(),
        ));
    }
    Ok(())
}

/// Measures every level; `progress` is told about each point as it starts. When `stop`
/// turns true (Ctrl-C), the level in progress is dropped (it did not last its duration) and
/// the levels measured so far are returned with status `interrupted`.
pub fn calibrate(
    o: &CalibrateOptions,
    progress: &dyn Fn(&str),
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<Calibration> {
    validate(o)?;
    let target = target::inspect(o)?;
    let writes = o.write_pct > 0;
    let f = match target {
        Target::New { size } => {
            progress(&format!(
                "writing {} MiB of data to the new file {}",
                size >> 20,
                o.path.display()
            ));
            target::create_file(&o.path, size, o.seed)?
        }
        Target::Own => {
            if o.create {
                progress(&format!(
                    "{} is a calibration file dbio created earlier: using it as it is",
                    o.path.display()
                ));
            }
            let f = target::open_direct(&o.path, writes, false)?;
            if writes && FileMark::read_direct(&f, &o.path)?.is_none() {
                return Err(CalibrateError::Usage(format!(
                    "{} changed while dbio opened it and is no longer a calibration file dbio created; nothing was written",
                    o.path.display()
                )));
            }
            f
        }
        Target::Device => target::open_direct(&o.path, writes, true)?,
        Target::Foreign => target::open_direct(&o.path, writes, false)?,
    };
    let is_block = target == Target::Device;
    let full = target::size_of(&o.path, &f, is_block)?;
    let size = o.size.map(|s| s.min(full)).unwrap_or(full);
    let base = target.base();
    let region = size.saturating_sub(base);
    if region < o.large.max(o.block) * 16 {
        return Err(CalibrateError::Usage(format!(
            "{} holds {size} bytes: too small for {}-byte I/Os; use --size of at least {} bytes",
            o.path.display(),
            o.large,
            o.large * 16 + base
        )));
    }
    let started = chrono::Utc::now();
    let mut points = Vec::new();
    let mut status = CalibrationStatus::Ok;
    for &level in &o.levels {
        if stop() {
            status = CalibrationStatus::Interrupted;
            break;
        }
        progress(&format!(
            "level {level}: small {} KiB random I/O for {:?}",
            o.block >> 10,
            o.duration
        ));
        let region = Region { base, len: region };
        let run = |bytes: u64, write_pct: u32, seed: u64| {
            let load = Load {
                region,
                bytes,
                level,
                duration: o.duration,
                write_pct,
                seed,
            };
            engine::measure(o.engine, &f, &o.path, load, stop)
        };
        let small = run(o.block, o.write_pct, o.seed)?;
        progress(&format!(
            "level {level}: large {} KiB random reads for {:?}",
            o.large >> 10,
            o.duration
        ));
        let large = run(o.large, 0, o.seed ^ 0xA5A5)?;
        if stop() {
            status = CalibrationStatus::Interrupted;
            break;
        }
        points.push(Point {
            level,
            small_iops: small.ops as f64 / small.seconds,
            small_latency_us: LatencySummary::from_histogram(&small.hist),
            small_histogram: encode_histogram(&small.hist),
            large_mbps: (large.ops * o.large) as f64 / large.seconds / (1 << 20) as f64,
            large_latency_us: LatencySummary::from_histogram(&large.hist),
            large_histogram: encode_histogram(&large.hist),
        });
    }
    Ok(Calibration {
        format: 1,
        kind: "calibrate".into(),
        status,
        path: o.path.display().to_string(),
        device_kind: if is_block {
            "block device".into()
        } else {
            "file".into()
        },
        size_bytes: size,
        block_bytes: o.block,
        large_bytes: o.large,
        engine: o.engine,
        direct_io: true,
        write_pct: o.write_pct,
        seconds_per_point: o.duration.as_secs_f64(),
        points,
        started: Some(started),
        finished: Some(chrono::Utc::now()),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string()),
        dbio_version: Some(env!("CARGO_PKG_VERSION").to_string()),
    })
}

#[cfg(test)]
pub(crate) use tests::disk_tempdir;

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary folder on a disk (O_DIRECT needs one; /tmp may be a tmpfs), removed when
    /// dropped: unit tests leave nothing in the source tree.
    pub(crate) fn disk_tempdir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("dbio-cal-unit-")
            .tempdir_in("/var/tmp")
            .unwrap()
    }

    fn opts(path: PathBuf) -> CalibrateOptions {
        CalibrateOptions {
            path,
            size: Some(64 << 20),
            create: true,
            block: 8192,
            large: 1 << 20,
            levels: vec![1, 2],
            duration: Duration::from_millis(300),
            write_pct: 0,
            destroy_data: false,
            engine: Engine::Psync,
            seed: 1,
        }
    }

    #[test]
    fn both_engines_measure_a_file() {
        let dir = disk_tempdir();
        let mut o = opts(dir.path().join("f"));
        o.size = Some(32 << 20);
        for engine in [Engine::Psync, Engine::IoUring] {
            o.engine = engine;
            let c = match calibrate(&o, &|_| {}, &|| false) {
                Ok(c) => c,
                Err(e)
                    if engine == Engine::IoUring
                        && e.to_string().contains("io_uring is not available") =>
                {
                    continue;
                }
                Err(e) => panic!("{engine:?}: {e}"),
            };
            o.create = false;
            for p in &c.points {
                assert!(
                    p.small_iops > 0.0 && p.large_mbps > 0.0,
                    "{engine:?}: {p:?}"
                );
            }
        }
    }

    #[test]
    fn bad_options_are_usage_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path().join("f"));
        o.block = 1000;
        assert_eq!(
            calibrate(&o, &|_| {}, &|| false).unwrap_err().kind(),
            dbio_core::ErrorKind::Usage
        );
        let mut o = opts(dir.path().join("f"));
        o.levels = vec![];
        assert!(
            calibrate(&o, &|_| {}, &|| false)
                .unwrap_err()
                .to_string()
                .contains("--levels")
        );
        let mut o = opts(dir.path().join("missing"));
        o.create = false;
        assert!(
            calibrate(&o, &|_| {}, &|| false)
                .unwrap_err()
                .to_string()
                .contains("--create")
        );
    }
}
