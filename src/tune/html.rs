//! `tune --html`: one self-contained page (the frame and tables of
//! `crate::report::html`): the setting, a chart of every measured candidate
//! (throughput against client latency at the budget's percentile, the budget as a
//! line, the Pareto front joined, the best ringed), the candidate table and the warnings.

use std::fmt::Write as _;

use super::report::{Candidate, Report};
use crate::report::html::{
    escape, nice_step, note, page, section, setting_list, table, Cell, PlotArea,
};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 28.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 62.0;

/// The page's bytes.
pub fn render(r: &Report) -> Vec<u8> {
    let mut s = String::new();
    let _ = writeln!(s, "<h1>bertqa tune: {}</h1>", escape(&r.model));
    let best = r.best();
    setting_list(
        &mut s,
        &[
            ("server", r.url.clone()),
            (
                "budget",
                format!(
                    "p{} ≤ {} ms",
                    r.budget.percentile,
                    r.budget.threshold_us / 1000.0
                ),
            ),
            (
                "search",
                format!("{}, {} candidates", r.search, r.candidates.len()),
            ),
            (
                "best",
                match best {
                    Some(b) => format!(
                        "#{b}: {} ({:.1} features/s{})",
                        r.candidates[b].shown().describe(),
                        r.best_score(b),
                        if r.remeasured.is_empty() {
                            ""
                        } else {
                            ", measured again"
                        }
                    ),
                    None => "none kept the budget".into(),
                },
            ),
            (
                "afterwards",
                match (r.kept_best, r.restored) {
                    (true, _) => "the best left loaded".into(),
                    (false, true) => "the original configuration back (read back, equal)".into(),
                    (false, false) => "the original configuration NOT back".into(),
                },
            ),
        ],
    );
    section(&mut s, "chart", "Candidates");
    s.push_str(&chart(r));
    section(&mut s, "candidates", "Every candidate");
    let pct = r.budget.percentile;
    let latency_head = format!("p{pct} ms");
    let pareto = r.pareto();
    let rows: Vec<(String, Vec<Cell>)> = r
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let class = if Some(i) == best { "best" } else { "candidate" };
            (class.to_string(), row(i, c, pareto.contains(&i)))
        })
        .collect();
    table(
        &mut s,
        "candidates sortable",
        &[
            "#",
            "configuration",
            "status",
            "concurrency",
            "features/s",
            "p50 ms",
            &latency_head,
            "budget",
            "pareto",
            "measured again: features/s (windows)",
            "error",
        ],
        &rows,
    );
    if !r.warnings.is_empty() {
        section(&mut s, "warnings", "Warnings");
        for w in &r.warnings {
            note(&mut s, w);
        }
    }
    page(&format!("bertqa tune: {}", r.model), &s).into_bytes()
}

fn row(i: usize, c: &Candidate, on_front: bool) -> Vec<Cell> {
    let l = c.level.as_ref();
    let num = |v: Option<f64>, d: usize| v.map_or(Cell::Text(String::new()), |v| Cell::num(v, d));
    vec![
        Cell::num(i as f64, 0),
        Cell::Text(c.shown().describe()),
        Cell::Text(c.status.into()),
        num(l.map(|l| l.level.value()), 0),
        num(l.map(|l| l.features_per_s), 1),
        num(l.map(|l| l.latency.p50_us / 1000.0), 3),
        num(l.map(budget_latency_ms), 3),
        Cell::Text(match (l, c.within_budget()) {
            (None, _) => String::new(),
            (Some(_), true) => "within".into(),
            (Some(_), false) => "over".into(),
        }),
        Cell::Text(if on_front {
            "yes".into()
        } else {
            String::new()
        }),
        Cell::Text(c.remeasured.as_ref().map_or(String::new(), |m| {
            format!(
                "{:.1} ({:.1} to {:.1}){}",
                m.features_per_s(),
                m.spread[0],
                m.spread[1],
                if m.within_budget { "" } else { ", over" }
            )
        })),
        Cell::Text(c.error.clone().unwrap_or_default()),
    ]
}

fn budget_latency_ms(l: &crate::perf::LevelResult) -> f64 {
    l.budget.map_or(l.latency.p99_us, |b| b.latency_us) / 1000.0
}

/// The chart: x latency (ms) at the budget's percentile, y features per second.
fn chart(r: &Report) -> String {
    let points: Vec<(usize, f64, f64)> = r
        .candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.level
                .as_ref()
                .map(|l| (i, budget_latency_ms(l), l.features_per_s))
        })
        .collect();
    let budget_ms = r.budget.threshold_us / 1000.0;
    let max_x = points.iter().map(|p| p.1).fold(budget_ms, f64::max);
    let max_y = points.iter().map(|p| p.2).fold(0.0, f64::max);
    let (x_step, y_step) = (nice_step(max_x * 1.1, 6), nice_step(max_y * 1.1, 5));
    let x_top = (max_x * 1.1 / x_step).ceil().max(1.0) * x_step;
    let y_top = (max_y * 1.1 / y_step).ceil().max(1.0) * y_step;
    let area = PlotArea {
        left: LEFT,
        top: TOP,
        width: WIDTH - LEFT - RIGHT,
        height: HEIGHT - TOP - BOTTOM,
        x_label: &format!("client latency p{} (ms)", r.budget.percentile),
        x_label_y: HEIGHT - 16.0,
        y_label: "throughput (features/s)",
        y_label_x: 20.0,
    };
    let px = |x: f64| area.left + x / x_top * area.width;
    let py = |y: f64| area.top + area.height - y / y_top * area.height;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    s.push('\n');
    area.y_grid(&mut s, y_top, y_step, |y| format!("{}", y.round() as i64));
    let mut x = 0.0;
    while x <= x_top + x_step * 1e-9 {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            px(x),
            area.top + area.height + 18.0,
            tick(x, x_step)
        );
        x += x_step;
    }
    area.frame(&mut s);
    let _ = writeln!(
        s,
        r##"<line class="budget" x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2:.1}" stroke="#d62728" stroke-dasharray="6 4"/><text x="{3:.1}" y="{4:.1}" fill="#d62728">budget {5} ms</text>"##,
        px(budget_ms),
        area.top,
        area.top + area.height,
        px(budget_ms) + 4.0,
        area.top + 14.0,
        budget_ms
    );
    let front: Vec<String> = r
        .pareto()
        .iter()
        .filter_map(|i| points.iter().find(|p| p.0 == *i))
        .map(|p| format!("{:.1},{:.1}", px(p.1), py(p.2)))
        .collect();
    if front.len() > 1 {
        let _ = writeln!(
            s,
            r##"<polyline class="pareto" points="{}" fill="none" stroke="#2ca02c" stroke-width="1.5"/>"##,
            front.join(" ")
        );
    }
    let best = r.best();
    for (i, x, y) in &points {
        let within = r.candidates[*i].within_budget();
        let colour = if within { "#1f77b4" } else { "#999999" };
        let _ = writeln!(
            s,
            r#"<circle class="candidate" cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"><title>#{i} {}</title></circle><text x="{:.1}" y="{:.1}" font-size="10">{i}</text>"#,
            px(*x),
            py(*y),
            escape(&r.candidates[*i].shown().describe()),
            px(*x) + 6.0,
            py(*y) - 6.0
        );
        if Some(*i) == best {
            let _ = writeln!(
                s,
                r##"<circle class="best" cx="{:.1}" cy="{:.1}" r="9" fill="none" stroke="#ff7f0e" stroke-width="2"/>"##,
                px(*x),
                py(*y)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn tick(x: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{}", x.round() as i64)
    } else {
        let decimals = (-step.log10().floor()) as usize;
        format!("{x:.decimals$}")
    }
}
