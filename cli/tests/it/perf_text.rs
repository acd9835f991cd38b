//! `bertqa perf` of a model that takes text: the `qa-text-logits` ensemble
//! (qa-text-tokenizer -> tiny-bert-nobatch) loaded with the sample file's questions and
//! contexts over gRPC and HTTP, its server breakdown reported per step; and the flags
//! that cannot apply to it refused in one line.
//!
//! The sweeps run against a server of their own, one at a time, so the statistics
//! deltas they read see no other test's requests.

use std::sync::{Mutex, MutexGuard, OnceLock};

use serde_json::Value;

use crate::common::shm_watch::{assert_one_region_registered_then_unregistered, run_watching};
use crate::common::{
    assert_fails_with, assert_schema, bertqa, json_of, ok, read, show, start_server_with, Server,
    SAMPLE, SHORT_LEVEL,
};

/// The ensemble and its composing models.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        start_server_with(
            &["qa-text-tokenizer", "tiny-bert-nobatch", "qa-text-logits"],
            &[],
            None,
        )
    })
}

/// Held by each sweep (see above).
fn one_sweep() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const STEPS: [&str; 2] = ["qa-text-tokenizer", "tiny-bert-nobatch"];

/// A short sweep of `qa-text-logits` over `protocol`, with `extra` flags.
fn perf(protocol: &str, extra: &[&str]) -> std::process::Output {
    let s = server();
    let url = match protocol {
        "http" => format!("127.0.0.1:{}", s.http_port),
        _ => s.url.clone(),
    };
    let metrics = format!("127.0.0.1:{}", s.metrics_port);
    let mut args = vec![
        "perf",
        "--model",
        "qa-text-logits",
        "--data",
        SAMPLE,
        "--url",
        &url,
        "--protocol",
        protocol,
        "--metrics-url",
        &metrics,
        "--measurement-request-count",
        "4",
        "--stability-percentage",
        "100",
        "--max-trials",
        "3",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn perf_of_a_text_ensemble_reports_queue_and_compute_of_each_step() {
    for protocol in ["grpc", "http"] {
        let _one = one_sweep();
        let v = json_of(&perf(protocol, &["--concurrency-range", "1:2", "--json"]));
        assert_schema("perf", &v);
        assert_eq!(v["model"]["takes"], "text", "{protocol}");
        assert_eq!(v["model"]["protocol"], protocol);
        assert_eq!(v["batch_size"], 1, "one question per request");
        // `auto` on a loopback address: the text through shared memory.
        assert_eq!(
            v["inputs"], "through shared memory, outputs in each response",
            "{protocol}"
        );
        let levels = v["levels"].as_array().unwrap();
        assert_eq!(levels.len(), 2, "{protocol}: {v:#}");
        for l in levels {
            let requests = l["requests"].as_u64().unwrap();
            assert!(requests > 0, "{l}");
            assert_eq!(
                l["features"].as_u64(),
                Some(requests),
                "questions, one each"
            );
            assert!(f(&l["server_ms"]["request"]) > 0.0, "{l:#}");
            let steps = l["steps"].as_array().unwrap();
            let names: Vec<&str> = steps.iter().map(|s| s["model"].as_str().unwrap()).collect();
            assert_eq!(names, STEPS, "{protocol}: {l:#}");
            for s in steps {
                assert!(s["requests"].as_u64().unwrap() > 0, "{protocol}: {s}");
                assert!(s["executions"].as_u64().unwrap() > 0, "{protocol}: {s}");
                assert!(f(&s["queue_ms"]) >= 0.0, "{s}");
                assert!(f(&s["compute_infer_ms"]) > 0.0, "{protocol}: {s}");
                assert!(f(&s["compute_input_ms"]) >= 0.0, "{s}");
                assert!(f(&s["compute_output_ms"]) >= 0.0, "{s}");
                // Each ensemble request is one request of each step; the statistics are
                // read one model after another while requests are in flight, so at each
                // end of the level up to `concurrency` requests may count in one model's
                // and not yet in another's.
                let seen = l["server"]["requests"].as_i64().unwrap();
                let c = l["concurrency"].as_i64().unwrap();
                let step_seen = s["requests"].as_i64().unwrap();
                assert!((step_seen - seen).abs() <= 2 * c, "{protocol}: {l:#}");
            }
            assert!(l["metrics"]["inference"].is_object(), "{l:#}");
        }
    }
    let _one = one_sweep();
    let tmp = tempfile::tempdir().unwrap();
    let html = tmp.path().join("perf.html");
    let o = perf(
        "grpc",
        &["--concurrency", "1", "--html", html.to_str().unwrap()],
    );
    ok(&o);
    let page = read(&html);
    assert!(page.contains("Ensemble steps"), "{page}");
    assert!(STEPS.iter().all(|s| page.contains(s)));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("questions, 1 per request, cycled; the server tokenizes"),
        "{text}"
    );
    for (i, step) in STEPS.iter().enumerate() {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("  step {}", i + 1)))
            .unwrap_or_else(|| panic!("no step {}: {text}", i + 1));
        assert!(line.contains(&format!(" {step}: queue ")), "{line}");
        assert!(line.contains(" + infer "), "{line}");
    }
    assert!(text.contains("questions/s"), "{text}");
}

#[test]
fn perf_of_a_text_model_sends_its_text_through_shared_memory() {
    let s = server();
    for (protocol, url) in [
        ("grpc", s.url.clone()),
        ("http", format!("127.0.0.1:{}", s.http_port)),
    ] {
        let _one = one_sweep();
        let w = run_watching(
            s.http_port,
            &[
                &[
                    "perf",
                    "--model",
                    "qa-text-logits",
                    "--data",
                    SAMPLE,
                    "--url",
                    &url,
                    "--protocol",
                    protocol,
                    "--shared-memory",
                    "system",
                    "--json",
                    "--quiet",
                ][..],
                &SHORT_LEVEL,
            ]
            .concat(),
        );
        assert_one_region_registered_then_unregistered(&w);
        let v: Value = serde_json::from_slice(&w.output.stdout)
            .unwrap_or_else(|e| panic!("{e}\n{}", show(&w.output)));
        assert_eq!(
            v["inputs"], "through shared memory, outputs in each response",
            "{protocol}: {v}"
        );
        assert!(v["levels"][0]["requests"].as_u64().unwrap() > 0, "{v}");
    }
}

#[test]
fn flags_that_cannot_apply_to_a_text_model_are_refused_in_one_line() {
    for (flag, want) in [
        (
            &["--doc-stride", "64"][..],
            "--doc-stride does not apply: model \"qa-text-logits\" takes text (the server tokenizes",
        ),
        (
            &["--export-input-data", "x.json"],
            "--export-input-data does not apply",
        ),
        (
            &["--batch-size", "2"],
            "--batch-size 2: model \"qa-text-logits\" takes one question per request",
        ),
    ] {
        let o = perf("grpc", flag);
        assert_fails_with(&o, &[want]);
        assert_eq!(String::from_utf8_lossy(&o.stderr).lines().count(), 1);
    }
}
