//! The run: the stages wired together, for every model. The window source works on one
//! thread (`produce`: features built here for a token model, questions grouped for a
//! text model), requests are kept in flight on the runtime (`dispatch`, through
//! [`Infer`]), events handed to the run's observer and the answers to the decoder
//! (`collect`), each question decoded on another thread as soon as all of its windows
//! are answered (`decode`; a text model's by its contract, `super::text`).

use std::collections::HashMap;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::collect::{collect, gate, Collected};
use super::decode::{DecodeStage, Decoded, ToDecoder};
use super::dispatch::InferConfig;
use super::dispatch::{infer_events, Batch, RunEvent};
use super::observe::{AnswerNeeds, NoProgress, RunObserver};
use super::produce::{produce, produce_questions, Outlets, Produced};
use super::rank::Rank;
use super::report::{InferReport, Phases};
use crate::backend::text::TextReply;
use crate::backend::{Infer, Model};
use crate::decode::{Postprocess, Prediction};
use crate::error::{Error, Result};
use crate::features::FeatureBuilder;
use crate::slices::Placement;
use crate::tokenize::TokenizerRef;
use crate::types::{Dataset, Feature, Logits};

/// Runs of at most this many questions run their stages in turn on the caller's thread
/// (`Run::run_partial`).
const IN_TURN_QUESTIONS: usize = 4;

/// The room between the producer and the dispatch stage of a run in turn: more batches
/// than a handful of questions makes (a channel allocates its room as it fills).
const IN_TURN_BATCHES: usize = 1 << 20;

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

impl RunConfig {
    /// The settings `bertqa eval` has by default, for `model`: the reference's windows
    /// and decoding, the model's largest batch, 4 requests in flight, each batch padded
    /// to its longest feature under the guard that keeps the answers those of full
    /// padding, and shared memory when the server is local. A text model is asked as
    /// many questions a request as its contract and batching allow.
    pub fn for_model(model: &Model) -> RunConfig {
        let features = crate::features::FeatureConfig::default();
        let decode = crate::decode::DecodeConfig::default();
        // The command line's load: batching, refill and padding are the model's.
        let load = super::Load::default();
        let infer = super::settings::infer_config(
            model,
            &load,
            features.max_seq_length,
            decode.n_best_size,
        )
        .expect("a model's own batch size is within its limit");
        RunConfig {
            infer,
            features,
            decode,
            keep_logits: false,
            keep_features: false,
        }
    }
}

/// The result of an end-to-end run.
#[derive(Debug)]
pub struct RunOutcome {
    /// One per question, in file order.
    pub predictions: Vec<Prediction>,
    pub features: u64,
    /// Questions that produced no feature (§10: no answer can be given).
    pub featureless: Vec<usize>,
    /// Where each question's windows lie, in data order (docs/algorithm.md §8.8); empty
    /// when this run did not cut them (a text model's, prebuilt, saved logits).
    pub(crate) placements: Vec<Placement>,
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

/// Where a run's windows come from (the window source seam).
enum Source<'t> {
    /// Built here from the dataset (or prebuilt) by the tokenizer: a token model.
    Features(Box<crate::features::FeatureBuilder<'t>>),
    /// Made by the server from the questions sent as text: a text model.
    Questions,
}

/// What the stages take from the run: its window source, what is already known, and
/// the channels between them.
struct Wiring<'t> {
    source: Source<'t>,
    text_slot_bytes: usize,
    known: HashMap<u64, Logits>,
    known_replies: HashMap<u64, TextReply>,
    batch_size: usize,
    produced: (mpsc::Sender<Batch>, mpsc::Receiver<Batch>),
    events: (mpsc::Sender<RunEvent>, mpsc::Receiver<RunEvent>),
    decoder: (std_mpsc::Sender<ToDecoder>, std_mpsc::Receiver<ToDecoder>),
}

/// A run's stages, ready to run: the window source and the decoder for threads (or one
/// after the other), the dispatch stage as a future on the runtime.
struct Stages<'s> {
    producing: Box<dyn FnOnce() -> Produced + Send + 's>,
    decode: DecodeStage<'s>,
    decoder_rx: std_mpsc::Receiver<ToDecoder>,
    inferring: std::pin::Pin<Box<dyn std::future::Future<Output = Inferred> + Send + 's>>,
}

/// What a run's calling thread drives the dispatch stage with.
enum Driver<'a> {
    /// The runtime itself: its `block_on` drives a current-thread runtime's connections.
    Runtime(&'a tokio::runtime::Runtime),
    /// A handle: another thread drives the connections.
    Handle(tokio::runtime::Handle),
}

impl Driver<'_> {
    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        match self {
            Driver::Runtime(r) => r.block_on(future),
            Driver::Handle(h) => h.block_on(future),
        }
    }

    fn handle(&self) -> tokio::runtime::Handle {
        match self {
            Driver::Runtime(r) => r.handle().clone(),
            Driver::Handle(h) => h.clone(),
        }
    }
}

/// Whether a run of `dataset` runs its stages in turn on one thread (`Run::run_partial`).
pub(crate) fn in_turn(dataset: &Dataset) -> bool {
    dataset.examples.len() <= IN_TURN_QUESTIONS
}

/// What the stages on the runtime (gate, dispatch, collect) did.
struct Inferred {
    report: Result<InferReport>,
    collected: Collected,
    stopped: bool,
}

/// What a run got done, complete or not ([`Run::run_partial`]).
#[derive(Debug)]
pub struct PartialOutcome {
    /// One per question, in file order; `None` for questions not fully answered.
    pub predictions: Vec<Option<Prediction>>,
    /// Features built (all of them unless the run stopped early).
    pub features: u64,
    /// Features answered: taken from [`Run::known`] plus answered by the server.
    pub answered: u64,
    /// Features taken from [`Run::known`] (not sent).
    pub known: u64,
    pub featureless: Vec<usize>,
    /// See [`RunOutcome`]'s.
    pub(crate) placements: Vec<Placement>,
    /// Empty when the run failed.
    pub infer: InferReport,
    pub phases: Phases,
    pub wall: Duration,
    pub logits: Vec<Logits>,
    pub kept_features: Vec<Arc<Feature>>,
    /// The run was stopped through [`Run::stop_on`].
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
    pub fn complete(self, dataset: &Dataset) -> Result<RunOutcome> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let predictions = self
            .predictions
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                p.ok_or_else(|| Error::NotDecoded {
                    qas_id: dataset.examples[i].qas_id.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(RunOutcome {
            predictions,
            features: self.features,
            featureless: self.featureless,
            placements: self.placements,
            infer: self.infer,
            phases: self.phases,
            wall: self.wall,
            logits: self.logits,
            kept_features: self.kept_features,
        })
    }
}

impl PartialOutcome {
    fn failed(dataset: &Dataset, e: Error) -> Self {
        PartialOutcome {
            predictions: vec![None; dataset.examples.len()],
            features: 0,
            answered: 0,
            known: 0,
            featureless: Vec::new(),
            placements: Vec::new(),
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

/// One end-to-end run, built once: [`Run::new`] with what every run needs, then the
/// optional settings, then [`run`](Run::run) (every question decoded, or the error) or
/// [`run_partial`](Run::run_partial) (what was done, complete or not).
///
/// Builds features on one thread, keeps requests in flight on the runtime, decodes each
/// question on another thread as soon as all of its windows are answered. Output is in
/// file order whatever the arrival order.
pub struct Run<'a, B: Infer> {
    runtime: Driver<'a>,
    client: &'a B,
    model: Model,
    dataset: &'a Dataset,
    tokenizer: Option<TokenizerRef<'a>>,
    config: &'a RunConfig,
    observer: &'a dyn RunObserver,
    prebuilt: Option<&'a [Arc<Feature>]>,
    builder: Option<FeatureBuilder<'a>>,
    known: HashMap<u64, Logits>,
    known_replies: HashMap<u64, TextReply>,
    stop: Option<CancellationToken>,
}

impl<'a, B: Infer> Run<'a, B> {
    /// A run of `dataset` against `client` (`model`, a token binding or a text
    /// binding) on `runtime`, as `config` says: every question asked, no observer, not
    /// stoppable. A token model's windows are built with the [`tokenizer`](Self::tokenizer)
    /// given; a text model's are the server's.
    pub fn new(
        runtime: &'a tokio::runtime::Runtime,
        client: &'a B,
        model: impl Into<Model>,
        dataset: &'a Dataset,
        config: &'a RunConfig,
    ) -> Self {
        Run::with_driver(Driver::Runtime(runtime), client, model, dataset, config)
    }

    /// [`new`](Self::new) with the handle of a runtime that another thread drives (a
    /// multi-thread runtime's, or one whose owner is in its `block_on` meanwhile): a
    /// current-thread runtime's handle alone does not drive its connections.
    pub(crate) fn on_handle(
        handle: &tokio::runtime::Handle,
        client: &'a B,
        model: impl Into<Model>,
        dataset: &'a Dataset,
        config: &'a RunConfig,
    ) -> Self {
        Run::with_driver(
            Driver::Handle(handle.clone()),
            client,
            model,
            dataset,
            config,
        )
    }

    fn with_driver(
        runtime: Driver<'a>,
        client: &'a B,
        model: impl Into<Model>,
        dataset: &'a Dataset,
        config: &'a RunConfig,
    ) -> Self {
        Run {
            runtime,
            client,
            model: model.into(),
            dataset,
            tokenizer: None,
            config,
            observer: &NoProgress,
            prebuilt: None,
            builder: None,
            known: HashMap::new(),
            known_replies: HashMap::new(),
            stop: None,
        }
    }

    /// The tokenizer: a token model's windows are built with it (BERT's for run_squad's
    /// rules, any fast tokenizer for run_qa's, as `config`'s post-processing says), and a
    /// text model's logits contract rebuilds its pieces from BERT's vocabulary (the
    /// answer contract needs none).
    pub fn tokenizer(mut self, tokenizer: impl Into<TokenizerRef<'a>>) -> Self {
        self.tokenizer = Some(tokenizer.into());
        self
    }

    /// Tells `observer` what happens as it happens (progress, answers, the padding
    /// decision); its error stops the run.
    pub fn observer(mut self, observer: &'a dyn RunObserver) -> Self {
        self.observer = observer;
        self
    }

    /// Takes the features built beforehand (all of the dataset's, in unique-id order),
    /// so that several models can be run on the same features (`compare`).
    pub fn prebuilt(mut self, features: &'a [Arc<Feature>]) -> Self {
        self.prebuilt = Some(features);
        self
    }

    /// Cuts the windows with `builder`, made beforehand with the run's tokenizer and
    /// rules ([`FeatureBuilder::for_rules`]): a caller that must know every question can
    /// be cut (run_qa's rules check them all when the builder is made) before it writes
    /// anything makes the builder first.
    pub fn windows(mut self, builder: FeatureBuilder<'a>) -> Self {
        self.builder = Some(builder);
        self
    }

    /// Logits already known (a journal's) by unique id: these features are not sent.
    pub fn known(mut self, logits: HashMap<u64, Logits>) -> Self {
        self.known = logits;
        self
    }

    /// What a text model already said (a journal's), by question index: these
    /// questions are decoded, not asked.
    pub fn known_replies(mut self, replies: HashMap<u64, TextReply>) -> Self {
        self.known_replies = replies;
        self
    }

    /// Once `stop` is cancelled, no further request is sent; requests in flight are
    /// drained (their answers observed and decoded) and the run returns, stopped.
    pub fn stop_on(mut self, stop: CancellationToken) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Runs to the end: every question decoded, or the error that ended the run.
    pub fn run(self) -> Result<RunOutcome> {
        let dataset = self.dataset;
        self.run_partial().complete(dataset)
    }

    /// Runs until the end, a stop or an error. Never fails as a whole: what was done is
    /// returned with the error that ended it, so partial results can be written.
    ///
    /// Blocks the calling thread, which must not be a runtime's: the requests are kept
    /// in flight by the runtime's handle from this thread.
    pub fn run_partial(mut self) -> PartialOutcome {
        let started = Instant::now();
        // A handful of questions runs its stages one after another on this thread:
        // starting the producer's and the decoder's threads, and waking them, costs more
        // than such a run's work.
        let in_turn = self.in_turn();
        let stages = match self.wiring(in_turn) {
            Ok(w) => self.stages(w),
            Err(e) => return PartialOutcome::failed(self.dataset, e),
        };
        let (producing, decode, decoder_rx) = (stages.producing, stages.decode, stages.decoder_rx);
        let inferring = stages.inferring;
        std::thread::scope(|scope| {
            // The dispatch stage on the runtime, until the features end: what it did,
            // and when the last response came.
            let inferring = || (self.runtime.block_on(inferring), Instant::now());
            let (produced, (inferred, responses_done), decoded) = if in_turn {
                let produced = producing();
                let inferred = inferring();
                (produced, inferred, decode.run(decoder_rx))
            } else {
                // The stage threads are named for what they do (a debugger's and a
                // test's view); one the system refuses ends the run with nothing sent.
                let stage = |name: &str| std::thread::Builder::new().name(name.into());
                let decoder = stage("bertqa-decode")
                    .spawn_scoped(scope, move || decode.run(decoder_rx))
                    .map_err(|e| Error::system("a run's decoding thread", e));
                let decoder = match decoder {
                    Ok(d) => d,
                    Err(e) => return PartialOutcome::failed(self.dataset, e),
                };
                let producer = stage("bertqa-windows")
                    .spawn_scoped(scope, producing)
                    .map_err(|e| Error::system("a run's windowing thread", e));
                let producer = match producer {
                    Ok(p) => p,
                    Err(e) => {
                        // The decoder ends once every sender to it is gone.
                        drop(inferring);
                        let _ = decoder.join();
                        return PartialOutcome::failed(self.dataset, e);
                    }
                };
                let inferred = inferring();
                let produced = producer.join().expect("producer thread");
                (produced, inferred, decoder.join().expect("decoder thread"))
            };
            self.outcome(started, responses_done, produced, inferred, decoded)
        })
    }

    /// Whether the run's stages run one after another on one thread.
    pub(crate) fn in_turn(&self) -> bool {
        in_turn(self.dataset)
    }

    /// [`run_partial`](Self::run_partial) of a run [in turn](in_turn) as a future on the
    /// runtime that awaits it: the windows are built and the answers decoded when it is
    /// polled (a handful of questions' work), the requests awaited in between. No thread
    /// is started.
    pub(crate) async fn run_in_turn(mut self) -> PartialOutcome {
        debug_assert!(self.in_turn());
        let started = Instant::now();
        let stages = match self.wiring(true) {
            Ok(w) => self.stages(w),
            Err(e) => return PartialOutcome::failed(self.dataset, e),
        };
        let produced = (stages.producing)();
        let inferred = stages.inferring.await;
        let responses_done = Instant::now();
        let decoded = stages.decode.run(stages.decoder_rx);
        self.outcome(started, responses_done, produced, inferred, decoded)
    }

    /// What the stages need that the run holds by value: its window source (checked),
    /// what is already known, the channels between the stages.
    fn wiring(&mut self, in_turn: bool) -> Result<Wiring<'a>> {
        let source = self.source()?;
        let infer = &self.config.infer;
        let queue = (infer.batch_size * infer.concurrency * 4).max(256);
        // Features travel to the dispatch stage as the batches they are sent in: a
        // sender waiting for features was woken for every one of them otherwise, about
        // one futex call per feature. A run in turn never waits for room: every batch
        // fits in the channel.
        let batch_size = infer.batch_size.max(1);
        let capacity = if in_turn {
            IN_TURN_BATCHES
        } else {
            queue.div_ceil(batch_size)
        };
        let (produced_tx, produced_rx) = mpsc::channel(capacity);
        let (events_tx, events_rx) = mpsc::channel(queue);
        let (decoder_tx, decoder_rx) = std_mpsc::channel();
        Ok(Wiring {
            source,
            text_slot_bytes: self.text_slot_bytes(),
            known: std::mem::take(&mut self.known),
            known_replies: std::mem::take(&mut self.known_replies),
            batch_size,
            produced: (produced_tx, produced_rx),
            events: (events_tx, events_rx),
            decoder: (decoder_tx, decoder_rx),
        })
    }

    /// The stages, wired: the window source (a function for a thread), the decoder, and
    /// the dispatch stage's future (the gate, dispatch and the collector on the runtime,
    /// until the features end, the run is stopped or fails).
    fn stages(&self, w: Wiring<'a>) -> Stages<'_> {
        let config = self.config;
        let (produced_tx, produced_rx) = w.produced;
        let (decoder_tx, decoder_rx) = w.decoder;
        let outlets = Outlets {
            to_dispatch: produced_tx,
            to_decoder: decoder_tx.clone(),
            runtime: self.runtime.handle(),
        };
        let (dataset, prebuilt, observer) = (self.dataset, self.prebuilt, self.observer);
        let (source, known, known_replies, batch_size) =
            (w.source, w.known, w.known_replies, w.batch_size);
        let producing = move || match source {
            Source::Features(builder) => produce(
                dataset, *builder, prebuilt, known, observer, outlets, batch_size,
            ),
            Source::Questions => {
                produce_questions(dataset, batch_size, known_replies, observer, outlets)
            }
        };
        let decode = DecodeStage::new(
            self.dataset,
            self.tokenizer,
            self.model.clone(),
            &config.decode,
            self.observer,
            config.keep_logits,
            config.keep_features,
        );
        // Between the producer and the dispatch stage, a gate that closes on a stop.
        let (gated_tx, gated_rx) = mpsc::channel(1);
        // Answers are ranked as they are read; their logits are kept where something
        // reads them: the caller, or an observer that needs them all.
        let rank = Rank {
            k: config.decode.n_best_size,
            keep_logits: config.keep_logits || self.observer.answer_needs() == AnswerNeeds::Logits,
        };
        // The gate closes on one handle: cancelled by the caller's stop, or by the
        // collector on an observer's error (which leaves the caller's untouched).
        let cancel = self
            .stop
            .as_ref()
            .map_or_else(CancellationToken::new, |s| s.child_token());
        let (events_tx, events_rx) = w.events;
        let text_slot_bytes = w.text_slot_bytes;
        // The future takes the run's parts it needs, not the run (whose window builder
        // stays on the producer's side).
        let (client, model, observer) = (self.client, &self.model, self.observer);
        let stop = self.stop.clone();
        let inferring = async move {
            let (report, collected, cut_short) = tokio::join!(
                infer_events(
                    client,
                    model,
                    &config.infer,
                    Some(rank),
                    text_slot_bytes,
                    gated_rx,
                    events_tx
                ),
                collect(
                    events_rx,
                    observer,
                    config.keep_logits,
                    decoder_tx,
                    cancel.clone()
                ),
                gate(produced_rx, gated_tx, cancel.clone())
            );
            let stopped = cut_short && stop.is_some_and(|s| s.is_cancelled());
            Inferred {
                report,
                collected,
                stopped,
            }
        };
        Stages {
            producing: Box::new(producing),
            decode,
            decoder_rx,
            inferring: Box::pin(inferring),
        }
    }

    /// The run's window source, checked: a token model's windows are built with the
    /// vocabulary, a text model's questions go as they are (the logits contract still
    /// needs the vocabulary to rebuild the server's pieces).
    fn source(&mut self) -> Result<Source<'a>> {
        let needs_vocabulary = |what: &str| {
            Error::Config(format!(
                "model {:?} {what}: a vocabulary (`vocab`) is needed",
                self.model.name()
            ))
        };
        if !self.model.takes_text() {
            let tokenizer = self
                .tokenizer
                .ok_or_else(|| needs_vocabulary("takes token ids"))?;
            if let Some(builder) = self.builder.take() {
                return Ok(Source::Features(Box::new(builder)));
            }
            let builder = FeatureBuilder::for_rules(
                tokenizer,
                self.config.decode.postprocess,
                self.config.features,
                self.dataset,
            )?;
            return Ok(Source::Features(Box::new(builder)));
        }
        if self.config.decode.postprocess == Postprocess::RunQa {
            return Err(Error::Config(format!(
                "model {:?} takes text and makes its own windows: run_qa's rules \
                 apply to models that take token ids",
                self.model.name()
            )));
        }
        // The logits contract's pieces are rebuilt from the vocabulary.
        if self.model.needs_tokenizer() && self.tokenizer.and_then(TokenizerRef::bert).is_none() {
            return Err(needs_vocabulary(
                "answers with windows of logits, whose pieces bertqa rebuilds",
            ));
        }
        Ok(Source::Questions)
    }

    /// Bytes of the largest request's inputs of a text model's run (sizes its shared
    /// memory slots); 0 for a token model.
    fn text_slot_bytes(&self) -> usize {
        if !self.model.takes_text() {
            return 0;
        }
        let per_request = self.config.infer.batch_size.max(1);
        let lens: Vec<usize> = self
            .dataset
            .examples
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.known_replies.contains_key(&(*i as u64)))
            .map(|(_, e)| {
                let context = &self.dataset.paragraph_of(e).context;
                crate::backend::text_request::pair_len(&e.question_text, context)
            })
            .collect();
        lens.chunks(per_request)
            .map(|c| c.iter().sum::<usize>())
            .max()
            .unwrap_or(0)
    }

    /// Puts together what the stages did.
    fn outcome(
        &self,
        started: Instant,
        responses_done: Instant,
        produced: Produced,
        inferred: Inferred,
        decoded: Result<Decoded>,
    ) -> PartialOutcome {
        let (mut report, mut error) = match inferred.report {
            Ok(r) => (r, inferred.collected.error),
            Err(e) => (InferReport::empty(), Some(e)),
        };
        let wall = started.elapsed().saturating_sub(report.warmup);
        let decoded = decoded.unwrap_or_else(|e| {
            error.get_or_insert(e);
            Decoded {
                predictions: vec![None; self.dataset.examples.len()],
                busy: Duration::ZERO,
                logits: Vec::new(),
                features: Vec::new(),
                finished: responses_done,
                non_finite: Default::default(),
            }
        });
        report.decode_lag = decoded.finished.saturating_duration_since(responses_done);
        report.non_finite.add(&decoded.non_finite);
        // A text model's windows are counted as the server's replies come (and the
        // journal's as they are read), not as they are built.
        let (total, answered) = if self.model.takes_text() {
            let n = report.features + produced.reused;
            (n, n)
        } else {
            (
                produced.total,
                inferred.collected.answered + produced.reused,
            )
        };
        PartialOutcome {
            predictions: decoded.predictions,
            features: total,
            answered,
            known: produced.reused,
            featureless: produced.featureless,
            placements: produced.placements,
            phases: Phases {
                features_s: produced.busy.as_secs_f64(),
                inference_s: report.busy.as_secs_f64(),
                decode_s: decoded.busy.as_secs_f64(),
            },
            infer: report,
            wall,
            logits: decoded.logits,
            kept_features: decoded.features,
            stopped: inferred.stopped,
            error,
        }
    }
}
