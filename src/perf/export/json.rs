//! The `--json` document of `bertqa perf` (`"schema": 1`; `schema/perf.schema.json`).
//! Latencies in milliseconds (`_ms`), rates per second (`_per_s`).

use serde::Serialize;

use super::{Exporter, Report};
use crate::metrics::json::{metrics, ms, r6, MetricsJson};
use crate::metrics::Choice;
use crate::perf::{Level, LevelResult, Load, Window};

/// The JSON document (keys in this order).
#[derive(Debug, Serialize)]
pub struct PerfJson<'a> {
    pub schema: u32,
    pub model: Model<'a>,
    pub data: &'a str,
    pub features: usize,
    pub batch_size: usize,
    pub padding: &'a str,
    pub inputs: &'a str,
    pub mode: &'static str,
    /// Request-rate sweeps only (`null` otherwise), as `seed`.
    pub request_distribution: Option<&'static str>,
    pub seed: Option<u64>,
    pub measurement: Measurement,
    /// `--latency-threshold` and its search (`null` without one).
    pub latency_budget: Option<LatencyBudget>,
    /// The largest load within the budget (`null`: none kept it, or no budget).
    pub within_budget: Option<WithinBudget>,
    /// Which Prometheus endpoints were read, or why none was.
    pub metrics: MetricsSetting<'a>,
    pub levels: Vec<LevelJson<'a>>,
    pub warnings: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct MetricsSetting<'a> {
    pub urls: &'a [String],
    pub interval_ms: Option<u64>,
    pub not_read: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct LatencyBudget {
    pub threshold_ms: f64,
    pub percentile: f64,
    /// `"binary"` or `"sweep"` (in order, up to the first level over budget).
    pub search: &'static str,
}

#[derive(Debug, Serialize)]
pub struct WithinBudget {
    /// The level: one of the two is set.
    pub concurrency: Option<usize>,
    pub request_rate_per_s: Option<f64>,
    /// Client latency at the budget's percentile.
    pub latency_ms: f64,
    pub throughput: Throughput,
}

/// Requests that met the latency threshold.
#[derive(Debug, Serialize)]
pub struct Goodput {
    pub share: f64,
    pub per_s: f64,
}

/// How a level did against the budget.
#[derive(Debug, Serialize)]
pub struct LevelBudgetJson {
    pub latency_ms: f64,
    pub within: bool,
}

#[derive(Debug, Serialize)]
pub struct Model<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub url: &'a str,
    /// `--protocol`: `grpc` or `http`.
    pub protocol: &'static str,
    pub platform: &'a str,
    pub max_batch_size: usize,
    /// `"tokens"` (token ids) or `"text"` (a question and a context; then `features`
    /// count questions).
    pub takes: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Measurement {
    /// `"time"` or `"count"`; one of the next two is set.
    pub mode: &'static str,
    pub interval_ms: Option<u64>,
    pub request_count: Option<u64>,
    pub stability_percentage: f64,
    pub max_trials: usize,
}

/// One level's results.
#[derive(Debug, Serialize)]
pub struct LevelJson<'a> {
    /// The level: one of the two is set.
    pub concurrency: Option<usize>,
    pub request_rate_per_s: Option<f64>,
    pub stable: bool,
    pub trials: usize,
    pub window_s: f64,
    pub requests: u64,
    pub features: u64,
    pub throughput: Throughput,
    pub latency_ms: LatencyMs,
    pub client_ms: ClientMs,
    /// `None` (null) when the server does not report statistics; so is `server`.
    pub server_ms: Option<ServerMs>,
    pub server: Option<Server>,
    /// An ensemble's steps, in order, each from its own statistics (empty otherwise).
    pub steps: Vec<Step<'a>>,
    pub client_cpu: ClientCpu,
    pub sent_per_s: f64,
    pub send_delay_ms: f64,
    /// `null` without a latency budget, as `goodput`.
    pub budget: Option<LevelBudgetJson>,
    pub goodput: Option<Goodput>,
    /// The server's metrics over the level (load start to drain for the counters);
    /// `null` when no metrics were read.
    pub metrics: Option<MetricsJson<'a>>,
    pub warnings: &'a [String],
}

#[derive(Debug, Serialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub features_per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub avg: f64,
    pub max: f64,
}

#[derive(Debug, Serialize)]
pub struct ClientMs {
    pub send: f64,
    pub recv: f64,
    pub response_wait: f64,
    /// `None` (null) when the server does not report statistics.
    pub network: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ServerMs {
    pub request: f64,
    pub queue: f64,
    pub compute_input: f64,
    pub compute_infer: f64,
    pub compute_output: f64,
    pub other: f64,
    pub compute_per_execution: f64,
}

#[derive(Debug, Serialize)]
pub struct Server {
    pub requests: u64,
    pub inferences: u64,
    pub executions: u64,
    pub busy_fraction: f64,
}

/// One ensemble step: its counts, and its times per request of its own.
#[derive(Debug, Serialize)]
pub struct Step<'a> {
    pub model: &'a str,
    pub requests: u64,
    pub inferences: u64,
    pub executions: u64,
    pub request_ms: f64,
    pub queue_ms: f64,
    pub compute_input_ms: f64,
    pub compute_infer_ms: f64,
    pub compute_output_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct ClientCpu {
    pub cpu_s: f64,
    pub fraction_of_all_cpus: f64,
}

/// `--json`: the report's [`Render`](crate::report::Render) JSON, as every command's
/// `--json` prints it.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, report: &Report) -> Vec<u8> {
        let json = crate::report::Format::Json;
        crate::report::Render::render(report, json).into_bytes()
    }
}

/// The JSON document of `report`.
pub(crate) fn render(report: &Report) -> PerfJson<'_> {
    let (request_distribution, seed) = match &report.load {
        Load::Concurrency(_) => (None, None),
        Load::RequestRate {
            distribution, seed, ..
        } => (Some(distribution.as_str()), Some(*seed)),
    };
    let (mode, interval_ms, request_count) = match report.window {
        Window::Time(d) => ("time", Some(d.as_millis() as u64), None),
        Window::Count(n) => ("count", None, Some(n)),
    };
    PerfJson {
        schema: 1,
        model: Model {
            name: &report.model,
            version: &report.version,
            url: &report.url,
            protocol: report.protocol.as_str(),
            platform: &report.platform,
            max_batch_size: report.max_batch_size,
            takes: if report.text { "text" } else { "tokens" },
        },
        data: &report.data,
        features: report.features,
        batch_size: report.batch_size,
        padding: &report.padding,
        inputs: &report.inputs,
        mode: report.load.mode(),
        request_distribution,
        seed,
        measurement: Measurement {
            mode,
            interval_ms,
            request_count,
            stability_percentage: report.stability_percent,
            max_trials: report.max_trials,
        },
        latency_budget: report.budget.map(|b| LatencyBudget {
            threshold_ms: ms(b.threshold_us),
            percentile: b.percentile,
            search: if b.binary_search { "binary" } else { "sweep" },
        }),
        within_budget: report.within_budget().map(|l| {
            let (concurrency, request_rate_per_s) = level_value(l.level);
            WithinBudget {
                concurrency,
                request_rate_per_s,
                latency_ms: ms(l.budget.map_or(0.0, |b| b.latency_us)),
                throughput: Throughput {
                    requests_per_s: r6(l.requests_per_s),
                    features_per_s: r6(l.features_per_s),
                },
            }
        }),
        metrics: match &report.metrics {
            Choice::Read { urls, interval_ms } => MetricsSetting {
                urls,
                interval_ms: Some(*interval_ms),
                not_read: None,
            },
            Choice::NotRead(why) => MetricsSetting {
                urls: &[],
                interval_ms: None,
                not_read: Some(why),
            },
        },
        levels: report.levels.iter().map(level).collect(),
        warnings: report.warnings(),
    }
}

/// The level as the JSON's two keys (`concurrency`, `request_rate_per_s`).
fn level_value(level: Level) -> (Option<usize>, Option<f64>) {
    match level {
        Level::Concurrency(n) => (Some(n), None),
        Level::RequestRate(r) => (None, Some(r)),
    }
}

fn level(l: &LevelResult) -> LevelJson<'_> {
    let (concurrency, request_rate_per_s) = level_value(l.level);
    let s = &l.server;
    let c = &l.client;
    LevelJson {
        concurrency,
        request_rate_per_s,
        stable: l.stable,
        trials: l.trials,
        window_s: r6(l.window_s),
        requests: l.requests,
        features: l.features,
        throughput: Throughput {
            requests_per_s: r6(l.requests_per_s),
            features_per_s: r6(l.features_per_s),
        },
        latency_ms: LatencyMs {
            p50: ms(l.latency.p50_us),
            p90: ms(l.latency.p90_us),
            p95: ms(l.latency.p95_us),
            p99: ms(l.latency.p99_us),
            avg: ms(l.latency.avg_us),
            max: ms(l.latency.max_us),
        },
        client_ms: ClientMs {
            send: ms(c.send_us),
            recv: ms(c.recv_us),
            response_wait: ms(c.response_wait_us),
            network: l.server_reported.then(|| ms(c.network_us)),
        },
        server_ms: l.server_reported.then(|| ServerMs {
            request: ms(s.request_us),
            queue: ms(s.queue_us),
            compute_input: ms(s.compute_input_us),
            compute_infer: ms(s.compute_infer_us),
            compute_output: ms(s.compute_output_us),
            other: ms(s.other_us),
            compute_per_execution: ms(s.compute_per_execution_us),
        }),
        server: l.server_reported.then(|| Server {
            requests: s.requests,
            inferences: s.inferences,
            executions: s.executions,
            busy_fraction: r6(l.busy_fraction()),
        }),
        steps: l
            .steps
            .iter()
            .map(|step| {
                let v = &step.server;
                Step {
                    model: &step.model,
                    requests: v.requests,
                    inferences: v.inferences,
                    executions: v.executions,
                    request_ms: ms(v.request_us),
                    queue_ms: ms(v.queue_us),
                    compute_input_ms: ms(v.compute_input_us),
                    compute_infer_ms: ms(v.compute_infer_us),
                    compute_output_ms: ms(v.compute_output_us),
                }
            })
            .collect(),
        client_cpu: ClientCpu {
            cpu_s: r6(l.client_cpu_s),
            fraction_of_all_cpus: r6(l.client_cpu_fraction),
        },
        sent_per_s: r6(l.sent_per_s),
        send_delay_ms: ms(l.send_delay_us),
        budget: l.budget.map(|b| LevelBudgetJson {
            latency_ms: ms(b.latency_us),
            within: b.within,
        }),
        goodput: l.budget.map(|b| Goodput {
            share: r6(b.goodput_share),
            per_s: r6(b.goodput_per_s),
        }),
        metrics: l.metrics.as_ref().map(metrics),
        warnings: &l.warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;
    use crate::perf::Distribution;
    use serde_json::Value;

    fn validate(v: &Value) {
        let schema: Value =
            serde_json::from_str(include_str!("../../../schema/perf.schema.json")).unwrap();
        let validator = jsonschema::validator_for(&schema).expect("valid schema");
        let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
    }

    /// What the structs produce is what the schema describes, for both load modes and
    /// both windows.
    #[test]
    fn documents_follow_the_schema() {
        let mut r = sample::report();
        validate(&serde_json::to_value(render(&r)).unwrap());
        r.load = Load::RequestRate {
            rates: vec![12.5],
            distribution: Distribution::Poisson,
            seed: 7,
        };
        r.window = Window::Time(std::time::Duration::from_millis(1500));
        r.levels = vec![sample::level(Level::RequestRate(12.5), 25.0, 4.0, 6.0)];
        let v = serde_json::to_value(render(&r)).unwrap();
        assert_eq!(v["seed"], 7);
        assert_eq!(v["measurement"]["interval_ms"], 1500);
        assert_eq!(v["levels"][0]["request_rate_per_s"], 12.5);
        validate(&v);
    }

    /// A budget: every level says how it did, the top names the largest load within.
    #[test]
    fn a_budget_gives_goodput_and_the_best_level() {
        let r = sample::with_budget();
        let v = serde_json::to_value(render(&r)).unwrap();
        validate(&v);
        assert_eq!(v["latency_budget"]["threshold_ms"], 8.0);
        assert_eq!(v["latency_budget"]["search"], "binary");
        assert_eq!(v["levels"][0]["goodput"]["share"], 1.0);
        assert_eq!(v["levels"][1]["budget"]["within"], false);
        assert_eq!(v["levels"][1]["goodput"]["per_s"], 40.0);
        assert_eq!(v["within_budget"]["concurrency"], 1);
        assert_eq!(v["within_budget"]["latency_ms"], 7.5);
        let plain = serde_json::to_value(render(&sample::report())).unwrap();
        assert!(plain["within_budget"].is_null() && plain["latency_budget"].is_null());
        assert!(plain["levels"][0]["goodput"].is_null());
    }

    #[test]
    fn metrics_follow_the_schema_and_missing_ones_are_null() {
        let v = serde_json::to_value(render(&sample::with_metrics())).unwrap();
        validate(&v);
        assert_eq!(v["metrics"]["interval_ms"], 1000);
        let m = &v["levels"][0]["metrics"];
        assert_eq!(m["cpu_utilization"], 0.35);
        assert_eq!(m["gpus"][0]["power_w"], 212.5);
        assert_eq!(m["gpus"][0]["utilization"], 0.62);
        assert_eq!(m["inference"]["requests"], 160.0);
        assert_eq!(m["inference"]["queue_ms"], 0.1);
        assert_eq!(m["endpoints"][0]["error"], Value::Null);
        let mut r = sample::with_metrics();
        for l in &mut r.levels {
            let m = l.metrics.as_mut().unwrap();
            m.gpus.clear();
            m.cpu_utilization = None;
            m.endpoints[0].error = Some("no answer within 1000 ms".into());
        }
        r.metrics_warnings = super::super::metrics_warnings(&r.levels);
        let v = serde_json::to_value(render(&r)).unwrap();
        validate(&v);
        assert_eq!(v["levels"][0]["metrics"]["cpu_utilization"], Value::Null);
        assert_eq!(v["levels"][0]["metrics"]["gpus"], serde_json::json!([]));
        // The endpoint's trouble is one warning, not one per level.
        let warnings: Vec<&Value> = v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w.as_str().unwrap().starts_with("metrics at"))
            .collect();
        assert_eq!(warnings.len(), 1, "{v:#}");
        let plain = serde_json::to_value(render(&sample::report())).unwrap();
        assert_eq!(plain["metrics"]["not_read"], "--no-metrics");
        assert_eq!(plain["levels"][0]["metrics"], Value::Null);
    }

    #[test]
    fn a_text_models_levels_list_each_step() {
        let v = serde_json::to_value(render(&sample::with_steps())).unwrap();
        validate(&v);
        assert_eq!(v["model"]["takes"], "text");
        let step = &v["levels"][0]["steps"][1];
        assert_eq!(step["model"], "tiny-bert-nobatch");
        assert_eq!(step["requests"], 150);
        assert_eq!(step["executions"], 150);
        assert_eq!(step["queue_ms"], 0.08);
        assert_eq!(step["compute_infer_ms"], 3.0);
        assert_eq!(step["compute_output_ms"], 0.005);
        let plain = serde_json::to_value(render(&sample::report())).unwrap();
        assert_eq!(plain["model"]["takes"], "tokens");
        assert_eq!(plain["levels"][0]["steps"], serde_json::json!([]));
    }

    #[test]
    fn levels_carry_every_part_of_the_latency() {
        let v = serde_json::to_value(render(&sample::report())).unwrap();
        assert_eq!(v["schema"], 1);
        assert_eq!(v["model"]["protocol"], "grpc");
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
