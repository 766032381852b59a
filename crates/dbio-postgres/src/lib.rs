//! dbio-postgres: the PostgreSQL backend. Connections follow libpq (`conn`, `dsn`, `tls`), the
//! loader builds the SLOB data set with binary COPY (`loader`), `check` verifies it,
//! `teardown` drops only what dbio made, all of them reading dbio's marks (`marker`). A run's
//! preflight verifies and holds the data set (`run`, `verify`, `lock`, `maintenance`); the
//! measured sessions speak the protocol themselves (`session` over `wire`); around the window
//! the AWR-like collector (`collector`), the wait sampler (`sampler`) and the host's own figures
//! (`host`, `cgroup`, `caps`, `cpu`, `residency`) measure, and `rights` names every figure the
//! role may not read. `backend` gives core's traits; `scratch` manages throwaway clusters for
//! the quickstart, the nightly and the tests.

pub mod backend;
pub mod caps;
pub mod cgroup;
pub mod check;
pub mod collector;
pub mod conn;
mod copy;
pub mod cpu;
pub mod dsn;
pub mod error;
pub mod host;
pub mod loader;
pub mod lock;
pub mod maintenance;
pub mod marker;
pub mod residency;
pub mod rights;
pub mod run;
pub mod sampler;
pub mod scratch;
pub mod server;
pub mod session;
pub mod space;
pub mod sql;
pub mod teardown;
pub mod tls;
pub mod verify;
/// The measured sessions' own blocking protocol client; its public types are re-exported by
/// `session` (the protocol tests and the client-cost example open it directly).
mod wire;

pub use conn::Target;
pub use error::PgError;
