//! `dbio nightly`: the nightly performance gate in one command. A PostgreSQL to measure (the
//! one --dsn names, a fresh container with --container, else a scratch cluster), `dbio
//! setup`, the nightly ramp recorded in the results store (`ramp --record`), then `dbio
//! history check` over the series, writing junit.xml. The steps are dbio's own commands,
//! run in this process with the command lines a user would type. scripts/nightly.sh only
//! turns its environment into these flags.

use std::path::PathBuf;

use clap::Args;
use dbio_postgres::{ScratchCluster, ScratchOptions};

use super::DEFAULT_BLOCK_SIZE;
use crate::Failure;
use crate::args::Cli;
use crate::container::{self, Engine, ServerContainer};

#[derive(Debug, Args)]
pub struct NightlyArgs {
    /// YAML config file: the data set, the ramp, the gate's thresholds and the container:
    /// section (see configs/nightly.yaml).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Measure this server (a libpq connection string or URL) instead of starting one.
    #[arg(long, value_name = "DSN", conflicts_with_all = ["container", "scratch_dir"])]
    pub dsn: Option<String>,
    /// Start the server in a container with this engine: the image, port, memory cap and
    /// settings of the config's container: section; compose when the engine has one that
    /// keeps to the host's network (docker compose v2, podman-compose 1.6+), else plain `run`
    /// commands. The container and its volumes are removed at the end.
    #[arg(
        long,
        value_name = "ENGINE",
        value_enum,
        conflicts_with = "scratch_dir"
    )]
    pub container: Option<Engine>,
    /// Without --dsn or --container: the scratch cluster's folder (started with
    /// container.shared_buffers, stopped at the end) [default: .dbio/nightly-scratch]
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// Where each night's results are kept, one folder per night (UTC timestamp).
    #[arg(long, value_name = "DIR", default_value = "results/nightly")]
    pub results: PathBuf,
    /// Results store: a SQLite file or postgresql://...; keep it between nights
    /// [default: RESULTS/history.sqlite]
    #[arg(long, value_name = "FILE|URL", env = "DBIO_HISTORY_STORE")]
    pub store: Option<String>,
    /// Build id kept with the night's record [default: $DBIO_TAG, else $GITHUB_SHA]
    #[arg(long, value_name = "TEXT")]
    pub tag: Option<String>,
}

/// The server the night measures, and what ends it.
enum Server {
    Given(String),
    Container(Box<ServerContainer>),
    Scratch(PathBuf, String),
}

impl Server {
    fn dsn(&self) -> String {
        match self {
            Server::Given(dsn) | Server::Scratch(_, dsn) => dsn.clone(),
            Server::Container(c) => c.dsn(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Server::Scratch(dir, _) = self
            && let Err(e) = ScratchCluster::stop(dir)
        {
            errln!(
                "dbio: warning: the nightly's scratch cluster in {} did not stop: {e}",
                dir.display()
            );
        }
    }
}

pub(super) async fn nightly_cmd(a: NightlyArgs, quiet: bool) -> Result<u8, Failure> {
    let config = dbio_core::Config::load(a.config.as_deref())?;
    config.validate()?;
    // Signals from here on end the night's work, and the server is still removed.
    let _ = crate::signals::interrupts();
    let server = if let Some(dsn) = &a.dsn {
        if !quiet {
            errln!("nightly: measuring the server --dsn names");
        }
        Server::Given(dsn.clone())
    } else if let Some(engine) = a.container {
        Server::Container(Box::new(
            ServerContainer::start(engine, &config.container, quiet).await?,
        ))
    } else {
        let dir = a
            .scratch_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(".dbio/nightly-scratch"));
        if !quiet {
            errln!("nightly: starting a scratch cluster in {}", dir.display());
        }
        let cluster = ScratchCluster::start(&ScratchOptions {
            dir: dir.clone(),
            port: None,
            shared_buffers_bytes: config.container.shared_buffers.to_bytes(DEFAULT_BLOCK_SIZE),
            pg_bin: None,
            password: None,
            settings: Vec::new(),
        })?;
        Server::Scratch(dir, cluster.dsn())
    };
    let code = night(&a, &config, &server).await;
    // The server's own words matter when the night could not measure (a regression found
    // in good runs needs none).
    if let Server::Container(c) = &server
        && code.as_ref().map_or(true, |(_, _, ramp)| *ramp != 0)
    {
        errln!(
            "nightly: the last lines of the server's log ({} logs {}):\n{}",
            a.container.map_or("", Engine::program),
            c.name(),
            c.logs(Some(container::LOG_TAIL))
        );
    }
    if let (Server::Container(c), Ok((_, out, _))) = (&server, &code)
        && out.is_dir()
        && let Some(log) = container::save_log(c, out)
        && !quiet
    {
        errln!("nightly: the server's log is in {}", log.display());
    }
    drop(server);
    code.map(|(code, _, _)| code)
}

/// setup, the ramp recorded, the gate: the night's exit code, its results folder and the
/// ramp's exit code.
async fn night(
    a: &NightlyArgs,
    config: &dbio_core::Config,
    server: &Server,
) -> Result<(u8, PathBuf, u8), Failure> {
    let dsn = server.dsn();
    let store = a
        .store
        .clone()
        .unwrap_or_else(|| a.results.join("history.sqlite").display().to_string());
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let out = a.results.join(stamp);
    let config_args: Vec<String> = match &a.config {
        Some(c) => vec!["--config".into(), c.display().to_string()],
        None => Vec::new(),
    };
    // The night's folder is made here and holds only this night: the canary's folder, then
    // the ramp's files (so the ramp may write into a folder that is not empty).
    std::fs::create_dir_all(&a.results)
        .and_then(|()| std::fs::create_dir(&out))
        .map_err(|e| {
            Failure::new(
                2,
                format!("nightly: the night's folder {}: {e}", out.display()),
            )
        })?;
    if config.nightly.canary {
        canary(a, config, server, &store, &out).await;
    }
    let setup = dbio(["setup", "--dsn", &dsn, "--quiet"], &config_args).await;
    if setup != 0 {
        return Err(Failure::new(
            setup,
            "nightly: the data set could not be set up (see above)",
        ));
    }
    let mut ramp_args = config_args.clone();
    ramp_args.extend(["--store".to_string(), store.clone()]);
    if let Some(tag) = &a.tag {
        ramp_args.extend(["--tag".to_string(), tag.clone()]);
    }
    let ramp_code = dbio(
        [
            "ramp",
            "--dsn",
            &dsn,
            "--out",
            &out.display().to_string(),
            "--quiet",
            "--record",
            "--overwrite",
        ],
        &ramp_args,
    )
    .await;
    if crate::signals::interrupts().count() > 0 {
        return Err(Failure::new(
            1,
            format!(
                "nightly: interrupted; the ramp's files so far are in {} (not gated)",
                out.display()
            ),
        ));
    }
    if !out.join("ramp.json").is_file() {
        return Err(Failure::new(
            ramp_code.max(1),
            format!("nightly: the ramp wrote no ramp.json (exit {ramp_code})"),
        ));
    }
    // The ramp ran quietly; its warnings (page-cache reads, a checkpoint in the window, a
    // cap, ...) belong in the night's log all the same.
    for w in ramp_warnings(&out.join("ramp.json")) {
        errln!("nightly: warning: {w}");
    }
    let mut check_args = config_args;
    if let Some(label) = &config.run.label {
        check_args.extend(["--label".to_string(), label.clone()]);
    }
    let junit = out.join("junit.xml");
    let check = dbio(
        [
            "history",
            "check",
            "--store",
            &store,
            "--junit",
            &junit.display().to_string(),
        ],
        &check_args,
    )
    .await;
    errln!(
        "nightly: results in {}, recorded in {store} (history check exit {check})",
        out.display()
    );
    // A failed ramp fails the night even when the gate, which never passes a failed run,
    // found nothing else.
    let code = if ramp_code != 0 && check == 0 {
        ramp_code
    } else {
        check
    };
    Ok((code, out, ramp_code))
}

/// The platform canary: a short raw-device calibration of a file on the data's device,
/// recorded in the store as the platform series (`history check` labels a database change
/// that coincides with one of the canary `platform`). It never fails the night: a canary
/// that cannot run is said, and the night goes on without it.
async fn canary(
    a: &NightlyArgs,
    config: &dbio_core::Config,
    server: &Server,
    store: &str,
    out: &std::path::Path,
) {
    let n = &config.nightly;
    let folder = match &n.canary_path {
        Some(p) => Ok(p.clone()),
        None => match server {
            Server::Given(_) => Err(
                "the server --dsn names may be on another host, so its data's device is unknown here: \
                 set nightly.canary_path to a folder on that device (or nightly.canary: false)"
                    .to_string(),
            ),
            Server::Container(c) => c.data_mountpoint(),
            Server::Scratch(dir, _) => Ok(dir.clone()),
        },
    };
    let folder = match folder {
        Ok(f) => f,
        Err(why) => {
            errln!("nightly: warning: no platform canary tonight: {why}");
            return;
        }
    };
    let file = folder.join("dbio-canary.dat");
    // Only a file this night made is removed afterwards.
    let existed = std::fs::symlink_metadata(&file).is_ok();
    let levels: Vec<String> = n.canary_levels.iter().map(u32::to_string).collect();
    let mut args = vec![
        "--path".to_string(),
        file.display().to_string(),
        "--create".into(),
        "--size".into(),
        n.canary_size.to_string(),
        "--levels".into(),
        levels.join(","),
        "--duration".into(),
        n.canary_duration.to_string(),
        "--out".into(),
        out.join("canary").display().to_string(),
        "--quiet".into(),
        "--record".into(),
        "--store".into(),
        store.to_string(),
    ];
    if let Some(tag) = &a.tag {
        args.extend(["--tag".to_string(), tag.clone()]);
    }
    let code = dbio(["calibrate"], &args).await;
    if !existed && let Err(e) = std::fs::remove_file(&file) {
        errln!(
            "dbio: warning: the canary's file {} was not removed: {e}",
            file.display()
        );
    }
    if code != 0 {
        errln!(
            "nightly: warning: the platform canary on {} ended with exit {code} (see above): \
             tonight has no platform point",
            folder.display()
        );
    }
}

/// Every warning of a ramp.json, the ramp's and its steps' (each once), or none when it
/// cannot be read.
fn ramp_warnings(path: &std::path::Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let texts = |v: &serde_json::Value| -> Vec<String> {
        v["warnings"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|w| w.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut all = texts(&doc);
    for step in doc["steps"].as_array().into_iter().flatten() {
        for w in texts(step) {
            let w = format!("step {}: {w}", step["step"].as_str().unwrap_or("?"));
            if !all.contains(&w) {
                all.push(w);
            }
        }
    }
    all
}

/// Runs `dbio ARGS... EXTRA...` in this process and returns its exit code; its error is
/// printed as the command itself would print it.
async fn dbio<const N: usize>(args: [&str; N], extra: &[String]) -> u8 {
    let line = std::iter::once("dbio".to_string())
        .chain(args.iter().map(|s| s.to_string()))
        .chain(extra.iter().cloned());
    let cli = match <Cli as clap::Parser>::try_parse_from(line) {
        Ok(cli) => cli,
        Err(e) => {
            errln!("dbio: error: nightly: {e}");
            return 2;
        }
    };
    match Box::pin(super::dispatch(cli)).await {
        Ok(code) => code,
        Err(f) => {
            errln!("dbio: error: {}", f.message);
            f.code
        }
    }
}
