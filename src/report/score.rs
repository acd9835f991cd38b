//! `bertqa score --json` (`schema/score.schema.json`) and the table `score` prints: the
//! official metrics of a predictions file, and the questions it leaves out.

use std::fmt::Write as _;

use serde::Serialize;

use super::{CountedIds, Render};
use crate::evaluate::{Metrics, Scores};

/// How many ids of questions without a prediction are named.
pub(crate) const FIRST_IDS: usize = 5;

/// `score`'s document (`schema/score.schema.json`).
#[derive(Debug, Serialize)]
pub struct ScoreJson {
    /// Always 1.
    pub schema: u32,
    /// The official script whose rules scored: `v1.1` or `v2.0`.
    pub version: SquadVersion,
    /// The official scores under the official script's keys, percentages 0–100.
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    /// Questions in the gold data.
    pub questions: usize,
    /// Questions without a prediction (each scores 0).
    pub missing_predictions: CountedIds,
    /// Predictions for ids that are not in the data (ignored).
    pub unknown_predictions: usize,
    /// `mrqa` for MRQA gold data (its evaluator's rules: SQuAD v1.1's); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Rules>,
}

/// The official SQuAD evaluator a score follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SquadVersion {
    /// SQuAD v1.1's `evaluate-v1.1.py` (`v1.1`): every question has an answer.
    #[serde(rename = "v1.1")]
    V1,
    /// SQuAD v2.0's `evaluate-v2.0.py` (`v2.0`): questions may have no answer.
    #[serde(rename = "v2.0")]
    V2,
}

impl SquadVersion {
    /// The evaluator of data whose `version_2_with_negative` is as given.
    pub fn new(version_2_with_negative: bool) -> SquadVersion {
        if version_2_with_negative {
            SquadVersion::V2
        } else {
            SquadVersion::V1
        }
    }

    /// `v1.1` or `v2.0`, as the official scripts are named.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SquadVersion::V1 => "v1.1",
            SquadVersion::V2 => "v2.0",
        }
    }
}

/// Rules other than SQuAD's own, named by the gold data's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rules {
    /// MRQA gold data, scored by the MRQA evaluator's rules (SQuAD v1.1's).
    Mrqa,
}

impl ScoreJson {
    /// The report of `scores` (by `version`'s rules; `rules`: MRQA gold data).
    pub fn new(scores: &Scores, version: SquadVersion, rules: Option<Rules>) -> ScoreJson {
        ScoreJson {
            schema: 1,
            version,
            metrics: scores.metrics.clone(),
            questions: scores.questions.len(),
            missing_predictions: CountedIds::first(
                &scores.missing,
                scores.missing.len(),
                FIRST_IDS,
            ),
            unknown_predictions: scores.unknown_predictions,
            rules,
        }
    }

    /// The line that names the questions without a prediction (`None`: there are none),
    /// the first `FIRST_IDS` of them quoted.
    pub fn missing_line(&self) -> Option<String> {
        let missing = &self.missing_predictions;
        if missing.count == 0 {
            return None;
        }
        let first: Vec<String> = missing
            .first_ids
            .iter()
            .map(|id| format!("{id:?}"))
            .collect();
        Some(format!(
            "{} of {} questions have no prediction and score 0 (first: {}{})",
            missing.count,
            self.questions,
            first.join(", "),
            if missing.count > FIRST_IDS {
                ", …"
            } else {
                ""
            }
        ))
    }
}

impl Render for ScoreJson {
    type Json<'a> = &'a ScoreJson;

    fn json(&self) -> &ScoreJson {
        self
    }

    /// The official keys, their values as every text report shows them (the JSON has
    /// them in full).
    fn text(&self, _verbose: bool) -> String {
        let mut out = String::new();
        match self.rules {
            Some(Rules::Mrqa) => {
                let _ = writeln!(
                    out,
                    "MRQA (the official MRQA evaluator's rules: SQuAD v1.1's), {} questions",
                    self.questions
                );
            }
            None => {
                let v = self.version.as_str();
                let _ = writeln!(
                    out,
                    "SQuAD {v} (official evaluate-{v} rules), {} questions",
                    self.questions
                );
            }
        }
        out.push_str(&super::text::metric_lines(&self.metrics, "  "));
        if let Some(line) = self.missing_line() {
            let _ = writeln!(out, "missing: {line}");
        }
        if self.unknown_predictions > 0 {
            let _ = writeln!(
                out,
                "ignored: {} predictions for ids not in the data file",
                self.unknown_predictions
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::QuestionScore;
    use crate::report::Format;

    fn scores(metrics: Metrics, questions: usize, missing: usize) -> Scores {
        Scores {
            metrics,
            questions: (0..questions)
                .map(|i| QuestionScore {
                    qas_id: format!("q{i}"),
                    has_answer: true,
                    predicted: i >= missing,
                    exact: 0.0,
                    f1: 0.0,
                })
                .collect(),
            missing: (0..missing).map(|i| format!("q{i}")).collect(),
            unknown_predictions: 2,
            counted: Vec::new(),
        }
    }

    fn v1() -> Metrics {
        Metrics::V1 {
            exact_match: 25.0,
            f1: 100.0 / 3.0,
        }
    }

    fn v2() -> Metrics {
        Metrics::V2 {
            exact: 50.0,
            f1: 62.5,
            total: 8,
            has_ans: None,
            no_ans: None,
            best: None,
        }
    }

    #[test]
    fn follows_the_schema_with_the_keys_in_order() {
        let schema = include_str!("../../schema/score.schema.json");
        for (metrics, version, rules) in [
            (v1(), SquadVersion::V1, None),
            (v2(), SquadVersion::V2, None),
            (v1(), SquadVersion::V1, Some(Rules::Mrqa)),
        ] {
            let report = ScoreJson::new(&scores(metrics, 8, 7), version, rules);
            let v: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
            super::super::assert_follows(schema, &v);
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            let mut want = vec![
                "schema",
                "version",
                "metrics",
                "questions",
                "missing_predictions",
                "unknown_predictions",
            ];
            if rules.is_some() {
                want.push("rules");
            }
            assert_eq!(keys, want);
            assert_eq!(v["version"], version.as_str());
            assert_eq!(v["missing_predictions"]["count"], 7);
            assert_eq!(v["missing_predictions"]["first_ids"][4], "q4");
        }
    }

    #[test]
    fn text_names_the_rules_the_metrics_and_what_is_missing() {
        let report = ScoreJson::new(&scores(v2(), 8, 6), SquadVersion::V2, None);
        assert_eq!(
            report.render(Format::Text { verbose: false }),
            "SQuAD v2.0 (official evaluate-v2.0 rules), 8 questions\n\
             \x20 exact                  50.000\n\
             \x20 f1                     62.500\n\
             \x20 total                       8\n\
             missing: 6 of 8 questions have no prediction and score 0 \
             (first: \"q0\", \"q1\", \"q2\", \"q3\", \"q4\", …)\n\
             ignored: 2 predictions for ids not in the data file\n"
        );
        let mut complete = scores(v1(), 3, 0);
        complete.unknown_predictions = 0;
        let report = ScoreJson::new(&complete, SquadVersion::V1, Some(Rules::Mrqa));
        assert_eq!(report.missing_line(), None);
        assert_eq!(
            report.render(Format::Text { verbose: false }),
            "MRQA (the official MRQA evaluator's rules: SQuAD v1.1's), 3 questions\n\
             \x20 exact_match            25.000\n\
             \x20 f1                     33.333\n"
        );
        // Five ids or fewer: no ellipsis.
        let report = ScoreJson::new(&scores(v1(), 8, 5), SquadVersion::V1, None);
        assert!(report.missing_line().unwrap().ends_with("\"q4\")"));
    }
}
