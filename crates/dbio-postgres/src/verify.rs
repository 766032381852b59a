//! Preflight verifies what is about to be measured instead of trusting dbio's marks (seen: a
//! truncated table measured as if full, rows 0, status ok; a kept data set's tables moved to
//! another tablespace while the run named the configured one's device; a VACUUM the server
//! skipped, "only table or database owner can vacuum it", reported as done):
//!
//! - **size**: each table's heap on disk (pg_relation_size) against the scale, its rows
//!   (pg_class.reltuples after preflight's VACUUM/ANALYZE) and, when its statistics show
//!   deleted or dead rows or reltuples is not exactly the scale, three exact index probes
//!   (the first key, the last key, the one after it). Fewer blocks or rows than the scale, or a
//!   missing first or last key, is refused (exit 2): the reads would visit fewer blocks than
//!   the result says. More rows, or a heap grown past the scale, is a warning: every read
//!   still visits `work_unit` blocks.
//! - **where**: the tablespace each table and index really is in (pg_class.reltablespace),
//!   recorded in the result and used for the device; a table not where its marks or the
//!   configuration say is a warning, not a refusal: the figures are true for where the table
//!   is, the result names it, and moving a data set on purpose (ALTER TABLE ... SET
//!   TABLESPACE) to measure another device is legitimate.
//! - **VACUUM**: the VACUUM preflight runs counts only when pg_stat_user_tables.last_vacuum
//!   moved to after the server's clock just before it (not vacuum_count: 13/14 publish an
//!   earlier VACUUM late); a skipped one (the role does not own the table) is a warning naming the owner:
//!   measuring is still meaningful, but reads may set hint bits and prune.
//! - **order**: the keys' physical order (pg_stats.correlation of cf1.custid, from ANALYZE):
//!   the SLOB method loads keys in a random order, so a range of keys touches blocks all
//!   over the table (correlation near 0). A table put in key order (CLUSTER, or a load in
//!   order: correlation near 1) reads its range as neighbouring blocks, which read-ahead and
//!   the device merge: refused (seen: a CLUSTER-ed data set measured as random reads).
//! - **plan**: the reader's statement is prepared as the sessions prepare it, under their
//!   settings (`plan_cache_mode = force_generic_plan` and `run.read_path`'s steering), and
//!   `EXPLAIN EXECUTE` shows its generic plan; a plan whose table scan is not the one
//!   `run.read_path` asks for (Index Scan or Bitmap Heap Scan on i_cf1) is refused. The
//!   server engine's loop runs the same statement text with the same two bigint parameters
//!   in a session with the same settings (PL/pgSQL plans through the plan cache, which
//!   honours plan_cache_mode), so the verified plan is its plan too.

use std::time::{Duration, Instant};

use dbio_core::config::ReadPath;
use dbio_core::dataset::DataSetPlan;
use dbio_core::result::{ReadPathInfo, TableFacts};
use tokio_postgres::{Client, SimpleQueryMessage};

use crate::error::{PgError, Result};
use crate::marker::{self, Ownership, col};
use crate::{maintenance, sql};

/// Beyond this |correlation| of custid with the physical order, the keys are not in a
/// random order. A random order of n keys has a correlation of about 1/sqrt(n): under 0.13
/// at the smallest scale (64 blocks), so 0.5 is four of its standard deviations there.
pub const MAX_KEY_CORRELATION: f64 = 0.5;

/// Refuses keys in (or near) their physical order: `correlation` is pg_stats's, or the
/// exact one over the whole table; `how` names which.
pub fn judge_order(correlation: f64, how: &str) -> std::result::Result<(), KeysInOrder> {
    if correlation.abs() <= MAX_KEY_CORRELATION {
        return Ok(());
    }
    Err(KeysInOrder {
        correlation,
        how: how.to_string(),
    })
}

/// A table whose keys are in (or near) their physical order: `correlation` of custid with
/// the block order, measured as `how` says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "its keys are in their physical order (correlation of custid with the block order {correlation:.2}, {how}; \
     a SLOB data set's is near 0): a range of keys reads neighbouring blocks, which read-ahead and the device merge, \
     so the run would not measure random reads. It was reordered outside dbio (CLUSTER, VACUUM FULL after an \
     ordered copy); rebuild it with `dbio setup --force`"
)]
pub struct KeysInOrder {
    pub correlation: f64,
    pub how: String,
}

/// pg_stats.correlation of `schema`.cf1.custid (from the last ANALYZE); None without
/// statistics.
async fn key_correlation(client: &Client, schema: &str) -> Result<Option<f64>> {
    let what = format!("the key order of {schema}.cf1 (pg_stats)");
    let row = client
        .query_opt(sql::KEY_CORRELATION, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("reading {what}"), &e))?;
    match row {
        Some(r) => col::<Option<f64>>(&r, 0, &what),
        None => Ok(None),
    }
}

/// Rows by reltuples below this share of the scale: rows were deleted outside dbio. VACUUM
/// counts the rows of every page it scans and ANALYZE samples whole pages, so with one row per
/// block the estimate is exact or nearly (PostgreSQL docs, "Statistics Used by the Planner").
const MIN_ROWS_SHARE: f64 = 0.99;
/// More rows than the scale by this share: rows were added outside dbio.
const MAX_ROWS_SHARE: f64 = 1.01;
/// Heap blocks beyond the scale by this share: the table grew (non-HOT updates, inserts).
const MAX_BLOCKS_SHARE: f64 = 1.10;
/// How long a VACUUM's count may take to show: at once on 15+ (shared-memory statistics); on
/// 13/14 the statistics collector's file is up to PGSTAT_STAT_INTERVAL (500 ms) old.
const VACUUM_COUNT_WAIT: Duration = Duration::from_secs(2);

/// What preflight found.
#[derive(Debug, Clone)]
pub struct Verified {
    pub tables: Vec<TableFacts>,
    pub read_path: ReadPathInfo,
    pub warnings: Vec<String>,
}

impl Verified {
    /// The tablespace the sessions' tables are really in, for the device figures: `None`
    /// for pg_default (the data directory), the first table's otherwise.
    pub fn tablespace(&self, used: &[String]) -> Option<&str> {
        self.tables
            .iter()
            .find(|t| used.contains(&t.schema))
            .or(self.tables.first())
            .map(|t| t.tablespace.as_str())
            .filter(|t| *t != "pg_default")
    }
}

fn refuse(schema: &str, problem: String) -> PgError {
    PgError::Usage(format!(
        "the data set is not fit to run against: schema {schema}: {problem}"
    ))
}

/// Verifies every schema of the data set (size, where it is) and the read plan of the
/// schemas `used`; refuses what would mislead, returns the rest as warnings.
pub async fn data_set(
    client: &Client,
    plan: &DataSetPlan,
    used: &[String],
    read_path: ReadPath,
    work_unit: u64,
) -> Result<Verified> {
    let names = plan.schema_names();
    let marks = marker::inspect_schemas(client, &names).await?;
    let mut tables = Vec::new();
    let mut warnings = Vec::new();
    let default_ts = default_tablespace(client).await?;
    for (name, own) in &marks {
        let marked_ts = match own {
            Ownership::Dbio(m) => m.tablespace.clone(),
            _ => None,
        };
        let facts = table(client, plan, name, &mut warnings).await?;
        // Where the table should be: the configured tablespace, else the one setup put it in.
        let expected = plan.tablespace.clone().or(marked_ts);
        let expected_name = expected.clone().unwrap_or_else(|| default_ts.clone());
        for (what, actual) in [
            ("table", Some(facts.tablespace.as_str())),
            ("index", facts.index_tablespace.as_deref()),
        ] {
            if let Some(actual) = actual
                && actual != expected_name
            {
                warnings.push(format!(
                    "{name}.{} ({what}) is in tablespace {actual} (pg_class.reltablespace), not in {} as {}: \
                     it was moved outside dbio (ALTER ... SET TABLESPACE); the figures are for {actual}'s device. \
                     Move it back, or rebuild with `dbio setup --force` in the tablespace you mean to measure",
                    if what == "table" { sql::TABLE } else { sql::INDEX },
                    expected_name,
                    if plan.tablespace.is_some() {
                        "data.tablespace asks"
                    } else {
                        "dbio's mark says"
                    }
                ));
            }
        }
        if let Some(c) = key_correlation(client, name).await? {
            judge_order(c, "pg_stats.correlation, from the last ANALYZE")
                .map_err(|e| refuse(name, e.to_string()))?;
        }
        tables.push(facts);
    }
    let read = verify_plan(client, used, read_path, work_unit).await?;
    Ok(Verified {
        tables,
        read_path: read,
        warnings,
    })
}

async fn default_tablespace(client: &Client) -> Result<String> {
    let row = client
        .query_one(sql::DEFAULT_TABLESPACE, &[])
        .await
        .map_err(|e| PgError::from_db("reading the database's default tablespace", &e))?;
    col(&row, 0, "the database's default tablespace")
}

/// One table's size and place; refuses a table smaller than the scale.
async fn table(
    client: &Client,
    plan: &DataSetPlan,
    name: &str,
    warnings: &mut Vec<String>,
) -> Result<TableFacts> {
    let what = format!("the size and tablespace of {name}.cf1");
    let Some(row) = client
        .query_opt(sql::TABLE_FACTS, &[&name])
        .await
        .map_err(|e| PgError::from_db(format!("reading {what}"), &e))?
    else {
        return Err(refuse(
            name,
            "table cf1 is missing (dropped outside dbio): run `dbio setup` to rebuild it".into(),
        ));
    };
    let bytes: i64 = col(&row, 2, &what)?;
    let reltuples: f64 = col(&row, 1, &what)?;
    let facts = TableFacts {
        schema: name.to_string(),
        tablespace: col::<Option<String>>(&row, 3, &what)?.unwrap_or_default(),
        index_tablespace: col(&row, 4, &what)?,
        blocks: (bytes.max(0) as u64) / plan.block_size.max(1),
        // -1 (14+) or 0 with no pages: never vacuumed or analyzed.
        rows_estimate: (reltuples >= 0.0).then_some(reltuples),
        owner: col(&row, 5, &what)?,
    };
    let scale = plan.scale_blocks;
    let rebuild = "rebuild it with `dbio setup --force`";
    if facts.blocks < scale {
        return Err(refuse(
            name,
            format!(
                "cf1 has {} blocks on disk (pg_relation_size) but the data set has {scale} rows of one block each: \
                 it was truncated or rewritten outside dbio; {rebuild}",
                facts.blocks
            ),
        ));
    }
    let deleted: i64 = col(&row, 8, &what)?;
    // A table as setup left it (no row deleted or dead by its statistics, reltuples exactly
    // the scale: float4, exact to 2^-23) needs no probe; the probes are index scans, which
    // would show in idx_scan outside the window. Otherwise three exact lookups.
    let exact = facts
        .rows_estimate
        .is_some_and(|r| (r - scale as f64).abs() <= (scale as f64 / 8_388_608.0).max(0.5));
    let (first, last, beyond): (bool, bool, bool) = if deleted == 0 && exact {
        (true, true, false)
    } else {
        let what = format!("the key probes of {name}.cf1");
        let probe = client
            .query_one(&sql::key_probes(name), &[&(scale as i64)])
            .await
            .map_err(|e| PgError::from_db(format!("probing the keys of {name}.cf1"), &e))?;
        (
            col(&probe, 0, &what)?,
            col(&probe, 1, &what)?,
            col(&probe, 2, &what)?,
        )
    };
    if !first || !last {
        let missing: Vec<String> = [(first, 1), (last, scale)]
            .iter()
            .filter(|(found, _)| !found)
            .map(|(_, k)| k.to_string())
            .collect();
        return Err(refuse(
            name,
            format!(
                "key {} of 1..{scale} is missing from cf1: rows were deleted outside dbio; {rebuild}",
                missing.join(" and ")
            ),
        ));
    }
    if let Some(rows) = facts.rows_estimate {
        if rows < scale as f64 * MIN_ROWS_SHARE {
            return Err(refuse(
                name,
                format!(
                    "cf1 holds about {rows:.0} rows (pg_class.reltuples, after VACUUM/ANALYZE) of the {scale} it was loaded with: \
                     rows were deleted outside dbio; {rebuild}"
                ),
            ));
        }
        if rows > scale as f64 * MAX_ROWS_SHARE || beyond {
            warnings.push(format!(
                "{name}.cf1 holds about {rows:.0} rows (pg_class.reltuples) for a scale of {scale}{}: rows were added outside dbio; \
                 reads draw keys 1..{scale} only",
                if beyond { format!(", key {} among them", scale + 1) } else { String::new() }
            ));
        }
    } else if beyond {
        warnings.push(format!(
            "{name}.cf1 holds key {} beyond its scale of {scale}: rows were added outside dbio",
            scale + 1
        ));
    }
    if facts.blocks as f64 > scale as f64 * MAX_BLOCKS_SHARE + 8.0 {
        warnings.push(format!(
            "{name}.cf1 has {} blocks on disk (pg_relation_size) for {scale} rows of one block each: the heap grew \
             (updates that were not HOT, or inserts); reads still visit work_unit blocks, but a VACUUM FULL or \
             `dbio setup --force` brings it back to the scale",
            facts.blocks
        ));
    }
    Ok(facts)
}

/// The nodes of an EXPLAIN (FORMAT JSON) plan, outermost first, and the node that scans cf1.
fn plan_nodes(json: &serde_json::Value) -> (Vec<String>, Option<String>, bool) {
    fn walk(
        node: &serde_json::Value,
        out: &mut Vec<String>,
        scan: &mut Option<String>,
        uses_index: &mut bool,
    ) {
        let text = |k: &str| node.get(k).and_then(|v| v.as_str());
        let Some(kind) = text("Node Type") else {
            return;
        };
        let mut label = kind.to_string();
        if let Some(index) = text("Index Name") {
            label.push_str(&format!(" using {index}"));
            *uses_index |= index == sql::INDEX;
        }
        if let Some(rel) = text("Relation Name") {
            label.push_str(&format!(" on {rel}"));
            if rel == sql::TABLE && scan.is_none() {
                *scan = Some(kind.to_string());
            }
        }
        out.push(label);
        if let Some(children) = node.get("Plans").and_then(|p| p.as_array()) {
            for c in children {
                walk(c, out, scan, uses_index);
            }
        }
    }
    let mut out = Vec::new();
    let mut scan = None;
    let mut uses_index = false;
    if let Some(root) = json.get(0).and_then(|p| p.get("Plan")) {
        walk(root, &mut out, &mut scan, &mut uses_index);
    }
    (out, scan, uses_index)
}

/// What a plan says against the path asked for: `Err` with the refusal's reason.
fn judge_plan(
    path: ReadPath,
    scan: Option<&str>,
    uses_index: bool,
) -> std::result::Result<(), PlanMismatch> {
    match scan {
        Some(s) if s == path.scan_node() && uses_index => Ok(()),
        Some(s) if s == path.scan_node() => Err(PlanMismatch::OtherIndex(s.to_string())),
        Some(s) => Err(PlanMismatch::OtherScan(s.to_string())),
        None => Err(PlanMismatch::NoScan),
    }
}

/// How a reader's plan differs from the read path asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanMismatch {
    /// The scan asked for, over another index than dbio's.
    #[error("its {0} does not use dbio's index {index}", index = sql::INDEX)]
    OtherIndex(String),
    /// Another scan than the one asked for.
    #[error("it reads the table with a {0}")]
    OtherScan(String),
    #[error("no node of it reads table cf1")]
    NoScan,
}

/// The reader's plan on a schema is not the read path asked for: the plan, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the reader's plan on {schema}.cf1 is `{}` (the generic plan of the prepared read, EXPLAIN EXECUTE): {why}, \
     not the {} that run.read_path {} asks for. Look for enable_indexscan, enable_bitmapscan, enable_seqscan or \
     random_page_cost in the DSN's options and in ALTER ROLE/DATABASE ... SET, then ANALYZE {}.cf1; or choose \
     the other path (--read-path {})",
    nodes.join(" > "),
    path.scan_node(),
    path.as_str(),
    sql::quote_ident(schema),
    match path {
        ReadPath::Index => "bitmap",
        ReadPath::Bitmap => "index",
    }
)]
pub struct PlanRefused {
    pub schema: String,
    /// The plan's nodes, outermost first.
    pub nodes: Vec<String>,
    pub path: ReadPath,
    pub why: PlanMismatch,
}

/// The generic plan of the sessions' read on `schema`.cf1 (prepared as they prepare it,
/// under their settings, `EXPLAIN EXECUTE` over `work_unit` keys): its nodes, outermost
/// first, and the node that reads the table; or why it is not the path asked for.
pub async fn read_plan(
    client: &Client,
    schema: &str,
    path: ReadPath,
    work_unit: u64,
) -> Result<std::result::Result<(Vec<String>, String), PlanRefused>> {
    let what = format!("explaining the read of {schema}.cf1");
    client
        .batch_execute(&sql::prepare_verify_read(schema, path))
        .await
        .map_err(|e| PgError::from_db(&what, &e))?;
    let explained = client
        .simple_query(&sql::explain_verify_read(work_unit))
        .await;
    // Rolled back and deallocated whatever the EXPLAIN said: the SET LOCALs end with it.
    let cleaned = client.batch_execute(sql::DEALLOCATE_VERIFY_READ).await;
    let text: String = explained
        .map_err(|e| PgError::from_db(&what, &e))?
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    cleaned.map_err(|e| PgError::from_db(&what, &e))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| PgError::Failed {
        context: what.clone(),
        message: format!("EXPLAIN's JSON could not be read: {e}"),
        hint: None,
    })?;
    let (nodes, scan, uses_index) = plan_nodes(&json);
    Ok(match judge_plan(path, scan.as_deref(), uses_index) {
        Ok(()) => Ok((nodes, scan.unwrap_or_default())),
        Err(why) => Err(PlanRefused {
            schema: schema.to_string(),
            nodes,
            path,
            why,
        }),
    })
}

async fn verify_plan(
    client: &Client,
    used: &[String],
    path: ReadPath,
    work_unit: u64,
) -> Result<ReadPathInfo> {
    let mut shown: Option<(Vec<String>, String)> = None;
    for schema in used {
        let plan = read_plan(client, schema, path, work_unit)
            .await?
            .map_err(|e| PgError::Usage(e.to_string()))?;
        if shown.is_none() {
            shown = Some(plan);
        }
    }
    let names: Vec<String> = [
        "io_method",
        "effective_io_concurrency",
        "io_combine_limit",
        sql::INDEX_PREFETCH,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows = client
        .query(sql::SETTINGS, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading the I/O settings", &e))?;
    let mut setting = std::collections::BTreeMap::new();
    for r in &rows {
        let name: String = col(r, 0, "the I/O settings")?;
        let value: Option<String> = col(r, 1, "the I/O settings")?;
        setting.insert(name, value);
    }
    let (nodes, scan) = shown.unwrap_or_default();
    Ok(ReadPathInfo {
        path,
        plan: nodes.join(" > "),
        scan,
        source: format!(
            "EXPLAIN EXECUTE of the prepared read over {work_unit} keys, generic plan (plan_cache_mode = force_generic_plan, {}), \
             for each schema the sessions use",
            match path {
                ReadPath::Index => "enable_bitmapscan = off",
                ReadPath::Bitmap => "enable_indexscan = off",
            }
        ),
        io_method: setting.remove("io_method").flatten(),
        effective_io_concurrency: setting.remove("effective_io_concurrency").flatten(),
        io_combine_limit: setting.remove("io_combine_limit").flatten(),
        // Pinned off for the index path by every session (sql::read_path_settings).
        index_prefetch: setting
            .remove(sql::INDEX_PREFETCH)
            .flatten()
            .map(|v| match path {
                ReadPath::Index => {
                    format!("off (pinned by dbio for read_path index; the server's setting is {v})")
                }
                ReadPath::Bitmap => v,
            }),
    })
}

async fn vacuumed_since(client: &Client, schema: &str, since: &str) -> Result<bool> {
    let what = format!("last_vacuum of {schema}.cf1");
    let row = client
        .query_one(sql::VACUUMED_SINCE, &[&schema, &since])
        .await
        .map_err(|e| PgError::from_db(format!("reading {what}"), &e))?;
    col(&row, 0, &what)
}

/// VACUUM (FREEZE, ANALYZE) of a table changed since its last VACUUM, as
/// `maintenance::vacuum_if_changed`, then proof that it ran: pg_stat_user_tables.last_vacuum
/// is at or after the server's clock just before it. A VACUUM the server skipped (PostgreSQL
/// only warns: "skipping
/// \"cf1\" --- only table or database owner can vacuum it"; 16+: "permission denied to vacuum")
/// becomes a warning naming the owner. Returns whether a VACUUM ran (a CHECKPOINT follows).
pub async fn vacuum_checked(
    client: &Client,
    schema: &str,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<bool> {
    let row = client
        .query_one(sql::SERVER_CLOCK, &[])
        .await
        .map_err(|e| PgError::from_db("reading the server's clock", &e))?;
    let before: String = col(&row, 0, "the server's clock")?;
    let Some(note) = maintenance::vacuum_if_changed(client, schema).await? else {
        return Ok(false);
    };
    let started = Instant::now();
    loop {
        if vacuumed_since(client, schema, &before).await? {
            notes.push(note);
            return Ok(true);
        }
        if started.elapsed() >= VACUUM_COUNT_WAIT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = client.batch_execute(sql::CLEAR_STATS_SNAPSHOT).await;
    }
    let what = format!("the owner of {schema}.cf1");
    let row = client
        .query_opt(sql::TABLE_FACTS, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("reading {what}"), &e))?;
    let (owner, user): (String, String) = match &row {
        Some(r) => (col(r, 5, &what)?, col(r, 6, &what)?),
        None => ("(unknown)".into(), "(unknown)".into()),
    };
    let table = format!("{}.cf1", sql::quote_ident(schema));
    warnings.push(format!(
        "VACUUM of {schema}.cf1 did not run (pg_stat_user_tables.last_vacuum did not move; the server skips it: \
         only table or database owner can vacuum it): the table is owned by role {owner} and this run connects as {user}. \
         The table changed since its last VACUUM, so reads may write (hint bits, pruning) and autovacuum may run inside \
         the window. Run as {owner}, or ALTER TABLE {table} OWNER TO {user}, or on PostgreSQL 17+ GRANT MAINTAIN ON TABLE {table} TO {user}"
    ));
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> (Vec<String>, Option<String>, bool) {
        plan_nodes(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn index_and_bitmap_plans_are_told_apart() {
        let index = plan(
            r#"[{"Plan": {"Node Type": "Aggregate", "Plans": [{"Node Type": "Index Scan",
                "Index Name": "i_cf1", "Relation Name": "cf1"}]}}]"#,
        );
        assert_eq!(
            index.0.join(" > "),
            "Aggregate > Index Scan using i_cf1 on cf1"
        );
        assert_eq!(
            judge_plan(ReadPath::Index, index.1.as_deref(), index.2),
            Ok(())
        );
        let e = judge_plan(ReadPath::Bitmap, index.1.as_deref(), index.2).unwrap_err();
        assert!(e.to_string().contains("Index Scan"), "{e}");

        let bitmap = plan(
            r#"[{"Plan": {"Node Type": "Aggregate", "Plans": [{"Node Type": "Bitmap Heap Scan",
                "Relation Name": "cf1", "Plans": [{"Node Type": "Bitmap Index Scan", "Index Name": "i_cf1"}]}]}}]"#,
        );
        assert_eq!(
            bitmap.0.join(" > "),
            "Aggregate > Bitmap Heap Scan on cf1 > Bitmap Index Scan using i_cf1"
        );
        assert_eq!(bitmap.1.as_deref(), Some("Bitmap Heap Scan"));
        assert_eq!(
            judge_plan(ReadPath::Bitmap, bitmap.1.as_deref(), bitmap.2),
            Ok(())
        );
        assert!(judge_plan(ReadPath::Index, bitmap.1.as_deref(), bitmap.2).is_err());

        let seq = plan(
            r#"[{"Plan": {"Node Type": "Aggregate", "Plans": [{"Node Type": "Seq Scan", "Relation Name": "cf1"}]}}]"#,
        );
        let e = judge_plan(ReadPath::Index, seq.1.as_deref(), seq.2).unwrap_err();
        assert!(e.to_string().contains("Seq Scan"), "{e}");
        // Another index of the user's on the key is not dbio's read.
        let other = plan(
            r#"[{"Plan": {"Node Type": "Index Scan", "Index Name": "mine", "Relation Name": "cf1"}}]"#,
        );
        assert!(
            judge_plan(ReadPath::Index, other.1.as_deref(), other.2)
                .unwrap_err()
                .to_string()
                .contains("i_cf1")
        );
        assert!(judge_plan(ReadPath::Index, None, false).is_err());
    }
}
