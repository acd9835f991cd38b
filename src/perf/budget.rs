//! A latency budget: which levels a sweep measures, whether each kept the budget, and
//! its goodput.
//!
//! Contract:
//! - A level is *within budget* when its client latency at `percentile` is at most
//!   `threshold_us`. Each level is measured under the stability rule as any other.
//! - Without a budget every level of the range is measured, in order. With one, a plain
//!   sweep stops after the first level over budget; a binary search measures the
//!   range's first value, then its last, then halves the values between the largest
//!   known within budget and the smallest known over it, assuming latency grows with
//!   load. It measures at most 2 + ⌈log2(n − 1)⌉ of the range's n values. Started at a
//!   value (tune's: where a similar configuration's best was), it measures that first,
//!   then steps away from it, up while within budget and down while over, by 1, then
//!   each step twice the last, until the answer is bracketed; then halves as before.
//! - The best level is the largest load within budget (the question a capacity plan
//!   asks); `None` when no level kept the budget.
//! - Goodput: the share of a level's requests whose latency met the threshold, and
//!   their rate per second.

/// A latency budget: the client latency allowed at a percentile, and how the levels
/// are searched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Client latency allowed at `percentile`, microseconds.
    pub threshold_us: f64,
    /// In (0, 100].
    pub percentile: f64,
    /// Search the range by halving (see the module's contract) instead of measuring
    /// its levels in order up to the first over budget.
    pub binary_search: bool,
}

/// How one level did against the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelBudget {
    /// Client latency at the budget's percentile, microseconds.
    pub latency_us: f64,
    /// `latency_us` is at most the threshold, and the level answered at least one
    /// request.
    pub within: bool,
    /// Requests answered within the threshold.
    pub good: u64,
    /// `good` over all requests of the level (0 when it had none).
    pub goodput_share: f64,
    /// `good` per second of the reported windows.
    pub goodput_per_s: f64,
}

impl Budget {
    /// Judges a level from its latencies (microseconds) over `window_s` seconds and
    /// its latency at the budget's percentile.
    pub(crate) fn judge(
        &self,
        latencies_us: impl Iterator<Item = f64>,
        window_s: f64,
        latency_us: f64,
    ) -> LevelBudget {
        let (mut all, mut good) = (0u64, 0u64);
        for l in latencies_us {
            all += 1;
            if l <= self.threshold_us {
                good += 1;
            }
        }
        LevelBudget {
            latency_us,
            within: all > 0 && latency_us <= self.threshold_us,
            good,
            goodput_share: if all == 0 {
                0.0
            } else {
                good as f64 / all as f64
            },
            goodput_per_s: if window_s > 0.0 {
                good as f64 / window_s
            } else {
                0.0
            },
        }
    }
}

/// Chooses the next level to measure: indexes into the range's values, ascending.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    n: usize,
    mode: Mode,
    /// Largest index known within budget, smallest known over it.
    within: Option<usize>,
    over: Option<usize>,
    /// The next index of a plain sweep.
    next: usize,
    /// A binary search started at an index: (that index, the current step away from it).
    gallop: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Every level (no budget).
    All,
    /// In order, up to the first level over budget.
    UntilOver,
    Binary,
}

impl Plan {
    pub(crate) fn new(n: usize, budget: Option<&Budget>) -> Plan {
        let mode = match budget {
            None => Mode::All,
            Some(b) if b.binary_search => Mode::Binary,
            Some(_) => Mode::UntilOver,
        };
        Plan {
            n,
            mode,
            within: None,
            over: None,
            next: 0,
            gallop: None,
        }
    }

    /// A binary search that measures index `start` first (see the module's contract);
    /// other plans are unchanged.
    pub(crate) fn starting_at(mut self, start: usize) -> Plan {
        if self.mode == Mode::Binary && self.n > 0 {
            let start = start.min(self.n - 1);
            self.gallop = Some((start, 1));
        }
        self
    }

    /// Most levels the plan can measure.
    pub(crate) fn most_levels(&self) -> usize {
        match self.mode {
            Mode::Binary if self.gallop.is_some() => 1 + 2 * (self.n as f64).log2().ceil() as usize,
            Mode::Binary if self.n > 2 => 2 + ((self.n - 1) as f64).log2().ceil() as usize,
            _ => self.n,
        }
    }

    /// The index to measure next, or `None` when the plan is done.
    pub(crate) fn next(&self) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        match self.mode {
            Mode::All => (self.next < self.n).then_some(self.next),
            Mode::UntilOver => (self.over.is_none() && self.next < self.n).then_some(self.next),
            Mode::Binary => match (self.within, self.over, self.gallop) {
                (None, None, Some((start, _))) => Some(start),
                (Some(w), None, Some((_, step))) => {
                    (w + 1 < self.n).then(|| (w + step).min(self.n - 1))
                }
                (None, Some(o), Some((_, step))) => (o > 0).then(|| o.saturating_sub(step)),
                (w, o, _) => self.halve(w, o),
            },
        }
    }

    /// The plain binary search's next index.
    fn halve(&self, within: Option<usize>, over: Option<usize>) -> Option<usize> {
        match (within, over) {
            (None, None) => Some(0),
            // The smallest load is over budget: nothing fits.
            (None, Some(_)) => None,
            (Some(w), None) => (w + 1 < self.n).then_some(self.n - 1),
            (Some(w), Some(o)) => (o - w > 1).then_some(w + (o - w) / 2),
        }
    }

    /// Records how level `index` did (`within`: kept the budget; ignored without one).
    pub(crate) fn record(&mut self, index: usize, within: bool) {
        self.next = index + 1;
        if self.mode == Mode::All {
            return;
        }
        if within {
            self.within = Some(self.within.map_or(index, |w| w.max(index)));
        } else {
            self.over = Some(self.over.map_or(index, |o| o.min(index)));
        }
        if let Some((start, step)) = &mut self.gallop {
            if index != *start {
                *step *= 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(binary_search: bool) -> Budget {
        Budget {
            threshold_us: 110_000.0,
            percentile: 99.0,
            binary_search,
        }
    }

    /// Runs a plan over `n` levels where levels up to `fits` (inclusive) keep the
    /// budget; returns the indexes measured.
    fn run(n: usize, fits: Option<usize>, b: Option<Budget>) -> Vec<usize> {
        run_plan(Plan::new(n, b.as_ref()), fits)
    }

    /// Runs `plan` where levels up to `fits` keep the budget; the indexes measured.
    fn run_plan(mut plan: Plan, fits: Option<usize>) -> Vec<usize> {
        let mut measured = Vec::new();
        while let Some(i) = plan.next() {
            assert!(!measured.contains(&i), "{i} measured twice: {measured:?}");
            measured.push(i);
            plan.record(i, fits.is_some_and(|f| i <= f));
        }
        measured
    }

    #[test]
    fn without_a_budget_every_level_is_measured() {
        assert_eq!(run(4, None, None), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_plain_sweep_stops_after_the_first_level_over_budget() {
        assert_eq!(run(6, Some(2), Some(budget(false))), vec![0, 1, 2, 3]);
        assert_eq!(run(3, Some(5), Some(budget(false))), vec![0, 1, 2]);
        assert_eq!(run(3, None, Some(budget(false))), vec![0]);
    }

    #[test]
    fn a_binary_search_finds_the_largest_level_within_budget_in_few_levels() {
        for n in 1..=40 {
            let most = Plan::new(n, Some(&budget(true))).most_levels();
            for fits in std::iter::once(None).chain((0..n).map(Some)) {
                let measured = run(n, fits, Some(budget(true)));
                assert!(
                    measured.len() <= most,
                    "n {n}, fits {fits:?}: {measured:?} > {most}"
                );
                // The answer is known from what was measured: the largest index within
                // budget was measured, and so was the next one (unless it is the end).
                match fits {
                    None => assert_eq!(measured, vec![0]),
                    Some(f) => {
                        assert!(measured.contains(&f), "n {n}, fits {f}: {measured:?}");
                        assert!(f + 1 == n || measured.contains(&(f + 1)));
                    }
                }
            }
        }
        // 1:16 step 1 → 16 values, at most ⌈log2(16)⌉ + 2.
        assert_eq!(Plan::new(16, Some(&budget(true))).most_levels(), 6);
    }

    /// Runs a plan started at `start`.
    fn run_from(n: usize, fits: Option<usize>, start: usize) -> Vec<usize> {
        run_plan(Plan::new(n, Some(&budget(true))).starting_at(start), fits)
    }

    #[test]
    fn a_search_started_near_the_answer_finds_it_in_few_levels() {
        for n in 1..=64 {
            let most = Plan::new(n, Some(&budget(true)))
                .starting_at(0)
                .most_levels();
            for start in 0..n {
                for fits in std::iter::once(None).chain((0..n).map(Some)) {
                    let measured = run_from(n, fits, start);
                    assert!(
                        measured.len() <= most,
                        "n {n} start {start} fits {fits:?}: {measured:?}"
                    );
                    assert_eq!(measured[0], start);
                    match fits {
                        None => assert!(measured.contains(&0)),
                        Some(f) => {
                            assert!(measured.contains(&f), "n {n}, fits {f}: {measured:?}");
                            assert!(f + 1 == n || measured.contains(&(f + 1)));
                        }
                    }
                }
            }
        }
        // Concurrency 1:64, a neighbour's best at 23 and this candidate's at 23 or 24:
        // two to four levels, where the plain search measures eight.
        assert_eq!(run_from(64, Some(22), 22), vec![22, 23]);
        assert_eq!(run_from(64, Some(23), 22), vec![22, 23, 25, 24]);
        assert_eq!(run(64, Some(22), Some(budget(true))).len(), 8);
        // A neighbour that kept the budget at the top of the range: one level.
        assert_eq!(run_from(64, Some(63), 63), vec![63]);
    }

    #[test]
    fn goodput_counts_the_requests_within_the_threshold() {
        let b = budget(false);
        let j = b.judge(
            [100_000.0, 110_000.0, 120_000.0, 50.0].into_iter(),
            2.0,
            120_000.0,
        );
        assert_eq!(j.good, 3);
        assert_eq!(j.goodput_share, 0.75);
        assert_eq!(j.goodput_per_s, 1.5);
        assert!(!j.within);
        let j = b.judge(std::iter::empty(), 2.0, 0.0);
        assert!(!j.within, "a level without answers did not keep the budget");
        assert_eq!(j.goodput_share, 0.0);
    }
}
