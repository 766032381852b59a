//! `dbio check`: verify the data set.

use dbio_postgres::check;

use super::db::Db;
use super::discover::{data_ask, discover};
use super::load_config;
use crate::Failure;
use crate::args::{CommonArgs, DataArgs};

pub(super) async fn check_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let mut config = load_config(common, data)?;
    let db = Db::pick_one(&config, common)?;
    // The data set is read from dbio's marks (PostgreSQL's), as a run reads it.
    if let Db::Postgres(targets) = &db
        && let Some(first) = targets.first()
    {
        let ask = data_ask(common, data, &config)?;
        discover(&mut config, &ask, first, quiet).await?;
    }
    let report = db.check(&config).await?;
    out!("{}", report.render_text());
    Ok(if report.ok() { 0 } else { 1 })
}

/// How a run of `config` reads, for check to verify the same plan.
pub(super) fn read_shape(config: &dbio_core::Config) -> check::ReadShape {
    check::ReadShape {
        path: config.run.read_path,
        work_unit: config.run.work_unit,
    }
}
