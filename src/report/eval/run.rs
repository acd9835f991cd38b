//! A finished evaluation as its report tells it, and the document made of it
//! ([`EvalRun::json`]): `bertqa eval`'s run, or a client's
//! ([`crate::Evaluation::report`]), so that both give the same keys from the same code.

use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::backend::pool::EndpointReport;
use crate::backend::RetryStats;
use crate::evaluate::Scores;
use crate::pipeline::{InferReport, Phases};

/// How many question ids the report lists where it counts them.
pub const FIRST_IDS: usize = 5;

/// Everything a finished evaluation reports.
#[derive(Debug)]
pub struct EvalRun {
    /// The data, as the report names it (the `--data` files, or how a program gave it).
    pub data: String,
    /// Its format (MRQA's scoring rules for MRQA files).
    pub format: crate::data::Format,
    /// The server endpoints, comma-separated (`None` without a server).
    pub url: Option<String>,
    /// The model and its binding (`None` without a server).
    pub binding: Option<crate::backend::Model>,
    /// Whether SQuAD 2.0's rules applied.
    pub version_2: bool,
    /// The decoding rules of `postprocess`: `nvidia`, `hf` or `run-qa`.
    pub postprocess: &'static str,
    /// Features per request at most (0 when decoded from saved logits).
    pub batch_size: usize,
    /// The batch size was given (else the model's or bertqa's default).
    pub batch_size_given: bool,
    /// Requests kept in flight at once at most.
    pub concurrency: usize,
    /// The protocol the server was spoken to in (`None` without a server).
    pub protocol: Option<Protocol>,
    /// Questions evaluated.
    pub questions: usize,
    /// Features (windows of a context with its question) the answers were decoded from.
    pub features: u64,
    /// Ids of the questions that produced no feature, in the data's order.
    pub featureless: Vec<String>,
    /// The official scores, and each question's.
    pub scores: Scores,
    /// What the requests did: their count, latencies, padding, how tensors travelled
    /// (`None` without a server).
    pub infer: Option<InferReport>,
    /// Time spent in each stage.
    pub phases: Phases,
    /// From the first feature built to the last question decoded, warm-up excluded.
    pub wall: Duration,
    /// The gates asked for, and how the run went through each.
    pub gates: Vec<GateResult>,
    /// The directory the run's files were written to.
    pub output_dir: std::path::PathBuf,
    /// The names of the files written in `output_dir`.
    pub files: Vec<String>,
    /// Retries and failures by code (`None` without a server).
    pub retries: Option<RetryStats>,
    /// Each endpoint's figures (empty without a server).
    pub endpoints: Vec<EndpointReport>,
    /// NaN or infinite logits (decoded as −∞).
    pub non_finite: crate::decode::non_finite::NonFinite,
    /// The run's fingerprint (data digest, settings, model): what `merge` checks; empty
    /// for a run that keeps no journal.
    pub fingerprint: Fingerprint,
    /// The server's metrics over the run, when they were read.
    pub server_metrics: Option<(crate::metrics::Choice, crate::metrics::SpanMetrics)>,
    /// Why a SQuAD 2.0 run has no null odds.
    pub no_null_odds: Option<String>,
    /// Every slice of the questions (docs/algorithm.md, "Slices").
    pub slices: Vec<crate::slices::Slice>,
    /// The weak slices (`dimension:slice`).
    pub weak_slices: Vec<String>,
    /// The dimensions not computed, each with why.
    pub slices_not_computed: BTreeMap<String, String>,
    /// How the slices' intervals were drawn; their tests are read at 1 − confidence.
    pub statistics: crate::compare::Statistics,
}

/// One gate and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct GateResult {
    /// Which gate.
    pub gate: super::super::gates::Gate,
    /// The bound asked for: percent (0–100) for exact match and F1, milliseconds for
    /// p99 latency.
    pub threshold: f64,
    /// What the run measured, in the bound's unit.
    pub value: f64,
    /// Whether the measure met the bound.
    pub passed: bool,
}

impl GateResult {
    /// The gate as a failure names it, by its flag: `--min-f1 90: measured 85.200`.
    pub fn describe(&self) -> String {
        format!(
            "{} {}: measured {:.3}",
            self.gate.flag(),
            self.threshold,
            self.value
        )
    }
}

/// Why a SQuAD 2.0 run of `model` has no null odds: an answer-contract model without a
/// no-answer output.
pub fn no_null_odds_reason(model: &str) -> String {
    format!(
        "model {model:?} has no no-answer output, so no null_odds.json; every no-answer \
         probability is 0 and there are no best thresholds (as evaluate-v2.0.py scores \
         without a na-prob file)"
    )
}

/// Per second over `wall` (0 for no time).
pub fn rate(n: f64, wall: Duration) -> f64 {
    let s = wall.as_secs_f64();
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

/// Rounds for the report (JSON keeps 6 decimals: microsecond-level time).
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

impl EvalRun {
    /// The `--json` document (also written as metrics.json); described by
    /// `schema/eval.schema.json`.
    pub fn json(&self) -> EvalJson {
        let r = self;
        let latency_ms = match &r.infer {
            Some(i) if i.requests > 0 => Some(LatencyMs {
                p50: r6(i.latency_ms(0.50)),
                p90: r6(i.latency_ms(0.90)),
                p95: r6(i.latency_ms(0.95)),
                p99: r6(i.latency_ms(0.99)),
                max: r6(i.latency_us.max() as f64 / 1000.0),
                mean: r6(i.latency_us.mean() / 1000.0),
            }),
            _ => None,
        };
        // A run with a server has both; one from saved logits neither.
        let model = r
            .binding
            .as_ref()
            .zip(r.protocol)
            .map(|(b, protocol)| Model {
                name: b.name().to_string(),
                version: b.version().to_string(),
                url: r.url.clone(),
                protocol,
                platform: b.platform().to_string(),
                max_batch_size: b.max_batch_size(),
                binding: b.to_json(),
            });
        let default_retries = RetryStats::default();
        let retries = r.retries.as_ref().unwrap_or(&default_retries);
        EvalJson {
            schema: 1,
            data: r.data.clone(),
            version_2_with_negative: r.version_2,
            postprocess: r.postprocess.into(),
            metrics: r.scores.metrics.clone(),
            questions: r.questions,
            features: r.features,
            requests: r.infer.as_ref().map_or(0, |i| i.requests),
            batch_size: r.batch_size,
            concurrency: r.concurrency,
            wall_s: r6(r.wall.as_secs_f64()),
            throughput: Throughput {
                features_per_s: r6(rate(r.features as f64, r.wall)),
                questions_per_s: r6(rate(r.questions as f64, r.wall)),
            },
            latency_ms,
            phases_s: PhasesS {
                features: r6(r.phases.features_s),
                inference: r6(r.phases.inference_s),
                decode: r6(r.phases.decode_s),
            },
            client: r.infer.as_ref().map(|i| Client {
                starved_s: r6(i.starved.as_secs_f64()),
                decode_lag_s: r6(i.decode_lag.as_secs_f64()),
                limited_s: r6(i.client_limited().as_secs_f64()),
                cpu_limited: i.client_bound_warning().is_some(),
            }),
            padding: r.infer.as_ref().map(|i| Padding::from(&i.padding)),
            shared_memory: r.infer.as_ref().map(|i| SharedMemory {
                used: i.shared_memory.used,
                outputs: i.shared_memory.outputs,
                note: i.shared_memory.note.clone(),
            }),
            retries: Retries {
                total: retries.total_retries(),
                by_code: retries.retries.clone(),
                failed_requests: retries.total_failures(),
                failures_by_code: retries.failures.clone(),
            },
            non_finite_logits: NonFiniteLogits {
                values: r.non_finite.values,
                features: r.non_finite.features,
            },
            endpoints: r.endpoints.iter().map(|e| endpoint(e, r.wall)).collect(),
            missing_predictions: CountedIds::first(
                &r.scores.missing,
                r.scores.missing.len(),
                FIRST_IDS,
            ),
            featureless_questions: CountedIds::first(
                &r.featureless,
                r.featureless.len(),
                FIRST_IDS,
            ),
            model,
            gates: r
                .gates
                .iter()
                .map(|g| Gate {
                    flag: g.gate.flag().into(),
                    threshold: g.threshold,
                    value: r6(g.value),
                    passed: g.passed,
                })
                .collect(),
            output_dir: r.output_dir.display().to_string(),
            files: r.files.clone(),
            run: r.fingerprint.clone(),
            server_metrics: r.server_metrics.as_ref().map(server_metrics),
            no_null_odds: r.no_null_odds.clone(),
            statistics: SliceStatistics {
                bootstrap: r.statistics.rounds,
                seed: r.statistics.seed,
                confidence: r.statistics.confidence,
            },
            slices: r.slices.iter().map(slice_json).collect(),
            weak_slices: r.weak_slices.clone(),
            slices_not_computed: r.slices_not_computed.clone(),
        }
    }
}

/// A slice as the report writes it: rates and p-values as computed, scores rounded as
/// the official metrics are not (6 decimals, as every figure of the report).
fn slice_json(s: &crate::slices::Slice) -> crate::slices::Slice {
    crate::slices::Slice {
        exact: r6(s.exact),
        f1: r6(s.f1),
        exact_ci: s.exact_ci.map(r6),
        f1_ci: s.f1_ci.map(r6),
        error_rate: r6(s.error_rate),
        rest_error_rate: r6(s.rest_error_rate),
        ..s.clone()
    }
}

/// `server_metrics`: the endpoints read, then the figures over the run.
fn server_metrics((choice, m): &(crate::metrics::Choice, crate::metrics::SpanMetrics)) -> Value {
    /// The endpoints read and how often, ahead of the figures.
    #[derive(serde::Serialize)]
    struct Read {
        urls: Vec<String>,
        interval_ms: Option<u64>,
    }
    let (urls, interval_ms) = match choice {
        crate::metrics::Choice::Read { urls, interval_ms } => (urls.clone(), Some(*interval_ms)),
        crate::metrics::Choice::NotRead(_) => (Vec::new(), None),
    };
    let mut v = serde_json::to_value(Read { urls, interval_ms }).unwrap_or(Value::Null);
    if let (Value::Object(out), Ok(Value::Object(figures))) = (
        &mut v,
        serde_json::to_value(crate::metrics::json::metrics(m)),
    ) {
        out.extend(figures);
    }
    v
}

/// One endpoint of metrics.json's `endpoints`.
fn endpoint(e: &EndpointReport, wall: Duration) -> Endpoint {
    let q = |x: f64| {
        if e.latency_us.is_empty() {
            0.0
        } else {
            r6(e.latency_us.value_at_quantile(x) as f64 / 1000.0)
        }
    };
    Endpoint {
        url: e.url.clone(),
        connections: e.connections,
        transport: e.transport.as_str().into(),
        unary_connections: e.unary_connections,
        requests: e.requests,
        features: e.features,
        features_per_s: r6(rate(e.features as f64, wall)),
        latency_ms: EndpointLatencyMs {
            p50: q(0.5),
            p99: q(0.99),
            mean: r6(if e.latency_us.is_empty() {
                0.0
            } else {
                e.latency_us.mean() / 1000.0
            }),
        },
        errors: Errors {
            total: e.errors.values().sum::<u64>(),
            by_code: e.errors.clone(),
        },
        taken_out: e.taken_out,
        healthy_at_end: e.healthy,
    }
}
