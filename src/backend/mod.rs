//! The only stage that speaks gRPC: Triton's KServe v2 protocol (our own `proto/`),
//! a typed client, the BERT-QA tensor binding inferred from model metadata, and the
//! translation between our [`Feature`](crate::types::Feature) batches and raw tensors.

pub mod binding;
pub mod client;
pub mod proto;
pub mod tensor;

pub use binding::{Binding, BindingOverrides, SeqLen};
pub use client::{ClientConfig, TritonClient};

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
