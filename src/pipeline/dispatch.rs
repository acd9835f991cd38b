//! The dispatch stage: features → batches → requests kept in flight → answers.
//!
//! Contract:
//! - Features are packed into batches of at most `batch_size` and sent with at most
//!   `concurrency` requests in flight; a full window waits for `refill` answers, then
//!   sends as many requests in a row (they leave in one write, and the server's batcher
//!   takes them together).
//! - Each request's latency runs from the moment it is handed to the transport to the
//!   moment its response arrives. Time a batch waits for a free slot is not latency.
//! - Answers are handed on as [`RunEvent::Answer`]s as they arrive, in any order; once
//!   the padding probe has decided, one [`RunEvent::PaddingDecided`] follows.
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
use super::report::{InFlight, InferReport, SharedMemoryReport};
use crate::backend::proto::ModelInferResponse;
use crate::backend::shm::{self, InputRegion, SharedMemory};
use crate::backend::{prepare_request, tensor, Binding, Infer, InferRequest};
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
        Some(0) => Err(Error::Config("`batch_size` must be at least 1".into())),
        Some(n) if n > limit => Err(Error::Config(format!(
            "`batch_size` {n} exceeds model {:?}'s max batch size {limit}",
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

/// An answered feature.
#[derive(Debug)]
pub struct Answer {
    pub feature: Arc<Feature>,
    /// Its logits and, when ranked, their candidates; or the candidates alone where
    /// they stand for the logits (see [`Rank`]).
    pub scores: Scores,
}

/// What the dispatch stage hands on, as it happens.
#[derive(Debug)]
pub enum RunEvent {
    /// A feature was answered.
    Answer(Answer),
    /// The padding probe ([`super::PaddingGuard`]) decided: `true` for dynamic padding,
    /// `false` for the full length. Sent once, and only when a probe ran.
    PaddingDecided { dynamic: bool },
}

/// A request ready to go: its input tensors in a shared memory slot when the region has
/// one free (and they fit), in the message otherwise.
pub(crate) struct Placed {
    request: InferRequest,
    placed: InferRequest,
    slot: Option<shm::Slot>,
}

impl Placed {
    pub fn new(region: Option<&InputRegion>, request: InferRequest) -> Self {
        let mut slot = region.and_then(|r| r.take());
        let placed = match slot.as_mut() {
            Some(slot) => slot.place(request.clone()),
            None => request.clone(),
        };
        Placed {
            request,
            placed,
            slot,
        }
    }

    /// Sends it (again in the message if the server lost the region): the response, when
    /// it was handed to the transport, and whether its inputs went through shared memory.
    pub async fn send<B: Infer>(
        &self,
        client: &B,
        region: Option<&InputRegion>,
    ) -> Result<(ModelInferResponse, Instant, bool)> {
        let ((response, sent), in_shm) =
            shm::send_placed(region, &self.request, &self.placed, |r| {
                client.infer_timed(r)
            })
            .await?;
        Ok((response, sent, in_shm))
    }

    /// Hands the checked answer to `read` where it lies, then frees the slot.
    pub fn read<T>(
        self,
        response: &ModelInferResponse,
        in_shm: bool,
        read: impl FnOnce(&tensor::Checked<'_>, &[Arc<Feature>]) -> T,
    ) -> Result<(T, Vec<Arc<Feature>>)> {
        let Placed { request, slot, .. } = self;
        let read = shm::read_answer(slot, &request, response, in_shm, |c| {
            read(c, request.features())
        })?;
        Ok((read, request.into_features()))
    }
}

/// A completed request.
struct Answered {
    batch: Vec<Arc<Feature>>,
    /// Per feature: its logits, its candidates, or both.
    rows: Vec<Scores>,
    sent: Instant,
    received: Instant,
    /// The non-finite logits it held (replaced by −∞).
    non_finite: crate::decode::non_finite::NonFinite,
    /// Features whose padding pushed real positions out of the top n-best (counted for
    /// dynamically padded requests under a [`super::PaddingGuard`]).
    displaced: u64,
    /// Whether its input tensors went through shared memory.
    in_shm: bool,
}

/// Runs inference over `features`, handing each `(feature, logits)` to `results` as
/// responses arrive (the padding decision, [`RunEvent::PaddingDecided`], is not handed
/// on). Returns when every feature has been answered, or at the first error (requests
/// still in flight are then abandoned).
pub async fn infer_all<B: Infer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    features: mpsc::Receiver<Arc<Feature>>,
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
    let (report, ()) = tokio::join!(
        infer_events(client, binding, config, None, features, events),
        forward
    );
    report
}

/// The dispatch stage: sends `features` and hands each answer, and the padding
/// decision, to `events`. With `rank`, each feature's candidates are ranked as its
/// answer is read and its logits kept only where needed ([`Rank`]).
pub async fn infer_events<B: Infer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    rank: Option<Rank>,
    features: mpsc::Receiver<Arc<Feature>>,
    events: mpsc::Sender<RunEvent>,
) -> Result<InferReport> {
    if config.batch_size == 0 || config.batch_size > binding.batch_limit() {
        return Err(Error::Config(format!(
            "batch size {} outside 1..={} for model {:?}",
            config.batch_size,
            binding.batch_limit(),
            binding.model
        )));
    }
    // A slot per request in flight (at most shm::MAX_SLOTS), and one spare, each for a
    // full batch at the longest length a request can be padded to.
    let longest = match config.padding {
        Padding::Fixed(n) => n.max(config.max_seq_len),
        Padding::Longest { multiple } => config.max_seq_len.next_multiple_of(multiple.max(1)),
    };
    let opened = shm::InputRegion::open(
        config.shared_memory,
        client.single_server(),
        config.concurrency.clamp(1, shm::MAX_SLOTS - 1) + 1,
        shm::slot_bytes(&binding, config.batch_size, longest),
    )
    .await?;
    let (region, note) = match opened {
        shm::Opened::Region(r) => (Some(r), None),
        shm::Opened::Message(note) => (None, note),
    };
    let dispatch = Dispatch::new(client, binding, config, rank, region.clone(), events);
    let result = dispatch.run(features).await;
    let lost = region.as_ref().is_some_and(|r| r.is_abandoned());
    let outputs_used = region.as_ref().is_some_and(|r| r.outputs_used());
    let closed = match region {
        Some(r) => r.close().await,
        None => Ok(()),
    };
    let mut report = result?;
    // An unregistered region only holds a few MB of the server's memory until the
    // server restarts: worth a note, not a failed run.
    report.shared_memory = SharedMemoryReport {
        used: report.shared_memory.used,
        outputs: outputs_used,
        note: note
            .or_else(|| {
                lost.then(|| {
                    "the server lost the shared memory region (a restart?); later requests \
                     carried their tensors"
                        .to_string()
                })
            })
            .or_else(|| {
                closed
                    .err()
                    .map(|e| format!("the shared memory region was not unregistered: {e}"))
            }),
    };
    Ok(report)
}

/// The window of requests in flight, once the shared memory region (if any) is open.
struct Dispatch<'a, B: Infer> {
    client: &'a B,
    binding: Arc<Binding>,
    config: &'a InferConfig,
    rank: Option<Rank>,
    region: Option<InputRegion>,
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
        binding: Arc<Binding>,
        config: &'a InferConfig,
        rank: Option<Rank>,
        region: Option<InputRegion>,
        events: mpsc::Sender<RunEvent>,
    ) -> Self {
        let policy = PaddingPolicy::new(config.padding, config.guard);
        let mut report = InferReport::empty();
        report.padding = policy.report();
        Dispatch {
            client,
            binding,
            config,
            rank,
            region,
            events,
            inflight: JoinSet::new(),
            policy,
            report,
            intervals: InFlight::default(),
            first: None,
        }
    }

    async fn run(mut self, mut features: mpsc::Receiver<Arc<Feature>>) -> Result<InferReport> {
        let mut warmed = self.config.warmup == 0;
        while let Some(batch) = self.next_batch(&mut features).await {
            if !warmed {
                self.warm_up(&batch).await?;
                warmed = true;
            }
            self.make_room().await?;
            let padding = self.policy.next(&batch);
            self.spawn(batch, padding)?;
            if padding.probe {
                self.await_probe().await?;
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

    /// The next batch (`None` once the features end). The producer is far faster than
    /// any server, so waiting for a full batch costs nothing but the last one. Features
    /// are taken as many at a time as are queued, not one per wake-up.
    async fn next_batch(
        &mut self,
        features: &mut mpsc::Receiver<Arc<Feature>>,
    ) -> Option<Vec<Arc<Feature>>> {
        let size = self.config.batch_size;
        let mut batch: Vec<Arc<Feature>> = Vec::with_capacity(size);
        let waited = Instant::now();
        while batch.len() < size {
            let room = size - batch.len();
            if features.recv_many(&mut batch, room).await == 0 {
                break;
            }
        }
        if self.first.is_some() {
            self.report.starved += waited.elapsed();
        }
        (!batch.is_empty()).then_some(batch)
    }

    /// Sends the warm-up copies of `batch`, one at a time, and discards their answers.
    async fn warm_up(&mut self, batch: &[Arc<Feature>]) -> Result<()> {
        let t = Instant::now();
        let seq = self.config.padding.length(batch);
        for _ in 0..self.config.warmup {
            let request = prepare_request(&self.binding, batch.to_vec(), seq)?;
            let (response, _) = self.client.infer_timed(request.clone()).await?;
            tensor::decode_response(&request, &response)?;
        }
        self.report.warmup = t.elapsed();
        Ok(())
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
        let request = prepare_request(&self.binding, batch, padding.seq_len)?;
        // The probe reads the logits themselves, and so does a padding check of another
        // n-best size.
        let check = padding.check;
        let rank = self.rank.map(|r| Rank {
            keep_logits: r.keep_logits || padding.probe || check.is_some_and(|n| n != r.k),
            ..r
        });
        let client = self.client.clone();
        let region = self.region.clone();
        self.first.get_or_insert_with(Instant::now);
        self.inflight.spawn(async move {
            let placed = Placed::new(region.as_ref(), request);
            let (response, sent, in_shm) = placed.send(&client, region.as_ref()).await?;
            let received = Instant::now();
            let mut scratch = Vec::new();
            let ((rows, non_finite), batch) = placed.read(&response, in_shm, |c, features| {
                read_rows(c, features, rank, &mut scratch)
            })?;
            let displaced = check.map_or(0, |n| {
                rows.iter()
                    .zip(&batch)
                    .filter(|(s, f)| padding_displaces_ranked(s, f.len(), n))
                    .count() as u64
            });
            Ok(Answered {
                batch,
                rows,
                sent,
                received,
                non_finite,
                displaced,
                in_shm,
            })
        });
        Ok(())
    }

    /// The probe request just sent: its answers decide the padding of every later one.
    async fn await_probe(&mut self) -> Result<()> {
        let joined = self.inflight.join_next().await.expect("just spawned");
        let answered = answered(joined)?;
        let decided = self
            .policy
            .probed(&answered.rows, &answered.batch, &mut self.report.padding);
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
            batch,
            rows,
            sent,
            received,
            non_finite,
            displaced,
            in_shm,
        } = answered;
        let report = &mut self.report;
        report.shared_memory.used |= in_shm;
        report.non_finite.add(&non_finite);
        report.padding.displaced += displaced;
        report.requests += 1;
        report.features += batch.len() as u64;
        let us = (received - sent).as_micros().clamp(1, 3_600_000_000) as u64;
        report.latency_us.saturating_record(us);
        self.intervals.push((sent, received));
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
