//! Through ingresses and gateways (a real nginx in front of the shared Triton,
//! `common::nginx`): URL path prefixes (Seldon Core, API gateways), Host routing (KServe
//! behind Istio) and gRPC `:authority` routing give the files of a direct run byte for
//! byte; a wrong prefix, Host or authority exits 2 naming what was sent.

use std::path::Path;

use crate::common::nginx::{proxy, GRPC_AUTHORITY, HTTP_HOST, PREFIX_HOST};
use crate::common::{
    assert_fails_with, assert_same_outputs, bertqa, json_of, sample_eval, server, show,
};

/// `eval` of the oracle on the sample into `dir` with `extra`: its JSON report.
fn oracle_eval(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let v = json_of(&bertqa(&sample_eval("oracle", dir, extra)));
    assert_eq!(v["metrics"]["exact"], 100.0);
    v
}

#[test]
fn through_prefixes_host_routing_and_authority_the_files_are_a_direct_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    oracle_eval(&dir("direct"), &["--url", &server().url]);
    let p = proxy();
    let prefix = format!("http://{}/seldon/ns/bert", p.http);
    let prefix_slash = format!("{prefix}/");
    let both = format!("http://{}/seldon/prod/bert", p.http);
    let host_header = format!("Host:{HTTP_HOST}");
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("prefix", vec!["--protocol", "http", "--url", &prefix]),
        (
            "prefix-slash",
            vec!["--protocol", "http", "--url", &prefix_slash],
        ),
        (
            "host",
            vec![
                "--protocol",
                "http",
                "--url",
                &p.http,
                "--authority",
                HTTP_HOST,
            ],
        ),
        (
            "host-header",
            vec![
                "--protocol",
                "http",
                "--url",
                &p.http,
                "--header",
                &host_header,
            ],
        ),
        (
            "both",
            vec![
                "--protocol",
                "http",
                "--url",
                &both,
                "--authority",
                PREFIX_HOST,
            ],
        ),
        (
            "grpc-authority",
            vec!["--url", &p.grpc, "--authority", GRPC_AUTHORITY],
        ),
    ];
    for (name, extra) in runs {
        let v = oracle_eval(&dir(name), &extra);
        assert_eq!(v["questions"], 16, "{name}");
        assert_same_outputs(&dir("direct"), &dir(name));
    }
}

#[test]
fn a_wrong_prefix_host_or_authority_names_what_was_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let p = proxy();
    let eval = |extra: &[&str]| bertqa(&sample_eval("oracle", &tmp.path().join("x"), extra));
    let wrong_prefix = format!("http://{}/seldon/ns/wrong", p.http);
    assert_fails_with(
        &eval(&["--protocol", "http", "--url", &wrong_prefix]),
        &[
            &format!("no Open Inference Protocol (KServe v2) server at {wrong_prefix}: "),
            "answered Unimplemented (HTTP 404): 404 Not Found",
            "no route matched",
        ],
    );
    assert_fails_with(
        &eval(&[
            "--protocol",
            "http",
            "--url",
            &p.http,
            "--authority",
            "wrong.example.com",
        ]),
        &[
            &format!("server at {} (Host wrong.example.com): ", p.http),
            "(HTTP 404): 404 Not Found",
            "--authority",
        ],
    );
    assert_fails_with(
        &eval(&["--url", &p.grpc, "--authority", "wrong.example.com"]),
        &[
            &format!("server at {} (:authority wrong.example.com): ", p.grpc),
            "Unimplemented",
        ],
    );
}

#[test]
fn what_grpc_cannot_route_by_is_refused_in_a_sentence() {
    let tmp = tempfile::tempdir().unwrap();
    let eval = |extra: &[&str]| bertqa(&sample_eval("oracle", &tmp.path().join("x"), extra));
    let with_path = format!("http://{}/seldon/ns/bert", proxy().grpc);
    assert_fails_with(
        &eval(&["--url", &with_path]),
        &[
            "a gRPC server URL has no path",
            "--authority",
            "--protocol http",
        ],
    );
    assert_fails_with(
        &eval(&["--url", &server().url, "--header", "Host:bert.example.com"]),
        &["a Host header is HTTP's", "--authority"],
    );
}

#[test]
fn a_dead_upstream_is_retried_as_unavailable() {
    let tmp = tempfile::tempdir().unwrap();
    let dead = format!("http://{}/dead", proxy().http);
    let o = bertqa(&sample_eval(
        "oracle",
        &tmp.path().join("x"),
        &[
            "--protocol",
            "http",
            "--url",
            &dead,
            "--retries",
            "1",
            "--wait-ready",
            "0",
        ],
    ));
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("HTTP 502"), "{err}");
}

#[test]
fn compare_tells_two_deployments_behind_one_ingress_apart_by_authority() {
    let tmp = tempfile::tempdir().unwrap();
    let p = proxy();
    let behind = format!("oracle@{}?authority={GRPC_AUTHORITY}", p.grpc);
    let v = json_of(&bertqa(&[
        "compare",
        "--data",
        crate::common::SAMPLE,
        "--url",
        &server().url,
        "--models",
        "oracle",
        &behind,
        "--output-dir",
        tmp.path().to_str().unwrap(),
        "--min-agreement",
        "1.0",
        "--json",
        "--quiet",
    ]));
    assert_eq!(v["comparisons"][0]["agreement"], 1.0);
    assert_eq!(
        v["models"][1]["name"],
        format!("oracle@{}?authority={GRPC_AUTHORITY}", p.grpc)
    );
}
