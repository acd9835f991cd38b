//! `bertqa features`' output: one JSON line per window, with the reference's padded
//! tensors, so that any difference from the reference shows up in one `diff`. Keys, in
//! order: `unique_id`, `example_index`, `qas_id`, `doc_span_index`, `tokens` (unpadded),
//! `input_ids`, `segment_ids`, `input_mask` (all three padded to `max_seq_length`),
//! `token_to_orig_map` and `token_is_max_context` (objects keyed by token position, doc
//! pieces only); under run_qa's rules also `offsets` (each unpadded token's `[start,
//! end]` characters in the context, `null` outside it) and `sequence_ids` (0 for the
//! question, 1 for the context, `null` for special tokens).

use std::io::Write;

use super::{FeatureBuilder, FeatureConfig, Features};
use crate::decode::Postprocess;
use crate::error::Result;
use crate::tokenize::TokenizerRef;
use crate::types::{Dataset, Feature, TokenText};

/// The windows of a dataset as JSON lines, built as they are written ([`json_lines`]).
#[derive(Debug)]
pub struct JsonLines<'t, 'd> {
    renderer: Renderer,
    features: Features<'t, 'd>,
    dataset: &'d Dataset,
}

/// The windows of `dataset` cut by `rules` with `tokenizer` under `config`, to be
/// written as JSON lines ([`JsonLines::write_to`]). Fails as
/// [`FeatureBuilder::for_rules`] does (a tokenizer that does not fit the rules, a
/// question that leaves no room under run_qa's).
pub fn json_lines<'t, 'd>(
    dataset: &'d Dataset,
    tokenizer: TokenizerRef<'t>,
    rules: Postprocess,
    config: FeatureConfig,
) -> Result<JsonLines<'t, 'd>> {
    let renderer = Renderer::new(tokenizer, config.max_seq_length);
    let features = FeatureBuilder::for_rules(tokenizer, rules, config, dataset)?.features(dataset);
    Ok(JsonLines {
        renderer,
        features,
        dataset,
    })
}

impl JsonLines<'_, '_> {
    /// Writes every window's line to `out`, then flushes it. Returns the questions (by
    /// index) whose context has words but no word pieces (only characters the tokenizer
    /// removes): they get no window and no answer (§10.18). A context without words is
    /// not among them (the reader reports it).
    pub fn write_to(mut self, out: &mut dyn Write) -> std::io::Result<Vec<usize>> {
        let mut line = Vec::with_capacity(16 * 1024);
        for feature in self.features.by_ref() {
            line.clear();
            self.renderer.render(&mut line, &feature, self.dataset);
            out.write_all(&line)?;
        }
        out.flush()?;
        let dataset = self.dataset;
        Ok(self
            .features
            .featureless()
            .iter()
            .copied()
            .filter(|&i| {
                !dataset
                    .paragraph_of(&dataset.examples[i])
                    .doc_tokens
                    .is_empty()
            })
            .collect())
    }
}

/// Writes features as JSON lines; token texts are escaped once per vocabulary entry.
#[derive(Debug)]
struct Renderer {
    /// JSON string literal (quotes included) of every id's token.
    tokens: Vec<Vec<u8>>,
    max_seq_length: usize,
}

impl Renderer {
    fn new(tokenizer: TokenizerRef<'_>, max_seq_length: usize) -> Self {
        let tokens = match tokenizer {
            TokenizerRef::Bert(t) => (0..t.vocab_size())
                .map(|id| json_string(t.id_to_token(id as u32)))
                .collect(),
            TokenizerRef::Pretrained(t) => (0..t.vocab_size())
                .map(|id| json_string(&t.id_to_token(id as u32).unwrap_or_default()))
                .collect(),
        };
        Renderer {
            tokens,
            max_seq_length,
        }
    }

    /// One feature as a JSON line (with the newline).
    fn render(&self, out: &mut Vec<u8>, f: &Feature, dataset: &Dataset) {
        let example = &dataset.examples[f.example_index];
        let seq = self.max_seq_length.max(f.len());
        out.extend_from_slice(b"{\"unique_id\":");
        push_uint(out, f.unique_id);
        out.extend_from_slice(b",\"example_index\":");
        push_uint(out, f.example_index as u64);
        out.extend_from_slice(b",\"qas_id\":");
        out.extend_from_slice(&json_string(&example.qas_id));
        out.extend_from_slice(b",\"doc_span_index\":");
        push_uint(out, f.doc_span_index as u64);
        out.extend_from_slice(b",\"tokens\":[");
        for (i, &id) in f.input_ids.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match self.tokens.get(id as usize) {
                Some(t) => out.extend_from_slice(t),
                None => out.extend_from_slice(b"\"[UNK]\""),
            }
        }
        out.extend_from_slice(b"],\"input_ids\":[");
        for pos in 0..seq {
            if pos > 0 {
                out.push(b',');
            }
            push_uint(
                out,
                u64::from(f.input_ids.get(pos).copied().unwrap_or(f.pad_id())),
            );
        }
        out.extend_from_slice(b"],\"segment_ids\":[");
        push_bits(out, (0..seq).map(|pos| f.segment_id(pos) == 1));
        out.extend_from_slice(b"],\"input_mask\":[");
        push_bits(out, (0..seq).map(|pos| f.input_mask(pos) == 1));
        out.extend_from_slice(b"],\"token_to_orig_map\":{");
        let offset = f.doc_offset();
        for (j, &word) in f.token_to_orig.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'"');
            push_uint(out, (offset + j) as u64);
            out.extend_from_slice(b"\":");
            push_uint(out, u64::from(word));
        }
        out.extend_from_slice(b"},\"token_is_max_context\":{");
        for (j, &max) in f.token_is_max_context.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'"');
            push_uint(out, (offset + j) as u64);
            out.extend_from_slice(if max { b"\":true" } else { b"\":false" });
        }
        out.push(b'}');
        if let Some(t) = &f.template {
            let context = |pos: usize| pos.checked_sub(t.doc_offset).and_then(|j| t.offsets.get(j));
            out.extend_from_slice(b",\"offsets\":[");
            for pos in 0..f.len() {
                if pos > 0 {
                    out.push(b',');
                }
                match context(pos) {
                    Some(&(s, e)) => {
                        out.push(b'[');
                        push_uint(out, u64::from(s));
                        out.push(b',');
                        push_uint(out, u64::from(e));
                        out.push(b']');
                    }
                    None => out.extend_from_slice(b"null"),
                }
            }
            out.extend_from_slice(b"],\"sequence_ids\":[");
            for pos in 0..f.len() {
                if pos > 0 {
                    out.push(b',');
                }
                let question = t.question_offset..t.question_offset + f.query_len;
                out.extend_from_slice(if question.contains(&pos) {
                    b"0"
                } else if context(pos).is_some() {
                    b"1"
                } else {
                    b"null"
                });
            }
            out.push(b']');
        }
        out.extend_from_slice(b"}\n");
    }
}

fn json_string(s: &str) -> Vec<u8> {
    // Strings always serialize; the fallback can only be reached by an allocator
    // failure, which aborts first.
    serde_json::to_vec(s).unwrap_or_else(|_| b"\"\"".to_vec())
}

fn push_uint(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_bits(out: &mut Vec<u8>, bits: impl Iterator<Item = bool>) {
    for (i, b) in bits.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(if b { b'1' } else { b'0' });
    }
}
