//! Stage `tokenize`: text → WordPiece ids, exactly as the reference's full tokenizer
//! (algorithm §3: N's `BasicTokenizer`, then WordPiece on each basic token).
//!
//! Contract:
//! - [`BertTokenizer`] is built from a `vocab.txt` (§3.1: one token per line, id = line
//!   number, lines stripped of Python whitespace, a duplicate keeps its last id) or from
//!   a `tokenizer.json` (its WordPiece model and vocabulary). `[UNK]`, `[CLS]` and `[SEP]`
//!   must be present.
//! - The basic tokenizer is ours (module `basic`), not the `tokenizers` crate's
//!   `BertNormalizer` + `BertPreTokenizer`: those differ from the reference in every
//!   step that matters for exact ids (§3.7): old category tables instead of the
//!   reference's 14.0 (Mn and P* differ for newer characters) and unassigned code
//!   points (Cn) kept instead of removed, accents stripped
//!   before lower-casing and per-character lower-casing (no final sigma), one CJK range
//!   starting at U+2B920 instead of U+2B820, and specials either never protected or
//!   matched inside words. Tests in this module show each difference.
//! - WordPiece (§3.4: greedy longest match, `##` continuation, a whole-word `[UNK]` when
//!   a word has more than 100 characters or no match) is the `tokenizers` crate's
//!   [`WordPiece`] model.
//! - [`Encoder`] memoizes at two levels: whole segments (a context's whitespace words,
//!   [`Encoder::encode_segment`]), so a word seen before skips the basic tokenizer too,
//!   and WordPiece per basic token, so repeated words across questions cost one hash
//!   lookup after the first time: each distinct word meets WordPiece once.
//!
//! All character positions are code points; nothing here slices by bytes it did not find
//! itself.

mod basic;
mod cache;
mod pretrained;
pub(crate) mod tables;
pub use pretrained::PretrainedTokenizer;
/// The Unicode version of the tokenizer's character tables (the reference's Python).
pub use tables::UNICODE_VERSION;

use std::path::{Path, PathBuf};

use tokenizers::models::wordpiece::WordPiece;
use tokenizers::{Model, ModelWrapper, NormalizerWrapper};

use crate::error::{Error, Location, Result};
use crate::types::TokenText;
use cache::IdCache;

pub(crate) use basic::lower_strip_accents;
pub use basic::{
    basic_tokenize, is_cjk, is_clean_whitespace, is_control, is_punctuation, is_python_whitespace,
    NEVER_SPLIT,
};

/// WordPiece's longest word, in code points (N and H; current Google code uses 200).
pub const MAX_INPUT_CHARS_PER_WORD: usize = 100;

/// Words memoized per [`Encoder`]; past this many distinct words new ones are still
/// tokenized, just not remembered (bounds memory on huge inputs).
const MAX_CACHED_WORDS: usize = 1 << 20;

/// Splits a vocabulary file the way Python's text mode reads it (universal newlines:
/// `\n`, `\r\n`, `\r`) and strips each line of Python whitespace (§3.1, §3.5).
pub fn vocab_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (line, next) = match rest.find(['\n', '\r']) {
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..i], &rest[i + skip..])
            }
            None => (rest, ""),
        };
        lines.push(line.trim_matches(is_python_whitespace));
        rest = next;
    }
    lines
}

/// A tokenizer of either kind, as a command loads it: BERT's for run_squad's rules, any
/// fast tokenizer for run_qa's.
#[derive(Debug, Clone)]
pub enum Tokenizer {
    Bert(Box<BertTokenizer>),
    Pretrained(Box<PretrainedTokenizer>),
}

impl Tokenizer {
    /// Borrowed, as a run takes it.
    pub fn as_ref(&self) -> TokenizerRef<'_> {
        match self {
            Tokenizer::Bert(t) => TokenizerRef::Bert(t),
            Tokenizer::Pretrained(t) => TokenizerRef::Pretrained(t),
        }
    }
}

/// The tokenizer a run builds its windows with ([`crate::pipeline::Run::tokenizer`]).
#[derive(Debug, Clone, Copy)]
pub enum TokenizerRef<'a> {
    /// BERT's WordPiece tokenizer: run_squad's windows (`--postprocess nvidia` or `hf`).
    Bert(&'a BertTokenizer),
    /// Any fast tokenizer: run_qa's windows (`--postprocess run-qa`).
    Pretrained(&'a PretrainedTokenizer),
}

impl<'a> TokenizerRef<'a> {
    /// BERT's tokenizer, when it is one.
    pub fn bert(self) -> Option<&'a BertTokenizer> {
        match self {
            TokenizerRef::Bert(t) => Some(t),
            TokenizerRef::Pretrained(_) => None,
        }
    }
}

impl<'a> From<&'a BertTokenizer> for TokenizerRef<'a> {
    fn from(t: &'a BertTokenizer) -> Self {
        TokenizerRef::Bert(t)
    }
}

impl<'a> From<&'a PretrainedTokenizer> for TokenizerRef<'a> {
    fn from(t: &'a PretrainedTokenizer) -> Self {
        TokenizerRef::Pretrained(t)
    }
}

impl<'a> From<&'a Tokenizer> for TokenizerRef<'a> {
    fn from(t: &'a Tokenizer) -> Self {
        t.as_ref()
    }
}

/// The reference tokenizer: our basic tokenizer, then the crate's WordPiece.
#[derive(Debug, Clone)]
pub struct BertTokenizer {
    /// Token text of every id (for a duplicate, each line keeps its own text).
    tokens: Vec<String>,
    /// The crate's model: the vocabulary map and settings as loaded, and WordPiece.
    wordpiece: WordPiece,
    lower_case: bool,
    unk_id: u32,
    cls_id: u32,
    sep_id: u32,
    /// Set when the vocabulary looks wrong for the casing (algorithm §10.15).
    casing_warning: Option<String>,
    /// The caches of encoders that have finished, for the next ones.
    warm: WarmCaches,
}

impl BertTokenizer {
    /// Reads a `vocab.txt`. A missing file is an error that says how to get one.
    pub fn from_vocab_file(path: &Path, lower_case: bool) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::input(
                Location::file(path),
                format!(
                    "cannot read the vocabulary ({e}); run scripts/install_vocab.sh for \
                     bert-base-uncased's vocab/vocab.txt, or pass `vocab` PATH"
                ),
            )
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            Error::input(
                Location::at(path, line, 1),
                "the vocabulary is not valid UTF-8",
            )
        })?;
        Self::from_vocab_text(text, lower_case, path)
    }

    /// Builds a tokenizer from the text of a `vocab.txt`; `origin` names it in errors.
    pub fn from_vocab_text(text: &str, lower_case: bool, origin: &Path) -> Result<Self> {
        let tokens: Vec<String> = vocab_lines(text).into_iter().map(str::to_string).collect();
        if u32::try_from(tokens.len()).is_err() {
            return Err(Error::input(
                Location::file(origin),
                "the vocabulary has over 2^32 lines",
            ));
        }
        // Like the reference's dict, a duplicate keeps its last id (later inserts win).
        // An empty map of the crate's own type, filled directly (no join and re-split).
        let mut ids = WordPiece::read_bytes(b"")
            .map_err(|e| Error::input(Location::file(origin), e.to_string()))?;
        ids.reserve(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            ids.insert(t.clone(), i as u32);
        }
        let wordpiece = WordPiece::builder()
            .vocab(ids)
            .unk_token("[UNK]".to_string())
            .continuing_subword_prefix("##".to_string())
            .max_input_chars_per_word(MAX_INPUT_CHARS_PER_WORD)
            .build()
            .map_err(|e| Error::input(Location::file(origin), e.to_string()))?;
        Self::assemble(tokens, wordpiece, lower_case, None, origin)
    }

    /// Loads a Hugging Face `tokenizer.json`: its WordPiece model (vocabulary, unknown
    /// token, continuation prefix, word-length limit) is used as is; its normalizer and
    /// pre-tokenizer are replaced by the reference's basic tokenizer. `lower_case` wins
    /// over the file's `lowercase`, with a warning when they disagree.
    pub fn from_tokenizer_json(path: &Path, lower_case: bool) -> Result<Self> {
        let tk = tokenizers::Tokenizer::from_file(path).map_err(|e| {
            Error::input(
                Location::file(path),
                format!("cannot load tokenizer.json: {e}"),
            )
        })?;
        let ModelWrapper::WordPiece(wordpiece) = tk.get_model().clone() else {
            return Err(Error::input(
                Location::file(path),
                "the tokenizer's model is not WordPiece; BERT needs a WordPiece vocabulary",
            ));
        };
        let vocab = wordpiece.get_vocab();
        let size = vocab.values().max().map_or(0, |&m| m as usize + 1);
        let mut tokens = vec![String::new(); size];
        for (token, id) in vocab {
            tokens[id as usize] = token;
        }
        let file_lower = match tk.get_normalizer() {
            Some(NormalizerWrapper::BertNormalizer(n)) => Some(n.lowercase),
            _ => None,
        };
        let note = match file_lower {
            Some(l) if l != lower_case => Some(format!(
                "{} says lowercase={l} but the tokenizer runs with lower case {}",
                path.display(),
                if lower_case { "on" } else { "off" }
            )),
            _ => None,
        };
        Self::assemble(tokens, wordpiece, lower_case, note, path)
    }

    fn assemble(
        tokens: Vec<String>,
        wordpiece: WordPiece,
        lower_case: bool,
        note: Option<String>,
        origin: &Path,
    ) -> Result<Self> {
        let need = |name: &str| {
            wordpiece.token_to_id(name).ok_or_else(|| {
                Error::input(
                    Location::file(origin),
                    format!("the vocabulary has no {name} token"),
                )
            })
        };
        let unk_token = wordpiece.unk_token.clone();
        let unk_id = need(&unk_token)?;
        let cls_id = need("[CLS]")?;
        let sep_id = need("[SEP]")?;
        let casing_warning = note.or_else(|| casing_mismatch(&tokens, lower_case, origin));
        Ok(BertTokenizer {
            tokens,
            wordpiece,
            lower_case,
            unk_id,
            cls_id,
            sep_id,
            casing_warning,
            warm: WarmCaches::default(),
        })
    }

    /// Id of `[CLS]`.
    pub fn cls_id(&self) -> u32 {
        self.cls_id
    }

    /// Id of `[SEP]`.
    pub fn sep_id(&self) -> u32 {
        self.sep_id
    }

    /// Id of the unknown token.
    pub fn unk_id(&self) -> u32 {
        self.unk_id
    }

    /// Number of ids (lines of the vocabulary).
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The id of a vocabulary entry.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.wordpiece.token_to_id(token)
    }

    /// A warning when the vocabulary looks wrong for the casing (a cased vocabulary
    /// lower-cased, or an uncased one used with `--no-lower-case`), algorithm §10.15.
    pub fn casing_warning(&self) -> Option<&str> {
        self.casing_warning.as_deref()
    }

    /// The full tokenizer on one string (§3.2), without memoization.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        self.encoder().encode(text, &mut out);
        out
    }

    /// An encoder with its own scratch space and word caches: those an earlier encoder
    /// of this tokenizer left (the tokenizer keeps a few), else empty ones.
    pub fn encoder(&self) -> Encoder<'_> {
        let (cache, segments) = self.warm.take();
        Encoder {
            tokenizer: self,
            scratch: basic::Scratch::default(),
            cache,
            segments,
            stats: EncoderStats::default(),
        }
    }

    /// WordPiece of one basic token (§3.4), appended to `out`: its pieces, or one
    /// unknown id for a word over the length limit or without a full cover.
    pub fn wordpiece_into(&self, word: &str, out: &mut Vec<u32>) {
        match self.wordpiece.tokenize(word) {
            Ok(pieces) => out.extend(pieces.iter().map(|t| t.id)),
            // Only a missing unknown token makes the model fail, and `assemble`
            // checked it is there.
            Err(_) => out.push(self.unk_id),
        }
    }
}

fn casing_mismatch(tokens: &[String], lower_case: bool, origin: &Path) -> Option<String> {
    let capitalized = tokens
        .iter()
        .filter(|t| !(t.starts_with('[') && t.ends_with(']')))
        .filter(|t| t.chars().any(char::is_uppercase))
        .count();
    if lower_case && capitalized * 100 > tokens.len() {
        Some(format!(
            "{} has {capitalized} tokens with capitals, so it looks cased, but input is \
             lower-cased; pass `lower_case = false` for a cased vocabulary",
            origin.display()
        ))
    } else if !lower_case && capitalized == 0 && !tokens.is_empty() {
        Some(format!(
            "{} has no tokens with capitals, so it looks uncased, but `lower_case = false` \
             keeps capitals: expect many [UNK] pieces",
            origin.display()
        ))
    } else {
        None
    }
}

impl TokenText for BertTokenizer {
    fn id_to_token(&self, id: u32) -> &str {
        match self.tokens.get(id as usize) {
            Some(t) => t,
            None => &self.tokens[self.unk_id as usize],
        }
    }

    fn lower_case(&self) -> bool {
        self.lower_case
    }

    fn basic_tokenize(&self, text: &str) -> Vec<String> {
        basic::basic_tokenize(text, self.lower_case)
    }
}

/// Tokenizes many strings with one tokenizer, remembering the WordPiece ids of each
/// basic token it has seen. Not shared between threads: make one per worker.
#[derive(Debug)]
pub struct Encoder<'t> {
    tokenizer: &'t BertTokenizer,
    scratch: basic::Scratch,
    /// Basic token → its WordPiece ids.
    cache: IdCache,
    /// Whole segment given to [`Encoder::encode_segment`] → its ids.
    segments: IdCache,
    stats: EncoderStats,
}

impl Drop for Encoder<'_> {
    fn drop(&mut self) {
        let caches = (std::mem::take(&mut self.cache), std::mem::take(&mut self.segments));
        self.tokenizer.warm.put(caches);
    }
}

/// The word caches of a tokenizer's finished encoders, each handed to a later encoder
/// whole: a client's runs that follow one another (an engine's calls of a few dozen rows
/// each) start with the words the earlier ones tokenized instead of empty tables. The
/// caches only memoize, so the ids are the same either way. What a long-lived client
/// holds between runs is bounded by `WARM_CACHES` × `KEPT_ENTRIES`: a run that grew
/// its caches past that (a large, varied evaluation) leaves them to be freed. A clone
/// of the tokenizer starts with none.
#[derive(Default)]
struct WarmCaches(std::sync::Mutex<Vec<(IdCache, IdCache)>>);

/// Caches kept at most: one for each of a client's runs in flight at once.
const WARM_CACHES: usize = 4;

/// Entries (words and segments) of a pair of caches that is kept: a few megabytes.
const KEPT_ENTRIES: usize = 1 << 18;

impl WarmCaches {
    fn take(&self) -> (IdCache, IdCache) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.pop().unwrap_or_default()
    }

    fn put(&self, caches: (IdCache, IdCache)) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entries = caches.0.len() + caches.1.len();
        if kept.len() < WARM_CACHES && (1..=KEPT_ENTRIES).contains(&entries) {
            kept.push(caches);
        }
    }
}

impl Clone for WarmCaches {
    fn clone(&self) -> Self {
        WarmCaches::default()
    }
}

impl std::fmt::Debug for WarmCaches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map_or(0, |k| k.len());
        write!(f, "WarmCaches({kept} kept)")
    }
}

/// What an [`Encoder`] did: how many segments and basic tokens it was asked for, and how
/// many of each it actually tokenized (the rest came from its caches).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EncoderStats {
    pub segments: u64,
    pub segments_tokenized: u64,
    pub words: u64,
    pub words_tokenized: u64,
}

/// Remembers `ids` as those of `key`, unless the cache is full.
fn remember(cache: &mut IdCache, key: &str, ids: &[u32]) {
    if cache.len() < MAX_CACHED_WORDS {
        cache.insert(key, ids);
    }
}

impl Encoder<'_> {
    /// The tokenizer this encoder uses.
    pub fn tokenizer(&self) -> &BertTokenizer {
        self.tokenizer
    }

    /// What this encoder has done so far.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// Sizes the caches for about `words` distinct basic tokens and `segments` distinct
    /// segments (each capped at what the caches may hold), so that they do not grow
    /// through intermediate tables.
    pub fn reserve(&mut self, words: usize, segments: usize) {
        self.cache.reserve(words.min(MAX_CACHED_WORDS));
        self.segments.reserve(segments.min(MAX_CACHED_WORDS));
    }

    /// Appends the WordPiece ids of `text` (basic tokenizer, then WordPiece) to `out`.
    pub fn encode(&mut self, text: &str, out: &mut Vec<u32>) {
        let Encoder {
            tokenizer,
            scratch,
            cache,
            stats,
            ..
        } = self;
        basic::for_each_token(text, tokenizer.lower_case, scratch, |word| {
            stats.words += 1;
            if let Some(ids) = cache.get(word) {
                out.extend_from_slice(ids);
                return;
            }
            stats.words_tokenized += 1;
            let before = out.len();
            tokenizer.wordpiece_into(word, out);
            remember(cache, word, &out[before..]);
        });
    }

    /// [`Encoder::encode`], remembering the ids of `segment` as a whole: a segment seen
    /// before costs one lookup, without the basic tokenizer. For the pieces of text that
    /// recur, such as a context's whitespace words (§4.2), not for whole questions.
    pub fn encode_segment(&mut self, segment: &str, out: &mut Vec<u32>) {
        self.stats.segments += 1;
        if let Some(ids) = self.segments.get(segment) {
            out.extend_from_slice(ids);
            return;
        }
        self.stats.segments_tokenized += 1;
        let before = out.len();
        self.encode(segment, out);
        remember(&mut self.segments, segment, &out[before..]);
    }
}

/// The tokenizer named by the command-line flags: a `tokenizer.json` when given, else
/// the `vocab.txt`.
pub fn load(
    vocab: &Path,
    tokenizer_json: Option<&Path>,
    lower_case: bool,
) -> Result<BertTokenizer> {
    match tokenizer_json {
        Some(path) => BertTokenizer::from_tokenizer_json(path, lower_case),
        None => BertTokenizer::from_vocab_file(vocab, lower_case),
    }
}

/// The name used in messages about a vocabulary that is not a file.
pub fn in_memory() -> PathBuf {
    PathBuf::from("<vocab>")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nrun\n##ning\n\
                         ,\n.\nthe\n##s\na\n##b\nrunning\n";

    fn tok(lower: bool) -> BertTokenizer {
        BertTokenizer::from_vocab_text(VOCAB, lower, &in_memory()).unwrap()
    }

    fn pieces(t: &BertTokenizer, text: &str) -> Vec<String> {
        t.tokenize(text)
            .into_iter()
            .map(|id| t.id_to_token(id).to_string())
            .collect()
    }

    #[test]
    fn wordpiece_greedy_longest_match() {
        let t = tok(true);
        assert_eq!(
            pieces(&t, "UNaffable running, runs"),
            ["un", "##aff", "##able", "running", ",", "run", "##s"]
        );
        // No full cover: one [UNK] for the whole word, earlier pieces discarded.
        assert_eq!(pieces(&t, "unaffx"), ["[UNK]"]);
        assert_eq!(pieces(&t, "[SEP] [MASK]"), ["[SEP]", "[MASK]"]);
    }

    #[test]
    fn word_length_limit_is_100_characters() {
        let t = tok(true);
        let ok = format!("a{}", "b".repeat(99));
        assert_eq!(ok.chars().count(), 100);
        assert_eq!(pieces(&t, &ok).len(), 100);
        assert_eq!(pieces(&t, &format!("{ok}b")), ["[UNK]"]);
    }

    #[test]
    fn wordpiece_edge_cases() {
        let t = tok(true);
        let pieces_of = |word: &str| {
            let mut ids = Vec::new();
            t.wordpiece_into(word, &mut ids);
            ids.iter()
                .map(|&id| t.id_to_token(id).to_string())
                .collect::<Vec<_>>()
        };
        assert!(pieces_of("").is_empty());
        assert_eq!(pieces_of("runnings"), ["running", "##s"]);
        assert_eq!(pieces_of("unaffablex"), ["[UNK]"]);
        // A vocabulary entry starting with the prefix matches a word as a whole.
        assert_eq!(pieces_of("##s"), ["##s"]);
        assert_eq!(pieces_of("s"), ["[UNK]"]);
        assert_eq!(pieces_of(&"\u{e9}".repeat(101)), ["[UNK]"]);
        let mut ids = vec![7];
        t.wordpiece_into("unaffx", &mut ids);
        assert_eq!(
            ids,
            [7, t.unk_id()],
            "earlier pieces are discarded, not the buffer"
        );
    }

    #[test]
    fn vocabulary_rules() {
        let t = BertTokenizer::from_vocab_text(
            "[UNK]\r\n[CLS]\r[SEP]\n x \u{a0}\nx\n\n",
            true,
            &in_memory(),
        )
        .unwrap();
        // Lines split on \r\n, \r and \n; stripped; "x" twice keeps its last id.
        assert_eq!(t.vocab_size(), 6);
        assert_eq!(t.token_to_id("x"), Some(4));
        assert_eq!(t.id_to_token(3), "x");
        assert_eq!(t.token_to_id(""), Some(5));
        let err = BertTokenizer::from_vocab_text("[UNK]\n[CLS]\n", true, &in_memory())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no [SEP] token"), "{err}");
    }

    #[test]
    fn missing_vocab_file_says_what_to_do() {
        let err = BertTokenizer::from_vocab_file(Path::new("/nonexistent/vocab.txt"), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent/vocab.txt"), "{err}");
        assert!(err.contains("scripts/install_vocab.sh"), "{err}");
    }

    #[test]
    fn encoder_cache_gives_the_same_ids() {
        let t = tok(true);
        let mut enc = t.encoder();
        let mut a = Vec::new();
        enc.encode("running unaffable running", &mut a);
        let mut b = Vec::new();
        enc.encode("running unaffable running", &mut b);
        assert_eq!(a, b);
        assert_eq!(a, t.tokenize("running unaffable running"));
    }

    #[test]
    fn a_later_encoder_starts_with_the_words_an_earlier_one_left() {
        let t = tok(true);
        let text = "running unaffable running";
        let mut first = Vec::new();
        let mut enc = t.encoder();
        enc.encode_segment(text, &mut first);
        assert_eq!(enc.stats().words_tokenized, 2);
        drop(enc);
        let mut enc = t.encoder();
        let mut again = Vec::new();
        enc.encode(text, &mut again);
        enc.encode_segment(text, &mut again);
        // Every word, and the segment, from the caches the first encoder left.
        assert_eq!((enc.stats().words_tokenized, enc.stats().segments_tokenized), (0, 0));
        assert_eq!(again, [first.clone(), first.clone()].concat());
        drop(enc);
        // Two encoders at once: the second starts empty, and both caches are kept.
        let (mut a, mut b) = (t.encoder(), t.encoder());
        let (mut x, mut y) = (Vec::new(), Vec::new());
        a.encode(text, &mut x);
        b.encode(text, &mut y);
        assert_eq!((a.stats().words_tokenized, b.stats().words_tokenized), (0, 2));
        assert_eq!(x, y);
        // A clone of the tokenizer starts without them.
        let cloned = t.clone();
        let mut c = cloned.encoder();
        c.encode(text, &mut Vec::new());
        assert_eq!(c.stats().words_tokenized, 2);
    }
    #[test]
    fn caches_past_the_kept_size_are_left_to_be_freed() {
        let t = tok(true);
        let mut big = IdCache::default();
        for i in 0..=KEPT_ENTRIES {
            big.insert(&i.to_string(), &[1]);
        }
        t.warm.put((big, IdCache::default()));
        assert_eq!(t.warm.take().0.len(), 0);
        let mut small = IdCache::default();
        small.insert("a", &[1]);
        t.warm.put((small, IdCache::default()));
        assert_eq!(t.warm.take().0.len(), 1);
    }

    #[test]
    fn casing_warnings() {
        assert!(tok(true).casing_warning().is_none());
        assert!(tok(false).casing_warning().is_some());
    }

    /// The crate's `BertNormalizer` + `BertPreTokenizer` agree with ours on ordinary
    /// text but not on the §3.7 cases; this is why `basic` replaces them.
    #[test]
    fn crate_bert_pipeline_differs_where_the_spec_says() {
        use tokenizers::normalizers::bert::BertNormalizer;
        use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
        use tokenizers::{
            NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString,
            PreTokenizer,
        };
        let crate_basic = |text: &str| -> Vec<String> {
            let mut n = NormalizedString::from(text);
            BertNormalizer::new(true, true, None, true)
                .normalize(&mut n)
                .unwrap();
            let mut p = PreTokenizedString::from(n);
            BertPreTokenizer.pre_tokenize(&mut p).unwrap();
            p.get_splits(OffsetReferential::Original, OffsetType::Char)
                .into_iter()
                .map(|(s, _, _)| s.to_string())
                .collect()
        };
        for same in [
            "Hello, World! It's 5.00 $.",
            "naïve café",
            "ab中文cd",
            "a\u{b}b",
        ] {
            assert_eq!(crate_basic(same), basic_tokenize(same, true), "{same:?}");
        }
        for differs in [
            "ΟΔΟΣ",        // final sigma
            "a\u{2B820}b", // CJK range start
            "[SEP]",       // never-split special
            "a\u{1F6DC}b", // unassigned (Cn) in Unicode 14: removed; the crate keeps Cn
            "x\u{D3B}y",   // Mn since Unicode 10.0: stripped
            "x\u{2E4F}y",  // Po since Unicode 11.0: split
        ] {
            assert_ne!(
                crate_basic(differs),
                basic_tokenize(differs, true),
                "{differs:?}"
            );
        }
    }
}
