//! The final text of a span (§6.6 step 2, §6.7), with the basic tokenization of the
//! paragraph's words kept between questions.

use std::borrow::Cow;

use super::{final_text, rules, DecodeConfig};
use crate::types::{Feature, TokenText, Words};

/// The words of pieces `start` and `end` of `f`, when both map to words, in order, of a
/// paragraph of `words` words.
fn word_span(f: &Feature, start: usize, end: usize, words: usize) -> Option<(usize, usize)> {
    let ws = f.orig_word(start)?;
    let we = f.orig_word(end)?;
    (ws <= we && we < words).then_some((ws, we))
}

/// Buffers reused across the spans of one question.
#[derive(Default)]
pub(super) struct SpanScratch<'a> {
    pieces: Vec<&'a str>,
    orig: String,
    basic: String,
}

/// The final text of a non-null span (§6.6 step 2): word pieces → `tok_text`
/// (mode-dependent, [`rules::detokenize`]), the original words → `orig_text`, then
/// [`super::get_final_text`].
#[allow(clippy::too_many_arguments)]
pub(super) fn span_text<'a, 'w>(
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
pub(super) fn span_text_general<'a>(
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
pub(super) struct WordCache {
    /// What the basic tokenizer makes of each word index, filled on first use (kept
    /// across the questions of a paragraph by [`DecodeCache`]).
    pub(super) words: Vec<WordInfo>,
    /// [`WordCache::whole_words`]'s runs of each window seen, keyed by the feature's
    /// unique id and address (a cache lives for one question's decoding, while its
    /// features are borrowed; the id keeps a reused address from matching should it
    /// ever live longer), one entry per doc piece. Only the first `runs_used` belong to
    /// the question being decoded; the others are buffers kept for reuse.
    runs: Vec<((u64, usize), Vec<Run>)>,
    pub(super) runs_used: usize,
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
pub(super) enum WordInfo {
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
    pub(super) fn fill(&mut self, last: usize) {
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
    pub(super) fn whole_words<'w>(
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
    pub(super) fn whole_words_scan<'w>(
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
