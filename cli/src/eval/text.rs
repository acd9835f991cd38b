//! `eval` of a model that takes text (tokenized on the server): the questions sent as
//! text on the run path every model takes (`pipeline::Run`, its window source and answer
//! reader chosen by the model's contract), the same files and report as for a token
//! model. Journaled (what the model said about each question, whole) and stoppable by
//! Ctrl-C like any run, so `--resume` continues it; answers are not saved as logits
//! (`--save-logits` is refused with the reason).

use super::super::common::run_config;
use super::run::{finish, guard_journal, with_metrics, EvalObserver, Input, Ran};
use super::Args;
use crate::resume;
use bertqa::backend::Pool;
use bertqa::pipeline::Run;
use bertqa::Model;
use tokio_util::sync::CancellationToken;

/// Runs the questions against `model`, which takes text, on `pool`.
pub(super) fn against_server(
    args: &Args,
    input: &mut Input,
    rt: &tokio::runtime::Runtime,
    pool: Pool,
    model: Model,
    host_stop: Option<CancellationToken>,
) -> anyhow::Result<Ran> {
    if args.save_logits {
        anyhow::bail!(
            "--save-logits: model {:?} takes text (tokenized on the server); its answers \
             are kept in the journal for --resume, not saved as logits",
            model.name()
        );
    }
    input.fingerprint =
        resume::model_fingerprint(std::mem::take(&mut input.fingerprint), &model, None);
    // An answer-contract model without a no-answer output gives no null odds.
    if input.version_2 && !model.gives_null_odds() {
        input.no_null_odds = Some(bertqa::report::eval::no_null_odds_reason(model.name()));
    }
    let (journal, contents) = resume::open(&args.output_dir, args.resume, &input.fingerprint)?;
    let (journal, stop) = guard_journal(journal, host_stop)?;
    let observer = EvalObserver::new(args, None)?.with_replies(&journal);
    let config = run_config(&args.run.load, &model, input.features, input.decode.clone())?;
    let per_request = config.infer.batch_size;
    let (outcome, server_metrics) = with_metrics(args, rt, model.name(), model.version(), || {
        let mut run = Run::new(rt, &pool, model.clone(), &input.dataset, &config)
            .observer(&observer)
            .known_replies(contents.text)
            .stop_on(stop);
        if let Some(t) = &input.tokenizer {
            run = run.tokenizer(t);
        }
        run.run_partial()
    })?;
    let (outcome, stream, answer_scores) = finish(args, input, outcome, observer, &journal, &pool)?;
    Ok(Ran {
        outcome,
        url: Some(args.run.server.url.join(",")),
        binding: Some(model),
        batch_size: per_request,
        net: Some(pool),
        nbest: Some(stream),
        server_metrics,
        answer_scores,
    })
}
