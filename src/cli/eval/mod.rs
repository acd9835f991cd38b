//! `bertqa eval`: the whole SQuAD evaluation against Triton (or, with `--from-logits`,
//! from saved logits without a server). Writes the reference's output files plus
//! `metrics.json` and `per_question.jsonl`, prints a report (text or `--json`, schema
//! in `schema/eval.schema.json`), and turns the gates into exit code 1.

mod output;
mod report;
mod run;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::args::PipelineArgs;
use super::Outcome;
use crate::backend::Binding;
use crate::evaluate::Scores;
use crate::pipeline::{InferReport, Phases};

pub use output::{score_predictions, write_per_question, write_predictions};
pub(crate) use report::{inputs_line, padding_json};

/// How many ids are named when questions are listed in a report.
const FIRST_IDS: usize = 5;

/// Evaluate a model on a SQuAD file (EM/F1, throughput, latency).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// SQuAD-format file (v1.1 or v2.0).
    #[arg(long, value_name = "FILE")]
    pub data: PathBuf,
    /// Model to evaluate (not needed with --from-logits).
    #[arg(long, required_unless_present = "from_logits")]
    pub model: Option<String>,
    /// Model version (default: the server's choice).
    #[arg(long, default_value = "")]
    pub model_version: String,
    /// Where predictions.json, nbest_predictions.json, null_odds.json (v2),
    /// metrics.json and per_question.jsonl are written.
    #[arg(long, value_name = "DIR")]
    pub output_dir: PathBuf,
    /// First N questions only.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Also write every feature's raw logits to DIR/logits.bin, so answers can be
    /// decoded again with --from-logits (e.g. at best_f1_thresh) without the server.
    #[arg(long)]
    pub save_logits: bool,
    /// Decode logits saved by --save-logits instead of asking a server (same --data
    /// and window flags as the run that saved them).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub from_logits: Option<PathBuf>,
    #[command(flatten)]
    pub scoring: super::args::ScoringArgs,
    /// Gate: fail (exit 1) when exact match (percent) is below X.
    #[arg(long, value_name = "X")]
    pub min_exact: Option<f64>,
    /// Gate: fail (exit 1) when F1 (percent) is below X.
    #[arg(long, value_name = "X")]
    pub min_f1: Option<f64>,
    /// Gate: fail (exit 1) when the p99 request latency is above X milliseconds.
    #[arg(long, value_name = "X")]
    pub max_p99_ms: Option<f64>,
    /// Continue an interrupted run from the journal in --output-dir: journaled features
    /// are not sent again (without a journal: start from the beginning).
    #[arg(long, conflicts_with = "from_logits")]
    pub resume: bool,
    /// Evaluate only the I-th of N contiguous, balanced slices of the questions
    /// (1-based, e.g. 2/3); `bertqa merge` combines the shards' output directories.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::shard::Shard>,
    #[command(flatten)]
    pub run: PipelineArgs,
}

/// One gate and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The flag, e.g. `--min-f1`.
    pub flag: &'static str,
    pub threshold: f64,
    pub value: f64,
    pub passed: bool,
}

impl Gate {
    fn describe(&self) -> String {
        format!(
            "{} {}: measured {:.3}",
            self.flag, self.threshold, self.value
        )
    }
}

/// Everything a finished evaluation reports.
#[derive(Debug)]
pub struct EvalReport {
    pub data: PathBuf,
    pub url: Option<String>,
    pub binding: Option<Binding>,
    pub version_2: bool,
    pub postprocess: &'static str,
    pub batch_size: usize,
    pub concurrency: usize,
    pub questions: usize,
    pub features: u64,
    pub featureless: Vec<String>,
    pub scores: Scores,
    pub infer: Option<InferReport>,
    pub phases: Phases,
    pub wall: Duration,
    pub gates: Vec<Gate>,
    pub output_dir: PathBuf,
    pub files: Vec<String>,
    /// Retries and failures by code (`None` without a server).
    pub retries: Option<crate::backend::RetryStats>,
    /// Each endpoint's figures (empty without a server).
    pub endpoints: Vec<crate::backend::pool::EndpointReport>,
    /// NaN or infinite logits (decoded as −∞).
    pub non_finite: crate::decode::non_finite::NonFinite,
    /// The run's fingerprint (data digest, settings, model): what `merge` checks.
    pub fingerprint: Value,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let mut input = run::load(&args)?;
    let mut ran = match &args.from_logits {
        Some(path) => run::from_logits(&args, &input, path, started)?,
        None => run::against_server(&args, &mut input)?,
    };
    let failed = run::report(&args, &input, &mut ran)?;
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}
