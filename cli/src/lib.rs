//! The command line: parses flags once into each command's arguments, calls the
//! library, renders results, and maps outcomes to exit codes
//! (README.md, "Exit codes"): 0 success, 1 completed but a gate failed, 2 usage, input,
//! connection, server or model error. A broken pipe on stdout exits 0.
//!
//! Each command's help lists only the flags that act on it, under headings
//! ([`args`]); `cli/tests/it/help.rs` compares every command's `--help` with tests/help/.

mod args;
mod ask;
mod common;
mod compare;
pub mod embed;
mod errors;
mod eval;
mod features;
mod flags;
mod heading;
mod merge;
mod metrics;
mod models;
mod outdir;
mod perf;
mod resume;
mod score;
mod security;
mod session;
mod tune;

use clap::{Parser, Subcommand};

use common::Outcome;

/// bertqa: BERT question answering (SQuAD) against NVIDIA Triton Inference Server.
#[derive(Debug, Parser)]
#[command(name = "bertqa", version, about, long_about = None)]
pub struct Cli {
    /// More detail in errors (causes, context) and in eval's report
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
    /// Compare deployments of a model, or finished runs: metrics, speed, agreement, logit
    /// differences, and whether the differences are real (intervals, tests, flips).
    Compare(Box<compare::Args>),
    /// Evaluate a model on a SQuAD file: EM/F1, throughput, latency, output files.
    Eval(Box<eval::Args>),
    /// Build the features (windows) of a SQuAD file; one JSON line per feature.
    Features(features::Args),
    /// Combine the outputs of `eval --shard I/N` runs into one run's files and metrics.
    Merge(merge::Args),
    /// Load sweep in the manner of perf_analyzer: throughput and latency per load level.
    Perf(Box<perf::Args>),
    /// Score a predictions file against a SQuAD file (the official evaluators).
    Score(score::Args),
    /// Find the model configuration that serves best within a latency budget (Triton,
    /// explicit model-control mode); the original is always put back.
    Tune(Box<tune::Args>),
}

/// Entry point of the `bertqa` binary: the process's exit status.
pub fn main() -> u8 {
    main_with_args(std::env::args_os())
}

/// The `bertqa` command line over `args` (the program's name first), printing as the
/// binary does: its exit status. The Python package's `bertqa` command calls this.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    let verbose = cli.verbose;
    let context = if verbose {
        errors::context(&cli.command)
    } else {
        Vec::new()
    };
    match execute(cli, &mut session::Session::binary(verbose)) {
        Ok(Outcome::Success) => 0,
        Ok(Outcome::GateFailed(gates)) => {
            for g in gates {
                eprintln!("gate failed: {g}");
            }
            1
        }
        Err(e) => {
            let code = errors::exit_code(&e);
            if code != 0 {
                eprintln!("{}", errors::render(&e, verbose, &context));
            }
            code
        }
    }
}

/// Runs the parsed command in `session`.
fn execute(cli: Cli, session: &mut session::Session) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Models(a) => models::run(*a, session),
        Command::Ask(a) => ask::run(*a, session),
        Command::Compare(a) => compare::run(*a, session),
        Command::Eval(a) => eval::run(*a, session),
        Command::Features(a) => features::run(a),
        Command::Merge(a) => merge::run(a, session),
        Command::Perf(a) => perf::run(*a, session),
        Command::Score(a) => score::run(a, session),
        Command::Tune(a) => tune::run(*a, session),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
