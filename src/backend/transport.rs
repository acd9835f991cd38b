//! How one batch reaches the server and its logits come back: the contract each way of
//! sending an inference request keeps.
//!
//! Everything above (the endpoint pool, retries, shared memory, the pipeline) is the
//! same for every way of talking to Triton; below it is one file per way: gRPC
//! `ModelInfer` ([`UnaryTransport`](super::UnaryTransport), `unary.rs`), gRPC
//! `ModelStreamInfer` ([`StreamTransport`](super::StreamTransport), `stream.rs`), and
//! KServe v2 HTTP/REST with binary tensor data
//! ([`HttpTransport`](super::HttpTransport), `http/infer.rs`). Each has an
//! `async fn send(&self, InferRequest) -> Result<ModelInferResponse>`;
//! [`TritonClient::infer`](super::TritonClient::infer) chooses among them by a `match`
//! on its connection (no trait object: the set is closed and known here).
//!
//! Contract of `send`:
//! - One attempt on one connection: no retries, no choice of endpoint (the pool above
//!   does both, and classifies the errors with its retry policy).
//! - The request goes as [`InferRequest::to_proto`](super::InferRequest::to_proto)
//!   describes it: its tensors in the message, or only the shared memory places its
//!   `shm_inputs` and `shm_outputs` name. A transport may set the request id (the
//!   stream matches answers by it).
//! - The answer is returned as the server gave it, as a `ModelInferResponse`: outputs
//!   in the message, or empty raw entries for outputs written into shared memory.
//!   Checking it against the binding is the caller's (`tensor::check_response_in`); a
//!   transport for another protocol translates its answer into this message.
//! - Failures are [`Error`](crate::Error)s by meaning, naming the server's address and
//!   the model: unreachable or closed ([`Unavailable`](crate::Error::Unavailable)), past
//!   the request deadline ([`Timeout`](crate::Error::Timeout)), refused credentials
//!   ([`PermissionDenied`](crate::Error::PermissionDenied)), the server's own answer
//!   ([`Server`](crate::Error::Server), its code and message), or an answer that cannot
//!   be read ([`InvalidAnswer`](crate::Error::InvalidAnswer)).
//! - Dropping the future abandons the request (the server may still run it).
//!
//! The gRPC transports share their connection's service client, made once per
//! connection by `service_client` with tonic's 4 MiB message limit raised: a batch of
//! 64 × 384 FP32 logits pairs is 196 KiB, but other deployments return far more.

use tonic::transport::Channel;

use super::proto::grpc_inference_service_client::GrpcInferenceServiceClient;

/// Largest message bertqa accepts or sends (Triton's own limit is 2 GiB − 1).
pub(crate) const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// The gRPC service client of a connection.
pub(crate) type ServiceClient = GrpcInferenceServiceClient<Channel>;

/// The service client on `channel`, its message limits raised to
/// [`MAX_MESSAGE_BYTES`]: the one place it is made.
pub(crate) fn service_client(channel: Channel) -> ServiceClient {
    GrpcInferenceServiceClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}
