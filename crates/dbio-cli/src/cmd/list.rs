//! `dbio list`: every data set on the target.

use dbio_core::config::Database;
use dbio_core::discover::render_list;
use dbio_postgres::marker;

use super::{interruptible, load_config, print_json, resolve};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, Format};

pub(super) async fn list_cmd(common: &CommonArgs, format: Format) -> Result<u8, Failure> {
    let config = load_config(common, &DataArgs::default())?;
    if config.engine == Database::Oracle {
        return Err(Failure::new(
            2,
            "dbio list reads the marks dbio leaves on PostgreSQL schemas; on Oracle, `dbio check` verifies the data set of data.prefix",
        ));
    }
    let target = resolve(&config, common)?;
    let found = interruptible(
        async {
            let client = target.connect("dbio-list").await?;
            marker::data_sets(&client).await
        },
        "list",
    )
    .await?;
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
