//! bertqa against Open Inference Protocol servers other than Triton: MLServer and
//! KServe's model server (real servers from PyPI, `common::oip`), over gRPC and HTTP.
//! Neither has Triton's extensions (model configuration, statistics, shared memory,
//! binary tensor data; KServe not even a repository index, only its own model list over
//! HTTP), so each test checks that the protocol's core is enough, and that what is
//! missing is said, not failed on.
//!
//! The table, one test per row: MLServer over gRPC (`models` states, `eval`
//! without a model configuration), MLServer over HTTP (`eval`), KServe over gRPC
//! (`models` without any listing) and over HTTP (`models` from its model list, `eval`
//! with `"versions": null`).

use crate::common::oip::{kserve, mlserver, OipServer};
use crate::common::page_server::{self, Answer};
use crate::common::{
    ask_oracle, assert_answered, assert_fails_with, assert_same_outputs, assert_schema, bertqa,
    json_of, sample_eval, server, show, SAMPLE,
};

/// Every server of the protocol but Triton, with each protocol.
fn every_server() -> Vec<(&'static OipServer, &'static str)> {
    let mut all = Vec::new();
    for s in [mlserver(), kserve()] {
        for protocol in ["grpc", "http"] {
            all.push((s, protocol));
        }
    }
    all
}

fn at<'a>(s: &'a OipServer, protocol: &'a str) -> [&'a str; 4] {
    ["--protocol", protocol, "--url", s.url(protocol)]
}

#[test]
fn models_lists_the_model_and_its_binding_from_the_metadata_alone() {
    for (s, protocol) in every_server() {
        let what = format!("{} over {protocol}", s.name);
        let v = json_of(&bertqa(
            &[
                &["models", "--model", "oracle", "--json"][..],
                &at(s, protocol),
            ]
            .concat(),
        ));
        assert_schema("models", &v);
        assert_eq!(v["server"]["name"], s.name, "{what}");
        assert_eq!(v["model"]["configuration"], false, "{what}");
        let binding = &v["model"]["binding"];
        assert_eq!(binding["batching"], "undeclared", "{what}: {binding}");
        assert_eq!(
            binding["inputs"][0]["name"], "input_ids",
            "{what}: {binding}"
        );
        assert_eq!(binding["seq_len"]["fixed"], 384, "{what}: {binding}");
        // The model is listed, its state as the protocol writes it (not `State.READY`).
        let oracle = v["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "oracle");
        assert_eq!(oracle.unwrap()["state"], "READY", "{what}: {}", v["models"]);
        // KServe has no repository index (it lists the extension and answers 404); over
        // HTTP it has its own list of models, over gRPC nothing.
        let listing = match (s.name, protocol) {
            ("mlserver", _) => "repository_index",
            (_, "http") => "model_list",
            _ => "",
        };
        assert_eq!(v["server"]["lists_models"], !listing.is_empty(), "{what}");
        assert_eq!(
            v["server"]["listing"].as_str().unwrap_or(""),
            listing,
            "{what}"
        );
    }
    // Without --model, a server that does not list its models says so.
    let o = bertqa(&[&["models"][..], &at(kserve(), "grpc")].concat());
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("server   kserve 0.21.0 at"), "{text}");
    assert!(
        text.contains(
            "the server does not list its models over gRPC (no repository index, the \
             protocol's only listing); name one with --model"
        ),
        "{text}"
    );
}

/// KServe's model server has no repository index but lists its models at `GET
/// /v2/models` (names only): over HTTP `models` shows that list, each model's state
/// asked, and an unknown model's error names the ready ones.
#[test]
fn models_over_http_lists_kserves_models_from_its_model_list() {
    let v = json_of(&bertqa(
        &[&["models", "--json"][..], &at(kserve(), "http")].concat(),
    ));
    assert_schema("models", &v);
    assert_eq!(v["server"]["lists_models"], true, "{v}");
    assert_eq!(v["server"]["listing"], "model_list", "{v}");
    let rows: Vec<(&str, &str, &str)> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let field = |k: &str| m[k].as_str().unwrap();
            (field("name"), field("version"), field("state"))
        })
        .collect();
    assert_eq!(
        rows,
        [("oracle", "", "READY"), ("tiny-bert", "", "READY")],
        "{v}"
    );

    let o = bertqa(&[&["models"][..], &at(kserve(), "http")].concat());
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("does not list"), "{text}");
    assert!(
        text.contains("\nMODEL      VERSION  STATE        REASON\noracle              READY"),
        "{text}"
    );

    let o = bertqa(&[&["models", "--model", "nosuch"][..], &at(kserve(), "http")].concat());
    assert_fails_with(&o, &["\"nosuch\" not found", "oracle, tiny-bert"]);
}

#[test]
fn eval_of_the_oracle_answers_as_on_triton_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let triton = tmp.path().join("triton");
    json_of(&bertqa(&sample_eval(
        "oracle",
        &triton,
        &["--url", &server().url],
    )));
    for (s, protocol) in every_server() {
        let dir = tmp.path().join(format!("{}-{protocol}", s.name));
        let v = json_of(&bertqa(&sample_eval("oracle", &dir, &at(s, protocol))));
        assert_schema("eval", &v);
        assert_eq!(v["metrics"]["exact"], 100.0, "{} over {protocol}", s.name);
        assert_eq!(v["batch_size"], 8, "bertqa's default batch");
        assert_same_outputs(&triton, &dir);
    }
    // The text report says who chose the batch size.
    let mut args = sample_eval("oracle", &tmp.path().join("text"), &at(mlserver(), "grpc"));
    args.retain(|a| a != "--json");
    let o = bertqa(&args);
    let text = String::from_utf8_lossy(&o.stdout);
    let line = " over gRPC (batch 8 (bertqa's default: the server declares no batching), \
                concurrency 4)";
    assert!(text.contains(line), "{}", show(&o));
}

#[test]
fn ask_answers_on_every_server() {
    for (s, protocol) in every_server() {
        assert_answered(&ask_oracle(&at(s, protocol)));
    }
}

/// A short `perf` of the oracle on `s` over `protocol` (three windows of `count`
/// requests at most per level), with `extra`.
fn short_perf(s: &OipServer, protocol: &str, count: &str, extra: &[&str]) -> std::process::Output {
    let args = [
        "perf",
        "--model",
        "oracle",
        "--data",
        SAMPLE,
        "--measurement-request-count",
        count,
        "--stability-percentage",
        "100",
        "--max-trials",
        "3",
        "--quiet",
    ];
    bertqa(&[&args[..], &at(s, protocol), extra].concat())
}

#[test]
fn perf_sweeps_with_the_server_breakdown_not_reported() {
    for (s, protocol) in every_server() {
        let o = short_perf(
            s,
            protocol,
            "8",
            &["--batch-size", "1", "--concurrency-range", "1:2", "--json"],
        );
        let v = json_of(&o);
        assert_schema("perf", &v);
        let levels = v["levels"].as_array().unwrap();
        assert_eq!(levels.len(), 2, "{}", show(&o));
        // No Triton, no metrics read by default: the report says why, and where to.
        let why = v["metrics"]["not_read"].as_str().unwrap();
        assert!(
            why.contains("is not Triton: give its Prometheus endpoint with --metrics-url"),
            "{why}"
        );
        assert!(levels.iter().all(|l| l["metrics"].is_null()));
        for l in levels {
            assert!(l["requests"].as_u64().unwrap() > 0, "{l}");
            assert!(l["server_ms"].is_null() && l["server"].is_null(), "{l}");
            assert!(l["client_ms"]["network"].is_null(), "{l}");
        }
    }
    let o = short_perf(mlserver(), "http", "4", &["--concurrency-range", "1:1"]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        // No platform named, the batching said to be bertqa's choice.
        text.contains(" over HTTP (batching not declared by the server)\n"),
        "{text}"
    );
    assert!(text.contains("batches of 8, bertqa's default"), "{text}");
    assert!(
        text.contains("server       breakdown not reported by the server"),
        "{text}"
    );
}

#[test]
fn compare_across_serving_stacks_agrees_to_the_logit() {
    let tmp = tempfile::tempdir().unwrap();
    let other = format!("tiny-bert@{}", mlserver().grpc);
    let o = bertqa(&[
        "compare",
        "--data",
        SAMPLE,
        "--url",
        &server().url,
        "--models",
        "tiny-bert",
        &other,
        "--output-dir",
        tmp.path().to_str().unwrap(),
        "--min-agreement",
        "1.0",
        "--json",
        "--quiet",
    ]);
    let v = json_of(&o);
    assert_schema("compare", &v);
    let c = &v["comparisons"][0];
    assert_eq!(c["agreement"], 1.0, "{c}");
    for logits in ["start_logits", "end_logits"] {
        assert!(c[logits]["linf"].as_f64().unwrap() < 1e-5, "{c}");
    }
    // One model name on two servers: the reports tell them apart.
    assert_eq!(
        v["models"][1]["name"],
        format!("tiny-bert@{}", mlserver().grpc)
    );
}

#[test]
fn shared_memory_on_a_server_without_it() {
    let tmp = tempfile::tempdir().unwrap();
    // auto: the tensors go in the messages, and the answers are the same.
    let auto = tmp.path().join("auto");
    let v = json_of(&bertqa(&sample_eval(
        "oracle",
        &auto,
        &[&at(mlserver(), "grpc")[..], &["--shared-memory", "auto"]].concat(),
    )));
    assert_eq!(v["metrics"]["exact"], 100.0);
    // system: stops at once, saying why.
    let o = bertqa(&sample_eval(
        "oracle",
        &tmp.path().join("system"),
        &[&at(mlserver(), "grpc")[..], &["--shared-memory", "system"]].concat(),
    ));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("mlserver 1.7.1 at"), "{err}");
    assert!(err.contains("has no shared-memory support"), "{err}");
}

#[test]
fn errors_name_the_server_that_answered() {
    // A version the server does not have: its own words, under its own name.
    let o = bertqa(
        &[
            &[
                "ask",
                "--model",
                "oracle",
                "--model-version",
                "7",
                "--question",
                "q?",
                "--context",
                "c.",
            ][..],
            &at(mlserver(), "http"),
        ]
        .concat(),
    );
    assert_fails_with(&o, &["mlserver 1.7.1 at", "answered NotFound (HTTP 404)"]);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("Triton"),
        "{}",
        show(&o)
    );
}

#[test]
fn a_url_that_is_not_a_server_of_the_protocol_is_said_to_be_so() {
    // A web server that has none of the protocol's routes (an in-process fake: a real
    // server of the protocol always has them).
    let url = page_server::serve(|_| Answer {
        status: "404 Not Found",
        content_type: "text/plain",
        body: "Not Found".into(),
    });
    let o = bertqa(&["models", "--protocol", "http", "--url", &url]);
    assert_fails_with(
        &o,
        &[
            &format!("no Open Inference Protocol (KServe v2) server at {url}"),
            "server liveness answered Unimplemented (HTTP 404)",
            "--protocol",
        ],
    );
}
