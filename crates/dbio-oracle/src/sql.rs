//! Every SQL text the Oracle backend runs, built here so each can be unit-tested: SLOB's
//! schema (users USER1..USERn, table CF1 one row per block, index I_CF1), its load, the
//! sessions' two statements and the collector's V$ queries.

/// Table and index names, as SLOB names them.
pub const TABLE: &str = "CF1";
pub const INDEX: &str = "I_CF1";
/// Filler columns C2..C9 of 128 bytes, as the PostgreSQL schema (SLOB has C2..C20).
pub const FILLER_COLUMNS: usize = 8;
pub const FILLER_LEN: usize = 128;
/// What dbio writes into the comment of every table it creates; teardown drops only users
/// whose CF1 carries it.
pub const MARK: &str = "dbio";

/// An Oracle identifier, quoted and upper-cased (unquoted names fold to upper case).
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.to_uppercase().replace('"', ""))
}

/// A string literal.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The user that owns schema `n` (1-based): `<PREFIX><n>`, SLOB's USER1..USERn.
pub fn user_name(prefix: &str, n: u32) -> String {
    format!("{}{n}", prefix.to_uppercase())
}

/// Creates a schema's user with quota on its tablespace. The password is a bind-free
/// literal here because DDL takes no binds; the caller never logs this text.
pub fn create_user(user: &str, password: &str, tablespace: Option<&str>) -> String {
    let ts = tablespace
        .map(|t| {
            format!(
                " DEFAULT TABLESPACE {} QUOTA UNLIMITED ON {}",
                ident(t),
                ident(t)
            )
        })
        .unwrap_or_else(|| " QUOTA UNLIMITED ON USERS".to_string());
    format!(
        "CREATE USER {} IDENTIFIED BY \"{}\"{ts}",
        ident(user),
        password.replace('"', "")
    )
}

pub fn grant_session(user: &str) -> String {
    format!("GRANT CREATE SESSION, CREATE TABLE TO {}", ident(user))
}

/// CF1: a numeric key and filler columns; PCTFREE 99 leaves room for one row per block.
pub fn create_table(user: &str, tablespace: Option<&str>) -> String {
    let fillers = (2..2 + FILLER_COLUMNS)
        .map(|i| format!("C{i} VARCHAR2({FILLER_LEN})"))
        .collect::<Vec<_>>()
        .join(", ");
    let ts = tablespace
        .map(|t| format!(" TABLESPACE {}", ident(t)))
        .unwrap_or_default();
    format!(
        "CREATE TABLE {}.{TABLE} (CUSTID NUMBER(15) NOT NULL, {fillers}) PCTFREE 99 PCTUSED 1 NOCOMPRESS{ts}",
        ident(user)
    )
}

/// SLOB's trick for one row per block: insert one row, MINIMIZE RECORDS_PER_BLOCK (the
/// table remembers "at most as many rows per block as now"), then empty it.
pub fn one_row_per_block(user: &str) -> [String; 3] {
    let t = format!("{}.{TABLE}", ident(user));
    let fillers = ["'x'"; FILLER_COLUMNS].join(", ");
    [
        format!("INSERT INTO {t} VALUES (0, {fillers})"),
        format!("ALTER TABLE {t} MINIMIZE RECORDS_PER_BLOCK"),
        format!("TRUNCATE TABLE {t}"),
    ]
}

/// Server-side load: `rows` keys in random physical order (ORDER BY DBMS_RANDOM.VALUE), the
/// filler 128 'X', direct path.
pub fn load(user: &str, rows: u64, seed: u64) -> Vec<String> {
    let t = format!("{}.{TABLE}", ident(user));
    let filler = format!("RPAD('X', {FILLER_LEN}, 'X')");
    let cols = [filler.as_str(); FILLER_COLUMNS].join(", ");
    vec![
        format!("BEGIN DBMS_RANDOM.SEED({seed}); END;"),
        format!(
            "INSERT /*+ APPEND */ INTO {t} SELECT k, {cols} FROM \
             (SELECT LEVEL AS k FROM DUAL CONNECT BY LEVEL <= {rows}) ORDER BY DBMS_RANDOM.VALUE"
        ),
    ]
}

pub fn create_index(user: &str, tablespace: Option<&str>) -> String {
    let ts = tablespace
        .map(|t| format!(" TABLESPACE {}", ident(t)))
        .unwrap_or_default();
    format!(
        "CREATE INDEX {u}.{INDEX} ON {u}.{TABLE} (CUSTID) PCTFREE 0{ts}",
        u = ident(user)
    )
}

pub fn gather_stats(user: &str) -> String {
    format!(
        "BEGIN DBMS_STATS.GATHER_TABLE_STATS(ownname => {}, tabname => '{TABLE}', cascade => TRUE); END;",
        literal(&user.to_uppercase())
    )
}

/// The mark: `dbio {"state":...,"scale_blocks":N}`.
pub fn comment_table(user: &str, mark_json: &str) -> String {
    format!(
        "COMMENT ON TABLE {}.{TABLE} IS {}",
        ident(user),
        literal(&format!("{MARK} {mark_json}"))
    )
}

/// The mark of a user's CF1, if the table exists.
pub const TABLE_MARK: &str =
    "SELECT comments FROM all_tab_comments WHERE owner = :1 AND table_name = 'CF1'";

/// Rows, distinct blocks and the key range: one row per block means rows = blocks.
pub fn rows_and_blocks(user: &str) -> String {
    format!(
        "SELECT COUNT(*), COUNT(DISTINCT DBMS_ROWID.ROWID_RELATIVE_FNO(ROWID) || '.' || \
         DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)), MIN(CUSTID), MAX(CUSTID) FROM {}.{TABLE}",
        ident(user)
    )
}

/// Objects of a user other than dbio's table and index: when there are any, teardown drops
/// only CF1 and keeps the user.
pub const FOREIGN_OBJECTS: &str = "SELECT object_type || ' ' || object_name FROM all_objects \
     WHERE owner = :1 AND object_name NOT IN ('CF1', 'I_CF1') AND object_name NOT LIKE 'BIN$%' \
     AND object_name NOT LIKE 'SYS_%' ORDER BY 1";

/// Drops dbio's table (and with it its index) without the recycle bin.
pub fn drop_table(user: &str) -> String {
    format!("DROP TABLE {}.{TABLE} PURGE", ident(user))
}

/// Only users dbio created are dropped; CASCADE drops their table and index with them.
pub fn drop_user(user: &str) -> String {
    format!("DROP USER {} CASCADE", ident(user))
}

/// The session's read: `work_unit` keys through the index, SLOB's COUNT(C2).
pub fn read_range(user: &str) -> String {
    format!(
        "SELECT COUNT(C2) FROM {}.{TABLE} WHERE CUSTID BETWEEN :1 AND :2",
        ident(user)
    )
}

/// The session's update: one filler column (lite) or all (heavy), committed per statement.
pub fn update_range(user: &str, heavy: bool) -> String {
    let set = if heavy {
        (2..2 + FILLER_COLUMNS)
            .map(|i| format!("C{i} = :3"))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        "C2 = :3".to_string()
    };
    format!(
        "UPDATE {}.{TABLE} SET {set} WHERE CUSTID BETWEEN :1 AND :2",
        ident(user)
    )
}

/// V$SYSSTAT statistics the collector reads (names exactly as Oracle spells them).
pub const SYSSTAT_NAMES: &[&str] = &[
    "physical read total IO requests",
    "physical write total IO requests",
    "physical read IO requests",
    "physical write IO requests",
    "physical reads",
    "physical read total bytes",
    "physical write total bytes",
    "session logical reads",
    "redo size",
    "user commits",
    "execute count",
    "DB time",
    "CPU used by this session",
];

/// Events SLOB's reports single out; the rest are ranked by time.
pub const KEY_EVENTS: &[&str] = &[
    "db file sequential read",
    "db file parallel read",
    "db file scattered read",
    "log file parallel write",
    "log file sync",
    "free buffer waits",
];

/// V$SYSSTAT rows per instance (GV$ covers RAC; one row set per INST_ID).
pub fn sysstat_query() -> String {
    let names = SYSSTAT_NAMES
        .iter()
        .map(|n| literal(n))
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT inst_id, name, value FROM gv$sysstat WHERE name IN ({names})")
}

/// Every non-idle event's waits and time per instance.
pub const SYSTEM_EVENT: &str = "SELECT inst_id, event, wait_class, total_waits, time_waited_micro \
     FROM gv$system_event WHERE wait_class <> 'Idle'";

/// The instances and when each started: a changed startup time means a restart inside the
/// window, and every delta of that instance is void.
pub const INSTANCES: &str = "SELECT inst_id, instance_name, \
     TO_CHAR(startup_time, 'YYYY-MM-DD\"T\"HH24:MI:SS'), version FROM gv$instance";

/// Microsecond histogram of the key events (12.1+).
pub fn event_histogram_query() -> String {
    let names = KEY_EVENTS
        .iter()
        .map(|n| literal(n))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "SELECT inst_id, event, wait_time_micro, wait_count FROM gv$event_histogram_micro \
         WHERE event IN ({names})"
    )
}

/// Whether V$EVENT_HISTOGRAM_MICRO exists (12.1+).
pub const HAS_HISTOGRAM_MICRO: &str =
    "SELECT COUNT(*) FROM all_views WHERE view_name = 'GV_$EVENT_HISTOGRAM_MICRO'";

/// One sample of dbio's sessions (ASH-like, without the licence): what each is doing.
pub const SESSION_SAMPLE: &str = "SELECT inst_id, client_identifier, state, \
     CASE WHEN state = 'WAITING' THEN wait_class || ':' || event ELSE 'CPU' END \
     FROM gv$session WHERE module = 'dbio'";

/// AWR snapshots around the window (Diagnostics Pack licence) and the text report.
pub const AWR_SNAPSHOT: &str = "SELECT DBMS_WORKLOAD_REPOSITORY.CREATE_SNAPSHOT() FROM DUAL";
pub const AWR_REPORT: &str = "SELECT output FROM TABLE(DBMS_WORKLOAD_REPOSITORY.AWR_REPORT_TEXT(\
     (SELECT dbid FROM v$database), (SELECT instance_number FROM v$instance), :1, :2))";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_ddl_is_slobs() {
        assert_eq!(user_name("user", 3), "USER3");
        let t = create_table("user1", Some("slob"));
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
            ins.starts_with("INSERT INTO \"USER1\".CF1 VALUES (0, 'x'"),
            "{ins}"
        );
        assert_eq!(min, "ALTER TABLE \"USER1\".CF1 MINIMIZE RECORDS_PER_BLOCK");
        assert_eq!(trunc, "TRUNCATE TABLE \"USER1\".CF1");
        assert_eq!(
            create_index("user1", None),
            "CREATE INDEX \"USER1\".I_CF1 ON \"USER1\".CF1 (CUSTID) PCTFREE 0"
        );
        let u = create_user("user1", "se\"cret", None);
        assert_eq!(
            u,
            "CREATE USER \"USER1\" IDENTIFIED BY \"secret\" QUOTA UNLIMITED ON USERS"
        );
        assert!(gather_stats("user2").contains("ownname => 'USER2'"));
        assert_eq!(drop_user("user1"), "DROP USER \"USER1\" CASCADE");
        assert_eq!(drop_table("user1"), "DROP TABLE \"USER1\".CF1 PURGE");
        assert!(FOREIGN_OBJECTS.contains("NOT IN ('CF1', 'I_CF1')"));
    }

    #[test]
    fn load_is_server_side_and_random_ordered() {
        let l = load("user1", 4096, 7);
        assert_eq!(l[0], "BEGIN DBMS_RANDOM.SEED(7); END;");
        assert!(
            l[1].starts_with(
                "INSERT /*+ APPEND */ INTO \"USER1\".CF1 SELECT k, RPAD('X', 128, 'X'),"
            ),
            "{}",
            l[1]
        );
        assert!(l[1].contains("CONNECT BY LEVEL <= 4096) ORDER BY DBMS_RANDOM.VALUE"));
        let check = rows_and_blocks("user1");
        assert!(
            check.contains("DBMS_ROWID.ROWID_BLOCK_NUMBER(ROWID)")
                && check.contains("COUNT(DISTINCT")
        );
    }

    #[test]
    fn session_statements_bind_the_range() {
        assert_eq!(
            read_range("user1"),
            "SELECT COUNT(C2) FROM \"USER1\".CF1 WHERE CUSTID BETWEEN :1 AND :2"
        );
        assert_eq!(
            update_range("user1", false),
            "UPDATE \"USER1\".CF1 SET C2 = :3 WHERE CUSTID BETWEEN :1 AND :2"
        );
        assert!(
            update_range("user1", true).contains("C2 = :3, C3 = :3")
                && update_range("user1", true).contains("C9 = :3 WHERE")
        );
    }

    #[test]
    fn collector_queries_read_gv_views() {
        let s = sysstat_query();
        assert!(s.starts_with("SELECT inst_id, name, value FROM gv$sysstat WHERE name IN ('physical read total IO requests', "));
        assert!(s.contains("'CPU used by this session')"));
        assert!(SYSTEM_EVENT.contains("wait_class <> 'Idle'"));
        assert!(
            event_histogram_query().contains("'db file sequential read', 'db file parallel read'")
        );
        assert!(INSTANCES.contains("startup_time"));
        assert!(
            comment_table("user1", "{\"state\":\"complete\"}")
                .ends_with("IS 'dbio {\"state\":\"complete\"}'")
        );
    }
}
