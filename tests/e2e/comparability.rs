//! compare and regress read the status and the shape of what they compare, and refuse result
//! files that no real run produces. The runs are real; the broken files are real results with
//! one field changed, as a damaged or hand-edited file would be.

use std::path::{Path, PathBuf};

use dbio_tests::{TestCluster, assert_exit, dbio, stderr, stdout};
use serde_json::Value;

fn run(dsn: &str, dir: &Path, name: &str, work_unit: &str) -> PathBuf {
    let out = dir.join(name);
    let o = dbio(&[
        "run",
        "--dsn",
        dsn,
        "--schemas",
        "1",
        "--scale",
        "2000blocks",
        "--readers",
        "1",
        "--run-time",
        "1s",
        "--work-unit",
        work_unit,
        "--label",
        name,
        "-q",
        "--out",
        out.to_str().unwrap(),
    ]);
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
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();

    // Other work_unit: compare says so before any figure; regress refuses it (exit 2) unless
    // the difference is accepted.
    let cmp = dbio(&["compare", &p(&base), &p(&one)]);
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
    let refused = dbio(&["regress", "--baseline", &p(&base), &p(&one)]);
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("--accept-difference work_unit"),
        "{}",
        stderr(&refused)
    );
    let accepted = dbio(&[
        "regress",
        "--baseline",
        &p(&base),
        &p(&one),
        "--accept-difference",
        "work_unit",
        "--max-iops-drop",
        "off",
        "--max-latency-rise",
        "off",
    ]);
    assert_exit(&accepted, 0);
    let typo = dbio(&[
        "regress",
        "--baseline",
        &p(&base),
        &p(&one),
        "--accept-difference",
        "workunit",
    ]);
    assert_exit(&typo, 2);

    // An interrupted or failed current run never passes, even with every gate off; neither
    // is ever a baseline.
    for status in ["interrupted", "failed"] {
        let bad = edited(&base, dir.path(), status, |v| v["status"] = status.into());
        let o = dbio(&[
            "regress",
            "--baseline",
            &p(&base),
            &p(&bad),
            "--max-iops-drop",
            "off",
            "--max-latency-rise",
            "off",
        ]);
        assert_exit(&o, 1);
        assert!(
            stdout(&o).contains(&format!("the current run is {status}")),
            "{}",
            stdout(&o)
        );
        let o = dbio(&["regress", "--baseline", &p(&bad), &p(&base)]);
        assert_exit(&o, 2);
        assert!(stderr(&o).contains("never a baseline"), "{}", stderr(&o));
        let o = dbio(&["compare", &p(&base), &p(&bad)]);
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
            vec!["report", b.to_str().unwrap()],
            vec!["compare", &p(&base), b.to_str().unwrap()],
            vec!["regress", "--baseline", &p(&base), b.to_str().unwrap()],
        ] {
            let o = dbio(&args);
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
        vec!["report", esc.to_str().unwrap()],
        vec!["compare", &p(&base), esc.to_str().unwrap()],
    ] {
        let o = dbio(&args);
        assert_exit(&o, 0);
        let out = stdout(&o);
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("evil\\u{1b}]0;owned"), "{out}");
    }
    // And dbio refuses to write one in the first place.
    let o = dbio(&[
        "run",
        "--dsn",
        &dsn,
        "--run-time",
        "1s",
        "--label",
        "a\u{1b}[31m",
        "-q",
    ]);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("run.label"), "{}", stderr(&o));

    // A window too short to measure is refused before anything runs (a 1 ms window once
    // reported "16000 read requests/s" from one read).
    let o = dbio(&["run", "--dsn", &dsn, "--run-time", "1ms", "-q"]);
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("too short to measure"),
        "{}",
        stderr(&o)
    );
}
