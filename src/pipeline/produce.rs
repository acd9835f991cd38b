//! The produce stage, on a thread of its own (feature building is CPU work): the run's
//! window source. For a token model it builds each example's features (or takes
//! prebuilt ones), groups them into the batches the dispatch stage sends (one request
//! each), tells the decoder how many windows each example has, and sends a feature
//! whose logits are already known (a journal's) straight to the decoder. For a text
//! model it groups the questions, their texts with them ([`produce_questions`]); a
//! question whose reply is known goes straight to the decoder.

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::decode::ToDecoder;
use super::dispatch::{Answer, Batch};
use super::observe::RunObserver;
use crate::backend::text::TextReply;
use crate::decode::Scores;
use crate::features::FeatureBuilder;
use crate::slices::Placement;
use crate::types::{Dataset, Feature, Logits};

/// Examples whose feature counts go to the decoder in one message.
const EXPECT_CHUNK: usize = 256;

/// What the produce stage did.
#[derive(Default)]
pub(super) struct Produced {
    /// Time spent building features.
    pub busy: Duration,
    /// Examples that produced no feature.
    pub featureless: Vec<usize>,
    /// Where each example's windows lie (docs/algorithm.md §8.8), in data order; empty
    /// when the windows were given prebuilt.
    pub placements: Vec<Placement>,
    /// Features built.
    pub total: u64,
    /// Features whose logits were known (not sent).
    pub reused: u64,
}

/// Where the produce stage's output goes.
pub(super) struct Outlets {
    /// Batches for the dispatch stage.
    pub to_dispatch: mpsc::Sender<Batch>,
    pub to_decoder: std_mpsc::Sender<ToDecoder>,
    /// For waiting on a full channel to the dispatch stage (this thread is no runtime's).
    pub runtime: tokio::runtime::Handle,
}

/// Builds the features of `dataset` (or takes them, in unique-id order, from
/// `prebuilt`) and sends them in batches of `batch_size` in that order (the last one
/// shorter); known logits by unique id are not sent.
#[allow(clippy::too_many_arguments)]
pub(super) fn produce(
    dataset: &Dataset,
    mut builder: FeatureBuilder<'_>,
    prebuilt: Option<&[Arc<Feature>]>,
    mut known: HashMap<u64, Logits>,
    observer: &dyn RunObserver,
    outlets: Outlets,
    batch_size: usize,
) -> Produced {
    let mut out = Produced::default();
    let mut hand = Handover::new(outlets, batch_size);
    let mut scratch: Vec<Arc<Feature>> = Vec::new();
    let mut built = Vec::new();
    let mut next = 0usize;
    'examples: for example in &dataset.examples {
        let t = Instant::now();
        scratch.clear();
        match prebuilt {
            None => {
                built.clear();
                builder.push_example(dataset, example, &mut built);
                out.placements.push(builder.placement(dataset, example));
                scratch.extend(built.drain(..).map(Arc::new));
            }
            Some(all) => {
                while next < all.len() && all[next].example_index == example.example_index {
                    scratch.push(all[next].clone());
                    next += 1;
                }
            }
        }
        out.busy += t.elapsed();
        if scratch.is_empty() {
            out.featureless.push(example.example_index);
        }
        let count = scratch.len();
        out.total += count as u64;
        observer.built(count as u64);
        for feature in scratch.drain(..) {
            if let Some(logits) = known.remove(&feature.unique_id) {
                out.reused += 1;
                observer.answered(1);
                let answer = Answer {
                    feature,
                    scores: Scores::of_logits(logits),
                };
                if hand
                    .outlets
                    .to_decoder
                    .send(ToDecoder::Answer(answer))
                    .is_err()
                {
                    break 'examples;
                }
                continue;
            }
            if !hand.push(feature) {
                break 'examples; // inference stopped
            }
        }
        hand.expects.push((example.example_index, count));
        if hand.expects.len() >= EXPECT_CHUNK && !hand.flush_expects() {
            break;
        }
    }
    hand.finish();
    out
}

/// Features on their way to the dispatch stage, feature counts on theirs to the
/// decoder.
///
/// Features travel in the batches they are sent in: one message (and at most one
/// wake-up of the runtime's thread) per request, not per feature. Feature counts go to
/// the decoder in chunks (one message, and one wake-up of the decoder thread, per
/// example costs futex calls): a chunk is sent when full, before the producer waits for
/// room, and at the end (also after a stop, so that answered questions are decoded).
struct Handover {
    outlets: Outlets,
    batch_size: usize,
    expects: Vec<(usize, usize)>,
    /// The batch being filled.
    filling: Vec<Arc<Feature>>,
    /// Full batches not handed on yet. A producer ahead of the sender would otherwise
    /// wait for room for each batch and be woken for each one the sender takes (and,
    /// before each wait, wake the decoder with the counts): it keeps building until
    /// half the channel's worth is ready, then waits for room for all of it at once.
    ready: Vec<Vec<Arc<Feature>>>,
    low_water: usize,
}

impl Handover {
    fn new(outlets: Outlets, batch_size: usize) -> Self {
        let low_water = (outlets.to_dispatch.max_capacity() / 2).max(1);
        Handover {
            outlets,
            batch_size,
            expects: Vec::new(),
            filling: Vec::with_capacity(batch_size),
            ready: Vec::new(),
            low_water,
        }
    }

    /// Adds a feature to send; false when inference stopped.
    fn push(&mut self, feature: Arc<Feature>) -> bool {
        self.filling.push(feature);
        if self.filling.len() < self.batch_size {
            return true;
        }
        let full = std::mem::replace(&mut self.filling, Vec::with_capacity(self.batch_size));
        self.ready.push(full);
        self.send(false)
    }

    /// Hands the decoder the feature counts gathered; false when it is gone. (A flushed
    /// chunk leaves an empty Vec that grows as needed: a producer that waits often
    /// sends small chunks.)
    fn flush_expects(&mut self) -> bool {
        self.expects.is_empty()
            || self
                .outlets
                .to_decoder
                .send(ToDecoder::Expects(std::mem::take(&mut self.expects)))
                .is_ok()
    }

    /// Hands on the ready batches if there is room (`last`, or half a channel's worth
    /// ready: waits for room for all of them); false when inference stopped.
    fn send(&mut self, last: bool) -> bool {
        let tx = &self.outlets.to_dispatch;
        match tx.try_reserve_many(self.ready.len()) {
            Ok(permits) => {
                for (permit, c) in permits.zip(self.ready.drain(..)) {
                    permit.send(Batch::Features(c));
                }
                return true;
            }
            Err(mpsc::error::TrySendError::Closed(())) => return false,
            Err(mpsc::error::TrySendError::Full(())) => {}
        }
        if self.ready.len() < self.low_water && !last {
            return true;
        }
        // About to wait for room: let the decoder have what is counted.
        if !self.flush_expects() {
            return false;
        }
        let tx = &self.outlets.to_dispatch;
        // At most `low_water` batches are ever ready (more would have waited here
        // already), and a reservation larger than the channel would fail.
        debug_assert!(self.ready.len() <= tx.max_capacity());
        match self
            .outlets
            .runtime
            .block_on(tx.reserve_many(self.ready.len()))
        {
            Ok(permits) => {
                for (permit, c) in permits.zip(self.ready.drain(..)) {
                    permit.send(Batch::Features(c));
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Hands on what is left.
    fn finish(mut self) {
        if !self.filling.is_empty() {
            let filling = std::mem::take(&mut self.filling);
            self.ready.push(filling);
        }
        if !self.ready.is_empty() {
            self.send(true);
        }
        self.flush_expects();
    }
}

/// The window source of a text model: the questions of `dataset` in file order,
/// `per_request` to a batch with their (question, context) texts; a question whose reply
/// is `known` (a journal's) goes straight to the decoder. `Produced::total` and
/// `reused` count the known replies' windows (the server's are counted as they come).
pub(super) fn produce_questions(
    dataset: &Dataset,
    per_request: usize,
    mut known: HashMap<u64, TextReply>,
    observer: &dyn RunObserver,
    outlets: Outlets,
) -> Produced {
    // No time is counted as feature building: the server makes the windows.
    let mut out = Produced::default();
    // Waiting on the runtime only when the channel is full: entering it costs more
    // than the send.
    let send = |batch: Batch| match outlets.to_dispatch.try_send(batch) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(batch)) => outlets
            .runtime
            .block_on(outlets.to_dispatch.send(batch))
            .is_ok(),
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    };
    let mut examples = Vec::with_capacity(per_request);
    let mut pairs = Vec::with_capacity(per_request);
    observer.built(dataset.examples.len() as u64);
    for (i, example) in dataset.examples.iter().enumerate() {
        if let Some(reply) = known.remove(&(i as u64)) {
            out.reused += reply.window_count();
            observer.answered(1);
            if outlets
                .to_decoder
                .send(ToDecoder::Replies(vec![(i, reply)]))
                .is_err()
            {
                break;
            }
            continue;
        }
        examples.push(i);
        let context = &dataset.paragraph_of(example).context;
        pairs.push((
            example.question_text.as_str().into(),
            context.as_str().into(),
        ));
        if examples.len() == per_request.max(1) {
            let batch = Batch::Questions {
                examples: std::mem::take(&mut examples),
                pairs: std::mem::take(&mut pairs),
            };
            if !send(batch) {
                break;
            }
        }
    }
    if !examples.is_empty() {
        send(Batch::Questions { examples, pairs });
    }
    out.total = out.reused;
    out
}
