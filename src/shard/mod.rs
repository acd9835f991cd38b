//! `--shard I/N`: the I-th (1-based) of N deterministic slices of a dataset's questions.
//!
//! Rule: the questions, in file order (after `--limit`), are cut into N contiguous
//! slices whose sizes differ by at most one: slice I holds the questions with index
//! `floor((I-1)·Q/N) ≤ i < floor(I·Q/N)` of Q. Contiguous slices keep a paragraph's
//! questions together (most of them land in one shard), and the rule depends only on Q
//! and N, so `bertqa merge` can check which shard holds which question.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use crate::types::Dataset;

mod merge;

pub use merge::merge;

/// One slice of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    /// Which slice this is, 1-based (`1 ≤ index ≤ count`).
    pub index: usize,
    /// How many slices the questions are cut into (at least 1).
    pub count: usize,
}

impl Shard {
    /// The question indexes of this shard among `questions`.
    pub fn range(&self, questions: usize) -> Range<usize> {
        let at = |i: usize| (i as u128 * questions as u128 / self.count as u128) as usize;
        at(self.index - 1)..at(self.index)
    }

    /// Keeps only this shard's questions (renumbered from 0; paragraphs are kept).
    pub fn apply(&self, dataset: &mut Dataset) {
        let range = self.range(dataset.examples.len());
        dataset.examples.truncate(range.end);
        dataset.examples.drain(..range.start);
        for (i, e) in dataset.examples.iter_mut().enumerate() {
            e.example_index = i;
        }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a shard I/N with 1 <= I <= N (e.g. 2/3)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_partition_in_order_and_are_balanced() {
        for q in [0usize, 1, 2, 7, 8, 100, 1001] {
            for n in 1..=7 {
                let mut next = 0;
                for i in 1..=n {
                    let r = Shard { index: i, count: n }.range(q);
                    assert_eq!(r.start, next, "q={q} n={n} i={i}");
                    assert!(r.len() == q / n || r.len() == q / n + 1, "q={q} n={n}");
                    next = r.end;
                }
                assert_eq!(next, q);
            }
        }
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }
}
