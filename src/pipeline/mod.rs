//! Orchestration: features → batches → requests kept in flight → logits, overlapped.
//!
//! Contract:
//! - Features arrive from an iterator run on a blocking thread (feature building is CPU
//!   work), are packed into batches of at most `batch_size` (never above the model's
//!   max batch size) and sent with at most `concurrency` requests in flight.
//! - Each request's latency is measured from the moment it is handed to the transport
//!   to the moment its response arrives; the request is encoded by the transport
//!   ([`transport`](crate::backend::transport)), so that serialization
//!   counts. Time a batch waits for a free slot is **not** latency (the seed client's
//!   "latency" measured that queue, algorithm §9.4).
//! - Channels are drained as many messages at a time as are queued (`recv_many`, and
//!   room for a whole batch of results reserved at once), not one per wake-up.
//! - `warmup` extra requests (copies of the first batch) are sent before the measured
//!   run; their results and timings are discarded.
//! - Answers are handed on with their feature as they arrive, in any order
//!   ([`RunEvent`]); consumers collect by `unique_id`, so output never depends on
//!   concurrency or arrival order.
//! - Requests go through an [`Infer`](crate::backend::Infer) backend: one [`TritonClient`](crate::backend::TritonClient),
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
pub use dispatch::{
    effective_batch_size, infer_all, infer_events, refill_group, Answer, InferConfig, RunEvent,
};
pub use observe::{AnswerNeeds, NoProgress, RunObserver};
pub use padding::{Padding, PaddingGuard, PaddingReport, PROBE_FEATURES};
pub use rank::Rank;
pub use report::{InferReport, Phases, SharedMemoryReport};
pub use run::{run, run_controlled, run_prebuilt, Control, PartialOutcome, RunConfig, RunOutcome};
