//! run_qa's post-processing (`postprocess_qa_predictions`; docs/algorithm.md, "run_qa's
//! rules"): spans from the context tokens' character offsets, in float32 as the
//! Trainer's logits are.
//!
//! Per question, windows in order:
//! - the null score is `start[0] + end[0]` of each window; the question keeps the
//!   smallest (the first window wins a tie) with that window's two logits;
//! - every pair of the window's `n_best_size` best starts and ends (over every position,
//!   padding included, ranked as [`super::best_indexes`] ranks them) whose positions are
//!   both context tokens, `end >= start` and `end - start + 1 <= max_answer_length`
//!   is a candidate: its text the context's characters from the start token's first
//!   offset to the end token's last, its score `start + end`; no maximum-context rule;
//! - SQuAD 2.0: the null candidate (text `""`) comes last; all candidates sorted by
//!   score, descending and stably, and cut to `n_best_size`; the null candidate is
//!   appended when no entry spans characters (0, 0);
//! - an empty list, or one holding only `""`, gets the placeholder `"empty"` (logits and
//!   score Python's 0.0) in front;
//! - probabilities are a max-shifted softmax computed as numpy computes it: in float32
//!   (numpy's pairwise sum) unless the placeholder's float64 0.0 is among the scores,
//!   then in float64; `exp` is the C library's, so the last bits may differ from
//!   numpy's vectorised `exp` (a few float32 ulp);
//! - SQuAD 2.0: `score_diff = null - best.start - best.end` in float32 with the first
//!   entry whose text is not `""`; the answer is `""` above the threshold.

use super::{
    check_logits, window_candidates, DecodeConfig, ExampleDecoder, NbestEntry, NbestKeys,
    Prediction, Span, Window,
};
use crate::error::{Error, Result};
use crate::types::{Paragraph, TokenText};

/// run_qa's rules read no tokenizer: the windows carry character offsets.
impl ExampleDecoder for RunQaCache {
    fn decode_example(
        &mut self,
        config: &DecodeConfig,
        paragraph_index: usize,
        paragraph: &Paragraph,
        qas_id: &str,
        windows: &[Window<'_>],
        _tok: Option<&dyn TokenText>,
    ) -> Result<Prediction> {
        let context = &paragraph.context;
        decode_example(
            self,
            config,
            Some(paragraph_index),
            context,
            qas_id,
            windows,
        )
    }
}

/// A candidate before sorting.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    window: usize,
    start: usize,
    end: usize,
    /// Character offsets of the span (`(0, 0)` for the null candidate).
    chars: (u32, u32),
    score: f32,
    start_logit: f32,
    end_logit: f32,
    /// Its place in the order candidates are made in (ties keep it).
    seq: usize,
}

/// Character positions of a context, for slicing it by code points.
#[derive(Debug, Default)]
pub(crate) struct CharIndex {
    /// The byte offset of each character, and the context's length last.
    bytes: Vec<u32>,
}

impl CharIndex {
    fn of(context: &str) -> CharIndex {
        let mut bytes: Vec<u32> = context.char_indices().map(|(b, _)| b as u32).collect();
        bytes.push(context.len() as u32);
        CharIndex { bytes }
    }

    /// `context[start..end]` in characters, as Python slices (clamped, empty when
    /// `end <= start`).
    fn slice<'c>(&self, context: &'c str, start: u32, end: u32) -> &'c str {
        let n = self.bytes.len() - 1;
        let (s, e) = ((start as usize).min(n), (end as usize).min(n));
        if e <= s {
            return "";
        }
        &context[self.bytes[s] as usize..self.bytes[e] as usize]
    }
}

/// What run_qa's decoding keeps between questions: the last paragraph's character index
/// and the buffers.
#[derive(Debug, Default)]
pub struct RunQaCache {
    paragraph: Option<usize>,
    chars: CharIndex,
    starts: Vec<(usize, f32)>,
    ends: Vec<(usize, f32)>,
    ranked: Vec<usize>,
    candidates: Vec<Candidate>,
}

/// Decodes one question of paragraph `paragraph` (whose context is `context`) from its
/// windows in creation order, by run_qa's rules. Errors: a window without run_qa's
/// offsets, or whose logits are shorter than it or belong to another feature.
pub fn decode_example(
    cache: &mut RunQaCache,
    config: &DecodeConfig,
    paragraph: Option<usize>,
    context: &str,
    qas_id: &str,
    windows: &[Window<'_>],
) -> Result<Prediction> {
    if paragraph.is_none() || paragraph != cache.paragraph {
        cache.chars = CharIndex::of(context);
    }
    cache.paragraph = paragraph;
    for w in windows {
        check_window(w, qas_id, config.n_best_size)?;
    }
    let k = config.n_best_size;
    let RunQaCache {
        chars,
        starts,
        ends,
        ranked,
        candidates,
        ..
    } = cache;
    candidates.clear();
    let mut null: Option<Candidate> = None;
    for (wi, w) in windows.iter().enumerate() {
        let f = w.feature;
        let t = f.template.as_deref().expect("checked");
        let (s0, e0) = window_candidates(k, w, starts, ends, ranked);
        let null_score = s0 + e0;
        if null.is_none_or(|n| n.score > null_score) {
            null = Some(Candidate {
                window: wi,
                start: 0,
                end: 0,
                chars: (0, 0),
                score: null_score,
                start_logit: s0,
                end_logit: e0,
                seq: 0,
            });
        }
        let context_token = |i: usize| {
            i.checked_sub(t.doc_offset)
                .and_then(|j| t.offsets.get(j))
                .copied()
        };
        for &(s, start_logit) in starts.iter() {
            let Some(first) = context_token(s) else {
                continue;
            };
            for &(e, end_logit) in ends.iter() {
                if e < s || e - s + 1 > config.max_answer_length {
                    continue;
                }
                let Some(last) = context_token(e) else {
                    continue;
                };
                candidates.push(Candidate {
                    window: wi,
                    start: s,
                    end: e,
                    chars: (first.0, last.1),
                    score: start_logit + end_logit,
                    start_logit,
                    end_logit,
                    seq: 0,
                });
            }
        }
    }
    let v2 = config.version_2_with_negative;
    if let (true, Some(n)) = (v2, null) {
        candidates.push(n);
    }
    keep_best(candidates, k);
    if let (true, Some(n)) = (v2, null) {
        if !candidates.iter().any(|c| c.chars == (0, 0)) {
            candidates.push(n);
        }
    }
    let span_of = |c: &Candidate| Span {
        unique_id: windows[c.window].feature.unique_id,
        start: c.start,
        end: c.end,
    };
    let mut nbest: Vec<NbestEntry> = candidates
        .iter()
        .map(|c| NbestEntry {
            text: chars.slice(context, c.chars.0, c.chars.1).to_string(),
            probability: 0.0,
            start_logit: f64::from(c.start_logit),
            end_logit: f64::from(c.end_logit),
            span: Some(span_of(c)),
            keys: NbestKeys::RunQa,
        })
        .collect();
    let placeholder = nbest.is_empty() || (nbest.len() == 1 && nbest[0].text.is_empty());
    if placeholder {
        nbest.insert(
            0,
            NbestEntry {
                text: "empty".to_string(),
                probability: 0.0,
                start_logit: 0.0,
                end_logit: 0.0,
                span: None,
                keys: NbestKeys::RunQaPlaceholder,
            },
        );
    }
    let probabilities = probabilities(candidates, placeholder);
    for (e, p) in nbest.iter_mut().zip(probabilities) {
        e.probability = p;
    }
    let (answer, null_odds) = if v2 {
        let null_score = null.map_or(0.0, |n| n.score);
        let best = nbest.iter().find(|e| !e.text.is_empty());
        let (s, e) = best.map_or((0.0, 0.0), |b| (b.start_logit as f32, b.end_logit as f32));
        let diff = null_score - s - e;
        let answer = match best {
            Some(b) if f64::from(diff) <= config.null_score_diff_threshold => b.text.clone(),
            _ => String::new(),
        };
        (answer, Some(f64::from(diff)))
    } else {
        (nbest[0].text.clone(), None)
    };
    Ok(Prediction {
        qas_id: qas_id.to_string(),
        answer,
        nbest,
        null_odds,
    })
}

/// Keeps the first `k` of a stable descending sort by score (NaN scores last), in that
/// order: the order made in breaks ties, so selecting the `k` best and sorting only them
/// gives the same list as sorting every candidate.
fn keep_best(candidates: &mut Vec<Candidate>, k: usize) {
    for (i, c) in candidates.iter_mut().enumerate() {
        c.seq = i;
    }
    let order = |a: &Candidate, b: &Candidate| {
        match (a.score.is_nan(), b.score.is_nan()) {
            (false, false) => b.score.partial_cmp(&a.score).expect("not NaN"),
            (x, y) => x.cmp(&y),
        }
        .then(a.seq.cmp(&b.seq))
    };
    if k == 0 {
        candidates.clear();
    } else if candidates.len() > k {
        candidates.select_nth_unstable_by(k - 1, order);
        candidates.truncate(k);
    }
    candidates.sort_unstable_by(order);
}

/// The n-best list's probabilities: in float32 over the candidates' scores, or in
/// float64 with the placeholder's Python 0.0 first (it makes numpy's array float64).
fn probabilities(candidates: &[Candidate], placeholder: bool) -> Vec<f64> {
    if placeholder {
        let scores: Vec<f64> = std::iter::once(0.0)
            .chain(candidates.iter().map(|c| f64::from(c.score)))
            .collect();
        softmax(&scores)
    } else {
        let scores: Vec<f32> = candidates.iter().map(|c| c.score).collect();
        softmax(&scores).into_iter().map(f64::from).collect()
    }
}

fn check_window(w: &Window<'_>, qas_id: &str, k: usize) -> Result<()> {
    check_logits(w, qas_id, k)?;
    let f = w.feature;
    let err = |message: String| Error::Decode {
        unique_id: f.unique_id,
        message: format!("{message} (question {qas_id:?})"),
    };
    let Some(t) = f.template.as_deref() else {
        return Err(err(
            "a window of run_squad's rules decoded by run_qa's (no offsets)".to_string(),
        ));
    };
    if t.doc_offset + t.offsets.len() > f.len() {
        return Err(err("inconsistent feature maps".to_string()));
    }
    Ok(())
}

/// numpy's pairwise sum of a contiguous float array (its `add.reduce`): plain below 8
/// values, eight interleaved partial sums up to 128, halves (at a multiple of 8) above.
fn pairwise_sum<T: Copy + std::ops::Add<Output = T> + Default>(a: &[T]) -> T {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(T::default(), |s, &x| s + x);
    }
    if n <= 128 {
        let mut r = [T::default(); 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for j in 0..8 {
                r[j] = r[j] + a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            res = res + x;
        }
        return res;
    }
    let mut half = n / 2;
    half -= half % 8;
    pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
}

/// The float types numpy's softmax runs in here.
trait Float:
    Copy
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Div<Output = Self>
{
    const NEG_INFINITY: Self;
    fn exp(self) -> Self;
    fn is_nan(self) -> bool;
}

impl Float for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Float for f64 {
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// `exp(s - max(s)) / sum` in the scores' type, as numpy computes it on an array of
/// that type (a NaN maximum propagates, as `np.max`'s does).
fn softmax<T: Float>(scores: &[T]) -> Vec<T> {
    let max = scores.iter().copied().fold(
        T::NEG_INFINITY,
        |m, s| {
            if s > m || s.is_nan() {
                s
            } else {
                m
            }
        },
    );
    let exps: Vec<T> = scores.iter().map(|&s| (s - max).exp()).collect();
    let total = pairwise_sum(&exps);
    exps.iter().map(|&e| e / total).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_sum_groups_as_numpy_does() {
        // Below 8: left to right from 0.
        let a = [1e8f32, 1.0, -1e8, 1.0];
        assert_eq!(pairwise_sum(&a), ((1e8f32 + 1.0) - 1e8) + 1.0);
        // 9 values: eight partial sums, then the ninth.
        let a: Vec<f32> = (0..9).map(|i| 0.1 * i as f32).collect();
        let r = &a;
        let want = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7])) + r[8];
        assert_eq!(pairwise_sum(&a), want);
    }

    #[test]
    fn python_slices_of_a_context_by_characters() {
        let context = "héllo wörld";
        let index = CharIndex::of(context);
        assert_eq!(index.slice(context, 6, 11), "wörld");
        assert_eq!(index.slice(context, 1, 4), "éll");
        assert_eq!(index.slice(context, 4, 2), "");
        assert_eq!(index.slice(context, 6, 99), "wörld");
    }
}
