//! Stage `squad`: a SQuAD v1.1 / v2.0 file → [`Dataset`] (algorithm §1, §2).
//!
//! Contract:
//! - Articles → paragraphs → questions are kept in file order; that order is
//!   `example_index` (§1.5).
//! - Each context is split into words once, with the reader's five whitespace
//!   characters (§2.1: U+0020, `\t`, `\r`, `\n`, U+202F) and a `char_to_word_offset` entry
//!   per code point; all its questions share the [`Paragraph`].
//! - The file is parsed into typed records (no generic JSON tree), so memory stays a
//!   small multiple of the file size. A leading UTF-8 byte order mark is skipped. JSON
//!   of another shape (an array, an object without a `data` array) is refused as "not a
//!   SQuAD file", saying what it holds. Syntax and type errors name the file, line and
//!   column; semantic errors (missing `question`, duplicate `id`, an `answer_start`
//!   outside the context) name the question id.
//! - Degenerate but valid input (§10: an empty question, a context without words) is
//!   kept, as the reference keeps it, and reported as a [`Warning`]; [`Loaded::strict`]
//!   turns warnings into errors.
//! - Answers and `is_impossible` are read as written (prediction mode ignores them,
//!   §2.2.2; scoring and the v2 auto-detection use them). `plausible_answers` is never
//!   read.

use std::collections::HashSet;
use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Location, Result};
use crate::types::{Answer, Dataset, Example, Paragraph, Words};
use rustc_hash::FxBuildHasher;

/// Degenerate but valid input, reported and otherwise handled as the reference does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub location: Location,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl Warning {
    /// The same report as an input error (for `--strict`).
    pub fn into_error(self) -> Error {
        Error::input(self.location, self.message)
    }
}

/// A read dataset and what was odd about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loaded {
    pub dataset: Dataset,
    pub warnings: Vec<Warning>,
    /// Answers whose `answer_start` is `null` or absent (some public files); they are
    /// kept with offset 0. Not a warning: prediction and scoring never read offsets.
    pub answers_without_start: usize,
    /// SHA-256 (hex) of the bytes read, from [`load_digested`]: the bytes the dataset
    /// came from, without reading the file again.
    pub sha256: Option<String>,
}

impl Loaded {
    /// The dataset, or the first warning as an error.
    pub fn strict(self) -> Result<Dataset> {
        match self.warnings.into_iter().next() {
            Some(w) => Err(w.into_error()),
            None => Ok(self.dataset),
        }
    }
}

/// Reads a SQuAD file; warnings are dropped (use [`load`] to see them).
pub fn read(path: &Path) -> Result<Dataset> {
    Ok(load(path)?.dataset)
}

/// Reads a SQuAD file with its warnings.
pub fn load(path: &Path) -> Result<Loaded> {
    load_file(path, false)
}

/// [`load`], with [`Loaded::sha256`] of the bytes read.
pub fn load_digested(path: &Path) -> Result<Loaded> {
    load_file(path, true)
}

fn load_file(path: &Path, digest: bool) -> Result<Loaded> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let sha256 = digest.then(|| crate::sha256::of_bytes(&bytes));
    let raw = parse(&bytes, path)?;
    drop(bytes); // the typed records own their text; keep the peak low
    let mut loaded = convert(raw, path)?;
    loaded.sha256 = sha256;
    Ok(loaded)
}

/// Reads SQuAD JSON from a reader; `path` names it in messages.
pub fn from_reader(mut reader: impl Read, path: &Path) -> Result<Loaded> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    from_slice(&bytes, path)
}

/// Reads SQuAD JSON from bytes; `path` names it in messages.
pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Loaded> {
    convert(parse(bytes, path)?, path)
}

/// `bytes` without the UTF-8 byte order mark some Windows editors write at the start of
/// a file (JSON parsers refuse it; Python's `utf-8-sig` drops it).
pub(crate) fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

pub(crate) fn parse(bytes: &[u8], path: &Path) -> Result<RawFile> {
    let bytes = strip_bom(bytes);
    serde_json::from_slice(bytes).map_err(|e| {
        // JSON of another shape is named as such, not with serde's message about the
        // records it expected; syntax errors and errors deeper in a SQuAD file keep theirs.
        match e.is_data().then(|| not_squad(bytes)).flatten() {
            Some(found) => Error::input(
                Location::file(path),
                format!("not a SQuAD file: {found}; a SQuAD file is a JSON object whose \"data\" is an array of articles"),
            ),
            None => json_error(path, &e),
        }
    })
}

/// What a JSON document that is not shaped as a SQuAD file holds instead (`None`: it
/// is an object with a `data` array, or not JSON at all). Reads the document once more
/// without keeping any of it: only after the typed parse failed.
fn not_squad(bytes: &[u8]) -> Option<String> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess};
    struct Top;
    impl<'de> serde::de::Visitor<'de> for Top {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut keys, mut data) = (Vec::new(), None);
            while let Some(key) = map.next_key::<String>()? {
                if key == "data" {
                    data = Some(map.next_value::<Kind>()?.0);
                } else {
                    map.next_value::<IgnoredAny>()?;
                    keys.push(format!("{key:?}"));
                }
            }
            Ok(match data {
                Some("an array") => None,
                Some(kind) => Some(format!("its \"data\" is {kind}")),
                None if keys.is_empty() => Some("an empty JSON object".into()),
                None => {
                    let more = if keys.len() > 5 { ", …" } else { "" };
                    keys.truncate(5);
                    Some(format!(
                        "an object without \"data\" (keys {}{more})",
                        keys.join(", ")
                    ))
                }
            })
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut n = 0;
            while seq.next_element::<IgnoredAny>()?.is_some() {
                n += 1;
            }
            let s = if n == 1 { "" } else { "s" };
            Ok(Some(format!(
                "a JSON array of {n} item{s} at the top level"
            )))
        }
    }
    // Other top-level values: named by their kind.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match de.deserialize_any(Top) {
        Ok(found) => found,
        Err(_) => {
            let kind = serde_json::from_slice::<Kind>(bytes).ok()?.0;
            Some(format!("{kind} at the top level"))
        }
    }
}

/// The kind of a JSON value, its content skipped.
struct Kind(&'static str);

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = &'static str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok("true or false")
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok("a number")
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok("a number")
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok("a number")
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok("a string")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok("null")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                IgnoredAny.visit_seq(seq).map(|_| "an array")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                IgnoredAny.visit_map(map).map(|_| "an object")
            }
        }
        d.deserialize_any(V).map(Kind)
    }
}

fn json_error(path: &Path, e: &serde_json::Error) -> Error {
    Error::json(path, e)
}

/// A SQuAD file as parsed, before [`convert`]: also what the other formats' readers
/// (`crate::data`) build, so that every format is checked and converted by one code.
#[derive(Deserialize, Default)]
pub(crate) struct RawFile {
    #[serde(default)]
    pub version: Option<RawVersion>,
    pub data: Vec<RawArticle>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum RawVersion {
    Text(String),
    Number(serde_json::Number),
}

#[derive(Deserialize, Default)]
pub(crate) struct RawArticle {
    pub paragraphs: Vec<RawParagraph>,
}

#[derive(Deserialize)]
pub(crate) struct RawParagraph {
    pub context: String,
    pub qas: Vec<RawQa>,
}

#[derive(Deserialize)]
pub(crate) struct RawQa {
    pub id: String,
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub answers: Vec<RawAnswer>,
    #[serde(default)]
    pub is_impossible: bool,
}

#[derive(Deserialize)]
pub(crate) struct RawAnswer {
    pub text: String,
    /// Some public files write `null`; prediction and scoring never read the offset.
    #[serde(default)]
    pub answer_start: Option<usize>,
}

pub use crate::types::is_reader_whitespace;

/// The in-memory dataset of one context and its questions (ids `q1`, `q2`, …).
pub fn questions_about(context: &str, questions: &[String]) -> Dataset {
    let paragraph = split_context(context);
    let examples = questions
        .iter()
        .enumerate()
        .map(|(i, q)| Example {
            example_index: i,
            qas_id: format!("q{}", i + 1),
            question_text: q.clone(),
            paragraph_index: 0,
            answers: Vec::new(),
            is_impossible: false,
        })
        .collect();
    Dataset {
        version: String::new(),
        paragraphs: vec![paragraph],
        examples,
    }
}

/// Splits a context into words and the per-code-point word index (§2.1).
pub fn split_context(context: &str) -> Paragraph {
    split_owned_context(context.to_string())
}

/// §2.1's scan, with each word copied once as a slice of the context (into the
/// paragraph's one word buffer) rather than grown character by character. ASCII contexts (nearly all of SQuAD) go word by word over
/// the bytes, without decoding UTF-8. The per-code-point word index is not kept: only
/// `ask` needs it ([`Paragraph::char_to_word_offset`] computes it); evaluation never
/// reads it.
fn split_owned_context(context: String) -> Paragraph {
    let mut doc_tokens = Words::default();
    if context.is_ascii() {
        let bytes = context.as_bytes();
        // Separators are at most b' ': one comparison rules out nearly every byte.
        let separates = |b: u8| b <= b' ' && matches!(b, b' ' | b'\t' | b'\r' | b'\n');
        // About one word per six bytes of English; rarely grown more than once.
        doc_tokens = Words::with_capacity(bytes.len() / 6 + 1, bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            while i < bytes.len() && separates(bytes[i]) {
                i += 1;
            }
            let word = i;
            i = ascii_word_end(bytes, i);
            if word < i {
                doc_tokens.push_at(&context[word..i], word);
            }
        }
    } else {
        // Byte and code point where the current word started, if inside one.
        let mut word_start: Option<(usize, usize)> = None;
        for (n, (i, c)) in context.char_indices().enumerate() {
            if is_reader_whitespace(c) {
                if let Some((s, at)) = word_start.take() {
                    doc_tokens.push_at(&context[s..i], at);
                }
            } else if word_start.is_none() {
                word_start = Some((i, n));
            }
        }
        if let Some((s, at)) = word_start {
            doc_tokens.push_at(&context[s..], at);
        }
    }
    Paragraph {
        context,
        doc_tokens,
    }
}

/// The end of the ASCII word at `i`: the first reader separator (space, tab, CR, LF)
/// from `i` on, or the end. Eight bytes at a time: a word of English is usually found in
/// one step (a byte-at-a-time scan was most of the context split's time). A control
/// byte below the space that is not a separator belongs to the word.
fn ascii_word_end(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x21; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    while let Some(chunk) = bytes.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        // The lowest flagged byte is the first one at most b' ' (ASCII: high bits clear);
        // flags above it may be false, so only the lowest is used.
        let low = x.wrapping_sub(ONES) & !x & HIGH;
        if low == 0 {
            i += 8;
            continue;
        }
        let at = i + (low.trailing_zeros() / 8) as usize;
        if matches!(bytes[at], b' ' | b'\t' | b'\r' | b'\n') {
            return at;
        }
        i = at + 1;
    }
    while i < bytes.len() && !matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

pub(crate) fn convert(raw: RawFile, path: &Path) -> Result<Loaded> {
    let version = match raw.version {
        Some(RawVersion::Text(s)) => s,
        Some(RawVersion::Number(n)) => n.to_string(),
        None => String::new(),
    };
    let mut dataset = Dataset {
        version,
        ..Dataset::default()
    };
    let mut warnings = Vec::new();
    let (paragraphs, questions) = raw.data.iter().fold((0, 0), |(p, q), a| {
        (
            p + a.paragraphs.len(),
            q + a.paragraphs.iter().map(|p| p.qas.len()).sum::<usize>(),
        )
    });
    dataset.paragraphs.reserve_exact(paragraphs);
    dataset.examples.reserve_exact(questions);
    // The position (in question order) of the first id seen before, found up front
    // over the parsed records so the ids are neither copied nor hashed twice; it is
    // reported when the loop below reaches it, as a check in the loop would.
    let first_duplicate = {
        let mut seen: HashSet<&str, FxBuildHasher> =
            HashSet::with_capacity_and_hasher(questions, FxBuildHasher);
        raw.data
            .iter()
            .flat_map(|a| &a.paragraphs)
            .flat_map(|p| &p.qas)
            .position(|qa| !seen.insert(&qa.id))
    };
    let mut unknown_starts = 0;
    for article in raw.data {
        for para in article.paragraphs {
            let context_chars = if para.context.is_ascii() {
                para.context.len()
            } else {
                para.context.chars().count()
            };
            if i32::try_from(context_chars).is_err() {
                let id = para.qas.first().map_or("", |q| q.id.as_str());
                return Err(Error::input(
                    Location::question(path, id),
                    "context longer than 2^31 characters",
                ));
            }
            let paragraph = split_owned_context(para.context);
            let paragraph_index = dataset.paragraphs.len();
            if paragraph.doc_tokens.is_empty() && !para.qas.is_empty() {
                warnings.push(Warning {
                    location: Location::question(path, &para.qas[0].id),
                    message: format!(
                        "the context has no words (only whitespace), so its {} question(s) \
                         get no features and no answer (algorithm §10.18)",
                        para.qas.len()
                    ),
                });
            }
            for qa in para.qas {
                if first_duplicate == Some(dataset.examples.len()) {
                    return Err(Error::input(
                        Location::question(path, &qa.id),
                        "duplicate question id",
                    ));
                }
                let Some(question_text) = qa.question else {
                    return Err(Error::input(
                        Location::question(path, &qa.id),
                        "missing field `question`",
                    ));
                };
                if question_text.chars().all(char::is_whitespace) {
                    warnings.push(Warning {
                        location: Location::question(path, &qa.id),
                        message: "empty question: features hold no question pieces \
                                  ([CLS] [SEP] context [SEP])"
                            .to_string(),
                    });
                }
                let mut answers = Vec::with_capacity(qa.answers.len());
                for a in qa.answers {
                    let Some(answer_start) = a.answer_start else {
                        unknown_starts += 1;
                        // The offset is unknown; nothing downstream reads it (§2.2.2:
                        // prediction mode ignores answers, §8 scores texts only).
                        answers.push(Answer {
                            text: a.text,
                            answer_start: 0,
                        });
                        continue;
                    };
                    // An empty answer may sit at the very end; any other must start on
                    // a character of the context.
                    let outside = answer_start > context_chars
                        || (answer_start == context_chars && !a.text.is_empty());
                    if outside {
                        return Err(Error::input(
                            Location::question(path, &qa.id),
                            format!(
                                "answer_start {answer_start} is outside the context \
                                 ({context_chars} characters)"
                            ),
                        ));
                    }
                    let end = answer_start + a.text.chars().count();
                    if end > context_chars {
                        warnings.push(Warning {
                            location: Location::question(path, &qa.id),
                            message: format!(
                                "answer {:?} at {answer_start} runs past the end of the \
                                 context ({context_chars} characters)",
                                a.text
                            ),
                        });
                    }
                    answers.push(Answer {
                        text: a.text,
                        answer_start,
                    });
                }
                dataset.examples.push(Example {
                    example_index: dataset.examples.len(),
                    qas_id: qa.id,
                    question_text,
                    paragraph_index,
                    answers,
                    is_impossible: qa.is_impossible,
                });
            }
            dataset.paragraphs.push(paragraph);
        }
    }
    Ok(Loaded {
        dataset,
        warnings,
        answers_without_start: unknown_starts,
        sha256: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Loaded> {
        from_slice(json.as_bytes(), Path::new("t.json"))
    }

    #[test]
    fn context_split_of_spec_11() {
        let p = split_context("  Hi\u{a0}there  you\u{202f}ok ");
        assert_eq!(
            p.doc_tokens.iter().collect::<Vec<_>>(),
            ["Hi\u{a0}there", "you", "ok"]
        );
        assert_eq!(
            p.char_to_word_offset(),
            [-1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2]
        );
        assert_eq!(p.char_to_word_offset().len(), p.context.chars().count());
    }

    /// §2.1 exactly as written: one character at a time, each appended to the last word.
    fn split_like_the_reference(context: &str) -> (Vec<String>, Vec<i32>) {
        let mut doc_tokens: Vec<String> = Vec::new();
        let mut offsets = Vec::new();
        let mut prev_ws = true;
        for c in context.chars() {
            if is_reader_whitespace(c) {
                prev_ws = true;
            } else {
                match doc_tokens.last_mut() {
                    Some(last) if !prev_ws => last.push(c),
                    _ => doc_tokens.push(c.to_string()),
                }
                prev_ws = false;
            }
            offsets.push(doc_tokens.len() as i32 - 1);
        }
        (doc_tokens, offsets)
    }

    proptest::proptest! {
        /// The slicing split (byte-wise on ASCII) equals the reference's scan.
        #[test]
        fn context_split_equals_the_reference_scan(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "Bc", ".", " ", "  ", "\t", "\r\n", "\u{b}", "\u{a0}", "\u{202f}",
                    "é", "中", "😀", "\u{3000}", "\u{2028}", "characteristically", "\u{0}",
                    "\u{1f}", "\u{c}", "!", "~\u{7f}", "\n", "\r",
                ]),
                0..60,
            ),
            ascii_only in proptest::bool::ANY,
        ) {
            let mut context = parts.concat();
            if ascii_only {
                context.retain(|c| c.is_ascii());
            }
            let p = split_context(&context);
            let (words, offsets) = split_like_the_reference(&context);
            proptest::prop_assert_eq!(p.doc_tokens.iter().collect::<Vec<_>>(), words.iter().map(String::as_str).collect::<Vec<_>>());
            proptest::prop_assert_eq!(&p.char_to_word_offset(), &offsets);
            let word_at: Vec<i32> = (0..offsets.len())
                .map(|c| p.doc_tokens.word_at_char(c).map_or(-1, |w| w as i32))
                .collect();
            proptest::prop_assert_eq!(word_at, offsets);
            proptest::prop_assert_eq!(p.context, context);
        }
    }

    #[test]
    fn only_five_characters_separate_words() {
        let p = split_context("a\u{3000}b\u{2009}c\u{b}d\u{200b}e\u{2028}f\tg\rh\ni");
        assert_eq!(
            p.doc_tokens.iter().collect::<Vec<_>>(),
            ["a\u{3000}b\u{2009}c\u{b}d\u{200b}e\u{2028}f", "g", "h", "i"]
        );
        // An astral character is one code point.
        let p = split_context("😀 x");
        assert_eq!(p.char_to_word_offset(), [0, 0, 1]);
    }

    /// A file is read through a map (or read when it cannot be mapped) to the same
    /// dataset, with the digest of its bytes when asked for.
    #[test]
    fn files_load_with_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.json");
        let text = r#"{"version": "1.1", "data": [{"paragraphs": [{"context": "a b",
            "qas": [{"id": "q", "question": "a?", "answers": [{"text": "b", "answer_start": 2}]}]}]}]}"#;
        std::fs::write(&path, text).unwrap();
        let loaded = load_digested(&path).unwrap();
        assert_eq!(
            loaded.sha256.as_deref(),
            Some(crate::sha256::of_bytes(text.as_bytes()).as_str())
        );
        assert_eq!(loaded.sha256, Some(crate::sha256::of_file(&path).unwrap()));
        assert_eq!(
            loaded.dataset,
            from_slice(text.as_bytes(), &path).unwrap().dataset
        );
        assert_eq!(load(&path).unwrap().sha256, None);
        // Nothing to map: read, and the JSON error names the file.
        std::fs::write(&path, "").unwrap();
        let e = load_digested(&path).unwrap_err().to_string();
        assert!(e.contains("d.json"), "{e}");
    }

    #[test]
    fn reads_v2_in_file_order() {
        let l = parse(
            r#"{"version":"v2.0","data":[{"title":"T","paragraphs":[
              {"context":"a b","qas":[{"id":"q1","question":"x?","answers":[{"text":"b","answer_start":2}]},
                                       {"id":"q2","question":"y?","answers":[],"is_impossible":true,
                                        "plausible_answers":[{"text":"a","answer_start":0}]}]},
              {"context":"c","qas":[{"id":"q3","question":"z?","answers":[]}]}]}]}"#,
        )
        .unwrap();
        assert!(l.warnings.is_empty());
        let d = l.dataset;
        assert_eq!(d.version, "v2.0");
        assert!(d.looks_like_v2());
        let ids: Vec<_> = d
            .examples
            .iter()
            .map(|e| (e.qas_id.as_str(), e.paragraph_index, e.example_index))
            .collect();
        assert_eq!(ids, [("q1", 0, 0), ("q2", 0, 1), ("q3", 1, 2)]);
        assert!(d.examples[1].is_impossible && d.examples[1].answers.is_empty());
        assert_eq!(d.examples[0].answers[0].answer_start, 2);
    }

    #[test]
    fn syntax_and_type_errors_name_line_and_column() {
        let err = parse("{\"data\": [\n {\"paragraphs\": [}]}")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("t.json:2:18: "), "{err}");
        let err = parse("{\"data\": [{\"paragraphs\": [{\"context\": 5, \"qas\": []}]}]}")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.json:1:") && err.contains("invalid type"),
            "{err}"
        );
        let err = parse("{\"data\": [{\"paragraphs\": [{\"context\": \"x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("t.json:1:") && err.contains("EOF"), "{err}");
        let err = parse(r#"{"data":[{"paragraphs":[{"context":"x","qas":[{"question":"q"}]}]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing field `id`"), "{err}");
    }

    #[test]
    fn semantic_errors_name_the_question() {
        let err = parse(r#"{"data":[{"paragraphs":[{"context":"x","qas":[{"id":"a1"}]}]}]}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "t.json (question id \"a1\"): missing field `question`");
        let err = parse(
            r#"{"data":[{"paragraphs":[{"context":"x","qas":[{"id":"a","question":"q"},{"id":"a","question":"r"}]}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(err, "t.json (question id \"a\"): duplicate question id");
        let err = parse(
            r#"{"data":[{"paragraphs":[{"context":"xé","qas":[{"id":"a","question":"q","answers":[{"text":"y","answer_start":2}]}]}]}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("answer_start 2 is outside the context (2 characters)"),
            "{err}"
        );
    }

    #[test]
    fn null_answer_start_is_accepted() {
        let l = parse(
            r#"{"data":[{"paragraphs":[{"context":"a b","qas":[{"id":"q","question":"x",
                "answers":[{"text":"b","answer_start":null},{"text":"a"}]}]}]}]}"#,
        )
        .unwrap();
        assert_eq!(l.answers_without_start, 2);
        assert!(l.warnings.is_empty());
        assert_eq!(l.dataset.examples[0].answers[0].text, "b");
    }

    #[test]
    fn degenerate_input_warns_and_strict_refuses() {
        let l = parse(
            r#"{"data":[{"paragraphs":[{"context":" \n ","qas":[{"id":"a","question":"q"}]},
                                      {"context":"x","qas":[{"id":"b","question":"  "}]}]}]}"#,
        )
        .unwrap();
        assert_eq!(l.dataset.examples.len(), 2);
        assert_eq!(l.warnings.len(), 2);
        assert!(l.warnings[0].to_string().contains("question id \"a\""));
        assert!(l.warnings[1].message.contains("empty question"));
        let err = l.strict().unwrap_err().to_string();
        assert!(err.contains("no words"), "{err}");
    }
}
