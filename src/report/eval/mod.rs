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

#[derive(Debug, Serialize, Deserialize)]
pub struct EvalJson {
    /// Always 1.
    pub schema: u32,
    pub data: String,
    pub version_2_with_negative: bool,
    pub postprocess: String,
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    pub questions: usize,
    pub features: u64,
    pub requests: u64,
    pub batch_size: usize,
    pub concurrency: usize,
    pub wall_s: f64,
    pub throughput: Throughput,
    /// `None` without requests.
    pub latency_ms: Option<LatencyMs>,
    pub phases_s: PhasesS,
    /// `None` without a server, as the next two.
    pub client: Option<Client>,
    pub padding: Option<Padding>,
    pub shared_memory: Option<SharedMemory>,
    pub retries: Retries,
    pub non_finite_logits: NonFiniteLogits,
    pub endpoints: Vec<Endpoint>,
    pub missing_predictions: CountedIds,
    pub featureless_questions: CountedIds,
    pub model: Option<Model>,
    pub gates: Vec<Gate>,
    pub output_dir: String,
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
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Throughput {
    pub features_per_s: f64,
    pub questions_per_s: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct PhasesS {
    pub features: f64,
    pub inference: f64,
    pub decode: f64,
}

/// Where the client's own time went.
#[derive(Debug, Serialize, Deserialize)]
pub struct Client {
    pub starved_s: f64,
    pub decode_lag_s: f64,
    pub limited_s: f64,
    pub cpu_limited: bool,
}

/// How batches were padded (also in `compare`'s models).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Padding {
    pub mode: String,
    pub seq_len: Option<usize>,
    pub probe_features: u64,
    pub probe_unsafe_features: u64,
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

#[derive(Debug, Serialize, Deserialize)]
pub struct SharedMemory {
    pub used: bool,
    pub outputs: bool,
    pub note: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Retries {
    pub total: u64,
    pub by_code: BTreeMap<String, u64>,
    pub failed_requests: u64,
    pub failures_by_code: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NonFiniteLogits {
    pub values: u64,
    pub features: u64,
}

/// One server endpoint's figures.
#[derive(Debug, Serialize, Deserialize)]
pub struct Endpoint {
    pub url: String,
    pub connections: usize,
    pub transport: String,
    pub unary_connections: usize,
    pub requests: u64,
    pub features: u64,
    pub features_per_s: f64,
    pub latency_ms: EndpointLatencyMs,
    pub errors: Errors,
    pub taken_out: u64,
    pub healthy_at_end: bool,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EndpointLatencyMs {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Errors {
    pub total: u64,
    pub by_code: BTreeMap<String, u64>,
}

/// The model the run used.
#[derive(Debug, Serialize, Deserialize)]
pub struct Model {
    pub name: String,
    pub version: String,
    pub url: Option<String>,
    /// `--protocol`: `grpc` or `http`.
    #[serde(with = "super::json::protocol")]
    pub protocol: Protocol,
    pub platform: String,
    pub max_batch_size: usize,
    /// The tensor binding as `crate::backend::Binding` serializes it.
    pub binding: Value,
}

/// How the run went through one of eval's gates.
#[derive(Debug, Serialize, Deserialize)]
pub struct Gate {
    /// The gate's flag ([`super::gates::Gate::flag`]).
    pub flag: String,
    #[serde(deserialize_with = "super::json::nan_if_null")]
    pub threshold: f64,
    #[serde(deserialize_with = "super::json::nan_if_null")]
    pub value: f64,
    pub passed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run without a server (from saved logits) and one with a server and an
    /// endpoint: both documents follow the schema.
    #[test]
    fn follows_the_schema() {
        let none = BTreeMap::new();
        let by_code = BTreeMap::from([("UNAVAILABLE".to_string(), 2u64)]);
        let ids = ["q1".to_string()];
        let run = Fingerprint::default()
            .with("data_sha256", "ab")
            .with("model", "null");
        let mut doc = EvalJson {
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
        };
        let schema = include_str!("../../../schema/eval.schema.json");
        super::super::assert_follows(schema, &serde_json::to_value(&doc).unwrap());
        writes_as_a_value_and_reads_back(&doc);

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
        super::super::assert_follows(schema, &serde_json::to_value(&doc).unwrap());
        writes_as_a_value_and_reads_back(&doc);

        // Floats that are not finite (`null`) and ones of many digits.
        doc.metrics = Metrics::V2 {
            exact: 50.0,
            f1: f64::NAN,
            total: 2,
            has_ans: None,
            no_ans: None,
            best: None,
        };
        doc.wall_s = 1.0 / 3.0;
        doc.gates[0].threshold = f64::INFINITY;
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
