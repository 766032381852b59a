//! The time series and the live progress line: lock-free per-session counters that the
//! coordinator drains every interval.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
}

/// What the live progress line shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub elapsed_s: f64,
    pub ops_per_s: f64,
    pub p99_us: Option<u64>,
    pub errors: u64,
    pub warmup: bool,
}

/// Per-session counters the coordinator drains every interval.
#[derive(Default)]
pub(super) struct Live {
    pub(super) ops: [AtomicU64; 2],
    pub(super) errors: AtomicU64,
    pub(super) latency: LogBuckets,
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
    for l in lives {
        reads += l.ops[0].swap(0, Ordering::Relaxed);
        updates += l.ops[1].swap(0, Ordering::Relaxed);
        errors += l.errors.swap(0, Ordering::Relaxed);
        l.latency.drain_into(counts);
    }
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
        };
        *self = ProgressAcc {
            counts: vec![0; self.counts.len()],
            ..ProgressAcc::default()
        };
        p
    }
}
