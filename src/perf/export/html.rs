//! `--html`: the sweep as one self-contained page (the frame, escaping and tables of
//! [`crate::report::html`]): the setting, the latency–throughput chart ([`super::svg`],
//! inline), the per-level table, each level's latency broken into its parts as stacked
//! bars, the measured load on server and client, and the warnings. Each section is one
//! function of the report, so that a section is added without touching the others.

use std::fmt::Write as _;

use super::svg::SvgExporter;
use super::text::setting_rows;
use super::{fmt_num, Exporter, Report};
use crate::metrics::text::{counters, gpu_words};
use crate::metrics::Choice;
use crate::perf::{LevelResult, Load};
use crate::report::html::{escape, ms, note, page, section, setting_list, table, Cell};

/// The page (`--html`).
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    /// The page's bytes.
    fn serialize(&self, r: &Report) -> Vec<u8> {
        let mut s = String::new();
        heading(&mut s, r);
        chart(&mut s, r);
        levels(&mut s, r);
        breakdown(&mut s, r);
        steps(&mut s, r);
        metrics(&mut s, r);
        server_metrics(&mut s, r);
        warnings(&mut s, r);
        page(&format!("bertqa perf: {}", r.model), &s).into_bytes()
    }
}

/// The title and the setting (model, server, data, inputs, load, window).
fn heading(s: &mut String, r: &Report) {
    let _ = writeln!(s, "<h1>bertqa perf: {}</h1>", escape(&r.model));
    setting_list(s, &setting_rows(r));
}

/// The latency–throughput chart: the `--svg` file's own SVG, inline.
fn chart(s: &mut String, r: &Report) {
    section(s, "chart", "Latency against throughput");
    s.push_str("<figure class=\"chart\">\n");
    s.push_str(&String::from_utf8_lossy(&SvgExporter.serialize(r)));
    s.push_str("</figure>\n");
}

/// The name of a level's column.
fn level_head(r: &Report) -> &'static str {
    match r.load {
        Load::Concurrency(_) => "concurrency",
        Load::RequestRate { .. } => "rate /s",
    }
}

/// The per-level table, as the text report's summary (p95 too); under a latency budget
/// also each level's verdict and goodput, and the best level within the budget.
fn levels(s: &mut String, r: &Report) {
    section(s, "levels", "Levels");
    let rows: Vec<(String, Vec<Cell>)> = r
        .levels
        .iter()
        .map(|l| {
            let lat = &l.latency;
            let mut cells = vec![
                Cell::Num {
                    shown: fmt_num(l.level.value()),
                    value: l.level.value(),
                },
                Cell::num(l.features_per_s, 1),
                Cell::num(lat.p50_us / 1000.0, 3),
                Cell::num(lat.p90_us / 1000.0, 3),
                Cell::num(lat.p95_us / 1000.0, 3),
                Cell::num(lat.p99_us / 1000.0, 3),
                Cell::num(lat.avg_us / 1000.0, 3),
                Cell::num(l.requests as f64, 0),
                Cell::Text(if l.stable {
                    format!("yes ({} windows)", l.trials)
                } else {
                    format!("NO ({} windows)", l.trials)
                }),
            ];
            if r.budget.is_some() {
                match l.budget {
                    Some(b) => cells.extend([
                        Cell::Text(if b.within { "within" } else { "OVER" }.into()),
                        Cell::num(b.goodput_share * 100.0, 1),
                        Cell::num(b.goodput_per_s, 1),
                    ]),
                    None => cells.extend((0..3).map(|_| Cell::Text(String::new()))),
                }
            }
            ("level".to_string(), cells)
        })
        .collect();
    let mut head = vec![
        level_head(r),
        r.rate_unit(),
        "p50 ms",
        "p90 ms",
        "p95 ms",
        "p99 ms",
        "avg ms",
        "requests",
        "stable",
    ];
    if r.budget.is_some() {
        head.extend(["budget", "goodput %", "goodput requests/s"]);
    }
    table(s, "sortable levels", &head, &rows);
    if let Some(words) = super::text::verdict_words(r) {
        note(s, &words);
    }
}

/// One part of a level's latency: its name, colour and average, microseconds.
type Part = (&'static str, &'static str, f64);

/// A level's average latency in parts, in the order a request meets them: each measured
/// (see [`crate::perf`]); together they make the average latency. Without the server's
/// statistics the response wait stays one part.
fn parts(l: &LevelResult) -> Vec<Part> {
    let (c, v) = (&l.client, &l.server);
    if !l.server_reported {
        return vec![
            ("client send", "#9467bd", c.send_us),
            ("response wait", "#7f7f7f", c.response_wait_us),
            ("client recv", "#e377c2", c.recv_us),
        ];
    }
    vec![
        ("client send", "#9467bd", c.send_us),
        ("network", "#8c564b", c.network_us),
        ("queue", "#ff7f0e", v.queue_us),
        ("compute input", "#bcbd22", v.compute_input_us),
        ("compute infer", "#1f77b4", v.compute_infer_us),
        ("compute output", "#17becf", v.compute_output_us),
        ("server other", "#c7c7c7", v.other_us),
        ("client recv", "#e377c2", c.recv_us),
    ]
}

/// Each level's average latency as a stacked horizontal bar of its parts.
fn breakdown(s: &mut String, r: &Report) {
    section(s, "breakdown", "Where the time goes");
    if r.levels.iter().all(|l| !l.server_reported) {
        note(
            s,
            "Server breakdown not reported by the server (no statistics extension): the bars \
             show the client's parts and the response wait.",
        );
    } else {
        note(
            s,
            "Average latency per level: client send, network (the response wait less the \
             server's request time), the server's queue, compute input, infer and output and \
             other time, client recv.",
        );
    }
    s.push_str(&breakdown_svg(r));
}

/// An ensemble's steps per level, each from its own statistics (no section without).
fn steps(s: &mut String, r: &Report) {
    if r.levels.iter().all(|l| l.steps.is_empty()) {
        return;
    }
    section(s, "steps", "Ensemble steps");
    note(
        s,
        "Each composing model's own statistics over the level: its requests and executions, \
         and its queue and compute time per request, ms.",
    );
    let rows: Vec<(String, Vec<Cell>)> = r
        .levels
        .iter()
        .flat_map(|l| {
            l.steps.iter().map(move |step| {
                let v = &step.server;
                let cells = vec![
                    Cell::Num {
                        shown: fmt_num(l.level.value()),
                        value: l.level.value(),
                    },
                    Cell::Text(step.model.clone()),
                    Cell::num(v.requests as f64, 0),
                    Cell::num(v.executions as f64, 0),
                    Cell::num(v.queue_us / 1000.0, 3),
                    Cell::num(v.compute_input_us / 1000.0, 3),
                    Cell::num(v.compute_infer_us / 1000.0, 3),
                    Cell::num(v.compute_output_us / 1000.0, 3),
                ];
                ("step".to_string(), cells)
            })
        })
        .collect();
    let head = [
        level_head(r),
        "model",
        "requests",
        "executions",
        "queue",
        "compute input",
        "compute infer",
        "compute output",
    ];
    table(s, "sortable steps", &head, &rows);
}

/// The stacked bars as inline SVG.
pub(crate) fn breakdown_svg(r: &Report) -> String {
    const W: f64 = 760.0;
    const LEFT: f64 = 120.0;
    const RIGHT: f64 = 90.0;
    const TOP: f64 = 56.0;
    const ROW: f64 = 30.0;
    const BAR: f64 = 18.0;
    let totals: Vec<f64> = r
        .levels
        .iter()
        .map(|l| parts(l).iter().map(|p| p.2.max(0.0)).sum())
        .collect();
    let top = totals.iter().copied().fold(0.0, f64::max);
    let plot_w = W - LEFT - RIGHT;
    let scale = if top > 0.0 { plot_w / top } else { 0.0 };
    let h = TOP + ROW * r.levels.len() as f64 + 16.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg class="breakdown" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    // Legend: every part any level has, in order.
    let mut legend: Vec<(&str, &str)> = Vec::new();
    for l in &r.levels {
        for (name, colour, _) in parts(l) {
            if !legend.iter().any(|(n, _)| *n == name) {
                legend.push((name, colour));
            }
        }
    }
    let (mut x, mut y) = (LEFT, 16.0);
    for (name, colour) in legend {
        let w = 22.0 + 7.0 * name.len() as f64;
        if x + w > W - 8.0 {
            x = LEFT;
            y += 18.0;
        }
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{colour}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            y - 10.0,
            x + 16.0,
            y
        );
        x += w;
    }
    for (k, (l, total)) in r.levels.iter().zip(&totals).enumerate() {
        let y = TOP + ROW * k as f64;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + BAR / 2.0 + 4.0,
            escape(&l.level.to_string())
        );
        let mut x = LEFT;
        for (name, colour, us) in parts(l) {
            let w = us.max(0.0) * scale;
            let _ = writeln!(
                s,
                r#"<rect class="part" x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{BAR}" fill="{colour}"><title>{}: {name} {} ms</title></rect>"#,
                escape(&l.level.to_string()),
                ms(us)
            );
            x += w;
        }
        let label = if l.server_reported {
            format!("{} ms", ms(*total))
        } else {
            format!(
                "{} ms (server breakdown not reported by the server)",
                ms(*total)
            )
        };
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#333">{}</text>"##,
            x + 6.0,
            y + BAR / 2.0 + 4.0,
            escape(&label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// What each level measured of the server's and the client's load: the server's busy
/// time and batching (from its statistics) and bertqa's own CPU.
fn metrics(s: &mut String, r: &Report) {
    section(s, "metrics", "Server and client load");
    let rate_mode = matches!(r.load, Load::RequestRate { .. });
    let mut head = vec![
        level_head(r),
        "server busy %",
        "executions",
        "inferences / execution",
        "ms / execution",
        "bertqa CPU s",
        "bertqa CPU % of all",
    ];
    if rate_mode {
        head.extend(["sent /s", "behind schedule ms"]);
    }
    let rows: Vec<(String, Vec<Cell>)> = r
        .levels
        .iter()
        .map(|l| {
            let v = &l.server;
            let mut cells = vec![Cell::Num {
                shown: fmt_num(l.level.value()),
                value: l.level.value(),
            }];
            if l.server_reported {
                cells.extend([
                    Cell::num(l.busy_fraction() * 100.0, 0),
                    Cell::num(v.executions as f64, 0),
                    Cell::num(l.inferences_per_execution(), 1),
                    Cell::num(v.compute_per_execution_us / 1000.0, 3),
                ]);
            } else {
                let none = || Cell::Text("not reported by the server".into());
                cells.extend([none(), none(), none(), none()]);
            }
            cells.extend([
                Cell::num(l.client_cpu_s, 3),
                Cell::num(l.client_cpu_fraction * 100.0, 1),
            ]);
            if rate_mode {
                cells.extend([
                    Cell::num(l.sent_per_s, 1),
                    Cell::num(l.send_delay_us / 1000.0, 3),
                ]);
            }
            ("metrics".to_string(), cells)
        })
        .collect();
    table(s, "metrics", &head, &rows);
}

/// The server's Prometheus metrics per level (CPU, GPUs, the model's counters), or why
/// none were read.
fn server_metrics(s: &mut String, r: &Report) {
    section(s, "server-metrics", "Server metrics");
    match &r.metrics {
        Choice::NotRead(why) => {
            note(s, &format!("Not read ({why})."));
            return;
        }
        Choice::Read { urls, interval_ms } => note(
            s,
            &format!(
                "Read from {} every {interval_ms} ms: gauges averaged over each level's \
                 reported windows, counters from the level's start to its drain.",
                urls.join(", ")
            ),
        ),
    }
    let head = [
        level_head(r),
        "CPU %",
        "CPU memory GB",
        "GPUs",
        "nv_inference counters",
    ];
    let not = || Cell::Text("not reported by the server".into());
    let rows: Vec<(String, Vec<Cell>)> = r
        .levels
        .iter()
        .map(|l| {
            let mut cells = vec![Cell::Num {
                shown: fmt_num(l.level.value()),
                value: l.level.value(),
            }];
            match &l.metrics {
                Some(m) => cells.extend([
                    m.cpu_utilization
                        .map_or_else(not, |u| Cell::num(u * 100.0, 1)),
                    m.cpu_memory_used_bytes
                        .map_or_else(not, |b| Cell::num(b / 1e9, 2)),
                    Cell::Text(gpu_words(&m.gpus)),
                    Cell::Text(counters(m.inference.as_ref())),
                ]),
                None => cells.extend((0..4).map(|_| Cell::Text("not read".into()))),
            }
            ("server-metrics".to_string(), cells)
        })
        .collect();
    table(s, "server-metrics", &head, &rows);
}

/// The levels' warnings (unstable, client-bound, rate not kept), when there are any.
fn warnings(s: &mut String, r: &Report) {
    let all = r.warnings();
    if all.is_empty() {
        return;
    }
    section(s, "warnings", "Warnings");
    s.push_str("<ul class=\"warnings\">\n");
    for w in all {
        let _ = writeln!(s, "<li>{}</li>", escape(w));
    }
    s.push_str("</ul>\n");
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    fn html(r: &Report) -> String {
        String::from_utf8(HtmlExporter.serialize(r)).unwrap()
    }

    #[test]
    fn a_text_models_steps_have_their_table() {
        let page = html(&sample::with_steps());
        assert!(
            page.contains("<h2 id=\"steps\">Ensemble steps</h2>"),
            "{page}"
        );
        assert!(page.contains("qa-text-tokenizer") && page.contains("tiny-bert-nobatch"));
        assert!(page.contains("<th>questions/s</th>"), "{page}");
        assert!(!html(&sample::report()).contains("id=\"steps\""));
    }

    #[test]
    fn chart_table_bars_and_load_for_every_level() {
        let r = sample::report();
        let page = html(&r);
        assert!(page.starts_with("<!DOCTYPE html>"));
        // The chart is the --svg file's, inline.
        let svg = String::from_utf8(SvgExporter.serialize(&r)).unwrap();
        assert!(page.contains(&svg));
        assert_eq!(page.matches("<tr class=\"level\">").count(), 2);
        assert!(page.contains(
            "<tr class=\"level\"><td class=\"num\" data-sort=\"1\">1</td><td class=\"num\" data-sort=\"200\">200.0</td><td class=\"num\" data-sort=\"5\">5.000</td><td class=\"num\" data-sort=\"6\">6.000</td><td class=\"num\" data-sort=\"6.5\">6.500</td><td class=\"num\" data-sort=\"7.5\">7.500</td>"
        ), "{page}");
        assert!(page.contains("<td class=\"text\">NO (10 windows)</td>"));
        // Eight parts per level, adding up to the average latency but for rounding.
        assert_eq!(page.matches("<rect class=\"part\"").count(), 16);
        assert!(page.contains("concurrency 1: compute infer 4.750 ms"));
        assert!(page.contains(">5.250 ms</text>"), "{page}");
        assert_eq!(page.matches("<tr class=\"metrics\">").count(), 2);
        assert!(page.contains("<td class=\"num\" data-sort=\"6\">6</td>"));
        assert!(page.contains("<li>concurrency 2: not stable</li>"));
        assert!(page.contains("Not read (--no-metrics)."));
        let page = html(&sample::with_metrics());
        assert_eq!(page.matches("<tr class=\"server-metrics\">").count(), 2);
        assert!(
            page.contains("GPU GPU-a 62.0%, 1.50 GB used, 212.5 W"),
            "{page}"
        );
        assert!(!page.contains("src=") && !page.contains("href="));
    }

    #[test]
    fn a_server_without_statistics_is_said_to_report_none() {
        let mut r = sample::report();
        for l in &mut r.levels {
            l.server_reported = false;
        }
        let page = html(&r);
        assert!(page.contains("Server breakdown not reported by the server"));
        assert!(page.contains("(server breakdown not reported by the server)"));
        assert_eq!(page.matches("<rect class=\"part\"").count(), 6);
        assert!(!page.contains(": queue "), "{page}");
        assert!(page.contains("<td class=\"text\">not reported by the server</td>"));
    }

    #[test]
    fn a_budget_adds_its_verdict_and_goodput() {
        let page = html(&sample::with_budget());
        assert!(
            page.contains("<dt>budget</dt><dd>p99 ≤ 8 ms: binary search"),
            "{page}"
        );
        assert!(page.contains("<th>goodput %</th>"));
        assert!(page.contains(
            "<td class=\"text\">within</td><td class=\"num\" data-sort=\"100\">100.0</td>"
        ));
        assert!(page
            .contains("<td class=\"text\">OVER</td><td class=\"num\" data-sort=\"40\">40.0</td>"));
        assert!(page.contains("within budget (p99 ≤ 8 ms): concurrency 1, p99 7.500 ms"));
        let plain = html(&sample::report());
        assert!(!plain.contains("goodput") && !plain.contains("<dt>budget</dt>"));
    }

    #[test]
    fn server_strings_are_escaped_and_rate_levels_show_their_schedule() {
        let mut r = sample::report();
        r.model = "<img src=x onerror=alert(1)>".into();
        r.url = "h&st:1".into();
        r.levels[1].warnings = vec!["<b>late</b>".into()];
        r.load = Load::RequestRate {
            rates: vec![1.0, 2.0],
            distribution: crate::perf::Distribution::Constant,
            seed: 0,
        };
        let page = html(&r);
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(page.contains("h&amp;st:1"));
        assert!(page.contains("<li>&lt;b&gt;late&lt;/b&gt;</li>"));
        assert!(page.contains("<th>behind schedule ms</th>"));
    }
}
