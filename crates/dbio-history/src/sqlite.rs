//! The embedded store: one SQLite file (rusqlite with its bundled SQLite, so no system
//! library is needed). The file carries `PRAGMA application_id` = "dbio"; dbio creates a new
//! file, migrates its own, and refuses any other SQLite file or a symlink.

use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Utc};
use dbio_core::history::{
    Action, Added, Decision, HistoryError, HistoryStore, RunRecord, StepFigures, StoredRun,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::rows::{RunRow, StepRow, assemble, json_text, status};
use crate::sql;

pub struct SqliteStore {
    path: PathBuf,
    conn: Connection,
    /// The schema version the file is at (the latest once migrated; a read-only store may
    /// be older).
    version: i64,
}

fn time_text(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl SqliteStore {
    pub fn open(path: &Path) -> Result<SqliteStore, HistoryError> {
        let name = format!("SQLite {}", path.display());
        let err = |m: String| HistoryError::store(&name, m);
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if meta.file_type().is_symlink() {
                return Err(err(
                    "is a symbolic link; dbio does not follow it: give the real file's path".into(),
                ));
            }
            if !meta.is_file() {
                return Err(err("is not a file: give the path of a .sqlite file".into()));
            }
        } else if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| err(format!("cannot create {}: {e}", parent.display())))?;
        }
        let existed = path.is_file()
            && std::fs::metadata(path)
                .map(|m| m.len() > 0)
                .unwrap_or(false);
        let conn = Connection::open(path).map_err(|e| err(format!("cannot open it: {e}")))?;
        let mut store = SqliteStore {
            path: path.to_path_buf(),
            conn,
            version: 0,
        };
        let app_id: i64 = store
            .conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(|e| err(format!("is not a SQLite database: {e}")))?;
        if existed && app_id != sql::SQLITE_APPLICATION_ID {
            return Err(err(
                "is a SQLite database that dbio did not create; dbio never writes into it: give another --store path".into(),
            ));
        }
        store
            .conn
            .busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| err(e.to_string()))?;
        store.migrate()?;
        Ok(store)
    }

    /// Opens an existing store for reading only: nothing is created or migrated, so a file
    /// (or folder) the user may not write is readable; a store at an older schema version
    /// reads with the columns it has.
    pub fn open_read(path: &Path) -> Result<SqliteStore, HistoryError> {
        let name = format!("SQLite {}", path.display());
        let err = |m: String| HistoryError::store(&name, m);
        let meta = std::fs::symlink_metadata(path).map_err(|e| {
            err(format!(
                "cannot read it ({e}): record runs first (`dbio run --record`, `dbio history add`), or give the store with --store"
            ))
        })?;
        if meta.file_type().is_symlink() {
            return Err(err(
                "is a symbolic link; dbio does not follow it: give the real file's path".into(),
            ));
        }
        if !meta.is_file() {
            return Err(err("is not a file: give the path of a .sqlite file".into()));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| err(format!("cannot open it: {e}")))?;
        let app_id: i64 = conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(|e| err(format!("is not a SQLite database: {e}")))?;
        if app_id != sql::SQLITE_APPLICATION_ID {
            return Err(err(
                "is not a dbio results store (a SQLite file dbio did not create)".into(),
            ));
        }
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| err(e.to_string()))?;
        let version: i64 = conn
            .query_row(sql::SQLITE_CURRENT_VERSION, [], |r| r.get(0))
            .map_err(|e| err(format!("cannot read schema_migrations: {e}")))?;
        let latest = sql::SQLITE_MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if version > latest {
            return Err(err(format!(
                "its schema is version {version}, newer than this dbio knows ({latest}): use a newer dbio"
            )));
        }
        Ok(SqliteStore {
            path: path.to_path_buf(),
            conn,
            version,
        })
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> HistoryError {
        HistoryError::store(self.describe(), format!("{what}: {e}"))
    }

    fn migrate(&mut self) -> Result<(), HistoryError> {
        let name = self.describe();
        // Rebuilding a table must not cascade to its children: foreign keys are off for the
        // migration (the pragma is a no-op inside a transaction, so it is set before).
        self.conn
            .pragma_update(None, "foreign_keys", false)
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let done = self.migrate_tx();
        self.conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        done?;
        self.version = sql::SQLITE_MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        Ok(())
    }

    fn migrate_tx(&mut self) -> Result<(), HistoryError> {
        let name = self.describe();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| HistoryError::store(&name, format!("cannot lock it to migrate: {e}")))?;
        tx.pragma_update(None, "application_id", sql::SQLITE_APPLICATION_ID)
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let has_table: bool = tx
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let current: i64 = if has_table {
            tx.query_row(sql::SQLITE_CURRENT_VERSION, [], |r| r.get(0))
                .map_err(|e| HistoryError::store(&name, e.to_string()))?
        } else {
            0
        };
        let latest = sql::SQLITE_MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if current > latest {
            return Err(HistoryError::store(
                &name,
                format!(
                    "its schema is version {current}, newer than this dbio knows ({latest}): use a newer dbio"
                ),
            ));
        }
        for (version, description, statements) in sql::SQLITE_MIGRATIONS {
            if *version <= current {
                continue;
            }
            tx.execute_batch(statements).map_err(|e| {
                HistoryError::store(&name, format!("migration {version} failed: {e}"))
            })?;
            tx.execute(
                sql::SQLITE_RECORD_MIGRATION,
                params![version, description, time_text(&Utc::now())],
            )
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        }
        tx.commit()
            .map_err(|e| HistoryError::store(&name, format!("cannot commit the migration: {e}")))
    }
}

fn parse_time(s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
}

impl HistoryStore for SqliteStore {
    fn describe(&self) -> String {
        format!("SQLite {}", self.path.display())
    }

    fn add(&mut self, record: &RunRecord, document: &str) -> Result<Added, HistoryError> {
        let name = self.describe();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let id = &record.identity;
        let inserted: Option<i64> = tx
            .query_row(
                sql::SQLITE_INSERT_RUN,
                params![
                    record.content_sha256,
                    record.kind.as_str(),
                    id.label,
                    id.series,
                    json_text(&id.shape),
                    id.tag,
                    id.tag_source,
                    id.host,
                    id.target,
                    id.server_version,
                    id.server_version_num,
                    json_text(&id.settings),
                    json_text(&id.data_set),
                    id.dbio_version,
                    record.status.as_str(),
                    time_text(&record.started),
                    time_text(&record.finished),
                    time_text(&Utc::now()),
                    document,
                ],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| HistoryError::store(&name, format!("cannot add the run: {e}")))?;
        let Some(run_id) = inserted else {
            let existing: i64 = tx
                .query_row(
                    sql::SQLITE_RUN_BY_HASH,
                    params![record.content_sha256],
                    |r| r.get(0),
                )
                .map_err(|e| HistoryError::store(&name, e.to_string()))?;
            return Ok(Added::Duplicate(existing));
        };
        for (i, s) in record.steps.iter().enumerate() {
            tx.execute(
                sql::SQLITE_INSERT_STEP,
                params![
                    run_id,
                    i as i64,
                    s.step,
                    s.readers,
                    s.writers,
                    s.update_pct,
                    s.status.as_str(),
                    s.repeats,
                    s.elapsed_s,
                    s.db_read_iops,
                    s.db_write_iops,
                    s.device_read_iops,
                    s.client_ops_per_s,
                    s.client_read_p50_us,
                    s.client_read_p99_us,
                    s.db_avg_read_latency_us,
                    s.device_read_latency_us,
                    s.physical_read_ratio,
                    s.cache_served,
                    s.rate_per_s.map(|v| v.min(i64::MAX as u64) as i64),
                    s.steady,
                ],
            )
            .map_err(|e| HistoryError::store(&name, format!("cannot add a step: {e}")))?;
        }
        tx.commit()
            .map_err(|e| HistoryError::store(&name, format!("cannot commit: {e}")))?;
        Ok(Added::New(run_id))
    }

    fn runs(&mut self) -> Result<Vec<StoredRun>, HistoryError> {
        let name = self.describe();
        let mut q = self
            .conn
            .prepare(sql::SQLITE_SELECT_RUNS)
            .map_err(|e| self.err("cannot read the runs", e))?;
        let runs = q
            .query_map([], |r| {
                Ok(RunRow {
                    run_id: r.get(0)?,
                    content_sha256: r.get(1)?,
                    kind: r.get(2)?,
                    label: r.get(3)?,
                    series: r.get(4)?,
                    shape: r.get(5)?,
                    tag: r.get(6)?,
                    tag_source: r.get(7)?,
                    host: r.get(8)?,
                    target: r.get(9)?,
                    server_version: r.get(10)?,
                    server_version_num: r.get(11)?,
                    settings: r.get(12)?,
                    data_set: r.get(13)?,
                    dbio_version: r.get(14)?,
                    status: r.get(15)?,
                    started: parse_time(&r.get::<_, String>(16)?)?,
                    finished: parse_time(&r.get::<_, String>(17)?)?,
                    recorded: parse_time(&r.get::<_, String>(18)?)?,
                })
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| HistoryError::store(&name, format!("cannot read the runs: {e}")))?;
        let mut q = self
            .conn
            .prepare(match self.version {
                v if v >= 3 => sql::SQLITE_SELECT_STEPS,
                2 => sql::SQLITE_SELECT_STEPS_V2,
                _ => sql::SQLITE_SELECT_STEPS_V1,
            })
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let raw = q
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(5)?,
                    StepFigures {
                        step: r.get(1)?,
                        readers: r.get(2)?,
                        writers: r.get(3)?,
                        update_pct: r.get(4)?,
                        status: dbio_core::driver::RunStatus::Ok,
                        repeats: r.get(6)?,
                        elapsed_s: r.get(7)?,
                        db_read_iops: r.get(8)?,
                        db_write_iops: r.get(9)?,
                        device_read_iops: r.get(10)?,
                        client_ops_per_s: r.get(11)?,
                        client_read_p50_us: r.get(12)?,
                        client_read_p99_us: r.get(13)?,
                        db_avg_read_latency_us: r.get(14)?,
                        device_read_latency_us: r.get(15)?,
                        physical_read_ratio: r.get(16)?,
                        cache_served: r.get(17)?,
                        rate_per_s: r.get::<_, Option<i64>>(18)?.map(|v| v.max(0) as u64),
                        steady: r.get(19)?,
                    },
                ))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| HistoryError::store(&name, format!("cannot read the steps: {e}")))?;
        let mut steps = Vec::with_capacity(raw.len());
        for (run_id, st, mut figures) in raw {
            figures.status = status(&st, &name)?;
            steps.push(StepRow { run_id, figures });
        }
        assemble(runs, steps, &name)
    }

    fn document(&mut self, id: i64) -> Result<Option<String>, HistoryError> {
        self.conn
            .query_row(sql::SQLITE_DOCUMENT, params![id], |r| r.get(0))
            .optional()
            .map_err(|e| self.err("cannot read the document", e))
    }

    fn decide(&mut self, d: &Decision) -> Result<i64, HistoryError> {
        self.conn
            .query_row(
                sql::SQLITE_INSERT_DECISION,
                params![
                    d.series,
                    d.step,
                    d.metric,
                    d.action.as_str(),
                    d.from_run,
                    d.reason,
                    d.decided_by,
                    time_text(&d.decided_at),
                ],
                |r| r.get(0),
            )
            .map_err(|e| self.err("cannot keep the decision", e))
    }

    fn decisions(&mut self) -> Result<Vec<Decision>, HistoryError> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let name = self.describe();
        let mut q = self
            .conn
            .prepare(sql::SQLITE_SELECT_DECISIONS)
            .map_err(|e| HistoryError::store(&name, e.to_string()))?;
        let rows = q
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, String>(7)?,
                    parse_time(&r.get::<_, String>(8)?)?,
                ))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| HistoryError::store(&name, format!("cannot read the decisions: {e}")))?;
        rows.into_iter()
            .map(
                |(id, series, step, metric, action, from_run, reason, by, at)| {
                    Ok(Decision {
                        id,
                        series,
                        step,
                        metric,
                        action: Action::parse(&action).ok_or_else(|| {
                            HistoryError::store(&name, format!("unknown decision `{action}`"))
                        })?,
                        from_run,
                        reason,
                        decided_by: by,
                        decided_at: at,
                    })
                },
            )
            .collect()
    }
}
