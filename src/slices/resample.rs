//! Bootstrap intervals of a mean drawn by counts (docs/algorithm.md, "Slices"): the
//! intervals of every slice of a run, where resampling each slice's questions one by
//! one would cost rounds × questions × dimensions draws.
//!
//! A resample of n values drawn with replacement holds each distinct value a
//! multinomial number of times. Values that occur often (a run's exact scores are all
//! 0 or 1; most F1 scores are too, and most differences between two runs are 0) are
//! drawn as counts, one binomial each, conditioned in turn (how a multinomial is
//! drawn); the rest are drawn one by one. The resampled mean has the same
//! distribution as when every value is drawn, at a cost per round of the number of
//! frequent values plus the draws that land on the rest.

use rand_distr::{Binomial, Distribution};

/// A value that occurs at least this often among a run's questions is drawn as a
/// count (one binomial costs about as much as this many uniform draws).
const COUNTED: usize = 16;

/// One score of each of a run's questions, its frequent values numbered once for the
/// intervals of every slice.
pub(crate) struct RunValues<'a> {
    values: &'a [f64],
    /// The frequent values, and each question's index among them (`None`: the rest).
    frequent: Vec<f64>,
    index: Vec<Option<u32>>,
}

impl<'a> RunValues<'a> {
    pub(crate) fn new(values: &'a [f64]) -> RunValues<'a> {
        let mut sorted = values.to_vec();
        sorted.sort_unstable_by(f64::total_cmp);
        let frequent: Vec<f64> = sorted
            .chunk_by(|a, b| a.to_bits() == b.to_bits())
            .filter(|run| run.len() >= COUNTED)
            .map(|run| run[0])
            .collect();
        let index = values
            .iter()
            .map(|v| {
                frequent
                    .binary_search_by(|f| f.total_cmp(v))
                    .ok()
                    .map(|i| i as u32)
            })
            .collect();
        RunValues {
            values,
            frequent,
            index,
        }
    }

    /// The percentile interval of the mean over the questions `members` (indexes into
    /// the run) across `statistics.rounds` bootstrap resamples, at
    /// `statistics.confidence`, drawn by counts (see the module's docs). The generator
    /// is seeded with the seed and `stream`, so that the intervals computed with one
    /// seed draw apart. One value throughout gives that value; no members, NaN.
    pub(crate) fn interval(
        &self,
        members: &[usize],
        statistics: &Statistics,
        stream: u64,
    ) -> [f64; 2] {
        let Some(&first) = members.first() else {
            return [f64::NAN, f64::NAN];
        };
        let v = self.values[first];
        if members
            .iter()
            .all(|&i| self.values[i].to_bits() == v.to_bits())
        {
            return [v, v];
        }
        let grouped = self.grouped(members);
        let n = members.len() as u64;
        let tail = (1.0 - statistics.confidence) / 2.0;
        if let ([(a, _), (b, count_b)], []) = (&grouped.counted[..], &grouped.rest[..]) {
            // Two values (a run's exact scores): the resampled count of `b` is
            // Binomial(n, count_b / n), whose quantiles are computed, not drawn.
            let k = binomial_quantiles(n, *count_b as f64 / n as f64, [tail, 1.0 - tail]);
            return k.map(|k| a + (b - a) * k as f64 / n as f64);
        }
        let mut rng = Wyrand(fastrand::Rng::with_seed(
            statistics.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        ));
        let mut means: Vec<f64> = (0..statistics.rounds.max(1))
            .map(|_| grouped.resampled_sum(n, &mut rng) / n as f64)
            .collect();
        [
            unsorted_quantile(&mut means, tail),
            unsorted_quantile(&mut means, 1.0 - tail),
        ]
    }
}

impl RunValues<'_> {
    /// The values of `members`, grouped for drawing.
    fn grouped(&self, members: &[usize]) -> Grouped {
        let mut counts = vec![0u64; self.frequent.len()];
        let mut rest = Vec::new();
        for &i in members {
            match self.index[i] {
                Some(k) => counts[k as usize] += 1,
                None => rest.push(self.values[i]),
            }
        }
        Grouped {
            counted: self
                .frequent
                .iter()
                .zip(counts)
                .filter(|&(_, c)| c > 0)
                .map(|(&v, c)| (v, c))
                .collect(),
            rest,
        }
    }

    /// The paired sign-flip randomization test of the mean over `members` (each a
    /// difference between two runs): each of `statistics.rounds` rounds gives every
    /// value a random sign; the p-value, `(1 + k) / (rounds + 1)`, counts the rounds
    /// whose mean is at least as far from 0 as `observed`. A frequent value's signs
    /// are drawn as one binomial count per round (the values it adds up to are
    /// `v · (2k − c)`); the rest one sign each.
    pub(crate) fn sign_flip(
        &self,
        members: &[usize],
        observed: f64,
        statistics: &Statistics,
        stream: u64,
    ) -> f64 {
        let grouped = self.grouped(members);
        let n = members.len().max(1) as f64;
        let counted: Vec<(f64, u64, Binomial)> = grouped
            .counted
            .iter()
            .filter(|&&(v, _)| v != 0.0)
            .filter_map(|&(v, c)| Some((v, c, Binomial::new(c, 0.5).ok()?)))
            .collect();
        let rounds = statistics.rounds.max(1);
        // Its own stream, apart from the intervals' draws.
        let mut rng = Wyrand(fastrand::Rng::with_seed(
            statistics.seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5bd1_e995,
        ));
        let limit = observed.abs() - 1e-12;
        let mut k = 0usize;
        for _ in 0..rounds {
            let mut sum = 0.0;
            for (v, c, signs) in &counted {
                let positive = signs.sample(&mut rng);
                sum += v * (2.0 * positive as f64 - *c as f64);
            }
            for chunk in grouped.rest.chunks(64) {
                let bits = rng.0.u64(..);
                for (j, d) in chunk.iter().enumerate() {
                    sum += if bits >> j & 1 == 1 { *d } else { -d };
                }
            }
            if (sum / n).abs() >= limit {
                k += 1;
            }
        }
        (1 + k) as f64 / (rounds + 1) as f64
    }
}

/// The `q` quantiles of Binomial(`n`, `p`): for each, the least k whose cumulative
/// probability reaches it. The probabilities are taken relative to the likeliest count,
/// each from its neighbour by the ratio of successive terms, then normalized (no
/// factorial is formed; terms too small for an `f64` beside the mode's are 0).
fn binomial_quantiles(n: u64, p: f64, q: [f64; 2]) -> [u64; 2] {
    let mode = (((n + 1) as f64 * p).floor() as u64).min(n);
    // P(k + 1) / P(k).
    let ratio = |k: u64| (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
    let mut weights = vec![0.0; n as usize + 1];
    weights[mode as usize] = 1.0;
    let mut w = 1.0;
    for k in mode..n {
        w *= ratio(k);
        weights[k as usize + 1] = w;
    }
    w = 1.0;
    for k in (0..mode).rev() {
        w /= ratio(k);
        weights[k as usize] = w;
    }
    let total: f64 = weights.iter().sum();
    q.map(|q| {
        let mut cumulative = 0.0;
        for (k, w) in weights.iter().enumerate() {
            cumulative += w / total;
            if cumulative >= q - 1e-12 {
                return k as u64;
            }
        }
        n
    })
}

/// [`quantile`] of values in any order (reordered): the two closest ranks are
/// selected, not the whole sorted.
fn unsorted_quantile(values: &mut [f64], q: f64) -> f64 {
    let n = values.len();
    let at = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    let (_, &mut low, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let high = match hi > lo {
        true => above.iter().copied().fold(f64::INFINITY, f64::min),
        false => low,
    };
    low + (high - low) * (at - lo as f64)
}

/// A slice's values grouped for drawing: the frequent ones with their counts, the rest.
struct Grouped {
    counted: Vec<(f64, u64)>,
    rest: Vec<f64>,
}

impl Grouped {
    /// The sum of one resample of all `n` values.
    fn resampled_sum(&self, n: u64, rng: &mut Wyrand) -> f64 {
        let (mut left, mut mass, mut sum) = (n, n, 0.0);
        for &(value, count) in &self.counted {
            if left == 0 {
                break;
            }
            // `count <= mass`, so the probability is within [0, 1].
            let k = match count == mass {
                true => left,
                false => {
                    Binomial::new(left, count as f64 / mass as f64).map_or(0, |b| b.sample(rng))
                }
            };
            sum += k as f64 * value;
            left -= k;
            mass -= count;
        }
        let rest = self.rest.len() as u64;
        if rest > 0 {
            for _ in 0..left {
                sum += self.rest[rng.0.u64(..rest) as usize];
            }
        }
        sum
    }
}

/// How the statistics are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Statistics {
    /// Bootstrap resamples, and rounds of the randomization test (at least 1).
    pub rounds: usize,
    /// The generator's seed: the same seed gives the same intervals and p-values.
    pub seed: u64,
    /// The interval's coverage, in (0, 1).
    pub confidence: f64,
}

impl Default for Statistics {
    fn default() -> Self {
        Statistics {
            rounds: 10_000,
            seed: 0,
            confidence: 0.95,
        }
    }
}

/// The `q` quantile of sorted `values` by linear interpolation between the closest
/// ranks (numpy's default).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n => {
            let at = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
        }
    }
}

/// The project's generator (wyrand, `fastrand` 2) for rand's distributions.
struct Wyrand(fastrand::Rng);

impl rand_core::RngCore for Wyrand {
    fn next_u32(&mut self) -> u32 {
        self.0.u32(..)
    }

    fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill(dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drawn by counts or one by one, the resampled means have the same distribution:
    /// their mean, spread and quantiles agree within what 20,000 rounds can tell
    /// apart, for values with and without frequent ones, over a run or a slice of it.
    #[test]
    fn counts_draw_as_one_by_one_draws_do() {
        let mut rng = fastrand::Rng::with_seed(7);
        let cases: Vec<Vec<f64>> = vec![
            (0..500).map(|_| f64::from(rng.bool())).collect(),
            (0..400)
                .map(|i| match i % 5 {
                    0 | 1 => 1.0,
                    2 => 0.0,
                    _ => rng.f64(),
                })
                .collect(),
            (0..300).map(|_| rng.f64()).collect(),
            (0..200)
                .map(|i| [-1.0, 0.0, 0.0, 0.0, 1.0][i % 5])
                .collect(),
        ];
        let rounds = 20_000;
        for values in cases {
            let run = RunValues::new(&values);
            for members in [
                (0..values.len()).collect::<Vec<_>>(),
                (0..values.len()).step_by(3).collect(),
            ] {
                let n = members.len();
                let mut grouped = Grouped {
                    counted: Vec::new(),
                    rest: Vec::new(),
                };
                for &i in &members {
                    match run.index[i] {
                        Some(k) => match grouped
                            .counted
                            .iter_mut()
                            .find(|(v, _)| *v == run.frequent[k as usize])
                        {
                            Some((_, c)) => *c += 1,
                            None => grouped.counted.push((run.frequent[k as usize], 1)),
                        },
                        None => grouped.rest.push(values[i]),
                    }
                }
                let mut by_counts = Wyrand(fastrand::Rng::with_seed(1));
                let mut one_by_one = fastrand::Rng::with_seed(2);
                let mut a: Vec<f64> = (0..rounds)
                    .map(|_| grouped.resampled_sum(n as u64, &mut by_counts) / n as f64)
                    .collect();
                let mut b: Vec<f64> = (0..rounds)
                    .map(|_| {
                        (0..n)
                            .map(|_| values[members[one_by_one.usize(..n)]])
                            .sum::<f64>()
                            / n as f64
                    })
                    .collect();
                let moments = |x: &[f64]| {
                    let m = x.iter().sum::<f64>() / x.len() as f64;
                    let v = x.iter().map(|y| (y - m).powi(2)).sum::<f64>() / x.len() as f64;
                    (m, v.sqrt())
                };
                let ((ma, sa), (mb, sb)) = (moments(&a), moments(&b));
                // The standard error of a mean of 20,000 rounds is sd / 141; of the sd, about sd / 200.
                assert!((ma - mb).abs() < 5.0 * sb / 141.0, "means {ma} {mb}");
                assert!((sa - sb).abs() < 5.0 * sb / 100.0, "spreads {sa} {sb}");
                a.sort_by(f64::total_cmp);
                b.sort_by(f64::total_cmp);
                for q in [0.025, 0.5, 0.975] {
                    let (qa, qb) = (quantile(&a, q), quantile(&b, q));
                    assert!((qa - qb).abs() < 0.25 * sb, "quantile {q}: {qa} {qb}");
                }
            }
        }
    }

    /// A slice of two values: its interval computed from the binomial equals the one
    /// drawn one by one over 40,000 rounds, within a step of the lattice.
    #[test]
    fn two_values_give_the_drawn_interval_exactly() {
        let statistics = Statistics {
            rounds: 40_000,
            seed: 5,
            confidence: 0.95,
        };
        for (n, ones) in [(40, 3), (400, 150), (1000, 990), (2000, 1000)] {
            let values: Vec<f64> = (0..n).map(|i| f64::from(u8::from(i < ones))).collect();
            let all: Vec<usize> = (0..n).collect();
            let got = RunValues::new(&values).interval(&all, &statistics, 0);
            let mut rng = fastrand::Rng::with_seed(9);
            let mut means: Vec<f64> = (0..statistics.rounds)
                .map(|_| (0..n).map(|_| values[rng.usize(..n)]).sum::<f64>() / n as f64)
                .collect();
            means.sort_by(f64::total_cmp);
            for (i, q) in [0.025, 0.975].into_iter().enumerate() {
                let drawn = quantile(&means, q);
                assert!(
                    (got[i] - drawn).abs() <= 1.0 / n as f64 + 1e-12,
                    "{n} {ones}: {got:?} vs {drawn}"
                );
            }
        }
    }

    #[test]
    fn quantiles_of_unsorted_values_equal_the_sorted_ones() {
        let mut rng = fastrand::Rng::with_seed(3);
        for n in [1, 2, 3, 10, 101] {
            let values: Vec<f64> = (0..n).map(|_| rng.f64()).collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            for q in [0.0, 0.025, 0.3, 0.5, 0.975, 1.0] {
                assert_eq!(
                    unsorted_quantile(&mut values.clone(), q),
                    quantile(&sorted, q)
                );
            }
        }
    }

    #[test]
    fn an_interval_holds_its_mean_and_is_one_point_for_one_value() {
        let statistics = Statistics::default();
        let zeros = vec![0.0; 1000];
        let all: Vec<usize> = (0..1000).collect();
        assert_eq!(
            RunValues::new(&zeros).interval(&all, &statistics, 0),
            [0.0, 0.0]
        );
        // Frequent values and a rest of fractions: drawn.
        let values: Vec<f64> = (0..1000)
            .map(|i| match i % 4 {
                0 => 1.0,
                1 => (i % 7) as f64 / 7.0,
                _ => 0.0,
            })
            .collect();
        let mean = values.iter().sum::<f64>() / 1000.0;
        let run = RunValues::new(&values);
        let [lo, hi] = run.interval(&all, &statistics, 3);
        assert!(lo < mean && mean < hi && hi - lo < 0.07, "{lo} {mean} {hi}");
        // The same seed and stream give the same interval; another stream another.
        assert_eq!(run.interval(&all, &statistics, 3), [lo, hi]);
        assert_ne!(run.interval(&all, &statistics, 4), [lo, hi]);
        assert!(run.interval(&[], &statistics, 0)[0].is_nan());
    }
}
