//! The run plan: the configuration and the server's facts (block size, the data set's schema
//! names), resolved and validated once after preflight, then read-only. Backends receive it;
//! result.json records its configuration, not a copy patched afterwards.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, OnError, RedoStress, SessionLoop};
use crate::driver::{DriveConfig, STOP_GRACE, SessionSpec, WindowSpec, session_specs_over};
use crate::error::CoreError;
use crate::workload::Workload;

#[derive(Debug, Clone)]
pub struct RunPlan {
    config: Config,
    block_size: u64,
    schema_names: Vec<String>,
    /// The targets as results show them (redacted), in `target.dsns` order; one for a run
    /// over one target.
    targets: Vec<String>,
    specs: Vec<SessionSpec>,
    workload: Workload,
    drive: DriveConfig,
}

impl RunPlan {
    /// Validates `config` against the server's block size and resolves the sessions, the
    /// workload and the window. `targets` (redacted, one per target) and `out` are what the
    /// result records. `quiet` turns the live progress off.
    pub fn new(
        config: &Config,
        block_size: u64,
        schema_names: Vec<String>,
        targets: Vec<String>,
        out: &Path,
        quiet: bool,
    ) -> Result<RunPlan, CoreError> {
        config.validate_run(block_size)?;
        let workload = Workload::from_config(config, block_size)?;
        let r = &config.run;
        let mut specs = session_specs_over(&config.session_split(), &schema_names, r.hot_schema);
        if let Some(shard) = r.shard() {
            // Every N-th session from the I-th: the shards together run the run's sessions,
            // each once, with the names (and schemas) they have in a one-process run.
            specs.retain(|s| s.index % shard.count == shard.index);
        }
        let drive = DriveConfig {
            workload: workload.clone(),
            window: if r.work_loop > 0 {
                WindowSpec::Loops(r.work_loop)
            } else {
                WindowSpec::Time(r.run_time.0)
            },
            warmup: r.warmup.0,
            interval: r.interval.0,
            progress: if quiet { Duration::ZERO } else { r.progress.0 },
            on_error: r.on_error,
            seed: r.seed,
            grace: STOP_GRACE,
            // Shards started at an instant open their windows at one instant after the
            // warm-up (see `bench::run`).
            snapshot_lead: if r.start_at().is_some() {
                crate::driver::snapshot_lead(r.warmup.0)
            } else {
                Duration::ZERO
            },
            arrivals: r.rate.map(|rate| crate::driver::ArrivalPlan {
                rate_per_s: rate.per_s(),
                arrival: r.arrival,
                seed: r.seed,
            }),
            steady: r.steady,
            precondition: r.precondition,
            steady_max: r.steady_max.0,
            session_engine: r.session_engine,
        };
        let mut recorded = config.clone();
        if config.target.dsns.is_empty() {
            recorded.target.dsn = targets.first().cloned();
        } else {
            recorded.target.dsns = targets.clone();
        }
        recorded.run.out = Some(out.to_path_buf());
        Ok(RunPlan {
            config: recorded,
            block_size,
            schema_names,
            targets,
            specs,
            workload,
            drive,
        })
    }

    /// The targets as results show them, in order.
    pub fn targets(&self) -> &[String] {
        &self.targets
    }

    /// The plan target `t`'s backend is given: its sessions only, and the configuration of
    /// that target (its DSN, its share of the readers and writers). The plan itself for a run
    /// over one target.
    pub fn for_target(&self, t: usize) -> RunPlan {
        if self.targets.len() <= 1 {
            return self.clone();
        }
        let mut plan = self.clone();
        plan.specs.retain(|s| s.target == Some(t as u32));
        if let Some(c) = self.config.target_configs().into_iter().nth(t) {
            plan.config = c;
        }
        plan.targets = vec![self.targets[t].clone()];
        plan
    }

    /// The configuration as the result records it (target redacted, the result folder set).
    pub fn config(&self) -> &Config {
        &self.config
    }
    pub fn block_size(&self) -> u64 {
        self.block_size
    }
    pub fn schema_names(&self) -> &[String] {
        &self.schema_names
    }
    pub fn specs(&self) -> &[SessionSpec] {
        &self.specs
    }
    pub fn workload(&self) -> &Workload {
        &self.workload
    }
    pub fn drive(&self) -> &DriveConfig {
        &self.drive
    }
    pub fn window(&self) -> WindowSpec {
        self.drive.window
    }
    pub fn engine(&self) -> SessionLoop {
        self.config.run.engine
    }
    pub fn redo_stress(&self) -> RedoStress {
        self.config.run.redo_stress
    }
    pub fn on_error(&self) -> OnError {
        self.config.run.on_error
    }
    pub fn run_time(&self) -> Duration {
        self.config.run.run_time.0
    }
    pub fn out_dir(&self) -> PathBuf {
        self.config.run.out.clone().unwrap_or_default()
    }
}
