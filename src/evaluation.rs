//! A whole evaluation as `bertqa eval` runs it, for a library user: the run of any model
//! (a token model, or a text model of either contract; see [`Run`]), the reference's
//! files and `per_question.jsonl` written into a directory, and the official scores.
//!
//! Contract:
//! - The files are the command's, byte for byte: `predictions.json`,
//!   `nbest_predictions.json`, `null_odds.json` (SQuAD 2.0 rules, when the model gives
//!   null odds: every token model and logits-contract model, an answer-contract model
//!   with a no-answer output), and `per_question.jsonl`.
//! - Scoring is the official scripts': v2 with `null_odds.json` as the na-prob file, or
//!   without one (every na-prob 0, no best thresholds) when the model gives none.
//! - The answers are written before they are scored, so nothing computed is lost when
//!   the gold answers cannot be scored.

use std::path::Path;

use crate::backend::{Infer, Model};
use crate::decode::{self, Prediction};
use crate::error::Result;
use crate::evaluate::{self, NaProbs, Predictions, ScoreConfig, Scores};
use crate::pipeline::{Run, RunConfig, RunObserver, RunOutcome};
use crate::tokenize::TokenizerRef;
use crate::types::Dataset;

/// What an evaluation wrote and measured.
#[derive(Debug)]
pub struct Evaluation {
    pub outcome: RunOutcome,
    pub scores: Scores,
    /// The files written into the directory, by name, in the order written.
    pub files: Vec<String>,
}

/// What an evaluation needs besides the data and the server.
pub struct Evaluate<'a> {
    pub runtime: &'a tokio::runtime::Runtime,
    /// The model, as [`crate::look`] bound it.
    pub model: Model,
    /// The tokenizer (BERT's for run_squad's rules, a fast one for run_qa's, as
    /// `config`'s post-processing says); `None` only for a text model of the answer
    /// contract.
    pub tokenizer: Option<TokenizerRef<'a>>,
    pub config: &'a RunConfig,
    /// The official v2 script's `--na-prob-thresh`.
    pub na_prob_thresh: f64,
    /// Where the files go (it must exist).
    pub output_dir: &'a Path,
}

impl Evaluate<'_> {
    /// Runs every question of `dataset` against `client`, writes the files and scores
    /// them (see the module's contract).
    pub fn run<B: Infer>(&self, client: &B, dataset: &Dataset) -> Result<Evaluation> {
        self.run_observed(client, dataset, &crate::pipeline::NoProgress)
    }

    /// [`run`](Self::run), telling `observer` what happens as it happens.
    pub fn run_observed<B: Infer>(
        &self,
        client: &B,
        dataset: &Dataset,
        observer: &dyn RunObserver,
    ) -> Result<Evaluation> {
        let mut run = Run::new(
            self.runtime,
            client,
            self.model.clone(),
            dataset,
            self.config,
        )
        .observer(observer);
        if let Some(t) = self.tokenizer {
            run = run.tokenizer(t);
        }
        let outcome = run.run()?;
        let version_2 = self.config.decode.version_2_with_negative;
        let null_odds = version_2 && gives_null_odds(&self.model);
        let mut files = write_predictions(self.output_dir, &outcome.predictions, null_odds, None)?;
        let scores = score_with(
            dataset,
            &outcome.predictions,
            version_2,
            null_odds,
            self.na_prob_thresh,
        )?;
        write_per_question(self.output_dir, &outcome.predictions, &scores)?;
        files.push("per_question.jsonl".into());
        Ok(Evaluation {
            outcome,
            scores,
            files,
        })
    }
}

/// Whether the model's answers come with null odds: all but a text model of the answer
/// contract without a no-answer output.
pub fn gives_null_odds(model: &Model) -> bool {
    model.gives_null_odds()
}

/// Scores decoded predictions as the official scripts score predictions.json, the null
/// odds as the na-prob file only with `null_odds` (without: every na-prob 0 and no best
/// thresholds, as evaluate-v2.0.py without a na-prob file).
pub fn score_with(
    dataset: &Dataset,
    predictions: &[Prediction],
    version_2: bool,
    null_odds: bool,
    na_prob_thresh: f64,
) -> Result<Scores> {
    let preds = Predictions::from_decoded(predictions);
    let na = (version_2 && null_odds).then(|| NaProbs::from_decoded(predictions));
    evaluate::score(
        dataset,
        &preds,
        na.as_ref(),
        &ScoreConfig {
            version_2_with_negative: version_2,
            na_prob_thresh,
        },
    )
}

/// Writes the reference's files (the n-best file finished from `nbest` when its lists
/// were streamed there), null_odds.json with `null_odds`; returns their names.
pub fn write_predictions(
    dir: &Path,
    predictions: &[Prediction],
    null_odds: bool,
    nbest: Option<decode::NbestStream>,
) -> Result<Vec<String>> {
    decode::write_outputs_with(dir, predictions, null_odds, nbest)?;
    let mut files = vec![
        "predictions.json".to_string(),
        "nbest_predictions.json".to_string(),
    ];
    if null_odds {
        files.push("null_odds.json".into());
    }
    Ok(files)
}

/// Writes per_question.jsonl: id, prediction, exact, f1, has_answer per question.
pub fn write_per_question(dir: &Path, predictions: &[Prediction], scores: &Scores) -> Result<()> {
    let lines = render_per_question(predictions, scores);
    crate::output_file::write_atomic(&dir.join("per_question.jsonl"), &lines)
}

/// The lines of per_question.jsonl: serde_json's compact rendering of
/// `{"id", "prediction", "exact", "f1", "has_answer"}` in that order, each value
/// serialized straight into the buffer (the same serializer a `Value` goes through: an
/// escaped string, a float as ryu writes it or `null` when not finite, a bool).
pub(crate) fn render_per_question(predictions: &[Prediction], scores: &Scores) -> Vec<u8> {
    let mut out = Vec::with_capacity(scores.questions.len() * 96);
    for (p, q) in predictions.iter().zip(&scores.questions) {
        put(&mut out, "{\"id\":", q.qas_id.as_str());
        put(&mut out, ",\"prediction\":", p.answer.as_str());
        put(&mut out, ",\"exact\":", &q.exact);
        put(&mut out, ",\"f1\":", &q.f1);
        put(&mut out, ",\"has_answer\":", &q.has_answer);
        out.extend_from_slice(b"}\n");
    }
    out
}

/// `prefix`, then `value` as serde_json writes it.
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, prefix: &str, value: &T) {
    out.extend_from_slice(prefix.as_bytes());
    // Writing into a Vec cannot fail, and strings, floats and bools always serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{Metrics, QuestionScore};
    use serde_json::json;

    /// The direct rendering equals `json!({...}).to_string()` per line: escapes,
    /// non-ASCII, floats ryu writes in exponent form, and non-finite values (`null`).
    #[test]
    fn per_question_lines_equal_serde_json_values() {
        let cases: [(&str, &str, f64, f64, bool); 6] = [
            ("q1", "Steve Smith", 1.0, 1.0, true),
            (
                "q\"2\\",
                "tab\there\nnew \u{1} \u{7f} é ☃ \u{2028}",
                0.0,
                2.0 / 3.0,
                false,
            ),
            ("", "", 0.0, -0.0, true),
            ("q4", "x", 1e-7, 1e22, true),
            ("q5", "y", f64::NAN, f64::INFINITY, false),
            ("q6", "z", 0.1 + 0.2, 123456789.125, true),
        ];
        let predictions: Vec<Prediction> = cases
            .iter()
            .map(|&(id, answer, ..)| Prediction {
                qas_id: id.to_string(),
                answer: answer.to_string(),
                nbest: Vec::new(),
                null_odds: None,
            })
            .collect();
        let scores = Scores {
            metrics: Metrics::V1 {
                exact_match: 0.0,
                f1: 0.0,
            },
            questions: cases
                .iter()
                .map(|&(id, _, exact, f1, has_answer)| QuestionScore {
                    qas_id: id.to_string(),
                    has_answer,
                    predicted: true,
                    exact,
                    f1,
                })
                .collect(),
            missing: Vec::new(),
            unknown_predictions: 0,
            counted: Vec::new(),
        };
        let mut want = String::new();
        for (p, q) in predictions.iter().zip(&scores.questions) {
            let line = json!({
                "id": q.qas_id,
                "prediction": p.answer,
                "exact": q.exact,
                "f1": q.f1,
                "has_answer": q.has_answer,
            });
            want.push_str(&line.to_string());
            want.push('\n');
        }
        let got = render_per_question(&predictions, &scores);
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }
}
