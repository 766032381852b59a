//! What a calibration measured: one point per load level, and the calibrate.json that holds
//! them (read back by `dbio run --calibration`).

use std::path::Path;

use dbio_core::stats::LatencySummary;
use serde::{Deserialize, Serialize};

use crate::{CalibrateError, Engine};

/// One load level's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub level: u32,
    pub small_iops: f64,
    pub small_latency_us: Option<LatencySummary>,
    /// HDR histogram of the small I/Os' latency in µs (V2 + deflate, base64).
    pub small_histogram: String,
    pub large_mbps: f64,
    pub large_latency_us: Option<LatencySummary>,
    pub large_histogram: String,
}

/// Whether every level asked for was measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalibrationStatus {
    #[default]
    Ok,
    /// Stopped by Ctrl-C (SIGTERM, SIGHUP): `points` holds the levels measured before.
    Interrupted,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: u32,
    /// Always "calibrate".
    pub kind: String,
    /// Files written before status was recorded are complete calibrations.
    #[serde(default)]
    pub status: CalibrationStatus,
    pub path: String,
    pub device_kind: String,
    pub size_bytes: u64,
    pub block_bytes: u64,
    pub large_bytes: u64,
    pub engine: Engine,
    pub direct_io: bool,
    pub write_pct: u32,
    pub seconds_per_point: f64,
    pub points: Vec<Point>,
    /// When the measurement started and ended (UTC); null in files of older dbio versions.
    /// `dbio history` needs them to place the calibration among the nights.
    #[serde(default)]
    pub started: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    pub finished: Option<chrono::DateTime<chrono::Utc>>,
    /// The host that measured, and the dbio version.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub dbio_version: Option<String>,
}

impl Calibration {
    /// A complete 8 kB read-only calibration of a file at `path`, for tests.
    #[cfg(test)]
    pub(crate) fn sample(path: &str, points: Vec<Point>) -> Calibration {
        Calibration {
            format: 1,
            kind: "calibrate".into(),
            status: Default::default(),
            path: path.into(),
            device_kind: "file".into(),
            size_bytes: 1 << 30,
            block_bytes: 8192,
            large_bytes: 1 << 20,
            engine: Engine::Psync,
            direct_io: true,
            write_pct: 0,
            seconds_per_point: 1.0,
            started: None,
            finished: None,
            host: None,
            dbio_version: None,
            points,
        }
    }

    /// The point measured at `level`, or the nearest level below it.
    pub fn at_level(&self, level: u32) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.level <= level)
            .max_by_key(|p| p.level)
    }

    /// A `dbio calibrate` result read back, refused when it is not one or its figures are
    /// not what a calibration produces.
    pub fn read(path: &Path) -> Result<Calibration, CalibrateError> {
        let bad = |message: String| CalibrateError::Calibration {
            path: path.to_path_buf(),
            message,
        };
        let text = dbio_core::input::read_bounded(path, dbio_core::input::DOCUMENT_MAX_BYTES)
            .map_err(|e| bad(e.to_string()))?;
        let c: Calibration = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a dbio calibrate.json ({e})")))?;
        if c.kind != "calibrate" {
            return Err(bad("not a dbio calibrate.json".into()));
        }
        let mut c = c;
        c.check_sane().map_err(bad)?;
        c.path = dbio_core::text::printable(&c.path);
        c.device_kind = dbio_core::text::printable(&c.device_kind);
        Ok(c)
    }

    /// Refuses what no calibration produces: format 0 or a newer one, no points, a level
    /// twice, negative or non-finite figures, an undecodable histogram, or IOPS that its own
    /// histogram does not hold (the I/Os counted over the point's seconds, within 10%: the
    /// measured seconds run a little past the point's duration).
    fn check_sane(&self) -> std::result::Result<(), String> {
        if self.format != 1 {
            return Err(format!(
                "format {} is not one this dbio reads (1)",
                self.format
            ));
        }
        let secs = self.seconds_per_point;
        if !(secs.is_finite() && secs > 0.0) {
            return Err(format!("seconds_per_point = {secs}; must be above 0"));
        }
        if self.points.is_empty() {
            return Err("it holds no measured level".into());
        }
        let mut levels: Vec<u32> = self.points.iter().map(|p| p.level).collect();
        levels.sort_unstable();
        if levels.windows(2).any(|w| w[0] == w[1]) || levels.first() == Some(&0) {
            return Err("a level is 0 or appears twice".into());
        }
        for p in &self.points {
            for (name, v) in [("small_iops", p.small_iops), ("large_mbps", p.large_mbps)] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(format!("level {}: {name} = {v}; never negative", p.level));
                }
            }
            if p.small_histogram.is_empty() {
                continue;
            }
            let h = dbio_core::stats::decode_histogram(&p.small_histogram)
                .map_err(|e| format!("level {}: small_histogram: {e}", p.level))?;
            let counted = h.len() as f64 / secs;
            if (counted - p.small_iops).abs() > 0.1 * counted.max(p.small_iops) + 1.0 {
                return Err(format!(
                    "level {}: small_iops {:.0} but its histogram holds {} I/Os in {secs} s ({counted:.0}/s): the figures were changed",
                    p.level,
                    p.small_iops,
                    h.len()
                ));
            }
        }
        Ok(())
    }
}
