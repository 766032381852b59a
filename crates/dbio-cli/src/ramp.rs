//! `dbio ramp`: the same workload over a list of session counts, each step a full run in its
//! own folder, then the ramp's table, charts and HTML report.

use std::io::IsTerminal;
use std::path::PathBuf;

use dbio_core::Config;
use dbio_core::chart::render_svg;
use dbio_core::config::OnStepFailure;
use dbio_core::driver::RunStatus;
use dbio_core::ramp::{ramp_charts, ramp_csv, ramp_html, ramp_txt};
use dbio_core::result::{RESULT_FORMAT, RunResult};
use dbio_core::summary::{RampResult, summarize};
use dbio_postgres::Target;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::Failure;
use crate::commands::{RunOutput, run_benchmark, write_results};

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
    let line = |text: &str| bar.suspend(|| eprintln!("{text}"));
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
                "ramp: run {}/{total}: {readers} reader(s), {writers} writer(s){}{}",
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
                }
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
    let mut files = vec![
        ("ramp.json", json),
        ("ramp.csv", ramp_csv(&ramp)),
        ("ramp.txt", txt.clone()),
    ];
    let mut svgs = Vec::new();
    for (file, chart) in ramp_charts(&ramp, &label) {
        let svg = render_svg(&chart);
        files.push((file, svg.clone()));
        svgs.push((file, svg));
    }
    files.push(("report.html", ramp_html(&ramp, &svgs)));
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (*n, b.as_bytes())).collect();
    let written = write_results(&dir, &files);
    print!("{txt}");
    if let Err(f) = written {
        return Err(match error {
            Some(step) => Failure::new(f.code, format!("{}; and {}", step.message, f.message)),
            None => f,
        });
    }
    eprintln!(
        "ramp: {} step(s); files in {}: ramp.json, ramp.csv, ramp.txt, iops.svg, latency.svg, latency-vs-iops.svg, report.html",
        ramp.steps.len(),
        dir.display()
    );
    println!("report: {}", dir.join("report.html").display());
    if let Some(f) = error {
        return Err(f);
    }
    Ok((ramp, dir))
}
