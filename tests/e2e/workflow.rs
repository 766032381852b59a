//! The workflow a DBA follows, as the README writes it: flags that win over the file, the
//! effective config with its sources, quiet runs, JSON on stdout, compare naming the runs,
//! charts that read, `dbio report` on ramps and folders, shell completions and the man page.

use std::process::Command;

use dbio_tests::{Dbio, TestCluster, assert_exit, stderr, stdout};
use serde_json::Value;

fn json_stdout(o: &std::process::Output, what: &str) -> Value {
    serde_json::from_str(&stdout(o))
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}):\n{}", stdout(o)))
}

// Seen: `dbio ramp -c my.yaml --run-time 2s` ran 5 s steps because the file set
// `ramp.run_time: 5s`; the flag must win, in run and in ramp alike.
#[test]
fn a_flag_beats_the_file_for_run_time_in_run_and_ramp() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("my.yaml");
    std::fs::write(
        &cfg,
        "data:\n  schemas: 1\n  scale: 1000blocks\nrun:\n  run_time: 6s\n  readers: 1\n  interval: 500ms\nramp:\n  run_time: 6s\n  readers: [1]\n",
    )
    .unwrap();

    // run: the document on stdout, 1 s measured instead of the file's 6 s.
    let run_dir = work.path().join("run");
    let o = pg
        .dbio("run")
        .config(&cfg)
        .run_time("1s")
        .opt("--format", "json")
        .out(&run_dir)
        .output();
    assert_exit(&o, 0);
    let r = json_stdout(&o, "run --format json");
    let measured = r["window"]["measured_s"].as_f64().unwrap();
    assert!(measured < 3.0, "the flag's 1 s window, not 6 s: {measured}");
    assert_eq!(r["config"]["run"]["run_time"], "1s");
    assert!(
        run_dir.join("result.json").is_file(),
        "the file is still written"
    );

    // ramp: every step's window is the flag's, though the file sets ramp.run_time.
    let ramp_dir = work.path().join("ramp");
    let o = pg
        .dbio("ramp")
        .config(&cfg)
        .run_time("1s")
        .readers("1,2")
        .opt("--format", "json")
        .out(&ramp_dir)
        .output();
    assert_exit(&o, 0);
    let ramp = json_stdout(&o, "ramp --format json");
    assert_eq!(ramp["kind"], "ramp");
    let steps = ramp["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for st in steps {
        let e = st["elapsed_s"].as_f64().unwrap();
        assert!(e < 3.0, "step {}: {e} s, the flag says 1 s", st["step"]);
    }
    assert!(ramp_dir.join("ramp.json").is_file());

    // dbio config shows where each value comes from, for the same command line.
    let o = pg.dbio("config ramp").config(&cfg).run_time("1s").output();
    assert_exit(&o, 0);
    let text = stdout(&o);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} line:\n{text}"))
            .to_string()
    };
    assert!(line("ramp.run_time").contains("1s"), "{text}");
    assert!(line("ramp.run_time").ends_with("flag --run-time"), "{text}");
    assert!(line("run.run_time").ends_with("flag --run-time"), "{text}");
    assert!(line("run.interval").ends_with("file"), "{text}");
    assert!(line("run.work_unit").ends_with("default"), "{text}");
    assert!(line("target.dsn").contains("flag --dsn"), "{text}");
    // Without a command line: the file and the defaults.
    let o = Dbio::new("config").config(&cfg).output();
    assert_exit(&o, 0);
    assert!(
        stdout(&o)
            .lines()
            .any(|l| l.starts_with("ramp.run_time") && l.ends_with("file")),
        "{}",
        stdout(&o)
    );

    // -q: nothing on stdout or stderr when all goes well (the result is in its folder).
    let quiet_dir = work.path().join("quiet");
    let o = pg
        .dbio("run")
        .schemas(1)
        .scale("1000blocks")
        .run_time("1s")
        .opt("--warmup", "200ms")
        .quiet()
        .out(&quiet_dir)
        .output();
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "", "-q prints nothing on stdout");
    assert_eq!(stderr(&o), "", "-q prints nothing on stderr");
    assert!(quiet_dir.join("result.json").is_file());
}

/// (unit of the panel's y axis, scale, [(series, unit, circles' x in drawing order, labels)])
type Panel = (String, String, Vec<(String, String, Vec<f64>, usize)>);

fn panels(svg: &str) -> Vec<Panel> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("panel"))
        .map(|p| {
            let titles: Vec<&str> = p
                .descendants()
                .filter(|t| t.attribute("class") == Some("axis-title"))
                .filter_map(|t| t.attribute("data-axis"))
                .collect();
            assert_eq!(titles, ["x", "y"], "one title per axis in each panel");
            let series = p
                .descendants()
                .filter(|g| g.attribute("class") == Some("series"))
                .map(|g| {
                    let xs = g
                        .descendants()
                        .filter(|c| c.has_tag_name("circle"))
                        .map(|c| c.attribute("cx").unwrap().parse::<f64>().unwrap())
                        .collect();
                    let labels = g
                        .descendants()
                        .filter(|t| t.attribute("class") == Some("point-label"))
                        .count();
                    (
                        g.attribute("data-series").unwrap_or_default().to_string(),
                        g.attribute("data-unit").unwrap_or_default().to_string(),
                        xs,
                        labels,
                    )
                })
                .collect();
            (
                p.attribute("data-y-unit").unwrap_or_default().to_string(),
                p.attribute("data-y-scale").unwrap_or_default().to_string(),
                series,
            )
        })
        .collect()
}

// Seen: compare printed "input 1 / input 2 / Δ% 2" and dropped the inputs' warnings;
// iops.svg put DB IOPS, client ops/s and device IOPS on one linear axis, unlabelled, in
// IOPS order.
#[test]
fn compare_names_the_runs_and_carries_their_warnings_and_the_charts_read() {
    let pg = TestCluster::start(16);
    // 4000 blocks (31.2 MiB) is above shared_buffers, so reads miss it, but below 4 x
    // shared_buffers (64 MiB): every step warns.
    pg.load("1", "4000blocks");
    let work = tempfile::tempdir().unwrap();
    let ramp = |label: &str| {
        let dir = work.path().join(label);
        let o = pg
            .dbio("ramp")
            .schemas(1)
            .scale("4000blocks")
            // Not in x order: the lines must follow the ramp.
            .readers("2,1")
            .opt("--repeat", "2")
            .run_time("1s")
            .opt("--interval", "500ms")
            .opt("--label", label)
            .quiet()
            .out(&dir)
            .output();
        assert_exit(&o, 0);
        dir
    };
    let fast = ramp("fast");
    let slow = ramp("slow");

    let o = Dbio::new("compare").arg(&fast).arg(&slow).output();
    assert_exit(&o, 0);
    let text = stdout(&o);
    assert!(
        text.contains("Δ% slow") && !text.contains("input 2 ") && !text.contains("Δ% 2"),
        "columns are named by the runs' labels:\n{text}"
    );
    let header = text
        .lines()
        .find(|l| l.starts_with("metric"))
        .expect("a table header");
    assert!(
        header.contains("fast") && header.contains("slow"),
        "{header}"
    );
    assert!(
        text.contains("WARNING (fast): every step: the data set")
            && text.contains("WARNING (slow): every step: the data set")
            && text.contains("4 x shared_buffers = 64.0 MiB"),
        "the inputs' warnings, once each:\n{text}"
    );
    let verdict = text.find("\nverdict\n").expect("a verdict section");
    assert!(verdict < text.find("\nstep ").unwrap(), "{text}");
    for metric in ["client ops/s", "client read p99 µs", "DB read IOPS"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{metric}: slow "))),
            "a one-line verdict for {metric}:\n{text}"
        );
    }
    // p99 is tested over the repeats (2 per step), not left untested.
    let p99 = text
        .lines()
        .find(|l| l.trim_start().starts_with("client read p99 µs: slow "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(!p99.contains("not tested"), "{p99}");

    // JSON on stdout: compare and regress.
    let o = Dbio::new("compare")
        .arg(&fast)
        .arg(&slow)
        .opt("--format", "json")
        .output();
    assert_exit(&o, 0);
    let c = json_stdout(&o, "compare --format json");
    assert_eq!(c["labels"], serde_json::json!(["fast", "slow"]));
    assert!(!c["verdicts"].as_array().unwrap().is_empty());
    assert!(!c["warnings"][1].as_array().unwrap().is_empty());
    let o = Dbio::new("regress")
        .opt("--baseline", fast.join("ramp.json"))
        .arg(fast.join("ramp.json"))
        .opt("--format", "json")
        .output();
    assert_exit(&o, 0);
    let g = json_stdout(&o, "regress --format json");
    assert_eq!(g["regressed"], false);
    assert!(g["checks"].as_array().unwrap().len() >= 8, "{g}");

    // The charts: one unit per panel (a log axis where a panel's values span decades), a
    // label per point, lines in ramp order (2 readers, then 1: x decreasing).
    let svg = std::fs::read_to_string(fast.join("iops.svg")).unwrap();
    let iops = panels(&svg);
    // DB reads (100k/s and more here), device reads (near 0: the page cache serves them) and
    // client operations (a few thousand/s) were one linear axis: now three panels.
    assert_eq!(
        iops.len(),
        3,
        "DB reads, device reads and client operations apart"
    );
    assert_eq!(
        iops.iter().map(|p| p.2.len()).collect::<Vec<_>>(),
        [1, 1, 1],
        "one series per panel"
    );
    assert_ne!(
        iops[0].0, iops[2].0,
        "I/O requests and operations are different units"
    );
    for file in ["iops.svg", "latency.svg", "latency-vs-iops.svg"] {
        let svg = std::fs::read_to_string(fast.join(file)).unwrap();
        assert!(
            svg.contains("tablespace pg_default"),
            "{file} names the storage"
        );
        assert!(svg.contains("target "), "{file} names the target");
        for (unit, scale, series) in panels(&svg) {
            assert!(!unit.is_empty() && !series.is_empty(), "{file}");
            assert!(scale == "linear" || scale == "log", "{file}: {scale}");
            for (name, series_unit, xs, labels) in series {
                assert_eq!(series_unit, unit, "{file}: {name} on an axis of its unit");
                // A step whose reads all hit shared_buffers has no DB read latency.
                assert!(
                    !xs.is_empty() && xs.len() <= 2,
                    "{file}: {name}: a point per step"
                );
                assert_eq!(labels, xs.len(), "{file}: {name}: a label per point");
                if file != "latency-vs-iops.svg" && xs.len() == 2 {
                    assert!(xs[0] > xs[1], "{file}: {name} drawn in ramp order: {xs:?}");
                }
            }
        }
    }
    let svg = std::fs::read_to_string(fast.join("iops.svg")).unwrap();
    assert!(svg.contains(r#"class="error-bar""#) || !svg.contains("± "));

    // The report page: human headers, runs numbered, each warning once.
    let html = std::fs::read_to_string(fast.join("report.html")).unwrap();
    assert!(!html.contains("db_read_iops_sd"), "no raw CSV names");
    assert!(
        html.contains("DB reads/s") && html.contains("run 2: "),
        "{html}"
    );
    assert_eq!(html.matches("4 x shared_buffers").count(), 1, "{html}");

    // dbio report reads a ramp.json and a folder.
    let o = Dbio::new("report").arg(fast.join("ramp.json")).output();
    assert_exit(&o, 0);
    assert!(stdout(&o).contains("dbio ramp \"fast\""), "{}", stdout(&o));
    let o = Dbio::new("report")
        .arg(&fast)
        .opt("--format", "csv")
        .output();
    assert_exit(&o, 0);
    assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
    let step_dir = std::fs::read_dir(&fast)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("result.json").is_file())
        .expect("a step folder");
    let o = Dbio::new("report")
        .arg(&step_dir)
        .opt("--format", "json")
        .output();
    assert_exit(&o, 0);
    assert_eq!(json_stdout(&o, "report --format json")["format"], 1);
}

#[test]
fn completions_and_the_man_page_are_produced() {
    for shell in ["bash", "zsh", "fish"] {
        let o = Dbio::new("completions").arg(shell).output();
        assert_exit(&o, 0);
        let text = stdout(&o);
        assert!(
            text.lines().count() > 100
                && ["ramp", "run-time", "compare", "format"]
                    .iter()
                    .all(|w| text.contains(w)),
            "{shell}: {} lines",
            text.lines().count()
        );
        if shell == "bash" {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("dbio.bash");
            std::fs::write(&file, &text).unwrap();
            let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
            assert!(
                check.status.success(),
                "bash -n: {}",
                String::from_utf8_lossy(&check.stderr)
            );
        }
    }
    let o = Dbio::new("man").output();
    assert_exit(&o, 0);
    let page = stdout(&o);
    assert!(
        page.contains(".TH dbio 1") && page.contains("ramp"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    let o = Dbio::new("man").out(dir.path()).output();
    assert_exit(&o, 0);
    for f in ["dbio.1", "dbio-ramp.1", "dbio-compare.1"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    // Each command's help lists its own options only.
    let check = stdout(&Dbio::new("check").arg("--help").output());
    let run = stdout(&Dbio::new("run").arg("--help").output());
    for setup_only in ["--parallel", "--data-seed", "--force"] {
        assert!(!check.contains(setup_only), "check --help: {setup_only}");
        assert!(!run.contains(setup_only), "run --help: {setup_only}");
    }
    assert!(stdout(&Dbio::new("setup").arg("--help").output()).contains("--parallel"));
}
