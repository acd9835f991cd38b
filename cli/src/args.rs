//! Flag groups shared by several commands (the CLI contract, README.md "Commands").
//! Each group is flattened into the commands that need it, so a flag has one name and
//! one default everywhere, under one help heading. A command whose meaning of a flag
//! differs rewords its help line (`mut_arg` on the command's `Args`), and one that
//! accepts a flag without acting on it hides it.
//!
//! Help lines say what a flag means to the user, in one line; how it works belongs in
//! docs/.

use std::path::PathBuf;

use bertqa::features::FeatureConfig;
use clap::{Args, ValueEnum};

pub(crate) use super::heading::*;

/// `--url`'s help for the commands that spread requests over every endpoint given.
pub(crate) const URL_SPREAD_HELP: &str =
    "Triton endpoint; repeat it (or give a comma list) to use several servers";

/// Where the Triton server is and how to talk to it.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = SERVER)]
pub struct ServerArgs {
    /// Server endpoint: HOST:PORT or http(s)://HOST[:PORT][/PATH] (a path: HTTP only)
    #[arg(
        long,
        default_value = "localhost:8001",
        default_value_if("protocol", "http", Some("localhost:8000")),
        env = "BERTQA_URL",
        value_delimiter = ',',
        action = clap::ArgAction::Append,
        value_name = "HOST:PORT"
    )]
    pub url: Vec<String>,

    /// Triton's gRPC or HTTP/REST protocol (http: port 8000 by default)
    #[arg(long, value_enum, default_value_t = ProtocolArg::Grpc, value_name = "PROTOCOL")]
    pub protocol: ProtocolArg,

    /// Host name an ingress routes by: gRPC's :authority, HTTP's Host (default: the URL's)
    #[arg(long, value_name = "NAME")]
    pub authority: Option<String>,

    /// Deadline of each request, in milliseconds
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub timeout_ms: u64,

    /// Deadline for connecting, in milliseconds
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub connect_timeout_ms: u64,

    /// TLS and headers (credentials).
    #[command(flatten)]
    pub security: super::security::SecurityArgs,
}

/// `--protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    Grpc,
    Http,
}

impl From<ProtocolArg> for bertqa::backend::Protocol {
    fn from(p: ProtocolArg) -> Self {
        match p {
            ProtocolArg::Grpc => Self::Grpc,
            ProtocolArg::Http => Self::Http,
        }
    }
}

impl ServerArgs {
    /// The first endpoint (commands that talk to one server).
    pub fn first_url(&self) -> &str {
        self.url.first().map_or("localhost:8001", String::as_str)
    }
}

/// Endpoint pool and retries of the inference path.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = SERVER)]
pub struct NetArgs {
    /// Retries after a transient error, before failing
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub retries: u32,
    /// Longest wait between two retries, in milliseconds
    #[arg(long, default_value_t = 2_000, value_name = "MS")]
    pub retry_max_backoff_ms: u64,
    /// Retry model errors too (otherwise not: they usually repeat)
    #[arg(long)]
    pub retry_model_errors: bool,
    /// Wait this long for servers and model to be ready
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub wait_ready: f64,
    /// Connections per server
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub connections: u32,
    /// One gRPC stream per connection, or one call per request
    #[arg(
        long,
        value_enum,
        default_value_t = TransportArg::Stream,
        default_value_if("protocol", "http", Some("unary")),
        value_name = "MODE"
    )]
    pub transport: TransportArg,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Stream,
    Unary,
}

/// Overrides of the tensor binding bertqa infers from the model.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = MODEL)]
pub struct BindingArgs {
    /// Input tensor of the token ids (default: inferred)
    #[arg(long, value_name = "NAME")]
    pub input_ids: Option<String>,
    /// Input tensor of the segment (token type) ids
    #[arg(long, value_name = "NAME")]
    pub segment_ids: Option<String>,
    /// Input tensor of the attention mask
    #[arg(long, value_name = "NAME")]
    pub input_mask: Option<String>,
    /// Output tensor of the start logits (or both, [batch, seq, 2])
    #[arg(long, value_name = "NAME")]
    pub start_logits: Option<String>,
    /// Output tensor of the end logits
    #[arg(long, value_name = "NAME")]
    pub end_logits: Option<String>,
}

/// Vocabulary and casing.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = INPUT)]
pub struct TokenizerArgs {
    /// WordPiece vocabulary, one token per line
    #[arg(
        long,
        value_name = "PATH",
        default_value = "vocab/vocab.txt",
        conflicts_with = "tokenizer"
    )]
    pub vocab: PathBuf,
    /// Hugging Face fast tokenizer instead of --vocab: a tokenizer.json, or a folder as
    /// save_pretrained writes it
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Lower-case and strip accents, for uncased vocabularies (the default)
    #[arg(long, overrides_with = "no_lower_case")]
    pub do_lower_case: bool,
    /// Keep case and accents, for cased vocabularies
    #[arg(long, overrides_with = "do_lower_case")]
    pub no_lower_case: bool,
}

impl TokenizerArgs {
    /// The effective casing: lower case unless `--no-lower-case` was given last.
    pub fn lower_case(&self) -> bool {
        !self.no_lower_case
    }
}

/// Window geometry (algorithm §4).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = INPUT)]
pub struct WindowArgs {
    /// Tokens per window, special tokens included [default: the model's fixed sequence
    /// length, else 384]
    #[arg(long)]
    pub max_seq_length: Option<usize>,
    /// Step between window starts, in word pieces (run-qa: the overlap of windows, in
    /// tokens)
    #[arg(long, default_value_t = 128)]
    pub doc_stride: usize,
    /// Word pieces of a question kept; the rest is cut (run-qa keeps it whole)
    #[arg(long, default_value_t = 64)]
    pub max_query_length: usize,
    /// Fail on an empty question or a blank context instead of warning
    #[arg(long)]
    pub strict: bool,
}

impl WindowArgs {
    /// `--max-seq-length`, else the model's fixed sequence length (`model`), else 384.
    pub fn max_seq_length(&self, model: Option<usize>) -> usize {
        self.max_seq_length
            .or(model)
            .unwrap_or(FeatureConfig::default().max_seq_length)
    }
}

/// Post-processing rule family: `nvidia`, the Google/NVIDIA run_squad rules (the
/// reference); `hf`, the transformers 4.x legacy port, to reproduce its numbers exactly;
/// `run-qa`, transformers' run_qa example (its windows and its post-processing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Postprocess {
    Nvidia,
    Hf,
    RunQa,
}

impl From<Postprocess> for bertqa::decode::Postprocess {
    fn from(p: Postprocess) -> Self {
        match p {
            Postprocess::Nvidia => bertqa::decode::Postprocess::Nvidia,
            Postprocess::Hf => bertqa::decode::Postprocess::Hf,
            Postprocess::RunQa => bertqa::decode::Postprocess::RunQa,
        }
    }
}

/// `--version-2-with-negative`'s help for `ask`, which reads no file.
pub(crate) const ASK_V2_HELP: &str = "SQuAD 2.0 rules: the answer may be that there is none";

/// Span decoding (algorithm §6).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = DECODING)]
pub struct DecodeArgs {
    /// Candidate answers kept per question
    #[arg(long, default_value_t = 20)]
    pub n_best_size: usize,
    /// Longest answer, in word pieces
    #[arg(long, default_value_t = 30)]
    pub max_answer_length: usize,
    /// SQuAD 2.0 rules (no answer allowed); on by itself for a v2 file
    #[arg(long)]
    pub version_2_with_negative: bool,
    /// SQuAD 2.0: no answer when its score tops the best answer's by more than this
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub null_score_diff_threshold: f64,
    /// Windows and answer rules: nvidia (run_squad, the reference), hf (transformers'
    /// legacy port) or run-qa (transformers' run_qa example) [default: run-qa for a
    /// tokenizer that is not WordPiece, else nvidia]
    #[arg(long, value_enum)]
    pub postprocess: Option<Postprocess>,
}

/// Output mode.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = OUTPUT)]
pub struct OutputArgs {
    /// Machine-readable JSON on stdout ("schema": 1)
    #[arg(long)]
    pub json: bool,
    /// No progress bar
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--shared-memory`'s help for `ask`, whose few requests gain less than a region costs.
pub(crate) const ASK_SHARED_MEMORY_HELP: &str =
    "Tensors in shared memory, for a server on this machine (auto: no, for ask)";

/// Request flow settings shared by `eval`, `ask`, `compare` and `perf`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = RUN)]
pub struct LoadArgs {
    /// Windows per request (default and most: the model's max batch size)
    #[arg(long, value_name = "N")]
    pub batch_size: Option<usize>,
    /// Requests in flight
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub concurrency: usize,
    /// Requests sent first and left out of every figure
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup: usize,
    /// Pad every window to --max-seq-length, whatever the model accepts
    #[arg(long)]
    pub fixed_seq_len: bool,
    /// Pad to the longest window of each batch even if answers change (faster)
    #[arg(long, conflicts_with = "fixed_seq_len")]
    pub dynamic_seq_len: bool,
    /// Tensors in shared memory, for a server on this machine (auto: when it can)
    #[arg(long, value_enum, default_value_t = SharedMemoryArg::Auto, value_name = "MODE")]
    pub shared_memory: SharedMemoryArg,
}

/// `--shared-memory` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SharedMemoryArg {
    None,
    System,
    Auto,
}

impl From<SharedMemoryArg> for bertqa::backend::SharedMemory {
    fn from(a: SharedMemoryArg) -> Self {
        match a {
            SharedMemoryArg::None => Self::None,
            SharedMemoryArg::System => Self::System,
            SharedMemoryArg::Auto => Self::Auto,
        }
    }
}

impl LoadArgs {
    /// The request flow these flags ask for.
    pub fn load(&self) -> bertqa::pipeline::Load {
        bertqa::pipeline::Load {
            batch_size: self.batch_size,
            concurrency: self.concurrency,
            warmup: self.warmup,
            fixed_seq_len: self.fixed_seq_len,
            dynamic_seq_len: self.dynamic_seq_len,
            shared_memory: self.shared_memory.into(),
        }
    }
}

/// Everything a command that runs the pipeline against a server takes: tokenizer,
/// windows, binding overrides, server, decoding, request flow and output mode (in the
/// order of their help headings).
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub binding: BindingArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// How v2 predictions are scored (the official evaluate-v2.0.py option). No heading of
/// its own: `eval` and `compare` list it with decoding, `score` and `merge` with scoring.
#[derive(Debug, Clone, Args)]
pub struct ScoringArgs {
    /// SQuAD 2.0: score a question as unanswered when its no-answer odds exceed X
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "X",
        allow_negative_numbers = true
    )]
    pub na_prob_thresh: f64,
}

/// The server's Prometheus metrics through a run (`perf` reads them from Triton by
/// default, `eval` only when given `--metrics-url`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = METRICS)]
pub struct MetricsArgs {
    /// Prometheus endpoint to read (default for Triton: its host, port 8002); repeat for
    /// several servers, whose figures are then added up
    #[arg(long, value_name = "URL", action = clap::ArgAction::Append)]
    pub metrics_url: Vec<String>,
    /// Read no metrics
    #[arg(long, conflicts_with = "metrics_url")]
    pub no_metrics: bool,
    /// Read the metrics every this many milliseconds
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub metrics_interval_ms: u64,
}

/// The tensors of a model that takes text (BYTES question and context), by name.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = MODEL)]
pub struct TextBindingArgs {
    /// Text model: the input that takes the question
    #[arg(long, value_name = "NAME")]
    pub question_input: Option<String>,
    /// Text model: the input that takes the context
    #[arg(long, value_name = "NAME")]
    pub context_input: Option<String>,
    /// Text model: the output that holds the answer (the answer contract)
    #[arg(long, value_name = "NAME")]
    pub answer_output: Option<String>,
    /// Text model: the output of token offsets [windows, seq, 2] (the logits contract)
    #[arg(long, value_name = "NAME")]
    pub offsets_output: Option<String>,
}

impl TextBindingArgs {
    /// The names given, with `--start-logits` and `--end-logits` of the token flags.
    pub(crate) fn overrides(&self, tokens: &BindingArgs) -> bertqa::backend::text::TextOverrides {
        bertqa::backend::text::TextOverrides {
            question_input: self.question_input.clone(),
            context_input: self.context_input.clone(),
            answer_output: self.answer_output.clone(),
            offsets_output: self.offsets_output.clone(),
            start_logits: tokens.start_logits.clone(),
            end_logits: tokens.end_logits.clone(),
        }
    }
}

/// How a load level is measured (`perf`, `tune`): windows and the stability rule.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = RUN)]
pub struct MeasureArgs {
    /// Measure in windows of this many milliseconds (the default: perf 5000, tune 1000)
    #[arg(long, value_name = "MS", conflicts_with = "measurement_request_count")]
    pub measurement_interval_ms: Option<u64>,
    /// Measure in windows of this many answered requests instead
    #[arg(long, value_name = "N")]
    pub measurement_request_count: Option<u64>,
    /// perf: a level is stable when its last 3 windows agree within this percentage
    /// (tune ends a level by its own rule: clearly over the budget, clearly below the
    /// best so far, or its throughput known within 5%)
    #[arg(long, default_value_t = 10.0, value_name = "PCT")]
    pub stability_percentage: f64,
    /// Most windows per level before it is reported unstable (perf and tune)
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub max_trials: usize,
}

impl MeasureArgs {
    /// The measurement window (perf's default), once the flags are checked.
    pub(crate) fn window(&self) -> anyhow::Result<bertqa::perf::Window> {
        self.window_or(5000)
    }

    /// The measurement window, `default_ms` long unless the flags say otherwise.
    pub(crate) fn window_or(&self, default_ms: u64) -> anyhow::Result<bertqa::perf::Window> {
        use bertqa::perf::Window;
        let window = match (self.measurement_request_count, self.measurement_interval_ms) {
            (Some(0), _) => anyhow::bail!("--measurement-request-count must be at least 1"),
            (Some(n), _) => Window::Count(n),
            (None, Some(0)) => anyhow::bail!("--measurement-interval-ms must be at least 1"),
            (None, ms) => Window::Time(std::time::Duration::from_millis(ms.unwrap_or(default_ms))),
        };
        if !(self.stability_percentage > 0.0 && self.stability_percentage.is_finite()) {
            anyhow::bail!(
                "--stability-percentage {} must be above 0",
                self.stability_percentage
            );
        }
        if self.max_trials < 3 {
            anyhow::bail!(
                "--max-trials {} is below 3 (the stability rule compares the last 3 windows)",
                self.max_trials
            );
        }
        Ok(window)
    }
}

impl Default for MeasureArgs {
    /// The flags' defaults.
    fn default() -> Self {
        MeasureArgs {
            measurement_interval_ms: None,
            measurement_request_count: None,
            stability_percentage: 10.0,
            max_trials: 10,
        }
    }
}

impl Default for MetricsArgs {
    /// The flags' defaults.
    fn default() -> Self {
        MetricsArgs {
            metrics_url: Vec::new(),
            no_metrics: false,
            metrics_interval_ms: 1000,
        }
    }
}

/// Checks `--percentile`.
pub(crate) fn check_percentile(p: f64) -> anyhow::Result<()> {
    if !(p > 0.0 && p <= 100.0) {
        anyhow::bail!("--percentile {p} must be above 0 and at most 100");
    }
    Ok(())
}

/// How the intervals and p-values are drawn (compare's, and eval's slices').
#[derive(Debug, Clone, clap::Args)]
pub struct StatisticsArgs {
    /// Bootstrap resamples of the questions for each interval (in compare, also the
    /// rounds of F1's randomization test)
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub bootstrap: u64,
    /// Seed of the resampling (the same seed gives the same intervals on every machine)
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Coverage of the intervals, between 0 and 1
    #[arg(long, default_value_t = 0.95, value_name = "C", value_parser = confidence)]
    pub confidence: f64,
}

impl StatisticsArgs {
    pub(crate) fn statistics(&self) -> bertqa::compare::Statistics {
        bertqa::compare::Statistics {
            rounds: self.bootstrap as usize,
            seed: self.seed,
            confidence: self.confidence,
        }
    }
}

fn confidence(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        Ok(_) => Err("give a fraction between 0 and 1 (0.95 for 95%)".into()),
        Err(e) => Err(e.to_string()),
    }
}
