//! The one pipeline: a run, and a ramp of runs, over any [`crate::backend::Backend`]; a
//! capacity search is a ramp whose steps a search chooses.
//! The CLI picks the backend once; everything from preflight to result.json is here.

mod capacity;
#[cfg(test)]
pub(crate) mod fake;
mod publish;
mod ramp;
mod run;

pub use capacity::capacity;
pub use publish::{Output, progress_line, publish, write_results};
pub use ramp::{
    FixedSteps, PlannedRun, RampOutcome, RampProgress, Ramping, StepPlanner, ramp, ramp_svgs,
    run_planned, steps,
};
pub use run::{Calibrate, run};
