//! `dbio setup`: build the data set.

use dbio_core::dataset::SetupAsk;

use super::db::Db;
use super::load_config;
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, LoadArgs};

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
    let db = Db::pick_one(&config, common)?;
    let ask = SetupAsk {
        force,
        drop_dependents,
    };
    let summary = db.setup(&config, ask, quiet).await?;
    if !quiet {
        out!("{}", summary.render_text());
    }
    Ok(0)
}
