//! A ramp's outputs: `ramp.csv` and `ramp.txt` (one line per step, the awr_info habit), SVG
//! charts (IOPS vs readers; latency vs readers; latency vs IOPS) and a self-contained
//! `report.html` with the charts inline.

use std::fmt::Write as _;

use crate::capacity::{CapacityResult, Probe};
use crate::config::Database;
use crate::report::chart::{Chart, Figure, Marks, Series, escape};
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

/// A spread needs two repeats: one value has none to show (not a spread of 0).
fn spread(s: &Option<Stat>) -> Option<&Stat> {
    s.as_ref().filter(|s| s.values.len() > 1)
}

fn sd(s: &Option<Stat>) -> String {
    spread(s)
        .map(|s| format!("{:.1}", s.sd))
        .unwrap_or_default()
}

fn cv(s: &Option<Stat>) -> String {
    spread(s)
        .map(|s| format!("{:.3}", s.cv))
        .unwrap_or_default()
}

/// `cv` for the aligned table: `-` where there is none (a single repeat).
fn cv_txt(s: &Option<Stat>) -> String {
    spread(s)
        .map(|s| format!("{:.3}", s.cv))
        .unwrap_or_else(|| "-".into())
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
        "device_read_await_ms",
        "device_queue_depth",
        "device_reads_in_flight",
        "db_reads_in_flight",
        "limited_by",
        "limiter",
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
                f3(&s.device_await_ms),
                f2(&s.device_queue_depth),
                f2(&s.device_reads_in_flight),
                f2(&s.db_reads_in_flight),
                s.limiter
                    .as_ref()
                    .map(|v| v.limiter.name(r.config.engine).to_string())
                    .unwrap_or_default(),
                s.limiter
                    .as_ref()
                    .map(|v| v.line.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect();
    (header, rows)
}

fn f2(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.2}", s.mean))
        .unwrap_or_default()
}

fn f3(s: &Option<Stat>) -> String {
    s.as_ref()
        .map(|s| format!("{:.3}", s.mean))
        .unwrap_or_default()
}

/// `-` where a figure is missing, for the aligned table.
fn or_dash(v: String) -> String {
    if v.is_empty() { "-".into() } else { v }
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
        "dbio {}{}  status {}  {} .. {} UTC",
        if r.capacity.is_some() {
            "capacity"
        } else {
            "ramp"
        },
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
    if let Some(c) = &r.capacity {
        for l in c.lines() {
            let _ = writeln!(o, "{l}");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "{:<12} {:>7} {:>7} {:>4} {:>9} {:>12} {:>7} {:>12} {:>13} {:>12} {:>10} {:>10} {:>12} {:>7} {:>9}  top wait",
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
        "aqu-sz",
        "in flight",
    );
    for s in &r.steps {
        let client = Some(s.client_ops_per_s.clone());
        let _ = writeln!(
            o,
            "{:<12} {:>7} {:>7} {:>4} {:>9.1} {:>12} {:>7} {:>12} {:>13} {:>12} {:>10} {:>10} {:>12} {:>7} {:>9}  {}{}",
            s.step,
            s.key.readers,
            s.key.writers,
            s.repeats,
            s.elapsed_s,
            f1(&s.db_read_iops),
            cv_txt(&s.db_read_iops),
            f1(&s.db_write_iops),
            f1(&s.db_avg_read_latency_us),
            f1(&client),
            f0(&s.client_read_p50_us),
            f0(&s.client_read_p99_us),
            f1(&s.device_read_iops),
            or_dash(f2(&s.device_queue_depth)),
            or_dash(f2(&s.device_reads_in_flight)),
            s.top_wait.as_deref().unwrap_or("-"),
            match (s.status, s.steady) {
                (crate::driver::RunStatus::Ok, Some(false)) => "  [not steady]".to_string(),
                (crate::driver::RunStatus::Ok, _) => String::new(),
                (st, _) => format!("  [{}]", st.as_str()),
            }
        );
        for t in &s.targets {
            let _ = writeln!(
                o,
                "  target {:<3} {:>7} {:>7} {:>4} {:>9} {:>12} {:>7} {:>12} {:>13} {:>12} {:>10} {:>10} {:>12}  {}",
                t.index + 1,
                t.readers,
                t.writers,
                "",
                "",
                f1(&t.db_read_iops),
                cv_txt(&t.db_read_iops),
                "",
                f1(&t.db_avg_read_latency_us),
                f1(&t.client_ops_per_s),
                "",
                "",
                f1(&t.device_read_iops),
                t.target
            );
        }
    }
    if r.steps.iter().any(|s| !s.targets.is_empty()) {
        let _ = writeln!(
            o,
            "Steps over several targets: the step's row is the totals (DB figures summed, latency of all sessions), \
             each `target N` row that target's own; device figures are per target only (targets may share a device)."
        );
    }
    let _ = writeln!(
        o,
        "DB figures are the database's own counters over each window; client figures are dbio's HDR measurements; \
         cv = coefficient of variation across repeats (`-` for a single repeat); aqu-sz = the device's average queue; \
         in flight = reads in flight at the device by Little's law (device reads/s x read wait), beside the readers."
    );
    if r.steps.iter().any(|s| s.limiter.is_some()) {
        let _ = writeln!(
            o,
            "Limited by (each step's verdict; its figures are in the step's result.json):"
        );
        for s in &r.steps {
            if let Some(v) = &s.limiter {
                let _ = writeln!(o, "  {:<12} {}", s.step, v.line);
            }
        }
    }
    if let Some(c) = &r.capacity {
        search_table(&mut o, c);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "WARNING: {w}");
    }
    for (w, steps) in step_warnings(r) {
        let _ = writeln!(o, "WARNING ({}): {w}", steps.join(", "));
    }
    o
}

/// A capacity search's windows in the order they ran, each judged against the target.
fn search_table(o: &mut String, c: &CapacityResult) {
    let _ = writeln!(
        o,
        "Search ({}; {}): every window in the order it ran",
        c.slo,
        c.metric.label()
    );
    let _ = writeln!(
        o,
        "{:>6}  {:<20} {:>7} {:>9} {:>14} {:>14}  judged",
        "window", "step", "readers", "rate/s", "figure", "latency µs"
    );
    for p in &c.probes {
        let _ = writeln!(
            o,
            "{:>6}  {:<20} {:>7} {:>9} {:>14} {:>14}  {}{}",
            p.window,
            p.step,
            p.readers,
            p.rate_per_s
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".into()),
            p.figure
                .map(|f| format!("{f:.1}"))
                .unwrap_or_else(|| "-".into()),
            p.latency_us
                .map(|l| format!("{l:.0}"))
                .unwrap_or_else(|| "-".into()),
            match p.met {
                Some(true) => "met",
                Some(false) => "missed",
                None => "not judged",
            },
            if p.repeat {
                " (repeat at the answer)"
            } else {
                ""
            }
        );
    }
}

/// Latency against the figure for every window of a capacity search, the target drawn
/// across: the curve a DBA reads the answer off.
pub fn capacity_chart(r: &RampResult, c: &CapacityResult, label: &str) -> (Figure, Marks) {
    let mut probes: Vec<&Probe> = c
        .probes
        .iter()
        .filter(|p| p.figure.is_some() && p.latency_us.is_some())
        .collect();
    probes.sort_by_key(|p| (p.rate_per_s, p.readers, p.window));
    let label_of = |p: &Probe| {
        let load = match p.rate_per_s {
            Some(rate) if c.search == crate::config::SearchOver::Rate => format!("{rate}/s"),
            _ => p.readers.to_string(),
        };
        if Some(&p.step) == c.answer_step.as_ref() && !p.repeat {
            format!("{load} answer")
        } else {
            load
        }
    };
    let series = Series {
        name: c.slo.split("<=").next().unwrap_or("latency").to_string(),
        points: probes
            .iter()
            .map(|p| (p.figure.unwrap_or(0.0), p.latency_us.unwrap_or(0.0)))
            .collect(),
        labels: probes.iter().map(|p| label_of(p)).collect(),
        ..Series::default()
    };
    let figure = Figure {
        title: format!("{label}: latency vs {}", c.metric.as_str()),
        subtitle: storage_line(r),
        panels: vec![Chart {
            title: format!(
                "every window of the search (labelled with its {}), joined in order of load; the target dashed",
                match c.search {
                    crate::config::SearchOver::Sessions => "reader sessions",
                    crate::config::SearchOver::Rate => "rate",
                }
            ),
            x_label: c.metric.label().to_string(),
            y_label: format!(
                "{} (µs)",
                c.slo_text.split(" at most").next().unwrap_or("latency")
            ),
            series: vec![series],
            log2_x: false,
        }],
    };
    let marks = Marks {
        hlines: vec![(c.slo_max_us(), format!("target {}", c.slo))],
        ..Marks::default()
    };
    (figure, marks)
}

/// Each distinct step warning with the steps it applies to, in first-seen order: the figures
/// above carry the same caveats as the steps' own reports.
pub fn step_warnings(r: &RampResult) -> Vec<(String, Vec<String>)> {
    crate::summary::group_warnings(r.steps.iter().flat_map(|s| {
        s.warnings
            .iter()
            .map(move |w| (s.step.as_str(), w.as_str()))
    }))
}

/// The steps in ramp order, one group per (writers, update_pct) so that each line only
/// joins steps that differ in readers.
fn groups(steps: &[StepSummary]) -> Vec<(String, Vec<&StepSummary>)> {
    let mut out: Vec<((u32, u32), Vec<&StepSummary>)> = Vec::new();
    for s in steps {
        let k = (s.key.writers, s.key.update_pct);
        match out.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(s),
            None => out.push((k, vec![s])),
        }
    }
    let many = out.len() > 1;
    out.into_iter()
        .map(|((w, u), v)| {
            let name = match (many, u) {
                (false, _) => String::new(),
                (true, 0) => format!(" ({w} writer(s))"),
                (true, u) => format!(" ({w} writer(s), update_pct {u})"),
            };
            (name, v)
        })
        .collect()
}

/// A series per step group: y and its sd from `stat`, x from `x`, each point labelled with
/// the step's session counts.
fn series(
    name: &str,
    steps: &[StepSummary],
    x: impl Fn(&StepSummary) -> Option<f64>,
    stat: impl Fn(&StepSummary) -> Option<Stat>,
    label: impl Fn(&StepSummary) -> String,
) -> Vec<Series> {
    groups(steps)
        .into_iter()
        .filter_map(|(suffix, group)| {
            let picked: Vec<(&StepSummary, f64, Stat)> = group
                .into_iter()
                .filter_map(|s| Some((s, x(s)?, stat(s)?)))
                .collect();
            (!picked.is_empty()).then(|| Series {
                name: format!("{name}{suffix}"),
                points: picked.iter().map(|(_, x, st)| (*x, st.mean)).collect(),
                labels: picked.iter().map(|(s, _, _)| label(s)).collect(),
                errors: picked.iter().map(|(_, _, st)| st.sd).collect(),
                cache_served: picked
                    .iter()
                    .map(|(s, _, _)| {
                        crate::report::chart::cache_served(
                            s.physical_read_ratio,
                            s.backends_physical_read_ratio,
                        )
                    })
                    .collect(),
            })
        })
        .collect()
}

/// What was measured where, for chart titles: target, tablespace, device.
pub fn storage_line(r: &RampResult) -> String {
    let mut parts = Vec::new();
    let oracle = r.config.engine == Database::Oracle;
    if let Some(env) = &r.environment {
        parts.push(format!(
            "target {} ({} {})",
            env.target,
            if oracle { "Oracle" } else { "PostgreSQL" },
            env.server_version
        ));
    }
    // Without data.tablespace: PostgreSQL's default, or the one Oracle's preflight resolved
    // and recorded (the admin's default tablespace).
    let recorded = r
        .environment
        .as_ref()
        .filter(|_| oracle)
        .and_then(|e| e.settings.get("tablespace").cloned().flatten());
    parts.push(format!(
        "tablespace {}",
        r.config
            .data
            .tablespace
            .clone()
            .or(recorded)
            .unwrap_or_else(|| if oracle { "default" } else { "pg_default" }.into())
    ));
    match r.steps.iter().find_map(|s| s.storage.as_deref()) {
        Some(dev) => parts.push(format!("device {dev}")),
        None => parts.push("device unknown (not local, or on tmpfs)".into()),
    }
    parts.join("; ")
}

/// Session counts of a step as a point label: `4` readers, or `4r+1w`.
fn sessions_label(s: &StepSummary) -> String {
    if s.key.writers == 0 {
        s.key.readers.to_string()
    } else {
        format!("{}r+{}w", s.key.readers, s.key.writers)
    }
}

/// (file name, figure) for each chart of a ramp. One unit and one magnitude per panel:
/// database reads per second, device reads per second (often decades apart, or zero when the
/// page cache serves the reads, so never on one axis), client operations per second, latency
/// in µs (log axis when p50 and p99 are decades apart).
pub fn ramp_charts(r: &RampResult, label: &str) -> Vec<(&'static str, Figure)> {
    let readers = |s: &StepSummary| Some(s.key.readers as f64);
    let steps = &r.steps;
    let subtitle = storage_line(r);
    let by_readers = |title: &str, y: &str, series: Vec<Series>| Chart {
        title: title.into(),
        x_label: "reader sessions".into(),
        y_label: y.into(),
        series,
        log2_x: true,
    };
    let iops = Figure {
        title: format!("{label}: IOPS vs readers"),
        subtitle: subtitle.clone(),
        panels: vec![
            by_readers(
                "database: read requests that missed shared_buffers (its own counters)",
                "DB read requests per second (IOPS)",
                series(
                    "DB read IOPS",
                    steps,
                    readers,
                    |s| s.db_read_iops.clone(),
                    sessions_label,
                ),
            ),
            by_readers(
                "device: reads that reached the device under the data (/proc/diskstats)",
                "device reads per second (IOPS)",
                series(
                    "device read IOPS",
                    steps,
                    readers,
                    |s| s.device_read_iops.clone(),
                    sessions_label,
                ),
            ),
            by_readers(
                "client operations (each reads work_unit keys)",
                "operations per second (ops/s)",
                series(
                    "client ops/s",
                    steps,
                    readers,
                    |s| Some(s.client_ops_per_s.clone()),
                    sessions_label,
                ),
            ),
        ],
    };
    let latency = Figure {
        title: format!("{label}: latency vs readers"),
        subtitle: subtitle.clone(),
        panels: vec![
            by_readers(
                "database: average time of one block read",
                "DB read latency (µs)",
                series(
                    "DB avg read latency",
                    steps,
                    readers,
                    |s| s.db_avg_read_latency_us.clone(),
                    sessions_label,
                ),
            ),
            by_readers(
                "client: one operation (work_unit block reads and the round trip)",
                "client operation latency (µs)",
                [
                    series(
                        "client read p50",
                        steps,
                        readers,
                        |s| s.client_read_p50_us.clone(),
                        sessions_label,
                    ),
                    series(
                        "client read p99",
                        steps,
                        readers,
                        |s| s.client_read_p99_us.clone(),
                        sessions_label,
                    ),
                ]
                .concat(),
            ),
        ],
    };
    let curve = Figure {
        title: format!("{label}: latency vs IOPS"),
        subtitle,
        panels: vec![Chart {
            title: "each point is a step, labelled with its sessions, joined in ramp order".into(),
            x_label: "DB read IOPS (requests/s)".into(),
            y_label: "DB avg read latency (µs)".into(),
            series: series(
                "DB read",
                steps,
                |s| s.db_read_iops.as_ref().map(|v| v.mean),
                |s| s.db_avg_read_latency_us.clone(),
                sessions_label,
            ),
            log2_x: false,
        }],
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

/// `mean ± sd` (sd only when there were repeats), `-` when the figure is missing.
fn mean_sd(s: &Option<Stat>, decimals: usize) -> String {
    match s {
        Some(s) if s.values.len() > 1 => format!("{:.*} ± {:.*}", decimals, s.mean, decimals, s.sd),
        Some(s) => format!("{:.*}", decimals, s.mean),
        None => "-".into(),
    }
}

/// The steps table of report.html: human headers with units, mean ± sd across repeats.
pub fn ramp_html_rows(r: &RampResult) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "step",
        "readers",
        "writers",
        "runs",
        "status",
        "window s",
        "DB reads/s",
        "DB writes/s",
        "DB read µs",
        "client ops/s",
        "client p50 µs",
        "client p99 µs",
        "device reads/s",
        "device/DB reads",
        "in flight",
        "top wait",
        "limited by",
    ];
    let rows = r
        .steps
        .iter()
        .map(|s| {
            vec![
                s.step.clone(),
                s.key.readers.to_string(),
                s.key.writers.to_string(),
                s.repeats.to_string(),
                s.status.as_str().to_string(),
                format!("{:.1}", s.elapsed_s),
                mean_sd(&s.db_read_iops, 0),
                mean_sd(&s.db_write_iops, 0),
                mean_sd(&s.db_avg_read_latency_us, 1),
                mean_sd(&Some(s.client_ops_per_s.clone()), 0),
                mean_sd(&s.client_read_p50_us, 0),
                mean_sd(&s.client_read_p99_us, 0),
                mean_sd(&s.device_read_iops, 0),
                s.physical_read_ratio
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_else(|| "-".into()),
                or_dash(f2(&s.device_reads_in_flight)),
                s.top_wait.clone().unwrap_or_else(|| "-".into()),
                s.limiter
                    .as_ref()
                    .map(|v| v.line.clone())
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    (header, rows)
}

pub fn ramp_html(r: &RampResult, svgs: &[(&str, String)]) -> String {
    let label = r.label.as_deref().unwrap_or("ramp");
    let mut b = String::new();
    let _ = writeln!(
        b,
        "<h1>dbio {}: {}</h1>",
        if r.capacity.is_some() {
            "capacity"
        } else {
            "ramp"
        },
        escape(label)
    );
    let _ = writeln!(
        b,
        "<p>status {}; {} .. {} UTC; {} step(s)</p>",
        r.status.as_str(),
        r.started.format("%Y-%m-%d %H:%M:%S"),
        r.finished.format("%H:%M:%S"),
        r.steps.len()
    );
    let _ = writeln!(b, "<p>{}</p>", escape(&storage_line(r)));
    if let Some(c) = &r.capacity {
        b.push_str("<h2>Capacity</h2>\n");
        for l in c.lines() {
            let _ = writeln!(b, "<p>{}</p>", escape(l.trim_start()));
        }
        let header = [
            "window",
            "step",
            "readers",
            "rate/s",
            "figure",
            "latency µs",
            "judged",
        ];
        let rows: Vec<Vec<String>> = c
            .probes
            .iter()
            .map(|p| {
                vec![
                    p.window.to_string(),
                    p.step.clone(),
                    p.readers.to_string(),
                    p.rate_per_s
                        .map(|r| r.to_string())
                        .unwrap_or_else(|| "-".into()),
                    p.figure
                        .map(|f| format!("{f:.1}"))
                        .unwrap_or_else(|| "-".into()),
                    p.latency_us
                        .map(|l| format!("{l:.0}"))
                        .unwrap_or_else(|| "-".into()),
                    format!(
                        "{}{}",
                        match p.met {
                            Some(true) => "met",
                            Some(false) => "missed",
                            None => "not judged",
                        },
                        if p.repeat { " (repeat)" } else { "" }
                    ),
                ]
            })
            .collect();
        b.push_str(&html_table(&header, &rows, 2));
    }
    if let Some(env) = &r.environment {
        let settings: Vec<String> = env
            .settings
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect();
        let _ = writeln!(
            b,
            "<p class=\"muted\">{} schema(s) x {} blocks; {}</p>",
            env.data_set.schemas,
            env.data_set.scale_blocks,
            escape(&settings.join(" "))
        );
    }
    let warnings = step_warnings(r);
    if !r.warnings.is_empty() || !warnings.is_empty() {
        b.push_str("<h2>Warnings</h2>\n<ul>\n");
        for w in &r.warnings {
            let _ = writeln!(b, "<li class=\"warn\">{}</li>", escape(w));
        }
        for (w, steps) in &warnings {
            let which = if steps.len() == r.steps.len() && r.steps.len() > 1 {
                "every step".to_string()
            } else {
                steps.join(", ")
            };
            let _ = writeln!(
                b,
                "<li class=\"warn\"><b>{}</b>: {}</li>",
                escape(&which),
                escape(w)
            );
        }
        b.push_str("</ul>\n");
    }
    b.push_str("<div class=\"charts\">\n");
    for (_, svg) in svgs {
        b.push_str(svg);
    }
    b.push_str("</div>\n<h2>Steps</h2>\n");
    let (header, rows) = ramp_html_rows(r);
    b.push_str(&html_table(&header, &rows, 1));
    b.push_str(
        "<p class=\"muted\">DB figures: the database's own counters over each window (read requests that missed \
         shared_buffers; compare with the device's reads). Client figures: dbio's HDR latency measurements of one \
         operation. a ± b: mean and standard deviation across the runs of a step. device/DB reads: near 1 when the \
         reads reached the device, near 0 when the OS page cache served them. Every column, unrounded: ramp.csv.</p>\n\
         <h2>Step results</h2>\n<ul>\n",
    );
    for s in &r.steps {
        let links: Vec<String> = s
            .results
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let report = p.replace("result.json", "report.txt");
                format!(
                    "{}<a href=\"{}\">result.json</a>, <a href=\"{}\">report.txt</a>",
                    if s.results.len() > 1 {
                        format!("run {}: ", i + 1)
                    } else {
                        String::new()
                    },
                    escape(p),
                    escape(&report)
                )
            })
            .collect();
        let _ = writeln!(b, "<li>{}: {}</li>", escape(&s.step), links.join("; "));
    }
    b.push_str("</ul>\n");
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
            key: StepKey::closed(readers, 0, 0),
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
            backends_physical_read_ratio: None,
            raw_device_iops: None,
            db_to_raw_iops_ratio: None,
            top_wait: None,
            storage: None,
            interval_ops_per_s: vec![],
            read_histogram: String::new(),
            results: vec![],
            warnings: warnings.iter().map(|w| w.to_string()).collect(),
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

    /// A finished ramp of these steps, with the default configuration.
    fn ramp_of(steps: Vec<StepSummary>) -> RampResult {
        RampResult {
            format: 1,
            kind: "ramp".into(),
            label: None,
            status: RunStatus::Ok,
            started: chrono::Utc::now(),
            finished: chrono::Utc::now(),
            config: Config::default(),
            environment: None,
            steps,
            warnings: vec![],
            capacity: None,
        }
    }

    #[test]
    fn the_table_carries_every_steps_warnings_once() {
        let r = RampResult {
            label: Some("t".into()),
            ..ramp_of(vec![
                step(1, &["page cache"]),
                step(2, &["page cache", "checkpoint"]),
            ])
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

    // Seen: an Oracle ramp's charts and report.html said "(PostgreSQL 19.3.0.0.0 ...)" and
    // "tablespace pg_default".
    #[test]
    fn the_storage_line_names_the_ramps_own_database() {
        let mut r = ramp_of(vec![step(1, &[])]);
        assert_eq!(
            storage_line(&r),
            "tablespace pg_default; device unknown (not local, or on tmpfs)"
        );
        r.config.engine = Database::Oracle;
        let mut settings = std::collections::BTreeMap::new();
        settings.insert("tablespace".to_string(), Some("USERS".to_string()));
        r.environment = Some(crate::result::Environment {
            dbio_version: "test".into(),
            client_host: "test".into(),
            target: "system@//db/pdb1".into(),
            pinned_server: None,
            server_version: "19.3.0.0.0".into(),
            server_version_num: 0,
            settings,
            data_set: crate::result::DataSetInfo {
                schemas: 1,
                scale_blocks: 1,
                block_size: 8192,
                table_bytes: 8192,
                schemas_used: vec![],
                tables: vec![],
            },
            session_tls: None,
            read_path: None,
        });
        assert_eq!(
            storage_line(&r),
            "target system@//db/pdb1 (Oracle 19.3.0.0.0); tablespace USERS; device unknown (not local, or on tmpfs)"
        );
        r.config.data.tablespace = Some("FAST".into());
        assert!(storage_line(&r).contains("tablespace FAST;"));
    }

    // Seen: single-repeat steps printed cv 0.000, a spread that was never measured.
    #[test]
    fn a_single_repeat_has_no_spread() {
        let mut two = step(2, &[]);
        two.repeats = 2;
        two.db_read_iops = Stat::of(vec![1900.0, 2100.0]);
        let r = ramp_of(vec![step(1, &[]), two]);
        let txt = ramp_txt(&r);
        assert!(!txt.contains("0.000"), "{txt}");
        let row = |name: &str| {
            txt.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or("")
                .split_whitespace()
                .nth(6)
                .unwrap_or("")
                .to_string()
        };
        assert_eq!(row("r1-w0"), "-", "{txt}");
        assert_eq!(row("r2-w0"), "0.071", "{txt}");
        let csv = ramp_csv(&r);
        assert!(
            csv.lines()
                .nth(1)
                .unwrap_or("")
                .starts_with("r1-w0,1,0,0,1,ok,5.000,1000.0,,,"),
            "{csv}"
        );
    }
}
