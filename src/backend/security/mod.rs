//! Transport security and credentials: TLS (and mutual TLS) for the connection, and the
//! headers (gRPC metadata, or HTTP headers) sent with every call.
//!
//! Header values are secrets (API keys, Triton's `triton-grpc-protocol-infer-key` or
//! HTTP `infer-key`): they live in [`Secret`], whose `Debug` and `Display` print
//! `<redacted>`, and are put on the wire as *sensitive* values. No error of this module
//! quotes a value or the contents of a key file; they name the header, the flag or the
//! path.
//!
//! TLS is the private `tls` module's: bertqa's own rustls configuration, for every
//! transport (`tls::rustls_client_config`, `tls::server_name`). `tls_errors` turns TLS
//! failures into sentences naming the file or setting and what to do (for a handshake
//! of another transport: `tls_errors::handshake_error` and `tls_errors::TlsFailure`).

pub(crate) mod tls;
pub(crate) mod tls_errors;

use std::fmt;
use std::path::PathBuf;

use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};

use crate::error::{Error, Result, Unreachable};

pub(crate) use tls::GrpcTlsConnector;

/// A secret string. It is never shown: `Debug` and `Display` print `<redacted>`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One gRPC metadata entry sent with every call. Its value is a secret.
#[derive(Clone)]
pub struct Header {
    name: AsciiMetadataKey,
    value: AsciiMetadataValue,
}

impl Header {
    /// Validates a header. The name is lower-cased (gRPC metadata keys are lower case);
    /// names ending in `-bin` (binary metadata) and gRPC's reserved `grpc-` names are
    /// refused. The value must be printable ASCII; errors never quote it.
    pub fn new(name: &str, value: &Secret) -> Result<Header> {
        let lower = name.trim().to_ascii_lowercase();
        if lower.is_empty() {
            return Err(Error::Config("a header needs a name (KEY:VALUE)".into()));
        }
        if lower.ends_with("-bin") || lower.starts_with("grpc-") {
            return Err(Error::Config(format!(
                "header {lower:?}: binary (-bin) and reserved grpc- headers cannot be set"
            )));
        }
        let key = AsciiMetadataKey::from_bytes(lower.as_bytes()).map_err(|_| {
            Error::Config(format!(
                "header name {lower:?} is not a valid gRPC metadata key \
                 (letters, digits, '-', '_' and '.')"
            ))
        })?;
        let raw = value.expose();
        if raw.is_empty() {
            return Err(Error::Config(format!("header {lower:?}: empty value")));
        }
        if !raw.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err(Error::Config(format!(
                "header {lower:?}: the value must be printable ASCII (value not shown)"
            )));
        }
        let mut value = AsciiMetadataValue::try_from(raw).map_err(|_| {
            Error::Config(format!("header {lower:?}: invalid value (value not shown)"))
        })?;
        value.set_sensitive(true);
        Ok(Header { name: key, value })
    }

    /// The header's name (lower case).
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The value of a `Host` header: the name an ingress routes by, not a secret (shown
    /// in messages); `None` for any other header.
    pub(crate) fn host(&self) -> Option<&str> {
        (self.name.as_str() == "host")
            .then(|| self.value.to_str().ok())
            .flatten()
    }

    /// The header as a plain HTTP header (KServe v2 REST), its value marked sensitive.
    pub(crate) fn to_http(&self) -> (http::HeaderName, http::HeaderValue) {
        let name = http::HeaderName::from_bytes(self.name.as_str().as_bytes())
            .expect("a valid metadata key is a valid header name");
        let mut value = http::HeaderValue::from_bytes(self.value.as_encoded_bytes())
            .expect("printable ASCII is a valid header value");
        value.set_sensitive(true);
        (name, value)
    }
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Header({}: <redacted>)", self.name.as_str())
    }
}

/// Puts `headers` into a request's metadata (a later header of the same name wins).
pub fn apply(headers: &[Header], metadata: &mut MetadataMap) {
    for h in headers {
        metadata.insert(h.name.clone(), h.value.clone());
    }
}

/// A failed connection attempt (tonic's error) as what a user is told: the sentence of a
/// failed TLS handshake ([`tls_errors::TlsFailure`]), else the innermost cause with the
/// hints of [`explain`].
pub(crate) fn connect_error(
    error: &(dyn std::error::Error + 'static),
    tls: Option<&TlsConfig>,
) -> String {
    let failure =
        super::status::chain(Some(error)).find_map(|e| e.downcast_ref::<tls_errors::TlsFailure>());
    match failure {
        Some(failure) => failure.to_string(),
        None => explain(&super::status::root_cause(error), false, tls),
    }
}

/// TLS settings. Either both or neither of `client_cert` and `client_key`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM file with the CA certificate(s) to trust (default: the system's CAs).
    pub root_cert: Option<PathBuf>,
    /// PEM client certificate chain, for mutual TLS.
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// The name to check in the server certificate instead of the URL's host.
    pub target_name: Option<String>,
}

/// Everything about who bertqa is and how it is protected on the wire.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// TLS, or `None` for plain HTTP/2 (an `https://` URL turns TLS on regardless).
    pub tls: Option<TlsConfig>,
    /// Metadata sent with every call.
    pub headers: Vec<Header>,
}

/// Adds what a user can act on to a client error: the names (never the values) of the
/// headers sent to a server that denied permission, and the TLS sentences and hints of
/// [`explain`] to a connection failure (`tls`: the TLS configuration in use, if any).
pub(crate) fn annotate(error: Error, headers: &[Header], tls: Option<&TlsConfig>) -> Error {
    match error {
        Error::PermissionDenied { url, mut message } if !headers.is_empty() => {
            let names: Vec<&str> = headers.iter().map(Header::name).collect();
            message.push_str(&format!(
                " (bertqa sent header(s) {}; their values are not shown)",
                names.join(", ")
            ));
            Error::PermissionDenied { url, message }
        }
        Error::Unavailable {
            url,
            cause,
            message,
        } => Error::Unavailable {
            message: explain(&message, cause == Unreachable::Closed, tls),
            cause,
            url,
        },
        e => e,
    }
}

/// Adds what a user can do to a connection failure's message (the innermost cause from
/// the transport; `closed`: the server closed the connection), given the TLS
/// configuration in use, if any: with TLS, the sentences of
/// [`tls_errors::explain_tls`]; without, a hint where the server may want TLS.
pub(crate) fn explain(message: &str, closed: bool, tls: Option<&TlsConfig>) -> String {
    if let Some(tls) = tls {
        return tls_errors::explain_tls(message, closed, tls);
    }
    let lower = message.to_ascii_lowercase();
    // h2's words for a TLS server's answer to plain text: outside text, as it comes.
    let refused_plain_text =
        lower.contains("frame with invalid size") || lower.contains("protocol error");
    if closed || dropped_connection(&lower) || refused_plain_text {
        format!(
            "{message} (the server closed the plain-text connection; if it requires TLS, \
             use `tls` (with `root_cert` FILE) or an https:// URL)"
        )
    } else {
        message.to_string()
    }
}

/// Whether a transport's message (lower case) says the server dropped the connection:
/// the io error's words, which reach bertqa only as text (tonic and hyper keep the
/// message, not the error).
fn dropped_connection(lower: &str) -> bool {
    lower.contains("broken pipe") || lower.contains("connection reset")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug_and_display() {
        let s = Secret::new("hunter2-secret");
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        let h = Header::new("Triton-GRPC-Protocol-Infer-Key", &s).unwrap();
        assert_eq!(h.name(), "triton-grpc-protocol-infer-key");
        let shown = format!("{h:?} {:?}", vec![h.clone()]);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("triton-grpc-protocol-infer-key"), "{shown}");
        let sec = Security {
            tls: None,
            headers: vec![h.clone()],
        };
        assert!(!format!("{sec:?} {sec:#?}").contains("hunter2"));
        // The metadata map marks it sensitive, so its Debug hides it too.
        let mut md = MetadataMap::new();
        apply(&[h], &mut md);
        assert!(!format!("{md:?}").contains("hunter2"), "{md:?}");
        assert_eq!(
            md.get("triton-grpc-protocol-infer-key").unwrap(),
            "hunter2-secret"
        );
    }

    #[test]
    fn bad_headers_are_refused_without_quoting_the_value() {
        for (name, value) in [
            ("", "hunter2"),
            ("bad name", "hunter2"),
            ("key-bin", "hunter2"),
            ("grpc-timeout", "hunter2"),
            ("key", "hunter2\n"),
            ("key", "hünter2"),
            ("key", ""),
        ] {
            let e = Header::new(name, &Secret::new(value)).unwrap_err();
            let text = e.to_string();
            assert!(matches!(e, Error::Config(_)), "{text}");
            assert!(
                !text.contains("hunter2") && !text.contains("hünter2"),
                "{text}"
            );
        }
    }

    #[test]
    fn connection_failures_get_a_hint() {
        assert!(explain(
            "invalid peer certificate: UnknownIssuer",
            false,
            Some(&TlsConfig::default())
        )
        .contains("`root_cert`"));
        assert!(explain("stream closed because of a broken pipe", false, None).contains("`tls`"));
        assert!(explain(
            "peer closed connection without sending TLS close_notify",
            false,
            Some(&TlsConfig::default())
        )
        .contains("`client_cert`"));
        assert_eq!(
            explain("Connection refused (os error 111)", false, None),
            "Connection refused (os error 111)"
        );
    }

    /// The hints are chosen by the error's cause, not by bertqa's own words in it.
    #[test]
    fn hints_follow_the_cause() {
        let closed = |message: &str| Error::unavailable("h:1", Unreachable::Closed, message);
        let e = annotate(closed("connection closed by the server (x)"), &[], None);
        assert_eq!(
            e.to_string(),
            "cannot reach Triton at h:1: connection closed by the server (x) (the server \
             closed the plain-text connection; if it requires TLS, use `tls` (with \
             `root_cert` FILE) or an https:// URL)"
        );
        // Whatever the words: a closed connection gets the hint; a refused one does not.
        let e = annotate(closed("operation was canceled"), &[], None);
        assert!(e.to_string().contains("use `tls`"), "{e}");
        let words = "connection closed by the server (x)";
        let e = annotate(
            Error::unavailable("h:1", Unreachable::Refused, words),
            &[],
            None,
        );
        assert_eq!(
            e.to_string(),
            format!("cannot reach Triton at h:1: {words}")
        );
        // With TLS, a closed connection right after the handshake is about certificates.
        let tls = TlsConfig::default();
        let e = annotate(closed("operation was canceled"), &[], Some(&tls));
        assert!(
            e.to_string()
                .contains("the server closed the TLS connection: right after the handshake"),
            "{e}"
        );
        assert!(matches!(
            e,
            Error::Unavailable {
                cause: Unreachable::Closed,
                ..
            }
        ));
        // A server's refusal names the headers sent, never their values.
        let h = Header::new("infer-key", &Secret::new("hunter2")).unwrap();
        let denied = Error::PermissionDenied {
            url: "h:1".into(),
            message: "HTTP 403: no".into(),
        };
        let e = annotate(denied, &[h], None);
        assert_eq!(
            e.to_string(),
            "permission denied by h:1: HTTP 403: no (bertqa sent header(s) infer-key; their \
             values are not shown)"
        );
        // Anything else is left as it is.
        let e = annotate(Error::Config("x".into()), &[], Some(&tls));
        assert_eq!(e.to_string(), "invalid configuration: x");
    }
}
