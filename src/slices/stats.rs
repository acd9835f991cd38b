//! The tests behind weak slices and concentrated changes (docs/algorithm.md, "Slices"):
//! Fisher's exact test of a 2×2 table and Holm's adjustment of a family of p-values.

/// Two-sided Fisher's exact test of the table `[[a, b], [c, d]]` (a slice's errors and
/// the rest, against the rest's): the hypergeometric probability, under the table's
/// margins, of every table no likelier than the observed one, within a relative 1e-7
/// (as R's `fisher.test` and scipy's `fisher_exact` count ties).
///
/// The probabilities are taken relative to the likeliest table by the ratio of
/// successive terms, then normalized: no factorial is formed, and terms too small for
/// an `f64` beside the mode's are zero.
pub(crate) fn fisher_exact(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let n = a + b + c + d;
    let (row, col) = (a + b, a + c);
    let lo = (row + col).saturating_sub(n);
    let hi = row.min(col);
    if lo == hi {
        return 1.0;
    }
    // The likeliest count of the top-left cell, and P(x + 1) / P(x).
    let mode = (((row + 1) as f64 * (col + 1) as f64) / (n + 2) as f64) as u64;
    let mode = mode.clamp(lo, hi);
    let ratio = |x: u64| {
        ((row - x) as f64 * (col - x) as f64) / ((x + 1) as f64 * (n + x + 1 - row - col) as f64)
    };
    let mut weights = vec![0.0; (hi - lo + 1) as usize];
    weights[(mode - lo) as usize] = 1.0;
    let mut w = 1.0;
    for x in mode..hi {
        w *= ratio(x);
        weights[(x + 1 - lo) as usize] = w;
    }
    w = 1.0;
    for x in (lo..mode).rev() {
        w /= ratio(x);
        weights[(x - lo) as usize] = w;
    }
    let observed = weights[(a - lo) as usize] * (1.0 + 1e-7);
    let total: f64 = weights.iter().sum();
    let tail: f64 = weights.iter().filter(|&&w| w <= observed).sum();
    (tail / total).min(1.0)
}

/// Holm's step-down adjustment of `p` (in its order): the i-th smallest p-value of m is
/// multiplied by m − i (i from 0), each then raised to the largest before it, at most 1.
/// Ties keep their order.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}
