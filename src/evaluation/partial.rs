//! The partial results of an evaluation that did not complete: the reference's files
//! and per_question.jsonl for the questions fully answered, and a `metrics.json` marked
//! `"partial": true` (schema/partial.schema.json).

use std::path::Path;

use serde_json::Value;

use super::{score_with, write_per_question, write_predictions};
use crate::error::Result;
use crate::journal::Fingerprint;
use crate::pipeline::PartialOutcome;
use crate::types::Dataset;

/// `metrics.json` of a run that did not complete.
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
    resume: String,
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
    pub(crate) dir: &'a Path,
    pub(crate) data: &'a str,
    pub(crate) dataset: &'a Dataset,
    pub(crate) version_2: bool,
    /// null_odds.json is written and is the na-prob file ([`score_with`]).
    pub(crate) null_odds: bool,
    pub(crate) na_prob_thresh: f64,
    pub(crate) fingerprint: &'a Fingerprint,
    pub(crate) journaled: u64,
    /// How the caller words the library's settings ([`super::EvalHooks::wording`]).
    pub(crate) wording: &'a dyn Fn(&str) -> String,
}

/// Writes the partial results of a stopped or failed run and returns the one-line
/// summary to fail with. `error` is what ended the run (none: a stop on request).
pub(crate) fn write_partial(
    p: &Partial<'_>,
    outcome: PartialOutcome,
    error: Option<String>,
    nbest: Option<crate::decode::NbestStream>,
) -> Result<String> {
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
        write_per_question(p.dir, &answered, &scores, &[])?;
        files.push("per_question.jsonl".into());
        metrics = scores.metrics.to_json();
    }
    let reason = match &error {
        Some(e) => format!("error: {e}"),
        None => "interrupted".to_string(),
    };
    files.push(crate::journal::FILE_NAME.into());
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
        resume: (p.wording)("rerun the same command with `resume`"),
    };
    crate::output_file::write_atomic(
        &p.dir.join("metrics.json"),
        crate::report::json::to_string(&doc).as_bytes(),
    )?;
    let what = error.unwrap_or_else(|| "interrupted".to_string());
    Ok(format!(
        "{what}; {done}/{total} questions done ({} features answered, {} in the journal); \
         partial results written to {}; rerun the same command with `resume` to continue",
        outcome.answered,
        p.journaled,
        p.dir.display()
    ))
}
