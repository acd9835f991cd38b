//! TLS, mutual TLS and Triton's restricted protocol (an inference key in a header), on
//! real tritonservers started here with certificates generated here (rcgen): each
//! server loads only `oracle` and listens on loopback.

use std::path::Path;
use std::process::Output;
use std::sync::OnceLock;

use rcgen::ExtendedKeyUsagePurpose;

use crate::common::pki::{ca, leaf, leaf_with, Pki};
use crate::common::{
    ask_oracle, assert_answered, assert_fails_with, bertqa, root, show, start_server_with, Server,
};

/// `ca.pem`/`.key` (trusted), `other-ca.pem` (not the server's issuer), `server.pem`/`.key`
/// issued for `localhost` and `triton.test` only (not for 127.0.0.1, so that connecting
/// by address needs --ssl-target-name), `expired.pem`/`.key` (like `server`, but expired
/// in 2020), `client.pem`/`.key` for mutual TLS, `stranger.pem`/`.key` (a client
/// certificate of `other-ca`), and `client-v1.pem`/`.key`, an X.509 v1 client
/// certificate made the quick way with the `openssl` command (no extensions).
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let pki = Pki::new("bertqa-pki-");
        let dir = &pki.dir;
        let authority = ca("A");
        std::fs::write(dir.join("ca.pem"), authority.pem()).unwrap();
        std::fs::write(dir.join("ca.key"), authority.key().serialize_pem()).unwrap();
        let other = ca("B");
        std::fs::write(dir.join("other-ca.pem"), other.pem()).unwrap();
        leaf_with(
            &authority,
            &["localhost", "triton.test"],
            ExtendedKeyUsagePurpose::ServerAuth,
            dir,
            "expired",
            |p| {
                p.not_before = rcgen::date_time_ymd(2019, 1, 1);
                p.not_after = rcgen::date_time_ymd(2020, 1, 1);
            },
        );
        leaf(
            &other,
            &["bertqa-stranger"],
            ExtendedKeyUsagePurpose::ClientAuth,
            dir,
            "stranger",
        );
        openssl_v1_client(dir);
        leaf(
            &authority,
            &["localhost", "triton.test"],
            ExtendedKeyUsagePurpose::ServerAuth,
            dir,
            "server",
        );
        leaf(
            &authority,
            &["bertqa-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
            dir,
            "client",
        );
        pki
    })
}

/// `client-v1.pem`/`.key`: an RSA key and an X.509 v1 certificate for it, issued by
/// `ca.pem`/`ca.key` as a user would with the `openssl` command (`x509 -req` without
/// an extension file makes a v1 certificate).
fn openssl_v1_client(dir: &Path) {
    let run = |args: &[&str]| {
        let o = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl (the tests need the openssl command)");
        assert!(o.status.success(), "openssl {args:?}: {}", show(&o));
    };
    run(&["genrsa", "-out", "client-v1.key", "2048"]);
    run(&[
        "req",
        "-new",
        "-key",
        "client-v1.key",
        "-subj",
        "/CN=bertqa-client-v1",
        "-out",
        "client-v1.csr",
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "client-v1.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "30",
        "-out",
        "client-v1.pem",
    ]);
    let text = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in", "client-v1.pem"])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Version: 1 (0x0)"),
        "not a v1 certificate:\n{text}"
    );
}

/// A server with only `oracle` loaded, on loopback, with `extra` flags.
fn secure_server(extra: &[String]) -> Server {
    let mut args = vec![
        "--grpc-address=127.0.0.1".to_string(),
        "--http-address=127.0.0.1".to_string(),
    ];
    args.extend_from_slice(extra);
    start_server_with(&["oracle"], &args, None)
}

fn tls_flags(mutual: bool) -> Vec<String> {
    let p = pki();
    vec![
        "--grpc-use-ssl=true".into(),
        format!("--grpc-use-ssl-mutual={mutual}"),
        format!("--grpc-server-cert={}", p.path("server.pem")),
        format!("--grpc-server-key={}", p.path("server.key")),
        format!("--grpc-root-cert={}", p.path("ca.pem")),
    ]
}

/// [`ask_oracle`] of the server at `url`.
fn ask(url: &str, extra: &[&str]) -> Output {
    ask_oracle(&[&["--url", url][..], extra].concat())
}

/// No Debug dump of a library error, no link into rustls's manual: a sentence.
fn assert_a_sentence(o: &Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    for dump in [
        "Other(",
        "Error(",
        "DnsName(",
        "docs.rs",
        "close_notify",
        "Context",
    ] {
        assert!(!err.contains(dump), "{dump:?} in\n{}", show(o));
    }
}

fn port(server: &Server) -> &str {
    server.url.rsplit_once(':').unwrap().1
}

#[test]
fn tls_server_refuses_plain_text_and_checks_the_ca_and_the_name() {
    let p = pki();
    let server = secure_server(&tls_flags(false));
    let by_name = format!("localhost:{}", port(&server));
    let ca = p.path("ca.pem");

    // Plain HTTP/2 against a TLS port: a clear refusal that points at --ssl.
    let o = bertqa(&["models", "--url", &by_name]);
    assert_fails_with(&o, &["error: cannot reach Triton at", "--ssl"]);

    // The right CA: a whole evaluation over TLS.
    let out = tempfile::tempdir().unwrap();
    let data = root().join("data/sample-squad-v2.json");
    let o = bertqa(&[
        "eval",
        "--url",
        &by_name,
        "--ssl",
        "--ssl-root-cert",
        &ca,
        "--model",
        "oracle",
        "--data",
        data.to_str().unwrap(),
        "--output-dir",
        out.path().to_str().unwrap(),
        "--quiet",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["metrics"]["exact"], 100.0, "{}", show(&o));

    // https:// implies TLS.
    let o = bertqa(&[
        "models",
        "--url",
        &format!("https://{by_name}"),
        "--ssl-root-cert",
        &ca,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));

    // A CA that did not issue the server's certificate.
    let o = ask(
        &by_name,
        &["--ssl", "--ssl-root-cert", &p.path("other-ca.pem")],
    );
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            &format!(
                ": the server's certificate is not issued by a CA in --ssl-root-cert {}: \
                 pass the certificate of the CA that issued it as --ssl-root-cert",
                p.path("other-ca.pem")
            ),
        ],
    );
    assert_a_sentence(&o);

    // By address: the certificate names no IP, so the name check fails ...
    let o = ask(&server.url, &["--ssl-root-cert", &ca]);
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            ": the server's certificate is not issued for 127.0.0.1 (it names localhost, \
             triton.test): connect by one of those names, or pass the name to check as \
             --ssl-target-name NAME",
        ],
    );
    assert_a_sentence(&o);
    // ... unless the name to check is given.
    let o = ask(
        &server.url,
        &["--ssl-root-cert", &ca, "--ssl-target-name", "triton.test"],
    );
    assert_answered(&o);
}

#[test]
fn mutual_tls_is_required_and_satisfied() {
    let p = pki();
    let server = secure_server(&tls_flags(true));
    let url = format!("localhost:{}", port(&server));
    let ca = p.path("ca.pem");

    let o = ask(&url, &["--ssl-root-cert", &ca]);
    assert_fails_with(&o, &["error: ", "client certificate"]);
    // Whether the server's alert or its closing of the connection arrives first
    // depends on timing; both read as the same advice.
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            "requires a client certificate (mutual TLS: pass --ssl-client-cert FILE and \
             --ssl-client-key FILE)",
        ],
    );
    assert_a_sentence(&o);

    // A client certificate of a CA the server does not trust for clients.
    let stranger = p.path("stranger.pem");
    let o = ask(
        &url,
        &[
            "--ssl-root-cert",
            &ca,
            "--ssl-client-cert",
            &stranger,
            "--ssl-client-key",
            &p.path("stranger.key"),
        ],
    );
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            &format!("client certificate --ssl-client-cert {stranger}"),
            "issued by a CA it trusts for clients",
        ],
    );
    assert_a_sentence(&o);

    let o = ask(
        &url,
        &[
            "--ssl-root-cert",
            &ca,
            "--ssl-client-cert",
            &p.path("client.pem"),
            "--ssl-client-key",
            &p.path("client.key"),
        ],
    );
    assert_answered(&o);

    // An X.509 v1 client certificate (openssl x509 -req, no extensions): bertqa sends
    // it, and this server accepts it.
    let o = ask(
        &url,
        &[
            "--ssl-root-cert",
            &ca,
            "--ssl-client-cert",
            &p.path("client-v1.pem"),
            "--ssl-client-key",
            &p.path("client-v1.key"),
        ],
    );
    assert_answered(&o);

    // A certificate with another certificate's key: refused before connecting, naming
    // both files.
    let o = ask(
        &url,
        &[
            "--ssl-root-cert",
            &ca,
            "--ssl-client-cert",
            &p.path("client.pem"),
            "--ssl-client-key",
            &p.path("client-v1.key"),
        ],
    );
    assert_fails_with(
        &o,
        &[&format!(
            "error: invalid configuration: --ssl-client-cert {} and --ssl-client-key {} \
                 do not belong together: the certificate was issued for another key (pass \
                 the key the certificate was made for)",
            p.path("client.pem"),
            p.path("client-v1.key")
        )],
    );
}

#[test]
fn an_inference_key_is_sent_from_flag_env_or_file_and_never_shown() {
    const KEY: &str = "k3y-Zq81-never-printed";
    const WRONG: &str = "wr0ng-Xk27-never-printed";
    let server = secure_server(&[format!(
        "--grpc-restricted-protocol=inference:infer-key={KEY}"
    )]);
    let header = "triton-grpc-protocol-infer-key";
    let no_secret = |o: &Output| {
        let all = format!("{}{}", show(o), String::from_utf8_lossy(&o.stdout));
        assert!(
            !all.contains(KEY) && !all.contains(WRONG),
            "a key was printed:\n{all}"
        );
    };

    // No key: permission denied naming the header.
    let o = ask(&server.url, &[]);
    assert_fails_with(&o, &["error: permission denied by", header]);
    no_secret(&o);

    // A wrong key, even with -v: denied, the header named, the value not shown.
    let wrong = format!("{header}:{WRONG}");
    let o = ask(&server.url, &["-v", "--header", &wrong]);
    assert_fails_with(&o, &["permission denied", header, "values are not shown"]);
    no_secret(&o);

    // The right key on the command line.
    let right = format!("{header}:{KEY}");
    let o = ask(&server.url, &["--header", &right]);
    assert_answered(&o);
    no_secret(&o);

    // From a file.
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("infer-key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let o = ask(
        &server.url,
        &["--header-file", &format!("{header}={}", key_file.display())],
    );
    assert_answered(&o);
    no_secret(&o);

    // From the environment, for a whole evaluation: nothing it writes holds the key.
    let out = dir.path().join("eval");
    let data = root().join("data/sample-squad-v2.json");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_bertqa"))
        .args([
            "-v",
            "eval",
            "--url",
            &server.url,
            "--model",
            "oracle",
            "--data",
            data.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "--json",
            "--quiet",
            "--save-logits",
            "--header-env",
            &format!("{header}=BERTQA_TEST_INFER_KEY"),
        ])
        .env("BERTQA_TEST_INFER_KEY", KEY)
        .current_dir(root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    no_secret(&o);
    let mut files = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        files += 1;
        for secret in [KEY, WRONG] {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "key in an output file"
            );
        }
    }
    assert!(
        files >= 4 && out.join("metrics.json").exists(),
        "{files} files"
    );
}

#[test]
fn tls_files_that_cannot_serve_are_named_with_what_to_do() {
    let p = pki();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let empty = file("empty.pem", "");
    let garbage = file(
        "garbage.pem",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let bad_key = file(
        "bad.key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let missing = dir.path().join("missing.pem").display().to_string();
    let (ca, cert, key) = (p.path("ca.pem"), p.path("client.pem"), p.path("client.key"));
    // Each fails before any connection: no server is needed.
    let url = "localhost:1";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--ssl-root-cert", &missing],
            format!("--ssl-root-cert {missing} cannot be read (No such file or directory (os error 2)): check the path"),
        ),
        (
            vec!["--ssl-root-cert", &empty],
            format!("--ssl-root-cert {empty}: the file is empty: pass the CA certificate(s) in PEM (-----BEGIN CERTIFICATE-----)"),
        ),
        (
            vec!["--ssl-root-cert", &garbage],
            format!("--ssl-root-cert {garbage}: certificate 1 of the file is not a valid X.509 certificate (is the file complete?)"),
        ),
        (
            vec!["--ssl-root-cert", &ca, "--ssl-client-cert", &key, "--ssl-client-key", &key],
            format!("--ssl-client-cert {key}: no PEM CERTIFICATE block in the file (it holds a PEM PRIVATE KEY block: is it the right file?): pass the client certificate in PEM (-----BEGIN CERTIFICATE-----)"),
        ),
        (
            vec!["--ssl-root-cert", &ca, "--ssl-client-cert", &cert, "--ssl-client-key", &bad_key],
            format!("--ssl-client-key {bad_key}: not a private key bertqa can use (an RSA, ECDSA P-256 or P-384, or Ed25519 key in PEM)"),
        ),
        (
            vec!["--ssl-root-cert", &ca, "--ssl-client-cert", &garbage, "--ssl-client-key", &key],
            format!("--ssl-client-cert {garbage}: the first certificate of the file is not a valid X.509 certificate (is the file complete?)"),
        ),
    ];
    for (flags, want) in cases {
        let o = ask(url, &flags);
        assert_fails_with(&o, &[&format!("error: invalid configuration: {want}\n")]);
        assert_a_sentence(&o);
    }
}

#[test]
fn tls_to_servers_that_do_not_speak_it_or_have_expired_is_explained() {
    let p = pki();
    let ca = p.path("ca.pem");
    let plain = crate::common::server();

    // TLS to a plain-text gRPC port: it answers in plain text.
    let o = ask(&plain.url, &["--ssl-root-cert", &ca]);
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            ": the server does not speak TLS on this port: it answered in plain text (try \
             without --ssl / https://)",
        ],
    );
    assert_a_sentence(&o);

    // TLS to Triton's HTTP port: it hangs up on the TLS greeting.
    let http = format!("127.0.0.1:{}", plain.http_port);
    let o = ask(&http, &["--ssl-root-cert", &ca]);
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            ": the server closed the connection during the TLS handshake: this port does not \
             seem to speak TLS (try without --ssl / https://, or check the port)",
        ],
    );
    assert_a_sentence(&o);

    // A server whose certificate expired in 2020.
    let expired = secure_server(&[
        "--grpc-use-ssl=true".into(),
        format!("--grpc-server-cert={}", p.path("expired.pem")),
        format!("--grpc-server-key={}", p.path("expired.key")),
    ]);
    let o = ask(
        &format!("localhost:{}", port(&expired)),
        &["--ssl-root-cert", &ca],
    );
    assert_fails_with(
        &o,
        &[
            "error: cannot reach Triton at",
            ": the server's certificate expired on 2020-01-01: the server needs a renewed \
             certificate (or this machine's clock is wrong)",
        ],
    );
    assert_a_sentence(&o);
}

/// `scripts/testbed/tls_proxy.py` (OpenSSL, as nginx or envoy terminate TLS) in front of the
/// shared server's HTTP port, requiring client certificates of `ca.pem`; killed on drop.
struct OpensslProxy {
    child: std::process::Child,
    port: u16,
}

impl Drop for OpensslProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openssl_proxy() -> OpensslProxy {
    use std::io::BufRead;
    let p = pki();
    let python = crate::common::triton_env()
        .get("TRITON_PYTHON")
        .cloned()
        .unwrap_or_else(|| "python3".into());
    let target = format!("127.0.0.1:{}", crate::common::server().http_port);
    let mut child = std::process::Command::new(python)
        .arg(root().join("scripts/testbed/tls_proxy.py"))
        .args(["--listen", "0", "--target", &target])
        .args([
            "--cert",
            &p.path("server.pem"),
            "--key",
            &p.path("server.key"),
        ])
        .args(["--client-ca", &p.path("ca.pem")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start scripts/testbed/tls_proxy.py");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("tls_proxy.py did not start: {line:?}"));
    OpensslProxy { child, port }
}

/// Mutual TLS over HTTPS with an X.509 v1 client certificate, through a TLS-terminating
/// proxy that accepts what OpenSSL accepts (Triton's HTTP server has no TLS of its own):
/// bertqa sends the certificate and the proxy decides. A certificate of another CA is
/// refused by the proxy, in a sentence.
#[test]
fn mutual_tls_over_https_sends_an_x509_v1_client_certificate() {
    let p = pki();
    let proxy = openssl_proxy();
    let url = format!("https://localhost:{}", proxy.port);
    let ca = p.path("ca.pem");
    let with = |stem: &str| {
        ask(
            &url,
            &[
                "--protocol",
                "http",
                "--ssl-root-cert",
                &ca,
                "--ssl-client-cert",
                &p.path(&format!("{stem}.pem")),
                "--ssl-client-key",
                &p.path(&format!("{stem}.key")),
            ],
        )
    };
    assert_answered(&with("client-v1"));
    assert_answered(&with("client"));
    let o = with("stranger");
    assert_fails_with(&o, &["does not accept the client certificate"]);
    assert_a_sentence(&o);
}
