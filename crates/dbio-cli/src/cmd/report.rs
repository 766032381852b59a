//! `dbio report`: re-render a run's or a ramp's result.

use std::path::Path;

use dbio_core::report::ramp::{ramp_csv, ramp_html, ramp_txt};
use dbio_core::result::RunResult;
use dbio_core::summary::RampResult;

use super::print_json;
use crate::Failure;
use crate::args::ReportFormat;
use dbio_core::bench::ramp_svgs;

/// `dbio report`: a run's result.json, a ramp's ramp.json, or a folder holding either.
pub(super) fn report_cmd(path: &Path, format: ReportFormat) -> Result<u8, Failure> {
    let file = if path.is_dir() {
        ["ramp.json", "result.json"]
            .iter()
            .map(|n| path.join(n))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                Failure::new(
                    2,
                    format!(
                        "{} holds neither ramp.json nor result.json; give a run's or a ramp's result folder",
                        path.display()
                    ),
                )
            })?
    } else {
        path.to_path_buf()
    };
    if let Some(ramp) = read_ramp(&file)? {
        match format {
            ReportFormat::Json => print_json(&ramp)?,
            ReportFormat::Csv => out!("{}", ramp_csv(&ramp)),
            ReportFormat::Html => out!("{}", ramp_html(&ramp, &ramp_svgs(&ramp))),
            ReportFormat::Text => out!("{}", ramp_txt(&ramp)),
        }
        return Ok(0);
    }
    let r = RunResult::read_json(&file)?;
    match format {
        ReportFormat::Json => print_json(&r)?,
        ReportFormat::Csv => out!("{}", dbio_core::report::render_csv(&r)),
        ReportFormat::Html => {
            return Err(Failure::new(
                2,
                "--format html renders a ramp (ramp.json); for a run use text, json or csv",
            ));
        }
        ReportFormat::Text => out!("{}", dbio_core::report::render_text(&r)),
    }
    Ok(0)
}

/// The ramp in `file`, or None when it is not a ramp (a run's result.json).
fn read_ramp(file: &Path) -> Result<Option<RampResult>, Failure> {
    let text = dbio_core::input::read_bounded(file, dbio_core::input::DOCUMENT_MAX_BYTES)
        .map_err(|e| Failure::new(2, format!("{}: {e}", file.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Failure::new(
            2,
            format!("{}: not a dbio result (invalid JSON: {e})", file.display()),
        )
    })?;
    if value.get("kind").and_then(|k| k.as_str()) != Some("ramp") {
        return Ok(None);
    }
    // read_step_set applies the format and sanity checks every reader of a ramp gets.
    dbio_core::summary::read_step_set(file)?;
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| Failure::new(2, format!("{}: not a valid dbio ramp: {e}", file.display())))
}
