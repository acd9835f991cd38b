//! The human report of a sweep: the setting, each level's figures with every part of
//! the latency shown, and a summary table.

use std::fmt::Write as _;

use super::{fmt_num, Exporter, Report};
use crate::metrics::text::{counters, gauges};
use crate::metrics::{Choice, EndpointMetrics, SpanMetrics};
use crate::perf::{LevelResult, Load};

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// The latency the measured parts account for, microseconds: client send, network,
/// server queue and compute (input, infer, output), client recv. It leaves out only
/// the server's "other" request time, which the server reports itself; how close this
/// comes to the measured average latency is the check that the parts explain it.
pub(crate) fn accounted_us(l: &LevelResult) -> f64 {
    l.client.send_us
        + l.client.network_us
        + l.server.queue_us
        + l.server.compute_input_us
        + l.server.compute_infer_us
        + l.server.compute_output_us
        + l.client.recv_us
}

/// The human report (stdout without `--json`): the report's
/// [`Render`](crate::report::Render) text.
pub struct TextExporter;

impl Exporter for TextExporter {
    fn serialize(&self, report: &Report) -> Vec<u8> {
        crate::report::Render::text(report, false).into_bytes()
    }
}

/// The report's text: the setting, each level, the summary table.
pub(crate) fn render(r: &Report) -> String {
    let mut s = String::new();
    setting(&mut s, r);
    for l in &r.levels {
        let _ = writeln!(s);
        level(&mut s, l, r);
    }
    let _ = writeln!(s);
    table(&mut s, r);
    verdict(&mut s, r);
    s
}

/// The model, data, inputs and load lines.
fn setting(s: &mut String, r: &Report) {
    for (name, words) in setting_rows(r) {
        let _ = writeln!(s, "{name:<12} {words}");
    }
}

/// The setting: `model`, `data`, `inputs`, `load` and (with a latency budget) `budget`,
/// each with its words (the text report's first lines, the HTML page's heading). A
/// setting is named as messages name it (`` `batch_size` ``); the command writes the
/// text and the page with its flags.
pub(crate) fn setting_rows(r: &Report) -> Vec<(&'static str, String)> {
    let version = if r.version.is_empty() {
        String::new()
    } else {
        format!(" version {}", r.version)
    };
    let (batching, chosen_by) = match (r.batch_declared, r.batch_size_given) {
        (true, _) => (format!("max batch {}", r.max_batch_size), ""),
        (false, true) => (
            "batching not declared by the server".into(),
            ", `batch_size`",
        ),
        (false, false) => (
            "batching not declared by the server".into(),
            ", bertqa's default",
        ),
    };
    // A server without model configuration may name no platform.
    let platform = if r.platform.is_empty() {
        String::new()
    } else {
        format!("{}, ", r.platform)
    };
    let mut rows = vec![
        (
            "model",
            format!(
                "{}{version} at {} over {} ({platform}{batching})",
                r.model,
                r.url,
                crate::report::protocol_words(r.protocol),
            ),
        ),
        (
            "data",
            if r.text {
                format!(
                    "{}: {} questions, {} per request{chosen_by}, cycled; the server \
                     tokenizes",
                    r.data, r.features, r.batch_size
                )
            } else {
                format!(
                    "{}: {} features, batches of {}{chosen_by} (padding {}), cycled",
                    r.data, r.features, r.batch_size, r.padding
                )
            },
        ),
        ("inputs", r.inputs.clone()),
        (
            "load",
            format!(
                "{}; {}, stable when the last 3 agree within {}% (at most {} windows)",
                r.load_words(),
                r.window_words(),
                fmt_num(r.stability_percent),
                r.max_trials
            ),
        ),
    ];
    rows.push((
        "metrics",
        match &r.metrics {
            Choice::Read { urls, interval_ms } => {
                format!("{} every {interval_ms} ms", urls.join(", "))
            }
            Choice::NotRead(why) => format!("not read ({why})"),
        },
    ));
    if let (Some(b), Some(words)) = (r.budget, r.budget_words()) {
        let n = r.load.len();
        let search = if b.binary_search {
            format!(
                "binary search over the range's {n} levels (at most {} measured)",
                crate::perf::budget::Plan::new(n, Some(&b)).most_levels()
            )
        } else {
            "levels in order, up to the first over budget".to_string()
        };
        rows.push(("budget", format!("{words}: {search}")));
    }
    rows
}

/// The best level within the budget, when there is a budget.
fn verdict(s: &mut String, r: &Report) {
    if let Some(words) = verdict_words(r) {
        let _ = writeln!(s);
        let _ = writeln!(s, "{words}");
    }
}

/// The verdict: the best level within the budget, in words (`None`: no budget).
pub(crate) fn verdict_words(r: &Report) -> Option<String> {
    let (Some(b), Some(words)) = (r.budget, r.budget_words()) else {
        return None;
    };
    Some(match r.within_budget() {
        Some(l) => format!(
            "within budget ({words}): {}, p{} {} ms, {:.1} {} ({} levels measured)",
            l.level,
            fmt_num(b.percentile),
            ms(l.budget.map_or(0.0, |x| x.latency_us)),
            l.features_per_s,
            r.rate_unit(),
            r.levels.len()
        ),
        None => format!(
            "within budget ({words}): no level measured kept it ({} levels measured)",
            r.levels.len()
        ),
    })
}

/// One level's figures, every part of the latency shown.
fn level(s: &mut String, l: &LevelResult, r: &Report) {
    let budget = r.budget.as_ref();
    let _ = writeln!(
        s,
        "{}: {} after {} windows; {} requests in {:.2} s",
        l.level,
        if l.stable { "stable" } else { "NOT STABLE" },
        l.trials,
        l.requests,
        l.window_s
    );
    let _ = writeln!(
        s,
        "  throughput   {:.1} {} ({:.1} requests/s of {} {})",
        l.features_per_s,
        r.rate_unit(),
        l.requests_per_s,
        r.batch_size,
        match (r.text, r.batch_size) {
            (true, 1) => "question",
            _ => r.rows(),
        }
    );
    if let (Some(b), Some(budget)) = (l.budget, budget) {
        let _ = writeln!(
            s,
            "  budget       p{} {} ms: {}; goodput {:.1}% of requests ({:.1} requests/s)",
            fmt_num(budget.percentile),
            ms(b.latency_us),
            if b.within {
                "within budget"
            } else {
                "OVER BUDGET"
            },
            b.goodput_share * 100.0,
            b.goodput_per_s
        );
    }
    let lat = &l.latency;
    let _ = writeln!(
        s,
        "  latency      p50 {}  p90 {}  p95 {}  p99 {}  avg {} ms",
        ms(lat.p50_us),
        ms(lat.p90_us),
        ms(lat.p95_us),
        ms(lat.p99_us),
        ms(lat.avg_us)
    );
    let (c, v) = (&l.client, &l.server);
    let _ = writeln!(
        s,
        "  client       send {} + recv {} ms (encoding, decoding); response wait {} ms",
        ms(c.send_us),
        ms(c.recv_us),
        ms(c.response_wait_us)
    );
    if !l.server_reported {
        let _ = writeln!(
            s,
            "  server       breakdown not reported by the server (no statistics extension)"
        );
        cpu_line(s, l);
        if let Some(m) = &l.metrics {
            metrics_lines(s, m);
        }
        return;
    }
    let _ = writeln!(
        s,
        "  network      {} ms (response wait − server request {} ms)",
        ms(c.network_us),
        ms(v.request_us)
    );
    let _ = writeln!(
        s,
        "  server       queue {} + compute input {} + infer {} + output {} + other {} ms",
        ms(v.queue_us),
        ms(v.compute_input_us),
        ms(v.compute_infer_us),
        ms(v.compute_output_us),
        ms(v.other_us)
    );
    steps(s, l);
    let _ = writeln!(
        s,
        "  accounted    {} ms of the average latency {} ms by send + network + queue + \
             compute + recv",
        ms(accounted_us(l)),
        ms(lat.avg_us)
    );
    let busy = l.busy_fraction() * 100.0;
    let per_exec = l.inferences_per_execution();
    let _ = writeln!(
            s,
            "  server busy  {busy:.0}% of the time: {} executions of {per_exec:.1} inferences, {} ms each",
            v.executions,
            ms(v.compute_per_execution_us)
        );
    cpu_line(s, l);
    if let Some(m) = &l.metrics {
        metrics_lines(s, m);
    }
}

/// An ensemble's steps, each from its own statistics: time per request of its own, and
/// its counts.
fn steps(s: &mut String, l: &LevelResult) {
    for (i, step) in l.steps.iter().enumerate() {
        let v = &step.server;
        let label = format!("step {}", i + 1);
        let _ = writeln!(
            s,
            "  {label:<12} {}: queue {} + compute input {} + infer {} + output {} ms; \
             {} requests, {} executions",
            step.model,
            ms(v.queue_us),
            ms(v.compute_input_us),
            ms(v.compute_infer_us),
            ms(v.compute_output_us),
            v.requests,
            v.executions
        );
    }
}

/// The server's metrics over a level: the total, then each endpoint when several.
fn metrics_lines(s: &mut String, m: &SpanMetrics) {
    let _ = writeln!(
        s,
        "  metrics      {}",
        gauges(m.cpu_utilization, m.cpu_memory_used_bytes, &m.gpus)
    );
    let _ = writeln!(s, "  counters     {}", counters(m.inference.as_ref()));
    if m.endpoints.len() > 1 {
        for e in &m.endpoints {
            endpoint_line(s, e);
        }
    }
}

fn endpoint_line(s: &mut String, e: &EndpointMetrics) {
    let _ = writeln!(
        s,
        "    {}: {}; {}",
        e.url,
        gauges(e.cpu_utilization, e.cpu_memory_used_bytes, &e.gpus),
        counters(e.inference.as_ref())
    );
}

/// bertqa's own CPU over the level.
fn cpu_line(s: &mut String, l: &LevelResult) {
    let _ = writeln!(
        s,
        "  bertqa CPU   {:.3} s, {:.0}% of all CPUs{}",
        l.client_cpu_s,
        l.client_cpu_fraction * 100.0,
        match l.level {
            crate::perf::Level::RequestRate(_) => format!(
                "; sent {:.1} requests/s, {} ms behind schedule on average",
                l.sent_per_s,
                ms(l.send_delay_us)
            ),
            crate::perf::Level::Concurrency(_) => String::new(),
        }
    );
}

/// The summary: a row per level.
fn table(s: &mut String, r: &Report) {
    let head = match r.load {
        Load::Concurrency(_) => "concurrency",
        Load::RequestRate { .. } => "rate /s",
    };
    let w = r.rate_unit().len().max(10);
    let _ = writeln!(
        s,
        "{head:>12} {:>w$} {:>10} {:>10} {:>10} {:>10}  stable{}",
        r.rate_unit(),
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "avg ms",
        if r.budget.is_some() {
            "  budget  goodput"
        } else {
            ""
        }
    );
    for l in &r.levels {
        let stable = if l.stable { "yes" } else { "NO" };
        let stable = match l.budget {
            Some(b) => format!(
                "{stable:<6}  {:<6}  {:>6.1}%",
                if b.within { "within" } else { "OVER" },
                b.goodput_share * 100.0
            ),
            None => stable.to_string(),
        };
        let _ = writeln!(
            s,
            "{:>12} {:>w$.1} {:>10} {:>10} {:>10} {:>10}  {stable}",
            fmt_num(l.level.value()),
            l.features_per_s,
            ms(l.latency.p50_us),
            ms(l.latency.p90_us),
            ms(l.latency.p99_us),
            ms(l.latency.avg_us),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn a_server_without_statistics_is_said_to_report_none() {
        let mut r = sample::report();
        for l in &mut r.levels {
            l.server_reported = false;
        }
        let text = render(&r);
        assert!(text.contains(
            "  server       breakdown not reported by the server (no statistics extension)"
        ));
        assert!(
            !text.contains("network") && !text.contains("server busy"),
            "{text}"
        );
        assert!(text.contains("  bertqa CPU"));
        let json = serde_json::to_value(super::super::json::render(&r)).unwrap();
        let level = &json["levels"][0];
        assert!(level["server_ms"].is_null() && level["server"].is_null());
        assert!(level["client_ms"]["network"].is_null());
        let csv = String::from_utf8(super::super::CsvExporter.serialize(&r)).unwrap();
        let row = csv.lines().nth(1).unwrap();
        assert!(row.contains(",,,,,"), "{row}");
    }

    #[test]
    fn a_budget_is_judged_per_level_and_answered_at_the_end() {
        let text = render(&sample::with_budget());
        assert!(text.contains(
            "budget       p99 ≤ 8 ms: binary search over the range's 2 levels (at most 2 measured)"
        ));
        assert!(text.contains(
            "  budget       p99 7.500 ms: within budget; goodput 100.0% of requests (100.0 requests/s)"
        ));
        assert!(text.contains("  budget       p99 14.250 ms: OVER BUDGET; goodput 40.0%"));
        assert!(text.contains("  stable  budget  goodput\n"), "{text}");
        assert!(text.contains("  yes     within   100.0%\n"), "{text}");
        assert!(text.ends_with(
            "within budget (p99 ≤ 8 ms): concurrency 1, p99 7.500 ms, 200.0 infer/s (2 levels measured)\n"
        ));
        let mut none = sample::with_budget();
        none.levels.truncate(0);
        assert!(render(&none).contains("no level measured kept it (0 levels measured)"));
    }

    #[test]
    fn metrics_are_shown_per_level_and_missing_ones_said_to_be() {
        let text = render(&sample::with_metrics());
        assert!(text.contains("metrics      http://127.0.0.1:8002/metrics every 1000 ms\n"));
        assert!(text.contains(
            "  metrics      CPU 35.0% (61.00 GB memory used); GPU GPU-a 62.0%, 1.50 GB used, 212.5 W\n"
        ), "{text}");
        assert!(text.contains(
            "  counters     160 requests (0 failed), 320 inferences, 100 executions; per request queue 0.100 + compute 3.819 ms\n"
        ), "{text}");
        let mut r = sample::with_metrics();
        for l in &mut r.levels {
            let m = l.metrics.as_mut().unwrap();
            m.gpus.clear();
            m.inference = None;
        }
        let text = render(&r);
        assert!(
            text.contains("; GPU: not reported by the server\n"),
            "{text}"
        );
        assert!(text.contains("  counters     nv_inference_*: not reported by the server\n"));
        assert!(render(&sample::report()).contains("metrics      not read (--no-metrics)\n"));
    }

    #[test]
    fn a_text_model_counts_questions_and_names_each_ensemble_step() {
        let text = render(&sample::with_steps());
        assert!(
            text.contains(
                "data         data/sample.json: 26 questions, 1 per request, cycled; the server tokenizes\n"
            ),
            "{text}"
        );
        assert!(text.contains("  throughput   100.0 questions/s (100.0 requests/s of 1 question)"));
        assert!(text.contains(
            "  step 1       qa-text-tokenizer: queue 0.050 + compute input 0.010 + infer 1.200 + output 0.005 ms; 150 requests, 150 executions\n"
        ), "{text}");
        assert!(text.contains("  step 2       tiny-bert-nobatch: queue 0.080"));
        assert!(
            text.contains(" concurrency questions/s     p50 ms"),
            "{text}"
        );
        assert!(
            text.contains("           1       100.0      5.000"),
            "{text}"
        );
        assert!(!render(&sample::report()).contains("  step 1"));
    }

    #[test]
    fn every_part_is_shown_and_adds_up() {
        let r = sample::report();
        let text = render(&r);
        assert!(text.starts_with("model        tiny-bert at 127.0.0.1:8001 over gRPC (python"));
        assert!(text.contains("concurrency 1: stable after 3 windows; 150 requests in 1.50 s"));
        assert!(text.contains("concurrency 2: NOT STABLE after 10 windows"));
        assert!(text.contains(
            "  server       queue 0.100 + compute input 0.010 + infer 4.750 + output 0.009 + other 0.020 ms"
        ));
        assert!(text.contains("  accounted    5.230 ms of the average latency 5.250 ms by send"));
        assert!(text.contains(
            "  server busy  6% of the time: 100 executions of 3.0 inferences, 0.900 ms each"
        ));
        let table: Vec<&str> = text.lines().rev().take(3).collect();
        assert_eq!(
            table[2],
            " concurrency    infer/s     p50 ms     p90 ms     p99 ms     avg ms  stable"
        );
        assert_eq!(
            table[1],
            "           1      200.0      5.000      6.000      7.500      5.250  yes"
        );
        assert!(table[0].ends_with("  NO"));
        let l = &r.levels[0];
        assert!((accounted_us(l) + l.server.other_us - l.latency.avg_us).abs() < 1e-9);
    }
}
