//! The official answer normalization and per-answer metrics (algorithm §8.1, §8.2, §8.4).
//!
//! `normalize_answer`: Python `lower()`, delete the 32 ASCII characters of
//! `string.punctuation`, replace each whole word `a`/`an`/`the` (`\b(a|an|the)\b`) by a
//! space, then collapse Python whitespace (§3.5). Unicode punctuation is kept (§10.25).
//!
//! Python details approximated with Rust's tables: `lower()` uses Rust's Unicode
//! version (not Python 3.11's 14.0), and a `\w` character for the word boundary is
//! `char::is_alphanumeric` (Python: categories L*/N* and `_`; they differ only on
//! combining marks with the Other_Alphabetic property next to a bare article).

use std::collections::HashMap;

use crate::decode::is_py_whitespace;
use rustc_hash::FxBuildHasher as WordHash;

/// `string.punctuation`.
fn is_ascii_punct(c: char) -> bool {
    c.is_ascii_punctuation()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The official `normalize_answer` (§8.1).
pub fn normalize_answer(s: &str) -> String {
    let mut out = String::new();
    normalize_answer_into(s, &mut out);
    out
}

/// [`normalize_answer`] into `out` (replacing what it held), reusing its buffer.
pub(crate) fn normalize_answer_into(s: &str, out: &mut String) {
    if s.is_ascii() {
        normalize_ascii_into(s.as_bytes(), out);
    } else {
        *out = normalize_general(s);
    }
}

/// [`normalize_answer`] step by step, for any text.
fn normalize_general(s: &str) -> String {
    let lowered = s.to_lowercase();
    let no_punct: String = lowered.chars().filter(|&c| !is_ascii_punct(c)).collect();
    // remove_articles: maximal runs of word characters equal to an article become " ".
    let mut no_articles = String::with_capacity(no_punct.len());
    let mut run_start: Option<usize> = None;
    let flush = |out: &mut String, run: &str| {
        if matches!(run, "a" | "an" | "the") {
            out.push(' ');
        } else {
            out.push_str(run);
        }
    };
    for (i, c) in no_punct.char_indices() {
        if is_word_char(c) {
            run_start.get_or_insert(i);
        } else {
            if let Some(st) = run_start.take() {
                flush(&mut no_articles, &no_punct[st..i]);
            }
            no_articles.push(c);
        }
    }
    if let Some(st) = run_start {
        flush(&mut no_articles, &no_punct[st..]);
    }
    crate::decode::py_split_join(&no_articles)
}

/// [`normalize_answer`] of ASCII text, in one pass over the bytes: the same steps,
/// with ASCII lower-casing, punctuation and word characters (`char::is_alphanumeric`
/// and `to_lowercase` agree with their ASCII versions there).
fn normalize_ascii_into(s: &[u8], out: &mut String) {
    // Lower-cased, punctuation removed, articles replaced by a space.
    let mut text: Vec<u8> = std::mem::take(out).into_bytes();
    text.clear();
    text.reserve(s.len());
    let mut run_start: Option<usize> = None;
    let flush = |text: &mut Vec<u8>, start: usize| {
        if matches!(&text[start..], b"a" | b"an" | b"the") {
            text.truncate(start);
            text.push(b' ');
        }
    };
    for &b in s {
        if b.is_ascii_punctuation() {
            continue;
        }
        let c = b.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            run_start.get_or_insert(text.len());
        } else if let Some(start) = run_start.take() {
            flush(&mut text, start);
        }
        text.push(c);
    }
    if let Some(start) = run_start {
        flush(&mut text, start);
    }
    // `" ".join(text.split())`, in place: Python's ASCII whitespace.
    // Writes stay at or before the byte being read.
    let (mut w, mut gap) = (0, false);
    for r in 0..text.len() {
        let c = text[r];
        if matches!(c, 0x09..=0x0d | 0x1c..=0x20) {
            gap = true;
            continue;
        }
        if gap && w > 0 {
            text[w] = b' ';
            w += 1;
        }
        gap = false;
        text[w] = c;
        w += 1;
    }
    text.truncate(w);
    // Only ASCII bytes went in.
    *out = String::from_utf8(text).unwrap_or_default();
}

/// `normalize_answer(s).split()`.
fn tokens(s: &str) -> Vec<String> {
    split(&normalize_answer(s))
}

/// `.split()` of an already normalized answer.
fn split(normalized: &str) -> Vec<String> {
    normalized
        .split(is_py_whitespace)
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// An answer normalized once, for scoring against several others.
#[derive(Debug, Clone, Default)]
pub(crate) struct Normalized {
    pub text: String,
    /// `text.split()` as byte ranges of `text`.
    tokens: Vec<(u32, u32)>,
}

impl Normalized {
    #[cfg(test)]
    pub(crate) fn new(s: &str) -> Self {
        let mut n = Normalized::default();
        n.set(s);
        n
    }

    /// Becomes the normalization of `s`, in the buffers it has.
    pub(crate) fn set(&mut self, s: &str) {
        normalize_answer_into(s, &mut self.text);
        let (text, tokens) = (&self.text, &mut self.tokens);
        tokens.clear();
        // `normalize_answer` leaves no whitespace but single U+0020 separators.
        let mut start = 0usize;
        for (i, b) in text.bytes().enumerate() {
            if b == b' ' {
                tokens.push((start as u32, i as u32));
                start = i + 1;
            }
        }
        if start < text.len() {
            tokens.push((start as u32, text.len() as u32));
        }
        debug_assert_eq!(
            tokens.len(),
            text.split(is_py_whitespace)
                .filter(|w| !w.is_empty())
                .count()
        );
    }

    fn token(&self, i: usize) -> &str {
        let (a, b) = self.tokens[i];
        &self.text[a as usize..b as usize]
    }
}

/// v1.1 F1 of two normalized answers.
pub(crate) fn f1_v1_normalized(p: &Normalized, g: &Normalized) -> f64 {
    let same = num_same_normalized(p, g);
    if same == 0 {
        return 0.0;
    }
    f1_counts(p.tokens.len(), g.tokens.len(), same)
}

/// v2.0 F1 of two normalized answers (`get_tokens` of an empty raw string is `[]`,
/// the same as the tokens of its normalization).
pub(crate) fn f1_v2_normalized(p: &Normalized, g: &Normalized) -> f64 {
    if p.tokens.is_empty() || g.tokens.is_empty() {
        return f64::from(u8::from(p.tokens.is_empty() && g.tokens.is_empty()));
    }
    f1_v1_normalized(p, g)
}

/// [`num_same`] of two normalized answers.
fn num_same_normalized(a: &Normalized, b: &Normalized) -> usize {
    let (n, m) = (a.tokens.len(), b.tokens.len());
    if n > 64 {
        let a: Vec<&str> = (0..n).map(|i| a.token(i)).collect();
        let b: Vec<&str> = (0..m).map(|i| b.token(i)).collect();
        return num_same(&a, &b);
    }
    // Each token of `b` takes the first unused equal token of `a`: the sum over tokens
    // of the smaller count, as `Counter & Counter`.
    let mut used = 0u64;
    let mut same = 0;
    for j in 0..m {
        let t = b.token(j);
        if let Some(i) = (0..n).find(|&i| used & (1 << i) == 0 && a.token(i) == t) {
            used |= 1 << i;
            same += 1;
        }
    }
    same
}

/// Size of the multiset intersection (`Counter & Counter`).
fn num_same<S: AsRef<str>>(a: &[S], b: &[S]) -> usize {
    let mut counts: HashMap<&str, usize, WordHash> =
        HashMap::with_capacity_and_hasher(a.len(), WordHash);
    for t in a {
        *counts.entry(t.as_ref()).or_insert(0) += 1;
    }
    let mut same = 0;
    for t in b {
        if let Some(n) = counts.get_mut(t.as_ref()) {
            if *n > 0 {
                *n -= 1;
                same += 1;
            }
        }
    }
    same
}

fn f1_from(pred: &[String], gold: &[String], same: usize) -> f64 {
    f1_counts(pred.len(), gold.len(), same)
}

fn f1_counts(pred: usize, gold: usize, same: usize) -> f64 {
    let precision = 1.0 * same as f64 / pred as f64;
    let recall = 1.0 * same as f64 / gold as f64;
    (2.0 * precision * recall) / (precision + recall)
}

/// Exact match, both versions: the normalized strings are equal.
pub fn exact(prediction: &str, gold: &str) -> bool {
    normalize_answer(prediction) == normalize_answer(gold)
}

/// v1.1 F1 (E1 `f1_score`): 0 when nothing is shared, including the both-empty case.
pub fn f1_v1(prediction: &str, gold: &str) -> f64 {
    let p = tokens(prediction);
    let g = tokens(gold);
    let same = num_same(&p, &g);
    if same == 0 {
        return 0.0;
    }
    f1_from(&p, &g, same)
}

/// v2.0 F1 (E2 `compute_f1`): 1 when both token lists are empty, 0 when exactly one
/// is, otherwise as v1.1. `get_tokens("")` is `[]`.
pub fn f1_v2(prediction: &str, gold: &str) -> f64 {
    let p = if prediction.is_empty() {
        Vec::new()
    } else {
        tokens(prediction)
    };
    let g = if gold.is_empty() {
        Vec::new()
    } else {
        tokens(gold)
    };
    if p.is_empty() || g.is_empty() {
        return f64::from(u8::from(p == g));
    }
    let same = num_same(&p, &g);
    if same == 0 {
        return 0.0;
    }
    f1_from(&p, &g, same)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization() {
        assert_eq!(normalize_answer("The  Cat!"), "cat");
        assert_eq!(normalize_answer("an apple, a pear"), "apple pear");
        assert_eq!(normalize_answer("another theory"), "another theory");
        assert_eq!(normalize_answer("A.B."), "ab");
        assert_eq!(normalize_answer("the_end"), "theend");
        assert_eq!(normalize_answer("Dr. Smith’s"), "dr smith’s");
        assert_eq!(normalize_answer("x\u{a0}the\u{2003}y"), "x y");
        assert_eq!(normalize_answer("théa the"), "théa");
        assert_eq!(normalize_answer(""), "");
    }

    /// The one-pass ASCII normalization equals the step-by-step one, and the token
    /// ranges and the bitmask intersection equal `.split()` and `Counter & Counter`.
    #[test]
    fn ascii_fast_path_equals_general() {
        use proptest::prelude::*;
        let piece = proptest::sample::select(vec![
            "a", "an", "the", "The", "A", "x", "cat", "b_c", "_", "the_", "1", " ", "  ", "\t",
            "\n", "\x0b", "\x1c", "\x1f", "\x01", "\x7f", ".", ",", "'", "-", "!", "an.", ".the",
            "AN", "tHe", "ab", "0a",
        ]);
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(
                &(
                    proptest::collection::vec(piece.clone(), 0..12),
                    proptest::collection::vec(piece, 0..12),
                ),
                |(a, b)| {
                    let (a, b) = (a.concat(), b.concat());
                    for s in [&a, &b] {
                        // Into a buffer that held something else, as a reused one does.
                        let mut out = String::from("left over, longer than most");
                        normalize_ascii_into(s.as_bytes(), &mut out);
                        prop_assert_eq!(out, normalize_general(s));
                        let n = Normalized::new(s);
                        let toks: Vec<&str> = (0..n.tokens.len()).map(|i| n.token(i)).collect();
                        prop_assert_eq!(toks, split(&n.text));
                    }
                    let (p, g) = (Normalized::new(&a), Normalized::new(&b));
                    prop_assert_eq!(
                        num_same_normalized(&p, &g),
                        num_same(&split(&p.text), &split(&g.text))
                    );
                    prop_assert_eq!(f1_v1_normalized(&p, &g).to_bits(), f1_v1(&a, &b).to_bits());
                    prop_assert_eq!(f1_v2_normalized(&p, &g).to_bits(), f1_v2(&a, &b).to_bits());
                    Ok(())
                },
            )
            .unwrap();
    }

    /// Algorithm §11.7 edge cases.
    #[test]
    fn f1_edge_cases() {
        assert_eq!(f1_v1("", "cat"), 0.0);
        assert_eq!(f1_v2("", "cat"), 0.0);
        assert_eq!(f1_v1("the", "a"), 0.0);
        assert_eq!(f1_v2("the", "a"), 1.0);
        assert!(exact("The cat", "cat"));
        assert!(!exact("Dr. Smith’s", "Dr Smith's"));
        assert_eq!(
            f1_v1("x b c", "b c d e"),
            (2.0 * (2.0 / 3.0) * 0.5) / (2.0 / 3.0 + 0.5)
        );
        assert_eq!(f1_v1("x x y", "x y y"), f1_v2("x x y", "x y y"));
        assert_eq!(
            f1_v1("x x y", "x y y"),
            (2.0 * (2.0 / 3.0) * (2.0 / 3.0)) / (4.0 / 3.0)
        );
    }
}
