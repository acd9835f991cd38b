//! Scoring predictions exactly as the official SQuAD scripts do (algorithm §8).
//!
//! Contract:
//! - v1.1 ([`score`] with `version_2_with_negative = false`) is `evaluate-v1.1.py`
//!   (§8.2): EM and multiset F1 over `normalize_answer` tokens, max over the gold
//!   answers (duplicates included), keys `exact_match`, `f1`.
//! - v2.0 is `evaluate-v2.0.py` (§8.3–§8.4): gold answers that normalize to empty are
//!   dropped (`[""]` if none remain), empty-vs-empty F1 is 1, na-prob thresholding with
//!   `na_prob_thresh` (default 1.0), `HasAns_*` / `NoAns_*` breakdowns, and with a
//!   na-prob file `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh` from the
//!   raw scores (stable ascending na-prob order, strict improvement, threshold 0.0 when
//!   nothing improves).
//! - Sums run in question order in f64, each value as the scripts compute it, so the
//!   numbers equal the scripts' to the last bit (Python ≤ 3.11 plain summation).
//! - Stricter than the v2.0 script, as the v1.1 script: a question without a prediction
//!   scores 0 (whatever its na-prob, and in the best-threshold walk), stays in every
//!   total, and is reported in [`Scores::missing`]; the v2.0 script would drop it from
//!   `total` and then fail. When every question has a prediction the two agree exactly.
//!   Predictions for ids not in the dataset are ignored and counted.
//! - Errors: a v1.1 question without gold answers (the v1.1 script crashes), a
//!   predicted question missing from the na-prob file (the v2.0 script crashes), a
//!   dataset without questions.

mod normalize;
mod read;

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::types::Dataset;
use rustc_hash::FxBuildHasher as WordHash;

pub use normalize::{exact, f1_v1, f1_v2, normalize_answer};
use normalize::{f1_v1_normalized, f1_v2_normalized, Normalized};
pub use read::{
    na_probs_from_bytes, predictions_from_bytes, read_na_probs, read_predictions, IdMap, NaProbs,
    Predictions,
};

/// Scoring options.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreConfig {
    /// The v2.0 rules (otherwise v1.1).
    pub version_2_with_negative: bool,
    /// v2.0: a question whose na-prob is strictly above this is scored as "no answer".
    pub na_prob_thresh: f64,
}

impl Default for ScoreConfig {
    fn default() -> Self {
        ScoreConfig {
            version_2_with_negative: false,
            na_prob_thresh: 1.0,
        }
    }
}

/// Raw (unthresholded) result of one question, in dataset order.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionScore {
    /// The question's id.
    pub qas_id: String,
    /// v2: the question has gold answers; v1: always true.
    pub has_answer: bool,
    /// The predictions file had an entry for it.
    pub predicted: bool,
    /// 0 or 1.
    pub exact: f64,
    /// 0 to 1.
    pub f1: f64,
}

/// `HasAns_*` / `NoAns_*` breakdown (percentages, question count).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breakdown {
    /// Exact match of these questions, in percent (0–100), after the no-answer threshold.
    pub exact: f64,
    /// F1 of these questions, in percent (0–100), after the no-answer threshold.
    pub f1: f64,
    /// How many questions of this kind the dataset has (at least 1).
    pub total: usize,
}

/// `best_*` from the threshold search (§8.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestThresholds {
    /// The best exact match over all questions, in percent (0–100), had the no-answer
    /// threshold been `best_exact_thresh`.
    pub best_exact: f64,
    /// The na-prob value giving `best_exact` (in the na-prob file's units; 0.0 when no
    /// threshold beats answering nothing).
    pub best_exact_thresh: f64,
    /// The best F1 over all questions, in percent (0–100), had the no-answer threshold
    /// been `best_f1_thresh`.
    pub best_f1: f64,
    /// The na-prob value giving `best_f1` (as `best_exact_thresh`).
    pub best_f1_thresh: f64,
}

/// The official metrics, percentages 0–100.
#[derive(Debug, Clone, PartialEq)]
pub enum Metrics {
    /// SQuAD v1.1's keys (`evaluate-v1.1.py`).
    V1 {
        /// Exact match over all questions, in percent.
        exact_match: f64,
        /// F1 over all questions, in percent.
        f1: f64,
    },
    /// SQuAD v2.0's keys (`evaluate-v2.0.py`).
    V2 {
        /// Exact match over all questions after the no-answer threshold, in percent.
        exact: f64,
        /// F1 over all questions after the no-answer threshold, in percent.
        f1: f64,
        /// How many questions were scored (all of the dataset's).
        total: usize,
        /// The answerable questions (`HasAns_*`); `None` when the dataset has none.
        has_ans: Option<Breakdown>,
        /// The unanswerable questions (`NoAns_*`); `None` when the dataset has none.
        no_ans: Option<Breakdown>,
        /// The threshold search (`best_*`); `None` without na-probs.
        best: Option<BestThresholds>,
    },
}

/// A metric value as the official scripts print it: a float, or an integer count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricValue {
    /// A score (a percentage or a threshold).
    Float(f64),
    /// A number of questions (the `*total` keys).
    Count(usize),
}

impl Metrics {
    /// Exact match in percent (`exact_match` for v1.1, `exact` for v2.0).
    pub fn exact(&self) -> f64 {
        match self {
            Metrics::V1 { exact_match, .. } => *exact_match,
            Metrics::V2 { exact, .. } => *exact,
        }
    }

    /// F1 in percent.
    pub fn f1(&self) -> f64 {
        match self {
            Metrics::V1 { f1, .. } | Metrics::V2 { f1, .. } => *f1,
        }
    }

    /// The official keys in the scripts' order, with their values.
    pub fn official(&self) -> Vec<(&'static str, MetricValue)> {
        use MetricValue::{Count, Float};
        match self {
            Metrics::V1 { exact_match, f1 } => {
                vec![("exact_match", Float(*exact_match)), ("f1", Float(*f1))]
            }
            Metrics::V2 {
                exact,
                f1,
                total,
                has_ans,
                no_ans,
                best,
            } => {
                let mut v = vec![
                    ("exact", Float(*exact)),
                    ("f1", Float(*f1)),
                    ("total", Count(*total)),
                ];
                if let Some(b) = has_ans {
                    v.push(("HasAns_exact", Float(b.exact)));
                    v.push(("HasAns_f1", Float(b.f1)));
                    v.push(("HasAns_total", Count(b.total)));
                }
                if let Some(b) = no_ans {
                    v.push(("NoAns_exact", Float(b.exact)));
                    v.push(("NoAns_f1", Float(b.f1)));
                    v.push(("NoAns_total", Count(b.total)));
                }
                if let Some(b) = best {
                    v.push(("best_exact", Float(b.best_exact)));
                    v.push(("best_exact_thresh", Float(b.best_exact_thresh)));
                    v.push(("best_f1", Float(b.best_f1)));
                    v.push(("best_f1_thresh", Float(b.best_f1_thresh)));
                }
                v
            }
        }
    }

    /// The official keys as a JSON object (integers for counts).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (k, v) in self.official() {
            let v = match v {
                MetricValue::Float(x) => serde_json::Number::from_f64(x)
                    .map(serde_json::Value::Number)
                    .unwrap_or(serde_json::Value::Null),
                MetricValue::Count(n) => serde_json::Value::from(n),
            };
            m.insert(k.to_string(), v);
        }
        serde_json::Value::Object(m)
    }
}

/// Everything a scoring run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Scores {
    /// The official metrics (percentages).
    pub metrics: Metrics,
    /// Raw per-question results, in dataset order.
    pub questions: Vec<QuestionScore>,
    /// Each question's (exact, F1), 0-1, as the official script counts it in `exact`
    /// and `f1`: v2 after the no-answer threshold, v1 the raw scores. Dataset order.
    pub counted: Vec<(f64, f64)>,
    /// Ids of questions without a prediction, in dataset order (scored 0).
    pub missing: Vec<String>,
    /// Predictions whose id is not a question of the dataset (ignored).
    pub unknown_predictions: usize,
}

/// Scores `predictions` against `dataset` (§8). `na_probs` is used by v2.0 only:
/// thresholding with `config.na_prob_thresh` and the best-threshold search; without it
/// every na-prob is 0.0 and no `best_*` keys are produced, as in the v2.0 script.
pub fn score(
    dataset: &Dataset,
    predictions: &Predictions,
    na_probs: Option<&NaProbs>,
    config: &ScoreConfig,
) -> Result<Scores> {
    if dataset.examples.is_empty() {
        return Err(Error::Empty("the dataset has no questions to score".into()));
    }
    // Predictions made from this dataset come one per question in its order: then the
    // i-th is question i's and none is unknown, without hashing a single id.
    let in_order = predictions.len() == dataset.examples.len()
        && predictions
            .iter()
            .zip(&dataset.examples)
            .all(|((id, _), ex)| id == ex.qas_id);
    let unknown_predictions = if in_order {
        0
    } else {
        let mut ids: HashSet<&str, WordHash> =
            HashSet::with_capacity_and_hasher(dataset.examples.len(), WordHash);
        ids.extend(dataset.examples.iter().map(|e| e.qas_id.as_str()));
        predictions.iter().filter(|(k, _)| !ids.contains(k)).count()
    };
    let mut in_file_order = predictions.iter();
    let mut scratch = ScoreScratch::default();
    let mut questions = Vec::with_capacity(dataset.examples.len());
    let mut missing = Vec::new();
    for ex in &dataset.examples {
        let pred = match in_order {
            true => in_file_order.next().map(|(_, answer)| answer),
            false => predictions.get(&ex.qas_id),
        };
        if pred.is_none() {
            missing.push(ex.qas_id.clone());
        }
        let q = if config.version_2_with_negative {
            score_v2(
                &mut scratch,
                &ex.qas_id,
                ex.answers.iter().map(|a| a.text.as_str()),
                pred,
            )
        } else {
            if ex.answers.is_empty() {
                return Err(Error::Config(format!(
                    "question {:?} has no gold answers, which SQuAD v1.1 scoring cannot \
                     handle (use `version_2_with_negative` for the SQuAD 2.0 rules)",
                    ex.qas_id
                )));
            }
            score_v1(
                &mut scratch,
                &ex.qas_id,
                ex.answers.iter().map(|a| a.text.as_str()),
                pred,
            )
        };
        questions.push(q);
    }
    let (metrics, counted) = if config.version_2_with_negative {
        let counted = thresholded(&questions, na_probs, config.na_prob_thresh)?;
        (
            metrics_v2(&questions, &counted, predictions, na_probs)?,
            counted,
        )
    } else {
        let total = questions.len() as f64;
        let (mut em, mut f1) = (0.0, 0.0);
        for q in &questions {
            em += q.exact;
            f1 += q.f1;
        }
        let metrics = Metrics::V1 {
            exact_match: 100.0 * em / total,
            f1: 100.0 * f1 / total,
        };
        (metrics, questions.iter().map(|q| (q.exact, q.f1)).collect())
    };
    Ok(Scores {
        metrics,
        questions,
        counted,
        missing,
        unknown_predictions,
    })
}

/// Python `max` over the gold answers (values only matter; 0 for none).
fn max_over(golds: &[Normalized], f: impl Fn(&Normalized) -> f64) -> f64 {
    let mut best: Option<f64> = None;
    for g in golds {
        let v = f(g);
        if best.is_none_or(|b| v > b) {
            best = Some(v);
        }
    }
    best.unwrap_or(0.0)
}

/// Normalized answers of one question, their buffers kept for the next.
#[derive(Default)]
struct ScoreScratch {
    pred: Normalized,
    golds: Vec<Normalized>,
    /// Golds of the current question: the first `used`.
    used: usize,
}

impl ScoreScratch {
    /// Starts a question's golds.
    fn clear(&mut self) {
        self.used = 0;
    }

    /// Appends the normalization of `s` to the golds.
    fn push(&mut self, s: &str) -> &Normalized {
        if self.used == self.golds.len() {
            self.golds.push(Normalized::default());
        }
        let n = &mut self.golds[self.used];
        n.set(s);
        self.used += 1;
        n
    }

    fn golds(&self) -> &[Normalized] {
        &self.golds[..self.used]
    }
}

fn score_v1<'a>(
    scratch: &mut ScoreScratch,
    qas_id: &str,
    golds: impl Iterator<Item = &'a str>,
    pred: Option<&String>,
) -> QuestionScore {
    let (exact_s, f1_s) = match pred {
        Some(p) => {
            scratch.pred.set(p);
            scratch.clear();
            for g in golds {
                scratch.push(g);
            }
            let (p, golds) = (&scratch.pred, scratch.golds());
            (
                max_over(golds, |g| f64::from(u8::from(p.text == g.text))),
                max_over(golds, |g| f1_v1_normalized(p, g)),
            )
        }
        None => (0.0, 0.0),
    };
    QuestionScore {
        qas_id: qas_id.to_string(),
        has_answer: true,
        predicted: pred.is_some(),
        exact: exact_s,
        f1: f1_s,
    }
}

fn score_v2<'a>(
    scratch: &mut ScoreScratch,
    qas_id: &str,
    answers: impl Iterator<Item = &'a str>,
    pred: Option<&String>,
) -> QuestionScore {
    let mut has_answer = false;
    scratch.clear();
    for a in answers {
        has_answer = true;
        if scratch.push(a).text.is_empty() {
            // Gold answers that normalize to nothing are dropped.
            scratch.used -= 1;
        }
    }
    if scratch.used == 0 {
        scratch.push("");
    }
    let (exact_s, f1_s) = match pred {
        Some(p) => {
            scratch.pred.set(p);
            let (p, golds) = (&scratch.pred, scratch.golds());
            (
                max_over(golds, |g| f64::from(u8::from(p.text == g.text))),
                max_over(golds, |g| f1_v2_normalized(p, g)),
            )
        }
        None => (0.0, 0.0),
    };
    QuestionScore {
        qas_id: qas_id.to_string(),
        has_answer,
        predicted: pred.is_some(),
        exact: exact_s,
        f1: f1_s,
    }
}

/// `apply_no_ans_threshold`: each question's (exact, F1) as v2's totals count it.
fn thresholded(
    questions: &[QuestionScore],
    na_probs: Option<&NaProbs>,
    thresh: f64,
) -> Result<Vec<(f64, f64)>> {
    let mut thresholded = Vec::with_capacity(questions.len());
    for q in questions {
        if !q.predicted {
            thresholded.push((0.0, 0.0));
            continue;
        }
        let na = match na_probs {
            Some(n) => *n.get(&q.qas_id).ok_or_else(|| {
                Error::input(
                    n.location(&q.qas_id),
                    "no na-prob for this question (every predicted question needs one)",
                )
            })?,
            None => 0.0,
        };
        if na > thresh {
            let s = f64::from(u8::from(!q.has_answer));
            thresholded.push((s, s));
        } else {
            thresholded.push((q.exact, q.f1));
        }
    }
    Ok(thresholded)
}

fn metrics_v2(
    questions: &[QuestionScore],
    thresholded: &[(f64, f64)],
    predictions: &Predictions,
    na_probs: Option<&NaProbs>,
) -> Result<Metrics> {
    let eval = |pick: &dyn Fn(&QuestionScore) -> bool| -> Option<Breakdown> {
        let (mut em, mut f1, mut n) = (0.0, 0.0, 0usize);
        for (q, (e, f)) in questions.iter().zip(thresholded) {
            if pick(q) {
                em += e;
                f1 += f;
                n += 1;
            }
        }
        (n > 0).then(|| Breakdown {
            exact: 100.0 * em / n as f64,
            f1: 100.0 * f1 / n as f64,
            total: n,
        })
    };
    let all = eval(&|_| true).unwrap_or(Breakdown {
        exact: 0.0,
        f1: 0.0,
        total: 0,
    });
    let best = na_probs.map(|n| {
        let (best_exact, best_exact_thresh) = best_thresh(questions, predictions, n, |q| q.exact);
        let (best_f1, best_f1_thresh) = best_thresh(questions, predictions, n, |q| q.f1);
        BestThresholds {
            best_exact,
            best_exact_thresh,
            best_f1,
            best_f1_thresh,
        }
    });
    Ok(Metrics::V2 {
        exact: all.exact,
        f1: all.f1,
        total: all.total,
        has_ans: eval(&|q| q.has_answer),
        no_ans: eval(&|q| !q.has_answer),
        best,
    })
}

/// `find_best_thresh` (§8.4) over the raw scores. Unpredicted questions score 0
/// everywhere: they add nothing to the all-null start nor to the walk.
fn best_thresh(
    questions: &[QuestionScore],
    predictions: &Predictions,
    na_probs: &NaProbs,
    raw: impl Fn(&QuestionScore) -> f64,
) -> (f64, f64) {
    let mut by_id: std::collections::HashMap<&str, &QuestionScore, WordHash> =
        std::collections::HashMap::with_capacity_and_hasher(questions.len(), WordHash);
    by_id.extend(questions.iter().map(|q| (q.qas_id.as_str(), q)));
    let num_no_ans = questions
        .iter()
        .filter(|q| !q.has_answer && q.predicted)
        .count();
    let mut cur = num_no_ans as f64;
    let mut best = cur;
    let mut best_thresh = 0.0;
    let mut order: Vec<(&str, f64)> = na_probs.iter().map(|(k, &v)| (k, v)).collect();
    // Stable ascending; values are finite (checked when read).
    order.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal));
    for (id, na) in order {
        let Some(q) = by_id.get(id) else { continue };
        if !q.predicted {
            continue;
        }
        let delta = if q.has_answer {
            raw(q)
        } else if predictions.get(id).is_some_and(|p| !p.is_empty()) {
            -1.0
        } else {
            0.0
        };
        cur += delta;
        if cur > best {
            best = cur;
            best_thresh = na;
        }
    }
    (100.0 * best / questions.len() as f64, best_thresh)
}

#[cfg(test)]
mod tests;
