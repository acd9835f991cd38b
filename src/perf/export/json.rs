//! The `--json` document of `bertqa perf` (`"schema": 1`; `schema/perf.schema.json`).
//! Latencies in milliseconds (`_ms`), rates per second (`_per_s`).

use serde_json::{json, Value};

use super::Report;
use crate::perf::{Level, LevelResult, Load, Window};

/// Rounds for the report: microsecond-level time in milliseconds keeps 6 decimals.
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn ms(us: f64) -> f64 {
    r6(us / 1000.0)
}

/// The JSON document.
pub fn render(report: &Report) -> Value {
    let (distribution, seed) = match &report.load {
        Load::Concurrency(_) => (Value::Null, Value::Null),
        Load::RequestRate {
            distribution, seed, ..
        } => (json!(distribution.as_str()), json!(seed)),
    };
    let (interval_ms, request_count) = match report.window {
        Window::Time(d) => (json!(d.as_millis() as u64), Value::Null),
        Window::Count(n) => (Value::Null, json!(n)),
    };
    json!({
        "schema": 1,
        "model": {
            "name": report.model,
            "version": report.version,
            "url": report.url,
            "platform": report.platform,
            "max_batch_size": report.max_batch_size,
        },
        "data": report.data,
        "features": report.features,
        "batch_size": report.batch_size,
        "padding": report.padding,
        "inputs": report.inputs,
        "mode": report.load.mode(),
        "request_distribution": distribution,
        "seed": seed,
        "measurement": {
            "mode": match report.window { Window::Time(_) => "time", Window::Count(_) => "count" },
            "interval_ms": interval_ms,
            "request_count": request_count,
            "stability_percentage": report.stability_percent,
            "max_trials": report.max_trials,
        },
        "levels": report.levels.iter().map(level).collect::<Vec<_>>(),
        "warnings": report.levels.iter().flat_map(|l| l.warnings.iter()).collect::<Vec<_>>(),
    })
}

fn level(l: &LevelResult) -> Value {
    let (concurrency, rate) = match l.level {
        Level::Concurrency(n) => (json!(n), Value::Null),
        Level::RequestRate(r) => (Value::Null, json!(r)),
    };
    let s = &l.server;
    let c = &l.client;
    let busy_fraction = if l.window_s > 0.0 {
        s.busy_us / 1e6 / l.window_s
    } else {
        0.0
    };
    json!({
        "concurrency": concurrency,
        "request_rate_per_s": rate,
        "stable": l.stable,
        "trials": l.trials,
        "window_s": r6(l.window_s),
        "requests": l.requests,
        "features": l.features,
        "throughput": {
            "requests_per_s": r6(l.requests_per_s),
            "features_per_s": r6(l.features_per_s),
        },
        "latency_ms": {
            "p50": ms(l.latency.p50_us),
            "p90": ms(l.latency.p90_us),
            "p95": ms(l.latency.p95_us),
            "p99": ms(l.latency.p99_us),
            "avg": ms(l.latency.avg_us),
            "max": ms(l.latency.max_us),
        },
        "client_ms": {
            "send": ms(c.send_us),
            "recv": ms(c.recv_us),
            "response_wait": ms(c.response_wait_us),
            "network": ms(c.network_us),
        },
        "server_ms": {
            "request": ms(s.request_us),
            "queue": ms(s.queue_us),
            "compute_input": ms(s.compute_input_us),
            "compute_infer": ms(s.compute_infer_us),
            "compute_output": ms(s.compute_output_us),
            "other": ms(s.other_us),
            "compute_per_execution": ms(s.compute_per_execution_us),
        },
        "server": {
            "requests": s.requests,
            "inferences": s.inferences,
            "executions": s.executions,
            "busy_fraction": r6(busy_fraction),
        },
        "client_cpu": {
            "cpu_s": r6(l.client_cpu_s),
            "fraction_of_all_cpus": r6(l.client_cpu_fraction),
        },
        "sent_per_s": r6(l.sent_per_s),
        "send_delay_ms": ms(l.send_delay_us),
        "warnings": l.warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn levels_carry_every_part_of_the_latency() {
        let v = render(&sample::report());
        assert_eq!(v["schema"], 1);
        assert_eq!(v["mode"], "concurrency");
        assert_eq!(v["measurement"]["request_count"], 50);
        assert_eq!(v["measurement"]["interval_ms"], Value::Null);
        let l = &v["levels"][0];
        assert_eq!(l["concurrency"], 1);
        assert_eq!(l["latency_ms"]["p50"], 5.0);
        assert_eq!(l["latency_ms"]["p99"], 7.5);
        // send + network + queue + compute (3) + other + recv = avg latency.
        let parts = ["send", "network", "recv"]
            .iter()
            .map(|k| l["client_ms"][k].as_f64().unwrap())
            .chain(
                [
                    "queue",
                    "compute_input",
                    "compute_infer",
                    "compute_output",
                    "other",
                ]
                .iter()
                .map(|k| l["server_ms"][k].as_f64().unwrap()),
            )
            .sum::<f64>();
        let avg = l["latency_ms"]["avg"].as_f64().unwrap();
        assert!((parts - avg).abs() < 0.5, "{parts} vs {avg}");
        assert_eq!(v["warnings"][0], "concurrency 2: not stable");
        assert_eq!(v["levels"][1]["stable"], false);
        // 90 ms of execution in a 1.5 s window.
        assert_eq!(l["server"]["busy_fraction"], 0.06);
    }
}
