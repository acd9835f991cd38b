//! `eval` of a model that takes text (tokenized on the server): the questions sent as
//! text, the answers read by the model's contract (`pipeline::text`), the same files
//! and report as for a token model. Journaled (what the model said about each question,
//! whole) and stoppable by Ctrl-C like any run, so `--resume` continues it; answers are
//! not saved as logits (`--save-logits` is refused with the reason).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::super::common::{data_label, Bound};
use super::super::flags::name_flags;
use super::output::write_partial;
use super::run::{stopped, Bar, EvalObserver, Input, Ran};
use super::Args;
use crate::cli::resume;
use bertqa::backend::text::{TextBinding, TextReply};
use bertqa::backend::Pool;
use bertqa::decode;
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
    let (journal, contents) = resume::open(&args.output_dir, args.resume, &input.fingerprint)?;
    // Shared with the signal handler, which writes the gathered records before a second
    // interrupt quits at once.
    let journal = Arc::new(Mutex::new(journal));
    let on_quit = {
        let journal = journal.clone();
        move || {
            // Never wait: a journal stuck in a write must not stop the quit.
            if let Ok(mut j) = journal.try_lock() {
                let _ = j.flush();
            }
        }
    };
    let stop = resume::stop_on_signals(on_quit)?;
    let record = |i: usize, reply: &TextReply| resume::lock(&journal).append_text(i as u64, reply);
    let observer = EvalObserver {
        bar: Bar::new(args.run.output.quiet || args.run.output.json),
        journal: None,
        nbest: Mutex::new(decode::NbestStream::create(&args.output_dir)?),
        answer_scores: args.html.as_ref().map(|_| Mutex::new(HashMap::new())),
    };
    let binding = Arc::new(binding);
    let batch_size = args
        .run
        .load
        .batch_size
        .unwrap_or(binding.max_batch_size.max(1));
    let key = bertqa::metrics::ModelKey {
        name: binding.model.clone(),
        version: binding.version.clone(),
    };
    let (scraper, choice) = rt.block_on(super::super::metrics::start(
        &args.metrics,
        &args.run.server,
        None,
        key,
    ))?;
    let opened = scraper.as_ref().map(|s| rt.block_on(s.now()));
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
    let outcome = run.run_partial(rt);
    let server_metrics = scraper.zip(opened).map(|(s, open)| {
        let close = rt.block_on(s.now());
        s.stop();
        (choice, s.span(&open, &close, open.at, close.at))
    });
    observer.bar.finish();
    let answer_scores = observer
        .answer_scores
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()))
        .unwrap_or_default();
    let stream = observer
        .nbest
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let outcome = if outcome.error.is_none() && outcome.done() == input.dataset.examples.len() {
        outcome.complete(&input.dataset)?
    } else {
        let _ = resume::lock(&journal).sync();
        let mut outcome = outcome;
        let error = outcome
            .error
            .take()
            .map(|e| name_flags(&format!("{:#}", stopped(e, &pool))));
        let partial = super::output::Partial {
            dir: &args.output_dir,
            data: &data_label(&args.data),
            dataset: &input.dataset,
            version_2: input.version_2,
            na_prob_thresh: args.scoring.na_prob_thresh,
            fingerprint: &input.fingerprint,
            journaled: resume::lock(&journal).features(),
        };
        anyhow::bail!(write_partial(&partial, outcome, error, Some(stream))?);
    };
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
