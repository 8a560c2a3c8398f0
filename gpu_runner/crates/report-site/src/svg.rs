//! Plots as inline SVG: lines and grouped bars, axes with round ticks and
//! a legend. Plotting crates measure their labels with a font rasterizer;
//! the site's plots need none (the browser lays out the text), so this is
//! the page of code they take. Values are written with 2 decimals: the
//! same report gives the same bytes.

use std::fmt::Write as _;

const W: f64 = 640.0;
const H: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;
const COLOURS: &[&str] = &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

fn esc(s: &str) -> String {
    maud::html! { (s) }.into_string()
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart; `x_ticks` labels the x axis at given values (else round
/// ticks over the data).
#[derive(Debug, Clone, Default)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    pub x_ticks: Option<Vec<(f64, String)>>,
}

/// Round tick values covering `lo..=hi`: 1, 2 or 5 times a power of ten
/// apart, about five of them.
pub fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).floor() * step;
    let mut out = Vec::new();
    let mut v = first;
    // Up to the first tick at or above `hi`: the axis covers the data.
    while out.len() < 12 {
        out.push(v);
        if v >= hi {
            break;
        }
        v += step;
    }
    out
}

fn label(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Frame {
    fn x(&self, v: f64) -> f64 {
        LEFT + (v - self.x0) / (self.x1 - self.x0).max(f64::MIN_POSITIVE) * (W - LEFT - RIGHT)
    }
    fn y(&self, v: f64) -> f64 {
        H - BOTTOM - (v - self.y0) / (self.y1 - self.y0).max(f64::MIN_POSITIVE) * (H - TOP - BOTTOM)
    }
}

fn open(s: &mut String, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {W} {H}" role="img" aria-label="{t}"><rect width="{W}" height="{H}" fill="white"/><text x="{LEFT}" y="20" class="plot-title">{t}</text><text x="{:.2}" y="{:.2}" text-anchor="middle" class="axis-label">{xl}</text><text transform="translate(14 {:.2}) rotate(-90)" text-anchor="middle" class="axis-label">{yl}</text>"#,
        LEFT + (W - LEFT - RIGHT) / 2.0,
        H - 8.0,
        TOP + (H - TOP - BOTTOM) / 2.0,
        t = esc(title),
        xl = esc(x_label),
        yl = esc(y_label),
    );
}

fn y_axis(s: &mut String, f: &Frame, ys: &[f64]) {
    for v in ys {
        let y = f.y(*v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{:.2}" y1="{y:.2}" y2="{y:.2}" stroke="#ddd"/><text x="{:.2}" y="{:.2}" text-anchor="end" class="tick">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            esc(&label(*v))
        );
    }
}

fn legend(s: &mut String, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let y = TOP + 8.0 + i as f64 * 18.0;
        let _ = write!(
            s,
            r#"<rect x="{:.2}" y="{:.2}" width="12" height="12" fill="{}"/><text x="{:.2}" y="{:.2}" class="legend">{}</text>"#,
            W - RIGHT + 12.0,
            y - 10.0,
            COLOURS[i % COLOURS.len()],
            W - RIGHT + 30.0,
            y,
            esc(n)
        );
    }
}

/// A line chart as an SVG element.
pub fn line_chart(c: &LineChart) -> String {
    let pts = c.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for (x, y) in pts {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y1 = y1.max(*y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    let ys = ticks(0.0, if y1 > 0.0 { y1 } else { 1.0 });
    let f = Frame { x0, x1: if x1 > x0 { x1 } else { x0 + 1.0 }, y0: 0.0, y1: *ys.last().unwrap_or(&1.0) };
    let mut s = String::new();
    open(&mut s, &c.title, &c.x_label, &c.y_label);
    y_axis(&mut s, &f, &ys);
    // Ticks inside the data's range only (the y axis is the one extended).
    let xt = c.x_ticks.clone().unwrap_or_else(|| {
        ticks(f.x0, f.x1)
            .into_iter()
            .filter(|v| *v >= f.x0 && *v <= f.x1 * (1.0 + 1e-9))
            .map(|v| (v, label(v)))
            .collect()
    });
    for (v, l) in &xt {
        let x = f.x(*v);
        let _ = write!(
            s,
            r#"<text x="{x:.2}" y="{:.2}" text-anchor="middle" class="tick">{}</text>"#,
            H - BOTTOM + 16.0,
            esc(l)
        );
    }
    for (i, ser) in c.series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = ser.points.iter().map(|(x, y)| format!("{:.2},{:.2}", f.x(*x), f.y(*y))).collect();
        let _ = write!(s, r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#, path.join(" "));
        if ser.points.len() <= 24 {
            for (x, y) in &ser.points {
                let _ = write!(s, r#"<circle cx="{:.2}" cy="{:.2}" r="3" fill="{colour}"/>"#, f.x(*x), f.y(*y));
            }
        }
    }
    legend(&mut s, &c.series.iter().map(|x| x.name.as_str()).collect::<Vec<_>>());
    s.push_str("</svg>");
    s
}

/// Grouped bars: per category (x axis) one bar per group (legend).
#[derive(Debug, Clone, Default)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// `(group name, one value per category)`.
    pub groups: Vec<(String, Vec<f64>)>,
}

/// A grouped bar chart as an SVG element.
pub fn bar_chart(c: &BarChart) -> String {
    let top = c.groups.iter().flat_map(|g| g.1.iter().copied()).fold(0.0f64, f64::max);
    let ys = ticks(0.0, if top > 0.0 { top } else { 1.0 });
    let f = Frame { x0: 0.0, x1: c.categories.len().max(1) as f64, y0: 0.0, y1: *ys.last().unwrap_or(&1.0) };
    let mut s = String::new();
    open(&mut s, &c.title, &c.x_label, &c.y_label);
    y_axis(&mut s, &f, &ys);
    let slot = f.x(1.0) - f.x(0.0);
    let bar = slot * 0.8 / c.groups.len().max(1) as f64;
    for (ci, cat) in c.categories.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{:.2}" y="{:.2}" text-anchor="middle" class="tick">{}</text>"#,
            f.x(ci as f64 + 0.5),
            H - BOTTOM + 16.0,
            esc(cat)
        );
        for (gi, (name, values)) in c.groups.iter().enumerate() {
            let v = values.get(ci).copied().unwrap_or(0.0);
            let x = f.x(ci as f64) + slot * 0.1 + gi as f64 * bar;
            let _ = write!(
                s,
                r#"<rect x="{x:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"><title>{}: {}</title></rect>"#,
                f.y(v),
                (bar - 1.0).max(1.0),
                f.y(0.0) - f.y(v),
                COLOURS[gi % COLOURS.len()],
                esc(&format!("{name}, {cat}")),
                esc(&label(v))
            );
        }
    }
    legend(&mut s, &c.groups.iter().map(|g| g.0.as_str()).collect::<Vec<_>>());
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 9.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 8.0), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(ticks(0.0, 62_000.0), vec![0.0, 20_000.0, 40_000.0, 60_000.0, 80_000.0]);
    }

    #[test]
    fn a_line_chart_draws_one_line_per_series_with_its_name_in_the_legend() {
        let c = LineChart {
            title: "t".into(),
            series: vec![
                Series { name: "a<b".into(), points: vec![(0.0, 1.0), (1.0, 2.0)] },
                Series { name: "c".into(), points: vec![(0.0, 3.0)] },
            ],
            ..LineChart::default()
        };
        let svg = line_chart(&c);
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(svg.contains("a&lt;b"), "names are escaped: {svg}");
    }

    #[test]
    fn no_x_tick_is_drawn_past_the_data() {
        let c = LineChart {
            series: vec![Series { name: "s".into(), points: vec![(0.0, 1.0), (60.0, 2.0)] }],
            ..LineChart::default()
        };
        let svg = line_chart(&c);
        assert!(svg.contains(">60</text>"), "{svg}");
        assert!(!svg.contains(">80</text>"), "{svg}");
    }

    #[test]
    fn a_bar_is_as_tall_as_its_value_against_the_axis() {
        let c = BarChart {
            categories: vec!["x".into()],
            groups: vec![("g".into(), vec![5.0]), ("h".into(), vec![10.0])],
            ..BarChart::default()
        };
        let svg = bar_chart(&c);
        let heights: Vec<f64> =
            svg.split("height=\"").skip(2).take(2).filter_map(|p| p.split('"').next()?.parse().ok()).collect();
        assert_eq!(heights.len(), 2, "{svg}");
        assert!((heights[1] / heights[0] - 2.0).abs() < 0.01, "{heights:?}");
    }
}
