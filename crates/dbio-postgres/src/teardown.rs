//! `dbio teardown`: drops one data set, what dbio created and nothing else.
//!
//! The data set of prefix P is the schemas whose mark says prefix P and whose name is P
//! followed by the schema number in the mark: `--prefix ts` never takes `ts21`, schema 1 of
//! prefix `ts2`. In each, only the table carrying the data set's mark is dropped (its index goes
//! with it). Objects the user made on or over that table (another index, a trigger, a view)
//! stop the whole teardown before anything is dropped, unless `--drop-dependents`. A schema that
//! still holds other objects of the user stays, without dbio's mark; the others are dropped
//! without CASCADE.

use dbio_core::teardown::{self as core, ObjectNames, SchemaDrop};
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::marker::{self, Ownership, SchemaMark, Table};
use crate::sql;

/// What teardown's lines call the data set's objects on PostgreSQL.
const NAMES: ObjectNames = ObjectNames {
    schema: "schema",
    table: "cf1",
    index: "i_cf1",
};

/// Why a schema with an older dbio's mark is left.
const LEGACY: &str = "it carries the mark of an older dbio, which does not say which data set (prefix) it belongs to; \
     rebuild it with `dbio setup --force` (same --prefix and --schemas) and tear it down then, or drop it yourself";

/// A schema of the data set and what else it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Droppable {
    pub schema: String,
    pub mark: SchemaMark,
    /// Whether dbio's table is there to drop.
    pub table: bool,
    /// Objects that depend on dbio's table; non-empty stops the teardown unless the user
    /// asks for them to be dropped too.
    pub dependents: Vec<String>,
    /// Other objects in the schema that dbio did not create; non-empty means the schema stays.
    pub foreign_objects: Vec<String>,
}

/// What teardown found under a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownPlan {
    pub schemas: Vec<Droppable>,
    /// Schemas named `<prefix><n>` with the legacy mark (before data set ids), which does not say which data set
    /// they belong to: never dropped here.
    pub legacy: Vec<String>,
    /// Schemas whose mark names this prefix but disagrees with its data set's record (another
    /// role's schema with a copied mark), with why: never dropped.
    pub forged: Vec<(String, String)>,
}

impl TeardownPlan {
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty() && self.legacy.is_empty() && self.forged.is_empty()
    }

    /// The data set ids of the schemas to drop, each once (the keys of their locks).
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.schemas.iter().map(|d| d.mark.id.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The refusal when the user's objects depend on dbio's tables.
    fn dependents_refusal(&self) -> Option<PgError> {
        let blocked: Vec<String> = self
            .schemas
            .iter()
            .filter(|d| !d.dependents.is_empty())
            .map(|d| format!("{}.cf1: {}", d.schema, d.dependents.join(", ")))
            .collect();
        (!blocked.is_empty()).then(|| dependents_error(&blocked, "teardown"))
    }
}

/// The error when objects dbio did not create depend on the tables it would drop; `what` is
/// the command (`teardown`, `setup --force`).
pub fn dependents_error(blocked: &[String], what: &str) -> PgError {
    PgError::Usage(format!(
        "objects that dbio did not create depend on its tables ({}); {what} would drop them with the tables, \
         so nothing was changed. Drop or move them yourself, or rerun with --drop-dependents to drop them too",
        blocked.join("; ")
    ))
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownOutcome {
    pub dropped: Vec<String>,
    /// Schemas whose dbio table was dropped but which stay, unmarked, because of the user's
    /// objects.
    pub kept: Vec<Droppable>,
    pub legacy: Vec<String>,
    /// Schemas left alone because their mark disagrees with the data set's record.
    pub forged: Vec<(String, String)>,
}

impl From<Droppable> for SchemaDrop {
    fn from(d: Droppable) -> SchemaDrop {
        SchemaDrop {
            schema: d.schema,
            exists: true,
            table: d.table,
            dependents: d.dependents,
            foreign_objects: d.foreign_objects,
        }
    }
}

/// The schemas teardown leaves, with why: the older dbio's first, then the forged.
fn left(legacy: Vec<String>, forged: Vec<(String, String)>) -> Vec<(String, String)> {
    legacy
        .into_iter()
        .map(|s| (s, LEGACY.to_string()))
        .chain(forged)
        .collect()
}

impl From<TeardownPlan> for core::TeardownPlan {
    fn from(p: TeardownPlan) -> core::TeardownPlan {
        core::TeardownPlan {
            names: NAMES,
            schemas: p.schemas.into_iter().map(SchemaDrop::from).collect(),
            left: left(p.legacy, p.forged),
        }
    }
}

impl From<TeardownOutcome> for core::TeardownReport {
    fn from(o: TeardownOutcome) -> core::TeardownReport {
        core::TeardownReport {
            dropped: o.dropped,
            kept: o.kept.into_iter().map(SchemaDrop::from).collect(),
            left: left(o.legacy, o.forged),
            ..core::TeardownReport::new(NAMES)
        }
    }
}

/// The data set of `prefix` on the target database.
pub async fn teardown_plan(target: &Target, prefix: &str) -> Result<TeardownPlan> {
    let client = target.connect("dbio-teardown").await?;
    list(&client, prefix).await
}

async fn list(client: &Client, prefix: &str) -> Result<TeardownPlan> {
    let mut out = TeardownPlan::default();
    let numbered = |schema: &str| {
        schema
            .strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    for (schema, own) in marker::marked_schemas(client).await? {
        match own {
            Ownership::Dbio(mark) if mark.prefix == prefix && mark.names(&schema) => {
                let id = Some(mark.id.as_str());
                let (table, dependents) = match marker::table(client, &schema, id).await? {
                    Table::Ours(oid) => (true, marker::dependents(client, &schema, oid, id).await?),
                    _ => (false, Vec::new()),
                };
                // What depends on the table goes with it (or stops the teardown): not a reason
                // to keep the schema.
                let foreign_objects = marker::foreign_objects(client, &schema, id)
                    .await?
                    .into_iter()
                    .filter(|o| !dependents.contains(o))
                    .collect();
                out.schemas.push(Droppable {
                    schema,
                    mark: *mark,
                    table,
                    dependents,
                    foreign_objects,
                });
            }
            Ownership::Legacy if numbered(&schema) => out.legacy.push(schema),
            Ownership::Forged(why) if numbered(&schema) => out.forged.push((schema, why)),
            _ => {}
        }
    }
    Ok(out)
}

/// Drops the data set of `prefix`; refuses before any change when the user's objects depend
/// on its tables, unless `drop_dependents`.
pub async fn teardown(
    target: &Target,
    prefix: &str,
    drop_dependents: bool,
) -> Result<TeardownOutcome> {
    let mut client = target.connect("dbio-teardown").await?;
    let plan = list(&client, prefix).await?;
    // Never drop the tables under a run; held on this connection until teardown ends.
    crate::lock::exclusive(&client, &plan.ids(), "teardown").await?;
    if !drop_dependents && let Some(refusal) = plan.dependents_refusal() {
        return Err(refusal);
    }
    let mut outcome = TeardownOutcome {
        legacy: plan.legacy,
        forged: plan.forged,
        ..TeardownOutcome::default()
    };
    for d in plan.schemas {
        let dropped = drop_schema(&mut client, &d, drop_dependents).await?;
        match dropped {
            SchemaDropped::Dropped => outcome.dropped.push(d.schema),
            SchemaDropped::KeptFor(detail) => outcome.kept.push(Droppable {
                foreign_objects: if d.foreign_objects.is_empty() {
                    vec![detail]
                } else {
                    d.foreign_objects.clone()
                },
                ..d
            }),
        }
    }
    Ok(outcome)
}

/// What became of one schema whose table dbio dropped.
enum SchemaDropped {
    Dropped,
    /// The schema stays, unmarked, for the objects it still holds (named).
    KeptFor(String),
}

/// One schema in one transaction: dbio's table, then the schema, or (when the schema still
/// holds the user's objects) its mark.
async fn drop_schema(client: &mut Client, d: &Droppable, cascade: bool) -> Result<SchemaDropped> {
    let ctx = |what: &str| format!("{what} {}", d.schema);
    let mut tx = client
        .transaction()
        .await
        .map_err(|e| PgError::from_db(ctx("starting the teardown of"), &e))?;
    if d.table {
        tx.batch_execute(&sql::drop_table(&d.schema, cascade))
            .await
            .map_err(|e| PgError::from_db(format!("dropping {}.cf1", d.schema), &e))?;
    }
    let mut kept = (!d.foreign_objects.is_empty()).then(|| d.foreign_objects.join(", "));
    if kept.is_none() {
        let sp = tx
            .savepoint("drop_schema")
            .await
            .map_err(|e| PgError::from_db(ctx("dropping schema"), &e))?;
        match sp.batch_execute(&sql::drop_schema(&d.schema)).await {
            Ok(()) => sp
                .commit()
                .await
                .map_err(|e| PgError::from_db(ctx("dropping schema"), &e))?,
            // 2BP01 dependent_objects_still_exist: something not listed (an operator, a
            // collation) lives there; the schema stays.
            Err(e) if e.as_db_error().is_some_and(|x| x.code().code() == "2BP01") => {
                kept = Some(
                    e.as_db_error()
                        .and_then(|x| x.detail())
                        .unwrap_or("objects dbio did not create")
                        .to_string(),
                );
                sp.rollback()
                    .await
                    .map_err(|e| PgError::from_db(ctx("dropping schema"), &e))?;
            }
            Err(e) => return Err(PgError::from_db(ctx("dropping schema"), &e)),
        }
    }
    if kept.is_some() {
        // The schema stays without a mark: no later command sees a data set here.
        tx.batch_execute(&sql::unmark_schema(&d.schema))
            .await
            .map_err(|e| PgError::from_db(ctx("removing dbio's mark from"), &e))?;
    }
    tx.commit()
        .await
        .map_err(|e| PgError::from_db(ctx("committing the teardown of"), &e))?;
    Ok(kept.map_or(SchemaDropped::Dropped, SchemaDropped::KeptFor))
}
