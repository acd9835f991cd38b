//! KServe v2 HTTP/REST (`--protocol http`) against the real local Triton's HTTP port:
//! the same bindings, answers, logits and scores as gRPC, and the wrong port named.

use std::path::{Path, PathBuf};

use bertqa::backend::proto::model_config::SchedulingChoice;
use bertqa::backend::{ClientConfig, Protocol, TritonClient};
use serde_json::Value;

use crate::common::{bertqa, root, rt, server, show};

/// The shared server's HTTP address, `127.0.0.1:PORT`.
fn http_url() -> String {
    format!("127.0.0.1:{}", server().http_port)
}

fn fixture(name: &str) -> String {
    root()
        .join("tests/fixtures/squad")
        .join(name)
        .display()
        .to_string()
}

fn ok(o: &std::process::Output) {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
}

fn json_of(o: &std::process::Output) -> Value {
    ok(o);
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", show(o)))
}

fn client(rt: &tokio::runtime::Runtime, protocol: Protocol, url: String) -> TritonClient {
    let config = ClientConfig {
        url,
        protocol,
        ..Default::default()
    };
    rt.block_on(TritonClient::connect(&config))
        .expect("connect")
}

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
        matches!(e, bertqa::Error::ModelNotFound { ref available, .. } if available.iter().any(|m| m == "null")),
        "{e}"
    );
}

fn eval(
    protocol: &str,
    url: &str,
    model: &str,
    out: &Path,
    extra: &[&str],
) -> std::process::Output {
    let out = out.to_str().unwrap();
    let data = fixture("v2-long.json");
    let mut args = vec![
        "eval",
        "--protocol",
        protocol,
        "--url",
        url,
        "--data",
        &data,
        "--model",
        model,
        "--output-dir",
        out,
        "--quiet",
        "--json",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn eval_over_http_writes_the_files_of_grpc_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    let grpc = json_of(&eval(
        "grpc",
        &server().url,
        "tiny-bert",
        &dir("grpc"),
        &["--save-logits"],
    ));
    // Shared memory on by default (a loopback server), and off.
    let shm = json_of(&eval(
        "http",
        &http_url(),
        "tiny-bert",
        &dir("shm"),
        &["--save-logits"],
    ));
    let wire = json_of(&eval(
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
        for file in [
            "predictions.json",
            "nbest_predictions.json",
            "null_odds.json",
            "logits.bin",
        ] {
            assert!(
                read(dir(run).join(file)) == read(dir("grpc").join(file)),
                "{run}/{file} differs from gRPC's"
            );
        }
    }
    assert_eq!(shm["metrics"], grpc["metrics"]);
}

#[test]
fn the_oracle_scores_100_over_http_on_two_endpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let port = server().http_port;
    let urls = format!("127.0.0.1:{port},localhost:{port}");
    let v = json_of(&eval(
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
    let o = eval(
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
    let o = eval(
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

/// Features in the journal of a run writing to `dir` (0 while there is none).
fn journaled(dir: &Path) -> usize {
    bertqa::journal::read(&dir.join("journal.bqj")).map_or(0, |(_, c)| c.logits.len())
}

#[test]
fn a_run_over_http_killed_midway_resumes_to_identical_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (reference, out) = (tmp.path().join("ref"), tmp.path().join("out"));
    let url = http_url();
    // 192 features of the slow oracle, one per request, 2 in flight: a few seconds.
    let args = |dir: &Path, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "eval",
            "--protocol",
            "http",
            "--url",
            &url,
            "--data",
            "tests/fixtures/squad/v2-long.json",
            "--model",
            "oracle-slow",
            "--output-dir",
            dir.to_str().unwrap(),
            "--doc-stride",
            "16",
            "--batch-size",
            "1",
            "--concurrency",
            "2",
            "--quiet",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        bertqa(&a)
    };
    ok(&run(args(&reference, &[])));
    let mut child = crate::common::spawn_bertqa(&args(&out, &[]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while journaled(&out) < 30 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before 30 features"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "no 30 journaled features"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled(&out);
    assert!((30..192).contains(&kept), "{kept} journaled");
    let o = run(args(&out, &["--resume"]));
    ok(&o);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{kept} features already answered")),
        "{}",
        show(&o)
    );
    for f in [
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
    ] {
        assert!(read(reference.join(f)) == read(out.join(f)), "{f} differs");
    }
}

#[test]
fn http_503_answers_are_retried_as_unavailable() {
    // The oracle refusing every 10th request with UNAVAILABLE: HTTP 503 over REST.
    let tmp = tempfile::tempdir().unwrap();
    let v = json_of(&eval(
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
