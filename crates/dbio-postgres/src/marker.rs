//! How dbio marks what it creates, and reads the marks back.
//!
//! A schema's comment holds the data set's identity as one JSON document,
//! `{"dbio":{"format":1,"id":"…","prefix":"user","schema":1,"schemas":2,…,"state":"complete"}}`:
//! a random id shared by every schema of the data set, its prefix, this schema's number and the
//! schema count, the scale, block size, tablespace, key seed, load state, the dbio version and
//! when the data set was created. The table and index comments hold `{"dbio":{"format":1,"id":…,
//! "object":"table"}}`, so an object is dbio's only when its mark names the schema's data set.
//! Marks are parsed strictly (one key, `dbio`; every field present and typed; no other field),
//! so no human comment ("dbio is great") is taken for one, and a schema is matched to a data set
//! by the prefix and number in its mark, never by its name alone (`ts21` may be schema 21 of
//! `ts` or schema 1 of `ts2`).
//!
//! A mark is text anyone who owns a schema can write, so it counts only where it agrees with
//! the data set's own record: the schema's owner is the data set's owner (the owner of its
//! schema 1, which carries the mark of the same id; every schema of a data set is created with
//! that owner), and the mark's `owner`, when it has one, names that role. A mark copied onto
//! another role's schema is [`Ownership::Forged`]: listed, never used, never dropped.
//!
//! Earlier versions wrote `dbio {json}` without an id or prefix (the legacy mark); it is recognized, only
//! so that `setup --force` can rebuild it and every other command can say so.

use std::hash::{BuildHasher, Hasher};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use dbio_core::dataset::DataSetPlan;
use dbio_core::discover::{DataSetState, FoundDataSet};

use crate::error::{PgError, Result};
use crate::sql;

/// The version of the mark's JSON this dbio writes and reads.
pub const FORMAT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadState {
    /// Created, load not finished (or failed, or interrupted).
    Loading,
    Complete,
}

/// The identity of a data set and the state of one of its schemas, as a schema's comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaMark {
    pub format: u32,
    /// Random, one per data set: table and index marks carry it too.
    pub id: String,
    pub prefix: String,
    /// This schema's number: the schema is `<prefix><schema>`.
    pub schema: u32,
    /// Schemas in the data set when this mark was written.
    pub schemas: u32,
    pub scale_blocks: u64,
    pub block_size: u64,
    pub tablespace: Option<String>,
    pub seed: u64,
    pub state: LoadState,
    pub dbio_version: String,
    /// UTC time the data set was first created.
    pub created_at: String,
    /// UTC time this state was written.
    pub at: String,
    /// The role that owns the data set's schemas; absent in marks written before it was
    /// recorded (their owner is then the owner of schema 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A data set's identity, shared by the marks of all its schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub id: String,
    pub created_at: String,
    /// The role that owns its schemas.
    pub owner: String,
}

impl Identity {
    /// A fresh data set of `owner`: a random 128-bit id (from the OS-seeded keys of std's
    /// SipHash).
    pub fn fresh(owner: &str) -> Identity {
        let random = || {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default(),
            );
            h.finish()
        };
        Identity {
            id: format!("{:016x}{:016x}", random(), random()),
            created_at: now(),
            owner: owner.to_string(),
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl SchemaMark {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        identity: &Identity,
        prefix: &str,
        schema: u32,
        schemas: u32,
        scale_blocks: u64,
        block_size: u64,
        tablespace: Option<&str>,
        seed: u64,
        state: LoadState,
    ) -> Self {
        SchemaMark {
            format: FORMAT,
            id: identity.id.clone(),
            prefix: prefix.to_string(),
            schema,
            schemas,
            scale_blocks,
            block_size,
            tablespace: tablespace.map(str::to_string),
            seed,
            state,
            dbio_version: env!("CARGO_PKG_VERSION").to_string(),
            created_at: identity.created_at.clone(),
            at: now(),
            owner: Some(identity.owner.clone()),
        }
    }

    pub fn with_state(&self, state: LoadState) -> Self {
        SchemaMark {
            state,
            at: now(),
            ..self.clone()
        }
    }

    pub fn to_comment(&self) -> String {
        envelope(self)
    }

    /// Is this the mark of schema `<prefix><n>`, as its name says?
    pub fn names(&self, schema: &str) -> bool {
        dbio_core::dataset::schema_name(&self.prefix, self.schema) == schema
    }
}

/// The mark of a table or index: which data set it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectMark {
    pub format: u32,
    pub id: String,
    /// `table` or `index`.
    pub object: String,
}

pub fn object_comment(id: &str, object: &str) -> String {
    envelope(&ObjectMark {
        format: FORMAT,
        id: id.to_string(),
        object: object.to_string(),
    })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<T> {
    dbio: T,
}

fn envelope<T: Serialize>(inner: &T) -> String {
    // Serializing a plain struct of numbers and strings cannot fail.
    serde_json::to_string(&Envelope { dbio: inner }).unwrap_or_default()
}

/// The legacy mark, `dbio {json}` (before data set ids), parsed as strictly as the current one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct LegacyMark {
    format: u32,
    state: LoadState,
    scale_blocks: u64,
    block_size: u64,
    seed: u64,
    at: String,
}

/// What a schema's comment says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No such schema.
    Absent,
    /// Exists without dbio's mark: not ours, never touched.
    Foreign,
    /// Ours.
    Dbio(Box<SchemaMark>),
    /// A `{"dbio": …}` envelope this dbio cannot read (damaged, or written by a newer dbio):
    /// never touched, the reason is named.
    Unreadable(String),
    /// The legacy mark: ours, but it does not say which data set; only `setup --force` may
    /// rebuild it.
    Legacy,
    /// A mark that disagrees with its data set's own record (the schema's owner is not the
    /// data set's: a mark copied onto another role's schema): never used, never dropped; the
    /// reason is named.
    Forged(String),
}

/// The envelope's inner object, when the comment is exactly `{"dbio": {...}}` in format 1.
/// `Err` carries why an envelope is unreadable; `Ok(None)` means it is no envelope at all.
fn open_envelope<T: DeserializeOwned>(comment: &str) -> std::result::Result<Option<T>, String> {
    let Ok(serde_json::Value::Object(top)) = serde_json::from_str::<serde_json::Value>(comment)
    else {
        return Ok(None);
    };
    if top.len() != 1 {
        return Ok(None);
    }
    let Some(inner @ serde_json::Value::Object(fields)) = top.get("dbio") else {
        return Ok(None);
    };
    match fields.get("format").and_then(serde_json::Value::as_u64) {
        Some(f) if f == FORMAT as u64 => {}
        Some(f) => {
            return Err(format!(
                "mark format {f}, written by another dbio version (this one reads format {FORMAT})"
            ));
        }
        None => return Err("the mark has no format number".into()),
    }
    serde_json::from_value(inner.clone())
        .map(Some)
        .map_err(|e| format!("damaged mark ({e})"))
}

pub fn parse_comment(comment: Option<&str>) -> Ownership {
    let Some(c) = comment else {
        return Ownership::Foreign;
    };
    match open_envelope::<SchemaMark>(c) {
        Ok(Some(mark)) => return Ownership::Dbio(Box::new(mark)),
        Err(why) => return Ownership::Unreadable(why),
        Ok(None) => {}
    }
    match c.strip_prefix(sql::LEGACY_MARK) {
        Some(json) if serde_json::from_str::<LegacyMark>(json.trim()).is_ok() => Ownership::Legacy,
        _ => Ownership::Foreign,
    }
}

/// The data set id in a table's or index's comment, if it holds dbio's mark.
pub fn object_id(comment: Option<&str>) -> Option<String> {
    open_envelope::<ObjectMark>(comment?)
        .ok()
        .flatten()
        .map(|m| m.id)
}

/// Which data set a relation's comment says it belongs to: `id` for the current marks,
/// `None` for a legacy schema, whose objects carry the bare word `dbio`.
pub fn is_marked(comment: Option<&str>, id: Option<&str>) -> bool {
    match id {
        Some(id) => object_id(comment).as_deref() == Some(id),
        None => comment == Some(sql::LEGACY_MARK),
    }
}

/// Ownership of each named schema, in the order given; dbio's marks only where they agree
/// with their data set's record ([`trust`], over every marked schema of the database).
pub async fn inspect_schemas(
    client: &Client,
    names: &[String],
) -> Result<Vec<(String, Ownership)>> {
    let rows = client
        .query(sql::SCHEMAS_BY_NAME, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading the schemas", &e))?;
    let trusted = marked_schemas(client).await?;
    names
        .iter()
        .map(|name| {
            let found = rows
                .iter()
                .find(|r| col::<String>(r, 0, "a schema's name").is_ok_and(|n| n == *name));
            let own = match found {
                None => Ownership::Absent,
                Some(r) => match trusted.iter().find(|(n, _)| n == name) {
                    Some((_, own)) => own.clone(),
                    None => {
                        parse_comment(col::<Option<String>>(r, 1, "a schema's comment")?.as_deref())
                    }
                },
            };
            Ok((name.clone(), own))
        })
        .collect::<Result<Vec<_>>>()
}

/// Every schema of the database whose comment may be dbio's, with what its mark is worth
/// after [`trust`].
pub async fn marked_schemas(client: &Client) -> Result<Vec<(String, Ownership)>> {
    let rows = client
        .query(sql::MARKED_SCHEMAS, &[])
        .await
        .map_err(|e| PgError::from_db("listing dbio's schemas", &e))?;
    let mut found = Vec::with_capacity(rows.len());
    for r in &rows {
        let schema: String = col(r, 0, "a schema's name")?;
        let comment: Option<String> = col(r, 1, "a schema's comment")?;
        let owner: String = col(r, 2, "a schema's owner")?;
        found.push((schema, owner, parse_comment(comment.as_deref())));
    }
    Ok(trust(found))
}

/// Checks each mark against its data set's record: the data set's owner is the owner of its
/// schema 1 when that schema carries a mark of the same id (and of that owner, if it names
/// one); without it, the one owner all its schemas and marks agree on. A mark counts only on
/// a schema of that owner, and only when it names that owner or none; the others become
/// [`Ownership::Forged`]. A trusted mark's `owner` is set to the schema's owner.
pub fn trust(found: Vec<(String, String, Ownership)>) -> Vec<(String, Ownership)> {
    let claims = |m: &SchemaMark, owner: &str| m.owner.as_deref().is_none_or(|o| o == owner);
    let data_set_owner = |id: &str| -> Option<String> {
        let members: Vec<(&SchemaMark, &str)> = found
            .iter()
            .filter_map(|(schema, owner, own)| match own {
                Ownership::Dbio(m) if m.id == id && m.names(schema) => Some((&**m, owner.as_str())),
                _ => None,
            })
            .collect();
        if let Some((m, owner)) = members.iter().find(|(m, _)| m.schema == 1) {
            return claims(m, owner).then(|| owner.to_string());
        }
        let mut owners: Vec<&str> = members
            .iter()
            .map(|(_, o)| *o)
            .chain(members.iter().filter_map(|(m, _)| m.owner.as_deref()))
            .collect();
        owners.sort_unstable();
        owners.dedup();
        (owners.len() == 1).then(|| owners[0].to_string())
    };
    found
        .iter()
        .map(|(schema, owner, own)| {
            let own = match own {
                Ownership::Dbio(m) if m.names(schema) => match data_set_owner(&m.id) {
                    Some(expected) if expected == *owner && claims(m, owner) => {
                        let mut m = m.clone();
                        m.owner = Some(owner.clone());
                        Ownership::Dbio(m)
                    }
                    expected => Ownership::Forged(format!(
                        "its dbio mark names data set {} ({}), but the schema is owned by role `{owner}`{}:                          a mark copied onto another role's schema? dbio never uses nor drops it;                          remove the comment (COMMENT ON SCHEMA {} IS NULL) if it is not a dbio schema",
                        m.id,
                        match (&m.owner, &expected) {
                            (Some(o), _) => format!("of role `{o}`"),
                            (None, Some(e)) => format!("of role `{e}`"),
                            (None, None) => "whose schemas have different owners".into(),
                        },
                        match &expected {
                            Some(e) if e != owner => format!(" while its data set's schemas are owned by `{e}`"),
                            _ => String::new(),
                        },
                        sql::quote_ident(schema)
                    )),
                },
                other => other.clone(),
            };
            (schema.clone(), own)
        })
        .collect()
}

/// What a schema's mark says against the data set asked for, for `check` and `run`: `Err` when
/// the schema is not that data set's at all (the problem, and what to do), else the data set's
/// id and the problems of a schema that is (incomplete, another scale).
pub fn judge(
    own: &Ownership,
    plan: &DataSetPlan,
    name: &str,
) -> std::result::Result<(String, Vec<String>), String> {
    let mark = match own {
        Ownership::Absent => {
            return Err(format!(
                "does not exist (data.prefix {}, data.schemas {}): run `dbio setup` with the same data settings",
                plan.prefix, plan.schemas
            ));
        }
        Ownership::Foreign => {
            return Err(
                "schema exists but dbio did not create it (or a teardown kept it, unmarked, for the user's objects): \
                 choose another data.prefix"
                    .into(),
            );
        }
        Ownership::Unreadable(why) => {
            return Err(format!(
                "dbio's mark on the schema is unreadable ({why}): use the dbio version that made it, or rebuild with `dbio setup --force`"
            ));
        }
        Ownership::Legacy => {
            return Err(
                "the schema carries the mark of an older dbio (before data set ids): rebuild it with `dbio setup --force`"
                    .into(),
            );
        }
        Ownership::Forged(why) => return Err(why.clone()),
        Ownership::Dbio(m) => m,
    };
    if mark.prefix != plan.prefix || !mark.names(name) {
        return Err(format!(
            "the schema belongs to the dbio data set of prefix `{}` (its schema {}): choose another data.prefix",
            mark.prefix, mark.schema
        ));
    }
    let mut problems = Vec::new();
    if mark.state != LoadState::Complete {
        problems.push(
            "load incomplete (interrupted or failed): rerun `dbio setup` to finish it".into(),
        );
    }
    if mark.scale_blocks != plan.scale_blocks {
        problems.push(format!(
            "loaded with {} blocks but the configuration asks for {} blocks: set data.scale (--scale) to {}blocks, \
             or rebuild with `dbio setup --force`",
            mark.scale_blocks, plan.scale_blocks, mark.scale_blocks
        ));
    }
    Ok((mark.id.clone(), problems))
}

/// The problem of a dbio schema whose table is gone or not dbio's, and how to recover.
pub fn table_problem(table: Table) -> Option<String> {
    match table {
        Table::Ours(_) => None,
        Table::Missing => Some(
            "table cf1 is missing (dropped outside dbio): run `dbio setup` to rebuild it".into(),
        ),
        Table::Foreign => Some(
            "table cf1 is not the one dbio created (its mark is missing or names another data set): \
             drop it yourself, then run `dbio setup`"
                .into(),
        ),
    }
}

/// A schema's table `cf1`: missing, dbio's (of the data set `id`), or someone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Missing,
    Ours(u32),
    Foreign,
}

/// `id`: the data set's id, `None` for a legacy schema.
pub async fn table(client: &Client, schema: &str, id: Option<&str>) -> Result<Table> {
    let row = client
        .query_opt(sql::TABLE_BY_SCHEMA, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("reading table {schema}.cf1"), &e))?;
    Ok(match row {
        None => Table::Missing,
        Some(r) => {
            let what = format!("table {schema}.cf1");
            if is_marked(col::<Option<String>>(&r, 1, &what)?.as_deref(), id) {
                Table::Ours(col::<u32>(&r, 0, &what)?)
            } else {
                Table::Foreign
            }
        }
    })
}

/// Objects the user made on or over dbio's table `table_oid` (see [`sql::DEPENDENTS`]),
/// described as PostgreSQL names them ("index user1.my_idx", "view v", "trigger t on table
/// user1.cf1"). Dropping the table would drop them too; dbio does so only when told.
pub async fn dependents(
    client: &Client,
    schema: &str,
    table_oid: u32,
    id: Option<&str>,
) -> Result<Vec<String>> {
    let rows = client
        .query(sql::DEPENDENTS, &[&table_oid])
        .await
        .map_err(|e| PgError::from_db(format!("reading what depends on {schema}.cf1"), &e))?;
    let what = format!("what depends on {schema}.cf1");
    let mut out = Vec::new();
    for r in &rows {
        let desc: Option<String> = col(r, 0, &what)?;
        let comment: Option<String> = col(r, 1, &what)?;
        // dbio's own index is the one dependent that carries the data set's mark.
        let ours = is_marked(comment.as_deref(), id)
            && desc
                .as_deref()
                .is_some_and(|d| d.starts_with("index ") && d.ends_with(sql::INDEX));
        if !ours && let Some(d) = desc {
            out.push(d);
        }
    }
    Ok(out)
}

/// Objects in the schema that dbio did not create (all but its marked table and index): the
/// schema stays when there are any.
pub async fn foreign_objects(
    client: &Client,
    schema: &str,
    id: Option<&str>,
) -> Result<Vec<String>> {
    let rows = client
        .query(sql::SCHEMA_OBJECTS, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("listing the objects of {schema}"), &e))?;
    let what = format!("the objects of {schema}");
    let mut out = Vec::new();
    for r in &rows {
        let desc: Option<String> = col(r, 0, &what)?;
        let name: Option<String> = col(r, 1, &what)?;
        let comment: Option<String> = col(r, 2, &what)?;
        let ours = name
            .as_deref()
            .is_some_and(|n| n == sql::TABLE || n == sql::INDEX)
            && is_marked(comment.as_deref(), id);
        if !ours && let Some(d) = desc {
            out.push(d);
        }
    }
    Ok(out)
}

pub async fn set_schema_mark(client: &Client, schema: &str, mark: &SchemaMark) -> Result<()> {
    client
        .batch_execute(&sql::comment_schema(schema, &mark.to_comment()))
        .await
        .map_err(|e| PgError::from_db(format!("marking schema {schema}"), &e))
}

/// Column `idx` of a row the catalog returned, typed; a NULL or a type the query did not
/// promise is an error naming `what`, never a panic.
pub(crate) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a tokio_postgres::Row,
    idx: usize,
    what: &str,
) -> Result<T> {
    row.try_get(idx)
        .map_err(|e| PgError::from_db(format!("reading {what}"), &e))
}

/// Every data set on the target database, as the marks of its schemas describe it, with
/// where its tables really are and their size (`dbio list`, and the data set a command takes
/// when no --schemas/--scale is given). Schemas are grouped by the data set id in their mark;
/// legacy and unreadable marks belong to no data set and are left out.
pub async fn data_sets(client: &Client) -> Result<Vec<FoundDataSet>> {
    let mut marks: Vec<(String, SchemaMark)> = Vec::new();
    for (schema, own) in marked_schemas(client).await? {
        if let Ownership::Dbio(mark) = own
            && mark.names(&schema)
        {
            marks.push((schema, *mark));
        }
    }
    let names: Vec<String> = marks.iter().map(|(s, _)| s.clone()).collect();
    let tables = client
        .query(sql::DATA_SET_TABLES, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading where dbio's tables are", &e))?;
    let mut where_is: std::collections::BTreeMap<String, (Option<String>, Option<i64>)> =
        std::collections::BTreeMap::new();
    for r in &tables {
        let ctx =
            |e: tokio_postgres::Error| PgError::from_db("reading where dbio's tables are", &e);
        let schema: String = r.try_get(0).map_err(ctx)?;
        let tablespace: Option<String> = r.try_get(1).map_err(ctx)?;
        let bytes: Option<i64> = r.try_get(2).map_err(ctx)?;
        where_is.insert(schema, (tablespace, bytes));
    }
    let mut out: Vec<FoundDataSet> = Vec::new();
    for (schema, mark) in &marks {
        let i = match out.iter().position(|d| d.id == mark.id) {
            Some(i) => i,
            None => {
                out.push(FoundDataSet {
                    prefix: mark.prefix.clone(),
                    id: mark.id.clone(),
                    schemas: mark.schemas,
                    schemas_found: 0,
                    scale_blocks: mark.scale_blocks,
                    block_size: mark.block_size,
                    tablespace: mark.tablespace.clone(),
                    tablespaces_now: Vec::new(),
                    state: DataSetState::Complete,
                    bytes: Some(0),
                    loaded_at: mark.created_at.clone(),
                    dbio_version: mark.dbio_version.clone(),
                });
                out.len() - 1
            }
        };
        let d = &mut out[i];
        d.schemas_found += 1;
        if mark.state != LoadState::Complete {
            d.state = DataSetState::Loading;
        }
        match where_is.get(schema) {
            Some((tablespace, bytes)) => {
                if let Some(t) = tablespace
                    && !d.tablespaces_now.contains(t)
                {
                    d.tablespaces_now.push(t.clone());
                }
                d.bytes = match (d.bytes, bytes) {
                    (Some(a), Some(b)) => Some(a + u64::try_from(*b).unwrap_or(0)),
                    _ => None,
                };
            }
            // A schema marked complete whose table is gone: the data set is not whole.
            None => d.state = DataSetState::Partial,
        }
    }
    for d in &mut out {
        if d.schemas_found < d.schemas && d.state == DataSetState::Complete {
            d.state = DataSetState::Partial;
        }
    }
    out.sort_by(|a, b| a.prefix.cmp(&b.prefix).then(a.loaded_at.cmp(&b.loaded_at)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark() -> SchemaMark {
        let identity = Identity::fresh("alice");
        SchemaMark::new(
            &identity,
            "ts",
            2,
            3,
            4000,
            8192,
            None,
            7,
            LoadState::Complete,
        )
    }

    #[test]
    fn marks_round_trip_through_the_comment() {
        let m = mark();
        let comment = m.to_comment();
        assert!(
            comment.starts_with("{\"dbio\":{\"format\":1,\"id\":\""),
            "{comment}"
        );
        assert_eq!(
            parse_comment(Some(&comment)),
            Ownership::Dbio(Box::new(m.clone()))
        );
        assert!(m.names("ts2") && !m.names("ts21") && !m.names("t2"));
    }

    // Seen: a mark copied onto another role's schema made teardown, run as superuser, drop
    // that role's schema and data.
    #[test]
    fn a_mark_counts_only_on_a_schema_of_the_data_sets_owner() {
        let id = Identity::fresh("alice");
        let at =
            |n: u32| SchemaMark::new(&id, "ts", n, 3, 4000, 8192, None, 7, LoadState::Complete);
        let own = |m: SchemaMark| Ownership::Dbio(Box::new(m));
        let mut copied_unnamed = at(3);
        copied_unnamed.owner = None;
        let found = vec![
            ("ts1".to_string(), "alice".to_string(), own(at(1))),
            ("ts2".to_string(), "alice".to_string(), own(at(2))),
            // bob's schema with alice's mark copied on it, with and without its owner field
            ("ts3".to_string(), "bob".to_string(), own(copied_unnamed)),
            ("ts4".to_string(), "bob".to_string(), own(at(4))),
        ];
        let trusted = trust(found.clone());
        assert!(matches!(&trusted[0].1, Ownership::Dbio(m) if m.owner.as_deref() == Some("alice")));
        assert!(matches!(&trusted[1].1, Ownership::Dbio(_)));
        for (name, o) in &trusted[2..] {
            assert!(
                matches!(o, Ownership::Forged(w) if w.contains("owned by role `bob`")),
                "{name}: {o:?}"
            );
        }
        // Without schema 1, the marks' owner decides; a mark naming its schema's owner while
        // the others name another is forged too.
        let mut bobs = at(4);
        bobs.owner = Some("bob".into());
        let trusted = trust(vec![
            found[1].clone(),
            ("ts4".to_string(), "bob".to_string(), own(bobs)),
        ]);
        assert!(
            trusted
                .iter()
                .all(|(_, o)| matches!(o, Ownership::Forged(_))),
            "{trusted:?}"
        );
        // A schema 1 owned by another role than its mark names is no record.
        let trusted = trust(vec![
            ("ts1".to_string(), "bob".to_string(), own(at(1))),
            found[1].clone(),
        ]);
        assert!(
            trusted
                .iter()
                .all(|(_, o)| matches!(o, Ownership::Forged(_))),
            "{trusted:?}"
        );
    }

    #[test]
    fn ids_are_random_per_data_set() {
        let a = Identity::fresh("alice").id;
        let b = Identity::fresh("alice").id;
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }

    #[test]
    fn human_comments_are_not_marks() {
        for c in [
            "payroll data",
            "dbio",
            "dbiox",
            "dbio is great",
            "dbio {broken",
            "dbio {\"state\":\"complete\"}",
            "{\"dbio\": 1}",
            "{\"dbio\": \"yes\"}",
            "{\"dbio\":{\"format\":1},\"other\":2}",
            "[\"dbio\"]",
        ] {
            assert_eq!(parse_comment(Some(c)), Ownership::Foreign, "{c}");
        }
        assert_eq!(parse_comment(None), Ownership::Foreign);
    }

    #[test]
    fn damaged_and_future_marks_are_named_never_used() {
        let future = "{\"dbio\":{\"format\":2,\"id\":\"x\"}}";
        assert!(
            matches!(parse_comment(Some(future)), Ownership::Unreadable(w) if w.contains("format 2"))
        );
        let mut v: serde_json::Value = serde_json::from_str(&mark().to_comment()).unwrap();
        v["dbio"]["extra"] = 1.into();
        assert!(matches!(
            parse_comment(Some(&v.to_string())),
            Ownership::Unreadable(w) if w.contains("extra")
        ));
        v["dbio"].as_object_mut().unwrap().remove("extra");
        v["dbio"].as_object_mut().unwrap().remove("prefix");
        assert!(matches!(
            parse_comment(Some(&v.to_string())),
            Ownership::Unreadable(w) if w.contains("prefix")
        ));
    }

    #[test]
    fn the_legacy_mark_is_recognized_strictly() {
        let legacy = "dbio {\"format\":1,\"state\":\"complete\",\"scale_blocks\":4000,\"block_size\":8192,\"seed\":1,\"at\":\"2026-01-01T00:00:00Z\"}";
        assert_eq!(parse_comment(Some(legacy)), Ownership::Legacy);
        let extra = legacy.replace("\"seed\":1", "\"seed\":1,\"x\":2");
        assert_eq!(parse_comment(Some(&extra)), Ownership::Foreign);
    }

    #[test]
    fn objects_belong_to_the_data_set_their_mark_names() {
        let c = object_comment("abc", "table");
        assert_eq!(object_id(Some(&c)).as_deref(), Some("abc"));
        assert!(is_marked(Some(&c), Some("abc")));
        assert!(!is_marked(Some(&c), Some("abd")));
        assert!(!is_marked(Some("dbio"), Some("abc")));
        assert!(is_marked(Some("dbio"), None));
        assert!(!is_marked(Some(&c), None));
        assert_eq!(object_id(Some("dbio table")), None);
    }
}
