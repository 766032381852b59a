//! One ramp over any backend: the same workload over a list of session counts, each step a
//! full run (core's one pipeline) in its own folder, then the ramp's table, charts and
//! HTML report written beside them.

use std::path::PathBuf;

use crate::Config;
use crate::backend::{Backend, BackendError};
use crate::config::OnStepFailure;
use crate::driver::RunStatus;
use crate::error::CoreError;
use crate::interrupt::Interrupts;
use crate::report::chart::render_figure;
use crate::report::ramp::{ramp_charts, ramp_csv, ramp_html, ramp_txt};
use crate::result::{RESULT_FORMAT, RunResult};
use crate::summary::{RampResult, summarize};

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
    if !config.target.readers.is_empty() || !config.target.writers.is_empty() {
        return Err(BackendError::usage(
            "a ramp varies the session count: each step's readers and writers are spread over the targets \
             round-robin; drop target.readers and target.writers (--target-readers/--target-writers)",
        ));
    }
    let steps = steps(config);
    let repeat = config.ramp.repeat.max(1);
    let label = config.run.label.clone().unwrap_or_else(|| "ramp".into());
    let dir = crate::output::result_dir(config.run.out.as_deref(), &label, config.run.overwrite)?;
    let started = chrono::Utc::now();
    let total = (steps.len() as u32 * repeat) as u64;
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
    let mut summaries = Vec::new();
    let mut status = RunStatus::Ok;
    let mut warnings = Vec::new();
    let mut environment = None;
    let mut error: Option<BackendError> = None;
    'steps: for (i, &(readers, writers, pct)) in steps.iter().enumerate() {
        let mut results: Vec<RunResult> = Vec::new();
        let mut paths = Vec::new();
        for k in 1..=repeat {
            let mut c = config.clone();
            c.run.readers = readers;
            c.run.writers = writers;
            c.run.update_pct = pct;
            if let Some(t) = config.ramp.run_time {
                c.run.run_time = t;
                c.run.work_loop = 0;
            }
            let name = format!(
                "step-{:02}-r{readers}-w{writers}{}{}",
                i + 1,
                if pct > 0 {
                    format!("-u{pct}")
                } else {
                    String::new()
                },
                if repeat > 1 {
                    format!("-rep{k}")
                } else {
                    String::new()
                }
            );
            c.run.out = Some(dir.join(&name));
            c.run.label = Some(format!("{label} {name}"));
            progress.step(&name);
            say(&format!(
                "ramp: run {}/{total}: {readers} reader(s), {writers} writer(s){}{}{}",
                progress.done() + 1,
                if pct > 0 {
                    format!(", update_pct {pct}")
                } else {
                    String::new()
                },
                if repeat > 1 {
                    format!(", repeat {k}/{repeat}")
                } else {
                    String::new()
                },
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
                    results.push(r);
                    paths.push(format!("{name}/result.json"));
                    match step_status {
                        RunStatus::Ok => {}
                        RunStatus::Interrupted => {
                            status = RunStatus::Interrupted;
                            warnings.push(format!(
                                "the ramp was interrupted during {name}; later steps did not run"
                            ));
                            summaries.extend(summarize(&results, paths.clone()));
                            break 'steps;
                        }
                        RunStatus::Failed => {
                            status = RunStatus::Failed;
                            warnings.push(format!("{name} failed; see its result.json"));
                            if config.ramp.on_step_failure == OnStepFailure::Stop {
                                warnings.push(
                                    "ramp.on_step_failure is stop: later steps did not run".into(),
                                );
                                summaries.extend(summarize(&results, paths.clone()));
                                break 'steps;
                            }
                            // The server may be restarting: give it the connect timeout to come back.
                            for (t, b) in backends.iter().enumerate() {
                                if !b.wait_ready(config.target.connect_timeout.0).await {
                                    say(&format!(
                                        "ramp: the server{} does not accept connections after the failed step",
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
                }
                Err(f) => {
                    // Interrupted before its window opened (connecting, preparing).
                    status = if interrupts.count() > 0 {
                        RunStatus::Interrupted
                    } else {
                        RunStatus::Failed
                    };
                    warnings.push(format!("{name} could not run: {}", f.message));
                    summaries.extend(summarize(&results, paths.clone()));
                    error = Some(f);
                    break 'steps;
                }
            }
        }
        summaries.extend(summarize(&results, paths));
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
    };
    let json = serde_json::to_string_pretty(&ramp).map_err(|e| CoreError::NotWritten {
        message: format!("cannot serialize the ramp: {e}"),
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

/// The ramp's charts as SVG, by file name.
pub fn ramp_svgs(ramp: &RampResult) -> Vec<(&'static str, String)> {
    let label = ramp.label.as_deref().unwrap_or("ramp");
    ramp_charts(ramp, label)
        .into_iter()
        .map(|(file, figure)| (file, render_figure(&figure)))
        .collect()
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
