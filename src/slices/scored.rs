//! A run's slices scored (eval's `slices`): each slice's exact match and F1 with their
//! bootstrap intervals, and whether its errors (questions whose exact score is 0) stand
//! out against the rest's.

use serde::{Deserialize, Serialize};

use super::{standing_out, tested, QuestionSlices, RunValues, Statistics};

/// One slice of an evaluation: an entry of eval's `slices`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// `dimension:slice`, e.g. `question_type:when`.
    pub slice: String,
    /// Its questions.
    pub questions: usize,
    /// Exact match over its questions, percent (0–100).
    pub exact: f64,
    /// F1 over its questions, percent (0–100).
    pub f1: f64,
    /// The bootstrap percentile interval of `exact` over its questions, percent.
    pub exact_ci: [f64; 2],
    /// The bootstrap percentile interval of `f1` over its questions, percent.
    pub f1_ci: [f64; 2],
    /// The share (0–1) of its questions whose exact score is 0.
    pub error_rate: f64,
    /// The same share over the run's other questions (0 when there are none).
    pub rest_error_rate: f64,
    /// Fisher's exact test, two-sided, of its errors against the rest's.
    pub p_value: f64,
    /// `p_value` adjusted by Holm's method over every slice of the run.
    pub p_adjusted: f64,
}

/// Every slice of questions with `slices`, scored by each question's `exact` (0 or 1) and
/// `f1` (0–1), with intervals drawn as `statistics` says; and the weak slices.
pub(crate) fn tabled(
    slices: &[QuestionSlices],
    exact: &[f64],
    f1: &[f64],
    statistics: &Statistics,
) -> (Vec<Slice>, Vec<String>) {
    let errors: Vec<bool> = exact.iter().map(|&e| e == 0.0).collect();
    let tests = tested(slices, &errors);
    let weak = standing_out(&tests, statistics.confidence);
    let (exact_run, f1_run) = (RunValues::new(exact), RunValues::new(f1));
    let percent = |[lo, hi]: [f64; 2]| [100.0 * lo, 100.0 * hi];
    let table = tests
        .into_iter()
        .enumerate()
        .map(|(k, t)| {
            let mean = |values: &[f64]| {
                100.0 * t.members.iter().map(|&i| values[i]).sum::<f64>() / t.members.len() as f64
            };
            let stream = 2 * k as u64;
            Slice {
                questions: t.members.len(),
                exact: mean(exact),
                f1: mean(f1),
                exact_ci: percent(exact_run.interval(&t.members, statistics, stream)),
                f1_ci: percent(f1_run.interval(&t.members, statistics, stream + 1)),
                error_rate: t.rate,
                rest_error_rate: t.rest_rate,
                p_value: t.p_value,
                p_adjusted: t.p_adjusted,
                slice: t.slice,
            }
        })
        .collect();
    (table, weak)
}
