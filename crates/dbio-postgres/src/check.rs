//! `dbio check`: verifies each schema of the data set is what a SLOB run needs: complete,
//! the requested number of rows, one row per block (distinct ctid block numbers), keys in a
//! random physical order, a valid index that the reader's range query uses (the generic
//! plan a run's sessions use, verified as a run's preflight verifies it, so check and run
//! agree), and a table vacuumed and analyzed since its rows last changed.

use dbio_core::config::ReadPath;
use dbio_core::dataset::{CheckReport, DataSetPlan, SchemaCheck};
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::maintenance::{self, TableState};
use crate::marker::{self, Ownership};
use crate::server::server_info;
use crate::{sql, verify};

/// How the run's sessions read, for the plan check: `run.read_path` and `run.work_unit`.
#[derive(Debug, Clone, Copy)]
pub struct ReadShape {
    pub path: ReadPath,
    pub work_unit: u64,
}

pub async fn check(target: &Target, plan: &DataSetPlan, read: ReadShape) -> Result<CheckReport> {
    let client = target.connect("dbio-check").await?;
    crate::server::same_blocks(plan, &server_info(&client).await?)?;
    let names = plan.schema_names();
    let owners = marker::inspect_schemas(&client, &names).await?;
    let mut schemas = Vec::new();
    for (name, own) in owners {
        schemas.push(check_schema(&client, plan, &name, own, read).await?);
    }
    Ok(CheckReport {
        schemas,
        missing_rights: Vec::new(),
    })
}

async fn check_schema(
    client: &Client,
    plan: &DataSetPlan,
    name: &str,
    own: Ownership,
    read: ReadShape,
) -> Result<SchemaCheck> {
    let mut c = SchemaCheck {
        schema: name.to_string(),
        facts: Vec::new(),
        problems: Vec::new(),
    };
    let id = match marker::judge(&own, plan, name) {
        Err(problem) => {
            c.problems.push(problem);
            return Ok(c);
        }
        Ok((id, problems)) => {
            c.problems.extend(problems);
            id
        }
    };
    if let Some(problem) = marker::table_problem(marker::table(client, name, Some(&id)).await?) {
        c.problems.push(problem);
        return Ok(c);
    }

    let row = client
        .query_one(&sql::rows_and_blocks(name), &[])
        .await
        .map_err(|e| PgError::from_db(format!("counting the rows of {name}.cf1"), &e))?;
    let what = format!("the rows of {name}.cf1");
    let rows = marker::col::<i64>(&row, 0, &what)?.max(0) as u64;
    let blocks = marker::col::<i64>(&row, 1, &what)?.max(0) as u64;
    if rows == plan.scale_blocks {
        c.facts.push(format!("rows {rows}/{}", plan.scale_blocks));
    } else {
        c.problems
            .push(format!("rows {rows}, expected {}", plan.scale_blocks));
    }
    if blocks == rows {
        c.facts.push(format!("blocks {blocks} (one row per block)"));
    } else {
        c.problems.push(format!(
            "{rows} rows in {blocks} blocks: not one row per block"
        ));
    }
    if let Some(corr) = marker::col::<Option<f64>>(&row, 2, &what)? {
        match verify::judge_order(corr, "over every row") {
            Ok(()) => c
                .facts
                .push(format!("keys in random order (correlation {corr:.2})")),
            Err(e) => c.problems.push(e.to_string()),
        }
    }

    let Some(state) = maintenance::table_state(client, name).await? else {
        c.problems
            .push("table cf1 vanished during the check".into());
        return Ok(c);
    };
    let TableState {
        pages,
        all_visible,
        analyzed,
        index_valid,
        dead_rows: dead,
    } = state;
    let vacuum_hint = format!(
        "run VACUUM (FREEZE, ANALYZE) {}.cf1 or `dbio setup --force`",
        sql::quote_ident(name)
    );
    if all_visible >= pages && pages > 0 {
        c.facts
            .push(format!("all-visible {all_visible}/{pages} pages"));
    } else {
        c.problems.push(format!(
            "only {all_visible} of {pages} pages all-visible (rows changed since the last VACUUM): {vacuum_hint}"
        ));
    }
    if dead > 0 {
        c.problems.push(format!("{dead} dead rows: {vacuum_hint}"));
    }
    if analyzed {
        c.facts.push("analyzed".into());
    } else {
        c.problems.push(format!("never analyzed: {vacuum_hint}"));
    }
    if !index_valid {
        c.problems.push(format!(
            "index {} is missing or invalid: rerun `dbio setup --force`",
            sql::INDEX
        ));
        return Ok(c);
    }
    // The plan the run's sessions use: the generic plan of the prepared read under the
    // read path's settings (seen: at the smallest scale, 64 blocks, a custom plan over all
    // 64 keys chose no index, so check failed while the run verified its index plan).
    match verify::read_plan(
        client,
        name,
        read.path,
        read.work_unit.min(plan.scale_blocks),
    )
    .await?
    {
        Ok((nodes, _)) => c.facts.push(format!(
            "index {} valid and used ({})",
            sql::INDEX,
            nodes.join(" > ")
        )),
        Err(why) => c.problems.push(why.to_string()),
    }
    Ok(c)
}
