//! dbio's results store: every recorded run and ramp in an embedded SQLite file (the default,
//! `results/history.sqlite`) or in a PostgreSQL database shared by a team (`--store
//! postgresql://...`). One schema for both, with versioned migrations (see `sql`). The model,
//! the store trait and the statistics are engine-neutral and live in dbio-core's `history`;
//! this crate holds what speaks SQL, so core stays free of database clients.

mod pg;
mod rows;
mod sql;
mod sqlite;

use std::path::Path;

use dbio_core::history::{HistoryError, HistoryStore};

pub use pg::PgStore;
pub use sqlite::SqliteStore;

/// Where the store is when `--store` is not given.
pub const DEFAULT_STORE: &str = "results/history.sqlite";

/// Opens (creating and migrating when needed) the store that `spec` names: a
/// `postgresql://` or `postgres://` URL, or the path of a SQLite file.
pub fn open(spec: &str) -> Result<Box<dyn HistoryStore>, HistoryError> {
    if spec.starts_with("postgresql://") || spec.starts_with("postgres://") {
        Ok(Box::new(PgStore::open(spec)?))
    } else {
        Ok(Box::new(SqliteStore::open(Path::new(spec))?))
    }
}

/// Opens an existing store to read it: nothing is created or migrated, so a read-only file,
/// folder or role is enough.
pub fn open_read(spec: &str) -> Result<Box<dyn HistoryStore>, HistoryError> {
    if spec.starts_with("postgresql://") || spec.starts_with("postgres://") {
        Ok(Box::new(PgStore::open_read(spec)?))
    } else {
        Ok(Box::new(SqliteStore::open_read(Path::new(spec))?))
    }
}

/// The latest schema version this dbio writes.
pub fn schema_version() -> i64 {
    sql::SQLITE_MIGRATIONS
        .last()
        .map(|m| m.0)
        .unwrap_or_default()
        .max(sql::PG_MIGRATIONS.last().map(|m| m.0).unwrap_or_default())
}
