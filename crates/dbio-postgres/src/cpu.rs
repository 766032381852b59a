//! The server host's CPU over the window: its /proc/stat per core, and the server's own
//! processes from `/proc/<pid>/stat` (proc_pid_stat(5): utime, stime, cutime, cstime in clock
//! ticks, fields 14-17). The postmaster's cutime/cstime hold the CPU of every child it has
//! reaped, so the sum of the postmaster's four and each live child's utime + stime counts
//! the sessions' backends that exited after the window too.

use dbio_core::limits::{CpuReading, ServerCpu};
use futures_util::future::join_all;
use tokio_postgres::Client;

use crate::host::HostAccess;
use crate::sql;

/// utime + stime, and cutime + cstime, of a /proc/<pid>/stat text, in clock ticks; the ppid.
/// The command name (field 2) may hold spaces and parentheses: fields are counted after the
/// last `)`.
fn parse_pid_stat(text: &str) -> Option<(i32, u64, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): field n is f[n - 3].
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    let ppid = f.get(1)?.parse().ok()?;
    Some((ppid, n(14)? + n(15)?, n(16)? + n(17)?))
}

/// Clock ticks per second: this host's (USER_HZ is 100 on every Linux architecture dbio
/// runs on, so a server host's is the same).
fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// The server's processes and where their files are read.
pub struct CpuProbe {
    access: HostAccess,
    postmaster: i32,
}

/// One reading.
#[derive(Debug, Clone, Default)]
pub struct CpuSnapshot {
    stat: Option<CpuReading>,
    /// The server's processes' CPU so far, in ticks.
    server_ticks: Option<u64>,
}

impl CpuProbe {
    /// The postmaster of the backend `pid` (the collector's), whose files `access` reads.
    pub async fn find(client: &Client, access: &HostAccess, pid: i32) -> Result<CpuProbe, String> {
        let text = access
            .read(client, &format!("/proc/{pid}/stat"))
            .await
            .map_err(|e| format!("the server's /proc/{pid}/stat could not be read: {e}"))?;
        let (postmaster, _, _) =
            parse_pid_stat(&text).ok_or_else(|| format!("/proc/{pid}/stat could not be parsed"))?;
        Ok(CpuProbe {
            access: access.clone(),
            postmaster,
        })
    }

    /// The server's processes' CPU now: the postmaster's own and reaped children's, and each
    /// live child's (the pids pg_stat_activity lists).
    async fn server_ticks(&self, client: &Client) -> Option<u64> {
        let pids: Vec<i32> = client
            .query(sql::SERVER_PIDS, &[])
            .await
            .ok()?
            .iter()
            .filter_map(|r| r.try_get(0).ok())
            .filter(|p| *p != self.postmaster)
            .collect();
        let read = |pid: i32| async move {
            let text = self
                .access
                .read(client, &format!("/proc/{pid}/stat"))
                .await
                .ok()?;
            parse_pid_stat(&text)
        };
        let (_, own, reaped) = read(self.postmaster).await?;
        let children: u64 = join_all(pids.into_iter().map(read))
            .await
            .into_iter()
            .flatten()
            .filter(|(ppid, _, _)| *ppid == self.postmaster)
            .map(|(_, t, _)| t)
            .sum();
        Some(own + reaped + children)
    }

    /// The host's /proc/stat and the server's processes' CPU now (before the window).
    pub async fn read(&self, client: &Client) -> CpuSnapshot {
        CpuSnapshot {
            stat: self.read_stat(client).await,
            server_ticks: self.server_ticks(client).await,
        }
    }

    /// The host's /proc/stat now: read as the window closes, so that the time after it does
    /// not dilute the busy share.
    pub async fn read_stat(&self, client: &Client) -> Option<CpuReading> {
        self.access
            .read(client, "/proc/stat")
            .await
            .ok()
            .and_then(|t| CpuReading::parse(&t))
    }

    /// The reading after the window: the host's /proc/stat taken as it closed, and the
    /// server's processes' CPU now, once the sessions' backends have exited (their CPU is
    /// then in the postmaster's cutime/cstime; the server does next to nothing after the
    /// window, so the ticks over the window's seconds are its rate).
    pub async fn read_after(&self, client: &Client, stat: Option<CpuReading>) -> CpuSnapshot {
        CpuSnapshot {
            stat,
            server_ticks: self.server_ticks(client).await,
        }
    }

    /// The server host's CPU between two readings over `seconds`.
    pub fn server_cpu(&self, a: &CpuSnapshot, b: &CpuSnapshot, seconds: f64) -> Option<ServerCpu> {
        let cpu_s = a
            .server_ticks
            .zip(b.server_ticks)
            .and_then(|(x, y)| y.checked_sub(x))
            .map(|t| t as f64 / ticks_per_s());
        let mut c = ServerCpu::between(
            format!(
                "/proc/stat, and /proc/<pid>/stat of the postmaster and its children: {}",
                self.access.source()
            ),
            a.stat.as_ref()?,
            b.stat.as_ref()?,
            cpu_s,
            seconds,
        )?;
        if cpu_s.is_none() {
            c.notes.push(
                "the server's processes' CPU is null: their /proc/<pid>/stat could not be read"
                    .into(),
            );
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_stat_fields_after_the_command() {
        // A command name with a space and a parenthesis.
        let text = "4242 (postgres: a) b) S 100 4242 4242 0 -1 4194560 500 0 0 0 1234 567 89 10 20 0 1 0 5000 1000 100 18446744073709551615\n";
        assert_eq!(parse_pid_stat(text), Some((100, 1234 + 567, 89 + 10)));
        assert_eq!(parse_pid_stat("garbage"), None);
    }
}
