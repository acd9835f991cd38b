//! What every call to one server shares: its address for messages, the deadline of each
//! call, the headers sent with each, and the mapping of its failures into [`Error`]s
//! with the hints a user can act on.

use std::sync::Arc;
use std::time::Duration;

use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use super::extensions::ServerInfo;
use super::security::{self, Header, TlsConfig};
use super::status::{is_timeout, is_transport, map_status};
use crate::error::{Error, Unreachable};

/// One server as the calls to it see it. Cheap to share (`Arc`).
#[derive(Debug)]
pub(crate) struct Peer {
    /// The address as the user gave it, for messages.
    pub url: String,
    /// Deadline of each call.
    pub request_timeout: Duration,
    /// Metadata sent with every call (values are secrets).
    pub headers: Arc<[Header]>,
    /// The channel's TLS configuration, if it uses TLS (for the messages of connection
    /// errors).
    pub tls: Option<TlsConfig>,
    /// The server's metadata, asked once (`TritonClient::server_info`).
    pub server: tokio::sync::OnceCell<ServerInfo>,
    /// What an ingress routes the calls by when it is not the URL's host, as sent
    /// (`Host NAME`, `:authority NAME`), for messages.
    pub routed_by: Option<String>,
}

impl Peer {
    /// `msg` as a call with this server's deadline and headers.
    pub(crate) fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.request_timeout);
        security::apply(&self.headers, r.metadata_mut());
        r
    }

    /// The headers as call metadata (for a stream's opening).
    pub(crate) fn metadata(&self) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        security::apply(&self.headers, &mut metadata);
        metadata
    }

    /// The deadline passed, as an error.
    pub(crate) fn timeout(&self) -> Error {
        Error::Timeout {
            url: self.url.clone(),
            timeout_ms: self.request_timeout.as_millis() as u64,
        }
    }

    /// Maps any gRPC status to the library error. A call cancelled by the transport
    /// means the server closed the connection (a TLS server closes a plain-text one);
    /// TLS and header hints are added by `security::annotate`.
    pub(crate) fn error(&self, status: Status, model: Option<&str>) -> Error {
        let closed =
            status.code() == Code::Cancelled && is_transport(&status) && !is_timeout(&status);
        let error = if closed {
            Error::unavailable(
                &self.url,
                Unreachable::Closed,
                format!("connection closed by the server ({})", status.message()),
            )
        } else {
            map_status(&self.url, self.request_timeout, status, model)
        };
        security::annotate(error, &self.headers, self.tls.as_ref()).answered_by(self.who())
    }

    /// The server's name for messages when it is known not to be Triton.
    pub(crate) fn who(&self) -> Option<String> {
        let info = self.server.get()?;
        (!info.is_triton()).then(|| info.label())
    }
}
