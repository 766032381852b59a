//! `dbio calibrate`: measure the raw device and write its files. A run's database reads are
//! put next to the device's at the same load by core, through dbio-calibrate's `Baseline`.

use std::path::PathBuf;

use dbio_calibrate::CalibrateOptions;
use dbio_core::report::chart::{Chart, Series, render_svg};

use super::write_results;
use crate::Failure;

/// Checks the options and the path (nothing changed yet), makes the result folder, measures,
/// and writes the files; returns the exit code and the result folder.
pub fn calibrate_cmd(
    opts: &CalibrateOptions,
    out: Option<PathBuf>,
    overwrite: bool,
    quiet: bool,
) -> Result<(u8, PathBuf), Failure> {
    dbio_calibrate::preflight(opts)?;
    let dir = dbio_core::output::result_dir(out.as_deref(), "calibrate", overwrite)?;
    let progress = |text: &str| {
        if !quiet {
            errln!("calibrate: {text}");
        }
    };
    // Ctrl-C (SIGTERM, SIGHUP) ends the level in progress; the levels measured are written.
    let interrupts = crate::signals::interrupts();
    let stop = move || interrupts.count() > 0;
    let c = dbio_calibrate::calibrate(opts, &progress, &stop)?;
    let json = serde_json::to_string_pretty(&c).map_err(|e| Failure::new(1, e.to_string()))?;
    let level = |f: &dyn Fn(&dbio_calibrate::Point) -> Option<f64>| -> Vec<(f64, f64)> {
        c.points
            .iter()
            .filter_map(|p| Some((p.level as f64, f(p)?)))
            .collect()
    };
    let chart = |title: &str, y: &str, series: Vec<Series>| {
        render_svg(&Chart {
            title: title.into(),
            x_label: "outstanding I/Os (load level)".into(),
            y_label: y.into(),
            series,
            log2_x: true,
        })
    };
    let iops = chart(
        "small random I/O: IOPS vs load",
        "IOPS",
        vec![Series::new(
            format!("{} KiB IOPS", c.block_bytes >> 10),
            level(&|p| Some(p.small_iops)),
        )],
    );
    let latency = chart(
        "small random I/O: latency vs load",
        "latency (µs)",
        vec![
            Series::new("p50", level(&|p| p.small_latency_us.map(|l| l.p50 as f64))),
            Series::new("p99", level(&|p| p.small_latency_us.map(|l| l.p99 as f64))),
        ],
    );
    let mbps = chart(
        "large random reads: MB/s vs load",
        "MiB/s",
        vec![Series::new(
            format!("{} KiB reads", c.large_bytes >> 10),
            level(&|p| Some(p.large_mbps)),
        )],
    );
    let summary = c.summary();
    let written = write_results(
        &dir,
        &[
            ("calibrate.json", json.as_bytes()),
            ("summary.txt", summary.as_bytes()),
            ("iops.csv", c.iops_csv().as_bytes()),
            ("mbps.csv", c.mbps_csv().as_bytes()),
            ("lat.csv", c.lat_csv().as_bytes()),
            ("iops.svg", iops.as_bytes()),
            ("latency.svg", latency.as_bytes()),
            ("mbps.svg", mbps.as_bytes()),
        ],
    );
    out!("{summary}");
    written?;
    progress(&format!(
        "summary.txt, iops.csv, mbps.csv, lat.csv, calibrate.json and charts in {}",
        dir.display()
    ));
    let code = match c.status {
        dbio_calibrate::CalibrationStatus::Ok => 0,
        dbio_calibrate::CalibrationStatus::Interrupted => 1,
    };
    Ok((code, dir))
}
