//! A whole evaluation: every question of a dataset run against the client's model,
//! scored as the official scripts score, with what `bertqa eval` adds around it
//! ([`EvalOptions`]): the reference's files written into a directory, a journal that a
//! stopped or failed run resumes from, shards, saved logits (and decoding them again
//! without a server, [`crate::ClientBuilder::evaluate_saved`]), the HTML page, gates and
//! the server's metrics over the run.
//!
//! Contract:
//! - The files are the command's, byte for byte: `predictions.json`,
//!   `nbest_predictions.json`, `null_odds.json` (SQuAD 2.0 rules, when the model gives
//!   null odds: every token model and logits-contract model, an answer-contract model
//!   with a no-answer output), `per_question.jsonl`, `logits.bin` (saved logits) and
//!   `metrics.json` (eval's `--json` document).
//! - Scoring is the official scripts': v2 with `null_odds.json` as the na-prob file, or
//!   without one (every na-prob 0, no best thresholds) when the model gives none.
//! - The answers are written before they are scored, so nothing computed is lost when
//!   the gold answers cannot be scored; a run that stops or fails writes the answers it
//!   has and keeps its journal ([`Error::Incomplete`](crate::Error::Incomplete)).

mod answers;
pub(crate) mod facts;
pub(crate) mod journaled;
pub(crate) mod partial;
pub(crate) mod slices;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Model;
use crate::decode::{self, Prediction};
use crate::error::Result;
use crate::evaluate::{self, Metrics, NaProbs, Predictions, ScoreConfig, Scores};
use crate::pipeline::RunOutcome;
use crate::report::eval::{EvalRun, GateResult};
use crate::shard::Shard;
use crate::types::Dataset;

pub use crate::slices::Slice;
pub use journaled::JournalHandle;

/// The questions of an evaluation with what its report and journal say of them.
#[derive(Debug, Clone)]
pub struct EvalData {
    /// The questions (a shard's, with [`shard`](Self::shard)).
    pub dataset: Dataset,
    /// How the report names the data (the files' paths).
    pub name: String,
    /// The SHA-256 (hex) of the data's bytes as read: a resumed run and `merge` check
    /// that the data is the same.
    pub sha256: String,
    /// The data's format (MRQA's scoring rules for MRQA files).
    pub format: crate::data::Format,
    /// The whole data looks like SQuAD 2.0 (decided before sharding, so that every
    /// shard applies the same rules).
    pub looks_like_v2: bool,
    /// What the data's readers warned of (a question without answers, ...).
    pub warnings: Vec<String>,
    pub(crate) limit: Option<usize>,
    pub(crate) shard: Option<Shard>,
}

impl EvalData {
    /// `dataset`, named `name`, of bytes of digest `sha256`, read in `format`.
    pub fn new(
        dataset: Dataset,
        name: impl Into<String>,
        sha256: impl Into<String>,
        format: crate::data::Format,
    ) -> EvalData {
        EvalData {
            looks_like_v2: dataset.looks_like_v2(),
            dataset,
            name: name.into(),
            sha256: sha256.into(),
            format,
            warnings: Vec::new(),
            limit: None,
            shard: None,
        }
    }

    /// Reads `paths` (every format [`crate::types::Dataset::open`] reads; several files
    /// read as one), named by their paths, with the digest of their bytes. What the
    /// readers warn of is in [`warnings`](Self::warnings).
    pub fn open(paths: &[impl AsRef<Path>]) -> Result<EvalData> {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let (loaded, format) = crate::data::load(&paths, true)?;
        let name = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let mut data = EvalData::new(
            loaded.dataset,
            name,
            loaded.sha256.unwrap_or_default(),
            format,
        );
        data.warnings = loaded.warnings.iter().map(ToString::to_string).collect();
        Ok(data)
    }

    /// The first `n` questions only (kept in the run's fingerprint).
    pub fn limit(mut self, n: usize) -> EvalData {
        self.dataset.examples.truncate(n);
        self.looks_like_v2 = self.dataset.looks_like_v2();
        self.limit = Some(n);
        self
    }

    /// Only the questions of `shard` (see [`crate::shard`]); the whole data's SQuAD
    /// version stays. An error when the shard has no question.
    pub fn shard(mut self, shard: Shard) -> Result<EvalData> {
        shard.apply(&mut self.dataset);
        if self.dataset.examples.is_empty() {
            return Err(crate::Error::Refused(format!(
                "`shard` {shard}: {} has too few questions for {} shards",
                self.name, shard.count
            )));
        }
        self.shard = Some(shard);
        Ok(self)
    }
}

/// What an evaluation does besides running and scoring ([`crate::Client::evaluate_with`]).
#[derive(Clone)]
pub struct EvalOptions {
    /// Where the files go (it must exist). The caller keeps other runs out of it.
    pub output_dir: PathBuf,
    /// Continue the run that the journal in `output_dir` holds (fresh when there is none).
    pub resume: bool,
    /// Also save every window's logits (`logits.bin`), to decode again without a server.
    pub save_logits: bool,
    /// Write a self-contained HTML page here (scores, latency, worst questions).
    pub html: Option<PathBuf>,
    /// Gates: exact match (percent) at least this.
    pub min_exact: Option<f64>,
    /// Gates: F1 (percent) at least this.
    pub min_f1: Option<f64>,
    /// Gates: the p99 request latency at most this many milliseconds.
    pub max_p99_ms: Option<f64>,
    /// Prometheus endpoints read through the run (Triton's: `host:8002`).
    pub metrics_urls: Vec<String>,
    /// How often they are read.
    pub metrics_interval: Duration,
    /// Cancelled: no new requests; those in flight finish and are journaled, and the
    /// run ends as [`Error::Incomplete`](crate::Error::Incomplete).
    pub stop: Option<tokio_util::sync::CancellationToken>,
    /// Told what happens as it happens.
    pub hooks: Option<Arc<dyn EvalHooks>>,
    /// How the slices' intervals are drawn, and the level their tests are read at.
    pub statistics: crate::compare::stats::Statistics,
}

impl EvalOptions {
    /// Options writing into `output_dir`, nothing else asked for.
    pub fn new(output_dir: impl Into<PathBuf>) -> EvalOptions {
        EvalOptions {
            output_dir: output_dir.into(),
            resume: false,
            save_logits: false,
            html: None,
            min_exact: None,
            min_f1: None,
            max_p99_ms: None,
            metrics_urls: Vec::new(),
            metrics_interval: Duration::from_millis(1000),
            stop: None,
            hooks: None,
            statistics: Default::default(),
        }
    }

    pub(crate) fn hooks(&self) -> &dyn EvalHooks {
        self.hooks.as_deref().unwrap_or(&NoHooks)
    }
}

impl std::fmt::Debug for EvalOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalOptions")
            .field("output_dir", &self.output_dir)
            .field("resume", &self.resume)
            .field("save_logits", &self.save_logits)
            .field("html", &self.html)
            .field("min_exact", &self.min_exact)
            .field("min_f1", &self.min_f1)
            .field("max_p99_ms", &self.max_p99_ms)
            .field("metrics_urls", &self.metrics_urls)
            .field("metrics_interval", &self.metrics_interval)
            .field("statistics", &self.statistics)
            .finish_non_exhaustive()
    }
}

/// What a caller hears of a running evaluation. Every method has a default that does
/// nothing; called from the run's threads.
pub trait EvalHooks: Send + Sync {
    /// A note or warning the run gives as it goes (resuming from a journal, replacing
    /// one), in the library's words: settings in backticks.
    fn note(&self, _text: &str) {}

    /// How the caller words the library's settings in what the run writes (a command
    /// line names its flags); the words themselves by default.
    fn wording(&self, text: &str) -> String {
        text.to_string()
    }

    /// The journal opened: a process that quits at once flushes it first.
    fn on_journal(&self, _journal: JournalHandle) {}

    /// `n` more windows were built.
    fn built(&self, _n: u64) {}

    /// `n` more windows were answered.
    fn answered(&self, _n: u64) {}

    /// The run ended (before its files are written).
    fn run_ended(&self) {}
}

/// The hooks of a caller that listens to nothing.
struct NoHooks;

impl EvalHooks for NoHooks {}

/// An evaluation's results: the official metrics, every question's answer, what the run
/// measured and, of [`crate::Client::evaluate_with`], the files and gates.
#[derive(Debug)]
pub struct Evaluation {
    /// The official scores (`exact()`, `f1()` for either SQuAD version).
    pub metrics: Metrics,
    /// Question id → answer text, in the data's order (`predictions.json`).
    pub predictions: Predictions,
    /// The official scores with every question's.
    pub scores: Scores,
    /// The run: decoded predictions with their n-best, latency, throughput, phases.
    #[cfg(feature = "internals")]
    pub outcome: RunOutcome,
    #[cfg(not(feature = "internals"))]
    pub(crate) outcome: RunOutcome,
    /// The files written into the output directory, in order, `metrics.json` (written
    /// last, holding [`report`](Self::report)'s document) not among them.
    pub files: Vec<String>,
    /// The gates asked for, and how they went.
    pub gates: Vec<GateResult>,
    /// Every slice of the questions (docs/algorithm.md, "Slices"): by dimension in
    /// their order, then by the slices' names.
    pub slices: Vec<Slice>,
    /// The weak slices (`dimension:slice`): Holm-adjusted p below 1 − confidence and an
    /// error rate above the rest's.
    pub weak_slices: Vec<String>,
    /// The dimensions the run could not give (dimension → why).
    pub slices_not_computed: std::collections::BTreeMap<String, String>,
    pub(crate) question_slices: Vec<crate::slices::QuestionSlices>,
    pub(crate) slice_statistics: crate::compare::Statistics,
    pub(crate) version_2: bool,
    pub(crate) null_odds: bool,
    pub(crate) facts: facts::Facts,
}

impl Evaluation {
    /// Writes the reference's files into `dir` (which must exist), byte for byte those
    /// of `bertqa eval`: `predictions.json`, `nbest_predictions.json`, `null_odds.json`
    /// (SQuAD 2.0, when the model gives null odds) and `per_question.jsonl`. Returns
    /// their names.
    pub fn write_files(&self, dir: impl AsRef<Path>) -> Result<Vec<String>> {
        let dir = dir.as_ref();
        let mut files = write_predictions(dir, &self.outcome.predictions, self.null_odds(), None)?;
        write_per_question(
            dir,
            &self.outcome.predictions,
            &self.scores,
            &self.question_slices,
        )?;
        files.push("per_question.jsonl".into());
        Ok(files)
    }

    /// An evaluation of answers computed elsewhere (say by a Spark or Ray job's workers,
    /// each with its own client): `answers` maps every question id of `data` to its
    /// answer text (`""`: no answer) and null odds, scored once here as the official
    /// scripts score them (SQuAD 2.0's rules when `version_2` says so, else when the data
    /// looks like it; the null odds as the na-prob file when every answer has them). No
    /// run: no latency, windows or n-best lists, so the slices of the windows and of the
    /// margins are not computed. An error names a question without an answer.
    pub fn of_answers(
        data: &EvalData,
        answers: &std::collections::HashMap<String, (String, Option<f64>)>,
        version_2: Option<bool>,
        na_prob_thresh: f64,
    ) -> Result<Evaluation> {
        answers::of_answers(
            data,
            answers,
            version_2,
            na_prob_thresh,
            &Default::default(),
        )
    }

    /// Whether SQuAD 2.0's rules were applied.
    pub fn version_2_with_negative(&self) -> bool {
        self.version_2
    }

    /// Whether null_odds.json is written and is the na-prob file.
    fn null_odds(&self) -> bool {
        self.version_2 && self.null_odds
    }

    /// The gates that failed, each described by its flag (`--min-f1 90: measured 85.200`).
    pub fn failed_gates(&self) -> Vec<String> {
        self.gates
            .iter()
            .filter(|g| !g.passed)
            .map(GateResult::describe)
            .collect()
    }

    /// The run as `bertqa eval` reports it ([`EvalRun::json`]: eval's `--json` document,
    /// keys and rounding alike; the document of `metrics.json` that
    /// [`crate::Client::evaluate_with`] writes).
    pub fn to_report(&self) -> EvalRun {
        facts::report(self)
    }

    /// [`to_report`](Self::to_report), the data named `data` (read in `format`): for a
    /// dataset given to [`crate::Client::evaluate`], which has no name of its own.
    pub fn report(&self, data: &str, format: crate::data::Format) -> EvalRun {
        let mut report = self.to_report();
        report.data = data.to_string();
        report.format = format;
        report
    }
}

/// Whether the model's answers come with null odds: all but a text model of the answer
/// contract without a no-answer output.
pub fn gives_null_odds(model: &Model) -> bool {
    model.gives_null_odds()
}

/// Scores decoded predictions as the official scripts score predictions.json, the null
/// odds as the na-prob file only with `null_odds` (without: every na-prob 0 and no best
/// thresholds, as evaluate-v2.0.py without a na-prob file).
pub fn score_with(
    dataset: &Dataset,
    predictions: &[Prediction],
    version_2: bool,
    null_odds: bool,
    na_prob_thresh: f64,
) -> Result<Scores> {
    let preds = Predictions::from_decoded(predictions);
    let na = (version_2 && null_odds).then(|| NaProbs::from_decoded(predictions));
    evaluate::score(
        dataset,
        &preds,
        na.as_ref(),
        &ScoreConfig {
            version_2_with_negative: version_2,
            na_prob_thresh,
        },
    )
}

/// Writes the reference's files (the n-best file finished from `nbest` when its lists
/// were streamed there), null_odds.json with `null_odds`; returns their names.
pub fn write_predictions(
    dir: &Path,
    predictions: &[Prediction],
    null_odds: bool,
    nbest: Option<decode::NbestStream>,
) -> Result<Vec<String>> {
    decode::write_outputs_with(dir, predictions, null_odds, nbest)?;
    let mut files = vec![
        "predictions.json".to_string(),
        "nbest_predictions.json".to_string(),
    ];
    if null_odds {
        files.push("null_odds.json".into());
    }
    Ok(files)
}

/// Writes per_question.jsonl: id, prediction, exact, f1, has_answer and slices per
/// question.
pub fn write_per_question(
    dir: &Path,
    predictions: &[Prediction],
    scores: &Scores,
    slices: &[crate::slices::QuestionSlices],
) -> Result<()> {
    let lines = render_per_question(predictions, scores, slices);
    crate::output_file::write_atomic(&dir.join("per_question.jsonl"), &lines)
}

/// The lines of per_question.jsonl: serde_json's compact rendering of
/// `{"id", "prediction", "exact", "f1", "has_answer", "slices"}` in that order, each
/// value serialized straight into the buffer (the same serializer a `Value` goes
/// through: an escaped string, a float as ryu writes it or `null` when not finite, a
/// bool). `slices` holds the dimensions the question has a slice in, in their order;
/// without any `slices` (a run's partial files), the key is left out.
pub(crate) fn render_per_question(
    predictions: &[Prediction],
    scores: &Scores,
    slices: &[crate::slices::QuestionSlices],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(scores.questions.len() * 200);
    for (i, (p, q)) in predictions.iter().zip(&scores.questions).enumerate() {
        put(&mut out, "{\"id\":", q.qas_id.as_str());
        put(&mut out, ",\"prediction\":", p.answer.as_str());
        put(&mut out, ",\"exact\":", &q.exact);
        put(&mut out, ",\"f1\":", &q.f1);
        put(&mut out, ",\"has_answer\":", &q.has_answer);
        if let Some(question) = slices.get(i) {
            out.extend_from_slice(b",\"slices\":{");
            let named = crate::slices::DIMENSIONS.iter().zip(question);
            let mut first = true;
            for (dimension, slice) in named.filter_map(|(d, s)| Some((d, (*s)?))) {
                // Dimensions and slice names are plain ASCII words: nothing to escape.
                if !first {
                    out.push(b',');
                }
                for part in ["\"", dimension, "\":\"", slice, "\""] {
                    out.extend_from_slice(part.as_bytes());
                }
                first = false;
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
    }
    out
}

/// `prefix`, then `value` as serde_json writes it.
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, prefix: &str, value: &T) {
    out.extend_from_slice(prefix.as_bytes());
    // Writing into a Vec cannot fail, and strings, floats and bools always serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{Metrics, QuestionScore};
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
            counted: Vec::new(),
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
        let got = render_per_question(&predictions, &scores, &[]);
        assert_eq!(String::from_utf8(got).unwrap(), want);
        // With slices: the dimensions a question has, in their order, after the rest.
        let mut slices = vec![[None; crate::slices::DIMENSIONS.len()]; cases.len()];
        slices[0][0] = Some("when");
        slices[0][2] = Some("3+");
        slices[0][6] = Some("q1");
        let got = String::from_utf8(render_per_question(&predictions, &scores, &slices)).unwrap();
        let lines: Vec<&str> = got.lines().collect();
        let first = want.lines().next().unwrap().trim_end_matches('}');
        assert_eq!(
            lines[0],
            format!(
                "{first},\"slices\":{{\"question_type\":\"when\",\"context_windows\":\"3+\",\"null_margin\":\"q1\"}}}}"
            )
        );
        assert!(lines[1].ends_with(",\"slices\":{}}"), "{}", lines[1]);
        let parsed: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(parsed["slices"]["context_windows"], "3+");
    }
}
