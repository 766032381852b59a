//! No dbio work left on the server after dbio itself is gone.

use std::process::Stdio;
use std::time::{Duration, Instant};

use dbio_tests::TestCluster;

/// Starts a `--engine server` run of 10 minutes, SIGKILLs dbio once the loops run, and
/// returns how long the server took to end them.
async fn loops_left_after_sigkill(pg: &TestCluster) -> Duration {
    pg.load("2", "1000blocks");
    let c = pg.client().await;
    let out_dir = tempfile::tempdir().unwrap();
    let mut child = pg
        .dbio("run")
        .schemas(2)
        .scale("1000blocks")
        .opt("--engine", "server")
        .readers(2)
        .writers(1)
        .run_time("600s")
        .out(out_dir.path())
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let loops = "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name LIKE 'dbio-%er-%' AND query LIKE 'CALL pg_temp.dbio_loop%'";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let running: i64 = c.query_one(loops, &[]).await.unwrap().get(0);
        if running == 3 {
            break;
        }
        assert!(Instant::now() < deadline, "the loops never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    loop {
        let left: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'dbio-%'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            return killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "{left} server-engine backends still run 10 s after dbio was killed (run_time 600 s)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// `--engine server` left its loops running on the server after SIGKILL of dbio, for the rest
// of run_time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_server_engine_run_leaves_no_loop_on_15() {
    let pg = TestCluster::start(16);
    let took = loops_left_after_sigkill(&pg).await;
    eprintln!(
        "PostgreSQL {}: loops ended {took:?} after SIGKILL",
        pg.major()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(dbio_missing_pg17, ignore = "needs PostgreSQL 17 (DBIO_TEST_PG17_BIN)")]
async fn sigkill_during_a_server_engine_run_leaves_no_loop_on_17() {
    let pg = TestCluster::start_pg17(16, &[]);
    let took = loops_left_after_sigkill(&pg).await;
    eprintln!("PostgreSQL 17: loops ended {took:?} after SIGKILL");
}

// PostgreSQL 13 has no client_connection_check_interval: the loop runs in calls of 5 s, so an
// orphan ends with the call it is in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(dbio_missing_pg13, ignore = "needs PostgreSQL 13 (DBIO_TEST_PG13_BIN)")]
async fn sigkill_during_a_server_engine_run_leaves_no_loop_on_13() {
    let pg = TestCluster::start_version(13, 16, &[]);
    let took = loops_left_after_sigkill(&pg).await;
    eprintln!("PostgreSQL 13: loops ended {took:?} after SIGKILL");
}

// The slices of a PostgreSQL 13 loop add up: a 7 s run (two calls) reports every update the
// server counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(dbio_missing_pg13, ignore = "needs PostgreSQL 13 (DBIO_TEST_PG13_BIN)")]
async fn a_sliced_loop_on_13_counts_every_slice() {
    let pg = TestCluster::start_version(13, 16, &[]);
    pg.load("1", "1000blocks");
    let c = pg.client().await;
    let updated = || async {
        c.query_one(
            "SELECT coalesce(sum(n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'cf1'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0) as u64
    };
    let before = updated().await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .opt("--engine", "server")
        .readers(1)
        .writers(1)
        .run_time("7s")
        .out(out_dir.path())
        .quiet()
        .output();
    dbio_tests::assert_exit(&out, 0);
    let r = dbio_tests::read_result(out_dir.path());
    assert_eq!(r["status"], "ok");
    let measured = dbio_tests::num(&r, &["window", "measured_s"]);
    assert!((7.0..10.0).contains(&measured), "measured {measured} s");
    let rows = dbio_tests::num(&r, &["client", "update", "rows"]) as u64;
    let reads = dbio_tests::num(&r, &["client", "read", "count"]) as u64;
    assert!(
        rows > 100 && reads > 100,
        "rows updated {rows}, reads {reads}"
    );
    // PostgreSQL 13's statistics collector reports a little after the sessions end.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let delta = updated().await - before;
        if delta == rows {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server counted {delta} updated rows, dbio {rows}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
