//! `dbio regress --baseline BASE CURRENT`: the nightly gate. Per step (matched by readers,
//! writers and update_pct), the IOPS figures may not drop, and the latency figures may not
//! rise, by more than their thresholds. A step of the baseline missing from the current run
//! is a regression too. Output: a table of what moved how far against which threshold, and
//! optionally JUnit XML for CI systems.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::chart::escape;
use crate::summary::{Stat, StepSet, StepSummary};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Largest allowed drop of DB read IOPS and client ops/s, in %.
    pub max_iops_drop_pct: f64,
    /// Largest allowed rise of DB read latency and client read p99, in %.
    pub max_latency_rise_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_iops_drop_pct: 10.0,
            max_latency_rise_pct: 20.0,
        }
    }
}

/// `regress:` in the config: thresholds for every step, and per-step overrides by step label
/// (`r4-w0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegressConfig {
    pub max_iops_drop_pct: f64,
    pub max_latency_rise_pct: f64,
    pub steps: BTreeMap<String, Thresholds>,
}

impl Default for RegressConfig {
    fn default() -> Self {
        let t = Thresholds::default();
        RegressConfig {
            max_iops_drop_pct: t.max_iops_drop_pct,
            max_latency_rise_pct: t.max_latency_rise_pct,
            steps: BTreeMap::new(),
        }
    }
}

impl RegressConfig {
    /// The thresholds of a step: its override, or the general ones.
    pub fn for_step(&self, step: &str) -> Thresholds {
        self.steps.get(step).cloned().unwrap_or(Thresholds {
            max_iops_drop_pct: self.max_iops_drop_pct,
            max_latency_rise_pct: self.max_latency_rise_pct,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegressRow {
    pub step: String,
    pub metric: String,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    pub change_pct: Option<f64>,
    /// The allowed change, signed: -10 = may drop 10%, +20 = may rise 20%.
    pub threshold_pct: f64,
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

pub fn regress(base: &StepSet, current: &StepSet, cfg: &RegressConfig) -> Vec<RegressRow> {
    let mut rows = Vec::new();
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
                threshold_pct: 0.0,
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
                Direction::Drop => -t.max_iops_drop_pct,
                Direction::Rise => t.max_latency_rise_pct,
            };
            let change_pct = match (bv, cv) {
                (Some(bv), Some(cv)) if bv != 0.0 => Some(100.0 * (cv - bv) / bv),
                _ => None,
            };
            let (regressed, note) = match (change_pct, &dir) {
                (None, _) => (false, "not measured in both; not checked".to_string()),
                (Some(ch), Direction::Drop) if ch < threshold_pct => {
                    (true, format!("dropped more than {}%", t.max_iops_drop_pct))
                }
                (Some(ch), Direction::Rise) if ch > threshold_pct => {
                    (true, format!("rose more than {}%", t.max_latency_rise_pct))
                }
                (Some(_), _) => (false, "within threshold".to_string()),
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
            if r.metric == "step" {
                "-".to_string()
            } else {
                format!("{:+.0}%", r.threshold_pct)
            },
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

/// JUnit XML: one test case per step and metric, a failure for each regression.
pub fn render_junit(rows: &[RegressRow]) -> String {
    let failures = rows.iter().filter(|r| r.regressed).count();
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"dbio regress\" tests=\"{}\" failures=\"{failures}\">\n<testsuite name=\"dbio regress\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        rows.len(),
        rows.len()
    );
    for r in rows {
        let name = escape(&r.metric);
        let class = escape(&format!("dbio.regress.{}", r.step));
        if r.regressed {
            let message = format!(
                "{}: baseline {} current {} change {} allowed {:+.0}%",
                r.note,
                num(r.baseline),
                num(r.current),
                r.change_pct
                    .map(|c| format!("{c:+.1}%"))
                    .unwrap_or_else(|| "-".into()),
                r.threshold_pct
            );
            let _ = writeln!(
                o,
                "  <testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\" type=\"regression\">{}</failure></testcase>",
                escape(&message),
                escape(&message)
            );
        } else {
            let _ = writeln!(o, "  <testcase classname=\"{class}\" name=\"{name}\"/>");
        }
    }
    o.push_str("</testsuite>\n</testsuites>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::RunStatus;
    use crate::summary::StepKey;

    fn step(readers: u32, iops: f64, latency: f64) -> StepSummary {
        StepSummary {
            key: StepKey {
                readers,
                writers: 0,
                update_pct: 0,
            },
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
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            interval_ops_per_s: vec![],
            read_histogram: String::new(),
            results: vec![],
            warnings: vec![],
        }
    }

    fn set(steps: Vec<StepSummary>) -> StepSet {
        StepSet {
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
                    max_iops_drop_pct: 2.0,
                    max_latency_rise_pct: 5.0,
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
