//! One module per command: each builds the effective config, calls the backend and prints.
//! `dispatch` only routes a parsed command line to its module.

mod calibrate;
mod capacity;
mod check;
mod compare;
mod completions;
mod config;
pub(crate) mod db;
mod discover;
pub(crate) mod history;
mod list;
mod man;
pub(crate) mod merge;
pub(crate) mod nightly;
pub(crate) mod output;
mod quickstart;
mod ramp;
mod regress;
mod report;
mod run;
mod scratch;
mod setup;
mod teardown;

use dbio_core::Config;
use dbio_core::driver::RunStatus;
use dbio_core::result::RunResult;

use crate::Failure;
use crate::args::{Cli, Command, CommonArgs, DataArgs};
use crate::signals::interrupts;

pub(crate) use output::{RunOutput, print_json, write_results};

/// PostgreSQL's default block size, for sizes given in blocks where no server is there yet to
/// say its own: a scratch cluster's or container's shared_buffers before it starts, and
/// calibrate's I/O sizes on a raw device. A data set's rows are always counted in the
/// server's blocks (`dbio_core::backend::data_set_plan`).
const DEFAULT_BLOCK_SIZE: u64 = 8192;

pub async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let quiet = cli.quiet;
    crate::scratch_target::set_quiet(quiet);
    match cli.command {
        Command::Setup {
            common,
            data,
            load,
            force,
            drop_dependents,
        } => setup::setup_cmd(&common, &data, &load, force, drop_dependents, quiet).await,
        Command::List { common, format } => list::list_cmd(&common, format).await,
        Command::Check { common, data } => check::check_cmd(&common, &data, quiet).await,
        Command::Teardown {
            common,
            prefix,
            yes,
            drop_dependents,
        } => teardown::teardown_cmd(&common, prefix, yes, drop_dependents).await,
        Command::Run {
            common,
            data,
            sessions,
            run,
            record,
        } => run::run_cmd(&common, &data, &sessions, &run, &record, quiet).await,
        Command::Ramp {
            common,
            data,
            ramp,
            run,
            record,
        } => ramp::ramp_cmd(&common, &data, &ramp, &run, &record, quiet).await,
        Command::Capacity {
            common,
            data,
            capacity,
            run,
            record,
        } => capacity::capacity_cmd(&common, &data, &capacity, &run, &record, quiet).await,
        Command::History { action } => history::dispatch(action, quiet).await,
        Command::Compare {
            inputs,
            format,
            out,
        } => compare::compare_cmd(&inputs, format, out.as_deref()),
        Command::Regress {
            baseline,
            current,
            config,
            max_iops_drop,
            max_latency_rise,
            junit,
            accept_difference,
            format,
        } => regress::regress_cmd(
            &baseline,
            &current,
            regress::Thresholds {
                config: config.as_deref(),
                max_iops_drop,
                max_latency_rise,
            },
            junit.as_deref(),
            &accept_difference,
            format,
            quiet,
        ),
        Command::Merge(args) => merge::merge_cmd(args, quiet),
        Command::Nightly(args) => nightly::nightly_cmd(args, quiet).await,
        Command::Report { result, format } => report::report_cmd(&result, format),
        Command::Config {
            config,
            get,
            yaml,
            command,
        } => config::config_cmd(&command, config, get, yaml),
        Command::Completions { shell } => completions::completions_cmd(shell),
        Command::Man { out } => man::man_cmd(out.as_deref()),
        Command::Calibrate {
            path,
            size,
            create,
            block,
            large,
            levels,
            duration,
            write_pct,
            destroy_data,
            engine,
            out,
            overwrite,
            record,
        } => {
            let opts = dbio_calibrate::CalibrateOptions {
                path,
                size: size.map(|s| s.to_bytes(DEFAULT_BLOCK_SIZE)),
                create,
                block: block.to_bytes(DEFAULT_BLOCK_SIZE),
                large: large.to_bytes(DEFAULT_BLOCK_SIZE),
                levels,
                duration: duration.0,
                write_pct,
                destroy_data,
                engine: engine.into(),
                seed: 1,
            };
            let (code, dir) = calibrate::calibrate_cmd(&opts, out, overwrite, quiet)?;
            if record.record {
                // The device's series: the platform canary of `dbio history check`.
                history::record(dir.join("calibrate.json"), &record, quiet).await?;
            }
            Ok(code)
        }
        Command::Scratch { action } => scratch::scratch_cmd(action),
        Command::Quickstart {
            config,
            scratch,
            keep,
        } => quickstart::quickstart(config.as_deref(), &scratch, keep, quiet).await,
    }
}

/// Loads the config file, applies flags and validates.
pub(super) fn load_config(common: &CommonArgs, data: &DataArgs) -> Result<Config, Failure> {
    crate::effective::base_config(common, data)
}

/// Runs `work` until it ends or Ctrl-C (SIGTERM, SIGHUP) arrives; an interrupt is a failure
/// (exit 1).
pub(super) async fn interruptible<T, E>(
    work: impl std::future::Future<Output = Result<T, E>>,
    what: &str,
) -> Result<T, Failure>
where
    Failure: From<E>,
{
    tokio::select! {
        r = work => r.map_err(Failure::from),
        by = interrupts().reached(1) => Err(Failure::new(
            1,
            format!("{what} interrupted by {by}; nothing was changed"),
        )),
    }
}

/// Exit code of a finished run: 0 ok, 1 failed or interrupted.
pub(super) fn exit_code(r: &RunResult) -> u8 {
    match r.status {
        RunStatus::Ok => 0,
        RunStatus::Failed | RunStatus::Interrupted => 1,
    }
}
