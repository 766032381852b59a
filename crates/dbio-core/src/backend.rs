//! What a database backend gives the one run pipeline ([`crate::bench`]): the server's facts
//! before a run, sessions connected and prepared, and a collector around the window. Core
//! knows no SQL and no catalog name; a backend knows no report: it returns typed figures
//! (each naming its source) that core renders.

use std::future::Future;
use std::sync::Arc;

use thiserror::Error;

use crate::ErrorKind;
use crate::dataset::{CheckReport, DataSetPlan, LoadObserver, LoadSummary, SetupAsk};
use crate::discover::FoundDataSet;
use crate::driver::{Canceller, LoopCounts, LoopSession, OpError, Session, SessionSpec};
use crate::interrupt::Interrupts;
use crate::plan::RunPlan;
use crate::result::{Environment, SessionTls};
use crate::stats::dbstats::{DbMetrics, DeviceMetrics, HostMetrics, MissingRight, WaitProfile};
use crate::teardown::{TeardownPlan, TeardownReport};

/// A backend's failure: its kind (the CLI decides the exit code from it) and the backend's
/// own words.
#[derive(Debug, Error)]
#[error("{message}")]
pub struct BackendError {
    pub kind: ErrorKind,
    pub message: String,
}

impl BackendError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> BackendError {
        BackendError {
            kind,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> BackendError {
        BackendError::new(ErrorKind::Usage, message)
    }

    pub fn failed(message: impl Into<String>) -> BackendError {
        BackendError::new(ErrorKind::Failed, message)
    }

    pub fn interrupted(message: impl Into<String>) -> BackendError {
        BackendError::new(ErrorKind::Interrupted, message)
    }

    /// The same error, its message rewritten (a target named in front of it).
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> BackendError {
        BackendError {
            kind: self.kind,
            message: f(self.message),
        }
    }
}

impl From<crate::CoreError> for BackendError {
    fn from(e: crate::CoreError) -> Self {
        BackendError::new(e.kind(), e.to_string())
    }
}

/// What preflight learned of the target, before anything is measured.
pub struct ServerFacts {
    /// The block size of the data set's tablespace (PostgreSQL: block_size; Oracle: the
    /// tablespace's), in bytes: scales in bytes become blocks of this size.
    pub block_size: u64,
    /// The names the data set's schemas have on this database, in order (PostgreSQL
    /// `user1..`, Oracle `USER1..`).
    pub schema_names: Vec<String>,
    /// The target as results may show it (no password).
    pub target: String,
    /// The environment result.json records (server version, settings that matter, data set).
    pub environment: Environment,
    /// What weakens the figures (a data set that fits in cache, track_io_timing off, ...).
    pub warnings: Vec<String>,
    /// What preflight did that does not weaken them (the routine VACUUM), for the user.
    pub notes: Vec<String>,
    /// A one-line description of the server for the "connecting" note
    /// (`PostgreSQL 17.2`, `Oracle, container PDB1`).
    pub describe: String,
    /// What identifies the server itself, whichever database or address reached it
    /// (PostgreSQL: the cluster's system identifier), so that two targets that are one
    /// server are told apart from two servers; None when it cannot be read.
    pub server_id: Option<String>,
}

/// Sessions connected and prepared, with what the result records of their connections.
pub struct Opened<S> {
    pub sessions: Vec<(SessionSpec, S)>,
    pub tls: Option<SessionTls>,
}

/// What the collector measured over the window, engine-neutral; each figure names its
/// source (the backend's views) in its own fields.
#[derive(Debug, Default)]
pub struct WindowFigures {
    pub db: Option<DbMetrics>,
    pub waits: Option<WaitProfile>,
    pub device: Option<DeviceMetrics>,
    /// The database host's own figures, when they could be read.
    pub host: Option<HostMetrics>,
    /// Figures missing for want of a right, with the GRANT for each.
    pub missing_rights: Vec<MissingRight>,
    /// What the backend measured for the limiter verdict (residency, caps, the server's
    /// CPU, its asynchronous I/O); core adds the client's CPU and the outstanding I/O.
    pub limits: Option<crate::limits::Limits>,
    pub warnings: Vec<String>,
    /// Files the backend's collector wrote for the run (Oracle's AWR report), by name, to be
    /// written into the result folder beside result.json.
    pub files: Vec<(String, Vec<u8>)>,
}

impl WindowFigures {
    /// Nothing collected, for this reason.
    pub fn skipped(reason: String) -> WindowFigures {
        WindowFigures {
            warnings: vec![reason],
            ..WindowFigures::default()
        }
    }
}

/// Snapshots around the measured window: `begin` just before it opens (after the sessions
/// flushed their statistics), `end` once it closed.
pub trait WindowCollector {
    fn begin(&mut self) -> impl Future<Output = Result<(), BackendError>>;
    /// `window_s`: the database's window, from the release until the last session stopped
    /// (the driver's `db_window_s`).
    fn end(self, window_s: f64) -> impl Future<Output = WindowFigures>;
}

/// What the data-set commands (setup, check, list, teardown) need of a database, engine
/// neutral: typed answers that core and the CLI render the same way whichever it is.
pub trait DataSet {
    /// The block size, in bytes, of the blocks the data set's tables are (or will be) made of,
    /// as the server reports it (PostgreSQL: `block_size`, fixed when the server was built;
    /// Oracle: the tablespace's). A scale in bytes is counted in these blocks by setup,
    /// check and run alike ([`data_set_plan`], [`ServerFacts::block_size`]).
    fn block_size(
        &mut self,
        config: &crate::Config,
    ) -> impl Future<Output = Result<u64, BackendError>>;

    /// Every dbio data set the target holds, as dbio's marks describe them (`dbio list`,
    /// and the data set a command takes when none is given).
    fn list(&mut self) -> impl Future<Output = Result<Vec<FoundDataSet>, BackendError>>;

    /// `dbio check`: whether each schema of the data set `config` describes, counted in this
    /// server's blocks, is fit to run against (`run.read_path` and `run.work_unit` for the
    /// reader's plan). Changes nothing on the server.
    fn check(
        &mut self,
        config: &crate::Config,
    ) -> impl Future<Output = Result<CheckReport, BackendError>>;

    /// `dbio setup`: builds the data set `config` describes, counted in this server's blocks,
    /// and marks it; schemas already complete are kept unless `ask.force`. Progress goes to
    /// `observer`. The first of `interrupts` stops it: what was being loaded stays recorded as
    /// incomplete, for the next setup to rebuild (a [`ErrorKind::Interrupted`] error).
    fn setup(
        &mut self,
        config: &crate::Config,
        ask: SetupAsk,
        observer: Arc<dyn LoadObserver>,
        interrupts: Interrupts,
    ) -> impl Future<Output = Result<LoadSummary, BackendError>>;

    /// What `dbio teardown` would drop of the data set of `prefix`, and what it would leave.
    /// Changes nothing on the server.
    fn teardown_plan(
        &mut self,
        prefix: &str,
    ) -> impl Future<Output = Result<TeardownPlan, BackendError>>;

    /// `dbio teardown --yes`: drops the data set of `prefix`, dbio's objects only. Refuses
    /// before any change when the user's objects depend on its tables, unless
    /// `drop_dependents` (a backend that never drops them refuses that flag). The first of
    /// `interrupts` stops it between schemas or breaks the statement in flight.
    fn teardown(
        &mut self,
        prefix: &str,
        drop_dependents: bool,
        interrupts: Interrupts,
    ) -> impl Future<Output = Result<TeardownReport, BackendError>>;
}

/// A database backend for the one run pipeline.
pub trait Backend: DataSet {
    type Session: Session;
    /// Sessions whose whole loop runs inside the database (`run.engine: server`);
    /// [`NoLoops`] for a backend without that capability.
    type LoopSession: LoopSession;
    type Collector: WindowCollector;

    /// The database's name as reports say it (`PostgreSQL`, `Oracle`).
    fn name(&self) -> &'static str;

    /// What can be refused before anything touches the server or the disk (a setting this
    /// backend or this host cannot honour, e.g. --drop-caches as non-root).
    fn refuse(&self, config: &crate::Config) -> Result<(), BackendError>;

    /// The server's facts, and the data set verified to be fit to run against (its
    /// routine maintenance done).
    fn preflight(
        &mut self,
        config: &crate::Config,
    ) -> impl Future<Output = Result<ServerFacts, BackendError>>;

    fn open_sessions(
        &mut self,
        plan: &RunPlan,
    ) -> impl Future<Output = Result<Opened<Self::Session>, BackendError>>;

    /// Only called when the plan asks for the server-side loop and
    /// [`Backend::server_loop`] is true.
    fn open_loop_sessions(
        &mut self,
        plan: &RunPlan,
    ) -> impl Future<Output = Result<Opened<Self::LoopSession>, BackendError>>;

    /// Whether this backend can run the operation loop inside the database.
    fn server_loop(&self) -> bool;

    /// Waits up to `timeout` for the server to accept connections again (after a failed
    /// ramp step: it may be restarting); true when it does, or when the backend cannot tell.
    fn wait_ready(&self, timeout: std::time::Duration) -> impl Future<Output = bool> {
        let _ = timeout;
        std::future::ready(true)
    }

    /// This host's clock minus the server's, in seconds (measured around one round trip),
    /// for runs whose shards start at a wall-clock instant; None when the backend cannot
    /// tell.
    fn clock_offset_s(&mut self) -> impl Future<Output = Result<Option<f64>, BackendError>> {
        std::future::ready(Ok(None))
    }

    /// The run is over (its figures collected): let go of what it held on the server (the
    /// data set's lock), so the next run (a ramp's next step) can take it.
    fn end_run(&mut self) {}

    /// Whether [`Backend::collector`] gives a shard that does not collect the server's
    /// figures (`run.collector_shard` is another) a collector of its own sessions only
    /// (their waits and physical reads, for `dbio merge` to sum); false: such a shard has no
    /// collector.
    fn shard_collector(&self) -> bool {
        false
    }

    /// The collector for the window; called once the sessions are open. In a shard that
    /// does not collect the server's figures (see [`Backend::shard_collector`]) it
    /// measures the shard's own sessions only.
    fn collector(
        &mut self,
        plan: &RunPlan,
    ) -> impl Future<Output = Result<Self::Collector, BackendError>>;
}

/// The data set `config` describes, in the blocks of the server `backend` reaches: what setup
/// builds and check verifies, counted as a run on that server counts it.
pub async fn data_set_plan<D: DataSet>(
    backend: &mut D,
    config: &crate::Config,
) -> Result<DataSetPlan, BackendError> {
    let block_size = backend.block_size(config).await?;
    Ok(DataSetPlan::new(&config.data, block_size))
}

/// The loop session of a backend without a server-side loop: it cannot exist.
pub enum NoLoops {}

impl LoopSession for NoLoops {
    fn run_loop(&mut self, _: f64) -> Result<LoopCounts, OpError> {
        match *self {}
    }
    fn canceller(&self) -> Canceller {
        match *self {}
    }
    fn flush_stats(&mut self) {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::Config;
    use crate::bench::{self, Output};
    use crate::discover::{self, DataSetAsk, DataSetState};
    use crate::result::DataSetInfo;
    use crate::units::SizeSpec;

    /// PostgreSQL built with `--with-blocksize=16`.
    const SERVER_BLOCK: u64 = 16384;

    /// A server that reports 16 kB blocks and nothing else; a run stops where its sessions
    /// would connect, with the plan it made kept for the test.
    struct SixteenKbServer {
        /// The data sets its marks describe.
        marked: Vec<FoundDataSet>,
        run_scale_blocks: Option<u64>,
    }

    enum NoSession {}

    impl Session for NoSession {
        fn read(&mut self, _: i64, _: i64) -> Result<u64, OpError> {
            match *self {}
        }
        fn update(&mut self, _: i64, _: i64, _: &str) -> Result<u64, OpError> {
            match *self {}
        }
        fn canceller(&self) -> Canceller {
            match *self {}
        }
        fn flush_stats(&mut self) {
            match *self {}
        }
    }

    struct NoCollector;

    impl WindowCollector for NoCollector {
        async fn begin(&mut self) -> Result<(), BackendError> {
            Ok(())
        }
        async fn end(self, _: f64) -> WindowFigures {
            WindowFigures::default()
        }
    }

    impl DataSet for SixteenKbServer {
        async fn block_size(&mut self, _: &crate::Config) -> Result<u64, BackendError> {
            Ok(SERVER_BLOCK)
        }
        async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
            Ok(self.marked.clone())
        }
        async fn check(&mut self, _: &crate::Config) -> Result<CheckReport, BackendError> {
            Err(BackendError::failed("no tables here"))
        }
        async fn setup(
            &mut self,
            _: &crate::Config,
            _: SetupAsk,
            _: Arc<dyn LoadObserver>,
            _: Interrupts,
        ) -> Result<LoadSummary, BackendError> {
            Err(BackendError::failed("no tables here"))
        }
        async fn teardown_plan(&mut self, _: &str) -> Result<TeardownPlan, BackendError> {
            Err(BackendError::failed("no tables here"))
        }
        async fn teardown(
            &mut self,
            _: &str,
            _: bool,
            _: Interrupts,
        ) -> Result<TeardownReport, BackendError> {
            Err(BackendError::failed("no tables here"))
        }
    }

    impl Backend for SixteenKbServer {
        type Session = NoSession;
        type LoopSession = NoLoops;
        type Collector = NoCollector;

        fn name(&self) -> &'static str {
            "a 16 kB server"
        }
        fn refuse(&self, _: &crate::Config) -> Result<(), BackendError> {
            Ok(())
        }
        async fn preflight(&mut self, config: &crate::Config) -> Result<ServerFacts, BackendError> {
            let plan = data_set_plan(self, config).await?;
            Ok(ServerFacts {
                block_size: plan.block_size,
                schema_names: plan.schema_names(),
                target: "a 16 kB server".into(),
                environment: Environment {
                    dbio_version: "test".into(),
                    client_host: "test".into(),
                    target: "a 16 kB server".into(),
                    pinned_server: None,
                    server_version: "test".into(),
                    server_version_num: 0,
                    settings: BTreeMap::new(),
                    data_set: DataSetInfo {
                        schemas: plan.schemas,
                        scale_blocks: plan.scale_blocks,
                        block_size: plan.block_size,
                        table_bytes: plan.table_bytes(),
                        schemas_used: plan.schema_names(),
                        tables: Vec::new(),
                    },
                    session_tls: None,
                    read_path: None,
                },
                warnings: Vec::new(),
                notes: Vec::new(),
                describe: "a 16 kB server".into(),
                server_id: None,
            })
        }
        async fn open_sessions(
            &mut self,
            plan: &RunPlan,
        ) -> Result<Opened<NoSession>, BackendError> {
            self.run_scale_blocks = Some(plan.workload().scale_blocks);
            Err(BackendError::failed("planned; no sessions here"))
        }
        async fn open_loop_sessions(
            &mut self,
            _: &RunPlan,
        ) -> Result<Opened<NoLoops>, BackendError> {
            Err(BackendError::failed("no server-side loop here"))
        }
        fn server_loop(&self) -> bool {
            false
        }
        async fn collector(&mut self, _: &RunPlan) -> Result<NoCollector, BackendError> {
            Ok(NoCollector)
        }
    }

    /// The run as far as its plan, on `server`: the error it stopped with.
    async fn run_until_sessions(server: &mut SixteenKbServer, config: &Config) -> BackendError {
        let quiet = |_: &str| {};
        let output = Output {
            quiet: true,
            print_report: false,
            line: &quiet,
            report: &quiet,
        };
        match bench::run(
            std::slice::from_mut(server),
            config,
            &output,
            Interrupts::never(),
            None,
        )
        .await
        {
            Ok(_) => panic!("the fake server opened no sessions, yet the run went on"),
            Err(e) => e,
        }
    }

    // Setup and check counted a scale in bytes in 8 kB blocks whatever the server's: on a
    // 16 kB server `--scale 64MB` loaded 8192 rows (128 MiB), and a later `run --scale 64MB`
    // (4096 blocks of the server's) was refused, its suggested `setup --force` rebuilding the
    // same.
    #[tokio::test]
    async fn scale_in_bytes_is_counted_in_the_servers_blocks_by_setup_check_and_run() {
        let out = tempfile::tempdir().expect("a temporary folder");
        let mut config = Config::default();
        config.data.scale = "64MB".parse::<SizeSpec>().expect("64MB is a size");
        config.run.out = Some(out.path().join("run"));
        let mut server = SixteenKbServer {
            marked: Vec::new(),
            run_scale_blocks: None,
        };

        // setup and check both build their plan with data_set_plan.
        let setup = data_set_plan(&mut server, &config).await.expect("a plan");
        assert_eq!((setup.scale_blocks, setup.block_size), (4096, SERVER_BLOCK));
        assert_eq!(setup.scale_blocks * setup.block_size, 64 << 20);
        let check = data_set_plan(&mut server, &config).await.expect("a plan");
        assert_eq!(check, setup);

        // A later run given the same --scale finds the data set setup marked.
        server.marked = vec![FoundDataSet {
            prefix: setup.prefix.clone(),
            id: "id".into(),
            schemas: setup.schemas,
            schemas_found: setup.schemas,
            scale_blocks: setup.scale_blocks,
            block_size: setup.block_size,
            tablespace: None,
            tablespaces_now: Vec::new(),
            state: DataSetState::Complete,
            bytes: None,
            loaded_at: "2026-12-05T00:00:00Z".into(),
            dbio_version: "test".into(),
        }];
        let ask = DataSetAsk {
            prefix: setup.prefix.clone(),
            schemas: None,
            scale: Some((config.data.scale, "--scale".into())),
        };
        let found = server.list().await.expect("the marks");
        let picked =
            discover::pick(&ask, &found).expect("--scale 64MB is the data set setup built");
        assert_eq!(picked.map(|d| d.scale_blocks), Some(4096));

        // The run plans 4096 keys per schema ...
        let stopped = run_until_sessions(&mut server, &config).await;
        assert_eq!(stopped.message, "planned; no sessions here");
        assert_eq!(server.run_scale_blocks, Some(4096));

        // ... and validates its work unit against them.
        config.run.work_unit = 4097;
        config.run.out = Some(out.path().join("too-wide"));
        let refused = run_until_sessions(&mut server, &config).await;
        assert_eq!(refused.kind, ErrorKind::Usage, "{}", refused.message);
        assert!(refused.message.contains("1..=4096"), "{}", refused.message);
    }
}
