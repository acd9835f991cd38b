//! Reliability and scale-out on the real local Triton (docs/reliability.md):
//! retries of transient errors, the fault-injecting models of `models/repo/fault-*`,
//! servers killed (and restarted) under a running evaluation, and the endpoint pool over
//! three servers.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{
    assert_same_files, assert_same_outputs, assert_schema, bertqa, free_port, json_of, kill_server,
    log_tail, read_json, sample_eval, server, show, slow_server, spawn_bertqa, Server,
};

/// The clean reference run: `oracle` on the shared server.
fn clean_oracle_run(tmp: &Path) -> PathBuf {
    let out = tmp.join("clean");
    let o = bertqa(&sample_eval("oracle", &out, &["--url", &server().url]));
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    out
}

#[test]
fn unavailable_on_a_tenth_of_requests_is_retried_and_answers_are_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = clean_oracle_run(tmp.path());
    let out = tmp.path().join("faulty");
    let mut args = sample_eval("fault-unavailable-10pct", &out, &["--url", &server().url]);
    // One feature per request: 52 requests, so at least five are refused.
    args.extend(["--batch-size", "1"].map(String::from));
    let o = bertqa(&args);
    let v = json_of(&o);
    assert_schema("eval", &v);
    let retries = v["retries"]["total"].as_u64().unwrap();
    assert!(retries >= 5, "{}", v["retries"]);
    assert_eq!(v["retries"]["by_code"]["UNAVAILABLE"], retries);
    assert_eq!(v["retries"]["failed_requests"], 0);
    assert_eq!(v["requests"], 52);
    let ep = &v["endpoints"][0];
    assert_eq!(ep["errors"]["by_code"]["UNAVAILABLE"], retries);
    assert_eq!(ep["requests"], 52);
    // The first refusal came on the stream, without its code: asked again unary, and the
    // connection stayed unary (its later refusals are the retries counted above).
    assert_eq!(ep["transport"], "stream");
    assert_eq!(ep["unary_connections"], 1);
    // Outputs went through shared memory; a retried request got its outputs in the
    // message and its slot was retired, so the answers are still the clean run's.
    assert_eq!(v["shared_memory"]["used"], true, "{}", v["shared_memory"]);
    assert_eq!(
        v["shared_memory"]["outputs"], true,
        "{}",
        v["shared_memory"]
    );
    assert_same_outputs(&clean, &out);
    let metrics: Value = read_json(out.join("metrics.json"));
    assert_eq!(metrics["retries"], v["retries"]);

    // The text report says so too, with the endpoint's line (and, with -v, how the
    // requests travelled).
    let text_out = tmp.path().join("text");
    let mut args = sample_eval(
        "fault-unavailable-10pct",
        &text_out,
        &["--url", &server().url],
    );
    args.retain(|a| a != "--json");
    args.extend(["--batch-size", "1", "-v"].map(String::from));
    let o = bertqa(&args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("retries "))
        .unwrap_or_else(|| panic!("no retries line:\n{text}"));
    assert!(
        line.contains("(UNAVAILABLE ") && line.ends_with("failed requests 0"),
        "{line}"
    );
    let endpoint = format!("endpoint     {}: 52 requests, 52 features", server().url);
    assert!(text.contains(&endpoint), "{text}");
    assert!(
        text.contains(
            "requests     on one ModelStreamInfer stream per connection; 1 of 1 connections \
             went unary after the stream answered with an error"
        ),
        "{text}"
    );
    assert_same_outputs(&clean, &text_out);
}

#[test]
fn a_model_error_is_not_retried_unless_asked_and_names_model_and_message() {
    let tmp = tempfile::tempdir().unwrap();
    let args = sample_eval(
        "fault-internal",
        &tmp.path().join("a"),
        &["--url", &server().url],
    );
    let o = bertqa(&args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Internal for model \"fault-internal\": injected fault: model exploded"),
        "{err}"
    );
    assert!(!err.contains("retries"), "not retried: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    let mut args = sample_eval(
        "fault-internal",
        &tmp.path().join("b"),
        &["--url", &server().url],
    );
    args.extend(["--retry-model-errors", "--retries", "2"].map(String::from));
    let o = bertqa(&args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("failed 3 times (INTERNAL ×3; --retries 2 spent)"),
        "{err}"
    );
    assert!(err.contains("fault-internal"), "{err}");
}

#[test]
fn malformed_responses_fail_at_once_naming_model_tensor_expected_and_actual() {
    let tmp = tempfile::tempdir().unwrap();
    for (model, expected) in [
        (
            "fault-wrong-shape",
            "tensor \"output__0\": expected shape [52, 384], got shape [52, 383]",
        ),
        (
            "fault-wrong-dtype",
            "tensor \"output__0\": expected FP32, got FP64",
        ),
        (
            "fault-missing-output",
            "tensor \"output__1\": expected an output tensor of that name, got missing \
             (response has [\"output__0\"])",
        ),
    ] {
        let mut args = sample_eval(model, &tmp.path().join(model), &["--url", &server().url]);
        args.extend(["--fixed-seq-len", "--retries", "5"].map(String::from));
        let o = bertqa(&args);
        assert_eq!(o.status.code(), Some(2), "{model}: {}", show(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("model \"{model}\", {expected}")),
            "{model}: {err}"
        );
        assert!(!err.contains("retries"), "{model}: not retried: {err}");
    }
}

#[test]
fn non_finite_logits_are_decoded_as_negative_infinity_counted_and_warned() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = clean_oracle_run(tmp.path());
    let out = tmp.path().join("nan");
    let o = bertqa(&sample_eval(
        "fault-non-finite-logits",
        &out,
        &["--url", &server().url],
    ));
    let v = json_of(&o);
    assert_schema("eval", &v);
    // Every one of the 52 windows holds +inf, NaN and -inf (three values each).
    assert_eq!(v["non_finite_logits"]["features"], 52, "{v:#}");
    assert_eq!(v["non_finite_logits"]["values"], 52 * 3);
    // +inf taken at face value would start a winning span next to each true answer.
    assert_same_files(&clean, &out, &["predictions.json"]);
    assert_eq!(v["metrics"]["exact"], 100.0);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning: 156 NaN or infinite logits in 52 features from model \"fault-non-finite-logits\""),
        "{err}"
    );
}

/// Successful inferences of `model` so far (HTTP statistics; 0 when unreachable).
fn served(http_port: u16, model: &str) -> u64 {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", http_port)) else {
        return 0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!(
        "GET /v2/models/{model}/stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    let Some((_, body)) = buf.split_once("\r\n\r\n") else {
        return 0;
    };
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["model_stats"][0]["inference_stats"]["success"]["count"].as_u64())
        .unwrap_or(0)
}

/// Waits until `server` has answered `n` requests of oracle-slow, then SIGKILLs it; the
/// evaluation must still be running at that moment (so the kill is mid-run).
fn kill_after(server: &Server, n: u64, eval: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while served(server.http_port, "oracle-slow") < n {
        assert!(
            eval.try_wait().unwrap().is_none(),
            "the evaluation ended before {n} requests reached {}",
            server.url
        );
        assert!(Instant::now() < deadline, "no progress on {}", server.url);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        eval.try_wait().unwrap().is_none(),
        "evaluation already over"
    );
    kill_server(server);
}

/// One feature per request (52 requests), `concurrency` in flight.
fn slow_args(urls: &str, out: &Path, concurrency: usize, extra: &[&str]) -> Vec<String> {
    let mut args = sample_eval("oracle-slow", out, &["--url", urls]);
    args.extend(["--batch-size", "1", "--concurrency"].map(String::from));
    args.push(concurrency.to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// An `eval` of oracle-slow over `protocol` ("grpc" or "http") whose server is killed
/// after 8 requests and started again on the same ports. Checks that it completes
/// (exit 0, retries, no failed request) with files identical to an uninterrupted run's
/// and that the restarted server answered the rest; returns its JSON report.
fn killed_and_restarted_mid_run(protocol: &str) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let clean = clean_oracle_run(tmp.path());
    let ports = (free_port(), free_port(), free_port());
    let out = tmp.path().join("restarted");
    let port = if protocol == "http" { ports.1 } else { ports.0 };
    // Started before the server: --wait-ready waits for it. Then 100 retries with
    // backoff capped at 1 s outlast a restart of several seconds.
    let args = slow_args(
        &format!("127.0.0.1:{port}"),
        &out,
        2,
        &[
            "--protocol",
            protocol,
            "--wait-ready",
            "300",
            "--retries",
            "100",
            "--retry-max-backoff-ms",
            "1000",
        ],
    );
    let mut eval = spawn_bertqa(&args);
    let first = slow_server(Some(ports));
    kill_after(&first, 8, &mut eval);
    std::thread::sleep(Duration::from_secs(1));
    let second = slow_server(Some(ports));
    assert_eq!(second.url, first.url);
    let o = eval.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n--- server log\n{}",
        show(&o),
        log_tail(&second.log, 20)
    );
    let v = json_of(&o);
    assert!(
        v["retries"]["total"].as_u64().unwrap() >= 1,
        "{}",
        v["retries"]
    );
    assert_eq!(v["retries"]["failed_requests"], 0);
    assert_eq!(v["requests"], 52);
    assert_same_outputs(&clean, &out);
    // The restarted server answered the rest (its counter starts from zero).
    assert!(served(second.http_port, "oracle-slow") < 52);
    v
}

#[test]
fn a_server_killed_mid_run_and_restarted_gives_identical_outputs() {
    let v = killed_and_restarted_mid_run("grpc");
    // The restarted server did not know the shared memory region: the rest of the
    // requests carried their tensors.
    assert_eq!(v["shared_memory"]["used"], true, "{}", v["shared_memory"]);
    assert!(
        v["shared_memory"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("lost the shared memory region")),
        "{}",
        v["shared_memory"]
    );
}

#[test]
fn a_server_killed_mid_run_over_http_and_restarted_gives_identical_outputs() {
    let v = killed_and_restarted_mid_run("http");
    assert_eq!(v["model"]["protocol"], "http");
}

#[test]
fn a_server_gone_for_good_exits_2_with_a_summary_after_the_retry_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let gone = slow_server(None);
    let out = tmp.path().join("gone");
    let args = slow_args(&gone.url, &out, 2, &["--retries", "3"]);
    let mut eval = spawn_bertqa(&args);
    kill_after(&gone, 4, &mut eval);
    let o = eval.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: evaluation stopped after "), "{err}");
    assert!(
        err.contains("failed 4 times (UNAVAILABLE ×4; --retries 3 spent)"),
        "{err}"
    );
    assert!(err.contains(&gone.url), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn three_endpoints_share_the_load_and_survive_losing_one() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = clean_oracle_run(tmp.path());
    let servers: Vec<Server> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3).map(|_| s.spawn(|| slow_server(None))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let urls = servers
        .iter()
        .map(|s| s.url.as_str())
        .collect::<Vec<_>>()
        .join(",");

    // All three healthy: every endpoint answers and is reported.
    let out = tmp.path().join("three");
    let o = bertqa(&slow_args(&urls, &out, 6, &[]));
    let v = json_of(&o);
    assert_schema("eval", &v);
    let eps = v["endpoints"].as_array().unwrap();
    assert_eq!(eps.len(), 3);
    let mut total = 0;
    for (e, s) in eps.iter().zip(&servers) {
        assert_eq!(e["url"], s.url);
        assert!(e["requests"].as_u64().unwrap() > 0, "{e}");
        assert!(e["features_per_s"].as_f64().unwrap() > 0.0, "{e}");
        assert!(e["latency_ms"]["p50"].as_f64().unwrap() > 0.0, "{e}");
        total += e["features"].as_u64().unwrap();
    }
    assert_eq!(total, 52);
    assert_same_outputs(&clean, &out);

    // One killed mid-run: its requests go to the other two; same answers.
    let out = tmp.path().join("two-left");
    let mut eval = spawn_bertqa(&slow_args(&urls, &out, 6, &["--retries", "2"]));
    let base = served(servers[2].http_port, "oracle-slow");
    kill_after(&servers[2], base + 3, &mut eval);
    let o = eval.wait_with_output().unwrap();
    let v = json_of(&o);
    assert_schema("eval", &v);
    let dead = &v["endpoints"][2];
    assert!(dead["taken_out"].as_u64().unwrap() >= 1, "{dead}");
    assert_eq!(dead["healthy_at_end"], false, "{dead}");
    let features: u64 = v["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["features"].as_u64().unwrap())
        .sum();
    assert_eq!(features, 52);
    assert_same_outputs(&clean, &out);
}

#[test]
fn wait_ready_gives_up_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("127.0.0.1:{}", free_port());
    let mut args = sample_eval("oracle", tmp.path(), &["--url", &url]);
    args.extend(["--wait-ready", "0.5"].map(String::from));
    let o = bertqa(&args);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "error: cannot reach Triton at {url}: not ready within --wait-ready 0.5 s: "
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
