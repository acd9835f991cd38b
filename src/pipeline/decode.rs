//! The decode stage, on a thread of its own: gathers each question's windows as they are
//! answered and decodes the question as soon as all of them are in; a text model's
//! question as soon as its reply arrives (`super::text`). Output is in file order
//! whatever the arrival order.

use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::dispatch::Answer;
use super::observe::RunObserver;
use crate::backend::text::TextReply;
use crate::backend::Model;
use crate::decode::non_finite::NonFinite;
use crate::decode::{DecodeConfig, ExampleDecoder, Prediction, Window};
use crate::error::{Error, Result};
use crate::tokenize::TokenizerRef;
use crate::types::{Dataset, Feature, Logits, TokenText};

/// What the decoder is sent.
pub(super) enum ToDecoder {
    /// All features of these examples have been built: (example index, count).
    Expects(Vec<(usize, usize)>),
    /// A feature's answer (one whose logits were known beforehand).
    Answer(Answer),
    /// Several answers at once (one message per chunk drained from the responses).
    Answers(Vec<Answer>),
    /// What a text model said about these questions (by index).
    Replies(Vec<(usize, TextReply)>),
}

/// What the decode stage hands back.
pub(super) struct Decoded {
    /// By example; `None` for questions not fully answered.
    pub predictions: Vec<Option<Prediction>>,
    /// Time spent decoding.
    pub busy: Duration,
    /// The logits it was asked to keep, by ascending unique id.
    pub logits: Vec<Logits>,
    /// The features it was asked to keep, by ascending unique id.
    pub features: Vec<Arc<Feature>>,
    /// When the last question was decoded.
    pub finished: Instant,
    /// NaN and infinite logits in a text model's windows (replaced by −∞).
    pub non_finite: NonFinite,
}

/// A question's windows as they arrive.
#[derive(Default)]
struct Gathering {
    /// The number of its windows, once all are built.
    expected: Option<usize>,
    answers: Vec<Answer>,
}

/// The decode stage's state.
pub(super) struct DecodeStage<'a> {
    dataset: &'a Dataset,
    /// `None` only for a text model of the answer contract (nothing to rebuild).
    tokenizer: Option<TokenizerRef<'a>>,
    /// The run's model (a text model's replies are decoded by its contract).
    model: Model,
    non_finite: NonFinite,
    config: &'a DecodeConfig,
    observer: &'a dyn RunObserver,
    keep_logits: bool,
    keep_features: bool,
    predictions: Vec<Option<Prediction>>,
    /// Indexed by example: no hashing on the way.
    pending: Vec<Gathering>,
    busy: Duration,
    kept: Vec<Logits>,
    kept_features: Vec<Arc<Feature>>,
    /// run_squad's or run_qa's reading of the answers.
    decoder: Box<dyn ExampleDecoder>,
}

impl<'a> DecodeStage<'a> {
    pub(crate) fn new(
        dataset: &'a Dataset,
        tokenizer: Option<TokenizerRef<'a>>,
        model: Model,
        config: &'a DecodeConfig,
        observer: &'a dyn RunObserver,
        keep_logits: bool,
        keep_features: bool,
    ) -> Self {
        let n = dataset.examples.len();
        DecodeStage {
            dataset,
            tokenizer,
            model,
            non_finite: NonFinite::default(),
            config,
            observer,
            keep_logits,
            keep_features,
            predictions: vec![None; n],
            pending: (0..n).map(|_| Gathering::default()).collect(),
            busy: Duration::ZERO,
            kept: Vec::new(),
            kept_features: Vec::new(),
            decoder: config.postprocess.decoder(),
        }
    }

    /// Decodes what `messages` bring until they end (or decoding fails).
    pub(crate) fn run(mut self, messages: Receiver<ToDecoder>) -> Result<Decoded> {
        for msg in messages {
            match msg {
                ToDecoder::Answers(answers) => {
                    for answer in answers {
                        self.answer(answer)?;
                    }
                }
                ToDecoder::Expects(expects) => {
                    for (example_index, count) in expects {
                        self.pending[example_index].expected = Some(count);
                        self.decode_if_complete(example_index)?;
                    }
                }
                ToDecoder::Answer(answer) => self.answer(answer)?,
                ToDecoder::Replies(replies) => {
                    for (i, reply) in replies {
                        self.reply(i, reply)?;
                    }
                }
            }
        }
        let finished = Instant::now();
        self.kept.sort_by_key(|l| l.unique_id);
        self.kept_features.sort_by_key(|f| f.unique_id);
        Ok(Decoded {
            predictions: self.predictions,
            busy: self.busy,
            logits: self.kept,
            features: self.kept_features,
            finished,
            non_finite: self.non_finite,
        })
    }

    /// Decodes what a text model said about question `i` (`super::text`).
    fn reply(&mut self, i: usize, reply: TextReply) -> Result<()> {
        let t = Instant::now();
        let tokenizer = self.tokenizer.and_then(TokenizerRef::bert);
        let keep = self.keep_features || self.keep_logits;
        let contract = self
            .model
            .contract()
            .ok_or_else(|| Error::Internal("a text model's reply in a token model's run".into()))?;
        let decoded = super::text::decode(
            self.model.name(),
            contract,
            &super::text::Decoding {
                dataset: self.dataset,
                tokenizer,
                config: self.config,
                keep,
            },
            self.decoder.as_mut(),
            i,
            reply,
        )?;
        self.non_finite.add(&decoded.non_finite);
        let mut p = decoded.prediction;
        self.observer.on_decoded(i, &mut p);
        self.predictions[i] = Some(p);
        self.busy += t.elapsed();
        if self.keep_features {
            self.kept_features.extend(decoded.features);
        }
        if self.keep_logits {
            self.kept.extend(decoded.logits);
        }
        Ok(())
    }

    fn answer(&mut self, answer: Answer) -> Result<()> {
        let i = answer.feature.example_index;
        self.pending[i].answers.push(answer);
        self.decode_if_complete(i)
    }

    /// Decodes the example once all of its windows are answered.
    fn decode_if_complete(&mut self, example_index: usize) -> Result<()> {
        let entry = &mut self.pending[example_index];
        if entry.expected != Some(entry.answers.len()) {
            return Ok(());
        }
        let mut windows = std::mem::take(&mut entry.answers);
        entry.expected = None;
        let t = Instant::now();
        windows.sort_by_key(|a| a.feature.unique_id);
        let example = &self.dataset.examples[example_index];
        let paragraph = self.dataset.paragraph_of(example);
        let views: Vec<Window<'_>> = windows
            .iter()
            .map(|a| Window::of(&a.feature, &a.scores))
            .collect();
        let tok = self.tokenizer.and_then(TokenizerRef::bert);
        let mut p = self.decoder.decode_example(
            self.config,
            example.paragraph_index,
            paragraph,
            &example.qas_id,
            &views,
            tok.map(|t| t as &dyn TokenText),
        )?;
        drop(views);
        self.observer.on_decoded(example_index, &mut p);
        self.predictions[example_index] = Some(p);
        self.busy += t.elapsed();
        if self.keep_features {
            self.kept_features
                .extend(windows.iter().map(|a| a.feature.clone()));
        }
        if self.keep_logits {
            // Padded positions included: the reference ranks start/end indexes over the
            // whole padded sequence (algorithm §6.2).
            self.kept
                .extend(windows.into_iter().filter_map(|a| a.scores.into_logits()));
        }
        Ok(())
    }
}
