//! `dbio regress`: exit 1 when the current run falls short of the baseline.

use std::path::Path;

use dbio_core::Config;
use dbio_core::output;
use dbio_core::report::regress::{self, Threshold};
use dbio_core::summary::read_step_set;

use super::print_json;
use crate::Failure;
use crate::args::Format;

/// Where the thresholds come from: the config file, overridden by the flags.
pub(super) struct Thresholds<'a> {
    pub config: Option<&'a Path>,
    pub max_iops_drop: Option<Threshold>,
    pub max_latency_rise: Option<Threshold>,
}

pub(super) fn regress_cmd(
    baseline: &Path,
    current: &Path,
    thresholds: Thresholds<'_>,
    junit: Option<&Path>,
    accepted: &[String],
    format: Format,
    quiet: bool,
) -> Result<u8, Failure> {
    dbio_core::shape::check_fact_names(accepted)?;
    let mut config = Config::load(thresholds.config)?;
    if let Some(v) = thresholds.max_iops_drop {
        config.regress.max_iops_drop_pct = v;
    }
    if let Some(v) = thresholds.max_latency_rise {
        config.regress.max_latency_rise_pct = v;
    }
    config.validate()?;
    if let Some(path) = junit {
        let inputs = [baseline, current, thresholds.config.unwrap_or(baseline)]
            .map(dbio_core::summary::document_path);
        dbio_core::input::refuse_overwriting_inputs(&inputs, &[path.to_path_buf()])?;
    }
    let base = read_step_set(baseline)?;
    let cur = read_step_set(current)?;
    if let Some(why) = regress::refusal(&base, &cur, accepted) {
        return Err(Failure::new(2, why));
    }
    let rows = regress::regress(&base, &cur, &config.regress);
    match format {
        Format::Json => print_json(&regress::RegressReport::of(&base, &cur, &rows))?,
        Format::Text => out!("{}", regress::render_text(&base, &cur, &rows)),
    }
    if let Some(path) = junit {
        output::write_atomic(path, regress::render_junit(&rows).as_bytes())?;
        if !quiet {
            errln!("regress: JUnit XML written to {}", path.display());
        }
    }
    Ok(if rows.iter().any(|r| r.regressed) {
        1
    } else {
        0
    })
}
