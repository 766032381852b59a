//! The event engine: many sessions per OS thread. Each worker (one per core) owns a share of
//! the sessions and waits on all their sockets at once (epoll through mio, edge-triggered);
//! an operation is one non-blocking write and, when its socket says so, the reads of its
//! answer. A thread per session wakes once per operation and context-switches every time;
//! a worker wakes once for every answer that arrived meanwhile, so its cost per operation
//! falls as sessions grow where the thread engine's rises (issue 34: from 32 sessions the
//! thread engine cost more CPU per operation than pgbench's event loop).
//!
//! What the thread engine guarantees holds here too, operation by operation: the same
//! operation stream per session, its latency timed from the write to the answer and
//! recorded in the session's own histogram, the release and the window posted by the
//! coordinator, think times that never carry a session past its phase's end, an operation
//! in flight at the window's end cancelled and not counted, `on_error` as in
//! [`super::client_loop`]. Open loops and the coordinated waits (steady state,
//! preconditioning) stay with the thread engine.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use tokio::sync::mpsc::UnboundedSender;

use super::client_loop::{Arrival, Done, SessionCtx, on_op_error, update_value};
use super::coordinator::{Shared, Timeline, stop_cause};
use super::outcome::{EndedBy, RunStatus, SessionError, SessionHistograms, SessionOutcome};
use super::session::{OpError, Session, SessionSpec};
use crate::workload::{Op, OpKind, OpStream};

/// The token of the worker's waker: the coordinator posted on the board.
pub(super) const WAKE: Token = Token(usize::MAX);

/// One session as a worker drives it.
pub(super) struct Slot<S> {
    session: S,
    spec: SessionSpec,
    ops: OpStream,
    ctx: SessionCtx,
    outcome: SessionOutcome,
    value: String,
    n: u64,
    state: State,
    /// Still to be counted among the sessions that finished their warm-up.
    arrival_due: bool,
    /// Its socket is watched for writable edges too (a request once did not fit).
    writable: bool,
    hist: Box<SessionHistograms>,
    first_start: Option<Instant>,
    last_end: Option<Instant>,
    measured: u64,
}

impl<S: Session> Slot<S> {
    pub(super) fn new(session: S, spec: SessionSpec, ops: OpStream, ctx: SessionCtx) -> Self {
        Slot {
            session,
            outcome: SessionOutcome::new(spec.clone()),
            spec,
            ops,
            ctx,
            value: String::with_capacity(128),
            n: 0,
            state: State::Idle,
            arrival_due: true,
            writable: false,
            hist: Box::default(),
            first_start: None,
            last_end: None,
            measured: 0,
        }
    }
}

#[derive(Clone, Copy)]
enum State {
    /// Between operations (about to start the next).
    Idle,
    /// In its think time before `op` (its end is in the worker's heap).
    Thinking { op: Op },
    /// Its operation is on the wire since `t0`.
    Busy { kind: OpKind, t0: Instant },
    /// Its operation failed as it was sent; the loop records it next.
    Failing,
    /// Done with the phase (its end, or an error or a stop ended the session).
    Parked,
    /// Ended for good: no more phases.
    Ended,
}

/// The phase the worker drives its sessions through.
#[derive(Clone, Copy)]
enum Phase {
    /// Unmeasured, until `end`.
    Warmup { end: Instant },
    /// The measured window.
    Window(Timeline),
}

impl Phase {
    fn deadline(&self) -> Option<Instant> {
        match self {
            Phase::Warmup { end, .. } => Some(*end),
            Phase::Window(t) => t.end,
        }
    }
}

/// A worker: its poll (with the coordinator's waker registered), its sessions.
pub(super) struct Worker<S> {
    pub(super) poll: Poll,
    pub(super) slots: Vec<Slot<S>>,
    pub(super) shared: Arc<Shared>,
    pub(super) warmup: Duration,
    pub(super) lead: Duration,
    pub(super) tx: UnboundedSender<SessionOutcome>,
    /// Operations that failed as they were sent, recorded by the loop (not from `send`, so
    /// that a run of failing sends does not recurse).
    pub(super) failed: Vec<(usize, Done)>,
}

impl<S: Session> Worker<S> {
    /// Runs the worker's sessions through warm-up and window, and hands each session's
    /// outcome back as the thread engine does.
    pub(super) fn run(mut self) {
        let Some(go) = self.shared.wait_for(|b| b.go) else {
            self.end_all(|_| {});
            return;
        };
        if let Err(e) = self.register() {
            let what = format!("the event engine could not watch a session's socket: {e}");
            self.shared.stop(RunStatus::Failed, what.clone());
            self.end_all(|o| {
                o.ended_by = EndedBy::Error;
                o.first_error = Some(SessionError {
                    at_s: 0.0,
                    kind: OpKind::Read,
                    message: what.clone(),
                });
            });
            return;
        }
        if !self.warmup.is_zero() {
            let end = go + self.warmup.saturating_sub(self.lead);
            self.drive(Phase::Warmup { end });
            // The statistics of the warm-up are published before the "before" snapshot.
            self.flush_all();
        }
        for slot in &mut self.slots {
            if std::mem::take(&mut slot.arrival_due) {
                drop(Arrival(&slot.ctx.arrivals));
            }
            if matches!(slot.state, State::Parked) {
                slot.state = State::Idle;
            }
        }
        let timeline = self
            .shared
            .wait_for(|b| b.window)
            .unwrap_or_else(Timeline::empty);
        self.drive(Phase::Window(timeline));
        self.flush_all();
        let returned = Instant::now();
        for mut slot in self.slots.drain(..) {
            let o = &mut slot.outcome;
            o.start = slot.first_start.map(|t| timeline.utc(t));
            o.end = slot.last_end.map(|t| timeline.utc(t));
            o.last_end_at = slot.last_end;
            o.returned_at = Some(returned);
            o.histograms = Some(slot.hist);
            let _ = self.tx.send(slot.outcome);
        }
    }

    /// Every session's socket in the poll, non-blocking.
    fn register(&mut self) -> io::Result<()> {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let fd = slot
                .session
                .event_fd()
                .ok_or_else(|| io::Error::other(format!("{} has no socket", slot.spec.name)))?;
            slot.session
                .set_nonblocking(true)
                .map_err(|e| io::Error::other(e.message))?;
            // Readable only: on a Unix socket every request the server reads would also
            // signal writable, a second wake-up per operation for nothing.
            self.poll
                .registry()
                .register(&mut SourceFd(&fd), Token(i), Interest::READABLE)?;
        }
        Ok(())
    }

    /// Ends every session before the window, as the thread engine's do when the run stopped
    /// before their release.
    fn end_all(&mut self, mut f: impl FnMut(&mut SessionOutcome)) {
        for mut slot in self.slots.drain(..) {
            slot.outcome.ended_by = stop_cause(&self.shared);
            f(&mut slot.outcome);
            if slot.arrival_due {
                drop(Arrival(&slot.ctx.arrivals));
            }
            slot.outcome.returned_at = Some(Instant::now());
            let _ = self.tx.send(slot.outcome);
        }
    }

    /// Publishes each session's statistics: a short blocking exchange on each, once no
    /// operation of the worker is in flight (a flush between two measured operations of
    /// other sessions would add to their latencies).
    fn flush_all(&mut self) {
        for slot in &mut self.slots {
            if slot.session.set_nonblocking(false).is_ok() {
                slot.session.flush_stats();
                let _ = slot.session.set_nonblocking(true);
            }
        }
    }

    /// Drives the sessions until each is done with `phase`.
    fn drive(&mut self, phase: Phase) {
        let mut events = Events::with_capacity(1024.min(self.slots.len().max(1) + 1));
        let mut thinking: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
        let mut active = 0usize;
        let mut stop_seen = false;
        for i in 0..self.slots.len() {
            if matches!(self.slots[i].state, State::Idle) {
                active += 1;
                self.advance(i, &phase, &mut thinking, &mut active);
            }
        }
        while active > 0 {
            for (i, done) in std::mem::take(&mut self.failed) {
                self.slots[i].state = State::Idle;
                if self.complete(i, done, &phase) {
                    self.advance(i, &phase, &mut thinking, &mut active);
                } else {
                    active -= 1;
                }
            }
            if active == 0 {
                break;
            }
            if !stop_seen && self.shared.stopped() {
                stop_seen = true;
                // Sessions between operations end now; those in flight when their
                // (cancelled) operation returns.
                for i in 0..self.slots.len() {
                    if matches!(self.slots[i].state, State::Idle | State::Thinking { .. }) {
                        self.stop_slot(i);
                        active -= 1;
                    }
                }
                thinking.clear();
                continue;
            }
            let now = Instant::now();
            while let Some(Reverse((until, i))) = thinking.peek().copied() {
                if until > now {
                    break;
                }
                thinking.pop();
                if let State::Thinking { op } = self.slots[i].state {
                    self.slots[i].state = State::Idle;
                    if phase.deadline().is_some_and(|end| now >= end) {
                        self.slots[i].state = State::Parked;
                        active -= 1;
                        continue;
                    }
                    self.send(i, op);
                }
            }
            if active == 0 {
                break;
            }
            let timeout = if self.failed.is_empty() {
                thinking
                    .peek()
                    .map(|Reverse((until, _))| until.saturating_duration_since(Instant::now()))
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                self.shared.stop(
                    RunStatus::Failed,
                    format!("the event engine's poll failed: {e}"),
                );
                continue;
            }
            for ev in events.iter() {
                let i = ev.token().0;
                if ev.token() == WAKE || i >= self.slots.len() {
                    continue;
                }
                let State::Busy { kind, t0 } = self.slots[i].state else {
                    continue;
                };
                let result = match self.slots[i].session.poll_answer() {
                    Ok(None) => continue,
                    Ok(Some(rows)) => Ok(rows),
                    Err(e) => Err(e),
                };
                let done = Done {
                    kind,
                    t0,
                    t1: Instant::now(),
                    result,
                    intended: None,
                };
                self.slots[i].state = State::Idle;
                if self.complete(i, done, &phase) {
                    self.advance(i, &phase, &mut thinking, &mut active);
                } else {
                    active -= 1;
                }
            }
        }
    }

    /// A session whose run stopped: ended with the stop's cause (unless its own error
    /// ended it).
    fn stop_slot(&mut self, i: usize) {
        stop_outcome(&mut self.slots[i], &self.shared);
    }

    /// Records a finished operation as the thread engine's loop does; false when the
    /// session is done with the phase (it is then parked or ended).
    fn complete(&mut self, i: usize, done: Done, phase: &Phase) -> bool {
        let shared = &*self.shared;
        let slot = &mut self.slots[i];
        slot.ctx.live.in_flight.store(false, Ordering::Relaxed);
        let k = done.kind.index();
        match phase {
            Phase::Warmup { end, .. } => {
                if let Err(e) = &done.result {
                    if shared.stopped() {
                        stop_outcome(slot, shared);
                        return false;
                    }
                    let at_s = -(end.saturating_duration_since(done.t1).as_secs_f64());
                    if on_op_error(&mut slot.outcome, &slot.ctx, done.kind, e, at_s) {
                        slot.state = State::Ended;
                        return false;
                    }
                }
                true
            }
            Phase::Window(timeline) => {
                if let Some(end) = timeline.end.filter(|end| done.t1 > *end) {
                    // In flight at the window's end: neither an operation of the window nor
                    // an error (see `client_loop::session_loop`).
                    slot.outcome.past_window[k] += 1;
                    slot.outcome.in_flight_at_end_s =
                        Some(end.saturating_duration_since(done.t0).as_secs_f64());
                    slot.state = State::Ended;
                    return false;
                }
                match done.result {
                    Ok(rows) => {
                        let us = done.latency_us();
                        slot.hist.record(k, us.max(1));
                        slot.ctx.live.record(k, us);
                        slot.outcome.ops[k] += 1;
                        slot.outcome.rows[k] += rows;
                        slot.measured += 1;
                        slot.first_start.get_or_insert(done.t0);
                        slot.last_end = Some(done.t1);
                    }
                    Err(e) => {
                        if shared.stopped() {
                            // Cancelled because the run is stopping.
                            stop_outcome(slot, shared);
                            return false;
                        }
                        slot.outcome.errors[k] += 1;
                        slot.ctx.live.errors.fetch_add(1, Ordering::Relaxed);
                        slot.measured += 1;
                        if on_op_error(
                            &mut slot.outcome,
                            &slot.ctx,
                            done.kind,
                            &e,
                            timeline.offset_s(done.t1),
                        ) {
                            slot.state = State::Ended;
                            return false;
                        }
                    }
                }
                true
            }
        }
    }

    /// Starts the session's next operation (after its think time), or parks it when its
    /// phase is over or the run stopped.
    fn advance(
        &mut self,
        i: usize,
        phase: &Phase,
        thinking: &mut BinaryHeap<Reverse<(Instant, usize)>>,
        active: &mut usize,
    ) {
        let now = Instant::now();
        if self.shared.stopped() {
            self.stop_slot(i);
            *active -= 1;
            return;
        }
        let deadline = phase.deadline();
        let slot = &mut self.slots[i];
        let over = deadline.is_some_and(|end| now >= end)
            || match phase {
                Phase::Window(t) => t.loops.is_some_and(|l| slot.measured >= l),
                Phase::Warmup { .. } => false,
            };
        if over {
            slot.state = State::Parked;
            *active -= 1;
            return;
        }
        let op = slot.ops.next_op();
        slot.n += 1;
        if let Some(pause) = op.think {
            let pause = match deadline {
                Some(end) => pause.min(end.saturating_duration_since(now)),
                None => pause,
            };
            slot.state = State::Thinking { op };
            thinking.push(Reverse((now + pause, i)));
            return;
        }
        self.send(i, op);
    }

    /// Writes the operation; a send that fails completes it at once with the error.
    fn send(&mut self, i: usize, op: Op) {
        let slot = &mut self.slots[i];
        let t0 = Instant::now();
        let sent = match op.kind {
            OpKind::Read => slot.session.send(op.lo, op.hi, None),
            OpKind::Update => {
                update_value(slot.spec.index, slot.n, &mut slot.value);
                slot.session.send(op.lo, op.hi, Some(&slot.value))
            }
        };
        match sent {
            Ok(whole) => {
                slot.state = State::Busy { kind: op.kind, t0 };
                slot.ctx.live.in_flight.store(true, Ordering::Relaxed);
                if !whole && !slot.writable {
                    // The rest of the request waits for room: from now on the socket's
                    // writable edges reach `poll_answer` too.
                    slot.writable = true;
                    if let Some(fd) = slot.session.event_fd() {
                        let _ = self.poll.registry().reregister(
                            &mut SourceFd(&fd),
                            Token(i),
                            Interest::READABLE | Interest::WRITABLE,
                        );
                    }
                }
            }
            Err(e) => {
                slot.state = State::Failing;
                self.failed.push((
                    i,
                    Done {
                        kind: op.kind,
                        t0,
                        t1: Instant::now(),
                        result: Err::<u64, OpError>(e),
                        intended: None,
                    },
                ));
            }
        }
    }
}

/// Ends a session whose run stopped: the stop's cause, unless its own error ended it.
fn stop_outcome<S>(slot: &mut Slot<S>, shared: &Shared) {
    if slot.outcome.ended_by != EndedBy::Error {
        slot.outcome.ended_by = stop_cause(shared);
    }
    slot.state = State::Ended;
}
