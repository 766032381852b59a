//! The configuration model: one YAML file (`-c FILE`), overridden by the PG* environment for the
//! connection, overridden by command-line flags. Precedence: flag > environment > file > default.
//!
//! Every section denies unknown keys, so a typo is an error that names the key and its line
//! rather than a silently ignored setting.

pub mod arrival;
pub mod capacity;
pub mod history;
pub mod steady;
pub mod thresholds;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::CoreError;
use crate::units::{Dur, SizeSpec};

pub use arrival::{Arrival, Rate};
pub use capacity::{CapacityConfig, CapacityMetric, SearchOver, Slo, SloSource, SloStat};
pub use steady::{SteadyMetric, SteadyRule};

/// Limits that validation enforces; SLOB allows up to 4096 schemas and 4096 sessions.
pub const MAX_SCHEMAS: u32 = 4096;
pub const MAX_SESSIONS: u32 = 4096;
pub const MIN_SCALE_BLOCKS: u64 = 64;
pub const MAX_WORK_UNIT: u64 = 65_536;

/// Which database the target is (the config's `engine:` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Database {
    #[default]
    Postgres,
    Oracle,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Which database the target is.
    pub engine: Database,
    pub target: TargetConfig,
    pub data: DataConfig,
    pub run: RunConfig,
    pub collector: CollectorConfig,
    pub ramp: RampConfig,
    /// `dbio capacity`: the latency target and the search.
    pub capacity: CapacityConfig,
    pub regress: thresholds::RegressConfig,
    /// How `dbio history check` decides.
    pub history: history::HistoryConfig,
    /// The PostgreSQL container `dbio nightly --container ENGINE` starts (and the scratch
    /// cluster's shared_buffers otherwise).
    pub container: ContainerConfig,
    /// `dbio nightly`: its platform canary.
    pub nightly: NightlyConfig,
}

/// The nightly's platform canary: a short raw-device calibration of the data's device,
/// recorded as the platform series, so that a database change that coincides with a change
/// of the device is labelled `platform` (docs/REGRESSION.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NightlyConfig {
    /// Run the canary before the night's setup.
    pub canary: bool,
    /// A folder on the data's device for the canary's file. Default: the container's data
    /// volume, or the scratch cluster's folder; a server given with --dsn has no default
    /// (its device may be on another host), so the canary is skipped there unless set.
    pub canary_path: Option<std::path::PathBuf>,
    /// The canary file's size (created, measured with O_DIRECT, removed).
    pub canary_size: SizeSpec,
    /// Outstanding I/Os of each measured point.
    pub canary_levels: Vec<u32>,
    /// Time per point.
    pub canary_duration: Dur,
}

impl NightlyConfig {
    fn validate(&self) -> Result<(), CoreError> {
        if self.canary_levels.is_empty() || self.canary_levels.contains(&0) {
            return Err(CoreError::invalid(
                "nightly.canary_levels",
                "give one or more load levels above 0, e.g. [1, 4]",
            ));
        }
        if self.canary_size.to_bytes(8192) < 1 << 20 {
            return Err(CoreError::invalid(
                "nightly.canary_size",
                "the canary needs a file of at least 1MB (64MB by default)",
            ));
        }
        if self.canary_duration.0.is_zero() {
            return Err(CoreError::invalid(
                "nightly.canary_duration",
                "give a time per point above 0, e.g. 2s",
            ));
        }
        Ok(())
    }
}

impl Default for NightlyConfig {
    fn default() -> Self {
        NightlyConfig {
            canary: true,
            canary_path: None,
            canary_size: SizeSpec::Bytes(64 << 20),
            canary_levels: vec![1, 4],
            canary_duration: Dur(Duration::from_secs(2)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContainerConfig {
    /// The server's image: dbio's (deploy/images.sh builds it without a registry) or any
    /// that takes POSTGRES_PASSWORD and PGDATA and runs `postgres -c NAME=VALUE ...` as its
    /// command, as the widely used postgres image does.
    pub image: String,
    /// The server's port on 127.0.0.1 (the container shares the host's network).
    pub port: u16,
    pub shared_buffers: SizeSpec,
    /// The container's memory cap, which the kernel applies to the page cache the server's
    /// reads fill too; null for none.
    pub memory: Option<SizeSpec>,
    /// Longest wait for the server to accept connections (initdb included).
    pub start_timeout: Dur,
    /// More server settings, each passed as its own `-c name=value` argument.
    pub settings: std::collections::BTreeMap<String, String>,
}

impl Default for ContainerConfig {
    fn default() -> Self {
        ContainerConfig {
            image: "localhost/dbio-postgres:17".into(),
            port: 55432,
            shared_buffers: SizeSpec::Bytes(128 << 20),
            memory: Some(SizeSpec::Bytes(256 << 20)),
            start_timeout: Dur(Duration::from_secs(60)),
            // Direct I/O (PostgreSQL 16+): reads bypass the page cache, so the nightly
            // measures the storage whatever the memory.
            settings: std::collections::BTreeMap::from([
                ("track_io_timing".to_string(), "on".to_string()),
                ("debug_io_direct".to_string(), "data".to_string()),
            ]),
        }
    }
}

impl ContainerConfig {
    /// The server's command line after the image's entrypoint: `postgres` and one
    /// `-c NAME=VALUE` pair per setting, each value as it is (no shell, no splitting):
    /// loopback only, the configured port and shared_buffers, then `settings` (which may
    /// override listen_addresses, e.g. `127.0.0.1,::1`).
    pub fn server_args(&self) -> Vec<String> {
        let mut args = vec!["postgres".to_string()];
        let mut set = |name: &str, value: &str| {
            args.push("-c".into());
            args.push(format!("{name}={value}"));
        };
        set("listen_addresses", "127.0.0.1");
        set("port", &self.port.to_string());
        set("shared_buffers", &self.shared_buffers.to_string());
        set("max_connections", "300");
        for (name, value) in &self.settings {
            set(name, value);
        }
        args
    }

    fn validate(&self) -> Result<(), CoreError> {
        if self.port == 0 {
            return Err(CoreError::invalid(
                "container.port",
                "the server needs a fixed port on 127.0.0.1, e.g. 55432",
            ));
        }
        for (name, value) in &self.settings {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                return Err(CoreError::invalid(
                    "container.settings",
                    format!("`{name}` is not a server setting's name"),
                ));
            }
            if matches!(name.as_str(), "port" | "shared_buffers") {
                return Err(CoreError::invalid(
                    "container.settings",
                    format!("{name} has its own key: set container.{name}"),
                ));
            }
            if value.contains(['\0', '\n', '\r']) {
                return Err(CoreError::invalid(
                    "container.settings",
                    format!("the value of {name} holds a line break or NUL"),
                ));
            }
        }
        let bytes = |s: SizeSpec| s.to_bytes(8192);
        if let Some(memory) = self.memory
            && bytes(memory) < bytes(self.shared_buffers).saturating_add(64 << 20)
        {
            return Err(CoreError::invalid(
                "container.memory",
                format!(
                    "a memory cap of {memory} leaves the server no room beside shared_buffers ({}): \
                     give it at least 64MB more, or null for no cap",
                    self.shared_buffers
                ),
            ));
        }
        if self.start_timeout.0.is_zero() {
            return Err(CoreError::invalid(
                "container.start_timeout",
                "the server needs time to start (initdb on the first start): e.g. 60s",
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnStepFailure {
    /// A failed step ends the ramp (the steps so far are reported).
    #[default]
    Stop,
    /// The ramp goes on; the failed step is marked.
    Continue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RampConfig {
    /// Reader counts, one step each (the classic SLOB ramp doubles them).
    pub readers: Vec<u32>,
    /// Writer counts; default: run.writers only.
    pub writers: Option<Vec<u32>>,
    /// Update percentages; default: run.update_pct only.
    pub update_pct: Option<Vec<u32>>,
    /// Runs per step, for mean, standard deviation and coefficient of variation.
    pub repeat: u32,
    /// Window of each step; default: run.run_time.
    pub run_time: Option<Dur>,
    pub on_step_failure: OnStepFailure,
}

impl Default for RampConfig {
    fn default() -> Self {
        RampConfig {
            readers: vec![1, 2, 4, 8],
            writers: None,
            update_pct: None,
            repeat: 1,
            run_time: None,
            on_step_failure: OnStepFailure::Stop,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectorConfig {
    /// Period of the wait sampler (pg_stat_activity).
    pub sample_period: Dur,
    /// Before the window: sync and drop the OS page cache (server on this host, root only),
    /// so reads start physical.
    pub drop_caches: bool,
    /// Oracle: take AWR snapshots around the window and save the AWR text report beside
    /// result.json (needs the Diagnostics Pack licence); the same as `snapshots: awr`.
    pub awr: bool,
    /// Oracle: the database's own snapshots around the window (SLOB's
    /// DATABASE_STATISTICS_TYPE): none, awr, statspack or auto.
    pub snapshots: Snapshots,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            sample_period: Dur(Duration::from_millis(100)),
            drop_caches: false,
            awr: false,
            snapshots: Snapshots::None,
        }
    }
}

impl CollectorConfig {
    /// The snapshots asked for, `awr: true` being `snapshots: awr`.
    pub fn snapshots(&self) -> Snapshots {
        match (self.awr, self.snapshots) {
            (true, Snapshots::None) => Snapshots::Awr,
            (_, s) => s,
        }
    }
}

/// Oracle's repository snapshots around the window: the figures dbio prints come from the
/// V$ views either way; the snapshots add the repository's own report beside result.json.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Snapshots {
    #[default]
    None,
    /// AWR (DBMS_WORKLOAD_REPOSITORY; the Diagnostics Pack must be licensed and enabled).
    /// Where it is not (Standard Edition, CONTROL_MANAGEMENT_PACK_ACCESS = NONE), AWR is
    /// refused with the reason and Statspack taken instead when installed.
    Awr,
    /// Statspack (PERFSTAT.STATSPACK, any edition), SLOB's default.
    Statspack,
    /// AWR where the Diagnostics Pack is enabled, else Statspack where installed, else none.
    Auto,
}

impl Snapshots {
    pub fn as_str(self) -> &'static str {
        match self {
            Snapshots::None => "none",
            Snapshots::Awr => "awr",
            Snapshots::Statspack => "statspack",
            Snapshots::Auto => "auto",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TargetConfig {
    /// libpq-style connection string or URL; PG* variables and `--dsn` override its parts.
    pub dsn: Option<String>,
    /// Several targets driven in one window (`--dsn` repeated): the sessions are spread over
    /// them, each has its own collector, and the report has a row per target and the
    /// totals. Each DSN is complete in itself: PG* variables only fill what it leaves out.
    /// Instead of `dsn`, never beside it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dsns: Vec<String>,
    /// Readers per target, in `dsns` order; empty = `run.readers` spread over the targets
    /// round-robin. When given, the run's readers are their sum.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readers: Vec<u32>,
    /// Writers per target, as `readers`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writers: Vec<u32>,
    /// How long a connection attempt may take before dbio gives up.
    pub connect_timeout: Dur,
    /// Longest a session's statement may run (lock waits included) before the server
    /// cancels it and the session counts an error; 0s = no limit.
    pub statement_timeout: Dur,
    /// Oracle: connect identifiers the sessions are spread over round-robin (SLOB's RAC
    /// service habit, e.g. one service per instance); empty = the target's own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// Number of schemas `<prefix>1..<prefix>N`.
    pub schemas: u32,
    /// Schema name prefix (SLOB's `user`).
    pub prefix: String,
    /// Size of each schema's table: one row per block, so rows = blocks.
    pub scale: SizeSpec,
    /// Tablespace for tables and indexes (must exist; dbio does not create it).
    pub tablespace: Option<String>,
    /// Schemas loaded at the same time.
    pub parallel: u32,
    /// Seed of the physical key order.
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RedoStress {
    /// Update one filler column.
    #[default]
    Lite,
    /// Update every filler column.
    Heavy,
}

impl RedoStress {
    /// The spelling `--redo-stress` and the config file take.
    pub fn as_str(self) -> &'static str {
        match self {
            RedoStress::Lite => "lite",
            RedoStress::Heavy => "heavy",
        }
    }
}

/// Where the sessions' operation loop runs (the config's `run.engine:` key): the client
/// loop or the server loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SessionLoop {
    /// dbio's sessions send every operation and time its round trip (the default).
    #[default]
    Client,
    /// Each session calls one procedure that loops inside the database for the run time, as
    /// SLOB and pgio do: no client cost per operation, coarse latency buckets only.
    Server,
}

/// How the client loop runs its sessions on OS threads (the config's `run.session_engine:`
/// key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SessionEngine {
    /// Threads below `driver::EVENTS_FROM` sessions, events from there, threads whenever the
    /// run needs what only they do (an open loop, a wait for steady state).
    #[default]
    Auto,
    /// One OS thread per session, blocking on its own socket.
    Threads,
    /// An event loop per core over non-blocking sockets, many sessions per thread.
    Events,
}

impl SessionEngine {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEngine::Auto => "auto",
            SessionEngine::Threads => "threads",
            SessionEngine::Events => "events",
        }
    }
}

impl SessionLoop {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionLoop::Client => "client",
            SessionLoop::Server => "server",
        }
    }
}

/// How a read reaches the table's blocks: the plan the reader's statement must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReadPath {
    /// An Index Scan: one synchronous single-block read at a time per session, so sessions
    /// are outstanding I/Os (the SLOB method; the default).
    #[default]
    Index,
    /// A Bitmap Heap Scan: PostgreSQL prefetches the heap blocks itself (read streams on
    /// 18+, posix_fadvise before), up to effective_io_concurrency reads in flight per
    /// session (io_method decides who issues them).
    Bitmap,
}

impl ReadPath {
    /// The spelling `--read-path` and the config file take.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadPath::Index => "index",
            ReadPath::Bitmap => "bitmap",
        }
    }

    /// The plan node that reads the table's blocks on this path (EXPLAIN's "Node Type").
    pub fn scan_node(self) -> &'static str {
        match self {
            ReadPath::Index => "Index Scan",
            ReadPath::Bitmap => "Bitmap Heap Scan",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// First session error stops the run (status `failed`).
    #[default]
    Abort,
    /// Errors are counted per session and the run goes on.
    Continue,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotSpotConfig {
    /// Size of the hot range within each schema; 0 disables the hot spot.
    pub size: SizeSpec,
    /// Start of the hot range within each schema.
    pub offset: SizeSpec,
    /// Every Nth operation of a session goes to the hot range; 0 disables it.
    pub frequency: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThinkTimeConfig {
    /// Every Nth operation sleeps; 0 disables think time.
    pub frequency: u32,
    pub min: Dur,
    pub max: Dur,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    /// Where the operation loop runs: `client` (default) or `server`.
    pub engine: SessionLoop,
    /// How the client loop's sessions map to OS threads: `auto` (default), `threads` or
    /// `events`.
    pub session_engine: SessionEngine,
    /// Sessions that only read.
    pub readers: u32,
    /// Sessions that only update (classic SLOB `<writers> <readers>`).
    pub writers: u32,
    /// SLOB 2 form: every reader mixes updates in at this percentage (0-100).
    pub update_pct: u32,
    /// Measured window length; ignored when `work_loop` is set.
    pub run_time: Dur,
    /// Operations per session; 0 means run for `run_time`.
    pub work_loop: u64,
    /// Keys (= blocks) per read.
    pub work_unit: u64,
    /// Keys (= blocks) per update.
    pub update_work_unit: u64,
    pub redo_stress: RedoStress,
    /// The reader's plan: `index` (Index Scan, the SLOB method) or `bitmap` (Bitmap Heap
    /// Scan with the server's prefetching); preflight refuses a run whose plan differs.
    pub read_path: ReadPath,
    pub hot_spot: HotSpotConfig,
    pub think_time: ThinkTimeConfig,
    /// All sessions use schema 1 instead of round-robin over the schemas.
    pub hot_schema: bool,
    /// Seed of the sessions' key sequences; the same seed gives the same keys.
    pub seed: u64,
    /// Run this long before the measured window, unmeasured.
    pub warmup: Dur,
    /// Live progress line period on stderr; 0 turns it off.
    pub progress: Dur,
    /// Time-series interval.
    pub interval: Dur,
    pub on_error: OnError,
    /// Before the window, VACUUM (FREEZE, ANALYZE) every table that changed since its last
    /// VACUUM (after a run with updates) and CHECKPOINT, so each run starts clean.
    pub vacuum: bool,
    /// A calibrate.json from `dbio calibrate`: the report puts the raw device's IOPS and
    /// latency at the same load next to the database's.
    pub calibration: Option<PathBuf>,
    /// Result folder; default `results/<UTC timestamp>-<label>/`.
    pub out: Option<PathBuf>,
    /// Write into an `out` folder that already holds files (replacing those of the same
    /// name); without it such a folder is refused, so no earlier result is replaced.
    pub overwrite: bool,
    pub label: Option<String>,
    /// The id this run holds its data set under (advisory locks): the shards of one
    /// coordinated run, several dbio processes on one data set, pass the same id and share
    /// it; any other run is refused while one holds it. Default: a fresh id per run.
    pub run_id: Option<String>,
    /// `I/N`: this process runs shard I (0-based) of N of one run driven by several dbio
    /// processes: every N-th session from the I-th. Needs `run_id`, the same on every shard.
    pub shard: Option<String>,
    /// The shard (0-based) that runs the collector (the database's figures); the others'
    /// would read the same server twice. Put it on the shard whose host is least loaded.
    #[serde(skip_serializing_if = "is_zero")]
    pub collector_shard: u32,
    /// RFC 3339 instant (UTC, e.g. `2026-12-01T02:00:00Z`) at which the sessions are released,
    /// once connected and prepared: the shards of one run start their window together.
    pub start_at: Option<String>,
    /// The window opens only once this holds (`iops_slope<=2%:10s`), judged after the
    /// warm-up, for at most `steady_max`; the result says when, or "not steady".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyRule>,
    /// The longest the window waits for `steady` (and preconditioning for its rule).
    pub steady_max: Dur,
    /// Before the window, every session runs updates until the update rate holds this rule
    /// (flash garbage collection before the measurement, not inside it); write workloads only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<SteadyRule>,
    /// Open loop: operations start at this rate across the sessions (latency counted from
    /// each one's intended start); none: each session starts its next when the last returns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// How an open loop's intended starts are spaced: fixed or poisson.
    pub arrival: Arrival,
}

/// One shard of a run driven by several processes (`run.shard: I/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based, below `count` (Kubernetes' JOB_COMPLETION_INDEX).
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `I/N` with 0 <= I < N.
    pub fn parse(text: &str) -> Option<Shard> {
        let (i, n) = text.split_once('/')?;
        let (index, count) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
        (count >= 1 && index < count).then_some(Shard { index, count })
    }
}

impl RunConfig {
    /// The shard this process runs; None for a run in one process (validated by
    /// [`Config::validate`]).
    pub fn shard(&self) -> Option<Shard> {
        self.shard.as_deref().and_then(Shard::parse)
    }

    /// When the sessions are released; None: at once (validated by [`Config::validate`]).
    pub fn start_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        self.start_at
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            engine: Database::Postgres,
            target: TargetConfig::default(),
            data: DataConfig::default(),
            run: RunConfig::default(),
            collector: CollectorConfig::default(),
            ramp: RampConfig::default(),
            capacity: CapacityConfig::default(),
            regress: thresholds::RegressConfig::default(),
            history: history::HistoryConfig::default(),
            container: ContainerConfig::default(),
            nightly: NightlyConfig::default(),
        }
    }
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            dsn: None,
            dsns: Vec::new(),
            readers: Vec::new(),
            writers: Vec::new(),
            connect_timeout: Dur(Duration::from_secs(10)),
            statement_timeout: Dur(Duration::ZERO),
            services: Vec::new(),
        }
    }
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            schemas: 4,
            prefix: "user".into(),
            scale: SizeSpec::Bytes(64 << 20),
            tablespace: None,
            parallel: 2,
            seed: 1,
        }
    }
}

impl Default for HotSpotConfig {
    fn default() -> Self {
        HotSpotConfig {
            size: SizeSpec::Bytes(8 << 20),
            offset: SizeSpec::Bytes(0),
            frequency: 0,
        }
    }
}

impl Default for ThinkTimeConfig {
    fn default() -> Self {
        ThinkTimeConfig {
            frequency: 0,
            min: Dur(Duration::from_millis(100)),
            max: Dur(Duration::from_millis(500)),
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            engine: SessionLoop::Client,
            session_engine: SessionEngine::Auto,
            readers: 1,
            writers: 0,
            update_pct: 0,
            run_time: Dur(Duration::from_secs(30)),
            work_loop: 0,
            work_unit: 64,
            update_work_unit: 8,
            redo_stress: RedoStress::Lite,
            read_path: ReadPath::Index,
            hot_spot: HotSpotConfig::default(),
            think_time: ThinkTimeConfig::default(),
            hot_schema: false,
            seed: 1,
            warmup: Dur(Duration::ZERO),
            progress: Dur(Duration::from_secs(5)),
            interval: Dur(Duration::from_secs(1)),
            on_error: OnError::Abort,
            vacuum: true,
            calibration: None,
            out: None,
            overwrite: false,
            label: None,
            run_id: None,
            shard: None,
            collector_shard: 0,
            start_at: None,
            steady: None,
            steady_max: Dur(Duration::from_secs(300)),
            precondition: None,
            rate: None,
            arrival: Arrival::Fixed,
        }
    }
}

/// A configuration file's text, bounded; an unreadable file is a `Config` error naming it.
fn read_config_text(path: &Path) -> Result<String, CoreError> {
    crate::input::read_bounded(path, crate::input::CONFIG_MAX_BYTES).map_err(|e| {
        CoreError::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    })
}

impl Config {
    /// Reads a YAML file; a missing file, bad YAML, unknown key or bad unit is a `Config` error
    /// that names the file, the line and the key.
    pub fn from_file(path: &Path) -> Result<Config, CoreError> {
        let text = read_config_text(path)?;
        Self::from_yaml(&text).map_err(|e| CoreError::Config {
            path: path.to_path_buf(),
            message: e.0,
        })
    }

    /// The file's configuration, or the defaults when no file is given.
    pub fn load(path: Option<&Path>) -> Result<Config, CoreError> {
        match path {
            Some(p) => Config::from_file(p),
            None => Ok(Config::default()),
        }
    }

    /// Parses YAML text; the error is one line naming the line number and the key.
    pub fn from_yaml(text: &str) -> Result<Config, YamlError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let mut c = serde_saphyr::from_str::<Config>(text)
            .map_err(|e| YamlError(describe_yaml_error(&e, text)))?;
        c.totals_from_targets();
        Ok(c)
    }

    /// Per-target session counts set the run's totals (`target.readers` replaces
    /// `run.readers`, `target.writers` replaces `run.writers`).
    pub fn totals_from_targets(&mut self) {
        if !self.target.readers.is_empty() {
            self.run.readers = saturating_sum(&self.target.readers);
        }
        if !self.target.writers.is_empty() {
            self.run.writers = saturating_sum(&self.target.writers);
        }
    }

    /// The keys a YAML file sets, as a JSON tree (for `dbio config`'s sources); null when the
    /// file is empty.
    pub fn keys_in_file(path: &Path) -> Result<serde_json::Value, CoreError> {
        let text = read_config_text(path)?;
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_saphyr::from_str::<serde_json::Value>(&text).map_err(|e| CoreError::Config {
            path: path.to_path_buf(),
            message: describe_yaml_error(&e, &text),
        })
    }

    /// The whole effective configuration as YAML (parses back with `from_yaml`).
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_default()
    }

    /// The value at a dotted key (`run.readers`, `container.image`) as text: strings bare,
    /// everything else as JSON. For scripts (`dbio config --get KEY`).
    pub fn get(&self, key: &str) -> Option<String> {
        let mut v = serde_json::to_value(self).ok()?;
        for part in key.split('.') {
            v = v.get(part)?.clone();
        }
        Some(match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        })
    }

    /// How many targets the run drives in one window (1 unless `target.dsns` names several).
    pub fn targets_n(&self) -> usize {
        self.target.dsns.len().max(1)
    }

    /// (readers, writers) of each target: `target.readers`/`target.writers` when given,
    /// else the run's spread round-robin (the first targets get one more when they do not
    /// divide evenly).
    pub fn session_split(&self) -> Vec<(u32, u32)> {
        let n = self.targets_n() as u32;
        let spread = |total: u32, t: u32| total / n + u32::from(t < total % n);
        (0..n)
            .map(|t| {
                let i = t as usize;
                (
                    self.target
                        .readers
                        .get(i)
                        .copied()
                        .unwrap_or_else(|| spread(self.run.readers, t)),
                    self.target
                        .writers
                        .get(i)
                        .copied()
                        .unwrap_or_else(|| spread(self.run.writers, t)),
                )
            })
            .collect()
    }

    /// The configuration each target's backend is given: its own DSN as `target.dsn` and its
    /// share of the sessions as `run.readers`/`run.writers`; one (this one) for one target.
    pub fn target_configs(&self) -> Vec<Config> {
        if self.target.dsns.is_empty() {
            return vec![self.clone()];
        }
        self.target
            .dsns
            .iter()
            .zip(self.session_split())
            .map(|(dsn, (readers, writers))| {
                let mut c = self.clone();
                c.target.dsn = Some(dsn.clone());
                c.target.dsns.clear();
                c.target.readers.clear();
                c.target.writers.clear();
                c.run.readers = readers;
                c.run.writers = writers;
                c
            })
            .collect()
    }

    /// `target.dsns` and the per-target session counts agree with each other and the run.
    fn validate_targets(&self) -> Result<(), CoreError> {
        let t = &self.target;
        if t.dsns.is_empty() {
            for (key, v) in [
                ("target.readers", &t.readers),
                ("target.writers", &t.writers),
            ] {
                if !v.is_empty() {
                    return Err(CoreError::invalid(
                        key,
                        format!(
                            "{key} gives the sessions of each target in target.dsns; with one target use run.readers and run.writers"
                        ),
                    ));
                }
            }
            return Ok(());
        }
        if t.dsn.is_some() {
            return Err(CoreError::invalid(
                "target.dsns",
                "give target.dsn (one target) or target.dsns (several), not both",
            ));
        }
        if t.dsns.iter().any(|d| d.trim().is_empty()) {
            return Err(CoreError::invalid(
                "target.dsns",
                "an empty connection string in target.dsns: give each target's DSN",
            ));
        }
        for (key, v, total) in [
            ("target.readers", &t.readers, self.run.readers),
            ("target.writers", &t.writers, self.run.writers),
        ] {
            if !v.is_empty() && v.len() != t.dsns.len() {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "{key} has {} count(s) for {} target(s): give one per DSN in target.dsns, in order",
                        v.len(),
                        t.dsns.len()
                    ),
                ));
            }
            let sum = saturating_sum(v);
            if !v.is_empty() && sum != total {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "{key} {v:?} sums to {sum} but the run has {total}: per-target counts set the run's total, so give one or make them agree"
                    ),
                ));
            }
        }
        if self.run.shard.is_some() {
            return Err(CoreError::invalid(
                "run.shard",
                "shards drive one target each: run the shards of a several-target run against one target, or drive the targets from one process",
            ));
        }
        Ok(())
    }

    /// Checks every value against its allowed range; the error names the key and the range.
    pub fn validate(&self) -> Result<(), CoreError> {
        self.validate_targets()?;
        self.history.validate()?;
        self.container.validate()?;
        self.nightly.validate()?;
        if !self.target.services.is_empty() && self.engine != Database::Oracle {
            return Err(CoreError::invalid(
                "target.services",
                "target.services spreads Oracle sessions over several connect identifiers; with engine: postgres use target.dsn",
            ));
        }
        if let Some(id) = &self.run.run_id
            && (id.is_empty()
                || id.len() > 64
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        {
            return Err(CoreError::invalid(
                "run.run_id",
                format!(
                    "`{id}` is not a usable run id; use 1-64 letters, digits, - or _ (the same id on every shard of one run)"
                ),
            ));
        }
        if let Some(text) = &self.run.shard {
            let Some(shard) = Shard::parse(text) else {
                return Err(CoreError::invalid(
                    "run.shard",
                    format!(
                        "`{text}` is not a shard; use I/N with 0 <= I < N, e.g. 0/4 (Kubernetes' JOB_COMPLETION_INDEX/completions)"
                    ),
                ));
            };
            if self.run.run_id.is_none() {
                return Err(CoreError::invalid(
                    "run.shard",
                    "the shards of one run share its data set by its id: give every shard the same --run-id (run.run_id)",
                ));
            }
            let sessions = self.run.readers + self.run.writers;
            if shard.count > sessions {
                return Err(CoreError::invalid(
                    "run.shard",
                    format!(
                        "{} shards for {sessions} session(s): each shard runs every {}-th session, so some would run none; \
                         use at most {sessions} shards or more sessions (readers and writers are the run's totals)",
                        shard.count, shard.count
                    ),
                ));
            }
            if self.run.collector_shard >= shard.count {
                return Err(CoreError::invalid(
                    "run.collector_shard",
                    format!(
                        "shard {} runs the collector, but the run has shards 0 to {}: name one of them",
                        self.run.collector_shard,
                        shard.count - 1
                    ),
                ));
            }
        } else if self.run.collector_shard != 0 {
            return Err(CoreError::invalid(
                "run.collector_shard",
                "run.collector_shard names the shard that collects in a run of several shards (--shard I/N); this run has none",
            ));
        }
        if let Some(text) = &self.run.start_at
            && self.run.start_at().is_none()
        {
            return Err(CoreError::invalid(
                "run.start_at",
                format!(
                    "`{text}` is not an RFC 3339 instant; use e.g. 2026-12-01T02:00:00Z (`date -u -d '+30 sec' +%FT%TZ`)"
                ),
            ));
        }
        if self.engine == Database::Oracle && self.run.read_path != ReadPath::Index {
            return Err(CoreError::invalid(
                "run.read_path",
                "run.read_path bitmap is PostgreSQL's bitmap heap scan; Oracle's reads are index range scans: \
                 remove it or set run.read_path: index",
            ));
        }
        if self.engine == Database::Postgres && self.collector.snapshots() != Snapshots::None {
            return Err(CoreError::invalid(
                "collector.snapshots",
                "AWR and Statspack snapshots are Oracle's; with engine: postgres the collector reads the statistics views \
                 itself: remove collector.snapshots / collector.awr (--snapshots)",
            ));
        }
        let d = &self.data;
        range(
            "data.schemas",
            "--schemas",
            d.schemas as u64,
            1,
            MAX_SCHEMAS as u64,
        )?;
        range("data.parallel", "--parallel", d.parallel as u64, 1, 64)?;
        if d.prefix.is_empty()
            || d.prefix.len() > 40
            || !d.prefix.starts_with(|c: char| c.is_ascii_lowercase())
            || !d
                .prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(CoreError::invalid(
                "data.prefix",
                format!(
                    "`{}` is not a usable schema prefix; use 1-40 lower-case letters, digits or _ starting with a letter",
                    d.prefix
                ),
            ));
        }
        if let Some(ts) = &d.tablespace
            && (ts.is_empty() || ts.contains('"') || ts.contains('\0'))
        {
            return Err(CoreError::invalid(
                "data.tablespace",
                "the tablespace name is empty or holds a quote",
            ));
        }
        let r = &self.run;
        range(
            "run.readers",
            "--readers",
            r.readers as u64,
            0,
            MAX_SESSIONS as u64,
        )?;
        range(
            "run.writers",
            "--writers",
            r.writers as u64,
            0,
            MAX_SESSIONS as u64,
        )?;
        range(
            "run.update_pct",
            "--update-pct",
            r.update_pct as u64,
            0,
            100,
        )?;
        range(
            "run.work_unit",
            "--work-unit",
            r.work_unit,
            1,
            MAX_WORK_UNIT,
        )?;
        range(
            "run.update_work_unit",
            "--update-work-unit",
            r.update_work_unit,
            1,
            MAX_WORK_UNIT,
        )?;
        if r.think_time.min > r.think_time.max {
            return Err(CoreError::invalid(
                "run.think_time.min",
                format!(
                    "{} is above run.think_time.max {}",
                    r.think_time.min, r.think_time.max
                ),
            ));
        }
        if r.interval.0 < Duration::from_millis(100) {
            return Err(CoreError::invalid("run.interval", "must be at least 100ms"));
        }
        if self.collector.awr
            && !matches!(self.collector.snapshots, Snapshots::None | Snapshots::Awr)
        {
            return Err(CoreError::invalid(
                "collector.awr",
                format!(
                    "collector.awr: true asks for AWR, collector.snapshots: {} for something else: keep one of them",
                    self.collector.snapshots.as_str()
                ),
            ));
        }
        let period = self.collector.sample_period.0;
        if period < Duration::from_millis(10) || period > Duration::from_secs(10) {
            return Err(CoreError::OutOfRange {
                key: "collector.sample_period (--sample-period)".into(),
                value: self.collector.sample_period.to_string(),
                allowed: "10ms..=10s".into(),
            });
        }
        self.validate_pacing()?;
        self.validate_capacity()?;
        let ramp = &self.ramp;
        if ramp.readers.is_empty() {
            return Err(CoreError::invalid(
                "ramp.readers",
                "the list is empty; give at least one reader count",
            ));
        }
        for (key, list) in [
            ("ramp.readers", Some(&ramp.readers)),
            ("ramp.writers", ramp.writers.as_ref()),
        ] {
            if let Some(v) = list.into_iter().flatten().find(|v| **v > MAX_SESSIONS) {
                return Err(CoreError::OutOfRange {
                    key: key.into(),
                    value: v.to_string(),
                    allowed: format!("0..={MAX_SESSIONS}"),
                });
            }
        }
        if let Some(v) = ramp.update_pct.iter().flatten().find(|v| **v > 100) {
            return Err(CoreError::OutOfRange {
                key: "ramp.update_pct".into(),
                value: v.to_string(),
                allowed: "0..=100".into(),
            });
        }
        range("ramp.repeat", "--repeat", ramp.repeat as u64, 1, 100)?;
        for (key, v) in [
            ("regress.max_iops_drop_pct", self.regress.max_iops_drop_pct),
            (
                "regress.max_latency_rise_pct",
                self.regress.max_latency_rise_pct,
            ),
        ] {
            let Some(v) = v.pct() else { continue };
            if !(0.0..=1000.0).contains(&v) {
                return Err(CoreError::OutOfRange {
                    key: key.into(),
                    value: v.to_string(),
                    allowed: "0..=1000 (%) or off".into(),
                });
            }
        }
        if let Some(label) = &self.run.label
            && label.chars().any(char::is_control)
        {
            return Err(CoreError::invalid(
                "run.label",
                "holds a control character (an escape sequence, a newline); use plain text",
            ));
        }
        if self.target.connect_timeout.0.is_zero() {
            return Err(CoreError::invalid(
                "target.connect_timeout",
                "must be above 0s",
            ));
        }
        Ok(())
    }

    /// `run.steady`, `run.precondition` and `run.rate` against the rest of the run.
    fn validate_pacing(&self) -> Result<(), CoreError> {
        let r = &self.run;
        let interval = r.interval.0;
        for (key, rule) in [
            ("run.steady", r.steady),
            ("run.precondition", r.precondition),
        ] {
            let Some(rule) = rule else { continue };
            // A slope needs points: three intervals at least.
            if rule.span < 3 * interval {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "its span {} holds fewer than 3 intervals of run.interval {}: lengthen the span or shorten the interval",
                        crate::units::format_duration(rule.span),
                        r.interval
                    ),
                ));
            }
            if r.steady_max.0 < rule.span {
                return Err(CoreError::invalid(
                    "run.steady_max",
                    format!(
                        "{} is shorter than {key}'s span {}: the rule could never be judged",
                        r.steady_max,
                        crate::units::format_duration(rule.span)
                    ),
                ));
            }
        }
        let paced = [
            ("run.steady", "--steady", r.steady.is_some()),
            (
                "run.precondition",
                "--precondition",
                r.precondition.is_some(),
            ),
            ("run.rate", "--rate", r.rate.is_some()),
        ];
        for (key, flag, on) in paced {
            if !on {
                continue;
            }
            if r.engine == SessionLoop::Server {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "run.engine: server runs each session's loop inside the database: dbio cannot pace it or watch it \
                         interval by interval; remove {flag} or use run.engine: client"
                    ),
                ));
            }
            if r.shard.is_some() {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "the shards of one run open their windows at one instant, which {flag} would move per shard: \
                         drive the run from one process, or remove {flag}"
                    ),
                ));
            }
        }
        if r.precondition.is_some() && r.writers == 0 && r.update_pct == 0 {
            return Err(CoreError::invalid(
                "run.precondition",
                "preconditioning readies the storage for writes: this run only reads; add writers (--writers) or \
                 updates (--update-pct), or remove --precondition",
            ));
        }
        if r.rate.is_some() {
            if r.work_loop > 0 {
                return Err(CoreError::invalid(
                    "run.rate",
                    "an open loop is paced by time: set run.run_time (--run-time) instead of run.work_loop",
                ));
            }
            if r.think_time.frequency > 0 {
                return Err(CoreError::invalid(
                    "run.rate",
                    "an open loop sets when operations start; a think time would too: remove one of them",
                ));
            }
        }
        Ok(())
    }

    /// The `capacity` section's bounds.
    fn validate_capacity(&self) -> Result<(), CoreError> {
        let c = &self.capacity;
        range(
            "capacity.start_sessions",
            "--start-sessions",
            c.start_sessions as u64,
            1,
            MAX_SESSIONS as u64,
        )?;
        range(
            "capacity.max_sessions",
            "--max-sessions",
            c.max_sessions as u64,
            c.start_sessions as u64,
            MAX_SESSIONS as u64,
        )?;
        range("capacity.repeat", "--repeat", c.repeat as u64, 1, 100)?;
        if !(c.resolution_pct > 0.0 && c.resolution_pct <= 100.0) {
            return Err(CoreError::OutOfRange {
                key: "capacity.resolution_pct (--resolution)".into(),
                value: c.resolution_pct.to_string(),
                allowed: "above 0 and at most 100 (%)".into(),
            });
        }
        if let Some(start) = c.start_rate
            && start > c.max_rate
        {
            return Err(CoreError::invalid(
                "capacity.max_rate",
                format!("{} is below capacity.start_rate {start}", c.max_rate),
            ));
        }
        Ok(())
    }

    /// The checks that only matter for a run: there must be sessions and a window.
    pub fn validate_run(&self, block_size: u64) -> Result<(), CoreError> {
        self.validate()?;
        let r = &self.run;
        if r.readers + r.writers == 0 {
            return Err(CoreError::invalid(
                "run.readers",
                "no sessions: set run.readers (--readers) or run.writers (--writers) above 0",
            ));
        }
        if r.work_loop == 0 && r.run_time.0.is_zero() {
            return Err(CoreError::invalid(
                "run.run_time",
                "the run has no window: set run.run_time (--run-time) above 0s or run.work_loop (--work-loop)",
            ));
        }
        if r.work_loop == 0 {
            // A window this short is mostly start-up and snapshot latency: a 1 ms window was
            // seen to report "16000 read requests/s" from one read.
            let min = Duration::from_secs(1).max(10 * self.collector.sample_period.0);
            if r.run_time.0 < min {
                return Err(CoreError::invalid(
                    "run.run_time",
                    format!(
                        "{} is too short to measure: a window needs at least 1s and 10 wait samples \
                         (10 x collector.sample_period {} = {:?}); set --run-time {}s or more",
                        r.run_time,
                        self.collector.sample_period,
                        10 * self.collector.sample_period.0,
                        min.as_secs_f64().ceil()
                    ),
                ));
            }
        }
        if r.engine == SessionLoop::Server {
            let unsupported = [
                ("run.work_loop", r.work_loop > 0, "--work-loop"),
                ("run.warmup", !r.warmup.0.is_zero(), "--warmup"),
                (
                    "run.think_time.frequency",
                    r.think_time.frequency > 0,
                    "think time",
                ),
                (
                    "run.hot_spot.frequency",
                    r.hot_spot.frequency > 0,
                    "the hot spot",
                ),
            ];
            if let Some((key, _, what)) = unsupported.iter().find(|(_, on, _)| *on) {
                return Err(CoreError::invalid(
                    key,
                    format!(
                        "run.engine: server runs each session's loop inside the database for run.run_time and \
                         does not support {what}; remove it or use run.engine: client"
                    ),
                ));
            }
        }
        let scale = crate::dataset::rows_per_schema(&self.data, block_size);
        for (key, unit) in [
            ("run.work_unit", r.work_unit),
            ("run.update_work_unit", r.update_work_unit),
        ] {
            if unit > scale {
                return Err(CoreError::OutOfRange {
                    key: key.into(),
                    value: unit.to_string(),
                    allowed: format!("1..={scale} (the scale of each schema, in blocks)"),
                });
            }
        }
        Ok(())
    }
}

fn range(key: &str, flag: &str, value: u64, min: u64, max: u64) -> Result<(), CoreError> {
    if value < min || value > max {
        return Err(CoreError::OutOfRange {
            key: format!("{key} ({flag})"),
            value: value.to_string(),
            allowed: format!("{min}..={max}"),
        });
    }
    Ok(())
}

/// Why a config's YAML text could not be read: one line naming the line number and the key
/// (`line 3: key `scale`: ...`). [`Config::from_file`] puts the file's name in front of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(pub String);

/// The message reads as text (`.contains(...)`), as the `String` it replaces did.
impl std::ops::Deref for YamlError {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// Turns a serde-saphyr error into one line: "line 3: key `scale`: <what was wrong>".
fn describe_yaml_error(e: &serde_saphyr::Error, text: &str) -> String {
    let full = e.to_string();
    // The first line carries "line L column C: message"; the rest is a snippet we summarise.
    let first = full
        .lines()
        .map(|l| l.trim_start_matches("error: ").trim())
        .find(|l| !l.is_empty())
        .unwrap_or("invalid YAML")
        .to_string();
    let key = e
        .location()
        .and_then(|loc| text.lines().nth((loc.line() as usize).saturating_sub(1)))
        .and_then(|line| {
            let t = line.trim_start().trim_start_matches("- ");
            t.split_once(':').map(|(k, _)| k.trim().to_string())
        })
        .filter(|k| !k.is_empty() && !k.contains(' '));
    match key {
        Some(k) if !first.contains(&format!("`{k}`")) => format!("{first} (key `{k}`)"),
        _ => first,
    }
}

/// The sum of per-target counts, at most u32::MAX (the session limits refuse it then).
pub fn saturating_sum(v: &[u32]) -> u32 {
    v.iter().fold(0u32, |a, b| a.saturating_add(*b))
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(Config::from_yaml("").unwrap(), Config::default());
        assert_eq!(
            Config::from_yaml("# only a comment\n").unwrap(),
            Config::default()
        );
    }

    #[test]
    fn file_values_override_defaults_and_others_stay() {
        let c =
            Config::from_yaml("data:\n  schemas: 2\n  scale: 4000blocks\nrun:\n  run_time: 5m\n")
                .unwrap();
        assert_eq!(c.data.schemas, 2);
        assert_eq!(c.data.scale, SizeSpec::Blocks(4000));
        assert_eq!(c.data.prefix, "user");
        assert_eq!(c.run.run_time, Dur(Duration::from_secs(300)));
        assert_eq!(c.run.work_unit, 64);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = Config::from_yaml("data:\n  schemas: 2\n  scael: 3\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("scael"), "{e}");
    }

    #[test]
    fn bad_unit_names_key_and_line() {
        let e = Config::from_yaml("data:\n  scale: 3XB\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
        assert!(e.contains("`scale`"), "{e}");
        assert!(e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn out_of_range_names_key_and_range() {
        let c = Config::from_yaml("data:\n  schemas: 0\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("data.schemas") && e.contains("1..=4096"), "{e}");
        let c = Config::from_yaml("run:\n  update_pct: 101\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("run.update_pct") && e.contains("0..=100"), "{e}");
    }

    #[test]
    fn run_checks_need_sessions_and_a_window() {
        let mut c = Config::default();
        c.data.scale = SizeSpec::Blocks(100);
        c.run.readers = 0;
        let e = c.validate_run(8192).unwrap_err().to_string();
        assert!(e.contains("no sessions"), "{e}");
        c.run.readers = 1;
        c.run.work_unit = 101;
        let e = c.validate_run(8192).unwrap_err().to_string();
        assert!(e.contains("run.work_unit") && e.contains("1..=100"), "{e}");
    }

    #[test]
    fn services_are_for_oracle_only() {
        let c = Config::from_yaml("target:\n  services: [\"//rac1/slob\"]\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("target.services"), "{e}");
        let c = Config::from_yaml(
            "engine: oracle\ntarget:\n  services: [\"//rac1/slob\", \"//rac2/slob\"]\n",
        )
        .unwrap();
        assert!(c.validate().is_ok());
        assert_eq!(c.target.services.len(), 2);
    }

    #[test]
    fn read_path_is_index_by_default_and_bitmap_when_asked() {
        assert_eq!(Config::default().run.read_path, ReadPath::Index);
        let c = Config::from_yaml("run:\n  read_path: bitmap\n").unwrap();
        assert_eq!(c.run.read_path, ReadPath::Bitmap);
        assert_eq!(c.run.read_path.scan_node(), "Bitmap Heap Scan");
        assert!(Config::from_yaml("run:\n  read_path: seq\n").is_err());
        let e = Config::from_yaml("engine: oracle\nrun:\n  read_path: bitmap\n")
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate().map_err(|e| e.to_string()))
            .unwrap_err();
        assert!(e.contains("run.read_path"), "{e}");
        let e = Config::from_yaml("run:\n  run_id: \"a b\"\n")
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate().map_err(|e| e.to_string()))
            .unwrap_err();
        assert!(e.contains("run.run_id"), "{e}");
        let c = Config::from_yaml("run:\n  run_id: shard-run_7\n").unwrap();
        assert!(c.validate().is_ok());
    }

    #[test]
    fn server_engine_refuses_what_its_loop_cannot_do() {
        for (yaml, key) in [
            ("run:\n  engine: server\n  work_loop: 10\n", "run.work_loop"),
            ("run:\n  engine: server\n  warmup: 5s\n", "run.warmup"),
            (
                "run:\n  engine: server\n  think_time: {frequency: 3}\n",
                "run.think_time.frequency",
            ),
            (
                "run:\n  engine: server\n  hot_spot: {frequency: 2}\n",
                "run.hot_spot.frequency",
            ),
        ] {
            let c = Config::from_yaml(yaml).unwrap();
            let e = c.validate_run(8192).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("run.engine: client"), "{e}");
        }
        let c = Config::from_yaml("run:\n  engine: server\n").unwrap();
        assert!(c.validate_run(8192).is_ok());
        assert!(Config::from_yaml("run:\n  engine: inside\n").is_err());
    }

    #[test]
    fn effective_config_round_trips_through_yaml() {
        let mut c = Config::default();
        c.run.readers = 7;
        c.data.tablespace = Some("fast".into());
        assert_eq!(Config::from_yaml(&c.to_yaml()).unwrap(), c);
    }

    #[test]
    fn dotted_keys_read_values_for_scripts() {
        let c =
            Config::from_yaml("container:\n  image: postgres:16\nrun:\n  readers: 3\n").unwrap();
        assert_eq!(c.get("container.image").as_deref(), Some("postgres:16"));
        assert_eq!(c.get("run.readers").as_deref(), Some("3"));
        assert_eq!(c.get("container.shared_buffers").as_deref(), Some("128MB"));
        assert_eq!(c.get("container.memory").as_deref(), Some("256MB"));
        assert_eq!(c.get("run.nope"), None);
    }

    // The nightly's server settings reached postgres as one argument (a compose file's
    // `${DBIO_PG_ARGS}` is not split), and a sed turned `127.0.0.1,::1` into two flags:
    // each setting is one `-c` pair, its value untouched.
    #[test]
    fn container_settings_are_one_argument_each() {
        let c = Config::from_yaml(
            "container:\n  port: 55999\n  shared_buffers: 32MB\n  settings:\n    listen_addresses: \"127.0.0.1,::1\"\n    log_line_prefix: \"%m [%p] \"\n",
        )
        .unwrap();
        c.validate().unwrap();
        let args = c.container.server_args();
        assert_eq!(args[0], "postgres");
        let pairs: Vec<&str> = args[1..]
            .chunks(2)
            .map(|p| {
                assert_eq!(p[0], "-c");
                p[1].as_str()
            })
            .collect();
        assert_eq!(
            pairs,
            [
                "listen_addresses=127.0.0.1",
                "port=55999",
                "shared_buffers=32MB",
                "max_connections=300",
                "listen_addresses=127.0.0.1,::1",
                "log_line_prefix=%m [%p] ",
            ]
        );
        for (yaml, key) in [
            (
                "container:\n  settings:\n    port: \"5\"\n",
                "container.settings",
            ),
            (
                "container:\n  settings:\n    \"a b\": x\n",
                "container.settings",
            ),
            (
                "container:\n  memory: 100MB\n  shared_buffers: 64MB\n",
                "container.memory",
            ),
            ("container:\n  port: 0\n", "container.port"),
        ] {
            let e = Config::from_yaml(yaml).unwrap().validate().unwrap_err();
            assert!(e.to_string().contains(key), "{yaml}: {e}");
        }
        let uncapped = Config::from_yaml("container:\n  memory: null\n").unwrap();
        assert_eq!(uncapped.container.memory, None);
        uncapped.validate().unwrap();
    }

    /// Every preset in configs/ parses and validates, so none rots.
    #[test]
    fn every_preset_in_configs_is_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let c = Config::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
            c.validate()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
        assert!(seen >= 4, "configs/ holds {seen} presets");
        let ramp = Config::from_file(&dir.join("ramp-readers.yaml")).unwrap();
        assert_eq!(ramp.ramp.readers, vec![1, 2, 4, 8, 16, 32, 64, 128]);
        assert_eq!(ramp.ramp.writers, Some(vec![0]));
    }

    /// Bounded fuzzing: 2,000 mutations of a valid config (bytes dropped, inserted or
    /// swapped, lines shuffled, values replaced) must each parse or fail with a message:
    /// never panic, and never a message without text.
    #[test]
    fn mutated_configs_never_panic() {
        use rand::rngs::SmallRng;
        use rand::{RngExt, SeedableRng};
        let valid = "target:\n  dsn: \"host=h port=5432\"\n  connect_timeout: 5s\ndata:\n  schemas: 2\n  scale: 64MB\n\
                     run:\n  readers: 4\n  run_time: 30s\n  hot_spot: { size: 8MB, offset: 1MB, frequency: 3 }\n\
                     ramp:\n  readers: [1, 2, 4]\nregress:\n  steps: { r1-w0: { max_iops_drop_pct: 5 } }\n";
        let junk = [
            "", ":", "- ", "[", "]", "{", "}", "\"", "'", "\t", "  ", "\n", "-1", "1e99", "0x10",
            "64XB", "~", "&a", "*a", "!!str", "#",
        ];
        let mut rng = SmallRng::seed_from_u64(0xD810);
        // A fixed count, not a time budget: a loaded host runs the same cases, only slower.
        const CASES: u32 = 2000;
        let mut n = 0;
        while n < CASES {
            let mut text: Vec<char> = valid.chars().collect();
            for _ in 0..rng.random_range(1..6u32) {
                let at = rng.random_range(0..text.len().max(1));
                match rng.random_range(0..4u32) {
                    0 if !text.is_empty() => {
                        text.remove(at.min(text.len() - 1));
                    }
                    1 => {
                        let j = junk[rng.random_range(0..junk.len())];
                        for (k, ch) in j.chars().enumerate() {
                            text.insert((at + k).min(text.len()), ch);
                        }
                    }
                    2 if text.len() > 1 => {
                        let (a, b) = (at.min(text.len() - 1), rng.random_range(0..text.len()));
                        text.swap(a, b);
                    }
                    _ => text.insert(at.min(text.len()), char::from(rng.random_range(32u8..127))),
                }
            }
            let text: String = text.into_iter().collect();
            let parsed = std::panic::catch_unwind(|| {
                Config::from_yaml(&text)
                    .map_err(|e| e.to_string())
                    .map(|c| c.validate().map_err(|e| e.to_string()))
            });
            match parsed {
                Err(_) => panic!("config parsing panicked on:\n{text}"),
                Ok(Err(msg)) | Ok(Ok(Err(msg))) => {
                    assert!(!msg.trim().is_empty(), "empty error for:\n{text}")
                }
                Ok(Ok(Ok(()))) => {}
            }
            n += 1;
        }
        assert_eq!(n, CASES);
    }

    #[test]
    fn random_unit_strings_never_panic_and_sizes_round_trip() {
        use crate::units::{parse_duration, parse_size};
        use rand::rngs::SmallRng;
        use rand::{RngExt, SeedableRng};
        let alphabet: Vec<char> = "0123456789.,_ kKmMgGtTbBiIlocsuµhnx-+e".chars().collect();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let len = rng.random_range(0..12usize);
            let s: String = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            let size = std::panic::catch_unwind(|| parse_size(&s))
                .unwrap_or_else(|_| panic!("parse_size panicked on {s:?}"));
            if let Ok(v) = size {
                assert_eq!(parse_size(&v.to_string()), Ok(v), "{s:?}");
            } else if let Err(e) = size {
                assert!(!e.is_empty());
            }
            let d = std::panic::catch_unwind(|| parse_duration(&s))
                .unwrap_or_else(|_| panic!("parse_duration panicked on {s:?}"));
            if let Err(e) = d {
                assert!(!e.is_empty());
            }
        }
    }

    #[test]
    fn bad_prefix_is_refused() {
        let mut c = Config::default();
        c.data.prefix = "User; drop".into();
        assert!(
            c.validate()
                .unwrap_err()
                .to_string()
                .contains("data.prefix")
        );
    }

    #[test]
    fn a_window_too_short_to_measure_is_refused() {
        let mut c = Config::default();
        c.run.run_time = Dur(Duration::from_millis(1));
        let e = c.validate_run(8192).unwrap_err().to_string();
        assert!(e.contains("run.run_time") && e.contains("too short"), "{e}");
        c.run.run_time = Dur(Duration::from_secs(1));
        assert!(c.validate_run(8192).is_ok());
        // 10 samples of 200 ms do not fit in 1 s.
        c.collector.sample_period = Dur(Duration::from_millis(200));
        assert!(c.validate_run(8192).is_err());
        // A work_loop run has no fixed window to check.
        c.run.work_loop = 10;
        assert!(c.validate_run(8192).is_ok());
    }

    #[test]
    fn several_targets_split_the_sessions() {
        let c = Config::from_yaml(
            "target:\n  dsns: [\"host=a\", \"host=b\", \"host=c\"]\nrun:\n  readers: 4\n  writers: 1\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.targets_n(), 3);
        assert_eq!(c.session_split(), vec![(2, 1), (1, 0), (1, 0)]);
        let each = c.target_configs();
        assert_eq!(each.len(), 3);
        assert_eq!(each[1].target.dsn.as_deref(), Some("host=b"));
        assert!(each[1].target.dsns.is_empty());
        assert_eq!((each[0].run.readers, each[0].run.writers), (2, 1));

        // Per-target counts set the totals.
        let c = Config::from_yaml(
            "target:\n  dsns: [\"host=a\", \"host=b\"]\n  readers: [3, 1]\n  writers: [0, 2]\n",
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!((c.run.readers, c.run.writers), (4, 2));
        assert_eq!(c.session_split(), vec![(3, 0), (1, 2)]);
    }

    #[test]
    fn several_target_mistakes_are_named() {
        let err = |yaml: &str| {
            Config::from_yaml(yaml)
                .unwrap()
                .validate()
                .unwrap_err()
                .to_string()
        };
        assert!(
            err("target:\n  dsn: \"host=a\"\n  dsns: [\"host=b\", \"host=c\"]\n")
                .contains("not both")
        );
        assert!(
            err("target:\n  dsns: [\"host=a\", \"host=b\"]\n  readers: [1]\n")
                .contains("1 count(s) for 2 target(s)")
        );
        assert!(err("target:\n  readers: [1]\n").contains("with one target"));
        assert!(err("target:\n  dsns: [\"host=a\", \"\"]\n").contains("empty connection string"));
        assert!(
            err("target:\n  dsns: [\"host=a\", \"host=b\"]\nrun:\n  shard: 0/2\n  run_id: x\n  readers: 2\n")
                .contains("shards drive one target")
        );
    }

    #[test]
    fn snapshots_are_oracles_and_awr_true_is_snapshots_awr() {
        let mut c = Config::default();
        c.collector.snapshots = Snapshots::Statspack;
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("collector.snapshots") && e.contains("Oracle"),
            "{e}"
        );
        c.engine = Database::Oracle;
        c.validate().unwrap();
        c.collector.awr = true;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("keep one of them"), "{e}");
        c.collector.snapshots = Snapshots::None;
        assert_eq!(c.collector.snapshots(), Snapshots::Awr);
        let parsed: CollectorConfig = serde_saphyr::from_str("snapshots: auto\n").unwrap();
        assert_eq!(parsed.snapshots, Snapshots::Auto);
    }
}
