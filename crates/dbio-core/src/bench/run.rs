//! One run over any backend: refusals first (before anything touches the server or the
//! disk), preflight (the server's facts, the data set verified and maintained), the plan,
//! the result folder, the sessions, the window between the collector's snapshots,
//! result.json and report.txt.

use std::future::Future;

use crate::Config;
use crate::backend::{Backend, BackendError, WindowCollector, WindowFigures};
use crate::config::SessionLoop;
use crate::dbstats::CalibrationCompare;
use crate::driver::{drive, drive_loops};
use crate::interrupt::Interrupts;
use crate::output;
use crate::plan::RunPlan;
use crate::result::{RunContext, RunResult};

use super::publish::{Output, progress_line, publish};

/// Puts a run's database reads beside a calibration's device figures at the same load:
/// (sessions, DB read IOPS, average read latency µs) -> the comparison.
pub type Calibrate<'a> =
    &'a (dyn Fn(u32, Option<f64>, Option<f64>) -> Option<CalibrationCompare> + Sync);

/// Runs `work` until it ends or the first interrupt arrives (then the run fails, exit 1).
async fn interruptible<T>(
    work: impl Future<Output = Result<T, BackendError>>,
    interrupts: &Interrupts,
) -> Result<T, BackendError> {
    tokio::select! {
        r = work => r,
        by = interrupts.clone().reached(1) => Err(BackendError::failed(format!(
            "run interrupted by {by}; any schema being loaded stays marked incomplete and the next `dbio setup` rebuilds it"
        ))),
    }
}

/// How far this host's clock may be from the server's when shards start at an instant.
const MAX_CLOCK_OFFSET_S: f64 = 0.5;

/// A shard that reaches its start instant this late is flagged (it started its window
/// after the others).
const LATE_START_S: f64 = 0.5;

async fn begin<C: WindowCollector>(collector: Option<&mut C>) -> Result<(), String> {
    match collector {
        Some(c) => c.begin().await,
        None => Ok(()),
    }
}

/// Waits for the run's start instant, if it has one (interruptible); a warning when it had
/// already passed.
async fn wait_for_start(
    start_at: Option<chrono::DateTime<chrono::Utc>>,
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
        interruptible(
            async {
                tokio::time::sleep(std::time::Duration::from_secs_f64(wait_s)).await;
                Ok(())
            },
            interrupts,
        )
        .await?;
    }
    Ok(())
}

/// One measured window on `backend`, its result written to the run's folder.
pub async fn run<B: Backend>(
    backend: &mut B,
    config: &Config,
    output: &Output<'_>,
    interrupts: Interrupts,
    calibrate: Option<Calibrate<'_>>,
) -> Result<RunResult, BackendError> {
    config.validate()?;
    backend.refuse(config)?;
    if config.run.engine == SessionLoop::Server && !backend.server_loop() {
        return Err(BackendError::usage(format!(
            "run.engine: server runs the loop inside PostgreSQL; {} has no server-side loop in dbio: use run.engine: client",
            backend.name()
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
    let facts = interruptible(backend.preflight(config), &interrupts).await?;
    for n in &facts.notes {
        output.note(&format!("run: {n}"));
    }
    let plan = RunPlan::new(
        config,
        facts.block_size,
        facts.schema_names.clone(),
        facts.target.clone(),
        &out_dir,
        output.quiet,
    )?;
    output.note(&format!(
        "run: {} reader(s), {} writer(s) on {} ({}); connecting and preparing",
        r.readers, r.writers, facts.target, facts.describe
    ));
    let mut environment = facts.environment;
    let mut warnings = facts.warnings;
    let sessions_n = plan.specs().len();
    let shard = r.shard();
    let start_at = r.start_at();
    if start_at.is_some()
        && let Some(offset) = interruptible(backend.clock_offset_s(), &interrupts).await?
        && offset.abs() > MAX_CLOCK_OFFSET_S
    {
        return Err(BackendError::usage(format!(
            "this host's clock is {offset:+.3} s from the server's: shards started at run.start_at would not \
             share a window (at most {MAX_CLOCK_OFFSET_S} s allowed); synchronise the clocks (chrony, NTP)"
        )));
    }
    // One shard collects the database's figures (the others' would count the same server
    // twice); dbio merge takes them from it.
    let collects = shard.is_none_or(|s| s.index == 0);
    let (outcome, collector) = match plan.engine() {
        SessionLoop::Client => {
            let opened = interruptible(backend.open_sessions(&plan), &interrupts).await?;
            environment.session_tls = opened.tls;
            let mut collector = if collects {
                Some(interruptible(backend.collector(&plan), &interrupts).await?)
            } else {
                None
            };
            wait_for_start(start_at, &interrupts, output, &mut warnings).await?;
            output.note(&format!("run: {sessions_n} sessions ready; measuring"));
            let outcome = drive(
                opened.sessions,
                plan.drive(),
                interrupts.clone(),
                |p| output.note(&progress_line(p)),
                || begin(collector.as_mut()),
            )
            .await;
            (outcome, collector)
        }
        SessionLoop::Server => {
            let opened = interruptible(backend.open_loop_sessions(&plan), &interrupts).await?;
            environment.session_tls = opened.tls;
            let mut collector = if collects {
                Some(interruptible(backend.collector(&plan), &interrupts).await?)
            } else {
                None
            };
            wait_for_start(start_at, &interrupts, output, &mut warnings).await?;
            output.note(&format!(
                "run: {sessions_n} sessions ready; each runs its loop inside the database for {} (engine server: no live progress)",
                r.run_time
            ));
            let outcome = drive_loops(
                opened.sessions,
                plan.run_time(),
                plan.drive().grace,
                interrupts.clone(),
                || begin(collector.as_mut()),
            )
            .await;
            warnings.push(
                "run.engine server: latencies are upper bounds of power-of-two buckets timed inside the database \
                 (clock_timestamp()), not client round trips; there is no time series; client CPU is dbio's \
                 idle cost, not a per-operation cost"
                    .into(),
            );
            (outcome, collector)
        }
    };
    // The database's counters cover the window until the last session stopped.
    let db_window_s = outcome.db_window_s;
    // A second interrupt means "now": the result is written without the "after" snapshot.
    let collected = match collector {
        Some(collector) => tokio::select! {
            c = collector.end(db_window_s) => c,
            by = interrupts.clone().reached(2) => WindowFigures::skipped(format!(
                "database statistics were not collected: {by} a second time ended the run at once"
            )),
        },
        None => WindowFigures::skipped(format!(
            "shard {}: the database's figures are collected by shard 0 of this run; `dbio merge` takes them from it",
            r.shard.as_deref().unwrap_or("")
        )),
    };
    backend.end_run();
    warnings.extend(collected.warnings);
    for (name, body) in &collected.files {
        output::write_atomic(&out_dir.join(name), body)?;
    }
    let db_read_iops = collected.db.as_ref().map(|d| d.read_iops);
    let db_latency = collected.db.as_ref().and_then(|d| d.avg_read_latency_us);
    let calibration = calibrate.and_then(|c| c(r.readers.max(1), db_read_iops, db_latency));
    let mut result = RunResult::build(
        RunContext {
            config: plan.config().clone(),
            environment,
            warnings,
            db: collected.db,
            waits: collected.waits,
            device: collected.device,
            calibration,
        },
        plan.window(),
        outcome,
    );
    result.host = collected.host;
    result.missing_rights = collected.missing_rights;
    if let (Some(shard), Some(run_id)) = (shard, &r.run_id) {
        result.shard = Some(crate::merge::ShardInfo {
            run_id: run_id.clone(),
            index: shard.index,
            count: shard.count,
            start_at,
        });
    }
    publish(&result, &out_dir, output)?;
    Ok(result)
}
