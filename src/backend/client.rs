//! A typed Triton gRPC client over tonic, with `tonic::Status` mapped into [`Error`].
//!
//! Inference always carries raw tensor contents (little-endian, row-major); Triton
//! always answers with raw contents (protocol facts §4). tonic's 4 MiB decode limit is
//! raised: a batch of 64 × 384 FP32 logits pairs is 196 KiB, but other deployments
//! return far more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, GrpcMethod, Status};

use super::codec::InferCodec;
use super::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use super::proto::{
    ModelConfig, ModelConfigRequest, ModelInferResponse, ModelMetadataRequest,
    ModelMetadataResponse, ModelReadyRequest, ModelStatistics, ModelStatisticsRequest,
    RepositoryIndexRequest, ServerLiveRequest, ServerMetadataRequest, ServerMetadataResponse,
    ServerReadyRequest, SystemSharedMemoryRegisterRequest, SystemSharedMemoryUnregisterRequest,
};
use super::request::InferRequest;
use super::security::{self, Header, Security, TlsConfig};
use super::stream::{InferStream, StreamError};
use super::whole_body::WholeBody;
use crate::error::{Error, Result};

pub use super::proto::repository_index_response::ModelIndex;

/// Largest HTTP/2 frame bertqa accepts (`SETTINGS_MAX_FRAME_SIZE`).
pub const MAX_FRAME_BYTES: u32 = 1 << 20;

/// Largest message bertqa accepts or sends (Triton's own limit is 2 GiB − 1).
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

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
}

/// How inference requests travel to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// One `ModelInfer` call per request.
    #[default]
    Unary,
    /// Requests multiplexed on one `ModelStreamInfer` call per connection
    /// ([`stream`](super::stream)); a request the stream answers with an error is asked
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
    /// The same channel for `ModelInfer` with our own codec ([`InferCodec`]), each
    /// request's body handed over whole (one write per request, [`WholeBody`]).
    infer: tonic::client::Grpc<WholeBody<Channel>>,
    /// The address as the user gave it, for messages.
    url: String,
    request_timeout: Duration,
    /// Metadata sent with every call (values are secrets).
    headers: Arc<[Header]>,
    /// Whether the channel uses TLS (for the hints in connection errors).
    tls: bool,
    /// The inference stream of this connection, under [`Transport::Stream`].
    stream: Option<Arc<StreamSlot>>,
}

/// The stream a connection's requests go on ([`Transport::Stream`]), shared by the
/// client's clones.
#[derive(Debug)]
struct StreamSlot {
    channel: Channel,
    current: std::sync::Mutex<Option<Arc<InferStream>>>,
    /// Set for good once the stream answered with an error or is not offered: the
    /// connection's requests then go unary.
    unary: AtomicBool,
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
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| Error::Config(format!("{}: invalid URL: {e}", config.url)))?
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .tcp_nodelay(true)
            // Fixed windows far above any response (64 × 384 × 2 FP32 logits is 192 KiB)
            // rather than an adaptive window: its round-trip pings and window updates
            // cost about a tenth of the client's CPU on a loopback eval, and the server
            // never waits for room.
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(32 << 20)
            // Frames of up to 1 MiB from the server instead of HTTP/2's default 16 KiB:
            // logits in the message arrive in a few large frames, read in a few system
            // calls (tensors in the messages, SQuAD-dev-sized file: `recvfrom` 3,232 →
            // 513 per run).
            .max_frame_size(MAX_FRAME_BYTES);
        if let Some(tls) = &tls {
            endpoint = security::tls_endpoint(endpoint, tls)?;
        }
        let unavailable = |message: String| Error::Unavailable {
            url: config.url.clone(),
            message,
        };
        let channel = match tokio::time::timeout(config.connect_timeout, endpoint.connect()).await {
            Ok(Ok(ch)) => ch,
            Ok(Err(e)) => {
                return Err(unavailable(security::explain(
                    &root_cause(&e),
                    tls.is_some(),
                )))
            }
            Err(_) => {
                return Err(unavailable(format!(
                    "no connection within {} ms",
                    config.connect_timeout.as_millis()
                )))
            }
        };
        let stream = (config.transport == Transport::Stream).then(|| {
            Arc::new(StreamSlot {
                channel: channel.clone(),
                current: Default::default(),
                unary: AtomicBool::new(false),
            })
        });
        let infer = tonic::client::Grpc::new(WholeBody(channel.clone()))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let grpc = GrpcInferenceServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(TritonClient {
            grpc,
            infer,
            url: config.url.clone(),
            request_timeout: config.request_timeout,
            headers: config.security.headers.clone().into(),
            tls: tls.is_some(),
            stream,
        })
    }

    /// How this client's requests travel (as configured).
    pub fn transport(&self) -> Transport {
        match self.stream {
            Some(_) => Transport::Stream,
            None => Transport::Unary,
        }
    }

    /// Whether a stream error sent this connection's requests unary for good.
    pub fn went_unary(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(|s| s.unary.load(Ordering::Relaxed))
    }

    /// The address as given by the user.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.request_timeout);
        security::apply(&self.headers, r.metadata_mut());
        r
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
        is_loopback_url(&self.url)
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

    /// Runs a prepared request, its tensors written by [`InferCodec`] straight into the
    /// send buffer: on the connection's stream under [`Transport::Stream`], else (and
    /// for a request the stream answered with an error, whose status only `ModelInfer`
    /// gives) with `ModelInfer`.
    pub async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        if let Some(slot) = self
            .stream
            .as_ref()
            .filter(|s| !s.unary.load(Ordering::Relaxed))
        {
            let stream = self.open_stream(slot);
            let error = match stream.infer(request.clone(), self.request_timeout).await {
                Ok(response) => return Ok(response),
                Err(e) => e,
            };
            match error {
                StreamError::TimedOut => {
                    return Err(Error::Timeout {
                        url: self.url.clone(),
                        timeout_ms: self.request_timeout.as_millis() as u64,
                    })
                }
                StreamError::Closed(status) if status.code() != Code::Unimplemented => {
                    return Err(self.status(status, Some(&request.binding().model)))
                }
                // Rejected (no status code on a stream), or no stream offered: this
                // request and every later one go unary.
                _ => slot.unary.store(true, Ordering::Relaxed),
            }
        }
        self.infer_unary(request).await
    }

    /// The connection's open stream, or a new one (on the current runtime).
    fn open_stream(&self, slot: &StreamSlot) -> Arc<InferStream> {
        let mut current = slot.current.lock().expect("stream lock");
        match current.as_ref() {
            Some(s) if !s.is_closed() => s.clone(),
            _ => {
                let mut metadata = tonic::metadata::MetadataMap::new();
                security::apply(&self.headers, &mut metadata);
                let s = Arc::new(InferStream::open(slot.channel.clone(), metadata));
                *current = Some(s.clone());
                s
            }
        }
    }

    /// `ModelInfer`.
    async fn infer_unary(&self, request: InferRequest) -> Result<ModelInferResponse> {
        let binding = request.binding().clone();
        let mut grpc = self.infer.clone();
        let result = match grpc.ready().await {
            Ok(()) => {
                let mut req = self.request(request);
                req.extensions_mut().insert(GrpcMethod::new(
                    "inference.GRPCInferenceService",
                    "ModelInfer",
                ));
                let path = PathAndQuery::from_static("/inference.GRPCInferenceService/ModelInfer");
                grpc.unary(req, path, InferCodec::default()).await
            }
            // As the generated client words it.
            Err(e) => Err(Status::unknown(format!("Service was not ready: {e}"))),
        };
        result
            .map(tonic::Response::into_inner)
            .map_err(|s| self.status(s, Some(&binding.model)))
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
                url: self.url.clone(),
                model: model.into(),
                state: if m.reason.is_empty() {
                    m.state.clone()
                } else {
                    format!("{}: {}", m.state, m.reason)
                },
                ready,
            },
            None => Error::ModelNotFound {
                url: self.url.clone(),
                model: model.into(),
                available: ready,
            },
        }
    }

    /// Maps any gRPC status to the library error. A call cancelled by the transport
    /// means the server closed the connection (a TLS server closes a plain-text one);
    /// TLS and header hints are added by `security::annotate`.
    pub fn status(&self, status: Status, model: Option<&str>) -> Error {
        let closed = status.code() == Code::Cancelled
            && is_transport(&status)
            && !status.message().contains("Timeout expired");
        let error = if closed {
            Error::Unavailable {
                url: self.url.clone(),
                message: format!("connection closed by the server ({})", status.message()),
            }
        } else {
            map_status(&self.url, self.request_timeout, status, model)
        };
        security::annotate(error, &self.headers, self.tls)
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

fn is_transport(status: &Status) -> bool {
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
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
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
