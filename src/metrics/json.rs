//! The JSON of a span's metrics, in `perf --json` (per level) and eval's
//! `metrics.json` (`server_metrics`): fractions 0-1, bytes, watts, and per-request
//! times in milliseconds.

use serde::Serialize;

use super::counters::us;
use super::{GpuMetrics, ServerCounters, SpanMetrics};

/// Rounds for the reports: microsecond-level time in milliseconds keeps 6 decimals.
pub(crate) fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// Milliseconds from microseconds, as the reports write them.
pub(crate) fn ms(us: f64) -> f64 {
    r6(us / 1000.0)
}

/// The server's metrics over a span: the total, then each endpoint. A metric the
/// server does not export is `null`.
#[derive(Debug, Serialize)]
pub struct MetricsJson<'a> {
    /// Mean over the endpoints, a fraction (0-1).
    pub cpu_utilization: Option<f64>,
    /// Summed over the endpoints.
    pub cpu_memory_bytes: Option<f64>,
    pub gpus: Vec<GpuJson<'a>>,
    pub inference: Option<InferenceJson>,
    pub endpoints: Vec<EndpointJson<'a>>,
}

#[derive(Debug, Serialize)]
pub struct EndpointJson<'a> {
    pub url: &'a str,
    pub samples: usize,
    pub cpu_utilization: Option<f64>,
    pub cpu_memory_bytes: Option<f64>,
    pub cpu_memory_total_bytes: Option<f64>,
    pub gpus: Vec<GpuJson<'a>>,
    pub inference: Option<InferenceJson>,
    pub error: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct GpuJson<'a> {
    pub uuid: &'a str,
    pub utilization: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub memory_used_max_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub power_w: Option<f64>,
}

/// The `nv_inference_*` counters over the span, times per successful request.
#[derive(Debug, Serialize)]
pub struct InferenceJson {
    pub requests: f64,
    /// Always a number from Prometheus (the only source rendered here).
    pub failures: Option<f64>,
    pub inferences: f64,
    pub executions: f64,
    pub request_ms: f64,
    pub queue_ms: f64,
    pub compute_input_ms: f64,
    pub compute_infer_ms: f64,
    pub compute_output_ms: f64,
}

fn inference(c: &ServerCounters) -> InferenceJson {
    let per = |ns: u64| {
        if c.requests > 0 {
            ms(us(ns) / c.requests as f64)
        } else {
            0.0
        }
    };
    InferenceJson {
        requests: c.requests as f64,
        failures: c.failures.map(|f| f as f64),
        inferences: c.inferences as f64,
        executions: c.executions as f64,
        request_ms: per(c.request_ns),
        queue_ms: per(c.queue_ns),
        compute_input_ms: per(c.compute_input_ns),
        compute_infer_ms: per(c.compute_infer_ns),
        compute_output_ms: per(c.compute_output_ns),
    }
}

fn gpu(g: &GpuMetrics) -> GpuJson<'_> {
    let r = |x: Option<f64>| x.map(r6);
    GpuJson {
        uuid: &g.uuid,
        utilization: r(g.utilization),
        memory_used_bytes: g.memory_used_bytes.map(f64::round),
        memory_used_max_bytes: g.memory_used_max_bytes.map(f64::round),
        memory_total_bytes: g.memory_total_bytes.map(f64::round),
        power_w: r(g.power_w),
    }
}

pub fn metrics(m: &SpanMetrics) -> MetricsJson<'_> {
    MetricsJson {
        cpu_utilization: m.cpu_utilization.map(r6),
        cpu_memory_bytes: m.cpu_memory_used_bytes.map(f64::round),
        gpus: m.gpus.iter().map(gpu).collect(),
        inference: m.inference.as_ref().map(inference),
        endpoints: m
            .endpoints
            .iter()
            .map(|e| EndpointJson {
                url: &e.url,
                samples: e.samples,
                cpu_utilization: e.cpu_utilization.map(r6),
                cpu_memory_bytes: e.cpu_memory_used_bytes.map(f64::round),
                cpu_memory_total_bytes: e.cpu_memory_total_bytes.map(f64::round),
                gpus: e.gpus.iter().map(gpu).collect(),
                inference: e.inference.as_ref().map(inference),
                error: e.error.as_deref(),
            })
            .collect(),
    }
}
