//! Transport security and credentials: TLS (and mutual TLS) for the channel, and gRPC
//! metadata (headers) sent with every call.
//!
//! Header values are secrets (API keys, Triton's `triton-grpc-protocol-infer-key`):
//! they live in [`Secret`], whose `Debug` and `Display` print `<redacted>`, and are put
//! on the wire as *sensitive* metadata values. No error of this module quotes a value
//! or the contents of a key file; they name the header, the flag or the path.
//!
//! TLS is [`tls`]'s: bertqa's own rustls configuration, for every transport
//! ([`tls::rustls_client_config`], [`tls::server_name`]).

pub(crate) mod tls;

use std::fmt;

use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};

use crate::error::{Error, Result};

pub(crate) use tls::GrpcTlsConnector;
pub use tls::TlsConfig;

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

/// Everything about who bertqa is and how it is protected on the wire.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// TLS, or `None` for plain HTTP/2 (an `https://` URL turns TLS on regardless).
    pub tls: Option<TlsConfig>,
    /// Metadata sent with every call.
    pub headers: Vec<Header>,
}

/// Adds what a user can act on to a client error: the names (never the values) of the
/// headers sent to a server that denied permission, and the TLS hints of [`explain`]
/// to a connection failure.
pub(crate) fn annotate(error: Error, headers: &[Header], tls: bool) -> Error {
    match error {
        Error::PermissionDenied { url, mut message } if !headers.is_empty() => {
            let names: Vec<&str> = headers.iter().map(Header::name).collect();
            message.push_str(&format!(
                " (bertqa sent header(s) {}; their values are not shown)",
                names.join(", ")
            ));
            Error::PermissionDenied { url, message }
        }
        Error::Unavailable { url, message } => Error::Unavailable {
            message: explain(&message, tls),
            url,
        },
        e => e,
    }
}

/// Adds what a user can do to a connection failure's message, given whether TLS was
/// on. The message is the innermost cause from the transport.
pub(crate) fn explain(message: &str, tls: bool) -> String {
    let lower = message.to_ascii_lowercase();
    let hint = if tls {
        if lower.contains("unknownissuer") || lower.contains("unknown issuer") {
            "the server's certificate is not signed by a trusted CA (check `root_cert`)"
        } else if lower.contains("notvalidforname") || lower.contains("not valid for name") {
            "the server's certificate is not issued for this host name \
             (use the name in the certificate, or `target_name` NAME)"
        } else if lower.contains("certificaterequired") || lower.contains("certificate required") {
            "the server requires a client certificate (mutual TLS: \
             `client_cert` FILE `client_key` FILE)"
        } else if lower.contains("badcertificate")
            || lower.contains("bad certificate")
            || lower.contains("unknownca")
            || lower.contains("unknown ca")
        {
            "the server rejected the client certificate (mutual TLS)"
        } else if lower.contains("close_notify")
            || lower.contains("unexpected eof")
            || closed_connection(&lower)
        {
            "the server closed the TLS connection during or right after the handshake: \
             it may require a client certificate (`client_cert` FILE `client_key` \
             FILE) or not accept the one sent"
        } else if lower.contains("corrupt message")
            || lower.contains("invalidcontenttype")
            || lower.contains("invalid content type")
            || lower.contains("http/2 was not negotiated")
        {
            "the server does not seem to speak TLS (try without `tls` / https://)"
        } else {
            ""
        }
    } else if closed_connection(&lower)
        || lower.contains("frame with invalid size")
        || lower.contains("protocol error")
    {
        "the server closed the plain-text connection; if it requires TLS, use `tls` \
         (with `root_cert` FILE) or an https:// URL"
    } else {
        ""
    };
    if hint.is_empty() {
        message.to_string()
    } else {
        format!("{message} ({hint})")
    }
}

/// The ways a server's closing of the connection shows up (which one depends on
/// timing).
fn closed_connection(lower: &str) -> bool {
    lower.contains("connection closed by the server")
        || lower.contains("broken pipe")
        || lower.contains("connection reset")
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
        assert!(explain("invalid peer certificate: UnknownIssuer", true).contains("`root_cert`"));
        assert!(explain("connection closed by the server (x)", false).contains("`tls`"));
        assert!(explain(
            "peer closed connection without sending TLS close_notify",
            true
        )
        .contains("`client_cert`"));
        assert_eq!(
            explain("Connection refused (os error 111)", false),
            "Connection refused (os error 111)"
        );
    }
}
