//! The team store: the schema `dbio_history` in a PostgreSQL database (`--store
//! postgresql://user@host/db`). dbio creates the schema when it is absent and migrates its
//! own; a `dbio_history` schema that dbio did not create (no `schema_migrations` table) is
//! refused, never written into. It connects as every dbio connection does (dbio-postgres'
//! `Target`): the password from the URL, `$PGPASSWORD` or the password file, TLS as sslmode
//! asks; the password is never printed.

use dbio_core::history::{
    Action, Added, Decision, HistoryError, HistoryStore, RunRecord, StepFigures, StoredRun,
};
use postgres::Client;

use crate::rows::{RunRow, StepRow, assemble, json_text, status};
use crate::sql;

pub struct PgStore {
    name: String,
    client: Client,
    /// The schema version (the latest once migrated; a read-only store may be older).
    version: i64,
}

impl PgStore {
    /// Connects, creating the schema or migrating it when needed.
    pub fn open(url: &str) -> Result<PgStore, HistoryError> {
        let mut store = PgStore::connect(url)?;
        store.migrate()?;
        Ok(store)
    }

    /// Connects to read only: nothing is created or migrated (a role with SELECT alone reads
    /// the store); a schema at an older version reads with the columns it has.
    pub fn open_read(url: &str) -> Result<PgStore, HistoryError> {
        let mut store = PgStore::connect(url)?;
        let name = store.name.clone();
        let e = |what: &str, x: postgres::Error| {
            HistoryError::store(&name, format!("{what}: {}", db_message(&x)))
        };
        let ours: bool = store
            .client
            .query_one(sql::PG_MIGRATIONS_TABLE_EXISTS, &[])
            .map_err(|x| e("cannot read the catalog", x))?
            .try_get(0)
            .map_err(|x| e("cannot read the catalog", x))?;
        if !ours {
            return Err(HistoryError::store(
                &name,
                "no dbio results store here (no dbio_history.schema_migrations): record runs first, or give the right database",
            ));
        }
        let version: i64 = store
            .client
            .query_one(sql::PG_CURRENT_VERSION, &[])
            .map_err(|x| e("cannot read schema_migrations", x))?
            .try_get(0)
            .map_err(|x| e("cannot read schema_migrations", x))?;
        let latest = sql::PG_MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if version > latest {
            return Err(HistoryError::store(
                &name,
                format!(
                    "its schema is version {version}, newer than this dbio knows ({latest}): use a newer dbio"
                ),
            ));
        }
        store.version = version;
        Ok(store)
    }

    /// Connects through dbio's connection layer, as every session does: the URL (or a
    /// `key=value` connection string) over the PG* environment, service files, the password
    /// file, every sslmode with dbio's TLS; sslmode=require against a server without TLS
    /// sends nothing after the SSL request.
    fn connect(url: &str) -> Result<PgStore, HistoryError> {
        let env = dbio_postgres::env_params()
            .map_err(|e| HistoryError::store("PostgreSQL store", e.to_string()))?;
        let target = dbio_postgres::Target::resolve(
            None,
            env,
            Some(url),
            std::time::Duration::from_secs(10),
        )
        .map_err(|e| {
            HistoryError::store(
                "PostgreSQL store",
                format!("not a valid store ({e}); write it as postgresql://USER@HOST:PORT/DBNAME"),
            )
        })?;
        let name = format!("PostgreSQL {}", target.redacted());
        let client = target
            .connect_blocking("dbio-history")
            .map_err(|e| HistoryError::store(&name, format!("cannot connect: {e}")))?;
        Ok(PgStore {
            name,
            client,
            version: 0,
        })
    }

    fn err(&self, what: &str, e: &postgres::Error) -> HistoryError {
        HistoryError::store(&self.name, format!("{what}: {}", db_message(e)))
    }

    fn migrate(&mut self) -> Result<(), HistoryError> {
        let name = self.name.clone();
        let e = |what: &str, x: postgres::Error| {
            HistoryError::store(&name, format!("{what}: {}", db_message(&x)))
        };
        let mut tx = self
            .client
            .transaction()
            .map_err(|x| e("cannot begin the migration", x))?;
        tx.execute(sql::PG_MIGRATION_LOCK, &[])
            .map_err(|x| e("cannot lock the migration", x))?;
        let schema: bool = tx
            .query_one(sql::PG_SCHEMA_EXISTS, &[&sql::PG_SCHEMA])
            .map_err(|x| e("cannot read pg_namespace", x))?
            .try_get(0)
            .map_err(|x| e("cannot read pg_namespace", x))?;
        let ours: bool = tx
            .query_one(sql::PG_MIGRATIONS_TABLE_EXISTS, &[])
            .map_err(|x| e("cannot read the catalog", x))?
            .try_get(0)
            .map_err(|x| e("cannot read the catalog", x))?;
        if schema && !ours {
            return Err(HistoryError::store(
                &name,
                "the schema dbio_history exists but dbio did not create it (it has no schema_migrations table); dbio never writes into it: drop or rename it, or use another database",
            ));
        }
        if !schema {
            tx.batch_execute(sql::PG_CREATE_SCHEMA).map_err(|x| {
                e(
                    "cannot create the schema dbio_history (the user needs CREATE on the database)",
                    x,
                )
            })?;
        }
        let current: i64 = tx
            .query_one(sql::PG_CURRENT_VERSION, &[])
            .map_err(|x| e("cannot read schema_migrations", x))?
            .try_get(0)
            .map_err(|x| e("cannot read schema_migrations", x))?;
        let latest = sql::PG_MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if current > latest {
            return Err(HistoryError::store(
                &name,
                format!(
                    "its schema is version {current}, newer than this dbio knows ({latest}): use a newer dbio"
                ),
            ));
        }
        for (version, description, statements) in sql::PG_MIGRATIONS {
            if *version <= current {
                continue;
            }
            tx.batch_execute(statements)
                .map_err(|x| e(&format!("migration {version} failed"), x))?;
            tx.execute(sql::PG_RECORD_MIGRATION, &[version, description])
                .map_err(|x| e("cannot record the migration", x))?;
        }
        tx.commit()
            .map_err(|x| e("cannot commit the migration", x))?;
        self.version = latest;
        Ok(())
    }
}

/// The server's own message when there is one (`as_db_error`), else the client's.
fn db_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

impl HistoryStore for PgStore {
    fn describe(&self) -> String {
        self.name.clone()
    }

    fn add(&mut self, record: &RunRecord, document: &str) -> Result<Added, HistoryError> {
        let name = self.name.clone();
        let e = |what: &str, x: postgres::Error| {
            HistoryError::store(&name, format!("{what}: {}", db_message(&x)))
        };
        let mut tx = self
            .client
            .transaction()
            .map_err(|x| e("cannot begin", x))?;
        let id = &record.identity;
        let now = chrono::Utc::now();
        let inserted = tx
            .query_opt(
                sql::PG_INSERT_RUN,
                &[
                    &record.content_sha256,
                    &record.kind.as_str(),
                    &id.label,
                    &id.series,
                    &json_text(&id.shape),
                    &id.tag,
                    &id.tag_source,
                    &id.host,
                    &id.target,
                    &id.server_version,
                    &id.server_version_num,
                    &json_text(&id.settings),
                    &json_text(&id.data_set),
                    &id.dbio_version,
                    &record.status.as_str(),
                    &record.started,
                    &record.finished,
                    &now,
                    &document,
                ],
            )
            .map_err(|x| e("cannot add the run", x))?;
        let Some(row) = inserted else {
            let existing: i64 = tx
                .query_one(sql::PG_RUN_BY_HASH, &[&record.content_sha256])
                .map_err(|x| e("cannot find the stored run", x))?
                .try_get(0)
                .map_err(|x| e("cannot find the stored run", x))?;
            return Ok(Added::Duplicate(existing));
        };
        let run_id: i64 = row
            .try_get(0)
            .map_err(|x| e("cannot read the new run's id", x))?;
        for (i, s) in record.steps.iter().enumerate() {
            let (pos, readers, writers, pct, repeats) = (
                i as i32,
                s.readers as i32,
                s.writers as i32,
                s.update_pct as i32,
                s.repeats as i32,
            );
            tx.execute(
                sql::PG_INSERT_STEP,
                &[
                    &run_id,
                    &pos,
                    &s.step,
                    &readers,
                    &writers,
                    &pct,
                    &s.status.as_str(),
                    &repeats,
                    &s.elapsed_s,
                    &s.db_read_iops,
                    &s.db_write_iops,
                    &s.device_read_iops,
                    &s.client_ops_per_s,
                    &s.client_read_p50_us,
                    &s.client_read_p99_us,
                    &s.db_avg_read_latency_us,
                    &s.device_read_latency_us,
                    &s.physical_read_ratio,
                    &s.cache_served,
                    &s.rate_per_s.map(|v| v.min(i64::MAX as u64) as i64),
                    &s.steady,
                ],
            )
            .map_err(|x| e("cannot add a step", x))?;
        }
        tx.commit().map_err(|x| e("cannot commit", x))?;
        Ok(Added::New(run_id))
    }

    fn runs(&mut self) -> Result<Vec<StoredRun>, HistoryError> {
        let rows = self
            .client
            .query(sql::PG_SELECT_RUNS, &[])
            .map_err(|e| self.err("cannot read the runs", &e))?;
        let mut runs = Vec::with_capacity(rows.len());
        for r in &rows {
            let c = |x: postgres::Error| self.err("cannot read a run", &x);
            runs.push(RunRow {
                run_id: r.try_get(0).map_err(c)?,
                content_sha256: r.try_get(1).map_err(c)?,
                kind: r.try_get(2).map_err(c)?,
                label: r.try_get(3).map_err(c)?,
                series: r.try_get(4).map_err(c)?,
                shape: r.try_get(5).map_err(c)?,
                tag: r.try_get(6).map_err(c)?,
                tag_source: r.try_get(7).map_err(c)?,
                host: r.try_get(8).map_err(c)?,
                target: r.try_get(9).map_err(c)?,
                server_version: r.try_get(10).map_err(c)?,
                server_version_num: r.try_get(11).map_err(c)?,
                settings: r.try_get(12).map_err(c)?,
                data_set: r.try_get(13).map_err(c)?,
                dbio_version: r.try_get(14).map_err(c)?,
                status: r.try_get(15).map_err(c)?,
                started: r.try_get(16).map_err(c)?,
                finished: r.try_get(17).map_err(c)?,
                recorded: r.try_get(18).map_err(c)?,
            });
        }
        let rows = self
            .client
            .query(
                match self.version {
                    v if v >= 3 => sql::PG_SELECT_STEPS,
                    2 => sql::PG_SELECT_STEPS_V2,
                    _ => sql::PG_SELECT_STEPS_V1,
                },
                &[],
            )
            .map_err(|e| self.err("cannot read the steps", &e))?;
        let mut steps = Vec::with_capacity(rows.len());
        for r in &rows {
            let c = |x: postgres::Error| self.err("cannot read a step", &x);
            let u = |i: usize| r.try_get::<_, i32>(i).map(|v| v.max(0) as u32).map_err(c);
            steps.push(StepRow {
                run_id: r.try_get(0).map_err(c)?,
                figures: StepFigures {
                    step: r.try_get(1).map_err(c)?,
                    readers: u(2)?,
                    writers: u(3)?,
                    update_pct: u(4)?,
                    status: status(r.try_get(5).map_err(c)?, &self.name)?,
                    repeats: u(6)?,
                    elapsed_s: r.try_get(7).map_err(c)?,
                    db_read_iops: r.try_get(8).map_err(c)?,
                    db_write_iops: r.try_get(9).map_err(c)?,
                    device_read_iops: r.try_get(10).map_err(c)?,
                    client_ops_per_s: r.try_get(11).map_err(c)?,
                    client_read_p50_us: r.try_get(12).map_err(c)?,
                    client_read_p99_us: r.try_get(13).map_err(c)?,
                    db_avg_read_latency_us: r.try_get(14).map_err(c)?,
                    device_read_latency_us: r.try_get(15).map_err(c)?,
                    physical_read_ratio: r.try_get(16).map_err(c)?,
                    cache_served: r.try_get(17).map_err(c)?,
                    rate_per_s: r
                        .try_get::<_, Option<i64>>(18)
                        .map_err(c)?
                        .map(|v| v.max(0) as u64),
                    steady: r.try_get(19).map_err(c)?,
                },
            });
        }
        assemble(runs, steps, &self.name)
    }

    fn document(&mut self, id: i64) -> Result<Option<String>, HistoryError> {
        self.client
            .query_opt(sql::PG_DOCUMENT, &[&id])
            .map_err(|e| self.err("cannot read the document", &e))?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| self.err("cannot read the document", &e))
    }

    fn decide(&mut self, d: &Decision) -> Result<i64, HistoryError> {
        let row = self
            .client
            .query_one(
                sql::PG_INSERT_DECISION,
                &[
                    &d.series,
                    &d.step,
                    &d.metric,
                    &d.action.as_str(),
                    &d.from_run,
                    &d.reason,
                    &d.decided_by,
                    &d.decided_at,
                ],
            )
            .map_err(|e| self.err("cannot keep the decision", &e))?;
        row.try_get(0)
            .map_err(|e| self.err("cannot read the decision's id", &e))
    }

    fn decisions(&mut self) -> Result<Vec<Decision>, HistoryError> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let rows = self
            .client
            .query(sql::PG_SELECT_DECISIONS, &[])
            .map_err(|e| self.err("cannot read the decisions", &e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let c = |x: postgres::Error| self.err("cannot read a decision", &x);
            let action: String = r.try_get(4).map_err(c)?;
            out.push(Decision {
                id: r.try_get(0).map_err(c)?,
                series: r.try_get(1).map_err(c)?,
                step: r.try_get(2).map_err(c)?,
                metric: r.try_get(3).map_err(c)?,
                action: Action::parse(&action).ok_or_else(|| {
                    HistoryError::store(&self.name, format!("unknown decision `{action}`"))
                })?,
                from_run: r.try_get(5).map_err(c)?,
                reason: r.try_get(6).map_err(c)?,
                decided_by: r.try_get(7).map_err(c)?,
                decided_at: r.try_get(8).map_err(c)?,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_appear_in_the_store_name() {
        for url in [
            "postgresql://bench:s3cret@db.example:5433/perf?sslmode=disable",
            "postgres://u@h/d?password=s3cret&application_name=a",
        ] {
            let t = dbio_postgres::Target::resolve(
                None,
                Default::default(),
                Some(url),
                std::time::Duration::from_secs(1),
            )
            .unwrap();
            let shown = t.redacted();
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(
                shown.contains("host=") && shown.contains("dbname="),
                "{shown}"
            );
        }
    }
}
