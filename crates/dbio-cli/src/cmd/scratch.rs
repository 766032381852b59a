//! `dbio scratch`: a throwaway local PostgreSQL cluster.

use dbio_core::units::format_bytes;
use dbio_postgres::{ScratchCluster, ScratchOptions};

use super::DEFAULT_BLOCK_SIZE;
use crate::Failure;
use crate::args::{ScratchAction, ScratchArgs};

pub(super) fn scratch_options(a: &ScratchArgs) -> Result<ScratchOptions, Failure> {
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
    if a.direct_io {
        let (k, v) = ScratchOptions::DIRECT_IO;
        settings.retain(|(name, _)| name != k);
        settings.push((k.to_string(), v.to_string()));
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

pub(super) fn describe(c: &ScratchCluster) -> String {
    format!(
        "PostgreSQL {} on 127.0.0.1:{} (shared_buffers {}, track_io_timing on{})\n  data: {}\n  log:  {}\n  dsn:  {}",
        c.state.bin.version,
        c.state.port,
        format_bytes(c.state.shared_buffers_bytes),
        if c.direct_io() {
            ", debug_io_direct=data: reads bypass the page cache"
        } else {
            ""
        },
        c.data_dir().display(),
        c.log_file().display(),
        c.dsn()
    )
}

pub(super) fn scratch_cmd(action: ScratchAction) -> Result<u8, Failure> {
    match action {
        ScratchAction::Start { scratch: a } => {
            let c = ScratchCluster::start(&scratch_options(&a)?)?;
            outln!("scratch cluster running: {}", describe(&c));
            outln!("stop it with: dbio scratch stop --dir {}", a.dir.display());
            outln!(
                "point psql and pgbench at it with: eval \"$(dbio scratch env --dir {})\"",
                a.dir.display()
            );
            Ok(0)
        }
        ScratchAction::Env { dir } => crate::scratch_target::env_cmd(&dir),
        ScratchAction::Stop { dir } => {
            let c = ScratchCluster::stop(&dir)?;
            outln!("scratch cluster in {} stopped", c.dir.display());
            Ok(0)
        }
        ScratchAction::Status { dir, dsn_only } => {
            let (c, running) = ScratchCluster::status(&dir)?;
            if dsn_only {
                if running {
                    outln!("{}", c.dsn());
                    return Ok(0);
                }
                errln!(
                    "dbio: scratch cluster in {} is not running",
                    c.dir.display()
                );
                return Ok(1);
            }
            if running {
                outln!("running: {}", describe(&c));
            } else {
                outln!(
                    "stopped: cluster in {} (start it with: dbio scratch start --dir {})",
                    c.dir.display(),
                    dir.display()
                );
            }
            Ok(0)
        }
    }
}
