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

mod arrivals;
mod client_loop;
mod coordinator;
mod event_loop;
mod outcome;
mod server_loop;
mod session;
mod steady;
mod timeseries;
mod usage;

pub use arrivals::{ArrivalPlan, Starts, due_before};
pub use coordinator::drive;
pub use outcome::{
    CpuUsage, DriveOutcome, EndedBy, OpenLoopOutcome, RunStatus, SessionError, SessionHistograms,
    SessionOutcome,
};
pub use server_loop::{LoopCounts, LoopSession, drive_loops};
pub use session::{Canceller, OpError, Session, SessionSpec, session_specs, session_specs_over};
pub use steady::{Steadiness, SteadyJudge};
pub use timeseries::{IntervalRow, Progress};
pub use usage::{cpu_now, max_rss_kib};

use std::time::Duration;

use crate::config::{OnError, SessionEngine, SteadyRule};
use crate::workload::Workload;

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
    /// The shards of one run open their windows at one instant, `warmup` after their common
    /// release: each session ends its warm-up this much earlier, so that the collector's
    /// "before" snapshot fits between the warm-up's end and that instant (zero: the window
    /// opens as soon as the snapshot is taken).
    pub snapshot_lead: Duration,
    /// Open-loop arrivals (`run.rate`); None: the closed loop.
    pub arrivals: Option<ArrivalPlan>,
    /// The window opens once this holds, judged after the warm-up (`run.steady`).
    pub steady: Option<SteadyRule>,
    /// Before the warm-up, updates until their rate holds this (`run.precondition`).
    pub precondition: Option<SteadyRule>,
    /// The longest either waits (`run.steady_max`).
    pub steady_max: Duration,
    /// How sessions map to OS threads (`run.session_engine`).
    pub session_engine: SessionEngine,
}

/// From this many sessions on, `auto` runs the event engine. A thread per session blocks
/// once per operation (1.01-1.05 context switches per operation at every count); the event
/// engine's two workers block only when none of their sessions has an answer waiting: at 16
/// sessions 0.19-0.96 times per operation, and its CPU per operation was below the thread
/// engine's in 12 of 14 interleaved rounds (work units 1 and 64). At 8 sessions each engine
/// was cheaper in about half the rounds; at 4 threads were cheaper in every round
/// (docs/BENCHMARKS.md, "The crossover moved to 16 sessions").
pub const EVENTS_FROM: usize = 16;

/// The session engine a run used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineChoice {
    /// `Threads` or `Events` (never `Auto`).
    pub engine: SessionEngine,
    pub why: String,
}

impl EngineChoice {
    /// What `cfg.session_engine` comes to for these sessions: the event engine needs every
    /// session's socket and a closed loop without coordinated waits.
    pub fn of<S: Session>(
        cfg: &DriveConfig,
        sessions: &[(SessionSpec, S)],
        coordinated: bool,
    ) -> EngineChoice {
        let blocker = if cfg.arrivals.is_some() {
            Some("an open loop (run.rate) paces sessions from a shared schedule")
        } else if coordinated {
            Some("run.steady and run.precondition are judged interval by interval")
        } else if sessions.iter().any(|(_, s)| s.event_fd().is_none()) {
            Some("a session has no socket to wait on")
        } else {
            None
        };
        let n = sessions.len();
        let (engine, why) = match (cfg.session_engine, blocker) {
            (SessionEngine::Threads, _) => (SessionEngine::Threads, "asked for".to_string()),
            (SessionEngine::Events, None) => (SessionEngine::Events, "asked for".to_string()),
            (SessionEngine::Events, Some(b)) => (
                SessionEngine::Threads,
                format!("events asked for, but {b}: threads"),
            ),
            (SessionEngine::Auto, Some(b)) => (SessionEngine::Threads, format!("auto: {b}")),
            (SessionEngine::Auto, None) if n >= EVENTS_FROM => (
                SessionEngine::Events,
                format!("auto: {n} sessions, events from {EVENTS_FROM}"),
            ),
            (SessionEngine::Auto, None) => (
                SessionEngine::Threads,
                format!("auto: {n} sessions, threads below {EVENTS_FROM}"),
            ),
        };
        EngineChoice { engine, why }
    }
}

/// How much earlier than the window a shard's warm-up ends (`DriveConfig::snapshot_lead`):
/// the collector's "before" snapshot took 45-184 ms on a busy host; half the warm-up at most.
pub fn snapshot_lead(warmup: Duration) -> Duration {
    SNAPSHOT_LEAD.min(warmup / 2)
}

/// The time the collector's "before" snapshot is given ahead of a shard's window.
pub const SNAPSHOT_LEAD: Duration = Duration::from_secs(1);

/// The grace a run's sessions get by default: a cancelled statement returns in
/// milliseconds, so seconds only pass when the server has stopped answering.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Condvar, Mutex};
    use std::time::Instant;

    use super::usage::vm_hwm_kib;
    use super::*;
    use crate::config::RedoStress;
    use crate::interrupt::Interrupts;

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
            snapshot_lead: Duration::ZERO,
            arrivals: None,
            steady: None,
            precondition: None,
            steady_max: Duration::from_secs(60),
            session_engine: SessionEngine::Threads,
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

    // Broke: a 30 s think time with a 2 s window kept the run 30 s and counted an
    // operation that ended after the window (issue 16).
    #[tokio::test]
    async fn a_think_time_beyond_the_window_ends_with_the_window() {
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(500)), 0);
        c.workload.think_frequency = 1;
        c.workload.think_min = Duration::from_secs(30);
        c.workload.think_max = Duration::from_secs(30);
        let started = Instant::now();
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        let took = started.elapsed();
        assert_eq!(out.status, RunStatus::Ok);
        // Tenfold below the think time: the sessions left their pause at the window's end.
        assert!(took < Duration::from_secs(3), "the run took {took:?}");
        for s in &out.sessions {
            assert_eq!(
                s.ops,
                [0, 0],
                "no operation ran after its think time: {s:?}"
            );
            assert_eq!(s.ended_by, EndedBy::Window);
        }
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
        assert!(
            out.sessions
                .iter()
                .all(|s| s.ended_by == EndedBy::Interrupted)
        );
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
            assert_eq!(lost.ended_by, EndedBy::Lost);
            assert_eq!(out.sessions[0].ended_by, EndedBy::Interrupted);
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

    /// Answers `answers` operations, then blocks (a lock wait) until its statement is
    /// cancelled, and answers the cancel as PostgreSQL does: an error, not fatal.
    struct LockedSession {
        answers: u64,
        done: u64,
        cancelled: Arc<(Mutex<bool>, Condvar)>,
        /// Cancel requests received.
        cancels: Arc<AtomicU64>,
    }

    impl Session for LockedSession {
        fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
            self.done += 1;
            if self.done <= self.answers {
                std::thread::sleep(Duration::from_millis(1));
                return Ok((hi - lo + 1) as u64);
            }
            let (lock, cv) = &*self.cancelled;
            let mut c = lock.lock().unwrap();
            while !*c {
                c = cv.wait(c).unwrap();
            }
            *c = false;
            Err(OpError {
                message: "canceling statement due to user request".into(),
                fatal: false,
            })
        }
        fn update(&mut self, lo: i64, hi: i64, _: &str) -> Result<u64, OpError> {
            self.read(lo, hi)
        }
        fn canceller(&self) -> Canceller {
            let c = Arc::clone(&self.cancelled);
            let n = Arc::clone(&self.cancels);
            Arc::new(move || {
                n.fetch_add(1, Ordering::Relaxed);
                *c.0.lock().unwrap() = true;
                c.1.notify_all();
            })
        }
        fn flush_stats(&mut self) {}
    }

    // A 5 s run during a 20 s lock wait took 22 s, reported 5 s measured and counted the
    // read that ended 17 s after the window.
    #[tokio::test]
    async fn an_operation_in_flight_at_the_window_end_is_cancelled_and_not_counted() {
        let cancels: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::default()).collect();
        let sessions: Vec<(SessionSpec, LockedSession)> =
            session_specs(2, 0, &["s1".into()], false)
                .into_iter()
                .map(|s| {
                    let answers = if s.index == 0 { u64::MAX } else { 5 };
                    let cancels = Arc::clone(&cancels[s.index as usize]);
                    (
                        s,
                        LockedSession {
                            answers,
                            done: 0,
                            cancelled: Arc::new((Mutex::new(false), Condvar::new())),
                            cancels,
                        },
                    )
                })
                .collect();
        let started = Instant::now();
        let out = drive(
            sessions,
            &cfg(WindowSpec::Time(Duration::from_millis(400)), 0),
            Interrupts::never(),
            |_| {},
            ok,
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        assert!((out.measured_s - 0.4).abs() < 1e-6, "{}", out.measured_s);
        assert!(out.db_window_s >= out.measured_s);
        let locked = &out.sessions[1];
        assert_eq!(
            locked.ops[0], 5,
            "only the reads that completed inside the window"
        );
        assert_eq!(locked.past_window[0], 1, "the blocked read is excluded");
        assert_eq!(
            locked.errors[0], 0,
            "a cancel at the window's end is not an error"
        );
        assert_eq!(locked.ended_by, EndedBy::Window);
        let counted: u64 = out.sessions.iter().map(|s| s.ops[0]).sum();
        assert_eq!(out.histograms[0].len(), counted);
        // Only the blocked read is cancelled: the other session's read in flight at the end
        // (1 ms) finished by itself, and a cancel is a connection to the server.
        let sent = |i: usize| cancels[i].load(Ordering::Relaxed);
        assert_eq!(sent(1), 1, "the blocked read's cancel");
        assert_eq!(sent(0), 0, "no cancel for a read that ended by itself");
    }

    /// A session whose service time grows with the time since it started (a device slowing
    /// down): 1 ms at the start and 5 ms more every second. It grows with time, not with
    /// each operation, so that on a loaded host, where every sleep oversleeps by several
    /// milliseconds and fewer operations run, the drift stays as large (5 ms a second beside
    /// 10 ms of oversleep is still a 25%-a-second slope; per-operation growth was not).
    struct SlowingSession {
        started: Instant,
    }

    impl SlowingSession {
        fn new() -> SlowingSession {
            SlowingSession {
                started: Instant::now(),
            }
        }
    }

    impl Session for SlowingSession {
        fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
            let grown = Duration::from_secs_f64(0.005 * self.started.elapsed().as_secs_f64());
            std::thread::sleep(Duration::from_millis(1) + grown);
            Ok((hi - lo + 1) as u64)
        }
        fn update(&mut self, lo: i64, hi: i64, _: &str) -> Result<u64, OpError> {
            self.read(lo, hi)
        }
        fn canceller(&self) -> Canceller {
            Arc::new(|| {})
        }
        fn flush_stats(&mut self) {}
    }

    fn rule(text: &str) -> crate::config::SteadyRule {
        crate::config::SteadyRule::parse(text).unwrap()
    }

    #[tokio::test]
    async fn a_steady_workload_opens_the_window_once_its_span_is_covered() {
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(300)), 0);
        c.steady = Some(rule("iops_slope<=20%:1s"));
        c.steady_max = Duration::from_secs(20);
        let started = Instant::now();
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        let s = out.steady.expect("the wait is recorded");
        assert!(s.steady, "{s:?}");
        assert_eq!(s.criterion, "iops_slope<=20%:1s");
        // One span of 10 intervals of 100 ms, and a few more on a busy host at most.
        assert!(s.after_s >= 0.95 && s.after_s < 5.0, "{s:?}");
        assert!(s.slope_pct.is_some_and(|p| p <= 20.0), "{s:?}");
        assert!(s.mean.is_some_and(|m| m > 100.0), "{s:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // The wait's operations are not the window's.
        let counted: u64 = out.sessions.iter().map(|s| s.ops[0]).sum();
        assert_eq!(out.histograms[0].len(), counted);
        assert!((out.measured_s - 0.3).abs() < 1e-6);
        let series: u64 = out.timeseries.iter().map(|r| r.reads).sum();
        assert_eq!(series, counted, "the time series holds the window only");
    }

    #[tokio::test]
    async fn lat_slope_judges_the_intervals_mean_latency() {
        // A steady 2 ms service time is steady by its latency too.
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(200)), 0);
        c.steady = Some(rule("lat_slope<=20%:1s"));
        c.steady_max = Duration::from_secs(20);
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        let s = out.steady.expect("the wait is recorded");
        assert!(s.steady && s.criterion.starts_with("lat_slope"), "{s:?}");
        // Its mean is the operations' latency in µs: 2 ms of service and a little more.
        assert!(
            s.mean.is_some_and(|m| (2000.0..20_000.0).contains(&m)),
            "{s:?}"
        );
        // A service time growing 5 ms a second is not.
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(200)), 0);
        c.steady = Some(rule("lat_slope<=5%:1s"));
        c.steady_max = Duration::from_millis(2500);
        let sessions = session_specs(2, 0, &["s1".into()], false)
            .into_iter()
            .map(|s| (s, SlowingSession::new()))
            .collect();
        let out = drive(sessions, &c, Interrupts::never(), |_| {}, ok).await;
        let s = out.steady.expect("the wait is recorded");
        assert!(!s.steady && s.slope_pct.is_some_and(|p| p > 5.0), "{s:?}");
    }

    #[tokio::test]
    async fn a_drifting_workload_is_not_steady_and_the_window_opens_at_the_cap() {
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(200)), 0);
        c.steady = Some(rule("iops_slope<=5%:1s"));
        c.steady_max = Duration::from_millis(2500);
        // Service 5 ms a second slower: from 1 ms to over 13 ms within the cap, the rate
        // falling all along.
        let sessions = session_specs(2, 0, &["s1".into()], false)
            .into_iter()
            .map(|s| (s, SlowingSession::new()))
            .collect();
        let out = drive(sessions, &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        let s = out.steady.expect("the wait is recorded");
        assert!(!s.steady, "{s:?}");
        assert!(s.after_s >= 2.5 && s.after_s < 4.0, "{s:?}");
        assert!(s.slope_pct.is_some_and(|p| p > 5.0), "{s:?}");
        assert!(s.describe().starts_with("NOT STEADY"));
        assert!(!out.histograms[0].is_empty(), "the window still measured");
    }

    #[tokio::test]
    async fn preconditioning_updates_until_steady_then_the_window_reads() {
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(300)), 0);
        c.precondition = Some(rule("iops_slope<=20%:1s"));
        c.steady_max = Duration::from_secs(20);
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        let p = out.precondition.expect("preconditioning is recorded");
        assert!(p.steady && p.after_s >= 0.95, "{p:?}");
        assert!(out.steady.is_none());
        for s in &out.sessions {
            assert_eq!(s.ops[1], 0, "readers do not update in the window: {s:?}");
            assert!(s.ops[0] > 0);
        }
    }

    #[tokio::test]
    async fn an_interrupt_ends_the_wait_for_steady_state() {
        let mut c = cfg(WindowSpec::Time(Duration::from_secs(5)), 0);
        c.steady = Some(rule("iops_slope<=1%:10s"));
        c.steady_max = Duration::from_secs(60);
        let started = Instant::now();
        let out = drive(
            fakes(2, None),
            &c,
            Interrupts::after(Duration::from_millis(300)),
            |_| {},
            ok,
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status, RunStatus::Interrupted);
        assert_eq!(out.histograms[0].len(), 0, "nothing measured");
    }

    fn open(rate: f64) -> ArrivalPlan {
        ArrivalPlan {
            rate_per_s: rate,
            arrival: crate::config::Arrival::Fixed,
            seed: 1,
        }
    }

    #[tokio::test]
    async fn an_open_loop_below_capacity_starts_on_time() {
        // 2 sessions of 2 ms: 1,000 operations/s at most; 100/s keeps them mostly idle.
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(600)), 0);
        c.arrivals = Some(open(100.0));
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        let o = out.open_loop.expect("the schedule is recorded");
        assert_eq!(o.scheduled, 60);
        let done: u64 = out
            .sessions
            .iter()
            .map(|s| s.ops[0] + s.past_window[0])
            .sum();
        assert!(o.missed_starts <= 2, "{}", o.missed_starts);
        assert_eq!(done + o.missed_starts, o.scheduled);
        // Lag is thread wake-up time: far below the 10 ms between starts.
        assert!(
            o.lag.value_at_quantile(0.5) < 5_000,
            "{}",
            o.lag.value_at_quantile(0.5)
        );
        assert!(out.histograms[0].value_at_quantile(0.5) < 10_000);
        let ops_per_s = out.histograms[0].len() as f64 / out.measured_s;
        assert!((ops_per_s - 100.0).abs() < 20.0, "{ops_per_s}");
    }

    #[tokio::test]
    async fn an_open_loop_above_capacity_lags_more_and_more_and_latency_counts_from_the_intended_start()
     {
        // 4,000/s against 1,000/s at most: every interval the backlog, and the lag, grow.
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(1000)), 0);
        c.interval = Duration::from_millis(200);
        c.arrivals = Some(open(4000.0));
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        let o = out.open_loop.expect("the schedule is recorded");
        assert_eq!(o.scheduled, 4000);
        let started = o.lag.len();
        assert!(
            o.missed_starts >= 2000,
            "{} of 4000 missed",
            o.missed_starts
        );
        assert_eq!(started + o.missed_starts, o.scheduled);
        let lags: Vec<f64> = out
            .timeseries
            .iter()
            .filter_map(|r| r.lag_mean_us)
            .collect();
        assert!(lags.len() >= 4, "{:?}", out.timeseries);
        assert!(
            lags[lags.len() - 1] > 3.0 * lags[0] && lags[lags.len() - 1] > 300_000.0,
            "lag grows through the window: {lags:?}"
        );
        // Service is 2 ms; from the intended start the p99 is most of the window.
        let p99 = out.histograms[0].value_at_quantile(0.99);
        assert!(p99 > 400_000, "p99 {p99} µs");
    }

    // A think time of 30 s with a 2 s window counted a read that ended 28 s after it.
    #[tokio::test]
    async fn a_think_time_never_carries_a_session_past_the_window() {
        let mut c = cfg(WindowSpec::Time(Duration::from_millis(300)), 0);
        c.workload.think_frequency = 1;
        c.workload.think_min = Duration::from_secs(30);
        c.workload.think_max = Duration::from_secs(30);
        let started = Instant::now();
        let out = drive(fakes(2, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(out.status, RunStatus::Ok);
        for s in &out.sessions {
            assert_eq!(
                s.ops,
                [0, 0],
                "every operation would have started after the window"
            );
        }
        assert!(out.db_window_s < 5.0, "{}", out.db_window_s);
    }

    /// A session over a socket pair whose far end, a thread of its own, answers each
    /// request after the service time: one fake that both engines drive, the thread engine
    /// through its blocking calls, the event engine through its socket.
    struct PipeSession {
        sock: std::os::unix::net::UnixStream,
        fail_after: Option<u64>,
        done: u64,
        sent_rows: u64,
    }

    impl PipeSession {
        fn new(service: Duration, fail_after: Option<u64>) -> PipeSession {
            use std::io::{Read, Write};
            let (sock, mut server) = std::os::unix::net::UnixStream::pair().unwrap();
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                while let Ok(1) = server.read(&mut b) {
                    std::thread::sleep(service);
                    if server.write_all(b"k").is_err() {
                        break;
                    }
                }
            });
            PipeSession {
                sock,
                fail_after,
                done: 0,
                sent_rows: 0,
            }
        }

        fn answered(&mut self) -> Result<u64, OpError> {
            self.done += 1;
            if self.fail_after.is_some_and(|n| self.done > n) {
                return Err(OpError {
                    message: "boom".into(),
                    fatal: false,
                });
            }
            Ok(self.sent_rows)
        }
    }

    impl Session for PipeSession {
        fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
            use std::io::{Read, Write};
            self.sent_rows = (hi - lo + 1) as u64;
            let mut b = [0u8; 1];
            self.sock.write_all(b"r").unwrap();
            self.sock.read_exact(&mut b).unwrap();
            self.answered()
        }
        fn update(&mut self, lo: i64, hi: i64, value: &str) -> Result<u64, OpError> {
            assert!(value.starts_with("upd:") && value.len() == 120);
            self.read(lo, hi)
        }
        fn canceller(&self) -> Canceller {
            Arc::new(|| {})
        }
        fn flush_stats(&mut self) {}
        fn event_fd(&self) -> Option<std::os::fd::RawFd> {
            use std::os::fd::AsRawFd;
            Some(self.sock.as_raw_fd())
        }
        fn set_nonblocking(&mut self, on: bool) -> Result<(), OpError> {
            self.sock.set_nonblocking(on).map_err(|e| OpError {
                message: e.to_string(),
                fatal: true,
            })
        }
        fn send(&mut self, lo: i64, hi: i64, value: Option<&str>) -> Result<bool, OpError> {
            use std::io::Write;
            if let Some(v) = value {
                assert!(v.starts_with("upd:") && v.len() == 120);
            }
            self.sent_rows = (hi - lo + 1) as u64;
            self.sock
                .write_all(b"r")
                .map(|()| true)
                .map_err(|e| OpError {
                    message: e.to_string(),
                    fatal: true,
                })
        }
        fn poll_answer(&mut self) -> Result<Option<u64>, OpError> {
            use std::io::Read;
            let mut b = [0u8; 1];
            match self.sock.read(&mut b) {
                Ok(1) => self.answered().map(Some),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                other => Err(OpError {
                    message: format!("closed: {other:?}"),
                    fatal: true,
                }),
            }
        }
    }

    fn pipes(n: u32, fail_after: Option<u64>) -> Vec<(SessionSpec, PipeSession)> {
        session_specs(n, 0, &["s1".into()], false)
            .into_iter()
            .map(|s| (s, PipeSession::new(Duration::from_millis(2), fail_after)))
            .collect()
    }

    fn on(engine: SessionEngine, mut c: DriveConfig) -> DriveConfig {
        c.session_engine = engine;
        c
    }

    fn engine_of(out: &DriveOutcome) -> SessionEngine {
        out.session_engine.as_ref().expect("a client run").engine
    }

    #[tokio::test]
    async fn the_event_engine_counts_what_the_thread_engine_counts() {
        // The same sessions, seeds and loops: every session's operations, rows and
        // histogram entries are the same on both engines.
        let mut runs = Vec::new();
        for engine in [SessionEngine::Threads, SessionEngine::Events] {
            let c = on(engine, cfg(WindowSpec::Loops(50), 20));
            let out = drive(pipes(6, None), &c, Interrupts::never(), |_| {}, ok).await;
            assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
            assert_eq!(engine_of(&out), engine);
            assert_eq!(out.histograms[0].len() + out.histograms[1].len(), 300);
            let series: u64 = out.timeseries.iter().map(|r| r.reads + r.updates).sum();
            assert_eq!(series, 300, "the time series accounts for every operation");
            // Every latency includes the far end's 2 ms.
            assert!(
                out.histograms[0].min() >= 2000,
                "{}",
                out.histograms[0].min()
            );
            runs.push(out);
        }
        for (t, e) in runs[0].sessions.iter().zip(&runs[1].sessions) {
            assert_eq!(t.spec, e.spec);
            assert_eq!((t.ops, t.rows), (e.ops, e.rows), "{}", t.spec.name);
            assert_eq!(e.ops[0] + e.ops[1], 50);
            assert_eq!(e.ops[1], 10, "20% of 50 are updates");
            assert_eq!(e.ended_by, EndedBy::Window);
            assert!(e.start.is_some() && e.end > e.start);
        }
        assert_eq!(runs[0].histograms[1].len(), runs[1].histograms[1].len());
    }

    #[tokio::test]
    async fn the_event_engine_bounds_the_window_and_keeps_sessions_apart() {
        let c = on(
            SessionEngine::Events,
            cfg(WindowSpec::Time(Duration::from_millis(400)), 0),
        );
        let out = drive(pipes(8, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok, "{:?}", out.error);
        assert!((out.measured_s - 0.4).abs() < 1e-6, "{}", out.measured_s);
        let counted: u64 = out.sessions.iter().map(|s| s.ops[0]).sum();
        assert_eq!(out.histograms[0].len(), counted);
        for s in &out.sessions {
            // 2 ms per operation: at most 200 in 400 ms, and many on any machine.
            assert!(s.ops[0] > 10 && s.ops[0] <= 200, "{s:?}");
            assert!(s.past_window[0] <= 1, "{s:?}");
            assert_eq!(s.ended_by, EndedBy::Window);
        }
        assert!(out.histograms[0].min() >= 2000);
    }

    #[tokio::test]
    async fn the_event_engine_ends_think_times_with_the_window() {
        let mut c = on(
            SessionEngine::Events,
            cfg(WindowSpec::Time(Duration::from_millis(300)), 0),
        );
        c.workload.think_frequency = 1;
        c.workload.think_min = Duration::from_secs(30);
        c.workload.think_max = Duration::from_secs(30);
        let started = Instant::now();
        let out = drive(pipes(4, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(engine_of(&out), SessionEngine::Events);
        for s in &out.sessions {
            assert_eq!(s.ops, [0, 0], "{s:?}");
            assert_eq!(s.ended_by, EndedBy::Window);
        }
        // A short think time paces the sessions: every other operation waits 20 ms.
        let mut c = on(
            SessionEngine::Events,
            cfg(WindowSpec::Time(Duration::from_millis(500)), 0),
        );
        c.workload.think_frequency = 1;
        c.workload.think_min = Duration::from_millis(20);
        c.workload.think_max = Duration::from_millis(20);
        let out = drive(pipes(4, None), &c, Interrupts::never(), |_| {}, ok).await;
        for s in &out.sessions {
            // At most 500 / (20 + 2) operations; well above nothing.
            assert!(s.ops[0] >= 5 && s.ops[0] <= 23, "{s:?}");
        }
    }

    #[tokio::test]
    async fn the_event_engine_aborts_on_the_first_error_or_counts_them() {
        let c = on(SessionEngine::Events, cfg(WindowSpec::Loops(100), 0));
        let out = drive(pipes(3, Some(5)), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Failed);
        assert!(out.error.as_deref().unwrap_or("").contains("boom"));
        let mut c = on(SessionEngine::Events, cfg(WindowSpec::Loops(20), 0));
        c.on_error = OnError::Continue;
        let out = drive(pipes(3, Some(5)), &c, Interrupts::never(), |_| {}, ok).await;
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
    async fn the_event_engine_stops_on_an_interrupt_and_excludes_the_warmup() {
        let c = on(
            SessionEngine::Events,
            cfg(WindowSpec::Time(Duration::from_secs(60)), 0),
        );
        let started = Instant::now();
        let out = drive(
            pipes(4, None),
            &c,
            Interrupts::after(Duration::from_millis(200)),
            |_| {},
            ok,
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status, RunStatus::Interrupted);
        assert!(out.measured_s < 1.0, "{}", out.measured_s);
        assert!(
            out.sessions
                .iter()
                .all(|s| s.ended_by == EndedBy::Interrupted)
        );
        let mut c = on(SessionEngine::Events, cfg(WindowSpec::Loops(10), 0));
        c.warmup = Duration::from_millis(100);
        let out = drive(pipes(4, None), &c, Interrupts::never(), |_| {}, ok).await;
        assert_eq!(out.status, RunStatus::Ok);
        for s in &out.sessions {
            assert_eq!(s.ops[0], 10, "warm-up operations are not counted");
        }
    }

    /// Only what the engine choice looks at: a socket, or none.
    struct Socketed(bool);

    impl Session for Socketed {
        fn read(&mut self, _: i64, _: i64) -> Result<u64, OpError> {
            Ok(0)
        }
        fn update(&mut self, _: i64, _: i64, _: &str) -> Result<u64, OpError> {
            Ok(0)
        }
        fn canceller(&self) -> Canceller {
            Arc::new(|| {})
        }
        fn flush_stats(&mut self) {}
        fn event_fd(&self) -> Option<std::os::fd::RawFd> {
            self.0.then_some(0)
        }
    }

    #[test]
    fn auto_runs_threads_below_16_sessions_and_whenever_events_cannot() {
        let of = |n: u32, socket: bool, c: &DriveConfig| {
            let s: Vec<(SessionSpec, Socketed)> = session_specs(n, 0, &["s1".into()], false)
                .into_iter()
                .map(|s| (s, Socketed(socket)))
                .collect();
            EngineChoice::of(c, &s, c.steady.is_some())
        };
        let auto = on(SessionEngine::Auto, cfg(WindowSpec::Loops(1), 0));
        assert_eq!(of(15, true, &auto).engine, SessionEngine::Threads);
        assert_eq!(of(16, true, &auto).engine, SessionEngine::Events);
        let socketless = of(16, false, &auto);
        assert_eq!(socketless.engine, SessionEngine::Threads);
        assert!(socketless.why.contains("no socket"), "{}", socketless.why);
        let mut open_loop = on(SessionEngine::Events, cfg(WindowSpec::Loops(1), 0));
        open_loop.arrivals = Some(open(100.0));
        let forced = of(8, true, &open_loop);
        assert_eq!(forced.engine, SessionEngine::Threads);
        assert!(forced.why.contains("run.rate"), "{}", forced.why);
        let threads = on(SessionEngine::Threads, cfg(WindowSpec::Loops(1), 0));
        assert_eq!(of(500, true, &threads).engine, SessionEngine::Threads);
        let events = on(SessionEngine::Events, cfg(WindowSpec::Loops(1), 0));
        assert_eq!(of(1, true, &events).engine, SessionEngine::Events);
    }
}
