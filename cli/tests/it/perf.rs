//! `bertqa perf` on the real local Triton: a 1:8 concurrency sweep with its three
//! exports, the tiny-bert latency breakdown, an open-loop request-rate sweep, and the
//! usage errors.
//!
//! The sweeps run against a server of their own that loads only `null` and
//! `tiny-bert`, and take turns on `null`, so the ModelStatistics deltas they read see
//! no other test's requests.

use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{
    assert_schema, bertqa, json_of, read, read_json, root, show, start_server_with, Server, SAMPLE,
};

/// The sweeps' own server (see above).
fn perf_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start_server_with(&["null", "tiny-bert"], &[], None))
}

/// Held by the tests that load `null`: one test's requests must not show in another's
/// server statistics.
fn null_model() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// `perf` of `model` on the sweeps' server, reading its metrics as on a deployment
/// (Triton's metrics port, here a free one).
fn perf(model: &str, extra: &[&str]) -> Output {
    let metrics = format!("127.0.0.1:{}", perf_server().metrics_port);
    let mut args = vec![
        "perf",
        "--model",
        model,
        "--data",
        SAMPLE,
        "--url",
        &perf_server().url,
        "--metrics-url",
        &metrics,
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn concurrency_sweep_1_to_8_writes_csv_json_and_svg() {
    let _null = null_model();
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("perf.csv");
    let svg = tmp.path().join("perf.svg");
    let o = perf(
        "null",
        &[
            "--concurrency-range",
            "1:8",
            "--batch-size",
            "4",
            "--measurement-request-count",
            "10",
            "--stability-percentage",
            "50",
            "--max-trials",
            "4",
            "--json",
            "--csv",
            csv.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ],
    );
    let v = json_of(&o);
    assert_schema("perf", &v);
    assert_eq!(v["mode"], "concurrency");
    // The local server is on a loopback address: --shared-memory auto uses it.
    assert_eq!(v["inputs"], "through shared memory, outputs too");
    assert_eq!(v["batch_size"], 4);
    assert_eq!(v["features"], 52, "every window of the sample file");
    let levels = v["levels"].as_array().unwrap();
    let concurrency: Vec<u64> = levels
        .iter()
        .map(|l| l["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(concurrency, (1..=8).collect::<Vec<_>>());
    for l in levels {
        let requests = l["requests"].as_u64().unwrap();
        assert!(requests > 0, "{l}");
        assert_eq!(
            l["features"].as_u64().unwrap(),
            4 * requests,
            "full batches"
        );
        let (rps, fps) = (
            f(&l["throughput"]["requests_per_s"]),
            f(&l["throughput"]["features_per_s"]),
        );
        assert!((fps - 4.0 * rps).abs() < 1e-3 * fps.max(1.0), "{l}");
        let lat = &l["latency_ms"];
        let p = ["p50", "p90", "p95", "p99", "max"].map(|k| f(&lat[k]));
        assert!(p.windows(2).all(|w| w[0] <= w[1]) && p[0] > 0.0, "{lat}");
        assert!((3..=4).contains(&l["trials"].as_u64().unwrap()), "{l}");
        // The server saw this level's requests, 4 inferences each (its counters are
        // read while requests are in flight, so a boundary request may count in one
        // counter and not yet in the other; and while other tests load the same server
        // a statistics call can take milliseconds, in which more requests complete: a
        // window of 33 requests at concurrency 2 was once seen as 39).
        let c = l["concurrency"].as_i64().unwrap();
        let inferences = l["server"]["inferences"].as_i64().unwrap();
        let seen = l["server"]["requests"].as_i64().unwrap();
        assert!((inferences - 4 * seen).abs() <= 4 * 2 * c, "{l:#}");
        assert!(
            (seen - requests as i64).abs() <= 2 * c + 1 + requests as i64 / 4,
            "{l:#}"
        );
    }
    // Progress went to stderr, one line per window; stdout held only the JSON.
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("concurrency 8: window 3: "), "{stderr}");

    // CSV: perf_analyzer's header, one row per level, by increasing throughput.
    let text = read(&csv);
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
         Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,\
         p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,\
         response wait,Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,\
         Total GPU Memory,Avg CPU Utilization,Avg CPU Memory Usage"
    );
    // perf_analyzer's 16 columns, then the metrics: no GPU here, the CPU's figures.
    let rows: Vec<Vec<f64>> = lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), 22, "{l}");
            assert_eq!(&cells[16..20], &["", "", "", ""], "{l}");
            assert!(cells[20].parse::<f64>().is_ok() && cells[21].parse::<f64>().is_ok());
            cells[..16].iter().map(|x| x.parse().unwrap()).collect()
        })
        .collect();
    assert_eq!(rows.len(), 8);
    assert!(rows.windows(2).all(|w| w[0][1] <= w[1][1]), "{text}");
    let mut first: Vec<u64> = rows.iter().map(|r| r[0] as u64).collect();
    first.sort();
    assert_eq!(first, (1..=8).collect::<Vec<_>>());
    for r in &rows {
        assert_eq!(r.len(), 16);
        // The same level in the JSON, in microseconds.
        let l = levels
            .iter()
            .find(|l| l["concurrency"].as_u64() == Some(r[0] as u64))
            .unwrap();
        assert!(
            (r[9] - 1000.0 * f(&l["latency_ms"]["p50"])).abs() <= 1.0,
            "{r:?}"
        );
        assert!((r[15] - 1000.0 * f(&l["client_ms"]["response_wait"])).abs() <= 1.0);
    }

    // SVG: p50 and p99 lines through the 8 levels.
    let chart = read(&svg);
    assert!(chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(chart.trim_end().ends_with("</svg>"));
    assert_eq!(chart.matches("<polyline").count(), 2);
    assert_eq!(chart.matches("<circle").count(), 16);
    for line in chart.lines().filter(|l| l.starts_with("<polyline")) {
        let points = line.split("points=\"").nth(1).unwrap();
        assert_eq!(points.split(' ').count(), 8, "{line}");
    }
}

#[test]
fn tiny_bert_breakdown_accounts_for_the_client_latency() {
    // Few, small requests: tiny-bert is slow. At concurrency 2 the server may run two
    // requests as one batched execution; each request still waits for all of it.
    let o = perf(
        "tiny-bert",
        &[
            "--concurrency-range",
            "1:2",
            "--batch-size",
            "2",
            "--measurement-request-count",
            "4",
            "--stability-percentage",
            "50",
            "--max-trials",
            "3",
            "--json",
            "--quiet",
        ],
    );
    let v = json_of(&o);
    assert_schema("perf", &v);
    assert_eq!(v["padding"], "fixed 384");
    for l in v["levels"].as_array().unwrap() {
        let c = l["concurrency"].as_u64().unwrap();
        let avg = f(&l["latency_ms"]["avg"]);
        let client = &l["client_ms"];
        let server = &l["server_ms"];
        let queue_and_compute: f64 = ["queue", "compute_input", "compute_infer", "compute_output"]
            .iter()
            .map(|k| f(&server[k]))
            .sum();
        let accounted =
            f(&client["send"]) + f(&client["network"]) + queue_and_compute + f(&client["recv"]);
        // Generous: the parts come from two clocks and two sources (client records,
        // server statistics) over nearly the same requests.
        let tolerance = (0.15 * avg).max(5.0);
        assert!(
            (accounted - avg).abs() <= tolerance,
            "concurrency {c}: parts {accounted} ms against the average latency {avg} ms\n{l:#}"
        );
        // The model's compute is the bulk of it, and it is not hidden in the network
        // part: the server's request time is within the client's response wait.
        assert!(f(&server["compute_infer"]) >= 0.3 * avg, "{l:#}");
        assert!(f(&client["network"]) >= -tolerance, "{l:#}");
        assert!(
            f(&client["send"]) > 0.0 && f(&client["recv"]) > 0.0,
            "{l:#}"
        );
        // Both sides counted (nearly) the same requests; 2 inferences each.
        let requests = l["requests"].as_i64().unwrap();
        let seen = l["server"]["requests"].as_i64().unwrap();
        assert!(
            (requests - seen).abs() <= 2 * c as i64 + 1,
            "{requests} vs {seen}\n{l:#}"
        );
        let inferences = l["server"]["inferences"].as_i64().unwrap();
        assert!((inferences - 2 * seen).abs() <= 2 * 2 * c as i64, "{l:#}");
        assert!(l["server"]["executions"].as_i64().unwrap() <= seen);
    }
}

#[test]
fn request_rate_sweep_sends_at_the_requested_rates() {
    let _null = null_model();
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("rate.csv");
    let o = perf(
        "null",
        &[
            "--request-rate-range",
            "20:40:20",
            "--batch-size",
            "2",
            "--measurement-request-count",
            "10",
            "--stability-percentage",
            "50",
            "--max-trials",
            "3",
            "--json",
            "--quiet",
            "--csv",
            csv.to_str().unwrap(),
        ],
    );
    let v = json_of(&o);
    assert_schema("perf", &v);
    assert_eq!(v["mode"], "request_rate");
    assert_eq!(v["request_distribution"], "constant");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, rate) in levels.iter().zip([20.0, 40.0]) {
        assert_eq!(f(&l["request_rate_per_s"]), rate);
        assert_eq!(l["concurrency"], Value::Null);
        // Open loop: bertqa sent at the rate (generous bounds on a shared machine).
        let sent = f(&l["sent_per_s"]);
        assert!(sent > 0.5 * rate && sent < 1.5 * rate, "{l:#}");
    }
    assert!(read(&csv).starts_with("Request Rate,Inferences/Second,"));

    // Poisson arrivals are seeded; the seed is reported.
    let o = perf(
        "null",
        &[
            "--request-rate-range",
            "30",
            "--request-distribution",
            "poisson",
            "--seed",
            "7",
            "--measurement-request-count",
            "10",
            "--max-trials",
            "3",
            "--json",
            "--quiet",
        ],
    );
    let v = json_of(&o);
    assert_schema("perf", &v);
    assert_eq!(v["request_distribution"], "poisson");
    assert_eq!(v["seed"], 7);
    assert_eq!(v["levels"].as_array().unwrap().len(), 1);

    // A rate bertqa cannot keep (one request in flight at most) is said so, on stderr
    // and in the JSON.
    let o = perf(
        "null",
        &[
            "--request-rate-range",
            "100000",
            "--max-inflight",
            "1",
            "--measurement-request-count",
            "10",
            "--max-trials",
            "3",
            "--json",
            "--quiet",
        ],
    );
    let v = json_of(&o);
    assert_schema("perf", &v);
    let l = &v["levels"][0];
    assert!(f(&l["sent_per_s"]) < 95_000.0, "{l:#}");
    let warning = l["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| {
            w.as_str()
                .unwrap()
                .contains("the client could not keep the rate")
        })
        .unwrap_or_else(|| panic!("{l:#}"));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!("warning: {}", warning.as_str().unwrap())),
        "{stderr}"
    );
}

#[test]
fn bad_ranges_and_settings_are_usage_errors() {
    // Checked before the data is read or a server is contacted.
    let cases: [(&[&str], &str); 6] = [
        (
            &["--concurrency-range", "8:1"],
            "--concurrency-range 8:1: end 1 is below start 8",
        ),
        (&["--concurrency-range", "0:4"], "0 must be above 0"),
        (&["--concurrency-range", "1.5"], "must be a whole number"),
        (
            &["--request-rate-range", "fast"],
            "--request-rate-range fast: \"fast\" is not a number",
        ),
        (&["--max-trials", "2"], "--max-trials 2 is below 3"),
        (
            &["--measurement-request-count", "0"],
            "--measurement-request-count must be at least 1",
        ),
    ];
    for (extra, message) in cases {
        let mut args = vec![
            "perf",
            "--model",
            "null",
            "--data",
            "no-such-file.json",
            "--url",
            "127.0.0.1:9",
        ];
        args.extend_from_slice(extra);
        let o = bertqa(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}\n{}", show(&o));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(message),
            "{stderr}"
        );
        assert!(o.stdout.is_empty());
    }
    // Both load modes at once: clap's usage error, exit 2.
    let o = bertqa(&[
        "perf",
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--concurrency-range",
        "1:2",
        "--request-rate-range",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
}

/// `--export-input-data` writes what perf_analyzer's `--input-data` reads, and its
/// tensors are the features bertqa builds, value for value; no load is sent.
#[test]
fn export_input_data_is_perf_analyzers_format_and_decodes_to_the_features() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("input-data.json");
    let o = perf(
        "tiny-bert",
        &[
            "--limit",
            "3",
            "--batch-size",
            "2",
            "--export-input-data",
            file.to_str().unwrap(),
        ],
    );
    crate::common::ok(&o);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("replay: perf_analyzer -m tiny-bert -b 2 --input-data"),
        "{said}"
    );
    let doc = read_json(&file);
    let schema = read_json(root().join("tests/fixtures/perf_analyzer_input_data.schema.json"));
    let validator = jsonschema::validator_for(&schema).expect("valid schema");
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // The check can fail: a tensor with a shape but no content is not the format.
    let broken = serde_json::json!({"data": [{"input__0": {"shape": [384]}}]});
    assert!(!validator.is_valid(&broken));

    let features = bertqa(&["features", "--data", SAMPLE, "--limit", "3"]);
    crate::common::ok(&features);
    let features: Vec<Value> = String::from_utf8_lossy(&features.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let data = doc["data"].as_array().unwrap();
    // Full batches of 2, the last filled from the first features, as perf sends them.
    assert_eq!(data.len(), features.len().div_ceil(2) * 2);
    for (i, entry) in data.iter().enumerate() {
        let f = &features[i % features.len()];
        for (input, key) in [
            ("input__0", "input_ids"),
            ("input__1", "segment_ids"),
            ("input__2", "input_mask"),
        ] {
            assert_eq!(entry[input]["shape"], serde_json::json!([384]), "{i}");
            assert_eq!(entry[input]["content"], f[key], "entry {i}, {input}");
        }
    }
}

/// Two `--url`s: requests go to both servers in turn (the requests log names each
/// request's), the report names both, and the servers' statistics are summed.
#[test]
fn two_urls_spread_the_load_over_both_servers_and_sum_their_statistics() {
    let _null = null_model();
    let (a, b) = (&perf_server().url, &crate::common::server().url);
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("requests.jsonl");
    let log_arg = log.display().to_string();
    let mut args = vec![
        "perf",
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--url",
        a,
        "--url",
        b,
        "--no-metrics",
        "--json",
        "--requests-jsonl",
        &log_arg,
    ];
    args.extend_from_slice(&crate::common::SHORT_LEVEL);
    let o = bertqa(&args);
    assert!(o.status.success(), "{}", show(&o));
    let v = json_of(&o);
    assert_eq!(v["model"]["url"], format!("{a},{b}"));
    let lines = read(&log);
    let to = |url: &str| {
        lines
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).unwrap()["endpoint"] == url)
            .count()
    };
    let (to_a, to_b) = (to(a), to(b));
    assert!(
        to_a > 0 && to_b > 0,
        "requests to {a}: {to_a}, to {b}: {to_b}"
    );
    assert!(to_a.abs_diff(to_b) <= 1, "in turn: {to_a} and {to_b}");
    // Each server saw its half: the sum is the client's count (or more, where another
    // test sent to the shared server's `null` meanwhile).
    let level = &v["levels"][0];
    let (client, server) = (f(&level["requests"]), f(&level["server"]["requests"]));
    assert!(
        server >= client,
        "server {server} < client {client}: {level}"
    );
}
