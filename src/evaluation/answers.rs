//! An evaluation of answers computed elsewhere ([`crate::Evaluation::of_answers`]).

use std::collections::HashMap;
use std::path::PathBuf;

use super::facts::{finished, Facts};
use super::slices::{null_threshold, SliceSide};
use super::{score_with, EvalData, Evaluation};
use crate::decode::Prediction;
use crate::error::{Error, Result};
use crate::journal::Fingerprint;
use crate::pipeline::{InferReport, Phases, RunOutcome};

/// [`Evaluation::of_answers`](crate::Evaluation::of_answers): `answers` (question id →
/// answer text and null odds) to the questions of `data`, scored as the official
/// scripts score them; no run: no latency, windows or n-best lists.
pub(crate) fn of_answers(
    data: &EvalData,
    answers: &HashMap<String, (String, Option<f64>)>,
    version_2: Option<bool>,
    na_prob_thresh: f64,
    statistics: &crate::compare::Statistics,
) -> Result<Evaluation> {
    let dataset = &data.dataset;
    let version_2 = version_2.unwrap_or(data.looks_like_v2);
    let mut predictions = Vec::with_capacity(dataset.examples.len());
    for e in &dataset.examples {
        let Some((answer, null_odds)) = answers.get(&e.qas_id) else {
            return Err(Error::Refused(format!(
                "no answer to question {:?} of {}",
                e.qas_id, data.name
            )));
        };
        predictions.push(Prediction {
            qas_id: e.qas_id.clone(),
            answer: answer.clone(),
            nbest: Vec::new(),
            null_odds: *null_odds,
        });
    }
    let null_odds = version_2 && predictions.iter().all(|p| p.null_odds.is_some());
    let scores = score_with(dataset, &predictions, version_2, null_odds, na_prob_thresh)?;
    let outcome = RunOutcome {
        predictions,
        features: 0,
        featureless: Vec::new(),
        placements: Vec::new(),
        infer: InferReport::empty(),
        phases: Phases::default(),
        wall: std::time::Duration::ZERO,
        logits: Vec::new(),
        kept_features: Vec::new(),
    };
    let facts = Facts {
        data: data.name.clone(),
        format: data.format,
        server: None,
        postprocess: "",
        batch_size: 0,
        batch_size_given: false,
        concurrency: 0,
        output_dir: PathBuf::new(),
        fingerprint: Fingerprint::default(),
        server_metrics: None,
    };
    let side = SliceSide {
        version_2,
        windowless: "the answers were given without their windows".into(),
        margins: Vec::new(),
        null_threshold: null_threshold(version_2, null_odds, 0.0, || {
            "the answers came without null odds".into()
        }),
    };
    let slices = side.slices(dataset, &outcome, &scores, statistics);
    Ok(finished(
        outcome, scores, version_2, null_odds, facts, slices,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Format;

    fn data() -> EvalData {
        let rows = [
            r#"{"id": "a", "question": "Who?", "context": "Ann met Bob.", "answers": {"text": ["Ann"], "answer_start": [0]}}"#,
            r#"{"id": "b", "question": "Whom?", "context": "Ann met Bob.", "answers": {"text": ["Bob"], "answer_start": [8]}}"#,
            r#"{"id": "c", "question": "Why?", "context": "Ann met Bob.", "answers": {"text": [], "answer_start": []}}"#,
        ];
        let (loaded, _) = crate::data::from_bytes(
            rows.join("\n").into_bytes(),
            Some(Format::HfJsonl),
            std::path::Path::new("<rows>"),
        )
        .unwrap();
        EvalData::new(loaded.dataset, "<rows>", "", Format::HfJsonl)
    }

    /// Answers given elsewhere are scored as the official v2 script scores them, with
    /// their null odds as the na-prob file; a question without one is named.
    #[test]
    fn answers_given_elsewhere_are_scored_and_a_missing_one_is_named() {
        let data = data();
        assert!(data.looks_like_v2);
        let answers: HashMap<String, (String, Option<f64>)> = [
            ("a", ("Ann", Some(-3.0))),
            ("b", ("met Bob", Some(-1.0))),
            ("c", ("", Some(2.0))),
        ]
        .into_iter()
        .map(|(id, (text, odds))| (id.to_string(), (text.to_string(), odds)))
        .collect();
        let e = Evaluation::of_answers(&data, &answers, None, 1.0).unwrap();
        assert!(e.version_2_with_negative());
        // a right, b half right (F1 2/3), c right (no answer).
        assert!((e.metrics.exact() - 200.0 / 3.0).abs() < 1e-9);
        assert!((e.metrics.f1() - 100.0 * (1.0 + 2.0 / 3.0 + 1.0) / 3.0).abs() < 1e-9);
        assert_eq!(e.predictions.get("b").map(String::as_str), Some("met Bob"));
        assert!(e.slices_not_computed.contains_key("context_windows"));
        assert!(e.slices.iter().any(|s| s.slice == "question_type:who"));
        let mut missing = answers.clone();
        missing.remove("b");
        let err = Evaluation::of_answers(&data, &missing, None, 1.0).unwrap_err();
        assert!(err.to_string().contains("\"b\""), "{err}");
    }
}
