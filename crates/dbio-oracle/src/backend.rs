//! The Oracle backend of the one run pipeline (core's `bench::run`): the server's facts and
//! the data set's fitness from the dictionary and dbio's records, the operational checks
//! (passwords, accounts, connection limits, the reader's plan, AWR or Statspack), one OS
//! thread and connection per session opened a few at a time, and a collector (V$ snapshots,
//! the ASH-like sampler, AWR or Statspack snapshots) around the window. Every blocking call
//! of the `oracle` crate runs off the async runtime's workers (`block_in_place` or the
//! blocking pool).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dbio_core::Config;
use dbio_core::backend::{
    Backend, BackendError, DataSet, NoLoops, Opened, ServerFacts as CoreFacts, WindowCollector,
    WindowFigures,
};
use dbio_core::config::{ReadPath, RedoStress};
use dbio_core::dataset::{
    CheckReport, DataSetPlan, LoadObserver, LoadSummary, SetupAsk, SizingVerdict,
};
use dbio_core::discover::FoundDataSet;
use dbio_core::interrupt::Interrupts;
use dbio_core::plan::RunPlan;
use dbio_core::result::{DataSetInfo, Environment, ReadPathInfo};
use dbio_core::teardown::{TeardownPlan, TeardownReport};
use dbio_core::workload::SessionKind;

use crate::client::{self, Breaker, Conn, OraSession, RunFacts, Sampler, ServerFacts, Timeouts};
use crate::metrics::{self, StatspackSnap};
use crate::snapshots::Repository;
use crate::{ConnectString, OracleError, loader, mark, sql};

impl From<OracleError> for BackendError {
    fn from(e: OracleError) -> Self {
        BackendError::new(e.kind(), e.to_string())
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
/// in that tablespace's blocks, its prefix checked as the start of Oracle user names.
pub fn facts(
    config: &Config,
    admin: &ConnectString,
) -> Result<(ServerFacts, DataSetPlan), OracleError> {
    mark::check_prefix(&config.data.prefix, config.data.schemas)?;
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
/// ran), the tablespace and its block size, the buffer caches, the views read and the
/// repository snapshotted.
fn settings(facts: &ServerFacts, run: &RunFacts) -> BTreeMap<String, Option<String>> {
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
    s.insert("views".into(), Some(facts.views.names().to_string()));
    s.insert(
        "snapshots".into(),
        Some(
            match run.checks.snapshots.repository {
                Some(Repository::Awr) => "awr",
                Some(Repository::Statspack) => "statspack",
                None => "none",
            }
            .into(),
        ),
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
    run: Option<RunFacts>,
    /// The schemas the readers use: their plans are checked again after the window.
    reader_schemas: Vec<String>,
}

impl OracleBackend {
    pub fn new(admin: ConnectString, config: &Config) -> OracleBackend {
        OracleBackend {
            admin,
            services: config.target.services.clone(),
            timeouts: timeouts(config),
            facts: None,
            run: None,
            reader_schemas: Vec::new(),
        }
    }
}

/// The repository snapshot taken before the window.
enum Begin {
    Awr(i64),
    Statspack(Box<(StatspackSnap, metrics::Snapshot)>),
}

/// Snapshots of the V$ views around the window, the session sampler, AWR or Statspack
/// snapshots where the preflight chose them, and the readers' plans checked again.
pub struct OracleCollector {
    conn: Conn,
    admin: ConnectString,
    timeouts: Timeouts,
    period: std::time::Duration,
    repository: Option<Repository>,
    views: sql::Views,
    con_dbid: i64,
    sessions: u32,
    reader_schemas: Vec<String>,
    before: Option<metrics::Snapshot>,
    repository_begin: Option<Begin>,
    sampler: Option<Sampler>,
}

impl OracleCollector {
    /// The repository's end snapshot, its report file and what to warn of.
    fn end_repository(&self, begin: Begin, out: &mut WindowFigures) {
        match begin {
            Begin::Awr(first) => {
                // RAC: the global report over every instance; in a PDB, the PDB's DBID.
                let instances: Vec<u32> = self
                    .before
                    .as_ref()
                    .map(|b| b.instances.iter().map(|i| i.inst_id).collect())
                    .unwrap_or_default();
                let report = client::awr_snapshot(&self.conn).and_then(|last| {
                    client::awr_report(&self.conn, self.con_dbid, &instances, first, last)
                });
                match report {
                    Ok(text) => out.files.push(("awr.txt".into(), text.into_bytes())),
                    Err(e) => out.warnings.push(format!("no AWR report: {e}")),
                }
            }
            Begin::Statspack(b) => {
                let (bsnap, before) = *b;
                match client::statspack(&self.conn) {
                    Ok((esnap, after)) => match metrics::statspack_seconds(&bsnap, &esnap) {
                        Some(secs) => {
                            let w = metrics::window(&before, &after, secs);
                            let text = metrics::statspack_text(&bsnap, &esnap, &w, self.sessions);
                            out.files.push(("statspack.txt".into(), text.into_bytes()));
                        }
                        None => out.warnings.push(format!(
                            "no Statspack figures: snapshots {} and {} are not one second or more apart",
                            bsnap.snap_id, esnap.snap_id
                        )),
                    },
                    Err(e) => out.warnings.push(format!("no Statspack end snapshot: {e}")),
                }
            }
        }
    }
}

impl WindowCollector for OracleCollector {
    async fn begin(&mut self) -> Result<(), BackendError> {
        tokio::task::block_in_place(|| {
            self.repository_begin = match self.repository {
                Some(Repository::Awr) => Some(Begin::Awr(client::awr_snapshot(&self.conn)?)),
                Some(Repository::Statspack) => {
                    Some(Begin::Statspack(Box::new(client::statspack(&self.conn)?)))
                }
                None => None,
            };
            self.before = Some(client::snapshot(&self.conn, self.views)?);
            self.sampler = Some(Sampler::start(&self.admin, self.period, &self.timeouts)?);
            Ok(())
        })
    }

    async fn end(mut self, window_s: f64) -> WindowFigures {
        tokio::task::block_in_place(move || {
            let mut out = WindowFigures::default();
            let samples = self.sampler.take().map(Sampler::finish);
            let after = client::snapshot(&self.conn, self.views);
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
            // The plans the sessions really ran: a cursor that is not an index range scan
            // voids the figures (preflight checked the first schemas' before the window).
            let mut plan_problems = Vec::new();
            for user in &self.reader_schemas {
                if let Err(e) = client::judge_reader_cursors(&self.conn, user) {
                    plan_problems.push(e.to_string());
                }
            }
            if let Some(f) = &mut figures {
                if !plan_problems.is_empty() {
                    f.db.valid = false;
                    f.db.invalid_reasons.extend(plan_problems);
                }
                out.warnings.extend(f.warnings.iter().cloned());
                if !f.db.valid {
                    out.warnings.extend(f.db.invalid_reasons.iter().cloned());
                }
            } else {
                out.warnings.extend(plan_problems);
            }
            if let Some(begin) = self.repository_begin.take() {
                self.end_repository(begin, &mut out);
            }
            if let Some(f) = figures {
                out.db = Some(f.db);
                out.waits = Some(f.waits);
            }
            out
        })
    }
}

/// Breaks the calls in flight of a command whose caller stopped waiting for it.
struct BreakWhenDropped(Option<client::Breaker>);

impl Drop for BreakWhenDropped {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            // Breaking is a message to the server: off the async runtime's workers.
            std::thread::spawn(move || b.stop("an interrupt"));
        }
    }
}

/// Runs blocking Oracle work that changes nothing (check, teardown's listing) off the async
/// runtime's workers; when the caller stops waiting (an interrupt), the statement in flight is
/// broken, and nothing is left to record.
async fn read_only<T: Send + 'static>(
    f: impl FnOnce(&Breaker) -> Result<T, OracleError> + Send + 'static,
) -> Result<T, BackendError> {
    let breaker = Breaker::new();
    let mut guard = BreakWhenDropped(Some(breaker.clone()));
    let done = tokio::task::spawn_blocking(move || f(&breaker)).await;
    // Finished: nothing in flight to break.
    guard.0 = None;
    match done {
        Ok(r) => Ok(r?),
        Err(e) => Err(BackendError::failed(format!(
            "an Oracle task ended abnormally: {e}"
        ))),
    }
}

/// How long setup and teardown wait, after an interrupt broke their statements, for the
/// server to answer the break before dbio stops waiting.
const BREAK_WAIT: Duration = Duration::from_secs(20);

/// The Oracle backend never drops objects of the user's: the flag would be a silent no-op.
fn refuse_drop_dependents(drop_dependents: bool) -> Result<(), BackendError> {
    if drop_dependents {
        return Err(BackendError::usage(
            "--drop-dependents is for PostgreSQL only; with engine: oracle drop your objects on dbio's tables yourself",
        ));
    }
    Ok(())
}

/// Runs blocking Oracle work that changes the server (setup, teardown) off the async
/// runtime's workers, until the first of `interrupts`: that breaks the statements in flight
/// and waits up to [`BREAK_WAIT`] for the work to stop and say what it left (its own error,
/// which names what the next command does); a second interrupt, or the deadline, ends the
/// wait at once. `note` tells the user what is happening meanwhile.
async fn breakable<T: Send + 'static>(
    what: &str,
    interrupts: Interrupts,
    note: &dyn Fn(&str),
    f: impl FnOnce(&Breaker) -> Result<T, OracleError> + Send + 'static,
) -> Result<T, BackendError> {
    let breaker = Breaker::new();
    let b = breaker.clone();
    let mut work = tokio::task::spawn_blocking(move || f(&b));
    let joined = |r: Result<Result<T, OracleError>, tokio::task::JoinError>| match r {
        Ok(r) => r.map_err(BackendError::from),
        Err(e) => Err(BackendError::failed(format!(
            "an Oracle task ended abnormally: {e}"
        ))),
    };
    let by = tokio::select! {
        r = &mut work => return joined(r),
        by = interrupts.clone().reached(1) => by,
    };
    note(&format!(
        "dbio: {by}: stopping {what}: breaking the statement in flight (a second {by} stops waiting)"
    ));
    let b = breaker.clone();
    let _ = tokio::task::spawn_blocking(move || b.stop(by)).await;
    tokio::select! {
        r = &mut work => match joined(r) {
            // Its last statement ended before the break reached it: the work is done.
            Ok(v) => {
                note(&format!("dbio: {what} had finished when {by} arrived"));
                Ok(v)
            }
            Err(e) => Err(BackendError::interrupted(e.message)),
        },
        _ = tokio::time::sleep(BREAK_WAIT) => Err(BackendError::interrupted(format!(
            "{what} interrupted by {by}; the server did not answer the break within {}s, so dbio stopped \
             waiting: what was in flight stays recorded in dbio's catalog, and the next `dbio {what}` resumes or \
             reports it",
            BREAK_WAIT.as_secs()
        ))),
        by2 = interrupts.reached(2) => Err(BackendError::interrupted(format!(
            "{what} interrupted by {by}, then {by2}: dbio stopped waiting for the server"
        ))),
    }
}

impl DataSet for OracleBackend {
    /// The data set tablespace's block size (dba_tablespaces), read as setup and check read it.
    async fn block_size(&mut self, config: &Config) -> Result<u64, BackendError> {
        let (facts, _) = tokio::task::block_in_place(|| facts(config, &self.admin))?;
        Ok(facts.tablespace.block_size)
    }

    /// dbio's catalogs, the users they record and those users' CF1 marks
    /// (`client::data_sets`), off the async runtime's workers; an interrupt breaks the
    /// statement in flight.
    async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
        let (admin, timeouts) = (self.admin.clone(), self.timeouts);
        read_only(move |b| client::data_sets(&admin, &timeouts, b)).await
    }

    /// Off the async runtime's workers; an interrupt breaks the statement in flight.
    async fn check(&mut self, config: &Config) -> Result<CheckReport, BackendError> {
        let (admin, config, timeouts) = (self.admin.clone(), config.clone(), self.timeouts);
        read_only(move |b| {
            let (facts, plan) = facts(&config, &admin)?;
            client::check(&admin, &plan, &facts, &timeouts, b)
        })
        .await
    }

    /// SLOB's setup (`client::setup`) in the tablespace's blocks; where it runs (the
    /// container) is noted first. Table bytes are the loaded blocks; index bytes are not
    /// measured (0).
    async fn setup(
        &mut self,
        config: &Config,
        ask: SetupAsk,
        observer: Arc<dyn LoadObserver>,
        interrupts: Interrupts,
    ) -> Result<LoadSummary, BackendError> {
        refuse_drop_dependents(ask.drop_dependents)?;
        let started = Instant::now();
        let (facts, plan) = tokio::task::block_in_place(|| facts(config, &self.admin))?;
        observer.note(&format!(
            "Oracle: tablespace {}, container {} (CON_ID {})",
            facts.tablespace.name, facts.container.con_name, facts.container.con_id
        ));
        let sizing = SizingVerdict {
            data_bytes: plan.table_bytes(),
            shared_buffers_bytes: loader::buffer_cache_bytes(
                facts.tablespace.block_size,
                facts.db_block_size,
                &facts.caches,
            ),
            host_ram_bytes: None,
            ram_cgroup_file: None,
            warnings: cache_warning(&facts, &plan).into_iter().collect(),
        };
        let (admin, timeouts, force) = (self.admin.clone(), self.timeouts, ask.force);
        let loads = Arc::clone(&observer);
        let schemas = breakable("setup", interrupts, &|line| observer.note(line), move |b| {
            client::setup(&admin, &plan, &facts, force, &timeouts, b, loads.as_ref())
        })
        .await?;
        Ok(LoadSummary {
            schemas,
            seconds: started.elapsed().as_secs_f64(),
            sizing,
        })
    }

    async fn teardown_plan(&mut self, prefix: &str) -> Result<TeardownPlan, BackendError> {
        let (admin, prefix, timeouts) = (self.admin.clone(), prefix.to_string(), self.timeouts);
        read_only(move |b| client::teardown_plan(&admin, &prefix, &timeouts, b)).await
    }

    async fn teardown(
        &mut self,
        prefix: &str,
        drop_dependents: bool,
        interrupts: Interrupts,
    ) -> Result<TeardownReport, BackendError> {
        refuse_drop_dependents(drop_dependents)?;
        let (admin, prefix, timeouts) = (self.admin.clone(), prefix.to_string(), self.timeouts);
        breakable("teardown", interrupts, &|_| {}, move |b| {
            client::teardown(&admin, &prefix, &timeouts, b)
        })
        .await
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
        let users: Vec<String> = (1..=plan.schemas)
            .map(|n| mark::user_name(&plan.prefix, n))
            .collect();
        let r = &config.run;
        let specs = dbio_core::driver::session_specs(r.readers, r.writers, &users, r.hot_schema);
        let mut readers: Vec<String> = Vec::new();
        for s in specs.iter().filter(|s| s.kind == SessionKind::Reader) {
            if !readers.contains(&s.schema) {
                readers.push(s.schema.clone());
            }
        }
        let used: BTreeSet<String> = specs.iter().map(|s| s.schema.clone()).collect();
        // The data set must be dbio's and complete, the accounts open, the sessions within
        // the limits and the plan an index range scan before anything is measured: the
        // dictionary only, no scan of the tables just before the window.
        let run = tokio::task::block_in_place(|| {
            client::run_preflight(
                &self.admin,
                &facts,
                &plan,
                &readers,
                specs.len() as u32,
                r.work_unit,
                config.collector.snapshots(),
                &self.timeouts,
            )
        })?;
        let mut warnings = vec![
            "Oracle: physical reads may be served by the OS page cache unless the database does direct I/O \
             (filesystemio_options = SETALL, or ASM)"
                .to_string(),
        ];
        warnings.extend(cache_warning(&facts, &plan));
        warnings.extend(run.warnings.iter().cloned());
        let read_path = run.checks.read_path.as_ref().map(|v| ReadPathInfo {
            path: ReadPath::Index,
            plan: v.plan.clone(),
            scan: if v.batched {
                "TABLE ACCESS BY INDEX ROWID BATCHED".into()
            } else {
                "TABLE ACCESS BY INDEX ROWID".into()
            },
            source: v.source.clone(),
            io_method: None,
            effective_io_concurrency: None,
            io_combine_limit: None,
            index_prefetch: None,
        });
        let environment = Environment {
            dbio_version: env!("CARGO_PKG_VERSION").to_string(),
            client_host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default(),
            target: self.admin.redacted(),
            pinned_server: None,
            server_version: facts.version.clone(),
            server_version_num: 0,
            settings: settings(&facts, &run),
            session_tls: None,
            data_set: DataSetInfo {
                schemas: plan.schemas,
                scale_blocks: plan.scale_blocks,
                block_size: facts.tablespace.block_size,
                table_bytes: plan.table_bytes(),
                schemas_used: used.into_iter().collect(),
                tables: Vec::new(),
            },
            read_path,
        };
        let out = CoreFacts {
            block_size: facts.tablespace.block_size,
            schema_names: users,
            target: self.admin.redacted(),
            environment,
            warnings,
            notes: run.notes.clone(),
            describe: format!("Oracle, container {}", facts.container.con_name),
            server_id: None,
        };
        self.reader_schemas = readers;
        self.facts = Some(facts);
        self.run = Some(run);
        Ok(out)
    }

    async fn open_sessions(&mut self, plan: &RunPlan) -> Result<Opened<OraSession>, BackendError> {
        let heavy = plan.redo_stress() == RedoStress::Heavy;
        let run = self
            .run
            .as_ref()
            .ok_or_else(|| BackendError::failed("the run's preflight has not run"))?;
        let specs: Vec<_> = plan
            .specs()
            .iter()
            .map(|spec| {
                let target = if self.services.is_empty() {
                    self.admin.connect.clone()
                } else {
                    self.services[spec.index as usize % self.services.len()].clone()
                };
                (spec.clone(), target)
            })
            .collect();
        let passwords = run.passwords.clone();
        let t = self.timeouts;
        let sessions = tokio::task::spawn_blocking(move || {
            client::open_sessions(&specs, &passwords, heavy, &t)
        })
        .await
        .map_err(|e| BackendError::failed(format!("opening the sessions: {e}")))??;
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
        let (facts, run) = self
            .facts
            .as_ref()
            .zip(self.run.as_ref())
            .ok_or_else(|| BackendError::failed("the run's preflight has not run"))?;
        let conn =
            tokio::task::block_in_place(|| client::connect_admin(&self.admin, &self.timeouts))?;
        let c = &plan.config().collector;
        Ok(OracleCollector {
            conn,
            admin: self.admin.clone(),
            timeouts: self.timeouts,
            period: c.sample_period.0,
            repository: run.checks.snapshots.repository,
            views: facts.views,
            con_dbid: facts.container.con_dbid,
            sessions: plan.specs().len() as u32,
            reader_schemas: self.reader_schemas.clone(),
            before: None,
            repository_begin: None,
            sampler: None,
        })
    }
}
