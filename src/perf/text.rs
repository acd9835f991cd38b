//! `perf` of a model that takes text (a question and a context as BYTES, tokenized on
//! the server; `crate::backend::text`): its requests, built from a data file's
//! question and context pairs, the reading of its answers, and the server breakdown per
//! step of an ensemble.
//!
//! Contract:
//! - A request carries `per_request` pairs (1 when the model has no batch dimension),
//!   in file order, wrapping around to the first pairs to fill the last request, so
//!   every request has the same size (as token batches do).
//! - A response is read as `ask` would need it: the answer contract through
//!   `TextBinding::answers`; the logits contract's start and end logits and token
//!   offsets decoded and checked for agreeing sizes (a named error otherwise).
//! - An ensemble's composing models (`TextBinding::steps`) have their
//!   `ModelStatistics` read at the same points as the ensemble's (latest version), so
//!   each step's deltas cover the same windows; a step is averaged per request of its
//!   own, with its request, inference and execution counts.

use std::sync::Arc;

use super::stats::ServerBreakdown;
use crate::backend::proto::ModelInferResponse;
use crate::backend::text::TextBinding;
use crate::backend::Model;
use crate::client::{ClientBuilder, TokenSetting};
use crate::error::{Error, Result};
use crate::metrics::ServerCounters;
use crate::types::Dataset;

/// One request's worth of question and context pairs.
#[derive(Debug, Clone)]
pub struct TextRequest {
    /// The (question, context) pairs it carries, `per_request` of them.
    pub pairs: Vec<(Arc<str>, Arc<str>)>,
    /// Each pair's place in the data (0-based), as the per-request log names them.
    pub questions: Vec<u64>,
}

/// What a sweep of a text model sends.
#[derive(Debug, Clone)]
pub struct TextLoad {
    /// How the model is spoken to: its text inputs and the contract of its answers.
    pub binding: Arc<TextBinding>,
    /// Requested version (empty: the server's choice).
    pub version: String,
    /// The requests, sent in turn and cycled.
    pub requests: Vec<TextRequest>,
}

/// Groups `pairs` into requests of `per_request` in file order, wrapping around to the
/// first pairs to fill the last one (see the module's contract).
pub fn make_requests(pairs: &[(Arc<str>, Arc<str>)], per_request: usize) -> Vec<TextRequest> {
    let n = pairs.len();
    if n == 0 || per_request == 0 {
        return Vec::new();
    }
    (0..n.div_ceil(per_request))
        .map(|k| {
            let places: Vec<usize> = (0..per_request)
                .map(|j| (k * per_request + j) % n)
                .collect();
            TextRequest {
                pairs: places.iter().map(|&i| pairs[i].clone()).collect(),
                questions: places.iter().map(|&i| i as u64).collect(),
            }
        })
        .collect()
}

/// Reads `response` to `n` questions as the contract says (see the module's contract).
pub(crate) fn read_response(model: &Model, response: &ModelInferResponse, n: usize) -> Result<()> {
    drop(std::hint::black_box(model.replies(response, n)?));
    Ok(())
}

/// An ensemble's steps at one point or over a window: each step's model and counters,
/// in step order (empty: not an ensemble); `None` when a step was not reported.
pub(crate) type Steps = Option<Vec<(String, ServerCounters)>>;

/// `f` ([`ServerCounters::since`] or [`ServerCounters::plus`]) applied step by step;
/// `None` when either side lacks a step. Both sides list the same steps in the same
/// order (those of one model).
pub(crate) fn step_by_step(
    a: &Steps,
    b: &Steps,
    f: fn(&ServerCounters, &ServerCounters) -> ServerCounters,
) -> Steps {
    let (a, b) = (a.as_ref()?, b.as_ref()?);
    let each = a.iter().zip(b);
    Some(
        each.map(|((name, x), (_, y))| (name.clone(), f(x, y)))
            .collect(),
    )
}

/// Each step summed over `windows` and averaged per request of its own; none when a
/// window lacks a step.
pub(crate) fn step_results<'a>(windows: impl IntoIterator<Item = &'a Steps>) -> Vec<StepResult> {
    let total = windows
        .into_iter()
        .cloned()
        .reduce(|a, b| step_by_step(&a, &b, ServerCounters::plus))
        .flatten();
    total
        .unwrap_or_default()
        .into_iter()
        .map(|(model, c)| StepResult {
            model,
            server: ServerBreakdown::from_delta(&c),
        })
        .collect()
}

/// One ensemble step over a level: its model and its server-side times per request.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// The step's model (a composing model of the ensemble).
    pub model: String,
    /// The step's counts over the reported windows, and its times averaged per request
    /// of its own.
    pub server: ServerBreakdown,
}

/// Why `setting` does not apply, in words.
fn why(setting: TokenSetting) -> &'static str {
    match setting {
        TokenSetting::Tokens => "the server tokenizes, with its own vocabulary and windows",
        TokenSetting::Pads => "the server tokenizes and pads",
        TokenSetting::Inputs => "it has no token inputs",
    }
}

/// The error of `setting`, which cannot apply to `model`, a model that takes text, and
/// `why`, in one line.
pub(crate) fn does_not_apply(setting: &str, model: &str, why: &str) -> Error {
    Error::Refused(format!(
        "{setting} does not apply: model {model:?} takes text ({why})"
    ))
}

/// The first setting of `client` that shapes tokens, padding or token tensors, refused
/// for `model`, which takes text.
pub(crate) fn refuse_token_settings<M>(client: &ClientBuilder<M>, model: &str) -> Result<()> {
    match client.token_setting() {
        Some((setting, shapes)) => Err(does_not_apply(setting, model, why(shapes))),
        None => Ok(()),
    }
}

/// Every question of the data with its context, in file order (a paragraph's context
/// shared by its questions).
pub(crate) fn pairs(dataset: &Dataset) -> Vec<(Arc<str>, Arc<str>)> {
    let contexts: Vec<Arc<str>> = dataset
        .paragraphs
        .iter()
        .map(|p| Arc::from(p.context.as_str()))
        .collect();
    dataset
        .examples
        .iter()
        .map(|e| {
            (
                Arc::from(e.question_text.as_str()),
                contexts[e.paragraph_index].clone(),
            )
        })
        .collect()
}

/// Questions per request: `requested` within the model's max batch size (1 for a
/// model without a batch dimension), by default the max batch size.
pub(crate) fn per_request(requested: Option<usize>, model: &Model) -> Result<usize> {
    questions_per_request(requested, model.max_batch_size(), model.name())
}

/// [`per_request`] of model `name` of `max_batch_size`.
fn questions_per_request(
    requested: Option<usize>,
    max_batch_size: usize,
    name: &str,
) -> Result<usize> {
    let most = max_batch_size.max(1);
    let refused = |why: String| Err(Error::Refused(why));
    match requested {
        None => Ok(most),
        Some(0) => refused("`batch_size` must be at least 1".into()),
        Some(n) if n > most && max_batch_size == 0 => refused(format!(
            "`batch_size` {n}: model {name:?} takes one question per request (max batch \
             size 0, inputs [1])"
        )),
        Some(n) if n > most => refused(format!(
            "`batch_size` {n} exceeds model {name:?}'s max batch size {most}"
        )),
        Some(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::proto::model_infer_response::InferOutputTensor;

    fn pairs(n: usize) -> Vec<(Arc<str>, Arc<str>)> {
        let context: Arc<str> = "the context".into();
        (0..n)
            .map(|i| (format!("q{i}").into(), context.clone()))
            .collect()
    }

    #[test]
    fn settings_that_shape_tokens_are_refused_one_line_each_naming_the_setting() {
        let refused = |b: ClientBuilder| {
            refuse_token_settings(&b, "qa-text")
                .err()
                .map(|e| e.to_string())
        };
        let plain = || crate::Client::builder("u");
        assert_eq!(refused(plain()), None);
        assert_eq!(
            refused(
                plain()
                    .shared_memory(crate::backend::SharedMemory::System)
                    .lower_case(true)
            ),
            None
        );
        for (given, setting) in [
            (plain().doc_stride(64), "`doc_stride`"),
            (plain().max_seq_length(256), "`max_seq_length`"),
            (plain().fixed_seq_len(true), "`Padding::Fixed`"),
            (plain().vocab("other.txt"), "`vocab`"),
            (plain().lower_case(false), "`lower_case = false`"),
            (
                plain().binding(crate::backend::BindingOverrides {
                    input_mask: Some("mask".into()),
                    ..Default::default()
                }),
                "`input_mask`",
            ),
        ] {
            let why = refused(given).unwrap();
            assert!(
                why.starts_with(&format!(
                    "{setting} does not apply: model \"qa-text\" takes text ("
                )),
                "{why}"
            );
            assert!(!why.contains('\n'));
        }
    }

    #[test]
    fn a_request_holds_one_question_without_a_batch_dimension_else_the_batch_size() {
        assert_eq!(questions_per_request(None, 0, "qa").unwrap(), 1);
        assert_eq!(questions_per_request(Some(1), 0, "qa").unwrap(), 1);
        let e = questions_per_request(Some(4), 0, "qa")
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes one question per request"), "{e}");
        assert_eq!(questions_per_request(None, 8, "qa").unwrap(), 8);
        assert_eq!(questions_per_request(Some(3), 8, "qa").unwrap(), 3);
        assert!(questions_per_request(Some(9), 8, "qa").is_err());
        assert!(questions_per_request(Some(0), 8, "qa").is_err());
    }

    #[test]
    fn requests_are_full_and_wrap_around_in_file_order() {
        let r = make_requests(&pairs(5), 2);
        let places: Vec<Vec<u64>> = r.iter().map(|r| r.questions.clone()).collect();
        assert_eq!(places, [vec![0, 1], vec![2, 3], vec![4, 0]]);
        assert_eq!(&*r[2].pairs[1].0, "q0");
        let one = make_requests(&pairs(3), 1);
        assert_eq!(one.len(), 3);
        assert!(one.iter().all(|r| r.pairs.len() == 1));
        assert!(make_requests(&pairs(0), 2).is_empty());
        assert!(make_requests(&pairs(3), 0).is_empty());
    }

    fn counters(requests: u64, queue_ns: u64, infer_ns: u64) -> ServerCounters {
        ServerCounters {
            requests,
            request_ns: requests * (queue_ns + infer_ns),
            queue_ns: requests * queue_ns,
            compute_infer_ns: requests * infer_ns,
            inferences: requests,
            executions: requests,
            ..ServerCounters::from_stats(&[])
        }
    }

    fn steps(requests: u64) -> Steps {
        Some(vec![
            ("tokenizer".into(), counters(requests, 1_000, 4_000)),
            ("model".into(), counters(requests, 2_000, 10_000)),
        ])
    }

    #[test]
    fn steps_are_deltas_per_step_summed_over_windows_and_averaged_per_request() {
        let (a, b, c) = (steps(10), steps(30), steps(40));
        let since = |x: &Steps, y: &Steps| step_by_step(x, y, ServerCounters::since);
        let windows = [since(&b, &a), since(&c, &b)];
        let results = step_results(&windows);
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].model, "tokenizer");
        assert_eq!(results[0].server.requests, 30);
        assert_eq!(results[0].server.executions, 30);
        assert!((results[0].server.queue_us - 1.0).abs() < 1e-12);
        assert!((results[0].server.compute_infer_us - 4.0).abs() < 1e-12);
        assert!((results[1].server.compute_infer_us - 10.0).abs() < 1e-12);
        // A window where a step was not reported leaves the level without steps.
        let missing = [since(&b, &a), None];
        assert!(step_results(&missing).is_empty());
        assert_eq!(since(&b, &None), None);
        assert!(step_results(&[]).is_empty());
        // A model that is not an ensemble has no steps.
        assert!(step_results(&[Some(Vec::new()), Some(Vec::new())]).is_empty());
    }

    fn response(tokens: usize, offsets: usize) -> ModelInferResponse {
        let out = |name: &str, datatype: &str, shape: Vec<i64>| InferOutputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape,
            ..Default::default()
        };
        let t = tokens as i64;
        ModelInferResponse {
            outputs: vec![
                out("start_logits", "FP32", vec![1, t]),
                out("end_logits", "FP32", vec![1, t]),
                out("offsets", "INT32", vec![1, t, 2]),
            ],
            raw_output_contents: vec![
                vec![0u8; 4 * tokens].into(),
                vec![0u8; 4 * tokens].into(),
                vec![0u8; 4 * offsets].into(),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn logits_responses_are_read_and_checked_for_sizes() {
        let b: Model = crate::backend::text::logits_binding_for_tests(0).into();
        read_response(&b, &response(384, 768), 1).unwrap();
        let msg = read_response(&b, &response(384, 384), 1)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("offsets") && msg.contains("768"), "{msg}");
        let mut r = response(384, 768);
        r.outputs.remove(1);
        r.raw_output_contents.remove(1);
        let msg = read_response(&b, &r, 1).unwrap_err().to_string();
        assert!(
            msg.contains("end_logits") && msg.contains("missing"),
            "{msg}"
        );
    }
}
