use super::stats::{fisher_exact, holm};
use super::*;

/// ln(k!) for k = 0..=n, by summing logarithms: a computation independent of the
/// ratio recurrence `fisher_exact` uses.
fn ln_factorials(n: u64) -> Vec<f64> {
    let mut out = vec![0.0; n as usize + 1];
    for k in 1..=n as usize {
        out[k] = out[k - 1] + (k as f64).ln();
    }
    out
}

/// Two-sided Fisher's exact test by its definition: the hypergeometric probability of
/// every table with the same margins, summed over those no likelier than the observed.
fn fisher_by_definition(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let n = a + b + c + d;
    let lf = ln_factorials(n);
    let (row, col) = (a + b, a + c);
    let p = |x: u64| {
        (lf[row as usize] - lf[x as usize] - lf[(row - x) as usize] + lf[(n - row) as usize]
            - lf[(col - x) as usize]
            - lf[(n + x - row - col) as usize]
            - lf[n as usize]
            + lf[col as usize]
            + lf[(n - col) as usize])
            .exp()
    };
    let lo = (row + col).saturating_sub(n);
    let hi = row.min(col);
    let observed = p(a);
    (lo..=hi)
        .map(p)
        .filter(|&q| q <= observed * (1.0 + 1e-7))
        .sum::<f64>()
        .min(1.0)
}

#[test]
fn fisher_gives_the_published_two_sided_p_values() {
    // R's fisher.test and scipy's fisher_exact on the same tables.
    let cases = [
        ((6, 2, 1, 4), 0.102_564_102_564_102_56),
        ((8, 2, 1, 5), 0.034_965_034_965_034_97),
        ((1, 9, 11, 3), 0.002_759_456_185_220_083_6),
        ((3, 1, 1, 3), 0.485_714_285_714_285_7),
        ((0, 5, 5, 0), 0.007_936_507_936_507_936),
        ((0, 0, 3, 4), 1.0),
    ];
    for ((a, b, c, d), p) in cases {
        let got = fisher_exact(a, b, c, d);
        assert!(
            (got - p).abs() < 1e-12,
            "({a}, {b}, {c}, {d}): {got} against {p}"
        );
    }
}

#[test]
fn fisher_equals_the_definition_on_tables_the_size_of_a_dev_set() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..200 {
        let slice = rng.u64(1..3_000);
        let rest = rng.u64(1..9_000);
        let a = rng.u64(0..=slice);
        let c = rng.u64(0..=rest);
        let (b, d) = (slice - a, rest - c);
        let got = fisher_exact(a, b, c, d);
        let want = fisher_by_definition(a, b, c, d);
        assert!(
            (got - want).abs() < 1e-9,
            "({a}, {b}, {c}, {d}): {got} against {want}"
        );
    }
}

#[test]
fn holm_multiplies_by_the_hypotheses_left_and_keeps_the_order() {
    // Sorted: 0.01 (×4), 0.02 (×3), 0.03 (×2), 0.04 (×1), each at least the one before.
    let adjusted = holm(&[0.04, 0.01, 0.03, 0.02]);
    let want = [0.06, 0.04, 0.06, 0.06];
    for (got, want) in adjusted.iter().zip(want) {
        assert!((got - want).abs() < 1e-15, "{adjusted:?}");
    }
    assert_eq!(holm(&[0.5, 0.9]), vec![1.0, 1.0]);
    assert!(holm(&[]).is_empty());
}

#[test]
fn question_types_follow_the_first_wh_word() {
    let cases = [
        ("What year did it open?", "what"),
        ("In which city is it?", "which"),
        ("To whom was it given?", "who"),
        ("Whose idea was it?", "who"),
        ("When did Beyoncé start?", "when"),
        ("The lighthouse stands where?", "where"),
        ("Why?", "why"),
        ("How many floors has it?", "how_many"),
        ("HOW MUCH did it cost?", "how_much"),
        ("How tall is it?", "how"),
        ("What's the name, and who chose it?", "what"),
        ("Name the architect.", "other"),
        ("Somewhat odd, whatever: who?", "who"),
        ("", "other"),
    ];
    for (question, want) in cases {
        assert_eq!(question_type(question), want, "{question:?}");
        // The same words after a non-ASCII one take the lowercasing path: same answer.
        let widened = format!("{question} \u{e9}t\u{e9}");
        assert_eq!(question_type(&widened), want, "{widened:?}");
    }
    assert_eq!(question_type("WHÖ? WHOSE \u{c9}T\u{c9}"), "who");
}

#[test]
fn answer_lengths_count_words() {
    for (text, want) in [
        ("1851", "1"),
        ("Ada Byron", "2-3"),
        ("the  Varne   Point light", "4-7"),
        ("one two three four five six seven eight", "8+"),
        ("   ", "1"),
    ] {
        assert_eq!(answer_length(text), want, "{text:?}");
    }
}

#[test]
fn windows_name_the_context_and_where_the_answer_lies() {
    assert_eq!(context_windows(0), "1");
    assert_eq!(context_windows(1), "1");
    assert_eq!(context_windows(2), "2");
    assert_eq!(context_windows(7), "3+");
    let spans = [(0, 10), (5, 10), (10, 10)];
    assert_eq!(answer_windows(&spans[..1], Some((2, 3))), "single");
    assert_eq!(answer_windows(&spans, Some((1, 3))), "one");
    assert_eq!(answer_windows(&spans, Some((6, 9))), "overlap");
    assert_eq!(answer_windows(&spans, Some((12, 14))), "overlap");
    assert_eq!(answer_windows(&spans[..2], Some((12, 14))), "one");
    assert_eq!(answer_windows(&[(0, 4), (2, 4)], Some((1, 4))), "cut");
    assert_eq!(answer_windows(&spans, None), "cut");
}

#[test]
fn quartiles_rank_by_value_then_by_order() {
    let values = [0.5, 0.1, 0.5, 0.2, 0.9, 0.5, 0.0, 0.3];
    // Ranks: 0.0 (6), 0.1 (1), 0.2 (3), 0.3 (7), 0.5 (0), 0.5 (2), 0.5 (5), 0.9 (4).
    assert_eq!(
        quartiles(&values),
        vec!["q3", "q1", "q3", "q2", "q4", "q4", "q1", "q2"]
    );
    assert_eq!(quartiles(&[1.0]), vec!["q1"]);
    assert_eq!(quartiles(&[2.0, 1.0, 3.0]), vec!["q2", "q1", "q3"]);
    assert!(quartiles(&[]).is_empty());
}

/// Questions of `words` (their first words) about one paragraph, each with a gold
/// answer of `answer` words unless it is `None` (unanswerable).
fn data(questions: &[(&str, Option<usize>)]) -> crate::types::Dataset {
    let mut d = crate::types::Dataset::default();
    d.paragraphs.push(crate::squad::split_context(
        "one two three four five six seven eight nine",
    ));
    for (i, &(q, answer)) in questions.iter().enumerate() {
        d.examples.push(crate::types::Example {
            example_index: i,
            qas_id: format!("q{i}"),
            question_text: q.to_string(),
            paragraph_index: 0,
            answers: answer
                .map(|w| crate::types::Answer {
                    text: [
                        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                    ][..w]
                        .join(" "),
                    answer_start: 0,
                })
                .into_iter()
                .collect(),
            is_impossible: answer.is_none(),
        });
    }
    d
}

fn prediction(scores: &[(&str, f64)], null_odds: Option<f64>) -> crate::decode::Prediction {
    crate::decode::Prediction {
        qas_id: String::new(),
        answer: String::new(),
        nbest: scores
            .iter()
            .map(|&(text, score)| crate::decode::NbestEntry {
                text: text.to_string(),
                probability: 0.0,
                start_logit: score,
                end_logit: 0.0,
                span: None,
                keys: Default::default(),
            })
            .collect(),
        null_odds,
    }
}

#[test]
fn each_question_gets_one_slice_per_dimension_it_has() {
    let d = data(&[
        ("When?", Some(1)),
        ("Who?", Some(3)),
        ("How many?", None),
        ("What?", Some(9)),
    ]);
    let placements = [
        Placement {
            windows: 1,
            answer: Some("single"),
        },
        Placement {
            windows: 2,
            answer: Some("overlap"),
        },
        Placement {
            windows: 3,
            answer: None,
        },
        Placement {
            windows: 5,
            answer: Some("cut"),
        },
    ];
    let predictions = [
        prediction(&[("a", 5.0), ("", 4.0), ("b", 1.0)], Some(-2.0)),
        prediction(&[("a", 5.0), ("empty", 4.5)], Some(3.0)),
        prediction(&[("a", 2.0), ("b", 1.5)], Some(0.5)),
        prediction(&[("a", 9.0), ("b", 8.0)], Some(1.0)),
    ];
    let margins: Vec<f64> = predictions.iter().map(margin).collect();
    let nulls = null_margins(&predictions, 1.0).unwrap();
    let facts = RunFacts {
        version_2: true,
        placements: Ok(&placements),
        margins: Ok(&margins),
        null_margins: Ok(&nulls),
    };
    let (slices, not_computed) = assign(&d, &facts);
    assert!(not_computed.is_empty(), "{not_computed:?}");
    // Margins 4, inf, 0.5, 1 and null margins 3, 2, 0.5, 0.
    assert_eq!(
        slices[0],
        [
            Some("when"),
            Some("has_answer"),
            Some("1"),
            Some("single"),
            Some("1"),
            Some("q3"),
            Some("q4")
        ]
    );
    assert_eq!(
        slices[1],
        [
            Some("who"),
            Some("has_answer"),
            Some("2"),
            Some("overlap"),
            Some("2-3"),
            Some("q4"),
            Some("q3")
        ]
    );
    assert_eq!(
        slices[2],
        [
            Some("how_many"),
            Some("no_answer"),
            Some("3+"),
            None,
            None,
            Some("q1"),
            Some("q2")
        ]
    );
    assert_eq!(
        slices[3],
        [
            Some("what"),
            Some("has_answer"),
            Some("3+"),
            Some("cut"),
            Some("8+"),
            Some("q2"),
            Some("q1")
        ]
    );
    // What a run cannot give is named with its reason.
    let facts = RunFacts {
        version_2: false,
        placements: Err("the server cuts the windows".into()),
        margins: Err("no n-best".into()),
        null_margins: Err("no null odds".into()),
    };
    let (slices, not_computed) = assign(&d, &facts);
    assert_eq!(
        slices[1],
        [Some("who"), None, None, None, Some("2-3"), None, None]
    );
    assert_eq!(
        not_computed.keys().copied().collect::<Vec<_>>(),
        [
            "answer_windows",
            "answerable",
            "context_windows",
            "margin",
            "null_margin"
        ]
    );
    assert_eq!(not_computed["margin"], "no n-best");
    // A prediction without null odds leaves null_margin out.
    let without = [
        prediction(&[("a", 1.0)], Some(0.0)),
        prediction(&[("a", 1.0)], None),
    ];
    assert!(null_margins(&without, 0.0).is_err());
}

#[test]
fn a_slice_whose_errors_stand_out_is_named_and_one_at_random_is_not() {
    // 400 questions, a quarter "when": every "when" question wrong, the rest wrong one
    // time in ten.
    let words = ["when", "what", "who", "where"];
    let questions: Vec<String> = (0..400).map(|i| format!("{}?", words[i % 4])).collect();
    let d = data(
        &questions
            .iter()
            .map(|q| (q.as_str(), Some(1)))
            .collect::<Vec<_>>(),
    );
    let facts = RunFacts {
        version_2: false,
        placements: Err(String::new()),
        margins: Err(String::new()),
        null_margins: Err(String::new()),
    };
    let (slices, _) = assign(&d, &facts);
    let flagged: Vec<bool> = (0..400).map(|i| i % 4 == 0 || i % 10 == 3).collect();
    let tests = tested(&slices, &flagged);
    let names: Vec<&str> = tests.iter().map(|t| t.slice.as_str()).collect();
    assert_eq!(
        names,
        [
            "question_type:what",
            "question_type:when",
            "question_type:where",
            "question_type:who",
            "answer_length:1"
        ]
    );
    let when = &tests[1];
    assert_eq!(when.members.len(), 100);
    assert_eq!(when.rate, 1.0);
    // 40 of the other 300 are flagged (an i with i % 10 == 3 is odd: never "when").
    assert!(
        (when.rest_rate - 40.0 / 300.0).abs() < 1e-12,
        "{}",
        when.rest_rate
    );
    assert!((when.p_value - fisher_exact(100, 0, 40, 260)).abs() < 1e-15);
    let adjusted = holm(&tests.iter().map(|t| t.p_value).collect::<Vec<_>>());
    for (t, a) in tests.iter().zip(adjusted) {
        assert_eq!(t.p_adjusted, a, "{}", t.slice);
    }
    assert_eq!(standing_out(&tests, 0.95), ["question_type:when"]);
    // Flags at random over the slices: nothing stands out.
    let mut rng = fastrand::Rng::with_seed(3);
    let flagged: Vec<bool> = (0..400).map(|_| rng.f64() < 0.2).collect();
    assert!(standing_out(&tested(&slices, &flagged), 0.95).is_empty());
}
