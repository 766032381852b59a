//! A run measures the data set it says it measures, alone (issue "A run measures exactly its
//! own window and its own work", items 2 and 3; issue 15 item 2, the read path): each test
//! reproduces a case that was seen to end `ok` while measuring something else.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dbio_tests::{
    Dbio, TestCluster, assert_exit, is_root, read_result, stderr, wait_no_dbio_sessions,
};
use serde_json::Value;

const SCALE: &str = "1000blocks";

fn run_args(dsn: &str, out: &str, schemas: &str, extra: &[&str]) -> Dbio {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(schemas)
        .scale(SCALE)
        .run_time("2s")
        .out(out)
        .quiet()
        .args(extra)
}

/// The pid of the backend whose application_name is `name`, once it appears.
async fn pid_of(c: &tokio_postgres::Client, name: &str, timeout: Duration) -> i32 {
    let deadline = Instant::now() + timeout;
    loop {
        let row = c
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 LIMIT 1",
                &[&name],
            )
            .await
            .unwrap();
        if let Some(r) = row {
            return r.get(0);
        }
        assert!(Instant::now() < deadline, "no backend named {name}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn spawn_run(dsn: &str, out: &str, run_time: &str, extra: &[&str]) -> Child {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(1)
        .scale(SCALE)
        .run_time(run_time)
        .out(out)
        .quiet()
        .args(extra)
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

// Seen: two dbio runs on the same schemas at once both ended `ok`, the second counting the
// first's operations as its own; `dbio setup` during a run vacuumed the tables inside its window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_setup_and_teardown_during_a_run_are_refused_naming_its_holder() {
    let pg = TestCluster::start(16);
    pg.load("1", SCALE);
    let c = pg.client().await;
    let dsn = pg.dsn();
    let first_out = tempfile::tempdir().unwrap();
    let mut first = spawn_run(
        &dsn,
        first_out.path().to_str().unwrap(),
        "8s",
        &[
            "--run-id",
            "shards-of-one",
            "--shard",
            "0/2",
            "--readers",
            "2",
        ],
    );
    // The first run holds the data set from its preflight on; its sessions connect after.
    let holder = pid_of(&c, "dbio-lock", Duration::from_secs(15)).await;
    pid_of(&c, "dbio-reader-1", Duration::from_secs(15)).await;

    let second_out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let second = run_args(&dsn, second_out.path().to_str().unwrap(), "1", &[]).output();
    assert_exit(&second, 2);
    let e = stderr(&second);
    assert!(
        e.contains("run: the data set is in use")
            && e.contains(&format!("pid {holder} (a run: application_name dbio-lock"))
            && e.contains("127.0.0.1")
            && e.contains("connected since"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "refused at once, not after waiting for the first run"
    );
    assert!(
        !second_out.path().join("result.json").exists(),
        "a refused run writes no result"
    );

    let setup = pg.dbio("setup").schemas(1).scale(SCALE).quiet().output();
    assert_exit(&setup, 2);
    let e = stderr(&setup);
    assert!(
        e.contains("setup: the data set is in use") && e.contains(&format!("pid {holder}")),
        "{e}"
    );
    let teardown = pg.dbio("teardown").arg("--yes").quiet().output();
    assert_exit(&teardown, 2);
    assert!(
        stderr(&teardown).contains("teardown: the data set is in use"),
        "{}",
        stderr(&teardown)
    );
    let schemas: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'user1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(schemas, 1, "the refused teardown dropped nothing");

    // Another shard of the same coordinated run (its run id and another --shard) shares the
    // data set; the same shard twice does not.
    let twice_out = tempfile::tempdir().unwrap();
    let twice = run_args(
        &dsn,
        twice_out.path().to_str().unwrap(),
        "1",
        &[
            "--run-id",
            "shards-of-one",
            "--shard",
            "0/2",
            "--readers",
            "2",
        ],
    )
    .output();
    assert_exit(&twice, 2);
    let e = stderr(&twice);
    assert!(
        e.contains("shard 0/2 of run \"shards-of-one\" is already running")
            && e.contains(&format!("pid {holder}")),
        "{e}"
    );
    let shard_out = tempfile::tempdir().unwrap();
    let shard = run_args(
        &dsn,
        shard_out.path().to_str().unwrap(),
        "1",
        &[
            "--run-id",
            "shards-of-one",
            "--shard",
            "1/2",
            "--readers",
            "2",
        ],
    )
    .output();
    assert_exit(&shard, 0);
    assert_eq!(read_result(shard_out.path())["status"], "ok");
    assert!(
        first.try_wait().unwrap().is_none(),
        "the shard ran while the first run was still measuring"
    );

    let status = first.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the first run");
    let r = read_result(first_out.path());
    assert_eq!(r["status"], "ok");
    // The run is over: its lock went with its connection, and setup may proceed.
    wait_no_dbio_sessions(&c, Duration::from_secs(10), "after the first run").await;
    assert_exit(
        &pg.dbio("setup").schemas(1).scale(SCALE).quiet().output(),
        0,
    );
}

// Seen: two unrelated runs given the same --run-id (and no --shard) ran at once, each
// counting the other's work: a run id belongs to one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_under_the_same_run_id_without_shard_is_refused() {
    let pg = TestCluster::start(16);
    pg.load("1", SCALE);
    let c = pg.client().await;
    let dsn = pg.dsn();
    let first_out = tempfile::tempdir().unwrap();
    let mut first = spawn_run(
        &dsn,
        first_out.path().to_str().unwrap(),
        "6s",
        &["--run-id", "nightly"],
    );
    let holder = pid_of(&c, "dbio-lock", Duration::from_secs(15)).await;
    pid_of(&c, "dbio-reader-1", Duration::from_secs(15)).await;
    for extra in [
        &["--run-id", "nightly"][..],
        &["--run-id", "nightly", "--shard", "1/2", "--readers", "2"][..],
    ] {
        let out = tempfile::tempdir().unwrap();
        let second = run_args(&dsn, out.path().to_str().unwrap(), "1", extra).output();
        assert_exit(&second, 2);
        let e = stderr(&second);
        assert!(
            e.contains("the run id is in use")
                && e.contains("run id \"nightly\"")
                && e.contains(&format!("pid {holder} (a run: application_name dbio-lock")),
            "{extra:?}: {e}"
        );
        assert!(
            !out.path().join("result.json").exists(),
            "a refused run writes no result"
        );
    }
    assert!(
        first.try_wait().unwrap().is_none(),
        "the refusals came while the first run was measuring"
    );
    assert_eq!(first.wait().unwrap().code(), Some(0), "the first run");
    assert_eq!(read_result(first_out.path())["status"], "ok");
}

// Seen: truncated tables measured as if full (rows 0, status ok).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_table_or_deleted_keys_are_refused_naming_the_schema() {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    let c = pg.client().await;
    c.batch_execute("TRUNCATE user2.cf1").await.unwrap();
    let dsn = pg.dsn();
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&dsn, out.path().to_str().unwrap(), "2", &[]).output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("schema user2: cf1 has 0 blocks on disk (pg_relation_size)")
            && e.contains("truncated")
            && e.contains("dbio setup --force"),
        "{e}"
    );
    assert!(!out.path().join("result.json").exists());

    // The last key deleted from the other schema: its size is intact, the probe is not.
    c.batch_execute("DELETE FROM user1.cf1 WHERE custid = 1000")
        .await
        .unwrap();
    // Until the server's statistics show the delete (within a second or so), nothing but a
    // full scan could tell; dbio reads them, so the test waits for them too.
    let deadline = Instant::now() + Duration::from_secs(15);
    while c
        .query_one(
            "SELECT n_tup_del FROM pg_stat_user_tables WHERE schemaname = 'user1' AND relname = 'cf1'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(Instant::now() < deadline, "the delete never reached the statistics");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let o = run_args(&dsn, out.path().to_str().unwrap(), "1", &[]).output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("schema user1: key 1000 of 1..1000 is missing"),
        "{e}"
    );
}

// Seen: a kept data set's tables lived in another tablespace than the configured one, and the
// run named the configured one's device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_moved_to_another_tablespace_is_named_and_recorded() {
    let pg = TestCluster::start(16);
    pg.load("1", SCALE);
    let place = tempfile::Builder::new()
        .prefix("dbio-moved-ts-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    if is_root() {
        // The server runs as postgres when the tests run as root.
        assert!(
            Command::new("chown")
                .arg("postgres:")
                .arg(place.path())
                .status()
                .unwrap()
                .success()
        );
    }
    let c = pg.client().await;
    // CREATE TABLESPACE cannot run in a transaction block: one statement per call.
    c.batch_execute(&format!(
        "CREATE TABLESPACE moved LOCATION '{}'",
        place.path().display()
    ))
    .await
    .unwrap();
    c.batch_execute("ALTER TABLE user1.cf1 SET TABLESPACE moved")
        .await
        .unwrap();
    let dsn = pg.dsn();
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&dsn, out.path().to_str().unwrap(), "1", &[]).output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    assert_eq!(r["status"], "ok");
    let t = &r["environment"]["data_set"]["tables"][0];
    assert_eq!(t["schema"], "user1");
    assert_eq!(t["tablespace"], "moved");
    assert_eq!(t["index_tablespace"], "pg_default");
    assert_eq!(t["blocks"].as_u64(), Some(1000));
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "user1.cf1 (table) is in tablespace moved (pg_class.reltablespace), not in pg_default"
        )),
        "{warnings:#?}"
    );
    // The device figures are those of where the table is, not of the data directory.
    assert_eq!(
        r["device"]["path"].as_str(),
        place.path().to_str(),
        "device {}",
        r["device"]
    );
    let report = std::fs::read_to_string(out.path().join("report.txt")).unwrap();
    assert!(
        report.contains("user1.cf1 in tablespace moved (index in pg_default)"),
        "{report}"
    );
    c.batch_execute("ALTER TABLE user1.cf1 SET TABLESPACE pg_default")
        .await
        .unwrap();
    c.batch_execute("DROP TABLESPACE moved").await.unwrap();
}

// Seen: a VACUUM the server skipped ("only table or database owner can vacuum it") was
// reported as done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vacuum_the_server_skipped_is_named_with_the_owner() {
    skipped_vacuum_is_named(TestCluster::start(16)).await;
}

// 13's statistics collector publishes vacuum_count late and words the skip differently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_pg13,
    ignore = "needs PostgreSQL 13 (DBIO_TEST_PG13_BIN or .dbio/pg13; scripts/test.sh installs it)"
)]
async fn a_vacuum_the_server_skipped_is_named_with_the_owner_on_postgres_13() {
    skipped_vacuum_is_named(TestCluster::start_version(13, 16, &[])).await;
}

async fn skipped_vacuum_is_named(pg: TestCluster) {
    pg.load("1", SCALE);
    let c = pg.client().await;
    // Rows changed since the last VACUUM (the owner's update, then ANALYZE so pg_class shows
    // it at once), and a role that may read the table but not vacuum it.
    c.batch_execute(
        "UPDATE user1.cf1 SET c2 = 'changed' WHERE custid <= 50; ANALYZE user1.cf1; \
         CREATE ROLE bench LOGIN; GRANT USAGE ON SCHEMA user1 TO bench; GRANT SELECT, UPDATE ON user1.cf1 TO bench",
    )
    .await
    .unwrap();
    let before = vacuums(&c).await;
    let dsn = format!(
        "host=127.0.0.1 port={} user=bench dbname=postgres",
        pg.cluster.state.port
    );
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&dsn, out.path().to_str().unwrap(), "1", &[]).output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("VACUUM of user1.cf1 did not run")
                && w.contains("owned by role postgres")
                && w.contains("connects as bench")
                && w.contains("GRANT MAINTAIN")),
        "{warnings:#?}"
    );
    assert_eq!(vacuums(&c).await, before, "no VACUUM ran");

    // The owner's run does vacuum, and says nothing of a skip.
    let o = run_args(
        &pg.dsn(),
        out.path().to_str().unwrap(),
        "1",
        &["--overwrite"],
    )
    .output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    assert!(
        !r["warnings"].to_string().contains("did not run"),
        "{}",
        r["warnings"]
    );
    assert!(vacuums(&c).await > before, "the owner's VACUUM ran");
}

/// vacuum_count of user1.cf1 once it has settled: 13's statistics collector publishes a
/// VACUUM up to ~0.5 s late (setup's had not arrived when the run started), so the count is
/// read until two reads 1 s apart agree.
async fn vacuums(c: &tokio_postgres::Client) -> i64 {
    let read = || async {
        c.batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        c.query_one(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = 'user1' AND relname = 'cf1'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    dbio_tests::settled(read).await
}

/// idx_tup_read and idx_tup_fetch of i_cf1 in user1: a plain index scan fetches the rows it
/// reads, a bitmap scan fetches none through the index (pg_stat_all_indexes docs).
async fn index_counters(c: &tokio_postgres::Client) -> (i64, i64) {
    wait_no_dbio_sessions(c, Duration::from_secs(10), "after the run").await;
    let row = c
        .query_one(
            "SELECT idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes \
             WHERE schemaname = 'user1' AND indexrelname = 'i_cf1'",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

// Seen: on PostgreSQL 18 the read was planned as a Bitmap Heap Scan (read streams, up to 16
// reads in flight per session) and nothing in the result said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_path_index_and_bitmap_are_the_plans_recorded_and_run_in_both_engines() {
    read_paths_are_recorded_and_run(
        TestCluster::start(16),
        &[
            ("client", "index", "Index Scan"),
            ("client", "bitmap", "Bitmap Heap Scan"),
            ("server", "bitmap", "Bitmap Heap Scan"),
            ("server", "index", "Index Scan"),
        ],
        None,
    )
    .await;
}

// 18 reads bitmap heap scans through read streams with io workers: the setting is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_pg18,
    ignore = "needs PostgreSQL 18 (DBIO_TEST_PG18_BIN or .dbio/pg18; scripts/test.sh installs it)"
)]
async fn read_path_plans_and_io_method_are_recorded_on_postgres_18() {
    read_paths_are_recorded_and_run(
        TestCluster::start_version(18, 16, &[("io_method", "worker")]),
        &[
            ("client", "index", "Index Scan"),
            ("client", "bitmap", "Bitmap Heap Scan"),
        ],
        Some("worker"),
    )
    .await;
}

async fn read_paths_are_recorded_and_run(
    pg: TestCluster,
    cases: &[(&str, &str, &str)],
    io_method: Option<&str>,
) {
    pg.load("1", SCALE);
    let c = pg.client().await;
    let dsn = pg.dsn();
    for &(engine, path, scan) in cases {
        let before = index_counters(&c).await;
        let out = tempfile::tempdir().unwrap();
        let o = run_args(
            &dsn,
            out.path().to_str().unwrap(),
            "1",
            &["--engine", engine, "--read-path", path],
        )
        .output();
        assert_exit(&o, 0);
        let r = read_result(out.path());
        assert_eq!(r["status"], "ok");
        let rp = &r["environment"]["read_path"];
        assert_eq!(rp["path"], path, "{engine} {path}");
        assert_eq!(rp["scan"], scan, "{engine} {path}: {rp}");
        assert!(
            rp["plan"].as_str().unwrap().contains(scan)
                && rp["plan"].as_str().unwrap().contains("i_cf1"),
            "{rp}"
        );
        assert!(rp["effective_io_concurrency"].is_string(), "{rp}");
        if let Some(m) = io_method {
            assert_eq!(rp["io_method"], m, "{rp}");
            assert!(rp["io_combine_limit"].is_string(), "{rp}");
        }
        assert_eq!(r["config"]["run"]["read_path"], path);
        let report = std::fs::read_to_string(out.path().join("report.txt")).unwrap();
        assert!(
            report.contains(&format!("read path {path}: Aggregate > {scan}")),
            "{report}"
        );
        // What the sessions really ran, by the server's own counters.
        let reads = r["client"]["read"]["count"].as_u64().unwrap() as i64;
        let after = index_counters(&c).await;
        let (read, fetched) = (after.0 - before.0, after.1 - before.1);
        assert!(reads > 10, "{engine} {path}: {reads} reads");
        assert!(read >= reads * 64, "{engine} {path}: idx_tup_read {read}");
        if path == "index" {
            assert!(
                fetched >= reads * 64,
                "{engine} {path}: idx_tup_fetch {fetched}"
            );
        } else {
            assert_eq!(
                fetched, 0,
                "{engine} {path}: a bitmap scan fetched through the index"
            );
        }
    }
}

// A plan that is not the one asked for is refused before anything is measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_that_is_not_the_read_path_asked_for_is_refused() {
    let pg = TestCluster::start(16);
    pg.load("1", SCALE);
    let dsn = format!("{} options='-c enable_indexscan=off'", pg.dsn());
    let out = tempfile::tempdir().unwrap();
    let o = run_args(
        &dsn,
        out.path().to_str().unwrap(),
        "1",
        &["--read-path", "index"],
    )
    .output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("the reader's plan on user1.cf1 is `Aggregate > Seq Scan on cf1`")
            && e.contains("not the Index Scan that run.read_path index asks for")
            && e.contains("enable_indexscan"),
        "{e}"
    );
    assert!(!out.path().join("result.json").exists());
    // The same server setting leaves the bitmap path as it is.
    let o = run_args(
        &dsn,
        out.path().to_str().unwrap(),
        "1",
        &["--read-path", "bitmap"],
    )
    .output();
    assert_exit(&o, 0);
    assert_eq!(
        read_result(out.path())["environment"]["read_path"]["scan"],
        "Bitmap Heap Scan"
    );
}

// Two runs started at the same moment: the admission lock lets exactly one in, so they do not
// both see each other and both give up, nor both measure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_runs_started_together_exactly_one_measures() {
    let pg = TestCluster::start(16);
    pg.load("1", SCALE);
    let dsn = pg.dsn();
    let outs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let children: Vec<Child> = outs
        .iter()
        .map(|o| spawn_run(&dsn, o.path().to_str().unwrap(), "3s", &[]))
        .collect();
    let mut codes = Vec::new();
    let mut errors = String::new();
    for child in children {
        let o = child.wait_with_output().unwrap();
        codes.push(o.status.code());
        errors.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    codes.sort();
    assert_eq!(codes, [Some(0), Some(2)], "{errors}");
    assert!(errors.contains("run: the data set is in use"), "{errors}");
    let results = outs
        .iter()
        .filter(|o| o.path().join("result.json").exists())
        .count();
    assert_eq!(results, 1, "one result, from the run that measured");
}
