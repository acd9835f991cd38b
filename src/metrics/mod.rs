//! A server's Prometheus metrics during a run (Triton's `/metrics`): what `perf`
//! reports per level and `eval` over its run.
//!
//! Contract:
//! - A page is read into a [`Reading`]: Triton's CPU gauges (`nv_cpu_utilization`, a
//!   fraction; `nv_cpu_memory_used_bytes`, `nv_cpu_memory_total_bytes`), its GPU gauges
//!   per GPU (`nv_gpu_utilization`, `nv_gpu_memory_used_bytes`,
//!   `nv_gpu_memory_total_bytes`, `nv_gpu_power_usage` in watts; by the `gpu_uuid`
//!   label), and the model's `nv_inference_*` counters (summed over its versions when
//!   no version is asked for; a `ServerCounters`, the type of the statistics
//!   extension's counters too, `counters`). A metric the page does not have is `None` ("not reported
//!   by the server"), never a zero.
//! - Over a span, gauges are the mean of the readings sampled in it (memory also its
//!   maximum); counters are the difference between the readings that open and close
//!   the span.
//! - Several endpoints (the replicas behind a URL, or one per `--url`): each is
//!   reported, then the total: bytes, watts and counters summed, utilizations averaged
//!   over the endpoints that report them, GPUs listed side by side.
//! - A page that cannot be read (down, slow, not Prometheus text) never fails a run:
//!   the endpoint's figures are `None` and its first error is kept for a warning.

pub(crate) mod counters;
pub mod json;
mod options;
pub mod scraper;
pub mod text;

use std::collections::BTreeMap;

use prometheus_parse::{Scrape, Value};

pub(crate) use counters::ServerCounters;
pub(crate) use options::start;
pub use options::MetricsOptions;

/// What a run does about metrics.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// These endpoints, every `interval_ms`.
    Read { urls: Vec<String>, interval_ms: u64 },
    /// Not read, and why (for the report).
    NotRead(String),
}

/// What one page said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub cpu_utilization: Option<f64>,
    pub cpu_memory_used_bytes: Option<f64>,
    pub cpu_memory_total_bytes: Option<f64>,
    /// By GPU UUID.
    pub gpus: BTreeMap<String, GpuReading>,
    /// `None`: the page has no `nv_inference_*` counter of the model.
    pub model: Option<ServerCounters>,
}

/// One GPU's gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GpuReading {
    pub utilization: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub power_w: Option<f64>,
}

/// Which model's counters to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelKey {
    pub name: String,
    /// Empty: every version, summed.
    pub version: String,
}

impl Reading {
    /// Reads a page of Prometheus text. An error says why it is not one (no sample
    /// line at all, or not UTF-8).
    pub(crate) fn parse(page: &[u8], model: &ModelKey) -> Result<Reading, String> {
        let text = std::str::from_utf8(page)
            .map_err(|e| format!("not Prometheus text (not UTF-8: {e})"))?;
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = Scrape::parse(lines).map_err(|e| format!("not Prometheus text ({e})"))?;
        if scrape.samples.is_empty() {
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            let first: String = first.chars().take(60).collect();
            return Err(if first.is_empty() {
                "an empty page (no metric)".to_string()
            } else {
                format!("not Prometheus text (no sample line; it begins {first:?})")
            });
        }
        let mut r = Reading::default();
        let mut counters = ServerCounters::prometheus();
        let mut has_model = false;
        for s in &scrape.samples {
            let v = match s.value {
                Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) if v.is_finite() => v,
                _ => continue,
            };
            let uuid = || s.labels.get("gpu_uuid").unwrap_or("").to_string();
            match s.metric.as_str() {
                "nv_cpu_utilization" => r.cpu_utilization = Some(v),
                "nv_cpu_memory_used_bytes" => r.cpu_memory_used_bytes = Some(v),
                "nv_cpu_memory_total_bytes" => r.cpu_memory_total_bytes = Some(v),
                "nv_gpu_utilization" => r.gpus.entry(uuid()).or_default().utilization = Some(v),
                "nv_gpu_memory_used_bytes" => {
                    r.gpus.entry(uuid()).or_default().memory_used_bytes = Some(v)
                }
                "nv_gpu_memory_total_bytes" => {
                    r.gpus.entry(uuid()).or_default().memory_total_bytes = Some(v)
                }
                "nv_gpu_power_usage" => r.gpus.entry(uuid()).or_default().power_w = Some(v),
                name if name.starts_with("nv_inference_") => {
                    if s.labels.get("model") != Some(model.name.as_str())
                        || (!model.version.is_empty()
                            && s.labels.get("version") != Some(model.version.as_str()))
                    {
                        continue;
                    }
                    has_model |= counters.add_metric(name, v);
                }
                _ => {}
            }
        }
        r.model = has_model.then_some(counters);
        Ok(r)
    }
}

/// One endpoint over a span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointMetrics {
    pub url: String,
    /// Readings the gauges were averaged over.
    pub samples: usize,
    pub cpu_utilization: Option<f64>,
    pub cpu_memory_used_bytes: Option<f64>,
    pub cpu_memory_total_bytes: Option<f64>,
    pub gpus: Vec<GpuMetrics>,
    /// The model's counters over the span; `None` when not reported at both ends.
    pub inference: Option<ServerCounters>,
    /// Why some readings are missing (the first error), if any were.
    pub error: Option<String>,
}

/// One GPU over a span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuMetrics {
    pub uuid: String,
    pub utilization: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub memory_used_max_bytes: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub power_w: Option<f64>,
}

/// Every endpoint over a span, and their total.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpanMetrics {
    pub endpoints: Vec<EndpointMetrics>,
    pub cpu_utilization: Option<f64>,
    pub cpu_memory_used_bytes: Option<f64>,
    pub gpus: Vec<GpuMetrics>,
    pub inference: Option<ServerCounters>,
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0usize);
    for x in xs {
        sum += x;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

fn sum(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    xs.flatten()
        .fold(None, |acc, x| Some(acc.unwrap_or(0.0) + x))
}

impl EndpointMetrics {
    /// `gauges`: the readings sampled in the span; `open`/`close`: the readings that
    /// bound it (for the counters).
    pub(crate) fn over(
        url: &str,
        gauges: &[&Reading],
        open: Option<&Reading>,
        close: Option<&Reading>,
        error: Option<String>,
    ) -> EndpointMetrics {
        let mut uuids: Vec<&String> = gauges.iter().flat_map(|r| r.gpus.keys()).collect();
        uuids.sort();
        uuids.dedup();
        let gpus = uuids
            .into_iter()
            .map(|uuid| {
                let of = |f: fn(&GpuReading) -> Option<f64>| {
                    gauges
                        .iter()
                        .filter_map(move |r| r.gpus.get(uuid).and_then(f))
                };
                GpuMetrics {
                    uuid: uuid.clone(),
                    utilization: mean(of(|g| g.utilization)),
                    memory_used_bytes: mean(of(|g| g.memory_used_bytes)),
                    memory_used_max_bytes: of(|g| g.memory_used_bytes).reduce(f64::max),
                    memory_total_bytes: mean(of(|g| g.memory_total_bytes)),
                    power_w: mean(of(|g| g.power_w)),
                }
            })
            .collect();
        let inference = match (open.and_then(|r| r.model), close.and_then(|r| r.model)) {
            (Some(a), Some(b)) => Some(b.since(&a)),
            _ => None,
        };
        EndpointMetrics {
            url: url.to_string(),
            samples: gauges.len(),
            cpu_utilization: mean(gauges.iter().filter_map(|r| r.cpu_utilization)),
            cpu_memory_used_bytes: mean(gauges.iter().filter_map(|r| r.cpu_memory_used_bytes)),
            cpu_memory_total_bytes: mean(gauges.iter().filter_map(|r| r.cpu_memory_total_bytes)),
            gpus,
            inference,
            error,
        }
    }
}

impl SpanMetrics {
    /// The endpoints and their total (see the module's contract).
    pub(crate) fn total(endpoints: Vec<EndpointMetrics>) -> SpanMetrics {
        let inference = endpoints
            .iter()
            .filter_map(|e| e.inference)
            .reduce(|a, b| a.plus(&b));
        SpanMetrics {
            cpu_utilization: mean(endpoints.iter().filter_map(|e| e.cpu_utilization)),
            cpu_memory_used_bytes: sum(endpoints.iter().map(|e| e.cpu_memory_used_bytes)),
            gpus: endpoints.iter().flat_map(|e| e.gpus.clone()).collect(),
            inference,
            endpoints,
        }
    }

    /// Each endpoint that had trouble: its URL and the warning to give.
    pub fn troubles(&self) -> Vec<(&str, String)> {
        self.endpoints
            .iter()
            .filter_map(|e| {
                let why = e.error.as_ref()?;
                Some((
                    e.url.as_str(),
                    format!("metrics at {}: {why}: not reported", e.url),
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
