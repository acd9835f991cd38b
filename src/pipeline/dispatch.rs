//! The dispatch stage: batches → requests kept in flight → answers, for every model: a
//! token model's features, or a text model's questions (the window source seam, see
//! [`Batch`]), each request through [`Infer`] and the run's [`SharedRegion`].
//!
//! Contract:
//! - Work arrives in batches (one request each, at most `batch_size` features or
//!   questions) and
//!   are sent with at most `concurrency` requests in flight; a full window waits for
//!   `refill` answers, then sends as many requests in a row (they leave in one write,
//!   and the server's batcher takes them together).
//! - Each request's latency runs from the moment it is handed to the transport to the
//!   moment its response arrives. Time a batch waits for a free slot is not latency.
//! - Answers are handed on as they arrive, in any order: a token model's as
//!   [`RunEvent::Answer`]s (read by the answer reader of its binding, [`Rank`]), a text
//!   model's as [`RunEvent::Replies`] (read by its contract, `TextBinding::replies`);
//!   once the padding probe has decided, one [`RunEvent::PaddingDecided`] follows.
//! - `warmup` extra requests (copies of the first batch) are sent before the measured
//!   run; their results and timings are discarded.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::padding::{
    padding_displaces_ranked, Padding, PaddingGuard, PaddingPolicy, RequestPadding,
};
use super::rank::{read_rows, Rank};
use super::report::{InFlight, InferReport};
use super::shared_memory::{Placed, SharedRegion};
use crate::backend::proto::ModelInferResponse;
use crate::backend::shm::SharedMemory;
use crate::backend::text::TextReply;
use crate::backend::text_request::TextPair;
use crate::backend::{Binding, Infer, InferRequest, Model};
use crate::decode::Scores;
use crate::error::{Error, Result};
use crate::types::{Feature, Logits};

/// Settings of one inference run.
#[derive(Debug, Clone)]
pub struct InferConfig {
    /// Features per request.
    pub batch_size: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// Requests sent together: a full window waits until this many are answered, then
    /// sends as many (1: one as soon as one is answered). See `refill_group`.
    pub refill: usize,
    /// Requests sent (and discarded) before the measured run.
    pub warmup: usize,
    pub padding: Padding,
    /// Guards dynamic padding against changing answers (ignored for fixed padding).
    pub guard: Option<PaddingGuard>,
    /// Tensors through system shared memory (`crate::backend::shm`).
    pub shared_memory: SharedMemory,
    /// The longest sequence a request may carry (sizes the shared memory slots).
    pub max_seq_len: usize,
}

/// Checks a batch size against the model and returns the effective one.
pub fn effective_batch_size(requested: Option<usize>, model: &Model) -> Result<usize> {
    let limit = model.batch_limit();
    match requested {
        None => Ok(model.default_batch_size()),
        Some(0) => Err(Error::Config("`batch_size` must be at least 1".into())),
        Some(n) if n > limit => Err(Error::Config(format!(
            "`batch_size` {n} exceeds model {:?}'s max batch size {limit}",
            model.name()
        ))),
        Some(n) => Ok(n),
    }
}

/// Requests of `batch_size` features that fill one of the model's largest batches
/// (`server_batch`).
fn per_model_batch(batch_size: usize, server_batch: usize) -> usize {
    server_batch.div_ceil(batch_size.max(1)).max(1)
}

/// Requests sent together ([`InferConfig::refill`]): as many as fill one of the model's
/// largest batches, at most half the window (so that the other half keeps the server
/// busy meanwhile); 1 at the model's batch size. Sent one by one as answers came, each
/// request costs the client a wake-up, a write and the server's own wake-up; sent
/// together they leave in one write, the server's batcher runs them as one batch, and
/// their answers come back together (figures in docs/performance.md).
pub fn refill_group(concurrency: usize, batch_size: usize, binding: &Binding) -> usize {
    refill_of(concurrency, batch_size, binding.server_batch())
}

/// [`refill_group`] of a model whose batcher forms batches of `server_batch`.
pub(crate) fn refill_of(concurrency: usize, batch_size: usize, server_batch: usize) -> usize {
    per_model_batch(batch_size, server_batch)
        .min(concurrency / 2)
        .max(1)
}

/// An answered feature.
#[derive(Debug)]
pub(crate) struct Answer {
    pub feature: Arc<Feature>,
    /// Its logits and, when ranked, their candidates; or the candidates alone where
    /// they stand for the logits (see [`Rank`]).
    pub scores: Scores,
}

/// One request's worth of work, from the window source of the run's model.
#[derive(Debug)]
pub(crate) enum Batch {
    /// Features built here (a token model).
    Features(Vec<Arc<Feature>>),
    /// Questions (their indexes in the dataset) and their (question, context) texts,
    /// for a text model, which makes the windows itself.
    Questions {
        examples: Vec<usize>,
        pairs: Vec<TextPair>,
    },
}

impl Batch {
    fn len(&self) -> usize {
        match self {
            Batch::Features(f) => f.len(),
            Batch::Questions { examples, .. } => examples.len(),
        }
    }
}

/// What the dispatch stage hands on, as it happens.
#[derive(Debug)]
pub(crate) enum RunEvent {
    /// A feature was answered.
    Answer(Answer),
    /// A text model's request was answered: what it said of each question (by index).
    Replies(Vec<(usize, TextReply)>),
    /// The padding probe ([`super::PaddingGuard`]) decided: `true` for dynamic padding,
    /// `false` for the full length. Sent once, and only when a probe ran.
    PaddingDecided { dynamic: bool },
}

/// What a request's answer held, as read.
struct Read {
    batch: Vec<Arc<Feature>>,
    /// Per feature: its logits, its candidates, or both.
    rows: Vec<Scores>,
    /// A text model's replies, by question (no features, no rows).
    replies: Vec<(usize, TextReply)>,
    /// The non-finite logits it held (replaced by −∞).
    non_finite: crate::decode::non_finite::NonFinite,
    /// Features whose padding pushed real positions out of the top n-best (counted for
    /// dynamically padded requests under a [`super::PaddingGuard`]).
    displaced: u64,
}

/// A completed request: what its answer held, and when it was sent and answered.
struct Answered {
    read: Read,
    sent: Instant,
    received: Instant,
}

/// Runs inference over `batches` (one request each, at most `batch_size` features),
/// handing each `(feature, logits)` to `results` as responses arrive (the padding
/// decision, `RunEvent::PaddingDecided`, is not handed on). Returns when every feature
/// has been answered, or at the first error (requests still in flight are then
/// abandoned).
pub async fn infer_all<B: Infer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    batches: mpsc::Receiver<Vec<Arc<Feature>>>,
    results: mpsc::Sender<(Arc<Feature>, Logits)>,
) -> Result<InferReport> {
    let (events, mut received) = mpsc::channel(results.max_capacity());
    let forward = async move {
        while let Some(event) = received.recv().await {
            // Unranked, every answer holds its logits.
            if let RunEvent::Answer(Answer {
                feature,
                scores: Scores::Logits { logits, .. },
            }) = event
            {
                if results.send((feature, logits)).await.is_err() {
                    break;
                }
            }
        }
    };
    let (batched_tx, batched_rx) = mpsc::channel(batches.max_capacity());
    let wrap = async move {
        let mut batches = batches;
        while let Some(b) = batches.recv().await {
            if batched_tx.send(Batch::Features(b)).await.is_err() {
                break;
            }
        }
    };
    let model = Model::from(binding);
    let (report, (), ()) = tokio::join!(
        infer_events(client, &model, config, None, 0, batched_rx, events),
        forward,
        wrap
    );
    report
}

/// The dispatch stage: sends `batches` (one request each, at most `batch_size`
/// features or questions; a larger one is an error) and hands each answer, and the
/// padding decision, to `events`. With `rank`, each feature's candidates are ranked as
/// its answer is read and its logits kept only where needed ([`Rank`]). A text model's
/// shared memory slots hold `text_slot_bytes` (its largest request's inputs).
pub(crate) async fn infer_events<B: Infer>(
    client: &B,
    model: &Model,
    config: &InferConfig,
    rank: Option<Rank>,
    text_slot_bytes: usize,
    batches: mpsc::Receiver<Batch>,
    events: mpsc::Sender<RunEvent>,
) -> Result<InferReport> {
    let limit = model.batch_limit();
    if config.batch_size == 0 || config.batch_size > limit {
        return Err(Error::Config(format!(
            "batch size {} outside 1..={limit} for model {:?}",
            config.batch_size,
            model.name()
        )));
    }
    let (server, in_flight) = (client.single_server(), config.concurrency);
    let slot_bytes = if model.takes_text() {
        // The BYTES inputs of the run's largest request; outputs come in the message.
        text_slot_bytes
    } else {
        // A full batch at the longest length a request can be padded to.
        let longest = match config.padding {
            Padding::Fixed(n) => n.max(config.max_seq_len),
            Padding::Longest { multiple } => config.max_seq_len.next_multiple_of(multiple.max(1)),
        };
        model.slot_bytes(config.batch_size, longest)
    };
    let shm = SharedRegion::open_slots(config.shared_memory, server, in_flight, slot_bytes).await?;
    let dispatch = Dispatch::new(client, model.clone(), config, rank, shm.clone(), events);
    let result = dispatch.run(batches).await;
    let shared_memory = shm.close().await;
    let mut report = result?;
    report.shared_memory = shared_memory;
    Ok(report)
}

/// The window of requests in flight, once the shared memory region (if any) is open.
struct Dispatch<'a, B: Infer> {
    client: &'a B,
    model: Model,
    config: &'a InferConfig,
    rank: Option<Rank>,
    shm: SharedRegion,
    events: mpsc::Sender<RunEvent>,
    inflight: JoinSet<Result<Answered>>,
    policy: PaddingPolicy,
    report: InferReport,
    intervals: InFlight,
    /// The first send (after the warm-up).
    first: Option<Instant>,
}

impl<'a, B: Infer> Dispatch<'a, B> {
    fn new(
        client: &'a B,
        model: Model,
        config: &'a InferConfig,
        rank: Option<Rank>,
        shm: SharedRegion,
        events: mpsc::Sender<RunEvent>,
    ) -> Self {
        let policy = PaddingPolicy::new(config.padding, config.guard);
        let mut report = InferReport::empty();
        // Padding is reported where bertqa pads (the server tokenizes text).
        if !model.takes_text() {
            report.padding = policy.report();
        }
        Dispatch {
            client,
            model,
            config,
            rank,
            shm,
            events,
            inflight: JoinSet::new(),
            policy,
            report,
            intervals: InFlight::default(),
            first: None,
        }
    }

    async fn run(mut self, mut batches: mpsc::Receiver<Batch>) -> Result<InferReport> {
        let mut warmed = self.config.warmup == 0;
        while let Some(batch) = self.next_batch(&mut batches).await? {
            if !warmed {
                self.warm_up(&batch).await?;
                warmed = true;
            }
            self.make_room().await?;
            match batch {
                Batch::Features(batch) => {
                    let padding = self.policy.next(&batch);
                    self.spawn(batch, padding)?;
                    if padding.probe {
                        self.await_probe().await?;
                    }
                }
                Batch::Questions { examples, pairs } => self.spawn_text(examples, pairs)?,
            }
        }
        while let Some(joined) = self.inflight.join_next().await {
            self.reap(joined).await?;
        }
        let mut report = self.report;
        report.busy = self.intervals.busy();
        report.wall = self.first.map(|t| t.elapsed()).unwrap_or_default();
        Ok(report)
    }

    /// The next non-empty batch (`None` once the batches end); the time waited for it
    /// once requests are being sent counts as starved.
    async fn next_batch(&mut self, batches: &mut mpsc::Receiver<Batch>) -> Result<Option<Batch>> {
        let waited = Instant::now();
        let mut batch = None;
        while let Some(b) = batches.recv().await {
            if b.len() > 0 {
                batch = Some(b);
                break;
            }
        }
        if self.first.is_some() {
            self.report.starved += waited.elapsed();
        }
        match batch {
            Some(b) if b.len() > self.config.batch_size => Err(Error::Config(format!(
                "a batch of {} is over `batch_size` {}",
                b.len(),
                self.config.batch_size
            ))),
            batch => Ok(batch),
        }
    }

    /// Sends the warm-up copies of `batch`, one at a time, and discards their answers
    /// (read, so that a model that answers wrongly fails here).
    async fn warm_up(&mut self, batch: &Batch) -> Result<()> {
        let t = Instant::now();
        for _ in 0..self.config.warmup {
            let request = self.request(batch)?;
            let (response, _) = self.client.infer_timed(request.clone()).await?;
            self.model.check_answer(&request, &response)?;
        }
        self.report.warmup = t.elapsed();
        Ok(())
    }

    /// `batch`'s request, in the message, at the full padding of its batch.
    fn request(&self, batch: &Batch) -> Result<InferRequest> {
        match batch {
            Batch::Features(f) => self
                .model
                .token_request(f.clone(), self.config.padding.length(f)),
            Batch::Questions { pairs, .. } => self.model.text_request(pairs.clone()),
        }
    }

    /// A full window waits for `refill` answers before the next requests are sent.
    async fn make_room(&mut self) -> Result<()> {
        let concurrency = self.config.concurrency.max(1);
        if self.inflight.len() < concurrency {
            return Ok(());
        }
        let low = concurrency - self.config.refill.clamp(1, concurrency);
        while self.inflight.len() > low {
            let joined = self.inflight.join_next().await.expect("non-empty");
            self.reap(joined).await?;
        }
        Ok(())
    }

    /// Sends `batch` as one request padded as `padding` says.
    fn spawn(&mut self, batch: Vec<Arc<Feature>>, padding: RequestPadding) -> Result<()> {
        let request = self.model.token_request(batch, padding.seq_len)?;
        // The probe reads the logits themselves, and so does a padding check of another
        // n-best size.
        let check = padding.check;
        let rank = self.rank.map(|r| Rank {
            keep_logits: r.keep_logits || padding.probe || check.is_some_and(|n| n != r.k),
            ..r
        });
        self.send(request, move |response, in_shm, placed| {
            let mut scratch = Vec::new();
            let ((rows, non_finite), batch) = placed.read(response, in_shm, |c, features| {
                read_rows(c, features, rank, &mut scratch)
            })?;
            let displaced = check.map_or(0, |n| {
                rows.iter()
                    .zip(&batch)
                    .filter(|(s, f)| padding_displaces_ranked(s, f.len(), n))
                    .count() as u64
            });
            Ok(Read {
                batch,
                rows,
                replies: Vec::new(),
                non_finite,
                displaced,
            })
        });
        Ok(())
    }

    /// Sends `request` through the run's region as a task of the window, its answer
    /// read by `read` (given the response, whether it answered the request as placed,
    /// and the placed request) on the runtime.
    fn send<F>(&mut self, request: InferRequest, read: F)
    where
        F: FnOnce(&ModelInferResponse, bool, Placed) -> Result<Read> + Send + 'static,
    {
        let client = self.client.clone();
        let placed = self.shm.place(request);
        self.first.get_or_insert_with(Instant::now);
        self.inflight.spawn(async move {
            let (response, sent, in_shm) = placed.send(&client).await?;
            let received = Instant::now();
            Ok(Answered {
                read: read(&response, in_shm, placed)?,
                sent,
                received,
            })
        });
    }

    /// Sends a text model's questions `examples` (their texts `pairs`) as one request;
    /// its answer is read by the model's contract.
    fn spawn_text(&mut self, examples: Vec<usize>, pairs: Vec<TextPair>) -> Result<()> {
        let request = self.model.text_request(pairs)?;
        let model = self.model.clone();
        self.send(request, move |response, in_shm, placed| {
            placed.answered_text(in_shm);
            let replies = model.replies(response, examples.len())?;
            Ok(Read {
                batch: Vec::new(),
                rows: Vec::new(),
                replies: examples.into_iter().zip(replies).collect(),
                non_finite: Default::default(),
                displaced: 0,
            })
        });
        Ok(())
    }

    /// The probe request just sent: its answers decide the padding of every later one.
    async fn await_probe(&mut self) -> Result<()> {
        let joined = self.inflight.join_next().await.expect("just spawned");
        let answered = answered(joined)?;
        let decided = self.policy.probed(
            &answered.read.rows,
            &answered.read.batch,
            &mut self.report.padding,
        );
        self.deliver(answered).await;
        if let Some(dynamic) = decided {
            // A dropped receiver has stopped the run.
            let _ = self.events.send(RunEvent::PaddingDecided { dynamic }).await;
        }
        Ok(())
    }

    async fn reap(&mut self, joined: Joined) -> Result<()> {
        self.deliver(answered(joined)?).await;
        Ok(())
    }

    /// Counts a completed request and hands its answers on.
    async fn deliver(&mut self, answered: Answered) {
        let Answered {
            read:
                Read {
                    batch,
                    rows,
                    replies,
                    non_finite,
                    displaced,
                },
            sent,
            received,
        } = answered;
        let report = &mut self.report;
        report.non_finite.add(&non_finite);
        report.padding.displaced += displaced;
        report.requests += 1;
        report.features += batch.len() as u64;
        report.features += replies.iter().map(|(_, r)| r.window_count()).sum::<u64>();
        report
            .latency_us
            .saturating_record(crate::latency::micros(received - sent));
        self.intervals.push((sent, received));
        if !replies.is_empty() {
            // A dropped receiver means the consumer stopped early.
            let _ = self.events.send(RunEvent::Replies(replies)).await;
            return;
        }
        // Room for as many events as the channel takes at once, then one send each.
        let mut left = batch.len().min(rows.len());
        let mut answers = batch.into_iter().zip(rows);
        while left > 0 {
            let n = left.min(self.events.max_capacity());
            // A dropped receiver means the consumer stopped early; nothing left to do.
            let Ok(permits) = self.events.reserve_many(n).await else {
                break;
            };
            for (permit, (feature, scores)) in permits.zip(&mut answers) {
                permit.send(RunEvent::Answer(Answer { feature, scores }));
            }
            left -= n;
        }
    }
}

/// What a request task returns, as the run's dispatcher joins it.
type Joined = std::result::Result<Result<Answered>, tokio::task::JoinError>;

/// A joined request task's answers; a task that panicked is a fault of bertqa's own.
fn answered(joined: Joined) -> Result<Answered> {
    joined.map_err(|e| Error::task_failed("inference task", &e))?
}
