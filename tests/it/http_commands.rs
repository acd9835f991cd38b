//! More of `--protocol http` against real tritonservers: the reports name the protocol,
//! Triton's restricted HTTP API (an inference key in a plain header), TLS and mutual
//! TLS through a TLS-terminating proxy (tls_proxy.rs), a server killed and restarted
//! mid-run, and `compare` and `perf` (with the server breakdown from the HTTP
//! statistics endpoint).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::tls_proxy;
use crate::common::{bertqa, root, server, show, start_server, Server};

const SAMPLE: &str = "data/sample-squad-v2.json";

/// The shared server's HTTP address, `127.0.0.1:PORT`.
fn http_url() -> String {
    format!("127.0.0.1:{}", server().http_port)
}

fn json_of(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", show(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", show(o)))
}

/// Checks `v` against `schema/NAME.schema.json`.
fn assert_schema(name: &str, v: &Value) {
    let path = root().join(format!("schema/{name}.schema.json"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("valid schema");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{v:#}");
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_same_outputs(a: &Path, b: &Path) {
    for f in [
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
    ] {
        assert!(
            read(a.join(f)) == read(b.join(f)),
            "{f} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

/// `bertqa eval` of `model` on the sample into `out`, `--json`, with `extra` flags.
fn eval_args(model: &str, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "eval",
        "--data",
        SAMPLE,
        "--model",
        model,
        "--output-dir",
        out.to_str().unwrap(),
        "--quiet",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn run(args: &[String]) -> Output {
    bertqa(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

const CONTEXT: &str = "The lighthouse at Varne Point was built in 1874 by the engineer Miriam \
                       Holt, who designed its tower of granite blocks.";

/// `bertqa ask --json` on the oracle (its question comes from the sample).
fn ask(extra: &[&str]) -> Output {
    let mut args = vec![
        "ask",
        "--model",
        "oracle",
        "--json",
        "--question",
        "Who designed the lighthouse at Varne Point?",
        "--context",
        CONTEXT,
    ];
    args.extend_from_slice(extra);
    bertqa(&args)
}

fn assert_answered(o: &Output) -> Value {
    let v = json_of(o);
    assert_eq!(v["answers"][0]["answer"], "Miriam Holt", "{}", show(o));
    v
}

/// Exit 2 with one `error:` line on stderr holding every piece of `want`.
fn assert_fails_with(o: &Output, want: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "{}", show(o));
    assert!(o.stdout.is_empty(), "{}", show(o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("error: "), "{}", show(o));
    for w in want {
        assert!(err.contains(w), "missing {w:?}\n{}", show(o));
    }
}

#[test]
fn reports_say_which_protocol_was_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n);
    let grpc = json_of(&run(&eval_args(
        "oracle",
        &dir("grpc"),
        &["--url", &server().url],
    )));
    let http = json_of(&run(&eval_args(
        "oracle",
        &dir("http"),
        &["--protocol", "http", "--url", &http_url()],
    )));
    for (v, protocol) in [(&grpc, "grpc"), (&http, "http")] {
        assert_schema("eval", v);
        assert_eq!(v["model"]["protocol"], protocol, "{}", v["model"]);
        assert_eq!(v["metrics"]["exact"], 100.0);
    }
    let metrics: Value = serde_json::from_slice(&read(dir("http").join("metrics.json"))).unwrap();
    assert_eq!(metrics["model"]["protocol"], "http");
    assert_same_outputs(&dir("grpc"), &dir("http"));

    // The text report says it on the model line.
    let mut args = eval_args(
        "oracle",
        &dir("text"),
        &["--protocol", "http", "--url", &http_url()],
    );
    args.retain(|a| a != "--json");
    args.push("-v".into());
    let o = run(&args);
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
    let v = assert_answered(&ask(&["--protocol", "http", "--url", &http_url()]));
    assert_eq!(v["protocol"], "http");
    let v = assert_answered(&ask(&["--url", &server().url]));
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
        start_server(
            &root().join("models/repo"),
            &[
                "--http-address=127.0.0.1".into(),
                "--grpc-address=127.0.0.1".into(),
                "--model-control-mode=explicit".into(),
                "--load-model=oracle".into(),
                "--load-model=null".into(),
                format!("--http-restricted-api=inference:infer-key={KEY}"),
            ],
        )
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
    let o = ask(&server);
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);
    let o = run(&eval_args("oracle", &tmp.path().join("none"), &server));
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);

    // A wrong key, even with -v: denied, the header named, the value not shown.
    let wrong = format!("infer-key:{WRONG}");
    let mut extra = server.to_vec();
    extra.extend(["-v", "--header", &wrong]);
    let o = ask(&extra);
    assert_fails_with(&o, &["infer-key"]);
    no_secret(&o);

    // The right key: answered, and a whole evaluation (with -v) holds it nowhere.
    let right = format!("infer-key:{KEY}");
    let mut extra = server.to_vec();
    extra.extend(["--header", &right]);
    let o = ask(&extra);
    let v = assert_answered(&o);
    assert_eq!(v["protocol"], "http");
    no_secret(&o);
    let out = tmp.path().join("eval");
    let mut args = vec!["-v".to_string()];
    args.extend(eval_args("oracle", &out, &extra));
    args.push("--save-logits".into());
    let o = run(&args);
    let v = json_of(&o);
    no_secret(&o);
    assert_eq!(v["metrics"]["exact"], 100.0);
    let mut files = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let bytes = read(path.clone());
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

#[test]
fn perf_over_http_breaks_the_latency_down_from_the_http_statistics() {
    let url = format!("127.0.0.1:{}", restricted_server().http_port);
    let header = format!("infer-key:{KEY}");
    let o = bertqa(&[
        "perf",
        "--protocol",
        "http",
        "--url",
        &url,
        "--header",
        &header,
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--concurrency-range",
        "1:2",
        "--measurement-request-count",
        "50",
        "--stability-percentage",
        "50",
        "--max-trials",
        "4",
        "--json",
        "--quiet",
    ]);
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
    let o = bertqa(&[
        "perf",
        "--protocol",
        "http",
        "--url",
        &url,
        "--header",
        &header,
        "--model",
        "null",
        "--data",
        SAMPLE,
        "--concurrency-range",
        "1",
        "--measurement-request-count",
        "20",
        "--max-trials",
        "3",
        "--stability-percentage",
        "90",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with(&format!("model        null at {url} over HTTP (")),
        "{text}"
    );
}

#[test]
fn a_server_killed_mid_run_over_http_and_restarted_gives_identical_outputs() {
    let v = crate::reliability::killed_and_restarted_mid_run("http");
    assert_eq!(v["model"]["protocol"], "http");
}

/// `GET /v2/health/ready` through a proxy with rustls directly (client certificate
/// when `client_cert`): the HTTP status line, or the error.
fn ready_through(port: u16, client_cert: bool) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::{self, pki_types::pem::PemObject, pki_types::CertificateDer};
    let pki = tls_proxy::pki();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if client_cert {
        let certs = CertificateDer::pem_file_iter(pki.path("client.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(pki.path("client.key")).unwrap();
        builder.with_client_auth_cert(certs, key).unwrap()
    } else {
        builder.with_no_client_auth()
    };
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    crate::common::rt().block_on(async move {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let mut tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        tls.write_all(
            b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        tls.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&buf);
        Ok(text.lines().next().unwrap_or("").to_string())
    })
}

#[test]
fn the_tls_proxy_forwards_to_triton_and_checks_client_certificates() {
    let plain = tls_proxy::start(server().http_port, false);
    assert_eq!(ready_through(plain.port, false).unwrap(), "HTTP/1.1 200 OK");
    let mutual = tls_proxy::start(server().http_port, true);
    assert_eq!(ready_through(mutual.port, true).unwrap(), "HTTP/1.1 200 OK");
    assert!(
        !ready_through(mutual.port, false).is_ok_and(|s| s.starts_with("HTTP/1.1 200")),
        "a client without a certificate got through"
    );
}

/// One proxy of each kind in front of the shared server's HTTP port.
fn proxies() -> &'static (tls_proxy::TlsProxy, tls_proxy::TlsProxy) {
    static PROXIES: OnceLock<(tls_proxy::TlsProxy, tls_proxy::TlsProxy)> = OnceLock::new();
    PROXIES.get_or_init(|| {
        (
            tls_proxy::start(server().http_port, false),
            tls_proxy::start(server().http_port, true),
        )
    })
}

#[test]
fn https_through_a_tls_proxy_gives_the_answers_of_plain_http() {
    let pki = tls_proxy::pki();
    let url = proxies().0.url();
    let ca = pki.path("ca.pem");
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    json_of(&run(&eval_args(
        "oracle",
        &plain,
        &["--protocol", "http", "--url", &http_url()],
    )));
    let tls = tmp.path().join("tls");
    let v = json_of(&run(&eval_args(
        "oracle",
        &tls,
        &["--protocol", "http", "--url", &url, "--ssl-root-cert", &ca],
    )));
    assert_eq!(v["model"]["protocol"], "http");
    assert_eq!(v["metrics"]["exact"], 100.0);
    assert_same_outputs(&plain, &tls);
    assert_answered(&ask(&[
        "--protocol",
        "http",
        "--url",
        &url,
        "--ssl-root-cert",
        &ca,
    ]));
    // Without the proxy's CA the server is not trusted: a sentence, exit 2.
    let o = ask(&["--protocol", "http", "--url", &url]);
    assert_fails_with(&o, &["127.0.0.1"]);
}

#[test]
fn mutual_tls_through_a_tls_proxy_needs_the_client_certificate() {
    let pki = tls_proxy::pki();
    let url = proxies().1.url();
    let ca = pki.path("ca.pem");
    let o = ask(&["--protocol", "http", "--url", &url, "--ssl-root-cert", &ca]);
    assert_fails_with(&o, &["the server requires a client certificate"]);
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let v = assert_answered(&ask(&[
        "--protocol",
        "http",
        "--url",
        &url,
        "--ssl-root-cert",
        &ca,
        "--ssl-client-cert",
        &cert,
        "--ssl-client-key",
        &key,
    ]));
    assert_eq!(v["protocol"], "http");
}
