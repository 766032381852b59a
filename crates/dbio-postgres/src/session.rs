//! A measured session: one tokio-postgres connection for the whole run, its two statements
//! prepared once, so each operation is exactly one round trip. No pool in the measured path.

use dbio_core::driver::{Canceller, OpError, Session};
use tokio_postgres::{CancelToken, Client, NoTls, Statement};

use crate::conn::{CloseReason, Target};
use crate::error::{PgError, Result};
use crate::sql;

/// How sessions are opened.
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions {
    /// Updates set every filler column (redo stress heavy).
    pub heavy: bool,
    pub major: i32,
    pub statement_timeout: std::time::Duration,
}

pub struct PgSession {
    client: Client,
    read: Statement,
    update: Statement,
    cancel: CancelToken,
    major: i32,
    /// track_io_timing is on in this session (dbio set it, or the server had it on).
    pub io_timing: bool,
    closed: CloseReason,
}

impl PgSession {
    /// Connects as `application_name` and prepares the read and update of `schema`. Turns
    /// track_io_timing on for itself when the role may (superuser, or on 15+ GRANT SET ON
    /// PARAMETER); otherwise `io_timing` tells what the server setting is.
    pub async fn open(
        target: &Target,
        application_name: &str,
        schema: &str,
        opts: &SessionOptions,
    ) -> Result<PgSession> {
        let (heavy, major) = (opts.heavy, opts.major);
        let (client, closed) = target.connect_watched(application_name).await?;
        if !opts.statement_timeout.is_zero() {
            client
                .batch_execute(&format!(
                    "SET statement_timeout = {}",
                    opts.statement_timeout.as_millis()
                ))
                .await
                .map_err(|e| {
                    PgError::from_db(format!("{application_name}: setting statement_timeout"), &e)
                })?;
        }
        let io_timing = match client.batch_execute("SET track_io_timing = on").await {
            Ok(()) => true,
            Err(_) => client
                .query_one("SELECT current_setting('track_io_timing') = 'on'", &[])
                .await
                .map(|r| r.get::<_, bool>(0))
                .unwrap_or(false),
        };
        // One plan for the whole run, as SLOB's shared cursor: custom plans would re-plan
        // every call and, near the key range's ends, probe the index from the planner
        // (get_actual_variable_range), adding index scans that are not the workload's.
        client
            .batch_execute("SET plan_cache_mode = force_generic_plan")
            .await
            .map_err(|e| {
                PgError::from_db(format!("{application_name}: setting plan_cache_mode"), &e)
            })?;
        let read = client
            .prepare(&sql::read_range(schema))
            .await
            .map_err(|e| {
                PgError::from_db(
                    format!("{application_name}: preparing the read of {schema}"),
                    &e,
                )
            })?;
        let update = client
            .prepare(&sql::update_range(schema, heavy))
            .await
            .map_err(|e| {
                PgError::from_db(
                    format!("{application_name}: preparing the update of {schema}"),
                    &e,
                )
            })?;
        let cancel = client.cancel_token();
        Ok(PgSession {
            client,
            read,
            update,
            cancel,
            major,
            io_timing,
            closed,
        })
    }
}

/// The operation's error; for a closed connection, with the reason the server gave.
fn op_error(e: tokio_postgres::Error, closed: &CloseReason) -> OpError {
    let fatal = e.is_closed()
        || e.as_db_error()
            .is_some_and(|d| d.code().code().starts_with("57P"));
    let message = match (e.as_db_error(), closed.get()) {
        (Some(db), _) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        (None, Some(reason)) if e.is_closed() => {
            format!("connection closed by the server: {reason}")
        }
        (None, _) => crate::error::source_chain(&e),
    };
    OpError { message, fatal }
}

impl Session for PgSession {
    async fn read(&mut self, lo: i64, hi: i64) -> std::result::Result<u64, OpError> {
        let row = self
            .client
            .query_one(&self.read, &[&lo, &hi])
            .await
            .map_err(|e| op_error(e, &self.closed))?;
        let n: i64 = row.try_get(0).map_err(|e| op_error(e, &self.closed))?;
        Ok(n as u64)
    }

    async fn update(&mut self, lo: i64, hi: i64, value: &str) -> std::result::Result<u64, OpError> {
        self.client
            .execute(&self.update, &[&lo, &hi, &value])
            .await
            .map_err(|e| op_error(e, &self.closed))
    }

    /// 15+: pg_stat_force_next_flush() publishes this backend's pending statistics before
    /// the call returns (pg-stats §4); 13/14 flush at disconnect, which the collector waits for.
    async fn flush_stats(&mut self) {
        if self.major >= 15 {
            let flush = self
                .client
                .batch_execute("SELECT pg_stat_force_next_flush()");
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), flush).await;
        }
    }

    fn canceller(&self) -> Canceller {
        let token = self.cancel.clone();
        Box::new(move || {
            let token = token.clone();
            Box::pin(async move {
                // The server does not say whether the cancel hit; the session's statement
                // returns either way.
                let _ = token.cancel_query(NoTls).await;
            })
        })
    }
}
