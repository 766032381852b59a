//! How a command talks to the user: the run's output (core's, to stderr), the JSON document
//! on stdout, files written atomically with a fallback.

use std::path::Path;

pub(crate) use dbio_core::bench::Output as RunOutput;

use crate::Failure;

/// A result document on stdout (`--format json`).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::new(1, e.to_string()))?;
    crate::term::print_json_text(&format!("{text}\n"));
    Ok(())
}

fn to_stderr(text: &str) {
    errln!("{text}");
}

fn to_stdout(text: &str) {
    crate::term::print(text);
}

pub const STDERR: RunOutput<'static> = RunOutput {
    quiet: false,
    print_report: true,
    line: &to_stderr,
    report: &to_stdout,
};

/// Writes `files` into `dir`, each atomically; when one cannot be, the first (the main
/// document) is kept under $TMPDIR and the failure (exit 1) names it.
pub(crate) fn write_results(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), Failure> {
    Ok(dbio_core::bench::write_results(dir, files)?)
}
