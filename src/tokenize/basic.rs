//! The BERT basic tokenizer of the reference (algorithm §3.3, N = NVIDIA's `BasicTokenizer`),
//! on plain `&str`, with character classes pinned to Unicode 14.0.0 ([`super::tables`]).
//!
//! Steps, in the reference's order:
//! 1. clean: drop U+0000, U+FFFD and every C* character except `\t \n \r`; turn
//!    `\t \n \r` and Zs into U+0020;
//! 2. isolate the CJK ideographs of §3.3 step 2;
//! 3. split on Python whitespace (§3.5);
//! 4. per whitespace token: keep the never-split specials as they are; otherwise, when
//!    lower-casing, apply Python's `str.lower()` (full mappings and the final-sigma
//!    rule), NFD, and drop Mn; then split every punctuation character off;
//! 5. drop empty pieces (the reference's join-and-resplit).
//!
//! Every step is local to one whitespace token (and the reader's five separators are
//! all cleaned to spaces), so a context's basic tokens are its words' basic tokens in
//! order. Features still tokenize word by word, as the reference does, because each
//! piece must know its word.
//!
//! ASCII text, nearly all of SQuAD, takes a byte-wise path: there, clean is dropping
//! the ASCII controls, the only separators are space, `\t`, `\n` and `\r` (the other
//! ASCII Python whitespace characters are controls, removed first), nothing is CJK,
//! lower-casing is byte-wise, NFD changes nothing and there are no marks. Words run
//! straight from the text unless a control has to be removed. An ASCII word of
//! non-ASCII text takes the same step 4. A property test holds both to the general path.

use super::tables;

/// The specials N never lower-cases or splits (§3.3 step 4.1).
pub const NEVER_SPLIT: [&str; 5] = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"];

const GREEK_CAPITAL_SIGMA: char = '\u{3A3}';

fn range_lookup(table: &[(u32, u32, u8)], cp: u32) -> u8 {
    match table.binary_search_by(|&(lo, hi, _)| {
        if hi < cp {
            std::cmp::Ordering::Less
        } else if lo > cp {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => table[i].2,
        Err(_) => 0,
    }
}

/// The general-category class of `c` (one of the `tables` class constants, or 0).
fn category_class(c: char) -> u8 {
    range_lookup(tables::CLASS_RANGES, c as u32)
}

/// "Control" of the clean step: C* except tab, newline and carriage return.
pub fn is_control(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, '\0'..='\x08' | '\x0b' | '\x0c' | '\x0e'..='\x1f' | '\x7f');
    }
    category_class(c) == tables::CONTROL
}

/// "Whitespace" of the clean step: space, `\t \n \r`, or Zs.
pub fn is_clean_whitespace(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, ' ' | '\t' | '\n' | '\r');
    }
    category_class(c) == tables::SPACE
}

/// Punctuation: every ASCII non-alphanumeric printable, or any P* character.
pub fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    category_class(c) == tables::PUNCT
}

/// Python's `str.split()` whitespace set (§3.5).
pub fn is_python_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{9}'..='\u{d}'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// The CJK ideograph ranges isolated by §3.3 step 2.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

fn is_mark(c: char) -> bool {
    !c.is_ascii() && category_class(c) == tables::MARK
}

fn combining_class(c: char) -> u8 {
    if (c as u32) < 0x300 {
        return 0;
    }
    range_lookup(tables::CCC_RANGES, c as u32)
}

fn sigma_class(c: char) -> u8 {
    range_lookup(tables::SIGMA_RANGES, c as u32)
}

/// Python's final-sigma context for the U+03A3 between `before` and `after` (the
/// whole string is the one being lower-cased): a cased letter before it, skipping
/// case-ignorables, and no cased letter after it, skipping case-ignorables.
fn is_final_sigma(before: &str, after: &str) -> bool {
    let prev = before
        .chars()
        .rev()
        .find(|&c| sigma_class(c) != tables::IGNORABLE);
    if prev.is_none_or(|c| sigma_class(c) != tables::CASED) {
        return false;
    }
    match after.chars().find(|&c| sigma_class(c) != tables::IGNORABLE) {
        None => true,
        Some(c) => sigma_class(c) != tables::CASED,
    }
}

fn push_lower(c: char, out: &mut Vec<char>) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    match tables::LOWER.binary_search_by_key(&(c as u32), |&(cp, _)| cp) {
        Ok(i) => out.extend(tables::LOWER[i].1.chars()),
        Err(_) => out.push(c),
    }
}

const HANGUL_S_BASE: u32 = 0xAC00;
const HANGUL_L_BASE: u32 = 0x1100;
const HANGUL_V_BASE: u32 = 0x1161;
const HANGUL_T_BASE: u32 = 0x11A7;
const HANGUL_T_COUNT: u32 = 28;
const HANGUL_N_COUNT: u32 = 21 * 28;
const HANGUL_S_COUNT: u32 = 19 * HANGUL_N_COUNT;

fn push_nfd(c: char, out: &mut Vec<char>) {
    let cp = c as u32;
    if cp < 0xC0 {
        out.push(c);
        return;
    }
    if (HANGUL_S_BASE..HANGUL_S_BASE + HANGUL_S_COUNT).contains(&cp) {
        let s = cp - HANGUL_S_BASE;
        let l = HANGUL_L_BASE + s / HANGUL_N_COUNT;
        let v = HANGUL_V_BASE + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
        let t = HANGUL_T_BASE + s % HANGUL_T_COUNT;
        out.extend([l, v].into_iter().filter_map(char::from_u32));
        if t != HANGUL_T_BASE {
            out.extend(char::from_u32(t));
        }
        return;
    }
    match tables::NFD.binary_search_by_key(&cp, |&(x, _)| x) {
        Ok(i) => out.extend(tables::NFD[i].1.chars()),
        Err(_) => out.push(c),
    }
}

/// Canonical ordering of NFD: each run of non-starters is sorted by combining class,
/// stably.
fn canonical_order(chars: &mut [char]) {
    let mut i = 0;
    while i < chars.len() {
        if combining_class(chars[i]) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && combining_class(chars[i]) != 0 {
            i += 1;
        }
        if i - start > 1 {
            chars[start..i].sort_by_key(|&c| combining_class(c));
        }
    }
}

/// Scratch buffers reused across calls, so tokenizing allocates only for its output.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    word: String,
    chars: Vec<char>,
    folded: String,
}

/// `str.lower()`, then NFD, then drop Mn (§3.3 step 4.2), written into `out`.
pub(crate) fn lower_strip_accents(word: &str, chars: &mut Vec<char>, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.extend(word.chars().map(|c| c.to_ascii_lowercase()));
        return;
    }
    chars.clear();
    let mut lowered = Vec::with_capacity(word.len());
    for (i, c) in word.char_indices() {
        if c == GREEK_CAPITAL_SIGMA {
            let after = &word[i + c.len_utf8()..];
            lowered.push(if is_final_sigma(&word[..i], after) {
                '\u{3C2}'
            } else {
                '\u{3C3}'
            });
        } else {
            push_lower(c, &mut lowered);
        }
    }
    for c in lowered {
        push_nfd(c, chars);
    }
    canonical_order(chars);
    out.extend(chars.iter().copied().filter(|&c| !is_mark(c)));
}

/// Runs the basic tokenizer over `text`, calling `emit` with each basic token in order.
pub(crate) fn for_each_token(
    text: &str,
    lower: bool,
    scratch: &mut Scratch,
    emit: impl FnMut(&str),
) {
    if text.is_ascii() {
        for_each_token_ascii(text, lower, scratch, emit);
    } else {
        for_each_token_general(text, lower, scratch, true, emit);
    }
}

/// The general path, character by character; `ascii_words` sends each ASCII word's
/// step 4 to the byte-wise one (off only to test that against this).
fn for_each_token_general(
    text: &str,
    lower: bool,
    scratch: &mut Scratch,
    ascii_words: bool,
    mut emit: impl FnMut(&str),
) {
    let Scratch {
        word,
        chars,
        folded,
    } = scratch;
    word.clear();
    let mut finish = |word: &mut String, emit: &mut dyn FnMut(&str)| {
        if ascii_words && word.is_ascii() {
            finish_ascii_word(word, lower, folded, emit);
            word.clear();
        } else {
            finish_word(word, lower, chars, folded, emit);
        }
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{FFFD}' || is_control(c) {
            continue;
        }
        if is_clean_whitespace(c) || is_python_whitespace(c) {
            finish(word, &mut emit);
        } else if is_cjk(c) {
            finish(word, &mut emit);
            word.push(c);
            finish(word, &mut emit);
        } else {
            word.push(c);
        }
    }
    finish(word, &mut emit);
}

/// An ASCII control character: removed by the clean step.
fn is_ascii_control_byte(b: u8) -> bool {
    matches!(b, 0..=8 | 0x0b | 0x0c | 0x0e..=0x1f | 0x7f)
}

/// [`for_each_token`] on ASCII text, byte by byte.
fn for_each_token_ascii(
    text: &str,
    lower: bool,
    scratch: &mut Scratch,
    mut emit: impl FnMut(&str),
) {
    let Scratch { word, folded, .. } = scratch;
    for run in text.split([' ', '\t', '\n', '\r']) {
        if run.bytes().any(is_ascii_control_byte) {
            word.clear();
            word.extend(run.chars().filter(|&c| !is_ascii_control_byte(c as u8)));
            finish_ascii_word(word, lower, folded, &mut emit);
        } else {
            finish_ascii_word(run, lower, folded, &mut emit);
        }
    }
}

/// Step 4 for one cleaned ASCII whitespace token: never-split specials as they are,
/// else byte-wise lower-casing (NFD and accent stripping change nothing in ASCII), then
/// each punctuation byte on its own.
fn finish_ascii_word<F: FnMut(&str) + ?Sized>(
    word: &str,
    lower: bool,
    folded: &mut String,
    emit: &mut F,
) {
    if word.is_empty() {
        return;
    }
    if word.starts_with('[') && NEVER_SPLIT.contains(&word) {
        emit(word);
        return;
    }
    let token: &str = if lower && word.bytes().any(|b| b.is_ascii_uppercase()) {
        folded.clear();
        folded.push_str(word);
        folded.make_ascii_lowercase();
        folded
    } else {
        word
    };
    // Lower-cased, a special is no longer one (they are upper case), so no second check.
    let mut run_start = 0;
    for (i, b) in token.bytes().enumerate() {
        if b.is_ascii_punctuation() {
            if run_start < i {
                emit(&token[run_start..i]);
            }
            emit(&token[i..i + 1]);
            run_start = i + 1;
        }
    }
    if run_start < token.len() {
        emit(&token[run_start..]);
    }
}

/// Step 4 for one whitespace token; clears `word`.
fn finish_word<F: FnMut(&str) + ?Sized>(
    word: &mut String,
    lower: bool,
    chars: &mut Vec<char>,
    folded: &mut String,
    emit: &mut F,
) {
    if word.is_empty() {
        return;
    }
    if NEVER_SPLIT.contains(&word.as_str()) {
        emit(word);
        word.clear();
        return;
    }
    let token: &str = if lower {
        lower_strip_accents(word, chars, folded);
        folded
    } else {
        word
    };
    if NEVER_SPLIT.contains(&token) {
        emit(token);
    } else {
        split_punctuation(token, emit);
    }
    word.clear();
}

/// Each punctuation character is its own piece; runs of other characters are pieces.
/// Python whitespace (which steps 4.2 cannot produce, but step 5 would remove) splits.
fn split_punctuation<F: FnMut(&str) + ?Sized>(token: &str, emit: &mut F) {
    let mut run_start = 0;
    for (i, c) in token.char_indices() {
        let punct = is_punctuation(c);
        if punct || is_python_whitespace(c) {
            if run_start < i {
                emit(&token[run_start..i]);
            }
            if punct {
                emit(&token[i..i + c.len_utf8()]);
            }
            run_start = i + c.len_utf8();
        }
    }
    if run_start < token.len() {
        emit(&token[run_start..]);
    }
}

/// The basic tokenizer as a list of owned tokens (the convenient, slower form).
pub fn basic_tokenize(text: &str, lower: bool) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, lower, &mut Scratch::default(), |t| {
        out.push(t.to_string())
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bt(text: &str) -> String {
        basic_tokenize(text, true).join(" ")
    }

    fn bt_cased(text: &str) -> String {
        basic_tokenize(text, false).join(" ")
    }

    #[test]
    fn conformance_vectors_of_spec_11() {
        assert_eq!(bt("don't  U.S.A."), "don ' t u . s . a .");
        assert_eq!(bt("naïve été $5.00"), "naive ete $ 5 . 00");
        assert_eq!(bt("a\u{b}b"), "ab");
        assert_eq!(bt("x\u{2028}y"), "x y");
        assert_eq!(bt("Café\u{a0}au\u{200b}lait"), "cafe aulait");
    }

    #[test]
    fn control_and_format_characters_are_removed_not_split() {
        for c in [
            '\u{c}', '\u{1c}', '\u{1f}', '\u{85}', '\u{7f}', '\u{200c}', '\u{200d}',
        ] {
            assert_eq!(bt(&format!("a{c}b")), "ab", "{:?}", c);
        }
        for c in [
            '\u{2060}', '\u{feff}', '\u{ad}', '\u{e000}', '\u{378}', '\u{0}', '\u{fffd}',
        ] {
            assert_eq!(bt(&format!("a{c}b")), "ab", "{:?}", c);
        }
        // New in Unicode 15.0, so unassigned (Cn) in the reference's 14.0 and removed.
        assert_eq!(bt("a\u{1F6DC}b"), "ab");
        // Assigned in 14.0 (U+1F6DD SLIDE): kept, and not punctuation.
        assert_eq!(bt("a\u{1F6DD}b"), "a\u{1F6DD}b");
    }

    #[test]
    fn spaces_of_every_kind_split() {
        for c in [
            '\t', '\n', '\r', '\u{a0}', '\u{2009}', '\u{202f}', '\u{3000}', '\u{1680}', '\u{2029}',
        ] {
            assert_eq!(bt(&format!("a{c}b")), "a b", "{:?}", c);
        }
        assert_eq!(bt(" \r\n "), "");
    }

    #[test]
    fn punctuation_classes() {
        assert_eq!(bt("a+b=c<d>e^f`g|h~i"), "a + b = c < d > e ^ f ` g | h ~ i");
        assert_eq!(bt("«ok»¿sí?「x」、"), "« ok » ¿ si ? 「 x 」 、");
        // Symbols (S*) are not punctuation and stay glued.
        assert_eq!(bt("5€ ©2020 30°C ±1 a™"), "5€ ©2020 30°c ±1 a™");
    }

    #[test]
    fn cjk_isolation_uses_the_reference_ranges() {
        assert_eq!(bt("ab中文cd"), "ab 中 文 cd");
        // U+2B820..U+2B91F is isolated by the reference (the tokenizers crate starts
        // that range at U+2B920).
        assert_eq!(bt("a\u{2B820}b"), "a \u{2B820} b");
        // Hiragana, Katakana and Hangul are not isolated.
        assert_eq!(bt_cased("aひらカナ한b"), "aひらカナ한b");
    }

    #[test]
    fn never_split_specials() {
        assert_eq!(
            bt("[SEP] x [CLS] [MASK] [UNK] [PAD]"),
            "[SEP] x [CLS] [MASK] [UNK] [PAD]"
        );
        assert_eq!(bt("a[SEP]b"), "a [ sep ] b");
        assert_eq!(bt("[SEP]."), "[ sep ] .");
        assert_eq!(bt("[sep]"), "[ sep ]");
        assert_eq!(bt_cased("[SEP] [Sep]"), "[SEP] [ Sep ]");
    }

    #[test]
    fn lowercasing_follows_python() {
        // Full mapping: İ lowers to i + U+0307, and the mark is then stripped.
        assert_eq!(bt("İstanbul"), "istanbul");
        assert_eq!(bt("STRASSE Straße"), "strasse straße");
        // Final sigma is decided per whitespace token.
        assert_eq!(bt("ΟΔΟΣ ΟΔΟΣ. ΣΑ Σ"), "οδος οδος . σα σ");
        assert_eq!(bt("\u{212A}elvin \u{212B}"), "kelvin a");
    }

    #[test]
    fn accents_are_stripped_only_when_lowercasing() {
        assert_eq!(bt_cased("Café Cafe\u{301}"), "Café Cafe\u{301}");
        assert_eq!(bt("Café Cafe\u{301}"), "cafe cafe");
        // Hangul decomposes to conjoining jamo, which are kept.
        assert_eq!(bt("한"), "\u{1112}\u{1161}\u{11AB}");
        assert_eq!(bt_cased("한"), "한");
    }

    fn tokens_of(text: &str, lower: bool, general_only: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut scratch = Scratch::default();
        let emit = |t: &str| out.push(t.to_string());
        if general_only {
            for_each_token_general(text, lower, &mut scratch, false, emit);
        } else {
            for_each_token(text, lower, &mut scratch, emit);
        }
        out
    }

    /// Pieces of text: ASCII of every class (letters of both cases, digits,
    /// punctuation, the four separators, the controls that are removed, a special),
    /// and non-ASCII that the general path must handle (accents, precomposed and not,
    /// CJK, Zs and Zl spaces, Cf, final sigma, İ, Hangul).
    const ASCII_PARTS: &[&str] = &[
        "a", "Z", "q", "Word", "UNK", "7", ".", ",", "'", "$", "[", "]", "#", "~", " ", "  ", "\t",
        "\n", "\r", "\0", "\u{b}", "\u{c}", "\u{1c}", "\u{1f}", "\u{7f}", "[SEP]", "[MASK]",
        "[sep]",
    ];
    const OTHER_PARTS: &[&str] = &[
        "é", "e\u{301}", "İ", "ΟΣ", "中", "\u{a0}", "\u{2028}", "\u{200b}", "\u{3000}", "한",
        "\u{fffd}", "\u{85}", "«", "€",
    ];

    proptest::proptest! {
        /// The byte-wise path gives the general path's tokens on ASCII text, and the
        /// ASCII-word step 4 inside non-ASCII text does too.
        #[test]
        fn ascii_fast_paths_equal_the_general_path(
            ascii in proptest::collection::vec(proptest::sample::select(ASCII_PARTS), 0..30),
            other in proptest::collection::vec(
                proptest::sample::select([ASCII_PARTS, OTHER_PARTS].concat()),
                0..30,
            ),
            lower in proptest::bool::ANY,
        ) {
            let ascii = ascii.concat();
            proptest::prop_assert!(ascii.is_ascii());
            proptest::prop_assert_eq!(
                tokens_of(&ascii, lower, false),
                tokens_of(&ascii, lower, true),
                "{:?}", ascii
            );
            let other = other.concat();
            proptest::prop_assert_eq!(
                tokens_of(&other, lower, false),
                tokens_of(&other, lower, true),
                "{:?}", other
            );
        }
    }

    #[test]
    fn ascii_path_removes_controls_and_keeps_specials() {
        assert_eq!(bt("a\u{b}b\0c [SEP] x[SEP]\u{7f}"), "abc [SEP] x [ sep ]");
        assert_eq!(bt_cased("[S\u{1f}EP] [UNK]"), "[SEP] [UNK]");
        assert_eq!(bt("\u{1c}\u{1f} \t"), "");
    }

    #[test]
    fn canonical_ordering_sorts_non_starters() {
        let mut chars: Vec<char> = "a\u{301}\u{316}b\u{1D165}\u{1D16D}".chars().collect();
        canonical_order(&mut chars);
        // ccc 220 sorts before 230; 216 then 226 is already in order.
        assert_eq!(
            chars.iter().collect::<String>(),
            "a\u{316}\u{301}b\u{1D165}\u{1D16D}"
        );
    }
}
