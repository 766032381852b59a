//! `dbio run` against a real server: the client's counts against the server's own counters,
//! exact work loops, hot spots, Ctrl-C, and refused combinations.

use std::time::{Duration, Instant};

use dbio_tests::{
    TestCluster, assert_exit, assert_idx_scans, num, read_result, stderr, wait_no_dbio_sessions,
};
use serde_json::Value;

const SCALE: &str = "1000blocks";

/// A cluster with 2 schemas of 1,000 blocks loaded.
fn loaded() -> TestCluster {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    pg
}

fn n(v: &Value, path: &[&str]) -> u64 {
    num(v, path) as u64
}

/// Waits until the server has no dbio session left (their backends exit just after the
/// client disconnects), then returns the cf1 counters of all dbio schemas.
async fn settled_counters(c: &tokio_postgres::Client) -> (i64, i64) {
    wait_no_dbio_sessions(c, Duration::from_secs(10), "connected").await;
    let row = c
        .query_one(
            "SELECT coalesce(sum(idx_scan), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint FROM pg_stat_user_tables \
             WHERE relname = 'cf1' AND schemaname IN ('user1', 'user2')",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_counts_agree_with_the_servers_counters() {
    let pg = loaded();
    let c = pg.client().await;
    let before = settled_counters(&c).await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = pg
        .dbio("run")
        .schemas(2)
        .scale(SCALE)
        .readers(2)
        .writers(1)
        .opt("--update-pct", "10")
        .run_time("3s")
        .out(out_dir.path())
        .quiet()
        .output();
    assert_exit(&out, 0);
    let after = settled_counters(&c).await;
    let r = read_result(out_dir.path());
    assert_eq!(r["status"], "ok");
    let reads = n(&r, &["client", "read", "count"]);
    let updates = n(&r, &["client", "update", "count"]);
    assert!(
        reads > 100 && updates > 100,
        "reads {reads}, updates {updates}"
    );
    // Every read and every update is one index scan on cf1.
    assert_idx_scans((after.0 - before.0) as u64, reads + updates);
    // Each update changes update_work_unit = 8 rows. An update in flight at the window's
    // end is not counted by dbio (cancelled, or it completed after the end); the server
    // counts its rows when it completed: at most 8 rows per excluded update.
    let rows_updated = n(&r, &["client", "update", "rows"]);
    assert_eq!(rows_updated, updates * 8);
    let excluded_updates: u64 = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["past_window"][1].as_u64().unwrap())
        .sum();
    let server_rows = (after.1 - before.1) as u64;
    assert!(
        server_rows >= rows_updated
            && server_rows <= rows_updated + 8 * excluded_updates
            && (server_rows - rows_updated).is_multiple_of(8),
        "n_tup_upd delta {server_rows}, counted {rows_updated}, {excluded_updates} update(s) excluded"
    );
    assert_eq!(
        n(&r, &["client", "read", "rows"]),
        reads * 64,
        "each read counts work_unit rows"
    );
    // Per-session counts add up, and the window is the run time.
    let per_session: u64 = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ops"][0].as_u64().unwrap() + s["ops"][1].as_u64().unwrap())
        .sum();
    assert_eq!(per_session, reads + updates);
    assert_eq!(r["window"]["measured_s"].as_f64(), Some(3.0));
    let series: u64 = r["timeseries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reads"].as_u64().unwrap() + i["updates"].as_u64().unwrap())
        .sum();
    assert_eq!(
        series,
        reads + updates,
        "the time series accounts for every operation"
    );
    for kind in ["read", "update"] {
        let l = &r["client"][kind]["latency_us"];
        let (min, p50, p99, max) = (
            n(l, &["min"]),
            n(l, &["p50"]),
            n(l, &["p99"]),
            n(l, &["max"]),
        );
        assert!(
            0 < min && min <= p50 && p50 <= p99 && p99 <= max,
            "{kind}: {l}"
        );
    }
    let report = std::fs::read_to_string(out_dir.path().join("report.txt")).unwrap();
    assert!(
        report.contains("status ok") && report.contains(&reads.to_string()),
        "{report}"
    );
}

/// `--engine server`: each session's loop runs inside the database; its counts must agree
/// with the server's own counters as the client engine's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_engine_counts_agree_with_the_servers_counters() {
    let pg = loaded();
    let c = pg.client().await;
    let before = settled_counters(&c).await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = pg
        .dbio("run")
        .schemas(2)
        .scale(SCALE)
        .opt("--engine", "server")
        .readers(2)
        .writers(1)
        .opt("--update-pct", "20")
        .run_time("2s")
        .out(out_dir.path())
        .quiet()
        .output();
    assert_exit(&out, 0);
    let after = settled_counters(&c).await;
    let r = read_result(out_dir.path());
    assert_eq!(r["status"], "ok");
    assert_eq!(r["config"]["run"]["engine"], "server");
    let reads = n(&r, &["client", "read", "count"]);
    let updates = n(&r, &["client", "update", "count"]);
    assert!(
        reads > 100 && updates > 100,
        "reads {reads}, updates {updates}"
    );
    assert_idx_scans((after.0 - before.0) as u64, reads + updates);
    let rows_updated = n(&r, &["client", "update", "rows"]);
    assert_eq!(rows_updated, updates * 8);
    assert_eq!((after.1 - before.1) as u64, rows_updated, "n_tup_upd delta");
    assert_eq!(n(&r, &["client", "read", "rows"]), reads * 64);
    // Readers update exactly 20 in every 100 operations; the writer only updates.
    for s in r["sessions"].as_array().unwrap() {
        let (rd, up) = (s["ops"][0].as_u64().unwrap(), s["ops"][1].as_u64().unwrap());
        if s["spec"]["name"]
            .as_str()
            .unwrap()
            .starts_with("dbio-writer")
        {
            assert_eq!(rd, 0);
            assert!(up > 0);
        } else {
            assert!((up * 100).abs_diff(20 * (rd + up)) <= 100, "{s}");
        }
    }
    let measured = num(&r, &["window", "measured_s"]);
    assert!((2.0..4.0).contains(&measured), "measured {measured} s");
    // Latencies come from power-of-two buckets: every percentile is 2^k - 1 µs.
    let p50 = n(&r, &["client", "read", "latency_us", "p50"]);
    assert!((p50 + 1).is_power_of_two(), "p50 {p50}");
    let report = std::fs::read_to_string(out_dir.path().join("report.txt")).unwrap();
    assert!(report.contains("engine    server"), "{report}");
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("run.engine server")),
        "{}",
        r["warnings"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_loop_performs_exactly_sessions_times_loops() {
    let pg = loaded();
    let c = pg.client().await;
    let before = settled_counters(&c).await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = pg
        .dbio("run")
        .schemas(2)
        .scale(SCALE)
        .readers(3)
        .writers(2)
        .opt("--work-loop", "40")
        .out(out_dir.path())
        .quiet()
        .output();
    assert_exit(&out, 0);
    let after = settled_counters(&c).await;
    let r = read_result(out_dir.path());
    assert_eq!(n(&r, &["client", "ops"]), 5 * 40);
    assert_eq!(
        n(&r, &["client", "update", "count"]),
        2 * 40,
        "writers only update"
    );
    assert_idx_scans((after.0 - before.0) as u64, 200);
    for s in r["sessions"].as_array().unwrap() {
        assert_eq!(
            s["ops"][0].as_u64().unwrap() + s["ops"][1].as_u64().unwrap(),
            40,
            "{s}"
        );
    }
    assert_eq!(r["window"]["mode"], "work_loop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_spot_confines_the_keys_it_is_given() {
    let pg = loaded();
    let c = pg.client().await;
    let config = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    let write_config = |frequency: u32| {
        std::fs::write(
            config.path(),
            format!(
                "data:\n  schemas: 2\n  scale: {SCALE}\nrun:\n  readers: 0\n  writers: 2\n  work_loop: 100\n  \
                 update_work_unit: 8\n  hot_spot:\n    size: 100blocks\n    offset: 200blocks\n    frequency: {frequency}\n"
            ),
        )
        .unwrap();
    };
    write_config(1);
    let out_dir = tempfile::tempdir().unwrap();
    let run = pg
        .dbio("run")
        .config(config.path())
        .out(out_dir.path())
        // The second run below replaces the first one's result.
        .arg("--overwrite")
        .quiet();
    assert_exit(&run.output(), 0);
    let (rows, lo, hi, outside) = updated_keys(&c).await;
    assert!(rows > 50, "updates changed {rows} rows");
    assert_eq!(
        outside, 0,
        "every update stays in the hot spot (keys {lo:?}..{hi:?})"
    );
    assert!(lo >= Some(201) && hi <= Some(300));

    // Every second operation hot: the others land anywhere.
    write_config(2);
    assert_exit(&run.output(), 0);
    let (_, _, _, outside) = updated_keys(&c).await;
    assert!(
        outside > 0,
        "with frequency 2, some updates fall outside the hot spot"
    );
}

/// Rows that dbio's updates changed (their c2 starts with `upd:`): count, key range, and how
/// many lie outside keys 201..=300.
async fn updated_keys(c: &tokio_postgres::Client) -> (i64, Option<i64>, Option<i64>, i64) {
    let q = "SELECT count(*), min(custid), max(custid), count(*) FILTER (WHERE custid NOT BETWEEN 201 AND 300) \
             FROM (SELECT custid FROM user1.cf1 WHERE c2 LIKE 'upd:%' \
                   UNION ALL SELECT custid FROM user2.cf1 WHERE c2 LIKE 'upd:%') u";
    let r = c.query_one(q, &[]).await.unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_ends_the_run_with_an_interrupted_result_and_no_sessions_left() {
    let pg = loaded();
    let c = pg.client().await;
    for engine in ["client", "server"] {
        let out_dir = tempfile::tempdir().unwrap();
        let mut child = pg
            .dbio("run")
            .schemas(2)
            .scale(SCALE)
            .opt("--engine", engine)
            .readers(2)
            .writers(1)
            .run_time("60s")
            .out(out_dir.path())
            .spawn();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let active: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'dbio-%er-%'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if active == 3 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{engine}: sessions never connected"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // SAFETY: kill with a valid pid and signal number.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let sent = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(5),
                "{engine}: dbio did not stop within 5 s of Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(1), "{engine}");
        let r = read_result(out_dir.path());
        assert_eq!(r["status"], "interrupted", "{engine}");
        assert!(r["window"]["measured_s"].as_f64().unwrap() < 10.0);
        if engine == "client" {
            assert!(n(&r, &["client", "ops"]) > 0);
        } else {
            // The loops' counts come back only when their calls end; cancelled, they are
            // lost, and that is not counted as an error.
            assert_eq!(n(&r, &["client", "errors"]), 0);
            for s in r["sessions"].as_array().unwrap() {
                assert_eq!(s["ended_by"], "interrupted", "{s}");
            }
        }
        // No dbio session may be left on the server.
        wait_no_dbio_sessions(&c, Duration::from_secs(3), "after Ctrl-C").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_combinations_are_refused_naming_the_key() {
    let pg = loaded();
    let base = pg
        .dbio("run")
        .schemas(2)
        .scale(SCALE)
        .quiet()
        .run_time("1s");
    let cases: &[(&[&str], &str)] = &[
        (&["--readers", "0", "--writers", "0"], "run.readers"),
        (&["--work-unit", "5000"], "run.work_unit"),
        (&["--update-pct", "101"], "run.update_pct"),
        (&["--engine", "server", "--warmup", "1s"], "run.warmup"),
    ];
    for (extra, key) in cases {
        let out = base.clone().args(*extra).output();
        assert_exit(&out, 2);
        assert!(stderr(&out).contains(key), "{key}: {}", stderr(&out));
    }
    // A data set check would reject: a missing schema, then an incomplete one.
    let out = pg
        .dbio("run")
        .schemas(3)
        .scale(SCALE)
        .run_time("1s")
        .quiet()
        .output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user3 does not exist") && stderr(&out).contains("data.schemas"),
        "{}",
        stderr(&out)
    );
    let c = pg.client().await;
    let comment: String = c
        .query_one(
            "SELECT obj_description('user2'::regnamespace, 'pg_namespace')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "COMMENT ON SCHEMA user2 IS '{}'",
        comment.replace("\"complete\"", "\"loading\"")
    ))
    .await
    .unwrap();
    let out = base.output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user2: load incomplete"),
        "{}",
        stderr(&out)
    );
}
