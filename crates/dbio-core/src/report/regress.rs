//! `dbio regress --baseline BASE CURRENT`: the nightly gate. Per step (matched by readers,
//! writers and update_pct), the IOPS figures may not drop, and the latency figures may not
//! rise, by more than their thresholds. A step of the baseline missing from the current run
//! is a regression too. Output: a table of what moved how far against which threshold, and
//! optionally JUnit XML for CI systems.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::driver::RunStatus;
use crate::report::chart::escape;
use crate::summary::{Stat, StepSet, StepSummary};

pub use crate::config::thresholds::{RegressConfig, Threshold, Thresholds};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressRow {
    pub step: String,
    pub metric: String,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    pub change_pct: Option<f64>,
    /// The allowed change, signed: -10 = may drop 10%, +20 = may rise 20%; null when that
    /// gate is off.
    pub threshold_pct: Option<f64>,
    pub regressed: bool,
    pub note: String,
}

enum Direction {
    /// Higher is better (IOPS).
    Drop,
    /// Lower is better (latency).
    Rise,
}

fn mean(s: &Option<Stat>) -> Option<f64> {
    s.as_ref().map(|v| v.mean)
}

type Pick = fn(&StepSummary) -> Option<f64>;

fn checks() -> [(&'static str, Pick, Direction); 4] {
    [
        ("DB read IOPS", |s| mean(&s.db_read_iops), Direction::Drop),
        (
            "client ops/s",
            |s| Some(s.client_ops_per_s.mean),
            Direction::Drop,
        ),
        (
            "DB avg read latency µs",
            |s| mean(&s.db_avg_read_latency_us),
            Direction::Rise,
        ),
        (
            "client read p99 µs",
            |s| mean(&s.client_read_p99_us),
            Direction::Rise,
        ),
    ]
}

/// What makes a regress meaningless, refused before any figure is compared (exit 2): a
/// baseline that did not finish ok, and a current run that measured something else (other
/// work_unit, server version, shared_buffers, ...) unless each such fact is in `accepted`.
pub fn refusal(base: &StepSet, current: &StepSet, accepted: &[String]) -> Option<String> {
    let failed_step = base.steps.iter().find(|s| s.status != RunStatus::Ok);
    if base.status != RunStatus::Ok || failed_step.is_some() {
        let status = failed_step.map(|s| s.status).unwrap_or(base.status);
        return Some(format!(
            "the baseline {} is {}: a failed or interrupted run is never a baseline; use a run whose status is ok",
            base.path.display(),
            status.as_str()
        ));
    }
    if let Some(s) = base.steps.iter().find(|s| s.stalled_ops > 0) {
        return Some(format!(
            "the baseline {} had {} operation(s) stalled when the window ended (step {}; see its warnings): \
             a flagged run is never a baseline; use a run without stalls",
            base.path.display(),
            s.stalled_ops,
            s.step
        ));
    }
    let open: Vec<String> = base
        .shape
        .differences(&current.shape)
        .into_iter()
        .filter(|d| !accepted.iter().any(|a| a == d.fact))
        .map(|d| d.to_string())
        .collect();
    if open.is_empty() {
        return None;
    }
    Some(format!(
        "{} and {} do not measure the same thing: {}; if these differences are intended, accept them with --accept-difference {}",
        base.path.display(),
        current.path.display(),
        open.join("; "),
        base.shape
            .differences(&current.shape)
            .iter()
            .filter(|d| !accepted.iter().any(|a| a == d.fact))
            .map(|d| d.fact)
            .collect::<Vec<_>>()
            .join(",")
    ))
}

pub fn regress(base: &StepSet, current: &StepSet, cfg: &RegressConfig) -> Vec<RegressRow> {
    let mut rows = Vec::new();
    // A failed or interrupted run never passes, whatever its figures.
    for c in &current.steps {
        let status = if c.status != RunStatus::Ok {
            c.status
        } else {
            current.status
        };
        if status != RunStatus::Ok {
            rows.push(RegressRow {
                step: c.step.clone(),
                metric: "status".into(),
                baseline: None,
                current: None,
                change_pct: None,
                threshold_pct: None,
                regressed: true,
                note: format!(
                    "the current run is {}: a failed or interrupted run never passes",
                    status.as_str()
                ),
            });
        }
    }
    let single = base.steps.len() == 1 && current.steps.len() == 1;
    for b in &base.steps {
        let t = cfg.for_step(&b.step);
        let cur = if single {
            current.steps.first()
        } else {
            current.steps.iter().find(|c| c.key == b.key)
        };
        let Some(c) = cur else {
            rows.push(RegressRow {
                step: b.step.clone(),
                metric: "step".into(),
                baseline: None,
                current: None,
                change_pct: None,
                threshold_pct: None,
                regressed: true,
                note: "the step is in the baseline but not in the current run".into(),
            });
            continue;
        };
        let step = if b.step == c.step {
            b.step.clone()
        } else {
            format!("{} vs {}", b.step, c.step)
        };
        for (metric, pick, dir) in checks() {
            let (bv, cv) = (pick(b), pick(c));
            let threshold_pct = match dir {
                Direction::Drop => t.max_iops_drop_pct.pct().map(|v| -v),
                Direction::Rise => t.max_latency_rise_pct.pct(),
            };
            let change_pct = match (bv, cv) {
                (Some(bv), Some(cv)) if bv != 0.0 => Some(100.0 * (cv - bv) / bv),
                _ => None,
            };
            let (regressed, note) = match (change_pct, threshold_pct, &dir) {
                (_, None, _) => (false, "gate off; not checked".to_string()),
                (None, _, _) => (false, "not measured in both; not checked".to_string()),
                (Some(ch), Some(th), Direction::Drop) if ch < th => {
                    (true, format!("dropped more than {}%", -th))
                }
                (Some(ch), Some(th), Direction::Rise) if ch > th => {
                    (true, format!("rose more than {th}%"))
                }
                (Some(_), _, _) => (false, "within threshold".to_string()),
            };
            rows.push(RegressRow {
                step: step.clone(),
                metric: metric.into(),
                baseline: bv,
                current: cv,
                change_pct,
                threshold_pct,
                regressed,
                note,
            });
        }
    }
    rows
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

fn allowed(r: &RegressRow) -> String {
    match r.threshold_pct {
        _ if r.metric == "step" || r.metric == "status" => "-".into(),
        Some(t) => format!("{t:+.0}%"),
        None => "off".into(),
    }
}

/// `dbio regress --format json`: what was checked against what, and the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct RegressReport<'a> {
    pub baseline: &'a str,
    pub current: &'a str,
    /// True when any check regressed (exit 1).
    pub regressed: bool,
    pub regressions: usize,
    pub checks: &'a [RegressRow],
}

impl<'a> RegressReport<'a> {
    pub fn of(base: &'a StepSet, current: &'a StepSet, rows: &'a [RegressRow]) -> Self {
        let regressions = rows.iter().filter(|r| r.regressed).count();
        RegressReport {
            baseline: &base.label,
            current: &current.label,
            regressed: regressions > 0,
            regressions,
            checks: rows,
        }
    }
}

pub fn render_text(base: &StepSet, current: &StepSet, rows: &[RegressRow]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "baseline: {}\ncurrent:  {}", base.label, current.label);
    let _ = writeln!(
        o,
        "{:<14} {:<24} {:>12} {:>12} {:>9} {:>10}  verdict",
        "step", "metric", "baseline", "current", "change", "allowed"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "{:<14} {:<24} {:>12} {:>12} {:>9} {:>10}  {}{}",
            r.step,
            r.metric,
            num(r.baseline),
            num(r.current),
            r.change_pct
                .map(|c| format!("{c:+.1}%"))
                .unwrap_or_else(|| "-".into()),
            allowed(r),
            if r.regressed { "REGRESSION: " } else { "ok: " },
            r.note
        );
    }
    let n = rows.iter().filter(|r| r.regressed).count();
    if n == 0 {
        let _ = writeln!(o, "no regression ({} checks)", rows.len());
    } else {
        let _ = writeln!(o, "{n} regression(s) in {} checks", rows.len());
    }
    o
}

/// A JUnit test case: its class and name, and the failure message when it failed.
pub struct JunitCase {
    pub class: String,
    pub name: String,
    pub failure: Option<String>,
}

/// JUnit XML of one suite, as CI systems read it (`dbio regress`, `dbio history check`).
pub fn junit(suite: &str, cases: &[JunitCase]) -> String {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let suite = escape(suite);
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"{suite}\" tests=\"{}\" failures=\"{failures}\">\n<testsuite name=\"{suite}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        cases.len(),
        cases.len()
    );
    for c in cases {
        let (class, name) = (escape(&c.class), escape(&c.name));
        match &c.failure {
            Some(message) => {
                let _ = writeln!(
                    o,
                    "  <testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\" type=\"regression\">{}</failure></testcase>",
                    escape(message),
                    escape(message)
                );
            }
            None => {
                let _ = writeln!(o, "  <testcase classname=\"{class}\" name=\"{name}\"/>");
            }
        }
    }
    o.push_str("</testsuite>\n</testsuites>\n");
    o
}

/// JUnit XML: one test case per step and metric, a failure for each regression.
pub fn render_junit(rows: &[RegressRow]) -> String {
    let cases: Vec<JunitCase> = rows
        .iter()
        .map(|r| JunitCase {
            class: format!("dbio.regress.{}", r.step),
            name: r.metric.clone(),
            failure: r.regressed.then(|| {
                format!(
                    "{}: baseline {} current {} change {} allowed {}",
                    r.note,
                    num(r.baseline),
                    num(r.current),
                    r.change_pct
                        .map(|c| format!("{c:+.1}%"))
                        .unwrap_or_else(|| "-".into()),
                    allowed(r)
                )
            }),
        })
        .collect();
    junit("dbio regress", &cases)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::driver::RunStatus;
    use crate::summary::StepKey;

    fn step(readers: u32, iops: f64, latency: f64) -> StepSummary {
        StepSummary {
            key: StepKey::closed(readers, 0, 0),
            step: format!("r{readers}-w0"),
            repeats: 1,
            status: RunStatus::Ok,
            elapsed_s: 10.0,
            client_ops_per_s: Stat::of(vec![iops / 64.0]).unwrap(),
            client_read_p50_us: None,
            client_read_p99_us: Stat::of(vec![latency * 3.0]),
            db_read_iops: Stat::of(vec![iops]),
            db_write_iops: None,
            db_avg_read_latency_us: Stat::of(vec![latency]),
            device_read_iops: None,
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
            stalled_ops: 0,
            targets: vec![],
            device_await_ms: None,
            device_queue_depth: None,
            device_reads_in_flight: None,
            db_reads_in_flight: None,
            limiter: None,
            steady: None,
        }
    }

    fn set(steps: Vec<StepSummary>) -> StepSet {
        StepSet {
            status: RunStatus::Ok,
            shape: crate::shape::Shape::of(&crate::Config::default(), None, None),
            label: "x".into(),
            path: "x".into(),
            steps,
        }
    }

    #[test]
    fn a_drop_beyond_the_threshold_regresses() {
        let base = set(vec![step(1, 1000.0, 100.0), step(4, 4000.0, 100.0)]);
        let same = regress(&base, &base, &RegressConfig::default());
        assert!(same.iter().all(|r| !r.regressed));
        let worse = set(vec![step(1, 950.0, 100.0), step(4, 3000.0, 130.0)]);
        let rows = regress(&base, &worse, &RegressConfig::default());
        let bad: Vec<(&str, &str)> = rows
            .iter()
            .filter(|r| r.regressed)
            .map(|r| (r.step.as_str(), r.metric.as_str()))
            .collect();
        assert!(bad.contains(&("r4-w0", "DB read IOPS")));
        assert!(bad.contains(&("r4-w0", "DB avg read latency µs")));
        assert!(
            !bad.iter().any(|(s, _)| *s == "r1-w0"),
            "a 5% drop is within 10%: {bad:?}"
        );
        let text = render_text(&base, &worse, &rows);
        assert!(
            text.contains("REGRESSION") && text.contains("-25.0%") && text.contains("-10%"),
            "{text}"
        );
    }

    #[test]
    fn per_step_thresholds_and_missing_steps() {
        let base = set(vec![step(1, 1000.0, 100.0), step(4, 4000.0, 100.0)]);
        let cur = set(vec![step(1, 960.0, 100.0)]);
        let cfg = RegressConfig {
            steps: BTreeMap::from([(
                "r1-w0".to_string(),
                Thresholds {
                    max_iops_drop_pct: Threshold::Pct(2.0),
                    max_latency_rise_pct: Threshold::Pct(5.0),
                },
            )]),
            ..RegressConfig::default()
        };
        let rows = regress(&base, &cur, &cfg);
        assert!(
            rows.iter()
                .any(|r| r.step == "r1-w0" && r.metric == "DB read IOPS" && r.regressed)
        );
        assert!(
            rows.iter()
                .any(|r| r.step == "r4-w0" && r.metric == "step" && r.regressed)
        );
    }

    // A run whose operation stalled 3.26 s at the window's end was taken as a baseline (its
    // latency figures cannot show the stall).
    #[test]
    fn a_run_with_a_stalled_operation_is_never_a_baseline() {
        let mut base = set(vec![step(1, 1000.0, 100.0)]);
        base.steps[0].stalled_ops = 1;
        let cur = set(vec![step(1, 1000.0, 100.0)]);
        let e = refusal(&base, &cur, &[]).expect("a stalled baseline is refused");
        assert!(
            e.contains("stalled") && e.contains("never a baseline"),
            "{e}"
        );
        assert!(
            refusal(&cur, &base, &[]).is_none(),
            "it may be the current run"
        );
    }

    #[test]
    fn an_interrupted_run_never_passes_and_is_never_a_baseline() {
        let base = set(vec![step(1, 1000.0, 100.0)]);
        let mut cur = set(vec![step(1, 1000.0, 100.0)]);
        cur.status = RunStatus::Interrupted;
        let rows = regress(&base, &cur, &RegressConfig::default());
        let status: Vec<_> = rows.iter().filter(|r| r.metric == "status").collect();
        assert_eq!(status.len(), 1);
        assert!(status[0].regressed && status[0].note.contains("interrupted"));
        assert!(render_text(&base, &cur, &rows).contains("REGRESSION"));
        assert!(refusal(&base, &cur, &[]).is_none());
        let e = refusal(&cur, &base, &[]).expect("an interrupted baseline is refused");
        assert!(e.contains("never a baseline"), "{e}");
    }

    #[test]
    fn other_shapes_are_refused_unless_accepted() {
        let base = set(vec![step(1, 1000.0, 100.0)]);
        let mut cur = set(vec![step(1, 1000.0, 100.0)]);
        let mut cfg = crate::Config::default();
        cfg.run.work_unit = 1;
        cur.shape = crate::shape::Shape::of(&cfg, None, None);
        let e = refusal(&base, &cur, &[]).expect("refused");
        assert!(
            e.contains("work_unit 64 vs 1") && e.contains("--accept-difference work_unit"),
            "{e}"
        );
        assert!(refusal(&base, &cur, &["work_unit".to_string()]).is_none());
    }

    #[test]
    fn a_gate_that_is_off_never_fails() {
        let base = set(vec![step(1, 1000.0, 100.0)]);
        // Latency 25 times worse, as a noisy client p99 on a busy host can be.
        let cur = set(vec![step(1, 990.0, 2500.0)]);
        let cfg: RegressConfig =
            serde_saphyr::from_str("max_latency_rise_pct: off\n").expect("`off` parses");
        assert_eq!(cfg.max_latency_rise_pct, Threshold::Off);
        let rows = regress(&base, &cur, &cfg);
        assert!(rows.iter().all(|r| !r.regressed), "{rows:?}");
        let latency: Vec<_> = rows.iter().filter(|r| r.metric.contains("µs")).collect();
        assert_eq!(latency.len(), 2);
        assert!(latency.iter().all(|r| r.threshold_pct.is_none()));
        assert!(render_text(&base, &cur, &rows).contains(" off "));
        // The throughput gate still works beside it.
        let rows = regress(&base, &set(vec![step(1, 500.0, 2500.0)]), &cfg);
        assert_eq!(rows.iter().filter(|r| r.regressed).count(), 2);
        assert_eq!("off".parse::<Threshold>(), Ok(Threshold::Off));
        assert_eq!("12.5%".parse::<Threshold>(), Ok(Threshold::Pct(12.5)));
        assert!("lots".parse::<Threshold>().is_err());
    }

    #[test]
    fn junit_counts_failures_and_escapes() {
        let base = set(vec![step(1, 1000.0, 100.0)]);
        let rows = regress(
            &base,
            &set(vec![step(1, 500.0, 100.0)]),
            &RegressConfig::default(),
        );
        let xml = render_junit(&rows);
        assert!(xml.contains("tests=\"4\" failures=\"2\""), "{xml}");
        assert!(xml.contains("<failure message=") && xml.contains("µs"));
        assert_eq!(xml.matches("<testcase").count(), 4);
    }
}
