//! One question's n-best list from its windows' candidates (§6.3–§6.10): the pairs,
//! their order, the texts with de-duplication, the probabilities and the answer.

use super::rules::RawEntry;
use super::span_text::{span_text, SpanScratch, WordCache};
use super::{
    best_indexes, rules, DecodeCache, DecodeConfig, NbestEntry, NbestKeys, Prediction,
    QuestionScratch, Span, Window,
};
use crate::types::{TokenText, Words};

/// A candidate span (§6.3), or the null candidate when `start == 0` (§6.4).
#[derive(Debug, Clone, Copy)]
pub(super) struct Prelim {
    window: usize,
    start: usize,
    end: usize,
    start_logit: f64,
    end_logit: f64,
}

/// Initial `score_null` of G, N-old and H (§0.2, §6.4).
const SCORE_NULL_INIT: f64 = 1_000_000.0;

/// Strict "greater than" on logits in an order where NaN sits below every number (and
/// equals itself), so sorting never panics and ties keep their order.
fn gt(a: f64, b: f64) -> bool {
    if a.is_nan() {
        false
    } else {
        b.is_nan() || a > b
    }
}

/// §6.8: max-shifted softmax, max taken as "first, then strictly greater", sum in order.
#[cfg(test)]
pub(super) fn softmax(scores: &[f64]) -> Vec<f64> {
    let mut probs = Vec::new();
    softmax_into(scores, &mut probs);
    probs
}

/// [`softmax`] into `probs` (cleared first).
fn softmax_into(scores: &[f64], probs: &mut Vec<f64>) {
    probs.clear();
    let Some(&first) = scores.first() else {
        return;
    };
    let mut max = first;
    for &s in &scores[1..] {
        if s > max {
            max = s;
        }
    }
    probs.extend(scores.iter().map(|&s| (s - max).exp()));
    let mut total = 0.0;
    for &e in probs.iter() {
        total += e;
    }
    for p in probs.iter_mut() {
        *p /= total;
    }
}

/// The null candidate of §6.4: the window with the lowest `start[0] + end[0]`.
#[derive(Debug, Clone, Copy)]
struct Null {
    score: f64,
    window: usize,
    start: f64,
    end: f64,
}

impl DecodeCache {
    pub(super) fn decode_checked(
        &mut self,
        config: &DecodeConfig,
        paragraph: Option<usize>,
        doc_tokens: &Words,
        qas_id: &str,
        windows: &[Window<'_>],
        tok: &dyn TokenText,
    ) -> Prediction {
        self.start(paragraph);
        let DecodeCache {
            words,
            prelims,
            scratch,
            ..
        } = self;
        let null = gather_prelims(config, windows, prelims, scratch);
        if config.version_2_with_negative {
            prelims.push(Prelim {
                window: null.window,
                start: 0,
                end: 0,
                start_logit: null.start,
                end_logit: null.end,
            });
        }
        sort_prelims(prelims);
        let nbest = &mut scratch.nbest;
        fill_nbest(config, doc_tokens, words, prelims, windows, tok, nbest);
        let seen_null = nbest.iter().any(|e| e.0.is_empty());
        let null_span = windows.get(null.window).map(|w| Span {
            unique_id: w.feature.unique_id,
            start: 0,
            end: 0,
        });
        rules::complete_nbest(config, nbest, seen_null, (null.start, null.end, null_span));
        let nbest = with_probabilities(scratch);
        let (answer, null_odds) = final_answer(config, &nbest, null.score);
        Prediction {
            qas_id: qas_id.to_string(),
            answer,
            nbest,
            null_odds,
        }
    }
}

/// §6.3 and §6.4: every window's candidate spans into `prelims`, in the reference's
/// order, and the null candidate (its score stays at [`SCORE_NULL_INIT`] in v1).
fn gather_prelims(
    config: &DecodeConfig,
    windows: &[Window<'_>],
    prelims: &mut Vec<Prelim>,
    scratch: &mut QuestionScratch,
) -> Null {
    let mut null = Null {
        score: SCORE_NULL_INIT,
        window: 0,
        start: 0.0,
        end: 0.0,
    };
    // (position, logit) of the candidates; `ranked` is the ranking's scratch.
    let QuestionScratch {
        starts,
        ends,
        ranked,
        ..
    } = scratch;
    for (wi, w) in windows.iter().enumerate() {
        let f = w.feature;
        let first = window_candidates(config.n_best_size, w, starts, ends, ranked);
        if config.version_2_with_negative {
            // §6.4: strict `<`, so equal null scores keep the earlier window.
            let s0 = f64::from(first.0);
            let e0 = f64::from(first.1);
            let z = s0 + e0;
            if z < null.score {
                null = Null {
                    score: z,
                    window: wi,
                    start: s0,
                    end: e0,
                };
            }
        }
        // §6.3, in the reference's loop order: start rank, then end rank. The filters
        // on one position alone are applied once per position, before the pairs.
        starts.retain(|&(s, _)| s < f.len() && f.orig_word(s).is_some() && f.is_max_context(s));
        ends.retain(|&(e, _)| e < f.len() && f.orig_word(e).is_some());
        for &(s, start_logit) in starts.iter() {
            for &(e, end_logit) in ends.iter() {
                if e < s || e - s + 1 > config.max_answer_length {
                    continue;
                }
                prelims.push(Prelim {
                    window: wi,
                    start: s,
                    end: e,
                    start_logit: f64::from(start_logit),
                    end_logit: f64::from(end_logit),
                });
            }
        }
    }
    null
}

/// A window's first `k` start and end candidates (position, logit) into `starts` and
/// `ends` (§6.2), from its candidates when ranked for `k`, ranked from its logits
/// otherwise; returns position 0's start and end logits.
pub(super) fn window_candidates(
    k: usize,
    w: &Window<'_>,
    starts: &mut Vec<(usize, f32)>,
    ends: &mut Vec<(usize, f32)>,
    ranked: &mut Vec<usize>,
) -> (f32, f32) {
    starts.clear();
    ends.clear();
    match (w.ranked(k), w.logits) {
        (Some(c), _) => {
            starts.extend(c.start_scores());
            ends.extend(c.end_scores());
            c.first()
        }
        (None, Some(l)) => {
            for (logits, out) in [(&l.start, &mut *starts), (&l.end, &mut *ends)] {
                best_indexes(logits, k, ranked);
                out.extend(ranked.iter().map(|&i| (i, logits[i])));
            }
            (l.start[0], l.end[0])
        }
        (None, None) => unreachable!("check_window refuses a window with neither"),
    }
}

/// §6.5: stable, descending by start + end.
fn sort_prelims(prelims: &mut [Prelim]) {
    prelims.sort_by(|a, b| {
        let (x, y) = (a.start_logit + a.end_logit, b.start_logit + b.end_logit);
        if gt(y, x) {
            std::cmp::Ordering::Greater
        } else if gt(x, y) {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Equal
        }
    });
}

/// §6.6: the n-best list from the sorted `prelims`, de-duplicated by final text across
/// all windows. The texts seen are exactly those of the entries kept so far (the null
/// entry's is ""), at most n_best_size + 1 of them: a linear scan beats hashing.
fn fill_nbest(
    config: &DecodeConfig,
    doc_tokens: &Words,
    words: &mut WordCache,
    prelims: &[Prelim],
    windows: &[Window<'_>],
    tok: &dyn TokenText,
    nbest: &mut Vec<RawEntry>,
) {
    let mut spans = SpanScratch::default();
    nbest.clear();
    for p in prelims {
        if nbest.len() >= config.n_best_size {
            break;
        }
        let text = if p.start > 0 {
            let f = windows[p.window].feature;
            let text = span_text(
                config, doc_tokens, words, &mut spans, f, p.start, p.end, tok,
            );
            if nbest.iter().any(|e| e.0 == *text) {
                continue;
            }
            text.into_owned()
        } else {
            String::new()
        };
        let span = windows.get(p.window).map(|w| Span {
            unique_id: w.feature.unique_id,
            start: p.start,
            end: p.end,
        });
        nbest.push((text, p.start_logit, p.end_logit, span));
    }
}

/// §6.8: the completed list's entries with their probabilities (the list is drained).
fn with_probabilities(scratch: &mut QuestionScratch) -> Vec<NbestEntry> {
    let QuestionScratch {
        nbest,
        scores,
        probs,
        ..
    } = scratch;
    scores.clear();
    scores.extend(nbest.iter().map(|(_, s, e, _)| s + e));
    softmax_into(scores, probs);
    nbest
        .drain(..)
        .zip(probs.iter().copied())
        .map(
            |((text, start_logit, end_logit, span), probability)| NbestEntry {
                text,
                probability,
                start_logit,
                end_logit,
                span,
                keys: NbestKeys::Squad,
            },
        )
        .collect()
}

/// §6.10: the answer and, in v2, the null odds against `score_null`.
fn final_answer(
    config: &DecodeConfig,
    nbest: &[NbestEntry],
    score_null: f64,
) -> (String, Option<f64>) {
    if !config.version_2_with_negative {
        return (nbest[0].text.clone(), None);
    }
    // complete_nbest guarantees a non-empty text in a v2 list.
    let best = nbest.iter().find(|e| !e.text.is_empty());
    let (text, s, e) = best
        .map(|b| (b.text.as_str(), b.start_logit, b.end_logit))
        .unwrap_or(("empty", 0.0, 0.0));
    let diff = score_null - s - e;
    let answer = if diff > config.null_score_diff_threshold {
        String::new()
    } else {
        text.to_string()
    };
    (answer, Some(diff))
}
