//! Models that take text (a question and a context as BYTES, tokenized on the server):
//! the ensembles and fault models of the test bed (docs/testbed.md), over gRPC and HTTP.
//! `models` names the contract and the ensemble's steps; `ask` asks the answer contract
//! in one request; `eval` of the logits contract writes the files client-side
//! tokenization writes, to the byte; the answer contract's answers are the model's; a
//! broken answer is exit 2 naming the tensor and the problem.

use std::sync::OnceLock;

use std::path::Path;

use serde_json::Value;

use crate::common::shm_watch::{assert_one_region_registered_then_unregistered, run_watching};
use crate::common::{
    assert_fails_with, assert_same_outputs, assert_schema, bertqa, eval_args, fixture, json_of, ok,
    read_json, start_server_with, Server, CONTEXT, SAMPLE,
};

/// A server of these tests' own: the text models and their composing models.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        start_server_with(
            &[
                "qa-text-tokenizer",
                "qa-text-postprocess",
                "tiny-bert-nobatch",
                "oracle-nobatch",
                "tiny-bert",
                "qa-text-answer",
                "qa-text-answer-bls",
                "qa-text-answer-no-null",
                "oracle-text-logits",
                "qa-text-logits",
                "qa-text-tokenizer-stride64",
                "qa-text-logits-stride64",
                "oracle-text-answer",
                "fault-text-non-utf8-answer",
                "fault-text-missing-output",
                "fault-text-wrong-count",
            ],
            &[],
            None,
        )
    })
}

/// `(protocol, url)` of the server for each protocol.
fn endpoints() -> [(&'static str, String); 2] {
    let s = server();
    [
        ("grpc", s.url.clone()),
        ("http", format!("127.0.0.1:{}", s.http_port)),
    ]
}

#[test]
fn models_names_the_contract_and_the_ensembles_steps() {
    for (protocol, url) in endpoints() {
        let m = |model: &str| {
            let v = json_of(&bertqa(&[
                "models",
                "--url",
                &url,
                "--protocol",
                protocol,
                "--model",
                model,
                "--json",
            ]));
            v["model"].clone()
        };
        let answer = m("qa-text-answer");
        assert_eq!(answer["contract"], "answer", "{protocol}: {answer:#}");
        assert_eq!(answer["binding"]["question"], "question");
        assert_eq!(answer["binding"]["contract"]["answer"], "answer");
        assert_eq!(answer["binding"]["contract"]["score"], "score");
        assert_eq!(answer["binding"]["contract"]["start"], "answer_start");
        let steps: Vec<&str> = answer["ensemble_steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["model"].as_str().unwrap())
            .collect();
        assert_eq!(
            steps,
            [
                "qa-text-tokenizer",
                "tiny-bert-nobatch",
                "qa-text-postprocess"
            ]
        );
        let logits = m("qa-text-logits");
        assert_eq!(logits["contract"], "logits", "{protocol}: {logits:#}");
        assert_eq!(logits["binding"]["contract"]["offsets"], "offsets");
    }
    let o = bertqa(&[
        "models",
        "--url",
        &server().url,
        "--model",
        "qa-text-answer",
    ]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(
            "ensemble  steps qa-text-tokenizer -> tiny-bert-nobatch -> qa-text-postprocess"
        ),
        "{text}"
    );
    assert!(
        text.contains("binding (text: the answer contract, one question per request):"),
        "{text}"
    );
}

#[test]
fn ask_asks_the_answer_contract_and_reads_its_answer() {
    let runs = endpoints()
        .into_iter()
        .flat_map(|(protocol, url)| ["none", "system"].map(|shm| (protocol, url.clone(), shm)));
    for (protocol, url, shared_memory) in runs {
        let v = json_of(&bertqa(&[
            "ask",
            "--url",
            &url,
            "--protocol",
            protocol,
            "--model",
            "oracle-text-answer",
            "--json",
            "--question",
            "Who designed the lighthouse at Varne Point?",
            "--context",
            CONTEXT,
            "--shared-memory",
            shared_memory,
        ]));
        assert_schema("ask", &v);
        assert_eq!(v["contract"], "answer");
        let a = &v["answers"][0];
        assert_eq!(a["answer"], "Miriam Holt", "{protocol}: {v:#}");
        // The character span is the answer's place in the context (code points).
        let (s, e) = (
            a["start_char"].as_u64().unwrap() as usize,
            a["end_char"].as_u64().unwrap() as usize,
        );
        let span: String = CONTEXT.chars().skip(s).take(e - s).collect();
        assert_eq!(span, "Miriam Holt");
        assert!(a["score"].as_f64().unwrap() > a["no_answer_score"].as_f64().unwrap());
    }
}

#[test]
fn ask_of_the_answer_contract_reads_no_vocabulary() {
    // The server tokenizes: no vocabulary is read, and the answers are those asked with
    // one.
    let ask = |vocab: &str| {
        json_of(&bertqa(&[
            "ask",
            "--url",
            &server().url,
            "--model",
            "qa-text-answer",
            "--vocab",
            vocab,
            "--json",
            "--question",
            "Who designed the lighthouse at Varne Point?",
            "--context",
            CONTEXT,
        ]))
    };
    let v = ask("no/such/vocab.txt");
    assert_schema("ask", &v);
    assert_eq!(v["contract"], "answer", "{v:#}");
    assert_eq!(v["answers"], ask("vocab/vocab.txt")["answers"]);
}

#[test]
fn ask_of_the_answer_contract_goes_on_without_an_endpoint_that_is_down() {
    // The first endpoint is a closed port: the pool takes it out and the test server
    // answers, as for a token model.
    let ask = |urls: &[&str], model: &str| {
        let mut args = vec!["ask"];
        for u in urls {
            args.extend(["--url", u]);
        }
        args.extend([
            "--model",
            model,
            "--json",
            "--question",
            "Who designed the lighthouse at Varne Point?",
            "--context",
            CONTEXT,
        ]);
        json_of(&bertqa(&args))
    };
    let dead = format!("127.0.0.1:{}", crate::common::free_port());
    for model in ["qa-text-answer", "tiny-bert"] {
        let v = ask(&[&dead, &server().url], model);
        assert_schema("ask", &v);
        let alone = ask(&[&server().url], model);
        assert_eq!(v["answers"], alone["answers"], "{model}");
    }
}

#[test]
fn eval_of_the_answer_contract_reads_no_vocabulary() {
    let tmp = tempfile::tempdir().unwrap();
    let (with, without) = (tmp.path().join("with"), tmp.path().join("without"));
    eval_text(&server().url, "grpc", "qa-text-answer", SAMPLE, &with);
    let o = bertqa(&eval_args(
        SAMPLE,
        "qa-text-answer",
        &without,
        &["--url", &server().url, "--vocab", "no/such/vocab.txt"],
    ));
    ok(&o);
    for f in [
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
    ] {
        assert_eq!(
            std::fs::read(with.join(f)).unwrap(),
            std::fs::read(without.join(f)).unwrap(),
            "{f}"
        );
    }
    // The logits contract rebuilds the server's pieces: it needs the vocabulary.
    let o = bertqa(&eval_args(
        SAMPLE,
        "qa-text-logits",
        &tmp.path().join("logits"),
        &["--url", &server().url, "--vocab", "no/such/vocab.txt"],
    ));
    assert_fails_with(&o, &["no/such/vocab.txt"]);
}

#[test]
fn a_broken_answer_is_exit_2_naming_the_tensor_and_the_problem() {
    for (protocol, url) in endpoints() {
        for (model, want) in [
            (
                "fault-text-non-utf8-answer",
                "tensor \"answer\": expected UTF-8 text, got element 0: invalid UTF-8",
            ),
            (
                "fault-text-missing-output",
                "tensor \"answer\": expected an output of that name, got missing",
            ),
            (
                "fault-text-wrong-count",
                "tensor \"answer\": expected 1 element, got 2",
            ),
        ] {
            let o = bertqa(&[
                "ask",
                "--url",
                &url,
                "--protocol",
                protocol,
                "--model",
                model,
                "--question",
                "Who designed the lighthouse at Varne Point?",
                "--context",
                CONTEXT,
            ]);
            assert_fails_with(&o, &[&format!("model \"{model}\""), want]);
            assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
        }
    }
}

#[test]
fn ask_of_the_logits_contract_answers_as_the_token_model_does() {
    let ask = |protocol: &str, url: &str, model: &str, shared_memory: &str| {
        let mut v = json_of(&bertqa(&[
            "ask",
            "--url",
            url,
            "--protocol",
            protocol,
            "--model",
            model,
            "--json",
            "--question",
            "Who designed the lighthouse at Varne Point?",
            "--question",
            "When was it first lit?",
            "--context",
            CONTEXT,
            "--shared-memory",
            shared_memory,
        ]));
        assert_schema("ask", &v);
        for k in ["model", "url", "protocol", "latency_ms"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    let want = ask("grpc", &server().url, "tiny-bert", "auto");
    for (protocol, url) in endpoints() {
        for shared_memory in ["auto", "system"] {
            let got = ask(protocol, &url, "qa-text-logits", shared_memory);
            assert_eq!(got, want, "{protocol}, --shared-memory {shared_memory}");
        }
    }
}

/// A model of the repository that the server has not loaded is said to be so.
#[test]
fn a_model_the_server_has_not_loaded_is_named_as_not_loaded() {
    let o = bertqa(&[
        "ask",
        "--url",
        &server().url,
        "--model",
        "tiny-bert-seed2",
        "--question",
        "q",
        "--context",
        CONTEXT,
    ]);
    assert_fails_with(
        &o,
        &["model \"tiny-bert-seed2\" is not ready on", "(state "],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("(state )"), "{err}");
}

/// `eval --json` of `model` on `data` over `protocol` at `url` into `out`.
fn eval_text(url: &str, protocol: &str, model: &str, data: &str, out: &Path) -> Value {
    json_of(&bertqa(&eval_args(
        data,
        model,
        out,
        &["--url", url, "--protocol", protocol, "--json"],
    )))
}

#[test]
fn eval_of_the_logits_contract_writes_the_files_of_client_side_tokenization() {
    let tmp = tempfile::tempdir().unwrap();
    let long = fixture("v2-long.json");
    for data in [SAMPLE, long.as_str()] {
        let client = tmp.path().join("client");
        eval_text(&server().url, "grpc", "tiny-bert", data, &client);
        for (protocol, url) in endpoints() {
            let out = tmp.path().join(format!("text-{protocol}"));
            let v = eval_text(&url, protocol, "qa-text-logits", data, &out);
            assert_schema("eval", &v);
            assert_same_outputs(&client, &out);
            assert_eq!(v["model"]["binding"]["contract"]["kind"], "logits");
            // Features are the windows the server made: as many as bertqa makes.
            let c = read_json(client.join("metrics.json"));
            assert_eq!(v["features"], c["features"], "{data} over {protocol}");
            assert_eq!(v["requests"], v["questions"], "one question per request");
        }
    }
}

#[test]
fn eval_of_a_text_model_through_shared_memory_gives_the_same_predictions() {
    let tmp = tempfile::tempdir().unwrap();
    for (protocol, url) in endpoints() {
        let run = |name: &str, shared_memory: &str| {
            let out = tmp.path().join(format!("{name}-{protocol}"));
            let args = eval_args(
                SAMPLE,
                "qa-text-logits",
                &out,
                &[
                    "--url",
                    &url,
                    "--protocol",
                    protocol,
                    "--concurrency",
                    "1",
                    "--shared-memory",
                    shared_memory,
                ],
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            (run_watching(server().http_port, &args), out)
        };
        let (plain, plain_out) = run("none", "none");
        ok(&plain.output);
        assert!(plain.during.is_empty(), "{:?}", plain.during);
        let (w, out) = run("system", "system");
        // The region registered, the questions and contexts answered from it, and the
        // region unregistered at the end; the answers to the byte.
        assert_one_region_registered_then_unregistered(&w);
        assert_same_outputs(&plain_out, &out);
        let shm = &read_json(out.join("metrics.json"))["shared_memory"];
        assert_eq!(shm["used"], true, "{protocol}: {shm}");
        assert_eq!(shm["outputs"], false, "outputs in each response: {shm}");
        assert_eq!(shm["note"], Value::Null, "{shm}");
        let none = &read_json(plain_out.join("metrics.json"))["shared_memory"];
        assert_eq!(none["used"], false, "{protocol}: {none}");
        // Two endpoints are not one server a region can be registered with: `system`
        // refuses before sending, `auto` sends the text in the messages and says why.
        let two = format!("{url},{}", url.replace("127.0.0.1", "localhost"));
        let o = bertqa(&eval_args(
            SAMPLE,
            "qa-text-logits",
            &tmp.path().join(format!("two-{protocol}")),
            &[
                "--url",
                &two,
                "--protocol",
                protocol,
                "--shared-memory",
                "system",
            ],
        ));
        assert_fails_with(&o, &["--shared-memory system", "not one server"]);
        let auto = tmp.path().join(format!("auto-{protocol}"));
        let v = eval_text(&two, protocol, "qa-text-logits", SAMPLE, &auto);
        assert_eq!(v["shared_memory"]["used"], false, "{protocol}: {v:#}");
        let note = v["shared_memory"]["note"].as_str().unwrap_or_default();
        assert!(note.contains("not one server"), "{protocol}: {v:#}");
        assert_same_outputs(&plain_out, &auto);
    }
}

#[test]
fn the_oracle_behind_each_contract_scores_100_exact_match() {
    let tmp = tempfile::tempdir().unwrap();
    for (protocol, url) in endpoints() {
        for model in ["oracle-text-logits", "oracle-text-answer"] {
            let out = tmp.path().join(format!("{model}-{protocol}"));
            let v = eval_text(&url, protocol, model, SAMPLE, &out);
            assert_eq!(
                v["metrics"]["exact"], 100.0,
                "{model} over {protocol}: {v:#}"
            );
        }
    }
}

#[test]
fn eval_of_the_answer_contract_writes_the_models_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let client = tmp.path().join("client");
    eval_text(&server().url, "grpc", "tiny-bert", SAMPLE, &client);
    let want = read_json(client.join("predictions.json"));
    for (protocol, url) in endpoints() {
        let out = tmp.path().join(format!("answer-{protocol}"));
        let v = eval_text(&url, protocol, "qa-text-answer", SAMPLE, &out);
        assert_schema("eval", &v);
        // The same answers as client-side decoding of the same model on this file
        // (docs/servers.md says where they may differ).
        assert_eq!(read_json(out.join("predictions.json")), want, "{protocol}");
        // One answer per question, with its score; null odds from the no-answer score.
        let nbest = read_json(out.join("nbest_predictions.json"));
        for (id, list) in nbest.as_object().unwrap() {
            let list = list.as_array().unwrap();
            assert_eq!(list.len(), 1, "{id}: {list:?}");
            assert_eq!(list[0]["probability"], 1.0);
            assert!(list[0]["start_logit"].as_f64().unwrap() != 0.0 || list[0]["text"] == "empty");
        }
        let odds = read_json(out.join("null_odds.json"));
        assert_eq!(odds.as_object().unwrap().len(), 16);
        assert_eq!(v["features"], 16, "a question is a feature: {v:#}");
    }
}

/// An answer-contract model without a no-answer output, on SQuAD 2.0 data: no null
/// odds, so no null_odds.json, and the scores of the official v2 script given no na-prob
/// file (every no-answer probability 0, no best thresholds); the report says why.
#[test]
fn eval_of_an_answer_model_without_a_no_answer_output_scores_without_null_odds() {
    let tmp = tempfile::tempdir().unwrap();
    let with_null = tmp.path().join("with-null");
    eval_text(&server().url, "grpc", "qa-text-answer", SAMPLE, &with_null);
    let spans = read_json(with_null.join("nbest_predictions.json"));
    for (protocol, url) in endpoints() {
        let out = tmp.path().join(format!("no-null-{protocol}"));
        let v = eval_text(&url, protocol, "qa-text-answer-no-null", SAMPLE, &out);
        assert_schema("eval", &v);
        assert_eq!(v["version_2_with_negative"], true);
        assert!(!out.join("null_odds.json").exists(), "{protocol}");
        let files: Vec<&str> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(!files.contains(&"null_odds.json"), "{files:?}");
        // Every answer is the model's span (qa-text-answer's, which has the same
        // steps): with no null odds none is turned into "no answer".
        let preds = read_json(out.join("predictions.json"));
        let spans = spans.as_object().unwrap();
        assert_eq!(preds.as_object().unwrap().len(), spans.len());
        for (id, list) in spans {
            assert_eq!(preds[id], list[0]["text"], "{protocol} {id}");
        }
        // The scores of `bertqa score` without a na-prob file (the v2 script's).
        let predictions = out.join("predictions.json");
        let scored = json_of(&bertqa(&[
            "score",
            "--data",
            SAMPLE,
            "--predictions",
            predictions.to_str().unwrap(),
            "--json",
        ]));
        assert_eq!(v["metrics"], scored["metrics"], "{protocol}");
        assert!(v["metrics"].get("best_f1").is_none(), "{v:#}");
        assert!(v["metrics"].get("HasAns_exact").is_some(), "{v:#}");
        let why = v["no_null_odds"].as_str().unwrap_or_default();
        assert!(
            why.contains("\"qa-text-answer-no-null\" has no no-answer output"),
            "{v:#}"
        );
        assert_eq!(read_json(out.join("metrics.json"))["no_null_odds"], why);
    }
    // A model with null odds has no such key; the text report says why there are none.
    let with = read_json(with_null.join("metrics.json"));
    assert!(with.get("no_null_odds").is_none(), "{with:#}");
    let text = tmp.path().join("text");
    let o = bertqa(&eval_args(
        SAMPLE,
        "qa-text-answer-no-null",
        &text,
        &["--url", &server().url],
    ));
    ok(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(
            "null odds    none: model \"qa-text-answer-no-null\" has no no-answer output"
        ),
        "{stdout}"
    );
    let outputs = stdout.lines().find(|l| l.starts_with("outputs")).unwrap();
    assert!(!outputs.contains("null_odds"), "{stdout}");
}

#[test]
fn eval_of_a_broken_text_model_is_exit_2_naming_the_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    for (protocol, url) in endpoints() {
        let out = tmp.path().join(protocol);
        let o = bertqa(&eval_args(
            SAMPLE,
            "fault-text-wrong-count",
            &out,
            &["--url", &url, "--protocol", protocol],
        ));
        assert_fails_with(
            &o,
            &[
                "model \"fault-text-wrong-count\"",
                "tensor \"answer\": expected 1 element, got 2",
            ],
        );
    }
    // What a text model's run cannot do is refused before anything is sent.
    let o = bertqa(&eval_args(
        SAMPLE,
        "qa-text-logits",
        &tmp.path().join("resume"),
        &["--url", &server().url, "--save-logits"],
    ));
    assert_fails_with(&o, &["--save-logits: model \"qa-text-logits\" takes text"]);
}

#[test]
fn compare_finds_where_the_servers_tokenizer_answers_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let compare = |models: &str, gate: &str| {
        bertqa(&[
            "compare",
            "--url",
            &server().url,
            "--models",
            models,
            "--data",
            &fixture("v2-long.json"),
            "--output-dir",
            tmp.path().join(models.replace(',', "-")).to_str().unwrap(),
            "--min-agreement",
            gate,
            "--json",
        ])
    };
    // The same tokenizer settings on the server: the same answers and logits in every
    // window, and the gate holds.
    let o = compare("tiny-bert,qa-text-logits,qa-text-answer", "0.99");
    let v = json_of(&o);
    assert_schema("compare", &v);
    let c = &v["comparisons"][0];
    assert_eq!(c["agreement"], 1.0, "{v:#}");
    assert_eq!(c["start_logits"]["linf"], 0.0);
    assert_eq!(c["windows"]["compared"], c["windows"]["first"]);
    assert_eq!(c["windows"]["compared"], c["windows"]["model"]);
    // The answer contract gives no logits to compare.
    let c = &v["comparisons"][1];
    assert_eq!(
        (c["agreement"].as_f64(), &c["start_logits"]["linf"]),
        (Some(1.0), &Value::Null)
    );
    assert_eq!(c["windows"]["model"], 0);
    // Windows at doc stride 64: more of them, each question's answer from other
    // windows, and some answers differ; the windows both made have the same logits.
    let o = bertqa(&[
        "compare",
        "--url",
        &server().url,
        "--models",
        "tiny-bert,qa-text-logits-stride64",
        "--data",
        &fixture("v2-long.json"),
        "--output-dir",
        tmp.path().join("stride64").to_str().unwrap(),
        "--min-agreement",
        "1.0",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", crate::common::show(&o));
    let v = read_json(tmp.path().join("stride64/compare.json"));
    let c = &v["comparisons"][0];
    assert!(c["agreement"].as_f64().unwrap() < 1.0, "{v:#}");
    assert!(c["disagreements"]["count"].as_u64().unwrap() > 0);
    assert!(c["windows"]["model"].as_u64() > c["windows"]["first"].as_u64());
    assert_eq!(c["start_logits"]["linf"], 0.0);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("logits compared on the"), "{text}");
}

#[test]
fn a_killed_text_run_resumes_from_its_journal_to_the_same_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    let args = |dir: &Path, extra: &[&str]| {
        eval_args(
            SAMPLE,
            "qa-text-logits",
            dir,
            &[&["--url", &server().url, "--concurrency", "1"][..], extra].concat(),
        )
    };
    ok(&bertqa(&args(&reference, &[])));
    let mut child = crate::common::spawn_bertqa(&args(&out, &[]));
    crate::common::wait_for_journal(&mut child, &out, 2);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let kept = crate::common::journaled(&out);
    assert!((2..16).contains(&kept), "{kept} questions journaled");
    let o = bertqa(&args(&out, &["--resume"]));
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{kept} questions already answered")),
        "{err}"
    );
    // Only the questions not journaled were asked.
    let v = read_json(out.join("metrics.json"));
    assert_eq!(v["requests"].as_u64(), Some(16 - kept as u64), "{v:#}");
    assert_same_outputs(&reference, &out);
}

#[test]
fn shards_of_a_text_run_merge_into_the_whole_runs_files() {
    let tmp = tempfile::tempdir().unwrap();
    let url = server().url.clone();
    // A model without null odds (no null_odds.json) merges as well.
    for model in ["qa-text-logits", "qa-text-answer-no-null"] {
        let whole = tmp.path().join(format!("{model}-whole"));
        ok(&bertqa(&eval_args(SAMPLE, model, &whole, &["--url", &url])));
        let mut dirs = Vec::new();
        for shard in ["1/2", "2/2"] {
            let dir = tmp
                .path()
                .join(format!("{model}-{}", shard.replace('/', "of")));
            ok(&bertqa(&eval_args(
                SAMPLE,
                model,
                &dir,
                &["--url", &url, "--shard", shard],
            )));
            dirs.push(dir.to_str().unwrap().to_string());
        }
        let merged = tmp.path().join(format!("{model}-merged"));
        let mut args = vec!["merge", "--output-dir", merged.to_str().unwrap()];
        args.extend(dirs.iter().map(String::as_str));
        ok(&bertqa(&args));
        let written: Vec<&str> = crate::common::ANSWER_FILES
            .into_iter()
            .filter(|f| whole.join(f).exists())
            .collect();
        crate::common::assert_same_files(&whole, &merged, &written);
        assert_eq!(
            whole.join("null_odds.json").exists(),
            merged.join("null_odds.json").exists(),
            "{model}"
        );
    }
}

#[test]
fn a_text_model_that_batches_is_asked_several_questions_per_request() {
    let tmp = tempfile::tempdir().unwrap();
    let one = tmp.path().join("one");
    eval_text(&server().url, "grpc", "qa-text-answer", SAMPLE, &one);
    for (protocol, url) in endpoints() {
        let out = tmp.path().join(format!("bls-{protocol}"));
        let v = eval_text(&url, protocol, "qa-text-answer-bls", SAMPLE, &out);
        // 16 questions, 8 to a request.
        assert_eq!(
            (v["requests"].as_u64(), v["batch_size"].as_u64()),
            (Some(2), Some(8)),
            "{v:#}"
        );
        assert_same_outputs(&one, &out);
    }
}
