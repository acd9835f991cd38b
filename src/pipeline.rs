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
//! - Results are handed on with their feature as they arrive, in any order; consumers
//!   collect by `unique_id`, so output never depends on concurrency or arrival order.
//! - Requests go through an [`Infer`] backend: one [`TritonClient`](crate::backend::TritonClient),
//!   or a [`Pool`](crate::backend::Pool) of endpoints that retries transient errors;
//!   latency is that of the attempt that succeeded. NaN and infinite logits are replaced
//!   by −∞ as responses arrive and counted in [`InferReport::non_finite`].
//! - A run that decodes ranks each answer's n-best candidates where the response lies
//!   (shared memory or the message), in the pass that checks for non-finite values
//!   ([`Rank`]); the logits are copied out only where something reads them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use crate::decode::Candidates;
use tokio::task::JoinSet;

use crate::backend::shm::{self, SharedMemory};
use crate::backend::{prepare_request, tensor, Binding, Infer, SeqLen};
use crate::error::{Error, Result};
use crate::types::{Feature, Logits};

/// A completed request.
struct Answered {
    batch: Vec<Arc<Feature>>,
    /// Per feature: its logits (empty where the candidates stand for them) and, when
    /// ranked, its candidates.
    logits: Vec<(Logits, Option<Candidates>)>,
    sent: Instant,
    received: Instant,
    /// The non-finite logits it held (replaced by −∞).
    non_finite: crate::decode::non_finite::NonFinite,
    /// Features whose padding pushed real positions out of the top n-best (counted for
    /// dynamically padded requests when there is a [`PaddingGuard`]).
    displaced: u64,
    /// Whether its input tensors went through shared memory.
    in_shm: bool,
}

/// How to pad a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Every batch padded to this length (a fixed-length model, or `--fixed-seq-len`).
    Fixed(usize),
    /// Each batch padded to its longest feature, rounded up to a multiple of this.
    Longest { multiple: usize },
}

impl Padding {
    /// The padding a model needs: its fixed length, or `max_seq_length` for a dynamic
    /// one unless dynamic padding is allowed.
    pub fn for_model(binding: &Binding, max_seq_length: usize, dynamic: bool) -> Padding {
        match binding.seq_len {
            SeqLen::Fixed(n) => Padding::Fixed(n),
            SeqLen::Dynamic if dynamic => Padding::Longest { multiple: 8 },
            SeqLen::Dynamic => Padding::Fixed(max_seq_length),
        }
    }

    fn length(self, batch: &[Arc<Feature>]) -> usize {
        match self {
            Padding::Fixed(n) => n,
            Padding::Longest { multiple } => {
                let longest = batch.iter().map(|f| f.len()).max().unwrap_or(1);
                longest.div_ceil(multiple.max(1)) * multiple.max(1)
            }
        }
    }
}

/// The guard on dynamic padding. The reference ranks its top `n_best` start and end
/// positions over the whole padded sequence (spec §6.2), so a model whose padding
/// positions score high pushes real positions out of the top, and padding less then
/// changes the answers. Under a guard with `probe` the first requests, up to
/// [`PROBE_FEATURES`] features, are padded to `full_len` as a probe: when, for any of
/// their features, padding only to the feature's own length (rounded up) would keep
/// other real positions in a top `n_best` than `full_len` does, the whole run pads to
/// `full_len` (the probe's answers are the reference's either way). Later dynamically padded requests count the features whose padding
/// still pushed real positions out ([`PaddingReport::displaced`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaddingGuard {
    /// The decoder's `n_best_size` (its top-k).
    pub n_best: usize,
    /// The reference's padded length (`--max-seq-length`).
    pub full_len: usize,
    /// Send the probe (false: only count displaced features, `--dynamic-seq-len`).
    pub probe: bool,
    /// An earlier run's decision, from its journal (true: dynamic, false: the full
    /// length): applied without probing again, so a resumed run pads as the first did.
    pub decided: Option<bool>,
}

/// The `unique_id` of the result [`infer_all`] hands on once its probe has decided, so
/// that the journal keeps the decision ([`PaddingGuard::decided`]): logits `[1.0]` for
/// dynamic padding, `[0.0]` for the full length. No feature has this id; the pipeline
/// journals it and decodes nothing from it.
pub const PADDING_DECISION_ID: u64 = u64::MAX;

/// The decision result (see [`PADDING_DECISION_ID`]).
fn padding_decision<T: FromAnswer>(dynamic: bool) -> T {
    let v = if dynamic { 1.0 } else { 0.0 };
    T::from_answer(
        Arc::new(Feature::from_pieces(
            PADDING_DECISION_ID,
            usize::MAX,
            &[],
            &[],
        )),
        Logits {
            unique_id: PADDING_DECISION_ID,
            start: vec![v],
            end: vec![v],
        },
        None,
    )
}

/// What [`infer_ranked`] hands on per answered feature.
pub trait FromAnswer: Send + 'static {
    /// The feature, its logits (empty where the candidates stand for them) and its
    /// candidates (none unless ranked).
    fn from_answer(feature: Arc<Feature>, logits: Logits, candidates: Option<Candidates>) -> Self;
}

impl FromAnswer for (Arc<Feature>, Logits) {
    fn from_answer(feature: Arc<Feature>, logits: Logits, _: Option<Candidates>) -> Self {
        (feature, logits)
    }
}

impl FromAnswer for (Arc<Feature>, Logits, Option<Candidates>) {
    fn from_answer(feature: Arc<Feature>, logits: Logits, c: Option<Candidates>) -> Self {
        (feature, logits, c)
    }
}

/// Ranking each answer where it is read ([`infer_ranked`]): candidates for n-best size
/// `k`, read straight from the response's memory, in the same pass that checks the
/// logits for non-finite values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// The n-best size.
    pub k: usize,
    /// Keep every feature's logits too. Otherwise they are kept only where the
    /// candidates cannot stand for them ([`crate::journal::stands_alone`]: non-finite
    /// values, short windows), and copied out of the response only then.
    pub keep_logits: bool,
}

/// Reads each row of a checked answer (`features` in row order): its logits and, with
/// `rank`, its candidates; non-finite logits replaced by −∞ and counted.
fn read_rows(
    checked: &tensor::Checked<'_>,
    features: &[Arc<Feature>],
    rank: Option<Rank>,
    scratch: &mut Vec<usize>,
) -> (
    Vec<(Logits, Option<Candidates>)>,
    crate::decode::non_finite::NonFinite,
) {
    let mut out = Vec::with_capacity(checked.rows());
    let mut non_finite = crate::decode::non_finite::NonFinite::default();
    for (row, f) in features.iter().take(checked.rows()).enumerate() {
        let unique_id = f.unique_id;
        // Ranked where the values lie, when they can be read there as they are.
        let ranked = rank.and_then(|r| {
            let (start, end) = checked.row_f32(row)?;
            Some(Candidates::of_rows(start, end, r.k, scratch))
        });
        if let (Some(r), Some(c)) = (rank, ranked.as_ref()) {
            if !r.keep_logits && crate::journal::stands_alone(c, r.k) {
                let empty = Logits {
                    unique_id,
                    start: Vec::new(),
                    end: Vec::new(),
                };
                out.push((empty, ranked));
                continue;
            }
        }
        let mut l = Logits {
            unique_id,
            start: Vec::new(),
            end: Vec::new(),
        };
        checked.row_into(row, &mut l.start, &mut l.end);
        let replaced = crate::decode::non_finite::sanitize(&mut l);
        if replaced > 0 {
            non_finite.values += replaced;
            non_finite.features += 1;
        }
        // Candidates of finite values are those of the sanitized ones; others are
        // ranked again, after the replacement.
        let candidates = match (rank, ranked) {
            (Some(_), Some(c)) if c.finite() => Some(c),
            (Some(r), _) => Some(Candidates::of(&l, r.k, scratch)),
            (None, _) => None,
        };
        out.push((l, candidates));
    }
    (out, non_finite)
}

/// The decision an earlier run's journal kept, if any.
pub fn journaled_padding_decision(journaled: &mut HashMap<u64, Logits>) -> Option<bool> {
    journaled
        .remove(&PADDING_DECISION_ID)
        .and_then(|l| l.start.first().map(|&v| v > 0.5))
}

/// How a run padded its requests, and what its [`PaddingGuard`] saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PaddingReport {
    /// After the probe, batches were padded to their longest feature; otherwise to
    /// `fixed_len`.
    pub dynamic: bool,
    /// The length of fixed-length requests (`None` when dynamic).
    pub fixed_len: Option<usize>,
    /// Features of the probe request (0: no probe).
    pub probe_features: u64,
    /// Probe features whose answers could change under shorter padding; any makes the
    /// run pad to the full length.
    pub probe_unsafe: u64,
    /// Dynamically padded features in which padding positions pushed real ones out of
    /// the top n-best: evidence that their answers may differ from
    /// padding to the full length.
    pub displaced: u64,
}

impl PaddingReport {
    /// `fixed`, `dynamic`, or `fixed_after_probe` (the guard's probe found padding
    /// ranked high, so the run padded to the full length).
    pub fn mode(&self) -> &'static str {
        match (self.dynamic, self.probe_unsafe) {
            (true, _) => "dynamic",
            (false, 0) => "fixed",
            (false, _) => "fixed_after_probe",
        }
    }

    /// A note for stderr when the guard changed the padding or saw answers at risk.
    pub fn note(&self, model: &str) -> Option<String> {
        if self.probe_unsafe > 0 {
            return Some(format!(
                "note: model {model:?} ranks padding positions among its top start/end \
                 logits ({} of the {} probe features), so padding less would change answers \
                 (spec §6.2): every batch was padded to {} as the reference does \
                 (`probe = false` pads to each batch's longest feature anyway)",
                self.probe_unsafe,
                self.probe_features,
                self.fixed_len.unwrap_or_default()
            ));
        }
        (self.displaced > 0).then(|| {
            format!(
                "warning: in {} features padding positions pushed real ones out of the top \
                 start/end logits of model {model:?}: with dynamic sequence length their \
                 answers may differ from padding to the full length (spec §6.2; \
                 `Padding::Fixed` gives the reference's)",
                self.displaced
            )
        })
    }
}

/// True when padding `logits` (of a feature with `real` real positions) only to `real`
/// rounded up to `multiple` keeps the same real positions in the top `n` as the full
/// padding does, for start and end. Shorter padding can only keep more of them, so any
/// length in between keeps the same ones too.
fn shorter_padding_is_safe(l: &Logits, real: usize, multiple: usize, n: usize) -> bool {
    let len = l.start.len().min(l.end.len());
    let shortest = real.div_ceil(multiple.max(1)) * multiple.max(1);
    let shortest = shortest.min(len);
    [&l.start[..len], &l.end[..len]].iter().all(|x| {
        crate::decode::real_in_top(&x[..shortest], real, n)
            == crate::decode::real_in_top(x, real, n)
    })
}

/// [`padding_displaces`] from the logits' candidates when ranked for `n` (the same
/// positions [`crate::decode::real_in_top`] ranks), from the logits otherwise.
fn padding_displaces_ranked(l: &Logits, c: Option<&Candidates>, real: usize, n: usize) -> bool {
    let Some(c) = c.filter(|c| c.k() == n) else {
        return padding_displaces(l, real, n);
    };
    let want = n.min(real);
    let (starts, ends) = c.lens();
    let real_in = |positions: &[u32]| positions.iter().filter(|&&i| (i as usize) < real).count();
    (starts > real && real_in(c.starts()) < want) || (ends > real && real_in(c.ends()) < want)
}

/// True when padding positions of `l` push real positions out of the top `n`.
fn padding_displaces(l: &Logits, real: usize, n: usize) -> bool {
    let want = n.min(real);
    [&l.start, &l.end].iter().any(|x| {
        x.len() > real && !surely_undisplaced(x, real, want) && {
            crate::decode::real_in_top(x, real, n) < want
        }
    })
}

/// A quick sufficient test that at least `want` real positions (those below `real`) rank
/// above every padding position of `x` in the stable descending order of §6.2 (NaN as
/// −∞): a real position at or above the padding's maximum ranks above all of it (on a
/// tie the lower position wins), so `want` such positions keep `want` real ones in the
/// top. One pass, stopping early; usually true, as padding scores low.
fn surely_undisplaced(x: &[f32], real: usize, want: usize) -> bool {
    let key = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let (head, pad) = x.split_at(real.min(x.len()));
    let top = max_ignoring_nan(pad);
    let mut above = 0usize;
    for &v in head {
        if key(v) >= top {
            above += 1;
            if above >= want {
                return true;
            }
        }
    }
    above >= want
}

/// The largest value of `x` with NaN left out (−∞ for none), eight lanes at a time so
/// that it runs on whole vectors (`max` passes over NaN in any order, so lanes give the
/// same answer as one pass).
fn max_ignoring_nan(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    let mut chunks = x.chunks_exact(8);
    for chunk in chunks.by_ref() {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = m.max(v);
        }
    }
    chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// Examples whose feature counts go to the decoder in one message.
const EXPECT_CHUNK: usize = 256;

/// Features the padding probe covers at least (its requests are sent one at a time,
/// padded to the full length, before any other).
pub const PROBE_FEATURES: u64 = 16;

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

/// What an inference run measured.
#[derive(Debug, Clone)]
pub struct InferReport {
    pub requests: u64,
    pub features: u64,
    /// Per-request latency, microseconds.
    pub latency_us: Histogram<u64>,
    /// From the first send to the last response.
    pub wall: Duration,
    /// Time with at least one request in flight.
    pub busy: Duration,
    /// Time the sender waited for features to be built.
    pub starved: Duration,
    /// Time spent on the warm-up requests (not part of any other figure).
    pub warmup: Duration,
    /// NaN or infinite logits the model returned (decoded as −∞).
    pub non_finite: crate::decode::non_finite::NonFinite,
    /// Time from the last response to the last question decoded: decoding that could
    /// not keep up with the server (set by [`run`]; zero from [`infer_all`] alone).
    pub decode_lag: Duration,
    /// How requests were padded.
    pub padding: PaddingReport,
    /// How tensors travelled: shared memory or the messages.
    pub shared_memory: SharedMemoryReport,
}

/// How tensors travelled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedMemoryReport {
    /// Some request's inputs went through a shared memory region.
    pub used: bool,
    /// Some request's outputs came back through it too.
    pub outputs: bool,
    /// Why they did not, when shared memory was asked for (or `auto`) and not used, or
    /// what went wrong closing the region.
    pub note: Option<String>,
}

impl InferReport {
    /// A report of no requests.
    pub fn empty() -> Self {
        InferReport {
            requests: 0,
            features: 0,
            latency_us: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            wall: Duration::ZERO,
            busy: Duration::ZERO,
            starved: Duration::ZERO,
            warmup: Duration::ZERO,
            non_finite: Default::default(),
            decode_lag: Duration::ZERO,
            padding: PaddingReport::default(),
            shared_memory: SharedMemoryReport::default(),
        }
    }

    /// Time bertqa's own work held the run back: the sender waiting for features to be
    /// built, plus decoding left over after the last response.
    pub fn client_limited(&self) -> Duration {
        self.starved + self.decode_lag
    }

    /// A warning when bertqa's own CPU, not the server, limited this run: the client-
    /// limited time is over a quarter of a wall time of at least half a second (shorter
    /// runs are dominated by start-up). Against the `null` model this is expected: it
    /// measures the client.
    pub fn client_bound_warning(&self) -> Option<String> {
        let wall = self.wall.as_secs_f64();
        let limited = self.client_limited().as_secs_f64();
        if wall < 0.5 || limited <= 0.25 * wall {
            return None;
        }
        Some(format!(
            "bertqa's own CPU was the limit for {:.0}% of the run ({limited:.2} s of \
             {wall:.2} s: the sender waited {:.2} s for features, decoding finished {:.2} s \
             after the last response); the server could go faster than these figures",
            100.0 * limited / wall,
            self.starved.as_secs_f64(),
            self.decode_lag.as_secs_f64()
        ))
    }

    /// A latency percentile in milliseconds (0 when nothing was measured).
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }
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
/// busy meanwhile). Sent one by one as answers came, each request cost the client a
/// wake-up, a write and the server's own wake-up; sent together they leave in one
/// write, the server's batcher runs them as one batch, and their answers come back
/// together: at batch 8 against `null` on SQuAD-dev-sized, `--concurrency 16` refilled 8
/// at a time took 17.9 µs of client CPU per feature against 21.5 with 4 in flight
/// refilled one at a time, and a fifth less wall time (13 alternating rounds; 16
/// refilled one at a time: 20.4). At the model's batch size it is 1; at the default 4 in
/// flight and batch 8 it is 2 (19.8 against 21.5 µs and 19.2 against 21.7 with one at a
/// time, 13 and 17 rounds).
pub fn refill_group(concurrency: usize, batch_size: usize, binding: &Binding) -> usize {
    per_model_batch(batch_size, binding)
        .min(concurrency / 2)
        .max(1)
}

/// Runs inference over `features`, handing each `(feature, logits)` to `results` as
/// responses arrive (and, once a [`PaddingGuard`]'s probe has decided, one result with
/// the id [`PADDING_DECISION_ID`] that is no feature's). Returns when every feature has been answered, or at the first
/// error (requests still in flight are then abandoned).
pub async fn infer_all<B: Infer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    features: mpsc::Receiver<Arc<Feature>>,
    results: mpsc::Sender<(Arc<Feature>, Logits)>,
) -> Result<InferReport> {
    infer_ranked(client, binding, config, None, features, results).await
}

/// [`infer_all`] that, with `rank`, also ranks each feature's candidates as its answer
/// is read and keeps its logits only where needed ([`Rank`]).
pub async fn infer_ranked<B: Infer, T: FromAnswer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    rank: Option<Rank>,
    features: mpsc::Receiver<Arc<Feature>>,
    results: mpsc::Sender<T>,
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
    let result = send_all(
        client,
        binding,
        config,
        rank,
        region.clone(),
        features,
        results,
    )
    .await;
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

/// [`infer_all`] once the shared memory region (if any) is open.
async fn send_all<B: Infer, T: FromAnswer>(
    client: &B,
    binding: Arc<Binding>,
    config: &InferConfig,
    rank: Option<Rank>,
    region: Option<shm::InputRegion>,
    mut features: mpsc::Receiver<Arc<Feature>>,
    results: mpsc::Sender<T>,
) -> Result<InferReport> {
    let concurrency = config.concurrency.max(1);
    let mut report = InferReport::empty();
    let mut inflight: JoinSet<Result<Answered>> = JoinSet::new();
    let mut first: Option<Instant> = None;
    let mut intervals: Vec<(Instant, Instant)> = Vec::new();
    let mut warmed = config.warmup == 0;
    let mut padding = config.padding;
    let guard = config
        .guard
        .filter(|_| matches!(padding, Padding::Longest { .. }));
    let mut probing = guard.is_some_and(|g| g.probe && g.decided.is_none());
    if let Some(g) = guard.filter(|g| g.probe && g.decided == Some(false)) {
        padding = Padding::Fixed(g.full_len);
    }
    report.padding.dynamic = matches!(padding, Padding::Longest { .. });
    if let Padding::Fixed(n) = padding {
        report.padding.fixed_len = Some(n);
    }

    loop {
        // Fill a batch; the producer is far faster than any server, so waiting for a
        // full batch costs nothing but the last one. Features are taken as many at a
        // time as are queued, not one per wake-up.
        let mut batch: Vec<Arc<Feature>> = Vec::with_capacity(config.batch_size);
        let waited = Instant::now();
        while batch.len() < config.batch_size {
            let room = config.batch_size - batch.len();
            if features.recv_many(&mut batch, room).await == 0 {
                break;
            }
        }
        if first.is_some() {
            report.starved += waited.elapsed();
        }
        if batch.is_empty() {
            break;
        }
        if !warmed {
            let t = Instant::now();
            for _ in 0..config.warmup {
                send(client, &binding, &batch, config.padding).await?;
            }
            report.warmup = t.elapsed();
            warmed = true;
        }
        // A full window waits for `refill` answers, then sends as many requests in a row
        // (they leave in one write, and the server's batcher takes them together).
        let low = match inflight.len() >= concurrency {
            true => concurrency - config.refill.clamp(1, concurrency),
            false => usize::MAX,
        };
        while inflight.len() > low {
            let joined = inflight.join_next().await.expect("non-empty");
            intervals.push(reap(joined, &mut report, &results).await?);
            // Memory stays flat however long the run: merged, the intervals of a busy
            // pipeline collapse to a handful.
            if intervals.len() >= COMPACT_INTERVALS {
                compact(&mut intervals);
            }
        }
        let seq = match guard {
            Some(g) if probing => g.full_len,
            // Rounding up never pads past the reference's length (a --max-seq-length
            // that is not a multiple of 8); features are never longer.
            Some(g) => padding.length(&batch).min(g.full_len),
            None => padding.length(&batch),
        };
        // Under a guard, dynamically padded features are checked for padding that
        // displaces real positions (n-best size).
        let check = guard
            .filter(|_| !probing && matches!(padding, Padding::Longest { .. }))
            .map(|g| g.n_best);
        let request = prepare_request(&binding, batch, seq)?;
        let c = client.clone();
        let mut slot = region.as_ref().and_then(|r| r.take());
        let region = region.clone();
        // The probe reads the logits themselves, and so does a padding check of another
        // n-best size.
        let rank = rank.map(|r| Rank {
            keep_logits: r.keep_logits || probing || check.is_some_and(|n| n != r.k),
            ..r
        });
        first.get_or_insert_with(Instant::now);
        inflight.spawn(async move {
            let placed = match slot.as_mut() {
                Some(slot) => slot.place(request.clone()),
                None => request.clone(),
            };
            let ((response, sent), in_shm) =
                shm::send_placed(region.as_ref(), &request, &placed, |r| c.infer_timed(r)).await?;
            let received = Instant::now();
            let mut scratch = Vec::new();
            let (logits, non_finite) = shm::read_answer(slot, &request, &response, in_shm, |c| {
                read_rows(c, request.features(), rank, &mut scratch)
            })?;
            let batch = request.into_features();
            let displaced = check.map_or(0, |n| {
                logits
                    .iter()
                    .zip(&batch)
                    .filter(|((l, c), f)| padding_displaces_ranked(l, c.as_ref(), f.len(), n))
                    .count() as u64
            });
            Ok(Answered {
                batch,
                logits,
                sent,
                received,
                non_finite,
                displaced,
                in_shm,
            })
        });
        if let (true, Some(g), Padding::Longest { multiple }) = (probing, guard, padding) {
            // The probe: its answers decide the padding of every later request.
            let joined = inflight.join_next().await.expect("just spawned");
            let answered =
                joined.map_err(|e| Error::Config(format!("inference task failed: {e}")))??;
            let unsafe_features = answered
                .logits
                .iter()
                .zip(&answered.batch)
                .filter(|((l, _), f)| !shorter_padding_is_safe(l, f.len(), multiple, g.n_best))
                .count() as u64;
            report.padding.probe_features += answered.batch.len() as u64;
            report.padding.probe_unsafe += unsafe_features;
            probing = unsafe_features == 0 && report.padding.probe_features < PROBE_FEATURES;
            if unsafe_features > 0 {
                padding = Padding::Fixed(g.full_len);
                report.padding.dynamic = false;
                report.padding.fixed_len = Some(g.full_len);
            }
            intervals.push(deliver(answered, &mut report, &results).await?);
            if !probing {
                // Decided: handed on for the journal (a dropped receiver has stopped).
                let _ = results.send(padding_decision(unsafe_features == 0)).await;
            }
        }
    }
    while let Some(joined) = inflight.join_next().await {
        intervals.push(reap(joined, &mut report, &results).await?);
    }
    report.busy = union_length(&mut intervals);
    report.wall = first.map(|t| t.elapsed()).unwrap_or_default();
    Ok(report)
}

async fn send<B: Infer>(
    client: &B,
    binding: &Arc<Binding>,
    batch: &[Arc<Feature>],
    padding: Padding,
) -> Result<()> {
    let request = prepare_request(binding, batch.to_vec(), padding.length(batch))?;
    let (response, _) = client.infer_timed(request.clone()).await?;
    tensor::decode_response(&request, &response).map(drop)
}

type Joined = std::result::Result<Result<Answered>, tokio::task::JoinError>;

async fn reap<T: FromAnswer>(
    joined: Joined,
    report: &mut InferReport,
    results: &mpsc::Sender<T>,
) -> Result<(Instant, Instant)> {
    let answered = joined.map_err(|e| Error::Config(format!("inference task failed: {e}")))??;
    deliver(answered, report, results).await
}

/// Counts a completed request and hands its results on.
async fn deliver<T: FromAnswer>(
    answered: Answered,
    report: &mut InferReport,
    results: &mpsc::Sender<T>,
) -> Result<(Instant, Instant)> {
    let Answered {
        batch,
        logits,
        sent,
        received,
        non_finite,
        displaced,
        in_shm,
    } = answered;
    report.shared_memory.used |= in_shm;
    report.non_finite.add(&non_finite);
    report.padding.displaced += displaced;
    report.requests += 1;
    report.features += batch.len() as u64;
    let us = (received - sent).as_micros().clamp(1, 3_600_000_000) as u64;
    report.latency_us.saturating_record(us);
    // Room for as many results as the channel takes at once, then one send each.
    let mut left = batch.len().min(logits.len());
    let mut answers = batch.into_iter().zip(logits);
    while left > 0 {
        let n = left.min(results.max_capacity());
        // A dropped receiver means the consumer stopped early; nothing left to do.
        let Ok(permits) = results.reserve_many(n).await else {
            break;
        };
        for (permit, (f, (l, c))) in permits.zip(&mut answers) {
            permit.send(T::from_answer(f, l, c));
        }
        left -= n;
    }
    Ok((sent, received))
}

/// Runs `future` to completion on this (non-runtime) thread, parking between polls: for
/// the producer thread's waits on the feature channel, which need no runtime.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Answers the forwarder gathers before handing them to the decoder (fewer when the
/// answers end).
const FORWARD_MIN: usize = 64;

/// Answers the forwarder takes from its channel at a time.
const FORWARD_CHUNK: usize = 256;

/// Request intervals kept before they are merged ([`compact`]).
const COMPACT_INTERVALS: usize = 4096;

/// Replaces `intervals` by their union as disjoint intervals (same [`union_length`]).
fn compact(intervals: &mut Vec<(Instant, Instant)>) {
    intervals.sort_by_key(|i| i.0);
    let mut merged: Vec<(Instant, Instant)> = Vec::with_capacity(16);
    for &(s, e) in intervals.iter() {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    *intervals = merged;
}

/// Total length of the union of time intervals (time with ≥ 1 request in flight).
fn union_length(intervals: &mut [(Instant, Instant)]) -> Duration {
    intervals.sort_by_key(|i| i.0);
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for &(s, e) in intervals.iter() {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

/// Callbacks for progress display; the library never draws anything itself.
pub trait Progress: Sync {
    /// `n` more features were built (the total grows while building).
    fn built(&self, _n: u64) {}
    /// `n` more features were answered by the server.
    fn answered(&self, _n: u64) {}
}

/// No progress display.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// Everything an end-to-end run needs besides the data and the server.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub features: crate::features::FeatureConfig,
    pub decode: crate::decode::DecodeConfig,
    pub infer: InferConfig,
    /// Keep every feature's logits in the outcome.
    pub keep_logits: bool,
    /// Keep every feature in the outcome (to map answers back to the context).
    pub keep_features: bool,
}

/// Seconds spent in each stage (stages overlap, so they do not add up to the wall time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Building features (tokenizing, windows), summed on the producer thread.
    pub features_s: f64,
    /// With at least one request in flight.
    pub inference_s: f64,
    /// Decoding spans, summed on the decoder thread.
    pub decode_s: f64,
}

/// The result of an end-to-end run.
#[derive(Debug)]
pub struct RunOutcome {
    /// One per question, in file order.
    pub predictions: Vec<crate::decode::Prediction>,
    pub features: u64,
    /// Questions that produced no feature (§10: no answer can be given).
    pub featureless: Vec<usize>,
    pub infer: InferReport,
    pub phases: Phases,
    /// From the first feature built to the last question decoded, warm-up excluded.
    pub wall: Duration,
    /// With `keep_logits`: every feature's logits as the model returned them (padded
    /// positions included), by ascending unique id.
    pub logits: Vec<Logits>,
    /// With `keep_features`: every feature, by ascending unique id.
    pub kept_features: Vec<Arc<Feature>>,
}

/// What the decoder thread hands back: predictions by example, decoding time, and the
/// logits and features it was asked to keep.
type Decoded = (
    Vec<Option<crate::decode::Prediction>>,
    Duration,
    Vec<Logits>,
    Vec<Arc<Feature>>,
    Instant,
);

/// A question's windows as they arrive: the expected count once known, and the answers.
type Gathering = (Option<usize>, Vec<Answer>);

/// An answered feature on its way to the decoder: its logits, and their candidates when
/// the forwarder ranked them for the journal.
type Answer = (Arc<Feature>, Logits, Option<Candidates>);

enum ToDecoder {
    /// All features of this example have been built: this many.
    Expect {
        example_index: usize,
        count: usize,
    },
    /// [`ToDecoder::Expect`] for several examples: (example index, count).
    Expects(Vec<(usize, usize)>),
    Answer(Answer),
    /// Several answers at once (one message per chunk drained from the responses).
    Answers(Vec<Answer>),
}

/// Runs the whole pipeline on `dataset`: builds features on one thread, keeps requests
/// in flight on the runtime, decodes each question on another thread as soon as all of
/// its windows are answered. Output is in file order whatever the arrival order.
pub fn run<B: Infer>(
    runtime: &tokio::runtime::Runtime,
    client: &B,
    binding: Arc<Binding>,
    dataset: &crate::types::Dataset,
    tokenizer: &crate::tokenize::BertTokenizer,
    config: &RunConfig,
    progress: &dyn Progress,
) -> Result<RunOutcome> {
    run_features(
        runtime, client, binding, dataset, tokenizer, None, config, progress,
    )
}

/// [`run`] with features built beforehand (all of the dataset's, in unique-id order),
/// so that several models can be run on the same features (`compare`).
#[allow(clippy::too_many_arguments)]
pub fn run_prebuilt<B: Infer>(
    runtime: &tokio::runtime::Runtime,
    client: &B,
    binding: Arc<Binding>,
    dataset: &crate::types::Dataset,
    tokenizer: &crate::tokenize::BertTokenizer,
    features: &[Arc<Feature>],
    config: &RunConfig,
    progress: &dyn Progress,
) -> Result<RunOutcome> {
    run_features(
        runtime,
        client,
        binding,
        dataset,
        tokenizer,
        Some(features),
        config,
        progress,
    )
}

#[allow(clippy::too_many_arguments)]
fn run_features<B: Infer>(
    runtime: &tokio::runtime::Runtime,
    client: &B,
    binding: Arc<Binding>,
    dataset: &crate::types::Dataset,
    tokenizer: &crate::tokenize::BertTokenizer,
    prebuilt: Option<&[Arc<Feature>]>,
    config: &RunConfig,
    progress: &dyn Progress,
) -> Result<RunOutcome> {
    let partial = run_inner(
        runtime,
        client,
        binding,
        dataset,
        tokenizer,
        prebuilt,
        config,
        progress,
        Control::default(),
    );
    partial.complete(dataset)
}

/// Receives each newly answered feature's logits (e.g. appends them to a journal), with
/// their candidates for the run's n-best size (none for the padding decision).
pub type Recorder<'a> = dyn FnMut(&Logits, Option<&Candidates>) -> Result<()> + 'a;

/// Steers an interruptible, journaled run ([`run_controlled`]).
#[derive(Default)]
pub struct Control<'a> {
    /// Logits already known (a journal's) by unique id: these features are not sent.
    pub known: HashMap<u64, Logits>,
    /// Called with each feature's logits as the server returns them, before decoding
    /// (the journal). An error stops the run like a server error.
    pub record: Option<&'a mut Recorder<'a>>,
    /// When this becomes `true`, no further request is sent; requests in flight are
    /// drained (their logits recorded and decoded) and the run returns, stopped.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
    /// Called on the decoder's thread with each question's index and prediction as soon
    /// as it is decoded, before the prediction is kept (e.g. to stream its n-best list
    /// out, [`crate::decode::NbestStream`]).
    pub on_decoded: Option<&'a mut OnDecoded<'a>>,
    /// The recorder can do with a feature's candidates alone where they stand for its
    /// logits ([`crate::journal::stands_alone`] for the run's n-best size: a journal
    /// writing compact records); otherwise it is given every feature's logits.
    pub record_from_candidates: bool,
}

/// Sees each decoded prediction first ([`Control::on_decoded`]).
pub type OnDecoded<'a> = dyn FnMut(usize, &mut crate::decode::Prediction) + Send + 'a;

/// What a controlled run got done, complete or not.
#[derive(Debug)]
pub struct PartialOutcome {
    /// One per question, in file order; `None` for questions not fully answered.
    pub predictions: Vec<Option<crate::decode::Prediction>>,
    /// Features built (all of them unless the run stopped early).
    pub features: u64,
    /// Features answered: taken from `Control::known` plus answered by the server.
    pub answered: u64,
    /// Features taken from `Control::known` (not sent).
    pub known: u64,
    pub featureless: Vec<usize>,
    /// Empty when the run failed.
    pub infer: InferReport,
    pub phases: Phases,
    pub wall: Duration,
    pub logits: Vec<Logits>,
    pub kept_features: Vec<Arc<Feature>>,
    /// The run was stopped through `Control::stop`.
    pub stopped: bool,
    /// The error that ended the run early.
    pub error: Option<Error>,
}

impl PartialOutcome {
    /// Questions fully answered.
    pub fn done(&self) -> usize {
        self.predictions.iter().filter(|p| p.is_some()).count()
    }

    /// The outcome of a run that finished: the error that ended it, or every question
    /// decoded.
    pub fn complete(self, dataset: &crate::types::Dataset) -> Result<RunOutcome> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let predictions = self
            .predictions
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                p.ok_or_else(|| {
                    Error::Config(format!(
                        "question {:?} was not decoded (its windows were not all answered)",
                        dataset.examples[i].qas_id
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RunOutcome {
            predictions,
            features: self.features,
            featureless: self.featureless,
            infer: self.infer,
            phases: self.phases,
            wall: self.wall,
            logits: self.logits,
            kept_features: self.kept_features,
        })
    }
}

/// [`run`] that can be stopped, skips features whose logits are already known, and
/// hands every new feature's logits to a recorder (`eval`'s journal, `--resume`,
/// Ctrl-C). Never fails as a whole: what was done is returned with the error that
/// ended it, so partial results can be written.
#[allow(clippy::too_many_arguments)]
pub fn run_controlled<B: Infer>(
    runtime: &tokio::runtime::Runtime,
    client: &B,
    binding: Arc<Binding>,
    dataset: &crate::types::Dataset,
    tokenizer: &crate::tokenize::BertTokenizer,
    config: &RunConfig,
    progress: &dyn Progress,
    control: Control<'_>,
) -> PartialOutcome {
    run_inner(
        runtime, client, binding, dataset, tokenizer, None, config, progress, control,
    )
}

/// Waits until `stop` turns true; forever if it never can.
async fn stopped(stop: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    match stop {
        Some(rx) => {
            if rx.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await
            }
        }
        None => std::future::pending::<()>().await,
    }
}

#[allow(clippy::too_many_arguments)]
fn run_inner<B: Infer>(
    runtime: &tokio::runtime::Runtime,
    client: &B,
    binding: Arc<Binding>,
    dataset: &crate::types::Dataset,
    tokenizer: &crate::tokenize::BertTokenizer,
    prebuilt: Option<&[Arc<Feature>]>,
    config: &RunConfig,
    progress: &dyn Progress,
    control: Control<'_>,
) -> PartialOutcome {
    use std::sync::mpsc as std_mpsc;

    let started = Instant::now();
    let Control {
        mut known,
        mut record,
        mut stop,
        mut on_decoded,
        record_from_candidates,
    } = control;
    // Answers are ranked as they are read; their logits are kept where something reads
    // them: the caller, or a recorder that needs them all.
    let rank = Rank {
        k: config.decode.n_best_size,
        keep_logits: config.keep_logits || (record.is_some() && !record_from_candidates),
    };
    let builder = match crate::features::FeatureBuilder::new(tokenizer, config.features) {
        Ok(b) => b,
        Err(e) => return PartialOutcome::failed(dataset, e),
    };
    let queue = (config.infer.batch_size * config.infer.concurrency * 4).max(256);
    // Features travel to the sender in chunks of a batch: one message (and at most one
    // wake-up of the runtime's thread) per batch, not per feature; a sender waiting for
    // features was woken for every one of them, about one futex call per feature.
    let chunk = config.infer.batch_size.max(1);
    let (feature_tx, mut feature_rx) = mpsc::channel::<Vec<Arc<Feature>>>(queue.div_ceil(chunk));
    // Between the producer and the sender, a gate that closes on a stop: few features
    // wait behind it, so little is sent after a stop.
    let (gated_tx, gated_rx) = mpsc::channel::<Arc<Feature>>(config.infer.batch_size.max(1));
    let (abort_tx, abort_rx) = tokio::sync::watch::channel(false);
    let (result_tx, result_rx) = mpsc::channel::<Answer>(queue);
    let (decoder_tx, decoder_rx) = std_mpsc::channel::<ToDecoder>();

    std::thread::scope(|scope| -> PartialOutcome {
        // Producer: features, and per-example feature counts for the decoder. A feature
        // whose logits are known goes straight to the decoder.
        let to_decoder = decoder_tx.clone();
        let producer = scope.spawn(move || {
            let mut busy = Duration::ZERO;
            let mut featureless = Vec::new();
            let mut total = 0u64;
            let mut reused = 0u64;
            let mut scratch: Vec<Arc<Feature>> = Vec::new();
            let mut built = Vec::new();
            let mut builder = builder;
            let mut next = 0usize;
            // Feature counts go to the decoder in chunks: one message (and one wake-up of
            // the decoder thread) per example cost about 5% of the client's CPU in futex
            // calls. A chunk is sent when full, before the producer waits for room, and
            // at the end (also after a stop, so that answered questions are decoded).
            // (A flushed chunk leaves an empty Vec that grows as needed: a producer that
            // waits often sends small chunks.)
            let mut expects: Vec<(usize, usize)> = Vec::new();
            let flush = |expects: &mut Vec<(usize, usize)>| {
                expects.is_empty()
                    || to_decoder
                        .send(ToDecoder::Expects(std::mem::take(expects)))
                        .is_ok()
            };
            // The chunk being filled for the sender, and full chunks not handed on yet.
            // A producer ahead of the sender would otherwise wait for room for each chunk
            // and be woken for each one the sender takes (and, before each wait, wake the
            // decoder with the counts): it keeps building until half the channel's worth
            // is ready, then waits for room for all of it at once.
            let mut filling: Vec<Arc<Feature>> = Vec::with_capacity(chunk);
            let mut ready: Vec<Vec<Arc<Feature>>> = Vec::new();
            let low_water = (feature_tx.max_capacity() / 2).max(1);
            // Hands on the ready chunks (`last`: waits for room for all of them); false
            // when inference stopped.
            let send = |ready: &mut Vec<Vec<Arc<Feature>>>,
                        expects: &mut Vec<(usize, usize)>,
                        last: bool| {
                match feature_tx.try_reserve_many(ready.len()) {
                    Ok(permits) => {
                        for (permit, c) in permits.zip(ready.drain(..)) {
                            permit.send(c);
                        }
                        return true;
                    }
                    Err(mpsc::error::TrySendError::Closed(())) => return false,
                    Err(mpsc::error::TrySendError::Full(())) => {}
                }
                if ready.len() < low_water && !last {
                    return true;
                }
                // About to wait for room: let the decoder have what is counted.
                if !flush(expects) {
                    return false;
                }
                // At most `low_water` chunks are ever ready (more would have waited here
                // already), and a reservation larger than the channel would fail.
                debug_assert!(ready.len() <= feature_tx.max_capacity());
                match block_on(feature_tx.reserve_many(ready.len())) {
                    Ok(permits) => {
                        for (permit, c) in permits.zip(ready.drain(..)) {
                            permit.send(c);
                        }
                        true
                    }
                    Err(_) => false,
                }
            };
            'examples: for example in &dataset.examples {
                let t = Instant::now();
                scratch.clear();
                match prebuilt {
                    None => {
                        built.clear();
                        builder.push_example(dataset, example, &mut built);
                        scratch.extend(built.drain(..).map(Arc::new));
                    }
                    Some(all) => {
                        while next < all.len() && all[next].example_index == example.example_index {
                            scratch.push(all[next].clone());
                            next += 1;
                        }
                    }
                }
                busy += t.elapsed();
                if scratch.is_empty() {
                    featureless.push(example.example_index);
                }
                let count = scratch.len();
                total += count as u64;
                progress.built(count as u64);
                for f in scratch.drain(..) {
                    if let Some(l) = known.remove(&f.unique_id) {
                        reused += 1;
                        progress.answered(1);
                        if to_decoder.send(ToDecoder::Answer((f, l, None))).is_err() {
                            break 'examples;
                        }
                        continue;
                    }
                    filling.push(f);
                    if filling.len() >= chunk {
                        ready.push(std::mem::replace(&mut filling, Vec::with_capacity(chunk)));
                        if !send(&mut ready, &mut expects, false) {
                            break 'examples; // inference stopped
                        }
                    }
                }
                expects.push((example.example_index, count));
                if expects.len() >= EXPECT_CHUNK && !flush(&mut expects) {
                    break;
                }
            }
            if !filling.is_empty() {
                ready.push(filling);
            }
            if !ready.is_empty() {
                send(&mut ready, &mut expects, true);
            }
            flush(&mut expects);
            (busy, featureless, total, reused)
        });

        // Decoder: one question as soon as all of its windows are answered.
        let decode_config = config.decode.clone();
        let keep_logits = config.keep_logits;
        let keep_features = config.keep_features;
        let decoder = scope.spawn(move || -> Result<Decoded> {
            let mut predictions: Vec<Option<crate::decode::Prediction>> =
                vec![None; dataset.examples.len()];
            // Indexed by example: no hashing on the way.
            let mut pending: Vec<Gathering> = vec![(None, Vec::new()); dataset.examples.len()];
            let mut busy = Duration::ZERO;
            let mut kept = Vec::new();
            let mut kept_features = Vec::new();
            let mut cache = crate::decode::DecodeCache::default();
            let mut one = |msg: ToDecoder| -> Result<()> {
                let example_index = match msg {
                    ToDecoder::Expect {
                        example_index,
                        count,
                    } => {
                        pending[example_index].0 = Some(count);
                        example_index
                    }
                    ToDecoder::Answer(answer) => {
                        let i = answer.0.example_index;
                        pending[i].1.push(answer);
                        i
                    }
                    ToDecoder::Answers(_) | ToDecoder::Expects(_) => {
                        unreachable!("split by the caller")
                    }
                };
                let entry = &mut pending[example_index];
                if entry.0 != Some(entry.1.len()) {
                    return Ok(());
                }
                let mut windows = std::mem::take(&mut entry.1);
                entry.0 = None;
                let t = Instant::now();
                windows.sort_by_key(|(f, _, _)| f.unique_id);
                let example = &dataset.examples[example_index];
                let doc_tokens = &dataset.paragraph_of(example).doc_tokens;
                let views: Vec<crate::decode::Window<'_>> = windows
                    .iter()
                    .map(|(f, l, c)| crate::decode::Window {
                        feature: f,
                        logits: l,
                        candidates: c.as_ref(),
                    })
                    .collect();
                let p = cache.decode_example(
                    &decode_config,
                    Some(example.paragraph_index),
                    doc_tokens,
                    &example.qas_id,
                    &views,
                    tokenizer,
                )?;
                drop(views);
                let mut p = p;
                if let Some(f) = on_decoded.as_mut() {
                    f(example_index, &mut p);
                }
                predictions[example_index] = Some(p);
                busy += t.elapsed();
                if keep_features {
                    kept_features.extend(windows.iter().map(|(f, _, _)| f.clone()));
                }
                if keep_logits {
                    // Padded positions included: the reference ranks start/end
                    // indexes over the whole padded sequence (spec §6.2).
                    kept.extend(windows.into_iter().map(|(_, l, _)| l));
                }
                Ok(())
            };
            for msg in decoder_rx {
                match msg {
                    ToDecoder::Answers(answers) => {
                        for answer in answers {
                            one(ToDecoder::Answer(answer))?;
                        }
                    }
                    ToDecoder::Expects(expects) => {
                        for (example_index, count) in expects {
                            one(ToDecoder::Expect {
                                example_index,
                                count,
                            })?;
                        }
                    }
                    msg => one(msg)?,
                }
            }
            let finished = Instant::now();
            kept.sort_by_key(|l| l.unique_id);
            kept_features.sort_by_key(|f| f.unique_id);
            Ok((predictions, busy, kept, kept_features, finished))
        });

        // Forward answers to the recorder and the decoder, counting them for the
        // progress display.
        let forward_tx = decoder_tx;
        let mut answered = 0u64;
        let mut record_error = None;
        let mut was_stopped = false;
        let inference = runtime.block_on(async {
            let forward = async {
                // Owned here, so that the channel closes when forwarding stops early and
                // the sender never waits for room that no one will make.
                let mut result_rx = result_rx;
                let mut answers = Vec::with_capacity(FORWARD_CHUNK);
                let mut open = true;
                'recv: while open {
                    // A few requests' answers per message: each message wakes the decoder
                    // thread (at --batch-size 8, once per request otherwise).
                    while open && answers.len() < FORWARD_MIN {
                        let room = FORWARD_CHUNK - answers.len();
                        open = result_rx.recv_many(&mut answers, room).await > 0;
                    }
                    if answers.is_empty() {
                        break;
                    }
                    // The padding decision is journaled, not decoded.
                    let decision = answers
                        .iter()
                        .position(|(f, _, _)| f.unique_id == PADDING_DECISION_ID)
                        .map(|i| answers.remove(i));
                    if let (Some(record), Some((_, l, _))) = (record.as_mut(), decision.as_ref()) {
                        if let Err(e) = record(l, None) {
                            record_error = Some(e);
                            let _ = abort_tx.send(true);
                            break 'recv;
                        }
                    }
                    let mut chunk: Vec<Answer> = Vec::with_capacity(answers.len());
                    if let Some(record) = record.as_mut() {
                        // Ranked as they were read, for the journal's compact records and
                        // the decoder, which reads nothing else of the logits: unless
                        // they are kept, those the journal needed go here, and a question
                        // waiting for its other windows holds only its candidates.
                        for (f, l, c) in answers.drain(..) {
                            if let Err(e) = record(&l, c.as_ref()) {
                                record_error = Some(e);
                                let _ = abort_tx.send(true);
                                // Those before the failure are decoded; a resumed run
                                // sends again any that the journal could not keep (the
                                // rest of the drain is dropped).
                                break;
                            }
                            let l = if keep_logits || c.is_none() {
                                l
                            } else {
                                Logits {
                                    unique_id: l.unique_id,
                                    start: Vec::new(),
                                    end: Vec::new(),
                                }
                            };
                            chunk.push((f, l, c));
                        }
                    } else {
                        chunk.append(&mut answers);
                    }
                    answered += chunk.len() as u64;
                    progress.answered(chunk.len() as u64);
                    let failed = record_error.is_some();
                    if forward_tx.send(ToDecoder::Answers(chunk)).is_err() || failed {
                        break 'recv;
                    }
                }
                drop(forward_tx);
            };
            let gate = async {
                let mut abort = Some(abort_rx);
                // One chunk at a time: at most a batch, what the gated channel holds, so
                // that room for all of it can be asked for at once.
                loop {
                    let waiting = tokio::select! {
                        biased;
                        _ = stopped(&mut stop) => { was_stopped = true; None }
                        _ = stopped(&mut abort) => None,
                        c = feature_rx.recv() => c,
                    };
                    let Some(mut waiting) = waiting else { break };
                    if waiting.is_empty() {
                        continue;
                    }
                    let permits = tokio::select! {
                        biased;
                        _ = stopped(&mut stop) => { was_stopped = true; None }
                        _ = stopped(&mut abort) => None,
                        r = gated_tx.reserve_many(waiting.len()) => r.ok(),
                    };
                    let Some(permits) = permits else { break };
                    for (permit, f) in permits.zip(waiting.drain(..)) {
                        permit.send(f);
                    }
                }
                // Closing both ends: the producer stops building, the sender drains.
                drop(feature_rx);
                drop(gated_tx);
            };
            let (report, (), ()) = tokio::join!(
                infer_ranked(
                    client,
                    binding,
                    &config.infer,
                    Some(rank),
                    gated_rx,
                    result_tx
                ),
                forward,
                gate
            );
            report
        });
        let responses_done = Instant::now();
        let (features_busy, featureless, total, reused) = producer.join().expect("producer thread");
        let (mut report, mut error) = match inference {
            Ok(r) => (r, record_error),
            Err(e) => (InferReport::empty(), Some(e)),
        };
        let wall = started.elapsed().saturating_sub(report.warmup);
        let (predictions, decode_busy, logits, kept_features, decoded) =
            match decoder.join().expect("decoder thread") {
                Ok(d) => d,
                Err(e) => {
                    error.get_or_insert(e);
                    (
                        vec![None; dataset.examples.len()],
                        Duration::ZERO,
                        Vec::new(),
                        Vec::new(),
                        responses_done,
                    )
                }
            };
        report.decode_lag = decoded.saturating_duration_since(responses_done);
        PartialOutcome {
            predictions,
            features: total,
            answered: answered + reused,
            known: reused,
            featureless,
            phases: Phases {
                features_s: features_busy.as_secs_f64(),
                inference_s: report.busy.as_secs_f64(),
                decode_s: decode_busy.as_secs_f64(),
            },
            infer: report,
            wall,
            logits,
            kept_features,
            stopped: was_stopped,
            error,
        }
    })
}

impl PartialOutcome {
    fn failed(dataset: &crate::types::Dataset, e: Error) -> Self {
        PartialOutcome {
            predictions: vec![None; dataset.examples.len()],
            features: 0,
            answered: 0,
            known: 0,
            featureless: Vec::new(),
            infer: InferReport::empty(),
            phases: Phases::default(),
            wall: Duration::ZERO,
            logits: Vec::new(),
            kept_features: Vec::new(),
            stopped: false,
            error: Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An in-process model: start logit = token id, end logit = segment id, read back
    /// from the request's prost form; records every request's row count and the most
    /// requests it held at once.
    #[derive(Clone, Default)]
    struct Echo {
        rows: Arc<std::sync::Mutex<Vec<usize>>>,
        live: Arc<std::sync::atomic::AtomicUsize>,
        peak: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Infer for Echo {
        async fn infer_timed(
            &self,
            request: crate::backend::InferRequest,
        ) -> Result<(crate::backend::proto::ModelInferResponse, Instant)> {
            use crate::backend::proto::model_infer_response::InferOutputTensor;
            use std::sync::atomic::Ordering::SeqCst;
            let sent = Instant::now();
            self.rows.lock().unwrap().push(request.rows());
            let live = self.live.fetch_add(1, SeqCst) + 1;
            self.peak.fetch_max(live, SeqCst);
            let m = request.to_proto();
            let as_f32 = |raw: &[u8]| -> bytes::Bytes {
                raw.chunks_exact(8)
                    .flat_map(|c| (i64::from_le_bytes(c.try_into().unwrap()) as f32).to_le_bytes())
                    .collect::<Vec<u8>>()
                    .into()
            };
            let shape = m.inputs[0].shape.clone();
            let tensor = |name: &str| InferOutputTensor {
                name: name.into(),
                datatype: "FP32".into(),
                shape: shape.clone(),
                ..Default::default()
            };
            tokio::task::yield_now().await;
            self.live.fetch_sub(1, SeqCst);
            Ok((
                crate::backend::proto::ModelInferResponse {
                    outputs: vec![tensor("start"), tensor("end")],
                    raw_output_contents: vec![
                        as_f32(&m.raw_input_contents[0]),
                        as_f32(&m.raw_input_contents[1]),
                    ],
                    ..Default::default()
                },
                sent,
            ))
        }
    }

    fn echo_binding() -> Binding {
        use crate::backend::binding::{
            FloatType, InputBinding, InputRole, IntType, OutputBinding, Outputs,
        };
        let input = |name: &str, role| InputBinding {
            name: name.into(),
            role,
            datatype: IntType::Int64,
            dims: vec![-1],
        };
        let output = |name: &str| OutputBinding {
            name: name.into(),
            datatype: FloatType::Fp32,
            dims: vec![-1],
        };
        Binding {
            model: "echo".into(),
            version: String::new(),
            platform: "test".into(),
            inputs: vec![
                input("ids", InputRole::InputIds),
                input("seg", InputRole::SegmentIds),
                input("mask", InputRole::InputMask),
            ],
            outputs: Outputs::Split {
                start: output("start"),
                end: output("end"),
            },
            max_batch_size: 8,
            seq_len: SeqLen::Dynamic,
            dynamic_batching: false,
        }
    }

    /// `n` short features: `[CLS]`, 1–3 question ids, `[SEP]`, 2–8 doc ids, `[SEP]`.
    fn echo_features(n: usize) -> Vec<Arc<Feature>> {
        (0..n)
            .map(|i| {
                let q: Vec<u32> = (0..1 + i % 3).map(|k| 2000 + (i * 10 + k) as u32).collect();
                let doc: Vec<u32> = (0..2 + i % 7).map(|k| 5000 + (i * 10 + k) as u32).collect();
                Arc::new(Feature::from_pieces(1_000_000_000 + i as u64, i, &q, &doc))
            })
            .collect()
    }

    type Echoed = (InferReport, Vec<(Arc<Feature>, Logits)>, Vec<usize>, usize);

    /// Runs `infer_all` against [`Echo`]: the report, the answers, each request's rows and
    /// the most requests in flight at once.
    fn run_echo(config: &InferConfig, features: &[Arc<Feature>]) -> Echoed {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let echo = Echo::default();
        let (report, answers) = rt.block_on(async {
            let (ftx, frx) = mpsc::channel(16);
            // A results channel smaller than a batch: results go out in several rounds.
            let (rtx, mut rrx) = mpsc::channel(5);
            let sent = features.to_vec();
            tokio::spawn(async move {
                for f in sent {
                    ftx.send(f).await.unwrap();
                }
            });
            let collect = tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(a) = rrx.recv().await {
                    got.push(a);
                }
                got
            });
            let report = infer_all(&echo, Arc::new(echo_binding()), config, frx, rtx)
                .await
                .unwrap();
            (report, collect.await.unwrap())
        });
        // Batch sizes, largest first: requests in flight together reach the echo in any
        // order.
        let mut rows = echo.rows.lock().unwrap().clone();
        rows.sort_unstable_by(|a, b| b.cmp(a));
        let peak = echo.peak.load(std::sync::atomic::Ordering::SeqCst);
        (report, answers, rows, peak)
    }

    /// Every feature answered once, with logits echoing its own ids (start) and segment
    /// ids (end), padding included.
    fn check_echoed(answers: &[(Arc<Feature>, Logits)], n: usize) {
        assert_eq!(answers.len(), n);
        let mut seen = std::collections::BTreeSet::new();
        for (f, l) in answers {
            assert_eq!(f.unique_id, l.unique_id);
            assert!(seen.insert(f.unique_id));
            assert_eq!(l.start.len() % 8, 0);
            for (p, (&s, &e)) in l.start.iter().zip(&l.end).enumerate() {
                assert_eq!(s, f.input_ids.get(p).map_or(0.0, |&id| id as f32));
                assert_eq!(e, f.segment_id(p) as f32);
            }
        }
    }

    /// Batches of 8, 3 in flight, dynamic padding.
    fn echo_config(warmup: usize, guard: Option<PaddingGuard>) -> InferConfig {
        InferConfig {
            batch_size: 8,
            concurrency: 3,
            refill: 1,
            warmup,
            padding: Padding::Longest { multiple: 8 },
            guard,
            shared_memory: SharedMemory::Auto,
            max_seq_len: 64,
        }
    }

    #[test]
    fn windows_are_refilled_a_model_batch_at_a_time_at_most_half_at_once() {
        let mut b = echo_binding();
        b.max_batch_size = 64;
        // At the model's batch size: each sent as one is answered.
        assert_eq!(refill_group(4, 64, &b), 1);
        // Batch 8 of 64: eight fill a model batch; half the window at most.
        assert_eq!(refill_group(16, 8, &b), 8);
        assert_eq!(refill_group(32, 8, &b), 8);
        assert_eq!(refill_group(4, 8, &b), 2);
        assert_eq!(refill_group(6, 30, &b), 3);
        assert_eq!(refill_group(3, 8, &b), 1);
        assert_eq!(refill_group(1, 8, &b), 1);
        // A model without batching: one feature per request, one at a time.
        b.max_batch_size = 0;
        assert_eq!(refill_group(4, 1, &b), 1);
    }

    #[test]
    fn refilling_in_groups_answers_the_same_within_the_window() {
        let features = echo_features(61);
        let one_by_one = InferConfig {
            batch_size: 2,
            concurrency: 6,
            ..echo_config(1, None)
        };
        let (_, mut want, rows, peak) = run_echo(&one_by_one, &features);
        assert!(peak <= 6 + 1, "window of 6 (+1 warm-up) exceeded: {peak}");
        assert_eq!(rows.len(), 31 + 1);
        for refill in [2, 3, 6, 9] {
            let config = InferConfig {
                refill,
                ..one_by_one.clone()
            };
            let (report, mut got, rows, peak) = run_echo(&config, &features);
            check_echoed(&got, 61);
            assert!(
                peak <= 6 + 1,
                "refill {refill}: window of 6 exceeded: {peak}"
            );
            assert_eq!(rows.len(), 31 + 1, "refill {refill}");
            assert_eq!(report.requests, 31);
            got.sort_by_key(|(f, _)| f.unique_id);
            want.sort_by_key(|(f, _)| f.unique_id);
            assert_eq!(
                got.iter().map(|(_, l)| l).collect::<Vec<_>>(),
                want.iter().map(|(_, l)| l).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn shared_memory_needs_one_server_auto_falls_back_system_fails() {
        // The echo backend is no single server: auto sends tensors in the message and
        // says why; system refuses to run.
        let (report, answers, _, _) = run_echo(&echo_config(0, None), &echo_features(10));
        assert_eq!(answers.len(), 10);
        assert!(!report.shared_memory.used);
        let note = report.shared_memory.note.unwrap();
        assert!(note.contains("not one server"), "{note}");
        let config = InferConfig {
            shared_memory: SharedMemory::System,
            ..echo_config(0, None)
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (_ftx, frx) = mpsc::channel(1);
        let (rtx, _rrx) = mpsc::channel(1);
        let err = rt
            .block_on(infer_all(
                &Echo::default(),
                Arc::new(echo_binding()),
                &config,
                frx,
                rtx,
            ))
            .unwrap_err();
        assert!(err.to_string().contains("`SharedMemory::System`"), "{err}");
    }

    #[test]
    fn infer_all_fills_batches_and_answers_every_feature_with_its_own_logits() {
        let n = 45;
        let config = echo_config(1, None);
        let (report, answers, rows, _) = run_echo(&config, &echo_features(n));
        assert_eq!((report.requests, report.features), (6, n as u64));
        // One warm-up copy of the first batch, then full batches and the remainder.
        assert_eq!(rows, [8, 8, 8, 8, 8, 8, 5]);
        check_echoed(&answers, n);
        assert_eq!(report.padding.mode(), "dynamic");
        assert_eq!(report.padding.probe_features, 0);
    }

    #[test]
    fn the_padding_probe_pads_its_first_features_fully_then_keeps_dynamic_length() {
        // Echoed logits rank padding (id 0, segment 0) below every real position, so
        // the probe finds shorter padding safe.
        let n = 45;
        let guard = PaddingGuard {
            n_best: 3,
            full_len: 64,
            probe: true,
            decided: None,
        };
        let config = echo_config(0, Some(guard));
        let (report, mut answers, rows, _) = run_echo(&config, &echo_features(n));
        assert_eq!(rows, [8, 8, 8, 8, 8, 5]);
        // The decision is handed on once, for the journal: dynamic.
        let mut decided = journaled_padding_decision(
            &mut answers
                .iter()
                .map(|(_, l)| (l.unique_id, l.clone()))
                .collect(),
        );
        assert_eq!(decided.take(), Some(true));
        answers.retain(|(f, _)| f.unique_id != PADDING_DECISION_ID);
        check_echoed(&answers, n);
        let p = report.padding;
        assert_eq!(
            (p.mode(), p.probe_features, p.probe_unsafe),
            ("dynamic", 16, 0)
        );
        assert_eq!(p.displaced, 0);
        // The two probe requests were padded to 64, the rest to their longest (16).
        for (f, l) in &answers {
            let want = if f.unique_id < 1_000_000_016 { 64 } else { 16 };
            assert_eq!(l.start.len(), want, "{}", f.unique_id);
        }
    }

    #[test]
    fn dynamic_padding_never_exceeds_the_full_length() {
        // A full length of 13 (not a multiple of 8): batches whose longest feature has
        // 9 to 13 tokens round up to 16 but are padded to 13, as the reference pads.
        let features: Vec<Arc<Feature>> = echo_features(45)
            .into_iter()
            .filter(|f| f.len() <= 13)
            .collect();
        let guard = PaddingGuard {
            n_best: 3,
            full_len: 13,
            probe: false,
            decided: None,
        };
        let (report, answers, _, _) = run_echo(&echo_config(0, Some(guard)), &features);
        assert_eq!(report.features, features.len() as u64);
        assert!(answers.iter().any(|(_, l)| l.start.len() == 13));
        assert!(answers
            .iter()
            .all(|(_, l)| l.start.len() == 8 || l.start.len() == 13));
    }

    #[test]
    fn a_journaled_padding_decision_is_applied_without_probing() {
        let n = 20;
        for (decided, len) in [(false, 64), (true, 16)] {
            let guard = PaddingGuard {
                n_best: 3,
                full_len: 64,
                probe: true,
                decided: Some(decided),
            };
            let (report, answers, rows, _) =
                run_echo(&echo_config(0, Some(guard)), &echo_features(n));
            assert_eq!(rows, [8, 8, 4], "no probe requests one at a time");
            // No decision handed on again, and every request padded as decided.
            assert_eq!(answers.len(), n);
            assert!(answers.iter().all(|(_, l)| l.start.len() <= len));
            assert!(answers.iter().any(|(_, l)| l.start.len() == len));
            let p = report.padding;
            assert_eq!((p.dynamic, p.probe_features), (decided, 0));
        }
    }

    #[test]
    fn compacting_intervals_keeps_their_union() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // Overlapping, nested, touching and disjoint intervals, out of order.
        let raw = [
            (5, 9),
            (0, 3),
            (2, 4),
            (20, 25),
            (9, 10),
            (6, 7),
            (30, 31),
            (21, 22),
        ];
        let mut intervals: Vec<_> = raw.iter().map(|&(s, e)| (ms(s), ms(e))).collect();
        let expected = union_length(&mut intervals.clone());
        assert_eq!(expected, Duration::from_millis(4 + 5 + 5 + 1));
        compact(&mut intervals);
        assert_eq!(intervals.len(), 4);
        assert_eq!(union_length(&mut intervals), expected);
        // Compacting in pieces, as infer_all does, gives the same.
        let mut pieces: Vec<_> = raw[..4].iter().map(|&(s, e)| (ms(s), ms(e))).collect();
        compact(&mut pieces);
        pieces.extend(raw[4..].iter().map(|&(s, e)| (ms(s), ms(e))));
        assert_eq!(union_length(&mut pieces), expected);
    }

    fn report(wall_ms: u64, starved_ms: u64, lag_ms: u64) -> InferReport {
        let mut r = InferReport::empty();
        r.wall = Duration::from_millis(wall_ms);
        r.starved = Duration::from_millis(starved_ms);
        r.decode_lag = Duration::from_millis(lag_ms);
        r
    }

    fn logits(start: Vec<f32>, end: Vec<f32>) -> Logits {
        Logits {
            unique_id: 1,
            start,
            end,
        }
    }

    #[test]
    fn shorter_padding_is_safe_only_when_no_padding_enters_the_top_n() {
        // 5 real positions, padded to 16; top 3.
        let real = [5.0, 4.0, 3.0, 2.0, 1.0];
        let mut low = real.to_vec();
        low.resize(16, -9.0);
        let l = logits(low.clone(), low.clone());
        assert!(shorter_padding_is_safe(&l, 5, 8, 3));
        assert!(!padding_displaces(&l, 5, 3));
        // A high padding logit beyond the shortest padding (8) pushes a real position
        // out of the top 3 at full length only.
        let mut high = low.clone();
        high[12] = 3.5;
        let l = logits(low.clone(), high.clone());
        assert!(!shorter_padding_is_safe(&l, 5, 8, 3));
        assert!(padding_displaces(&l, 5, 3));
        // Inside the shortest padding it is there either way: safe, but seen.
        let mut near = low.clone();
        near[6] = 3.5;
        let l = logits(near.clone(), low.clone());
        assert!(shorter_padding_is_safe(&l, 5, 8, 3));
        assert!(padding_displaces(&l, 5, 3));
        // Ties go to the lower position, so padding tied with a real value never wins.
        let mut tied = low.clone();
        tied[12] = 3.0;
        let l = logits(tied, low.clone());
        assert!(shorter_padding_is_safe(&l, 5, 8, 3));
        assert!(!padding_displaces(&l, 5, 3));
        // High padding everywhere: the shortest padding already pushes both real
        // positions out, so longer padding changes nothing, but it is seen.
        let mut all = vec![1.0, 2.0];
        all.resize(16, 9.0);
        let l = logits(all.clone(), all);
        assert!(shorter_padding_is_safe(&l, 2, 8, 3));
        assert!(padding_displaces(&l, 2, 3));
        // No more positions than n: all are in the top n however high padding is.
        let l = logits(vec![1.0, 2.0, 9.0], vec![1.0, 2.0, 9.0]);
        assert!(shorter_padding_is_safe(&l, 2, 8, 3));
        assert!(!padding_displaces(&l, 2, 3));
        // Unpadded logits have nothing to displace.
        let l = logits(real.to_vec(), real.to_vec());
        assert!(shorter_padding_is_safe(&l, 5, 8, 3));
        assert!(!padding_displaces(&l, 5, 3));
    }

    /// -3..=3 as floats, with 3 → NaN, 2 → +∞ and -3 → −∞: ties and non-finite values
    /// common.
    fn small_floats(values: &[i8]) -> Vec<f32> {
        values
            .iter()
            .map(|&v| match v {
                3 => f32::NAN,
                2 => f32::INFINITY,
                -3 => f32::NEG_INFINITY,
                v => f32::from(v),
            })
            .collect()
    }

    proptest::proptest! {
        /// The lanes' maximum is one pass's, with NaN, ±∞ and any length.
        #[test]
        fn max_ignoring_nan_is_a_plain_fold(
            values in proptest::collection::vec(-3i8..4, 0..70),
        ) {
            let x = small_floats(&values);
            let plain = x
                .iter()
                .filter(|v| !v.is_nan())
                .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
            proptest::prop_assert_eq!(max_ignoring_nan(&x), plain);
        }

        /// The quick test never claims "undisplaced" where the full ranking finds real
        /// positions pushed out: small integer values make ties, NaN and ±∞ common.
        #[test]
        fn padding_displaces_equals_the_full_ranking(
            values in proptest::collection::vec(-3i8..4, 1..48),
            real in 0usize..48,
            n in 0usize..24,
        ) {
            let x = small_floats(&values);
            let real = real.min(x.len());
            let want = n.min(real);
            let exact = x.len() > real && crate::decode::real_in_top(&x, real, n) < want;
            let l = logits(x.clone(), x);
            proptest::prop_assert_eq!(padding_displaces(&l, real, n), exact);
        }

        /// From candidates ranked for the same n-best size (logits dropped), the count is
        /// the logits'; candidates of another size leave it to the logits.
        #[test]
        fn padding_displaces_from_candidates_equals_from_logits(
            start in proptest::collection::vec(-3i8..4, 1..48),
            end in proptest::collection::vec(-3i8..4, 1..48),
            real in 0usize..48,
            n in 0usize..24,
        ) {
            let l = logits(small_floats(&start), small_floats(&end));
            let real = real.min(l.start.len()).min(l.end.len());
            let want = padding_displaces(&l, real, n);
            let mut scratch = Vec::new();
            let c = Candidates::of(&l, n, &mut scratch);
            let dropped = logits(Vec::new(), Vec::new());
            proptest::prop_assert_eq!(padding_displaces_ranked(&dropped, Some(&c), real, n), want);
            let other = Candidates::of(&l, n + 1, &mut scratch);
            proptest::prop_assert_eq!(padding_displaces_ranked(&l, Some(&other), real, n), want);
        }
    }

    /// Rows are ranked where they lie; the logits are copied out only where the
    /// candidates cannot stand for them (non-finite values, the k-th candidate at
    /// `f32::MIN`, a window too short for a compact record) or when asked to keep them.
    /// Non-finite values are replaced and counted, and the candidates are those of the
    /// replaced values, as ranking the kept logits gives.
    #[test]
    fn rows_keep_their_logits_only_where_the_candidates_cannot_stand_for_them() {
        use crate::backend::proto::model_infer_response::InferOutputTensor;
        let binding = echo_binding();
        let seq = 8;
        let rows: [Vec<f32>; 4] = [
            vec![0.5, 3.0, 1.0, 2.0, -1.0, 0.0, 2.5, 1.5],
            vec![0.5, f32::INFINITY, 1.0, 2.0, f32::NAN, 0.0, 2.5, 1.5],
            vec![f32::MIN; 8],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        ];
        let end: Vec<f32> = (0..seq).map(|i| (i % 3) as f32).collect();
        let le = |v: &[f32]| -> bytes::Bytes {
            v.iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>()
                .into()
        };
        let starts: Vec<f32> = rows.concat();
        let ends: Vec<f32> = (0..rows.len()).flat_map(|_| end.clone()).collect();
        let tensor = |name: &str| InferOutputTensor {
            name: name.into(),
            datatype: "FP32".into(),
            shape: vec![rows.len() as i64, seq as i64],
            ..Default::default()
        };
        let response = crate::backend::proto::ModelInferResponse {
            outputs: vec![tensor("start"), tensor("end")],
            raw_output_contents: vec![le(&starts), le(&ends)],
            ..Default::default()
        };
        let checked = tensor::check_batch(&binding, rows.len(), seq, &response).unwrap();
        assert!(checked.row_f32(0).is_some(), "the in-place path is tested");
        let features = echo_features(rows.len());
        let mut scratch = Vec::new();
        for (k, keep_logits) in [(3, false), (3, true), (4, false)] {
            let rank = Rank { k, keep_logits };
            let (read, non_finite) = read_rows(&checked, &features, Some(rank), &mut scratch);
            assert_eq!((non_finite.values, non_finite.features), (2, 1));
            for (row, (l, c)) in read.iter().enumerate() {
                assert_eq!(l.unique_id, features[row].unique_id);
                let c = c.as_ref().expect("ranked");
                // 2k < 8 only for k = 3; row 1 is not finite; row 2's candidates sit
                // at f32::MIN.
                let dropped = k == 3 && !keep_logits && (row == 0 || row == 3);
                assert_eq!(l.start.is_empty(), dropped, "k {k} row {row}");
                let mut full = Logits {
                    unique_id: l.unique_id,
                    start: rows[row].clone(),
                    end: end.clone(),
                };
                crate::decode::non_finite::sanitize(&mut full);
                if !dropped {
                    assert_eq!(l, &full);
                }
                assert_eq!(
                    c,
                    &Candidates::of(&full, k, &mut scratch),
                    "k {k} row {row}"
                );
            }
        }
        // Unranked: every row's logits, replaced where not finite.
        let (read, _) = read_rows(&checked, &features, None, &mut scratch);
        assert!(read
            .iter()
            .all(|(l, c)| l.start.len() == seq && c.is_none()));
        assert_eq!(read[1].0.start[1], f32::NEG_INFINITY);
    }

    #[test]
    fn padding_report_modes_and_notes() {
        let fixed = PaddingReport {
            fixed_len: Some(384),
            ..Default::default()
        };
        assert_eq!(fixed.mode(), "fixed");
        assert_eq!(fixed.note("m"), None);
        let fell_back = PaddingReport {
            probe_features: 16,
            probe_unsafe: 3,
            ..fixed
        };
        assert_eq!(fell_back.mode(), "fixed_after_probe");
        let note = fell_back.note("m").unwrap();
        assert!(note.contains("(3 of the 16 probe features)") && note.contains("padded to 384"));
        let dynamic = PaddingReport {
            dynamic: true,
            probe_features: 16,
            ..Default::default()
        };
        assert_eq!(dynamic.mode(), "dynamic");
        assert_eq!(dynamic.note("m"), None);
        let risky = PaddingReport {
            displaced: 7,
            ..dynamic
        };
        assert!(risky
            .note("m")
            .unwrap()
            .starts_with("warning: in 7 features"));
    }

    #[test]
    fn client_bound_warning_names_both_parts() {
        let w = report(2000, 400, 300)
            .client_bound_warning()
            .expect("35% is over a quarter");
        assert!(w.contains("35%"), "{w}");
        assert!(w.contains("0.40 s for features"), "{w}");
        assert!(w.contains("0.30 s"), "{w}");
        assert_eq!(
            report(2000, 400, 300).client_limited(),
            Duration::from_millis(700)
        );
    }

    #[test]
    fn no_client_bound_warning_when_the_server_is_the_limit_or_the_run_is_short() {
        assert!(report(2000, 250, 200).client_bound_warning().is_none());
        assert!(report(400, 400, 0).client_bound_warning().is_none());
        assert!(report(0, 0, 0).client_bound_warning().is_none());
    }
}
