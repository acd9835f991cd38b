//! NaN and infinite logits (an FP16 overflow, a broken model): a model that returns them must not win a
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
pub(crate) fn sanitize(logits: &mut Logits) -> u64 {
    if all_finite(&logits.start) && all_finite(&logits.end) {
        return 0;
    }
    let mut n = 0;
    for x in logits.start.iter_mut().chain(logits.end.iter_mut()) {
        if !x.is_finite() {
            *x = f32::NEG_INFINITY;
            n += 1;
        }
    }
    n
}

/// Whether every value is finite: one pass without early exit, so that it runs on
/// whole vectors (the usual case, checked for every logit of every answer).
fn all_finite(x: &[f32]) -> bool {
    !x.iter().fold(false, |bad, v| bad | !v.is_finite())
}

/// `sanitize` over many features.
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

    #[test]
    fn any_single_non_finite_value_is_found_wherever_it_is() {
        for len in [1usize, 7, 8, 9, 33, 384] {
            for at in [0, len / 2, len - 1] {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
                    let mut x = vec![f32::MAX; len];
                    assert!(all_finite(&x));
                    x[at] = bad;
                    assert!(!all_finite(&x), "{bad} at {at} of {len}");
                    let mut l = Logits {
                        unique_id: 0,
                        start: vec![0.0; len],
                        end: x,
                    };
                    assert_eq!(sanitize(&mut l), 1);
                    assert_eq!(l.end[at], f32::NEG_INFINITY);
                }
            }
        }
    }
}
