//! `bertqa perf` of a model that takes text (a question and a context as BYTES,
//! tokenized on the server): the data file's question and context pairs sent as they
//! are, one per request when the model has no batch dimension (else `--batch-size`,
//! by default its max batch size), under the same loads, windows and reports as token
//! models (shared memory included: the pairs' BYTES inputs go through a region), with
//! the server breakdown of each ensemble step. The flags that shape what bertqa
//! tokenizes or pads are refused in one line each.

use std::sync::Arc;

use super::super::common::{data_label, Outcome};
use super::{finish, start, stop, Args, Lines, Subject};
use crate::session::Session;
use bertqa::perf::{self, PerfConfig};
use bertqa::Model;

/// Sweeps `model`, which takes text, on `servers` with the pairs of `dataset`.
pub(crate) fn run(
    args: &Args,
    session: &mut Session,
    mut config: PerfConfig,
    rt: &tokio::runtime::Runtime,
    dataset: &bertqa::types::Dataset,
    servers: perf::Servers,
    model: Model,
) -> anyhow::Result<Outcome> {
    if let Some(why) = refused(args, model.name()) {
        anyhow::bail!(why);
    }
    let per_request = per_request(args.load.batch_size, &model)?;
    let pairs = pairs(dataset);
    if pairs.is_empty() {
        anyhow::bail!("{}: no questions to send", data_label(&args.data));
    }
    let platform = model.platform().to_string();
    let progress = Lines {
        quiet: args.output.quiet,
        batch_size: per_request,
        unit: "questions/s",
    };
    let key = bertqa::metrics::ModelKey {
        name: model.name().to_string(),
        version: args.model_version.clone(),
    };
    let metrics = start(args, rt, servers.first(), key, &mut config)?;
    let requests = perf::text::make_requests(&pairs, per_request);
    let swept = perf::Requests::questions(&model, args.model_version.clone(), requests)
        .and_then(|requests| rt.block_on(perf::sweep(&servers, &requests, &config, &progress)));
    let subject = Subject {
        model: model.name().to_string(),
        version: args.model_version.clone(),
        platform,
        max_batch_size: model.max_batch_size(),
        batch_declared: true,
        text: true,
        features: pairs.len(),
        batch_size: per_request,
        padding: "none (the server tokenizes)".into(),
    };
    let swept = stop(&config, swept)?;
    finish(args, session, &config, &servers, metrics, subject, swept)
}

/// Every question of the data with its context, in file order (a paragraph's context
/// shared by its questions).
pub(crate) fn pairs(dataset: &bertqa::types::Dataset) -> Vec<(Arc<str>, Arc<str>)> {
    let contexts: Vec<Arc<str>> = dataset
        .paragraphs
        .iter()
        .map(|p| Arc::from(p.context.as_str()))
        .collect();
    dataset
        .examples
        .iter()
        .map(|e| {
            (
                Arc::from(e.question_text.as_str()),
                contexts[e.paragraph_index].clone(),
            )
        })
        .collect()
}

/// Questions per request: `--batch-size` within the model's max batch size (1 for a
/// model without a batch dimension), by default the max batch size.
pub(crate) fn per_request(requested: Option<usize>, model: &Model) -> anyhow::Result<usize> {
    questions_per_request(requested, model.max_batch_size(), model.name())
}

/// [`per_request`] of model `name` of `max_batch_size`.
fn questions_per_request(
    requested: Option<usize>,
    max_batch_size: usize,
    name: &str,
) -> anyhow::Result<usize> {
    let most = max_batch_size.max(1);
    match requested {
        None => Ok(most),
        Some(0) => anyhow::bail!("--batch-size must be at least 1"),
        Some(n) if n > most && max_batch_size == 0 => anyhow::bail!(
            "--batch-size {n}: model {:?} takes one question per request (max batch size 0, \
             inputs [1])",
            name
        ),
        Some(n) if n > most => anyhow::bail!(
            "--batch-size {n} exceeds model {:?}'s max batch size {most}",
            name
        ),
        Some(n) => Ok(n),
    }
}

/// The first flag given that cannot apply to a model that takes text, and why, in one
/// line (`None`: all apply).
fn refused(args: &Args, model: &str) -> Option<String> {
    let defaults = bertqa::features::FeatureConfig::default();
    let w = &args.window;
    let t = &args.tokenizer;
    let b = &args.binding;
    let tokenizes = "the server tokenizes, with its own vocabulary and windows";
    let pads = "the server tokenizes and pads";
    let rules = [
        (
            args.export_input_data.is_some(),
            "--export-input-data",
            "it writes token tensors, and the model takes a question and a context",
        ),
        (args.load.fixed_seq_len, "--fixed-seq-len", pads),
        (args.load.dynamic_seq_len, "--dynamic-seq-len", pads),
        (w.max_seq_length.is_some(), "--max-seq-length", tokenizes),
        (
            w.doc_stride != defaults.doc_stride,
            "--doc-stride",
            tokenizes,
        ),
        (
            w.max_query_length != defaults.max_query_length,
            "--max-query-length",
            tokenizes,
        ),
        (t.tokenizer.is_some(), "--tokenizer", tokenizes),
        (
            t.vocab.as_os_str() != "vocab/vocab.txt",
            "--vocab",
            tokenizes,
        ),
        (t.no_lower_case, "--no-lower-case", tokenizes),
        (
            b.input_ids.is_some(),
            "--input-ids",
            "it has no token inputs",
        ),
        (
            b.segment_ids.is_some(),
            "--segment-ids",
            "it has no token inputs",
        ),
        (
            b.input_mask.is_some(),
            "--input-mask",
            "it has no token inputs",
        ),
    ];
    rules
        .into_iter()
        .find(|(given, _, _)| *given)
        .map(|(_, flag, why)| format!("{flag} does not apply: model {model:?} takes text ({why})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["perf", "--data", "d.json", "--model", "m"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn flags_that_shape_tokens_are_refused_one_line_each_naming_the_flag() {
        assert_eq!(refused(&args(&[]), "m"), None);
        assert_eq!(
            refused(
                &args(&["--shared-memory", "system", "--do-lower-case"]),
                "m"
            ),
            None
        );
        for (given, flag) in [
            (&["--doc-stride", "64"][..], "--doc-stride"),
            (&["--max-seq-length", "256"], "--max-seq-length"),
            (&["--export-input-data", "x.json"], "--export-input-data"),
            (&["--fixed-seq-len"], "--fixed-seq-len"),
            (&["--vocab", "other.txt"], "--vocab"),
            (&["--no-lower-case"], "--no-lower-case"),
            (&["--input-mask", "mask"], "--input-mask"),
        ] {
            let why = refused(&args(given), "qa-text").unwrap();
            assert!(
                why.starts_with(&format!(
                    "{flag} does not apply: model \"qa-text\" takes text ("
                )),
                "{why}"
            );
            assert!(!why.contains('\n'));
        }
    }

    #[test]
    fn a_request_holds_one_question_without_a_batch_dimension_else_the_batch_size() {
        assert_eq!(questions_per_request(None, 0, "qa").unwrap(), 1);
        assert_eq!(questions_per_request(Some(1), 0, "qa").unwrap(), 1);
        let e = questions_per_request(Some(4), 0, "qa")
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes one question per request"), "{e}");
        assert_eq!(questions_per_request(None, 8, "qa").unwrap(), 8);
        assert_eq!(questions_per_request(Some(3), 8, "qa").unwrap(), 3);
        assert!(questions_per_request(Some(9), 8, "qa").is_err());
        assert!(questions_per_request(Some(0), 8, "qa").is_err());
    }
}
