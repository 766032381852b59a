//! The time series and the live progress line: lock-free per-session counters that the
//! coordinator drains every interval.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::coordinator::Timeline;
use crate::stats::{LogBuckets, bucket_quantile};

/// One interval of the time series (a live-progress line aggregates several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// End of the interval, seconds after the window's start.
    pub t_s: f64,
    pub seconds: f64,
    pub reads: u64,
    pub updates: u64,
    pub errors: u64,
    pub ops_per_s: f64,
    /// From log buckets: upper bound of the bucket holding the percentile (within 12.5%).
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    /// Mean latency of the interval's operations, µs (what `lat_slope` watches); null when
    /// none ended in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_us: Option<f64>,
    /// Open loop (`run.rate`): mean and largest lag of the interval's starts behind their
    /// intended starts, µs; a lag that grows interval after interval is a schedule the
    /// system cannot keep. Null in a closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_mean_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_max_us: Option<u64>,
}

/// What the live progress line shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub elapsed_s: f64,
    pub ops_per_s: f64,
    pub p99_us: Option<u64>,
    pub errors: u64,
    pub warmup: bool,
    /// Before the window: what it waits for (`steady state iops_slope<=2%:10s: slope 3.1%/s`).
    pub waiting: Option<String>,
}

/// Per-session counters the coordinator drains every interval.
#[derive(Default)]
pub(super) struct Live {
    pub(super) ops: [AtomicU64; 2],
    pub(super) errors: AtomicU64,
    pub(super) latency: LogBuckets,
    /// Sum of the latencies recorded (µs), for the interval's mean.
    pub(super) latency_sum_us: AtomicU64,
    /// Open loop: each start's lag behind its intended start, µs: sum, count and largest.
    pub(super) lag_sum_us: AtomicU64,
    pub(super) lag_n: AtomicU64,
    pub(super) lag_max_us: AtomicU64,
    /// An operation of the session is on the wire: what the window's end cancels.
    pub(super) in_flight: AtomicBool,
}

impl Live {
    /// One operation that ended, `us` after it started (or was meant to).
    #[inline]
    pub(super) fn record(&self, k: usize, us: u64) {
        self.ops[k].fetch_add(1, Ordering::Relaxed);
        self.latency.record(us);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// An open loop's start, `lag_us` behind its intended start.
    #[inline]
    pub(super) fn record_lag(&self, lag_us: u64) {
        self.lag_sum_us.fetch_add(lag_us, Ordering::Relaxed);
        self.lag_n.fetch_add(1, Ordering::Relaxed);
        self.lag_max_us.fetch_max(lag_us, Ordering::Relaxed);
    }
}

pub(super) fn drain(
    lives: &[Arc<Live>],
    counts: &mut [u64],
    timeline: Timeline,
    from: Instant,
    to: Instant,
) -> IntervalRow {
    counts.iter_mut().for_each(|c| *c = 0);
    let (mut reads, mut updates, mut errors) = (0, 0, 0);
    let (mut lat_sum, mut lag_sum, mut lag_n, mut lag_max) = (0u64, 0u64, 0u64, 0u64);
    for l in lives {
        reads += l.ops[0].swap(0, Ordering::Relaxed);
        updates += l.ops[1].swap(0, Ordering::Relaxed);
        errors += l.errors.swap(0, Ordering::Relaxed);
        lat_sum += l.latency_sum_us.swap(0, Ordering::Relaxed);
        lag_sum += l.lag_sum_us.swap(0, Ordering::Relaxed);
        lag_n += l.lag_n.swap(0, Ordering::Relaxed);
        lag_max = lag_max.max(l.lag_max_us.swap(0, Ordering::Relaxed));
        l.latency.drain_into(counts);
    }
    let done = reads + updates;
    let seconds = (to - from).as_secs_f64();
    IntervalRow {
        t_s: timeline.offset_s(to),
        seconds,
        reads,
        updates,
        errors,
        ops_per_s: if seconds > 0.0 {
            (reads + updates) as f64 / seconds
        } else {
            0.0
        },
        p50_us: bucket_quantile(counts, 0.50),
        p99_us: bucket_quantile(counts, 0.99),
        mean_us: (done > 0).then(|| lat_sum as f64 / done as f64),
        lag_mean_us: (lag_n > 0).then(|| lag_sum as f64 / lag_n as f64),
        lag_max_us: (lag_n > 0).then_some(lag_max),
    }
}

/// Intervals since the last progress line.
#[derive(Default)]
pub(super) struct ProgressAcc {
    pub(super) ops: u64,
    pub(super) errors: u64,
    pub(super) seconds: f64,
    pub(super) counts: Vec<u64>,
}

impl ProgressAcc {
    pub(super) fn add(&mut self, row: &IntervalRow, counts: &[u64]) {
        self.ops += row.reads + row.updates;
        self.errors += row.errors;
        self.seconds += row.seconds;
        if self.counts.len() != counts.len() {
            self.counts = vec![0; counts.len()];
        }
        self.counts
            .iter_mut()
            .zip(counts)
            .for_each(|(a, b)| *a += b);
    }

    pub(super) fn take(&mut self, elapsed_s: f64) -> Progress {
        let p = Progress {
            elapsed_s,
            ops_per_s: if self.seconds > 0.0 {
                self.ops as f64 / self.seconds
            } else {
                0.0
            },
            p99_us: bucket_quantile(&self.counts, 0.99),
            errors: self.errors,
            warmup: false,
            waiting: None,
        };
        *self = ProgressAcc {
            counts: vec![0; self.counts.len()],
            ..ProgressAcc::default()
        };
        p
    }
}
