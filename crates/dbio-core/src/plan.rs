//! The run plan: the configuration and the server's facts (block size, the data set's schema
//! names), resolved and validated once after preflight, then read-only. Backends receive it;
//! result.json records its configuration, not a copy patched afterwards.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Config, OnError, RedoStress, SessionLoop};
use crate::driver::{DriveConfig, STOP_GRACE, SessionSpec, WindowSpec, session_specs};
use crate::error::CoreError;
use crate::workload::Workload;

#[derive(Debug, Clone)]
pub struct RunPlan {
    config: Config,
    block_size: u64,
    schema_names: Vec<String>,
    specs: Vec<SessionSpec>,
    workload: Workload,
    drive: DriveConfig,
}

impl RunPlan {
    /// Validates `config` against the server's block size and resolves the sessions, the
    /// workload and the window. `target` (redacted) and `out` are what the result records.
    /// `quiet` turns the live progress off.
    pub fn new(
        config: &Config,
        block_size: u64,
        schema_names: Vec<String>,
        target: String,
        out: &Path,
        quiet: bool,
    ) -> Result<RunPlan, CoreError> {
        config.validate_run(block_size)?;
        let workload = Workload::from_config(config, block_size)?;
        let r = &config.run;
        let mut specs = session_specs(r.readers, r.writers, &schema_names, r.hot_schema);
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
        };
        let mut recorded = config.clone();
        recorded.target.dsn = Some(target);
        recorded.run.out = Some(out.to_path_buf());
        Ok(RunPlan {
            config: recorded,
            block_size,
            schema_names,
            specs,
            workload,
            drive,
        })
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
