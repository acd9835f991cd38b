//! `bertqa ask`: one or more questions about one context, through the run every model
//! takes (several windows for a long context; retries and every `--url`): the answer,
//! its score and probability, and the character span in the original context; an
//! answer-contract text model's own answer and what it said of it. Report:
//! `report::ask` (`schema/ask.schema.json`).

use std::io::Read;
use std::path::PathBuf;

use super::args::{self, PipelineArgs, SharedMemoryArg};
use super::common::{
    decode_config, feature_config, pipeline_runtime, run_config, run_tokenizer, Outcome,
};
use super::session::Session;
use bertqa::backend::text::TextAnswer;
use bertqa::decode::Prediction;
use bertqa::pipeline;
use bertqa::report::ask::{Answer, AskReport, Candidate, Decoded, Given, Latency};
use bertqa::types::Dataset;

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
    let dataset = bertqa::squad::questions_about(&context, &args.question);
    let rt = pipeline_runtime()?;
    // One pool (retries, every `--url`), one look at the model: its binding chooses
    // where the windows come from and how the answers are read.
    let (client, bound) = rt.block_on(super::common::connect_pool_and_look(
        &args.run.server,
        &args.run.net,
        &args.model,
        &args.model_version,
        &args.run.binding,
        &args.text,
    ))?;
    // The vocabulary only where the model needs it: not for the answer contract.
    let needed = bound.needs_tokenizer();
    let (tokenizer, lower_case, postprocess) =
        run_tokenizer(&args.run.tokenizer, &args.run.decode, needed)?;
    let version_2 = args.run.decode.version_2_with_negative;
    let decode = decode_config(&args.run.decode, version_2, lower_case, postprocess);
    let features = feature_config(&args.run.window, postprocess, bound.fixed_len())?;
    // A few requests gain less from shared memory than registering a region costs
    // (two more calls): `auto` sends the tensors in the messages here.
    let shared_memory = match args.run.load.shared_memory {
        SharedMemoryArg::Auto => bertqa::backend::SharedMemory::None,
        given => given.into(),
    };
    let model = bound.clone();
    let mut config = run_config(&args.run.load, &model, features, decode)?;
    config.infer.shared_memory = shared_memory;
    config.keep_features = true;
    let replies = bertqa::client::TextAnswers::new(dataset.examples.len());
    let mut run =
        pipeline::Run::new(&rt, &client, model.clone(), &dataset, &config).observer(&replies);
    if let Some(t) = &tokenizer {
        run = run.tokenizer(&t.tokenizer);
    }
    let outcome = session.stoppable(run).run()?;
    if let Some(note) = outcome.infer.padding.note(model.name()) {
        eprintln!("{}", super::flags::name_flags(&note));
    }
    let latency = &outcome.infer.latency_us;
    let latency_ms = Latency {
        max: latency.max() as f64 / 1000.0,
        mean: latency.mean() / 1000.0,
    };
    // An answer-contract model's answers are given as it said them.
    let given = bound.answers_given().then(|| bound.no_answer_probability());
    let answers: Vec<Answer> = match given {
        Some(probability) => replies
            .take()
            .into_iter()
            .zip(&args.question)
            .map(|(a, q)| Answer::Given(given_answer(q, a.unwrap_or_default(), probability)))
            .collect(),
        None => outcome
            .predictions
            .iter()
            .zip(&args.question)
            .map(|(p, q)| Answer::Decoded(decoded_answer(&dataset, p, q, args.n_best, &outcome)))
            .collect(),
    };
    let report = AskReport {
        schema: 1,
        model: model.name().to_string(),
        url: args.run.server.url.join(","),
        protocol: client.first_client().protocol().as_str(),
        contract: given.map(|_| "answer"),
        requests: given.map(|_| outcome.infer.requests),
        features: given.is_none().then_some(outcome.features),
        latency_ms,
        answers,
    };
    session.report(&report, args.run.output.json)?;
    Ok(Outcome::Success)
}

/// An answer-contract model's answer to `question` (`probability`: its no-answer
/// output is a probability, not a score).
fn given_answer(question: &str, a: TextAnswer, probability: bool) -> Given {
    Given {
        question: question.to_string(),
        no_answer: a.text.is_empty(),
        answer: a.text,
        score: a.score,
        start_char: a.start,
        end_char: a.end,
        no_answer_score: (!probability).then_some(a.no_answer),
        no_answer_probability: probability.then_some(a.no_answer),
    }
}

/// A decoded answer as the report shows it, with `k` candidates.
fn decoded_answer(
    dataset: &Dataset,
    p: &Prediction,
    question: &str,
    k: usize,
    outcome: &pipeline::RunOutcome,
) -> Decoded {
    let a = bertqa::Answer::from_prediction(p, &dataset.paragraphs[0], outcome);
    Decoded {
        question: question.to_string(),
        answer: a.text,
        no_answer: a.no_answer,
        score: a.score,
        probability: a.probability,
        start_char: a.start_char,
        end_char: a.end_char,
        null_odds: a.null_odds,
        nbest: a
            .nbest
            .into_iter()
            .take(k)
            .map(|c| Candidate {
                text: c.text,
                probability: c.probability,
                start_logit: c.start_logit,
                end_logit: c.end_logit,
            })
            .collect(),
        placeholder: a.placeholder,
    }
}
