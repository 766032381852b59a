//! `dbio ramp`: the same workload over a list of session counts, each step a full run in its
//! own folder, then the ramp's table, charts and HTML report.

use std::io::IsTerminal;
use std::path::PathBuf;

use dbio_core::Config;
use dbio_core::chart::render_figure;
use dbio_core::config::OnStepFailure;
use dbio_core::driver::RunStatus;
use dbio_core::ramp::{ramp_charts, ramp_csv, ramp_html, ramp_txt};
use dbio_core::result::{RESULT_FORMAT, RunResult};
use dbio_core::summary::{RampResult, summarize};
use dbio_postgres::Target;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::run::run_benchmark;
use super::{RunOutput, print_json, resolve, write_results};
use crate::Failure;
use crate::args::Format;
use crate::args::{CommonArgs, DataArgs, RampArgs, RunArgs};
use crate::cmd::history::RecordArgs;
use dbio_core::config::Engine;

/// `dbio ramp`: the workload over the configured steps, then the table, charts and HTML.
pub(super) async fn ramp_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    ramp_args: &RampArgs,
    run: &RunArgs,
    record: &RecordArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let config = crate::effective::ramp_config(common, data, ramp_args, run)?;
    if config.engine == Engine::Oracle {
        return Err(Failure::new(
            2,
            "ramp is built for engine: postgres only; with Oracle, run `dbio run` per step and `dbio compare` the results",
        ));
    }
    let target = resolve(&config, common)?;
    let (result, dir) = ramp(&config, &target, quiet, run.format).await?;
    if record.record {
        super::history::record(dir.join("ramp.json"), record, quiet).await?;
    }
    Ok(if result.status == RunStatus::Ok { 0 } else { 1 })
}

/// (readers, writers, update_pct) of each step, readers varying fastest.
pub fn plan(config: &Config) -> Vec<(u32, u32, u32)> {
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

/// Runs every step and writes the ramp's files; returns the ramp and its folder.
pub async fn ramp(
    config: &Config,
    target: &Target,
    quiet: bool,
    format: Format,
) -> Result<(RampResult, PathBuf), Failure> {
    let steps = plan(config);
    let repeat = config.ramp.repeat.max(1);
    let label = config.run.label.clone().unwrap_or_else(|| "ramp".into());
    let dir =
        dbio_core::output::result_dir(config.run.out.as_deref(), &label, config.run.overwrite)?;
    let started = chrono::Utc::now();
    let total = (steps.len() as u32 * repeat) as u64;
    let bar = ProgressBar::with_draw_target(
        Some(total),
        if std::io::stderr().is_terminal() && !quiet {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "ramp [{bar:30}] {pos}/{len} runs  {elapsed_precise} elapsed, eta {eta}  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let line = |text: &str| {
        if !quiet {
            bar.suspend(|| eprintln!("{text}"))
        }
    };
    let planned_run_s = {
        let r = &config.run;
        let window = config.ramp.run_time.unwrap_or(r.run_time).0.as_secs_f64();
        window + r.warmup.0.as_secs_f64()
    };
    let clock = std::time::Instant::now();
    let output = RunOutput {
        quiet,
        print_report: false,
        line: &line,
    };

    let mut summaries = Vec::new();
    let mut status = RunStatus::Ok;
    let mut warnings = Vec::new();
    let mut environment = None;
    let mut error: Option<Failure> = None;
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
            bar.set_message(name.clone());
            line(&format!(
                "ramp: run {}/{total}: {readers} reader(s), {writers} writer(s){}{}{}",
                bar.position() + 1,
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
                    bar.position(),
                    total,
                    clock.elapsed().as_secs_f64(),
                    planned_run_s
                )
            ));
            match run_benchmark(&c, target, &output).await {
                Ok(r) => {
                    bar.inc(1);
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
                            if !target.wait_ready(config.target.connect_timeout.0).await {
                                line(
                                    "ramp: the server does not accept connections after the failed step",
                                );
                            }
                        }
                    }
                }
                Err(f) => {
                    // Interrupted before its window opened (connecting, preparing).
                    status = if crate::signals::interrupts().count() > 0 {
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
    bar.finish_and_clear();
    let ramp = RampResult {
        format: RESULT_FORMAT,
        kind: "ramp".into(),
        label: Some(label.clone()),
        status,
        started,
        finished: chrono::Utc::now(),
        config: {
            let mut c = config.clone();
            c.target.dsn = Some(target.redacted());
            c.run.out = Some(dir.clone());
            c
        },
        environment,
        steps: summaries,
        warnings,
    };
    let json = serde_json::to_string_pretty(&ramp).map_err(|e| Failure::new(1, e.to_string()))?;
    let txt = ramp_txt(&ramp);
    let svgs = ramp_svgs(&ramp);
    let mut files = vec![
        ("ramp.json", json),
        ("ramp.csv", ramp_csv(&ramp)),
        ("ramp.txt", txt.clone()),
    ];
    files.extend(svgs.iter().map(|(file, svg)| (*file, svg.clone())));
    files.push(("report.html", ramp_html(&ramp, &svgs)));
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_bytes())).collect();
    let written = write_results(&dir, &files);
    // The ramp reaches stdout even when quiet if its files could not be written.
    match format {
        Format::Json => print_json(&ramp)?,
        Format::Text if !quiet || written.is_err() => print!("{txt}"),
        Format::Text => {}
    }
    if let Err(f) = written {
        return Err(match error {
            Some(step) => Failure::new(f.code, format!("{}; and {}", step.message, f.message)),
            None => f,
        });
    }
    if format == Format::Text && !quiet {
        eprintln!(
            "ramp: {} step(s); files in {}: ramp.json, ramp.csv, ramp.txt, iops.svg, latency.svg, latency-vs-iops.svg, report.html",
            ramp.steps.len(),
            dir.display()
        );
        println!("report: {}", dir.join("report.html").display());
    }
    if let Some(f) = error {
        return Err(f);
    }
    Ok((ramp, dir))
}

/// The ramp's charts as (file name, SVG).
pub(super) fn ramp_svgs(ramp: &RampResult) -> Vec<(&'static str, String)> {
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
