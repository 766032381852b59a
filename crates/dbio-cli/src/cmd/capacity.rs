//! `dbio capacity`: the highest figure that meets a latency target, found by a search whose
//! every step is a full run; the files, report, history and compare of a ramp, with the answer.

use std::io::IsTerminal;

use dbio_core::bench::RampOutcome;
use dbio_core::driver::RunStatus;
use dbio_core::report::ramp::ramp_txt;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::db::Db;
use super::discover::{data_ask, discover};
use super::print_json;
use super::ramp::Bar;
use crate::Failure;
use crate::args::{CapacityArgs, CommonArgs, DataArgs, Format, RunArgs};
use crate::cmd::history::RecordArgs;

/// `dbio capacity`: the search, then the answer on stdout and the ramp's files.
pub(super) async fn capacity_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    args: &CapacityArgs,
    run: &RunArgs,
    record: &RecordArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = crate::effective::capacity_config(common, data, args, run)?;
    if config.capacity.slo.is_none() {
        return Err(Failure::new(
            2,
            "capacity needs a latency target: --slo 'p99<=2ms' (capacity.slo), e.g. p95<=500us, avg<=1ms, db.avg<=5ms",
        ));
    }
    let db = Db::pick(&config, common)?;
    // The data set is read from dbio's marks on the (first) target, whichever the engine;
    // every target's preflight then verifies it holds the same.
    let ask = data_ask(common, data, &config)?;
    discover(&mut config, &ask, &db, quiet).await?;
    let bar = ProgressBar::with_draw_target(
        Some(1),
        if std::io::stderr().is_terminal() && !quiet {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        },
    );
    bar.set_style(
        ProgressStyle::with_template(
            "capacity [{bar:30}] {pos}/{len} windows at most  {elapsed_precise} elapsed  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let line = |text: &str| bar.suspend(|| errln!("{text}"));
    let progress = Bar(&bar);
    let outcome = db.capacity(&config, &line, quiet, &progress).await;
    bar.finish_and_clear();
    let RampOutcome {
        ramp,
        dir,
        written,
        error,
    } = outcome?;
    let error = error.map(Failure::from);
    let written = written.map_err(Failure::from);
    match run.format {
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
    if run.format == Format::Text && !quiet {
        errln!(
            "capacity: {} window(s); files in {}: ramp.json (the answer in `capacity`), ramp.csv, ramp.txt, capacity.svg, \
             iops.svg, latency.svg, latency-vs-iops.svg, report.html",
            ramp.capacity
                .as_ref()
                .map(|c| c.search_windows + c.repeat_windows)
                .unwrap_or(0),
            dir.display()
        );
        outln!("report: {}", dir.join("report.html").display());
    }
    if let Some(f) = error {
        return Err(f);
    }
    if record.record {
        super::history::record(dir.join("ramp.json"), record, quiet).await?;
    }
    let answered = ramp.capacity.as_ref().is_some_and(|c| c.answer.is_some());
    Ok(if ramp.status == RunStatus::Ok && answered {
        0
    } else {
        1
    })
}
