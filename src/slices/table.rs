//! A run's slices and whether what is flagged in each (a run's errors, or the answers
//! that changed between two runs) stands out against the rest (docs/algorithm.md §8.8).

use super::assign::QuestionSlices;
use super::stats::{fisher_exact, holm};
use super::DIMENSIONS;

/// One slice and its test against the rest of the run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SliceTest {
    /// `dimension:slice`, e.g. `question_type:when`.
    pub(crate) slice: String,
    /// The questions of the slice, in data order (indexes into the data).
    pub(crate) members: Vec<usize>,
    /// The share of the slice's questions that are flagged.
    pub(crate) rate: f64,
    /// The same share over the questions outside the slice (0 when there are none).
    pub(crate) rest_rate: f64,
    /// Fisher's exact test of the slice's flagged questions against the rest's,
    /// two-sided.
    pub(crate) p_value: f64,
    /// `p_value` adjusted by Holm's method over every slice of the run.
    pub(crate) p_adjusted: f64,
}

/// Every slice of questions with `slices`, each tested on `flagged` (one flag per
/// question): in the order of [`DIMENSIONS`] and, within one, of the slices' names.
pub(crate) fn tested(slices: &[QuestionSlices], flagged: &[bool]) -> Vec<SliceTest> {
    let n = slices.len().min(flagged.len());
    let flagged_total = flagged[..n].iter().filter(|&&f| f).count();
    let mut out = Vec::new();
    for (d, dimension) in DIMENSIONS.iter().enumerate() {
        let mut names: Vec<&'static str> = slices[..n].iter().filter_map(|s| s[d]).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let members: Vec<usize> = (0..n).filter(|&i| slices[i][d] == Some(name)).collect();
            let (m, rest) = (members.len(), n - members.len());
            let hits = members.iter().filter(|&&i| flagged[i]).count();
            let rest_hits = flagged_total - hits;
            out.push(SliceTest {
                slice: format!("{dimension}:{name}"),
                members,
                rate: hits as f64 / m as f64,
                rest_rate: match rest {
                    0 => 0.0,
                    _ => rest_hits as f64 / rest as f64,
                },
                p_value: fisher_exact(
                    hits as u64,
                    (m - hits) as u64,
                    rest_hits as u64,
                    (rest - rest_hits) as u64,
                ),
                p_adjusted: 1.0,
            });
        }
    }
    let p: Vec<f64> = out.iter().map(|s| s.p_value).collect();
    for (s, adjusted) in out.iter_mut().zip(holm(&p)) {
        s.p_adjusted = adjusted;
    }
    out
}

/// The slices whose adjusted p-value is below `1 - confidence` and whose rate is above
/// the rest's: a run's weak slices, or where the changes between two runs concentrate.
pub(crate) fn standing_out(tests: &[SliceTest], confidence: f64) -> Vec<String> {
    tests
        .iter()
        .filter(|s| s.p_adjusted < 1.0 - confidence && s.rate > s.rest_rate)
        .map(|s| s.slice.clone())
        .collect()
}
