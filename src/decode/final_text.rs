//! `get_final_text` (spec §6.7): project the detokenized prediction back onto the
//! original words' characters.
//!
//! Python semantics: indexes count code points; `find` is the leftmost occurrence; only
//! U+0020 is stripped for the alignment, and the two space-free strings are assumed to
//! align one to one by position when their lengths agree (nothing checks that the
//! characters are the same). Any failure returns `orig` unchanged.

use crate::types::TokenText;

/// §6.7 with the tokenizer's own casing (`tok.lower_case()`).
pub fn get_final_text(pred: &str, orig: &str, tok: &dyn TokenText) -> String {
    project(pred, orig, &tok.basic_tokenize(orig).join(" ")).unwrap_or_else(|| orig.to_string())
}

/// Steps 2–7, given `tok_text = " ".join(basic_tokenize(orig))`; `None` means "return
/// `orig`".
fn project(pred: &str, orig: &str, tok_text: &str) -> Option<String> {
    let byte_start = tok_text.find(pred)?;
    // Code-point index of the match, and of its last character (−1 for an empty `pred`,
    // which never maps).
    let start = tok_text[..byte_start].chars().count();
    let end = (start + pred.chars().count()).checked_sub(1)?;

    let orig_chars: Vec<char> = orig.chars().collect();
    let orig_ns_to_s: Vec<usize> = non_space_positions(&orig_chars);
    let tok_chars: Vec<char> = tok_text.chars().collect();
    let tok_ns_to_s: Vec<usize> = non_space_positions(&tok_chars);
    if orig_ns_to_s.len() != tok_ns_to_s.len() {
        return None;
    }
    // tok_s_to_ns: the inverse of tok_ns_to_s; positions are increasing, so a binary
    // search finds the ns index of a non-space position.
    let to_orig = |s: usize| -> Option<usize> {
        let ns = tok_ns_to_s.binary_search(&s).ok()?;
        orig_ns_to_s.get(ns).copied()
    };
    let orig_start = to_orig(start)?;
    let orig_end = to_orig(end)?;
    if orig_end < orig_start {
        return Some(String::new());
    }
    Some(orig_chars[orig_start..=orig_end].iter().collect())
}

/// Positions of the characters that are not U+0020.
fn non_space_positions(chars: &[char]) -> Vec<usize> {
    chars
        .iter()
        .enumerate()
        .filter(|(_, &c)| c != ' ')
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::project;

    /// §6.7 worked examples with the lower-cased basic tokenization written out.
    #[test]
    fn worked_examples() {
        let cases = [
            (
                "steve smith",
                "Steve Smith's",
                "steve smith ' s",
                "Steve Smith",
            ),
            ("1895", "(1895-1943).", "( 1895 - 1943 ) .", "1895"),
            ("cafe", "Café au lait", "cafe au lait", "Café"),
            ("cafe", "Cafe\u{301} au", "cafe au", "Cafe\u{301} au"),
            ("us", "U.S.", "u . s .", "U.S."),
            ("[UNK]", "☃ snow", "☃ snow", "☃ snow"),
            ("apple", "Apple, apple", "apple , apple", "Apple"),
            ("ing", "running", "running", "ing"),
            ("a b", "a\u{a0}b", "a b", "a\u{a0}b"),
            ("", "abc", "abc", "abc"),
        ];
        for (pred, orig, tok, want) in cases {
            let got = project(pred, orig, tok).unwrap_or_else(|| orig.to_string());
            assert_eq!(got, want, "pred {pred:?} orig {orig:?}");
        }
    }

    /// A match whose end falls on a space of `tok_text` cannot be projected.
    #[test]
    fn end_on_space_returns_orig() {
        assert_eq!(project("a ", "a b", "a b"), None);
        assert_eq!(project(" b", "a b", "a b"), None);
    }

    /// Astral characters count once (Python code points, not UTF-16 or bytes).
    #[test]
    fn astral_characters_count_once() {
        let orig = "😀Smith's";
        assert_eq!(
            project("smith", orig, "😀smith ' s").as_deref(),
            Some("Smith")
        );
    }
}
