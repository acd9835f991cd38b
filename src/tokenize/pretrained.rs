//! Any Hugging Face fast tokenizer (`tokenizer.json`) through the `tokenizers` crate's
//! whole pipeline: normalizer, pre-tokenizer, model (WordPiece, BPE, byte-level BPE,
//! Unigram, WordLevel) and the post-processor's pair template, offsets in characters.
//! The tokenizers of run_qa's rules (docs/algorithm.md, "run_qa's rules").
//!
//! Contract:
//! - [`PretrainedTokenizer::from_path`] takes a folder as `save_pretrained` writes it or
//!   a `tokenizer.json`; `tokenizer_config.json` and `special_tokens_map.json` beside it
//!   are read where present, as transformers reads them: the padding side, the truncation
//!   side, `model_max_length` and the pad token (the map wins over the config).
//! - The file's own truncation and padding settings are switched off: windows are cut
//!   and padded by the caller, as transformers overrides them on every call.
//! - The pair layout is learnt once from the post-processor: the special tokens before,
//!   between and after the two sequences and the token type ids of each part. Each
//!   sequence must appear once, question then context, and the type ids must be 0s then
//!   1s (every family's template is).
//! - [`PretrainedTokenizer::encode`] encodes one text without special tokens; the
//!   post-processor's offset trimming (byte-level BPE) is applied, as it is to the
//!   sequences of a pair (trimming is per token, so encoding the context alone and
//!   cutting it gives the pair encoding's windows).

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenizers::{Encoding, ModelWrapper, PostProcessor, PreTokenizerWrapper, Token};

use crate::error::{Error, Location, Result};

/// A text's tokens: ids and character offsets.
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    pub ids: Vec<u32>,
    pub offsets: Vec<(u32, u32)>,
}

/// A fast tokenizer with what transformers reads beside it.
#[derive(Clone)]
pub struct PretrainedTokenizer {
    inner: tokenizers::Tokenizer,
    /// The `tokenizer.json` read.
    path: PathBuf,
    kind: &'static str,
    pad_id: u32,
    model_max_length: Option<usize>,
    layout: PairLayout,
}

impl std::fmt::Debug for PretrainedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PretrainedTokenizer")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("pad_id", &self.pad_id)
            .field("model_max_length", &self.model_max_length)
            .field("layout", &self.layout)
            .finish()
    }
}

/// Where the post-processor puts a pair's special tokens, and the type id of each part:
/// `prefix A middle B suffix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PairLayout {
    pub(crate) prefix: Vec<u32>,
    pub(crate) middle: Vec<u32>,
    pub(crate) suffix: Vec<u32>,
    /// Type ids of `prefix`, A, `middle`, B, `suffix`, in that order (A and B one each).
    types: Vec<u32>,
}

impl PairLayout {
    /// Tokens added around a pair.
    pub(crate) fn added(&self) -> usize {
        self.prefix.len() + self.middle.len() + self.suffix.len()
    }

    /// Where the context (B) starts in a window whose question has `q` tokens.
    pub(crate) fn context_start(&self, q: usize) -> usize {
        self.prefix.len() + q + self.middle.len()
    }

    /// The first position whose type id is 1 in a window of `q` question and `c` context
    /// tokens (its length when none is).
    pub(crate) fn type_one_from(&self, q: usize, c: usize) -> usize {
        let lens = self
            .prefix
            .iter()
            .map(|_| 1)
            .chain([q])
            .chain(self.middle.iter().map(|_| 1))
            .chain([c])
            .chain(self.suffix.iter().map(|_| 1));
        let mut at = 0;
        for (len, &t) in lens.zip(&self.types) {
            if t == 1 && len > 0 {
                return at;
            }
            at += len;
        }
        at
    }
}

/// What a tokenizer file's JSON says, read for errors with a line and column.
fn read_json(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return Err(Error::input(
            Location::at(path, e.line(), e.column()),
            format!("not JSON: {e}"),
        ));
    }
    Ok(bytes)
}

/// A special token's text in a transformers config: a string or `{"content": ...}`.
fn token_text(v: &Value) -> Option<&str> {
    v.as_str()
        .or_else(|| v.get("content").and_then(Value::as_str))
}

/// What `tokenizer_config.json` and `special_tokens_map.json` say about padding and
/// length.
#[derive(Debug, Default)]
struct Configs {
    padding_side: Option<(String, PathBuf)>,
    truncation_side: Option<(String, PathBuf)>,
    model_max_length: Option<usize>,
    pad_token: Option<String>,
}

impl Configs {
    fn read(dir: &Path) -> Result<Configs> {
        let mut c = Configs::default();
        let config = dir.join("tokenizer_config.json");
        if config.is_file() {
            let v: Value = serde_json::from_slice(&read_json(&config)?)
                .map_err(|e| Error::json(&config, &e))?;
            let side = |key: &str| {
                v.get(key)
                    .and_then(Value::as_str)
                    .map(|s| (s.to_string(), config.clone()))
            };
            c.padding_side = side("padding_side");
            c.truncation_side = side("truncation_side");
            // transformers writes 1e30 (an "unlimited" length) when the model sets none.
            c.model_max_length = v
                .get("model_max_length")
                .and_then(Value::as_f64)
                .filter(|n| (1.0..1e18).contains(n))
                .map(|n| n as usize);
            c.pad_token = v.get("pad_token").and_then(token_text).map(String::from);
        }
        let map = dir.join("special_tokens_map.json");
        if map.is_file() {
            let v: Value =
                serde_json::from_slice(&read_json(&map)?).map_err(|e| Error::json(&map, &e))?;
            if let Some(pad) = v.get("pad_token").and_then(token_text) {
                c.pad_token = Some(pad.to_string());
            }
        }
        Ok(c)
    }
}

impl PretrainedTokenizer {
    /// The `tokenizer.json` `path` names (itself, or the one in a folder) and its
    /// model's kind ([`kind`](Self::kind)), without the checks a run needs: whether a
    /// file is BERT's WordPiece decides which rules are the default.
    pub fn model_kind(path: &Path) -> Result<(PathBuf, &'static str)> {
        let (file, _) = tokenizer_file(path)?;
        let inner = parse(&file)?;
        Ok((file, kind_of(&inner)))
    }

    /// Loads a folder as `save_pretrained` writes it, or a `tokenizer.json` (with the
    /// configuration files beside it).
    pub fn from_path(path: &Path) -> Result<Self> {
        let (file, dir) = tokenizer_file(path)?;
        let mut inner = parse(&file)?;
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| Error::Internal(format!("switching truncation off: {e}")))?;
        let configs = Configs::read(&dir)?;
        for (key, side) in [
            ("padding_side", &configs.padding_side),
            ("truncation_side", &configs.truncation_side),
        ] {
            if let Some((value, origin)) = side {
                if value != "right" {
                    return Err(Error::input(
                        Location::file(origin),
                        format!(
                            "{key} is {value:?}: bertqa builds run_qa's windows for \
                             tokenizers that pad and truncate on the right (question \
                             first, context second); set it to \"right\""
                        ),
                    ));
                }
            }
        }
        let kind = kind_of(&inner);
        let pad_id = pad_id(&inner, configs.pad_token.as_deref(), &file)?;
        let layout = pair_layout(&inner, &file)?;
        Ok(PretrainedTokenizer {
            inner,
            path: file,
            kind,
            pad_id,
            model_max_length: configs.model_max_length,
            layout,
        })
    }
}

/// The `tokenizer.json` of `path` (a file, or a folder holding one) and the folder its
/// configuration files lie in.
fn tokenizer_file(path: &Path) -> Result<(PathBuf, PathBuf)> {
    let (file, dir) = if path.is_dir() {
        let file = path.join("tokenizer.json");
        if !file.is_file() {
            return Err(Error::input(
                Location::file(path),
                "the folder has no tokenizer.json: bertqa reads fast tokenizers as \
                     `save_pretrained` writes them (load a slow tokenizer's folder in \
                     transformers with use_fast=True and save it again)",
            ));
        }
        (file, path.to_path_buf())
    } else {
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        (path.to_path_buf(), dir)
    };
    Ok((file, dir))
}

/// Parses a `tokenizer.json`, naming it in errors.
fn parse(file: &Path) -> Result<tokenizers::Tokenizer> {
    let bytes = read_json(file)?;
    tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| {
        Error::input(
            Location::file(file),
            format!(
                "not a tokenizer.json of the tokenizers library ({e}); its model must \
                 be WordPiece, BPE, Unigram or WordLevel"
            ),
        )
    })
}

/// The model's kind, as [`PretrainedTokenizer::kind`] names it.
fn kind_of(inner: &tokenizers::Tokenizer) -> &'static str {
    match inner.get_model() {
        ModelWrapper::WordPiece(_) => "WordPiece",
        ModelWrapper::BPE(_) => match inner.get_pre_tokenizer() {
            Some(PreTokenizerWrapper::ByteLevel(_)) => "byte-level BPE",
            Some(PreTokenizerWrapper::Sequence(s)) if format!("{s:?}").contains("ByteLevel") => {
                "byte-level BPE"
            }
            _ => "BPE",
        },
        ModelWrapper::Unigram(_) => "Unigram",
        ModelWrapper::WordLevel(_) => "WordLevel",
    }
}

impl PretrainedTokenizer {
    /// The `tokenizer.json` read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model's kind: `WordPiece`, `BPE`, `byte-level BPE`, `Unigram` or `WordLevel`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Whether the model is WordPiece (run_squad's rules stay the default for those).
    pub fn is_wordpiece(&self) -> bool {
        self.kind == "WordPiece"
    }

    /// The id padding positions get.
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }

    /// `model_max_length` from `tokenizer_config.json`, when it sets one.
    pub fn model_max_length(&self) -> Option<usize> {
        self.model_max_length
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The text of a token id.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub(crate) fn layout(&self) -> &PairLayout {
        &self.layout
    }

    /// `text` encoded without special tokens: ids, and offsets in bytes.
    fn encode_bytes(&self, text: &str) -> Result<Encoding> {
        self.inner.encode(text, false).map_err(|e| {
            Error::input(
                Location::file(&self.path),
                format!("the tokenizer failed: {e}"),
            )
        })
    }

    /// The ids of `text` encoded without special tokens.
    pub(crate) fn encode_ids(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.encode_bytes(text)?.get_ids().to_vec())
    }

    /// `text` encoded without special tokens: ids and character offsets, as
    /// `encode_char_offsets` gives them. The library converts offsets through a hash map
    /// of every byte of the text, before the post-processor trims them; a table indexed
    /// by byte, after trimming, gives the same offsets (a byte inside a character counts
    /// as that character, the text's end as its length; trimming moves by spaces, one
    /// byte and one character each).
    pub(crate) fn encode(&self, text: &str) -> Result<Encoded> {
        let e = self.encode_bytes(text)?;
        let mut char_of = Vec::with_capacity(text.len() + 1);
        let mut chars = 0u32;
        for c in text.chars() {
            char_of.extend(std::iter::repeat_n(chars, c.len_utf8()));
            chars += 1;
        }
        char_of.push(chars);
        let at = |b: usize| char_of.get(b).copied().unwrap_or(chars);
        let offsets = e
            .get_offsets()
            .iter()
            .map(|&(s, end)| (at(s), at(end)))
            .collect();
        Ok(Encoded {
            ids: e.get_ids().to_vec(),
            offsets,
        })
    }
}

/// The pad token's id: the configuration's pad token, else the file's padding setting,
/// else `[PAD]` or `<pad>` where the vocabulary has one.
fn pad_id(tk: &tokenizers::Tokenizer, configured: Option<&str>, file: &Path) -> Result<u32> {
    if let Some(token) = configured {
        return tk.token_to_id(token).ok_or_else(|| {
            Error::input(
                Location::file(file),
                format!("the pad token {token:?} of the tokenizer's configuration is not in its vocabulary"),
            )
        });
    }
    if let Some(p) = tk.get_padding() {
        return Ok(p.pad_id);
    }
    ["[PAD]", "<pad>"]
        .iter()
        .find_map(|t| tk.token_to_id(t))
        .ok_or_else(|| {
            Error::input(
                Location::file(file),
                "the tokenizer names no pad token and has neither [PAD] nor <pad>: name it \
                 as pad_token in special_tokens_map.json",
            )
        })
}

/// Learns the pair layout from the post-processor with stand-in sequences.
fn pair_layout(tk: &tokenizers::Tokenizer, file: &Path) -> Result<PairLayout> {
    let fail = |what: &str| {
        Error::input(
            Location::file(file),
            format!(
                "{what}: run_qa's windows need the post-processor's pair template (question, \
                 then context), as BERT's `[CLS] $A [SEP] $B:1 [SEP]:1`"
            ),
        )
    };
    let Some(processor) = tk.get_post_processor() else {
        return Err(fail(
            "the tokenizer has no post-processor, so no pair template",
        ));
    };
    // Stand-ins: ids no vocabulary gives, one per position, so each sequence's tokens can
    // be found again; two and three tokens, so that a repeated part would show.
    const A: u32 = u32::MAX - 16;
    const B: u32 = u32::MAX - 8;
    let seq = |first: u32, n: u32| {
        let tokens = (0..n)
            .map(|i| Token::new(first + i, "x".to_string(), (i as usize, i as usize + 1)))
            .collect();
        Encoding::from_tokens(tokens, 0)
    };
    let pair = processor
        .process(seq(A, 2), Some(seq(B, 3)), true)
        .map_err(|e| fail(&format!("the post-processor failed on a pair ({e})")))?;
    let ids = pair.get_ids();
    let types = pair.get_type_ids();
    let at = |id: u32| ids.iter().position(|&i| i == id);
    let (Some(a), Some(b)) = (at(A), at(B)) else {
        return Err(fail(
            "the post-processor's pair template does not hold both sequences",
        ));
    };
    let contiguous = ids.iter().filter(|&&i| (A..A + 2).contains(&i)).count() == 2
        && ids.iter().filter(|&&i| (B..B + 3).contains(&i)).count() == 3
        && ids[a..a + 2] == [A, A + 1]
        && ids.get(b..b + 3) == Some(&[B, B + 1, B + 2][..])
        && a + 2 <= b;
    if !contiguous {
        return Err(fail(
            "the post-processor's pair template does not hold the question once, then the context once",
        ));
    }
    let mut part_types: Vec<u32> = types[..a].to_vec();
    part_types.push(types[a]);
    part_types.extend_from_slice(&types[a + 2..b]);
    part_types.push(types[b]);
    part_types.extend_from_slice(&types[b + 3..]);
    let one_then_zero = part_types.windows(2).any(|w| w[0] > w[1]);
    if one_then_zero || part_types.iter().any(|&t| t > 1) || types[a + 1] != types[a] {
        return Err(fail(&format!(
            "the pair template's token type ids {types:?} are not 0s then 1s"
        )));
    }
    Ok(PairLayout {
        prefix: ids[..a].to_vec(),
        middle: ids[a + 2..b].to_vec(),
        suffix: ids[b + 3..].to_vec(),
        types: part_types,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(prefix: &[u32], middle: &[u32], suffix: &[u32], types: &[u32]) -> PairLayout {
        PairLayout {
            prefix: prefix.to_vec(),
            middle: middle.to_vec(),
            suffix: suffix.to_vec(),
            types: types.to_vec(),
        }
    }

    /// Character offsets through the byte table equal the library's own
    /// (`encode_char_offsets`), on text with accents, CJK, emoji, combining marks,
    /// control characters and runs of spaces, for each test tokenizer.
    #[test]
    fn character_offsets_equal_the_librarys() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers");
        let texts = [
            "The café at Zürich — naïve “quotes” and 東京 🚀🚀 rocket.",
            "  leading spaces,\ttabs\n\nand e\u{301}\u{301} marks\u{7}\u{0} ",
            "",
            "x",
            "ß ﬁ İ Ⅻ ㎏ ﷺ",
        ];
        for name in ["distilbert", "roberta", "deberta-v3"] {
            let t = PretrainedTokenizer::from_path(&root.join(name)).unwrap();
            for text in texts {
                let ours = t.encode(text).unwrap();
                let theirs = t.inner.encode_char_offsets(text, false).unwrap();
                let want: Vec<(u32, u32)> = theirs
                    .get_offsets()
                    .iter()
                    .map(|&(s, e)| (s as u32, e as u32))
                    .collect();
                assert_eq!(ours.ids, theirs.get_ids(), "{name}: {text:?}");
                assert_eq!(ours.offsets, want, "{name}: {text:?}");
            }
        }
    }

    #[test]
    fn type_one_starts_where_the_template_says() {
        // BERT: [CLS]:0 A:0 [SEP]:0 B:1 [SEP]:1
        let bert = layout(&[101], &[102], &[102], &[0, 0, 0, 1, 1]);
        assert_eq!(bert.context_start(5), 7);
        assert_eq!(bert.type_one_from(5, 10), 7);
        assert_eq!(bert.added(), 3);
        // RoBERTa: every type id 0.
        let roberta = layout(&[0], &[2, 2], &[2], &[0, 0, 0, 0, 0, 0]);
        assert_eq!(roberta.context_start(5), 8);
        assert_eq!(roberta.type_one_from(5, 10), 19);
    }
}
