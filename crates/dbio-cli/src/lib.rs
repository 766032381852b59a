//! The `dbio` command. `main.rs` only calls [`main_with_args`]; everything else is here so
//! tests can drive the whole CLI in-process.

#[macro_use]
mod term;

mod args;
mod cmd;
mod container;
mod effective;
mod oracle;
mod progress;
mod scratch_target;
mod signals;

use std::ffi::OsString;

use clap::Parser;
use dbio_core::ErrorKind;

pub use args::Cli;

/// A failure with the exit code it maps to: 1 the work failed, 2 bad usage or unreachable
/// target. The message is printed as `dbio: error: <message>`.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A library crate's error of this kind, with its exit code.
    pub fn of(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure::new(exit_code(kind), message)
    }
}

/// The exit code of an error kind, the one place it is decided: 2 bad usage, bad config or
/// an unreachable target; 1 the work failed or was interrupted.
pub fn exit_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Usage | ErrorKind::Unreachable => 2,
        ErrorKind::Failed | ErrorKind::Interrupted => 1,
    }
}

impl From<dbio_core::CoreError> for Failure {
    fn from(e: dbio_core::CoreError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

impl From<dbio_postgres::PgError> for Failure {
    fn from(e: dbio_postgres::PgError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

impl From<dbio_core::backend::BackendError> for Failure {
    fn from(e: dbio_core::backend::BackendError) -> Self {
        Failure::of(e.kind, e.message)
    }
}

impl From<dbio_calibrate::CalibrateError> for Failure {
    fn from(e: dbio_calibrate::CalibrateError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

impl From<dbio_oracle::OracleError> for Failure {
    fn from(e: dbio_oracle::OracleError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

/// Parses `args` (the first is the program name) and runs the command; returns the exit code.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("dbio: error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let code = match runtime.block_on(cmd::dispatch(cli)) {
        Ok(code) => code,
        Err(f) => {
            errln!("dbio: error: {}", f.message);
            f.code
        }
    };
    signals::forget();
    // A cancel request to a server that stopped answering may still be waiting for its
    // connect timeout on a blocking thread: the result is written, do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    // DESIGN's exit codes: 1 the work failed, 2 bad usage, bad config or unreachable target.
    #[test]
    fn each_error_kind_has_the_documented_exit_code() {
        assert_eq!(exit_code(ErrorKind::Usage), 2);
        assert_eq!(exit_code(ErrorKind::Unreachable), 2);
        assert_eq!(exit_code(ErrorKind::Failed), 1);
        assert_eq!(exit_code(ErrorKind::Interrupted), 1);
        let f = Failure::from(dbio_core::backend::BackendError::interrupted("stopped"));
        assert_eq!((f.code, f.message.as_str()), (1, "stopped"));
    }
}
