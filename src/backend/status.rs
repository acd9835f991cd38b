//! gRPC statuses and transport failures as the library's [`Error`], by meaning.

use std::time::Duration;

use tonic::{Code, Status};

use crate::error::Error;

/// `tonic::Status` → [`Error`].
pub fn map_status(url: &str, timeout: Duration, status: Status, model: Option<&str>) -> Error {
    let message = status.message().to_string();
    match status.code() {
        Code::Unavailable if message.to_ascii_lowercase().contains("header") => {
            Error::PermissionDenied {
                url: url.into(),
                message,
            }
        }
        Code::Unavailable | Code::Unknown if is_transport(&status) => Error::Unavailable {
            url: url.into(),
            message: transport_message(&status),
        },
        Code::Unavailable => Error::Unavailable {
            url: url.into(),
            message,
        },
        Code::DeadlineExceeded => Error::Timeout {
            url: url.into(),
            timeout_ms: timeout.as_millis() as u64,
        },
        Code::Cancelled if message.contains("Timeout expired") => Error::Timeout {
            url: url.into(),
            timeout_ms: timeout.as_millis() as u64,
        },
        Code::Unauthenticated | Code::PermissionDenied => Error::PermissionDenied {
            url: url.into(),
            message,
        },
        code => Error::Server {
            url: url.into(),
            code: match model {
                Some(m) => format!("{code:?} for model {m:?}"),
                None => format!("{code:?}"),
            },
            message,
        },
    }
}

pub fn is_transport(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

fn transport_message(status: &Status) -> String {
    match std::error::Error::source(status) {
        Some(src) => root_cause(src),
        None => status.message().to_string(),
    }
}

/// The innermost cause of an error chain, which is the part users can act on
/// ("Connection refused (os error 111)").
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_meanings() {
        let t = Duration::from_millis(5);
        let e = map_status("h:1", t, Status::deadline_exceeded("x"), None);
        assert!(matches!(e, Error::Timeout { timeout_ms: 5, .. }), "{e}");
        let e = map_status(
            "h:1",
            t,
            Status::unavailable(
                "This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'",
            ),
            None,
        );
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");
        let e = map_status("h:1", t, Status::internal("boom"), Some("m"));
        assert_eq!(
            e.to_string(),
            "Triton at h:1 answered Internal for model \"m\": boom"
        );
    }
}
