//! Every SQL text the Oracle backend runs, built here so each can be unit-tested: SLOB's
//! schema (users USER1..USERn, table CF1 one row per block, index I_CF1), its load, the
//! sessions' two statements, the facts setup and run read from the server, and the
//! collector's V$ queries.
//!
//! Every statement is a [`Stmt`]: its text and the placeholders it binds live together, and
//! the client binds by name only (`execute_named`, `query_row_as_named`). Binding by position
//! is a trap: ODPI-C numbers placeholders left to right whatever their digits say, so
//! `SET C2 = :3 WHERE CUSTID BETWEEN :1 AND :2` bound as (lo, hi, value) puts `lo` into C2.
//! No name appears twice in one text, so no reader has to know how OCI treats a repeated name.

/// Table and index names, as SLOB names them.
pub const TABLE: &str = "CF1";
pub const INDEX: &str = "I_CF1";
/// Filler columns C2..C9 of 128 bytes, as the PostgreSQL schema (SLOB has C2..C20).
pub const FILLER_COLUMNS: usize = 8;
pub const FILLER_LEN: usize = 128;
/// What the load's sort holds per row: the key and DBMS_RANDOM.VALUE (NUMBERs of up to 22
/// bytes each) and the sort's own overhead; the TEMP check sizes the sort with it.
pub const SORT_BYTES_PER_ROW: u64 = 64;
/// dbio's record of the schema users it creates, in the admin's own schema (see `mark`).
pub const CATALOG: &str = "DBIO_DATA_SETS";
/// MODULE of dbio's measured sessions (the sampler finds them by it).
pub const MODULE: &str = "dbio";

/// A value bound to a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(i64),
    Text(String),
    /// NULL (bound as a text).
    Null,
    /// An OUT placeholder of a PL/SQL block that returns a number.
    OutInt,
}

/// One statement: its text and, in order, the placeholder names it binds with their values.
/// Statements the sessions prepare once carry template values; at each call the session
/// binds new values to the same names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub text: String,
    pub binds: Vec<(&'static str, Value)>,
}

impl Stmt {
    /// A statement without placeholders (DDL takes none).
    pub fn plain(text: impl Into<String>) -> Stmt {
        Stmt {
            text: text.into(),
            binds: Vec::new(),
        }
    }

    fn with(text: impl Into<String>, binds: Vec<(&'static str, Value)>) -> Stmt {
        Stmt {
            text: text.into(),
            binds,
        }
    }

    /// The placeholder names this statement binds, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.binds.iter().map(|(n, _)| *n).collect()
    }
}

fn text(v: &str) -> Value {
    Value::Text(v.to_string())
}

/// An Oracle identifier, quoted and upper-cased (unquoted names fold to upper case).
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.to_uppercase().replace('"', ""))
}

/// A string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

pub use crate::mark::user_name;

// --- What setup and run read from the server before anything else -------------------------

/// The container the session is in. CON_NAME is CDB$ROOT in a multitenant root, the PDB's
/// name in a PDB, the database's name in a non-CDB (12.1+; V$DATABASE.CDB is 12.1+ too).
pub fn container() -> Stmt {
    Stmt::plain(
        "SELECT SYS_CONTEXT('USERENV', 'CON_NAME'), TO_NUMBER(SYS_CONTEXT('USERENV', 'CON_ID')), \
         TO_NUMBER(SYS_CONTEXT('USERENV', 'CON_DBID')), (SELECT cdb FROM v$database) FROM DUAL",
    )
}

/// Before 12.1 (no CON_NAME, no V$DATABASE.CDB): a non-CDB, its name and DBID.
pub fn non_cdb_database() -> Stmt {
    Stmt::plain("SELECT name, dbid FROM v$database")
}

/// The PDBs a user connected to CDB$ROOT could use instead.
pub fn pdbs() -> Stmt {
    Stmt::plain("SELECT name FROM v$pdbs WHERE name <> 'PDB$SEED' ORDER BY con_id")
}

/// The database's default permanent tablespace (in a PDB, the PDB's own).
pub fn default_tablespace() -> Stmt {
    Stmt::with(
        "SELECT property_value FROM database_properties WHERE property_name = :property",
        vec![("property", text("DEFAULT_PERMANENT_TABLESPACE"))],
    )
}

/// Block size, contents and status of the tablespace the data set goes into.
pub fn tablespace(name: &str) -> Stmt {
    Stmt::with(
        "SELECT block_size, contents, status FROM dba_tablespaces WHERE tablespace_name = :tablespace",
        vec![("tablespace", text(&name.to_uppercase()))],
    )
}

/// The buffer caches of every instance (DEFAULT, KEEP, RECYCLE and the nK caches), bytes.
pub fn buffer_caches() -> Stmt {
    Stmt::plain(
        "SELECT inst_id, component, current_size FROM gv$sga_dynamic_components \
         WHERE component IN ('DEFAULT buffer cache', 'KEEP buffer cache', 'RECYCLE buffer cache', \
         'DEFAULT 2K buffer cache', 'DEFAULT 4K buffer cache', 'DEFAULT 8K buffer cache', \
         'DEFAULT 16K buffer cache', 'DEFAULT 32K buffer cache')",
    )
}

/// The database's standard block size (the DEFAULT buffer cache holds blocks of this size).
pub fn db_block_size() -> Stmt {
    Stmt::with(
        "SELECT TO_NUMBER(value) FROM v$parameter WHERE name = :parameter",
        vec![("parameter", text("db_block_size"))],
    )
}

// --- Setup, check, teardown ----------------------------------------------------------------

pub fn user_exists(user: &str) -> Stmt {
    Stmt::with(
        "SELECT COUNT(*) FROM all_users WHERE username = :username",
        vec![("username", text(user))],
    )
}

/// One user by its exact name: id and creation time (server clock), the catalog's check that
/// the user is the one dbio created.
pub fn user_row(user: &str) -> Stmt {
    Stmt::with(
        "SELECT username, user_id, TO_CHAR(created, 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM all_users \
         WHERE username = :username",
        vec![("username", text(user))],
    )
}

/// Every CF1 and its comment, by exact table name (no pattern): teardown names the users
/// whose mark no catalog backs, and legacy marks.
pub fn cf1_comments() -> Stmt {
    Stmt::with(
        "SELECT owner, comments FROM all_tab_comments WHERE table_name = :table_name \
         AND table_type = 'TABLE' ORDER BY owner",
        vec![("table_name", text(TABLE))],
    )
}

// --- The catalog (`mark`): dbio's record of the users it creates ---------------------------

/// The user the session is logged in as: the catalog lives in its schema.
pub fn session_user() -> Stmt {
    Stmt::plain("SELECT SYS_CONTEXT('USERENV', 'SESSION_USER') FROM DUAL")
}

/// Every table named DBIO_DATA_SETS the session can see, with its comment: the catalogs
/// (dbio's are those whose comment is the catalog mark).
pub fn catalogs() -> Stmt {
    Stmt::with(
        "SELECT t.owner, c.comments FROM all_tables t LEFT JOIN all_tab_comments c \
         ON c.owner = t.owner AND c.table_name = t.table_name WHERE t.table_name = :table_name \
         ORDER BY t.owner",
        vec![("table_name", text(CATALOG))],
    )
}

fn catalog_table(owner: &str) -> String {
    format!("{}.{CATALOG}", ident(owner))
}

/// The catalog, created by setup in the admin's schema when it is missing.
pub fn create_catalog(owner: &str) -> Stmt {
    Stmt::plain(format!(
        "CREATE TABLE {} (USERNAME VARCHAR2(128) NOT NULL PRIMARY KEY, DATA_SET_ID VARCHAR2(32) NOT NULL, \
         PREFIX VARCHAR2(128) NOT NULL, SCHEMA_NO NUMBER(10) NOT NULL, STATE VARCHAR2(16) NOT NULL, \
         USER_ID NUMBER, PASSWORD VARCHAR2(128), CREATED_AT VARCHAR2(19) NOT NULL)",
        catalog_table(owner)
    ))
}

pub fn comment_catalog(owner: &str) -> Stmt {
    Stmt::plain(format!(
        "COMMENT ON TABLE {} IS {}",
        catalog_table(owner),
        literal(&crate::mark::catalog_comment())
    ))
}

/// Teardown drops the catalog once no data set is recorded in it.
pub fn drop_catalog(owner: &str) -> Stmt {
    Stmt::plain(format!("DROP TABLE {} PURGE", catalog_table(owner)))
}

/// A catalog's rows: all (prefix None: `dbio list`), or one prefix's, exact.
pub fn catalog_rows(owner: &str, prefix: Option<&str>) -> Stmt {
    let cols =
        "SELECT username, data_set_id, prefix, schema_no, state, user_id, password, created_at";
    match prefix {
        None => Stmt::plain(format!(
            "{cols} FROM {} ORDER BY prefix, schema_no",
            catalog_table(owner)
        )),
        Some(p) => Stmt::with(
            format!(
                "{cols} FROM {} WHERE prefix = :prefix ORDER BY schema_no",
                catalog_table(owner)
            ),
            vec![("prefix", text(&p.to_uppercase()))],
        ),
    }
}

/// The users a catalog records, as ALL_USERS has them (`dbio list`): one query for all.
pub fn catalog_users(owner: &str) -> Stmt {
    Stmt::plain(format!(
        "SELECT u.username, u.user_id, TO_CHAR(u.created, 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM all_users u \
         WHERE u.username IN (SELECT d.username FROM {} d) ORDER BY u.username",
        catalog_table(owner)
    ))
}

/// The CF1 of every user a catalog records, with the tablespace it is in now and its comment
/// (dbio's mark), by exact table name (`dbio list`): one query for all.
pub fn catalog_tables(owner: &str) -> Stmt {
    Stmt::with(
        format!(
            "SELECT t.owner, t.tablespace_name, c.comments FROM all_tables t LEFT JOIN all_tab_comments c \
             ON c.owner = t.owner AND c.table_name = t.table_name WHERE t.table_name = :table_name \
             AND t.owner IN (SELECT d.username FROM {} d) ORDER BY t.owner",
            catalog_table(owner)
        ),
        vec![("table_name", text(TABLE))],
    )
}

/// The catalog row of one user, exact.
pub fn catalog_row(owner: &str, user: &str) -> Stmt {
    Stmt::with(
        format!(
            "SELECT username, data_set_id, prefix, schema_no, state, user_id, password, created_at \
             FROM {} WHERE username = :username",
            catalog_table(owner)
        ),
        vec![("username", text(user))],
    )
}

/// The intent, written and committed before `CREATE USER`: this user is about to be schema
/// `schema` of data set `id`. The time is the server's, so it compares with ALL_USERS.CREATED.
pub fn record_intent(
    owner: &str,
    user: &str,
    id: &str,
    prefix: &str,
    schema: u32,
    password: Option<&str>,
) -> Stmt {
    Stmt::with(
        format!(
            "INSERT INTO {} (username, data_set_id, prefix, schema_no, state, user_id, password, created_at) \
             VALUES (:username, :data_set_id, :prefix, :schema_no, 'creating', NULL, :pw, \
             TO_CHAR(SYSDATE, 'YYYY-MM-DD\"T\"HH24:MI:SS'))",
            catalog_table(owner)
        ),
        vec![
            ("username", text(user)),
            ("data_set_id", text(id)),
            ("prefix", text(&prefix.to_uppercase())),
            ("schema_no", Value::Int(i64::from(schema))),
            (
                "pw",
                password.map_or(Value::Null, |p| Value::Text(p.to_string())),
            ),
        ],
    )
}

/// The user exists now: its USER_ID goes into the row, which then identifies it for good.
pub fn record_created(owner: &str, user: &str) -> Stmt {
    Stmt::with(
        format!(
            "UPDATE {t} d SET state = 'created', user_id = (SELECT u.user_id FROM all_users u \
             WHERE u.username = d.username) WHERE d.username = :username",
            t = catalog_table(owner)
        ),
        vec![("username", text(user))],
    )
}

/// The user is gone (or was never created): its row goes.
pub fn forget_user(owner: &str, user: &str) -> Stmt {
    Stmt::with(
        format!(
            "DELETE FROM {} WHERE username = :username",
            catalog_table(owner)
        ),
        vec![("username", text(user))],
    )
}

pub fn catalog_count(owner: &str) -> Stmt {
    Stmt::plain(format!("SELECT COUNT(*) FROM {}", catalog_table(owner)))
}

/// Creates a schema's user with its default tablespace and quota there, the tablespace setup
/// resolved (data.tablespace, else the database's default permanent tablespace). The password
/// is a literal because DDL takes no binds; the caller never logs this text.
pub fn create_user(user: &str, password: &str, tablespace: &str) -> Stmt {
    Stmt::plain(format!(
        "CREATE USER {} IDENTIFIED BY \"{}\" DEFAULT TABLESPACE {ts} QUOTA UNLIMITED ON {ts}",
        ident(user),
        password.replace('"', ""),
        ts = ident(tablespace)
    ))
}

/// The measured sessions only log in: the admin user creates and loads their table.
pub fn grant_session(user: &str) -> Stmt {
    Stmt::plain(format!("GRANT CREATE SESSION TO {}", ident(user)))
}

/// CF1: a numeric key and filler columns; PCTFREE 99 leaves room for one row per block
/// whatever the block size.
pub fn create_table(user: &str, tablespace: &str) -> Stmt {
    let fillers = (2..2 + FILLER_COLUMNS)
        .map(|i| format!("C{i} VARCHAR2({FILLER_LEN})"))
        .collect::<Vec<_>>()
        .join(", ");
    Stmt::plain(format!(
        "CREATE TABLE {}.{TABLE} (CUSTID NUMBER(15) NOT NULL, {fillers}) PCTFREE 99 PCTUSED 1 \
         NOCOMPRESS TABLESPACE {}",
        ident(user),
        ident(tablespace)
    ))
}

/// SLOB's trick for one row per block: insert one row, MINIMIZE RECORDS_PER_BLOCK (the
/// table remembers "at most as many rows per block as now"), then empty it.
pub fn one_row_per_block(user: &str) -> [Stmt; 3] {
    let t = format!("{}.{TABLE}", ident(user));
    let fillers = ["'x'"; FILLER_COLUMNS].join(", ");
    [
        Stmt::plain(format!("INSERT INTO {t} VALUES (0, {fillers})")),
        Stmt::plain(format!("ALTER TABLE {t} MINIMIZE RECORDS_PER_BLOCK")),
        Stmt::plain(format!("TRUNCATE TABLE {t}")),
    ]
}

/// Seeds DBMS_RANDOM for the load's physical order. The seed goes in as text, as SLOB's
/// setup.sh does (`DBMS_RANDOM.seed(val => v_seed)` with a VARCHAR2): the BINARY_INTEGER
/// overload takes only 32-bit values, and a u64 seed overflows it.
pub fn seed(seed: u64) -> Stmt {
    Stmt::with(
        "BEGIN DBMS_RANDOM.SEED(val => :seed); END;",
        vec![("seed", Value::Text(seed.to_string()))],
    )
}

/// The side of the load's row generator: rows come from a cross join of two generators of
/// `side` rows each, so neither holds more than about sqrt(rows) rows in memory.
/// `CONNECT BY LEVEL <= rows` on DUAL alone runs out of memory (ORA-30009, ORA-04030)
/// from a few million rows.
pub fn generator_side(rows: u64) -> u64 {
    let mut side = (rows as f64).sqrt().ceil() as u64;
    while side.saturating_mul(side) < rows {
        side += 1;
    }
    side.max(1)
}

/// Server-side load: keys 1..rows in random physical order (ORDER BY DBMS_RANDOM.VALUE, in
/// the session `seed` seeded), filler 128 'X', direct path. Key = (a - 1) * side + b over the
/// cross join of two generators, cut at `rows`. Only the keys are sorted (the fillers are
/// added above the sort), so the sort spills about [`SORT_BYTES_PER_ROW`] per row to TEMP,
/// not the whole row (which would be the table's size); NO_ELIMINATE_OBY keeps the
/// optimizer from dropping the inner ORDER BY.
pub fn load(user: &str, rows: u64) -> Stmt {
    let t = format!("{}.{TABLE}", ident(user));
    let filler = format!("RPAD('X', {FILLER_LEN}, 'X')");
    let cols = [filler.as_str(); FILLER_COLUMNS].join(", ");
    let side = generator_side(rows) as i64;
    let outer = (rows as i64 + side - 1) / side;
    Stmt::with(
        format!(
            "INSERT /*+ APPEND */ INTO {t} SELECT k, {cols} FROM \
             (SELECT /*+ NO_ELIMINATE_OBY */ k FROM \
             (SELECT (a.n - 1) * :side + b.n AS k \
             FROM (SELECT LEVEL AS n FROM DUAL CONNECT BY LEVEL <= :outer_rows) a \
             CROSS JOIN (SELECT LEVEL AS n FROM DUAL CONNECT BY LEVEL <= :inner_rows) b) \
             WHERE k <= :row_count ORDER BY DBMS_RANDOM.VALUE)"
        ),
        vec![
            ("side", Value::Int(side)),
            ("outer_rows", Value::Int(outer.max(1))),
            ("inner_rows", Value::Int(side)),
            ("row_count", Value::Int(rows as i64)),
        ],
    )
}

pub fn create_index(user: &str, tablespace: &str) -> Stmt {
    Stmt::plain(format!(
        "CREATE INDEX {u}.{INDEX} ON {u}.{TABLE} (CUSTID) PCTFREE 0 TABLESPACE {}",
        ident(tablespace),
        u = ident(user)
    ))
}

pub fn gather_stats(user: &str) -> Stmt {
    Stmt::with(
        "BEGIN DBMS_STATS.GATHER_TABLE_STATS(ownname => :owner, tabname => 'CF1', cascade => TRUE); END;",
        vec![("owner", text(&user.to_uppercase()))],
    )
}

/// The mark (`mark::SchemaMark::to_comment`) in CF1's comment.
pub fn comment_table(user: &str, comment: &str) -> Stmt {
    Stmt::plain(format!(
        "COMMENT ON TABLE {}.{TABLE} IS {}",
        ident(user),
        literal(comment)
    ))
}

/// The mark of a user's CF1, if the table exists.
pub fn table_mark(user: &str) -> Stmt {
    Stmt::with(
        "SELECT comments FROM all_tab_comments WHERE owner = :owner AND table_name = 'CF1'",
        vec![("owner", text(user))],
    )
}

/// The optimizer statistics setup gathered: rows and blocks below the high-water mark. With
/// the mark, this is run's preflight: no scan of the table just before the window.
pub fn table_stats(user: &str) -> Stmt {
    Stmt::with(
        "SELECT num_rows, blocks FROM all_tab_statistics \
         WHERE owner = :owner AND table_name = 'CF1' AND object_type = 'TABLE'",
        vec![("owner", text(user))],
    )
}

/// `check`: rows, distinct blocks and the key range by a full scan (one row per block means
/// rows = blocks). Only `check` runs it; `run` trusts the mark and the statistics.
pub fn rows_and_blocks(user: &str) -> Stmt {
    Stmt::plain(format!(
        "SELECT COUNT(*), COUNT(DISTINCT DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID) || '.' || \
         DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)), MIN(CUSTID), MAX(CUSTID) FROM {}.{TABLE}",
        ident(user)
    ))
}

/// Objects of a user other than dbio's table and index (by type and exact name: no pattern,
/// so an object named like `SYSTEMLOG` or `BIN$...` is the user's and counts): when there are
/// any, teardown drops only CF1 and keeps the user.
pub fn foreign_objects(user: &str) -> Stmt {
    Stmt::with(
        "SELECT object_type || ' ' || object_name FROM all_objects WHERE owner = :owner \
         AND NOT (object_type = 'TABLE' AND object_name = 'CF1') \
         AND NOT (object_type = 'INDEX' AND object_name = 'I_CF1') ORDER BY 1",
        vec![("owner", text(user))],
    )
}

/// Drops dbio's table (and with it its index) without the recycle bin.
pub fn drop_table(user: &str) -> Stmt {
    Stmt::plain(format!("DROP TABLE {}.{TABLE} PURGE", ident(user)))
}

/// Only users dbio created are dropped; CASCADE drops their table and index with them.
pub fn drop_user(user: &str) -> Stmt {
    Stmt::plain(format!("DROP USER {} CASCADE", ident(user)))
}

// --- The measured sessions ------------------------------------------------------------------

/// The hint that pins the sessions' statements to I_CF1, as PostgreSQL's sessions pin their
/// read path: SLOB's statements carry none and rely on the scale making the index cheaper, but
/// on a small data set (or after stale statistics) the optimizer prefers a full scan of CF1,
/// and every "read" would then be multiblock reads of the whole table. The plan check
/// (`plan`) still verifies what the server made of it.
pub const INDEX_HINT: &str = "/*+ INDEX(CF1 I_CF1) */";

/// The session's read: `work_unit` keys through the index, SLOB's COUNT(C2).
pub fn read_range(user: &str) -> Stmt {
    Stmt::with(
        format!(
            "SELECT {INDEX_HINT} COUNT(C2) FROM {}.{TABLE} WHERE CUSTID BETWEEN :lo AND :hi",
            ident(user)
        ),
        vec![("lo", Value::Int(0)), ("hi", Value::Int(0))],
    )
}

/// Placeholder names of the update's filler columns: one per column (C2 -> `c2`).
const FILLER_BINDS: [&str; FILLER_COLUMNS] = ["c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"];

/// The session's update: one filler column (lite) or all (heavy), committed per statement.
/// Each column has its own placeholder (`:c2`, `:c3`, ...); the session binds the same
/// value to each.
pub fn update_range(user: &str, heavy: bool) -> Stmt {
    let columns = if heavy { FILLER_COLUMNS } else { 1 };
    let set = (0..columns)
        .map(|i| format!("C{} = :{}", i + 2, FILLER_BINDS[i]))
        .collect::<Vec<_>>()
        .join(", ");
    let mut binds: Vec<(&'static str, Value)> = FILLER_BINDS[..columns]
        .iter()
        .map(|n| (*n, text("")))
        .collect();
    binds.extend([("lo", Value::Int(0)), ("hi", Value::Int(0))]);
    Stmt::with(
        format!(
            "UPDATE {INDEX_HINT} {}.{TABLE} SET {set} WHERE CUSTID BETWEEN :lo AND :hi",
            ident(user)
        ),
        binds,
    )
}

// --- The collector --------------------------------------------------------------------------

/// V$SYSSTAT statistics the collector reads (names exactly as Oracle spells them).
/// SLOB's awr_info reads 'physical read IO requests' and 'physical write IO requests' (data
/// files); the 'total' ones add redo, archive, control file and backup I/O.
pub const SYSSTAT_NAMES: &[&str] = &[
    "physical read total IO requests",
    "physical write total IO requests",
    "physical read IO requests",
    "physical write IO requests",
    "physical reads",
    "physical reads direct",
    "physical reads direct (lob)",
    "physical writes",
    "physical read total bytes",
    "physical write total bytes",
    "session logical reads",
    "redo size",
    "redo writes",
    "user commits",
    "execute count",
    "DB time",
    "CPU used by this session",
];

/// V$SYS_TIME_MODEL statistics (microseconds): DB time and DB CPU are AWR's Load Profile
/// figures (foreground only, every call timed, unlike 'CPU used by this session').
pub const TIME_MODEL_NAMES: &[&str] = &[
    "DB time",
    "DB CPU",
    "background cpu time",
    "background elapsed time",
];

/// Events SLOB's reports single out.
pub const KEY_EVENTS: &[&str] = &[
    "db file sequential read",
    "db file parallel read",
    "db file scattered read",
    "direct path read",
    "db file parallel write",
    "log file parallel write",
    "log file sync",
    "free buffer waits",
];

fn in_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| literal(n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which dynamic views the collector reads. In a PDB from 12.2 on, the documented per-container
/// views V$CON_SYSSTAT, V$CON_SYS_TIME_MODEL, V$CON_SYSTEM_EVENT and
/// V$CON_EVENT_HISTOGRAM_MICRO (Oracle Database Reference: "when queried from a PDB, ...
/// that PDB"); elsewhere the instance's V$SYSSTAT, V$SYS_TIME_MODEL, V$SYSTEM_EVENT and
/// V$EVENT_HISTOGRAM_MICRO; before 12.1 the same without CON_ID. Always their GV$ form, so
/// RAC is every instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Views {
    /// 11.2 and earlier: no containers, no CON_ID column.
    NoContainers,
    /// A non-CDB, CDB$ROOT, or a PDB before 12.2.
    Instance,
    /// A PDB, 12.2 and later.
    Container,
}

impl Views {
    /// `version` is the server's (major, minor); `con_id` the session's container (0 in a
    /// non-CDB, 1 the root, 2 PDB$SEED, 3.. a PDB).
    pub fn choose(version: (u32, u32), con_id: u32) -> Views {
        if version.0 < 12 {
            Views::NoContainers
        } else if con_id >= 3 && version >= (12, 2) {
            Views::Container
        } else {
            Views::Instance
        }
    }

    fn con_id(self) -> &'static str {
        match self {
            Views::NoContainers => "0 AS con_id",
            _ => "con_id",
        }
    }

    fn view(self, instance: &'static str, container: &'static str) -> &'static str {
        match self {
            Views::Container => container,
            _ => instance,
        }
    }

    /// The views by name, for `db.source`.
    pub fn names(self) -> &'static str {
        match self {
            Views::Container => {
                "gv$con_sysstat, gv$con_sys_time_model, gv$con_system_event, gv$con_event_histogram_micro"
            }
            _ => "gv$sysstat, gv$sys_time_model, gv$system_event, gv$event_histogram_micro",
        }
    }
}

/// System statistics per instance and container: CON_ID 0 is the whole instance (a non-CDB,
/// or the root); a PDB sees its own.
pub fn sysstat(views: Views) -> Stmt {
    Stmt::plain(format!(
        "SELECT inst_id, {}, name, value FROM {} WHERE name IN ({})",
        views.con_id(),
        views.view("gv$sysstat", "gv$con_sysstat"),
        in_list(SYSSTAT_NAMES)
    ))
}

/// Time model rows per instance and container (microseconds).
pub fn time_model(views: Views) -> Stmt {
    Stmt::plain(format!(
        "SELECT inst_id, {}, stat_name, value FROM {} WHERE stat_name IN ({})",
        views.con_id(),
        views.view("gv$sys_time_model", "gv$con_sys_time_model"),
        in_list(TIME_MODEL_NAMES)
    ))
}

/// Every non-idle event's waits and time per instance and container, foreground (_FG, 11.1+)
/// and all; background = all - foreground, as AWR's Background Wait Events.
pub fn system_event(views: Views) -> Stmt {
    Stmt::plain(format!(
        "SELECT inst_id, {}, event, wait_class, total_waits, time_waited_micro, \
         total_waits_fg, time_waited_micro_fg FROM {} WHERE wait_class <> 'Idle'",
        views.con_id(),
        views.view("gv$system_event", "gv$con_system_event")
    ))
}

/// The instances and when each started: a changed startup time means a restart inside the
/// window, and every delta of that instance is void.
pub fn instances() -> Stmt {
    Stmt::plain(
        "SELECT inst_id, instance_name, \
         TO_CHAR(startup_time, 'YYYY-MM-DD\"T\"HH24:MI:SS'), version FROM gv$instance",
    )
}

/// Microsecond histogram of the key events (12.1+).
pub fn event_histogram(views: Views) -> Stmt {
    Stmt::plain(format!(
        "SELECT inst_id, con_id, event, wait_time_micro, wait_count FROM {} WHERE event IN ({})",
        views.view("gv$event_histogram_micro", "gv$con_event_histogram_micro"),
        in_list(KEY_EVENTS)
    ))
}

/// Whether the microsecond histogram view exists (12.1+).
pub fn has_histogram_micro(views: Views) -> Stmt {
    Stmt::with(
        "SELECT COUNT(*) FROM all_views WHERE view_name = :view_name",
        vec![(
            "view_name",
            text(views.view("GV_$EVENT_HISTOGRAM_MICRO", "GV_$CON_EVENT_HISTOGRAM_MICRO")),
        )],
    )
}

/// One sample of dbio's sessions (ASH-like, without the licence): what each is doing. A
/// session waiting on an idle event (between calls: 'SQL*Net message from client') is not
/// active and is not sampled, as ASH samples only active sessions.
pub fn session_sample() -> Stmt {
    Stmt::with(
        "SELECT inst_id, client_identifier, state, \
         CASE WHEN state = 'WAITING' THEN wait_class || ':' || event ELSE 'CPU' END \
         FROM gv$session WHERE module = :module AND NOT (state = 'WAITING' AND wait_class = 'Idle')",
        vec![("module", text(MODULE))],
    )
}

/// AWR snapshots around the window (Diagnostics Pack licence) and the text report.
pub fn awr_snapshot() -> Stmt {
    Stmt::plain("SELECT DBMS_WORKLOAD_REPOSITORY.CREATE_SNAPSHOT() FROM DUAL")
}

/// One instance's AWR text report. `dbid` is the container's (CON_DBID: in a PDB its
/// PDB-level snapshots are kept under the PDB's DBID, not V$DATABASE.DBID).
pub fn awr_report(dbid: i64, instance: i64, begin: i64, end: i64) -> Stmt {
    Stmt::with(
        "SELECT output FROM TABLE(DBMS_WORKLOAD_REPOSITORY.AWR_REPORT_TEXT(\
         :dbid, :instance, :begin_snap, :end_snap))",
        vec![
            ("dbid", Value::Int(dbid)),
            ("instance", Value::Int(instance)),
            ("begin_snap", Value::Int(begin)),
            ("end_snap", Value::Int(end)),
        ],
    )
}

/// RAC: the global AWR text report over every instance (an empty instance list = all).
pub fn awr_global_report(dbid: i64, begin: i64, end: i64) -> Stmt {
    Stmt::with(
        "SELECT output FROM TABLE(DBMS_WORKLOAD_REPOSITORY.AWR_GLOBAL_REPORT_TEXT(\
         :dbid, '', :begin_snap, :end_snap))",
        vec![
            ("dbid", Value::Int(dbid)),
            ("begin_snap", Value::Int(begin)),
            ("end_snap", Value::Int(end)),
        ],
    )
}

// --- What the checks before a command read (`checks`, `privileges`, `snapshots`) -----------

/// One initialization parameter's value (CONTROL_MANAGEMENT_PACK_ACCESS, PROCESSES, ...).
pub fn parameter(name: &str) -> Stmt {
    Stmt::with(
        "SELECT value FROM v$parameter WHERE name = :parameter",
        vec![("parameter", text(name))],
    )
}

/// The privileges the session has now, directly and through its enabled roles.
pub fn session_privs() -> Stmt {
    Stmt::plain("SELECT privilege FROM session_privs")
}

pub fn session_roles() -> Stmt {
    Stmt::plain("SELECT role FROM session_roles")
}

/// System privileges the session may grant on (WITH ADMIN OPTION), directly or by a role.
pub fn admin_option_privs() -> Stmt {
    Stmt::plain(
        "SELECT privilege FROM user_sys_privs WHERE admin_option = 'YES' \
         UNION SELECT privilege FROM role_sys_privs WHERE admin_option = 'YES'",
    )
}

/// The packages dbio calls that the session may execute (ALL_OBJECTS lists a package only to
/// a user allowed to execute it), as OWNER.NAME.
pub fn packages() -> Stmt {
    Stmt::plain(
        "SELECT owner || '.' || object_name FROM all_objects WHERE object_type = 'PACKAGE' \
         AND ((owner = 'SYS' AND object_name IN ('DBMS_RANDOM', 'DBMS_STATS', 'DBMS_WORKLOAD_REPOSITORY')) \
         OR (owner = 'PERFSTAT' AND object_name = 'STATSPACK'))",
    )
}

/// The admin's own default and temporary tablespaces and its quota on the default one (-1 =
/// unlimited; no row = none): the catalog table needs a little room there.
pub fn own_tablespaces() -> Stmt {
    Stmt::plain(
        "SELECT u.default_tablespace, u.temporary_tablespace, q.max_bytes, q.bytes FROM user_users u \
         LEFT JOIN user_ts_quotas q ON q.tablespace_name = u.default_tablespace",
    )
}

/// ARCHIVELOG and FORCE LOGGING: in ARCHIVELOG mode the load's redo is archived.
pub fn log_mode() -> Stmt {
    Stmt::plain("SELECT log_mode, force_logging FROM v$database")
}

/// The fast recovery area's size, use and what Oracle may delete (bytes); a zero limit means
/// no FRA.
pub fn recovery_area() -> Stmt {
    Stmt::plain(
        "SELECT NVL(SUM(space_limit), 0), NVL(SUM(space_used), 0), NVL(SUM(space_reclaimable), 0) \
         FROM v$recovery_file_dest",
    )
}

/// Free bytes of a tablespace (`free_view`, its column `free_column`) and what its files
/// (`files_view`) may still grow by.
fn space(free_view: &str, free_column: &str, files_view: &str, tablespace: &str) -> Stmt {
    Stmt::with(
        format!(
            "SELECT (SELECT NVL(SUM({free_column}), 0) FROM {free_view} WHERE tablespace_name = :free_name), \
             (SELECT NVL(SUM(CASE WHEN autoextensible = 'YES' THEN GREATEST(maxbytes - bytes, 0) ELSE 0 END), 0) \
             FROM {files_view} WHERE tablespace_name = :file_name) FROM DUAL"
        ),
        vec![
            ("free_name", text(&tablespace.to_uppercase())),
            ("file_name", text(&tablespace.to_uppercase())),
        ],
    )
}

/// Free bytes of a temporary tablespace, and what its tempfiles may still grow by.
pub fn temp_space(tablespace: &str) -> Stmt {
    space(
        "dba_temp_free_space",
        "free_space",
        "dba_temp_files",
        tablespace,
    )
}

/// Free bytes of a permanent tablespace, and what its datafiles may still grow by.
pub fn data_space(tablespace: &str) -> Stmt {
    space("dba_free_space", "bytes", "dba_data_files", tablespace)
}

/// Processes and sessions in use and allowed, per instance (LIMIT_VALUE may be UNLIMITED).
pub fn resource_limits() -> Stmt {
    Stmt::plain(
        "SELECT inst_id, resource_name, current_utilization, TRIM(limit_value) FROM gv$resource_limit \
         WHERE resource_name IN ('processes', 'sessions') ORDER BY inst_id, resource_name",
    )
}

/// A schema user's account status (OPEN, LOCKED, EXPIRED, ...), read before any logon.
pub fn account_status(user: &str) -> Stmt {
    Stmt::with(
        "SELECT account_status FROM dba_users WHERE username = :username",
        vec![("username", text(user))],
    )
}

// --- Statspack (PERFSTAT), SLOB's default where AWR is not licensed ---------------------------

/// A Statspack snapshot at the instance's default level; returns its snap id.
pub fn statspack_snap() -> Stmt {
    Stmt::with(
        "BEGIN :snap_id := PERFSTAT.STATSPACK.SNAP; END;",
        vec![("snap_id", Value::OutInt)],
    )
}

/// The snapshot's instance and times (STATS$SNAPSHOT: snap_time and startup_time are DATEs,
/// one-second resolution).
pub fn statspack_snapshot(snap_id: i64) -> Stmt {
    Stmt::with(
        "SELECT s.dbid, s.instance_number, TO_CHAR(s.snap_time, 'YYYY-MM-DD\"T\"HH24:MI:SS'), \
         TO_CHAR(s.startup_time, 'YYYY-MM-DD\"T\"HH24:MI:SS'), d.instance_name, d.version \
         FROM perfstat.stats$snapshot s JOIN perfstat.stats$database_instance d \
         ON d.dbid = s.dbid AND d.instance_number = s.instance_number AND d.startup_time = s.startup_time \
         WHERE s.snap_id = :snap_id",
        vec![("snap_id", Value::Int(snap_id))],
    )
}

fn snap_binds(snap_id: i64, dbid: i64, instance: i64) -> Vec<(&'static str, Value)> {
    vec![
        ("snap_id", Value::Int(snap_id)),
        ("dbid", Value::Int(dbid)),
        ("inst_num", Value::Int(instance)),
    ]
}

/// The snapshot's system statistics (STATS$SYSSTAT), the names the collector reads.
pub fn statspack_sysstat(snap_id: i64, dbid: i64, instance: i64) -> Stmt {
    Stmt::with(
        format!(
            "SELECT name, value FROM perfstat.stats$sysstat WHERE snap_id = :snap_id AND dbid = :dbid \
             AND instance_number = :inst_num AND name IN ({})",
            in_list(SYSSTAT_NAMES)
        ),
        snap_binds(snap_id, dbid, instance),
    )
}

/// The snapshot's time model (STATS$SYS_TIME_MODEL by stat id, named by
/// STATS$TIME_MODEL_STATNAME).
pub fn statspack_time_model(snap_id: i64, dbid: i64, instance: i64) -> Stmt {
    Stmt::with(
        format!(
            "SELECT n.stat_name, t.value FROM perfstat.stats$sys_time_model t \
             JOIN perfstat.stats$time_model_statname n ON n.stat_id = t.stat_id \
             WHERE t.snap_id = :snap_id AND t.dbid = :dbid AND t.instance_number = :inst_num \
             AND n.stat_name IN ({})",
            in_list(TIME_MODEL_NAMES)
        ),
        snap_binds(snap_id, dbid, instance),
    )
}

/// The snapshot's wait events (STATS$SYSTEM_EVENT, with the _FG columns), their wait class
/// from V$EVENT_NAME (Statspack keeps none), idle ones left out.
pub fn statspack_events(snap_id: i64, dbid: i64, instance: i64) -> Stmt {
    Stmt::with(
        "SELECT e.event, NVL(n.wait_class, 'Other'), e.total_waits, e.time_waited_micro, \
         e.total_waits_fg, e.time_waited_micro_fg FROM perfstat.stats$system_event e \
         LEFT JOIN v$event_name n ON n.name = e.event \
         WHERE e.snap_id = :snap_id AND e.dbid = :dbid AND e.instance_number = :inst_num \
         AND NVL(n.wait_class, 'Other') <> 'Idle'",
        snap_binds(snap_id, dbid, instance),
    )
}

// --- The reader's plan --------------------------------------------------------------------

/// The plan of the cursors that ran `text` (the reader statement of one schema), from
/// V$SQL_PLAN, every instance and child cursor: (inst, sql_id, child, plan hash, parsing schema,
/// step id, operation, options, object owner, object name).
pub fn sql_plan(sql_text: &str) -> Stmt {
    Stmt::with(
        "SELECT s.inst_id, s.sql_id, s.child_number, s.plan_hash_value, s.parsing_schema_name, \
         p.id, p.operation, NVL(p.options, ' '), NVL(p.object_owner, ' '), NVL(p.object_name, ' ') \
         FROM gv$sql s JOIN gv$sql_plan p ON p.inst_id = s.inst_id AND p.sql_id = s.sql_id \
         AND p.child_number = s.child_number WHERE s.sql_text = :sql_text \
         ORDER BY s.inst_id, s.sql_id, s.child_number, p.id",
        vec![("sql_text", text(sql_text))],
    )
}

/// The placeholder names in an Oracle SQL or PL/SQL text: `:name` outside string literals,
/// quoted identifiers and comments (`:=` is PL/SQL assignment, not a placeholder).
pub fn placeholders(sql: &str) -> Vec<String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\'' | '"' => {
                let quote = chars[i];
                i += 1;
                while i < chars.len() && chars[i] != quote {
                    i += 1;
                }
            }
            '-' if chars.get(i + 1) == Some(&'-') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 1;
            }
            ':' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
                    end += 1;
                }
                if end > start {
                    out.push(chars[start..end].iter().collect::<String>().to_lowercase());
                }
                i = end.max(i + 1) - 1;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Every statement the backend runs, built with sample arguments.
    pub(crate) fn every_statement() -> Vec<(&'static str, Stmt)> {
        let u = "USER1";
        let mut all = vec![
            ("container", container()),
            ("non_cdb_database", non_cdb_database()),
            ("pdbs", pdbs()),
            ("default_tablespace", default_tablespace()),
            ("tablespace", tablespace("users")),
            ("buffer_caches", buffer_caches()),
            ("db_block_size", db_block_size()),
            ("user_exists", user_exists(u)),
            ("user_row", user_row(u)),
            ("cf1_comments", cf1_comments()),
            ("session_user", session_user()),
            ("catalogs", catalogs()),
            ("create_catalog", create_catalog("SYSTEM")),
            ("comment_catalog", comment_catalog("SYSTEM")),
            ("drop_catalog", drop_catalog("SYSTEM")),
            ("catalog_rows all", catalog_rows("SYSTEM", None)),
            ("catalog_rows prefix", catalog_rows("SYSTEM", Some("ts"))),
            ("catalog_row", catalog_row("SYSTEM", u)),
            ("catalog_users", catalog_users("SYSTEM")),
            ("catalog_tables", catalog_tables("SYSTEM")),
            (
                "record_intent",
                record_intent("SYSTEM", u, "abc", "user", 1, Some("pw")),
            ),
            (
                "record_intent given",
                record_intent("SYSTEM", u, "abc", "user", 1, None),
            ),
            ("record_created", record_created("SYSTEM", u)),
            ("forget_user", forget_user("SYSTEM", u)),
            ("catalog_count", catalog_count("SYSTEM")),
            ("create_user", create_user(u, "pw", "USERS")),
            ("grant_session", grant_session(u)),
            ("create_table", create_table(u, "USERS")),
            ("seed", seed(u64::MAX)),
            ("load", load(u, 10_000)),
            ("create_index", create_index(u, "USERS")),
            ("gather_stats", gather_stats(u)),
            ("comment_table", comment_table(u, "{\"dbio\":{}}")),
            ("table_mark", table_mark(u)),
            ("table_stats", table_stats(u)),
            ("rows_and_blocks", rows_and_blocks(u)),
            ("foreign_objects", foreign_objects(u)),
            ("drop_table", drop_table(u)),
            ("drop_user", drop_user(u)),
            ("read_range", read_range(u)),
            ("update_range lite", update_range(u, false)),
            ("update_range heavy", update_range(u, true)),
            ("instances", instances()),
            ("session_sample", session_sample()),
            ("awr_snapshot", awr_snapshot()),
            ("awr_report", awr_report(1, 1, 10, 11)),
            ("awr_global_report", awr_global_report(1, 10, 11)),
            ("parameter", parameter("processes")),
            ("session_privs", session_privs()),
            ("session_roles", session_roles()),
            ("admin_option_privs", admin_option_privs()),
            ("packages", packages()),
            ("own_tablespaces", own_tablespaces()),
            ("log_mode", log_mode()),
            ("recovery_area", recovery_area()),
            ("temp_space", temp_space("TEMP")),
            ("data_space", data_space("USERS")),
            ("resource_limits", resource_limits()),
            ("account_status", account_status(u)),
            ("statspack_snap", statspack_snap()),
            ("statspack_snapshot", statspack_snapshot(7)),
            ("statspack_sysstat", statspack_sysstat(7, 1, 1)),
            ("statspack_time_model", statspack_time_model(7, 1, 1)),
            ("statspack_events", statspack_events(7, 1, 1)),
            ("sql_plan", sql_plan(&read_range(u).text)),
        ];
        for views in [Views::NoContainers, Views::Instance, Views::Container] {
            all.extend([
                ("sysstat", sysstat(views)),
                ("time_model", time_model(views)),
                ("system_event", system_event(views)),
                ("event_histogram", event_histogram(views)),
                ("has_histogram_micro", has_histogram_micro(views)),
            ]);
        }
        all.extend(
            one_row_per_block(u)
                .into_iter()
                .map(|s| ("one_row_per_block", s)),
        );
        all
    }

    #[test]
    fn every_statement_binds_exactly_the_names_in_its_text() {
        for (what, s) in every_statement() {
            let in_text = placeholders(&s.text);
            let mut unique = in_text.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(
                unique.len(),
                in_text.len(),
                "{what}: a placeholder name appears twice: {}",
                s.text
            );
            let mut bound: Vec<String> = s.names().iter().map(|n| n.to_string()).collect();
            bound.sort();
            assert_eq!(unique, bound, "{what}: {}", s.text);
        }
    }

    /// Oracle SQL reserved words (SQL Language Reference, "Oracle SQL Reserved Words"; also
    /// V$RESERVED_WORDS with RESERVED = 'Y'). A bind name that is one fails with ORA-01745.
    const RESERVED: &[&str] = &[
        "ACCESS",
        "ADD",
        "ALL",
        "ALTER",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "AUDIT",
        "BETWEEN",
        "BY",
        "CHAR",
        "CHECK",
        "CLUSTER",
        "COLUMN",
        "COLUMN_VALUE",
        "COMMENT",
        "COMPRESS",
        "CONNECT",
        "CREATE",
        "CURRENT",
        "DATE",
        "DECIMAL",
        "DEFAULT",
        "DELETE",
        "DESC",
        "DISTINCT",
        "DROP",
        "ELSE",
        "EXCLUSIVE",
        "EXISTS",
        "FILE",
        "FLOAT",
        "FOR",
        "FROM",
        "GRANT",
        "GROUP",
        "HAVING",
        "IDENTIFIED",
        "IMMEDIATE",
        "IN",
        "INCREMENT",
        "INDEX",
        "INITIAL",
        "INSERT",
        "INTEGER",
        "INTERSECT",
        "INTO",
        "IS",
        "LEVEL",
        "LIKE",
        "LOCK",
        "LONG",
        "MAXEXTENTS",
        "MINUS",
        "MLSLABEL",
        "MODE",
        "MODIFY",
        "NESTED_TABLE_ID",
        "NOAUDIT",
        "NOCOMPRESS",
        "NOT",
        "NOWAIT",
        "NULL",
        "NUMBER",
        "OF",
        "OFFLINE",
        "ON",
        "ONLINE",
        "OPTION",
        "OR",
        "ORDER",
        "PCTFREE",
        "PRIOR",
        "PUBLIC",
        "RAW",
        "RENAME",
        "RESOURCE",
        "REVOKE",
        "ROW",
        "ROWID",
        "ROWNUM",
        "ROWS",
        "SELECT",
        "SESSION",
        "SET",
        "SHARE",
        "SIZE",
        "SMALLINT",
        "START",
        "SUCCESSFUL",
        "SYNONYM",
        "SYSDATE",
        "TABLE",
        "THEN",
        "TO",
        "TRIGGER",
        "UID",
        "UNION",
        "UNIQUE",
        "UPDATE",
        "USER",
        "VALIDATE",
        "VALUES",
        "VARCHAR",
        "VARCHAR2",
        "VIEW",
        "WHENEVER",
        "WHERE",
        "WITH",
    ];

    // A bind named like a reserved word (`:rows`, `:level`, `:size`) is ORA-01745.
    #[test]
    fn no_bind_name_is_a_reserved_word() {
        for (what, s) in every_statement() {
            for name in s.names() {
                assert!(
                    !RESERVED.contains(&name.to_uppercase().as_str()),
                    "{what}: :{name} is an Oracle reserved word"
                );
            }
        }
    }

    #[test]
    fn the_placeholder_scanner_skips_literals_comments_and_assignments() {
        assert_eq!(
            placeholders("SELECT ':x', \"A:B\" /* :c */ FROM t WHERE a = :lo -- :d\n AND b = :Hi"),
            ["lo", "hi"]
        );
        assert_eq!(
            placeholders("BEGIN x := :v; END;"),
            ["v"],
            "`:=` is no placeholder"
        );
        assert!(placeholders(&instances().text).is_empty());
    }

    // Regression: the update was `SET C2 = :3 WHERE CUSTID BETWEEN :1 AND :2` bound by
    // position as (lo, hi, value); ODPI-C numbers placeholders left to right, so C2 got `lo`.
    #[test]
    fn the_update_binds_its_columns_and_range_by_name() {
        let lite = update_range("user1", false);
        assert_eq!(
            lite.text,
            "UPDATE /*+ INDEX(CF1 I_CF1) */ \"USER1\".CF1 SET C2 = :c2 WHERE CUSTID BETWEEN :lo AND :hi"
        );
        assert_eq!(lite.names(), ["c2", "lo", "hi"]);
        let heavy = update_range("user1", true);
        assert!(
            heavy.text.contains("SET C2 = :c2, C3 = :c3")
                && heavy
                    .text
                    .contains("C9 = :c9 WHERE CUSTID BETWEEN :lo AND :hi"),
            "{}",
            heavy.text
        );
        assert_eq!(heavy.names().len(), FILLER_COLUMNS + 2);
        assert_eq!(
            read_range("user1").text,
            "SELECT /*+ INDEX(CF1 I_CF1) */ COUNT(C2) FROM \"USER1\".CF1 WHERE CUSTID BETWEEN :lo AND :hi"
        );
    }

    #[test]
    fn schema_ddl_is_slobs() {
        assert_eq!(user_name("user", 3), "USER3");
        let t = create_table("user1", "slob").text;
        assert!(
            t.starts_with(
                "CREATE TABLE \"USER1\".CF1 (CUSTID NUMBER(15) NOT NULL, C2 VARCHAR2(128), "
            ),
            "{t}"
        );
        assert!(
            t.contains("C9 VARCHAR2(128))")
                && t.contains("PCTFREE 99")
                && t.ends_with("TABLESPACE \"SLOB\""),
            "{t}"
        );
        let [ins, min, trunc] = one_row_per_block("user1");
        assert!(
            ins.text
                .starts_with("INSERT INTO \"USER1\".CF1 VALUES (0, 'x'"),
            "{}",
            ins.text
        );
        assert_eq!(
            min.text,
            "ALTER TABLE \"USER1\".CF1 MINIMIZE RECORDS_PER_BLOCK"
        );
        assert_eq!(trunc.text, "TRUNCATE TABLE \"USER1\".CF1");
        assert_eq!(
            create_index("user1", "SLOB").text,
            "CREATE INDEX \"USER1\".I_CF1 ON \"USER1\".CF1 (CUSTID) PCTFREE 0 TABLESPACE \"SLOB\""
        );
        assert_eq!(
            create_user("user1", "se\"cret", "DATA").text,
            "CREATE USER \"USER1\" IDENTIFIED BY \"secret\" DEFAULT TABLESPACE \"DATA\" QUOTA UNLIMITED ON \"DATA\""
        );
        assert_eq!(
            gather_stats("user2").binds,
            [("owner", Value::Text("USER2".into()))]
        );
        assert_eq!(drop_user("user1").text, "DROP USER \"USER1\" CASCADE");
        assert_eq!(drop_table("user1").text, "DROP TABLE \"USER1\".CF1 PURGE");
    }

    // Regression: DBMS_RANDOM.SEED got a u64 literal, which overflows the BINARY_INTEGER
    // overload; SLOB passes a VARCHAR2.
    #[test]
    fn the_seed_goes_in_as_text() {
        let s = seed(u64::MAX);
        assert_eq!(s.text, "BEGIN DBMS_RANDOM.SEED(val => :seed); END;");
        assert_eq!(
            s.binds,
            [("seed", Value::Text("18446744073709551615".into()))]
        );
    }

    // Regression: `CONNECT BY LEVEL <= rows` on DUAL ran out of memory at SLOB-sized scales.
    #[test]
    fn the_row_generator_is_a_cross_join_of_small_generators() {
        let l = load("user1", 10_000_000);
        assert!(
            l.text.starts_with(
                "INSERT /*+ APPEND */ INTO \"USER1\".CF1 SELECT k, RPAD('X', 128, 'X'),"
            ),
            "{}",
            l.text
        );
        // Only the keys are sorted (the fillers are added above the sort, so TEMP holds
        // keys, not rows), and the inner ORDER BY is kept.
        assert!(
            l.text.contains("CROSS JOIN")
                && l.text
                    .contains("FROM (SELECT /*+ NO_ELIMINATE_OBY */ k FROM")
                && l.text
                    .ends_with("WHERE k <= :row_count ORDER BY DBMS_RANDOM.VALUE)"),
            "{}",
            l.text
        );
        assert_eq!(
            l.binds,
            [
                ("side", Value::Int(3163)),
                ("outer_rows", Value::Int(3162)),
                ("inner_rows", Value::Int(3163)),
                ("row_count", Value::Int(10_000_000)),
            ]
        );
        // The keys the generator makes are exactly 1..rows, each once, for awkward sizes too.
        for rows in [1u64, 2, 7, 1000, 1001, 4097] {
            let side = generator_side(rows);
            let outer = rows.div_ceil(side);
            let mut keys: Vec<u64> = (1..=outer)
                .flat_map(|a| (1..=side).map(move |b| (a - 1) * side + b))
                .filter(|k| *k <= rows)
                .collect();
            keys.sort_unstable();
            assert_eq!(keys, (1..=rows).collect::<Vec<_>>(), "rows {rows}");
        }
        // A billion rows: two generators of 31,623 rows each.
        assert_eq!(generator_side(1_000_000_000), 31_623);
    }

    #[test]
    fn collector_queries_read_gv_views_per_container() {
        assert!(
            sysstat(Views::NoContainers)
                .text
                .starts_with("SELECT inst_id, 0 AS con_id, name")
        );
        let s = sysstat(Views::Instance).text;
        assert!(s.starts_with("SELECT inst_id, con_id, name, value FROM gv$sysstat WHERE name IN ('physical read total IO requests', "));
        assert!(s.contains("'physical read IO requests'") && s.contains("'DB time'"));
        let e = system_event(Views::Instance).text;
        assert!(
            e.contains("total_waits_fg, time_waited_micro_fg FROM gv$system_event")
                && e.contains("wait_class <> 'Idle'")
        );
        assert!(time_model(Views::Instance).text.contains("'DB CPU'"));
        assert!(
            event_histogram(Views::Instance)
                .text
                .contains("'db file sequential read', 'db file parallel read'")
        );
        assert!(
            session_sample()
                .text
                .contains("NOT (state = 'WAITING' AND wait_class = 'Idle')")
        );
        assert!(
            awr_global_report(1, 2, 3)
                .text
                .contains("AWR_GLOBAL_REPORT_TEXT")
        );
        assert_eq!(
            comment_table("user1", "{\"dbio\":{\"state\":\"complete\"}}").text,
            "COMMENT ON TABLE \"USER1\".CF1 IS '{\"dbio\":{\"state\":\"complete\"}}'"
        );
    }

    // Regression: in a PDB the collector read V$SYSSTAT and friends instead of the documented
    // per-container V$CON_* views.
    #[test]
    fn a_pdb_from_12_2_reads_the_con_views() {
        assert_eq!(Views::choose((11, 2), 0), Views::NoContainers);
        assert_eq!(Views::choose((19, 0), 0), Views::Instance, "non-CDB");
        assert_eq!(Views::choose((19, 0), 1), Views::Instance, "CDB$ROOT");
        assert_eq!(
            Views::choose((12, 1), 3),
            Views::Instance,
            "12.1 has no V$CON_*"
        );
        assert_eq!(Views::choose((12, 2), 3), Views::Container);
        assert_eq!(Views::choose((23, 0), 5), Views::Container);
        let c = Views::Container;
        assert!(sysstat(c).text.contains(" FROM gv$con_sysstat WHERE"));
        assert!(
            time_model(c)
                .text
                .contains(" FROM gv$con_sys_time_model WHERE")
        );
        assert!(
            system_event(c)
                .text
                .contains(" FROM gv$con_system_event WHERE")
        );
        assert!(
            event_histogram(c)
                .text
                .contains(" FROM gv$con_event_histogram_micro WHERE")
        );
        assert_eq!(
            has_histogram_micro(c).binds,
            [(
                "view_name",
                Value::Text("GV_$CON_EVENT_HISTOGRAM_MICRO".into())
            )]
        );
        for v in [Views::NoContainers, Views::Instance] {
            assert!(!sysstat(v).text.contains("con_sysstat"));
        }
    }

    // Regression: teardown matched users with `LIKE 'PREFIX%'` (USER1 took USER10..USER19) and
    // foreign objects with an unescaped `NOT LIKE 'SYS_%'` (`_` matched any character, so a
    // user's SYSTEMLOG was not counted as the user's and the user was dropped).
    #[test]
    fn no_statement_matches_names_by_pattern() {
        for (what, s) in every_statement() {
            assert!(
                !s.text.to_uppercase().contains(" LIKE "),
                "{what}: {}",
                s.text
            );
        }
        let f = foreign_objects("USER1").text;
        assert!(
            f.contains("NOT (object_type = 'TABLE' AND object_name = 'CF1')")
                && f.contains("NOT (object_type = 'INDEX' AND object_name = 'I_CF1')"),
            "{f}"
        );
        assert_eq!(
            catalog_rows("SYSTEM", Some("ts")).binds,
            [("prefix", Value::Text("TS".into()))]
        );
        assert!(
            catalog_rows("SYSTEM", Some("ts"))
                .text
                .contains("FROM \"SYSTEM\".DBIO_DATA_SETS WHERE prefix = :prefix")
        );
        assert_eq!(
            user_row("TS21").binds,
            [("username", Value::Text("TS21".into()))]
        );
        // `dbio list` reads the users and CF1s the catalog records, by exact name.
        assert!(
            catalog_users("SYSTEM").text.contains(
                "WHERE u.username IN (SELECT d.username FROM \"SYSTEM\".DBIO_DATA_SETS d)"
            ),
            "{}",
            catalog_users("SYSTEM").text
        );
        let t = catalog_tables("SYSTEM");
        assert!(
            t.text.contains("WHERE t.table_name = :table_name")
                && t.text.contains(
                    "AND t.owner IN (SELECT d.username FROM \"SYSTEM\".DBIO_DATA_SETS d)"
                ),
            "{}",
            t.text
        );
        assert_eq!(t.binds, [("table_name", Value::Text("CF1".into()))]);
    }

    #[test]
    fn the_intent_is_recorded_with_the_servers_clock() {
        let i = record_intent("SYSTEM", "USER1", "abc", "user", 1, None);
        assert!(
            i.text
                .contains("'creating', NULL, :pw, TO_CHAR(SYSDATE, 'YYYY-MM-DD\"T\"HH24:MI:SS'))"),
            "{}",
            i.text
        );
        assert_eq!(i.binds[2], ("prefix", Value::Text("USER".into())));
        assert_eq!(i.binds[4], ("pw", Value::Null));
        assert!(record_created("SYSTEM", "USER1").text.contains(
            "user_id = (SELECT u.user_id FROM all_users u WHERE u.username = d.username)"
        ));
        assert!(create_catalog("ADMIN").text.starts_with(
            "CREATE TABLE \"ADMIN\".DBIO_DATA_SETS (USERNAME VARCHAR2(128) NOT NULL PRIMARY KEY"
        ));
        assert_eq!(
            comment_catalog("ADMIN").text,
            "COMMENT ON TABLE \"ADMIN\".DBIO_DATA_SETS IS '{\"dbio\":{\"format\":1,\"object\":\"catalog\"}}'"
        );
    }

    #[test]
    fn statspack_reads_its_own_tables_for_one_snapshot() {
        let snap = statspack_snap();
        assert_eq!(snap.text, "BEGIN :snap_id := PERFSTAT.STATSPACK.SNAP; END;");
        assert_eq!(snap.binds, [("snap_id", Value::OutInt)]);
        let st = statspack_sysstat(7, 42, 1);
        assert!(
            st.text
                .contains("FROM perfstat.stats$sysstat WHERE snap_id = :snap_id AND dbid = :dbid")
        );
        assert!(st.text.contains("'physical read IO requests'"));
        assert_eq!(st.binds[2], ("inst_num", Value::Int(1)));
        assert!(
            statspack_time_model(7, 42, 1)
                .text
                .contains("JOIN perfstat.stats$time_model_statname n ON n.stat_id = t.stat_id")
        );
        let ev = statspack_events(7, 42, 1).text;
        assert!(ev.contains(
            "e.total_waits_fg, e.time_waited_micro_fg FROM perfstat.stats$system_event e"
        ));
        assert!(ev.contains("NVL(n.wait_class, 'Other') <> 'Idle'"));
    }

    #[test]
    fn the_plan_is_read_for_the_readers_exact_text() {
        let text = read_range("USER1").text;
        let p = sql_plan(&text);
        assert!(
            p.text.contains("FROM gv$sql s JOIN gv$sql_plan p"),
            "{}",
            p.text
        );
        assert_eq!(p.binds, [("sql_text", Value::Text(text))]);
    }
}
