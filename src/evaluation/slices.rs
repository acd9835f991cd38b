//! An evaluation's slices (docs/algorithm.md §8.8): each slice's exact match and F1
//! with bootstrap intervals over its questions, and whether its errors (questions whose
//! exact score is 0) stand out against the rest's.

use std::collections::BTreeMap;

use crate::compare::stats::Statistics;
use crate::decode::Prediction;
use crate::evaluate::Scores;
use crate::slices::Slice;
use crate::slices::{self, Placement, QuestionSlices, RunFacts};
use crate::types::Dataset;

/// An evaluation's slices, and each question's.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Slices {
    pub(crate) slices: Vec<Slice>,
    pub(crate) weak: Vec<String>,
    pub(crate) not_computed: BTreeMap<String, String>,
    /// Each question's slice in every dimension, in data order.
    pub(crate) questions: Vec<QuestionSlices>,
    /// How the intervals were drawn; the tests are read at 1 − confidence.
    pub(crate) statistics: Statistics,
}

/// What a run gives for its slices, as the run had it.
pub(crate) struct RunSide<'a> {
    pub(crate) version_2: bool,
    /// Empty when the run did not cut the windows: `windowless` says why.
    pub(crate) placements: &'a [Placement],
    pub(crate) windowless: String,
    /// Each question's margin, computed before its n-best list was written away.
    pub(crate) margins: &'a [f64],
    pub(crate) predictions: &'a [Prediction],
    /// The no-answer threshold, when the run gives null odds; else why not.
    pub(crate) null_threshold: Result<f64, String>,
}

/// The slices of a run of `dataset` scored as `scores`, at `statistics`.
pub(crate) fn of(
    dataset: &Dataset,
    run: &RunSide<'_>,
    scores: &Scores,
    statistics: &Statistics,
) -> Slices {
    let (questions, not_computed) = assigned(dataset, run);
    let exact: Vec<f64> = scores.questions.iter().map(|q| q.exact).collect();
    let f1: Vec<f64> = scores.questions.iter().map(|q| q.f1).collect();
    let (slices, weak) = slices::tabled(&questions, &exact, &f1, statistics);
    Slices {
        slices,
        weak,
        not_computed: not_computed
            .into_iter()
            .map(|(d, reason)| (d.to_string(), reason))
            .collect(),
        questions,
        statistics: *statistics,
    }
}

/// Each question's slices in a run of `dataset`, and the dimensions not computed with
/// why.
pub(crate) fn assigned(
    dataset: &Dataset,
    run: &RunSide<'_>,
) -> (Vec<QuestionSlices>, BTreeMap<&'static str, String>) {
    let n = dataset.examples.len();
    let placements = match run.placements.len() == n {
        true => Ok(run.placements),
        false => Err(run.windowless.clone()),
    };
    let margins = match run.margins.len() == n && run.margins.iter().any(|m| m.is_finite()) {
        true => Ok(run.margins),
        false => Err("no question's n-best list holds two answers".to_string()),
    };
    let nulls = run
        .null_threshold
        .clone()
        .and_then(|t| slices::null_margins(run.predictions, t));
    let facts = RunFacts {
        version_2: run.version_2,
        placements,
        margins,
        null_margins: nulls.as_deref().map_err(Clone::clone),
    };
    slices::assign(dataset, &facts)
}

/// What a finished run gives its slices besides its outcome and scores.
pub(crate) struct SliceSide {
    pub(crate) version_2: bool,
    /// Why the run has no placements (a text model's windows are the server's).
    pub(crate) windowless: String,
    pub(crate) margins: Vec<f64>,
    pub(crate) null_threshold: std::result::Result<f64, String>,
}

impl SliceSide {
    /// A run of `model` (`None`: decoded from saved logits) with each question's
    /// `margins` taken before its n-best list was written away.
    pub(crate) fn of(
        model: Option<&crate::backend::Model>,
        version_2: bool,
        null_odds: bool,
        decode: &crate::decode::DecodeConfig,
        margins: Vec<f64>,
    ) -> SliceSide {
        let name = model.map_or("", |m| m.name());
        SliceSide {
            version_2,
            windowless: match model.is_some_and(|m| m.takes_text()) {
                true => format!("model {name:?} cuts its windows on the server"),
                false => "the run's windows were not cut here".into(),
            },
            margins,
            null_threshold: null_threshold(
                version_2,
                null_odds,
                decode.null_score_diff_threshold,
                || format!("model {name:?} gives no null odds"),
            ),
        }
    }

    pub(crate) fn slices(
        &self,
        dataset: &crate::types::Dataset,
        outcome: &crate::pipeline::RunOutcome,
        scores: &crate::evaluate::Scores,
        statistics: &crate::compare::stats::Statistics,
    ) -> Slices {
        let run = RunSide {
            version_2: self.version_2,
            placements: &outcome.placements,
            windowless: self.windowless.clone(),
            margins: &self.margins,
            predictions: &outcome.predictions,
            null_threshold: self.null_threshold.clone(),
        };
        of(dataset, &run, scores, statistics)
    }
}

/// The threshold a run's null odds are measured from for `null_margin`, or why the
/// dimension is not computed (`no_odds`: what to say when the answers have none).
pub(crate) fn null_threshold(
    version_2: bool,
    null_odds: bool,
    threshold: f64,
    no_odds: impl FnOnce() -> String,
) -> std::result::Result<f64, String> {
    match (version_2, null_odds) {
        (false, _) => Err("SQuAD 1.1 rules: every question is answered".into()),
        (true, false) => Err(no_odds()),
        (true, true) => Ok(threshold),
    }
}
