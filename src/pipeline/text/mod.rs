//! A run against a model that takes text (tokenized on the server): each question's
//! text and its context sent as they are, the answers read by the model's contract and
//! each question decoded as its answer arrives.
//!
//! Contract:
//! - Questions go in file order, `per_request` to a request (one for the logits
//!   contract, whose windows vary per question, and for a model without batching), with
//!   at most `concurrency` requests in flight, through a [`Pool`] (retries, endpoints).
//! - *Logits contract*: the windows become features ([`windows::features`]) and are
//!   decoded by the same rules as features built here; NaN and infinite logits are −∞
//!   and counted, as for a token model.
//! - *Answer contract*: the model's answer is the prediction; its n-best list is that
//!   one answer (probability 1, the model's score as `start_logit`, `end_logit` 0).
//!   With SQuAD 2.0 rules and a no-answer *score* and a score, the null odds are their
//!   difference (`no_answer − score`, run_squad's) and the answer is `""` above the
//!   null threshold; a no-answer *probability* is written as the odds itself. Without a
//!   no-answer output there are no null odds.
//! - Latency is per request (send to response); features counted are windows (logits)
//!   or questions (answer).
//! - With shared memory, a request's questions and contexts go through the run's region
//!   (`SharedRegion::place_text`), its answer in the message; the report says how they
//!   travelled.

pub(crate) mod windows;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::observe::RunObserver;
use super::report::{InFlight, InferReport, Phases};
use super::run::PartialOutcome;
use super::shared_memory::SharedRegion;
use crate::backend::proto::ModelInferResponse;
use crate::backend::text::{Contract, TextAnswer, TextBinding, TextReply};
use crate::backend::{text_request, Infer, Pool, SharedMemory};
use crate::decode::non_finite::sanitize;
use crate::decode::{DecodeCache, DecodeConfig, NbestEntry, Prediction, Window};
use crate::error::{Error, Result};
use crate::tokenize::BertTokenizer;
use crate::types::{Dataset, Example, Feature, Logits};

/// Unique ids of a question's windows start at `FIRST_UNIQUE_ID + example_index ×
/// IDS_PER_QUESTION` (far more windows than any context makes).
const FIRST_UNIQUE_ID: u64 = 1_000_000_000;
const IDS_PER_QUESTION: u64 = 1_000_000;

/// Called with question `i`'s reply as it arrives (a journal).
pub(crate) type RecordReply<'a> = dyn Fn(usize, &TextReply) -> Result<()> + Sync + 'a;

/// A run of a dataset against a text model.
pub(crate) struct TextRun<'a> {
    pub pool: &'a Pool,
    pub binding: Arc<TextBinding>,
    pub version: &'a str,
    pub dataset: &'a Dataset,
    /// The vocabulary the server's tokenizer uses (pieces are rebuilt from it).
    pub tokenizer: &'a BertTokenizer,
    pub decode: &'a DecodeConfig,
    /// Questions per request, at most (the answer contract of a model that batches).
    pub batch_size: usize,
    pub concurrency: usize,
    pub observer: &'a dyn RunObserver,
    pub stop: Option<CancellationToken>,
    /// Keep the logits contract's windows in the outcome: as features (to map answers
    /// back to the context) and their logits (to compare them).
    pub keep_windows: bool,
    /// What the model said before (a journal), by question: decoded, not asked again.
    pub known: HashMap<u64, TextReply>,
    /// Called with what the model says about each question as it arrives, before it is
    /// decoded (a journal); an error stops the run like a server error.
    pub record: Option<&'a RecordReply<'a>>,
    /// Whether the questions and contexts go through a shared memory region
    /// ([`SharedRegion::place_text`]), slots sized for the largest request.
    pub shared_memory: SharedMemory,
}

/// One request's questions and what came back.
struct Answered {
    examples: Vec<usize>,
    response: Result<(ModelInferResponse, Instant)>,
    done: Instant,
}

impl TextRun<'_> {
    /// Questions per request.
    pub(crate) fn per_request(&self) -> usize {
        match self.binding.contract {
            Contract::Logits { .. } => 1,
            Contract::Answer { .. } if self.binding.max_batch_size == 0 => 1,
            Contract::Answer { .. } => self.batch_size.clamp(1, self.binding.max_batch_size),
        }
    }

    /// Runs every question on `rt`; what was answered is kept when the run stops early.
    pub(crate) fn run_partial(&self, rt: &tokio::runtime::Runtime) -> PartialOutcome {
        let examples = &self.dataset.examples;
        let groups: Vec<Vec<usize>> = (0..examples.len())
            .filter(|&i| !self.known.contains_key(&(i as u64)))
            .collect::<Vec<_>>()
            .chunks(self.per_request())
            .map(<[usize]>::to_vec)
            .collect();
        self.observer.built(examples.len() as u64);
        let mut state = State {
            predictions: vec![None; examples.len()],
            cache: DecodeCache::default(),
            report: InferReport::empty(),
            in_flight: InFlight::default(),
            decode_busy: Duration::ZERO,
            kept: Vec::new(),
            logits: Vec::new(),
            error: None,
        };
        let mut known: Vec<(&u64, &TextReply)> = self.known.iter().collect();
        known.sort_by_key(|(i, _)| **i);
        for (&i, reply) in known {
            if state.error.is_none() && (i as usize) < examples.len() {
                state.error = self.settle(&mut state, i as usize, reply.clone()).err();
            }
        }
        let known_features = state.report.features;
        let started = Instant::now();
        let mut first_sent: Option<Instant> = None;
        let mut last_done = started;
        let stop = self.stop.clone().unwrap_or_default();
        let mut stopped = false;
        let shm = rt.block_on(self.open_region(&groups)).unwrap_or_else(|e| {
            state.error = Some(e);
            SharedRegion::default()
        });
        rt.block_on(async {
            let mut set: JoinSet<Answered> = JoinSet::new();
            let mut next = groups.into_iter();
            loop {
                while set.len() < self.concurrency.max(1) && state.error.is_none() && !stopped {
                    let Some(group) = next.next() else { break };
                    set.spawn(self.send(group, shm.clone()));
                }
                let joined = tokio::select! {
                    joined = set.join_next() => joined,
                    () = stop.cancelled(), if !stopped => {
                        stopped = true;
                        set.abort_all();
                        continue;
                    }
                };
                let Some(joined) = joined else { break };
                let Ok(answered) = joined else { continue };
                if let Ok((_, sent)) = &answered.response {
                    first_sent = Some(first_sent.map_or(*sent, |f| f.min(*sent)));
                    last_done = last_done.max(answered.done);
                }
                if state.error.is_none() {
                    if let Err(e) = self.take(&mut state, answered) {
                        state.error = Some(e);
                    }
                }
            }
        });
        let wall = last_done.saturating_duration_since(first_sent.unwrap_or(last_done));
        let mut infer = state.report;
        infer.wall = wall;
        infer.busy = state.in_flight.busy();
        infer.decode_lag = Instant::now().saturating_duration_since(last_done);
        infer.shared_memory = rt.block_on(shm.close());
        let answered = infer.features;
        // The report's figures are the server's: what the journal held is not counted.
        infer.features -= known_features;
        PartialOutcome {
            predictions: state.predictions,
            features: answered,
            answered,
            known: known_features,
            featureless: Vec::new(),
            phases: Phases {
                features_s: 0.0,
                inference_s: infer.busy.as_secs_f64(),
                decode_s: state.decode_busy.as_secs_f64(),
            },
            infer,
            wall: started.elapsed(),
            logits: {
                let mut logits = state.logits;
                logits.sort_by_key(|l| l.unique_id);
                logits
            },
            kept_features: {
                let mut kept = state.kept;
                kept.sort_by_key(|f| f.unique_id);
                kept
            },
            stopped,
            error: state.error,
        }
    }

    /// The run's shared memory region, its slots for the largest of `groups`' requests.
    async fn open_region(&self, groups: &[Vec<usize>]) -> Result<SharedRegion> {
        let largest = groups.iter().map(|group| {
            let pairs: Vec<(&str, &str)> = group.iter().map(|&i| self.pair(i)).collect();
            text_request::contents_len(&pairs)
        });
        let (server, in_flight) = (self.pool.single_server(), self.concurrency);
        let largest = largest.max().unwrap_or(0);
        SharedRegion::open_text(self.shared_memory, server, in_flight, largest).await
    }

    /// Question `i`'s text and its context.
    fn pair(&self, i: usize) -> (&str, &str) {
        let e = &self.dataset.examples[i];
        (&e.question_text, &self.dataset.paragraph_of(e).context)
    }

    /// Sends the questions `examples` in one request.
    fn send(
        &self,
        examples: Vec<usize>,
        shm: SharedRegion,
    ) -> impl std::future::Future<Output = Answered> + 'static {
        let pool = self.pool.clone();
        let binding = self.binding.clone();
        let version = self.version.to_string();
        let texts: Vec<(String, String)> = examples
            .iter()
            .map(|&i| {
                let e = &self.dataset.examples[i];
                (
                    e.question_text.clone(),
                    self.dataset.paragraph_of(e).context.clone(),
                )
            })
            .collect();
        async move {
            let pairs: Vec<(&str, &str)> = texts
                .iter()
                .map(|(q, c)| (q.as_str(), c.as_str()))
                .collect();
            let placed = shm.place_text(&pairs);
            let send = |at| pool.infer_text(&binding, &version, &pairs, at);
            let response = placed.send(send).await;
            Answered {
                examples,
                response,
                done: Instant::now(),
            }
        }
    }

    /// Reads one request's answer into `state`: its questions recorded, decoded and
    /// observed.
    fn take(&self, state: &mut State, answered: Answered) -> Result<()> {
        let (response, sent) = answered.response?;
        let latency = answered.done.saturating_duration_since(sent);
        state.in_flight.push((sent, answered.done));
        state.report.requests += 1;
        state
            .report
            .latency_us
            .saturating_record(crate::latency::micros(latency));
        let replies = match &self.binding.contract {
            Contract::Logits { .. } => vec![TextReply::Windows(self.binding.windows(&response)?)],
            Contract::Answer { .. } => self
                .binding
                .answers(&response, answered.examples.len())?
                .into_iter()
                .map(TextReply::Answer)
                .collect(),
        };
        for (&i, reply) in answered.examples.iter().zip(replies) {
            if let Some(record) = self.record {
                record(i, &reply)?;
            }
            self.settle(state, i, reply)?;
        }
        Ok(())
    }

    /// Decodes what the model said about question `i` into `state` (see the module's
    /// contract), and hands the prediction to the observer.
    fn settle(&self, state: &mut State, i: usize, reply: TextReply) -> Result<()> {
        let t = Instant::now();
        let example = &self.dataset.examples[i];
        let p = match (reply, &self.binding.contract) {
            (TextReply::Windows(w), Contract::Logits { offsets, .. }) => {
                let question = windows::Question {
                    paragraph: self.dataset.paragraph_of(example),
                    example_index: i,
                    first_unique_id: FIRST_UNIQUE_ID + i as u64 * IDS_PER_QUESTION,
                    model: &self.binding.model,
                    offsets_output: offsets,
                };
                let (features, mut logits) = windows::features(&question, &w, self.tokenizer)?;
                for l in &mut logits {
                    let n = sanitize(l);
                    if n > 0 {
                        state.report.non_finite.values += n;
                        state.report.non_finite.features += 1;
                    }
                }
                state.report.features += features.len() as u64;
                let windows: Vec<Window<'_>> = features
                    .iter()
                    .zip(&logits)
                    .map(|(f, l)| Window::new(f, l))
                    .collect();
                let p = state.cache.decode_example(
                    self.decode,
                    Some(example.paragraph_index),
                    &self.dataset.paragraph_of(example).doc_tokens,
                    &example.qas_id,
                    &windows,
                    self.tokenizer,
                )?;
                if self.keep_windows {
                    state.kept.extend(features.into_iter().map(Arc::new));
                    state.logits.extend(logits);
                }
                p
            }
            (TextReply::Answer(a), Contract::Answer { no_answer, .. }) => {
                let probability = no_answer.as_ref().is_some_and(|n| n.probability);
                state.report.features += 1;
                answer_prediction(example, a, probability, self.decode)
            }
            _ => {
                return Err(Error::Internal(format!(
                    "a journaled answer of question {:?} does not follow model {:?}'s contract",
                    example.qas_id, self.binding.model
                )))
            }
        };
        state.decode_busy += t.elapsed();
        let mut p = p;
        self.observer.on_decoded(i, &mut p);
        state.predictions[i] = Some(p);
        self.observer.answered(1);
        Ok(())
    }
}

/// What a run has gathered so far.
struct State {
    predictions: Vec<Option<Prediction>>,
    cache: DecodeCache,
    report: InferReport,
    in_flight: InFlight,
    decode_busy: Duration,
    kept: Vec<Arc<Feature>>,
    logits: Vec<Logits>,
    error: Option<Error>,
}

/// The prediction of an answer-contract answer (see the module's contract).
///
/// `probability`: the no-answer output is a probability, not a score.
fn answer_prediction(
    example: &Example,
    a: TextAnswer,
    probability: bool,
    config: &DecodeConfig,
) -> Prediction {
    let score = a.score.map(f64::from);
    let null_odds = match (config.version_2_with_negative, a.no_answer) {
        (false, _) | (true, None) => None,
        (true, Some(no_answer)) => Some(match score {
            Some(score) if !probability => f64::from(no_answer) - score,
            _ => f64::from(no_answer),
        }),
    };
    let answer = match (null_odds, score) {
        (Some(odds), Some(_)) if !probability && odds > config.null_score_diff_threshold => {
            String::new()
        }
        _ => a.text.clone(),
    };
    Prediction {
        qas_id: example.qas_id.clone(),
        nbest: vec![NbestEntry {
            text: a.text,
            probability: 1.0,
            start_logit: score.unwrap_or(0.0),
            end_logit: 0.0,
            span: None,
        }],
        answer,
        null_odds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Example {
        Example {
            example_index: 0,
            qas_id: "q1".into(),
            question_text: "Who?".into(),
            paragraph_index: 0,
            answers: Vec::new(),
            is_impossible: false,
        }
    }

    fn answer(text: &str, score: Option<f32>, no_answer: Option<f32>) -> TextAnswer {
        TextAnswer {
            text: text.into(),
            score,
            no_answer,
            start: None,
            end: None,
        }
    }

    fn v2() -> DecodeConfig {
        DecodeConfig {
            version_2_with_negative: true,
            ..DecodeConfig::default()
        }
    }

    #[test]
    fn the_answer_contract_gives_one_entry_and_null_odds_only_from_a_no_answer_output() {
        let e = example();
        // A no-answer score: odds = no-answer − score; above the threshold, no answer.
        let p = answer_prediction(&e, answer("Ada", Some(3.0), Some(1.0)), false, &v2());
        assert_eq!((p.answer.as_str(), p.null_odds), ("Ada", Some(-2.0)));
        assert_eq!(p.nbest.len(), 1);
        assert_eq!(
            (
                p.nbest[0].probability,
                p.nbest[0].start_logit,
                p.nbest[0].end_logit
            ),
            (1.0, 3.0, 0.0)
        );
        let p = answer_prediction(&e, answer("Ada", Some(1.0), Some(3.0)), false, &v2());
        assert_eq!((p.answer.as_str(), p.null_odds), ("", Some(2.0)));
        assert_eq!(
            p.nbest[0].text, "Ada",
            "the model's answer stays in the n-best list"
        );
        // A probability is the odds as it is; the model's answer stands.
        let p = answer_prediction(&e, answer("Ada", Some(1.0), Some(0.9)), true, &v2());
        assert_eq!(p.answer, "Ada");
        assert!((p.null_odds.unwrap() - 0.9).abs() < 1e-6);
        // No no-answer output, or SQuAD 1.1 rules: no null odds.
        let p = answer_prediction(&e, answer("Ada", None, None), false, &v2());
        assert_eq!((p.null_odds, p.nbest[0].start_logit), (None, 0.0));
        let p = answer_prediction(
            &e,
            answer("Ada", Some(1.0), Some(3.0)),
            false,
            &DecodeConfig::default(),
        );
        assert_eq!((p.answer.as_str(), p.null_odds), ("Ada", None));
    }
}
