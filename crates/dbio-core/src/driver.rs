//! The session driver: owns timing. Sessions arrive connected and prepared; one release starts
//! them together; the measured window is exactly `run_time` after an optional warm-up, or
//! `work_loop` measured operations per session. Each session runs on its own OS thread and
//! blocks on its own connection, so an operation costs one write and one read on the socket
//! and nothing else: no event loop, no task hand-off between the timer and the round trip.
//! Each operation is timed around that round trip and recorded into the session's own HDR
//! histogram (no lock, merged at the end) and into lock-free interval counters that the
//! coordinator (an async task) drains for the time series and the progress line. Ctrl-C
//! (SIGINT, SIGTERM, SIGHUP) or a fatal error stops every session and cancels its statement;
//! a session that does not answer within a bounded grace (the server stopped answering) is
//! cut off and counted lost, so the run always ends and its result is always written.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc, watch};

use crate::config::OnError;
use crate::interrupt::Interrupts;
use crate::stats::{LOG_BUCKETS, LogBuckets, bucket_quantile, new_histogram};
use crate::workload::{Op, OpKind, OpStream, SessionKind, Workload, session_seed};

/// An operation's failure as the backend reports it.
#[derive(Debug, Clone)]
pub struct OpError {
    /// The database's own message, with SQLSTATE where there is one.
    pub message: String,
    /// The connection is gone: this session cannot go on.
    pub fatal: bool,
}

/// Cancels the statement a session is running, from another thread; blocking, best effort.
pub type Canceller = Arc<dyn Fn() + Send + Sync>;

/// One benchmark session: one connection, its statements prepared, for the whole run. Its
/// calls block; the driver gives each session its own thread.
pub trait Session: Send + 'static {
    /// Reads keys `lo..=hi` through the index; returns the rows seen.
    fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError>;
    /// Updates keys `lo..=hi` to `value`; returns the rows changed.
    fn update(&mut self, lo: i64, hi: i64, value: &str) -> Result<u64, OpError>;
    fn canceller(&self) -> Canceller;
    /// Shuts the session's connection down from another thread, so a call blocked on a
    /// server that no longer answers returns at once and the thread hands back what it
    /// measured; None when the backend cannot (the thread is then abandoned).
    fn closer(&self) -> Option<Canceller> {
        None
    }
    /// Makes the database publish this session's pending statistics now (PostgreSQL 15+:
    /// pg_stat_force_next_flush()), before a snapshot is taken; best effort.
    fn flush_stats(&mut self);
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// 0-based position among all sessions; seeds its PRNG.
    pub index: u32,
    /// `dbio-reader-<n>` / `dbio-writer-<n>`; also the connection's application_name.
    pub name: String,
    pub kind: SessionKind,
    pub schema: String,
}

/// Sessions for R readers and W writers over `schemas` schemas: readers first, then writers,
/// mapped to schemas round-robin, or all to the first schema with `hot_schema`.
pub fn session_specs(
    readers: u32,
    writers: u32,
    schema_names: &[String],
    hot_schema: bool,
) -> Vec<SessionSpec> {
    let kinds = (1..=readers)
        .map(|n| (SessionKind::Reader, n))
        .chain((1..=writers).map(|n| (SessionKind::Writer, n)));
    kinds
        .enumerate()
        .map(|(i, (kind, n))| {
            let schema = if hot_schema || schema_names.is_empty() {
                schema_names.first().cloned().unwrap_or_default()
            } else {
                schema_names[i % schema_names.len()].clone()
            };
            SessionSpec {
                index: i as u32,
                name: match kind {
                    SessionKind::Reader => format!("dbio-reader-{n}"),
                    SessionKind::Writer => format!("dbio-writer-{n}"),
                },
                kind,
                schema,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Measure for this long.
    Time(Duration),
    /// Measure this many operations per session.
    Loops(u64),
}

#[derive(Debug, Clone)]
pub struct DriveConfig {
    pub workload: Workload,
    pub window: WindowSpec,
    pub warmup: Duration,
    pub interval: Duration,
    pub progress: Duration,
    pub on_error: OnError,
    pub seed: u64,
    /// How long sessions get to answer once the run is ending (cancel requests sent, or the
    /// window over) before their connections are shut down and they are counted lost.
    pub grace: Duration,
}

/// The grace a run's sessions get by default: a cancelled statement returns in
/// milliseconds, so seconds only pass when the server has stopped answering.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// How long the driver still waits for a session thread after shutting its connection down
/// (or after a second interrupt) before it abandons the thread.
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// How long past the window's end a session's last operation (a lock wait, a server-engine
/// loop finishing) may take to return by itself before the grace starts: a healthy server
/// is not cut off at the window's end, a stopped one still ends the run.
const END_SLACK: Duration = Duration::from_secs(30);

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
    pub errors: [u64; 2],
    pub rows: [u64; 2],
    pub first_error: Option<SessionError>,
    /// Why the session stopped: `window`, `interrupted`, `aborted`, `error`, or `lost`: it did
    /// not answer within the grace once the run was ending (its connection was shut down;
    /// what it measured before is kept when its thread handed it back).
    pub ended_by: String,
    #[serde(skip)]
    pub histograms: Option<Box<SessionHistograms>>,
    #[serde(skip)]
    last_end_at: Option<Instant>,
}

/// A session's latency histograms, one per operation kind, allocated on the first operation
/// of that kind (a reader that never updates carries one) and counting in u32 (a session
/// records far fewer than 4 billion operations per bucket): half the memory of u64 counts,
/// which matters at hundreds of sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionHistograms {
    kinds: [Option<Histogram<u32>>; 2],
}

impl SessionHistograms {
    /// The server engine's power-of-two latency buckets (bucket `i`: `[2^i, 2^(i+1))` µs),
    /// each recorded at its upper bound `2^(i+1) - 1` µs: percentiles read from them are
    /// upper bounds, within a factor of two.
    fn from_buckets(buckets: &[Vec<u64>; 2]) -> SessionHistograms {
        let mut out = SessionHistograms::default();
        for (kind, b) in buckets.iter().enumerate() {
            for (i, &n) in b.iter().enumerate().filter(|(_, n)| **n > 0) {
                let upper = ((1u64 << (i + 1).min(40)) - 1).max(1);
                out.kinds[kind]
                    .get_or_insert_with(crate::stats::new_session_histogram)
                    .saturating_record_n(upper, u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        out
    }

    #[inline]
    fn record(&mut self, kind: usize, value_us: u64) {
        self.kinds[kind]
            .get_or_insert_with(crate::stats::new_session_histogram)
            .saturating_record(value_us);
    }

    /// Adds every recorded value to the run's u64 histograms (bucket by bucket, so nothing is
    /// lost: both have the same layout).
    fn merge_into(&self, into: &mut [Histogram<u64>; 2]) {
        for (h, target) in self.kinds.iter().zip(into.iter_mut()) {
            let Some(h) = h else { continue };
            for v in h.iter_recorded() {
                target.saturating_record_n(v.value_iterated_to(), v.count_at_value() as u64);
            }
        }
    }
}

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
    pub measured_s: f64,
    pub warmup_s: f64,
    pub sessions: Vec<SessionOutcome>,
    /// Merged over sessions: read, update.
    pub histograms: [Histogram<u64>; 2],
    pub timeseries: Vec<IntervalRow>,
    /// This process's CPU during the measured window (all threads).
    pub client_cpu: Option<CpuUsage>,
    /// Sessions that did not answer within the grace (`ended_by: lost`).
    pub sessions_lost: u32,
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

/// Shared between the coordinator and the sessions.
struct Shared {
    stop: AtomicBool,
    stop_tx: watch::Sender<bool>,
    /// (status, message) of whoever stopped the run first.
    reason: Mutex<Option<(RunStatus, String)>>,
    /// What session threads wait on: the release, the window, the stop.
    board: Mutex<Board>,
    board_cv: Condvar,
}

#[derive(Default)]
struct Board {
    go: Option<Instant>,
    window: Option<Timeline>,
    stopped: bool,
}

impl Shared {
    fn new() -> Arc<Shared> {
        let (stop_tx, _) = watch::channel(false);
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            stop_tx,
            reason: Mutex::new(None),
            board: Mutex::new(Board::default()),
            board_cv: Condvar::new(),
        })
    }

    /// How the run ended: the first stop's status and message, or ok.
    fn status(&self) -> (RunStatus, Option<String>) {
        match self.reason.lock().ok().and_then(|r| r.clone()) {
            Some((status, message)) => (status, Some(message)),
            None => (RunStatus::Ok, None),
        }
    }

    fn stop(&self, status: RunStatus, message: String) {
        if let Ok(mut r) = self.reason.lock()
            && r.is_none()
        {
            *r = Some((status, message));
        }
        self.stop.store(true, Ordering::Release);
        self.stop_tx.send_replace(true);
        self.post(|b| b.stopped = true);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Changes the board and wakes every waiting session.
    fn post(&self, f: impl FnOnce(&mut Board)) {
        if let Ok(mut b) = self.board.lock() {
            f(&mut b);
        }
        self.board_cv.notify_all();
    }

    /// Blocks until `pick` finds something on the board or the run stops (then None).
    fn wait_for<T>(&self, pick: impl Fn(&Board) -> Option<T>) -> Option<T> {
        let mut b = self.board.lock().ok()?;
        loop {
            if let Some(v) = pick(&b) {
                return Some(v);
            }
            if b.stopped {
                return None;
            }
            b = self.board_cv.wait(b).ok()?;
        }
    }

    /// Sleeps for `pause` unless the run stops first; false when it stopped.
    fn pause(&self, pause: Duration) -> bool {
        let Ok(b) = self.board.lock() else {
            return false;
        };
        match self.board_cv.wait_timeout_while(b, pause, |b| !b.stopped) {
            Ok((b, _)) => !b.stopped,
            Err(_) => false,
        }
    }
}

/// Per-session counters the coordinator drains every interval.
#[derive(Default)]
struct Live {
    ops: [AtomicU64; 2],
    errors: AtomicU64,
    latency: LogBuckets,
}

#[derive(Clone, Copy)]
struct Timeline {
    measure_from: Instant,
    end: Option<Instant>,
    loops: Option<u64>,
    /// Wall-clock time of `measure_from`, to stamp results in UTC.
    wall_at_measure: SystemTime,
}

impl Timeline {
    /// A window that never opened (the run stopped before it).
    fn empty() -> Timeline {
        Timeline {
            measure_from: Instant::now(),
            end: Some(Instant::now()),
            loops: None,
            wall_at_measure: SystemTime::now(),
        }
    }

    fn utc(&self, at: Instant) -> DateTime<Utc> {
        let t = if at >= self.measure_from {
            self.wall_at_measure + (at - self.measure_from)
        } else {
            self.wall_at_measure - (self.measure_from - at)
        };
        DateTime::<Utc>::from(t)
    }

    fn offset_s(&self, at: Instant) -> f64 {
        if at >= self.measure_from {
            (at - self.measure_from).as_secs_f64()
        } else {
            -(self.measure_from - at).as_secs_f64()
        }
    }
}

/// Runs the sessions and returns what was measured. The first of `interrupts` (Ctrl-C,
/// SIGTERM, SIGHUP) stops the run, the second ends the wait for its sessions at once;
/// `on_progress` is called every `progress` period;
/// `before_window` runs once every session has finished its warm-up and flushed its
/// statistics, just before the window opens (the collector's "before" snapshot); an error
/// from it fails the run before anything is measured.
pub async fn drive<S, H, HF>(
    sessions: Vec<(SessionSpec, S)>,
    cfg: &DriveConfig,
    interrupts: Interrupts,
    mut on_progress: impl FnMut(&Progress),
    before_window: H,
) -> DriveOutcome
where
    S: Session,
    H: FnOnce() -> HF,
    HF: Future<Output = Result<(), String>>,
{
    let shared = Shared::new();
    let arrivals = Arc::new(Arrivals::default());
    let mut cancellers = Vec::new();
    let mut lives = Vec::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<SessionOutcome>();
    let mut sessions_n = 0;
    let mut stragglers = Stragglers::new(cfg.grace);
    for (spec, session) in sessions {
        cancellers.push(session.canceller());
        let closer = session.closer();
        let live = Arc::new(Live::default());
        lives.push(Arc::clone(&live));
        let ops = OpStream::new(
            cfg.workload.clone(),
            spec.kind,
            session_seed(cfg.seed, spec.index),
        );
        let ctx = SessionCtx {
            shared: Arc::clone(&shared),
            live,
            arrivals: Arc::clone(&arrivals),
            warmup: cfg.warmup,
            on_error: cfg.on_error,
        };
        let tx = done_tx.clone();
        let name = spec.name.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .stack_size(SESSION_STACK)
            .spawn({
                let spec = spec.clone();
                move || {
                    let outcome = session_loop(session, spec, ops, ctx);
                    let _ = tx.send(outcome);
                }
            });
        match spawned {
            Ok(_) => {
                sessions_n += 1;
                stragglers.add(spec, closer);
            }
            Err(e) => {
                // Counted as arrived so the warm-up barrier does not wait for it.
                drop(Arrival(&arrivals));
                shared.stop(
                    RunStatus::Failed,
                    format!("could not start the thread of {name}: {e}"),
                );
            }
        }
    }
    drop(done_tx);
    let mut stop_rx = shared.stop_tx.subscribe();
    let interrupt = interrupts.clone().reached(1);
    let hurry = interrupts.reached(2);
    tokio::pin!(interrupt, hurry);
    let mut interrupt_done = false;
    let mut hurried = false;
    let mut stopped_at: Option<Instant> = None;
    // Every session is connected and prepared: release them together.
    let released = Instant::now();
    shared.post(|b| b.go = Some(released));
    if !cfg.warmup.is_zero() {
        on_progress(&Progress {
            elapsed_s: 0.0,
            ops_per_s: 0.0,
            p99_us: None,
            errors: 0,
            warmup: true,
        });
        // Every session ends its warm-up and flushes its statistics before the snapshot.
        while arrivals.count.load(Ordering::Acquire) < sessions_n && !shared.stopped() {
            tokio::select! {
                _ = arrivals.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                by = &mut interrupt, if !interrupt_done => {
                    interrupt_done = true;
                    shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
                }
            }
        }
    }
    if !shared.stopped() {
        // The "before" snapshot talks to the server: an interrupt must not wait for it.
        let before = tokio::select! {
            r = before_window() => r,
            by = &mut interrupt, if !interrupt_done => {
                interrupt_done = true;
                Err(format!("interrupted by {by}"))
            }
        };
        if let Err(e) = before {
            let status = if interrupt_done {
                RunStatus::Interrupted
            } else {
                RunStatus::Failed
            };
            shared.stop(status, e);
        }
    }
    if shared.stopped() {
        let now = Instant::now();
        stopped_at = Some(now);
        cancel_all(&cancellers);
        stragglers.restart(now);
    }
    let measure_from = Instant::now();
    let timeline = Timeline {
        measure_from,
        end: match cfg.window {
            WindowSpec::Time(d) => Some(measure_from + d),
            WindowSpec::Loops(_) => None,
        },
        loops: match cfg.window {
            WindowSpec::Loops(n) => Some(n),
            WindowSpec::Time(_) => None,
        },
        wall_at_measure: SystemTime::now(),
    };
    shared.post(|b| b.window = Some(timeline));

    let cpu_start = cpu_now();
    let mut timeseries = Vec::new();
    let mut outcomes = Vec::new();
    let mut counts = vec![0u64; LOG_BUCKETS];
    let mut last_drain = measure_from;
    let mut progress_acc = ProgressAcc::default();
    let mut next_progress = measure_from + cfg.progress;
    let mut next_tick = measure_from + cfg.interval;
    loop {
        tokio::select! {
            done = done_rx.recv() => {
                match done {
                    Some(mut outcome) => {
                        stragglers.arrived(&mut outcome);
                        outcomes.push(outcome);
                    }
                    None => {
                        if outcomes.len() < sessions_n {
                            // A thread that panicked drops its sender without an outcome.
                            shared.stop(
                                RunStatus::Failed,
                                format!("{} session thread(s) ended abnormally", sessions_n - outcomes.len()),
                            );
                        }
                        break;
                    }
                }
            }
            _ = tokio::time::sleep_until(next_tick.into()) => {
                let now = Instant::now();
                if let Some(end) = timeline.end
                    && now >= end
                {
                    stragglers.ending(end + END_SLACK);
                }
                {
                    let row = drain(&lives, &mut counts, timeline, last_drain, now);
                    last_drain = now;
                    next_tick += cfg.interval;
                    progress_acc.add(&row, &counts);
                    timeseries.push(row);
                    if !cfg.progress.is_zero() && now >= next_progress {
                        on_progress(&progress_acc.take(timeline.offset_s(now)));
                        while next_progress <= now {
                            next_progress += cfg.progress;
                        }
                    }
                }
            }
            by = &mut interrupt, if !interrupt_done => {
                interrupt_done = true;
                shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
            }
            by = &mut hurry, if !hurried => {
                hurried = true;
                shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
                stragglers.close_all(Instant::now());
            }
            _ = stop_rx.changed(), if stopped_at.is_none() => {
                if *stop_rx.borrow() {
                    let now = Instant::now();
                    stopped_at = Some(now);
                    cancel_all(&cancellers);
                    stragglers.restart(now);
                }
            }
            _ = sleep_until_opt(stragglers.deadline()) => {
                if stragglers.on_deadline(Instant::now()) {
                    break;
                }
            }
        }
    }
    let sessions_lost = stragglers.finish(&mut outcomes, &shared);
    let end_instant = match (timeline.end, stopped_at) {
        (_, Some(s)) => s,
        (Some(end), None) => end,
        (None, None) => outcomes
            .iter()
            .filter_map(|o| o.last_end_at)
            .max()
            .unwrap_or(measure_from),
    }
    .max(measure_from);
    let client_cpu = cpu_since(cpu_start);
    // The last, partial interval.
    let now = Instant::now();
    if now > last_drain && now >= measure_from {
        let row = drain(&lives, &mut counts, timeline, last_drain, now);
        if row.reads + row.updates + row.errors > 0 {
            timeseries.push(row);
        }
    }

    let histograms = merge_histograms(&mut outcomes);
    let (status, error) = shared.status();
    let measured_s = (end_instant - measure_from).as_secs_f64();
    DriveOutcome {
        status,
        error,
        start: timeline.utc(measure_from),
        end: timeline.utc(end_instant),
        measured_s,
        warmup_s: cfg.warmup.as_secs_f64(),
        sessions: outcomes,
        histograms,
        timeseries,
        client_cpu,
        sessions_lost,
    }
}

/// Sleeps until `at`; never, without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// The sessions the driver still waits for, and the bounded grace they get once the run is
/// ending. A session blocked in a read on a server that stopped answering (its processes
/// stopped, a network partition) would otherwise keep the run, and Ctrl-C, waiting for
/// ever. `grace` after the cancel requests (or `END_SLACK` + `grace` after the window's
/// end, for a session that does not come back by itself) its connection is shut
/// down from here (the backend's closer: shutdown(2) on a duplicate of its socket), which
/// makes the blocked read return at once, so the thread still hands back what it measured.
/// A thread that has not answered `CLOSE_WAIT` later is abandoned (detached) and counted
/// lost with nothing measured. Shutting sockets down, rather than only abandoning threads,
/// keeps the lost sessions' measurements and frees their connections.
struct Stragglers {
    pending: BTreeMap<u32, (SessionSpec, Option<Canceller>)>,
    grace: Duration,
    close_at: Option<Instant>,
    give_up_at: Option<Instant>,
    /// Sessions whose connection was shut down: they did not answer in time.
    closed: BTreeSet<u32>,
}

impl Stragglers {
    fn new(grace: Duration) -> Stragglers {
        Stragglers {
            pending: BTreeMap::new(),
            grace,
            close_at: None,
            give_up_at: None,
            closed: BTreeSet::new(),
        }
    }

    fn add(&mut self, spec: SessionSpec, closer: Option<Canceller>) {
        self.pending.insert(spec.index, (spec, closer));
    }

    /// The window is over and sessions should return by `at`: the grace starts then, unless
    /// a stop started it already.
    fn ending(&mut self, at: Instant) {
        if self.close_at.is_none() {
            self.close_at = Some(at + self.grace);
        }
    }

    /// The run stops at `at` (cancel requests sent): the grace starts now, unless it started
    /// earlier.
    fn restart(&mut self, at: Instant) {
        let close = at + self.grace;
        self.close_at = Some(self.close_at.map_or(close, |c| c.min(close)));
    }

    /// A session handed its outcome back.
    fn arrived(&mut self, outcome: &mut SessionOutcome) {
        self.pending.remove(&outcome.spec.index);
        if self.closed.contains(&outcome.spec.index) {
            outcome.ended_by = "lost".into();
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.give_up_at.or(self.close_at)
    }

    /// The deadline passed: shuts the stragglers' connections down, or (the second time)
    /// gives up on them; true when the driver should stop waiting.
    fn on_deadline(&mut self, now: Instant) -> bool {
        if self.give_up_at.is_some() {
            return true;
        }
        self.close_all(now);
        false
    }

    /// Shuts every pending session's connection down now; the threads get `CLOSE_WAIT`.
    fn close_all(&mut self, now: Instant) {
        for (index, (_, closer)) in &self.pending {
            if let Some(close) = closer {
                close();
            }
            self.closed.insert(*index);
        }
        let give_up = now + CLOSE_WAIT;
        self.give_up_at = Some(self.give_up_at.map_or(give_up, |g| g.min(give_up)));
    }

    /// Adds an outcome for every session that never answered, counts the lost ones and
    /// says so in the run's status: a run that lost sessions is not `ok`.
    fn finish(self, outcomes: &mut Vec<SessionOutcome>, shared: &Shared) -> u32 {
        let grace_s = self.grace.as_secs_f64();
        for (_, (spec, _)) in self.pending {
            let mut o = SessionOutcome::new(spec);
            o.ended_by = "lost".into();
            outcomes.push(o);
        }
        let lost = outcomes.iter().filter(|o| o.ended_by == "lost").count() as u32;
        if lost > 0 {
            let what = format!(
                "{lost} session(s) did not answer within {grace_s} s and were counted lost \
                 (the server stopped answering?)"
            );
            shared.stop(RunStatus::Failed, what.clone());
            if let Ok(mut r) = shared.reason.lock()
                && let Some((_, message)) = r.as_mut()
                && !message.contains(&what)
            {
                message.push_str("; ");
                message.push_str(&what);
            }
        }
        lost
    }
}

fn drain(
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
struct ProgressAcc {
    ops: u64,
    errors: u64,
    seconds: f64,
    counts: Vec<u64>,
}

impl ProgressAcc {
    fn add(&mut self, row: &IntervalRow, counts: &[u64]) {
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

    fn take(&mut self, elapsed_s: f64) -> Progress {
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

/// Stack of a session thread: its loop is shallow; the histograms live on the heap.
const SESSION_STACK: usize = 256 * 1024;

struct SessionCtx {
    shared: Arc<Shared>,
    live: Arc<Live>,
    arrivals: Arc<Arrivals>,
    warmup: Duration,
    on_error: OnError,
}

/// Sessions that finished their warm-up (or ended before the window).
#[derive(Default)]
struct Arrivals {
    count: AtomicUsize,
    notify: Notify,
}

/// Counts the session as arrived when dropped, whatever path it leaves the warm-up by.
struct Arrival<'a>(&'a Arrivals);

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_add(1, Ordering::AcqRel);
        self.0.notify.notify_one();
    }
}

/// Text that differs from every earlier value of the row: SLOB 2.5 writes changing values
/// because Oracle 12.2+ skips redo for same-value updates. ':' never occurs in loaded filler.
fn update_value(session: u32, n: u64, out: &mut String) {
    use std::fmt::Write as _;
    out.clear();
    let _ = write!(out, "upd:{session}:{n}:");
    while out.len() < 120 {
        out.push('u');
    }
}

/// Cancels every statement in flight so sessions return at once.
fn cancel_all(cancellers: &[Canceller]) {
    for c in cancellers {
        let c = Arc::clone(c);
        tokio::task::spawn_blocking(move || c());
    }
}

/// The run's read and update histograms: every session's, merged; sessions in index order.
fn merge_histograms(outcomes: &mut [SessionOutcome]) -> [Histogram<u64>; 2] {
    let mut histograms = [new_histogram(), new_histogram()];
    for o in outcomes.iter_mut() {
        if let Some(h) = o.histograms.take() {
            h.merge_into(&mut histograms);
        }
    }
    outcomes.sort_by_key(|o| o.spec.index);
    histograms
}

/// This process's CPU since `start`.
fn cpu_since(start: Option<CpuUsage>) -> Option<CpuUsage> {
    match (start, cpu_now()) {
        (Some(a), Some(b)) => Some(CpuUsage {
            user_s: b.user_s - a.user_s,
            system_s: b.system_s - a.system_s,
        }),
        _ => None,
    }
}

impl SessionOutcome {
    fn new(spec: SessionSpec) -> SessionOutcome {
        SessionOutcome {
            spec,
            start: None,
            end: None,
            ops: [0; 2],
            errors: [0; 2],
            rows: [0; 2],
            first_error: None,
            ended_by: "window".into(),
            histograms: None,
            last_end_at: None,
        }
    }
}

/// One operation's kind, timing and result.
struct Done {
    kind: OpKind,
    t0: Instant,
    t1: Instant,
    result: Result<u64, OpError>,
}

/// State of one session's operation stream across warm-up and window.
struct Runner<S> {
    session: S,
    spec: SessionSpec,
    ops: OpStream,
    value: String,
    n: u64,
    shared: Arc<Shared>,
}

impl<S: Session> Runner<S> {
    /// Thinks if the op says so, then runs it; `None` when the run stopped meanwhile.
    fn next(&mut self) -> Option<Done> {
        let op: Op = self.ops.next_op();
        self.n += 1;
        if let Some(pause) = op.think
            && !self.shared.pause(pause)
        {
            return None;
        }
        let t0 = Instant::now();
        let result = match op.kind {
            OpKind::Read => self.session.read(op.lo, op.hi),
            OpKind::Update => {
                update_value(self.spec.index, self.n, &mut self.value);
                self.session.update(op.lo, op.hi, &self.value)
            }
        };
        Some(Done {
            kind: op.kind,
            t0,
            t1: Instant::now(),
            result,
        })
    }
}

/// What one session's loop inside the database did (`run.engine: server`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoopCounts {
    /// Operations per kind (read, update).
    pub ops: [u64; 2],
    pub rows: [u64; 2],
    /// Latency per kind in power-of-two buckets: bucket `i` counts operations that took
    /// `[2^i, 2^(i+1))` µs, as the database's own clock measured them.
    pub buckets: [Vec<u64>; 2],
}

/// A session whose whole operation loop runs inside the database, in one call.
pub trait LoopSession: Send + 'static {
    /// Runs the loop for `seconds` and returns its counts; blocks.
    fn run_loop(&mut self, seconds: f64) -> Result<LoopCounts, OpError>;
    fn canceller(&self) -> Canceller;
    /// As [`Session::closer`].
    fn closer(&self) -> Option<Canceller> {
        None
    }
    fn flush_stats(&mut self);
}

/// Runs loop sessions: the "before" snapshot, one release, every session's single call, and
/// the window from the release to the last return. No time series and no live progress: the
/// database reports only at the end.
pub async fn drive_loops<S, H, HF>(
    sessions: Vec<(SessionSpec, S)>,
    run_time: Duration,
    grace: Duration,
    interrupts: Interrupts,
    before_window: H,
) -> DriveOutcome
where
    S: LoopSession,
    H: FnOnce() -> HF,
    HF: Future<Output = Result<(), String>>,
{
    let shared = Shared::new();
    let interrupt = interrupts.clone().reached(1);
    let hurry = interrupts.reached(2);
    tokio::pin!(interrupt, hurry);
    let mut interrupt_done = false;
    let mut hurried = false;
    let before = tokio::select! {
        r = before_window() => r.map_err(|e| (RunStatus::Failed, e)),
        by = &mut interrupt => {
            interrupt_done = true;
            Err((RunStatus::Interrupted, format!("interrupted by {by}")))
        }
    };
    if let Err((status, e)) = before {
        shared.stop(status, e);
    }
    let mut stragglers = Stragglers::new(grace);
    let measure_from = Instant::now();
    let timeline = Timeline {
        measure_from,
        end: Some(measure_from + run_time),
        loops: None,
        wall_at_measure: SystemTime::now(),
    };
    let cpu_start = cpu_now();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<SessionOutcome>();
    let mut cancellers = Vec::new();
    let mut sessions_n = 0;
    if !shared.stopped() {
        for (spec, mut session) in sessions {
            cancellers.push(session.canceller());
            let closer = session.closer();
            let tx = done_tx.clone();
            let sh = Arc::clone(&shared);
            let name = spec.name.clone();
            let thread_spec = spec.clone();
            let spawned = std::thread::Builder::new()
                .name(name.clone())
                .stack_size(SESSION_STACK)
                .spawn(move || {
                    let mut outcome = SessionOutcome::new(thread_spec);
                    if sh.wait_for(|b| b.go).is_some() {
                        let t0 = Instant::now();
                        let r = session.run_loop(run_time.as_secs_f64());
                        let t1 = Instant::now();
                        session.flush_stats();
                        outcome.start = Some(timeline.utc(t0));
                        outcome.end = Some(timeline.utc(t1));
                        outcome.last_end_at = Some(t1);
                        match r {
                            Ok(c) => {
                                outcome.ops = c.ops;
                                outcome.rows = c.rows;
                                outcome.histograms =
                                    Some(Box::new(SessionHistograms::from_buckets(&c.buckets)));
                            }
                            // Cancelled because the run is stopping: the loop's counts are
                            // lost with its call (the database returns them only at the end).
                            Err(_) if sh.stopped() => outcome.ended_by = stop_cause(&sh),
                            Err(e) => {
                                outcome.errors[0] = 1;
                                outcome.ended_by = "error".into();
                                outcome.first_error = Some(SessionError {
                                    at_s: timeline.offset_s(t1),
                                    kind: OpKind::Read,
                                    message: e.message.clone(),
                                });
                                if !sh.stopped() {
                                    sh.stop(
                                        RunStatus::Failed,
                                        format!(
                                            "{} ({}) failed its loop: {}",
                                            outcome.spec.name, outcome.spec.schema, e.message
                                        ),
                                    );
                                }
                            }
                        }
                    } else {
                        outcome.ended_by = stop_cause(&sh);
                    }
                    let _ = tx.send(outcome);
                });
            match spawned {
                Ok(_) => {
                    sessions_n += 1;
                    stragglers.add(spec, closer);
                }
                Err(e) => shared.stop(
                    RunStatus::Failed,
                    format!("could not start the thread of {name}: {e}"),
                ),
            }
        }
    }
    drop(done_tx);
    shared.post(|b| b.go = Some(measure_from));
    // Each loop ends itself at run_time; one that has not returned long after (the server
    // stopped answering) is cut off like a stopped run's sessions.
    stragglers.ending(measure_from + run_time + END_SLACK);
    let mut stop_rx = shared.stop_tx.subscribe();
    let mut stopped_at: Option<Instant> = None;
    let mut outcomes = Vec::new();
    loop {
        tokio::select! {
            done = done_rx.recv() => match done {
                Some(mut o) => {
                    stragglers.arrived(&mut o);
                    outcomes.push(o);
                }
                None => {
                    if outcomes.len() < sessions_n {
                        shared.stop(
                            RunStatus::Failed,
                            format!("{} session thread(s) ended abnormally", sessions_n - outcomes.len()),
                        );
                    }
                    break;
                }
            },
            by = &mut interrupt, if !interrupt_done => {
                interrupt_done = true;
                shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
            }
            by = &mut hurry, if !hurried => {
                hurried = true;
                shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
                stragglers.close_all(Instant::now());
            }
            _ = stop_rx.changed(), if stopped_at.is_none() => {
                if *stop_rx.borrow() {
                    let now = Instant::now();
                    stopped_at = Some(now);
                    cancel_all(&cancellers);
                    stragglers.restart(now);
                }
            }
            _ = sleep_until_opt(stragglers.deadline()) => {
                if stragglers.on_deadline(Instant::now()) {
                    break;
                }
            }
        }
    }
    let sessions_lost = stragglers.finish(&mut outcomes, &shared);
    let end_instant = stopped_at
        .or_else(|| outcomes.iter().filter_map(|o| o.last_end_at).max())
        .unwrap_or(measure_from)
        .max(measure_from);
    let client_cpu = cpu_since(cpu_start);
    let histograms = merge_histograms(&mut outcomes);
    let (status, error) = shared.status();
    DriveOutcome {
        status,
        error,
        start: timeline.utc(measure_from),
        end: timeline.utc(end_instant),
        measured_s: (end_instant - measure_from).as_secs_f64(),
        warmup_s: 0.0,
        sessions: outcomes,
        histograms,
        timeseries: Vec::new(),
        client_cpu,
        sessions_lost,
    }
}

/// Records an operation's error; true when the session must stop.
fn on_op_error(
    outcome: &mut SessionOutcome,
    ctx: &SessionCtx,
    kind: OpKind,
    e: &OpError,
    at_s: f64,
) -> bool {
    if outcome.first_error.is_none() {
        outcome.first_error = Some(SessionError {
            at_s,
            kind,
            message: e.message.clone(),
        });
    }
    if ctx.on_error == OnError::Abort {
        ctx.shared.stop(
            RunStatus::Failed,
            format!(
                "{} ({}) failed a {}: {}",
                outcome.spec.name,
                outcome.spec.schema,
                kind.name(),
                e.message
            ),
        );
        outcome.ended_by = "error".into();
        return true;
    }
    if e.fatal {
        outcome.ended_by = "error".into();
        return true;
    }
    false
}

fn session_loop<S: Session>(
    session: S,
    spec: SessionSpec,
    ops: OpStream,
    ctx: SessionCtx,
) -> SessionOutcome {
    let mut outcome = SessionOutcome::new(spec.clone());
    let mut runner = Runner {
        session,
        spec,
        ops,
        value: String::with_capacity(128),
        n: 0,
        shared: Arc::clone(&ctx.shared),
    };
    let arrival = Arrival(&ctx.arrivals);
    let Some(go) = ctx.shared.wait_for(|b| b.go) else {
        outcome.ended_by = stop_cause(&ctx.shared);
        return outcome;
    };

    // Warm-up: the same operations, not measured; then publish the statistics so the
    // "before" snapshot sees them.
    if !ctx.warmup.is_zero() {
        let warm_end = go + ctx.warmup;
        while !ctx.shared.stopped() && Instant::now() < warm_end {
            let Some(done) = runner.next() else {
                break;
            };
            if let Err(e) = &done.result {
                if ctx.shared.stopped() {
                    break;
                }
                let at_s = -(warm_end.saturating_duration_since(done.t1).as_secs_f64());
                if on_op_error(&mut outcome, &ctx, done.kind, e, at_s) {
                    break;
                }
            }
        }
        runner.session.flush_stats();
    }
    drop(arrival);

    let timeline = ctx
        .shared
        .wait_for(|b| b.window)
        .unwrap_or_else(Timeline::empty);
    let mut hist = Box::new(SessionHistograms::default());
    let mut first_start: Option<Instant> = None;
    let mut last_end: Option<Instant> = None;
    let mut measured: u64 = 0;
    loop {
        if ctx.shared.stopped() {
            if outcome.ended_by != "error" {
                outcome.ended_by = stop_cause(&ctx.shared);
            }
            break;
        }
        let now = Instant::now();
        if timeline.end.is_some_and(|end| now >= end)
            || timeline.loops.is_some_and(|l| measured >= l)
        {
            break;
        }
        let Some(done) = runner.next() else {
            continue;
        };
        let k = done.kind.index();
        match done.result {
            Ok(rows) => {
                let us = (done.t1 - done.t0).as_micros() as u64;
                hist.record(k, us.max(1));
                ctx.live.ops[k].fetch_add(1, Ordering::Relaxed);
                ctx.live.latency.record(us);
                outcome.ops[k] += 1;
                outcome.rows[k] += rows;
                measured += 1;
                first_start.get_or_insert(done.t0);
                last_end = Some(done.t1);
            }
            Err(e) => {
                if ctx.shared.stopped() {
                    // The statement was cancelled because the run is stopping.
                    continue;
                }
                outcome.errors[k] += 1;
                ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                measured += 1;
                if on_op_error(
                    &mut outcome,
                    &ctx,
                    done.kind,
                    &e,
                    timeline.offset_s(done.t1),
                ) {
                    break;
                }
            }
        }
    }
    runner.session.flush_stats();
    outcome.start = first_start.map(|t| timeline.utc(t));
    outcome.end = last_end.map(|t| timeline.utc(t));
    outcome.last_end_at = last_end;
    outcome.histograms = Some(hist);
    outcome
}

fn stop_cause(shared: &Shared) -> String {
    match shared
        .reason
        .lock()
        .ok()
        .and_then(|r| r.as_ref().map(|(s, _)| *s))
    {
        Some(RunStatus::Interrupted) => "interrupted".into(),
        _ => "aborted".into(),
    }
}

/// getrusage(2) for this process (all threads).
fn rusage() -> Option<libc::rusage> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage struct into the pointer it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    // SAFETY: when getrusage returns 0 the struct is initialised.
    (rc == 0).then(|| unsafe { ru.assume_init() })
}

/// This process's peak resident set size in KiB: VmHWM from /proc/self/status. Not
/// ru_maxrss: Linux carries that across execve, so it reports the launching process's peak
/// when that was larger (a Python harness made a 1-session dbio look 14 MiB instead of 8).
pub fn max_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok();
    status
        .as_deref()
        .and_then(vm_hwm_kib)
        .or_else(|| u64::try_from(rusage()?.ru_maxrss).ok())
}

/// The `VmHWM:` line of /proc/<pid>/status, in KiB.
fn vm_hwm_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// This process's user and system CPU seconds (all threads).
pub fn cpu_now() -> Option<CpuUsage> {
    let ru = rusage()?;
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(CpuUsage {
        user_s: secs(ru.ru_utime),
        system_s: secs(ru.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RedoStress;

    /// A stand-in for a database session, for the driver's own timing logic: a fixed
    /// service time and optional failures. The database itself is tested end to end.
    struct FakeSession {
        service: Duration,
        fail_after: Option<u64>,
        done: u64,
        flushes: u32,
    }

    impl Session for FakeSession {
        fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
            self.step()?;
            Ok((hi - lo + 1) as u64)
        }
        fn update(&mut self, lo: i64, hi: i64, value: &str) -> Result<u64, OpError> {
            assert!(value.starts_with("upd:") && value.len() == 120);
            self.step()?;
            Ok((hi - lo + 1) as u64)
        }
        fn canceller(&self) -> Canceller {
            Arc::new(|| {})
        }
        fn flush_stats(&mut self) {
            self.flushes += 1;
        }
    }

    impl FakeSession {
        fn step(&mut self) -> Result<(), OpError> {
            std::thread::sleep(self.service);
            self.done += 1;
            if self.fail_after.is_some_and(|n| self.done > n) {
                return Err(OpError {
                    message: "boom".into(),
                    fatal: false,
                });
            }
            Ok(())
        }
    }

    fn cfg(window: WindowSpec, update_pct: u32) -> DriveConfig {
        DriveConfig {
            workload: Workload {
                scale_blocks: 1000,
                work_unit: 10,
                update_work_unit: 2,
                update_pct,
                hot_spot: None,
                hot_spot_frequency: 0,
                think_frequency: 0,
                think_min: Duration::ZERO,
                think_max: Duration::ZERO,
                redo_stress: RedoStress::Lite,
            },
            window,
            warmup: Duration::ZERO,
            interval: Duration::from_millis(100),
            progress: Duration::ZERO,
            on_error: OnError::Abort,
            seed: 1,
            grace: STOP_GRACE,
        }
    }

    async fn ok() -> Result<(), String> {
        Ok(())
    }

    fn fakes(n: u32, fail_after: Option<u64>) -> Vec<(SessionSpec, FakeSession)> {
        session_specs(n, 0, &["s1".into()], false)
            .into_iter()
            .map(|s| {
                (
                    s,
                    FakeSession {
                        service: Duration::from_millis(2),
                        fail_after,
                        done: 0,
                        flushes: 0,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn peak_rss_comes_from_vm_hwm() {
        let status = "Name:\tdbio\nVmPeak:\t  99999 kB\nVmHWM:\t    7948 kB\nVmRSS:\t 7000 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(7948));
        assert_eq!(vm_hwm_kib("Name:\tx\n"), None);
        assert!(max_rss_kib().is_some_and(|k| k > 0));
    }

    #[test]
    fn specs_map_round_robin_and_name_sessions() {
        let names: Vec<String> = vec!["user1".into(), "user2".into()];
        let s = session_specs(3, 2, &names, false);
        let got: Vec<(&str, &str)> = s
            .iter()
            .map(|x| (x.name.as_str(), x.schema.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("dbio-reader-1", "user1"),
                ("dbio-reader-2", "user2"),
                ("dbio-reader-3", "user1"),
                ("dbio-writer-1", "user2"),
                ("dbio-writer-2", "user1"),
            ]
        );
        assert!(
            session_specs(2, 1, &names, true)
                .iter()
                .all(|x| x.schema == "user1")
        );
    }

    #[tokio::test]
    async fn work_loop_measures_exactly_the_loops() {
        let out = drive(
            fakes(3, None),
            &cfg(WindowSpec::Loops(50), 20),
            Interrupts::never(),
            |_| {},
            ok,
        )
        .await;
        assert_eq!(out.status, RunStatus::Ok);
        for s in &out.sessions {
            assert_eq!(s.ops[0] + s.ops[1], 50);
            assert_eq!(s.ops[1], 10, "20% of 50 are updates");
            assert_eq!(s.rows[0], s.ops[0] * 10);
        }
        assert_eq!(out.histograms[0].len() + out.histograms[1].len(), 150);
        let series: u64 = out.timeseries.iter().map(|r| r.reads + r.updates).sum();
        assert_eq!(series, 150, "the time series accounts for every operation");
    }

    #[tokio::test]
    async fn run_time_bounds_the_window() {
        let out = drive(
            fakes(2, None),
            &cfg(WindowSpec::Time(Duration::from_millis(300)), 0),
            Interrupts::never(),
            |_| {},
            ok,
        )
        .await;
        assert_eq!(out.status, RunStatus::Ok);
        assert!((out.measured_s - 0.3).abs() < 1e-6, "{}", out.measured_s);
        assert!(out.histograms[0].len() > 20);
        assert!(
            out.histograms[0].min() >= 2000,
            "latency includes the 2 ms service time"
        );
    }

    #[tokio::test]
    async fn first_error_aborts_by_default_and_continue_counts() {
        let out = drive(
            fakes(2, Some(5)),
            &cfg(WindowSpec::Loops(100), 0),
            Interrupts::never(),
            |_| {},
            ok,
        )
        .await;
        assert_eq!(out.status, RunStatus::Failed);
        assert!(out.error.as_deref().unwrap_or("").contains("boom"));
        let mut c = cfg(WindowSpec::Loops(20), 0);
        c.on_error = OnError::Continue;
        let out = drive(fakes(2, Some(5)), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok);
        for s in &out.sessions {
            assert_eq!((s.ops[0], s.errors[0]), (5, 15));
            assert_eq!(
                s.first_error.as_ref().map(|e| e.message.as_str()),
                Some("boom")
            );
        }
    }

    #[tokio::test]
    async fn interrupt_stops_the_run() {
        let out = drive(
            fakes(2, None),
            &cfg(WindowSpec::Time(Duration::from_secs(60)), 0),
            Interrupts::after(Duration::from_millis(200)),
            |_| {},
            ok,
        )
        .await;
        assert_eq!(out.status, RunStatus::Interrupted);
        assert!(out.measured_s < 1.0, "{}", out.measured_s);
        assert!(out.sessions.iter().all(|s| s.ended_by == "interrupted"));
    }

    /// A session whose server stops answering after `answers` operations: its call blocks
    /// until the connection is shut down (when it has a closer), cancel requests go
    /// unanswered.
    struct HangingSession {
        answers: u64,
        done: u64,
        closable: bool,
        shut: Arc<(Mutex<bool>, Condvar)>,
    }

    impl Session for HangingSession {
        fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
            self.done += 1;
            if self.done <= self.answers {
                std::thread::sleep(Duration::from_millis(1));
                return Ok((hi - lo + 1) as u64);
            }
            let (lock, cv) = &*self.shut;
            let mut shut = lock.lock().unwrap();
            while !*shut {
                shut = cv.wait(shut).unwrap();
            }
            Err(OpError {
                message: "connection closed".into(),
                fatal: true,
            })
        }
        fn update(&mut self, lo: i64, hi: i64, _: &str) -> Result<u64, OpError> {
            self.read(lo, hi)
        }
        fn canceller(&self) -> Canceller {
            Arc::new(|| {})
        }
        fn closer(&self) -> Option<Canceller> {
            let shut = Arc::clone(&self.shut);
            self.closable.then(|| -> Canceller {
                Arc::new(move || {
                    *shut.0.lock().unwrap() = true;
                    shut.1.notify_all();
                })
            })
        }
        fn flush_stats(&mut self) {}
    }

    fn hanging(closable: bool) -> Vec<(SessionSpec, HangingSession)> {
        session_specs(2, 0, &["s1".into()], false)
            .into_iter()
            .map(|s| {
                let answers = if s.index == 0 { u64::MAX } else { 20 };
                (
                    s,
                    HangingSession {
                        answers,
                        done: 0,
                        closable,
                        shut: Arc::new((Mutex::new(false), Condvar::new())),
                    },
                )
            })
            .collect()
    }

    // The server stopped answering: sessions blocked in recv kept the driver, and Ctrl-C,
    // waiting for ever.
    #[tokio::test]
    async fn a_session_that_never_answers_is_cut_off_after_the_grace_and_counted_lost() {
        let mut c = cfg(WindowSpec::Time(Duration::from_secs(60)), 0);
        c.grace = Duration::from_millis(300);
        for closable in [true, false] {
            let started = Instant::now();
            let out = drive(
                hanging(closable),
                &c,
                Interrupts::after(Duration::from_millis(300)),
                |_| {},
                ok,
            )
            .await;
            let took = started.elapsed();
            assert!(took < Duration::from_secs(5), "{took:?}");
            assert_eq!(out.status, RunStatus::Interrupted);
            assert_eq!(out.sessions_lost, 1, "closable {closable}");
            assert_eq!(out.sessions.len(), 2, "the lost session is in the result");
            let lost = &out.sessions[1];
            assert_eq!(lost.ended_by, "lost");
            assert_eq!(out.sessions[0].ended_by, "interrupted");
            if closable {
                assert_eq!(lost.ops[0], 20, "what it measured before is kept");
            } else {
                assert_eq!(lost.ops[0], 0, "an abandoned thread's outcome is unknown");
            }
            assert!(
                out.error
                    .unwrap_or_default()
                    .contains("1 session(s) did not answer")
            );
        }
    }

    #[tokio::test]
    async fn a_second_interrupt_ends_the_wait_at_once() {
        let mut c = cfg(WindowSpec::Time(Duration::from_secs(60)), 0);
        c.grace = Duration::from_secs(30);
        let started = Instant::now();
        let out = drive(
            hanging(true),
            &c,
            Interrupts::after_each(&[Duration::from_millis(200), Duration::from_millis(400)]),
            |_| {},
            ok,
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status, RunStatus::Interrupted);
        assert_eq!(out.sessions_lost, 1);
    }

    #[tokio::test]
    async fn warmup_is_excluded_and_the_snapshot_runs_between() {
        let mut c = cfg(WindowSpec::Loops(10), 0);
        c.warmup = Duration::from_millis(100);
        let called = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&called);
        let out = drive(
            fakes(2, None),
            &c,
            Interrupts::never(),
            |_| {},
            move || async move {
                flag.store(true, Ordering::SeqCst);
                Ok(())
            },
        )
        .await;
        assert!(called.load(Ordering::SeqCst));
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.warmup_s, 0.1);
        for s in &out.sessions {
            assert_eq!(s.ops[0], 10, "warm-up operations are not counted");
        }

        let out = drive(
            fakes(2, None),
            &c,
            Interrupts::never(),
            |_| {},
            || async { Err("snapshot failed: permission denied".to_string()) },
        )
        .await;
        assert_eq!(out.status, RunStatus::Failed);
        assert!(out.error.unwrap_or_default().contains("snapshot failed"));
        assert_eq!(
            out.sessions.iter().map(|s| s.ops[0]).sum::<u64>(),
            0,
            "nothing measured"
        );
    }
}
