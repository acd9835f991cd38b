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
    }
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
