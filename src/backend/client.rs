//! A typed Triton gRPC client over tonic, with `tonic::Status` mapped into [`Error`]:
//! one connection, its metadata calls, and inference through the connection's
//! transport ([`Transport`]: [`UnaryTransport`] or [`StreamTransport`]).
//!
//! Inference always carries raw tensor contents (little-endian, row-major); Triton
//! always answers with raw contents (docs/design.md, protocol item 1). tonic's 4 MiB decode limit is
//! raised: a batch of 64 × 384 FP32 logits pairs is 196 KiB, but other deployments
//! return far more.

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

use super::peer::Peer;
use super::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use super::proto::{
    ModelConfig, ModelConfigRequest, ModelInferResponse, ModelMetadataRequest,
    ModelMetadataResponse, ModelReadyRequest, ModelStatistics, ModelStatisticsRequest,
    RepositoryIndexRequest, ServerLiveRequest, ServerMetadataRequest, ServerMetadataResponse,
    ServerReadyRequest, SystemSharedMemoryRegisterRequest, SystemSharedMemoryUnregisterRequest,
};
use super::request::InferRequest;
use super::security::{self, Security, TlsConfig};
use super::stream::StreamTransport;
use super::transport::{InferTransport, SendFuture};
use super::unary::UnaryTransport;
use crate::error::{Error, Result};

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

/// How inference requests travel to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// One `ModelInfer` call per request.
    #[default]
    Unary,
    /// Requests multiplexed on one `ModelStreamInfer` call per connection
    /// ([`StreamTransport`]); a request the stream answers with an error is asked
    /// again with `ModelInfer`, and so is every later one on that connection. The stream
    /// is driven by a task on the runtime of the request that opened it: send a
    /// client's requests from one runtime (a current-thread runtime drives its tasks
    /// only inside `block_on`; requests from elsewhere would wait for their deadline).
    Stream,
}

impl Transport {
    /// The name `--transport` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Unary => "unary",
            Transport::Stream => "stream",
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
/// `https://` URL (which turns TLS on).
pub fn normalize_url(url: &str) -> Result<String> {
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
        format!("{rest}:8001")
    };
    Ok(format!("{scheme}://{with_port}"))
}

/// A connected client. Cheap to clone: clones share the HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct TritonClient {
    grpc: GrpcInferenceServiceClient<Channel>,
    /// The server as every call sees it.
    peer: Arc<Peer>,
    /// How inference requests travel on this connection.
    infer: Inference,
}

/// The transport of a connection's inference requests ([`Transport`]).
#[derive(Debug, Clone)]
enum Inference {
    Unary(UnaryTransport),
    Stream(Arc<StreamTransport>),
}

impl TritonClient {
    /// Connects, bounded by the connect timeout. A server that is not there is
    /// [`Error::Unavailable`] naming the address. TLS is on with `security.tls` or an
    /// `https://` URL (see [`security`]).
    pub async fn connect(config: &ClientConfig) -> Result<TritonClient> {
        let mut uri = normalize_url(&config.url)?;
        let tls = match (&config.security.tls, uri.starts_with("https://")) {
            (Some(tls), _) => Some(tls.clone()),
            (None, true) => Some(TlsConfig::default()),
            (None, false) => None,
        };
        if tls.is_some() && !uri.starts_with("https://") {
            uri = uri.replacen("http://", "https://", 1);
        }
        let endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| Error::Config(format!("{}: invalid URL: {e}", config.url)))?
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .tcp_nodelay(true);
        // TLS connections are bertqa's own (security::GrpcTlsConnector), not tonic's.
        let connector = match &tls {
            Some(tls) => Some(security::GrpcTlsConnector::new(tls, endpoint.uri())?),
            None => None,
        };
        let unavailable = |message: String| Error::Unavailable {
            url: config.url.clone(),
            message,
        };
        let connecting = async {
            match connector {
                Some(connector) => endpoint.connect_with_connector(connector).await,
                None => endpoint.connect().await,
            }
        };
        let channel = match tokio::time::timeout(config.connect_timeout, connecting).await {
            Ok(Ok(ch)) => ch,
            Ok(Err(e)) => return Err(unavailable(security::connect_error(&e, tls.as_ref()))),
            Err(_) => {
                return Err(unavailable(format!(
                    "no connection within {} ms",
                    config.connect_timeout.as_millis()
                )))
            }
        };
        let peer = Arc::new(Peer {
            url: config.url.clone(),
            request_timeout: config.request_timeout,
            headers: config.security.headers.clone().into(),
            tls,
        });
        let infer = match config.transport {
            Transport::Unary => {
                Inference::Unary(UnaryTransport::new(channel.clone(), peer.clone()))
            }
            Transport::Stream => Inference::Stream(Arc::new(StreamTransport::new(
                channel.clone(),
                peer.clone(),
            ))),
        };
        let grpc = GrpcInferenceServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(TritonClient { grpc, peer, infer })
    }

    /// How this client's requests travel (as configured).
    pub fn transport(&self) -> Transport {
        match self.infer {
            Inference::Unary(_) => Transport::Unary,
            Inference::Stream(_) => Transport::Stream,
        }
    }

    /// Whether a stream error sent this connection's requests unary for good.
    pub fn went_unary(&self) -> bool {
        match &self.infer {
            Inference::Unary(_) => false,
            Inference::Stream(s) => s.went_unary(),
        }
    }

    /// The address as given by the user.
    pub fn url(&self) -> &str {
        &self.peer.url
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        self.peer.request(msg)
    }

    /// `ServerLive`.
    pub async fn server_live(&self) -> Result<bool> {
        let r = self
            .grpc
            .clone()
            .server_live(self.request(ServerLiveRequest {}))
            .await;
        Ok(r.map_err(|s| self.status(s, None))?.into_inner().live)
    }

    /// `ServerReady`.
    pub async fn server_ready(&self) -> Result<bool> {
        let r = self
            .grpc
            .clone()
            .server_ready(self.request(ServerReadyRequest {}))
            .await;
        Ok(r.map_err(|s| self.status(s, None))?.into_inner().ready)
    }

    /// `ModelReady` (empty version: the server's choice).
    pub async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        let req = ModelReadyRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.grpc.clone().model_ready(self.request(req)).await;
        Ok(r.map_err(|s| self.status(s, None))?.into_inner().ready)
    }

    /// `ServerMetadata`: name, version, extensions.
    pub async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        let r = self
            .grpc
            .clone()
            .server_metadata(self.request(ServerMetadataRequest {}))
            .await;
        Ok(r.map_err(|s| self.status(s, None))?.into_inner())
    }

    /// `RepositoryIndex`: every model version and its state.
    pub async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        let req = RepositoryIndexRequest {
            repository_name: String::new(),
            ready: false,
        };
        let r = self.grpc.clone().repository_index(self.request(req)).await;
        Ok(r.map_err(|s| self.status(s, None))?.into_inner().models)
    }

    /// `ModelMetadata`. An unknown or unready model becomes [`Error::ModelNotFound`] /
    /// [`Error::ModelNotReady`] listing the models that are ready.
    pub async fn model_metadata(
        &self,
        model: &str,
        version: &str,
    ) -> Result<ModelMetadataResponse> {
        let req = ModelMetadataRequest {
            name: model.into(),
            version: version.into(),
        };
        match self.grpc.clone().model_metadata(self.request(req)).await {
            Ok(r) => Ok(r.into_inner()),
            Err(s) => Err(self.model_error(s, model).await),
        }
    }

    /// `ModelConfig`.
    pub async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        let req = ModelConfigRequest {
            name: model.into(),
            version: version.into(),
        };
        match self.grpc.clone().model_config(self.request(req)).await {
            Ok(r) => Ok(r.into_inner().config.unwrap_or_default()),
            Err(s) => Err(self.model_error(s, model).await),
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
        let req = SystemSharedMemoryRegisterRequest {
            name: name.into(),
            key: key.into(),
            offset: 0,
            byte_size,
        };
        let r = self
            .grpc
            .clone()
            .system_shared_memory_register(self.request(req))
            .await;
        r.map(|_| ()).map_err(|s| self.status(s, None))
    }

    /// `SystemSharedMemoryUnregister` of one region (never every region: others may
    /// belong to other clients).
    pub async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        debug_assert!(!name.is_empty(), "an empty name unregisters every region");
        let req = SystemSharedMemoryUnregisterRequest { name: name.into() };
        let r = self
            .grpc
            .clone()
            .system_shared_memory_unregister(self.request(req))
            .await;
        r.map(|_| ()).map_err(|s| self.status(s, None))
    }

    /// `ModelStatistics` for one model (empty name: all models).
    pub async fn model_statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Vec<ModelStatistics>> {
        let req = ModelStatisticsRequest {
            name: model.into(),
            version: version.into(),
        };
        match self.grpc.clone().model_statistics(self.request(req)).await {
            Ok(r) => Ok(r.into_inner().model_stats),
            Err(s) if model.is_empty() => Err(self.status(s, None)),
            Err(s) => Err(self.model_error(s, model).await),
        }
    }

    /// Runs a prepared request on this connection's transport ([`Transport`]).
    pub async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        self.send(request).await
    }

    /// Maps a status from a model-specific call; for "unknown model" style answers it
    /// asks the repository which models exist and are ready.
    async fn model_error(&self, status: Status, model: &str) -> Error {
        let msg = status.message().to_ascii_lowercase();
        let about_model = matches!(
            status.code(),
            Code::NotFound | Code::InvalidArgument | Code::Unavailable
        ) && (msg.contains("unknown model")
            || msg.contains("not found")
            || msg.contains("is not ready")
            || msg.contains("no version is available"));
        if !about_model {
            return self.status(status, Some(model));
        }
        let Ok(index) = self.repository_index().await else {
            return self.status(status, Some(model));
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

impl InferTransport for TritonClient {
    fn send(&self, request: InferRequest) -> SendFuture<'_> {
        match &self.infer {
            Inference::Unary(t) => t.send(request),
            Inference::Stream(t) => t.send(request),
        }
    }
}

/// Whether `url` (as [`normalize_url`] accepts it) names a loopback host.
pub fn is_loopback_url(url: &str) -> bool {
    let Ok(uri) = normalize_url(url) else {
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
            normalize_url("localhost:8001").unwrap(),
            "http://localhost:8001"
        );
        assert_eq!(
            normalize_url("http://10.0.0.1:9").unwrap(),
            "http://10.0.0.1:9"
        );
        assert_eq!(normalize_url("triton").unwrap(), "http://triton:8001");
        assert_eq!(normalize_url("http://h:1/").unwrap(), "http://h:1");
        assert_eq!(normalize_url("[::1]:8001").unwrap(), "http://[::1]:8001");
        assert_eq!(
            normalize_url("https://triton.example:443").unwrap(),
            "https://triton.example:443"
        );
        assert_eq!(normalize_url("https://h").unwrap(), "https://h:8001");
        assert!(normalize_url("ftp://h:1").is_err());
        assert!(normalize_url("").is_err());
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
