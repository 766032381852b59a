//! Line charts as self-contained SVG: axes with round ticks, one polyline and one circle per
//! point for each series (each circle carries a <title> with its values), a legend. No fonts
//! or scripts are fetched, so the files work offline and inline in report.html.

use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Log2 x axis (reader counts 1, 2, 4, ... spread evenly).
    pub log2_x: bool,
}

const W: f64 = 760.0;
const H: f64 = 420.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

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

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// What a trend chart adds to a line chart: a <title> per point, and vertical markers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// `titles[i][j]`: the <title> of point j (in the order given) of series i; points
    /// without one are titled with their series and values.
    pub titles: Vec<Vec<String>>,
    /// Dashed vertical lines at these x values (change points), each with its <title>.
    pub markers: Vec<(f64, String)>,
}

pub fn render_svg(c: &Chart) -> String {
    render_svg_marked(c, &Marks::default())
}

pub fn render_svg_marked(c: &Chart, marks: &Marks) -> String {
    let points: Vec<(f64, f64)> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
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
    let y1 = points.iter().fold(0.0f64, |a, p| a.max(p.1));
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    // Keep the first and last points off the axes.
    let pad = 0.04 * (x1 - x0);
    let (x0, x1) = (x0 - pad, x1 + pad);
    let y_ticks = nice_ticks(0.0, if y1 > 0.0 { y1 } else { 1.0 }, 6);
    let y_top = y_ticks
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(f64::MIN_POSITIVE);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + (tx(x) - x0) / (x1 - x0) * plot_w;
    let py = |y: f64| TOP + plot_h - (y / y_top) * plot_h;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(o, r#"<title>{}</title>"#, escape(&c.title));
    let _ = writeln!(
        o,
        r#"<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>"#
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="22" font-size="15" font-weight="bold">{}</text>"#,
        LEFT,
        escape(&c.title)
    );
    // Grid and y ticks.
    for t in &y_ticks {
        let y = py(*t);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            fmt_num(*t)
        );
    }
    // X ticks at the data's x values (ramps have few distinct ones).
    let mut xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let x_ticks: Vec<f64> = if xs.len() <= 12 {
        xs
    } else {
        nice_ticks(x0, x1, 8)
    };
    for t in &x_ticks {
        let x = px(*t);
        let _ = writeln!(
            o,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 19.0,
            fmt_num(*t)
        );
    }
    let _ = writeln!(
        o,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="#333"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        TOP + plot_h,
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        H - 12.0,
        escape(&c.x_label)
    );
    let _ = writeln!(
        o,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(&c.y_label)
    );
    for (x, title) in &marks.markers {
        let _ = writeln!(
            o,
            r##"<line class="change-point" x1="{:.1}" y1="{TOP}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="2" stroke-dasharray="6 4"><title>{}</title></line>"##,
            px(*x),
            px(*x),
            TOP + plot_h,
            escape(title)
        );
    }
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let titles = marks.titles.get(i);
        let mut pts: Vec<((f64, f64), Option<&String>)> = s
            .points
            .iter()
            .enumerate()
            .map(|(j, p)| (*p, titles.and_then(|t| t.get(j))))
            .collect();
        pts.sort_by(|a, b| a.0.0.total_cmp(&b.0.0));
        let path: Vec<String> = pts
            .iter()
            .map(|(p, _)| format!("{:.1},{:.1}", px(p.0), py(p.1)))
            .collect();
        let _ = writeln!(
            o,
            r#"<g class="series" data-series="{}"><polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            escape(&s.name),
            path.join(" ")
        );
        for (p, title) in &pts {
            let title = match title {
                Some(t) => escape(t),
                None => format!("{}: x={} y={}", escape(&s.name), fmt_num(p.0), fmt_num(p.1)),
            };
            let _ = writeln!(
                o,
                r#"<circle class="point" cx="{:.1}" cy="{:.1}" r="3.5" fill="{color}"><title>{title}</title></circle>"#,
                px(p.0),
                py(p.1),
            );
        }
        let _ = writeln!(o, "</g>");
        let ly = TOP + 10.0 + i as f64 * 20.0;
        let lx = LEFT + plot_w + 16.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

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
                Series {
                    name: "db read IOPS".into(),
                    points: vec![(1.0, 100.0), (2.0, 190.0), (4.0, 350.0)],
                },
                Series {
                    name: "client ops/s".into(),
                    points: vec![(1.0, 2.0), (2.0, 3.0), (4.0, 5.0)],
                },
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
}
