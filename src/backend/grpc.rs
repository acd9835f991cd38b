//! The gRPC half of [`TritonClient`](super::TritonClient): one HTTP/2 connection
//! (tonic), its metadata calls with `tonic::Status` mapped into [`Error`], and its
//! inference transport ([`Transport`]: [`UnaryTransport`] or [`StreamTransport`]).
//!
//! tonic's 4 MiB decode limit is raised: a batch of 64 × 384 FP32 logits pairs is
//! 196 KiB, but other deployments return far more.

use std::sync::Arc;

use tonic::transport::{Channel, Endpoint};

use std::time::Duration;

use super::peer::Peer;
use super::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use super::proto::repository_index_response::ModelIndex;
use super::proto::{
    ModelConfig, ModelConfigRequest, ModelMetadataRequest, ModelMetadataResponse,
    ModelReadyRequest, ModelStatistics, ModelStatisticsRequest, RepositoryIndexRequest,
    ServerLiveRequest, ServerMetadataRequest, ServerMetadataResponse, ServerReadyRequest,
    SystemSharedMemoryRegisterRequest, SystemSharedMemoryUnregisterRequest,
};
use super::request::InferRequest;
use super::security::{self, TlsConfig};
use super::stream::StreamTransport;
use super::transport::{InferTransport, SendFuture, MAX_MESSAGE_BYTES};
use super::unary::UnaryTransport;
use crate::error::{Error, Result};

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

/// One gRPC connection to a server.
#[derive(Debug, Clone)]
pub(crate) struct GrpcConn {
    grpc: GrpcInferenceServiceClient<Channel>,
    peer: Arc<Peer>,
    infer: Inference,
}

/// The transport of a connection's inference requests ([`Transport`]).
#[derive(Debug, Clone)]
enum Inference {
    Unary(UnaryTransport),
    Stream(Arc<StreamTransport>),
}

impl GrpcConn {
    /// Connects to `uri` (`http://` or `https://`) within `connect_timeout`; requests
    /// travel by `transport`.
    pub async fn connect(
        uri: String,
        connect_timeout: Duration,
        transport: Transport,
        tls: Option<&TlsConfig>,
        peer: Arc<Peer>,
    ) -> Result<GrpcConn> {
        let endpoint = Endpoint::from_shared(uri)
            .map_err(|e| Error::Config(format!("{}: invalid URL: {e}", peer.url)))?
            .connect_timeout(connect_timeout)
            .timeout(peer.request_timeout)
            .tcp_nodelay(true);
        // TLS connections are bertqa's own (security::GrpcTlsConnector), not tonic's.
        let connector = match tls {
            Some(tls) => Some(security::GrpcTlsConnector::new(tls, endpoint.uri())?),
            None => None,
        };
        let unavailable = |message: String| Error::Unavailable {
            url: peer.url.clone(),
            message,
        };
        let connecting = async {
            match connector {
                Some(connector) => endpoint.connect_with_connector(connector).await,
                None => endpoint.connect().await,
            }
        };
        let channel = match tokio::time::timeout(connect_timeout, connecting).await {
            Ok(Ok(ch)) => ch,
            Ok(Err(e)) => return Err(unavailable(security::connect_error(&e, tls))),
            Err(_) => {
                return Err(unavailable(format!(
                    "no connection within {} ms",
                    connect_timeout.as_millis()
                )))
            }
        };
        let infer = match transport {
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
        Ok(GrpcConn { grpc, peer, infer })
    }

    /// How this connection's requests travel (as configured).
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

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        self.peer.request(msg)
    }

    fn client(&self) -> GrpcInferenceServiceClient<Channel> {
        self.grpc.clone()
    }

    /// `ServerLive`.
    pub async fn server_live(&self) -> Result<bool> {
        let r = self
            .client()
            .server_live(self.request(ServerLiveRequest {}))
            .await;
        Ok(r.map_err(|s| self.peer.error(s, None))?.into_inner().live)
    }

    /// `ServerReady`.
    pub async fn server_ready(&self) -> Result<bool> {
        let r = self
            .client()
            .server_ready(self.request(ServerReadyRequest {}))
            .await;
        Ok(r.map_err(|s| self.peer.error(s, None))?.into_inner().ready)
    }

    /// `ModelReady`.
    pub async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        let req = ModelReadyRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_ready(self.request(req)).await;
        Ok(r.map_err(|s| self.peer.error(s, None))?.into_inner().ready)
    }

    /// `ServerMetadata`.
    pub async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        let r = self
            .client()
            .server_metadata(self.request(ServerMetadataRequest {}))
            .await;
        Ok(r.map_err(|s| self.peer.error(s, None))?.into_inner())
    }

    /// `RepositoryIndex` of every model version, whatever its state.
    pub async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        let req = RepositoryIndexRequest {
            repository_name: String::new(),
            ready: false,
        };
        let r = self.client().repository_index(self.request(req)).await;
        Ok(r.map_err(|s| self.peer.error(s, None))?.into_inner().models)
    }

    /// `ModelMetadata`.
    pub async fn model_metadata(
        &self,
        model: &str,
        version: &str,
    ) -> Result<ModelMetadataResponse> {
        let req = ModelMetadataRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_metadata(self.request(req)).await;
        Ok(r.map_err(|s| self.peer.error(s, Some(model)))?.into_inner())
    }

    /// `ModelConfig`.
    pub async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        let req = ModelConfigRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_config(self.request(req)).await;
        let r = r.map_err(|s| self.peer.error(s, Some(model)))?;
        Ok(r.into_inner().config.unwrap_or_default())
    }

    /// `SystemSharedMemoryRegister`.
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
            .client()
            .system_shared_memory_register(self.request(req))
            .await;
        r.map(|_| ()).map_err(|s| self.peer.error(s, None))
    }

    /// `SystemSharedMemoryUnregister` of one region.
    pub async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        let req = SystemSharedMemoryUnregisterRequest { name: name.into() };
        let r = self
            .client()
            .system_shared_memory_unregister(self.request(req))
            .await;
        r.map(|_| ()).map_err(|s| self.peer.error(s, None))
    }

    /// `ModelStatistics` (empty name: all models).
    pub async fn model_statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Vec<ModelStatistics>> {
        let req = ModelStatisticsRequest {
            name: model.into(),
            version: version.into(),
        };
        let r = self.client().model_statistics(self.request(req)).await;
        let named = (!model.is_empty()).then_some(model);
        Ok(r.map_err(|s| self.peer.error(s, named))?
            .into_inner()
            .model_stats)
    }

    /// Sends a request on this connection's transport.
    pub fn send(&self, request: InferRequest) -> SendFuture<'_> {
        match &self.infer {
            Inference::Unary(t) => t.send(request),
            Inference::Stream(t) => t.send(request),
        }
    }
}
