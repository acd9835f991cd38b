//! Each question's slice in every dimension, from the data and what the run gives.

use std::collections::BTreeMap;

use super::{
    answer_length, answerable, context_windows, quartiles, question_type, Placement, DIMENSIONS,
};
use crate::decode::Prediction;
use crate::types::Dataset;

/// A question's slice in each dimension of [`DIMENSIONS`], in that order; `None` where
/// the dimension does not apply to it (`answer_length` of an unanswerable question) or
/// was not computed for the run.
pub(crate) type QuestionSlices = [Option<&'static str>; DIMENSIONS.len()];

/// What a run gives for its questions' slices beside the data: each is either there or
/// the reason it is not (listed under `slices_not_computed`).
pub(crate) struct RunFacts<'a> {
    /// SQuAD 2.0's rules apply.
    pub(crate) version_2: bool,
    /// Each question's windows and answer among them, in data order.
    pub(crate) placements: Result<&'a [Placement], String>,
    /// Each question's [`margin`] in the reference run, in data order.
    pub(crate) margins: Result<&'a [f64], String>,
    /// Each question's [`null_margins`] in the reference run, in data order.
    pub(crate) null_margins: Result<&'a [f64], String>,
}

/// Every question's slices, and the dimensions not computed with their reasons.
pub(crate) fn assign(
    dataset: &Dataset,
    facts: &RunFacts<'_>,
) -> (Vec<QuestionSlices>, BTreeMap<&'static str, String>) {
    let n = dataset.examples.len();
    let mut out = vec![[None; DIMENSIONS.len()]; n];
    let mut not_computed = BTreeMap::new();
    for (slices, example) in out.iter_mut().zip(&dataset.examples) {
        slices[0] = Some(question_type(&example.question_text));
        let has_answer = !example.is_impossible && !example.answers.is_empty();
        if facts.version_2 {
            slices[1] = Some(answerable(has_answer));
        }
        if has_answer {
            slices[4] = Some(answer_length(&example.answers[0].text));
        }
    }
    if !facts.version_2 {
        not_computed.insert(
            DIMENSIONS[1],
            "SQuAD 1.1 data: every question has an answer".into(),
        );
    }
    match facts.placements {
        Ok(placements) => {
            for (slices, placement) in out.iter_mut().zip(placements) {
                slices[2] = Some(context_windows(placement.windows));
                slices[3] = placement.answer;
            }
        }
        Err(ref reason) => {
            not_computed.insert(DIMENSIONS[2], reason.clone());
            not_computed.insert(DIMENSIONS[3], reason.clone());
        }
    }
    for (d, values) in [(5, &facts.margins), (6, &facts.null_margins)] {
        match values {
            Ok(values) => {
                for (slices, q) in out.iter_mut().zip(quartiles(values)) {
                    slices[d] = Some(q);
                }
            }
            Err(reason) => {
                not_computed.insert(DIMENSIONS[d], reason.clone());
            }
        }
    }
    (out, not_computed)
}

/// How sure the run was of a question's answer: its best candidate's score (start +
/// end logit) minus the second's, over the n-best without its `""` and `"empty"`
/// entries; infinite with fewer than two.
pub(crate) fn margin(prediction: &Prediction) -> f64 {
    margin_of(
        prediction
            .nbest
            .iter()
            .map(|e| (e.text.as_str(), e.start_logit + e.end_logit)),
    )
}

/// [`margin`] of an n-best list given as each entry's text and score, in order.
pub(crate) fn margin_of<'a>(entries: impl Iterator<Item = (&'a str, f64)>) -> f64 {
    let mut scores = entries
        .filter(|(text, _)| !text.is_empty() && *text != "empty")
        .map(|(_, score)| score);
    match (scores.next(), scores.next()) {
        (Some(best), Some(second)) => best - second,
        _ => f64::INFINITY,
    }
}

/// How near each question's null odds are to the no-answer threshold: |null odds −
/// `threshold`|; the reason when a prediction has none.
pub(crate) fn null_margins(predictions: &[Prediction], threshold: f64) -> Result<Vec<f64>, String> {
    predictions
        .iter()
        .map(|p| p.null_odds.map(|odds| (odds - threshold).abs()))
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(|| "a prediction without null odds".to_string())
}
