//! The benchmark session as the driver sees it: one connection, its statements prepared, and
//! the mapping of readers and writers to schemas.

use std::os::fd::RawFd;
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

    /// The socket the event engine waits on for this session's answers (under TLS, the
    /// socket below it); None when the session can only block (a backend without the calls
    /// below): such a run gets a thread per session.
    fn event_fd(&self) -> Option<RawFd> {
        None
    }
    /// Switches the socket to non-blocking (true: `send`, `poll_answer`) or back to the
    /// blocking calls above (false).
    fn set_nonblocking(&mut self, _on: bool) -> Result<(), OpError> {
        Err(no_events())
    }
    /// Sends an operation without waiting for its answer (a read when `value` is None):
    /// true when the socket took all of it; false when the rest waits for the socket to
    /// have room (`poll_answer` writes it when the socket says it is writable).
    fn send(&mut self, _lo: i64, _hi: i64, _value: Option<&str>) -> Result<bool, OpError> {
        Err(no_events())
    }
    /// Reads what the socket has of the answer to the operation sent: Some(rows) once it
    /// is complete, None while more is to come (the socket has been read until it had
    /// nothing more, as edge-triggered readiness requires).
    fn poll_answer(&mut self) -> Result<Option<u64>, OpError> {
        Err(no_events())
    }
}

fn no_events() -> OpError {
    OpError {
        message: "this session cannot be driven by the event engine".into(),
        fatal: true,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSpec {
    /// 0-based position among all sessions; seeds its PRNG.
    pub index: u32,
    /// `dbio-reader-<n>` / `dbio-writer-<n>`; also the connection's application_name.
    pub name: String,
    pub kind: SessionKind,
    pub schema: String,
    /// The target (0-based, in `target.dsns` order) of a run over several; absent for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<u32>,
}

/// Sessions for R readers and W writers over `schemas` schemas: readers first, then writers,
/// mapped to schemas round-robin, or all to the first schema with `hot_schema`.
pub fn session_specs(
    readers: u32,
    writers: u32,
    schema_names: &[String],
    hot_schema: bool,
) -> Vec<SessionSpec> {
    session_specs_over(&[(readers, writers)], schema_names, hot_schema)
}

/// Sessions over several targets, `split` giving each target's (readers, writers): numbered
/// and seeded as in a one-target run of the totals (readers first, then writers), each
/// reader and writer handed to the next target round-robin that still has room, and mapped
/// to its target's schemas round-robin in the order that target receives them (so every
/// target's schemas are used as in a run of its own). With one target the specs are those of
/// a one-target run, with no target recorded.
pub fn session_specs_over(
    split: &[(u32, u32)],
    schema_names: &[String],
    hot_schema: bool,
) -> Vec<SessionSpec> {
    let many = split.len() > 1;
    let mut per_target = vec![0u32; split.len()];
    let mut specs = Vec::new();
    for (kind, quota) in [
        (
            SessionKind::Reader,
            split.iter().map(|s| s.0).collect::<Vec<_>>(),
        ),
        (
            SessionKind::Writer,
            split.iter().map(|s| s.1).collect::<Vec<_>>(),
        ),
    ] {
        let mut left = quota;
        let total: u32 = left.iter().sum();
        let mut next = 0usize;
        for n in 1..=total {
            while left[next % left.len()] == 0 {
                next += 1;
            }
            let t = next % left.len();
            left[t] -= 1;
            next += 1;
            let local = per_target[t] as usize;
            per_target[t] += 1;
            let schema = if hot_schema || schema_names.is_empty() {
                schema_names.first().cloned().unwrap_or_default()
            } else {
                schema_names[local % schema_names.len()].clone()
            };
            specs.push(SessionSpec {
                index: specs.len() as u32,
                name: match kind {
                    SessionKind::Reader => format!("dbio-reader-{n}"),
                    SessionKind::Writer => format!("dbio-writer-{n}"),
                },
                kind,
                schema,
                target: many.then_some(t as u32),
            });
        }
    }
    specs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(specs: &[SessionSpec]) -> Vec<(String, Option<u32>, String)> {
        specs
            .iter()
            .map(|s| (s.name.clone(), s.target, s.schema.clone()))
            .collect()
    }

    #[test]
    fn one_target_is_the_one_target_run() {
        let schemas = vec!["user1".to_string(), "user2".to_string()];
        let s = session_specs(3, 1, &schemas, false);
        assert_eq!(
            names(&s),
            vec![
                ("dbio-reader-1".into(), None, "user1".into()),
                ("dbio-reader-2".into(), None, "user2".into()),
                ("dbio-reader-3".into(), None, "user1".into()),
                ("dbio-writer-1".into(), None, "user2".into()),
            ]
        );
    }

    #[test]
    fn targets_take_sessions_round_robin_within_their_counts() {
        let schemas = vec!["user1".to_string(), "user2".to_string()];
        // 3 readers on the first target, 1 on the second; the writer on the second.
        let s = session_specs_over(&[(3, 0), (1, 1)], &schemas, false);
        assert_eq!(
            names(&s),
            vec![
                ("dbio-reader-1".into(), Some(0), "user1".into()),
                ("dbio-reader-2".into(), Some(1), "user1".into()),
                ("dbio-reader-3".into(), Some(0), "user2".into()),
                ("dbio-reader-4".into(), Some(0), "user1".into()),
                ("dbio-writer-1".into(), Some(1), "user2".into()),
            ]
        );
        let idx: Vec<u32> = s.iter().map(|s| s.index).collect();
        assert_eq!(idx, vec![0, 1, 2, 3, 4]);
        assert!(session_specs_over(&[(0, 0), (0, 0)], &schemas, false).is_empty());
    }
}
