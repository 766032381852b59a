//! `dbio run`: one measured window on PostgreSQL (Oracle: crate::oracle).

use dbio_core::Config;
use dbio_core::config::{Engine, RunEngine};
use dbio_core::dataset::DataSetPlan;
use dbio_core::driver::{STOP_GRACE, SessionSpec, drive, drive_loops, session_specs};
use dbio_core::result::{RunContext, RunResult, SessionTls};
use dbio_core::workload::Workload;
use dbio_postgres::collector::{Collected, CollectorOptions, IoTiming, WindowCollector};
use dbio_postgres::scratch;
use dbio_postgres::session::{PgLoopSession, PgSession};
use dbio_postgres::tls::Negotiated;
use dbio_postgres::{Target, run};

use super::output::{STDERR, drive_config, print_json, progress_line, publish, result_dir};
use super::{DEFAULT_BLOCK_SIZE, RunOutput, exit_code, interruptible, resolve};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs, Format, RunArgs, SessionArgs};
use crate::cmd::history::RecordArgs;
use crate::signals::interrupts;

pub(super) async fn run_cmd(
    common: &CommonArgs,
    data: &DataArgs,
    sessions: &SessionArgs,
    run: &RunArgs,
    record: &RecordArgs,
    quiet: bool,
) -> Result<u8, Failure> {
    let config = crate::effective::run_config(common, data, sessions, run)?;
    let json = run.format == Format::Json;
    let output = RunOutput {
        quiet,
        print_report: !quiet && !json,
        ..STDERR
    };
    if config.engine == Engine::Oracle {
        let admin = crate::oracle::admin_target(&config, common.dsn.as_deref())?;
        let result = crate::oracle::run(&config, admin, &output).await?;
        if json {
            print_json(&result)?;
        }
        return Ok(exit_code(&result));
    }
    let target = resolve(&config, common)?;
    let result = run_benchmark(&config, &target, &output).await?;
    if record.record
        && let Some(dir) = &result.config.run.out
    {
        super::history::record(dir.join("result.json"), record, quiet).await?;
    }
    if json {
        print_json(&result)?;
    }
    Ok(exit_code(&result))
}

/// The sessions of either engine, connected and ready.
enum Opened {
    Client(Vec<(SessionSpec, PgSession)>),
    Server(Vec<(SessionSpec, PgLoopSession)>),
}

impl Opened {
    /// track_io_timing is on in every session.
    fn io_timing(&self) -> bool {
        match self {
            Opened::Client(s) => s.iter().all(|(_, s)| s.io_timing),
            Opened::Server(s) => s.iter().all(|(_, s)| s.io_timing),
        }
    }

    /// The sessions' backend PIDs, by which the collector tells them apart.
    fn backend_pids(&self) -> Vec<i32> {
        match self {
            Opened::Client(s) => s.iter().map(|(_, s)| s.backend_pid()).collect(),
            Opened::Server(s) => s.iter().map(|(_, s)| s.backend_pid()).collect(),
        }
    }

    /// TLS on the sessions' connections, for the result.
    fn tls(&self) -> SessionTls {
        fn pair(t: Option<&Negotiated>) -> Option<(&str, &str)> {
            t.map(|n| (n.protocol.as_str(), n.cipher.as_str()))
        }
        match self {
            Opened::Client(s) => SessionTls::of(s.iter().map(|(_, s)| pair(s.tls()))),
            Opened::Server(s) => SessionTls::of(s.iter().map(|(_, s)| pair(s.tls()))),
        }
    }
}

/// Preflight, sessions, the measured window, result.json and report.txt.
pub async fn run_benchmark(
    config: &Config,
    target: &Target,
    output: &RunOutput<'_>,
) -> Result<RunResult, Failure> {
    let quiet = output.quiet;
    config.validate_run(DEFAULT_BLOCK_SIZE)?;
    let calibration = match &config.run.calibration {
        Some(file) => Some((
            file.display().to_string(),
            dbio_calibrate::Calibration::read(file).map_err(|e| Failure::new(2, e))?,
        )),
        None => None,
    };
    let schema_names = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE).schema_names();
    let r = &config.run;
    let specs = session_specs(r.readers, r.writers, &schema_names, r.hot_schema);
    let mut pre = interruptible(run::preflight(target, config, &specs), "run").await?;
    for n in &pre.notes {
        output.note(&format!("run: {n}"));
    }
    let block_size = pre.info.block_size;
    config.validate_run(block_size)?;
    let workload = Workload::from_config(config, block_size)?;

    let out_dir = result_dir(config)?;

    let major = pre.info.major();
    let local = target.is_local();
    if config.collector.drop_caches && !(local && scratch::is_root()) {
        return Err(Failure::new(
            2,
            "collector.drop_caches (--drop-caches) needs root on the server's host: the target is remote or dbio is not root",
        ));
    }
    output.note(&format!(
        "run: {} reader(s), {} writer(s) on {target} (PostgreSQL {}); connecting and preparing",
        r.readers, r.writers, pre.info.version
    ));
    let opened = match r.engine {
        RunEngine::Client => Opened::Client(
            interruptible(
                run::open_sessions(
                    target,
                    &specs,
                    r.redo_stress,
                    r.read_path,
                    major,
                    config.target.statement_timeout.0,
                ),
                "run",
            )
            .await?,
        ),
        RunEngine::Server => Opened::Server(
            interruptible(
                run::open_loop_sessions(
                    target,
                    &specs,
                    r.redo_stress,
                    r.read_path,
                    major,
                    &run::LoopPlan {
                        scale_blocks: workload.scale_blocks,
                        work_unit: workload.work_unit,
                        update_work_unit: workload.update_work_unit,
                        update_pct: r.update_pct,
                        seed: r.seed,
                        run_time: r.run_time.0,
                    },
                ),
                "run",
            )
            .await?,
        ),
    };
    pre.environment.session_tls = Some(opened.tls());
    let timing = if opened.io_timing() {
        IoTiming::On
    } else {
        IoTiming::Off
    };
    let mut collector = interruptible(
        WindowCollector::connect(
            target,
            CollectorOptions {
                major,
                block_size,
                schemas: schema_names.clone(),
                timing,
                data_path: pre.data_path.clone(),
                drop_caches: config.collector.drop_caches,
                direct_io: pre.direct_io,
                sample_period: config.collector.sample_period.0,
                backend_pids: opened.backend_pids(),
            },
        ),
        "run",
    )
    .await?;
    let drive_cfg = drive_config(config, workload, quiet);
    let window = drive_cfg.window;
    let outcome = match opened {
        Opened::Client(sessions) => {
            output.note(&format!("run: {} sessions ready; measuring", specs.len()));
            drive(
                sessions,
                &drive_cfg,
                interrupts(),
                |p| output.note(&progress_line(p)),
                || collector.begin(),
            )
            .await
        }
        Opened::Server(sessions) => {
            output.note(&format!(
                "run: {} sessions ready; each runs its loop inside the database for {} (engine server: no live progress)",
                specs.len(),
                r.run_time
            ));
            drive_loops(sessions, r.run_time.0, STOP_GRACE, interrupts(), || {
                collector.begin()
            })
            .await
        }
    };
    // The database's counters cover the window until the last session stopped.
    let db_window_s = outcome.db_window_s;
    // A second interrupt means "now": the result is written without the "after" snapshot.
    let collected = tokio::select! {
        c = collector.end(db_window_s) => c,
        by = interrupts().reached(2) => Collected::skipped(format!(
            "database statistics were not collected: {by} a second time ended the run at once"
        )),
    };

    let mut recorded = config.clone();
    recorded.target.dsn = Some(target.redacted());
    recorded.run.out = Some(out_dir.clone());
    let mut warnings = pre.warnings;
    if r.engine == RunEngine::Server {
        warnings.push(
            "run.engine server: latencies are upper bounds of power-of-two buckets timed inside the database \
             (clock_timestamp()), not client round trips; there is no time series; client CPU is dbio's \
             idle cost, not a per-operation cost"
                .into(),
        );
    }
    warnings.extend(collected.warnings);
    let db_read_iops = collected.db.as_ref().map(|d| d.read_iops);
    let db_latency = collected.db.as_ref().and_then(|d| d.avg_read_latency_us);
    let calibration_compare = calibration.as_ref().and_then(|(file, c)| {
        super::calibrate::compare_at(file, c, r.readers.max(1), db_read_iops, db_latency)
    });
    let mut result = RunResult::build(
        RunContext {
            config: recorded,
            environment: pre.environment,
            warnings,
            db: collected.db,
            waits: collected.waits,
            device: collected.device,
            calibration: calibration_compare,
        },
        window,
        outcome,
    );
    result.host = collected.host;
    result.missing_rights = collected.missing_rights;
    publish(&result, &out_dir, output)?;
    Ok(result)
}
