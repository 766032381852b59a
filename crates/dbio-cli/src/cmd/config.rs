//! `dbio config`: each effective setting with its source.

use std::path::PathBuf;

use crate::Failure;

pub(super) fn config_cmd(
    command: &[String],
    config: Option<PathBuf>,
    get: Option<String>,
    yaml: bool,
) -> Result<u8, Failure> {
    let (c, rows) = crate::effective::with_sources(command, config)?;
    // target.dsn as the command would connect: redacted, or the scratch cluster's when
    // nothing else names a target.
    let dsn_row = rows
        .iter()
        .find(|(k, _, _)| k == "target.dsn")
        .and_then(|(_, v, _)| v.as_str().map(str::to_string));
    match get {
        Some(key) if key == "target.dsn" && dsn_row.is_some() => {
            outln!("{}", dsn_row.unwrap_or_default())
        }
        Some(key) => match c.get(&key) {
            Some(v) => outln!("{v}"),
            None => {
                return Err(Failure::new(
                    2,
                    format!("no key `{key}` in the configuration"),
                ));
            }
        },
        None if yaml => out!("{}", c.to_yaml()),
        None => out!("{}", crate::effective::render_sources(&rows)),
    }
    Ok(0)
}
