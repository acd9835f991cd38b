//! Orchestration: features → batches → requests kept in flight → logits, overlapped.
//!
//! Contract:
//! - Features are built on a thread of their own (feature building is CPU work), grouped
//!   there into the batches that are sent, of at most `batch_size` (never above the
//!   model's max batch size), and sent with at most `concurrency` requests in flight.
//! - Each request's latency is measured from the moment it is handed to the transport
//!   to the moment its response arrives; the request is encoded by the transport
//!   (`transport`), so that serialization
//!   counts. Time a batch waits for a free slot is **not** latency (the seed client's
//!   "latency" measured that queue, algorithm §9.4).
//! - Features travel to the dispatch stage a batch per message, and channels are
//!   drained as many messages at a time as are queued (`recv_many`, and room for a whole
//!   batch of results reserved at once), not one per wake-up.
//! - `warmup` extra requests (copies of the first batch) are sent before the measured
//!   run; their results and timings are discarded.
//! - Answers are handed on with their feature as they arrive, in any order
//!   (`RunEvent`); consumers collect by `unique_id`, so output never depends on
//!   concurrency or arrival order.
//! - Requests go through an [`Infer`](crate::backend::Infer) backend: one [`TritonClient`](crate::backend::TritonClient),
//!   or a [`Pool`](crate::backend::Pool) of endpoints that retries transient errors;
//!   latency is that of the attempt that succeeded. NaN and infinite logits are replaced
//!   by −∞ as responses arrive and counted in [`InferReport::non_finite`].
//! - A run that decodes ranks each answer's n-best candidates where the response lies
//!   (shared memory or the message), in the pass that checks for non-finite values
//!   (`Rank`); the logits are copied out only where something reads them.
//! - A run is built once ([`Run`]) and stopped through one handle ([`Run::stop_on`]).
//!
//! The stages, one file each: `produce` (features, grouped into batches), `dispatch`
//! (requests in flight, with the `padding` policy and its probe, `shared_memory` for
//! the tensors, and `rank` reading each answer), `collect` (the gate that stops the
//! run, events to the observer, answers to the decoder), `decode` (questions), tied
//! together in `run`; `report` holds what a run measured and `observe` what the outside
//! sees of it ([`RunObserver`]). `perf` sends its requests through `shared_memory` and
//! pads them by [`Padding::length`] too.

mod collect;
mod decode;
mod dispatch;
mod observe;
mod padding;
mod produce;
mod rank;
mod report;
mod run;
mod settings;
mod shared_memory;
#[cfg(test)]
mod tests;
pub(crate) mod text;

pub use dispatch::effective_batch_size;
pub use dispatch::refill_group;
pub use dispatch::{infer_all, InferConfig};
pub use observe::{AnswerNeeds, NoProgress, RunObserver};
pub use padding::{Padding, PaddingGuard, PaddingReport};
pub use report::{InferReport, Phases};
pub(crate) use run::in_turn;
pub use run::{PartialOutcome, Run, RunConfig, RunOutcome};
pub use settings::Load;
pub use shared_memory::SharedMemoryReport;
pub(crate) use shared_memory::SharedRegion;
