//! What a database backend gives the one run pipeline ([`crate::bench`]): the server's facts
//! before a run, sessions connected and prepared, and a collector around the window. Core
//! knows no SQL and no catalog name; a backend knows no report: it returns typed figures
//! (each naming its source) that core renders.

use std::future::Future;

use thiserror::Error;

use crate::ErrorKind;
use crate::driver::{Canceller, LoopCounts, LoopSession, OpError, Session, SessionSpec};
use crate::plan::RunPlan;
use crate::result::{Environment, SessionTls};
use crate::stats::dbstats::{DbMetrics, DeviceMetrics, HostMetrics, MissingRight, WaitProfile};

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

/// A database backend for the one run pipeline.
pub trait Backend {
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
