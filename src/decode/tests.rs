//! Unit tests of the decoding rules with hand-built features and logits.

use super::*;
use crate::types::{Feature, Logits, TokenText};

/// A fixed vocabulary and a minimal ASCII basic tokenizer (lower-case, split on
/// whitespace and ASCII punctuation), enough for hand-built cases. The real basic
/// tokenizer is exercised by the golden tests.
struct TestTok {
    tokens: Vec<String>,
    lower: bool,
}

impl TokenText for TestTok {
    fn id_to_token(&self, id: u32) -> &str {
        &self.tokens[id as usize]
    }
    fn lower_case(&self) -> bool {
        self.lower
    }
    fn basic_tokenize(&self, text: &str) -> Vec<String> {
        let text = if self.lower {
            text.to_lowercase()
        } else {
            text.to_string()
        };
        let mut out = Vec::new();
        for word in text.split_whitespace() {
            let mut cur = String::new();
            for c in word.chars() {
                if c.is_ascii_punctuation() {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    out.push(c.to_string());
                } else {
                    cur.push(c);
                }
            }
            if !cur.is_empty() {
                out.push(cur);
            }
        }
        out
    }
}

/// Builds features over one paragraph, interning token strings as ids.
struct Fx {
    tok: TestTok,
    doc_tokens: crate::types::Words,
}

impl Fx {
    fn new(context: &str) -> Self {
        Fx {
            tok: TestTok {
                tokens: Vec::new(),
                lower: true,
            },
            doc_tokens: context.split(' ').map(str::to_string).collect(),
        }
    }

    fn id(&mut self, t: &str) -> u32 {
        match self.tok.tokens.iter().position(|x| x == t) {
            Some(i) => i as u32,
            None => {
                self.tok.tokens.push(t.to_string());
                (self.tok.tokens.len() - 1) as u32
            }
        }
    }

    /// `[CLS] question [SEP] doc [SEP]`; `doc` is (piece, word index, max context).
    fn feature(&mut self, uid: u64, question: &[&str], doc: &[(&str, u32, bool)]) -> Feature {
        let mut ids = vec![self.id("[CLS]")];
        for q in question {
            ids.push(self.id(q));
        }
        ids.push(self.id("[SEP]"));
        for (p, _, _) in doc {
            ids.push(self.id(p));
        }
        ids.push(self.id("[SEP]"));
        Feature {
            unique_id: uid,
            example_index: 0,
            doc_span_index: (uid - 1_000_000_000) as usize,
            input_ids: ids,
            query_len: question.len(),
            token_to_orig: doc.iter().map(|d| d.1).collect(),
            token_is_max_context: doc.iter().map(|d| d.2).collect(),
            template: None,
        }
    }
}

/// Logits of `len` positions, all `base`, with `(position, value)` overrides.
fn logits(uid: u64, len: usize, starts: &[(usize, f32)], ends: &[(usize, f32)]) -> Logits {
    let mut start = vec![-10.0f32; len];
    let mut end = vec![-10.0f32; len];
    for &(i, v) in starts {
        start[i] = v;
    }
    for &(i, v) in ends {
        end[i] = v;
    }
    Logits {
        unique_id: uid,
        start,
        end,
    }
}

fn run(fx: &Fx, config: &DecodeConfig, feats: &[Feature], logs: &[Logits]) -> Prediction {
    let windows: Vec<Window<'_>> = feats
        .iter()
        .zip(logs)
        .map(|(feature, logits)| Window::new(feature, logits))
        .collect();
    decode_example(config, &fx.doc_tokens, "q", &windows, &fx.tok).unwrap()
}

const UID: u64 = 1_000_000_000;

/// "Who ? [SEP] Steve Smith ' s dog" — positions: 0 [CLS], 1 who, 2 ?, 3 [SEP],
/// 4 steve, 5 smith, 6 ', 7 s, 8 dog, 9 [SEP].
fn simple() -> (Fx, Feature) {
    let mut fx = Fx::new("Steve Smith's dog");
    let f = fx.feature(
        UID,
        &["who", "?"],
        &[
            ("steve", 0, true),
            ("smith", 1, true),
            ("'", 1, true),
            ("s", 1, true),
            ("dog", 2, true),
        ],
    );
    (fx, f)
}

#[test]
fn best_span_and_final_text() {
    let (fx, f) = simple();
    let l = logits(UID, 384, &[(4, 5.0), (5, 1.0)], &[(5, 4.0), (8, 2.0)]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    // "steve smith" projects onto "Steve Smith" inside "Steve Smith's" (§6.7).
    assert_eq!(p.answer, "Steve Smith");
    assert_eq!(p.nbest[0].start_logit, 5.0);
    assert_eq!(p.nbest[0].end_logit, 4.0);
    assert_eq!(p.null_odds, None);
    let texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    // Scores: (4,5)=9, (4,8)=7, (5,5)=5 "Smith", (5,8)=3 "Smith's dog"; then the -10
    // background pairs, ranked by start rank then end rank.
    assert_eq!(
        &texts[..4],
        ["Steve Smith", "Steve Smith's dog", "Smith", "Smith's dog"]
    );
    assert!(p.nbest.len() <= 20);
}

#[test]
fn span_too_long_is_skipped() {
    let mut fx = Fx::new(
        &(0..40)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let doc: Vec<(String, u32, bool)> = (0..40).map(|i| (format!("w{i}"), i, true)).collect();
    let doc_ref: Vec<(&str, u32, bool)> =
        doc.iter().map(|(s, w, m)| (s.as_str(), *w, *m)).collect();
    let f = fx.feature(UID, &["q"], &doc_ref);
    // doc starts at position 3; span 3..=33 has 31 pieces, 3..=32 has 30.
    let l = logits(UID, 384, &[(3, 9.0)], &[(33, 9.0), (32, 1.0)]);
    let p = run(
        &fx,
        &DecodeConfig::default(),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert_eq!(
        p.answer,
        (0..30)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let cfg = DecodeConfig {
        max_answer_length: 31,
        ..DecodeConfig::default()
    };
    let p = run(&fx, &cfg, &[f], &[l]);
    assert_eq!(p.answer.split(' ').count(), 31);
}

#[test]
fn end_before_start_is_skipped() {
    let (fx, f) = simple();
    let l = logits(UID, 384, &[(8, 9.0), (5, 1.0)], &[(4, 9.0), (8, 0.5)]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    // (8,4) is invalid; best valid is (8,8) = 9.5.
    assert_eq!(p.answer, "dog");
}

#[test]
fn start_or_end_outside_the_doc_is_skipped() {
    let (fx, f) = simple();
    // Start in the question (1), on [CLS] (0), end on the last [SEP] (9).
    let l = logits(
        UID,
        384,
        &[(1, 9.0), (0, 8.0), (7, 0.0)],
        &[(9, 9.0), (2, 8.0), (8, 0.0)],
    );
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    assert_eq!(p.answer, "s dog");
}

#[test]
fn start_must_be_max_context_but_end_need_not() {
    let mut fx = Fx::new("alpha beta gamma");
    let f = fx.feature(
        UID,
        &["q"],
        &[("alpha", 0, false), ("beta", 1, true), ("gamma", 2, false)],
    );
    // positions: 3 alpha, 4 beta, 5 gamma.
    let l = logits(UID, 384, &[(3, 9.0), (4, 5.0)], &[(5, 5.0)]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    assert_eq!(p.answer, "beta gamma");
}

#[test]
fn padding_positions_take_top_k_slots() {
    let (fx, f) = simple();
    // 20 padding positions beat every real one: no candidate survives (§6.2, §10.6).
    let mut l = logits(UID, 384, &[(4, 5.0)], &[(5, 4.0)]);
    for i in 100..120 {
        l.start[i] = 50.0;
    }
    let p = run(
        &fx,
        &DecodeConfig::default(),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert_eq!(p.answer, "empty");
    assert_eq!(p.nbest.len(), 1);
    assert_eq!(p.nbest[0].probability, 1.0);
    // With logits only as long as the feature, the span is found.
    let short = Logits {
        unique_id: UID,
        start: l.start[..f.len()].to_vec(),
        end: l.end[..f.len()].to_vec(),
    };
    assert_eq!(
        run(&fx, &DecodeConfig::default(), &[f], &[short]).answer,
        "Steve Smith"
    );
}

#[test]
fn all_equal_logits_keep_position_order() {
    let (fx, f) = simple();
    let l = logits(UID, 384, &[], &[]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    // Top-20 are positions 0..19 for both; every valid pair scores −20, so the n-best is
    // in start-rank then end-rank order: (4,4) (4,5) ... (4,8) (5,5) ...
    let texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    // All 15 valid pairs; (7,7) "s" projects onto the leftmost "s" of "smith ' s",
    // the "S" of "Smith" (§10.5).
    assert_eq!(
        texts,
        [
            "Steve",
            "Steve Smith",
            "Steve Smith'",
            "Steve Smith's",
            "Steve Smith's dog",
            "Smith",
            "Smith'",
            "Smith's",
            "Smith's dog",
            "'",
            "'s",
            "'s dog",
            "S",
            "s dog",
            "dog"
        ]
    );
    let probs: Vec<f64> = p.nbest.iter().map(|e| e.probability).collect();
    assert!(probs.iter().all(|&x| x == probs[0]));
}

#[test]
fn best_indexes_is_a_stable_descending_prefix() {
    let xs = [1.0f32, 3.0, 3.0, f32::NAN, 2.0, 3.0, -1.0, 2.0];
    let mut out = Vec::new();
    best_indexes(&xs, 4, &mut out);
    assert_eq!(out, [1, 2, 5, 4]);
    best_indexes(&xs, 20, &mut out);
    assert_eq!(out, [1, 2, 5, 4, 7, 0, 6, 3]);
    best_indexes(&xs, 0, &mut out);
    assert!(out.is_empty());
}

#[test]
fn best_indexes_on_rising_falling_and_zigzag_logits() {
    let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
    let shapes: [fn(usize) -> f32; 4] = [
        |i| i as f32,
        |i| -(i as f32),
        |i| if i % 2 == 0 { i as f32 } else { -(i as f32) },
        |i| ((i * 37) % 11) as f32,
    ];
    for shape in shapes {
        for len in [0usize, 5, 64, 65, 384] {
            let xs: Vec<f32> = (0..len).map(shape).collect();
            for n in [1usize, 20, 64, 65, 400] {
                let mut want: Vec<usize> = (0..len).collect();
                want.sort_by(|&a, &b| key(xs[b]).partial_cmp(&key(xs[a])).unwrap());
                want.truncate(n);
                let mut out = Vec::new();
                best_indexes(&xs, n, &mut out);
                assert_eq!(out, want, "len {len} n {n}");
            }
        }
    }
}

use proptest::strategy::Strategy as _;

proptest::proptest! {
    /// The kept-best selection equals a full stable sort cut to `n`, ties and NaN included.
    #[test]
    fn best_indexes_equals_a_stable_sort(
        xs in proptest::collection::vec(
            proptest::prop_oneof![
                (-3i8..3).prop_map(f32::from),
                proptest::num::f32::ANY,
            ],
            0..80,
        ),
        n in 0usize..30,
    ) {
        let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
        let mut want: Vec<usize> = (0..xs.len()).collect();
        want.sort_by(|&a, &b| key(xs[b]).partial_cmp(&key(xs[a])).unwrap());
        want.truncate(n);
        let mut out = Vec::new();
        best_indexes(&xs, n, &mut out);
        proptest::prop_assert_eq!(out, want);
    }
}

#[test]
fn candidates_note_any_non_finite_value_wherever_it_is() {
    let mut scratch = Vec::new();
    for k in [0usize, 3, 20, 65] {
        for len in [1usize, 7, 8, 9, 33, 384] {
            let finite: Vec<f32> = (0..len).map(|i| ((i * 37) % 11) as f32).collect();
            let c = Candidates::of_rows(&finite, &finite, k, &mut scratch);
            assert!(c.finite(), "k {k} len {len}");
            for at in [0, len / 2, len - 1] {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
                    let mut x = finite.clone();
                    x[at] = bad;
                    for (start, end) in [(&x, &finite), (&finite, &x)] {
                        let c = Candidates::of_rows(start, end, k, &mut scratch);
                        assert!(!c.finite(), "{bad} at {at} of {len}, k {k}");
                        // The ranking is best_indexes's, NaN as −∞.
                        let mut want = Vec::new();
                        best_indexes(start, k, &mut want);
                        let got: Vec<usize> = c.starts().iter().map(|&i| i as usize).collect();
                        assert_eq!(got, want);
                        assert_eq!(c.lens(), (len, len));
                        assert_eq!(c.first().0.to_bits(), start[0].to_bits());
                    }
                }
            }
        }
    }
}

proptest::proptest! {
    /// Longer logits and n-best sizes past the insertion buffer (the sorting path), with
    /// few distinct values (ties across the blocks of 8) or any float.
    #[test]
    fn best_indexes_equals_a_stable_sort_long(
        xs in proptest::collection::vec(
            proptest::prop_oneof![
                (-2i8..2).prop_map(f32::from),
                proptest::sample::select(vec![0.0f32, -0.0, f32::NAN, f32::NEG_INFINITY]),
                proptest::num::f32::ANY,
            ],
            0..400,
        ),
        n in proptest::prop_oneof![0usize..70, 60usize..500],
    ) {
        let key = |x: f32| if x.is_nan() { f32::NEG_INFINITY } else { x };
        let mut want: Vec<usize> = (0..xs.len()).collect();
        want.sort_by(|&a, &b| key(xs[b]).partial_cmp(&key(xs[a])).unwrap());
        want.truncate(n);
        let mut out = vec![7];
        best_indexes(&xs, n, &mut out);
        proptest::prop_assert_eq!(out, want);
    }
}

#[test]
fn a_decode_cache_shared_across_questions_and_paragraphs_changes_no_answer() {
    // Two paragraphs whose words need the basic tokenizer (punctuation, capitals), and
    // questions that alternate between them and repeat one: each answer from a shared
    // cache equals the answer decoded afresh.
    let mut a = Fx::new("Hello, World! New-York is big.");
    let mut b = Fx::new("Paris, France: a city.");
    let pieces = |fx: &mut Fx| -> Feature {
        let words: Vec<String> = fx.doc_tokens.iter().map(str::to_string).collect();
        let doc: Vec<(String, u32, bool)> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_lowercase(), i as u32, true))
            .collect();
        let doc: Vec<(&str, u32, bool)> =
            doc.iter().map(|(p, i, m)| (p.as_str(), *i, *m)).collect();
        fx.feature(UID, &["q"], &doc)
    };
    let fa = pieces(&mut a);
    let fb = pieces(&mut b);
    let config = DecodeConfig::default();
    let mut cache = DecodeCache::default();
    let cases: [(usize, usize, usize); 6] = [
        (0, 2, 3),
        (0, 3, 4),
        (1, 2, 3),
        (0, 2, 2),
        (1, 3, 5),
        (1, 2, 4),
    ];
    for (paragraph, s, e) in cases {
        let (fx, f) = if paragraph == 0 { (&a, &fa) } else { (&b, &fb) };
        let l = logits(UID, f.len() + 4, &[(s, 5.0)], &[(e, 5.0)]);
        let windows = [Window::new(f, &l)];
        let fresh = decode_example(&config, &fx.doc_tokens, "q", &windows, &fx.tok).unwrap();
        let shared = cache
            .decode_example(
                &config,
                Some(paragraph),
                &fx.doc_tokens,
                "q",
                &windows,
                &fx.tok,
            )
            .unwrap();
        assert_eq!(shared.answer, fresh.answer);
        assert_eq!(
            shared.nbest.iter().map(|e| &e.text).collect::<Vec<_>>(),
            fresh.nbest.iter().map(|e| &e.text).collect::<Vec<_>>()
        );
    }
}

#[test]
fn nbest_shorter_than_n_best_size() {
    let mut fx = Fx::new("solo");
    let f = fx.feature(UID, &["q"], &[("solo", 0, true)]);
    let l = logits(UID, 384, &[(3, 1.0)], &[(3, 1.0)]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    assert_eq!(p.nbest.len(), 1);
    assert_eq!(p.answer, "solo");
}

#[test]
fn duplicate_texts_across_windows_are_dropped() {
    let mut fx = Fx::new("a b c d");
    // Two windows over the same words; word "c" appears in both.
    let f0 = fx.feature(
        UID,
        &["q"],
        &[("a", 0, true), ("b", 1, true), ("c", 2, true)],
    );
    let f1 = fx.feature(
        UID + 1,
        &["q"],
        &[("b", 1, false), ("c", 2, true), ("d", 3, true)],
    );
    let l0 = logits(UID, 384, &[(5, 3.0)], &[(5, 3.0)]);
    let l1 = logits(UID + 1, 384, &[(4, 2.5)], &[(4, 2.5)]);
    let p = run(&fx, &DecodeConfig::default(), &[f0, f1], &[l0, l1]);
    let cs = p.nbest.iter().filter(|e| e.text == "c").count();
    assert_eq!(cs, 1);
    assert_eq!(p.nbest[0].text, "c");
    assert_eq!(p.nbest[0].start_logit, 3.0);
    let mut texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), p.nbest.len());
}

#[test]
fn final_text_that_cannot_be_aligned_is_the_whole_words() {
    // "U.S." tokenizes to "u . s .", so the piece text "us" is not found (§6.7).
    let mut fx = Fx::new("the U.S. army");
    let f = fx.feature(
        UID,
        &["q"],
        &[("the", 0, true), ("us", 1, true), ("army", 2, true)],
    );
    let l = logits(UID, 384, &[(4, 5.0)], &[(4, 5.0)]);
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    assert_eq!(p.answer, "U.S.");
}

#[test]
fn leading_wordpiece_differs_between_modes() {
    // §6.13.1: a span starting on "##ning": nvidia removes the "##" and projects "ning"
    // inside "running"; hf keeps "##ning", which is not found, so the whole word returns.
    let mut fx = Fx::new("running fast");
    let f = fx.feature(
        UID,
        &["q"],
        &[("run", 0, true), ("##ning", 0, true), ("fast", 1, true)],
    );
    let l = logits(UID, 384, &[(4, 5.0)], &[(4, 5.0)]);
    let nv = run(
        &fx,
        &DecodeConfig::default(),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert_eq!(nv.answer, "ning");
    let cfg = DecodeConfig {
        postprocess: Postprocess::Hf,
        ..DecodeConfig::default()
    };
    let hf = run(&fx, &cfg, &[f], &[l]);
    assert_eq!(hf.answer, "running");
}

#[test]
fn detokenize_rules() {
    // Python's replace: non-overlapping, left to right.
    let p = ["C", "##", "##s", "x"];
    assert_eq!(rules::detokenize(Postprocess::Nvidia, &p), "Cs x");
    assert_eq!(rules::detokenize(Postprocess::Hf, &p), "Cs x");
    // A literal "##" inside a piece (`C##`) is removed by nvidia only (§10.13).
    assert_eq!(rules::detokenize(Postprocess::Nvidia, &["C##", "x"]), "C x");
    assert_eq!(rules::detokenize(Postprocess::Hf, &["C##", "x"]), "C## x");
    assert_eq!(rules::detokenize(Postprocess::Nvidia, &["##ing"]), "ing");
    assert_eq!(rules::detokenize(Postprocess::Hf, &["##ing"]), "##ing");
}

fn v2(threshold: f64) -> DecodeConfig {
    DecodeConfig {
        version_2_with_negative: true,
        null_score_diff_threshold: threshold,
        ..DecodeConfig::default()
    }
}

#[test]
fn null_wins_or_loses_at_the_threshold() {
    let (fx, f) = simple();
    // null = 1.5 + 1.5 = 3; best span (4,5) = 2 + 0.5 = 2.5; diff = 0.5.
    let l = logits(UID, 384, &[(0, 1.5), (4, 2.0)], &[(0, 1.5), (5, 0.5)]);
    let p = run(
        &fx,
        &v2(0.0),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert_eq!(p.null_odds, Some(0.5));
    assert_eq!(p.answer, "");
    assert_eq!(p.nbest[0].text, "");
    // diff equal to the threshold: not strictly greater, so the span wins.
    let p = run(
        &fx,
        &v2(0.5),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert_eq!(p.answer, "Steve Smith");
    let p = run(&fx, &v2(0.4999), &[f], &[l]);
    assert_eq!(p.answer, "");
}

#[test]
fn null_is_the_minimum_over_windows_and_appended_when_not_seen() {
    let mut fx = Fx::new("a b");
    let f0 = fx.feature(UID, &["q"], &[("a", 0, true), ("b", 1, false)]);
    let f1 = fx.feature(UID + 1, &["q"], &[("b", 1, true)]);
    let l0 = logits(UID, 384, &[(0, -1.0), (3, 4.0)], &[(0, -1.0), (3, 4.0)]);
    let l1 = logits(UID + 1, 384, &[(0, -3.0), (3, 2.0)], &[(0, 0.5), (3, 2.0)]);
    let cfg = DecodeConfig {
        n_best_size: 2,
        ..v2(0.0)
    };
    let p = run(&fx, &cfg, &[f0, f1], &[l0, l1]);
    // null = min(-2, -2.5) = -2.5 from window 1 with (-3, 0.5): not among the top 2
    // (a=8, b=4), so appended: n_best_size + 1 entries.
    let texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["a", "b", ""]);
    assert_eq!((p.nbest[2].start_logit, p.nbest[2].end_logit), (-3.0, 0.5));
    assert_eq!(p.null_odds, Some(-2.5 - 4.0 - 4.0));
    assert_eq!(p.answer, "a");
}

#[test]
fn lone_null_gets_empty_in_front() {
    let (fx, f) = simple();
    // Null is the best prelim and n_best_size = 1: the list is [""], so "empty" goes in
    // front (§6.6 step 6) and is the best non-null entry.
    let l = logits(UID, 384, &[(0, 9.0), (4, 1.0)], &[(0, 9.0), (4, 1.0)]);
    let cfg = DecodeConfig {
        n_best_size: 1,
        ..v2(100.0)
    };
    let p = run(&fx, &cfg, &[f], &[l]);
    let texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["empty", ""]);
    assert_eq!(p.null_odds, Some(18.0));
    assert_eq!(p.answer, "empty");
}

#[test]
fn question_without_features() {
    let fx = Fx::new("");
    let p = run(&fx, &DecodeConfig::default(), &[], &[]);
    assert_eq!(p.answer, "empty");
    assert_eq!(p.nbest.len(), 1);
    let p = run(&fx, &v2(0.0), &[], &[]);
    assert_eq!(p.answer, "");
    assert_eq!(p.null_odds, Some(1_000_000.0));
    let texts: Vec<&str> = p.nbest.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts, ["empty", ""]);
}

#[test]
fn softmax_matches_the_spec_vector() {
    let p = softmax(&[7.5, 6.0, 6.0, -1.0]);
    assert_eq!(
        p,
        [
            0.6913411921098548,
            0.1542590709126783,
            0.1542590709126783,
            0.0001406660647884666
        ]
    );
    assert!(softmax(&[]).is_empty());
}

#[test]
fn non_finite_logits_do_not_panic() {
    let (fx, f) = simple();
    let mut l = logits(UID, 384, &[(4, 5.0)], &[(5, 4.0)]);
    l.start[0] = f32::NAN;
    l.start[6] = f32::INFINITY;
    l.end[7] = f32::NEG_INFINITY;
    l.end[8] = f32::NAN;
    let p = run(
        &fx,
        &v2(0.0),
        std::slice::from_ref(&f),
        std::slice::from_ref(&l),
    );
    assert!(!p.nbest.is_empty());
    let p = run(&fx, &DecodeConfig::default(), &[f], &[l]);
    assert!(!p.answer.is_empty());
}

#[test]
fn bad_windows_are_errors() {
    let (fx, f) = simple();
    let short = Logits {
        unique_id: UID,
        start: vec![0.0; 3],
        end: vec![0.0; 3],
    };
    let w = [Window::new(&f, &short)];
    let err = decode_example(&DecodeConfig::default(), &fx.doc_tokens, "q", &w, &fx.tok);
    assert!(err.unwrap_err().to_string().contains("feature 1000000000"));
    let other = logits(UID + 7, 384, &[], &[]);
    let w = [Window::new(&f, &other)];
    assert!(decode_example(&DecodeConfig::default(), &fx.doc_tokens, "q", &w, &fx.tok).is_err());
    let cased = DecodeConfig {
        lower_case: false,
        ..DecodeConfig::default()
    };
    let l = logits(UID, 384, &[], &[]);
    let w = [Window::new(&f, &l)];
    assert!(matches!(
        decode_example(&cased, &fx.doc_tokens, "q", &w, &fx.tok),
        Err(Error::Config(_))
    ));
    // A word index outside the paragraph.
    assert!(decode_example(
        &DecodeConfig::default(),
        &fx.doc_tokens.range(..1).collect(),
        "q",
        &w,
        &fx.tok
    )
    .is_err());
}

#[test]
fn whole_dataset_matches_logits_by_unique_id() {
    use crate::types::{Dataset, Example, Paragraph};
    let (fx, f) = simple();
    let mut f2 = f.clone();
    f2.unique_id = UID + 1;
    f2.example_index = 1;
    let para = Paragraph {
        context: "Steve Smith's dog".into(),
        doc_tokens: fx.doc_tokens.clone(),
    };
    let ex = |i: usize, id: &str| Example {
        example_index: i,
        qas_id: id.into(),
        question_text: "who?".into(),
        paragraph_index: 0,
        answers: Vec::new(),
        is_impossible: false,
    };
    let ds = Dataset {
        version: "1.1".into(),
        paragraphs: vec![para],
        examples: vec![ex(0, "x"), ex(1, "y"), ex(2, "z")],
    };
    let l0 = logits(UID, 384, &[(4, 5.0)], &[(5, 4.0)]);
    let l1 = logits(UID + 1, 384, &[(8, 5.0)], &[(8, 4.0)]);
    // Out of order, with a duplicate of l1 (padded batches repeat the last feature).
    let all = [l1.clone(), l0, l1];
    let preds = decode(
        &DecodeConfig::default(),
        &ds,
        &[f.clone(), f2.clone()],
        &all,
        Some(&fx.tok),
    )
    .unwrap();
    let answers: Vec<&str> = preds.iter().map(|p| p.answer.as_str()).collect();
    assert_eq!(answers, ["Steve Smith", "dog", "empty"]);
    let err = decode(
        &DecodeConfig::default(),
        &ds,
        &[f, f2],
        &all[..1],
        Some(&fx.tok),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no logits"), "{err}");
}

/// The one-pass detokenizer equals the Python-style replace chain on any pieces.
#[test]
fn detokenize_fast_path_equals_replace_chain() {
    use proptest::prelude::*;
    let piece = proptest::sample::select(vec![
        "a", "bc", "##d", "##ef", "#", "##", "###", "g#", "##h#", "x y", "\u{a0}", "",
    ]);
    let mut runner = proptest::test_runner::TestRunner::default();
    runner
        .run(&proptest::collection::vec(piece, 0..8), |pieces| {
            for mode in [Postprocess::Nvidia, Postprocess::Hf] {
                let joined = pieces.join(" ").replace(" ##", "");
                let joined = match mode {
                    Postprocess::Nvidia => joined.replace("##", ""),
                    Postprocess::Hf => joined,
                    Postprocess::RunQa => unreachable!(),
                };
                let want = joined.split_whitespace().collect::<Vec<_>>().join(" ");
                prop_assert_eq!(rules::detokenize(mode, &pieces), want);
            }
            Ok(())
        })
        .unwrap();
}

/// The whole-word shortcut of `span_text` gives the general path's text on every span of
/// random paragraphs (real basic tokenizer and WordPiece; words that split, strip accents,
/// vanish or go to `[UNK]`), in both modes and casings, and it is taken on some of them.
#[test]
fn whole_word_shortcut_equals_the_general_path() {
    use crate::tokenize::BertTokenizer;
    use proptest::prelude::*;
    let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nThe\ncafe\nCaf\n##é\nrun\n##ning\n\
                 ##s\nu\nU\n.\ns\nS\n,\n'\ndon\nt\n(\n)\n1895\n-\n1943\n##9\n1\n#\na\n##b\n\
                 ab\nx\n##y\n##z\nna\n##ive\nRUN\n";
    let word = proptest::sample::select(vec![
        "the",
        "The",
        "Café",
        "café",
        "running",
        "runs",
        "U.S.",
        "don't",
        "(1895-1943).",
        "☃",
        "naïve",
        "Cafe\u{301}",
        "#1",
        "a##b",
        "ab",
        "xy",
        "xyz",
        "[UNK]",
        "19",
        "1895,",
        "\u{200b}ab",
        "\u{200b}",
        "RUN",
        "x",
    ]);
    let taken = std::cell::Cell::new(0usize);
    let taken_multi = std::cell::Cell::new(0usize);
    for lower in [true, false] {
        let tok =
            BertTokenizer::from_vocab_text(vocab, lower, &crate::tokenize::in_memory()).unwrap();
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&proptest::collection::vec(word.clone(), 1..10), |words| {
                let doc_tokens: crate::types::Words = words.iter().collect();
                let (ids, map) = pieces_of_words(&tok, &doc_tokens);
                let n = map.len();
                let f = whole_context_feature(ids, map);
                for mode in [Postprocess::Nvidia, Postprocess::Hf] {
                    let config = DecodeConfig {
                        postprocess: mode,
                        lower_case: lower,
                        ..DecodeConfig::default()
                    };
                    let (mut w1, mut s1) = (WordCache::default(), SpanScratch::default());
                    let (mut w2, mut s2) = (WordCache::default(), SpanScratch::default());
                    let mut w3 = WordCache::default();
                    for s in 2..2 + n {
                        for e in s..2 + n {
                            let fast =
                                WordCache::default().whole_words(&doc_tokens, &f, s, e, &tok);
                            // The runs, fresh or reused, decide as the piece-by-piece walk.
                            let scan =
                                WordCache::default().whole_words_scan(&doc_tokens, &f, s, e, &tok);
                            prop_assert_eq!(&fast, &scan, "span {}..={} of {:?}", s, e, words);
                            let reused = w3.whole_words(&doc_tokens, &f, s, e, &tok);
                            prop_assert_eq!(&reused, &scan, "span {}..={} of {:?}", s, e, words);
                            taken.set(taken.get() + usize::from(fast.is_some()));
                            let multi = f.orig_word(s) != f.orig_word(e);
                            taken_multi
                                .set(taken_multi.get() + usize::from(fast.is_some() && multi));
                            let got =
                                span_text(&config, &doc_tokens, &mut w1, &mut s1, &f, s, e, &tok);
                            let want = span_text_general(
                                &config,
                                &doc_tokens,
                                &mut w2,
                                &mut s2,
                                &f,
                                s,
                                e,
                                &tok,
                            );
                            prop_assert_eq!(&got, &want, "span {}..={} of {:?}", s, e, words);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
    }
    assert!(taken.get() > 0, "the shortcut was never taken");
    assert!(taken_multi.get() > 0, "the shortcut never joined words");
}

/// The runs of `whole_words` decide as the piece-by-piece walk on arbitrary features:
/// encoded words whose pieces are then partly replaced by random ones (continuations,
/// `#`, `[UNK]`) and whose word map is partly rewritten (repeats, skips, going back),
/// every span, one cache reused across spans.
#[test]
fn whole_word_runs_equal_the_scan_on_any_map() {
    use crate::tokenize::BertTokenizer;
    use proptest::prelude::*;
    let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncafe\n##s\nu\n.\ns\n,\n'\ndon\nt\n\
                 a\n##b\nab\nx\n##y\n#\n##\n";
    let words = proptest::sample::select(vec![
        "the", "theu", "cafes", "u.s", "U.S.", "don't", "ab", "a", "xy", "x", "#", "☃", "",
        "\u{200b}", "ab,ab", "s",
    ]);
    // (which position, new piece id or none, new word or none)
    let edit = (
        0usize..64,
        proptest::option::of(0u32..22),
        proptest::option::of(0u32..8),
    );
    let case = (
        proptest::collection::vec(words, 1..7),
        proptest::collection::vec(edit, 0..3),
    );
    let multi = std::cell::Cell::new(0usize);
    for lower in [true, false] {
        let tok =
            BertTokenizer::from_vocab_text(vocab, lower, &crate::tokenize::in_memory()).unwrap();
        let mut runner = proptest::test_runner::TestRunner::default();
        runner
            .run(&case, |(words, edits)| {
                let doc_tokens: crate::types::Words = words.iter().collect();
                let nw = doc_tokens.len() as u32;
                let (mut ids, mut map) = pieces_of_words(&tok, &doc_tokens);
                let n = map.len();
                if n == 0 {
                    return Ok(());
                }
                for (at, id, w) in edits {
                    let j = at % n;
                    if let Some(id) = id {
                        ids[2 + j] = id;
                    }
                    if let Some(w) = w {
                        map[j] = w % nw;
                    }
                }
                let f = whole_context_feature(ids, map);
                let mut runs = WordCache::default();
                for s in 2..2 + n {
                    for e in 2..2 + n {
                        let mut scan = WordCache::default();
                        scan.fill(doc_tokens.len() - 1);
                        let want = scan.whole_words_scan(&doc_tokens, &f, s, e, &tok);
                        let got = runs.whole_words(&doc_tokens, &f, s, e, &tok);
                        let joined = got.is_some() && f.orig_word(s) != f.orig_word(e);
                        multi.set(multi.get() + usize::from(joined));
                        prop_assert_eq!(got, want, "span {}..={} of {:?}", s, e, f.token_to_orig);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
    assert!(multi.get() > 0, "no span joined words");
}

/// `[CLS] [SEP]` and the pieces of `words`, then `[SEP]`, and each piece's word.
fn pieces_of_words(
    tok: &crate::tokenize::BertTokenizer,
    words: &crate::types::Words,
) -> (Vec<u32>, Vec<u32>) {
    let mut encoder = tok.encoder();
    let mut ids = vec![tok.cls_id(), tok.sep_id()];
    let mut map = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let before = ids.len();
        encoder.encode(w, &mut ids);
        map.extend(std::iter::repeat_n(i as u32, ids.len() - before));
    }
    ids.push(tok.sep_id());
    (ids, map)
}

/// A feature with an empty question whose context pieces (from position 2) map to
/// `map`, every one of them of maximal context.
fn whole_context_feature(input_ids: Vec<u32>, token_to_orig: Vec<u32>) -> Feature {
    Feature {
        unique_id: 1,
        example_index: 0,
        doc_span_index: 0,
        token_is_max_context: vec![true; token_to_orig.len()],
        input_ids,
        query_len: 0,
        token_to_orig,
        template: None,
    }
}

/// Candidates ranked beforehand (by the journal's forwarder) decode exactly as the
/// decoder's own ranking; candidates ranked for another n-best size are not used.
#[test]
fn ranked_candidates_decode_as_the_logits() {
    let mut fx = Fx::new("a b c d e f g h i j");
    let doc: Vec<(String, u32, bool)> = (0..10)
        .map(|i| (((b'a' + i as u8) as char).to_string(), i, i % 3 != 1))
        .collect();
    let doc: Vec<(&str, u32, bool)> = doc.iter().map(|(p, i, m)| (p.as_str(), *i, *m)).collect();
    let f = fx.feature(UID, &["q"], &doc);
    for (case, config) in [
        DecodeConfig::default(),
        DecodeConfig {
            n_best_size: 3,
            version_2_with_negative: true,
            ..DecodeConfig::default()
        },
    ]
    .into_iter()
    .enumerate()
    {
        for seed in 0..30u32 {
            // Few distinct values: ties everywhere.
            let v = |i: usize, salt: u32| ((i as u32 * 7 + seed * 13 + salt) % 5) as f32 - 2.0;
            let l = Logits {
                unique_id: UID,
                start: (0..f.len() + 3).map(|i| v(i, 1)).collect(),
                end: (0..f.len() + 3).map(|i| v(i, 4)).collect(),
            };
            let plain = [Window::new(&f, &l)];
            let want = decode_example(&config, &fx.doc_tokens, "q", &plain, &fx.tok).unwrap();
            let mut scratch = Vec::new();
            let right = Candidates::of(&l, config.n_best_size, &mut scratch);
            // Ranked for another size: ignored (ranked again).
            let other = Candidates::of(&l, config.n_best_size + 1 + case, &mut scratch);
            for c in [&right, &other] {
                let scores = Scores::Logits {
                    logits: l.clone(),
                    candidates: Some(c.clone()),
                };
                let ranked = [Window::of(&f, &scores)];
                let got = decode_example(&config, &fx.doc_tokens, "q", &ranked, &fx.tok).unwrap();
                assert_eq!(got, want, "seed {seed}");
            }
            // The right candidates are all that is read: the logits may be gone.
            let only = |c: &Candidates| Scores::Candidates {
                unique_id: UID,
                candidates: c.clone(),
            };
            let scores = only(&right);
            let got = decode_example(
                &config,
                &fx.doc_tokens,
                "q",
                &[Window::of(&f, &scores)],
                &fx.tok,
            )
            .unwrap();
            assert_eq!(got, want, "seed {seed}");
            // Candidates of another size cannot stand in for them: an error, not a guess.
            let scores = only(&other);
            let e = decode_example(
                &config,
                &fx.doc_tokens,
                "q",
                &[Window::of(&f, &scores)],
                &fx.tok,
            )
            .unwrap_err();
            assert!(e.to_string().contains("not for n-best size"), "{e}");
        }
    }
}
