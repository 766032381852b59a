//! The Oracle backend of the one run pipeline (core's `bench::run`): the server's facts and
//! the data set's fitness from the dictionary, one OS thread and connection per session,
//! and a V$ collector (snapshots, ASH-like sampler, optional AWR report) around the window.
//! Every blocking call of the `oracle` crate runs off the async runtime's worker
//! (`block_in_place` or the blocking pool).

use std::collections::{BTreeMap, BTreeSet};

use dbio_core::Config;
use dbio_core::backend::{
    Backend, BackendError, NoLoops, Opened, ServerFacts as CoreFacts, WindowCollector,
    WindowFigures,
};
use dbio_core::config::RedoStress;
use dbio_core::dataset::DataSetPlan;
use dbio_core::plan::RunPlan;
use dbio_core::result::{DataSetInfo, Environment};

use crate::client::{self, OraSession, Sampler, ServerFacts, Timeouts};
use crate::{ConnectString, OracleError, loader, metrics, sql};

impl From<OracleError> for BackendError {
    fn from(e: OracleError) -> Self {
        BackendError {
            exit_code: e.exit_code(),
            message: e.to_string(),
        }
    }
}

/// target.connect_timeout for every connection; target.statement_timeout as the measured
/// sessions' call timeout.
pub fn timeouts(config: &Config) -> Timeouts {
    let call = config.target.statement_timeout.0;
    Timeouts {
        connect: config.target.connect_timeout.0,
        call: (!call.is_zero()).then_some(call),
    }
}

/// The server's facts (CDB$ROOT refused, the tablespace and its block size) and the plan
/// in that tablespace's blocks.
pub fn facts(
    config: &Config,
    admin: &ConnectString,
) -> Result<(ServerFacts, DataSetPlan), OracleError> {
    let facts = client::preflight(admin, config.data.tablespace.as_deref(), &timeouts(config))?;
    let mut plan = DataSetPlan::new(&config.data, facts.tablespace.block_size);
    plan.tablespace = Some(facts.tablespace.name.clone());
    Ok((facts, plan))
}

/// The warning when the data set would fit in the buffer caches.
pub fn cache_warning(facts: &ServerFacts, plan: &DataSetPlan) -> Option<String> {
    loader::cache_warning(
        plan.table_bytes(),
        facts.tablespace.block_size,
        facts.db_block_size,
        &facts.caches,
    )
}

/// What result.json records of the server: the container (every result says where it
/// ran), the tablespace and its block size, the buffer caches.
fn settings(facts: &ServerFacts) -> BTreeMap<String, Option<String>> {
    let c = &facts.container;
    let mut s = BTreeMap::new();
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

/// An Oracle target (the admin user), and what preflight learned of it.
pub struct OracleBackend {
    admin: ConnectString,
    /// RAC: sessions spread round-robin over these services (SLOB's service base/max).
    services: Vec<String>,
    timeouts: Timeouts,
    facts: Option<ServerFacts>,
}

impl OracleBackend {
    pub fn new(admin: ConnectString, config: &Config) -> OracleBackend {
        OracleBackend {
            admin,
            services: config.target.services.clone(),
            timeouts: timeouts(config),
            facts: None,
        }
    }
}

/// Snapshots of the V$ views around the window, the session sampler, and the AWR report
/// between two AWR snapshots when `collector.awr` asks for one.
pub struct OracleCollector {
    conn: oracle::Connection,
    admin: ConnectString,
    timeouts: Timeouts,
    period: std::time::Duration,
    awr: bool,
    con_dbid: i64,
    before: Option<metrics::Snapshot>,
    awr_begin: Option<i64>,
    sampler: Option<Sampler>,
}

impl WindowCollector for OracleCollector {
    async fn begin(&mut self) -> Result<(), String> {
        tokio::task::block_in_place(|| {
            if self.awr {
                self.awr_begin = Some(client::awr_snapshot(&self.conn).map_err(|e| e.to_string())?);
            }
            self.before = Some(client::snapshot(&self.conn).map_err(|e| e.to_string())?);
            self.sampler = Some(
                Sampler::start(&self.admin, self.period, &self.timeouts)
                    .map_err(|e| e.to_string())?,
            );
            Ok(())
        })
    }

    async fn end(mut self, window_s: f64) -> WindowFigures {
        tokio::task::block_in_place(move || {
            let mut out = WindowFigures::default();
            let samples = self.sampler.take().map(Sampler::finish);
            let after = client::snapshot(&self.conn);
            let mut figures = match (&self.before, after) {
                (Some(b), Ok(a)) => Some(metrics::window(b, &a, window_s)),
                (_, Err(e)) => {
                    out.warnings
                        .push(format!("the V$ views could not be read after the run: {e}"));
                    None
                }
                (None, _) => None,
            };
            match (&mut figures, samples) {
                (Some(f), Some(Ok(s))) => metrics::add_samples(
                    &mut f.waits,
                    self.period.as_secs_f64() * 1e3,
                    s.achieved_period_ms,
                    s.samples,
                    &s.by_event,
                ),
                (_, Some(Err(e))) => out
                    .warnings
                    .push(format!("the session sampler failed: {e}")),
                _ => {}
            }
            if let Some(f) = &figures {
                out.warnings.extend(f.warnings.iter().cloned());
                if !f.db.valid {
                    out.warnings.extend(f.db.invalid_reasons.iter().cloned());
                }
            }
            if let Some(begin) = self.awr_begin {
                // RAC: the global report over every instance; in a PDB, the PDB's DBID.
                let instances: Vec<u32> = self
                    .before
                    .as_ref()
                    .map(|b| b.instances.iter().map(|i| i.inst_id).collect())
                    .unwrap_or_default();
                let report = client::awr_snapshot(&self.conn).and_then(|end| {
                    client::awr_report(&self.conn, self.con_dbid, &instances, begin, end)
                });
                match report {
                    Ok(text) => out.files.push(("awr.txt".into(), text.into_bytes())),
                    Err(e) => out.warnings.push(format!("no AWR report: {e}")),
                }
            }
            if let Some(f) = figures {
                out.db = Some(f.db);
                out.waits = Some(f.waits);
            }
            out
        })
    }
}

impl Backend for OracleBackend {
    type Session = OraSession;
    type LoopSession = NoLoops;
    type Collector = OracleCollector;

    fn name(&self) -> &'static str {
        "Oracle"
    }

    fn refuse(&self, config: &Config) -> Result<(), BackendError> {
        if config.collector.drop_caches {
            return Err(BackendError::usage(
                "collector.drop_caches (--drop-caches) drops this host's page cache, which only helps a PostgreSQL on this host; \
                 with engine: oracle flush the buffer cache on the server (ALTER SYSTEM FLUSH BUFFER_CACHE) yourself",
            ));
        }
        Ok(())
    }

    async fn preflight(&mut self, config: &Config) -> Result<CoreFacts, BackendError> {
        let (facts, plan) = tokio::task::block_in_place(|| facts(config, &self.admin))?;
        // The data set must be complete before anything is measured: marks and optimizer
        // statistics, no scan of the tables just before the window.
        let unfit = tokio::task::block_in_place(|| {
            client::run_preflight(&self.admin, &plan, &self.timeouts)
        })?;
        if !unfit.is_empty() {
            return Err(BackendError::usage(format!(
                "the data set is not fit to run against:\n  {}",
                unfit.join("\n  ")
            )));
        }
        let users: Vec<String> = (1..=plan.schemas)
            .map(|n| sql::user_name(&plan.prefix, n))
            .collect();
        let r = &config.run;
        let specs = dbio_core::driver::session_specs(r.readers, r.writers, &users, r.hot_schema);
        let used: BTreeSet<String> = specs.iter().map(|s| s.schema.clone()).collect();
        let mut warnings = vec![
            "Oracle: physical reads may be served by the OS page cache unless the database does direct I/O \
             (filesystemio_options = SETALL, or ASM)"
                .to_string(),
        ];
        warnings.extend(cache_warning(&facts, &plan));
        let environment = Environment {
            dbio_version: env!("CARGO_PKG_VERSION").to_string(),
            client_host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            target: self.admin.redacted(),
            pinned_server: None,
            server_version: facts.version.clone(),
            server_version_num: 0,
            settings: settings(&facts),
            session_tls: None,
            data_set: DataSetInfo {
                schemas: plan.schemas,
                scale_blocks: plan.scale_blocks,
                block_size: facts.tablespace.block_size,
                table_bytes: plan.table_bytes(),
                schemas_used: used.into_iter().collect(),
                tables: Vec::new(),
            },
            read_path: None,
        };
        let out = CoreFacts {
            block_size: facts.tablespace.block_size,
            schema_names: users,
            target: self.admin.redacted(),
            environment,
            warnings,
            notes: Vec::new(),
            describe: format!("Oracle, container {}", facts.container.con_name),
            server_id: None,
        };
        self.facts = Some(facts);
        Ok(out)
    }

    async fn open_sessions(&mut self, plan: &RunPlan) -> Result<Opened<OraSession>, BackendError> {
        let heavy = plan.redo_stress() == RedoStress::Heavy;
        let mut opening = tokio::task::JoinSet::new();
        for spec in plan.specs().iter().cloned() {
            let mut a = self.admin.clone();
            if !self.services.is_empty() {
                a.connect = self.services[spec.index as usize % self.services.len()].clone();
            }
            let t = self.timeouts;
            opening.spawn_blocking(move || {
                OraSession::open(&a, &spec.schema, &spec.name, heavy, &t).map(|s| (spec, s))
            });
        }
        let mut sessions = Vec::new();
        while let Some(j) = opening.join_next().await {
            let opened =
                j.map_err(|e| BackendError::failed(format!("opening a session: {e}")))??;
            sessions.push(opened);
        }
        sessions.sort_by_key(|(s, _)| s.index);
        Ok(Opened {
            sessions,
            tls: None,
        })
    }

    async fn open_loop_sessions(&mut self, _: &RunPlan) -> Result<Opened<NoLoops>, BackendError> {
        Err(BackendError::usage(
            "run.engine: server is built for PostgreSQL only; use run.engine: client with engine: oracle",
        ))
    }

    fn server_loop(&self) -> bool {
        false
    }

    async fn collector(&mut self, plan: &RunPlan) -> Result<OracleCollector, BackendError> {
        let con_dbid = self
            .facts
            .as_ref()
            .map(|f| f.container.con_dbid)
            .ok_or_else(|| BackendError::failed("the run's preflight has not run"))?;
        let conn =
            tokio::task::block_in_place(|| client::connect(&self.admin, None, &self.timeouts))?;
        let c = &plan.config().collector;
        Ok(OracleCollector {
            conn,
            admin: self.admin.clone(),
            timeouts: self.timeouts,
            period: c.sample_period.0,
            awr: c.awr,
            con_dbid,
            before: None,
            awr_begin: None,
            sampler: None,
        })
    }
}
