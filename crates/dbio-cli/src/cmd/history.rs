//! `dbio history add | list | show | check | report`, and `--record` on run and ramp: a few
//! lines each over dbio-core's history (model, statistics, rendering) and dbio-history's
//! stores. Store work runs on a blocking thread: the PostgreSQL store's client keeps its own
//! runtime.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use dbio_core::Config;
use dbio_core::history::check::{self, CheckOptions, Metric};
use dbio_core::history::edivisive;
use dbio_core::history::record::{parse_document, resolve_tag};
use dbio_core::history::{Added, HistoryError, HistoryStore, StoredRun, report};
use dbio_core::summary::document_path;

use crate::Failure;

impl From<HistoryError> for Failure {
    fn from(e: HistoryError) -> Self {
        Failure::new(e.exit_code(), e.to_string())
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
    /// Record result.json or ramp.json files (or folders holding one). The same content
    /// twice is refused (SHA-256 of the document).
    Add {
        #[arg(value_name = "RESULT", required = true)]
        results: Vec<PathBuf>,
        #[command(flatten)]
        store: StoreArgs,
        /// Build id kept with the records [default: $DBIO_TAG, else $GITHUB_SHA]
        #[arg(long, value_name = "TEXT")]
        tag: Option<String>,
    },
    /// Every recorded run, oldest first: id, start, kind, label, tag, status, steps, series.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Only runs with this label.
        #[arg(long, value_name = "TEXT")]
        label: Option<String>,
        /// Output format.
        #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// One run: its identity and figures per step, or with --document its whole result
    /// document exactly as it was recorded.
    Show {
        /// The run's id (the first column of `dbio history list`).
        #[arg(value_name = "ID")]
        id: i64,
        #[command(flatten)]
        store: StoreArgs,
        /// Print the stored result.json / ramp.json byte for byte.
        #[arg(long)]
        document: bool,
    },
    /// Change-point detection over each series' history: exit 1 when a change for the worse
    /// starts among the newest runs, or the newest run failed.
    ///
    /// A series is the runs of one label and workload shape at one step. Per figure (DB read
    /// IOPS, device read IOPS, client ops/s, client read p99, DB avg read latency):
    /// E-divisive means with a permutation test, in windows, re-validated by Student's t-test
    /// and a minimum change. Until a series has --min-runs good runs, regress against its
    /// first good run (thresholds from the config's regress: section) decides instead.
    Check {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        options: CheckArgs,
        /// Config file for the fallback regress thresholds (regress: section).
        #[arg(short = 'c', long = "config", value_name = "FILE")]
        config: Option<PathBuf>,
        /// Write JUnit XML for CI systems.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Write history.html (an SVG trend chart per series, step and metric, change points
    /// marked) and history.csv (the series) into --out.
    Report {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        options: CheckArgs,
        /// Folder for history.html and history.csv.
        #[arg(long, value_name = "DIR", required = true)]
        out: PathBuf,
    },
}

#[derive(Debug, Args, Clone)]
pub struct CheckArgs {
    /// Only series with this label.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// A change point among this many newest runs fails the check.
    #[arg(long, value_name = "N", default_value = "5")]
    pub newest: usize,
    /// Good runs a series needs before change points decide (fewer: regress).
    #[arg(long, value_name = "N", default_value = "8")]
    pub min_runs: usize,
    /// Runs per analysis window.
    #[arg(long, value_name = "N", default_value = "30")]
    pub window: usize,
    /// Largest p-value of a change point (permutation test and t-test).
    #[arg(long, value_name = "P", default_value = "0.01")]
    pub alpha: f64,
    /// Smallest change of the mean, in %, that counts.
    #[arg(long, value_name = "PCT", default_value = "5")]
    pub min_magnitude: f64,
    /// Shuffles of the permutation test.
    #[arg(long, value_name = "N", default_value = "199")]
    pub permutations: usize,
    /// Figures to check, comma-separated: db_read_iops, device_read_iops, client_ops_per_s,
    /// client_read_p99_us, db_avg_read_latency_us [default: all]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub metric: Option<Vec<String>>,
}

impl CheckArgs {
    fn options(&self, config: &Config) -> Result<CheckOptions, Failure> {
        let bad = |m: String| Err(Failure::new(2, m));
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return bad(format!(
                "--alpha {}: give a p-value between 0 and 1, e.g. 0.01",
                self.alpha
            ));
        }
        if !(self.min_magnitude.is_finite() && self.min_magnitude >= 0.0) {
            return bad(format!(
                "--min-magnitude {}: give a percentage of 0 or more",
                self.min_magnitude
            ));
        }
        if self.window < 4 || self.min_runs < 3 || self.newest == 0 || self.permutations < 19 {
            return bad(
                "--window needs 4 or more runs, --min-runs 3 or more, --newest 1 or more, --permutations 19 or more".into(),
            );
        }
        let metrics = match &self.metric {
            None => Metric::ALL.to_vec(),
            Some(list) => list
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
                .collect::<Result<_, _>>()?,
        };
        Ok(CheckOptions {
            cpd: edivisive::Options {
                window: self.window,
                alpha: self.alpha,
                permutations: self.permutations,
                min_magnitude: self.min_magnitude / 100.0,
                ..edivisive::Options::default()
            },
            newest: self.newest,
            min_runs: self.min_runs,
            metrics,
            fallback: config.regress.clone(),
        })
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
    let file = document_path(path);
    // The validation every reader of a result runs (report, compare, regress): a document
    // they would refuse is never stored, nor made a baseline.
    dbio_core::summary::read_step_set(&file)?;
    let text = dbio_core::input::read_bounded(&file, dbio_core::input::DOCUMENT_MAX_BYTES)
        .map_err(|e| Failure::new(2, format!("{}: {e}", file.display())))?;
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

/// `--record` after a run or a ramp: the result is already written; a failure here says so.
/// Its confirmation is a note on stderr, none when `quiet`.
pub async fn record(document: PathBuf, args: &RecordArgs, quiet: bool) -> Result<(), Failure> {
    let spec = args
        .store
        .clone()
        .unwrap_or_else(|| dbio_history::DEFAULT_STORE.to_string());
    let tag = args.tag.clone();
    blocking(move || {
        let mut store = dbio_history::open(&spec).map_err(|e| {
            Failure::new(
                e.exit_code(),
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

fn runs_with_label(
    store: &mut dyn HistoryStore,
    label: Option<&str>,
) -> Result<Vec<StoredRun>, Failure> {
    let mut runs = store.runs()?;
    if let Some(l) = label {
        runs.retain(|r| r.record.identity.label == l);
    }
    Ok(runs)
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
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
                if !add_one(s.as_mut(), path, tag.as_deref(), &|t| outln!("{t}"))? {
                    refused += 1;
                }
            }
            Ok(if refused > 0 { 2 } else { 0 })
        }
        HistoryAction::List {
            store,
            label,
            format,
        } => {
            let mut s = dbio_history::open(store.spec())?;
            let runs = runs_with_label(s.as_mut(), label.as_deref())?;
            if format == "json" {
                let text = serde_json::to_string_pretty(&runs)
                    .map_err(|e| Failure::new(1, e.to_string()))?;
                outln!("{text}");
                return Ok(0);
            }
            outln!(
                "{:>5}  {:<20}  {:<4}  {:<12}  {:<8}  {:<11}  {:>5}  series",
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
                    "{:>5}  {:<20}  {:<4}  {:<12}  {:<8}  {:<11}  {:>5}  {}",
                    r.id,
                    rec.started.format("%Y-%m-%d %H:%M:%S"),
                    rec.kind.as_str(),
                    rec.identity.tag.as_deref().unwrap_or("-"),
                    rec.status.as_str(),
                    rec.identity.host,
                    rec.steps.len(),
                    rec.identity.series
                );
            }
            outln!("{} run(s) in {}", runs.len(), s.describe());
            Ok(0)
        }
        HistoryAction::Show {
            id,
            store,
            document,
        } => {
            let mut s = dbio_history::open(store.spec())?;
            if document {
                let doc = s.document(id)?.ok_or_else(|| {
                    Failure::new(
                        2,
                        format!("no run #{id} in {}: see `dbio history list`", s.describe()),
                    )
                })?;
                crate::term::print_json_text(&doc);
                return Ok(0);
            }
            let run = s.runs()?.into_iter().find(|r| r.id == id).ok_or_else(|| {
                Failure::new(
                    2,
                    format!("no run #{id} in {}: see `dbio history list`", s.describe()),
                )
            })?;
            let rec = &run.record;
            let i = &rec.identity;
            outln!(
                "run #{id} ({}), recorded {}",
                rec.kind.as_str(),
                run.recorded_at.to_rfc3339()
            );
            outln!("  label:   {}\n  series:  {}", i.label, i.series);
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
            outln!("  shape:   {}", i.shape);
            outln!("  content: sha256 {}", rec.content_sha256);
            outln!(
                "  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12} {:>12}",
                "step",
                "status",
                "DB read/s",
                "device r/s",
                "client op/s",
                "p99 µs",
                "DB lat µs"
            );
            for f in &rec.steps {
                outln!(
                    "  {:<10} {:<8} {:>12} {:>12} {:>12} {:>12} {:>12}",
                    f.step,
                    f.status.as_str(),
                    opt(f.db_read_iops),
                    opt(f.device_read_iops),
                    opt(f.client_ops_per_s),
                    opt(f.client_read_p99_us),
                    opt(f.db_avg_read_latency_us)
                );
            }
            Ok(0)
        }
        HistoryAction::Check {
            store,
            options,
            config,
            junit,
        } => {
            let cfg = Config::load(config.as_deref())?;
            cfg.validate()?;
            let o = options.options(&cfg)?;
            let mut s = dbio_history::open(store.spec())?;
            let runs = runs_with_label(s.as_mut(), options.label.as_deref())?;
            if runs.is_empty() {
                return Err(Failure::new(
                    2,
                    format!(
                        "no runs{} in {}: record some with `dbio run --record`, `dbio ramp --record` or `dbio history add`",
                        options
                            .label
                            .as_ref()
                            .map(|l| format!(" labelled {l}"))
                            .unwrap_or_default(),
                        s.describe()
                    ),
                ));
            }
            let checks = check::check(&check::series_of(&runs), &o);
            out!("{}", check::render_text(&checks));
            if let Some(path) = junit {
                dbio_core::output::write_atomic(&path, check::render_junit(&checks).as_bytes())
                    .map_err(|e| {
                        Failure::new(1, format!("cannot write {}: {e}", path.display()))
                    })?;
                if !quiet {
                    errln!("history: JUnit XML written to {}", path.display());
                }
            }
            Ok(if checks.iter().any(|c| c.regressed()) {
                1
            } else {
                0
            })
        }
        HistoryAction::Report {
            store,
            options,
            out,
        } => {
            let o = options.options(&Config::default())?;
            let mut s = dbio_history::open(store.spec())?;
            let runs = runs_with_label(s.as_mut(), options.label.as_deref())?;
            let r = report::render(&check::series_of(&runs), &o, &s.describe());
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
    }
}
