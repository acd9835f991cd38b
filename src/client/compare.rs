//! Deployments compared ([`compare_deployments`]): the same data evaluated by several
//! clients (a model on two servers, TorchScript against ONNX, FP32 against FP16), each
//! against the first, as `bertqa compare` reports it.
//!
//! Contract:
//! - The windows are cut once, with the tokenizer of the first deployment that does not
//!   cut its own, and the same windows go to every deployment that takes token ids: their
//!   logits are compared window by window. A deployment of another family cuts its own
//!   ([`Deployment::own_windows`]); a model that takes text is sent the text.
//! - Every deployment pads alike (to each batch's longest window only when every model
//!   takes any length), so their logits are comparable; a fixed-length model must take
//!   the window length.
//! - One after another (fair timings), or all at once ([`CompareOptions::parallel`]).
//! - Each deployment's directory holds the files of an evaluation (`compare --runs` reads
//!   it); the output directory `compare.json` and `flips.jsonl`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::compare::Statistics;
use crate::error::{Error, Result};
use crate::evaluate::Scores;
use crate::evaluation::slices::RunSide;
use crate::evaluation::{score_with, write_per_question, write_predictions, EvalData, EvalHooks};
use crate::features::FeatureConfig;
use crate::pipeline::{Padding, RunConfig, RunOutcome};
use crate::report::compare::{
    CompareJson, ComparisonJson, Gates, LatencyMs, ModelJson, ModelRunJson, StatisticsJson,
    Throughput,
};
use crate::report::flips::FlipLine;
use crate::slices::{names, Placement, QuestionSlices};
use crate::types::Feature;

/// A deployment to compare: a client, and how the report names it.
pub struct Deployment<'a> {
    /// Its name in the report (a model of one name on two servers: `name@url`).
    pub name: String,
    /// Its server, as the report names it.
    pub url: String,
    /// The client that evaluates the data there (its server, model and settings).
    pub client: &'a crate::blocking::Client,
    /// It cuts its own windows with its client's tokenizer (a model of another family),
    /// instead of taking the windows cut once for all.
    pub own_windows: bool,
}

/// What a comparison does besides running and comparing.
#[derive(Clone)]
pub struct CompareOptions {
    /// Each deployment's files in `DIR/<model>/`, `compare.json` and `flips.jsonl`
    /// (required to compare deployments; finished runs: where, when given).
    pub output_dir: Option<PathBuf>,
    /// Run the deployments at the same time (their timings then interfere).
    pub parallel: bool,
    /// Also save each deployment's windows' logits (`DIR/<model>/logits.bin`).
    pub save_logits: bool,
    /// Disagreeing questions listed per deployment.
    pub show: usize,
    /// Write an HTML page here.
    pub html: Option<PathBuf>,
    /// How the intervals and p-values of each comparison are drawn.
    pub statistics: Statistics,
    /// Thresholds each comparison is checked against; the outcomes are the report's
    /// `gates` (a failed gate is not an error here).
    pub gates: Gates,
    /// Cancelled: the runs stop (a run stopped is an error).
    pub stop: Option<CancellationToken>,
    /// Told the notes the runs give.
    pub hooks: Option<Arc<dyn EvalHooks>>,
}

impl CompareOptions {
    /// Options writing into `output_dir`, with the default statistics and no gates.
    pub fn new(output_dir: impl Into<PathBuf>) -> CompareOptions {
        CompareOptions {
            output_dir: Some(output_dir.into()),
            parallel: false,
            save_logits: false,
            show: 10,
            html: None,
            statistics: Statistics::default(),
            gates: Gates::default(),
            stop: None,
            hooks: None,
        }
    }
}

/// A comparison's report (`compare --json`'s document, also `compare.json`) and the
/// questions that flipped (`flips.jsonl`).
#[derive(Debug)]
pub struct Compared {
    /// The report: every deployment's run, each comparison with the first, the gates.
    pub report: CompareJson,
    /// Every question that flipped, comparison by comparison (`flips.jsonl`'s lines).
    pub flips: Vec<FlipLine>,
}

/// Evaluates `data` on every deployment and compares each with the first (see the
/// module's contract); writes the files into `options.output_dir`, which must exist.
pub fn compare_deployments(
    deployments: &[Deployment<'_>],
    data: &EvalData,
    options: &CompareOptions,
) -> Result<Compared> {
    if deployments.len() < 2 {
        return Err(Error::Config(format!(
            "a comparison needs at least two deployments (got {})",
            deployments.len()
        )));
    }
    let output_dir = options
        .output_dir
        .as_deref()
        .ok_or_else(|| Error::Config("deployments are compared into an `output_dir`".into()))?;
    let first = deployments[0].client.parts().0;
    let version_2 = first.settings.version_2.unwrap_or(data.looks_like_v2);
    // The windows' default length: the first fixed-length model's.
    let max_seq_length = first
        .settings
        .max_seq_length
        .or_else(|| {
            deployments
                .iter()
                .find_map(|d| d.client.model().fixed_len())
        })
        .unwrap_or(FeatureConfig::default().max_seq_length);
    let shared = deployments
        .iter()
        .map(|d| d.client.parts().0)
        .zip(deployments)
        .find(|(e, d)| !d.own_windows && e.tokenizer.is_some())
        .map(|(e, _)| e);
    let features = FeatureConfig {
        max_seq_length,
        ..first.settings.features
    };
    let (windows, placements): (Vec<Arc<Feature>>, Vec<Placement>) = match shared {
        Some(engine) => {
            features.validate_for(engine.settings.decode.postprocess)?;
            let tokenizer = engine.tokenizer.as_ref().expect("found with a tokenizer");
            let builder = crate::features::FeatureBuilder::for_rules(
                tokenizer.tokenizer.as_ref(),
                engine.settings.decode.postprocess,
                features,
                &data.dataset,
            )?;
            let (built, _, placements) = crate::features::collect_placed(builder, &data.dataset);
            (built.into_iter().map(Arc::new).collect(), placements)
        }
        None => (Vec::new(), Vec::new()),
    };
    let padding = shared_padding(deployments, max_seq_length)?;
    let jobs = deployments
        .iter()
        .zip(dir_names(deployments))
        .map(|(d, dir_name)| job(d, dir_name, features, version_2, padding))
        .collect::<Result<Vec<_>>>()?;
    let shared = Shared {
        data,
        windows: &windows,
        placements: &placements,
        version_2,
        options,
        output_dir,
    };
    let runs: Vec<ModelRun> = if options.parallel {
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|j| scope.spawn(|| run_one(&shared, j)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a deployment's thread"))
                .collect::<Result<_>>()
        })?
    } else {
        jobs.into_iter()
            .map(|j| run_one(&shared, j))
            .collect::<Result<_>>()?
    };
    let compared = report(&shared, &runs);
    // Each deployment's directory a complete run (`compare --runs` reads it).
    for (run, model) in runs.iter().zip(&compared.report.models) {
        let mut files = run.files.clone();
        files.push("metrics.json".into());
        let json =
            crate::report::json::to_string(&ModelRunJson::of(&compared.report, model, files));
        let path = output_dir.join(&run.dir_name).join("metrics.json");
        crate::output_file::write_atomic(&path, json.as_bytes())?;
    }
    crate::report::flips::write(
        Some(output_dir),
        options.html.as_deref(),
        &compared.report,
        &compared.flips,
        &data.dataset,
    )?;
    Ok(compared)
}

/// What every deployment's run shares.
struct Shared<'a> {
    data: &'a EvalData,
    /// The windows cut once.
    windows: &'a [Arc<Feature>],
    /// Where each question's windows cut once lie.
    placements: &'a [Placement],
    version_2: bool,
    options: &'a CompareOptions,
    output_dir: &'a Path,
}

/// A deployment's run, ready to start.
struct Job<'a> {
    deployment: &'a Deployment<'a>,
    engine: &'a Engine,
    drive: super::Driving<'a>,
    /// Its directory under the output directory.
    dir_name: String,
    config: RunConfig,
    /// It cuts its own windows, or the server does (a text model).
    own_windows: bool,
}

/// One deployment's run.
struct ModelRun {
    name: String,
    url: String,
    protocol: crate::backend::Protocol,
    platform: String,
    dir_name: String,
    outcome: RunOutcome,
    own_windows: bool,
    scores: Scores,
    /// Each question's slices in this run, and the dimensions it cannot give.
    slices: Vec<QuestionSlices>,
    slices_not_computed: std::collections::BTreeMap<&'static str, String>,
    /// The files written in its directory.
    files: Vec<String>,
}

/// Each deployment's directory: its model's name made a distinct file name.
fn dir_names(deployments: &[Deployment<'_>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for d in deployments {
        let mut name = d.client.model().name().replace(['/', '\\'], "_");
        if names.contains(&name) {
            name = format!("{name}-{}", names.len() + 1);
        }
        names.push(name);
    }
    names
}

/// The same padding for all, so logits are comparable: each batch padded to its longest
/// window only when every model takes any length (and none asks for fixed padding). A
/// fixed-length model must take the window length.
fn shared_padding(deployments: &[Deployment<'_>], max_seq_length: usize) -> Result<Padding> {
    let engines = || deployments.iter().map(|d| d.client.parts().0);
    // A text model has no fixed length of ours (the server tokenizes).
    let all_dynamic = engines().all(|e| e.model.fixed_len().is_none());
    let fixed = engines().any(|e| e.settings.load.fixed_seq_len);
    for d in deployments {
        if let Some(n) = d.client.model().fixed_len() {
            if n != max_seq_length {
                return Err(Error::Refused(format!(
                    "model {:?} takes {n} tokens but `max_seq_length` is {max_seq_length}",
                    d.name
                )));
            }
        }
    }
    Ok(match all_dynamic && !fixed {
        true => Padding::Longest { multiple: 8 },
        false => Padding::Fixed(max_seq_length),
    })
}

/// A deployment's run settings: the shared windows' geometry (its own tokenizer's rules
/// when it cuts its own) and padding, keeping the logits to compare.
fn job<'a>(
    d: &'a Deployment<'a>,
    dir_name: String,
    features: FeatureConfig,
    version_2: bool,
    padding: Padding,
) -> Result<Job<'a>> {
    let (engine, drive) = d.client.parts();
    let mut decode = engine.settings.decode.clone();
    decode.version_2_with_negative = version_2;
    let model = &engine.model;
    let text = model.takes_text();
    if d.own_windows && !text {
        features.validate_for(decode.postprocess)?;
    }
    let mut config = RunConfig::resolve(model, &engine.settings.load, features, decode)?;
    config.keep_logits = true;
    if text {
        // The server makes the windows (kept with their logits).
        config.keep_features = true;
    } else {
        config.infer.padding = padding;
        config.keep_features = d.own_windows;
    }
    Ok(Job {
        deployment: d,
        engine,
        drive,
        dir_name,
        config,
        own_windows: text || d.own_windows,
    })
}

/// Runs one deployment, then writes and scores its answers in its directory.
fn run_one(shared: &Shared<'_>, job: Job<'_>) -> Result<ModelRun> {
    let Job {
        deployment,
        engine,
        drive,
        dir_name,
        config,
        own_windows,
    } = job;
    let name = &deployment.name;
    let options = shared.options;
    let dataset = &shared.data.dataset;
    let observer = crate::pipeline::NoProgress;
    let mut run = engine.new_run(drive, dataset, &config, &observer);
    if let Some(stop) = &options.stop {
        run = run.stop_on(stop.clone());
    }
    if !own_windows {
        run = run.prebuilt(shared.windows);
    }
    let outcome = run.run().map_err(|e| Error::Deployment {
        name: name.clone(),
        error: Box::new(e),
    })?;
    if let (Some(hooks), Some(note)) = (&options.hooks, outcome.infer.padding.note(name)) {
        hooks.note(&note);
    }
    let dir = shared.output_dir.join(&dir_name);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    // A model without null odds (an answer-contract model without a no-answer output)
    // is scored as the official v2 script scores without a na-prob file.
    let null_odds = shared.version_2 && engine.model.gives_null_odds();
    let mut files = write_predictions(&dir, &outcome.predictions, null_odds, None)?;
    if options.save_logits {
        crate::logits_io::save(&dir.join("logits.bin"), &outcome.logits)?;
        files.push("logits.bin".into());
    }
    let scores = score_with(
        dataset,
        &outcome.predictions,
        shared.version_2,
        null_odds,
        engine.settings.na_prob_thresh,
    )?;
    let margins: Vec<f64> = outcome
        .predictions
        .iter()
        .map(crate::slices::margin)
        .collect();
    let text = engine.model.takes_text();
    let side = RunSide {
        version_2: shared.version_2,
        placements: match (text, own_windows) {
            (true, _) => &[],
            (false, true) => &outcome.placements,
            (false, false) => shared.placements,
        },
        windowless: format!("model {name:?} cuts its windows on the server"),
        margins: &margins,
        predictions: &outcome.predictions,
        null_threshold: match (shared.version_2, null_odds) {
            (false, _) => Err("SQuAD 1.1 rules: every question is answered".into()),
            (true, false) => Err(format!("model {name:?} gives no null odds")),
            (true, true) => Ok(config.decode.null_score_diff_threshold),
        },
    };
    let (slices, slices_not_computed) = crate::evaluation::slices::assigned(dataset, &side);
    write_per_question(&dir, &outcome.predictions, &scores, &slices)?;
    files.push("per_question.jsonl".into());
    Ok(ModelRun {
        name: name.clone(),
        url: deployment.url.clone(),
        protocol: engine.pool.first_client().protocol(),
        platform: engine.model.platform().to_string(),
        dir_name,
        outcome,
        own_windows,
        scores,
        slices,
        slices_not_computed,
        files,
    })
}

/// The report: every deployment's run, each against the first, and the gates; and the
/// questions that flipped.
fn report(shared: &Shared<'_>, runs: &[ModelRun]) -> Compared {
    let options = shared.options;
    let first = &runs[0];
    let questions = first.outcome.predictions.len();
    let (mut gates, mut flips) = (Vec::new(), Vec::new());
    let comparisons = runs[1..]
        .iter()
        .map(|r| {
            let c = crate::compare::compare_in_slices(
                &compared(first, shared.windows),
                &compared(r, shared.windows),
                &options.statistics,
                &first.slices,
            );
            flips.extend(c.flipped.iter().map(|f| FlipLine {
                model: r.name.clone(),
                against: first.name.clone(),
                slices: first.slices.get(f.index).map(names).unwrap_or_default(),
                flip: f.clone(),
            }));
            let json = ComparisonJson::new(options.show, &first.name, &r.name, c);
            gates.extend(options.gates.check(&json, questions));
            json
        })
        .collect();
    let report = CompareJson {
        schema: 1,
        data: shared.data.name.clone(),
        version_2_with_negative: shared.version_2,
        questions,
        features: shared.windows.len(),
        parallel: options.parallel,
        runs: None,
        statistics: statistics_json(&options.statistics),
        models: runs
            .iter()
            .map(|r| model_json(shared.output_dir, r))
            .collect(),
        comparisons,
        gates,
        slices_not_computed: first
            .slices_not_computed
            .iter()
            .map(|(d, reason)| (d.to_string(), reason.clone()))
            .collect(),
    };
    Compared { report, flips }
}

/// One deployment's run as the report lists it.
fn model_json(output_dir: &Path, r: &ModelRun) -> ModelJson {
    let i = &r.outcome.infer;
    let wall = r.outcome.wall.as_secs_f64();
    let per_s = |n: f64| if wall > 0.0 { n / wall } else { 0.0 };
    ModelJson {
        name: r.name.clone(),
        url: r.url.clone(),
        protocol: r.protocol,
        platform: r.platform.clone(),
        output_dir: output_dir.join(&r.dir_name).display().to_string(),
        metrics: r.scores.metrics.clone(),
        wall_s: wall,
        throughput: Throughput {
            features_per_s: per_s(r.outcome.features as f64),
            questions_per_s: per_s(r.outcome.predictions.len() as f64),
        },
        latency_ms: LatencyMs {
            p50: i.latency_ms(0.5),
            p95: i.latency_ms(0.95),
            p99: i.latency_ms(0.99),
        },
        padding: Some((&i.padding).into()),
    }
}

/// A deployment's run as the comparison reads it: its own windows (a text model's, or
/// its tokenizer's) or the windows cut once.
fn compared<'a>(m: &'a ModelRun, windows: &'a [Arc<Feature>]) -> crate::compare::Run<'a> {
    crate::compare::Run {
        predictions: &m.outcome.predictions,
        metrics: &m.scores.metrics,
        scores: &m.scores.counted,
        windows: if m.own_windows {
            &m.outcome.kept_features
        } else {
            windows
        },
        logits: &m.outcome.logits,
    }
}

/// Finished runs compared without a server (a CI job's run against a stored baseline):
/// each directory (`eval`'s output directory, or a deployment's of a comparison) read
/// and scored again from its answers and `data` ([`crate::compare::FinishedRun`]). The
/// divergences need every run's saved logits and the windows they are of, which `cut`
/// cuts again from the data; without them the report says why. The report is a live
/// comparison's, with the runs' directories under `runs`; `compare.json` and
/// `flips.jsonl` go into the output directory when one is given.
pub(crate) fn compare_runs(
    dirs: &[PathBuf],
    data: &EvalData,
    options: &CompareOptions,
    na_prob_thresh: f64,
    cut: impl FnOnce(&crate::types::Dataset) -> Result<Vec<Arc<Feature>>>,
) -> Result<Compared> {
    use crate::compare::FinishedRun;
    if dirs.len() < 2 {
        return Err(Error::Config(format!(
            "a comparison needs at least two finished runs (got {})",
            dirs.len()
        )));
    }
    let dataset = &data.dataset;
    let mut runs = dirs
        .iter()
        .map(|dir| FinishedRun::open(dir, dataset, na_prob_thresh))
        .collect::<Result<Vec<_>>>()?;
    let version_2 = runs[0].version_2_with_negative;
    if let Some(r) = runs.iter().find(|r| r.version_2_with_negative != version_2) {
        return Err(Error::Refused(format!(
            "{} was run by SQuAD {} rules and {} by {}: compare runs of one version",
            runs[0].dir.display(),
            if version_2 { "2.0" } else { "1.1" },
            r.dir.display(),
            if version_2 { "1.1" } else { "2.0" },
        )));
    }
    name_apart(&mut runs);
    let wording = |s: &str| match &options.hooks {
        Some(h) => h.wording(s),
        None => s.to_string(),
    };
    let (windows, no_windows) = finished_windows(&runs, dataset, cut, &wording);
    let first = &runs[0];
    let (mut gates, mut flips) = (Vec::new(), Vec::new());
    let comparisons = runs[1..]
        .iter()
        .map(|r| {
            let c = crate::compare::compare_in_slices(
                &first.run(&windows),
                &r.run(&windows),
                &options.statistics,
                &first.slices,
            );
            flips.extend(c.flipped.iter().map(|f| FlipLine {
                model: r.name.clone(),
                against: first.name.clone(),
                slices: first.slices.get(f.index).map(names).unwrap_or_default(),
                flip: f.clone(),
            }));
            let mut json = ComparisonJson::new(options.show, &first.name, &r.name, c);
            if let Some(reason) = &no_windows {
                json.kl_unavailable = Some(reason.clone());
            }
            gates.extend(options.gates.check(&json, dataset.examples.len()));
            json
        })
        .collect();
    let report = CompareJson {
        schema: 1,
        data: data.name.clone(),
        version_2_with_negative: version_2,
        questions: dataset.examples.len(),
        features: windows.len(),
        parallel: false,
        runs: Some(dirs.iter().map(|d| d.display().to_string()).collect()),
        statistics: statistics_json(&options.statistics),
        models: runs.iter().map(finished_json).collect(),
        comparisons,
        gates,
        slices_not_computed: finished_slices_not_computed(first),
    };
    if let Some(dir) = &options.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    crate::report::flips::write(
        options.output_dir.as_deref(),
        options.html.as_deref(),
        &report,
        &flips,
        dataset,
    )?;
    Ok(Compared { report, flips })
}

/// The dimensions a finished run's per_question.jsonl gives no question a slice in,
/// each with why.
fn finished_slices_not_computed(
    run: &crate::compare::FinishedRun,
) -> std::collections::BTreeMap<String, String> {
    let file = run.dir.join("per_question.jsonl");
    crate::slices::DIMENSIONS
        .iter()
        .enumerate()
        .filter(|&(d, _)| run.slices.iter().all(|q| q[d].is_none()))
        .map(|(_, dimension)| {
            let reason = match run.slices.is_empty() {
                true => format!(
                    "{} has no slices (written by an older bertqa)",
                    file.display()
                ),
                false => format!("{} gives no question one", file.display()),
            };
            (dimension.to_string(), reason)
        })
        .collect()
}

/// The statistics' settings as the report gives them.
fn statistics_json(s: &Statistics) -> StatisticsJson {
    StatisticsJson {
        bootstrap: s.rounds,
        seed: s.seed,
        confidence: s.confidence,
        p_values_corrected: false,
    }
}

/// Runs of one model (today's against a baseline) named apart by their directories.
fn name_apart(runs: &mut [crate::compare::FinishedRun]) {
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    for r in runs.iter_mut() {
        if names.iter().filter(|n| **n == r.name).count() > 1 {
            r.name = format!("{} ({})", r.name, r.dir.display());
        }
    }
}

/// The windows the runs' saved logits are of, cut again from the data; none, with the
/// reason (worded by `wording`), when a run saved no logits or they are not of these
/// windows.
fn finished_windows(
    runs: &[crate::compare::FinishedRun],
    dataset: &crate::types::Dataset,
    cut: impl FnOnce(&crate::types::Dataset) -> Result<Vec<Arc<Feature>>>,
    wording: &dyn Fn(&str) -> String,
) -> (Vec<Arc<Feature>>, Option<String>) {
    if let Some(r) = runs.iter().find(|r| r.logits.is_empty()) {
        let reason = format!(
            "{} saved no logits (run it with `save_logits`)",
            r.dir.display()
        );
        return (Vec::new(), Some(wording(&reason)));
    }
    let windows = match cut(dataset) {
        Ok(w) => w,
        Err(e) => {
            let reason = format!("the windows could not be cut again: {e}");
            return (Vec::new(), Some(reason));
        }
    };
    for r in runs {
        if let Err(reason) = r.logits_fit(&windows) {
            return (Vec::new(), Some(wording(&reason)));
        }
    }
    (windows, None)
}

/// A finished run as the report lists it: what its metrics.json recorded of the model
/// and its speed (NaN where it recorded nothing), the scores computed again.
fn finished_json(r: &crate::compare::FinishedRun) -> ModelJson {
    use serde_json::Value;
    let h = &r.report;
    let number = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    ModelJson {
        name: r.name.clone(),
        url: text(&h["model"]["url"]),
        protocol: match h["model"]["protocol"].as_str() {
            Some("http") => crate::backend::Protocol::Http,
            _ => crate::backend::Protocol::Grpc,
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
