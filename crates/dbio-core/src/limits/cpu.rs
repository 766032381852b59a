//! CPU over a window, per core, from two readings of /proc/stat (proc_stat(5): the `cpu`
//! line and one `cpuN` line per core, in USER_HZ ticks: user, nice, system, idle, iowait,
//! irq, softirq, steal, guest, guest_nice). Busy is everything but idle and iowait; steal
//! counts as busy (the hypervisor gave the time to another guest: it was not ours to use);
//! guest and guest_nice are already in user and nice.

use serde::{Deserialize, Serialize};

/// At or above this % busy over the window, a host's CPUs were saturated: runnable work
/// waited for a core.
pub const SATURATED_PCT: f64 = 90.0;

/// Busy and total ticks of one CPU line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticks {
    pub busy: u64,
    pub total: u64,
}

/// One reading of /proc/stat: all CPUs, and each core in order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuReading {
    pub all: Ticks,
    pub cores: Vec<Ticks>,
}

fn ticks(line: &str) -> Option<Ticks> {
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    if v.len() < 4 {
        return None;
    }
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(f).sum();
    Some(Ticks {
        busy: total.saturating_sub(f(3) + f(4)),
        total,
    })
}

impl CpuReading {
    /// A /proc/stat text (this host's or the server's); None without its `cpu` line.
    pub fn parse(stat: &str) -> Option<CpuReading> {
        let mut all = None;
        let mut cores = Vec::new();
        for line in stat.lines() {
            if line.starts_with("cpu ") {
                all = ticks(line);
            } else if line.starts_with("cpu") && line[3..].starts_with(|c: char| c.is_ascii_digit())
            {
                cores.push(ticks(line)?);
            }
        }
        Some(CpuReading { all: all?, cores })
    }

    /// This host's /proc/stat now.
    pub fn local() -> Option<CpuReading> {
        CpuReading::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// % busy of all CPUs and of each core between `self` and a later reading; None when no
    /// tick passed or the cores changed (a CPU brought on or off line).
    pub fn busy_until(&self, later: &CpuReading) -> Option<(f64, Vec<f64>)> {
        let pct = |a: Ticks, b: Ticks| {
            let total = b.total.checked_sub(a.total).filter(|t| *t > 0)?;
            Some(100.0 * b.busy.saturating_sub(a.busy) as f64 / total as f64)
        };
        let all = pct(self.all, later.all)?;
        if self.cores.len() != later.cores.len() {
            return None;
        }
        let cores = self
            .cores
            .iter()
            .zip(&later.cores)
            .map(|(a, b)| pct(*a, *b))
            .collect::<Option<Vec<f64>>>()?;
        Some((all, cores))
    }
}

/// The CPU of the host that ran dbio over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCpu {
    pub source: String,
    pub cores: u32,
    /// % busy of all cores (every process on the host, dbio's among them).
    pub busy_pct: f64,
    pub per_core_busy_pct: Vec<f64>,
    /// dbio's own CPU (every thread, getrusage) over the window, in cores.
    pub dbio_cores: Option<f64>,
    /// busy_pct >= 90: runnable work, dbio's sessions among it, waited for a core.
    pub saturated: bool,
}

impl ClientCpu {
    /// From two readings of this host's /proc/stat around the window and dbio's own CPU
    /// seconds (user + system) over `seconds`.
    pub fn between(
        before: &CpuReading,
        after: &CpuReading,
        dbio_cpu_s: Option<f64>,
        seconds: f64,
    ) -> Option<ClientCpu> {
        let (busy, per_core) = before.busy_until(after)?;
        Some(ClientCpu {
            source: "this host's /proc/stat (every process) and getrusage (dbio's own threads)"
                .into(),
            cores: per_core.len() as u32,
            busy_pct: busy,
            per_core_busy_pct: per_core,
            dbio_cores: dbio_cpu_s.filter(|_| seconds > 0.0).map(|c| c / seconds),
            saturated: busy >= SATURATED_PCT,
        })
    }
}

/// The CPU of the server's host over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerCpu {
    /// Where it was read (the server's /proc through the connection, or this host's for a
    /// server proven to run here).
    pub source: String,
    pub cores: u32,
    /// % busy of all the host's cores (every process on it).
    pub busy_pct: f64,
    pub per_core_busy_pct: Vec<f64>,
    /// The server's own processes over the window, in cores (PostgreSQL: the postmaster and
    /// its children, those that exited included through the postmaster's cutime/cstime).
    pub server_cores: Option<f64>,
    /// busy_pct >= 90.
    pub saturated: bool,
    pub notes: Vec<String>,
}

impl ServerCpu {
    /// From two readings of the server host's /proc/stat, and the server's processes' CPU
    /// seconds over `seconds`.
    pub fn between(
        source: String,
        before: &CpuReading,
        after: &CpuReading,
        server_cpu_s: Option<f64>,
        seconds: f64,
    ) -> Option<ServerCpu> {
        let (busy, per_core) = before.busy_until(after)?;
        Some(ServerCpu {
            source,
            cores: per_core.len() as u32,
            busy_pct: busy,
            per_core_busy_pct: per_core,
            server_cores: server_cpu_s.filter(|_| seconds > 0.0).map(|c| c / seconds),
            saturated: busy >= SATURATED_PCT,
            notes: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_core_busy_between_two_readings() {
        let a = CpuReading::parse(
            "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 50 0 50 350 50 0 0 0 0 0\ncpu1 50 0 50 350 50 0 0 0 0 0\nintr 1\n",
        )
        .unwrap();
        let b = CpuReading::parse(
            "cpu  280 0 100 710 110 0 0 0 0 0\ncpu0 230 0 50 350 50 0 0 0 0 0\ncpu1 50 0 50 360 60 0 0 0 0 0\n",
        )
        .unwrap();
        let (all, cores) = a.busy_until(&b).unwrap();
        assert!((all - 90.0).abs() < 1e-9, "{all}");
        assert_eq!(cores, vec![100.0, 0.0]);
        assert_eq!(a.busy_until(&a), None);
        let c = ClientCpu::between(&a, &b, Some(1.5), 0.9).unwrap();
        assert!(c.saturated && c.cores == 2);
        assert!((c.dbio_cores.unwrap() - 1.5 / 0.9).abs() < 1e-12);
        assert!(CpuReading::parse("intr 1\n").is_none());
    }

    #[test]
    fn steal_is_busy_and_guest_is_not_counted_twice() {
        let a = CpuReading::parse("cpu  0 0 0 0 0 0 0 0 0 0\n").unwrap();
        // 10 user (5 of them guest), 50 steal, 40 idle.
        let b = CpuReading::parse("cpu  10 0 0 40 0 0 0 50 5 0\n").unwrap();
        assert_eq!(a.busy_until(&b).unwrap().0, 60.0);
    }
}
