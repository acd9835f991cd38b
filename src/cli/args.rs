//! Flag groups shared by several commands (the CLI contract, README.md "Commands").
//! Each group is flattened into the commands that need it, so a flag has one name,
//! one default and one help text everywhere.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Where the Triton server is and how to talk to it.
#[derive(Debug, Clone, Args)]
pub struct ServerArgs {
    /// Triton gRPC endpoint, HOST:PORT, with or without http:// or https://. Repeat it
    /// (or give a comma list) to spread requests over several servers (eval, ask,
    /// compare; other commands use the first).
    #[arg(
        long,
        default_value = "localhost:8001",
        env = "BERTQA_URL",
        value_delimiter = ',',
        action = clap::ArgAction::Append,
        value_name = "HOST:PORT"
    )]
    pub url: Vec<String>,

    /// Per-request deadline in milliseconds.
    #[arg(long, default_value_t = 60_000, value_name = "MS")]
    pub timeout_ms: u64,

    /// Deadline for establishing the connection, in milliseconds.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub connect_timeout_ms: u64,

    /// TLS and headers (credentials).
    #[command(flatten)]
    pub security: super::security::SecurityArgs,
}

impl ServerArgs {
    /// The first endpoint (commands that talk to one server).
    pub fn first_url(&self) -> &str {
        self.url.first().map_or("localhost:8001", String::as_str)
    }
}

/// Endpoint pool and retries of the inference path (src/backend/pool.rs, retry.rs).
#[derive(Debug, Clone, Args)]
pub struct NetArgs {
    /// Retries of a request after a transient error (UNAVAILABLE, RESOURCE_EXHAUSTED,
    /// DEADLINE_EXCEEDED, connection refused or reset), with exponential backoff and
    /// jitter; then the command fails (exit 2) with a summary.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub retries: u32,
    /// Upper bound of the backoff between retries, in milliseconds (starts at 100 ms,
    /// doubles per retry).
    #[arg(long, default_value_t = 2_000, value_name = "MS")]
    pub retry_max_backoff_ms: u64,
    /// Retry INTERNAL and other model errors too (normally deterministic: no retry).
    #[arg(long)]
    pub retry_model_errors: bool,
    /// Before starting, wait up to this many seconds for every server and the model to
    /// be ready (0: do not wait).
    #[arg(long, default_value_t = 0.0, value_name = "SECONDS")]
    pub wait_ready: f64,
    /// HTTP/2 connections per endpoint.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub connections: u32,
    /// How requests travel: `stream` keeps one ModelStreamInfer call open per connection
    /// and sends every request on it (a request answered with an error is asked again
    /// with ModelInfer, and the connection stays unary); `unary` makes one ModelInfer
    /// call per request.
    #[arg(long, value_enum, default_value_t = TransportArg::Stream, value_name = "MODE")]
    pub transport: TransportArg,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    Stream,
    Unary,
}

/// Which model, and optional overrides of the tensor binding.
#[derive(Debug, Clone, Default, Args)]
pub struct BindingArgs {
    /// Tensor that receives the token ids (default: inferred from the model).
    #[arg(long, value_name = "NAME")]
    pub input_ids: Option<String>,
    /// Tensor that receives the segment (token type) ids.
    #[arg(long, value_name = "NAME")]
    pub segment_ids: Option<String>,
    /// Tensor that receives the attention mask.
    #[arg(long, value_name = "NAME")]
    pub input_mask: Option<String>,
    /// Output tensor holding the start logits (or both, shaped [batch, seq, 2]).
    #[arg(long, value_name = "NAME")]
    pub start_logits: Option<String>,
    /// Output tensor holding the end logits.
    #[arg(long, value_name = "NAME")]
    pub end_logits: Option<String>,
}

/// Vocabulary and casing.
#[derive(Debug, Clone, Args)]
pub struct TokenizerArgs {
    /// WordPiece vocabulary, one token per line.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "vocab/vocab.txt",
        conflicts_with = "tokenizer"
    )]
    pub vocab: PathBuf,
    /// A Hugging Face tokenizer.json to use instead of --vocab.
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Lower-case and strip accents (uncased vocabularies; the default).
    #[arg(long, overrides_with = "no_lower_case")]
    pub do_lower_case: bool,
    /// Keep case and accents (cased vocabularies).
    #[arg(long, overrides_with = "do_lower_case")]
    pub no_lower_case: bool,
}

impl TokenizerArgs {
    /// The effective casing: lower case unless `--no-lower-case` was given last.
    pub fn lower_case(&self) -> bool {
        !self.no_lower_case
    }
}

/// Window geometry (spec §4).
#[derive(Debug, Clone, Args)]
pub struct WindowArgs {
    /// Tokens per feature, including the CLS token and both SEP tokens.
    #[arg(long, default_value_t = 384)]
    pub max_seq_length: usize,
    /// Step between window starts, in word pieces (the BERT meaning, not an overlap).
    #[arg(long, default_value_t = 128)]
    pub doc_stride: usize,
    /// Question word pieces kept (a prefix).
    #[arg(long, default_value_t = 64)]
    pub max_query_length: usize,
    /// Treat degenerate but valid input (empty question, whitespace-only context) as an
    /// error instead of a warning.
    #[arg(long)]
    pub strict: bool,
}

/// Post-processing rule family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Postprocess {
    /// The Google/NVIDIA run_squad rules (the reference).
    #[default]
    Nvidia,
    /// The transformers 4.x legacy port, to reproduce its numbers exactly.
    Hf,
}

/// Span decoding (spec §6).
#[derive(Debug, Clone, Args)]
pub struct DecodeArgs {
    /// Candidates kept per question (and start/end indexes considered per feature).
    #[arg(long, default_value_t = 20)]
    pub n_best_size: usize,
    /// Longest answer, in word pieces.
    #[arg(long, default_value_t = 30)]
    pub max_answer_length: usize,
    /// SQuAD 2.0 rules (no-answer allowed). Auto-on when the file's version starts with
    /// v2 or any question has is_impossible.
    #[arg(long)]
    pub version_2_with_negative: bool,
    /// v2: predict no answer when null score − best non-null score exceeds this.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub null_score_diff_threshold: f64,
    /// Post-processing rules: nvidia (reference) or hf (transformers legacy port).
    #[arg(long, value_enum, default_value_t = Postprocess::Nvidia)]
    pub postprocess: Postprocess,
}

/// Output mode.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Machine-readable JSON on stdout (versioned: "schema": 1).
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Request flow settings shared by `eval`, `ask`, `compare` and `perf`.
#[derive(Debug, Clone, Args)]
pub struct LoadArgs {
    /// Features per request (default: the model's max batch size; never above it).
    #[arg(long, value_name = "N")]
    pub batch_size: Option<usize>,
    /// Requests in flight. A full window is refilled a model batch at a time (at most
    /// half the window at once); `perf` sends each as one is answered.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub concurrency: usize,
    /// Requests sent first (copies of the first batch) and left out of every figure.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub warmup: usize,
    /// Pad every batch to --max-seq-length even when the model accepts any length
    /// (by default a dynamic-length model gets each batch padded to its longest
    /// feature, rounded up to a multiple of 8, unless its first requests, a probe of 16
    /// features padded to --max-seq-length, show that shorter padding would change
    /// answers).
    #[arg(long)]
    pub fixed_seq_len: bool,
    /// Pad each batch to its longest feature without the probe, even when the model
    /// ranks padding positions among its top start/end logits: faster, but answers may
    /// then differ from the reference, which ranks its top 20 over the whole padded
    /// sequence. A warning counts the features where padding was seen to push real
    /// positions out.
    #[arg(long, conflicts_with = "fixed_seq_len")]
    pub dynamic_seq_len: bool,
    /// How tensors travel: `system` writes the inputs into a POSIX shared memory region
    /// the server maps and has it write the logits there too (it must run on this
    /// machine and see its /dev/shm), `none` sends them in each message and answer,
    /// `auto` uses shared memory when the
    /// one --url is a loopback address and the server accepts the region (`ask`: in each
    /// message, a few requests gaining less than a region costs).
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

impl From<SharedMemoryArg> for crate::backend::SharedMemory {
    fn from(a: SharedMemoryArg) -> Self {
        match a {
            SharedMemoryArg::None => Self::None,
            SharedMemoryArg::System => Self::System,
            SharedMemoryArg::Auto => Self::Auto,
        }
    }
}

impl LoadArgs {
    /// The guard on dynamic padding (without its probe under `--dynamic-seq-len`).
    pub fn padding_guard(
        &self,
        n_best: usize,
        full_len: usize,
    ) -> Option<crate::pipeline::PaddingGuard> {
        Some(crate::pipeline::PaddingGuard {
            n_best,
            full_len,
            probe: !self.dynamic_seq_len,
            decided: None,
        })
    }
}

/// Everything a command that runs the pipeline against a server takes: request flow,
/// server, binding overrides, tokenizer, windows, decoding and output mode.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub net: NetArgs,
    #[command(flatten)]
    pub binding: BindingArgs,
    #[command(flatten)]
    pub tokenizer: TokenizerArgs,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// How v2 predictions are scored (the official evaluate-v2.0.py option).
#[derive(Debug, Clone, Args)]
pub struct ScoringArgs {
    /// v2: a question whose na-prob (null odds) is strictly above this is scored as
    /// no-answer (the official script's --na-prob-thresh).
    #[arg(
        long,
        default_value_t = 1.0,
        value_name = "X",
        allow_negative_numbers = true
    )]
    pub na_prob_thresh: f64,
}
