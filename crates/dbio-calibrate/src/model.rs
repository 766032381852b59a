//! What a calibration measured: one point per load level, and the calibrate.json that holds
//! them (read back by `dbio run --calibration`).

use std::path::Path;

use dbio_core::stats::LatencySummary;
use serde::{Deserialize, Serialize};

use crate::Engine;

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub format: u32,
    /// Always "calibrate".
    pub kind: String,
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
    /// The point measured at `level`, or the nearest level below it.
    pub fn at_level(&self, level: u32) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.level <= level)
            .max_by_key(|p| p.level)
    }

    pub fn read(path: &Path) -> std::result::Result<Calibration, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("calibration {}: cannot read it: {e}", path.display()))?;
        let c: Calibration = serde_json::from_str(&text).map_err(|e| {
            format!(
                "calibration {}: not a dbio calibrate.json ({e})",
                path.display()
            )
        })?;
        if c.kind != "calibrate" {
            return Err(format!(
                "calibration {}: not a dbio calibrate.json",
                path.display()
            ));
        }
        Ok(c)
    }
}
