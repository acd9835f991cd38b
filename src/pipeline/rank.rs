//! Reading each answered row where the response lies (shared memory or the message):
//! its logits, with non-finite values replaced by −∞ and counted, and, when the run
//! decodes, its n-best candidates ranked in the same pass.

use std::sync::Arc;

use crate::backend::tensor;
use crate::decode::{Candidates, Scores};
use crate::types::{Feature, Logits};

/// Ranking each answer where it is read ([`infer_events`](super::infer_events)): candidates
/// for n-best size `k`, read straight from the response's memory, in the same pass that
/// checks the logits for non-finite values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rank {
    /// The n-best size.
    pub k: usize,
    /// Keep every feature's logits too. Otherwise they are kept only where the
    /// candidates cannot stand for them ([`crate::journal::stands_alone`]: non-finite
    /// values, short windows), and copied out of the response only then.
    pub keep_logits: bool,
}

/// Reads each row of a checked answer (`features` in row order): its logits and, with
/// `rank`, its candidates; non-finite logits replaced by −∞ and counted.
pub(super) fn read_rows(
    checked: &tensor::Checked<'_>,
    features: &[Arc<Feature>],
    rank: Option<Rank>,
    scratch: &mut Vec<usize>,
) -> (Vec<Scores>, crate::decode::non_finite::NonFinite) {
    let mut out = Vec::with_capacity(checked.rows());
    let mut non_finite = crate::decode::non_finite::NonFinite::default();
    for (row, f) in features.iter().take(checked.rows()).enumerate() {
        let unique_id = f.unique_id;
        // Ranked where the values lie, when they can be read there as they are.
        let ranked = rank.and_then(|r| {
            let (start, end) = checked.row_f32(row)?;
            Some(Candidates::of_rows(start, end, r.k, scratch))
        });
        let ranked = match (rank, ranked) {
            (Some(r), Some(c)) if !r.keep_logits && crate::journal::stands_alone(&c, r.k) => {
                out.push(Scores::Candidates {
                    unique_id,
                    candidates: c,
                });
                continue;
            }
            (_, ranked) => ranked,
        };
        let mut l = Logits {
            unique_id,
            start: Vec::new(),
            end: Vec::new(),
        };
        checked.row_into(row, &mut l.start, &mut l.end);
        let replaced = crate::decode::non_finite::sanitize(&mut l);
        if replaced > 0 {
            non_finite.values += replaced;
            non_finite.features += 1;
        }
        // Candidates of finite values are those of the sanitized ones; others are
        // ranked again, after the replacement.
        let candidates = match (rank, ranked) {
            (Some(_), Some(c)) if c.finite() => Some(c),
            (Some(r), _) => Some(Candidates::of(&l, r.k, scratch)),
            (None, _) => None,
        };
        out.push(Scores::Logits {
            logits: l,
            candidates,
        });
    }
    (out, non_finite)
}
