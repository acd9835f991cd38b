//! TLS failures as sentences a user can act on: what went wrong, naming the file or
//! setting involved, and what to do. The handshake's failures are known by type
//! ([`handshake_error`]); a failure that shows only later, on the first call (a server
//! refusing a client certificate closes the connection after the TLS 1.3 handshake),
//! is known by its text ([`explain`]).

use std::io;

use rustls::{AlertDescription, CertificateError};

use super::{dropped_connection, TlsConfig};

/// A TLS handshake that failed, as a sentence (see [`handshake_error`]).
#[derive(Debug)]
pub(crate) struct TlsFailure(pub(crate) String);

impl std::fmt::Display for TlsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsFailure {}

/// What a user is told when the server does not speak HTTP/2 over TLS (ALPN `h2` not
/// negotiated).
pub(crate) const NOT_GRPC: &str = "the server speaks TLS but not HTTP/2 (gRPC) on this \
                                   port: is it Triton's HTTP port? (gRPC is usually 8001)";

/// The sentence for a TLS handshake that failed with `error` (as tokio-rustls reports
/// it), given the configuration it used; `None` when the failure is not TLS's (a TCP
/// error), to be shown as it is.
pub(crate) fn handshake_error(error: &io::Error, tls: &TlsConfig) -> Option<String> {
    if let Some(e) = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<rustls::Error>())
    {
        return Some(rustls_error(e, tls));
    }
    (error.kind() == io::ErrorKind::UnexpectedEof).then(|| {
        "the server closed the connection during the TLS handshake: this port does not \
         seem to speak TLS (try without `tls` / https://, or check the port)"
            .to_string()
    })
}

/// The sentence for a rustls error met while connecting with `tls`.
pub(crate) fn rustls_error(error: &rustls::Error, tls: &TlsConfig) -> String {
    use rustls::Error as E;
    match error {
        E::InvalidCertificate(e) => server_certificate(e, tls),
        E::AlertReceived(alert) => alert_received(*alert, tls),
        E::InvalidMessage(_)
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. } => PLAIN_TEXT.to_string(),
        E::NoApplicationProtocol => NOT_GRPC.to_string(),
        E::PeerIncompatible(_) => {
            "the server and bertqa have no TLS version or cipher suite in common \
             (bertqa speaks TLS 1.2 and 1.3)"
                .to_string()
        }
        e => format!("the TLS handshake failed: {e}"),
    }
}

const PLAIN_TEXT: &str = "the server does not speak TLS on this port: it answered in plain \
                          text (try without `tls` / https://)";

/// The server's certificate was refused.
fn server_certificate(error: &CertificateError, tls: &TlsConfig) -> String {
    use CertificateError as C;
    match error {
        C::UnknownIssuer => match &tls.root_cert {
            Some(path) => format!(
                "the server's certificate is not issued by a CA in `root_cert` {}: pass the \
                 certificate of the CA that issued it as `root_cert`",
                path.display()
            ),
            None => "the server's certificate is not issued by a CA this system trusts: \
                     pass the CA certificate that issued it as `root_cert` FILE"
                .to_string(),
        },
        C::NotValidForNameContext {
            expected,
            presented,
        } => {
            let names: Vec<&str> = presented.iter().map(|n| plain_name(n)).collect();
            let names = match names.as_slice() {
                [] => "no host name".to_string(),
                names => names.join(", "),
            };
            let expected = expected.to_str();
            match &tls.target_name {
                Some(_) => format!(
                    "the server's certificate is not issued for `target_name` {expected} \
                     (it names {names}): pass one of its names as `target_name`"
                ),
                None => format!(
                    "the server's certificate is not issued for {expected} (it names \
                     {names}): connect by one of those names, or pass the name to check \
                     as `target_name` NAME"
                ),
            }
        }
        C::NotValidForName => "the server's certificate is not issued for this host name: \
                               connect by a name in the certificate, or pass it as \
                               `target_name` NAME"
            .to_string(),
        C::ExpiredContext { not_after, .. } => format!(
            "the server's certificate expired on {}: the server needs a renewed \
             certificate (or this machine's clock is wrong)",
            date(not_after.as_secs())
        ),
        C::Expired => "the server's certificate has expired: the server needs a renewed \
                       certificate (or this machine's clock is wrong)"
            .to_string(),
        C::NotValidYetContext { not_before, .. } => format!(
            "the server's certificate is not valid before {}: check this machine's clock",
            date(not_before.as_secs())
        ),
        C::NotValidYet => {
            "the server's certificate is not valid yet: check this machine's clock".to_string()
        }
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "the server's certificate is not one for a TLS server (its extended key \
             usage lacks serverAuth): the server needs a server certificate"
                .to_string()
        }
        e => format!("the server's certificate was refused: {e}"),
    }
}

/// The server ended the handshake with `alert`.
fn alert_received(alert: AlertDescription, tls: &TlsConfig) -> String {
    use AlertDescription as A;
    match alert {
        A::CertificateRequired => needs_client_certificate(),
        A::HandshakeFailure if tls.client_cert.is_none() => needs_client_certificate(),
        A::BadCertificate
        | A::UnknownCA
        | A::CertificateUnknown
        | A::UnsupportedCertificate
        | A::CertificateExpired
        | A::CertificateRevoked
        | A::AccessDenied
        | A::DecryptError => client_certificate_refused(tls),
        A::ProtocolVersion | A::InsufficientSecurity | A::HandshakeFailure => {
            "the server and bertqa have no TLS version or cipher suite in common \
             (bertqa speaks TLS 1.2 and 1.3)"
                .to_string()
        }
        A::NoApplicationProtocol => NOT_GRPC.to_string(),
        alert => format!("the server ended the TLS handshake with the alert {alert:?}"),
    }
}

fn needs_client_certificate() -> String {
    "the server requires a client certificate (mutual TLS): pass `client_cert` FILE and \
     `client_key` FILE"
        .to_string()
}

fn client_certificate_refused(tls: &TlsConfig) -> String {
    match &tls.client_cert {
        Some(path) => format!(
            "the server refused the client certificate `client_cert` {}: it accepts only \
             certificates issued by the CA it trusts for clients",
            path.display()
        ),
        None => needs_client_certificate(),
    }
}

/// A subject name as rustls lists it (`DnsName("localhost")`, `IpAddress(10.0.0.1)`),
/// as the name itself.
fn plain_name(listed: &str) -> &str {
    for kind in ["DnsName", "IpAddress", "UniformResourceIdentifier"] {
        if let Some(inner) = listed
            .strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix('('))
            .and_then(|rest| rest.strip_suffix(')'))
        {
            return inner.trim_matches('"');
        }
    }
    listed
}

/// A UNIX time as its UTC date (`2020-01-01`).
fn date(secs: u64) -> String {
    match x509_parser::time::ASN1Time::from_timestamp(secs as i64) {
        Ok(time) => time.to_datetime().date().to_string(),
        Err(_) => format!("{secs} (UNIX time)"),
    }
}

/// A connection failure's message (the innermost cause from the transport; `closed`:
/// the server closed the connection) on a TLS connection configured by `tls`, as a
/// sentence where it is TLS's: what rustls and the HTTP/2 layer say after the
/// handshake (a refused client certificate shows only then), by its text, which is all
/// that reaches bertqa of those errors. Anything else is returned as it is.
pub(crate) fn explain_tls(message: &str, closed: bool, tls: &TlsConfig) -> String {
    let lower = message.to_ascii_lowercase();
    // rustls's and h2's words (outside text): their errors reach here only as text.
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if has(&["certificaterequired", "certificate required"]) {
        needs_client_certificate()
    } else if has(&["unknownissuer", "unknown issuer"]) {
        server_certificate(&CertificateError::UnknownIssuer, tls)
    } else if has(&["notvalidforname", "not valid for name"]) {
        server_certificate(&CertificateError::NotValidForName, tls)
    } else if has(&["certificate expired"]) && !lower.contains("alert") {
        server_certificate(&CertificateError::Expired, tls)
    } else if has(&[
        "badcertificate",
        "bad certificate",
        "unknownca",
        "unknown ca",
        "certificateunknown",
        "accessdenied",
    ]) {
        client_certificate_refused(tls)
    } else if closed
        || dropped_connection(&lower)
        || has(&["close_notify", "unexpected eof", "handshake eof"])
    {
        match &tls.client_cert {
            Some(path) => format!(
                "the server closed the TLS connection: right after the handshake, this means \
                 it does not accept the client certificate `client_cert` {} (a server \
                 accepts client certificates issued by a CA it trusts for clients)",
                path.display()
            ),
            None => "the server closed the TLS connection: right after the handshake, this \
                     means it requires a client certificate (mutual TLS: pass `client_cert` \
                     FILE and `client_key` FILE)"
                .to_string(),
        }
    } else if has(&[
        "corrupt message",
        "invalidcontenttype",
        "invalid content type",
    ]) {
        PLAIN_TEXT.to_string()
    } else if has(&["http/2 was not negotiated"]) {
        NOT_GRPC.to_string()
    } else {
        message.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_failures_after_the_handshake_read_as_sentences() {
        let plain = TlsConfig::default();
        let mutual = TlsConfig {
            client_cert: Some("client.pem".into()),
            client_key: Some("client.key".into()),
            ..TlsConfig::default()
        };
        assert_eq!(
            explain_tls("stream closed because of a broken pipe", false, &plain),
            "the server closed the TLS connection: right after the handshake, this means it \
             requires a client certificate (mutual TLS: pass `client_cert` FILE and \
             `client_key` FILE)"
        );
        assert_eq!(
            explain_tls(
                "peer closed connection without sending TLS close_notify: https://docs.rs/x",
                false,
                &mutual
            ),
            "the server closed the TLS connection: right after the handshake, this means it \
             does not accept the client certificate `client_cert` client.pem (a server \
             accepts client certificates issued by a CA it trusts for clients)"
        );
        assert!(
            explain_tls("received fatal alert: CertificateRequired", false, &plain)
                .starts_with("the server requires a client certificate")
        );
        assert!(
            explain_tls("received fatal alert: UnknownCA", false, &mutual)
                .starts_with("the server refused the client certificate `client_cert` client.pem")
        );
        assert!(explain_tls(
            "received corrupt message of type InvalidContentType",
            false,
            &plain
        )
        .starts_with("the server does not speak TLS on this port"));
        assert_eq!(
            explain_tls("Connection refused (os error 111)", false, &plain),
            "Connection refused (os error 111)"
        );
    }

    #[test]
    fn rustls_errors_read_as_sentences() {
        let mutual = TlsConfig {
            root_cert: Some("ca.pem".into()),
            client_cert: Some("client.pem".into()),
            client_key: Some("client.key".into()),
            target_name: None,
        };
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap(),
            presented: vec![
                "DnsName(\"localhost\")".into(),
                "IpAddress(10.0.0.1)".into(),
            ],
        });
        assert_eq!(
            rustls_error(&name, &mutual),
            "the server's certificate is not issued for 127.0.0.1 (it names localhost, \
             10.0.0.1): connect by one of those names, or pass the name to check as \
             `target_name` NAME"
        );
        let expired = rustls::Error::InvalidCertificate(CertificateError::ExpiredContext {
            time: rustls::pki_types::UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                1_700_000_000,
            )),
            not_after: rustls::pki_types::UnixTime::since_unix_epoch(
                std::time::Duration::from_secs(1_577_836_800),
            ),
        });
        assert!(rustls_error(&expired, &mutual)
            .starts_with("the server's certificate expired on 2020-01-01: "));
        let refused = rustls::Error::AlertReceived(AlertDescription::UnknownCA);
        assert!(rustls_error(&refused, &mutual)
            .starts_with("the server refused the client certificate `client_cert` client.pem"));
        let required = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        assert!(rustls_error(&required, &TlsConfig::default())
            .starts_with("the server requires a client certificate"));
        let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "tls handshake eof");
        assert!(handshake_error(&eof, &mutual)
            .unwrap()
            .contains("does not seem to speak TLS"));
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(handshake_error(&refused, &mutual), None);
        // Nothing of what rustls prints is left.
        for e in [name, expired] {
            let text = rustls_error(&e, &mutual);
            assert!(
                !text.contains("DnsName") && !text.contains("Context"),
                "{text}"
            );
        }
    }
}
