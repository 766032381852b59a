//! Before a run: hold the data set (`lock`), verify what is about to be measured (`verify`:
//! size, tablespace, key order and the reader's plan, from the marks, the catalog and a few
//! index probes, no table scan), VACUUM the tables a run with updates left changed
//! (`maintenance`), record the settings that matter and the figures the role may not read
//! (`rights`), warn where the numbers may mislead; then open every session, connected and
//! prepared, before the driver's clock starts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dbio_core::Config;
use dbio_core::config::{ReadPath, RedoStress};
use dbio_core::dataset::DataSetPlan;
use dbio_core::driver::SessionSpec;
use dbio_core::result::{DataSetInfo, Environment};
use dbio_core::workload::{SessionKind, session_seed};
use tokio::task::JoinSet;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::maintenance;
use crate::marker::{self, Ownership};
use crate::server::{ServerInfo, server_info};
use crate::session::{LoopCall, PgLoopSession, PgSession, SessionOptions};
use crate::sizing::judge_size;
use crate::sql;

/// What the run needs to know about the target before it starts.
pub struct Preflight {
    pub info: ServerInfo,
    pub environment: Environment,
    pub warnings: Vec<String>,
    /// What preflight did that does not weaken the figures (the routine VACUUM and
    /// CHECKPOINT after a run with writes), for the user's information.
    pub notes: Vec<String>,
    /// Where the data set's files live (tablespace location or data directory), when the
    /// role may read it.
    pub data_path: Option<std::path::PathBuf>,
    /// debug_io_direct includes `data` (PostgreSQL 16+): reads bypass the page cache.
    pub direct_io: bool,
    /// The run's hold on its data set (advisory locks, see `lock`), released when this
    /// preflight is dropped: keep it until the result is written. Held, never read.
    pub _lock: crate::lock::RunLock,
}

pub async fn preflight(
    target: &Target,
    config: &Config,
    specs: &[SessionSpec],
) -> Result<Preflight> {
    let client = target.connect("dbio-preflight").await?;
    let info = server_info(&client).await?;
    let plan = DataSetPlan::new(&config.data, info.block_size);
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    // Held from before the VACUUM until the result is written. The shards of one coordinated
    // run pass the same run.run_id (--run-id) and share the data set.
    let run_id = config
        .run
        .run_id
        .clone()
        .unwrap_or_else(crate::lock::fresh_run_id);
    let lock =
        crate::lock::for_run(target, &plan.schema_names(), &run_id, config.run.shard()).await?;
    verify_data_set(&client, &plan, config.run.vacuum, &mut warnings, &mut notes).await?;
    let used: Vec<String> = specs
        .iter()
        .map(|s| s.schema.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let verified = crate::verify::data_set(
        &client,
        &plan,
        &used,
        config.run.read_path,
        config.run.work_unit,
    )
    .await?;
    warnings.extend(verified.warnings.iter().cloned());

    let visible_free: i32 = client
        .query_one(sql::FREE_CONNECTIONS, &[])
        .await
        .map_err(|e| PgError::from_db("reading max_connections", &e))?
        .try_get(0)
        .map_err(|e| PgError::from_db("reading max_connections", &e))?;
    // Backends this role cannot see (no pg_read_all_stats) may hold slots: unknown, not free.
    let invisible: i32 = client
        .query_one(sql::INVISIBLE_BACKENDS, &[])
        .await
        .map_err(|e| PgError::from_db("counting the backends this role cannot see", &e))?
        .try_get(0)
        .map_err(|e| PgError::from_db("counting the backends this role cannot see", &e))?;
    let free = visible_free - invisible;
    // The sessions, plus the collector's and the sampler's connections.
    if specs.len() as i64 + 2 > free as i64 {
        let unknown = if invisible > 0 {
            format!(
                " ({invisible} backend(s) of other roles are hidden from role `{}` and counted as using a slot: \
                 GRANT pg_read_all_stats TO {} lets dbio see them)",
                target.user, target.user
            )
        } else {
            String::new()
        };
        return Err(PgError::Usage(format!(
            "run.readers + run.writers = {} sessions (+2 for the collector), but the server has {free} free connection slots{unknown}; \
             raise max_connections on the server or run fewer sessions",
            specs.len()
        )));
    }

    let names: Vec<String> = sql::SETTING_NAMES.iter().map(|s| s.to_string()).collect();
    let settings: BTreeMap<String, Option<String>> = client
        .query(sql::SETTINGS, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading the server's settings", &e))?
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, Option<String>>(1)))
        .collect();
    // The sessions turn track_io_timing on for themselves when the role may (superuser,
    // or on 15+ GRANT SET ON PARAMETER): only a role that may not is warned (seen: "the
    // database cannot time its reads" on runs that reported the latency dbio had it time).
    if !info.track_io_timing {
        let rights = crate::rights::RoleRights::read(&client, info.major()).await?;
        if rights.superuser || rights.set_track_io_timing == Some(true) {
            notes.push(
                "track_io_timing is off on the server; dbio's sessions turn it on for themselves (SET track_io_timing = on)"
                    .into(),
            );
        } else {
            warnings.push(format!(
                "track_io_timing is off and role `{}` may not turn it on: the database cannot time its reads; \
                 set track_io_timing = on on the server{}",
                target.user,
                if info.major() >= 15 {
                    format!(", or GRANT SET ON PARAMETER track_io_timing TO {}", target.user)
                } else {
                    String::new()
                }
            ));
        }
    }
    let direct_io = info.direct_io;
    // The server's RAM decides whether the page cache can hold the data set: read from the
    // server's /proc when the role may, else this host's when the server is proven local;
    // its memory cgroup's limit when that is lower (a container's cap).
    let ram = if direct_io {
        None
    } else {
        crate::host::database_host_ram(&client).await
    };
    warnings.extend(
        judge_size(
            plan.table_bytes(),
            info.shared_buffers_bytes,
            ram.as_ref(),
            config.collector.drop_caches,
        )
        .warnings,
    );
    // Where the tables really are, not where the configuration says.
    let data_path = data_path(&client, verified.tablespace(&used)).await?;
    let environment = Environment {
        dbio_version: env!("CARGO_PKG_VERSION").to_string(),
        client_host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        target: target.redacted(),
        pinned_server: None,
        server_version: info.version.clone(),
        server_version_num: info.version_num as i64,
        settings,
        data_set: DataSetInfo {
            schemas: plan.schemas,
            scale_blocks: plan.scale_blocks,
            block_size: plan.block_size,
            table_bytes: plan.table_bytes(),
            schemas_used: used,
            tables: verified.tables,
        },
        // Filled in once the sessions are connected.
        session_tls: None,
        read_path: Some(verified.read_path),
    };
    Ok(Preflight {
        info,
        environment,
        warnings,
        notes,
        data_path,
        direct_io,
        _lock: lock,
    })
}

/// The tablespace's location, or the data directory (pg_settings shows it only to roles
/// with pg_read_all_settings or superuser).
async fn data_path(
    client: &Client,
    tablespace: Option<&str>,
) -> Result<Option<std::path::PathBuf>> {
    let row = match tablespace {
        Some(ts) => client
            .query_opt(sql::TABLESPACE_LOCATION, &[&ts])
            .await
            .map_err(|e| PgError::from_db("reading the tablespace location", &e))?,
        None => client
            .query_opt(sql::DATA_DIRECTORY, &[])
            .await
            .map_err(|e| PgError::from_db("reading the data directory", &e))?,
    };
    Ok(row
        .and_then(|r| r.get::<_, Option<String>>(0))
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from))
}

/// Refuses a data set that `check` would reject on its marks or catalog (a usage error, exit
/// 2, naming the schema and the key to change); VACUUMs tables that changed since their last
/// VACUUM when `vacuum` is on, so every run starts from the same clean state.
async fn verify_data_set(
    client: &Client,
    plan: &DataSetPlan,
    vacuum: bool,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let mut vacuumed = false;
    let names = plan.schema_names();
    for (name, own) in marker::inspect_schemas(client, &names).await? {
        let sep = if own == Ownership::Absent { " " } else { ": " };
        let refuse = |p: String| {
            PgError::Usage(format!(
                "the data set is not fit to run against: schema {name}{sep}{p}"
            ))
        };
        let id = match marker::judge(&own, plan, &name) {
            Err(p) => return Err(refuse(p)),
            Ok((_, problems)) if !problems.is_empty() => return Err(refuse(problems.join("; "))),
            Ok((id, _)) => id,
        };
        if let Some(p) = marker::table_problem(marker::table(client, &name, Some(&id)).await?) {
            return Err(refuse(p));
        }
        let Some(state) = maintenance::table_state(client, &name).await? else {
            return Err(refuse(
                "table cf1 vanished during the check: run `dbio setup`".into(),
            ));
        };
        if !state.index_valid {
            return Err(PgError::Usage(format!(
                "the data set is not fit to run against: index {name}.{} is missing or invalid: rerun `dbio setup --force`",
                sql::INDEX
            )));
        }
        if state.changed_since_vacuum() {
            if vacuum {
                vacuumed |= crate::verify::vacuum_checked(client, &name, warnings, notes).await?;
            } else {
                warnings.push(format!(
                    "{name}.cf1 changed since its last VACUUM ({}) and run.vacuum is off: reads may write (hint bits, \
                     pruning) and autovacuum may run inside the window",
                    state.describe_change()
                ));
            }
        }
    }
    if vacuumed && let Some(warning) = maintenance::checkpoint(client).await? {
        warnings.push(warning);
    }
    Ok(())
}

/// Connects and prepares every session, all at once; the first failure stops the rest.
pub async fn open_sessions(
    target: &Target,
    specs: &[SessionSpec],
    redo_stress: RedoStress,
    read_path: ReadPath,
    major: i32,
    statement_timeout: std::time::Duration,
) -> Result<Vec<(SessionSpec, PgSession)>> {
    let opts = SessionOptions {
        heavy: redo_stress == RedoStress::Heavy,
        major,
        statement_timeout,
        read_path,
    };
    let target = target.clone();
    open_all(specs, move |spec| {
        PgSession::open(&target, &spec.name, &spec.schema, &opts)
    })
    .await
}

/// What the server engine's sessions loop over.
#[derive(Debug, Clone)]
pub struct LoopPlan {
    pub scale_blocks: u64,
    pub work_unit: u64,
    pub update_work_unit: u64,
    pub update_pct: u32,
    pub seed: u64,
    pub run_time: std::time::Duration,
}

/// Opens every session of `run.engine: server`, each with its loop procedure created.
pub async fn open_loop_sessions(
    target: &Target,
    specs: &[SessionSpec],
    redo_stress: RedoStress,
    read_path: ReadPath,
    major: i32,
    plan: &LoopPlan,
) -> Result<Vec<(SessionSpec, PgLoopSession)>> {
    let opts = SessionOptions {
        heavy: redo_stress == RedoStress::Heavy,
        major,
        statement_timeout: std::time::Duration::ZERO,
        read_path,
    };
    let target = target.clone();
    let plan = plan.clone();
    open_all(specs, move |spec| {
        let call = LoopCall {
            scale_blocks: plan.scale_blocks,
            work_unit: plan.work_unit,
            update_work_unit: plan.update_work_unit,
            update_pct: match spec.kind {
                SessionKind::Writer => 100,
                SessionKind::Reader => plan.update_pct,
            },
            seed: session_seed(plan.seed, spec.index),
            tag: spec.index.to_string(),
        };
        PgLoopSession::open(
            &target,
            &spec.name,
            &spec.schema,
            &opts,
            plan.run_time,
            call,
        )
    })
    .await
}

/// How many sessions are opened at once. All at once, a thousand sessions were a thousand
/// threads and as many simultaneous logons: thread starts, lock contention and page faults
/// were most of what a short run at 512 sessions cost the client (issue 34). 32 at a time
/// still overlap the round trips of a distant server's logons.
const OPENING_AT_ONCE: usize = 32;

/// Opens one session per spec on the blocking pool, [`OPENING_AT_ONCE`] at a time, and
/// returns them in spec order. The first failure stops the openers (the sessions already
/// open are closed), and so does the caller giving up (a Ctrl-C drops this future).
async fn open_all<T, F>(specs: &[SessionSpec], open: F) -> Result<Vec<(SessionSpec, T)>>
where
    T: Send + 'static,
    F: Fn(&SessionSpec) -> Result<T> + Send + Sync + 'static,
{
    /// Stops the openers when dropped: on return, and when the caller drops the future.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let open = Arc::new(open);
    let specs: Arc<[SessionSpec]> = specs.into();
    let next = Arc::new(AtomicUsize::new(0));
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let mut tasks = JoinSet::new();
    for _ in 0..specs.len().min(OPENING_AT_ONCE) {
        let (open, specs, next, stop) = (
            Arc::clone(&open),
            Arc::clone(&specs),
            Arc::clone(&next),
            Arc::clone(&stop.0),
        );
        tasks.spawn_blocking(move || {
            let mut opened = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    break;
                };
                match open(spec) {
                    Ok(s) => opened.push((spec.clone(), s)),
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok::<_, PgError>(opened)
        });
    }
    let mut out = Vec::with_capacity(specs.len());
    while let Some(joined) = tasks.join_next().await {
        let opened = joined.map_err(|e| PgError::Failed {
            context: "opening sessions".into(),
            message: format!("a session task ended abnormally: {e}"),
            hint: None,
        })??;
        out.extend(opened);
    }
    drop(stop);
    out.sort_by_key(|(s, _)| s.index);
    Ok(out)
}
