//! NaN and infinite logits (issue #8 item 3): a model that returns them must not win a
//! span with `+inf` or poison a softmax with NaN. Every non-finite value is replaced by
//! −∞ before span choice, so such a position never starts or ends a chosen span while a
//! finite one is left, and the replacements are counted so reports can say how many.

use crate::types::Logits;

/// Counts of non-finite logits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NonFinite {
    /// Values replaced (start and end logits together).
    pub values: u64,
    /// Features with at least one.
    pub features: u64,
}

impl NonFinite {
    /// Adds another count.
    pub fn add(&mut self, other: &NonFinite) {
        self.values += other.values;
        self.features += other.features;
    }
}

/// Replaces NaN, +∞ and −∞ by −∞ in one feature's logits; returns how many were
/// non-finite (−∞ itself is counted too: it was not a number the model meant).
pub fn sanitize(logits: &mut Logits) -> u64 {
    let mut n = 0;
    for x in logits.start.iter_mut().chain(logits.end.iter_mut()) {
        if !x.is_finite() {
            *x = f32::NEG_INFINITY;
            n += 1;
        }
    }
    n
}

/// [`sanitize`] over many features.
pub fn sanitize_all(logits: &mut [Logits]) -> NonFinite {
    let mut total = NonFinite::default();
    for l in logits {
        let n = sanitize(l);
        if n > 0 {
            total.values += n;
            total.features += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_become_negative_infinity_and_are_counted() {
        let mut l = vec![
            Logits {
                unique_id: 1,
                start: vec![0.5, f32::NAN, f32::INFINITY],
                end: vec![f32::NEG_INFINITY, 1.0, 2.0],
            },
            Logits {
                unique_id: 2,
                start: vec![0.0, 1.0],
                end: vec![1.0, 0.0],
            },
        ];
        let n = sanitize_all(&mut l);
        assert_eq!(
            n,
            NonFinite {
                values: 3,
                features: 1
            }
        );
        assert_eq!(l[0].start[0], 0.5);
        assert_eq!(l[0].start[1], f32::NEG_INFINITY);
        assert_eq!(l[0].start[2], f32::NEG_INFINITY);
        assert_eq!(l[0].end, vec![f32::NEG_INFINITY, 1.0, 2.0]);
        assert_eq!(l[1].start, vec![0.0, 1.0]);
    }
}
