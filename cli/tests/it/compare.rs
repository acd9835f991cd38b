//! `bertqa compare` on the real local Triton: the same weights deployed as numpy
//! (TorchScript stand-in) and ONNX (onnxruntime), NVIDIA vs Hugging Face tensor names
//! and dtypes, FP16 outputs, and a deliberately different model.

use serde_json::Value;

use crate::common::{bertqa, root, server, show};

fn compare(models: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let data = root().join("tests/fixtures/squad/v2-long.json");
    let mut args = vec![
        "compare",
        "--models",
        models,
        "--data",
        data.to_str().unwrap(),
        "--url",
        &server().url,
        "--output-dir",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn comparison(v: &Value, i: usize) -> (f64, f64, f64) {
    let c = &v["comparisons"][i];
    (
        c["agreement"].as_f64().unwrap(),
        c["start_logits"]["linf"].as_f64().unwrap(),
        c["end_logits"]["linf"].as_f64().unwrap(),
    )
}

#[test]
fn onnx_and_numpy_deployments_agree_and_a_different_model_fails_the_gate() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schema/compare.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = compare(
        "tiny-bert,bert-onnx,bert-onnx-fp16",
        tmp.path(),
        &["--min-agreement", "0.99", "--max-logit-diff", "0.05"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let (agreement, s, e) = comparison(&v, 0);
    assert!(agreement >= 0.99, "{agreement}");
    assert!(
        s < 1e-3 && e < 1e-3 && s > 0.0,
        "L_inf {s} {e}: onnxruntime vs numpy is float noise, not zero"
    );
    // FP16 outputs: rounding to 11 significant bits on logits of magnitude < 32.
    let (_, s16, e16) = comparison(&v, 1);
    assert!(
        s16 < 0.02 && e16 < 0.02 && s16 > 1e-4,
        "FP16 L_inf {s16} {e16}"
    );
    for m in ["tiny-bert", "bert-onnx", "bert-onnx-fp16"] {
        assert!(tmp.path().join(m).join("predictions.json").exists(), "{m}");
        assert!(tmp.path().join(m).join("null_odds.json").exists(), "{m}");
    }
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("compare.json")).unwrap(),
        format!("{v:#}\n")
    );

    let o = compare(
        "tiny-bert,tiny-bert-seed2",
        &tmp.path().join("seed"),
        &["--min-agreement", "0.99", "--show", "3"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("gate failed: --min-agreement 0.99: model tiny-bert-seed2"),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(comparison(&v, 0).0 < 0.99);
    assert_eq!(
        v["comparisons"][0]["disagreements"]["first"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn nvidia_and_hugging_face_conventions_compare_without_flags() {
    // tiny-bert: input__0/1/2 INT64 → output__0/1; tiny-bert-hf: input_ids,
    // attention_mask, token_type_ids INT32 → start/end_logits. Same weights, same
    // padded inputs: identical logits.
    let tmp = tempfile::tempdir().unwrap();
    let o = compare(
        "tiny-bert,tiny-bert-hf",
        tmp.path(),
        &["--max-logit-diff", "0"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(comparison(&v, 0), (1.0, 0.0, 0.0));
    // The same through an explicit per-model server address.
    let spec = format!("tiny-bert,tiny-bert-hf@{}", server().url);
    let o = compare(&spec, &tmp.path().join("at"), &["--parallel"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["models"][1]["url"], server().url);
    assert_eq!(comparison(&v, 0).0, 1.0);
}
