//! HTTPS and mutual TLS over `--protocol http` through a TLS-terminating proxy
//! (`common::tls_proxy`) in front of the shared server's HTTP port: Triton's HTTP server
//! has no TLS of its own.

use std::sync::OnceLock;

use crate::common::tls_proxy;
use crate::common::{
    ask_oracle, assert_answered, assert_fails_with, assert_same_outputs, bertqa, http_url, json_of,
    sample_eval, server,
};

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
    json_of(&bertqa(&sample_eval(
        "oracle",
        &plain,
        &["--protocol", "http", "--url", &http_url()],
    )));
    let tls = tmp.path().join("tls");
    let v = json_of(&bertqa(&sample_eval(
        "oracle",
        &tls,
        &["--protocol", "http", "--url", &url, "--ssl-root-cert", &ca],
    )));
    assert_eq!(v["model"]["protocol"], "http");
    assert_eq!(v["metrics"]["exact"], 100.0);
    assert_same_outputs(&plain, &tls);
    assert_answered(&ask_oracle(&[
        "--protocol",
        "http",
        "--url",
        &url,
        "--ssl-root-cert",
        &ca,
    ]));
    // Without the proxy's CA the server is not trusted: a sentence, exit 2.
    let o = ask_oracle(&["--protocol", "http", "--url", &url]);
    assert_fails_with(&o, &["127.0.0.1"]);
}

#[test]
fn mutual_tls_through_a_tls_proxy_needs_the_client_certificate() {
    let pki = tls_proxy::pki();
    let url = proxies().1.url();
    let ca = pki.path("ca.pem");
    let o = ask_oracle(&["--protocol", "http", "--url", &url, "--ssl-root-cert", &ca]);
    assert_fails_with(&o, &["the server requires a client certificate"]);
    let (cert, key) = (pki.path("client.pem"), pki.path("client.key"));
    let v = assert_answered(&ask_oracle(&[
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
