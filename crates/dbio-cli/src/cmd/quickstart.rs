//! `dbio quickstart`: scratch cluster, small data set, check, run, ramp.

use std::path::Path;

use dbio_core::Config;
use dbio_core::dataset::SetupAsk;
use dbio_core::driver::RunStatus;
use dbio_core::units::SizeSpec;
use dbio_postgres::{PgBackend, ScratchCluster, Target};

use super::db::{Db, setup};
use super::output::STDERR;
use super::run::run_benchmark;
use super::scratch::{describe, scratch_options};
use super::{RunOutput, exit_code};
use crate::Failure;
use crate::args::{Format, ScratchArgs};

/// The quickstart when no config says otherwise: 2 schemas of 12,288 blocks (96 MiB each),
/// six times the default 32 MB shared_buffers, then 10 s of 2 readers and 1 writer, then a
/// ramp of 1, 2 and 4 readers for 5 s each.
fn quickstart_config(path: Option<&Path>) -> Result<Config, Failure> {
    let mut config = match path {
        Some(p) => Config::from_file(p)?,
        None => {
            let mut c = Config::default();
            c.data.schemas = 2;
            c.data.scale = SizeSpec::Blocks(12_288);
            c.run.readers = 2;
            c.run.writers = 1;
            c.run.run_time = dbio_core::units::Dur(std::time::Duration::from_secs(10));
            c.ramp.readers = vec![1, 2, 4];
            c.ramp.writers = Some(vec![0]);
            c.ramp.run_time = Some(dbio_core::units::Dur(std::time::Duration::from_secs(5)));
            c
        }
    };
    if config.run.label.is_none() {
        config.run.label = Some("quickstart".into());
    }
    config.target.dsn = None;
    config.target.dsns.clear();
    config.target.readers.clear();
    config.target.writers.clear();
    config.validate()?;
    Ok(config)
}

pub(super) async fn quickstart(
    config_path: Option<&Path>,
    scratch_args: &ScratchArgs,
    keep: bool,
    quiet: bool,
) -> Result<u8, Failure> {
    let config = quickstart_config(config_path)?;
    errln!(
        "quickstart: starting a scratch PostgreSQL in {}",
        scratch_args.dir.display()
    );
    let cluster = ScratchCluster::start(&scratch_options(scratch_args)?)?;
    errln!("{}", describe(&cluster));
    if !cluster.direct_io() && !quiet {
        errln!(
            "quickstart: this server reads through the OS page cache, so its small data set is read from memory; the charts mark such steps. For device reads use PostgreSQL 16+ with --direct-io (scripts/quickstart.sh does)"
        );
    }
    let target = Target::from_dsn(&cluster.dsn())?;
    let result = quickstart_work(&config, &target, quiet).await;
    if !keep {
        ScratchCluster::stop(&cluster.dir)?;
        errln!(
            "quickstart: scratch server stopped; its files stay in {} (restart: dbio scratch start --dir {}; remove: rm -rf {})",
            cluster.dir.display(),
            scratch_args.dir.display(),
            cluster.dir.display()
        );
    } else {
        errln!(
            "quickstart: scratch server left running at {} (psql and pgbench: eval \"$(dbio scratch env --dir {})\"; dbio: --dsn \"{}\"; stop: dbio scratch stop --dir {})",
            cluster.dsn(),
            scratch_args.dir.display(),
            cluster.dsn(),
            scratch_args.dir.display()
        );
    }
    result
}

async fn quickstart_work(config: &Config, target: &Target, quiet: bool) -> Result<u8, Failure> {
    let mut backend = PgBackend::new(target.clone());
    let shown = target.to_string();
    let summary = setup(&mut backend, config, SetupAsk::default(), &shown, quiet).await?;
    outln!("== data set ==");
    out!("{}", summary.render_text());
    let report = super::db::check(&mut backend, config).await?;
    outln!("== check ==");
    out!("{}", report.render_text());
    if !report.ok() {
        return Ok(1);
    }
    outln!("== run ==");
    let output = RunOutput { quiet, ..STDERR };
    let db = Db::Postgres(vec![target.clone()]);
    let result = run_benchmark(config, &db, &output).await?;
    if result.status != RunStatus::Ok {
        return Ok(exit_code(&result));
    }
    outln!("== ramp ==");
    let (ramp, _) = super::ramp::ramp(config, &db, quiet, Format::Text).await?;
    Ok(if ramp.status == RunStatus::Ok { 0 } else { 1 })
}
