//! `history:` in the config: how `dbio history check` decides, for every figure and per
//! figure. Here, not in `history`, so that the config depends on no module that reads results.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;

/// The figures history tracks, by the id `--metric` and the store's columns use.
pub const METRIC_IDS: [&str; 6] = [
    "db_read_iops",
    "device_read_iops",
    "client_ops_per_s",
    "client_read_p99_us",
    "db_avg_read_latency_us",
    "device_read_latency_us",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Largest p-value of the gate: the last segment against the segment before the
    /// regression (Student's t), and the first-night test of the newest run or two against
    /// the runs before them (one-sided).
    pub alpha: f64,
    /// Largest p-value of a change point in the search: the permutation test of E-divisive
    /// means and the t-test that re-validates each change point against its neighbours.
    pub change_point_alpha: f64,
    /// Smallest relative change of the mean that counts, in %.
    pub min_magnitude_pct: f64,
    /// Runs per analysis window (windows overlap by half; the last ends at the newest run).
    pub window: usize,
    /// Shuffles of the permutation test.
    pub permutations: usize,
    /// A recovery stays shown as `recovered` for this many runs.
    pub recovered_runs: usize,
    /// Gate on runs whose reads mostly did not reach storage (page-cache runs).
    pub allow_cache: bool,
    /// Fail the check on platform (calibration canary) changes and on database changes that
    /// coincide with one.
    pub gate_platform: bool,
    /// Per figure (`client_read_p99_us: {alpha: 0.001, min_magnitude_pct: 20}`): overrides of
    /// alpha, change_point_alpha and min_magnitude_pct.
    pub metrics: BTreeMap<String, MetricThresholds>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricThresholds {
    pub alpha: Option<f64>,
    pub change_point_alpha: Option<f64>,
    pub min_magnitude_pct: Option<f64>,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            alpha: 0.0005,
            change_point_alpha: 0.01,
            min_magnitude_pct: 3.0,
            window: 30,
            permutations: 199,
            recovered_runs: 5,
            allow_cache: false,
            gate_platform: false,
            metrics: BTreeMap::new(),
        }
    }
}

fn check_p(key: &str, p: f64) -> Result<(), CoreError> {
    if p > 0.0 && p < 1.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(
            key,
            format!("{p}: give a p-value between 0 and 1, e.g. 0.01"),
        ))
    }
}

fn check_pct(key: &str, v: f64) -> Result<(), CoreError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(CoreError::invalid(
            key,
            format!("{v}: give a percentage of 0 or more"),
        ))
    }
}

impl HistoryConfig {
    pub fn validate(&self) -> Result<(), CoreError> {
        check_p("history.alpha", self.alpha)?;
        check_p("history.change_point_alpha", self.change_point_alpha)?;
        check_pct("history.min_magnitude_pct", self.min_magnitude_pct)?;
        if self.window < 4 {
            return Err(CoreError::invalid("history.window", "needs 4 or more runs"));
        }
        if self.permutations < 19 {
            return Err(CoreError::invalid(
                "history.permutations",
                "needs 19 or more shuffles",
            ));
        }
        for (id, t) in &self.metrics {
            if !METRIC_IDS.contains(&id.as_str()) {
                return Err(CoreError::invalid(
                    "history.metrics",
                    format!(
                        "`{id}` is not a tracked figure; use {}",
                        METRIC_IDS.join(", ")
                    ),
                ));
            }
            if let Some(p) = t.alpha {
                check_p(&format!("history.metrics.{id}.alpha"), p)?;
            }
            if let Some(p) = t.change_point_alpha {
                check_p(&format!("history.metrics.{id}.change_point_alpha"), p)?;
            }
            if let Some(v) = t.min_magnitude_pct {
                check_pct(&format!("history.metrics.{id}.min_magnitude_pct"), v)?;
            }
        }
        Ok(())
    }
}
