//! Span decoding: start/end logits of every feature → the answer, the n-best list and the
//! no-answer odds of each question (spec §6), byte-compatible output files (§6.11, §7).
//!
//! Contract:
//! - Input per question: its paragraph's `doc_tokens`, its [`Feature`]s in creation order
//!   (ascending `unique_id`) each paired with its [`Logits`] (matched by `unique_id` by the
//!   caller, never by position; logits may be longer than the feature: padded positions
//!   take part in the top-k as in the reference, §6.2), and a [`TokenText`] for token text
//!   and the basic tokenizer used by `get_final_text` (§6.7).
//! - [`decode_example`] decodes one question as soon as all of its features' logits are
//!   in (the eval pipeline's incremental path); [`decode`] is the whole-dataset
//!   convenience that matches logits to features by `unique_id`.
//! - Pure and synchronous. All arithmetic is f64 on the exactly widened f32 logits (§5.2,
//!   §10.9): sums `start + end`, `diff = (null − start) − end`, a max-shifted softmax
//!   summed in list order. Every sort is stable (§10.8); NaN logits never panic: they
//!   rank as −∞ in the top-k and below every number when candidates are sorted (the
//!   reference's order is undefined there).
//! - [`Postprocess::Nvidia`] follows the Google/NVIDIA `write_predictions` rules (§6.1–§6.10);
//!   [`Postprocess::Hf`] the transformers 4.x `compute_predictions_logits` port (§6.13).
//!   Every difference between the two lives in [`rules`].
//! - Fallbacks (§6.6 steps 6–7, §6.10 step 5, §10.18–19): a v2 list holding only `""` gets
//!   `"empty"` in front (H's rule, adopted for both modes where G/N would crash); an empty
//!   list becomes `["empty"]`. A question without features therefore predicts `"empty"` in
//!   v1 and `""` in v2 (null odds 1000000.0, the initial `score_null`).

mod direct;
mod final_text;
pub mod non_finite;
mod output;
pub mod rules;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::types::{Dataset, Feature, Logits, TokenText, Words};

pub use final_text::get_final_text;
pub use output::push_str;
pub use output::{
    push_float, py_float_repr, render_nbest, render_null_odds, render_predictions, write_atomic,
    write_outputs, write_outputs_with, NbestStream,
};

/// Which post-processing family to reproduce (cli-contract `--postprocess`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Postprocess {
    /// Google/NVIDIA `write_predictions` (the reference, spec §6.1–§6.10).
    #[default]
    Nvidia,
    /// transformers 4.x `compute_predictions_logits` (spec §6.13).
    Hf,
}

/// Decoding options; the defaults are the BERT-SQuAD reference values (spec §0.2).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeConfig {
    /// Start and end indexes kept per feature, and n-best entries kept per question.
    pub n_best_size: usize,
    /// Longest answer in word pieces (inclusive span length).
    pub max_answer_length: usize,
    /// SQuAD 2.0 rules: null tracking, `""` in the n-best, null odds, threshold.
    pub version_2_with_negative: bool,
    /// v2: answer `""` when `null − best` is strictly greater than this.
    pub null_score_diff_threshold: f64,
    pub postprocess: Postprocess,
    /// Casing of `get_final_text`; must match the [`TokenText`]'s casing.
    pub lower_case: bool,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        DecodeConfig {
            n_best_size: 20,
            max_answer_length: 30,
            version_2_with_negative: false,
            null_score_diff_threshold: 0.0,
            postprocess: Postprocess::Nvidia,
            lower_case: true,
        }
    }
}

/// One entry of a question's n-best list (spec §6.9: `text`, `probability`,
/// `start_logit`, `end_logit`).
#[derive(Debug, Clone, PartialEq)]
pub struct NbestEntry {
    pub text: String,
    pub probability: f64,
    pub start_logit: f64,
    pub end_logit: f64,
    /// Where the entry came from: the first span that produced this text, the null
    /// position (0, 0) of the window with the lowest null score, or `None` for the
    /// `"empty"` placeholder (not written to the output files).
    pub span: Option<Span>,
}

/// A span of one feature: inclusive token positions (both 0 for the null answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub unique_id: u64,
    pub start: usize,
    pub end: usize,
}

/// The decoded result of one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub qas_id: String,
    /// The final answer (`""` = no answer in v2; `"empty"` is the reference's placeholder).
    pub answer: String,
    /// The n-best list in order (up to `n_best_size`, `+ 1` in v2 when `""` is appended).
    pub nbest: Vec<NbestEntry>,
    /// v2 only: `(score_null − best.start_logit) − best.end_logit` (a logit difference).
    pub null_odds: Option<f64>,
}

/// One window of a question: the feature and the logits the model returned for it.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub feature: &'a Feature,
    pub logits: &'a Logits,
    /// The logits' candidates, when already ranked (by whoever journaled them). Ranked
    /// for the decoding's n-best size, they are all that is read, and `logits` may then
    /// be empty (its `unique_id` still pairs it with the feature); otherwise the logits
    /// are ranked again.
    pub candidates: Option<&'a Candidates>,
}

impl<'a> Window<'a> {
    /// The candidates, if ranked for n-best size `k`.
    fn ranked(&self, k: usize) -> Option<&'a Candidates> {
        self.candidates.filter(|c| c.k() == k)
    }
}

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

/// A candidate span (§6.3), or the null candidate when `start == 0` (§6.4).
#[derive(Debug, Clone, Copy)]
struct Prelim {
    window: usize,
    start: usize,
    end: usize,
    start_logit: f64,
    end_logit: f64,
}

/// Initial `score_null` of G, N-old and H (§0.2, §6.4).
const SCORE_NULL_INIT: f64 = 1_000_000.0;

/// Decodes one question from all of its windows (§6.1–§6.10).
///
/// `windows` must be in feature creation order (ascending `unique_id`). Errors: a casing
/// that differs from the tokenizer's, a window whose logits belong to another feature or
/// are shorter than the feature, a feature that points outside `doc_tokens`.
pub fn decode_example(
    config: &DecodeConfig,
    doc_tokens: &Words,
    qas_id: &str,
    windows: &[Window<'_>],
    tok: &dyn TokenText,
) -> Result<Prediction> {
    DecodeCache::default().decode_example(config, None, doc_tokens, qas_id, windows, tok)
}

/// What decoding keeps from one question to the next: the basic tokenization of the
/// current paragraph's words (the questions of a paragraph usually come one after
/// another, and their answers fall on the same words) and the candidates' buffer.
/// Paragraphs are named by their index in the one dataset all of a cache's questions
/// come from.
#[derive(Default)]
pub struct DecodeCache {
    paragraph: Option<usize>,
    words: WordCache,
    prelims: Vec<Prelim>,
    /// Buffers of one question's decoding, kept for the next (a question allocated
    /// about ten small vectors otherwise).
    scratch: QuestionScratch,
}

/// [`DecodeCache`]'s per-question buffers: each window's candidates, the ranking's
/// scratch, the n-best list before its probabilities and the scores of the softmax.
#[derive(Default)]
struct QuestionScratch {
    starts: Vec<(usize, f32)>,
    ends: Vec<(usize, f32)>,
    ranked: Vec<usize>,
    nbest: Vec<rules::RawEntry>,
    scores: Vec<f64>,
    probs: Vec<f64>,
}

impl DecodeCache {
    /// [`decode_example`] for a question of paragraph `paragraph` of the dataset (`None`:
    /// nothing is kept from the previous question).
    pub fn decode_example(
        &mut self,
        config: &DecodeConfig,
        paragraph: Option<usize>,
        doc_tokens: &Words,
        qas_id: &str,
        windows: &[Window<'_>],
        tok: &dyn TokenText,
    ) -> Result<Prediction> {
        check_casing(config, tok)?;
        for w in windows {
            check_window(w, doc_tokens, qas_id, config.n_best_size)?;
        }
        Ok(self.decode_checked(config, paragraph, doc_tokens, qas_id, windows, tok))
    }

    /// Starts a question: the words' analysis is kept only for the same paragraph.
    fn start(&mut self, paragraph: Option<usize>) {
        if paragraph.is_none() || paragraph != self.paragraph {
            self.words.words.clear();
        }
        self.paragraph = paragraph;
        self.words.runs_used = 0;
        self.prelims.clear();
    }
}

/// Decodes every question of `dataset`, in file order. Logits are matched to features
/// by `unique_id` (a repeated `unique_id`, as in padded batches, keeps its first
/// result); features are grouped by `example_index` and ordered by `unique_id`.
///
/// Errors name the feature (`unique_id`) and question when a feature has no logits, its
/// logits are too short, or it refers to a question or word that does not exist.
pub fn decode(
    config: &DecodeConfig,
    dataset: &Dataset,
    features: &[Feature],
    logits: &[Logits],
    tok: &dyn TokenText,
) -> Result<Vec<Prediction>> {
    check_casing(config, tok)?;
    let mut by_id: HashMap<u64, &Logits> = HashMap::with_capacity(logits.len());
    for l in logits {
        by_id.entry(l.unique_id).or_insert(l);
    }
    let mut groups: Vec<Vec<&Feature>> = vec![Vec::new(); dataset.examples.len()];
    for f in features {
        let group = groups
            .get_mut(f.example_index)
            .ok_or_else(|| Error::Decode {
                unique_id: f.unique_id,
                message: format!(
                    "example_index {} but the dataset has {} questions",
                    f.example_index,
                    dataset.examples.len()
                ),
            })?;
        group.push(f);
    }
    let mut out = Vec::with_capacity(dataset.examples.len());
    let mut windows = Vec::new();
    let mut cache = DecodeCache::default();
    for (example, group) in dataset.examples.iter().zip(&mut groups) {
        group.sort_by_key(|f| f.unique_id);
        windows.clear();
        for f in group.iter() {
            let l = by_id.get(&f.unique_id).ok_or_else(|| Error::Decode {
                unique_id: f.unique_id,
                message: format!(
                    "no logits for this feature of question {:?}",
                    example.qas_id
                ),
            })?;
            windows.push(Window {
                feature: f,
                logits: l,
                candidates: None,
            });
        }
        let paragraph = dataset
            .paragraphs
            .get(example.paragraph_index)
            .ok_or_else(|| {
                Error::Config(format!(
                    "question {:?} refers to paragraph {} of {}",
                    example.qas_id,
                    example.paragraph_index,
                    dataset.paragraphs.len()
                ))
            })?;
        for w in &windows {
            check_window(
                w,
                &paragraph.doc_tokens,
                &example.qas_id,
                config.n_best_size,
            )?;
        }
        out.push(cache.decode_checked(
            config,
            Some(example.paragraph_index),
            &paragraph.doc_tokens,
            &example.qas_id,
            &windows,
            tok,
        ));
    }
    Ok(out)
}

fn check_casing(config: &DecodeConfig, tok: &dyn TokenText) -> Result<()> {
    if config.lower_case != tok.lower_case() {
        return Err(Error::Config(format!(
            "decoding with lower_case = {} but the tokenizer has lower_case = {}",
            config.lower_case,
            tok.lower_case()
        )));
    }
    Ok(())
}

fn check_window(w: &Window<'_>, doc_tokens: &Words, qas_id: &str, k: usize) -> Result<()> {
    let f = w.feature;
    let l = w.logits;
    let (starts, ends) = w.ranked(k).map_or((l.start.len(), l.end.len()), |c| c.lens);
    let err = |message: String| Error::Decode {
        unique_id: f.unique_id,
        message: format!("{message} (question {qas_id:?})"),
    };
    if l.unique_id != f.unique_id {
        return Err(err(format!(
            "paired with the logits of feature {}",
            l.unique_id
        )));
    }
    let need = f.len().max(1);
    if starts < need || ends < need {
        return Err(err(format!(
            "{starts} start and {ends} end logits for a feature of {} tokens",
            f.len()
        )));
    }
    if f.token_is_max_context.len() != f.token_to_orig.len()
        || f.doc_offset() + f.doc_len() > f.len()
    {
        return Err(err("inconsistent feature maps".to_string()));
    }
    if let Some(&w) = f
        .token_to_orig
        .iter()
        .find(|&&w| w as usize >= doc_tokens.len())
    {
        return Err(err(format!(
            "word index {w} but the paragraph has {} words",
            doc_tokens.len()
        )));
    }
    Ok(())
}

/// The words of pieces `start` and `end` of `f`, when both map to words, in order, of a
/// paragraph of `words` words.
fn word_span(f: &Feature, start: usize, end: usize, words: usize) -> Option<(usize, usize)> {
    let ws = f.orig_word(start)?;
    let we = f.orig_word(end)?;
    (ws <= we && we < words).then_some((ws, we))
}

/// Strict "greater than" on logits in an order where NaN sits below every number (and
/// equals itself), so sorting never panics and ties keep their order.
fn gt(a: f64, b: f64) -> bool {
    if a.is_nan() {
        false
    } else {
        b.is_nan() || a > b
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

thread_local! {
    /// Text buffers of n-best lists already written ([`recycle_texts`]), for the span
    /// texts this thread decodes next.
    static SPARE_TEXTS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread hands texts back: new buffers then get room to be reused.
    static RECYCLING: Cell<bool> = const { Cell::new(false) };
}

/// Spare text buffers a thread keeps at most: a few questions' n-best lists.
const MAX_SPARE_TEXTS: usize = 128;

/// Bytes a new text buffer holds at least on a thread that hands texts back: most
/// span texts fit, so that a spare one seldom grows when reused.
const MIN_TEXT_CAPACITY: usize = 64;

/// `text` in one of this thread's spare buffers, or a new one (with room to be reused
/// on a thread that hands texts back, of its own length elsewhere: lists that are kept
/// take no more memory than their texts).
fn spare_text(text: &str) -> String {
    let Some(mut s) = SPARE_TEXTS.with_borrow_mut(Vec::pop) else {
        if !RECYCLING.get() {
            return text.to_string();
        }
        let mut s = String::with_capacity(text.len().max(MIN_TEXT_CAPACITY));
        s.push_str(text);
        return s;
    };
    s.clear();
    s.push_str(text);
    s
}

/// Keeps the texts of n-best entries that are written and done with, for this thread's
/// next span texts: an evaluation's n-best lists then take no allocation per entry (on
/// SQuAD-dev-sized, the texts were a fifth of the client's allocations).
pub fn recycle_texts(entries: impl IntoIterator<Item = NbestEntry>) {
    RECYCLING.set(true);
    SPARE_TEXTS.with_borrow_mut(|spare| {
        for e in entries {
            if spare.len() >= MAX_SPARE_TEXTS {
                break;
            }
            if e.text.capacity() > 0 {
                spare.push(e.text);
            }
        }
    });
}

/// §6.8: max-shifted softmax, max taken as "first, then strictly greater", sum in order.
#[cfg(test)]
fn softmax(scores: &[f64]) -> Vec<f64> {
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

impl DecodeCache {
    fn decode_checked(
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
        let v2 = config.version_2_with_negative;
        let mut score_null = SCORE_NULL_INIT;
        let (mut null_window, mut null_start, mut null_end) = (0usize, 0.0f64, 0.0f64);
        // (position, logit) of the candidates; `ranked` is the ranking's scratch.
        let QuestionScratch {
            starts,
            ends,
            ranked,
            nbest,
            scores,
            probs,
        } = scratch;

        for (wi, w) in windows.iter().enumerate() {
            let (f, l) = (w.feature, w.logits);
            starts.clear();
            ends.clear();
            let first = match w.ranked(config.n_best_size) {
                Some(c) => {
                    starts.extend(c.start_scores());
                    ends.extend(c.end_scores());
                    c.first
                }
                None => {
                    for (logits, out) in [(&l.start, &mut *starts), (&l.end, &mut *ends)] {
                        best_indexes(logits, config.n_best_size, ranked);
                        out.extend(ranked.iter().map(|&i| (i, logits[i])));
                    }
                    (l.start[0], l.end[0])
                }
            };
            if v2 {
                // §6.4: strict `<`, so equal null scores keep the earlier window.
                let s0 = f64::from(first.0);
                let e0 = f64::from(first.1);
                let z = s0 + e0;
                if z < score_null {
                    score_null = z;
                    null_window = wi;
                    null_start = s0;
                    null_end = e0;
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
        if v2 {
            prelims.push(Prelim {
                window: null_window,
                start: 0,
                end: 0,
                start_logit: null_start,
                end_logit: null_end,
            });
        }
        // §6.5: stable, descending by start + end.
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

        // §6.6: n-best with de-duplication by final text across all windows. The texts seen
        // are exactly those of the entries kept so far (the null entry's is ""), at most
        // n_best_size + 1 of them: a linear scan beats hashing.
        let mut scratch = SpanScratch::default();
        nbest.clear();
        for p in prelims.iter() {
            if nbest.len() >= config.n_best_size {
                break;
            }
            let text = if p.start > 0 {
                let f = windows[p.window].feature;
                let text = span_text(
                    config,
                    doc_tokens,
                    words,
                    &mut scratch,
                    f,
                    p.start,
                    p.end,
                    tok,
                );
                if nbest.iter().any(|e| e.0 == *text) {
                    continue;
                }
                match text {
                    Cow::Borrowed(t) => spare_text(t),
                    Cow::Owned(t) => t,
                }
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
        let seen_null = nbest.iter().any(|e| e.0.is_empty());
        let null_span = windows.get(null_window).map(|w| Span {
            unique_id: w.feature.unique_id,
            start: 0,
            end: 0,
        });
        rules::complete_nbest(config, nbest, seen_null, (null_start, null_end, null_span));

        scores.clear();
        scores.extend(nbest.iter().map(|(_, s, e, _)| s + e));
        softmax_into(scores, probs);
        let nbest: Vec<NbestEntry> = nbest
            .drain(..)
            .zip(probs.iter().copied())
            .map(
                |((text, start_logit, end_logit, span), probability)| NbestEntry {
                    text,
                    probability,
                    start_logit,
                    end_logit,
                    span,
                },
            )
            .collect();

        // §6.10.
        let (answer, null_odds) = if v2 {
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
        } else {
            (nbest[0].text.clone(), None)
        };
        Prediction {
            qas_id: qas_id.to_string(),
            answer,
            nbest,
            null_odds,
        }
    }
}

/// Buffers reused across the spans of one question.
#[derive(Default)]
struct SpanScratch<'a> {
    pieces: Vec<&'a str>,
    orig: String,
    basic: String,
}

/// The final text of a non-null span (§6.6 step 2): word pieces → `tok_text`
/// (mode-dependent, [`rules::detokenize`]), the original words → `orig_text`, then
/// [`get_final_text`].
#[allow(clippy::too_many_arguments)]
fn span_text<'a, 'w>(
    config: &DecodeConfig,
    doc_tokens: &'w Words,
    words: &mut WordCache,
    scratch: &mut SpanScratch<'a>,
    f: &Feature,
    start: usize,
    end: usize,
    tok: &'a dyn TokenText,
) -> Cow<'w, str> {
    if let Some(text) = words.whole_words(doc_tokens, f, start, end, tok) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(span_text_general(
        config, doc_tokens, words, scratch, f, start, end, tok,
    ))
}

/// [`span_text`] without the whole-word shortcut: the rules of §6.6 step 2 and §6.7 as
/// written.
#[allow(clippy::too_many_arguments)]
fn span_text_general<'a>(
    config: &DecodeConfig,
    doc_tokens: &Words,
    words: &mut WordCache,
    scratch: &mut SpanScratch<'a>,
    f: &Feature,
    start: usize,
    end: usize,
    tok: &'a dyn TokenText,
) -> String {
    scratch.pieces.clear();
    scratch.pieces.extend(
        f.input_ids[start..=end]
            .iter()
            .map(|&id| tok.id_to_token(id)),
    );
    let tok_text = rules::detokenize(config.postprocess, &scratch.pieces);
    // Both positions are doc pieces (checked by the §6.3 filter) and every word index
    // was checked against `doc_tokens` in `check_window`.
    let (ws, we) = (
        f.orig_word(start).unwrap_or(0),
        f.orig_word(end).unwrap_or(0),
    );
    if ws > we {
        return final_text::project_or_orig(&tok_text, "", "");
    }
    let orig = &mut scratch.orig;
    orig.clear();
    orig.push_str(doc_tokens.joined(ws, we));
    words.basic_text(doc_tokens, ws, we, tok, &mut scratch.basic);
    final_text::project_or_orig(&tok_text, orig, &scratch.basic)
}

/// Basic tokens of each word, computed once per question: `get_final_text` tokenizes
/// `" ".join(words)`, which equals the words' tokens concatenated, because the basic
/// tokenizer splits on U+0020 and looks at nothing across a whitespace boundary
/// (§3.3, §10.20).
#[derive(Default)]
struct WordCache {
    /// What the basic tokenizer makes of each word index, filled on first use (kept
    /// across the questions of a paragraph by [`DecodeCache`]).
    words: Vec<WordInfo>,
    /// [`WordCache::whole_words`]'s runs of each window seen, keyed by the feature's
    /// unique id and address (a cache lives for one question's decoding, while its
    /// features are borrowed; the id keeps a reused address from matching should it
    /// ever live longer), one entry per doc piece. Only the first `runs_used` belong to
    /// the question being decoded; the others are buffers kept for reuse.
    runs: Vec<((u64, usize), Vec<Run>)>,
    runs_used: usize,
}

/// What [`WordCache::whole_words`]'s scan finds from a doc piece `a` on through the
/// following pieces of the same word: `end`, the first position after them (another
/// word's, or none's), and `done`, the one position where the pieces from `a` have
/// spelled the word's basic tokens exactly ([`Run::NONE`] if none; `a` must start a
/// token, not be a `##` piece).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    done: u32,
    end: u32,
}

impl Run {
    const NONE: u32 = u32::MAX;
    /// Not scanned yet.
    const UNKNOWN: Run = Run {
        done: u32::MAX,
        end: 0,
    };
}

/// The basic tokenization of one word.
#[derive(Default, Clone)]
enum WordInfo {
    #[default]
    Unknown,
    /// ASCII digits and letters already in the output's case: the word is its own
    /// single token (nothing to clean, split, lower-case or strip).
    Plain,
    /// `" ".join(tokens)` otherwise (empty when nothing is left).
    Tokens(String),
}

impl WordCache {
    /// Makes room for word indexes up to `last` (only as far as spans reach: contexts
    /// can be long).
    fn fill(&mut self, last: usize) {
        if self.words.len() <= last {
            self.words.resize(last + 1, WordInfo::Unknown);
        }
    }

    /// `" ".join(basic_tokenize(word))`.
    fn basic<'w>(slot: &'w mut WordInfo, word: &'w str, tok: &dyn TokenText) -> &'w str {
        if let WordInfo::Unknown = slot {
            let lower = tok.lower_case();
            let plain = !word.is_empty()
                && word.bytes().all(|b| {
                    b.is_ascii_digit()
                        || b.is_ascii_lowercase()
                        || (!lower && b.is_ascii_uppercase())
                });
            *slot = if plain {
                WordInfo::Plain
            } else {
                WordInfo::Tokens(tok.basic_tokenize(word).join(" "))
            };
        }
        match slot {
            WordInfo::Plain | WordInfo::Unknown => word,
            WordInfo::Tokens(text) => text,
        }
    }

    /// The final text of a span made of whole words whose word pieces spell their basic
    /// tokens exactly (no `[UNK]`, no `#` or space in a piece): then `tok_text` (in both
    /// modes: no leading `##` is left to keep or delete) equals
    /// `" ".join(basic_tokenize(orig_text))`, `get_final_text` finds it at offset 0 and
    /// returns all of `orig_text`, so the answer is the words joined by spaces. `None`
    /// (use the general path) for anything else: a span that starts or ends inside a
    /// word, a piece that differs from its token's text, a word without pieces inside
    /// the span.
    ///
    /// Each word's pieces are scanned once per window and starting piece ([`Run`]); a
    /// span then only looks up its words' runs: it is whole words when the run from
    /// `start` and those from each following word's first piece are complete at the
    /// piece before the next word (which must be the word after) and, for the last
    /// word, at `end`. That is the piece-by-piece walk of
    /// [`WordCache::whole_words_scan`], cut where the word changes.
    fn whole_words<'w>(
        &mut self,
        doc_tokens: &'w Words,
        f: &Feature,
        start: usize,
        end: usize,
        tok: &dyn TokenText,
    ) -> Option<&'w str> {
        let (ws, we) = word_span(f, start, end, doc_tokens.len())?;
        if end < start {
            return self.whole_words_scan(doc_tokens, f, start, end, tok);
        }
        let key = (f.unique_id, std::ptr::from_ref(f) as usize);
        let used = self.runs_used;
        let slot = match self.runs[..used].iter().position(|r| r.0 == key) {
            Some(i) => i,
            None => {
                if used == self.runs.len() {
                    self.runs.push((key, Vec::new()));
                }
                let (k, runs) = &mut self.runs[used];
                *k = key;
                runs.clear();
                runs.resize(f.doc_len(), Run::UNKNOWN);
                self.runs_used += 1;
                used
            }
        };
        let off = f.doc_offset();
        let mut a = start;
        let mut word = ws;
        loop {
            // `a` is a doc piece: its word is known.
            let j = a - off;
            let mut run = self.runs[slot].1[j];
            if run == Run::UNKNOWN {
                run = self.run_from(doc_tokens, f, a, word, tok);
                self.runs[slot].1[j] = run;
            }
            let next = run.end as usize;
            if end < next {
                if run.done as usize != end {
                    return None;
                }
                break;
            }
            if run.done as usize != next - 1 || f.orig_word(next) != Some(word + 1) {
                return None;
            }
            a = next;
            word += 1;
        }
        Some(doc_tokens.joined(ws, we))
    }

    /// The [`Run`] from doc piece `a` of word `w`.
    fn run_from(
        &mut self,
        doc_tokens: &Words,
        f: &Feature,
        a: usize,
        w: usize,
        tok: &dyn TokenText,
    ) -> Run {
        let mut p = a;
        let mut done = Run::NONE;
        if let Some(word) = doc_tokens.get(w) {
            self.fill(w);
            let basic = Self::basic(&mut self.words[w], word, tok);
            // Bytes of `basic` spelled so far.
            let mut covered = 0usize;
            while f.orig_word(p) == Some(w) {
                let Some(&id) = f.input_ids.get(p) else { break };
                let piece = tok.id_to_token(id);
                let (cont, body) = match piece.strip_prefix("##") {
                    Some(rest) => (true, rest),
                    None => (false, piece),
                };
                if body.is_empty() || body.bytes().any(|b| b == b'#' || b == b' ') {
                    break;
                }
                if p == a {
                    if cont {
                        break;
                    }
                } else if !cont {
                    // A new basic token of the same word: `" ".join` put a space
                    // before it.
                    if basic.as_bytes().get(covered) != Some(&b' ') {
                        break;
                    }
                    covered += 1;
                }
                if !basic[covered..].starts_with(body) {
                    break;
                }
                covered += body.len();
                p += 1;
                if covered == basic.len() {
                    // Any further piece of the word spells past its end.
                    done = (p - 1) as u32;
                    break;
                }
            }
        }
        while f.orig_word(p) == Some(w) {
            p += 1;
        }
        Run {
            done,
            end: p as u32,
        }
    }

    /// [`WordCache::whole_words`] piece by piece, without the runs.
    fn whole_words_scan<'w>(
        &mut self,
        doc_tokens: &'w Words,
        f: &Feature,
        start: usize,
        end: usize,
        tok: &dyn TokenText,
    ) -> Option<&'w str> {
        let (ws, we) = word_span(f, start, end, doc_tokens.len())?;
        self.fill(we);
        let mut word = ws;
        let mut basic = Self::basic(&mut self.words[ws], &doc_tokens[ws], tok);
        // Bytes of `basic` spelled so far.
        let mut covered = 0usize;
        for p in start..=end {
            let w = f.orig_word(p)?;
            let piece = tok.id_to_token(*f.input_ids.get(p)?);
            let (cont, body) = match piece.strip_prefix("##") {
                Some(rest) => (true, rest),
                None => (false, piece),
            };
            if body.is_empty() || body.bytes().any(|b| b == b'#' || b == b' ') {
                return None;
            }
            if w != word {
                // The previous word must be complete, and the next one start here.
                if w != word + 1 || covered != basic.len() || cont {
                    return None;
                }
                word = w;
                covered = 0;
                basic = Self::basic(&mut self.words[w], &doc_tokens[w], tok);
            } else if p == start {
                if cont {
                    return None;
                }
            } else if !cont {
                // A new basic token of the same word: `" ".join` put a space before it.
                if basic.as_bytes().get(covered) != Some(&b' ') {
                    return None;
                }
                covered += 1;
            }
            if !basic[covered..].starts_with(body) {
                return None;
            }
            covered += body.len();
        }
        if covered != basic.len() {
            return None;
        }
        Some(doc_tokens.joined(ws, we))
    }

    /// `" ".join(basic_tokenize(" ".join(doc_tokens[ws..=we])))`, into `out`.
    fn basic_text(
        &mut self,
        doc_tokens: &Words,
        ws: usize,
        we: usize,
        tok: &dyn TokenText,
        out: &mut String,
    ) {
        self.fill(we);
        out.clear();
        for (slot, word) in self.words[ws..=we]
            .iter_mut()
            .zip(doc_tokens.range(ws..=we))
        {
            let text = Self::basic(slot, word, tok);
            if text.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(text);
        }
    }
}

/// Python's `str.split()` whitespace (spec §3.5).
pub(crate) use crate::tokenize::is_python_whitespace as is_py_whitespace;

/// `" ".join(s.split())` with Python's whitespace set.
pub(crate) fn py_split_join(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for word in s.split(is_py_whitespace).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests;
