//! `bertqa merge`: the output directories of `eval` shards (`eval.shard` I/N) combined
//! into the files a single run writes ([`merge`]).
//!
//! Each shard's `metrics.json` records what merging needs: the data path, the `run`
//! fingerprint (data sha256, limit, shard, question count, tokenizer, window and
//! decoding settings, model and binding). A merge refuses partial shards, shards of other
//! data or settings, a shard given twice and a missing shard, each with the directory
//! named. The answers are put back in the data file's question order and written as
//! the reference writes them (Python `json.dumps(indent=4)`), so predictions.json,
//! nbest_predictions.json and null_odds.json are byte-identical to a single run's; EM/F1
//! are computed again over all questions from the data (never averaged), and so are the
//! slices (docs/algorithm.md, "Slices"): the windows' as the shards' per_question.jsonl
//! give them, the margins' quartiles over the whole data.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Shard;
use crate::error::{Error, Location, Result};
use crate::evaluate::{self, NaProbs, Predictions, ScoreConfig, Scores};
use crate::journal::Fingerprint;
use crate::report::eval::EvalJson;
use crate::report::merge::{MergeJson, ShardJson};
use crate::report::{CountedIds, Format, Render as _};
use crate::slices::QuestionSlices;
use crate::types::Dataset;

/// Merges the shard directories `dirs` (all N of one evaluation, in any order) into
/// `output_dir`, which must exist: the answer files in the data's question order,
/// per_question.jsonl scored over every question (`na_prob_thresh`: the official v2
/// script's), and metrics.json, the report returned. The data is the file the shards
/// read, or `data` when it has moved (the same contents: its digest is checked). The
/// data reader's warnings are in the report's `warnings`.
pub fn merge(
    dirs: &[PathBuf],
    data: Option<&Path>,
    na_prob_thresh: f64,
    output_dir: &Path,
) -> Result<MergeJson> {
    if dirs.is_empty() {
        return Err(Error::Empty("no shard directory to merge".into()));
    }
    let shards = dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<Result<Vec<_>>>()?;
    let by_index = complete_set(&shards)?;
    let first = &shards[0];
    let (data, dataset, warnings) = load_data(data, first)?;
    let version_2 = first.report.version_2_with_negative;
    let owner = owners(&by_index, dataset.examples.len())?;
    let (mut files, merged) = merge_answers(output_dir, &by_index, &dataset, &owner, version_2)?;
    let (questions, not_computed) = merged_slices(&by_index, &dataset, &merged, version_2, first)?;
    let scores = score(
        output_dir,
        na_prob_thresh,
        &dataset,
        &merged,
        version_2,
        &questions,
    )?;
    let st = first.report.statistics;
    let statistics = crate::slices::Statistics {
        rounds: st.bootstrap,
        seed: st.seed,
        confidence: st.confidence,
    };
    let exact: Vec<f64> = scores.questions.iter().map(|q| q.exact).collect();
    let f1: Vec<f64> = scores.questions.iter().map(|q| q.f1).collect();
    let (slices, weak_slices) = crate::slices::tabled(&questions, &exact, &f1, &statistics);
    files.push("per_question.jsonl".into());
    files.push("metrics.json".into());

    let total = dataset.examples.len();
    let mut run = common(&first.report.run);
    run.0.push(("shard".into(), "merged".into()));
    run.0.push(("questions".into(), total.to_string()));
    let doc = MergeJson {
        schema: 1,
        data: data.display().to_string(),
        version_2_with_negative: version_2,
        postprocess: first.report.postprocess.clone(),
        metrics: scores.metrics.clone(),
        questions: total,
        features: shards.iter().map(|s| s.report.features).sum(),
        missing_predictions: CountedIds::first(&scores.missing, scores.missing.len(), 5),
        shards: by_index
            .values()
            .map(|s| ShardJson {
                shard: s.shard.to_string(),
                dir: s.dir.display().to_string(),
                questions: s.shard.range(total).len(),
                wall_s: s.report.wall_s,
            })
            .collect(),
        run,
        output_dir: output_dir.display().to_string(),
        files,
        statistics: st,
        slices,
        weak_slices,
        slices_not_computed: not_computed,
        warnings,
    };
    let json = doc.render(Format::Json);
    crate::output_file::write_atomic(&output_dir.join("metrics.json"), json.as_bytes())?;
    Ok(doc)
}

/// What one shard directory recorded.
struct ShardDir {
    dir: PathBuf,
    shard: Shard,
    /// Its metrics.json.
    report: EvalJson,
}

/// What a shard's metrics.json is read for first: whether its run completed (a partial
/// run's file has `"partial": true` and another shape), and whether it has a run
/// record at all.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    partial: bool,
    #[serde(default)]
    run: Option<serde::de::IgnoredAny>,
}

/// Fingerprint keys that differ between the shards of one evaluation.
const PER_SHARD: [&str; 2] = ["shard", "questions"];

/// The answer files merged, in the order written.
const ANSWER_FILES: [&str; 3] = [
    "predictions.json",
    "nbest_predictions.json",
    "null_odds.json",
];

fn read_shard(dir: &Path) -> Result<ShardDir> {
    let path = dir.join("metrics.json");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let head: Head = serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
    if head.partial {
        return Err(Error::input(
            Location::file(&path),
            "this shard did not complete (partial results); finish it with `eval.resume` first",
        ));
    }
    if head.run.is_none() {
        return Err(Error::input(
            Location::file(&path),
            "no run record (written by an older bertqa, or not an eval output)",
        ));
    }
    let report: EvalJson = serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
    let shard: Shard = match report.run.get("shard") {
        Some("all") | None => {
            return Err(Error::input(
                Location::file(&path),
                "not a shard (the run had no `eval.shard` I/N)",
            ))
        }
        Some(s) => s
            .parse()
            .map_err(|e: String| Error::input(Location::file(&path), e))?,
    };
    Ok(ShardDir {
        dir: dir.to_path_buf(),
        shard,
        report,
    })
}

fn common(run: &Fingerprint) -> Fingerprint {
    Fingerprint(
        run.0
            .iter()
            .filter(|(k, _)| !PER_SHARD.contains(&k.as_str()))
            .cloned()
            .collect(),
    )
}

/// The shards by index, once each and all N of them, of one evaluation (the same
/// fingerprint but for the shard and its question count).
fn complete_set(shards: &[ShardDir]) -> Result<BTreeMap<usize, &ShardDir>> {
    let first = &shards[0];
    let count = first.shard.count;
    let mut by_index: BTreeMap<usize, &ShardDir> = BTreeMap::new();
    for s in shards {
        if s.shard.count != count {
            return Err(Error::Inconsistent(format!(
                "{} is shard {} but {} is shard {}: not the same split",
                s.dir.display(),
                s.shard,
                first.dir.display(),
                first.shard
            )));
        }
        let diffs = common(&first.report.run).differences_from(&common(&s.report.run), "the first");
        if !diffs.is_empty() {
            return Err(Error::Inconsistent(format!(
                "{} and {} are not shards of the same evaluation ({})",
                first.dir.display(),
                s.dir.display(),
                diffs.join("; ")
            )));
        }
        if let Some(other) = by_index.insert(s.shard.index, s) {
            return Err(Error::Inconsistent(format!(
                "shard {} given twice: {} and {} overlap",
                s.shard,
                other.dir.display(),
                s.dir.display()
            )));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        return Err(Error::Inconsistent(format!(
            "missing shard(s) {} of this evaluation",
            missing.join(", ")
        )));
    }
    Ok(by_index)
}

/// The data file (`data`, or where the shards read it), checked against the digest
/// every shard recorded, its questions (`limit` as the shards had it) and the reader's
/// warnings.
fn load_data(data: Option<&Path>, first: &ShardDir) -> Result<(PathBuf, Dataset, Vec<String>)> {
    let run = &first.report.run;
    let data = data.map_or_else(|| PathBuf::from(&first.report.data), Path::to_path_buf);
    let limit = match run.get("limit") {
        Some("all") | None => None,
        Some(n) => Some(
            n.parse::<usize>()
                .map_err(|e| Error::Inconsistent(format!("bad limit in the run record: {e}")))?,
        ),
    };
    // The digest is of the content (decompressed), as the shards recorded it.
    let (mut loaded, _) = crate::data::load(std::slice::from_ref(&data), true)?;
    let digest = loaded.sha256.take().unwrap_or_default();
    let warnings = loaded.warnings.iter().map(ToString::to_string).collect();
    let mut dataset = loaded.dataset;
    if let Some(n) = limit {
        dataset.examples.truncate(n);
    }
    if Some(digest.as_str()) != run.get("data_sha256") {
        return Err(Error::input(
            Location::file(&data),
            format!(
                "sha256 {digest} is not the data the shards evaluated ({})",
                run.get("data_sha256").unwrap_or("?")
            ),
        ));
    }
    Ok((data, dataset, warnings))
}

/// Which shard answers each question (by index into the data's questions), each shard
/// checked to hold the slice of them its split gives it.
fn owners(by_index: &BTreeMap<usize, &ShardDir>, total: usize) -> Result<Vec<usize>> {
    let mut owner = vec![0usize; total];
    for (&index, s) in by_index {
        let range = s.shard.range(total);
        if s.report.run.get("questions") != Some(range.len().to_string().as_str()) {
            return Err(Error::input(
                Location::file(&s.dir),
                format!(
                    "shard {} of {} questions should hold {}, it recorded {}",
                    s.shard,
                    total,
                    range.len(),
                    s.report.run.get("questions").unwrap_or("?")
                ),
            ));
        }
        for o in &mut owner[range] {
            *o = index;
        }
    }
    Ok(owner)
}

/// The merged answer files, by name.
type Merged = BTreeMap<&'static str, Map<String, Value>>;

/// Writes the answer files, each the shards' entries in the data's question order, and
/// returns their names and contents.
fn merge_answers(
    out_dir: &Path,
    by_index: &BTreeMap<usize, &ShardDir>,
    dataset: &Dataset,
    owner: &[usize],
    version_2: bool,
) -> Result<(Vec<String>, Merged)> {
    let names = if version_2 {
        &ANSWER_FILES[..]
    } else {
        &ANSWER_FILES[..2]
    };
    let mut files = Vec::new();
    let mut merged = Merged::new();
    for &name in names {
        // Shards of a model without null odds (an answer-contract model without a
        // no-answer output) have no null_odds.json: neither has the merge.
        if name == "null_odds.json" && by_index.values().all(|s| !s.dir.join(name).exists()) {
            continue;
        }
        let mut parts: BTreeMap<usize, Map<String, Value>> = BTreeMap::new();
        for (&index, s) in by_index {
            let path = s.dir.join(name);
            let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
            let v: Map<String, Value> =
                serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
            parts.insert(index, v);
        }
        let mut out = Map::new();
        for (e, &index) in dataset.examples.iter().zip(owner) {
            match parts[&index].get(&e.qas_id) {
                // Python dict semantics for a repeated id: first position, last value.
                Some(v) => {
                    out.insert(e.qas_id.clone(), v.clone());
                }
                None if name == "null_odds.json" => {}
                None => {
                    return Err(Error::input(
                        Location::file(by_index[&index].dir.join(name)),
                        format!("no entry for question {:?}", e.qas_id),
                    ))
                }
            }
        }
        crate::output_file::write_atomic(
            &out_dir.join(name),
            &crate::decode::pyjson::to_vec(&out),
        )?;
        files.push(name.to_string());
        merged.insert(name, out);
    }
    Ok((files, merged))
}

/// One line of per_question.jsonl, as `eval` writes it (keys in this order).
#[derive(Serialize)]
struct PerQuestion<'a> {
    id: &'a str,
    prediction: &'a str,
    exact: f64,
    f1: f64,
    has_answer: bool,
    slices: Map<String, Value>,
}

/// Scores the merged answers over all questions (never averaged over shards) and
/// writes per_question.jsonl.
fn score(
    out_dir: &Path,
    na_prob_thresh: f64,
    dataset: &Dataset,
    merged: &Merged,
    version_2: bool,
    slices: &[crate::slices::QuestionSlices],
) -> Result<Scores> {
    let preds = Predictions::from_pairs(
        merged["predictions.json"]
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())),
    );
    let na = merged.get("null_odds.json").map(|m| {
        NaProbs::from_pairs(
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(0.0))),
        )
    });
    let scores = evaluate::score(
        dataset,
        &preds,
        na.as_ref(),
        &ScoreConfig {
            version_2_with_negative: version_2,
            na_prob_thresh,
        },
    )?;
    let mut lines = String::new();
    for (i, q) in scores.questions.iter().enumerate() {
        let line = PerQuestion {
            id: &q.qas_id,
            prediction: preds.get(&q.qas_id).map_or("", String::as_str),
            exact: q.exact,
            f1: q.f1,
            has_answer: q.has_answer,
            slices: slices.get(i).map(crate::slices::names).unwrap_or_default(),
        };
        let json = serde_json::to_string(&line)
            .map_err(|e| Error::Internal(format!("a per-question line: {e}")))?;
        let _ = writeln!(lines, "{json}");
    }
    crate::output_file::write_atomic(&out_dir.join("per_question.jsonl"), lines.as_bytes())?;
    Ok(scores)
}

/// Each question's slices in the merged run, and the dimensions it cannot give with
/// why: the data's own dimensions, the windows' as the shards' per_question.jsonl give
/// them (they depend on the question alone), the margins from the merged n-best lists
/// and null odds, in quartiles of the whole data (as a single run's).
fn merged_slices(
    by_index: &BTreeMap<usize, &ShardDir>,
    dataset: &Dataset,
    merged: &Merged,
    version_2: bool,
    first: &ShardDir,
) -> Result<(Vec<QuestionSlices>, BTreeMap<String, String>)> {
    let mut windows: std::collections::HashMap<String, QuestionSlices> = Default::default();
    for s in by_index.values() {
        let path = s.dir.join("per_question.jsonl");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        for (i, line) in text.lines().enumerate() {
            let v: Value = serde_json::from_str(line)
                .map_err(|e| Error::input(Location::at(&path, i + 1, e.column()), e.to_string()))?;
            if let (Some(id), Some(slices)) = (v["id"].as_str(), v["slices"].as_object()) {
                windows.insert(id.to_string(), crate::slices::parse(slices));
            }
        }
    }
    let nbest = merged.get("nbest_predictions.json");
    let margins: Vec<f64> = dataset
        .examples
        .iter()
        .map(|e| {
            let entries = nbest
                .and_then(|n| n.get(&e.qas_id))
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            crate::slices::margin_of(entries.iter().map(|x| {
                let logit = |k: &str| x[k].as_f64().unwrap_or(f64::NEG_INFINITY);
                (
                    x["text"].as_str().unwrap_or_default(),
                    logit("start_logit") + logit("end_logit"),
                )
            }))
        })
        .collect();
    let threshold = first
        .report
        .run
        .get("null_score_diff_threshold")
        .and_then(|t| t.parse::<f64>().ok());
    let nulls: std::result::Result<Vec<f64>, String> =
        match (version_2, merged.get("null_odds.json"), threshold) {
            (false, ..) => Err("SQuAD 1.1 rules: every question is answered".into()),
            (true, None, _) => Err("the shards wrote no null_odds.json".into()),
            (true, _, None) => Err("the shards' runs record no null_score_diff_threshold".into()),
            (true, Some(odds), Some(t)) => dataset
                .examples
                .iter()
                .map(|e| {
                    odds.get(&e.qas_id)
                        .and_then(Value::as_f64)
                        .map(|o| (o - t).abs())
                })
                .collect::<Option<Vec<f64>>>()
                .ok_or_else(|| "a question without null odds".to_string()),
        };
    let windowless = "the shards' per_question.jsonl have no slices (written by an older bertqa)";
    let facts = crate::slices::RunFacts {
        version_2,
        placements: Err(windowless.to_string()),
        margins: match margins.iter().any(|m| m.is_finite()) {
            true => Ok(&margins),
            false => Err("no question's n-best list holds two answers".into()),
        },
        null_margins: nulls.as_deref().map_err(Clone::clone),
    };
    let (mut questions, not_computed) = crate::slices::assign(dataset, &facts);
    let mut not_computed: BTreeMap<String, String> = not_computed
        .into_iter()
        .map(|(d, reason)| (d.to_string(), reason))
        .collect();
    let placed: Option<Vec<&QuestionSlices>> = dataset
        .examples
        .iter()
        .map(|e| windows.get(&e.qas_id))
        .collect();
    if let Some(placed) = placed {
        for (q, shard) in questions.iter_mut().zip(placed) {
            q[2] = shard[2];
            q[3] = shard[3];
        }
        for d in ["context_windows", "answer_windows"] {
            not_computed.remove(d);
        }
    }
    Ok((questions, not_computed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_layout_round_trips_the_reference_renderer() {
        use crate::decode::{NbestEntry, Prediction};
        let preds = vec![
            Prediction {
                qas_id: "q1".into(),
                answer: "caf\u{e9} \"x\"".into(),
                nbest: vec![NbestEntry {
                    text: "caf\u{e9}".into(),
                    probability: 0.123456789,
                    start_logit: -1e-7,
                    end_logit: 12.5,
                    span: None,
                    keys: crate::decode::NbestKeys::Squad,
                }],
                null_odds: Some(3.0),
            },
            Prediction {
                qas_id: "q2".into(),
                answer: String::new(),
                nbest: vec![],
                null_odds: Some(1e17),
            },
        ];
        for bytes in [
            crate::decode::render_predictions(&preds),
            crate::decode::render_nbest(&preds),
            crate::decode::render_null_odds(&preds),
        ] {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                String::from_utf8(crate::decode::pyjson::to_vec(&v)).unwrap(),
                String::from_utf8(bytes).unwrap()
            );
        }
    }
}
