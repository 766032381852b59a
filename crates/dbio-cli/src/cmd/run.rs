//! `dbio run`: one measured window, on whichever database `engine` names.

use dbio_core::Config;
use dbio_core::bench::Calibrate;
use dbio_core::result::RunResult;

use super::db::{Db, load_calibration};
use super::discover::{data_ask, discover};
use super::output::{STDERR, print_json};
use super::{RunOutput, exit_code};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, Format, RunArgs, SessionArgs};
use crate::cmd::history::RecordArgs;

pub(super) async fn run_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    sessions: &SessionArgs,
    run: &RunArgs,
    record: &RecordArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = crate::effective::run_config(common, data, sessions, run)?;
    let json = run.format == Format::Json;
    let output = RunOutput {
        quiet,
        print_report: !quiet && !json,
        ..STDERR
    };
    let db = Db::pick(&config, common)?;
    // The data set is read from dbio's marks on the (first) target, whichever the engine;
    // every target's preflight then verifies it holds the same.
    let ask = data_ask(common, data, &config)?;
    discover(&mut config, &ask, &db, quiet).await?;
    let result = run_benchmark(&config, &db, &output).await?;
    if record.record
        && let Some(dir) = &result.config.run.out
    {
        super::history::record(dir.join("result.json"), record, quiet).await?;
    }
    if json {
        print_json(&result)?;
    }
    Ok(exit_code(&result))
}

/// One run on `db`, with the calibration the config names (`run.calibration`) beside it.
pub(crate) async fn run_benchmark(
    config: &Config,
    db: &Db,
    output: &RunOutput<'_>,
) -> Result<RunResult, Failure> {
    let calibration = load_calibration(config)?;
    db.run(config, output, calibration.as_ref().map(|b| b as Calibrate))
        .await
}
