//! engine: oracle with the real binary. Without Oracle Instant Client (every machine this
//! project's CI runs on) the user must get a clear message and exit 2. Against a real Oracle
//! database, set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service (a user that may
//! create users and read the V$ views) and the end-to-end test runs setup, check, run and
//! teardown; without it that test is reported ignored (no Oracle can be installed here).

use dbio_tests::{assert_exit, dbio_env, read_result, stderr, stdout};

fn config(dir: &std::path::Path, dsn: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("oracle.yaml");
    std::fs::write(
        &path,
        format!("engine: oracle\ntarget:\n  dsn: \"{dsn}\"\ndata:\n  schemas: 2\n  scale: 1000blocks\n  prefix: dbiot\n{extra}"),
    )
    .unwrap();
    path
}

#[test]
fn without_instant_client_the_user_is_told_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "system/not-printed@//127.0.0.1:1/XE", "");
    let empty = tempfile::tempdir().unwrap();
    // An empty library folder and no LD_LIBRARY_PATH: libclntsh cannot be found, whatever
    // this machine has installed.
    let env = [
        ("DBIO_ORACLE_CLIENT_LIB_DIR", empty.path().to_str().unwrap()),
        ("LD_LIBRARY_PATH", ""),
    ];
    for cmd in [
        &["check"][..],
        &["run", "--run-time", "1s"][..],
        &["setup"][..],
    ] {
        let mut args: Vec<&str> = cmd.to_vec();
        args.extend(["-c", cfg.to_str().unwrap(), "-q"]);
        let out = dbio_env(&args, &env);
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("DPI-1047")
                && err.contains("Install Oracle Instant Client")
                && err.contains("LD_LIBRARY_PATH")
                && err.contains("DBIO_ORACLE_CLIENT_LIB_DIR"),
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("not-printed"), "the password leaked: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_target_without_a_user_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "//db.example:1521/ORCL", "");
    let out = dbio_env(&["check", "-c", cfg.to_str().unwrap()], &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user@//host:port/service"),
        "{}",
        stderr(&out)
    );
    // Ramp runs on Oracle too (issue 14): it refuses the same target the same way.
    let out = dbio_env(&["ramp", "-c", cfg.to_str().unwrap()], &[]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user@//host:port/service"),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    dbio_missing_oracle,
    ignore = "needs a real Oracle database: set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service"
)]
fn end_to_end_against_a_real_oracle_database() {
    let dsn = std::env::var("DBIO_TEST_ORACLE_DSN")
        .expect("DBIO_TEST_ORACLE_DSN=user/password@//host:port/service names the database");
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &dsn, "");
    let cfg = cfg.to_str().unwrap();
    let out = dbio_env(&["setup", "-c", cfg, "--force", "-q"], &[]);
    assert_exit(&out, 0);
    let out = dbio_env(&["check", "-c", cfg], &[]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("one row per block"),
        "{}",
        stdout(&out)
    );
    let res = dir.path().join("res");
    let out = dbio_env(
        &[
            "run",
            "-c",
            cfg,
            "--readers",
            "2",
            "--writers",
            "1",
            "--update-pct",
            "30",
            "--run-time",
            "5s",
            "-q",
            "--out",
            res.to_str().unwrap(),
        ],
        &[],
    );
    assert_exit(&out, 0);
    let r = read_result(&res);
    assert_eq!(r["engine"], "oracle");
    assert_eq!(r["status"], "ok");
    assert!(r["client"]["read"]["count"].as_u64().unwrap() > 0);
    // Every update binds its columns and range by name: none may fail (they all did when
    // bound by position).
    assert!(r["client"]["update"]["count"].as_u64().unwrap() > 0);
    assert_eq!(r["client"]["update"]["errors"], 0, "{}", r["client"]);
    assert_eq!(r["client"]["read"]["errors"], 0, "{}", r["client"]);
    assert_eq!(r["db"]["valid"], true, "{}", r["db"]);
    assert!(
        r["db"]["counters"]["gv$sysstat.execute count"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(
        r["db"]["counters"]["gv$sys_time_model.DB CPU"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Where it ran is recorded in every result; the block size is the tablespace's.
    let settings = &r["environment"]["settings"];
    assert!(settings["con_name"].is_string(), "{settings}");
    assert!(settings["con_id"].is_string(), "{settings}");
    assert_eq!(
        r["environment"]["data_set"]["block_size"]
            .as_u64()
            .map(|b| b.to_string()),
        settings["tablespace_block_size"]
            .as_str()
            .map(str::to_string)
    );
    let report = std::fs::read_to_string(res.join("report.txt")).unwrap();
    assert!(
        !report.contains("shared_buffers") && !report.contains("WAL"),
        "{report}"
    );
    let out = dbio_env(&["teardown", "-c", cfg, "--yes"], &[]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("dropped user DBIOT1"),
        "{}",
        stdout(&out)
    );
}
