//! `eval`'s output files: the reference's (predictions, n-best, null odds),
//! per_question.jsonl, the scores, and the partial results of a run that did not
//! complete.

use std::path::Path;

use serde_json::Value;

use bertqa::journal::Fingerprint;
use bertqa::pipeline::PartialOutcome;
use bertqa::types::Dataset;

pub(crate) use bertqa::evaluation::{score_with, write_per_question, write_predictions};

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
