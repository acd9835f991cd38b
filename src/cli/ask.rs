//! `bertqa ask`: one or more questions about one context, through the full pipeline
//! (several windows for a long context): the answer, its score and probability, and
//! the character span in the original context.

use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{json, Value};

use super::args::{self, PipelineArgs, SharedMemoryArg};
use super::common::{
    decode_config, feature_config, load_tokenizer, model_padding, pipeline_runtime, print_stdout,
    run_config, Bound, Outcome,
};
use bertqa::decode::Prediction;
use bertqa::pipeline;
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
    let tokenizer = load_tokenizer(&args.run.tokenizer)?;
    let version_2 = args.run.decode.version_2_with_negative;
    let decode = decode_config(
        &args.run.decode,
        version_2,
        bertqa::types::TokenText::lower_case(&tokenizer),
    );
    let features = feature_config(&args.run.window)?;
    let rt = pipeline_runtime()?;
    // One connection, one look at the model: a model that takes text is asked in its
    // own words (its answer contract), one that takes token ids through the pipeline.
    let (client, bound) = rt.block_on(super::common::connect_pool_and_look(
        &args.run.server,
        &args.run.net,
        &args.model,
        &args.model_version,
        &args.run.binding,
        &args.text,
    ))?;
    // A few requests gain less from shared memory than registering a region costs
    // (two more calls): `auto` sends the tensors in the messages here.
    let shared_memory = match args.run.load.shared_memory {
        SharedMemoryArg::Auto => bertqa::backend::SharedMemory::None,
        given => given.into(),
    };
    let (model, outcome) = match bound {
        Bound::Text(text) if text.contract.name() == "answer" => {
            let first = client.first_client().clone();
            let asked = super::ask_text::Asked {
                questions: &args.question,
                context: &context,
                model_version: &args.model_version,
                url: args.run.server.url.join(","),
                json: args.run.output.json,
                shared_memory,
            };
            return rt.block_on(super::ask_text::ask(&asked, &first, &text));
        }
        // The logits contract: the server's windows decoded here, as a token model's.
        Bound::Text(text) => {
            let model = text.model.clone();
            let run = bertqa::pipeline::text::TextRun {
                pool: &client,
                binding: Arc::new(text),
                version: &args.model_version,
                dataset: &dataset,
                tokenizer: &tokenizer,
                decode: &decode,
                batch_size: 1,
                concurrency: args.run.load.concurrency.max(1),
                observer: &pipeline::NoProgress,
                stop: None,
                keep_windows: true,
                known: Default::default(),
                record: None,
                shared_memory,
            };
            (model, run.run_partial(&rt).complete(&dataset)?)
        }
        Bound::Tokens(binding) => {
            let padding = model_padding(&args.run.load, &binding, features.max_seq_length);
            let mut config = run_config(&args.run.load, &binding, features, decode, padding)?;
            config.infer.shared_memory = shared_memory;
            config.keep_features = true;
            let outcome = pipeline::Run::new(
                &rt,
                &client,
                Arc::new(binding.clone()),
                &dataset,
                &tokenizer,
                &config,
            )
            .run()?;
            if let Some(note) = outcome.infer.padding.note(&binding.model) {
                eprintln!("{}", super::flags::name_flags(&note));
            }
            (binding.model, outcome)
        }
    };
    let answers: Vec<Value> = outcome
        .predictions
        .iter()
        .zip(&args.question)
        .map(|(p, q)| answer_json(&dataset, p, q, args.n_best, &outcome))
        .collect();
    let doc = json!({
        "schema": 1,
        "model": model,
        "url": args.run.server.url.join(","),
        "protocol": client.first_client().protocol().as_str(),
        "features": outcome.features,
        "latency_ms": {
            "max": outcome.infer.latency_us.max() as f64 / 1000.0,
            "mean": outcome.infer.latency_us.mean() / 1000.0,
        },
        "answers": answers,
    });
    if args.run.output.json {
        print_stdout(&format!("{doc:#}\n"))?;
    } else {
        let placeholders: Vec<bool> = outcome.predictions.iter().map(is_placeholder).collect();
        print_stdout(&render_text(&doc, &placeholders))?;
    }
    Ok(Outcome::Success)
}

fn answer_json(
    dataset: &Dataset,
    p: &Prediction,
    question: &str,
    k: usize,
    outcome: &pipeline::RunOutcome,
) -> Value {
    let best = p.nbest.iter().find(|e| e.text == p.answer);
    let span = best.and_then(|e| e.span).and_then(|s| {
        // Token positions → words, through the feature the span came from.
        let f = outcome_feature(outcome, s.unique_id)?;
        let (a, b) = (f.orig_word(s.start)?, f.orig_word(s.end)?);
        char_span(&dataset.paragraphs[0], a, b, &p.answer)
    });
    let no_answer = p.answer.is_empty();
    json!({
        "question": question,
        "answer": p.answer,
        "no_answer": no_answer,
        "score": best.map(|e| e.start_logit + e.end_logit),
        "probability": best.map(|e| e.probability),
        "start_char": span.map(|s| s.0),
        "end_char": span.map(|s| s.1),
        "null_odds": p.null_odds,
        "nbest": p.nbest.iter().filter(|e| e.span.is_some() || !e.text.is_empty()).take(k).map(|e| json!({
            "text": e.text,
            "probability": e.probability,
            "start_logit": e.start_logit,
            "end_logit": e.end_logit,
        })).collect::<Vec<_>>(),
    })
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

/// The text report; `placeholders[i]`: the i-th answer is the placeholder, shown as no
/// answer.
fn render_text(doc: &Value, placeholders: &[bool]) -> String {
    let mut s = String::new();
    let answers = doc["answers"].as_array().cloned().unwrap_or_default();
    for (i, a) in answers.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        let _ = writeln!(s, "Q: {}", a["question"].as_str().unwrap_or(""));
        if a["no_answer"].as_bool() == Some(true) {
            let _ = writeln!(
                s,
                "A: (no answer)   null odds {:.3}",
                a["null_odds"].as_f64().unwrap_or(0.0)
            );
        } else if placeholders.get(i) == Some(&true) {
            let _ = match a["null_odds"].as_f64() {
                Some(odds) => writeln!(s, "A: (no answer)   null odds {odds:.3}"),
                None => writeln!(s, "A: (no answer)"),
            };
        } else {
            let span = match (a["start_char"].as_u64(), a["end_char"].as_u64()) {
                (Some(x), Some(y)) => format!(", characters {x}..{y}"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "A: {}   (score {:.3}, probability {:.3}{span})",
                a["answer"].as_str().unwrap_or(""),
                a["score"].as_f64().unwrap_or(0.0),
                a["probability"].as_f64().unwrap_or(0.0),
            );
        }
        let nbest = a["nbest"].as_array().cloned().unwrap_or_default();
        if nbest.len() > 1 {
            for (r, e) in nbest.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "   {:>2}. {:<40} p={:.4}  start {:.3}  end {:.3}",
                    r + 1,
                    format!("{:?}", e["text"].as_str().unwrap_or("")),
                    e["probability"].as_f64().unwrap_or(0.0),
                    e["start_logit"].as_f64().unwrap_or(0.0),
                    e["end_logit"].as_f64().unwrap_or(0.0)
                );
            }
        }
    }
    s
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
