//! KServe v2 HTTP/REST (`--protocol http`) against the real local Triton's HTTP port:
//! the same bindings, answers, logits and scores as gRPC, and the wrong port named.

use std::path::Path;
use std::process::Output;

use bertqa::proto::model_config::SchedulingChoice;
use bertqa::Protocol;

use crate::common::{
    assert_same_files, assert_same_outputs, bertqa, client, eval_args, fixture, http_url,
    journaled, json_of, ok, rt, server, show, spawn_bertqa, wait_for_journal, ANSWER_FILES,
};
use crate::resume;

#[test]
fn models_shows_the_bindings_of_both_layouts_as_over_grpc() {
    for (model, dtype) in [("tiny-bert", "INT64"), ("tiny-bert-hf", "INT32")] {
        let over_http = json_of(&bertqa(&[
            "models",
            "--protocol",
            "http",
            "--url",
            &http_url(),
            "--model",
            model,
            "--json",
        ]));
        let over_grpc = json_of(&bertqa(&[
            "models",
            "--url",
            &server().url,
            "--model",
            model,
            "--json",
        ]));
        let binding = &over_http["model"]["binding"];
        let inputs = binding["inputs"].as_array().unwrap();
        assert_eq!(inputs.len(), 3, "{binding}");
        assert!(inputs.iter().all(|i| i["datatype"] == dtype), "{binding}");
        assert_eq!(binding["outputs"]["layout"], "split");
        // Everything but the address is what gRPC shows: the REST metadata, config and
        // repository index are read into the same messages.
        assert_eq!(over_http["model"], over_grpc["model"], "{model}");
        assert_eq!(over_http["models"], over_grpc["models"]);
        assert_eq!(
            over_http["server"]["extensions"],
            over_grpc["server"]["extensions"]
        );
        assert_eq!(over_http["server"]["url"], http_url());
        assert_eq!(over_http["server"]["protocol"], "http");
        assert_eq!(over_grpc["server"]["protocol"], "grpc");
    }
    // The text report says it on the server line.
    let o = bertqa(&["models", "--protocol", "http", "--url", &http_url()]);
    assert!(o.status.success(), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.starts_with("server   triton ") && l.ends_with(" over HTTP")),
        "{text}"
    );
}

#[test]
fn rest_calls_answer_what_grpc_answers() {
    let rt = rt();
    let http = client(&rt, Protocol::Http, http_url());
    let grpc = client(&rt, Protocol::Grpc, server().url.clone());
    assert_eq!(http.protocol(), Protocol::Http);
    assert!(rt.block_on(http.server_live()).unwrap());
    assert!(rt.block_on(http.server_ready()).unwrap());
    assert!(rt.block_on(http.model_ready("null", "")).unwrap());
    assert!(!rt.block_on(http.model_ready("no-such-model", "")).unwrap());
    for model in ["null", "tiny-bert-hf"] {
        let (h, g) = (
            rt.block_on(http.model_config(model, "")).unwrap(),
            rt.block_on(grpc.model_config(model, "")).unwrap(),
        );
        assert_eq!(
            h, g,
            "{model}: the whole config, as far as our proto reads it"
        );
        assert!(matches!(
            h.scheduling_choice,
            Some(SchedulingChoice::DynamicBatching(_))
        ));
        assert_eq!(
            rt.block_on(http.model_metadata(model, "1")).unwrap(),
            rt.block_on(grpc.model_metadata(model, "1")).unwrap()
        );
    }
    let stats = rt.block_on(http.model_statistics("null", "")).unwrap();
    assert_eq!(
        (stats[0].name.as_str(), stats[0].version.as_str()),
        ("null", "1")
    );
    assert!(stats[0].inference_stats.is_some());
    assert!(!rt
        .block_on(http.model_statistics("", ""))
        .unwrap()
        .is_empty());
    let e = rt
        .block_on(http.model_metadata("no-such-model", ""))
        .unwrap_err();
    assert!(
        matches!(e, bertqa::Error::ModelNotFound { ref available, .. } if available.iter().flatten().any(|m| m == "null")),
        "{e}"
    );
}

/// `eval --json` of `model` on the long v2 fixture over `protocol` at `url`, into `out`.
fn eval_over(protocol: &str, url: &str, model: &str, out: &Path, extra: &[&str]) -> Output {
    let data = fixture("v2-long.json");
    let server = ["--protocol", protocol, "--url", url, "--json"];
    bertqa(&eval_args(
        &data,
        model,
        out,
        &[&server[..], extra].concat(),
    ))
}

#[test]
fn eval_over_http_writes_the_files_of_grpc_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    let grpc = json_of(&eval_over(
        "grpc",
        &server().url,
        "tiny-bert",
        &dir("grpc"),
        &["--save-logits"],
    ));
    // Shared memory on by default (a loopback server), and off.
    let shm = json_of(&eval_over(
        "http",
        &http_url(),
        "tiny-bert",
        &dir("shm"),
        &["--save-logits"],
    ));
    let wire = json_of(&eval_over(
        "http",
        &http_url(),
        "tiny-bert",
        &dir("wire"),
        &["--save-logits", "--shared-memory", "none"],
    ));
    assert_eq!(
        shm["shared_memory"]["used"], true,
        "{}",
        shm["shared_memory"]
    );
    assert_eq!(shm["shared_memory"]["outputs"], true);
    assert_eq!(wire["shared_memory"]["used"], false);
    for run in ["shm", "wire"] {
        let files = [&ANSWER_FILES[..], &["logits.bin"]].concat();
        assert_same_files(&dir(run), &dir("grpc"), &files);
    }
    assert_eq!(shm["metrics"], grpc["metrics"]);
}

#[test]
fn the_oracle_scores_100_over_http_on_two_endpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let port = server().http_port;
    let urls = format!("127.0.0.1:{port},localhost:{port}");
    let v = json_of(&eval_over(
        "http",
        &urls,
        "oracle",
        tmp.path(),
        &["--batch-size", "2"],
    ));
    assert_eq!(v["metrics"]["exact"], 100.0, "{}", v["metrics"]);
    assert_eq!(v["metrics"]["f1"], 100.0);
    let endpoints = v["endpoints"].as_array().expect("endpoints");
    assert_eq!(endpoints.len(), 2, "{v}");
    assert!(
        endpoints.iter().all(|e| e["requests"].as_u64() > Some(0)),
        "both endpoints served: {endpoints:?}"
    );
}

#[test]
fn a_port_of_the_other_protocol_is_named() {
    // gRPC asked of Triton's HTTP port.
    let o = bertqa(&["models", "--url", &http_url()]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("this looks like Triton's HTTP port; use --protocol http"),
        "{stderr}"
    );
    // HTTP asked of the gRPC port.
    let o = bertqa(&["models", "--protocol", "http", "--url", &server().url]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("this looks like a gRPC port") && stderr.contains("--protocol grpc"),
        "{stderr}"
    );
}

#[test]
fn transport_stream_is_refused_over_http_and_model_errors_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let o = eval_over(
        "http",
        &http_url(),
        "null",
        &tmp.path().join("a"),
        &["--transport", "stream"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--transport stream"),
        "{}",
        show(&o)
    );
    // A model error: its HTTP status and the server's {"error"} text, not the body.
    let o = eval_over(
        "http",
        &http_url(),
        "fault-internal",
        &tmp.path().join("b"),
        &[],
    );
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr
            .contains("answered Internal (HTTP 500) for model \"fault-internal\": injected fault"),
        "{stderr}"
    );
    assert!(!stderr.contains("{\"error\""), "{stderr}");
}

#[test]
fn a_run_over_http_killed_midway_resumes_to_identical_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    let url = http_url();
    // The slow oracle's 192 features, one per request, 2 in flight: a few seconds.
    let http = ["--protocol", "http"];
    ok(&bertqa(&resume::args(
        &url,
        "oracle-slow",
        &reference,
        &http,
    )));
    let mut child = spawn_bertqa(&resume::args(&url, "oracle-slow", &out, &http));
    wait_for_journal(&mut child, &out, 30);
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled(&out);
    assert!((30..192).contains(&kept), "{kept} journaled");
    let resumed = ["--protocol", "http", "--resume"];
    let o = bertqa(&resume::args(&url, "oracle-slow", &out, &resumed));
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{kept} features already answered")),
        "{}",
        show(&o)
    );
    assert_same_outputs(&reference, &out);
}

#[test]
fn http_503_answers_are_retried_as_unavailable() {
    // The oracle refusing every 10th request with UNAVAILABLE: HTTP 503 over REST.
    let tmp = tempfile::tempdir().unwrap();
    let v = json_of(&eval_over(
        "http",
        &http_url(),
        "fault-unavailable-10pct",
        tmp.path(),
        &["--batch-size", "1"],
    ));
    assert_eq!(v["metrics"]["exact"], 100.0, "{}", v["metrics"]);
    let retries = v["retries"]["total"].as_u64().unwrap();
    assert!(retries >= 1, "{}", v["retries"]);
    assert_eq!(v["retries"]["by_code"]["UNAVAILABLE"], retries);
    assert_eq!(v["retries"]["failed_requests"], 0);
}
