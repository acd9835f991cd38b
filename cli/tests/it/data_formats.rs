//! `--data` in every format users hold: Hugging Face rows (JSON Lines, Parquet written
//! by pyarrow), MRQA JSON Lines, gzip, standard input and several files as one give the
//! predictions of the same questions in SQuAD JSON, byte for byte; broken files of each
//! format exit 2 naming the place and the field; MRQA gold data is scored by its rules.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::formats::{converted, python_with};
use crate::common::{
    assert_fails_with, assert_same_outputs, bertqa, json_of, read_json, root, server, show, SAMPLE,
};

/// `eval` of the oracle on `data` (one or more `--data`) into `out`: the JSON report.
fn eval(data: &[&Path], out: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<String> = vec!["eval".into(), "--model".into(), "oracle".into()];
    for d in data {
        args.extend(["--data".into(), d.display().to_string()]);
    }
    args.extend(["--url".into(), server().url.clone(), "--output-dir".into()]);
    args.extend([out.display().to_string(), "--json".into(), "--quiet".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    json_of(&bertqa(&args))
}

#[test]
fn every_format_gives_the_predictions_of_the_squad_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    let conv = converted(SAMPLE);
    let c = |n: &str| conv.join(n);
    let squad = eval(&[&root().join(SAMPLE)], &dir("squad"), &[]);
    let runs: Vec<(&str, Vec<PathBuf>)> = vec![
        ("jsonl", vec![c("rows.jsonl")]),
        ("jsonl-gz", vec![c("rows.jsonl.gz")]),
        ("parquet", vec![c("rows.parquet")]),
        (
            "parquet-shards",
            vec![c("rows-1.parquet"), c("rows-2.parquet")],
        ),
    ];
    for (name, files) in &runs {
        let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let v = eval(&files, &dir(name), &[]);
        assert_same_outputs(&dir("squad"), &dir(name));
        assert_eq!(v["metrics"], squad["metrics"], "{name}");
    }
    // Standard input.
    let o = Command::new(env!("CARGO_BIN_EXE_bertqa"))
        .args([
            "eval",
            "--model",
            "oracle",
            "--data",
            "-",
            "--url",
            &server().url,
        ])
        .args([
            "--output-dir",
            dir("stdin").to_str().unwrap(),
            "--json",
            "--quiet",
        ])
        .current_dir(root())
        .stdin(Stdio::from(
            std::fs::File::open(c("rows.jsonl.gz")).unwrap(),
        ))
        .output()
        .unwrap();
    assert_eq!(json_of(&o)["metrics"], squad["metrics"]);
    assert_same_outputs(&dir("squad"), &dir("stdin"));
    // MRQA holds the answerable questions: as the same questions in SQuAD JSON.
    let answerable = eval(&[&c("answerable.json")], &dir("answerable"), &[]);
    let mrqa = eval(&[&c("mrqa.jsonl.gz")], &dir("mrqa"), &[]);
    assert_same_files(&dir("answerable"), &dir("mrqa"));
    assert_eq!(mrqa["metrics"], answerable["metrics"]);
    assert_eq!(mrqa["metrics"]["exact_match"], 100.0);
}

fn assert_same_files(a: &Path, b: &Path) {
    crate::common::assert_same_files(a, b, &["predictions.json", "nbest_predictions.json"]);
}

#[test]
fn the_report_says_which_rules_applied() {
    let tmp = tempfile::tempdir().unwrap();
    let mrqa = converted(SAMPLE).join("mrqa.jsonl.gz");
    let o = bertqa(&[
        "eval",
        "--model",
        "oracle",
        "--data",
        mrqa.to_str().unwrap(),
        "--url",
        &server().url,
        "--output-dir",
        tmp.path().to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(" (MRQA rules, postprocess nvidia): "),
        "{text}"
    );
}

/// MRQA's official rules on a fixture worked out by hand:
/// - m1 "1889." against ["1889", "in 1889"]: the period goes in normalisation, so EM 1
///   and F1 1 (against "1889");
/// - m2 "in Paris" against ["Paris"]: EM 0; tokens [in, paris] against [paris], one in
///   common: precision 1/2, recall 1, F1 = 2·(1/2·1)/(1/2+1) = 2/3;
/// - m3 "the mat" against ["on the mat", "the mat"]: "the" is removed, "mat" = "mat":
///   EM 1, F1 1 (against "the mat");
/// - m4 has no prediction: it counts, with 0 and 0; "zz" is not a question: ignored.
///
/// exact_match = 100 · (1 + 0 + 1 + 0) / 4 = 50; f1 = 100 · (1 + 2/3 + 1 + 0) / 4 =
/// 66.666…, as Python computes it: 66.66666666666666.
#[test]
fn mrqa_gold_data_is_scored_by_the_mrqa_rules() {
    let o = bertqa(&[
        "score",
        "--data",
        "tests/fixtures/mrqa/golden.jsonl",
        "--predictions",
        "tests/fixtures/mrqa/golden-predictions.json",
        "--json",
    ]);
    let v = json_of(&o);
    assert_eq!(v["rules"], "mrqa");
    assert_eq!(v["metrics"]["exact_match"], 50.0);
    assert_eq!(v["metrics"]["f1"], 66.66666666666666);
    assert_eq!(v["questions"], 4);
    assert_eq!(v["missing_predictions"]["count"], 1);
    assert_eq!(v["unknown_predictions"], 1);
}

#[test]
fn broken_inputs_exit_2_naming_the_place_and_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let rows = std::fs::read_to_string(converted(SAMPLE).join("rows.jsonl")).unwrap();
    let first_two: String = rows.lines().take(2).map(|l| format!("{l}\n")).collect();
    let truncated = write("truncated.jsonl", &rows.as_bytes()[..rows.len() / 2]);
    let missing = write(
        "missing.jsonl",
        format!(
            "{first_two}{}\n",
            r#"{"id": "x", "context": "c", "answers": {"text": [], "answer_start": []}}"#
        )
        .as_bytes(),
    );
    let wrong = write(
        "wrong.jsonl",
        r#"{"id": "x", "context": "c", "question": "q", "answers": {"text": "a", "answer_start": [0]}}"#.as_bytes(),
    );
    let gz = std::fs::read(converted(SAMPLE).join("rows.jsonl.gz")).unwrap();
    let corrupt = write("corrupt.jsonl.gz", &gz[..gz.len() - 20]);
    let mrqa = write("mrqa.jsonl", b"{\"header\": {}}\n{\"context\": \"c\"}\n");
    let other = tmp.path().join("other.parquet");
    python_with(
        "import sys, pyarrow as pa, pyarrow.parquet as pq; \
         pq.write_table(pa.table({'a': [1, 2], 'b': ['x', 'y']}), sys.argv[1])",
        &[&other],
    );
    let line_of_half = rows[..rows.len() / 2].lines().count();
    let cases: Vec<(&Path, Vec<String>)> = vec![
        (
            &truncated,
            vec![format!("truncated.jsonl:{line_of_half}:"), "EOF".into()],
        ),
        (
            &missing,
            vec!["missing.jsonl:3:".into(), "missing field `question`".into()],
        ),
        (
            &wrong,
            vec!["wrong.jsonl:1:".into(), "field `answers.text`".into()],
        ),
        (
            &corrupt,
            vec!["corrupt.jsonl.gz: a gzip file that cannot be decompressed".into()],
        ),
        (
            &mrqa,
            vec!["mrqa.jsonl:2:".into(), "missing field `qas`".into()],
        ),
        (
            &other,
            vec![
                "other.parquet: a Parquet file without the column `id`".into(),
                "its columns: a, b".into(),
            ],
        ),
    ];
    for (path, want) in cases {
        let out = tmp.path().join(format!(
            "out-{}",
            path.file_name().unwrap().to_string_lossy()
        ));
        let o = bertqa(&[
            "eval",
            "--model",
            "oracle",
            "--data",
            path.to_str().unwrap(),
            "--url",
            &server().url,
            "--output-dir",
            out.to_str().unwrap(),
        ]);
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        assert_fails_with(&o, &want);
        // Nothing is written before the data is read.
        assert!(!out.join("predictions.json").exists(), "{}", path.display());
    }
}

#[test]
fn resume_cannot_continue_standard_input_and_any_data_converts_to_squad() {
    let tmp = tempfile::tempdir().unwrap();
    let o = bertqa(&[
        "eval",
        "--model",
        "oracle",
        "--data",
        "-",
        "--resume",
        "--output-dir",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_fails_with(&o, &["--resume cannot continue a run on standard input"]);
    // Parquet → SQuAD JSON → the same features as the original file.
    let o = bertqa(&[
        "features",
        "--data",
        converted(SAMPLE).join("rows.parquet").to_str().unwrap(),
        "--to",
        "squad",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let squad = tmp.path().join("back.json");
    std::fs::write(&squad, &o.stdout).unwrap();
    let v: Value = read_json(&squad);
    assert_eq!(v["version"], "v2.0");
    let features = |p: &Path| bertqa(&["features", "--data", p.to_str().unwrap()]).stdout;
    assert_eq!(features(&squad), features(&root().join(SAMPLE)));
}

/// `--resume` continues a run on gzip-compressed rows: the journal's fingerprint is the
/// content's, so the answers after SIGKILL and `--resume` are an uninterrupted run's.
#[test]
fn resume_continues_a_run_on_compressed_rows() {
    use crate::common::{journaled, ok, slow_server, spawn_bertqa, wait_for_journal};
    let s = slow_server(None);
    let tmp = tempfile::tempdir().unwrap();
    let gz = converted("tests/fixtures/squad/v2-long.json").join("rows.jsonl.gz");
    let gz = gz.to_str().unwrap();
    let args = |out: &Path, extra: &[&'static str]| {
        let mut a = crate::resume::args(&s.url, "oracle-slow", out, extra)
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
        a[2] = gz.to_string(); // --data
        a
    };
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    ok(&bertqa(&args(&reference, &[])));
    let mut child = spawn_bertqa(&args(&out, &[]));
    wait_for_journal(&mut child, &out, 30);
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled(&out);
    let o = bertqa(&args(&out, &["--resume"]));
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{kept} features already answered")),
        "{}",
        show(&o)
    );
    crate::common::assert_same_files(
        &reference,
        &out,
        &[
            "predictions.json",
            "nbest_predictions.json",
            "null_odds.json",
        ],
    );
}
