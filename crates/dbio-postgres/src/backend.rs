//! The PostgreSQL backend of the one run pipeline (core's `bench::run`): preflight through
//! `run::preflight`, the sessions of either loop, and the AWR-like collector.

use dbio_core::Config;
use dbio_core::backend::{
    Backend, BackendError, DataSet, Opened, ServerFacts, WindowCollector as CoreCollector,
    WindowFigures, data_set_plan,
};
use std::sync::Arc;

use dbio_core::dataset::{CheckReport, DataSetPlan, LoadObserver, LoadSummary, SetupAsk};
use dbio_core::discover::FoundDataSet;
use dbio_core::driver::session_specs;
use dbio_core::interrupt::Interrupts;
use dbio_core::plan::RunPlan;
use dbio_core::result::SessionTls;
use dbio_core::teardown::{TeardownPlan, TeardownReport};

use crate::collector::{CollectorOptions, IoTiming, Scope, WindowCollector};
use crate::conn::Target;
use crate::error::PgError;
use crate::loader::SetupOptions;
use crate::run::{self, LoopPlan, Preflight};
use crate::scratch;
use crate::session::{PgLoopSession, PgSession};
use crate::tls::Negotiated;

impl From<PgError> for BackendError {
    fn from(e: PgError) -> Self {
        BackendError::new(e.kind(), e.to_string())
    }
}

/// A PostgreSQL target, and what preflight and the sessions learned of it.
pub struct PgBackend {
    /// The target as given (a host list stays a list).
    given: Target,
    /// The target the run uses: for a host list, the one server preflight settled on.
    target: Target,
    pre: Option<Preflight>,
    /// track_io_timing is on in every session.
    io_timing: bool,
    /// The sessions' backend PIDs, by which the collector tells them apart.
    backend_pids: Vec<i32>,
}

impl PgBackend {
    /// The cluster's system identifier (pg_control_system(), executable by any role),
    /// best effort: None when it cannot be read.
    async fn system_identifier(&self) -> Option<String> {
        let client = self.target.connect("dbio-preflight").await.ok()?;
        let row = client
            .query_one(crate::sql::SYSTEM_IDENTIFIER, &[])
            .await
            .ok()?;
        crate::marker::col::<String>(&row, 0, "the system identifier").ok()
    }

    pub fn new(target: Target) -> PgBackend {
        PgBackend {
            given: target.clone(),
            target,
            pre: None,
            io_timing: false,
            backend_pids: Vec::new(),
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    fn pre(&self) -> Result<&Preflight, BackendError> {
        self.pre
            .as_ref()
            .ok_or_else(|| BackendError::failed("the run's preflight has not run"))
    }
}

/// This process collects the server's figures: a run in one process, or the shard that
/// `run.collector_shard` names.
fn collects_server(plan: &RunPlan) -> bool {
    let r = &plan.config().run;
    r.shard().is_none_or(|s| s.index == r.collector_shard)
}

fn tls_of<'a>(tls: impl Iterator<Item = Option<&'a Negotiated>>) -> SessionTls {
    SessionTls::of(tls.map(|t| t.map(|n| (n.protocol.as_str(), n.cipher.as_str()))))
}

impl WindowCollector {
    fn figures(c: crate::collector::Collected) -> WindowFigures {
        WindowFigures {
            db: c.db,
            waits: c.waits,
            device: c.device,
            host: c.host,
            missing_rights: c.missing_rights,
            limits: c.limits,
            warnings: c.warnings,
            files: Vec::new(),
        }
    }
}

impl CoreCollector for WindowCollector {
    async fn begin(&mut self) -> Result<(), BackendError> {
        Ok(WindowCollector::begin(self).await?)
    }
    async fn end(self, window_s: f64) -> WindowFigures {
        WindowCollector::figures(WindowCollector::end(self, window_s).await)
    }
}

impl DataSet for PgBackend {
    async fn block_size(&mut self, _: &Config) -> Result<u64, BackendError> {
        let client = self.given.connect("dbio-block-size").await?;
        Ok(crate::server::server_info(&client).await?.block_size)
    }

    /// The marks on the database's schemas (`marker::data_sets`).
    async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
        let client = self.given.connect("dbio-list").await?;
        Ok(crate::marker::data_sets(&client).await?)
    }

    async fn check(&mut self, config: &Config) -> Result<CheckReport, BackendError> {
        let plan = data_set_plan(self, config).await?;
        let read = crate::check::ReadShape {
            path: config.run.read_path,
            work_unit: config.run.work_unit,
        };
        let mut report = crate::check::check(&self.given, &plan, read).await?;
        // Best effort: a role that may not read the catalogs it needs is told by the run.
        if let Ok(missing) = crate::rights::missing_rights_of(&self.given).await {
            report.missing_rights = missing;
        }
        Ok(report)
    }

    /// Binary COPY per schema, `data.parallel` at a time (`loader::setup`). An interrupt drops
    /// the load's connections: its transaction rolls back, the schema stays marked loading.
    async fn setup(
        &mut self,
        config: &Config,
        ask: SetupAsk,
        observer: Arc<dyn LoadObserver>,
        interrupts: Interrupts,
    ) -> Result<LoadSummary, BackendError> {
        let plan = data_set_plan(self, config).await?;
        let opts = SetupOptions {
            force: ask.force,
            drop_dependents: ask.drop_dependents,
            drop_caches: config.collector.drop_caches,
        };
        tokio::select! {
            r = crate::loader::setup(&self.given, &plan, &opts, observer) => Ok(r?),
            by = interrupts.reached(1) => Err(BackendError::interrupted(format!(
                "setup interrupted by {by}; any schema being loaded stays marked incomplete and the next `dbio setup` rebuilds it"
            ))),
        }
    }

    async fn teardown_plan(&mut self, prefix: &str) -> Result<TeardownPlan, BackendError> {
        Ok(crate::teardown::teardown_plan(&self.given, prefix)
            .await?
            .into())
    }

    /// One transaction per schema (`teardown::teardown`): an interrupt drops the connection,
    /// which rolls back the schema in flight; those before it are dropped.
    async fn teardown(
        &mut self,
        prefix: &str,
        drop_dependents: bool,
        interrupts: Interrupts,
    ) -> Result<TeardownReport, BackendError> {
        tokio::select! {
            r = crate::teardown::teardown(&self.given, prefix, drop_dependents) => Ok(r?.into()),
            by = interrupts.reached(1) => Err(BackendError::interrupted(format!(
                "teardown interrupted by {by}; the schema being dropped is left as it was, and `dbio teardown --yes` drops what is left"
            ))),
        }
    }
}

impl Backend for PgBackend {
    type Session = PgSession;
    type LoopSession = PgLoopSession;
    type Collector = WindowCollector;

    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn refuse(&self, config: &Config) -> Result<(), BackendError> {
        if config.collector.drop_caches && !(self.target.is_local() && scratch::is_root()) {
            return Err(BackendError::usage(
                "collector.drop_caches (--drop-caches) needs root on the server's host: the target is remote or dbio is not root",
            ));
        }
        Ok(())
    }

    async fn preflight(&mut self, config: &Config) -> Result<ServerFacts, BackendError> {
        // Schema names do not depend on the block size; the sessions' count bounds the
        // connections preflight checks are free.
        let names = DataSetPlan::new(&config.data, 8192).schema_names();
        let r = &config.run;
        let specs = session_specs(r.readers, r.writers, &names, r.hot_schema);
        // The previous run's preflight (a ramp's last step) holds the data set's lock: let
        // it go before this run takes it again.
        self.pre = None;
        // A host list is one server for the whole run: every session, the lock and the
        // collector on the first that answers and fits target_session_attrs (seen: 3 of 4
        // sessions on one server and the collector on the other, every database figure
        // about a server the sessions did not use).
        let mut notes = Vec::new();
        self.target = self.given.clone();
        if self.given.hosts.len() > 1 {
            let (_, pinned) = self.given.connect_pinned("dbio-preflight").await?;
            notes.push(format!(
                "host list: every session and the collector use {} (the first server of the list that answered{})",
                pinned.hosts.first().map(|h| h.describe()).unwrap_or_default(),
                if self.given.session_attrs == crate::conn::SessionAttrs::Any {
                    String::new()
                } else {
                    " and fits target_session_attrs".to_string()
                }
            ));
            self.target = pinned;
        }
        let mut pre = run::preflight(&self.target, config, &specs).await?;
        if self.given.hosts.len() > 1 {
            pre.environment.target = self.given.redacted();
            pre.environment.pinned_server = self.target.hosts.first().map(|h| h.describe());
        }
        notes.extend(pre.notes.iter().cloned());
        let facts = ServerFacts {
            block_size: pre.info.block_size,
            schema_names: names,
            target: self.given.redacted(),
            environment: pre.environment.clone(),
            warnings: pre.warnings.clone(),
            notes,
            describe: format!("PostgreSQL {}", pre.info.version),
            server_id: self.system_identifier().await,
        };
        self.pre = Some(pre);
        Ok(facts)
    }

    async fn open_sessions(&mut self, plan: &RunPlan) -> Result<Opened<PgSession>, BackendError> {
        let major = self.pre()?.info.major();
        let sessions = run::open_sessions(
            &self.target,
            plan.specs(),
            plan.redo_stress(),
            plan.config().run.read_path,
            major,
            plan.config().target.statement_timeout.0,
        )
        .await?;
        self.io_timing = sessions.iter().all(|(_, s)| s.io_timing);
        self.backend_pids = sessions.iter().map(|(_, s)| s.backend_pid()).collect();
        let tls = tls_of(sessions.iter().map(|(_, s)| s.tls()));
        Ok(Opened {
            sessions,
            tls: Some(tls),
        })
    }

    async fn open_loop_sessions(
        &mut self,
        plan: &RunPlan,
    ) -> Result<Opened<PgLoopSession>, BackendError> {
        let major = self.pre()?.info.major();
        let w = plan.workload();
        let sessions = run::open_loop_sessions(
            &self.target,
            plan.specs(),
            plan.redo_stress(),
            plan.config().run.read_path,
            major,
            &LoopPlan {
                scale_blocks: w.scale_blocks,
                work_unit: w.work_unit,
                update_work_unit: w.update_work_unit,
                update_pct: plan.config().run.update_pct,
                seed: plan.config().run.seed,
                run_time: plan.run_time(),
            },
        )
        .await?;
        self.io_timing = sessions.iter().all(|(_, s)| s.io_timing);
        self.backend_pids = sessions.iter().map(|(_, s)| s.backend_pid()).collect();
        let tls = tls_of(sessions.iter().map(|(_, s)| s.tls()));
        Ok(Opened {
            sessions,
            tls: Some(tls),
        })
    }

    fn server_loop(&self) -> bool {
        true
    }

    async fn clock_offset_s(&mut self) -> Result<Option<f64>, BackendError> {
        let client = self.target.connect("dbio-clock").await?;
        // The server's clock read between two of ours: its offset from their midpoint, on
        // the quickest of three round trips (the least queueing).
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..3 {
            let t0 = chrono::Utc::now();
            let row = client
                .query_one(crate::sql::SERVER_EPOCH, &[])
                .await
                .map_err(|e| PgError::from_db("reading the server's clock", &e))?;
            let t1 = chrono::Utc::now();
            let server: f64 = crate::marker::col(&row, 0, "the server's clock")?;
            let rtt = (t1 - t0).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6;
            let mid = t0.timestamp_micros() as f64 / 1e6 + rtt / 2.0;
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, mid - server));
            }
        }
        Ok(best.map(|(_, offset)| offset))
    }

    fn end_run(&mut self) {
        // Closes the lock's connection: the server releases the data set's advisory locks
        // when that backend exits.
        self.pre = None;
    }

    async fn wait_ready(&self, timeout: std::time::Duration) -> bool {
        self.target.wait_ready(timeout).await
    }

    fn shard_collector(&self) -> bool {
        true
    }

    async fn collector(&mut self, plan: &RunPlan) -> Result<WindowCollector, BackendError> {
        let pre = self.pre()?;
        let c = &plan.config().collector;
        let opts = CollectorOptions {
            major: pre.info.major(),
            block_size: plan.block_size(),
            schemas: plan.schema_names().to_vec(),
            timing: if self.io_timing {
                IoTiming::On
            } else {
                IoTiming::Off
            },
            data_path: pre.data_path.clone(),
            drop_caches: c.drop_caches,
            direct_io: pre.direct_io,
            sample_period: c.sample_period.0,
            backend_pids: self.backend_pids.clone(),
            scope: if collects_server(plan) {
                Scope::Server
            } else {
                Scope::Sessions
            },
            shard_of_many: plan.config().run.shard().is_some_and(|s| s.count > 1),
        };
        Ok(WindowCollector::connect(&self.target, opts).await?)
    }
}
