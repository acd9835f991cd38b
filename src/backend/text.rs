//! Models that take text: a question and a context as BYTES (a Triton ensemble or a
//! BLS model that tokenizes on the server), and the contract their outputs follow,
//! found from the model's metadata as the token binding is (overridable by name).
//!
//! Contracts:
//! - *answer*: a BYTES output holds the answer text; optional outputs hold its score,
//!   a no-answer score (or probability), and its character start and end (code points
//!   of the context, as SQuAD's `answer_start`);
//! - *logits*: start and end logits per window (FP32/FP16 `[windows, seq]`) and an
//!   integer output `[windows, seq, 2]` mapping each token to its character span in the
//!   context, so that the client decodes.
//!
//! Inputs are `[1]` per question (`[batch, 1]` when the model batches). A layout that
//! cannot be mapped is one line naming the tensors it could not place and the flags
//! that place them.

use serde::Serialize;

use super::binding::{batching, platform, without_trailing_ones, Batching};
use super::bytes;
use super::proto::model_config::SchedulingChoice;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::{ModelConfig, ModelInferResponse, ModelMetadataResponse};
use crate::error::{Error, Result};

/// Names of the tensors of a text model, given by the user (`None`: found by name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextOverrides {
    /// The BYTES input that takes the question.
    pub question_input: Option<String>,
    /// The BYTES input that takes the context.
    pub context_input: Option<String>,
    /// The BYTES output holding the answer text (the answer contract).
    pub answer_output: Option<String>,
    /// The integer output `[windows, seq, 2]` mapping each token to its character span
    /// in the context (the logits contract).
    pub offsets_output: Option<String>,
    /// The output holding each window's start logits (the logits contract).
    pub start_logits: Option<String>,
    /// The output holding each window's end logits (the logits contract).
    pub end_logits: Option<String>,
}

/// How bertqa talks to a model that takes text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TextBinding {
    pub model: String,
    /// The version asked for (`""`: the server's choice).
    pub version: String,
    pub platform: String,
    pub question: String,
    pub context: String,
    /// 0: one question per request, no batch dimension.
    pub max_batch_size: usize,
    pub contract: Contract,
    /// An ensemble's composing models, in order (empty: not an ensemble).
    pub steps: Vec<String>,
}

/// What a text model's outputs hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Contract {
    Answer {
        answer: String,
        score: Option<String>,
        no_answer: Option<NoAnswer>,
        start: Option<String>,
        end: Option<String>,
    },
    Logits {
        start_logits: String,
        end_logits: String,
        offsets: String,
    },
}

/// The output that says how likely "no answer" is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoAnswer {
    pub name: String,
    /// A probability (0–1) rather than a score (a logit sum, as run_squad's null score).
    pub probability: bool,
}

impl Contract {
    /// `"answer"` or `"logits"`.
    pub fn name(&self) -> &'static str {
        match self {
            Contract::Answer { .. } => "answer",
            Contract::Logits { .. } => "logits",
        }
    }
}

internal! {
    /// Whether a model takes text: it has BYTES inputs.
    pub fn takes_text(metadata: &ModelMetadataResponse) -> bool {
        metadata.inputs.iter().any(|t| t.datatype == "BYTES")
    }
}

const QUESTION: &[&str] = &["question", "questions", "query", "question_text"];
const CONTEXT: &[&str] = &["context", "contexts", "passage", "paragraph", "document"];
const ANSWER: &[&str] = &["answer", "answers", "answer_text", "prediction"];
const SCORE: &[&str] = &["score", "answer_score", "confidence"];
const NO_ANSWER_SCORE: &[&str] = &["no_answer_score", "null_score", "na_score"];
const NO_ANSWER_PROB: &[&str] = &["no_answer_probability", "no_answer_prob", "na_prob"];
const START_CHAR: &[&str] = &["answer_start", "start_char", "answer_start_char"];
const END_CHAR: &[&str] = &["answer_end", "end_char", "answer_end_char"];
const OFFSETS: &[&str] = &["offsets", "offset_mapping", "token_offsets"];
const START_LOGITS: &[&str] = &["start_logits", "start_logit", "output__0"];
const END_LOGITS: &[&str] = &["end_logits", "end_logit", "output__1"];

impl TextBinding {
    internal! {
        /// The text binding of a model (see the module's contract).
        pub fn infer(
            metadata: &ModelMetadataResponse,
            config: Option<&ModelConfig>,
            version: &str,
            overrides: &TextOverrides,
        ) -> Result<TextBinding> {
            let inputs = &metadata.inputs;
            let question = find(
                metadata,
                inputs,
                &overrides.question_input,
                QUESTION,
                "`question_input`",
                "input",
            )?;
            let context = find(
                metadata,
                inputs,
                &overrides.context_input,
                CONTEXT,
                "`context_input`",
                "input",
            )?;
            let (Some(question), Some(context)) = (question, context) else {
                return Err(fail(
                    metadata,
                    format!(
                        "cannot tell which of its text inputs ({}) take the question and the \
                     context; map them with `question_input` and `context_input`",
                        names(inputs, &|t| t.datatype == "BYTES")
                    ),
                ));
            };
            for name in [&question, &context] {
                let t = inputs
                    .iter()
                    .find(|t| &t.name == name)
                    .expect("found above");
                if t.datatype != "BYTES" {
                    return Err(Error::TensorMismatch {
                        model: metadata.name.clone(),
                        tensor: t.name.clone(),
                        expected: "BYTES".into(),
                        actual: t.datatype.clone(),
                    });
                }
            }
            let contract = contract(metadata, overrides)?;
            let (max_batch_size, batching) = batching(metadata, config);
            let max_batch_size = match batching {
                Batching::Declared => max_batch_size,
                Batching::Undeclared => 0,
            };
            let steps = match config.and_then(|c| c.scheduling_choice.as_ref()) {
                Some(SchedulingChoice::EnsembleScheduling(e)) => {
                    e.step.iter().map(|s| s.model_name.clone()).collect()
                }
                _ => Vec::new(),
            };
            Ok(TextBinding {
                model: metadata.name.clone(),
                version: version.to_string(),
                platform: platform(metadata, config),
                question,
                context,
                max_batch_size,
                contract,
                steps,
            })
        }
    }
}

/// A binding error of `metadata`'s model: one line, the tensors kept for `-v`.
fn fail(metadata: &ModelMetadataResponse, message: String) -> Error {
    Error::Binding {
        model: metadata.name.clone(),
        message,
        tensors: metadata
            .inputs
            .iter()
            .map(|t| ("input ", t))
            .chain(metadata.outputs.iter().map(|t| ("output", t)))
            .map(|(kind, t)| format!("{kind} {} {} {:?}", t.name, t.datatype, t.shape))
            .collect(),
    }
}

/// `name datatype shape` of the tensors `pred` keeps, comma-separated.
fn names(ts: &[TensorMetadata], pred: &dyn Fn(&TensorMetadata) -> bool) -> String {
    ts.iter()
        .filter(|t| pred(t))
        .map(|t| format!("{} {} {:?}", t.name, t.datatype, t.shape))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tensor of `ts` the user named with the override `setting` (a [`TextOverrides`]
/// field, as messages name it; the tensor must exist), else the first of the `known`
/// names the model has (case aside).
fn find(
    metadata: &ModelMetadataResponse,
    ts: &[TensorMetadata],
    given: &Option<String>,
    known: &[&str],
    setting: &str,
    kind: &str,
) -> Result<Option<String>> {
    match given {
        Some(n) if ts.iter().any(|t| &t.name == n) => Ok(Some(n.clone())),
        Some(n) => Err(fail(
            metadata,
            format!("{setting} names {kind} {n:?}, which the model does not have"),
        )),
        None => Ok(known
            .iter()
            .find_map(|k| ts.iter().find(|t| t.name.eq_ignore_ascii_case(k)))
            .map(|t| t.name.clone())),
    }
}

/// The contract `metadata`'s outputs follow (see the module's contract).
fn contract(metadata: &ModelMetadataResponse, overrides: &TextOverrides) -> Result<Contract> {
    let outputs = &metadata.outputs;
    let output = |name: &str| outputs.iter().find(|t| t.name == name);
    let answer = find(
        metadata,
        outputs,
        &overrides.answer_output,
        ANSWER,
        "`answer_output`",
        "output",
    )?
    .filter(|n| output(n).is_some_and(|t| t.datatype == "BYTES"));
    if let Some(answer) = answer {
        let opt = |known: &[&str]| {
            known
                .iter()
                .find_map(|k| outputs.iter().find(|t| t.name.eq_ignore_ascii_case(k)))
                .map(|t| t.name.clone())
        };
        let no_answer = match (opt(NO_ANSWER_SCORE), opt(NO_ANSWER_PROB)) {
            (Some(name), _) => Some(NoAnswer {
                name,
                probability: false,
            }),
            (None, Some(name)) => Some(NoAnswer {
                name,
                probability: true,
            }),
            (None, None) => None,
        };
        Ok(Contract::Answer {
            answer,
            score: opt(SCORE),
            no_answer,
            start: opt(START_CHAR),
            end: opt(END_CHAR),
        })
    } else {
        let start = find(
            metadata,
            outputs,
            &overrides.start_logits,
            START_LOGITS,
            "`start_logits`",
            "output",
        )?;
        let end = find(
            metadata,
            outputs,
            &overrides.end_logits,
            END_LOGITS,
            "`end_logits`",
            "output",
        )?;
        let offsets = find(
            metadata,
            outputs,
            &overrides.offsets_output,
            OFFSETS,
            "`offsets_output`",
            "output",
        )?
        .filter(|n| {
            output(n).is_some_and(|t| {
                matches!(t.datatype.as_str(), "INT32" | "INT64")
                    && without_trailing_ones(&t.shape).last() == Some(&2)
            })
        });
        match (start, end, offsets) {
            (Some(start_logits), Some(end_logits), Some(offsets)) => Ok(Contract::Logits {
                start_logits,
                end_logits,
                offsets,
            }),
            _ => Err(fail(
                metadata,
                format!(
                    "takes text but its outputs ({}) follow neither contract: an answer \
                     (a BYTES output; `answer_output`) or logits (start and end logits \
                     with token offsets [windows, seq, 2]; `start_logits`, `end_logits`, \
                     `offsets_output`)",
                    names(outputs, &|_| true)
                ),
            )),
        }
    }
}

/// One answer of the answer contract.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextAnswer {
    pub text: String,
    pub score: Option<f32>,
    /// A score or a probability, as the contract says.
    pub no_answer: Option<f32>,
    /// Character positions in the context (code points), end exclusive.
    pub start: Option<i64>,
    pub end: Option<i64>,
}

impl TextBinding {
    /// The outputs the contract reads, in order.
    pub(crate) fn output_names(&self) -> Vec<&str> {
        match &self.contract {
            Contract::Answer {
                answer,
                score,
                no_answer,
                start,
                end,
            } => std::iter::once(answer.as_str())
                .chain(score.as_deref())
                .chain(no_answer.as_ref().map(|n| n.name.as_str()))
                .chain(start.as_deref())
                .chain(end.as_deref())
                .collect(),
            Contract::Logits {
                start_logits,
                end_logits,
                offsets,
            } => vec![start_logits, end_logits, offsets],
        }
    }

    /// The answers of the answer contract in `response`, one per question asked
    /// (`n`): each output checked for its name, count and type (a named error otherwise).
    pub(crate) fn answers(
        &self,
        response: &ModelInferResponse,
        n: usize,
    ) -> Result<Vec<TextAnswer>> {
        let Contract::Answer {
            answer,
            score,
            no_answer,
            start,
            end,
        } = &self.contract
        else {
            return Err(Error::Internal(format!(
                "model {:?} follows the logits contract, not the answer contract",
                self.model
            )));
        };
        let mismatch = |tensor: &str, expected: String, actual: String| {
            self.mismatch(tensor, expected, actual)
        };
        let raw = |name: &str| self.output(response, name);
        let numbers = |name: &Option<String>| -> Result<Option<Vec<f64>>> {
            let Some(name) = name else { return Ok(None) };
            let (bytes, datatype) = raw(name)?;
            let values: Vec<f64> = match datatype {
                "FP32" => bytes
                    .chunks_exact(4)
                    .map(|c| f64::from(f32::from_le_bytes(c.try_into().expect("4"))))
                    .collect(),
                "INT32" => bytes
                    .chunks_exact(4)
                    .map(|c| f64::from(i32::from_le_bytes(c.try_into().expect("4"))))
                    .collect(),
                "INT64" => bytes
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().expect("8")) as f64)
                    .collect(),
                other => return Err(mismatch(name, "FP32, INT32 or INT64".into(), other.into())),
            };
            if values.len() != n {
                return Err(mismatch(
                    name,
                    format!("{n} value{}", if n == 1 { "" } else { "s" }),
                    values.len().to_string(),
                ));
            }
            Ok(Some(values))
        };
        let (bytes, datatype) = raw(answer)?;
        if datatype != "BYTES" {
            return Err(mismatch(answer, "BYTES".into(), datatype.into()));
        }
        let texts = bytes::decode_text(bytes, n, &self.model, answer)?;
        let (score, no_answer) = (
            numbers(score)?,
            numbers(&no_answer.as_ref().map(|x| x.name.clone()))?,
        );
        let (start, end) = (numbers(start)?, numbers(end)?);
        Ok(texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| TextAnswer {
                text: text.to_string(),
                score: score.as_ref().map(|v| v[i] as f32),
                no_answer: no_answer.as_ref().map(|v| v[i] as f32),
                start: start.as_ref().map(|v| v[i] as i64),
                end: end.as_ref().map(|v| v[i] as i64),
            })
            .collect())
    }
}

/// What a text model said about one question, by its contract.
#[derive(Debug, Clone, PartialEq)]
pub enum TextReply {
    Windows(ServerWindows),
    Answer(TextAnswer),
}

impl TextReply {
    /// The windows it stands for: a logits-contract answer's windows, or one answer.
    pub(crate) fn window_count(&self) -> u64 {
        match self {
            TextReply::Windows(w) => w.windows as u64,
            TextReply::Answer(_) => 1,
        }
    }
}

impl TextBinding {
    /// Questions per request for a run of `batch_size`: one for the logits contract
    /// (its windows vary per question) and for a model without batching, else up to
    /// the model's max batch size.
    pub fn per_request(&self, batch_size: usize) -> usize {
        match self.contract {
            Contract::Logits { .. } => 1,
            Contract::Answer { .. } if self.max_batch_size == 0 => 1,
            Contract::Answer { .. } => batch_size.clamp(1, self.max_batch_size),
        }
    }

    /// What the model said about each of the `n` questions of one request, by its
    /// contract (a logits-contract request asks about one question).
    pub(crate) fn replies(
        &self,
        response: &ModelInferResponse,
        n: usize,
    ) -> Result<Vec<TextReply>> {
        Ok(match &self.contract {
            Contract::Logits { .. } => vec![TextReply::Windows(self.windows(response)?)],
            Contract::Answer { .. } => self
                .answers(response, n)?
                .into_iter()
                .map(TextReply::Answer)
                .collect(),
        })
    }
}

/// A logits-contract answer for one question: `windows` × `seq` start and end logits
/// and each position's `[start, end)` characters in the context (`[-1, -1]` outside it).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerWindows {
    pub windows: usize,
    pub seq: usize,
    pub start: Vec<f32>,
    pub end: Vec<f32>,
    pub offsets: Vec<[i64; 2]>,
}

impl TextBinding {
    /// A `tensor` of this model that is not as the contract says.
    fn mismatch(&self, tensor: &str, expected: String, actual: String) -> Error {
        Error::TensorMismatch {
            model: self.model.clone(),
            tensor: tensor.to_string(),
            expected,
            actual,
        }
    }

    /// Output `name`'s raw bytes and datatype in `response` (a named error if missing).
    fn output<'r>(
        &self,
        response: &'r ModelInferResponse,
        name: &str,
    ) -> Result<(&'r [u8], &'r str)> {
        let i = response
            .outputs
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                let had: Vec<&str> = response.outputs.iter().map(|t| t.name.as_str()).collect();
                self.mismatch(
                    name,
                    "an output of that name".into(),
                    format!("missing (response has {had:?})"),
                )
            })?;
        let bytes = response
            .raw_output_contents
            .get(i)
            .map_or(&[][..], |b| &b[..]);
        Ok((bytes, response.outputs[i].datatype.as_str()))
    }

    /// The logits contract's answer to one question: the logits (FP32 or FP16) and the
    /// offsets (INT32 or INT64), each checked for its type and its element count
    /// against the windows × positions the start logits' shape gives.
    pub(crate) fn windows(&self, response: &ModelInferResponse) -> Result<ServerWindows> {
        let Contract::Logits {
            start_logits,
            end_logits,
            offsets,
        } = &self.contract
        else {
            return Err(Error::Internal(format!(
                "model {:?} follows the answer contract, not the logits contract",
                self.model
            )));
        };
        let shape = response
            .outputs
            .iter()
            .find(|t| &t.name == start_logits)
            .map(|t| without_trailing_ones(&t.shape).to_vec())
            .unwrap_or_default();
        let (windows, seq) = match shape[..] {
            [w, s] if w > 0 && s > 0 => (w as usize, s as usize),
            [s] if s > 0 => (1, s as usize),
            _ => {
                // Read it anyway for the "missing" error, else say the shape is wrong.
                self.output(response, start_logits)?;
                return Err(self.mismatch(
                    start_logits,
                    "shape [windows, seq]".into(),
                    format!("{shape:?}"),
                ));
            }
        };
        let n = windows * seq;
        let floats = |name: &str| -> Result<Vec<f32>> {
            let (bytes, datatype) = self.output(response, name)?;
            let values: Vec<f32> = match datatype {
                "FP32" => bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                    .collect(),
                "FP16" => bytes
                    .chunks_exact(2)
                    .map(|c| half::f16::from_le_bytes(c.try_into().expect("2")).to_f32())
                    .collect(),
                other => return Err(self.mismatch(name, "FP32 or FP16".into(), other.into())),
            };
            if values.len() != n {
                return Err(self.mismatch(
                    name,
                    format!("{n} values ({windows} windows of {seq})"),
                    values.len().to_string(),
                ));
            }
            Ok(values)
        };
        let (start, end) = (floats(start_logits)?, floats(end_logits)?);
        let (bytes, datatype) = self.output(response, offsets)?;
        let flat: Vec<i64> = match datatype {
            "INT32" => bytes
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4"))))
                .collect(),
            "INT64" => bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8")))
                .collect(),
            other => return Err(self.mismatch(offsets, "INT32 or INT64".into(), other.into())),
        };
        if flat.len() != 2 * n {
            return Err(self.mismatch(
                offsets,
                format!("{} values ({windows} windows of {seq} pairs)", 2 * n),
                flat.len().to_string(),
            ));
        }
        Ok(ServerWindows {
            windows,
            seq,
            start,
            end,
            offsets: flat.chunks_exact(2).map(|c| [c[0], c[1]]).collect(),
        })
    }
}

/// A logits-contract binding for unit tests: model `qa`, inputs `question` and `context`,
/// outputs `start_logits`, `end_logits`, `offsets`.
#[cfg(test)]
pub(crate) fn logits_binding_for_tests(max_batch_size: usize) -> TextBinding {
    TextBinding {
        model: "qa".into(),
        version: String::new(),
        platform: "ensemble".into(),
        question: "question".into(),
        context: "context".into(),
        max_batch_size,
        contract: Contract::Logits {
            start_logits: "start_logits".into(),
            end_logits: "end_logits".into(),
            offsets: "offsets".into(),
        },
        steps: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, datatype: &str, shape: &[i64]) -> TensorMetadata {
        TensorMetadata {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
        }
    }

    fn meta(inputs: Vec<TensorMetadata>, outputs: Vec<TensorMetadata>) -> ModelMetadataResponse {
        ModelMetadataResponse {
            name: "qa".into(),
            inputs,
            outputs,
            ..Default::default()
        }
    }

    fn text_inputs() -> Vec<TensorMetadata> {
        vec![t("question", "BYTES", &[1]), t("context", "BYTES", &[1])]
    }

    #[test]
    fn an_answer_output_is_the_answer_contract_with_what_it_gives() {
        let m = meta(
            text_inputs(),
            vec![
                t("answer", "BYTES", &[1]),
                t("score", "FP32", &[1]),
                t("no_answer_probability", "FP32", &[1]),
                t("answer_start", "INT32", &[1]),
                t("answer_end", "INT32", &[1]),
            ],
        );
        assert!(takes_text(&m));
        let b = TextBinding::infer(&m, None, "", &TextOverrides::default()).unwrap();
        assert_eq!(
            (b.question.as_str(), b.context.as_str()),
            ("question", "context")
        );
        assert_eq!(b.contract.name(), "answer");
        let Contract::Answer {
            score,
            no_answer,
            start,
            end,
            ..
        } = &b.contract
        else {
            panic!("{b:?}")
        };
        assert_eq!(score.as_deref(), Some("score"));
        assert!(no_answer.as_ref().is_some_and(|n| n.probability));
        assert_eq!(
            (start.as_deref(), end.as_deref()),
            (Some("answer_start"), Some("answer_end"))
        );
        assert_eq!(b.max_batch_size, 0);
    }

    #[test]
    fn logits_with_token_offsets_are_the_logits_contract() {
        let m = meta(
            text_inputs(),
            vec![
                t("start_logits", "FP32", &[-1, 384]),
                t("end_logits", "FP32", &[-1, 384]),
                t("offsets", "INT32", &[-1, 384, 2]),
            ],
        );
        let b = TextBinding::infer(&m, None, "", &TextOverrides::default()).unwrap();
        assert_eq!(
            b.contract,
            Contract::Logits {
                start_logits: "start_logits".into(),
                end_logits: "end_logits".into(),
                offsets: "offsets".into()
            }
        );
        assert!(!takes_text(&meta(
            vec![t("input_ids", "INT64", &[-1, 384])],
            vec![]
        )));
    }

    #[test]
    fn unknown_names_are_one_line_naming_the_tensors_and_the_flags() {
        let m = meta(
            vec![t("q", "BYTES", &[1]), t("doc", "BYTES", &[1])],
            vec![t("out", "BYTES", &[1])],
        );
        let e = TextBinding::infer(&m, None, "", &TextOverrides::default()).unwrap_err();
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("(q BYTES [1], doc BYTES [1])"), "{msg}");
        assert!(
            msg.contains("`question_input` and `context_input`"),
            "{msg}"
        );
        let o = TextOverrides {
            question_input: Some("q".into()),
            context_input: Some("doc".into()),
            answer_output: Some("out".into()),
            ..Default::default()
        };
        let b = TextBinding::infer(&m, None, "", &o).unwrap();
        assert_eq!(b.contract.name(), "answer");
        let bad = TextOverrides {
            question_input: Some("nope".into()),
            ..o
        };
        let msg = TextBinding::infer(&m, None, "", &bad)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("`question_input` names input \"nope\""),
            "{msg}"
        );
        let m = meta(text_inputs(), vec![t("start_logits", "FP32", &[-1, 384])]);
        let msg = TextBinding::infer(&m, None, "", &TextOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(msg.contains("follow neither contract"), "{msg}");
    }
}
