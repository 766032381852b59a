//! compare and regress read the status and the shape of what they compare, and refuse result
//! files that no real run produces. The runs are real; the broken files are real results with
//! one field changed, as a damaged or hand-edited file would be.

use std::path::{Path, PathBuf};

use dbio_tests::{Dbio, TestCluster, assert_exit, stderr, stdout};
use serde_json::Value;

fn run(dsn: &str, dir: &Path, name: &str, work_unit: &str) -> PathBuf {
    let out = dir.join(name);
    let o = Dbio::new("run")
        .dsn(dsn)
        .schemas(1)
        .scale("2000blocks")
        .readers(1)
        .run_time("1s")
        .opt("--work-unit", work_unit)
        .opt("--label", name)
        .quiet()
        .out(&out)
        .output();
    assert_exit(&o, 0);
    out.join("result.json")
}

/// A copy of `src` with `edit` applied to its JSON, written as `dir/name.json`.
fn edited(src: &Path, dir: &Path, name: &str, edit: impl Fn(&mut Value)) -> PathBuf {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    edit(&mut v);
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    path
}

#[test]
fn compare_and_regress_read_status_shape_and_sanity() {
    let pg = TestCluster::start(16);
    pg.load("1", "2000blocks");
    let dsn = pg.dsn();
    let dir = tempfile::tempdir().unwrap();
    let base = run(&dsn, dir.path(), "wu64", "64");
    let one = run(&dsn, dir.path(), "wu1", "1");

    // Other work_unit: compare says so before any figure; regress refuses it (exit 2) unless
    // the difference is accepted.
    let cmp = Dbio::new("compare").arg(&base).arg(&one).output();
    assert_exit(&cmp, 0);
    let text = stdout(&cmp);
    let nc = text
        .find("NOT COMPARABLE: input 2")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains("work_unit 64 vs 1"), "{text}");
    assert!(
        nc < text.find("\nstep ").unwrap(),
        "differences come first:\n{text}"
    );
    let refused = Dbio::new("regress")
        .opt("--baseline", &base)
        .arg(&one)
        .output();
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("--accept-difference work_unit"),
        "{}",
        stderr(&refused)
    );
    let accepted = Dbio::new("regress")
        .opt("--baseline", &base)
        .arg(&one)
        .opt("--accept-difference", "work_unit")
        .opt("--max-iops-drop", "off")
        .opt("--max-latency-rise", "off")
        .output();
    assert_exit(&accepted, 0);
    let typo = Dbio::new("regress")
        .opt("--baseline", &base)
        .arg(&one)
        .opt("--accept-difference", "workunit")
        .output();
    assert_exit(&typo, 2);

    // An interrupted or failed current run never passes, even with every gate off; neither
    // is ever a baseline.
    for status in ["interrupted", "failed"] {
        let bad = edited(&base, dir.path(), status, |v| v["status"] = status.into());
        let o = Dbio::new("regress")
            .opt("--baseline", &base)
            .arg(&bad)
            .opt("--max-iops-drop", "off")
            .opt("--max-latency-rise", "off")
            .output();
        assert_exit(&o, 1);
        assert!(
            stdout(&o).contains(&format!("the current run is {status}")),
            "{}",
            stdout(&o)
        );
        let o = Dbio::new("regress")
            .opt("--baseline", &bad)
            .arg(&base)
            .output();
        assert_exit(&o, 2);
        assert!(stderr(&o).contains("never a baseline"), "{}", stderr(&o));
        let o = Dbio::new("compare").arg(&base).arg(&bad).output();
        assert_exit(&o, 0);
        assert!(
            stdout(&o).contains(&format!("[status {status}")),
            "{}",
            stdout(&o)
        );
    }

    // Files no real run produces are refused by report, compare and regress alike.
    let broken = [
        edited(&base, dir.path(), "format0", |v| v["format"] = 0.into()),
        edited(&base, dir.path(), "negative", |v| {
            v["client"]["ops_per_s"] = (-5.0).into()
        }),
        edited(&base, dir.path(), "nowindow", |v| {
            v["window"]["measured_s"] = 0.0.into()
        }),
        edited(&base, dir.path(), "badhist", |v| {
            v["client"]["read"]["histogram"] = "bm90IGEgaGlzdG9ncmFt".into()
        }),
    ];
    for b in &broken {
        for args in [
            Dbio::new("report").arg(b),
            Dbio::new("compare").arg(&base).arg(b),
            Dbio::new("regress").opt("--baseline", &base).arg(b),
        ] {
            let o = args.output();
            assert_exit(&o, 2);
            assert!(
                stderr(&o).contains(b.to_str().unwrap()),
                "the error names the file: {}",
                stderr(&o)
            );
        }
    }

    // An escape sequence in a result's label or warnings arrives escaped.
    let esc = edited(&base, dir.path(), "escape", |v| {
        v["label"] = "evil\u{1b}]0;owned\u{7}label".into();
        v["warnings"] = serde_json::json!(["w\u{1b}[2J"]);
    });
    for args in [
        Dbio::new("report").arg(&esc),
        Dbio::new("compare").arg(&base).arg(&esc),
    ] {
        let o = args.output();
        assert_exit(&o, 0);
        let out = stdout(&o);
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("evil\\u{1b}]0;owned"), "{out}");
    }
    // And dbio refuses to write one in the first place.
    let o = pg
        .dbio("run")
        .run_time("1s")
        .opt("--label", "a\u{1b}[31m")
        .quiet()
        .output();
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("run.label"), "{}", stderr(&o));

    // A window too short to measure is refused before anything runs (a 1 ms window once
    // reported "16000 read requests/s" from one read).
    let o = pg.dbio("run").run_time("1ms").quiet().output();
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("too short to measure"),
        "{}",
        stderr(&o)
    );
}
