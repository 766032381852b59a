//! `dbio history add | list | show | check | report | accept | retire`, and `--record` on
//! run, ramp and calibrate: a few lines each over dbio-core's history (model, statistics,
//! rendering) and dbio-history's stores. Store work runs on a blocking thread: the PostgreSQL
//! store's client keeps its own runtime. Reading commands open the store read-only.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};
use clap::{Args, Subcommand};
use dbio_core::Config;
use dbio_core::history::check::{self, CheckOptions, Metric, SeriesCheck};
use dbio_core::history::record::{parse_document, resolve_tag};
use dbio_core::history::{
    Action, Added, Decision, HistoryError, HistoryStore, RecordKind, StoredRun, report,
};
use dbio_core::summary::document_path;

use crate::Failure;
use crate::args::Format;

impl From<HistoryError> for Failure {
    fn from(e: HistoryError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

/// Which store: a SQLite file (default results/history.sqlite) or postgresql://...
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// Results store: a SQLite file, or postgresql://USER@HOST:PORT/DB for a team (password
    /// from the URL or $PGPASSWORD) [default: results/history.sqlite]
    #[arg(long, value_name = "FILE|URL", env = "DBIO_HISTORY_STORE")]
    pub store: Option<String>,
}

impl StoreArgs {
    fn spec(&self) -> &str {
        self.store.as_deref().unwrap_or(dbio_history::DEFAULT_STORE)
    }
}

/// `--record`, `--store` and `--tag` of run and ramp.
#[derive(Debug, Args, Clone, Default)]
pub struct RecordArgs {
    /// Record the result in the results store (see `dbio history`), failed runs included:
    /// they never pass and never enter a series.
    #[arg(long)]
    pub record: bool,
    /// Results store for --record (ignored without it, so $DBIO_HISTORY_STORE may stay set): a
    /// SQLite file or postgresql://... [default: results/history.sqlite]
    #[arg(long, value_name = "FILE|URL", env = "DBIO_HISTORY_STORE")]
    pub store: Option<String>,
    /// Build id kept with the record [default: $DBIO_TAG, else $GITHUB_SHA]
    #[arg(long, value_name = "TEXT", requires = "record")]
    pub tag: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum HistoryAction {
    /// Record result.json, ramp.json or calibrate.json files (or folders holding one). Every
    /// file is tried: each bad one is named, the good ones are added, and the exit code is 1
    /// when any was not added (a duplicate, the same SHA-256 content, included).
    Add {
        #[arg(value_name = "RESULT", required = true)]
        results: Vec<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Build id kept with the records [default: $DBIO_TAG, else $GITHUB_SHA]
        #[arg(long, value_name = "TEXT")]
        tag: Option<String>,
    },
    /// Recorded runs, oldest first: id, start, kind, label, tag, status, steps, series.
    List {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        filter: FilterArgs,
        /// What stdout gets: text, or json (every run with its identity and figures).
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// One run: its identity and figures per step, or with --document its whole result
    /// document exactly as it was recorded.
    Show {
        /// The run's id (the first column of `dbio history list`).
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        store: StoreArgs,
        /// Print the stored result.json / ramp.json / calibrate.json byte for byte.
        #[arg(long)]
        document: bool,
        /// What stdout gets: text, or json (the record: identity and figures per step).
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// The gate: each series' state from its whole history. Exit 1 while a regression is
    /// open (new or ongoing) or the newest run failed, 0 otherwise, 2 on bad input.
    ///
    /// A series is the runs of one label and workload shape (data set, workload) at one
    /// step; server version, settings and dbio version changes are events on it. Per figure:
    /// change points by E-divisive means (every split of each window, several per series,
    /// each re-validated) and a first-night t-test of the newest run or two; the state is the
    /// last segment against the segment before the regression: ok, new, ongoing, recovered,
    /// accepted (`history accept`), platform (coincides with a change of the calibration
    /// canary; gated with --gate-platform) or cache (the newest run measured the page cache;
    /// gated with --allow-cache). Each figure shows its noise and the step it can detect.
    Check {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        options: CheckArgs,
        /// Config file for the history: section (alpha, min magnitude, per figure).
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Write JUnit XML for CI systems.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// What stdout gets: text, or json (every series with its state; see docs/nightly.md).
        #[arg(long, value_name = "FORMAT", value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Write history.html (per series its state, a trend chart per figure with dates, the
    /// noise band and change points; long series downsampled keeping change points and
    /// outliers) and history.csv (every run) into --out.
    Report {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        options: CheckArgs,
        /// Config file for the history: section.
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Folder for history.html and history.csv.
        #[arg(long, value_name = "DIR", required = true)]
        out: PathBuf,
    },
    /// Accept the level of a series from a run on as its new normal: the check compares
    /// later runs with it, says `accepted` with the reason, and is green. Kept in the store
    /// with who and when.
    Accept {
        /// The series: `label [hash]` as check prints it, or its label when it has one series.
        #[arg(value_name = "SERIES")]
        series: String,
        #[command(flatten)]
        store: StoreArgs,
        /// The first run of the new normal (an id of `dbio history list`).
        #[arg(long, value_name = "RUN")]
        from: i64,
        /// Why (kept with the decision and shown by check).
        #[arg(long, value_name = "TEXT")]
        reason: String,
        /// Only this step (`r4-w0`) [default: every step of the series]
        #[arg(long, value_name = "STEP")]
        step: Option<String>,
        /// Only this figure (e.g. client_read_p99_us) [default: every figure]
        #[arg(long, value_name = "METRIC")]
        metric: Option<String>,
        /// Who decided [default: $USER]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Stop checking a series (it stopped getting runs): check leaves it out until a newer
    /// run is recorded in it.
    Retire {
        /// The series: `label [hash]` as check prints it, or its label when it has one series.
        #[arg(value_name = "SERIES")]
        series: String,
        #[command(flatten)]
        store: StoreArgs,
        /// Why (kept with the decision).
        #[arg(long, value_name = "TEXT", default_value = "retired")]
        reason: String,
        /// Only this step [default: every step of the series]
        #[arg(long, value_name = "STEP")]
        step: Option<String>,
        /// Who decided [default: $USER]
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
}

/// Which runs list, check and report take.
#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Only series with this label (check and report always read the platform series too:
    /// they are the canary of every series).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Only runs with this build id.
    #[arg(long, value_name = "TEXT")]
    pub tag: Option<String>,
    /// Only runs started on or after this date (2026-12-01 or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only the newest N runs (list), of each series (check, report).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Only this step (`r4-w0`; a calibration's load level is `q4`).
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
}

impl FilterArgs {
    fn since(&self) -> Result<Option<DateTime<Utc>>, Failure> {
        let Some(s) = &self.since else {
            return Ok(None);
        };
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            return Ok(Some(t.with_timezone(&Utc)));
        }
        NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| Some(t.and_utc()))
            .ok_or_else(|| {
                Failure::new(
                    2,
                    format!("--since {s}: give a date (2026-12-01) or an RFC 3339 time"),
                )
            })
    }

    /// The filters given, as words (` labelled L with tag T since D at step S`), or nothing.
    fn describe(&self) -> String {
        let mut d = String::new();
        if let Some(l) = &self.label {
            d += &format!(" labelled {l}");
        }
        if let Some(t) = &self.tag {
            d += &format!(" with tag {t}");
        }
        if let Some(s) = &self.since {
            d += &format!(" since {s}");
        }
        if let Some(s) = &self.step {
            d += &format!(" at step {s}");
        }
        d
    }

    /// The runs the filters keep; platform runs pass the label filter when `platform`.
    fn runs(&self, runs: Vec<StoredRun>, platform: bool) -> Result<Vec<StoredRun>, Failure> {
        let since = self.since()?;
        Ok(runs
            .into_iter()
            .filter(|r| {
                let id = &r.record.identity;
                let is_platform = r.record.kind == RecordKind::Calibrate;
                self.label
                    .as_ref()
                    .is_none_or(|l| *l == id.label || (platform && is_platform))
                    && self.tag.as_ref().is_none_or(|t| id.tag.as_ref() == Some(t))
                    && since.is_none_or(|s| r.record.started >= s)
                    && self
                        .step
                        .as_ref()
                        .is_none_or(|st| r.record.steps.iter().any(|f| f.step == *st))
            })
            .collect())
    }

    fn series(&self, series: Vec<check::Series>) -> Vec<check::Series> {
        series
            .into_iter()
            .filter(|s| self.step.as_ref().is_none_or(|st| *st == s.step))
            .map(|mut s| {
                if let Some(n) = self.last {
                    let skip = s.runs.len().saturating_sub(n);
                    s.runs.drain(..skip);
                }
                s
            })
            .collect()
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct CheckArgs {
    /// Largest p-value of the gate (the last segment against the one before the regression;
    /// the first-night test) [config: history.alpha; default 0.0005]
    #[arg(long, value_name = "P")]
    pub alpha: Option<f64>,
    /// Largest p-value of a change point in the search (permutation test, re-validating
    /// t-test) [config: history.change_point_alpha; default 0.01]
    #[arg(long, value_name = "P")]
    pub change_point_alpha: Option<f64>,
    /// Smallest change of the mean, in %, that counts [config: history.min_magnitude_pct;
    /// default 3]
    #[arg(long, value_name = "PCT")]
    pub min_magnitude: Option<f64>,
    /// Runs per analysis window [config: history.window; default 30]
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
    /// Shuffles of the permutation test [config: history.permutations; default 199]
    #[arg(long, value_name = "N")]
    pub permutations: Option<usize>,
    /// Fail on platform changes (the calibration canary's series, and database changes that
    /// coincide with one) [config: history.gate_platform]
    #[arg(long)]
    pub gate_platform: bool,
    /// Gate on runs whose reads mostly did not reach storage (page-cache runs) instead of
    /// leaving them out [config: history.allow_cache]
    #[arg(long)]
    pub allow_cache: bool,
    /// Figures to check, comma-separated: db_read_iops, device_read_iops, client_ops_per_s,
    /// client_read_p99_us, db_avg_read_latency_us, device_read_latency_us [default: all]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub metric: Option<Vec<String>>,
}

impl CheckArgs {
    fn options(&self, config: &Config) -> Result<CheckOptions, Failure> {
        let mut h = config.history.clone();
        if let Some(v) = self.alpha {
            h.alpha = v;
        }
        if let Some(v) = self.change_point_alpha {
            h.change_point_alpha = v;
        }
        if let Some(v) = self.min_magnitude {
            h.min_magnitude_pct = v;
        }
        if let Some(v) = self.window {
            h.window = v;
        }
        if let Some(v) = self.permutations {
            h.permutations = v;
        }
        h.allow_cache |= self.allow_cache;
        h.gate_platform |= self.gate_platform;
        h.validate()
            .map_err(|e| Failure::new(2, format!("{e} (or the flag of the same name)")))?;
        let mut o = CheckOptions::from_config(&h);
        if let Some(list) = &self.metric {
            o.metrics = list
                .iter()
                .map(|m| {
                    Metric::parse(m).ok_or_else(|| {
                        Failure::new(
                            2,
                            format!(
                                "--metric {m}: not a tracked figure; use {}",
                                Metric::ALL.map(Metric::id).join(", ")
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(o)
    }
}

/// Runs store work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Failure::new(1, format!("the results store's thread failed: {e}")))?
}

/// `quiet` silences the notes on stderr (the JUnit file's name), never results or errors.
pub async fn dispatch(action: HistoryAction, quiet: bool) -> Result<u8, Failure> {
    blocking(move || run(action, quiet)).await
}

/// Adds one document; Ok(false) when the same content was stored already. `say` gets the
/// confirmation (stdout for `history add`, a note on stderr after a run or a ramp).
fn add_one(
    store: &mut dyn HistoryStore,
    path: &Path,
    tag: Option<&str>,
    say: &dyn Fn(&str),
) -> Result<bool, Failure> {
    let file = calibration_or_document(path);
    let text = dbio_core::input::read_bounded(&file, dbio_core::input::DOCUMENT_MAX_BYTES)
        .map_err(|e| Failure::new(2, format!("{}: {e}", file.display())))?;
    // The validation every reader of the document runs (report, compare, regress; run
    // --calibration): a document they would refuse is never stored, nor made a baseline.
    let kind = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str().map(str::to_string)));
    if kind.as_deref() == Some("calibrate") {
        dbio_calibrate::Calibration::read(&file)?;
    } else {
        dbio_core::summary::read_step_set(&file)?;
    }
    let tag = resolve_tag(tag, |k| std::env::var(k).ok());
    let record = parse_document(&text, &file.display().to_string(), tag)?;
    match store.add(&record, &text)? {
        Added::New(id) => {
            say(&format!(
                "history: recorded {} as run #{id} in {}: {} {}, {} step(s), status {}{}",
                file.display(),
                store.describe(),
                record.kind.as_str(),
                record.identity.series,
                record.steps.len(),
                record.status.as_str(),
                record
                    .identity
                    .tag
                    .as_ref()
                    .map(|t| format!(", tag {t}"))
                    .unwrap_or_default()
            ));
            Ok(true)
        }
        Added::Duplicate(id) => {
            errln!(
                "dbio: error: {}: the same result is already recorded as run #{id} in {} (same SHA-256 of its content); not added again",
                file.display(),
                store.describe()
            );
            Ok(false)
        }
    }
}

/// A folder holding calibrate.json (and no result) names it; anything else as results do.
fn calibration_or_document(path: &Path) -> PathBuf {
    let cal = path.join("calibrate.json");
    if path.is_dir() && cal.is_file() && !path.join("result.json").exists() {
        cal
    } else {
        document_path(path)
    }
}

/// `--record` after a run, a ramp or a calibration: the result is already written; a failure
/// here says so. Its confirmation is a note on stderr, none when `quiet`.
pub async fn record(document: PathBuf, args: &RecordArgs, quiet: bool) -> Result<(), Failure> {
    let spec = args
        .store
        .clone()
        .unwrap_or_else(|| dbio_history::DEFAULT_STORE.to_string());
    let tag = args.tag.clone();
    blocking(move || {
        let mut store = dbio_history::open(&spec).map_err(|e| {
            Failure::of(
                e.kind(),
                format!(
                    "{e}; the result itself is kept in {} (record it later with `dbio history add`)",
                    document.display()
                ),
            )
        })?;
        let note = |text: &str| {
            if !quiet {
                errln!("{text}");
            }
        };
        add_one(store.as_mut(), &document, tag.as_deref(), &note)?;
        Ok(())
    })
    .await
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

/// The series `name` names: its `label [hash]`, or a label with one series.
fn resolve_series(runs: &[StoredRun], name: &str, store: &str) -> Result<String, Failure> {
    let all = check::series_of(runs);
    let mut keys: Vec<&str> = all.iter().map(|s| s.series.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.contains(&name) {
        return Ok(name.to_string());
    }
    let by_label: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| all.iter().any(|s| s.series == *k && s.label == name))
        .collect();
    match by_label.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(Failure::new(
            2,
            format!(
                "no series `{name}` in {store}; series: {}",
                if keys.is_empty() {
                    "none".to_string()
                } else {
                    keys.join(", ")
                }
            ),
        )),
        many => Err(Failure::new(
            2,
            format!(
                "label `{name}` has {} series in {store}: name one of {}",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

fn who(by: Option<String>) -> String {
    by.filter(|b| !b.trim().is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

/// The check's JSON document (README: "history check --format json").
#[derive(serde::Serialize)]
struct CheckDocument<'a> {
    store: String,
    exit: u8,
    series: &'a [SeriesCheck],
    retired: Vec<String>,
    options: &'a CheckOptions,
}

fn load_config(path: Option<&Path>) -> Result<Config, Failure> {
    let cfg = Config::load(path)?;
    cfg.validate()?;
    Ok(cfg)
}

fn run(action: HistoryAction, quiet: bool) -> Result<u8, Failure> {
    match action {
        HistoryAction::Add {
            results,
            store,
            tag,
        } => {
            let mut s = dbio_history::open(store.spec())?;
            let mut refused = 0;
            for path in &results {
                match add_one(s.as_mut(), path, tag.as_deref(), &|t| outln!("{t}")) {
                    Ok(true) => {}
                    Ok(false) => refused += 1,
                    // A store that fails stops everything; a bad file is named and skipped.
                    Err(e) if e.code == 2 && !e.message.starts_with("results store") => {
                        errln!("dbio: error: {}", e.message);
                        refused += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
            if refused > 0 {
                errln!(
                    "dbio: {refused} of {} file(s) not added; the others are recorded",
                    results.len()
                );
            }
            Ok(if refused > 0 { 1 } else { 0 })
        }
        HistoryAction::List {
            store,
            filter,
            format,
        } => {
            let mut s = dbio_history::open_read(store.spec())?;
            let mut runs = filter.runs(s.runs()?, false)?;
            if let Some(n) = filter.last {
                let skip = runs.len().saturating_sub(n);
                runs.drain(..skip);
            }
            if format == Format::Json {
                super::print_json(&runs)?;
                return Ok(0);
            }
            outln!(
                "{:>5}  {:<20}  {:<9}  {:<12}  {:<8}  {:<11}  {:>5}  series",
                "id",
                "started (UTC)",
                "kind",
                "tag",
                "status",
                "host",
                "steps"
            );
            for r in &runs {
                let rec = &r.record;
                outln!(
                    "{:>5}  {:<20}  {:<9}  {:<12}  {:<8}  {:<11}  {:>5}  {}",
                    r.id,
                    rec.started.format("%Y-%m-%d %H:%M:%S"),
                    rec.kind.as_str(),
                    rec.identity.tag.as_deref().unwrap_or("-"),
                    rec.status.as_str(),
                    rec.identity.host,
                    rec.steps.len(),
                    dbio_core::history::record::series_key(
                        &rec.identity.label,
                        &rec.identity.shape
                    )
                );
            }
            outln!("{} run(s) in {}", runs.len(), s.describe());
            Ok(0)
        }
        HistoryAction::Show {
            id,
            store,
            document,
            format,
        } => {
            let mut s = dbio_history::open_read(store.spec())?;
            let missing = |s: &dyn HistoryStore| {
                Failure::new(
                    2,
                    format!("no run #{id} in {}: see `dbio history list`", s.describe()),
                )
            };
            if document {
                let doc = s.document(id)?.ok_or_else(|| missing(s.as_ref()))?;
                crate::term::print_json_text(&doc);
                return Ok(0);
            }
            let run = s
                .runs()?
                .into_iter()
                .find(|r| r.id == id)
                .ok_or_else(|| missing(s.as_ref()))?;
            if format == Format::Json {
                super::print_json(&run)?;
                return Ok(0);
            }
            let rec = &run.record;
            let i = &rec.identity;
            outln!(
                "run #{id} ({}), recorded {}",
                rec.kind.as_str(),
                run.recorded_at.to_rfc3339()
            );
            outln!(
                "  label:   {}\n  series:  {}",
                i.label,
                dbio_core::history::record::series_key(&i.label, &i.shape)
            );
            outln!(
                "  tag:     {}",
                match (&i.tag, &i.tag_source) {
                    (Some(t), Some(src)) => format!("{t} (from {src})"),
                    (Some(t), None) => t.clone(),
                    _ => "none".into(),
                }
            );
            outln!("  status:  {}", rec.status.as_str());
            outln!(
                "  window:  {} .. {}",
                rec.started.to_rfc3339(),
                rec.finished.to_rfc3339()
            );
            outln!("  host:    {}\n  target:  {}", i.host, i.target);
            outln!("  server:  {} ({})", i.server_version, i.server_version_num);
            outln!("  dbio:    {}", i.dbio_version);
            outln!("  shape:   {}", i.shape);
            outln!("  content: sha256 {}", rec.content_sha256);
            outln!(
                "  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}  cache",
                "step",
                "status",
                "DB read/s",
                "device r/s",
                "client op/s",
                "p99 µs",
                "DB lat µs",
                "dev lat µs"
            );
            for f in &rec.steps {
                outln!(
                    "  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}  {}",
                    f.step,
                    f.status.as_str(),
                    opt(f.db_read_iops),
                    opt(f.device_read_iops),
                    opt(f.client_ops_per_s),
                    opt(f.client_read_p99_us),
                    opt(f.db_avg_read_latency_us),
                    opt(f.device_read_latency_us),
                    match f.cache_served {
                        Some(true) => format!(
                            "yes ({} of reads reached the device)",
                            f.physical_read_ratio
                                .map(|r| format!("{:.0}%", 100.0 * r))
                                .unwrap_or_else(|| "under half".into())
                        ),
                        Some(false) => "no".into(),
                        None => "unknown".into(),
                    }
                );
            }
            Ok(0)
        }
        HistoryAction::Check {
            store,
            filter,
            options,
            config,
            junit,
            format,
        } => {
            let cfg = load_config(config.as_deref())?;
            let o = options.options(&cfg)?;
            let mut s = dbio_history::open_read(store.spec())?;
            let runs = filter.runs(s.runs()?, true)?;
            if runs.is_empty() {
                return Err(Failure::new(
                    2,
                    format!(
                        "no runs{} in {}: record some with `dbio run --record`, `dbio ramp --record` or `dbio history add`{}",
                        filter.describe(),
                        s.describe(),
                        if filter.describe().is_empty() {
                            ""
                        } else {
                            ", or widen the filters (`dbio history list` shows what is there)"
                        }
                    ),
                ));
            }
            let decisions = s.decisions()?;
            let series = filter.series(check::series_of(&runs));
            let checks = check::check(&series, &o, &decisions);
            let retired = check::retired(&series, &decisions);
            let exit = if checks.iter().any(SeriesCheck::regressed) {
                1
            } else {
                0
            };
            if format == Format::Json {
                super::print_json(&CheckDocument {
                    store: s.describe(),
                    exit,
                    series: &checks,
                    retired,
                    options: &o,
                })?;
            } else {
                out!("{}", check::render_text(&checks, &retired));
            }
            if let Some(path) = junit {
                dbio_core::output::write_atomic(&path, check::render_junit(&checks).as_bytes())
                    .map_err(|e| {
                        Failure::new(1, format!("cannot write {}: {e}", path.display()))
                    })?;
                if !quiet {
                    errln!("history: JUnit XML written to {}", path.display());
                }
            }
            Ok(exit)
        }
        HistoryAction::Report {
            store,
            filter,
            options,
            config,
            out,
        } => {
            let cfg = load_config(config.as_deref())?;
            let o = options.options(&cfg)?;
            let mut s = dbio_history::open_read(store.spec())?;
            let runs = filter.runs(s.runs()?, true)?;
            let decisions = s.decisions()?;
            let series = filter.series(check::series_of(&runs));
            let r = report::render(&series, &o, &decisions, &s.describe());
            std::fs::create_dir_all(&out)
                .map_err(|e| Failure::new(2, format!("cannot create {}: {e}", out.display())))?;
            for (name, body) in [("history.html", &r.html), ("history.csv", &r.csv)] {
                let path = out.join(name);
                dbio_core::output::write_atomic(&path, body.as_bytes()).map_err(|e| {
                    Failure::new(1, format!("cannot write {}: {e}", path.display()))
                })?;
            }
            outln!(
                "history: {} chart(s) of {} run(s); {} and {}",
                r.charts.len(),
                runs.len(),
                out.join("history.html").display(),
                out.join("history.csv").display()
            );
            Ok(0)
        }
        HistoryAction::Accept {
            series,
            store,
            from,
            reason,
            step,
            metric,
            by,
        } => {
            if reason.trim().is_empty() {
                return Err(Failure::new(
                    2,
                    "--reason: say why the new level is accepted",
                ));
            }
            if let Some(m) = &metric
                && Metric::parse(m).is_none()
            {
                return Err(Failure::new(
                    2,
                    format!(
                        "--metric {m}: not a tracked figure; use {}",
                        Metric::ALL.map(Metric::id).join(", ")
                    ),
                ));
            }
            let mut s = dbio_history::open(store.spec())?;
            let runs = s.runs()?;
            let key = resolve_series(&runs, &series, &s.describe())?;
            let in_series = check::series_of(&runs)
                .iter()
                .filter(|x| x.series == key && step.as_ref().is_none_or(|st| *st == x.step))
                .any(|x| x.runs.iter().any(|r| r.run_id == from));
            if !in_series {
                return Err(Failure::new(
                    2,
                    format!(
                        "run #{from} is not a run of {key}{}: see `dbio history list --label ...`",
                        step.as_ref()
                            .map(|st| format!(" step {st}"))
                            .unwrap_or_default()
                    ),
                ));
            }
            let d = Decision {
                id: 0,
                series: key.clone(),
                step,
                metric,
                action: Action::Accept,
                from_run: from,
                reason,
                decided_by: who(by),
                decided_at: Utc::now(),
            };
            let id = s.decide(&d)?;
            outln!(
                "history: decision #{id}: {key} accepted from run #{from} by {} ({}): {}",
                d.decided_by,
                d.decided_at.format("%Y-%m-%d %H:%M UTC"),
                d.reason
            );
            Ok(0)
        }
        HistoryAction::Retire {
            series,
            store,
            reason,
            step,
            by,
        } => {
            let mut s = dbio_history::open(store.spec())?;
            let runs = s.runs()?;
            let key = resolve_series(&runs, &series, &s.describe())?;
            let newest = check::series_of(&runs)
                .iter()
                .filter(|x| x.series == key && step.as_ref().is_none_or(|st| *st == x.step))
                .flat_map(|x| x.runs.iter().map(|r| r.run_id))
                .max()
                .ok_or_else(|| {
                    Failure::new(
                        2,
                        format!("{key} has no step {}", step.as_deref().unwrap_or_default()),
                    )
                })?;
            let d = Decision {
                id: 0,
                series: key.clone(),
                step,
                metric: None,
                action: Action::Retire,
                from_run: newest,
                reason,
                decided_by: who(by),
                decided_at: Utc::now(),
            };
            let id = s.decide(&d)?;
            outln!(
                "history: decision #{id}: {key} retired after run #{newest} by {}: {}; a newer run in it is checked again",
                d.decided_by,
                d.reason
            );
            Ok(0)
        }
    }
}
