//! `dbio teardown`: drops what dbio created and nothing else. Only schemas carrying dbio's mark
//! are considered; in each, only the marked table (its index goes with it); the schema itself
//! is dropped without CASCADE, so one that still holds someone else's objects stays.

use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::marker;
use crate::sql;

/// A dbio schema and what else it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Droppable {
    pub schema: String,
    /// Objects in the schema that dbio did not create; non-empty means the schema stays.
    pub foreign_objects: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownOutcome {
    pub dropped: Vec<String>,
    /// Schemas whose dbio table was dropped but which stay because of foreign objects.
    pub kept: Vec<Droppable>,
}

/// The dbio schemas `<prefix><n>` of the target database.
pub async fn plan(target: &Target, prefix: &str) -> Result<Vec<Droppable>> {
    let client = target.connect("dbio-teardown").await?;
    list(&client, prefix).await
}

async fn list(client: &Client, prefix: &str) -> Result<Vec<Droppable>> {
    let rows = client
        .query(sql::MARKED_SCHEMAS, &[&prefix])
        .await
        .map_err(|e| PgError::from_db("listing dbio's schemas", &e))?;
    let mut out = Vec::new();
    for r in rows {
        let schema: String = r.get(0);
        let comment: Option<String> = r.get(1);
        if !matches!(
            marker::parse_comment(comment.as_deref()),
            marker::Ownership::Dbio(_)
        ) {
            continue;
        }
        let foreign: Vec<String> = client
            .query(sql::FOREIGN_OBJECTS, &[&schema])
            .await
            .map_err(|e| PgError::from_db(format!("listing the objects of {schema}"), &e))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        out.push(Droppable {
            schema,
            foreign_objects: foreign,
        });
    }
    Ok(out)
}

pub async fn teardown(target: &Target, prefix: &str) -> Result<TeardownOutcome> {
    let client = target.connect("dbio-teardown").await?;
    let mut outcome = TeardownOutcome::default();
    for d in list(&client, prefix).await? {
        if marker::table_ownership(&client, &d.schema).await? == Some(true) {
            client
                .batch_execute(&sql::drop_table(&d.schema))
                .await
                .map_err(|e| PgError::from_db(format!("dropping {}.cf1", d.schema), &e))?;
        }
        if !d.foreign_objects.is_empty() {
            outcome.kept.push(d);
            continue;
        }
        match client.batch_execute(&sql::drop_schema(&d.schema)).await {
            Ok(()) => outcome.dropped.push(d.schema),
            // 2BP01 dependent_objects_still_exist: something we did not list (a function,
            // a type) lives there; leave the schema.
            Err(e) if e.as_db_error().is_some_and(|x| x.code().code() == "2BP01") => {
                let detail = e
                    .as_db_error()
                    .and_then(|x| x.detail())
                    .unwrap_or("")
                    .to_string();
                outcome.kept.push(Droppable {
                    schema: d.schema,
                    foreign_objects: vec![detail],
                });
            }
            Err(e) => {
                return Err(PgError::from_db(
                    format!("dropping schema {}", d.schema),
                    &e,
                ));
            }
        }
    }
    Ok(outcome)
}
