//! The module functions of the package (`bertqa.evaluate`, `ask`, `compare`, `score`):
//! each reads its options into the library's values ([`crate::settings`]) and makes
//! one library call, the GIL released; its report comes back as the document the
//! command prints with `--json`. A failure raises the exception of the command's exit
//! reason for it, with the command's sentence ([`bertqa_cli::embed::failure`]).

use std::path::{Path, PathBuf};

use bertqa::client::{compare_deployments, Blocking, CompareOptions, Deployment};
use bertqa::data::Format;
use bertqa::report::Render as _;
use bertqa::{EvalData, EvalOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio_util::sync::CancellationToken;

use crate::client::failure;
use crate::client::{from_json, raise};
use crate::settings::{self, Options};

/// Data as Python gives it: paths (`"paths"`, [path, ...]) or the bytes of one file
/// read in memory (`"bytes"`, bytes, `"squad"` or `"rows"`, label).
#[derive(FromPyObject)]
pub(crate) enum Data {
    #[pyo3(transparent)]
    Paths(Vec<PathBuf>),
    Bytes(Vec<u8>, String, String),
}

/// The data read, its label, digest and format, and the reader's warnings.
pub(crate) struct Read {
    loaded: bertqa::squad::Loaded,
    pub(crate) label: String,
    format: Format,
}

pub(crate) fn read(py: Python<'_>, data: Data) -> PyResult<Read> {
    match data {
        Data::Paths(paths) => {
            let label = paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let (loaded, format) = py
                .detach(|| bertqa::data::load(&paths, true))
                .map_err(|e| failure(py, e))?;
            Ok(Read {
                loaded,
                label,
                format,
            })
        }
        Data::Bytes(bytes, format, label) => {
            let format = match format.as_str() {
                "squad" => Format::Squad,
                "rows" => Format::HfJsonl,
                other => {
                    return Err(raise(
                        py,
                        "usage",
                        &format!("unknown data format {other:?}"),
                    ))
                }
            };
            let path = PathBuf::from(&label);
            let (loaded, format) = py
                .detach(|| bertqa::data::from_bytes(bytes, Some(format), &path))
                .map_err(|e| failure(py, e))?;
            Ok(Read {
                loaded,
                label,
                format,
            })
        }
    }
}

impl Read {
    /// The dataset (`strict`: a reader's warning fails), the first `limit` questions;
    /// the reader's warnings go into `warnings`.
    pub(crate) fn dataset(
        mut self,
        py: Python<'_>,
        strict: bool,
        limit: Option<usize>,
        warnings: &mut Vec<String>,
    ) -> PyResult<(bertqa::types::Dataset, String)> {
        let digest = self.loaded.sha256.take().unwrap_or_default();
        let mut dataset = if strict {
            self.loaded.strict().map_err(|e| failure(py, e))?
        } else {
            warnings.extend(self.loaded.warnings.iter().map(|w| w.to_string()));
            self.loaded.dataset
        };
        if let Some(n) = limit {
            dataset.examples.truncate(n);
        }
        Ok((dataset, digest))
    }
}

/// Runs `work` on a thread of its own while this one waits with the GIL released,
/// looking for Ctrl-C: the first cancels `work`'s token (the run stops as the
/// command's first Ctrl-C stops it, and writes what it had), and is raised once `work`
/// returns; a second stops waiting.
pub(crate) fn on_thread<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce(CancellationToken) -> T + Send + 'static,
) -> PyResult<T> {
    use std::sync::mpsc;
    let stop = CancellationToken::new();
    let (tx, rx) = mpsc::channel();
    let token = stop.clone();
    std::thread::Builder::new()
        .name("bertqa".into())
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = tx.send(work(token));
        })?;
    let mut interrupted: Option<PyErr> = None;
    let mut rx = rx;
    loop {
        let (received, back) = py.detach(move || (rx.recv_timeout(crate::SIGNAL_POLL), rx));
        rx = back;
        match received {
            Ok(done) => {
                return match interrupted {
                    Some(e) => Err(e),
                    None => Ok(done),
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "bertqa: the run's thread ended without a result",
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    if interrupted.is_some() {
                        return Err(e);
                    }
                    stop.cancel();
                    interrupted = Some(e);
                }
            }
        }
    }
}

/// Fails unless `path`'s directory exists (an output file named by `name`).
fn check_output_dir(py: Python<'_>, name: &str, path: &Path) -> PyResult<()> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => Err(raise(
            py,
            "usage",
            &format!(
                "--{} {}: no directory {} to write it in",
                name.replace('_', "-"),
                path.display(),
                d.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// What `evaluate` returns: the report (`eval --json`'s document), the answers
/// (question id to text), the failed gates as the command names them, and warnings.
type Evaluated<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyDict>,
    Vec<String>,
    Vec<String>,
);

/// `bertqa.evaluate`: see python/bertqa/_api.py.
#[pyfunction]
#[pyo3(signature = (urls, model, data, output_dir, progress, options=None))]
pub(crate) fn evaluate<'py>(
    py: Python<'py>,
    urls: Vec<String>,
    model: Option<String>,
    data: Data,
    output_dir: PathBuf,
    progress: bool,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Evaluated<'py>> {
    let mut o = Options::new(py, "evaluate", options)?;
    let server = settings::server(&mut o, urls)?;
    let from_logits = o.path("from_logits")?;
    let model = match (model, &from_logits) {
        (Some(_), Some(_)) => {
            return Err(o.usage("evaluate(): give a model or from_logits, not both"))
        }
        (None, None) => return Err(o.usage("evaluate(): give a model (or from_logits)")),
        (m, _) => m.unwrap_or_default(),
    };
    let version = o.text("model_version")?.unwrap_or_default();
    let mut builder = settings::pipeline(&mut o, &server, &model)?.model_version(version);
    if let Some(t) = o.number("na_prob_thresh")? {
        builder = builder.na_prob_thresh(t);
    }
    let strict = o.switch("strict")?;
    let limit = o.count("limit")?;
    let shard = match o.text("shard")? {
        Some(text) => Some(
            text.parse::<bertqa::shard::Shard>()
                .map_err(|e| o.usage(format!("--shard {text:?}: {e}")))?,
        ),
        None => None,
    };
    let mut eval = EvalOptions::new(&output_dir);
    eval.resume = o.switch("resume")?;
    eval.save_logits = o.switch("save_logits")?;
    eval.html = o.path("html")?;
    eval.min_exact = o.number("min_exact")?;
    eval.min_f1 = o.number("min_f1")?;
    eval.max_p99_ms = o.number("max_p99_ms")?;
    eval.metrics_urls = o.list("metrics_url")?;
    if let Some(ms) = o.get::<u64>("metrics_interval_ms", "milliseconds")? {
        eval.metrics_interval = std::time::Duration::from_millis(ms);
    }
    statistics(&mut o, &mut eval.statistics)?;
    o.finish()?;
    if eval.resume && from_logits.is_some() {
        return Err(raise(
            py,
            "usage",
            "evaluate(): resume continues a run against a server, not from_logits",
        ));
    }
    if let Some(path) = &eval.html {
        check_output_dir(py, "html", path)?;
    }
    if eval.resume
        && matches!(&data, Data::Paths(p) if p.iter().any(|p| p.as_os_str() == bertqa::data::STDIN))
    {
        return Err(raise(py, "usage", "--resume cannot continue a run on standard input (--data -): its content may differ; save it to a file"));
    }
    let _dir =
        bertqa_cli::embed::claim_output_dir(&output_dir).map_err(|m| raise(py, "usage", &m))?;
    let mut warnings = Vec::new();
    let (dataset, digest, format, label) = {
        let read = read(py, data)?;
        let (format, label) = (read.format, read.label.clone());
        let (dataset, digest) = read.dataset(py, strict, limit, &mut warnings)?;
        (dataset, digest, format, label)
    };
    let mut data = EvalData::new(dataset, label, digest, format);
    if let Some(n) = limit {
        data = data.limit(n);
    }
    if let Some(shard) = shard {
        data = data.shard(shard).map_err(|e| failure(py, e))?;
    }
    eval.hooks = Some(bertqa_cli::embed::eval_hooks(!progress));
    let evaluated = on_thread(py, move |stop| {
        let mut warnings = warnings;
        let evaluation = match from_logits {
            Some(path) => builder.evaluate_saved(path, &data, &eval),
            None => builder.mode::<Blocking>().build().and_then(|client| {
                warnings.extend(
                    client
                        .warnings()
                        .iter()
                        .map(|w| bertqa_cli::embed::name_flags(w)),
                );
                eval.stop = Some(stop);
                client.evaluate_with(&data, &eval)
            }),
        };
        (evaluation, warnings)
    })?;
    let (evaluation, warnings) = evaluated;
    let evaluation = evaluation.map_err(|e| failure(py, e))?;
    let report = evaluation.to_report();
    let document = bertqa::report::json::to_value(&report.json());
    let predictions = PyDict::new(py);
    for p in &evaluation.outcome.predictions {
        predictions.set_item(&p.qas_id, &p.answer)?;
    }
    Ok((
        from_json(py, &document)?,
        predictions,
        evaluation.failed_gates(),
        warnings,
    ))
}

/// `bertqa.ask`: the document `ask --json` prints.
#[pyfunction]
#[pyo3(signature = (urls, model, questions, context, options=None))]
pub(crate) fn ask<'py>(
    py: Python<'py>,
    urls: Vec<String>,
    model: String,
    questions: Vec<String>,
    context: Option<String>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut o = Options::new(py, "ask", options)?;
    let server = settings::server(&mut o, urls)?;
    let version = o.text("model_version")?.unwrap_or_default();
    let builder = settings::pipeline(&mut o, &server, &model)?.model_version(version);
    let context_file = o.path("context_file")?;
    let n_best = o.count("n_best")?.unwrap_or(1);
    o.finish()?;
    let context = match (context, context_file) {
        (Some(_), Some(_)) => {
            return Err(raise(
                py,
                "usage",
                "ask(): give context or context_file, not both",
            ))
        }
        (Some(c), None) => c,
        (None, Some(p)) => {
            std::fs::read_to_string(&p).map_err(|e| failure(py, bertqa::Error::io(&p, e)))?
        }
        (None, None) => {
            return Err(raise(
                py,
                "usage",
                "ask(): give a context (or context_file)",
            ))
        }
    };
    if questions.is_empty() {
        return Err(raise(py, "usage", "ask(): give a question"));
    }
    let client = py
        .detach(|| builder.mode::<Blocking>().build())
        .map_err(|e| failure(py, e))?;
    let call = bertqa::AskOptions::default();
    let asked = client
        .as_async()
        .ask_report(&questions, &context, &call, n_best);
    let report = crate::client::drive(py, &client, asked)?;
    from_json(py, &bertqa::report::json::to_value(&report.json()))
}

/// `bertqa.score`: the document `score --json` prints. `predictions` and `na_probs`:
/// a path, or the JSON text of the file.
#[pyfunction]
#[pyo3(signature = (data, predictions, na_probs=None, options=None))]
pub(crate) fn score<'py>(
    py: Python<'py>,
    data: Data,
    predictions: Json,
    na_probs: Option<Json>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Vec<String>)> {
    use bertqa::evaluate;
    use bertqa::report::score::{Rules, ScoreJson, SquadVersion};
    let mut o = Options::new(py, "score", options)?;
    let forced_v2 = o.switch("version_2_with_negative")?;
    let na_prob_thresh = o.number("na_prob_thresh")?.unwrap_or(1.0);
    o.finish()?;
    let mut warnings = Vec::new();
    let read = read(py, data)?;
    let (label, mrqa) = (read.label.clone(), read.format == Format::Mrqa);
    let (dataset, _) = read.dataset(py, false, None, &mut warnings)?;
    let v2 = forced_v2 || dataset.looks_like_v2();
    if na_probs.is_some() && !v2 {
        return Err(raise(
            py,
            "usage",
            &format!(
                "--na-prob-file needs the SQuAD 2.0 rules, but {label} looks like SQuAD v1.1 \
             (pass --version-2-with-negative to force them)"
            ),
        ));
    }
    if !na_prob_thresh.is_finite() {
        return Err(raise(
            py,
            "usage",
            "--na-prob-thresh must be a finite number",
        ));
    }
    let scored = py.detach(|| -> bertqa::Result<_> {
        let (predictions, named) = match &predictions {
            Json::Path(p) => (evaluate::read_predictions(p)?, p.display().to_string()),
            Json::Text(t) => (
                evaluate::predictions_from_bytes(t, Path::new("<predictions>"))?,
                "<predictions>".to_string(),
            ),
        };
        let na_probs = match &na_probs {
            Some(Json::Path(p)) => Some(evaluate::read_na_probs(p)?),
            Some(Json::Text(t)) => Some(evaluate::na_probs_from_bytes(t, Path::new("<na_probs>"))?),
            None => None,
        };
        let config = evaluate::ScoreConfig {
            version_2_with_negative: v2,
            na_prob_thresh,
        };
        let scores = evaluate::score(&dataset, &predictions, na_probs.as_ref(), &config);
        Ok((scores, named))
    });
    let (scores, named) = scored.map_err(|e| failure(py, e))?;
    let scores = scores.map_err(|e| {
        let (reason, sentence) = bertqa_cli::embed::failure(e);
        raise(py, reason.name(), &format!("scoring {named}: {sentence}"))
    })?;
    let report = ScoreJson::new(&scores, SquadVersion::new(v2), mrqa.then_some(Rules::Mrqa));
    if let Some(line) = report.missing_line() {
        warnings.push(line);
    }
    Ok((
        from_json(py, &bertqa::report::json::to_value(&report.json()))?,
        warnings,
    ))
}

/// A JSON file given as its text (bytes), or as its path.
#[derive(FromPyObject)]
pub(crate) enum Json {
    Text(Vec<u8>),
    Path(PathBuf),
}

/// `bertqa.compare` of models (names) or of finished runs (directories): the document
/// `compare --json` prints, and the failed gates as the command names them.
#[pyfunction]
#[pyo3(signature = (models, runs, data, output_dir, options=None))]
pub(crate) fn compare<'py>(
    py: Python<'py>,
    models: Vec<String>,
    runs: Vec<PathBuf>,
    data: Data,
    output_dir: Option<PathBuf>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Vec<String>)> {
    let mut o = Options::new(py, "compare", options)?;
    let url: Vec<String> = o.list("url")?;
    let server = settings::server(&mut o, url)?;
    let model_tokenizer: Vec<String> = o.list("model_tokenizer")?;
    // Each model's settings are these, with its own URL, authority and tokenizer.
    let each = o.fork();
    let builder = settings::pipeline(&mut o, &server, "")?;
    let na_prob_thresh = o.number("na_prob_thresh")?;
    let strict = o.switch("strict")?;
    let limit = o.count("limit")?;
    let mut options = CompareOptions::new(PathBuf::new());
    options.output_dir = output_dir.clone();
    options.parallel = o.switch("parallel")?;
    options.save_logits = o.switch("save_logits")?;
    if let Some(n) = o.count("show")? {
        options.show = n;
    }
    options.html = o.path("html")?;
    options.gates.min_agreement = o.number("min_agreement")?;
    options.gates.max_logit_diff = o.number("max_logit_diff")?;
    options.gates.max_f1_drop = o.number("max_f1_drop")?;
    options.gates.fail_on_significant_drop = o.switch("fail_on_significant_drop")?;
    options.gates.max_flip_rate = o.number("max_flip_rate")?;
    options.gates.fail_if_concentrated = o.switch("fail_if_concentrated")?;
    statistics(&mut o, &mut options.statistics)?;
    o.finish()?;
    let builder = match na_prob_thresh {
        Some(t) => builder.na_prob_thresh(t),
        None => builder,
    };
    let read = read(py, data)?;
    let label = read.label.clone();
    let (dataset, _) = read.dataset(py, strict, limit, &mut Vec::new())?;
    let _dir = match (&output_dir, runs.is_empty()) {
        (Some(dir), true) => {
            Some(bertqa_cli::embed::claim_output_dir(dir).map_err(|m| raise(py, "usage", &m))?)
        }
        _ => None,
    };
    // The data's digest is a journal's; a comparison keeps none.
    let data = EvalData::new(dataset, label, "", Default::default());
    options.hooks = Some(bertqa_cli::embed::eval_hooks(true));
    let compared = if !runs.is_empty() {
        if runs.len() < 2 {
            return Err(raise(
                py,
                "usage",
                &format!(
                    "--runs needs at least two finished runs to compare (got {})",
                    runs.len()
                ),
            ));
        }
        py.detach(|| builder.compare_runs(&runs, &data, &options))
            .map_err(|e| failure(py, e))?
    } else {
        if models.len() < 2 {
            return Err(raise(
                py,
                "usage",
                &format!(
                    "--models needs at least two models to compare (got {})",
                    models.len()
                ),
            ));
        }
        let targets = targets(py, &models, &model_tokenizer, &server)?;
        let mut builders = Vec::new();
        for t in &targets {
            let mut o = each.fork();
            let one = settings::Server {
                urls: vec![t.url.clone()],
                authority: t.authority.clone(),
                protocol: server.protocol,
            };
            let mut b = settings::pipeline(&mut o, &one, &t.name)?;
            if let Some(p) = &t.tokenizer {
                b = b.tokenizer(p.clone());
            }
            if let Some(x) = na_prob_thresh {
                b = b.na_prob_thresh(x);
            }
            builders.push(b);
        }
        on_thread(py, move |stop| -> bertqa::Result<_> {
            let mut clients = Vec::new();
            for b in builders {
                clients.push(b.mode::<Blocking>().build()?);
            }
            let deployments: Vec<Deployment<'_>> = targets
                .iter()
                .zip(&clients)
                .map(|(t, client)| Deployment {
                    name: t.shown.clone(),
                    url: t.shown_url.clone(),
                    client,
                    own_windows: t.tokenizer.is_some(),
                })
                .collect();
            let mut options = options;
            options.stop = Some(stop);
            compare_deployments(&deployments, &data, &options)
        })?
        .map_err(|e| failure(py, e))?
    };
    let report = &compared.report;
    let failed: Vec<String> = report
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(bertqa::report::compare::GateJson::describe)
        .collect();
    Ok((
        from_json(py, &bertqa::report::json::to_value(&report.json()))?,
        failed,
    ))
}

/// A model of a comparison: its name, server and authority, own tokenizer, and how the
/// reports name it.
struct Target {
    name: String,
    url: String,
    authority: Option<String>,
    tokenizer: Option<PathBuf>,
    shown: String,
    shown_url: String,
}

/// The models of `specs` (`NAME`, `NAME@URL`, `NAME@URL?authority=HOST`) as compare
/// reads them; `model_tokenizer`: `NAME=PATH` entries.
fn targets(
    py: Python<'_>,
    specs: &[String],
    model_tokenizer: &[String],
    server: &settings::Server,
) -> PyResult<Vec<Target>> {
    let usage = |m: String| raise(py, "usage", &m);
    let mut out = Vec::new();
    for spec in specs {
        let (name, url, authority) =
            bertqa_cli::embed::split_model(spec, &server.urls[0]).map_err(usage)?;
        let shown_url = match &authority {
            Some(a) => format!("{url}?authority={a}"),
            None => url.clone(),
        };
        out.push(Target {
            name,
            url,
            authority: authority.or_else(|| server.authority.clone()),
            tokenizer: None,
            shown: String::new(),
            shown_url,
        });
    }
    for spec in model_tokenizer {
        let Some((model, path)) = spec.split_once('=') else {
            return Err(usage(format!("--model-tokenizer {spec:?}: give NAME=PATH")));
        };
        let mut found = false;
        for t in out.iter_mut().filter(|t| t.name == model) {
            t.tokenizer = Some(PathBuf::from(path));
            found = true;
        }
        if !found {
            return Err(usage(format!(
                "--model-tokenizer {spec:?}: no model {model:?} in --models"
            )));
        }
    }
    let names: Vec<(String, String)> = out
        .iter()
        .map(|t| (t.name.clone(), t.shown_url.clone()))
        .collect();
    for t in &mut out {
        let mut urls: Vec<&str> = names
            .iter()
            .filter(|(n, _)| *n == t.name)
            .map(|(_, u)| u.as_str())
            .collect();
        urls.sort_unstable();
        urls.dedup();
        t.shown = match urls.len() > 1 {
            true => format!("{}@{}", t.name, t.shown_url),
            false => t.name.clone(),
        };
    }
    Ok(out)
}

/// The options of `function` and their defaults (the library's), for the tests.
#[pyfunction]
#[pyo3(name = "settings")]
pub(crate) fn option_defaults(function: &str) -> Vec<(&'static str, settings::Default)> {
    settings::table(function)
}

/// `bootstrap`, `seed` and `confidence`: how intervals are drawn (compare's, and the
/// slices' of an evaluation).
fn statistics(o: &mut Options<'_>, statistics: &mut bertqa::compare::Statistics) -> PyResult<()> {
    if let Some(n) = o.count("bootstrap")? {
        if n == 0 {
            return Err(o.usage("--bootstrap 0: give at least 1"));
        }
        statistics.rounds = n;
    }
    if let Some(s) = o.get::<u64>("seed", "a whole number, 0 or more")? {
        statistics.seed = s;
    }
    if let Some(c) = o.number("confidence")? {
        if !(c > 0.0 && c < 1.0) {
            return Err(o.usage(format!(
                "--confidence {c}: give a fraction between 0 and 1 (0.95 for 95%)"
            )));
        }
        statistics.confidence = c;
    }
    Ok(())
}
