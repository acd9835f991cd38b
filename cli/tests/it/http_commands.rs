//! `eval`, `ask`, `compare` and `perf` over `--protocol http` against real tritonservers:
//! the reports name the protocol, `compare` and `perf` give what they give over gRPC
//! (`perf` with the server breakdown from the HTTP statistics endpoint), and Triton's
//! restricted HTTP API (an inference key in a plain header) is passed and never shown.

use std::path::Path;
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::{
    ask_oracle, assert_answered, assert_fails_with, assert_same_outputs, assert_schema, bertqa,
    http_url, json_of, read_bytes, read_json, root, sample_eval, server, show, start_server_with,
    Server, SAMPLE,
};

#[test]
fn reports_say_which_protocol_was_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    let grpc = json_of(&bertqa(&sample_eval(
        "oracle",
        &dir("grpc"),
        &["--url", &server().url],
    )));
    let http = json_of(&bertqa(&sample_eval(
        "oracle",
        &dir("http"),
        &["--protocol", "http", "--url", &http_url()],
    )));
    for (v, protocol) in [(&grpc, "grpc"), (&http, "http")] {
        assert_schema("eval", v);
        assert_eq!(v["model"]["protocol"], protocol, "{}", v["model"]);
        assert_eq!(v["metrics"]["exact"], 100.0);
    }
    let metrics: Value = read_json(dir("http").join("metrics.json"));
    assert_eq!(metrics["model"]["protocol"], "http");
    assert_same_outputs(&dir("grpc"), &dir("http"));

    // The text report says it on the model line.
    let mut args = sample_eval(
        "oracle",
        &dir("text"),
        &["--protocol", "http", "--url", &http_url()],
    );
    args.retain(|a| a != "--json");
    args.push("-v".into());
    let o = bertqa(&args);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with(&format!(
            "model        oracle at {} over HTTP (",
            http_url()
        )),
        "{text}"
    );
    assert!(
        text.contains("requests     one POST to the model's /infer each"),
        "{text}"
    );

    // ask names it beside the URL.
    let v = assert_answered(&ask_oracle(&["--protocol", "http", "--url", &http_url()]));
    assert_eq!(v["protocol"], "http");
    let v = assert_answered(&ask_oracle(&["--url", &server().url]));
    assert_eq!(v["protocol"], "grpc");
}

#[test]
fn compare_over_http_reports_what_grpc_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let data = root().join("tests/fixtures/squad/v2-long.json");
    let compare = |protocol: &str, url: &str, out: &Path, json: bool| {
        let mut args = vec![
            "compare",
            "--protocol",
            protocol,
            "--models",
            "tiny-bert,tiny-bert-hf,tiny-bert",
            "--data",
            data.to_str().unwrap(),
            "--url",
            url,
            "--output-dir",
            out.to_str().unwrap(),
            "--min-agreement",
            "1",
        ];
        if json {
            args.push("--json");
        }
        bertqa(&args)
    };
    let over_grpc = json_of(&compare("grpc", &server().url, &tmp.path().join("g"), true));
    let over_http = json_of(&compare("http", &http_url(), &tmp.path().join("h"), true));
    assert_schema("compare", &over_http);
    for m in over_http["models"].as_array().unwrap() {
        assert_eq!(m["protocol"], "http", "{m}");
    }
    assert_eq!(over_grpc["models"][0]["protocol"], "grpc");
    // The same answers and logits whichever protocol carried them.
    assert_eq!(over_http["comparisons"], over_grpc["comparisons"]);
    for i in 0..3 {
        assert_eq!(
            over_http["models"][i]["metrics"],
            over_grpc["models"][i]["metrics"]
        );
    }
    for (m, dir) in [("tiny-bert", "tiny-bert"), ("tiny-bert-hf", "tiny-bert-hf")] {
        assert_same_outputs(
            &tmp.path().join("g").join(dir),
            &tmp.path().join("h").join(m),
        );
    }
    let o = compare("http", &http_url(), &tmp.path().join("t"), false);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.ends_with("(models run one after another over HTTP)")),
        "{text}"
    );
}

const KEY: &str = "s3cr3t-Hq72-never-shown";
const WRONG: &str = "wr0ng-Pz19-never-shown";

/// A server of its own whose HTTP inference needs `infer-key: KEY`, with `oracle` and
/// `null` loaded (`null` for perf, whose statistics no other test may touch).
fn restricted_server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let flags = [
            "--http-address=127.0.0.1".into(),
            "--grpc-address=127.0.0.1".into(),
            format!("--http-restricted-api=inference:infer-key={KEY}"),
        ];
        start_server_with(&["oracle", "null"], &flags, None)
    })
}

fn no_secret(o: &Output) {
    let all = show(o);
    assert!(
        !all.contains(KEY) && !all.contains(WRONG),
        "a key was printed:\n{all}"
    );
}

#[test]
fn the_restricted_http_api_needs_the_header_and_never_shows_it() {
    let url = format!("127.0.0.1:{}", restricted_server().http_port);
    let server = ["--protocol", "http", "--url", url.as_str()];
    let tmp = tempfile::tempdir().unwrap();

    // No key: exit 2 naming the header.
    let o = ask_oracle(&server);
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);
    let o = bertqa(&sample_eval("oracle", &tmp.path().join("none"), &server));
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);

    // A wrong key, even with -v: denied, the header named, the value not shown.
    let wrong = format!("infer-key:{WRONG}");
    let mut extra = server.to_vec();
    extra.extend(["-v", "--header", &wrong]);
    let o = ask_oracle(&extra);
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);

    // The right key: answered, and a whole evaluation (with -v) holds it nowhere.
    let right = format!("infer-key:{KEY}");
    let mut extra = server.to_vec();
    extra.extend(["--header", &right]);
    let o = ask_oracle(&extra);
    let v = assert_answered(&o);
    assert_eq!(v["protocol"], "http");
    no_secret(&o);
    let out = tmp.path().join("eval");
    let mut args = vec!["-v".to_string()];
    args.extend(sample_eval("oracle", &out, &extra));
    args.push("--save-logits".into());
    let o = bertqa(&args);
    let v = json_of(&o);
    no_secret(&o);
    assert_eq!(v["metrics"]["exact"], 100.0);
    let mut files = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let bytes = read_bytes(&path);
        for secret in [KEY, WRONG] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the key",
                path.display()
            );
        }
        files += 1;
    }
    assert!(files >= 5, "{files} files in {}", out.display());
}

/// `bertqa perf --quiet` over HTTP on `null` with the key, plus `extra`.
fn perf_over_http(url: &str, extra: &[&str]) -> Output {
    let header = format!("infer-key:{KEY}");
    let mut args = vec![
        "perf",
        "--protocol",
        "http",
        "--url",
        url,
        "--header",
        &header,
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

#[test]
fn perf_over_http_breaks_the_latency_down_from_the_http_statistics() {
    let url = format!("127.0.0.1:{}", restricted_server().http_port);
    let o = perf_over_http(
        &url,
        &[
            "--concurrency-range",
            "1:2",
            "--measurement-request-count",
            "50",
            "--stability-percentage",
            "50",
            "--max-trials",
            "4",
            "--json",
        ],
    );
    no_secret(&o);
    let v = json_of(&o);
    assert_schema("perf", &v);
    assert_eq!(v["model"]["protocol"], "http");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{v:#}");
    for l in levels {
        let c = l["concurrency"].as_i64().unwrap();
        let requests = l["requests"].as_i64().unwrap();
        let seen = l["server"]["requests"].as_i64().unwrap();
        // The server's own count (GET /v2/models/null/stats) of nearly the same requests.
        assert!(
            requests > 0 && (requests - seen).abs() <= 2 * c + 1,
            "{requests} vs {seen}\n{l:#}"
        );
        assert!(l["server_ms"]["request"].as_f64().unwrap() > 0.0, "{l:#}");
        assert!(l["throughput"]["features_per_s"].as_f64().unwrap() > 0.0);
    }
    // The text report names the protocol.
    let o = perf_over_http(
        &url,
        &[
            "--concurrency-range",
            "1",
            "--measurement-request-count",
            "20",
            "--max-trials",
            "3",
            "--stability-percentage",
            "90",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with(&format!("model        null at {url} over HTTP (")),
        "{text}"
    );
}
