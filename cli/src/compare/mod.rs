//! `bertqa compare`: the same evaluation on several deployments, side by side.
//!
//! Features are built once and sent to every model (sequentially by default so the
//! timings are fair; `--parallel` runs them together). Against the first model it
//! reports answer agreement (fraction of questions with the same final text), the L_inf
//! and mean absolute difference of start and end logits over every feature position
//! whose attention mask is 1, and the questions that disagree; and whether the scores'
//! differences are real (`bertqa::compare::stats`: bootstrap intervals, McNemar's and
//! a randomization test, flips, the KL divergence of the windows' distributions; the
//! flipped questions in DIR/flips.jsonl). Gates: `--min-agreement`,
//! `--max-logit-diff`, `--max-f1-drop`, `--fail-on-significant-drop`, `--max-flip-rate`
//! → exit 1.

use bertqa::Model;
use std::path::PathBuf;
use std::sync::Arc;

mod output;
mod runs;

use super::args::{self, PipelineArgs, ServerArgs};
use super::common::{
    connect_pool_and_look, decode_config, feature_config, load_data, load_tokenizer,
    pipeline_runtime, run_config, shared_pipeline_runtime, Outcome,
};
use super::eval::{write_per_question, write_predictions};
use super::session::Session;
use bertqa::backend::Pool;
use bertqa::decode::DecodeConfig;
use bertqa::evaluate::Scores;
use bertqa::features::FeatureConfig;
use bertqa::pipeline::{self, Padding, RunConfig, RunOutcome};
use bertqa::report::compare::{
    CompareJson, ComparisonJson, LatencyMs, ModelJson, ModelRunJson, Throughput,
};
pub(crate) use output::StatisticsArgs;
use output::{gates_of, statistics_json, FlipLine};

use bertqa::tokenize::Tokenizer;
use bertqa::types::{Dataset, Feature};

/// Compare several deployments of a model on one SQuAD file.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("url", |a| a.help("Server of the models named without @HOST:PORT")),
    // No progress bar.
    mut_arg("quiet", |a| a.hide(true)),
)]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = args::INPUT, required = true, action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,
    /// First N questions only
    #[arg(long, value_name = "N", help_heading = args::INPUT)]
    pub limit: Option<usize>,
    /// Models to compare, NAME, NAME@URL or NAME@URL?authority=HOST; the first is the reference
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "runs",
        num_args = 1..,
        help_heading = args::MODEL
    )]
    pub models: Vec<String>,
    /// Compare finished runs instead of models, without a server: the directories eval
    /// --output-dir writes, or a model's directory of compare --output-dir; the first is
    /// the reference
    #[arg(
        long,
        value_name = "DIR",
        num_args = 1..,
        action = clap::ArgAction::Append,
        conflicts_with_all = ["models", "parallel", "model_tokenizer", "save_logits"],
        help_heading = args::INPUT
    )]
    pub runs: Vec<PathBuf>,
    /// A model's own tokenizer, NAME=PATH (a folder or a tokenizer.json), for a model of
    /// another family than --tokenizer's; its windows and rules follow it as they would
    /// in eval (repeat for several models)
    #[arg(long, value_name = "NAME=PATH", help_heading = args::MODEL)]
    pub model_tokenizer: Vec<String>,
    #[command(flatten)]
    pub text: args::TextBindingArgs,
    #[command(flatten)]
    pub run: PipelineArgs,
    #[command(flatten, next_help_heading = args::DECODING)]
    pub scoring: args::ScoringArgs,
    /// Run the models at the same time (their timings then interfere)
    #[arg(long, help_heading = args::RUN)]
    pub parallel: bool,
    /// Each model's files in DIR/<model>/, DIR/compare.json and DIR/flips.jsonl (with
    /// --runs: the last two, when given)
    #[arg(long, value_name = "DIR", required_unless_present = "runs", help_heading = args::OUTPUT)]
    pub output_dir: Option<PathBuf>,
    /// Also save each model's windows' logits (DIR/<model>/logits.bin), for the
    /// divergences of a later compare --runs
    #[arg(long, help_heading = args::OUTPUT)]
    pub save_logits: bool,
    /// Disagreeing questions shown per model
    #[arg(long, default_value_t = 10, value_name = "N", help_heading = args::OUTPUT)]
    pub show: usize,
    /// Also write an HTML page: the differences with their intervals, the flips
    #[arg(long, value_name = "FILE", help_heading = args::OUTPUT)]
    pub html: Option<PathBuf>,
    /// Exit 1 when a model agrees with the first on less than this fraction of questions
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub min_agreement: Option<f64>,
    /// Exit 1 when a model's logits differ from the first's by more than X
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub max_logit_diff: Option<f64>,
    /// Exit 1 when a model's F1 is more than X points below the first's
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub max_f1_drop: Option<f64>,
    /// Exit 1 when the interval of a model's exact-match or F1 difference from the
    /// first lies wholly below 0
    #[arg(long, help_heading = args::GATES)]
    pub fail_on_significant_drop: bool,
    /// Exit 1 when more than this fraction of the questions changed correctness
    /// ((right to wrong + wrong to right) / questions)
    #[arg(long, value_name = "X", help_heading = args::GATES)]
    pub max_flip_rate: Option<f64>,
    #[command(flatten, next_help_heading = args::STATISTICS)]
    pub statistics: StatisticsArgs,
}

/// How many servers of `targets` (name, URL) serve a model named `name`.
fn servers_of(targets: &[(String, String)], name: &str) -> usize {
    let mut urls: Vec<&str> = targets
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, u)| u.as_str())
        .collect();
    urls.sort_unstable();
    urls.dedup();
    urls.len()
}

/// A `--models` entry: `NAME`, `NAME@URL` or `NAME@URL?authority=HOST` (two
/// deployments behind one ingress differ only by the host they are routed by) as the
/// model's name, URL (`default_url` without one) and authority.
fn split_model(spec: &str, default_url: &str) -> anyhow::Result<(String, String, Option<String>)> {
    let (name, at) = match spec.split_once('@') {
        Some((m, u)) => (m.trim(), u.trim()),
        None => (spec.trim(), default_url),
    };
    let (url, authority) = match at.split_once('?') {
        Some((url, query)) => match query.strip_prefix("authority=") {
            Some(a) if !a.trim().is_empty() => (url, Some(a.trim().to_string())),
            _ => anyhow::bail!("--models {spec:?}: after the URL only ?authority=HOST may follow"),
        },
        None => (at, None),
    };
    Ok((name.to_string(), url.to_string(), authority))
}

/// A model to run: named, connected and bound.
struct Target {
    name: String,
    url: String,
    client: Pool,
    binding: Model,
}

/// A model's run, ready to start.
struct Job {
    target: Target,
    /// Its directory under --output-dir.
    dir_name: String,
    /// Its run settings.
    config: RunConfig,
    /// The model's own tokenizer (`--model-tokenizer`): its windows are cut for its run,
    /// not shared.
    tokenizer: Option<Tokenizer>,
}

/// One model's run.
struct ModelRun {
    name: String,
    url: String,
    protocol: bertqa::backend::Protocol,
    dir_name: String,
    binding: Model,
    outcome: RunOutcome,
    /// A text model's windows (`outcome.kept_features`); a token model's are the
    /// features built once.
    own_windows: bool,
    scores: Scores,
    /// The files written in its directory.
    files: Vec<String>,
}

/// What every model's run shares: the questions, their features (built once) and the
/// runtime.
struct Shared<'a> {
    args: &'a Args,
    rt: &'a tokio::runtime::Runtime,
    dataset: &'a Dataset,
    tokenizer: &'a Tokenizer,
    features: &'a [Arc<Feature>],
    version_2: bool,
    /// The host's stop token (`--parallel` runs models on threads of their own).
    stop: Option<tokio_util::sync::CancellationToken>,
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    if !args.runs.is_empty() {
        return runs::run(&args, session);
    }
    if args.models.len() < 2 {
        anyhow::bail!(
            "--models needs at least two models to compare (got {})",
            args.models.len()
        );
    }
    // Held until the comparison ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(out_dir(&args))?;
    let dataset = load_data(&args.data, args.run.window.strict, args.limit)?;
    let loaded = load_tokenizer(&args.run.tokenizer, args.run.decode.postprocess)?;
    let version_2 = args.run.decode.version_2_with_negative || dataset.looks_like_v2();
    let decode = decode_config(
        &args.run.decode,
        version_2,
        loaded.lower_case(args.run.tokenizer.lower_case()),
        loaded.postprocess,
    );
    let rt = if args.parallel {
        shared_pipeline_runtime()?
    } else {
        pipeline_runtime()?
    };
    let targets = connect(&args, &rt)?;
    // The windows' default length: the first fixed-length model's.
    let model_len = targets.iter().find_map(|t| t.binding.fixed_len());
    let features_config = feature_config(&args.run.window, loaded.postprocess, model_len)?;
    let tokenizer = loaded.tokenizer;
    let builder = bertqa::features::FeatureBuilder::for_rules(
        tokenizer.as_ref(),
        loaded.postprocess,
        features_config,
        &dataset,
    )?;
    let (built, _) = bertqa::features::collect(builder, &dataset)?;
    let features: Vec<Arc<Feature>> = built.into_iter().map(Arc::new).collect();
    let jobs = jobs(&args, targets, features_config, &decode)?;
    let shared = Shared {
        args: &args,
        rt: &rt,
        dataset: &dataset,
        tokenizer: &tokenizer,
        features: &features,
        version_2,
        stop: session.stop(),
    };
    let runs = run_all(&shared, jobs)?;

    let (doc, flipped) = report(&args, &runs, &features, version_2);
    // Each model's directory a complete run (compare --runs reads it).
    for (run, model) in runs.iter().zip(&doc.models) {
        let mut files = run.files.clone();
        files.push("metrics.json".into());
        let json = bertqa::report::json::to_string(&ModelRunJson::of(&doc, model, files));
        let path = out_dir(&args).join(&run.dir_name).join("metrics.json");
        bertqa::output_file::write_atomic(&path, json.as_bytes())?;
    }
    output::finish(&args, session, Some(out_dir(&args)), &doc, &flipped)
}

/// `--output-dir`, which a comparison of models requires (clap checks).
fn out_dir(args: &Args) -> &std::path::Path {
    args.output_dir
        .as_deref()
        .expect("--output-dir is required without --runs")
}

/// Connects and binds every model first: a wrong name fails before any run.
fn connect(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<Vec<Target>> {
    let mut targets = Vec::new();
    for spec in &args.models {
        let (name, url, authority) = split_model(spec, args.run.server.first_url())?;
        let server = ServerArgs {
            url: vec![url.clone()],
            authority: authority
                .clone()
                .or_else(|| args.run.server.authority.clone()),
            ..args.run.server.clone()
        };
        // The URL as it names the deployment in the reports.
        let url = match authority {
            Some(a) => format!("{url}?authority={a}"),
            None => url,
        };
        let (client, binding) = rt.block_on(connect_pool_and_look(
            &server,
            &args.run.net,
            &name,
            "",
            &args.run.binding,
            &args.text,
        ))?;
        targets.push(Target {
            name,
            url,
            client,
            binding,
        });
    }
    Ok(targets)
}

/// The same padding for all, so logits are comparable: each batch padded to its longest
/// feature only when every model takes any length. A fixed-length model must take the
/// window length.
fn shared_padding(
    args: &Args,
    targets: &[Target],
    max_seq_length: usize,
) -> anyhow::Result<Padding> {
    // A text model has no fixed length of ours (the server tokenizes).
    let all_dynamic = targets.iter().all(|t| t.binding.fixed_len().is_none());
    let padding = if all_dynamic && !args.run.load.fixed_seq_len {
        Padding::Longest { multiple: 8 }
    } else {
        Padding::Fixed(max_seq_length)
    };
    for t in targets {
        if let Some(n) = t.binding.fixed_len() {
            if n != max_seq_length {
                anyhow::bail!(
                    "model {:?} takes {n} tokens but --max-seq-length is {max_seq_length}",
                    t.name
                );
            }
        }
    }
    Ok(padding)
}

/// Each model's run settings and directory name (its name, made a distinct file name).
fn jobs(
    args: &Args,
    targets: Vec<Target>,
    features_config: FeatureConfig,
    decode: &DecodeConfig,
) -> anyhow::Result<Vec<Job>> {
    let padding = shared_padding(args, &targets, features_config.max_seq_length)?;
    let mut dir_names: Vec<String> = Vec::new();
    let mut jobs = Vec::new();
    // A model of one name on two servers (one deployment against another) is named
    // with its server in the reports.
    let names: Vec<(String, String)> = targets
        .iter()
        .map(|t| (t.name.clone(), t.url.clone()))
        .collect();
    for mut target in targets {
        let mut dir_name = target.name.replace(['/', '\\'], "_");
        if dir_names.contains(&dir_name) {
            dir_name = format!("{dir_name}-{}", dir_names.len() + 1);
        }
        dir_names.push(dir_name.clone());
        if servers_of(&names, &target.name) > 1 {
            target.name = format!("{}@{}", target.name, target.url);
        }
        let own = own_tokenizer(
            args,
            &target.name,
            decode.version_2_with_negative,
            features_config.max_seq_length,
        )?;
        let model = &target.binding;
        let (config, tokenizer) = if model.takes_text() {
            // The server makes the windows (kept with their logits); the shared
            // vocabulary rebuilds their pieces.
            let mut config = run_config(&args.run.load, model, features_config, decode.clone())?;
            config.keep_features = true;
            config.keep_logits = true;
            (config, None)
        } else {
            let (features, decode) = match &own {
                Some((_, features, decode)) => (*features, decode.clone()),
                None => (features_config, decode.clone()),
            };
            let mut config = run_config(&args.run.load, model, features, decode)?;
            config.infer.padding = padding;
            config.keep_logits = true;
            config.keep_features = own.is_some();
            (config, own.map(|(t, _, _)| t))
        };
        jobs.push(Job {
            target,
            dir_name,
            config,
            tokenizer,
        });
    }
    Ok(jobs)
}

/// The tokenizer `--model-tokenizer` gives model `name`, with the window and decoding
/// settings of the rules it is used with.
fn own_tokenizer(
    args: &Args,
    name: &str,
    version_2: bool,
    max_seq_length: usize,
) -> anyhow::Result<Option<(Tokenizer, FeatureConfig, DecodeConfig)>> {
    let mut own = None;
    for spec in &args.model_tokenizer {
        let Some((model, path)) = spec.split_once('=') else {
            anyhow::bail!("--model-tokenizer {spec:?}: give NAME=PATH");
        };
        if !args
            .models
            .iter()
            .any(|m| split_model(m, "").is_ok_and(|(n, ..)| n == model))
        {
            anyhow::bail!("--model-tokenizer {spec:?}: no model {model:?} in --models");
        }
        if model == name {
            own = Some(path);
        }
    }
    let Some(path) = own else {
        return Ok(None);
    };
    let tokenizer_args = args::TokenizerArgs {
        tokenizer: Some(PathBuf::from(path)),
        ..args.run.tokenizer.clone()
    };
    let loaded = load_tokenizer(&tokenizer_args, args.run.decode.postprocess)?;
    let decode = decode_config(
        &args.run.decode,
        version_2,
        loaded.lower_case(tokenizer_args.lower_case()),
        loaded.postprocess,
    );
    let features = feature_config(&args.run.window, loaded.postprocess, Some(max_seq_length))?;
    Ok(Some((loaded.tokenizer, features, decode)))
}

/// Runs every job: one after another, or (`--parallel`) each on a thread of its own.
fn run_all(shared: &Shared<'_>, jobs: Vec<Job>) -> anyhow::Result<Vec<ModelRun>> {
    if shared.args.parallel {
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|j| scope.spawn(|| run_one(shared, j)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("model thread"))
                .collect()
        })
    } else {
        jobs.into_iter().map(|j| run_one(shared, j)).collect()
    }
}

/// One model's pipeline run over the features built once for all, or over its own
/// tokenizer's windows (a text model's windows are the server's).
fn run_pipeline(
    shared: &Shared<'_>,
    client: &Pool,
    model: &Model,
    config: &RunConfig,
    own: Option<&Tokenizer>,
) -> bertqa::Result<RunOutcome> {
    let Shared {
        rt,
        dataset,
        tokenizer,
        features,
        ..
    } = *shared;
    let run = super::session::stoppable_by(
        pipeline::Run::new(rt, client, model.clone(), dataset, config),
        shared.stop.clone(),
    );
    match own {
        Some(t) => run.tokenizer(t).run(),
        None => run.tokenizer(tokenizer).prebuilt(features).run(),
    }
}

/// Runs one model, then writes and scores its answers in its directory.
fn run_one(shared: &Shared<'_>, job: Job) -> anyhow::Result<ModelRun> {
    let Job {
        target,
        dir_name,
        config,
        tokenizer,
    } = job;
    let Target {
        name,
        url,
        client,
        binding,
    } = target;
    let outcome = run_pipeline(shared, &client, &binding, &config, tokenizer.as_ref())
        .map_err(|e| anyhow::anyhow!("model {name:?}: {e}"))?;
    if let Some(note) = outcome.infer.padding.note(&name) {
        eprintln!("{}", super::flags::name_flags(&note));
    }
    let (args, version_2) = (shared.args, shared.version_2);
    let dir = out_dir(args).join(&dir_name);
    std::fs::create_dir_all(&dir).map_err(|e| bertqa::Error::io(&dir, e))?;
    // A model without null odds (an answer-contract model without a no-answer
    // output) is scored as the official v2 script scores without a na-prob file.
    let null_odds = version_2 && bertqa::evaluation::gives_null_odds(&binding);
    let mut files = write_predictions(&dir, &outcome.predictions, null_odds, None)?;
    if args.save_logits {
        bertqa::logits_io::save(&dir.join("logits.bin"), &outcome.logits)?;
        files.push("logits.bin".into());
    }
    let scores = bertqa::evaluation::score_with(
        shared.dataset,
        &outcome.predictions,
        version_2,
        null_odds,
        args.scoring.na_prob_thresh,
    )?;
    write_per_question(&dir, &outcome.predictions, &scores)?;
    files.push("per_question.jsonl".into());
    Ok(ModelRun {
        files,
        name,
        url,
        protocol: client.first_client().protocol(),
        dir_name,
        own_windows: binding.takes_text() || tokenizer.is_some(),
        binding,
        outcome,
        scores,
    })
}

fn per_s(n: f64, wall: f64) -> f64 {
    if wall > 0.0 {
        n / wall
    } else {
        0.0
    }
}

/// The report: every model's run, each against the first, and the gates; and the
/// questions that flipped, for flips.jsonl.
fn report(
    args: &Args,
    runs: &[ModelRun],
    features: &[Arc<Feature>],
    version_2: bool,
) -> (CompareJson, Vec<FlipLine>) {
    let first = &runs[0];
    let statistics = args.statistics.statistics();
    let mut gates = Vec::new();
    let mut flipped = Vec::new();
    let comparisons = runs[1..]
        .iter()
        .map(|r| {
            let c = bertqa::compare::compare_with(
                &compared(first, features),
                &compared(r, features),
                &statistics,
            );
            flipped.extend(c.flipped.iter().map(|f| FlipLine {
                model: r.name.clone(),
                against: first.name.clone(),
                flip: f.clone(),
            }));
            let json = ComparisonJson::new(args.show, &first.name, &r.name, c);
            gates.extend(gates_of(args, &json, first.outcome.predictions.len()));
            json
        })
        .collect();
    let doc = CompareJson {
        schema: 1,
        data: super::common::data_label(&args.data),
        version_2_with_negative: version_2,
        questions: first.outcome.predictions.len(),
        features: features.len(),
        parallel: args.parallel,
        runs: None,
        statistics: statistics_json(&args.statistics),
        models: runs.iter().map(|r| model_json(args, r)).collect(),
        comparisons,
        gates,
    };
    (doc, flipped)
}

/// One model's run as the report lists it.
fn model_json(args: &Args, r: &ModelRun) -> ModelJson {
    let i = &r.outcome.infer;
    let wall = r.outcome.wall.as_secs_f64();
    ModelJson {
        name: r.name.clone(),
        url: r.url.clone(),
        protocol: r.protocol,
        platform: r.binding.platform().to_string(),
        output_dir: out_dir(args).join(&r.dir_name).display().to_string(),
        metrics: r.scores.metrics.clone(),
        wall_s: wall,
        throughput: Throughput {
            features_per_s: per_s(r.outcome.features as f64, wall),
            questions_per_s: per_s(r.outcome.predictions.len() as f64, wall),
        },
        latency_ms: LatencyMs {
            p50: i.latency_ms(0.5),
            p95: i.latency_ms(0.95),
            p99: i.latency_ms(0.99),
        },
        padding: Some((&i.padding).into()),
    }
}

/// A model's run as the comparison reads it: its own windows (a text model's) or the
/// features built once.
fn compared<'a>(m: &'a ModelRun, features: &'a [Arc<Feature>]) -> bertqa::compare::Run<'a> {
    bertqa::compare::Run {
        predictions: &m.outcome.predictions,
        metrics: &m.scores.metrics,
        scores: &m.scores.counted,
        windows: if m.own_windows {
            &m.outcome.kept_features
        } else {
            features
        },
        logits: &m.outcome.logits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_named_with_their_server_and_authority() {
        let split = |s| split_model(s, "x:2").unwrap();
        assert_eq!(split("m@h:1"), ("m".into(), "h:1".into(), None));
        assert_eq!(split("m"), ("m".into(), "x:2".into(), None));
        assert_eq!(
            split("m@http://gw/p?authority=a.example"),
            ("m".into(), "http://gw/p".into(), Some("a.example".into()))
        );
        assert!(split_model("m@h:1?other=1", "x:2").is_err());
    }
}
