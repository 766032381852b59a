//! `result.json`: one versioned document per run. The client part is filled from the driver's
//! measurements; `db`, `waits`, `device` and `host` hold the database collector's and the OS
//! collector's figures (null where they could not be collected, with a warning saying why);
//! `limits` and `limiter` say what limited the run; `targets` holds each target of a
//! several-target run, `shard` and `merge` a sharded run's identity and how it was combined.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::{Arrival, Config, Database};
use crate::driver::{
    CpuUsage, DriveOutcome, EndedBy, IntervalRow, OpenLoopOutcome, RunStatus, SessionOutcome,
    Steadiness, WindowSpec,
};
use crate::error::CoreError;
use crate::merge::{MergeInfo, ShardInfo};
use crate::stats::dbstats::{
    CalibrationCompare, DbMetrics, DeviceMetrics, HostMetrics, MissingRight, WaitProfile,
};
use crate::stats::{LatencySummary, encode_histogram};
use crate::workload::OpKind;

/// No rate in a result is above this (per second): a billion I/Os or statements per second is
/// beyond any server or device this measures.
const MAX_RATE_PER_S: f64 = 1e9;

/// Version of the result document; readers refuse a newer one.
pub const RESULT_FORMAT: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub format: u32,
    pub status: RunStatus,
    /// Why the run failed or stopped early.
    pub error: Option<String>,
    pub label: Option<String>,
    pub engine: Database,
    /// The effective configuration; `target.dsn` holds the redacted target.
    pub config: Config,
    pub environment: Environment,
    pub window: Window,
    pub client: ClientMetrics,
    pub sessions: Vec<SessionOutcome>,
    /// Sessions that did not answer within the grace once the run was ending (the server
    /// stopped answering): their connections were shut down (`sessions[].ended_by: lost`).
    #[serde(default)]
    pub sessions_lost: u32,
    pub timeseries: Vec<IntervalRow>,
    /// Database statistics over the window (collector); null when not collected.
    pub db: Option<DbMetrics>,
    /// Wait profile (collector's sampler).
    pub waits: Option<WaitProfile>,
    /// OS device statistics when the server is local.
    pub device: Option<DeviceMetrics>,
    /// The raw device's figures at the same load (`--calibration FILE`).
    #[serde(default)]
    pub calibration: Option<CalibrationCompare>,
    /// The database host's own figures (backends' physical reads, RAM, CPU), with where they
    /// were read; null when neither the role nor the host allowed it (see `missing_rights`).
    #[serde(default)]
    pub host: Option<HostMetrics>,
    /// Each figure this run could not have for want of a right, with the GRANT that gives it.
    #[serde(default)]
    pub missing_rights: Vec<MissingRight>,
    /// What a limiter verdict is drawn from beside the figures above: cache residency per
    /// relation, the server's cgroup I/O caps, client and server CPU, the outstanding I/O.
    #[serde(default)]
    pub limits: Option<crate::limits::Limits>,
    /// What limited this run, with the figures that decided it.
    #[serde(default)]
    pub limiter: Option<crate::limits::LimiterVerdict>,
    pub warnings: Vec<String>,
    /// This run is one shard of a run driven by several processes (`run --shard I/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// This result was merged from shards (`dbio merge`): which, and how they lined up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeInfo>,
    /// A run over several targets (`target.dsns`): each target's sessions, client figures
    /// and collector's figures. The run's own `client` is the totals (latency the merged
    /// distribution), its `db` the targets' sums; `waits`, `device` and `host` are per target
    /// only (two targets may share one device: summing would count it twice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetResult>,
    /// The wait for steady state before the window (`run.steady`): the rule, how long it
    /// took and the slope, or `steady: false` ("not steady": the window opened at the cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<Steadiness>,
    /// Preconditioning before the window (`run.precondition`): updates until their rate held
    /// the rule, or the cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precondition: Option<Steadiness>,
    /// An open loop (`run.rate`): the schedule, the starts it missed and their lag. The
    /// client latency figures then count from each operation's intended start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoopMetrics>,
}

/// What an open loop's schedule asked for and how far behind it the sessions were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenLoopMetrics {
    /// The intended starts per second (`run.rate`).
    pub rate_per_s: f64,
    pub arrival: Arrival,
    /// Intended starts inside the window.
    pub scheduled: u64,
    /// Of them, started inside the window (completed, failed, or in flight at its end).
    pub started: u64,
    /// Of them, not started by the window's end: the backlog of a rate above capacity.
    pub missed_starts: u64,
    /// How late the starts were behind their intended starts, µs (HDR).
    pub lag_us: Option<LatencySummary>,
    /// HDR histogram of the lag in µs, V2 + deflate, base64.
    pub lag_histogram: String,
    /// Mean lag of the first and of the last quarter of the window's intervals, µs: a lag
    /// that grows from one to the other is a schedule the system cannot keep.
    pub lag_first_quarter_us: Option<f64>,
    pub lag_last_quarter_us: Option<f64>,
}

impl OpenLoopMetrics {
    fn of(o: &OpenLoopOutcome, timeseries: &[IntervalRow]) -> OpenLoopMetrics {
        let started = o.lag.len();
        let lags: Vec<(f64, u64)> = timeseries
            .iter()
            .filter_map(|r| Some((r.lag_mean_us?, r.reads + r.updates + r.errors)))
            .collect();
        let quarter = lags.len().div_ceil(4);
        let mean = |rows: &[(f64, u64)]| {
            let n: u64 = rows.iter().map(|r| r.1.max(1)).sum();
            (n > 0 && !rows.is_empty())
                .then(|| rows.iter().map(|r| r.0 * r.1.max(1) as f64).sum::<f64>() / n as f64)
        };
        OpenLoopMetrics {
            rate_per_s: o.plan.rate_per_s,
            arrival: o.plan.arrival,
            scheduled: o.scheduled,
            started,
            missed_starts: o.missed_starts,
            lag_us: LatencySummary::from_histogram(&o.lag),
            lag_histogram: encode_histogram(&o.lag),
            lag_first_quarter_us: mean(&lags[..quarter.min(lags.len())]),
            lag_last_quarter_us: mean(&lags[lags.len().saturating_sub(quarter)..]),
        }
    }

    /// The warning when the sessions did not keep the schedule: starts missed, or a lag
    /// that grew through the window.
    fn behind(&self) -> Option<String> {
        let missed_share = self.missed_starts as f64 / self.scheduled.max(1) as f64;
        // Doubled, and by more than 10 ms: a queue that builds up, not a wake-up's jitter.
        let growing = match (self.lag_first_quarter_us, self.lag_last_quarter_us) {
            (Some(a), Some(b)) => b > 2.0 * a && b - a > 10_000.0,
            _ => false,
        };
        (missed_share > 0.01 || growing).then(|| {
            format!(
                "the open loop fell behind its schedule: {} of {} intended starts ({:.1}%) were not begun by the window's end{}; \
                 {}/s is above what the sessions and the storage sustain, and the client latency (from the intended starts) \
                 is that of a growing queue, not of the device",
                self.missed_starts,
                self.scheduled,
                missed_share * 100.0,
                match (self.lag_first_quarter_us, self.lag_last_quarter_us) {
                    (Some(a), Some(b)) => format!(
                        ", and the mean lag grew from {:.1} ms (first quarter of the window) to {:.1} ms (last quarter)",
                        a / 1000.0,
                        b / 1000.0
                    ),
                    _ => String::new(),
                },
                self.rate_per_s
            )
        })
    }
}

/// One target of a run over several.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetResult {
    /// 0-based, in `target.dsns` order (the sessions' `spec.target`).
    pub index: u32,
    /// The target as results show it (no password).
    pub target: String,
    /// Its server, settings and data set as its preflight found them.
    pub environment: Environment,
    pub readers: u32,
    pub writers: u32,
    /// Its sessions' operations, over the run's measured window.
    pub read: OpMetrics,
    pub update: OpMetrics,
    pub ops: u64,
    pub ops_per_s: f64,
    /// Its collector's figures (null where not collected, with the run's warning saying why).
    pub db: Option<DbMetrics>,
    pub waits: Option<WaitProfile>,
    pub device: Option<DeviceMetrics>,
    pub host: Option<HostMetrics>,
    #[serde(default)]
    pub missing_rights: Vec<MissingRight>,
    /// Its collector's limiter figures and its own limiter verdict.
    #[serde(default)]
    pub limits: Option<crate::limits::Limits>,
    #[serde(default)]
    pub limiter: Option<crate::limits::LimiterVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub dbio_version: String,
    /// Host that ran dbio.
    pub client_host: String,
    /// `host=... port=... user=... dbname=...`, never a password.
    pub target: String,
    /// The one server of a host list (`host=a,b`) this run used for every session and the
    /// collector: the first that answered and fit target_session_attrs (`host=b port=5432`);
    /// null for a target of one server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_server: Option<String>,
    pub server_version: String,
    pub server_version_num: i64,
    /// Settings that matter to the numbers (shared_buffers, track_io_timing, ...); null when
    /// the server does not have the setting.
    pub settings: BTreeMap<String, Option<String>>,
    pub data_set: DataSetInfo,
    /// Whether the measured sessions' connections used TLS, with the protocol and cipher
    /// suite; null where the engine does not report it (Oracle).
    #[serde(default)]
    pub session_tls: Option<SessionTls>,
    /// The read path asked for and the plan preflight verified; null where the engine does
    /// not verify it (Oracle) or in results written before it was recorded.
    #[serde(default)]
    pub read_path: Option<ReadPathInfo>,
}

/// `run.read_path` and the reader's plan as preflight verified it, with the settings that
/// decide how many reads a session has in flight on that path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadPathInfo {
    /// `index` or `bitmap`, as asked.
    pub path: crate::config::ReadPath,
    /// The plan's nodes, outermost first: `Aggregate > Index Scan using i_cf1 on user1.cf1`.
    pub plan: String,
    /// The node that reads the table (`Index Scan`, `Bitmap Heap Scan`).
    pub scan: String,
    /// How the plan was obtained.
    pub source: String,
    /// Server settings (null where this server version has none): io_method (18+),
    /// effective_io_concurrency, io_combine_limit (17+).
    pub io_method: Option<String>,
    pub effective_io_concurrency: Option<String>,
    pub io_combine_limit: Option<String>,
    /// The server's index-scan prefetch setting (`enable_indexscan_prefetch`), where it has
    /// one: pinned off for read_path index, so that each session keeps one read in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_prefetch: Option<String>,
}

/// Where one table of the data set really is and how big, as preflight read the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableFacts {
    pub schema: String,
    /// The tablespace the table is in (pg_class.reltablespace, the database's default when 0).
    pub tablespace: String,
    pub index_tablespace: Option<String>,
    /// Heap blocks on disk (pg_relation_size / block size).
    pub blocks: u64,
    /// Rows by pg_class.reltuples after preflight's VACUUM/ANALYZE (an estimate where
    /// ANALYZE sampled); null when the table was never vacuumed or analyzed.
    pub rows_estimate: Option<f64>,
    pub owner: String,
}

/// TLS on the measured sessions' connections.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionTls {
    /// Every session used TLS.
    pub used: bool,
    pub sessions: u32,
    pub sessions_with_tls: u32,
    /// `TLSv1.3`, `TLSv1.2`; null when no session used TLS.
    pub protocol: Option<String>,
    /// The negotiated cipher suite (IANA name); null when no session used TLS.
    pub cipher: Option<String>,
}

impl SessionTls {
    /// From each session's (protocol, cipher), None for a plaintext session; when sessions
    /// differ, the first TLS session's are shown.
    pub fn of<'a>(sessions: impl IntoIterator<Item = Option<(&'a str, &'a str)>>) -> SessionTls {
        let mut out = SessionTls {
            used: true,
            sessions: 0,
            sessions_with_tls: 0,
            protocol: None,
            cipher: None,
        };
        for s in sessions {
            out.sessions += 1;
            match s {
                Some((protocol, cipher)) => {
                    out.sessions_with_tls += 1;
                    out.protocol.get_or_insert_with(|| protocol.to_string());
                    out.cipher.get_or_insert_with(|| cipher.to_string());
                }
                None => out.used = false,
            }
        }
        out.used &= out.sessions > 0;
        out
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataSetInfo {
    pub schemas: u32,
    pub scale_blocks: u64,
    pub block_size: u64,
    /// Heap bytes of all schemas.
    pub table_bytes: u64,
    /// Schemas the sessions used.
    pub schemas_used: Vec<String>,
    /// Each schema's table as found before the window (tablespace, size); empty where the
    /// engine does not read it.
    #[serde(default)]
    pub tables: Vec<TableFacts>,
}

/// What bounds the measured window: a time (`run.run_time`) or a count of operations per
/// session (`run.work_loop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowMode {
    RunTime,
    WorkLoop,
}

impl std::fmt::Display for WindowMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WindowMode::RunTime => "run_time",
            WindowMode::WorkLoop => "work_loop",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Start and end of the measured window, UTC.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Seconds the client's rates are computed over: operations count when they completed
    /// inside the window.
    pub measured_s: f64,
    /// Seconds from the window's start until the last session had stopped (what was in
    /// flight at the end was cancelled): the interval the database's counters cover and its
    /// rates divide by.
    #[serde(default)]
    pub db_window_s: Option<f64>,
    /// Operations in flight at the window's end, cancelled or completed after it: not
    /// counted in any figure.
    #[serde(default)]
    pub ops_past_window: u64,
    pub warmup_s: f64,
    /// `run_time` or `work_loop`.
    pub mode: WindowMode,
    pub run_time_s: Option<f64>,
    pub work_loop: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpMetrics {
    /// Successful measured operations.
    pub count: u64,
    pub errors: u64,
    /// count / measured seconds.
    pub ops_per_s: f64,
    /// Rows the operations touched (reads: rows counted; updates: rows changed).
    pub rows: u64,
    /// Latency of successful operations in µs; null when there were none.
    pub latency_us: Option<LatencySummary>,
    /// HDR histogram of latency in µs, V2 + deflate, base64.
    pub histogram: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientMetrics {
    pub read: OpMetrics,
    pub update: OpMetrics,
    pub ops: u64,
    pub errors: u64,
    pub ops_per_s: f64,
    /// dbio's own CPU over the window (all threads, getrusage).
    pub cpu: Option<CpuUsage>,
    /// (user + system) CPU milliseconds per 1,000 operations.
    pub cpu_ms_per_1000_ops: Option<f64>,
    /// dbio's peak resident memory (getrusage ru_maxrss), KiB.
    pub max_rss_kib: Option<u64>,
    /// How the client loop mapped sessions to OS threads: `threads` (one per session) or
    /// `events` (an event loop per core); absent for the server loop and older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_engine: Option<String>,
    /// Why that engine (`run.session_engine` and what the run needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_engine_why: Option<String>,
}

/// An operation still running this long when the window ended had stalled (a lock wait, a
/// device that stopped answering): it is cancelled and not counted, and the run says so,
/// naming it and its duration, since the latency figures cannot show it.
pub const STALL_S: f64 = 1.0;

/// The warning when the database's DB time exceeds what `sessions` sessions can spend in
/// `seconds`: other sessions worked in the database. None when it does not.
pub fn db_time_warning(db_time_s: f64, sessions: usize, seconds: f64) -> Option<String> {
    let bound = sessions as f64 * seconds;
    (bound > 0.0 && db_time_s > bound * 1.1).then(|| {
        format!(
            "DB time {db_time_s:.1} s exceeds what {sessions} session(s) can spend in {seconds:.1} s \
             ({bound:.1} s): other sessions worked in this database during the window, \
             and database-wide figures include their work"
        )
    })
}

/// The warning for operations that had stalled when the window ended (named, with how long
/// each had been running), or None.
pub fn stall_warning(sessions: &[SessionOutcome]) -> Option<String> {
    let mut stalled: Vec<(&str, f64)> = sessions
        .iter()
        .filter_map(|s| {
            s.in_flight_at_end_s
                .filter(|t| *t >= STALL_S)
                .map(|t| (s.spec.name.as_str(), t))
        })
        .collect();
    if stalled.is_empty() {
        return None;
    }
    stalled.sort_by(|a, b| b.1.total_cmp(&a.1));
    let named: Vec<String> = stalled
        .iter()
        .map(|(name, t)| format!("{name} {t:.2} s"))
        .collect();
    Some(format!(
        "{} operation(s) had stalled when the window ended ({}: running that long, at least {STALL_S} s): \
         cancelled there and not counted, so the latency figures (max included) do not show them; \
         a lock wait or a device that stopped answering?",
        stalled.len(),
        named.join(", ")
    ))
}

/// What the backend knows about the target and data set, for the result's environment.
pub struct RunContext {
    /// This run is one shard of several (`run.shard` I/N, N > 1): the database-wide figures
    /// include the other shards' sessions, so they are judged in the merged result.
    pub other_shards: bool,
    pub config: Config,
    pub environment: Environment,
    pub warnings: Vec<String>,
    /// The collectors' figures (null where not collected).
    pub db: Option<DbMetrics>,
    pub waits: Option<WaitProfile>,
    pub device: Option<DeviceMetrics>,
    pub calibration: Option<CalibrationCompare>,
}

impl RunResult {
    pub fn build(ctx: RunContext, window_spec: WindowSpec, outcome: DriveOutcome) -> RunResult {
        let secs = outcome.measured_s;
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let op = |kind: OpKind| {
            let k = kind.index();
            let count: u64 = outcome.sessions.iter().map(|s| s.ops[k]).sum();
            OpMetrics {
                count,
                errors: outcome.sessions.iter().map(|s| s.errors[k]).sum(),
                ops_per_s: rate(count),
                rows: outcome.sessions.iter().map(|s| s.rows[k]).sum(),
                latency_us: LatencySummary::from_histogram(&outcome.histograms[k]),
                histogram: encode_histogram(&outcome.histograms[k]),
            }
        };
        let read = op(OpKind::Read);
        let update = op(OpKind::Update);
        let ops = read.count + update.count;
        let cpu_ms = outcome.client_cpu.as_ref().and_then(|c| {
            (ops > 0).then(|| (c.user_s + c.system_s) * 1000.0 / (ops as f64 / 1000.0))
        });
        let mut warnings = ctx.warnings;
        let errors = read.errors + update.errors;
        if errors > 0 {
            warnings.push(format!(
                "{errors} operation(s) failed; see sessions[].first_error and the per-session error counts"
            ));
        }
        for s in &outcome.sessions {
            if s.ended_by == EndedBy::Error && outcome.status == RunStatus::Ok {
                warnings.push(format!(
                    "{} stopped early after an error: its schema saw less load",
                    s.spec.name
                ));
            }
        }
        if outcome.status == RunStatus::Interrupted {
            warnings
                .push("the run was interrupted: rates cover the time until the interrupt".into());
        }
        let ops_past_window: u64 = outcome
            .sessions
            .iter()
            .map(|s| s.past_window[0] + s.past_window[1])
            .sum();
        let late_s = outcome.db_window_s - secs;
        if late_s > 1.0 {
            warnings.push(format!(
                "the last session stopped {late_s:.1} s after the window's end (a statement that \
                 did not return at once when it was cancelled: a lock wait, a slow server); \
                 its operation is not counted and database rates cover {:.1} s",
                outcome.db_window_s
            ));
        }
        // A shard's database-wide DB time includes the other shards' sessions: `dbio merge`
        // judges it against all of them.
        if let Some(db_time_s) = ctx.db.as_ref().and_then(|d| d.db_time_s)
            && !ctx.other_shards
        {
            let db_s = ctx.db.as_ref().map_or(outcome.db_window_s, |d| d.seconds);
            warnings.extend(db_time_warning(db_time_s, outcome.sessions.len(), db_s));
        }
        warnings.extend(stall_warning(&outcome.sessions));
        // A window in which no operation ended (neither done nor failed) measured nothing:
        // the database's counters then hold only the cancelled operations' work, and such a
        // run must never be a baseline. (Failed operations are measurements: their errors.)
        let (mut status, mut error) = (outcome.status, outcome.error);
        if status == RunStatus::Ok && ops + errors == 0 {
            status = RunStatus::Failed;
            error = Some(format!(
                "no operation completed inside the {secs:.3} s window ({ops_past_window} in flight at its end \
                 cancelled): an operation takes longer than the window (work_unit near the scale, \
                 a think time longer than the window, a stalled server); lengthen run.run_time, or lower \
                 run.work_unit or the think time"
            ));
        }
        if outcome.sessions_lost > 0 {
            warnings.push(format!(
                "{} session(s) lost: they did not answer within the grace once the run was ending, \
                 and their connections were shut down; figures cover what they had measured before",
                outcome.sessions_lost
            ));
        }
        for (what, s) in [
            ("the window opened at run.steady_max", &outcome.steady),
            (
                "preconditioning ended at run.steady_max",
                &outcome.precondition,
            ),
        ] {
            if let Some(s) = s.as_ref().filter(|s| !s.steady) {
                warnings.push(format!(
                    "not steady: {what}: {}; the figures may still drift, and compare and history treat this run as not steady",
                    s.missed()
                ));
            }
        }
        let open_loop = outcome
            .open_loop
            .as_ref()
            .map(|o| OpenLoopMetrics::of(o, &outcome.timeseries));
        warnings.extend(open_loop.as_ref().and_then(OpenLoopMetrics::behind));
        RunResult {
            format: RESULT_FORMAT,
            status,
            error,
            label: ctx.config.run.label.clone(),
            engine: ctx.config.engine,
            config: ctx.config,
            environment: ctx.environment,
            window: Window {
                start: outcome.start,
                end: outcome.end,
                measured_s: secs,
                db_window_s: Some(outcome.db_window_s),
                ops_past_window,
                warmup_s: outcome.warmup_s,
                mode: match window_spec {
                    WindowSpec::Time(_) => WindowMode::RunTime,
                    WindowSpec::Loops(_) => WindowMode::WorkLoop,
                },
                run_time_s: match window_spec {
                    WindowSpec::Time(d) => Some(d.as_secs_f64()),
                    WindowSpec::Loops(_) => None,
                },
                work_loop: match window_spec {
                    WindowSpec::Loops(n) => Some(n),
                    WindowSpec::Time(_) => None,
                },
            },
            client: ClientMetrics {
                ops,
                errors,
                ops_per_s: rate(ops),
                cpu: outcome.client_cpu,
                cpu_ms_per_1000_ops: cpu_ms,
                max_rss_kib: crate::driver::max_rss_kib(),
                session_engine: outcome
                    .session_engine
                    .as_ref()
                    .map(|c| c.engine.as_str().to_string()),
                session_engine_why: outcome.session_engine.as_ref().map(|c| c.why.clone()),
                read,
                update,
            },
            sessions: outcome.sessions,
            sessions_lost: outcome.sessions_lost,
            timeseries: outcome.timeseries,
            db: ctx.db,
            waits: ctx.waits,
            device: ctx.device,
            calibration: ctx.calibration,
            host: None,
            missing_rights: Vec::new(),
            limits: None,
            limiter: None,
            warnings,
            shard: None,
            merge: None,
            targets: Vec::new(),
            steady: outcome.steady,
            precondition: outcome.precondition,
            open_loop,
        }
    }

    /// False when the window opened without its steady-state rule holding (`run.steady`),
    /// or preconditioning ended at its cap: compare and history treat such a run apart.
    pub fn steady(&self) -> Option<bool> {
        match (&self.steady, &self.precondition) {
            (None, None) => None,
            (a, b) => Some(a.iter().chain(b.iter()).all(|s| s.steady)),
        }
    }

    /// One target's client figures, from its sessions (`spec.target == index`) and their
    /// merged histograms, over the run's measured window; the collector's are left null.
    pub fn target_client(
        &self,
        index: u32,
        histograms: &[hdrhistogram::Histogram<u64>; 2],
    ) -> (OpMetrics, OpMetrics) {
        let secs = self.window.measured_s;
        let mine: Vec<&SessionOutcome> = self
            .sessions
            .iter()
            .filter(|s| s.spec.target == Some(index))
            .collect();
        let op = |kind: OpKind| {
            let k = kind.index();
            let count: u64 = mine.iter().map(|s| s.ops[k]).sum();
            OpMetrics {
                count,
                errors: mine.iter().map(|s| s.errors[k]).sum(),
                ops_per_s: if secs > 0.0 { count as f64 / secs } else { 0.0 },
                rows: mine.iter().map(|s| s.rows[k]).sum(),
                latency_us: LatencySummary::from_histogram(&histograms[k]),
                histogram: encode_histogram(&histograms[k]),
            }
        };
        (op(OpKind::Read), op(OpKind::Update))
    }

    /// Reads a result document; a malformed, truncated or newer one is a clear error.
    pub fn read_json(path: &Path) -> Result<RunResult, CoreError> {
        let bad = |message: String| CoreError::Result {
            path: path.to_path_buf(),
            message,
        };
        let text = crate::input::read_bounded(path, crate::input::DOCUMENT_MAX_BYTES)
            .map_err(|e| bad(e.to_string()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not a dbio result (invalid JSON: {e})")))?;
        match value.get("format").and_then(|f| f.as_u64()) {
            Some(f) if f > RESULT_FORMAT as u64 => {
                return Err(bad(format!(
                    "result format {f} is newer than this dbio understands ({RESULT_FORMAT}); use a newer dbio"
                )));
            }
            Some(0) => return Err(bad("result format 0 is not a dbio format (1 and up)".into())),
            None => return Err(bad("not a dbio result (no \"format\" field)".into())),
            _ => {}
        }
        let mut r: RunResult = serde_json::from_value(value)
            .map_err(|e| bad(format!("not a valid dbio result: {e}")))?;
        r.check_sane().map_err(bad)?;
        // Text from a file may hold escape sequences; none reaches a terminal or a report.
        r.label = r.label.as_deref().map(printable);
        r.error = r.error.as_deref().map(printable);
        r.warnings = r.warnings.iter().map(|w| printable(w)).collect();
        r.environment.target = printable(&r.environment.target);
        Ok(r)
    }

    /// Refuses figures no real run produces: a window of 0 s or less, negative or non-finite
    /// rates, an undecodable histogram (which would otherwise show as "no reads").
    fn check_sane(&self) -> Result<(), String> {
        let w = self.window.measured_s;
        if !(w.is_finite() && w > 0.0) {
            return Err(format!(
                "window.measured_s = {w}; a window must be above 0 s"
            ));
        }
        let mut rates = vec![
            ("client.ops_per_s", self.client.ops_per_s),
            ("client.read.ops_per_s", self.client.read.ops_per_s),
            ("client.update.ops_per_s", self.client.update.ops_per_s),
        ];
        if let Some(db) = &self.db {
            rates.push(("db.read_iops", db.read_iops));
            rates.push(("db.write_iops", db.write_iops));
        }
        if let Some(d) = &self.device {
            rates.push(("device.reads_per_s", d.reads_per_s));
            rates.push(("device.writes_per_s", d.writes_per_s));
        }
        rates.extend(
            self.timeseries
                .iter()
                .map(|t| ("timeseries.ops_per_s", t.ops_per_s)),
        );
        if let Some((name, v)) = rates.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            return Err(format!("{name} = {v}; rates are never negative"));
        }
        if let Some((name, v)) = rates.iter().find(|(_, v)| *v > MAX_RATE_PER_S) {
            return Err(format!(
                "{name} = {v:e}; no server or device does {MAX_RATE_PER_S:e} per second: the figures were changed"
            ));
        }
        self.check_counts()
    }

    /// The counts agree with each other, as the driver writes them: each kind's count is what
    /// its HDR histogram holds and the sum over the sessions, the total is the sum of the
    /// kinds, and each rate is its count over the window (a merged result's: the sum of its
    /// shards' counts over their own windows). A forged count (a shard multiplied by 10 but
    /// not its histogram) fails here.
    fn check_counts(&self) -> Result<(), String> {
        let c = &self.client;
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) + 1e-6;
        for (k, name, op) in [(0, "read", &c.read), (1, "update", &c.update)] {
            if !op.histogram.is_empty() {
                let h = crate::stats::decode_histogram(&op.histogram)
                    .map_err(|e| format!("client.{name}.histogram: {e}"))?;
                if h.len() != op.count {
                    return Err(format!(
                        "client.{name}.count = {} but its histogram holds {} operations: the figures were changed",
                        op.count,
                        h.len()
                    ));
                }
            }
            if !self.sessions.is_empty() {
                let sum: u64 = self.sessions.iter().map(|s| s.ops[k]).sum();
                if sum != op.count {
                    return Err(format!(
                        "client.{name}.count = {} but its sessions counted {sum}: the figures were changed",
                        op.count
                    ));
                }
            }
            if self.merge.is_none()
                && !close(op.ops_per_s, op.count as f64 / self.window.measured_s)
            {
                return Err(format!(
                    "client.{name}.ops_per_s = {} but {} operations in {} s are {}/s: the figures were changed",
                    op.ops_per_s,
                    op.count,
                    self.window.measured_s,
                    op.count as f64 / self.window.measured_s
                ));
            }
        }
        if c.ops != c.read.count + c.update.count {
            return Err(format!(
                "client.ops = {} but reads and updates are {}: the figures were changed",
                c.ops,
                c.read.count + c.update.count
            ));
        }
        if let Some(m) = &self.merge {
            let ops: u64 = m.shards.iter().map(|s| s.ops).sum();
            let rate: f64 = m
                .shards
                .iter()
                .filter(|s| s.measured_s > 0.0)
                .map(|s| s.ops as f64 / s.measured_s)
                .sum();
            if ops != c.ops || !close(c.ops_per_s, rate) {
                return Err(format!(
                    "client.ops = {} at {}/s but its shards hold {ops} at {rate}/s: the figures were changed",
                    c.ops, c.ops_per_s
                ));
            }
        }
        Ok(())
    }
}

pub use crate::text::printable;
