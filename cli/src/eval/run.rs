//! The steps of `bertqa eval`: load the data, get the answers (from saved logits, or
//! from a server with the journal, the progress bar and the n-best stream attached to
//! the run), then write the outputs and the report.

use bertqa::Model;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::common::{
    connect_pool_and_look, decode_config, feature_config, load_data_digest, pipeline_runtime,
    report_format, run_config as common_run_config, run_tokenizer,
};
use super::super::flags::name_flags;
use super::output::{score_with, write_partial, write_per_question, write_predictions};
use super::report::{gates, Shown};
use super::{Args, EvalReport, Gate};
use crate::resume;
use crate::session::Session;
use bertqa::decode::{self, DecodeConfig, Prediction};
use bertqa::features::FeatureConfig;
use bertqa::journal::{Fingerprint, Journal};
use bertqa::pipeline::{
    self, InferReport, Padding, PartialOutcome, Phases, RunConfig, RunObserver, RunOutcome,
};
use bertqa::report::{Format, Render as _};
use bertqa::tokenize::Tokenizer;
use bertqa::types::Dataset;
use tokio_util::sync::CancellationToken;

/// The questions read, before the settings that depend on the model.
pub(super) struct Data {
    pub dataset: Dataset,
    pub data_sha256: String,
    pub version_2: bool,
    pub format: bertqa::data::Format,
}

/// The questions and the settings every run has.
pub(super) struct Input {
    pub dataset: Dataset,
    /// `None` for a model that needs no vocabulary (a text model's answer contract).
    pub tokenizer: Option<Tokenizer>,
    pub version_2: bool,
    /// The data's format (its scoring rules: MRQA's for MRQA files).
    pub format: bertqa::data::Format,
    pub decode: DecodeConfig,
    pub features: FeatureConfig,
    /// The run's fingerprint (the model's part added by a server run).
    pub fingerprint: Fingerprint,
    /// Why a v2 run has no null odds (a model that gives no no-answer output): then no
    /// null_odds.json is written and every na-prob is 0, as evaluate-v2.0.py scores
    /// without a na-prob file.
    pub no_null_odds: Option<String>,
}

impl Input {
    /// Whether the run writes null_odds.json and scores with it as the na-prob file.
    pub(super) fn null_odds(&self) -> bool {
        self.version_2 && self.no_null_odds.is_none()
    }
}

/// The answers, and where they came from.
pub(super) struct Ran {
    pub outcome: RunOutcome,
    /// The server's URL(s) and the model's binding (none from saved logits).
    pub url: Option<String>,
    pub binding: Option<Model>,
    pub batch_size: usize,
    pub net: Option<bertqa::backend::Pool>,
    /// The n-best lists streamed into their file as questions were decoded (a live run).
    pub nbest: Option<decode::NbestStream>,
    /// The server's metrics over the run (`--metrics-url`).
    pub server_metrics: Option<(bertqa::metrics::Choice, bertqa::metrics::SpanMetrics)>,
    /// Each answer's score by question id (`--html`), taken before the n-best lists
    /// left the predictions for their file.
    pub answer_scores: HashMap<String, f64>,
}

/// Loads the data (the shard of it asked for); the output directory is `eval::run`'s,
/// held by then.
pub(super) fn load(args: &Args) -> anyhow::Result<Data> {
    if args.resume
        && args
            .data
            .iter()
            .any(|p| p.as_os_str() == bertqa::data::STDIN)
    {
        anyhow::bail!(
            "--resume cannot continue a run on standard input (--data -): its content may \
             differ; save it to a file"
        );
    }
    let (mut dataset, data_sha256, format) =
        load_data_digest(&args.data, args.run.window.strict, args.limit)?;
    // The whole file decides the v2 rules, so every shard uses the same ones.
    let version_2 = args.run.decode.version_2_with_negative || dataset.looks_like_v2();
    if let Some(shard) = args.shard {
        shard.apply(&mut dataset);
        if dataset.examples.is_empty() {
            anyhow::bail!(
                "--shard {shard}: {} has too few questions for {} shards",
                super::super::common::data_label(&args.data),
                shard.count
            );
        }
    }
    Ok(Data {
        dataset,
        data_sha256,
        version_2,
        format,
    })
}

/// The settings of a run on `data`: the vocabulary loaded when the model needs one
/// (`vocabulary`), the decoding and window settings, and the run's fingerprint.
pub(super) fn prepare(
    args: &Args,
    data: Data,
    vocabulary: bool,
    model_len: Option<usize>,
) -> anyhow::Result<Input> {
    let Data {
        dataset,
        data_sha256,
        version_2,
        format,
    } = data;
    let (loaded, lower_case, postprocess) =
        run_tokenizer(&args.run.tokenizer, &args.run.decode, vocabulary)?;
    let decode = decode_config(&args.run.decode, version_2, lower_case, postprocess);
    let features = feature_config(&args.run.window, postprocess, model_len)?;
    let fingerprint = resume::base_fingerprint(
        data_sha256,
        args.limit,
        args.shard,
        dataset.examples.len(),
        &features,
        &decode,
        loaded.as_ref().map(|t| t.file.as_path()),
    )?;
    Ok(Input {
        dataset,
        tokenizer: loaded.map(|t| t.tokenizer),
        version_2,
        format,
        decode,
        features,
        fingerprint,
        no_null_odds: None,
    })
}

/// Decodes logits saved by `--save-logits` (no server).
pub(super) fn from_logits(
    args: &Args,
    input: &Input,
    path: &Path,
    started: Instant,
) -> anyhow::Result<Ran> {
    let Input {
        dataset,
        tokenizer,
        decode,
        features,
        ..
    } = input;
    let tokenizer = tokenizer
        .as_ref()
        .expect("--from-logits loads the vocabulary");
    let mut logits = bertqa::logits_io::load(path)?;
    let non_finite = bertqa::decode::non_finite::sanitize_all(&mut logits);
    let t = Instant::now();
    let builder = bertqa::features::FeatureBuilder::for_rules(
        tokenizer.as_ref(),
        decode.postprocess,
        *features,
        dataset,
    )?;
    let (feats, featureless) = bertqa::features::collect(builder, dataset)?;
    let features_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let bert = tokenizer
        .as_ref()
        .bert()
        .map(|t| t as &dyn bertqa::types::TokenText);
    let predictions = decode::decode(decode, dataset, &feats, &logits, bert)?;
    let answer_scores = predictions
        .iter()
        .filter_map(|p| Some((p.qas_id.clone(), super::report::answer_score(p)?)))
        .collect();
    let outcome = RunOutcome {
        predictions,
        features: feats.len() as u64,
        featureless,
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
        logits: if args.save_logits { logits } else { Vec::new() },
        kept_features: Vec::new(),
    };
    Ok(Ran {
        outcome,
        url: None,
        binding: None,
        batch_size: 0,
        net: None,
        nbest: None,
        server_metrics: None,
        answer_scores,
    })
}

/// Connects to the server(s) and looks at the model: token ids or text.
pub(super) fn connect(
    args: &Args,
) -> anyhow::Result<(tokio::runtime::Runtime, bertqa::backend::Pool, Model)> {
    let model = args.model.as_deref().expect("clap requires --model");
    let rt = pipeline_runtime()?;
    let (client, bound) = rt.block_on(connect_pool_and_look(
        &args.run.server,
        &args.run.net,
        model,
        &args.model_version,
        &args.run.binding,
        &args.text,
    ))?;
    Ok((rt, client, bound))
}

/// Runs the questions against the server, journaled (resumed from the journal with
/// `--resume`) and stoppable by Ctrl-C. A run that does not complete writes its
/// partial results and fails with their summary.
pub(super) fn against_server(
    args: &Args,
    input: &mut Input,
    rt: &tokio::runtime::Runtime,
    client: bertqa::backend::Pool,
    bound: Model,
    host_stop: Option<CancellationToken>,
) -> anyhow::Result<Ran> {
    let model = bound.name();
    let mut config = run_config(args, input, &bound)?;
    input.fingerprint = resume::model_fingerprint(
        std::mem::take(&mut input.fingerprint),
        &bound,
        Some((config.infer.padding, args.run.load.dynamic_seq_len)),
    );
    let tokenizer = input
        .tokenizer
        .as_ref()
        .expect("a token model's run loads it");
    // Windows are cut by a builder made before the journal opens: a question that
    // cannot be cut (run_qa's rules) is an error with nothing written.
    let builder = bertqa::features::FeatureBuilder::for_rules(
        tokenizer.as_ref(),
        input.decode.postprocess,
        input.features,
        &input.dataset,
    )?;
    let (journal, known, decided) = open_journal(args, input)?;
    // A resumed run pads as the first one decided (its probe is not run again).
    if let Some(g) = config.infer.guard.as_mut() {
        g.decided = decided;
    }
    let (journal, stop) = guard_journal(journal, host_stop)?;
    let recorder = resume::Recorder::new(journal.clone(), input.decode.n_best_size);
    let observer = EvalObserver::new(args, Some(&recorder))?;
    let (outcome, server_metrics) = with_metrics(args, rt, bound.name(), bound.version(), || {
        pipeline::Run::new(rt, &client, bound.clone(), &input.dataset, &config)
            .tokenizer(tokenizer)
            .windows(builder)
            .observer(&observer)
            .known(known)
            .stop_on(stop)
            .run_partial()
    })?;
    let (outcome, stream, answer_scores) =
        finish(args, input, outcome, observer, &journal, &client)?;
    // The text report says so in a sentence of its own (`report::cpu_limit_line`).
    if let Some(w) = outcome
        .infer
        .client_bound_warning()
        .filter(|_| args.run.output.json)
    {
        eprintln!("warning: {w}");
    }
    if let Some(note) = outcome.infer.padding.note(model) {
        eprintln!("{}", name_flags(&note));
    }
    Ok(Ran {
        outcome,
        url: Some(args.run.server.url.join(",")),
        binding: Some(bound.clone()),
        batch_size: config.infer.batch_size,
        net: Some(client),
        nbest: Some(stream),
        server_metrics,
        answer_scores,
    })
}

/// The run's journal, shared with the signal handler (which writes the gathered
/// records before a second interrupt quits at once), and what Ctrl-C and SIGTERM cancel
/// (`host_stop`, a host program's token, instead of signals when given).
pub(super) fn guard_journal(
    journal: Journal,
    host_stop: Option<CancellationToken>,
) -> anyhow::Result<(Arc<Mutex<Journal>>, CancellationToken)> {
    let journal = Arc::new(Mutex::new(journal));
    let on_quit = {
        let journal = journal.clone();
        move || {
            // Never wait: a journal stuck in a write must not stop the quit.
            if let Ok(mut j) = journal.try_lock() {
                let _ = j.flush();
            }
            eprintln!(
                "quitting at once; the journal keeps every answered feature (rerun with --resume)"
            );
        }
    };
    let stop = match host_stop {
        Some(stop) => stop,
        None => resume::stop_on_signals(on_quit)?,
    };
    Ok((journal, stop))
}

/// Runs `run` with the server's metrics read around it (`--metrics-url`).
pub(super) fn with_metrics<T>(
    args: &Args,
    rt: &tokio::runtime::Runtime,
    model: &str,
    version: &str,
    run: impl FnOnce() -> T,
) -> anyhow::Result<(T, ServerMetrics)> {
    let key = bertqa::metrics::ModelKey {
        name: model.to_string(),
        version: version.to_string(),
    };
    let (scraper, choice) = rt.block_on(super::super::metrics::start(
        &args.metrics,
        &args.run.server,
        None,
        key,
    ))?;
    let opened = scraper.as_ref().map(|s| rt.block_on(s.now()));
    let done = run();
    let server_metrics = scraper.zip(opened).map(|(s, open)| {
        let close = rt.block_on(s.now());
        s.stop();
        (choice, s.span(&open, &close, open.at, close.at))
    });
    Ok((done, server_metrics))
}

/// The server's metrics over a run, when read.
pub(super) type ServerMetrics = Option<(bertqa::metrics::Choice, bertqa::metrics::SpanMetrics)>;

/// The end of a run: the progress bar cleared, the n-best stream and the answer scores
/// taken back. A run that did not complete writes its partial results and fails with
/// their summary.
pub(super) fn finish(
    args: &Args,
    input: &Input,
    outcome: PartialOutcome,
    observer: EvalObserver<'_>,
    journal: &Mutex<Journal>,
    pool: &bertqa::backend::Pool,
) -> anyhow::Result<(RunOutcome, decode::NbestStream, HashMap<String, f64>)> {
    observer.bar.finish();
    let answer_scores = observer
        .answer_scores
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
        })
        .unwrap_or_default();
    let stream = observer
        .nbest
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if outcome.error.is_none() && outcome.done() == input.dataset.examples.len() {
        return Ok((outcome.complete(&input.dataset)?, stream, answer_scores));
    }
    let _ = resume::lock(journal).sync();
    let mut outcome = outcome;
    let reason = outcome
        .error
        .as_ref()
        .map(super::super::errors::library_reason);
    let error = outcome
        .error
        .take()
        .map(|e| name_flags(&format!("{:#}", stopped(e, pool))));
    let partial = super::output::Partial {
        dir: &args.output_dir,
        data: &super::super::common::data_label(&args.data),
        dataset: &input.dataset,
        version_2: input.version_2,
        null_odds: input.null_odds(),
        na_prob_thresh: args.scoring.na_prob_thresh,
        fingerprint: &input.fingerprint,
        journaled: resume::lock(journal).features(),
    };
    let summary = write_partial(&partial, outcome, error, Some(stream))?;
    Err(super::super::errors::Classified::error(reason, summary))
}

/// The run's configuration for the model (`common::run_config`, keeping the logits when
/// asked to save them).
fn run_config(args: &Args, input: &Input, model: &Model) -> anyhow::Result<RunConfig> {
    let features = input.features;
    let mut config = common_run_config(&args.run.load, model, features, input.decode.clone())?;
    config.keep_logits = args.save_logits;
    check_padding(config.infer.padding, features.max_seq_length, model.name())?;
    Ok(config)
}

/// Opens the journal (continued with `--resume`): the journal, the logits it already
/// holds by unique id, and the padding decision it kept.
fn open_journal(
    args: &Args,
    input: &Input,
) -> anyhow::Result<(
    Journal,
    std::collections::HashMap<u64, bertqa::types::Logits>,
    Option<bool>,
)> {
    let (mut journal, mut journaled) =
        resume::open(&args.output_dir, args.resume, &input.fingerprint)?;
    if args.save_logits {
        // Compact records hold only what decoding reads: their features are sent again
        // for the logits file.
        let resent = journal.resend_compact(&mut journaled);
        if resent > 0 {
            eprintln!(
                "note: {resent} journaled features kept only their answer candidates; \
                 sending them again for --save-logits"
            );
        }
    } else {
        journal.compact_to(input.decode.n_best_size);
    }
    Ok((journal, journaled.logits, journaled.padding_decision))
}

/// Writes the answers and the scores, then the report (metrics.json, and stdout);
/// returns the gates that failed.
pub(super) fn report(
    args: &Args,
    session: &mut Session,
    input: &Input,
    ran: &mut Ran,
) -> anyhow::Result<Vec<String>> {
    let outcome = &mut ran.outcome;
    let dataset = &input.dataset;
    // The answers are written before scoring, so nothing computed is lost if the gold
    // answers cannot be scored.
    let mut files = write_predictions(
        &args.output_dir,
        &outcome.predictions,
        input.null_odds(),
        ran.nbest.take(),
    )?;
    if args.save_logits {
        bertqa::logits_io::save(&args.output_dir.join("logits.bin"), &outcome.logits)?;
        files.push("logits.bin".into());
    }
    let scores = score_with(
        dataset,
        &outcome.predictions,
        input.version_2,
        input.null_odds(),
        args.scoring.na_prob_thresh,
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e} (the predictions were written to {})",
            args.output_dir.display()
        )
    })?;
    write_per_question(&args.output_dir, &outcome.predictions, &scores)?;
    files.push("per_question.jsonl".into());
    let non_finite = outcome.infer.non_finite;
    let net = ran.net.as_ref();
    let mut report = EvalReport {
        data: super::super::common::data_label(&args.data),
        url: ran.url.take(),
        binding: ran.binding.take(),
        version_2: input.version_2,
        format: input.format,
        postprocess: input.decode.postprocess.as_str(),
        batch_size: ran.batch_size,
        batch_size_given: args.run.load.batch_size.is_some(),
        concurrency: args.run.load.concurrency.max(1),
        protocol: net.map(|p| p.first_client().protocol()),
        questions: dataset.examples.len(),
        features: outcome.features,
        featureless: outcome
            .featureless
            .iter()
            .map(|&i| dataset.examples[i].qas_id.clone())
            .collect(),
        scores,
        infer: if args.from_logits.is_some() {
            None
        } else {
            Some(std::mem::replace(&mut outcome.infer, InferReport::empty()))
        },
        phases: outcome.phases,
        wall: outcome.wall,
        gates: Vec::new(),
        output_dir: args.output_dir.clone(),
        files,
        retries: net.map(|p| p.retry_stats()),
        endpoints: net.map(|p| p.endpoint_reports()).unwrap_or_default(),
        non_finite,
        fingerprint: input.fingerprint.clone(),
        server_metrics: ran.server_metrics.take(),
        no_null_odds: input.no_null_odds.clone(),
    };
    if let Some((_, m)) = &report.server_metrics {
        for (_, w) in m.troubles() {
            eprintln!("warning: {w}");
        }
    }
    let nf = non_finite;
    if nf.values > 0 {
        eprintln!(
            "warning: {} NaN or infinite logits in {} features{} (treated as -inf for span choice)",
            nf.values,
            nf.features,
            report
                .binding
                .as_ref()
                .map(|b| format!(" from model {:?}", b.name()))
                .unwrap_or_default()
        );
    }
    report.gates = gates(args, &report);
    let json = Shown(&report).render(Format::Json);
    let metrics_path = args.output_dir.join("metrics.json");
    bertqa::output_file::write_atomic(&metrics_path, json.as_bytes())?;
    // Not one of the run's files: metrics.json does not list it.
    if let Some(path) = &args.html {
        let page =
            super::report::html_page(&report, dataset, &outcome.predictions, &ran.answer_scores);
        bertqa::output_file::write_atomic(path, &page)?;
    }
    // A host gets the document metrics.json holds, and the answers.
    session.keep(&Shown(&report));
    session.predictions(&outcome.predictions);
    // The text lists metrics.json among the outputs; the document lists the files
    // written before it.
    report.files.push("metrics.json".into());
    if args.from_logits.is_none() {
        resume::finish(&args.output_dir)?;
    }
    session.print(|| match report_format(args.run.output.json) {
        Format::Json => json,
        text => Shown(&report).render(text),
    })?;
    Ok(report
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(Gate::describe)
        .collect())
}

/// A dynamic-length model still cannot take more than --max-seq-length tokens from us,
/// and a fixed-length model must match the window length.
fn check_padding(padding: Padding, max_seq_length: usize, model: &str) -> anyhow::Result<()> {
    if let Padding::Fixed(n) = padding {
        if n < max_seq_length {
            anyhow::bail!(
                "model {:?} takes sequences of {n} tokens but --max-seq-length is {max_seq_length}; \
                 pass --max-seq-length {n}",
                model
            );
        }
    }
    Ok(())
}

/// Adds the run's retry counts (when there were any) to the error that stopped it.
fn stopped(e: bertqa::Error, pool: &bertqa::backend::Pool) -> anyhow::Error {
    let s = pool.retry_stats();
    if s.retries.is_empty() {
        return e.into();
    }
    let by_code = s
        .retries
        .iter()
        .map(|(c, n)| format!("{c} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    anyhow::Error::new(e).context(format!(
        "evaluation stopped after {} retries in this run ({by_code})",
        s.total_retries()
    ))
}

/// The indicatif progress bar on stderr: hidden off a TTY and with --quiet.
struct Bar(indicatif::ProgressBar);

impl Bar {
    fn new(quiet: bool) -> Bar {
        if quiet || !std::io::stderr().is_terminal() {
            return Bar(indicatif::ProgressBar::hidden());
        }
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} features answered \
                 ({per_sec}, eta {eta})",
            )
            .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Bar(bar)
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Bar {
    fn built(&self, n: u64) {
        self.0.inc_length(n);
    }

    fn answered(&self, n: u64) {
        self.0.inc(n);
    }
}

/// What `eval` attaches to a run: the progress bar, the journal, and the n-best lists
/// streamed into their file as questions are decoded (each answer's score kept first).
pub(super) struct EvalObserver<'a> {
    bar: Bar,
    /// A token model's run's journal of answers.
    journal: Option<&'a resume::Recorder>,
    /// A text model's run's journal of replies.
    replies: Option<&'a Mutex<Journal>>,
    nbest: std::sync::Mutex<decode::NbestStream>,
    /// Kept only for `--html` (`None` otherwise).
    answer_scores: Option<Mutex<HashMap<String, f64>>>,
}

impl<'a> EvalObserver<'a> {
    /// The observer of a run writing into `--output-dir`, journaled by `journal`.
    pub(super) fn new(args: &Args, journal: Option<&'a resume::Recorder>) -> anyhow::Result<Self> {
        Ok(EvalObserver {
            bar: Bar::new(args.run.output.quiet || args.run.output.json),
            journal,
            replies: None,
            nbest: Mutex::new(decode::NbestStream::create(&args.output_dir)?),
            answer_scores: args.html.as_ref().map(|_| Mutex::new(HashMap::new())),
        })
    }
}

impl<'a> EvalObserver<'a> {
    /// Journals what a text model says about each question in `journal`.
    pub(super) fn with_replies(mut self, journal: &'a Mutex<Journal>) -> Self {
        self.replies = Some(journal);
        self
    }
}

impl RunObserver for EvalObserver<'_> {
    fn on_reply(
        &self,
        example_index: usize,
        reply: &bertqa::backend::text::TextReply,
    ) -> bertqa::Result<()> {
        self.replies.map_or(Ok(()), |j| {
            resume::lock(j).append_text(example_index as u64, reply)
        })
    }

    fn built(&self, n: u64) {
        self.bar.built(n);
    }

    fn answered(&self, n: u64) {
        self.bar.answered(n);
    }

    fn answer_needs(&self) -> pipeline::AnswerNeeds {
        self.journal.map(|j| j.needs()).unwrap_or_default()
    }

    fn on_answer(&self, scores: &decode::Scores) -> bertqa::Result<()> {
        self.journal.map_or(Ok(()), |j| j.answer(scores))
    }

    fn on_padding_decided(&self, dynamic: bool) -> bertqa::Result<()> {
        self.journal.map_or(Ok(()), |j| j.padding_decided(dynamic))
    }

    fn on_decoded(&self, example_index: usize, prediction: &mut Prediction) {
        if let (Some(scores), Some(score)) =
            (&self.answer_scores, super::report::answer_score(prediction))
        {
            scores
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(prediction.qas_id.clone(), score);
        }
        self.nbest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(example_index, prediction);
    }
}
