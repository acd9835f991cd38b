//! The latency–throughput chart as a self-contained SVG: client latency p50 and p99
//! (milliseconds) against throughput (inferences per second), one point per level in
//! sweep order, each point labelled with its level. Hand-written (no plotting
//! dependency); the output depends only on the report, so it is reproducible.

use std::fmt::Write as _;

use super::{fmt_num, Exporter, Report};
use crate::perf::Load;
use crate::report::html::{nice_step, PlotArea};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 28.0;
const TOP: f64 = 58.0;
const BOTTOM: f64 = 62.0;

/// The series drawn: name, colour, value (microseconds) of a level.
type Series = (
    &'static str,
    &'static str,
    fn(&crate::perf::LevelResult) -> f64,
);

const SERIES: [Series; 2] = [
    ("p50 latency", "#1f77b4", |l| l.latency.p50_us),
    ("p99 latency", "#d62728", |l| l.latency.p99_us),
];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn tick_label(x: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{}", x.round() as i64)
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{x:.decimals$}")
    }
}

/// The latency–throughput chart (`--svg`).
pub struct SvgExporter;

impl Exporter for SvgExporter {
    /// The chart's bytes.
    fn serialize(&self, report: &Report) -> Vec<u8> {
        let levels = &report.levels;
        let max_x = levels.iter().map(|l| l.features_per_s).fold(0.0, f64::max);
        let max_y_ms = levels
            .iter()
            .flat_map(|l| SERIES.iter().map(move |s| (s.2)(l) / 1000.0))
            .fold(0.0, f64::max);
        let x_step = nice_step(max_x * 1.05, 6);
        let y_step = nice_step(max_y_ms * 1.1, 5);
        let x_top = ((max_x * 1.05) / x_step).ceil().max(1.0) * x_step;
        let y_top = ((max_y_ms * 1.1) / y_step).ceil().max(1.0) * y_step;
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |x: f64| LEFT + x / x_top * plot_w;
        let py = |y: f64| TOP + plot_h - y / y_top * plot_h;

        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let level_kind = match report.load {
            Load::Concurrency(_) => "concurrency",
            Load::RequestRate { .. } => "request rate /s",
        };
        let title = format!(
            "bertqa perf: {} ({}, batch {}, {})",
            report.model, report.url, report.batch_size, report.padding
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            WIDTH / 2.0,
            escape(&title)
        );
        let _ = writeln!(
            s,
            r##"<text x="{}" y="42" text-anchor="middle" fill="#555">points labelled with the {level_kind}</text>"##,
            WIDTH / 2.0
        );
        // Grid and ticks.
        let mut x = 0.0;
        while x <= x_top + x_step * 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{1:.1}" stroke="#e5e5e5"/><text x="{0:.1}" y="{2:.1}" text-anchor="middle">{3}</text>"##,
                px(x),
                TOP + plot_h,
                TOP + plot_h + 18.0,
                tick_label(x, x_step)
            );
            x += x_step;
        }
        let area = PlotArea {
            left: LEFT,
            top: TOP,
            width: plot_w,
            height: plot_h,
            x_label: if report.text {
                "throughput (questions/s)"
            } else {
                "throughput (inferences/s)"
            },
            x_label_y: HEIGHT - 16.0,
            y_label: "client latency (ms)",
            y_label_x: 18.0,
        };
        area.y_grid(&mut s, y_top, y_step, |y| tick_label(y, y_step));
        area.frame(&mut s);
        // Series: a line through the levels in sweep order, a marker per level.
        for (k, (name, colour, value)) in SERIES.iter().enumerate() {
            let points: Vec<String> = levels
                .iter()
                .map(|l| format!("{:.1},{:.1}", px(l.features_per_s), py(value(l) / 1000.0)))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline class="{}" fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                name.replace(' ', "-"),
                points.join(" ")
            );
            for l in levels {
                let (cx, cy) = (px(l.features_per_s), py(value(l) / 1000.0));
                let _ = writeln!(
                    s,
                    r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="3.5" fill="{colour}"><title>{}: {} {:.1} {}, {} {:.3} ms</title></circle>"#,
                    escape(&l.level.to_string()),
                    if l.stable { "stable," } else { "UNSTABLE," },
                    l.features_per_s,
                    if report.text {
                        "questions/s"
                    } else {
                        "inferences/s"
                    },
                    name,
                    value(l) / 1000.0
                );
                if k == SERIES.len() - 1 {
                    let _ = writeln!(
                        s,
                        r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#333" font-size="10">{}</text>"##,
                        cy - 8.0,
                        fmt_num(l.level.value())
                    );
                }
            }
            // Legend.
            let ly = TOP + 14.0 + 18.0 * k as f64;
            let _ = writeln!(
                s,
                r#"<line x1="{0:.1}" y1="{ly:.1}" x2="{1:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"/><text x="{2:.1}" y="{3:.1}">{name}</text>"#,
                LEFT + 12.0,
                LEFT + 36.0,
                LEFT + 42.0,
                ly + 4.0
            );
        }
        s.push_str("</svg>\n");
        s.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    fn render(r: &Report) -> Vec<u8> {
        SvgExporter.serialize(r)
    }

    #[test]
    fn one_line_and_one_marker_per_level_for_each_percentile() {
        let svg = String::from_utf8(render(&sample::report())).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("p50 latency") && svg.contains("p99 latency"));
        // The p99 of concurrency 2 (14.25 ms at 180 inferences/s) is the highest point;
        // the axes reach past it: y to 20 ms in steps of 5, x to 250 in steps of 50.
        assert!(svg.contains("concurrency 2: UNSTABLE, 180.0 inferences/s, p99 latency 14.250 ms"));
        assert!(svg.contains(">15</text>") && svg.contains(">20</text>"));
        assert!(!svg.contains(">25</text>"));
        assert!(svg.contains(">250</text>") && !svg.contains(">300</text>"));
        // The p50 line runs from (200/s, 5 ms) to (180/s, 9.5 ms) in sweep order: the
        // first point is right of and below the second.
        let line = svg
            .lines()
            .find(|l| l.contains("class=\"p50-latency\""))
            .unwrap();
        let pts: Vec<(f64, f64)> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .trim_end_matches("\"/>")
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        assert_eq!(pts.len(), 2);
        assert!(pts[0].0 > pts[1].0 && pts[0].1 > pts[1].1, "{pts:?}");
    }

    #[test]
    fn text_is_escaped_and_empty_sweeps_still_render() {
        let mut r = sample::report();
        r.model = "a<b>&\"c\"".into();
        r.levels.clear();
        let svg = String::from_utf8(render(&r)).unwrap();
        assert!(svg.contains("a&lt;b&gt;&amp;&quot;c&quot;"));
        assert!(!svg.contains("a<b>"));
        assert!(!svg.contains("NaN") && !svg.contains("\"inf"));
    }
}
