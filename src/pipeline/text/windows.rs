//! A logits-contract answer (windows of logits and each token's characters in the
//! context) turned into the features and logits the decoder reads, so that a question
//! tokenized on the server is decoded by the same rules, to the same bytes, as one
//! tokenized here (docs/servers.md, "The logits contract").
//!
//! Contract:
//! - A window's doc pieces are its positions whose offsets are not `[-1, -1]`; they are
//!   consecutive, after `[CLS]`, the question and `[SEP]` (so `query_len` is the first
//!   doc position − 2). Anything else is an error naming the offsets output.
//! - A doc piece is named by its first character: the paragraph's pieces are the
//!   distinct first characters of every window's pieces, in order, and each window
//!   must hold a run of them (its span, for the max-context rule).
//! - A piece's word is the paragraph word holding its first character; its vocabulary
//!   entry is rebuilt from its characters as the basic tokenizer sees them (control
//!   characters dropped, lower-cased and accents stripped when the vocabulary is
//!   uncased), `##` in front when it continues a word; an entry the vocabulary lacks is
//!   `[UNK]` (a word WordPiece could not split is one `[UNK]` piece over the whole
//!   word). Question pieces are not read by decoding and are written as `[PAD]`.

use crate::backend::text::ServerWindows;
use crate::error::{Error, Result};
use crate::features::max_context_flags;
use crate::tokenize::{
    is_cjk, is_clean_whitespace, is_control, is_punctuation, is_python_whitespace,
    lower_strip_accents, BertTokenizer,
};
use crate::types::{Feature, Logits, Paragraph, TokenText};

/// `[PAD]`'s id in BERT vocabularies.
const PAD: u32 = 0;

/// What a question's windows are checked against and named by.
pub(crate) struct Question<'a> {
    pub paragraph: &'a Paragraph,
    pub example_index: usize,
    /// The unique id of the question's first window; the others follow.
    pub first_unique_id: u64,
    /// The model and its offsets output, for errors.
    pub model: &'a str,
    pub offsets_output: &'a str,
}

/// The features and logits of one question's windows, in window order.
pub(crate) fn features(
    q: &Question<'_>,
    w: &ServerWindows,
    tok: &BertTokenizer,
) -> Result<(Vec<Feature>, Vec<Logits>)> {
    let chars: Vec<char> = q.paragraph.context.chars().collect();
    let bad = |what: String| Error::TensorMismatch {
        model: q.model.to_string(),
        tensor: q.offsets_output.to_string(),
        expected: "each window's context tokens in one run, after [CLS], the question and \
                   [SEP], within the context"
            .into(),
        actual: what,
    };
    // Each window's first doc position and its pieces' [start, end) characters.
    let mut layouts: Vec<(usize, &[[i64; 2]])> = Vec::with_capacity(w.windows);
    for k in 0..w.windows {
        let offsets = &w.offsets[k * w.seq..(k + 1) * w.seq];
        let inside = |o: &[i64; 2]| *o != [-1, -1];
        let Some(first) = offsets.iter().position(inside) else {
            return Err(bad(format!("window {k} holds no context token")));
        };
        let len = offsets[first..].iter().take_while(|o| inside(o)).count();
        let pieces = &offsets[first..first + len];
        if first < 2 || offsets[first + len..].iter().any(inside) {
            return Err(bad(format!(
                "window {k}'s context tokens are not one run after position 1"
            )));
        }
        if let Some(o) = pieces
            .iter()
            .find(|o| !(0 <= o[0] && o[0] < o[1] && o[1] as usize <= chars.len()))
        {
            return Err(bad(format!(
                "window {k} has a token at characters {o:?} of a {}-character context",
                chars.len()
            )));
        }
        layouts.push((first, pieces));
    }
    let mut starts: Vec<i64> = layouts
        .iter()
        .flat_map(|(_, p)| p.iter().map(|o| o[0]))
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let mut spans = Vec::with_capacity(w.windows);
    for (k, (_, pieces)) in layouts.iter().enumerate() {
        let from = starts
            .binary_search(&pieces[0][0])
            .expect("collected above");
        let run = pieces
            .iter()
            .enumerate()
            .all(|(j, o)| starts.get(from + j) == Some(&o[0]));
        if !run {
            return Err(bad(format!(
                "window {k}'s tokens are not consecutive tokens of the context"
            )));
        }
        spans.push((from, pieces.len()));
    }
    let word_of = q.paragraph.char_to_word_offset();
    let mut entry = Entry::default();
    let mut features = Vec::with_capacity(w.windows);
    let mut logits = Vec::with_capacity(w.windows);
    for (k, (first, pieces)) in layouts.iter().enumerate() {
        let query_len = first - 2;
        let mut input_ids = Vec::with_capacity(query_len + pieces.len() + 3);
        input_ids.push(tok.cls_id());
        input_ids.extend(std::iter::repeat_n(PAD, query_len));
        input_ids.push(tok.sep_id());
        input_ids.extend(pieces.iter().map(|o| entry.id(&chars, o, tok)));
        input_ids.push(tok.sep_id());
        let unique_id = q.first_unique_id + k as u64;
        features.push(Feature {
            unique_id,
            example_index: q.example_index,
            doc_span_index: k,
            input_ids,
            query_len,
            token_to_orig: pieces
                .iter()
                .map(|o| word_of[o[0] as usize].max(0) as u32)
                .collect(),
            token_is_max_context: max_context_flags(&spans, k),
            template: None,
        });
        logits.push(Logits {
            unique_id,
            start: w.start[k * w.seq..(k + 1) * w.seq].to_vec(),
            end: w.end[k * w.seq..(k + 1) * w.seq].to_vec(),
        });
    }
    Ok((features, logits))
}

/// Rebuilds pieces' vocabulary entries, reusing its buffers.
#[derive(Default)]
struct Entry {
    raw: String,
    chars: Vec<char>,
    folded: String,
    text: String,
}

impl Entry {
    /// The id of the piece at characters `o` of `chars` (see the module's contract).
    fn id(&mut self, chars: &[char], o: &[i64; 2], tok: &BertTokenizer) -> u32 {
        let (start, end) = (o[0] as usize, o[1] as usize);
        self.raw.clear();
        self.raw
            .extend(chars[start..end].iter().filter(|&&c| !dropped(c)));
        self.text.clear();
        if continues_word(chars, start) {
            self.text.push_str("##");
        }
        if tok.lower_case() {
            lower_strip_accents(&self.raw, &mut self.chars, &mut self.folded);
            self.text.push_str(&self.folded);
        } else {
            self.text.push_str(&self.raw);
        }
        tok.token_to_id(&self.text).unwrap_or(tok.unk_id())
    }
}

/// Characters the basic tokenizer's clean step drops.
fn dropped(c: char) -> bool {
    c == '\0' || c == '\u{fffd}' || is_control(c)
}

/// A character that belongs to a word with its neighbours (not a separator, not a
/// character the basic tokenizer splits off on its own).
fn joins(c: char) -> bool {
    !(is_clean_whitespace(c) || is_python_whitespace(c) || is_punctuation(c) || is_cjk(c))
}

/// Whether the piece starting at character `start` continues the word before it: it
/// and the last kept character before it both join (dropped characters skipped).
fn continues_word(chars: &[char], start: usize) -> bool {
    joins(chars[start])
        && chars[..start]
            .iter()
            .rev()
            .find(|&&c| !dropped(c))
            .is_some_and(|&c| joins(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::BertTokenizer;
    use crate::types::Words;

    fn tokenizer() -> BertTokenizer {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\ncat\nsat\n##s\n.\nu\nnaive\n";
        BertTokenizer::from_vocab_text(vocab, true, std::path::Path::new("vocab.txt")).unwrap()
    }

    fn paragraph(context: &str) -> Paragraph {
        Paragraph {
            context: context.into(),
            doc_tokens: context.split(' ').collect::<Words>(),
        }
    }

    fn windows(seq: usize, rows: &[Vec<[i64; 2]>]) -> ServerWindows {
        let mut offsets = Vec::new();
        for r in rows {
            offsets.extend(r.iter().copied());
            offsets.extend(std::iter::repeat_n([-1, -1], seq - r.len()));
        }
        let n = rows.len() * seq;
        ServerWindows {
            windows: rows.len(),
            seq,
            start: (0..n).map(|i| i as f32).collect(),
            end: vec![0.0; n],
            offsets,
        }
    }

    const NONE: [i64; 2] = [-1, -1];

    #[test]
    fn pieces_words_and_max_context_are_rebuilt_from_offsets() {
        // "The cats sat. Naïve ☃": the · cat ##s · sat · . · naive · [UNK]
        let p = paragraph("The cats sat. Na\u{ef}ve \u{2603}");
        let tok = tokenizer();
        let q = Question {
            paragraph: &p,
            example_index: 3,
            first_unique_id: 7,
            model: "m",
            offsets_output: "offsets",
        };
        let all = [
            [0, 3],
            [4, 7],
            [7, 8],
            [9, 12],
            [12, 13],
            [14, 19],
            [20, 21],
        ];
        // Two windows over pieces 0..5 and 3..7 after [CLS] q q [SEP].
        let head = vec![NONE, NONE, NONE, NONE];
        let w0 = [head.clone(), all[..5].to_vec(), vec![NONE]].concat();
        let w1 = [head, all[3..].to_vec(), vec![NONE]].concat();
        let w = windows(12, &[w0, w1]);
        let (features, logits) = features(&q, &w, &tok).unwrap();
        assert_eq!(features.len(), 2);
        let id = |t: &str| tok.token_to_id(t).unwrap();
        let f0 = &features[0];
        assert_eq!(f0.query_len, 2);
        assert_eq!(
            f0.input_ids,
            [
                id("[CLS]"),
                0,
                0,
                id("[SEP]"),
                id("the"),
                id("cat"),
                id("##s"),
                id("sat"),
                id("."),
                id("[SEP]")
            ]
        );
        assert_eq!(f0.token_to_orig, [0, 1, 1, 2, 2]);
        let f1 = &features[1];
        assert_eq!(f1.unique_id, 8);
        assert_eq!(
            f1.input_ids[4..8],
            [id("sat"), id("."), id("naive"), id("[UNK]")]
        );
        assert_eq!(f1.token_to_orig, [2, 2, 3, 4]);
        // Pieces 3 and 4 are in both windows: each is best where it is more central.
        assert_eq!(f0.token_is_max_context, [true, true, true, true, false]);
        assert_eq!(f1.token_is_max_context, [false, true, true, true]);
        assert_eq!(logits[1].unique_id, 8);
        assert_eq!(logits[1].start[0], 12.0);
        assert_eq!(f1.example_index, 3);
    }

    #[test]
    fn offsets_that_are_not_a_run_of_context_tokens_are_named() {
        let p = paragraph("the cat");
        let tok = tokenizer();
        let q = Question {
            paragraph: &p,
            example_index: 0,
            first_unique_id: 0,
            model: "m",
            offsets_output: "offsets",
        };
        for (rows, says) in [
            (vec![vec![NONE, NONE]], "holds no context token"),
            (vec![vec![[0, 3]]], "not one run after position 1"),
            (vec![vec![NONE, NONE, [0, 3], NONE, [4, 7]]], "not one run"),
            (
                vec![vec![NONE, NONE, [4, 9]]],
                "characters [4, 9] of a 7-character",
            ),
            (
                vec![
                    vec![NONE, NONE, [0, 3], [4, 7]],
                    vec![NONE, NONE, [4, 7], [0, 3]],
                ],
                "not consecutive",
            ),
        ] {
            let e = features(&q, &windows(6, &rows), &tok)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says) && e.contains("offsets"), "{e}");
        }
    }
}
