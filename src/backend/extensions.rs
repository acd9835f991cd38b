//! What a server offers beyond the Open Inference Protocol's core.
//!
//! The core, which every server of the protocol has (Triton, MLServer, KServe's model
//! server): health, server metadata, model metadata, model ready, inference. Triton adds
//! extensions (model configuration, repository index, statistics, system shared memory,
//! binary tensor data over HTTP) and lists them in its server metadata. bertqa uses an
//! extension when the server lists it or answers its call, and leaves it out otherwise.
//!
//! How an answer is read (one rule for every call, in [`absent`] and [`no_server`]):
//! - an *extension* call answered UNIMPLEMENTED (gRPC; over HTTP a 404 that is not in
//!   the protocol's `{"error": …}` form: no such route, read as UNIMPLEMENTED) means the
//!   extension is absent, even when the server lists it (KServe lists
//!   `model_repository_extension` and answers its index with 404);
//! - the same answer to a *core* call means that the URL does not reach a server of the
//!   protocol ([`Error::NoServer`]);
//! - any other failure is an error of its own.

use serde::Serialize;

use super::proto::ServerMetadataResponse;
use crate::error::{Code, Error, Result};

/// Triton's HTTP binary tensor data extension (tensors as raw bytes after a JSON header).
pub(crate) const BINARY_TENSOR_DATA: &str = "binary_tensor_data";

/// A server as its metadata (`ServerMetadata`, `GET /v2`) describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    /// `triton`, `mlserver`, `kserve`, …
    pub name: String,
    pub version: String,
    /// The extensions it lists (it may answer others, or not answer some of these).
    pub extensions: Vec<String>,
}

impl From<ServerMetadataResponse> for ServerInfo {
    fn from(m: ServerMetadataResponse) -> Self {
        ServerInfo {
            name: m.name,
            version: m.version,
            extensions: m.extensions,
        }
    }
}

impl ServerInfo {
    /// Whether the server is NVIDIA Triton.
    pub fn is_triton(&self) -> bool {
        self.name == "triton"
    }

    /// Whether the server lists `extension`.
    pub fn lists(&self, extension: &str) -> bool {
        self.extensions.iter().any(|e| e == extension)
    }

    /// How messages name the server: `Triton`, or its name and version as its metadata
    /// gives them (`mlserver 1.7.1`).
    pub fn label(&self) -> String {
        if self.is_triton() {
            "Triton".into()
        } else if self.name.is_empty() {
            "the server".into()
        } else if self.version.is_empty() {
            self.name.clone()
        } else {
            format!("{} {}", self.name, self.version)
        }
    }
}

/// Whether `error`, the answer to an extension call, says that the server does not
/// have the extension: UNIMPLEMENTED (over HTTP, a 404 that is not in the protocol's
/// error form: a route the server does not have). NOT_FOUND is an answer about
/// something the call named (a model, a shared memory region).
pub(crate) fn absent(error: &Error) -> bool {
    matches!(
        error,
        Error::Server {
            code: Code::Unimplemented,
            ..
        }
    )
}

/// An extension call's answer: `None` when the extension is absent ([`absent`]).
pub(crate) fn optional<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A core call's failure, read: an answer of "no such call" ([`absent`]'s rule) is
/// [`Error::NoServer`] (with what the call was routed by, `routed_by`); anything else
/// stays as it is.
pub(crate) fn no_server(error: Error, call: &str, routed_by: Option<&str>) -> Error {
    if !absent(&error) {
        return error;
    }
    match error {
        Error::Server {
            url,
            code,
            http,
            message,
            ..
        } => Error::NoServer {
            url,
            routed_by: routed_by.map(str::to_string),
            call: call.to_string(),
            code,
            http,
            message,
        },
        e => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::error::tests::server;

    #[test]
    fn a_missing_route_is_an_absent_extension_a_missing_model_is_not() {
        let route = server(Code::Unimplemented, Some(404), "Not Found");
        assert!(absent(&route));
        let model = server(Code::NotFound, Some(404), "Model oracle not found");
        assert!(!absent(&model));
        assert!(absent(&server(
            Code::Unimplemented,
            None,
            "Method not found!"
        )));
        let region = server(
            Code::NotFound,
            None,
            "Unable to find shared memory region: 'r'",
        );
        assert!(!absent(&region));
        assert!(!absent(&server(Code::Internal, None, "boom")));
        assert!(!absent(&Error::Config("not found".into())));
        let r: Result<u8> = Err(server(Code::Internal, Some(500), "boom"));
        assert!(optional(r).is_err());
        assert_eq!(optional(Err::<u8, _>(route)).unwrap(), None);
    }

    #[test]
    fn a_core_call_without_its_route_names_the_call() {
        let e = no_server(
            server(Code::Unimplemented, Some(404), "Not Found"),
            "GET /v2/health/ready",
            Some("Host h"),
        );
        assert!(matches!(&e, Error::NoServer { call, .. } if call == "GET /v2/health/ready"));
        assert!(
            e.to_string()
                .contains("at h:1 (Host h): GET /v2/health/ready answered"),
            "{e}"
        );
        let e = no_server(server(Code::Internal, None, "boom"), "ModelInfer", None);
        assert!(matches!(e, Error::Server { .. }));
    }

    #[test]
    fn servers_are_named_by_their_metadata() {
        let info = |name: &str, version: &str| ServerInfo {
            name: name.into(),
            version: version.into(),
            extensions: vec![],
        };
        assert_eq!(info("triton", "2.51.0").label(), "Triton");
        assert_eq!(info("mlserver", "1.7.1").label(), "mlserver 1.7.1");
        assert_eq!(info("kserve", "").label(), "kserve");
        assert_eq!(info("", "").label(), "the server");
    }
}
