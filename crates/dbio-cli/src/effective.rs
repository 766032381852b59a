//! The effective configuration of a command, built in one place per command so that what
//! `dbio config` shows is what the command runs with. Precedence per setting: flag >
//! environment > config file > default. The environment only concerns the connection (the
//! PG* variables, merged per parameter by `Target::resolve`).

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use dbio_core::Config;
use dbio_core::config::Database;
use serde_json::Value;

use crate::Failure;
use dbio_core::history::record::resolve_tag;

use crate::args::{
    CapacityArgs, Cli, Command, CommonArgs, DataArgs, RampArgs, RunArgs, SessionArgs,
};
use crate::cmd::history::RecordArgs;

/// The file's configuration with the common and data-set flags applied, validated.
pub fn base_config(common: &CommonArgs, data: &DataArgs) -> Result<Config, Failure> {
    let mut config = Config::load(common.config.as_deref())?;
    common.apply(&mut config);
    data.apply(&mut config);
    config.validate()?;
    Ok(config)
}

/// `dbio run`'s configuration.
pub fn run_config(
    common: &CommonArgs,
    data: &DataArgs,
    sessions: &SessionArgs,
    run: &RunArgs,
) -> Result<Config, Failure> {
    let mut config = base_config(common, data)?;
    sessions.apply(&mut config);
    run.apply(&mut config);
    config.validate()?;
    Ok(config)
}

/// `dbio ramp`'s configuration. A window given by flag is every step's window, whatever
/// the file's `ramp.run_time` says.
pub fn ramp_config(
    common: &CommonArgs,
    data: &DataArgs,
    ramp: &RampArgs,
    run: &RunArgs,
) -> Result<Config, Failure> {
    let mut config = base_config(common, data)?;
    ramp.apply(&mut config);
    run.apply(&mut config);
    if run.run_time.is_some() {
        config.ramp.run_time = run.run_time;
    } else if run.work_loop.is_some() {
        config.ramp.run_time = None;
    }
    config.validate()?;
    Ok(config)
}

/// `dbio capacity`'s configuration: a ramp's, with the search's keys. A window given by flag
/// is every step's window, as for a ramp.
pub fn capacity_config(
    common: &CommonArgs,
    data: &DataArgs,
    capacity: &CapacityArgs,
    run: &RunArgs,
) -> Result<Config, Failure> {
    let mut config = base_config(common, data)?;
    capacity.apply(&mut config);
    run.apply(&mut config);
    if run.run_time.is_some() {
        config.ramp.run_time = run.run_time;
    } else if run.work_loop.is_some() {
        config.ramp.run_time = None;
    }
    config.validate()?;
    Ok(config)
}

/// Where a setting's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(String),
    Environment(String),
    File,
    Default,
    /// The scratch cluster running in the default folder: the target of a command that names
    /// none.
    Scratch,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(name) => write!(f, "flag {name}"),
            Source::Environment(vars) => write!(f, "environment {vars}"),
            Source::File => f.write_str("file"),
            Source::Default => f.write_str("default"),
            Source::Scratch => write!(
                f,
                "the scratch cluster running in {} (nothing else names a target)",
                dbio_postgres::ScratchCluster::DEFAULT_DIR
            ),
        }
    }
}

/// Every leaf of a JSON value as (dotted key, value).
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&key, child, out);
            }
        }
        _ => out.push((prefix.to_string(), v.clone())),
    }
}

fn lookup<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(v, |v, part| v.get(part))
}

/// The config key a flag overrides, as its help names it (`[config: run.run_time; ...]`).
fn config_key_of(help: &str) -> Option<String> {
    let rest = &help[help.find("[config: ")? + "[config: ".len()..];
    let end = rest.find([';', ']', ' ']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

/// (config key, flag) of every flag given on the command line of this subcommand.
fn flags_given(sub: &clap::Command, m: &ArgMatches) -> Vec<(String, String)> {
    sub.get_arguments()
        .filter(|a| {
            let id = a.get_id().as_str();
            m.try_contains_id(id).unwrap_or(false)
                && m.value_source(id) == Some(ValueSource::CommandLine)
        })
        .filter_map(|a| {
            let help = a.get_long_help().or(a.get_help())?.to_string();
            let flag = a
                .get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| a.get_id().to_string());
            Some((config_key_of(&help)?, flag))
        })
        .collect()
}

/// The PG* variables set in the environment (names only: never a password's value).
fn pg_environment() -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            (k.starts_with("PG") && !v.is_empty()).then_some(k)
        })
        .collect();
    vars.sort();
    vars
}

/// The configuration a command line would run with, before and after its flags.
struct Layers {
    file: Option<PathBuf>,
    before_flags: Config,
    effective: Config,
    flags: Vec<(String, String)>,
    /// `--dsn`, kept apart from the config (it merges with PG* per parameter).
    dsn: Option<String>,
    /// The command's own settings that are no config key (`--record`, `--drop-dependents`).
    command_only: Vec<Setting>,
}

/// A flag of the command line that is no config key, with its source: the command line, the
/// variable clap read it from, or its default.
fn command_setting(m: &ArgMatches, id: &str, key: &str, value: Value, env: &str) -> Setting {
    let source = match m.value_source(id) {
        Some(ValueSource::CommandLine) => Source::Flag(format!("--{}", id.replace('_', "-"))),
        Some(ValueSource::EnvVariable) => Source::Environment(env.to_string()),
        _ => Source::Default,
    };
    (key.to_string(), value, source)
}

/// `--record`, `--store` and `--tag` of run and ramp as the run would use them.
fn record_settings(m: &ArgMatches, r: &RecordArgs) -> Vec<Setting> {
    let tag = match resolve_tag(r.tag.as_deref(), |k| std::env::var(k).ok()) {
        Some((t, from)) if from != "--tag" => (
            "record.tag".to_string(),
            Value::String(t),
            Source::Environment(from),
        ),
        Some((t, _)) => command_setting(m, "tag", "record.tag", Value::String(t), ""),
        None => ("record.tag".to_string(), Value::Null, Source::Default),
    };
    vec![
        command_setting(m, "record", "record", Value::Bool(r.record), ""),
        command_setting(
            m,
            "store",
            "record.store",
            Value::String(
                r.store
                    .as_deref()
                    .map(redact_store)
                    .unwrap_or_else(|| dbio_history::DEFAULT_STORE.to_string()),
            ),
            "DBIO_HISTORY_STORE",
        ),
        tag,
    ]
}

/// A store given as a postgresql:// URL, without its password.
fn redact_store(spec: &str) -> String {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        redact(spec)
    } else {
        spec.to_string()
    }
}

fn layers(command: &[String], file: Option<PathBuf>) -> Result<Layers, Failure> {
    if command.is_empty() {
        let c = Config::load(file.as_deref())?;
        c.validate()?;
        return Ok(Layers {
            file,
            before_flags: c.clone(),
            effective: c,
            flags: Vec::new(),
            dsn: None,
            command_only: Vec::new(),
        });
    }
    let argv = std::iter::once("dbio".to_string()).chain(command.iter().cloned());
    let matches = Cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| Failure::new(2, format!("dbio config {}: {e}", command.join(" "))))?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| Failure::new(2, e.to_string()))?;
    let (name, sub_m) = matches.subcommand().ok_or_else(|| {
        Failure::new(
            2,
            "dbio config: name a command, e.g. `dbio config ramp -c my.yaml --run-time 2s`",
        )
    })?;
    let root = Cli::command();
    let sub = root
        .find_subcommand(name)
        .ok_or_else(|| Failure::new(2, format!("no command `{name}`")))?;
    let flags = flags_given(sub, sub_m);
    let with_file = |mut common: CommonArgs| {
        if common.config.is_none() {
            common.config = file.clone();
        }
        common
    };
    let (file, before_flags, effective, dsn, command_only) = match cli.command {
        Command::Run {
            common,
            data,
            sessions,
            run,
            record,
        } => {
            let common = with_file(common);
            let before = Config::load(common.config.as_deref())?;
            let c = run_config(&common, &data, &sessions, &run)?;
            let extra = record_settings(sub_m, &record);
            (
                common.config.clone(),
                before,
                c,
                common.one_dsn().map(str::to_string),
                extra,
            )
        }
        Command::Ramp {
            common,
            data,
            ramp,
            run,
            record,
        } => {
            let common = with_file(common);
            let before = Config::load(common.config.as_deref())?;
            let c = ramp_config(&common, &data, &ramp, &run)?;
            let extra = record_settings(sub_m, &record);
            (
                common.config.clone(),
                before,
                c,
                common.one_dsn().map(str::to_string),
                extra,
            )
        }
        Command::Capacity {
            common,
            data,
            capacity,
            run,
            record,
        } => {
            let common = with_file(common);
            let before = Config::load(common.config.as_deref())?;
            let c = capacity_config(&common, &data, &capacity, &run)?;
            let extra = record_settings(sub_m, &record);
            (
                common.config.clone(),
                before,
                c,
                common.one_dsn().map(str::to_string),
                extra,
            )
        }
        Command::Setup {
            common,
            data,
            load,
            force,
            drop_dependents,
        } => {
            let common = with_file(common);
            let before = Config::load(common.config.as_deref())?;
            let mut c = base_config(&common, &data)?;
            load.apply(&mut c);
            c.validate()?;
            let extra = vec![
                command_setting(sub_m, "force", "setup.force", Value::Bool(force), ""),
                command_setting(
                    sub_m,
                    "drop_dependents",
                    "setup.drop_dependents",
                    Value::Bool(drop_dependents),
                    "",
                ),
            ];
            (
                common.config.clone(),
                before,
                c,
                common.one_dsn().map(str::to_string),
                extra,
            )
        }
        Command::Regress {
            config,
            max_iops_drop,
            max_latency_rise,
            accept_difference,
            ..
        } => {
            let config = config.or_else(|| file.clone());
            let before = Config::load(config.as_deref())?;
            let mut c = before.clone();
            if let Some(v) = max_iops_drop {
                c.regress.max_iops_drop_pct = v;
            }
            if let Some(v) = max_latency_rise {
                c.regress.max_latency_rise_pct = v;
            }
            c.validate()?;
            let accepted = accept_difference.into_iter().map(Value::String).collect();
            let extra = vec![command_setting(
                sub_m,
                "accept_difference",
                "regress.accept_difference",
                Value::Array(accepted),
                "",
            )];
            (config, before, c, None, extra)
        }
        Command::Check { common, data } => {
            let common = with_file(common);
            let before = Config::load(common.config.as_deref())?;
            let c = base_config(&common, &data)?;
            (
                common.config.clone(),
                before,
                c,
                common.one_dsn().map(str::to_string),
                Vec::new(),
            )
        }
        _ => {
            return Err(Failure::new(
                2,
                format!(
                    "dbio config shows the settings of setup, check, run, ramp, capacity and regress; `{name}` takes its settings from its own flags"
                ),
            ));
        }
    };
    Ok(Layers {
        file,
        before_flags,
        effective,
        flags,
        dsn,
        command_only,
    })
}

/// A setting's dotted key, effective value and source.
pub type Setting = (String, Value, Source);

/// Each effective setting with its source, in the config's key order.
pub fn with_sources(
    command: &[String],
    file: Option<PathBuf>,
) -> Result<(Config, Vec<Setting>), Failure> {
    let l = layers(command, file)?;
    let file_raw: Value = match &l.file {
        Some(p) => Config::keys_in_file(p)?,
        None => Value::Null,
    };
    let to_value = |c: &Config| serde_json::to_value(c).unwrap_or(Value::Null);
    let (before, after) = (to_value(&l.before_flags), to_value(&l.effective));
    let mut out = Vec::new();
    let mut all = Vec::new();
    leaves("", &after, &mut all);
    let pg = pg_environment();
    let oracle = l.effective.engine == Database::Oracle;
    for (key, mut value) in all {
        if oracle && key == "target.dsn" {
            out.push(oracle_target(&l, value));
            continue;
        }
        if key.starts_with("target.dsns") {
            if let Value::String(dsn) = &value {
                value = Value::String(redact(dsn));
            } else if let Value::Array(dsns) = &value {
                value = Value::Array(
                    dsns.iter()
                        .map(|d| Value::String(redact(d.as_str().unwrap_or_default())))
                        .collect(),
                );
            }
        }
        if key == "target.dsn" {
            if let Some(flag) = &l.dsn {
                value = Value::String(redact(flag));
            } else if let Value::String(dsn) = &value {
                value = Value::String(redact(dsn));
            }
        }
        let named = l.flags.iter().find(|(k, _)| *k == key).map(|(_, f)| f);
        let source = if let Some(flag) = named {
            Source::Flag(flag.clone())
        } else if lookup(&before, &key) != Some(&value) {
            // Changed by a flag that names another key: --run-time is also a ramp's step
            // window (ramp.run_time) and clears run.work_loop.
            let leaf = key.rsplit('.').next().unwrap_or(&key);
            let flags: Vec<&str> = l.flags.iter().map(|(_, f)| f.as_str()).collect();
            Source::Flag(
                l.flags
                    .iter()
                    .find(|(k, _)| k.rsplit('.').next() == Some(leaf))
                    .map(|(_, f)| f.clone())
                    .unwrap_or_else(|| flags.join(" ")),
            )
        } else if key == "target.dsn"
            && value.is_null()
            && l.effective.target.dsns.is_empty()
            && let Some(dsn) = crate::scratch_target::default_scratch_dsn()
        {
            // What the command would connect to, as its target line would say.
            value = Value::String(redact(&dsn));
            Source::Scratch
        } else if key == "target.dsn" && !pg.is_empty() {
            Source::Environment(pg.join(", "))
        } else if lookup(&file_raw, &key).is_some() {
            Source::File
        } else {
            Source::Default
        };
        out.push((key, value, source));
    }
    out.extend(l.command_only);
    Ok((l.effective, out))
}

/// engine: oracle's target.dsn as `admin_target` resolves it (--dsn > DBIO_ORACLE_DSN >
/// target.dsn), shown as `user@connect`, never the password; neither the PG* environment nor
/// a scratch cluster is an Oracle target.
fn oracle_target(l: &Layers, file_value: Value) -> Setting {
    let env = std::env::var("DBIO_ORACLE_DSN")
        .ok()
        .filter(|v| !v.is_empty());
    let (value, source) = match (&l.dsn, env, file_value) {
        (Some(flag), _, _) => (
            Value::String(dbio_oracle::redact(flag)),
            Source::Flag("--dsn".into()),
        ),
        (None, Some(e), _) => (
            Value::String(dbio_oracle::redact(&e)),
            Source::Environment("DBIO_ORACLE_DSN".into()),
        ),
        (None, None, Value::String(d)) => (Value::String(dbio_oracle::redact(&d)), Source::File),
        (None, None, v) => (v, Source::Default),
    };
    ("target.dsn".into(), value, source)
}

/// A DSN without its password.
fn redact(dsn: &str) -> String {
    dbio_postgres::Target::from_dsn(dsn)
        .map(|t| t.redacted())
        .unwrap_or_else(|_| "(not a valid DSN)".into())
}

/// The `dbio config` table: key, value, source.
pub fn render_sources(rows: &[Setting]) -> String {
    let width = rows.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    let mut o = String::new();
    for (key, value, source) in rows {
        let v = match value {
            Value::String(s) => s.clone(),
            Value::Null => "-".into(),
            other => other.to_string(),
        };
        o.push_str(&format!("{key:<width$}  {v:<24}  {source}\n"));
    }
    o.push_str(
        "precedence per setting: flag > environment > file > default; the environment (PG*) \
         and --dsn set the connection parameter by parameter over target.dsn\n",
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_key_is_read_from_the_flag_help() {
        assert_eq!(
            config_key_of("Length of the window [config: run.run_time; default 30s]").as_deref(),
            Some("run.run_time")
        );
        assert_eq!(
            config_key_of("No VACUUM [config: run.vacuum = false]").as_deref(),
            Some("run.vacuum")
        );
        assert_eq!(config_key_of("Really drop."), None);
    }

    #[test]
    fn flags_that_are_no_config_key_are_listed_with_their_source() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let row = |rows: &[Setting], key: &str| {
            rows.iter()
                .find(|(k, _, _)| k == key)
                .map(|(_, v, s)| (v.clone(), s.clone()))
                .unwrap_or_else(|| panic!("no row {key}"))
        };
        let cmd = args(&[
            "run",
            "--record",
            "--store",
            "postgresql://u:secret@db.example/results",
            "--tag",
            "v1",
        ]);
        let (_, rows) = with_sources(&cmd, None).unwrap();
        assert_eq!(
            row(&rows, "record"),
            (Value::Bool(true), Source::Flag("--record".into()))
        );
        let (store, source) = row(&rows, "record.store");
        assert!(!store.to_string().contains("secret"), "{store}");
        assert_eq!(source, Source::Flag("--store".into()));
        assert_eq!(
            row(&rows, "record.tag"),
            (Value::String("v1".into()), Source::Flag("--tag".into()))
        );
        let (_, rows) = with_sources(&args(&["setup", "--drop-dependents"]), None).unwrap();
        assert_eq!(
            row(&rows, "setup.drop_dependents"),
            (Value::Bool(true), Source::Flag("--drop-dependents".into()))
        );
        assert_eq!(
            row(&rows, "setup.force"),
            (Value::Bool(false), Source::Default)
        );
        let cmd = args(&[
            "regress",
            "--baseline",
            "a.json",
            "b.json",
            "--accept-difference",
            "work_unit",
            "--max-latency-rise",
            "off",
        ]);
        let (_, rows) = with_sources(&cmd, None).unwrap();
        assert_eq!(
            row(&rows, "regress.accept_difference"),
            (
                serde_json::json!(["work_unit"]),
                Source::Flag("--accept-difference".into())
            )
        );
        assert_eq!(
            row(&rows, "regress.max_latency_rise_pct").1,
            Source::Flag("--max-latency-rise".into())
        );
    }

    #[test]
    fn every_flag_that_names_a_key_names_a_real_one() {
        // Keys a default config leaves out (empty lists, shard 0) set, so they are seen.
        let mut d = Config::default();
        d.target.dsns = vec!["host=a".into(), "host=b".into()];
        d.target.readers = vec![1, 1];
        d.target.writers = vec![0, 0];
        d.run.collector_shard = 1;
        d.run.steady = dbio_core::config::SteadyRule::parse("iops_slope<=2%:10s").ok();
        d.run.precondition = d.run.steady;
        d.run.rate = dbio_core::config::Rate::parse("100/s").ok();
        let defaults = serde_json::to_value(d).unwrap();
        for sub in Cli::command().get_subcommands() {
            for a in sub.get_arguments() {
                let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
                if let Some(key) = help.as_deref().and_then(config_key_of) {
                    assert!(
                        lookup(&defaults, &key).is_some(),
                        "{} --{}: [config: {key}] is no config key",
                        sub.get_name(),
                        a.get_id()
                    );
                }
            }
        }
    }

    // Regression: `dbio config` showed an Oracle DSN as "(not a valid DSN)".
    #[test]
    fn an_oracle_target_is_shown_without_its_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("o.yaml");
        std::fs::write(
            &file,
            "engine: oracle\ntarget:\n  dsn: \"system/secret@//db:1521/ORCLPDB1\"\n",
        )
        .unwrap();
        let row = |rows: &[Setting]| {
            rows.iter()
                .find(|(k, _, _)| k == "target.dsn")
                .map(|(_, v, s)| (v.clone(), s.clone()))
                .unwrap()
        };
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (_, rows) = with_sources(
            &args(&["check", "--dsn", "bench/pw@//other:1521/SALES"]),
            Some(file.clone()),
        )
        .unwrap();
        assert_eq!(
            row(&rows),
            (
                Value::String("bench@//other:1521/SALES".into()),
                Source::Flag("--dsn".into())
            )
        );
        if std::env::var_os("DBIO_ORACLE_DSN").is_none() {
            let (_, rows) = with_sources(&args(&["check"]), Some(file)).unwrap();
            assert_eq!(
                row(&rows),
                (
                    Value::String("system@//db:1521/ORCLPDB1".into()),
                    Source::File
                )
            );
        }
        let table = render_sources(&rows);
        assert!(
            !table.contains("secret") && !table.contains("not a valid DSN"),
            "{table}"
        );
    }
}
