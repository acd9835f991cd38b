//! Orchestration: features → batches → requests kept in flight → logits, overlapped.
//!
//! Contract:
//! - Features arrive from an iterator run on a blocking thread (feature building is CPU
//!   work), are packed into batches of at most `batch_size` (never above the model's
//!   max batch size) and sent with at most `concurrency` requests in flight.
//! - Each request's latency is measured from the moment it is handed to the transport
//!   to the moment its response arrives; the tensors are written into the send buffer
//!   by the transport ([`InferCodec`](crate::backend::InferCodec)), so that serialization
//!   counts. Time a batch waits for a free slot is **not** latency (the seed client's
//!   "latency" measured that queue, spec §9.4).
//! - Channels are drained as many messages at a time as are queued (`recv_many`, and
//!   room for a whole batch of results reserved at once), not one per wake-up.
//! - `warmup` extra requests (copies of the first batch) are sent before the measured
//!   run; their results and timings are discarded.
//! - Answers are handed on with their feature as they arrive, in any order
//!   ([`RunEvent`]); consumers collect by `unique_id`, so output never depends on
//!   concurrency or arrival order.
//! - Requests go through an [`Infer`] backend: one [`TritonClient`](crate::backend::TritonClient),
//!   or a [`Pool`](crate::backend::Pool) of endpoints that retries transient errors;
//!   latency is that of the attempt that succeeded. NaN and infinite logits are replaced
//!   by −∞ as responses arrive and counted in [`InferReport::non_finite`].
//! - A run that decodes ranks each answer's n-best candidates where the response lies
//!   (shared memory or the message), in the pass that checks for non-finite values
//!   ([`Rank`]); the logits are copied out only where something reads them.
//!
//! The stages, one file each: `produce` (features), `dispatch` (requests in flight, with
//! the `padding` policy and its probe, and `rank` reading each answer), `collect`
//! (events to the observer, answers to the decoder), `decode` (questions), tied together
//! in `run`; `report` holds what a run measured and `observe` what the outside sees of
//! it ([`RunObserver`]).

mod collect;
mod decode;
mod dispatch;
mod observe;
mod padding;
mod produce;
mod rank;
mod report;
mod run;
#[cfg(test)]
mod tests;

pub(crate) use dispatch::Placed;
pub use dispatch::{infer_all, infer_events, Answer, RunEvent};
pub use observe::{AnswerNeeds, NoProgress, RunObserver};
pub use padding::{Padding, PaddingGuard, PaddingReport, PROBE_FEATURES};
pub use rank::Rank;
pub use report::{InferReport, Phases, SharedMemoryReport};
pub use run::{run, run_controlled, run_prebuilt, Control, PartialOutcome, RunConfig, RunOutcome};

use crate::backend::shm::SharedMemory;
use crate::backend::Binding;
use crate::error::{Error, Result};

/// Settings of one inference run.
#[derive(Debug, Clone)]
pub struct InferConfig {
    /// Features per request.
    pub batch_size: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// Requests sent together: a full window waits until this many are answered, then
    /// sends as many (1: one as soon as one is answered). See [`refill_group`].
    pub refill: usize,
    /// Requests sent (and discarded) before the measured run.
    pub warmup: usize,
    pub padding: Padding,
    /// Guards dynamic padding against changing answers (ignored for fixed padding).
    pub guard: Option<PaddingGuard>,
    /// Tensors through system shared memory ([`crate::backend::shm`]).
    pub shared_memory: SharedMemory,
    /// The longest sequence a request may carry (sizes the shared memory slots).
    pub max_seq_len: usize,
}

/// Checks a batch size against the model and returns the effective one.
pub fn effective_batch_size(requested: Option<usize>, binding: &Binding) -> Result<usize> {
    let limit = binding.batch_limit();
    match requested {
        None => Ok(limit),
        Some(0) => Err(Error::Config("--batch-size must be at least 1".into())),
        Some(n) if n > limit => Err(Error::Config(format!(
            "--batch-size {n} exceeds model {:?}'s max batch size {limit}",
            binding.model
        ))),
        Some(n) => Ok(n),
    }
}

/// Requests of `batch_size` features that fill one of the model's largest batches.
fn per_model_batch(batch_size: usize, binding: &Binding) -> usize {
    binding.batch_limit().div_ceil(batch_size.max(1)).max(1)
}

/// Requests sent together ([`InferConfig::refill`]): as many as fill one of the model's
/// largest batches, at most half the window (so that the other half keeps the server
/// busy meanwhile); 1 at the model's batch size. Sent one by one as answers came, each
/// request costs the client a wake-up, a write and the server's own wake-up; sent
/// together they leave in one write, the server's batcher runs them as one batch, and
/// their answers come back together (figures in docs/performance.md).
pub fn refill_group(concurrency: usize, batch_size: usize, binding: &Binding) -> usize {
    per_model_batch(batch_size, binding)
        .min(concurrency / 2)
        .max(1)
}
