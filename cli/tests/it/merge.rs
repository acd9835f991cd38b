//! `eval --shard I/N` and `bertqa merge` on the real local Triton (one evaluation split
//! over machines): three shards merged equal one run, byte for byte; bad shard sets are
//! refused.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::common::{assert_same_files, assert_schema, bertqa, eval, ok, read_json, root, show};

fn merge(dirs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    let mut a = vec!["merge"];
    a.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    a.extend(["--output-dir", out.to_str().unwrap()]);
    a.extend_from_slice(extra);
    bertqa(&a)
}

fn refused(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", show(o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
}

#[test]
fn three_shards_merged_equal_one_run_and_bad_shard_sets_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // 10 questions (v1) and 8 (v2): uneven slices; --doc-stride 48 gives several windows.
    for (name, data, files) in [
        ("v2", "tests/fixtures/squad/v2-long.json", 4),
        ("v1", "tests/fixtures/squad/v1-long.json", 3),
    ] {
        let single = t.join(format!("{name}-single"));
        ok(&eval(data, "oracle", &single, &["--doc-stride", "48"]));
        let shards: Vec<PathBuf> = (1..=3)
            .map(|i| t.join(format!("{name}-shard{i}")))
            .collect();
        let mut counted = 0;
        for (i, dir) in shards.iter().enumerate() {
            let spec = format!("{}/3", i + 1);
            ok(&eval(
                data,
                "oracle",
                dir,
                &["--doc-stride", "48", "--shard", &spec],
            ));
            let m = read_json(dir.join("metrics.json"));
            assert_eq!(m["run"]["shard"], spec.as_str());
            counted += m["questions"].as_u64().unwrap();
        }
        let total = read_json(single.join("metrics.json"))["questions"]
            .as_u64()
            .unwrap();
        assert_eq!(counted, total, "the shards hold every question once");

        let merged = t.join(format!("{name}-merged"));
        // Any order of the directories.
        let o = merge(&[&shards[2], &shards[0], &shards[1]], &merged, &["--json"]);
        ok(&o);
        let mut names = vec![
            "predictions.json",
            "nbest_predictions.json",
            "per_question.jsonl",
        ];
        if files == 4 {
            names.push("null_odds.json");
        }
        assert_same_files(&single, &merged, &names);
        let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_schema("merge", &doc);
        let one = read_json(single.join("metrics.json"));
        assert_eq!(doc["metrics"], one["metrics"], "{name}");
        // The slices computed again over every question: a single run's.
        for key in ["slices", "weak_slices", "slices_not_computed", "statistics"] {
            assert_eq!(doc[key], one[key], "{name}: {key}");
        }
        assert!(!doc["slices"].as_array().unwrap().is_empty());
        assert_eq!(doc["features"], one["features"]);
        assert_eq!(read_json(merged.join("metrics.json")), doc);
    }

    let s: Vec<PathBuf> = (1..=3).map(|i| t.join(format!("v2-shard{i}"))).collect();
    let out = t.join("bad");
    refused(
        &merge(&[&s[0], &s[1]], &out, &[]),
        &["missing shard(s) 3/3"],
    );
    refused(
        &merge(&[&s[0], &s[1], &s[1], &s[2]], &out, &[]),
        &["shard 2/3 given twice"],
    );
    refused(
        &merge(&[&s[0], &s[1], &t.join("v1-shard3")], &out, &[]),
        &["not shards of the same evaluation", "data_sha256"],
    );
    let other = t.join("v2-other3");
    ok(&eval(
        "tests/fixtures/squad/v2-long.json",
        "oracle",
        &other,
        &["--doc-stride", "64", "--shard", "3/3"],
    ));
    refused(
        &merge(&[&s[0], &s[1], &other], &out, &[]),
        &["doc_stride: \"48\" in the first, \"64\" now"],
    );
    refused(
        &merge(&[&s[0], &s[1], &t.join("v2-single")], &out, &[]),
        &["not a shard"],
    );
    // --data must be the file the shards evaluated.
    refused(
        &merge(
            &s.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
            &out,
            &["--data", "tests/fixtures/squad/v1-long.json"],
        ),
        &["is not the data the shards evaluated"],
    );
    // The recorded path moved: --data names the same file elsewhere.
    let copy = t.join("copy.json");
    std::fs::copy(root().join("tests/fixtures/squad/v2-long.json"), &copy).unwrap();
    ok(&merge(
        &s.iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &t.join("moved"),
        &["--data", copy.to_str().unwrap()],
    ));
    assert_same_files(
        &t.join("moved"),
        &t.join("v2-single"),
        &["predictions.json"],
    );
}

#[test]
fn a_shard_outside_one_to_n_is_a_usage_error() {
    for bad in ["0/3", "4/3", "2", "x/y"] {
        let o = bertqa(&[
            "eval",
            "--data",
            "d.json",
            "--model",
            "m",
            "--output-dir",
            "o",
            "--shard",
            bad,
        ]);
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("is not a shard I/N with 1 <= I <= N"),
            "{stderr}"
        );
    }
}
