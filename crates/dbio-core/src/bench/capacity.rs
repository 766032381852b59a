//! `dbio capacity` over any backend: a ramp whose steps a search chooses (see
//! [`crate::capacity`]), through the same pipeline, files, report, history and compare as a
//! ramp, and whose ramp.json ends with the answer.

use crate::Config;
use crate::backend::{Backend, BackendError};
use crate::capacity::{CapacityPlan, CapacityResult, Point};
use crate::config::{Rate, ReadPath, SearchOver, SessionLoop};
use crate::interrupt::Interrupts;
use crate::summary::StepSummary;

use super::ramp::{PlannedRun, RampOutcome, RampProgress, Ramping, StepPlanner, run_planned};
use super::run::Calibrate;

/// The search as the ramp pipeline sees it.
struct CapacitySearch<'a> {
    plan: CapacityPlan,
    config: &'a Config,
    calibrate: Option<Calibrate<'a>>,
    repeat: u32,
    /// Runs planned so far.
    runs: u64,
}

impl CapacitySearch<'_> {
    fn run_at(&mut self, at: Point) -> PlannedRun {
        let r = &self.config.run;
        // Each window reads keys of its own: the blocks the window before read are still in
        // shared_buffers, and reading them again would be buffer hits, not the device's reads.
        let seed = Some(r.seed.wrapping_add(self.runs));
        self.runs += 1;
        let repeat = if self.plan.search.repeating() {
            self.repeat += 1;
            Some(self.repeat)
        } else {
            None
        };
        match self.plan.over {
            SearchOver::Sessions => PlannedRun {
                readers: at.min(u32::MAX as u64) as u32,
                writers: r.writers,
                update_pct: r.update_pct,
                rate_per_s: None,
                repeat,
                seed,
            },
            SearchOver::Rate => PlannedRun {
                readers: r.readers,
                writers: r.writers,
                update_pct: r.update_pct,
                rate_per_s: Some(at),
                repeat,
                seed,
            },
        }
    }

    fn point(&self, run: &PlannedRun) -> Point {
        match self.plan.over {
            SearchOver::Sessions => run.readers as Point,
            SearchOver::Rate => run.rate_per_s.unwrap_or(0),
        }
    }
}

impl StepPlanner for CapacitySearch<'_> {
    fn first(&mut self) -> Option<PlannedRun> {
        let at = self.plan.search.first();
        Some(self.run_at(at))
    }

    fn next(&mut self, done: &PlannedRun, summary: &StepSummary) -> Option<PlannedRun> {
        let at = self.point(done);
        let next = self.plan.judge(at, summary)?;
        Some(self.run_at(next))
    }

    fn left_hint(&self) -> u64 {
        self.plan.search.left_hint()
    }

    fn capacity(&self, steps: &[StepSummary]) -> Option<CapacityResult> {
        let mut result = self.plan.result(steps);
        let answer = result
            .answer_step
            .as_ref()
            .and_then(|name| steps.iter().find(|s| &s.step == name));
        if let (Some(calibrate), Some(s)) = (self.calibrate, answer) {
            let iops = s.db_read_iops.as_ref().map(|v| v.mean);
            let latency = s.db_avg_read_latency_us.as_ref().map(|v| v.mean);
            // On the index path with a closed loop each session has one read in flight; else
            // the reads in flight are what Little's law gives: IOPS x time per read.
            let one_each = self.plan.over == SearchOver::Sessions
                && self.config.run.read_path == ReadPath::Index
                && self.config.run.rate.is_none();
            let (level, basis) = match (one_each, iops, latency) {
                (true, _, _) => (
                    s.key.readers,
                    "the answer's reader sessions: one synchronous read each on the index path".to_string(),
                ),
                (false, Some(i), Some(l)) => {
                    let n = (i * l / 1e6).ceil().max(1.0);
                    (
                        n.min(u32::MAX as f64) as u32,
                        format!("Little's law: {i:.0} DB reads/s x {l:.0} µs each = {:.1} in flight", i * l / 1e6),
                    )
                }
                _ => (
                    s.key.readers,
                    "the answer's sessions (the DB read latency that would give the reads in flight is unknown)".to_string(),
                ),
            };
            result.device = calibrate.compare_at(level.max(1), iops, latency);
            result.device_outstanding_basis = result.device.as_ref().map(|_| basis);
        }
        Some(result)
    }

    fn stop_on_failure(&self) -> bool {
        true
    }

    fn ended_early(&mut self, why: &str) {
        self.plan.stopped.get_or_insert_with(|| {
            format!(
                "the search did not finish: {why}; the answer, if any, is the best step met so far, not one the search \
                 bracketed"
            )
        });
    }
}

/// Searches for the highest figure meeting `capacity.slo` and writes the ramp's files with
/// the answer; `targets` are the targets as results show them.
#[allow(clippy::too_many_arguments)]
pub async fn capacity<B: Backend>(
    backends: &mut [B],
    config: &Config,
    targets: &[String],
    line: &(dyn Fn(&str) + Sync),
    quiet: bool,
    progress: &dyn RampProgress,
    interrupts: Interrupts,
    calibrate: Option<Calibrate<'_>>,
) -> Result<RampOutcome, BackendError> {
    let plan = CapacityPlan::new(config)?;
    if config.run.engine == SessionLoop::Server {
        return Err(BackendError::usage(
            "capacity judges every step's latency; run.engine: server records only power-of-two buckets \
             timed inside the database: use run.engine: client",
        ));
    }
    // Every step's config must be valid before the first runs: the search changes only the
    // readers, or the rate.
    let mut first = config.clone();
    match plan.over {
        SearchOver::Sessions => first.run.readers = plan.search.first() as u32,
        SearchOver::Rate => first.run.rate = Some(Rate(plan.search.first() as f64)),
    }
    first.validate()?;
    // A rate search is an open loop throughout: its recorded config says so (its first rate),
    // so compare and history see its arrival; every step sets its own rate.
    let base = match plan.over {
        SearchOver::Rate => &first,
        SearchOver::Sessions => config,
    };
    if plan.over == SearchOver::Rate && config.run.readers == 0 {
        return Err(BackendError::usage(
            "a rate search drives its rates over run.readers sessions (--readers): give enough of them to keep \
             the reads in flight that the storage can serve",
        ));
    }
    let mut search = CapacitySearch {
        plan,
        config,
        calibrate,
        repeat: 1,
        runs: 0,
    };
    let how = Ramping {
        targets,
        line,
        quiet,
        progress,
        interrupts,
        calibrate,
        what: "capacity",
    };
    run_planned(backends, base, &how, &mut search).await
}
