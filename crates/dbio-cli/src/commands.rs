//! One function per command: build the effective config, call the backend, print.

use std::path::Path;
use std::sync::Arc;

use dbio_core::Config;
use dbio_core::config::Engine;
use dbio_core::dataset::{DataSetPlan, LoadObserver, LoadSummary, NoProgress};
use dbio_core::units::{SizeSpec, format_bytes};
use dbio_postgres::loader::SetupOptions;
use dbio_postgres::scratch::{self, ScratchCluster, ScratchOptions};
use dbio_postgres::{PgError, Target, check, conn, loader, teardown};

use crate::Failure;
use crate::args::{Cli, Command, CommonArgs, DataArgs, ScratchAction, ScratchArgs};
use crate::progress::LoadBars;

/// PostgreSQL's default block size; only used before a server tells us its own.
const DEFAULT_BLOCK_SIZE: u64 = 8192;

pub async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let quiet = cli.quiet;
    match cli.command {
        Command::Setup {
            common,
            data,
            force,
        } => {
            let (config, target) = prepare(&common, &data)?;
            let summary = interruptible(setup(&config, &target, force, quiet), "setup").await?;
            print!("{}", summary.render_text());
            Ok(0)
        }
        Command::Check { common, data } => {
            let (config, target) = prepare(&common, &data)?;
            let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
            let report = interruptible(check::check(&target, &plan), "check").await?;
            print!("{}", report.render_text());
            Ok(if report.ok() { 0 } else { 1 })
        }
        Command::Teardown {
            common,
            prefix,
            yes,
        } => {
            let data = DataArgs {
                prefix,
                ..DataArgs::default()
            };
            let (config, target) = prepare(&common, &data)?;
            teardown_cmd(&config, &target, yes).await
        }
        Command::Scratch { action } => scratch_cmd(action),
        Command::Quickstart {
            config,
            scratch,
            keep,
        } => quickstart(config.as_deref(), &scratch, keep, quiet).await,
    }
}

/// Loads the config file, applies flags, validates, and resolves the connection target.
fn prepare(common: &CommonArgs, data: &DataArgs) -> Result<(Config, Target), Failure> {
    let mut config = match &common.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    common.apply(&mut config);
    data.apply(&mut config);
    config.validate()?;
    if config.engine == Engine::Oracle {
        return Err(dbio_oracle::unavailable().into());
    }
    let target = Target::resolve(
        config.target.dsn.as_deref(),
        conn::env_params()?,
        common.dsn.as_deref(),
        config.target.connect_timeout.0,
    )?;
    Ok((config, target))
}

/// Runs `work` until it ends or Ctrl-C arrives; an interrupt is a failure (exit 1).
async fn interruptible<T>(
    work: impl std::future::Future<Output = Result<T, PgError>>,
    what: &str,
) -> Result<T, Failure> {
    tokio::select! {
        r = work => r.map_err(Failure::from),
        _ = tokio::signal::ctrl_c() => Err(Failure::new(
            1,
            format!("{what} interrupted by Ctrl-C; any schema being loaded stays marked incomplete and the next `dbio setup` rebuilds it"),
        )),
    }
}

async fn setup(
    config: &Config,
    target: &Target,
    force: bool,
    quiet: bool,
) -> Result<LoadSummary, PgError> {
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let observer: Arc<dyn LoadObserver> = if quiet {
        Arc::new(NoProgress)
    } else {
        Arc::new(LoadBars::new(plan.schemas))
    };
    eprintln!(
        "setup: {} schema(s) x {} blocks on {target}{}",
        plan.schemas,
        plan.scale_blocks,
        plan.tablespace
            .as_ref()
            .map(|t| format!(" in tablespace {t}"))
            .unwrap_or_default()
    );
    loader::setup(target, &plan, &SetupOptions { force }, observer).await
}

async fn teardown_cmd(config: &Config, target: &Target, yes: bool) -> Result<u8, Failure> {
    let prefix = &config.data.prefix;
    if !yes {
        let plan = teardown::plan(target, prefix).await?;
        if plan.is_empty() {
            println!("nothing to drop: no dbio schemas {prefix}<n> in {target}");
            return Ok(0);
        }
        println!("would drop from {target}:");
        for d in &plan {
            if d.foreign_objects.is_empty() {
                println!("  schema {} (table cf1, index i_cf1)", d.schema);
            } else {
                println!(
                    "  table {}.cf1 only; schema {} stays because it holds objects dbio did not create: {}",
                    d.schema,
                    d.schema,
                    d.foreign_objects.join(", ")
                );
            }
        }
        println!("rerun with --yes to drop them");
        return Ok(1);
    }
    let outcome = teardown::teardown(target, prefix).await?;
    for s in &outcome.dropped {
        println!("dropped schema {s}");
    }
    for k in &outcome.kept {
        println!(
            "dropped {}.cf1; kept schema {}: it holds objects dbio did not create ({})",
            k.schema,
            k.schema,
            k.foreign_objects.join(", ")
        );
    }
    if outcome.dropped.is_empty() && outcome.kept.is_empty() {
        println!("nothing to drop: no dbio schemas {prefix}<n> in {target}");
    }
    Ok(0)
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

/// The quickstart's data set when no config says otherwise: 2 schemas of 12,288 blocks
/// (96 MiB each), six times the default 32 MB shared_buffers.
fn quickstart_config(path: Option<&Path>) -> Result<Config, Failure> {
    let mut config = match path {
        Some(p) => Config::from_file(p)?,
        None => {
            let mut c = Config::default();
            c.data.schemas = 2;
            c.data.scale = SizeSpec::Blocks(12_288);
            c
        }
    };
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
    let summary = interruptible(setup(config, target, false, quiet), "setup").await?;
    println!("== data set ==");
    print!("{}", summary.render_text());
    let plan = DataSetPlan::new(&config.data, DEFAULT_BLOCK_SIZE);
    let report = interruptible(check::check(target, &plan), "check").await?;
    println!("== check ==");
    print!("{}", report.render_text());
    Ok(if report.ok() { 0 } else { 1 })
}
