//! One function per command: build the effective config, call the backend, print.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dbio_core::Config;
use dbio_core::compare::compare;
use dbio_core::config::{Engine, RunEngine};
use dbio_core::dataset::{DataSetPlan, LoadObserver, LoadSummary, NoProgress};
use dbio_core::driver::{
    DriveConfig, Progress, RunStatus, STOP_GRACE, SessionSpec, WindowSpec, drive, drive_loops,
    session_specs,
};
use dbio_core::output;
use dbio_core::regress;
use dbio_core::report;
use dbio_core::result::{RunContext, RunResult, SessionTls};
use dbio_core::summary::read_step_set;
use dbio_core::units::{SizeSpec, format_bytes};
use dbio_core::workload::Workload;
use dbio_postgres::collector::{Collected, CollectorOptions, IoTiming, WindowCollector};
use dbio_postgres::loader::SetupOptions;
use dbio_postgres::scratch::{self, ScratchCluster, ScratchOptions};
use dbio_postgres::session::{PgLoopSession, PgSession};
use dbio_postgres::tls::Negotiated;
use dbio_postgres::{PgError, Target, check, conn, loader, run, teardown};

use crate::Failure;
use crate::args::{Cli, Command, CommonArgs, DataArgs, Format, ScratchAction, ScratchArgs};
use crate::progress::LoadBars;
use crate::signals::interrupts;

/// PostgreSQL's default block size; only used before a server tells us its own.
const DEFAULT_BLOCK_SIZE: u64 = 8192;

pub async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let quiet = cli.quiet;
    match cli.command {
        Command::Setup {
            common,
            data,
            load,
            force,
            drop_dependents,
        } => {
            let mut config = load_config(&common, &data)?;
            load.apply(&mut config);
            config.validate()?;
            if config.engine == Engine::Oracle {
                refuse_drop_dependents_on_oracle(drop_dependents)?;
                let admin = crate::oracle::admin_target(&config, common.dsn.as_deref())?;
                return crate::oracle::setup(&config, admin, force).await;
            }
            let target = resolve(&config, &common)?;
            let opts = SetupOptions {
                force,
                drop_dependents,
                drop_caches: config.collector.drop_caches,
            };
            let summary = interruptible(setup(&config, &target, &opts, quiet), "setup").await?;
            if !quiet {
                print!("{}", summary.render_text());
            }
            Ok(0)
        }
        Command::Check { common, data } => {
            let config = load_config(&common, &data)?;
            if config.engine == Engine::Oracle {
                let admin = crate::oracle::admin_target(&config, common.dsn.as_deref())?;
                return crate::oracle::check(&config, admin).await;
            }
            let target = resolve(&config, &common)?;
            let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
            let report = interruptible(check::check(&target, &plan), "check").await?;
            print!("{}", report.render_text());
            Ok(if report.ok() { 0 } else { 1 })
        }
        Command::Teardown {
            common,
            prefix,
            yes,
            drop_dependents,
        } => {
            let data = DataArgs {
                prefix,
                ..DataArgs::default()
            };
            let config = load_config(&common, &data)?;
            if config.engine == Engine::Oracle {
                refuse_drop_dependents_on_oracle(drop_dependents)?;
                let admin = crate::oracle::admin_target(&config, common.dsn.as_deref())?;
                return crate::oracle::teardown(&config, admin, yes).await;
            }
            let target = resolve(&config, &common)?;
            teardown_cmd(&config, &target, yes, drop_dependents).await
        }
        Command::Run {
            common,
            data,
            sessions,
            run,
            record,
        } => {
            let config = crate::effective::run_config(&common, &data, &sessions, &run)?;
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
            let target = resolve(&config, &common)?;
            let result = run_benchmark(&config, &target, &output).await?;
            if record.record
                && let Some(dir) = &result.config.run.out
            {
                crate::history::record(dir.join("result.json"), &record, quiet).await?;
            }
            if json {
                print_json(&result)?;
            }
            Ok(exit_code(&result))
        }
        Command::Ramp {
            common,
            data,
            ramp,
            run,
            record,
        } => {
            let config = crate::effective::ramp_config(&common, &data, &ramp, &run)?;
            if config.engine == Engine::Oracle {
                return Err(Failure::new(
                    2,
                    "ramp is built for engine: postgres only; with Oracle, run `dbio run` per step and `dbio compare` the results",
                ));
            }
            let target = resolve(&config, &common)?;
            let (result, dir) = crate::ramp::ramp(&config, &target, quiet, run.format).await?;
            if record.record {
                crate::history::record(dir.join("ramp.json"), &record, quiet).await?;
            }
            Ok(if result.status == RunStatus::Ok { 0 } else { 1 })
        }
        Command::History { action } => crate::history::dispatch(action, quiet).await,
        Command::Compare {
            inputs,
            format,
            out,
        } => compare_cmd(&inputs, &format, out.as_deref()),
        Command::Regress {
            baseline,
            current,
            config,
            max_iops_drop,
            max_latency_rise,
            junit,
            accept_difference,
            format,
        } => {
            dbio_core::shape::check_fact_names(&accept_difference)
                .map_err(|m| Failure::new(2, format!("--accept-difference: {m}")))?;
            let mut cfg = Config::load(config.as_deref())?;
            if let Some(v) = max_iops_drop {
                cfg.regress.max_iops_drop_pct = v;
            }
            if let Some(v) = max_latency_rise {
                cfg.regress.max_latency_rise_pct = v;
            }
            cfg.validate()?;
            regress_cmd(
                &baseline,
                &current,
                &cfg,
                junit.as_deref(),
                &accept_difference,
                format,
                quiet,
            )
        }
        Command::Merge(args) => crate::merge::merge_cmd(args, quiet),
        Command::Report { result, format } => crate::ramp::report_cmd(&result, &format),
        Command::Config {
            config,
            get,
            yaml,
            command,
        } => {
            let (c, rows) = crate::effective::with_sources(&command, config)?;
            match get {
                Some(key) => match c.get(&key) {
                    Some(v) => println!("{v}"),
                    None => {
                        return Err(Failure::new(
                            2,
                            format!("no key `{key}` in the configuration"),
                        ));
                    }
                },
                None if yaml => print!("{}", c.to_yaml()),
                None => print!("{}", crate::effective::render_sources(&rows)),
            }
            Ok(0)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "dbio",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
        Command::Man { out } => crate::manual::man_cmd(out.as_deref()),
        Command::Calibrate {
            path,
            size,
            create,
            block,
            large,
            levels,
            duration,
            write_pct,
            destroy_data,
            engine,
            out,
            overwrite,
        } => {
            let opts = dbio_calibrate::CalibrateOptions {
                path,
                size: size.map(|s| s.to_bytes(DEFAULT_BLOCK_SIZE)),
                create,
                block: block.to_bytes(DEFAULT_BLOCK_SIZE),
                large: large.to_bytes(DEFAULT_BLOCK_SIZE),
                levels,
                duration: duration.0,
                write_pct,
                destroy_data,
                engine: if engine == "io_uring" {
                    dbio_calibrate::Engine::IoUring
                } else {
                    dbio_calibrate::Engine::Psync
                },
                seed: 1,
            };
            crate::calibrate::calibrate_cmd(&opts, out, overwrite, quiet)
        }
        Command::Scratch { action } => scratch_cmd(action),
        Command::Quickstart {
            config,
            scratch,
            keep,
        } => quickstart(config.as_deref(), &scratch, keep, quiet).await,
    }
}

/// Loads the config file, applies flags and validates.
fn load_config(common: &CommonArgs, data: &DataArgs) -> Result<Config, Failure> {
    crate::effective::base_config(common, data)
}

/// A result document on stdout (`--format json`).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::new(1, e.to_string()))?;
    println!("{text}");
    Ok(())
}

/// The PostgreSQL connection target: flag > PG* environment > file > libpq defaults.
fn resolve(config: &Config, common: &CommonArgs) -> Result<Target, Failure> {
    Ok(Target::resolve(
        config.target.dsn.as_deref(),
        conn::env_params()?,
        common.dsn.as_deref(),
        config.target.connect_timeout.0,
    )?)
}

/// Runs `work` until it ends or Ctrl-C (SIGTERM, SIGHUP) arrives; an interrupt is a failure
/// (exit 1).
async fn interruptible<T>(
    work: impl std::future::Future<Output = Result<T, PgError>>,
    what: &str,
) -> Result<T, Failure> {
    tokio::select! {
        r = work => r.map_err(Failure::from),
        by = interrupts().reached(1) => Err(Failure::new(
            1,
            format!("{what} interrupted by {by}; any schema being loaded stays marked incomplete and the next `dbio setup` rebuilds it"),
        )),
    }
}

async fn setup(
    config: &Config,
    target: &Target,
    opts: &SetupOptions,
    quiet: bool,
) -> Result<LoadSummary, PgError> {
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let observer: Arc<dyn LoadObserver> = if quiet {
        Arc::new(NoProgress)
    } else {
        Arc::new(LoadBars::new())
    };
    if !quiet {
        eprintln!(
            "setup: {} schema(s) x {} blocks on {target}{}",
            plan.schemas,
            plan.scale_blocks,
            plan.tablespace
                .as_ref()
                .map(|t| format!(" in tablespace {t}"))
                .unwrap_or_default()
        );
    }
    loader::setup(target, &plan, opts, observer).await
}

async fn teardown_cmd(
    config: &Config,
    target: &Target,
    yes: bool,
    drop_dependents: bool,
) -> Result<u8, Failure> {
    let prefix = &config.data.prefix;
    if !yes {
        let plan = teardown::plan(target, prefix).await?;
        if plan.is_empty() {
            println!("nothing to drop: no dbio data set of prefix `{prefix}` in {target}");
            return Ok(0);
        }
        println!("would drop from {target} (data set of prefix `{prefix}`):");
        for d in &plan.schemas {
            let mut line = if !d.table {
                format!("  schema {} (its table cf1 is already gone)", d.schema)
            } else if d.foreign_objects.is_empty() {
                format!("  schema {} (table cf1, index i_cf1)", d.schema)
            } else {
                format!("  table {}.cf1 and index i_cf1", d.schema)
            };
            if !d.foreign_objects.is_empty() {
                line.push_str(&format!(
                    "; schema {} stays, without dbio's mark, because it holds objects dbio did not create: {}",
                    d.schema,
                    d.foreign_objects.join(", ")
                ));
            }
            println!("{line}");
            if !d.dependents.is_empty() {
                println!(
                    "    depending on {}.cf1, not dbio's: {} ({})",
                    d.schema,
                    d.dependents.join(", "),
                    if drop_dependents {
                        "dropped with it: --drop-dependents"
                    } else {
                        "teardown refuses while they exist; --drop-dependents drops them too"
                    }
                );
            }
        }
        for s in &plan.legacy {
            println!("  not {s}: {}", legacy_note());
        }
        println!("rerun with --yes to drop them");
        return Ok(1);
    }
    let outcome = teardown::teardown(target, prefix, drop_dependents).await?;
    for s in &outcome.dropped {
        println!("dropped schema {s}");
    }
    for k in &outcome.kept {
        println!(
            "dropped {}.cf1; kept schema {} without dbio's mark: it holds objects dbio did not create ({})",
            k.schema,
            k.schema,
            k.foreign_objects.join(", ")
        );
    }
    for s in &outcome.legacy {
        println!("left {s}: {}", legacy_note());
    }
    if outcome.dropped.is_empty() && outcome.kept.is_empty() && outcome.legacy.is_empty() {
        println!("nothing to drop: no dbio data set of prefix `{prefix}` in {target}");
    }
    Ok(0)
}

/// The Oracle backend never drops objects of the user's: the flag would be a silent no-op.
fn refuse_drop_dependents_on_oracle(drop_dependents: bool) -> Result<(), Failure> {
    if drop_dependents {
        return Err(Failure::new(
            2,
            "--drop-dependents is for PostgreSQL only; with engine: oracle drop your objects on dbio's tables yourself",
        ));
    }
    Ok(())
}

fn legacy_note() -> &'static str {
    "it carries the mark of an older dbio, which does not say which data set (prefix) it belongs to; \
     rebuild it with `dbio setup --force` (same --prefix and --schemas) and tear it down then, or drop it yourself"
}

fn scratch_options(a: &ScratchArgs) -> Result<ScratchOptions, Failure> {
    let mut settings = Vec::new();
    for s in &a.settings {
        let Some((k, v)) = s.split_once('=') else {
            return Err(Failure::new(
                2,
                format!("--set {s}: write it as NAME=VALUE, e.g. --set debug_io_direct=data"),
            ));
        };
        let k = k.trim();
        if k.is_empty()
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(Failure::new(
                2,
                format!("--set {s}: `{k}` is not a setting name"),
            ));
        }
        let v = v.trim();
        let value = if v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
            v.to_string()
        } else {
            format!("'{}'", v.replace('\'', "''"))
        };
        settings.push((k.to_string(), value));
    }
    Ok(ScratchOptions {
        dir: a.dir.clone(),
        port: a.port,
        shared_buffers_bytes: a.shared_buffers.to_bytes(DEFAULT_BLOCK_SIZE),
        pg_bin: a.pg_bin.clone(),
        password: None,
        settings,
    })
}

fn describe(c: &ScratchCluster) -> String {
    format!(
        "PostgreSQL {} on 127.0.0.1:{} (shared_buffers {}, track_io_timing on)\n  data: {}\n  log:  {}\n  dsn:  {}",
        c.state.bin.version,
        c.state.port,
        format_bytes(c.state.shared_buffers_bytes),
        c.data_dir().display(),
        c.log_file().display(),
        c.dsn()
    )
}

fn scratch_cmd(action: ScratchAction) -> Result<u8, Failure> {
    match action {
        ScratchAction::Start { scratch: a } => {
            let c = scratch::start(&scratch_options(&a)?)?;
            println!("scratch cluster running: {}", describe(&c));
            println!("stop it with: dbio scratch stop --dir {}", a.dir.display());
            Ok(0)
        }
        ScratchAction::Stop { dir } => {
            let c = scratch::stop(&dir)?;
            println!("scratch cluster in {} stopped", c.dir.display());
            Ok(0)
        }
        ScratchAction::Status { dir, dsn_only } => {
            let (c, running) = scratch::status(&dir)?;
            if dsn_only {
                if running {
                    println!("{}", c.dsn());
                    return Ok(0);
                }
                eprintln!(
                    "dbio: scratch cluster in {} is not running",
                    c.dir.display()
                );
                return Ok(1);
            }
            if running {
                println!("running: {}", describe(&c));
            } else {
                println!(
                    "stopped: cluster in {} (start it with: dbio scratch start --dir {})",
                    c.dir.display(),
                    dir.display()
                );
            }
            Ok(0)
        }
    }
}

/// The quickstart when no config says otherwise: 2 schemas of 12,288 blocks (96 MiB each),
/// six times the default 32 MB shared_buffers, then 10 s of 2 readers and 1 writer, then a
/// ramp of 1, 2 and 4 readers for 5 s each.
fn quickstart_config(path: Option<&Path>) -> Result<Config, Failure> {
    let mut config = match path {
        Some(p) => Config::from_file(p)?,
        None => {
            let mut c = Config::default();
            c.data.schemas = 2;
            c.data.scale = SizeSpec::Blocks(12_288);
            c.run.readers = 2;
            c.run.writers = 1;
            c.run.run_time = dbio_core::units::Dur(std::time::Duration::from_secs(10));
            c.ramp.readers = vec![1, 2, 4];
            c.ramp.writers = Some(vec![0]);
            c.ramp.run_time = Some(dbio_core::units::Dur(std::time::Duration::from_secs(5)));
            c
        }
    };
    if config.run.label.is_none() {
        config.run.label = Some("quickstart".into());
    }
    config.target.dsn = None;
    config.validate()?;
    Ok(config)
}

async fn quickstart(
    config_path: Option<&Path>,
    scratch_args: &ScratchArgs,
    keep: bool,
    quiet: bool,
) -> Result<u8, Failure> {
    let config = quickstart_config(config_path)?;
    eprintln!(
        "quickstart: starting a scratch PostgreSQL in {}",
        scratch_args.dir.display()
    );
    let cluster = scratch::start(&scratch_options(scratch_args)?)?;
    eprintln!("{}", describe(&cluster));
    let target = Target::from_dsn(&cluster.dsn())?;
    let result = quickstart_work(&config, &target, quiet).await;
    if !keep {
        scratch::stop(&cluster.dir)?;
        eprintln!(
            "quickstart: scratch server stopped; its files stay in {} (restart: dbio scratch start --dir {}; remove: rm -rf {})",
            cluster.dir.display(),
            scratch_args.dir.display(),
            cluster.dir.display()
        );
    } else {
        eprintln!(
            "quickstart: scratch server left running at {} (stop: dbio scratch stop --dir {})",
            cluster.dsn(),
            scratch_args.dir.display()
        );
    }
    result
}

async fn quickstart_work(config: &Config, target: &Target, quiet: bool) -> Result<u8, Failure> {
    let opts = SetupOptions {
        force: false,
        drop_dependents: false,
        drop_caches: config.collector.drop_caches,
    };
    let summary = interruptible(setup(config, target, &opts, quiet), "setup").await?;
    println!("== data set ==");
    print!("{}", summary.render_text());
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let report = interruptible(check::check(target, &plan), "check").await?;
    println!("== check ==");
    print!("{}", report.render_text());
    if !report.ok() {
        return Ok(1);
    }
    println!("== run ==");
    let output = RunOutput { quiet, ..STDERR };
    let result = run_benchmark(config, target, &output).await?;
    if result.status != RunStatus::Ok {
        return Ok(exit_code(&result));
    }
    println!("== ramp ==");
    let (ramp, _) = crate::ramp::ramp(config, target, quiet, Format::Text).await?;
    Ok(if ramp.status == RunStatus::Ok { 0 } else { 1 })
}

fn compare_cmd(
    inputs: &[std::path::PathBuf],
    format: &str,
    out: Option<&Path>,
) -> Result<u8, Failure> {
    let sets = inputs
        .iter()
        .map(|p| read_step_set(p))
        .collect::<Result<Vec<_>, _>>()?;
    let c = compare(&sets);
    if c.rows.is_empty() {
        return Err(Failure::new(
            2,
            format!(
                "nothing to compare: no step is in every input ({})",
                c.notes.join("; ")
            ),
        ));
    }
    let (text, csv, html) = (c.render_text(), c.render_csv(), c.render_html(&sets));
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::new(2, format!("cannot create {}: {e}", dir.display())))?;
        for (name, body) in [
            ("compare.txt", &text),
            ("compare.csv", &csv),
            ("compare.html", &html),
        ] {
            output::write_atomic(&dir.join(name), body.as_bytes())?;
        }
        eprintln!(
            "compare: compare.txt, compare.csv, compare.html written to {}",
            dir.display()
        );
    }
    match format {
        "csv" => print!("{csv}"),
        "html" => print!("{html}"),
        "json" => print_json(&c)?,
        _ => print!("{text}"),
    }
    Ok(0)
}

fn regress_cmd(
    baseline: &Path,
    current: &Path,
    config: &Config,
    junit: Option<&Path>,
    accepted: &[String],
    format: Format,
    quiet: bool,
) -> Result<u8, Failure> {
    let base = read_step_set(baseline)?;
    let cur = read_step_set(current)?;
    if let Some(why) = regress::refusal(&base, &cur, accepted) {
        return Err(Failure::new(2, why));
    }
    let rows = regress::regress(&base, &cur, &config.regress);
    match format {
        Format::Json => print_json(&regress::RegressReport::of(&base, &cur, &rows))?,
        Format::Text => print!("{}", regress::render_text(&base, &cur, &rows)),
    }
    if let Some(path) = junit {
        output::write_atomic(path, regress::render_junit(&rows).as_bytes())?;
        if !quiet {
            eprintln!("regress: JUnit XML written to {}", path.display());
        }
    }
    Ok(if rows.iter().any(|r| r.regressed) {
        1
    } else {
        0
    })
}

/// Exit code of a finished run: 0 ok, 1 failed or interrupted.
fn exit_code(r: &RunResult) -> u8 {
    match r.status {
        RunStatus::Ok => 0,
        RunStatus::Failed | RunStatus::Interrupted => 1,
    }
}

/// The live line, like `pgbench -P`.
pub(crate) fn progress_line(p: &Progress) -> String {
    if p.warmup {
        return "progress: warm-up".into();
    }
    format!(
        "progress: {:.1} s, {:.1} ops/s, p99 {} µs, {} errors",
        p.elapsed_s,
        p.ops_per_s,
        p.p99_us
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into()),
        p.errors
    )
}

/// How a run talks to the user.
pub struct RunOutput<'a> {
    pub quiet: bool,
    /// Print report.txt on stdout at the end (a ramp prints its own table instead).
    pub print_report: bool,
    /// Where progress lines and notes go (stderr, or above a ramp's progress bar).
    pub line: &'a (dyn Fn(&str) + Sync),
}

impl RunOutput<'_> {
    /// A progress line or note; nothing when quiet.
    pub fn note(&self, text: &str) {
        if !self.quiet {
            (self.line)(text);
        }
    }
}

fn to_stderr(text: &str) {
    eprintln!("{text}");
}

pub const STDERR: RunOutput<'static> = RunOutput {
    quiet: false,
    print_report: true,
    line: &to_stderr,
};

/// The run's result folder (run.out, or a new results/<UTC>-<label>/), proven writable; a
/// used run.out is refused unless run.overwrite.
pub(crate) fn result_dir(config: &Config) -> Result<PathBuf, Failure> {
    let r = &config.run;
    Ok(output::result_dir(
        r.out.as_deref(),
        r.label.as_deref().unwrap_or("run"),
        r.overwrite,
    )?)
}

/// Writes `files` into `dir`, each atomically. When one cannot be written (disk full, folder
/// gone), the first of them, the main document, is kept in a new file under $TMPDIR, and the
/// failure (exit 1) names that file.
pub(crate) fn write_results(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), Failure> {
    for (name, body) in files {
        if let Err(e) = output::write_atomic(&dir.join(name), body) {
            let kept = match files.first() {
                Some((main, bytes)) => match output::save_fallback(main, bytes) {
                    Ok(path) => format!("{main} is kept in {}", path.display()),
                    Err(f) => format!("{main} could not be kept anywhere ({f})"),
                },
                None => String::new(),
            };
            return Err(Failure::new(
                1,
                format!("cannot write {name} into {}: {e}; {kept}", dir.display()),
            ));
        }
    }
    Ok(())
}

/// What the driver is told: the window (run_time, or work_loop operations per session),
/// warm-up, intervals, progress (none when quiet), error policy and seed.
pub(crate) fn drive_config(config: &Config, workload: Workload, quiet: bool) -> DriveConfig {
    let r = &config.run;
    DriveConfig {
        workload,
        window: if r.work_loop > 0 {
            WindowSpec::Loops(r.work_loop)
        } else {
            WindowSpec::Time(r.run_time.0)
        },
        warmup: r.warmup.0,
        interval: r.interval.0,
        progress: if quiet {
            std::time::Duration::ZERO
        } else {
            r.progress.0
        },
        on_error: r.on_error,
        seed: r.seed,
        grace: STOP_GRACE,
    }
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
    let measured_s = outcome.measured_s;
    // A second interrupt means "now": the result is written without the "after" snapshot.
    let collected = tokio::select! {
        c = collector.end(measured_s) => c,
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
        crate::calibrate::compare_at(file, c, r.readers.max(1), db_read_iops, db_latency)
    });
    let result = RunResult::build(
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
    publish(&result, &out_dir, output)?;
    Ok(result)
}

/// Writes result.json and report.txt (each atomically), prints the report when asked (and
/// always when the files could not be written), and says where they are.
pub(crate) fn publish(
    result: &RunResult,
    out_dir: &Path,
    output: &RunOutput<'_>,
) -> Result<(), Failure> {
    let text = report::render_text(result);
    let json = serde_json::to_string_pretty(result).map_err(|e| Failure::new(1, e.to_string()))?;
    let written = write_results(
        out_dir,
        &[
            ("result.json", json.as_bytes()),
            ("report.txt", text.as_bytes()),
        ],
    );
    if output.print_report || written.is_err() {
        print!("{text}");
    }
    written?;
    output.note(&format!(
        "results: {}/result.json, {}/report.txt",
        out_dir.display(),
        out_dir.display()
    ));
    Ok(())
}
