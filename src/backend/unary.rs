//! The gRPC unary transport: one `ModelInfer` call per request.

use std::sync::Arc;

use tonic::transport::Channel;

use super::peer::Peer;
use super::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use super::request::InferRequest;
use super::transport::{InferTransport, SendFuture, MAX_MESSAGE_BYTES};

/// `ModelInfer` on one connection (cheap to clone: clones share it).
#[derive(Debug, Clone)]
pub struct UnaryTransport {
    grpc: GrpcInferenceServiceClient<Channel>,
    peer: Arc<Peer>,
}

impl UnaryTransport {
    /// The transport of `channel`, a connection to `peer`.
    pub fn new(channel: Channel, peer: Arc<Peer>) -> UnaryTransport {
        let grpc = GrpcInferenceServiceClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        UnaryTransport { grpc, peer }
    }
}

impl InferTransport for UnaryTransport {
    fn send(&self, request: InferRequest) -> SendFuture<'_> {
        Box::pin(async move {
            let message = self.peer.request(request.to_proto());
            match self.grpc.clone().model_infer(message).await {
                Ok(response) => Ok(response.into_inner()),
                Err(status) => Err(self.peer.error(status, Some(request.model()))),
            }
        })
    }
}
