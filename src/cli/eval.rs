//! `bertqa eval`: the whole SQuAD evaluation against Triton (or, with `--from-logits`,
//! from saved logits without a server). Writes the reference's output files plus
//! `metrics.json` and `per_question.jsonl`, prints a report (text or `--json`, schema
//! in `schema/eval.schema.json`), and turns the gates into exit code 1.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::args::{PipelineArgs, DECODING, GATES, INPUT, MODEL, OUTPUT, RUN};
use super::common::{
    connect_pool_and_bind, decode_config, feature_config, load_data_digest, load_tokenizer,
};
use super::common::{pipeline_runtime, print_stdout, Outcome};
use crate::backend::Binding;
use crate::decode::{self, Prediction};
use crate::evaluate::{self, NaProbs, Predictions, ScoreConfig, Scores};
use crate::pipeline::{self, InferReport, Padding, Phases, Progress};
use crate::types::Dataset;

/// How many ids are named when questions are listed in a report.
const FIRST_IDS: usize = 5;

/// Evaluate a model on a SQuAD file (EM/F1, throughput, latency).
#[derive(Debug, clap::Args)]
#[command(mut_arg("url", |a| a.help(super::args::URL_SPREAD_HELP)))]
pub struct Args {
    /// SQuAD-format file (v1.1 or v2.0)
    #[arg(long, value_name = "FILE", help_heading = INPUT)]
    pub data: PathBuf,
    /// First N questions only
    #[arg(long, value_name = "N", help_heading = INPUT)]
    pub limit: Option<usize>,
    /// Decode logits saved by --save-logits instead of asking a server
    #[arg(long, value_name = "FILE", conflicts_with = "model", help_heading = INPUT)]
    pub from_logits: Option<PathBuf>,
    /// Model to evaluate (not with --from-logits)
    #[arg(long, required_unless_present = "from_logits", help_heading = MODEL)]
    pub model: Option<String>,
    /// Model version (default: the server's choice)
    #[arg(long, default_value = "", hide_default_value = true, help_heading = MODEL)]
    pub model_version: String,
    #[command(flatten)]
    pub run: PipelineArgs,
    #[command(flatten, next_help_heading = DECODING)]
    pub scoring: super::args::ScoringArgs,
    /// Continue an interrupted run from the journal in --output-dir
    #[arg(long, conflicts_with = "from_logits", help_heading = RUN)]
    pub resume: bool,
    /// Evaluate only the I-th of N equal slices of the questions (see `bertqa merge`)
    #[arg(long, value_name = "I/N", help_heading = RUN)]
    pub shard: Option<crate::shard::Shard>,
    /// Directory of the answers, metrics.json and per_question.jsonl
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub output_dir: PathBuf,
    /// Also save every window's logits (DIR/logits.bin), for --from-logits
    #[arg(long, help_heading = OUTPUT)]
    pub save_logits: bool,
    /// Exit 1 when exact match (percent) is below X
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub min_exact: Option<f64>,
    /// Exit 1 when F1 (percent) is below X
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub min_f1: Option<f64>,
    /// Exit 1 when the p99 request latency is above X milliseconds
    #[arg(long, value_name = "X", help_heading = GATES)]
    pub max_p99_ms: Option<f64>,
}

/// One gate and how it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The flag, e.g. `--min-f1`.
    pub flag: &'static str,
    pub threshold: f64,
    pub value: f64,
    pub passed: bool,
}

impl Gate {
    fn describe(&self) -> String {
        format!(
            "{} {}: measured {:.3}",
            self.flag, self.threshold, self.value
        )
    }
}

/// Everything a finished evaluation reports.
#[derive(Debug)]
pub struct EvalReport {
    pub data: PathBuf,
    pub url: Option<String>,
    pub binding: Option<Binding>,
    pub version_2: bool,
    pub postprocess: &'static str,
    pub batch_size: usize,
    pub concurrency: usize,
    pub questions: usize,
    pub features: u64,
    pub featureless: Vec<String>,
    pub scores: Scores,
    pub infer: Option<InferReport>,
    pub phases: Phases,
    pub wall: Duration,
    pub gates: Vec<Gate>,
    pub output_dir: PathBuf,
    pub files: Vec<String>,
    /// Retries and failures by code (`None` without a server).
    pub retries: Option<crate::backend::RetryStats>,
    /// Each endpoint's figures (empty without a server).
    pub endpoints: Vec<crate::backend::pool::EndpointReport>,
    /// NaN or infinite logits (decoded as −∞).
    pub non_finite: crate::decode::non_finite::NonFinite,
    /// The run's fingerprint (data digest, settings, model): what `merge` checks.
    pub fingerprint: Value,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let (mut dataset, data_sha256) =
        load_data_digest(&args.data, args.run.window.strict, args.limit)?;
    let tokenizer = load_tokenizer(&args.run.tokenizer)?;
    // The whole file decides the v2 rules, so every shard uses the same ones.
    let version_2 = args.run.decode.version_2_with_negative || dataset.looks_like_v2();
    if let Some(shard) = args.shard {
        shard.apply(&mut dataset);
        if dataset.examples.is_empty() {
            anyhow::bail!(
                "--shard {shard}: {} has too few questions for {} shards",
                args.data.display(),
                shard.count
            );
        }
    }
    let lower_case = crate::types::TokenText::lower_case(&tokenizer);
    let decode = decode_config(&args.run.decode, version_2, lower_case);
    let features = feature_config(&args.run.window)?;
    std::fs::create_dir_all(&args.output_dir).map_err(|e| crate::Error::io(&args.output_dir, e))?;
    let mut fingerprint = super::resume::base_fingerprint(
        data_sha256,
        args.limit,
        args.shard,
        dataset.examples.len(),
        &args.run,
        version_2,
        lower_case,
    )?;

    let mut net: Option<crate::backend::Pool> = None;
    // A live run streams the n-best lists into their file as questions are decoded.
    let mut nbest_stream: Option<decode::NbestStream> = None;
    let (outcome, url, binding, batch_size) = match &args.from_logits {
        Some(path) => {
            let mut logits = crate::logits_io::load(path)?;
            let non_finite = crate::decode::non_finite::sanitize_all(&mut logits);
            let t = Instant::now();
            let (feats, featureless) = crate::features::build(&tokenizer, features, &dataset)?;
            let features_s = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let predictions = decode::decode(&decode, &dataset, &feats, &logits, &tokenizer)?;
            let outcome = pipeline::RunOutcome {
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
            (outcome, None, None, 0)
        }
        None => {
            let model = args.model.as_deref().expect("clap requires --model");
            let rt = pipeline_runtime()?;
            let (client, binding) = rt.block_on(connect_pool_and_bind(
                &args.run.server,
                &args.run.net,
                model,
                &args.model_version,
                &args.run.binding,
            ))?;
            let padding =
                super::common::model_padding(&args.run.load, &binding, features.max_seq_length);
            let mut config = super::common::run_config(
                &args.run.load,
                &binding,
                features,
                decode.clone(),
                padding,
            )?;
            config.keep_logits = args.save_logits;
            let batch_size = config.infer.batch_size;
            check_padding(padding, features.max_seq_length, &binding)?;
            fingerprint = super::resume::model_fingerprint(
                fingerprint,
                &binding,
                padding,
                args.run.load.dynamic_seq_len,
            );
            let (mut journal, mut journaled) =
                super::resume::open(&args.output_dir, args.resume, &fingerprint)?;
            if args.save_logits {
                // Compact records hold only what decoding reads: their features are sent
                // again for the logits file.
                for id in &journaled.compact {
                    journaled.logits.remove(id);
                }
                if !journaled.compact.is_empty() {
                    eprintln!(
                        "note: {} journaled features kept only their answer candidates; \
                         sending them again for --save-logits",
                        journaled.compact.len()
                    );
                }
                journal.uncount(journaled.compact.len() as u64);
            } else {
                journal.compact_to(decode.n_best_size);
            }
            // A resumed run pads as the first one decided (its probe is not run again).
            let decided = pipeline::journaled_padding_decision(&mut journaled.logits);
            let decision_journaled = std::cell::Cell::new(decided.is_some());
            if let Some(g) = config.infer.guard.as_mut() {
                g.decided = decided;
            }
            // Shared with the signal handler, which writes the gathered records before
            // a second interrupt quits at once.
            let journal = std::sync::Arc::new(std::sync::Mutex::new(journal));
            let mut record = |l: &crate::types::Logits, c: Option<&decode::Candidates>| {
                if l.unique_id == pipeline::PADDING_DECISION_ID {
                    decision_journaled.set(true);
                }
                super::resume::lock(&journal).append_ranked(l, c)
            };
            let on_quit = {
                let journal = journal.clone();
                move || {
                    // Never wait: a journal stuck in a write must not stop the quit.
                    if let Ok(mut j) = journal.try_lock() {
                        let _ = j.flush();
                    }
                }
            };
            let record_from_candidates =
                super::resume::lock(&journal).compacts() == Some(decode.n_best_size);
            let mut stream = decode::NbestStream::create(&args.output_dir)?;
            let mut stream_out = |index: usize, p: &mut decode::Prediction| stream.push(index, p);
            let control = pipeline::Control {
                known: journaled.logits,
                record: Some(&mut record),
                stop: Some(super::resume::stop_on_signals(on_quit)?),
                on_decoded: Some(&mut stream_out),
                record_from_candidates,
            };
            let bar = Bar::new(args.run.output.quiet || args.run.output.json);
            let binding = Arc::new(binding);
            let outcome = pipeline::run_controlled(
                &rt,
                &client,
                binding.clone(),
                &dataset,
                &tokenizer,
                &config,
                &bar,
                control,
            );
            bar.finish();
            let outcome = if outcome.error.is_none() && outcome.done() == dataset.examples.len() {
                outcome.complete(&dataset)?
            } else {
                let _ = super::resume::lock(&journal).sync();
                let mut outcome = outcome;
                let error = outcome
                    .error
                    .take()
                    .map(|e| super::flags::name_flags(&format!("{:#}", stopped(e, &client))));
                let partial = super::resume::Partial {
                    dir: &args.output_dir,
                    data: &args.data,
                    dataset: &dataset,
                    version_2,
                    na_prob_thresh: args.scoring.na_prob_thresh,
                    fingerprint: &fingerprint,
                    // Features only: the padding decision is a record too.
                    journaled: super::resume::lock(&journal).records()
                        - u64::from(decision_journaled.get()),
                };
                anyhow::bail!(super::resume::write_partial(
                    &partial,
                    outcome,
                    error,
                    Some(stream)
                )?);
            };
            nbest_stream = Some(stream);
            if let Some(w) = outcome.infer.client_bound_warning() {
                eprintln!("warning: {w}");
            }
            if let Some(note) = outcome.infer.padding.note(model) {
                eprintln!("{}", super::flags::name_flags(&note));
            }
            net = Some(client);
            (
                outcome,
                Some(args.run.server.url.join(",")),
                Some((*binding).clone()),
                batch_size,
            )
        }
    };

    // The answers are written before scoring, so nothing computed is lost if the gold
    // answers cannot be scored.
    let mut files = write_predictions(
        &args.output_dir,
        &outcome.predictions,
        version_2,
        nbest_stream,
    )?;
    if args.save_logits {
        crate::logits_io::save(&args.output_dir.join("logits.bin"), &outcome.logits)?;
        files.push("logits.bin".into());
    }
    let scores = score_predictions(
        &dataset,
        &outcome.predictions,
        version_2,
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
    let mut report = EvalReport {
        data: args.data.clone(),
        url,
        binding,
        version_2,
        postprocess: match args.run.decode.postprocess {
            super::args::Postprocess::Nvidia => "nvidia",
            super::args::Postprocess::Hf => "hf",
        },
        batch_size,
        concurrency: args.run.load.concurrency.max(1),
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
            Some(outcome.infer)
        },
        phases: outcome.phases,
        wall: outcome.wall,
        gates: Vec::new(),
        output_dir: args.output_dir.clone(),
        files,
        retries: net.as_ref().map(|p| p.retry_stats()),
        endpoints: net
            .as_ref()
            .map(|p| p.endpoint_reports())
            .unwrap_or_default(),
        non_finite,
        fingerprint: fingerprint.to_json(),
    };
    let nf = non_finite;
    if nf.values > 0 {
        eprintln!(
            "warning: {} NaN or infinite logits in {} features{} (treated as -inf for span choice)",
            nf.values,
            nf.features,
            report
                .binding
                .as_ref()
                .map(|b| format!(" from model {:?}", b.model))
                .unwrap_or_default()
        );
    }
    report.gates = gates(&args, &report);
    let json = render_json(&report);
    let metrics_path = args.output_dir.join("metrics.json");
    decode::write_atomic(&metrics_path, format!("{json:#}\n").as_bytes())?;
    report.files.push("metrics.json".into());
    if args.from_logits.is_none() {
        super::resume::finish(&args.output_dir)?;
    }
    if args.run.output.json {
        print_stdout(&format!("{json:#}\n"))?;
    } else {
        print_stdout(&render_text(&report))?;
    }
    let failed: Vec<String> = report
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(Gate::describe)
        .collect();
    // The process ends after this command: freeing each question's strings one by one
    // (answers, n-best texts, the paragraphs' words) would cost more CPU than the rest
    // of the run's bookkeeping, so the largest structures are left for the OS to
    // reclaim.
    std::mem::forget(outcome.predictions);
    std::mem::forget(outcome.logits);
    std::mem::forget(dataset);
    std::mem::forget(tokenizer);
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}

/// A dynamic-length model still cannot take more than --max-seq-length tokens from us,
/// and a fixed-length model must match the window length.
fn check_padding(padding: Padding, max_seq_length: usize, binding: &Binding) -> anyhow::Result<()> {
    if let Padding::Fixed(n) = padding {
        if n < max_seq_length {
            anyhow::bail!(
                "model {:?} takes sequences of {n} tokens but --max-seq-length is {max_seq_length}; \
                 pass --max-seq-length {n}",
                binding.model
            );
        }
    }
    Ok(())
}

/// Scores decoded predictions as the official scripts score predictions.json (with
/// null_odds.json as the na-prob file for v2).
pub fn score_predictions(
    dataset: &Dataset,
    predictions: &[Prediction],
    version_2: bool,
    na_prob_thresh: f64,
) -> crate::Result<Scores> {
    let preds = Predictions::from_decoded(predictions);
    let na = version_2.then(|| NaProbs::from_decoded(predictions));
    evaluate::score(
        dataset,
        &preds,
        na.as_ref(),
        &ScoreConfig {
            version_2_with_negative: version_2,
            na_prob_thresh,
        },
    )
}

/// Writes the reference's files (the n-best file finished from `nbest` when its lists
/// were streamed there); returns their names.
pub fn write_predictions(
    dir: &Path,
    predictions: &[Prediction],
    version_2: bool,
    nbest: Option<decode::NbestStream>,
) -> crate::Result<Vec<String>> {
    decode::write_outputs_with(dir, predictions, version_2, nbest)?;
    let mut files = vec![
        "predictions.json".to_string(),
        "nbest_predictions.json".to_string(),
    ];
    if version_2 {
        files.push("null_odds.json".into());
    }
    Ok(files)
}

/// Writes per_question.jsonl: id, prediction, exact, f1, has_answer per question.
pub fn write_per_question(
    dir: &Path,
    predictions: &[Prediction],
    scores: &Scores,
) -> crate::Result<()> {
    let lines = render_per_question(predictions, scores);
    decode::write_atomic(&dir.join("per_question.jsonl"), &lines)
}

/// The lines of per_question.jsonl: serde_json's compact rendering of
/// `{"id", "prediction", "exact", "f1", "has_answer"}` in that order, each value
/// serialized straight into the buffer (the same serializer a `Value` goes through: an
/// escaped string, a float as ryu writes it or `null` when not finite, a bool).
fn render_per_question(predictions: &[Prediction], scores: &Scores) -> Vec<u8> {
    let mut out = Vec::with_capacity(scores.questions.len() * 96);
    for (p, q) in predictions.iter().zip(&scores.questions) {
        put(&mut out, "{\"id\":", q.qas_id.as_str());
        put(&mut out, ",\"prediction\":", p.answer.as_str());
        put(&mut out, ",\"exact\":", &q.exact);
        put(&mut out, ",\"f1\":", &q.f1);
        put(&mut out, ",\"has_answer\":", &q.has_answer);
        out.extend_from_slice(b"}\n");
    }
    out
}

/// `prefix`, then `value` as serde_json writes it.
fn put<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, prefix: &str, value: &T) {
    out.extend_from_slice(prefix.as_bytes());
    // Writing into a Vec cannot fail, and strings, floats and bools always serialize.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn gates(args: &Args, r: &EvalReport) -> Vec<Gate> {
    let mut g = Vec::new();
    if let Some(t) = args.min_exact {
        let v = r.scores.metrics.exact();
        g.push(Gate {
            flag: "--min-exact",
            threshold: t,
            value: v,
            passed: v >= t,
        });
    }
    if let Some(t) = args.min_f1 {
        let v = r.scores.metrics.f1();
        g.push(Gate {
            flag: "--min-f1",
            threshold: t,
            value: v,
            passed: v >= t,
        });
    }
    if let Some(t) = args.max_p99_ms {
        let v = r.infer.as_ref().map_or(0.0, |i| i.latency_ms(0.99));
        g.push(Gate {
            flag: "--max-p99-ms",
            threshold: t,
            value: v,
            passed: v <= t,
        });
    }
    g
}

fn rate(n: f64, wall: Duration) -> f64 {
    let s = wall.as_secs_f64();
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

/// Rounds for the report (JSON keeps 6 decimals: microsecond-level time).
fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The `--json` document (also written as metrics.json); described by
/// `schema/eval.schema.json`.
pub fn render_json(r: &EvalReport) -> Value {
    let latency = match &r.infer {
        Some(i) if i.requests > 0 => json!({
            "p50": r6(i.latency_ms(0.50)),
            "p90": r6(i.latency_ms(0.90)),
            "p95": r6(i.latency_ms(0.95)),
            "p99": r6(i.latency_ms(0.99)),
            "max": r6(i.latency_us.max() as f64 / 1000.0),
            "mean": r6(i.latency_us.mean() / 1000.0),
        }),
        _ => Value::Null,
    };
    let model = match &r.binding {
        Some(b) => json!({
            "name": b.model,
            "version": b.version,
            "url": r.url,
            "platform": b.platform,
            "max_batch_size": b.max_batch_size,
            "binding": serde_json::to_value(b).unwrap_or(Value::Null),
        }),
        None => Value::Null,
    };
    json!({
        "schema": 1,
        "data": r.data.display().to_string(),
        "version_2_with_negative": r.version_2,
        "postprocess": r.postprocess,
        "metrics": r.scores.metrics.to_json(),
        "questions": r.questions,
        "features": r.features,
        "requests": r.infer.as_ref().map_or(0, |i| i.requests),
        "batch_size": r.batch_size,
        "concurrency": r.concurrency,
        "wall_s": r6(r.wall.as_secs_f64()),
        "throughput": {
            "features_per_s": r6(rate(r.features as f64, r.wall)),
            "questions_per_s": r6(rate(r.questions as f64, r.wall)),
        },
        "latency_ms": latency,
        "phases_s": {
            "features": r6(r.phases.features_s),
            "inference": r6(r.phases.inference_s),
            "decode": r6(r.phases.decode_s),
        },
        "client": match &r.infer {
            Some(i) => json!({
                "starved_s": r6(i.starved.as_secs_f64()),
                "decode_lag_s": r6(i.decode_lag.as_secs_f64()),
                "limited_s": r6(i.client_limited().as_secs_f64()),
                "cpu_limited": i.client_bound_warning().is_some(),
            }),
            None => Value::Null,
        },
        "padding": match &r.infer {
            Some(i) => padding_json(&i.padding),
            None => Value::Null,
        },
        "shared_memory": match &r.infer {
            Some(i) => shared_memory_json(&i.shared_memory),
            None => Value::Null,
        },
        "retries": retries_json(r.retries.as_ref()),
        "non_finite_logits": {
            "values": r.non_finite.values,
            "features": r.non_finite.features,
        },
        "endpoints": r.endpoints.iter().map(|e| endpoint_json(e, r.wall)).collect::<Vec<_>>(),
        "missing_predictions": {
            "count": r.scores.missing.len(),
            "first_ids": r.scores.missing.iter().take(FIRST_IDS).collect::<Vec<_>>(),
        },
        "featureless_questions": {
            "count": r.featureless.len(),
            "first_ids": r.featureless.iter().take(FIRST_IDS).collect::<Vec<_>>(),
        },
        "model": model,
        "gates": r.gates.iter().map(|g| json!({
            "flag": g.flag, "threshold": g.threshold, "value": r6(g.value), "passed": g.passed,
        })).collect::<Vec<_>>(),
        "output_dir": r.output_dir.display().to_string(),
        "files": r.files,
        "run": r.fingerprint,
    })
}

/// The `padding` object of metrics.json (also used by `compare`).
pub(crate) fn padding_json(p: &crate::pipeline::PaddingReport) -> Value {
    json!({
        "mode": p.mode(),
        "seq_len": p.fixed_len,
        "probe_features": p.probe_features,
        "probe_unsafe_features": p.probe_unsafe,
        "displaced_features": p.displaced,
    })
}

/// The text report's padding line.
fn padding_line(p: &crate::pipeline::PaddingReport) -> String {
    let probe = match (p.probe_features, p.probe_unsafe) {
        (0, _) => String::new(),
        (n, 0) => format!("; probe of {n} features: shorter padding keeps every answer"),
        (n, u) => format!("; probe of {n} features: shorter padding would change {u}"),
    };
    let displaced = if p.displaced > 0 {
        format!(
            "; {} features had real positions pushed out of the top n-best by padding",
            p.displaced
        )
    } else {
        String::new()
    };
    match p.fixed_len {
        Some(n) => format!("{} to {n}{probe}{displaced}", p.mode()),
        None => format!(
            "{} (each batch to its longest feature){probe}{displaced}",
            p.mode()
        ),
    }
}

/// The text report's line on how requests travelled (`--transport`), when the run had
/// a server.
pub(crate) fn requests_line(endpoints: &[crate::backend::pool::EndpointReport]) -> Option<String> {
    use crate::backend::Transport;
    let first = endpoints.first()?;
    let connections: usize = endpoints.iter().map(|e| e.connections).sum();
    let unary: usize = endpoints.iter().map(|e| e.unary_connections).sum();
    Some(match (first.transport, unary) {
        (Transport::Unary, _) => "one ModelInfer call each".into(),
        (Transport::Stream, 0) => "on one ModelStreamInfer stream per connection".into(),
        (Transport::Stream, n) => format!(
            "on one ModelStreamInfer stream per connection; {n} of {connections} connections \
             went unary after the stream answered with an error"
        ),
    })
}

/// The text report's line on how input tensors travelled.
pub(crate) fn inputs_line(m: &crate::pipeline::SharedMemoryReport) -> String {
    let used = match m.outputs {
        true => "through shared memory, outputs too",
        false => "through shared memory, outputs in each response",
    };
    match (m.used, &m.note) {
        (true, None) => used.into(),
        (true, Some(note)) => format!("{used} ({note})"),
        (false, None) => "in each message".into(),
        (false, Some(note)) => format!("in each message (no shared memory: {note})"),
    }
}

/// The `shared_memory` object of metrics.json.
pub(crate) fn shared_memory_json(m: &crate::pipeline::SharedMemoryReport) -> Value {
    json!({ "used": m.used, "outputs": m.outputs, "note": m.note })
}

fn retries_json(stats: Option<&crate::backend::RetryStats>) -> Value {
    let default = crate::backend::RetryStats::default();
    let s = stats.unwrap_or(&default);
    json!({
        "total": s.total_retries(),
        "by_code": s.retries,
        "failed_requests": s.total_failures(),
        "failures_by_code": s.failures,
    })
}

fn endpoint_json(e: &crate::backend::pool::EndpointReport, wall: Duration) -> Value {
    let q = |x: f64| {
        if e.latency_us.is_empty() {
            0.0
        } else {
            r6(e.latency_us.value_at_quantile(x) as f64 / 1000.0)
        }
    };
    json!({
        "url": e.url,
        "connections": e.connections,
        "transport": e.transport.as_str(),
        "unary_connections": e.unary_connections,
        "requests": e.requests,
        "features": e.features,
        "features_per_s": r6(rate(e.features as f64, wall)),
        "latency_ms": {
            "p50": q(0.5),
            "p99": q(0.99),
            "mean": r6(if e.latency_us.is_empty() { 0.0 } else { e.latency_us.mean() / 1000.0 }),
        },
        "errors": {
            "total": e.errors.values().sum::<u64>(),
            "by_code": e.errors,
        },
        "taken_out": e.taken_out,
        "healthy_at_end": e.healthy,
    })
}

/// Adds the run's retry counts (when there were any) to the error that stopped it.
fn stopped(e: crate::Error, pool: &crate::backend::Pool) -> anyhow::Error {
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

/// The human report.
pub fn render_text(r: &EvalReport) -> String {
    let mut s = String::new();
    let rules = if r.version_2 {
        "SQuAD 2.0 rules"
    } else {
        "SQuAD 1.1 rules"
    };
    match (&r.binding, &r.url) {
        (Some(b), Some(url)) => {
            let _ = writeln!(
                s,
                "model        {} at {} ({}, batch {}, concurrency {})",
                b.model, url, b.platform, r.batch_size, r.concurrency
            );
        }
        _ => {
            let _ = writeln!(s, "model        (decoded from saved logits)");
        }
    }
    let _ = writeln!(
        s,
        "data         {} ({rules}, postprocess {}): {} questions, {} features",
        r.data.display(),
        r.postprocess,
        r.questions,
        r.features
    );
    let _ = writeln!(s);
    for (k, v) in r.scores.metrics.official() {
        match v {
            evaluate::MetricValue::Float(x) => {
                let _ = writeln!(s, "{k:<18} {x:>10.3}");
            }
            evaluate::MetricValue::Count(n) => {
                let _ = writeln!(s, "{k:<18} {n:>10}");
            }
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "wall time    {:.3} s   throughput {:.1} features/s, {:.1} questions/s",
        r.wall.as_secs_f64(),
        rate(r.features as f64, r.wall),
        rate(r.questions as f64, r.wall)
    );
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0) {
        let _ = writeln!(
            s,
            "latency      p50 {:.2}  p90 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}  mean {:.2} ms \
             ({} requests, each timed from send to response)",
            i.latency_ms(0.5),
            i.latency_ms(0.9),
            i.latency_ms(0.95),
            i.latency_ms(0.99),
            i.latency_us.max() as f64 / 1000.0,
            i.latency_us.mean() / 1000.0,
            i.requests
        );
    }
    let _ = writeln!(
        s,
        "phases       features {:.3} s, inference {:.3} s, decode {:.3} s (overlapped)",
        r.phases.features_s, r.phases.inference_s, r.phases.decode_s
    );
    if let Some(rs) = &r.retries {
        if rs.total_retries() + rs.total_failures() > 0 {
            let by = |m: &std::collections::BTreeMap<String, u64>| {
                m.iter()
                    .map(|(c, n)| format!("{c} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                s,
                "retries      {} ({}); failed requests {}{}",
                rs.total_retries(),
                by(&rs.retries),
                rs.total_failures(),
                if rs.failures.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", by(&rs.failures))
                }
            );
        }
    }
    if r.endpoints.len() > 1 || r.endpoints.iter().any(|e| !e.errors.is_empty()) {
        for e in &r.endpoints {
            let _ = writeln!(
                s,
                "endpoint     {}: {} requests, {} features, {:.1} features/s, p50 {:.2} ms, \
                 {} errors, taken out {} times, {} connection(s)",
                e.url,
                e.requests,
                e.features,
                rate(e.features as f64, r.wall),
                if e.latency_us.is_empty() {
                    0.0
                } else {
                    e.latency_us.value_at_quantile(0.5) as f64 / 1000.0
                },
                e.errors.values().sum::<u64>(),
                e.taken_out,
                e.connections
            );
        }
    }
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0) {
        let _ = writeln!(s, "padding      {}", padding_line(&i.padding));
        let _ = writeln!(s, "inputs       {}", inputs_line(&i.shared_memory));
        if let Some(line) = requests_line(&r.endpoints) {
            let _ = writeln!(s, "requests     {line}");
        }
    }
    if r.non_finite.values > 0 {
        let _ = writeln!(
            s,
            "non-finite   {} NaN or infinite logits in {} features (treated as -inf)",
            r.non_finite.values, r.non_finite.features
        );
    }
    if let Some(i) = r.infer.as_ref().filter(|i| i.requests > 0) {
        let _ = writeln!(
            s,
            "client       limited the run {:.3} s (sender waited {:.3} s for features, decoding \
             ended {:.3} s after the last response){}",
            i.client_limited().as_secs_f64(),
            i.starved.as_secs_f64(),
            i.decode_lag.as_secs_f64(),
            if i.client_bound_warning().is_some() {
                ": bertqa's CPU was the limit"
            } else {
                ""
            }
        );
    }
    if !r.scores.missing.is_empty() {
        let _ = writeln!(
            s,
            "missing      {} questions without a prediction (scored 0): {}",
            r.scores.missing.len(),
            r.scores
                .missing
                .iter()
                .take(FIRST_IDS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !r.featureless.is_empty() {
        let _ = writeln!(
            s,
            "no features  {} questions whose context has no word pieces: {}",
            r.featureless.len(),
            r.featureless
                .iter()
                .take(FIRST_IDS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        s,
        "outputs      {}/{{{}}}",
        r.output_dir.display(),
        r.files.join(",")
    );
    for g in &r.gates {
        let _ = writeln!(
            s,
            "gate         {} {}",
            g.describe(),
            if g.passed { "passed" } else { "FAILED" }
        );
    }
    s
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

impl Progress for Bar {
    fn built(&self, n: u64) {
        self.0.inc_length(n);
    }
    fn answered(&self, n: u64) {
        self.0.inc(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::{Metrics, QuestionScore};

    /// The direct rendering equals `json!({...}).to_string()` per line: escapes,
    /// non-ASCII, floats ryu writes in exponent form, and non-finite values (`null`).
    #[test]
    fn per_question_lines_equal_serde_json_values() {
        let cases: [(&str, &str, f64, f64, bool); 6] = [
            ("q1", "Steve Smith", 1.0, 1.0, true),
            (
                "q\"2\\",
                "tab\there\nnew \u{1} \u{7f} é ☃ \u{2028}",
                0.0,
                2.0 / 3.0,
                false,
            ),
            ("", "", 0.0, -0.0, true),
            ("q4", "x", 1e-7, 1e22, true),
            ("q5", "y", f64::NAN, f64::INFINITY, false),
            ("q6", "z", 0.1 + 0.2, 123456789.125, true),
        ];
        let predictions: Vec<Prediction> = cases
            .iter()
            .map(|&(id, answer, ..)| Prediction {
                qas_id: id.to_string(),
                answer: answer.to_string(),
                nbest: Vec::new(),
                null_odds: None,
            })
            .collect();
        let scores = Scores {
            metrics: Metrics::V1 {
                exact_match: 0.0,
                f1: 0.0,
            },
            questions: cases
                .iter()
                .map(|&(id, _, exact, f1, has_answer)| QuestionScore {
                    qas_id: id.to_string(),
                    has_answer,
                    predicted: true,
                    exact,
                    f1,
                })
                .collect(),
            missing: Vec::new(),
            unknown_predictions: 0,
        };
        let mut want = String::new();
        for (p, q) in predictions.iter().zip(&scores.questions) {
            let line = json!({
                "id": q.qas_id,
                "prediction": p.answer,
                "exact": q.exact,
                "f1": q.f1,
                "has_answer": q.has_answer,
            });
            want.push_str(&line.to_string());
            want.push('\n');
        }
        let got = render_per_question(&predictions, &scores);
        assert_eq!(String::from_utf8(got).unwrap(), want);
    }
}
