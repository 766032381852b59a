//! One run over any backend, in phases: preflight (refusals first, before anything touches
//! the server or the disk; the result folder; the server's facts, the data set verified and
//! maintained), the plan, the sessions opened, the window driven between the collector's
//! snapshots, the figures collected into the result, result.json and report.txt published.

use std::future::Future;
use std::path::PathBuf;

use crate::Config;
use crate::backend::{Backend, BackendError, ServerFacts, WindowCollector, WindowFigures};
use crate::config::SessionLoop;
use crate::driver::{DriveOutcome, SessionSpec, drive_loops};
use crate::interrupt::Interrupts;
use crate::limits::{self, ClientCpu, CpuReading, Limits};
use crate::output;
use crate::plan::RunPlan;
use crate::result::{Environment, RunContext, RunResult, SessionTls, TargetResult};
use crate::stats::dbstats::DeviceBaseline;

use super::publish::{Output, progress_line, publish};

/// The calibration a run's database reads are put beside (`run.calibration`).
pub type Calibrate<'a> = &'a dyn DeviceBaseline;

/// Runs `work` until it ends or the first interrupt arrives (then the run fails, exit 1).
async fn interruptible<T>(
    work: impl Future<Output = Result<T, BackendError>>,
    interrupts: &Interrupts,
) -> Result<T, BackendError> {
    tokio::select! {
        r = work => r,
        by = interrupts.clone().reached(1) => Err(BackendError::interrupted(format!(
            "run interrupted by {by}; any schema being loaded stays marked incomplete and the next `dbio setup` rebuilds it"
        ))),
    }
}

/// How far this host's clock may be from the server's when shards start at an instant.
const MAX_CLOCK_OFFSET_S: f64 = 0.5;

/// A shard that reaches its start instant this late is flagged (it started its window
/// after the others).
const LATE_START_S: f64 = 0.5;

/// Opens the window on every target's collector, in target order.
async fn begin_all<C: WindowCollector>(collectors: &mut [C]) -> Result<(), BackendError> {
    for c in collectors.iter_mut() {
        c.begin().await?;
    }
    Ok(())
}

/// `what` said of target `t` of a run over several ("target 2 (host=b ...): what"); as is
/// for one target.
fn of_target(facts: &[ServerFacts], t: usize, what: &str) -> String {
    if facts.len() <= 1 {
        what.to_string()
    } else {
        format!("target {} ({}): {what}", t + 1, facts[t].target)
    }
}

/// The run's TLS line from each target's: sessions counted over all, TLS only when every
/// target's sessions used it.
fn combine_tls(parts: Vec<Option<SessionTls>>) -> Option<SessionTls> {
    if parts.len() <= 1 {
        return parts.into_iter().next().flatten();
    }
    // A target without sessions (a ramp step with fewer readers than targets) says nothing.
    let parts: Vec<SessionTls> = parts
        .into_iter()
        .filter(|p| p.as_ref().is_none_or(|t| t.sessions > 0))
        .collect::<Option<Vec<_>>>()?;
    if parts.is_empty() {
        return None;
    }
    Some(SessionTls {
        used: parts.iter().all(|p| p.used),
        sessions: parts.iter().map(|p| p.sessions).sum(),
        sessions_with_tls: parts.iter().map(|p| p.sessions_with_tls).sum(),
        protocol: parts.iter().find_map(|p| p.protocol.clone()),
        cipher: parts.iter().find_map(|p| p.cipher.clone()),
    })
}

/// Every target's collector, in target order. A shard that does not collect the server's
/// figures still samples its own sessions where the backend can (their waits and physical
/// reads, which `dbio merge` sums over the shards); otherwise it has none.
async fn collectors<B: Backend>(
    backends: &mut [B],
    plan: &RunPlan,
    facts: &[ServerFacts],
    collects: bool,
    interrupts: &Interrupts,
) -> Result<Vec<B::Collector>, BackendError> {
    let mut out = Vec::new();
    if !collects && !backends.iter().all(|b| b.shard_collector()) {
        return Ok(out);
    }
    for (t, b) in backends.iter_mut().enumerate() {
        let c = interruptible(b.collector(&plan.for_target(t)), interrupts)
            .await
            .map_err(|e| on_target(facts, t, e))?;
        out.push(c);
    }
    Ok(out)
}

/// A backend's error, naming its target in a run over several.
fn on_target(facts: &[ServerFacts], t: usize, e: BackendError) -> BackendError {
    e.map_message(|m| of_target(facts, t, &m))
}

/// Waits until `early` before the run's start instant, if it has one (interruptible); a
/// warning when the instant had already passed.
async fn wait_for_start(
    start_at: Option<chrono::DateTime<chrono::Utc>>,
    early: std::time::Duration,
    interrupts: &Interrupts,
    output: &Output<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), BackendError> {
    let Some(at) = start_at else {
        return Ok(());
    };
    let wait_s = (at - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0;
    if wait_s < -LATE_START_S {
        warnings.push(format!(
            "started {:.1} s after run.start_at {at}: this shard's window began after the others' \
             (connecting and preparing took longer than the lead time; start the shards earlier)",
            -wait_s
        ));
        return Ok(());
    }
    if wait_s > 0.0 {
        output.note(&format!(
            "run: sessions ready; starting at {at} (in {wait_s:.1} s)"
        ));
    }
    sleep_until(at - early, interrupts).await
}

/// Sleeps until `at` (at once when it has passed); the first interrupt ends the run.
async fn sleep_until(
    at: chrono::DateTime<chrono::Utc>,
    interrupts: &Interrupts,
) -> Result<(), BackendError> {
    let wait_s = (at - chrono::Utc::now()).num_milliseconds() as f64 / 1000.0;
    if wait_s <= 0.0 {
        return Ok(());
    }
    interruptible(
        async {
            tokio::time::sleep(std::time::Duration::from_secs_f64(wait_s)).await;
            Ok(())
        },
        interrupts,
    )
    .await
}

/// The shards of one run start their windows at `start_at` within milliseconds: without a
/// warm-up, the collectors take their "before" snapshot (`SNAPSHOT_LEAD`) ahead of the
/// instant, not after it (seen: the collecting shard began its window 45-184 ms after the
/// others). Returns what `begin` said, for the driver to act on at the window. With a
/// warm-up, the driver ends the warm-up early instead (`DriveConfig::snapshot_lead`).
async fn begin_ahead_of<C: WindowCollector>(
    start_at: Option<chrono::DateTime<chrono::Utc>>,
    warmup: std::time::Duration,
    collectors: &mut [C],
    interrupts: &Interrupts,
    output: &Output<'_>,
    warnings: &mut Vec<String>,
) -> Result<Option<Result<(), BackendError>>, BackendError> {
    let ahead = start_at.is_some() && warmup.is_zero() && !collectors.is_empty();
    let lead = if ahead {
        crate::driver::SNAPSHOT_LEAD
    } else {
        std::time::Duration::ZERO
    };
    wait_for_start(start_at, lead, interrupts, output, warnings).await?;
    let Some(at) = start_at.filter(|_| ahead) else {
        return Ok(None);
    };
    let begun = tokio::select! {
        r = begin_all(collectors) => r,
        by = interrupts.clone().reached(1) => Err(BackendError::interrupted(format!("interrupted by {by}"))),
    };
    sleep_until(at, interrupts).await?;
    Ok(Some(begun))
}

/// Every target's sessions opened by `$open` (`open_sessions` or `open_loop_sessions`: the
/// session types differ), in index order; each target's TLS pushed onto `$tls`. A backend's
/// error names its target.
macro_rules! open_all {
    ($backends:expr, $plan:expr, $facts:expr, $interrupts:expr, $tls:expr, $open:ident) => {{
        let mut sessions = Vec::new();
        for (t, b) in $backends.iter_mut().enumerate() {
            let opened = interruptible(b.$open(&$plan.for_target(t)), &$interrupts)
                .await
                .map_err(|e| on_target(&$facts, t, e))?;
            $tls.push(opened.tls);
            sessions.extend(opened.sessions);
        }
        sessions.sort_by_key(|(spec, _)| spec.index);
        sessions
    }};
}

/// One measured window on `backends` (one per target: `target.dsns`, else one), its result
/// written to the run's folder. Six phases, each taking what the one before gave:
/// `preflight`, `plan`, `open`, `drive`, `collect`, then `publish`. A phase that
/// fails ends the run with its error: nothing is published, and what it opened (sessions,
/// collectors) is dropped, which closes it.
pub async fn run<B: Backend>(
    backends: &mut [B],
    config: &Config,
    output: &Output<'_>,
    interrupts: Interrupts,
    calibrate: Option<Calibrate<'_>>,
) -> Result<RunResult, BackendError> {
    let ctx = RunCtx {
        config,
        output,
        interrupts: &interrupts,
    };
    let pre = preflight(backends, &ctx).await?;
    let mut warnings = Vec::new();
    let planned = plan(backends, &ctx, &pre, &mut warnings).await?;
    let opened = open(backends, &ctx, &pre, &planned).await?;
    let window = drive(opened, &ctx, &planned, &mut warnings).await?;
    let result = collect(backends, &ctx, &pre, planned, window, warnings, calibrate).await?;
    publish(&result, &pre.out_dir, output)?;
    Ok(result)
}

/// What every phase of a run reads: the config as given, where it talks to the user, and
/// the user's requests to stop.
struct RunCtx<'a> {
    config: &'a Config,
    output: &'a Output<'a>,
    interrupts: &'a Interrupts,
}

/// What preflight found: the result folder (checked new or empty, nothing written yet) and
/// each target's facts, in target order.
struct Preflight {
    out_dir: PathBuf,
    facts: Vec<ServerFacts>,
}

/// The immutable plan, and what the run records beside it from the targets' facts.
struct Planned {
    plan: RunPlan,
    /// The environment result.json records (the targets' joined, in a run over several).
    environment: Environment,
    /// Each target's (readers, writers).
    split: Vec<(u32, u32)>,
    /// Whether this process collects the database's figures (in a sharded run, one shard).
    collects: bool,
}

/// The sessions of a run, by engine (their types differ).
enum Sessions<B: Backend> {
    Client(Vec<(SessionSpec, B::Session)>),
    Server(Vec<(SessionSpec, B::LoopSession)>),
}

/// What `open` gives the window: every target's sessions in index order, its collectors in
/// target order, and each target's TLS.
struct Opened<B: Backend> {
    sessions: Sessions<B>,
    collectors: Vec<B::Collector>,
    tls: Vec<Option<SessionTls>>,
}

/// What the window gave: the driver's outcome, the collectors still to end, each target's
/// TLS, and this host's CPU over the window.
struct Window<C> {
    outcome: DriveOutcome,
    collectors: Vec<C>,
    tls: Vec<Option<SessionTls>>,
    client_cpu: Option<ClientCpu>,
}

/// Phase 1: refusals first (before anything touches the server or the disk), then the
/// result folder, then every target's facts (the data set verified and maintained) and
/// their notes.
async fn preflight<B: Backend>(
    backends: &mut [B],
    ctx: &RunCtx<'_>,
) -> Result<Preflight, BackendError> {
    let (config, output, interrupts) = (ctx.config, ctx.output, ctx.interrupts);
    config.validate()?;
    let configs = config.target_configs();
    if backends.len() != configs.len() {
        return Err(BackendError::failed(format!(
            "internal: {} target(s) configured, {} backend(s) given",
            configs.len(),
            backends.len()
        )));
    }
    let many = configs.len() > 1;
    for (b, c) in backends.iter().zip(&configs) {
        b.refuse(c)?;
    }
    if config.run.engine == SessionLoop::Server
        && let Some(b) = backends.iter().find(|b| !b.server_loop())
    {
        return Err(BackendError::usage(format!(
            "run.engine: server runs the loop inside PostgreSQL; {} has no server-side loop in dbio: use run.engine: client",
            b.name()
        )));
    }
    // The result folder is checked (new or empty, writable) before preflight's VACUUM and
    // CHECKPOINT: a refusal changes nothing on the server. An empty folder left by a
    // preflight that fails is no obstacle to the next run.
    let r = &config.run;
    let out_dir = output::result_dir(
        r.out.as_deref(),
        r.label.as_deref().unwrap_or("run"),
        r.overwrite,
    )?;
    let mut facts: Vec<ServerFacts> = Vec::new();
    for (t, (b, c)) in backends.iter_mut().zip(&configs).enumerate() {
        let f = interruptible(b.preflight(c), interrupts)
            .await
            .map_err(|e| {
                e.map_message(|m| {
                    if many {
                        format!("target {} of {}: {m}", t + 1, configs.len())
                    } else {
                        m
                    }
                })
            })?;
        facts.push(f);
    }
    same_data_set(&facts)?;
    for (t, f) in facts.iter().enumerate() {
        for n in &f.notes {
            output.note(&format!("run: {}", of_target(&facts, t, n)));
        }
    }
    Ok(Preflight { out_dir, facts })
}

/// Phase 2: the immutable `RunPlan` from the config and the first target's facts, the
/// environment and warnings the facts give, and, for shards started at an instant, every
/// server's clock checked against this host's.
async fn plan<B: Backend>(
    backends: &mut [B],
    ctx: &RunCtx<'_>,
    pre: &Preflight,
    warnings: &mut Vec<String>,
) -> Result<Planned, BackendError> {
    let (config, output, interrupts) = (ctx.config, ctx.output, ctx.interrupts);
    let (facts, r) = (&pre.facts, &config.run);
    let many = facts.len() > 1;
    let one_server = one_server(facts);
    let plan = RunPlan::new(
        config,
        facts[0].block_size,
        facts[0].schema_names.clone(),
        facts.iter().map(|f| f.target.clone()).collect(),
        &pre.out_dir,
        output.quiet,
    )?;
    let split = config.session_split();
    if many {
        let each: Vec<String> = facts
            .iter()
            .zip(&split)
            .map(|(f, (rd, wr))| {
                format!(
                    "{} ({}): {rd} reader(s), {wr} writer(s)",
                    f.target, f.describe
                )
            })
            .collect();
        output.note(&format!(
            "run: {} reader(s), {} writer(s) over {} targets: {}; connecting and preparing",
            r.readers,
            r.writers,
            facts.len(),
            each.join("; ")
        ));
    } else {
        output.note(&format!(
            "run: {} reader(s), {} writer(s) on {} ({}); connecting and preparing",
            r.readers, r.writers, facts[0].target, facts[0].describe
        ));
    }
    let mut environment = facts[0].environment.clone();
    if many {
        environment.target = plan.targets().join(" + ");
        environment.server_version = facts
            .iter()
            .map(|f| f.environment.server_version.as_str())
            .collect::<Vec<_>>()
            .join(" + ");
    }
    warnings.extend(
        facts
            .iter()
            .enumerate()
            .flat_map(|(t, f)| f.warnings.iter().map(move |w| (t, w)))
            .map(|(t, w)| of_target(facts, t, w)),
    );
    warnings.extend(one_server);
    if r.start_at().is_some() {
        for b in backends.iter_mut() {
            if let Some(offset) = interruptible(b.clock_offset_s(), interrupts).await?
                && offset.abs() > MAX_CLOCK_OFFSET_S
            {
                return Err(BackendError::usage(format!(
                    "this host's clock is {offset:+.3} s from the server's: shards started at run.start_at would not \
                     share a window (at most {MAX_CLOCK_OFFSET_S} s allowed); synchronise the clocks (chrony, NTP)"
                )));
            }
        }
    }
    // One shard collects the database's figures (the others' would count the same server
    // twice; run.collector_shard, default 0); dbio merge takes them from it.
    let collects = r.shard().is_none_or(|s| s.index == r.collector_shard);
    Ok(Planned {
        plan,
        environment,
        split,
        collects,
    })
}

/// Phase 3: every target's sessions, connected and prepared by the plan's engine, then
/// every target's collector. A backend's error names its target.
async fn open<B: Backend>(
    backends: &mut [B],
    ctx: &RunCtx<'_>,
    pre: &Preflight,
    planned: &Planned,
) -> Result<Opened<B>, BackendError> {
    let (interrupts, facts, plan) = (ctx.interrupts, &pre.facts, &planned.plan);
    let mut tls = Vec::new();
    let sessions = match plan.engine() {
        SessionLoop::Client => Sessions::Client(open_all!(
            backends,
            plan,
            facts,
            interrupts,
            tls,
            open_sessions
        )),
        SessionLoop::Server => Sessions::Server(open_all!(
            backends,
            plan,
            facts,
            interrupts,
            tls,
            open_loop_sessions
        )),
    };
    let collectors = collectors(backends, plan, facts, planned.collects, interrupts).await?;
    Ok(Opened {
        sessions,
        collectors,
        tls,
    })
}

/// Phase 4: the measured window. At the run's start instant, if it has one, the sessions
/// are released; the collectors' "before" snapshot is taken just before the window opens;
/// the driver measures. A session's failure in the window is the run's status (the result
/// is still written); an interrupt while waiting for the start instant is an error.
async fn drive<B: Backend>(
    opened: Opened<B>,
    ctx: &RunCtx<'_>,
    planned: &Planned,
    warnings: &mut Vec<String>,
) -> Result<Window<B::Collector>, BackendError> {
    let (output, interrupts, plan) = (ctx.output, ctx.interrupts, &planned.plan);
    let r = &ctx.config.run;
    let Opened {
        sessions,
        mut collectors,
        tls,
    } = opened;
    let sessions_n = plan.specs().len();
    let start_at = r.start_at();
    // This host's CPU from the window's opening to its end, for the limiter.
    let mut cpu_at_start = None;
    let outcome = match sessions {
        Sessions::Client(sessions) => {
            let begun = begin_ahead_of(
                start_at,
                plan.drive().warmup,
                &mut collectors,
                interrupts,
                output,
                warnings,
            )
            .await?;
            output.note(&format!("run: {sessions_n} sessions ready; measuring"));
            crate::driver::drive(
                sessions,
                plan.drive(),
                interrupts.clone(),
                |p| output.note(&progress_line(p)),
                || async {
                    let r = match begun {
                        Some(r) => r,
                        None => begin_all(&mut collectors).await,
                    };
                    cpu_at_start = CpuReading::local();
                    // The driver stops the run with the reason; the run's status says
                    // failed or interrupted.
                    r.map_err(|e| e.message)
                },
            )
            .await
        }
        Sessions::Server(sessions) => {
            let begun = begin_ahead_of(
                start_at,
                std::time::Duration::ZERO,
                &mut collectors,
                interrupts,
                output,
                warnings,
            )
            .await?;
            output.note(&format!(
                "run: {sessions_n} sessions ready; each runs its loop inside the database for {} (engine server: no live progress)",
                r.run_time
            ));
            let outcome = drive_loops(
                sessions,
                plan.run_time(),
                plan.drive().grace,
                interrupts.clone(),
                || async {
                    let r = match begun {
                        Some(r) => r,
                        None => begin_all(&mut collectors).await,
                    };
                    cpu_at_start = CpuReading::local();
                    // The driver stops the run with the reason; the run's status says
                    // failed or interrupted.
                    r.map_err(|e| e.message)
                },
            )
            .await;
            warnings.push(
                "run.engine server: latencies are upper bounds of power-of-two buckets timed inside the database \
                 (clock_timestamp()), not client round trips; there is no time series; client CPU is dbio's \
                 idle cost, not a per-operation cost"
                    .into(),
            );
            outcome
        }
    };
    let client_cpu = cpu_at_start.zip(CpuReading::local()).and_then(|(a, b)| {
        ClientCpu::between(
            &a,
            &b,
            outcome.client_cpu.as_ref().map(|c| c.user_s + c.system_s),
            outcome.measured_s,
        )
    });
    Ok(Window {
        outcome,
        collectors,
        tls,
        client_cpu,
    })
}

/// Phase 5: the collectors' "after" snapshots (skipped on a second interrupt), the backends'
/// hold on the run released, the collectors' own files written into the result folder, and
/// the result assembled and judged from the window and the figures.
async fn collect<B: Backend>(
    backends: &mut [B],
    ctx: &RunCtx<'_>,
    pre: &Preflight,
    planned: Planned,
    window: Window<B::Collector>,
    mut warnings: Vec<String>,
    calibrate: Option<Calibrate<'_>>,
) -> Result<RunResult, BackendError> {
    let Window {
        outcome,
        collectors,
        tls,
        client_cpu,
    } = window;
    // The database's counters cover the window until the last session stopped.
    let per_target = end_window(
        backends,
        ctx,
        pre,
        collectors,
        outcome.db_window_s,
        planned.collects,
        &mut warnings,
    )
    .await?;
    let measured = Measured {
        outcome,
        tls,
        client_cpu,
        per_target,
    };
    Ok(assemble(ctx, pre, planned, measured, warnings, calibrate))
}

/// Ends every collector (a second interrupt means "now": the result is written without the
/// "after" snapshot), releases the backends' hold on the run, and writes the collectors'
/// files; the figures in target order (one empty set when nothing collects).
async fn end_window<B: Backend>(
    backends: &mut [B],
    ctx: &RunCtx<'_>,
    pre: &Preflight,
    collectors: Vec<B::Collector>,
    db_window_s: f64,
    collects: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<WindowFigures>, BackendError> {
    let (r, interrupts, facts) = (&ctx.config.run, ctx.interrupts, &pre.facts);
    let many = facts.len() > 1;
    if !collects {
        warnings.push(format!(
            "shard {}: the database's figures are collected by shard {} of this run; `dbio merge` takes them from it",
            r.shard.as_deref().unwrap_or(""),
            r.collector_shard
        ));
    }
    let collected: Vec<WindowFigures> = if collectors.is_empty() {
        vec![WindowFigures::default()]
    } else {
        let n = collectors.len();
        tokio::select! {
            c = futures_util::future::join_all(collectors.into_iter().map(|c| c.end(db_window_s))) => c,
            by = interrupts.clone().reached(2) => (0..n).map(|_| WindowFigures::skipped(format!(
                "database statistics were not collected: {by} a second time ended the run at once"
            ))).collect(),
        }
    };
    for b in backends.iter_mut() {
        b.end_run();
    }
    let mut per_target = Vec::new();
    for (t, c) in collected.into_iter().enumerate() {
        warnings.extend(c.warnings.iter().map(|w| of_target(facts, t, w)));
        for (name, body) in &c.files {
            let name = if many {
                format!("target-{}-{name}", t + 1)
            } else {
                name.clone()
            };
            output::write_atomic(&pre.out_dir.join(name), body)?;
        }
        per_target.push(c);
    }
    Ok(per_target)
}

/// The window's outcome and figures, for the result.
struct Measured {
    outcome: DriveOutcome,
    tls: Vec<Option<SessionTls>>,
    client_cpu: Option<ClientCpu>,
    /// Each target's figures, in target order.
    per_target: Vec<WindowFigures>,
}

/// The run's result: the client's figures, the database's (summed over targets, with each
/// target's beside them, in a run over several), the calibration beside them, the limiter
/// judged, the shard recorded.
fn assemble(
    ctx: &RunCtx<'_>,
    pre: &Preflight,
    planned: Planned,
    measured: Measured,
    mut warnings: Vec<String>,
    calibrate: Option<Calibrate<'_>>,
) -> RunResult {
    let (r, facts) = (&ctx.config.run, &pre.facts);
    let many = facts.len() > 1;
    let Planned {
        plan,
        mut environment,
        split,
        collects,
    } = planned;
    let Measured {
        mut outcome,
        tls,
        client_cpu,
        mut per_target,
    } = measured;
    let sessions_n = plan.specs().len();
    let shard = r.shard();
    environment.session_tls = combine_tls(tls.clone());
    if many {
        warnings.extend(shared_devices(&per_target));
    }
    let (db, waits, device, host, missing_rights, limits) = if many {
        let dbs: Vec<&crate::stats::dbstats::DbMetrics> =
            per_target.iter().filter_map(|c| c.db.as_ref()).collect();
        let db = if dbs.len() == per_target.len() {
            crate::stats::dbstats::DbMetrics::sum(&dbs)
        } else {
            if collects {
                warnings.push(format!(
                    "database figures are missing for {} of {} targets: the run's database totals are null \
                     (they would leave those targets out); see targets[]",
                    per_target.len() - dbs.len(),
                    per_target.len()
                ));
            }
            None
        };
        let mut missing: Vec<crate::stats::dbstats::MissingRight> = Vec::new();
        for m in per_target.iter().flat_map(|c| c.missing_rights.iter()) {
            if !missing.contains(m) {
                missing.push(m.clone());
            }
        }
        let limits = Limits {
            client_cpu: client_cpu.clone(),
            ..Limits::default()
        };
        (db, None, None, None, missing, limits)
    } else {
        let c = per_target.pop().unwrap_or_default();
        let limits = limits::complete(
            c.limits,
            client_cpu.clone(),
            sessions_n as u32,
            c.device.as_ref(),
            c.db.as_ref(),
        );
        (c.db, c.waits, c.device, c.host, c.missing_rights, limits)
    };
    let db_read_iops = db.as_ref().map(|d| d.read_iops);
    let db_latency = db.as_ref().and_then(|d| d.avg_read_latency_us);
    // A calibration is one device's: beside several targets' summed reads it would mislead.
    let calibration = if many {
        if calibrate.is_some() {
            warnings.push(
                "run.calibration is one device's figures; with several targets the run's reads are summed over \
                 their devices, so the comparison is left out (calibrate each target's device and run it alone)"
                    .into(),
            );
        }
        None
    } else {
        let c = calibrate.and_then(|c| c.compare_at(r.readers.max(1), db_read_iops, db_latency));
        let writes = r.writers > 0 || r.update_pct > 0;
        warnings.extend(
            c.as_ref()
                .and_then(|c| c.mismatch(device.as_ref(), plan.block_size(), writes)),
        );
        c
    };
    let by_target = std::mem::take(&mut outcome.by_target);
    let mut result = RunResult::build(
        RunContext {
            other_shards: shard.is_some_and(|s| s.count > 1),
            config: plan.config().clone(),
            environment,
            warnings,
            db,
            waits,
            device,
            calibration,
        },
        plan.window(),
        outcome,
    );
    result.host = host;
    result.missing_rights = missing_rights;
    result.limits = Some(limits);
    if many {
        for (t, c) in per_target.into_iter().enumerate() {
            let empty = [crate::stats::new_histogram(), crate::stats::new_histogram()];
            let (read, update) = result.target_client(t as u32, by_target.get(t).unwrap_or(&empty));
            let (readers, writers) = split.get(t).copied().unwrap_or_default();
            let mut environment = facts[t].environment.clone();
            environment.session_tls = tls.get(t).cloned().flatten();
            result.targets.push(TargetResult {
                index: t as u32,
                target: facts[t].target.clone(),
                environment,
                readers,
                writers,
                ops: read.count + update.count,
                ops_per_s: read.ops_per_s + update.ops_per_s,
                read,
                update,
                limits: Some(limits::complete(
                    c.limits,
                    client_cpu.clone(),
                    readers + writers,
                    c.device.as_ref(),
                    c.db.as_ref(),
                )),
                limiter: None,
                db: c.db,
                waits: c.waits,
                device: c.device,
                host: c.host,
                missing_rights: c.missing_rights,
            });
        }
    }
    limits::judge_result(&mut result);
    if let (Some(shard), Some(run_id)) = (shard, &r.run_id) {
        result.shard = Some(crate::merge::ShardInfo {
            run_id: run_id.clone(),
            index: shard.index,
            count: shard.count,
            start_at: r.start_at(),
        });
    }
    result
}

/// Targets whose collectors measured the same device number: on one host, each one's device
/// figures are the I/O of all of them.
fn shared_devices(per_target: &[WindowFigures]) -> Vec<String> {
    let mut seen: Vec<(String, Vec<usize>)> = Vec::new();
    for (t, c) in per_target.iter().enumerate() {
        let Some(d) = &c.device else { continue };
        let key = format!("{} {}", d.device, d.major_minor.as_deref().unwrap_or("-"));
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ts)) => ts.push(t + 1),
            None => seen.push((key, vec![t + 1])),
        }
    }
    seen.into_iter()
        .filter(|(_, ts)| ts.len() > 1)
        .map(|(key, ts)| {
            let names: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
            format!(
                "targets {} report the same device ({key}): if they run on one host, each one's device \
                 figures are the I/O of all of them (the report does not sum them)",
                names.join(" and ")
            )
        })
        .collect()
}

/// Targets that are one server (the same system identifier, e.g. two databases of one
/// cluster): its server-wide figures appear in each, and their sum counts them twice.
fn one_server(facts: &[ServerFacts]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in facts.iter().enumerate() {
        let Some(id) = &a.server_id else { continue };
        let same: Vec<String> = facts[i + 1..]
            .iter()
            .enumerate()
            .filter(|(_, b)| b.server_id.as_ref() == Some(id))
            .map(|(k, _)| (i + k + 2).to_string())
            .collect();
        if !same.is_empty() && facts[..i].iter().all(|b| b.server_id.as_ref() != Some(id)) {
            out.push(format!(
                "targets {} and {} are one server (system identifier {id}): its server-wide figures \
                 (pg_stat_io on 16+, the device, the host) are in each target's, and the run's database \
                 totals count them more than once; give each server once",
                i + 1,
                same.join(" and ")
            ));
        }
    }
    out
}

/// The targets of one run hold the same data set: block size and schemas (the sessions read
/// the same blocks on each).
fn same_data_set(facts: &[ServerFacts]) -> Result<(), BackendError> {
    let f0 = &facts[0];
    for f in &facts[1..] {
        if f.block_size != f0.block_size {
            return Err(BackendError::usage(format!(
                "{} has {}-byte blocks and {} {}-byte blocks: the targets of one run must read the same blocks; \
                 drive them in separate runs",
                f.target, f.block_size, f0.target, f0.block_size
            )));
        }
        if f.schema_names != f0.schema_names {
            return Err(BackendError::usage(format!(
                "{} holds schemas {} and {} holds {}: load the same data set on every target \
                 (`dbio setup --dsn ... --schemas N --scale S` on each)",
                f.target,
                f.schema_names.join(","),
                f0.target,
                f0.schema_names.join(",")
            )));
        }
    }
    Ok(())
}

/// The run pipeline over a fake backend: a good run, and each phase failing. What a failure
/// must leave: its error with the backend's message, no result.json or report.txt, and no
/// session still open.
#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::bench::fake::{FailAt, FakeBackend};
    use crate::driver::RunStatus;

    const READERS: usize = 2;
    const WORK_LOOP: u64 = 20;

    /// Two readers, 20 reads each, into `out`; `run` adds lines under `run:`.
    fn config(out: &Path, run: &str) -> Config {
        let yaml = format!(
            "data:\n  schemas: 1\n  scale: 1000blocks\nrun:\n  readers: {READERS}\n  work_loop: {WORK_LOOP}\n  \
             work_unit: 4\n  out: {}\n{run}",
            out.display()
        );
        match Config::from_yaml(&yaml) {
            Ok(c) => c,
            Err(e) => panic!("test config: {e}"),
        }
    }

    /// What a fake run returned and printed.
    struct Ran {
        result: Result<RunResult, BackendError>,
        /// What went to stdout (the report).
        reports: Vec<String>,
    }

    async fn run_fake(backend: &mut FakeBackend, config: &Config, interrupts: Interrupts) -> Ran {
        let reports = Mutex::new(Vec::new());
        let report = |text: &str| {
            if let Ok(mut r) = reports.lock() {
                r.push(text.to_string());
            }
        };
        let output = Output {
            quiet: true,
            print_report: false,
            line: &|_| {},
            report: &report,
        };
        let result = run(
            std::slice::from_mut(backend),
            config,
            &output,
            interrupts,
            None,
        )
        .await;
        Ran {
            result,
            reports: reports.into_inner().unwrap_or_default(),
        }
    }

    /// The error of a run that should have failed.
    fn error_of(ran: Ran) -> BackendError {
        match ran.result {
            Ok(r) => panic!("the run should have failed; it ended {:?}", r.status),
            Err(e) => e,
        }
    }

    /// The names in `dir`, sorted; none when it does not exist.
    fn files_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn sessions(b: &FakeBackend) -> (usize, usize) {
        (
            b.opened.load(Ordering::SeqCst),
            b.live.load(Ordering::SeqCst),
        )
    }

    fn temp() -> tempfile::TempDir {
        match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("tempdir: {e}"),
        }
    }

    #[tokio::test]
    async fn a_good_fake_run_publishes_its_result() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::new();
        let ran = run_fake(&mut b, &config(&out, ""), Interrupts::never()).await;
        let result = match ran.result {
            Ok(r) => r,
            Err(e) => panic!("the fake run failed: {e}"),
        };
        assert_eq!(result.status, RunStatus::Ok);
        assert_eq!(result.client.read.count, READERS as u64 * WORK_LOOP);
        assert_eq!(result.client.errors, 0);
        for w in [
            "fake: a warning from preflight",
            "fake: a warning from the collector",
        ] {
            assert!(result.warnings.iter().any(|x| x == w), "{w} missing");
        }
        assert_eq!(files_in(&out), ["report.txt", "result.json"]);
        let json = std::fs::read_to_string(out.join("result.json")).unwrap_or_default();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(doc["status"], "ok");
        assert_eq!(doc["client"]["read"]["count"], READERS as u64 * WORK_LOOP);
        assert_eq!(
            b.calls(),
            [
                "preflight",
                "open_sessions",
                "collector",
                "begin",
                "end",
                "end_run"
            ]
        );
        assert_eq!(sessions(&b), (READERS, 0));
        assert!(
            ran.reports.is_empty(),
            "the report is printed only when asked"
        );
    }

    // Preflight: a refusal comes before the result folder is made and before the server is
    // asked anything.
    #[tokio::test]
    async fn a_refusal_fails_before_the_folder_or_the_server_is_touched() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::failing_at(FailAt::Refuse);
        let e = error_of(run_fake(&mut b, &config(&out, ""), Interrupts::never()).await);
        assert_eq!(e.message, "fake: refused before anything was touched");
        assert_eq!(e.kind, crate::ErrorKind::Usage);
        assert!(!out.exists(), "the result folder was created");
        assert!(b.calls().is_empty(), "the server was asked {:?}", b.calls());
    }

    #[tokio::test]
    async fn a_failed_preflight_opens_no_session_and_publishes_nothing() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::failing_at(FailAt::Preflight);
        let e = error_of(run_fake(&mut b, &config(&out, ""), Interrupts::never()).await);
        assert_eq!(e.message, "fake: preflight found no data set");
        assert_eq!(e.kind, crate::ErrorKind::Failed);
        assert_eq!(b.calls(), ["preflight"]);
        assert_eq!(sessions(&b), (0, 0));
        assert!(files_in(&out).is_empty(), "left {:?}", files_in(&out));
    }

    // Plan: a server whose clock is seconds off cannot share a start instant with other
    // shards; the run stops before any session connects.
    #[tokio::test]
    async fn a_plan_refused_for_the_servers_clock_opens_no_session() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::new();
        b.clock_offset_s = Some(3.0);
        let config = config(&out, "  start_at: 2020-01-01T00:00:00Z\n");
        let e = error_of(run_fake(&mut b, &config, Interrupts::never()).await);
        assert!(
            e.message
                .starts_with("this host's clock is +3.000 s from the server's"),
            "{}",
            e.message
        );
        assert_eq!(e.kind, crate::ErrorKind::Usage);
        assert_eq!(b.calls(), ["preflight", "clock_offset_s"]);
        assert_eq!(sessions(&b), (0, 0));
        assert!(files_in(&out).is_empty(), "left {:?}", files_in(&out));
    }

    // Open: the sessions are connected first; a collector that cannot be made then closes
    // them all.
    #[tokio::test]
    async fn a_collector_that_cannot_be_made_closes_the_opened_sessions() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::failing_at(FailAt::Collector);
        let e = error_of(run_fake(&mut b, &config(&out, ""), Interrupts::never()).await);
        assert_eq!(e.message, "fake: the collector could not connect");
        assert_eq!(b.calls(), ["preflight", "open_sessions", "collector"]);
        assert_eq!(sessions(&b), (READERS, 0));
        assert!(files_in(&out).is_empty(), "left {:?}", files_in(&out));
    }

    // Drive: the first interrupt while the sessions wait for the run's start instant ends
    // the run with an error; no snapshot is taken and the sessions are closed.
    #[tokio::test]
    async fn an_interrupt_before_the_start_instant_closes_the_sessions() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::new();
        let at = (chrono::Utc::now() + chrono::Duration::seconds(120)).to_rfc3339();
        let config = config(&out, &format!("  start_at: {at}\n"));
        let interrupts = Interrupts::after(Duration::from_millis(200));
        let e = error_of(run_fake(&mut b, &config, interrupts).await);
        assert!(
            e.message.starts_with("run interrupted by a test interrupt"),
            "{}",
            e.message
        );
        assert_eq!(e.kind, crate::ErrorKind::Interrupted);
        assert_eq!(
            b.calls(),
            ["preflight", "clock_offset_s", "open_sessions", "collector"]
        );
        assert_eq!(sessions(&b), (READERS, 0));
        assert!(files_in(&out).is_empty(), "left {:?}", files_in(&out));
    }

    // Drive: a failure inside the window is the run's status, not an error: the result is
    // published as failed with the failure's message, so the user sees what was measured.
    #[tokio::test]
    async fn a_failed_before_snapshot_is_published_as_a_failed_run() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::failing_at(FailAt::Begin);
        let ran = run_fake(&mut b, &config(&out, ""), Interrupts::never()).await;
        let result = match ran.result {
            Ok(r) => r,
            Err(e) => panic!("a failed window should be a result: {e}"),
        };
        assert_eq!(result.status, RunStatus::Failed);
        assert_eq!(
            result.error.as_deref(),
            Some("fake: the before snapshot failed")
        );
        let json = std::fs::read_to_string(out.join("result.json")).unwrap_or_default();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(doc["status"], "failed");
        assert_eq!(doc["error"], "fake: the before snapshot failed");
        assert_eq!(
            b.calls(),
            [
                "preflight",
                "open_sessions",
                "collector",
                "begin",
                "end",
                "end_run"
            ]
        );
        assert_eq!(sessions(&b), (READERS, 0));
    }

    // Collect: a collector's file that cannot be written fails the run before result.json;
    // the backend has still let go of the run (end_run).
    #[tokio::test]
    async fn a_collector_file_that_cannot_be_written_fails_before_result_json() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::new();
        b.files = vec![("no-such-folder/awr.html".into(), b"<html>".to_vec())];
        let e = error_of(run_fake(&mut b, &config(&out, ""), Interrupts::never()).await);
        let path = out.join("no-such-folder/awr.html");
        assert!(
            e.message.starts_with(&format!("{}: ", path.display())),
            "{}",
            e.message
        );
        assert_eq!(e.kind, crate::ErrorKind::Failed);
        assert_eq!(
            b.calls(),
            [
                "preflight",
                "open_sessions",
                "collector",
                "begin",
                "end",
                "end_run"
            ]
        );
        assert_eq!(sessions(&b), (READERS, 0));
        assert!(files_in(&out).is_empty(), "left {:?}", files_in(&out));
    }

    // Publish: when the result folder is gone, result.json is kept under $TMPDIR, the error
    // names it, and the report is printed, so nothing measured is lost.
    #[tokio::test]
    async fn a_result_folder_gone_keeps_result_json_elsewhere_and_prints_the_report() {
        let dir = temp();
        let out = dir.path().join("out");
        let mut b = FakeBackend::new();
        b.remove_at_end = Some(out.clone());
        let ran = run_fake(&mut b, &config(&out, ""), Interrupts::never()).await;
        let reports = ran.reports.len();
        let e = error_of(ran);
        let head = format!("cannot write result.json into {}: ", out.display());
        assert!(e.message.starts_with(&head), "{}", e.message);
        assert_eq!(e.kind, crate::ErrorKind::Failed);
        let kept = e
            .message
            .split_once("; result.json is kept in ")
            .map(|(_, p)| PathBuf::from(p));
        let Some(kept) = kept else {
            panic!("no fallback named: {}", e.message)
        };
        let json = std::fs::read_to_string(&kept).unwrap_or_default();
        let _ = std::fs::remove_file(&kept);
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap_or_default();
        assert_eq!(doc["status"], "ok");
        assert_eq!(
            reports, 1,
            "the report is printed when it cannot be written"
        );
        assert!(!out.exists());
        assert_eq!(sessions(&b), (READERS, 0));
    }
}
