//! The target of a command given none: a scratch cluster running in the default folder
//! (`.dbio/scratch`, as `dbio scratch start` makes it) rather than libpq's defaults, which on
//! a Debian host are the system PostgreSQL on localhost:5432, a server the user did not mean
//! and whose roles do not include the scratch superuser. `dbio scratch env` prints the same
//! target as PG* variables for psql and pgbench.
//!
//! "Given a target" means any of: `--dsn`, `target.dsn` in the config file, or a PG*
//! variable that says where the server is (PGHOST, PGHOSTADDR, PGPORT, PGSERVICE). The other
//! PG* variables (PGUSER, PGSSLMODE, ...) still apply, parameter by parameter, over the
//! scratch cluster's DSN, as they would over a target.dsn.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use dbio_core::Config;
use dbio_postgres::{ScratchCluster, Target, env_params};

use crate::Failure;
use crate::args::CommonArgs;

/// The PG* variables that name where the server is (libpq: host, hostaddr, port, service).
const WHERE_VARIABLES: [&str; 4] = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE"];

/// `-q`: the target line is not printed (set once from the command line).
static QUIET: AtomicBool = AtomicBool::new(false);

pub(crate) fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Where a command's target came from, for the line printed before anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    /// The scratch cluster running in the default folder.
    Scratch { port: u16, version: String },
    /// `--dsn`, target.dsn and/or the named PG* variables.
    Given(Vec<String>),
    /// Nothing given and no scratch cluster running: libpq's defaults.
    Defaults { scratch_note: &'static str },
}

/// The PostgreSQL connection target: flag > PG* environment > file > the running default
/// scratch cluster > libpq defaults. Prints `target: ...` on stderr (not under `-q`).
pub(crate) fn resolve(config: &Config, common: &CommonArgs) -> Result<Target, Failure> {
    if !config.target.dsns.is_empty() {
        return Err(Failure::new(
            2,
            format!(
                "{} targets given (--dsn repeated or target.dsns): only run and ramp drive several targets; \
                 give this command one --dsn and run it for each target",
                config.target.dsns.len()
            ),
        ));
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (origin, scratch) = choose(
        !common.dsn.is_empty(),
        config.target.dsn.is_some(),
        &WHERE_VARIABLES
            .iter()
            .filter(|k| env(k).is_some())
            .map(|k| k.to_string())
            .collect::<Vec<_>>(),
        || running_default(Path::new(ScratchCluster::DEFAULT_DIR)),
    );
    let scratch_dsn = scratch.as_ref().map(ScratchCluster::dsn);
    let target = Target::resolve(
        scratch_dsn.as_deref().or(config.target.dsn.as_deref()),
        env_params()?,
        common.one_dsn(),
        config.target.connect_timeout.0,
    )?;
    if !QUIET.load(Ordering::Relaxed) {
        errln!("{}", target_line(&origin, &target));
    }
    Ok(target)
}

/// The targets of a run or ramp: each of `target.dsns` (from --dsn repeated or the file),
/// complete in itself (PG* variables fill only what it leaves out), with a target line each;
/// else the one target `resolve` picks.
pub(crate) fn resolve_all(config: &Config, common: &CommonArgs) -> Result<Vec<Target>, Failure> {
    let dsns = &config.target.dsns;
    if dsns.is_empty() {
        return Ok(vec![resolve(config, common)?]);
    }
    let env = env_params()?;
    let from = if common.dsn.len() > 1 {
        "--dsn"
    } else {
        "target.dsns"
    };
    let mut targets = Vec::new();
    for (i, dsn) in dsns.iter().enumerate() {
        let target = Target::resolve(
            None,
            env.clone(),
            Some(dsn),
            config.target.connect_timeout.0,
        )
        .map_err(|e| {
            Failure::new(
                2,
                format!("target {} of {} ({from}): {e}", i + 1, dsns.len()),
            )
        })?;
        if let Some(k) = targets
            .iter()
            .position(|t: &Target| t.redacted() == target.redacted())
        {
            return Err(Failure::new(
                2,
                format!(
                    "targets {} and {} are the same ({target}): a target given twice would count its server twice; \
                     give each target once (more sessions on it: --target-readers)",
                    k + 1,
                    i + 1
                ),
            ));
        }
        if !QUIET.load(Ordering::Relaxed) {
            errln!("target {}/{}: {target} (from {from})", i + 1, dsns.len());
        }
        targets.push(target);
    }
    Ok(targets)
}

/// The DSN of the scratch cluster running in the default folder when it would be the target
/// of a command given none (no PGHOST, PGHOSTADDR, PGPORT or PGSERVICE; the caller checks
/// --dsn and the file), for `dbio config`.
pub(crate) fn default_scratch_dsn() -> Option<String> {
    let named = WHERE_VARIABLES
        .iter()
        .any(|k| std::env::var(k).is_ok_and(|v| !v.is_empty()));
    if named {
        return None;
    }
    running_default(Path::new(ScratchCluster::DEFAULT_DIR))
        .ok()
        .flatten()
        .map(|c| c.dsn())
}

/// Decides the origin; `scratch` is asked only when nothing names a target.
fn choose(
    flag: bool,
    file: bool,
    where_vars: &[String],
    scratch: impl FnOnce() -> Result<Option<ScratchCluster>, &'static str>,
) -> (Origin, Option<ScratchCluster>) {
    if flag || file || !where_vars.is_empty() {
        let mut from = Vec::new();
        if flag {
            from.push("--dsn".to_string());
        }
        from.extend(where_vars.iter().cloned());
        if file {
            from.push("target.dsn".to_string());
        }
        return (Origin::Given(from), None);
    }
    match scratch() {
        Ok(Some(c)) => (
            Origin::Scratch {
                port: c.state.port,
                version: c.state.bin.version.clone(),
            },
            Some(c),
        ),
        Ok(None) => (
            Origin::Defaults {
                scratch_note: "no scratch cluster in .dbio/scratch",
            },
            None,
        ),
        Err(note) => (Origin::Defaults { scratch_note: note }, None),
    }
}

/// The cluster in `dir` when its server runs; why not otherwise (a folder that is not a
/// scratch folder is left alone: it is not ours to start or judge).
fn running_default(dir: &Path) -> Result<Option<ScratchCluster>, &'static str> {
    if !dir.join("scratch.json").is_file() {
        return Ok(None);
    }
    match ScratchCluster::status(dir) {
        Ok((c, true)) => Ok(Some(c)),
        Ok((_, false)) => Err("the scratch cluster in .dbio/scratch is stopped"),
        Err(_) => Err(".dbio/scratch is not a readable scratch cluster"),
    }
}

fn target_line(origin: &Origin, target: &Target) -> String {
    match origin {
        Origin::Scratch { port, version } => format!(
            "target: scratch cluster {} (port {port}, PostgreSQL {version}); --dsn or PGHOST/PGPORT to choose another",
            ScratchCluster::DEFAULT_DIR
        ),
        Origin::Given(from) => format!("target: {target} (from {})", from.join(", ")),
        Origin::Defaults { scratch_note } => format!(
            "target: {target} (libpq defaults: no --dsn, PGHOST/PGPORT or target.dsn, and {scratch_note}; `dbio scratch start` makes one)"
        ),
    }
}

/// `dbio scratch env`: the PG* exports of the running cluster in `dir`.
pub(crate) fn env_cmd(dir: &Path) -> Result<u8, Failure> {
    let (c, running) = ScratchCluster::status(dir)?;
    if !running {
        return Err(Failure::new(
            1,
            format!(
                "the scratch cluster in {} is not running; start it with `dbio scratch start --dir {}`",
                c.dir.display(),
                dir.display()
            ),
        ));
    }
    out!("{}", c.env_exports());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> Result<Option<ScratchCluster>, &'static str> {
        panic!("the scratch folder must not be consulted when a target is given")
    }

    #[test]
    fn a_given_target_never_consults_the_scratch_folder() {
        let (o, c) = choose(true, false, &[], never);
        assert_eq!(o, Origin::Given(vec!["--dsn".into()]));
        assert!(c.is_none());
        let (o, _) = choose(false, true, &["PGPORT".into()], never);
        assert_eq!(o, Origin::Given(vec!["PGPORT".into(), "target.dsn".into()]));
    }

    #[test]
    fn nothing_given_and_no_scratch_is_libpq_defaults_with_the_reason() {
        let (o, _) = choose(false, false, &[], || Ok(None));
        let t = Target::from_dsn("host=localhost port=5432 user=postgres").unwrap();
        let line = target_line(&o, &t);
        assert!(line.contains("libpq defaults"), "{line}");
        assert!(line.contains("dbio scratch start"), "{line}");
        let (o, _) = choose(false, false, &[], || Err("it is stopped"));
        assert!(target_line(&o, &t).contains("it is stopped"));
    }
}
