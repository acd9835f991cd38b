//! The official answer normalization and per-answer metrics (spec §8.1, §8.2, §8.4).
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

/// `string.punctuation`.
fn is_ascii_punct(c: char) -> bool {
    c.is_ascii_punctuation()
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The official `normalize_answer` (§8.1).
pub fn normalize_answer(s: &str) -> String {
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
#[derive(Debug, Clone)]
pub(crate) struct Normalized {
    pub text: String,
    pub tokens: Vec<String>,
}

impl Normalized {
    pub fn new(s: &str) -> Self {
        let text = normalize_answer(s);
        let tokens = split(&text);
        Normalized { text, tokens }
    }
}

/// v1.1 F1 of two normalized answers.
pub(crate) fn f1_v1_normalized(p: &Normalized, g: &Normalized) -> f64 {
    let same = num_same(&p.tokens, &g.tokens);
    if same == 0 {
        return 0.0;
    }
    f1_from(&p.tokens, &g.tokens, same)
}

/// v2.0 F1 of two normalized answers (`get_tokens` of an empty raw string is `[]`,
/// the same as the tokens of its normalization).
pub(crate) fn f1_v2_normalized(p: &Normalized, g: &Normalized) -> f64 {
    if p.tokens.is_empty() || g.tokens.is_empty() {
        return f64::from(u8::from(p.tokens == g.tokens));
    }
    f1_v1_normalized(p, g)
}

/// Size of the multiset intersection (`Counter & Counter`).
fn num_same(a: &[String], b: &[String]) -> usize {
    let mut counts: HashMap<&str, usize> = HashMap::with_capacity(a.len());
    for t in a {
        *counts.entry(t).or_insert(0) += 1;
    }
    let mut same = 0;
    for t in b {
        if let Some(n) = counts.get_mut(t.as_str()) {
            if *n > 0 {
                *n -= 1;
                same += 1;
            }
        }
    }
    same
}

fn f1_from(pred: &[String], gold: &[String], same: usize) -> f64 {
    let precision = 1.0 * same as f64 / pred.len() as f64;
    let recall = 1.0 * same as f64 / gold.len() as f64;
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

    /// Spec §11.7 edge cases.
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
