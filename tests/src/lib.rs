//! Helpers for dbio's end-to-end tests: a real scratch PostgreSQL per test (through the same
//! manager `dbio scratch` uses), a client to read the server's own state, and the real `dbio`
//! binary to drive.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dbio_postgres::scratch::{self, ScratchCluster, ScratchOptions};
use tokio_postgres::{Client, NoTls};

/// A scratch cluster that is stopped and deleted when the test ends, pass or fail.
pub struct TestCluster {
    pub cluster: ScratchCluster,
    dir: tempfile::TempDir,
}

impl TestCluster {
    /// A cluster with `shared_buffers_mb` MB of shared_buffers and track_io_timing on.
    pub fn start(shared_buffers_mb: u64) -> TestCluster {
        Self::start_with(shared_buffers_mb, None, &[])
    }

    pub fn start_with(
        shared_buffers_mb: u64,
        password: Option<&str>,
        settings: &[(&str, &str)],
    ) -> TestCluster {
        let dir = tempfile::Builder::new()
            .prefix("dbio-test-")
            .tempdir()
            .expect("a temporary folder");
        let mut opts = ScratchOptions::new(dir.path());
        opts.shared_buffers_bytes = shared_buffers_mb << 20;
        opts.password = password.map(str::to_string);
        opts.settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cluster =
            scratch::start(&opts).unwrap_or_else(|e| panic!("scratch cluster did not start: {e}"));
        TestCluster { cluster, dir }
    }

    pub fn dsn(&self) -> String {
        self.cluster.dsn()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A superuser connection for the test's own reads of server state.
    pub async fn client(&self) -> Client {
        self.client_as("postgres", None).await
    }

    pub async fn client_as(&self, user: &str, password: Option<&str>) -> Client {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host("127.0.0.1")
            .port(self.cluster.state.port)
            .user(user)
            .dbname("postgres")
            .application_name("e2e-test");
        if let Some(p) = password {
            cfg.password(p);
        }
        let (client, conn) = cfg.connect(NoTls).await.expect("test connection");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = scratch::destroy(self.dir.path());
    }
}

/// Path of the `dbio` binary that cargo built beside this test binary.
pub fn dbio_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/e2e-<hash> -> target/<profile>/dbio
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("dbio"))
        .expect("target folder");
    assert!(
        bin.is_file(),
        "{} is missing: build it first with `cargo build -p dbio-cli` (cargo test --workspace does)",
        bin.display()
    );
    bin
}

/// Runs `dbio args...` with a clean PG* environment and returns its output.
pub fn dbio(args: &[&str]) -> Output {
    dbio_env(args, &[])
}

pub fn dbio_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(dbio_bin());
    cmd.args(args);
    for k in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
        "PGPASSFILE",
        "DBIO_PG_BIN",
    ] {
        cmd.env_remove(k);
    }
    // No ~/.pgpass of the machine may leak into a test.
    cmd.env("PGPASSFILE", "/nonexistent/dbio-test-pgpass");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("dbio runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts the exit code, showing both streams when it differs.
pub fn assert_exit(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "exit code\n--- stdout\n{}\n--- stderr\n{}",
        stdout(o),
        stderr(o)
    );
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
