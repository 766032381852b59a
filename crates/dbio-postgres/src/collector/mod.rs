//! The AWR-like collector: one snapshot of the server's cumulative statistics before the
//! window and one after, each in a single transaction with `stats_fetch_consistency =
//! snapshot` (15+), and the deltas turned into figures. The queries depend on the major
//! version (13-18); the formulas follow pg-stats §7.4 and cite the view each comes from.
//!
//! Snapshots are maps of `view.column` to a number, so every figure can name the counter
//! delta it comes from (`DbMetrics::counters`), and a counter that went backwards or a
//! changed `stats_reset` marks the run invalid.

mod metrics;
mod queries;
mod snapshot;
mod window;

pub use metrics::IoTiming;
pub use window::{Collected, CollectorOptions, Scope, WindowCollector};
