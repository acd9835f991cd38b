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
        let concurrency = load.concurrency.max(1);
        let infer = match model.tokens() {
            Some(binding) => {
                let batch_size = dispatch::effective_batch_size(load.batch_size, binding)?;
                InferConfig {
                    batch_size,
                    concurrency,
                    refill: dispatch::refill_group(concurrency, batch_size, binding),
                    warmup: load.warmup,
                    padding: Padding::for_model(
                        binding,
                        features.max_seq_length,
                        !load.fixed_seq_len,
                    ),
                    guard: Some(PaddingGuard {
                        n_best: decode.n_best_size,
                        full_len: features.max_seq_length,
                        probe: !load.dynamic_seq_len,
                        decided: None,
                    }),
                    shared_memory: load.shared_memory,
                    max_seq_len: features.max_seq_length,
                }
            }
            None => {
                let mut infer = RunConfig::for_model(model).infer;
                infer.batch_size =
                    model.per_request(load.batch_size.unwrap_or(model.batch_limit()));
                infer.concurrency = concurrency;
                infer.warmup = load.warmup;
                infer.shared_memory = load.shared_memory;
                infer.max_seq_len = features.max_seq_length;
                infer
            }
        };
        Ok(RunConfig {
            features,
            infer,
            decode,
            keep_logits: false,
            keep_features: false,
        })
    }
}
