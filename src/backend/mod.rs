//! The only stage that speaks to Triton: its KServe v2 protocol (our own `proto/`),
//! a typed client, the BERT-QA tensor binding inferred from model metadata, and the
//! translation between our [`Feature`](crate::types::Feature) batches and raw tensors;
//! an endpoint pool with health checks and the retry policy of the inference path.
//!
//! Layers, each using only those below it:
//! - [`pool`] (endpoints, health, `retry`) over [`client::TritonClient`] (one
//!   connection in either protocol, gRPC or `http`: the calls other than inference
//!   through the protocol face both halves implement (`api.rs`), and inference through
//!   the connection's transport);
//! - `shm`: a system shared memory region of request slots, registered through a
//!   client (a run places its requests' tensors there: `pipeline`'s `SharedRegion`);
//! - the transports ("send this batch, get its logits", contract in `transport`):
//!   `unary` (`ModelInfer`) and `stream` (`ModelStreamInfer`) on a gRPC
//!   connection, chosen by [`GrpcCall`], and `http::HttpTransport` (KServe v2 REST
//!   with binary tensor data) on HTTP/1.1 connections;
//! - `peer` (deadline, headers, error mapping), [`security`], `status`;
//! - `request`, `tensor`, `binding`, [`proto`].

mod api;
pub(crate) mod binding;
pub(crate) mod bytes;
pub mod client;
pub(crate) mod extensions;
mod grpc;
pub(crate) mod http;
mod model;
pub mod page;
pub(crate) mod peer;
pub mod pool;
pub mod proto;
pub(crate) mod protocol;
pub(crate) mod request;
pub(crate) mod retry;
pub mod security;
pub(crate) mod shm;
pub(crate) mod status;
pub(crate) mod stream;
pub(crate) mod tensor;
pub mod text;
pub(crate) mod text_request;
pub(crate) mod transport;
pub(crate) mod unary;
pub(crate) mod url;

pub use binding::{Binding, BindingOverrides, SeqLen};
pub use client::{ClientConfig, GrpcCall, TritonClient};
pub use extensions::ServerInfo;
pub use model::Model;
pub use pool::{Infer, Pool, PoolConfig};
pub use protocol::Protocol;
pub use request::{prepare_request, InferRequest};
pub use retry::{RetryPolicy, RetryStats};
pub use security::{Header, Secret, Security, TlsConfig};
pub use shm::SharedMemory;
pub use text::{
    Contract, NoAnswer, ServerWindows, TextAnswer, TextBinding, TextOverrides, TextReply,
};
pub use text_request::TextPair;
pub use url::distinct_urls;

/// A model's metadata, and its configuration when the server has Triton's model
/// configuration extension: what a binding is inferred from.
pub async fn describe(
    client: &TritonClient,
    model: &str,
    version: &str,
) -> crate::Result<(proto::ModelMetadataResponse, Option<proto::ModelConfig>)> {
    // Asked first so that the messages below name the server (best effort).
    let _ = client.server_info().await;
    let metadata = client.model_metadata(model, version).await?;
    let config = client.model_config_if_any(model, version).await?;
    Ok((metadata, config))
}

/// Looks at `model` and binds it as it takes its inputs: a model that takes text by its
/// contract ([`TextBinding`], named by `text`), one that takes token ids by its tensors
/// ([`Binding`], named by `tokens`). What a [`Run`](crate::pipeline::Run) of any model starts from.
pub async fn look(
    client: &TritonClient,
    model: &str,
    version: &str,
    tokens: &BindingOverrides,
    text: &TextOverrides,
) -> crate::Result<Model> {
    let (metadata, config) = describe(client, model, version).await?;
    Model::infer(&metadata, config.as_ref(), version, tokens, text)
}

/// Infers the token binding of `model` in one step: its metadata, and its
/// configuration when the server has Triton's model configuration extension. A model
/// that takes text has none (an error saying which contract it follows).
pub async fn bind(
    client: &TritonClient,
    model: &str,
    version: &str,
    overrides: &BindingOverrides,
) -> crate::Result<Binding> {
    let (metadata, config) = describe(client, model, version).await?;
    if text::takes_text(&metadata) {
        // A model that tokenizes on the server: what it is, rather than which of its
        // inputs are not token ids.
        let contract =
            text::TextBinding::infer(&metadata, config.as_ref(), version, &Default::default())
                .map(|b| format!("the {} contract", b.contract.name()))
                .unwrap_or_else(|_| "no contract bertqa recognizes".into());
        return Err(crate::Error::Binding {
            model: metadata.name.clone(),
            message: format!(
                "takes text (BYTES question and context; {contract}), not token ids: it has \
                 no token binding; `look` binds it as a model that takes text"
            ),
            tensors: Vec::new(),
        });
    }
    Binding::infer(&metadata, config.as_ref(), version, overrides)
}
