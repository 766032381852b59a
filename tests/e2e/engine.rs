//! The session engines against a real server: the event engine's counts against the
//! server's own counters, at a session count where `auto` picks it and on a few sessions
//! where it is asked for, and result.json naming the engine each run used.

use dbio_tests::{TestCluster, assert_exit, assert_idx_scans, idx_scans, num, read_result};
use serde_json::Value;

const SCALE: &str = "1000blocks";

fn n(v: &Value, path: &[&str]) -> u64 {
    num(v, path) as u64
}

fn sessions_ops(r: &Value) -> Vec<u64> {
    r["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["ops"][0].as_u64().unwrap_or(0) + s["ops"][1].as_u64().unwrap_or(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_drives_many_sessions_on_the_event_engine_and_the_server_counts_the_same() {
    let pg = TestCluster::start_with(64, None, &[("max_connections", "200")]);
    pg.load("2", SCALE);
    let c = pg.client().await;
    let before = idx_scans(&c).await;
    let out_dir = tempfile::tempdir().unwrap();
    let out = pg
        .dbio("run")
        .schemas(2)
        .scale(SCALE)
        .readers(120)
        .writers(8)
        .run_time("4s")
        .out(out_dir.path())
        .quiet()
        .output();
    assert_exit(&out, 0);
    let after = idx_scans(&c).await;
    let r = read_result(out_dir.path());
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(r["client"]["session_engine"], "events");
    assert!(
        r["client"]["session_engine_why"]
            .as_str()
            .is_some_and(|w| w.starts_with("auto") && w.contains("128 sessions")),
        "{}",
        r["client"]["session_engine_why"]
    );
    let reads = n(&r, &["client", "read", "count"]);
    let updates = n(&r, &["client", "update", "count"]);
    assert!(
        reads > 500 && updates > 50,
        "reads {reads}, updates {updates}"
    );
    assert_idx_scans(after - before, reads + updates);
    assert_eq!(n(&r, &["client", "read", "rows"]), reads * 64);
    assert_eq!(n(&r, &["client", "update", "rows"]), updates * 8);
    let per_session = sessions_ops(&r);
    assert_eq!(per_session.len(), 128);
    assert_eq!(per_session.iter().sum::<u64>(), reads + updates);
    // Every session ran: the event loop serves all of its sockets, not the first few.
    assert!(
        per_session.iter().all(|&ops| ops > 0),
        "a session did nothing: {per_session:?}"
    );
    for s in r["sessions"].as_array().unwrap() {
        assert_eq!(s["ended_by"], "window", "{s}");
    }
    assert_eq!(r["window"]["measured_s"].as_f64(), Some(4.0));
    let l = &r["client"]["read"]["latency_us"];
    assert!(
        0 < n(l, &["min"]) && n(l, &["p50"]) <= n(l, &["p99"]),
        "{l}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_asked_for_runs_exact_work_loops_either_way() {
    let pg = TestCluster::start(64);
    pg.load("2", SCALE);
    let c = pg.client().await;
    for engine in ["events", "threads"] {
        let before = idx_scans(&c).await;
        let out_dir = tempfile::tempdir().unwrap();
        let out = pg
            .dbio("run")
            .schemas(2)
            .scale(SCALE)
            .readers(3)
            .writers(2)
            .opt("--work-loop", "40")
            .opt("--session-engine", engine)
            .out(out_dir.path())
            .quiet()
            .output();
        assert_exit(&out, 0);
        let after = idx_scans(&c).await;
        let r = read_result(out_dir.path());
        assert_eq!(r["client"]["session_engine"], engine);
        assert_eq!(r["client"]["session_engine_why"], "asked for");
        assert_eq!(n(&r, &["client", "ops"]), 5 * 40, "{engine}");
        assert_eq!(n(&r, &["client", "update", "count"]), 2 * 40, "{engine}");
        assert_idx_scans(after - before, 200);
        assert!(
            sessions_ops(&r).iter().all(|&ops| ops == 40),
            "{engine}: {:?}",
            sessions_ops(&r)
        );
    }
}
