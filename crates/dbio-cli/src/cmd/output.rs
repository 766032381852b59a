//! How a run talks to the user and where its files go: progress lines, notes, the result
//! folder, atomic writes with a fallback, the JSON document on stdout.

use std::path::{Path, PathBuf};

use dbio_core::Config;
use dbio_core::driver::{DriveConfig, Progress, STOP_GRACE, WindowSpec};
use dbio_core::output;
use dbio_core::report;
use dbio_core::result::RunResult;
use dbio_core::workload::Workload;

use crate::Failure;

/// A result document on stdout (`--format json`).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::new(1, e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// The live line, like `pgbench -P`.
pub(crate) fn progress_line(p: &Progress) -> String {
    if p.warmup {
        return "progress: warm-up".into();
    }
    format!(
        "progress: {:.1} s, {:.1} ops/s, p99 {} µs, {} errors",
        p.elapsed_s,
        p.ops_per_s,
        p.p99_us
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into()),
        p.errors
    )
}

/// How a run talks to the user.
pub struct RunOutput<'a> {
    pub quiet: bool,
    /// Print report.txt on stdout at the end (a ramp prints its own table instead).
    pub print_report: bool,
    /// Where progress lines and notes go (stderr, or above a ramp's progress bar).
    pub line: &'a (dyn Fn(&str) + Sync),
}

impl RunOutput<'_> {
    /// A progress line or note; nothing when quiet.
    pub fn note(&self, text: &str) {
        if !self.quiet {
            (self.line)(text);
        }
    }
}

fn to_stderr(text: &str) {
    eprintln!("{text}");
}

pub const STDERR: RunOutput<'static> = RunOutput {
    quiet: false,
    print_report: true,
    line: &to_stderr,
};

/// The run's result folder (run.out, or a new results/<UTC>-<label>/), proven writable; a
/// used run.out is refused unless run.overwrite.
pub(crate) fn result_dir(config: &Config) -> Result<PathBuf, Failure> {
    let r = &config.run;
    Ok(output::result_dir(
        r.out.as_deref(),
        r.label.as_deref().unwrap_or("run"),
        r.overwrite,
    )?)
}

/// Writes `files` into `dir`, each atomically. When one cannot be written (disk full, folder
/// gone), the first of them, the main document, is kept in a new file under $TMPDIR, and the
/// failure (exit 1) names that file.
pub(crate) fn write_results(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), Failure> {
    for (name, body) in files {
        if let Err(e) = output::write_atomic(&dir.join(name), body) {
            let kept = match files.first() {
                Some((main, bytes)) => match output::save_fallback(main, bytes) {
                    Ok(path) => format!("{main} is kept in {}", path.display()),
                    Err(f) => format!("{main} could not be kept anywhere ({f})"),
                },
                None => String::new(),
            };
            return Err(Failure::new(
                1,
                format!("cannot write {name} into {}: {e}; {kept}", dir.display()),
            ));
        }
    }
    Ok(())
}

/// What the driver is told: the window (run_time, or work_loop operations per session),
/// warm-up, intervals, progress (none when quiet), error policy and seed.
pub(crate) fn drive_config(config: &Config, workload: Workload, quiet: bool) -> DriveConfig {
    let r = &config.run;
    DriveConfig {
        workload,
        window: if r.work_loop > 0 {
            WindowSpec::Loops(r.work_loop)
        } else {
            WindowSpec::Time(r.run_time.0)
        },
        warmup: r.warmup.0,
        interval: r.interval.0,
        progress: if quiet {
            std::time::Duration::ZERO
        } else {
            r.progress.0
        },
        on_error: r.on_error,
        seed: r.seed,
        grace: STOP_GRACE,
    }
}

/// Writes result.json and report.txt (each atomically), prints the report when asked (and
/// always when the files could not be written), and says where they are.
pub(crate) fn publish(
    result: &RunResult,
    out_dir: &Path,
    output: &RunOutput<'_>,
) -> Result<(), Failure> {
    let text = report::render_text(result);
    let json = serde_json::to_string_pretty(result).map_err(|e| Failure::new(1, e.to_string()))?;
    let written = write_results(
        out_dir,
        &[
            ("result.json", json.as_bytes()),
            ("report.txt", text.as_bytes()),
        ],
    );
    if output.print_report || written.is_err() {
        print!("{text}");
    }
    written?;
    output.note(&format!(
        "results: {}/result.json, {}/report.txt",
        out_dir.display(),
        out_dir.display()
    ));
    Ok(())
}
