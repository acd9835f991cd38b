//! Ranking a window's logits (§6.2): the candidates decoding reads.

use crate::types::Logits;

/// The first `k` positions of a window's start logits and of its end logits in the
/// decoder's order ([`best_indexes`], §6.2) with their logits, position 0's logits and
/// the lengths: everything decoding reads of the logits. Ranked once, where the answer
/// is read ([`Candidates::of_rows`], straight from the response's memory), used by both
/// the journal and the decoder, and kept instead of the logits while the question waits
/// for its other windows.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidates {
    k: usize,
    /// The start positions, then the end positions.
    positions: Vec<u32>,
    /// Their logits.
    values: Vec<f32>,
    /// How many start positions.
    starts: usize,
    /// The lengths of the start and end logits.
    lens: (usize, usize),
    /// Position 0's start and end logits (0 when there is none).
    first: (f32, f32),
    /// Every logit they were ranked from was finite.
    finite: bool,
}

impl Candidates {
    /// Ranks `logits` for n-best size `k` (`scratch` is reused between calls).
    pub fn of(logits: &Logits, k: usize, scratch: &mut Vec<usize>) -> Candidates {
        Self::of_rows(&logits.start, &logits.end, k, scratch)
    }

    /// Ranks a window's start and end logits for n-best size `k`, noting in the same
    /// pass whether every value is finite ([`Candidates::finite`]).
    pub fn of_rows(start: &[f32], end: &[f32], k: usize, scratch: &mut Vec<usize>) -> Candidates {
        let room = 2 * k.min(start.len());
        let (mut positions, mut values) = (Vec::with_capacity(room), Vec::with_capacity(room));
        let mut starts = 0;
        let mut finite = true;
        for (side, logits) in [start, end].into_iter().enumerate() {
            finite &= ranked_all_finite(logits, k, scratch);
            // Positions index a sequence of at most max_seq_length (far below 2^32).
            positions.extend(scratch.iter().map(|&i| i as u32));
            values.extend(scratch.iter().map(|&i| logits[i]));
            if side == 0 {
                starts = positions.len();
            }
        }
        let first = |x: &[f32]| x.first().copied().unwrap_or(0.0);
        Candidates {
            k,
            positions,
            values,
            starts,
            lens: (start.len(), end.len()),
            first: (first(start), first(end)),
            finite,
        }
    }

    /// The n-best size they were ranked for.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The lengths of the start and end logits they were ranked from.
    pub fn lens(&self) -> (usize, usize) {
        self.lens
    }

    /// Position 0's start and end logits (0 when there is none).
    pub fn first(&self) -> (f32, f32) {
        self.first
    }

    /// Whether every logit they were ranked from was finite (NaN and ±∞ are not).
    pub fn finite(&self) -> bool {
        self.finite
    }

    /// The start positions, best first.
    pub fn starts(&self) -> &[u32] {
        &self.positions[..self.starts]
    }

    /// The end positions, best first.
    pub fn ends(&self) -> &[u32] {
        &self.positions[self.starts..]
    }

    /// The start positions with their logits, best first.
    pub fn start_scores(&self) -> impl Iterator<Item = (usize, f32)> + '_ {
        let n = self.starts;
        self.positions[..n]
            .iter()
            .zip(&self.values[..n])
            .map(|(&i, &v)| (i as usize, v))
    }

    /// The end positions with their logits, best first.
    pub fn end_scores(&self) -> impl Iterator<Item = (usize, f32)> + '_ {
        let n = self.starts;
        self.positions[n..]
            .iter()
            .zip(&self.values[n..])
            .map(|(&i, &v)| (i as usize, v))
    }
}

/// The first `n` positions of a stable descending sort of `logits` (§6.2): equal logits
/// keep ascending position order. NaN ranks as −∞.
///
/// Without sorting everything: the best `n` so far are kept sorted in a small array, in
/// one pass. A later position enters only above the `n`-th value, never on a tie (it
/// would sort after the equal one already in), so a block of 8 none of whose values
/// passes it is skipped after one vector comparison. Random logits take a few dozen
/// insertions of a few moves each; all-equal ones (the null model's zeros) none after
/// the first `n`. Larger `n` than the array holds sorts everything.
pub fn best_indexes(logits: &[f32], n: usize, out: &mut Vec<usize>) {
    ranked_all_finite(logits, n, out);
}

/// [`best_indexes`], also telling whether every value of `logits` is finite: checked in
/// the same pass over the values, on the same vectors as the floor.
fn ranked_all_finite(logits: &[f32], n: usize, out: &mut Vec<usize>) -> bool {
    const BLOCK: usize = 8;
    let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
    let all_finite = |x: &[f32]| !x.iter().fold(false, |bad, v| bad | !v.is_finite());
    out.clear();
    if n == 0 {
        return all_finite(logits);
    }
    if n > KEPT {
        out.extend(0..logits.len());
        // Stable, and total on keys without NaN.
        out.sort_by(|&a, &b| {
            key(logits[b])
                .partial_cmp(&key(logits[a]))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        out.truncate(n);
        return all_finite(logits);
    }
    let mut kept = Kept {
        top: [(0.0, 0); KEPT],
        len: 0,
        n,
        floor: f32::NEG_INFINITY,
    };
    let mut bad = false;
    let mut blocks = logits.chunks_exact(BLOCK);
    for (b, block) in blocks.by_ref().enumerate() {
        // Whether any value passes the floor, and whether any is not finite, without
        // stopping early, so that both tests run on whole vectors (NaN passes nothing).
        let (any, nonfinite) = block.iter().fold((false, false), |(any, nf), &x| {
            (any | (x > kept.floor), nf | !x.is_finite())
        });
        bad |= nonfinite;
        if kept.len == n && !any {
            continue;
        }
        for (j, &x) in block.iter().enumerate() {
            kept.offer(key(x), b * BLOCK + j);
        }
    }
    let first = logits.len() - blocks.remainder().len();
    for (j, &x) in blocks.remainder().iter().enumerate() {
        bad |= !x.is_finite();
        kept.offer(key(x), first + j);
    }
    out.extend(kept.top[..kept.len].iter().map(|&(_, i)| i));
    !bad
}

/// The most positions [`best_indexes`] keeps in its array; a larger `n` sorts.
const KEPT: usize = 64;

/// [`best_indexes`]'s best `n` so far: (value, position), descending, ties in position
/// order.
struct Kept {
    top: [(f32, usize); KEPT],
    len: usize,
    n: usize,
    /// The n-th value once n are kept; until then every position enters.
    floor: f32,
}

impl Kept {
    /// Offers value `k` (NaN already mapped to −∞) at `position`, later than any offered.
    #[inline]
    fn offer(&mut self, k: f32, position: usize) {
        let n = self.n;
        if self.len == n && k <= self.floor {
            return;
        }
        // Full: the n-th entry leaves and its slot is where the shifting starts.
        let top = &mut self.top;
        let mut at = self.len.min(n - 1);
        while at > 0 && top[at - 1].0 < k {
            top[at] = top[at - 1];
            at -= 1;
        }
        top[at] = (k, position);
        if self.len < n {
            self.len += 1;
        }
        if self.len == n {
            self.floor = top[n - 1].0;
        }
    }
}

/// How many real positions (those below `real`) are among the first `n` of the
/// stable descending order of `logits` (§6.2). They are always the first ones of the
/// real positions' own order, so two prefixes of the same logits hold the same real
/// candidates exactly when the counts are equal: padding after `real` can only push real
/// positions out of the top `n`, never change their order.
pub fn real_in_top(logits: &[f32], real: usize, n: usize) -> usize {
    let mut top = Vec::with_capacity(n);
    best_indexes(logits, n, &mut top);
    top.iter().filter(|&&i| i < real).count()
}
