//! Unit tests of the official scoring rules.

use super::*;
use crate::types::{Answer, Dataset, Example};

fn example(i: usize, id: &str, answers: &[&str]) -> Example {
    Example {
        example_index: i,
        qas_id: id.to_string(),
        question_text: "q?".to_string(),
        paragraph_index: 0,
        answers: answers
            .iter()
            .map(|a| Answer {
                text: a.to_string(),
                answer_start: 0,
            })
            .collect(),
        is_impossible: answers.is_empty(),
    }
}

fn dataset(qs: &[(&str, &[&str])]) -> Dataset {
    Dataset {
        version: String::new(),
        paragraphs: vec![Default::default()],
        examples: qs
            .iter()
            .enumerate()
            .map(|(i, (id, a))| example(i, id, a))
            .collect(),
    }
}

fn preds(pairs: &[(&str, &str)]) -> Predictions {
    IdMap::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn na(pairs: &[(&str, f64)]) -> NaProbs {
    IdMap::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), *v)))
}

fn v2() -> ScoreConfig {
    ScoreConfig {
        version_2_with_negative: true,
        na_prob_thresh: 1.0,
    }
}

/// Algorithm §8.4 worked example.
#[test]
fn best_threshold_worked_example() {
    let ds = dataset(&[("a", &["x"]), ("b", &[]), ("c", &["p q"]), ("d", &[])]);
    let p = preds(&[("a", "x"), ("b", "y"), ("c", "q r"), ("d", "")]);
    let n = na(&[("a", -3.0), ("b", -1.0), ("c", 0.5), ("d", 2.0)]);
    let s = score(&ds, &p, Some(&n), &v2()).unwrap();
    let Metrics::V2 { best: Some(b), .. } = s.metrics else {
        panic!("no best thresholds")
    };
    assert_eq!((b.best_exact, b.best_exact_thresh), (75.0, -3.0));
    assert_eq!((b.best_f1, b.best_f1_thresh), (75.0, -3.0));
    // Thresholded at 1.0: d (na 2.0 > 1) is no-answer → correct anyway.
    assert_eq!(s.metrics.exact(), 50.0);
    let keys: Vec<&str> = s.metrics.official().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        keys,
        [
            "exact",
            "f1",
            "total",
            "HasAns_exact",
            "HasAns_f1",
            "HasAns_total",
            "NoAns_exact",
            "NoAns_f1",
            "NoAns_total",
            "best_exact",
            "best_exact_thresh",
            "best_f1",
            "best_f1_thresh"
        ]
    );
}

#[test]
fn threshold_stays_zero_when_nothing_improves() {
    let ds = dataset(&[("a", &["x"]), ("b", &[])]);
    let p = preds(&[("a", "wrong"), ("b", "")]);
    let n = na(&[("a", -5.0), ("b", 3.0)]);
    let s = score(&ds, &p, Some(&n), &v2()).unwrap();
    let Metrics::V2 { best: Some(b), .. } = s.metrics else {
        panic!()
    };
    assert_eq!((b.best_exact, b.best_exact_thresh), (50.0, 0.0));
}

#[test]
fn na_prob_threshold_overrides_scores() {
    let ds = dataset(&[("a", &["x"]), ("b", &[])]);
    let p = preds(&[("a", "x"), ("b", "y")]);
    let n = na(&[("a", 1.5), ("b", 1.5)]);
    let s = score(&ds, &p, Some(&n), &v2()).unwrap();
    // Both above 1.0: a becomes wrong, b becomes right.
    assert_eq!(s.metrics.exact(), 50.0);
    let cfg = ScoreConfig {
        na_prob_thresh: 1.5,
        ..v2()
    };
    let s = score(&ds, &p, Some(&n), &cfg).unwrap();
    assert_eq!(s.metrics.exact(), 50.0);
    let Metrics::V2 {
        has_ans, no_ans, ..
    } = s.metrics
    else {
        panic!()
    };
    assert_eq!(has_ans.unwrap().exact, 100.0);
    assert_eq!(no_ans.unwrap().exact, 0.0);
}

#[test]
fn v2_without_na_probs_has_no_best_keys_and_gold_filtering() {
    // Gold "the" normalizes to empty and is dropped; only "" remains, so "" is right.
    let ds = dataset(&[("a", &["the"]), ("b", &["cat", "a"])]);
    let p = preds(&[("a", ""), ("b", "The cat.")]);
    let s = score(&ds, &p, None, &v2()).unwrap();
    assert_eq!(s.metrics.exact(), 100.0);
    assert!(matches!(s.metrics, Metrics::V2 { best: None, .. }));
    assert_eq!(s.metrics.official().len(), 6);
}

#[test]
fn v1_counts_missing_as_zero_and_reports_them() {
    let ds = dataset(&[("a", &["x y"]), ("b", &["z"]), ("c", &["w"])]);
    let p = preds(&[("a", "x"), ("zz", "q"), ("c", "w")]);
    let s = score(&ds, &p, None, &ScoreConfig::default()).unwrap();
    assert_eq!(s.missing, ["b"]);
    assert_eq!(s.unknown_predictions, 1);
    assert_eq!(s.metrics.exact(), 100.0 * 1.0 / 3.0);
    let f1_a = (2.0 * 1.0 * 0.5) / (1.0 + 0.5);
    assert_eq!(s.metrics.f1(), 100.0 * (f1_a + 0.0 + 1.0) / 3.0);
    // v1: both-empty F1 is 0 and duplicates count in the max.
    let ds = dataset(&[("a", &["the", "a"])]);
    let s = score(&ds, &preds(&[("a", "an")]), None, &ScoreConfig::default()).unwrap();
    assert_eq!((s.metrics.exact(), s.metrics.f1()), (100.0, 0.0));
}

#[test]
fn v2_missing_prediction_is_wrong_even_for_no_answer_questions() {
    let ds = dataset(&[("a", &["x"]), ("b", &[])]);
    let p = preds(&[("a", "x")]);
    let n = na(&[("a", -1.0)]);
    let s = score(&ds, &p, Some(&n), &v2()).unwrap();
    assert_eq!(s.missing, ["b"]);
    assert_eq!(s.metrics.exact(), 50.0);
    let Metrics::V2 {
        best: Some(b),
        total,
        ..
    } = s.metrics
    else {
        panic!()
    };
    assert_eq!(total, 2);
    assert_eq!((b.best_exact, b.best_exact_thresh), (50.0, -1.0));
}

#[test]
fn errors() {
    let ds = dataset(&[("a", &[])]);
    let e = score(&ds, &preds(&[("a", "")]), None, &ScoreConfig::default()).unwrap_err();
    assert!(e.to_string().contains("\"a\""), "{e}");
    let ds = dataset(&[("a", &["x"]), ("b", &[])]);
    let e = score(
        &ds,
        &preds(&[("a", ""), ("b", "")]),
        Some(&na(&[("a", 0.0)])),
        &v2(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"b\""), "{e}");
    assert!(score(&dataset(&[]), &preds(&[]), None, &v2()).is_err());
}

#[test]
fn predictions_in_question_order_score_as_in_any_other_order() {
    // The same answers in the dataset's order (read by position) and shuffled (looked
    // up by id): the same per-question scores and totals, for both rule sets.
    let ds = dataset(&[("a", &["x y"]), ("b", &["z"]), ("c", &["w", "the"])]);
    let ordered = preds(&[("a", "x"), ("b", "no"), ("c", "")]);
    let shuffled = preds(&[("c", ""), ("a", "x"), ("b", "no")]);
    for config in [ScoreConfig::default(), v2()] {
        let s1 = score(&ds, &ordered, None, &config).unwrap();
        let s2 = score(&ds, &shuffled, None, &config).unwrap();
        assert_eq!(s1.questions, s2.questions);
        assert_eq!(
            (s1.metrics.exact(), s1.metrics.f1()),
            (s2.metrics.exact(), s2.metrics.f1())
        );
        assert_eq!((s1.missing.len(), s1.unknown_predictions), (0, 0));
        assert_eq!((s2.missing.len(), s2.unknown_predictions), (0, 0));
    }
}
