//! `get_final_text` (algorithm §6.7): project the detokenized prediction back onto the
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

/// Steps 2–7 with `tok_text` already computed; `orig` when the projection fails.
pub(super) fn project_or_orig(pred: &str, orig: &str, tok_text: &str) -> String {
    project(pred, orig, tok_text).unwrap_or_else(|| orig.to_string())
}

/// Steps 2–7, given `tok_text = " ".join(basic_tokenize(orig))`; `None` means "return
/// `orig`". One pass over each string, no allocation but the result: a non-space
/// character's "ns index" is its rank among the non-space characters.
fn project(pred: &str, orig: &str, tok_text: &str) -> Option<String> {
    let byte_start = find(tok_text.as_bytes(), pred.as_bytes())?;
    // The last character of the match (an empty `pred` gives q = p − 1, which never
    // maps).
    let last_len = pred.chars().next_back()?.len_utf8();
    let byte_last = byte_start + pred.len() - last_len;

    // ns indexes of the match's first and last characters in tok_text, and the total
    // number of non-space characters of each string.
    let (mut ns_start, mut ns_end, mut tok_ns) = (None, None, 0usize);
    for (b, c) in tok_text.char_indices() {
        if b == byte_start && c != ' ' {
            ns_start = Some(tok_ns);
        }
        if b == byte_last && c != ' ' {
            ns_end = Some(tok_ns);
        }
        if c != ' ' {
            tok_ns += 1;
        }
    }
    let orig_ns = orig.chars().filter(|&c| c != ' ').count();
    if orig_ns != tok_ns {
        return None;
    }
    let (ns_start, ns_end) = (ns_start?, ns_end?);
    let (mut from, mut to, mut k) = (None, None, 0usize);
    for (b, c) in orig.char_indices() {
        if c == ' ' {
            continue;
        }
        if k == ns_start {
            from = Some(b);
        }
        if k == ns_end {
            to = Some(b + c.len_utf8());
            break;
        }
        k += 1;
    }
    let (from, to) = (from?, to?);
    Some(orig.get(from..to).unwrap_or_default().to_string())
}

/// Leftmost occurrence of `needle` in `haystack` (`str::find` on these short strings,
/// without building a Two-Way searcher each time). A match of valid UTF-8 in valid UTF-8
/// starts on a character boundary, so the byte offset is `str::find`'s.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = needle.split_first() else {
        return Some(0);
    };
    let last_start = haystack.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| haystack[i] == first && &haystack[i + 1..i + needle.len()] == rest)
}

#[cfg(test)]
mod tests {
    use super::{find, project};

    #[test]
    fn find_is_str_find() {
        for (h, n) in [
            ("abcabc", "cab"),
            ("abc", ""),
            ("", ""),
            ("", "a"),
            ("ab", "abc"),
            ("aaab", "aab"),
            ("x ☃ y ☃", "☃ y"),
            ("abc", "c"),
            ("abc", "d"),
        ] {
            assert_eq!(find(h.as_bytes(), n.as_bytes()), h.find(n), "{h:?} {n:?}");
        }
    }

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
