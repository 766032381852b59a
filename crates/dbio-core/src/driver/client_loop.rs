//! The client-side loop: one session's operations on its own thread, timed around each round
//! trip, through warm-up and window.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::arrivals::Schedule;
use super::coordinator::{PrePhase, Shared, Timeline, stop_cause};
use super::outcome::{EndedBy, RunStatus, SessionError, SessionHistograms, SessionOutcome};
use super::session::{OpError, Session, SessionSpec};
use super::timeseries::Live;
use crate::config::OnError;
use crate::workload::{Op, OpKind, OpStream};

pub(super) struct SessionCtx {
    pub(super) shared: Arc<Shared>,
    pub(super) live: Arc<Live>,
    pub(super) arrivals: Arc<Arrivals>,
    pub(super) warmup: Duration,
    /// The warm-up ends this much before `warmup` is over (`DriveConfig::snapshot_lead`).
    pub(super) lead: Duration,
    pub(super) on_error: OnError,
    /// Open loop: the intended starts every session takes from.
    pub(super) schedule: Option<Arc<Schedule>>,
    /// The phases before the window are the coordinator's to end (preconditioning, a wait
    /// for steady state), not a fixed warm-up's: the session runs until it posts the next.
    pub(super) coordinated: bool,
    /// Preconditioning's operations: updates only.
    pub(super) pre_ops: Option<OpStream>,
}

/// Sessions that finished their warm-up (or ended before the window).
#[derive(Default)]
pub(super) struct Arrivals {
    pub(super) count: AtomicUsize,
    pub(super) notify: Notify,
}

/// Counts the session as arrived when dropped, whatever path it leaves the warm-up by.
pub(super) struct Arrival<'a>(pub(super) &'a Arrivals);

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_add(1, Ordering::AcqRel);
        self.0.notify.notify_one();
    }
}

/// Text that differs from every earlier value of the row: SLOB 2.5 writes changing values
/// because Oracle 12.2+ skips redo for same-value updates. ':' never occurs in loaded filler.
pub(super) fn update_value(session: u32, n: u64, out: &mut String) {
    use std::fmt::Write as _;
    out.clear();
    let _ = write!(out, "upd:{session}:{n}:");
    while out.len() < 120 {
        out.push('u');
    }
}

/// One operation's kind, timing and result.
pub(super) struct Done {
    pub(super) kind: OpKind,
    pub(super) t0: Instant,
    pub(super) t1: Instant,
    pub(super) result: Result<u64, OpError>,
    /// Open loop: when the schedule meant it to start (latency counts from here).
    pub(super) intended: Option<Instant>,
}

impl Done {
    /// Latency in µs: from the intended start in an open loop, else from the start.
    pub(super) fn latency_us(&self) -> u64 {
        let from = self.intended.unwrap_or(self.t0);
        self.t1.saturating_duration_since(from).as_micros() as u64
    }

    /// How late it started behind its intended start (µs); None in a closed loop.
    pub(super) fn lag_us(&self) -> Option<u64> {
        self.intended
            .map(|at| self.t0.saturating_duration_since(at).as_micros() as u64)
    }
}

/// State of one session's operation stream across warm-up and window.
pub(super) struct Runner<S> {
    pub(super) session: S,
    pub(super) spec: SessionSpec,
    pub(super) ops: OpStream,
    pub(super) value: String,
    pub(super) n: u64,
    pub(super) shared: Arc<Shared>,
    pub(super) live: Arc<Live>,
    /// The end of the phase the session is in (warm-up, or a timed window): a think time
    /// never sleeps past it, and no operation starts after it. A 30 s think time in a 2 s
    /// window kept the run 30 s and counted an operation that ended after the window.
    pub(super) deadline: Option<Instant>,
    /// Open loop: the intended starts, shared with the other sessions.
    pub(super) schedule: Option<Arc<Schedule>>,
}

impl<S: Session> Runner<S> {
    /// The session's next operation, paced by the schedule in an open loop.
    pub(super) fn next(&mut self) -> Option<Done> {
        let op: Op = self.ops.next_op();
        self.step(op, true)
    }

    /// Thinks if the op says so, waits for its intended start when `paced` (an open loop),
    /// then runs it; `None` when the run stopped, or the phase ended, meanwhile.
    pub(super) fn step(&mut self, op: Op, paced: bool) -> Option<Done> {
        self.n += 1;
        if let Some(pause) = op.think {
            let pause = match self.deadline {
                Some(end) => pause.min(end.saturating_duration_since(Instant::now())),
                None => pause,
            };
            if !self.shared.pause(pause) || self.deadline.is_some_and(|end| Instant::now() >= end) {
                return None;
            }
        }
        let intended = match self.schedule.as_ref().filter(|_| paced) {
            Some(schedule) => Some(self.wait_for_start(schedule)?),
            None => None,
        };
        self.live.in_flight.store(true, Ordering::Relaxed);
        let t0 = Instant::now();
        let result = match op.kind {
            OpKind::Read => self.session.read(op.lo, op.hi),
            OpKind::Update => {
                update_value(self.spec.index, self.n, &mut self.value);
                self.session.update(op.lo, op.hi, &self.value)
            }
        };
        self.live.in_flight.store(false, Ordering::Relaxed);
        Some(Done {
            kind: op.kind,
            t0,
            t1: Instant::now(),
            result,
            intended,
        })
    }

    /// Takes the next intended start and waits until it comes (at once when it has passed);
    /// None when it lies past the phase's end, or the phase ended while waiting (a start
    /// taken and never begun is counted missed).
    fn wait_for_start(&self, schedule: &Schedule) -> Option<Instant> {
        let at = schedule.take()?;
        if let Some(end) = self.deadline.filter(|end| at >= *end) {
            // Nothing more to start in this phase: sleep out its end rather than take start
            // after start.
            self.shared
                .pause(end.saturating_duration_since(Instant::now()));
            return None;
        }
        let now = Instant::now();
        let woke = at <= now || self.shared.pause(at - now);
        if !woke || self.deadline.is_some_and(|end| Instant::now() >= end) {
            schedule.missed_one();
            return None;
        }
        Some(at)
    }
}

/// Records an operation's error; true when the session must stop.
pub(super) fn on_op_error(
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
        outcome.ended_by = EndedBy::Error;
        return true;
    }
    if e.fatal {
        outcome.ended_by = EndedBy::Error;
        return true;
    }
    false
}

/// The phases before the window that the coordinator ends (preconditioning, then the
/// warm-up and the wait for steady state): their operations are counted in the live
/// figures, which the coordinator judges interval by interval, and never in the result.
fn coordinated_phases<S: Session>(
    runner: &mut Runner<S>,
    outcome: &mut SessionOutcome,
    ctx: &SessionCtx,
    mut pre_ops: Option<OpStream>,
    go: Instant,
) {
    runner.deadline = None;
    loop {
        let phase = ctx.shared.pre_phase();
        if phase == PrePhase::Over || ctx.shared.stopped() {
            break;
        }
        let done = match (phase, pre_ops.as_mut()) {
            (PrePhase::Precondition, Some(ops)) => {
                let op = ops.next_op();
                runner.step(op, false)
            }
            _ => runner.next(),
        };
        // None: the phase changed or the run stopped; the loop looks again.
        let Some(done) = done else { continue };
        let k = done.kind.index();
        match &done.result {
            Ok(_) => ctx.live.record(k, done.latency_us()),
            Err(e) => {
                if ctx.shared.stopped() {
                    break;
                }
                ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                // Before the window: the negated seconds since the sessions were released.
                let at_s = -(done.t1.saturating_duration_since(go).as_secs_f64());
                if on_op_error(outcome, ctx, done.kind, e, at_s) {
                    break;
                }
            }
        }
    }
    runner.session.flush_stats();
}

pub(super) fn session_loop<S: Session>(
    session: S,
    spec: SessionSpec,
    ops: OpStream,
    mut ctx: SessionCtx,
) -> SessionOutcome {
    let pre_ops = ctx.pre_ops.take();
    let mut outcome = SessionOutcome::new(spec.clone());
    let mut runner = Runner {
        session,
        spec,
        ops,
        value: String::with_capacity(128),
        n: 0,
        shared: Arc::clone(&ctx.shared),
        live: Arc::clone(&ctx.live),
        deadline: None,
        schedule: ctx.schedule.clone(),
    };
    let arrival = Arrival(&ctx.arrivals);
    let Some(go) = ctx.shared.wait_for(|b| b.go) else {
        outcome.ended_by = stop_cause(&ctx.shared);
        return outcome;
    };

    // Warm-up: the same operations, not measured; then publish the statistics so the
    // "before" snapshot sees them.
    if ctx.coordinated {
        coordinated_phases(&mut runner, &mut outcome, &ctx, pre_ops, go);
    } else if !ctx.warmup.is_zero() {
        let warm_end = go + ctx.warmup.saturating_sub(ctx.lead);
        runner.deadline = Some(warm_end);
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
    runner.deadline = timeline.end;
    let mut hist = Box::new(SessionHistograms::default());
    let mut first_start: Option<Instant> = None;
    let mut last_end: Option<Instant> = None;
    let mut measured: u64 = 0;
    loop {
        if ctx.shared.stopped() {
            if outcome.ended_by != EndedBy::Error {
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
        if let Some(lag) = done.lag_us() {
            hist.record_lag(lag);
            ctx.live.record_lag(lag);
        }
        if let Some(end) = timeline.end.filter(|end| done.t1 > *end) {
            // In flight at the window's end (cancelled there, or it finished late): neither
            // an operation of the window nor an error; how long it had been running then is
            // kept, so that a stall is named rather than dropped.
            outcome.past_window[k] += 1;
            outcome.in_flight_at_end_s = Some(end.saturating_duration_since(done.t0).as_secs_f64());
            break;
        }
        match done.result {
            Ok(rows) => {
                let us = done.latency_us();
                hist.record(k, us.max(1));
                ctx.live.record(k, us);
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
    outcome.returned_at = Some(Instant::now());
    outcome.histograms = Some(hist);
    outcome
}
