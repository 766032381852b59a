//! `engine: oracle`: setup, check, run and teardown through dbio-oracle. The target is
//! `user@connect_identifier` (--dsn, DBIO_ORACLE_DSN or target.dsn), a user allowed to create
//! users and read the V$ views; its password comes from the target or DBIO_ORACLE_PASSWORD.

use dbio_core::Config;
use dbio_oracle::{ConnectString, OracleError};

use crate::Failure;

/// The admin target: flag > DBIO_ORACLE_DSN > target.dsn.
pub fn admin_target(config: &Config, flag: Option<&str>) -> Result<ConnectString, Failure> {
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    let dsn = flag
        .map(str::to_string)
        .or_else(|| env("DBIO_ORACLE_DSN"))
        .or_else(|| config.target.dsn.clone())
        .ok_or_else(|| {
            Failure::new(
                2,
                "engine: oracle needs a target: --dsn user@//host:port/service, DBIO_ORACLE_DSN, or target.dsn",
            )
        })?;
    Ok(ConnectString::parse(&dsn, env("DBIO_ORACLE_PASSWORD"))?)
}

/// Runs blocking Oracle work off the async runtime's threads.
#[cfg(feature = "oracle")]
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OracleError> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(Failure::from),
        Err(e) => Err(Failure::new(
            1,
            format!("an Oracle task ended abnormally: {e}"),
        )),
    }
}

#[cfg(feature = "oracle")]
mod enabled {
    use std::sync::Mutex;

    use dbio_core::config::{RedoStress, RunEngine};
    use dbio_core::dataset::DataSetPlan;
    use dbio_core::driver::{drive, session_specs};
    use dbio_core::result::{DataSetInfo, Environment, RunContext, RunResult};
    use dbio_core::workload::Workload;
    use dbio_oracle::client::{self, ServerFacts, Timeouts};
    use dbio_oracle::{loader, metrics, sql};

    use super::*;
    use crate::cmd::output::{RunOutput, drive_config, progress_line, publish, result_dir};

    /// target.connect_timeout for every connection; target.statement_timeout as the measured
    /// sessions' call timeout.
    fn timeouts(config: &Config) -> Timeouts {
        let call = config.target.statement_timeout.0;
        Timeouts {
            connect: config.target.connect_timeout.0,
            call: (!call.is_zero()).then_some(call),
        }
    }

    /// The server's facts (CDB$ROOT refused, the tablespace and its block size) and the plan
    /// in that tablespace's blocks.
    async fn facts(
        config: &Config,
        admin: &ConnectString,
    ) -> Result<(ServerFacts, DataSetPlan), Failure> {
        let (a, ts, t) = (
            admin.clone(),
            config.data.tablespace.clone(),
            timeouts(config),
        );
        let facts = blocking(move || client::preflight(&a, ts.as_deref(), &t)).await?;
        let mut plan = DataSetPlan::new(&config.data, facts.tablespace.block_size);
        plan.tablespace = Some(facts.tablespace.name.clone());
        Ok((facts, plan))
    }

    fn cache_warning(facts: &ServerFacts, plan: &DataSetPlan) -> Option<String> {
        loader::cache_warning(
            plan.table_bytes(),
            facts.tablespace.block_size,
            facts.db_block_size,
            &facts.caches,
        )
    }

    pub async fn setup(config: &Config, admin: ConnectString, force: bool) -> Result<u8, Failure> {
        let (facts, plan) = facts(config, &admin).await?;
        eprintln!(
            "setup: {} Oracle schema(s) x {} blocks of {} kB in tablespace {} on {} (container {}, CON_ID {})",
            plan.schemas,
            plan.scale_blocks,
            facts.tablespace.block_size / 1024,
            facts.tablespace.name,
            admin.redacted(),
            facts.container.con_name,
            facts.container.con_id
        );
        if let Some(w) = cache_warning(&facts, &plan) {
            eprintln!("warning: {w}");
        }
        let t = timeouts(config);
        let lines = blocking(move || client::setup(&admin, &plan, &facts, force, &t)).await?;
        for l in lines {
            println!("{l}");
        }
        Ok(0)
    }

    pub async fn check(config: &Config, admin: ConnectString) -> Result<u8, Failure> {
        let (_, plan) = facts(config, &admin).await?;
        let t = timeouts(config);
        let (ok, lines) = blocking(move || client::check(&admin, &plan, &t)).await?;
        for l in lines {
            println!("{l}");
        }
        Ok(if ok { 0 } else { 1 })
    }

    pub async fn teardown(config: &Config, admin: ConnectString, yes: bool) -> Result<u8, Failure> {
        let prefix = config.data.prefix.clone();
        let t = timeouts(config);
        let lines = blocking(move || client::teardown(&admin, &prefix, yes, &t)).await?;
        if lines.is_empty() {
            println!(
                "nothing to drop: no users {}<n> made by dbio",
                config.data.prefix.to_uppercase()
            );
        }
        for l in lines {
            println!("{l}");
        }
        Ok(0)
    }

    /// What result.json records of the server: the container (every result says where it
    /// ran), the tablespace and its block size, the buffer caches.
    fn settings(facts: &ServerFacts) -> std::collections::BTreeMap<String, Option<String>> {
        let c = &facts.container;
        let mut s = std::collections::BTreeMap::new();
        s.insert("con_name".into(), Some(c.con_name.clone()));
        s.insert("con_id".into(), Some(c.con_id.to_string()));
        s.insert("con_dbid".into(), Some(c.con_dbid.to_string()));
        s.insert("cdb".into(), Some(if c.cdb { "YES" } else { "NO" }.into()));
        s.insert("tablespace".into(), Some(facts.tablespace.name.clone()));
        s.insert(
            "tablespace_block_size".into(),
            Some(facts.tablespace.block_size.to_string()),
        );
        s.insert(
            "db_block_size".into(),
            Some(facts.db_block_size.to_string()),
        );
        for (inst, component, bytes) in &facts.caches {
            // e.g. inst1.DEFAULT_buffer_cache=134217728 (bytes)
            s.insert(
                format!("inst{inst}.{}", component.replace(' ', "_")),
                Some(bytes.to_string()),
            );
        }
        s
    }

    /// One run against Oracle: the same sessions, driver, result.json and report as
    /// PostgreSQL, with V$ figures and Oracle's event names.
    pub async fn run(
        config: &Config,
        admin: ConnectString,
        output: &RunOutput<'_>,
    ) -> Result<RunResult, Failure> {
        let r = &config.run;
        if r.engine == RunEngine::Server {
            return Err(Failure::new(
                2,
                "run.engine: server is built for PostgreSQL only; use run.engine: client with engine: oracle",
            ));
        }
        let (facts, plan) = facts(config, &admin).await?;
        let block = facts.tablespace.block_size;
        config.validate_run(block)?;
        let t = timeouts(config);
        let users: Vec<String> = (1..=plan.schemas)
            .map(|n| sql::user_name(&plan.prefix, n))
            .collect();
        let specs = session_specs(r.readers, r.writers, &users, r.hot_schema);
        let workload = Workload::from_config(config, block)?;
        let out_dir = result_dir(config)?;
        // The data set must be complete before anything is measured: marks and optimizer
        // statistics, no scan of the tables just before the window.
        let unfit = {
            let (a, p) = (admin.clone(), plan.clone());
            blocking(move || client::run_preflight(&a, &p, &t)).await?
        };
        if !unfit.is_empty() {
            return Err(Failure::new(
                2,
                format!(
                    "the data set is not fit to run against:\n  {}",
                    unfit.join("\n  ")
                ),
            ));
        }
        eprintln!(
            "run: {} reader(s), {} writer(s) on {} (Oracle, container {}); connecting and preparing",
            r.readers,
            r.writers,
            admin.redacted(),
            facts.container.con_name
        );
        let heavy = r.redo_stress == RedoStress::Heavy;
        let mut opening = tokio::task::JoinSet::new();
        let services = &config.target.services;
        for spec in specs.clone() {
            let mut a = admin.clone();
            // RAC: sessions spread round-robin over the services, as SLOB's service base/max.
            if !services.is_empty() {
                a.connect = services[spec.index as usize % services.len()].clone();
            }
            opening.spawn_blocking(move || {
                client::OraSession::open(&a, &spec.schema, &spec.name, heavy, &t).map(|s| (spec, s))
            });
        }
        let mut sessions = Vec::new();
        while let Some(j) = opening.join_next().await {
            let opened = j.map_err(|e| Failure::new(1, format!("opening a session: {e}")))??;
            sessions.push(opened);
        }
        sessions.sort_by_key(|(s, _)| s.index);

        let collector = {
            let a = admin.clone();
            blocking(move || client::connect(&a, None, &t)).await?
        };
        let before: Mutex<Option<metrics::Snapshot>> = Mutex::new(None);
        let awr_begin: Mutex<Option<i64>> = Mutex::new(None);
        let sampler: Mutex<Option<client::Sampler>> = Mutex::new(None);
        let period = config.collector.sample_period.0;
        let drive_cfg = drive_config(config, workload, output.quiet);
        let window = drive_cfg.window;
        eprintln!("run: {} sessions ready; measuring", specs.len());
        let outcome = drive(
            sessions,
            &drive_cfg,
            crate::signals::interrupts(),
            |p| output.note(&progress_line(p)),
            || async {
                tokio::task::block_in_place(|| {
                    if config.collector.awr {
                        let id = client::awr_snapshot(&collector).map_err(|e| e.to_string())?;
                        *awr_begin.lock().map_err(|e| e.to_string())? = Some(id);
                    }
                    let s = client::snapshot(&collector).map_err(|e| e.to_string())?;
                    *before.lock().map_err(|e| e.to_string())? = Some(s);
                    let started =
                        client::Sampler::start(&admin, period, &t).map_err(|e| e.to_string())?;
                    *sampler.lock().map_err(|e| e.to_string())? = Some(started);
                    Ok(())
                })
            },
        )
        .await;
        let mut warnings = vec![
            "Oracle: physical reads may be served by the OS page cache unless the database does direct I/O \
             (filesystemio_options = SETALL, or ASM)"
                .to_string(),
        ];
        warnings.extend(cache_warning(&facts, &plan));
        let samples = sampler
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .map(|s| tokio::task::block_in_place(|| s.finish()));
        let after = tokio::task::block_in_place(|| client::snapshot(&collector));
        let before = before.lock().ok().and_then(|b| b.clone());
        let mut figures = match (&before, after) {
            (Some(b), Ok(a)) => Some(metrics::window(b, &a, outcome.db_window_s)),
            (_, Err(e)) => {
                warnings.push(format!("the V$ views could not be read after the run: {e}"));
                None
            }
            (None, _) => None,
        };
        match (&mut figures, samples) {
            (Some(f), Some(Ok(s))) => metrics::add_samples(
                &mut f.waits,
                period.as_secs_f64() * 1e3,
                s.achieved_period_ms,
                s.samples,
                &s.by_event,
            ),
            (_, Some(Err(e))) => warnings.push(format!("the session sampler failed: {e}")),
            _ => {}
        }
        if let Some(f) = &figures {
            warnings.extend(f.warnings.iter().cloned());
            if !f.db.valid {
                warnings.extend(f.db.invalid_reasons.iter().cloned());
            }
        }
        if let Some(begin) = awr_begin.lock().ok().and_then(|b| *b) {
            // RAC: the global report over every instance; in a PDB, the PDB's DBID.
            let instances: Vec<u32> = before
                .as_ref()
                .map(|b| b.instances.iter().map(|i| i.inst_id).collect())
                .unwrap_or_default();
            let dbid = facts.container.con_dbid;
            let report = tokio::task::block_in_place(|| {
                client::awr_snapshot(&collector)
                    .and_then(|end| client::awr_report(&collector, dbid, &instances, begin, end))
            });
            match report {
                Ok(text) => {
                    dbio_core::output::write_atomic(&out_dir.join("awr.txt"), text.as_bytes())?
                }
                Err(e) => warnings.push(format!("no AWR report: {e}")),
            }
        }
        let mut recorded = config.clone();
        recorded.target.dsn = Some(admin.redacted());
        recorded.run.out = Some(out_dir.clone());
        let used: std::collections::BTreeSet<String> =
            specs.iter().map(|s| s.schema.clone()).collect();
        let environment = Environment {
            dbio_version: env!("CARGO_PKG_VERSION").to_string(),
            client_host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            target: admin.redacted(),
            server_version: facts.version.clone(),
            server_version_num: 0,
            settings: settings(&facts),
            session_tls: None,
            data_set: DataSetInfo {
                schemas: plan.schemas,
                scale_blocks: plan.scale_blocks,
                block_size: block,
                table_bytes: plan.table_bytes(),
                schemas_used: used.into_iter().collect(),
                tables: Vec::new(),
            },
            read_path: None,
        };
        let (db, waits) = figures.map_or((None, None), |f| (Some(f.db), Some(f.waits)));
        let result = RunResult::build(
            RunContext {
                config: recorded,
                environment,
                warnings,
                db,
                waits,
                device: None,
                calibration: None,
            },
            window,
            outcome,
        );
        publish(&result, &out_dir, output)?;
        Ok(result)
    }
}

#[cfg(feature = "oracle")]
pub use enabled::{check, run, setup, teardown};

#[cfg(not(feature = "oracle"))]
mod disabled {
    use dbio_core::result::RunResult;

    use super::*;
    use crate::cmd::RunOutput;

    pub async fn setup(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn check(_: &Config, _: ConnectString) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn teardown(_: &Config, _: ConnectString, _: bool) -> Result<u8, Failure> {
        Err(OracleError::NotBuilt.into())
    }
    pub async fn run(
        _: &Config,
        _: ConnectString,
        _: &RunOutput<'_>,
    ) -> Result<RunResult, Failure> {
        Err(OracleError::NotBuilt.into())
    }
}

#[cfg(not(feature = "oracle"))]
pub use disabled::{check, run, setup, teardown};
