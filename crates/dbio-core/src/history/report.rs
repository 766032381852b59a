//! `dbio history report --out DIR`: `history.html`, self-contained: per series and step its
//! gate state (regression, improvement, ongoing, recovered, accepted, platform, cache) and an
//! SVG trend chart per figure (dates on the x axis, a point per run titled with the run's
//! label, tag and value, change points as dashed lines, each segment's noise as a band; a
//! long series drawn downsampled, keeping every change point and outlier); and
//! `history.csv`, every run as a row.

use std::fmt::Write as _;

use crate::history::Decision;
use crate::history::check::{self, CheckOptions, Metric, Series, SeriesCheck, State};
use crate::report::chart::{Chart, Marks, Series as Line, escape, render_svg_marked};
use crate::report::csv_field;

/// Above this many runs a chart is downsampled.
pub const MAX_POINTS: usize = 400;

/// One chart of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendChart {
    pub series: String,
    pub step: String,
    pub metric: Metric,
    pub svg: String,
    /// Where the change points start, as text.
    pub changes: Vec<String>,
    /// Runs drawn of the runs in the series.
    pub drawn: usize,
    pub runs: usize,
}

pub struct HistoryReport {
    pub charts: Vec<TrendChart>,
    pub html: String,
    pub csv: String,
}

const CSV_HEADER: &str = "series,label,step,metric,position,run_id,tag,started,value,change_point,segment_mean,cache_served,state";

fn days(t: &chrono::DateTime<chrono::Utc>) -> f64 {
    t.timestamp() as f64 / 86_400.0
}

/// The positions drawn of `n` values: all up to [`MAX_POINTS`]; beyond, every k-th, the first
/// and last, each change point and the run before it, and every outlier (beyond 3 sd of its
/// segment's mean).
pub fn downsample(x: &[f64], bounds: &[usize], sd_of: &dyn Fn(usize) -> (f64, f64)) -> Vec<usize> {
    let n = x.len();
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let k = n.div_ceil(MAX_POINTS / 2);
    let mut keep = vec![false; n];
    for (i, v) in x.iter().enumerate() {
        let (m, sd) = sd_of(i);
        keep[i] = i % k == 0 || i + 1 == n || (sd > 0.0 && (v - m).abs() > 3.0 * sd);
    }
    for &b in bounds {
        keep[b] = true;
        if b > 0 {
            keep[b - 1] = true;
        }
    }
    (0..n).filter(|i| keep[*i]).collect()
}

/// What the report says of a series: its state, or an improvement when the newest change
/// point is for the better and nothing is open.
fn headline(c: &SeriesCheck) -> String {
    let improved = c.metrics.iter().any(|m| {
        m.state == State::Ok
            && m.change_points.last().is_some_and(|cp| {
                Metric::parse(&m.metric).is_some_and(|x| {
                    if x.higher_is_better() {
                        cp.change_pct > 0.0
                    } else {
                        cp.change_pct < 0.0
                    }
                })
            })
    });
    let since = c
        .since
        .as_ref()
        .map(|r| format!(" since run #{} ({})", r.run, r.date.format("%Y-%m-%d")))
        .unwrap_or_default();
    let change = c.change.map(|v| format!(", {v:+.1}%")).unwrap_or_default();
    let what = c.metric.clone().unwrap_or_default();
    match c.state {
        State::New => format!("regression (new): {what}{change}{since}"),
        State::Ongoing => format!("regression (ongoing): {what}{change}{since}"),
        State::Platform => format!("platform change: {what}{change}{since}"),
        State::Cache => format!("cache: the newest run measured the page cache{since}"),
        State::Accepted => format!("accepted: {what}{since}"),
        State::Recovered => format!("recovered: {what}{since}"),
        State::Ok if improved => "improvement".into(),
        State::Ok => "ok".into(),
    }
}

/// Renders the state and trend of every series, step and metric that has at least one good
/// run.
pub fn render(
    series: &[Series],
    o: &CheckOptions,
    decisions: &[Decision],
    store: &str,
) -> HistoryReport {
    let checks = check::check(series, o, decisions);
    let mut charts = Vec::new();
    let mut csv = format!("{CSV_HEADER}\n");
    for s in series {
        let state = checks
            .iter()
            .find(|c| c.series == s.series && c.step == s.step);
        for &metric in &o.metrics {
            let (runs, values) = s.values(metric);
            if values.is_empty() {
                continue;
            }
            let mstate = state
                .and_then(|c| c.metrics.iter().find(|m| m.metric == metric.id()))
                .map(|m| m.state.as_str())
                .unwrap_or("retired");
            let t = o.thresholds(metric);
            // Change points over the runs the gate used (page-cache runs left out unless
            // allowed), drawn at those runs.
            let with_cache = o.allow_cache || s.kind == check::SeriesKind::Platform;
            let (gruns, gx) = s.values_with(metric, with_cache);
            let found = check::change_points(&gx, metric, &t);
            let cp_runs: Vec<i64> = found.iter().map(|f| gruns[f.cp.index].run_id).collect();
            // Segments (by run id ranges over all drawn runs): mean and sd.
            let mut bounds: Vec<usize> = std::iter::once(0)
                .chain(
                    cp_runs
                        .iter()
                        .filter_map(|id| runs.iter().position(|r| r.run_id == *id)),
                )
                .chain(std::iter::once(values.len()))
                .collect();
            bounds.dedup();
            let segs: Vec<(usize, usize, f64, f64)> = bounds
                .windows(2)
                .map(|w| {
                    let seg = &values[w[0]..w[1]];
                    let m = seg.iter().sum::<f64>() / seg.len().max(1) as f64;
                    let sd = if seg.len() > 1 {
                        (seg.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (seg.len() - 1) as f64)
                            .sqrt()
                    } else {
                        0.0
                    };
                    (w[0], w[1], m, sd)
                })
                .collect();
            let seg_of = |i: usize| {
                segs.iter()
                    .find(|g| i >= g.0 && i < g.1)
                    .map(|g| (g.2, g.3))
                    .unwrap_or((0.0, 0.0))
            };
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
                    if cp_runs.contains(&r.run_id) {
                        "yes".into()
                    } else {
                        String::new()
                    },
                    format!("{:.3}", seg_of(i).0),
                    match r.figures.cache_served {
                        Some(true) => "yes".into(),
                        Some(false) => "no".into(),
                        None => String::new(),
                    },
                    mstate.to_string(),
                ];
                let fields: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
                let _ = writeln!(csv, "{}", fields.join(","));
            }
            let drawn = downsample(&values, &bounds[1..bounds.len() - 1], &seg_of);
            let titles = drawn
                .iter()
                .map(|&i| {
                    let r = runs[i];
                    format!(
                        "{} · tag {} · {}: {:.1} · run #{} · {}{}",
                        r.label,
                        r.tag.as_deref().unwrap_or("none"),
                        metric.name(),
                        values[i],
                        r.run_id,
                        r.started.format("%Y-%m-%d %H:%M UTC"),
                        if r.cache_served() {
                            " · page cache, not storage"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            let changes: Vec<String> = found
                .iter()
                .map(|f| {
                    format!(
                        "from run {} ({}): {}",
                        gruns[f.cp.index].name(),
                        if f.first_night {
                            "first-night test"
                        } else {
                            "E-divisive"
                        },
                        check::describe_change(&f.cp)
                    )
                })
                .collect();
            let x_of = |i: usize| days(&runs[i].started);
            let mut line = Line::new(
                metric.name(),
                drawn.iter().map(|&i| (x_of(i), values[i])).collect(),
            );
            line.cache_served = drawn.iter().map(|&i| runs[i].cache_served()).collect();
            let chart = Chart {
                title: format!("{} · {} · {}", s.series, s.step, metric.name()),
                x_label: if drawn.len() < values.len() {
                    format!(
                        "date (UTC); {} of {} runs drawn: change points and outliers all kept",
                        drawn.len(),
                        values.len()
                    )
                } else {
                    "date (UTC)".into()
                },
                y_label: metric.name().into(),
                series: vec![line],
                log2_x: false,
            };
            let marks = Marks {
                titles: vec![titles],
                markers: cp_runs
                    .iter()
                    .zip(&changes)
                    .filter_map(|(id, t)| {
                        let i = runs.iter().position(|r| r.run_id == *id)?;
                        let x = if i > 0 {
                            (x_of(i - 1) + x_of(i)) / 2.0
                        } else {
                            x_of(i)
                        };
                        Some((x, format!("change point {t}")))
                    })
                    .collect(),
                x_dates: true,
                bands: segs
                    .iter()
                    .map(|&(a, b, m, sd)| {
                        (
                            x_of(a),
                            x_of(b - 1),
                            m - sd,
                            m + sd,
                            format!(
                                "noise: mean {m:.1} ± sd {sd:.1} ({:.1}%) over {} runs",
                                if m != 0.0 { 100.0 * sd / m.abs() } else { 0.0 },
                                b - a
                            ),
                        )
                    })
                    .collect(),
                ..Marks::default()
            };
            charts.push(TrendChart {
                series: s.series.clone(),
                step: s.step.clone(),
                metric,
                svg: render_svg_marked(&chart, &marks),
                changes,
                drawn: drawn.len(),
                runs: values.len(),
            });
        }
    }
    let html = render_html(series, &checks, &charts, o, store);
    HistoryReport { charts, html, csv }
}

fn render_html(
    series: &[Series],
    checks: &[SeriesCheck],
    charts: &[TrendChart],
    o: &CheckOptions,
    store: &str,
) -> String {
    let mut h = String::from(
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/><title>dbio history</title>\n<style>body{font-family:sans-serif;margin:2em;max-width:820px}h2{margin-top:2em;border-bottom:1px solid #ccc}li{margin:.3em 0}.muted{color:#666}.state{font-weight:bold}.red{color:#a40000}.green{color:#2a7a2a}</style></head><body>\n",
    );
    let _ = writeln!(h, "<h1>dbio history</h1>");
    let _ = writeln!(
        h,
        "<p class=\"muted\">Store: {}. {} series and step(s), {} chart(s). Change points: E-divisive means (permutation test of {} shuffles, p &lt;= {}, windows of {} runs) and the first-night t-test; the gate: t-test p &lt;= {}, minimum change {}%. A dashed line marks where a new segment starts, the band is each segment's mean ± its run-to-run sd; each point's tooltip names its run's label, tag and value; hollow points measured the page cache. Failed and interrupted runs are not in the series.</p>",
        escape(store),
        series.len(),
        charts.len(),
        o.cpd.permutations,
        o.cpd.alpha,
        o.cpd.window,
        o.alpha,
        100.0 * o.cpd.min_magnitude
    );
    for s in series {
        let c = checks
            .iter()
            .find(|c| c.series == s.series && c.step == s.step);
        let (head, class) = match c {
            Some(c) => (
                headline(c),
                if c.gates {
                    "red"
                } else if c.state.red() {
                    "muted"
                } else {
                    "green"
                },
            ),
            None => ("retired: not checked".to_string(), "muted"),
        };
        let _ = writeln!(
            h,
            "<h2>{} · step {}</h2>\n<p><span class=\"state {class}\">{}</span> <span class=\"muted\">{} run(s), {} good.</span></p>",
            escape(&s.series),
            escape(&s.step),
            escape(&head),
            s.runs.len(),
            s.ok_runs().len()
        );
        if let Some(c) = c
            && !c.events.is_empty()
        {
            {
                let _ = writeln!(h, "<ul class=\"events\">");
                for e in &c.events {
                    let _ = writeln!(
                        h,
                        "<li>event at run #{} ({}): {}</li>",
                        e.run.run,
                        e.run.date.format("%Y-%m-%d"),
                        escape(&e.what)
                    );
                }
                let _ = writeln!(h, "</ul>");
            }
        }
        for ch in charts
            .iter()
            .filter(|ch| ch.series == s.series && ch.step == s.step)
        {
            let note = c
                .and_then(|c| c.metrics.iter().find(|m| m.metric == ch.metric.id()))
                .map(|m| format!("{}: {}", m.state.as_str(), m.note))
                .unwrap_or_default();
            let _ = writeln!(
                h,
                "<h3>{}</h3>\n<p class=\"muted\">{}</p>\n{}",
                escape(ch.metric.name()),
                escape(&note),
                ch.svg.trim()
            );
            if ch.changes.is_empty() {
                let _ = writeln!(h, "<p class=\"muted\">No change point.</p>");
            } else {
                let _ = writeln!(h, "<ul>");
                for t in &ch.changes {
                    let _ = writeln!(h, "<li>{}</li>", escape(t));
                }
                let _ = writeln!(h, "</ul>");
            }
        }
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2,000 runs must stay readable: about MAX_POINTS drawn, and what a reader looks for
    // (the ends, each change point and the run before it, every outlier) always among them.
    #[test]
    fn downsampling_keeps_ends_change_points_and_outliers() {
        let mut x: Vec<f64> = (0..2000)
            .map(|i| if i < 1500 { 1000.0 } else { 800.0 } + (i % 7) as f64)
            .collect();
        x[1234] = 5000.0;
        let bounds = [1500];
        let sd_of = |i: usize| {
            if i < 1500 {
                (1003.0, 2.0)
            } else {
                (803.0, 2.0)
            }
        };
        let kept = downsample(&x, &bounds, &sd_of);
        assert!(kept.len() <= MAX_POINTS + 10, "{} points drawn", kept.len());
        assert!(kept.len() >= MAX_POINTS / 2, "{} points drawn", kept.len());
        for must in [0, 1499, 1500, 1234, 1999] {
            assert!(kept.contains(&must), "run {must} not drawn");
        }
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "in order, once each");
        // Short series are drawn whole.
        assert_eq!(
            downsample(&x[..300], &[], &sd_of),
            (0..300).collect::<Vec<_>>()
        );
    }
}
