//! A backend with no database behind it, for the run pipeline's own logic (the order of its
//! phases, what each leaves behind when it fails): any one step can be made to fail, and the
//! fake records the calls the pipeline made and counts the sessions still open. The
//! database itself is tested end to end against real servers (tests/e2e).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::backend::{
    Backend, BackendError, DataSet, NoLoops, Opened, ServerFacts, WindowCollector, WindowFigures,
    data_set_plan,
};
use crate::dataset::{
    CheckReport, LoadObserver, LoadSummary, SchemaAction, SchemaCheck, SchemaOutcome, SetupAsk,
    SizingVerdict,
};
use crate::discover::FoundDataSet;
use crate::driver::{Canceller, OpError, Session};
use crate::interrupt::Interrupts;
use crate::plan::RunPlan;
use crate::result::{DataSetInfo, Environment};
use crate::teardown::{ObjectNames, SchemaDrop, TeardownPlan, TeardownReport};
use crate::{Config, ErrorKind};

/// What the fake calls the data set's objects.
const NAMES: ObjectNames = ObjectNames {
    schema: "schema",
    table: "cf1",
    index: "i_cf1",
};

/// A schema the fake server holds: dbio's mark, and what the user added beside dbio's table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeSchema {
    pub prefix: String,
    pub rows: u64,
    pub foreign_objects: Vec<String>,
}

/// The one step of a fake run that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAt {
    Refuse,
    Preflight,
    OpenSessions,
    Collector,
    /// The collector's "before" snapshot, just before the window.
    Begin,
}

/// The backend calls a run made, in order, shared with the fake's collector.
pub type Calls = Arc<Mutex<Vec<&'static str>>>;

/// A backend over no database.
pub struct FakeBackend {
    pub fail: Option<FailAt>,
    /// What `clock_offset_s` reports.
    pub clock_offset_s: Option<f64>,
    /// Files the collector hands back at the window's end, to be written beside result.json.
    pub files: Vec<(String, Vec<u8>)>,
    /// A folder the collector's `end` deletes (the result folder gone under the run).
    pub remove_at_end: Option<PathBuf>,
    pub calls: Calls,
    /// Sessions opened so far, and those not yet dropped (closed).
    pub opened: Arc<AtomicUsize>,
    pub live: Arc<AtomicUsize>,
    /// The data set's schemas the fake server holds, by name (setup, check, teardown).
    pub schemas: BTreeMap<String, FakeSchema>,
    /// What `list` reads of the marks, or the kind of error it fails with.
    pub marked: Result<Vec<FoundDataSet>, ErrorKind>,
}

impl FakeBackend {
    pub fn new() -> FakeBackend {
        FakeBackend {
            fail: None,
            clock_offset_s: None,
            files: Vec::new(),
            remove_at_end: None,
            calls: Arc::default(),
            opened: Arc::default(),
            live: Arc::default(),
            schemas: BTreeMap::new(),
            marked: Ok(Vec::new()),
        }
    }

    pub fn failing_at(at: FailAt) -> FakeBackend {
        FakeBackend {
            fail: Some(at),
            ..FakeBackend::new()
        }
    }

    /// The calls made so far.
    pub fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn call(&self, name: &'static str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(name);
        }
    }

    fn fails_at(&self, at: FailAt) -> bool {
        self.fail == Some(at)
    }
}

/// The facts of a one-schema data set of 8 kB blocks.
fn facts() -> ServerFacts {
    ServerFacts {
        block_size: 8192,
        schema_names: vec!["user1".into()],
        target: "fake".into(),
        environment: Environment {
            dbio_version: "test".into(),
            client_host: "localhost".into(),
            target: "fake".into(),
            pinned_server: None,
            server_version: "Fake 1".into(),
            server_version_num: 10000,
            settings: BTreeMap::new(),
            data_set: DataSetInfo {
                schemas: 1,
                scale_blocks: 1000,
                block_size: 8192,
                table_bytes: 1000 * 8192,
                schemas_used: vec!["user1".into()],
                tables: Vec::new(),
            },
            session_tls: None,
            read_path: None,
        },
        warnings: vec!["fake: a warning from preflight".into()],
        notes: Vec::new(),
        describe: "Fake 1".into(),
        server_id: None,
    }
}

/// A run takes whatever data set it asks for, in 8 kB blocks; setup, check and teardown keep
/// theirs in [`FakeBackend::schemas`], one row per block as on a real server.
impl DataSet for FakeBackend {
    async fn block_size(&mut self, _: &Config) -> Result<u64, BackendError> {
        Ok(8192)
    }

    async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
        self.call("list");
        self.marked
            .clone()
            .map_err(|kind| BackendError::new(kind, "fake: the marks cannot be read"))
    }

    async fn check(&mut self, config: &Config) -> Result<CheckReport, BackendError> {
        self.call("check");
        let plan = data_set_plan(self, config).await?;
        let schemas = plan
            .schema_names()
            .into_iter()
            .map(|name| {
                let problems = match self.schemas.get(&name) {
                    None => vec![format!("no table {}.cf1 of dbio's", name)],
                    Some(s) if s.rows != plan.scale_blocks => {
                        vec![format!("rows {}/{}", s.rows, plan.scale_blocks)]
                    }
                    Some(_) => Vec::new(),
                };
                SchemaCheck {
                    facts: vec![format!("rows {0}/{0}", plan.scale_blocks)],
                    schema: name,
                    problems,
                }
            })
            .collect();
        Ok(CheckReport {
            schemas,
            missing_rights: Vec::new(),
        })
    }

    async fn setup(
        &mut self,
        config: &Config,
        ask: SetupAsk,
        observer: Arc<dyn LoadObserver>,
        interrupts: Interrupts,
    ) -> Result<LoadSummary, BackendError> {
        self.call("setup");
        let plan = data_set_plan(self, config).await?;
        let mut schemas = Vec::new();
        for name in plan.schema_names() {
            if interrupts.count() > 0 {
                return Err(BackendError::interrupted(format!(
                    "setup interrupted before {name}"
                )));
            }
            let complete = self
                .schemas
                .get(&name)
                .is_some_and(|s| s.prefix == plan.prefix && s.rows == plan.scale_blocks);
            let action = if complete && !ask.force {
                SchemaAction::Kept
            } else {
                observer.schema_started(&name, plan.scale_blocks);
                observer.rows_loaded(&name, plan.scale_blocks);
                self.schemas.insert(
                    name.clone(),
                    FakeSchema {
                        prefix: plan.prefix.clone(),
                        rows: plan.scale_blocks,
                        foreign_objects: Vec::new(),
                    },
                );
                SchemaAction::Loaded
            };
            let outcome = SchemaOutcome {
                schema: name.clone(),
                action,
                rows: plan.scale_blocks,
                table_bytes: plan.scale_blocks * plan.block_size,
                index_bytes: 0,
                seconds: 0.0,
            };
            observer.schema_finished(&name, &outcome);
            schemas.push(outcome);
        }
        Ok(LoadSummary {
            schemas,
            seconds: 0.0,
            sizing: SizingVerdict {
                data_bytes: plan.table_bytes(),
                shared_buffers_bytes: 0,
                host_ram_bytes: None,
                ram_cgroup_file: None,
                warnings: Vec::new(),
            },
        })
    }

    async fn teardown_plan(&mut self, prefix: &str) -> Result<TeardownPlan, BackendError> {
        self.call("teardown_plan");
        let mut plan = TeardownPlan::new(NAMES);
        plan.schemas = self
            .schemas
            .iter()
            .filter(|(_, s)| s.prefix == prefix)
            .map(|(name, s)| SchemaDrop {
                schema: name.clone(),
                exists: true,
                table: true,
                dependents: Vec::new(),
                foreign_objects: s.foreign_objects.clone(),
            })
            .collect();
        Ok(plan)
    }

    async fn teardown(
        &mut self,
        prefix: &str,
        _: bool,
        _: Interrupts,
    ) -> Result<TeardownReport, BackendError> {
        let plan = self.teardown_plan(prefix).await?;
        self.call("teardown");
        let mut report = TeardownReport::new(NAMES);
        for d in plan.schemas {
            // The schema goes, or stays without dbio's mark: either way no longer the data set's.
            self.schemas.remove(&d.schema);
            if d.foreign_objects.is_empty() {
                report.dropped.push(d.schema);
            } else {
                report.kept.push(d);
            }
        }
        Ok(report)
    }
}

impl Backend for FakeBackend {
    type Session = FakeSession;
    type LoopSession = NoLoops;
    type Collector = FakeCollector;

    fn name(&self) -> &'static str {
        "Fake"
    }

    fn refuse(&self, _: &Config) -> Result<(), BackendError> {
        if self.fails_at(FailAt::Refuse) {
            return Err(BackendError::usage(
                "fake: refused before anything was touched",
            ));
        }
        Ok(())
    }

    async fn preflight(&mut self, _: &Config) -> Result<ServerFacts, BackendError> {
        self.call("preflight");
        if self.fails_at(FailAt::Preflight) {
            return Err(BackendError::failed("fake: preflight found no data set"));
        }
        Ok(facts())
    }

    async fn open_sessions(&mut self, plan: &RunPlan) -> Result<Opened<FakeSession>, BackendError> {
        self.call("open_sessions");
        if self.fails_at(FailAt::OpenSessions) {
            return Err(BackendError::failed("fake: could not connect"));
        }
        let sessions = plan
            .specs()
            .iter()
            .map(|spec| {
                self.opened.fetch_add(1, Ordering::SeqCst);
                self.live.fetch_add(1, Ordering::SeqCst);
                (
                    spec.clone(),
                    FakeSession {
                        live: Arc::clone(&self.live),
                    },
                )
            })
            .collect();
        Ok(Opened {
            sessions,
            tls: None,
        })
    }

    async fn open_loop_sessions(&mut self, _: &RunPlan) -> Result<Opened<NoLoops>, BackendError> {
        Err(BackendError::failed("fake: no server-side loop"))
    }

    fn server_loop(&self) -> bool {
        false
    }

    async fn clock_offset_s(&mut self) -> Result<Option<f64>, BackendError> {
        self.call("clock_offset_s");
        Ok(self.clock_offset_s)
    }

    fn end_run(&mut self) {
        self.call("end_run");
    }

    async fn collector(&mut self, _: &RunPlan) -> Result<FakeCollector, BackendError> {
        self.call("collector");
        if self.fails_at(FailAt::Collector) {
            return Err(BackendError::failed(
                "fake: the collector could not connect",
            ));
        }
        Ok(FakeCollector {
            fail_begin: self.fails_at(FailAt::Begin),
            files: std::mem::take(&mut self.files),
            remove_at_end: self.remove_at_end.take(),
            calls: Arc::clone(&self.calls),
        })
    }
}

/// A session that reads and updates nothing, at once; dropping it closes it.
pub struct FakeSession {
    live: Arc<AtomicUsize>,
}

impl Drop for FakeSession {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Session for FakeSession {
    fn read(&mut self, lo: i64, hi: i64) -> Result<u64, OpError> {
        Ok((hi - lo + 1) as u64)
    }
    fn update(&mut self, lo: i64, hi: i64, _: &str) -> Result<u64, OpError> {
        Ok((hi - lo + 1) as u64)
    }
    fn canceller(&self) -> Canceller {
        Arc::new(|| {})
    }
    fn flush_stats(&mut self) {}
}

/// A collector that measures nothing: one warning, and the files it was given.
pub struct FakeCollector {
    fail_begin: bool,
    files: Vec<(String, Vec<u8>)>,
    remove_at_end: Option<PathBuf>,
    calls: Calls,
}

impl FakeCollector {
    fn call(&self, name: &'static str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(name);
        }
    }
}

impl WindowCollector for FakeCollector {
    async fn begin(&mut self) -> Result<(), BackendError> {
        self.call("begin");
        if self.fail_begin {
            return Err(BackendError::failed("fake: the before snapshot failed"));
        }
        Ok(())
    }

    async fn end(self, _: f64) -> WindowFigures {
        self.call("end");
        if let Some(dir) = &self.remove_at_end {
            let _ = std::fs::remove_dir_all(dir);
        }
        WindowFigures {
            warnings: vec!["fake: a warning from the collector".into()],
            files: self.files,
            ..WindowFigures::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::NoProgress;
    use crate::units::SizeSpec;

    /// Setup, check and teardown as the CLI calls them: through the trait only.
    async fn setup<D: DataSet>(d: &mut D, config: &Config, force: bool) -> LoadSummary {
        let ask = SetupAsk {
            force,
            drop_dependents: false,
        };
        d.setup(config, ask, Arc::new(NoProgress), Interrupts::never())
            .await
            .expect("setup")
    }

    fn actions(summary: &LoadSummary) -> Vec<(&str, SchemaAction)> {
        summary
            .schemas
            .iter()
            .map(|s| (s.schema.as_str(), s.action))
            .collect()
    }

    #[tokio::test]
    async fn setup_check_and_teardown_go_through_the_data_set_trait() {
        let mut config = Config::default();
        config.data.schemas = 2;
        config.data.scale = "1000blocks".parse::<SizeSpec>().expect("a size");
        let mut fake = FakeBackend::new();

        // Nothing yet: check fails for both schemas.
        let report = fake.check(&config).await.expect("check");
        assert_eq!(report.failed(), vec!["user1", "user2"]);

        let loaded = setup(&mut fake, &config, false).await;
        assert_eq!(
            actions(&loaded),
            vec![
                ("user1", SchemaAction::Loaded),
                ("user2", SchemaAction::Loaded)
            ]
        );
        assert_eq!(loaded.loaded_table_bytes(), 2 * 1000 * 8192);
        let report = fake.check(&config).await.expect("check");
        assert!(report.ok(), "{}", report.render_text());
        assert_eq!(report.schemas[1].facts, vec!["rows 1000/1000"]);

        // Complete schemas are kept, unless forced.
        let again = setup(&mut fake, &config, false).await;
        assert_eq!(again.loaded_table_bytes(), 0);
        assert!(again.schemas.iter().all(|s| s.action == SchemaAction::Kept));
        let forced = setup(&mut fake, &config, true).await;
        assert_eq!(forced.loaded_table_bytes(), 2 * 1000 * 8192);

        // The user's table in user2 keeps that schema; the plan says so before anything goes.
        if let Some(s) = fake.schemas.get_mut("user2") {
            s.foreign_objects.push("table user2.mine".into());
        }
        let plan = fake.teardown_plan("user").await.expect("plan");
        assert_eq!(
            plan.schemas
                .iter()
                .map(|d| (d.schema.as_str(), d.foreign_objects.len()))
                .collect::<Vec<_>>(),
            vec![("user1", 0), ("user2", 1)]
        );
        assert!(fake.teardown_plan("other").await.expect("plan").is_empty());
        assert_eq!(fake.check(&config).await.expect("check").failed().len(), 0);

        let report = fake
            .teardown("user", false, Interrupts::never())
            .await
            .expect("teardown");
        assert_eq!(report.dropped, vec!["user1"]);
        assert_eq!(
            report
                .kept
                .iter()
                .map(|k| (k.schema.as_str(), k.foreign_objects.clone()))
                .collect::<Vec<_>>(),
            vec![("user2", vec!["table user2.mine".to_string()])]
        );
        assert!(report.left.is_empty() && report.forgotten.is_empty());
        assert_eq!(
            report.render_text("fake", "user"),
            "dropped schema user1\n\
             dropped user2.cf1; kept schema user2 without dbio's mark: it holds objects dbio did not create (table user2.mine)\n"
        );

        // Gone: check fails again, and a second teardown finds nothing.
        assert_eq!(
            fake.check(&config).await.expect("check").failed(),
            vec!["user1", "user2"]
        );
        let nothing = fake
            .teardown("user", false, Interrupts::never())
            .await
            .expect("teardown");
        assert!(nothing.is_empty());
        assert_eq!(
            fake.calls(),
            vec![
                "check",
                "setup",
                "check",
                "setup",
                "setup",
                "teardown_plan",
                "teardown_plan",
                "check",
                "teardown_plan",
                "teardown",
                "check",
                "teardown_plan",
                "teardown"
            ]
        );
    }
}
