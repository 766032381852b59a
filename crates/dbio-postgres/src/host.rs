//! The database host's own figures, read where the server runs: through the connection
//! (`pg_read_file` of the server's /proc, when the role may read server files) or, for a
//! server proven to run on this host, from this host's /proc. `/proc/self` through the
//! connection is the backend answering the query, so its mountinfo is the server's mount
//! namespace: correct inside a container or on another host (pg-aio-host-stats §2).
//!
//! Figures: the device under the data set's tables (/proc/self/mountinfo -> major:minor ->
//! /proc/diskstats), the bytes dbio's backends fetched from storage (`/proc/<pid>/io`
//! read_bytes, proc_pid_io(5)), the host's memory (/proc/meminfo) and CPU (/proc/stat).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dbio_core::dataset::ServerRam;
use dbio_core::stats::device::{self, Device};
use futures_util::future::join_all;
use tokio_postgres::Client;

use crate::{cgroup, sql};

/// The server's own words for a failed statement.
fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

/// Where host files are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAccess {
    /// The server's own files, through `pg_read_file` on the connection.
    Server,
    /// This host's files: the server was proven to run here as process `pid` (`proof`
    /// says how).
    Local { pid: i32, proof: String },
}

impl HostAccess {
    /// The words result.json and the report use for the figures' source.
    pub fn source(&self) -> String {
        match self {
            HostAccess::Server => {
                "the server's /proc, read through the connection (pg_read_file)".to_string()
            }
            HostAccess::Local { proof, .. } => format!("this host's /proc ({proof})"),
        }
    }

    /// One file, whole.
    pub async fn read(&self, client: &Client, path: &str) -> Result<String, String> {
        match self {
            HostAccess::Server => {
                let row = client
                    .query_one(sql::READ_SERVER_FILE, &[&path])
                    .await
                    .map_err(|e| db_message(&e))?;
                row.try_get::<_, Option<String>>(0)
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("{path} read as NULL"))
            }
            HostAccess::Local { .. } => std::fs::read_to_string(path).map_err(|e| e.to_string()),
        }
    }

    /// A small file that may not be there (None then). Through the connection a missing file
    /// is NULL rather than an ERROR in the server's log; a role allowed only pg_read_file(text)
    /// is asked that way instead.
    pub async fn read_if_exists(&self, client: &Client, path: &str) -> Option<String> {
        match self {
            HostAccess::Server => match client
                .query_one(sql::READ_SERVER_FILE_IF_EXISTS, &[&path])
                .await
            {
                Ok(row) => row.try_get::<_, Option<String>>(0).ok().flatten(),
                Err(_) => self.read(client, path).await.ok(),
            },
            HostAccess::Local { .. } => std::fs::read_to_string(path).ok(),
        }
    }
}

/// The server's files are readable through the connection (superuser, or
/// pg_read_server_files with EXECUTE on pg_read_file): the answer, or the server's reason.
pub async fn server_files_readable(client: &Client) -> Result<(), String> {
    HostAccess::Server
        .read(client, "/proc/self/mountinfo")
        .await
        .map(|_| ())
}

/// The server runs on this host when its data directory's postmaster.pid, read here, names
/// the server's port and start time (as the server reports them) and a pid that is, on this
/// host, that server's process (`is_the_server`): a host name or a loopback address proves
/// nothing (a container, a tunnel), and neither does a pid that this host's /proc lists (in
/// another PID namespace the same number is another process). Returns the pid and the proof.
pub async fn proven_local(client: &Client, data_dir: &Path) -> Result<(i32, String), String> {
    let pid_file = data_dir.join("postmaster.pid");
    let text = std::fs::read_to_string(&pid_file)
        .map_err(|e| format!("{} is not readable here: {e}", pid_file.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    // postmaster.pid: pid, data directory, start time (epoch s), port, ... (pidfile.h).
    let field = |i: usize| lines.get(i).map(|l| l.trim());
    let pid: i32 = field(0)
        .and_then(|v| v.parse().ok())
        .ok_or("postmaster.pid has no pid")?;
    let start: f64 = field(2)
        .and_then(|v| v.parse().ok())
        .ok_or("postmaster.pid has no start time")?;
    let port: i32 = field(3)
        .and_then(|v| v.parse().ok())
        .ok_or("postmaster.pid has no port")?;
    let row = client
        .query_one(sql::SERVER_IDENTITY, &[])
        .await
        .map_err(|e| db_message(&e))?;
    let server_port: i32 = row.try_get(0).map_err(|e| e.to_string())?;
    let server_start: f64 = row.try_get(1).map_err(|e| e.to_string())?;
    if server_port != port || (server_start - start).abs() > 1.5 {
        return Err(format!(
            "{} names port {port} started at {start:.0}, the server says port {server_port} started at {server_start:.0}",
            pid_file.display()
        ));
    }
    if !Path::new(&format!("/proc/{pid}/stat")).exists() {
        return Err(format!(
            "{} names pid {pid}, which this host's /proc does not list (another pid namespace)",
            pid_file.display()
        ));
    }
    let how = is_the_server(pid, data_dir, server_start).map_err(|e| {
        format!(
            "{} names pid {pid}, but {e}: the server runs in another PID namespace (a container?) \
             and this host's /proc/{pid} is not its process",
            pid_file.display()
        )
    })?;
    Ok((
        pid,
        format!(
            "server proven local: {} names port {port}, the server's start time and pid {pid}, {how}",
            pid_file.display()
        ),
    ))
}

/// Whether process `pid` of this host is the server of `data_dir` that started at
/// `server_start` (epoch s). A postmaster works in its data directory (postmaster.c,
/// ChangeToDataDir), so its working folder, /proc/<pid>/cwd, is the data directory: the
/// same device and inode from both sides. Where that link may not be followed (another
/// user's process, without root) the process must run postgres and have started within 2 s
/// of the server's start time. Returns how it was proven, or what differs.
fn is_the_server(pid: i32, data_dir: &Path, server_start: f64) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata(data_dir)
        .map_err(|e| format!("{} cannot be examined here: {e}", data_dir.display()))?;
    let cwd = format!("/proc/{pid}/cwd");
    match std::fs::metadata(&cwd) {
        Ok(theirs) if (theirs.dev(), theirs.ino()) == (ours.dev(), ours.ino()) => Ok(format!(
            "whose working folder is the data directory (device {}:{}, inode {})",
            libc::major(ours.dev()),
            libc::minor(ours.dev()),
            ours.ino()
        )),
        Ok(_) => Err(format!(
            "that process works in {}, not in the data directory",
            std::fs::read_link(&cwd)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|e| format!("a folder that cannot be named ({e})"))
        )),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            let name = Path::new(std::str::from_utf8(program).unwrap_or_default())
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if name != "postgres" && name != "postmaster" {
                return Err(format!("that process runs `{name}`, not postgres"));
            }
            let started = process_start(pid)
                .ok_or_else(|| format!("/proc/{pid}/stat gives no start time"))?;
            if (started - server_start).abs() > 2.0 {
                return Err(format!(
                    "that process started at {started:.0}, the server at {server_start:.0}"
                ));
            }
            Ok(format!(
                "which runs postgres and started with the server (its working folder may not be read: {e})"
            ))
        }
        Err(e) => Err(format!("{cwd} cannot be examined: {e}")),
    }
}

/// When process `pid` started, in seconds since the epoch: /proc/<pid>/stat's starttime
/// (clock ticks after boot, field 22) plus /proc/stat's btime (proc_pid_stat(5)).
fn process_start(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command (field 2) is in parentheses and may hold spaces: fields after the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    let ticks: f64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| btime + ticks / hz as f64)
}

/// The directory each of `schemas`' cf1 lives in: its tablespace's location, or the data
/// directory (None when the role may not read data_directory).
pub async fn table_locations(
    client: &Client,
    schemas: &[String],
    data_dir: Option<&Path>,
) -> Result<Vec<(String, Option<PathBuf>)>, String> {
    let rows = client
        .query(sql::TABLE_LOCATIONS, &[&schemas])
        .await
        .map_err(|e| db_message(&e))?;
    let mut out = Vec::new();
    for r in rows {
        let schema: String = r.try_get(0).map_err(|e| e.to_string())?;
        let location: Option<String> = r.try_get(1).map_err(|e| e.to_string())?;
        let dir = match location {
            Some(l) => Some(PathBuf::from(l)),
            None => data_dir.map(Path::to_path_buf),
        };
        out.push((format!("{schema}.cf1"), dir));
    }
    Ok(out)
}

/// The block device under `dir`, as the server sees it: by mountinfo and diskstats through
/// `access` (the server's mount namespace), or by the path's st_dev for a local server.
pub async fn device_under(
    client: &Client,
    access: &HostAccess,
    dir: &Path,
) -> Result<Device, String> {
    let text = dir.display().to_string();
    match access {
        HostAccess::Local { .. } => device::device_for_path(dir).ok_or_else(|| {
            format!("{text} is not on a block device listed in /proc/diskstats (tmpfs or overlay?)")
        }),
        HostAccess::Server => {
            let mountinfo = access.read(client, "/proc/self/mountinfo").await?;
            let diskstats = access.read(client, "/proc/diskstats").await?;
            let mounts = device::parse_mountinfo(&mountinfo);
            let m = device::mount_for(&mounts, &text)
                .ok_or_else(|| format!("no mount of the server holds {text}"))?;
            device::device_of_mount(&diskstats, m).ok_or_else(|| {
                format!(
                    "{text} is on {} ({}, device {}:{}), which the server's /proc/diskstats does not list (tmpfs, overlay or a network filesystem)",
                    m.mount_point, m.fstype, m.major, m.minor
                )
            })
        }
    }
}

/// A process's I/O counters from /proc/<pid>/io (proc_pid_io(5)): `read_bytes`, "bytes
/// really fetched from the storage layer", and `rchar`, bytes its read(2)/pread(2) calls
/// returned, page-cache hits included. For a backend rchar is its relation reads (it talks
/// to its client with recv/send, which rchar does not count): measured on PostgreSQL 17,
/// 3,392 blocks read by one backend were 27,787,375 bytes of rchar (3,392.01 blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoCounts {
    pub read_bytes: u64,
    pub rchar: u64,
}

/// The counters of a /proc/<pid>/io text; None without read_bytes.
pub fn io_counts_of(io: &str) -> Option<IoCounts> {
    let field = |name: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some(IoCounts {
        read_bytes: field("read_bytes:")?,
        rchar: field("rchar:").unwrap_or(0),
    })
}

/// The counters of each pid that is still there (a pid that exited is left out), and how
/// many transactions the reads committed through the connection (pg_stat_database counts
/// them; see `sql::QUERY_TRANSACTIONS`). Through the connection each file is its own statement, pipelined, so
/// one missing pid fails only its own read.
pub async fn read_pid_io(
    client: &Client,
    access: &HostAccess,
    pids: &[i32],
) -> (BTreeMap<i32, IoCounts>, u64) {
    if pids.is_empty() {
        return (BTreeMap::new(), 0);
    }
    // Through the connection, one statement for every live pid (those pg_stat_activity
    // lists), so that a sample of many sessions costs one round trip; a backend exiting
    // between the two fails it, and then each pid is read on its own.
    if *access == HostAccess::Server
        && let Ok(rows) = client.query(sql::READ_PID_IO, &[&pids]).await
    {
        let read = rows
            .iter()
            .filter_map(|r| {
                let pid: i32 = r.try_get(0).ok()?;
                let text: String = r.try_get(1).ok()?;
                io_counts_of(&text).map(|c| (pid, c))
            })
            .collect();
        return (read, sql::QUERY_TRANSACTIONS);
    }
    let reads = pids.iter().map(|pid| async move {
        let text = access.read(client, &format!("/proc/{pid}/io")).await.ok()?;
        io_counts_of(&text).map(|c| (*pid, c))
    });
    let read: BTreeMap<i32, IoCounts> = join_all(reads).await.into_iter().flatten().collect();
    let transactions = if *access == HostAccess::Server {
        read.len() as u64 * sql::QUERY_TRANSACTIONS
    } else {
        0
    };
    (read, transactions)
}

/// The io workers' pids (PostgreSQL 18+); empty before 18 or when the role cannot see them.
pub async fn io_worker_pids(client: &Client, major: i32) -> Vec<i32> {
    if major < 18 {
        return Vec::new();
    }
    match client.query(sql::IO_WORKERS, &[]).await {
        Ok(rows) => rows.iter().filter_map(|r| r.try_get(0).ok()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The first and last counters seen of each pid: a backend's counters only grow, and the
/// last reading before it exits is its total (within one sample period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PidIo {
    pub first: BTreeMap<i32, IoCounts>,
    pub last: BTreeMap<i32, IoCounts>,
}

impl PidIo {
    pub fn record(&mut self, readings: &BTreeMap<i32, IoCounts>) {
        for (pid, c) in readings {
            self.first.entry(*pid).or_insert(*c);
            self.last.insert(*pid, *c);
        }
    }

    /// The counters' growth over the pids in `which` (all when None), and how many were read.
    pub fn delta(&self, which: Option<&[i32]>) -> (IoCounts, u32) {
        let mut sum = IoCounts::default();
        let mut n = 0u32;
        for (pid, last) in &self.last {
            if which.is_some_and(|w| !w.contains(pid)) {
                continue;
            }
            let first = self.first.get(pid).copied().unwrap_or(*last);
            sum.read_bytes += last.read_bytes.saturating_sub(first.read_bytes);
            sum.rchar += last.rchar.saturating_sub(first.rchar);
            n += 1;
        }
        (sum, n)
    }
}

/// CPU time from the first line of /proc/stat, in USER_HZ ticks (proc_stat(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// user + nice
    pub user: u64,
    /// system + irq + softirq
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    /// every field but guest and guest_nice (already in user and nice)
    pub total: u64,
}

pub fn parse_cpu(stat: &str) -> Option<CpuTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTicks {
        user: f(0) + f(1),
        system: f(2) + f(5) + f(6),
        idle: f(3),
        iowait: f(4),
        total: (0..8).map(f).sum(),
    })
}

/// % of all CPUs' time between two readings: user, system, iowait, idle.
pub fn cpu_pct(a: CpuTicks, b: CpuTicks) -> Option<[f64; 4]> {
    let total = b.total.checked_sub(a.total).filter(|t| *t > 0)? as f64;
    let p = |x: u64, y: u64| 100.0 * y.saturating_sub(x) as f64 / total;
    Some([
        p(a.user, b.user),
        p(a.system, b.system),
        p(a.iowait, b.iowait),
        p(a.idle, b.idle),
    ])
}

/// MemTotal, MemAvailable and Cached of /proc/meminfo, in bytes.
pub fn parse_meminfo(text: &str) -> (Option<u64>, Option<u64>, Option<u64>) {
    let kb = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|k| k * 1024)
    };
    (kb("MemTotal:"), kb("MemAvailable:"), kb("Cached:"))
}

/// The server's memory cgroup limit, when one is set: the lowest over its cgroup and that
/// cgroup's ancestors (`cgroup::controller_dirs`). Through the connection: the server's own
/// /proc/self/cgroup and mountinfo; for a server proven local: its /proc/<pid>/cgroup with
/// this host's mountinfo (both relative to this host's namespaces).
pub async fn memory_cap(client: &Client, access: &HostAccess) -> Option<cgroup::MemoryCap> {
    let own = match access {
        HostAccess::Server => "/proc/self/cgroup".to_string(),
        HostAccess::Local { pid, .. } => format!("/proc/{pid}/cgroup"),
    };
    let proc_cgroup = access.read(client, &own).await.ok()?;
    let mountinfo = access.read(client, "/proc/self/mountinfo").await.ok()?;
    let mut read = Vec::new();
    for dir in cgroup::controller_dirs("memory", &proc_cgroup, &mountinfo) {
        let file = cgroup::memory_limit_file(&dir);
        if let Some(text) = access.read_if_exists(client, &file).await {
            read.push((file, text));
        }
    }
    cgroup::lowest_limit(read.iter().map(|(f, t)| (f.clone(), t.as_str())))
}

/// The RAM the server's page cache may use, read through `access`: the host's MemTotal, or
/// the server's memory cgroup limit when lower (a container's cap).
pub async fn server_ram(client: &Client, access: &HostAccess) -> Option<ServerRam> {
    let meminfo = access.read(client, "/proc/meminfo").await.ok()?;
    let host = parse_meminfo(&meminfo).0?;
    let cap = memory_cap(client, access).await;
    Some(ServerRam::new(host, cap.map(|c| (c.bytes, c.file))))
}

/// The server's RAM for the sizing warnings: read through the connection when the role may
/// read server files, else from this host when the server is proven to run here
/// (`proven_local`), else None (the warning then does not guess).
pub async fn database_host_ram(client: &Client) -> Option<ServerRam> {
    if let Some(r) = server_ram(client, &HostAccess::Server).await {
        return Some(r);
    }
    let dir: String = client
        .query_opt(sql::DATA_DIRECTORY, &[])
        .await
        .ok()??
        .try_get(0)
        .ok()?;
    let (pid, proof) = proven_local(client, Path::new(&dir)).await.ok()?;
    server_ram(client, &HostAccess::Local { pid, proof }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let io =
            "rchar: 446592\nwchar: 0\nsyscr: 66\nsyscw: 0\nread_bytes: 81920\nwrite_bytes: 0\n";
        assert_eq!(
            io_counts_of(io),
            Some(IoCounts {
                read_bytes: 81920,
                rchar: 446592
            })
        );
        let a = parse_cpu("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n").unwrap();
        let b = parse_cpu("cpu  200 0 100 1500 200 0 0 0 0 0\n").unwrap();
        assert_eq!(cpu_pct(a, b), Some([10.0, 5.0, 15.0, 70.0]));
        assert_eq!(cpu_pct(a, a), None);
        let (total, avail, cached) = parse_meminfo(
            "MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    8000 kB\nCached:   4000 kB\nSwapCached: 0 kB\n",
        );
        assert_eq!(
            (total, avail, cached),
            (Some(16000 * 1024), Some(8000 * 1024), Some(4000 * 1024))
        );
    }

    #[test]
    fn pid_io_sums_each_backend_from_its_first_to_its_last_reading() {
        let c = |read_bytes: u64| IoCounts {
            read_bytes,
            rchar: 2 * read_bytes,
        };
        let mut p = PidIo::default();
        p.record(&BTreeMap::from([(1, c(100)), (2, c(1000))]));
        p.record(&BTreeMap::from([(1, c(900)), (3, c(50))]));
        p.record(&BTreeMap::from([(3, c(250))]));
        // pid 2 exited after its first reading: 0; pid 1: 800; pid 3: 200.
        assert_eq!(p.delta(None), (c(1000), 3));
        assert_eq!(p.delta(Some(&[1, 2])), (c(800), 2));
    }
}
