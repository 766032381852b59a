//! What a run measured: its status, each session's counts, errors and histograms, and the
//! merged result the driver hands back.

use std::time::Instant;

use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::session::SessionSpec;
use super::timeseries::IntervalRow;
use crate::stats::new_histogram;
use crate::workload::OpKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Ok,
    Failed,
    Interrupted,
}

impl RunStatus {
    /// The name result.json uses: `ok`, `failed`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// Why a session stopped, as result.json names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndedBy {
    /// The window ended (its time, or its operations).
    Window,
    /// The user stopped the run.
    Interrupted,
    /// Another session's error stopped the run.
    Aborted,
    /// Its own error stopped it.
    Error,
    /// It did not answer within the grace once the run was ending.
    Lost,
}

impl EndedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Window => "window",
            EndedBy::Interrupted => "interrupted",
            EndedBy::Aborted => "aborted",
            EndedBy::Error => "error",
            EndedBy::Lost => "lost",
        }
    }
}

impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session error as the result reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionError {
    /// Seconds after the start of the measured window (negative: during warm-up).
    pub at_s: f64,
    pub kind: OpKind,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionOutcome {
    pub spec: SessionSpec,
    /// First measured operation's start and last one's end; None when it measured nothing.
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    /// Measured operations per kind (read, update), errors excluded.
    pub ops: [u64; 2],
    /// Operations in flight when the window ended (cancelled there, or completed after it),
    /// per kind: not counted anywhere.
    #[serde(default)]
    pub past_window: [u64; 2],
    /// How long the operation in flight when the window ended had been running then, in s
    /// (null when none was): one stalled past [`crate::result::STALL_S`] is flagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight_at_end_s: Option<f64>,
    pub errors: [u64; 2],
    pub rows: [u64; 2],
    pub first_error: Option<SessionError>,
    /// Why the session stopped: `window`, `interrupted`, `aborted`, `error`, or `lost`: it did
    /// not answer within the grace once the run was ending (its connection was shut down;
    /// what it measured before is kept when its thread handed it back).
    pub ended_by: EndedBy,
    #[serde(skip)]
    pub histograms: Option<Box<SessionHistograms>>,
    #[serde(skip)]
    pub(super) last_end_at: Option<Instant>,
    /// When the session's loop returned (its last statement ended or was cancelled).
    #[serde(skip)]
    pub(super) returned_at: Option<Instant>,
}

impl SessionOutcome {
    pub(super) fn new(spec: SessionSpec) -> SessionOutcome {
        SessionOutcome {
            spec,
            start: None,
            end: None,
            ops: [0; 2],
            past_window: [0; 2],
            in_flight_at_end_s: None,
            errors: [0; 2],
            rows: [0; 2],
            first_error: None,
            ended_by: EndedBy::Window,
            histograms: None,
            last_end_at: None,
            returned_at: None,
        }
    }
}

/// A session's latency histograms, one per operation kind, allocated on the first operation
/// of that kind (a reader that never updates carries one) and counting in u32 (a session
/// records far fewer than 4 billion operations per bucket): half the memory of u64 counts,
/// which matters at hundreds of sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionHistograms {
    pub(super) kinds: [Option<Histogram<u32>>; 2],
    /// Open loop: each start's lag behind its intended start (µs).
    pub(super) lag: Option<Histogram<u32>>,
}

impl SessionHistograms {
    /// The server engine's power-of-two latency buckets (bucket `i`: `[2^i, 2^(i+1))` µs),
    /// each recorded at its upper bound `2^(i+1) - 1` µs: percentiles read from them are
    /// upper bounds, within a factor of two.
    pub(super) fn from_buckets(buckets: &[Vec<u64>; 2]) -> SessionHistograms {
        let mut out = SessionHistograms::default();
        for (kind, b) in buckets.iter().enumerate() {
            for (i, &n) in b.iter().enumerate().filter(|(_, n)| **n > 0) {
                let upper = ((1u64 << (i + 1).min(40)) - 1).max(1);
                crate::stats::record_session(
                    out.kinds[kind].get_or_insert_with(crate::stats::new_session_histogram),
                    upper,
                    u32::try_from(n).unwrap_or(u32::MAX),
                );
            }
        }
        out
    }

    #[inline]
    pub(super) fn record(&mut self, kind: usize, value_us: u64) {
        crate::stats::record_session(
            self.kinds[kind].get_or_insert_with(crate::stats::new_session_histogram),
            value_us,
            1,
        );
    }

    #[inline]
    pub(super) fn record_lag(&mut self, value_us: u64) {
        crate::stats::record_session(
            self.lag
                .get_or_insert_with(crate::stats::new_session_histogram),
            value_us,
            1,
        );
    }

    /// Adds every recorded value to the run's u64 histograms (bucket by bucket, so nothing is
    /// lost: both have the same layout).
    pub(super) fn merge_into(&self, into: &mut [Histogram<u64>; 2]) {
        for (h, target) in self.kinds.iter().zip(into.iter_mut()) {
            if let Some(h) = h {
                add_to(h, target);
            }
        }
    }
}

/// Adds a session's u32 histogram into a run's u64 one, bucket by bucket.
pub(super) fn add_to(h: &Histogram<u32>, target: &mut Histogram<u64>) {
    for v in h.iter_recorded() {
        target.saturating_record_n(v.value_iterated_to(), v.count_at_value() as u64);
    }
}

/// What an open loop measured besides its latency (which counts from the intended starts).
#[derive(Debug, Clone)]
pub struct OpenLoopOutcome {
    pub plan: super::ArrivalPlan,
    /// Intended starts inside the window.
    pub scheduled: u64,
    /// Of them, not started when the window ended: never taken by a free session, or taken
    /// too late.
    pub missed_starts: u64,
    /// Each start's lag behind its intended start (µs).
    pub lag: Histogram<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    pub user_s: f64,
    pub system_s: f64,
}

pub struct DriveOutcome {
    pub status: RunStatus,
    pub error: Option<String>,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// The client's window: operations counted are those that completed inside it.
    pub measured_s: f64,
    /// From the window's start until the last session had stopped: the interval the
    /// database's counters cover (the "after" snapshot is taken then), at least `measured_s`.
    pub db_window_s: f64,
    pub warmup_s: f64,
    pub sessions: Vec<SessionOutcome>,
    /// Merged over sessions: read, update.
    pub histograms: [Histogram<u64>; 2],
    /// Merged over each target's sessions (`spec.target`), in target order; empty for a run
    /// over one target.
    pub by_target: Vec<[Histogram<u64>; 2]>,
    pub timeseries: Vec<IntervalRow>,
    /// This process's CPU during the measured window (all threads).
    pub client_cpu: Option<CpuUsage>,
    /// Sessions that did not answer within the grace (`ended_by: lost`).
    pub sessions_lost: u32,
    /// How the wait for steady state before the window ended (`run.steady`).
    pub steady: Option<super::Steadiness>,
    /// How preconditioning ended (`run.precondition`).
    pub precondition: Option<super::Steadiness>,
    /// The open loop's schedule (`run.rate`).
    pub open_loop: Option<OpenLoopOutcome>,
    /// The client loop's session engine; None for the server loop.
    pub session_engine: Option<super::EngineChoice>,
}

/// The run's read and update histograms: every session's, merged, and each target's
/// sessions' (empty for one target); sessions in index order.
pub(super) type Merged = ([Histogram<u64>; 2], Vec<[Histogram<u64>; 2]>);

pub(super) fn merge_histograms(outcomes: &mut [SessionOutcome]) -> Merged {
    let mut histograms = [new_histogram(), new_histogram()];
    let mut by_target: Vec<[Histogram<u64>; 2]> = Vec::new();
    for o in outcomes.iter_mut() {
        if let Some(h) = o.histograms.take() {
            h.merge_into(&mut histograms);
            if let Some(t) = o.spec.target {
                let t = t as usize;
                while by_target.len() <= t {
                    by_target.push([new_histogram(), new_histogram()]);
                }
                h.merge_into(&mut by_target[t]);
            }
        }
    }
    outcomes.sort_by_key(|o| o.spec.index);
    (histograms, by_target)
}
