//! A backend with no database behind it, for the run pipeline's own logic (the order of its
//! phases, what each leaves behind when it fails): any one step can be made to fail, and the
//! fake records the calls the pipeline made and counts the sessions still open. The
//! database itself is tested end to end against real servers (tests/e2e).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::Config;
use crate::backend::{
    Backend, BackendError, DataSet, NoLoops, Opened, ServerFacts, WindowCollector, WindowFigures,
};
use crate::dataset::CheckReport;
use crate::discover::FoundDataSet;
use crate::driver::{Canceller, OpError, Session};
use crate::plan::RunPlan;
use crate::result::{DataSetInfo, Environment};

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

/// The fake's data set is whatever a run asks for, in 8 kB blocks; list and check are not
/// part of a run.
impl DataSet for FakeBackend {
    async fn block_size(&mut self, _: &Config) -> Result<u64, BackendError> {
        Ok(8192)
    }
    async fn list(&mut self) -> Result<Vec<FoundDataSet>, BackendError> {
        Ok(Vec::new())
    }
    async fn check(&mut self, _: &Config) -> Result<CheckReport, BackendError> {
        Err(BackendError::failed("fake: no data set to check"))
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
