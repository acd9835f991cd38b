//! `bertqa eval`: the whole SQuAD evaluation against Triton (or, with `--from-logits`,
//! from saved logits without a server). Writes the reference's output files plus
//! `metrics.json` and `per_question.jsonl`, prints a report (text or `--json`, schema
//! in `schema/eval.schema.json`), writes the `--html` page, and turns the gates into
//! exit code 1.

mod output;
mod report;
mod run;
mod text;

use std::path::PathBuf;
use std::time::Instant;

use super::args::{PipelineArgs, DECODING, GATES, INPUT, MODEL, OUTPUT, RUN};
use super::common::Outcome;
use super::session::Session;

pub(crate) use output::{write_per_question, write_predictions};

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
}

/// One gate and how it went.
pub(crate) use bertqa::report::eval::GateResult as Gate;

/// Everything a finished evaluation reports.
pub(crate) use bertqa::report::eval::EvalRun as EvalReport;

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    if let Some(path) = &args.html {
        super::common::check_output_dir("--html", path)?;
    }
    // Held until the run ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(&args.output_dir)?;
    let data = run::load(&args)?;
    // The vocabulary is read only where the model needs it: not for a text model of
    // the answer contract (the server tokenizes, bertqa decodes nothing).
    let (input, mut ran) = match &args.from_logits {
        Some(path) => {
            let input = run::prepare(&args, data, true, None)?;
            let ran = run::from_logits(&args, &input, path, started)?;
            (input, ran)
        }
        None => {
            let (rt, pool, bound) = run::connect(&args)?;
            let vocabulary = bound.needs_tokenizer();
            let mut input = run::prepare(&args, data, vocabulary, bound.fixed_len())?;
            let ran = if bound.takes_text() {
                text::against_server(&args, &mut input, &rt, pool, bound, session.stop())?
            } else {
                run::against_server(&args, &mut input, &rt, pool, bound, session.stop())?
            };
            (input, ran)
        }
    };
    let failed = run::report(&args, session, &input, &mut ran)?;
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}
