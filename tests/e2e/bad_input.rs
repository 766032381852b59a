//! Bad input and hostile conditions: each gets a one-line error naming the cause and what to
//! do, the right exit code, and no schema left looking complete.

use std::process::Command;
use std::time::{Duration, Instant};

use dbio_tests::{Dbio, TestCluster, assert_exit, require_root, stderr, stdout};

fn error_line(o: &std::process::Output) -> String {
    stderr(o)
        .lines()
        .find(|l| l.starts_with("dbio: error:"))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn unreachable_host_is_exit_2_naming_the_target() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dsn = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
    let out = Dbio::new("setup").dsn(&dsn).scale("100blocks").output();
    assert_exit(&out, 2);
    let line = error_line(&out);
    assert!(
        line.contains("cannot connect") && line.contains(&format!("port={port}")),
        "{line}"
    );
    assert!(line.contains("is the server running"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_and_missing_database_are_exit_2() {
    let pg = TestCluster::start_with(16, Some("Right-Pass-1"), &[]);
    let port = pg.cluster.state.port;
    let dsn =
        format!("host=127.0.0.1 port={port} user=postgres dbname=postgres password=Wr0ng-Pass-9");
    let out = Dbio::new("check").dsn(&dsn).output();
    assert_exit(&out, 2);
    let line = error_line(&out);
    assert!(line.contains("password authentication failed"), "{line}");
    assert!(line.contains("PGPASSWORD"), "{line}");
    assert!(
        !format!("{}{}", stdout(&out), stderr(&out)).contains("Wr0ng-Pass-9"),
        "password leaked"
    );

    // The right password through PGPASSWORD, a database that does not exist.
    let dsn = format!("host=127.0.0.1 port={port} user=postgres dbname=nosuchdb");
    let out = Dbio::new("check")
        .dsn(&dsn)
        .env("PGPASSWORD", "Right-Pass-1")
        .output();
    assert_exit(&out, 2);
    let line = error_line(&out);
    assert!(
        line.contains("does not exist") && line.contains("createdb nosuchdb"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_without_create_privilege_is_told_what_to_grant() {
    let pg = TestCluster::start(16);
    pg.client()
        .await
        .batch_execute("CREATE ROLE weak LOGIN")
        .await
        .unwrap();
    let dsn = format!(
        "host=127.0.0.1 port={} user=weak dbname=postgres",
        pg.cluster.state.port
    );
    let out = Dbio::new("setup")
        .dsn(&dsn)
        .schemas(1)
        .scale("100blocks")
        .quiet()
        .output();
    assert_exit(&out, 2);
    let line = error_line(&out);
    assert!(
        line.contains("may not create schemas") && line.contains("GRANT CREATE ON DATABASE"),
        "{line}"
    );
    let n: i64 = pg
        .client()
        .await
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'user1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

/// A small tmpfs mounted for a tablespace; unmounted when dropped (after the cluster stops).
struct SmallDisk {
    path: std::path::PathBuf,
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        let _ = std::fs::remove_dir(&self.path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(dbio_missing_root, ignore = "needs root")]
async fn disk_full_during_load_fails_and_leaves_the_schema_incomplete() {
    require_root("mounting a small tmpfs");
    let path = std::env::temp_dir().join(format!("dbio-small-disk-{}", std::process::id()));
    std::fs::create_dir_all(&path).unwrap();
    let disk = SmallDisk { path: path.clone() };
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=12m", "tmpfs"])
        .arg(&path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount tmpfs");
    assert!(
        Command::new("chown")
            .arg("postgres:")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    let pg = TestCluster::start(16);
    let c = pg.client().await;
    c.batch_execute(&format!(
        "CREATE TABLESPACE small LOCATION '{}'",
        path.display()
    ))
    .await
    .unwrap();
    let setup = |scale: &str, force: bool| {
        let setup = pg
            .dbio("setup")
            .schemas(1)
            .scale(scale)
            .opt("--tablespace", "small")
            .quiet();
        if force { setup.arg("--force") } else { setup }
    };
    // 32 MB into 12 MB: refused before anything is created.
    let out = setup("4000blocks", false).output();
    assert_exit(&out, 2);
    let line = error_line(&out);
    assert!(
        line.contains("does not fit") && line.contains("12.0 MiB free"),
        "{line}"
    );
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'user1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a refused setup created the schema");

    // 9.4 MB fits when checked; the disk fills after the check (the test holds a lock on the
    // old table that setup --force must drop, fills the disk, then lets it go).
    assert_exit(&setup("64blocks", false).output(), 0);
    let mut holder = pg.client().await;
    let tx = holder.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE user1.cf1 IN ACCESS SHARE MODE")
        .await
        .unwrap();
    let child = setup("1200blocks", true).spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'dbio-%' AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "setup never waited for the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Leave under 5 MB free.
    std::fs::write(path.join("filler"), vec![0u8; 7 << 20]).unwrap();
    tx.commit().await.unwrap();
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 1);
    let line = error_line(&out);
    assert!(
        line.contains("user1") && line.contains("53100") && line.contains("disk is full"),
        "{line}"
    );
    let _ = std::fs::remove_file(path.join("filler"));

    let out = pg.dbio("check").schemas(1).scale("1200blocks").output();
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("load incomplete"), "{}", stdout(&out));
    drop(c);
    drop(pg);
    drop(disk);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_setup_is_marked_incomplete_and_the_next_setup_finishes_it() {
    let pg = TestCluster::start(16);
    let args = pg.dbio("setup").schemas(1).scale("30000blocks").quiet();
    let mut child = args.spawn();
    let c = pg.client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mark: Option<String> = c
            .query_one("SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = 'user1' UNION ALL SELECT NULL LIMIT 1", &[])
            .await
            .unwrap()
            .get(0);
        if mark.is_some_and(|m| m.contains("loading")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "setup never marked user1 as loading"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // SAFETY: kill with a valid pid and signal number.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let start = Instant::now();
    let status = child.wait().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "setup took {:?} to stop",
        start.elapsed()
    );
    assert_eq!(status.code(), Some(1));

    let check = pg.dbio("check").schemas(1).scale("30000blocks");
    let out = check.output();
    assert_exit(&out, 1);
    assert!(stdout(&out).contains("load incomplete"), "{}", stdout(&out));

    assert_exit(&args.output(), 0);
    assert_exit(&check.output(), 0);
}

// Seen: `setup --parallel 64` against max_connections 40 failed with "...: db error" and left 5
// schemas marked `loading`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_with_more_loaders_than_connection_slots_is_refused_before_anything_is_created() {
    let pg = TestCluster::start_with(16, None, &[("max_connections", "40")]);
    let o = pg
        .dbio("setup")
        .schemas(64)
        .scale("64blocks")
        .opt("--parallel", "64")
        .output();
    assert_exit(&o, 2);
    let e = error_line(&o);
    assert!(
        e.contains("64 loader connections") && e.contains("max_connections is 40"),
        "{e}"
    );
    let c = pg.client().await;
    let schemas: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'user%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(schemas, 0, "nothing was created");
}

// Seen: `dbio check | head -1` panicked (exit 101, a backtrace); so did completions and
// history list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_ends_dbio_quietly() {
    let pg = TestCluster::start(16);
    pg.load("2", "256blocks");
    let store_dir = tempfile::tempdir().unwrap();
    let store = store_dir.path().join("h.db");
    // A store with one run in it, for `history list`.
    assert_exit(
        &pg.dbio("run")
            .schemas(2)
            .scale("256blocks")
            .readers(1)
            .run_time("1s")
            .quiet()
            .out(store_dir.path().join("run"))
            .arg("--record")
            .store(&store)
            .output(),
        0,
    );
    for args in [
        pg.dbio("check"),
        Dbio::new("completions").arg("bash"),
        Dbio::new("history list").store(&store),
    ] {
        // The reader has left before dbio writes its first line, as `head -1` leaves.
        let mut child = args.spawn();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let e = stderr(&o);
        assert!(
            matches!(o.status.code(), Some(0 | 141)),
            "{args:?}: {:?} {e}",
            o.status
        );
        assert!(
            !e.contains("panicked") && !e.contains("Broken pipe"),
            "{args:?}: {e}"
        );
    }
}

// Seen: escape sequences from a label, a forged mark and a history tag reached the terminal
// raw, and a U+202E override reordered a label; `-c /dev/zero` read 7 GB in 8 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_from_files_marks_and_tags_reaches_the_terminal_escaped_and_files_are_bounded() {
    let started = Instant::now();
    let o = Dbio::new("config").config("/dev/zero").output();
    assert_exit(&o, 2);
    assert!(
        error_line(&o).contains("larger than 1 MiB"),
        "{}",
        stderr(&o)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let pg = TestCluster::start(16);
    let c = pg.client().await;
    c.batch_execute(
        "CREATE SCHEMA evil1; COMMENT ON SCHEMA evil1 IS \
         '{\"dbio\":{\"format\":1,\"id\":\"x\\u001b]0;pwned\\u0007\\u202e\",\"prefix\":\"evil\",\"schema\":1,\"schemas\":1,\
         \"scale_blocks\":64,\"block_size\":8192,\"tablespace\":null,\"seed\":1,\"state\":\"complete\",\
         \"dbio_version\":\"\\u001b[2J\",\"created_at\":\"\\u202egnp.exe\",\"at\":\"\"}}'",
    )
    .await
    .unwrap();
    let o = pg.dbio("list").output();
    assert_exit(&o, 0);
    let shown = stdout(&o);
    assert!(
        shown.contains("\\u{1b}[2J") && shown.contains("\\u{202e}gnp.exe"),
        "{shown}"
    );
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    let o = pg.dbio("list").opt("--format", "json").output();
    let json = stdout(&o);
    assert!(
        !json.contains('\u{1b}') && !json.contains('\u{202e}'),
        "{json:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v.to_string().contains('\u{202e}'),
        "the JSON still holds the same text: {v}"
    );
}
