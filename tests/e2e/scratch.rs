//! `dbio scratch start|status|stop` round trip on the real binary.

use dbio_tests::{assert_exit, dbio, is_root, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scratch_start_status_stop_round_trip() {
    let dir = tempfile::Builder::new()
        .prefix("dbio-scratch-")
        .tempdir()
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let out = dbio(&["scratch", "start", "--dir", d, "--shared-buffers", "16MB"]);
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("shared_buffers 16.0 MiB"),
        "{}",
        stdout(&out)
    );

    let out = dbio(&["scratch", "status", "--dir", d, "--dsn-only"]);
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
    let again = dbio(&["scratch", "start", "--dir", d]);
    assert_exit(&again, 0);
    assert!(stdout(&again).contains(&dsn), "{}", stdout(&again));

    let out = dbio(&["scratch", "stop", "--dir", d]);
    assert_exit(&out, 0);
    let out = dbio(&["scratch", "status", "--dir", d]);
    assert_exit(&out, 0);
    assert!(stdout(&out).starts_with("stopped"), "{}", stdout(&out));
    let out = dbio(&["scratch", "status", "--dir", d, "--dsn-only"]);
    assert_exit(&out, 1);
    assert!(
        tokio_postgres::connect(&dsn, tokio_postgres::NoTls)
            .await
            .is_err(),
        "server still answers after stop"
    );

    // The folder carries dbio's mark, so starting the stopped cluster again reuses it.
    assert!(dir.path().join("dbio-scratch.json").is_file());
    let out = dbio(&["scratch", "start", "--dir", d]);
    assert_exit(&out, 0);
    let out = dbio(&["scratch", "status", "--dir", d]);
    assert!(stdout(&out).starts_with("running"), "{}", stdout(&out));
    assert_exit(&dbio(&["scratch", "stop", "--dir", d]), 0);
}

#[test]
fn scratch_without_binaries_says_how_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let out = dbio(&["scratch", "start", "--dir", d, "--pg-bin", d]);
    assert_exit(&out, 2);
    assert!(
        dbio_tests::stderr(&out).contains("apt-get install postgresql"),
        "{}",
        dbio_tests::stderr(&out)
    );
}
