//! What setup runs, decided from the server's facts before anything is created: which
//! container it is in (CDB$ROOT is refused: local users cannot be created there, ORA-65096),
//! which tablespace the data set goes into (data.tablespace, else the database's default
//! permanent tablespace from DATABASE_PROPERTIES, never a guessed USERS) and that
//! tablespace's block size (from DBA_TABLESPACES, so a 16 kB tablespace gets 16 kB blocks).
//! Pure, so the statements for each kind of database are unit-tested.

use dbio_core::dataset::DataSetPlan;
use serde::{Deserialize, Serialize};

use crate::OracleError;
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

/// The mark a schema's CF1 carries: state, blocks and block size.
pub fn mark(state: &str, scale_blocks: u64, block_size: u64) -> String {
    format!("{{\"state\":\"{state}\",\"scale_blocks\":{scale_blocks},\"block_size\":{block_size}}}")
}

/// What a mark says, parsed (older marks lack block_size).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Mark {
    pub state: String,
    pub scale_blocks: u64,
    #[serde(default)]
    pub block_size: Option<u64>,
}

impl Mark {
    /// Parses `dbio {...}`; None for a comment dbio did not write.
    pub fn parse(comment: &str) -> Option<Mark> {
        let json = comment.strip_prefix(sql::MARK)?.trim();
        serde_json::from_str(json).ok()
    }

    pub fn complete(&self) -> bool {
        self.state == "complete"
    }
}

/// One step of a schema's setup: what it does (for messages) and the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub what: &'static str,
    pub stmt: Stmt,
}

/// The statements that build schema `n` in `ts`, in order. `plan.scale_blocks` is in blocks
/// of `ts.block_size` (the CLI builds the plan from the block size setup read).
pub fn schema_steps(plan: &DataSetPlan, n: u32, password: &str, ts: &Tablespace) -> Vec<Step> {
    let user = sql::user_name(&plan.prefix, n);
    let t = ts.name.as_str();
    let step = |what, stmt| Step { what, stmt };
    let [one, minimize, truncate] = sql::one_row_per_block(&user);
    vec![
        step("creating the user", sql::create_user(&user, password, t)),
        step("granting CREATE SESSION", sql::grant_session(&user)),
        step("creating CF1", sql::create_table(&user, t)),
        step(
            "marking CF1 as loading",
            sql::comment_table(&user, &mark("loading", plan.scale_blocks, ts.block_size)),
        ),
        step("one row per block", one),
        step("one row per block", minimize),
        step("one row per block", truncate),
        step("seeding DBMS_RANDOM", sql::seed(plan.schema_seed(n))),
        step("loading", sql::load(&user, plan.scale_blocks)),
        step("creating I_CF1", sql::create_index(&user, t)),
        step("gathering statistics", sql::gather_stats(&user)),
        step(
            "marking CF1 complete",
            sql::comment_table(&user, &mark("complete", plan.scale_blocks, ts.block_size)),
        ),
    ]
}

/// run's preflight for one schema, from its mark and the optimizer statistics setup gathered
/// (no scan of the table just before the window: at scale that takes minutes and warms the
/// cache). None = fit to run; Some(why) otherwise.
pub fn preflight(
    user: &str,
    mark: Option<&Mark>,
    stats: Option<(Option<i64>, Option<i64>)>,
    scale_blocks: u64,
) -> Option<String> {
    let Some(m) = mark else {
        return Some(format!(
            "{user}: missing or not created by dbio: run `dbio setup`"
        ));
    };
    if !m.complete() {
        return Some(format!("{user}: load incomplete: rerun `dbio setup`"));
    }
    if m.scale_blocks != scale_blocks {
        return Some(format!(
            "{user}: holds {} blocks, the configuration asks for {scale_blocks}: rerun `dbio setup --force` or set data.scale to match",
            m.scale_blocks
        ));
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
    let component = if block_size == db_block_size {
        "DEFAULT buffer cache".to_string()
    } else {
        format!("DEFAULT {}K buffer cache", block_size / 1024)
    };
    // RAC: each instance caches blocks on its own; the largest cache is the one to beat.
    let cache = caches
        .iter()
        .filter(|(_, c, _)| c.eq_ignore_ascii_case(&component))
        .map(|(_, _, b)| *b)
        .max()?;
    let multiple = dbio_core::dataset::MIN_BUFFER_MULTIPLE;
    (data_bytes < multiple.saturating_mul(cache)).then(|| {
        format!(
            "the data set ({}) is smaller than {multiple} x the {component} ({}, V$SGA_DYNAMIC_COMPONENTS): \
             most reads will be buffer hits, not I/O. Raise data.scale or data.schemas, or shrink the cache \
             (SLOB's simple.ora uses db_cache_size=128M to force physical reads)",
            dbio_core::units::format_bytes(data_bytes),
            dbio_core::units::format_bytes(cache)
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

    // Regression: without data.tablespace the user got quota on USERS only and no DEFAULT
    // TABLESPACE (ORA-00959 where USERS does not exist, ORA-01950 where the default differs).
    #[test]
    fn a_database_without_users_gets_its_default_permanent_tablespace() {
        let name = tablespace_name(None, Some("DATA")).unwrap();
        assert_eq!(name, "DATA");
        let steps = schema_steps(&plan(8192, "1000blocks"), 1, "pw", &tablespace(&name, 8192));
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
        assert_eq!(e.exit_code(), 2);
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
        assert_eq!(e.exit_code(), 2);
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
        let steps = schema_steps(&p, 2, "pw", &tablespace("BIG16K", 16384));
        assert!(
            steps[3].stmt.text.contains("\"block_size\":16384"),
            "{}",
            steps[3].stmt.text
        );
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

    #[test]
    fn marks_round_trip_and_the_preflight_reads_statistics() {
        let m = Mark::parse(&format!("dbio {}", mark("complete", 1000, 8192))).unwrap();
        assert!(m.complete() && m.scale_blocks == 1000 && m.block_size == Some(8192));
        let old = Mark::parse("dbio {\"state\":\"complete\",\"scale_blocks\":1000}").unwrap();
        assert_eq!(old.block_size, None);
        assert!(Mark::parse("a comment someone wrote").is_none());
        assert_eq!(
            preflight("U1", Some(&m), Some((Some(1000), Some(1004))), 1000),
            None
        );
        let why = preflight("U1", Some(&m), Some((Some(10), Some(1))), 1000).unwrap();
        assert!(why.contains("10 rows in 1 blocks"), "{why}");
        let why = preflight("U1", Some(&m), Some((None, None)), 1000).unwrap();
        assert!(why.contains("no optimizer statistics"), "{why}");
        let why = preflight("U1", Some(&m), None, 2000).unwrap();
        assert!(why.contains("holds 1000 blocks"), "{why}");
        assert!(
            preflight("U1", None, None, 1000)
                .unwrap()
                .contains("dbio setup")
        );
    }
}
