//! The command line: parses flags once into each command's arguments, calls the
//! library, renders results, and maps outcomes to exit codes
//! (README.md, "Exit codes"): 0 success, 1 completed but a gate failed, 2 usage, input,
//! connection, server or model error. A broken pipe on stdout exits 0.

pub mod args;
mod ask;
mod common;
mod compare;
mod eval;
mod features;
mod merge;
mod models;
mod perf;
mod resume;
mod score;
pub mod security;

use std::io::Write;

use clap::{Parser, Subcommand};

/// How a command that ran to completion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Everything passed.
    Success,
    /// The run completed but these gates failed (each named, e.g. `--min-f1 90: f1 85.2`).
    GateFailed(Vec<String>),
}

/// bertqa: BERT question answering (SQuAD) against NVIDIA Triton Inference Server.
#[derive(Debug, Parser)]
#[command(name = "bertqa", version, about, long_about = None)]
pub struct Cli {
    /// More detail in error messages.
    #[arg(long, short, global = true)]
    pub verbose: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Server, model repository, and one model's tensors and inferred binding.
    Models(Box<models::Args>),
    /// Ask questions about a context: answer, score, probability, character span.
    Ask(Box<ask::Args>),
    /// Compare deployments (e.g. TorchScript vs ONNX): metrics, speed, agreement,
    /// logit differences.
    Compare(Box<compare::Args>),
    /// Evaluate a model on a SQuAD file: EM/F1, throughput, latency, output files.
    Eval(Box<eval::Args>),
    /// Build the features (windows) of a SQuAD file; one JSON line per feature.
    Features(features::Args),
    /// Combine the output directories of `eval --shard I/N` runs into one run's files
    /// and metrics.
    Merge(merge::Args),
    /// Load sweep in the manner of perf_analyzer with real features: throughput,
    /// latency percentiles, server-side breakdown, CSV/JSON/SVG exports.
    Perf(Box<perf::Args>),
    /// Score a predictions file against a SQuAD file (the official evaluators).
    Score(score::Args),
}

/// Entry point of the `bertqa` binary: the process's exit status.
pub fn main() -> u8 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let verbose = cli.verbose;
    let result = match cli.command {
        Command::Models(a) => models::run(*a),
        Command::Ask(a) => ask::run(*a),
        Command::Compare(a) => compare::run(*a),
        Command::Eval(a) => eval::run(*a),
        Command::Features(a) => features::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Perf(a) => perf::run(*a),
        Command::Score(a) => score::run(a),
    };
    match result {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::GateFailed(gates)) => {
            for g in gates {
                eprintln!("gate failed: {g}");
            }
            1
        }
        Err(e) if is_broken_pipe(&e) => 0,
        Err(e) => {
            if verbose {
                eprintln!("error: {e:?}");
            } else {
                // One line: the error and its causes joined.
                let mut line = e.to_string();
                for cause in e.chain().skip(1) {
                    let c = cause.to_string();
                    if !line.contains(&c) {
                        line.push_str(": ");
                        line.push_str(&c);
                    }
                }
                eprintln!("error: {}", line.replace('\n', " "));
            }
            2
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes `text` to stdout; a closed pipe is reported as an io error that
/// [`main`] turns into a clean exit.
pub(crate) fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Builds a multi-thread tokio runtime (a worker per core) for commands that talk to a
/// server.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The runtime of an evaluation pipeline (`eval`, `ask`, `compare` one model after
/// another): a current-thread runtime, so that the requests, their connection and the
/// sender all run on the thread that drives it, besides the pipeline's own feature and
/// decoder threads. A worker thread for the requests handed every answer from thread to
/// thread once more: the client used about 3% more CPU on SQuAD-dev-sized at the
/// defaults (three rounds of alternating runs, 100 pairs in all: median differences of
/// 9, −1 and 8 ms of about 250; with two workers, 10% more again), for no more
/// throughput, as one thread sends far more requests per second than a GPU server
/// answers. Interrupts are watched by a thread of their own
/// ([`resume::stop_on_signals`]), so they are seen while this runtime is not driven.
pub(crate) fn pipeline_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The runtime of pipelines run side by side from several threads (`compare
/// --parallel`): one worker thread drives every model's requests and connections.
pub(crate) fn shared_pipeline_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
