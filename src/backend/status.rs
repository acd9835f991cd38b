//! gRPC statuses and transport failures as the library's [`Error`], by meaning.

use std::time::Duration;

use tonic::Status;

use crate::error::{Code, Error, Unreachable};

/// `tonic::Status` → [`Error`].
pub(crate) fn map_status(
    url: &str,
    timeout: Duration,
    status: Status,
    model: Option<&str>,
) -> Error {
    let timed_out = || Error::Timeout {
        url: url.into(),
        timeout_ms: timeout.as_millis() as u64,
    };
    let mut message = status.message().to_string();
    let http = http_answer(&message);
    let code = match http {
        // Not a gRPC answer at all but an HTTP one (a proxy's or ingress's page): its
        // HTTP status says what happened, as gRPC reads statuses without a body.
        Some((404, _)) => Code::Unimplemented,
        Some((502..=504, _)) => Code::Unavailable,
        _ => code_of(status.code()),
    };
    if let Some((_, words)) = http {
        message = format!("an HTTP answer \"{words}\", not gRPC's");
    }
    match code {
        // Triton's words for a restricted protocol without its header: the protocol
        // answers only UNAVAILABLE, so the server's message is all there is to read.
        Code::Unavailable if message.to_ascii_lowercase().contains("header") => {
            Error::PermissionDenied {
                url: url.into(),
                message,
            }
        }
        Code::Unavailable | Code::Unknown if is_transport(&status) => {
            Error::unavailable(url, transport_cause(&status), transport_message(&status))
        }
        Code::Unavailable => Error::unavailable(url, Unreachable::Answered, message),
        Code::DeadlineExceeded => timed_out(),
        Code::Cancelled if is_timeout(&status) => timed_out(),
        // A tonic server's words when the deadline bertqa sent (grpc-timeout) passes on
        // its side first: CANCELLED is all the protocol says, so its message is read.
        Code::Cancelled if message == "Timeout expired" => timed_out(),
        Code::Unauthenticated | Code::PermissionDenied => Error::PermissionDenied {
            url: url.into(),
            message,
        },
        code => Error::Server {
            server: None,
            url: url.into(),
            code,
            http: None,
            model: model.map(str::to_string),
            message,
        },
    }
}

/// The HTTP status of an answer that was not gRPC's, from tonic's words for it
/// ("… while receiving response with status: 404 Not Found": a body it could not read
/// as gRPC messages, such as a proxy's HTML error page); outside text, read here only.
fn http_answer(message: &str) -> Option<(u16, &str)> {
    let (_, rest) = message.split_once("while receiving response with status: ")?;
    let status = rest.split_whitespace().next()?.parse().ok()?;
    Some((status, rest.trim()))
}

/// tonic's code as the library's ([`Code`]); `Ok`, never an error's, as `Unknown`.
pub(crate) fn code_of(code: tonic::Code) -> Code {
    use tonic::Code as T;
    match code {
        T::Ok | T::Unknown => Code::Unknown,
        T::Cancelled => Code::Cancelled,
        T::InvalidArgument => Code::InvalidArgument,
        T::DeadlineExceeded => Code::DeadlineExceeded,
        T::NotFound => Code::NotFound,
        T::AlreadyExists => Code::AlreadyExists,
        T::PermissionDenied => Code::PermissionDenied,
        T::ResourceExhausted => Code::ResourceExhausted,
        T::FailedPrecondition => Code::FailedPrecondition,
        T::Aborted => Code::Aborted,
        T::OutOfRange => Code::OutOfRange,
        T::Unimplemented => Code::Unimplemented,
        T::Internal => Code::Internal,
        T::Unavailable => Code::Unavailable,
        T::DataLoss => Code::DataLoss,
        T::Unauthenticated => Code::Unauthenticated,
    }
}

/// Whether the status comes from the transport (it has a source error), not from the
/// server.
pub(crate) fn is_transport(status: &Status) -> bool {
    std::error::Error::source(status).is_some()
}

/// Whether the status is the channel's own deadline passing (tonic's `TimeoutExpired`
/// in its source), not the server's.
pub(crate) fn is_timeout(status: &Status) -> bool {
    chain(std::error::Error::source(status)).any(|e| e.is::<tonic::TimeoutExpired>())
}

/// What a transport failure means: a refused connection (an `io::Error` of that kind in
/// the chain), or another failure of the transport.
pub(crate) fn cause_of(e: &(dyn std::error::Error + 'static)) -> Unreachable {
    let refused = chain(Some(e)).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    if refused {
        Unreachable::Refused
    } else {
        Unreachable::Transport
    }
}

fn transport_cause(status: &Status) -> Unreachable {
    std::error::Error::source(status).map_or(Unreachable::Transport, cause_of)
}

fn transport_message(status: &Status) -> String {
    match std::error::Error::source(status) {
        Some(src) => root_cause(src),
        None => status.message().to_string(),
    }
}

/// Whether a gRPC status message is tonic's report of a connection lost mid-call
/// (hyper's or h2's words, handed over as UNKNOWN or CANCELLED without the error
/// itself): outside text, with no typed alternative.
pub(crate) fn is_dropped_connection(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "connection reset",
        "broken pipe",
        "connection closed",
        "h2 protocol error",
    ]
    .iter()
    .any(|s| m.contains(s))
}

/// An error and its sources, outermost first.
pub(crate) fn chain<'a>(
    e: Option<&'a (dyn std::error::Error + 'static)>,
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(e, |e| e.source())
}

/// The innermost cause of an error chain, which is the part users can act on
/// ("Connection refused (os error 111)").
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    chain(Some(e))
        .last()
        .map_or_else(String::new, |c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxys_http_page_is_read_by_its_status() {
        let t = Duration::from_secs(1);
        let page = |status: &str| {
            Status::internal(format!(
                "protocol error: received message with invalid compression flag: 60 \
                 (valid flags are 0 and 1) while receiving response with status: {status}"
            ))
        };
        let e = map_status("h:1", t, page("404 Not Found"), Some("m"));
        assert!(
            matches!(
                e,
                Error::Server {
                    code: Code::Unimplemented,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with(": an HTTP answer \"404 Not Found\", not gRPC's"),
            "{e}"
        );
        let e = map_status("h:1", t, page("502 Bad Gateway"), None);
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
        let e = map_status("h:1", t, Status::internal("boom"), None);
        assert!(
            matches!(
                e,
                Error::Server {
                    code: Code::Internal,
                    ..
                }
            ),
            "{e:?}"
        );
    }

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
        assert!(
            matches!(
                &e,
                Error::Server { code: Code::Internal, http: None, model: Some(m), message, .. }
                    if m == "m" && message == "boom"
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "Triton at h:1 answered Internal for model \"m\": boom"
        );
        let e = map_status("h:1", t, Status::unavailable("busy"), None);
        assert!(
            matches!(
                e,
                Error::Unavailable {
                    cause: Unreachable::Answered,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.server_message(), Some("busy"));
    }

    #[test]
    fn transport_failures_are_known_by_type() {
        let t = Duration::from_millis(5);
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let status = Status::from_error(Box::new(refused));
        let e = map_status("h:1", t, status, None);
        assert!(
            matches!(
                e,
                Error::Unavailable {
                    cause: Unreachable::Refused,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.server_message(),
            None,
            "the transport's words, not the server's"
        );
        // The channel's deadline, as tonic reports it: CANCELLED with the source.
        let status = Status::from_error(Box::new(tonic::TimeoutExpired(())));
        let e = map_status("h:1", t, status, None);
        assert!(matches!(e, Error::Timeout { timeout_ms: 5, .. }), "{e:?}");
        // The same deadline passing on a tonic server's side first: its words.
        let e = map_status("h:1", t, Status::cancelled("Timeout expired"), None);
        assert!(matches!(e, Error::Timeout { timeout_ms: 5, .. }), "{e:?}");
        // Any other cancellation is the server's answer.
        let e = map_status("h:1", t, Status::cancelled("shutting down"), None);
        assert!(
            matches!(
                e,
                Error::Server {
                    code: Code::Cancelled,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
