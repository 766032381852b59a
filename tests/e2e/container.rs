//! The nightly against a real PostgreSQL container (issue 27), with this host's podman and
//! images built here without a registry (deploy/images.sh; `dbio_tests::containers`): two
//! nights with device figures, the second recorded; a server that does not start; nothing
//! left behind. Container truth: a data folder bind-mounted into a container (its own PID
//! namespace) gives no figures from the host's process of the same pid; a memory-capped
//! server's RAM is its cap, in a container and on this host. The Kubernetes Jobs' command
//! lines run in dbio's image as the manifests run them. Every container shares the host's
//! network: none makes a container network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use dbio_tests::containers::{
    ContainerGuard, DBIO_IMAGE, PG_IMAGE, Podman, free_port, podman, require_podman,
    require_venv_tool, venv_bin,
};
use dbio_tests::{
    Dbio, TestCluster, assert_exit, dbio_bin, read_result, require_root, stderr, stdout,
};
use serde_json::Value;

/// The nightly tests check that nothing of theirs is left in the store: one at a time.
static NIGHTLY: Mutex<()> = Mutex::new(());

fn nightly_lock() -> std::sync::MutexGuard<'static, ()> {
    NIGHTLY.lock().unwrap_or_else(|p| p.into_inner())
}

fn require() -> &'static Podman {
    require_root("debootstrap, podman's store and cgroups need root");
    require_podman();
    podman()
}

/// A nightly config: a small data set (2 x 32 MiB, four times shared_buffers), two 3 s
/// steps; the server in PG_IMAGE on `port` with direct I/O, a 256 MiB cap and
/// listen_addresses holding a comma, plus `extra` settings (YAML lines).
fn night_config(dir: &Path, port: u16, extra: &str) -> PathBuf {
    let path = dir.join("nightly.yaml");
    std::fs::write(
        &path,
        format!(
            "data:\n  schemas: 2\n  scale: 4096blocks\nrun:\n  run_time: 3s\n  label: nightly-container\n\
             ramp:\n  readers: [1, 2]\n  writers: [0]\n\
             regress:\n  max_iops_drop_pct: 95\n  max_latency_rise_pct: off\n\
             container:\n  image: {PG_IMAGE}\n  port: {port}\n  shared_buffers: 16MB\n  memory: 256MB\n  start_timeout: 90s\n  settings:\n    track_io_timing: \"on\"\n    debug_io_direct: data\n    listen_addresses: \"127.0.0.1,::1\"\n{extra}"
        ),
    )
    .unwrap();
    path
}

/// PATH without the tests' venv, or with it first (its podman-compose then drives the night).
fn path_with_compose(compose: bool) -> String {
    let venv = venv_bin();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let rest = std::env::split_paths(&path).filter(|p| *p != venv);
    let dirs: Vec<PathBuf> = if compose {
        std::iter::once(venv.clone()).chain(rest).collect()
    } else {
        rest.collect()
    };
    std::env::join_paths(dirs)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// `dbio nightly --container podman` with this store.
fn nightly(p: &Podman, config: &Path, results: &Path, compose: bool) -> Output {
    let mut cmd = Command::new(dbio_bin());
    cmd.args(["nightly", "-c"])
        .arg(config)
        .args(["--container", "podman", "--results"])
        .arg(results)
        .env("PATH", path_with_compose(compose))
        .env_remove("DBIO_HISTORY_STORE")
        .env_remove("DBIO_TAG");
    for (k, v) in p.env() {
        cmd.env(k, v);
    }
    cmd.output().expect("dbio runs")
}

/// What the nightly may leave in the store: containers, volumes, pods named after it.
fn leftovers(p: &Podman) -> Vec<String> {
    ["containers", "volumes", "pods"]
        .iter()
        .flat_map(|kind| p.names(kind))
        .filter(|n| n.contains("dbio-nightly"))
        .collect()
}

/// The night folders under `results`, oldest first.
fn nights(results: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// Every step of a night: a real device under the data, at least 0.9 device reads per
/// database read and 0.9 of the backends' bytes fetched from storage (direct I/O), the
/// container's cap as the server's RAM.
fn assert_night_measured_the_device(night: &Path) {
    let steps: Vec<PathBuf> = std::fs::read_dir(night)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("result.json").is_file())
        .collect();
    assert_eq!(steps.len(), 2, "two steps in {}", night.display());
    for step in steps {
        let r = read_result(&step);
        let d = &r["device"];
        assert!(
            d.is_object(),
            "{}: no device figures: {}",
            step.display(),
            r["warnings"]
        );
        assert!(d["reads_per_s"].as_f64().unwrap() > 0.0, "{d}");
        let device_ratio = d["physical_read_ratio"].as_f64().unwrap();
        assert!(
            device_ratio >= 0.9,
            "device reads / DB reads {device_ratio}: {d}"
        );
        assert_eq!(d["cache_control"], "debug_io_direct=data", "{d}");
        let h = &r["host"];
        let host_ratio = h["physical_read_ratio"].as_f64().unwrap();
        assert!(host_ratio >= 0.9, "read_bytes / rchar {host_ratio}: {h}");
        assert_eq!(h["mem_limit_bytes"].as_u64(), Some(256 << 20), "{h}");
    }
    let log = std::fs::read_to_string(night.join("server.log")).expect("server.log kept");
    // listen_addresses=127.0.0.1,::1 reached the server as one value.
    assert!(
        log.contains("listening on IPv4 address \"127.0.0.1\"")
            && log.contains("listening on IPv6 address \"::1\""),
        "{log}"
    );
    assert!(night.join("junit.xml").is_file());
}

#[test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman),
    ignore = "needs root, podman, runc and debootstrap"
)]
fn images_are_built_from_nothing_without_a_registry() {
    let p = require();
    assert!(
        p.images_before.is_empty(),
        "the store was not empty before the build: {:?}",
        p.images_before
    );
    let images = p.names("images");
    for image in [dbio_tests::containers::BASE_IMAGE, PG_IMAGE, DBIO_IMAGE] {
        assert!(
            images.iter().any(|i| i == image),
            "{image} missing: {images:?}"
        );
    }
    let log = String::from_utf8_lossy(&p.build.stderr);
    eprintln!(
        "images built in {:.0} s: {}",
        p.build_seconds,
        log.lines()
            .filter(|l| l.contains(" built in "))
            .collect::<Vec<_>>()
            .join("; ")
    );
    // debootstrap took the mirror this machine's apt uses.
    assert!(
        log.contains("debootstrap --variant=minbase trixie from http"),
        "{log}"
    );
    // The images run: dbio's is this dbio, as its non-root user; the server is Debian's 17.
    let version = p.run(&["run", "--rm", "--network", "host", DBIO_IMAGE, "--version"]);
    assert_eq!(
        version.trim(),
        format!("dbio {}", env!("CARGO_PKG_VERSION"))
    );
    let id = p.run(&[
        "run",
        "--rm",
        "--network",
        "host",
        "--entrypoint",
        "id",
        DBIO_IMAGE,
        "-u",
    ]);
    assert_eq!(id.trim(), "65532");
    let pg = p.run(&[
        "run",
        "--rm",
        "--network",
        "host",
        PG_IMAGE,
        "postgres",
        "--version",
    ]);
    assert!(pg.starts_with("postgres (PostgreSQL) 17."), "{pg}");
    // The base is small; PostgreSQL's packages make the server's image.
    assert!(p.image_size(dbio_tests::containers::BASE_IMAGE) < 200_000_000);
}

#[test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman, dbio_missing_podman_compose),
    ignore = "needs root, podman, runc, debootstrap and podman-compose (scripts/test.sh)"
)]
fn two_nights_in_a_real_postgres_container_measure_the_device_and_leave_nothing_behind() {
    let p = require();
    require_venv_tool("podman-compose");
    let _one = nightly_lock();
    let networks = p.names("networks");
    let work = tempfile::Builder::new()
        .prefix("dbio-night-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let config = night_config(work.path(), free_port(), "");
    let results = work.path().join("results");

    // Night 1: plain `podman run` (no compose on PATH).
    let first = nightly(p, &config, &results, false);
    assert_exit(&first, 0);
    let err = stderr(&first);
    assert!(
        err.contains("started with podman run (podman-compose is not installed)"),
        "{err}"
    );
    assert!(err.contains("history check exit 0"), "{err}");
    assert_eq!(leftovers(p), Vec::<String>::new(), "after night 1");

    // Night 2: podman-compose from the venv.
    let second = nightly(p, &config, &results, true);
    assert_exit(&second, 0);
    let err = stderr(&second);
    assert!(err.contains("started with podman-compose up"), "{err}");
    assert!(err.contains("history check exit 0"), "{err}");
    assert_eq!(leftovers(p), Vec::<String>::new(), "after night 2");
    assert_eq!(
        p.names("networks"),
        networks,
        "no container network was made"
    );

    let nights = nights(&results);
    assert_eq!(nights.len(), 2, "{nights:?}");
    for night in &nights {
        assert_night_measured_the_device(night);
    }
    // The second night is recorded beside the first: one series, two good runs.
    let store = results.join("history.sqlite");
    let list = Dbio::new("history list").store(&store).output();
    assert_exit(&list, 0);
    let text = stdout(&list);
    // Two nights, each with its platform canary (a calibration on the data volume's device).
    assert!(text.contains("4 run(s)"), "{text}");
    assert_eq!(text.matches("platform [").count(), 2, "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nightly-container ["))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows.iter().all(|r| r.contains(" ok ")), "{text}");
    let series = |r: &str| {
        r.rsplit_once("nightly-container")
            .map(|(_, s)| s.to_string())
    };
    assert_eq!(series(rows[0]), series(rows[1]), "one series: {text}");
}

// A server that cannot start (a setting PostgreSQL does not know) is exit 2, with its own
// FATAL line from the container's log in the output; a missing image and a port in use are
// exit 2 before anything starts. Nothing is left behind.
#[test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman),
    ignore = "needs root, podman, runc and debootstrap"
)]
fn a_server_that_fails_to_start_is_exit_2_with_its_log_lines() {
    let p = require();
    let _one = nightly_lock();
    let work = tempfile::Builder::new()
        .prefix("dbio-night-bad-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let results = work.path().join("results");
    let config = night_config(work.path(), free_port(), "    no_such_setting: \"1\"\n");
    let o = nightly(p, &config, &results, false);
    assert_exit(&o, 2);
    let err = stderr(&o);
    // Podman names the state `stopped` for a moment before `exited` (seen in a CI run);
    // either way the container ended, with its exit code.
    assert!(
        (err.contains("ended (status exited") || err.contains("ended (status stopped"))
            && err.contains("exit code 1)")
            && err.contains("before it accepted connections"),
        "{err}"
    );
    assert!(
        err.contains("FATAL:  unrecognized configuration parameter \"no_such_setting\""),
        "the server's own log line: {err}"
    );
    assert_eq!(leftovers(p), Vec::<String>::new());

    let port = free_port();
    let missing = night_config(work.path(), port, "");
    let text = std::fs::read_to_string(&missing)
        .unwrap()
        .replace(PG_IMAGE, "localhost/dbio-no-such-image:1");
    std::fs::write(&missing, text).unwrap();
    let o = nightly(p, &missing, &results, false);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("deploy/images.sh"), "{}", stderr(&o));

    let taken = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let config = night_config(work.path(), taken.local_addr().unwrap().port(), "");
    let o = nightly(p, &config, &results, false);
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("is taken"), "{}", stderr(&o));
    assert_eq!(leftovers(p), Vec::<String>::new());
    assert!(!results.exists() || nights(&results).is_empty());
}

/// A superuser connection to a server on 127.0.0.1:`port`, once it answers (60 s at most).
async fn connect_when_up(
    port: u16,
    password: &str,
    p: &Podman,
    name: &str,
) -> tokio_postgres::Client {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host("127.0.0.1")
        .port(port)
        .user("postgres")
        .password(password)
        .dbname("postgres")
        .connect_timeout(Duration::from_secs(2));
    for _ in 0..120 {
        if let Ok((client, conn)) = cfg.connect(tokio_postgres::NoTls).await {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            return client;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "the server in {name} did not come up: {}",
        p.run(&["logs", "--tail", "30", name])
    );
}

/// `podman run -d` of PG_IMAGE with the host's network and `args` before the image; the
/// server listens on 127.0.0.1:`port` with 16 MB of shared_buffers.
fn start_server<'a>(p: &'a Podman, tag: &str, port: u16, args: &[&str]) -> ContainerGuard<'a> {
    let name = format!("dbio-e2e-{tag}-{}", std::process::id());
    let guard = ContainerGuard {
        podman: p,
        name: name.clone(),
    };
    let mut cmd = p.command();
    cmd.args(["run", "--detach", "--name", &name, "--network", "host"])
        .args(["--env", "POSTGRES_PASSWORD=e2e-secret"])
        .args(args)
        .args([
            PG_IMAGE,
            "postgres",
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
        ])
        .arg(format!("port={port}"))
        .args(["-c", "shared_buffers=16MB"]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    guard
}

/// A role that may not read the server's files (no pg_read_server_files): host figures only
/// from this host, for a server proven to run here.
async fn bench_role(c: &tokio_postgres::Client) -> &'static str {
    c.batch_execute(
        "CREATE ROLE bench LOGIN PASSWORD 'bench'; \
         GRANT pg_monitor, pg_read_all_settings TO bench; \
         GRANT CREATE ON DATABASE postgres TO bench;",
    )
    .await
    .unwrap();
    "user=bench password=bench dbname=postgres"
}

// Before: with the data folder bind-mounted at the same path, postmaster.pid (read here)
// named the container's pid; this host's process of that number (a kernel thread, or init)
// was taken for the server, and its /proc/<pid>/io gave a 0.00 physical-read ratio and a
// page-cache warning. Now the pid must be the server's process: no host figures at all.
#[tokio::test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman),
    ignore = "needs root, podman, runc and debootstrap"
)]
async fn a_bind_mounted_data_folder_in_its_own_pid_namespace_gets_no_figures_from_the_wrong_process()
 {
    let p = require();
    let work = tempfile::Builder::new()
        .prefix("dbio-bind-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let data = work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mount = format!("{}:{}", data.display(), data.display());
    let pgdata = format!("PGDATA={}", data.display());
    let port = free_port();
    let server = start_server(p, "bind", port, &["--volume", &mount, "--env", &pgdata]);
    let c = connect_when_up(port, "e2e-secret", p, &server.name).await;
    let role = bench_role(&c).await;
    // The premise: this host reads the server's postmaster.pid at the same path, and the pid
    // in it (the container's PID 1) is a process here too, but not the server.
    let pid_file = std::fs::read_to_string(data.join("postmaster.pid")).unwrap();
    let pid = pid_file.lines().next().unwrap().trim().to_string();
    assert_eq!(pid, "1", "{pid_file}");
    assert!(Path::new("/proc/1/stat").exists());

    let dsn = format!("host=127.0.0.1 port={port} {role}");
    let setup = Dbio::new("setup")
        .dsn(&dsn)
        .schemas(1)
        .scale("1000blocks")
        .output();
    assert_exit(&setup, 0);
    let out = work.path().join("run");
    let run = Dbio::new("run")
        .dsn(&dsn)
        .readers(1)
        .run_time("2s")
        .out(&out)
        .quiet()
        .output();
    assert_exit(&run, 0);
    let r = read_result(&out);
    assert!(
        r["host"].is_null(),
        "host figures from the wrong process: {}",
        r["host"]
    );
    assert!(r["device"].is_null(), "{}", r["device"]);
    let warnings = r["warnings"].to_string();
    assert!(
        // Its working folder (/), or where that may not be read, its command.
        warnings.contains("names pid 1, but that process ")
            && warnings.contains(
                "another PID namespace (a container?) and this host's /proc/1 is not its process"
            ),
        "{warnings}"
    );
    assert!(!warnings.contains("page cache served"), "{warnings}");
    // Nothing from host pid 1 either in the setup's sizing: no RAM was guessed.
    assert!(!stdout(&setup).contains("RAM"), "{}", stdout(&setup));
}

// In a container capped at 256 MiB /proc/meminfo is the host's (GiBs): the sizing warning
// and the result's host figures take the cap from the server's own cgroup.
#[tokio::test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman),
    ignore = "needs root, podman, runc and debootstrap"
)]
async fn a_memory_capped_container_s_ram_is_the_cap() {
    let p = require();
    let port = free_port();
    let server = start_server(
        p,
        "capped",
        port,
        &["--memory", "256m", "--memory-swap", "256m"],
    );
    let _c = connect_when_up(port, "e2e-secret", p, &server.name).await;
    let dsn =
        format!("host=127.0.0.1 port={port} user=postgres password=e2e-secret dbname=postgres");
    // 64 MiB: four times shared_buffers, within the cap, so a page cache capped there holds it.
    let setup = Dbio::new("setup")
        .dsn(&dsn)
        .schemas(1)
        .scale("8192blocks")
        .output();
    assert_exit(&setup, 0);
    let text = stdout(&setup) + &stderr(&setup);
    assert!(
        text.contains(
            "is smaller than the server's memory cap (256.0 MiB, its cgroup's /sys/fs/cgroup/memory"
        ),
        "{text}"
    );
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("run");
    let run = Dbio::new("run")
        .dsn(&dsn)
        .readers(1)
        .run_time("2s")
        .out(&out)
        .quiet()
        .output();
    assert_exit(&run, 0);
    let r = read_result(&out);
    let h = &r["host"];
    assert_eq!(h["mem_limit_bytes"].as_u64(), Some(256 << 20), "{h}");
    assert!(h["mem_total_bytes"].as_u64().unwrap() > 1 << 30, "{h}");
    assert!(
        h["notes"]
            .to_string()
            .contains("capped at 256.0 MiB by its cgroup"),
        "{h}"
    );
    assert!(
        r["warnings"]
            .to_string()
            .contains("the server's memory cap (256.0 MiB"),
        "{}",
        r["warnings"]
    );
}

/// A cgroup v1 memory group capping the postmaster of `pg` (and the backends it forks from
/// now on); the processes go back to the root group and the group is removed on drop.
struct MemoryCap {
    dir: PathBuf,
}

impl MemoryCap {
    fn new(pg: &TestCluster, bytes: u64) -> MemoryCap {
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/memory/dbio-test-memcap-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a memory cgroup (cgroups v1, root)");
        std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string()).unwrap();
        let pid_file =
            std::fs::read_to_string(pg.cluster.data_dir().join("postmaster.pid")).unwrap();
        let postmaster = pid_file.lines().next().unwrap().trim().to_string();
        std::fs::write(dir.join("cgroup.procs"), &postmaster).unwrap();
        MemoryCap { dir }
    }
}

impl Drop for MemoryCap {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write("/sys/fs/cgroup/memory/cgroup.procs", pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

// The same from this host's side: a server proven local, read as a role without the
// server's files, in a memory cgroup of 300 MiB: the RAM is the cap, found from the
// postmaster's /proc/<pid>/cgroup.
#[tokio::test]
#[cfg_attr(dbio_missing_root, ignore = "needs root (a memory cgroup)")]
async fn a_local_server_in_a_memory_cgroup_has_the_cap_as_its_ram() {
    require_root("a memory cgroup");
    let pg = TestCluster::start(16);
    let cap = MemoryCap::new(&pg, 300 << 20);
    let c = pg.client().await;
    let role = bench_role(&c).await;
    let dsn = format!("host=127.0.0.1 port={} {role}", pg.cluster.state.port);
    let setup = Dbio::new("setup")
        .dsn(&dsn)
        .schemas(1)
        .scale("8192blocks")
        .output();
    assert_exit(&setup, 0);
    let text = stdout(&setup);
    assert!(
        text.contains(&format!(
            "is smaller than the server's memory cap (300.0 MiB, its cgroup's {}/memory.limit_in_bytes",
            cap.dir.display()
        )),
        "{text}"
    );
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("run");
    let run = Dbio::new("run")
        .dsn(&dsn)
        .readers(1)
        .run_time("2s")
        .out(&out)
        .quiet()
        .output();
    assert_exit(&run, 0);
    let r = read_result(&out);
    let h = &r["host"];
    assert!(
        h["source"]
            .as_str()
            .unwrap()
            .contains("server proven local")
            && h["source"]
                .as_str()
                .unwrap()
                .contains("working folder is the data directory"),
        "{h}"
    );
    assert_eq!(h["mem_limit_bytes"].as_u64(), Some(300 << 20), "{h}");
    drop(cap);
}

/// The container of a Job's pod: its shell line (command + args) and environment.
fn job_container(path: &str) -> (String, Vec<(String, String)>) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let job: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo.join(path)).unwrap()).unwrap();
    let c = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["command"], serde_json::json!(["/bin/sh", "-c"]), "{path}");
    let script = c["args"][0].as_str().unwrap().to_string();
    let env = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (script, env)
}

/// Runs a Job's pod as the manifest says, in dbio's image: its user (non-root), a read-only
/// root file system with /tmp an empty folder, /config and /results mounted, the Secret's
/// libpq variables, the host's network.
fn run_pod<'a>(
    p: &'a Podman,
    name: &str,
    script: &str,
    env: &[(String, String)],
    mounts: &[String],
) -> ContainerGuard<'a> {
    let guard = ContainerGuard {
        podman: p,
        name: name.to_string(),
    };
    let mut cmd = p.command();
    cmd.args(["run", "--detach", "--name", name, "--network", "host"])
        .args(["--user", "65532:65532", "--read-only", "--tmpfs", "/tmp"]);
    for m in mounts {
        cmd.args(["--volume", m]);
    }
    for (k, v) in env {
        cmd.arg("--env").arg(format!("{k}={v}"));
    }
    cmd.args(["--entrypoint", "/bin/sh", DBIO_IMAGE, "-c", script]);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    guard
}

// The sharded Job's four pods and then the merge Job's, each run as its manifest runs it
// (command line, environment, non-root user, read-only root file system) in dbio's image,
// against a scratch server: one merged result of the four shards.
#[tokio::test]
#[cfg_attr(
    any(dbio_missing_root, dbio_missing_podman),
    ignore = "needs root, podman, runc and debootstrap"
)]
async fn the_kubernetes_jobs_command_lines_run_in_dbio_s_image() {
    let p = require();
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let work = tempfile::Builder::new()
        .prefix("dbio-pods-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let config = work.path().join("config");
    let results = work.path().join("results");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::create_dir_all(&results).unwrap();
    std::fs::write(
        config.join("run.yaml"),
        "data:\n  schemas: 1\nrun:\n  readers: 4\n  run_time: 3s\n",
    )
    .unwrap();
    // fsGroup's effect: the claim is writable to the pods' group.
    let chown = Command::new("chown")
        .args(["-R", "65532:65532"])
        .arg(&results)
        .status()
        .unwrap();
    assert!(chown.success());
    let mounts = [
        format!("{}:/config:ro", config.display()),
        format!("{}:/results", results.display()),
    ];
    let secret = [
        ("PGHOST", "127.0.0.1".to_string()),
        ("PGPORT", pg.cluster.state.port.to_string()),
        ("PGUSER", "postgres".to_string()),
        ("PGDATABASE", "postgres".to_string()),
        ("PGSSLMODE", "disable".to_string()),
    ];
    let (script, manifest_env) = job_container("deploy/k8s/dbio-sharded-job.yaml");
    let shards: usize = manifest_env
        .iter()
        .find(|(k, _)| k == "SHARDS")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap();
    // What the README's sed does: the shared start a little ahead (four pods to start and
    // connect, on a busy host).
    let start_at = (chrono::Utc::now() + chrono::Duration::seconds(30))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut pods = Vec::new();
    for i in 0..shards {
        let mut env: Vec<(String, String)> = manifest_env
            .iter()
            .map(|(k, v)| {
                let v = if k == "START_AT" {
                    start_at.clone()
                } else {
                    v.clone()
                };
                (k.clone(), v)
            })
            .collect();
        env.extend(secret.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env.push(("JOB_COMPLETION_INDEX".into(), i.to_string()));
        pods.push(run_pod(
            p,
            &format!("dbio-e2e-shard-{i}-{}", std::process::id()),
            &script,
            &env,
            &mounts,
        ));
    }
    for pod in &pods {
        let code = p.run(&["wait", &pod.name]);
        assert_eq!(
            code.trim(),
            "0",
            "{}: {}",
            pod.name,
            p.run(&["logs", &pod.name])
        );
    }
    let (merge_script, merge_env) = job_container("deploy/k8s/dbio-merge-job.yaml");
    let merge = run_pod(
        p,
        &format!("dbio-e2e-merge-{}", std::process::id()),
        &merge_script,
        &merge_env,
        &mounts,
    );
    let code = p.run(&["wait", &merge.name]);
    assert_eq!(code.trim(), "0", "{}", p.run(&["logs", &merge.name]));
    let merged = read_result(&results.join("dbio-sharded/merged"));
    assert_eq!(
        merged["config"]["run"]["readers"], 4,
        "{}",
        merged["config"]["run"]
    );
    assert!(
        merged["client"].to_string().contains("ops"),
        "{}",
        merged["client"]
    );
}
