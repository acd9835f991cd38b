//! Span decoding: start/end logits of every feature → the answer, the n-best list and the
//! no-answer odds of each question (algorithm §6), byte-compatible output files (§6.11, §7).
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

mod candidates;
mod final_text;
mod nbest;
pub mod non_finite;
mod output;
pub mod pyjson;
pub mod rules;
pub mod run_qa;
mod scores;
mod span_text;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::types::{Dataset, Feature, Logits, Paragraph, TokenText, Words};

pub use candidates::{best_indexes, real_in_top, Candidates};
pub use final_text::get_final_text;
use nbest::{window_candidates, Prelim};
pub use output::{
    render_nbest, render_null_odds, render_predictions, write_outputs, write_outputs_with,
    NbestStream,
};
pub use pyjson::py_float_repr;
pub use scores::Scores;
use span_text::WordCache;
#[cfg(test)]
use {
    nbest::softmax,
    span_text::{span_text, span_text_general, SpanScratch},
};

/// Which post-processing family to reproduce (`--postprocess`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Postprocess {
    /// Google/NVIDIA `write_predictions` (the reference, algorithm §6.1–§6.10).
    #[default]
    Nvidia,
    /// transformers 4.x `compute_predictions_logits` (algorithm §6.13).
    Hf,
    /// transformers' run_qa example, `postprocess_qa_predictions` (docs/algorithm.md,
    /// "run_qa's rules"): windows with character offsets from any fast tokenizer.
    RunQa,
}

/// What differs between run_squad's reading of a question's answers ([`DecodeCache`]:
/// the windows' pieces mapped back to the words, with BERT's tokenizer) and run_qa's
/// (`run_qa.rs`: character offsets into the context). Each keeps what it can from one
/// question of a paragraph to the next.
pub(crate) trait ExampleDecoder: Send {
    /// The prediction of question `qas_id` of paragraph `paragraph_index` from its
    /// `windows`; `tok` is BERT's tokenizer (run_squad's rules need it).
    fn decode_example(
        &mut self,
        config: &DecodeConfig,
        paragraph_index: usize,
        paragraph: &Paragraph,
        qas_id: &str,
        windows: &[Window<'_>],
        tok: Option<&dyn TokenText>,
    ) -> Result<Prediction>;
}

impl Postprocess {
    /// The decoder of these rules' answers.
    pub(crate) fn decoder(self) -> Box<dyn ExampleDecoder> {
        match self {
            Postprocess::RunQa => Box::<run_qa::RunQaCache>::default(),
            Postprocess::Nvidia | Postprocess::Hf => Box::<DecodeCache>::default(),
        }
    }

    /// The name `--postprocess` takes (and reports show).
    pub fn as_str(self) -> &'static str {
        match self {
            Postprocess::Nvidia => "nvidia",
            Postprocess::Hf => "hf",
            Postprocess::RunQa => "run-qa",
        }
    }
}

/// Decoding options; the defaults are the BERT-SQuAD reference values (algorithm §0.2).
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

/// One entry of a question's n-best list (algorithm §6.9: `text`, `probability`,
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
    /// The order of the entry's keys in `nbest_predictions.json`.
    pub keys: NbestKeys,
}

/// The order in which an n-best entry's keys are written: each post-processing writes
/// its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NbestKeys {
    /// `text`, `probability`, `start_logit`, `end_logit` (run_squad, transformers 4.x).
    #[default]
    Squad,
    /// `start_logit`, `end_logit`, `text`, `probability` (run_qa's spans and null).
    RunQa,
    /// `text`, `start_logit`, `end_logit`, `probability` (run_qa's `"empty"`).
    RunQaPlaceholder,
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

/// One window of a question: the feature and what the model returned for it, its logits
/// or their candidates ([`Window::new`], [`Window::of`]).
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub feature: &'a Feature,
    /// The feature the logits or candidates belong to (checked to be `feature`).
    unique_id: u64,
    /// Kept: at least one of `logits` and `candidates` is there.
    logits: Option<&'a Logits>,
    /// Ranked for the decoding's n-best size, they are all that is read; otherwise the
    /// logits are ranked again.
    candidates: Option<&'a Candidates>,
}

impl<'a> Window<'a> {
    /// A window of `feature` answered by `logits`.
    pub fn new(feature: &'a Feature, logits: &'a Logits) -> Window<'a> {
        Window {
            feature,
            unique_id: logits.unique_id,
            logits: Some(logits),
            candidates: None,
        }
    }

    /// A window of `feature` answered by `scores`: the candidates are read when ranked for
    /// the decoding's n-best size, the logits otherwise.
    pub fn of(feature: &'a Feature, scores: &'a Scores) -> Window<'a> {
        Window {
            feature,
            unique_id: scores.unique_id(),
            logits: scores.logits(),
            candidates: scores.candidates(),
        }
    }

    /// The candidates, if ranked for n-best size `k`.
    fn ranked(&self, k: usize) -> Option<&'a Candidates> {
        self.candidates.filter(|c| c.k() == k)
    }
}
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

impl ExampleDecoder for DecodeCache {
    fn decode_example(
        &mut self,
        config: &DecodeConfig,
        paragraph_index: usize,
        paragraph: &Paragraph,
        qas_id: &str,
        windows: &[Window<'_>],
        tok: Option<&dyn TokenText>,
    ) -> Result<Prediction> {
        let tok = tok.ok_or_else(|| {
            Error::Config(
                "run_squad's rules decode with BERT's tokenizer, and none was given".into(),
            )
        })?;
        let doc_tokens = &paragraph.doc_tokens;
        DecodeCache::decode_example(
            self,
            config,
            Some(paragraph_index),
            doc_tokens,
            qas_id,
            windows,
            tok,
        )
    }
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
/// `tok` is BERT's tokenizer for run_squad's rules; run_qa's read no tokenizer.
///
/// Errors name the feature (`unique_id`) and question when a feature has no logits, its
/// logits are too short, or it refers to a question or word that does not exist.
pub fn decode(
    config: &DecodeConfig,
    dataset: &Dataset,
    features: &[Feature],
    logits: &[Logits],
    tok: Option<&dyn TokenText>,
) -> Result<Vec<Prediction>> {
    if let Some(t) = tok {
        check_casing(config, t)?;
    }
    let mut decoder = config.postprocess.decoder();
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
            windows.push(Window::new(f, l));
        }
        let paragraph = dataset
            .paragraphs
            .get(example.paragraph_index)
            .ok_or_else(|| Error::MissingParagraph {
                qas_id: example.qas_id.clone(),
                paragraph: example.paragraph_index,
                paragraphs: dataset.paragraphs.len(),
            })?;
        out.push(decoder.decode_example(
            config,
            example.paragraph_index,
            paragraph,
            &example.qas_id,
            &windows,
            tok,
        )?);
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

/// What every rule checks of a window: its logits (or candidates ranked for `k`) are
/// the feature's, and cover it. The error names the feature and the question.
pub(crate) fn check_logits(w: &Window<'_>, qas_id: &str, k: usize) -> Result<()> {
    let f = w.feature;
    let err = |message: String| Error::Decode {
        unique_id: f.unique_id,
        message: format!("{message} (question {qas_id:?})"),
    };
    if w.unique_id != f.unique_id {
        return Err(err(format!(
            "paired with the logits of feature {}",
            w.unique_id
        )));
    }
    let (starts, ends) = match (w.ranked(k), w.logits) {
        (Some(c), _) => c.lens(),
        (None, Some(l)) => (l.start.len(), l.end.len()),
        (None, None) => {
            return Err(err(format!(
                "its logits were not kept, and its candidates are not for n-best size {k}"
            )))
        }
    };
    let need = f.len().max(1);
    if starts < need || ends < need {
        return Err(err(format!(
            "{starts} start and {ends} end logits for a feature of {} tokens",
            f.len()
        )));
    }
    Ok(())
}

fn check_window(w: &Window<'_>, doc_tokens: &Words, qas_id: &str, k: usize) -> Result<()> {
    check_logits(w, qas_id, k)?;
    let f = w.feature;
    let err = |message: String| Error::Decode {
        unique_id: f.unique_id,
        message: format!("{message} (question {qas_id:?})"),
    };
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

/// Python's `str.split()` whitespace (algorithm §3.5).
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
