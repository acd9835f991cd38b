//! Whether a difference between two runs of the same questions is real: paired
//! statistics over questions (docs/algorithm.md, "Comparing two runs").
//!
//! - The difference of a score is the mean over questions of the model's per-question
//!   score minus the reference's, in points.
//! - Its interval: the percentile interval of a paired bootstrap over questions (the
//!   same resampled questions for exact match and F1).
//! - Exact match's p-value: McNemar's exact test (a two-sided binomial test on the
//!   questions whose correctness changed). F1's: a paired sign-flip randomization test,
//!   `(1 + k) / (N + 1)`.
//! - The generator is wyrand (`fastrand` 2) seeded with the seed, indices drawn by
//!   `u64(..n)`: the same seed gives the same figures on every machine.

use serde::Serialize;

pub(crate) use crate::slices::quantile;
pub use crate::slices::Statistics;

/// A paired difference of one score: the model minus the reference, in points.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// The mean over questions of the per-question differences.
    pub value: f64,
    /// The bootstrap's percentile interval of `value`.
    pub ci: [f64; 2],
    /// Two-sided, against "no difference".
    pub p_value: f64,
}

impl Difference {
    /// The interval lies wholly below 0: the model is worse beyond chance.
    pub fn significantly_below_zero(&self) -> bool {
        self.ci[1] < 0.0
    }
}

/// Exact match's and F1's differences over `scores` (each question's (exact, F1) of the
/// reference, then of the model, 0-1, in question order).
pub(crate) fn differences(
    reference: &[(f64, f64)],
    model: &[(f64, f64)],
    statistics: &Statistics,
) -> (Difference, Difference) {
    let n = reference.len().min(model.len());
    let diffs: Vec<(f64, f64)> = reference[..n]
        .iter()
        .zip(&model[..n])
        .map(|(r, m)| (100.0 * (m.0 - r.0), 100.0 * (m.1 - r.1)))
        .collect();
    if n == 0 {
        let none = Difference {
            value: 0.0,
            ci: [0.0, 0.0],
            p_value: 1.0,
        };
        return (none, none);
    }
    let mean = |f: fn(&(f64, f64)) -> f64| diffs.iter().map(f).sum::<f64>() / n as f64;
    let (exact, f1) = (mean(|d| d.0), mean(|d| d.1));
    let (exact_ci, f1_ci) = bootstrap(&diffs, statistics);
    // Right to wrong and wrong to right, by exact match.
    let (b, c) =
        reference[..n]
            .iter()
            .zip(&model[..n])
            .fold((0u64, 0u64), |(b, c), (r, m)| {
                match (r.0 > 0.5, m.0 > 0.5) {
                    (true, false) => (b + 1, c),
                    (false, true) => (b, c + 1),
                    _ => (b, c),
                }
            });
    (
        Difference {
            value: exact,
            ci: exact_ci,
            p_value: mcnemar_exact(b, c),
        },
        Difference {
            value: f1,
            ci: f1_ci,
            p_value: sign_flip(&diffs, f1, statistics),
        },
    )
}

/// The percentile intervals of the means of exact's and F1's differences over
/// resamples of the questions (drawn with replacement; one draw serves both).
fn bootstrap(diffs: &[(f64, f64)], statistics: &Statistics) -> ([f64; 2], [f64; 2]) {
    let n = diffs.len();
    let rounds = statistics.rounds.max(1);
    let mut rng = fastrand::Rng::with_seed(statistics.seed);
    let (mut exact, mut f1) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let (mut e, mut f) = (0.0, 0.0);
        for _ in 0..n {
            let d = diffs[rng.u64(..n as u64) as usize];
            e += d.0;
            f += d.1;
        }
        exact.push(e / n as f64);
        f1.push(f / n as f64);
    }
    let tail = (1.0 - statistics.confidence) / 2.0;
    let interval = |mut means: Vec<f64>| {
        means.sort_by(f64::total_cmp);
        [quantile(&means, tail), quantile(&means, 1.0 - tail)]
    };
    (interval(exact), interval(f1))
}

/// McNemar's exact test: the two-sided binomial p-value of `b` changes one way and `c`
/// the other under "either way is as likely" (1 when nothing changed).
pub(crate) fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    let k = b.min(c);
    if n == 0 {
        return 1.0;
    }
    // P(X ≤ k) for X ~ Binomial(n, 1/2), summed from its largest term C(n, k) / 2^n down:
    // C(n, i - 1) = C(n, i) · i / (n - i + 1), each ratio below 1 since k ≤ n / 2.
    let log_largest = (1..=k)
        .map(|i| ((n - k + i) as f64 / i as f64).ln())
        .sum::<f64>()
        - n as f64 * std::f64::consts::LN_2;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for i in (1..=k).rev() {
        term *= i as f64 / (n - i + 1) as f64;
        sum += term;
        if term < sum * 1e-18 {
            break;
        }
    }
    (2.0 * log_largest.exp() * sum).min(1.0)
}

/// The paired sign-flip randomization test of F1's differences: each round flips the
/// sign of every question's difference at random; the p-value counts the rounds whose
/// mean is at least as far from 0 as `observed`.
fn sign_flip(diffs: &[(f64, f64)], observed: f64, statistics: &Statistics) -> f64 {
    let n = diffs.len();
    let rounds = statistics.rounds.max(1);
    // Its own stream, so that the bootstrap's draws do not depend on this test.
    let mut rng = fastrand::Rng::with_seed(statistics.seed ^ 0x9e37_79b9_7f4a_7c15);
    let limit = observed.abs() - 1e-12;
    let mut k = 0usize;
    for _ in 0..rounds {
        let mut sum = 0.0;
        for chunk in diffs.chunks(64) {
            let bits = rng.u64(..);
            for (j, d) in chunk.iter().enumerate() {
                sum += if bits >> j & 1 == 1 { d.1 } else { -d.1 };
            }
        }
        if (sum / n as f64).abs() >= limit {
            k += 1;
        }
    }
    (1 + k) as f64 / (rounds + 1) as f64
}

/// How far the model's start (or end) distributions are from the reference's: KL(ref ‖
/// model) of the softmax over each window's positions, over the windows both made.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Divergence {
    /// The mean of the per-window divergences, in nats (NaN: a logit was not finite).
    pub mean: f64,
    /// Their 99th percentile, in nats.
    pub p99: f64,
    /// The largest, in nats.
    pub max: f64,
}

/// KL(p ‖ q) of the softmaxes of logits `a` (the reference) and `b`, in nats (NaN when
/// a logit is not finite).
pub(crate) fn kl_of_softmax(a: &[f32], b: &[f32]) -> f64 {
    let log_softmax = |x: &[f32]| -> Vec<f64> {
        let max = x
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = x.iter().map(|&v| (f64::from(v) - max).exp()).sum();
        let log_sum = max + sum.ln();
        x.iter().map(|&v| f64::from(v) - log_sum).collect()
    };
    if a.iter().chain(b).any(|v| !v.is_finite()) {
        return f64::NAN;
    }
    let (lp, lq) = (log_softmax(a), log_softmax(b));
    lp.iter()
        .zip(&lq)
        .map(|(p, q)| p.exp() * (p - q))
        .sum::<f64>()
        .max(0.0)
}

/// The mean, 99th percentile and maximum of per-window divergences (`None`: no
/// windows; NaN anywhere makes all three NaN).
pub(crate) fn summarize(mut kls: Vec<f64>) -> Option<Divergence> {
    if kls.is_empty() {
        return None;
    }
    if kls.iter().any(|k| k.is_nan()) {
        return Some(Divergence {
            mean: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
        });
    }
    kls.sort_by(f64::total_cmp);
    Some(Divergence {
        mean: kls.iter().sum::<f64>() / kls.len() as f64,
        p99: quantile(&kls, 0.99),
        max: kls[kls.len() - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// C(n, i) / 2^n summed exactly in integers, for small n.
    fn binomial_two_sided(b: u64, c: u64) -> f64 {
        let n = b + c;
        let mut row = vec![1u128];
        for _ in 0..n {
            let mut next = vec![1u128; row.len() + 1];
            for i in 1..row.len() {
                next[i] = row[i - 1] + row[i];
            }
            row = next;
        }
        let tail: u128 = row[..=(b.min(c) as usize)].iter().sum();
        (2.0 * tail as f64 / 2f64.powi(n as i32)).min(1.0)
    }

    #[test]
    fn mcnemar_equals_the_binomial_sum() {
        for (b, c) in [
            (0, 0),
            (0, 1),
            (3, 3),
            (10, 2),
            (2, 10),
            (40, 25),
            (0, 60),
            (57, 61),
        ] {
            let want = binomial_two_sided(b, c);
            let got = mcnemar_exact(b, c);
            assert!(
                (got - want).abs() <= 1e-12 * want.max(1e-300),
                "{b} {c}: {got} vs {want}"
            );
        }
        // Far in the tail (below f64's range): 0, not NaN.
        let p = mcnemar_exact(2000, 100);
        assert!((0.0..1e-250).contains(&p), "{p}");
    }

    #[test]
    fn quantiles_interpolate_as_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        assert_eq!(quantile(&v, 0.5), 2.5);
        assert!((quantile(&v, 0.025) - 1.075).abs() < 1e-12);
    }

    #[test]
    fn a_model_worse_on_every_changed_question_is_significantly_worse() {
        // 200 questions; the model loses 30 the reference had right.
        let reference: Vec<(f64, f64)> = (0..200).map(|_| (1.0, 1.0)).collect();
        let model: Vec<(f64, f64)> = (0..200)
            .map(|i| {
                if i % 7 == 0 && i < 210 {
                    (0.0, 0.25)
                } else {
                    (1.0, 1.0)
                }
            })
            .collect();
        let (exact, f1) = differences(&reference, &model, &Statistics::default());
        assert!(
            (exact.value - -100.0 * 29.0 / 200.0).abs() < 1e-9,
            "{exact:?}"
        );
        assert!(exact.significantly_below_zero() && f1.significantly_below_zero());
        assert!(
            exact.p_value < 1e-6 && f1.p_value < 1e-3,
            "{exact:?} {f1:?}"
        );
        assert!(exact.ci[0] <= exact.value && exact.value <= exact.ci[1]);
        // The same seed, the same figures; another seed, another interval.
        let again = differences(&reference, &model, &Statistics::default());
        assert_eq!(again, (exact, f1));
        let other = Statistics {
            seed: 7,
            ..Statistics::default()
        };
        assert_ne!(differences(&reference, &model, &other).0.ci, exact.ci);
    }

    #[test]
    fn identical_runs_differ_by_nothing() {
        let s: Vec<(f64, f64)> = (0..50).map(|i| ((i % 2) as f64, 0.5)).collect();
        let (exact, f1) = differences(&s, &s, &Statistics::default());
        assert_eq!(
            (exact.value, exact.ci, exact.p_value),
            (0.0, [0.0, 0.0], 1.0)
        );
        assert_eq!(f1.p_value, 1.0);
    }

    #[test]
    fn divergence_of_equal_logits_is_zero_and_grows_with_the_difference() {
        let a = [1.0f32, 2.0, 3.0];
        assert_eq!(kl_of_softmax(&a, &a), 0.0);
        let near = kl_of_softmax(&a, &[1.0, 2.0, 3.1]);
        let far = kl_of_softmax(&a, &[3.0, 2.0, 1.0]);
        assert!(0.0 < near && near < far, "{near} {far}");
        assert!(kl_of_softmax(&a, &[f32::NAN, 0.0, 0.0]).is_nan());
        let s = summarize(vec![0.0, 1.0, 3.0]).unwrap();
        assert_eq!((s.mean, s.max), (4.0 / 3.0, 3.0));
        assert!(summarize(Vec::new()).is_none());
    }
}
