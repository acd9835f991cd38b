//! What an evaluation's report says besides its outcome and scores, and the report.

use std::path::PathBuf;

use super::Evaluation;
use crate::backend::pool::EndpointReport;
use crate::backend::{Model, Protocol, RetryStats};
use crate::evaluate::{Predictions, Scores};
use crate::journal::Fingerprint;
use crate::metrics::{Choice, SpanMetrics};
use crate::pipeline::RunOutcome;
use crate::report::eval::EvalRun;

/// What an evaluation's report says besides its outcome and scores.
#[derive(Debug)]
pub(crate) struct Facts {
    pub(crate) data: String,
    pub(crate) format: crate::data::Format,
    /// The server's side (`None`: decoded from saved logits).
    pub(crate) server: Option<ServerFacts>,
    pub(crate) postprocess: &'static str,
    pub(crate) batch_size: usize,
    pub(crate) batch_size_given: bool,
    pub(crate) concurrency: usize,
    pub(crate) output_dir: PathBuf,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) server_metrics: Option<(Choice, SpanMetrics)>,
}

/// The client's side of a run against a server.
#[derive(Debug)]
pub(crate) struct ServerFacts {
    pub(crate) urls: String,
    pub(crate) model: Model,
    pub(crate) protocol: Protocol,
    /// The pool's retries and endpoints during the run (other calls made meanwhile on
    /// the same client included).
    pub(crate) retries: RetryStats,
    pub(crate) endpoints: Vec<EndpointReport>,
}

/// The report of `e` ([`Evaluation::to_report`]).
pub(crate) fn report(e: &Evaluation) -> EvalRun {
    let o = &e.outcome;
    let f = &e.facts;
    let server = f.server.as_ref();
    EvalRun {
        data: f.data.clone(),
        format: f.format,
        url: server.map(|s| s.urls.clone()),
        binding: server.map(|s| s.model.clone()),
        version_2: e.version_2,
        postprocess: f.postprocess,
        batch_size: f.batch_size,
        batch_size_given: f.batch_size_given,
        concurrency: f.concurrency,
        protocol: server.map(|s| s.protocol),
        questions: o.predictions.len(),
        features: o.features,
        featureless: o
            .featureless
            .iter()
            .map(|&i| o.predictions[i].qas_id.clone())
            .collect(),
        scores: e.scores.clone(),
        infer: server.map(|_| o.infer.clone()),
        phases: o.phases,
        wall: o.wall,
        gates: e.gates.clone(),
        output_dir: f.output_dir.clone(),
        files: e.files.clone(),
        retries: server.map(|s| s.retries.clone()),
        endpoints: server.map(|s| s.endpoints.clone()).unwrap_or_default(),
        non_finite: o.infer.non_finite,
        fingerprint: f.fingerprint.clone(),
        server_metrics: f.server_metrics.clone(),
        slices: e.slices.clone(),
        weak_slices: e.weak_slices.clone(),
        slices_not_computed: e.slices_not_computed.clone(),
        statistics: e.slice_statistics,
        no_null_odds: server
            .filter(|_| e.version_2 && !e.null_odds)
            .map(|s| crate::report::eval::no_null_odds_reason(s.model.name())),
    }
}

/// An evaluation of `outcome` scored as `scores`, nothing written yet.
pub(crate) fn finished(
    outcome: RunOutcome,
    scores: Scores,
    version_2: bool,
    null_odds: bool,
    facts: Facts,
    slices: super::slices::Slices,
) -> Evaluation {
    Evaluation {
        metrics: scores.metrics.clone(),
        predictions: Predictions::from_decoded(&outcome.predictions),
        scores,
        outcome,
        files: Vec::new(),
        gates: Vec::new(),
        version_2,
        null_odds,
        facts,
        slices: slices.slices,
        weak_slices: slices.weak,
        slices_not_computed: slices.not_computed,
        question_slices: slices.questions,
        slice_statistics: slices.statistics,
    }
}
