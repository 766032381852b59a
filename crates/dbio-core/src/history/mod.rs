//! The nightly as continuous benchmarking: every run and ramp can be recorded in a results
//! store, and `dbio history check` decides on the newest runs of each series by change-point
//! detection over the history instead of one stored baseline.
//!
//! This module is engine- and store-neutral: the record model ([`record`]), the store trait
//! ([`HistoryStore`]), the statistics ([`edivisive`]), the check ([`check`]) and the trend
//! report ([`report`]). The stores themselves (SQLite, PostgreSQL: SQL and client code) live
//! in the `dbio-history` crate, so core stays free of database clients.

pub mod check;
pub mod edivisive;
pub mod record;
pub mod report;

use thiserror::Error;

pub use record::{Identity, RecordKind, RunRecord, StepFigures, StoredRun};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What someone decided about a series: `accept` a new normal from a run on, or `retire` it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The level from `from_run` on is the new normal: the check compares later runs with
    /// it and no longer with what came before.
    Accept,
    /// The series is no longer checked (until a run newer than `from_run` is recorded in it).
    Retire,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Retire => "retire",
        }
    }

    pub fn parse(s: &str) -> Option<Action> {
        match s {
            "accept" => Some(Action::Accept),
            "retire" => Some(Action::Retire),
            _ => None,
        }
    }
}

/// A decision kept in the store, with who made it, when and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// 0 until the store gives it its id.
    pub id: i64,
    /// The series (`label [shape hash]`).
    pub series: String,
    /// One step of the series, or all (null).
    pub step: Option<String>,
    /// One figure (`client_ops_per_s`), or all (null).
    pub metric: Option<String>,
    pub action: Action,
    /// accept: the first run of the new normal; retire: the newest run when it was retired.
    pub from_run: i64,
    pub reason: String,
    pub decided_by: String,
    pub decided_at: DateTime<Utc>,
}

impl Decision {
    /// Does it concern this series, step and figure?
    pub fn covers(&self, series: &str, step: &str, metric: Option<&str>) -> bool {
        self.series == series
            && self.step.as_deref().is_none_or(|s| s == step)
            && match (self.metric.as_deref(), metric) {
                (None, _) => true,
                (Some(m), Some(x)) => m == x,
                (Some(_), None) => false,
            }
    }
}

/// A results store: SQLite file or PostgreSQL schema, one schema with versioned migrations.
pub trait HistoryStore {
    /// What the store is, for messages: `SQLite results/history.sqlite`, or the redacted URL.
    fn describe(&self) -> String;

    /// Records one run or ramp with its document (kept byte for byte). A document whose
    /// content hash is already stored is refused: [`Added::Duplicate`] names the stored run.
    fn add(&mut self, record: &RunRecord, document: &str) -> Result<Added, HistoryError>;

    /// Every recorded run with its identity and figures per step (not the documents), oldest
    /// first (by start time, then id).
    fn runs(&mut self) -> Result<Vec<StoredRun>, HistoryError>;

    /// The whole result document of run `id`, exactly as it was added.
    fn document(&mut self, id: i64) -> Result<Option<String>, HistoryError>;

    /// Keeps a decision (accept, retire); returns its id.
    fn decide(&mut self, decision: &Decision) -> Result<i64, HistoryError>;

    /// Every decision, oldest first.
    fn decisions(&mut self) -> Result<Vec<Decision>, HistoryError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    New(i64),
    /// The same content is stored already as this run.
    Duplicate(i64),
}

#[derive(Debug, Error)]
pub enum HistoryError {
    /// The store cannot be opened, migrated, read or written.
    #[error("results store {store}: {message}")]
    Store { store: String, message: String },

    /// A document that is no dbio result or ramp.
    #[error("{source_name}: {message}")]
    Document {
        source_name: String,
        message: String,
    },
}

impl HistoryError {
    pub fn store(store: impl Into<String>, message: impl Into<String>) -> Self {
        HistoryError::Store {
            store: store.into(),
            message: message.into(),
        }
    }

    /// A store that cannot be used and a document that is not a result are both bad input.
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Usage
    }
}
