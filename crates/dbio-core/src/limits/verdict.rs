//! The limiter verdict: what limited a run, in one line, with the figures that decided it.
//!
//! The rules, in order (the first that holds is the verdict; docs/design.md, "Verdicts"):
//!
//! 1. **locks**: lock waits (PostgreSQL Lock and BufferPin, Oracle Application and
//!    Concurrency classes) are at least 30% of the sessions' DB time.
//! 2. **cap**: the server's cgroup limits the device's reads (or writes, IOPS or bytes) and
//!    the run reached 90% of the limit: "capped at N IOPS (io.max)".
//!    Where no limit could be read: the reads reached storage, the sessions waited on them
//!    at least half their DB time, yet the device held under a quarter of the reads they
//!    waited on (Little's law on each), on a server host that was not saturated: the I/Os
//!    queued before the device, as under a cgroup or provisioned limit the server cannot
//!    show ("queued before the device: a limit?").
//! 3. **client CPU**: the host that ran dbio was saturated (>= 90% busy), dbio itself used at
//!    least a tenth of its cores (it was among the consumers, not a bystander of other work),
//!    and the sessions were active in the database less than half the window: the server
//!    waited for the client. (Without a DB time: dbio itself used half the host's cores.)
//! 4. **shared_buffers** (Oracle: buffer cache): 99% or more of the reads were buffer hits.
//! 5. **page cache**: under half of the bytes the database read came from storage (the
//!    backends' own counters, else the device's reads over the database's), or, where
//!    neither was measured, the page cache held 90% of the data set at the window's start.
//! 6. **server CPU**: the server's host was saturated, the sessions were active half the
//!    window or more, and CPU was half of their DB time or more.
//! 7. **storage**: the reads reached the device and the sessions waited on them: read waits
//!    at least 30% of DB time, or the device busy 80% of the window or more, or reads in
//!    flight at the device (Little's law) at least half the sessions.
//! 8. **unknown**: none of these held, or the figures they need are missing (named).

use serde::{Deserialize, Serialize};

use super::{Limits, OutstandingIo, RelationKind};
use crate::config::Database;
use crate::result::RunResult;
use crate::stats::dbstats::{
    CacheControl, DbMetrics, DeviceMetrics, HostMetrics, MIN_PHYSICAL_RATIO, WaitProfile,
};

/// Lock waits at or above this % of DB time: the run was limited by locks.
pub const LOCK_PCT: f64 = 30.0;
/// A run at or above this share of a cgroup limit hit it.
pub const CAP_SHARE: f64 = 0.9;
/// Read waits at or above this % of DB time, with the device holding under a quarter of the
/// reads waited on: they queued before the device.
pub const QUEUED_READ_WAIT_PCT: f64 = 50.0;
/// Sessions active in the database under this share of the window: something outside the
/// database set the pace.
pub const ACTIVE_SHARE: f64 = 0.5;
/// dbio's own CPU at or above this share of the client host's cores: dbio was among what
/// saturated it.
pub const DBIO_CPU_SHARE: f64 = 0.1;
/// Buffer hits at or above this ratio: the reads were served by the buffer cache.
pub const BUFFER_HIT_RATIO: f64 = 0.99;
/// Page-cache residency at the window's start at or above this %: the page cache served
/// the reads (when no physical-read ratio was measured).
pub const PAGE_CACHE_PCT: f64 = 90.0;
/// CPU at or above this % of DB time, on a saturated server host: server CPU.
pub const CPU_PCT: f64 = 50.0;
/// Read waits at or above this % of DB time: the sessions waited on storage.
pub const READ_WAIT_PCT: f64 = 30.0;
/// The device busy at or above this % of the window (iostat %util).
pub const DEVICE_BUSY_PCT: f64 = 80.0;

/// What limited a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    Storage,
    Cap,
    PageCache,
    SharedBuffers,
    ClientCpu,
    ServerCpu,
    Locks,
    Unknown,
}

impl Limiter {
    /// The name a report gives it, in the engine's words.
    pub fn name(self, engine: Database) -> &'static str {
        match self {
            Limiter::Storage => "storage",
            Limiter::Cap => "cap",
            Limiter::PageCache => "page cache",
            Limiter::SharedBuffers => match engine {
                Database::Postgres => "shared_buffers",
                Database::Oracle => "buffer cache",
            },
            Limiter::ClientCpu => "client CPU",
            Limiter::ServerCpu => "server CPU",
            Limiter::Locks => "locks",
            Limiter::Unknown => "unknown",
        }
    }
}

/// One figure behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// What it is (`device busy`, `sessions active in the database`).
    pub figure: String,
    pub value: f64,
    pub unit: String,
    /// Where in result.json it comes from (`device.busy_pct`), or how it was derived.
    pub source: String,
}

/// The limiter of a run or ramp step, with the figures that decided it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimiterVerdict {
    pub limiter: Limiter,
    /// The one line a report prints after "limited by".
    pub line: String,
    pub evidence: Vec<Evidence>,
    /// Figures a rule needed and did not have (why the verdict may be `unknown`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// The figures a verdict is drawn from, engine-neutral.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub engine: Database,
    /// The run's sessions (readers + writers).
    pub sessions: u32,
    /// The measured window, s.
    pub seconds: f64,
    pub db: Option<&'a DbMetrics>,
    pub waits: Option<&'a WaitProfile>,
    pub device: Option<&'a DeviceMetrics>,
    pub host: Option<&'a HostMetrics>,
    pub limits: Option<&'a Limits>,
}

impl<'a> Inputs<'a> {
    pub fn of(r: &'a RunResult) -> Inputs<'a> {
        Inputs {
            engine: r.engine,
            sessions: r.sessions.len() as u32,
            seconds: r.window.measured_s,
            db: r.db.as_ref(),
            waits: r.waits.as_ref(),
            device: r.device.as_ref(),
            host: r.host.as_ref(),
            limits: r.limits.as_ref(),
        }
    }
}

/// A wait event's class (`IO` of `IO:DataFileRead`, `User I/O` of Oracle's).
fn class(event: &str) -> &str {
    event.split_once(':').map(|(c, _)| c).unwrap_or("")
}

fn is_lock(event: &str) -> bool {
    matches!(
        class(event),
        "Lock" | "BufferPin" | "Buffer" | "Application" | "Concurrency"
    )
}

fn is_cpu(event: &str) -> bool {
    matches!(event, "CPU" | "DB CPU") || event.ends_with(":CPU")
}

/// A wait for a read from a data file: PostgreSQL's IO class read events (18+: the AIO
/// completion waits stand for reads), Oracle's User I/O reads.
fn is_read_wait(event: &str) -> bool {
    let name = event
        .rsplit(':')
        .next()
        .unwrap_or(event)
        .to_ascii_lowercase();
    matches!(class(event), "IO" | "User I/O" | "System I/O")
        && (name.contains("read") || name.starts_with("aioio"))
}

/// % of the sessions' DB time in the rows that `keep`; the top row's event.
fn db_time_pct(waits: &WaitProfile, keep: fn(&str) -> bool) -> Option<(f64, String)> {
    let rows: Vec<_> = waits
        .foreground
        .iter()
        .filter(|r| keep(&r.event) && r.pct_db_time.is_some())
        .collect();
    if waits.db_time_s <= 0.0 {
        return None;
    }
    // fold from 0.0: a float sum of nothing is -0.0.
    let pct = rows
        .iter()
        .filter_map(|r| r.pct_db_time)
        .fold(0.0, |a, b| a + b);
    let top = rows
        .iter()
        .max_by(|a, b| a.time_s.total_cmp(&b.time_s))
        .map(|r| r.event.clone())
        .unwrap_or_default();
    Some((pct, top))
}

fn ev(figure: &str, value: f64, unit: &str, source: &str) -> Evidence {
    Evidence {
        figure: figure.into(),
        value,
        unit: unit.into(),
        source: source.into(),
    }
}

/// The run's limiter, from its figures.
pub fn judge(i: &Inputs) -> LimiterVerdict {
    let mut evidence = Vec::new();
    let mut missing = Vec::new();
    let limits = i.limits;
    let client = limits.and_then(|l| l.client_cpu.as_ref());
    let server = limits.and_then(|l| l.server_cpu.as_ref());
    let caps = limits.and_then(|l| l.caps.as_ref());
    let residency = limits.and_then(|l| l.residency.as_ref());
    let outstanding: Option<&OutstandingIo> = limits.and_then(|l| l.outstanding.as_ref());
    let sessions = i.sessions.max(1) as f64;

    // The sessions' time in the database over the window.
    let db_time = i
        .waits
        .map(|w| w.db_time_s)
        .filter(|t| *t > 0.0)
        .or_else(|| i.db.and_then(|d| d.db_time_s));
    let active = db_time
        .filter(|_| i.seconds > 0.0)
        .map(|t| t / (sessions * i.seconds));
    match active {
        Some(a) => evidence.push(ev(
            "sessions active in the database",
            100.0 * a,
            "% of the window",
            "DB time / (sessions x window)",
        )),
        None => missing.push("DB time (the sessions' time in the database)".to_string()),
    }
    let pct_of = |keep: fn(&str) -> bool| i.waits.and_then(|w| db_time_pct(w, keep));

    // 1. Locks.
    if let Some((pct, top)) = pct_of(is_lock).filter(|(p, _)| *p >= LOCK_PCT) {
        evidence.push(ev("lock waits", pct, "% of DB time", "waits.foreground"));
        return LimiterVerdict {
            limiter: Limiter::Locks,
            line: format!(
                "locks: the sessions waited on locks {pct:.0}% of their DB time (most on {top})"
            ),
            evidence,
            missing,
        };
    }

    // 2. A cgroup I/O limit reached.
    if let Some(c) = caps {
        let observed_iops = |reads: bool| {
            if reads {
                c.read_ios_per_s.or(i.device.map(|d| d.reads_per_s))
            } else {
                c.write_ios_per_s.or(i.device.map(|d| d.writes_per_s))
            }
        };
        let read_bps = i
            .device
            .and_then(|d| d.read_mib_per_s)
            .map(|m| m * 1048576.0);
        let checks = [
            ("read_iops", observed_iops(true), "IOPS", "reads"),
            ("write_iops", observed_iops(false), "IOPS", "writes"),
            ("read_bps", read_bps, "bytes/s", "reads"),
        ];
        for (kind, seen, unit, what) in checks {
            let (Some(l), Some(seen)) = (c.limit(kind), seen) else {
                continue;
            };
            if seen >= CAP_SHARE * l.value as f64 {
                evidence.push(ev(
                    &format!("cgroup {kind} limit"),
                    l.value as f64,
                    unit,
                    &format!("limits.caps ({} of {})", l.file, l.cgroup),
                ));
                evidence.push(ev(
                    &format!("{what} under the limit"),
                    seen,
                    &format!("{unit} over the window"),
                    if c.read_ios_per_s.is_some() && unit == "IOPS" {
                        "limits.caps (the cgroup's own counters)"
                    } else {
                        "device"
                    },
                ));
                if let Some(o) = outstanding.and_then(|o| o.db_reads_in_flight) {
                    evidence.push(ev(
                        "reads waited on (Little's law, database)",
                        o,
                        "in flight",
                        "limits.outstanding.db_reads_in_flight",
                    ));
                }
                let amount = if unit == "IOPS" {
                    format!("{} IOPS", l.value)
                } else {
                    format!("{:.1} MiB/s", l.value as f64 / 1048576.0)
                };
                return LimiterVerdict {
                    limiter: Limiter::Cap,
                    line: format!(
                        "capped at {amount} ({}, cgroup {}): the run's {what} reached {:.0}% of it; the figure is the limit's, not what the storage can do",
                        l.file,
                        l.cgroup,
                        100.0 * seen / l.value as f64
                    ),
                    evidence,
                    missing,
                };
            }
        }
    } else if let Some(why) = limits.and_then(|l| l.null_reasons.get("caps")) {
        missing.push(format!("cgroup I/O limits: {why}"));
    }

    // 2b. A limit that could not be read, seen in where the reads waited.
    let direct = i
        .device
        .is_some_and(|d| d.cache_control == CacheControl::DirectIo);
    let ratio = i
        .host
        .and_then(|h| h.physical_read_ratio)
        .or(i.device.and_then(|d| d.physical_read_ratio));
    let reads_physical = ratio.map_or(direct, |r| r >= MIN_PHYSICAL_RATIO);
    let read_waits = pct_of(is_read_wait);
    let waited_on = outstanding.and_then(|o| o.db_reads_in_flight);
    let at_device = outstanding.and_then(|o| o.device_reads_in_flight);
    let server_saturated = server.is_some_and(|s| s.saturated);
    if let (Some((p, top)), Some(w), Some(d), Some(dev)) =
        (&read_waits, waited_on, at_device, i.device)
        && caps.is_none_or(|c| c.limits.is_empty())
        && reads_physical
        && *p >= QUEUED_READ_WAIT_PCT
        && w >= 0.5
        && d < 0.25 * w
        && !server_saturated
    {
        evidence.push(ev(
            "reads the sessions waited on (Little's law, database)",
            w,
            "in flight",
            "limits.outstanding.db_reads_in_flight",
        ));
        evidence.push(ev(
            "reads in flight at the device (Little's law)",
            d,
            "in flight",
            "limits.outstanding.device_reads_in_flight",
        ));
        return LimiterVerdict {
            limiter: Limiter::Cap,
            line: format!(
                "queued before the device: a limit? the sessions waited on reads {p:.0}% of their DB time ({top}) with \
                 {w:.2} reads in flight, while device {} held {d:.2} ({} busy) at {:.0} reads/s: the I/Os waited before \
                 reaching it, as under a cgroup or provisioned limit the server cannot show; {:.0} IOPS is that limit's \
                 figure, not what the storage can do",
                dev.device,
                dev.busy_pct
                    .map(|b| format!("{b:.0}%"))
                    .unwrap_or_else(|| "-".into()),
                dev.reads_per_s,
                dev.reads_per_s
            ),
            evidence,
            missing,
        };
    }

    // 3. The client's CPU.
    if let Some(c) = client {
        evidence.push(ev(
            "client host CPU busy",
            c.busy_pct,
            &format!("% of {} cores", c.cores),
            "limits.client_cpu.busy_pct",
        ));
        if let Some(d) = c.dbio_cores {
            evidence.push(ev(
                "dbio's own CPU",
                d,
                "cores",
                "limits.client_cpu.dbio_cores",
            ));
        }
        let cores = c.cores.max(1) as f64;
        let waited_for_client = match active {
            Some(a) => {
                a < ACTIVE_SHARE && c.dbio_cores.is_some_and(|d| d >= DBIO_CPU_SHARE * cores)
            }
            None => c.dbio_cores.is_some_and(|d| d >= 0.5 * cores),
        };
        if c.saturated && !waited_for_client {
            evidence.push(ev(
                "the client host was saturated by other work than dbio's",
                c.dbio_cores.unwrap_or(0.0),
                &format!("cores of {} used by dbio", c.cores),
                "limits.client_cpu",
            ));
        }
        if c.saturated && waited_for_client {
            return LimiterVerdict {
                limiter: Limiter::ClientCpu,
                line: format!(
                    "client CPU: this host's {} cores were {:.0}% busy (dbio itself {} cores){}: the server waited for the client",
                    c.cores,
                    c.busy_pct,
                    c.dbio_cores
                        .map(|d| format!("{d:.2}"))
                        .unwrap_or_else(|| "-".into()),
                    active
                        .map(|a| format!(
                            " while the sessions were active in the database {:.0}% of the window",
                            100.0 * a
                        ))
                        .unwrap_or_default()
                ),
                evidence,
                missing,
            };
        }
    } else {
        missing.push("the client host's CPU".to_string());
    }

    // 4. The database's buffer cache.
    let cache_word = Limiter::SharedBuffers.name(i.engine);
    if let Some(db) = i.db {
        if let Some(hit) = db.buffer_hit_ratio {
            evidence.push(ev(
                "buffer hit ratio",
                100.0 * hit,
                "%",
                "db.buffer_hit_ratio",
            ));
            if hit >= BUFFER_HIT_RATIO {
                return LimiterVerdict {
                    limiter: Limiter::SharedBuffers,
                    line: format!(
                        "{cache_word}: {:.1}% of the reads were buffer hits ({:.1} reads/s missed it): the data set lives in {cache_word}, so no I/O was measured",
                        100.0 * hit,
                        db.read_iops
                    ),
                    evidence,
                    missing,
                };
            }
        }
    } else {
        missing.push("the database's statistics".to_string());
    }

    // 5. The OS page cache.
    let backends_ratio = i.host.and_then(|h| h.physical_read_ratio);
    let device_ratio = i.device.and_then(|d| d.physical_read_ratio);
    if let Some(r) = backends_ratio {
        evidence.push(ev(
            "bytes the backends fetched from storage / bytes they read",
            r,
            "ratio",
            "host.physical_read_ratio",
        ));
    }
    if let Some(r) = device_ratio {
        evidence.push(ev(
            "device reads / database reads",
            r,
            "ratio",
            "device.physical_read_ratio",
        ));
    }
    let page_cache_pct = residency.and_then(|r| {
        let t = r.totals(None);
        t.pct(t.before.page_cache_blocks)
    });
    if let Some(p) = page_cache_pct {
        evidence.push(ev(
            "data set in the page cache at the window's start",
            p,
            "% of its blocks",
            "limits.residency",
        ));
    }
    let cached = match ratio {
        Some(r) => r < MIN_PHYSICAL_RATIO,
        None => !direct && page_cache_pct.is_some_and(|p| p >= PAGE_CACHE_PCT),
    };
    let reads = i.db.map(|d| d.read_iops).unwrap_or(0.0);
    if cached && reads > 0.0 {
        let end_pct = residency.and_then(|r| {
            let t = r.totals(None);
            t.pct(t.after.page_cache_blocks)
        });
        let held = |p: f64| match end_pct {
            Some(e) if (e - p).abs() >= 20.0 => format!(
                "the page cache held {p:.0}% of the data set at the window's start and {e:.0}% at its end"
            ),
            _ => format!("the page cache held {p:.0}% of the data set at the window's start"),
        };
        let how = match (ratio, page_cache_pct) {
            (Some(r), Some(p)) => format!(
                "{:.0}% of what the database read came from storage, and {}",
                100.0 * r,
                held(p)
            ),
            (Some(r), None) => format!(
                "{:.0}% of what the database read came from storage",
                100.0 * r
            ),
            (None, Some(p)) => held(p),
            (None, None) => String::new(),
        };
        return LimiterVerdict {
            limiter: Limiter::PageCache,
            line: format!("page cache: {how}: the {reads:.0} reads/s describe memory, not storage"),
            evidence,
            missing,
        };
    }

    // 6. The server's CPU.
    let cpu = pct_of(is_cpu);
    if let Some((p, _)) = cpu {
        evidence.push(ev("CPU", p, "% of DB time", "waits.foreground"));
    }
    if let Some(s) = server {
        evidence.push(ev(
            "server host CPU busy",
            s.busy_pct,
            &format!("% of {} cores", s.cores),
            "limits.server_cpu.busy_pct",
        ));
        if let Some(c) = s.server_cores {
            evidence.push(ev(
                "the server's processes' CPU",
                c,
                "cores",
                "limits.server_cpu.server_cores",
            ));
        }
        let busy_in_db = active.is_some_and(|a| a >= ACTIVE_SHARE);
        if let (true, true, Some((p, _))) = (s.saturated, busy_in_db, cpu)
            && p >= CPU_PCT
        {
            return LimiterVerdict {
                limiter: Limiter::ServerCpu,
                line: format!(
                    "server CPU: the server host's {} cores were {:.0}% busy{} and CPU was {p:.0}% of the sessions' DB time",
                    s.cores,
                    s.busy_pct,
                    s.server_cores
                        .map(|c| format!(" (the server's processes {c:.2} cores)"))
                        .unwrap_or_default()
                ),
                evidence,
                missing,
            };
        }
    } else {
        missing.push(
            limits
                .and_then(|l| l.null_reasons.get("server_cpu"))
                .map(|w| format!("the server host's CPU: {w}"))
                .unwrap_or_else(|| "the server host's CPU".to_string()),
        );
    }

    // 7. Storage.
    let physical = match ratio {
        Some(r) => r >= MIN_PHYSICAL_RATIO,
        None => {
            direct
                || residency.is_some_and(|r| {
                    let t = r.totals(Some(RelationKind::Table));
                    t.pct(t.before.page_cache_blocks)
                        .is_some_and(|p| p < 100.0 - PAGE_CACHE_PCT)
                })
        }
    };
    if let Some((p, _)) = &read_waits {
        evidence.push(ev("read waits", *p, "% of DB time", "waits.foreground"));
    }
    let busy = i.device.and_then(|d| d.busy_pct);
    if let Some(b) = busy {
        evidence.push(ev("device busy", b, "% of the window", "device.busy_pct"));
    }
    let in_flight = outstanding.and_then(|o| o.device_reads_in_flight);
    if let Some(f) = in_flight {
        evidence.push(ev(
            "reads in flight at the device (Little's law)",
            f,
            &format!("for {} sessions", i.sessions),
            "limits.outstanding.device_reads_in_flight",
        ));
    }
    let waited = read_waits
        .as_ref()
        .is_some_and(|(p, _)| *p >= READ_WAIT_PCT)
        || busy.is_some_and(|b| b >= DEVICE_BUSY_PCT)
        || in_flight.is_some_and(|f| f >= 0.5 * sessions);
    if physical && reads > 0.0 && waited {
        let mut parts = Vec::new();
        if let Some(d) = i.device {
            parts.push(format!(
                "device {} {}{:.0} reads/s",
                d.device,
                busy.map(|b| format!("{b:.0}% busy, ")).unwrap_or_default(),
                d.reads_per_s
            ));
        }
        if let Some(f) = in_flight {
            parts.push(format!(
                "{f:.1} reads in flight at the device for {} sessions",
                i.sessions
            ));
        }
        if let Some((p, top)) = &read_waits {
            parts.push(format!("read waits {p:.0}% of DB time ({top})"));
        }
        return LimiterVerdict {
            limiter: Limiter::Storage,
            line: format!("storage: {}", parts.join("; ")),
            evidence,
            missing,
        };
    }
    if ratio.is_none() && !direct && residency.is_none() {
        missing.push(
            "whether the reads reached the device (no physical-read ratio, no residency)"
                .to_string(),
        );
    }
    let said: Vec<String> = [
        active.map(|a| {
            format!(
                "the sessions were active in the database {:.0}% of the window",
                100.0 * a
            )
        }),
        client.map(|c| format!("the client host was {:.0}% busy", c.busy_pct)),
        server.map(|s| format!("the server host {:.0}% busy", s.busy_pct)),
        read_waits.map(|(p, _)| format!("read waits were {p:.0}% of DB time")),
    ]
    .into_iter()
    .flatten()
    .collect();
    LimiterVerdict {
        limiter: Limiter::Unknown,
        line: format!(
            "unknown: no rule held{}{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(" ({})", said.join(", "))
            },
            if missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", missing.join("; "))
            }
        ),
        evidence,
        missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{
        CacheCounts, ClientCpu, IoCaps, IoLimit, RelationResidency, Residency, ServerCpu,
    };
    use crate::stats::dbstats::WaitRow;

    fn row(event: &str, pct: f64) -> WaitRow {
        WaitRow {
            event: event.into(),
            waits: None,
            time_s: pct / 10.0,
            avg_us: None,
            pct_db_time: Some(pct),
            measured: false,
            samples: 1,
            note: None,
            device_await_ms: None,
        }
    }

    fn waits(db_time_s: f64, rows: &[(&str, f64)]) -> WaitProfile {
        WaitProfile {
            db_time_s,
            foreground: rows.iter().map(|(e, p)| row(e, *p)).collect(),
            ..WaitProfile::default()
        }
    }

    fn device(reads: f64, busy: f64, ratio: f64, cc: CacheControl) -> DeviceMetrics {
        DeviceMetrics {
            device: "vda".into(),
            path: "/data".into(),
            seconds: 10.0,
            reads_per_s: reads,
            writes_per_s: 0.0,
            read_kib_per_op: Some(8.0),
            avg_read_wait_ms: Some(0.5),
            avg_write_wait_ms: None,
            physical_read_ratio: Some(ratio),
            cache_control: cc,
            major_minor: Some("254:0".into()),
            source: None,
            read_mib_per_s: Some(reads * 8.0 / 1024.0),
            await_ms: Some(0.5),
            avg_queue_depth: Some(1.0),
            busy_pct: Some(busy),
            tables: Vec::new(),
        }
    }

    fn db(reads: f64, hit: f64) -> DbMetrics {
        DbMetrics {
            seconds: 10.0,
            read_iops: reads,
            avg_read_latency_us: Some(500.0),
            buffer_hit_ratio: Some(hit),
            valid: true,
            ..DbMetrics::default()
        }
    }

    fn client(busy: f64, dbio: f64) -> ClientCpu {
        ClientCpu {
            source: "t".into(),
            cores: 2,
            busy_pct: busy,
            per_core_busy_pct: vec![busy, busy],
            dbio_cores: Some(dbio),
            saturated: busy >= crate::limits::cpu::SATURATED_PCT,
        }
    }

    fn server(busy: f64) -> ServerCpu {
        ServerCpu {
            source: "t".into(),
            cores: 2,
            busy_pct: busy,
            per_core_busy_pct: vec![busy, busy],
            server_cores: Some(busy / 50.0),
            saturated: busy >= crate::limits::cpu::SATURATED_PCT,
            notes: Vec::new(),
        }
    }

    struct Case {
        sessions: u32,
        db: Option<DbMetrics>,
        waits: Option<WaitProfile>,
        device: Option<DeviceMetrics>,
        host: Option<HostMetrics>,
        limits: Limits,
    }

    impl Case {
        /// Four sessions on storage: 10 s, DB time 36 s, reads 80% of it, device 95% busy.
        fn storage() -> Case {
            let dev = device(2000.0, 95.0, 1.0, CacheControl::DirectIo);
            let d = db(2000.0, 0.5);
            Case {
                sessions: 4,
                limits: Limits {
                    client_cpu: Some(client(40.0, 0.1)),
                    server_cpu: Some(server(30.0)),
                    outstanding: Some(OutstandingIo::of(4, Some(&dev), Some(&d), None)),
                    ..Limits::default()
                },
                db: Some(d),
                waits: Some(waits(36.0, &[("IO:DataFileRead", 80.0), ("CPU", 15.0)])),
                device: Some(dev),
                host: None,
            }
        }

        fn judge(&self) -> LimiterVerdict {
            judge(&Inputs {
                engine: Database::Postgres,
                sessions: self.sessions,
                seconds: 10.0,
                db: self.db.as_ref(),
                waits: self.waits.as_ref(),
                device: self.device.as_ref(),
                host: self.host.as_ref(),
                limits: Some(&self.limits),
            })
        }
    }

    #[test]
    fn a_run_on_the_device_is_storage_bound() {
        let v = Case::storage().judge();
        assert_eq!(v.limiter, Limiter::Storage, "{v:?}");
        assert!(
            v.line.contains("device vda 95% busy") && v.line.contains("IO:DataFileRead"),
            "{}",
            v.line
        );
        assert!(v.evidence.iter().any(|e| e.source == "device.busy_pct"));
    }

    #[test]
    fn lock_waits_come_first() {
        let mut c = Case::storage();
        c.waits = Some(waits(
            36.0,
            &[("Lock:transactionid", 45.0), ("IO:DataFileRead", 40.0)],
        ));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::Locks);
        assert!(v.line.contains("45%") && v.line.contains("Lock:transactionid"));
    }

    #[test]
    fn a_cgroup_limit_reached_is_a_cap_and_one_not_reached_is_not() {
        let mut c = Case::storage();
        c.device = Some(device(398.0, 20.0, 1.0, CacheControl::DirectIo));
        let caps = IoCaps {
            source: "t".into(),
            cgroup_version: "v1".into(),
            cgroup: "/bench".into(),
            device: Some("7:0".into()),
            limits: vec![IoLimit {
                kind: "read_iops".into(),
                value: 400,
                file: "blkio.throttle.read_iops_device".into(),
                cgroup: "/bench".into(),
            }],
            ..IoCaps::default()
        };
        c.limits.caps = Some(caps.clone());
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::Cap, "{v:?}");
        assert!(
            v.line
                .starts_with("capped at 400 IOPS (blkio.throttle.read_iops_device"),
            "{}",
            v.line
        );
        // A limit far above what the run did limits nothing.
        c.limits.caps = Some(IoCaps {
            limits: vec![IoLimit {
                value: 100_000,
                ..caps.limits[0].clone()
            }],
            ..caps
        });
        assert_eq!(c.judge().limiter, Limiter::Storage);
    }

    // A cgroup throttle the server could not read: the sessions wait on reads the device
    // never holds (seen: 0.97 reads waited on, 0.01 at the device, 1% busy).
    #[test]
    fn reads_queued_before_the_device_are_a_limit_the_server_cannot_show() {
        let mut c = Case::storage();
        let dev = DeviceMetrics {
            avg_read_wait_ms: Some(0.03),
            ..device(396.0, 1.0, 1.0, CacheControl::DirectIo)
        };
        let d = DbMetrics {
            avg_read_latency_us: Some(2500.0),
            ..db(396.0, 0.8)
        };
        c.sessions = 1;
        c.limits.outstanding = Some(OutstandingIo::of(1, Some(&dev), Some(&d), None));
        c.device = Some(dev.clone());
        c.db = Some(d.clone());
        c.waits = Some(waits(9.8, &[("IO:DataFileRead", 97.0)]));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::Cap, "{v:?}");
        assert!(
            v.line.starts_with("queued before the device: a limit?"),
            "{}",
            v.line
        );
        // On a saturated server host the wait may be for a CPU after the read: no claim.
        c.limits.server_cpu = Some(server(100.0));
        assert_eq!(c.judge().limiter, Limiter::Storage);
        // A device that holds the reads the sessions wait on is the storage.
        c.limits.server_cpu = Some(server(30.0));
        let busy = DeviceMetrics {
            avg_read_wait_ms: Some(2.4),
            ..dev
        };
        c.limits.outstanding = Some(OutstandingIo::of(1, Some(&busy), Some(&d), None));
        c.device = Some(busy);
        assert_eq!(c.judge().limiter, Limiter::Storage);
    }

    #[test]
    fn a_saturated_client_with_idle_sessions_is_client_cpu() {
        // 16 sessions active 3% of the window on a saturated 2-core client.
        let mut c = Case::storage();
        c.sessions = 16;
        c.db = Some(db(20.0, 0.999));
        c.waits = Some(waits(4.8, &[("CPU", 60.0)]));
        c.limits.client_cpu = Some(client(100.0, 0.5));
        c.limits.server_cpu = Some(server(100.0));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::ClientCpu, "{v:?}");
        assert!(v.line.contains("active in the database 3% of the window"));
        // The same host saturated while the sessions are busy in the database: not the client.
        c.waits = Some(waits(150.0, &[("CPU", 90.0)]));
        c.db = Some(db(2000.0, 0.5));
        c.device = Some(device(2000.0, 10.0, 1.0, CacheControl::DirectIo));
        assert_eq!(c.judge().limiter, Limiter::ServerCpu);
        // Without a DB time: dbio itself must use half the host.
        c.waits = None;
        c.limits.client_cpu = Some(client(100.0, 1.2));
        assert_eq!(c.judge().limiter, Limiter::ClientCpu);
        c.limits.client_cpu = Some(client(100.0, 0.3));
        assert_ne!(c.judge().limiter, Limiter::ClientCpu);
    }

    // Seen: one reader on a page-cached data set, on a host saturated by other work (dbio
    // 0.07 of 2 cores, the session active 47% of the window), labelled client CPU.
    #[test]
    fn a_client_host_busy_with_other_work_is_not_client_cpu() {
        let mut c = Case::storage();
        c.sessions = 1;
        c.device = Some(device(30.0, 2.0, 0.01, CacheControl::None));
        c.waits = Some(waits(1.4, &[("CPU", 60.0), ("IO:DataFileRead", 30.0)]));
        c.limits.client_cpu = Some(client(100.0, 0.07));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::PageCache, "{v:?}");
        assert!(
            v.evidence
                .iter()
                .any(|e| e.figure.contains("saturated by other work"))
        );
    }

    #[test]
    fn buffer_hits_are_shared_buffers_and_oracle_says_buffer_cache() {
        let mut c = Case::storage();
        c.db = Some(db(0.4, 0.9995));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::SharedBuffers);
        assert!(v.line.starts_with("shared_buffers: 100.0%"), "{}", v.line);
        assert_eq!(
            Limiter::SharedBuffers.name(Database::Oracle),
            "buffer cache"
        );
    }

    #[test]
    fn reads_served_by_the_page_cache_are_page_cache() {
        let mut c = Case::storage();
        c.device = Some(device(30.0, 2.0, 0.015, CacheControl::None));
        c.waits = Some(waits(38.0, &[("CPU", 70.0), ("IO:DataFileRead", 25.0)]));
        c.limits.server_cpu = Some(server(99.0));
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::PageCache, "{v:?}");
        // No ratio measured: the residency at the window's start decides.
        let counts = CacheCounts {
            shared_buffers_blocks: Some(100),
            page_cache_blocks: Some(7900),
            both_blocks: Some(90),
        };
        c.device = None;
        c.limits.residency = Some(Residency {
            block_size: 8192,
            relations: vec![RelationResidency {
                relation: "user1.cf1".into(),
                kind: RelationKind::Table,
                blocks: 8000,
                before: counts,
                after: counts,
            }],
            ..Residency::default()
        });
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::PageCache, "{v:?}");
        assert!(v.line.contains("held 99%"), "{}", v.line);
    }

    #[test]
    fn nothing_decisive_is_unknown_and_says_what_is_missing() {
        let c = Case {
            sessions: 2,
            db: Some(db(100.0, 0.5)),
            waits: None,
            device: None,
            host: None,
            limits: Limits::default(),
        };
        let v = c.judge();
        assert_eq!(v.limiter, Limiter::Unknown);
        assert!(v.line.contains("missing"), "{}", v.line);
        assert!(v.missing.iter().any(|m| m.contains("DB time")));
    }

    #[test]
    fn wait_classes() {
        assert!(is_read_wait("IO:DataFileRead") && is_read_wait("IO:AioIoCompletion"));
        assert!(is_read_wait("User I/O:db file sequential read"));
        assert!(!is_read_wait("IO:WalWrite") && !is_read_wait("CPU"));
        assert!(is_lock("Lock:tuple") && is_lock("Application:enq: TX - row lock contention"));
        assert!(!is_lock("LWLock:BufferMapping"));
        assert!(is_cpu("CPU") && is_cpu("DB CPU"));
    }
}
