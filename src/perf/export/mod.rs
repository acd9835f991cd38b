//! Renderers of a finished sweep, one file per format, each an [`Exporter`]: pure, a
//! [`Report`] in, bytes out (hyperfine's `export/`), so each is unit tested without a
//! server. The text and JSON are also the report's [`Render`](crate::report::Render),
//! as every command's are, and the same bytes.
//!
//! - `html`: `--html`, the page a person looks at (the chart inline, tables, bars).
//! - `csv`: perf_analyzer's `-f` file (same column names, microseconds, rows by
//!   increasing throughput), so existing spreadsheets and scripts read it.
//! - `json`: `--json` (`"schema": 1`, described by `schema/perf.schema.json`).
//! - `svg`: client latency (p50, p99) against throughput.
//! - `text`: the human report.

pub(crate) mod csv;
pub(crate) mod html;
pub mod input_data;
pub(crate) mod json;
pub(crate) mod svg;
pub(crate) mod text;

pub use csv::CsvExporter;
pub use html::HtmlExporter;
pub use json::JsonExporter;
pub use svg::SvgExporter;
pub use text::TextExporter;

use super::{Budget, LevelResult, Load, Window};

/// A format a finished sweep is written in.
pub trait Exporter {
    /// The file's bytes for `report`.
    fn serialize(&self, report: &Report) -> Vec<u8>;
}

/// Everything a sweep reports: its setting and one result per level.
#[derive(Debug, Clone)]
pub struct Report {
    /// The swept model's name.
    pub model: String,
    /// Requested version (empty: the server's choice).
    pub version: String,
    /// The model's platform or backend as the server names it (`onnxruntime_onnx`,
    /// `ensemble`, ...).
    pub platform: String,
    /// The servers the requests went to, their URLs joined by commas.
    pub url: String,
    /// The protocol the server was spoken to in.
    pub protocol: crate::backend::Protocol,
    /// The largest batch the server accepts for the model (0: no batch dimension).
    pub max_batch_size: usize,
    /// The server declares the model's batching (else bertqa chose the batch size).
    pub batch_declared: bool,
    /// `batch_size` was set by the caller (not bertqa's default).
    pub batch_size_given: bool,
    /// The SQuAD file the features came from.
    pub data: String,
    /// The model takes text: it tokenizes on the server, and `features` (here and in
    /// each level) count questions.
    pub text: bool,
    /// Distinct features built from the file (cycled during the sweep); questions for
    /// a model that takes text.
    pub features: usize,
    /// Features per request (questions for a model that takes text).
    pub batch_size: usize,
    /// How batches are padded, in words (`fixed 384`, `longest feature, multiple of 8`).
    pub padding: String,
    /// How input tensors reached the server, in words (`through shared memory`,
    /// `in each message`).
    pub inputs: String,
    /// The load as configured: its mode and levels (`levels` holds those measured).
    pub load: Load,
    /// What one measurement window was: a time or a count of answered requests.
    pub window: Window,
    /// The stability tolerance, percent: a level was stable when its last three
    /// windows' throughput and average latency each lay within it of their mean.
    pub stability_percent: f64,
    /// The most windows a level was measured for.
    pub max_trials: usize,
    /// The latency budget and its search (`None`: the sweep had none).
    pub budget: Option<Budget>,
    /// Which metrics endpoints were read, or why none was.
    pub metrics: crate::metrics::Choice,
    /// The first trouble of each metrics endpoint that had one.
    pub metrics_warnings: Vec<String>,
    /// In the order measured (a binary search measures out of order).
    pub levels: Vec<LevelResult>,
}

impl Report {
    /// What a request's rows are: `features` (windows), or `questions` for a model that
    /// takes text.
    pub(crate) fn rows(&self) -> &'static str {
        if self.text {
            "questions"
        } else {
            "features"
        }
    }

    /// The throughput's unit: `infer/s` (perf_analyzer's), or `questions/s`.
    pub(crate) fn rate_unit(&self) -> &'static str {
        if self.text {
            "questions/s"
        } else {
            "infer/s"
        }
    }

    /// The load's levels in words, e.g. `concurrency 1, 2, 4`.
    pub(crate) fn load_words(&self) -> String {
        let values: Vec<String> = self
            .levels
            .iter()
            .map(|l| fmt_num(l.level.value()))
            .collect();
        match &self.load {
            Load::Concurrency(_) => format!("concurrency {}", values.join(", ")),
            Load::RequestRate {
                distribution, seed, ..
            } => format!(
                "request rate {} /s ({} arrivals, seed {seed})",
                values.join(", "),
                distribution.as_str()
            ),
        }
    }

    /// The best level within the latency budget: the largest load that kept it.
    pub(crate) fn within_budget(&self) -> Option<&LevelResult> {
        self.levels
            .iter()
            .filter(|l| l.budget.is_some_and(|b| b.within))
            .max_by(|a, b| a.level.value().total_cmp(&b.level.value()))
    }

    /// Every warning: each level's, then each metrics endpoint's first trouble (once,
    /// not once per level).
    pub fn warnings(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .levels
            .iter()
            .flat_map(|l| l.warnings.iter().map(String::as_str))
            .collect();
        out.extend(self.metrics_warnings.iter().map(String::as_str));
        out
    }

    /// The budget in words: `pP ≤ T ms`.
    pub(crate) fn budget_words(&self) -> Option<String> {
        self.budget.map(|b| {
            format!(
                "p{} ≤ {} ms",
                fmt_num(b.percentile),
                fmt_num(b.threshold_us / 1000.0)
            )
        })
    }

    /// The measurement window in words.
    pub(crate) fn window_words(&self) -> String {
        match self.window {
            Window::Time(d) => format!("windows of {} ms", d.as_millis()),
            Window::Count(n) => format!("windows of {n} requests"),
        }
    }
}

impl crate::report::Render for Report {
    type Json<'a> = json::PerfJson<'a>;

    fn json(&self) -> json::PerfJson<'_> {
        json::render(self)
    }

    fn text(&self, _verbose: bool) -> String {
        text::render(self)
    }
}

/// The first trouble of each metrics endpoint over `levels`.
pub fn metrics_warnings(levels: &[LevelResult]) -> Vec<String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for m in levels.iter().filter_map(|l| l.metrics.as_ref()) {
        for (url, warning) in m.troubles() {
            if !seen.contains(&url) {
                seen.push(url);
                out.push(warning);
            }
        }
    }
    out
}

/// A number without a useless fraction (`4`, `12.5`).
pub(crate) fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

#[cfg(test)]
pub(crate) mod sample {
    //! A fixed two-level report for the renderers' tests.
    use std::time::Duration;

    use super::super::{ClientBreakdown, Latency, Level, LevelResult, ServerBreakdown};
    use super::*;

    pub(crate) fn level(level: Level, infer_per_s: f64, p50_ms: f64, p99_ms: f64) -> LevelResult {
        LevelResult {
            level,
            stable: true,
            trials: 3,
            window_features_per_s: vec![infer_per_s; 3],
            window_s: 1.5,
            requests: 150,
            features: 300,
            requests_per_s: infer_per_s / 2.0,
            features_per_s: infer_per_s,
            latency: Latency {
                p50_us: p50_ms * 1000.0,
                p90_us: p50_ms * 1200.0,
                p95_us: p50_ms * 1300.0,
                p99_us: p99_ms * 1000.0,
                avg_us: p50_ms * 1050.0,
                max_us: p99_ms * 1100.0,
            },
            client: ClientBreakdown {
                send_us: 40.4,
                recv_us: 20.6,
                response_wait_us: p50_ms * 1050.0 - 61.0,
                network_us: 300.0,
            },
            server: ServerBreakdown {
                requests: 150,
                inferences: 300,
                executions: 100,
                request_us: p50_ms * 1050.0 - 361.0,
                queue_us: 100.0,
                compute_input_us: 10.0,
                compute_infer_us: p50_ms * 1050.0 - 500.0,
                compute_output_us: 9.0,
                other_us: 20.0,
                compute_per_execution_us: 900.0,
                busy_us: 90_000.0,
            },
            server_reported: true,
            steps: Vec::new(),
            client_cpu_s: 0.3,
            client_cpu_fraction: 0.1,
            sent_per_s: infer_per_s / 2.0,
            send_delay_us: 0.0,
            budget: None,
            metrics: None,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn report() -> Report {
        let mut second = level(Level::Concurrency(2), 180.0, 9.5, 14.25);
        second.stable = false;
        second.trials = 10;
        second.warnings = vec!["concurrency 2: not stable".into()];
        Report {
            model: "tiny-bert".into(),
            version: String::new(),
            platform: "python".into(),
            url: "127.0.0.1:8001".into(),
            protocol: crate::backend::Protocol::Grpc,
            max_batch_size: 8,
            batch_declared: true,
            batch_size_given: false,
            data: "data/sample.json".into(),
            text: false,
            features: 52,
            batch_size: 2,
            padding: "fixed 384".into(),
            inputs: "in each message".into(),
            load: Load::Concurrency(vec![1, 2]),
            window: Window::Count(50),
            stability_percent: 10.0,
            max_trials: 10,
            budget: None,
            metrics: crate::metrics::Choice::NotRead("--no-metrics".into()),
            metrics_warnings: Vec::new(),
            levels: vec![level(Level::Concurrency(1), 200.0, 5.0, 7.5), second],
        }
    }

    /// [`report`] under a p99 budget between its two levels' p99, searched: the first
    /// level within, the second over.
    pub(crate) fn with_budget() -> Report {
        let mut r = report();
        let b = Budget {
            threshold_us: 8000.0,
            percentile: 99.0,
            binary_search: true,
        };
        r.budget = Some(b);
        for l in &mut r.levels {
            let within = l.latency.p99_us <= b.threshold_us;
            l.budget = Some(super::super::LevelBudget {
                latency_us: l.latency.p99_us,
                within,
                good: if within { l.requests } else { 60 },
                goodput_share: if within { 1.0 } else { 0.4 },
                goodput_per_s: if within { 100.0 } else { 40.0 },
            });
        }
        r
    }

    /// [`report`] with metrics read from one endpoint with one GPU.
    pub(crate) fn with_metrics() -> Report {
        use crate::metrics::{EndpointMetrics, GpuMetrics, ServerCounters, SpanMetrics};
        let mut r = report();
        r.metrics = crate::metrics::Choice::Read {
            urls: vec!["http://127.0.0.1:8002/metrics".into()],
            interval_ms: 1000,
        };
        for l in &mut r.levels {
            let endpoint = EndpointMetrics {
                url: "http://127.0.0.1:8002/metrics".into(),
                samples: 3,
                cpu_utilization: Some(0.35),
                cpu_memory_used_bytes: Some(61e9),
                cpu_memory_total_bytes: Some(540e9),
                gpus: vec![GpuMetrics {
                    uuid: "GPU-a".into(),
                    utilization: Some(0.62),
                    memory_used_bytes: Some(1.5e9),
                    memory_used_max_bytes: Some(2e9),
                    memory_total_bytes: Some(8e10),
                    power_w: Some(212.5),
                }],
                inference: Some(ServerCounters {
                    requests: 160,
                    failures: Some(0),
                    inferences: 320,
                    executions: 100,
                    request_ns: 160 * 4_000_000,
                    queue_ns: 160 * 100_000,
                    compute_input_ns: 160 * 10_000,
                    compute_infer_ns: 160 * 3_800_000,
                    compute_output_ns: 160 * 9_000,
                    busy_ns: None,
                }),
                error: None,
            };
            l.metrics = Some(SpanMetrics::total(vec![endpoint]));
        }
        r.metrics_warnings = metrics_warnings(&r.levels);
        r
    }

    /// [`report`] of a text model, an ensemble of two steps (one question per request).
    pub(crate) fn with_steps() -> Report {
        use super::super::StepResult;
        let mut r = report();
        r.model = "qa-text-logits".into();
        r.platform = "ensemble".into();
        r.max_batch_size = 0;
        r.text = true;
        r.features = 26;
        r.batch_size = 1;
        r.padding = "none (the server tokenizes)".into();
        r.inputs = "through shared memory, outputs in each response".into();
        for l in &mut r.levels {
            l.features = l.requests;
            l.features_per_s = l.requests_per_s;
            let step = |model: &str, queue_us: f64, infer_us: f64| StepResult {
                model: model.into(),
                server: ServerBreakdown {
                    requests: 150,
                    inferences: 150,
                    executions: 150,
                    request_us: queue_us + infer_us + 30.0,
                    queue_us,
                    compute_input_us: 10.0,
                    compute_infer_us: infer_us,
                    compute_output_us: 5.0,
                    other_us: 15.0,
                    compute_per_execution_us: infer_us + 15.0,
                    busy_us: 150.0 * (infer_us + 15.0),
                },
            };
            l.steps = vec![
                step("qa-text-tokenizer", 50.0, 1200.0),
                step("tiny-bert-nobatch", 80.0, 3000.0),
            ];
        }
        r
    }

    #[allow(dead_code)]
    pub(crate) fn timed() -> Window {
        Window::Time(Duration::from_millis(500))
    }
}
