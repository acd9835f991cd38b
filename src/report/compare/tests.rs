use super::*;
use crate::evaluate::Breakdown;
use crate::report::Format;
use serde_json::Value;

fn model(name: &str, f1: f64) -> ModelJson {
    ModelJson {
        name: name.into(),
        url: "localhost:8001".into(),
        protocol: Protocol::Grpc,
        platform: "onnxruntime_onnx".into(),
        output_dir: format!("out/{name}"),
        metrics: Metrics::V2 {
            exact: 50.0,
            f1,
            total: 2,
            has_ans: Some(Breakdown {
                exact: 100.0,
                f1: 100.0,
                total: 1,
            }),
            no_ans: None,
            best: None,
        },
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
        padding: Some(Padding {
            mode: "dynamic".into(),
            seq_len: None,
            probe_features: 0,
            probe_unsafe_features: 0,
            displaced_features: 0,
        }),
    }
}

fn doc() -> CompareJson {
    CompareJson {
        slices_not_computed: std::collections::BTreeMap::from([(
            "answer_windows".to_string(),
            "model \"b\" cuts its windows on the server".to_string(),
        )]),
        schema: 1,
        data: "dev.json".into(),
        version_2_with_negative: true,
        questions: 2,
        features: 2,
        parallel: true,
        runs: None,
        statistics: StatisticsJson {
            bootstrap: 10_000,
            seed: 0,
            confidence: 0.95,
            p_values_corrected: false,
        },
        models: vec![model("a", 60.0), model("b", 59.0)],
        comparisons: vec![ComparisonJson {
            model: "b".into(),
            against: "a".into(),
            agreement: 0.5,
            start_logits: LogitDiffJson {
                linf: f64::INFINITY,
                mean_abs: 0.1,
            },
            end_logits: LogitDiffJson {
                linf: 0.2,
                mean_abs: 1e-5,
            },
            windows: WindowsJson {
                compared: 2,
                first: 2,
                model: 2,
            },
            f1_drop: 1.0,
            disagreements: Disagreements {
                count: 1,
                first: vec![Disagreement {
                    id: "q1".into(),
                    answers: ["x".into(), "y \"z\"".into()],
                    scores: [Some(3.5), None],
                }],
            },
            confidence: 0.95,
            exact_diff: Difference {
                value: 0.0,
                ci: [-50.0, 50.0],
                p_value: 1.0,
            },
            f1_diff: Difference {
                value: -1.0,
                ci: [-2.5, f64::NAN],
                p_value: 0.00012,
            },
            flips: Flips {
                right_to_wrong: 1,
                wrong_to_right: 1,
                to_no_answer: 0,
                from_no_answer: 1,
            },
            start_kl: Some(Divergence {
                mean: 0.5,
                p99: 1.0,
                max: 1.25,
            }),
            end_kl: Some(Divergence {
                mean: 0.0,
                p99: 0.0,
                max: 0.0,
            }),
            kl_unavailable: None,
            slices: vec![crate::compare::SliceComparison {
                slice: "context_windows:3+".into(),
                questions: 2,
                exact_diff: Difference {
                    value: -50.0,
                    ci: [-100.0, 0.0],
                    p_value: 1.0,
                },
                f1_diff: Difference {
                    value: -40.0,
                    ci: [-80.0, 0.0],
                    p_value: 0.5,
                },
                flips: Flips {
                    right_to_wrong: 1,
                    ..Flips::default()
                },
                changed: 1,
                change_rate: 0.5,
                rest_change_rate: 0.0,
                p_value: 1.0,
                p_adjusted: 1.0,
            }],
            concentrated_in: vec![],
        }],
        gates: vec![
            GateJson {
                flag: Gate::MinAgreement.flag().into(),
                score: None,
                model: "b".into(),
                threshold: 0.9,
                value: 0.5,
                passed: false,
                slices: vec![],
            },
            GateJson {
                flag: Gate::MaxLogitDiff.flag().into(),
                score: None,
                model: "b".into(),
                threshold: 1e-7,
                value: f64::INFINITY,
                passed: false,
                slices: vec![],
            },
            GateJson {
                flag: Gate::FailIfConcentrated.flag().into(),
                score: None,
                model: "b".into(),
                threshold: 0.0,
                value: 1.0,
                passed: false,
                slices: vec!["context_windows:3+".into()],
            },
        ],
    }
}

#[test]
fn follows_the_schema() {
    let doc = doc();
    let v = serde_json::to_value(&doc).unwrap();
    assert_eq!(
        v["comparisons"][0]["disagreements"]["first"][0]["scores"][1],
        Value::Null
    );
    assert_eq!(v["comparisons"][0]["start_logits"]["linf"], Value::Null);
    assert_eq!(v["comparisons"][0]["f1_diff"]["ci"][1], Value::Null);
    assert_eq!(v["comparisons"][0]["exact_diff"]["ci"][0], -50.0);
    assert_eq!(v["comparisons"][0]["flips"]["from_no_answer"], 1);
    assert_eq!(v["statistics"]["bootstrap"], 10_000);
    assert!(v.get("runs").is_none());
    assert_eq!(v["models"][0]["protocol"], "grpc");
    assert_eq!(v["models"][0]["metrics"]["HasAns_total"], 1);
    super::super::assert_follows(include_str!("../../../schema/compare.schema.json"), &v);
    assert_eq!(doc.render(Format::Json), format!("{v:#}\n"));
}

#[test]
fn a_models_run_follows_its_schema() {
    let doc = doc();
    let run = ModelRunJson::of(&doc, &doc.models[1], vec!["predictions.json".into()]);
    let v = serde_json::to_value(&run).unwrap();
    assert_eq!(v["model"]["name"], "b");
    assert_eq!(v["metrics"]["f1"], 59.0);
    super::super::assert_follows(include_str!("../../../schema/compare-run.schema.json"), &v);
}

/// The text as `compare` printed it when it read the JSON document back: values
/// that are not finite (null there) and breakdowns the metrics lack show as NaN,
/// gate numbers as the JSON writes them.
#[test]
fn text_reads_as_before() {
    let want = "\
data dev.json: 2 questions, 2 features (models run in parallel over gRPC)

model                          EM       F1    HasEM    HasF1     NoEM     NoF1  features/s    p50 ms    p95 ms    p99 ms     agree  Linf start    Linf end
a                          50.000   60.000  100.000  100.000      NaN      NaN         2.0      1.00      2.00      3.00     (ref)                        
b                          50.000   59.000  100.000  100.000      NaN      NaN         2.0      1.00      2.00      3.00    0.5000         NaN    2.000e-1

b vs a: mean |Δ| start 1.000e-1, end 1.000e-5; F1 drop 1.000; 1 questions disagree
  EM +0.00 [-50.00, +50.00] p=1.000; F1 -1.00 [-2.50, NaN] p=1.2e-4 (95% intervals); flips: 1 right to wrong, 1 wrong to right, 0 to no answer, 1 from no answer
  KL start mean 5.000e-1 p99 1.000e0 max 1.250e0; end mean 0.000e0 p99 0.000e0 max 0.000e0
  q1: \"x\" (3.500) vs \"y \\\"z\\\"\" (NaN)
gate --min-agreement 0.9 for b: measured 0.5 FAILED
gate --max-logit-diff 1e-7 for b: measured null FAILED
gate --fail-if-concentrated for b: changes concentrate in context_windows:3+ FAILED
";
    assert_eq!(doc().render(Format::Text { verbose: false }), want);
    assert_eq!(
        doc().gates[1].describe(),
        "--max-logit-diff 1e-7: model b measured null"
    );
}
