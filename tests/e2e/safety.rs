//! Nothing dbio did not create is changed, followed or lost: each test reproduces a careless
//! or hostile use that once damaged a user's files (issue "Nothing lost, nothing damaged")
//! and compares everything dbio did not make, byte for byte, owner and mode, before and after.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dbio_tests::{
    Dbio, TestCluster, assert_exit, assert_valid_result, is_root, read_result, require_root, stderr,
};

/// A folder on the real disk (not tmpfs): calibrate needs O_DIRECT.
fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("dbio-safety-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// Everything under `root` (itself included): owner, group, mode, and the content of a file
/// or the target of a symlink.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (u32, u32, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let content = if m.file_type().is_symlink() {
            std::fs::read_link(&p)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else if m.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
            Vec::new()
        };
        out.insert(p, (m.uid(), m.gid(), m.mode(), content));
    }
    out
}

/// `bytes` of seeded pseudo-random data: a user's file whose every byte matters.
fn user_data(bytes: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn calibrate(path: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Dbio::new("calibrate")
        .opt("--path", path)
        .opt("--levels", "1")
        .opt("--duration", "300ms")
        .opt("--large", "64kB")
        .out(out)
        .quiet()
        .args(extra)
        .output()
}

// Seen: `calibrate --path FILE --write-pct 50` on an existing file overwrote 1,013 of its 1,024
// blocks, exit 0, no warning.
#[test]
fn calibrate_writes_to_an_existing_user_file_are_refused_and_it_stays_byte_identical() {
    let dir = disk_dir();
    let file = dir.path().join("database.dbf");
    std::fs::write(&file, user_data(8 << 20)).unwrap();
    let before = snapshot(dir.path());

    let out = dir.path().join("out");
    let o = calibrate(&file, &out, &["--write-pct", "50"]);
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("not a calibration file dbio created") && e.contains("--destroy-data"),
        "{e}"
    );
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a refused calibration changed something"
    );

    // Reading it stays allowed, and leaves it as it was.
    let o = calibrate(&file, &out, &[]);
    assert_exit(&o, 0);
    assert!(out.join("calibrate.json").is_file());
    assert_eq!(snapshot(&file), snapshot_of(&before, &file));
}

fn snapshot_of(
    all: &BTreeMap<PathBuf, (u32, u32, u32, Vec<u8>)>,
    path: &Path,
) -> BTreeMap<PathBuf, (u32, u32, u32, Vec<u8>)> {
    all.iter()
        .filter(|(p, _)| p.as_path() == path)
        .map(|(p, v)| (p.clone(), v.clone()))
        .collect()
}

// Seen: `calibrate --create --size` truncated an existing file and filled it with random data.
#[test]
fn calibrate_create_on_an_existing_file_is_refused_and_it_stays_unchanged() {
    let dir = disk_dir();
    let file = dir.path().join("notes.bin");
    std::fs::write(&file, user_data(4 << 20)).unwrap();
    let before = snapshot(dir.path());
    let out = dir.path().join("out");
    let o = calibrate(&file, &out, &["--create", "--size", "16MB"]);
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("--create never replaces a file"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(dir.path()), before);

    // dbio's own file: --create makes it once; a second --create uses it as it is (no refill),
    // and only it takes writes without --destroy-data, its mark surviving them.
    let own = dir.path().join("cal.dat");
    assert_exit(
        &calibrate(&own, &dir.path().join("o1"), &["--create", "--size", "8MB"]),
        0,
    );
    let made = std::fs::read(&own).unwrap();
    assert_eq!(made.len(), 8 << 20);
    assert!(made.starts_with(b"dbio calibration file"));
    let o = calibrate(&own, &dir.path().join("o2"), &["--create", "--size", "8MB"]);
    assert_exit(&o, 0);
    assert_eq!(
        std::fs::read(&own).unwrap(),
        made,
        "--create refilled dbio's file"
    );
    let o = calibrate(&own, &dir.path().join("o3"), &["--write-pct", "50"]);
    assert_exit(&o, 0);
    let written = std::fs::read(&own).unwrap();
    assert_eq!(
        &written[..4096],
        &made[..4096],
        "the mark block was written over"
    );
    assert_ne!(written, made, "--write-pct 50 wrote nothing");
}

// Seen: `scratch start --dir EXISTING` as root ran `chown -R postgres:` over the whole tree
// before checking anything: a root-owned 0600 file became readable by postgres.
#[test]
#[cfg_attr(dbio_missing_root, ignore = "needs root")]
fn scratch_start_in_a_foreign_folder_is_refused_and_nothing_in_it_changes() {
    require_root("the chown happened as root");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("projects");
    std::fs::create_dir_all(d.join("src")).unwrap();
    let secret = d.join("secret.key");
    std::fs::write(&secret, "root only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(d.join("src/main.c"), "int main;").unwrap();
    let before = snapshot(&d);
    assert_eq!(before[&secret].0, 0, "the file is root's");

    let o = Dbio::new("scratch start").opt("--dir", &d).output();
    assert_exit(&o, 2);
    assert!(
        stderr(&o).contains("not a dbio scratch folder"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        snapshot(&d),
        before,
        "scratch start changed a foreign folder"
    );
    let m = std::fs::metadata(&secret).unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (0, 0, 0o600));
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(path: &Path, options: &str) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount -t tmpfs -o {options} {}", path.display());
        Tmpfs(path.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Without -q: stderr's "measuring" note says whether the window opened.
fn run_args(dsn: &str, out: &str, run_time: &str) -> Dbio {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(1)
        .scale("1000blocks")
        .readers(1)
        .run_time(run_time)
        .out(out)
}

// Seen: result.json and report.txt were written through a fixed `<name>.tmp` that follows
// symlinks: a symlink planted in the output folder made dbio overwrite an arbitrary file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlinks_planted_in_the_result_folder_are_not_followed() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dir = tempfile::tempdir().unwrap();
    let victims = dir.path().join("victims");
    std::fs::create_dir(&victims).unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for name in [
        "result.json",
        "report.txt",
        "result.tmp",
        "report.tmp",
        "result.json.tmp",
    ] {
        let victim = victims.join(name);
        std::fs::write(&victim, format!("the user's {name}")).unwrap();
        symlink(&victim, out.join(name)).unwrap();
    }
    let before = snapshot(&victims);

    let dsn = pg.dsn();
    assert_exit(
        &run_args(&dsn, out.to_str().unwrap(), "1s")
            .arg("--overwrite")
            .output(),
        0,
    );
    assert_eq!(snapshot(&victims), before, "a planted symlink was followed");
    for name in ["result.json", "report.txt"] {
        let m = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(m.file_type().is_file(), "{name} is not a plain file");
    }
    let r = read_result(&out);
    assert_eq!(r["status"], "ok");
}

// Seen: a read-only --out was found only after the whole window, and nothing was kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_result_folder_is_refused_before_the_window() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ro");
    // Root writes through any mode bits: only a read-only mount stops it.
    let _mount = if is_root() {
        Some(Tmpfs::mount(&out, "ro,size=1m"))
    } else {
        std::fs::create_dir(&out).unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
        None
    };
    let dsn = pg.dsn();
    let started = Instant::now();
    let o = run_args(&dsn, out.to_str().unwrap(), "60s").output();
    let took = started.elapsed();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(e.contains("not writable") && e.contains("--out"), "{e}");
    assert!(!e.contains("measuring"), "the window started: {e}");
    assert!(
        took < Duration::from_secs(30),
        "refused only after {took:?} of a 60 s run"
    );
}

// Seen: a second run into the same --out silently replaced the first result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_into_a_used_folder_is_refused_unless_overwrite() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (dsn, o) = (pg.dsn(), out.to_str().unwrap().to_string());
    assert_exit(&run_args(&dsn, &o, "1s").output(), 0);
    let first = snapshot(&out);

    let refused = run_args(&dsn, &o, "1s").output();
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("--overwrite"),
        "{}",
        stderr(&refused)
    );
    assert!(!stderr(&refused).contains("measuring"));
    let ramp = Dbio::new("ramp")
        .dsn(&dsn)
        .schemas(1)
        .scale("1000blocks")
        .readers(1)
        .run_time("1s")
        .quiet()
        .out(&o)
        .output();
    assert_exit(&ramp, 2);
    assert!(stderr(&ramp).contains("--overwrite"), "{}", stderr(&ramp));
    assert_eq!(
        snapshot(&out),
        first,
        "a refused run changed the first result"
    );

    assert_exit(&run_args(&dsn, &o, "1s").arg("--overwrite").output(), 0);
    let second = read_result(&out);
    let first_json: serde_json::Value =
        serde_json::from_slice(&first[&out.join("result.json")].3).unwrap();
    assert_ne!(
        second["window"]["start"], first_json["window"]["start"],
        "--overwrite did not write the new result"
    );
}

// The result folder vanishes during the window: the report still reaches stdout and the
// result is kept in a new file under $TMPDIR that the error names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_result_write_prints_the_report_and_keeps_the_result_elsewhere() {
    let pg = TestCluster::start(16);
    pg.load("1", "1000blocks");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let fallback = dir.path().join("tmp");
    std::fs::create_dir(&fallback).unwrap();
    let dsn = pg.dsn();
    let mut child = run_args(&dsn, out.to_str().unwrap(), "3s")
        .env("TMPDIR", &fallback)
        .spawn();
    let mut stdout_pipe = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        stdout_pipe.read_to_string(&mut s).unwrap();
        s
    });
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "dbio ended before the window: {seen}"
        );
        seen.push_str(&line);
        if line.contains("measuring") {
            break;
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
    err.read_to_string(&mut seen).unwrap();
    let status = child.wait().unwrap();
    let printed = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}");
    assert!(
        printed.contains("dbio run") && printed.contains("status ok"),
        "the report did not reach stdout: {printed}"
    );
    let kept: Vec<PathBuf> = std::fs::read_dir(&fallback)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        seen.contains(&kept[0].display().to_string()),
        "stderr does not name {}: {seen}",
        kept[0].display()
    );
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&kept[0]).unwrap()).unwrap();
    assert_valid_result(&value);
    assert_eq!(value["status"], "ok");
    assert!(!out.exists(), "dbio recreated the removed folder");
}

// Seen: teardown trusted a mark copied onto another role's schema: as superuser it dropped
// that role's schema and data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_copied_onto_another_roles_schema_survives_teardown_and_setup_force() {
    let pg = TestCluster::start(16);
    pg.load("2", "256blocks");
    let c = pg.client().await;
    // bob's own schema and data, given user2's marks (as schema 3, without the owner field).
    let mark: String = c
        .query_one(
            "SELECT obj_description('user2'::regnamespace, 'pg_namespace')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let mut forged: serde_json::Value = serde_json::from_str(&mark).unwrap();
    forged["dbio"]["schema"] = 3.into();
    forged["dbio"].as_object_mut().unwrap().remove("owner");
    let table_mark: String = c
        .query_one(
            "SELECT obj_description('user2.cf1'::regclass, 'pg_class')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "CREATE ROLE bob; CREATE SCHEMA user3 AUTHORIZATION bob; \
         CREATE TABLE user3.cf1 (custid bigint, note text); ALTER TABLE user3.cf1 OWNER TO bob; \
         INSERT INTO user3.cf1 SELECT g, 'bob''s row' FROM generate_series(1, 100) g; \
         COMMENT ON SCHEMA user3 IS '{}'; COMMENT ON TABLE user3.cf1 IS '{}'",
        forged.to_string().replace('\'', "''"),
        table_mark.replace('\'', "''")
    ))
    .await
    .unwrap();
    let o = pg
        .dbio("setup")
        .schemas(3)
        .scale("256blocks")
        .arg("--force")
        .quiet()
        .output();
    assert_exit(&o, 2);
    assert!(stderr(&o).contains("owned by role `bob`"), "{}", stderr(&o));
    let o = pg.dbio("teardown").arg("--yes").output();
    assert_exit(&o, 0);
    let out = dbio_tests::stdout(&o);
    assert!(
        out.contains("dropped schema user1") && out.contains("dropped schema user2"),
        "{out}"
    );
    assert!(
        out.contains("left user3") && out.contains("owned by role `bob`"),
        "{out}"
    );
    let rows: i64 = c
        .query_one(
            "SELECT count(*) FROM user3.cf1 WHERE note = 'bob''s row'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 100, "bob's data is untouched");
}
