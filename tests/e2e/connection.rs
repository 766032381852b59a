//! The whole connection string: host lists, options and application_name on every
//! connection (the measured sessions' included, seen in the server's own log), unknown
//! keywords refused by name, and libpq's password-file permission rule.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use dbio_tests::{Dbio, TestCluster, assert_exit, read_result, stderr};

const SCALE: &str = "256blocks";

/// A port on 127.0.0.1 where nothing listens (bound, then released).
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_dead_first_host_falls_through_and_options_reach_every_session() {
    // The server logs every statement of a connection whose options say so, each line
    // prefixed with the connection's application_name.
    let pg = TestCluster::start_with(16, None, &[("log_line_prefix", "'%a|'")]);
    pg.load("1", SCALE);
    let dead = dead_port();
    let live = pg.cluster.state.port;
    let dsn = format!(
        "host=127.0.0.1,127.0.0.1 port={dead},{live} user=postgres dbname=postgres \
         application_name=nightly options='-c log_min_duration_statement=0'"
    );
    let out = tempfile::tempdir().unwrap();
    let o = Dbio::new("run")
        .dsn(&dsn)
        .schemas(1)
        .scale(SCALE)
        .readers(2)
        .writers(1)
        .opt("--update-pct", "50")
        .opt("--work-loop", "20")
        .out(out.path())
        .quiet()
        .output();
    assert_exit(&o, 0);
    let r = read_result(out.path());
    assert_eq!(r["status"], "ok");
    let target = r["environment"]["target"].as_str().unwrap();
    assert!(
        target.starts_with(&format!("host=127.0.0.1,127.0.0.1 port={dead},{live} ")),
        "{target}"
    );
    assert!(
        target.contains("options='-c log_min_duration_statement=0'"),
        "{target}"
    );
    let log = std::fs::read_to_string(pg.cluster.log_file()).unwrap();
    // Each measured session ran its prepared statements under the option (the server logs
    // them only because of it), named with the DSN's application_name first.
    for (name, statement) in [
        ("nightly/dbio-reader-1", "execute dbio_read"),
        ("nightly/dbio-reader-2", "execute dbio_read"),
        ("nightly/dbio-writer-1", "execute dbio_update"),
    ] {
        let lines = log
            .lines()
            .filter(|l| l.starts_with(&format!("{name}|")) && l.contains(statement))
            .count();
        assert!(
            lines >= 5,
            "{lines} logged {statement} lines of {name}:\n{log}"
        );
    }
    // The tokio-postgres connections carry the options too.
    for name in ["nightly/dbio-preflight", "nightly/dbio-collector"] {
        assert!(
            log.lines()
                .any(|l| l.starts_with(&format!("{name}|")) && l.contains("duration:")),
            "no statement logged for {name}:\n{log}"
        );
    }
}

#[test]
fn unknown_and_unsupported_keywords_are_refused_by_name() {
    for (dsn, named) in [
        ("host=127.0.0.1 port=1 sslmod=require", "`sslmod`"),
        ("postgresql://127.0.0.1:1/db?colour=blue", "`colour`"),
        ("host=127.0.0.1 port=1 krbsrvname=postgres", "`krbsrvname`"),
        ("host=127.0.0.1 port=1 sslmode=verify", "sslmode"),
    ] {
        let o = Dbio::new("teardown").dsn(dsn).output();
        assert_exit(&o, 2);
        let e = stderr(&o);
        assert!(e.contains(named), "{dsn}: {e}");
        assert!(
            !e.contains("cannot connect"),
            "refused before connecting: {e}"
        );
    }
    let o = Dbio::new("teardown")
        .dsn("host=127.0.0.1 port=1")
        .env("PGSSLMODE", "sometimes")
        .output();
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("sslmode"), "{}", stderr(&o));
}

#[test]
fn a_password_file_readable_by_others_is_ignored_with_libpqs_warning() {
    let pg = TestCluster::start_with(16, Some("File-Pass-3"), &[]);
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    std::fs::write(&passfile, "*:*:*:postgres:File-Pass-3\n").unwrap();
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        pg.cluster.state.port
    );
    let teardown = Dbio::new("teardown").dsn(&dsn).env("PGPASSFILE", &passfile);
    let o = teardown.output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "WARNING: password file \"{}\" has group or world access; permissions should be u=rw (0600) or less",
            passfile.display()
        )),
        "{e}"
    );
    assert!(e.contains("password"), "{e}");
    // The same file at 0600 is used.
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let o = teardown.output();
    assert_exit(&o, 0);
    assert!(
        !stderr(&o).contains("WARNING: password file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn target_session_attrs_are_checked_on_each_server() {
    let pg = TestCluster::start(16);
    let dsn = |attrs: &str| {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres target_session_attrs={attrs}",
            pg.cluster.state.port
        )
    };
    // A primary is read-write and no standby.
    for attrs in ["any", "read-write", "primary", "prefer-standby"] {
        assert_exit(&Dbio::new("teardown").dsn(dsn(attrs)).output(), 0);
    }
    for (attrs, why) in [
        ("standby", "server is not in hot standby mode"),
        ("read-only", "session is not read-only"),
    ] {
        let o = Dbio::new("teardown").dsn(dsn(attrs)).output();
        assert_exit(&o, 2);
        assert!(stderr(&o).contains(why), "{attrs}: {}", stderr(&o));
        // The measured sessions' connections check the same.
        let target = dbio_postgres::Target::from_dsn(&dsn(attrs)).unwrap();
        match dbio_postgres::WireConn::open(&target, "dbio-reader-1") {
            Ok(_) => panic!("a session connected to a primary under target_session_attrs={attrs}"),
            Err(e) => assert!(e.to_string().contains(why), "{attrs}: {e}"),
        }
    }
}

#[test]
fn session_sockets_carry_keepalive_and_cancels_reach_the_connected_server() {
    let pg = TestCluster::start(16);
    let live = pg.cluster.state.port;
    let base = format!(
        "host=127.0.0.1,127.0.0.1 port={},{live} user=postgres dbname=postgres",
        dead_port()
    );
    // dbio's defaults where the DSN is silent, the DSN's values where it speaks.
    let open = |extra: &str| {
        let target = dbio_postgres::Target::from_dsn(&format!("{base} {extra}")).unwrap();
        match dbio_postgres::WireConn::open(&target, "dbio-reader-1") {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        }
    };
    let conn = open("");
    assert_eq!(
        conn.tcp_timeouts().unwrap(),
        Some((Duration::from_secs(30), Some(Duration::from_secs(60))))
    );
    let mut conn = open("keepalives_idle=7 tcp_user_timeout=4321");
    assert_eq!(
        conn.tcp_timeouts().unwrap(),
        Some((Duration::from_secs(7), Some(Duration::from_millis(4321))))
    );
    // The cancel goes to the second host, the one the session reached.
    let cancel = conn.cancel_handle();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        cancel.cancel();
    });
    let started = Instant::now();
    let e = conn.simple("SELECT pg_sleep(60)").unwrap_err();
    canceller.join().unwrap();
    assert!(e.to_string().contains("57014"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    // The connection is still usable after the cancel.
    assert_eq!(conn.simple("SELECT 1").unwrap().as_deref(), Some("1"));
}

/// A session opens in one round trip after its logon (issue 34): its steps are answered in
/// order, each up to its own ReadyForQuery, so a step the server refuses leaves the ones
/// after it to run, and the connection stays usable.
#[test]
fn a_pipelined_step_that_fails_leaves_the_steps_after_it_to_run() {
    use dbio_postgres::{INT8, Param, Step};
    let pg = TestCluster::start(16);
    let dsn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        pg.cluster.state.port
    );
    let target = dbio_postgres::Target::from_dsn(&dsn).unwrap();
    let mut conn = match dbio_postgres::WireConn::open(&target, "dbio-reader-1") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let statements: [(&str, &str, &[u32]); 1] = [(
        "sum2",
        "SELECT count(*)::int8 FROM generate_series($1::int8, $2::int8)",
        &[INT8, INT8],
    )];
    let answers = conn
        .pipeline(&[
            Step::Simple("SET statement_timeout = '7s'"),
            Step::Simple("SELECT * FROM no_such_table"),
            Step::Prepare(&statements),
            Step::Simple("SELECT current_setting('statement_timeout'), NULL"),
        ])
        .expect("the connection survives a refused step");
    assert_eq!(answers.len(), 4);
    assert!(matches!(answers[0], Ok(None)), "a SET returns no row");
    match &answers[1] {
        Err(e) => assert_eq!(e.code, "42P01", "{e:?}"),
        Ok(r) => panic!("a missing table answered {r:?}"),
    }
    assert!(matches!(answers[2], Ok(None)), "prepared: {:?}", answers[2]);
    assert_eq!(
        answers[3].as_ref().ok().cloned().flatten(),
        Some(vec![Some("7s".to_string()), None])
    );
    // The statement prepared after the refused step runs, on the same connection.
    let done = conn
        .execute("sum2", &[Param::Int8(1), Param::Int8(5)])
        .expect("the prepared statement runs");
    assert_eq!(done.first_int8, Some(5));
}
