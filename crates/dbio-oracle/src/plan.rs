//! The reader statement's plan, as the server runs it: V$SQL_PLAN of its cursors, judged the
//! way PostgreSQL's EXPLAIN is. SLOB's read is an index range scan on I_CF1 with one table
//! access by rowid per key, so each key is a single-block read; a full scan, a fast full or skip
//! scan of the index, or a parallel plan reads the table another way (multiblock or direct path
//! reads), and a run measured so would be recorded under the wrong name. Those plans are
//! refused. Batched table access (12c+ `TABLE ACCESS BY INDEX ROWID BATCHED`) is an index range
//! scan whose table blocks are read as vectors ('db file parallel read'): allowed, with a
//! warning naming how to turn it off.

use crate::OracleError;
use crate::sql::{INDEX, TABLE};

/// One row of V$SQL joined with V$SQL_PLAN (`sql::sql_plan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRow {
    pub inst_id: u32,
    pub sql_id: String,
    pub child: u32,
    pub plan_hash: i64,
    pub parsing_schema: String,
    pub id: u32,
    pub operation: String,
    pub options: String,
    pub owner: String,
    pub name: String,
}

/// One cursor's plan: its steps in V$SQL_PLAN.ID order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub inst_id: u32,
    pub sql_id: String,
    pub child: u32,
    pub plan_hash: i64,
    pub parsing_schema: String,
    pub steps: Vec<PlanRow>,
}

/// The rows grouped per cursor (instance, sql_id, child), in the order they came.
pub fn plans(rows: &[PlanRow]) -> Vec<Plan> {
    let mut out: Vec<Plan> = Vec::new();
    for r in rows {
        let same = out
            .last()
            .is_some_and(|p| p.inst_id == r.inst_id && p.sql_id == r.sql_id && p.child == r.child);
        if !same {
            out.push(Plan {
                inst_id: r.inst_id,
                sql_id: r.sql_id.clone(),
                child: r.child,
                plan_hash: r.plan_hash,
                parsing_schema: r.parsing_schema.clone(),
                steps: Vec::new(),
            });
        }
        if let Some(p) = out.last_mut() {
            p.steps.push(r.clone());
        }
    }
    for p in &mut out {
        p.steps.sort_by_key(|s| s.id);
    }
    out
}

/// A plan found fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `SORT AGGREGATE > TABLE ACCESS BY INDEX ROWID USER1.CF1 > INDEX RANGE SCAN USER1.I_CF1`
    pub plan: String,
    /// Where the plan came from: `V$SQL_PLAN (sql_id ..., child ..., plan hash ...)`.
    pub source: String,
    /// The table is read by batched rowid access ('db file parallel read').
    pub batched: bool,
}

fn step(s: &PlanRow) -> String {
    let mut out = s.operation.trim().to_string();
    if !s.options.trim().is_empty() {
        out.push(' ');
        out.push_str(s.options.trim());
    }
    if !s.name.trim().is_empty() {
        out.push(' ');
        if !s.owner.trim().is_empty() {
            out.push_str(s.owner.trim());
            out.push('.');
        }
        out.push_str(s.name.trim());
    }
    out
}

/// The plan as one line, the statement's own step left out.
pub fn render(p: &Plan) -> String {
    p.steps
        .iter()
        .filter(|s| s.operation.trim() != "SELECT STATEMENT")
        .map(step)
        .collect::<Vec<_>>()
        .join(" > ")
}

/// Judges one cursor of `user`'s reader statement: Ok when it is an index range scan on
/// I_CF1 with table access by rowid to CF1, else a usage error saying why not (it names the
/// plan).
pub fn judge(p: &Plan, user: &str) -> Result<Verdict, OracleError> {
    let rendered = render(p);
    let source = format!(
        "V$SQL_PLAN (instance {}, sql_id {}, child {}, plan hash {}, parsed as {})",
        p.inst_id, p.sql_id, p.child, p.plan_hash, p.parsing_schema
    );
    let on = |s: &PlanRow, object: &str| s.owner.trim() == user && s.name.trim() == object;
    let range = p
        .steps
        .iter()
        .any(|s| s.operation == "INDEX" && s.options.trim() == "RANGE SCAN" && on(s, INDEX));
    let table: Vec<&PlanRow> = p
        .steps
        .iter()
        .filter(|s| s.operation == "TABLE ACCESS" && on(s, TABLE))
        .collect();
    let by_rowid = |s: &&PlanRow| {
        matches!(
            s.options.trim(),
            "BY INDEX ROWID" | "BY INDEX ROWID BATCHED"
        )
    };
    let parallel = p.steps.iter().any(|s| s.operation.starts_with("PX "));
    let refuse = |why: &str| {
        Err(OracleError::Usage(format!(
            "the reader statement of {user} is not an index range scan on {INDEX}: {why}. Its plan ({source}): \
             {rendered}. Reads through this plan are not SLOB's single-block reads, so dbio does not measure \
             them: regather the statistics (DBMS_STATS.GATHER_TABLE_STATS, or `dbio setup --force`), and check \
             optimizer_index_cost_adj, the table's DEGREE and any SQL plan baseline or profile on the statement"
        )))
    };
    if parallel {
        return refuse("it runs in parallel (PX), which reads the table by direct path");
    }
    if !range {
        return refuse(&format!("no INDEX RANGE SCAN of {user}.{INDEX}"));
    }
    if table.is_empty() || !table.iter().all(by_rowid) {
        return refuse(&format!("{user}.{TABLE} is not read by index rowid only"));
    }
    Ok(Verdict {
        batched: table
            .iter()
            .any(|s| s.options.trim() == "BY INDEX ROWID BATCHED"),
        plan: rendered,
        source,
    })
}

/// The warning for a batched plan.
pub fn batched_warning(user: &str, v: &Verdict) -> String {
    format!(
        "the reader statement of {user} reads {TABLE} by batched rowid access ({}): Oracle reads its table blocks \
         as vectors ('db file parallel read'), not as SLOB's single-block reads; set \
         _optimizer_batch_table_access_by_rowid = FALSE (or the hint NO_BATCH_TABLE_ACCESS_BY_ROWID) and SLOB's \
         _db_block_prefetch_limit=0, _db_block_prefetch_quota=0, _db_file_noncontig_mblock_read_count=0 to force them",
        v.plan
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u32, operation: &str, options: &str, owner: &str, name: &str) -> PlanRow {
        PlanRow {
            inst_id: 1,
            sql_id: "7h35uxf5uhmm1".into(),
            child: 0,
            plan_hash: 2_415_362_214,
            parsing_schema: "USER1".into(),
            id,
            operation: operation.into(),
            options: options.into(),
            owner: owner.into(),
            name: name.into(),
        }
    }

    /// V$SQL_PLAN of SLOB's read on 11.2: SELECT STATEMENT, SORT AGGREGATE, TABLE ACCESS BY
    /// INDEX ROWID on CF1, INDEX RANGE SCAN on I_CF1.
    fn slob_plan(table_options: &str) -> Vec<PlanRow> {
        vec![
            row(0, "SELECT STATEMENT", " ", " ", " "),
            row(1, "SORT", "AGGREGATE", " ", " "),
            row(2, "TABLE ACCESS", table_options, "USER1", "CF1"),
            row(3, "INDEX", "RANGE SCAN", "USER1", "I_CF1"),
        ]
    }

    #[test]
    fn an_index_range_scan_is_fit() {
        let p = plans(&slob_plan("BY INDEX ROWID"));
        assert_eq!(p.len(), 1);
        let v = judge(&p[0], "USER1").unwrap();
        assert_eq!(
            v.plan,
            "SORT AGGREGATE > TABLE ACCESS BY INDEX ROWID USER1.CF1 > INDEX RANGE SCAN USER1.I_CF1"
        );
        assert!(!v.batched);
        assert!(
            v.source
                .contains("sql_id 7h35uxf5uhmm1, child 0, plan hash 2415362214")
        );
        let b = judge(&plans(&slob_plan("BY INDEX ROWID BATCHED"))[0], "USER1").unwrap();
        assert!(b.batched);
        let w = batched_warning("USER1", &b);
        assert!(
            w.contains("db file parallel read")
                && w.contains("_optimizer_batch_table_access_by_rowid"),
            "{w}"
        );
    }

    // Regression: Oracle had no read-plan check; full-scan reads went unrecorded as such.
    #[test]
    fn a_full_scan_or_a_parallel_plan_is_refused() {
        let full = vec![
            row(0, "SELECT STATEMENT", " ", " ", " "),
            row(1, "SORT", "AGGREGATE", " ", " "),
            row(2, "TABLE ACCESS", "FULL", "USER1", "CF1"),
        ];
        let e = judge(&plans(&full)[0], "USER1").unwrap_err().to_string();
        assert!(
            e.contains("no INDEX RANGE SCAN of USER1.I_CF1")
                && e.contains("TABLE ACCESS FULL USER1.CF1")
                && e.contains("DBMS_STATS"),
            "{e}"
        );
        let ffs = vec![
            row(1, "SORT", "AGGREGATE", " ", " "),
            row(2, "INDEX", "FAST FULL SCAN", "USER1", "I_CF1"),
        ];
        assert!(judge(&plans(&ffs)[0], "USER1").is_err());
        let mut px = slob_plan("BY INDEX ROWID");
        px.insert(1, row(1, "PX COORDINATOR", " ", " ", " "));
        assert!(
            judge(&plans(&px)[0], "USER1")
                .unwrap_err()
                .to_string()
                .contains("parallel")
        );
        // The range scan of another user's index does not count.
        assert!(judge(&plans(&slob_plan("BY INDEX ROWID"))[0], "USER2").is_err());
    }

    #[test]
    fn cursors_are_judged_one_by_one() {
        let mut rows = slob_plan("BY INDEX ROWID");
        let mut other: Vec<PlanRow> = slob_plan("FULL")
            .into_iter()
            .map(|mut r| {
                r.child = 1;
                r
            })
            .collect();
        other.retain(|r| r.operation != "INDEX");
        rows.extend(other);
        let p = plans(&rows);
        assert_eq!(p.len(), 2);
        assert!(judge(&p[0], "USER1").is_ok());
        assert!(judge(&p[1], "USER1").is_err());
    }
}
