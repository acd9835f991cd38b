//! The transport seam: how one batch reaches the server and its logits come back.
//!
//! Everything above this trait (the endpoint pool, retries, shared memory as a
//! decorator, the pipeline) is the same for every way of talking to Triton; everything
//! below it is one file per way: gRPC `ModelInfer` (`unary.rs`), gRPC
//! `ModelStreamInfer` (`stream.rs`), and KServe v2 HTTP/REST with binary tensor data
//! (`http/infer.rs`).

use std::future::Future;
use std::pin::Pin;

use super::proto::ModelInferResponse;
use super::request::InferRequest;
use crate::error::Result;

/// Largest message bertqa accepts or sends (Triton's own limit is 2 GiB − 1).
pub const MAX_MESSAGE_BYTES: usize = 1 << 30;

/// A future a transport returns: boxed, so that transports can be stacked and chosen at
/// run time (`dyn InferTransport`).
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<ModelInferResponse>> + Send + 'a>>;

/// Sends one batch to one server and returns the answer holding its logits.
///
/// Contract:
/// - One attempt on one connection: no retries, no choice of endpoint (the pool above
///   does both, and classifies the errors with its retry policy).
/// - The request goes as [`InferRequest::to_proto`] describes it: its tensors in the
///   message, or only the shared memory places its [`shm_inputs`](InferRequest::shm_inputs)
///   and [`shm_outputs`](InferRequest::shm_outputs) name. A transport may set the
///   request id (the stream matches answers by it).
/// - The answer is returned as the server gave it, as a `ModelInferResponse`: outputs
///   in the message, or empty raw entries for outputs written into shared memory.
///   Checking it against the binding is the caller's (`tensor::check_batch`); a
///   transport for another protocol translates its answer into this message.
/// - Failures are [`Error`](crate::Error)s by meaning, naming the server's address and
///   the model: unreachable or closed ([`Unavailable`](crate::Error::Unavailable)), past
///   the request deadline ([`Timeout`](crate::Error::Timeout)), refused credentials
///   ([`PermissionDenied`](crate::Error::PermissionDenied)), or the server's own answer
///   ([`Server`](crate::Error::Server), its code and message).
/// - Dropping the future abandons the request (the server may still run it).
pub trait InferTransport: Send + Sync {
    /// Sends `request` and waits for its answer (see the trait's contract).
    fn send(&self, request: InferRequest) -> SendFuture<'_>;
}

impl<T: InferTransport + ?Sized> InferTransport for &T {
    fn send(&self, request: InferRequest) -> SendFuture<'_> {
        (**self).send(request)
    }
}

impl<T: InferTransport + ?Sized> InferTransport for std::sync::Arc<T> {
    fn send(&self, request: InferRequest) -> SendFuture<'_> {
        (**self).send(request)
    }
}
