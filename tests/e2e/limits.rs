//! What limited a run (issue 31): a cgroup I/O cap named when the server's cgroup is readable
//! and seen in a ramp's shape when it is not; the page cache and storage told apart by the
//! relations' residency; a saturated client; one read in flight per reader on the index path.

use std::path::Path;

use dbio_tests::{
    BlkioCgroup, Dbio, NamespaceOptions, NamespacedServer, TestCluster, assert_exit, num,
    read_result, require_pg, require_root,
};
use serde_json::Value;

fn run(dsn: &str, out: &Path, args: &[&str]) -> Value {
    let run = Dbio::new("run").dsn(dsn).quiet().out(out).args(args);
    assert_exit(&run.output(), 0);
    read_result(out)
}

fn limiter(r: &Value) -> String {
    r["limiter"]["limiter"].as_str().unwrap_or("").to_string()
}

fn line(r: &Value) -> String {
    r["limiter"]["line"].as_str().unwrap_or("").to_string()
}

/// % of the data set's table blocks in `cache` (`shared_buffers_blocks`,
/// `page_cache_blocks`) at `when` (`before`, `after`).
fn table_pct(r: &Value, when: &str, cache: &str) -> f64 {
    let rels = r["limits"]["residency"]["relations"]
        .as_array()
        .unwrap_or_else(|| panic!("no residency: {}", r["limits"]));
    let (mut n, mut of) = (0.0, 0.0);
    for rel in rels.iter().filter(|x| x["kind"] == "table") {
        n += rel[when][cache]
            .as_f64()
            .unwrap_or_else(|| panic!("{when}.{cache} is null: {}", r["limits"]));
        of += rel["blocks"].as_f64().unwrap();
    }
    assert!(of > 0.0, "no table blocks: {}", r["limits"]);
    100.0 * n / of
}

/// Reads a relation's files on this host (root): they are in the page cache afterwards.
async fn warm(pg: &TestCluster, relations: &[&str]) {
    let c = pg.client().await;
    let dir: String = c
        .query_one("SHOW data_directory", &[])
        .await
        .unwrap()
        .get(0);
    for rel in relations {
        let path: String = c
            .query_one("SELECT pg_relation_filepath($1::text::regclass)", &[rel])
            .await
            .unwrap()
            .get(0);
        std::fs::read(Path::new(&dir).join(path)).unwrap();
    }
}

// A cgroup v1 blkio throttle of 400 read IOPS on the server's device: with the cgroup's files
// readable the run says "capped at 400 IOPS" and names the file; with them hidden from the
// server, a ramp's device IOPS stay flat at 400 while the read latency rises with the
// readers, and the ramp says so instead of presenting 400 as the storage's figure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_root,
    ignore = "needs root (loop device, mount namespace, blkio cgroup)"
)]
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 binaries: scripts/test.sh installs them"
)]
async fn a_throttled_device_is_capped_by_its_cgroup_and_flat_in_a_ramp_when_hidden() {
    require_root("a loop device, a mount namespace and a blkio cgroup need root");
    let bin = require_pg(17);
    // Declared first: dropped after the server that runs in it.
    let cgroup = BlkioCgroup::new("dbio-test-cap");
    let args = format!("--pg-bin {} --direct-io", bin.display());
    let mut server = NamespacedServer::start_opts(&NamespaceOptions {
        scratch_args: &args,
        blkio_cgroup: Some(&cgroup.path),
    });
    server.learn_postmaster().await;
    let data = ["--schemas", "1", "--scale", "4000blocks"];
    assert_exit(&server.dbio("setup").quiet().args(data).output(), 0);
    cgroup.throttle_read_iops(&server.dev_number(), 400);

    let out = tempfile::tempdir().unwrap();
    let mut args = vec!["--readers", "2", "--work-unit", "8", "--run-time", "3s"];
    args.extend(data);
    let r = run(&server.dsn, &out.path().join("run"), &args);
    let caps = &r["limits"]["caps"];
    assert_eq!(caps["cgroup_version"], "v1", "{caps}");
    assert_eq!(caps["limits"][0]["kind"], "read_iops", "{caps}");
    assert_eq!(caps["limits"][0]["value"].as_u64(), Some(400), "{caps}");
    let iops = num(&r, &["device", "reads_per_s"]);
    assert!(
        (300.0..=440.0).contains(&iops),
        "device reads/s {iops} under a 400 IOPS throttle"
    );
    assert_eq!(limiter(&r), "cap", "{}", r["limiter"]);
    assert!(
        line(&r).starts_with("capped at 400 IOPS (blkio.throttle.read_iops_device"),
        "{}",
        line(&r)
    );
    let report = std::fs::read_to_string(out.path().join("run/report.txt")).unwrap();
    assert!(report.contains("limited by capped at 400 IOPS"), "{report}");

    // The server may no longer read its cgroup's files (a container without them).
    std::fs::set_permissions(
        &cgroup.path,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let ramp_dir = out.path().join("ramp");
    let ramp = server
        .dbio("ramp")
        .readers("1,2,4")
        .opt("--work-unit", "8")
        .run_time("3s")
        .quiet()
        .out(&ramp_dir)
        .args(data);
    assert_exit(&ramp.output(), 0);
    let step = read_result(&ramp_dir.join("step-01-r1-w0"));
    assert!(step["limits"]["caps"].is_null(), "{}", step["limits"]);
    let why = step["limits"]["null_reasons"]["caps"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains("may not read"), "{why}");
    let ramp: Value =
        serde_json::from_str(&std::fs::read_to_string(ramp_dir.join("ramp.json")).unwrap())
            .unwrap();
    let txt = std::fs::read_to_string(ramp_dir.join("ramp.txt")).unwrap();
    eprintln!("{}\n{txt}", line(&r));
    for s in ramp["steps"].as_array().unwrap() {
        assert_eq!(s["limiter"]["limiter"], "cap", "{txt}");
        assert!(
            s["limiter"]["line"]
                .as_str()
                .unwrap_or("")
                .starts_with("flat at "),
            "{}",
            s["limiter"]
        );
    }
    assert!(
        txt.contains("a provisioned limit?") && txt.contains("from r1-w0 to r4-w0"),
        "{txt}"
    );
}

// A data set read into the page cache (no direct I/O): its blocks are resident there and the
// run says the page cache, not the storage, served it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_root,
    ignore = "needs root (the server's files read on this host)"
)]
async fn a_data_set_in_the_page_cache_is_limited_by_the_page_cache() {
    require_root("the server's data files are read on this host");
    let pg = TestCluster::start(16);
    pg.load("1", "8000blocks");
    let out = tempfile::tempdir().unwrap();
    // Another process on this host may drop the page cache (a test's --drop-caches): a run
    // that starts cold is warmed again and repeated once.
    let mut r = Value::Null;
    let mut dir = out.path().to_path_buf();
    for attempt in 1..=3 {
        warm(&pg, &["user1.cf1", "user1.i_cf1"]).await;
        dir = out.path().join(format!("run{attempt}"));
        r = run(
            &pg.dsn(),
            &dir,
            &[
                "--schemas",
                "1",
                "--scale",
                "8000blocks",
                "--readers",
                "1",
                "--run-time",
                "2s",
            ],
        );
        if table_pct(&r, "before", "page_cache_blocks") >= 90.0 {
            break;
        }
    }
    let before = table_pct(&r, "before", "page_cache_blocks");
    assert!(
        before >= 90.0,
        "page-cache residency {before}%: {}",
        r["limits"]
    );
    assert!(table_pct(&r, "after", "page_cache_blocks") >= 90.0);
    // shared_buffers (16 MB) holds at most a quarter of the 64 MB table.
    let sb = table_pct(&r, "after", "shared_buffers_blocks");
    assert!(sb > 0.0 && sb <= 30.0, "shared_buffers residency {sb}%");
    assert_eq!(limiter(&r), "page_cache", "{}", r["limiter"]);
    let residency = &r["limits"]["residency"];
    assert!(
        residency["page_cache_source"]
            .as_str()
            .unwrap_or("")
            .contains("cachestat(2)"),
        "{residency}"
    );
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("limited by page cache: "), "{report}");
    assert!(
        report.contains("cache residency (blocks of 8192 B") && report.contains("user1.cf1"),
        "{report}"
    );
}

// A server on another host (its own mount namespace: its files are not on this one): the
// page-cache residency comes from pgfincore on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_root,
    ignore = "needs root (loop device, mount namespace)"
)]
#[cfg_attr(
    dbio_missing_pgfincore,
    ignore = "needs pgfincore (postgresql-15-pgfincore): scripts/test.sh installs it"
)]
async fn a_remote_servers_page_cache_is_read_through_pgfincore() {
    require_root("a loop device in a mount namespace needs root");
    let mut server = NamespacedServer::start();
    server.learn_postmaster().await;
    let (c, conn) = tokio_postgres::connect(&server.dsn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    c.batch_execute("CREATE EXTENSION pgfincore").await.unwrap();
    let data = ["--schemas", "1", "--scale", "4000blocks"];
    assert_exit(&server.dbio("setup").quiet().args(data).output(), 0);
    let out = tempfile::tempdir().unwrap();
    let mut r = Value::Null;
    for attempt in 1..=3 {
        // A sequential scan reads the table through the page cache.
        c.batch_execute("SELECT sum(length(c2)) FROM user1.cf1")
            .await
            .unwrap();
        let mut args = vec!["--readers", "1", "--run-time", "2s"];
        args.extend(data);
        r = run(
            &server.dsn,
            &out.path().join(format!("run{attempt}")),
            &args,
        );
        if table_pct(&r, "before", "page_cache_blocks") >= 90.0 {
            break;
        }
    }
    let residency = &r["limits"]["residency"];
    assert_eq!(
        residency["page_cache_source"], "pgfincore (on the server)",
        "{residency}"
    );
    let before = table_pct(&r, "before", "page_cache_blocks");
    assert!(
        before >= 90.0,
        "page-cache residency {before}%: {residency}"
    );
    assert!(residency["both_source"].is_null(), "{residency}");
    assert_eq!(limiter(&r), "page_cache", "{}", r["limiter"]);
}

// A direct-I/O run: nothing of the data set is in the page cache and the sessions wait on
// the device.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_root,
    ignore = "needs root (the server's files read on this host)"
)]
#[cfg_attr(
    dbio_missing_pg17,
    ignore = "needs PostgreSQL 17 binaries: scripts/test.sh installs them"
)]
async fn a_direct_io_run_is_limited_by_storage() {
    require_root("the server's data files are read on this host");
    let pg = TestCluster::start_version(17, 16, &[("debug_io_direct", "data")]);
    pg.load("1", "8000blocks");
    let out = tempfile::tempdir().unwrap();
    let r = run(
        &pg.dsn(),
        out.path(),
        &[
            "--schemas",
            "1",
            "--scale",
            "8000blocks",
            "--readers",
            "2",
            "--run-time",
            "3s",
        ],
    );
    for when in ["before", "after"] {
        let pc = table_pct(&r, when, "page_cache_blocks");
        assert!(
            pc <= 5.0,
            "page-cache residency {when} {pc}%: {}",
            r["limits"]
        );
    }
    assert_eq!(limiter(&r), "storage", "{}", r["limiter"]);
    let report = std::fs::read_to_string(out.path().join("report.txt")).unwrap();
    assert!(report.contains("limited by storage: device "), "{report}");
    assert!(
        report.contains("physical-read ratio: at the window's start"),
        "{report}"
    );
}

// Many readers doing one-key reads of a data set in shared_buffers saturate this host's
// CPU with dbio's own work while the sessions sit idle in the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_on_few_cores_are_limited_by_the_client_cpu() {
    let _host = dbio_tests::host_load_lock();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let readers = (8 * cores).max(16).to_string();
    let pg = TestCluster::start(32);
    pg.load("1", "1000blocks");
    let out = tempfile::tempdir().unwrap();
    let r = run(
        &pg.dsn(),
        out.path(),
        &[
            "--schemas",
            "1",
            "--scale",
            "1000blocks",
            "--readers",
            &readers,
            "--work-unit",
            "1",
            "--run-time",
            "3s",
        ],
    );
    let cpu = &r["limits"]["client_cpu"];
    assert!(num(cpu, &["busy_pct"]) >= 90.0, "{cpu}");
    assert_eq!(limiter(&r), "client_cpu", "{}", r["limiter"]);
    assert!(
        line(&r).contains("the server waited for the client"),
        "{}",
        line(&r)
    );
}

// PostgreSQL 18's index path reads one block at a time per session (synchronously, in the
// backend): the reads in flight stay at the reader count, by Little's law on the database's
// reads and by pg_aios, at one and at two readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    dbio_missing_pg18,
    ignore = "needs PostgreSQL 18 binaries: scripts/test.sh installs them"
)]
async fn pg18_index_path_keeps_one_read_in_flight_per_reader() {
    let pg = TestCluster::start_version(
        18,
        16,
        &[("io_method", "worker"), ("debug_io_direct", "data")],
    );
    pg.load("1", "8000blocks");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("ramp");
    assert_exit(
        &pg.dbio("ramp")
            .schemas(1)
            .scale("8000blocks")
            .readers("1,2")
            .opt("--read-path", "index")
            .run_time("2s")
            .quiet()
            .out(&dir)
            .output(),
        0,
    );
    for (step, readers) in [("step-01-r1-w0", 1.0), ("step-02-r2-w0", 2.0)] {
        let r = read_result(&dir.join(step));
        let o = &r["limits"]["outstanding"];
        let db = num(o, &["db_reads_in_flight"]);
        let aio = num(o, &["aio", "mean_in_flight"]);
        eprintln!(
            "{step}: reads waited on {db:.2}, pg_aios {aio:.2} (max {}), device {} in flight, aqu-sz {}",
            o["aio"]["max_in_flight"], o["device_reads_in_flight"], o["device_queue_depth"]
        );
        // At most one read per session: no prefetch on this path.
        assert!(
            db <= 1.2 * readers,
            "{step}: {db} reads in flight for {readers} readers"
        );
        assert!(
            aio <= 1.2 * readers,
            "{step}: pg_aios {aio} for {readers} readers"
        );
        assert!(num(o, &["aio", "max_in_flight"]) <= readers, "{step}: {o}");
        // And the sessions spend most of their time on that read.
        assert!(
            db >= 0.5 * readers,
            "{step}: only {db} reads in flight for {readers} readers"
        );
    }
}
