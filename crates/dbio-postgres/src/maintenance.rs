//! The state of a dbio table as a read-only run needs it: every page all-visible, no dead
//! rows, statistics present, the index valid. After a run with updates it is not; a VACUUM
//! (FREEZE, ANALYZE) of the table, which dbio owns, brings it back without changing a row.

use tokio_postgres::Client;

use crate::error::{PgError, Result};
use crate::sql;

/// Catalog state of `<schema>.cf1` (pg_class, pg_stats, pg_index, pg_stat_user_tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableState {
    pub pages: i64,
    pub all_visible: i64,
    pub analyzed: bool,
    pub index_valid: bool,
    pub dead_rows: i64,
}

impl TableState {
    /// Rows changed since the last VACUUM: reads may write (hint bits, pruning) and
    /// autovacuum may start inside a measured window.
    pub fn changed_since_vacuum(&self) -> bool {
        self.all_visible < self.pages || self.dead_rows > 0
    }

    /// The two signs of change, each with its source: pg_class.relallvisible is as of the
    /// last VACUUM or ANALYZE, pg_stat_user_tables.n_dead_tup counts row versions updated
    /// since, so "all pages all-visible" and "dead rows" can both hold.
    pub fn describe_change(&self) -> String {
        let mut parts = Vec::new();
        if self.dead_rows > 0 {
            parts.push(format!(
                "{} dead row versions from updates (pg_stat_user_tables)",
                self.dead_rows
            ));
        }
        if self.all_visible < self.pages {
            parts.push(format!(
                "{} of {} pages all-visible (pg_class, as of the last VACUUM)",
                self.all_visible, self.pages
            ));
        }
        parts.join(", ")
    }
}

/// `None` when the table does not exist.
pub async fn table_state(client: &Client, schema: &str) -> Result<Option<TableState>> {
    let row = client
        .query_opt(sql::TABLE_STATE, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("reading the catalog state of {schema}.cf1"), &e))?;
    let what = format!("the catalog state of {schema}.cf1");
    row.map(|r| {
        Ok(TableState {
            pages: crate::marker::col(&r, 0, &what)?,
            all_visible: crate::marker::col(&r, 1, &what)?,
            analyzed: crate::marker::col(&r, 2, &what)?,
            index_valid: crate::marker::col(&r, 3, &what)?,
            dead_rows: crate::marker::col(&r, 4, &what)?,
        })
    })
    .transpose()
}

/// VACUUM (FREEZE, ANALYZE) the table when rows changed since its last VACUUM; returns what
/// was found, for the user, or `None` when nothing was needed.
pub async fn vacuum_if_changed(client: &Client, schema: &str) -> Result<Option<String>> {
    let Some(state) = table_state(client, schema).await? else {
        return Ok(None);
    };
    if !state.changed_since_vacuum() {
        return Ok(None);
    }
    client
        .batch_execute(&sql::vacuum_freeze_analyze(schema))
        .await
        .map_err(|e| PgError::from_db(format!("vacuuming {schema}.cf1"), &e))?;
    Ok(Some(format!(
        "{schema}.cf1: {}; ran VACUUM (FREEZE, ANALYZE) so the window starts clean",
        state.describe_change()
    )))
}

/// CHECKPOINT, so the window does not write what maintenance dirtied. Needs superuser or
/// (PostgreSQL 15+) pg_checkpoint; returns a note instead of failing when not allowed.
pub async fn checkpoint(client: &Client) -> Result<Option<String>> {
    match client.batch_execute(sql::CHECKPOINT).await {
        Ok(()) => Ok(None),
        Err(e) if e.as_db_error().is_some_and(|d| d.code().code() == "42501") => Ok(Some(
            "could not CHECKPOINT (needs superuser or, on PostgreSQL 15+, the pg_checkpoint role): \
             dirty pages from the load or VACUUM may be written inside the window"
                .into(),
        )),
        Err(e) => Err(PgError::from_db("CHECKPOINT", &e)),
    }
}
