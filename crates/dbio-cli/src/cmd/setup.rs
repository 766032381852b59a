//! `dbio setup`: build the data set.

use std::sync::Arc;

use dbio_core::Config;
use dbio_core::config::Database;
use dbio_core::dataset::{DataSetPlan, LoadObserver, LoadSummary, NoProgress};
use dbio_postgres::loader::{self, SetupOptions};
use dbio_postgres::{PgError, Target};

use super::teardown::refuse_drop_dependents_on_oracle;
use super::{DEFAULT_BLOCK_SIZE, interruptible, load_config, resolve};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, LoadArgs};
use crate::progress::LoadBars;

pub(super) async fn setup_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    load: &LoadArgs,
    force: bool,
    drop_dependents: bool,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = load_config(common, data)?;
    load.apply(&mut config);
    config.validate()?;
    if config.engine == Database::Oracle {
        refuse_drop_dependents_on_oracle(drop_dependents)?;
        let admin = crate::oracle::admin_target(&config, common.one_dsn())?;
        return crate::oracle::setup(&config, admin, force).await;
    }
    let target = resolve(&config, common)?;
    let opts = SetupOptions {
        force,
        drop_dependents,
        drop_caches: config.collector.drop_caches,
    };
    let summary = interruptible(setup(&config, &target, &opts, quiet), "setup").await?;
    if !quiet {
        out!("{}", summary.render_text());
    }
    Ok(0)
}

pub(super) async fn setup(
    config: &Config,
    target: &Target,
    opts: &SetupOptions,
    quiet: bool,
) -> Result<LoadSummary, PgError> {
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let observer: Arc<dyn LoadObserver> = if quiet {
        Arc::new(NoProgress)
    } else {
        Arc::new(LoadBars::new())
    };
    if !quiet {
        errln!(
            "setup: {} schema(s) x {} blocks on {target}{}",
            plan.schemas,
            plan.scale_blocks,
            plan.tablespace
                .as_ref()
                .map(|t| format!(" in tablespace {t}"))
                .unwrap_or_default()
        );
    }
    loader::setup(target, &plan, opts, observer).await
}
