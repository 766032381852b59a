//! Several targets in one run (`--dsn` repeated, `target.dsns`): two scratch clusters of
//! different versions driven in one window, each server's own counters against the figures
//! the report gives it, the totals against the sums; a ramp over both; the refusals.

use dbio_tests::{Dbio, TestCluster, assert_exit, idx_scans, num, read_result, stderr};
use serde_json::Value;

const SCALE: &str = "1000blocks";

fn n(v: &Value, path: &[&str]) -> u64 {
    num(v, path) as u64
}

/// Every read is one index scan on cf1 (PostgreSQL 15 was seen to count one more in 200, see
/// run.rs): the server's delta is the reads, or at most 1% above.
fn assert_scans(server: u64, reads: u64, what: &str) {
    assert!(
        server >= reads && server - reads <= (reads / 100).max(1),
        "{what}: idx_scan delta {server} vs {reads} reads the report gives it"
    );
}

// Two clusters (the default build and PostgreSQL 17), 2 readers on the first and 1 on the
// second, 300 operations each: each server's idx_scan equals the reads its row gives it, its
// collector's idx_scan the same; the totals are the sums; the sessions are named once over
// both; the report has a row per target and the totals.
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 (scripts/test.sh installs it)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_in_one_window_each_counted_by_its_server() {
    let a = TestCluster::start(16);
    let b = TestCluster::start_pg17(16, &[]);
    a.load("2", SCALE);
    b.load("2", SCALE);
    let (ca, cb) = (a.client().await, b.client().await);
    let (before_a, before_b) = (idx_scans(&ca).await, idx_scans(&cb).await);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("r");
    let o = a
        .dbio("run")
        .dsn(b.dsn())
        .opt("--target-readers", "2,1")
        .opt("--work-loop", "300")
        .out(&dir)
        .output();
    assert_exit(&o, 0);
    let err = stderr(&o);
    assert!(
        err.contains("target 1/2:") && err.contains("target 2/2:"),
        "{err}"
    );
    let (after_a, after_b) = (idx_scans(&ca).await, idx_scans(&cb).await);
    let r = read_result(&dir);
    let targets = r["targets"].as_array().expect("targets[]");
    assert_eq!(targets.len(), 2);
    assert_eq!(n(&targets[0], &["readers"]), 2);
    assert_eq!(n(&targets[1], &["readers"]), 1);
    let reads: Vec<u64> = targets.iter().map(|t| n(t, &["read", "count"])).collect();
    // work_loop: every session does exactly its 300 operations.
    assert_eq!(reads, vec![600, 300]);
    assert_scans(after_a - before_a, reads[0], "first server");
    assert_scans(after_b - before_b, reads[1], "second server");
    for (t, server) in targets.iter().zip([after_a - before_a, after_b - before_b]) {
        let collected = n(t, &["db", "dbio_tables", "idx_scan"]);
        assert_scans(collected, n(t, &["read", "count"]), "collector");
        assert!(
            collected <= server,
            "collector {collected} vs server {server}"
        );
        assert!(
            t["waits"].is_object(),
            "each target has its own sampler: {t}"
        );
    }
    assert_eq!(
        targets[1]["environment"]["server_version_num"]
            .as_i64()
            .unwrap()
            / 10000,
        17
    );
    // The totals are the sums.
    assert_eq!(n(&r, &["client", "read", "count"]), 900);
    let sum_idx: u64 = targets
        .iter()
        .map(|t| n(t, &["db", "dbio_tables", "idx_scan"]))
        .sum();
    assert_eq!(n(&r, &["db", "dbio_tables", "idx_scan"]), sum_idx);
    let sum_iops: f64 = targets.iter().map(|t| num(t, &["db", "read_iops"])).sum();
    assert!((num(&r, &["db", "read_iops"]) - sum_iops).abs() <= 1e-6 * sum_iops.max(1.0));
    let sum_rate: f64 = targets.iter().map(|t| num(t, &["read", "ops_per_s"])).sum();
    assert!((num(&r, &["client", "read", "ops_per_s"]) - sum_rate).abs() <= 1e-6 * sum_rate);
    // Three sessions, named once over both targets, each on its target.
    let sessions = r["sessions"].as_array().unwrap();
    let on: Vec<(String, u64)> = sessions
        .iter()
        .map(|s| {
            (
                s["spec"]["name"].as_str().unwrap().to_string(),
                n(s, &["spec", "target"]),
            )
        })
        .collect();
    assert_eq!(
        on,
        vec![
            ("dbio-reader-1".to_string(), 0),
            ("dbio-reader-2".to_string(), 1),
            ("dbio-reader-3".to_string(), 0)
        ]
    );
    // The first target's two readers used both its schemas.
    let schemas: Vec<&str> = sessions
        .iter()
        .filter(|s| s["spec"]["target"] == 0)
        .map(|s| s["spec"]["schema"].as_str().unwrap())
        .collect();
    assert_eq!(schemas, vec!["user1", "user2"]);
    assert_eq!(r["config"]["target"]["dsns"].as_array().unwrap().len(), 2);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("Targets (2;"), "{report}");
    assert!(report.contains("Target 2: "), "{report}");
    // Each target's own settings and read path (seen: only target 1's), and no "host: not
    // measured" where each target measured its own host.
    let settings: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("     settings "))
        .collect();
    assert_eq!(settings.len(), 2, "{report}");
    // PostgreSQL 17 has io_combine_limit, the default build (15) has not.
    assert!(
        !settings[0].contains("io_combine_limit=") && settings[1].contains("io_combine_limit="),
        "{settings:?}"
    );
    assert_eq!(
        report
            .lines()
            .filter(|l| l.starts_with("     read path index: Aggregate > Index Scan using i_cf1"))
            .count(),
        2,
        "{report}"
    );
    assert!(!report.contains("host: not measured"), "{report}");
    assert!(report.contains("host: per target"), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("total ") && l.contains(" 900 ")),
        "{report}"
    );
}

// A ramp over two targets: each step spreads its readers round-robin, and each step's result
// has a row per target whose reads sum to the step's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ramp_over_two_targets_spreads_each_step() {
    let a = TestCluster::start(16);
    let b = TestCluster::start(16);
    a.load("1", SCALE);
    b.load("1", SCALE);
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("ramp");
    let o = a
        .dbio("ramp")
        .dsn(b.dsn())
        .readers("1,2")
        .run_time("2s")
        .out(&dir)
        .quiet()
        .output();
    assert_exit(&o, 0);
    for (step, readers) in [("step-01-r1-w0", [1, 0]), ("step-02-r2-w0", [1, 1])] {
        let r = read_result(&dir.join(step));
        let targets = r["targets"].as_array().expect("targets[]");
        let got: Vec<u64> = targets.iter().map(|t| n(t, &["readers"])).collect();
        assert_eq!(got, readers, "{step}");
        let sum: u64 = targets.iter().map(|t| n(t, &["read", "count"])).sum();
        assert_eq!(sum, n(&r, &["client", "read", "count"]), "{step}");
        assert!(sum > 0, "{step}");
    }
    // ramp.json and ramp.txt carry each target's figures beside the step's totals.
    let ramp: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ramp.json")).unwrap()).unwrap();
    for step in ramp["steps"].as_array().unwrap() {
        let targets = step["targets"].as_array().expect("steps[].targets");
        assert_eq!(targets.len(), 2);
        let sum: f64 = targets
            .iter()
            .map(|t| num(t, &["db_read_iops", "mean"]))
            .sum();
        let total = num(step, &["db_read_iops", "mean"]);
        assert!(
            (sum - total).abs() <= 1e-6 * total.max(1.0),
            "{sum} vs {total}"
        );
    }
    let txt = std::fs::read_to_string(dir.join("ramp.txt")).unwrap();
    assert_eq!(
        txt.lines().filter(|l| l.starts_with("  target 2")).count(),
        2,
        "{txt}"
    );
}

// What cannot be one run is refused before anything is measured, naming the fix: targets
// holding different data sets, one target given twice, a single-target command given two,
// per-target counts that do not match the targets, and per-target counts in a ramp; two
// databases of one cluster run, with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_target_refusals_name_the_fix() {
    let a = TestCluster::start(16);
    let b = TestCluster::start(16);
    a.load("2", SCALE);
    b.load("1", SCALE);
    let (da, db) = (a.dsn(), b.dsn());
    let out = tempfile::tempdir().unwrap();
    let o_dir = out.path().join("x");
    let o_dir = o_dir.to_str().unwrap();
    let run = |targets: Dbio| targets.run_time("1s").out(o_dir).quiet().output();
    let o = run(Dbio::new("run").dsn(&da).dsn(&db).schemas(2));
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("target 2 of 2"), "{}", stderr(&o));

    let o = run(Dbio::new("run").dsn(&da).dsn(&da));
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("a target given twice"),
        "{}",
        stderr(&o)
    );

    let o = Dbio::new("setup").dsn(&da).dsn(&db).quiet().output();
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("only run and ramp drive several targets"),
        "{}",
        stderr(&o)
    );

    let o = run(Dbio::new("run")
        .dsn(&da)
        .dsn(&db)
        .opt("--target-readers", "1,1,1"));
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("3 count(s) for 2 target(s)"),
        "{}",
        stderr(&o)
    );

    let o = run(Dbio::new("run")
        .dsn(&da)
        .dsn(&db)
        .readers(3)
        .opt("--target-readers", "1,1"));
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("sums to 2 but the run has 3"),
        "{}",
        stderr(&o)
    );

    let file = out.path().join("two.yaml");
    std::fs::write(
        &file,
        format!("target:\n  dsns: [\"{da}\", \"{db}\"]\n  readers: [1, 1]\n"),
    )
    .unwrap();
    let o = Dbio::new("ramp").config(&file).out(o_dir).quiet().output();
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("a ramp varies the session count"),
        "{}",
        stderr(&o)
    );
    // Nothing was measured: no result was written.
    assert!(!out.path().join("x").join("result.json").exists());

    // Two databases of one cluster are two targets, with a warning that its server-wide
    // figures are counted in both.
    let c = a.client().await;
    c.batch_execute("CREATE DATABASE other").await.unwrap();
    let other = da.replace("dbname=postgres", "dbname=other");
    assert_ne!(other, da);
    assert_exit(
        &Dbio::new("setup")
            .dsn(&other)
            .schemas(2)
            .scale(SCALE)
            .quiet()
            .output(),
        0,
    );
    let o = Dbio::new("run")
        .dsn(&da)
        .dsn(&other)
        .readers(2)
        .run_time("1s")
        .out(out.path().join("same"))
        .quiet()
        .output();
    assert_exit(&o, 0);
    let r = read_result(&out.path().join("same"));
    assert!(
        r["warnings"].to_string().contains("are one server"),
        "{}",
        r["warnings"]
    );
}

/// idx_scan on dbio's tables of each of two servers, settled.
async fn scans_of(a: &tokio_postgres::Client, b: &tokio_postgres::Client) -> (u64, u64) {
    (idx_scans(a).await, idx_scans(b).await)
}

// Seen with `host=a,b`: 3 of 4 sessions on one server and the collector on the other, status
// ok and every database figure about a server the sessions did not use. A run settles on one
// server of the list (the first that answers and fits target_session_attrs) for every
// session and the collector, and records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_list_is_one_server_for_every_session_and_the_collector() {
    let a = TestCluster::start(16);
    let b = TestCluster::start(16);
    a.load("1", SCALE);
    b.load("1", SCALE);
    let (ca, cb) = (a.client().await, b.client().await);
    let (pa, pb) = (a.cluster.state.port, b.cluster.state.port);
    let list = |attrs: &str| {
        format!("host=127.0.0.1,127.0.0.1 port={pa},{pb} user=postgres dbname=postgres{attrs}")
    };
    let out = tempfile::tempdir().unwrap();
    let run = |dsn: String, dir: &std::path::Path| {
        Dbio::new("run")
            .dsn(&dsn)
            .readers(3)
            .opt("--work-loop", "100")
            .quiet()
            .out(dir)
            .output()
    };
    // Both answer: the first, for everything.
    let before = scans_of(&ca, &cb).await;
    let dir = out.path().join("first");
    assert_exit(&run(list(""), &dir), 0);
    let after = scans_of(&ca, &cb).await;
    let r = read_result(&dir);
    assert_scans(after.0 - before.0, 300, "the first server");
    assert_eq!(after.1, before.1, "no read on the second server");
    assert_eq!(
        r["environment"]["pinned_server"],
        format!("host=127.0.0.1 port={pa}")
    );
    assert_scans(
        n(&r, &["db", "dbio_tables", "idx_scan"]),
        300,
        "the collector",
    );
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(
        report.contains(&format!(
            "every session and the collector used host=127.0.0.1 port={pa}"
        )),
        "{report}"
    );

    // The first is read-only and target_session_attrs asks for read-write: the second, for
    // everything.
    for sql in [
        "ALTER SYSTEM SET default_transaction_read_only = on",
        "SELECT pg_reload_conf()",
    ] {
        ca.batch_execute(sql).await.unwrap();
    }
    let before = scans_of(&ca, &cb).await;
    let dir = out.path().join("second");
    assert_exit(&run(list(" target_session_attrs=read-write"), &dir), 0);
    let after = scans_of(&ca, &cb).await;
    let r = read_result(&dir);
    assert_eq!(after.0, before.0, "no read on the read-only first server");
    assert_scans(after.1 - before.1, 300, "the second server");
    assert_eq!(
        r["environment"]["pinned_server"],
        format!("host=127.0.0.1 port={pb}")
    );
    assert_scans(
        n(&r, &["db", "dbio_tables", "idx_scan"]),
        300,
        "the collector",
    );
}
