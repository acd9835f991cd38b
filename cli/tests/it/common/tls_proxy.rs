//! A TLS-terminating proxy for the HTTPS tests: Triton's HTTP server has no TLS of its
//! own, so deployments put one in front of it (an ingress, a sidecar). This one accepts
//! TLS on a free loopback port with a certificate of its own test CA, optionally
//! requires a client certificate of that CA (mutual TLS), and copies the decrypted
//! bytes to and from the real Triton's HTTP port.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rcgen::ExtendedKeyUsagePurpose;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore};

use super::pki::{ca, leaf, Pki};

/// The proxy's PEM files, made once per test process: `ca.pem` (to trust),
/// `server.pem`/`.key` (the proxy's, issued for `127.0.0.1` and `localhost`),
/// `client.pem`/`.key` (for mutual TLS).
pub fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let pki = Pki::new("bertqa-proxy-pki-");
        let authority = ca("proxy");
        std::fs::write(pki.dir.join("ca.pem"), authority.pem()).unwrap();
        leaf(
            &authority,
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &pki.dir,
            "server",
        );
        leaf(
            &authority,
            &["bertqa-proxy-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
            &pki.dir,
            "client",
        );
        pki
    })
}

/// A running proxy (it lives as long as the test process).
pub struct TlsProxy {
    /// The port it accepts TLS on, on 127.0.0.1.
    pub port: u16,
}

impl TlsProxy {
    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// Starts a proxy to `127.0.0.1:target_port`, requiring a client certificate of the
/// proxy's CA when `mutual`. Connections whose handshake fails are dropped, as a
/// real TLS terminator drops them.
pub fn start(target_port: u16, mutual: bool) -> TlsProxy {
    let config = Arc::new(server_config(pki(), mutual));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = SocketAddr::from(([127, 0, 0, 1], target_port));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                });
            }
        });
    });
    TlsProxy { port }
}

fn server_config(pki: &Pki, mutual: bool) -> rustls::ServerConfig {
    let file = |name: &str| Path::new(&pki.path(name)).to_path_buf();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(file("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mutual {
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(file("ca.pem")).unwrap() {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(certs, key).unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}
