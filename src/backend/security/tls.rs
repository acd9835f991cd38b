//! TLS for the connections to Triton, on rustls (ring). bertqa builds the rustls
//! configuration itself and hands tonic finished TLS connections, so that a client
//! certificate goes to the server as the user gave it: the server, not bertqa, decides
//! which client certificates it accepts (an X.509 v1 certificate included, which
//! rustls's own client-identity check refuses). What bertqa does check before
//! connecting is that the certificate and the key belong together.
//!
//! Trust comes from `root_cert` when given, else from the system's CA store. The name
//! checked in the server certificate (and sent as SNI) is the URL's host (a DNS name or
//! an IP address) unless `target_name` overrides it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use rustls::client::ResolvesClientCert;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::{CertifiedKey, SigningKey};
use rustls::{ClientConfig, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tonic::transport::Uri;
use x509_parser::prelude::{FromDer, SubjectPublicKeyInfo, X509Certificate};

use super::tls_errors::{handshake_error, TlsFailure, NOT_GRPC};
use super::TlsConfig;
use crate::error::{Error, Result};

/// The ALPN protocol of gRPC (HTTP/2).
pub(crate) const ALPN_H2: &[u8] = b"h2";

/// The rustls client configuration for `tls`, offering the ALPN protocols `alpn`
/// (`[ALPN_H2]` for gRPC; `b"http/1.1"` for HTTP/1.1), for every transport of bertqa.
/// Roots: `root_cert`, else the system's CAs. Mutual TLS: the chain of `client_cert`
/// and the key of `client_key` are sent whenever the server asks for a client
/// certificate, without rustls's client-side check of the certificate (the server
/// decides); a certificate whose public key is not the key's is refused here, naming
/// both files. Every error is [`Error::Io`] or [`Error::Config`] naming the file and the
/// setting. The server name to check is [`server_name`]'s.
pub(crate) fn rustls_client_config(tls: &TlsConfig, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = root_store(tls)?;
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS protocol versions: {e}")))?
        .with_root_certificates(roots);
    let mut config = match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            builder.with_client_cert_resolver(Arc::new(ClientIdentity::load(cert, key, &provider)?))
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(Error::Config(
                "mutual TLS needs both `client_cert` and `client_key`".into(),
            ))
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The name to check in the server certificate and to send as SNI: `target_name` when
/// set, else `host` (the URL's host: a DNS name, or an IP address, IPv6 with or without
/// its brackets).
pub(crate) fn server_name(tls: &TlsConfig, host: &str) -> Result<ServerName<'static>> {
    let (name, what) = match &tls.target_name {
        Some(name) => (name.as_str(), "`target_name`"),
        None => (
            host.trim_start_matches('[').trim_end_matches(']'),
            "the host",
        ),
    };
    ServerName::try_from(name.to_string()).map_err(|_| {
        Error::Config(format!(
            "{what} {name:?} is neither a DNS name nor an IP address"
        ))
    })
}

/// The trust anchors: the certificates of `root_cert`, else the system's.
fn root_store(tls: &TlsConfig) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match &tls.root_cert {
        Some(path) => {
            for (i, cert) in read_certs(path, "`root_cert`")?.into_iter().enumerate() {
                roots.add(cert).map_err(|_| {
                    Error::Config(format!(
                        "`root_cert` {}: certificate {} of the file is not a valid X.509 \
                         certificate (is the file complete?)",
                        path.display(),
                        i + 1
                    ))
                })?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(native.certs);
            if added == 0 {
                return Err(Error::Config(
                    "no CA certificates found on this system: pass `root_cert` FILE".into(),
                ));
            }
        }
    }
    Ok(roots)
}

/// The client identity of mutual TLS, sent whenever the server asks for one.
#[derive(Debug)]
struct ClientIdentity(Arc<CertifiedKey>);

impl ClientIdentity {
    /// Reads the chain and the key, and checks that the first certificate is the key's.
    fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<ClientIdentity> {
        let chain = read_certs(cert, "`client_cert`")?;
        let key_der = read_key(key)?;
        let signer = provider
            .key_provider
            .load_private_key(key_der)
            .map_err(|_| {
                Error::Config(format!(
                    "`client_key` {}: not a private key bertqa can use (an RSA, ECDSA P-256 or \
                 P-384, or Ed25519 key in PEM)",
                    key.display()
                ))
            })?;
        check_pair(&chain[0], signer.as_ref(), cert, key)?;
        Ok(ClientIdentity(Arc::new(CertifiedKey::new(chain, signer))))
    }
}

impl ResolvesClientCert for ClientIdentity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Whether `cert` (any X.509 version) is the certificate of `key`: the same public key
/// algorithm and key. A key that cannot tell its public key is let through (the server
/// will judge).
fn check_pair(
    cert: &CertificateDer<'_>,
    key: &dyn SigningKey,
    cert_path: &Path,
    key_path: &Path,
) -> Result<()> {
    let (_, parsed) = X509Certificate::from_der(cert.as_ref()).map_err(|_| {
        Error::Config(format!(
            "`client_cert` {}: the first certificate of the file is not a valid X.509 \
             certificate (is the file complete?)",
            cert_path.display()
        ))
    })?;
    let Some(spki) = key.public_key() else {
        return Ok(());
    };
    let Ok((_, key_public)) = SubjectPublicKeyInfo::from_der(spki.as_ref()) else {
        return Ok(());
    };
    let cert_public = parsed.public_key();
    if cert_public.algorithm.algorithm != key_public.algorithm.algorithm
        || cert_public.subject_public_key.data != key_public.subject_public_key.data
    {
        return Err(Error::Config(format!(
            "`client_cert` {} and `client_key` {} do not belong together: the \
             certificate was issued for another key (pass the key the certificate was \
             made for)",
            cert_path.display(),
            key_path.display()
        )));
    }
    Ok(())
}

/// The certificates of a PEM file, in order (at least one).
fn read_certs(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read_setting(path, "CERTIFICATE", setting)?;
    CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .ok()
        .filter(|certs| !certs.is_empty())
        .ok_or_else(|| {
            Error::Config(format!(
                "{setting} {}: a PEM CERTIFICATE block of the file cannot be decoded \
                 (is the file complete?)",
                path.display()
            ))
        })
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1; not encrypted).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let pem = read_setting(path, "PRIVATE KEY", "`client_key`")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|_| {
        Error::Config(format!(
            "`client_key` {}: no private key bertqa can read in the file (PEM PRIVATE KEY, \
             RSA PRIVATE KEY or EC PRIVATE KEY, not encrypted)",
            path.display()
        ))
    })
}

/// Reads a PEM file and checks that it holds a block of the expected kind (`CERTIFICATE`,
/// or any `... PRIVATE KEY`); never quotes the contents. A file that cannot be read is
/// [`Error::Io`]; one without such a block is [`Error::Config`] saying what it holds.
fn read_pem(path: &Path, kind: &str, setting: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let blocks: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("-----BEGIN "))
        .map(|rest| rest.trim_end_matches('-'))
        .collect();
    if blocks.iter().any(|b| b.ends_with(kind)) {
        return Ok(bytes);
    }
    let found = if bytes.iter().all(u8::is_ascii_whitespace) {
        "the file is empty".to_string()
    } else if let Some(other) = blocks.first() {
        format!(
            "no PEM {kind} block in the file (it holds a PEM {other} block: is it the right file?)"
        )
    } else {
        format!("no PEM {kind} block in the file (not PEM; DER files must be converted to PEM)")
    };
    Err(Error::Config(format!(
        "{setting} {}: {found}: pass {} in PEM (-----BEGIN {kind}-----)",
        path.display(),
        match kind {
            "CERTIFICATE" if setting == "`root_cert`" => "the CA certificate(s)",
            "CERTIFICATE" => "the client certificate",
            _ => "the private key",
        }
    )))
}

/// [`read_pem`], a file that cannot be read included as [`Error::Config`] naming the
/// setting.
fn read_setting(path: &Path, kind: &str, setting: &str) -> Result<Vec<u8>> {
    read_pem(path, kind, setting).map_err(|e| match e {
        Error::Io { path, source } => Error::Config(format!(
            "{setting} {} cannot be read ({source}): check the path",
            path.display()
        )),
        e => e,
    })
}

/// Opens the TLS connections of a gRPC channel (tonic's connector): TCP to the URI's
/// host and port, then the handshake with the configuration of
/// [`rustls_client_config`], checking [`server_name`]; HTTP/2 must be negotiated. A
/// failed handshake is a [`TlsFailure`] (a sentence); a TCP failure is the
/// [`io::Error`] as it is.
#[derive(Clone)]
pub(crate) struct GrpcTlsConnector {
    config: Arc<TlsConfig>,
    tls: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl GrpcTlsConnector {
    /// The connector of `tls` for the server at `uri`.
    pub(crate) fn new(tls: &TlsConfig, uri: &Uri) -> Result<GrpcTlsConnector> {
        let config = rustls_client_config(tls, &[ALPN_H2])?;
        Ok(GrpcTlsConnector {
            config: Arc::new(tls.clone()),
            tls: tokio_rustls::TlsConnector::from(config),
            name: server_name(tls, uri.host().unwrap_or_default())?,
        })
    }

    async fn connect(
        self,
        uri: Uri,
    ) -> std::result::Result<TokioIo<TlsStream<TcpStream>>, BoxError> {
        let host = uri.host().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let tcp = TcpStream::connect((host, uri.port_u16().unwrap_or(443))).await?;
        tcp.set_nodelay(true)?;
        let stream = self.tls.connect(self.name, tcp).await.map_err(|e| {
            match handshake_error(&e, &self.config) {
                Some(sentence) => BoxError::from(TlsFailure(sentence)),
                None => BoxError::from(e),
            }
        })?;
        if stream.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
            return Err(TlsFailure(NOT_GRPC.to_string()).into());
        }
        Ok(TokioIo::new(stream))
    }
}

impl tower_service::Service<Uri> for GrpcTlsConnector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn Future<Output = std::result::Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_files_are_checked_without_quoting_them() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "not a pem: hunter2").unwrap();
        let e = read_pem(&key, "CERTIFICATE", "`root_cert`").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("`root_cert`") && text.contains("key.pem"),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        std::fs::write(&key, "-----BEGIN EC PRIVATE KEY-----\nAAAA\n").unwrap();
        assert!(read_pem(&key, "PRIVATE KEY", "`client_key`").is_ok());
        let e = read_pem(&dir.path().join("missing.pem"), "CERTIFICATE", "x").unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    #[test]
    fn the_server_name_is_the_target_name_else_the_host() {
        let plain = TlsConfig::default();
        let name =
            |tls: &TlsConfig, host: &str| server_name(tls, host).map(|n| n.to_str().into_owned());
        assert_eq!(name(&plain, "localhost").unwrap(), "localhost");
        assert_eq!(name(&plain, "[::1]").unwrap(), "::1");
        assert_eq!(name(&plain, "10.0.0.1").unwrap(), "10.0.0.1");
        let target = TlsConfig {
            target_name: Some("triton.test".into()),
            ..TlsConfig::default()
        };
        assert_eq!(name(&target, "10.0.0.1").unwrap(), "triton.test");
        let bad = TlsConfig {
            target_name: Some("not a name".into()),
            ..TlsConfig::default()
        };
        let e = name(&bad, "localhost").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid configuration: `target_name` \"not a name\" is neither a DNS name nor an \
             IP address"
        );
    }
}
