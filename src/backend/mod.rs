//! The only stage that speaks gRPC: Triton's KServe v2 protocol (our own `proto/`),
//! a typed client, the BERT-QA tensor binding inferred from model metadata, and the
//! translation between our [`Feature`](crate::types::Feature) batches and raw tensors;
//! an endpoint pool with health checks and the retry policy of the inference path.

pub mod binding;
pub mod client;
pub mod codec;
pub mod pool;
pub mod proto;
pub mod request;
pub mod retry;
pub mod security;
pub mod shm;
pub mod stream;
pub mod tensor;
pub mod whole_body;

pub use binding::{Binding, BindingOverrides, SeqLen};
pub use client::{ClientConfig, Transport, TritonClient};
pub use codec::InferCodec;
pub use pool::{Infer, Pool, PoolConfig};
pub use request::{prepare_request, InferRequest};
pub use retry::{RetryPolicy, RetryStats};
pub use security::{Header, Secret, Security, TlsConfig};
pub use shm::SharedMemory;

/// Connects and infers the binding of `model` in one step (metadata + config).
pub async fn bind(
    client: &TritonClient,
    model: &str,
    version: &str,
    overrides: &BindingOverrides,
) -> crate::Result<Binding> {
    let metadata = client.model_metadata(model, version).await?;
    let config = client.model_config(model, version).await?;
    Binding::infer(&metadata, Some(&config), version, overrides)
}
