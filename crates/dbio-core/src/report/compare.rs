//! `dbio compare A B [C ...]`: runs or ramps side by side. Steps are matched by readers,
//! writers and update_pct (two single runs are compared whatever their shape). Each key
//! figure gets its values, the % change against the first input, and a verdict that names
//! the test behind it: a difference is called significant when the test's p < 0.05 and the
//! change is at least 1% (so that a huge sample does not make a trivial change "significant").

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::chart::{Chart, Series, escape, render_svg};
use crate::report::csv_field;
use crate::report::ramp::{html_page, html_table};
use crate::stats::decode_histogram;
use crate::stats::significance::{TestOutcome, mann_whitney, welch_t_test};
use crate::summary::{Stat, StepSet, StepSummary};

pub const ALPHA: f64 = 0.05;
pub const MIN_EFFECT_PCT: f64 = 1.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    pub step: String,
    pub metric: String,
    /// One value per input, in input order.
    pub values: Vec<Option<f64>>,
    /// % change of each input against the first (the first is null).
    pub delta_pct: Vec<Option<f64>>,
    /// Test of each input against the first (the first is null).
    pub tests: Vec<Option<TestOutcome>>,
    /// `significant`, `not significant`, or why it was not tested.
    pub verdicts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub labels: Vec<String>,
    /// Each input's status (`ok`, `failed`, `interrupted`).
    pub statuses: Vec<String>,
    /// What each input measured differently from the first (`work_unit 64 vs 1`); empty for
    /// the first and for inputs of the same shape.
    pub differences: Vec<Vec<String>>,
    pub rows: Vec<CompareRow>,
    /// One line per metric and input after the first, over all matched steps: "b is 41-82%
    /// lower than a at every step (significant at 3 of 3)".
    pub verdicts: Vec<String>,
    /// Each input's own warnings (page-cache reads, a checkpoint in the window, ...), each
    /// once with the steps it applies to.
    pub warnings: Vec<Vec<String>>,
    /// Steps whose inputs were limited by different things (storage against page cache, a
    /// cap against storage), each with every input's limiter: their figures measure
    /// different things.
    #[serde(default)]
    pub limiters: Vec<String>,
    pub notes: Vec<String>,
}

impl Comparison {
    /// True when every input measured what the first did.
    pub fn comparable(&self) -> bool {
        self.differences.iter().all(Vec::is_empty)
    }
}

fn pct(base: Option<f64>, v: Option<f64>) -> Option<f64> {
    match (base, v) {
        (Some(b), Some(v)) if b != 0.0 => Some(100.0 * (v - b) / b),
        _ => None,
    }
}

fn verdict(test: &Option<TestOutcome>, delta: Option<f64>, untested: &str) -> String {
    match (test, delta) {
        (Some(t), Some(d)) if t.p_value < ALPHA && d.abs() >= MIN_EFFECT_PCT => {
            "significant".into()
        }
        (Some(_), _) => "not significant".into(),
        (None, _) => untested.into(),
    }
}

type Pick = fn(&StepSummary) -> Option<f64>;
type Tester = fn(&StepSummary, &StepSummary) -> Option<TestOutcome>;
/// Why a figure was not tested between two steps.
type Untested = fn(&StepSummary, &StepSummary) -> &'static str;
type SdPick = fn(&StepSummary) -> Option<f64>;

fn mean(s: &Option<Stat>) -> Option<f64> {
    s.as_ref().map(|v| v.mean)
}

fn repeats_test(a: &Option<Stat>, b: &Option<Stat>) -> Option<TestOutcome> {
    let (a, b) = (a.as_ref()?, b.as_ref()?);
    welch_t_test(&a.values, &b.values).map(|mut t| {
        t.test = "Welch's t-test on repeat values".into();
        t
    })
}

/// Why a test on repeat values could not run: a side without the figure (seen: "needs
/// --repeat 2+" said of ramps of 3 repeats when one side had no device), or fewer than two
/// repeats.
fn repeats_untested(a: &Option<Stat>, b: &Option<Stat>) -> &'static str {
    match (a, b) {
        (None, None) => "not tested (no value on either side)",
        (None, _) => "not tested (no value in the first)",
        (_, None) => "not tested (no value in this input)",
        (Some(a), Some(b)) if a.values.len() < 2 || b.values.len() < 2 => {
            "not tested (needs --repeat 2+)"
        }
        _ => "not tested",
    }
}

/// The compared figures: name, how to pick it, how to test it, and why it was untested.
fn metrics() -> Vec<(&'static str, Pick, Option<Tester>, Untested)> {
    vec![
        (
            "client ops/s",
            |s| Some(s.client_ops_per_s.mean),
            Some(|a, b| welch_t_test(&a.interval_ops_per_s, &b.interval_ops_per_s)),
            |_, _| "not tested (too few intervals)",
        ),
        (
            "client read p50 µs",
            |s| mean(&s.client_read_p50_us),
            Some(|a, b| {
                let ha = decode_histogram(&a.read_histogram).ok()?;
                let hb = decode_histogram(&b.read_histogram).ok()?;
                mann_whitney(&ha, &hb)
            }),
            |_, _| "not tested (no reads)",
        ),
        (
            "client read p99 µs",
            |s| mean(&s.client_read_p99_us),
            Some(|a, b| repeats_test(&a.client_read_p99_us, &b.client_read_p99_us)),
            |a, b| repeats_untested(&a.client_read_p99_us, &b.client_read_p99_us),
        ),
        (
            "DB read IOPS",
            |s| mean(&s.db_read_iops),
            Some(|a, b| repeats_test(&a.db_read_iops, &b.db_read_iops)),
            |a, b| repeats_untested(&a.db_read_iops, &b.db_read_iops),
        ),
        (
            "DB avg read latency µs",
            |s| mean(&s.db_avg_read_latency_us),
            Some(|a, b| repeats_test(&a.db_avg_read_latency_us, &b.db_avg_read_latency_us)),
            |a, b| repeats_untested(&a.db_avg_read_latency_us, &b.db_avg_read_latency_us),
        ),
        (
            "device read IOPS",
            |s| mean(&s.device_read_iops),
            Some(|a, b| repeats_test(&a.device_read_iops, &b.device_read_iops)),
            |a, b| repeats_untested(&a.device_read_iops, &b.device_read_iops),
        ),
    ]
}

/// Matches steps and compares every figure against the first input.
pub fn compare(sets: &[StepSet]) -> Comparison {
    let labels: Vec<String> = sets.iter().map(|s| s.label.clone()).collect();
    let mut notes = Vec::new();
    // (step label, one summary per input)
    let mut matched: Vec<(String, Vec<&StepSummary>)> = Vec::new();
    if sets.iter().all(|s| s.steps.len() == 1) {
        let steps: Vec<&StepSummary> = sets.iter().map(|s| &s.steps[0]).collect();
        let names: Vec<&str> = steps.iter().map(|s| s.step.as_str()).collect();
        if names.iter().any(|n| *n != names[0]) {
            notes.push(format!(
                "single runs of different shapes compared: {}",
                names.join(" vs ")
            ));
        }
        matched.push((names.join(" vs "), steps));
    } else if let Some(first) = sets.first() {
        for step in &first.steps {
            let others: Vec<Option<&StepSummary>> = sets
                .iter()
                .map(|s| s.steps.iter().find(|x| x.key == step.key))
                .collect();
            if others.iter().all(Option::is_some) {
                matched.push((step.step.clone(), others.into_iter().flatten().collect()));
            } else {
                notes.push(format!(
                    "step {} is not in every input; left out",
                    step.step
                ));
            }
        }
    }
    let names = column_names(&labels);
    let mut limiters = Vec::new();
    for (step, summaries) in &matched {
        let each: Vec<Option<&crate::limits::LimiterVerdict>> =
            summaries.iter().map(|s| s.limiter.as_ref()).collect();
        let kinds: Vec<Option<crate::limits::Limiter>> =
            each.iter().map(|v| v.map(|v| v.limiter)).collect();
        if kinds.iter().all(Option::is_none) || kinds.iter().all(|k| *k == kinds[0]) {
            continue;
        }
        let sides: Vec<String> = each
            .iter()
            .zip(&names)
            .map(|(v, n)| match v {
                Some(v) => format!("{n}: {}", v.line),
                None => format!("{n}: not judged (a result from before the limiter was recorded)"),
            })
            .collect();
        limiters.push(format!(
            "step {step}: limited by different things; {}",
            sides.join("; ")
        ));
    }
    // A step whose window opened without its steady-state rule holding measured a moving
    // figure: its differences may be the drift's.
    for (i, set) in sets.iter().enumerate() {
        let drifting: Vec<&str> = set
            .steps
            .iter()
            .filter(|s| s.steady == Some(false))
            .map(|s| s.step.as_str())
            .collect();
        if !drifting.is_empty() {
            notes.push(format!(
                "NOT STEADY: input {} ({}), step(s) {}: the window opened without its steady-state rule holding \
                 (run.steady_max ran out); their figures may still have been drifting, so a difference there may be the drift's",
                i + 1,
                set.label,
                drifting.join(", ")
            ));
        }
    }
    let mut rows = Vec::new();
    for (step, summaries) in matched {
        for (name, pick, tester, untested) in metrics() {
            let values: Vec<Option<f64>> = summaries.iter().map(|s| pick(s)).collect();
            let base = values[0];
            let delta_pct: Vec<Option<f64>> = values
                .iter()
                .enumerate()
                .map(|(i, v)| if i == 0 { None } else { pct(base, *v) })
                .collect();
            let tests: Vec<Option<TestOutcome>> = summaries
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    if i == 0 {
                        None
                    } else {
                        tester.and_then(|t| t(summaries[0], s))
                    }
                })
                .collect();
            let verdicts = tests
                .iter()
                .zip(&delta_pct)
                .enumerate()
                .map(|(i, (t, d))| {
                    if i == 0 {
                        "baseline".into()
                    } else {
                        verdict(t, *d, untested(summaries[0], summaries[i]))
                    }
                })
                .collect();
            rows.push(CompareRow {
                step: step.clone(),
                metric: name.to_string(),
                values,
                delta_pct,
                tests,
                verdicts,
            });
        }
    }
    let statuses = sets.iter().map(|s| s.status.as_str().to_string()).collect();
    let differences = sets
        .iter()
        .map(|s| match sets.first() {
            Some(first) => first
                .shape
                .differences(&s.shape)
                .iter()
                .map(|d| d.to_string())
                .collect(),
            None => Vec::new(),
        })
        .collect();
    let verdicts = metric_verdicts(&names, &rows);
    let warnings = sets.iter().map(input_warnings).collect();
    Comparison {
        labels,
        statuses,
        differences,
        rows,
        verdicts,
        warnings,
        limiters,
        notes,
    }
}

/// The runs' labels as column names, made unique (`ramp`, `ramp #2`).
pub fn column_names(labels: &[String]) -> Vec<String> {
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let short: String = if l.chars().count() > 20 {
                l.chars().take(19).chain(['…']).collect()
            } else {
                l.clone()
            };
            if labels[..i].contains(l) {
                format!("{short} #{}", i + 1)
            } else {
                short
            }
        })
        .collect()
}

/// Lower is better for latencies, higher for rates.
fn lower_is_better(metric: &str) -> bool {
    metric.contains("µs")
}

/// One line per metric and input: the range of % changes over the steps, in words.
fn metric_verdicts(names: &[String], rows: &[CompareRow]) -> Vec<String> {
    let mut out = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for r in rows {
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    for i in 1..names.len() {
        for m in &metrics {
            let of: Vec<&CompareRow> = rows.iter().filter(|r| r.metric == *m).collect();
            let deltas: Vec<f64> = of.iter().filter_map(|r| r.delta_pct[i]).collect();
            if deltas.is_empty() {
                out.push(format!(
                    "{m}: no % change: {}'s figure is 0 or missing at every step",
                    names[0]
                ));
                continue;
            }
            let tested = of.iter().filter(|r| r.tests[i].is_some()).count();
            let significant = of.iter().filter(|r| r.verdicts[i] == "significant").count();
            let (lo, hi) = deltas
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), d| {
                    (a.min(*d), b.max(*d))
                });
            let n = of.len();
            let every = deltas.len() > 1 || n > 1;
            let (a, b) = (names[i].as_str(), names[0].as_str());
            let change = if lo >= 0.0 || hi <= 0.0 {
                let (x, y) = (lo.abs().min(hi.abs()), lo.abs().max(hi.abs()));
                let size = if y - x < 0.05 {
                    format!("{y:.1}%")
                } else {
                    format!("{x:.1}-{y:.1}%")
                };
                let dir = match (lower_is_better(m), hi > 0.0) {
                    (true, true) => "higher (worse)",
                    (true, false) => "lower (better)",
                    (false, true) => "higher (better)",
                    (false, false) => "lower (worse)",
                };
                format!(
                    "{a} is {size} {dir} than {b}{}",
                    if every { " at every step" } else { "" }
                )
            } else {
                format!("{a} differs from {b} by {lo:+.1}% to {hi:+.1}%, depending on the step")
            };
            let test = if tested == 0 {
                of.iter()
                    .map(|r| r.verdicts[i].as_str())
                    .find(|v| v.starts_with("not tested"))
                    .unwrap_or("not tested")
                    .to_string()
            } else if significant == tested && tested == n {
                if n > 1 {
                    "significant at every step".into()
                } else {
                    "significant".into()
                }
            } else if significant == 0 {
                if tested == n && n > 1 {
                    format!("not significant at any of the {n} steps")
                } else if n > 1 {
                    format!("not significant at the {tested} of {n} steps tested")
                } else {
                    "not significant".into()
                }
            } else {
                format!("significant at {significant} of {n} step(s)")
            };
            out.push(format!("{m}: {change}; {test}"));
        }
    }
    out
}

/// An input's warnings, each once, with the steps it applies to.
fn input_warnings(set: &StepSet) -> Vec<String> {
    let grouped = crate::summary::group_warnings(set.steps.iter().flat_map(|s| {
        s.warnings
            .iter()
            .map(move |w| (s.step.as_str(), w.as_str()))
    }));
    grouped
        .into_iter()
        .map(|(w, steps)| {
            if set.steps.len() == 1 {
                w
            } else if steps.len() == set.steps.len() {
                format!("every step: {w}")
            } else {
                format!("{}: {w}", steps.join(", "))
            }
        })
        .collect()
}
fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

impl Comparison {
    pub fn render_text(&self) -> String {
        let names = column_names(&self.labels);
        let mut o = String::new();
        for line in self.difference_lines() {
            let _ = writeln!(o, "{line}");
        }
        for (i, l) in self.labels.iter().enumerate() {
            let _ = writeln!(
                o,
                "input {}: {l}{}{}",
                i + 1,
                if i == 0 {
                    " (baseline of the % changes)"
                } else {
                    ""
                },
                self.status_note(i)
            );
        }
        for (i, ws) in self.warnings.iter().enumerate() {
            for w in ws {
                let _ = writeln!(o, "WARNING ({}): {w}", names[i]);
            }
        }
        if !self.verdicts.is_empty() {
            let _ = writeln!(o, "\nverdict");
            for v in &self.verdicts {
                let _ = writeln!(o, "  {v}");
            }
        }
        if !self.limiters.is_empty() {
            let _ = writeln!(o, "\nlimited by");
            for l in &self.limiters {
                let _ = writeln!(o, "  {l}");
            }
        }
        let w = names
            .iter()
            .map(|n| n.chars().count())
            .max()
            .unwrap_or(0)
            .max(10)
            + 2;
        let mut step = "";
        for r in &self.rows {
            if r.step != step {
                step = &r.step;
                let _ = writeln!(o, "\nstep {step}");
                let mut h = format!("{:<24}", "metric");
                for n in &names {
                    let _ = write!(h, " {n:>w$}");
                }
                for n in &names[1..] {
                    let _ = write!(
                        h,
                        " {:>w$} {:>9}  {:<16}",
                        format!("Δ% {n}"),
                        "p",
                        "verdict"
                    );
                }
                let _ = writeln!(o, "{h}");
            }
            let mut line = format!("{:<24}", r.metric);
            for v in &r.values {
                let _ = write!(line, " {:>w$}", num(*v));
            }
            for i in 1..self.labels.len() {
                let _ = write!(
                    line,
                    " {:>w$} {:>9}  {:<16}",
                    r.delta_pct[i]
                        .map(|d| format!("{d:+.1}%"))
                        .unwrap_or_else(|| "-".into()),
                    r.tests[i]
                        .as_ref()
                        .map(|t| format!("{:.4}", t.p_value))
                        .unwrap_or_else(|| "-".into()),
                    r.verdicts[i]
                );
            }
            let _ = writeln!(o, "{line}");
        }
        let mut tests: Vec<&str> = self
            .rows
            .iter()
            .flat_map(|r| r.tests.iter().flatten().map(|t| t.test.as_str()))
            .collect();
        tests.sort();
        tests.dedup();
        let _ = writeln!(
            o,
            "\nsignificant = p < {ALPHA} and a change of at least {MIN_EFFECT_PCT}%. Tests used: {}",
            if tests.is_empty() {
                "none".to_string()
            } else {
                tests.join("; ")
            }
        );
        for n in &self.notes {
            let _ = writeln!(o, "note: {n}");
        }
        o
    }

    pub fn render_csv(&self) -> String {
        let mut header = vec!["step".to_string(), "metric".to_string()];
        for i in 0..self.labels.len() {
            header.push(format!("value_{}", i + 1));
        }
        for i in 1..self.labels.len() {
            header.extend([
                format!("delta_pct_{}", i + 1),
                format!("p_value_{}", i + 1),
                format!("test_{}", i + 1),
                format!("verdict_{}", i + 1),
            ]);
        }
        let mut o = header.join(",");
        o.push('\n');
        for r in &self.rows {
            let mut f = vec![csv_field(&r.step), csv_field(&r.metric)];
            f.extend(
                r.values
                    .iter()
                    .map(|v| v.map(|x| format!("{x:.3}")).unwrap_or_default()),
            );
            for i in 1..self.labels.len() {
                f.push(
                    r.delta_pct[i]
                        .map(|x| format!("{x:.3}"))
                        .unwrap_or_default(),
                );
                f.push(
                    r.tests[i]
                        .as_ref()
                        .map(|t| format!("{:.6}", t.p_value))
                        .unwrap_or_default(),
                );
                f.push(csv_field(
                    r.tests[i].as_ref().map(|t| t.test.as_str()).unwrap_or(""),
                ));
                f.push(csv_field(&r.verdicts[i]));
            }
            o.push_str(&f.join(","));
            o.push('\n');
        }
        o
    }

    /// Overlaid curves (one series per input) and the table.
    pub fn render_html(&self, sets: &[StepSet]) -> String {
        let names = column_names(&self.labels);
        let mut b = String::from("<h1>dbio compare</h1>\n");
        for n in self.difference_lines() {
            let _ = writeln!(b, "<p class=\"warn\"><b>{}</b></p>", escape(&n));
        }
        b.push_str("<ol>\n");
        for (i, l) in self.labels.iter().enumerate() {
            let storage = sets
                .get(i)
                .and_then(|s| s.steps.iter().find_map(|st| st.storage.clone()))
                .map(|d| format!(" (device {d})"))
                .unwrap_or_default();
            let _ = writeln!(
                b,
                "<li>{}{}{}</li>",
                escape(l),
                escape(&storage),
                escape(&self.status_note(i))
            );
        }
        b.push_str("</ol>\n");
        if !self.verdicts.is_empty() {
            b.push_str("<h2>Verdict</h2>\n<ul>\n");
            for v in &self.verdicts {
                let _ = writeln!(b, "<li>{}</li>", escape(v));
            }
            b.push_str("</ul>\n");
        }
        if !self.limiters.is_empty() {
            b.push_str("<h2>Limited by</h2>\n<ul>\n");
            for l in &self.limiters {
                let _ = writeln!(b, "<li class=\"warn\">{}</li>", escape(l));
            }
            b.push_str("</ul>\n");
        }
        let warned: Vec<(usize, &String)> = self
            .warnings
            .iter()
            .enumerate()
            .flat_map(|(i, ws)| ws.iter().map(move |w| (i, w)))
            .collect();
        if !warned.is_empty() {
            b.push_str("<h2>The inputs' warnings</h2>\n<ul>\n");
            for (i, w) in warned {
                let _ = writeln!(
                    b,
                    "<li class=\"warn\"><b>{}</b>: {}</li>",
                    escape(&names[i]),
                    escape(w)
                );
            }
            b.push_str("</ul>\n");
        }
        b.push_str("<div class=\"charts\">\n");
        let curve = |title: &str, y_label: &str, pick: Pick, sd: SdPick| Chart {
            title: title.into(),
            x_label: "reader sessions".into(),
            y_label: y_label.into(),
            series: sets
                .iter()
                .zip(&names)
                .map(|(s, name)| {
                    let steps: Vec<&StepSummary> =
                        s.steps.iter().filter(|st| pick(st).is_some()).collect();
                    Series {
                        name: name.clone(),
                        points: steps
                            .iter()
                            .filter_map(|st| Some((st.key.readers as f64, pick(st)?)))
                            .collect(),
                        labels: steps.iter().map(|st| st.key.readers.to_string()).collect(),
                        errors: steps.iter().map(|st| sd(st).unwrap_or(0.0)).collect(),
                        cache_served: steps
                            .iter()
                            .map(|st| {
                                crate::report::chart::cache_served(
                                    st.physical_read_ratio,
                                    st.backends_physical_read_ratio,
                                )
                            })
                            .collect(),
                    }
                })
                .filter(|s| !s.points.is_empty())
                .collect(),
            log2_x: true,
        };
        b.push_str(&render_svg(&curve(
            "DB read IOPS vs readers",
            "DB read requests per second (IOPS)",
            |s| mean(&s.db_read_iops),
            |s| s.db_read_iops.as_ref().map(|v| v.sd),
        )));
        b.push_str(&render_svg(&curve(
            "client ops/s vs readers",
            "operations per second (ops/s)",
            |s| Some(s.client_ops_per_s.mean),
            |s| Some(s.client_ops_per_s.sd),
        )));
        b.push_str(&render_svg(&curve(
            "DB avg read latency vs readers",
            "DB read latency (µs)",
            |s| mean(&s.db_avg_read_latency_us),
            |s| s.db_avg_read_latency_us.as_ref().map(|v| v.sd),
        )));
        b.push_str(&render_svg(&curve(
            "client read p99 vs readers",
            "client operation latency (µs)",
            |s| mean(&s.client_read_p99_us),
            |s| s.client_read_p99_us.as_ref().map(|v| v.sd),
        )));
        b.push_str("</div>\n");
        let mut header: Vec<String> = vec!["step".into(), "metric".into()];
        header.extend(names.iter().cloned());
        for n in &names[1..] {
            header.extend([format!("Δ% {n}"), format!("p {n}"), format!("verdict {n}")]);
        }
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let mut v = vec![r.step.clone(), r.metric.clone()];
                v.extend(r.values.iter().map(|x| num(*x)));
                for i in 1..self.labels.len() {
                    v.push(
                        r.delta_pct[i]
                            .map(|d| format!("{d:+.1}%"))
                            .unwrap_or_else(|| "-".into()),
                    );
                    v.push(
                        r.tests[i]
                            .as_ref()
                            .map(|t| format!("{:.4}", t.p_value))
                            .unwrap_or_else(|| "-".into()),
                    );
                    v.push(r.verdicts[i].clone());
                }
                v
            })
            .collect();
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        b.push_str(&html_table(&header_refs, &rows, 2));
        let _ = writeln!(
            b,
            "<p class=\"muted\">significant = p &lt; {ALPHA} and a change of at least {MIN_EFFECT_PCT}%. Throughput: Welch's t-test on \
             per-interval throughput (sample size corrected for autocorrelation); latency: Mann-Whitney U on the HDR distributions; \
             database figures: Welch's t-test on repeat values.</p>"
        );
        for n in &self.notes {
            let _ = writeln!(b, "<p class=\"warn\">{}</p>", escape(n));
        }
        html_page("dbio compare", &b)
    }

    fn status_note(&self, i: usize) -> String {
        match self.statuses.get(i).map(String::as_str) {
            Some("ok") | None => String::new(),
            Some(s) => format!(" [status {s}: its figures cover an incomplete run]"),
        }
    }

    /// "NOT COMPARABLE" lines, one per input that measured something else than input 1.
    fn difference_lines(&self) -> Vec<String> {
        self.differences
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.is_empty())
            .map(|(i, d)| {
                format!(
                    "NOT COMPARABLE: input {} ({}) measured something else than input 1 ({}): {}",
                    i + 1,
                    self.labels[i],
                    self.labels[0],
                    d.join("; ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::RunStatus;
    use crate::stats::{encode_histogram, new_histogram};
    use crate::summary::StepKey;

    fn step(readers: u32, ops: f64, latency_shift: u64) -> StepSummary {
        let mut h = new_histogram();
        for v in 100..600u64 {
            h.saturating_record(v + latency_shift);
        }
        StepSummary {
            key: StepKey::closed(readers, 0, 0),
            step: format!("r{readers}-w0"),
            repeats: 1,
            status: RunStatus::Ok,
            elapsed_s: 10.0,
            client_ops_per_s: Stat::of(vec![ops]).unwrap(),
            client_read_p50_us: Stat::of(vec![350.0 + latency_shift as f64]),
            client_read_p99_us: Stat::of(vec![595.0 + latency_shift as f64]),
            db_read_iops: Stat::of(vec![ops * 64.0]),
            db_write_iops: None,
            db_avg_read_latency_us: None,
            device_read_iops: None,
            physical_read_ratio: None,
            backends_physical_read_ratio: None,
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            storage: None,
            interval_ops_per_s: (0..10).map(|i| ops + (i % 3) as f64).collect(),
            read_histogram: encode_histogram(&h),
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

    fn set(label: &str, steps: Vec<StepSummary>) -> StepSet {
        StepSet {
            label: label.into(),
            path: label.into(),
            steps,
            status: crate::driver::RunStatus::Ok,
            shape: crate::shape::Shape::of(&crate::Config::default(), None, None),
        }
    }

    #[test]
    fn differences_and_status_come_first() {
        let a = set("a", vec![step(1, 1000.0, 0)]);
        let mut cfg = crate::Config::default();
        cfg.run.work_unit = 1;
        let mut b = set("b", vec![step(1, 1000.0, 0)]);
        b.shape = crate::shape::Shape::of(&cfg, None, None);
        b.status = crate::driver::RunStatus::Interrupted;
        let c = compare(&[a.clone(), b]);
        assert!(!c.comparable());
        let text = c.render_text();
        let first_step = text.find("step ").unwrap();
        let nc = text.find("NOT COMPARABLE: input 2").expect(&text);
        assert!(nc < first_step, "{text}");
        assert!(text.contains("work_unit 64 vs 1"), "{text}");
        assert!(text.contains("input 2: b [status interrupted"), "{text}");
        assert!(compare(&[a.clone(), a]).comparable());
    }

    #[test]
    fn the_limiter_of_each_side_is_named_when_they_differ() {
        let verdict = |limiter, line: &str| crate::limits::LimiterVerdict {
            limiter,
            line: line.into(),
            evidence: Vec::new(),
            missing: Vec::new(),
        };
        let mut disk = step(4, 1000.0, 0);
        disk.limiter = Some(verdict(
            crate::limits::Limiter::Storage,
            "storage: device vda 95% busy",
        ));
        let mut cached = step(4, 9000.0, 0);
        cached.limiter = Some(verdict(
            crate::limits::Limiter::PageCache,
            "page cache: 2% of what the database read came from storage",
        ));
        let c = compare(&[set("disk", vec![disk.clone()]), set("cached", vec![cached])]);
        assert_eq!(c.limiters.len(), 1, "{:?}", c.limiters);
        assert!(
            c.limiters[0].contains("disk: storage: device vda")
                && c.limiters[0].contains("cached: page cache: 2%"),
            "{}",
            c.limiters[0]
        );
        let text = c.render_text();
        assert!(
            text.contains("limited by\n  step r4-w0 vs r4-w0: limited by different things"),
            "{text}"
        );
        // The same limiter on both sides says nothing.
        let c = compare(&[set("a", vec![disk.clone()]), set("b", vec![disk])]);
        assert!(c.limiters.is_empty());
    }

    #[test]
    fn a_run_against_itself_is_not_significant() {
        let a = set("a", vec![step(1, 1000.0, 0)]);
        let c = compare(&[a.clone(), a]);
        for r in &c.rows {
            assert_ne!(r.verdicts[1], "significant", "{r:?}");
        }
        let ops = c.rows.iter().find(|r| r.metric == "client ops/s").unwrap();
        assert_eq!(ops.delta_pct[1], Some(0.0));
    }

    // Seen: "not tested (needs --repeat 2+)" for ramps of 3 repeats when one side had no
    // device figure.
    #[test]
    fn an_untested_figure_says_why() {
        let three = |v: f64| Stat::of(vec![v, v + 1.0, v + 2.0]);
        let mut a = step(1, 1000.0, 0);
        a.device_read_iops = three(500.0);
        a.db_read_iops = three(900.0);
        let mut b = step(1, 1000.0, 0);
        b.device_read_iops = None;
        b.db_read_iops = three(905.0);
        let c = compare(&[set("disk", vec![a]), set("tmpfs", vec![b])]);
        let verdict =
            |metric: &str| c.rows.iter().find(|r| r.metric == metric).unwrap().verdicts[1].clone();
        assert_eq!(
            verdict("device read IOPS"),
            "not tested (no value in this input)"
        );
        assert!(verdict("DB read IOPS").contains("significant"));
        assert_eq!(
            verdict("client read p99 µs"),
            "not tested (needs --repeat 2+)"
        );
    }

    #[test]
    fn a_real_difference_is_found_and_the_test_named() {
        let c = compare(&[
            set("one", vec![step(1, 1000.0, 0)]),
            set("four", vec![step(4, 3000.0, 300)]),
        ]);
        let ops = c.rows.iter().find(|r| r.metric == "client ops/s").unwrap();
        assert_eq!(ops.verdicts[1], "significant");
        assert!(ops.tests[1].as_ref().unwrap().test.contains("Welch"));
        let lat = c
            .rows
            .iter()
            .find(|r| r.metric == "client read p50 µs")
            .unwrap();
        assert_eq!(lat.verdicts[1], "significant");
        assert!(lat.tests[1].as_ref().unwrap().test.contains("Mann-Whitney"));
        assert!(c.notes[0].contains("different shapes"));
        assert!(
            c.verdicts.iter().any(|v| v
                .starts_with("client ops/s: four is 200.0% higher (better) than one; significant")),
            "{:?}",
            c.verdicts
        );
        assert!(
            c.verdicts
                .iter()
                .any(|v| v.starts_with("client read p99 µs:") && v.ends_with("needs --repeat 2+)")),
            "{:?}",
            c.verdicts
        );
        let text = c.render_text();
        assert!(text.contains("Welch") && text.contains("+200.0%"), "{text}");
        assert!(
            text.contains("Δ% four") && !text.contains("input 2 "),
            "{text}"
        );
        let csv = c.render_csv();
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .starts_with("step,metric,value_1,value_2,delta_pct_2")
        );
    }

    #[test]
    fn ramps_match_steps_by_shape() {
        let a = set(
            "a",
            vec![step(1, 100.0, 0), step(2, 200.0, 0), step(4, 300.0, 0)],
        );
        let b = set("b", vec![step(1, 100.0, 0), step(4, 330.0, 0)]);
        let c = compare(&[a, b]);
        let steps: Vec<&str> = c.rows.iter().map(|r| r.step.as_str()).collect();
        assert!(steps.contains(&"r1-w0") && steps.contains(&"r4-w0") && !steps.contains(&"r2-w0"));
        assert!(c.notes.iter().any(|n| n.contains("r2-w0")));
    }
}
