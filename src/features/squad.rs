//! run_squad's windows (algorithm §4): BERT's WordPiece pieces of the question, cut to
//! `max_query_length`, and of the paragraph's words, tokenized once per paragraph;
//! windows of `[CLS] q [SEP] doc [SEP]` every `doc_stride` pieces, with each piece's
//! word and max-context flag.

use super::{
    doc_pieces_into, doc_spans, first_answer_chars, max_context_flags, DocPieces, FeatureConfig,
    Placement, Windows,
};
use crate::tokenize::{BertTokenizer, Encoder, EncoderStats};
use crate::types::{Dataset, Example, Feature};

/// run_squad's windows (§4): the BERT tokenizer's pieces.
#[derive(Debug)]
pub(super) struct SquadWindows<'t> {
    encoder: Encoder<'t>,
    cls_id: u32,
    sep_id: u32,
    /// The pieces of the last paragraph seen (examples of a paragraph are adjacent).
    paragraph: Option<(usize, DocPieces)>,
    paragraphs_tokenized: usize,
    question: Vec<u32>,
    /// The windows of the last example (each one's first context piece and count).
    spans: Vec<(usize, usize)>,
    /// Whether the encoder's caches were sized for the dataset (on the first example).
    reserved: bool,
}

impl<'t> SquadWindows<'t> {
    pub(super) fn new(tokenizer: &'t BertTokenizer) -> Self {
        SquadWindows {
            encoder: tokenizer.encoder(),
            cls_id: tokenizer.cls_id(),
            sep_id: tokenizer.sep_id(),
            paragraph: None,
            paragraphs_tokenized: 0,
            question: Vec::new(),
            spans: Vec::new(),
            reserved: false,
        }
    }

    /// Sizes the encoder's caches for `dataset` once, so that they never grow through
    /// intermediate tables: distinct words are at most the context words (plus a few
    /// per question), and in practice about the vocabulary's size or fewer; distinct
    /// whitespace words about twice that (SQuAD dev: 21,281 and 36,448 against a
    /// 30,522-entry vocabulary).
    fn reserve_for(&mut self, dataset: &Dataset) {
        self.reserved = true;
        let context_words: usize = dataset.paragraphs.iter().map(|p| p.doc_tokens.len()).sum();
        let vocab = self.encoder.tokenizer().vocab_size();
        let words = context_words
            .saturating_add(dataset.examples.len().saturating_mul(16))
            .min(vocab);
        let segments = context_words.min(vocab.saturating_mul(2));
        self.encoder.reserve(words, segments);
    }
}

impl Windows for SquadWindows<'_> {
    fn push_example(
        &mut self,
        config: &FeatureConfig,
        next_unique_id: &mut u64,
        dataset: &Dataset,
        example: &Example,
        out: &mut Vec<Feature>,
    ) {
        if !self.reserved {
            self.reserve_for(dataset);
        }
        self.spans.clear();
        self.question.clear();
        self.encoder
            .encode(&example.question_text, &mut self.question);
        self.question.truncate(config.max_query_length);
        if self.paragraph.as_ref().map(|(i, _)| *i) != Some(example.paragraph_index) {
            let (_, mut pieces) = self.paragraph.take().unwrap_or_default();
            doc_pieces_into(
                &mut self.encoder,
                dataset.paragraph_of(example),
                &mut pieces,
            );
            self.paragraph = Some((example.paragraph_index, pieces));
            self.paragraphs_tokenized += 1;
        }
        let Some((_, doc)) = &self.paragraph else {
            return;
        };
        let q = &self.question;
        // `validate` guarantees max_seq_length > max_query_length + 3 >= len(q) + 3.
        let max_tokens_for_doc = config.max_seq_length - q.len() - 3;
        let spans = doc_spans(doc.ids.len(), max_tokens_for_doc, config.doc_stride);
        for (k, &(start, length)) in spans.iter().enumerate() {
            let mut input_ids = Vec::with_capacity(q.len() + length + 3);
            input_ids.push(self.cls_id);
            input_ids.extend_from_slice(q);
            input_ids.push(self.sep_id);
            input_ids.extend_from_slice(&doc.ids[start..start + length]);
            input_ids.push(self.sep_id);
            let token_is_max_context = max_context_flags(&spans, k);
            out.push(Feature {
                unique_id: *next_unique_id,
                example_index: example.example_index,
                doc_span_index: k,
                input_ids,
                query_len: q.len(),
                token_to_orig: doc.tok_to_orig[start..start + length].to_vec(),
                token_is_max_context,
                template: None,
            });
            *next_unique_id += 1;
        }
        self.spans = spans;
    }

    fn placement(&mut self, dataset: &Dataset, example: &Example) -> Placement {
        let answer = first_answer_chars(example);
        let Some((_, doc)) = self
            .paragraph
            .as_ref()
            .filter(|(i, _)| *i == example.paragraph_index)
        else {
            return Placement::default();
        };
        // The answer's words, then their first and last piece (a word may have none).
        let words = &dataset.paragraph_of(example).doc_tokens;
        let answer = answer.map(|(first, last)| {
            let word = |c: usize| words.word_at_char(c).unwrap_or(0) as u32;
            let (w0, w1) = (word(first), word(last));
            let start = doc.tok_to_orig.partition_point(|&w| w < w0);
            let end = doc.tok_to_orig.partition_point(|&w| w <= w1);
            (end > start).then(|| (start, end - 1))
        });
        Placement::of(&self.spans, answer)
    }

    fn paragraphs_tokenized(&self) -> usize {
        self.paragraphs_tokenized
    }

    fn encoder_stats(&self) -> EncoderStats {
        self.encoder.stats()
    }
}
