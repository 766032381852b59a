//! dbio-postgres: the PostgreSQL backend. Connections follow libpq (`conn`, `dsn`, `tls`), the
//! loader builds the SLOB data set with binary COPY (`loader`), `check` verifies it,
//! `teardown` drops only what dbio made, all of them reading dbio's marks (`marker`). A run's
//! preflight verifies and holds the data set (`run`, `verify`, `lock`, `maintenance`); the
//! measured sessions speak the protocol themselves (`session` over `wire`); around the window
//! the AWR-like collector (`collector`), the wait sampler (`sampler`) and the host's own figures
//! (`host`, `cgroup`, `caps`, `cpu`, `residency`) measure, and `rights` names every figure the
//! role may not read. `backend` gives core's traits; `scratch` manages throwaway clusters for
//! the quickstart, the nightly and the tests.
//!
//! The modules are private: other crates use the names re-exported below, and reach the
//! backend's run, check and list through core's `Backend` and `DataSet` traits.

mod backend;
mod caps;
mod cgroup;
mod check;
mod collector;
mod conn;
mod copy;
mod cpu;
mod dsn;
mod error;
mod host;
mod loader;
mod lock;
mod maintenance;
mod marker;
mod residency;
mod rights;
mod run;
mod sampler;
mod scratch;
mod server;
mod session;
mod sizing;
mod space;
mod sql;
mod teardown;
mod tls;
mod verify;
/// The measured sessions' own blocking protocol client; its public types are re-exported by
/// `session` (the protocol tests and the client-cost example open it directly).
mod wire;

/// The PostgreSQL backend of core's one run pipeline: `dbio_core::backend::Backend` for
/// run, ramp and capacity, `dbio_core::backend::DataSet` for setup, check, list and teardown.
pub use backend::PgBackend;
/// Where to connect, resolved as libpq resolves it (DSN over PG* variables, service file,
/// password file), and the PG* variables of this process.
pub use conn::{Target, env_params};
/// The crate's one error type; its `kind()` decides the CLI's exit code.
pub use error::PgError;
/// Throwaway clusters (initdb, start, stop, destroy) for the quickstart, the nightly and the
/// tests.
pub use scratch::{ScratchCluster, ScratchOptions};
/// The raw connection of a measured session, what its statements bind and what its methods
/// return, for the protocol tests and the client-cost example; runs open sessions through
/// [`PgBackend`].
pub use session::{
    CancelHandle, ConnectError, Executed, INT8, Param, ServerError, ShutdownHandle, Step,
    StepResult, WireConn,
};
/// The reader's statement for a schema, as the measured sessions prepare it.
pub use sql::read_range;
