//! `perf`'s latency budget, goodput and per-request lines on models whose latency is
//! known in advance: `null-paced-20ms` finishes one execution per 20 ms, so N requests
//! in flight wait N × 20 ms each; `null-paced-every-4th-slow` takes 80 ms every 4th
//! execution, so at one request in flight 3 in 4 requests take 20 ms and 1 in 4 take
//! 80 ms. Budgets sit half a step between the known latencies, so no timing race
//! decides a test. The searches judge the median: on a machine shared with other
//! tests a stall of the server's process can lengthen a few requests of a level (its
//! tail), never half of them.
//!
//! The tests run against a server of their own, one at a time: a test's load would
//! change another's latency.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{
    assert_schema, bertqa, json_of, ok, show, spawn_bertqa, start_server_with, Server, SAMPLE,
};

const PACED: &str = "null-paced-20ms";
const SLOW_4TH: &str = "null-paced-every-4th-slow";

fn paced_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| start_server_with(&[PACED, SLOW_4TH], &[], None))
}

fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn args<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "perf",
        "--model",
        model,
        "--data",
        SAMPLE,
        "--url",
        &paced_server().url,
        "-q",
    ];
    a.extend_from_slice(extra);
    a
}

/// Windows of 400 ms, at most 5 per level unless `extra` says otherwise.
fn perf_json(model: &str, extra: &[&str]) -> Value {
    let mut all = vec!["--json", "--measurement-interval-ms", "400"];
    if !extra.contains(&"--max-trials") {
        all.extend(["--max-trials", "5"]);
    }
    all.extend_from_slice(extra);
    let v = json_of(&bertqa(&args(model, &all)));
    assert_schema("perf", &v);
    v
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The latency at quantile `q` of sorted `xs`, as a histogram reports it: the
/// smallest value with at least `q` of the values at or below it.
fn quantile(xs: &[f64], q: f64) -> f64 {
    let i = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len());
    xs[i - 1]
}

/// Each level's reported requests are the lines of its last 3 windows: same count,
/// same percentiles.
fn lines_agree_with_the_report(report: &Value, lines: &[Value]) {
    let mut by_level: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for l in lines {
        assert_eq!(l["outcome"], "ok", "{l}");
        assert_eq!(l["retries"], 0);
        assert!(l["code"].is_null());
        assert_eq!(l["endpoint"], paced_server().url.as_str());
        assert!(f(&l["send_unix_s"]) > 1.7e9, "{l}");
        let parts = f(&l["send_ms"]) + f(&l["wait_ms"]) + f(&l["recv_ms"]);
        assert!((parts - f(&l["latency_ms"])).abs() < 1e-3, "{l}");
        assert_eq!(
            l["features"].as_array().unwrap().len() as u64,
            l["batch_size"].as_u64().unwrap()
        );
        by_level.entry(l["level"].to_string()).or_default().push(l);
    }
    for level in report["levels"].as_array().unwrap() {
        let key = match level["concurrency"].as_u64() {
            Some(n) => format!("{{\"concurrency\":{n}}}"),
            None => format!(
                "{{\"request_rate_per_s\":{}}}",
                serde_json::to_string(&level["request_rate_per_s"]).unwrap()
            ),
        };
        let trials = level["trials"].as_u64().unwrap();
        let mut reported: Vec<f64> = by_level[&key]
            .iter()
            .filter(|l| {
                let w = l["window"].as_u64().unwrap();
                w + 2 >= trials && w <= trials
            })
            .map(|l| f(&l["latency_ms"]))
            .collect();
        reported.sort_by(f64::total_cmp);
        assert_eq!(
            reported.len() as u64,
            level["requests"].as_u64().unwrap(),
            "{key}"
        );
        for (p, q) in [("p50", 0.5), ("p99", 0.99)] {
            let (mine, theirs) = (quantile(&reported, q), f(&level["latency_ms"][p]));
            // The report's histogram keeps 3 significant digits.
            assert!(
                (mine - theirs).abs() <= theirs * 0.002 + 0.002,
                "{key} {p}: lines {mine} vs report {theirs}"
            );
        }
    }
}

#[test]
fn binary_search_finds_the_largest_concurrency_within_budget() {
    let _turn = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let lines = tmp.path().join("requests.jsonl");
    // 5 in flight wait 100 ms, 6 wait 120 ms.
    let v = perf_json(
        PACED,
        &[
            "--concurrency-range",
            "1:16",
            "--latency-threshold",
            "110",
            "--percentile",
            "50",
            "--binary-search",
            "--requests-jsonl",
            lines.to_str().unwrap(),
        ],
    );
    assert_eq!(v["latency_budget"]["search"], "binary");
    assert_eq!(v["latency_budget"]["percentile"], 50.0);
    assert_eq!(v["within_budget"]["concurrency"], 5, "{v:#}");
    assert!(f(&v["within_budget"]["latency_ms"]) <= 110.0);
    let measured: Vec<u64> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["concurrency"].as_u64().unwrap())
        .collect();
    // ⌈log2(16)⌉ + 2 = 6 at most; the search needs 5 and 6 to know the answer.
    assert!(measured.len() <= 6, "{measured:?}");
    assert_eq!(&measured[..2], &[1, 16]);
    assert!(
        measured.contains(&5) && measured.contains(&6),
        "{measured:?}"
    );
    for l in v["levels"].as_array().unwrap() {
        let n = l["concurrency"].as_u64().unwrap();
        assert_eq!(l["budget"]["within"], n <= 5, "concurrency {n}: {l}");
    }
    lines_agree_with_the_report(&v, &read_lines(&lines));
}

#[test]
fn a_sweep_stops_after_the_first_level_over_budget_and_counts_goodput() {
    let _turn = one_at_a_time();
    let o = bertqa(&args(
        PACED,
        &[
            "--concurrency-range",
            "4:8",
            "--latency-threshold",
            "110",
            "--percentile",
            "50",
            "--measurement-interval-ms",
            "400",
            "--max-trials",
            "5",
        ],
    ));
    ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("budget       p50 ≤ 110 ms: levels in order, up to the first over budget"),
        "{text}"
    );
    assert!(
        text.contains("within budget (p50 ≤ 110 ms): concurrency 5, p50 "),
        "{text}"
    );
    assert!(text.contains("(3 levels measured)"), "{text}");
    assert!(!text.contains("concurrency 7"), "{text}");
    // At 4 and 5 in flight every request takes 80 or 100 ms (but for a stall); at 6,
    // 120 ms once the first requests of the level are through.
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("concurrency    infer/s"))
        .skip(1)
        .take(3)
        .collect();
    let share = |row: &str| -> f64 {
        let pct = row.split_whitespace().last().unwrap();
        pct.trim_end_matches('%').parse().unwrap()
    };
    for row in &rows[..2] {
        assert!(row.contains("within"), "{rows:?}");
        assert!(share(row) >= 90.0, "{rows:?}");
    }
    assert!(rows[2].contains("OVER"), "{rows:?}");
    assert!(share(rows[2]) < 50.0, "{rows:?}");
}

#[test]
fn the_percentile_decides_and_goodput_is_the_share_within_the_threshold() {
    let _turn = one_at_a_time();
    // One in flight: 3 in 4 requests take 20 ms, 1 in 4 takes 80 ms.
    let at = |p: &str| {
        perf_json(
            SLOW_4TH,
            &[
                "--concurrency",
                "1",
                "--latency-threshold",
                "50",
                "--percentile",
                p,
            ],
        )
    };
    let p50 = at("50");
    let level = &p50["levels"][0];
    assert_eq!(level["budget"]["within"], true, "{level:#}");
    assert_eq!(p50["within_budget"]["concurrency"], 1);
    let share = f(&level["goodput"]["share"]);
    // Windows cut the cycle of 4 anywhere (a window of k requests holds k/4 ± 1 slow
    // ones), and a stall may push a fast request over.
    let n = f(&level["requests"]);
    assert!((share - 0.75).abs() <= 3.0 / n + 0.05, "{share} of {n}");
    let per_s = f(&level["goodput"]["per_s"]);
    let expected = share * f(&level["throughput"]["requests_per_s"]);
    assert!(
        (per_s - expected).abs() < 1e-3 * expected.max(1.0),
        "{per_s} {expected}"
    );

    let p90 = at("90");
    assert_eq!(p90["levels"][0]["budget"]["within"], false);
    assert!(f(&p90["levels"][0]["budget"]["latency_ms"]) > 50.0);
    assert!(p90["within_budget"].is_null());
}

#[test]
fn request_rate_binary_search_finds_the_largest_rate_within_budget() {
    let _turn = one_at_a_time();
    // The model serves 50 requests/s: 45/s keeps 20 ms, 65/s queues without end.
    let v = perf_json(
        PACED,
        &[
            "--request-rate-range",
            "5:85:20",
            "--latency-threshold",
            "60",
            "--percentile",
            "50",
            "--binary-search",
            "--max-trials",
            "3",
        ],
    );
    assert_eq!(v["within_budget"]["request_rate_per_s"], 45.0, "{v:#}");
    let rates: Vec<f64> = v["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| f(&l["request_rate_per_s"]))
        .collect();
    // 5 values: at most 2 + ⌈log2(4)⌉ = 4 levels.
    assert_eq!(rates, vec![5.0, 85.0, 45.0, 65.0]);
}

#[test]
fn requests_jsonl_can_be_read_while_the_run_goes_on() {
    let _turn = one_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("live.jsonl");
    let mut child = spawn_bertqa(&args(
        PACED,
        &[
            "--concurrency",
            "1",
            "--measurement-interval-ms",
            "1000",
            "--stability-percentage",
            "0.001",
            "--max-trials",
            "5",
            "--requests-jsonl",
            path.to_str().unwrap(),
        ],
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let n = std::fs::read_to_string(&path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if n >= 10 {
            break n;
        }
        assert!(Instant::now() < deadline, "only {n} lines after 30 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    // Read before the run ended: 5 windows of 1 s at 50 requests/s are still to go.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before {seen} lines were read"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
    let lines = read_lines(&path);
    assert!(lines.len() > seen);
}
