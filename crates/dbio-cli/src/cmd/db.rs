//! The database a command talks to, picked once from `engine`; run and ramp hand it to
//! core's one pipeline (`bench::run`), whichever it is.

use dbio_core::Config;
use dbio_core::bench::{self, Calibrate, Output};
use dbio_core::config::Engine;
use dbio_core::result::RunResult;
use dbio_oracle::ConnectString;
use dbio_postgres::Target;
use dbio_postgres::backend::PgBackend;

use super::resolve;
use crate::Failure;
use crate::args::CommonArgs;
use crate::signals::interrupts;

pub(crate) enum Db {
    Postgres(Box<Target>),
    Oracle(ConnectString),
}

impl Db {
    /// The target of `config.engine`: PostgreSQL's flag > PG* > file > libpq defaults,
    /// Oracle's flag > DBIO_ORACLE_DSN > file.
    pub(crate) fn pick(config: &Config, common: &CommonArgs) -> Result<Db, Failure> {
        Ok(match config.engine {
            Engine::Oracle => {
                Db::Oracle(crate::oracle::admin_target(config, common.dsn.as_deref())?)
            }
            Engine::Postgres => Db::Postgres(Box::new(resolve(config, common)?)),
        })
    }

    /// The target as results show it (no password).
    pub(crate) fn redacted(&self) -> String {
        match self {
            Db::Postgres(t) => t.redacted(),
            Db::Oracle(c) => c.redacted(),
        }
    }

    /// Waits up to `timeout` for the server to accept connections again (after a failed
    /// ramp step); true when it does. Oracle: not probed.
    pub(crate) async fn wait_ready(&self, timeout: std::time::Duration) -> bool {
        match self {
            Db::Postgres(t) => t.wait_ready(timeout).await,
            Db::Oracle(_) => true,
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
            Db::Postgres(t) => {
                let mut backend = PgBackend::new(t.as_ref().clone());
                Ok(bench::run(&mut backend, config, output, interrupts(), calibration).await?)
            }
            Db::Oracle(admin) => {
                crate::oracle::run(config, admin.clone(), output, calibration).await
            }
        }
    }
}
