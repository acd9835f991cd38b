//! A typed Triton client speaking either of Triton's protocols ([`Protocol`]): one
//! connection (gRPC, `grpc.rs`) or one server's pool of HTTP/1.1 connections (KServe v2
//! REST, `http/`). The two halves each implement the protocol face (`ServerApi`,
//! `api.rs`) for the calls other than inference, which return the gRPC proto messages
//! whatever the protocol; the client holds one half (`Conn`) and passes each call to it
//! with a `match`.
//!
//! Inference always carries raw tensor contents (little-endian, row-major); Triton
//! always answers with raw contents (docs/design.md, protocol item 1), in gRPC's
//! `raw_*_contents` or HTTP's binary tensor data.

use std::sync::Arc;
use std::time::Duration;

use super::api::ServerApi;
use super::extensions::{self, no_server, ServerInfo};
use super::grpc::GrpcConn;
use super::http::{HttpClient, HttpTransport};
use super::peer::Peer;
use super::proto::{
    ModelConfig, ModelInferResponse, ModelMetadataResponse, ModelStatistics, ServerMetadataResponse,
};
use super::protocol::Protocol;
use super::request::InferRequest;
use super::security::{Security, TlsConfig};
use super::url::{is_loopback_url, normalize_url};
use crate::error::{Code, Error, Result, Unreachable};

pub use super::grpc::GrpcCall;
pub use super::proto::repository_index_response::ModelIndex;

/// The models a server lists ([`TritonClient::list_models`]), and from where.
#[derive(Debug, Clone)]
pub struct ModelListing {
    // Read by the `models` command alone.
    pub source: Listing,
    pub models: Vec<ModelIndex>,
}

/// Where a server's list of models comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Listing {
    /// Triton's repository index (`RepositoryIndex`): every version and its state.
    RepositoryIndex,
    /// KServe's model list (`GET /v2/models`): names only, each state asked.
    ModelList,
}

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
    /// Which gRPC call carries inference requests (over HTTP every request is one
    /// POST, whatever this says).
    pub transport: GrpcCall,
    /// Which of Triton's protocols the server is spoken to in.
    pub protocol: Protocol,
    /// The name a server or ingress routes by: the `:authority` of every gRPC call and
    /// the `Host` of every HTTP request (`None`: the URL's host and port). TLS still
    /// checks the certificate against `TlsConfig::target_name` or the URL's host.
    pub authority: Option<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            url: "localhost:8001".into(),
            connect_timeout: Duration::from_millis(5_000),
            request_timeout: Duration::from_millis(60_000),
            security: Security::default(),
            transport: GrpcCall::Unary,
            protocol: Protocol::Grpc,
            authority: None,
        }
    }
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

impl Conn {
    /// Sends an inference request on the connection's transport.
    async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        match self {
            Conn::Grpc(c) => c.infer(request).await,
            Conn::Http(t) => t.send(request).await,
        }
    }
}

impl ServerApi for Conn {
    async fn server_live(&self) -> Result<bool> {
        match self {
            Conn::Grpc(c) => c.server_live().await,
            Conn::Http(t) => t.client().server_live().await,
        }
    }

    async fn server_ready(&self) -> Result<bool> {
        match self {
            Conn::Grpc(c) => c.server_ready().await,
            Conn::Http(t) => t.client().server_ready().await,
        }
    }

    async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        match self {
            Conn::Grpc(c) => c.model_ready(model, version).await,
            Conn::Http(t) => t.client().model_ready(model, version).await,
        }
    }

    async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        match self {
            Conn::Grpc(c) => c.server_metadata().await,
            Conn::Http(t) => t.client().server_metadata().await,
        }
    }

    async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        match self {
            Conn::Grpc(c) => c.repository_index().await,
            Conn::Http(t) => t.client().repository_index().await,
        }
    }

    async fn model_metadata(&self, model: &str, version: &str) -> Result<ModelMetadataResponse> {
        match self {
            Conn::Grpc(c) => c.model_metadata(model, version).await,
            Conn::Http(t) => t.client().model_metadata(model, version).await,
        }
    }

    async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        match self {
            Conn::Grpc(c) => c.model_config(model, version).await,
            Conn::Http(t) => t.client().model_config(model, version).await,
        }
    }

    async fn model_statistics(&self, model: &str, version: &str) -> Result<Vec<ModelStatistics>> {
        match self {
            Conn::Grpc(c) => c.model_statistics(model, version).await,
            Conn::Http(t) => t.client().model_statistics(model, version).await,
        }
    }

    async fn register_system_shared_memory(
        &self,
        name: &str,
        key: &str,
        byte_size: u64,
    ) -> Result<()> {
        match self {
            Conn::Grpc(c) => c.register_system_shared_memory(name, key, byte_size).await,
            Conn::Http(t) => {
                let c = t.client();
                c.register_system_shared_memory(name, key, byte_size).await
            }
        }
    }

    async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        match self {
            Conn::Grpc(c) => c.unregister_system_shared_memory(name).await,
            Conn::Http(t) => t.client().unregister_system_shared_memory(name).await,
        }
    }
}

impl TritonClient {
    /// Connects, bounded by the connect timeout, in `config.protocol`. A server that
    /// is not there is [`Error::Unavailable`] naming the address. TLS is on with
    /// `security.tls` or an `https://` URL (see `security`).
    pub async fn connect(config: &ClientConfig) -> Result<TritonClient> {
        Self::open(config, false).await
    }

    /// A client that connects on its first call: for an endpoint of a pool that was
    /// down at start (its health check lets it join when it comes up).
    pub(crate) async fn connect_lazy(config: &ClientConfig) -> Result<TritonClient> {
        Self::open(config, true).await
    }

    async fn open(config: &ClientConfig, lazy: bool) -> Result<TritonClient> {
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
            server: Default::default(),
            routed_by: routed_by(config)?,
        });
        let conn = match config.protocol {
            Protocol::Grpc => Conn::Grpc(
                GrpcConn::connect(
                    uri,
                    config.authority.as_deref(),
                    config.connect_timeout,
                    config.transport,
                    tls.as_ref(),
                    peer.clone(),
                    lazy,
                )
                .await?,
            ),
            Protocol::Http => {
                let authority = config.authority.as_deref();
                let timeout = config.connect_timeout;
                let rest = match lazy {
                    true => HttpClient::new(&uri, authority, timeout, peer.clone())?,
                    false => HttpClient::connect(&uri, authority, timeout, peer.clone()).await?,
                };
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

    /// Which gRPC call carries this client's inference requests (as configured; over
    /// HTTP every request is one POST, reported as [`GrpcCall::Unary`]).
    pub fn transport(&self) -> GrpcCall {
        match &self.conn {
            Conn::Grpc(c) => c.call(),
            Conn::Http(_) => GrpcCall::Unary,
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

    /// `ServerLive` (`GET /v2/health/live`).
    pub async fn server_live(&self) -> Result<bool> {
        let answer = self.conn.server_live().await;
        answer.map_err(|e| no_server(e, "server liveness", self.routed_by()))
    }

    /// `ServerReady` (`GET /v2/health/ready`).
    pub async fn server_ready(&self) -> Result<bool> {
        let answer = self.conn.server_ready().await;
        answer.map_err(|e| no_server(e, "server readiness", self.routed_by()))
    }

    /// `ModelReady` (empty version: the server's choice).
    pub async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        let answer = self.conn.model_ready(model, version).await;
        answer.map_err(|e| no_server(e, "model readiness", self.routed_by()))
    }

    /// `ServerMetadata`: name, version, extensions.
    pub async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        let answer = self.conn.server_metadata().await;
        answer.map_err(|e| no_server(e, "server metadata", self.routed_by()))
    }

    /// The HTTP client of a connection over HTTP.
    pub(crate) fn http(&self) -> Option<&super::http::HttpClient> {
        match &self.conn {
            Conn::Http(t) => Some(t.client()),
            Conn::Grpc(_) => None,
        }
    }

    /// The server's metadata, asked once per connection ([`Self::server_metadata`]).
    pub async fn server_info(&self) -> Result<&ServerInfo> {
        self.peer
            .server
            .get_or_try_init(|| async { self.server_metadata().await.map(ServerInfo::from) })
            .await
    }

    /// `RepositoryIndex`: every model version and its state (as the server wrote it).
    pub async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        self.conn.repository_index().await
    }

    /// The models the server lists: its repository index, each state normalised
    /// (`normalize_state`); without one, over HTTP, its model list (KServe's `GET
    /// /v2/models`), each model's state asked (`READY` or `UNAVAILABLE`, no version);
    /// `None` when it lists neither (over gRPC, KServe's model server has no listing).
    pub async fn list_models(&self) -> Result<Option<ModelListing>> {
        if let Some(mut models) = extensions::optional(self.repository_index().await)? {
            for m in &mut models {
                m.state = normalize_state(&m.state);
            }
            return Ok(Some(ModelListing {
                source: Listing::RepositoryIndex,
                models,
            }));
        }
        let Conn::Http(t) = &self.conn else {
            return Ok(None);
        };
        let Some(names) = extensions::optional(t.client().model_names().await)? else {
            return Ok(None);
        };
        let mut models = Vec::with_capacity(names.len());
        for name in names {
            let ready = self.model_ready(&name, "").await?;
            models.push(ModelIndex {
                name,
                version: String::new(),
                state: if ready { "READY" } else { "UNAVAILABLE" }.into(),
                reason: String::new(),
            });
        }
        Ok(Some(ModelListing {
            source: Listing::ModelList,
            models,
        }))
    }

    /// `ModelMetadata`. An unknown or unready model becomes [`Error::ModelNotFound`] /
    /// [`Error::ModelNotReady`] listing the models that are ready.
    pub async fn model_metadata(
        &self,
        model: &str,
        version: &str,
    ) -> Result<ModelMetadataResponse> {
        match self.conn.model_metadata(model, version).await {
            Ok(m) => Ok(m),
            Err(e) => {
                let e = no_server(e, "model metadata", self.routed_by());
                Err(self.model_error(e, model).await)
            }
        }
    }

    /// `ModelConfig`.
    pub async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        match self.conn.model_config(model, version).await {
            Ok(m) => Ok(m),
            Err(e) => Err(self.model_error(e, model).await),
        }
    }

    /// `ModelConfig`, or `None` when the server has no model configuration (Triton's
    /// extension: other servers of the protocol declare a model by its metadata alone).
    pub async fn model_config_if_any(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Option<ModelConfig>> {
        let answer = self.conn.model_config(model, version).await;
        self.extension(answer, model).await
    }

    /// `ModelStatistics` for one model, or `None` when the server does not report
    /// statistics (Triton's extension).
    pub(crate) async fn model_statistics_if_any(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Option<Vec<ModelStatistics>>> {
        let answer = self.conn.model_statistics(model, version).await;
        self.extension(answer, model).await
    }

    /// An extension call's answer about `model`: `None` when the extension is absent
    /// (`extensions::absent`), any other failure read as [`Self::model_metadata`]'s.
    async fn extension<T>(&self, answer: Result<T>, model: &str) -> Result<Option<T>> {
        match extensions::optional(answer) {
            Ok(v) => Ok(v),
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
        self.conn
            .register_system_shared_memory(name, key, byte_size)
            .await
    }

    /// `SystemSharedMemoryUnregister` of one region (never every region: others may
    /// belong to other clients).
    pub async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        debug_assert!(!name.is_empty(), "an empty name unregisters every region");
        self.conn.unregister_system_shared_memory(name).await
    }

    /// `ModelStatistics` for one model (empty name: all models).
    pub async fn model_statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Vec<ModelStatistics>> {
        match self.conn.model_statistics(model, version).await {
            Ok(s) => Ok(s),
            Err(e) if model.is_empty() => Err(e),
            Err(e) => Err(self.model_error(e, model).await),
        }
    }

    /// Runs a prepared request on this connection's transport (one attempt: see
    /// `transport.rs` for the contract).
    pub async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        let answer = self.conn.infer(request).await;
        answer.map_err(|e| no_server(e, "inference", self.routed_by()))
    }

    /// What the calls are routed by when not the URL's host, for messages.
    fn routed_by(&self) -> Option<&str> {
        self.peer.routed_by.as_deref()
    }

    /// A model-specific call's error; for "unknown model" style answers it asks the
    /// repository which models exist and are ready.
    async fn model_error(&self, error: Error, model: &str) -> Error {
        if !about_model(&error) {
            return error;
        }
        let index = match self.list_models().await {
            Ok(Some(listing)) => listing.models,
            Ok(None) => {
                return Error::ModelNotFound {
                    url: self.peer.url.clone(),
                    model: model.into(),
                    available: None,
                }
            }
            Err(_) => return error,
        };
        let ready: Vec<String> = ready_models(&index);
        match index.iter().find(|m| m.name == model) {
            // Ready after all: the failure was about something else.
            Some(m) if m.state == "READY" => error,
            Some(m) => Error::ModelNotReady {
                url: self.peer.url.clone(),
                model: model.into(),
                // The repository lists a model it has not loaded without a state.
                state: match (m.state.as_str(), m.reason.as_str()) {
                    ("", "") => "not loaded".into(),
                    (state, "") => state.into(),
                    (state, reason) => format!("{state}: {reason}"),
                },
                ready,
            },
            None => Error::ModelNotFound {
                url: self.peer.url.clone(),
                model: model.into(),
                available: Some(ready),
            },
        }
    }
}

/// A model state as servers write it, normalised: `READY` for MLServer's gRPC
/// `State.READY` (a Python enum's text); any other text as it is.
pub(crate) fn normalize_state(state: &str) -> String {
    match state.rsplit_once('.') {
        Some((prefix, name))
            if !prefix.is_empty()
                && !name.is_empty()
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') =>
        {
            name.to_string()
        }
        _ => state.to_string(),
    }
}

/// Whether a model-specific call failed because of the model: an unknown model, one
/// not ready or without the version asked for. The protocol answers those with a
/// generic code (NOT_FOUND, INVALID_ARGUMENT or UNAVAILABLE, in either protocol), so
/// the server's own words ([`Error::server_message`]) are read: outside text.
fn about_model(error: &Error) -> bool {
    let by_code = match error {
        Error::Server { code, .. } => matches!(code, Code::NotFound | Code::InvalidArgument),
        Error::Unavailable { cause, .. } => *cause == Unreachable::Answered,
        _ => false,
    };
    let Some(message) = error.server_message().filter(|_| by_code) else {
        return false;
    };
    let msg = message.to_ascii_lowercase();
    msg.contains("unknown model")
        || msg.contains("not found")
        || msg.contains("is not ready")
        || msg.contains("no version is available")
        || msg.contains("does not exist")
}

/// What a server or ingress routes `config`'s calls by, when not the URL's host: the
/// `authority`, or over HTTP a `Host` header (the same thing; over gRPC a `Host` header
/// is refused: gRPC routes by `:authority`). Shown in messages as it is sent.
fn routed_by(config: &ClientConfig) -> Result<Option<String>> {
    let host = config.security.headers.iter().find_map(|h| h.host());
    let label = match config.protocol {
        Protocol::Grpc => ":authority",
        Protocol::Http => "Host",
    };
    match (config.protocol, host, config.authority.as_deref()) {
        (Protocol::Grpc, Some(_), _) => Err(Error::Config(
            "a Host header is HTTP's: over gRPC a server or ingress routes by the \
             `:authority` of each call, which `authority` sets"
                .into(),
        )),
        (_, Some(h), Some(a)) if h != a => Err(Error::Config(format!(
            "a Host header {h:?} and `authority` {a:?} name different hosts: give one"
        ))),
        (_, _, Some(name)) | (_, Some(name), None) => {
            if name.trim().is_empty() || name.contains(['/', ' ']) {
                return Err(Error::Config(format!(
                    "`authority` {name:?} is not a host name (HOST or HOST:PORT)"
                )));
            }
            Ok(Some(format!("{label} {name}")))
        }
        (_, None, None) => Ok(None),
    }
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
    fn model_errors_are_known_by_code_then_by_the_servers_words() {
        let server = |code, message: &str| Error::Server {
            server: None,
            url: "h:1".into(),
            code,
            http: None,
            model: Some("m".into()),
            message: message.into(),
        };
        assert!(about_model(&server(
            Code::InvalidArgument,
            "Request for unknown model: 'm' is not found"
        )));
        assert!(about_model(&server(
            Code::NotFound,
            "no version is available"
        )));
        // Another code is another failure, whatever it says.
        assert!(!about_model(&server(Code::Internal, "unknown model")));
        let answered = |cause| Error::unavailable("h:1", cause, "Request for unknown model 'm'");
        assert!(about_model(&answered(Unreachable::Answered)));
        // bertqa's or the transport's words are never the server's answer.
        assert!(!about_model(&answered(Unreachable::Transport)));
        assert!(!about_model(&answered(Unreachable::NotReady)));
        assert!(!about_model(&Error::Config("model not found".into())));
    }

    #[test]
    fn states_are_normalised_not_debug_text() {
        assert_eq!(normalize_state("State.READY"), "READY");
        assert_eq!(normalize_state("READY"), "READY");
        assert_eq!(normalize_state("UNAVAILABLE"), "UNAVAILABLE");
        assert_eq!(normalize_state("failed: a.b.C"), "failed: a.b.C");
    }
}
