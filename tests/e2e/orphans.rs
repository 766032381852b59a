//! No dbio work left on the server after dbio itself is gone.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dbio_tests::{TestCluster, dbio_bin};

/// Starts a `--engine server` run of 10 minutes, SIGKILLs dbio once the loops run, and
/// returns how long the server took to end them.
async fn loops_left_after_sigkill(pg: &TestCluster) -> Duration {
    pg.load("2", "1000blocks");
    let dsn = pg.dsn();
    let c = pg.client().await;
    let out_dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(dbio_bin())
        .args([
            "run",
            "--dsn",
            &dsn,
            "--schemas",
            "2",
            "--scale",
            "1000blocks",
            "--engine",
            "server",
            "--readers",
            "2",
            "--writers",
            "1",
            "--run-time",
            "600s",
            "--out",
            out_dir.path().to_str().unwrap(),
        ])
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
