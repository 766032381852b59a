//! The one pipeline: a run, and a ramp of runs, over any [`crate::backend::Backend`].
//! The CLI picks the backend once; everything from preflight to result.json is here.

mod publish;
mod ramp;
mod run;

pub use publish::{Output, progress_line, publish, write_results};
pub use ramp::{RampOutcome, RampProgress, ramp, ramp_svgs, steps};
pub use run::{Calibrate, run};
