//! One pipeline, the data set found where it lives: after a setup with non-default schemas
//! and scale, check, run, ramp and teardown take them from dbio's marks; an explicit value
//! that disagrees names both values; `dbio list` shows every data set; ramp on Oracle fails
//! as check does. One test drives the CLI in process through `main_with_args`.

use std::time::Duration;

use dbio_tests::{
    Dbio, TestCluster, assert_exit, assert_valid_result, read_result, stderr, stdout,
    wait_no_dbio_sessions,
};
use tokio_postgres::Client;

/// idx_scan of cf1 in `schema`, once no dbio session is left (their statistics are flushed
/// when they end).
async fn idx_scan(c: &Client, schema: &str) -> i64 {
    wait_no_dbio_sessions(c, Duration::from_secs(10), "connected").await;
    c.query_one(
        "SELECT coalesce(idx_scan, 0)::bigint FROM pg_stat_user_tables WHERE relname = 'cf1' AND schemaname = $1",
        &[&schema],
    )
    .await
    .unwrap()
    .get(0)
}

async fn dbio_schemas(c: &Client) -> Vec<String> {
    c.query(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'user%' ORDER BY 1",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

// Broke: after `setup --schemas 2 --scale 4000blocks`, a plain check, run and ramp failed
// ("loaded with 4000 blocks but the configuration asks for 8192"; user3 and user4 "do not
// exist"), although dbio's marks said what was loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_run_ramp_and_teardown_find_a_non_default_data_set_without_flags() {
    let pg = TestCluster::start(16);
    let dsn = pg.dsn();
    // Not the defaults (4 schemas of 64 MB).
    pg.load("2", "300blocks");
    let c = pg.client().await;

    let o = pg.dbio("check").output();
    assert_exit(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("user1") && text.contains("user2") && !text.contains("user3"),
        "{text}"
    );

    let before = (idx_scan(&c, "user1").await, idx_scan(&c, "user2").await);
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run");
    let o = pg
        .dbio("run")
        .readers(2)
        .writers(0)
        .run_time("2s")
        .out(&run_dir)
        .quiet()
        .output();
    assert_exit(&o, 0);
    let r = read_result(&run_dir);
    assert_valid_result(&r);
    assert_eq!(
        r["environment"]["data_set"]["schemas"], 2,
        "{}",
        r["environment"]
    );
    assert_eq!(r["environment"]["data_set"]["scale_blocks"], 300);
    // Both schemas were read: two readers, mapped round-robin.
    let after = (idx_scan(&c, "user1").await, idx_scan(&c, "user2").await);
    assert!(
        after.0 > before.0 + 10 && after.1 > before.1 + 10,
        "idx_scan before {before:?}, after {after:?}"
    );

    let ramp_dir = out.path().join("ramp");
    let o = pg
        .dbio("ramp")
        .readers("1,2")
        .writers(0)
        .run_time("1s")
        .out(&ramp_dir)
        .quiet()
        .output();
    assert_exit(&o, 0);
    let ramp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ramp_dir.join("ramp.json")).unwrap())
            .unwrap();
    assert_eq!(ramp["status"], "ok", "{ramp}");

    // Without --yes: the listing of both schemas, exit 1.
    let o = pg.dbio("teardown").output();
    assert_exit(&o, 1);
    let text = stdout(&o);
    assert!(
        text.contains("schema user1") && text.contains("schema user2"),
        "{text}"
    );
    assert_eq!(dbio_schemas(&c).await, ["user1", "user2"]);
    // In process, as main.rs calls it.
    let dsn2 = dsn.clone();
    let code = tokio::task::spawn_blocking(move || {
        dbio_cli::main_with_args(["dbio", "teardown", "--dsn", &dsn2, "--yes", "-q"])
    })
    .await
    .unwrap();
    assert_eq!(code, 0);
    assert!(dbio_schemas(&c).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_shows_each_data_set_and_a_conflicting_scale_names_both_values() {
    let pg = TestCluster::start(16);
    for (prefix, schemas, scale) in [("alpha", "1", "200blocks"), ("beta", "2", "300blocks")] {
        assert_exit(
            &pg.dbio("setup")
                .opt("--prefix", prefix)
                .schemas(schemas)
                .scale(scale)
                .quiet()
                .output(),
            0,
        );
    }
    let o = pg.dbio("list").output();
    assert_exit(&o, 0);
    let text = stdout(&o);
    let line = |p: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(p))
            .unwrap_or_else(|| panic!("no line for {p}: {text}"))
            .to_string()
    };
    let (a, b) = (line("alpha"), line("beta"));
    assert!(
        a.contains("200 blocks") && a.contains("complete") && a.contains("pg_default"),
        "{a}"
    );
    assert!(
        b.contains("300 blocks") && b.split_whitespace().nth(1) == Some("2"),
        "{b}"
    );
    let o = pg.dbio("list").opt("--format", "json").output();
    assert_exit(&o, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let sets = v.as_array().unwrap();
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[1]["prefix"], "beta");
    assert_eq!(sets[1]["scale_blocks"], 300);
    // Table and index of 300 one-row blocks: at least the heap.
    assert!(
        sets[1]["bytes"].as_u64().unwrap() >= 2 * 300 * 8192,
        "{}",
        sets[1]
    );

    let o = pg
        .dbio("check")
        .opt("--prefix", "beta")
        .scale("400blocks")
        .output();
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("--scale") && err.contains("400") && err.contains("300 blocks"),
        "{err}"
    );
    // The matching value is no conflict; neither is the same size in bytes.
    assert_exit(
        &pg.dbio("check")
            .opt("--prefix", "beta")
            .scale("300blocks")
            .output(),
        0,
    );
    assert_exit(
        &pg.dbio("check")
            .opt("--prefix", "alpha")
            .scale("1600kB")
            .output(),
        0,
    );
    // No data set of the default prefix: the ones there are named.
    let o = pg.dbio("check").output();
    assert!(o.status.code() != Some(0));
    let err = stderr(&o);
    assert!(err.contains("alpha") && err.contains("beta"), "{err}");
}

// Broke: ramp said "built for engine: postgres only" on Oracle, while check explained the
// missing Instant Client.
#[test]
fn ramp_on_oracle_without_instant_client_fails_as_check_does() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("oracle.yaml");
    std::fs::write(
        &cfg,
        "engine: oracle\ntarget:\n  dsn: \"system/not-printed@//127.0.0.1:1/XE\"\ndata:\n  schemas: 2\n  scale: 1000blocks\n  prefix: dbiot\n",
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = dir.path().join("ramp");
    let o = Dbio::new("ramp")
        .config(&cfg)
        .readers("1,2")
        .run_time("1s")
        .out(&out)
        .quiet()
        .env("DBIO_ORACLE_CLIENT_LIB_DIR", empty.path())
        .env("LD_LIBRARY_PATH", "")
        .output();
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(
        err.contains("DPI-1047") && err.contains("Install Oracle Instant Client"),
        "{err}"
    );
    assert!(!err.contains("postgres only"), "{err}");
    assert!(!err.contains("not-printed"), "the password leaked: {err}");
}

// Broke: a think time of 30 s with a 2 s window took 32 s and divided 32 s of counters by
// 2 s ("Commits 333.5/s"); the one read counted ended after the window (issue 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_think_time_beyond_the_window_ends_with_the_window() {
    let pg = TestCluster::start(16);
    pg.load("1", "200blocks");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("think.yaml");
    // Every second operation first sleeps 20 s: tenfold the window.
    std::fs::write(
        &cfg,
        "run:\n  think_time:\n    frequency: 2\n    min: 20s\n    max: 20s\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let started = std::time::Instant::now();
    let o = pg
        .dbio("run")
        .config(&cfg)
        .readers(2)
        .writers(0)
        .run_time("2s")
        .out(&out)
        .quiet()
        .output();
    let took = started.elapsed();
    assert_exit(&o, 0);
    assert!(took < Duration::from_secs(15), "the run took {took:?}");
    let r = read_result(&out);
    assert_valid_result(&r);
    // Each session ran its first read, then thought until the window closed.
    let reads: u64 = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ops"][0].as_u64().unwrap())
        .sum();
    assert_eq!(reads, 2, "{}", r["sessions"]);
    assert!((r["window"]["measured_s"].as_f64().unwrap() - 2.0).abs() < 0.5);
}
