//! dbio's own connections against a hostile role and a server that stops answering: role
//! defaults that would cancel or close them, a server whose processes are stopped mid-run,
//! SIGTERM and SIGHUP, a role's connection limit, and the server's DETAIL and HINT kept in
//! a session's error.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use dbio_tests::{
    Dbio, TestCluster, assert_exit, assert_valid_result, num, read_result, stderr,
    wait_no_dbio_sessions,
};
use serde_json::Value;

use crate::faults::{wait_exit, wait_sessions};

fn warnings(r: &Value) -> String {
    r["warnings"].to_string()
}

/// Sends `signal` (e.g. libc::SIGTERM) to a process.
fn send(pid: u32, signal: i32) {
    // SAFETY: kill(2) on a child process this test started; no memory is involved.
    let rc = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal})");
}

/// Every process of the cluster: the postmaster (first line of postmaster.pid) and its
/// children.
fn cluster_pids(data_dir: &Path) -> Vec<i32> {
    let pidfile = std::fs::read_to_string(data_dir.join("postmaster.pid")).expect("postmaster.pid");
    let postmaster: i32 = pidfile
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("the postmaster's pid");
    let mut pids = vec![postmaster];
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(postmaster) {
            pids.push(pid);
        }
    }
    pids
}

/// The cluster's processes stopped (SIGSTOP) for as long as it lives: resumed (SIGCONT) when
/// dropped, whether the test passed or failed, so the cluster can be stopped and removed.
struct Stopped(Vec<i32>);

impl Stopped {
    fn stop(data_dir: &Path) -> Stopped {
        let pids = cluster_pids(data_dir);
        assert!(pids.len() > 3, "postmaster and children: {pids:?}");
        let stopped = Stopped(pids);
        for &pid in &stopped.0 {
            // SAFETY: kill(2) on the test cluster's own processes.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
        }
        stopped
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        }
    }
}

fn run_args(dsn: &str, out: &Path) -> Dbio {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(1)
        .scale("1000blocks")
        .quiet()
        .out(out)
}

// A role-level statement_timeout cancelled dbio's own catalog work ("interrupted"), and a
// role-level idle_session_timeout closed the collector's idle connection and with it every
// database figure of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_level_statement_and_idle_timeouts_do_not_touch_dbios_own_work() {
    role_defaults_leave_dbio_alone(&TestCluster::start(16)).await;
}

// 13 has no idle_session_timeout: dbio must not set it there.
#[cfg_attr(dbio_missing_pg13, ignore = "needs PostgreSQL 13 binaries")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_level_statement_timeout_does_not_touch_dbios_own_work_on_postgres_13() {
    role_defaults_leave_dbio_alone(&TestCluster::start_version(13, 16, &[])).await;
}

async fn role_defaults_leave_dbio_alone(pg: &TestCluster) {
    let c = pg.client().await;
    c.batch_execute(
        "CREATE ROLE tight LOGIN SUPERUSER; ALTER ROLE tight SET statement_timeout = '2ms'",
    )
    .await
    .unwrap();
    if pg.major() >= 14 {
        c.batch_execute("ALTER ROLE tight SET idle_session_timeout = '1s'")
            .await
            .unwrap();
    }
    let dsn = format!("{} user=tight", pg.dsn());
    let setup = Dbio::new("setup")
        .dsn(&dsn)
        .schemas(1)
        .scale("1000blocks")
        .quiet()
        .output();
    assert_exit(&setup, 0);
    assert_exit(
        &Dbio::new("check")
            .dsn(&dsn)
            .schemas(1)
            .scale("1000blocks")
            .output(),
        0,
    );

    // The window (4 s) is longer than the idle timeout; the collector's connection idles
    // through it.
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&dsn, out.path())
        .readers(1)
        .writers(1)
        .run_time("4s")
        .output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    assert_valid_result(&r);
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(num(&r, &["client", "errors"]), 0.0, "{}", r["sessions"]);
    assert!(num(&r, &["client", "ops"]) > 10.0);
    assert!(r["db"].is_object(), "db figures present: {}", warnings(&r));
    assert!(num(&r, &["db", "read_iops"]) >= 0.0);
    assert!(num(&r, &["db", "commits_per_s"]) > 0.0, "{}", r["db"]);
    assert!(r["waits"].is_object());
    assert!(
        !warnings(&r).contains("reconnected"),
        "the collector's connection was not lost: {}",
        warnings(&r)
    );
}

// The collector's connection lost anyway (here terminated): it reconnects for the "after"
// snapshot and keeps the figures, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_collector_connection_reconnects_for_the_after_snapshot() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dsn = pg.dsn();
    let out = tempfile::tempdir().unwrap();
    let mut child = run_args(&dsn, out.path()).readers(2).run_time("4s").spawn();
    let c = pg.client().await;
    wait_sessions(&c, 2).await;
    // The sampler connects at the end of the collector's "before" snapshot: the window is open.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sampler: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dbio-sampler'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if sampler > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the window did not open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'dbio-collector'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    let code = wait_exit(&mut child, Duration::from_secs(30));
    let r = read_result(out.path());
    assert_eq!(code, 0, "{}", r["error"]);
    assert!(r["db"].is_object(), "{}", warnings(&r));
    assert!(num(&r, &["db", "commits_per_s"]) > 0.0);
    assert!(
        warnings(&r).contains("reconnected for the \\\"after\\\" snapshot"),
        "{}",
        warnings(&r)
    );
}

// The server stopped answering (its processes stopped): the sessions blocked in recv, the
// driver waited for them without bound, and Ctrl-C could not end the run.
#[cfg_attr(
    dbio_missing_root,
    ignore = "needs root (to stop the server's processes)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_and_ctrl_c_end_the_run_within_15_s_with_lost_sessions() {
    dbio_tests::require_root("stopping the scratch server's processes with SIGSTOP");
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dsn = pg.dsn();
    let out = tempfile::tempdir().unwrap();
    let mut child = run_args(&dsn, out.path())
        .readers(2)
        .run_time("120s")
        .spawn();
    {
        let c = pg.client().await;
        wait_sessions(&c, 2).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let stopped = Stopped::stop(pg.cluster.data_dir());
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let interrupted_at = Instant::now();
    send(child.id(), libc::SIGINT);
    let code = wait_exit(&mut child, Duration::from_secs(15));
    let took = interrupted_at.elapsed();
    drop(stopped);
    assert_eq!(code, 1);
    let r = read_result(out.path());
    assert_valid_result(&r);
    assert_eq!(r["status"], "interrupted");
    assert_eq!(num(&r, &["sessions_lost"]), 2.0, "{}", r["sessions"]);
    for s in r["sessions"].as_array().unwrap() {
        assert_eq!(s["ended_by"], "lost", "{s}");
    }
    assert!(
        num(&r, &["client", "ops"]) > 0.0,
        "what was measured before the server stopped is kept"
    );
    assert!(r["db"].is_null());
    assert!(warnings(&r).contains("did not answer"), "{}", warnings(&r));
    let report = std::fs::read_to_string(out.path().join("report.txt")).unwrap();
    assert!(report.contains("lost"), "{report}");
    eprintln!("dbio ended {took:?} after SIGINT against a stopped server");

    // Resumed, the server is whole and dbio left nothing behind.
    let c = pg.client().await;
    wait_no_dbio_sessions(&c, Duration::from_secs(20), "after the resumed server").await;

    // A second Ctrl-C does not wait for the grace nor the "after" snapshot.
    let out = tempfile::tempdir().unwrap();
    let mut child = run_args(&dsn, out.path())
        .readers(2)
        .run_time("120s")
        .spawn();
    wait_sessions(&c, 2).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let stopped = Stopped::stop(pg.cluster.data_dir());
    tokio::time::sleep(Duration::from_millis(500)).await;
    send(child.id(), libc::SIGINT);
    // A repeat within 1 s is the same request (`timeout -s INT` sends two): the second Ctrl-C
    // comes later.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let interrupted_at = Instant::now();
    send(child.id(), libc::SIGINT);
    let code = wait_exit(&mut child, Duration::from_secs(15));
    let took = interrupted_at.elapsed();
    drop(stopped);
    assert_eq!(code, 1);
    assert!(took < Duration::from_secs(3), "{took:?}");
    let r = read_result(out.path());
    assert_valid_result(&r);
    assert_eq!(r["status"], "interrupted");
    assert_eq!(num(&r, &["sessions_lost"]), 2.0);
    assert!(warnings(&r).contains("a second time"), "{}", warnings(&r));
    eprintln!("dbio ended {took:?} after a second SIGINT");
}

fn assert_interrupted_by(out: &Path, by: &str) -> Value {
    let r = read_result(out);
    assert_valid_result(&r);
    assert_eq!(r["status"], "interrupted");
    assert!(
        r["error"].as_str().unwrap_or("").contains(by),
        "{}",
        r["error"]
    );
    r
}

/// Starts `args`, waits for `sessions` measured sessions, then sends `signal`; the exit code.
async fn signal_mid_run(pg: &TestCluster, args: &Dbio, sessions: i64, signal: i32) -> i32 {
    let mut child = args.spawn();
    let c = pg.client().await;
    wait_sessions(&c, sessions).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    send(child.id(), signal);
    let code = wait_exit(&mut child, Duration::from_secs(20));
    wait_no_dbio_sessions(&c, Duration::from_secs(10), "after the signal").await;
    code
}

// SIGTERM (what `timeout`, systemd, CI runners and `docker stop` send) left an empty folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sighup_end_runs_ramps_and_the_server_engine_with_a_result() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dsn = pg.dsn();

    let out = tempfile::tempdir().unwrap();
    let args = run_args(&dsn, out.path()).readers(2).run_time("60s");
    assert_eq!(signal_mid_run(&pg, &args, 2, libc::SIGTERM).await, 1);
    let r = assert_interrupted_by(out.path(), "SIGTERM");
    assert!(num(&r, &["client", "ops"]) > 0.0);
    assert_eq!(num(&r, &["sessions_lost"]), 0.0);

    let out = tempfile::tempdir().unwrap();
    let args = run_args(&dsn, out.path()).readers(2).run_time("60s");
    assert_eq!(signal_mid_run(&pg, &args, 2, libc::SIGHUP).await, 1);
    assert_interrupted_by(out.path(), "SIGHUP");

    let out = tempfile::tempdir().unwrap();
    let args = run_args(&dsn, out.path())
        .readers(2)
        .run_time("60s")
        .opt("--engine", "server");
    assert_eq!(signal_mid_run(&pg, &args, 2, libc::SIGTERM).await, 1);
    assert_interrupted_by(out.path(), "SIGTERM");

    let out = tempfile::tempdir().unwrap();
    let ramp_dir: PathBuf = out.path().join("ramp");
    let ramp = pg
        .dbio("ramp")
        .schemas(1)
        .scale("1000blocks")
        .readers("2,3")
        .writers(0)
        .run_time("60s")
        .quiet()
        .out(&ramp_dir);
    assert_eq!(signal_mid_run(&pg, &ramp, 2, libc::SIGTERM).await, 1);
    let text = std::fs::read_to_string(ramp_dir.join("ramp.json")).unwrap();
    let ramp: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(ramp["status"], "interrupted");
    assert_eq!(ramp["steps"].as_array().map(Vec::len), Some(1));
    let step = read_result(&ramp_dir.join("step-01-r2-w0"));
    assert_eq!(step["status"], "interrupted");

    // Under nohup (SIGHUP ignored before exec) a hangup does not end the run.
    let out = tempfile::tempdir().unwrap();
    let mut cmd = run_args(&dsn, out.path())
        .readers(1)
        .run_time("3s")
        .command();
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    // SAFETY: signal(2) between fork and exec, as nohup does; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("dbio starts");
    let c = pg.client().await;
    wait_sessions(&c, 1).await;
    send(child.id(), libc::SIGHUP);
    let code = wait_exit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr read");
    assert!(out.path().join("result.json").is_file(), "{err}");
    let r = read_result(out.path());
    assert_eq!(
        (code, &r["status"]),
        (0, &Value::from("ok")),
        "{}",
        r["error"]
    );
}

// `timeout -s INT` delivers SIGINT twice (to dbio, then to its process group): in 2 of 14 runs
// dbio took the second for a second Ctrl-C, dropped the database figures and reported both
// sessions lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_sigint_within_a_second_ends_the_run_like_one() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dsn = pg.dsn();
    let out = tempfile::tempdir().unwrap();
    let mut child = run_args(&dsn, out.path())
        .readers(2)
        .run_time("60s")
        .spawn();
    let c = pg.client().await;
    wait_sessions(&c, 2).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    send(child.id(), libc::SIGINT);
    tokio::time::sleep(Duration::from_millis(100)).await;
    send(child.id(), libc::SIGINT);
    assert_eq!(wait_exit(&mut child, Duration::from_secs(20)), 1);
    let r = assert_interrupted_by(out.path(), "Ctrl-C");
    assert_eq!(num(&r, &["sessions_lost"]), 0.0, "{}", r["sessions"]);
    assert!(
        !r["db"].is_null(),
        "the database figures are kept: {}",
        warnings(&r)
    );
    assert!(!warnings(&r).contains("a second time"), "{}", warnings(&r));
}

// A role's CONNECTION LIMIT was answered with "raise max_connections"; a missing Unix
// socket with a hint about TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refusals_get_the_hint_that_fits_the_cause() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let c = pg.client().await;
    c.batch_execute(
        "CREATE ROLE limited LOGIN CONNECTION LIMIT 2; \
         GRANT USAGE ON SCHEMA user1 TO limited; \
         GRANT SELECT, UPDATE ON user1.cf1 TO limited",
    )
    .await
    .unwrap();
    let dsn = format!("{} user=limited", pg.dsn());
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&dsn, out.path())
        .readers(4)
        .run_time("2s")
        .output();
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(err.contains("too many connections for role"), "{err}");
    assert!(err.contains("ALTER ROLE limited CONNECTION LIMIT"), "{err}");
    assert!(!err.contains("raise max_connections"), "{err}");

    let missing = tempfile::tempdir().unwrap();
    let socket_dsn = format!("host={} port=5999 user=postgres", missing.path().display());
    let o = Dbio::new("check").dsn(&socket_dsn).schemas(1).output();
    assert_exit(&o, 2);
    let err = stderr(&o);
    assert!(err.contains(".s.PGSQL.5999"), "{err}");
    assert!(!err.contains("TCP"), "{err}");
}

// Session errors kept severity, SQLSTATE and message but lost DETAIL and HINT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_error_keeps_the_servers_detail_and_hint() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let c = pg.client().await;
    c.batch_execute(
        "CREATE FUNCTION public.e2e_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN RAISE EXCEPTION 'e2e refuses updates' \
           USING DETAIL = 'key ' || NEW.custid || ' is protected', HINT = 'drop trigger e2e_refuse'; \
         END $$; \
         CREATE TRIGGER e2e_refuse BEFORE UPDATE ON user1.cf1 \
           FOR EACH ROW EXECUTE FUNCTION public.e2e_refuse()",
    )
    .await
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&pg.dsn(), out.path())
        .readers(0)
        .writers(1)
        .run_time("2s")
        .output();
    assert_exit(&o, 1);
    let r = read_result(out.path());
    assert_eq!(r["status"], "failed");
    let message = r["sessions"][0]["first_error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for part in [
        "e2e refuses updates (SQLSTATE P0001)",
        "DETAIL: key ",
        " is protected",
        "HINT: drop trigger e2e_refuse",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
        assert!(
            r["error"].as_str().unwrap_or("").contains(part),
            "{}",
            r["error"]
        );
    }
    let report = std::fs::read_to_string(out.path().join("report.txt")).unwrap();
    assert!(report.contains("HINT: drop trigger e2e_refuse"), "{report}");
}

// Connect-time errors from tokio-postgres kept the server's message but lost its DETAIL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 (login event triggers)"
)]
async fn a_refused_connection_keeps_the_servers_detail_and_hint() {
    let pg = TestCluster::start_pg17(16, &[]);
    let c = pg.client().await;
    c.batch_execute(
        "CREATE ROLE bench LOGIN; \
         CREATE FUNCTION no_login() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN \
           IF current_user = 'bench' THEN RAISE EXCEPTION 'no logins now' \
             USING DETAIL = 'maintenance window', HINT = 'come back at six'; END IF; END $$; \
         CREATE EVENT TRIGGER no_login ON login EXECUTE FUNCTION no_login()",
    )
    .await
    .unwrap();
    let dsn = format!(
        "host=127.0.0.1 port={} user=bench dbname=postgres",
        pg.cluster.state.port
    );
    let o = Dbio::new("teardown").dsn(&dsn).output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("DETAIL: maintenance window") && e.contains("HINT: come back at six"),
        "{e}"
    );
    let target = dbio_postgres::Target::from_dsn(&dsn).unwrap();
    let Err(e) = dbio_postgres::WireConn::open(&target, "dbio-reader-1") else {
        panic!("a session connected past the login trigger");
    };
    assert!(e.to_string().contains("DETAIL: maintenance window"), "{e}");
}
