//! The data set a command takes when no --schemas/--scale is given: the one dbio's marks
//! describe for the prefix (core's `discover` decides; the backend, PostgreSQL's or
//! Oracle's, reads the marks).

use dbio_core::Config;
use dbio_core::backend::DataSet;
use dbio_core::discover::{self, DataSetAsk};

use super::db::Db;
use super::interruptible;
use crate::Failure;
use crate::args::{CommonArgs, DataArgs};

/// What the command line and the config file say about the data set, and where.
pub(super) fn data_ask(
    common: &CommonArgs,
    data: &DataArgs,
    config: &Config,
) -> Result<DataSetAsk, Failure> {
    let file_keys = match &common.config {
        Some(path) => Config::keys_in_file(path)?,
        None => serde_json::Value::Null,
    };
    let in_file = |key: &str| {
        file_keys
            .get("data")
            .and_then(|d| d.get(key))
            .is_some_and(|v| !v.is_null())
    };
    let file_name = || {
        common
            .config
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let schemas = match data.schemas {
        Some(n) => Some((n, "--schemas".to_string())),
        None if in_file("schemas") => Some((
            config.data.schemas,
            format!("data.schemas in {}", file_name()),
        )),
        None => None,
    };
    let scale = match data.scale {
        Some(s) => Some((s, "--scale".to_string())),
        None if in_file("scale") => {
            Some((config.data.scale, format!("data.scale in {}", file_name())))
        }
        None => None,
    };
    Ok(DataSetAsk {
        prefix: config.data.prefix.clone(),
        schemas,
        scale,
    })
}

/// Fills `config.data` from the data set dbio's marks describe for the prefix, on the target
/// `db` names (PostgreSQL: the first of its targets; every target's preflight then verifies
/// it holds the same): core's `discover` decides, over whichever backend it is. What the
/// user should know (the data sets the target does hold, or why they could not be read) goes
/// to stderr unless `quiet`.
pub(super) async fn discover(
    config: &mut Config,
    ask: &DataSetAsk,
    db: &Db,
    quiet: bool,
) -> Result<(), Failure> {
    let note = db.discover(config, ask).await?;
    if !quiet && let Some(note) = note {
        errln!("dbio: note: {note}");
    }
    Ok(())
}

/// Discovery on `backend`'s target, until it ends or Ctrl-C (SIGTERM, SIGHUP).
pub(super) async fn discover_on<D: DataSet>(
    backend: &mut D,
    config: &mut Config,
    ask: &DataSetAsk,
) -> Result<Option<String>, Failure> {
    interruptible(
        discover::discover(backend, config, ask),
        "reading dbio's data sets",
    )
    .await
}
