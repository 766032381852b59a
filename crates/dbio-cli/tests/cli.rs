//! The binary's usage and configuration errors, which need no database.

use std::process::{Command, Output};

fn dbio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dbio"))
        .args(args)
        .output()
        .expect("dbio runs")
}

fn config(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_key_is_exit_2_with_key_and_line() {
    let f = config("data:\n  schemas: 2\n  scael: 64MB\n");
    let out = dbio(&["check", "-c", f.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    let e = err(&out);
    assert!(e.contains("scael") && e.contains("line 3"), "{e}");
}

#[test]
fn bad_unit_is_exit_2_with_key_named() {
    let f = config("data:\n  scale: 64XB\n");
    let out = dbio(&["setup", "-c", f.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = err(&out);
    assert!(
        e.contains("`scale`") && e.contains("unknown unit") && e.contains("line 2"),
        "{e}"
    );

    let out = dbio(&["setup", "--scale", "4000"]);
    assert_eq!(out.status.code(), Some(2));
    let e = err(&out);
    assert!(e.contains("--scale") && e.contains("no unit"), "{e}");
}

#[test]
fn zero_schemas_is_exit_2_with_key_and_range() {
    let f = config("data:\n  schemas: 0\n");
    let out = dbio(&["setup", "-c", f.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let e = err(&out);
    assert!(e.contains("data.schemas") && e.contains("1..=4096"), "{e}");
    let out = dbio(&["setup", "--schemas", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err(&out).contains("data.schemas (--schemas)"),
        "{}",
        err(&out)
    );
}

#[test]
fn missing_config_file_is_exit_2() {
    let out = dbio(&["check", "-c", "/nonexistent/dbio.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err(&out).contains("/nonexistent/dbio.yaml"),
        "{}",
        err(&out)
    );
}

#[test]
fn every_command_explains_its_options() {
    let out = dbio(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for cmd in ["setup", "check", "teardown", "scratch", "quickstart"] {
        assert!(text.contains(cmd), "--help lacks {cmd}");
        let out = dbio(&[cmd, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{cmd} --help");
    }
    let setup = String::from_utf8_lossy(&dbio(&["setup", "--help"]).stdout).into_owned();
    for flag in [
        "--schemas",
        "--scale",
        "--tablespace",
        "--parallel",
        "--force",
        "--dsn",
        "data.scale",
    ] {
        assert!(setup.contains(flag), "setup --help lacks {flag}");
    }
}

#[test]
fn report_refuses_malformed_truncated_and_future_results_with_exit_2() {
    let cases = [
        ("{\"format\": 1, \"status\": \"ok\"", "invalid JSON"),
        ("{\"format\": 99}", "newer than this dbio"),
        ("{\"status\": \"ok\"}", "no \"format\""),
        (
            "{\"format\": 1, \"status\": \"ok\"}",
            "not a valid dbio result",
        ),
    ];
    for (text, needle) in cases {
        let f = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        let out = dbio(&["report", f.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(err(&out).contains(needle), "{text}: {}", err(&out));
    }
    let out = dbio(&["report", "/nonexistent/result.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(err(&out).contains("cannot read"), "{}", err(&out));
}

#[test]
fn compare_and_regress_refuse_bad_inputs_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(
        &truncated,
        "{\"format\": 1, \"kind\": \"ramp\", \"steps\": [",
    )
    .unwrap();
    let future = dir.path().join("future.json");
    std::fs::write(
        &future,
        "{\"format\": 7, \"kind\": \"ramp\", \"steps\": []}",
    )
    .unwrap();
    let t = truncated.to_str().unwrap();
    let f = future.to_str().unwrap();
    for (args, needle) in [
        (vec!["compare", t, t], "invalid JSON"),
        (vec!["compare", f, f], "newer than this dbio"),
        (vec!["regress", "--baseline", t, f], "invalid JSON"),
        (
            vec!["regress", "--baseline", "/nonexistent/ramp.json", t],
            "cannot read it",
        ),
    ] {
        let out = dbio(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", err(&out));
        assert!(err(&out).contains(needle), "{args:?}: {}", err(&out));
    }
    let out = dbio(&["compare", t]);
    assert_eq!(out.status.code(), Some(2), "compare needs two inputs");
}
