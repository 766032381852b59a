//! Podman for the container tests: an image store of their own in a fixed folder, this
//! host's engine settings in a containers.conf of their own (never /etc's), and dbio's images
//! built from nothing once per test process by deploy/images.sh.
//!
//! This host's podman (4.3, Debian 12) needs runc (crun refuses the hybrid cgroup layout)
//! and rlimits within the hard limits (root here lacks CAP_SYS_RESOURCE). The store lives in
//! a fixed folder so that a test process finds and wipes what an earlier one left; a lock
//! file beside it, held until the process ends, keeps two test processes (two checkouts'
//! suites) from sharing it. Every container runs with `--network host`: no container
//! network is ever made.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

/// The folder of the tests' image store (and its configuration).
pub const STORE_DIR: &str = "/var/tmp/dbio-e2e-containers";

/// The images deploy/images.sh builds.
pub const BASE_IMAGE: &str = "localhost/dbio-base:trixie";
pub const PG_IMAGE: &str = "localhost/dbio-postgres:17";
pub const DBIO_IMAGE: &str = "localhost/dbio:latest";

/// The tests' podman: its store, and how the images were built.
pub struct Podman {
    pub dir: PathBuf,
    conf: PathBuf,
    storage: PathBuf,
    /// Held while the process runs: the store is this process's.
    _lock: File,
    /// Images in the store before the build (none: it was wiped).
    pub images_before: Vec<String>,
    /// deploy/images.sh's exit status and output.
    pub build: Output,
    /// Wall-clock seconds of the build.
    pub build_seconds: f64,
}

impl Podman {
    /// `podman` with this store and configuration.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        for (k, v) in self.env() {
            cmd.env(k, v);
        }
        cmd
    }

    /// The environment that points podman (and podman-compose, and `dbio nightly`) here.
    pub fn env(&self) -> [(&'static str, PathBuf); 2] {
        [
            ("CONTAINERS_CONF", self.conf.clone()),
            ("CONTAINERS_STORAGE_CONF", self.storage.clone()),
        ]
    }

    /// `podman ARGS...`'s stdout; fails the test when it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("podman runs");
        assert!(
            out.status.success(),
            "podman {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Names of what `podman KIND ls` lists (containers with `ps -a`), one per line.
    pub fn names(&self, kind: &str) -> Vec<String> {
        let args: &[&str] = match kind {
            "containers" => &["ps", "-a", "--format", "{{.Names}}"],
            "volumes" => &["volume", "ls", "--format", "{{.Name}}"],
            "pods" => &["pod", "ls", "--format", "{{.Name}}"],
            "networks" => &["network", "ls", "--format", "{{.Name}}"],
            "images" => &["images", "--format", "{{.Repository}}:{{.Tag}}"],
            other => panic!("no list of {other}"),
        };
        let mut v: Vec<String> = self.run(args).lines().map(str::to_string).collect();
        v.sort();
        v
    }

    /// An image's size in bytes.
    pub fn image_size(&self, image: &str) -> u64 {
        self.run(&["image", "inspect", "--format", "{{.Size}}", image])
            .trim()
            .parse()
            .expect("a size")
    }
}

/// The tests' podman, with dbio's images built from an empty store the first time a test
/// asks in this process (later tests wait for that build and share it).
pub fn podman() -> &'static Podman {
    static PODMAN: OnceLock<Podman> = OnceLock::new();
    PODMAN.get_or_init(prepare)
}

fn prepare() -> Podman {
    let root = Path::new(STORE_DIR);
    let parent = root.parent().expect("a parent folder");
    let lock = File::create(parent.join("dbio-e2e-containers.lock")).expect("the lock file");
    // SAFETY: flock on a descriptor this File owns; blocks until the other process's ends.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
    let conf = parent.join("dbio-e2e-containers.conf");
    let storage = parent.join("dbio-e2e-storage.conf");
    std::fs::write(
        &conf,
        "[containers]\n\
         default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
         [engine]\n\
         runtime = \"runc\"\n",
    )
    .unwrap();
    std::fs::write(
        &storage,
        format!(
            "[storage]\ndriver = \"overlay\"\ngraphroot = \"{STORE_DIR}/store\"\nrunroot = \"{STORE_DIR}/run\"\n"
        ),
    )
    .unwrap();
    let mut p = Podman {
        dir: root.to_path_buf(),
        conf,
        storage,
        _lock: lock,
        images_before: Vec::new(),
        build: Command::new("true").output().unwrap(),
        build_seconds: 0.0,
    };
    wipe(&p);
    p.images_before = p.names("images");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let started = Instant::now();
    let mut build = Command::new("bash");
    build
        .arg(repo.join("deploy/images.sh"))
        .args(["base", "postgres", "dbio", "--dbio-bin"])
        .arg(crate::dbio_bin());
    for (k, v) in p.env() {
        build.env(k, v);
    }
    p.build = build.output().expect("deploy/images.sh runs");
    p.build_seconds = started.elapsed().as_secs_f64();
    assert!(
        p.build.status.success(),
        "deploy/images.sh failed:\n{}",
        String::from_utf8_lossy(&p.build.stderr)
    );
    p
}

/// Empties the store an earlier process left: containers (with their volumes), volumes,
/// pods and images, then the folder (its overlay mount first).
fn wipe(p: &Podman) {
    if p.dir.exists() {
        for args in [
            &["rm", "--all", "--force", "--volumes"][..],
            &["pod", "rm", "--all", "--force"],
            &["volume", "rm", "--all", "--force"],
            &["rmi", "--all", "--force"],
        ] {
            let _ = p.command().args(args).output();
        }
        let _ = Command::new("umount")
            .arg("-R")
            .arg(p.dir.join("store/overlay"))
            .output();
        let status = Command::new("rm")
            .args(["-rf", "--one-file-system"])
            .arg(&p.dir)
            .status()
            .unwrap();
        assert!(status.success(), "{} could not be removed", p.dir.display());
    }
    std::fs::create_dir_all(&p.dir).unwrap();
}

/// Removes a container (and its volumes) when the test ends, pass or fail.
pub struct ContainerGuard<'a> {
    pub podman: &'a Podman,
    pub name: String,
}

impl Drop for ContainerGuard<'_> {
    fn drop(&mut self) {
        let _ = self
            .podman
            .command()
            .args(["rm", "--force", "--volumes", &self.name])
            .output();
    }
}

/// The folder of the tools scripts/test.sh installs from PyPI (podman-compose,
/// kubernetes-validate): `$DBIO_TEST_VENV/bin`, or .dbio/venv/bin of this checkout.
pub fn venv_bin() -> PathBuf {
    match std::env::var_os("DBIO_TEST_VENV") {
        Some(v) => PathBuf::from(v).join("bin"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.dbio/venv/bin"),
    }
}

/// A port on 127.0.0.1 that nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Fails the test unless podman, runc and debootstrap are installed (scripts/test.sh installs
/// them).
pub fn require_podman() {
    for tool in ["podman", "runc", "debootstrap"] {
        assert!(
            on_path(tool),
            "{tool} is not installed: scripts/test.sh installs podman, runc and debootstrap (Debian: apt-get install podman runc debootstrap)"
        );
    }
}

/// Fails the test unless `tool` is in the tests' venv.
pub fn require_venv_tool(tool: &str) -> PathBuf {
    let path = venv_bin().join(tool);
    assert!(
        path.is_file(),
        "{} is missing: scripts/test.sh installs podman-compose and kubernetes-validate from PyPI into .dbio/venv (or set DBIO_TEST_VENV)",
        path.display()
    );
    path
}

/// Whether a command is on PATH (or in /usr/sbin, where debootstrap lives).
pub fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .any(|d| d.join(tool).is_file())
}
