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

    /// A store that cannot be used and a document that is not a result are both bad input:
    /// exit code 2.
    pub fn exit_code(&self) -> u8 {
        2
    }
}
