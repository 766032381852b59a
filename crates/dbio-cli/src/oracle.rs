//! `engine: oracle`: the target, and dbio-oracle's backend for the data-set commands and the
//! one run pipeline. The target is `user@connect_identifier` (--dsn, DBIO_ORACLE_DSN or
//! target.dsn), a user allowed to create users and read the V$ views; its password comes from
//! the target or DBIO_ORACLE_PASSWORD.

use dbio_core::Config;
use dbio_oracle::ConnectString;
#[cfg(not(feature = "oracle"))]
use dbio_oracle::OracleError;

use crate::Failure;

/// The admin target: flag > DBIO_ORACLE_DSN > target.dsn.
pub fn admin_target(config: &Config, flag: Option<&str>) -> Result<ConnectString, Failure> {
    if !config.target.dsns.is_empty() {
        return Err(Failure::new(
            2,
            "engine: oracle drives one database: give one --dsn (spread sessions over instances with \
             target.services), not --dsn repeated or target.dsns",
        ));
    }
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let dsn = flag
        .map(str::to_string)
        .or_else(|| env("DBIO_ORACLE_DSN"))
        .or_else(|| config.target.dsn.clone())
        .ok_or_else(|| {
            Failure::new(
                2,
                "engine: oracle needs a target: --dsn user@//host:port/service, DBIO_ORACLE_DSN, or target.dsn",
            )
        })?;
    Ok(ConnectString::parse(&dsn, env("DBIO_ORACLE_PASSWORD"))?)
}

/// The Oracle backend behind the data-set commands (setup, check, list, teardown), with
/// dbio's signal handlers installed first: the Oracle client's own are undone where it
/// installs them (dbio_oracle::signals).
#[cfg(feature = "oracle")]
pub fn data_set(admin: ConnectString, config: &Config) -> dbio_oracle::backend::OracleBackend {
    crate::signals::interrupts();
    dbio_oracle::backend::OracleBackend::new(admin, config)
}

/// Without the `oracle` feature there is no Oracle backend: every data-set command says so.
#[cfg(not(feature = "oracle"))]
pub fn data_set(_: ConnectString, _: &Config) -> NotBuilt {
    NotBuilt
}

/// The Oracle backend of a dbio built without it (exit 2, naming the feature).
#[cfg(not(feature = "oracle"))]
pub struct NotBuilt;

#[cfg(not(feature = "oracle"))]
mod not_built {
    use std::sync::Arc;

    use dbio_core::backend::{BackendError, DataSet};
    use dbio_core::dataset::{CheckReport, LoadObserver, LoadSummary, SetupAsk};
    use dbio_core::discover::FoundDataSet;
    use dbio_core::interrupt::Interrupts;
    use dbio_core::teardown::{TeardownPlan, TeardownReport};

    use super::*;

    fn not_built() -> BackendError {
        let e = OracleError::NotBuilt;
        BackendError::new(e.kind(), e.to_string())
    }

    impl DataSet for NotBuilt {
        async fn block_size(&mut self, _: &Config) -> Result<u64, BackendError> {
            Err(not_built())
        }
        async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
            Err(not_built())
        }
        async fn check(&mut self, _: &Config) -> Result<CheckReport, BackendError> {
            Err(not_built())
        }
        async fn setup(
            &mut self,
            _: &Config,
            _: SetupAsk,
            _: Arc<dyn LoadObserver>,
            _: Interrupts,
        ) -> Result<LoadSummary, BackendError> {
            Err(not_built())
        }
        async fn teardown_plan(&mut self, _: &str) -> Result<TeardownPlan, BackendError> {
            Err(not_built())
        }
        async fn teardown(
            &mut self,
            _: &str,
            _: bool,
            _: Interrupts,
        ) -> Result<TeardownReport, BackendError> {
            Err(not_built())
        }
    }
}

#[cfg(feature = "oracle")]
mod enabled {
    use dbio_core::backend::BackendError;
    use dbio_core::bench::{self, Calibrate, RampOutcome, RampProgress};
    use dbio_core::result::RunResult;
    use dbio_oracle::backend::OracleBackend;

    use super::*;
    use crate::cmd::RunOutput;

    /// A ramp against Oracle through the one pipeline.
    pub async fn ramp(
        config: &Config,
        admin: ConnectString,
        line: &(dyn Fn(&str) + Sync),
        quiet: bool,
        progress: &dyn RampProgress,
        calibration: Option<Calibrate<'_>>,
    ) -> Result<RampOutcome, Failure> {
        let target = admin.redacted();
        let mut backend = OracleBackend::new(admin, config);
        Ok(bench::ramp(
            std::slice::from_mut(&mut backend),
            config,
            &[target],
            line,
            quiet,
            progress,
            crate::signals::interrupts(),
            calibration,
        )
        .await?)
    }

    /// A capacity search against Oracle through the one pipeline.
    pub async fn capacity(
        config: &Config,
        admin: ConnectString,
        line: &(dyn Fn(&str) + Sync),
        quiet: bool,
        progress: &dyn RampProgress,
        calibration: Option<Calibrate<'_>>,
    ) -> Result<RampOutcome, Failure> {
        let target = admin.redacted();
        let mut backend = OracleBackend::new(admin, config);
        Ok(bench::capacity(
            std::slice::from_mut(&mut backend),
            config,
            &[target],
            line,
            quiet,
            progress,
            crate::signals::interrupts(),
            calibration,
        )
        .await?)
    }

    /// One run against Oracle through the one pipeline: the same plan, driver, result.json
    /// and report as PostgreSQL, with V$ figures and Oracle's event names.
    pub async fn run(
        config: &Config,
        admin: ConnectString,
        output: &RunOutput<'_>,
        calibration: Option<Calibrate<'_>>,
    ) -> Result<RunResult, Failure> {
        let mut backend = OracleBackend::new(admin, config);
        bench::run(
            std::slice::from_mut(&mut backend),
            config,
            output,
            crate::signals::interrupts(),
            calibration,
        )
        .await
        .map_err(|e: BackendError| e.into())
    }
}

#[cfg(feature = "oracle")]
pub use enabled::{capacity, ramp, run};

#[cfg(not(feature = "oracle"))]
mod disabled {
    use dbio_core::bench::{Calibrate, RampOutcome, RampProgress};
    use dbio_core::result::RunResult;

    use super::*;
    use crate::cmd::RunOutput;

    pub async fn run(
        _: &Config,
        _: ConnectString,
        _: &RunOutput<'_>,
        _: Option<Calibrate<'_>>,
    ) -> Result<RunResult, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn ramp(
        _: &Config,
        _: ConnectString,
        _: &(dyn Fn(&str) + Sync),
        _: bool,
        _: &dyn RampProgress,
        _: Option<Calibrate<'_>>,
    ) -> Result<RampOutcome, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn capacity(
        _: &Config,
        _: ConnectString,
        _: &(dyn Fn(&str) + Sync),
        _: bool,
        _: &dyn RampProgress,
        _: Option<Calibrate<'_>>,
    ) -> Result<RampOutcome, Failure> {
        Err(OracleError::NotBuilt.into())
    }
}

#[cfg(not(feature = "oracle"))]
pub use disabled::{capacity, ramp, run};
