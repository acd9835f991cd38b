//! The pipeline's own data types, shared by every stage.
//!
//! Data flows one way: `squad` reads a [`Dataset`] of [`Paragraph`]s and [`Example`]s,
//! `features` cuts examples into [`Feature`] windows, `backend` turns batches of features
//! into [`Logits`], `decode` turns logits into predictions and `evaluate` scores them.
//! Only `backend` knows about protobuf or tokio.
//!
//! Features keep their token ids **unpadded**: segment ids and the attention mask follow
//! from the layout of algorithm §4.4 (`[CLS] q [SEP] doc [SEP]`), and padding is added by
//! whoever needs a fixed length (the wire encoder pads to the batch's sequence length).

/// One gold answer as written in the SQuAD file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    /// Code-point offset into the paragraph's context.
    pub answer_start: usize,
}

/// A SQuAD paragraph, split into whitespace words once (algorithm §2.1) and shared by all of
/// its questions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paragraph {
    pub context: String,
    /// Whitespace-separated words of the context, characters kept exactly.
    pub doc_tokens: Words,
}

/// A paragraph's words (algorithm §2.1): their text one after another in one buffer, each
/// followed by one space, and where each ends. One allocation per paragraph rather than
/// one per word (SQuAD dev has a quarter of a million words), a paragraph's words lie
/// together in memory, and `" ".join` of a run of words is one slice of the buffer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Words {
    text: String,
    ends: Vec<usize>,
    /// Where each word starts in its context, in code points.
    char_starts: Vec<usize>,
}

impl Words {
    /// Room for `words` words of `bytes` bytes in all.
    pub fn with_capacity(words: usize, bytes: usize) -> Self {
        Words {
            text: String::with_capacity(bytes + words),
            ends: Vec::with_capacity(words),
            char_starts: Vec::with_capacity(words),
        }
    }

    /// Appends a word that follows the previous one after one space in its context.
    pub fn push(&mut self, word: &str) {
        let start = match self.ends.len() {
            0 => 0,
            n => self.char_starts[n - 1] + self[n - 1].chars().count() + 1,
        };
        self.push_at(word, start);
    }

    /// Appends a word that starts at code point `char_start` of its context.
    pub(crate) fn push_at(&mut self, word: &str, char_start: usize) {
        self.text.push_str(word);
        self.ends.push(self.text.len());
        self.text.push(' ');
        self.char_starts.push(char_start);
    }

    /// The word code point `c` of the context belongs to, as
    /// [`Paragraph::char_to_word_offset`] has it (whitespace belongs to the word before
    /// it), without the whole table: `None` before the first word.
    pub(crate) fn word_at_char(&self, c: usize) -> Option<usize> {
        self.char_starts.partition_point(|&s| s <= c).checked_sub(1)
    }

    /// Where word `i` (which exists) starts: after the previous word's space.
    fn start(&self, i: usize) -> usize {
        match i {
            0 => 0,
            _ => self.ends[i - 1] + 1,
        }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Word `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        Some(&self.text[self.start(i)..end])
    }

    /// The words in order.
    pub fn iter(&self) -> WordsIter<'_> {
        self.range(0..self.len())
    }

    /// The words of `range` in order (panics past the end, as slicing does).
    pub fn range(&self, range: impl std::ops::RangeBounds<usize>) -> WordsIter<'_> {
        let start = match range.start_bound() {
            std::ops::Bound::Included(&s) => s,
            std::ops::Bound::Excluded(&s) => s + 1,
            std::ops::Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            std::ops::Bound::Included(&e) => e + 1,
            std::ops::Bound::Excluded(&e) => e,
            std::ops::Bound::Unbounded => self.len(),
        };
        assert!(
            start <= end && end <= self.len(),
            "words {start}..{end} of {}",
            self.len()
        );
        WordsIter {
            text: &self.text,
            from: if start == end { 0 } else { self.start(start) },
            ends: self.ends[start..end].iter(),
        }
    }

    /// Words `first..=last` joined by single spaces (`" ".join(words[first:last + 1])`):
    /// one copy, since the buffer holds them so.
    ///
    /// # Panics
    /// When `last` is past the end (as slicing does); `first > last` gives `""`.
    pub fn join(&self, first: usize, last: usize) -> String {
        self.joined(first, last).to_string()
    }

    /// [`join`](Self::join) without the copy: the run as it lies in the buffer.
    pub fn joined(&self, first: usize, last: usize) -> &str {
        let end = self.ends[last];
        self.text.get(self.start(first)..end).unwrap_or_default()
    }
}

/// [`Words::iter`] and [`Words::range`].
#[derive(Debug, Clone)]
pub struct WordsIter<'a> {
    text: &'a str,
    from: usize,
    ends: std::slice::Iter<'a, usize>,
}

impl<'a> Iterator for WordsIter<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let end = *self.ends.next()?;
        let word = &self.text[self.from..end];
        self.from = end + 1;
        Some(word)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ends.size_hint()
    }
}

impl ExactSizeIterator for WordsIter<'_> {}

impl std::ops::Index<usize> for Words {
    type Output = str;

    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(w) => w,
            None => panic!("word {i} of {}", self.len()),
        }
    }
}

impl<S: AsRef<str>> FromIterator<S> for Words {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut words = Words::default();
        for w in iter {
            words.push(w.as_ref());
        }
        words
    }
}

impl Paragraph {
    /// One entry per context code point: the word it belongs to (−1 for leading
    /// whitespace; whitespace maps to the word before it). Computed on each call.
    pub fn char_to_word_offset(&self) -> Vec<i32> {
        let mut offsets = Vec::with_capacity(self.context.len());
        let mut words: i32 = 0;
        let mut in_word = false;
        for c in self.context.chars() {
            if is_reader_whitespace(c) {
                in_word = false;
            } else if !in_word {
                in_word = true;
                words += 1;
            }
            offsets.push(words - 1);
        }
        offsets
    }
}

/// The reader's whitespace (§2.1.1), the only separator of a [`Paragraph`]'s words.
pub fn is_reader_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n' | '\u{202F}')
}

/// One SQuAD question (a `qa` entry), in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Position in the file's question order (0-based); defines output order.
    pub example_index: usize,
    pub qas_id: String,
    pub question_text: String,
    /// Index into [`Dataset::paragraphs`].
    pub paragraph_index: usize,
    /// Gold answers (empty for an impossible v2 question).
    pub answers: Vec<Answer>,
    /// v2 `is_impossible` as written in the file (false when absent).
    pub is_impossible: bool,
}

/// A whole SQuAD file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dataset {
    /// The file's `version` string (`"1.1"`, `"v2.0"`, ...), empty when absent.
    pub version: String,
    /// The contexts, in file order; a question names its own by `paragraph_index`.
    pub paragraphs: Vec<Paragraph>,
    /// The questions, in file order (each one's `example_index` is its position here).
    pub examples: Vec<Example>,
}

impl Dataset {
    /// True when the SQuAD 2.0 rules apply: the version starts with `v2` / `2`, or any
    /// question is marked impossible (`--version-2-with-negative` auto).
    pub fn looks_like_v2(&self) -> bool {
        let v = self.version.trim_start_matches('v');
        v.starts_with('2') || self.examples.iter().any(|e| e.is_impossible)
    }

    /// The paragraph a question belongs to.
    pub fn paragraph_of(&self, example: &Example) -> &Paragraph {
        &self.paragraphs[example.paragraph_index]
    }
}

/// One window sent to the model (NVIDIA's logs call it a "sentence"), algorithm §4.4–§4.7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// Global counter over all features, from 1000000000 (§4.7).
    pub unique_id: u64,
    pub example_index: usize,
    /// Window index `k` within the example.
    pub doc_span_index: usize,
    /// Unpadded token ids: `[CLS] q [SEP] doc [SEP]`, length `len(q) + L + 3`.
    pub input_ids: Vec<u32>,
    /// `len(q)`: question pieces after truncation to `max_query_length`.
    pub query_len: usize,
    /// Word index (into the paragraph's `doc_tokens`) of each doc piece; position
    /// `query_len + 2 + j` of the feature holds doc piece `j`.
    pub token_to_orig: Vec<u32>,
    /// `token_is_max_context` for each doc piece, same indexing as `token_to_orig`.
    pub token_is_max_context: Vec<bool>,
    /// A window laid out by a tokenizer's own pair template (run_qa's rules); `None`
    /// for BERT's layout above.
    pub template: Option<Box<Template>>,
}

/// A window cut by run_qa's rules: the tokenizer's pair template around the question's
/// tokens and a run of the context's (docs/algorithm.md, "run_qa's rules"). The
/// feature's `token_to_orig` then holds the word of each context token's first
/// character, and every `token_is_max_context` is true (run_qa has no such rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// Position of the first question token.
    pub question_offset: usize,
    /// Position of the first context token.
    pub doc_offset: usize,
    /// Token type id 1 from this position to the end of the real tokens (the feature's
    /// length when every type id is 0).
    pub type_one_from: usize,
    /// The id padding positions get.
    pub pad_id: u32,
    /// Each context token's character span `[start, end)` in the paragraph's context.
    pub offsets: Vec<(u32, u32)>,
}

impl Feature {
    /// A feature laid out as §4.4 from question and doc piece ids (`[CLS] q [SEP] doc
    /// [SEP]`), each doc piece its own word and in its max context: for tests and
    /// benchmarks that need features without a tokenizer.
    pub fn from_pieces(unique_id: u64, example_index: usize, q: &[u32], doc: &[u32]) -> Feature {
        let mut input_ids = Vec::with_capacity(q.len() + doc.len() + 3);
        input_ids.push(101);
        input_ids.extend_from_slice(q);
        input_ids.push(102);
        input_ids.extend_from_slice(doc);
        input_ids.push(102);
        Feature {
            unique_id,
            example_index,
            doc_span_index: 0,
            input_ids,
            query_len: q.len(),
            token_to_orig: (0..doc.len() as u32).collect(),
            token_is_max_context: vec![true; doc.len()],
            template: None,
        }
    }

    /// Number of real (unpadded) tokens; the attention mask is 1 exactly below it.
    pub fn len(&self) -> usize {
        self.input_ids.len()
    }

    /// True when the feature holds no tokens (never the case for built features).
    pub fn is_empty(&self) -> bool {
        self.input_ids.is_empty()
    }

    /// Position of the first doc piece in the feature.
    pub fn doc_offset(&self) -> usize {
        match &self.template {
            Some(t) => t.doc_offset,
            None => self.query_len + 2,
        }
    }

    /// The id of padding positions (0 in BERT's layout).
    pub fn pad_id(&self) -> u32 {
        self.template.as_ref().map_or(0, |t| t.pad_id)
    }

    /// Where token type id 1 starts (the doc pieces in BERT's layout).
    pub fn type_one_from(&self) -> usize {
        match &self.template {
            Some(t) => t.type_one_from,
            None => self.doc_offset(),
        }
    }

    /// Number of doc pieces `L` in this window.
    pub fn doc_len(&self) -> usize {
        self.token_to_orig.len()
    }

    /// Segment id of a position (§4.4): 0 for `[CLS] q [SEP]` and for padding, 1 for the
    /// doc pieces and the final `[SEP]`; under run_qa's rules, the template's type ids.
    pub fn segment_id(&self, position: usize) -> u32 {
        u32::from(position >= self.type_one_from() && position < self.len())
    }

    /// Attention mask of a position: 1 for real tokens, 0 for padding.
    pub fn input_mask(&self, position: usize) -> u32 {
        u32::from(position < self.len())
    }

    /// The word index for a feature position, when it is a doc piece (§4.5).
    pub fn orig_word(&self, position: usize) -> Option<usize> {
        let j = position.checked_sub(self.doc_offset())?;
        self.token_to_orig.get(j).map(|&w| w as usize)
    }

    /// `token_is_max_context` for a feature position; false outside the doc part.
    pub fn is_max_context(&self, position: usize) -> bool {
        position
            .checked_sub(self.doc_offset())
            .and_then(|j| self.token_is_max_context.get(j).copied())
            .unwrap_or(false)
    }
}

/// The model's answer for one feature: start and end logits, one per position of the
/// padded sequence the model saw (at least `feature.len()` entries).
#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    pub unique_id: u64,
    pub start: Vec<f32>,
    pub end: Vec<f32>,
}

/// What span decoding needs from the tokenizer: the text of a token id (for the
/// feature's `tokens`, algorithm §4.4) and the basic tokenizer with the configured casing
/// (for `get_final_text`, algorithm §6.7). Implemented by [`crate::tokenize`]'s tokenizer;
/// tests may implement it with a fixed table.
pub trait TokenText {
    /// The vocabulary entry of `id` (e.g. `"##ing"`, `"[CLS]"`).
    fn id_to_token(&self, id: u32) -> &str;
    /// Whether the tokenizer lower-cases (and strips accents).
    fn lower_case(&self) -> bool;
    /// The BERT basic tokenizer (§3.3) with this tokenizer's casing: cleaned,
    /// optionally lower-cased and accent-stripped, split on whitespace and punctuation.
    fn basic_tokenize(&self, text: &str) -> Vec<String>;
}

#[cfg(test)]
mod words_tests {
    use super::Words;

    #[test]
    fn words_are_kept_apart_and_joined_as_python_joins_them() {
        let list = ["Steve", "", "Smith's", "dog.", "\u{e9}t\u{e9}"];
        let words: Words = list.iter().collect();
        assert_eq!(words.len(), 5);
        assert!(!words.is_empty() && Words::default().is_empty());
        assert_eq!(words.iter().collect::<Vec<_>>(), list);
        assert_eq!(words.iter().len(), 5);
        for (i, w) in list.iter().enumerate() {
            assert_eq!(&words[i], *w);
            assert_eq!(words.get(i), Some(*w));
        }
        assert_eq!(words.get(5), None);
        // As if joined by single spaces: "Steve  Smith's dog. été", the empty word
        // starting at the second space.
        let word_at: Vec<_> = (0..24).map(|c| words.word_at_char(c)).collect();
        let mut want = vec![Some(0); 6];
        want.push(Some(1));
        want.extend([Some(2); 8].iter().chain(&[Some(3); 5]).chain(&[Some(4); 4]));
        assert_eq!(word_at, want);
        assert_eq!(words.range(2..=3).collect::<Vec<_>>(), ["Smith's", "dog."]);
        assert_eq!(words.range(..1).collect::<Vec<_>>(), ["Steve"]);
        assert_eq!(words.range(5..).count(), 0);
        for first in 0..list.len() {
            for last in first..list.len() {
                assert_eq!(words.join(first, last), list[first..=last].join(" "));
                assert_eq!(words.joined(first, last), list[first..=last].join(" "));
            }
        }
    }

    #[test]
    #[should_panic(expected = "words 4..6 of 5")]
    fn a_range_past_the_end_panics() {
        let words: Words = ["a", "b", "c", "d", "e"].iter().collect();
        let _ = words.range(4..=5);
    }
}
