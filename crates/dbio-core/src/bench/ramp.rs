//! One ramp over any backend: the same workload over a list of session counts, each step a
//! full run (core's one pipeline) in its own folder, then the ramp's table, charts and
//! HTML report written beside them. What chooses the steps is a [`StepPlanner`]: the
//! config's list (`dbio ramp`), or a search that picks each step from the ones before
//! (`dbio capacity`, see [`crate::capacity`]).

use std::path::PathBuf;

use crate::Config;
use crate::backend::{Backend, BackendError};
use crate::capacity::CapacityResult;
use crate::config::OnStepFailure;
use crate::driver::RunStatus;
use crate::error::CoreError;
use crate::interrupt::Interrupts;
use crate::report::chart::{render_figure, render_figure_marked};
use crate::report::ramp::{capacity_chart, ramp_charts, ramp_csv, ramp_html, ramp_txt};
use crate::result::{RESULT_FORMAT, RunResult};
use crate::summary::{RampResult, StepKey, StepSummary, summarize};

use super::publish::{Output, write_results};
use super::run::{Calibrate, run};

/// What the ramp's progress display is told (the CLI's progress bar).
pub trait RampProgress {
    /// Run `done + 1` of the ramp starts: its step name.
    fn step(&self, name: &str);
    /// A run finished.
    fn done_one(&self);
    /// Runs finished so far.
    fn done(&self) -> u64;
    /// The runs the ramp will take, as now known (a search knows only a bound).
    fn set_total(&self, _total: u64) {}
}

/// A ramp that ran (or stopped), its folder, whether its files could be written, and the
/// error of a step that could not run, if one could not.
pub struct RampOutcome {
    pub ramp: RampResult,
    pub dir: PathBuf,
    /// ramp.json, ramp.csv, ramp.txt, the charts and report.html.
    pub written: Result<(), CoreError>,
    pub error: Option<BackendError>,
}

/// (readers, writers, update_pct) of each step, readers varying fastest.
pub fn steps(config: &Config) -> Vec<(u32, u32, u32)> {
    let writers = config
        .ramp
        .writers
        .clone()
        .unwrap_or_else(|| vec![config.run.writers]);
    let pcts = config
        .ramp
        .update_pct
        .clone()
        .unwrap_or_else(|| vec![config.run.update_pct]);
    let mut steps = Vec::new();
    for &u in &pcts {
        for &w in &writers {
            for &r in &config.ramp.readers {
                steps.push((r, w, u));
            }
        }
    }
    steps
}

/// One run of a ramp: the step's sessions (and open-loop rate) and, for a step run more
/// than once, which run it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRun {
    pub readers: u32,
    pub writers: u32,
    pub update_pct: u32,
    /// The open-loop rate of this run, per second; None: the config's `run.rate`.
    pub rate_per_s: Option<u64>,
    /// 1-based repeat of its step, shown when the step runs more than once.
    pub repeat: Option<u32>,
    /// The sessions' key seed of this run; None: the config's `run.seed`.
    pub seed: Option<u64>,
}

/// What chooses a ramp's runs: a fixed list (`dbio ramp`), or a search that chooses each
/// run from the ones before (`dbio capacity`).
pub trait StepPlanner {
    /// The first run; None when there is none.
    fn first(&mut self) -> Option<PlannedRun>;
    /// The run after `done`, given its result summarised on its own; None: the ramp is over.
    fn next(&mut self, done: &PlannedRun, summary: &StepSummary) -> Option<PlannedRun>;
    /// Runs still to come after the next, at most (for the progress bar and the ETA).
    fn left_hint(&self) -> u64;
    /// The answer a search found, from every step's summary (repeats merged).
    fn capacity(&self, _steps: &[StepSummary]) -> Option<CapacityResult> {
        None
    }
    /// Whether a failed run ends the ramp.
    fn stop_on_failure(&self) -> bool;
    /// The ramp ended before the planner's last run, for this reason.
    fn ended_early(&mut self, _why: &str) {}
}

/// `dbio ramp`'s runs: every step of the config, `ramp.repeat` times each.
pub struct FixedSteps {
    steps: Vec<(u32, u32, u32)>,
    repeat: u32,
    at: usize,
    stop: bool,
}

impl FixedSteps {
    pub fn of(config: &Config) -> FixedSteps {
        FixedSteps {
            steps: steps(config),
            repeat: config.ramp.repeat.max(1),
            at: 0,
            stop: config.ramp.on_step_failure == OnStepFailure::Stop,
        }
    }

    fn run(&self, at: usize) -> Option<PlannedRun> {
        let (readers, writers, update_pct) = *self.steps.get(at / self.repeat as usize)?;
        Some(PlannedRun {
            readers,
            writers,
            update_pct,
            rate_per_s: None,
            repeat: (self.repeat > 1).then_some((at % self.repeat as usize) as u32 + 1),
            seed: None,
        })
    }
}

impl StepPlanner for FixedSteps {
    fn first(&mut self) -> Option<PlannedRun> {
        self.at = 0;
        self.run(0)
    }
    fn next(&mut self, _: &PlannedRun, _: &StepSummary) -> Option<PlannedRun> {
        self.at += 1;
        self.run(self.at)
    }
    fn left_hint(&self) -> u64 {
        (self.steps.len() * self.repeat as usize).saturating_sub(self.at + 1) as u64
    }
    fn stop_on_failure(&self) -> bool {
        self.stop
    }
}

/// Runs every step on `backends` (one per target) and writes the ramp's files into its
/// folder; `targets` are the targets as results show them.
#[allow(clippy::too_many_arguments)]
pub async fn ramp<B: Backend>(
    backends: &mut [B],
    config: &Config,
    targets: &[String],
    line: &(dyn Fn(&str) + Sync),
    quiet: bool,
    progress: &dyn RampProgress,
    interrupts: Interrupts,
    calibrate: Option<Calibrate<'_>>,
) -> Result<RampOutcome, BackendError> {
    let mut plan = FixedSteps::of(config);
    let how = Ramping {
        targets,
        line,
        quiet,
        progress,
        interrupts,
        calibrate,
        what: "ramp",
    };
    run_planned(backends, config, &how, &mut plan).await
}

/// How a ramp talks and what it runs with, whatever chooses its steps.
pub struct Ramping<'a> {
    pub targets: &'a [String],
    pub line: &'a (dyn Fn(&str) + Sync),
    pub quiet: bool,
    pub progress: &'a dyn RampProgress,
    pub interrupts: Interrupts,
    pub calibrate: Option<Calibrate<'a>>,
    /// `ramp` or `capacity`: how its lines begin.
    pub what: &'static str,
}

/// The runs `plan` chooses, each a full run in its own folder, then the ramp's files.
pub async fn run_planned<B: Backend>(
    backends: &mut [B],
    config: &Config,
    how: &Ramping<'_>,
    plan: &mut dyn StepPlanner,
) -> Result<RampOutcome, BackendError> {
    let Ramping {
        targets,
        line,
        quiet,
        progress,
        ref interrupts,
        calibrate,
        what,
    } = *how;
    if !config.target.readers.is_empty() || !config.target.writers.is_empty() {
        return Err(BackendError::usage(format!(
            "a {what} varies the session count: each step's readers and writers are spread over the targets \
             round-robin; drop target.readers and target.writers (--target-readers/--target-writers)"
        )));
    }
    let label = config.run.label.clone().unwrap_or_else(|| what.into());
    let dir = crate::output::result_dir(config.run.out.as_deref(), &label, config.run.overwrite)?;
    let started = chrono::Utc::now();
    let planned_run_s = {
        let r = &config.run;
        let window = config.ramp.run_time.unwrap_or(r.run_time).0.as_secs_f64();
        window + r.warmup.0.as_secs_f64()
    };
    let clock = std::time::Instant::now();
    let output = Output {
        quiet,
        print_report: false,
        line,
        // A step's report is printed only when its files could not be written.
        report: line,
    };

    let say = |text: &str| {
        if !quiet {
            line(text)
        }
    };
    // Each step's runs, in the order the steps first ran: (key, results, their paths).
    let mut by_step: Vec<(StepKey, Vec<RunResult>, Vec<String>)> = Vec::new();
    let mut status = RunStatus::Ok;
    let mut warnings = Vec::new();
    let mut environment = None;
    let mut error: Option<BackendError> = None;
    let mut next = plan.first();
    let mut index = 0usize;
    while let Some(planned) = next {
        index += 1;
        let PlannedRun {
            readers,
            writers,
            update_pct: pct,
            rate_per_s,
            repeat,
            seed,
        } = planned;
        let mut c = config.clone();
        c.run.readers = readers;
        c.run.writers = writers;
        c.run.update_pct = pct;
        if let Some(r) = rate_per_s {
            c.run.rate = Some(crate::config::Rate(r as f64));
        }
        if let Some(seed) = seed {
            c.run.seed = seed;
        }
        if let Some(t) = config.ramp.run_time {
            c.run.run_time = t;
            c.run.work_loop = 0;
        }
        let name = format!(
            "step-{index:02}-r{readers}-w{writers}{}{}{}",
            if pct > 0 {
                format!("-u{pct}")
            } else {
                String::new()
            },
            rate_per_s.map(|r| format!("-rate{r}")).unwrap_or_default(),
            repeat.map(|k| format!("-rep{k}")).unwrap_or_default()
        );
        c.run.out = Some(dir.join(&name));
        c.run.label = Some(format!("{label} {name}"));
        progress.step(&name);
        let total = progress.done() + 1 + plan.left_hint();
        progress.set_total(total);
        say(&format!(
            "{what}: run {}/{}{total}: {readers} reader(s), {writers} writer(s){}{}{}{}",
            progress.done() + 1,
            if what == "ramp" { "" } else { "at most " },
            if pct > 0 {
                format!(", update_pct {pct}")
            } else {
                String::new()
            },
            rate_per_s
                .map(|r| format!(", {r} operations/s (open loop)"))
                .unwrap_or_default(),
            repeat.map(|k| format!(", repeat {k}")).unwrap_or_default(),
            eta(
                progress.done(),
                total,
                clock.elapsed().as_secs_f64(),
                planned_run_s
            )
        ));
        match run(backends, &c, &output, interrupts.clone(), calibrate).await {
            Ok(r) => {
                progress.done_one();
                let step_status = r.status;
                environment.get_or_insert_with(|| r.environment.clone());
                let alone = summarize(std::slice::from_ref(&r), vec![]);
                let key = alone.as_ref().map(|s| s.key);
                let path = format!("{name}/result.json");
                match by_step.iter_mut().find(|(k, _, _)| Some(*k) == key) {
                    Some((_, results, paths)) => {
                        results.push(r);
                        paths.push(path);
                    }
                    None => by_step.push((
                        key.unwrap_or(StepKey::closed(readers, writers, pct)),
                        vec![r],
                        vec![path],
                    )),
                }
                match step_status {
                    RunStatus::Ok => {}
                    RunStatus::Interrupted => {
                        status = RunStatus::Interrupted;
                        let why = format!(
                            "the {what} was interrupted during {name}; later steps did not run"
                        );
                        plan.ended_early(&why);
                        warnings.push(why);
                        break;
                    }
                    RunStatus::Failed => {
                        status = RunStatus::Failed;
                        warnings.push(format!("{name} failed; see its result.json"));
                        if plan.stop_on_failure() {
                            warnings.push(format!(
                                "{}: later steps did not run",
                                if what == "ramp" {
                                    "ramp.on_step_failure is stop"
                                } else {
                                    "a failed step ends the search"
                                }
                            ));
                            plan.ended_early(&format!(
                                "{name} failed; the steps after it did not run"
                            ));
                            break;
                        }
                        // The server may be restarting: give it the connect timeout to come back.
                        for (t, b) in backends.iter().enumerate() {
                            if !b.wait_ready(config.target.connect_timeout.0).await {
                                say(&format!(
                                    "{what}: the server{} does not accept connections after the failed step",
                                    targets
                                        .get(t)
                                        .filter(|_| targets.len() > 1)
                                        .map(|t| format!(" {t}"))
                                        .unwrap_or_default()
                                ));
                            }
                        }
                    }
                }
                next = match &alone {
                    Some(s) => plan.next(&planned, s),
                    None => None,
                };
            }
            Err(f) => {
                // Interrupted before its window opened (connecting, preparing).
                status = if interrupts.count() > 0 {
                    RunStatus::Interrupted
                } else {
                    RunStatus::Failed
                };
                warnings.push(format!("{name} could not run: {}", f.message));
                plan.ended_early(&format!("{name} could not run"));
                error = Some(f);
                break;
            }
        }
    }
    let mut summaries: Vec<StepSummary> = by_step
        .into_iter()
        .filter_map(|(_, results, paths)| summarize(&results, paths))
        .collect();
    let capacity = plan.capacity(&summaries);
    // A search's steps ran in its order; the table and the charts read them by load.
    if capacity.is_some() {
        summaries.sort_by_key(|s| {
            (
                s.key.writers,
                s.key.update_pct,
                s.key.rate_per_s,
                s.key.readers,
            )
        });
    }
    // A cap the steps could not see on their own shows in their shape.
    warnings.extend(crate::limits::flat::judge_ramp(&mut summaries));
    let ramp = RampResult {
        format: RESULT_FORMAT,
        kind: "ramp".into(),
        label: Some(label.clone()),
        status,
        started,
        finished: chrono::Utc::now(),
        config: {
            let mut c = config.clone();
            if config.target.dsns.is_empty() {
                c.target.dsn = targets.first().cloned();
            } else {
                c.target.dsns = targets.to_vec();
            }
            c.run.out = Some(dir.clone());
            c
        },
        environment,
        steps: summaries,
        warnings,
        capacity,
    };
    let json = serde_json::to_string_pretty(&ramp).map_err(|e| CoreError::NotWritten {
        message: format!("cannot serialize the {what}: {e}"),
    })?;
    let svgs = ramp_svgs(&ramp);
    let mut files = vec![
        ("ramp.json", json),
        ("ramp.csv", ramp_csv(&ramp)),
        ("ramp.txt", ramp_txt(&ramp)),
    ];
    files.extend(svgs.iter().map(|(file, svg)| (*file, svg.clone())));
    files.push(("report.html", ramp_html(&ramp, &svgs)));
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_bytes())).collect();
    let written = write_results(&dir, &files);
    Ok(RampOutcome {
        ramp,
        dir,
        written,
        error,
    })
}

/// The ramp's charts as SVG, by file name; a capacity search's curve with its target first.
pub fn ramp_svgs(ramp: &RampResult) -> Vec<(&'static str, String)> {
    let label = ramp.label.as_deref().unwrap_or("ramp");
    let mut out: Vec<(&'static str, String)> = Vec::new();
    if let Some(c) = &ramp.capacity {
        let (figure, marks) = capacity_chart(ramp, c, label);
        out.push(("capacity.svg", render_figure_marked(&figure, &[marks])));
    }
    out.extend(
        ramp_charts(ramp, label)
            .into_iter()
            .map(|(file, figure)| (file, render_figure(&figure))),
    );
    out
}

/// ", eta 3m 20s" before run `done + 1` of `total`: from the wall-clock time of the runs so
/// far (connect, VACUUM and CHECKPOINT included), or from the planned window before the first.
fn eta(done: u64, total: u64, elapsed_s: f64, planned_run_s: f64) -> String {
    let per_run = if done > 0 {
        elapsed_s / done as f64
    } else {
        planned_run_s
    };
    let left = (per_run * (total - done) as f64).round() as u64;
    let text = match left {
        s if s >= 3600 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m {:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    };
    format!(
        "; eta {text}{}",
        if done == 0 {
            " (planned windows only)"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::eta;

    #[test]
    fn eta_from_the_runs_so_far_or_the_plan() {
        assert_eq!(eta(0, 4, 0.0, 30.0), "; eta 2m 00s (planned windows only)");
        assert_eq!(eta(2, 4, 70.0, 30.0), "; eta 1m 10s");
        assert_eq!(eta(1, 200, 20.0, 20.0), "; eta 1h 06m");
    }
}
