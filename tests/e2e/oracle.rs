//! engine: oracle with the real binary. Without Oracle Instant Client (every machine this
//! project's CI runs on) the user must get a clear message and exit 2. Against a real Oracle
//! database, set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service (a user that may
//! create users and read the V$ views, e.g. SYSTEM in a PDB) and the gated tests run: setup,
//! check, run and teardown; two prefixes `ts` and `ts2` and a teardown of one; Ctrl-C during
//! setup and the setup that resumes; AWR where the Diagnostics Pack is off. Without it they are
//! reported ignored (no Oracle can be installed here). Every user they create is named
//! DBIOT*, and each test drops what it made.

use std::time::{Duration, Instant};

use dbio_tests::{Dbio, assert_exit, read_result, stderr, stdout};

fn config(dir: &std::path::Path, dsn: &str, extra: &str) -> std::path::PathBuf {
    config_with(dir, dsn, "dbiot", 2, "1000blocks", extra)
}

fn config_with(
    dir: &std::path::Path,
    dsn: &str,
    prefix: &str,
    schemas: u32,
    scale: &str,
    extra: &str,
) -> std::path::PathBuf {
    let path = dir.join(format!("{prefix}.yaml"));
    std::fs::write(
        &path,
        format!(
            "engine: oracle\ntarget:\n  dsn: \"{dsn}\"\ndata:\n  schemas: {schemas}\n  scale: {scale}\n  prefix: {prefix}\n  parallel: 4\n{extra}"
        ),
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
    for cmd in [
        Dbio::new("check"),
        Dbio::new("run").run_time("1s"),
        Dbio::new("setup"),
        Dbio::new("teardown"),
    ] {
        let out = cmd
            .clone()
            .config(&cfg)
            .quiet()
            .env("DBIO_ORACLE_CLIENT_LIB_DIR", empty.path())
            .env("LD_LIBRARY_PATH", "")
            .output();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("DPI-1047")
                && err.contains("Install Oracle Instant Client")
                && err.contains("libaio")
                && err.contains("LD_LIBRARY_PATH")
                && err.contains("DBIO_ORACLE_CLIENT_LIB_DIR"),
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("not-printed"), "the password leaked: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

// Oracle's data sets are read from its catalog now (list was a usage error, and check, run,
// ramp and capacity took schemas and scale from the config only): with neither value given,
// the command reads the catalog first, and a machine without Instant Client is told what to
// install, as with both given.
#[test]
fn without_schemas_or_scale_the_catalog_is_read_and_instant_client_named() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("oracle.yaml");
    std::fs::write(
        &cfg,
        "engine: oracle\ntarget:\n  dsn: \"system/not-printed@//127.0.0.1:1/XE\"\ndata:\n  prefix: dbiot\n",
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    for cmd in [
        Dbio::new("list"),
        Dbio::new("check"),
        Dbio::new("run").run_time("1s").out(dir.path().join("run")),
        Dbio::new("ramp")
            .readers("1,2")
            .run_time("1s")
            .out(dir.path().join("ramp")),
    ] {
        let out = cmd
            .clone()
            .config(&cfg)
            .env("DBIO_ORACLE_CLIENT_LIB_DIR", empty.path())
            .env("LD_LIBRARY_PATH", "")
            .output();
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("DPI-1047") && err.contains("Install Oracle Instant Client"),
            "{cmd:?}: {err}"
        );
        // Said once: not a note and then the error.
        assert_eq!(
            err.matches("Install Oracle Instant Client").count(),
            1,
            "{cmd:?}: {err}"
        );
        assert!(!err.contains("not-printed"), "the password leaked: {err}");
    }
}

#[test]
fn a_target_without_a_user_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "//db.example:1521/ORCL", "");
    let out = Dbio::new("check").config(&cfg).output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user@//host:port/service"),
        "{}",
        stderr(&out)
    );
    // Ramp runs on Oracle too (issue 14): it refuses the same target the same way.
    let out = Dbio::new("ramp").config(&cfg).output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("user@//host:port/service"),
        "{}",
        stderr(&out)
    );
}

// Regression: `dbio config` showed an Oracle DSN as "(not a valid DSN)"; a prefix too long
// for Oracle's user names was only refused by the server, part-way.
#[test]
fn config_shows_the_oracle_target_and_a_bad_prefix_is_refused_first() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "system/not-printed@//db.example:1521/ORCLPDB1",
        "",
    );
    let out = Dbio::new("config")
        .config(&cfg)
        .arg("check")
        .env("DBIO_ORACLE_DSN", "")
        .output();
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(
        text.contains("system@//db.example:1521/ORCLPDB1")
            && !text.contains("not a valid DSN")
            && !text.contains("not-printed"),
        "{text}"
    );
    // 29 characters and 12 schemas: DBIOTAAA...12 has 31, beyond Oracle's 30 before 12.2.
    let long = format!("dbiot{}", "a".repeat(24));
    let bad = config_with(
        dir.path(),
        "system/x@//db.example:1521/X",
        &long,
        12,
        "64blocks",
        "",
    );
    let out = Dbio::new("setup").config(&bad).quiet().output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("makes user names of 31 characters"),
        "{}",
        stderr(&out)
    );
}

fn dsn() -> String {
    std::env::var("DBIO_TEST_ORACLE_DSN")
        .expect("DBIO_TEST_ORACLE_DSN=user/password@//host:port/service names the database")
}

/// A connection of the test's own, as the DSN's user, to check the server's side.
fn sql() -> oracle::Connection {
    let dsn = dsn();
    let (cred, connect) = dsn.rsplit_once('@').expect("user/password@connect");
    let (user, pw) = cred.split_once('/').expect("user/password@connect");
    oracle::Connection::connect(user, pw, connect).expect("connecting to DBIO_TEST_ORACLE_DSN")
}

/// The users that exist among `names`.
fn existing(c: &oracle::Connection, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            c.query_row_as::<i64>("SELECT COUNT(*) FROM all_users WHERE username = :1", &[*n])
                .unwrap()
                > 0
        })
        .map(|n| n.to_string())
        .collect()
}

/// The state of a user's row in the admin's catalog, if any.
fn catalog_state(c: &oracle::Connection, user: &str) -> Option<String> {
    c.query_row_as::<String>(
        "SELECT state FROM DBIO_DATA_SETS WHERE username = :1",
        &[&user],
    )
    .ok()
}

#[test]
#[cfg_attr(
    dbio_missing_oracle,
    ignore = "needs a real Oracle database: set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service"
)]
fn end_to_end_against_a_real_oracle_database() {
    let dsn = dsn();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &dsn, "");
    let cfg = cfg.to_str().unwrap();
    let out = Dbio::new("setup")
        .config(cfg)
        .arg("--force")
        .quiet()
        .output();
    assert_exit(&out, 0);
    // The password is generated, recorded in the admin's catalog, never the user name.
    let c = sql();
    assert_eq!(catalog_state(&c, "DBIOT1").as_deref(), Some("created"));
    let pw: Option<String> = c
        .query_row_as(
            "SELECT password FROM DBIO_DATA_SETS WHERE username = 'DBIOT1'",
            &[],
        )
        .unwrap();
    assert!(pw.is_some_and(|p| p.len() == 24 && !p.eq_ignore_ascii_case("DBIOT1")));
    let out = Dbio::new("check").config(cfg).output();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("one row per block"),
        "{}",
        stdout(&out)
    );
    // The data set is read back from the catalog: `dbio list`, and a check given neither
    // schemas nor scale finds both schemas at 1000 blocks.
    let out = Dbio::new("list")
        .config(cfg)
        .arg("--format")
        .arg("json")
        .output();
    assert_exit(&out, 0);
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ours: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["prefix"] == "dbiot")
        .collect();
    assert_eq!(ours.len(), 1, "{listed}");
    assert_eq!(
        (
            &ours[0]["schemas"],
            &ours[0]["scale_blocks"],
            &ours[0]["state"]
        ),
        (&2.into(), &1000.into(), &"complete".into()),
        "{listed}"
    );
    let bare = dir.path().join("bare.yaml");
    std::fs::write(
        &bare,
        format!("engine: oracle\ntarget:\n  dsn: \"{dsn}\"\ndata:\n  prefix: dbiot\n"),
    )
    .unwrap();
    let out = Dbio::new("check").config(&bare).output();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("DBIOT2") && stdout(&out).contains("rows 1000/1000"),
        "{}",
        stdout(&out)
    );
    let res = dir.path().join("res");
    let out = Dbio::new("run")
        .config(cfg)
        .readers(2)
        .writers(1)
        .opt("--update-pct", "30")
        .run_time("5s")
        .quiet()
        .out(&res)
        .output();
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
    // awr_info's columns, and the reader's plan as V$SQL_PLAN showed it.
    assert!(
        r["db"]["awr_info"]["preads_per_s"].is_number(),
        "{}",
        r["db"]
    );
    let plan = r["environment"]["read_path"]["plan"]
        .as_str()
        .unwrap_or_default();
    assert!(plan.contains("INDEX RANGE SCAN DBIOT"), "{plan}");
    // Where it ran is recorded in every result; the block size is the tablespace's.
    let settings = &r["environment"]["settings"];
    assert!(settings["con_name"].is_string(), "{settings}");
    assert!(settings["con_id"].is_string(), "{settings}");
    assert_eq!(settings["snapshots"], "none", "{settings}");
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
    assert!(report.contains("FILE|SESSIONS|ELAPSED|DB CPU"), "{report}");
    let out = Dbio::new("teardown").config(cfg).arg("--yes").output();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("dropped user DBIOT1"),
        "{}",
        stdout(&out)
    );
    assert!(existing(&c, &["DBIOT1", "DBIOT2"]).is_empty());
}

// Regression: teardown matched users with `LIKE 'PREFIX%'` (`--prefix ts2` took TS2, schema 2
// of `ts`; `--prefix user1` took USER10..USER19), and `setup --prefix ts1` adopted TS11 of `ts`.
#[test]
#[cfg_attr(
    dbio_missing_oracle,
    ignore = "needs a real Oracle database: set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service"
)]
fn two_prefixes_ts_and_ts2_keep_their_own_users() {
    let dsn = dsn();
    let dir = tempfile::tempdir().unwrap();
    let ts = config_with(dir.path(), &dsn, "dbiots", 12, "64blocks", "");
    let ts2 = config_with(dir.path(), &dsn, "dbiots2", 1, "64blocks", "");
    let ts1 = config_with(dir.path(), &dsn, "dbiots1", 1, "64blocks", "");
    let (ts, ts2, ts1) = (
        ts.to_str().unwrap(),
        ts2.to_str().unwrap(),
        ts1.to_str().unwrap(),
    );
    assert_exit(
        &Dbio::new("setup")
            .config(ts)
            .arg("--force")
            .quiet()
            .output(),
        0,
    );
    assert_exit(
        &Dbio::new("setup")
            .config(ts2)
            .arg("--force")
            .quiet()
            .output(),
        0,
    );
    // DBIOTS11 is schema 11 of `dbiots`: `dbiots1` may not take it.
    let out = Dbio::new("setup").config(ts1).quiet().output();
    assert_exit(&out, 2);
    assert!(
        stderr(&out)
            .contains("DBIOTS11: belongs to the dbio data set of prefix DBIOTS (its schema 11)"),
        "{}",
        stderr(&out)
    );
    let c = sql();
    let every: Vec<String> = (1..=12).map(|n| format!("DBIOTS{n}")).collect();
    let mut names: Vec<&str> = every.iter().map(String::as_str).collect();
    names.push("DBIOTS21");
    assert_eq!(existing(&c, &names).len(), 13);
    // Teardown of `dbiots2` names DBIOTS21 only (not DBIOTS2, schema 2 of `dbiots`).
    let out = Dbio::new("teardown").config(ts2).output();
    assert_exit(&out, 1);
    let plan = stdout(&out);
    assert!(
        plan.contains("  user DBIOTS21 (table CF1, index I_CF1)") && !plan.contains("DBIOTS2 "),
        "{plan}"
    );
    let out = Dbio::new("teardown").config(ts2).arg("--yes").output();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("dropped user DBIOTS21"),
        "{}",
        stdout(&out)
    );
    assert_eq!(existing(&c, &["DBIOTS21"]), Vec::<String>::new());
    assert_eq!(
        existing(&c, &names).len(),
        12,
        "dbiots's users are untouched"
    );
    assert_exit(&Dbio::new("check").config(ts).output(), 0);
    let out = Dbio::new("teardown").config(ts).arg("--yes").output();
    assert_exit(&out, 0);
    assert!(existing(&c, &names).is_empty(), "{}", stdout(&out));
}

// Regression: setup had no interrupt handling (the server-side INSERT kept its lock on
// Ctrl-C) and a setup killed between CREATE USER and the mark left a user the next setup
// refused.
#[test]
#[cfg_attr(
    dbio_missing_oracle,
    ignore = "needs a real Oracle database: set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service"
)]
fn ctrl_c_during_setup_leaves_it_recorded_and_the_next_setup_resumes() {
    let dsn = dsn();
    let dir = tempfile::tempdir().unwrap();
    // 40,000 blocks (320 MB at 8 kB): a load of some seconds.
    let cfg = config_with(dir.path(), &dsn, "dbiotc", 1, "40000blocks", "");
    let cfg = cfg.to_str().unwrap();
    let c = sql();
    let child = Dbio::new("setup")
        .config(cfg)
        .arg("--force")
        .quiet()
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    while catalog_state(&c, "DBIOTC1").as_deref() != Some("created") {
        assert!(Instant::now() < deadline, "setup never recorded DBIOTC1");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill with a valid pid and signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let stopped = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        stopped.elapsed() < Duration::from_secs(25),
        "setup took {:?} to stop",
        stopped.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("setup stopped") && err.contains("next `dbio setup`"),
        "{err}"
    );
    // Recorded: the row stays, the user is dbio's; check says it is incomplete.
    assert_eq!(catalog_state(&c, "DBIOTC1").as_deref(), Some("created"));
    let out = Dbio::new("check").config(cfg).output();
    assert_exit(&out, 1);
    // The next setup resumes it (rebuilds the incomplete schema) without --force.
    let out = Dbio::new("setup").config(cfg).quiet().output();
    assert_exit(&out, 0);
    assert_exit(&Dbio::new("check").config(cfg).output(), 0);
    assert_exit(&Dbio::new("teardown").config(cfg).arg("--yes").output(), 0);
    assert!(existing(&c, &["DBIOTC1"]).is_empty());
    assert_eq!(catalog_state(&c, "DBIOTC1"), None);
}

/// Sets CONTROL_MANAGEMENT_PACK_ACCESS for the instance's memory and puts it back when
/// dropped.
struct PackAccess<'a> {
    conn: &'a oracle::Connection,
    was: String,
}

impl Drop for PackAccess<'_> {
    fn drop(&mut self) {
        let _ = self.conn.execute(
            &format!(
                "ALTER SYSTEM SET control_management_pack_access = '{}' SCOPE = MEMORY",
                self.was
            ),
            &[],
        );
    }
}

// Regression: collector.awr never checked the edition or CONTROL_MANAGEMENT_PACK_ACCESS, and
// Standard Edition got an empty AWR report without a warning.
#[test]
#[cfg_attr(
    dbio_missing_oracle,
    ignore = "needs a real Oracle database: set DBIO_TEST_ORACLE_DSN=user/password@//host:port/service"
)]
fn awr_where_the_diagnostics_pack_is_off_is_refused_and_statspack_taken() {
    let dsn = dsn();
    let c = sql();
    let was: String = c
        .query_row_as(
            "SELECT value FROM v$parameter WHERE name = 'control_management_pack_access'",
            &[],
        )
        .unwrap();
    // Standard Edition's case on any edition: the pack turned off for this test (only the
    // instance's memory; put back afterwards). In a PDB the parameter cannot be changed:
    // the test then checks what the database has.
    let _guard = (was != "NONE")
        .then(|| {
            c.execute(
                "ALTER SYSTEM SET control_management_pack_access = 'NONE' SCOPE = MEMORY",
                &[],
            )
            .ok()
            .map(|_| PackAccess {
                conn: &c,
                was: was.clone(),
            })
        })
        .flatten();
    let now: String = c
        .query_row_as(
            "SELECT value FROM v$parameter WHERE name = 'control_management_pack_access'",
            &[],
        )
        .unwrap();
    let statspack = c
        .query_row_as::<i64>(
            "SELECT COUNT(*) FROM all_objects WHERE owner = 'PERFSTAT' AND object_name = 'STATSPACK' \
             AND object_type = 'PACKAGE'",
            &[],
        )
        .unwrap()
        > 0;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_with(dir.path(), &dsn, "dbiotse", 1, "1000blocks", "");
    let cfg = cfg.to_str().unwrap();
    assert_exit(
        &Dbio::new("setup")
            .config(cfg)
            .arg("--force")
            .quiet()
            .output(),
        0,
    );
    let res = dir.path().join("res");
    let out = Dbio::new("run")
        .config(cfg)
        .opt("--snapshots", "awr")
        .run_time("3s")
        .quiet()
        .out(&res)
        .output();
    assert_exit(&out, 0);
    let r = read_result(&res);
    let warnings = r["warnings"].to_string();
    if now == "NONE" {
        assert!(
            warnings.contains("AWR refused") && warnings.contains("CONTROL_MANAGEMENT_PACK_ACCESS"),
            "{warnings}"
        );
        assert!(
            !res.join("awr.txt").exists(),
            "no AWR snapshot where the pack is off"
        );
        if statspack {
            assert_eq!(r["environment"]["settings"]["snapshots"], "statspack");
            let sp = std::fs::read_to_string(res.join("statspack.txt")).unwrap();
            assert!(
                sp.contains("FILE|SESSIONS|ELAPSED") && sp.contains("spreport"),
                "{sp}"
            );
        } else {
            assert!(
                warnings.contains("Statspack is not installed"),
                "{warnings}"
            );
        }
    } else {
        // The pack is on and could not be turned off here (a PDB): AWR is taken.
        assert!(!warnings.contains("AWR refused"), "{warnings}");
        assert!(res.join("awr.txt").exists());
    }
    assert_exit(&Dbio::new("teardown").config(cfg).arg("--yes").output(), 0);
}
