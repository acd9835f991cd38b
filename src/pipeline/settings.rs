//! From a user's settings to a run's configuration: the one place that turns the request
//! flow (batch size, requests in flight, padding, shared memory), the window and decoding
//! settings and the model's binding into a [`RunConfig`] (the command line's `ask`,
//! `compare`, `eval`, and [`crate::Client`]).

use super::{dispatch, InferConfig, Padding, PaddingGuard, RunConfig};
use crate::backend::{Model, SharedMemory};
use crate::decode::DecodeConfig;
use crate::error::Result;
use crate::features::FeatureConfig;

/// How requests flow to the server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Features (a text model: questions) per request; `None`: the model's choice (a
    /// token model's default batch, a text model's largest batch).
    pub batch_size: Option<usize>,
    /// Requests kept in flight (at least one).
    pub concurrency: usize,
    /// Requests sent and discarded before the run is measured.
    pub warmup: usize,
    /// Pad every batch of a dynamic-length model to `max_seq_length`.
    pub fixed_seq_len: bool,
    /// Pad each batch to its longest feature without first checking that the answers
    /// stay the same (the probe).
    pub dynamic_seq_len: bool,
    pub shared_memory: SharedMemory,
}

impl Default for Load {
    /// The command line's defaults: the model's batch, 4 in flight, no warm-up, dynamic
    /// padding after the probe, shared memory where the server is local.
    fn default() -> Self {
        Load {
            batch_size: None,
            concurrency: 4,
            warmup: 0,
            fixed_seq_len: false,
            dynamic_seq_len: false,
            shared_memory: SharedMemory::Auto,
        }
    }
}

impl RunConfig {
    /// The configuration of a run of `model` under `load`, cutting windows by `features`
    /// and decoding by `decode`. A token model's batch size is checked against what it
    /// accepts; a text model is asked as many questions a request as its contract and
    /// batching allow, with no padding of bertqa's (the server tokenizes).
    pub fn resolve(
        model: &Model,
        load: &Load,
        features: FeatureConfig,
        decode: DecodeConfig,
    ) -> Result<RunConfig> {
        let infer = infer_config(model, load, features.max_seq_length, decode.n_best_size)?;
        Ok(RunConfig {
            features,
            infer,
            decode,
            keep_logits: false,
            keep_features: false,
        })
    }
}

/// The request flow of a run of `model` under `load` (windows of `max_seq_length`,
/// `n_best` candidates). A token model: the batch size asked for within its limit,
/// requests sent together to fill its batches, each batch padded to its longest
/// feature under the guard (unless `load` says otherwise). A text model: as many
/// questions a request as asked within what its contract and batching allow, one
/// request at a time refilled, no padding of ours (the server tokenizes).
pub(super) fn infer_config(
    model: &Model,
    load: &Load,
    max_seq_length: usize,
    n_best: usize,
) -> Result<InferConfig> {
    let concurrency = load.concurrency.max(1);
    if model.takes_text() {
        return Ok(InferConfig {
            batch_size: model.per_request(load.batch_size.unwrap_or(model.batch_limit())),
            concurrency,
            refill: 1,
            warmup: load.warmup,
            padding: Padding::Fixed(0),
            guard: None,
            shared_memory: load.shared_memory,
            max_seq_len: max_seq_length,
        });
    }
    let batch_size = dispatch::effective_batch_size(load.batch_size, model)?;
    Ok(InferConfig {
        batch_size,
        concurrency,
        refill: dispatch::refill_of(concurrency, batch_size, model.server_batch()),
        warmup: load.warmup,
        padding: Padding::of(model, max_seq_length, !load.fixed_seq_len),
        guard: Some(PaddingGuard {
            n_best,
            full_len: max_seq_length,
            probe: !load.dynamic_seq_len,
            decided: None,
        }),
        shared_memory: load.shared_memory,
        max_seq_len: max_seq_length,
    })
}
