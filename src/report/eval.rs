//! `bertqa eval --json`, also `metrics.json` (`schema/eval.schema.json`). Times in
//! seconds (`_s`) or milliseconds (`_ms`), rounded to 6 decimals; floats that are not
//! finite are written as `null`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::CountedIds;

#[derive(Debug, Serialize)]
pub struct EvalJson<'a> {
    /// Always 1.
    pub schema: u32,
    pub data: String,
    pub version_2_with_negative: bool,
    pub postprocess: &'a str,
    pub metrics: Value,
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
    pub shared_memory: Option<SharedMemory<'a>>,
    pub retries: Retries<'a>,
    pub non_finite_logits: NonFiniteLogits,
    pub endpoints: Vec<Endpoint<'a>>,
    pub missing_predictions: CountedIds<'a>,
    pub featureless_questions: CountedIds<'a>,
    pub model: Option<Model<'a>>,
    pub gates: Vec<Gate<'a>>,
    pub output_dir: String,
    pub files: &'a [String],
    pub run: &'a Value,
}

#[derive(Debug, Serialize)]
pub struct Throughput {
    pub features_per_s: f64,
    pub questions_per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize)]
pub struct PhasesS {
    pub features: f64,
    pub inference: f64,
    pub decode: f64,
}

/// Where the client's own time went.
#[derive(Debug, Serialize)]
pub struct Client {
    pub starved_s: f64,
    pub decode_lag_s: f64,
    pub limited_s: f64,
    pub cpu_limited: bool,
}

/// How batches were padded (also in `compare`'s models).
#[derive(Debug, Serialize)]
pub struct Padding {
    pub mode: &'static str,
    pub seq_len: Option<usize>,
    pub probe_features: u64,
    pub probe_unsafe_features: u64,
    pub displaced_features: u64,
}

#[derive(Debug, Serialize)]
pub struct SharedMemory<'a> {
    pub used: bool,
    pub outputs: bool,
    pub note: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Retries<'a> {
    pub total: u64,
    pub by_code: &'a BTreeMap<String, u64>,
    pub failed_requests: u64,
    pub failures_by_code: &'a BTreeMap<String, u64>,
}

#[derive(Debug, Serialize)]
pub struct NonFiniteLogits {
    pub values: u64,
    pub features: u64,
}

/// One server endpoint's figures.
#[derive(Debug, Serialize)]
pub struct Endpoint<'a> {
    pub url: &'a str,
    pub connections: usize,
    pub transport: &'static str,
    pub unary_connections: usize,
    pub requests: u64,
    pub features: u64,
    pub features_per_s: f64,
    pub latency_ms: EndpointLatencyMs,
    pub errors: Errors<'a>,
    pub taken_out: u64,
    pub healthy_at_end: bool,
}

#[derive(Debug, Serialize)]
pub struct EndpointLatencyMs {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
}

#[derive(Debug, Serialize)]
pub struct Errors<'a> {
    pub total: u64,
    pub by_code: &'a BTreeMap<String, u64>,
}

/// The model the run used.
#[derive(Debug, Serialize)]
pub struct Model<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub url: Option<&'a str>,
    /// `--protocol`: `grpc` or `http`.
    pub protocol: &'static str,
    pub platform: &'a str,
    pub max_batch_size: usize,
    pub binding: Value,
}

/// A `--min-exact`, `--min-f1` or `--max-p99-ms` gate.
#[derive(Debug, Serialize)]
pub struct Gate<'a> {
    pub flag: &'a str,
    pub threshold: f64,
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
        let files = ["predictions.json".to_string()];
        let run = json!({"data_sha256": "ab", "model": "null"});
        let mut doc = EvalJson {
            schema: 1,
            data: "dev.json".into(),
            version_2_with_negative: false,
            postprocess: "nvidia",
            metrics: json!({"exact": 50.0, "f1": 60.0, "total": 2}),
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
                by_code: &none,
                failed_requests: 0,
                failures_by_code: &none,
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
            files: &files,
            run: &run,
        };
        let schema = include_str!("../../schema/eval.schema.json");
        super::super::assert_follows(schema, &serde_json::to_value(&doc).unwrap());

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
            mode: "fixed",
            seq_len: Some(384),
            probe_features: 16,
            probe_unsafe_features: 1,
            displaced_features: 0,
        });
        doc.shared_memory = Some(SharedMemory {
            used: false,
            outputs: false,
            note: Some("remote server"),
        });
        doc.retries.by_code = &by_code;
        doc.retries.total = 2;
        doc.endpoints = vec![Endpoint {
            url: "localhost:8001",
            connections: 1,
            transport: "stream",
            unary_connections: 0,
            requests: 1,
            features: 3,
            features_per_s: 6.0,
            latency_ms: EndpointLatencyMs {
                p50: 1.0,
                p99: 1.0,
                mean: 1.0,
            },
            errors: Errors {
                total: 2,
                by_code: &by_code,
            },
            taken_out: 0,
            healthy_at_end: true,
        }];
        doc.model = Some(Model {
            name: "null",
            version: "",
            url: Some("localhost:8000"),
            protocol: "http",
            platform: "python",
            max_batch_size: 64,
            binding: json!({}),
        });
        doc.gates = vec![Gate {
            flag: "--min-f1",
            threshold: 50.0,
            value: 60.0,
            passed: true,
        }];
        super::super::assert_follows(schema, &serde_json::to_value(&doc).unwrap());
    }
}
