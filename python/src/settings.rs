//! The options of the module functions (`bertqa.evaluate`, `ask`, `compare`, `score`)
//! and of `Client.perf`/`Client.tune`, read from the keywords a Python caller gave into
//! the library's values: a client's builder, an evaluation's options, a comparison's,
//! a sweep's. No command line is built: each option is a setting of the library, and an
//! option left out (or given as None) keeps the library's default. [`table`] lists the
//! options of each function with the library's defaults; python/tests checks that the
//! documented options (the command's flags) are those settings with those defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bertqa::backend::{BindingOverrides, TextOverrides, TlsConfig};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::client::raise;

/// A default as Python sees it.
#[derive(Debug, Clone)]
pub(crate) enum Default {
    /// No value: the setting is off, or the library chooses (from the model, the data).
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl<'py> IntoPyObject<'py> for Default {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Default::None => py.None().into_bound(py),
            Default::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
            Default::Int(i) => i.into_pyobject(py)?.into_any(),
            Default::Float(f) => f.into_pyobject(py)?.into_any(),
            Default::Str(s) => s.into_pyobject(py)?.into_any(),
        })
    }
}

fn int(n: impl TryInto<i64>) -> Default {
    Default::Int(n.try_into().unwrap_or(i64::MAX))
}

fn ms(d: Duration) -> Default {
    int(d.as_millis())
}

/// The settings of the client's builder that a pipeline call (eval, ask, compare) takes,
/// with the library's defaults.
fn pipeline_settings() -> Vec<(&'static str, Default)> {
    let features = bertqa::features::FeatureConfig::default();
    let decode = bertqa::decode::DecodeConfig::default();
    let load = bertqa::pipeline::Load::default();
    let pool = bertqa::Client::builder("localhost:8001")
        .pool_config()
        .expect("the default pool configuration");
    let mut out = vec![
        ("vocab", Default::Str("vocab/vocab.txt".into())),
        ("tokenizer", Default::None),
        ("do_lower_case", Default::Bool(true)),
        ("no_lower_case", Default::Bool(false)),
        ("max_seq_length", Default::None),
        ("doc_stride", int(features.doc_stride)),
        ("max_query_length", int(features.max_query_length)),
        ("strict", Default::Bool(false)),
        ("protocol", Default::Str("grpc".into())),
        ("authority", Default::None),
        ("timeout_ms", ms(pool.client.request_timeout)),
        ("connect_timeout_ms", ms(pool.client.connect_timeout)),
        ("ssl", Default::Bool(false)),
        ("ssl_root_cert", Default::None),
        ("ssl_client_cert", Default::None),
        ("ssl_client_key", Default::None),
        ("ssl_target_name", Default::None),
        ("header", Default::None),
        ("header_env", Default::None),
        ("header_file", Default::None),
        ("retries", int(pool.retry.retries)),
        ("retry_max_backoff_ms", ms(pool.retry.max_backoff)),
        (
            "retry_model_errors",
            Default::Bool(pool.retry.retry_model_errors),
        ),
        ("wait_ready", Default::Float(pool.wait_ready.as_secs_f64())),
        ("connections", int(pool.connections)),
        // gRPC's stream (HTTP: one call per request).
        ("transport", Default::Str("stream".into())),
        ("n_best_size", int(decode.n_best_size)),
        ("max_answer_length", int(decode.max_answer_length)),
        ("version_2_with_negative", Default::Bool(false)),
        (
            "null_score_diff_threshold",
            Default::Float(decode.null_score_diff_threshold),
        ),
        ("postprocess", Default::None),
        ("batch_size", Default::None),
        ("concurrency", int(load.concurrency)),
        ("warmup", int(load.warmup)),
        ("fixed_seq_len", Default::Bool(load.fixed_seq_len)),
        ("dynamic_seq_len", Default::Bool(load.dynamic_seq_len)),
        ("shared_memory", Default::Str("auto".into())),
        ("model_version", Default::Str(String::new())),
    ];
    for name in BINDING.iter().chain(TEXT_BINDING) {
        out.push((name, Default::None));
    }
    out
}

const BINDING: &[&str] = &[
    "input_ids",
    "segment_ids",
    "input_mask",
    "start_logits",
    "end_logits",
];
const TEXT_BINDING: &[&str] = &[
    "question_input",
    "context_input",
    "answer_output",
    "offsets_output",
];

/// The options of each function (`evaluate`, `ask`, `compare`, `score`, `Client.perf`,
/// `Client.tune`) and of `Client()` itself, with their defaults: the library's.
pub(crate) fn table(function: &str) -> Vec<(&'static str, Default)> {
    let eval = bertqa::EvalOptions::new("");
    let compare = bertqa::client::CompareOptions::new("");
    let na_prob_thresh = ("na_prob_thresh", Default::Float(1.0));
    let mut out = match function {
        "evaluate" | "ask" | "compare" | "Client" => pipeline_settings(),
        _ => Vec::new(),
    };
    match function {
        "Client" => {
            // A client is built once: no data to read strictly, no warm-up of a run, and
            // headers given as values (not from the environment or a file).
            out.retain(|(n, _)| {
                !matches!(
                    *n,
                    "no_lower_case" | "strict" | "warmup" | "header_env" | "header_file"
                )
            });
            for (name, default) in &mut out {
                // Left out, the builder chooses: `vocab/vocab.txt`, the protocol's call,
                // and SQuAD v2's rules when the data has unanswerable questions.
                if matches!(*name, "vocab" | "transport" | "version_2_with_negative") {
                    *default = Default::None;
                }
            }
            out.push(na_prob_thresh);
        }
        "evaluate" => out.extend([
            ("limit", Default::None),
            ("from_logits", Default::None),
            na_prob_thresh,
            ("resume", Default::Bool(eval.resume)),
            ("shard", Default::None),
            ("save_logits", Default::Bool(eval.save_logits)),
            ("html", Default::None),
            ("min_exact", Default::None),
            ("min_f1", Default::None),
            ("max_p99_ms", Default::None),
            ("metrics_url", Default::None),
            ("metrics_interval_ms", ms(eval.metrics_interval)),
            ("bootstrap", int(eval.statistics.rounds)),
            ("seed", int(eval.statistics.seed)),
            ("confidence", Default::Float(eval.statistics.confidence)),
        ]),
        "ask" => {
            out.retain(|(n, _)| !matches!(*n, "strict" | "warmup"));
            out.extend([("context_file", Default::None), ("n_best", int(1))]);
        }
        "compare" => {
            out.retain(|(n, _)| *n != "model_version");
            out.extend([
                ("url", Default::Str("localhost:8001".into())),
                ("limit", Default::None),
                ("model_tokenizer", Default::None),
                na_prob_thresh,
                ("parallel", Default::Bool(compare.parallel)),
                ("save_logits", Default::Bool(compare.save_logits)),
                ("show", int(compare.show)),
                ("html", Default::None),
                ("min_agreement", Default::None),
                ("max_logit_diff", Default::None),
                ("max_f1_drop", Default::None),
                (
                    "fail_on_significant_drop",
                    Default::Bool(compare.gates.fail_on_significant_drop),
                ),
                ("max_flip_rate", Default::None),
                (
                    "fail_if_concentrated",
                    Default::Bool(compare.gates.fail_if_concentrated),
                ),
                ("bootstrap", int(compare.statistics.rounds)),
                ("seed", int(compare.statistics.seed)),
                ("confidence", Default::Float(compare.statistics.confidence)),
            ]);
        }
        "Client.perf" => {
            use bertqa_cli::embed::PerfSettings;
            let perf = PerfSettings::default();
            let distribution = match perf.request_distribution {
                bertqa::perf::Distribution::Constant => "constant",
                bertqa::perf::Distribution::Poisson => "poisson",
            };
            out.extend(data_settings());
            out.extend([
                ("concurrency", int(perf.concurrency)),
                ("warmup", int(perf.warmup)),
                ("concurrency_range", Default::None),
                ("request_rate_range", Default::None),
                ("request_distribution", Default::Str(distribution.into())),
                ("seed", int(perf.seed)),
                ("max_inflight", int(perf.max_inflight)),
                ("latency_threshold", Default::None),
                ("percentile", Default::Float(perf.percentile)),
                ("binary_search", Default::Bool(perf.binary_search)),
                ("csv", Default::None),
                ("requests_jsonl", Default::None),
                ("svg", Default::None),
                ("html", Default::None),
            ]);
            out.extend(measure_settings(&perf.measure, &perf.metrics));
        }
        "Client.tune" => {
            use bertqa_cli::embed::TuneSettings;
            let tune = TuneSettings::default();
            out.extend(data_settings());
            out.extend([
                ("step", Default::None),
                ("control_url", Default::None),
                (
                    "max_batch_sizes",
                    Default::Str(tune.max_batch_sizes.clone()),
                ),
                (
                    "queue_delays_us",
                    Default::Str(tune.queue_delays_us.clone()),
                ),
                ("instances", Default::Str(tune.instances.clone())),
                (
                    "preferred_batch_sizes",
                    Default::Str(tune.preferred_batch_sizes.clone()),
                ),
                ("exhaustive", Default::Bool(tune.exhaustive)),
                ("remeasure", int(tune.remeasure)),
                ("keep_best", Default::Bool(tune.keep_best)),
                ("concurrency", Default::None),
                (
                    "concurrency_range",
                    Default::Str(tune.concurrency_range.clone()),
                ),
                ("warmup", int(tune.warmup)),
                ("latency_threshold", Default::None),
                ("percentile", Default::Float(tune.percentile)),
                ("write_config", Default::None),
                ("html", Default::None),
            ]);
            out.extend(measure_settings(&tune.measure, &tune.metrics));
        }
        "score" => out.extend([
            ("version_2_with_negative", Default::Bool(false)),
            na_prob_thresh,
        ]),
        _ => {}
    }
    out
}

/// What `Client.perf` and `Client.tune` take of the client's settings (python/bertqa's
/// `Client._settings`, with `url`, `model` and `model_version`): never options of the
/// call. The call's own options are [`table`]'s.
pub(crate) const CLIENT_SETTINGS: &[&str] = &[
    "url",
    "model",
    "model_version",
    "vocab",
    "tokenizer",
    "protocol",
    "do_lower_case",
    "no_lower_case",
    "postprocess",
    "max_seq_length",
    "doc_stride",
    "max_query_length",
    "batch_size",
    "shared_memory",
    "timeout_ms",
    "connect_timeout_ms",
    "header",
    "authority",
    "ssl",
    "ssl_root_cert",
    "ssl_client_cert",
    "ssl_client_key",
    "ssl_target_name",
    "fixed_seq_len",
    "input_ids",
    "segment_ids",
    "input_mask",
    "start_logits",
    "end_logits",
    "question_input",
    "context_input",
    "answer_output",
    "offsets_output",
];

/// The data's and the headers' options of `Client.perf` and `Client.tune` (the
/// client's headers come with it; these add to them).
fn data_settings() -> Vec<(&'static str, Default)> {
    vec![
        ("limit", Default::None),
        ("strict", Default::Bool(false)),
        ("header_env", Default::None),
        ("header_file", Default::None),
    ]
}

/// The measurement's and the metrics' options of `Client.perf` and `Client.tune`.
fn measure_settings(
    measure: &bertqa_cli::embed::MeasureArgs,
    metrics: &bertqa_cli::embed::MetricsArgs,
) -> Vec<(&'static str, Default)> {
    vec![
        ("measurement_interval_ms", Default::None),
        ("measurement_request_count", Default::None),
        (
            "stability_percentage",
            Default::Float(measure.stability_percentage),
        ),
        ("max_trials", int(measure.max_trials)),
        ("metrics_url", Default::None),
        ("no_metrics", Default::Bool(metrics.no_metrics)),
        ("metrics_interval_ms", int(metrics.metrics_interval_ms)),
    ]
}

/// The keywords a function was given, taken one by one as its settings; what is left
/// at the end was not an option of it.
pub(crate) struct Options<'py> {
    pub(crate) function: &'static str,
    given: BTreeMap<String, Bound<'py, PyAny>>,
    py: Python<'py>,
}

impl<'py> Options<'py> {
    pub(crate) fn new(
        py: Python<'py>,
        function: &'static str,
        given: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Options<'py>> {
        let mut map = BTreeMap::new();
        if let Some(given) = given {
            for (k, v) in given.iter() {
                if !v.is_none() {
                    map.insert(k.extract::<String>()?, v);
                }
            }
        }
        Ok(Options {
            function,
            given: map,
            py,
        })
    }

    /// The same keywords, for another reading (each model of a comparison).
    pub(crate) fn fork(&self) -> Options<'py> {
        Options {
            function: self.function,
            given: self.given.clone(),
            py: self.py,
        }
    }

    pub(crate) fn usage(&self, message: impl AsRef<str>) -> PyErr {
        raise(self.py, "usage", message.as_ref())
    }

    fn wrong(&self, name: &str, want: &str, value: &Bound<'py, PyAny>) -> PyErr {
        let shown = value
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "?".into());
        self.usage(format!(
            "{}(): {name} takes {want}, not {shown}",
            self.function
        ))
    }

    /// Option `name`'s value, if given.
    pub(crate) fn get<T: for<'a> FromPyObject<'a, 'py>>(
        &mut self,
        name: &str,
        want: &str,
    ) -> PyResult<Option<T>> {
        let Some(value) = self.given.remove(name) else {
            return Ok(None);
        };
        // A number is never a switch, nor a switch a number.
        let is_bool = value.is_instance_of::<pyo3::types::PyBool>();
        if (want == "True or False") != is_bool {
            return Err(self.wrong(name, want, &value));
        }
        let extracted: Option<T> = value.extract::<T>().ok();
        match extracted {
            Some(v) => Ok(Some(v)),
            None => Err(self.wrong(name, want, &value)),
        }
    }

    /// A value as the flag takes it: `T`, or its text (`"4"` for 4), as the command
    /// line reads it.
    pub(crate) fn parsed<T>(&mut self, name: &str, want: &str) -> PyResult<Option<T>>
    where
        T: std::str::FromStr + for<'a> FromPyObject<'a, 'py>,
    {
        let text = match self.given.get(name) {
            Some(v) if v.is_instance_of::<pyo3::types::PyString>() => v.extract::<String>()?,
            _ => return self.get(name, want),
        };
        let value = self.given.remove(name).expect("looked at above");
        match text.trim().parse::<T>() {
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(self.wrong(name, want, &value)),
        }
    }

    /// Text as the flag takes it: a string, or a number written as one.
    pub(crate) fn words(&mut self, name: &str) -> PyResult<Option<String>> {
        let Some(value) = self.given.get(name) else {
            return Ok(None);
        };
        if value.is_instance_of::<pyo3::types::PyBool>()
            || !(value.is_instance_of::<pyo3::types::PyString>()
                || value.is_instance_of::<pyo3::types::PyInt>()
                || value.is_instance_of::<pyo3::types::PyFloat>())
        {
            let value = value.clone();
            return Err(self.wrong(name, "a string", &value));
        }
        let value = self.given.remove(name).expect("looked at above");
        Ok(Some(value.str()?.to_string()))
    }

    /// Whether option `name` was given (not None).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }

    /// Leaves option `name` unread (a setting the call does not take).
    pub(crate) fn drop(&mut self, name: &str) {
        self.given.remove(name);
    }

    /// A number of things (`usize`).
    pub(crate) fn count(&mut self, name: &str) -> PyResult<Option<usize>> {
        self.get(name, "a whole number, 0 or more")
    }

    pub(crate) fn number(&mut self, name: &str) -> PyResult<Option<f64>> {
        self.get(name, "a number")
    }

    pub(crate) fn text(&mut self, name: &str) -> PyResult<Option<String>> {
        self.get(name, "a string")
    }

    pub(crate) fn path(&mut self, name: &str) -> PyResult<Option<PathBuf>> {
        self.get(name, "a path")
    }

    /// A switch: False when not given.
    pub(crate) fn switch(&mut self, name: &str) -> PyResult<bool> {
        Ok(self.get(name, "True or False")?.unwrap_or(false))
    }

    /// A repeatable option: one value or a list of them.
    pub(crate) fn list<T: for<'a> FromPyObject<'a, 'py>>(
        &mut self,
        name: &str,
    ) -> PyResult<Vec<T>> {
        let Some(value) = self.given.remove(name) else {
            return Ok(Vec::new());
        };
        let items: Vec<Bound<'py, PyAny>> =
            if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
                value.try_iter()?.collect::<PyResult<_>>()?
            } else {
                vec![value]
            };
        let mut out = Vec::new();
        for v in &items {
            let extracted: Option<T> = v.extract::<T>().ok();
            match extracted {
                Some(x) => out.push(x),
                None => return Err(self.wrong(name, "a value or a list of them", v)),
            }
        }
        Ok(out)
    }

    /// One of `choices` (as the flag's values are written).
    pub(crate) fn choice<T: Copy>(
        &mut self,
        name: &str,
        choices: &[(&str, T)],
    ) -> PyResult<Option<T>> {
        let Some(value) = self.text(name)? else {
            return Ok(None);
        };
        match choices.iter().find(|(k, _)| *k == value) {
            Some((_, v)) => Ok(Some(*v)),
            None => {
                let names: Vec<&str> = choices.iter().map(|(k, _)| *k).collect();
                Err(self.usage(format!(
                    "{}(): {name} {value:?} (--{}): give one of {}",
                    self.function,
                    name.replace('_', "-"),
                    names.join(", ")
                )))
            }
        }
    }

    /// Fails naming the first keyword that is not an option of the function.
    pub(crate) fn finish(self) -> PyResult<()> {
        match self.given.keys().next() {
            None => Ok(()),
            Some(name) => Err(self.usage(format!(
                "{}() has no option '{name}' (see help(bertqa.{}))",
                self.function, self.function
            ))),
        }
    }
}

pub(crate) const PROTOCOLS: &[(&str, bertqa::Protocol)] = &[
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
];
pub(crate) const SHARED_MEMORY: &[(&str, bertqa::SharedMemory)] = &[
    ("none", bertqa::SharedMemory::None),
    ("system", bertqa::SharedMemory::System),
    ("auto", bertqa::SharedMemory::Auto),
];

/// What the server options give: the URLs, and the builder with the server's settings.
pub(crate) struct Server {
    pub(crate) urls: Vec<String>,
    pub(crate) authority: Option<String>,
    pub(crate) protocol: bertqa::Protocol,
}

/// The server's settings (`url`, `protocol`, `authority`); the default URL is the
/// protocol's local one.
pub(crate) fn server(o: &mut Options<'_>, urls: Vec<String>) -> PyResult<Server> {
    let protocol = o
        .choice("protocol", PROTOCOLS)?
        .unwrap_or(bertqa::Protocol::Grpc);
    let mut urls: Vec<String> = urls
        .iter()
        .flat_map(|u| u.split(','))
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        urls.push(match std::env::var("BERTQA_URL") {
            Ok(u) if !u.is_empty() => u,
            _ => match protocol {
                bertqa::Protocol::Http => "localhost:8000".into(),
                _ => "localhost:8001".into(),
            },
        });
    }
    Ok(Server {
        urls,
        authority: o.text("authority")?,
        protocol,
    })
}

/// The client's settings of every pipeline option (the server's first, through
/// [`server`]): as the command's `pipeline_builder` sets them from its flags. `model`
/// names the model.
pub(crate) fn pipeline(
    o: &mut Options<'_>,
    server: &Server,
    model: &str,
) -> PyResult<bertqa::ClientBuilder> {
    let mut b = bertqa::Client::builder(server.urls[0].clone());
    for url in &server.urls[1..] {
        b = b.url(url.clone());
    }
    b = b.protocol(server.protocol).model(model);
    if let Some(a) = &server.authority {
        b = b.authority(a.clone());
    }
    b = network(o, b)?;
    // The tokenizer.
    let vocab = o.path("vocab")?;
    let tokenizer = o.path("tokenizer")?;
    if vocab.is_some() && tokenizer.is_some() {
        return Err(o.usage(format!(
            "{}(): vocab and tokenizer are two tokenizers: give one",
            o.function
        )));
    }
    if let Some(v) = vocab {
        b = b.vocab(v);
    }
    if let Some(t) = tokenizer {
        b = b.tokenizer(t);
    }
    let do_lower = o.get::<bool>("do_lower_case", "True or False")?;
    let no_lower = o.switch("no_lower_case")?;
    b = b.lower_case(!no_lower && do_lower != Some(false));
    // The windows.
    if let Some(n) = o.count("max_seq_length")? {
        b = b.max_seq_length(n);
    }
    if let Some(n) = o.count("doc_stride")? {
        b = b.doc_stride(n);
    }
    if let Some(n) = o.count("max_query_length")? {
        b = b.max_query_length(n);
    }
    // Decoding.
    if let Some(n) = o.count("n_best_size")? {
        b = b.n_best_size(n);
    }
    if let Some(n) = o.count("max_answer_length")? {
        b = b.max_answer_length(n);
    }
    if o.switch("version_2_with_negative")? {
        b = b.version_2_with_negative(true);
    }
    if let Some(t) = o.number("null_score_diff_threshold")? {
        b = b.null_score_diff_threshold(t);
    }
    if let Some(rules) = o.choice("postprocess", RULES)? {
        b = b.postprocess(rules);
    }
    // The requests.
    if let Some(n) = o.count("batch_size")? {
        b = b.batch_size(n);
    }
    if let Some(n) = o.count("concurrency")? {
        b = b.concurrency(n);
    }
    if let Some(n) = o.count("warmup")? {
        b = b.warmup(n);
    }
    let fixed = o.switch("fixed_seq_len")?;
    let dynamic = o.switch("dynamic_seq_len")?;
    if fixed && dynamic {
        return Err(o.usage(format!(
            "{}(): fixed_seq_len and dynamic_seq_len pad in opposite ways: give one",
            o.function
        )));
    }
    b = b.fixed_seq_len(fixed).dynamic_seq_len(dynamic);
    if let Some(m) = o.choice("shared_memory", SHARED_MEMORY)? {
        b = b.shared_memory(m);
    }
    // The binding's tensor names.
    let start_logits = o.text("start_logits")?;
    let end_logits = o.text("end_logits")?;
    b = b
        .binding(BindingOverrides {
            input_ids: o.text("input_ids")?,
            segment_ids: o.text("segment_ids")?,
            input_mask: o.text("input_mask")?,
            start_logits: start_logits.clone(),
            end_logits: end_logits.clone(),
        })
        .text_binding(TextOverrides {
            question_input: o.text("question_input")?,
            context_input: o.text("context_input")?,
            answer_output: o.text("answer_output")?,
            offsets_output: o.text("offsets_output")?,
            start_logits,
            end_logits,
        });
    Ok(b)
}

/// The network options (timeouts, TLS, headers, retries, readiness, connections,
/// transport) on `b`.
fn network(o: &mut Options<'_>, mut b: bertqa::ClientBuilder) -> PyResult<bertqa::ClientBuilder> {
    let py = o.py;
    if let Some(ms) = o.get::<u64>("timeout_ms", "milliseconds")? {
        b = b.timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = o.get::<u64>("connect_timeout_ms", "milliseconds")? {
        b = b.connect_timeout(Duration::from_millis(ms));
    }
    let tls = TlsConfig {
        root_cert: o.path("ssl_root_cert")?,
        client_cert: o.path("ssl_client_cert")?,
        client_key: o.path("ssl_client_key")?,
        target_name: o.text("ssl_target_name")?,
    };
    if tls.client_cert.is_some() != tls.client_key.is_some() {
        return Err(o.usage(format!(
            "{}(): ssl_client_cert and ssl_client_key go together: give both",
            o.function
        )));
    }
    let ssl = o.switch("ssl")?;
    let security = bertqa_cli::embed::security(
        tls,
        ssl,
        o.list("header")?,
        o.list("header_env")?,
        o.list("header_file")?,
    )
    .map_err(|e| crate::client::failure(py, e))?;
    if let Some(tls) = security.tls {
        b = b.tls(tls);
    }
    b = b.headers(security.headers);
    if let Some(n) = o.get::<u32>("retries", "a whole number, 0 or more")? {
        b = b.retries(n);
    }
    if let Some(ms) = o.get::<u64>("retry_max_backoff_ms", "milliseconds")? {
        b = b.retry_max_backoff(Duration::from_millis(ms.max(1)));
    }
    b = b.retry_model_errors(o.switch("retry_model_errors")?);
    if let Some(s) = o.number("wait_ready")? {
        if !(s.is_finite() && s >= 0.0) {
            return Err(o.usage(format!(
                "--wait-ready {s} must be a number of seconds, 0 or more"
            )));
        }
        b = b.wait_ready(Duration::from_secs_f64(s));
    }
    if let Some(n) = o.count("connections")? {
        if !(1..=64).contains(&n) {
            return Err(o.usage(format!("--connections {n}: give 1 to 64")));
        }
        b = b.connections(n);
    }
    if let Some(t) = o.choice("transport", TRANSPORTS)? {
        b = b.transport(t);
    }
    Ok(b)
}
