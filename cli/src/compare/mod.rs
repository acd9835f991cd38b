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

use std::path::PathBuf;
use std::sync::Arc;

mod output;
mod runs;

use super::args::{self, PipelineArgs, ServerArgs};
use super::common::{data_label, load_data, pipeline_builder, Outcome};
use super::flags::name_flags;
use super::session::Session;
use bertqa::client::{compare_deployments, Blocking, CompareOptions, Deployment};
use output::gates;

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
    /// Exit 1 when a model's changed answers concentrate in a slice of the questions
    /// (Fisher's exact test against the rest, Holm-adjusted; each slice named)
    #[arg(long, help_heading = args::GATES)]
    pub fail_if_concentrated: bool,
    #[command(flatten, next_help_heading = args::STATISTICS)]
    pub statistics: args::StatisticsArgs,
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
pub(crate) fn split_model(
    spec: &str,
    default_url: &str,
) -> anyhow::Result<(String, String, Option<String>)> {
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
    // The data's digest is a journal's; a comparison keeps none.
    let data = bertqa::EvalData::new(dataset, data_label(&args.data), "", Default::default());
    let clients = connect(&args)?;
    let deployments = deployments(&args, &clients)?;
    let options = options(&args, Some(out_dir(&args).to_path_buf()));
    let compared = compare_deployments(&deployments, &data, &options)?;
    output::report(&args, session, &compared.report)
}

/// The comparison's options of the flags, its files in `output_dir`.
fn options(args: &Args, output_dir: Option<PathBuf>) -> CompareOptions {
    CompareOptions {
        output_dir,
        parallel: args.parallel,
        save_logits: args.save_logits,
        show: args.show,
        html: args.html.clone(),
        statistics: args.statistics.statistics(),
        gates: gates(args),
        stop: None,
        hooks: Some(Arc::new(super::eval::Hooks::new(true))),
    }
}

/// `--output-dir`, which a comparison of models requires (clap checks).
fn out_dir(args: &Args) -> &std::path::Path {
    args.output_dir
        .as_deref()
        .expect("--output-dir is required without --runs")
}

/// A client of each `--models` entry: every model is connected and bound first, so a
/// wrong name fails before any run. With each, its name and URL as the report gives
/// them.
fn connect(args: &Args) -> anyhow::Result<Vec<(String, String, bertqa::blocking::Client)>> {
    let mut clients = Vec::new();
    for spec in &args.models {
        let (name, url, authority) = split_model(spec, args.run.server.first_url())?;
        let mut run = args.run.clone();
        run.server = ServerArgs {
            url: vec![url.clone()],
            authority: authority
                .clone()
                .or_else(|| args.run.server.authority.clone()),
            ..args.run.server.clone()
        };
        if let Some(path) = own_tokenizer(args, &name)? {
            run.tokenizer.tokenizer = Some(path);
        }
        let client = pipeline_builder(&run, &name, "", &args.text)?
            .na_prob_thresh(args.scoring.na_prob_thresh)
            .mode::<Blocking>()
            .build()?;
        for w in client.warnings() {
            eprintln!("warning: {}", name_flags(w));
        }
        // The URL as it names the deployment in the reports.
        let url = match authority {
            Some(a) => format!("{url}?authority={a}"),
            None => url,
        };
        clients.push((name, url, client));
    }
    Ok(clients)
}

/// The deployments compared: a model of one name on two servers (one deployment against
/// another) is named with its server in the reports.
fn deployments<'a>(
    args: &Args,
    clients: &'a [(String, String, bertqa::blocking::Client)],
) -> anyhow::Result<Vec<Deployment<'a>>> {
    let names: Vec<(String, String)> = clients
        .iter()
        .map(|(n, u, _)| (n.clone(), u.clone()))
        .collect();
    clients
        .iter()
        .map(|(name, url, client)| {
            Ok(Deployment {
                name: match servers_of(&names, name) > 1 {
                    true => format!("{name}@{url}"),
                    false => name.clone(),
                },
                url: url.clone(),
                client,
                own_windows: own_tokenizer(args, name)?.is_some(),
            })
        })
        .collect()
}

/// The tokenizer `--model-tokenizer` gives model `name`: its windows are cut for its
/// run by its own rules.
fn own_tokenizer(args: &Args, name: &str) -> anyhow::Result<Option<PathBuf>> {
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
            own = Some(PathBuf::from(path));
        }
    }
    Ok(own)
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
