//! `bertqa eval --json`, also `metrics.json` (`schema/eval.schema.json`). Times in
//! seconds (`_s`) or milliseconds (`_ms`), rounded to 6 decimals; floats that are not
//! finite are written as `null`. `merge` reads the shards' files back into [`EvalJson`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod run;
mod text;

pub use run::{no_null_odds_reason, rate, EvalRun, GateResult, FIRST_IDS};
pub(crate) use text::setting_rows;
pub use text::{inputs_line, requests_line};

use super::CountedIds;
use crate::backend::Protocol;
use crate::evaluate::Metrics;
use crate::journal::Fingerprint;
pub use crate::slices::Slice;

/// An evaluation's document: `eval`'s JSON report, also its `metrics.json`
/// (`schema/eval.schema.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct EvalJson {
    /// Always 1.
    pub schema: u32,
    /// The data evaluated, as the report names it (its files, or a program's name for it).
    pub data: String,
    /// Whether SQuAD 2.0's rules applied (questions may have no answer).
    pub version_2_with_negative: bool,
    /// The decoding rules of `postprocess`: `nvidia`, `hf` or `run-qa`.
    pub postprocess: String,
    /// The official scores under the official script's keys, percentages 0–100.
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    /// Questions evaluated.
    pub questions: usize,
    /// Features (windows of a context with its question) the answers were decoded from.
    pub features: u64,
    /// Inference requests answered (0 when decoded from saved logits).
    pub requests: u64,
    /// Features per request at most (0 when decoded from saved logits).
    pub batch_size: usize,
    /// Requests kept in flight at once at most.
    pub concurrency: usize,
    /// Seconds from the first feature built to the last question decoded, warm-up
    /// excluded.
    pub wall_s: f64,
    /// Features and questions per second over `wall_s`.
    pub throughput: Throughput,
    /// `None` without requests.
    pub latency_ms: Option<LatencyMs>,
    /// Seconds in each stage.
    pub phases_s: PhasesS,
    /// `None` without a server, as the next two.
    pub client: Option<Client>,
    /// How requests were padded.
    pub padding: Option<Padding>,
    /// How tensors travelled (shared memory or the messages).
    pub shared_memory: Option<SharedMemory>,
    /// Retried attempts and requests that failed for good (all 0 without a server).
    pub retries: Retries,
    /// NaN or infinite logits the model returned (decoded as −∞).
    pub non_finite_logits: NonFiniteLogits,
    /// Each server endpoint's figures, in the order given (empty without a server).
    pub endpoints: Vec<Endpoint>,
    /// Questions without a prediction (each scores 0).
    pub missing_predictions: CountedIds,
    /// Questions that produced no feature, so no answer could be given.
    pub featureless_questions: CountedIds,
    /// The model the run used (`None` when decoded from saved logits).
    pub model: Option<Model>,
    /// The gates asked for, and how the run went through each.
    pub gates: Vec<Gate>,
    /// The directory the run's files were written to.
    pub output_dir: String,
    /// The names of the files written in `output_dir`.
    pub files: Vec<String>,
    /// The run's fingerprint: what `merge` checks.
    #[serde(with = "super::json::fingerprint")]
    pub run: Fingerprint,
    /// The server's metrics over the run (`--metrics-url`: `urls`, `interval_ms`, then
    /// the figures of `crate::metrics::json`); absent when none were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<serde_json::Value>,
    /// Why a SQuAD 2.0 run has no null odds (its model gives no no-answer output): no
    /// null_odds.json, every na-prob 0, no best thresholds; absent when it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_null_odds: Option<String>,
    /// How the slices' intervals were drawn (`--bootstrap`, `--seed`, `--confidence`);
    /// their tests are read at 1 − confidence.
    #[serde(default)]
    pub statistics: SliceStatistics,
    /// Every slice of the questions, by dimension then name (docs/algorithm.md,
    /// "Slices").
    #[serde(default)]
    pub slices: Vec<Slice>,
    /// The weak slices: Holm-adjusted p below 1 − confidence and an error rate above
    /// the rest's.
    #[serde(default)]
    pub weak_slices: Vec<String>,
    /// The dimensions the run could not give, each with why.
    #[serde(default)]
    pub slices_not_computed: BTreeMap<String, String>,
}

/// How a run's slices' intervals were drawn: `statistics` of eval's report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SliceStatistics {
    /// Bootstrap resamples of each interval.
    pub bootstrap: usize,
    /// The generator's seed.
    pub seed: u64,
    /// The intervals' coverage, in (0, 1).
    pub confidence: f64,
}

impl Default for SliceStatistics {
    fn default() -> Self {
        let s = crate::compare::Statistics::default();
        SliceStatistics {
            bootstrap: s.rounds,
            seed: s.seed,
            confidence: s.confidence,
        }
    }
}

/// Rates over the run's wall time (`wall_s`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Throughput {
    /// Features per second.
    pub features_per_s: f64,
    /// Questions per second.
    pub questions_per_s: f64,
}

/// Request latency in milliseconds, each request timed from its send to its response.
#[derive(Debug, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest request.
    pub max: f64,
    /// Mean over the requests.
    pub mean: f64,
}

/// Seconds spent in each stage (they overlap, so they do not add up to `wall_s`).
#[derive(Debug, Serialize, Deserialize)]
pub struct PhasesS {
    /// Building features (tokenizing, cutting windows).
    pub features: f64,
    /// With at least one request in flight.
    pub inference: f64,
    /// Decoding the answers.
    pub decode: f64,
}

/// Where the client's own time went.
#[derive(Debug, Serialize, Deserialize)]
pub struct Client {
    /// Seconds the sender waited for features to be built.
    pub starved_s: f64,
    /// Seconds decoding went on after the last response.
    pub decode_lag_s: f64,
    /// `starved_s` plus `decode_lag_s`: seconds bertqa's own CPU held the run back.
    pub limited_s: f64,
    /// Whether `limited_s` was over a quarter of a wall time of at least half a second
    /// (bertqa's CPU, not the server, was the limit; a warning then).
    pub cpu_limited: bool,
}

/// How batches were padded (also in `compare`'s models).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Padding {
    /// `fixed` (to `seq_len`), `dynamic` (each batch to its longest feature) or
    /// `fixed_after_probe` (a dynamic-length model padded in full because the probe
    /// showed shorter padding would change answers).
    pub mode: String,
    /// The length of fixed-length requests, in tokens (`None` when dynamic).
    pub seq_len: Option<usize>,
    /// Features of the probe request (0: no probe).
    pub probe_features: u64,
    /// Probe features whose top n-best would change under shorter padding.
    pub probe_unsafe_features: u64,
    /// Dynamically padded features whose padding pushed real positions out of the top
    /// n-best (their answers may differ from full padding).
    pub displaced_features: u64,
}

impl From<&crate::pipeline::PaddingReport> for Padding {
    fn from(p: &crate::pipeline::PaddingReport) -> Self {
        Padding {
            mode: p.mode().into(),
            seq_len: p.fixed_len,
            probe_features: p.probe_features,
            probe_unsafe_features: p.probe_unsafe,
            displaced_features: p.displaced,
        }
    }
}

/// How tensors travelled: in a registered system shared memory region or in the
/// messages.
#[derive(Debug, Serialize, Deserialize)]
pub struct SharedMemory {
    /// Requests carried their inputs in a shared memory region, not in the message.
    pub used: bool,
    /// The server wrote the outputs there too, instead of returning them in the
    /// response (false in files written before it existed).
    pub outputs: bool,
    /// Why shared memory was not used, or that the region could not be unregistered;
    /// `None` when there is nothing to say.
    pub note: Option<String>,
}

/// Failed attempts that were retried, and requests that failed for good.
#[derive(Debug, Serialize, Deserialize)]
pub struct Retries {
    /// Attempts retried.
    pub total: u64,
    /// Attempts retried, by status code name (`UNAVAILABLE`, …).
    pub by_code: BTreeMap<String, u64>,
    /// Requests that failed for good (none in a finished run unless later requests
    /// replaced them).
    pub failed_requests: u64,
    /// Requests that failed for good, by status code name.
    pub failures_by_code: BTreeMap<String, u64>,
}

/// NaN or infinite logits the model returned, decoded as −∞.
#[derive(Debug, Serialize, Deserialize)]
pub struct NonFiniteLogits {
    /// Logit values replaced.
    pub values: u64,
    /// Features holding any.
    pub features: u64,
}

/// One server endpoint's figures.
#[derive(Debug, Serialize, Deserialize)]
pub struct Endpoint {
    /// The endpoint's address, as given.
    pub url: String,
    /// Connections opened to it.
    pub connections: usize,
    /// How its requests travelled (`transport`): `stream` (one `ModelStreamInfer`
    /// stream per connection) or `unary` (one `ModelInfer` call each).
    pub transport: String,
    /// Connections whose stream answered a request with an error, so that their later
    /// requests went unary.
    pub unary_connections: usize,
    /// Successful requests.
    pub requests: u64,
    /// Features those requests carried.
    pub features: u64,
    /// Features per second over the run's wall time.
    pub features_per_s: f64,
    /// Latency of its successful requests (all 0 without any).
    pub latency_ms: EndpointLatencyMs,
    /// Its failed attempts.
    pub errors: Errors,
    /// Times it was taken out of the pool after a failure.
    pub taken_out: u64,
    /// Whether it was in the pool at the end.
    pub healthy_at_end: bool,
}

/// An endpoint's request latency in milliseconds.
#[derive(Debug, Serialize, Deserialize)]
pub struct EndpointLatencyMs {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean over its successful requests.
    pub mean: f64,
}

/// An endpoint's failed attempts.
#[derive(Debug, Serialize, Deserialize)]
pub struct Errors {
    /// Failed attempts in all.
    pub total: u64,
    /// Failed attempts by status code name (`UNAVAILABLE`, …).
    pub by_code: BTreeMap<String, u64>,
}

/// The model the run used.
#[derive(Debug, Serialize, Deserialize)]
pub struct Model {
    /// The model's name on the server.
    pub name: String,
    /// The version asked for (`""`: the server's choice).
    pub version: String,
    /// The server endpoints, comma-separated (present whenever there is a model).
    pub url: Option<String>,
    /// `--protocol`: `grpc` or `http`.
    #[serde(with = "super::json::protocol")]
    pub protocol: Protocol,
    /// The model's platform or backend, as the server names it.
    pub platform: String,
    /// The largest batch the server accepts (0: the model has no batch dimension).
    pub max_batch_size: usize,
    /// The tensor binding as `crate::backend::Binding` serializes it.
    pub binding: Value,
}

/// How the run went through one of eval's gates.
#[derive(Debug, Serialize, Deserialize)]
pub struct Gate {
    /// The gate's flag ([`super::gates::Gate::flag`]).
    pub flag: String,
    /// The bound asked for, in the value's unit (`null` in the JSON when not finite).
    #[serde(deserialize_with = "super::json::nan_if_null")]
    pub threshold: f64,
    /// The run's measure: exact match or F1 in percent (0–100), or p99 latency in
    /// milliseconds (`null` in the JSON when not finite).
    #[serde(deserialize_with = "super::json::nan_if_null")]
    pub value: f64,
    /// Whether the run met the bound.
    pub passed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SCHEMA: &str = include_str!("../../../schema/eval.schema.json");

    /// A run without a server (from saved logits).
    fn serverless() -> EvalJson {
        let none = BTreeMap::new();
        let ids = ["q1".to_string()];
        let run = Fingerprint::default()
            .with("data_sha256", "ab")
            .with("model", "null");
        EvalJson {
            schema: 1,
            data: "dev.json".into(),
            version_2_with_negative: false,
            postprocess: "nvidia".into(),
            metrics: Metrics::V1 {
                exact_match: 50.0,
                f1: 60.0,
            },
            questions: 2,
            features: 3,
            requests: 0,
            batch_size: 8,
            concurrency: 4,
            wall_s: 0.5,
            throughput: Throughput {
                features_per_s: 6.0,
                questions_per_s: 4.0,
            },
            latency_ms: None,
            phases_s: PhasesS {
                features: 0.1,
                inference: 0.3,
                decode: 0.1,
            },
            client: None,
            padding: None,
            shared_memory: None,
            retries: Retries {
                total: 0,
                by_code: none.clone(),
                failed_requests: 0,
                failures_by_code: none,
            },
            non_finite_logits: NonFiniteLogits {
                values: 0,
                features: 0,
            },
            endpoints: vec![],
            missing_predictions: CountedIds::first(&ids, 1, 5),
            featureless_questions: CountedIds::first(&[], 0, 5),
            model: None,
            gates: vec![],
            output_dir: "out".into(),
            files: vec!["predictions.json".into()],
            run,
            server_metrics: None,
            no_null_odds: None,
            statistics: SliceStatistics {
                bootstrap: 10_000,
                seed: 0,
                confidence: 0.95,
            },
            slices: vec![Slice {
                slice: "context_windows:3+".into(),
                questions: 2,
                exact: 50.0,
                f1: 60.0,
                exact_ci: [0.0, 100.0],
                f1_ci: [20.0, 100.0],
                error_rate: 0.5,
                rest_error_rate: 0.0,
                p_value: 1.0,
                p_adjusted: 1.0,
            }],
            weak_slices: vec![],
            slices_not_computed: BTreeMap::from([(
                "answerable".to_string(),
                "SQuAD 1.1 data: every question has an answer".to_string(),
            )]),
        }
    }

    /// A run without a server follows the schema.
    #[test]
    fn a_serverless_run_follows_the_schema() {
        let doc = serverless();
        super::super::assert_follows(SCHEMA, &serde_json::to_value(&doc).unwrap());
        writes_as_a_value_and_reads_back(&doc);
    }

    /// A run with a server, an endpoint, a model and a gate follows the schema.
    #[test]
    fn a_run_with_a_server_follows_the_schema() {
        let mut doc = serverless();
        let by_code = BTreeMap::from([("UNAVAILABLE".to_string(), 2u64)]);
        doc.requests = 1;
        doc.latency_ms = Some(LatencyMs {
            p50: 1.0,
            p90: 1.0,
            p95: 1.0,
            p99: 1.0,
            max: 1.0,
            mean: 1.0,
        });
        doc.client = Some(Client {
            starved_s: 0.0,
            decode_lag_s: 0.0,
            limited_s: 0.0,
            cpu_limited: false,
        });
        doc.padding = Some(Padding {
            mode: "fixed".into(),
            seq_len: Some(384),
            probe_features: 16,
            probe_unsafe_features: 1,
            displaced_features: 0,
        });
        doc.shared_memory = Some(SharedMemory {
            used: false,
            outputs: false,
            note: Some("remote server".into()),
        });
        doc.retries.by_code = by_code.clone();
        doc.retries.total = 2;
        doc.endpoints = vec![Endpoint {
            url: "localhost:8001".into(),
            connections: 1,
            transport: "stream".into(),
            unary_connections: 0,
            requests: 1,
            features: 3,
            features_per_s: 6.0,
            latency_ms: EndpointLatencyMs {
                p50: 1.0,
                p99: 1.0,
                mean: 1.0,
            },
            errors: Errors { total: 2, by_code },
            taken_out: 0,
            healthy_at_end: true,
        }];
        doc.model = Some(Model {
            name: "null".into(),
            version: String::new(),
            url: Some("localhost:8000".into()),
            protocol: Protocol::Http,
            platform: "python".into(),
            max_batch_size: 64,
            binding: json!({}),
        });
        doc.gates = vec![Gate {
            flag: crate::report::gates::Gate::MinF1.flag().into(),
            threshold: 50.0,
            value: 60.0,
            passed: true,
        }];
        super::super::assert_follows(SCHEMA, &serde_json::to_value(&doc).unwrap());
        writes_as_a_value_and_reads_back(&doc);
    }

    /// Floats that are not finite (`null`) and ones of many digits.
    #[test]
    fn floats_of_every_kind_write_and_read_back() {
        let mut doc = serverless();
        doc.metrics = Metrics::V2 {
            exact: 50.0,
            f1: f64::NAN,
            total: 2,
            has_ans: None,
            no_ans: None,
            best: None,
        };
        doc.wall_s = 1.0 / 3.0;
        doc.gates = vec![Gate {
            flag: crate::report::gates::Gate::MinF1.flag().into(),
            threshold: f64::INFINITY,
            value: 60.0,
            passed: true,
        }];
        writes_as_a_value_and_reads_back(&doc);
    }

    /// The writer's bytes are those of the document as a `serde_json::Value` (how
    /// metrics.json was written before the report was typed), and `merge` reads them
    /// back to the same document.
    fn writes_as_a_value_and_reads_back(doc: &EvalJson) {
        let text = super::super::json::to_string(doc);
        assert_eq!(text, format!("{:#}\n", serde_json::to_value(doc).unwrap()));
        let back: EvalJson = serde_json::from_str(&text).unwrap();
        assert_eq!(super::super::json::to_string(&back), text);
    }
}
