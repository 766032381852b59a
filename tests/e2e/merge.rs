//! `dbio merge`: real runs driven by separate processes against one scratch cluster, merged,
//! against the server's counters and the shards' own histograms; and the refusals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use dbio_core::stats::{decode_histogram, new_histogram};
use dbio_tests::{Dbio, TestCluster, assert_exit, idx_scans, num, read_result, stderr};
use serde_json::Value;

const SCALE: &str = "1000blocks";

fn run(dsn: &str, out: &Path, run_time: &str, extra: &[&str]) -> std::process::Output {
    run_with(dsn, out, run_time, "1", extra)
}

fn run_with(
    dsn: &str,
    out: &Path,
    run_time: &str,
    readers: &str,
    extra: &[&str],
) -> std::process::Output {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(2)
        .scale(SCALE)
        .readers(readers)
        .run_time(run_time)
        .out(out)
        .quiet()
        .args(extra)
        .output()
}

fn n(v: &Value, path: &[&str]) -> u64 {
    num(v, path) as u64
}

// Three shard processes, the third started 2 s after the other two: the merged counts are the
// sums and the server's, the merged percentiles are those of the added histograms, the windows
// overlap, and the late shard is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shard_processes_merge_into_one_exact_result() {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    let c = pg.client().await;
    let dsn = pg.dsn();
    let work = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (1..=3)
        .map(|k| work.path().join(format!("shard{k}")))
        .collect();
    let before = idx_scans(&c).await;
    let outputs: Vec<std::process::Output> = std::thread::scope(|s| {
        let handles: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let dsn = dsn.as_str();
                s.spawn(move || {
                    if k == 2 {
                        std::thread::sleep(Duration::from_secs(2));
                    }
                    // One run id and a shard each: the shards of one run share the data set
                    // (a second run on it, or under its id without --shard, is refused).
                    let shard = format!("{k}/3");
                    run_with(
                        dsn,
                        d,
                        "6s",
                        "3",
                        &["--run-id", "merge-e2e", "--shard", &shard],
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outputs {
        assert_exit(o, 0);
    }
    let after = idx_scans(&c).await;
    let merged_dir = work.path().join("merged");
    let o = Dbio::new("merge")
        .args(&dirs)
        .opt("--max-skew", "4s")
        .out(&merged_dir)
        .output();
    assert_exit(&o, 0);
    assert!(stderr(&o).contains("3 shards"), "{}", stderr(&o));

    let shards: Vec<Value> = dirs.iter().map(|d| read_result(d)).collect();
    let m = read_result(&merged_dir);
    let sum = |path: &[&str]| shards.iter().map(|r| n(r, path)).sum::<u64>();
    let reads = n(&m, &["client", "read", "count"]);
    assert!(reads > 300, "{reads} reads");
    assert_eq!(reads, sum(&["client", "read", "count"]));
    assert_eq!(n(&m, &["client", "ops"]), sum(&["client", "ops"]));
    assert_eq!(
        n(&m, &["client", "read", "rows"]),
        sum(&["client", "read", "rows"])
    );
    let rate_sum: f64 = shards
        .iter()
        .map(|r| num(r, &["client", "ops_per_s"]))
        .sum();
    assert!((num(&m, &["client", "ops_per_s"]) - rate_sum).abs() < 1e-6 * rate_sum);
    // Every read is one index scan on cf1 (never fewer; PostgreSQL 15 was seen to count one
    // more in 200, see run.rs).
    let server = after - before;
    assert!(
        server >= reads && server - reads <= (reads / 100).max(1),
        "idx_scan delta {server} vs {reads} merged reads"
    );
    assert_eq!(m["sessions"].as_array().unwrap().len(), 3);
    assert_eq!(m["merge"]["run_id"], "merge-e2e");
    assert_eq!(m["config"]["run"]["readers"], 3);

    // The merged percentiles are those of the sum of the shards' histograms.
    let mut total = new_histogram();
    for r in &shards {
        let h = decode_histogram(r["client"]["read"]["histogram"].as_str().unwrap()).unwrap();
        total.add(&h).unwrap();
    }
    assert_eq!(total.len(), reads);
    let merged_hist = decode_histogram(m["client"]["read"]["histogram"].as_str().unwrap()).unwrap();
    assert_eq!(merged_hist.len(), reads);
    let lat = &m["client"]["read"]["latency_us"];
    assert_eq!(n(lat, &["p50"]), total.value_at_quantile(0.50));
    assert_eq!(n(lat, &["p99"]), total.value_at_quantile(0.99));
    assert_eq!(n(lat, &["max"]), total.max());

    // The windows overlap: every shard was measuring during the merged overlap.
    let t = |r: &Value, k: &str| {
        chrono::DateTime::parse_from_rfc3339(r["window"][k].as_str().unwrap()).unwrap()
    };
    let latest_start = shards.iter().map(|r| t(r, "start")).max().unwrap();
    let earliest_end = shards.iter().map(|r| t(r, "end")).min().unwrap();
    assert!(latest_start < earliest_end, "the windows do not overlap");
    let overlap = (earliest_end - latest_start).num_milliseconds() as f64 / 1000.0;
    assert!((num(&m, &["merge", "overlap_s"]) - overlap).abs() < 0.01);
    assert!(overlap > 2.0, "overlap {overlap} s");

    // The third shard started about 2 s late, and the merged result says so by name.
    let info = &m["merge"]["shards"];
    let late_s: Vec<f64> = (0..3).map(|k| num(&info[k], &["late_s"])).collect();
    assert!(late_s[2] > 1.5, "late_s {late_s:?}");
    assert!(late_s[2] > late_s[0] && late_s[2] > late_s[1], "{late_s:?}");
    assert_eq!(info[2]["late"], true);
    let warnings: Vec<&str> = m["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains("started late")
            && w.contains(dirs[2].join("result.json").to_str().unwrap())),
        "{warnings:?}"
    );

    // A merged result is a result: report, compare, regress and history take it.
    let merged_json = merged_dir.join("result.json");
    let report = Dbio::new("report").arg(&merged_json).output();
    assert_exit(&report, 0);
    let first_json = dirs[0].join("result.json");
    assert_exit(
        &Dbio::new("compare")
            .arg(&first_json)
            .arg(&merged_json)
            .output(),
        0,
    );
    let regress = Dbio::new("regress")
        .opt("--baseline", &merged_json)
        .arg(&merged_json)
        .output();
    assert_exit(&regress, 0);
    let store = work.path().join("history.sqlite");
    assert_exit(
        &Dbio::new("history add")
            .arg(&merged_json)
            .store(&store)
            .output(),
        0,
    );
}

/// Rewrites `from/result.json` into `to/result.json` with `shard` set.
fn as_shard(from: &Path, to: &Path, run_id: &str, index: u32, count: u32) -> PathBuf {
    let mut r: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("result.json")).unwrap()).unwrap();
    r["shard"] = serde_json::json!({ "run_id": run_id, "index": index, "count": count });
    std::fs::create_dir_all(to).unwrap();
    let path = to.join("result.json");
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_refuses_other_shapes_other_runs_and_windows_apart() {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    let dsn = pg.dsn();
    let work = tempfile::tempdir().unwrap();
    let (a, b, w) = (
        work.path().join("a"),
        work.path().join("b"),
        work.path().join("w8"),
    );
    // Two runs one after the other, and a third reading 8 blocks per operation.
    assert_exit(&run(&dsn, &a, "1s", &[]), 0);
    assert_exit(&run(&dsn, &b, "1s", &[]), 0);
    assert_exit(&run(&dsn, &w, "1s", &["--work-unit", "8"]), 0);
    let merge = |inputs: &[&Path]| {
        let out = work.path().join("out");
        let o = Dbio::new("merge").args(inputs).out(&out).output();
        (o, out)
    };

    // Different shapes: named, nothing written.
    let (o, out) = merge(&[&a, &w]);
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(e.contains("work_unit 64 vs 8"), "{e}");
    assert!(!out.exists(), "a refused merge makes no result folder");

    // Windows that do not overlap (b ran after a): refused, naming both windows.
    let (o, _) = merge(&[&a, &b]);
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(e.contains("do not overlap"), "{e}");
    assert!(
        e.contains(a.join("result.json").to_str().unwrap())
            && e.contains(b.join("result.json").to_str().unwrap()),
        "{e}"
    );

    // Shards of different runs, and a shard beside a plain run.
    let x = as_shard(&a, &work.path().join("x"), "run-x", 0, 2);
    let y = as_shard(&a, &work.path().join("y"), "run-y", 1, 2);
    let (o, _) = merge(&[&x, &y]);
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("different runs") && e.contains("run id \"run-x\" vs run id \"run-y\""),
        "{e}"
    );
    let (o, _) = merge(&[&x, &a.join("result.json")]);
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("run id \"run-x\" vs no run id"),
        "{}",
        stderr(&o)
    );
    // The same shard twice.
    let z = as_shard(&a, &work.path().join("z"), "run-x", 0, 2);
    let (o, _) = merge(&[&x, &z]);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("given twice"), "{}", stderr(&o));
    // One result alone is not a merge.
    let o = Dbio::new("merge").arg(&a).output();
    assert_exit(&o, 2);
}

// Seen: a result merged with its own copy or a hard link doubled every count (7,064 ops ->
// 14,128, exit 0); a shard whose counts were multiplied by 10 but not its histogram was merged;
// `merge A B --out A --overwrite` replaced input A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_refuses_a_document_twice_a_forged_shard_and_an_input_as_output() {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    let work = tempfile::tempdir().unwrap();
    let a = work.path().join("a");
    assert_exit(&run(&pg.dsn(), &a, "1s", &[]), 0);
    let a_json = a.join("result.json");
    let merge = |args: &[&str]| Dbio::new("merge").args(args).output();
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // The same document twice: a hard link, a copy, a copy with a new label.
    let link = work.path().join("link.json");
    std::fs::hard_link(&a_json, &link).unwrap();
    let copy = work.path().join("copy.json");
    let mut relabelled: Value =
        serde_json::from_str(&std::fs::read_to_string(&a_json).unwrap()).unwrap();
    std::fs::write(&copy, relabelled.to_string()).unwrap();
    relabelled["label"] = "another name".into();
    let renamed = work.path().join("renamed.json");
    std::fs::write(&renamed, relabelled.to_string()).unwrap();
    for twin in [&link, &copy, &renamed] {
        let o = merge(&[
            &s(&a_json),
            &s(twin),
            "--out",
            &s(&work.path().join("never")),
        ]);
        assert_exit(&o, 2);
        assert!(stderr(&o).contains("given twice"), "{}", stderr(&o));
    }
    assert!(!work.path().join("never").exists());

    // Shards 0 and 1 of one run (the same window): they merge; shard 1 with its counts
    // multiplied by 10 but not its histogram is refused by every reader.
    let x = as_shard(&a, &work.path().join("x"), "run-f", 0, 2);
    let y = as_shard(&a, &work.path().join("y"), "run-f", 1, 2);
    let mut forged: Value = serde_json::from_str(&std::fs::read_to_string(&y).unwrap()).unwrap();
    for path in [&["client", "ops"][..], &["client", "read", "count"]] {
        let v = &mut forged[path[0]][path[1]];
        let v = if path.len() == 3 { &mut v[path[2]] } else { v };
        *v = (v.as_u64().unwrap() * 10).into();
    }
    for s in forged["sessions"].as_array_mut().unwrap() {
        s["ops"][0] = (s["ops"][0].as_u64().unwrap() * 10).into();
    }
    let f = work.path().join("forged.json");
    std::fs::write(&f, forged.to_string()).unwrap();
    let o = merge(&[&s(&x), &s(&f), "--out", &s(&work.path().join("never"))]);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("histogram holds"), "{}", stderr(&o));
    // `history add` goes on past a bad file and exits 1 when any was not added.
    let store = work.path().join("h.db");
    for (args, code) in [
        (Dbio::new("report").arg(&f), 2),
        (Dbio::new("compare").arg(&x).arg(&f), 2),
        (Dbio::new("history add").arg(&f).store(&store), 1),
    ] {
        let o = args.output();
        assert_exit(&o, code);
        assert!(
            stderr(&o).contains("the figures were changed"),
            "{args:?}: {}",
            stderr(&o)
        );
    }

    // The input as the output: refused, the input unchanged.
    let before = std::fs::read(&x).unwrap();
    let o = merge(&[
        &s(&x),
        &s(&y),
        "--out",
        &s(x.parent().unwrap()),
        "--overwrite",
    ]);
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("would replace the input"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(&x).unwrap(), before);
    assert_exit(
        &merge(&[&s(&x), &s(&y), "--out", &s(&work.path().join("m"))]),
        0,
    );
}

// `run --shard I/N --start-at T`: three processes run every third of 3 readers, release
// their sessions at one instant, only shard 0 collects; merged, they are one run whose
// operations the server counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_started_at_one_instant_run_their_share_and_merge() {
    let pg = TestCluster::start(16);
    pg.load("2", SCALE);
    let c = pg.client().await;
    let dsn = pg.dsn();
    let work = tempfile::tempdir().unwrap();
    // A shard without the shared run id is refused before anything runs.
    let o = run(&dsn, &work.path().join("x"), "2s", &["--shard", "0/3"]);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("--run-id"), "{}", stderr(&o));
    let o = run(
        &dsn,
        &work.path().join("y"),
        "2s",
        &["--shard", "3/3", "--run-id", "s"],
    );
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("run.shard"), "{}", stderr(&o));
    let o = run(
        &dsn,
        &work.path().join("z"),
        "2s",
        &["--shard", "0/1", "--run-id", "s", "--collector-shard", "1"],
    );
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("shards 0 to 0"), "{}", stderr(&o));

    let start = (chrono::Utc::now() + chrono::TimeDelta::seconds(12))
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|k| work.path().join(format!("shard{k}")))
        .collect();
    let before = idx_scans(&c).await;
    let outputs: Vec<std::process::Output> = std::thread::scope(|s| {
        let handles: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let (dsn, start) = (dsn.as_str(), start.as_str());
                s.spawn(move || {
                    let shard = format!("{k}/3");
                    Dbio::new("run")
                        .dsn(dsn)
                        .schemas(2)
                        .scale(SCALE)
                        .readers(3)
                        .run_time("3s")
                        .out(d)
                        .quiet()
                        .opt("--run-id", "sharded")
                        .opt("--shard", &shard)
                        // The collector where --collector-shard says, not shard 0.
                        .opt("--collector-shard", "2")
                        .opt("--start-at", start)
                        .output()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outputs {
        assert_exit(o, 0);
    }
    let after = idx_scans(&c).await;
    let shards: Vec<Value> = dirs.iter().map(|d| read_result(d)).collect();
    for (k, r) in shards.iter().enumerate() {
        assert_eq!(r["shard"]["index"], k as u64, "{}", r["shard"]);
        assert_eq!(r["shard"]["count"], 3);
        assert_eq!(r["shard"]["run_id"], "sharded");
        let sessions = r["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 1, "every third of 3 readers");
        assert_eq!(sessions[0]["spec"]["index"], k as u64);
        assert_eq!(
            r["db"].is_null(),
            k != 2,
            "only shard 2 (--collector-shard) collects: {}",
            r["db"]
        );
        if k != 2 {
            assert!(
                r["warnings"].to_string().contains("collected by shard 2"),
                "{}",
                r["warnings"]
            );
        }
        let w = r["warnings"].to_string();
        assert!(
            !w.contains("after run.start_at"),
            "shard {k} started late: {w}"
        );
    }
    // Released at one instant: the windows start within a fraction of a second.
    let starts: Vec<chrono::DateTime<chrono::Utc>> = shards
        .iter()
        .map(|r| r["window"]["start"].as_str().unwrap().parse().unwrap())
        .collect();
    let spread = (*starts.iter().max().unwrap() - *starts.iter().min().unwrap()).num_milliseconds();
    assert!(
        spread < 500,
        "the shards' windows started {spread} ms apart"
    );
    let requested: chrono::DateTime<chrono::Utc> = start.parse().unwrap();
    assert!(
        (starts[0] - requested).num_milliseconds().abs() < 1000,
        "released at {} for {requested}",
        starts[0]
    );

    let merged_dir = work.path().join("merged");
    let o = Dbio::new("merge").args(&dirs).out(&merged_dir).output();
    assert_exit(&o, 0);
    let m = read_result(&merged_dir);
    let reads = n(&m, &["client", "read", "count"]);
    let excluded = n(&m, &["window", "ops_past_window"]);
    let server = after - before;
    assert!(reads > 100, "{reads} reads");
    assert!(
        server >= reads && server <= reads + excluded + (reads / 100).max(1),
        "idx_scan delta {server} vs {reads} merged reads ({excluded} excluded at the windows' ends)"
    );
    assert!(
        !m["db"].is_null(),
        "the collector's figures come from shard 2"
    );
    assert_eq!(m["merge"]["collector_from"], 2);
    assert_eq!(m["config"]["run"]["readers"], 3);
}

/// The sum of a wait table's "% of DB time" column.
fn pct_sum(rows: &Value) -> f64 {
    rows.as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["pct_db_time"].as_f64())
        .sum()
}

// Seen on three merged shards of a direct-I/O server: waits copied from shard 0 (2 sessions
// its own, the others' 4 "other sessions"): IO:DataFileRead 299.3% of DB time; "the page
// cache served the reads" (ratio 0.33: one shard's backends over the whole server's reads)
// beside a device ratio of 1.00; shard 0's "DB time exceeds what 2 sessions can spend"
// carried into the merge; and the collecting shard began its window 45-184 ms after the
// others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 binaries: scripts/test.sh installs them"
)]
async fn three_shards_of_a_direct_io_server_merge_their_waits_and_reads() {
    // debug_io_direct=data (16+) needs a file system with O_DIRECT: the test folder is on
    // the work disk, not a tmpfs.
    let pg = TestCluster::start_pg17(16, &[("debug_io_direct", "data")]);
    pg.load("2", "2000blocks");
    let dsn = pg.dsn();
    let work = tempfile::tempdir().unwrap();
    let start = (chrono::Utc::now() + chrono::TimeDelta::seconds(10))
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    let dirs: Vec<PathBuf> = (0..3)
        .map(|k| work.path().join(format!("shard{k}")))
        .collect();
    let outputs: Vec<std::process::Output> = std::thread::scope(|s| {
        let handles: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let (dsn, start) = (dsn.as_str(), start.as_str());
                s.spawn(move || {
                    let shard = format!("{k}/3");
                    Dbio::new("run")
                        .dsn(dsn)
                        .schemas(2)
                        .scale("2000blocks")
                        .readers(6)
                        .run_time("3s")
                        .quiet()
                        .out(d)
                        .opt("--run-id", "direct")
                        .opt("--shard", &shard)
                        .opt("--start-at", start)
                        .output()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outputs {
        assert_exit(o, 0);
    }
    let shards: Vec<Value> = dirs.iter().map(|d| read_result(d)).collect();
    // Each shard sampled its own two sessions and read its own backends.
    for (k, r) in shards.iter().enumerate() {
        assert!(r["waits"].is_object(), "shard {k} sampled its sessions");
        assert_eq!(
            r["host"]["backends_read"].as_u64().map(|n| n >= 2),
            Some(true),
            "{}",
            r["host"]
        );
        let ratio = num(&r["host"], &["physical_read_ratio"]);
        assert!(ratio > 0.9, "shard {k}: direct I/O, yet a ratio of {ratio}");
        let w = r["warnings"].to_string();
        assert!(!w.contains("page cache"), "shard {k}: {w}");
        assert!(!w.contains("exceeds what"), "shard {k}: {w}");
    }
    // The collecting shard's window starts with the others': its "before" snapshot was
    // taken ahead of the instant.
    let starts: Vec<chrono::DateTime<chrono::Utc>> = shards
        .iter()
        .map(|r| r["window"]["start"].as_str().unwrap().parse().unwrap())
        .collect();
    let others = starts[1].max(starts[2]);
    let late_ms = (starts[0] - others).num_milliseconds();
    assert!(
        late_ms < 40,
        "the collecting shard opened its window {late_ms} ms after the others ({starts:?})"
    );

    let merged_dir = work.path().join("merged");
    assert_exit(&Dbio::new("merge").args(&dirs).out(&merged_dir).output(), 0);
    let m = read_result(&merged_dir);
    let waits = &m["waits"];
    let fg = pct_sum(&waits["foreground"]);
    assert!(
        fg > 50.0 && fg <= 110.0,
        "the merged foreground waits are {fg}% of DB time: {waits}"
    );
    assert!(
        waits["db_time_source"]
            .as_str()
            .unwrap()
            .contains("summed over 3 shards"),
        "{}",
        waits["db_time_source"]
    );
    let read = waits["foreground"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["event"] == "IO:DataFileRead")
        .expect("a DataFileRead row");
    assert_eq!(read["measured"], true, "{read}");
    let ratio = num(&m["host"], &["physical_read_ratio"]);
    assert!(ratio > 0.9, "merged ratio {ratio}: {}", m["host"]);
    assert!(num(&m["host"], &["backends_read"]) >= 6.0, "{}", m["host"]);
    let w = m["warnings"].to_string();
    assert!(!w.contains("page cache"), "{w}");
    assert!(!w.contains("exceeds what"), "{w}");
    let report = std::fs::read_to_string(merged_dir.join("report.txt")).unwrap();
    assert!(!report.contains("page cache served"), "{report}");
}
