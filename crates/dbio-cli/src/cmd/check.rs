//! `dbio check`: verify the data set.

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
    // The data set is read from dbio's marks, whichever the engine, as a run reads it.
    let ask = data_ask(common, data, &config)?;
    discover(&mut config, &ask, &db, quiet).await?;
    let report = db.check(&config).await?;
    out!("{}", report.render_text());
    Ok(if report.ok() { 0 } else { 1 })
}
