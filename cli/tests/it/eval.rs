//! `bertqa eval` and `bertqa ask` end to end on the real local Triton.

use std::path::Path;

use serde_json::Value;

use crate::common::{
    assert_same_files, assert_same_outputs, assert_schema, bertqa, eval, fixture, json_of, read,
    read_json, root, server, show, ANSWER_FILES,
};

fn per_question(dir: &Path) -> Vec<Value> {
    read(dir.join("per_question.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn oracle_scores_100_on_our_fixtures() {
    let tmp = tempfile::tempdir().unwrap();
    for (data, key) in [
        (fixture("v1-long.json"), "exact_match"),
        (fixture("v2-long.json"), "exact"),
        (
            root()
                .join("data/sample-squad-v2.json")
                .display()
                .to_string(),
            "exact",
        ),
    ] {
        let out = tmp.path().join(Path::new(&data).file_stem().unwrap());
        let o = eval(&data, "oracle", &out, &["--json"]);
        let v = json_of(&o);
        // Every question answered exactly: each window, id, segment, mask and the
        // decoding are right, since the oracle peaks only on the true answer pieces.
        assert_eq!(v["metrics"][key], 100.0, "{data}: {}", v["metrics"]);
        assert_eq!(v["metrics"]["f1"], 100.0);
        assert!(
            v["features"].as_u64().unwrap() > v["questions"].as_u64().unwrap(),
            "multi-window fixture"
        );
        assert!(
            out.join("predictions.json").exists() && out.join("nbest_predictions.json").exists()
        );
        assert_eq!(out.join("null_odds.json").exists(), key == "exact");
    }
}

#[test]
fn oracle_misses_on_the_unicode_fixture_are_the_explained_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let o = eval(
        &fixture("unicode.json"),
        "oracle",
        tmp.path(),
        &["--version-2-with-negative"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let missed: Vec<String> = per_question(tmp.path())
        .iter()
        .filter(|q| q["exact"] != 1.0)
        .map(|q| q["id"].as_str().unwrap().to_string())
        .collect();
    // u-2: the oracle tokenizes with transformers' BertTokenizer, which lower-cases
    //      "ΟΔΟΣ?" to "οδοσ" where the reference (Python str.lower on the whole
    //      whitespace token) gives the final sigma "οδος": the oracle cannot recognise a
    //      question the reference tokenizes differently (algorithm §3.7).
    // u-3: the question contains a literal "[SEP]", which both tokenizers keep as the
    //      special token, so the question ends early for anyone reading the window;
    //      the gold answer "text[SEP]glued" contains it too.
    // u-4: the gold answer 한국어 is the tail of the whitespace word
    //      "中文字符和日本語のテキスト、한국어"; the reference maps answers back through whole
    //      words (get_final_text, §6.7), so no client can output just the tail.
    assert_eq!(missed, ["u-2", "u-3", "u-4"]);
}

#[test]
fn output_does_not_depend_on_concurrency_arrival_order_or_transport() {
    let tmp = tempfile::tempdir().unwrap();
    // Short windows give many features; the jitter model answers out of order.
    let window = [
        "--max-seq-length",
        "96",
        "--doc-stride",
        "32",
        "--batch-size",
        "1",
    ];
    let mut runs = Vec::new();
    // On a stream, responses are matched to requests by id whatever their order.
    for (c, transport) in [("1", "stream"), ("16", "stream"), ("16", "unary")] {
        let out = tmp.path().join(format!("c{c}-{transport}"));
        let mut extra: Vec<&str> = window.to_vec();
        extra.extend(["--concurrency", c, "--transport", transport, "--json"]);
        let o = eval(&fixture("v2-long.json"), "tiny-bert-jitter", &out, &extra);
        let v = json_of(&o);
        assert!(v["features"].as_u64().unwrap() >= 100, "{}", v["features"]);
        assert_eq!(v["requests"], v["features"]);
        assert_eq!(v["endpoints"][0]["transport"], transport);
        assert_eq!(v["endpoints"][0]["unary_connections"], 0);
        runs.push(out);
    }
    for other in &runs[1..] {
        let files = ["per_question.jsonl"];
        assert_same_files(&runs[0], other, &[&ANSWER_FILES[..], &files].concat());
    }
}

#[test]
fn json_output_follows_the_committed_schema_and_gates_flip_the_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v1-long.json");

    let o = eval(
        &data,
        "oracle",
        tmp.path(),
        &[
            "--json",
            "--warmup",
            "2",
            "--min-exact",
            "99",
            "--min-f1",
            "99.5",
            "--max-p99-ms",
            "600000",
        ],
    );
    let v = json_of(&o);
    assert_schema("eval", &v);
    assert_eq!(v["run"]["data_sha256"], sha256_hex(read(&data).as_bytes()));
    assert_eq!(v["gates"].as_array().unwrap().len(), 3);
    // The two warm-up requests are in no figure: requests = ceil(features / batch).
    let (features, batch) = (
        v["features"].as_u64().unwrap(),
        v["batch_size"].as_u64().unwrap(),
    );
    assert_eq!(v["requests"].as_u64().unwrap(), features.div_ceil(batch));
    // metrics.json is the same document.
    let m: Value = read_json(tmp.path().join("metrics.json"));
    assert_schema("eval", &m);
    assert_eq!(m["metrics"], v["metrics"]);
    let lat = &v["latency_ms"];
    assert!(lat["p50"].as_f64().unwrap() <= lat["p99"].as_f64().unwrap());
    assert!(lat["p99"].as_f64().unwrap() <= lat["max"].as_f64().unwrap());

    // A v2 document validates too.
    let o = eval(
        &fixture("v2-long.json"),
        "tiny-bert-hf",
        &tmp.path().join("v2"),
        &["--json"],
    );
    let v = json_of(&o);
    assert_schema("eval", &v);
    assert!(v["metrics"]["best_f1_thresh"].is_number());

    for (flag, value) in [
        ("--min-exact", "100.5"),
        ("--min-f1", "101"),
        ("--max-p99-ms", "0.001"),
    ] {
        let o = eval(&data, "oracle", &tmp.path().join("gate"), &[flag, value]);
        assert_eq!(o.status.code(), Some(1), "{flag}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("gate failed: {flag} {value}")),
            "{err}"
        );
        // The run completed: its outputs are there.
        assert!(tmp.path().join("gate/predictions.json").exists());
    }
}

/// `bertqa eval --from-logits`: decodes saved logits, no server.
fn from_logits(data: &str, logits: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "eval",
        "--data",
        data,
        "--from-logits",
        logits.to_str().unwrap(),
        "--output-dir",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

#[test]
fn saved_logits_decode_again_without_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v2-long.json");
    let first = tmp.path().join("first");
    let o = eval(&data, "tiny-bert", &first, &["--save-logits"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    // Same threshold: the same files, no server involved (a dead URL is given).
    let again = tmp.path().join("again");
    let logits = first.join("logits.bin");
    let o = from_logits(&data, &logits, &again, &["--url", "127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_same_outputs(&first, &again);
    // At another threshold the answers move towards "no answer".
    let high = tmp.path().join("high");
    let o = from_logits(
        &data,
        &logits,
        &high,
        &["--null-score-diff-threshold", "-1000"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let p: Value = read_json(high.join("predictions.json"));
    assert!(p.as_object().unwrap().values().all(|a| a == ""), "{p}");
}

#[test]
fn ask_answers_with_character_spans_and_no_answer() {
    let context = "The lighthouse at Varne Point was built in 1874 by the engineer Miriam Holt, who \
                   designed its tower of granite blocks. The last keeper, Thomas Reed, left in 1965.";
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "oracle",
        "--json",
        "--question",
        "Who designed the lighthouse at Varne Point?",
        "--question",
        "Who was the last keeper?",
        "--context",
        context,
    ]);
    // The oracle only knows questions of its data files; these come from
    // data/sample-squad-v2.json, whose context differs but whose answers occur here.
    let v = json_of(&o);
    let chars: Vec<char> = context.chars().collect();
    for (a, want) in v["answers"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["Miriam Holt", "Thomas Reed"])
    {
        assert_eq!(a["answer"], want);
        let (s, e) = (
            a["start_char"].as_u64().unwrap() as usize,
            a["end_char"].as_u64().unwrap() as usize,
        );
        assert_eq!(chars[s..e].iter().collect::<String>(), want);
        assert!(a["probability"].as_f64().unwrap() > 0.9);
    }
    // SQuAD 2.0 rules: an unanswerable question of the sample gets "no answer".
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "oracle",
        "--version-2-with-negative",
        "--question",
        "Who painted the lighthouse red?",
        "--context",
        context,
        "--n-best",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("A: (no answer)"), "{out}");
    assert!(out.contains(" 2. "), "{out}");
}

/// When no span can answer (here none is short enough), the text
/// says "no answer" instead of the reference's placeholder "empty", which reads like an
/// answer; the JSON keeps the reference's text.
#[test]
fn ask_says_no_answer_for_the_empty_placeholder() {
    let ask = |extra: &[&str]| {
        let mut args = vec![
            "ask",
            "--url",
            &server().url,
            "--model",
            "tiny-bert",
            "--max-answer-length",
            "0",
            "--question",
            "Who built it?",
            "--context",
            "The lighthouse was built in 1874 by Miriam Holt.",
        ];
        args.extend_from_slice(extra);
        let o = bertqa(&args);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = ask(&[]);
    assert!(text.contains("\nA: (no answer)\n"), "{text}");
    assert!(!text.contains("empty"), "{text}");
    let v: Value = serde_json::from_str(&ask(&["--json"])).unwrap();
    assert_eq!(v["answers"][0]["answer"], "empty", "{v:#}");
}

/// `eval` and `score` print the same metrics the same way (three
/// decimals); the JSON keeps them in full.
#[test]
fn eval_and_score_text_reports_print_metrics_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v1-long.json");
    let o = eval(&data, "tiny-bert", tmp.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let eval_text = String::from_utf8_lossy(&o.stdout).into_owned();
    let preds = tmp.path().join("predictions.json");
    let score = |extra: &[&str]| {
        let mut args = vec![
            "score",
            "--data",
            &data,
            "--predictions",
            preds.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = bertqa(&args);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let score_text = score(&[]);
    let value = |text: &str, key: &str| -> String {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no {key} in {text}"));
        line.split_whitespace().nth(1).unwrap().to_string()
    };
    let metrics: Value = read_json(tmp.path().join("metrics.json"));
    let json: Value = serde_json::from_str(&score(&["--json"])).unwrap();
    for key in ["exact_match", "f1"] {
        let shown = value(&eval_text, key);
        assert_eq!(shown, value(&score_text, key), "{eval_text}\n{score_text}");
        let full = metrics["metrics"][key].as_f64().unwrap();
        assert_eq!(shown, format!("{full:.3}"));
        assert_eq!(
            json["metrics"][key].as_f64().unwrap(),
            full,
            "full precision in JSON"
        );
    }
}

/// The text report's lines on bertqa's own workings (padding, how
/// inputs and requests travelled, the client's share) show with `-v` only; without it,
/// a run that bertqa's CPU limited (the `null` model answers at once, so the client is
/// the limit) ends its figures with one plain sentence, and a run the server limited
/// (`oracle-slow`, one feature per request) says nothing of the kind.
#[test]
fn internal_report_lines_need_v_and_a_cpu_limited_run_says_so_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v2-long.json");
    // Eight copies of the file's articles (ids made distinct), in windows 8 pieces
    // apart: about 3,000 features, a run of most of a second.
    let mut doc: Value = read_json(&data);
    let articles = doc["data"].to_string();
    let mut copies: Vec<Value> = Vec::new();
    for i in 0..8 {
        let copy = articles.replace("\"id\":\"v2-", &format!("\"id\":\"v2-{i}-"));
        copies.extend(serde_json::from_str::<Vec<Value>>(&copy).unwrap());
    }
    doc["data"] = Value::from(copies);
    let big = tmp.path().join("big.json");
    std::fs::write(&big, doc.to_string()).unwrap();
    let big = big.to_str().unwrap();
    let internal = [
        "padding      ",
        "inputs       ",
        "requests     ",
        "client       ",
    ];
    let sentence = "more --concurrency will not help; --shard over machines will";
    let many = ["--doc-stride", "8"];
    let o = eval(big, "null", &tmp.path().join("plain"), &many);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let metrics: Value = read_json(tmp.path().join("plain/metrics.json"));
    assert_eq!(
        metrics["client"]["cpu_limited"], true,
        "{:#}",
        metrics["client"]
    );
    for line in internal {
        assert!(!text.contains(line), "{line:?} without -v:\n{text}");
    }
    let said = text
        .lines()
        .find(|l| l.ends_with(sentence))
        .unwrap_or_else(|| panic!("no CPU sentence:\n{text}"));
    assert!(
        said.starts_with("bertqa's CPU was the limit for "),
        "{said}"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("CPU"),
        "said once, in the report: {stderr}"
    );

    let verbose = [&many[..], &["-v"]].concat();
    let o = eval(big, "null", &tmp.path().join("verbose"), &verbose);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    for line in internal {
        assert!(text.contains(line), "{line:?} with -v:\n{text}");
    }
    assert!(text.contains("client       limited the run "), "{text}");

    let slow = ["--batch-size", "1", "--concurrency", "1", "--limit", "2"];
    let o = eval(&data, "oracle-slow", &tmp.path().join("slow"), &slow);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(!text.contains("CPU") && !text.contains(sentence), "{text}");
}

/// `-v` adds the cause chain and the context (command, server, model,
/// files) to an error; a Rust backtrace only when RUST_BACKTRACE asks for one, and then
/// only with `-v`.
#[test]
fn v_adds_causes_and_context_to_errors_and_a_backtrace_only_when_asked() {
    let run = |args: &[&str], backtrace: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_bertqa"));
        cmd.args(args)
            .current_dir(root())
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE");
        if backtrace {
            cmd.env("RUST_BACKTRACE", "1");
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", show(&o));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let url = &server().url;
    let data = fixture("v2-long.json");
    let eval = [
        "eval",
        "--data",
        &data,
        "--model",
        "no-such-model",
        "--url",
        url,
        "--output-dir",
        out.to_str().unwrap(),
    ];
    let plain = run(&eval, false);
    assert_eq!(plain.lines().count(), 1, "{plain}");
    assert!(
        plain.starts_with(&format!(
            "error: model \"no-such-model\" not found on {url}"
        )),
        "{plain}"
    );
    let verbose = run(&[&["-v"][..], &eval].concat(), false);
    assert!(verbose.starts_with(&plain), "{verbose}");
    for line in [
        "  command     eval\n".to_string(),
        format!(
            "  server      {url} (no TLS; connect timeout 5000 ms, request timeout 60000 ms)\n"
        ),
        "  model       \"no-such-model\" (version: the server's choice)\n".to_string(),
        format!("  data        {data}\n"),
    ] {
        assert!(verbose.contains(&line), "{line:?} not in\n{verbose}");
    }
    // A cause chain: each cause on a line of its own.
    let empty = tmp.path().join("empty.json");
    let preds = tmp.path().join("preds.json");
    std::fs::write(&empty, "{\"data\": []}").unwrap();
    std::fs::write(&preds, "{}").unwrap();
    let score = [
        "score",
        "--data",
        empty.to_str().unwrap(),
        "--predictions",
        preds.to_str().unwrap(),
    ];
    let plain = run(&score, false);
    let cause = "the dataset has no questions to score";
    assert_eq!(
        plain,
        format!("error: scoring {}: {cause}\n", preds.display())
    );
    let verbose = run(&[&["-v"][..], &score].concat(), false);
    assert!(
        verbose.starts_with(&format!(
            "error: scoring {}\n  caused by: {cause}\n  command     score\n",
            preds.display()
        )),
        "{verbose}"
    );
    for text in [&plain, &verbose] {
        assert!(!text.to_lowercase().contains("backtrace"), "{text}");
    }
    // Asked for: with -v only.
    assert!(!run(&score, true).contains("backtrace"));
    assert!(run(&[&["-v"][..], &score].concat(), true).contains("Stack backtrace:"));
}

#[test]
fn eval_errors_name_the_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"version\": \"1.1\", \"data\": [ {\"title\": 3,").unwrap();
    let o = eval(bad.to_str().unwrap(), "oracle", tmp.path(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!("error: {}:1:", bad.display())),
        "{err}"
    );
    let o = eval(
        &fixture("v1-long.json"),
        "tiny-bert",
        tmp.path(),
        &["--batch-size", "9"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("--batch-size 9 exceeds model \"tiny-bert\"'s max batch size 8"));
}

/// Compares two nbest/null-odds JSON documents: same keys, texts and order; numbers
/// within `tol`.
fn assert_close(want: &Value, got: &Value, tol: f64, at: &str) {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!((a - b).abs() <= tol, "{at}: {a} vs {b}");
        }
        (Value::Object(a), Value::Object(b)) => {
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "{at}"
            );
            for (k, v) in a {
                assert_close(v, &b[k], tol, &format!("{at}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_close(x, y, tol, &format!("{at}[{i}]"));
            }
        }
        (a, b) => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn postprocess_hf_reproduces_transformers_on_tiny_bert() {
    // Goldens: scripts/golden/golden_eval.sh (transformers 4.46.3's own SQuAD pipeline against
    // the same tiny-bert model on Triton).
    let tmp = tempfile::tempdir().unwrap();
    for (golden, data) in [
        ("v1-long", fixture("v1-long.json")),
        ("v2-long", fixture("v2-long.json")),
        (
            "sample-v2",
            root()
                .join("data/sample-squad-v2.json")
                .display()
                .to_string(),
        ),
    ] {
        let out = tmp.path().join(golden);
        let o = eval(&data, "tiny-bert", &out, &["--postprocess", "hf"]);
        assert_eq!(o.status.code(), Some(0), "{}", show(&o));
        let dir = root().join("tests/golden/eval").join(golden);
        assert_eq!(
            read(out.join("predictions.json")),
            read(dir.join("predictions.json")),
            "{golden}"
        );
        let mut files = vec!["nbest_predictions.json"];
        if golden != "v1-long" {
            files.push("null_odds.json");
        }
        // The goldens hold on any x86-64 machine: tiny-bert computes in float64 and
        // rounds only its logits to float32 (models/lib/tinybert.py).
        for f in files {
            let want: Value = read_json(dir.join(f));
            let got: Value = read_json(out.join(f));
            assert_close(&want, &got, 1e-6, &format!("{golden}/{f}"));
        }
    }
}

/// Runs `model` on `data` with `extra` flags into `out`; returns stderr and metrics.json.
fn eval_ok(data: &str, model: &str, out: &Path, extra: &[&str]) -> (String, Value) {
    let mut args = vec!["--save-logits", "--batch-size", "1"];
    args.extend_from_slice(extra);
    let o = eval(data, model, out, &args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let metrics = read_json(out.join("metrics.json"));
    (String::from_utf8_lossy(&o.stderr).into_owned(), metrics)
}

/// Logits at every real (mask-1) position within 1e-5 of the fixed-length ones; returns
/// how many features were padded to less than 384.
fn assert_logits_close(dynamic: &Path, fixed: &Path) -> usize {
    let a = bertqa::logits_io::load(&dynamic.join("logits.bin")).unwrap();
    let b = bertqa::logits_io::load(&fixed.join("logits.bin")).unwrap();
    assert_eq!(a.len(), b.len());
    let mut shorter = 0;
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.unique_id, y.unique_id);
        assert_eq!(y.start.len(), 384);
        assert_eq!(x.start.len() % 8, 0);
        shorter += usize::from(x.start.len() < 384);
        // Every real position is inside the shorter padding; padding only adds float
        // noise there.
        for p in 0..x.start.len() {
            let (ds, de) = ((x.start[p] - y.start[p]).abs(), (x.end[p] - y.end[p]).abs());
            assert!(
                ds <= 1e-5 && de <= 1e-5,
                "feature {} pos {p}: {ds} {de}",
                x.unique_id
            );
        }
    }
    shorter
}

#[test]
fn dynamic_length_padding_gives_the_fixed_length_answers() {
    // A dynamic-length model gets each batch padded to its longest feature (multiple of
    // 8); --fixed-seq-len pads to 384 like the reference. bert-onnx-padmasked is
    // bert-onnx with padding logits at -10000 (a QA head that masks padding), so the
    // padding probe keeps dynamic length, and every answer file is byte-identical.
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v2-long.json");
    let dir = |n: &str| tmp.path().join(n);
    let (_, fixed) = eval_ok(
        &data,
        "bert-onnx-padmasked",
        &dir("pm-fixed"),
        &["--fixed-seq-len"],
    );
    assert_eq!(fixed["padding"]["mode"], "fixed");
    assert_eq!(fixed["padding"]["seq_len"], 384);
    let (err, dynamic) = eval_ok(&data, "bert-onnx-padmasked", &dir("pm-dynamic"), &[]);
    assert_eq!(dynamic["padding"]["mode"], "dynamic", "{err}");
    assert_eq!(dynamic["padding"]["probe_features"], 16);
    assert_eq!(dynamic["padding"]["probe_unsafe_features"], 0);
    assert_eq!(dynamic["padding"]["displaced_features"], 0);
    assert!(!err.contains("padding"), "{err}");
    assert_same_outputs(&dir("pm-dynamic"), &dir("pm-fixed"));
    let shorter = assert_logits_close(&dir("pm-dynamic"), &dir("pm-fixed"));
    assert!(
        shorter > 0,
        "some requests should have been padded to less than 384"
    );
}

#[test]
fn inputs_through_shared_memory_give_the_answers_of_inputs_in_each_message() {
    // bert-onnx (a real ONNX model), each request padded to its feature's length: the
    // region's slots take requests of every length.
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v2-long.json");
    let dir = |n: &str| tmp.path().join(n);
    let (_, wire) = eval_ok(
        &data,
        "bert-onnx-padmasked",
        &dir("wire"),
        &["--shared-memory", "none"],
    );
    let (_, shm) = eval_ok(
        &data,
        "bert-onnx-padmasked",
        &dir("shm"),
        &["--shared-memory", "system"],
    );
    assert_eq!(wire["shared_memory"]["used"], false);
    assert_eq!(wire["shared_memory"]["note"], Value::Null);
    assert_eq!(shm["shared_memory"]["used"], true);
    assert_eq!(wire["shared_memory"]["outputs"], false);
    // The server wrote the logits into the region (empty raw entries in its answers).
    assert_eq!(shm["shared_memory"]["outputs"], true);
    assert_eq!(shm["shared_memory"]["note"], Value::Null);
    assert_eq!(wire["padding"]["mode"], "dynamic");
    assert_same_outputs(&dir("shm"), &dir("wire"));
    // The same logits, bit for bit.
    assert_same_files(&dir("shm"), &dir("wire"), &["logits.bin"]);
}

#[test]
fn the_padding_probe_keeps_the_reference_answers_when_padding_ranks_high() {
    // bert-onnx (seeded random weights) ranks padding positions among its top 20 start
    // and end logits, so padding less would change answers (the reference ranks padding
    // too, algorithm §6.2): the probe makes the run pad to 384, byte-identical to
    // --fixed-seq-len. --dynamic-seq-len pads less anyway and warns.
    let tmp = tempfile::tempdir().unwrap();
    let data = fixture("v2-long.json");
    let dir = |n: &str| tmp.path().join(n);
    eval_ok(&data, "bert-onnx", &dir("fixed"), &["--fixed-seq-len"]);
    let (err, guarded) = eval_ok(&data, "bert-onnx", &dir("guarded"), &[]);
    assert_eq!(guarded["padding"]["mode"], "fixed_after_probe", "{err}");
    assert_eq!(guarded["padding"]["seq_len"], 384);
    assert!(
        guarded["padding"]["probe_unsafe_features"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(
        err.contains("ranks padding positions among its top"),
        "{err}"
    );
    assert_same_outputs(&dir("guarded"), &dir("fixed"));
    let (err, forced) = eval_ok(&data, "bert-onnx", &dir("forced"), &["--dynamic-seq-len"]);
    assert_eq!(forced["padding"]["mode"], "dynamic");
    assert_eq!(forced["padding"]["probe_features"], 0);
    let displaced = forced["padding"]["displaced_features"].as_u64().unwrap();
    assert!(displaced > 0, "{forced}");
    assert!(
        err.contains(&format!(
            "in {displaced} features padding positions pushed real ones out"
        )),
        "{err}"
    );
    assert!(assert_logits_close(&dir("forced"), &dir("fixed")) > 0);
}

/// The SHA-256 of `bytes` in lowercase hex, as metrics.json's `data_sha256` says it.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
