//! A ramp's outputs: `ramp.csv` and `ramp.txt` (one line per step, the awr_info habit), SVG
//! charts (IOPS vs readers; latency vs readers; latency vs IOPS) and a self-contained
//! `report.html` with the charts inline.

use std::fmt::Write as _;

use crate::chart::{Chart, Series, escape};
use crate::report::csv_field;
use crate::summary::{RampResult, Stat, StepSummary};

fn f1(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.1}", s.mean))
        .unwrap_or_default()
}

fn f0(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.0}", s.mean))
        .unwrap_or_default()
}

fn sd(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.1}", s.sd))
        .unwrap_or_default()
}

fn cv(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.3}", s.cv))
        .unwrap_or_default()
}

/// Columns of ramp.csv, in order, and how each step fills them.
pub fn ramp_rows(r: &RampResult) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "step",
        "readers",
        "writers",
        "update_pct",
        "repeats",
        "status",
        "elapsed_s",
        "db_read_iops",
        "db_read_iops_sd",
        "db_read_iops_cv",
        "db_write_iops",
        "db_avg_read_latency_us",
        "client_ops_per_s",
        "client_ops_per_s_sd",
        "client_ops_per_s_cv",
        "client_read_p50_us",
        "client_read_p99_us",
        "device_read_iops",
        "physical_read_ratio",
        "raw_device_iops",
        "db_to_raw_iops_ratio",
        "top_wait",
    ];
    let rows = r
        .steps
        .iter()
        .map(|s| {
            let client = Some(s.client_ops_per_s.clone());
            vec![
                s.step.clone(),
                s.key.readers.to_string(),
                s.key.writers.to_string(),
                s.key.update_pct.to_string(),
                s.repeats.to_string(),
                s.status.as_str().to_string(),
                format!("{:.3}", s.elapsed_s),
                f1(&s.db_read_iops),
                sd(&s.db_read_iops),
                cv(&s.db_read_iops),
                f1(&s.db_write_iops),
                f1(&s.db_avg_read_latency_us),
                f1(&client),
                sd(&client),
                cv(&client),
                f0(&s.client_read_p50_us),
                f0(&s.client_read_p99_us),
                f1(&s.device_read_iops),
                s.physical_read_ratio
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_default(),
                s.raw_device_iops
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                s.db_to_raw_iops_ratio
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_default(),
                s.top_wait.clone().unwrap_or_default(),
            ]
        })
        .collect();
    (header, rows)
}

pub fn ramp_csv(r: &RampResult) -> String {
    let (header, rows) = ramp_rows(r);
    let mut o = header.join(",");
    o.push('\n');
    for row in rows {
        o.push_str(
            &row.iter()
                .map(|v| csv_field(v))
                .collect::<Vec<_>>()
                .join(","),
        );
        o.push('\n');
    }
    o
}

/// The same table, aligned for reading; units in the header.
pub fn ramp_txt(r: &RampResult) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "dbio ramp{}  status {}  {} .. {} UTC",
        r.label
            .as_deref()
            .map(|l| format!(" \"{l}\""))
            .unwrap_or_default(),
        r.status.as_str(),
        r.started.format("%Y-%m-%d %H:%M:%S"),
        r.finished.format("%H:%M:%S")
    );
    if let Some(env) = &r.environment {
        let _ = writeln!(o, "target {} (server {})", env.target, env.server_version);
    }
    let _ = writeln!(
        o,
        "{:<12} {:>7} {:>7} {:>4} {:>9} {:>12} {:>7} {:>12} {:>13} {:>12} {:>10} {:>10} {:>12}  top wait",
        "step",
        "readers",
        "writers",
        "rep",
        "elapsed s",
        "DB read/s",
        "cv",
        "DB write/s",
        "read lat µs",
        "client op/s",
        "p50 µs",
        "p99 µs",
        "device rd/s",
    );
    for s in &r.steps {
        let client = Some(s.client_ops_per_s.clone());
        let _ = writeln!(
            o,
            "{:<12} {:>7} {:>7} {:>4} {:>9.1} {:>12} {:>7} {:>12} {:>13} {:>12} {:>10} {:>10} {:>12}  {}{}",
            s.step,
            s.key.readers,
            s.key.writers,
            s.repeats,
            s.elapsed_s,
            f1(&s.db_read_iops),
            cv(&s.db_read_iops),
            f1(&s.db_write_iops),
            f1(&s.db_avg_read_latency_us),
            f1(&client),
            f0(&s.client_read_p50_us),
            f0(&s.client_read_p99_us),
            f1(&s.device_read_iops),
            s.top_wait.as_deref().unwrap_or("-"),
            if s.status == crate::driver::RunStatus::Ok {
                String::new()
            } else {
                format!("  [{}]", s.status.as_str())
            }
        );
    }
    let _ = writeln!(
        o,
        "DB figures are the database's own counters over each window; client figures are dbio's HDR measurements; \
         cv = coefficient of variation across repeats."
    );
    for w in &r.warnings {
        let _ = writeln!(o, "WARNING: {w}");
    }
    for (w, steps) in step_warnings(r) {
        let _ = writeln!(o, "WARNING ({}): {w}", steps.join(", "));
    }
    o
}

/// Each distinct step warning with the steps it applies to, in first-seen order: the figures
/// above carry the same caveats as the steps' own reports.
pub fn step_warnings(r: &RampResult) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for s in &r.steps {
        for w in &s.warnings {
            match out.iter_mut().find(|(text, _)| text == w) {
                Some((_, steps)) => steps.push(s.step.clone()),
                None => out.push((w.clone(), vec![s.step.clone()])),
            }
        }
    }
    out
}

fn series(
    name: &str,
    steps: &[StepSummary],
    x: impl Fn(&StepSummary) -> Option<f64>,
    y: impl Fn(&StepSummary) -> Option<f64>,
) -> Option<Series> {
    let points: Vec<(f64, f64)> = steps.iter().filter_map(|s| Some((x(s)?, y(s)?))).collect();
    (!points.is_empty()).then(|| Series {
        name: name.to_string(),
        points,
    })
}

/// (file name, chart) for each chart of a ramp.
pub fn ramp_charts(r: &RampResult, label: &str) -> Vec<(&'static str, Chart)> {
    let readers = |s: &StepSummary| Some(s.key.readers as f64);
    let mean = |s: &Option<Stat>| s.as_ref().map(|v| v.mean);
    let steps = &r.steps;
    let iops = Chart {
        title: format!("{label}: IOPS vs readers"),
        x_label: "reader sessions".into(),
        y_label: "operations or I/O requests per second".into(),
        series: [
            series("DB read IOPS", steps, readers, |s| mean(&s.db_read_iops)),
            series("device read IOPS", steps, readers, |s| {
                mean(&s.device_read_iops)
            }),
            series("client ops/s", steps, readers, |s| {
                Some(s.client_ops_per_s.mean)
            }),
        ]
        .into_iter()
        .flatten()
        .collect(),
        log2_x: true,
    };
    let latency = Chart {
        title: format!("{label}: latency vs readers"),
        x_label: "reader sessions".into(),
        y_label: "latency (µs)".into(),
        series: [
            series("DB avg read latency", steps, readers, |s| {
                mean(&s.db_avg_read_latency_us)
            }),
            series("client read p50", steps, readers, |s| {
                mean(&s.client_read_p50_us)
            }),
            series("client read p99", steps, readers, |s| {
                mean(&s.client_read_p99_us)
            }),
        ]
        .into_iter()
        .flatten()
        .collect(),
        log2_x: true,
    };
    let curve = Chart {
        title: format!("{label}: latency vs IOPS"),
        x_label: "DB read IOPS".into(),
        y_label: "DB avg read latency (µs)".into(),
        series: series(
            "DB read",
            steps,
            |s| mean(&s.db_read_iops),
            |s| mean(&s.db_avg_read_latency_us),
        )
        .into_iter()
        .collect(),
        log2_x: false,
    };
    vec![
        ("iops.svg", iops),
        ("latency.svg", latency),
        ("latency-vs-iops.svg", curve),
    ]
}

/// A complete HTML page: inline CSS, inline SVGs, no network.
pub fn html_page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>\n\
         body{{font-family:sans-serif;margin:24px;color:#222}} h1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}}\n\
         table{{border-collapse:collapse;font-size:13px}} th,td{{border:1px solid #ccc;padding:3px 7px;text-align:right}}\n\
         th{{background:#f2f2f2}} td.l,th.l{{text-align:left}} .warn{{color:#a40000}} .muted{{color:#666;font-size:12px}}\n\
         .charts svg{{margin:8px 8px 8px 0;border:1px solid #eee}}\n</style></head><body>\n{}\n</body></html>\n",
        escape(title),
        body
    )
}

/// An HTML table from a header and rows; the first `left` columns are left-aligned.
pub fn html_table(header: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut o = String::from("<table><tr>");
    for (i, h) in header.iter().enumerate() {
        let _ = write!(
            o,
            "<th{}>{}</th>",
            if i < left { " class=\"l\"" } else { "" },
            escape(h)
        );
    }
    o.push_str("</tr>\n");
    for row in rows {
        o.push_str("<tr>");
        for (i, v) in row.iter().enumerate() {
            let _ = write!(
                o,
                "<td{}>{}</td>",
                if i < left { " class=\"l\"" } else { "" },
                escape(v)
            );
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
    o
}

pub fn ramp_html(r: &RampResult, svgs: &[(&str, String)]) -> String {
    let label = r.label.as_deref().unwrap_or("ramp");
    let mut b = String::new();
    let _ = writeln!(b, "<h1>dbio ramp: {}</h1>", escape(label));
    let _ = writeln!(
        b,
        "<p>status {}; {} .. {} UTC; {} step(s)</p>",
        r.status.as_str(),
        r.started.format("%Y-%m-%d %H:%M:%S"),
        r.finished.format("%H:%M:%S"),
        r.steps.len()
    );
    if let Some(env) = &r.environment {
        let settings: Vec<String> = env
            .settings
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        let _ = writeln!(
            b,
            "<p class=\"muted\">target {}; server {}; {} schema(s) x {} blocks; {}</p>",
            escape(&env.target),
            escape(&env.server_version),
            env.data_set.schemas,
            env.data_set.scale_blocks,
            escape(&settings.join(" "))
        );
    }
    b.push_str("<div class=\"charts\">\n");
    for (_, svg) in svgs {
        b.push_str(svg);
    }
    b.push_str("</div>\n<h2>Steps</h2>\n");
    let (header, rows) = ramp_rows(r);
    b.push_str(&html_table(&header, &rows, 1));
    b.push_str(
        "<p class=\"muted\">DB figures: the database's own counters over each window (read requests that missed \
         shared_buffers; compare with device reads). Client figures: dbio's HDR latency measurements. \
         sd and cv across repeats.</p>\n<h2>Step results</h2>\n<ul>\n",
    );
    for s in &r.steps {
        for p in &s.results {
            let report = p.replace("result.json", "report.txt");
            let _ = writeln!(
                b,
                "<li>{}: <a href=\"{}\">result.json</a>, <a href=\"{}\">report.txt</a></li>",
                escape(&s.step),
                escape(p),
                escape(&report)
            );
        }
    }
    b.push_str("</ul>\n");
    let warnings: Vec<String> = r
        .warnings
        .iter()
        .cloned()
        .chain(
            r.steps
                .iter()
                .flat_map(|s| s.warnings.iter().map(move |w| format!("{}: {w}", s.step))),
        )
        .collect();
    if !warnings.is_empty() {
        b.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in warnings {
            let _ = writeln!(b, "<li class=\"warn\">{}</li>", escape(&w));
        }
        b.push_str("</ul>\n");
    }
    html_page(&format!("dbio ramp {label}"), &b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::driver::RunStatus;
    use crate::summary::StepKey;

    fn step(readers: u32, warnings: &[&str]) -> StepSummary {
        StepSummary {
            key: StepKey {
                readers,
                writers: 0,
                update_pct: 0,
            },
            step: format!("r{readers}-w0"),
            repeats: 1,
            status: RunStatus::Ok,
            elapsed_s: 5.0,
            client_ops_per_s: Stat::of(vec![100.0 * readers as f64])
                .unwrap_or_else(|| unreachable!()),
            client_read_p50_us: None,
            client_read_p99_us: None,
            db_read_iops: Stat::of(vec![1000.0 * readers as f64]),
            db_write_iops: None,
            db_avg_read_latency_us: None,
            device_read_iops: None,
            physical_read_ratio: None,
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            interval_ops_per_s: vec![],
            read_histogram: String::new(),
            results: vec![],
            warnings: warnings.iter().map(|w| w.to_string()).collect(),
        }
    }

    #[test]
    fn the_table_carries_every_steps_warnings_once() {
        let r = RampResult {
            format: 1,
            kind: "ramp".into(),
            label: Some("t".into()),
            status: RunStatus::Ok,
            started: chrono::Utc::now(),
            finished: chrono::Utc::now(),
            config: Config::default(),
            environment: None,
            steps: vec![
                step(1, &["page cache"]),
                step(2, &["page cache", "checkpoint"]),
            ],
            warnings: vec![],
        };
        let txt = ramp_txt(&r);
        assert!(txt.contains("WARNING (r1-w0, r2-w0): page cache"), "{txt}");
        assert!(txt.contains("WARNING (r2-w0): checkpoint"), "{txt}");
        let csv = ramp_csv(&r);
        assert_eq!(csv.lines().count(), 3);
        assert!(
            csv.lines()
                .nth(2)
                .unwrap_or("")
                .starts_with("r2-w0,2,0,0,1,ok,5.000,2000.0"),
            "{csv}"
        );
    }
}
