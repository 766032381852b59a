//! The identity of an Oracle data set, as PostgreSQL's marks give one: every schema user dbio
//! creates is recorded twice, and is dbio's only where both records agree.
//!
//! - **The catalog** (`<admin>.DBIO_DATA_SETS`, one row per schema user, see [`CatalogRow`]):
//!   written *before* the user is created (state `creating`), so a setup killed between
//!   `CREATE USER` and the mark still leaves the user recorded as dbio's, and the next setup
//!   resumes it (or teardown drops it). Only the admin can write it: a mark copied onto another
//!   user's table claims nothing.
//! - **The mark** in the comment of the user's CF1, `{"dbio":{"format":1,"id":...,
//!   "prefix":"TS","schema":2,"schemas":3,...,"state":"complete"}}` ([`SchemaMark`]): the data
//!   set's id, prefix, this schema's number and count, scale, block size, tablespace, seed,
//!   state, dbio version and times, the same fields as PostgreSQL's schema marks.
//!
//! A user belongs to the data set of prefix P only when its name is exactly P followed by the
//! schema number both records give: `TS21` is schema 21 of `TS` or schema 1 of `TS2`, never
//! both, and no name is ever matched by a pattern (no LIKE, so `_` and `%` in a prefix mean
//! nothing). Prefixes are Oracle user names: letters, digits and `_`, upper-cased.

use dbio_core::discover::{DataSetState, FoundDataSet};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::OracleError;

/// The version of the mark's JSON this dbio writes and reads.
pub const FORMAT: u32 = 1;

/// Longest user name dbio creates: 30 bytes, the limit before 12.2 (128 from 12.2 on), so a
/// data set made on one release can be rebuilt on any.
pub const MAX_USER_NAME: usize = 30;

/// The earlier mark, `dbio {"state":...}` without id or prefix: recognized, only so that
/// `setup --force` can rebuild it and every other command can say so.
pub const LEGACY_MARK: &str = "dbio";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadState {
    /// Created, load not finished (or failed, or interrupted).
    Loading,
    Complete,
}

/// The identity of a data set and the state of one of its schemas, in CF1's comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchemaMark {
    pub format: u32,
    /// Random, one per data set: the catalog rows carry it too.
    pub id: String,
    /// Upper case, as the user names.
    pub prefix: String,
    /// This schema's number: its user is `<prefix><schema>`.
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
}

/// A data set's identity, shared by the marks and catalog rows of all its schemas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub id: String,
    pub created_at: String,
}

impl Identity {
    /// A fresh data set: 128 random bits from the operating system.
    pub fn fresh() -> Result<Identity, OracleError> {
        let mut bytes = [0u8; 16];
        random_bytes(&mut bytes)?;
        Ok(Identity {
            id: bytes.iter().map(|b| format!("{b:02x}")).collect(),
            created_at: now(),
        })
    }
}

/// Bytes from the operating system's random source (getrandom(2)).
pub(crate) fn random_bytes(out: &mut [u8]) -> Result<(), OracleError> {
    use rand::TryRng;
    rand::rngs::SysRng
        .try_fill_bytes(out)
        .map_err(|e| OracleError::Failed {
            context: "reading the operating system's random source".into(),
            message: e.to_string(),
        })
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
            prefix: prefix.to_uppercase(),
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

    /// Is this the mark of user `<prefix><n>`, as its name says?
    pub fn names(&self, user: &str) -> bool {
        user_name(&self.prefix, self.schema) == user
    }
}

/// The user that owns schema `n` (1-based): `<PREFIX><n>`, SLOB's USER1..USERn.
pub fn user_name(prefix: &str, n: u32) -> String {
    format!("{}{n}", prefix.to_uppercase())
}

/// The schema number of `user` under `prefix`, when the name is exactly the prefix followed
/// by a number without leading zeros: `TS21` is 21 under `TS` and 1 under `TS2`.
pub fn schema_number(prefix: &str, user: &str) -> Option<u32> {
    let digits = user.strip_prefix(&prefix.to_uppercase())?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Checks data.prefix as the start of Oracle user names and returns it upper-cased: a
/// letter, then letters, digits or `_`, short enough for `schemas` users.
pub fn check_prefix(prefix: &str, schemas: u32) -> Result<String, OracleError> {
    let upper = prefix.to_uppercase();
    let mut chars = upper.chars();
    let good_start = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let good_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !good_start || !good_rest {
        return Err(OracleError::Usage(format!(
            "data.prefix `{prefix}` cannot start an Oracle user name: use a letter followed by letters, \
             digits or `_` (the users are <PREFIX>1..<PREFIX>N)"
        )));
    }
    let longest = user_name(&upper, schemas.max(1)).len();
    if longest > MAX_USER_NAME {
        return Err(OracleError::Usage(format!(
            "data.prefix `{prefix}` makes user names of {longest} characters ({}); Oracle before 12.2 allows \
             {MAX_USER_NAME}: use a shorter prefix",
            user_name(&upper, schemas.max(1))
        )));
    }
    Ok(upper)
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

/// The envelope's inner object, when the comment is exactly `{"dbio": {...}}` in format 1.
/// `Err` carries why an envelope is unreadable; `Ok(None)` means it is no envelope at all.
fn open_envelope<T: DeserializeOwned>(comment: &str) -> Result<Option<T>, String> {
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

/// The legacy mark, parsed as strictly as it was written (older ones lack block_size).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct LegacyMark {
    state: String,
    scale_blocks: u64,
    #[serde(default)]
    block_size: Option<u64>,
}

/// What CF1's comment says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// No comment, or one dbio did not write.
    None,
    Dbio(Box<SchemaMark>),
    /// A `{"dbio": ...}` envelope this dbio cannot read (damaged, or from a newer dbio).
    Unreadable(String),
    /// The legacy mark: it does not say which data set.
    Legacy,
}

impl Mark {
    pub fn parse(comment: Option<&str>) -> Mark {
        let Some(c) = comment else {
            return Mark::None;
        };
        match open_envelope::<SchemaMark>(c) {
            Ok(Some(m)) => return Mark::Dbio(Box::new(m)),
            Err(why) => return Mark::Unreadable(why),
            Ok(None) => {}
        }
        match c.strip_prefix(LEGACY_MARK) {
            Some(json) if serde_json::from_str::<LegacyMark>(json.trim()).is_ok() => Mark::Legacy,
            _ => Mark::None,
        }
    }
}

/// The catalog table's own mark (its comment), so a table of that name someone else made is
/// never written to.
pub fn catalog_comment() -> String {
    envelope(&serde_json::json!({"format": FORMAT, "object": "catalog"}))
}

pub fn is_catalog_comment(comment: Option<&str>) -> bool {
    comment == Some(catalog_comment().as_str())
}

/// A catalog row's state: the intent (written before `CREATE USER`), or the user made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogState {
    Creating,
    Created,
}

impl CatalogState {
    pub fn as_str(self) -> &'static str {
        match self {
            CatalogState::Creating => "creating",
            CatalogState::Created => "created",
        }
    }

    pub fn parse(s: &str) -> Option<CatalogState> {
        match s {
            "creating" => Some(CatalogState::Creating),
            "created" => Some(CatalogState::Created),
            _ => None,
        }
    }
}

/// One row of `<owner>.DBIO_DATA_SETS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogRow {
    /// The admin whose catalog holds the row.
    pub owner: String,
    pub username: String,
    pub data_set_id: String,
    pub prefix: String,
    pub schema: u32,
    pub state: CatalogState,
    /// ALL_USERS.USER_ID of the user dbio created (null while `creating`).
    pub user_id: Option<i64>,
    /// The password dbio generated for the user; null when DBIO_ORACLE_USER_PASSWORD gave it.
    pub password: Option<String>,
    /// Server time the row was written, `YYYY-MM-DDTHH:MI:SS`.
    pub created_at: String,
}

/// One row of ALL_USERS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub username: String,
    pub user_id: i64,
    /// `YYYY-MM-DDTHH:MI:SS`, server time.
    pub created: String,
}

/// What dbio knows of one schema user, from the catalog, ALL_USERS and CF1's comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// No user, no catalog row.
    Absent,
    /// A catalog row whose user does not exist (a setup stopped before `CREATE USER`, or the
    /// user was dropped outside dbio): the row is cleaned up, nothing else.
    Stale(CatalogRow),
    /// dbio's: the catalog row names this user, and the mark (if the load got that far)
    /// agrees with it. `mark` None: stopped between `CREATE USER` and the first mark.
    Ours {
        row: CatalogRow,
        mark: Option<Box<SchemaMark>>,
    },
    /// Exists, neither recorded nor marked by dbio: never touched.
    Foreign,
    /// Exists with something that claims to be dbio's that the records do not back (a mark
    /// without a catalog row, a row whose user was replaced, records that disagree): never
    /// touched, the reason is named.
    Disputed(String),
    /// The legacy mark without a catalog row: only `setup --force` rebuilds it.
    Legacy,
}

/// Judges one user from its records. `row`: its catalog row, if any; `user`: ALL_USERS;
/// `comment`: its CF1's comment (None also when CF1 is missing).
pub fn ownership(
    name: &str,
    row: Option<&CatalogRow>,
    user: Option<&UserRow>,
    comment: Option<&str>,
) -> Ownership {
    let mark = Mark::parse(comment);
    let (row, user) = match (row, user) {
        (None, None) => return Ownership::Absent,
        (Some(r), None) => return Ownership::Stale(r.clone()),
        (None, Some(_)) => {
            return match mark {
                Mark::None => Ownership::Foreign,
                Mark::Legacy => Ownership::Legacy,
                Mark::Dbio(_) | Mark::Unreadable(_) => Ownership::Disputed(
                    "its CF1 carries dbio's mark but no dbio catalog records the user (a copied mark, or the \
                     catalog was dropped): dbio does not touch it"
                        .into(),
                ),
            };
        }
        (Some(r), Some(u)) => (r, u),
    };
    if row.username != name || schema_number(&row.prefix, name) != Some(row.schema) {
        return Ownership::Disputed(format!(
            "its catalog row ({}.DBIO_DATA_SETS) names schema {} of prefix {}, which is not this user",
            row.owner, row.schema, row.prefix
        ));
    }
    match (row.state, row.user_id) {
        (CatalogState::Created, Some(id)) if id == user.user_id => {}
        (CatalogState::Created, _) => {
            return Ownership::Disputed(format!(
                "the user was dropped and created again outside dbio (its USER_ID {} is not the one \
                 {}.DBIO_DATA_SETS recorded): dbio does not touch it",
                user.user_id, row.owner
            ));
        }
        // The intent was written, then the process stopped: the user is dbio's only if it was
        // created after the intent (server clock, same format, so the strings compare).
        (CatalogState::Creating, _) if user.created.as_str() >= row.created_at.as_str() => {}
        (CatalogState::Creating, _) => {
            return Ownership::Disputed(format!(
                "the user existed (created {}) before dbio recorded its intent to create it ({}): it is not dbio's",
                user.created, row.created_at
            ));
        }
    }
    match mark {
        Mark::None => Ownership::Ours {
            row: row.clone(),
            mark: None,
        },
        Mark::Dbio(m) if m.id == row.data_set_id && m.prefix == row.prefix && m.names(name) => {
            Ownership::Ours {
                row: row.clone(),
                mark: Some(m),
            }
        }
        Mark::Dbio(m) => Ownership::Disputed(format!(
            "its CF1's mark (data set {}, prefix {}, schema {}) disagrees with {}.DBIO_DATA_SETS (data set {}, \
             prefix {}, schema {})",
            m.id, m.prefix, m.schema, row.owner, row.data_set_id, row.prefix, row.schema
        )),
        Mark::Unreadable(why) => Ownership::Disputed(format!(
            "dbio's mark on its CF1 is unreadable ({why}): use the dbio version that made it, or drop the user yourself"
        )),
        Mark::Legacy => Ownership::Disputed(
            "its CF1 carries an older dbio's mark, which disagrees with the catalog row".into(),
        ),
    }
}

/// The CF1 of a user a catalog records, as ALL_TABLES and ALL_TAB_COMMENTS have it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRow {
    pub owner: String,
    /// Where the table is now (null for a partitioned table).
    pub tablespace: Option<String>,
    /// Its comment: dbio's mark, if the load got that far.
    pub comment: Option<String>,
}

/// Every data set the catalog rows record (`dbio list`, and the data set a command takes
/// when no --schemas/--scale is given), in the shape PostgreSQL's marks give: a schema user
/// counts only where [`ownership`] finds it dbio's (catalog row, ALL_USERS and CF1's mark
/// agreeing), and its data set's figures come from the marks, grouped by the data set's id.
///
/// - A user dbio created whose load has not written the mark yet counts, and makes its data
///   set `loading`; a data set none of whose users carries a mark yet is left out (its scale
///   is known to no record), as PostgreSQL leaves out schemas without a readable mark.
/// - Stale rows (the user is gone) and disputed users are not the data set's: fewer schemas
///   found than the marks' count make it `partial`.
/// - The prefix is given in the config's form (lower case; Oracle folds the user names up).
/// - Sizes are not measured (DBA_SEGMENTS needs a grant the admin may not have): `bytes` is
///   None.
///
/// A user recorded in two catalogs is judged by the first row, as commands read it.
pub fn data_sets(rows: &[CatalogRow], users: &[UserRow], tables: &[TableRow]) -> Vec<FoundDataSet> {
    let user_of = |name: &str| users.iter().find(|u| u.username == name);
    let table_of = |name: &str| tables.iter().find(|t| t.owner == name);
    let mut seen: Vec<&str> = Vec::new();
    let mut marked: Vec<(SchemaMark, Option<&str>)> = Vec::new();
    let mut unmarked: Vec<CatalogRow> = Vec::new();
    for row in rows {
        if seen.contains(&row.username.as_str()) {
            continue;
        }
        seen.push(&row.username);
        let table = table_of(&row.username);
        let own = ownership(
            &row.username,
            Some(row),
            user_of(&row.username),
            table.and_then(|t| t.comment.as_deref()),
        );
        match own {
            Ownership::Ours {
                mark: Some(mark), ..
            } => marked.push((*mark, table.and_then(|t| t.tablespace.as_deref()))),
            Ownership::Ours { mark: None, row } => unmarked.push(row),
            _ => {}
        }
    }
    let mut out: Vec<FoundDataSet> = Vec::new();
    for (mark, tablespace_now) in &marked {
        let i = match out.iter().position(|d| d.id == mark.id) {
            Some(i) => i,
            None => {
                out.push(FoundDataSet {
                    prefix: mark.prefix.to_lowercase(),
                    id: mark.id.clone(),
                    schemas: mark.schemas,
                    schemas_found: 0,
                    scale_blocks: mark.scale_blocks,
                    block_size: mark.block_size,
                    tablespace: mark.tablespace.clone(),
                    tablespaces_now: Vec::new(),
                    state: DataSetState::Complete,
                    bytes: None,
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
        if let Some(t) = tablespace_now
            && !d.tablespaces_now.iter().any(|n| n == t)
        {
            d.tablespaces_now.push(t.to_string());
        }
    }
    for row in unmarked {
        if let Some(d) = out.iter_mut().find(|d| d.id == row.data_set_id) {
            d.schemas_found += 1;
            d.state = DataSetState::Loading;
        }
    }
    for d in &mut out {
        if d.schemas_found < d.schemas && d.state == DataSetState::Complete {
            d.state = DataSetState::Partial;
        }
    }
    out.sort_by(|a, b| a.prefix.cmp(&b.prefix).then(a.loaded_at.cmp(&b.loaded_at)));
    out
}

/// The generated password of a schema user: 24 characters from upper and lower case letters,
/// digits and `#`, `_`, with at least two of each kind and a letter first, so Oracle's
/// password verify functions (ora12c_verify_function, ora12c_strong_verify_function) and
/// Autonomous Database's rules (12-30 characters, upper, lower and a digit, no `"`, not the
/// user name) accept it.
pub fn generate_password() -> Result<String, OracleError> {
    const UPPER: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ";
    const LOWER: &[u8] = b"abcdefghijkmnopqrstuvwxyz";
    const DIGIT: &[u8] = b"23456789";
    const SPECIAL: &[u8] = b"#_";
    const ALL: [&[u8]; 4] = [UPPER, LOWER, DIGIT, SPECIAL];
    const LEN: usize = 24;
    let mut raw = [0u8; 2 * LEN];
    random_bytes(&mut raw)?;
    // Positions 0..8 get two of each kind (upper first: a letter starts the password); the
    // rest any kind; then positions 1.. are shuffled with the second half of the bytes.
    let mut out: Vec<u8> = (0..LEN)
        .map(|i| {
            let set = if i < 8 {
                ALL[i / 2]
            } else {
                ALL[raw[i] as usize % 4]
            };
            set[raw[i] as usize % set.len()]
        })
        .collect();
    for i in (2..LEN).rev() {
        let j = 1 + raw[LEN + i] as usize % i;
        out.swap(i, j);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The password a schema user is given by DBIO_ORACLE_USER_PASSWORD: refused when it is the
/// user name (SLOB's habit, which password verify functions and Autonomous Database refuse,
/// and which anyone can guess) or holds a `"` (it is quoted in the DDL).
pub fn check_given_password(password: &str, users: &[String]) -> Result<(), OracleError> {
    if let Some(u) = users.iter().find(|u| u.eq_ignore_ascii_case(password)) {
        return Err(OracleError::Usage(format!(
            "DBIO_ORACLE_USER_PASSWORD is the user name {u}: choose another password, or unset it and dbio \
             generates one per user (recorded in the admin's DBIO_DATA_SETS)"
        )));
    }
    if password.contains('"') {
        return Err(OracleError::Usage(
            "DBIO_ORACLE_USER_PASSWORD holds a double quote, which an Oracle password cannot: choose another".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(prefix: &str, schema: u32) -> SchemaMark {
        let identity = Identity {
            id: "0123456789abcdef0123456789abcdef".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        SchemaMark::new(
            &identity,
            prefix,
            schema,
            3,
            4000,
            8192,
            Some("DATA"),
            7,
            LoadState::Complete,
        )
    }

    fn row(prefix: &str, schema: u32) -> CatalogRow {
        CatalogRow {
            owner: "SYSTEM".into(),
            username: user_name(prefix, schema),
            data_set_id: "0123456789abcdef0123456789abcdef".into(),
            prefix: prefix.to_uppercase(),
            schema,
            state: CatalogState::Created,
            user_id: Some(120),
            password: Some("pw".into()),
            created_at: "2026-01-01T10:00:00".into(),
        }
    }

    fn user(name: &str, id: i64, created: &str) -> UserRow {
        UserRow {
            username: name.into(),
            user_id: id,
            created: created.into(),
        }
    }

    #[test]
    fn marks_round_trip_with_the_data_sets_identity() {
        let m = mark("ts", 2);
        let c = m.to_comment();
        assert!(
            c.starts_with("{\"dbio\":{\"format\":1,\"id\":\"0123"),
            "{c}"
        );
        assert!(
            c.contains("\"prefix\":\"TS\",\"schema\":2,\"schemas\":3"),
            "{c}"
        );
        assert_eq!(Mark::parse(Some(&c)), Mark::Dbio(Box::new(m.clone())));
        assert!(m.names("TS2") && !m.names("TS21") && !m.names("T2"));
        let fresh = Identity::fresh().unwrap();
        assert_eq!(fresh.id.len(), 32);
        assert_ne!(fresh.id, Identity::fresh().unwrap().id);
    }

    // Regression: `setup --prefix ts2` adopted TS21 (schema 21 of `ts`), and teardown matched
    // `LIKE 'USER1%'`, taking USER10..USER19 too.
    #[test]
    fn names_are_exact_the_ts_and_ts2_cases() {
        assert_eq!(schema_number("ts", "TS21"), Some(21));
        assert_eq!(schema_number("ts2", "TS21"), Some(1));
        assert_eq!(
            schema_number("user1", "USER10"),
            None,
            "USER10 is no schema of USER1"
        );
        assert_eq!(schema_number("user", "USER10"), Some(10));
        assert_eq!(schema_number("user", "USER01"), None, "no leading zeros");
        assert_eq!(schema_number("user", "USER"), None);
        assert_eq!(schema_number("user", "USERX1"), None);
        assert_eq!(schema_number("SYS_", "SYS_1"), Some(1));
        assert_eq!(schema_number("SYS_", "SYSX1"), None, "`_` is no wildcard");
        // TS21 recorded as schema 1 of TS2 is not schema 21 of TS, and the other way round.
        let ts2_1 = Ownership::Ours {
            row: row("ts2", 1),
            mark: Some(Box::new(mark("ts2", 1))),
        };
        assert_eq!(
            ownership(
                "TS21",
                Some(&row("ts2", 1)),
                Some(&user("TS21", 120, "2026-01-01T10:00:01")),
                Some(&mark("ts2", 1).to_comment())
            ),
            ts2_1
        );
        let as_ts = ownership(
            "TS21",
            Some(&CatalogRow {
                username: "TS21".into(),
                ..row("ts", 21)
            }),
            Some(&user("TS21", 120, "2026-01-01T10:00:01")),
            Some(&mark("ts2", 1).to_comment()),
        );
        assert!(
            matches!(&as_ts, Ownership::Disputed(w) if w.contains("disagrees")),
            "{as_ts:?}"
        );
    }

    #[test]
    fn prefixes_are_oracle_user_names() {
        assert_eq!(check_prefix("user", 4096).unwrap(), "USER");
        assert_eq!(check_prefix("Ts_2", 1).unwrap(), "TS_2");
        for bad in ["", "1user", "us-er", "us%er", "us er", "us\"er", "_user"] {
            let e = check_prefix(bad, 1).unwrap_err();
            assert_eq!(e.kind(), dbio_core::ErrorKind::Usage, "{bad}");
            assert!(e.to_string().contains("letter"), "{bad}: {e}");
        }
        let long = "a".repeat(27);
        let e = check_prefix(&long, 4096).unwrap_err().to_string();
        assert!(e.contains("31 characters") && e.contains("30"), "{e}");
        assert!(check_prefix(&long, 999).is_ok());
    }

    #[test]
    fn human_comments_and_damaged_marks_are_never_taken_for_marks() {
        for c in [
            "payroll data",
            "dbio",
            "dbio is great",
            "{\"dbio\": 1}",
            "{\"dbio\":{\"format\":1},\"other\":2}",
        ] {
            assert_eq!(Mark::parse(Some(c)), Mark::None, "{c}");
        }
        assert!(matches!(
            Mark::parse(Some("{\"dbio\":{\"format\":2,\"id\":\"x\"}}")),
            Mark::Unreadable(w) if w.contains("format 2")
        ));
        assert_eq!(
            Mark::parse(Some(
                "dbio {\"state\":\"complete\",\"scale_blocks\":1000,\"block_size\":8192}"
            )),
            Mark::Legacy
        );
        assert_eq!(
            Mark::parse(Some("dbio {\"state\":\"complete\",\"scale_blocks\":1000}")),
            Mark::Legacy
        );
        assert!(is_catalog_comment(Some(&catalog_comment())));
        assert!(!is_catalog_comment(Some("dbio catalog")));
    }

    // Regression: a setup killed between CREATE USER and the mark left a user that the next
    // setup refused and teardown skipped.
    #[test]
    fn the_intent_recorded_first_makes_an_unmarked_user_dbios() {
        let intent = CatalogRow {
            state: CatalogState::Creating,
            user_id: None,
            ..row("user", 1)
        };
        // Killed before CREATE USER: only the row, cleaned up.
        assert_eq!(
            ownership("USER1", Some(&intent), None, None),
            Ownership::Stale(intent.clone())
        );
        // Killed after CREATE USER, before the mark: ours, to resume.
        let own = ownership(
            "USER1",
            Some(&intent),
            Some(&user("USER1", 130, "2026-01-01T10:00:02")),
            None,
        );
        assert_eq!(
            own,
            Ownership::Ours {
                row: intent.clone(),
                mark: None
            }
        );
        // A user that existed before the intent was someone else's.
        let older = ownership(
            "USER1",
            Some(&intent),
            Some(&user("USER1", 130, "2025-12-31T23:00:00")),
            None,
        );
        assert!(
            matches!(&older, Ownership::Disputed(w) if w.contains("existed")),
            "{older:?}"
        );
    }

    // Regression: a mark copied onto another user's table made teardown drop that user.
    #[test]
    fn a_mark_without_the_catalogs_record_is_disputed() {
        let forged = ownership(
            "USER1",
            None,
            Some(&user("USER1", 77, "2026-01-01T10:00:00")),
            Some(&mark("user", 1).to_comment()),
        );
        assert!(
            matches!(&forged, Ownership::Disputed(w) if w.contains("copied mark")),
            "{forged:?}"
        );
        // Dropped and re-created by someone: another USER_ID.
        let replaced = ownership(
            "USER1",
            Some(&row("user", 1)),
            Some(&user("USER1", 999, "2026-02-01T00:00:00")),
            Some(&mark("user", 1).to_comment()),
        );
        assert!(
            matches!(&replaced, Ownership::Disputed(w) if w.contains("USER_ID 999")),
            "{replaced:?}"
        );
        assert_eq!(
            ownership(
                "USER1",
                None,
                Some(&user("USER1", 77, "2026-01-01T10:00:00")),
                Some("a table")
            ),
            Ownership::Foreign
        );
        assert_eq!(
            ownership(
                "USER1",
                None,
                Some(&user("USER1", 77, "2026-01-01T10:00:00")),
                Some("dbio {\"state\":\"complete\",\"scale_blocks\":1}")
            ),
            Ownership::Legacy
        );
        assert_eq!(ownership("USER1", None, None, None), Ownership::Absent);
    }

    /// What the admin's session reads for one schema user dbio made: its catalog row, its
    /// ALL_USERS row and its CF1 (tablespace DATA) with `mark`'s comment.
    fn recorded(m: &SchemaMark, user_id: i64) -> (CatalogRow, UserRow, TableRow) {
        let name = user_name(&m.prefix, m.schema);
        (
            CatalogRow {
                username: name.clone(),
                data_set_id: m.id.clone(),
                user_id: Some(user_id),
                ..row(&m.prefix, m.schema)
            },
            user(&name, user_id, "2026-01-01T10:00:01"),
            TableRow {
                owner: name,
                tablespace: Some("DATA".into()),
                comment: Some(m.to_comment()),
            },
        )
    }

    fn listed(
        schemas: &[(CatalogRow, UserRow, TableRow)],
    ) -> Vec<dbio_core::discover::FoundDataSet> {
        let rows: Vec<CatalogRow> = schemas.iter().map(|s| s.0.clone()).collect();
        let users: Vec<UserRow> = schemas.iter().map(|s| s.1.clone()).collect();
        let tables: Vec<TableRow> = schemas.iter().map(|s| s.2.clone()).collect();
        data_sets(&rows, &users, &tables)
    }

    #[test]
    fn the_catalog_rows_read_as_data_sets_in_postgresqls_shape() {
        use dbio_core::discover::{DataSetAsk, DataSetState, FoundDataSet, pick};
        // TS: 3 schemas of 4000 blocks; TS2: 1 schema, whose user TS21 is not schema 21 of TS.
        let ts2 = SchemaMark {
            id: "fedcba9876543210fedcba9876543210".into(),
            schemas: 1,
            scale_blocks: 500,
            block_size: 16384,
            created_at: "2026-02-01T00:00:00Z".into(),
            ..mark("ts2", 1)
        };
        let schemas = vec![
            recorded(&mark("ts", 1), 101),
            recorded(&mark("ts", 2), 102),
            recorded(&mark("ts", 3), 103),
            recorded(&ts2, 104),
        ];
        let found = listed(&schemas);
        assert_eq!(
            found,
            vec![
                FoundDataSet {
                    prefix: "ts".into(),
                    id: "0123456789abcdef0123456789abcdef".into(),
                    schemas: 3,
                    schemas_found: 3,
                    scale_blocks: 4000,
                    block_size: 8192,
                    tablespace: Some("DATA".into()),
                    tablespaces_now: vec!["DATA".into()],
                    state: DataSetState::Complete,
                    bytes: None,
                    loaded_at: "2026-01-01T00:00:00Z".into(),
                    dbio_version: env!("CARGO_PKG_VERSION").into(),
                },
                FoundDataSet {
                    prefix: "ts2".into(),
                    id: "fedcba9876543210fedcba9876543210".into(),
                    schemas: 1,
                    schemas_found: 1,
                    scale_blocks: 500,
                    block_size: 16384,
                    tablespace: Some("DATA".into()),
                    tablespaces_now: vec!["DATA".into()],
                    state: DataSetState::Complete,
                    bytes: None,
                    loaded_at: "2026-02-01T00:00:00Z".into(),
                    dbio_version: env!("CARGO_PKG_VERSION").into(),
                },
            ]
        );
        // Core's discovery takes them as it takes PostgreSQL's: `--prefix ts2` (the config's
        // lower case) finds TS2's one schema of 500 blocks.
        let ask = DataSetAsk {
            prefix: "ts2".into(),
            schemas: None,
            scale: None,
        };
        let picked = pick(&ask, &found).expect("one data set of prefix ts2");
        assert_eq!(picked.map(|d| (d.schemas, d.scale_blocks)), Some((1, 500)));
    }

    #[test]
    fn an_unfinished_or_broken_data_set_is_loading_or_partial() {
        use dbio_core::discover::DataSetState;
        let states = |schemas: &[(CatalogRow, UserRow, TableRow)]| {
            listed(schemas)
                .iter()
                .map(|d| (d.prefix.clone(), d.schemas_found, d.state))
                .collect::<Vec<_>>()
        };
        let whole = || {
            vec![
                recorded(&mark("ts", 1), 101),
                recorded(&mark("ts", 2), 102),
                recorded(&mark("ts", 3), 103),
            ]
        };
        // A schema still marked loading.
        let mut s = whole();
        s[2] = recorded(&mark("ts", 3).with_state(LoadState::Loading), 103);
        assert_eq!(states(&s), [("ts".into(), 3, DataSetState::Loading)]);
        // A user created whose load has not marked CF1 yet: dbio's, and loading.
        let mut s = whole();
        s[2].2.comment = None;
        assert_eq!(states(&s), [("ts".into(), 3, DataSetState::Loading)]);
        // Its user dropped outside dbio (a stale row): two of three.
        let mut s = whole();
        s[2].1.username = "SOMEONE".into();
        assert_eq!(states(&s), [("ts".into(), 2, DataSetState::Partial)]);
        // Dropped and created again by someone else (another USER_ID): not the data set's.
        let mut s = whole();
        s[1].1.user_id = 999;
        assert_eq!(states(&s), [("ts".into(), 2, DataSetState::Partial)]);
        // No user of the data set has a mark yet: its scale is in no record, so it is left out.
        let mut s = whole();
        for schema in &mut s {
            schema.2.comment = None;
        }
        assert!(listed(&s).is_empty());
        // A user recorded by two admins' catalogs counts once.
        let s = whole();
        let mut rows: Vec<CatalogRow> = s.iter().map(|x| x.0.clone()).collect();
        rows.push(CatalogRow {
            owner: "ADMIN2".into(),
            ..rows[0].clone()
        });
        let users: Vec<UserRow> = s.iter().map(|x| x.1.clone()).collect();
        let tables: Vec<TableRow> = s.iter().map(|x| x.2.clone()).collect();
        let once = data_sets(&rows, &users, &tables);
        assert_eq!(
            once.iter()
                .map(|d| (d.schemas_found, d.state))
                .collect::<Vec<_>>(),
            [(3, DataSetState::Complete)]
        );
    }

    #[test]
    fn generated_passwords_pass_oracles_verify_rules() {
        for _ in 0..200 {
            let p = generate_password().unwrap();
            assert_eq!(p.len(), 24, "{p}");
            assert!(p.as_bytes()[0].is_ascii_uppercase(), "{p}");
            let count = |f: fn(&u8) -> bool| p.as_bytes().iter().filter(|b| f(b)).count();
            assert!(count(u8::is_ascii_uppercase) >= 2, "{p}");
            assert!(count(u8::is_ascii_lowercase) >= 2, "{p}");
            assert!(count(u8::is_ascii_digit) >= 2, "{p}");
            assert!(count(|b| *b == b'#' || *b == b'_') >= 2, "{p}");
            assert!(!p.contains('"'));
        }
        assert_ne!(generate_password().unwrap(), generate_password().unwrap());
        let users = vec!["USER1".to_string()];
        let e = check_given_password("user1", &users).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("user name USER1"), "{e}");
        assert!(check_given_password("x\"y", &users).is_err());
        assert!(check_given_password("Str0ng#Pass", &users).is_ok());
    }
}
