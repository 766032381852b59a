//! `engine: oracle`: setup, check and teardown through dbio-oracle, and its backend for the
//! one run pipeline. The target is
//! `user@connect_identifier` (--dsn, DBIO_ORACLE_DSN or target.dsn), a user allowed to create
//! users and read the V$ views; its password comes from the target or DBIO_ORACLE_PASSWORD.

use dbio_core::Config;
use dbio_oracle::{ConnectString, OracleError};

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

/// Runs blocking Oracle work off the async runtime's threads.
#[cfg(feature = "oracle")]
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OracleError> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(Failure::from),
        Err(e) => Err(Failure::new(
            1,
            format!("an Oracle task ended abnormally: {e}"),
        )),
    }
}

#[cfg(feature = "oracle")]
mod enabled {
    use dbio_core::backend::BackendError;
    use dbio_core::bench::{self, Calibrate, RampOutcome, RampProgress};
    use dbio_core::result::RunResult;
    use dbio_oracle::backend::{OracleBackend, cache_warning, facts, timeouts};
    use dbio_oracle::client;

    use super::*;
    use crate::cmd::RunOutput;

    pub async fn setup(config: &Config, admin: ConnectString, force: bool) -> Result<u8, Failure> {
        let (facts, plan) = {
            let (c, a) = (config.clone(), admin.clone());
            blocking(move || facts(&c, &a)).await?
        };
        errln!(
            "setup: {} Oracle schema(s) x {} blocks of {} kB in tablespace {} on {} (container {}, CON_ID {})",
            plan.schemas,
            plan.scale_blocks,
            facts.tablespace.block_size / 1024,
            facts.tablespace.name,
            admin.redacted(),
            facts.container.con_name,
            facts.container.con_id
        );
        if let Some(w) = cache_warning(&facts, &plan) {
            errln!("warning: {w}");
        }
        let t = timeouts(config);
        let lines = blocking(move || client::setup(&admin, &plan, &facts, force, &t)).await?;
        for l in lines {
            outln!("{l}");
        }
        Ok(0)
    }

    pub async fn check(config: &Config, admin: ConnectString) -> Result<u8, Failure> {
        let (_, plan) = {
            let (c, a) = (config.clone(), admin.clone());
            blocking(move || facts(&c, &a)).await?
        };
        let t = timeouts(config);
        let (ok, lines) = blocking(move || client::check(&admin, &plan, &t)).await?;
        for l in lines {
            outln!("{l}");
        }
        Ok(if ok { 0 } else { 1 })
    }

    /// Without `yes`, lists what would be dropped and exits 1, as on PostgreSQL.
    pub async fn teardown(config: &Config, admin: ConnectString, yes: bool) -> Result<u8, Failure> {
        let prefix = config.data.prefix.clone();
        let t = timeouts(config);
        let lines = blocking(move || client::teardown(&admin, &prefix, yes, &t)).await?;
        if lines.is_empty() {
            outln!(
                "nothing to drop: no users {}<n> made by dbio",
                config.data.prefix.to_uppercase()
            );
            return Ok(0);
        }
        for l in lines {
            outln!("{l}");
        }
        Ok(if yes { 0 } else { 1 })
    }

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
pub use enabled::{check, ramp, run, setup, teardown};

#[cfg(not(feature = "oracle"))]
mod disabled {
    use dbio_core::bench::{Calibrate, RampOutcome, RampProgress};
    use dbio_core::result::RunResult;

    use super::*;
    use crate::cmd::RunOutput;

    pub async fn setup(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn check(_: &Config, _: ConnectString) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn teardown(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
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
}

#[cfg(not(feature = "oracle"))]
pub use disabled::{check, ramp, run, setup, teardown};
