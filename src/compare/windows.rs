//! Logit differences between two runs, window by window.
//!
//! Token models share the features built once; a text model's windows are the server's
//! (`pipeline::text`), so windows are matched by what they hold, not by id: the same
//! question, the same question length, the same doc pieces on the same words. A window
//! only one run made (another doc stride, another tokenizer) is not compared; the
//! report says how many were.

use std::collections::HashMap;
use std::sync::Arc;

use crate::types::{Feature, Logits};

/// How far one side of the logits (start or end) of two runs is apart, over the
/// positions of the windows both made whose attention mask is 1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogitDiff {
    /// The largest absolute difference (infinite where one is NaN).
    pub linf: f64,
    /// The mean absolute difference.
    pub mean_abs: f64,
}

/// One run's windows and their logits (by ascending unique id).
pub(crate) struct Windows<'a> {
    pub(crate) features: &'a [Arc<Feature>],
    pub(crate) logits: &'a [Logits],
}

/// A window's contents: question, question length, doc pieces' words and ids.
type Key<'a> = (usize, usize, &'a [u32], &'a [u32]);

fn key(f: &Feature) -> Key<'_> {
    let doc =
        &f.input_ids[(f.query_len + 2).min(f.input_ids.len())..f.input_ids.len().saturating_sub(1)];
    (f.example_index, f.query_len, &f.token_to_orig, doc)
}

fn logits_of<'a>(logits: &'a [Logits], f: &Feature) -> Option<&'a Logits> {
    logits
        .binary_search_by_key(&f.unique_id, |l| l.unique_id)
        .ok()
        .map(|i| &logits[i])
}

/// The windows both runs made with their logits: (feature, logits of `a`, logits of `b`).
pub(crate) fn matched<'a>(
    a: &Windows<'a>,
    b: &Windows<'a>,
) -> Vec<(&'a Feature, &'a Logits, &'a Logits)> {
    let by_key: HashMap<Key<'a>, &'a Feature> =
        b.features.iter().map(|f| (key(f), f.as_ref())).collect();
    a.features
        .iter()
        .filter_map(|f| {
            let g = by_key.get(&key(f))?;
            Some((f.as_ref(), logits_of(a.logits, f)?, logits_of(b.logits, g)?))
        })
        .collect()
}

/// L_inf and mean |Δ| of start and end logits over the mask-1 positions of `pairs`.
pub(crate) fn logit_diffs(pairs: &[(&Feature, &Logits, &Logits)]) -> (LogitDiff, LogitDiff) {
    let (mut s, mut e) = (LogitDiff::default(), LogitDiff::default());
    let mut n = 0usize;
    for (f, a, b) in pairs {
        for p in 0..f.len() {
            let ds = (f64::from(a.start[p]) - f64::from(b.start[p])).abs();
            let de = (f64::from(a.end[p]) - f64::from(b.end[p])).abs();
            // NaN differences count as infinite.
            s.linf = if ds.is_nan() {
                f64::INFINITY
            } else {
                s.linf.max(ds)
            };
            e.linf = if de.is_nan() {
                f64::INFINITY
            } else {
                e.linf.max(de)
            };
            s.mean_abs += ds;
            e.mean_abs += de;
            n += 1;
        }
    }
    if n > 0 {
        s.mean_abs /= n as f64;
        e.mean_abs /= n as f64;
    }
    (s, e)
}

/// KL(a ‖ b) of the start and end distributions (softmax over the mask-1 positions) of
/// `pairs`, summarized over the windows (`None`: no windows).
pub(crate) fn divergences(
    pairs: &[(&Feature, &Logits, &Logits)],
) -> (Option<super::Divergence>, Option<super::Divergence>) {
    let kls = |side: fn(&Logits) -> &[f32]| {
        pairs
            .iter()
            .map(|(f, a, b)| {
                let n = f.len().min(side(a).len()).min(side(b).len());
                super::stats::kl_of_softmax(&side(a)[..n], &side(b)[..n])
            })
            .collect()
    };
    (
        super::stats::summarize(kls(|l| &l.start)),
        super::stats::summarize(kls(|l| &l.end)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feature(id: u64, len: usize, doc_id: u32) -> Arc<Feature> {
        Arc::new(Feature {
            unique_id: id,
            example_index: 0,
            doc_span_index: 0,
            input_ids: [vec![1, 2, 3], vec![doc_id; len - 3]].concat(),
            query_len: 1,
            token_to_orig: vec![0; len - 3],
            token_is_max_context: vec![true; len - 3],
            template: None,
        })
    }

    fn l(id: u64, s: Vec<f32>, e: Vec<f32>) -> Logits {
        Logits {
            unique_id: id,
            start: s,
            end: e,
        }
    }

    #[test]
    fn logit_differences_ignore_padding() {
        let fs = vec![feature(1, 4, 7), feature(2, 5, 8)];
        let a = vec![
            l(1, vec![0.0, 1.0, 2.0, 3.0, 99.0], vec![0.0; 5]),
            l(2, vec![1.0; 5], vec![2.0; 5]),
        ];
        let b = vec![
            l(1, vec![0.0, 1.5, 2.0, 3.0, -99.0], vec![0.0; 5]),
            l(2, vec![1.0; 5], vec![1.0; 5]),
        ];
        let w = |logits| Windows {
            features: &fs,
            logits,
        };
        let pairs = matched(&w(&a), &w(&b));
        assert_eq!(pairs.len(), 2);
        let (s, e) = logit_diffs(&pairs);
        assert_eq!(s.linf, 0.5); // position 4 of feature 1 is padding
        assert_eq!(s.mean_abs, 0.5 / 9.0);
        assert_eq!(e.linf, 1.0);
        assert_eq!(e.mean_abs, 5.0 / 9.0);
    }

    #[test]
    fn windows_are_matched_by_what_they_hold_not_by_id() {
        // The other run numbers its windows its own way and made one more.
        let fa = vec![feature(1, 5, 7), feature(2, 5, 8)];
        let fb = vec![feature(10, 5, 8), feature(11, 5, 9), feature(12, 5, 7)];
        let la = vec![
            l(1, vec![1.0; 5], vec![0.0; 5]),
            l(2, vec![2.0; 5], vec![0.0; 5]),
        ];
        let lb = vec![
            l(10, vec![2.5; 5], vec![0.0; 5]),
            l(11, vec![9.0; 5], vec![0.0; 5]),
            l(12, vec![1.0; 5], vec![0.0; 5]),
        ];
        let a = Windows {
            features: &fa,
            logits: &la,
        };
        let b = Windows {
            features: &fb,
            logits: &lb,
        };
        let pairs = matched(&a, &b);
        let ids: Vec<(u64, u64)> = pairs
            .iter()
            .map(|(_, x, y)| (x.unique_id, y.unique_id))
            .collect();
        assert_eq!(ids, [(1, 12), (2, 10)]);
        assert_eq!(logit_diffs(&pairs).0.linf, 0.5);
    }
}
