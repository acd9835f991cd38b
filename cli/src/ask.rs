//! `bertqa ask`: one or more questions about one context, through the run every model
//! takes (several windows for a long context; retries and every `--url`): the answer,
//! its score and probability, and the character span in the original context; an
//! answer-contract text model's own answer and what it said of it. The flags become a
//! client's settings and the report is the client's (`Client::ask_report`:
//! `report::ask`, `schema/ask.schema.json`).

use std::io::Read;
use std::path::PathBuf;

use super::args::{self, PipelineArgs};
use super::common::{pipeline_builder, pipeline_runtime, Outcome};
use super::flags::name_flags;
use super::session::Session;
use bertqa::AskOptions;

/// Ask questions about a context.
#[derive(Debug, clap::Args)]
#[command(
    mut_arg("url", |a| a.help(args::URL_SPREAD_HELP)),
    mut_arg("version_2_with_negative", |a| a.help(args::ASK_V2_HELP)),
    mut_arg("shared_memory", |a| a.help(args::ASK_SHARED_MEMORY_HELP)),
    // Accepted as by every pipeline command, but of no use here: no data file to be
    // strict about, no progress bar, and a warm-up only matters to a measured run.
    mut_arg("strict", |a| a.hide(true)),
    mut_arg("quiet", |a| a.hide(true)),
    mut_arg("warmup", |a| a.hide(true)),
)]
pub struct Args {
    /// A question; repeat for several about the same context
    #[arg(long, required = true, help_heading = args::INPUT)]
    pub question: Vec<String>,
    /// The context text (`-`: read it from stdin)
    #[arg(
        long,
        conflicts_with = "context_file",
        required_unless_present = "context_file",
        help_heading = args::INPUT
    )]
    pub context: Option<String>,
    /// Read the context from FILE (`-`: stdin)
    #[arg(long, value_name = "FILE", help_heading = args::INPUT)]
    pub context_file: Option<PathBuf>,
    /// Model to ask
    #[arg(long, help_heading = args::MODEL)]
    pub model: String,
    /// Model version (default: the server's choice)
    #[arg(long, default_value = "", hide_default_value = true, help_heading = args::MODEL)]
    pub model_version: String,
    #[command(flatten)]
    pub run: PipelineArgs,
    #[command(flatten)]
    pub text: args::TextBindingArgs,
    /// Candidate answers shown per question
    #[arg(long, default_value_t = 1, value_name = "K", help_heading = args::OUTPUT)]
    pub n_best: usize,
}

fn read_context(args: &Args) -> anyhow::Result<String> {
    let from_stdin = || -> anyhow::Result<String> {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(s)
    };
    match (&args.context, &args.context_file) {
        (Some(c), _) if c == "-" => from_stdin(),
        (Some(c), _) => Ok(c.clone()),
        (None, Some(p)) if p.as_os_str() == "-" => from_stdin(),
        (None, Some(p)) => std::fs::read_to_string(p).map_err(|e| bertqa::Error::io(p, e).into()),
        (None, None) => anyhow::bail!("give a context with --context or --context-file"),
    }
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let context = read_context(&args)?;
    let builder = pipeline_builder(&args.run, &args.model, &args.model_version, &args.text)?;
    let rt = pipeline_runtime()?;
    let client = rt.block_on(builder.build())?;
    for w in client.warnings() {
        eprintln!("warning: {}", name_flags(w));
    }
    let options = AskOptions::default();
    // Ctrl-C ends the process, and the call with it.
    let report = rt.block_on(client.ask_report(&args.question, &context, &options, args.n_best))?;
    for note in &report.notes {
        eprintln!("{}", name_flags(note));
    }
    session.report(&report, args.run.output.json)?;
    Ok(Outcome::Success)
}
