//! The data set a command takes when no --schemas/--scale is given: the one dbio's marks
//! describe for the prefix (core's `discover` decides; the backend reads the marks).

use dbio_core::Config;
use dbio_core::backend::DataSet;
use dbio_core::discover::{self, DataSetAsk};
use dbio_core::units::SizeSpec;
use dbio_postgres::{PgBackend, Target};

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

/// Reads the target's data sets and fills `config.data` from the prefix's (schemas, scale,
/// and the tablespace when none was given); an explicit value that disagrees is an error
/// naming both. With no data set of the prefix nothing changes, and the ones the target
/// holds are named on stderr.
pub(super) async fn discover(
    config: &mut Config,
    ask: &DataSetAsk,
    target: &Target,
    quiet: bool,
) -> Result<(), Failure> {
    let found = interruptible(
        PgBackend::new(target.clone()).list(),
        "reading dbio's data sets",
    )
    .await?;
    match discover::pick(ask, &found)? {
        Some(d) => {
            if ask.schemas.is_none() {
                config.data.schemas = d.schemas;
            }
            if ask.scale.is_none() {
                config.data.scale = SizeSpec::Blocks(d.scale_blocks);
            }
            if config.data.tablespace.is_none() {
                config.data.tablespace = d.tablespace.clone();
            }
            config.validate()?;
        }
        None => {
            if !quiet && let Some(note) = discover::others_note(&ask.prefix, &found) {
                errln!("dbio: note: {note}");
            }
        }
    }
    Ok(())
}
