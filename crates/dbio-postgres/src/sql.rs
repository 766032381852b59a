//! Every SQL text the PostgreSQL backend runs, in one place. DDL templates live in
//! `schema/postgres/*.sql`; identifiers are always quoted with [`quote_ident`].

const TABLE_TEMPLATE: &str = include_str!("../../../schema/postgres/table.sql");
const INDEX_TEMPLATE: &str = include_str!("../../../schema/postgres/index.sql");
const COPY_TEMPLATE: &str = include_str!("../../../schema/postgres/copy.sql");

/// Name of the SLOB table in each schema.
pub const TABLE: &str = "cf1";
/// Name of its key index.
pub const INDEX: &str = "i_cf1";
/// Filler columns c2..c9 and the characters in each.
pub const FILLER_COLUMNS: usize = 8;
pub const FILLER_LEN: usize = 120;
/// The comment earlier dbio versions (before data set ids) put on their tables and indexes, and the start of its schema marks
/// (`dbio {json}`); the current marks are JSON, see `marker`.
pub const LEGACY_MARK: &str = "dbio";

/// dbio's own settings on every connection it opens for its own work (setup, check, list,
/// teardown, preflight, collector, sampler): a role or database default must not cancel
/// its catalog work (`ALTER ROLE ... SET statement_timeout`) or close a connection that sits
/// idle through the window (`idle_session_timeout`, 14+; `idle_in_transaction_session_timeout`).
/// statement_timeout is set first, alone, so the rest already runs without the role's
/// limit (13+ re-arms the timer per statement of a query string); the idle timeouts are set
/// through pg_settings so a server without one (13 has no idle_session_timeout) skips it.
pub const OWN_SETTINGS: &str = "SET statement_timeout = 0; \
     SELECT set_config(name, '0', false) FROM pg_settings \
     WHERE name IN ('idle_session_timeout', 'idle_in_transaction_session_timeout')";

/// The measured sessions' settings: statement_timeout explicitly (dbio's value, 0 = none,
/// so a role default does not apply) and no idle timeouts (a session idles while the others
/// connect and prepare); `major` gates idle_session_timeout (14+).
pub fn session_settings(statement_timeout_ms: u128, major: i32) -> String {
    let mut sql = format!(
        "SET statement_timeout = {statement_timeout_ms}; SET idle_in_transaction_session_timeout = 0"
    );
    if major >= 14 {
        sql.push_str("; SET idle_session_timeout = 0");
    }
    sql
}

/// `"name"` with embedded quotes doubled, as PostgreSQL's quote_ident does.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'` with embedded quotes doubled.
pub fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Drops the leading `--` comment lines of a template.
fn strip_comments(template: &str) -> String {
    template
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

fn fill(template: &str, schema: &str, tablespace: Option<&str>) -> String {
    let ts = tablespace
        .map(|t| format!(" TABLESPACE {}", quote_ident(t)))
        .unwrap_or_default();
    strip_comments(template)
        .replace("{schema}", &quote_ident(schema))
        .replace("{tablespace}", &ts)
}

pub fn create_table(schema: &str, tablespace: Option<&str>) -> String {
    fill(TABLE_TEMPLATE, schema, tablespace)
}

pub fn create_index(schema: &str, tablespace: Option<&str>) -> String {
    fill(INDEX_TEMPLATE, schema, tablespace)
}

pub fn copy_in(schema: &str) -> String {
    fill(COPY_TEMPLATE, schema, None)
}

/// A data set's schemas all have one owner, the data set's (whoever runs the setup that
/// adds one): a mark counts only on a schema of that owner.
pub fn create_schema(schema: &str, owner: &str) -> String {
    format!(
        "CREATE SCHEMA {} AUTHORIZATION {}",
        quote_ident(schema),
        quote_ident(owner)
    )
}

pub fn comment_schema(schema: &str, comment: &str) -> String {
    format!(
        "COMMENT ON SCHEMA {} IS {}",
        quote_ident(schema),
        quote_literal(comment)
    )
}

pub fn comment_table(schema: &str, comment: &str) -> String {
    format!(
        "COMMENT ON TABLE {}.{TABLE} IS {}",
        quote_ident(schema),
        quote_literal(comment)
    )
}

pub fn comment_index(schema: &str, comment: &str) -> String {
    format!(
        "COMMENT ON INDEX {}.{INDEX} IS {}",
        quote_ident(schema),
        quote_literal(comment)
    )
}

/// Removes dbio's mark from a schema that stays because it holds the user's objects.
pub fn unmark_schema(schema: &str) -> String {
    format!("COMMENT ON SCHEMA {} IS NULL", quote_ident(schema))
}

/// Without CASCADE unless the user asked for their dependent objects to go too
/// (`--drop-dependents`).
pub fn drop_table(schema: &str, cascade: bool) -> String {
    format!(
        "DROP TABLE {}.{TABLE}{}",
        quote_ident(schema),
        if cascade { " CASCADE" } else { "" }
    )
}

/// Without CASCADE: a schema that still holds objects dbio did not create is left in place.
pub fn drop_schema(schema: &str) -> String {
    format!("DROP SCHEMA {}", quote_ident(schema))
}

pub fn vacuum_freeze_analyze(schema: &str) -> String {
    format!("VACUUM (FREEZE, ANALYZE) {}.{TABLE}", quote_ident(schema))
}

pub const CHECKPOINT: &str = "CHECKPOINT";

/// Transactions one `Client::query` of a statement text commits: tokio-postgres prepares an
/// unnamed statement (Parse, Sync) and then runs it (Bind, Execute, Sync), and each Sync
/// outside a transaction block ends an implicit transaction (measured: 107 samples and
/// /proc reads of a sampler added 214 to xact_commit). `batch_execute` (one simple query)
/// commits one.
pub const QUERY_TRANSACTIONS: u64 = 2;

/// 15+: publishes this backend's pending statistics when the statement ends, before the
/// reply (pgstat_report_stat runs ahead of ReadyForQuery), so a snapshot taken after it
/// counts them (pg-stats §4).
pub const FORCE_FLUSH: &str = "SELECT pg_stat_force_next_flush()";

/// Server facts every command needs: version, block size, shared_buffers in bytes, whether we
/// are superuser, the database name.
pub const SERVER_INFO: &str = "SELECT current_setting('server_version_num')::int, \
     current_setting('server_version'), current_setting('block_size')::bigint, \
     pg_size_bytes(current_setting('shared_buffers')), \
     (SELECT rolsuper FROM pg_roles WHERE rolname = current_user), current_database(), current_user, \
     has_database_privilege(current_database(), 'CREATE'), current_setting('track_io_timing'), \
     coalesce(current_setting('debug_io_direct', true), '')";

/// What target_session_attrs asks of a server: is it a standby, is the session read-only
/// (the two facts libpq checks).
pub const SESSION_STATE: &str = "SELECT pg_catalog.pg_is_in_recovery(), \
     pg_catalog.current_setting('transaction_read_only')";

/// Schemas by name with their comments (NULL comment = no comment).
pub const SCHEMAS_BY_NAME: &str = "SELECT n.nspname::text, obj_description(n.oid, 'pg_namespace'), \
     pg_get_userbyid(n.nspowner)::text \
     FROM pg_namespace n WHERE n.nspname = ANY($1::text[])";

/// Every schema whose comment may be a dbio mark (JSON or legacy); `marker` parses them strictly
/// and the caller matches each to a data set by the prefix and number in the mark.
pub const MARKED_SCHEMAS: &str = "SELECT n.nspname::text, obj_description(n.oid, 'pg_namespace'), \
     pg_get_userbyid(n.nspowner)::text \
     FROM pg_namespace n \
     WHERE obj_description(n.oid, 'pg_namespace') LIKE '{%dbio%' \
        OR obj_description(n.oid, 'pg_namespace') LIKE 'dbio {%' \
     ORDER BY length(n.nspname), n.nspname";

/// The SLOB table of a schema and its comment, if it exists.
pub const TABLE_BY_SCHEMA: &str = "SELECT c.oid, obj_description(c.oid, 'pg_class') \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = $1 AND c.relname = 'cf1' AND c.relkind IN ('r', 'p')";

/// Objects in a schema: relations (with their name and comment, so dbio's own table and index
/// are told by their mark), functions and procedures, and types that are not a relation's row
/// type or an array. Anything else there (an operator, a collation) still stops DROP SCHEMA,
/// which runs without CASCADE. Columns: description, relname or NULL, comment or NULL.
pub const SCHEMA_OBJECTS: &str = "SELECT pg_describe_object('pg_class'::regclass, c.oid, 0), c.relname::text, \
            obj_description(c.oid, 'pg_class') \
       FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace \
     UNION ALL SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), NULL, NULL \
       FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace \
     UNION ALL SELECT pg_describe_object('pg_type'::regclass, t.oid, 0), NULL, NULL \
       FROM pg_type t WHERE t.typnamespace = $1::text::regnamespace AND t.typcategory <> 'A' \
        AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.reltype = t.oid) \
     ORDER BY 1";

/// Objects that depend on table `$1` (an oid) or its row type, as pg_depend records them: an
/// index, a trigger, a rule, a policy, extended statistics, a view (through its rewrite rule:
/// named as the view), a foreign key, a column of another table of this row type. Left out:
/// what the table's creation made (its row type, TOAST table: internal dependencies) and
/// NOT NULL constraints (catalogued as constraints from PostgreSQL 18). The caller leaves out
/// dbio's own index by its mark. Columns: description, comment of a relation or NULL.
pub const DEPENDENTS: &str = "SELECT DISTINCT \
       CASE WHEN d.classid = 'pg_rewrite'::regclass \
            THEN coalesce((SELECT pg_describe_object('pg_class'::regclass, r.ev_class, 0) FROM pg_rewrite r \
                           WHERE r.oid = d.objid AND r.rulename = '_RETURN'), \
                          pg_describe_object(d.classid, d.objid, 0)) \
            ELSE pg_describe_object(d.classid, d.objid, 0) END, \
       CASE WHEN d.classid = 'pg_class'::regclass THEN obj_description(d.objid, 'pg_class') END \
     FROM pg_depend d \
     WHERE ((d.refclassid = 'pg_class'::regclass AND d.refobjid = $1::oid) \
         OR (d.refclassid = 'pg_type'::regclass \
             AND d.refobjid = (SELECT reltype FROM pg_class WHERE oid = $1::oid))) \
       AND d.deptype <> 'i' \
       AND NOT (d.classid = 'pg_constraint'::regclass \
                AND EXISTS (SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid AND k.contype = 'n')) \
     ORDER BY 1";

pub const TABLESPACE_USABLE: &str = "SELECT EXISTS (SELECT 1 FROM pg_tablespace WHERE spcname = $1), \
     CASE WHEN EXISTS (SELECT 1 FROM pg_tablespace WHERE spcname = $1) \
          THEN has_tablespace_privilege($1, 'CREATE') ELSE false END";

/// Table and index size in bytes.
pub fn relation_sizes(schema: &str) -> String {
    let s = quote_literal(&quote_ident(schema));
    format!(
        "SELECT pg_relation_size(({s} || '.{TABLE}')::regclass), pg_relation_size(({s} || '.{INDEX}')::regclass)"
    )
}

/// Rows, distinct heap blocks (the block number is the first half of a ctid), and the
/// correlation of the key with the block order over the whole table.
pub fn rows_and_blocks(schema: &str) -> String {
    format!(
        "SELECT count(*), count(DISTINCT (ctid::text::point)[0]), \
         corr(custid::float8, (ctid::text::point)[0]) FROM {}.{TABLE}",
        quote_ident(schema)
    )
}

/// The correlation of cf1.custid with the physical order, as the last ANALYZE found it
/// (pg_stats, readable for a table the role may SELECT; `$1` the schema).
pub const KEY_CORRELATION: &str = "SELECT correlation::float8 FROM pg_stats \
     WHERE schemaname = $1 AND tablename = 'cf1' AND attname = 'custid'";

/// Catalog state of the table and index: pages, all-visible pages, analyzed, index valid.
pub const TABLE_STATE: &str = "SELECT c.relpages::bigint, c.relallvisible::bigint, \
     EXISTS (SELECT 1 FROM pg_stats s WHERE s.schemaname = $1 AND s.tablename = 'cf1'), \
     coalesce((SELECT i.indisvalid AND i.indisready FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid \
               WHERE i.indrelid = c.oid AND ic.relname = 'i_cf1'), false), \
     coalesce((SELECT n_dead_tup FROM pg_stat_user_tables t WHERE t.relid = c.oid), 0) \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = $1 AND c.relname = 'cf1'";

/// The reader's statement: `work_unit` consecutive keys, an aggregate of a filler column so
/// every block is visited but no row travels to the client.
pub fn read_range(schema: &str) -> String {
    format!(
        "SELECT count(c2) FROM {}.{TABLE} WHERE custid BETWEEN $1 AND $2",
        quote_ident(schema)
    )
}

/// The update: `update_work_unit` consecutive keys set to `$3`; one filler column (redo
/// stress lite) or all of them (heavy). The key is not changed, so updates are HOT and each
/// row stays in its block.
pub fn update_range(schema: &str, heavy: bool) -> String {
    let set = if heavy {
        (2..2 + FILLER_COLUMNS)
            .map(|i| format!("c{i} = $3"))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        "c2 = $3".to_string()
    };
    format!(
        "UPDATE {}.{TABLE} SET {set} WHERE custid BETWEEN $1 AND $2",
        quote_ident(schema)
    )
}

/// Settings recorded with every result; `current_setting(name, true)` is NULL for a setting
/// this server version does not have.
/// Buckets of the server loop's latency histogram: bucket `i` counts `[2^i, 2^(i+1))` µs.
pub const LOOP_BUCKETS: usize = 32;

/// `run.engine: server`: the session's whole loop as a procedure in its own `pg_temp`
/// schema (nothing persists, nothing to drop). It runs the client engine's operations (same
/// read and update text, keys drawn uniformly, exactly `update_pct` updates per 100 operations,
/// evenly spread, each update committed) until `run_s` seconds have passed, timing each with
/// clock_timestamp() into power-of-two µs buckets, and returns its counts as INOUT values.
pub fn server_loop_procedure(schema: &str, heavy: bool) -> String {
    let table = format!("{}.{TABLE}", quote_ident(schema));
    let set = if heavy {
        (2..2 + FILLER_COLUMNS)
            .map(|i| format!("c{i} = v"))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        "c2 = v".to_string()
    };
    format!(
        r#"CREATE PROCEDURE pg_temp.dbio_loop(
    run_s float8, scale bigint, wu bigint, uwu bigint, update_pct int, seed float8, tag text,
    INOUT reads bigint DEFAULT 0, INOUT updates bigint DEFAULT 0,
    INOUT rows_read bigint DEFAULT 0, INOUT rows_updated bigint DEFAULT 0,
    INOUT read_buckets bigint[] DEFAULT NULL, INOUT update_buckets bigint[] DEFAULT NULL)
LANGUAGE plpgsql AS $dbio$
DECLARE
    t_end timestamptz := clock_timestamp() + make_interval(secs => run_s);
    t0 timestamptz;
    us float8;
    b int;
    k bigint;
    hi bigint;
    n bigint;
    i bigint := 0;
    v text;
BEGIN
    read_buckets := array_fill(0::bigint, ARRAY[{LOOP_BUCKETS}]);
    update_buckets := array_fill(0::bigint, ARRAY[{LOOP_BUCKETS}]);
    PERFORM setseed(seed);
    LOOP
        t0 := clock_timestamp();
        EXIT WHEN t0 >= t_end;
        i := i + 1;
        IF (i * update_pct) / 100 > ((i - 1) * update_pct) / 100 THEN
            k := 1 + floor(random() * (scale - uwu + 1))::bigint;
            v := rpad('upd:' || tag || ':' || i || ':', {FILLER_LEN}, 'u');
            UPDATE {table} SET {set} WHERE custid BETWEEN k AND k + uwu - 1;
            GET DIAGNOSTICS n = ROW_COUNT;
            COMMIT;
            us := extract(epoch FROM clock_timestamp() - t0) * 1e6;
            b := least({last}, floor(ln(greatest(us, 1)) * 1.4426950408889634)::int) + 1;
            update_buckets[b] := update_buckets[b] + 1;
            updates := updates + 1;
            rows_updated := rows_updated + n;
        ELSE
            k := 1 + floor(random() * (scale - wu + 1))::bigint;
            hi := k + wu - 1;
            -- The client engine's read, two bigint parameters: the plan preflight verified.
            SELECT count(c2) INTO n FROM {table} WHERE custid BETWEEN k AND hi;
            us := extract(epoch FROM clock_timestamp() - t0) * 1e6;
            b := least({last}, floor(ln(greatest(us, 1)) * 1.4426950408889634)::int) + 1;
            read_buckets[b] := read_buckets[b] + 1;
            reads := reads + 1;
            rows_read := rows_read + n;
        END IF;
    END LOOP;
END
$dbio$"#,
        last = LOOP_BUCKETS - 1
    )
}

/// PostgreSQL 14+: the server checks every second that the client of a running statement is
/// still connected, and ends the statement when it is not (the server engine's orphans).
pub const CLIENT_CHECK_INTERVAL: &str = "SET client_connection_check_interval = 1000";

/// The call of [`server_loop_procedure`]; its row holds the INOUT values.
pub fn server_loop_call(
    run_s: f64,
    scale: u64,
    work_unit: u64,
    update_work_unit: u64,
    update_pct: u32,
    seed: f64,
    tag: &str,
) -> String {
    format!(
        "CALL pg_temp.dbio_loop({run_s}, {scale}, {work_unit}, {update_work_unit}, {update_pct}, {seed}, {})",
        quote_literal(tag)
    )
}

pub const SETTINGS: &str = "SELECT n, current_setting(n, true) FROM unnest($1::text[]) AS n";

pub const SETTING_NAMES: &[&str] = &[
    "shared_buffers",
    "block_size",
    "track_io_timing",
    "data_checksums",
    "io_method",
    "debug_io_direct",
    "effective_io_concurrency",
    "io_combine_limit",
    "max_connections",
    "autovacuum",
    "fsync",
    "synchronous_commit",
    "wal_level",
    "checkpoint_timeout",
    "max_wal_size",
];

pub const DATA_DIRECTORY: &str = "SELECT setting FROM pg_settings WHERE name = 'data_directory'";

pub const WAL_SETTINGS: &str =
    "SELECT current_setting('wal_level'), pg_size_bytes(current_setting('max_wal_size'))";

/// Bytes of dbio's table and its indexes (what a rebuild frees first).
pub const TOTAL_RELATION_SIZE: &str = "SELECT pg_total_relation_size($1::oid)";

pub const TABLESPACE_LOCATION: &str =
    "SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname = $1";

/// Connections the role may still open: max_connections minus reserved and in-use slots.
pub const FREE_CONNECTIONS: &str = "SELECT current_setting('max_connections')::int      - current_setting('superuser_reserved_connections')::int      - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int";

/// Backends this role cannot see (no pg_read_all_stats): pg_stat_activity shows their rows
/// with backend_type NULL. Those with a database are client backends or autovacuum workers
/// of other roles; each may hold a connection slot, so the free-slot check counts them as
/// used, not free.
pub const INVISIBLE_BACKENDS: &str = "SELECT count(*)::int FROM pg_stat_activity \
     WHERE backend_type IS NULL AND datid IS NOT NULL";

/// Where each named schema's `cf1` really is and how big it is with its indexes: the
/// tablespace from pg_class.reltablespace (0 is the database's default, pg_database
/// .dattablespace; PostgreSQL docs, "pg_class"), not the one the mark names, since a table
/// can be moved after the load.
pub const DATA_SET_TABLES: &str = "SELECT n.nspname::text, \
     (SELECT t.spcname::text FROM pg_tablespace t WHERE t.oid = CASE WHEN c.reltablespace = 0 \
        THEN (SELECT d.dattablespace FROM pg_database d WHERE d.datname = current_database()) \
        ELSE c.reltablespace END), \
     pg_total_relation_size(c.oid)::bigint \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = ANY($1::text[]) AND c.relname = 'cf1' AND c.relkind IN ('r', 'p')";

/// The plan steering of `run.read_path`, set on every measured session (both engines) and on
/// the preflight connection that verifies the plan. Only the alternative is switched off, so
/// a setting from the DSN or the role (`options=-c enable_indexscan=off`) still shows in the
/// verified plan and the run is refused rather than measuring another path.
pub fn read_path_settings(path: dbio_core::config::ReadPath) -> &'static str {
    match path {
        // pg-aio-host-stats.md 1b: the range read may be planned as a Bitmap Heap Scan,
        // which reads through read streams (prefetch, AIO on 18+); pinning the Index Scan
        // keeps one synchronous single-block read at a time per session.
        // A server with a plain index-scan prefetch (`enable_indexscan_prefetch`, a
        // PostgreSQL 20 candidate: beyond-peers.md) would keep several reads in flight per
        // Index Scan: it is pinned off where it exists (set_config over pg_settings does
        // nothing where it does not).
        dbio_core::config::ReadPath::Index => {
            "SET enable_bitmapscan = off; SELECT set_config(name, 'off', false) FROM pg_settings WHERE name = 'enable_indexscan_prefetch'"
        }
        dbio_core::config::ReadPath::Bitmap => "SET enable_indexscan = off",
    }
}

/// The index-prefetch setting a server may have (none up to PostgreSQL 19).
pub const INDEX_PREFETCH: &str = "enable_indexscan_prefetch";

/// Name of the read statement preflight prepares to see its generic plan.
pub const VERIFY_READ: &str = "dbio_verify_read";

/// Preflight's copy of the sessions' read: the same text and parameter types, prepared under
/// the sessions' plan settings, so `EXPLAIN EXECUTE` shows the generic plan they will use.
/// Runs in a transaction that the caller rolls back (SET LOCAL).
pub fn prepare_verify_read(schema: &str, path: dbio_core::config::ReadPath) -> String {
    format!(
        "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; {} ; PREPARE {VERIFY_READ}(bigint, bigint) AS {}",
        read_path_settings(path).replacen("SET ", "SET LOCAL ", 1),
        read_range(schema)
    )
}

/// EXPLAIN of the prepared read's generic plan, over `work_unit` keys.
pub fn explain_verify_read(work_unit: u64) -> String {
    format!(
        "EXPLAIN (FORMAT JSON) EXECUTE {VERIFY_READ}(1, {})",
        work_unit.max(1)
    )
}

pub const DEALLOCATE_VERIFY_READ: &str = "DEALLOCATE dbio_verify_read; ROLLBACK";

/// Where a dbio table really is and how big, by the catalog (`$1` the schema): pages and rows
/// as of the last VACUUM or ANALYZE (pg_class), the heap's bytes on disk now
/// (pg_relation_size), the tablespace of the table and of its index (pg_class.reltablespace,
/// 0 = the database's default tablespace), the owner, the role connected, vacuum_count, and
/// rows deleted or dead since the statistics began (n_tup_del + n_dead_tup).
pub const TABLE_FACTS: &str = "SELECT c.relpages::bigint, c.reltuples::float8, pg_relation_size(c.oid), \
       (SELECT t.spcname::text FROM pg_tablespace t WHERE t.oid = coalesce(nullif(c.reltablespace, 0), \
            (SELECT d.dattablespace FROM pg_database d WHERE d.datname = current_database()))), \
       (SELECT t.spcname::text FROM pg_tablespace t WHERE t.oid = coalesce(nullif(ic.reltablespace, 0), \
            (SELECT d.dattablespace FROM pg_database d WHERE d.datname = current_database()))), \
       pg_get_userbyid(c.relowner)::text, current_user::text, \
       coalesce((SELECT s.vacuum_count FROM pg_stat_user_tables s WHERE s.relid = c.oid), 0)::bigint, \
       coalesce((SELECT s.n_tup_del + s.n_dead_tup FROM pg_stat_user_tables s WHERE s.relid = c.oid), 0)::bigint \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     LEFT JOIN pg_class ic ON ic.relnamespace = c.relnamespace AND ic.relname = 'i_cf1' AND ic.relkind = 'i' \
     WHERE n.nspname = $1 AND c.relname = 'cf1' AND c.relkind IN ('r', 'p')";

/// Whether the table's last manual VACUUM ended at or after `$2` (the server's clock just
/// before dbio's VACUUM, as text; `$1` the schema). Not vacuum_count: on 13/14 the
/// statistics collector publishes an earlier VACUUM (setup's) late, and the count then rises
/// although the server skipped this one. The caller clears the snapshot and asks again.
pub const VACUUMED_SINCE: &str = "SELECT coalesce((SELECT s.last_vacuum >= $2::text::timestamptz \
       FROM pg_stat_user_tables s WHERE s.schemaname = $1 AND s.relname = 'cf1'), false)";

/// The server's clock in seconds since the epoch (clock_timestamp(): now, not the
/// transaction's start).
pub const SERVER_EPOCH: &str = "SELECT extract(epoch FROM clock_timestamp())::float8";

/// The server's clock, as text for [`VACUUMED_SINCE`].
pub const SERVER_CLOCK: &str = "SELECT clock_timestamp()::text";

/// The database's default tablespace (where a table with reltablespace 0 is).
pub const DEFAULT_TABLESPACE: &str = "SELECT t.spcname::text FROM pg_tablespace t \
     JOIN pg_database d ON d.dattablespace = t.oid WHERE d.datname = current_database()";

pub const CLEAR_STATS_SNAPSHOT: &str = "SELECT pg_stat_clear_snapshot()";

/// Exact probes through the index: the first key, the last key (`$1` = the scale) and the
/// one after it; three index lookups, whatever the scale.
pub fn key_probes(schema: &str) -> String {
    let t = format!("{}.{TABLE}", quote_ident(schema));
    format!(
        "SELECT EXISTS (SELECT 1 FROM {t} WHERE custid = 1), EXISTS (SELECT 1 FROM {t} WHERE custid = $1::bigint), \
         EXISTS (SELECT 1 FROM {t} WHERE custid = $1::bigint + 1)"
    )
}

/// dbio's advisory locks (two-int4 form: `$1` a dbio namespace, `$2` the key). Session
/// locks: held until released or until the holding connection ends.
pub const TRY_LOCK_EXCLUSIVE: &str = "SELECT pg_try_advisory_lock($1::int4, $2::int4)";
pub const TRY_LOCK_SHARED: &str = "SELECT pg_try_advisory_lock_shared($1::int4, $2::int4)";
/// Waits for the key, inside the caller's transaction (released at its end).
pub const LOCK_XACT: &str = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)";

/// The other backends holding (or waiting for) advisory key (`$1`, `$2`) in this database,
/// with what pg_stat_activity shows of them, and whether each also holds the run key
/// (`$1`, `$3`... see `lock`): NULL columns are what this role may not see (pg_read_all_stats).
/// pg_locks shows the two int4 keys as classid and objid, objsubid 2.
pub const LOCK_HOLDERS: &str = "SELECT l.pid, l.mode, l.granted, a.application_name::text, host(a.client_addr), \
       to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || ' UTC', a.usename::text, \
       EXISTS (SELECT 1 FROM pg_locks r WHERE r.pid = l.pid AND r.locktype = 'advisory' AND r.granted \
               AND r.database = l.database AND r.classid = $3::int4::oid AND r.objid = $4::int4::oid AND r.objsubid = 2) \
     FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid \
     WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
       AND l.classid = $1::int4::oid AND l.objid = $2::int4::oid AND l.objsubid = 2 AND l.pid <> pg_backend_pid() \
     ORDER BY l.pid";

// ---- Host figures (the server's own /proc through the connection) and rights ----

/// One server file, whole (pg_read_file(text) reads to EOF, so /proc files of size 0 work:
/// genfile.c read_binary_file). Needs superuser, or pg_read_server_files and EXECUTE on
/// pg_read_file(text) (PostgreSQL 11+, commit e79350fef).
pub const READ_SERVER_FILE: &str = "SELECT pg_read_file($1)";

/// A small server file that may not exist (a cgroup's limit file): NULL, not an error in the
/// server's log, when it is missing (pg_read_file's missing_ok, PostgreSQL 9.5+).
pub const READ_SERVER_FILE_IF_EXISTS: &str = "SELECT pg_read_file($1, 0, 1048576, true)";

/// /proc/<pid>/io of each live pid of `$1` (a pid pg_stat_activity lists is a live backend
/// or server process of this cluster).
pub const READ_PID_IO: &str = "SELECT pid, pg_read_file('/proc/' || pid || '/io') \
     FROM pg_stat_activity WHERE pid = ANY($1::int[])";

/// How many of the sessions' backends `$1` are still there.
pub const BACKENDS_LEFT: &str = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])";

/// The port and start time that postmaster.pid must name for the server to be this host's.
pub const SERVER_IDENTITY: &str = "SELECT current_setting('port')::int, \
     extract(epoch FROM pg_postmaster_start_time())::float8";

/// Where each of the schemas' `cf1` really lives: its tablespace's location (NULL for
/// pg_default, i.e. the data directory). reltablespace 0 is the database's default
/// tablespace.
pub const TABLE_LOCATIONS: &str = "SELECT n.nspname::text, \
     CASE WHEN t.spcname IN ('pg_default', 'pg_global') THEN NULL \
          ELSE nullif(pg_tablespace_location(t.oid), '') END \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     JOIN pg_tablespace t ON t.oid = CASE c.reltablespace WHEN 0 THEN \
          (SELECT dattablespace FROM pg_database WHERE datname = current_database()) \
          ELSE c.reltablespace END \
     WHERE c.relname = 'cf1' AND c.relkind = 'r' AND n.nspname = ANY($1::text[]) \
     ORDER BY 1";

/// io workers (PostgreSQL 18+), enumerated afresh each time: 19 scales the pool during a run.
pub const IO_WORKERS: &str =
    "SELECT pid FROM pg_stat_activity WHERE backend_type = 'io worker' ORDER BY pid";

/// The role's rights that decide which figures a run can have, one row:
/// superuser, pg_read_all_stats, pg_read_all_settings, pg_read_server_files (each by
/// privilege, so pg_monitor's members count), EXECUTE on pg_read_file(text),
/// pg_checkpoint (15+, NULL before), track_io_timing, and SET on it (15+ GRANT SET ON
/// PARAMETER; superusers may always).
pub fn role_rights(major: i32) -> String {
    let checkpoint = if major >= 15 {
        "pg_has_role(current_user, 'pg_checkpoint', 'USAGE')"
    } else {
        "NULL::bool"
    };
    let set_timing = if major >= 15 {
        "has_parameter_privilege('track_io_timing', 'SET')"
    } else {
        "NULL::bool"
    };
    format!(
        "SELECT r.rolsuper, \
         pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'), \
         pg_has_role(current_user, 'pg_read_all_settings', 'USAGE'), \
         pg_has_role(current_user, 'pg_read_server_files', 'USAGE'), \
         has_function_privilege('pg_catalog.pg_read_file(text)', 'EXECUTE'), \
         {checkpoint}, current_setting('track_io_timing') = 'on', {set_timing}, \
         current_user::text \
         FROM pg_roles r WHERE r.rolname = current_user"
    )
}

/// The cluster's identity (pg_control_system() is executable by PUBLIC), as text.
pub const SYSTEM_IDENTIFIER: &str = "SELECT system_identifier::text FROM pg_control_system()";

/// The connection slots setup's loaders may take: max_connections less the slots reserved
/// for superusers (and, 16+, reserved_connections) and the client backends already there;
/// the role's and the database's CONNECTION LIMIT and their sessions (-1: no limit).
pub const CONNECTION_SLOTS: &str = "SELECT current_setting('max_connections')::int, \
     current_setting('superuser_reserved_connections')::int, \
     coalesce(current_setting('reserved_connections', true), '0')::int, \
     (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int, \
     (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user), \
     (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
        AND usename = current_user)::int, \
     (SELECT datconnlimit FROM pg_database WHERE datname = current_database()), \
     (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' \
        AND datname = current_database())::int, \
     coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)";

// What limited a run (residency, cpu, sampler): see residency.rs, cpu.rs, caps.rs.

/// The data set's relations (each schema's table and index) in schema order, table first:
/// `schema.name`, relkind, main-fork filenode, path under the data directory, bytes, and the
/// name as regclass text (quoted where needed). `$1`: the schemas.
pub fn residency_relations() -> String {
    format!(
        "SELECT n.nspname || '.' || c.relname, c.relkind::text, pg_relation_filenode(c.oid)::bigint, \
         pg_relation_filepath(c.oid), pg_relation_size(c.oid), c.oid::regclass::text \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = ANY($1::text[]) AND c.relname IN ('{TABLE}', '{INDEX}') AND c.relkind IN ('r', 'i') \
         ORDER BY array_position($1::text[], n.nspname::text), c.relkind DESC"
    )
}

/// Blocks per segment file (pg_settings.segment_size is in blocks).
pub const SEGMENT_BLOCKS: &str =
    "SELECT setting::bigint FROM pg_settings WHERE name = 'segment_size'";

/// The schema of an extension installed in this database (`$1` its name).
pub const EXTENSION_INSTALLED: &str = "SELECT n.nspname::text FROM pg_extension e \
     JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = $1";

/// An extension the server can install (`$1` its name).
pub const EXTENSION_AVAILABLE: &str = "SELECT 1 FROM pg_available_extensions WHERE name = $1";

/// In schema public, never in a schema of dbio's data set (whatever the search_path), so that
/// teardown never meets it there.
pub const CREATE_BUFFERCACHE: &str = "CREATE EXTENSION IF NOT EXISTS pg_buffercache SCHEMA public";

/// The block numbers in shared_buffers of each main fork of `$1` (filenodes) in this
/// database; pg_buffercache installed in `schema`.
pub fn buffercache_blocks(schema: &str) -> String {
    format!(
        "SELECT b.relfilenode::bigint, array_agg(b.relblocknumber::bigint) \
         FROM {}.pg_buffercache b \
         WHERE b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND b.relforknumber = 0 AND b.relfilenode::bigint = ANY($1::bigint[]) \
         GROUP BY 1",
        quote_ident(schema)
    )
}

/// Bytes of a relation (`$1`, regclass text) in the server host's page cache, by pgfincore
/// installed in `schema`.
pub fn pgfincore_bytes(schema: &str) -> String {
    format!(
        "SELECT coalesce(sum(pages_mem * os_page_size), 0)::bigint FROM {}.pgfincore($1::text::regclass)",
        quote_ident(schema)
    )
}

/// Every server process pg_stat_activity lists (backends and auxiliary processes).
pub const SERVER_PIDS: &str = "SELECT pid FROM pg_stat_activity";

/// PostgreSQL 18+: asynchronous I/O handles of the sessions `$1` in flight (defined, staged or
/// submitted; pg_aios, superuser or pg_read_all_stats).
pub const AIOS_IN_FLIGHT: &str = "SELECT count(*)::bigint FROM pg_aios \
     WHERE pid = ANY($1::int[]) AND state IN ('DEFINED', 'STAGED', 'SUBMITTED')";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_loop_runs_the_client_engines_statements() {
        let lite = server_loop_procedure("user1", false);
        assert!(
            lite.starts_with("CREATE PROCEDURE pg_temp.dbio_loop("),
            "{lite}"
        );
        assert!(
            lite.contains(
                "SELECT count(c2) INTO n FROM \"user1\".cf1 WHERE custid BETWEEN k AND hi;"
            )
        );
        assert!(
            lite.contains("UPDATE \"user1\".cf1 SET c2 = v WHERE custid BETWEEN k AND k + uwu - 1")
        );
        // Each update commits, as the client engine's autocommit does.
        assert!(lite.contains("GET DIAGNOSTICS n = ROW_COUNT;\n            COMMIT;"));
        assert!(lite.contains(&format!("ARRAY[{LOOP_BUCKETS}]")));
        let heavy = server_loop_procedure("user1", true);
        assert!(
            heavy.contains(
                "SET c2 = v, c3 = v, c4 = v, c5 = v, c6 = v, c7 = v, c8 = v, c9 = v WHERE"
            )
        );
        assert_eq!(
            server_loop_call(30.0, 1000, 64, 8, 20, -0.5, "it's"),
            "CALL pg_temp.dbio_loop(30, 1000, 64, 8, 20, -0.5, 'it''s')"
        );
    }

    #[test]
    fn templates_fill_quoted_identifiers() {
        let t = create_table("user1", Some("fast ts"));
        assert!(t.starts_with("CREATE TABLE \"user1\".cf1 ("), "{t}");
        assert!(
            t.ends_with("WITH (fillfactor = 10) TABLESPACE \"fast ts\""),
            "{t}"
        );
        assert!(!t.contains("--"));
        let i = create_index("user1", None);
        assert_eq!(
            i,
            "CREATE INDEX i_cf1 ON \"user1\".cf1 (custid) WITH (fillfactor = 100)"
        );
        assert!(copy_in("user2").contains("FORMAT binary, FREEZE"));
    }

    #[test]
    fn updates_touch_one_or_all_filler_columns() {
        assert_eq!(
            update_range("user1", false),
            "UPDATE \"user1\".cf1 SET c2 = $3 WHERE custid BETWEEN $1 AND $2"
        );
        let heavy = update_range("user1", true);
        assert!(
            heavy.contains("c2 = $3, c3 = $3") && heavy.contains("c9 = $3 WHERE"),
            "{heavy}"
        );
        assert_eq!(
            read_range("u"),
            "SELECT count(c2) FROM \"u\".cf1 WHERE custid BETWEEN $1 AND $2"
        );
    }

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(
            comment_schema("user1", "dbio {\"a\":1}"),
            "COMMENT ON SCHEMA \"user1\" IS 'dbio {\"a\":1}'"
        );
    }

    #[test]
    fn table_has_the_filler_columns_copy_names() {
        let t = create_table("s", None);
        let filler = (2..2 + FILLER_COLUMNS)
            .filter(|i| t.contains(&format!("c{i} text")))
            .count();
        assert_eq!(filler, FILLER_COLUMNS);
        assert!(copy_in("s").contains("c9)"));
    }
}
