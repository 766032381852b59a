//! The benchmark session as the driver sees it: one connection, its statements prepared, and
//! the mapping of readers and writers to schemas.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::workload::SessionKind;

/// An operation's failure as the backend reports it.
#[derive(Debug, Clone)]
pub struct OpError {
    /// The database's own message, with SQLSTATE where there is one.
    pub message: String,
    /// The connection is gone: this session cannot go on.
    pub fatal: bool,
}

/// Cancels the statement a session is running, from another thread; blocking, best effort.
pub type Canceller = Arc<dyn Fn() + Send + Sync>;

/// One benchmark session: one connection, its statements prepared, for the whole run. Its
/// calls block; the driver gives each session its own thread.
pub trait Session: Send + 'static {
    /// Reads keys `lo..=hi` through the index; returns the rows seen.
    fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError>;
    /// Updates keys `lo..=hi` to `value`; returns the rows changed.
    fn update(&mut self, lo: i64, hi: i64, value: &str) -> Result<u64, OpError>;
    fn canceller(&self) -> Canceller;
    /// Shuts the session's connection down from another thread, so a call blocked on a
    /// server that no longer answers returns at once and the thread hands back what it
    /// measured; None when the backend cannot (the thread is then abandoned).
    fn closer(&self) -> Option<Canceller> {
        None
    }
    /// Makes the database publish this session's pending statistics now (PostgreSQL 15+:
    /// pg_stat_force_next_flush()), before a snapshot is taken; best effort.
    fn flush_stats(&mut self);
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// 0-based position among all sessions; seeds its PRNG.
    pub index: u32,
    /// `dbio-reader-<n>` / `dbio-writer-<n>`; also the connection's application_name.
    pub name: String,
    pub kind: SessionKind,
    pub schema: String,
}

/// Sessions for R readers and W writers over `schemas` schemas: readers first, then writers,
/// mapped to schemas round-robin, or all to the first schema with `hot_schema`.
pub fn session_specs(
    readers: u32,
    writers: u32,
    schema_names: &[String],
    hot_schema: bool,
) -> Vec<SessionSpec> {
    let kinds = (1..=readers)
        .map(|n| (SessionKind::Reader, n))
        .chain((1..=writers).map(|n| (SessionKind::Writer, n)));
    kinds
        .enumerate()
        .map(|(i, (kind, n))| {
            let schema = if hot_schema || schema_names.is_empty() {
                schema_names.first().cloned().unwrap_or_default()
            } else {
                schema_names[i % schema_names.len()].clone()
            };
            SessionSpec {
                index: i as u32,
                name: match kind {
                    SessionKind::Reader => format!("dbio-reader-{n}"),
                    SessionKind::Writer => format!("dbio-writer-{n}"),
                },
                kind,
                schema,
            }
        })
        .collect()
}
