//! `dbio history report --out DIR`: `history.html`, self-contained, with an SVG trend chart
//! per series, step and metric (a point per run, titled with the run's label, tag and value;
//! change points as dashed lines), and `history.csv`, the series as rows.

use std::fmt::Write as _;

use crate::history::check::{CheckOptions, Metric, Series, describe_change};
use crate::history::edivisive;
use crate::report::chart::{Chart, Marks, Series as Line, escape, render_svg_marked};
use crate::report::csv_field;

/// One chart of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendChart {
    pub series: String,
    pub step: String,
    pub metric: Metric,
    pub svg: String,
    /// Where the change points start, as text.
    pub changes: Vec<String>,
}

pub struct HistoryReport {
    pub charts: Vec<TrendChart>,
    pub html: String,
    pub csv: String,
}

const CSV_HEADER: &str =
    "series,label,step,metric,position,run_id,tag,started,value,change_point,segment_mean";

/// Renders the trend of every series, step and metric that has at least one good run.
pub fn render(series: &[Series], o: &CheckOptions, store: &str) -> HistoryReport {
    let mut charts = Vec::new();
    let mut csv = format!("{CSV_HEADER}\n");
    for s in series {
        for &metric in &o.metrics {
            let (runs, values) = s.values(metric);
            if values.is_empty() {
                continue;
            }
            let cps = edivisive::detect(&values, &o.cpd);
            let mut segment_mean = vec![0.0; values.len()];
            for (i, v) in segment_mean.iter_mut().enumerate() {
                let seg = cps
                    .iter()
                    .rev()
                    .find(|c| c.index <= i)
                    .map(|c| &c.after)
                    .or(cps.first().map(|c| &c.before));
                *v = seg
                    .map(|g| g.mean)
                    .unwrap_or_else(|| values.iter().sum::<f64>() / values.len() as f64);
            }
            for (i, (r, v)) in runs.iter().zip(&values).enumerate() {
                let row = [
                    s.series.clone(),
                    s.label.clone(),
                    s.step.clone(),
                    metric.id().to_string(),
                    (i + 1).to_string(),
                    r.run_id.to_string(),
                    r.tag.clone().unwrap_or_default(),
                    r.started.to_rfc3339(),
                    format!("{v}"),
                    if cps.iter().any(|c| c.index == i) {
                        "yes".into()
                    } else {
                        String::new()
                    },
                    format!("{:.3}", segment_mean[i]),
                ];
                let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
                let _ = writeln!(csv, "{}", fields.join(","));
            }
            let titles = runs
                .iter()
                .zip(&values)
                .map(|(r, v)| {
                    format!(
                        "{} · tag {} · {}: {:.1} · run #{} · {}",
                        r.label,
                        r.tag.as_deref().unwrap_or("none"),
                        metric.name(),
                        v,
                        r.run_id,
                        r.started.format("%Y-%m-%d %H:%M UTC")
                    )
                })
                .collect();
            let changes: Vec<String> = cps
                .iter()
                .map(|c| format!("from run {}: {}", runs[c.index].name(), describe_change(c)))
                .collect();
            let chart = Chart {
                title: format!("{} · {} · {}", s.series, s.step, metric.name()),
                x_label: "run (oldest to newest)".into(),
                y_label: metric.name().into(),
                series: vec![Line::new(
                    metric.name(),
                    values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| ((i + 1) as f64, *v))
                        .collect(),
                )],
                log2_x: false,
            };
            let marks = Marks {
                titles: vec![titles],
                markers: cps
                    .iter()
                    .zip(&changes)
                    .map(|(c, t)| (c.index as f64 + 0.5, format!("change point {t}")))
                    .collect(),
            };
            charts.push(TrendChart {
                series: s.series.clone(),
                step: s.step.clone(),
                metric,
                svg: render_svg_marked(&chart, &marks),
                changes,
            });
        }
    }
    let html = render_html(series, &charts, o, store);
    HistoryReport { charts, html, csv }
}

fn render_html(series: &[Series], charts: &[TrendChart], o: &CheckOptions, store: &str) -> String {
    let mut h = String::from(
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/><title>dbio history</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:820px}h2{margin-top:2em;border-bottom:1px solid #ccc}li{margin:.3em 0}.muted{color:#666}</style></head><body>\n",
    );
    let _ = writeln!(h, "<h1>dbio history</h1>");
    let _ = writeln!(
        h,
        "<p class=\"muted\">Store: {}. {} series and step(s), {} chart(s). Change points: E-divisive means, permutation test of {} shuffles, p &lt;= {}, minimum change {}%, windows of {} runs. A dashed line marks where a new segment starts; each point's tooltip names its run's label, tag and value. Failed and interrupted runs are not in the series.</p>",
        escape(store),
        series.len(),
        charts.len(),
        o.cpd.permutations,
        o.cpd.alpha,
        100.0 * o.cpd.min_magnitude,
        o.cpd.window
    );
    for s in series {
        let _ = writeln!(
            h,
            "<h2>{} · step {}</h2>\n<p class=\"muted\">{} run(s), {} good.</p>",
            escape(&s.series),
            escape(&s.step),
            s.runs.len(),
            s.ok_runs().len()
        );
        for c in charts
            .iter()
            .filter(|c| c.series == s.series && c.step == s.step)
        {
            let _ = writeln!(h, "<h3>{}</h3>\n{}", escape(c.metric.name()), c.svg.trim());
            if c.changes.is_empty() {
                let _ = writeln!(h, "<p class=\"muted\">No change point.</p>");
            } else {
                let _ = writeln!(h, "<ul>");
                for t in &c.changes {
                    let _ = writeln!(h, "<li>{}</li>", escape(t));
                }
                let _ = writeln!(h, "</ul>");
            }
        }
    }
    h.push_str("</body></html>\n");
    h
}
