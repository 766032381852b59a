//! `dbio teardown`: list, then drop, one data set.

use dbio_core::discover::others_note;
use dbio_core::teardown::nothing_to_drop;

use super::db::Db;
use super::load_config;
use crate::Failure;
use crate::args::{CommonArgs, DataArgs};

/// Without `yes`, lists what would be dropped and exits 1 (0 when there is nothing).
pub(super) async fn teardown_cmd(
    common: &CommonArgs,
    prefix: Option<String>,
    yes: bool,
    drop_dependents: bool,
) -> Result<u8, Failure> {
    let data = DataArgs {
        prefix,
        ..DataArgs::default()
    };
    let config = load_config(common, &data)?;
    let db = Db::pick_one(&config, common)?;
    let prefix = &config.data.prefix;
    let target = db.shown();
    if yes {
        let report = db.teardown(&config, drop_dependents).await?;
        out!("{}", report.render_text(&target, prefix));
        return Ok(0);
    }
    let plan = db.teardown_plan(&config).await?;
    if plan.is_empty() {
        outln!("{}", nothing_to_drop(prefix, &target));
        // Best effort: the data sets the target does hold, when its marks can be read.
        if let Ok(found) = db.list(&config).await
            && let Some(note) = others_note(prefix, &found)
        {
            outln!("{note}");
        }
        return Ok(0);
    }
    out!("{}", plan.render_text(&target, prefix, drop_dependents));
    Ok(1)
}
