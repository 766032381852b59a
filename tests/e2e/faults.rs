//! Faults: the server dying mid-run, a session's backend terminated, statements stuck behind
//! a lock, a host that never answers, the server restarting inside a ramp, passwords in
//! output, and a long run of 256 sessions. Each ends cleanly, says why, and leaves no dbio
//! session on the server.

use std::process::Child;
use std::time::{Duration, Instant};

use dbio_tests::{
    Dbio, TestCluster, assert_exit, num, read_result, stderr, stdout, wait_no_dbio_sessions,
};
use serde_json::Value;

/// Waits for `n` measured sessions on the server.
pub(crate) async fn wait_sessions(c: &tokio_postgres::Client, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let k: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name ~ '^dbio-(reader|writer)-[0-9]+$'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if k >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {k} of {n} sessions connected"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for the child to exit within `limit`, returning its exit code.
pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("dbio did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_stopping_mid_run_fails_the_run_within_10_s_with_a_result() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let out = tempfile::tempdir().unwrap();
    let mut child = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .readers(2)
        .run_time("60s")
        .quiet()
        .out(out.path())
        .spawn();
    let c = pg.client().await;
    wait_sessions(&c, 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(c);
    pg.cluster.kill_immediate().unwrap();
    let code = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(code, 1);
    let r = read_result(out.path());
    assert_eq!(r["status"], "failed");
    assert!(
        !r["error"].as_str().unwrap_or("").is_empty(),
        "{}",
        r["error"]
    );
    assert!(
        num(&r, &["client", "ops"]) > 0.0,
        "what was measured until then is kept"
    );
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("could not be read after the run")),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_aborts_or_is_counted_per_policy() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let c = pg.client().await;
    let terminate = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dbio-reader-2'";

    // abort (the default): the run fails and says which session.
    let out = tempfile::tempdir().unwrap();
    let mut child = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .readers(3)
        .run_time("60s")
        .quiet()
        .out(out.path())
        .spawn();
    wait_sessions(&c, 3).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    c.execute(terminate, &[]).await.unwrap();
    assert_eq!(wait_exit(&mut child, Duration::from_secs(10)), 1);
    let r = read_result(out.path());
    assert_eq!(r["status"], "failed");
    assert!(
        r["error"].as_str().unwrap().contains("dbio-reader-2"),
        "{}",
        r["error"]
    );
    let s2 = &r["sessions"][1];
    assert_eq!(s2["spec"]["name"], "dbio-reader-2");
    assert!(
        s2["first_error"]["message"]
            .as_str()
            .unwrap()
            .contains("57P01"),
        "{s2}"
    );
    wait_no_dbio_sessions(&c, Duration::from_secs(5), "after the aborted run").await;

    // continue: the session stops, the others finish the window; the result says who and when.
    let out = tempfile::tempdir().unwrap();
    let mut child = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .readers(3)
        .run_time("4s")
        .opt("--on-error", "continue")
        .quiet()
        .out(out.path())
        .spawn();
    wait_sessions(&c, 3).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.execute(terminate, &[]).await.unwrap();
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), 0);
    let r = read_result(out.path());
    assert_eq!(r["status"], "ok");
    let s2 = &r["sessions"][1];
    assert_eq!(s2["ended_by"], "error");
    let at = num(s2, &["first_error", "at_s"]);
    assert!((0.5..4.0).contains(&at), "terminated at {at} s");
    assert_eq!(r["sessions"][0]["ended_by"], "window");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("dbio-reader-2 stopped early"),
        "{warnings}"
    );
    wait_no_dbio_sessions(&c, Duration::from_secs(5), "after the run").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_wait_beyond_statement_timeout_is_an_error_not_a_hang() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let holder = pg.client().await;
    // Every row locked by an open transaction for the whole run.
    holder
        .batch_execute("BEGIN; UPDATE user1.cf1 SET c3 = c3")
        .await
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let o = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .readers(0)
        .writers(1)
        .run_time("2s")
        .opt("--statement-timeout", "300ms")
        .opt("--on-error", "continue")
        .quiet()
        .out(out.path())
        .output();
    assert_exit(&o, 0);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    let r = read_result(out.path());
    assert!(
        num(&r, &["client", "update", "errors"]) >= 3.0,
        "{}",
        r["client"]
    );
    let msg = r["sessions"][0]["first_error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("statement timeout") && msg.contains("57014"),
        "{msg}"
    );
    holder.batch_execute("ROLLBACK").await.unwrap();
}

#[test]
fn a_host_that_never_answers_honours_the_connect_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept connections and never say a word.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let dsn = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
    let started = Instant::now();
    let o = Dbio::new("check")
        .dsn(&dsn)
        .opt("--connect-timeout", "1s")
        .output();
    let took = started.elapsed();
    assert_exit(&o, 2);
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        stderr(&o).contains("no answer within 1 s"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_inside_a_ramp_fails_that_step_and_the_ramp_follows_its_policy() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    for policy in ["continue", "stop"] {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("ramp");
        let mut child = pg
            .dbio("ramp")
            .schemas(1)
            .scale("1000blocks")
            .readers("1,2,3")
            .writers(0)
            .run_time("3s")
            .opt("--on-step-failure", policy)
            .quiet()
            .out(&dir)
            .spawn();
        // Restart the server in the middle of the second step's window.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.join("step-02-r2-w0").exists() {
            assert!(Instant::now() < deadline, "step 2 never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(1500));
        pg.cluster.restart().unwrap();
        assert_eq!(
            wait_exit(&mut child, Duration::from_secs(60)),
            1,
            "policy {policy}"
        );
        let ramp: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("ramp.json")).unwrap()).unwrap();
        let statuses: Vec<&str> = ramp["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        match policy {
            "continue" => assert_eq!(statuses, ["ok", "failed", "ok"], "policy continue"),
            _ => assert_eq!(statuses, ["ok", "failed"], "policy stop"),
        }
        let txt = std::fs::read_to_string(dir.join("ramp.txt")).unwrap();
        assert!(
            txt.contains("[failed]"),
            "ramp.txt marks the failed step:\n{txt}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_never_reach_any_output() {
    let password = "Pw-Never-Printed-71";
    let pg = TestCluster::start_with(16, Some(password), &[]);
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres password={password}",
        pg.cluster.state.port
    );
    let out = tempfile::tempdir().unwrap();
    let mut outputs = String::new();
    let mut run = |cmd: Dbio| {
        let o = cmd.output();
        outputs.push_str(&stdout(&o));
        outputs.push_str(&stderr(&o));
        o
    };
    assert_exit(
        &run(Dbio::new("setup").dsn(&dsn).schemas(1).scale("1000blocks")),
        0,
    );
    assert_exit(
        &run(Dbio::new("check").dsn(&dsn).schemas(1).scale("1000blocks")),
        0,
    );
    let ramp_dir = out.path().join("ramp");
    assert_exit(
        &run(Dbio::new("ramp")
            .dsn(&dsn)
            .schemas(1)
            .scale("1000blocks")
            .readers("1,2")
            .run_time("1s")
            .out(&ramp_dir)),
        0,
    );
    let ramp_json = ramp_dir.join("ramp.json");
    run(Dbio::new("compare")
        .arg(&ramp_json)
        .arg(&ramp_json)
        .out(out.path().join("cmp")));
    run(Dbio::new("regress")
        .opt("--baseline", &ramp_json)
        .arg(&ramp_json));
    // A failing command's error message, too (a missing database).
    let bad = format!("{dsn} dbname=nosuchdb");
    run(Dbio::new("check").dsn(&bad));
    assert!(
        !outputs.contains(password),
        "a password reached stdout or stderr"
    );
    let mut files = 0;
    for entry in walk(out.path()) {
        let text = std::fs::read_to_string(&entry).unwrap_or_default();
        assert!(
            !text.contains(password),
            "{} holds the password",
            entry.display()
        );
        files += 1;
    }
    assert!(files >= 10, "only {files} output files checked");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The host-load lock is held by whole tests on their own threads, never by two tasks of one
// runtime, so holding it across this test's awaits cannot deadlock.
#[allow(clippy::await_holding_lock)]
async fn two_hundred_fifty_six_sessions_hold_for_60_s() {
    let _host = dbio_tests::host_load_lock();
    let pg = TestCluster::start(64);
    pg.load("4", "1000blocks");
    let out = tempfile::tempdir().unwrap();
    let o = pg
        .dbio("run")
        .schemas(4)
        .scale("1000blocks")
        .readers(256)
        .run_time("60s")
        .quiet()
        .out(out.path())
        .output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    assert_eq!(r["sessions"].as_array().unwrap().len(), 256);
    assert_eq!(num(&r, &["client", "errors"]), 0.0);
    assert!(
        r["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["ops"][0].as_u64().unwrap() > 0),
        "every session worked"
    );
    let rss = num(&r, &["client", "max_rss_kib"]);
    assert!(rss > 0.0, "memory is reported");
    eprintln!(
        "256 sessions: {:.0} ops/s, peak RSS {:.1} MiB",
        num(&r, &["client", "ops_per_s"]),
        rss / 1024.0
    );
    let c = pg.client().await;
    wait_no_dbio_sessions(&c, Duration::from_secs(10), "after 256 sessions").await;
}
