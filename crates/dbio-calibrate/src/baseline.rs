//! A calibration as the baseline a run's database reads are put beside (`run.calibration`):
//! core asks it for the device's figures at the run's load ([`DeviceBaseline`]).

use std::path::Path;

use dbio_core::stats::dbstats::{CalibrationCompare, DeviceBaseline};

use crate::{CalibrateError, Calibration};

/// A calibrate.json, read once, and the name it was given by.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The file as `run.calibration` names it.
    pub file: String,
    pub calibration: Calibration,
}

impl Baseline {
    /// Reads `path` (a calibrate.json).
    pub fn read(path: &Path) -> Result<Baseline, CalibrateError> {
        Ok(Baseline {
            file: path.display().to_string(),
            calibration: Calibration::read(path)?,
        })
    }
}

impl DeviceBaseline for Baseline {
    fn compare_at(
        &self,
        sessions: u32,
        db_read_iops: Option<f64>,
        db_latency_us: Option<f64>,
    ) -> Option<CalibrationCompare> {
        let p = self.calibration.at_level(sessions)?;
        let raw_mean = p.small_latency_us.map(|l| l.mean);
        Some(CalibrationCompare {
            file: self.file.clone(),
            level: p.level,
            raw_small_iops: p.small_iops,
            raw_mean_latency_us: raw_mean,
            raw_p99_latency_us: p.small_latency_us.map(|l| l.p99),
            db_read_iops,
            iops_ratio: db_read_iops
                .filter(|_| p.small_iops > 0.0)
                .map(|d| d / p.small_iops),
            latency_ratio: match (db_latency_us, raw_mean) {
                (Some(d), Some(r)) if r > 0.0 => Some(d / r),
                _ => None,
            },
            device: device_number(std::path::Path::new(&self.calibration.path)),
            block_bytes: Some(self.calibration.block_bytes),
            write_pct: Some(self.calibration.write_pct),
        })
    }
}

/// `major:minor` of the device a path is (a block device) or is on (a file), as
/// /proc/self/mountinfo and /proc/diskstats name it; None when the path cannot be read.
fn device_number(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    // Linux's dev_t layout (glibc gnu_dev_major / gnu_dev_minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Some(format!("{major}:{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Point;
    use dbio_core::stats::LatencySummary;

    fn point(level: u32, iops: f64, mean_us: f64) -> Point {
        Point {
            level,
            small_iops: iops,
            small_latency_us: Some(LatencySummary {
                mean: mean_us,
                p99: 3 * mean_us as u64,
                ..LatencySummary::default()
            }),
            small_histogram: String::new(),
            large_mbps: 100.0,
            large_latency_us: None,
            large_histogram: String::new(),
        }
    }

    #[test]
    fn a_run_is_put_beside_the_level_at_or_below_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let b = Baseline {
            file: "cal/calibrate.json".into(),
            // A file on this host's filesystem: its device number is read.
            calibration: Calibration::sample(
                &dir.path().display().to_string(),
                vec![point(1, 1000.0, 1000.0), point(4, 3200.0, 1250.0)],
            ),
        };
        // Through the trait, as core asks it.
        let baseline: &dyn DeviceBaseline = &b;
        let c = baseline
            .compare_at(6, Some(1600.0), Some(2500.0))
            .expect("level 4 is at or below 6 sessions");
        assert_eq!((c.level, c.raw_small_iops), (4, 3200.0));
        assert_eq!(c.iops_ratio, Some(0.5));
        assert_eq!(c.latency_ratio, Some(2.0));
        assert_eq!(c.raw_p99_latency_us, Some(3750));
        assert_eq!(c.file, "cal/calibrate.json");
        assert_eq!((c.block_bytes, c.write_pct), (Some(8192), Some(0)));
        assert!(c.device.is_some_and(|d| d.contains(':')));
        // No database figure: no ratio, never a zero.
        let c = baseline.compare_at(1, None, None).expect("level 1");
        assert_eq!((c.level, c.iops_ratio, c.latency_ratio), (1, None, None));
        // Below the first level there is nothing to compare with.
        assert!(baseline.compare_at(0, Some(1.0), Some(1.0)).is_none());
    }
}
