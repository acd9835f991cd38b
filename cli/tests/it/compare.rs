//! `bertqa compare` on the real local Triton: the same weights deployed as numpy
//! (TorchScript stand-in) and ONNX (onnxruntime), NVIDIA vs Hugging Face tensor names
//! and dtypes, FP16 outputs, and a deliberately different model.

use serde_json::Value;

use crate::common::{bertqa, compare_on, root, server, show};

fn compare(models: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    compare_on("tests/fixtures/squad/v2-long.json", models, out, extra)
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

/// `scripts/testbed/compare_stats.py` (numpy, written apart from bertqa) on the
/// per-question files of `reference` and `model` in a compare's output directory.
fn independent_statistics(out: &std::path::Path, reference: &str, model: &str, seed: u64) -> Value {
    let python = &crate::common::triton_env()["TRITON_PYTHON"];
    let o = std::process::Command::new(python)
        .arg(root().join("scripts/testbed/compare_stats.py"))
        .arg(out.join(reference).join("per_question.jsonl"))
        .arg(out.join(model).join("per_question.jsonl"))
        .args(["--rounds", "20000", "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// bertqa's statistics of one comparison against the independent ones: the mean
/// differences to 1e-9, McNemar's p to 1e-9 relative, the intervals within 0.3 points
/// (bootstraps of their own draws), F1's randomization p within 0.03, the same flips.
fn assert_statistics_agree(ours: &Value, theirs: &Value) {
    for key in ["exact_diff", "f1_diff"] {
        let (a, b) = (&ours[key], &theirs[key]);
        let value = a["value"].as_f64().unwrap();
        assert!(
            (value - b["value"].as_f64().unwrap()).abs() < 1e-9,
            "{key}: {a} vs {b}"
        );
        // (Means of 0/1 scores over n questions lie on a lattice of 100/n points: the
        // data has enough questions for a lattice much finer than the tolerance.)
        for i in 0..2 {
            let (x, y) = (a["ci"][i].as_f64().unwrap(), b["ci"][i].as_f64().unwrap());
            assert!((x - y).abs() <= 0.3, "{key} interval: {a} vs {b}");
        }
    }
    let (p, q) = (
        ours["exact_diff"]["p_value"].as_f64().unwrap(),
        theirs["exact_diff"]["p_value"].as_f64().unwrap(),
    );
    assert!((p - q).abs() <= 1e-9 * q, "McNemar {p} vs {q}");
    let (p, q) = (
        ours["f1_diff"]["p_value"].as_f64().unwrap(),
        theirs["f1_diff"]["p_value"].as_f64().unwrap(),
    );
    assert!((p - q).abs() <= 0.03, "randomization {p} vs {q}");
    assert_eq!(ours["flips"], theirs["flips"]);
}

fn compare_1200(models: &str, out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    compare_on("tests/compare-data/compare-1200.json", models, out, extra)
}

#[test]
fn a_clearly_worse_model_is_significant_and_a_near_tie_is_not_as_computed_independently() {
    let tmp = tempfile::tempdir().unwrap();
    // Three models: two comparisons, each lossy oracle against the plain one.
    let worse = tmp.path().join("worse");
    let html = tmp.path().join("compare.html");
    let o = compare_1200(
        "oracle,oracle-lossy-1,oracle-lossy-2",
        &worse,
        &[
            "--fail-on-significant-drop",
            "--max-flip-rate",
            "0.5",
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["comparisons"].as_array().unwrap().len(), 2);
    for (i, model) in ["oracle-lossy-1", "oracle-lossy-2"].into_iter().enumerate() {
        let c = &v["comparisons"][i];
        assert_eq!(c["model"], model);
        assert!(c["exact_diff"]["ci"][1].as_f64().unwrap() < 0.0, "{c}");
        assert!(c["exact_diff"]["p_value"].as_f64().unwrap() < 1e-6, "{c}");
        assert_eq!(c["flips"]["wrong_to_right"], 0, "{c}");
        assert_statistics_agree(c, &independent_statistics(&worse, "oracle", model, 0));
    }
    let failed: Vec<(&str, &str)> = v["gates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["passed"] == false)
        .map(|g| (g["flag"].as_str().unwrap(), g["model"].as_str().unwrap()))
        .collect();
    assert_eq!(failed.len(), 4, "both scores of both models: {failed:?}");
    assert!(failed.iter().all(|f| f.0 == "--fail-on-significant-drop"));
    let text = String::from_utf8_lossy(&o.stderr);
    assert!(
        text.contains("--fail-on-significant-drop (exact)"),
        "{text}"
    );
    // The flipped questions, each once per comparison.
    let flips = std::fs::read_to_string(worse.join("flips.jsonl")).unwrap();
    let lines: Vec<Value> = flips
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of_first = lines
        .iter()
        .filter(|l| l["model"] == "oracle-lossy-1")
        .count() as u64;
    let f = &v["comparisons"][0]["flips"];
    assert!(of_first >= f["right_to_wrong"].as_u64().unwrap());
    assert_eq!(lines[0]["against"], "oracle");
    assert_eq!(lines[0]["exact"][0], 1.0);
    // The page: four intervals (two scores of two models) and a table of flips each.
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(page.matches("class=\"ci\"").count(), 4, "{page}");
    assert_eq!(page.matches("<table class=\"sortable flips\"").count(), 2);
    assert!(page.contains("not corrected for several models"));

    // Two seeds of the lossy oracle: a near tie with flips both ways.
    let tie = tmp.path().join("tie");
    let o = compare_1200(
        "oracle-lossy-1,oracle-lossy-2",
        &tie,
        &["--fail-on-significant-drop", "--seed", "5"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["comparisons"][0];
    assert!(c["flips"]["right_to_wrong"].as_u64().unwrap() >= 20, "{c}");
    assert!(c["flips"]["wrong_to_right"].as_u64().unwrap() >= 20, "{c}");
    let ci = &c["exact_diff"]["ci"];
    assert!(
        ci[0].as_f64().unwrap() < 0.0 && ci[1].as_f64().unwrap() > 0.0,
        "{c}"
    );
    assert_statistics_agree(
        c,
        &independent_statistics(&tie, "oracle-lossy-1", "oracle-lossy-2", 5),
    );
    assert_eq!(v["statistics"]["seed"], 5);
    // The same seed, the same intervals.
    let again = compare_1200(
        "oracle-lossy-1,oracle-lossy-2",
        &tmp.path().join("again"),
        &["--seed", "5"],
    );
    let w: Value = serde_json::from_slice(&again.stdout).unwrap();
    for key in ["exact_diff", "f1_diff"] {
        assert_eq!(w["comparisons"][0][key], c[key], "{key}");
    }
}

#[test]
fn finished_runs_compare_as_the_live_models_do() {
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("tests/compare-data/compare-1200.json");
    let data = data.to_str().unwrap();
    let eval_dir = tmp.path().join("eval-lossy-1");
    let o = bertqa(&[
        "eval",
        "--url",
        &server().url,
        "--model",
        "oracle-lossy-1",
        "--data",
        data,
        "--output-dir",
        eval_dir.to_str().unwrap(),
        "--save-logits",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    // A compare's model directory is a finished run too.
    let baseline = tmp.path().join("baseline");
    let o = compare_1200("oracle,oracle-lossy-2", &baseline, &["--save-logits"]);
    assert!(o.status.success(), "{}", show(&o));
    let live = compare_1200(
        "oracle-lossy-1,oracle-lossy-2",
        &tmp.path().join("live"),
        &["--seed", "3"],
    );
    assert!(live.status.success(), "{}", show(&live));
    let live: Value = serde_json::from_slice(&live.stdout).unwrap();
    let out = tmp.path().join("runs");
    let lossy_2 = baseline.join("oracle-lossy-2");
    let o = bertqa(&[
        "compare",
        "--runs",
        eval_dir.to_str().unwrap(),
        lossy_2.to_str().unwrap(),
        "--data",
        data,
        "--seed",
        "3",
        "--output-dir",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let runs: Value = serde_json::from_slice(&o.stdout).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schema/compare.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(
        jsonschema::validator_for(&schema).unwrap().is_valid(&runs),
        "{runs:#}"
    );
    let (a, b) = (&live["comparisons"][0], &runs["comparisons"][0]);
    for key in [
        "exact_diff",
        "f1_diff",
        "flips",
        "agreement",
        "start_kl",
        "end_kl",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    assert!(b["start_kl"]["mean"].as_f64().unwrap() > 0.0, "{b}");
    assert_eq!(runs["runs"][1], lossy_2.to_str().unwrap());
    assert_eq!(runs["models"][0]["name"], "oracle-lossy-1");
    assert_eq!(
        std::fs::read_to_string(out.join("compare.json")).unwrap(),
        format!("{runs:#}\n")
    );
    assert!(out.join("flips.jsonl").exists());

    // Without saved logits: the same statistics, no divergences, and why.
    let o = bertqa(&[
        "compare",
        "--runs",
        baseline.join("oracle").to_str().unwrap(),
        tmp.path().join("live/oracle-lossy-2").to_str().unwrap(),
        "--data",
        data,
        "--json",
    ]);
    assert!(o.status.success(), "{}", show(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["comparisons"][0];
    assert_eq!(c["start_kl"], Value::Null);
    let why = c["kl_unavailable"].as_str().unwrap();
    assert!(why.contains("live/oracle-lossy-2 saved no logits"), "{why}");

    // A directory that is not a run is named, and nothing is written.
    let bad = tmp.path().join("runs-bad");
    let o = bertqa(&[
        "compare",
        "--runs",
        eval_dir.to_str().unwrap(),
        tmp.path().to_str().unwrap(),
        "--data",
        data,
        "--output-dir",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}: no metrics.json", tmp.path().display())),
        "{err}"
    );
    assert!(!bad.exists());
}
