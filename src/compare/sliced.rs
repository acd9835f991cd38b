//! A comparison slice by slice (docs/algorithm.md, "Slices"): in each slice of the
//! reference's questions, the differences of exact match and F1 with their intervals
//! and p-values, the flips, and whether the changed answers gather there.

use serde::Serialize;

use super::stats::{mcnemar_exact, Difference, Statistics};
use super::{Flips, Run};
use crate::slices::RunValues;
use crate::slices::{self, QuestionSlices};

/// One slice of a comparison: an entry of a comparison's `slices` in compare's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceComparison {
    /// `dimension:slice`, e.g. `context_windows:3+`.
    pub slice: String,
    /// Its questions.
    pub questions: usize,
    /// Exact match over its questions, the model minus the reference, in points, with
    /// its bootstrap interval and McNemar's p-value.
    pub exact_diff: Difference,
    /// F1 over its questions, as `exact_diff`, the p-value of the paired sign-flip
    /// randomization test.
    pub f1_diff: Difference,
    /// How its questions flipped.
    pub flips: Flips,
    /// Its questions whose answer text changed.
    pub changed: usize,
    /// `changed` over its questions (0–1).
    pub change_rate: f64,
    /// The same share over the other questions (0 when there are none).
    pub rest_change_rate: f64,
    /// Fisher's exact test, two-sided, of its changed answers against the rest's.
    pub p_value: f64,
    /// `p_value` adjusted by Holm's method over the comparison's slices.
    pub p_adjusted: f64,
}

/// `other` against `first` in each slice of `question_slices` (the reference's, in
/// question order), and the slices where the changes concentrate.
pub(crate) fn sliced(
    first: &Run<'_>,
    other: &Run<'_>,
    question_slices: &[QuestionSlices],
    statistics: &Statistics,
) -> (Vec<SliceComparison>, Vec<String>) {
    let n = first
        .predictions
        .len()
        .min(other.predictions.len())
        .min(first.scores.len())
        .min(other.scores.len())
        .min(question_slices.len());
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    let changed: Vec<bool> = (0..n)
        .map(|i| first.predictions[i].answer != other.predictions[i].answer)
        .collect();
    let tests = slices::tested(&question_slices[..n], &changed);
    let concentrated = slices::standing_out(&tests, statistics.confidence);
    let exact: Vec<f64> = (0..n)
        .map(|i| 100.0 * (other.scores[i].0 - first.scores[i].0))
        .collect();
    let f1: Vec<f64> = (0..n)
        .map(|i| 100.0 * (other.scores[i].1 - first.scores[i].1))
        .collect();
    let flips: Vec<Flips> = (0..n).map(|i| flips_of(first, other, i)).collect();
    let (exact_run, f1_run) = (RunValues::new(&exact), RunValues::new(&f1));
    let out = tests
        .into_iter()
        .enumerate()
        .map(|(k, t)| {
            let m = &t.members;
            let mean = |v: &[f64]| m.iter().map(|&i| v[i]).sum::<f64>() / m.len() as f64;
            let stream = 2 * k as u64;
            let mut slice_flips = Flips::default();
            for &i in m {
                let f = &flips[i];
                slice_flips.right_to_wrong += f.right_to_wrong;
                slice_flips.wrong_to_right += f.wrong_to_right;
                slice_flips.to_no_answer += f.to_no_answer;
                slice_flips.from_no_answer += f.from_no_answer;
            }
            let f1_value = mean(&f1);
            SliceComparison {
                questions: m.len(),
                exact_diff: Difference {
                    value: mean(&exact),
                    ci: exact_run.interval(m, statistics, stream),
                    p_value: mcnemar_exact(
                        slice_flips.right_to_wrong as u64,
                        slice_flips.wrong_to_right as u64,
                    ),
                },
                f1_diff: Difference {
                    value: f1_value,
                    ci: f1_run.interval(m, statistics, stream + 1),
                    p_value: f1_run.sign_flip(m, f1_value, statistics, stream + 1),
                },
                flips: slice_flips,
                changed: m.iter().filter(|&&i| changed[i]).count(),
                change_rate: t.rate,
                rest_change_rate: t.rest_rate,
                p_value: t.p_value,
                p_adjusted: t.p_adjusted,
                slice: t.slice,
            }
        })
        .collect();
    (out, concentrated)
}

/// How question `i` flipped from `first` to `other` (each count 0 or 1), as
/// [`Flips`] counts a comparison's.
fn flips_of(first: &Run<'_>, other: &Run<'_>, i: usize) -> Flips {
    let (a, b) = (&first.predictions[i], &other.predictions[i]);
    let (sa, sb) = (first.scores[i], other.scores[i]);
    Flips {
        right_to_wrong: usize::from(sa.0 > 0.5 && sb.0 <= 0.5),
        wrong_to_right: usize::from(sa.0 <= 0.5 && sb.0 > 0.5),
        to_no_answer: usize::from(!a.answer.is_empty() && b.answer.is_empty()),
        from_no_answer: usize::from(a.answer.is_empty() && !b.answer.is_empty()),
    }
}
