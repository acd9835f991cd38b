//! One question's answer as a program reads it: the text, where it stands in the
//! context, how sure the model is, and the other candidates. Read from a decoded
//! prediction (a token model's or a logits-contract text model's spans) or from an
//! answer-contract model's own reply.

use serde::Serialize;

use crate::backend::TextAnswer;
use crate::decode::{NbestEntry, Prediction};
use crate::pipeline::RunOutcome;
use crate::types::{Feature, Paragraph};

/// A question's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// The question's id (`ask`: `q1`, `q2`, … in the order asked).
    pub id: String,
    /// The answer (`""`: no answer, SQuAD 2.0 rules).
    pub text: String,
    /// Where the answer starts in the context, in characters (Unicode code points);
    /// `None` when it is not a span of the context (no answer, the reference's
    /// `"empty"` placeholder, or a model that does not say).
    pub start_char: Option<usize>,
    /// Where it ends, exclusive (`[start_char, end_char)`).
    pub end_char: Option<usize>,
    /// The answer's score: its start and end logits summed (an answer-contract model:
    /// its own score, if it gives one).
    pub score: Option<f64>,
    /// The answer's probability among the n-best (softmax of their scores).
    pub probability: Option<f64>,
    /// The model found no answer.
    pub no_answer: bool,
    /// SQuAD 2.0: the null score minus the best span's (a logit difference; above the
    /// threshold, no answer). An answer-contract model: its no-answer output when that
    /// is a score.
    pub null_odds: Option<f64>,
    /// An answer-contract model whose no-answer output is a probability: that.
    pub no_answer_probability: Option<f64>,
    /// The best candidates in order (up to the n-best size), the answer first.
    pub nbest: Vec<Candidate>,
    /// The answer is the reference's `"empty"` placeholder (no span to answer with), not
    /// a span of the context that reads "empty".
    pub placeholder: bool,
}

/// One of a question's best candidates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// Its text, as the final answer would read.
    pub text: String,
    /// Where it stands in the context, in characters, `[start_char, end_char)`; `None`
    /// when it is not a span of it (as [`Answer::start_char`]).
    pub start_char: Option<usize>,
    /// Where it ends, exclusive, in characters; `None` as `start_char`.
    pub end_char: Option<usize>,
    /// Its probability among the n-best.
    pub probability: f64,
    /// The start logit of its span.
    pub start_logit: f64,
    /// The end logit of its span.
    pub end_logit: f64,
}

impl Answer {
    /// The answer of a decoded prediction; the character span found through the window
    /// it came from (`outcome` must have kept its features) in `paragraph`, the
    /// question's context.
    pub(crate) fn from_prediction(
        p: &Prediction,
        paragraph: &Paragraph,
        outcome: &RunOutcome,
    ) -> Answer {
        let best = p.nbest.iter().find(|e| e.text == p.answer);
        let words = WordStarts::of(paragraph);
        let span = best.and_then(|e| entry_span(e, &words, outcome));
        Answer {
            id: p.qas_id.clone(),
            text: p.answer.clone(),
            start_char: span.map(|s| s.0),
            end_char: span.map(|s| s.1),
            score: best.map(|e| e.start_logit + e.end_logit),
            probability: best.map(|e| e.probability),
            no_answer: p.answer.is_empty(),
            null_odds: p.null_odds,
            no_answer_probability: None,
            nbest: p
                .nbest
                .iter()
                .filter(|e| e.span.is_some() || !e.text.is_empty())
                .map(|e| {
                    let span = entry_span(e, &words, outcome);
                    Candidate {
                        text: e.text.clone(),
                        start_char: span.map(|s| s.0),
                        end_char: span.map(|s| s.1),
                        probability: e.probability,
                        start_logit: e.start_logit,
                        end_logit: e.end_logit,
                    }
                })
                .collect(),
            placeholder: !p.answer.is_empty() && best.is_some_and(|e| e.span.is_none()),
        }
    }

    /// An answer-contract model's own answer to question `id` (`probability`: its
    /// no-answer output is a probability, not a score).
    pub fn from_text_answer(id: &str, a: TextAnswer, probability: bool) -> Answer {
        let no_answer = a.no_answer.map(f64::from);
        Answer {
            id: id.to_string(),
            no_answer: a.text.is_empty(),
            start_char: a.start.and_then(|c| usize::try_from(c).ok()),
            end_char: a.end.and_then(|c| usize::try_from(c).ok()),
            score: a.score.map(f64::from),
            probability: None,
            null_odds: no_answer.filter(|_| !probability),
            no_answer_probability: no_answer.filter(|_| probability),
            nbest: Vec::new(),
            placeholder: false,
            text: a.text,
        }
    }
}

/// The character span of n-best entry `e` in the paragraph of `words`, through the
/// window it came from (`None`: not a span of the context, or its window not kept).
fn entry_span(e: &NbestEntry, words: &WordStarts, outcome: &RunOutcome) -> Option<(usize, usize)> {
    let s = e.span?;
    let f = kept_feature(outcome, s.unique_id)?;
    // run_qa's windows carry their tokens' character offsets.
    if let Some(t) = &f.template {
        let offset = |pos: usize| t.offsets.get(pos.checked_sub(t.doc_offset)?);
        let (first, last) = (offset(s.start)?, offset(s.end)?);
        return Some((first.0 as usize, last.1 as usize));
    }
    // Token positions → words, through the feature the span came from.
    let (a, b) = (f.orig_word(s.start)?, f.orig_word(s.end)?);
    words.char_span(a, b, &e.text)
}

fn kept_feature(outcome: &RunOutcome, unique_id: u64) -> Option<&Feature> {
    let i = outcome
        .kept_features
        .binary_search_by_key(&unique_id, |f| f.unique_id)
        .ok()?;
    Some(&outcome.kept_features[i])
}

/// A paragraph's words with the code-point offset of each word's first character
/// (found once per answer: its candidates all look their spans up in it).
pub(crate) struct WordStarts<'a> {
    paragraph: &'a Paragraph,
    starts: Vec<usize>,
}

impl<'a> WordStarts<'a> {
    pub(crate) fn of(paragraph: &'a Paragraph) -> WordStarts<'a> {
        let mut starts = Vec::with_capacity(paragraph.doc_tokens.len());
        let mut in_word = false;
        for (i, c) in paragraph.context.chars().enumerate() {
            if crate::types::is_reader_whitespace(c) {
                in_word = false;
            } else if !in_word {
                in_word = true;
                starts.push(i);
            }
        }
        WordStarts { paragraph, starts }
    }

    /// The character span `[start, end)` (code points) of `text` in the context, found
    /// through the words the answer came from. `None` when the text cannot be located.
    pub(crate) fn char_span(
        &self,
        first_word: usize,
        last_word: usize,
        text: &str,
    ) -> Option<(usize, usize)> {
        let doc_tokens = &self.paragraph.doc_tokens;
        if text.is_empty()
            || first_word > last_word
            || last_word >= doc_tokens.len()
            || last_word >= self.starts.len()
        {
            return None;
        }
        // The reference's orig_text: the words joined by single spaces; the final text
        // is a substring of it.
        let mut joined: Vec<(char, usize)> = Vec::new();
        let words = doc_tokens.range(first_word..=last_word);
        for (i, (word, &start)) in words.zip(&self.starts[first_word..=last_word]).enumerate() {
            if i > 0 {
                joined.push((' ', usize::MAX));
            }
            for (k, c) in word.chars().enumerate() {
                joined.push((c, start + k));
            }
        }
        let target: Vec<char> = text.chars().collect();
        let at = joined
            .windows(target.len())
            .position(|win| win.iter().map(|(c, _)| *c).eq(target.iter().copied()))?;
        let start = joined[at].1;
        let end = joined[at + target.len() - 1].1;
        (start != usize::MAX && end != usize::MAX).then_some((start, end + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_spans_map_back_to_the_context() {
        let ctx = "  The  cat\tsat on\nthe mat.";
        let p = crate::squad::split_context(ctx);
        // words: The cat sat on the mat.
        let chars: Vec<char> = ctx.chars().collect();
        let words = WordStarts::of(&p);
        let char_span = |a, b, t| words.char_span(a, b, t);
        let text = |s: (usize, usize)| chars[s.0..s.1].iter().collect::<String>();
        assert_eq!(text(char_span(1, 1, "cat").unwrap()), "cat");
        assert_eq!(char_span(3, 5, "on the mat").unwrap(), (15, 25));
        assert_eq!(text(char_span(5, 5, "mat").unwrap()), "mat");
        assert_eq!(
            text(char_span(0, 2, "The cat sat").unwrap()),
            "The  cat\tsat"
        );
        assert_eq!(char_span(0, 0, "dog"), None);
        assert_eq!(char_span(0, 9, "The"), None);
    }
}
