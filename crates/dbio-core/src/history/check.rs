//! `dbio history check`: the gate state of every series (runs of one label and workload shape
//! at one step) and figure, decided from its whole history.
//!
//! - Change points: E-divisive means over every split of each window (see [`edivisive`]),
//!   several per series, each re-validated against its neighbours; and a first-night test of
//!   the newest one or two runs against the segment before them (Student's t, one-sided), so
//!   a step is seen the night it happens even on a short series.
//! - State: the last segment against the segment before the last change for the worse. It is
//!   red (`new` the first night, then `ongoing`) for as long as the last segment stays worse,
//!   until a later change point brings it back within the noise (`recovered`) or someone
//!   accepts the new level (`accepted`, with the reason).
//! - Environment changes (server version, settings, dbio version) are events on the series;
//!   a regression that starts with one names it. A change that coincides with a change of the
//!   platform canary (a calibration series) is `platform` and gated only on request; a newest
//!   run whose reads mostly did not reach storage is `cache` and not gated.
//! - A failed or interrupted run never passes and never enters a series.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::history::{HistoryConfig, MetricThresholds};
use crate::driver::RunStatus;
use crate::history::edivisive::{self, ChangePoint, Segment};
use crate::history::record::series_key;
use crate::history::{Action, Decision, RecordKind, StepFigures, StoredRun};
use crate::report::regress::{self, JunitCase};
use crate::summary::StepKey;

/// The figures history tracks per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    DbReadIops,
    DeviceReadIops,
    ClientOpsPerS,
    ClientReadP99Us,
    DbAvgReadLatencyUs,
    DeviceReadLatencyUs,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::DbReadIops,
        Metric::DeviceReadIops,
        Metric::ClientOpsPerS,
        Metric::ClientReadP99Us,
        Metric::DbAvgReadLatencyUs,
        Metric::DeviceReadLatencyUs,
    ];

    /// The name regress and the reports use, with its unit.
    pub fn name(self) -> &'static str {
        match self {
            Metric::DbReadIops => "DB read IOPS",
            Metric::DeviceReadIops => "device read IOPS",
            Metric::ClientOpsPerS => "client ops/s",
            Metric::ClientReadP99Us => "client read p99 µs",
            Metric::DbAvgReadLatencyUs => "DB avg read latency µs",
            Metric::DeviceReadLatencyUs => "device read latency µs",
        }
    }

    /// The column name of the store's `steps` table and of `--metric`.
    pub fn id(self) -> &'static str {
        match self {
            Metric::DbReadIops => "db_read_iops",
            Metric::DeviceReadIops => "device_read_iops",
            Metric::ClientOpsPerS => "client_ops_per_s",
            Metric::ClientReadP99Us => "client_read_p99_us",
            Metric::DbAvgReadLatencyUs => "db_avg_read_latency_us",
            Metric::DeviceReadLatencyUs => "device_read_latency_us",
        }
    }

    pub fn parse(s: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.id() == s.trim())
    }

    /// Throughput: higher is better; latency: lower is better.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::DbReadIops | Metric::DeviceReadIops | Metric::ClientOpsPerS
        )
    }

    pub fn pick(self, f: &StepFigures) -> Option<f64> {
        match self {
            Metric::DbReadIops => f.db_read_iops,
            Metric::DeviceReadIops => f.device_read_iops,
            Metric::ClientOpsPerS => f.client_ops_per_s,
            Metric::ClientReadP99Us => f.client_read_p99_us,
            Metric::DbAvgReadLatencyUs => f.db_avg_read_latency_us,
            Metric::DeviceReadLatencyUs => f.device_read_latency_us,
        }
        .filter(|v| v.is_finite())
    }

    fn worse(self, change: f64) -> bool {
        if self.higher_is_better() {
            change < 0.0
        } else {
            change > 0.0
        }
    }
}

/// One run of a series at one step.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesRun {
    pub run_id: i64,
    pub label: String,
    pub tag: Option<String>,
    pub started: DateTime<Utc>,
    /// `ok` only when the run and this step were both ok.
    pub status: RunStatus,
    pub figures: StepFigures,
    pub server_version: String,
    pub settings: BTreeMap<String, Option<String>>,
    pub dbio_version: String,
}

impl SeriesRun {
    /// `#12 (tag abc123, 2026-12-01 02:00 UTC)`.
    pub fn name(&self) -> String {
        format!(
            "#{} ({}{})",
            self.run_id,
            self.tag
                .as_ref()
                .map(|t| format!("tag {t}, "))
                .unwrap_or_default(),
            self.started.format("%Y-%m-%d %H:%M:%S UTC")
        )
    }

    pub fn reference(&self) -> RunRef {
        RunRef {
            run: self.run_id,
            tag: self.tag.clone(),
            date: self.started,
        }
    }

    /// Its reads mostly came from the OS page cache (see [`StepFigures::cache_served`]).
    pub fn cache_served(&self) -> bool {
        self.figures.cache_served == Some(true)
    }

    /// Its window opened without its steady-state rule holding (see
    /// [`StepFigures::steady`]): its figures may still have drifted.
    pub fn not_steady(&self) -> bool {
        self.figures.steady == Some(false)
    }
}

/// Database runs and ramps, or the platform canary (calibrations of the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeriesKind {
    Database,
    Platform,
}

/// The runs of one label and shape at one step, oldest first, failed ones included.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub series: String,
    pub label: String,
    pub kind: SeriesKind,
    pub step: String,
    pub runs: Vec<SeriesRun>,
}

impl Series {
    /// The runs a series is judged on: ok, and steady where a rule was given (a run whose
    /// window opened without its rule holding stays out, as a failed one does).
    pub fn ok_runs(&self) -> Vec<&SeriesRun> {
        self.runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok && !r.not_steady())
            .collect()
    }

    /// The good runs that measured `metric`, and their values; page-cache runs only when
    /// `with_cache`.
    pub fn values_with(&self, metric: Metric, with_cache: bool) -> (Vec<&SeriesRun>, Vec<f64>) {
        self.ok_runs()
            .into_iter()
            .filter(|r| with_cache || !r.cache_served())
            .filter_map(|r| metric.pick(&r.figures).map(|v| (r, v)))
            .unzip()
    }

    /// The good runs that measured `metric` (page-cache runs included), and their values.
    pub fn values(&self, metric: Metric) -> (Vec<&SeriesRun>, Vec<f64>) {
        self.values_with(metric, true)
    }

    /// Changes of the environment between consecutive runs: the server's version, a setting
    /// dbio records, dbio's own version. Not new series: events on this one.
    pub fn events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        for w in self.runs.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            if a.server_version != b.server_version
                && !a.server_version.is_empty()
                && !b.server_version.is_empty()
            {
                let up = version_key(&b.server_version) > version_key(&a.server_version);
                out.push(Event {
                    run: b.reference(),
                    kind: "server".into(),
                    what: format!(
                        "{} to PostgreSQL {} (from {})",
                        if up { "upgrade" } else { "downgrade" },
                        b.server_version,
                        a.server_version
                    ),
                });
            }
            let keys: std::collections::BTreeSet<&String> =
                a.settings.keys().chain(b.settings.keys()).collect();
            for k in keys {
                let (x, y) = (
                    a.settings.get(k).cloned().flatten(),
                    b.settings.get(k).cloned().flatten(),
                );
                if x != y {
                    let show = |v: Option<String>| v.unwrap_or_else(|| "unset".into());
                    out.push(Event {
                        run: b.reference(),
                        kind: "setting".into(),
                        what: format!("setting {k}: {} -> {}", show(x), show(y)),
                    });
                }
            }
            if a.dbio_version != b.dbio_version {
                out.push(Event {
                    run: b.reference(),
                    kind: "dbio".into(),
                    what: format!("dbio {} -> {}", a.dbio_version, b.dbio_version),
                });
            }
        }
        out
    }
}

fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Groups the store's runs into series: same label and comparable shape (workload and data
/// set, not the server's version or settings) and the same step (readers, writers,
/// update_pct). Calibrations form the platform series.
pub fn series_of(runs: &[StoredRun]) -> Vec<Series> {
    let mut by: BTreeMap<(SeriesKind, String, StepKey), Series> = BTreeMap::new();
    for run in runs {
        let r = &run.record;
        let kind = if r.kind == RecordKind::Calibrate {
            SeriesKind::Platform
        } else {
            SeriesKind::Database
        };
        // Computed from the shape, not the stored column: stores written before environment
        // changes became events split series on them.
        let key = series_key(&r.identity.label, &r.identity.shape);
        for f in &r.steps {
            let step = StepKey {
                readers: f.readers,
                writers: f.writers,
                update_pct: f.update_pct,
                rate_per_s: f.rate_per_s,
            };
            let status = if r.status != RunStatus::Ok {
                r.status
            } else {
                f.status
            };
            by.entry((kind, key.clone(), step))
                .or_insert_with(|| Series {
                    series: key.clone(),
                    label: r.identity.label.clone(),
                    kind,
                    step: f.step.clone(),
                    runs: Vec::new(),
                })
                .runs
                .push(SeriesRun {
                    run_id: run.id,
                    label: r.identity.label.clone(),
                    tag: r.identity.tag.clone(),
                    started: r.started,
                    status,
                    figures: f.clone(),
                    server_version: r.identity.server_version.clone(),
                    settings: r.identity.settings.clone(),
                    dbio_version: r.identity.dbio_version.clone(),
                });
        }
    }
    let mut all: Vec<Series> = by.into_values().collect();
    for s in &mut all {
        s.runs
            .sort_by(|a, b| a.started.cmp(&b.started).then(a.run_id.cmp(&b.run_id)));
    }
    all
}

/// How the check decides; from the config's `history:` section and the flags.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOptions {
    /// E-divisive: window, shuffles, seed; its alpha (the change-point alpha) and
    /// min_magnitude are the defaults of every figure.
    pub cpd: edivisive::Options,
    /// The gate's alpha, the default of every figure.
    pub alpha: f64,
    /// Per figure id: overrides of alpha, change_point_alpha, min_magnitude_pct.
    pub per_metric: BTreeMap<String, MetricThresholds>,
    /// A recovery is shown as `recovered` for this many runs, then `ok`.
    pub recovered_runs: usize,
    pub metrics: Vec<Metric>,
    pub allow_cache: bool,
    pub gate_platform: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions::from_config(&HistoryConfig::default())
    }
}

/// The thresholds one figure is judged by.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    /// The search: E-divisive at the change-point alpha, the minimum magnitude.
    pub cpd: edivisive::Options,
    /// The gate's alpha (the state's t-test and the first-night test).
    pub alpha: f64,
}

impl CheckOptions {
    pub fn from_config(h: &HistoryConfig) -> CheckOptions {
        CheckOptions {
            cpd: edivisive::Options {
                window: h.window,
                alpha: h.change_point_alpha,
                permutations: h.permutations,
                min_magnitude: h.min_magnitude_pct / 100.0,
                ..edivisive::Options::default()
            },
            alpha: h.alpha,
            per_metric: h.metrics.clone(),
            recovered_runs: h.recovered_runs,
            metrics: Metric::ALL.to_vec(),
            allow_cache: h.allow_cache,
            gate_platform: h.gate_platform,
        }
    }

    pub fn thresholds(&self, metric: Metric) -> Thresholds {
        let o = self.per_metric.get(metric.id());
        let mut cpd = self.cpd.clone();
        if let Some(a) = o.and_then(|o| o.change_point_alpha) {
            cpd.alpha = a;
        }
        if let Some(m) = o.and_then(|o| o.min_magnitude_pct) {
            cpd.min_magnitude = m / 100.0;
        }
        Thresholds {
            cpd,
            alpha: o.and_then(|o| o.alpha).unwrap_or(self.alpha),
        }
    }
}

/// The gate state of a figure or a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// No open regression.
    Ok,
    /// A recovery: the level is back within the noise of where it was before a regression.
    Recovered,
    /// The level since an accepted run is the new normal.
    Accepted,
    /// The newest run measured the page cache, not storage: not gated (unless --allow-cache).
    Cache,
    /// A change that coincides with a change of the platform canary: gated only with
    /// --gate-platform.
    Platform,
    /// A regression that was already red on the previous run.
    Ongoing,
    /// A regression red for the first time with the newest run.
    New,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Recovered => "recovered",
            State::Accepted => "accepted",
            State::Cache => "cache",
            State::Platform => "platform",
            State::Ongoing => "ongoing",
            State::New => "new",
        }
    }

    pub fn red(self) -> bool {
        matches!(self, State::New | State::Ongoing)
    }
}

/// A run as the check names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRef {
    pub run: i64,
    pub tag: Option<String>,
    pub date: DateTime<Utc>,
}

/// A change of the environment on a series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// The first run in the new environment.
    pub run: RunRef,
    /// `server`, `setting` or `dbio`.
    pub kind: String,
    /// `upgrade to PostgreSQL 18.1 (from 17.6)`, `setting io_method: worker -> sync`.
    pub what: String,
}

/// A change point of a figure's history, as the report and the JSON show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRef {
    pub since: RunRef,
    /// Relative change of the mean, in %.
    pub change_pct: f64,
    /// `change points` (E-divisive) or `first night` (the newest runs' t-test).
    pub test: String,
    pub p_value: f64,
}

/// The verdict on one figure of one series and step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricCheck {
    /// The figure's id (`client_ops_per_s`), or `status` for the newest run's status.
    pub metric: String,
    pub name: String,
    pub state: State,
    /// This verdict fails the check.
    pub gates: bool,
    /// The first run of the regression, recovery or accepted level.
    pub since: Option<RunRef>,
    /// The last segment against the reference (the segment before the regression), in %.
    pub change: Option<f64>,
    /// The reference segment and the last segment, with their 95% intervals, and the t-test.
    pub reference: Option<Segment>,
    pub current: Option<Segment>,
    pub p_value: Option<f64>,
    /// How the regression was first seen: `change points` or `first night`.
    pub test: Option<String>,
    /// The environment change the regression starts with.
    pub event: Option<Event>,
    /// The platform change it coincides with.
    pub platform: Option<String>,
    /// The accept decision in force.
    pub accepted: Option<Decision>,
    /// Good runs that measured the figure (page-cache runs left out unless allowed).
    pub runs: usize,
    /// Run-to-run noise of the last segment: sd / mean, in %.
    pub noise_cv_pct: Option<f64>,
    /// The smallest step found on its first night 80% of the time at this noise and length,
    /// in % (never below the minimum magnitude).
    pub detectable_step_pct: Option<f64>,
    pub change_points: Vec<ChangeRef>,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesCheck {
    pub series: String,
    pub label: String,
    pub kind: SeriesKind,
    pub step: String,
    pub runs: usize,
    pub ok_runs: usize,
    /// Repeats per run of the newest run (a ramp's --repeat).
    pub repeats: u32,
    /// The worst state of its figures.
    pub state: State,
    pub gates: bool,
    /// The figure that decided the state (the worst), its start and change.
    pub metric: Option<String>,
    pub since: Option<RunRef>,
    pub change: Option<f64>,
    pub events: Vec<Event>,
    pub newest: Option<RunRef>,
    pub metrics: Vec<MetricCheck>,
    /// What decided, for the text.
    pub method: String,
}

impl SeriesCheck {
    pub fn regressed(&self) -> bool {
        self.gates
    }
}

fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:+.1}%", 100.0 * v)
    } else {
        "?".into()
    }
}

fn f1(v: f64) -> String {
    format!("{v:.1}")
}

fn interval(ci: (f64, f64)) -> String {
    if ci.0.is_finite() && ci.1.is_finite() {
        format!("[{}, {}]", f1(ci.0), f1(ci.1))
    } else {
        "[no interval: one run on each side]".into()
    }
}

fn segment(s: &Segment) -> String {
    format!("{} {} ({} runs)", f1(s.mean), interval(s.ci95), s.len())
}

/// `mean 1234.5 [1200.1, 1268.9] (10 runs) -> 123.4 [100.2, 146.6] (4 runs), -90.0% (95% CI
/// -92.1% .. -87.9%), t-test p = 1e-9`.
pub fn describe_change(c: &ChangePoint) -> String {
    format!(
        "mean {} -> {}, {} (95% CI {} .. {}), t-test p = {:.2e}",
        segment(&c.before),
        segment(&c.after),
        pct(c.change),
        pct(c.change_ci95.0),
        pct(c.change_ci95.1),
        c.t_p_value
    )
}

/// A change point and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub cp: ChangePoint,
    pub first_night: bool,
}

/// What the history of one figure says.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Ok,
    /// Worse from `start` on: `cmp` is the reference segment against the last one.
    Red {
        start: usize,
        cmp: ChangePoint,
        first_night: bool,
    },
    /// Back within the noise from `at` on.
    Recovered {
        at: usize,
    },
    /// No change since the accepted run at `at`.
    Accepted {
        at: usize,
    },
}

/// The change points of `x` (E-divisive, then the first-night test of the newest one or two
/// runs when no change point is among them).
pub fn change_points(x: &[f64], metric: Metric, t: &Thresholds) -> Vec<Found> {
    let mut found: Vec<Found> = edivisive::detect(x, &t.cpd)
        .into_iter()
        .map(|cp| Found {
            cp,
            first_night: false,
        })
        .collect();
    let n = x.len();
    let last = found.last().map(|f| f.cp.index).unwrap_or(0);
    if n >= 2 && last < n - 2 {
        for k in [2usize, 1] {
            if n < k {
                continue;
            }
            let at = n - k;
            let Some(p) = edivisive::newest_p(x, last, at, metric.higher_is_better()) else {
                continue;
            };
            let cp = edivisive::compare(x, (last, at), (at, n));
            if p <= t.alpha
                && metric.worse(cp.change)
                && cp.change.abs() >= t.cpd.min_magnitude
                // Two new runs: both must be beyond the old mean, not one outlier.
                && x[at..].iter().all(|v| metric.worse(*v - cp.before.mean))
            {
                found.push(Found {
                    cp: ChangePoint { p_value: p, ..cp },
                    first_night: true,
                });
                break;
            }
        }
    }
    found
}

/// The gate verdict of a figure's history `x` with its change points; `accepted` is the
/// position of an accepted run.
pub fn verdict(
    x: &[f64],
    found: &[Found],
    metric: Metric,
    t: &Thresholds,
    accepted: Option<usize>,
    recovered_runs: usize,
) -> Verdict {
    let n = x.len();
    let eligible: Vec<&Found> = found
        .iter()
        .filter(|f| accepted.is_none_or(|a| f.cp.index > a))
        .collect();
    let quiet = match accepted {
        Some(at) if eligible.is_empty() => Verdict::Accepted { at },
        _ => Verdict::Ok,
    };
    let Some(mut j) = eligible.iter().rposition(|f| metric.worse(f.cp.change)) else {
        return quiet;
    };
    let last_worse = j;
    // Consecutive worse steps are one regression, from the first of them.
    while j > 0 && metric.worse(eligible[j - 1].cp.change) {
        j -= 1;
    }
    let start = eligible[j].cp.index;
    // The reference: the segment before the regression, from the change point before it (or
    // the accepted run) on.
    let reference_from = found
        .iter()
        .map(|f| f.cp.index)
        .filter(|i| *i < start)
        .chain(accepted.filter(|a| *a < start))
        .max()
        .unwrap_or(0);
    let current_from = found.last().map(|f| f.cp.index).unwrap_or(start);
    let cmp = edivisive::compare(x, (reference_from, start), (current_from, n));
    let first_night =
        eligible[last_worse].first_night && current_from == eligible[last_worse].cp.index;
    let p_ok = if first_night {
        eligible[last_worse].cp.p_value <= t.alpha
    } else {
        cmp.t_p_value <= t.alpha
    };
    if metric.worse(cmp.change) && p_ok && cmp.change.abs() >= t.cpd.min_magnitude {
        return Verdict::Red {
            start,
            cmp,
            first_night,
        };
    }
    match eligible.get(last_worse + 1) {
        Some(r) if n - r.cp.index <= recovered_runs.max(1) => Verdict::Recovered { at: r.cp.index },
        _ => quiet,
    }
}

/// The run-to-run noise (sd / mean) of the newest segment of 3 runs or more, and its length.
fn noise(x: &[f64], found: &[Found]) -> (Option<f64>, usize) {
    let mut bounds: Vec<usize> = std::iter::once(0)
        .chain(found.iter().map(|f| f.cp.index))
        .chain(std::iter::once(x.len()))
        .collect();
    bounds.dedup();
    let seg = bounds
        .windows(2)
        .rev()
        .map(|w| &x[w[0]..w[1]])
        .find(|s| s.len() >= 3)
        .unwrap_or(x);
    if seg.len() < 2 {
        return (None, seg.len());
    }
    let m = seg.iter().sum::<f64>() / seg.len() as f64;
    let sd = (seg.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (seg.len() - 1) as f64).sqrt();
    ((m != 0.0).then(|| sd / m.abs()), seg.len())
}

/// The accept decision in force for this figure: the newest that covers it.
fn accept_for<'a>(decisions: &'a [Decision], s: &Series, metric: Metric) -> Option<&'a Decision> {
    decisions
        .iter()
        .filter(|d| d.action == Action::Accept && d.covers(&s.series, &s.step, Some(metric.id())))
        .max_by_key(|d| (d.decided_at, d.id))
}

fn metric_check(
    s: &Series,
    metric: Metric,
    o: &CheckOptions,
    decisions: &[Decision],
) -> Option<MetricCheck> {
    let with_cache = o.allow_cache || s.kind == SeriesKind::Platform;
    let (runs, x) = s.values_with(metric, with_cache);
    let (_, all) = s.values(metric);
    if all.is_empty() {
        return None;
    }
    let t = o.thresholds(metric);
    let decision = accept_for(decisions, s, metric);
    let accepted = decision.and_then(|d| runs.iter().position(|r| r.run_id >= d.from_run));
    let found = change_points(&x, metric, &t);
    let v = verdict(&x, &found, metric, &t, accepted, o.recovered_runs);
    let (cv, seg_len) = noise(&x, &found);
    let detectable = cv.and_then(|cv| {
        edivisive::detectable_step(cv, seg_len, t.alpha).map(|d| d.max(t.cpd.min_magnitude))
    });
    let mut m = MetricCheck {
        metric: metric.id().into(),
        name: metric.name().into(),
        state: State::Ok,
        gates: false,
        since: None,
        change: None,
        reference: None,
        current: None,
        p_value: None,
        test: None,
        event: None,
        platform: None,
        accepted: None,
        runs: x.len(),
        noise_cv_pct: cv.map(|c| 100.0 * c),
        detectable_step_pct: detectable.map(|d| 100.0 * d),
        change_points: found
            .iter()
            .map(|f| ChangeRef {
                since: runs[f.cp.index].reference(),
                change_pct: 100.0 * f.cp.change,
                test: if f.first_night {
                    "first night"
                } else {
                    "change points"
                }
                .into(),
                p_value: if f.first_night {
                    f.cp.p_value
                } else {
                    f.cp.t_p_value
                },
            })
            .collect(),
        note: String::new(),
    };
    let noise_text = match (cv, detectable) {
        (Some(c), Some(d)) => format!(
            "noise {:.1}% over {} run(s); a step of {:.1}% is found on its first night",
            100.0 * c,
            seg_len,
            100.0 * d
        ),
        (Some(c), None) => format!(
            "noise {:.1}% over {} run(s); 3 runs at one level are needed before a step can be found",
            100.0 * c,
            seg_len
        ),
        _ => format!(
            "{} run(s): 3 at one level are needed before a step can be found",
            x.len()
        ),
    };
    match v {
        Verdict::Red {
            start,
            cmp,
            first_night,
        } => {
            // New unless the previous run's history was red already.
            let prev = x.len() - 1;
            let was_red = prev > 0 && {
                let px = &x[..prev];
                let pf = change_points(px, metric, &t);
                matches!(
                    verdict(
                        px,
                        &pf,
                        metric,
                        &t,
                        accepted.filter(|a| *a < prev),
                        o.recovered_runs
                    ),
                    Verdict::Red { .. }
                )
            };
            m.state = if was_red { State::Ongoing } else { State::New };
            m.since = Some(runs[start].reference());
            m.change = Some(100.0 * cmp.change);
            m.p_value = Some(if first_night {
                found
                    .iter()
                    .find(|f| f.cp.index == start && f.first_night)
                    .map(|f| f.cp.p_value)
                    .unwrap_or(cmp.t_p_value)
            } else {
                cmp.t_p_value
            });
            m.test = Some(
                if first_night {
                    "first night"
                } else {
                    "change points"
                }
                .into(),
            );
            m.note = format!(
                "worse from run {}: {} -> {}, {} (95% CI {} .. {}), {} p = {:.2e}; {noise_text}",
                runs[start].name(),
                segment(&cmp.before),
                segment(&cmp.after),
                pct(cmp.change),
                pct(cmp.change_ci95.0),
                pct(cmp.change_ci95.1),
                if first_night {
                    "first-night t-test"
                } else {
                    "t-test"
                },
                m.p_value.unwrap_or(1.0)
            );
            m.reference = Some(cmp.before);
            m.current = Some(cmp.after);
        }
        Verdict::Recovered { at } => {
            m.state = State::Recovered;
            m.since = Some(runs[at].reference());
            m.note = format!(
                "recovered from run {}: back within the noise of the level before the regression; {noise_text}",
                runs[at].name()
            );
        }
        Verdict::Accepted { at } => {
            let d = decision.cloned();
            m.state = State::Accepted;
            m.since = Some(runs[at].reference());
            m.note = format!(
                "accepted from run {} by {} ({}): {}; no change since; {noise_text}",
                runs[at].name(),
                d.as_ref().map(|d| d.decided_by.as_str()).unwrap_or("?"),
                d.as_ref()
                    .map(|d| d.decided_at.format("%Y-%m-%d").to_string())
                    .unwrap_or_default(),
                d.as_ref().map(|d| d.reason.as_str()).unwrap_or("")
            );
            m.accepted = d;
        }
        Verdict::Ok => {
            m.note = format!(
                "no open regression ({} change point(s) in the history); {noise_text}",
                found.len()
            );
        }
    }
    if x.len() < all.len() {
        let _ = write!(
            m.note,
            "; {} page-cache run(s) left out",
            all.len() - x.len()
        );
    }
    // A regression that starts with an environment change says so.
    if m.state.red() {
        let since = m.since.as_ref().map(|r| r.run);
        let pos = |id: i64| s.runs.iter().position(|r| r.run_id == id);
        if let Some(sp) = since.and_then(pos) {
            m.event = s
                .events()
                .into_iter()
                .find(|e| pos(e.run.run).is_some_and(|ep| ep.abs_diff(sp) <= 1));
            if let Some(e) = &m.event {
                let _ = write!(m.note, "; with the {} at run #{}", e.what, e.run.run);
            }
        }
    }
    Some(m)
}

/// One platform series and figure: its runs' start times (oldest first) and the positions of
/// its worse changes, described.
type PlatformSeries = (Vec<DateTime<Utc>>, Vec<(usize, String)>);

/// The platform change points (worse, any figure and step) with the runs of their series.
struct PlatformChanges {
    series: Vec<PlatformSeries>,
}

impl PlatformChanges {
    fn of(series: &[Series], o: &CheckOptions) -> PlatformChanges {
        let mut out = Vec::new();
        for s in series.iter().filter(|s| s.kind == SeriesKind::Platform) {
            for metric in [Metric::DeviceReadIops, Metric::DeviceReadLatencyUs] {
                let (runs, x) = s.values(metric);
                if x.len() < 2 {
                    continue;
                }
                let t = o.thresholds(metric);
                let changes: Vec<(usize, String)> = change_points(&x, metric, &t)
                    .into_iter()
                    .filter(|f| metric.worse(f.cp.change))
                    .map(|f| {
                        (
                            f.cp.index,
                            format!(
                                "{} step {} {} from run {}",
                                s.series,
                                s.step,
                                format_args!("{} {}", metric.name(), pct(f.cp.change)),
                                runs[f.cp.index].name()
                            ),
                        )
                    })
                    .collect();
                if !changes.is_empty() {
                    out.push((runs.iter().map(|r| r.started).collect(), changes));
                }
            }
        }
        PlatformChanges { series: out }
    }

    /// A platform change within one platform run of the night `at`.
    fn coinciding(&self, at: DateTime<Utc>) -> Option<&str> {
        self.series.iter().find_map(|(times, changes)| {
            // The platform run of that night: the last one started before the database run.
            let night = times.iter().rposition(|t| *t <= at)?;
            changes
                .iter()
                .find(|(i, _)| i.abs_diff(night) <= 1)
                .map(|(_, d)| d.as_str())
        })
    }
}

/// The verdict on every series and step, given the decisions kept in the store.
pub fn check(series: &[Series], o: &CheckOptions, decisions: &[Decision]) -> Vec<SeriesCheck> {
    let platform = PlatformChanges::of(series, o);
    let mut out = Vec::new();
    for s in series {
        let newest = s.runs.last();
        let retired = decisions.iter().any(|d| {
            d.action == Action::Retire
                && d.covers(&s.series, &s.step, None)
                && newest.is_some_and(|n| n.run_id <= d.from_run)
        });
        if retired {
            continue;
        }
        let ok = s.ok_runs();
        let mut metrics = Vec::new();
        if let Some(n) = newest.filter(|r| r.status != RunStatus::Ok) {
            let before_failed = s
                .runs
                .len()
                .checked_sub(2)
                .is_some_and(|i| s.runs[i].status != RunStatus::Ok);
            metrics.push(MetricCheck {
                metric: "status".into(),
                name: "status".into(),
                state: if before_failed {
                    State::Ongoing
                } else {
                    State::New
                },
                gates: true,
                since: Some(n.reference()),
                change: None,
                reference: None,
                current: None,
                p_value: None,
                test: None,
                event: None,
                platform: None,
                accepted: None,
                runs: s.runs.len(),
                noise_cv_pct: None,
                detectable_step_pct: None,
                change_points: vec![],
                note: format!(
                    "the newest run {} is {}: a failed or interrupted run is never a pass, and it stays out of the series",
                    n.name(),
                    n.status.as_str()
                ),
            });
        }
        for &metric in &o.metrics {
            let Some(mut m) = metric_check(s, metric, o, decisions) else {
                continue;
            };
            if s.kind == SeriesKind::Database
                && m.state.red()
                && let Some(at) = m.since.as_ref().map(|r| r.date)
                && let Some(p) = platform.coinciding(at)
            {
                m.state = State::Platform;
                m.platform = Some(p.to_string());
                let _ = write!(
                    m.note,
                    "; coincides with the platform change {p}: gated only with --gate-platform"
                );
            }
            m.gates = match m.state {
                State::New | State::Ongoing => s.kind == SeriesKind::Database || o.gate_platform,
                State::Platform => o.gate_platform,
                _ => false,
            };
            metrics.push(m);
        }
        if let Some(n) = newest.filter(|r| r.status == RunStatus::Ok && r.not_steady()) {
            for m in metrics.iter_mut().filter(|m| m.metric != "status") {
                let _ = write!(
                    m.note,
                    "; the newest run {} was not steady (its window opened without its steady-state rule holding): \
                     it stays out of the series and is not judged",
                    n.name()
                );
            }
        }
        // A newest run that measured the page cache is no storage measurement.
        let newest_ok = ok.last().copied();
        if let Some(n) = newest_ok
            .filter(|r| r.cache_served() && !o.allow_cache && s.kind == SeriesKind::Database)
        {
            for m in metrics.iter_mut().filter(|m| m.metric != "status") {
                if matches!(m.state, State::Ok | State::Recovered | State::Accepted) {
                    m.state = State::Cache;
                    m.since = Some(n.reference());
                }
                let _ = write!(
                    m.note,
                    "; the newest run {} measured the page cache ({}): not a storage measurement, not gated (--allow-cache gates it)",
                    n.name(),
                    n.figures
                        .physical_read_ratio
                        .map(|r| format!("{:.0}% of its reads reached the device", 100.0 * r))
                        .unwrap_or_else(|| {
                            "its backends fetched under half of their reads from storage".into()
                        })
                );
            }
        }
        let worst = metrics
            .iter()
            .max_by_key(|m| (m.gates, m.state, m.metric == "status"))
            .cloned();
        let state = worst.as_ref().map(|m| m.state).unwrap_or(State::Ok);
        let method = format!(
            "{} good run(s); change points by E-divisive means (permutation test of {} shuffles, p <= {}, window {}) and the first-night t-test; gate: t-test p <= {}, min magnitude {}%",
            ok.len(),
            o.cpd.permutations,
            o.cpd.alpha,
            o.cpd.window,
            o.alpha,
            100.0 * o.cpd.min_magnitude,
        );
        out.push(SeriesCheck {
            series: s.series.clone(),
            label: s.label.clone(),
            kind: s.kind,
            step: s.step.clone(),
            runs: s.runs.len(),
            ok_runs: ok.len(),
            repeats: newest.map(|r| r.figures.repeats).unwrap_or(1),
            state,
            gates: metrics.iter().any(|m| m.gates),
            metric: worst
                .as_ref()
                .filter(|m| m.state != State::Ok)
                .map(|m| m.metric.clone()),
            since: worst
                .as_ref()
                .filter(|m| m.state != State::Ok)
                .and_then(|m| m.since.clone()),
            change: worst.as_ref().and_then(|m| m.change),
            events: s.events(),
            newest: newest.map(SeriesRun::reference),
            metrics,
            method,
        });
    }
    out
}

/// The series the decisions retired (not checked), for the text and JSON.
pub fn retired(series: &[Series], decisions: &[Decision]) -> Vec<String> {
    series
        .iter()
        .filter(|s| {
            let newest = s.runs.last().map(|r| r.run_id).unwrap_or(0);
            decisions.iter().any(|d| {
                d.action == Action::Retire
                    && d.covers(&s.series, &s.step, None)
                    && newest <= d.from_run
            })
        })
        .map(|s| format!("{} step {}", s.series, s.step))
        .collect()
}

fn state_word(m: &MetricCheck) -> String {
    let w = match m.state {
        State::New => "REGRESSION (new)",
        State::Ongoing => "REGRESSION (ongoing)",
        State::Platform if m.gates => "PLATFORM CHANGE",
        State::Platform => "platform change",
        State::Cache => "cache",
        State::Accepted => "accepted",
        State::Recovered => "recovered",
        State::Ok => "ok",
    };
    if m.gates && !m.state.red() && m.state != State::Platform {
        format!("{w} (gated)")
    } else {
        w.to_string()
    }
}

pub fn render_text(checks: &[SeriesCheck], retired: &[String]) -> String {
    let mut o = String::new();
    for c in checks {
        let _ = writeln!(
            o,
            "series {} step {}{}: {} — {} run(s), {} good; {}",
            c.series,
            c.step,
            if c.kind == SeriesKind::Platform {
                " (platform canary)"
            } else {
                ""
            },
            c.state.as_str(),
            c.runs,
            c.ok_runs,
            c.method
        );
        for e in &c.events {
            let _ = writeln!(
                o,
                "  event at run #{} ({}): {}",
                e.run.run,
                e.run.date.format("%Y-%m-%d"),
                e.what
            );
        }
        for m in &c.metrics {
            let _ = writeln!(o, "  {:<24} {}: {}", m.name, state_word(m), m.note);
        }
    }
    for r in retired {
        let _ = writeln!(o, "series {r}: retired, not checked");
    }
    let bad = checks.iter().filter(|c| c.gates).count();
    if checks.is_empty() {
        let _ = writeln!(o, "no series to check");
    } else if bad == 0 {
        let _ = writeln!(o, "no regression ({} series and step(s))", checks.len());
    } else {
        let _ = writeln!(o, "{bad} of {} series and step(s) regressed", checks.len());
    }
    o
}

/// JUnit XML: a test case per series, step and metric; a failure for each one that gates.
pub fn render_junit(checks: &[SeriesCheck]) -> String {
    let cases: Vec<JunitCase> = checks
        .iter()
        .flat_map(|c| {
            c.metrics.iter().map(move |m| JunitCase {
                class: format!("dbio.history.{}.{}", c.series, c.step),
                name: m.name.clone(),
                failure: m.gates.then(|| m.note.clone()),
            })
        })
        .collect();
    regress::junit("dbio history check", &cases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Identity, RunRecord};

    fn figures(ops: f64) -> StepFigures {
        StepFigures {
            step: "r1-w0".into(),
            readers: 1,
            writers: 0,
            update_pct: 0,
            status: RunStatus::Ok,
            repeats: 1,
            elapsed_s: 1.0,
            db_read_iops: Some(ops * 10.0),
            db_write_iops: Some(0.0),
            device_read_iops: None,
            client_ops_per_s: Some(ops),
            client_read_p50_us: Some(1e6 / ops),
            client_read_p99_us: Some(3e6 / ops),
            db_avg_read_latency_us: Some(1e5 / ops),
            device_read_latency_us: None,
            physical_read_ratio: None,
            cache_served: None,
            rate_per_s: None,
            steady: None,
        }
    }

    fn stored(id: i64, ops: f64, status: RunStatus) -> StoredRun {
        let t = DateTime::<Utc>::from_timestamp(1_700_000_000 + id * 86_400, 0).unwrap();
        StoredRun {
            id,
            recorded_at: t,
            record: RunRecord {
                kind: RecordKind::Run,
                identity: Identity {
                    label: "nightly".into(),
                    series: "nightly [00000000]".into(),
                    shape: serde_json::Value::Null,
                    tag: Some(format!("build-{id}")),
                    tag_source: Some("--tag".into()),
                    host: "h".into(),
                    target: "t".into(),
                    server_version: "17.2".into(),
                    server_version_num: 170002,
                    settings: Default::default(),
                    data_set: serde_json::Value::Null,
                    dbio_version: "0".into(),
                },
                status,
                started: t,
                finished: t,
                steps: vec![figures(ops)],
                content_sha256: format!("{id}"),
            },
        }
    }

    fn wobble(i: i64) -> f64 {
        [1.0, -0.6, 0.3, -1.0, 0.7, -0.2, 0.5, -0.8][i as usize % 8] * 0.02
    }

    fn ops_row(c: &SeriesCheck) -> &MetricCheck {
        c.metrics
            .iter()
            .find(|m| m.metric == "client_ops_per_s")
            .unwrap()
    }

    fn one_metric() -> CheckOptions {
        CheckOptions {
            metrics: vec![Metric::ClientOpsPerS],
            ..CheckOptions::default()
        }
    }

    #[test]
    fn a_step_is_red_from_its_first_night_for_as_long_as_it_lasts() {
        let mut runs: Vec<StoredRun> = (1..=20)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        let c = check(&series_of(&runs), &one_metric(), &[]);
        assert_eq!(c[0].state, State::Ok, "{}", render_text(&c, &[]));
        for night in 21..=28 {
            runs.push(stored(night, 700.0 * (1.0 + wobble(night)), RunStatus::Ok));
            let c = check(&series_of(&runs), &one_metric(), &[]);
            let text = render_text(&c, &[]);
            let m = ops_row(&c[0]);
            assert!(m.gates, "night {night}: {text}");
            assert_eq!(m.since.as_ref().unwrap().run, 21, "{text}");
            let want = if night == 21 {
                State::New
            } else {
                State::Ongoing
            };
            assert_eq!(m.state, want, "night {night}: {text}");
            assert!((m.change.unwrap() + 30.0).abs() < 3.0, "{text}");
        }
        // Back to the old level: recovered, green.
        for night in 29..=33 {
            runs.push(stored(night, 1000.0 * (1.0 + wobble(night)), RunStatus::Ok));
        }
        let c = check(&series_of(&runs), &one_metric(), &[]);
        assert_eq!(
            ops_row(&c[0]).state,
            State::Recovered,
            "{}",
            render_text(&c, &[])
        );
        assert!(!c[0].gates);
        let xml = render_junit(&c);
        assert!(xml.contains("dbio history check"));
    }

    #[test]
    fn a_reverted_improvement_is_red_and_an_accepted_level_is_green() {
        let v = |i: i64| match i {
            1..=15 => 1000.0,
            16..=20 => 1200.0,
            _ => 1000.0,
        } * (1.0 + wobble(i) / 2.0);
        let runs: Vec<StoredRun> = (1..=25).map(|i| stored(i, v(i), RunStatus::Ok)).collect();
        let s = series_of(&runs);
        let c = check(&s, &one_metric(), &[]);
        let m = ops_row(&c[0]);
        assert!(m.state.red(), "{}", render_text(&c, &[]));
        assert_eq!(m.since.as_ref().unwrap().run, 21);
        let d = Decision {
            id: 1,
            series: s[0].series.clone(),
            step: None,
            metric: None,
            action: Action::Accept,
            from_run: 21,
            reason: "the cache change was reverted on purpose".into(),
            decided_by: "dba".into(),
            decided_at: Utc::now(),
        };
        let c = check(&s, &one_metric(), std::slice::from_ref(&d));
        let m = ops_row(&c[0]);
        assert_eq!(m.state, State::Accepted, "{}", render_text(&c, &[]));
        assert!(m.note.contains("reverted on purpose") && !c[0].gates);
        // Retired: not checked at all.
        let r = Decision {
            action: Action::Retire,
            from_run: 25,
            ..d
        };
        assert!(check(&s, &one_metric(), std::slice::from_ref(&r)).is_empty());
        assert_eq!(retired(&s, &[r]).len(), 1);
    }

    #[test]
    fn failed_runs_never_pass_and_stay_out_of_the_series() {
        let mut runs: Vec<StoredRun> = (1..=9)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        runs.push(stored(10, 10.0, RunStatus::Failed));
        let s = series_of(&runs);
        assert_eq!(s[0].ok_runs().len(), 9);
        let c = check(&s, &CheckOptions::default(), &[]);
        let status = c[0].metrics.iter().find(|m| m.metric == "status").unwrap();
        assert!(status.gates && status.note.contains("#10"), "{status:?}");
        assert!(
            c[0].metrics
                .iter()
                .filter(|m| m.metric != "status")
                .all(|m| !m.gates),
            "{}",
            render_text(&c, &[])
        );
    }

    // A run whose window opened without its steady-state rule holding measured a moving
    // figure: it stays out of the series, as a failed run does, and the check says so.
    #[test]
    fn a_run_that_was_not_steady_stays_out_of_the_series() {
        let mut runs: Vec<StoredRun> = (1..=9)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        let mut drifting = stored(10, 10.0, RunStatus::Ok);
        drifting.record.steps[0].steady = Some(false);
        runs.push(drifting);
        let s = series_of(&runs);
        assert_eq!(s[0].ok_runs().len(), 9);
        let c = check(&s, &one_metric(), &[]);
        let m = ops_row(&c[0]);
        assert!(!m.gates && !m.state.red(), "{m:?}");
        assert!(m.note.contains("was not steady"), "{}", m.note);
        // A steady run (steady: true) is judged as any other.
        let mut runs: Vec<StoredRun> = (1..=9)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        let mut steady = stored(10, 10.0, RunStatus::Ok);
        steady.record.steps[0].steady = Some(true);
        runs.push(steady);
        assert_eq!(series_of(&runs)[0].ok_runs().len(), 10);
    }

    #[test]
    fn a_young_series_states_what_it_can_detect() {
        let runs: Vec<StoredRun> = (1..=2).map(|i| stored(i, 1000.0, RunStatus::Ok)).collect();
        let c = check(&series_of(&runs), &one_metric(), &[]);
        let m = ops_row(&c[0]);
        assert_eq!(m.state, State::Ok);
        assert!(
            m.note.contains("3 at one level are needed") || m.note.contains("3 runs"),
            "{}",
            m.note
        );
        let runs: Vec<StoredRun> = (1..=6)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        let c = check(&series_of(&runs), &one_metric(), &[]);
        let m = ops_row(&c[0]);
        assert!(m.detectable_step_pct.is_some_and(|d| d > 5.0), "{m:?}");
    }
}
