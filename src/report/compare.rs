//! `bertqa compare --json`, also `compare.json` (`schema/compare.schema.json`).
//! Floats that are not finite are written as `null`.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Serialize)]
pub struct CompareJson {
    /// Always 1.
    pub schema: u32,
    pub data: String,
    pub version_2_with_negative: bool,
    pub questions: usize,
    pub features: usize,
    pub parallel: bool,
    pub models: Vec<ModelJson>,
    /// Each model after the first against the first.
    pub comparisons: Vec<ComparisonJson>,
    pub gates: Vec<GateJson>,
}

/// One model's run.
#[derive(Debug, Serialize)]
pub struct ModelJson {
    pub name: String,
    pub url: String,
    /// `--protocol`: `grpc` or `http`.
    pub protocol: &'static str,
    pub platform: String,
    pub output_dir: String,
    pub metrics: Value,
    pub wall_s: f64,
    pub throughput: Throughput,
    pub latency_ms: LatencyMs,
    pub padding: Value,
}

#[derive(Debug, Serialize)]
pub struct Throughput {
    pub features_per_s: f64,
    pub questions_per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// One model against the first.
#[derive(Debug, Serialize)]
pub struct ComparisonJson {
    pub model: String,
    pub against: String,
    /// Share of questions with the same answer (0-1).
    pub agreement: f64,
    pub start_logits: LogitDiffJson,
    pub end_logits: LogitDiffJson,
    pub f1_drop: f64,
    pub disagreements: Disagreements,
}

/// Differences of one logit side at the features' real positions.
#[derive(Debug, Serialize)]
pub struct LogitDiffJson {
    pub linf: f64,
    pub mean_abs: f64,
}

#[derive(Debug, Serialize)]
pub struct Disagreements {
    pub count: usize,
    pub first: Vec<Disagreement>,
}

/// A question the two models answer differently.
#[derive(Debug, Clone, Serialize)]
pub struct Disagreement {
    pub id: String,
    /// The first model's answer, then the other's.
    pub answers: [String; 2],
    /// The answers' start + end logits, when found in the n-best lists.
    pub scores: [Option<f64>; 2],
}

/// A `--min-agreement`, `--max-logit-diff` or `--max-f1-drop` gate.
#[derive(Debug, Serialize)]
pub struct GateJson {
    pub flag: String,
    pub model: String,
    pub threshold: f64,
    pub value: f64,
    pub passed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn follows_the_schema() {
        let model = |name: &str| ModelJson {
            name: name.into(),
            url: "localhost:8001".into(),
            protocol: "grpc",
            platform: "onnxruntime_onnx".into(),
            output_dir: format!("out/{name}"),
            metrics: json!({"exact": 50.0, "f1": 60.0, "total": 2}),
            wall_s: 1.5,
            throughput: Throughput {
                features_per_s: 2.0,
                questions_per_s: 1.0,
            },
            latency_ms: LatencyMs {
                p50: 1.0,
                p95: 2.0,
                p99: 3.0,
            },
            padding: json!({
                "mode": "dynamic", "seq_len": null, "probe_features": 0,
                "probe_unsafe_features": 0, "displaced_features": 0,
            }),
        };
        let doc = CompareJson {
            schema: 1,
            data: "dev.json".into(),
            version_2_with_negative: false,
            questions: 2,
            features: 2,
            parallel: true,
            models: vec![model("a"), model("b")],
            comparisons: vec![ComparisonJson {
                model: "b".into(),
                against: "a".into(),
                agreement: 0.5,
                start_logits: LogitDiffJson {
                    linf: 0.3,
                    mean_abs: 0.1,
                },
                end_logits: LogitDiffJson {
                    linf: 0.2,
                    mean_abs: 0.1,
                },
                f1_drop: 1.0,
                disagreements: Disagreements {
                    count: 1,
                    first: vec![Disagreement {
                        id: "q1".into(),
                        answers: ["x".into(), "y".into()],
                        scores: [Some(3.5), None],
                    }],
                },
            }],
            gates: vec![GateJson {
                flag: "--min-agreement".into(),
                model: "b".into(),
                threshold: 0.9,
                value: 0.5,
                passed: false,
            }],
        };
        let v = serde_json::to_value(&doc).unwrap();
        assert_eq!(
            v["comparisons"][0]["disagreements"]["first"][0]["scores"][1],
            Value::Null
        );
        super::super::assert_follows(include_str!("../../schema/compare.schema.json"), &v);
    }
}
