//! `dbio scratch start|status|stop` round trip on the real binary.

use dbio_tests::{Dbio, assert_exit, is_root, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scratch_start_status_stop_round_trip() {
    let dir = tempfile::Builder::new()
        .prefix("dbio-scratch-")
        .tempdir()
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let out = Dbio::new("scratch start")
        .opt("--dir", d)
        .opt("--shared-buffers", "16MB")
        .output();
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("shared_buffers 16.0 MiB"),
        "{}",
        stdout(&out)
    );

    let out = Dbio::new("scratch status")
        .opt("--dir", d)
        .arg("--dsn-only")
        .output();
    assert_exit(&out, 0);
    let dsn = stdout(&out).trim().to_string();
    assert!(dsn.starts_with("host=127.0.0.1 port="), "{dsn}");

    // The server runs with the settings dbio controls, and as `postgres` when we are root.
    let (client, conn) = tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let row = client
        .query_one(
            "SELECT current_setting('shared_buffers'), current_setting('track_io_timing'), \
             current_setting('listen_addresses'), (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'checkpointer')",
            &[],
        )
        .await
        .unwrap();
    let (sb, tit, listen, cp): (String, String, String, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(
        (sb.as_str(), tit.as_str(), listen.as_str(), cp),
        ("16MB", "on", "127.0.0.1", 1)
    );
    if is_root() {
        let pid_file = dir.path().join("data/postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        let pid = pid.lines().next().unwrap().trim();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        assert!(
            !uid_line.split_whitespace().nth(1).unwrap().eq("0"),
            "server must not run as root: {uid_line}"
        );
    }
    drop(client);

    // A second start finds the running server and leaves it alone.
    let again = Dbio::new("scratch start").opt("--dir", d).output();
    assert_exit(&again, 0);
    assert!(stdout(&again).contains(&dsn), "{}", stdout(&again));

    let out = Dbio::new("scratch stop").opt("--dir", d).output();
    assert_exit(&out, 0);
    let out = Dbio::new("scratch status").opt("--dir", d).output();
    assert_exit(&out, 0);
    assert!(stdout(&out).starts_with("stopped"), "{}", stdout(&out));
    let out = Dbio::new("scratch status")
        .opt("--dir", d)
        .arg("--dsn-only")
        .output();
    assert_exit(&out, 1);
    assert!(
        tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
            .await
            .is_err(),
        "server still answers after stop"
    );

    // The folder carries dbio's mark, so starting the stopped cluster again reuses it.
    assert!(dir.path().join("dbio-scratch.json").is_file());
    let out = Dbio::new("scratch start").opt("--dir", d).output();
    assert_exit(&out, 0);
    let out = Dbio::new("scratch status").opt("--dir", d).output();
    assert!(stdout(&out).starts_with("running"), "{}", stdout(&out));
    assert_exit(&Dbio::new("scratch stop").opt("--dir", d).output(), 0);
}

#[test]
fn scratch_without_binaries_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = Dbio::new("scratch start")
        .opt("--dir", d)
        .opt("--pg-bin", d)
        .output();
    assert_exit(&out, 2);
    assert!(
        dbio_tests::stderr(&out).contains("apt-get install postgresql"),
        "{}",
        dbio_tests::stderr(&out)
    );
}

/// `dbio` run in `cwd` (where `.dbio/scratch` is looked for) with a clean PG* environment
/// (see [`Dbio`]) and USER=root, which names no role on a scratch cluster.
fn dbio_in(cwd: &std::path::Path, cmd: Dbio) -> std::process::Output {
    cmd.env("USER", "root")
        .command()
        .current_dir(cwd)
        .output()
        .expect("dbio runs")
}

/// Schemas named `name` on the server at 127.0.0.1:5432, when the test can read it: its own
/// decoy cluster, or (as root) the system's server through its Unix socket as `postgres`.
fn schemas_on_5432(name: &str, decoy: bool) -> Option<i64> {
    let sql = format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{name}'");
    let out = if decoy {
        std::process::Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                "5432",
                "-U",
                "postgres",
                "-d",
                "postgres",
            ])
            .args(["-Atc", &sql])
            .output()
            .ok()?
    } else if is_root() {
        std::process::Command::new("runuser")
            .args(["-u", "postgres", "--", "psql", "-h", "/var/run/postgresql"])
            .args(["-p", "5432", "-d", "postgres", "-Atc", &sql])
            .output()
            .ok()?
    } else {
        return None;
    };
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

// #17: after `dbio scratch start`, a plain `dbio setup` loaded into the system PostgreSQL on
// localhost:5432, and with USER=root failed with "role root does not exist".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_after_scratch_start_lands_in_the_scratch_cluster_not_on_5432() {
    use std::os::unix::fs::PermissionsExt;
    let work = tempfile::Builder::new()
        .prefix("dbio-default-target-")
        .tempdir()
        .unwrap();
    // As root the server runs as `postgres`, which must reach .dbio/scratch inside it.
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A second server on 5432, where libpq's defaults point, when the port is free; else the
    // one already there (Debian's) plays that part.
    let decoy_dir = tempfile::Builder::new()
        .prefix("dbio-decoy-")
        .tempdir()
        .unwrap();
    let decoy = std::net::TcpListener::bind(("127.0.0.1", 5432)).is_ok() && {
        let mut o = dbio_postgres::ScratchOptions::new(decoy_dir.path());
        o.port = Some(5432);
        o.shared_buffers_bytes = 16 << 20;
        dbio_postgres::ScratchCluster::start(&o).is_ok()
    };
    struct Stop<'a>(&'a std::path::Path, &'a std::path::Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = dbio_postgres::ScratchCluster::destroy(&self.0.join(".dbio/scratch"));
            let _ = dbio_postgres::ScratchCluster::destroy(self.1);
        }
    }
    let _stop = Stop(work.path(), decoy_dir.path());

    let out = dbio_in(
        work.path(),
        Dbio::new("scratch start").opt("--shared-buffers", "16MB"),
    );
    assert_exit(&out, 0);
    let (cluster, running) =
        dbio_postgres::ScratchCluster::status(&work.path().join(".dbio/scratch")).unwrap();
    assert!(running);
    let port = cluster.state.port;
    assert_ne!(port, 5432);

    let prefix = format!("dflt{}x", std::process::id());
    let out = dbio_in(
        work.path(),
        Dbio::new("setup")
            .schemas(1)
            .scale("300blocks")
            .opt("--prefix", &prefix),
    );
    assert_exit(&out, 0);
    let err = dbio_tests::stderr(&out);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "target: scratch cluster .dbio/scratch (port {port},"
        )),
        "the target line comes first and names the scratch cluster:\n{err}"
    );

    // The data set is in the scratch cluster...
    let (client, conn) = tokio_postgres::connect(&cluster.dsn(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let schema = format!("{prefix}1");
    let rows: i64 = client
        .query_one(&format!("SELECT count(*) FROM {schema}.cf1"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 300);
    // ...and not on the server at 5432.
    match schemas_on_5432(&schema, decoy) {
        Some(n) => assert_eq!(n, 0, "{schema} must not exist on 127.0.0.1:5432"),
        None => eprintln!("no server on 5432 this test may read; checked the scratch side only"),
    }

    // `dbio config` shows the scratch cluster as target.dsn, from where the commands take it.
    let out = dbio_in(work.path(), Dbio::new("config").opt("--get", "target.dsn"));
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains(&format!("port={port}")),
        "{}",
        stdout(&out)
    );
    let out = dbio_in(work.path(), Dbio::new("config run"));
    assert_exit(&out, 0);
    let line = stdout(&out)
        .lines()
        .find(|l| l.starts_with("target.dsn "))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains(&format!("port={port}"))
            && line.contains("the scratch cluster running in .dbio/scratch"),
        "{line}"
    );

    // `scratch env` points libpq programs at the same cluster, as postgres, whatever USER says.
    let out = dbio_in(work.path(), Dbio::new("scratch env"));
    assert_exit(&out, 0);
    let env = stdout(&out);
    assert!(env.contains(&format!("export PGPORT={port}\n")), "{env}");
    assert!(env.contains("export PGUSER=postgres\n"), "{env}");
    let psql = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "eval \"$1\"; psql -Atc \"SELECT count(*) FROM {schema}.cf1\""
        ))
        .arg("bash")
        .arg(&env)
        .env("USER", "root")
        .env_remove("PGPASSFILE")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&psql.stdout).trim(),
        "300",
        "{}",
        String::from_utf8_lossy(&psql.stderr)
    );

    // A target given by flag or environment wins over the scratch cluster.
    let out = dbio_in(
        work.path(),
        Dbio::new("check")
            .dsn(cluster.dsn())
            .opt("--prefix", &prefix)
            .schemas(1)
            .scale("300blocks"),
    );
    assert_exit(&out, 0);
    assert!(
        dbio_tests::stderr(&out).contains("(from --dsn)"),
        "{}",
        dbio_tests::stderr(&out)
    );
    // Stopped, the scratch cluster is no target: the line says so and names libpq's default.
    assert_exit(&dbio_in(work.path(), Dbio::new("scratch stop")), 0);
    let out = dbio_in(
        work.path(),
        Dbio::new("check")
            .opt("--prefix", &prefix)
            .opt("--connect-timeout", "3s"),
    );
    let err = dbio_tests::stderr(&out);
    assert!(
        err.contains("libpq defaults") && err.contains("is stopped"),
        "{err}"
    );
    assert_exit(&dbio_in(work.path(), Dbio::new("scratch env")), 1);
}

#[test]
fn direct_io_before_16_is_refused_and_creates_nothing() {
    let old = [Some(std::path::PathBuf::from("/usr/lib/postgresql/15/bin"))]
        .into_iter()
        .chain([dbio_tests::pg_bin(14), dbio_tests::pg_bin(13)])
        .flatten()
        .find(|d| d.join("postgres").is_file())
        .expect("PostgreSQL 13, 14 or 15 server binaries (scripts/test.sh installs them)");
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("cluster");
    let out = Dbio::new("scratch start")
        .opt("--dir", &dir)
        .opt("--pg-bin", &old)
        .arg("--direct-io")
        .output();
    assert_exit(&out, 2);
    let err = dbio_tests::stderr(&out);
    assert!(
        err.contains("needs PostgreSQL 16 or later") && err.contains("--pg-bin"),
        "{err}"
    );
    assert!(!dir.exists(), "a refused start creates no folder");
}
