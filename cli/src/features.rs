//! `bertqa features`: one JSON line per feature on stdout (the CLI contract, README.md), with
//! the reference's padded tensors, so any difference from the reference shows up in one
//! `diff`. Keys, in order: `unique_id`, `example_index`, `qas_id`, `doc_span_index`,
//! `tokens` (unpadded), `input_ids`, `segment_ids`, `input_mask` (all three padded to
//! `--max-seq-length`), `token_to_orig_map` and `token_is_max_context` (objects keyed by
//! token position, doc pieces only); under run_qa's rules also `offsets` (each unpadded
//! token's `[start, end]` characters in the context, `null` outside it) and
//! `sequence_ids` (0 for the question, 1 for the context, `null` for special tokens).

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use super::args::{Postprocess, TokenizerArgs, WindowArgs, INPUT};
use super::common::{feature_config, load_data, load_tokenizer, Outcome};
use bertqa::features::FeatureBuilder;
use bertqa::tokenize::TokenizerRef;
use bertqa::types::{Dataset, Feature, TokenText};

/// Build the features (windows) of a data file, one JSON line per feature; or convert
/// the data to SQuAD JSON (`--to squad`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = INPUT, required = true, action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,

    /// First N questions only
    #[arg(long, value_name = "N", help_heading = INPUT)]
    pub limit: Option<usize>,

    /// Write the data itself in this format instead of its features (squad: SQuAD JSON,
    /// for other tools)
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = INPUT)]
    pub to: Option<ConvertTo>,

    #[command(flatten)]
    pub tokenizer: TokenizerArgs,

    #[command(flatten)]
    pub window: WindowArgs,

    /// Windows of run_squad (nvidia, hf: the same windows) or of run_qa [default: run-qa
    /// for a tokenizer that is not WordPiece, else nvidia]
    #[arg(long, value_enum, help_heading = INPUT)]
    pub postprocess: Option<Postprocess>,
}

/// `--to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvertTo {
    Squad,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.to == Some(ConvertTo::Squad) {
        let dataset = load_data(&args.data, args.window.strict, args.limit)?;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        bertqa::data::write_squad(&dataset, &mut out).context("writing SQuAD JSON to stdout")?;
        out.flush().context("writing SQuAD JSON to stdout")?;
        return Ok(Outcome::Success);
    }
    let loaded = load_tokenizer(&args.tokenizer, args.postprocess)?;
    let config = feature_config(&args.window, loaded.postprocess, None)?;
    let dataset = load_data(&args.data, args.window.strict, args.limit)?;

    let tokenizer = loaded.tokenizer.as_ref();
    let renderer = Renderer::new(tokenizer, config.max_seq_length);
    let mut features = FeatureBuilder::for_rules(tokenizer, loaded.postprocess, config, &dataset)?
        .features(&dataset);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut line = Vec::with_capacity(16 * 1024);
    for feature in features.by_ref() {
        line.clear();
        renderer.render(&mut line, &feature, &dataset);
        out.write_all(&line).context("writing features to stdout")?;
    }
    out.flush().context("writing features to stdout")?;

    for &index in features.featureless() {
        let example = &dataset.examples[index];
        if dataset.paragraph_of(example).doc_tokens.is_empty() {
            continue; // already reported by the reader
        }
        let message = format!(
            "{} (question id {:?}): the context has no word pieces (only characters the \
             tokenizer removes), so the question gets no features and no answer \
             (docs/algorithm.md §10.18)",
            super::common::data_label(&args.data),
            example.qas_id
        );
        if args.window.strict {
            anyhow::bail!(message);
        }
        eprintln!("warning: {message}");
    }
    Ok(Outcome::Success)
}

/// Writes features as JSON lines; token texts are escaped once per vocabulary entry.
pub(crate) struct Renderer {
    /// JSON string literal (quotes included) of every id's token.
    tokens: Vec<Vec<u8>>,
    max_seq_length: usize,
}

impl Renderer {
    pub(crate) fn new(tokenizer: TokenizerRef<'_>, max_seq_length: usize) -> Self {
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
    pub(crate) fn render(&self, out: &mut Vec<u8>, f: &Feature, dataset: &Dataset) {
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
