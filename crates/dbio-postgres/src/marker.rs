//! How dbio marks what it creates, and reads the marks back. A schema's comment holds
//! `dbio {json}` with the load state, so an interrupted load is visible as `loading` and no
//! later command mistakes it for a complete data set. Tables and indexes carry `dbio`.

use serde::{Deserialize, Serialize};
use tokio_postgres::Client;

use crate::error::{PgError, Result};
use crate::sql;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadState {
    /// Created, load not finished (or failed, or interrupted).
    Loading,
    Complete,
}

/// The JSON in a dbio schema's comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaMark {
    pub format: u32,
    pub state: LoadState,
    pub scale_blocks: u64,
    pub block_size: u64,
    pub seed: u64,
    /// UTC time the state was written.
    pub at: String,
}

impl SchemaMark {
    pub fn new(state: LoadState, scale_blocks: u64, block_size: u64, seed: u64) -> Self {
        SchemaMark {
            format: 1,
            state,
            scale_blocks,
            block_size,
            seed,
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }
    }

    pub fn to_comment(&self) -> String {
        // Serializing a plain struct of numbers and strings cannot fail.
        let json = serde_json::to_string(self).unwrap_or_default();
        format!("{} {json}", sql::MARK)
    }
}

/// What a schema's comment says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No such schema.
    Absent,
    /// Exists without dbio's mark: not ours, never touched.
    Foreign,
    /// Ours; `None` when the mark's JSON is unreadable (treated as incomplete).
    Dbio(Option<SchemaMark>),
}

pub fn parse_comment(comment: Option<&str>) -> Ownership {
    match comment {
        Some(c) if c == sql::MARK || c.starts_with("dbio ") => {
            let json = c[sql::MARK.len()..].trim();
            Ownership::Dbio(serde_json::from_str(json).ok())
        }
        _ => Ownership::Foreign,
    }
}

/// Ownership of each named schema, in the order given.
pub async fn inspect_schemas(
    client: &Client,
    names: &[String],
) -> Result<Vec<(String, Ownership)>> {
    let rows = client
        .query(sql::SCHEMAS_BY_NAME, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading the schemas", &e))?;
    Ok(names
        .iter()
        .map(|name| {
            let found = rows.iter().find(|r| r.get::<_, String>(0) == *name);
            let own = match found {
                None => Ownership::Absent,
                Some(r) => parse_comment(r.get::<_, Option<String>>(1).as_deref()),
            };
            (name.clone(), own)
        })
        .collect())
}

/// Does the schema's table exist, and is it dbio's?
pub async fn table_ownership(client: &Client, schema: &str) -> Result<Option<bool>> {
    let row = client
        .query_opt(sql::TABLE_BY_SCHEMA, &[&schema])
        .await
        .map_err(|e| PgError::from_db(format!("reading table {schema}.cf1"), &e))?;
    Ok(row.map(|r| r.get::<_, Option<String>>(1).as_deref() == Some(sql::MARK)))
}

pub async fn set_schema_mark(client: &Client, schema: &str, mark: &SchemaMark) -> Result<()> {
    client
        .batch_execute(&sql::comment_schema(schema, &mark.to_comment()))
        .await
        .map_err(|e| PgError::from_db(format!("marking schema {schema}"), &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_through_the_comment() {
        let m = SchemaMark::new(LoadState::Complete, 4000, 8192, 7);
        assert_eq!(
            parse_comment(Some(&m.to_comment())),
            Ownership::Dbio(Some(m))
        );
    }

    #[test]
    fn foreign_and_damaged_comments() {
        assert_eq!(parse_comment(None), Ownership::Foreign);
        assert_eq!(parse_comment(Some("payroll data")), Ownership::Foreign);
        assert_eq!(parse_comment(Some("dbiox")), Ownership::Foreign);
        assert_eq!(parse_comment(Some("dbio {broken")), Ownership::Dbio(None));
        assert_eq!(parse_comment(Some("dbio")), Ownership::Dbio(None));
    }
}
