//! `bertqa._native.Client`: the library's client held by a Python program. It connects,
//! looks at the model and loads the tokenizer once, then answers and evaluates with the
//! GIL released. A call of a few questions ([`IN_PLACE`]) is the blocking client's, on
//! the calling thread: it ends within the client's timeout, and Python sees a Ctrl-C
//! as it returns. A longer call is the async client's future driven from the calling
//! thread on the blocking client's runtime, woken every [`SIGNAL_POLL`] to let Python
//! see Ctrl-C: a `KeyboardInterrupt` drops the future, which stops the run.
//! The Python class `bertqa.Client` (python/bertqa/_client.py) wraps this one.

use std::future::Future;
use std::path::PathBuf;
use std::sync::RwLock;
use std::time::Duration;

use bertqa::data::Format;
use bertqa::{AskOptions, Dataset};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// How often a waiting call lets Python look for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Calls of up to this many questions run on the calling thread, without the hand-offs
/// to the client's threads that let a long call be interrupted.
const IN_PLACE: usize = 4;

/// The client and what drives its calls.
#[pyclass(module = "bertqa._native", name = "Client", frozen)]
pub(crate) struct Client {
    /// `None` once closed.
    inner: RwLock<Option<bertqa::blocking::Client>>,
    /// The process that built the client: its runtime's threads are not in a fork's
    /// child.
    pid: u32,
}

/// A setting of the builder from a keyword option.
fn duration_ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

const PROTOCOLS: &[(&str, bertqa::Protocol)] = &[
    ("grpc", bertqa::Protocol::Grpc),
    ("http", bertqa::Protocol::Http),
];
const TRANSPORTS: &[(&str, bertqa::GrpcCall)] = &[
    ("stream", bertqa::GrpcCall::Stream),
    ("unary", bertqa::GrpcCall::Unary),
];
const RULES: &[(&str, bertqa::decode::Postprocess)] = &[
    ("nvidia", bertqa::decode::Postprocess::Nvidia),
    ("hf", bertqa::decode::Postprocess::Hf),
    ("run-qa", bertqa::decode::Postprocess::RunQa),
    ("run_qa", bertqa::decode::Postprocess::RunQa),
];
const SHARED_MEMORY: &[(&str, bertqa::SharedMemory)] = &[
    ("auto", bertqa::SharedMemory::Auto),
    ("system", bertqa::SharedMemory::System),
    ("none", bertqa::SharedMemory::None),
];

/// The value of option `name` given as `value`, one of `choices`; a UsageError naming
/// them otherwise.
fn choice<T: Copy>(py: Python<'_>, name: &str, value: &str, choices: &[(&str, T)]) -> PyResult<T> {
    if let Some((_, v)) = choices.iter().find(|(k, _)| *k == value) {
        return Ok(*v);
    }
    let names: Vec<String> = choices.iter().map(|(k, _)| format!("{k:?}")).collect();
    let message = format!(
        "Client(): {name} {value:?}: give one of {}",
        names.join(", ")
    );
    Err(raise(py, "usage", &message))
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (
        url, model, *, vocab=None, tokenizer=None, protocol="grpc", transport=None,
        model_version="",
        do_lower_case=true, postprocess=None, version_2_with_negative=None,
        max_seq_length=None, doc_stride=128, max_query_length=64, n_best_size=20,
        max_answer_length=30, null_score_diff_threshold=0.0, na_prob_thresh=1.0,
        batch_size=None, concurrency=4, shared_memory="auto", timeout_ms=60_000,
        connect_timeout_ms=5_000, header=None, authority=None, ssl=false,
        ssl_root_cert=None, ssl_client_cert=None, ssl_client_key=None,
        ssl_target_name=None, retries=3, retry_max_backoff_ms=2_000, retry_model_errors=false,
        connections=1, wait_ready=0.0, fixed_seq_len=false, dynamic_seq_len=false,
        input_ids=None, segment_ids=None, input_mask=None, start_logits=None,
        end_logits=None, question_input=None, context_input=None, answer_output=None,
        offsets_output=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: Vec<String>,
        model: String,
        vocab: Option<PathBuf>,
        tokenizer: Option<PathBuf>,
        protocol: &str,
        transport: Option<&str>,
        model_version: &str,
        do_lower_case: bool,
        postprocess: Option<&str>,
        version_2_with_negative: Option<bool>,
        max_seq_length: Option<usize>,
        doc_stride: usize,
        max_query_length: usize,
        n_best_size: usize,
        max_answer_length: usize,
        null_score_diff_threshold: f64,
        na_prob_thresh: f64,
        batch_size: Option<usize>,
        concurrency: usize,
        shared_memory: &str,
        timeout_ms: u64,
        connect_timeout_ms: u64,
        header: Option<Vec<(String, String)>>,
        authority: Option<String>,
        ssl: bool,
        ssl_root_cert: Option<PathBuf>,
        ssl_client_cert: Option<PathBuf>,
        ssl_client_key: Option<PathBuf>,
        ssl_target_name: Option<String>,
        retries: u32,
        retry_max_backoff_ms: u64,
        retry_model_errors: bool,
        connections: usize,
        wait_ready: f64,
        fixed_seq_len: bool,
        dynamic_seq_len: bool,
        input_ids: Option<String>,
        segment_ids: Option<String>,
        input_mask: Option<String>,
        start_logits: Option<String>,
        end_logits: Option<String>,
        question_input: Option<String>,
        context_input: Option<String>,
        answer_output: Option<String>,
        offsets_output: Option<String>,
    ) -> PyResult<Client> {
        let usage = |m: String| raise(py, "usage", &m);
        let mut urls = url.into_iter();
        let first = urls
            .next()
            .ok_or_else(|| usage("Client(): give at least one url".into()))?;
        let mut b = bertqa::blocking::Client::builder(first).model(model);
        for more in urls {
            b = b.url(more);
        }
        b = b.protocol(choice(py, "protocol", protocol, PROTOCOLS)?);
        if let Some(t) = transport {
            b = b.transport(choice(py, "transport", t, TRANSPORTS)?);
        }
        if let Some(v) = vocab {
            b = b.vocab(v);
        }
        if let Some(t) = tokenizer {
            b = b.tokenizer(t);
        }
        if let Some(p) = postprocess {
            b = b.postprocess(choice(py, "postprocess", p, RULES)?);
        }
        if let Some(v) = version_2_with_negative {
            b = b.version_2_with_negative(v);
        }
        if let Some(n) = max_seq_length {
            b = b.max_seq_length(n);
        }
        if let Some(n) = batch_size {
            b = b.batch_size(n);
        }
        b = b.shared_memory(choice(py, "shared_memory", shared_memory, SHARED_MEMORY)?);
        for (name, value) in header.into_iter().flatten() {
            b = b.header(name, value);
        }
        if let Some(a) = authority {
            b = b.authority(a);
        }
        let tls_asked = ssl
            || ssl_root_cert.is_some()
            || ssl_client_cert.is_some()
            || ssl_client_key.is_some()
            || ssl_target_name.is_some();
        if tls_asked {
            b = b.tls(bertqa::TlsConfig {
                root_cert: ssl_root_cert,
                client_cert: ssl_client_cert,
                client_key: ssl_client_key,
                target_name: ssl_target_name,
            });
        }
        if !(wait_ready.is_finite() && wait_ready >= 0.0) {
            return Err(usage(format!(
                "Client(): wait_ready {wait_ready} is not a number of seconds"
            )));
        }
        let b = b
            .model_version(model_version)
            .lower_case(do_lower_case)
            .doc_stride(doc_stride)
            .max_query_length(max_query_length)
            .n_best_size(n_best_size)
            .max_answer_length(max_answer_length)
            .null_score_diff_threshold(null_score_diff_threshold)
            .na_prob_thresh(na_prob_thresh)
            .concurrency(concurrency)
            .timeout(duration_ms(timeout_ms))
            .connect_timeout(duration_ms(connect_timeout_ms))
            .retries(retries)
            .retry_max_backoff(duration_ms(retry_max_backoff_ms.max(1)))
            .retry_model_errors(retry_model_errors)
            .connections(connections)
            .wait_ready(Duration::from_secs_f64(wait_ready))
            .fixed_seq_len(fixed_seq_len)
            .dynamic_seq_len(dynamic_seq_len)
            .binding(bertqa::backend::BindingOverrides {
                input_ids,
                segment_ids,
                input_mask,
                start_logits: start_logits.clone(),
                end_logits: end_logits.clone(),
            })
            .text_binding(bertqa::backend::text::TextOverrides {
                question_input,
                context_input,
                answer_output,
                offsets_output,
                start_logits,
                end_logits,
            });
        let built = py.detach(|| b.build());
        let client = built.map_err(|e| error(py, &e))?;
        Ok(Client {
            inner: RwLock::new(Some(client)),
            pid: std::process::id(),
        })
    }

    /// The answers to `pairs` of (question, context), in order, under this call's
    /// settings where given.
    #[pyo3(signature = (
        pairs, *, n_best_size=None, max_answer_length=None, max_seq_length=None,
        doc_stride=None, max_query_length=None, version_2_with_negative=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn ask_many(
        &self,
        py: Python<'_>,
        pairs: Vec<(String, String)>,
        n_best_size: Option<usize>,
        max_answer_length: Option<usize>,
        max_seq_length: Option<usize>,
        doc_stride: Option<usize>,
        max_query_length: Option<usize>,
        version_2_with_negative: Option<bool>,
    ) -> PyResult<Vec<Answer>> {
        let options = AskOptions {
            n_best_size,
            max_answer_length,
            max_seq_length,
            doc_stride,
            max_query_length,
            version_2_with_negative,
        };
        let client = self.client(py)?;
        let answers = if pairs.len() <= IN_PLACE {
            let answered = py.detach(|| client.ask_many_with(pairs, &options));
            answered.map_err(|e| error(py, &e))?
        } else {
            drive(
                py,
                &client,
                client.as_async().ask_many_with(pairs, &options),
            )?
        };
        Ok(answers.into_iter().map(Answer::from).collect())
    }

    /// Runs and scores the questions of a data file (any format `--data` reads).
    fn evaluate_path(&self, py: Python<'_>, path: PathBuf) -> PyResult<Evaluation> {
        let read = py.detach(|| bertqa::data::load(std::slice::from_ref(&path), false));
        let (loaded, format) = read.map_err(|e| error(py, &e))?;
        let data = path.display().to_string();
        self.evaluate(py, &loaded.dataset, data, format)
    }

    /// Runs and scores the questions of `data`: SQuAD JSON (`format` "squad") or Hugging
    /// Face rows as JSON Lines ("rows"); `label` names them in messages.
    fn evaluate_bytes(
        &self,
        py: Python<'_>,
        data: Vec<u8>,
        format: &str,
        label: PathBuf,
    ) -> PyResult<Evaluation> {
        let format = match format {
            "squad" => Format::Squad,
            "rows" => Format::HfJsonl,
            other => {
                let message = format!("unknown data format {other:?}");
                return Err(raise(py, "usage", &message));
            }
        };
        let read = py.detach(|| bertqa::data::from_bytes(data, Some(format), &label));
        let (loaded, _) = read.map_err(|e| error(py, &e))?;
        let data = label.display().to_string();
        self.evaluate(py, &loaded.dataset, data, format)
    }

    /// The model as the server describes it and bertqa binds it (a dict).
    fn model<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client(py)?;
        let model = client.model();
        let json = serde_json::json!({
            "name": model.name(),
            "version": model.version(),
            "platform": model.platform(),
            "max_batch_size": model.max_batch_size(),
            "takes": if model.takes_text() { "text" } else { "token ids" },
            "binding": model.to_json(),
        });
        from_json(py, &json)
    }

    /// Closes the connections; later calls raise.
    fn close(&self) {
        self.inner.write().expect("client lock").take();
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.read().expect("client lock").is_none()
    }
}

impl Client {
    /// The library's client, checked usable in this process.
    fn client(&self, py: Python<'_>) -> PyResult<bertqa::blocking::Client> {
        if std::process::id() != self.pid {
            return Err(raise(
                py,
                "usage",
                "this bertqa.Client was built in another process (before a fork): its \
                 connections are not in this one; build the client after the fork (with \
                 gunicorn, in a post_fork hook or the app, not under --preload)",
            ));
        }
        self.inner
            .read()
            .expect("client lock")
            .clone()
            .ok_or_else(|| raise(py, "usage", "this bertqa.Client is closed"))
    }

    /// `dataset` evaluated; `data` and `format` name it in the report.
    fn evaluate(
        &self,
        py: Python<'_>,
        dataset: &Dataset,
        data: String,
        format: Format,
    ) -> PyResult<Evaluation> {
        let client = self.client(py)?;
        let evaluation = drive(py, &client, client.as_async().evaluate(dataset))?;
        Ok(Evaluation {
            inner: evaluation,
            data,
            format,
        })
    }
}

/// Drives `work` (a call of `client`'s) to its end on the client's runtime with the GIL
/// released, letting Python see Ctrl-C in between: a `KeyboardInterrupt` drops the
/// future (the run stops) and is raised.
pub(crate) fn drive<T: Send>(
    py: Python<'_>,
    client: &bertqa::blocking::Client,
    work: impl Future<Output = bertqa::Result<T>> + Send,
) -> PyResult<T> {
    let mut work = Box::pin(work);
    loop {
        let waited = py.detach(|| {
            client.block_on(async { tokio::time::timeout(SIGNAL_POLL, &mut work).await })
        });
        match waited {
            Ok(done) => return done.map_err(|e| error(py, &e)),
            Err(_) => py.check_signals()?,
        }
    }
}

/// A question's answer.
#[pyclass(module = "bertqa._native", name = "Answer", frozen, get_all)]
pub(crate) struct Answer {
    /// The question's id (`q1`, `q2`, ... in the order asked).
    id: String,
    /// The answer (`""`: no answer).
    text: String,
    /// Where the answer starts in the context (characters); `None` when it is not a
    /// span of it.
    start_char: Option<usize>,
    /// Where it ends, exclusive.
    end_char: Option<usize>,
    /// Its start and end logits summed (an answer-contract model: its own score).
    score: Option<f64>,
    /// Its probability among the n-best.
    probability: Option<f64>,
    /// The model found no answer.
    no_answer: bool,
    /// The text is the reference's `"empty"` placeholder (no valid span to answer
    /// with), not the English word from the context.
    placeholder: bool,
    /// SQuAD 2.0: the null score minus the best span's.
    null_odds: Option<f64>,
    /// An answer-contract model's no-answer probability.
    no_answer_probability: Option<f64>,
    /// The best candidates, the answer first (`None`: the model's contract gives none).
    nbest: Option<Vec<Candidate>>,
}

/// One of a question's best candidates.
#[pyclass(module = "bertqa._native", name = "Candidate", frozen, get_all)]
#[derive(Clone)]
pub(crate) struct Candidate {
    text: String,
    start_char: Option<usize>,
    end_char: Option<usize>,
    probability: f64,
    start_logit: f64,
    end_logit: f64,
}

#[pymethods]
impl Answer {
    fn __repr__(&self) -> String {
        // The placeholder's text is a word too: the repr tells them apart.
        let placeholder = if self.placeholder {
            ", placeholder=True"
        } else {
            ""
        };
        format!(
            "Answer(text={:?}, start_char={}, end_char={}, probability={}{placeholder})",
            self.text,
            opt(self.start_char),
            opt(self.end_char),
            opt(self.probability)
        )
    }
}

#[pymethods]
impl Candidate {
    fn __repr__(&self) -> String {
        format!(
            "Candidate(text={:?}, start_char={}, end_char={}, probability={})",
            self.text,
            opt(self.start_char),
            opt(self.end_char),
            self.probability
        )
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "None".into(), |v| v.to_string())
}

impl From<bertqa::Answer> for Answer {
    fn from(a: bertqa::Answer) -> Answer {
        // An answer-contract model gives no n-best: `None`, not an empty list.
        let nbest = (!a.nbest.is_empty() || a.probability.is_some()).then(|| {
            a.nbest
                .into_iter()
                .map(|c| Candidate {
                    text: c.text,
                    start_char: c.start_char,
                    end_char: c.end_char,
                    probability: c.probability,
                    start_logit: c.start_logit,
                    end_logit: c.end_logit,
                })
                .collect()
        });
        Answer {
            id: a.id,
            text: a.text,
            start_char: a.start_char,
            end_char: a.end_char,
            score: a.score,
            probability: a.probability,
            no_answer: a.no_answer,
            placeholder: a.placeholder,
            null_odds: a.null_odds,
            no_answer_probability: a.no_answer_probability,
            nbest,
        }
    }
}

/// An evaluation of answers computed elsewhere (the workers of a Spark or Ray job):
/// `answers` maps each question id of `data` (Hugging Face rows as JSON Lines, named
/// `label`) to its answer text and null odds, scored here once.
#[pyfunction]
#[pyo3(signature = (data, label, answers, version_2_with_negative=None, na_prob_thresh=1.0))]
pub(crate) fn evaluation_of_answers(
    py: Python<'_>,
    data: Vec<u8>,
    label: PathBuf,
    answers: std::collections::HashMap<String, (String, Option<f64>)>,
    version_2_with_negative: Option<bool>,
    na_prob_thresh: f64,
) -> PyResult<Evaluation> {
    let scored = py.detach(|| {
        let (loaded, _) = bertqa::data::from_bytes(data, Some(Format::HfJsonl), &label)?;
        let name = label.display().to_string();
        let data = bertqa::EvalData::new(loaded.dataset, name, "", Format::HfJsonl);
        bertqa::Evaluation::of_answers(&data, &answers, version_2_with_negative, na_prob_thresh)
    });
    Ok(Evaluation {
        inner: scored.map_err(|e| error(py, &e))?,
        data: label.display().to_string(),
        format: Format::HfJsonl,
    })
}

/// An evaluation's results.
#[pyclass(module = "bertqa._native", name = "Evaluation", frozen)]
pub(crate) struct Evaluation {
    inner: bertqa::Evaluation,
    /// How the report names the data (a path, `<dict>`, `<rows>`), and its format.
    data: String,
    format: Format,
}

impl Evaluation {
    /// The library's evaluation.
    pub(crate) fn inner(&self) -> &bertqa::Evaluation {
        &self.inner
    }
}

#[pymethods]
impl Evaluation {
    /// The official scores, under their official keys.
    #[getter]
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, &self.inner.metrics.to_json())
    }

    /// Question id → answer text, in the data's order (`predictions.json`).
    #[getter]
    fn predictions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (id, text) in &self.inner.predictions {
            out.set_item(id, text)?;
        }
        Ok(out)
    }

    /// The document `eval --json` prints for the same run (`bertqa::Evaluation::report`):
    /// what only the command has (gates, output directory, files, the resume
    /// fingerprint `run`, the server's metrics) empty.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let run = self.inner.report(&self.data, self.format);
        from_json(py, &bertqa::report::json::to_value(&run.json()))
    }

    /// Writes the reference's files into `dir` (created if missing): predictions.json,
    /// nbest_predictions.json, null_odds.json (SQuAD 2.0) and per_question.jsonl.
    /// Returns their names.
    fn write(&self, py: Python<'_>, dir: PathBuf) -> PyResult<Vec<String>> {
        py.detach(|| {
            std::fs::create_dir_all(&dir).map_err(|e| bertqa::Error::io(&dir, e))?;
            self.inner.write_files(&dir)
        })
        .map_err(|e| error(py, &e))
    }
}

/// A JSON value as Python's `json` module reads it.
pub(crate) fn from_json<'py>(
    py: Python<'py>,
    value: &serde_json::Value,
) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
    use serde_json::Value;
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        // An integer stays an int and a float a float, as json.loads reads them.
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.into_pyobject(py)?.into_any(),
            (_, Some(u), _) => u.into_pyobject(py)?.into_any(),
            (_, _, f) => PyFloat::new(py, f.unwrap_or(f64::NAN)).into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_json(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, from_json(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// The package's exception for a library error: the class of the command line's exit
/// reason for the same failure (`bertqa._errors`).
fn error(py: Python<'_>, e: &bertqa::Error) -> PyErr {
    raise(py, bertqa_cli::embed::reason_of(e).name(), &e.to_string())
}

pub(crate) fn raise(py: Python<'_>, reason: &str, message: &str) -> PyErr {
    let made = py
        .import("bertqa._errors")
        .and_then(|m| m.getattr("from_reason")?.call1((reason, vec![message])));
    match made {
        Ok(exception) => PyErr::from_value(exception),
        Err(e) => e,
    }
}

/// The exception the command's exit reason gives a library error.
pub(crate) fn failure(py: Python<'_>, e: bertqa::Error) -> PyErr {
    let (reason, sentence) = bertqa_cli::embed::failure(e);
    raise(py, reason.name(), &sentence)
}
