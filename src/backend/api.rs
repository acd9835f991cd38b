//! The protocol face: every call of Triton's protocol other than inference, which the
//! gRPC half (`grpc.rs`) and the HTTP half (`http/`) each implement.
//!
//! Contract (both halves):
//! - Answers are the gRPC proto messages whatever the protocol (the HTTP half reads
//!   Triton's JSON into them).
//! - Failures are [`Error`](crate::Error)s by meaning, the same in both protocols
//!   (`status.rs` for gRPC, `http/mod.rs` for HTTP); a model-specific call's error names
//!   the model. Turning "unknown model" answers into
//!   [`ModelNotFound`](crate::Error::ModelNotFound) is the client's
//!   ([`TritonClient`](super::TritonClient)), which asks the repository.
//! - Health checks answer `false` for "not ready"; an error is a failure to ask.
//!
//! A trait with `async fn`s, used through the client's enum of the two halves (a
//! `match`, no boxed futures): nothing needs to choose a half through `dyn`.

use super::proto::repository_index_response::ModelIndex;
use super::proto::{ModelConfig, ModelMetadataResponse, ModelStatistics, ServerMetadataResponse};
use crate::error::Result;

/// Triton's calls other than inference, in one protocol (see the module header).
pub(crate) trait ServerApi {
    /// `ServerLive` (`GET /v2/health/live`).
    async fn server_live(&self) -> Result<bool>;

    /// `ServerReady` (`GET /v2/health/ready`).
    async fn server_ready(&self) -> Result<bool>;

    /// `ModelReady` (`GET /v2/models/M[/versions/V]/ready`); empty version: the
    /// server's choice.
    async fn model_ready(&self, model: &str, version: &str) -> Result<bool>;

    /// `ServerMetadata` (`GET /v2`): name, version, extensions.
    async fn server_metadata(&self) -> Result<ServerMetadataResponse>;

    /// `RepositoryIndex` (`POST /v2/repository/index`): every model version, whatever
    /// its state.
    async fn repository_index(&self) -> Result<Vec<ModelIndex>>;

    /// `ModelMetadata` (`GET /v2/models/M[/versions/V]`).
    async fn model_metadata(&self, model: &str, version: &str) -> Result<ModelMetadataResponse>;

    /// `ModelConfig` (`GET /v2/models/M[/versions/V]/config`).
    async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig>;

    /// `ModelStatistics` (`GET /v2/models/M[/versions/V]/stats`); empty model: every
    /// model's.
    async fn model_statistics(&self, model: &str, version: &str) -> Result<Vec<ModelStatistics>>;

    /// `SystemSharedMemoryRegister`: `byte_size` bytes of the POSIX shared memory
    /// object `key` under `name`.
    async fn register_system_shared_memory(
        &self,
        name: &str,
        key: &str,
        byte_size: u64,
    ) -> Result<()>;

    /// `SystemSharedMemoryUnregister` of the region `name`.
    async fn unregister_system_shared_memory(&self, name: &str) -> Result<()>;
}
