//! `bertqa ask`: one or more questions about one context, through the run every model
//! takes (several windows for a long context; retries and every `--url`): the answer,
//! its score and probability, and the character span in the original context; an
//! answer-contract text model's own answer and what it said of it. Report:
//! `report::ask` (`schema/ask.schema.json`).

use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::args::{self, PipelineArgs, SharedMemoryArg};
use super::common::{
    decode_config, feature_config, model_padding, pipeline_runtime, print_stdout, report_format,
    run_config, run_config_for_text, run_tokenizer, Bound, Outcome,
};
use bertqa::backend::text::{TextAnswer, TextReply};
use bertqa::backend::{Contract, Model};
use bertqa::decode::Prediction;
use bertqa::pipeline::{self, RunObserver};
use bertqa::report::ask::{Answer, AskReport, Candidate, Decoded, Given, Latency};
use bertqa::report::Render as _;
use bertqa::types::{Dataset, Paragraph};

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

/// The character span `[start, end)` (code points) of `text` in the context, found
/// through the words the answer came from. `None` when the text cannot be located.
pub(crate) fn char_span(
    paragraph: &Paragraph,
    first_word: usize,
    last_word: usize,
    text: &str,
) -> Option<(usize, usize)> {
    if text.is_empty() || first_word > last_word || last_word >= paragraph.doc_tokens.len() {
        return None;
    }
    // Code-point offset of each word's first character.
    let mut word_start = vec![usize::MAX; paragraph.doc_tokens.len()];
    let mut prev = -1i32;
    for (i, &w) in paragraph.char_to_word_offset().iter().enumerate() {
        if w != prev && w >= 0 {
            word_start[w as usize] = i;
            prev = w;
        }
    }
    // The reference's orig_text: the words joined by single spaces; the final text is
    // a substring of it.
    let mut joined: Vec<(char, usize)> = Vec::new();
    let words = paragraph.doc_tokens.range(first_word..=last_word);
    for (i, (word, &start)) in words.zip(&word_start[first_word..=last_word]).enumerate() {
        if i > 0 {
            joined.push((' ', usize::MAX));
        }
        for (k, c) in word.chars().enumerate() {
            joined.push((c, start + k));
        }
    }
    let target: Vec<char> = text.chars().collect();
    let at = joined
        .windows(target.len())
        .position(|win| win.iter().map(|(c, _)| *c).eq(target.iter().copied()))?;
    let start = joined[at].1;
    let end = joined[at + target.len() - 1].1;
    (start != usize::MAX && end != usize::MAX).then_some((start, end + 1))
}

pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
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
    let needed = !matches!(&bound, Bound::Text(b) if matches!(b.contract, Contract::Answer { .. }));
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
    let (model, mut config) = match &bound {
        Bound::Tokens(binding) => {
            let padding = model_padding(&args.run.load, binding, features.max_seq_length);
            let config = run_config(&args.run.load, binding, features, decode, padding)?;
            (Model::from(binding.clone()), config)
        }
        Bound::Text(binding) => {
            let binding = Arc::new(binding.clone());
            let config = run_config_for_text(&args.run.load, &binding, features, decode);
            (Model::Text(binding), config)
        }
    };
    config.infer.shared_memory = shared_memory;
    config.keep_features = true;
    let replies = Replies::new(dataset.examples.len());
    let mut run =
        pipeline::Run::new(&rt, &client, model.clone(), &dataset, &config).observer(&replies);
    if let Some(t) = &tokenizer {
        run = run.tokenizer(&t.tokenizer);
    }
    let outcome = super::host::stoppable(run).run()?;
    if let Some(note) = outcome.infer.padding.note(model.name()) {
        eprintln!("{}", super::flags::name_flags(&note));
    }
    let latency = &outcome.infer.latency_us;
    let latency_ms = Latency {
        max: latency.max() as f64 / 1000.0,
        mean: latency.mean() / 1000.0,
    };
    let given = match &bound {
        Bound::Text(b) => match &b.contract {
            Contract::Answer { no_answer, .. } => {
                Some(no_answer.as_ref().is_some_and(|n| n.probability))
            }
            Contract::Logits { .. } => None,
        },
        Bound::Tokens(_) => None,
    };
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
    print_stdout(&report.render(report_format(args.run.output.json)))?;
    Ok(Outcome::Success)
}

/// What an answer-contract model said of each question (its score, no-answer output
/// and characters are the report's, beyond the prediction).
struct Replies(Mutex<Vec<Option<TextAnswer>>>);

impl Replies {
    fn new(questions: usize) -> Self {
        Replies(Mutex::new(vec![None; questions]))
    }

    fn take(&self) -> Vec<Option<TextAnswer>> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl RunObserver for Replies {
    fn on_reply(&self, example_index: usize, reply: &TextReply) -> bertqa::Result<()> {
        if let TextReply::Answer(a) = reply {
            let mut answers = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = answers.get_mut(example_index) {
                *slot = Some(a.clone());
            }
        }
        Ok(())
    }
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

fn decoded_answer(
    dataset: &Dataset,
    p: &Prediction,
    question: &str,
    k: usize,
    outcome: &pipeline::RunOutcome,
) -> Decoded {
    let best = p.nbest.iter().find(|e| e.text == p.answer);
    let span = best.and_then(|e| e.span).and_then(|s| {
        let f = outcome_feature(outcome, s.unique_id)?;
        // run_qa's windows carry their tokens' character offsets.
        if let Some(t) = &f.template {
            let offset = |pos: usize| t.offsets.get(pos.checked_sub(t.doc_offset)?);
            let (first, last) = (offset(s.start)?, offset(s.end)?);
            return Some((first.0 as usize, last.1 as usize));
        }
        // Token positions → words, through the feature the span came from.
        let (a, b) = (f.orig_word(s.start)?, f.orig_word(s.end)?);
        char_span(&dataset.paragraphs[0], a, b, &p.answer)
    });
    Decoded {
        question: question.to_string(),
        answer: p.answer.clone(),
        no_answer: p.answer.is_empty(),
        score: best.map(|e| e.start_logit + e.end_logit),
        probability: best.map(|e| e.probability),
        start_char: span.map(|s| s.0),
        end_char: span.map(|s| s.1),
        null_odds: p.null_odds,
        nbest: p
            .nbest
            .iter()
            .filter(|e| e.span.is_some() || !e.text.is_empty())
            .take(k)
            .map(|e| Candidate {
                text: e.text.clone(),
                probability: e.probability,
                start_logit: e.start_logit,
                end_logit: e.end_logit,
            })
            .collect(),
        placeholder: is_placeholder(p),
    }
}

fn outcome_feature(
    outcome: &pipeline::RunOutcome,
    unique_id: u64,
) -> Option<&bertqa::types::Feature> {
    let i = outcome
        .kept_features
        .binary_search_by_key(&unique_id, |f| f.unique_id)
        .ok()?;
    Some(&outcome.kept_features[i])
}

/// The answer is the reference's `"empty"` placeholder (no span to answer with), not a
/// span of the context that reads "empty". JSON keeps the reference's text.
fn is_placeholder(p: &Prediction) -> bool {
    !p.answer.is_empty()
        && p.nbest
            .iter()
            .find(|e| e.text == p.answer)
            .is_some_and(|e| e.span.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_spans_map_back_to_the_context() {
        let ctx = "  The  cat\tsat on\nthe mat.";
        let p = bertqa::squad::split_context(ctx);
        // words: The cat sat on the mat.
        let chars: Vec<char> = ctx.chars().collect();
        let text = |s: (usize, usize)| chars[s.0..s.1].iter().collect::<String>();
        assert_eq!(text(char_span(&p, 1, 1, "cat").unwrap()), "cat");
        assert_eq!(char_span(&p, 3, 5, "on the mat").unwrap(), (15, 25));
        assert_eq!(text(char_span(&p, 5, 5, "mat").unwrap()), "mat");
        assert_eq!(
            text(char_span(&p, 0, 2, "The cat sat").unwrap()),
            "The  cat\tsat"
        );
        assert_eq!(char_span(&p, 0, 0, "dog"), None);
        assert_eq!(char_span(&p, 0, 9, "The"), None);
    }
}
