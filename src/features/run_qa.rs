//! run_qa's windows (docs/algorithm.md, "run_qa's rules"), as transformers' fast
//! tokenizer cuts a (question, context) pair with `truncation="only_second"`,
//! `max_length`, `stride` and overflowing tokens:
//! - the question is left-stripped (Python's whitespace) and kept whole; the context is
//!   encoded once per paragraph (the two sequences of a pair are encoded apart, so this
//!   is the pair's context encoding);
//! - when question, context and the template's special tokens fit in `max_length`,
//!   there is one window; otherwise each window holds `room = max_length - added - q`
//!   context tokens, starting at 0 and stepping `room - stride` (so that consecutive
//!   windows share `stride` tokens), until one reaches the context's end;
//! - a window is the tokenizer's pair template around the question and its run of
//!   context tokens, with each context token's character offsets.
//!
//! Where the tokenizers library fails (room ≤ 0) or panics (stride ≥ room), run_qa has
//! no rule: such a question is an error naming it, found before any window is built.

use crate::error::{Error, Result};
use crate::tokenize::{is_python_whitespace, PretrainedTokenizer};
use crate::types::{Dataset, Example, Feature, Template};

use super::{first_answer_chars, FeatureConfig, Placement, Windows};

/// A paragraph's context tokens.
#[derive(Debug, Default)]
struct Context {
    ids: Vec<u32>,
    offsets: Vec<(u32, u32)>,
    /// The word (of the paragraph's `doc_tokens`) of each token's first character.
    words: Vec<u32>,
}

/// run_qa's window builder: the questions' tokens (all tokenized up front, where a
/// question that cannot be cut is found) and the last paragraph's context tokens.
#[derive(Debug)]
pub(super) struct RunQaWindows<'t> {
    tokenizer: &'t PretrainedTokenizer,
    max_length: usize,
    stride: usize,
    questions: Vec<Vec<u32>>,
    paragraph: Option<(usize, Context)>,
    paragraphs_tokenized: usize,
}

impl<'t> RunQaWindows<'t> {
    pub(super) fn new(
        tokenizer: &'t PretrainedTokenizer,
        config: &FeatureConfig,
        dataset: &Dataset,
    ) -> Result<Self> {
        let max_length = tokenizer
            .model_max_length()
            .map_or(config.max_seq_length, |m| m.min(config.max_seq_length));
        let added = tokenizer.layout().added();
        if max_length <= added {
            return Err(Error::Config(format!(
                "`max_seq_length` {max_length} leaves no room for the question and the \
                 context beside the tokenizer's {added} special tokens"
            )));
        }
        let stride = config.doc_stride;
        let mut questions = Vec::with_capacity(dataset.examples.len());
        for example in &dataset.examples {
            let q = tokenizer.encode_ids(question_text(example))?;
            let room = max_length as i64 - added as i64 - q.len() as i64;
            if room <= stride as i64 {
                // Only a context that must be cut fails: measure this one.
                let context = &dataset.paragraph_of(example).context;
                let c = tokenizer.encode_ids(context)?.len();
                if q.len() + c + added > max_length {
                    return Err(Error::Config(format!(
                        "question {:?} has {} tokens: with the tokenizer's {added} special \
                         tokens it leaves {} of the {max_length} tokens of a window for its \
                         context, which needs more than the {stride} tokens windows \
                         overlap by (`doc_stride`); run_qa has no rule for such a question: \
                         shorten it, raise `max_seq_length` or lower `doc_stride`",
                        example.qas_id,
                        q.len(),
                        room.max(0),
                    )));
                }
            }
            questions.push(q);
        }
        Ok(RunQaWindows {
            tokenizer,
            max_length,
            stride,
            questions,
            paragraph: None,
            paragraphs_tokenized: 0,
        })
    }

    /// The `[start, end)` runs of context tokens of the windows of a question of `q`
    /// tokens about a context of `c`.
    fn spans(&self, q: usize, c: usize) -> Vec<(usize, usize)> {
        let added = self.tokenizer.layout().added();
        let room = self.max_length - added - q.min(self.max_length - added);
        window_spans(c, room, self.stride, q + c + added <= self.max_length)
    }

    /// The context tokens of `example`'s paragraph (the last one's kept).
    fn context(&mut self, dataset: &Dataset, example: &Example) -> &Context {
        if self.paragraph.as_ref().map(|(i, _)| *i) != Some(example.paragraph_index) {
            let paragraph = dataset.paragraph_of(example);
            // A context the tokenizer cannot encode (a WordLevel model without an
            // unknown token meeting an unknown word) gives its questions no windows:
            // they are reported as questions without features, as an empty context's.
            let context = match self.tokenizer.encode(&paragraph.context) {
                Ok(e) => {
                    let word_of = paragraph.char_to_word_offset();
                    let last_word = word_of.last().copied().unwrap_or(0).max(0) as u32;
                    let offsets = e.offsets;
                    let words = offsets
                        .iter()
                        .map(|&(s, _)| {
                            word_of
                                .get(s as usize)
                                .map_or(last_word, |&w| w.max(0) as u32)
                        })
                        .collect();
                    Context {
                        ids: e.ids,
                        offsets,
                        words,
                    }
                }
                Err(_) => Context::default(),
            };
            self.paragraph = Some((example.paragraph_index, context));
            self.paragraphs_tokenized += 1;
        }
        &self.paragraph.as_ref().expect("set above").1
    }
}

impl Windows for RunQaWindows<'_> {
    fn paragraphs_tokenized(&self) -> usize {
        self.paragraphs_tokenized
    }

    fn placement(&mut self, _dataset: &Dataset, example: &Example) -> Placement {
        let Some((_, context)) = self
            .paragraph
            .as_ref()
            .filter(|(i, _)| *i == example.paragraph_index)
        else {
            return Placement::default();
        };
        let q = self.questions[example.example_index].len();
        let spans: Vec<(usize, usize)> = self
            .spans(q, context.ids.len())
            .into_iter()
            .map(|(start, end)| (start, end - start))
            .collect();
        // The tokens whose characters the answer's first and last fall in, by offsets.
        let answer = first_answer_chars(example).map(|(first, last)| {
            let offsets = &context.offsets;
            let start = offsets.partition_point(|&(_, end)| end as usize <= first);
            let end = offsets.partition_point(|&(start, _)| start as usize <= last);
            (end > start).then(|| (start, end - 1))
        });
        Placement::of(&spans, answer)
    }

    fn push_example(
        &mut self,
        _config: &FeatureConfig,
        next_unique_id: &mut u64,
        dataset: &Dataset,
        example: &Example,
        out: &mut Vec<Feature>,
    ) {
        let tokenizer = self.tokenizer;
        let layout = tokenizer.layout();
        let pad_id = tokenizer.pad_id();
        let q = std::mem::take(&mut self.questions[example.example_index]);
        let c = self.context(dataset, example).ids.len();
        let spans = self.spans(q.len(), c);
        let context = &self.paragraph.as_ref().expect("set by context()").1;
        let doc_offset = layout.context_start(q.len());
        for (k, (start, end)) in spans.into_iter().enumerate() {
            let n = end - start;
            let mut input_ids = Vec::with_capacity(layout.added() + q.len() + n);
            input_ids.extend_from_slice(&layout.prefix);
            input_ids.extend_from_slice(&q);
            input_ids.extend_from_slice(&layout.middle);
            input_ids.extend_from_slice(&context.ids[start..end]);
            input_ids.extend_from_slice(&layout.suffix);
            out.push(Feature {
                unique_id: *next_unique_id,
                example_index: example.example_index,
                doc_span_index: k,
                input_ids,
                query_len: q.len(),
                token_to_orig: context.words[start..end].to_vec(),
                token_is_max_context: vec![true; n],
                template: Some(Box::new(Template {
                    question_offset: layout.prefix.len(),
                    doc_offset,
                    type_one_from: layout.type_one_from(q.len(), n),
                    pad_id,
                    offsets: context.offsets[start..end].to_vec(),
                })),
            });
            *next_unique_id += 1;
        }
        self.questions[example.example_index] = q;
    }
}

/// The question as run_qa sends it: left-stripped of Python's whitespace.
fn question_text(example: &Example) -> &str {
    example
        .question_text
        .trim_start_matches(is_python_whitespace)
}

/// The `[start, end)` runs of `c` context tokens the windows hold: the whole context when
/// it `fits`, else runs of `room` tokens stepping `room - stride` until one reaches the
/// end (the tokenizers library's overflow with a stride).
fn window_spans(c: usize, room: usize, stride: usize, fits: bool) -> Vec<(usize, usize)> {
    if fits || c <= room {
        return vec![(0, c)];
    }
    let step = room.saturating_sub(stride).max(1);
    let mut spans = Vec::with_capacity(c.div_ceil(step));
    let mut start = 0;
    loop {
        let end = (start + room).min(c);
        spans.push((start, end));
        if end == c {
            return spans;
        }
        start += step;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_overlap_by_the_stride() {
        // 10 tokens, room 4, overlap 1: starts 0, 3, 6.
        assert_eq!(window_spans(10, 4, 1, false), [(0, 4), (3, 7), (6, 10)]);
        // A context that fits is one window, even when empty.
        assert_eq!(window_spans(3, 4, 1, false), [(0, 3)]);
        assert_eq!(window_spans(0, 4, 1, true), [(0, 0)]);
        // run_squad's 384/128 against run_qa's: 600 tokens, room 371, overlap 128.
        assert_eq!(window_spans(600, 371, 128, false), [(0, 371), (243, 600)]);
    }
}
