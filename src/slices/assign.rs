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
    /// The reference run's predictions with their n-best, in data order.
    pub(crate) predictions: Result<&'a [Prediction], String>,
    /// The no-answer threshold the null odds are compared with (SQuAD 2.0, a model
    /// that gives null odds).
    pub(crate) null_threshold: Result<f64, String>,
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
    match facts.predictions {
        Ok(predictions) => {
            let margins: Vec<f64> = predictions.iter().map(margin).collect();
            for (slices, q) in out.iter_mut().zip(quartiles(&margins)) {
                slices[5] = Some(q);
            }
        }
        Err(ref reason) => {
            not_computed.insert(DIMENSIONS[5], reason.clone());
        }
    }
    let null_odds = match (&facts.predictions, &facts.null_threshold) {
        (_, Err(reason)) | (Err(reason), _) => Err(reason.clone()),
        (Ok(predictions), Ok(threshold)) => predictions
            .iter()
            .map(|p| p.null_odds.map(|odds| (odds - threshold).abs()))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| "a prediction without null odds".to_string()),
    };
    match null_odds {
        Ok(values) => {
            for (slices, q) in out.iter_mut().zip(quartiles(&values)) {
                slices[6] = Some(q);
            }
        }
        Err(reason) => {
            not_computed.insert(DIMENSIONS[6], reason);
        }
    }
    (out, not_computed)
}

/// How sure the run was of a question's answer: its best candidate's score (start +
/// end logit) minus the second's, over the n-best without its `""` and `"empty"`
/// entries; infinite with fewer than two.
pub(crate) fn margin(prediction: &Prediction) -> f64 {
    let mut scores = prediction
        .nbest
        .iter()
        .filter(|e| !e.text.is_empty() && e.text != "empty")
        .map(|e| e.start_logit + e.end_logit);
    match (scores.next(), scores.next()) {
        (Some(best), Some(second)) => best - second,
        _ => f64::INFINITY,
    }
}
