//! Server metrics (Prometheus) read by `perf` and `eval`: the real Triton's CPU gauges
//! and `nv_inference_*` counters, a GPU server's page recorded by us and served in
//! place of one, endpoints behind TLS and a key, and endpoints that are down, slow or
//! serve garbage (never failing a run).

use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::common::page_server::{self, Answer};
use crate::common::{
    assert_schema, bertqa, json_of, ok, read_json, root, show, start_server_with, Server, SAMPLE,
};

/// A server of the metrics tests' own: its counters see only their requests.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start_server_with(&["null", "oracle"], &[], None))
}

/// One test at a time: the counters of one must not see another's requests.
fn turn() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn triton_metrics() -> String {
    format!("127.0.0.1:{}", server().metrics_port)
}

/// A short sweep of `null` (1 and 2 in flight) with `extra`.
fn perf(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "perf",
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--url",
        &server().url,
        "--concurrency-range",
        "1:2",
        "--measurement-interval-ms",
        "600",
        "--max-trials",
        "3",
        "--metrics-interval-ms",
        "200",
        "-q",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn perf_json(extra: &[&str]) -> Value {
    let v = json_of(&perf(&[extra, &["--json"]].concat()));
    assert_schema("perf", &v);
    v
}

/// How a fake page server answers.
enum Page {
    /// 200 with this body; 401 unless the request carries this header line.
    Text(String, Option<&'static str>),
    /// Answers after this long.
    Slow(Duration),
}

/// Serves `page` on a free loopback port (for the process's lifetime); `host:port`.
fn serve(page: Page) -> String {
    page_server::serve(move |request| {
        let (status, body) = match &page {
            Page::Text(_, Some(header)) if !request.contains(header) => {
                ("401 Unauthorized", "missing key".to_string())
            }
            Page::Text(body, _) => ("200 OK", body.clone()),
            Page::Slow(d) => {
                std::thread::sleep(*d);
                ("200 OK", "nv_cpu_utilization 0.5\n".to_string())
            }
        };
        Answer {
            status,
            content_type: "text/plain; version=0.0.4",
            body,
        }
    })
}

fn gpu_page() -> String {
    std::fs::read_to_string(root().join("tests/fixtures/metrics/triton-gpu.prom")).unwrap()
}

fn warnings(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn perf_reads_tritons_cpu_metrics_and_its_counters_agree_with_the_statistics() {
    let _turn = turn();
    let url = triton_metrics();
    let v = perf_json(&["--metrics-url", &url]);
    assert_eq!(
        v["metrics"]["urls"][0],
        format!("http://{url}/metrics").as_str()
    );
    for l in v["levels"].as_array().unwrap() {
        let m = &l["metrics"];
        // Triton 2.51 on a CPU-only machine: CPU gauges, no GPU.
        assert!(m["cpu_utilization"].as_f64().is_some(), "{m:#}");
        assert!(m["cpu_memory_bytes"].as_f64().unwrap() > 0.0, "{m:#}");
        assert_eq!(m["gpus"], serde_json::json!([]));
        let counted = &m["inference"];
        // The level's requests (its reported windows) are among those counted from
        // load start to drain.
        assert!(
            counted["requests"].as_f64().unwrap() >= l["requests"].as_f64().unwrap(),
            "{l:#}"
        );
        assert_eq!(counted["failures"], 0.0);
        assert!(counted["executions"].as_f64().unwrap() >= 1.0);
        assert_eq!(m["endpoints"][0]["error"], Value::Null);
    }
    // The counters agree with the model statistics over the same span: no warning.
    let w = warnings(&v);
    assert!(w.iter().all(|w| !w.contains("metrics")), "{w:?}");

    let o = perf(&["--metrics-url", &url]);
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("; GPU: not reported by the server\n"),
        "{text}"
    );
    assert!(text.contains("  metrics      CPU "), "{text}");
    assert!(text.contains("  counters     "), "{text}");
}

#[test]
fn a_recorded_gpu_servers_page_gives_gpu_figures_end_to_end() {
    let _turn = turn();
    let page = serve(Page::Text(gpu_page(), None));
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("perf.csv");
    let v = perf_json(&["--metrics-url", &page, "--csv", csv.to_str().unwrap()]);
    let m = &v["levels"][0]["metrics"];
    assert_eq!(m["cpu_utilization"], 0.35);
    assert_eq!(m["cpu_memory_bytes"], 61e9);
    let gpus = m["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0]["uuid"], "GPU-6f1c0d1e-0000-4000-8000-00000000a100");
    assert_eq!(gpus[0]["utilization"], 0.62);
    assert_eq!(gpus[0]["power_w"], 212.5);
    assert_eq!(gpus[0]["memory_used_bytes"], 2147483648.0);
    assert_eq!(gpus[1]["utilization"], 0.18);
    assert_eq!(gpus[1]["memory_total_bytes"], 85899345920.0);
    // A page that never moves: its counters rose by nothing while the model statistics
    // counted every request, and the report says so.
    assert_eq!(m["inference"]["requests"], 0.0);
    let w = warnings(&v);
    assert!(
        w.iter().any(|w| w.starts_with("concurrency 1: metrics nv_inference_request_success rose by 0, the model statistics by ")),
        "{w:?}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let header = text.lines().next().unwrap();
    assert!(
        header.ends_with(",Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,Total GPU Memory,Avg CPU Utilization,Avg CPU Memory Usage"),
        "{header}"
    );
    assert!(text.lines().nth(1).unwrap().contains(
        ",GPU-6f1c0d1e-0000-4000-8000-00000000a100:62;GPU-6f1c0d1e-0000-4000-8000-00000000a101:18;,"
    ));
}

/// Down, slow, garbage, refused: the run completes, the figures are null, and one
/// warning names the endpoint and the trouble.
#[test]
fn a_metrics_endpoint_that_is_down_slow_or_garbage_never_fails_the_run() {
    let _turn = turn();
    // A privileged port nothing listens on: a free port given back could be taken by
    // another test's server before the run.
    let down = "127.0.0.1:1".to_string();
    let slow = serve(Page::Slow(Duration::from_secs(3)));
    let garbage = serve(Page::Text(
        "<html><body>502 Bad Gateway</body></html>".into(),
        None,
    ));
    let keyed = serve(Page::Text(gpu_page(), Some("x-metrics-key: k1")));
    for (url, why) in [
        (down.as_str(), "connection refused"),
        (slow.as_str(), "timed out after 200 ms"),
        (garbage.as_str(), "not Prometheus text (no sample line"),
        (keyed.as_str(), "HTTP 401"),
    ] {
        let o = perf(&["--metrics-url", url, "--json"]);
        let v = json_of(&o);
        assert_schema("perf", &v);
        for l in v["levels"].as_array().unwrap() {
            let m = &l["metrics"];
            assert_eq!(m["cpu_utilization"], Value::Null, "{url}: {m:#}");
            assert_eq!(m["inference"], Value::Null, "{url}: {m:#}");
        }
        let w: Vec<String> = warnings(&v)
            .into_iter()
            .filter(|w| w.starts_with("metrics at"))
            .collect();
        assert_eq!(w.len(), 1, "{url}: {w:?}");
        assert!(
            w[0].starts_with(&format!("metrics at http://{url}/metrics: "))
                && w[0].to_lowercase().contains(&why.to_lowercase())
                && w[0].ends_with(": not reported"),
            "{url}: {w:?}\n{}",
            show(&o)
        );
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(&format!("warning: {}", w[0])), "{stderr}");
    }
}

/// The server's flags reach its metrics: a header (the key a gateway wants) and TLS
/// (a terminator in front of Triton's metrics port).
#[test]
fn metrics_behind_a_key_or_tls_work_with_the_servers_flags() {
    let _turn = turn();
    let keyed = serve(Page::Text(gpu_page(), Some("x-metrics-key: k1")));
    let v = perf_json(&["--metrics-url", &keyed, "--header", "x-metrics-key:k1"]);
    assert_eq!(v["levels"][0]["metrics"]["cpu_utilization"], 0.35);
    assert!(
        !v.to_string().contains("k1\""),
        "the key's value is never shown"
    );

    let proxy = crate::common::tls_proxy::start(server().metrics_port, false);
    let ca = crate::common::tls_proxy::pki().path("ca.pem");
    let https = crate::common::tls_proxy::start(server().http_port, false);
    let json = json_of(&bertqa(&[
        "perf",
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--url",
        &https.url(),
        "--protocol",
        "http",
        "--ssl-root-cert",
        &ca,
        "--concurrency",
        "1",
        "--measurement-interval-ms",
        "600",
        "--max-trials",
        "3",
        "--metrics-interval-ms",
        "200",
        // No scheme: TLS, as the server's.
        "--metrics-url",
        &format!("127.0.0.1:{}", proxy.port),
        "--json",
        "-q",
    ]));
    assert_eq!(
        json["metrics"]["urls"][0],
        format!("https://127.0.0.1:{}/metrics", proxy.port).as_str()
    );
    let m = &json["levels"][0]["metrics"];
    assert!(m["cpu_utilization"].as_f64().is_some(), "{json:#}");
    assert!(m["inference"]["requests"].as_f64().unwrap() > 0.0);
}

#[test]
fn eval_reads_metrics_only_when_asked_and_its_answer_files_do_not_change() {
    let _turn = turn();
    let tmp = tempfile::tempdir().unwrap();
    let run = |dir: &str, extra: &[&str]| {
        let out = tmp.path().join(dir);
        let mut args = vec![
            "eval",
            "--model",
            "oracle",
            "--data",
            SAMPLE,
            "--url",
            &server().url,
            "--output-dir",
            out.to_str().unwrap(),
            "-q",
        ];
        args.extend_from_slice(extra);
        let o = bertqa(&args);
        ok(&o);
        (out, o)
    };
    let url = triton_metrics();
    let (plain, _) = run("plain", &[]);
    let (read, o) = run(
        "metrics",
        &["--metrics-url", &url, "--metrics-interval-ms", "200"],
    );
    for f in [
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
    ] {
        assert_eq!(
            std::fs::read(plain.join(f)).unwrap(),
            std::fs::read(read.join(f)).unwrap(),
            "{f}"
        );
    }
    let without = read_json(plain.join("metrics.json"));
    assert!(without.get("server_metrics").is_none(), "{without:#}");
    let with = read_json(read.join("metrics.json"));
    let m = &with["server_metrics"];
    assert_eq!(
        m["urls"][0],
        format!("http://{url}/metrics").as_str(),
        "{with:#}"
    );
    assert!(m["cpu_utilization"].as_f64().is_some(), "{m:#}");
    assert_eq!(m["gpus"], serde_json::json!([]));
    // Every question of the sample went through the oracle while it was read.
    let features = with["features"].as_f64().unwrap();
    assert_eq!(
        m["inference"]["inferences"].as_f64().unwrap(),
        features,
        "{m:#}"
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("GPU: not reported by the server"), "{text}");
}
