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

/// How long setup, check and teardown wait, after an interrupt broke their statements, for the
/// server to answer the break before dbio stops waiting.
#[cfg(feature = "oracle")]
const BREAK_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs blocking Oracle work off the async runtime's threads, stopping it at Ctrl-C (SIGTERM,
/// SIGHUP) through the CLI's own signal handling: the first interrupt breaks the statements in
/// flight (`breaker`) and waits up to [`BREAK_WAIT`] for the work to stop and say what it left;
/// a second one, or the deadline, ends the wait at once. Exit 1 when interrupted.
#[cfg(feature = "oracle")]
async fn interruptible<T: Send + 'static>(
    what: &str,
    breaker: dbio_oracle::client::Breaker,
    f: impl FnOnce(&dbio_oracle::client::Breaker) -> Result<T, OracleError> + Send + 'static,
) -> Result<T, Failure> {
    let interrupts = crate::signals::interrupts();
    let b = breaker.clone();
    let mut work = tokio::task::spawn_blocking(move || f(&b));
    let joined = |r: Result<Result<T, OracleError>, tokio::task::JoinError>| match r {
        Ok(r) => r.map_err(Failure::from),
        Err(e) => Err(Failure::new(
            1,
            format!("an Oracle task ended abnormally: {e}"),
        )),
    };
    let by = tokio::select! {
        r = &mut work => return joined(r),
        by = interrupts.clone().reached(1) => by,
    };
    errln!(
        "dbio: {by}: stopping {what}: breaking the statement in flight (a second {by} stops waiting)"
    );
    let b = breaker.clone();
    let _ = tokio::task::spawn_blocking(move || b.stop(by)).await;
    tokio::select! {
        r = &mut work => match joined(r) {
            // Its last statement ended before the break reached it: the work is done.
            Ok(v) => {
                errln!("dbio: {what} had finished when {by} arrived");
                Ok(v)
            }
            Err(f) => Err(Failure::new(1, f.message)),
        },
        _ = tokio::time::sleep(BREAK_WAIT) => Err(Failure::new(
            1,
            format!(
                "{what} interrupted by {by}; the server did not answer the break within {}s, so dbio stopped \
                 waiting: what was in flight stays recorded in dbio's catalog, and the next `dbio {what}` resumes or \
                 reports it",
                BREAK_WAIT.as_secs()
            ),
        )),
        by2 = interrupts.reached(2) => Err(Failure::new(
            1,
            format!("{what} interrupted by {by}, then {by2}: dbio stopped waiting for the server"),
        )),
    }
}

/// Runs blocking Oracle work (the server's facts) off the async runtime's threads.
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
    use dbio_oracle::client::{self, Breaker};

    use super::*;
    use crate::cmd::RunOutput;

    fn print(line: &str) {
        outln!("{line}");
    }

    pub async fn setup(config: &Config, admin: ConnectString, force: bool) -> Result<u8, Failure> {
        // dbio's signal handlers first: the Oracle client's own are undone where it installs
        // them (dbio_oracle::signals).
        crate::signals::interrupts();
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
        interruptible("setup", Breaker::new(), move |b| {
            client::setup(&admin, &plan, &facts, force, &t, b, &print)
        })
        .await?;
        Ok(0)
    }

    pub async fn check(
        config: &Config,
        admin: ConnectString,
    ) -> Result<dbio_core::dataset::CheckReport, Failure> {
        // dbio's signal handlers first: the Oracle client's own are undone where it installs
        // them (dbio_oracle::signals).
        crate::signals::interrupts();
        crate::cmd::db::check(&mut OracleBackend::new(admin, config), config).await
    }

    pub async fn list(
        config: &Config,
        admin: ConnectString,
    ) -> Result<Vec<dbio_core::discover::FoundDataSet>, Failure> {
        crate::cmd::db::list(&mut OracleBackend::new(admin, config)).await
    }

    /// Without `yes`, lists what would be dropped and exits 1, as on PostgreSQL.
    pub async fn teardown(config: &Config, admin: ConnectString, yes: bool) -> Result<u8, Failure> {
        crate::signals::interrupts();
        let prefix = config.data.prefix.clone();
        let t = timeouts(config);
        let found = interruptible("teardown", Breaker::new(), move |b| {
            client::teardown(&admin, &prefix, yes, &t, b, &print)
        })
        .await?;
        if !found {
            outln!(
                "nothing to drop: no data set of prefix {} recorded by dbio",
                config.data.prefix.to_uppercase()
            );
            return Ok(0);
        }
        if !yes {
            outln!("rerun with --yes to drop them");
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
pub use enabled::{capacity, check, list, ramp, run, setup, teardown};

#[cfg(not(feature = "oracle"))]
mod disabled {
    use dbio_core::bench::{Calibrate, RampOutcome, RampProgress};
    use dbio_core::result::RunResult;

    use super::*;
    use crate::cmd::RunOutput;

    pub async fn setup(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn check(
        _: &Config,
        _: ConnectString,
    ) -> Result<dbio_core::dataset::CheckReport, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn teardown(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn list(
        _: &Config,
        _: ConnectString,
    ) -> Result<Vec<dbio_core::discover::FoundDataSet>, Failure> {
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
pub use disabled::{capacity, check, list, ramp, run, setup, teardown};
