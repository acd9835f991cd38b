//! The client's evaluations ([`crate::evaluation`]): against its server (journaled,
//! resumable, stoppable, with the server's metrics read around the run), or from saved
//! logits; then the files, the scores, the gates and the report.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{Driving, Engine, LoadedTokenizer};
use crate::backend::pool::EndpointReport;
use crate::backend::text::TextReply;
use crate::backend::{Pool, RetryStats};
use crate::decode::{self, DecodeConfig, Prediction};
use crate::error::{Error, Result};
use crate::evaluation::facts::{finished, Facts, ServerFacts};
use crate::evaluation::journaled::{self, JournalHandle, Recorder};
use crate::evaluation::partial::{write_partial, Partial};
use crate::evaluation::slices::SliceSide;
use crate::evaluation::{
    score_with, write_per_question, write_predictions, EvalData, EvalHooks, EvalOptions, Evaluation,
};
use crate::features::FeatureConfig;
use crate::journal::{Fingerprint, Journal};
use crate::metrics::{Choice, SpanMetrics};
use crate::pipeline::{
    AnswerNeeds, InferReport, Padding, PartialOutcome, Phases, RunConfig, RunObserver, RunOutcome,
};
use crate::report::eval::GateResult;
use crate::report::gates::Gate;

/// [`crate::Client::evaluate`]: every question of `dataset`, scored; nothing written.
pub(crate) fn evaluate(
    engine: &Engine,
    drive: Driving<'_>,
    dataset: &crate::types::Dataset,
    stop: CancellationToken,
) -> Result<Evaluation> {
    let version_2 = engine
        .settings
        .version_2
        .unwrap_or_else(|| dataset.looks_like_v2());
    let config = engine.config(version_2)?;
    let before = Counters::of(&engine.pool);
    let outcome = engine
        .new_run(drive, dataset, &config, &crate::pipeline::NoProgress)
        .stop_on(stop)
        .run()?;
    let facts = engine_facts(engine, &config, before, String::new(), Default::default());
    let null_odds = engine.model.gives_null_odds();
    let scores = score_with(
        dataset,
        &outcome.predictions,
        version_2,
        null_odds,
        engine.settings.na_prob_thresh,
    )?;
    let margins: Vec<f64> = outcome
        .predictions
        .iter()
        .map(crate::slices::margin)
        .collect();
    let side = SliceSide::of(
        Some(&engine.model),
        version_2,
        null_odds,
        &config.decode,
        margins,
    );
    let slices = side.slices(dataset, &outcome, &scores, &Default::default());
    Ok(finished(
        outcome, scores, version_2, null_odds, facts, slices,
    ))
}

/// The pool's counters before a run, so that its report counts the run's only.
struct Counters(RetryStats, Vec<EndpointReport>);

impl Counters {
    fn of(pool: &Pool) -> Counters {
        Counters(pool.retry_stats(), pool.endpoint_reports())
    }
}

/// The facts of a run of `engine` with `config`, on `data`.
fn engine_facts(
    engine: &Engine,
    config: &RunConfig,
    before: Counters,
    data: String,
    format: crate::data::Format,
) -> Facts {
    let pool = &engine.pool;
    Facts {
        data,
        format,
        server: Some(ServerFacts {
            urls: engine.urls.join(","),
            model: engine.model.clone(),
            protocol: pool.first_client().protocol(),
            retries: pool.retry_stats().since(&before.0),
            endpoints: pool
                .endpoint_reports()
                .iter()
                .zip(&before.1)
                .map(|(now, before)| now.since(before))
                .collect(),
        }),
        postprocess: config.decode.postprocess.as_str(),
        batch_size: config.infer.batch_size,
        batch_size_given: engine.settings.load.batch_size.is_some(),
        concurrency: engine.settings.load.concurrency.max(1),
        output_dir: PathBuf::new(),
        fingerprint: Fingerprint::default(),
        server_metrics: None,
    }
}

/// [`crate::Client::evaluate_with`]: `data` against the client's server, with
/// `options`' files, journal, gates and metrics.
pub(crate) fn evaluate_with(
    engine: &Engine,
    drive: Driving<'_>,
    data: &EvalData,
    options: &EvalOptions,
    stop: CancellationToken,
) -> Result<Evaluation> {
    let hooks = options.hooks();
    let model = &engine.model;
    let version_2 = engine.settings.version_2.unwrap_or(data.looks_like_v2);
    let tokenizer = engine.tokenizer.as_ref();
    let mut config = engine.config(version_2)?;
    let base = base_fingerprint(data, &engine.settings.features, &config.decode, tokenizer)?;
    let dir = &options.output_dir;
    let dataset = &data.dataset;
    let text = model.takes_text();
    if text && options.save_logits {
        return Err(Error::Refused(format!(
            "`save_logits`: model {:?} takes text (tokenized on the server); its answers \
             are kept in the journal for `resume`, not saved as logits",
            model.name()
        )));
    }
    let (fingerprint, builder) = if text {
        (journaled::model_fingerprint(base, model, None), None)
    } else {
        config.keep_logits = options.save_logits;
        check_padding(
            config.infer.padding,
            engine.settings.features.max_seq_length,
            model.name(),
        )?;
        let fingerprint = journaled::model_fingerprint(
            base,
            model,
            Some((config.infer.padding, engine.settings.load.dynamic_seq_len)),
        );
        let tokenizer = tokenizer.expect("a token model's client loads its tokenizer");
        // Windows are cut by a builder made before the journal opens: a question that
        // cannot be cut (run_qa's rules) is an error with nothing written.
        let builder = crate::features::FeatureBuilder::for_rules(
            tokenizer.tokenizer.as_ref(),
            config.decode.postprocess,
            engine.settings.features,
            dataset,
        )?;
        (fingerprint, Some(builder))
    };
    let (mut journal, mut contents) = journaled::open(dir, options.resume, &fingerprint, hooks)?;
    if !text {
        if options.save_logits {
            // Compact records hold only what decoding reads: their features are sent
            // again for the logits file.
            let resent = journal.resend_compact(&mut contents);
            if resent > 0 {
                hooks.note(&format!(
                    "note: {resent} journaled features kept only their answer candidates; \
                     sending them again for `save_logits`"
                ));
            }
        } else {
            journal.compact_to(config.decode.n_best_size);
        }
        // A resumed run pads as the first one decided (its probe is not run again).
        if let Some(g) = config.infer.guard.as_mut() {
            g.decided = contents.padding_decision;
        }
    }
    let journal = Arc::new(Mutex::new(journal));
    hooks.on_journal(JournalHandle(journal.clone()));
    let recorder = (!text).then(|| Recorder::new(journal.clone(), config.decode.n_best_size));
    let observer = Observer {
        hooks,
        journal: recorder.as_ref(),
        replies: text.then_some(&*journal),
        nbest: Mutex::new(decode::NbestStream::create(dir)?),
        answer_scores: options.html.as_ref().map(|_| Mutex::new(HashMap::new())),
        margins: Mutex::new(vec![f64::INFINITY; dataset.examples.len()]),
    };
    let before = Counters::of(&engine.pool);
    let scraper = Scraping::start(engine, drive, options)?;
    let mut run = engine
        .new_run(drive, dataset, &config, &observer)
        .stop_on(stop);
    run = match builder {
        Some(builder) => run.windows(builder).known(contents.logits),
        None => run.known_replies(contents.text),
    };
    let outcome = run.run_partial();
    let server_metrics = scraper.map(|s| s.finish(drive));
    hooks.run_ended();
    let mut facts = engine_facts(engine, &config, before, data.name.clone(), data.format);
    facts.output_dir = dir.clone();
    facts.fingerprint = fingerprint;
    facts.server_metrics = server_metrics;
    let null_odds = model.gives_null_odds();
    let answer_scores = observer.answer_scores();
    let nbest = observer
        .nbest
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let margins = observer
        .margins
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let done = version_2 && null_odds;
    let outcome = match is_complete(&outcome, dataset) {
        // Every question decoded: completing cannot fail.
        true => outcome.complete(dataset)?,
        false => {
            let _ = journaled::lock(&journal).sync();
            let partial = Partial {
                dir,
                data: &data.name,
                dataset,
                version_2,
                null_odds: done,
                na_prob_thresh: engine.settings.na_prob_thresh,
                fingerprint: &facts.fingerprint,
                journaled: journaled::lock(&journal).features(),
                wording: &|s| hooks.wording(s),
            };
            return Err(incomplete(&partial, outcome, &engine.pool, nbest));
        }
    };
    let side = SliceSide::of(Some(model), version_2, null_odds, &config.decode, margins);
    let evaluation = finish(
        outcome,
        data,
        options,
        version_2,
        null_odds,
        facts,
        engine.settings.na_prob_thresh,
        Some(nbest),
        &answer_scores,
        &side,
    )?;
    journaled::remove(dir)?;
    Ok(evaluation)
}

/// Whether a run answered every question.
fn is_complete(outcome: &PartialOutcome, dataset: &crate::types::Dataset) -> bool {
    outcome.error.is_none() && outcome.done() == dataset.examples.len()
}

/// Writes the partial results of a run that did not complete; the error to fail with.
fn incomplete(
    p: &Partial<'_>,
    mut outcome: PartialOutcome,
    pool: &Pool,
    nbest: decode::NbestStream,
) -> Error {
    let cause = outcome.error.take();
    let words = cause.as_ref().map(|e| (p.wording)(&with_retries(e, pool)));
    match write_partial(p, outcome, words, Some(nbest)) {
        Ok(summary) => Error::Incomplete {
            summary,
            cause: cause.map(Box::new),
        },
        Err(e) => e,
    }
}

/// `e` and its causes on one line, after the run's retry counts when there were any.
fn with_retries(e: &Error, pool: &Pool) -> String {
    let mut line = String::new();
    let s = pool.retry_stats();
    if !s.retries.is_empty() {
        let by_code = s
            .retries
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        line = format!(
            "evaluation stopped after {} retries in this run ({by_code}): ",
            s.total_retries()
        );
    }
    line.push_str(&e.to_string());
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        line.push_str(": ");
        line.push_str(&s.to_string());
        source = s.source();
    }
    line
}

/// The answers written and scored, the gates, metrics.json and the HTML page.
#[allow(clippy::too_many_arguments)]
fn finish(
    outcome: RunOutcome,
    data: &EvalData,
    options: &EvalOptions,
    version_2: bool,
    null_odds: bool,
    facts: Facts,
    na_prob_thresh: f64,
    nbest: Option<decode::NbestStream>,
    answer_scores: &HashMap<String, f64>,
    side: &SliceSide,
) -> Result<Evaluation> {
    let dir = &options.output_dir;
    let with_null_odds = version_2 && null_odds;
    // The answers are written before scoring, so nothing computed is lost if the gold
    // answers cannot be scored.
    let mut files = write_predictions(dir, &outcome.predictions, with_null_odds, nbest)?;
    if options.save_logits {
        crate::logits_io::save(&dir.join("logits.bin"), &outcome.logits)?;
        files.push("logits.bin".into());
    }
    let scores = score_with(
        &data.dataset,
        &outcome.predictions,
        version_2,
        with_null_odds,
        na_prob_thresh,
    )
    .map_err(|e| Error::Incomplete {
        summary: format!("{e} (the predictions were written to {})", dir.display()),
        cause: None,
    })?;
    let slices = side.slices(&data.dataset, &outcome, &scores, &options.statistics);
    write_per_question(dir, &outcome.predictions, &scores, &slices.questions)?;
    files.push("per_question.jsonl".into());
    let mut evaluation = finished(outcome, scores, version_2, null_odds, facts, slices);
    evaluation.files = files;
    let infer = evaluation
        .facts
        .server
        .as_ref()
        .map(|_| &evaluation.outcome.infer);
    evaluation.gates = gates(options, &evaluation.metrics, infer);
    let report = evaluation.to_report();
    let json = crate::report::Render::render(&report, crate::report::Format::Json);
    crate::output_file::write_atomic(&dir.join("metrics.json"), json.as_bytes())?;
    // Not one of the run's files: metrics.json does not list it.
    if let Some(path) = &options.html {
        let page = crate::report::html::eval::page(
            &report,
            &data.dataset,
            &evaluation.outcome.predictions,
            answer_scores,
            &|s| options.hooks().wording(s),
        );
        crate::output_file::write_atomic(path, &page)?;
    }
    Ok(evaluation)
}

/// The gates `options` asks for, and how they went.
fn gates(
    options: &EvalOptions,
    metrics: &crate::evaluate::Metrics,
    infer: Option<&InferReport>,
) -> Vec<GateResult> {
    let mut g = Vec::new();
    let mut gate = |gate, threshold: Option<f64>, value: f64, passed: fn(f64, f64) -> bool| {
        if let Some(t) = threshold {
            g.push(GateResult {
                gate,
                threshold: t,
                value,
                passed: passed(value, t),
            });
        }
    };
    gate(
        Gate::MinExact,
        options.min_exact,
        metrics.exact(),
        |v, t| v >= t,
    );
    gate(Gate::MinF1, options.min_f1, metrics.f1(), |v, t| v >= t);
    let p99 = infer.map_or(0.0, |i| i.latency_ms(0.99));
    gate(Gate::MaxP99Ms, options.max_p99_ms, p99, |v, t| v <= t);
    g
}

/// The fingerprint of the settings every run of `data` has.
fn base_fingerprint(
    data: &EvalData,
    features: &FeatureConfig,
    decode: &DecodeConfig,
    tokenizer: Option<&LoadedTokenizer>,
) -> Result<Fingerprint> {
    journaled::base_fingerprint(
        &data.sha256,
        data.limit,
        data.shard,
        data.dataset.examples.len(),
        features,
        decode,
        tokenizer.map(|t| t.file.as_path()),
    )
}

/// A dynamic-length model still cannot take more than `max_seq_length` tokens from us,
/// and a fixed-length model must match the window length.
fn check_padding(padding: Padding, max_seq_length: usize, model: &str) -> Result<()> {
    if let Padding::Fixed(n) = padding {
        if n < max_seq_length {
            return Err(Error::Refused(format!(
                "model {model:?} takes sequences of {n} tokens but `max_seq_length` is \
                 {max_seq_length}; pass `max_seq_length` {n}"
            )));
        }
    }
    Ok(())
}

/// The server's metrics read around a run.
struct Scraping {
    scraper: crate::metrics::scraper::Scraper,
    opened: crate::metrics::scraper::Sampled,
    choice: Choice,
}

impl Scraping {
    /// Starts reading `options.metrics_urls` (none: `None`).
    fn start(
        engine: &Engine,
        drive: Driving<'_>,
        options: &EvalOptions,
    ) -> Result<Option<Scraping>> {
        use crate::backend::page::PageClient;
        use crate::metrics::scraper::{Scraper, MOST_WAIT};
        if options.metrics_urls.is_empty() {
            return Ok(None);
        }
        let interval = options.metrics_interval;
        let wait = interval.min(MOST_WAIT);
        let endpoints = options
            .metrics_urls
            .iter()
            .map(|u| PageClient::new(u, &engine.server, wait))
            .collect::<Result<Vec<_>>>()?;
        let key = crate::metrics::ModelKey {
            name: engine.model.name().to_string(),
            version: engine.model.version().to_string(),
        };
        let scraper = drive.block_on(async { Scraper::start(endpoints, key, interval) });
        let choice = Choice::Read {
            urls: scraper.urls(),
            interval_ms: interval.as_millis() as u64,
        };
        let opened = drive.block_on(scraper.now());
        Ok(Some(Scraping {
            scraper,
            opened,
            choice,
        }))
    }

    /// The metrics from the start to now; stops reading.
    fn finish(self, drive: Driving<'_>) -> (Choice, SpanMetrics) {
        let close = drive.block_on(self.scraper.now());
        self.scraper.stop();
        let span = self
            .scraper
            .span(&self.opened, &close, self.opened.at, close.at);
        (self.choice, span)
    }
}

/// What an evaluation attaches to its run: the caller's hooks, the journal, and the
/// n-best lists streamed into their file as questions are decoded (each answer's score
/// kept first, for the HTML page).
struct Observer<'a> {
    hooks: &'a dyn EvalHooks,
    /// A token model's run's journal of answers.
    journal: Option<&'a Recorder>,
    /// A text model's run's journal of replies.
    replies: Option<&'a Mutex<Journal>>,
    nbest: Mutex<decode::NbestStream>,
    answer_scores: Option<Mutex<HashMap<String, f64>>>,
    /// Each question's margin (docs/algorithm.md §8.8), taken before its n-best list is
    /// written away.
    margins: Mutex<Vec<f64>>,
}

impl Observer<'_> {
    fn answer_scores(&self) -> HashMap<String, f64> {
        self.answer_scores
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }
}

impl RunObserver for Observer<'_> {
    fn on_reply(&self, example_index: usize, reply: &TextReply) -> Result<()> {
        self.replies.map_or(Ok(()), |j| {
            journaled::lock(j).append_text(example_index as u64, reply)
        })
    }

    fn built(&self, n: u64) {
        self.hooks.built(n);
    }

    fn answered(&self, n: u64) {
        self.hooks.answered(n);
    }

    fn answer_needs(&self) -> AnswerNeeds {
        self.journal.map(|j| j.needs()).unwrap_or_default()
    }

    fn on_answer(&self, scores: &decode::Scores) -> Result<()> {
        self.journal.map_or(Ok(()), |j| j.answer(scores))
    }

    fn on_padding_decided(&self, dynamic: bool) -> Result<()> {
        self.journal.map_or(Ok(()), |j| j.padding_decided(dynamic))
    }

    fn on_decoded(&self, example_index: usize, prediction: &mut Prediction) {
        if let (Some(scores), Some(score)) = (&self.answer_scores, answer_score(prediction)) {
            scores
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(prediction.qas_id.clone(), score);
        }
        if let Some(m) = self
            .margins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(example_index)
        {
            *m = crate::slices::margin(prediction);
        }
        self.nbest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(example_index, prediction);
    }
}

/// The score of the answer given: start + end logit of the first n-best entry with its
/// text (the null entry's for no answer); `None` when the n-best list has none.
fn answer_score(p: &Prediction) -> Option<f64> {
    p.nbest
        .iter()
        .find(|e| e.text == p.answer)
        .map(|e| e.start_logit + e.end_logit)
}

/// [`crate::ClientBuilder::evaluate_saved`]: `data` decoded from the logits a run saved
/// (`logits`), with `tokenizer` and the window and decoding settings; no server.
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate_saved(
    tokenizer: &LoadedTokenizer,
    features: FeatureConfig,
    decode_config: DecodeConfig,
    load: &crate::pipeline::Load,
    na_prob_thresh: f64,
    logits: &std::path::Path,
    data: &EvalData,
    options: &EvalOptions,
) -> Result<Evaluation> {
    let started = Instant::now();
    let dataset = &data.dataset;
    let version_2 = decode_config.version_2_with_negative;
    let fingerprint = base_fingerprint(data, &features, &decode_config, Some(tokenizer))?;
    let mut saved = crate::logits_io::load(logits)?;
    let non_finite = decode::non_finite::sanitize_all(&mut saved);
    let t = Instant::now();
    let builder = crate::features::FeatureBuilder::for_rules(
        tokenizer.tokenizer.as_ref(),
        decode_config.postprocess,
        features,
        dataset,
    )?;
    let (feats, featureless, placements) = crate::features::collect_placed(builder, dataset);
    let features_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let bert = tokenizer
        .tokenizer
        .as_ref()
        .bert()
        .map(|t| t as &dyn crate::types::TokenText);
    let predictions = decode::decode(&decode_config, dataset, &feats, &saved, bert)?;
    let answer_scores = predictions
        .iter()
        .filter_map(|p| Some((p.qas_id.clone(), answer_score(p)?)))
        .collect();
    let outcome = RunOutcome {
        predictions,
        features: feats.len() as u64,
        featureless,
        placements,
        infer: InferReport {
            non_finite,
            ..InferReport::empty()
        },
        phases: Phases {
            features_s,
            inference_s: 0.0,
            decode_s: t.elapsed().as_secs_f64(),
        },
        wall: started.elapsed(),
        logits: if options.save_logits {
            saved
        } else {
            Vec::new()
        },
        kept_features: Vec::new(),
    };
    let facts = Facts {
        data: data.name.clone(),
        format: data.format,
        server: None,
        postprocess: decode_config.postprocess.as_str(),
        batch_size: 0,
        batch_size_given: load.batch_size.is_some(),
        concurrency: load.concurrency.max(1),
        output_dir: options.output_dir.clone(),
        fingerprint,
        server_metrics: None,
    };
    // Logits come from a token model, which gives null odds.
    let margins = outcome
        .predictions
        .iter()
        .map(crate::slices::margin)
        .collect();
    let side = SliceSide::of(None, version_2, true, &decode_config, margins);
    finish(
        outcome,
        data,
        options,
        version_2,
        true,
        facts,
        na_prob_thresh,
        None,
        &answer_scores,
        &side,
    )
}
