//! The server-side loop (`run.engine: server`): each session runs its whole operation loop
//! inside the database in one call.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;

use super::coordinator::{
    END_SLACK, Ending, SESSION_STACK, Shared, Stragglers, Timeline, sleep_until_opt, stop_cause,
};
use super::outcome::{
    DriveOutcome, EndedBy, RunStatus, SessionError, SessionHistograms, SessionOutcome,
    merge_histograms,
};
use super::session::{Canceller, OpError, SessionSpec};
use super::usage::{cpu_now, cpu_since};
use crate::interrupt::Interrupts;
use crate::workload::OpKind;

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
    /// As [`Session::closer`](super::Session::closer).
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
    let mut end = Ending::default();
    let before = tokio::select! {
        r = before_window() => r.map_err(|e| (RunStatus::Failed, e)),
        by = &mut interrupt => {
            end.interrupted = true;
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
                                outcome.ended_by = EndedBy::Error;
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
            by = &mut interrupt, if !end.interrupted => end.interrupt(&shared, by),
            by = &mut hurry, if !end.hurried => end.hurry(&shared, &mut stragglers, by),
            _ = stop_rx.changed(), if end.stopped_at.is_none() => {
                if *stop_rx.borrow() {
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
    let end_instant = end
        .stopped_at
        .or_else(|| outcomes.iter().filter_map(|o| o.last_end_at).max())
        .unwrap_or(measure_from)
        .max(measure_from);
    let client_cpu = cpu_since(cpu_start);
    let (histograms, by_target) = merge_histograms(&mut outcomes);
    let (status, error) = shared.status();
    let measured_s = (end_instant - measure_from).as_secs_f64();
    DriveOutcome {
        status,
        error,
        start: timeline.utc(measure_from),
        end: timeline.utc(end_instant),
        measured_s,
        // The loops end on the server's own clock; their window is the database's.
        db_window_s: measured_s,
        warmup_s: 0.0,
        sessions: outcomes,
        histograms,
        by_target,
        timeseries: Vec::new(),
        client_cpu,
        sessions_lost,
        steady: None,
        precondition: None,
        open_loop: None,
        session_engine: None,
    }
}
