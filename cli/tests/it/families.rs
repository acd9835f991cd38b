//! The BERT family's other QA models by run_qa's rules (docs/algorithm.md, "run_qa's
//! rules"; docs/testbed.md, the family models): `eval` writes the files of our golden
//! generator (scripts/golden/golden_run_qa.py, transformers' fast tokenizer and numpy)
//! over gRPC and HTTP, the tokenizer oracles score 100, a two-input export answers as its
//! three-input twin, `ask` answers with the offsets' character spans, `features` writes
//! the offsets, and bad tokenizers or a question without room are exit 2 with nothing
//! written. Against the suite's shared server.

use std::path::Path;

use crate::common::{
    assert_fails_with, assert_same_outputs, assert_schema, bertqa, eval_args, fixture, http_url,
    journaled, json_of, ok, read, read_bytes, root, server, spawn_bertqa, wait_for_journal, SAMPLE,
};

const TOKENIZERS: &str = "tests/fixtures/tokenizers";

/// The golden runs: model, tokenizer folder, golden name, data (all SQuAD 2.0 but the
/// last).
fn golden_runs() -> Vec<(&'static str, &'static str, &'static str, String)> {
    let v2 = fixture("v2-long.json");
    let mut runs = Vec::new();
    for (model, tokenizer) in [
        ("tiny-distilbert", "distilbert"),
        ("tiny-roberta", "roberta"),
        ("tiny-deberta-v3", "deberta-v3"),
        ("tiny-bert-2in", "distilbert"),
        ("tiny-bert-3in", "distilbert"),
        ("oracle-wordpiece", "distilbert"),
        ("oracle-bpe", "roberta"),
        ("oracle-unigram", "deberta-v3"),
    ] {
        runs.push((model, tokenizer, "sample-v2", SAMPLE.to_string()));
        runs.push((model, tokenizer, "v2-long", v2.clone()));
    }
    runs.push((
        "tiny-distilbert",
        "distilbert",
        "v1-long",
        fixture("v1-long.json"),
    ));
    runs
}

/// `eval` by run_qa's rules: named for the WordPiece tokenizer (it defaults to
/// run_squad's), by default for the others.
fn eval_run_qa(url: &str, protocol: &str, model: &str, tokenizer: &str, data: &str, out: &Path) {
    let rules: &[&str] = match tokenizer {
        "distilbert" => &["--postprocess", "run-qa"],
        _ => &[],
    };
    let tokenizer = format!("{TOKENIZERS}/{tokenizer}");
    let extra = [
        &[
            "--url",
            url,
            "--protocol",
            protocol,
            "--tokenizer",
            &tokenizer,
        ][..],
        rules,
    ]
    .concat();
    ok(&bertqa(&eval_args(data, model, out, &extra)));
}

/// The float32 value a probability line holds, and whether it is one (run_qa writes a
/// float32 probability widened, or a float64 one where the placeholder is in the list).
fn probability(line: &str) -> Option<f64> {
    let v = line.trim().strip_prefix("\"probability\": ")?;
    Some(v.trim_end_matches(',').parse().expect("a number"))
}

/// `predictions.json` and `null_odds.json` byte-identical to the golden's;
/// `nbest_predictions.json` line for line (keys, their order, texts, logits) but for the
/// probabilities, within 4 float32 ulp (run_qa's numpy `exp` is vectorised).
fn assert_run_qa_files(out: &Path, golden: &Path) {
    for f in ["predictions.json", "null_odds.json"] {
        if golden.join(f).exists() {
            assert!(
                read_bytes(out.join(f)) == read_bytes(golden.join(f)),
                "{f} differs from {}",
                golden.display()
            );
        }
    }
    let (ours, theirs) = (
        read(out.join("nbest_predictions.json")),
        read(golden.join("nbest_predictions.json")),
    );
    assert_eq!(ours.lines().count(), theirs.lines().count(), "{golden:?}");
    for (a, b) in ours.lines().zip(theirs.lines()) {
        match (probability(a), probability(b)) {
            (Some(x), Some(y)) => {
                let bits = (y as f32).to_bits();
                let ulp = f64::from(f32::from_bits(bits + 1) - f32::from_bits(bits));
                assert!(
                    (x - y).abs() <= 4.0 * ulp,
                    "probability {x} against {y} in {golden:?}"
                );
            }
            _ => assert_eq!(a, b, "{golden:?}"),
        }
    }
}

fn golden_dir(model: &str, name: &str) -> std::path::PathBuf {
    root().join("tests/golden/run-qa").join(model).join(name)
}

#[test]
fn eval_by_run_qa_rules_writes_the_golden_generators_files_over_grpc() {
    let tmp = tempfile::tempdir().unwrap();
    for (model, tokenizer, name, data) in golden_runs() {
        let out = tmp.path().join(format!("{model}-{name}"));
        eval_run_qa(&server().url, "grpc", model, tokenizer, &data, &out);
        assert_run_qa_files(&out, &golden_dir(model, name));
    }
}

#[test]
fn eval_by_run_qa_rules_writes_the_golden_generators_files_over_http() {
    let tmp = tempfile::tempdir().unwrap();
    for (model, tokenizer, name, data) in golden_runs()
        .into_iter()
        .filter(|r| r.2 == "sample-v2" && !r.0.starts_with("oracle"))
    {
        let out = tmp.path().join(model);
        eval_run_qa(&http_url(), "http", model, tokenizer, &data, &out);
        assert_run_qa_files(&out, &golden_dir(model, name));
    }
}

/// Each tokenizer oracle scores 100 EM and F1 on the sample (every gold answer there
/// falls on its tokenizer's token boundaries), with the tokenizer's default rules for
/// the two that are not WordPiece.
#[test]
fn each_tokenizer_oracle_scores_100() {
    let tmp = tempfile::tempdir().unwrap();
    for (model, tokenizer, rules) in [
        (
            "oracle-wordpiece",
            "distilbert",
            &["--postprocess", "run-qa"][..],
        ),
        ("oracle-bpe", "roberta", &[][..]),
        ("oracle-unigram", "deberta-v3", &[][..]),
    ] {
        let tokenizer = format!("{TOKENIZERS}/{tokenizer}");
        let mut extra = vec!["--url", &server().url, "--tokenizer", &tokenizer, "--json"];
        extra.extend_from_slice(rules);
        let o = bertqa(&eval_args(SAMPLE, model, &tmp.path().join(model), &extra));
        let v = json_of(&o);
        assert_schema("eval", &v);
        assert_eq!(v["postprocess"], "run-qa", "{model}");
        assert_eq!(v["metrics"]["exact"], 100.0, "{model}: {v:#}");
        assert_eq!(v["metrics"]["f1"], 100.0, "{model}: {v:#}");
    }
}

/// A two-input export whose token-type rows are equal answers as its three-input twin
/// under run_squad's rules with the BERT vocabulary: the same files, to the byte.
#[test]
fn a_two_input_export_writes_its_three_input_twins_files() {
    let tmp = tempfile::tempdir().unwrap();
    let url = &server().url;
    for data in [SAMPLE.to_string(), fixture("v2-long.json")] {
        let [two, three] = ["tiny-bert-2in", "tiny-bert-3in"].map(|m| {
            let out = tmp.path().join(format!("{m}-{}", data.len()));
            ok(&bertqa(&eval_args(&data, m, &out, &["--url", url])));
            out
        });
        assert_same_outputs(&two, &three);
    }
}

/// `ask` of a SentencePiece model: the answer's character span is its tokens' offsets
/// (the space before a word included, as run_qa keeps it).
#[test]
fn ask_answers_with_the_character_spans_of_the_offsets() {
    let sample: serde_json::Value = serde_json::from_str(&read(root().join(SAMPLE))).unwrap();
    let paragraph = &sample["data"][0]["paragraphs"][0];
    let context = paragraph["context"].as_str().unwrap();
    let question = paragraph["qas"][0]["question"].as_str().unwrap();
    let tokenizer = format!("{TOKENIZERS}/deberta-v3");
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "oracle-unigram",
        "--tokenizer",
        &tokenizer,
        "--question",
        question,
        "--context",
        context,
        "--json",
    ]);
    let v = json_of(&o);
    let a = &v["answers"][0];
    let (start, end) = (
        a["start_char"].as_u64().unwrap() as usize,
        a["end_char"].as_u64().unwrap() as usize,
    );
    let span: String = context.chars().skip(start).take(end - start).collect();
    assert_eq!(span, a["answer"].as_str().unwrap(), "{v:#}");
    let gold = paragraph["qas"][0]["answers"][0]["text"].as_str().unwrap();
    assert_eq!(span.trim_start(), gold, "{v:#}");
}

/// `features` by run_qa's rules: offsets on the context tokens only, sequence ids 0, 1
/// and null, and windows that repeat `--doc-stride` context tokens of the one before.
#[test]
fn features_by_run_qa_rules_write_offsets_and_windows_that_overlap_by_the_stride() {
    let tokenizer = format!("{TOKENIZERS}/roberta");
    let o = bertqa(&[
        "features",
        "--tokenizer",
        &tokenizer,
        "--data",
        &fixture("v2-long.json"),
        "--doc-stride",
        "64",
    ]);
    ok(&o);
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let context_ids = |f: &serde_json::Value| -> Vec<u64> {
        let ids = f["input_ids"].as_array().unwrap();
        f["sequence_ids"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_u64() == Some(1))
            .map(|(i, _)| ids[i].as_u64().unwrap())
            .collect()
    };
    for line in &lines {
        assert_schema("features", line);
    }
    let mut overlapping = 0;
    for (f, next) in lines.iter().zip(&lines[1..]) {
        let (seq, offsets) = (
            f["sequence_ids"].as_array().unwrap(),
            f["offsets"].as_array().unwrap(),
        );
        assert_eq!(seq.len(), offsets.len());
        for (s, o) in seq.iter().zip(offsets) {
            assert_eq!(s.as_u64() == Some(1), !o.is_null(), "{f}");
        }
        assert!(
            seq[0].is_null() && seq[1] == 0,
            "RoBERTa's <s> then the question"
        );
        if next["qas_id"] == f["qas_id"] {
            let (a, b) = (context_ids(f), context_ids(next));
            assert_eq!(a[a.len() - 64..], b[..64], "{}", f["qas_id"]);
            overlapping += 1;
        }
    }
    assert!(overlapping > 5, "{overlapping} overlapping pairs");
    // RoBERTa pads with id 1 (a question's last window is short).
    let last = lines.last().unwrap();
    assert!(last["tokens"].as_array().unwrap().len() < 384);
    assert_eq!(last["input_ids"].as_array().unwrap().last().unwrap(), 1);
}

/// Tokenizers bertqa cannot use, and a question that leaves no room for its context:
/// exit 2 naming the file or the question and what to do, with nothing written.
#[test]
fn bad_tokenizers_and_a_question_without_room_exit_2_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let roberta = read(root().join(TOKENIZERS).join("roberta/tokenizer.json"));
    let mut json: serde_json::Value = serde_json::from_str(&roberta).unwrap();
    let write = |name: &str, text: &str| {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tokenizer.json"), text).unwrap();
        dir
    };
    let not_json = write("not-json", "{\"version\": \"1.0\", oops");
    json["model"]["type"] = "Foo".into();
    let unknown = write("unknown-model", &json.to_string());
    let mut json: serde_json::Value = serde_json::from_str(&roberta).unwrap();
    json["post_processor"] = serde_json::Value::Null;
    let no_pair = write("no-pair-template", &json.to_string());
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let cases: [(&Path, &[&str]); 4] = [
        (&not_json, &["tokenizer.json:1:", "not JSON"]),
        (
            &unknown,
            &["tokenizer.json", "WordPiece, BPE, Unigram or WordLevel"],
        ),
        (&no_pair, &["tokenizer.json", "pair template"]),
        (&empty, &["no tokenizer.json", "save_pretrained"]),
    ];
    for (i, (tokenizer, want)) in cases.into_iter().enumerate() {
        let out = tmp.path().join(format!("out{i}"));
        let extra = [
            "--url",
            &server().url,
            "--tokenizer",
            tokenizer.to_str().unwrap(),
        ];
        let o = bertqa(&eval_args(SAMPLE, "tiny-roberta", &out, &extra));
        assert_fails_with(&o, want);
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
    }
    // A question of 380 words: no room for its 600-word context beside the overlap.
    let context: Vec<String> = (0..600).map(|i| format!("word{i}")).collect();
    let question = ["question"; 380].join(" ");
    let data = serde_json::json!({"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": context.join(" "),
        "qas": [{"id": "long-question", "question": question,
                 "answers": [], "is_impossible": true}]}]}]});
    let file = tmp.path().join("long-question.json");
    std::fs::write(&file, data.to_string()).unwrap();
    let out = tmp.path().join("out-long");
    let tokenizer = format!("{TOKENIZERS}/roberta");
    let extra = ["--url", &server().url, "--tokenizer", &tokenizer];
    let o = bertqa(&eval_args(
        file.to_str().unwrap(),
        "tiny-roberta",
        &out,
        &extra,
    ));
    assert_fails_with(
        &o,
        &["\"long-question\"", "--doc-stride", "--max-seq-length"],
    );
    assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none());
}

/// A run by run_qa's rules killed midway resumes from its journal to the whole run's
/// files without sending the journaled windows again; its saved logits decode to the
/// same files (`--save-logits`, `--from-logits`).
#[test]
fn a_run_qa_run_resumes_and_decodes_saved_logits_to_the_same_files() {
    let tmp = tempfile::tempdir().unwrap();
    let tokenizer = format!("{TOKENIZERS}/distilbert");
    let data = fixture("v2-long.json");
    let whole = tmp.path().join("whole");
    // The oracle that sleeps on every request, on windows that overlap by most of their
    // tokens (so there are many): the run is still going when it is killed.
    let args = |out: &Path, extra: &[&str]| {
        let flags = [
            "--url",
            &server().url,
            "--tokenizer",
            &tokenizer,
            "--postprocess",
            "run-qa",
            "--doc-stride",
            "320",
        ];
        eval_args(&data, "oracle-slow", out, &[&flags[..], extra].concat())
    };
    ok(&bertqa(&args(&whole, &["--save-logits"])));
    let killed = tmp.path().join("killed");
    let one_at_a_time = ["--batch-size", "1", "--concurrency", "1"];
    let mut child = spawn_bertqa(&args(&killed, &one_at_a_time));
    wait_for_journal(&mut child, &killed, 20);
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled(&killed);
    let o = bertqa(&args(
        &killed,
        &[&one_at_a_time[..], &["--resume", "--json"]].concat(),
    ));
    let v = json_of(&o);
    let features = v["features"].as_u64().unwrap();
    assert_eq!(
        v["requests"].as_u64().unwrap(),
        features - kept as u64,
        "{v:#}"
    );
    assert_same_outputs(&whole, &killed);
    let again = tmp.path().join("again");
    let logits = whole.join("logits.bin");
    ok(&bertqa(&[
        "eval",
        "--data",
        &data,
        "--tokenizer",
        &tokenizer,
        "--postprocess",
        "run-qa",
        "--doc-stride",
        "320",
        "--from-logits",
        logits.to_str().unwrap(),
        "--output-dir",
        again.to_str().unwrap(),
        "--quiet",
    ]));
    assert_same_outputs(&whole, &again);
}

/// `compare` of a BERT deployment against a RoBERTa one, each with its own tokenizer
/// and rules: agreement and scores; logits compared only on windows both made (none).
/// The RoBERTa model's files are eval's.
#[test]
fn compare_of_two_families_reports_agreement_and_compares_no_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let compare = |model_tokenizer: &str, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "compare",
            "--url",
            &server().url,
            "--models",
            "tiny-bert-3in,tiny-roberta",
            "--model-tokenizer",
            model_tokenizer,
            "--data",
            SAMPLE,
            "--output-dir",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        bertqa(&args)
    };
    let out = tmp.path().join("cmp");
    let roberta = format!("tiny-roberta={TOKENIZERS}/roberta");
    let v = json_of(&compare(&roberta, &out, &["--json"]));
    assert_schema("compare", &v);
    let c = &v["comparisons"][0];
    assert_eq!(c["model"], "tiny-roberta", "{v:#}");
    assert!(c["agreement"].as_f64().unwrap() < 1.0, "{v:#}");
    assert_eq!(c["windows"]["compared"], 0, "{v:#}");
    assert!(c["start_logits"]["linf"].is_null(), "{v:#}");
    assert_eq!(
        read_bytes(out.join("tiny-roberta/predictions.json")),
        read_bytes(golden_dir("tiny-roberta", "sample-v2").join("predictions.json"))
    );
    // An entry for a model not compared is refused.
    let distilbert = format!("tiny-distilbert={TOKENIZERS}/distilbert");
    let o = compare(&distilbert, &tmp.path().join("refused"), &[]);
    assert_fails_with(&o, &["--model-tokenizer", "tiny-distilbert"]);
}
