//! Ramps, compare, regress and the nightly script against real scratch clusters.

use std::path::Path;
use std::process::Command;

use dbio_tests::{Dbio, TestCluster, assert_exit, assert_valid_result, dbio_bin, num, stdout};
use serde_json::Value;

fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    (
        header,
        lines
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect(),
    )
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Circles of each series in an SVG, after checking that it parses as XML.
fn points_per_series(svg: &str) -> Vec<(String, usize)> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("series"))
        .map(|g| {
            (
                g.attribute("data-series").unwrap_or_default().to_string(),
                g.descendants().filter(|c| c.has_tag_name("circle")).count(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_step_ramp_writes_its_files_and_compare_and_regress_read_them() {
    let pg = TestCluster::start(16);
    assert_exit(
        &pg.dbio("setup")
            .schemas(2)
            .scale("2000blocks")
            .quiet()
            .output(),
        0,
    );
    let out = tempfile::tempdir().unwrap();
    let ramp_dir = out.path().join("ramp");
    let o = pg
        .dbio("ramp")
        .schemas(2)
        .scale("2000blocks")
        .readers("1,2,4")
        .writers(0)
        .run_time("3s")
        .opt("--interval", "500ms")
        .opt("--label", "r3")
        .quiet()
        .out(&ramp_dir)
        .output();
    assert_exit(&o, 0);
    assert!(stdout(&o).is_empty(), "-q prints nothing: {}", stdout(&o));
    assert!(ramp_dir.join("report.html").is_file());

    // Three step results, each valid, and ramp.csv rows equal to each step's own figures.
    let ramp = read_json(&ramp_dir.join("ramp.json"));
    assert_eq!(ramp["kind"], "ramp");
    let steps = ramp["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let (header, rows) = csv_rows(&std::fs::read_to_string(ramp_dir.join("ramp.csv")).unwrap());
    assert_eq!(rows.len(), 3);
    let col =
        |row: &Vec<String>, name: &str| row[header.iter().position(|h| h == name).unwrap()].clone();
    for (i, (row, readers)) in rows.iter().zip([1, 2, 4]).enumerate() {
        let rel = steps[i]["results"][0].as_str().unwrap();
        let result = read_json(&ramp_dir.join(rel));
        assert_valid_result(&result);
        assert_eq!(col(row, "readers"), readers.to_string());
        assert_eq!(result["config"]["run"]["readers"], readers);
        assert_eq!(
            col(row, "db_read_iops"),
            format!("{:.1}", num(&result, &["db", "read_iops"]))
        );
        assert_eq!(
            col(row, "client_ops_per_s"),
            format!("{:.1}", num(&result, &["client", "ops_per_s"]))
        );
        assert_eq!(
            col(row, "client_read_p99_us"),
            format!(
                "{:.0}",
                num(&result, &["client", "read", "latency_us", "p99"])
            )
        );
        assert_eq!(
            col(row, "elapsed_s"),
            format!("{:.3}", num(&result, &["window", "measured_s"]))
        );
        assert_eq!(col(row, "status"), "ok");
    }
    let txt = std::fs::read_to_string(ramp_dir.join("ramp.txt")).unwrap();
    assert_eq!(
        txt.lines()
            .filter(|l| l.starts_with("r") && l.contains("-w0 "))
            .count(),
        3,
        "{txt}"
    );

    // Charts parse as XML, with one point per step in every series; report.html holds them.
    let html = std::fs::read_to_string(ramp_dir.join("report.html")).unwrap();
    for file in ["iops.svg", "latency.svg", "latency-vs-iops.svg"] {
        let svg = std::fs::read_to_string(ramp_dir.join(file)).unwrap();
        let series = points_per_series(&svg);
        assert!(!series.is_empty(), "{file} has no series");
        for (name, points) in series {
            assert_eq!(points, 3, "{file}: series {name}");
        }
        assert!(html.contains(svg.trim()), "report.html lacks {file}");
    }
    assert!(
        !html.contains("<script") && !html.contains("<link"),
        "report.html must be self-contained"
    );

    // compare: a result with itself finds nothing; 1 reader against 4 finds the throughput.
    // Each session thinks 5 ms before every operation, so sessions, not this 2-core host's
    // CPU, bound the throughput and 4 readers really do more than 1.
    let cfg = out.path().join("think.yaml");
    std::fs::write(
        &cfg,
        "data:\n  schemas: 2\n  scale: 2000blocks\nrun:\n  work_unit: 8\n  run_time: 3s\n  interval: 500ms\n  \
         think_time:\n    frequency: 1\n    min: 5ms\n    max: 5ms\n",
    )
    .unwrap();
    let run = |readers: &str, name: &str| {
        let dir = out.path().join(name);
        let o = pg
            .dbio("run")
            .config(&cfg)
            .readers(readers)
            .quiet()
            .out(&dir)
            .output();
        assert_exit(&o, 0);
        dir.join("result.json")
    };
    let one = run("1", "one");
    let four = run("4", "four");
    let same = Dbio::new("compare")
        .arg(&one)
        .arg(&one)
        .opt("--format", "csv")
        .output();
    assert_exit(&same, 0);
    let (h, rows) = csv_rows(&stdout(&same));
    let verdict = h.iter().position(|c| c == "verdict_2").unwrap();
    assert!(
        rows.iter().all(|r| r[verdict] != "significant"),
        "{}",
        stdout(&same)
    );
    let diff = Dbio::new("compare")
        .arg(&one)
        .arg(&four)
        .out(out.path().join("cmp"))
        .output();
    assert_exit(&diff, 0);
    let text = stdout(&diff);
    assert!(text.contains("Welch"), "the test is named: {text}");
    // The effect, not the p-value: with 5 ms of think time 4 readers do about 4 times the work
    // of 1 whatever else runs on the host, while a p-value over a few 500 ms intervals can sit
    // near 0.05 on a busy machine (seen: p = 0.064). The test's arithmetic is unit-tested in
    // significance.rs on fixed data.
    let csv = Dbio::new("compare")
        .arg(&one)
        .arg(&four)
        .opt("--format", "csv")
        .output();
    assert_exit(&csv, 0);
    let (h, rows) = csv_rows(&stdout(&csv));
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    let ops = rows
        .iter()
        .find(|r| r[col("metric")] == "client ops/s")
        .expect("a client ops/s row");
    let delta: f64 = ops[col("delta_pct_2")].parse().expect("a % change");
    assert!(delta > 100.0, "4 readers vs 1: {delta}%\n{text}");
    let p: f64 = ops[col("p_value_2")].parse().expect("a p-value");
    assert!((0.0..=1.0).contains(&p), "{p}");
    for f in ["compare.txt", "compare.csv", "compare.html"] {
        assert!(out.path().join("cmp").join(f).is_file(), "{f}");
    }
    // A ramp against itself matches every step.
    let self_cmp = Dbio::new("compare")
        .arg(&ramp_dir)
        .arg(ramp_dir.join("ramp.json"))
        .output();
    assert_exit(&self_cmp, 0);
    for step in ["step r1-w0", "step r2-w0", "step r4-w0"] {
        assert!(stdout(&self_cmp).contains(step), "{}", stdout(&self_cmp));
    }

    // regress: 0 against itself, 1 against a baseline it falls short of; JUnit well formed.
    let junit = out.path().join("junit.xml");
    let ramp_json = ramp_dir.join("ramp.json");
    let ok = Dbio::new("regress")
        .opt("--baseline", &ramp_json)
        .arg(&ramp_json)
        .opt("--junit", &junit)
        .output();
    assert_exit(&ok, 0);
    assert!(stdout(&ok).contains("no regression"), "{}", stdout(&ok));
    let worse = Dbio::new("regress")
        .opt("--baseline", &four)
        .arg(&one)
        .opt("--junit", &junit)
        .output();
    assert_exit(&worse, 1);
    assert!(stdout(&worse).contains("REGRESSION"), "{}", stdout(&worse));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("JUnit XML parses");
    let suite = doc
        .descendants()
        .find(|n| n.has_tag_name("testsuite"))
        .unwrap();
    let cases = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .count();
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .count();
    assert_eq!(suite.attribute("tests").unwrap(), cases.to_string());
    assert_eq!(suite.attribute("failures").unwrap(), failures.to_string());
    assert!(failures >= 1);
}

#[test]
fn nightly_runs_end_to_end_in_scratch_mode() {
    let work = tempfile::Builder::new()
        .prefix("dbio-nightly-")
        .tempdir()
        .unwrap();
    // The scratch server runs as `postgres` when we are root: the folder must be reachable.
    let _ = Command::new("chmod").arg("755").arg(work.path()).status();
    let config = work.path().join("nightly.yaml");
    // The latency gate is off: this test is about the nightly's plumbing (the store, the first
    // night as the series' baseline, the second night's check and its exit code, JUnit), and a 2 s step's client p99 moved 25-fold between two runs on
    // a busy host (154 µs -> 3,971 µs). Thresholds themselves are unit-tested in regress.rs.
    std::fs::write(
        &config,
        "data:\n  schemas: 1\n  scale: 1000blocks\nrun:\n  run_time: 2s\n  label: nightly-test\nramp:\n  readers: [1, 2]\n  writers: [0]\n\
         regress:\n  max_iops_drop_pct: 95\n  max_latency_rise_pct: off\ncontainer:\n  shared_buffers: 16MB\n",
    )
    .unwrap();
    let results = work.path().join("results");
    let scratch = work.path().join("pg");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let nightly = |n: u32| {
        let o = Command::new("bash")
            .arg(repo.join("scripts/nightly.sh"))
            .env("DBIO_BIN", dbio_bin())
            .env("DBIO_NIGHTLY_CONFIG", &config)
            .env("DBIO_RESULTS", &results)
            .env("DBIO_NIGHTLY_MODE", "scratch")
            .env("DBIO_NIGHTLY_SCRATCH", &scratch)
            .env_remove("DBIO_DSN")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "nightly run {n}\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let first = nightly(1);
    assert!(first.contains("history check exit 0"), "{first}");
    assert!(
        results.join("history.sqlite").is_file(),
        "the night is recorded"
    );
    let second = nightly(2);
    assert!(second.contains("history check exit 0"), "{second}");
    let runs: Vec<_> = std::fs::read_dir(&results)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(runs.len(), 2, "both runs are kept");
    assert!(
        runs.iter().all(|r| r.path().join("junit.xml").is_file()),
        "every night writes junit.xml"
    );
    // Both nights are in the store, one series; before 8 nights regress decides and says so.
    let list = Dbio::new("history list")
        .store(results.join("history.sqlite"))
        .output();
    assert_exit(&list, 0);
    // Each night also recorded its platform canary (a calibration of the scratch folder's
    // device), the platform series beside the database's.
    let text = stdout(&list);
    assert!(text.contains("4 run(s)"), "{text}");
    assert_eq!(text.matches("platform [").count(), 2, "{text}");
    assert_eq!(text.matches("nightly-test [").count(), 2, "{text}");
    for night in &runs {
        assert!(
            night.path().join("canary/calibrate.json").is_file(),
            "the canary's files are in the night's folder"
        );
    }
    assert!(
        !scratch.join("dbio-canary.dat").exists(),
        "the canary's file is removed"
    );
    // The ramp ran with --quiet; its warnings are in the night's log all the same.
    assert!(second.contains("nightly: warning: "), "{second}");
    let junit = std::fs::read_to_string(runs[0].path().join("junit.xml")).unwrap();
    assert!(junit.contains("dbio history check"), "{junit}");
    // The scratch server is stopped at the end.
    let status = Dbio::new("scratch status")
        .opt("--dir", &scratch)
        .arg("--dsn-only")
        .output();
    assert_exit(&status, 1);
}
