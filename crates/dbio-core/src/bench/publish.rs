//! How a run talks to the user and where its files go: progress lines and notes, then
//! result.json and report.txt written atomically, with a fallback when they cannot be.

use std::path::Path;

use crate::driver::Progress;
use crate::error::CoreError;
use crate::output;
use crate::report;
use crate::result::RunResult;

/// How a run talks to the user.
pub struct Output<'a> {
    pub quiet: bool,
    /// Print report.txt on stdout at the end (a ramp prints its own table instead).
    pub print_report: bool,
    /// Where progress lines and notes go (stderr, or above a ramp's progress bar).
    pub line: &'a (dyn Fn(&str) + Sync),
    /// Where the report goes (stdout).
    pub report: &'a (dyn Fn(&str) + Sync),
}

impl Output<'_> {
    /// A progress line or note; nothing when quiet.
    pub fn note(&self, text: &str) {
        if !self.quiet {
            (self.line)(text);
        }
    }
}

/// The live line, like `pgbench -P`.
pub fn progress_line(p: &Progress) -> String {
    if p.warmup {
        return match &p.waiting {
            Some(w) => format!("progress: {:.0} s before the window; {w}", p.elapsed_s),
            None => "progress: warm-up".into(),
        };
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

/// Writes `files` into `dir`, each atomically. When one cannot be written (disk full, folder
/// gone), the first of them, the main document, is kept in a new file under $TMPDIR, and the
/// error (exit 1) names that file.
pub fn write_results(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), CoreError> {
    for (name, body) in files {
        if let Err(e) = output::write_atomic(&dir.join(name), body) {
            let kept = match files.first() {
                Some((main, bytes)) => match output::save_fallback(main, bytes) {
                    Ok(path) => format!("{main} is kept in {}", path.display()),
                    Err(f) => format!("{main} could not be kept anywhere ({f})"),
                },
                None => String::new(),
            };
            return Err(CoreError::NotWritten {
                message: format!("cannot write {name} into {}: {e}; {kept}", dir.display()),
            });
        }
    }
    Ok(())
}

/// Writes result.json and report.txt (each atomically), prints the report when asked (and
/// always when the files could not be written), and says where they are.
pub fn publish(result: &RunResult, out_dir: &Path, output: &Output<'_>) -> Result<(), CoreError> {
    let text = report::render_text(result);
    let json = serde_json::to_string_pretty(result).map_err(|e| CoreError::NotWritten {
        message: format!("cannot serialize the result: {e}"),
    })?;
    let written = write_results(
        out_dir,
        &[
            ("result.json", json.as_bytes()),
            ("report.txt", text.as_bytes()),
        ],
    );
    if output.print_report || written.is_err() {
        (output.report)(&text);
    }
    written?;
    output.note(&format!(
        "results: {}/result.json, {}/report.txt",
        out_dir.display(),
        out_dir.display()
    ));
    Ok(())
}
