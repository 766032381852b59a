//! Line charts as self-contained SVG: a figure of one or more stacked panels, each with its
//! own y axis (one unit and one magnitude per axis: a panel whose series span more than a
//! decade gets a log axis), round ticks that never overlap, one polyline per series drawn in
//! the order of its points (a ramp's order), a label on every point, error bars (±1 sd
//! across repeats) and a legend. Each circle carries a `<title>` with its values. A point
//! whose step the OS page cache served (device reads, or the backends' own storage reads, under
//! half of what was read) is drawn hollow, labelled `cache`, and the panel says what that
//! means, so memory speed is never read as storage I/O. [`Marks`] add what history's trends
//! and capacity.svg need: dates on the x axis, change-point markers, bands, and horizontal
//! lines such as a latency target. No fonts or scripts are fetched, so the files work offline
//! and inline in report.html.

use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Text beside each point (e.g. its session count); empty for none.
    pub labels: Vec<String>,
    /// ±1 sd of each point's y across repeats; empty or 0 for none.
    pub errors: Vec<f64>,
    /// Per point: its step's reads came from the OS page cache, not the device (see
    /// [`cache_served`]); empty for none.
    pub cache_served: Vec<bool>,
}

/// Below this physical-read ratio (device reads / database reads) a step's "reads" were
/// mostly page-cache hits: the same threshold as the run's warning that fewer than half of
/// the database's reads reached the device.
pub const CACHE_SERVED_BELOW: f64 = 0.5;

/// Was a step served from the page cache? When either ratio is known and under
/// [`CACHE_SERVED_BELOW`]: the device's (device reads / database reads) or the backends' own
/// (bytes they fetched from storage / bytes they read), which still tells where the device
/// figure is missing (tmpfs, no rights) or shared by several targets; unknown ratios are not
/// a verdict.
pub fn cache_served(device_ratio: Option<f64>, backends_ratio: Option<f64>) -> bool {
    [device_ratio, backends_ratio]
        .iter()
        .any(|r| r.is_some_and(|r| r < CACHE_SERVED_BELOW))
}

impl Series {
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            ..Series::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    /// The y axis title; its unit (after the last `(`) is the unit of every series.
    pub y_label: String,
    pub series: Vec<Series>,
    /// Log2 x axis (reader counts 1, 2, 4, ... spread evenly).
    pub log2_x: bool,
}

/// Panels stacked one above the other under one title.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figure {
    pub title: String,
    /// A line under the title: what was measured where (target, tablespace, device).
    pub subtitle: String,
    pub panels: Vec<Chart>,
}

const W: f64 = 760.0;
const PANEL_H: f64 = 330.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 190.0;
const PANEL_TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
/// Series whose values span more than this factor share a panel only on a log axis.
const LOG_SPAN: f64 = 10.0;

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Round tick values covering [lo, hi]: steps of 1, 2 or 5 times a power of ten.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut ticks = vec![start];
    // Until a tick reaches the top of the range (with a little slack for rounding).
    while ticks.last().is_some_and(|t| *t < hi - step * 1e-9) && ticks.len() < 50 {
        ticks.push(start + step * ticks.len() as f64);
    }
    ticks
}

/// Ticks of a log10 axis over [lo, hi] (both > 0): the decades, with 2 and 5 between them
/// when the range spans fewer than three decades.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let d1 = d1.max(d0 + 1);
    let mults: &[f64] = if d1 - d0 <= 2 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    // From the decade at or below `lo` to the one at or above `hi`, so every value is inside.
    let mut t = Vec::new();
    for d in d0..d1 {
        for m in mults {
            t.push(m * 10f64.powi(d));
        }
    }
    t.push(10f64.powi(d1));
    t
}

pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let t = format!("{v:.2}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// What a trend chart adds to a line chart: a `<title>` per point, and vertical markers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// `titles[i][j]`: the `<title>` of point j (in the order given) of series i; points
    /// without one are titled with their series and values.
    pub titles: Vec<Vec<String>>,
    /// Dashed vertical lines at these x values (change points), each with its `<title>`.
    pub markers: Vec<(f64, String)>,
    /// The x values are days since 1970-01-01 (UTC): ticks are labelled as dates.
    pub x_dates: bool,
    /// Shaded bands behind the points: (x from, x to, y low, y high, `<title>`), e.g. a
    /// segment's mean ± its run-to-run sd.
    pub bands: Vec<(f64, f64, f64, f64, String)>,
    /// Dashed horizontal lines across the panel at these y values, each labelled (a latency
    /// target); the y axis reaches them.
    pub hlines: Vec<(f64, String)>,
}

/// `2026-12-01` for a day count since 1970-01-01.
fn date_label(days: f64) -> String {
    chrono::DateTime::from_timestamp((days * 86_400.0).round() as i64, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| fmt_num(days))
}

/// The unit in an axis title: `latency (µs)` -> `µs`; the whole title when it has none.
pub fn unit_of(axis_title: &str) -> &str {
    match (axis_title.rfind('('), axis_title.rfind(')')) {
        (Some(a), Some(b)) if b > a => &axis_title[a + 1..b],
        _ => axis_title,
    }
}

/// True when the panel's series are of different magnitudes (their largest values more than
/// [`LOG_SPAN`] apart) and all its values are positive: a log axis shows both. One series, or
/// a zero among the values, stays linear (a log axis has no 0).
fn wants_log(c: &Chart) -> bool {
    if c.series.len() < 2 || c.series.iter().flat_map(|s| &s.points).any(|p| p.1 <= 0.0) {
        return false;
    }
    let maxima: Vec<f64> = c
        .series
        .iter()
        .filter_map(|s| s.points.iter().map(|p| p.1).reduce(f64::max))
        .collect();
    let (lo, hi) = maxima
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(*y), b.max(*y)));
    lo.is_finite() && lo > 0.0 && hi / lo > LOG_SPAN
}

/// Keeps ticks whose labels do not overlap the previous kept one (`px` maps a value to x).
fn spaced(ticks: Vec<f64>, px: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut kept: Vec<f64> = Vec::new();
    for t in ticks {
        let width = 7.0 * fmt_num(t).chars().count() as f64 + 10.0;
        if kept.last().is_none_or(|k| px(t) - px(*k) >= width) {
            kept.push(t);
        }
    }
    kept
}

/// One chart alone (its title is the figure's).
pub fn render_svg(c: &Chart) -> String {
    render_svg_marked(c, &Marks::default())
}

/// One chart alone with a trend chart's point titles and markers.
pub fn render_svg_marked(c: &Chart, marks: &Marks) -> String {
    let figure = Figure {
        title: c.title.clone(),
        subtitle: String::new(),
        panels: vec![Chart {
            title: String::new(),
            ..c.clone()
        }],
    };
    render_figure_marked(&figure, std::slice::from_ref(marks))
}

pub fn render_figure(f: &Figure) -> String {
    render_figure_marked(f, &[])
}

/// `marks[i]` applies to panel i; panels without one have none.
pub fn render_figure_marked(f: &Figure, marks: &[Marks]) -> String {
    let none = Marks::default();
    // The subtitle, one line per part, so a long target never runs off the figure.
    let sub_lines: Vec<&str> = f.subtitle.split("; ").filter(|l| !l.is_empty()).collect();
    let head = 34.0 + 16.0 * sub_lines.len() as f64;
    let h = head + PANEL_H * f.panels.len().max(1) as f64;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<title>{}</title>"#, escape(&f.title));
    let _ = writeln!(
        o,
        r#"<rect x="0" y="0" width="{W}" height="{h}" fill="white"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text class="title" x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        escape(&f.title)
    );
    for (i, line) in sub_lines.iter().enumerate() {
        let _ = writeln!(
            o,
            r##"<text class="subtitle" x="{LEFT}" y="{:.1}" font-size="12" fill="#555">{}</text>"##,
            40.0 + 16.0 * i as f64,
            escape(line)
        );
    }
    for (i, panel) in f.panels.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<g class="panel" data-y-unit="{}" data-y-scale="{}" transform="translate(0 {:.1})">"#,
            escape(unit_of(&panel.y_label)),
            if wants_log(panel) { "log" } else { "linear" },
            head + PANEL_H * i as f64
        );
        render_panel(&mut o, panel, marks.get(i).unwrap_or(&none));
        o.push_str("</g>\n");
    }
    o.push_str("</svg>\n");
    o
}

fn render_panel(o: &mut String, c: &Chart, marks: &Marks) {
    let points: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    let log_y = wants_log(c);
    let tx = |x: f64| {
        if c.log2_x {
            x.max(f64::MIN_POSITIVE).log2()
        } else {
            x
        }
    };
    let (mut x0, mut x1) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(tx(p.0)), b.max(tx(p.0)))
        });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    // Keep the first and last points (and their labels) off the axes.
    let pad = 0.06 * (x1 - x0);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let err = |s: &Series, i: usize| s.errors.get(i).copied().unwrap_or(0.0).max(0.0);
    let y_hi = c
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .enumerate()
                .map(move |(i, p)| p.1 + err(s, i))
        })
        .fold(0.0f64, f64::max)
        .max(marks.hlines.iter().map(|h| h.0).fold(0.0f64, f64::max));
    let y_lo = points
        .iter()
        .map(|p| p.1)
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_ticks = if log_y {
        log_ticks(y_lo, y_hi)
    } else {
        nice_ticks(0.0, if y_hi > 0.0 { y_hi } else { 1.0 }, 6)
    };
    let (t_lo, t_hi) = (
        y_ticks.first().copied().unwrap_or(0.0),
        y_ticks.last().copied().unwrap_or(1.0),
    );
    let plot_w = W - LEFT - RIGHT;
    let top = if c.title.is_empty() { 10.0 } else { PANEL_TOP };
    let plot_h = PANEL_H - top - BOTTOM;
    let px = |x: f64| LEFT + (tx(x) - x0) / (x1 - x0) * plot_w;
    let py = |y: f64| {
        let frac = if log_y {
            let (a, b) = (t_lo.log10(), t_hi.log10());
            (y.max(t_lo).log10() - a) / (b - a).max(f64::MIN_POSITIVE)
        } else {
            (y - t_lo) / (t_hi - t_lo).max(f64::MIN_POSITIVE)
        };
        top + plot_h - frac * plot_h
    };
    if !c.title.is_empty() {
        let _ = writeln!(
            o,
            r#"<text class="panel-title" x="{LEFT}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
            top - 10.0,
            escape(&c.title)
        );
    }
    for t in &y_ticks {
        let y = py(*t);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            fmt_num(*t)
        );
    }
    // X ticks at the data's x values on a log2 axis (ramps have few distinct ones), round
    // ones on a linear axis; either way no label overlaps its neighbour.
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_ticks = if c.log2_x && xs.len() <= 12 {
        xs
    } else {
        let lo = if c.log2_x { x0.exp2() } else { x0 };
        let hi = if c.log2_x { x1.exp2() } else { x1 };
        nice_ticks(lo.max(0.0), hi, 6)
            .into_iter()
            .filter(|t| tx(*t) >= x0 && tx(*t) <= x1)
            .collect()
    };
    // Dates need room: at most 5 of them.
    let x_ticks = if marks.x_dates {
        let step = x_ticks.len().div_ceil(5).max(1);
        x_ticks.into_iter().step_by(step).collect()
    } else {
        x_ticks
    };
    for (x0b, x1b, ylo, yhi, title) in &marks.bands {
        let (a, b) = (px(*x0b), px(*x1b));
        let (ya, yb) = (py(*yhi), py(ylo.max(t_lo)));
        let _ = writeln!(
            o,
            r##"<rect class="noise-band" x="{a:.1}" y="{ya:.1}" width="{:.1}" height="{:.1}" fill="#1f77b4" fill-opacity="0.12"><title>{}</title></rect>"##,
            (b - a).max(1.0),
            (yb - ya).max(0.0),
            escape(title)
        );
    }
    for t in spaced(x_ticks, px) {
        let x = px(t);
        let label = if marks.x_dates {
            date_label(t)
        } else {
            fmt_num(t)
        };
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text class="tick" x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + plot_h,
            top + plot_h + 5.0,
            top + plot_h + 19.0,
            label
        );
    }
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        top + plot_h,
        top + plot_h,
        LEFT + plot_w,
        top + plot_h
    );
    let _ = writeln!(
        o,
        r#"<text class="axis-title" data-axis="x" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        PANEL_H - 14.0,
        escape(&c.x_label)
    );
    let y_title = if log_y {
        format!("{} [log scale]", c.y_label)
    } else {
        c.y_label.clone()
    };
    let _ = writeln!(
        o,
        r#"<text class="axis-title" data-axis="y" x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        escape(&y_title)
    );
    for (y, label) in &marks.hlines {
        let yy = py(*y);
        let _ = writeln!(
            o,
            r##"<line class="target" x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#2ca02c" stroke-width="2" stroke-dasharray="8 4"><title>{}</title></line><text class="target-label" x="{:.1}" y="{:.1}" font-size="11" fill="#2ca02c">{}</text>"##,
            LEFT + plot_w,
            escape(label),
            LEFT + 6.0,
            yy - 5.0,
            escape(label)
        );
    }
    for (x, title) in &marks.markers {
        let _ = writeln!(
            o,
            r##"<line class="change-point" x1="{:.1}" y1="{top}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="2" stroke-dasharray="6 4"><title>{}</title></line>"##,
            px(*x),
            px(*x),
            top + plot_h,
            escape(title)
        );
    }
    let unit = unit_of(&c.y_label);
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let titles = marks.titles.get(i);
        let path: Vec<String> = s
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        let _ = writeln!(
            o,
            r#"<g class="series" data-series="{}" data-unit="{}"><polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            escape(&s.name),
            escape(unit),
            path.join(" ")
        );
        for (k, p) in s.points.iter().enumerate() {
            let (x, y) = (px(p.0), py(p.1));
            let e = err(s, k);
            let cached = s.cache_served.get(k).copied().unwrap_or(false);
            if e > 0.0 {
                let (y_a, y_b) = (
                    py(p.1 + e),
                    py((p.1 - e).max(if log_y { t_lo } else { 0.0 })),
                );
                let _ = writeln!(
                    o,
                    r#"<path class="error-bar" d="M{x:.1},{y_a:.1}V{y_b:.1}M{:.1},{y_a:.1}h8M{:.1},{y_b:.1}h8" stroke="{color}" fill="none"/>"#,
                    x - 4.0,
                    x - 4.0
                );
            }
            let mut title = match titles.and_then(|t| t.get(k)) {
                Some(t) => escape(t),
                None => format!(
                    "{}: x={} y={}{}",
                    escape(&s.name),
                    fmt_num(p.0),
                    fmt_num(p.1),
                    if e > 0.0 {
                        format!(" ± {} (sd)", fmt_num(e))
                    } else {
                        String::new()
                    }
                ),
            };
            if cached {
                title.push_str(" (served from the OS page cache: not device I/O)");
            }
            let (class, fill) = if cached {
                ("point cache-served", "white")
            } else {
                ("point", color)
            };
            let _ = writeln!(
                o,
                r#"<circle class="{class}" cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{fill}" stroke="{color}" stroke-width="1.5"><title>{title}</title></circle>"#,
            );
            let label = s.labels.get(k).filter(|l| !l.is_empty());
            let label = match (label, cached) {
                (Some(l), true) => Some(format!("{l} cache")),
                (Some(l), false) => Some(l.clone()),
                (None, true) => Some("cache".to_string()),
                (None, false) => None,
            };
            if let Some(label) = label {
                let _ = writeln!(
                    o,
                    r#"<text class="point-label" x="{:.1}" y="{:.1}" font-size="10" fill="{color}">{}</text>"#,
                    x + 7.0,
                    y - 5.0,
                    escape(&label)
                );
            }
        }
        let _ = writeln!(o, "</g>");
        let ly = top + 10.0 + i as f64 * 20.0;
        let lx = LEFT + plot_w + 16.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text class="legend" x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    if c.series.iter().any(|s| s.cache_served.iter().any(|c| *c)) {
        // In the legend column, under the series: what a hollow point means.
        let lx = LEFT + plot_w + 16.0;
        let y0 = top + 10.0 + c.series.len() as f64 * 20.0 + 8.0;
        let _ = writeln!(
            o,
            r##"<g class="cache-note"><circle cx="{:.1}" cy="{y0:.1}" r="3.5" fill="white" stroke="#333" stroke-width="1.5"/><text x="{:.1}" y="{:.1}" fill="#a40000">= page cache, not I/O:</text>"##,
            lx + 9.0,
            lx + 24.0,
            y0 + 4.0
        );
        for (i, line) in [
            "under half of these",
            "reads reached the device",
            "(memory speed, not",
            "storage). Make reads",
            "physical: --direct-io,",
            "--drop-caches, or a data",
            "set larger than RAM.",
        ]
        .iter()
        .enumerate()
        {
            let _ = writeln!(
                o,
                r##"<text x="{lx:.1}" y="{:.1}" font-size="11" fill="#a40000">{line}</text>"##,
                y0 + 20.0 + 14.0 * i as f64
            );
        }
        o.push_str("</g>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_served_points_are_hollow_labelled_and_explained() {
        let mut s = Series::new("DB read IOPS", vec![(1.0, 200_000.0), (2.0, 5_000.0)]);
        s.labels = vec!["1".into(), "2".into()];
        s.cache_served = vec![
            cache_served(Some(0.01), None),
            cache_served(Some(0.95), None),
        ];
        let svg = render_svg(&Chart {
            title: "t".into(),
            x_label: "readers".into(),
            y_label: "IOPS".into(),
            series: vec![s],
            log2_x: true,
        });
        assert_eq!(svg.matches(r#"class="point cache-served""#).count(), 1);
        assert_eq!(svg.matches(r#"class="point""#).count(), 1);
        assert!(svg.contains(">1 cache</text>"), "{svg}");
        assert!(svg.contains(">2</text>"), "{svg}");
        assert!(svg.contains("not device I/O"), "{svg}");
        assert!(svg.contains(r#"class="cache-note""#), "{svg}");
        // Unknown is no verdict; nothing cached, no note.
        assert!(!cache_served(None, None));
        // No device figure: the backends' own reads still tell.
        assert!(cache_served(None, Some(0.02)));
        assert!(!cache_served(None, Some(0.98)));
        let plain = render_svg(&Chart {
            series: vec![Series::new("x", vec![(1.0, 1.0)])],
            ..Chart::default()
        });
        assert!(!plain.contains("cache-note"));
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(
            nice_ticks(0.0, 10.0, 5),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        let t = nice_ticks(0.0, 12_345.0, 6);
        assert!(t.last().copied().unwrap() >= 12_345.0);
        let step = t[1] - t[0];
        assert!(
            t.windows(2).all(|w| (w[1] - w[0] - step).abs() < 1e-9),
            "{t:?}"
        );
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (m - mantissa).abs() < 1e-9),
            "{t:?}"
        );
    }

    #[test]
    fn one_circle_per_point_and_escaped_text() {
        let c = Chart {
            title: "IOPS <vs> readers".into(),
            x_label: "readers".into(),
            y_label: "IOPS".into(),
            series: vec![
                Series::new(
                    "db read IOPS",
                    vec![(1.0, 100.0), (2.0, 190.0), (4.0, 350.0)],
                ),
                Series::new("client ops/s", vec![(1.0, 2.0), (2.0, 3.0), (4.0, 5.0)]),
            ],
            log2_x: true,
        };
        let svg = render_svg(&c);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains("IOPS &lt;vs&gt; readers"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // An empty chart still renders.
        let empty = Chart {
            series: vec![],
            ..c
        };
        assert!(render_svg(&empty).contains("</svg>"));
    }

    #[test]
    fn values_spanning_decades_get_a_log_axis_and_points_keep_their_order() {
        let mut s = Series::new(
            "DB avg read latency",
            vec![(4.0, 3.0), (1.0, 1.0), (2.0, 2.0)],
        );
        s.labels = vec!["4".into(), "1".into(), "2".into()];
        s.errors = vec![0.5, 0.0, 0.0];
        let c = Chart {
            title: "latency".into(),
            x_label: "reader sessions".into(),
            y_label: "latency (µs)".into(),
            series: vec![
                s,
                Series::new("client read p99", vec![(1.0, 2000.0), (2.0, 2200.0)]),
            ],
            log2_x: true,
        };
        let svg = render_svg(&c);
        assert!(svg.contains(r#"data-y-scale="log""#), "{svg}");
        assert!(svg.contains("[log scale]"));
        assert_eq!(svg.matches(r#"class="point-label""#).count(), 3);
        assert_eq!(svg.matches(r#"class="error-bar""#).count(), 1);
        // The polyline goes 4 -> 1 -> 2 readers, as given.
        let line = svg.split("<polyline").nth(1).unwrap();
        let xs: Vec<f64> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| p.split(',').next().unwrap().parse().unwrap())
            .collect();
        assert!(xs[0] > xs[2] && xs[2] > xs[1], "{xs:?}");
        assert_eq!(unit_of("latency (µs)"), "µs");
        assert!(log_ticks(1.0, 2500.0).contains(&1000.0));
    }

    #[test]
    fn x_tick_labels_never_overlap() {
        let px = |x: f64| x / 10.0;
        let kept = spaced(vec![100_000.0, 101_000.0, 150_000.0, 400_000.0], px);
        assert!(
            kept.windows(2).all(|w| px(w[1]) - px(w[0]) >= 30.0),
            "{kept:?}"
        );
    }
}
