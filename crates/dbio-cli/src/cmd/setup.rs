//! `dbio setup`: build the data set.

use std::sync::Arc;

use dbio_core::Config;
use dbio_core::config::Database;
use dbio_core::dataset::{LoadObserver, LoadSummary, NoProgress};
use dbio_postgres::{SetupOptions, Target};

use super::teardown::refuse_drop_dependents_on_oracle;
use super::{interruptible, load_config, pg_data_set, resolve};
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
) -> Result<LoadSummary, Failure> {
    let plan = pg_data_set(config, target).await?;
    let observer: Arc<dyn LoadObserver> = if quiet {
        Arc::new(NoProgress)
    } else {
        Arc::new(LoadBars::new())
    };
    if !quiet {
        errln!(
            "setup: {} schema(s) x {} blocks of {} kB on {target}{}",
            plan.schemas,
            plan.scale_blocks,
            plan.block_size / 1024,
            plan.tablespace
                .as_ref()
                .map(|t| format!(" in tablespace {t}"))
                .unwrap_or_default()
        );
    }
    Ok(dbio_postgres::setup(target, &plan, opts, observer).await?)
}
