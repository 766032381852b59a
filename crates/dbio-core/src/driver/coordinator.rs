//! The coordinator: releases the sessions together, opens and closes the window, drains the
//! time series, stops the run on an interrupt or a fatal error, and bounds the wait for
//! sessions that no longer answer.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, watch};

use super::arrivals::Schedule;
use super::client_loop::{Arrival, Arrivals, SessionCtx, session_loop};
use super::event_loop::{Slot, WAKE, Worker};
use super::outcome::{
    DriveOutcome, EndedBy, OpenLoopOutcome, RunStatus, SessionOutcome, add_to, merge_histograms,
};
use super::session::{Canceller, Session, SessionSpec};
use super::steady::{Steadiness, SteadyJudge};
use super::timeseries::{IntervalRow, Live, Progress, ProgressAcc, drain};
use super::usage::{cpu_now, cpu_since};
use super::{DriveConfig, EngineChoice, WindowSpec};
use crate::config::{SessionEngine, SteadyMetric};
use crate::interrupt::Interrupts;
use crate::stats::{LOG_BUCKETS, new_histogram};
use crate::workload::{OpStream, SessionKind, session_seed};

/// How long the driver still waits for a session thread after shutting its connection down
/// (or after a second interrupt) before it abandons the thread.
pub(super) const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// How long past the window's end a session's last operation (a lock wait, a server-engine
/// loop finishing) may take to return by itself before the grace starts: a healthy server
/// is not cut off at the window's end, a stopped one still ends the run.
pub(super) const END_SLACK: Duration = Duration::from_secs(30);

/// Shared between the coordinator and the sessions.
pub(super) struct Shared {
    pub(super) stop: AtomicBool,
    pub(super) stop_tx: watch::Sender<bool>,
    /// (status, message) of whoever stopped the run first.
    pub(super) reason: Mutex<Option<(RunStatus, String)>>,
    /// What session threads wait on: the release, the window, the stop.
    pub(super) board: Mutex<Board>,
    pub(super) board_cv: Condvar,
    /// The coordinated phase before the window the sessions are in ([`PrePhase`]).
    pre_phase: AtomicU8,
    /// The event engine's workers: woken by every post, as the threads by `board_cv`.
    pub(super) wakers: Mutex<Vec<Arc<mio::Waker>>>,
}

/// The phases before the window that the coordinator ends (`run.precondition`, `run.steady`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PrePhase {
    /// Updates only, until the update rate is steady.
    Precondition,
    /// The workload, unmeasured: the warm-up, then the wait for steady state.
    Warmup,
    /// The sessions flush their statistics and wait for the window.
    Over,
}

#[derive(Default)]
pub(super) struct Board {
    pub(super) go: Option<Instant>,
    pub(super) window: Option<Timeline>,
    pub(super) stopped: bool,
    /// The window's time is up: no session starts another operation or think time.
    pub(super) closed: bool,
    /// Counts the coordinated phases posted: a think time, or a wait for an intended start,
    /// ends when it changes.
    pub(super) phase: u32,
}

impl Shared {
    pub(super) fn new() -> Arc<Shared> {
        let (stop_tx, _) = watch::channel(false);
        Arc::new(Shared {
            stop: AtomicBool::new(false),
            stop_tx,
            reason: Mutex::new(None),
            board: Mutex::new(Board::default()),
            board_cv: Condvar::new(),
            pre_phase: AtomicU8::new(PrePhase::Over as u8),
            wakers: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn pre_phase(&self) -> PrePhase {
        match self.pre_phase.load(Ordering::Acquire) {
            0 => PrePhase::Precondition,
            1 => PrePhase::Warmup,
            _ => PrePhase::Over,
        }
    }

    /// Moves the sessions to `phase` and wakes those pausing.
    pub(super) fn set_pre_phase(&self, phase: PrePhase) {
        self.pre_phase.store(phase as u8, Ordering::Release);
        self.post(|b| b.phase += 1);
    }

    /// How the run ended: the first stop's status and message, or ok.
    pub(super) fn status(&self) -> (RunStatus, Option<String>) {
        match self.reason.lock().ok().and_then(|r| r.clone()) {
            Some((status, message)) => (status, Some(message)),
            None => (RunStatus::Ok, None),
        }
    }

    pub(super) fn stop(&self, status: RunStatus, message: String) {
        if let Ok(mut r) = self.reason.lock()
            && r.is_none()
        {
            *r = Some((status, message));
        }
        self.stop.store(true, Ordering::Release);
        self.stop_tx.send_replace(true);
        self.post(|b| b.stopped = true);
    }

    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The window's time is up: sessions in a think time wake and end.
    pub(super) fn close(&self) {
        self.post(|b| b.closed = true);
    }

    /// Changes the board and wakes every waiting session.
    pub(super) fn post(&self, f: impl FnOnce(&mut Board)) {
        if let Ok(mut b) = self.board.lock() {
            f(&mut b);
        }
        self.board_cv.notify_all();
        if let Ok(wakers) = self.wakers.lock() {
            for w in wakers.iter() {
                let _ = w.wake();
            }
        }
    }

    /// Blocks until `pick` finds something on the board or the run stops (then None).
    pub(super) fn wait_for<T>(&self, pick: impl Fn(&Board) -> Option<T>) -> Option<T> {
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

    /// Sleeps for `pause` unless the run stops, the window closes or a coordinated phase
    /// ends first; false when one did (a think time never carries a session past the
    /// window's end).
    pub(super) fn pause(&self, pause: Duration) -> bool {
        let Ok(b) = self.board.lock() else {
            return false;
        };
        let phase = b.phase;
        let on = |b: &Board| !b.stopped && !b.closed && b.phase == phase;
        match self.board_cv.wait_timeout_while(b, pause, |b| on(b)) {
            Ok((b, _)) => on(&b),
            Err(_) => false,
        }
    }
}

#[derive(Clone, Copy)]
pub(super) struct Timeline {
    pub(super) measure_from: Instant,
    pub(super) end: Option<Instant>,
    pub(super) loops: Option<u64>,
    /// Wall-clock time of `measure_from`, to stamp results in UTC.
    pub(super) wall_at_measure: SystemTime,
}

impl Timeline {
    /// A window that never opened (the run stopped before it).
    pub(super) fn empty() -> Timeline {
        Timeline {
            measure_from: Instant::now(),
            end: Some(Instant::now()),
            loops: None,
            wall_at_measure: SystemTime::now(),
        }
    }

    pub(super) fn utc(&self, at: Instant) -> DateTime<Utc> {
        let t = if at >= self.measure_from {
            self.wall_at_measure + (at - self.measure_from)
        } else {
            self.wall_at_measure - (self.measure_from - at)
        };
        DateTime::<Utc>::from(t)
    }

    pub(super) fn offset_s(&self, at: Instant) -> f64 {
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
    let coordinated = cfg.steady.is_some() || cfg.precondition.is_some();
    if coordinated {
        let first = if cfg.precondition.is_some() {
            PrePhase::Precondition
        } else {
            PrePhase::Warmup
        };
        shared.pre_phase.store(first as u8, Ordering::Release);
    }
    let schedule = cfg
        .arrivals
        .map(|plan| Arc::new(Schedule::new(plan, Instant::now())));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<SessionOutcome>();
    let mut choice = EngineChoice::of(cfg, &sessions, coordinated);
    let mut workers: Vec<Worker<S>> = Vec::new();
    if choice.engine == SessionEngine::Events {
        match event_workers(&shared, cfg, sessions.len(), &done_tx) {
            Ok(w) => workers = w,
            Err(e) => {
                choice = EngineChoice {
                    engine: SessionEngine::Threads,
                    why: format!("{}; the event engine could not start ({e})", choice.why),
                }
            }
        }
    }
    let mut cancellers = Vec::new();
    let mut lives = Vec::new();
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
        // Preconditioning updates whatever the session's kind, from keys of its own.
        let pre_ops = cfg.precondition.map(|_| {
            OpStream::new(
                cfg.workload.clone(),
                SessionKind::Writer,
                session_seed(cfg.seed ^ PRECONDITION_SEED, spec.index),
            )
        });
        let ctx = SessionCtx {
            shared: Arc::clone(&shared),
            live,
            arrivals: Arc::clone(&arrivals),
            warmup: cfg.warmup,
            lead: cfg.snapshot_lead,
            on_error: cfg.on_error,
            schedule: schedule.clone(),
            coordinated,
            pre_ops,
        };
        if !workers.is_empty() {
            // Round-robin over the workers: each core gets as many sessions as the others.
            let w = sessions_n % workers.len();
            workers[w]
                .slots
                .push(Slot::new(session, spec.clone(), ops, ctx));
            sessions_n += 1;
            stragglers.add(spec, closer);
            continue;
        }
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
    for (j, worker) in workers.into_iter().enumerate() {
        let n = worker.slots.len();
        let spawned = std::thread::Builder::new()
            .name(format!("dbio-events-{}", j + 1))
            .stack_size(WORKER_STACK)
            .spawn(move || worker.run());
        if let Err(e) = spawned {
            for _ in 0..n {
                drop(Arrival(&arrivals));
            }
            shared.stop(
                RunStatus::Failed,
                format!("could not start event engine worker {}: {e}", j + 1),
            );
        }
    }
    drop(done_tx);
    let mut stop_rx = shared.stop_tx.subscribe();
    let interrupt = interrupts.clone().reached(1);
    let hurry = interrupts.reached(2);
    tokio::pin!(interrupt, hurry);
    let mut end = Ending::default();
    // Every session is connected and prepared: release them together.
    let released = Instant::now();
    if let Some(s) = &schedule {
        s.restart(released);
    }
    shared.post(|b| b.go = Some(released));
    let mut waits = PreWindowWaits::default();
    if coordinated {
        let mut pre = PreWindow {
            shared: &shared,
            lives: &lives,
            cfg,
            schedule: schedule.as_deref(),
            on_progress: &mut on_progress,
            counts: vec![0u64; LOG_BUCKETS],
        };
        {
            // Pinned once: an interrupt stops the sessions, and the waits end on it.
            let run = pre.run();
            tokio::pin!(run);
            loop {
                tokio::select! {
                    w = &mut run => { waits = w; break; }
                    by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
                }
            }
        }
        shared.set_pre_phase(PrePhase::Over);
        while arrivals.count.load(Ordering::Acquire) < sessions_n && !shared.stopped() {
            tokio::select! {
                _ = arrivals.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
            }
        }
    } else if !cfg.warmup.is_zero() {
        on_progress(&Progress {
            elapsed_s: 0.0,
            ops_per_s: 0.0,
            p99_us: None,
            errors: 0,
            warmup: true,
            waiting: None,
        });
        // Every session ends its warm-up and flushes its statistics before the snapshot.
        while arrivals.count.load(Ordering::Acquire) < sessions_n && !shared.stopped() {
            tokio::select! {
                _ = arrivals.notify.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
            }
        }
    }
    if !shared.stopped() {
        // The "before" snapshot talks to the server: an interrupt must not wait for it.
        let before = tokio::select! {
            r = before_window() => r,
            by = &mut interrupt, if !end.interrupted => {
                end.interrupted = true;
                Err(format!("interrupted by {by}"))
            }
        };
        if let Err(e) = before {
            let status = if end.interrupted {
                RunStatus::Interrupted
            } else {
                RunStatus::Failed
            };
            shared.stop(status, e);
        }
    }
    // Shards released at one instant open their windows at one instant too, `warmup`
    // after it: the warm-up ended `snapshot_lead` early to leave the snapshot its time.
    if !shared.stopped() && !cfg.snapshot_lead.is_zero() && !cfg.warmup.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep_until((released + cfg.warmup).into()) => {}
            by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
        }
    }
    if shared.stopped() {
        end.stop_now(&cancellers, &mut stragglers);
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
    // What the phases before the window counted is not the window's; the schedule of an open
    // loop starts again with the window, owing nothing (a backlog carried over from the
    // warm-up would pollute it).
    let mut counts = vec![0u64; LOG_BUCKETS];
    drain(&lives, &mut counts, timeline, measure_from, measure_from);
    if let Some(s) = &schedule {
        s.restart(measure_from);
    }
    shared.post(|b| b.window = Some(timeline));

    let cpu_start = cpu_now();
    let mut timeseries = Vec::new();
    let mut outcomes = Vec::new();
    let mut last_drain = measure_from;
    let mut progress_acc = ProgressAcc::default();
    let mut next_progress = measure_from + cfg.progress;
    let mut next_tick = measure_from + cfg.interval;
    // The window's end: what is counted is what completed inside it; a statement still in
    // flight `CANCEL_AFTER` later is cancelled, so a lock wait or a slow read cannot
    // stretch the run.
    let mut close_at = timeline.end;
    let mut cancel_at = None;
    let mut cancel_again = Duration::from_secs(1);
    loop {
        tokio::select! {
            _ = sleep_until_opt(close_at) => {
                close_at = None;
                shared.close();
                cancel_at = Some(Instant::now() + CANCEL_AFTER);
                if let Some(end) = timeline.end {
                    stragglers.ending(end + END_SLACK);
                }
            }
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
            by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
            by = &mut hurry, if !end.hurried => end.hurry(&shared, &mut stragglers, by),
            _ = sleep_until_opt(cancel_at) => {
                cancel_in_flight(&cancellers, &lives);
                // Again, less and less often, while a session still has one in flight: a
                // cancel that reached the server before the statement did is lost.
                cancel_at = Some(Instant::now() + cancel_again);
                cancel_again *= 2;
            }
            _ = stop_rx.changed(), if end.stopped_at.is_none() => {
                if *stop_rx.borrow() {
                    cancel_at = None;
                    end.stop_now(&cancellers, &mut stragglers);
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
    let last_stop = outcomes.iter().filter_map(|o| o.returned_at).max();
    let end_instant = match (timeline.end, end.stopped_at) {
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

    let open_loop = match (&schedule, cfg.arrivals) {
        (Some(s), Some(plan)) => {
            let mut lag = new_histogram();
            for h in outcomes
                .iter()
                .filter_map(|o| o.histograms.as_ref()?.lag.as_ref())
            {
                add_to(h, &mut lag);
            }
            let (scheduled, missed_starts) = s.count(timeline.end.unwrap_or(end_instant));
            Some(OpenLoopOutcome {
                plan,
                scheduled,
                missed_starts,
                lag,
            })
        }
        _ => None,
    };
    let (histograms, by_target) = merge_histograms(&mut outcomes);
    let (status, error) = shared.status();
    let measured_s = (end_instant - measure_from).as_secs_f64();
    // The database's counters run until the last session has stopped (its statement
    // cancelled): that, not the nominal window, is the interval its rates divide by.
    let db_window_s = last_stop
        .map(|t| t.max(end_instant))
        .map_or(measured_s, |t| (t - measure_from).as_secs_f64());
    DriveOutcome {
        status,
        error,
        start: timeline.utc(measure_from),
        end: timeline.utc(end_instant),
        measured_s,
        db_window_s,
        warmup_s: cfg.warmup.as_secs_f64(),
        sessions: outcomes,
        histograms,
        by_target,
        timeseries,
        client_cpu,
        sessions_lost,
        steady: waits.steady,
        precondition: waits.precondition,
        open_loop,
        session_engine: Some(choice),
    }
}

/// The event engine's workers, one per core (at most one per session), each with its poll
/// and the waker the coordinator's posts reach it by.
fn event_workers<S: Session>(
    shared: &Arc<Shared>,
    cfg: &DriveConfig,
    sessions: usize,
    done_tx: &mpsc::UnboundedSender<SessionOutcome>,
) -> std::io::Result<Vec<Worker<S>>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workers = Vec::new();
    for _ in 0..cores.min(sessions).max(1) {
        let poll = mio::Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKE)?);
        if let Ok(mut w) = shared.wakers.lock() {
            w.push(waker);
        }
        workers.push(Worker {
            poll,
            slots: Vec::new(),
            shared: Arc::clone(shared),
            warmup: cfg.warmup,
            lead: cfg.snapshot_lead,
            tx: done_tx.clone(),
            failed: Vec::new(),
        });
    }
    Ok(workers)
}

/// Stack of an event engine worker: shallow too; its sessions live on the heap.
const WORKER_STACK: usize = 1024 * 1024;

/// Mixes the run's seed for preconditioning's key streams (apart from the workload's).
const PRECONDITION_SEED: u64 = 0x5052_4543_4f4e_4449;

/// How the coordinated waits before the window ended.
#[derive(Default)]
struct PreWindowWaits {
    precondition: Option<Steadiness>,
    steady: Option<Steadiness>,
}

/// The coordinated phases before the window: preconditioning until the update rate is
/// steady, then the warm-up, then the wait for steady state, each capped at
/// `steady_max`. The sessions run until a phase is posted; their live figures are drained
/// every interval and judged.
struct PreWindow<'a, P: FnMut(&Progress)> {
    shared: &'a Shared,
    lives: &'a [Arc<Live>],
    cfg: &'a DriveConfig,
    schedule: Option<&'a Schedule>,
    on_progress: &'a mut P,
    counts: Vec<u64>,
}

impl<P: FnMut(&Progress)> PreWindow<'_, P> {
    async fn run(&mut self) -> PreWindowWaits {
        let mut out = PreWindowWaits::default();
        if let Some(rule) = self.cfg.precondition {
            out.precondition = self.wait_steady(rule, "preconditioning").await;
            if self.shared.stopped() {
                return out;
            }
            self.shared.set_pre_phase(PrePhase::Warmup);
        }
        // The warm-up begins now: an open loop's schedule with it.
        let warm_from = Instant::now();
        if let Some(s) = self.schedule {
            s.restart(warm_from);
        }
        self.progress(0.0, None);
        self.sleep_draining(warm_from + self.cfg.warmup).await;
        if let Some(rule) = self.cfg.steady
            && !self.shared.stopped()
        {
            out.steady = self.wait_steady(rule, "steady state").await;
        }
        out
    }

    /// Runs the current phase until `rule` holds over its figure or `steady_max` passes.
    async fn wait_steady(
        &mut self,
        rule: crate::config::SteadyRule,
        what: &str,
    ) -> Option<Steadiness> {
        let interval = self.cfg.interval;
        let mut judge = SteadyJudge::new(rule, interval.as_secs_f64());
        let from = Instant::now();
        let cap = from + self.cfg.steady_max;
        self.drain_row(from, from);
        let mut last = from;
        let mut next = from + interval;
        let mut next_progress = from + self.cfg.progress;
        while !self.shared.stopped() {
            tokio::time::sleep_until(next.into()).await;
            let now = Instant::now();
            let row = self.drain_row(last, now);
            last = now;
            next += interval;
            let t_s = (now - from).as_secs_f64();
            let figure = match rule.metric {
                SteadyMetric::IopsSlope => Some(row.ops_per_s),
                SteadyMetric::LatSlope => row.mean_us,
            };
            if let Some(v) = figure
                && row.seconds >= 0.5 * interval.as_secs_f64()
            {
                judge.push(t_s, v);
            }
            if judge.steady() || now >= cap {
                return Some(Steadiness::of(
                    &judge,
                    t_s,
                    self.cfg.steady_max.as_secs_f64(),
                ));
            }
            if !self.cfg.progress.is_zero() && now >= next_progress {
                next_progress += self.cfg.progress;
                let slope = judge
                    .slope_pct()
                    .filter(|p| p.is_finite())
                    .map(|p| format!("slope {p:.2}%/s"))
                    .unwrap_or_else(|| "covering the span".into());
                self.progress(t_s, Some(format!("{what}: {rule}: {slope}")));
            }
        }
        None
    }

    /// Sleeps until `until`, draining the live figures every interval (they are the warm-up's).
    async fn sleep_draining(&mut self, until: Instant) {
        let mut last = Instant::now();
        while !self.shared.stopped() && Instant::now() < until {
            let next = (last + self.cfg.interval).min(until);
            tokio::time::sleep_until(next.into()).await;
            let now = Instant::now();
            self.drain_row(last, now);
            last = now;
        }
    }

    fn drain_row(&mut self, from: Instant, to: Instant) -> IntervalRow {
        drain(self.lives, &mut self.counts, Timeline::empty(), from, to)
    }

    fn progress(&mut self, elapsed_s: f64, waiting: Option<String>) {
        if self.cfg.progress.is_zero() {
            return;
        }
        (self.on_progress)(&Progress {
            elapsed_s,
            ops_per_s: 0.0,
            p99_us: None,
            errors: 0,
            warmup: true,
            waiting,
        });
    }
}

/// How a run is being ended, the same in both loops: the first interrupt stops it (the
/// stop signal then cancels every session), the second also shuts every pending session's
/// connection down at once; `stopped_at` is when the sessions were cancelled.
#[derive(Default)]
pub(super) struct Ending {
    pub(super) interrupted: bool,
    pub(super) hurried: bool,
    pub(super) stopped_at: Option<Instant>,
}

impl Ending {
    pub(super) fn interrupt(&mut self, shared: &Shared, by: &str) {
        self.interrupted = true;
        shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
    }

    pub(super) fn hurry(&mut self, shared: &Shared, stragglers: &mut Stragglers, by: &str) {
        self.hurried = true;
        shared.stop(RunStatus::Interrupted, format!("interrupted by {by}"));
        stragglers.close_all(Instant::now());
    }

    /// The run stopped: every session's statement is cancelled and the grace starts.
    pub(super) fn stop_now(&mut self, cancellers: &[Canceller], stragglers: &mut Stragglers) {
        let now = Instant::now();
        self.stopped_at = Some(now);
        cancel_all(cancellers);
        stragglers.restart(now);
    }
}

/// Sleeps until `at`; never, without one.
pub(super) async fn sleep_until_opt(at: Option<Instant>) {
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
pub(super) struct Stragglers {
    pub(super) pending: BTreeMap<u32, (SessionSpec, Option<Canceller>)>,
    pub(super) grace: Duration,
    pub(super) close_at: Option<Instant>,
    pub(super) give_up_at: Option<Instant>,
    /// Sessions whose connection was shut down: they did not answer in time.
    pub(super) closed: BTreeSet<u32>,
}

impl Stragglers {
    pub(super) fn new(grace: Duration) -> Stragglers {
        Stragglers {
            pending: BTreeMap::new(),
            grace,
            close_at: None,
            give_up_at: None,
            closed: BTreeSet::new(),
        }
    }

    pub(super) fn add(&mut self, spec: SessionSpec, closer: Option<Canceller>) {
        self.pending.insert(spec.index, (spec, closer));
    }

    /// The window is over and sessions should return by `at`: the grace starts then, unless
    /// a stop started it already.
    pub(super) fn ending(&mut self, at: Instant) {
        if self.close_at.is_none() {
            self.close_at = Some(at + self.grace);
        }
    }

    /// The run stops at `at` (cancel requests sent): the grace starts now, unless it started
    /// earlier.
    pub(super) fn restart(&mut self, at: Instant) {
        let close = at + self.grace;
        self.close_at = Some(self.close_at.map_or(close, |c| c.min(close)));
    }

    /// A session handed its outcome back.
    pub(super) fn arrived(&mut self, outcome: &mut SessionOutcome) {
        self.pending.remove(&outcome.spec.index);
        if self.closed.contains(&outcome.spec.index) {
            outcome.ended_by = EndedBy::Lost;
        }
    }

    pub(super) fn deadline(&self) -> Option<Instant> {
        self.give_up_at.or(self.close_at)
    }

    /// The deadline passed: shuts the stragglers' connections down, or (the second time)
    /// gives up on them; true when the driver should stop waiting.
    pub(super) fn on_deadline(&mut self, now: Instant) -> bool {
        if self.give_up_at.is_some() {
            return true;
        }
        self.close_all(now);
        false
    }

    /// Shuts every pending session's connection down now; the threads get `CLOSE_WAIT`.
    pub(super) fn close_all(&mut self, now: Instant) {
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
    pub(super) fn finish(self, outcomes: &mut Vec<SessionOutcome>, shared: &Shared) -> u32 {
        let grace_s = self.grace.as_secs_f64();
        for (_, (spec, _)) in self.pending {
            let mut o = SessionOutcome::new(spec);
            o.ended_by = EndedBy::Lost;
            outcomes.push(o);
        }
        let lost = outcomes
            .iter()
            .filter(|o| o.ended_by == EndedBy::Lost)
            .count() as u32;
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

/// Stack of a session thread: its loop is shallow; the histograms live on the heap.
pub(super) const SESSION_STACK: usize = 256 * 1024;

/// How long after the window's end an operation still in flight is cancelled. One that ends
/// sooner is let finish (it is not counted either way): a cancel request is a connection to
/// the server, a server process for it on PostgreSQL, and at 512 sessions cancelling every
/// session at the window's end took 0.7 s of the wind-down where their operations ended by
/// themselves within 0.3 s (issue 34).
pub(super) const CANCEL_AFTER: Duration = Duration::from_millis(100);

/// Cancels the statements of the sessions that have one in flight (`lives` in the order of
/// `cancellers`).
fn cancel_in_flight(cancellers: &[Canceller], lives: &[Arc<Live>]) {
    cancellers
        .iter()
        .zip(lives)
        .filter(|(_, live)| live.in_flight.load(Ordering::Relaxed))
        .for_each(|(c, _)| send_cancel(c));
}

/// Cancels every statement in flight so sessions return at once.
pub(super) fn cancel_all(cancellers: &[Canceller]) {
    cancellers.iter().for_each(send_cancel);
}

/// One cancel request, off the runtime's workers (it connects to the server).
fn send_cancel(c: &Canceller) {
    let c = Arc::clone(c);
    tokio::task::spawn_blocking(move || c());
}

pub(super) fn stop_cause(shared: &Shared) -> EndedBy {
    match shared
        .reason
        .lock()
        .ok()
        .and_then(|r| r.as_ref().map(|(s, _)| *s))
    {
        Some(RunStatus::Interrupted) => EndedBy::Interrupted,
        _ => EndedBy::Aborted,
    }
}
