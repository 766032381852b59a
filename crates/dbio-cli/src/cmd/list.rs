//! `dbio list`: every data set on the target.

use dbio_core::discover::render_list;

use super::db::Db;
use super::{load_config, print_json};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, Format};

pub(super) async fn list_cmd(common: &CommonArgs, format: Format) -> Result<u8, Failure> {
    let config = load_config(common, &DataArgs::default())?;
    let db = Db::pick_one(&config, common)?;
    let found = db.list(&config).await?;
    let target = db.shown();
    match format {
        Format::Json => print_json(&found)?,
        Format::Text if found.is_empty() => outln!("no dbio data set in {target}"),
        Format::Text => {
            outln!("dbio data sets in {target}:");
            out!("{}", render_list(&found));
        }
    }
    Ok(0)
}
