//! `bertqa score` and the evaluator: official numbers from the golden script (algorithm §8),
//! invariances (property tests), and located errors with exit code 2.

use std::path::{Path, PathBuf};

use bertqa::evaluate::{self, IdMap, MetricValue, Predictions, ScoreConfig};
use proptest::prelude::*;
use serde_json::Value;

use crate::common::{bertqa, root};

/// The SQuAD file of the decode goldens of `version`.
fn decode_fixture(version: &str) -> PathBuf {
    root().join(format!("tests/fixtures/decode/squad_{version}.json"))
}

fn golden(version: &str) -> PathBuf {
    root().join("tests/golden/decode").join(version)
}

/// `bertqa ARGS`: the exit code, stdout and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = bertqa(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
fn cases(version: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(golden(version).join("scores.json")).unwrap();
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn close(ours: f64, want: f64, what: &str) {
    assert!(
        (ours - want).abs() <= 1e-9,
        "{what}: ours {ours}, official {want}"
    );
}

/// Every golden case, through the library: same keys in the same order, the same
/// numbers (to 1e-9; in practice to the bit).
fn check_library(version: &str) {
    let dataset = bertqa::squad::read(&decode_fixture(version)).unwrap();
    let dir = golden(version);
    let cases = cases(version);
    assert!(cases.len() >= 2);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let preds =
            evaluate::read_predictions(&dir.join(case["predictions"].as_str().unwrap())).unwrap();
        let na = case["na_prob_file"]
            .as_str()
            .map(|f| evaluate::read_na_probs(&dir.join(f)).unwrap());
        let config = ScoreConfig {
            version_2_with_negative: case["version"] == "v2.0",
            na_prob_thresh: case["na_prob_thresh"].as_f64().unwrap(),
        };
        let scores = evaluate::score(&dataset, &preds, na.as_ref(), &config).unwrap();
        assert!(scores.missing.is_empty());
        let want = case["metrics"].as_object().unwrap();
        let ours = scores.metrics.official();
        let keys: Vec<&str> = ours.iter().map(|(k, _)| *k).collect();
        let want_keys: Vec<&str> = want.keys().map(String::as_str).collect();
        assert_eq!(keys, want_keys, "{name}");
        for (k, v) in ours {
            match v {
                MetricValue::Float(x) => {
                    close(x, want[k].as_f64().unwrap(), &format!("{name} {k}"))
                }
                MetricValue::Count(n) => assert_eq!(n as u64, want[k].as_u64().unwrap()),
            }
        }
    }
}

#[test]
fn v1_scores_match_the_official_script() {
    check_library("v1");
}

#[test]
fn v2_scores_match_the_official_script() {
    check_library("v2");
}

/// The CLI prints the same numbers, as JSON and in the table (Python repr).
#[test]
fn cli_json_and_table() {
    let dir = golden("v2");
    let case = cases("v2")
        .into_iter()
        .find(|c| c["na_prob_file"].is_string() && c["na_prob_thresh"] == 0.0)
        .expect("a v2 case with na-probs");
    let preds = dir.join(case["predictions"].as_str().unwrap());
    let na = dir.join(case["na_prob_file"].as_str().unwrap());
    let data = decode_fixture("v2");
    let args = [
        "score",
        "--data",
        data.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
        "--na-prob-file",
        na.to_str().unwrap(),
        "--na-prob-thresh",
        "0",
    ];
    let (code, out, err) = run(&[&args[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["schema"], 1);
    assert_eq!(doc["version"], "v2.0");
    assert_eq!(doc["missing_predictions"]["count"], 0);
    let want = case["metrics"].as_object().unwrap();
    let got = doc["metrics"].as_object().unwrap();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (k, v) in want {
        close(got[k].as_f64().unwrap(), v.as_f64().unwrap(), k);
    }
    let (code, table, _) = run(&args);
    assert_eq!(code, 0);
    assert!(table.starts_with("SQuAD v2.0"), "{table}");
    for k in want.keys() {
        assert!(
            table.contains(&format!("  {k} ")),
            "{k} missing from\n{table}"
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn malformed_files_exit_2_naming_the_place() {
    let tmp = tempfile::tempdir().unwrap();
    let data = decode_fixture("v2");
    let data = data.to_str().unwrap();
    let bad = write(
        tmp.path(),
        "preds.json",
        "{\n  \"v2-tch-01\": \"x\",\n  \"v2-tch-02\": 7\n}\n",
    );
    let (code, out, err) = run(&[
        "score",
        "--data",
        data,
        "--predictions",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.starts_with("error: ") && err.contains("preds.json:3:"),
        "{err}"
    );

    let truncated = write(tmp.path(), "cut.json", "{\"v2-tch-01\": \"x\"");
    let (code, _, err) = run(&[
        "score",
        "--data",
        data,
        "--predictions",
        truncated.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cut.json:1:"), "{err}");

    let good = golden("v2").join("nvidia/predictions.json");
    let na = write(tmp.path(), "na.json", "{\"v2-tch-01\": \"high\"}");
    let (code, _, err) = run(&[
        "score",
        "--data",
        data,
        "--predictions",
        good.to_str().unwrap(),
        "--na-prob-file",
        na.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("na.json:1:"), "{err}");

    // Well-formed but missing a predicted question: named by id.
    let na = write(tmp.path(), "na2.json", "{\"v2-tch-01\": 0.5}");
    let (code, _, err) = run(&[
        "score",
        "--data",
        data,
        "--predictions",
        good.to_str().unwrap(),
        "--na-prob-file",
        na.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("na2.json") && err.contains("v2-tch-02"),
        "{err}"
    );

    let (code, _, err) = run(&[
        "score",
        "--data",
        data,
        "--predictions",
        "/nonexistent/p.json",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/p.json"), "{err}");
}

#[test]
fn missing_predictions_are_reported_and_scored_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let data = decode_fixture("v1");
    let p = write(
        tmp.path(),
        "p.json",
        "{\"v1-tch-01\": \"1893\", \"nope\": \"x\"}",
    );
    let (code, out, err) = run(&[
        "score",
        "--data",
        data.to_str().unwrap(),
        "--predictions",
        p.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["missing_predictions"]["count"], 14);
    assert_eq!(doc["missing_predictions"]["first_ids"][0], "v1-tch-02");
    assert_eq!(doc["unknown_predictions"], 1);
    assert_eq!(doc["metrics"]["exact_match"], 100.0 / 15.0);
    assert!(
        err.contains("14 of 15 questions have no prediction"),
        "{err}"
    );
}

/// The perturbed golden predictions of a version, as (id, text) pairs.
fn perturbed(version: &str) -> Vec<(String, String)> {
    let p =
        evaluate::read_predictions(&golden(version).join("perturbed_predictions.json")).unwrap();
    p.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn metrics(version: &str, pairs: Vec<(String, String)>) -> Vec<(&'static str, MetricValue)> {
    let dataset = bertqa::squad::read(&decode_fixture(version)).unwrap();
    let config = ScoreConfig {
        version_2_with_negative: version == "v2",
        ..ScoreConfig::default()
    };
    let preds: Predictions = IdMap::from_pairs(pairs);
    evaluate::score(&dataset, &preds, None, &config)
        .unwrap()
        .metrics
        .official()
}

/// Adds articles and ASCII punctuation around the words of `text`.
fn decorate(text: &str, seed: &[u8]) -> String {
    const EXTRA: [&str; 9] = ["the", "A", "an", "THE", ",", "!", "\"", "(", "..."];
    let mut out = String::new();
    for (i, w) in text.split(' ').enumerate() {
        let k = seed.get(i % seed.len().max(1)).copied().unwrap_or(0) as usize;
        if k.is_multiple_of(3) {
            out.push_str(EXTRA[k % EXTRA.len()]);
            out.push(' ');
        }
        out.push_str(w);
        if k % 4 == 1 {
            out.push_str(EXTRA[4 + k % 5]);
        }
        out.push(' ');
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// EM/F1 do not depend on the order of the predictions file.
    #[test]
    fn scores_do_not_depend_on_prediction_order(seed in any::<u64>(), v2 in any::<bool>()) {
        let version = if v2 { "v2" } else { "v1" };
        let mut pairs = perturbed(version);
        let want = metrics(version, pairs.clone());
        // Fisher–Yates with a small LCG from the seed.
        let mut s = seed | 1;
        for i in (1..pairs.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            pairs.swap(i, (s >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(metrics(version, pairs), want);
    }

    /// EM/F1 do not change when articles and ASCII punctuation are added to the
    /// (non-empty) predictions.
    #[test]
    fn scores_ignore_articles_and_punctuation(seed in proptest::collection::vec(any::<u8>(), 1..16), v2 in any::<bool>()) {
        let version = if v2 { "v2" } else { "v1" };
        let pairs = perturbed(version);
        let want = metrics(version, pairs.clone());
        let decorated = pairs
            .into_iter()
            .map(|(k, v)| {
                let d = if v.is_empty() { v } else { decorate(&v, &seed) };
                (k, d)
            })
            .collect();
        prop_assert_eq!(metrics(version, decorated), want);
    }
}

/// `score --json` follows schema/score.schema.json: v1.1 and v2.0 rules, with na-probs
/// and best thresholds, predictions missing, and MRQA's rules.
#[test]
fn score_json_follows_its_schema() {
    use crate::common::json_following;
    let v1 = decode_fixture("v1");
    let v2 = decode_fixture("v2");
    let tmp = tempfile::tempdir().unwrap();
    let partial = write(tmp.path(), "p.json", "{\"v1-tch-01\": \"1893\"}");
    let paths = |p: &Path| p.to_str().unwrap().to_string();
    let mrqa = root().join("tests/fixtures/mrqa");
    let cases: [Vec<String>; 4] = [
        vec![
            paths(&v1),
            paths(&golden("v1").join("nvidia/predictions.json")),
        ],
        vec![paths(&v1), paths(&partial)],
        vec![
            paths(&v2),
            paths(&golden("v2").join("nvidia/predictions.json")),
            "--na-prob-file".into(),
            paths(&golden("v2").join("nvidia/null_odds.json")),
        ],
        vec![
            paths(&mrqa.join("golden.jsonl")),
            paths(&mrqa.join("golden-predictions.json")),
        ],
    ];
    let mut versions = Vec::new();
    for case in &cases {
        let mut args = vec![
            "score",
            "--json",
            "--data",
            &case[0],
            "--predictions",
            &case[1],
        ];
        args.extend(case[2..].iter().map(String::as_str));
        let v = json_following("score", &args);
        versions.push((v["version"].clone(), v["rules"].clone()));
    }
    assert_eq!(versions[2].0, "v2.0");
    assert_eq!(versions[3].1, "mrqa");
}
