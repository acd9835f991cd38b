//! A typed Triton client speaking either of Triton's protocols ([`Protocol`]): one
//! connection (gRPC, `grpc.rs`) or one server's pool of HTTP/1.1 connections (KServe v2
//! REST, `http/`), its metadata calls returning the gRPC proto messages whatever the
//! protocol, and inference through the connection's transport.
//!
//! Inference always carries raw tensor contents (little-endian, row-major); Triton
//! always answers with raw contents (docs/design.md, protocol item 1), in gRPC's
//! `raw_*_contents` or HTTP's binary tensor data.

use std::sync::Arc;
use std::time::Duration;

use tonic::Status;

use super::grpc::GrpcConn;
use super::http::{HttpClient, HttpTransport};
use super::peer::Peer;
use super::proto::{
    ModelConfig, ModelInferResponse, ModelMetadataResponse, ModelStatistics, ServerMetadataResponse,
};
use super::request::InferRequest;
use super::security::{Security, TlsConfig};
use super::transport::{InferTransport, SendFuture};
use crate::error::{Error, Result};

pub use super::grpc::Transport;
pub use super::proto::repository_index_response::ModelIndex;
pub use super::status::map_status;
pub use super::transport::MAX_MESSAGE_BYTES;

/// How to reach a server.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `HOST:PORT`, with or without `http://`.
    pub url: String,
    pub connect_timeout: Duration,
    /// Deadline of each call.
    pub request_timeout: Duration,
    /// TLS and the metadata (headers) sent with every call.
    pub security: Security,
    /// How inference requests travel.
    pub transport: Transport,
    /// Which of Triton's protocols the server is spoken to in.
    pub protocol: Protocol,
}

/// Which of Triton's two protocols a client speaks (perf_analyzer's `-i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// KServe v2 over gRPC (Triton's port 8001 by default).
    #[default]
    Grpc,
    /// KServe v2 over HTTP/REST with the binary tensor data extension (port 8000).
    Http,
}

impl Protocol {
    /// The name `--protocol` takes, and reports print.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::Http => "http",
        }
    }

    /// Triton's default port for the protocol, used when a URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::Grpc => 8001,
            Protocol::Http => 8000,
        }
    }
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            url: "localhost:8001".into(),
            connect_timeout: Duration::from_millis(5_000),
            request_timeout: Duration::from_millis(60_000),
            security: Security::default(),
            transport: Transport::Unary,
            protocol: Protocol::Grpc,
        }
    }
}

/// Turns a user URL into an `http://host:port` URI, or `https://host:port` for an
/// `https://` URL (which turns TLS on). A URL without a port gets the protocol's
/// default port ([`Protocol::default_port`]).
pub fn normalize_url(url: &str, protocol: Protocol) -> Result<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let mut scheme = "http";
    let rest = if let Some(r) = trimmed.strip_prefix("http://") {
        r
    } else if let Some(r) = trimmed.strip_prefix("https://") {
        scheme = "https";
        r
    } else if let Some((scheme, _)) = trimmed.split_once("://") {
        return Err(Error::Config(format!(
            "{url}: unsupported scheme {scheme:?} (use HOST:PORT or http://HOST:PORT)"
        )));
    } else {
        trimmed
    };
    if rest.is_empty() {
        return Err(Error::Config("empty server URL".into()));
    }
    let has_port = rest.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.ends_with('[') && port.parse::<u16>().is_ok()
    });
    let with_port = if has_port {
        rest.to_string()
    } else {
        format!("{rest}:{}", protocol.default_port())
    };
    Ok(format!("{scheme}://{with_port}"))
}

/// A connected client. Cheap to clone: clones share the connection (gRPC) or the
/// connection pool (HTTP).
#[derive(Debug, Clone)]
pub struct TritonClient {
    /// The server as every call sees it.
    peer: Arc<Peer>,
    conn: Conn,
}

/// The connection in one of the protocols. Made once per connection, never per
/// request: the sizes of the variants do not matter.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
enum Conn {
    Grpc(GrpcConn),
    Http(HttpTransport),
}

/// The hint for a gRPC client whose server answers in HTTP/1.1.
const HTTP_PORT_HINT: &str = "the server answers HTTP/1.1, not gRPC: this looks like \
     Triton's HTTP port; use `Protocol::Http`, or gRPC's port (usually 8001)";

/// Dispatches a call to the protocol's half; a gRPC failure gets the wrong-port check.
macro_rules! call {
    ($self:ident, $c:ident => $call:expr) => {
        match &$self.conn {
            Conn::Grpc($c) => {
                let r = $call.await;
                $self.grpc_checked(r).await
            }
            Conn::Http(t) => {
                let $c = t.client();
                $call.await
            }
        }
    };
}

impl TritonClient {
    /// Connects, bounded by the connect timeout, in `config.protocol`. A server that
    /// is not there is [`Error::Unavailable`] naming the address. TLS is on with
    /// `security.tls` or an `https://` URL (see [`security`](super::security)).
    pub async fn connect(config: &ClientConfig) -> Result<TritonClient> {
        let mut uri = normalize_url(&config.url, config.protocol)?;
        let tls = match (&config.security.tls, uri.starts_with("https://")) {
            (Some(tls), _) => Some(tls.clone()),
            (None, true) => Some(TlsConfig::default()),
            (None, false) => None,
        };
        if tls.is_some() && !uri.starts_with("https://") {
            uri = uri.replacen("http://", "https://", 1);
        }
        let peer = Arc::new(Peer {
            url: config.url.clone(),
            request_timeout: config.request_timeout,
            headers: config.security.headers.clone().into(),
            tls: tls.clone(),
        });
        let conn = match config.protocol {
            Protocol::Grpc => {
                let conn = GrpcConn::connect(
                    uri.clone(),
                    config.connect_timeout,
                    config.transport,
                    tls.as_ref(),
                    peer.clone(),
                )
                .await;
                match conn {
                    Ok(conn) => Conn::Grpc(conn),
                    Err(e) => return Err(http_port_check(e, &peer, &uri).await),
                }
            }
            Protocol::Http => {
                let rest = HttpClient::connect(&uri, config.connect_timeout, peer.clone()).await?;
                Conn::Http(HttpTransport::new(rest))
            }
        };
        Ok(TritonClient { peer, conn })
    }

    /// The protocol this client speaks.
    pub fn protocol(&self) -> Protocol {
        match self.conn {
            Conn::Grpc(_) => Protocol::Grpc,
            Conn::Http(_) => Protocol::Http,
        }
    }

    /// How this client's requests travel (as configured; over HTTP every request is
    /// one POST, reported as [`Transport::Unary`]).
    pub fn transport(&self) -> Transport {
        match &self.conn {
            Conn::Grpc(c) => c.transport(),
            Conn::Http(_) => Transport::Unary,
        }
    }

    /// Whether a stream error sent this connection's requests unary for good.
    pub fn went_unary(&self) -> bool {
        match &self.conn {
            Conn::Grpc(c) => c.went_unary(),
            Conn::Http(_) => false,
        }
    }

    /// The address as given by the user.
    pub fn url(&self) -> &str {
        &self.peer.url
    }

    /// A gRPC call's result, its failure checked for a server that answers HTTP/1.1
    /// (a wrong port).
    async fn grpc_checked<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Ok(v) => Ok(v),
            Err(e) => {
                let uri = normalize_url(&self.peer.url, Protocol::Grpc)?;
                Err(http_port_check(e, &self.peer, &uri).await)
            }
        }
    }

    /// `ServerLive` (`GET /v2/health/live`).
    pub async fn server_live(&self) -> Result<bool> {
        call!(self, c => c.server_live())
    }

    /// `ServerReady` (`GET /v2/health/ready`).
    pub async fn server_ready(&self) -> Result<bool> {
        call!(self, c => c.server_ready())
    }

    /// `ModelReady` (empty version: the server's choice).
    pub async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        call!(self, c => c.model_ready(model, version))
    }

    /// `ServerMetadata`: name, version, extensions.
    pub async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        call!(self, c => c.server_metadata())
    }

    /// `RepositoryIndex`: every model version and its state.
    pub async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        call!(self, c => c.repository_index())
    }

    /// `ModelMetadata`. An unknown or unready model becomes [`Error::ModelNotFound`] /
    /// [`Error::ModelNotReady`] listing the models that are ready.
    pub async fn model_metadata(
        &self,
        model: &str,
        version: &str,
    ) -> Result<ModelMetadataResponse> {
        let r = call!(self, c => c.model_metadata(model, version));
        match r {
            Ok(m) => Ok(m),
            Err(e) => Err(self.model_error(e, model).await),
        }
    }

    /// `ModelConfig`.
    pub async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        let r = call!(self, c => c.model_config(model, version));
        match r {
            Ok(m) => Ok(m),
            Err(e) => Err(self.model_error(e, model).await),
        }
    }

    /// Whether the server's host is this machine by a loopback address (`localhost`,
    /// 127.0.0.0/8, `::1`), where a shared memory region can reach it.
    pub fn is_loopback(&self) -> bool {
        is_loopback_url(&self.peer.url)
    }

    /// `SystemSharedMemoryRegister`: `byte_size` bytes of the POSIX shared memory object
    /// `key` (a `shm_open` name, `/…`) under `name`. The server opens and maps the
    /// object now and keeps the mapping until the region is unregistered.
    pub async fn register_system_shared_memory(
        &self,
        name: &str,
        key: &str,
        byte_size: u64,
    ) -> Result<()> {
        call!(self, c => c.register_system_shared_memory(name, key, byte_size))
    }

    /// `SystemSharedMemoryUnregister` of one region (never every region: others may
    /// belong to other clients).
    pub async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        debug_assert!(!name.is_empty(), "an empty name unregisters every region");
        call!(self, c => c.unregister_system_shared_memory(name))
    }

    /// `ModelStatistics` for one model (empty name: all models).
    pub async fn model_statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Vec<ModelStatistics>> {
        let r = call!(self, c => c.model_statistics(model, version));
        match r {
            Ok(s) => Ok(s),
            Err(e) if model.is_empty() => Err(e),
            Err(e) => Err(self.model_error(e, model).await),
        }
    }

    /// Runs a prepared request on this connection's transport.
    pub async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        self.send(request).await
    }

    /// A model-specific call's error; for "unknown model" style answers it asks the
    /// repository which models exist and are ready.
    async fn model_error(&self, error: Error, model: &str) -> Error {
        if !about_model(&error) {
            return error;
        }
        let Ok(index) = self.repository_index().await else {
            return error;
        };
        let ready: Vec<String> = ready_models(&index);
        match index.iter().find(|m| m.name == model) {
            Some(m) => Error::ModelNotReady {
                url: self.peer.url.clone(),
                model: model.into(),
                state: if m.reason.is_empty() {
                    m.state.clone()
                } else {
                    format!("{}: {}", m.state, m.reason)
                },
                ready,
            },
            None => Error::ModelNotFound {
                url: self.peer.url.clone(),
                model: model.into(),
                available: ready,
            },
        }
    }

    /// Maps any gRPC status to the library error (see [`Peer::error`]).
    pub fn status(&self, status: Status, model: Option<&str>) -> Error {
        self.peer.error(status, model)
    }
}

/// Whether a model-specific call failed because of the model: an unknown model, one
/// not ready or without the version asked for (NOT_FOUND, INVALID_ARGUMENT or
/// UNAVAILABLE answers saying so, in either protocol).
fn about_model(error: &Error) -> bool {
    let message = match error {
        Error::Server { code, message, .. } => {
            let name = code.split_whitespace().next().unwrap_or("");
            if !matches!(name, "NotFound" | "InvalidArgument") {
                return false;
            }
            message
        }
        Error::Unavailable { message, .. } => message,
        _ => return false,
    };
    let msg = message.to_ascii_lowercase();
    msg.contains("unknown model")
        || msg.contains("not found")
        || msg.contains("is not ready")
        || msg.contains("no version is available")
}

/// A gRPC connection failure, checked for a server that answers HTTP/1.1 at `uri`
/// (Triton's HTTP port given where the gRPC one was meant): when one answers, the
/// error says so and names the flag to use. Refused connections and TLS are left as
/// they are.
async fn http_port_check(error: Error, peer: &Arc<Peer>, uri: &str) -> Error {
    let Error::Unavailable { url, message } = &error else {
        return error;
    };
    let lower = message.to_ascii_lowercase();
    if peer.tls.is_some() || lower.contains("refused") || lower.contains("no connection within") {
        return error;
    }
    let probe_timeout = peer.request_timeout.min(Duration::from_secs(2));
    let Ok(probe) = HttpClient::new(uri, probe_timeout, peer.clone()) else {
        return error;
    };
    let answered = tokio::time::timeout(probe_timeout, probe.server_live()).await;
    match answered {
        Ok(Ok(_)) => Error::Unavailable {
            url: url.clone(),
            message: HTTP_PORT_HINT.to_string(),
        },
        _ => error,
    }
}

impl InferTransport for TritonClient {
    fn send(&self, request: InferRequest) -> SendFuture<'_> {
        match &self.conn {
            Conn::Grpc(c) => c.send(request),
            Conn::Http(t) => t.send(request),
        }
    }
}

/// Whether `url` (as [`normalize_url`] accepts it) names a loopback host.
pub fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = normalize_url(url, Protocol::Grpc) else {
        return false;
    };
    let authority = uri.split_once("://").map_or(uri.as_str(), |(_, rest)| rest);
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Names of ready models, sorted and de-duplicated across versions.
pub fn ready_models(index: &[ModelIndex]) -> Vec<String> {
    let mut v: Vec<String> = index
        .iter()
        .filter(|m| m.state == "READY")
        .map(|m| m.name.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_and_without_scheme() {
        assert_eq!(
            normalize_url("localhost:8001", Protocol::Grpc).unwrap(),
            "http://localhost:8001"
        );
        assert_eq!(
            normalize_url("http://10.0.0.1:9", Protocol::Grpc).unwrap(),
            "http://10.0.0.1:9"
        );
        assert_eq!(
            normalize_url("triton", Protocol::Grpc).unwrap(),
            "http://triton:8001"
        );
        assert_eq!(
            normalize_url("http://h:1/", Protocol::Grpc).unwrap(),
            "http://h:1"
        );
        assert_eq!(
            normalize_url("[::1]:8001", Protocol::Grpc).unwrap(),
            "http://[::1]:8001"
        );
        assert_eq!(
            normalize_url("https://triton.example:443", Protocol::Grpc).unwrap(),
            "https://triton.example:443"
        );
        assert_eq!(
            normalize_url("https://h", Protocol::Grpc).unwrap(),
            "https://h:8001"
        );
        assert_eq!(
            normalize_url("triton", Protocol::Http).unwrap(),
            "http://triton:8000"
        );
        assert_eq!(
            normalize_url("http://h:8001", Protocol::Http).unwrap(),
            "http://h:8001"
        );
        assert!(normalize_url("ftp://h:1", Protocol::Grpc).is_err());
        assert!(normalize_url("", Protocol::Grpc).is_err());
    }

    #[test]
    fn loopback_hosts() {
        for url in [
            "localhost:8001",
            "http://LOCALHOST",
            "127.0.0.1:18521",
            "http://127.3.2.1:1/",
            "[::1]:8001",
            "https://[::1]",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "10.0.0.1:8001",
            "example.com:8001",
            "http://[::2]:8001",
            "localhost.example.com",
            "ftp://127.0.0.1",
            "",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
