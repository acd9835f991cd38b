//! One finished run of a dataset against another: whether they give the same answers,
//! how far apart their logits are on the windows both made, the F1 between them, the
//! questions they disagree on, and whether the differences of the scores are real
//! (intervals and tests over questions, answers that flipped: [`stats`]). What `bertqa compare` reports for each model against
//! the first; a program compares two [`Evaluation`](crate::Evaluation)s, or the runs
//! of its own stages, the same way.
//!
//! ```no_run
//! # fn main() -> bertqa::Result<()> {
//! let client = |model: &str| {
//!     bertqa::blocking::Client::builder("localhost:8001").model(model).build()
//! };
//! let (old, new) = (client("bert-torchscript")?, client("bert-onnx-fp16")?);
//! let data = bertqa::Dataset::open("dev-v2.0.json")?;
//! let (a, b) = (old.evaluate(&data)?, new.evaluate(&data)?);
//! let c = bertqa::compare::compare(&(&a).into(), &(&b).into());
//! let [lo, hi] = c.f1_diff.ci;
//! println!("{:.3} agree, F1 {:+.2} [{lo:+.2}, {hi:+.2}]", c.agreement, c.f1_diff.value);
//! # Ok(())
//! # }
//! ```

mod finished;
mod sliced;
pub mod stats;
mod windows;

use std::sync::Arc;

use serde::Serialize;

pub use finished::FinishedRun;
pub use sliced::SliceComparison;
pub use stats::{Difference, Divergence, Statistics};
pub use windows::LogitDiff;

use crate::decode::Prediction;
use crate::evaluate::Metrics;
use crate::types::{Feature, Logits};

/// A finished run as a comparison reads it: one prediction per question (the same
/// questions in the same order on both sides), its scores, and the windows it kept with
/// their logits (empty: none kept, or a model that gives none).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// One prediction per question, in the dataset's order.
    pub predictions: &'a [Prediction],
    /// The run's official metrics (percentages); their F1s give
    /// [`Comparison::f1_drop`].
    pub metrics: &'a Metrics,
    /// Each question's (exact, F1) as the official script counts it
    /// ([`Scores::counted`](crate::evaluate::Scores::counted)).
    pub scores: &'a [(f64, f64)],
    /// Windows by ascending unique id.
    pub windows: &'a [Arc<Feature>],
    /// Their logits, by ascending unique id.
    pub logits: &'a [Logits],
}

impl<'a> From<&'a crate::Evaluation> for Run<'a> {
    /// A client's evaluation: its predictions and scores (a client keeps no windows:
    /// its logits are not compared).
    fn from(e: &'a crate::Evaluation) -> Run<'a> {
        Run {
            predictions: &e.outcome.predictions,
            metrics: &e.metrics,
            scores: &e.scores.counted,
            windows: &e.outcome.kept_features,
            logits: &e.outcome.logits,
        }
    }
}

/// A question the two runs answer differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    /// The question's id.
    pub id: String,
    /// The first run's answer, then the other's.
    pub answers: [String; 2],
    /// The answers' start + end logits, when found in the n-best lists.
    pub scores: [Option<f64>; 2],
}

/// How the answers moved from the first run to the other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Flips {
    /// Questions right in the first run (the official per-question exact score), wrong
    /// in the other.
    pub right_to_wrong: usize,
    /// Questions wrong in the first run (by the same score), right in the other.
    pub wrong_to_right: usize,
    /// Questions with an answer in the first run, none (the empty answer) in the other.
    pub to_no_answer: usize,
    /// Questions with no answer in the first run, an answer in the other.
    pub from_no_answer: usize,
}

/// A question that flipped one of the ways [`Flips`] counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Flip {
    /// The question's id.
    pub id: String,
    /// The ways it flipped (`right_to_wrong`, `wrong_to_right`, `to_no_answer`,
    /// `from_no_answer`).
    pub flips: Vec<&'static str>,
    /// The first run's answer, then the other's.
    pub answers: [String; 2],
    /// Their official per-question exact scores (0 or 1), the first run's then the
    /// other's.
    pub exact: [f64; 2],
    /// Their official per-question F1 (0-1), the first run's then the other's.
    pub f1: [f64; 2],
    /// The question's place in the data.
    #[serde(skip)]
    pub(crate) index: usize,
}

/// One run against the first.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Share of questions with the same final answer text (0-1; 1 with no questions).
    pub agreement: f64,
    /// How far the start logits are apart over the windows both made (NaN: none
    /// compared).
    pub start_logits: LogitDiff,
    /// How far the end logits are apart, as `start_logits`.
    pub end_logits: LogitDiff,
    /// Windows both runs made, whose logits were compared.
    pub windows_compared: usize,
    /// How many windows the first run holds ([`Run::windows`]).
    pub windows_first: usize,
    /// How many windows the other run holds.
    pub windows_other: usize,
    /// The first run's F1 minus the other's, in points.
    pub f1_drop: f64,
    /// Every question they disagree on, in file order.
    pub disagreements: Vec<Disagreement>,
    /// The interval's coverage of the differences.
    pub confidence: f64,
    /// Exact match and F1 of the other run minus the first's, with their intervals and
    /// p-values.
    pub exact_diff: Difference,
    /// F1 of the other run minus the first's, as `exact_diff`.
    pub f1_diff: Difference,
    /// How many questions flipped each way.
    pub flips: Flips,
    /// Every question that flipped, in file order.
    pub flipped: Vec<Flip>,
    /// KL(first ‖ other) of the start and end distributions over the windows both made
    /// (`None`: no windows compared).
    pub start_kl: Option<Divergence>,
    /// KL(first ‖ other) of the end distributions, as `start_kl`.
    pub end_kl: Option<Divergence>,
    /// The comparison in each slice of the first run's questions (docs/algorithm.md,
    /// "Slices"); empty when the first run's slices are not known.
    pub slices: Vec<SliceComparison>,
    /// The slices (`dimension:slice`) where the changed answers concentrate:
    /// Holm-adjusted p below 1 − confidence and a change rate above the rest's.
    pub concentrated_in: Vec<String>,
}

/// `other` against `first`, with the default [`Statistics`].
pub fn compare<'a>(first: &Run<'a>, other: &Run<'a>) -> Comparison {
    compare_with(first, other, &Statistics::default())
}

/// `other` against `first`, the statistics drawn as `statistics` says.
pub fn compare_with<'a>(first: &Run<'a>, other: &Run<'a>, statistics: &Statistics) -> Comparison {
    let total = first.predictions.len();
    let disagreements: Vec<Disagreement> = first
        .predictions
        .iter()
        .zip(other.predictions)
        .filter(|(a, b)| a.answer != b.answer)
        .map(|(a, b)| Disagreement {
            id: a.qas_id.clone(),
            answers: [a.answer.clone(), b.answer.clone()],
            scores: [answer_score(a), answer_score(b)],
        })
        .collect();
    let agreement = if total > 0 {
        (total - disagreements.len()) as f64 / total as f64
    } else {
        1.0
    };
    let a = windows::Windows {
        features: first.windows,
        logits: first.logits,
    };
    let b = windows::Windows {
        features: other.windows,
        logits: other.logits,
    };
    let pairs = windows::matched(&a, &b);
    let (mut start, mut end) = windows::logit_diffs(&pairs);
    let (start_kl, end_kl) = windows::divergences(&pairs);
    let (exact_diff, f1_diff) = stats::differences(first.scores, other.scores, statistics);
    let (flips, flipped) = flips(first, other);
    // A run without logits (the answer contract), or windows that all differ (another
    // tokenizer): nothing to compare.
    if pairs.is_empty() {
        start = LogitDiff {
            linf: f64::NAN,
            mean_abs: f64::NAN,
        };
        end = start.clone();
    }
    Comparison {
        agreement,
        start_logits: start,
        end_logits: end,
        windows_compared: pairs.len(),
        windows_first: first.windows.len(),
        windows_other: other.windows.len(),
        f1_drop: first.metrics.f1() - other.metrics.f1(),
        disagreements,
        confidence: statistics.confidence,
        exact_diff,
        f1_diff,
        flips,
        flipped,
        start_kl,
        end_kl,
        slices: Vec::new(),
        concentrated_in: Vec::new(),
    }
}

/// `other` against `first`, two evaluations of the same data ([`crate::Client::evaluate`]),
/// the statistics drawn as `statistics` says: [`compare_with`], and the comparison in
/// each slice of `first`'s questions ([`Comparison::slices`], [`Comparison::concentrated_in`]).
pub fn compare_evaluations(
    first: &crate::Evaluation,
    other: &crate::Evaluation,
    statistics: &Statistics,
) -> Comparison {
    compare_in_slices(
        &first.into(),
        &other.into(),
        statistics,
        &first.question_slices,
    )
}

/// The slices of question `index` of `evaluation`, as flips.jsonl names them.
pub(crate) fn slice_names(
    evaluation: &crate::Evaluation,
    index: usize,
) -> serde_json::Map<String, serde_json::Value> {
    evaluation
        .question_slices
        .get(index)
        .map(crate::slices::names)
        .unwrap_or_default()
}

/// [`compare_with`], and the comparison in each slice of `question_slices` (the first
/// run's, in question order).
pub(crate) fn compare_in_slices<'a>(
    first: &Run<'a>,
    other: &Run<'a>,
    statistics: &Statistics,
    question_slices: &[crate::slices::QuestionSlices],
) -> Comparison {
    let mut c = compare_with(first, other, statistics);
    (c.slices, c.concentrated_in) = sliced::sliced(first, other, question_slices, statistics);
    c
}

/// The flips of every question from `first` to `other`, counted and listed.
fn flips(first: &Run<'_>, other: &Run<'_>) -> (Flips, Vec<Flip>) {
    let mut counts = Flips::default();
    let mut flipped = Vec::new();
    let questions = first.predictions.iter().zip(other.predictions);
    for (i, (a, b)) in questions.enumerate() {
        let (Some(sa), Some(sb)) = (first.scores.get(i), other.scores.get(i)) else {
            break;
        };
        let mut ways = Vec::new();
        match (sa.0 > 0.5, sb.0 > 0.5) {
            (true, false) => ways.push(("right_to_wrong", &mut counts.right_to_wrong)),
            (false, true) => ways.push(("wrong_to_right", &mut counts.wrong_to_right)),
            _ => {}
        }
        match (a.answer.is_empty(), b.answer.is_empty()) {
            (false, true) => ways.push(("to_no_answer", &mut counts.to_no_answer)),
            (true, false) => ways.push(("from_no_answer", &mut counts.from_no_answer)),
            _ => {}
        }
        if ways.is_empty() {
            continue;
        }
        flipped.push(Flip {
            id: a.qas_id.clone(),
            flips: ways
                .into_iter()
                .map(|(name, count)| {
                    *count += 1;
                    name
                })
                .collect(),
            answers: [a.answer.clone(), b.answer.clone()],
            exact: [sa.0, sb.0],
            f1: [sa.1, sb.1],
            index: i,
        });
    }
    (counts, flipped)
}

/// The answer's start + end logits, when it is in the n-best list.
fn answer_score(p: &Prediction) -> Option<f64> {
    p.nbest
        .iter()
        .find(|e| e.text == p.answer)
        .map(|e| e.start_logit + e.end_logit)
}
