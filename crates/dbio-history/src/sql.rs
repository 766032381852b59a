//! Every statement of the results store, per dialect, in one place. The schema is the same
//! in both (tables `runs`, `steps`, `schema_migrations` and the view `step_figures`; in
//! PostgreSQL inside the schema `dbio_history`); docs/REGRESSION.md documents it for other
//! tools. A migration is never edited once released: changes are new versions.

/// (version, description, statements) of each migration, oldest first.
pub type Migration = (i64, &'static str, &'static str);

/// SQLite's `PRAGMA application_id` of a dbio results store ("dbio" in ASCII): a file
/// without it is not ours, and dbio never writes into it.
pub const SQLITE_APPLICATION_ID: i64 = 0x6462_696f;

pub const SQLITE_MIGRATIONS: &[Migration] = &[
    (
        1,
        "runs, steps, step_figures",
        "CREATE TABLE schema_migrations (
        version     INTEGER PRIMARY KEY,
        description TEXT NOT NULL,
        applied_at  TEXT NOT NULL
    );
    CREATE TABLE runs (
        run_id             INTEGER PRIMARY KEY AUTOINCREMENT,
        content_sha256     TEXT NOT NULL UNIQUE,
        kind               TEXT NOT NULL CHECK (kind IN ('run', 'ramp')),
        label              TEXT NOT NULL,
        series             TEXT NOT NULL,
        shape              TEXT NOT NULL,
        tag                TEXT,
        tag_source         TEXT,
        host               TEXT NOT NULL,
        target             TEXT NOT NULL,
        server_version     TEXT NOT NULL,
        server_version_num INTEGER NOT NULL,
        settings           TEXT NOT NULL,
        data_set           TEXT NOT NULL,
        dbio_version       TEXT NOT NULL,
        status             TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'interrupted')),
        started_at         TEXT NOT NULL,
        finished_at        TEXT NOT NULL,
        recorded_at        TEXT NOT NULL,
        document           TEXT NOT NULL
    );
    CREATE INDEX runs_series_started ON runs (series, started_at);
    CREATE TABLE steps (
        run_id                 INTEGER NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        position               INTEGER NOT NULL,
        step                   TEXT NOT NULL,
        readers                INTEGER NOT NULL,
        writers                INTEGER NOT NULL,
        update_pct             INTEGER NOT NULL,
        status                 TEXT NOT NULL,
        repeats                INTEGER NOT NULL,
        elapsed_s              REAL NOT NULL,
        db_read_iops           REAL,
        db_write_iops          REAL,
        device_read_iops       REAL,
        client_ops_per_s       REAL,
        client_read_p50_us     REAL,
        client_read_p99_us     REAL,
        db_avg_read_latency_us REAL,
        PRIMARY KEY (run_id, position)
    );
    CREATE VIEW step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us
        FROM runs r JOIN steps s USING (run_id);",
    ),
    (
        2,
        "calibrate records, page-cache marking, device read latency, decisions",
        // SQLite cannot change a CHECK constraint: runs is rebuilt (foreign keys are off
        // during migrations, so steps keep their rows).
        "DROP VIEW step_figures;
    CREATE TABLE runs_v2 (
        run_id             INTEGER PRIMARY KEY AUTOINCREMENT,
        content_sha256     TEXT NOT NULL UNIQUE,
        kind               TEXT NOT NULL CHECK (kind IN ('run', 'ramp', 'calibrate')),
        label              TEXT NOT NULL,
        series             TEXT NOT NULL,
        shape              TEXT NOT NULL,
        tag                TEXT,
        tag_source         TEXT,
        host               TEXT NOT NULL,
        target             TEXT NOT NULL,
        server_version     TEXT NOT NULL,
        server_version_num INTEGER NOT NULL,
        settings           TEXT NOT NULL,
        data_set           TEXT NOT NULL,
        dbio_version       TEXT NOT NULL,
        status             TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'interrupted')),
        started_at         TEXT NOT NULL,
        finished_at        TEXT NOT NULL,
        recorded_at        TEXT NOT NULL,
        document           TEXT NOT NULL
    );
    INSERT INTO runs_v2 SELECT * FROM runs;
    DROP TABLE runs;
    ALTER TABLE runs_v2 RENAME TO runs;
    CREATE INDEX runs_series_started ON runs (series, started_at);
    ALTER TABLE steps ADD COLUMN device_read_latency_us REAL;
    ALTER TABLE steps ADD COLUMN physical_read_ratio REAL;
    ALTER TABLE steps ADD COLUMN cache_served INTEGER;
    CREATE TABLE decisions (
        decision_id INTEGER PRIMARY KEY AUTOINCREMENT,
        series      TEXT NOT NULL,
        step        TEXT,
        metric      TEXT,
        action      TEXT NOT NULL CHECK (action IN ('accept', 'retire')),
        from_run    INTEGER NOT NULL,
        reason      TEXT NOT NULL,
        decided_by  TEXT NOT NULL,
        decided_at  TEXT NOT NULL
    );
    CREATE VIEW step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us, r.kind, s.device_read_latency_us,
               s.physical_read_ratio, s.cache_served
        FROM runs r JOIN steps s USING (run_id);",
    ),
    (
        3,
        "open-loop rate and steadiness of a step",
        "DROP VIEW step_figures;
    ALTER TABLE steps ADD COLUMN rate_per_s INTEGER;
    ALTER TABLE steps ADD COLUMN steady INTEGER;
    CREATE VIEW step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us, r.kind, s.device_read_latency_us,
               s.physical_read_ratio, s.cache_served, s.rate_per_s, s.steady
        FROM runs r JOIN steps s USING (run_id);",
    ),
];

/// The PostgreSQL store lives in this schema, which dbio creates and owns.
pub const PG_SCHEMA: &str = "dbio_history";

pub const PG_MIGRATIONS: &[Migration] = &[
    (
        1,
    "runs, steps, step_figures",
    "CREATE TABLE dbio_history.runs (
        run_id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        content_sha256     text NOT NULL UNIQUE,
        kind               text NOT NULL CHECK (kind IN ('run', 'ramp')),
        label              text NOT NULL,
        series             text NOT NULL,
        shape              jsonb NOT NULL,
        tag                text,
        tag_source         text,
        host               text NOT NULL,
        target             text NOT NULL,
        server_version     text NOT NULL,
        server_version_num bigint NOT NULL,
        settings           jsonb NOT NULL,
        data_set           jsonb NOT NULL,
        dbio_version       text NOT NULL,
        status             text NOT NULL CHECK (status IN ('ok', 'failed', 'interrupted')),
        started_at         timestamptz NOT NULL,
        finished_at        timestamptz NOT NULL,
        recorded_at        timestamptz NOT NULL,
        document           text NOT NULL
    );
    CREATE INDEX runs_series_started ON dbio_history.runs (series, started_at);
    CREATE TABLE dbio_history.steps (
        run_id                 bigint NOT NULL REFERENCES dbio_history.runs (run_id) ON DELETE CASCADE,
        position               integer NOT NULL,
        step                   text NOT NULL,
        readers                integer NOT NULL,
        writers                integer NOT NULL,
        update_pct             integer NOT NULL,
        status                 text NOT NULL,
        repeats                integer NOT NULL,
        elapsed_s              double precision NOT NULL,
        db_read_iops           double precision,
        db_write_iops          double precision,
        device_read_iops       double precision,
        client_ops_per_s       double precision,
        client_read_p50_us     double precision,
        client_read_p99_us     double precision,
        db_avg_read_latency_us double precision,
        PRIMARY KEY (run_id, position)
    );
    CREATE VIEW dbio_history.step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us
        FROM dbio_history.runs r JOIN dbio_history.steps s USING (run_id);",
    ),
    (
        2,
        "calibrate records, page-cache marking, device read latency, decisions",
        "ALTER TABLE dbio_history.runs DROP CONSTRAINT runs_kind_check;
    ALTER TABLE dbio_history.runs ADD CONSTRAINT runs_kind_check
        CHECK (kind IN ('run', 'ramp', 'calibrate'));
    ALTER TABLE dbio_history.steps
        ADD COLUMN device_read_latency_us double precision,
        ADD COLUMN physical_read_ratio double precision,
        ADD COLUMN cache_served boolean;
    CREATE TABLE dbio_history.decisions (
        decision_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        series      text NOT NULL,
        step        text,
        metric      text,
        action      text NOT NULL CHECK (action IN ('accept', 'retire')),
        from_run    bigint NOT NULL,
        reason      text NOT NULL,
        decided_by  text NOT NULL,
        decided_at  timestamptz NOT NULL
    );
    CREATE OR REPLACE VIEW dbio_history.step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us, r.kind, s.device_read_latency_us,
               s.physical_read_ratio, s.cache_served
        FROM dbio_history.runs r JOIN dbio_history.steps s USING (run_id);",
    ),
    (
        3,
        "open-loop rate and steadiness of a step",
        "ALTER TABLE dbio_history.steps
        ADD COLUMN rate_per_s bigint,
        ADD COLUMN steady boolean;
    CREATE OR REPLACE VIEW dbio_history.step_figures AS
        SELECT r.run_id, r.series, r.label, r.tag, r.host, r.server_version, r.started_at,
               r.status AS run_status, s.step, s.readers, s.writers, s.update_pct,
               s.status AS step_status, s.db_read_iops, s.db_write_iops, s.device_read_iops,
               s.client_ops_per_s, s.client_read_p50_us, s.client_read_p99_us,
               s.db_avg_read_latency_us, r.kind, s.device_read_latency_us,
               s.physical_read_ratio, s.cache_served, s.rate_per_s, s.steady
        FROM dbio_history.runs r JOIN dbio_history.steps s USING (run_id);",
    ),
];

pub const PG_SCHEMA_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)";
pub const PG_MIGRATIONS_TABLE_EXISTS: &str =
    "SELECT to_regclass('dbio_history.schema_migrations') IS NOT NULL";
/// Serialises concurrent migrations (two nightlies starting at once).
pub const PG_MIGRATION_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('dbio_history'))";
pub const PG_CREATE_SCHEMA: &str = "CREATE SCHEMA dbio_history;
    COMMENT ON SCHEMA dbio_history IS 'dbio results store: created and owned by dbio (docs/REGRESSION.md)';
    CREATE TABLE dbio_history.schema_migrations (
        version     integer PRIMARY KEY,
        description text NOT NULL,
        applied_at  timestamptz NOT NULL DEFAULT now()
    );";
pub const PG_CURRENT_VERSION: &str =
    "SELECT coalesce(max(version), 0)::bigint FROM dbio_history.schema_migrations";
pub const PG_RECORD_MIGRATION: &str = "INSERT INTO dbio_history.schema_migrations (version, description) VALUES ($1::bigint::integer, $2)";

pub const SQLITE_CURRENT_VERSION: &str = "SELECT coalesce(max(version), 0) FROM schema_migrations";
pub const SQLITE_RECORD_MIGRATION: &str =
    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)";

pub const SQLITE_INSERT_RUN: &str =
    "INSERT INTO runs (content_sha256, kind, label, series, shape, tag, tag_source, host, target,
        server_version, server_version_num, settings, data_set, dbio_version, status, started_at,
        finished_at, recorded_at, document)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
    ON CONFLICT (content_sha256) DO NOTHING
    RETURNING run_id";
pub const PG_INSERT_RUN: &str =
    "INSERT INTO dbio_history.runs (content_sha256, kind, label, series, shape, tag, tag_source,
        host, target, server_version, server_version_num, settings, data_set, dbio_version, status,
        started_at, finished_at, recorded_at, document)
    VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7, $8, $9, $10, $11, $12::text::jsonb,
        $13::text::jsonb, $14, $15, $16, $17, $18, $19)
    ON CONFLICT (content_sha256) DO NOTHING
    RETURNING run_id";

pub const SQLITE_RUN_BY_HASH: &str = "SELECT run_id FROM runs WHERE content_sha256 = ?1";
pub const PG_RUN_BY_HASH: &str = "SELECT run_id FROM dbio_history.runs WHERE content_sha256 = $1";

pub const SQLITE_INSERT_STEP: &str =
    "INSERT INTO steps (run_id, position, step, readers, writers, update_pct, status, repeats,
        elapsed_s, db_read_iops, db_write_iops, device_read_iops, client_ops_per_s,
        client_read_p50_us, client_read_p99_us, db_avg_read_latency_us, device_read_latency_us,
        physical_read_ratio, cache_served, rate_per_s, steady)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
        ?20, ?21)";
pub const PG_INSERT_STEP: &str =
    "INSERT INTO dbio_history.steps (run_id, position, step, readers, writers, update_pct,
        status, repeats, elapsed_s, db_read_iops, db_write_iops, device_read_iops,
        client_ops_per_s, client_read_p50_us, client_read_p99_us, db_avg_read_latency_us,
        device_read_latency_us, physical_read_ratio, cache_served, rate_per_s, steady)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20, $21)";

/// The run columns in the order both stores read them.
pub const SQLITE_SELECT_RUNS: &str =
    "SELECT run_id, content_sha256, kind, label, series, shape, tag, tag_source, host, target,
        server_version, server_version_num, settings, data_set, dbio_version, status, started_at,
        finished_at, recorded_at
    FROM runs ORDER BY run_id";
pub const PG_SELECT_RUNS: &str =
    "SELECT run_id, content_sha256, kind, label, series, shape::text, tag, tag_source, host,
        target, server_version, server_version_num, settings::text, data_set::text, dbio_version,
        status, started_at, finished_at, recorded_at
    FROM dbio_history.runs ORDER BY run_id";

/// The step columns in the order both stores read them; a store at an older schema version
/// (opened read-only, so not migrated) has no columns of the later ones: they read as null.
pub const SQLITE_SELECT_STEPS: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, device_read_latency_us, physical_read_ratio,
        cache_served, rate_per_s, steady
    FROM steps ORDER BY run_id, position";
pub const SQLITE_SELECT_STEPS_V2: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, device_read_latency_us, physical_read_ratio,
        cache_served, NULL, NULL
    FROM steps ORDER BY run_id, position";
pub const SQLITE_SELECT_STEPS_V1: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, NULL, NULL, NULL, NULL, NULL
    FROM steps ORDER BY run_id, position";
pub const PG_SELECT_STEPS: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, device_read_latency_us, physical_read_ratio,
        cache_served, rate_per_s, steady
    FROM dbio_history.steps ORDER BY run_id, position";
pub const PG_SELECT_STEPS_V2: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, device_read_latency_us, physical_read_ratio,
        cache_served, NULL::bigint, NULL::boolean
    FROM dbio_history.steps ORDER BY run_id, position";
pub const PG_SELECT_STEPS_V1: &str =
    "SELECT run_id, step, readers, writers, update_pct, status, repeats, elapsed_s,
        db_read_iops, db_write_iops, device_read_iops, client_ops_per_s, client_read_p50_us,
        client_read_p99_us, db_avg_read_latency_us, NULL::double precision,
        NULL::double precision, NULL::boolean, NULL::bigint, NULL::boolean
    FROM dbio_history.steps ORDER BY run_id, position";

pub const SQLITE_DOCUMENT: &str = "SELECT document FROM runs WHERE run_id = ?1";
pub const PG_DOCUMENT: &str = "SELECT document FROM dbio_history.runs WHERE run_id = $1";

pub const SQLITE_INSERT_DECISION: &str =
    "INSERT INTO decisions (series, step, metric, action, from_run, reason, decided_by, decided_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
    RETURNING decision_id";
pub const PG_INSERT_DECISION: &str =
    "INSERT INTO dbio_history.decisions (series, step, metric, action, from_run, reason,
        decided_by, decided_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    RETURNING decision_id";
pub const SQLITE_SELECT_DECISIONS: &str =
    "SELECT decision_id, series, step, metric, action, from_run, reason, decided_by, decided_at
    FROM decisions ORDER BY decision_id";
pub const PG_SELECT_DECISIONS: &str =
    "SELECT decision_id, series, step, metric, action, from_run, reason, decided_by, decided_at
    FROM dbio_history.decisions ORDER BY decision_id";
