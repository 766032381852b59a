//! What setup runs, decided from the server's facts before anything is created: which
//! container it is in (CDB$ROOT is refused: local users cannot be created there, ORA-65096),
//! which tablespace the data set goes into (data.tablespace, else the database's default
//! permanent tablespace from DATABASE_PROPERTIES, never a guessed USERS) and that
//! tablespace's block size (from DBA_TABLESPACES, so a 16 kB tablespace gets 16 kB blocks);
//! and, from each schema user's records (`mark::ownership`), what setup does with it (keep,
//! build, rebuild, clean up an intent) and what teardown drops. Pure, so the statements and
//! decisions for each kind of database are unit-tested.

use dbio_core::dataset::DataSetPlan;
use serde::{Deserialize, Serialize};

use crate::OracleError;
use crate::mark::{CatalogRow, Identity, LoadState, Ownership, SchemaMark};
use crate::sql::{self, Stmt};

/// Where the session is: SYS_CONTEXT('USERENV', 'CON_NAME' / 'CON_ID' / 'CON_DBID') and
/// V$DATABASE.CDB. Recorded in every result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    pub con_name: String,
    /// 0 in a non-CDB, 1 in CDB$ROOT, 3.. in a PDB.
    pub con_id: u32,
    /// The container's DBID (a PDB's own, not V$DATABASE.DBID): AWR reports need it.
    pub con_dbid: i64,
    pub cdb: bool,
    /// PDBs open to users, from V$PDBS (read only in CDB$ROOT, to name them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pdbs: Vec<String>,
}

impl Container {
    pub fn is_root(&self) -> bool {
        self.cdb && (self.con_id == 1 || self.con_name.eq_ignore_ascii_case("CDB$ROOT"))
    }

    /// Refuses CDB$ROOT, naming the PDBs to connect to instead.
    pub fn check(&self) -> Result<(), OracleError> {
        if !self.is_root() {
            return Ok(());
        }
        let pdbs = if self.pdbs.is_empty() {
            "this CDB has no PDB open yet: create one (CREATE PLUGGABLE DATABASE) and open it"
                .to_string()
        } else {
            format!(
                "connect to a PDB's service instead, e.g. user@//host:port/{} (PDBs here: {})",
                self.pdbs[0],
                self.pdbs.join(", ")
            )
        };
        Err(OracleError::Usage(format!(
            "the target is the root container CDB$ROOT of a multitenant database, where dbio's \
             schema users (local users) cannot be created (ORA-65096); {pdbs}"
        )))
    }
}

/// One row of DBA_TABLESPACES.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tablespace {
    pub name: String,
    pub block_size: u64,
    pub contents: String,
    pub status: String,
}

impl Tablespace {
    /// The data set needs an online permanent tablespace.
    pub fn check(&self) -> Result<(), OracleError> {
        if self.contents != "PERMANENT" || self.status != "ONLINE" {
            return Err(OracleError::Usage(format!(
                "tablespace {} is {} and {}: dbio's tables need an ONLINE PERMANENT tablespace; \
                 set data.tablespace to one",
                self.name, self.contents, self.status
            )));
        }
        Ok(())
    }
}

/// The tablespace name setup uses: data.tablespace, else the database's default permanent
/// tablespace (DATABASE_PROPERTIES DEFAULT_PERMANENT_TABLESPACE).
pub fn tablespace_name(
    configured: Option<&str>,
    default_permanent: Option<&str>,
) -> Result<String, OracleError> {
    configured
        .or(default_permanent)
        .map(str::to_uppercase)
        .ok_or_else(|| {
            OracleError::Usage(
                "the database names no default permanent tablespace (DATABASE_PROPERTIES \
                 DEFAULT_PERMANENT_TABLESPACE); set data.tablespace"
                    .into(),
            )
        })
}

/// One step of a schema's setup: what it does (for messages) and the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub what: &'static str,
    pub stmt: Stmt,
}

/// The statements that build schema `n` in `ts`, in order, after its catalog row was
/// written (`sql::record_intent`, `sql::record_created`): the user, CF1, the mark `loading`,
/// the load, I_CF1, statistics, the mark `complete`. `plan.scale_blocks` is in blocks of
/// `ts.block_size` (the CLI builds the plan from the block size setup read).
pub fn schema_steps(
    plan: &DataSetPlan,
    mark: &SchemaMark,
    password: &str,
    ts: &Tablespace,
) -> Vec<Step> {
    let user = crate::mark::user_name(&mark.prefix, mark.schema);
    let t = ts.name.as_str();
    let step = |what, stmt| Step { what, stmt };
    let [one, minimize, truncate] = sql::one_row_per_block(&user);
    vec![
        step("creating the user", sql::create_user(&user, password, t)),
        step("granting CREATE SESSION", sql::grant_session(&user)),
        step("creating CF1", sql::create_table(&user, t)),
        step(
            "marking CF1 as loading",
            sql::comment_table(&user, &mark.with_state(LoadState::Loading).to_comment()),
        ),
        step("one row per block", one),
        step("one row per block", minimize),
        step("one row per block", truncate),
        step(
            "seeding DBMS_RANDOM",
            sql::seed(plan.schema_seed(mark.schema)),
        ),
        step("loading", sql::load(&user, plan.scale_blocks)),
        step("creating I_CF1", sql::create_index(&user, t)),
        step("gathering statistics", sql::gather_stats(&user)),
        step(
            "marking CF1 complete",
            sql::comment_table(&user, &mark.with_state(LoadState::Complete).to_comment()),
        ),
    ]
}

/// One schema user as setup and teardown see it: its records and what else it owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub user: String,
    pub schema: u32,
    pub own: Ownership,
    /// Objects the user owns besides dbio's CF1 and I_CF1 (only read for existing users).
    pub foreign: Vec<String>,
}

/// What setup does with one schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Complete at this scale: left as it is.
    Keep,
    /// Complete, but its mark counts another number of schemas: the mark is rewritten.
    Remark(Box<SchemaMark>),
    /// Nothing there: created (intent first).
    Build,
    /// An intent whose user never came to be: the row goes, then the schema is built.
    CleanThenBuild,
    /// dbio's, incomplete or of another scale (or `--force`), or a legacy mark with
    /// `--force`: the user is dropped, its row goes, then the schema is built again.
    Rebuild,
}

/// Setup's decisions for every schema, made before anything changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupDecision {
    /// The data set's identity: the one its existing schemas record, else a fresh one.
    pub identity: Identity,
    pub actions: Vec<(u32, Action)>,
}

/// A complete schema at the plan's scale and block size.
fn fit(mark: Option<&SchemaMark>, plan: &DataSetPlan, block_size: u64) -> bool {
    mark.is_some_and(|m| {
        m.state == LoadState::Complete
            && m.scale_blocks == plan.scale_blocks
            && m.block_size == block_size
    })
}

/// Decides setup from the schemas' records: refuses (before any change) a user that is not
/// dbio's, one whose records are disputed, a legacy one without `force`, one to rebuild that
/// owns objects dbio did not create, and two data sets under one prefix; resumes the rest.
pub fn decide_setup(
    plan: &DataSetPlan,
    block_size: u64,
    judged: &[Judged],
    force: bool,
    fresh: impl FnOnce() -> Result<Identity, OracleError>,
) -> Result<SetupDecision, OracleError> {
    let mut ids: Vec<(String, String)> = Vec::new();
    let mut refuse = Vec::new();
    for j in judged {
        match &j.own {
            Ownership::Ours { row, mark } => {
                let created = mark
                    .as_ref()
                    .map_or(row.created_at.clone(), |m| m.created_at.clone());
                if !ids.iter().any(|(id, _)| *id == row.data_set_id) {
                    ids.push((row.data_set_id.clone(), created));
                }
            }
            Ownership::Foreign => refuse.push(format!(
                "{}: exists and was not created by dbio; choose another data.prefix",
                j.user
            )),
            Ownership::Disputed(why) => refuse.push(format!("{}: {why}", j.user)),
            Ownership::Legacy if !force => refuse.push(format!(
                "{}: carries the mark of an older dbio, which does not say which data set it belongs to; rebuild \
                 it with `dbio setup --force` (same --prefix and --schemas), or drop it yourself",
                j.user
            )),
            _ => {}
        }
        let rebuilt = match &j.own {
            Ownership::Legacy => true,
            Ownership::Ours { mark, .. } => force || !fit(mark.as_deref(), plan, block_size),
            _ => false,
        };
        if rebuilt && !j.foreign.is_empty() {
            refuse.push(format!(
                "{}: would be rebuilt (DROP USER ... CASCADE), but it owns objects dbio did not create: {}; drop or \
                 move them yourself first",
                j.user,
                j.foreign.join(", ")
            ));
        }
    }
    if ids.len() > 1 {
        refuse.push(format!(
            "the schemas of prefix {} belong to {} data sets (ids {}): tear one down before setting this prefix up",
            plan.prefix.to_uppercase(),
            ids.len(),
            ids.iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !refuse.is_empty() {
        return Err(OracleError::Usage(format!(
            "setup refused before changing anything:\n  {}",
            refuse.join("\n  ")
        )));
    }
    let identity = match ids.into_iter().next() {
        Some((id, created_at)) => Identity { id, created_at },
        None => fresh()?,
    };
    let actions = judged
        .iter()
        .map(|j| {
            let a = match &j.own {
                Ownership::Absent => Action::Build,
                Ownership::Stale(_) => Action::CleanThenBuild,
                Ownership::Ours { mark: Some(m), .. }
                    if !force && fit(Some(m), plan, block_size) =>
                {
                    if m.schemas == plan.schemas {
                        Action::Keep
                    } else {
                        Action::Remark(Box::new(SchemaMark {
                            schemas: plan.schemas,
                            ..(**m).clone()
                        }))
                    }
                }
                _ => Action::Rebuild,
            };
            (j.schema, a)
        })
        .collect();
    Ok(SetupDecision { identity, actions })
}

/// What teardown does with one prefix's records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TeardownPlan {
    /// dbio's users, with what else each owns (non-empty: only CF1 is dropped, the user stays).
    pub drop: Vec<(CatalogRow, Vec<String>)>,
    /// Intents whose user does not exist: the rows go.
    pub stale: Vec<CatalogRow>,
    /// Users named like the prefix's schemas that dbio does not touch, and why.
    pub untouched: Vec<(String, String)>,
}

impl TeardownPlan {
    pub fn is_empty(&self) -> bool {
        self.drop.is_empty() && self.stale.is_empty() && self.untouched.is_empty()
    }
}

/// Decides teardown for the users of one prefix whose records were read: `own_catalog` is
/// the session user, the one catalog teardown may change; rows of another admin's catalog
/// are named, not dropped.
pub fn decide_teardown(judged: &[Judged], own_catalog: &str) -> TeardownPlan {
    let mut t = TeardownPlan::default();
    for j in judged {
        match &j.own {
            Ownership::Ours { row, .. } | Ownership::Stale(row) if row.owner != own_catalog => {
                t.untouched.push((
                    j.user.clone(),
                    format!(
                        "recorded in {}.DBIO_DATA_SETS: run the teardown as {}",
                        row.owner, row.owner
                    ),
                ));
            }
            Ownership::Ours { row, .. } => t.drop.push((row.clone(), j.foreign.clone())),
            Ownership::Stale(row) => t.stale.push(row.clone()),
            Ownership::Disputed(why) => t.untouched.push((j.user.clone(), why.clone())),
            Ownership::Legacy => t.untouched.push((
                j.user.clone(),
                "it carries the mark of an older dbio, which does not say which data set (prefix) it belongs to; \
                 rebuild it with `dbio setup --force` (same --prefix and --schemas) and tear it down then, or drop \
                 it yourself"
                    .into(),
            )),
            Ownership::Absent | Ownership::Foreign => {}
        }
    }
    t
}

/// run's preflight for one schema, from its records and the optimizer statistics setup
/// gathered (no scan of the table just before the window: at scale that takes minutes and
/// warms the cache). None = fit to run; Some(why) otherwise.
pub fn preflight(
    user: &str,
    own: &Ownership,
    stats: Option<(Option<i64>, Option<i64>)>,
    scale_blocks: u64,
) -> Option<String> {
    if let Some(why) = records_problem(user, own, scale_blocks) {
        return Some(why);
    }
    match stats {
        Some((Some(rows), Some(blocks)))
            if rows == scale_blocks as i64 && blocks >= scale_blocks as i64 =>
        {
            None
        }
        Some((Some(rows), Some(blocks))) => Some(format!(
            "{user}: optimizer statistics say {rows} rows in {blocks} blocks, expected {scale_blocks} rows, one per block: run `dbio check`, then `dbio setup --force`"
        )),
        _ => Some(format!(
            "{user}: CF1 has no optimizer statistics: rerun `dbio setup` (it gathers them), or gather them with DBMS_STATS.GATHER_TABLE_STATS"
        )),
    }
}

/// What the records say against a complete schema at `scale_blocks` (check and run): None
/// when the schema is dbio's, complete and of that scale.
pub fn records_problem(user: &str, own: &Ownership, scale_blocks: u64) -> Option<String> {
    let m = match own {
        Ownership::Ours { mark: Some(m), .. } => m,
        Ownership::Ours { mark: None, .. } | Ownership::Stale(_) => {
            return Some(format!(
                "{user}: its setup stopped before the load (interrupted or failed): rerun `dbio setup`"
            ));
        }
        Ownership::Absent => return Some(format!("{user}: does not exist: run `dbio setup`")),
        Ownership::Foreign => {
            return Some(format!(
                "{user}: exists but dbio did not create it: choose another data.prefix"
            ));
        }
        Ownership::Disputed(why) => return Some(format!("{user}: {why}")),
        Ownership::Legacy => {
            return Some(format!(
                "{user}: carries the mark of an older dbio (before data set ids): rebuild it with `dbio setup --force`"
            ));
        }
    };
    if m.state != LoadState::Complete {
        return Some(format!(
            "{user}: load incomplete (interrupted or failed): rerun `dbio setup` to finish it"
        ));
    }
    (m.scale_blocks != scale_blocks).then(|| {
        format!(
            "{user}: holds {} blocks, the configuration asks for {scale_blocks}: rerun `dbio setup --force` or set data.scale to match",
            m.scale_blocks
        )
    })
}

/// The buffer cache that holds blocks of `block_size` (the DEFAULT cache for the standard
/// block size, the nK cache otherwise), and its bytes on each instance that has one.
fn buffer_cache(
    block_size: u64,
    db_block_size: u64,
    caches: &[(u32, String, u64)],
) -> (String, Vec<u64>) {
    let component = if block_size == db_block_size {
        "DEFAULT buffer cache".to_string()
    } else {
        format!("DEFAULT {}K buffer cache", block_size / 1024)
    };
    let of_component = caches
        .iter()
        .filter(|(_, c, _)| c.eq_ignore_ascii_case(&component))
        .map(|(_, _, b)| *b)
        .collect();
    (component, of_component)
}

/// The bytes of the buffer cache that holds blocks of `block_size`, over every instance:
/// RAC's cache fusion ships blocks between the instances' caches, so together they hold the
/// sum of their sizes (that is the cache to beat, not the largest instance's).
pub fn buffer_cache_bytes(
    block_size: u64,
    db_block_size: u64,
    caches: &[(u32, String, u64)],
) -> u64 {
    buffer_cache(block_size, db_block_size, caches)
        .1
        .iter()
        .sum()
}

/// The buffer-cache check: the data set should be several times the buffer cache that holds
/// its blocks (the DEFAULT cache for the standard block size, the nK cache otherwise), or
/// most reads are hits. SLOB's simple.ora sets db_cache_size=128M to force physical I/O.
/// `caches` are GV$SGA_DYNAMIC_COMPONENTS rows (instance, component, bytes).
pub fn cache_warning(
    data_bytes: u64,
    block_size: u64,
    db_block_size: u64,
    caches: &[(u32, String, u64)],
) -> Option<String> {
    let (component, of_component) = buffer_cache(block_size, db_block_size, caches);
    if of_component.is_empty() {
        return None;
    }
    let cache: u64 = of_component.iter().sum();
    let multiple = dbio_core::dataset::MIN_BUFFER_MULTIPLE;
    (data_bytes < multiple.saturating_mul(cache)).then(|| {
        format!(
            "the data set ({}) is smaller than {multiple} x the {component} ({}{}, V$SGA_DYNAMIC_COMPONENTS): \
             most reads will be buffer hits, not I/O. Raise data.scale or data.schemas, or shrink the cache \
             (SLOB's simple.ora uses db_cache_size=128M to force physical reads)",
            dbio_core::units::format_bytes(data_bytes),
            dbio_core::units::format_bytes(cache),
            if of_component.len() > 1 {
                format!(" over {} instances", of_component.len())
            } else {
                String::new()
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dbio_core::config::DataConfig;
    use dbio_core::units::SizeSpec;

    fn plan(block_size: u64, scale: &str) -> DataSetPlan {
        let data = DataConfig {
            schemas: 2,
            scale: scale.parse::<SizeSpec>().unwrap(),
            ..DataConfig::default()
        };
        DataSetPlan::new(&data, block_size)
    }

    fn tablespace(name: &str, block_size: u64) -> Tablespace {
        Tablespace {
            name: name.into(),
            block_size,
            contents: "PERMANENT".into(),
            status: "ONLINE".into(),
        }
    }

    fn texts(steps: &[Step]) -> Vec<&str> {
        steps.iter().map(|s| s.stmt.text.as_str()).collect()
    }

    fn identity() -> Identity {
        Identity {
            id: "0123456789abcdef0123456789abcdef".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    fn mark(p: &DataSetPlan, n: u32, state: LoadState) -> SchemaMark {
        SchemaMark::new(
            &identity(),
            &p.prefix,
            n,
            p.schemas,
            p.scale_blocks,
            p.block_size,
            None,
            p.schema_seed(n),
            state,
        )
    }

    // Regression: without data.tablespace the user got quota on USERS only and no DEFAULT
    // TABLESPACE (ORA-00959 where USERS does not exist, ORA-01950 where the default differs).
    #[test]
    fn a_database_without_users_gets_its_default_permanent_tablespace() {
        let name = tablespace_name(None, Some("DATA")).unwrap();
        assert_eq!(name, "DATA");
        let p = plan(8192, "1000blocks");
        let steps = schema_steps(
            &p,
            &mark(&p, 1, LoadState::Loading),
            "pw",
            &tablespace(&name, 8192),
        );
        let all = texts(&steps).join("\n");
        assert!(!all.contains("USERS"), "{all}");
        assert_eq!(
            steps[0].stmt.text,
            "CREATE USER \"USER1\" IDENTIFIED BY \"pw\" DEFAULT TABLESPACE \"DATA\" QUOTA UNLIMITED ON \"DATA\""
        );
        assert!(steps[2].stmt.text.ends_with("TABLESPACE \"DATA\""));
        assert!(steps[9].stmt.text.ends_with("TABLESPACE \"DATA\""));
        // data.tablespace wins over the default; none at all is a clear error.
        assert_eq!(tablespace_name(Some("slob"), Some("DATA")).unwrap(), "SLOB");
        let e = tablespace_name(None, None).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("data.tablespace"), "{e}");
        let temp = Tablespace {
            contents: "TEMPORARY".into(),
            ..tablespace("TEMP", 8192)
        };
        assert!(
            temp.check()
                .unwrap_err()
                .to_string()
                .contains("ONLINE PERMANENT")
        );
    }

    // Regression: a DSN pointing at CDB$ROOT failed with ORA-65096 and no hint.
    #[test]
    fn cdb_root_is_refused_naming_the_pdb_to_use() {
        let root = Container {
            con_name: "CDB$ROOT".into(),
            con_id: 1,
            con_dbid: 2_911_416_339,
            cdb: true,
            pdbs: vec!["ORCLPDB1".into(), "SALES".into()],
        };
        let e = root.check().unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("CDB$ROOT")
                && m.contains("ORA-65096")
                && m.contains("user@//host:port/ORCLPDB1")
                && m.contains("ORCLPDB1, SALES"),
            "{m}"
        );
        let pdb = Container {
            con_name: "ORCLPDB1".into(),
            con_id: 3,
            pdbs: vec![],
            ..root.clone()
        };
        assert!(pdb.check().is_ok());
        let non_cdb = Container {
            con_name: "SLOB".into(),
            con_id: 0,
            cdb: false,
            pdbs: vec![],
            ..root
        };
        assert!(non_cdb.check().is_ok());
    }

    // Regression: the block size was fixed at 8 kB.
    #[test]
    fn a_16k_tablespace_gets_16k_blocks() {
        let p = plan(16384, "64MB");
        assert_eq!(p.scale_blocks, 4096, "64 MB of 16 kB blocks");
        let steps = schema_steps(
            &p,
            &mark(&p, 2, LoadState::Loading),
            "pw",
            &tablespace("BIG16K", 16384),
        );
        assert!(
            steps[3].stmt.text.contains("\"block_size\":16384")
                && steps[3].stmt.text.contains("\"state\":\"loading\""),
            "{}",
            steps[3].stmt.text
        );
        assert!(steps[11].stmt.text.contains("\"state\":\"complete\""));
        let load = &steps[8].stmt;
        assert_eq!(load.binds[3], ("row_count", sql::Value::Int(4096)));
        assert!(
            steps[2].stmt.text.contains("PCTFREE 99")
                && steps[2].stmt.text.ends_with("TABLESPACE \"BIG16K\"")
        );
        // The seed of schema 2 is the plan's, as text.
        assert_eq!(
            steps[7].stmt.binds,
            [("seed", sql::Value::Text(p.schema_seed(2).to_string()))]
        );
        // The sizing check looks at the 16K cache, not the DEFAULT one.
        let caches = [
            (1, "DEFAULT buffer cache".to_string(), 128u64 << 20),
            (1, "DEFAULT 16K buffer cache".to_string(), 1u64 << 30),
        ];
        let w = cache_warning(128 << 20, 16384, 8192, &caches).unwrap();
        assert!(w.contains("DEFAULT 16K buffer cache"), "{w}");
        assert!(cache_warning(8u64 << 30, 16384, 8192, &caches).is_none());
        assert!(cache_warning(256 << 20, 8192, 8192, &caches).is_some());
        assert!(cache_warning(1 << 30, 8192, 8192, &caches).is_none());
    }

    fn row(n: u32) -> CatalogRow {
        CatalogRow {
            owner: "SYSTEM".into(),
            username: format!("USER{n}"),
            data_set_id: identity().id,
            prefix: "USER".into(),
            schema: n,
            state: crate::mark::CatalogState::Created,
            user_id: Some(100 + i64::from(n)),
            password: Some("pw".into()),
            created_at: "2026-01-01T10:00:00".into(),
        }
    }

    fn judged(n: u32, own: Ownership) -> Judged {
        Judged {
            user: format!("USER{n}"),
            schema: n,
            own,
            foreign: Vec::new(),
        }
    }

    fn ours(p: &DataSetPlan, n: u32, state: Option<LoadState>) -> Ownership {
        Ownership::Ours {
            row: row(n),
            mark: state.map(|s| Box::new(mark(p, n, s))),
        }
    }

    #[test]
    fn the_preflight_reads_records_and_statistics() {
        let p = plan(8192, "1000blocks");
        let own = ours(&p, 1, Some(LoadState::Complete));
        assert_eq!(
            preflight("USER1", &own, Some((Some(1000), Some(1004))), 1000),
            None
        );
        let why = preflight("USER1", &own, Some((Some(10), Some(1))), 1000).unwrap();
        assert!(why.contains("10 rows in 1 blocks"), "{why}");
        let why = preflight("USER1", &own, Some((None, None)), 1000).unwrap();
        assert!(why.contains("no optimizer statistics"), "{why}");
        let why = preflight("USER1", &own, None, 2000).unwrap();
        assert!(why.contains("holds 1000 blocks"), "{why}");
        let loading = ours(&p, 1, Some(LoadState::Loading));
        assert!(
            preflight("USER1", &loading, None, 1000)
                .unwrap()
                .contains("load incomplete")
        );
        assert!(
            preflight("USER1", &ours(&p, 1, None), None, 1000)
                .unwrap()
                .contains("stopped before")
        );
        assert!(
            preflight("USER1", &Ownership::Absent, None, 1000)
                .unwrap()
                .contains("dbio setup")
        );
        assert!(
            preflight("USER1", &Ownership::Legacy, None, 1000)
                .unwrap()
                .contains("--force")
        );
    }

    // Regression: a setup killed between CREATE USER and the mark left an unmarked user that
    // the next setup refused; now it is recorded and resumed.
    #[test]
    fn setup_resumes_what_an_interrupted_setup_left() {
        let p = plan(8192, "1000blocks");
        let resumed = [
            judged(1, ours(&p, 1, Some(LoadState::Complete))),
            judged(2, ours(&p, 2, None)),
        ];
        let d = decide_setup(&p, 8192, &resumed, false, || {
            panic!("the data set has an id")
        })
        .unwrap();
        assert_eq!(
            d.identity.id,
            identity().id,
            "the data set keeps its identity"
        );
        assert_eq!(d.identity.created_at, "2026-01-01T00:00:00Z");
        assert_eq!(d.actions, [(1, Action::Keep), (2, Action::Rebuild)]);
        // An intent without a user: the row is cleaned, the schema built; nothing there: built.
        let d = decide_setup(
            &p,
            8192,
            &[
                judged(1, Ownership::Stale(row(1))),
                judged(2, Ownership::Absent),
            ],
            false,
            Identity::fresh,
        )
        .unwrap();
        assert_eq!(d.actions, [(1, Action::CleanThenBuild), (2, Action::Build)]);
        assert_ne!(
            d.identity.id,
            identity().id,
            "a fresh data set gets a fresh id"
        );
        // A kept schema whose mark counts another number of schemas gets a new mark.
        let mut three = p.clone();
        three.schemas = 3;
        let d = decide_setup(
            &three,
            8192,
            &[judged(1, ours(&p, 1, Some(LoadState::Complete)))],
            false,
            Identity::fresh,
        )
        .unwrap();
        assert!(matches!(&d.actions[0], (1, Action::Remark(m)) if m.schemas == 3));
        // --force rebuilds a complete one; another scale is rebuilt anyway.
        let d = decide_setup(
            &p,
            8192,
            &[judged(1, ours(&p, 1, Some(LoadState::Complete)))],
            true,
            Identity::fresh,
        )
        .unwrap();
        assert_eq!(d.actions, [(1, Action::Rebuild)]);
        let big = plan(8192, "2000blocks");
        let d = decide_setup(
            &big,
            8192,
            &[judged(1, ours(&p, 1, Some(LoadState::Complete)))],
            false,
            Identity::fresh,
        )
        .unwrap();
        assert_eq!(d.actions, [(1, Action::Rebuild)]);
    }

    #[test]
    fn setup_refuses_what_is_not_dbios_before_any_change() {
        let p = plan(8192, "1000blocks");
        let e = decide_setup(
            &p,
            8192,
            &[
                judged(1, Ownership::Foreign),
                judged(2, Ownership::Disputed("a copied mark".into())),
                judged(3, Ownership::Legacy),
            ],
            false,
            Identity::fresh,
        )
        .unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("USER1: exists and was not created by dbio")
                && m.contains("USER2: a copied mark")
                && m.contains("USER3: carries the mark of an older dbio"),
            "{m}"
        );
        // A schema to rebuild that owns the user's objects is never dropped with CASCADE.
        let mut j = judged(1, ours(&p, 1, Some(LoadState::Loading)));
        j.foreign = vec!["TABLE PAYROLL".into()];
        let m = decide_setup(&p, 8192, &[j], false, Identity::fresh)
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("owns objects dbio did not create: TABLE PAYROLL"),
            "{m}"
        );
        // Two data sets under one prefix.
        let mut other = row(2);
        other.data_set_id = "ffff".into();
        let m = decide_setup(
            &p,
            8192,
            &[
                judged(1, ours(&p, 1, Some(LoadState::Complete))),
                judged(
                    2,
                    Ownership::Ours {
                        row: other,
                        mark: None,
                    },
                ),
            ],
            false,
            Identity::fresh,
        )
        .unwrap_err()
        .to_string();
        assert!(m.contains("belong to 2 data sets"), "{m}");
        // With --force a legacy user (owning nothing else) is rebuilt.
        let d = decide_setup(
            &p,
            8192,
            &[judged(1, Ownership::Legacy)],
            true,
            Identity::fresh,
        )
        .unwrap();
        assert_eq!(d.actions, [(1, Action::Rebuild)]);
    }

    #[test]
    fn teardown_drops_its_own_records_and_names_the_rest() {
        let p = plan(8192, "1000blocks");
        let mut other_admin = row(3);
        other_admin.owner = "BENCH".into();
        let mut keeps = judged(2, ours(&p, 2, Some(LoadState::Complete)));
        keeps.foreign = vec!["VIEW V".into()];
        let t = decide_teardown(
            &[
                judged(1, ours(&p, 1, None)),
                keeps,
                judged(
                    3,
                    Ownership::Ours {
                        row: other_admin,
                        mark: None,
                    },
                ),
                judged(4, Ownership::Stale(row(4))),
                judged(5, Ownership::Disputed("a copied mark".into())),
                judged(6, Ownership::Legacy),
            ],
            "SYSTEM",
        );
        let dropped: Vec<(&str, usize)> = t
            .drop
            .iter()
            .map(|(r, f)| (r.username.as_str(), f.len()))
            .collect();
        assert_eq!(dropped, [("USER1", 0), ("USER2", 1)]);
        assert_eq!(t.stale.len(), 1);
        let untouched: Vec<&str> = t.untouched.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(untouched, ["USER3", "USER5", "USER6"]);
        assert!(t.untouched[0].1.contains("run the teardown as BENCH"));
    }

    // Regression: on RAC the cache check took the largest instance's cache, not their sum.
    #[test]
    fn rac_caches_add_up() {
        let caches = [
            (1, "DEFAULT buffer cache".to_string(), 1u64 << 30),
            (2, "DEFAULT buffer cache".to_string(), 1u64 << 30),
        ];
        // 6 GiB is over 4 x one instance's 1 GiB, under 4 x both (8 GiB).
        let w = cache_warning(6 << 30, 8192, 8192, &caches).unwrap();
        assert!(w.contains("2.0 GiB over 2 instances"), "{w}");
        assert!(cache_warning(9 << 30, 8192, 8192, &caches).is_none());
    }
}
