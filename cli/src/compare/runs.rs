//! `compare --runs DIR DIR... --data F`: finished runs compared without a server (a CI
//! job's run against a stored baseline). Each directory is read and scored again from
//! its answers and the data (`bertqa::compare::FinishedRun`); the divergences need both
//! runs' saved logits (`--save-logits`) and the windows, which are cut again from the
//! data with the tokenizer and window flags given here. The report is the live
//! comparison's, with the runs' directories under `runs`.

use std::sync::Arc;

use anyhow::bail;
use bertqa::backend::Protocol;
use bertqa::compare::FinishedRun;
use bertqa::report::compare::{CompareJson, ComparisonJson, LatencyMs, ModelJson, Throughput};
use bertqa::types::Feature;
use serde_json::Value;

use super::super::common::{data_label, feature_config, load_data, load_tokenizer, Outcome};
use super::super::session::Session;
use super::output::{self, gates, statistics_json};
use super::Args;
use bertqa::report::flips::FlipLine;

pub(super) fn run(args: &Args, session: &mut Session) -> anyhow::Result<Outcome> {
    if args.runs.len() < 2 {
        bail!(
            "--runs needs at least two finished runs to compare (got {})",
            args.runs.len()
        );
    }
    let dataset = load_data(&args.data, args.run.window.strict, args.limit)?;
    let thresh = args.scoring.na_prob_thresh;
    let mut runs = Vec::with_capacity(args.runs.len());
    for dir in &args.runs {
        runs.push(FinishedRun::open(dir, &dataset, thresh)?);
    }
    let version_2 = runs[0].version_2_with_negative;
    if let Some(r) = runs.iter().find(|r| r.version_2_with_negative != version_2) {
        bail!(
            "{} was run by SQuAD {} rules and {} by {}: compare runs of one version",
            runs[0].dir.display(),
            if version_2 { "2.0" } else { "1.1" },
            r.dir.display(),
            if version_2 { "1.1" } else { "2.0" },
        );
    }
    name_apart(&mut runs);
    let (windows, no_windows) = windows(args, &dataset, &runs);
    let statistics = args.statistics.statistics();
    let first = &runs[0];
    let mut gate_results = Vec::new();
    let mut flipped = Vec::new();
    let comparisons = runs[1..]
        .iter()
        .map(|r| {
            let c =
                bertqa::compare::compare_with(&first.run(&windows), &r.run(&windows), &statistics);
            flipped.extend(c.flipped.iter().map(|f| FlipLine {
                model: r.name.clone(),
                against: first.name.clone(),
                flip: f.clone(),
            }));
            let mut json = ComparisonJson::new(args.show, &first.name, &r.name, c);
            if let Some(reason) = &no_windows {
                json.kl_unavailable = Some(reason.clone());
            }
            gate_results.extend(gates(args).check(&json, dataset.examples.len()));
            json
        })
        .collect();
    let doc = CompareJson {
        schema: 1,
        data: data_label(&args.data),
        version_2_with_negative: version_2,
        questions: dataset.examples.len(),
        features: windows.len(),
        parallel: false,
        runs: Some(args.runs.iter().map(|d| d.display().to_string()).collect()),
        statistics: statistics_json(&args.statistics),
        models: runs.iter().map(model_json).collect(),
        comparisons,
        gates: gate_results,
    };
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| bertqa::Error::io(dir, e))?;
    }
    bertqa::report::flips::write(
        args.output_dir.as_deref(),
        args.html.as_deref(),
        &doc,
        &flipped,
    )?;
    output::report(args, session, &doc)
}

/// Runs of one model (today's against a baseline) named apart by their directories.
fn name_apart(runs: &mut [FinishedRun]) {
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    for r in runs.iter_mut() {
        if names.iter().filter(|n| **n == r.name).count() > 1 {
            r.name = format!("{} ({})", r.name, r.dir.display());
        }
    }
}

/// The windows the runs' saved logits are of, cut again from the data; none, with the
/// reason, when a run saved no logits or they are not of these windows.
fn windows(
    args: &Args,
    dataset: &bertqa::types::Dataset,
    runs: &[FinishedRun],
) -> (Vec<Arc<Feature>>, Option<String>) {
    if let Some(r) = runs.iter().find(|r| r.logits.is_empty()) {
        return (
            Vec::new(),
            Some(format!(
                "{} saved no logits (run it with --save-logits)",
                r.dir.display()
            )),
        );
    }
    let built = (|| -> bertqa::Result<Vec<Arc<Feature>>> {
        let loaded = load_tokenizer(&args.run.tokenizer, args.run.decode.postprocess)?;
        let config = feature_config(&args.run.window, loaded.postprocess, None)?;
        let builder = bertqa::features::FeatureBuilder::for_rules(
            loaded.tokenizer.as_ref(),
            loaded.postprocess,
            config,
            dataset,
        )?;
        let (features, _) = bertqa::features::collect(builder, dataset)?;
        Ok(features.into_iter().map(Arc::new).collect())
    })();
    let windows = match built {
        Ok(w) => w,
        Err(e) => {
            let reason = format!("the windows could not be cut again: {e}");
            return (Vec::new(), Some(reason));
        }
    };
    for r in runs {
        if let Err(reason) = r.logits_fit(&windows) {
            return (Vec::new(), Some(super::super::flags::name_flags(&reason)));
        }
    }
    (windows, None)
}

/// A finished run as the report lists it: what its metrics.json recorded of the model
/// and its speed (NaN where it recorded nothing), the scores computed again.
fn model_json(r: &FinishedRun) -> ModelJson {
    let h = &r.report;
    let number = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    ModelJson {
        name: r.name.clone(),
        url: text(&h["model"]["url"]),
        protocol: match h["model"]["protocol"].as_str() {
            Some("http") => Protocol::Http,
            _ => Protocol::Grpc,
        },
        platform: text(&h["model"]["platform"]),
        output_dir: r.dir.display().to_string(),
        metrics: r.scores.metrics.clone(),
        wall_s: number(&h["wall_s"]),
        throughput: Throughput {
            features_per_s: number(&h["throughput"]["features_per_s"]),
            questions_per_s: number(&h["throughput"]["questions_per_s"]),
        },
        latency_ms: LatencyMs {
            p50: number(&h["latency_ms"]["p50"]),
            p95: number(&h["latency_ms"]["p95"]),
            p99: number(&h["latency_ms"]["p99"]),
        },
        padding: serde_json::from_value(h["padding"].clone()).ok(),
    }
}
