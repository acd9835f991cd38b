//! `eval`'s output files: the reference's (predictions, n-best, null odds),
//! per_question.jsonl, the scores, and the partial results of a run that did not
//! complete.

use std::path::Path;

use serde_json::Value;

use bertqa::decode::Prediction;
use bertqa::evaluate::Scores;
use bertqa::journal::Fingerprint;
use bertqa::pipeline::PartialOutcome;
use bertqa::types::Dataset;

pub(crate) use bertqa::evaluation::{score_with, write_per_question, write_predictions};

/// Scores decoded predictions as the official scripts score predictions.json (with
/// null_odds.json as the na-prob file for v2).
pub(crate) fn score_predictions(
    dataset: &Dataset,
    predictions: &[Prediction],
    version_2: bool,
    na_prob_thresh: f64,
) -> bertqa::Result<Scores> {
    score_with(dataset, predictions, version_2, version_2, na_prob_thresh)
}

/// `metrics.json` of a run that did not complete (schema/partial.schema.json).
#[derive(serde::Serialize)]
struct PartialDoc<'a> {
    schema: u32,
    partial: bool,
    reason: String,
    data: &'a str,
    version_2_with_negative: bool,
    questions: Done,
    features: PartialFeatures,
    metrics_of_done: Value,
    run: Value,
    output_dir: String,
    files: Vec<String>,
    resume: &'static str,
}

#[derive(serde::Serialize)]
struct Done {
    done: usize,
    total: usize,
}

#[derive(serde::Serialize)]
struct PartialFeatures {
    answered: u64,
    journaled: u64,
    built: u64,
}

/// What a run that did not complete reports and writes.
pub(crate) struct Partial<'a> {
    pub dir: &'a Path,
    pub data: &'a str,
    pub dataset: &'a Dataset,
    pub version_2: bool,
    /// null_odds.json is written and is the na-prob file ([`score_with`]).
    pub null_odds: bool,
    pub na_prob_thresh: f64,
    pub fingerprint: &'a Fingerprint,
    pub journaled: u64,
}

/// Writes the partial results of an interrupted or failed run (predictions, n-best,
/// null odds and per-question lines for the questions fully answered, and a
/// `metrics.json` marked `"partial": true`; schema/partial.schema.json) and returns
/// the one-line summary to exit with. `error` is what ended the run (none: a stop).
pub(crate) fn write_partial(
    p: &Partial<'_>,
    outcome: PartialOutcome,
    error: Option<String>,
    nbest: Option<bertqa::decode::NbestStream>,
) -> anyhow::Result<String> {
    let total = p.dataset.examples.len();
    let done = outcome.done();
    let answered: Vec<_> = outcome.predictions.into_iter().flatten().collect();
    let mut files = write_predictions(p.dir, &answered, p.null_odds, nbest)?;
    let mut metrics = Value::Null;
    if !answered.is_empty() {
        let mut subset = p.dataset.clone();
        let ids: std::collections::HashSet<&str> =
            answered.iter().map(|a| a.qas_id.as_str()).collect();
        subset.examples.retain(|e| ids.contains(e.qas_id.as_str()));
        let scores = score_with(
            &subset,
            &answered,
            p.version_2,
            p.null_odds,
            p.na_prob_thresh,
        )?;
        write_per_question(p.dir, &answered, &scores)?;
        files.push("per_question.jsonl".into());
        metrics = scores.metrics.to_json();
    }
    let reason = match &error {
        Some(e) => format!("error: {e}"),
        None => "interrupted".to_string(),
    };
    files.push(bertqa::journal::FILE_NAME.into());
    files.push("metrics.json".into());
    let doc = PartialDoc {
        schema: 1,
        partial: true,
        reason,
        data: p.data,
        version_2_with_negative: p.version_2,
        questions: Done { done, total },
        features: PartialFeatures {
            answered: outcome.answered,
            journaled: p.journaled,
            built: outcome.features,
        },
        metrics_of_done: metrics,
        run: p.fingerprint.to_json(),
        output_dir: p.dir.display().to_string(),
        files,
        resume: "rerun the same command with --resume",
    };
    bertqa::output_file::write_atomic(
        &p.dir.join("metrics.json"),
        bertqa::report::json::to_string(&doc).as_bytes(),
    )?;
    let what = error.unwrap_or_else(|| "interrupted".to_string());
    Ok(format!(
        "{what}; {done}/{total} questions done ({} features answered, {} in the journal); \
         partial results written to {}; rerun the same command with --resume to continue",
        outcome.answered,
        p.journaled,
        p.dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bertqa::evaluate::{Metrics, QuestionScore};
    use serde_json::json;

    /// The direct rendering equals `json!({...}).to_string()` per line: escapes,
    /// non-ASCII, floats ryu writes in exponent form, and non-finite values (`null`).
    #[test]
    fn per_question_lines_equal_serde_json_values() {
        let cases: [(&str, &str, f64, f64, bool); 6] = [
            ("q1", "Steve Smith", 1.0, 1.0, true),
            (
                "q\"2\\",
                "tab\there\nnew \u{1} \u{7f} é ☃ \u{2028}",
                0.0,
                2.0 / 3.0,
                false,
            ),
            ("", "", 0.0, -0.0, true),
            ("q4", "x", 1e-7, 1e22, true),
            ("q5", "y", f64::NAN, f64::INFINITY, false),
            ("q6", "z", 0.1 + 0.2, 123456789.125, true),
        ];
        let predictions: Vec<Prediction> = cases
            .iter()
            .map(|&(id, answer, ..)| Prediction {
                qas_id: id.to_string(),
                answer: answer.to_string(),
                nbest: Vec::new(),
                null_odds: None,
            })
            .collect();
        let scores = Scores {
            metrics: Metrics::V1 {
                exact_match: 0.0,
                f1: 0.0,
            },
            questions: cases
                .iter()
                .map(|&(id, _, exact, f1, has_answer)| QuestionScore {
                    qas_id: id.to_string(),
                    has_answer,
                    predicted: true,
                    exact,
                    f1,
                })
                .collect(),
            missing: Vec::new(),
            unknown_predictions: 0,
        };
        let mut want = String::new();
        for (p, q) in predictions.iter().zip(&scores.questions) {
            let line = json!({
                "id": q.qas_id,
                "prediction": p.answer,
                "exact": q.exact,
                "f1": q.f1,
                "has_answer": q.has_answer,
            });
            want.push_str(&line.to_string());
            want.push('\n');
        }
        let got = bertqa::evaluation::render_per_question(&predictions, &scores);
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }
}
