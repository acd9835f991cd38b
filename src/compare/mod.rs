//! One finished run of a dataset against another: whether they give the same answers,
//! how far apart their logits are on the windows both made, the F1 between them, and
//! the questions they disagree on. What `bertqa compare` reports for each model against
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
//! println!("{:.3} agree, F1 {:+.2}", c.agreement, -c.f1_drop);
//! # Ok(())
//! # }
//! ```

mod windows;

use std::sync::Arc;

use serde::Serialize;

pub use windows::LogitDiff;

use crate::decode::Prediction;
use crate::evaluate::Metrics;
use crate::types::{Feature, Logits};

/// A finished run as a comparison reads it: one prediction per question (the same
/// questions in the same order on both sides), its scores, and the windows it kept with
/// their logits (empty: none kept, or a model that gives none).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub predictions: &'a [Prediction],
    pub metrics: &'a Metrics,
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
            windows: &e.outcome.kept_features,
            logits: &e.outcome.logits,
        }
    }
}

/// A question the two runs answer differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disagreement {
    pub id: String,
    /// The first run's answer, then the other's.
    pub answers: [String; 2],
    /// The answers' start + end logits, when found in the n-best lists.
    pub scores: [Option<f64>; 2],
}

/// One run against the first.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Share of questions with the same final answer text (0-1; 1 with no questions).
    pub agreement: f64,
    /// Start and end logits over the windows both made (NaN: none compared).
    pub start_logits: LogitDiff,
    pub end_logits: LogitDiff,
    /// Windows both runs made (compared), of the first's and of the other's.
    pub windows_compared: usize,
    pub windows_first: usize,
    pub windows_other: usize,
    /// The first run's F1 minus the other's, in points.
    pub f1_drop: f64,
    /// Every question they disagree on, in file order.
    pub disagreements: Vec<Disagreement>,
}

/// `other` against `first`.
pub fn compare<'a>(first: &Run<'a>, other: &Run<'a>) -> Comparison {
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
    }
}

/// The answer's start + end logits, when it is in the n-best list.
fn answer_score(p: &Prediction) -> Option<f64> {
    p.nbest
        .iter()
        .find(|e| e.text == p.answer)
        .map(|e| e.start_logit + e.end_logit)
}
