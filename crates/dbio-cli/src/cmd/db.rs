//! The database a command talks to, picked once from `engine`; run and ramp hand it to
//! core's one pipeline (`bench::run`), whichever it is.

use std::sync::Arc;

use dbio_calibrate::Baseline;
use dbio_core::Config;
use dbio_core::backend::{DataSet, data_set_plan};
use dbio_core::bench::{self, Calibrate, Output, RampOutcome, RampProgress};
use dbio_core::config::Database;
use dbio_core::dataset::{CheckReport, LoadObserver, LoadSummary, NoProgress, SetupAsk};
use dbio_core::discover::{DataSetAsk, FoundDataSet};
use dbio_core::result::RunResult;
use dbio_core::teardown::{TeardownPlan, TeardownReport};
use dbio_oracle::ConnectString;
use dbio_postgres::{PgBackend, Target};

use super::discover::discover_on;
use crate::Failure;
use crate::args::CommonArgs;
use crate::progress::LoadBars;
use crate::signals::interrupts;

pub(crate) enum Db {
    /// One target, or several driven in one window (`target.dsns`).
    Postgres(Vec<Target>),
    Oracle(ConnectString),
}

impl Db {
    /// The target of `config.engine`: PostgreSQL's flag > PG* > file > libpq defaults,
    /// Oracle's flag > DBIO_ORACLE_DSN > file.
    pub(crate) fn pick(config: &Config, common: &CommonArgs) -> Result<Db, Failure> {
        Ok(match config.engine {
            Database::Oracle => {
                if !config.target.dsns.is_empty() {
                    return Err(Failure::new(
                        2,
                        "engine: oracle drives one database: spread its sessions over the instances with \
                         target.services (one connect identifier per instance), not --dsn repeated",
                    ));
                }
                Db::Oracle(crate::oracle::admin_target(config, common.one_dsn())?)
            }
            Database::Postgres => Db::Postgres(crate::scratch_target::resolve_all(config, common)?),
        })
    }

    /// The target of `config.engine` for a command on one target (setup, check, list,
    /// teardown): several are refused.
    pub(crate) fn pick_one(config: &Config, common: &CommonArgs) -> Result<Db, Failure> {
        Ok(match config.engine {
            Database::Postgres => {
                Db::Postgres(vec![crate::scratch_target::resolve(config, common)?])
            }
            Database::Oracle => Db::pick(config, common)?,
        })
    }

    /// The target as messages show it (never a password).
    pub(crate) fn shown(&self) -> String {
        match self {
            Db::Postgres(targets) => targets
                .iter()
                .map(Target::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            Db::Oracle(admin) => admin.redacted(),
        }
    }

    /// The PostgreSQL target a data-set command works on: the first.
    fn first_pg(targets: &[Target], what: &str) -> Result<PgBackend, Failure> {
        match targets.first() {
            Some(t) => Ok(PgBackend::new(t.clone())),
            None => Err(Failure::new(2, format!("no target to {what}"))),
        }
    }

    /// Every dbio data set the (first) target holds.
    pub(crate) async fn list(&self, config: &Config) -> Result<Vec<FoundDataSet>, Failure> {
        match self {
            Db::Postgres(targets) if targets.is_empty() => Ok(Vec::new()),
            Db::Postgres(targets) => list(&mut Db::first_pg(targets, "list")?).await,
            Db::Oracle(admin) => list(&mut crate::oracle::data_set(admin.clone(), config)).await,
        }
    }

    /// Fills `config.data` from the marks of the prefix's data set on the (first) target
    /// (`discover::discover`); the note the user should see, if any.
    pub(crate) async fn discover(
        &self,
        config: &mut Config,
        ask: &DataSetAsk,
    ) -> Result<Option<String>, Failure> {
        match self {
            Db::Postgres(targets) if targets.is_empty() => Ok(None),
            Db::Postgres(targets) => {
                discover_on(&mut Db::first_pg(targets, "read")?, config, ask).await
            }
            Db::Oracle(admin) => {
                let mut backend = crate::oracle::data_set(admin.clone(), config);
                discover_on(&mut backend, config, ask).await
            }
        }
    }

    /// `dbio check` of the data set `config` describes, on the (first) target.
    pub(crate) async fn check(&self, config: &Config) -> Result<CheckReport, Failure> {
        match self {
            Db::Postgres(targets) => check(&mut Db::first_pg(targets, "check")?, config).await,
            Db::Oracle(admin) => {
                check(&mut crate::oracle::data_set(admin.clone(), config), config).await
            }
        }
    }

    /// `dbio setup` of the data set `config` describes, on the (first) target.
    pub(crate) async fn setup(
        &self,
        config: &Config,
        ask: SetupAsk,
        quiet: bool,
    ) -> Result<LoadSummary, Failure> {
        let shown = self.shown();
        match self {
            Db::Postgres(targets) => {
                setup(
                    &mut Db::first_pg(targets, "set up")?,
                    config,
                    ask,
                    &shown,
                    quiet,
                )
                .await
            }
            Db::Oracle(admin) => {
                let mut backend = crate::oracle::data_set(admin.clone(), config);
                setup(&mut backend, config, ask, &shown, quiet).await
            }
        }
    }

    /// What `dbio teardown` would drop of the data set of `config`'s prefix; changes nothing.
    pub(crate) async fn teardown_plan(&self, config: &Config) -> Result<TeardownPlan, Failure> {
        let prefix = &config.data.prefix;
        match self {
            Db::Postgres(targets) => {
                teardown_plan(&mut Db::first_pg(targets, "tear down")?, prefix).await
            }
            Db::Oracle(admin) => {
                teardown_plan(&mut crate::oracle::data_set(admin.clone(), config), prefix).await
            }
        }
    }

    /// `dbio teardown --yes`: drops the data set of `config`'s prefix, until it ends or
    /// the first Ctrl-C (SIGTERM, SIGHUP) stops it.
    pub(crate) async fn teardown(
        &self,
        config: &Config,
        drop_dependents: bool,
    ) -> Result<TeardownReport, Failure> {
        let prefix = &config.data.prefix;
        match self {
            Db::Postgres(targets) => {
                let mut backend = Db::first_pg(targets, "tear down")?;
                teardown(&mut backend, prefix, drop_dependents).await
            }
            Db::Oracle(admin) => {
                let mut backend = crate::oracle::data_set(admin.clone(), config);
                teardown(&mut backend, prefix, drop_dependents).await
            }
        }
    }

    /// One ramp through the pipeline: every step a run, then the ramp's files.
    pub(crate) async fn ramp(
        &self,
        config: &Config,
        line: &(dyn Fn(&str) + Sync),
        quiet: bool,
        progress: &dyn RampProgress,
    ) -> Result<RampOutcome, Failure> {
        let calibration = load_calibration(config)?;
        let calibrate = calibration.as_ref().map(|b| b as Calibrate);
        match self {
            Db::Postgres(targets) => {
                let mut backends: Vec<PgBackend> =
                    targets.iter().cloned().map(PgBackend::new).collect();
                let shown: Vec<String> = targets.iter().map(Target::redacted).collect();
                Ok(bench::ramp(
                    &mut backends,
                    config,
                    &shown,
                    line,
                    quiet,
                    progress,
                    interrupts(),
                    calibrate,
                )
                .await?)
            }
            Db::Oracle(admin) => {
                crate::oracle::ramp(config, admin.clone(), line, quiet, progress, calibrate).await
            }
        }
    }

    /// A capacity search through the pipeline: a ramp whose steps it chooses, then the
    /// ramp's files with the answer.
    pub(crate) async fn capacity(
        &self,
        config: &Config,
        line: &(dyn Fn(&str) + Sync),
        quiet: bool,
        progress: &dyn RampProgress,
    ) -> Result<RampOutcome, Failure> {
        let calibration = load_calibration(config)?;
        let calibrate = calibration.as_ref().map(|b| b as Calibrate);
        match self {
            Db::Postgres(targets) => {
                let mut backends: Vec<PgBackend> =
                    targets.iter().cloned().map(PgBackend::new).collect();
                let shown: Vec<String> = targets.iter().map(Target::redacted).collect();
                Ok(bench::capacity(
                    &mut backends,
                    config,
                    &shown,
                    line,
                    quiet,
                    progress,
                    interrupts(),
                    calibrate,
                )
                .await?)
            }
            Db::Oracle(admin) => {
                crate::oracle::capacity(config, admin.clone(), line, quiet, progress, calibrate)
                    .await
            }
        }
    }

    /// One run through the pipeline, with its result folder and files; `calibration` puts
    /// the device's figures (a `dbio calibrate` result) beside the database's.
    pub(crate) async fn run(
        &self,
        config: &Config,
        output: &Output<'_>,
        calibration: Option<Calibrate<'_>>,
    ) -> Result<RunResult, Failure> {
        match self {
            Db::Postgres(targets) => {
                let mut backends: Vec<PgBackend> =
                    targets.iter().cloned().map(PgBackend::new).collect();
                Ok(bench::run(&mut backends, config, output, interrupts(), calibration).await?)
            }
            Db::Oracle(admin) => {
                crate::oracle::run(config, admin.clone(), output, calibration).await
            }
        }
    }
}

/// The data sets `backend`'s target holds, until they are read or Ctrl-C (SIGTERM, SIGHUP).
pub(crate) async fn list<D: DataSet>(backend: &mut D) -> Result<Vec<FoundDataSet>, Failure> {
    super::interruptible(backend.list(), "list").await
}

/// `dbio check` on `backend`'s target, until it ends or Ctrl-C (SIGTERM, SIGHUP).
pub(crate) async fn check<D: DataSet>(
    backend: &mut D,
    config: &Config,
) -> Result<CheckReport, Failure> {
    super::interruptible(backend.check(config), "check").await
}

/// What `dbio teardown` would drop on `backend`'s target, until it is read or Ctrl-C (SIGTERM,
/// SIGHUP).
pub(crate) async fn teardown_plan<D: DataSet>(
    backend: &mut D,
    prefix: &str,
) -> Result<TeardownPlan, Failure> {
    super::interruptible(backend.teardown_plan(prefix), "teardown").await
}

/// `dbio teardown --yes` on `backend`'s target, until it ends or the first Ctrl-C (SIGTERM,
/// SIGHUP) stops it (the backend says what it left).
pub(crate) async fn teardown<D: DataSet>(
    backend: &mut D,
    prefix: &str,
    drop_dependents: bool,
) -> Result<TeardownReport, Failure> {
    Ok(backend
        .teardown(prefix, drop_dependents, interrupts())
        .await?)
}

/// `dbio setup` on `backend`'s target (`shown`): a line saying what it builds, then the load
/// with a progress bar per schema (neither when `quiet`), until it ends or the first Ctrl-C
/// (SIGTERM, SIGHUP) stops it.
pub(crate) async fn setup<D: DataSet>(
    backend: &mut D,
    config: &Config,
    ask: SetupAsk,
    shown: &str,
    quiet: bool,
) -> Result<LoadSummary, Failure> {
    let plan = super::interruptible(data_set_plan(backend, config), "setup").await?;
    let observer: Arc<dyn LoadObserver> = if quiet {
        Arc::new(NoProgress)
    } else {
        errln!(
            "setup: {} schema(s) x {} blocks of {} kB on {shown}{}",
            plan.schemas,
            plan.scale_blocks,
            plan.block_size / 1024,
            plan.tablespace
                .as_ref()
                .map(|t| format!(" in tablespace {t}"))
                .unwrap_or_default()
        );
        Arc::new(LoadBars::new())
    };
    Ok(backend.setup(config, ask, observer, interrupts()).await?)
}

/// The calibration `run.calibration` names, read once (exit 2 when it cannot be).
pub(crate) fn load_calibration(config: &Config) -> Result<Option<Baseline>, Failure> {
    match &config.run.calibration {
        Some(file) => Ok(Some(Baseline::read(file)?)),
        None => Ok(None),
    }
}
