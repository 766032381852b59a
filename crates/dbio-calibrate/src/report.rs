//! The calibration's text and CSV files: Orion's summary lines and one CSV per figure.

use crate::model::Calibration;

impl Calibration {
    /// Orion's summary lines.
    pub fn summary(&self) -> String {
        let mut o = format!(
            "dbio calibrate {} ({}, {} MiB used), engine {}, O_DIRECT, {:.1} s per point, small {} KiB{}, large {} KiB\n",
            self.path,
            self.device_kind,
            self.size_bytes >> 20,
            self.engine.as_str(),
            self.seconds_per_point,
            self.block_bytes >> 10,
            if self.write_pct > 0 {
                format!(" ({}% writes)", self.write_pct)
            } else {
                String::new()
            },
            self.large_bytes >> 10
        );
        if self.status == crate::model::CalibrationStatus::Interrupted {
            o.push_str(&format!(
                "INTERRUPTED: {} level(s) measured before the stop ({}); the level in progress was dropped\n",
                self.points.len(),
                self.points
                    .iter()
                    .map(|p| p.level.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(best) = self
            .points
            .iter()
            .max_by(|a, b| a.small_iops.total_cmp(&b.small_iops))
        {
            o.push_str(&format!(
                "Maximum Small IOPS={:.0} @ Small={}\n",
                best.small_iops, best.level
            ));
        }
        if let Some(min) = self
            .points
            .iter()
            .filter_map(|p| p.small_latency_us.map(|l| (p.level, l.mean)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        {
            o.push_str(&format!(
                "Minimum Small Latency={:.2} us @ Small={}\n",
                min.1, min.0
            ));
        }
        if let Some(best) = self
            .points
            .iter()
            .max_by(|a, b| a.large_mbps.total_cmp(&b.large_mbps))
        {
            o.push_str(&format!(
                "Maximum Large MBPS={:.2} @ Large={}\n",
                best.large_mbps, best.level
            ));
        }
        o
    }

    pub fn iops_csv(&self) -> String {
        let mut o = String::from("level,small_iops\n");
        for p in &self.points {
            o.push_str(&format!("{},{:.1}\n", p.level, p.small_iops));
        }
        o
    }

    pub fn mbps_csv(&self) -> String {
        let mut o = String::from("level,large_mbps\n");
        for p in &self.points {
            o.push_str(&format!("{},{:.2}\n", p.level, p.large_mbps));
        }
        o
    }

    pub fn lat_csv(&self) -> String {
        let mut o = String::from(
            "level,small_p50_us,small_p90_us,small_p99_us,small_p999_us,small_mean_us\n",
        );
        for p in &self.points {
            if let Some(l) = p.small_latency_us {
                o.push_str(&format!(
                    "{},{},{},{},{},{:.1}\n",
                    p.level, l.p50, l.p90, l.p99, l.p999, l.mean
                ));
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Calibration, Point};
    use dbio_core::stats::LatencySummary;

    #[test]
    fn summary_lines_follow_orion() {
        let c = Calibration::sample(
            "/x",
            vec![
                Point {
                    level: 1,
                    small_iops: 1000.0,
                    small_latency_us: Some(LatencySummary {
                        mean: 990.0,
                        ..LatencySummary::default()
                    }),
                    small_histogram: String::new(),
                    large_mbps: 100.0,
                    large_latency_us: None,
                    large_histogram: String::new(),
                },
                Point {
                    level: 2,
                    small_iops: 1800.0,
                    small_latency_us: Some(LatencySummary {
                        mean: 1100.0,
                        ..LatencySummary::default()
                    }),
                    small_histogram: String::new(),
                    large_mbps: 150.0,
                    large_latency_us: None,
                    large_histogram: String::new(),
                },
            ],
        );
        let s = c.summary();
        assert!(s.contains("Maximum Small IOPS=1800 @ Small=2"), "{s}");
        assert!(
            s.contains("Minimum Small Latency=990.00 us @ Small=1"),
            "{s}"
        );
        assert!(s.contains("Maximum Large MBPS=150.00 @ Large=2"), "{s}");
        assert_eq!(c.at_level(3).map(|p| p.level), Some(2));
        assert_eq!(c.at_level(0), None);
    }
}
