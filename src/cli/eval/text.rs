//! `eval` of a model that takes text (tokenized on the server): the questions sent as
//! text, the answers read by the model's contract (`pipeline::text`), the same files
//! and report as for a token model. Journaled (what the model said about each question,
//! whole) and stoppable by Ctrl-C like any run, so `--resume` continues it; answers are
//! not saved as logits (`--save-logits` is refused with the reason).

use std::sync::Arc;

use super::super::common::Bound;
use super::run::{finish, guard_journal, with_metrics, EvalObserver, Input, Ran};
use super::Args;
use crate::cli::resume;
use bertqa::backend::text::{Contract, TextBinding, TextReply};
use bertqa::backend::Pool;
use bertqa::pipeline::text::TextRun;

/// Runs the questions against the text model `binding` on `pool`.
pub(super) fn against_server(
    args: &Args,
    input: &mut Input,
    rt: &tokio::runtime::Runtime,
    pool: Pool,
    binding: TextBinding,
) -> anyhow::Result<Ran> {
    if args.save_logits {
        anyhow::bail!(
            "--save-logits: model {:?} takes text (tokenized on the server); its answers \
             are kept in the journal for --resume, not saved as logits",
            binding.model
        );
    }
    input.fingerprint =
        resume::text_model_fingerprint(std::mem::take(&mut input.fingerprint), &binding);
    // An answer-contract model without a no-answer output gives no null odds.
    let no_null_odds = matches!(
        binding.contract,
        Contract::Answer {
            no_answer: None,
            ..
        }
    );
    if input.version_2 && no_null_odds {
        input.no_null_odds = Some(format!(
            "model {:?} has no no-answer output, so no null_odds.json; every no-answer \
             probability is 0 and there are no best thresholds (as evaluate-v2.0.py scores \
             without a na-prob file)",
            binding.model
        ));
    }
    let (journal, contents) = resume::open(&args.output_dir, args.resume, &input.fingerprint)?;
    let (journal, stop) = guard_journal(journal)?;
    let record = |i: usize, reply: &TextReply| resume::lock(&journal).append_text(i as u64, reply);
    let observer = EvalObserver::new(args, None)?;
    let binding = Arc::new(binding);
    let batch_size = args
        .run
        .load
        .batch_size
        .unwrap_or(binding.max_batch_size.max(1));
    let run = TextRun {
        pool: &pool,
        binding: binding.clone(),
        version: &args.model_version,
        dataset: &input.dataset,
        tokenizer: &input.tokenizer,
        decode: &input.decode,
        batch_size,
        concurrency: args.run.load.concurrency.max(1),
        observer: &observer,
        stop: Some(stop),
        keep_windows: false,
        known: contents.text,
        record: Some(&record),
        shared_memory: args.run.load.shared_memory.into(),
    };
    let per_request = run.per_request();
    let (outcome, server_metrics) =
        with_metrics(args, rt, &binding.model, &binding.version, || {
            run.run_partial(rt)
        })?;
    let (outcome, stream, answer_scores) = finish(args, input, outcome, observer, &journal, &pool)?;
    Ok(Ran {
        outcome,
        url: Some(args.run.server.url.join(",")),
        binding: Some(Bound::Text((*binding).clone())),
        batch_size: per_request,
        net: Some(pool),
        nbest: Some(stream),
        server_metrics,
        answer_scores,
    })
}
