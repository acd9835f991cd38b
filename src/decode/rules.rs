//! Every place where `--postprocess nvidia` and `--postprocess hf` differ (algorithm §6.13),
//! and the fallback rules both share (§6.6 steps 5–7).
//!
//! | Rule | nvidia (G/N `write_predictions`) | hf (transformers 4.x) |
//! |---|---|---|
//! | `tok_text` from word pieces (§6.6 step 2.3, §6.13.1) | delete `" ##"`, then every remaining `"##"` | delete `" ##"` only: a span starting on `##ing` keeps `##ing`, which `get_final_text` cannot find, so the whole original word(s) come back |
//! | v2 list holding only `""` (§6.6 step 6, §6.13.2) | G/N crash; we adopt H's rule (§10.19) | insert `"empty"` (0.0, 0.0) in front |
//! | basic tokenizer of `get_final_text` (§6.13.3) | N classes, `never_split` specials | H classes, NFC first, no `never_split` |
//!
//! The third row is not reproduced: both modes use the configured [`TokenText`]'s basic
//! tokenizer (N's). It only matters for contexts holding decomposed accents under a cased
//! vocabulary (NFC) or a literal `[CLS]`/`[SEP]`/`[UNK]`/`[PAD]`/`[MASK]` string.
//!
//! [`TokenText`]: crate::types::TokenText

use super::{py_split_join, DecodeConfig, Postprocess, Span};

/// An n-best entry before probabilities: text, start logit, end logit, origin.
pub(super) type RawEntry = (String, f64, f64, Option<Span>);

/// Whether the two modes detokenize these pieces differently (§6.13.1): the only rule
/// through which their texts, and so their answers, can differ.
pub fn detokenize_differs(pieces: &[&str]) -> bool {
    detokenize(Postprocess::Nvidia, pieces) != detokenize(Postprocess::Hf, pieces)
}

/// `tok_text` of a span's word pieces, whitespace-collapsed (§6.6 step 2.3 / §6.13.1).
pub fn detokenize(mode: Postprocess, pieces: &[&str]) -> String {
    if let Some(text) = detokenize_plain(mode, pieces) {
        return text;
    }
    let joined = pieces.join(" ").replace(" ##", "");
    let joined = match mode {
        Postprocess::Hf => joined,
        // run_qa's texts are the context's characters: no pieces are joined.
        Postprocess::Nvidia | Postprocess::RunQa => joined.replace("##", ""),
    };
    py_split_join(&joined)
}

/// The common case in one pass: every piece non-empty, without whitespace, and without
/// `#` except one leading `##` before a non-`#` character. Then `" ##"` removal glues
/// each continuation to the previous piece, and only a leading `##` on the first piece
/// remains (removed by nvidia, kept by hf). `None` for anything else.
fn detokenize_plain(mode: Postprocess, pieces: &[&str]) -> Option<String> {
    let mut out = String::with_capacity(pieces.iter().map(|p| p.len() + 1).sum());
    for (i, p) in pieces.iter().enumerate() {
        let (cont, body) = match p.strip_prefix("##") {
            Some(rest) => (true, rest),
            None => (false, *p),
        };
        if body.is_empty() || body.contains('#') || has_py_whitespace(body) {
            return None;
        }
        if i == 0 {
            if cont && mode == Postprocess::Hf {
                out.push_str("##");
            }
        } else if !cont {
            out.push(' ');
        }
        out.push_str(body);
    }
    Some(out)
}

/// Whether `s` holds a character of Python's `str.split()` whitespace; byte-wise for
/// ASCII text (the usual vocabulary piece).
fn has_py_whitespace(s: &str) -> bool {
    if s.is_ascii() {
        s.bytes().any(|b| matches!(b, 0x09..=0x0d | 0x1c..=0x20))
    } else {
        s.chars().any(super::is_py_whitespace)
    }
}

/// §6.6 steps 5–7 after the n-best loop: v2 appends the null entry when `""` was not
/// seen, then a lone `""` gets `"empty"` in front (H's rule, used by both modes: G and N
/// crash there, §10.19); a list still empty becomes `["empty"]`.
pub(super) fn complete_nbest(
    config: &DecodeConfig,
    nbest: &mut Vec<RawEntry>,
    seen_null: bool,
    (null_start, null_end, null_span): (f64, f64, Option<Span>),
) {
    if config.version_2_with_negative {
        if !seen_null {
            nbest.push((String::new(), null_start, null_end, null_span));
        }
        if nbest.len() == 1 {
            nbest.insert(0, ("empty".to_string(), 0.0, 0.0, None));
        }
    }
    if nbest.is_empty() {
        nbest.push(("empty".to_string(), 0.0, 0.0, None));
    }
}
