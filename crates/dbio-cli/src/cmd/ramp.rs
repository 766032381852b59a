//! `dbio ramp`: the same workload over a list of session counts, each step a full run in its
//! own folder, then the ramp's table, charts and HTML report.

use std::io::IsTerminal;
use std::path::PathBuf;

use dbio_core::Config;
use dbio_core::bench::{self, RampOutcome, RampProgress};
use dbio_core::driver::RunStatus;
use dbio_core::report::ramp::ramp_txt;
use dbio_core::summary::RampResult;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::db::Db;
use super::discover::{data_ask, discover};
use super::print_json;
use crate::Failure;
use crate::args::Format;
use crate::args::{CommonArgs, DataArgs, RampArgs, RunArgs};
use crate::cmd::history::RecordArgs;

/// `dbio ramp`: the workload over the configured steps, then the table, charts and HTML.
pub(super) async fn ramp_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    ramp_args: &RampArgs,
    run: &RunArgs,
    record: &RecordArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = crate::effective::ramp_config(common, data, ramp_args, run)?;
    let db = Db::pick(&config, common)?;
    // The data set is read from dbio's marks on the (first) target, whichever the engine;
    // every target's preflight then verifies it holds the same.
    let ask = data_ask(common, data, &config)?;
    discover(&mut config, &ask, &db, quiet).await?;
    let (result, dir) = ramp(&config, &db, quiet, run.format).await?;
    if record.record {
        super::history::record(dir.join("ramp.json"), record, quiet).await?;
    }
    Ok(if result.status == RunStatus::Ok { 0 } else { 1 })
}

/// Runs every step and writes the ramp's files; returns the ramp and its folder.
pub async fn ramp(
    config: &Config,
    db: &Db,
    quiet: bool,
    format: Format,
) -> Result<(RampResult, PathBuf), Failure> {
    let total = (bench::steps(config).len() as u32 * config.ramp.repeat.max(1)) as u64;
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
    let line = |text: &str| bar.suspend(|| errln!("{text}"));
    let progress = Bar(&bar);
    let outcome = db.ramp(config, &line, quiet, &progress).await;
    bar.finish_and_clear();
    let RampOutcome {
        ramp,
        dir,
        written,
        error,
    } = outcome?;
    let error = error.map(Failure::from);
    let written = written.map_err(Failure::from);
    // The ramp reaches stdout even when quiet if its files could not be written.
    match format {
        Format::Json => print_json(&ramp)?,
        Format::Text if !quiet || written.is_err() => out!("{}", ramp_txt(&ramp)),
        Format::Text => {}
    }
    if let Err(f) = written {
        return Err(match error {
            Some(step) => Failure::new(f.code, format!("{}; and {}", step.message, f.message)),
            None => f,
        });
    }
    if format == Format::Text && !quiet {
        errln!(
            "ramp: {} step(s); files in {}: ramp.json, ramp.csv, ramp.txt, iops.svg, latency.svg, latency-vs-iops.svg, report.html",
            ramp.steps.len(),
            dir.display()
        );
        outln!("report: {}", dir.join("report.html").display());
    }
    if let Some(f) = error {
        return Err(f);
    }
    Ok((ramp, dir))
}

/// The progress bar as core's ramp sees it.
pub(super) struct Bar<'a>(pub(super) &'a ProgressBar);

impl RampProgress for Bar<'_> {
    fn step(&self, name: &str) {
        self.0.set_message(name.to_string());
    }
    fn done_one(&self) {
        self.0.inc(1);
    }
    fn done(&self) -> u64 {
        self.0.position()
    }
    fn set_total(&self, total: u64) {
        self.0.set_length(total);
    }
}
