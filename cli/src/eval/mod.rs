//! `bertqa eval`: the whole SQuAD evaluation against Triton (or, with `--from-logits`,
//! from saved logits without a server). Writes the reference's output files plus
//! `metrics.json` and `per_question.jsonl`, prints a report (text or `--json`, schema
//! in `schema/eval.schema.json`), writes the `--html` page, and turns the gates into
//! exit code 1.

mod progress;

pub(crate) use progress::Hooks;

use std::path::PathBuf;
use std::sync::Arc;

use super::args::{PipelineArgs, DECODING, GATES, INPUT, MODEL, OUTPUT, RUN};
use super::common::{data_label, load_data_digest, Outcome};
use super::errors::{library_reason, Classified};
use super::flags::name_flags;
use super::session::Session;
use bertqa::report::{Format, Render as _};
use bertqa::{EvalData, EvalOptions, Evaluation};

/// Evaluate a model on a SQuAD file (EM/F1, throughput, latency).
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("url", |a| a.help(super::args::URL_SPREAD_HELP)),
    // Read only when --metrics-url is given.
    mut_arg("no_metrics", |a| a.hide(true)),
    mut_arg("metrics_url", |a| a.help(
        "Prometheus endpoint to read through the run (Triton's: host:8002); repeat for several"
    )),
)]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = INPUT, required = true, action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,
    /// First N questions only
    #[arg(long, value_name = "N", help_heading = INPUT)]
    pub limit: Option<usize>,
    /// Decode logits saved by --save-logits instead of asking a server
    #[arg(long, value_name = "FILE", conflicts_with = "model", help_heading = INPUT)]
    pub from_logits: Option<PathBuf>,
    /// Model to evaluate (not with --from-logits)
    #[arg(long, required_unless_present = "from_logits", help_heading = MODEL)]
    pub model: Option<String>,
    /// Model version (default: the server's choice)
    #[arg(long, default_value = "", hide_default_value = true, help_heading = MODEL)]
    pub model_version: String,
    #[command(flatten)]
    pub text: super::args::TextBindingArgs,
    #[command(flatten)]
    pub run: PipelineArgs,
    #[command(flatten)]
    pub metrics: super::args::MetricsArgs,
    #[command(flatten, next_help_heading = DECODING)]
    pub scoring: super::args::ScoringArgs,
    /// Continue an interrupted run from the journal in --output-dir
    #[arg(long, conflicts_with = "from_logits", help_heading = RUN)]
    pub resume: bool,
    /// Evaluate only the I-th of N equal slices of the questions (see `bertqa merge`)
    #[arg(long, value_name = "I/N", help_heading = RUN)]
    pub shard: Option<bertqa::shard::Shard>,
    /// Directory of the answers, metrics.json and per_question.jsonl
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub output_dir: PathBuf,
    /// Also save every window's logits (DIR/logits.bin), for --from-logits
    #[arg(long, help_heading = OUTPUT)]
    pub save_logits: bool,
    /// Write a self-contained HTML report here (scores, latency, worst questions)
    #[arg(long, value_name = "FILE", help_heading = OUTPUT)]
    pub html: Option<PathBuf>,
    /// Exit 1 when exact match (percent) is below X
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub min_exact: Option<f64>,
    /// Exit 1 when F1 (percent) is below X
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub min_f1: Option<f64>,
    /// Exit 1 when the p99 request latency is above X milliseconds
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub max_p99_ms: Option<f64>,
    #[command(flatten, next_help_heading = super::args::STATISTICS)]
    pub statistics: super::args::StatisticsArgs,
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    if let Some(path) = &args.html {
        super::common::check_output_dir("--html", path)?;
    }
    // Held until the run ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(&args.output_dir)?;
    let data = load(&args)?;
    let hooks = Arc::new(progress::Hooks::new(
        args.run.output.quiet || args.run.output.json,
    ));
    let mut options = options(&args, hooks.clone());
    let evaluated = match &args.from_logits {
        Some(path) => builder(&args)?.evaluate_saved(path, &data, &options),
        None => {
            let client = builder(&args)?
                .mode::<bertqa::client::Blocking>()
                .io_thread(false)
                .build()?;
            for w in client.warnings() {
                eprintln!("warning: {}", name_flags(w));
            }
            options.stop = Some(progress::stop_on_signals(hooks)?);
            client.evaluate_with(&data, &options)
        }
    };
    let evaluation = evaluated.map_err(|e| match e {
        bertqa::Error::Incomplete { summary, cause } => {
            Classified::error(cause.as_deref().map(library_reason), name_flags(&summary))
        }
        e => e.into(),
    })?;
    let failed = report(&args, session, &evaluation)?;
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}

/// Reads the data (the shard of it asked for); the output directory is `run`'s, held by
/// then.
fn load(args: &Args) -> anyhow::Result<EvalData> {
    if args.resume
        && args
            .data
            .iter()
            .any(|p| p.as_os_str() == bertqa::data::STDIN)
    {
        anyhow::bail!(
            "--resume cannot continue a run on standard input (--data -): its content may \
             differ; save it to a file"
        );
    }
    let (dataset, sha256, format) =
        load_data_digest(&args.data, args.run.window.strict, args.limit)?;
    let mut data = EvalData::new(dataset, data_label(&args.data), sha256, format);
    if let Some(n) = args.limit {
        data = data.limit(n);
    }
    if let Some(shard) = args.shard {
        data = data.shard(shard)?;
    }
    Ok(data)
}

/// The client's settings of the flags (`--from-logits`: the tokenizer, window and
/// decoding ones are read).
fn builder(args: &Args) -> bertqa::Result<bertqa::ClientBuilder> {
    let model = args.model.as_deref().unwrap_or_default();
    Ok(
        super::common::pipeline_builder(&args.run, model, &args.model_version, &args.text)?
            .na_prob_thresh(args.scoring.na_prob_thresh),
    )
}

/// The evaluation's options of the flags.
fn options(args: &Args, hooks: Arc<progress::Hooks>) -> EvalOptions {
    let mut options = EvalOptions::new(&args.output_dir);
    options.resume = args.resume;
    options.save_logits = args.save_logits;
    options.html = args.html.clone();
    options.min_exact = args.min_exact;
    options.min_f1 = args.min_f1;
    options.max_p99_ms = args.max_p99_ms;
    options.metrics_urls = args.metrics.metrics_url.clone();
    options.metrics_interval = std::time::Duration::from_millis(args.metrics.metrics_interval_ms);
    options.hooks = Some(hooks);
    options.statistics = args.statistics.statistics();
    options
}

/// The warnings a finished run gives, the report (stdout, or the host's value) and the
/// gates that failed.
fn report(
    args: &Args,
    session: &mut Session,
    evaluation: &Evaluation,
) -> anyhow::Result<Vec<String>> {
    let mut report = evaluation.to_report();
    let model = report.binding.as_ref().map(|b| b.name().to_string());
    if let (Some(infer), Some(model)) = (&report.infer, &model) {
        // The text report says so in a sentence of its own.
        if let Some(w) = infer
            .client_bound_warning()
            .filter(|_| args.run.output.json)
        {
            eprintln!("warning: {w}");
        }
        if let Some(note) = infer.padding.note(model) {
            eprintln!("{}", name_flags(&note));
        }
    }
    if let Some((_, m)) = &report.server_metrics {
        for (_, w) in m.troubles() {
            eprintln!("warning: {w}");
        }
    }
    let nf = report.non_finite;
    if nf.values > 0 {
        eprintln!(
            "warning: {} NaN or infinite logits in {} features{} (treated as -inf for span choice)",
            nf.values,
            nf.features,
            model
                .map(|m| format!(" from model {m:?}"))
                .unwrap_or_default()
        );
    }
    let json = report.render(Format::Json);
    // The text lists metrics.json among the outputs; the document lists the files
    // written before it.
    report.files.push("metrics.json".into());
    let format = session.format(args.run.output.json);
    session.print(|| match format {
        Format::Json => json,
        text => name_flags(&report.render(text)),
    })?;
    Ok(evaluation.failed_gates())
}
