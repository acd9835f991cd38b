//! The gRPC unary transport: one `ModelInfer` call per request.

use std::sync::Arc;

use super::peer::Peer;
use super::proto::ModelInferResponse;
use super::request::InferRequest;
use super::transport::ServiceClient;
use crate::error::Result;

/// `ModelInfer` on one connection (cheap to clone: clones share it).
#[derive(Debug, Clone)]
pub(crate) struct UnaryTransport {
    grpc: ServiceClient,
    peer: Arc<Peer>,
}

impl UnaryTransport {
    /// The transport of `grpc`, the service client of a connection to `peer`.
    pub(crate) fn new(grpc: ServiceClient, peer: Arc<Peer>) -> UnaryTransport {
        UnaryTransport { grpc, peer }
    }

    /// Sends `request` and waits for its answer (the contract of `transport.rs`).
    pub(crate) async fn send(&self, request: InferRequest) -> Result<ModelInferResponse> {
        let message = self.peer.request(request.to_proto());
        match self.grpc.clone().model_infer(message).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) => Err(self.peer.error(status, Some(request.model()))),
        }
    }
}
