//! Stage `features`: examples → model windows, exactly as the reference (algorithm §4, G = N).
//!
//! Contract, per example in dataset order:
//! - the question is tokenized as one string and cut to its first `max_query_length`
//!   pieces (§4.1);
//! - the paragraph's words are tokenized one at a time, once per paragraph, giving the
//!   doc pieces and each piece's word index (§4.2);
//! - windows start at 0, `doc_stride`, `2·doc_stride`, … and hold up to
//!   `max_seq_length − len(q) − 3` pieces; the last one ends at the document's end
//!   (§4.3). A document without pieces has no windows and the example no features;
//!   that is reported, not hidden (§10.18);
//! - each window is `[CLS] q [SEP] doc [SEP]` (§4.4), unpadded; per doc piece it keeps
//!   the word index and the §4.6 max-context flag (strictly greater score wins, ties go
//!   to the earlier window);
//! - `unique_id` counts every feature from 1000000000, `example_index` is the example's
//!   position even when earlier examples had no features (G/N, not H; §4.7).
//!
//! [`FeatureBuilder::features`] streams features so inference can start before the
//! last window is built; [`build`] collects them all; [`json_lines`] writes them as
//! `bertqa features` does.

use std::collections::VecDeque;

mod json;
mod run_qa;
mod squad;

pub use json::{json_lines, JsonLines};

use crate::decode::Postprocess;
use crate::error::{Error, Result};
use crate::tokenize::{BertTokenizer, Encoder, EncoderStats, PretrainedTokenizer, TokenizerRef};
use crate::slices::Placement;
use crate::types::{Dataset, Example, Feature, Paragraph};

/// First `unique_id` (§4.7).
pub const FIRST_UNIQUE_ID: u64 = 1_000_000_000;

/// Window geometry (algorithm §0.2, §4). `doc_stride` is the step between window starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureConfig {
    /// Tokens per feature, `[CLS]` and both `[SEP]` included.
    pub max_seq_length: usize,
    /// Step between window starts, in pieces.
    pub doc_stride: usize,
    /// Question pieces kept (a prefix).
    pub max_query_length: usize,
}

impl Default for FeatureConfig {
    /// The BERT SQuAD defaults: 384 / 128 / 64.
    fn default() -> Self {
        FeatureConfig {
            max_seq_length: 384,
            doc_stride: 128,
            max_query_length: 64,
        }
    }
}

impl FeatureConfig {
    /// [`validate`](Self::validate) under the rules windows are cut by: run_squad's are
    /// checked here, run_qa's when their windows are cut (they need the questions).
    pub fn validate_for(&self, rules: crate::decode::Postprocess) -> Result<()> {
        match rules {
            crate::decode::Postprocess::RunQa => Ok(()),
            _ => self.validate(),
        }
    }

    /// Checks that every question leaves room for at least one doc piece and that
    /// windows advance.
    pub fn validate(&self) -> Result<()> {
        if self.doc_stride == 0 {
            return Err(Error::Config(
                "`doc_stride` must be at least 1 (it is the step between window starts)"
                    .to_string(),
            ));
        }
        if self.max_query_length + 3 >= self.max_seq_length {
            return Err(Error::Config(format!(
                "`max_seq_length` {} leaves no room for the document: it must exceed \
                 `max_query_length` {} + 3 ([CLS] and two [SEP])",
                self.max_seq_length, self.max_query_length
            )));
        }
        if u32::try_from(self.max_seq_length).is_err() {
            return Err(Error::Config(format!(
                "`max_seq_length` {} is too large",
                self.max_seq_length
            )));
        }
        Ok(())
    }
}

/// A paragraph's word pieces and the word each came from (§4.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocPieces {
    pub ids: Vec<u32>,
    pub tok_to_orig: Vec<u32>,
}

/// Tokenizes a paragraph's words one at a time (§4.2). Each word is a segment of the
/// encoder's segment cache, so a word seen in any earlier paragraph is not tokenized
/// again.
pub fn doc_pieces(encoder: &mut Encoder<'_>, paragraph: &Paragraph) -> DocPieces {
    let mut pieces = DocPieces::default();
    doc_pieces_into(encoder, paragraph, &mut pieces);
    pieces
}

/// [`doc_pieces`] into `pieces`, replacing what it held (its buffers are reused).
pub fn doc_pieces_into(encoder: &mut Encoder<'_>, paragraph: &Paragraph, pieces: &mut DocPieces) {
    pieces.ids.clear();
    pieces.tok_to_orig.clear();
    // Most words are one or two pieces: room for a quarter more pieces than words
    // usually avoids growing the buffers piece by piece.
    let words = paragraph.doc_tokens.len();
    let room = words + words / 4 + 16;
    pieces.ids.reserve(room);
    pieces.tok_to_orig.reserve(room);
    for (word_index, word) in paragraph.doc_tokens.iter().enumerate() {
        let before = pieces.ids.len();
        encoder.encode_segment(word, &mut pieces.ids);
        // Words index a context of under 2^31 characters (checked by the reader).
        let w = word_index as u32;
        pieces
            .tok_to_orig
            .extend(std::iter::repeat_n(w, pieces.ids.len() - before));
    }
}

/// Window `(start, length)` pairs over `n_pieces` doc pieces (§4.3).
pub fn doc_spans(
    n_pieces: usize,
    max_tokens_for_doc: usize,
    doc_stride: usize,
) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = 0;
    while start < n_pieces {
        let length = (n_pieces - start).min(max_tokens_for_doc);
        spans.push((start, length));
        if start + length == n_pieces {
            break;
        }
        start += length.min(doc_stride);
    }
    spans
}

/// §4.6: whether window `cur` is the best context for doc piece `pos`. Windows that
/// contain `pos` form one run of indexes (starts and ends both increase), so only that
/// run is scored, in index order, keeping the first of equal scores.
pub fn is_max_context(spans: &[(usize, usize)], cur: usize, pos: usize) -> bool {
    let contains = |&(s, l): &(usize, usize)| s <= pos && pos < s + l;
    let mut lo = cur;
    while lo > 0 && contains(&spans[lo - 1]) {
        lo -= 1;
    }
    let mut best: Option<(f64, usize)> = None;
    for (i, span) in spans.iter().enumerate().skip(lo) {
        if !contains(span) {
            if span.0 > pos {
                break;
            }
            continue;
        }
        let (s, l) = *span;
        let end = s + l - 1;
        let score = (pos - s).min(end - pos) as f64 + 0.01 * l as f64;
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, i));
        }
    }
    best.is_some_and(|(_, i)| i == cur)
}

/// [`is_max_context`] for every doc piece of window `cur`, in one pass per overlapping
/// window instead of a search per piece.
///
/// Window `cur` is the best for a piece exactly when it scores strictly more than every
/// earlier window holding the piece and at least as much as every later one (the first
/// of equal scores wins). Starts and ends both increase, so the windows that overlap
/// `cur` are the neighbours on either side until the first that does not; only their
/// overlap with `cur` is scored, with the same f64 expression as the reference.
pub fn max_context_flags(spans: &[(usize, usize)], cur: usize) -> Vec<bool> {
    let (s, l) = spans[cur];
    let mut flags = vec![true; l];
    if l == 0 {
        return flags;
    }
    let score = |(s, l): (usize, usize), pos: usize| {
        (pos - s).min(s + l - 1 - pos) as f64 + 0.01 * l as f64
    };
    let mut lose_to = |other: usize, earlier: bool| {
        let (os, ol) = spans[other];
        let from = os.max(s);
        let to = (os + ol).min(s + l);
        for pos in from..to {
            let (mine, theirs) = (score((s, l), pos), score((os, ol), pos));
            if if earlier {
                theirs >= mine
            } else {
                theirs > mine
            } {
                flags[pos - s] = false;
            }
        }
        from < to
    };
    for other in (0..cur).rev() {
        if !lose_to(other, true) {
            break;
        }
    }
    for other in cur + 1..spans.len() {
        if !lose_to(other, false) {
            break;
        }
    }
    flags
}

/// Builds features example by example, tokenizing each paragraph once, by run_squad's
/// rules ([`FeatureBuilder::new`]) or run_qa's ([`FeatureBuilder::run_qa`]).
#[derive(Debug)]
pub struct FeatureBuilder<'t> {
    rules: Box<dyn Windows + 't>,
    config: FeatureConfig,
    next_unique_id: u64,
}

/// What differs between run_squad's windows (`squad.rs`) and run_qa's (`run_qa.rs`):
/// how an example's question and paragraph are tokenized and cut.
trait Windows: std::fmt::Debug + Send {
    /// Appends the windows of `example` to `out`, numbered from `next_unique_id`.
    fn push_example(
        &mut self,
        config: &FeatureConfig,
        next_unique_id: &mut u64,
        dataset: &Dataset,
        example: &Example,
        out: &mut Vec<Feature>,
    );
    /// Where the windows of `example`, the one [`Windows::push_example`] last made, lie
    /// in its context, and its first gold answer among them.
    fn placement(&mut self, dataset: &Dataset, example: &Example) -> Placement;
    /// How many times a paragraph's words were tokenized.
    fn paragraphs_tokenized(&self) -> usize;
    /// What BERT's encoder did (nothing for other tokenizers).
    fn encoder_stats(&self) -> EncoderStats {
        EncoderStats::default()
    }
}

impl<'t> FeatureBuilder<'t> {
    /// A builder of run_squad's windows with a validated configuration; unique ids
    /// start at 1000000000.
    pub fn new(tokenizer: &'t BertTokenizer, config: FeatureConfig) -> Result<Self> {
        config.validate()?;
        Ok(FeatureBuilder {
            rules: Box::new(squad::SquadWindows::new(tokenizer)),
            config,
            next_unique_id: FIRST_UNIQUE_ID,
        })
    }

    /// A builder of run_qa's windows for `dataset`: `max_seq_length` (capped by the
    /// tokenizer's `model_max_length`) and `doc_stride` as the overlap in tokens;
    /// `max_query_length` does not apply. Every question is tokenized here, and one
    /// that leaves no more room for the context than the overlap is an error naming it.
    pub fn run_qa(
        tokenizer: &'t PretrainedTokenizer,
        config: FeatureConfig,
        dataset: &Dataset,
    ) -> Result<Self> {
        let windows = run_qa::RunQaWindows::new(tokenizer, &config, dataset)?;
        Ok(FeatureBuilder {
            rules: Box::new(windows),
            config,
            next_unique_id: FIRST_UNIQUE_ID,
        })
    }

    /// The builder of `postprocess`'s windows: run_squad's (`Nvidia`, `Hf`) with BERT's
    /// tokenizer, run_qa's with a fast one; the other pairings are errors that say what
    /// to give.
    pub fn for_rules(
        tokenizer: TokenizerRef<'t>,
        postprocess: Postprocess,
        config: FeatureConfig,
        dataset: &Dataset,
    ) -> Result<Self> {
        let run_qa = postprocess == Postprocess::RunQa;
        match tokenizer {
            TokenizerRef::Bert(t) if !run_qa => FeatureBuilder::new(t, config),
            TokenizerRef::Pretrained(t) if run_qa => FeatureBuilder::run_qa(t, config, dataset),
            TokenizerRef::Bert(_) => Err(Error::Config(
                "run_qa's rules cut windows with a fast tokenizer: give a tokenizer.json \
                 (`tokenizer`)"
                    .into(),
            )),
            TokenizerRef::Pretrained(t) => Err(Error::Config(format!(
                "run_squad's rules (`postprocess` {}) need BERT's WordPiece tokenizer; {} \
                 holds a {} tokenizer: use run_qa's rules",
                postprocess.as_str(),
                t.path().display(),
                t.kind()
            ))),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &FeatureConfig {
        &self.config
    }

    /// How many times a paragraph's words were tokenized: once per paragraph when its
    /// questions come one after another, as the reader gives them.
    pub fn paragraphs_tokenized(&self) -> usize {
        self.rules.paragraphs_tokenized()
    }

    /// What the BERT encoder did (segments and basic tokens asked for and tokenized);
    /// nothing under run_qa's rules.
    pub fn encoder_stats(&self) -> EncoderStats {
        self.rules.encoder_stats()
    }

    /// Appends the features of one example to `out`, numbering them on from the
    /// previous call's.
    pub fn push_example(&mut self, dataset: &Dataset, example: &Example, out: &mut Vec<Feature>) {
        let (config, next) = (&self.config, &mut self.next_unique_id);
        self.rules.push_example(config, next, dataset, example, out);
    }

    /// Where the windows of `example` lie, and its first gold answer among them (its
    /// `context_windows` and `answer_windows` slices, docs/algorithm.md §8.8); `example`
    /// must be the one [`FeatureBuilder::push_example`] was last given.
    pub(crate) fn placement(&mut self, dataset: &Dataset, example: &Example) -> Placement {
        self.rules.placement(dataset, example)
    }

    /// Streams the features of every example of `dataset`, in order.
    pub fn features<'d>(self, dataset: &'d Dataset) -> Features<'t, 'd> {
        Features {
            builder: self,
            dataset,
            next_example: 0,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            featureless: Vec::new(),
            placements: Vec::new(),
        }
    }
}

/// The first gold answer of `example` as characters of its context: the first and the
/// last (`None`: a question without an answer, or an empty one).
fn first_answer_chars(example: &Example) -> Option<(usize, usize)> {
    let answer = example.answers.first().filter(|_| !example.is_impossible)?;
    let chars = answer.text.chars().count();
    (chars > 0).then(|| (answer.answer_start, answer.answer_start + chars - 1))
}

/// Iterator over a dataset's features (see [`FeatureBuilder::features`]).
#[derive(Debug)]
pub struct Features<'t, 'd> {
    builder: FeatureBuilder<'t>,
    dataset: &'d Dataset,
    next_example: usize,
    pending: VecDeque<Feature>,
    scratch: Vec<Feature>,
    featureless: Vec<usize>,
    /// Where the windows of each example seen so far lie, in data order.
    placements: Vec<Placement>,
}

impl Features<'_, '_> {
    /// Indexes of the examples seen so far that produced no feature (a context
    /// without word pieces, §10.18); they get no answer.
    pub fn featureless(&self) -> &[usize] {
        &self.featureless
    }
}

impl Iterator for Features<'_, '_> {
    type Item = Feature;

    fn next(&mut self) -> Option<Feature> {
        while self.pending.is_empty() {
            let example = self.dataset.examples.get(self.next_example)?;
            self.next_example += 1;
            self.builder
                .push_example(self.dataset, example, &mut self.scratch);
            self.placements
                .push(self.builder.placement(self.dataset, example));
            if self.scratch.is_empty() {
                self.featureless.push(example.example_index);
            }
            self.pending.extend(self.scratch.drain(..));
        }
        self.pending.pop_front()
    }
}

/// All features of a dataset, and the examples that have none.
pub fn build(
    tokenizer: &BertTokenizer,
    config: FeatureConfig,
    dataset: &Dataset,
) -> Result<(Vec<Feature>, Vec<usize>)> {
    collect(FeatureBuilder::new(tokenizer, config)?, dataset)
}

/// Every feature `builder` makes of `dataset`, and the examples that have none.
pub fn collect(
    builder: FeatureBuilder<'_>,
    dataset: &Dataset,
) -> Result<(Vec<Feature>, Vec<usize>)> {
    let (features, featureless, _) = collect_placed(builder, dataset);
    Ok((features, featureless))
}

/// [`collect`], with where each example's windows lie (in data order).
pub(crate) fn collect_placed(
    builder: FeatureBuilder<'_>,
    dataset: &Dataset,
) -> (Vec<Feature>, Vec<usize>, Vec<Placement>) {
    let mut it = builder.features(dataset);
    let features: Vec<Feature> = it.by_ref().collect();
    (features, it.featureless, it.placements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_of_the_spec_example() {
        // len(q) = 10, 600 pieces: max_tokens_for_doc = 371 (§4.6 worked example).
        let spans = doc_spans(600, 371, 128);
        assert_eq!(spans, [(0, 371), (128, 371), (256, 344)]);
        let owner = |pos| (0..3).find(|&k| is_max_context(&spans, k, pos)).unwrap();
        assert_eq!(owner(0), 0);
        assert_eq!(owner(249), 0); // a tie at 121 + 3.71: the earlier window wins
        assert_eq!(owner(250), 1);
        assert_eq!(owner(377), 1); // 124.71 against 124.44
        assert_eq!(owner(378), 2);
        assert_eq!(owner(599), 2);
        for pos in 0..600 {
            let owners = (0..3).filter(|&k| is_max_context(&spans, k, pos)).count();
            assert_eq!(owners, 1, "piece {pos}");
        }
        // Second check: 300 pieces give (0, 250) and (128, 172), switching at 189.
        let spans = doc_spans(300, 250, 128);
        assert_eq!(spans, [(0, 250), (128, 172)]);
        assert!(is_max_context(&spans, 0, 188));
        assert!(is_max_context(&spans, 1, 189));
        assert!(!is_max_context(&spans, 0, 189));
    }

    proptest::proptest! {
        /// The one-pass flags equal the reference rule piece by piece, for any window
        /// geometry (overlapping, touching, strides above the window length).
        #[test]
        fn max_context_flags_equal_the_reference_rule(
            n_pieces in 1usize..700,
            max_tokens_for_doc in 1usize..400,
            doc_stride in 1usize..200,
        ) {
            let spans = doc_spans(n_pieces, max_tokens_for_doc, doc_stride);
            for (k, &(s, l)) in spans.iter().enumerate() {
                let want: Vec<bool> = (s..s + l).map(|pos| is_max_context(&spans, k, pos)).collect();
                proptest::prop_assert_eq!(max_context_flags(&spans, k), want, "window {}", k);
            }
        }
    }

    #[test]
    fn max_context_flags_of_the_spec_example() {
        let spans = doc_spans(600, 371, 128);
        let owned = |k: usize| {
            let (s, _) = spans[k];
            let f = max_context_flags(&spans, k);
            let first = f.iter().position(|&x| x).unwrap();
            let last = f.iter().rposition(|&x| x).unwrap();
            assert!(f[first..=last].iter().all(|&x| x));
            (s + first, s + last)
        };
        assert_eq!(owned(0), (0, 249));
        assert_eq!(owned(1), (250, 377));
        assert_eq!(owned(2), (378, 599));
    }

    /// Questions about `context` whose first gold answers are `answers` (text, first
    /// character), one question each.
    fn answered(context: &str, answers: &[(&str, usize)]) -> Dataset {
        let mut d = Dataset::default();
        d.paragraphs.push(crate::squad::split_context(context));
        for (i, &(text, answer_start)) in answers.iter().enumerate() {
            d.examples.push(Example {
                example_index: i,
                qas_id: format!("q{i}"),
                question_text: "Who sat?".to_string(),
                paragraph_index: 0,
                answers: vec![crate::types::Answer {
                    text: text.to_string(),
                    answer_start,
                }],
                is_impossible: false,
            });
        }
        d
    }

    /// `answer_windows`'s slice, by its definition, of a question whose context has
    /// `windows` windows, `holding` of which hold its answer whole.
    fn answer_windows_of(windows: usize, holding: usize) -> &'static str {
        match (windows, holding) {
            (1, _) => "single",
            (_, 0) => "cut",
            (_, 1) => "one",
            _ => "overlap",
        }
    }

    #[test]
    fn placement_counts_the_windows_and_finds_the_answer_in_them() {
        let tok = tiny_tokenizer();
        let context = "the cat sat on the mat . the cats sat . ".repeat(6);
        let chars: Vec<char> = context.chars().collect();
        // Every word as an answer, and runs of two to six words.
        let words: Vec<(usize, usize)> = {
            let mut out = Vec::new();
            let mut start = None;
            for (i, c) in chars.iter().enumerate() {
                match (c.is_whitespace(), start) {
                    (false, None) => start = Some(i),
                    (true, Some(s)) => {
                        out.push((s, i));
                        start = None;
                    }
                    _ => {}
                }
            }
            out
        };
        let mut answers = Vec::new();
        for (i, &(s, _)) in words.iter().enumerate() {
            for n in [1, 2, 6] {
                if let Some(&(_, e)) = words.get(i + n - 1) {
                    answers.push((chars[s..e].iter().collect::<String>(), s));
                }
            }
        }
        let refs: Vec<(&str, usize)> = answers.iter().map(|(t, s)| (t.as_str(), *s)).collect();
        let d = answered(&context, &refs);
        let config = FeatureConfig {
            max_seq_length: 16,
            doc_stride: 5,
            max_query_length: 4,
        };
        let mut b = FeatureBuilder::new(&tok, config).unwrap();
        // Each word's pieces in the whole context, counted independently of the windows.
        let pieces = doc_pieces(&mut tok.encoder(), &d.paragraphs[0]);
        let word_of = d.paragraphs[0].char_to_word_offset();
        let mut seen = [0usize; 4];
        for example in &d.examples {
            let mut features = Vec::new();
            b.push_example(&d, example, &mut features);
            let placed = b.placement(&d, example);
            assert_eq!(placed.windows, features.len(), "{}", example.qas_id);
            let a = &example.answers[0];
            let w0 = word_of[a.answer_start] as u32;
            let w1 = word_of[a.answer_start + a.text.chars().count() - 1] as u32;
            let count = |map: &[u32], w: u32| map.iter().filter(|&&x| x == w).count();
            let holding = features
                .iter()
                .filter(|f| (w0..=w1).all(|w| count(&f.token_to_orig, w) == count(&pieces.tok_to_orig, w)))
                .count();
            let want = answer_windows_of(features.len(), holding);
            assert_eq!(placed.answer, Some(want), "{} {:?}", example.qas_id, a.text);
            seen[["single", "cut", "one", "overlap"].iter().position(|&x| x == want).unwrap()] += 1;
        }
        assert!(seen[1] > 0 && seen[2] > 0 && seen[3] > 0, "{seen:?}");
        // One window in all, and a question without an answer.
        let short = answered("the cat sat .", &[("cat", 4)]);
        let mut b = FeatureBuilder::new(&tok, FeatureConfig::default()).unwrap();
        b.push_example(&short, &short.examples[0], &mut Vec::new());
        assert_eq!(
            b.placement(&short, &short.examples[0]),
            Placement {
                windows: 1,
                answer: Some("single")
            }
        );
        let mut none = short.clone();
        none.examples[0].answers.clear();
        b.push_example(&none, &none.examples[0], &mut Vec::new());
        assert_eq!(b.placement(&none, &none.examples[0]).answer, None);
    }

    #[test]
    fn placement_under_run_qa_finds_the_answer_by_the_tokens_offsets() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers");
        let tok = PretrainedTokenizer::from_path(&root.join("roberta")).unwrap();
        let context = "Ada Byron designed the lighthouse at Varne Point in 1851. ".repeat(5);
        let chars: Vec<char> = context.chars().collect();
        let mut answers = Vec::new();
        for (i, c) in chars.iter().enumerate() {
            let at_word = !c.is_whitespace() && (i == 0 || chars[i - 1].is_whitespace());
            if at_word {
                for n in [3usize, 9, 20] {
                    if i + n <= chars.len() {
                        answers.push((chars[i..i + n].iter().collect::<String>(), i));
                    }
                }
            }
        }
        let refs: Vec<(&str, usize)> = answers.iter().map(|(t, s)| (t.as_str(), *s)).collect();
        let d = answered(&context, &refs);
        let config = FeatureConfig {
            max_seq_length: 24,
            doc_stride: 6,
            max_query_length: 64,
        };
        let mut b = FeatureBuilder::run_qa(&tok, config, &d).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for example in &d.examples {
            let mut features = Vec::new();
            b.push_example(&d, example, &mut features);
            let placed = b.placement(&d, example);
            assert_eq!(placed.windows, features.len(), "{}", example.qas_id);
            // A window holds the answer when every answer character that some context
            // token covers is covered by one of the window's tokens.
            let a = &example.answers[0];
            let answer = a.answer_start..a.answer_start + a.text.chars().count();
            let covered = |f: &Feature, p: usize| {
                let offsets = &f.template.as_ref().unwrap().offsets;
                offsets.iter().any(|&(s, e)| (s as usize..e as usize).contains(&p))
            };
            let somewhere = |p: usize| features.iter().any(|f| covered(f, p));
            let holding = features
                .iter()
                .filter(|f| answer.clone().filter(|&p| somewhere(p)).all(|p| covered(f, p)))
                .count();
            let want = answer_windows_of(features.len(), holding);
            assert_eq!(placed.answer, Some(want), "{} {:?}", example.qas_id, a.text);
            seen.insert(want);
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
    }

    fn tiny_tokenizer() -> BertTokenizer {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\non\nmat\n##s\n.\nwho\n?\n";
        BertTokenizer::from_vocab_text(vocab, true, &crate::tokenize::in_memory()).unwrap()
    }

    fn dataset(paragraphs: &[(&str, usize)]) -> Dataset {
        let mut d = Dataset::default();
        for (p, &(context, questions)) in paragraphs.iter().enumerate() {
            d.paragraphs.push(crate::squad::split_context(context));
            for _ in 0..questions {
                d.examples.push(Example {
                    example_index: d.examples.len(),
                    qas_id: format!("q{}", d.examples.len()),
                    question_text: "Who sat?".to_string(),
                    paragraph_index: p,
                    answers: Vec::new(),
                    is_impossible: false,
                });
            }
        }
        d
    }

    #[test]
    fn each_paragraph_is_tokenized_once_and_each_word_once() {
        let tok = tiny_tokenizer();
        let d = dataset(&[
            ("The cat sat on the mat.", 3),
            ("The cats sat.", 2),
            ("the mat", 1),
        ]);
        let mut b = FeatureBuilder::new(&tok, FeatureConfig::default()).unwrap();
        let mut out = Vec::new();
        for e in &d.examples {
            b.push_example(&d, e, &mut out);
        }
        assert_eq!(out.len(), 6);
        assert_eq!(b.paragraphs_tokenized(), 3);
        let stats = b.encoder_stats();
        // 6 + 3 + 2 context words, 9 distinct segments ("The" and "the", "mat." and
        // "mat" differ).
        assert_eq!((stats.segments, stats.segments_tokenized), (11, 9));
        // Basic tokens: the new segments give the cat sat on the mat . / cats sat . /
        // mat (11), the questions "who sat ?" (6 × 3): 29 asked for, 9 distinct
        // (the cat sat on mat . cats who ?).
        assert_eq!((stats.words, stats.words_tokenized), (29, 9));
        // The same ids as tokenizing each word alone, without any cache.
        let again: Vec<u32> = d.paragraphs[1]
            .doc_tokens
            .iter()
            .flat_map(|w| tok.tokenize(w))
            .collect();
        assert_eq!(out[3].input_ids[5..out[3].input_ids.len() - 1], again[..]);
    }

    #[test]
    fn window_edge_cases() {
        assert!(doc_spans(0, 100, 10).is_empty());
        assert_eq!(doc_spans(5, 100, 10), [(0, 5)]);
        assert_eq!(doc_spans(10, 10, 3), [(0, 10)]);
        assert_eq!(doc_spans(11, 10, 3), [(0, 10), (3, 8)]);
        // A stride above the window length steps by the length (no gap).
        assert_eq!(doc_spans(7, 3, 5), [(0, 3), (3, 3), (6, 1)]);
    }

    #[test]
    fn config_validation() {
        assert!(FeatureConfig::default().validate().is_ok());
        let bad = |max_seq_length, doc_stride, max_query_length| {
            FeatureConfig {
                max_seq_length,
                doc_stride,
                max_query_length,
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        assert!(bad(384, 0, 64).contains("`doc_stride`"));
        assert!(bad(67, 128, 64).contains("`max_seq_length` 67"));
        assert!(FeatureConfig {
            max_seq_length: 68,
            doc_stride: 1,
            max_query_length: 64
        }
        .validate()
        .is_ok());
    }
}
