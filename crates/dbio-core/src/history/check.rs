//! `dbio history check`: per series (runs of one label and shape) and step, change-point
//! detection over the history of each tracked figure; a change point for the worse among the
//! newest runs is a regression. Until a series has `min_runs` good runs the check says so and
//! falls back to the single-baseline regress (the series' oldest good run against its newest).
//! A failed or interrupted run never passes and never enters a series.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::driver::RunStatus;
use crate::history::edivisive::{self, ChangePoint, Segment};
use crate::history::{StepFigures, StoredRun};
use crate::report::regress::{self, JunitCase, RegressConfig};
use crate::summary::{Stat, StepKey, StepSet, StepSummary};

/// The figures history tracks per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Metric {
    DbReadIops,
    DeviceReadIops,
    ClientOpsPerS,
    ClientReadP99Us,
    DbAvgReadLatencyUs,
}

impl Metric {
    pub const ALL: [Metric; 5] = [
        Metric::DbReadIops,
        Metric::DeviceReadIops,
        Metric::ClientOpsPerS,
        Metric::ClientReadP99Us,
        Metric::DbAvgReadLatencyUs,
    ];

    /// The name regress and the reports use, with its unit.
    pub fn name(self) -> &'static str {
        match self {
            Metric::DbReadIops => "DB read IOPS",
            Metric::DeviceReadIops => "device read IOPS",
            Metric::ClientOpsPerS => "client ops/s",
            Metric::ClientReadP99Us => "client read p99 µs",
            Metric::DbAvgReadLatencyUs => "DB avg read latency µs",
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
        }
        .filter(|v| v.is_finite())
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
}

/// The runs of one label and shape at one step, oldest first, failed ones included.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub series: String,
    pub label: String,
    pub step: String,
    pub runs: Vec<SeriesRun>,
}

impl Series {
    pub fn ok_runs(&self) -> Vec<&SeriesRun> {
        self.runs
            .iter()
            .filter(|r| r.status == RunStatus::Ok)
            .collect()
    }

    /// The good runs that measured `metric`, and their values.
    pub fn values(&self, metric: Metric) -> (Vec<&SeriesRun>, Vec<f64>) {
        self.ok_runs()
            .into_iter()
            .filter_map(|r| metric.pick(&r.figures).map(|v| (r, v)))
            .unzip()
    }
}

/// Groups the store's runs into series: same label and shape (the identity's `series`) and
/// the same step (readers, writers, update_pct).
pub fn series_of(runs: &[StoredRun]) -> Vec<Series> {
    let mut by: BTreeMap<(String, StepKey), Series> = BTreeMap::new();
    for run in runs {
        let r = &run.record;
        for f in &r.steps {
            let key = StepKey {
                readers: f.readers,
                writers: f.writers,
                update_pct: f.update_pct,
            };
            let status = if r.status != RunStatus::Ok {
                r.status
            } else {
                f.status
            };
            by.entry((r.identity.series.clone(), key))
                .or_insert_with(|| Series {
                    series: r.identity.series.clone(),
                    label: r.identity.label.clone(),
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOptions {
    pub cpd: edivisive::Options,
    /// A change point among this many newest runs is news; older ones are history.
    pub newest: usize,
    /// Good runs a series needs before change-point detection decides.
    pub min_runs: usize,
    pub metrics: Vec<Metric>,
    /// Thresholds of the fallback regress.
    #[serde(skip)]
    pub fallback: RegressConfig,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            cpd: edivisive::Options::default(),
            newest: 5,
            min_runs: 8,
            metrics: Metric::ALL.to_vec(),
            fallback: RegressConfig::default(),
        }
    }
}

/// The verdict on one figure of one series and step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    /// A metric name, or `status` for the newest run's status.
    pub metric: String,
    /// `change points`, `regress` (the fallback) or `status`.
    pub method: String,
    pub regressed: bool,
    /// Where a change starts (or the run whose status failed).
    pub run: Option<String>,
    pub change: Option<ChangePoint>,
    pub note: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesCheck {
    pub series: String,
    pub label: String,
    pub step: String,
    pub runs: usize,
    pub ok_runs: usize,
    /// What decided: change-point detection, or the fallback and why.
    pub method: String,
    pub rows: Vec<CheckRow>,
}

impl SeriesCheck {
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.regressed)
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

/// `mean 1234.5 [1200.1, 1268.9] (10 runs) -> 123.4 [100.2, 146.6] (4 runs), -90.0% (95% CI
/// -92.1% .. -87.9%), p = 0.005 (permutation), t-test p = 1e-9`.
pub fn describe_change(c: &ChangePoint) -> String {
    let seg = |s: &Segment| format!("{} {} ({} runs)", f1(s.mean), interval(s.ci95), s.len());
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:+.1}%", 100.0 * v)
        } else {
            "?".into()
        }
    };
    format!(
        "mean {} -> {}, {} (95% CI {} .. {}), p = {:.3} (permutation), t-test p = {:.2e}",
        seg(&c.before),
        seg(&c.after),
        pct(c.change),
        pct(c.change_ci95.0),
        pct(c.change_ci95.1),
        c.p_value,
        c.t_p_value
    )
}

/// A stored step as the summary regress reads (one repeat per figure).
fn summary_of(f: &StepFigures) -> StepSummary {
    let stat = |v: Option<f64>| v.and_then(|v| Stat::of(vec![v]));
    StepSummary {
        key: StepKey {
            readers: f.readers,
            writers: f.writers,
            update_pct: f.update_pct,
        },
        step: f.step.clone(),
        repeats: f.repeats,
        status: f.status,
        elapsed_s: f.elapsed_s,
        client_ops_per_s: Stat::of(vec![f.client_ops_per_s.unwrap_or(0.0)])
            .expect("one value is a statistic"),
        client_read_p50_us: stat(f.client_read_p50_us),
        client_read_p99_us: stat(f.client_read_p99_us),
        db_read_iops: stat(f.db_read_iops),
        db_write_iops: stat(f.db_write_iops),
        db_avg_read_latency_us: stat(f.db_avg_read_latency_us),
        device_read_iops: stat(f.device_read_iops),
        physical_read_ratio: None,
        backends_physical_read_ratio: None,
        raw_device_iops: None,
        db_to_raw_iops_ratio: None,
        top_wait: None,
        storage: None,
        interval_ops_per_s: vec![],
        read_histogram: String::new(),
        results: vec![],
        warnings: vec![],
        targets: vec![],
    }
}

fn fallback_rows(ok: &[&SeriesRun], o: &CheckOptions) -> Vec<CheckRow> {
    let (Some(first), Some(last)) = (ok.first(), ok.last()) else {
        return vec![];
    };
    if ok.len() == 1 {
        return vec![CheckRow {
            metric: "all".into(),
            method: "regress".into(),
            regressed: false,
            run: Some(first.name()),
            change: None,
            note: format!(
                "the first good run of the series: it is the baseline until change-point detection decides (from {} runs)",
                o.min_runs
            ),
        }];
    }
    let set = |r: &SeriesRun| StepSet {
        label: r.name(),
        path: std::path::PathBuf::from(format!("run #{}", r.run_id)),
        steps: vec![summary_of(&r.figures)],
        status: r.status,
        // A series holds one shape by construction.
        shape: crate::shape::Shape::default(),
    };
    regress::regress(&set(first), &set(last), &o.fallback)
        .into_iter()
        .map(|r| CheckRow {
            note: format!(
                "{}: run {} against baseline {}: {} -> {} ({}; allowed {})",
                r.note,
                last.name(),
                first.name(),
                r.baseline.map(f1).unwrap_or_else(|| "-".into()),
                r.current.map(f1).unwrap_or_else(|| "-".into()),
                r.change_pct
                    .map(|c| format!("{c:+.1}%"))
                    .unwrap_or_else(|| "-".into()),
                r.threshold_pct
                    .map(|t| format!("{t:+.0}%"))
                    .unwrap_or_else(|| "off".into())
            ),
            metric: r.metric,
            method: "regress".into(),
            regressed: r.regressed,
            run: Some(last.name()),
            change: None,
        })
        .collect()
}

fn metric_row(s: &Series, metric: Metric, o: &CheckOptions) -> CheckRow {
    let (runs, values) = s.values(metric);
    let mut row = CheckRow {
        metric: metric.name().into(),
        method: "change points".into(),
        regressed: false,
        run: None,
        change: None,
        note: String::new(),
    };
    if values.len() < o.min_runs {
        row.note = format!(
            "not checked: measured in {} of {} good runs (null in the rest: see their result.json warnings)",
            values.len(),
            s.ok_runs().len()
        );
        return row;
    }
    let cps = edivisive::detect(&values, &o.cpd);
    let newest_from = values.len().saturating_sub(o.newest.max(1));
    let worse = |c: &ChangePoint| {
        if metric.higher_is_better() {
            c.change < 0.0
        } else {
            c.change > 0.0
        }
    };
    let recent: Vec<&ChangePoint> = cps.iter().filter(|c| c.index >= newest_from).collect();
    let older = cps.len() - recent.len();
    let history = if older > 0 {
        format!("; {older} older change point(s) in the history")
    } else {
        String::new()
    };
    if let Some(c) = recent.iter().find(|c| worse(c)) {
        row.regressed = true;
        row.run = Some(runs[c.index].name());
        row.note = format!(
            "worse from run {}: {}{history}",
            runs[c.index].name(),
            describe_change(c)
        );
        row.change = Some((*c).clone());
    } else if let Some(c) = recent.first() {
        row.run = Some(runs[c.index].name());
        row.note = format!(
            "better from run {}: {}{history}",
            runs[c.index].name(),
            describe_change(c)
        );
        row.change = Some((*c).clone());
    } else {
        let (m, sd) = {
            let st = Stat::of(values.clone()).expect("at least min_runs values");
            (st.mean, st.sd)
        };
        row.note = format!(
            "no change point among the newest {} of {} runs (mean {}, sd {}, cv {:.1}%){history}",
            values.len() - newest_from,
            values.len(),
            f1(m),
            f1(sd),
            if m != 0.0 { 100.0 * sd / m } else { 0.0 }
        );
    }
    row
}

/// The verdict on every series and step.
pub fn check(series: &[Series], o: &CheckOptions) -> Vec<SeriesCheck> {
    series
        .iter()
        .map(|s| {
            let ok = s.ok_runs();
            let mut rows = Vec::new();
            if let Some(newest) = s.runs.last().filter(|r| r.status != RunStatus::Ok) {
                rows.push(CheckRow {
                    metric: "status".into(),
                    method: "status".into(),
                    regressed: true,
                    run: Some(newest.name()),
                    change: None,
                    note: format!(
                        "the newest run {} is {}: a failed or interrupted run is never a pass, and it stays out of the series",
                        newest.name(),
                        newest.status.as_str()
                    ),
                });
            }
            let method = if ok.len() >= o.min_runs {
                for &m in &o.metrics {
                    rows.push(metric_row(s, m, o));
                }
                format!(
                    "change points (E-divisive means, permutation test of {} shuffles, p <= {}, min magnitude {}%, window {}, newest {})",
                    o.cpd.permutations,
                    o.cpd.alpha,
                    100.0 * o.cpd.min_magnitude,
                    o.cpd.window,
                    o.newest
                )
            } else {
                rows.extend(fallback_rows(&ok, o));
                format!(
                    "{} good run(s): change-point detection decides from {}; until then regress against the series' first good run",
                    ok.len(),
                    o.min_runs
                )
            };
            SeriesCheck {
                series: s.series.clone(),
                label: s.label.clone(),
                step: s.step.clone(),
                runs: s.runs.len(),
                ok_runs: ok.len(),
                method,
                rows,
            }
        })
        .collect()
}

pub fn render_text(checks: &[SeriesCheck]) -> String {
    let mut o = String::new();
    for c in checks {
        let _ = writeln!(
            o,
            "series {} step {}: {} run(s), {} good; {}",
            c.series, c.step, c.runs, c.ok_runs, c.method
        );
        for r in &c.rows {
            let _ = writeln!(
                o,
                "  {:<24} {}{}",
                r.metric,
                if r.regressed { "REGRESSION: " } else { "ok: " },
                r.note
            );
        }
    }
    let bad = checks.iter().filter(|c| c.regressed()).count();
    if checks.is_empty() {
        let _ = writeln!(o, "no runs recorded: nothing to check");
    } else if bad == 0 {
        let _ = writeln!(o, "no regression ({} series and step(s))", checks.len());
    } else {
        let _ = writeln!(o, "{bad} of {} series and step(s) regressed", checks.len());
    }
    o
}

/// JUnit XML: a test case per series, step and metric; a failure for each regression.
pub fn render_junit(checks: &[SeriesCheck]) -> String {
    let cases: Vec<JunitCase> = checks
        .iter()
        .flat_map(|c| {
            c.rows.iter().map(move |r| JunitCase {
                class: format!("dbio.history.{}.{}", c.series, c.step),
                name: r.metric.clone(),
                failure: r.regressed.then(|| r.note.clone()),
            })
        })
        .collect();
    regress::junit("dbio history check", &cases)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Identity, RecordKind, RunRecord};

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
                    server_version: "17".into(),
                    server_version_num: 170000,
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

    #[test]
    fn a_slower_tail_is_found_at_its_first_run() {
        let mut runs: Vec<StoredRun> = (1..=10)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        let checks = check(&series_of(&runs), &CheckOptions::default());
        assert!(!checks[0].regressed(), "{}", render_text(&checks));
        runs.extend((11..=14).map(|i| stored(i, 500.0 * (1.0 + wobble(i)), RunStatus::Ok)));
        let checks = check(&series_of(&runs), &CheckOptions::default());
        let text = render_text(&checks);
        assert!(checks[0].regressed(), "{text}");
        let ops = checks[0]
            .rows
            .iter()
            .find(|r| r.metric == "client ops/s")
            .unwrap();
        assert!(ops.regressed, "{text}");
        assert!(
            ops.note.contains("worse from run #11 (tag build-11"),
            "{text}"
        );
        let c = ops.change.as_ref().unwrap();
        assert!((c.before.mean - 1000.0).abs() < 20.0 && (c.after.mean - 500.0).abs() < 20.0);
        // Device IOPS were never measured: said, not guessed.
        let dev = checks[0]
            .rows
            .iter()
            .find(|r| r.metric == "device read IOPS")
            .unwrap();
        assert!(!dev.regressed && dev.note.contains("measured in 0 of 14"));
        let xml = render_junit(&checks);
        assert!(xml.contains("dbio history check") && xml.contains("<failure"));
    }

    #[test]
    fn few_runs_fall_back_to_regress_and_failed_runs_never_pass() {
        let mut runs = vec![stored(1, 1000.0, RunStatus::Ok)];
        let c = check(&series_of(&runs), &CheckOptions::default());
        assert!(!c[0].regressed() && c[0].rows[0].note.contains("baseline"));
        runs.push(stored(2, 700.0, RunStatus::Ok));
        let c = check(&series_of(&runs), &CheckOptions::default());
        assert!(c[0].method.contains("decides from 8"), "{}", c[0].method);
        assert!(
            c[0].rows
                .iter()
                .any(|r| r.method == "regress" && r.metric == "client ops/s" && r.regressed),
            "{}",
            render_text(&c)
        );
        // A failed newest run fails the check, and its figures stay out of the series.
        let mut runs: Vec<StoredRun> = (1..=9)
            .map(|i| stored(i, 1000.0 * (1.0 + wobble(i)), RunStatus::Ok))
            .collect();
        runs.push(stored(10, 10.0, RunStatus::Failed));
        let s = series_of(&runs);
        assert_eq!(s[0].ok_runs().len(), 9);
        let c = check(&s, &CheckOptions::default());
        let status = c[0].rows.iter().find(|r| r.metric == "status").unwrap();
        assert!(
            status.regressed && status.note.contains("#10"),
            "{status:?}"
        );
        assert!(
            c[0].rows
                .iter()
                .filter(|r| r.metric != "status")
                .all(|r| !r.regressed),
            "{}",
            render_text(&c)
        );
    }
}
