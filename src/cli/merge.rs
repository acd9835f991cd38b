//! `bertqa merge DIR... --output-dir D`: combines the output directories of
//! `eval --shard I/N` runs into the files a single run writes.
//!
//! Each shard's `metrics.json` records what merging needs: the data path, the `run`
//! fingerprint (data sha256, `--limit`, shard, question count, tokenizer, window and
//! decoding settings, model and binding). Merge refuses partial shards, shards of other
//! data or settings, a shard given twice and a missing shard, each with the directory
//! named. The answers are put back in the data file's question order and written as
//! the reference writes them (Python `json.dumps(indent=4)`), so predictions.json,
//! nbest_predictions.json and null_odds.json are byte-identical to a single run's; EM/F1
//! are computed again over all questions from the data (never averaged).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde_json::{json, Map, Value};

use super::args::{FILES, OUTPUT, SCORING};
use super::common::{print_stdout, Outcome};
use bertqa::evaluate::{self, NaProbs, Predictions, ScoreConfig};
use bertqa::journal::Fingerprint;
use bertqa::shard::Shard;

/// Combine `eval --shard I/N` output directories into one run's files and metrics.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shards' output directories (all N of them, any order)
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The SQuAD file, when it has moved since the shards ran (same contents)
    #[arg(long, value_name = "FILE", help_heading = FILES)]
    pub data: Option<PathBuf>,
    #[command(flatten, next_help_heading = SCORING)]
    pub scoring: super::args::ScoringArgs,
    /// Where the merged files are written
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub output_dir: PathBuf,
    /// Machine-readable JSON on stdout (the merged metrics.json)
    #[arg(long, help_heading = OUTPUT)]
    pub json: bool,
}

/// What one shard directory recorded.
struct ShardDir {
    dir: PathBuf,
    shard: Shard,
    metrics: Value,
    run: Fingerprint,
}

/// Fingerprint keys that differ between the shards of one evaluation.
const PER_SHARD: [&str; 2] = ["shard", "questions"];

fn read_shard(dir: &Path) -> anyhow::Result<ShardDir> {
    let path = dir.join("metrics.json");
    let text = std::fs::read_to_string(&path).map_err(|e| bertqa::Error::io(&path, e))?;
    let metrics: Value = serde_json::from_str(&text).map_err(|e| bertqa::Error::json(&path, &e))?;
    if metrics["partial"] == Value::Bool(true) {
        bail!(
            "{}: this shard did not complete (partial results); finish it with eval --resume first",
            path.display()
        );
    }
    let run = Fingerprint::from_json(&metrics["run"]).with_context(|| {
        format!(
            "{}: no run record (written by an older bertqa, or not an eval output)",
            path.display()
        )
    })?;
    let shard: Shard = match run.get("shard") {
        Some("all") | None => bail!(
            "{}: not a shard (the run had no --shard I/N)",
            path.display()
        ),
        Some(s) => s
            .parse()
            .map_err(|e: String| anyhow::anyhow!("{}: {e}", path.display()))?,
    };
    Ok(ShardDir {
        dir: dir.to_path_buf(),
        shard,
        metrics,
        run,
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

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    // Held until the merge ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(&args.output_dir)?;
    let shards = args
        .dirs
        .iter()
        .map(|d| read_shard(d))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let first = &shards[0];
    let count = first.shard.count;
    let mut by_index: BTreeMap<usize, &ShardDir> = BTreeMap::new();
    for s in &shards {
        if s.shard.count != count {
            bail!(
                "{} is shard {} but {} is shard {}: not the same split",
                s.dir.display(),
                s.shard,
                first.dir.display(),
                first.shard
            );
        }
        let diffs = common(&first.run).differences(&common(&s.run));
        if !diffs.is_empty() {
            bail!(
                "{} and {} are not shards of the same evaluation ({})",
                first.dir.display(),
                s.dir.display(),
                diffs.join("; ").replace("in the journal", "in the first")
            );
        }
        if let Some(other) = by_index.insert(s.shard.index, s) {
            bail!(
                "shard {} given twice: {} and {} overlap",
                s.shard,
                other.dir.display(),
                s.dir.display()
            );
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !by_index.contains_key(i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        bail!("missing shard(s) {} of this evaluation", missing.join(", "));
    }

    // The data, checked against the digest every shard recorded.
    let data = match &args.data {
        Some(d) => d.clone(),
        None => PathBuf::from(
            first.metrics["data"]
                .as_str()
                .context("metrics.json without a data path")?,
        ),
    };
    let digest = bertqa::sha256::of_file(&data)?;
    if Some(digest.as_str()) != first.run.get("data_sha256") {
        bail!(
            "{}: sha256 {digest} is not the data the shards evaluated ({})",
            data.display(),
            first.run.get("data_sha256").unwrap_or("?")
        );
    }
    let limit = match first.run.get("limit") {
        Some("all") | None => None,
        Some(n) => Some(n.parse::<usize>().context("bad limit in the run record")?),
    };
    let dataset = super::common::load_data(&data, false, limit)?;
    let version_2 = first.metrics["version_2_with_negative"] == Value::Bool(true);

    // Which shard answers each question.
    let total = dataset.examples.len();
    let mut owner = vec![0usize; total];
    for (&index, s) in &by_index {
        let range = s.shard.range(total);
        if s.run.get("questions") != Some(range.len().to_string().as_str()) {
            bail!(
                "{}: shard {} of {} questions should hold {}, it recorded {}",
                s.dir.display(),
                s.shard,
                total,
                range.len(),
                s.run.get("questions").unwrap_or("?")
            );
        }
        for o in &mut owner[range] {
            *o = index;
        }
    }

    let mut files = Vec::new();
    let mut names = vec!["predictions.json", "nbest_predictions.json"];
    if version_2 {
        names.push("null_odds.json");
    }
    let mut merged: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for name in names {
        let mut parts: BTreeMap<usize, Map<String, Value>> = BTreeMap::new();
        for (&index, s) in &by_index {
            let path = s.dir.join(name);
            let text = std::fs::read_to_string(&path).map_err(|e| bertqa::Error::io(&path, e))?;
            let v: Map<String, Value> =
                serde_json::from_str(&text).map_err(|e| bertqa::Error::json(&path, &e))?;
            parts.insert(index, v);
        }
        let mut out = Map::new();
        for (e, &index) in dataset.examples.iter().zip(&owner) {
            match parts[&index].get(&e.qas_id) {
                // Python dict semantics for a repeated id: first position, last value.
                Some(v) => {
                    out.insert(e.qas_id.clone(), v.clone());
                }
                None if name == "null_odds.json" => {}
                None => bail!(
                    "{}: no entry for question {:?}",
                    by_index[&index].dir.join(name).display(),
                    e.qas_id
                ),
            }
        }
        bertqa::output_file::write_atomic(
            &args.output_dir.join(name),
            &bertqa::decode::pyjson::to_vec(&out),
        )?;
        files.push(name.to_string());
        merged.insert(name, out);
    }

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
        &dataset,
        &preds,
        na.as_ref(),
        &ScoreConfig {
            version_2_with_negative: version_2,
            na_prob_thresh: args.scoring.na_prob_thresh,
        },
    )?;
    let mut lines = String::new();
    for q in &scores.questions {
        let line = json!({
            "id": q.qas_id,
            "prediction": preds.get(&q.qas_id).cloned().unwrap_or_default(),
            "exact": q.exact,
            "f1": q.f1,
            "has_answer": q.has_answer,
        });
        let _ = writeln!(lines, "{line}");
    }
    bertqa::output_file::write_atomic(
        &args.output_dir.join("per_question.jsonl"),
        lines.as_bytes(),
    )?;
    files.push("per_question.jsonl".into());
    files.push("metrics.json".into());
    let features: u64 = shards
        .iter()
        .map(|s| s.metrics["features"].as_u64().unwrap_or(0))
        .sum();
    let mut run = common(&first.run);
    run.0.push(("shard".into(), "merged".into()));
    run.0.push(("questions".into(), total.to_string()));
    let doc = bertqa::report::merge::MergeJson {
        schema: 1,
        data: data.display().to_string(),
        version_2_with_negative: version_2,
        postprocess: first.metrics["postprocess"].clone(),
        metrics: scores.metrics.to_json(),
        questions: total,
        features,
        missing_predictions: bertqa::report::CountedIds::first(
            &scores.missing,
            scores.missing.len(),
            5,
        ),
        shards: by_index
            .values()
            .map(|s| bertqa::report::merge::ShardJson {
                shard: s.shard.to_string(),
                dir: s.dir.display().to_string(),
                questions: s.shard.range(total).len(),
                wall_s: s.metrics["wall_s"].clone(),
            })
            .collect(),
        run: run.to_json(),
        output_dir: args.output_dir.display().to_string(),
        files,
    };
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    bertqa::output_file::write_atomic(&args.output_dir.join("metrics.json"), text.as_bytes())?;
    if args.json {
        print_stdout(&text)?;
    } else {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "merged       {count} shards, {total} questions, {features} features"
        );
        s.push_str(&super::common::metric_lines(&scores.metrics, ""));
        let _ = writeln!(s, "output       {}", args.output_dir.display());
        print_stdout(&s)?;
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_layout_round_trips_the_reference_renderer() {
        use bertqa::decode::{NbestEntry, Prediction};
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
            bertqa::decode::render_predictions(&preds),
            bertqa::decode::render_nbest(&preds),
            bertqa::decode::render_null_odds(&preds),
        ] {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(
                String::from_utf8(bertqa::decode::pyjson::to_vec(&v)).unwrap(),
                String::from_utf8(bytes).unwrap()
            );
        }
    }
}
