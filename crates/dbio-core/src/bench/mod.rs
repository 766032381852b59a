//! The one pipeline: a run (and each step of a ramp) over any [`crate::backend::Backend`].
//! The CLI picks the backend once; everything from preflight to result.json is here.

mod publish;
mod run;

pub use publish::{Output, progress_line, publish, write_results};
pub use run::{Calibrate, run};
