//! One snapshot of the server's cumulative statistics, in a single transaction with
//! `stats_fetch_consistency = snapshot` (15+).

use std::collections::BTreeMap;

use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use super::queries::{pgss_query, snapshot_queries};
use crate::error::{PgError, Result};

/// Counters (`view.column` -> value) and reset stamps (`view` -> stats_reset text).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub major: i32,
    pub values: BTreeMap<String, f64>,
    pub resets: BTreeMap<String, String>,
}

/// Is pg_stat_statements installed in this database and loaded (it errors when not preloaded)?
pub async fn pgss_available(client: &Client, major: i32) -> bool {
    client.query_one(&pgss_query(major), &[]).await.is_ok()
}

/// Takes one snapshot in one transaction (15+: with a consistent statistics snapshot).
pub async fn take_snapshot(
    client: &Client,
    major: i32,
    schemas: &[String],
    pgss: bool,
) -> Result<Snapshot> {
    let ctx = "taking a statistics snapshot";
    let mut begin = String::from("BEGIN ISOLATION LEVEL REPEATABLE READ");
    if major >= 15 {
        begin.push_str("; SET LOCAL stats_fetch_consistency = snapshot");
    }
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| PgError::from_db(ctx, &e))?;
    let mut snap = Snapshot {
        major,
        ..Snapshot::default()
    };
    let pgss_sql = pgss_query(major);
    let mut queries: Vec<&str> = snapshot_queries(major);
    if pgss {
        queries.push(&pgss_sql);
    }
    for q in queries {
        let params: Vec<&(dyn ToSql + Sync)> = if q.contains("$1") {
            vec![&schemas]
        } else {
            vec![]
        };
        let rows = match client.query(q, &params).await {
            Ok(rows) => rows,
            Err(e) => {
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(PgError::from_db(ctx, &e));
            }
        };
        let Some(row) = rows.first() else { continue };
        for (i, col) in row.columns().iter().enumerate() {
            let name = col.name();
            if let Some(view) = name.strip_prefix("reset:") {
                if let Ok(Some(text)) = row.try_get::<_, Option<String>>(i) {
                    snap.resets.insert(view.to_string(), text);
                }
            } else if let Ok(Some(v)) = row.try_get::<_, Option<f64>>(i) {
                snap.values.insert(name.to_string(), v);
            }
        }
    }
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| PgError::from_db(ctx, &e))?;
    Ok(snap)
}
