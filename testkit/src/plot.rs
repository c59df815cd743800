//! A small SVG line chart for the benchmark report (`make bench` writes
//! `docs/bench-scaling.svg`): side-by-side panels sharing a logarithmic x
//! axis (the number of handoffs), one line per series; a dashed series
//! (e.g. the previous run's) is drawn thinner with hollow points. Hand-written
//! to avoid a plotting dependency for one picture.

use std::fmt::Write;

/// One line: `(x, y)` points, x > 0.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// The points, in any order (drawn sorted by x).
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed with hollow points (the previous run's figures).
    pub dashed: bool,
}

/// One chart of the figure.
pub struct Panel {
    /// Shown above the chart.
    pub title: String,
    /// The y axis' unit, e.g. "ms".
    pub y_label: String,
    /// Its lines.
    pub series: Vec<Series>,
}

const PANEL_W: f64 = 460.0;
const PANEL_H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 32.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 90.0;
/// Legend entries per row under a panel.
const LEGEND_COLUMNS: usize = 2;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// The smallest of 1, 2, 5 × 10ⁿ at or above `v` (1 for v ≤ 0).
pub fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * magnitude)
}

/// Text safe inside SVG elements and attributes.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1000` → "1,000".
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The figure: `panels` side by side, x on a log scale labelled `x_label`.
pub fn svg(title: &str, x_label: &str, panels: &[Panel]) -> String {
    let width = PANEL_W * panels.len().max(1) as f64;
    let height = TOP + PANEL_H;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        width / 2.0,
        escape(title)
    );
    for (i, panel) in panels.iter().enumerate() {
        draw_panel(&mut out, panel, x_label, i as f64 * PANEL_W);
    }
    out.push_str("</svg>\n");
    out
}

/// Where a panel's data lands: its plot area and scales.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    lx_min: f64,
    lx_max: f64,
    y_top: f64,
}

impl Frame {
    /// The frame of `panel` at horizontal `offset`: x spans the panel's
    /// x values (log10), y runs from 0 to a nice ceiling of its largest y.
    fn of(panel: &Panel, offset: f64) -> Self {
        let xs = x_values(panel);
        let (lx_min, lx_max) = match (xs.first(), xs.last()) {
            (Some(lo), Some(hi)) if lo < hi => (lo.log10(), hi.log10()),
            (Some(x), _) => (x.log10() - 0.5, x.log10() + 0.5),
            _ => (0.0, 1.0),
        };
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        Self {
            x0: offset + LEFT,
            x1: offset + PANEL_W - RIGHT,
            y0: TOP + PANEL_H - BOTTOM,
            y1: TOP,
            lx_min,
            lx_max,
            y_top: nice_ceiling(y_max),
        }
    }

    fn px(&self, x: f64) -> f64 {
        self.x0 + (x.log10() - self.lx_min) / (self.lx_max - self.lx_min) * (self.x1 - self.x0)
    }

    fn py(&self, y: f64) -> f64 {
        self.y0 - y / self.y_top * (self.y0 - self.y1)
    }
}

/// The distinct positive x values of a panel, ascending.
fn x_values(panel: &Panel) -> Vec<f64> {
    let mut xs: Vec<f64> = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| *x > 0.0)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    xs
}

fn draw_panel(out: &mut String, panel: &Panel, x_label: &str, offset: f64) {
    let f = Frame::of(panel, offset);
    draw_axes(out, &f, panel, x_label, offset);
    let colors = series_colors(panel);
    for (i, series) in panel.series.iter().enumerate() {
        draw_series(out, &f, series, i, &colors);
    }
}

/// Title, y grid with labels, x ticks at the data's x values, axis labels.
fn draw_axes(out: &mut String, f: &Frame, panel: &Panel, x_label: &str, offset: f64) {
    let (x0, x1, y0, y1) = (f.x0, f.x1, f.y0, f.y1);
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>",
        (x0 + x1) / 2.0,
        TOP - 14.0,
        escape(&panel.title)
    );
    for step in 0..=5 {
        let v = f.y_top * f64::from(step) / 5.0;
        let y = f.py(v);
        let _ = writeln!(
            out,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            x0 - 6.0,
            y + 4.0,
            format_tick(v)
        );
    }
    for x in x_values(panel) {
        let _ = writeln!(
            out,
            "<line x1=\"{0:.1}\" y1=\"{y0}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#999\"/>\
             <text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{3}</text>",
            f.px(x),
            y0 + 5.0,
            y0 + 18.0,
            thousands(x)
        );
    }
    let (label_x, label_y) = (offset + 16.0, (y0 + y1) / 2.0);
    let _ = writeln!(
        out,
        "<line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x1}\" y2=\"{y0}\" stroke=\"black\"/>\
         <line x1=\"{x0}\" y1=\"{y0}\" x2=\"{x0}\" y2=\"{y1}\" stroke=\"black\"/>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} (log scale)</text>\
         <text x=\"{label_x}\" y=\"{label_y}\" text-anchor=\"middle\" \
         transform=\"rotate(-90 {label_x} {label_y})\">{}</text>",
        (x0 + x1) / 2.0,
        y0 + 36.0,
        escape(x_label),
        escape(&panel.y_label)
    );
}

/// The `index`-th line of a panel: polyline, points, legend entry (two per
/// row). A dashed series takes the color of the solid one before it.
fn draw_series(out: &mut String, f: &Frame, series: &Series, index: usize, colors: &[&str]) {
    let color = colors[index % colors.len()];
    let mut points: Vec<(f64, f64)> = series
        .points
        .iter()
        .copied()
        .filter(|p| p.0 > 0.0)
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let path: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", f.px(*x), f.py(*y)))
        .collect();
    let (width, dash, fill) = if series.dashed {
        (1.5, " stroke-dasharray=\"6 4\"", "white")
    } else {
        (2.0, "", color)
    };
    let _ = writeln!(
        out,
        "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"{width}\"{dash} points=\"{}\"/>",
        path.join(" ")
    );
    for (x, y) in &points {
        let _ = writeln!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{fill}\" stroke=\"{color}\"/>",
            f.px(*x),
            f.py(*y)
        );
    }
    let legend_y = f.y0 + 54.0 + (index / LEGEND_COLUMNS) as f64 * 16.0;
    let legend_x = f.x0 + (index % LEGEND_COLUMNS) as f64 * (f.x1 - f.x0) / LEGEND_COLUMNS as f64;
    let _ = writeln!(
        out,
        "<line x1=\"{legend_x:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{color}\" \
         stroke-width=\"3\"{dash}/><text x=\"{:.1}\" y=\"{legend_y:.1}\">{}</text>",
        legend_y - 4.0,
        legend_x + 14.0,
        legend_y - 4.0,
        legend_x + 18.0,
        escape(&series.name)
    );
}

/// The color of each of a panel's series: the next color for a solid one,
/// the preceding solid one's for a dashed one (its previous run).
fn series_colors(panel: &Panel) -> Vec<&'static str> {
    let mut next = 0;
    let mut colors: Vec<&'static str> = Vec::with_capacity(panel.series.len());
    for series in &panel.series {
        match (series.dashed, colors.last()) {
            (true, Some(last)) => colors.push(last),
            _ => {
                colors.push(COLORS[next % COLORS.len()]);
                next += 1;
            }
        }
    }
    colors
}

/// A y tick: integers plainly, small values with up to two decimals.
fn format_tick(v: f64) -> String {
    if v >= 10.0 || v == v.trunc() {
        thousands(v)
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::{Panel, Series, format_tick, nice_ceiling, svg, thousands};

    #[test]
    fn nice_ceilings() {
        let cases = [
            (0.0, 1.0),
            (-3.0, 1.0),
            (0.7, 1.0),
            (1.0, 1.0),
            (1.2, 2.0),
            (3.0, 5.0),
            (7.0, 10.0),
            (161.0, 200.0),
            (500.0, 500.0),
            (0.013, 0.02),
        ];
        for (v, expected) in cases {
            let got = nice_ceiling(v);
            assert!((got - expected).abs() < 1e-9, "{v} → {got}, not {expected}");
        }
    }

    #[test]
    fn labels() {
        assert_eq!(thousands(50_000.0), "50,000");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(format_tick(0.4), "0.4");
        assert_eq!(format_tick(0.25), "0.25");
        assert_eq!(format_tick(2.0), "2");
        assert_eq!(format_tick(1200.0), "1,200");
    }

    #[test]
    fn a_figure_has_one_line_and_a_point_per_value() {
        let panels = [
            Panel {
                title: "latency <ms>".into(),
                y_label: "ms".into(),
                series: vec![
                    Series {
                        name: "apiserver".into(),
                        points: vec![(10_000.0, 20.0), (1_000.0, 5.0), (50_000.0, 90.0)],
                        dashed: false,
                    },
                    Series {
                        name: "apiserver, previous run".into(),
                        points: vec![(1_000.0, 6.0), (10_000.0, 25.0)],
                        dashed: true,
                    },
                    Series {
                        name: "PostgreSQL & co".into(),
                        points: vec![(1_000.0, 2.0), (10_000.0, 2.1), (50_000.0, 2.2)],
                        dashed: false,
                    },
                ],
            },
            Panel {
                title: "memory".into(),
                y_label: "MiB".into(),
                series: vec![Series {
                    name: "controller".into(),
                    points: vec![(1_000.0, 40.0)],
                    dashed: false,
                }],
            },
        ];
        let figure = svg("scaling", "handoffs", &panels);
        assert!(figure.starts_with("<svg ") && figure.ends_with("</svg>\n"));
        assert_eq!(figure.matches("<polyline").count(), 4);
        assert_eq!(figure.matches("<circle").count(), 9);
        // The previous run's line: dashed, in its solid line's color, hollow points.
        assert_eq!(figure.matches("stroke-dasharray").count(), 2);
        assert_eq!(
            figure.matches("fill=\"white\" stroke=\"#1f77b4\"").count(),
            2
        );
        assert_eq!(figure.matches("fill=\"#d62728\"").count(), 3);
        assert!(figure.contains("latency &lt;ms&gt;") && figure.contains("PostgreSQL &amp; co"));
        assert!(figure.contains(">50,000<"));
        assert!(!figure.contains("NaN") && !figure.contains("inf"));
    }
}
