//! The gRPC half of [`TritonClient`](super::TritonClient): one HTTP/2 connection
//! (tonic), its calls of [`ServerApi`] with `tonic::Status` mapped into [`Error`], and
//! its inference calls ([`GrpcCall`]: [`UnaryTransport`] or [`StreamTransport`]).
//!
//! The connection's service client is made once, by `transport::service_client`.

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Endpoint;

use super::api::ServerApi;
use super::http::HttpClient;
use super::peer::Peer;
use super::proto::repository_index_response::ModelIndex;
use super::proto::{
    ModelConfig, ModelConfigRequest, ModelInferResponse, ModelMetadataRequest,
    ModelMetadataResponse, ModelReadyRequest, ModelStatistics, ModelStatisticsRequest,
    RepositoryIndexRequest, ServerLiveRequest, ServerMetadataRequest, ServerMetadataResponse,
    ServerReadyRequest, SystemSharedMemoryRegisterRequest, SystemSharedMemoryUnregisterRequest,
};
use super::request::InferRequest;
use super::security::{self, TlsConfig};
use super::status::cause_of;
use super::stream::StreamTransport;
use super::transport::{service_client, ServiceClient};
use super::unary::UnaryTransport;
use crate::error::{Error, Result, Unreachable};

/// Which gRPC call carries inference requests (`--transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GrpcCall {
    /// One `ModelInfer` call per request.
    #[default]
    Unary,
    /// Requests multiplexed on one `ModelStreamInfer` call per connection
    /// (`StreamTransport`); a request the stream answers with an error is asked
    /// again with `ModelInfer`, and so is every later one on that connection. The stream
    /// is driven by a task on the runtime of the request that opened it: send a
    /// client's requests from one runtime (a current-thread runtime drives its tasks
    /// only inside `block_on`; requests from elsewhere would wait for their deadline).
    Stream,
}

impl GrpcCall {
    /// The name `--transport` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            GrpcCall::Unary => "unary",
            GrpcCall::Stream => "stream",
        }
    }
}

/// The hint for a gRPC client whose server answers in HTTP/1.1.
const HTTP_PORT_HINT: &str = "the server answers HTTP/1.1, not gRPC: this looks like \
     Triton's HTTP port; use `Protocol::Http`, or gRPC's port (usually 8001)";

/// One gRPC connection to a server.
#[derive(Debug, Clone)]
pub(crate) struct GrpcConn {
    grpc: ServiceClient,
    peer: Arc<Peer>,
    /// `http://host:port` or `https://host:port`, for the wrong-port check.
    uri: String,
    infer: Inference,
}

/// The inference calls of a connection ([`GrpcCall`]).
#[derive(Debug, Clone)]
enum Inference {
    Unary(UnaryTransport),
    Stream(Arc<StreamTransport>),
}

impl GrpcConn {
    /// Connects to `uri` (`http://` or `https://`) within `connect_timeout`; inference
    /// requests travel by `call`. A failure is checked for a server that answers
    /// HTTP/1.1 ([`http_port_check`]).
    pub(crate) async fn connect(
        uri: String,
        authority: Option<&str>,
        connect_timeout: Duration,
        call: GrpcCall,
        tls: Option<&TlsConfig>,
        peer: Arc<Peer>,
        lazy: bool,
    ) -> Result<GrpcConn> {
        let mut endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| Error::Config(format!("{}: invalid URL: {e}", peer.url)))?
            .connect_timeout(connect_timeout)
            .timeout(peer.request_timeout)
            .tcp_nodelay(true);
        if let Some(authority) = authority {
            // The `:authority` of every call; the connection (and TLS's name) stay the
            // URL's.
            let scheme = if uri.starts_with("https://") {
                "https"
            } else {
                "http"
            };
            let origin = format!("{scheme}://{authority}").parse().map_err(|e| {
                Error::Config(format!("`authority` {authority:?} is not a host name: {e}"))
            })?;
            endpoint = endpoint.origin(origin);
        }
        // TLS connections are bertqa's own (security::GrpcTlsConnector), not tonic's.
        let connector = match tls {
            Some(tls) => Some(security::GrpcTlsConnector::new(tls, endpoint.uri())?),
            None => None,
        };
        let open = |channel| {
            let grpc = service_client(channel);
            let infer = match call {
                GrpcCall::Unary => {
                    Inference::Unary(UnaryTransport::new(grpc.clone(), peer.clone()))
                }
                GrpcCall::Stream => {
                    Inference::Stream(Arc::new(StreamTransport::new(grpc.clone(), peer.clone())))
                }
            };
            GrpcConn {
                grpc,
                peer: peer.clone(),
                uri: uri.clone(),
                infer,
            }
        };
        if lazy {
            // Connected on the first call (an endpoint of a pool that was down at start).
            let channel = match connector {
                Some(connector) => endpoint.connect_with_connector_lazy(connector),
                None => endpoint.connect_lazy(),
            };
            return Ok(open(channel));
        }
        let connecting = async {
            match connector {
                Some(connector) => endpoint.connect_with_connector(connector).await,
                None => endpoint.connect().await,
            }
        };
        let failed = match tokio::time::timeout(connect_timeout, connecting).await {
            Ok(Ok(channel)) => return Ok(open(channel)),
            Ok(Err(e)) => {
                Error::unavailable(&peer.url, cause_of(&e), security::connect_error(&e, tls))
            }
            Err(_) => Error::unavailable(
                &peer.url,
                Unreachable::ConnectTimeout,
                format!("no connection within {} ms", connect_timeout.as_millis()),
            ),
        };
        Err(http_port_check(failed, &peer, &uri).await)
    }

    /// How this connection's inference requests travel (as configured).
    pub(crate) fn call(&self) -> GrpcCall {
        match self.infer {
            Inference::Unary(_) => GrpcCall::Unary,
            Inference::Stream(_) => GrpcCall::Stream,
        }
    }

    /// Whether a stream error sent this connection's requests unary for good.
    pub(crate) fn went_unary(&self) -> bool {
        match &self.infer {
            Inference::Unary(_) => false,
            Inference::Stream(s) => s.went_unary(),
        }
    }

    /// Sends an inference request by this connection's call.
    pub(crate) async fn infer(&self, request: InferRequest) -> Result<ModelInferResponse> {
        let answer = match &self.infer {
            Inference::Unary(t) => t.send(request).await,
            Inference::Stream(t) => t.send(request).await,
        };
        answer.map(super::tensor::into_raw_contents)
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        self.peer.request(msg)
    }

    fn client(&self) -> ServiceClient {
        self.grpc.clone()
    }

    /// A call's answer, or its status as an [`Error`] (checked for a server that
    /// answers HTTP/1.1: a wrong port).
    async fn answer<T>(
        &self,
        result: std::result::Result<tonic::Response<T>, tonic::Status>,
        model: Option<&str>,
    ) -> Result<T> {
        match result {
            Ok(r) => Ok(r.into_inner()),
            Err(status) => {
                let e = self.peer.error(status, model);
                Err(http_port_check(e, &self.peer, &self.uri).await)
            }
        }
    }
}

impl ServerApi for GrpcConn {
    async fn server_live(&self) -> Result<bool> {
        let r = self
            .client()
            .server_live(self.request(ServerLiveRequest {}))
            .await;
        Ok(self.answer(r, None).await?.live)
    }

    async fn server_ready(&self) -> Result<bool> {
        let r = self
            .client()
            .server_ready(self.request(ServerReadyRequest {}))
            .await;
        Ok(self.answer(r, None).await?.ready)
    }

    async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        let req = ModelReadyRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_ready(self.request(req)).await;
        Ok(self.answer(r, None).await?.ready)
    }

    async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        let r = self
            .client()
            .server_metadata(self.request(ServerMetadataRequest {}))
            .await;
        self.answer(r, None).await
    }

    async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        let req = RepositoryIndexRequest {
            repository_name: String::new(),
            ready: false,
        };
        let r = self.client().repository_index(self.request(req)).await;
        Ok(self.answer(r, None).await?.models)
    }

    async fn model_metadata(&self, model: &str, version: &str) -> Result<ModelMetadataResponse> {
        let req = ModelMetadataRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_metadata(self.request(req)).await;
        self.answer(r, Some(model)).await
    }

    async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        let req = ModelConfigRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_config(self.request(req)).await;
        Ok(self
            .answer(r, Some(model))
            .await?
            .config
            .unwrap_or_default())
    }

    async fn model_statistics(&self, model: &str, version: &str) -> Result<Vec<ModelStatistics>> {
        let req = ModelStatisticsRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_statistics(self.request(req)).await;
        let named = (!model.is_empty()).then_some(model);
        Ok(self.answer(r, named).await?.model_stats)
    }

    async fn register_system_shared_memory(
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
            .client()
            .system_shared_memory_register(self.request(req))
            .await;
        self.answer(r, None).await.map(|_| ())
    }

    async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        let req = SystemSharedMemoryUnregisterRequest { name: name.into() };
        let r = self
            .client()
            .system_shared_memory_unregister(self.request(req))
            .await;
        self.answer(r, None).await.map(|_| ())
    }
}

/// A connection failure worth asking whether the server answers HTTP/1.1: one that
/// may be a server speaking another protocol (a refused connection, or none within the
/// timeout, is nobody there). TLS has its own sentences for that (`security`).
fn may_be_wrong_port(error: &Error, tls: bool) -> bool {
    match error {
        Error::Unavailable { cause, .. } => {
            !tls && !matches!(cause, Unreachable::Refused | Unreachable::ConnectTimeout)
        }
        _ => false,
    }
}

/// A gRPC failure, checked for a server that answers HTTP/1.1 at `uri` (Triton's HTTP
/// port given where the gRPC one was meant): when one answers, the error says so and
/// names the setting to use ([`may_be_wrong_port`] says which failures are checked).
async fn http_port_check(error: Error, peer: &Arc<Peer>, uri: &str) -> Error {
    if !may_be_wrong_port(&error, peer.tls.is_some()) {
        return error;
    }
    // Only an error path pays for the probe; a loaded server's HTTP port may take a few
    // seconds to answer, and a probe that gives up early loses the hint.
    let probe_timeout = peer.request_timeout.min(Duration::from_secs(10));
    let Ok(probe) = HttpClient::new(uri, None, probe_timeout, peer.clone()) else {
        return error;
    };
    let answered = tokio::time::timeout(probe_timeout, probe.server_live()).await;
    match answered {
        Ok(Ok(_)) => Error::unavailable(&peer.url, Unreachable::WrongProtocol, HTTP_PORT_HINT),
        _ => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_that_may_be_another_protocol_are_probed() {
        let e = |cause| Error::unavailable("h:1", cause, "connection closed by the server");
        for cause in [
            Unreachable::Transport,
            Unreachable::Closed,
            Unreachable::Answered,
        ] {
            assert!(may_be_wrong_port(&e(cause), false), "{cause:?}");
            assert!(!may_be_wrong_port(&e(cause), true), "{cause:?} with TLS");
        }
        // The words do not matter: the cause does.
        let refused = Error::unavailable("h:1", Unreachable::Refused, "no such words");
        assert!(!may_be_wrong_port(&refused, false));
        let slow = Error::unavailable("h:1", Unreachable::ConnectTimeout, "refused?");
        assert!(!may_be_wrong_port(&slow, false));
        let timeout = Error::Timeout {
            url: "h:1".into(),
            timeout_ms: 5,
        };
        assert!(!may_be_wrong_port(&timeout, false));
    }

    /// A port nobody listens on is known as refused by the io error's kind, in both
    /// protocols.
    #[tokio::test]
    async fn a_refused_connection_is_known_by_its_kind() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let peer = Arc::new(Peer {
            url: format!("127.0.0.1:{port}"),
            request_timeout: Duration::from_secs(2),
            headers: Arc::from(Vec::new()),
            tls: None,
            server: Default::default(),
            routed_by: None,
        });
        let uri = format!("http://127.0.0.1:{port}");
        let timeout = Duration::from_secs(2);
        let grpc = GrpcConn::connect(
            uri.clone(),
            None,
            timeout,
            GrpcCall::Unary,
            None,
            peer.clone(),
            false,
        );
        let http = HttpClient::connect(&uri, None, timeout, peer.clone());
        for e in [grpc.await.unwrap_err(), http.await.unwrap_err()] {
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
        }
    }
}
