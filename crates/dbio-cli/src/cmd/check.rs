//! `dbio check`: verify the data set.

use dbio_core::config::Database;
use dbio_core::dataset::DataSetPlan;
use dbio_postgres::check;

use super::discover::{data_ask, discover};
use super::{DEFAULT_BLOCK_SIZE, interruptible, load_config, resolve};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs};

pub(super) async fn check_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = load_config(common, data)?;
    if config.engine == Database::Oracle {
        let admin = crate::oracle::admin_target(&config, common.one_dsn())?;
        return crate::oracle::check(&config, admin).await;
    }
    let target = resolve(&config, common)?;
    let ask = data_ask(common, data, &config)?;
    discover(&mut config, &ask, &target, quiet).await?;
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let report = interruptible(check::check(&target, &plan, read_shape(&config)), "check").await?;
    out!("{}", report.render_text());
    // What a run as this role will lack, and the GRANT for each (same list as the run's).
    if let Ok(missing) = dbio_postgres::rights::missing_rights_of(&target).await {
        out!("{}", dbio_core::report::render_missing_rights(&missing));
    }
    Ok(if report.ok() { 0 } else { 1 })
}

/// How a run of `config` reads, for check to verify the same plan.
pub(super) fn read_shape(config: &dbio_core::Config) -> check::ReadShape {
    check::ReadShape {
        path: config.run.read_path,
        work_unit: config.run.work_unit,
    }
}
