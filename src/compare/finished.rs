//! A finished run read back from its directory, to be compared without a server: the
//! directories `bertqa eval --output-dir` writes, and the per-model directories of
//! `bertqa compare --output-dir`.
//!
//! What a directory must hold: `metrics.json` of a run that completed (it says whether
//! SQuAD 2.0's rules applied and names the model) and `predictions.json` answering
//! every question of the data. Read when present: `null_odds.json` (the no-answer
//! probabilities of v2's scoring), `nbest_predictions.json` (the answers' logits, shown
//! beside disagreements) and `logits.bin` (`--save-logits`: the windows' logits, for
//! the divergences). The scores are computed again from the answers and the data, as
//! the official script computes them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::decode::{NbestEntry, NbestKeys, Prediction};
use crate::error::{Error, Result};
use crate::evaluate::{self, ScoreConfig, Scores};
use crate::types::{Dataset, Feature, Logits};

/// One finished run, read and scored again.
#[derive(Debug)]
pub struct FinishedRun {
    /// The directory it was read from.
    pub dir: PathBuf,
    /// The model's name as the run's metrics.json gives it (else the directory's name).
    pub name: String,
    /// The run's metrics.json as written (its model, speed and settings).
    pub report: serde_json::Value,
    /// Whether SQuAD 2.0's rules applied, as metrics.json says; `scores` follow them.
    pub version_2_with_negative: bool,
    /// One per question of the data, in its order.
    pub predictions: Vec<Prediction>,
    /// Its answers scored again against the data, as the official script scores them.
    pub scores: Scores,
    /// The windows' logits by ascending unique id (empty without `logits.bin`).
    pub logits: Vec<Logits>,
    /// Each question's slices as its per_question.jsonl gives them (empty: the file
    /// has none, written by an older bertqa).
    pub(crate) slices: Vec<crate::slices::QuestionSlices>,
}

impl FinishedRun {
    /// Reads the run in `dir` and scores its answers to `dataset`'s questions
    /// (`na_prob_thresh`: the official v2 script's threshold).
    pub fn open(dir: &Path, dataset: &Dataset, na_prob_thresh: f64) -> Result<FinishedRun> {
        let metrics_path = dir.join("metrics.json");
        let text = std::fs::read(&metrics_path).map_err(|e| missing(dir, "metrics.json", e))?;
        let head: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| Error::json(&metrics_path, &e))?;
        if head["partial"] == true {
            return Err(Error::Config(format!(
                "{}: this run did not complete (partial results); finish it with \
                 `eval.resume` first",
                dir.display()
            )));
        }
        let Some(version_2) = head["version_2_with_negative"].as_bool() else {
            return Err(Error::Config(format!(
                "{}: no \"version_2_with_negative\" (not the metrics.json of an eval or \
                 compare run)",
                metrics_path.display()
            )));
        };
        let name = head["model"]["name"]
            .as_str()
            .or_else(|| head["model"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| dir_name(dir));
        let answers_path = dir.join("predictions.json");
        if !answers_path.exists() {
            return Err(missing(
                dir,
                "predictions.json",
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        let answers = evaluate::read_predictions(&answers_path)?;
        let null_odds_path = dir.join("null_odds.json");
        let null_odds = (version_2 && null_odds_path.exists())
            .then(|| evaluate::read_na_probs(&null_odds_path))
            .transpose()?;
        let nbest = read_nbest(&dir.join("nbest_predictions.json"))?;
        let mut predictions = Vec::with_capacity(dataset.examples.len());
        for ex in &dataset.examples {
            let Some(answer) = answers.get(&ex.qas_id) else {
                return Err(Error::Config(format!(
                    "{}: no answer to question {:?} of the data (the run answered other \
                     questions)",
                    answers_path.display(),
                    ex.qas_id
                )));
            };
            predictions.push(Prediction {
                qas_id: ex.qas_id.clone(),
                answer: answer.clone(),
                nbest: nbest
                    .as_ref()
                    .and_then(|n| n.get(ex.qas_id.as_str()).cloned())
                    .unwrap_or_default(),
                null_odds: null_odds.as_ref().and_then(|n| n.get(&ex.qas_id).copied()),
            });
        }
        let scores = evaluate::score(
            dataset,
            &answers,
            null_odds.as_ref(),
            &ScoreConfig {
                version_2_with_negative: version_2,
                na_prob_thresh,
            },
        )?;
        let slices = read_slices(&dir.join("per_question.jsonl"), dataset)?;
        let logits_path = dir.join("logits.bin");
        let logits = match logits_path.exists() {
            true => crate::logits_io::load(&logits_path)?,
            false => Vec::new(),
        };
        Ok(FinishedRun {
            dir: dir.to_path_buf(),
            name,
            report: head,
            version_2_with_negative: version_2,
            slices,
            predictions,
            scores,
            logits,
        })
    }

    /// The run as a comparison reads it, its logits over `windows` (the windows the
    /// data and the run's settings give, by ascending unique id; empty: none compared).
    pub fn run<'a>(&'a self, windows: &'a [Arc<Feature>]) -> super::Run<'a> {
        super::Run {
            predictions: &self.predictions,
            metrics: &self.scores.metrics,
            scores: &self.scores.counted,
            windows,
            logits: &self.logits,
        }
    }

    /// Whether the saved logits are those of `windows`: one per window, the same ids,
    /// each covering the window's positions. `Err` says why not.
    pub fn logits_fit(&self, windows: &[Arc<Feature>]) -> std::result::Result<(), String> {
        if self.logits.is_empty() {
            return Err(format!(
                "{} saved no logits (run it with `save_logits`)",
                self.dir.display()
            ));
        }
        let fits = self.logits.len() == windows.len()
            && self.logits.iter().zip(windows).all(|(l, f)| {
                l.unique_id == f.unique_id && l.start.len() >= f.len() && l.end.len() >= f.len()
            });
        if fits {
            Ok(())
        } else {
            Err(format!(
                "the logits {} saved are not of the windows `data` and the window settings \
                 give ({} saved, {} windows)",
                self.dir.display(),
                self.logits.len(),
                windows.len()
            ))
        }
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

fn missing(dir: &Path, file: &str, e: std::io::Error) -> Error {
    Error::Config(format!(
        "{}: no {file} ({e}; a finished run is the directory `eval.output_dir` writes, or \
         a model's directory of `compare.output_dir`)",
        dir.display()
    ))
}

/// `nbest_predictions.json`'s entries (text, probability, logits), by question id;
/// `None` when the file is absent. Entries without logits (a model that gives none)
/// are left out.
fn read_nbest(path: &Path) -> Result<Option<std::collections::HashMap<String, Vec<NbestEntry>>>> {
    if !path.exists() {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        text: String,
        #[serde(default)]
        probability: Option<f64>,
        #[serde(default)]
        start_logit: Option<f64>,
        #[serde(default)]
        end_logit: Option<f64>,
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let parsed: std::collections::HashMap<String, Vec<Entry>> =
        serde_json::from_slice(&bytes).map_err(|e| Error::json(path, &e))?;
    Ok(Some(
        parsed
            .into_iter()
            .map(|(id, entries)| {
                let entries = entries
                    .into_iter()
                    .filter_map(|e| {
                        Some(NbestEntry {
                            text: e.text,
                            probability: e.probability.unwrap_or(f64::NAN),
                            start_logit: e.start_logit?,
                            end_logit: e.end_logit?,
                            span: None,
                            keys: NbestKeys::default(),
                        })
                    })
                    .collect();
                (id, entries)
            })
            .collect(),
    ))
}

/// Each question's slices in the per_question.jsonl at `path`, in `dataset`'s order
/// (by id); empty when the file is absent or any question has none.
fn read_slices(path: &Path, dataset: &Dataset) -> Result<Vec<crate::slices::QuestionSlices>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
    };
    let mut by_id = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            Error::input(
                crate::error::Location::at(path, i + 1, e.column()),
                e.to_string(),
            )
        })?;
        if let (Some(id), Some(slices)) = (v["id"].as_str(), v["slices"].as_object()) {
            by_id.insert(id.to_string(), crate::slices::parse(slices));
        }
    }
    Ok(dataset
        .examples
        .iter()
        .map(|e| by_id.get(&e.qas_id).copied())
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default())
}
