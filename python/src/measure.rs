//! `Client.perf` and `Client.tune`: the client's settings (python/bertqa's
//! `Client._settings`) and the call's options read into the library's values (a
//! client's builder, [`PerfSettings`], [`TuneSettings`]), checked and run by the
//! command's own code ([`bertqa_cli::embed::perf`], [`bertqa_cli::embed::tune`]) on a
//! thread of its own; the report comes back as the document `perf --json` prints, or
//! tune.json's.

use std::path::PathBuf;

use bertqa_cli::embed::{self, PerfSettings, Reason, TuneSettings};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::api::{on_thread, read, Data};
use crate::client::{from_json, raise};
use crate::settings::{self, Options, CLIENT_SETTINGS, SHARED_MEMORY};

const DISTRIBUTIONS: &[(&str, bertqa::perf::Distribution)] = &[
    ("constant", bertqa::perf::Distribution::Constant),
    ("poisson", bertqa::perf::Distribution::Poisson),
];

/// The client's settings and `options` as one set of keywords: fails naming an option
/// that is not one of `function`'s (a setting of the client among them).
fn keywords<'py>(
    py: Python<'py>,
    function: &'static str,
    client: &Bound<'py, PyDict>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Options<'py>> {
    let merged = client.copy()?;
    let own = settings::table(function);
    if let Some(options) = options {
        for (k, v) in options.iter() {
            let name: String = k.extract()?;
            if !own.iter().any(|(n, _)| *n == name) {
                return Err(raise(
                    py,
                    "usage",
                    &format!("{function}() has no option '{name}' (see help(bertqa.{function}))"),
                ));
            }
            merged.set_item(name, v)?;
        }
    }
    Options::new(py, function, Some(&merged))
}

/// The measurement's and metrics' options.
fn measure(
    o: &mut Options<'_>,
    measure: &mut embed::MeasureArgs,
    metrics: &mut embed::MetricsArgs,
) -> PyResult<()> {
    if o.has("measurement_interval_ms") && o.has("measurement_request_count") {
        return Err(o.usage(format!(
            "{}(): measurement_interval_ms and measurement_request_count are two kinds of \
             window: give one",
            o.function
        )));
    }
    measure.measurement_interval_ms = o.parsed("measurement_interval_ms", "milliseconds")?;
    measure.measurement_request_count =
        o.parsed("measurement_request_count", "a whole number, 0 or more")?;
    if let Some(p) = o.parsed("stability_percentage", "a number")? {
        measure.stability_percentage = p;
    }
    if let Some(n) = o.parsed("max_trials", "a whole number, 0 or more")? {
        measure.max_trials = n;
    }
    metrics.metrics_url = o.list("metrics_url")?;
    metrics.no_metrics = o.switch("no_metrics")?;
    if metrics.no_metrics && !metrics.metrics_url.is_empty() {
        return Err(o.usage(format!(
            "{}(): no_metrics and metrics_url: give one",
            o.function
        )));
    }
    if let Some(ms) = o.parsed("metrics_interval_ms", "milliseconds")? {
        metrics.metrics_interval_ms = ms;
    }
    Ok(())
}

/// What a failure of the command's code raises.
fn failed(py: Python<'_>, (reason, sentence): (Reason, String)) -> PyErr {
    raise(py, reason.name(), &sentence)
}

/// `Client.perf`: the document `perf --json` prints, and the data's warnings.
#[pyfunction]
#[pyo3(signature = (urls, model, client, data, progress, options=None))]
pub(crate) fn perf<'py>(
    py: Python<'py>,
    urls: Vec<String>,
    model: String,
    client: &Bound<'py, PyDict>,
    data: Data,
    progress: bool,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Vec<String>)> {
    let mut o = keywords(py, "Client.perf", client, options)?;
    let mut s = PerfSettings {
        quiet: !progress,
        ..PerfSettings::default()
    };
    if let Some(n) = o.parsed("concurrency", "a whole number, 0 or more")? {
        s.concurrency = n;
    }
    if let Some(n) = o.parsed("warmup", "a whole number, 0 or more")? {
        s.warmup = n;
    }
    if let Some(m) = o.choice("shared_memory", SHARED_MEMORY)? {
        s.shared_memory = m;
    }
    s.concurrency_range = o.words("concurrency_range")?;
    s.request_rate_range = o.words("request_rate_range")?;
    if s.concurrency_range.is_some() && s.request_rate_range.is_some() {
        return Err(o.usage(
            "Client.perf(): concurrency_range and request_rate_range are two kinds of load: \
             give one",
        ));
    }
    if let Some(d) = o.choice("request_distribution", DISTRIBUTIONS)? {
        s.request_distribution = d;
    }
    if let Some(n) = o.parsed("seed", "a whole number, 0 or more")? {
        s.seed = n;
    }
    if let Some(n) = o.parsed("max_inflight", "a whole number, 0 or more")? {
        s.max_inflight = n;
    }
    s.latency_threshold = o.parsed("latency_threshold", "a number")?;
    let budget_less = s.latency_threshold.is_none();
    if let Some(p) = o.parsed("percentile", "a number")? {
        if budget_less {
            return Err(o.usage("Client.perf(): percentile needs latency_threshold"));
        }
        s.percentile = p;
    }
    s.binary_search = o.switch("binary_search")?;
    if s.binary_search && budget_less {
        return Err(o.usage("Client.perf(): binary_search needs latency_threshold"));
    }
    measure(&mut o, &mut s.measure, &mut s.metrics)?;
    s.requests_jsonl = o.path("requests_jsonl")?;
    s.csv = o.path("csv")?;
    s.svg = o.path("svg")?;
    s.html = o.path("html")?;
    let strict = o.switch("strict")?;
    let limit = o.parsed("limit", "a whole number, 0 or more")?;
    let version = o.text("model_version")?.unwrap_or_default();
    let server = settings::server(&mut o, urls)?;
    let builder = settings::pipeline(&mut o, &server, &model)?.model_version(version);
    o.finish()?;
    let sweep = embed::perf_check(&s).map_err(|e| failed(py, e))?;
    let mut warnings = Vec::new();
    let read = read(py, data)?;
    let label = read.label.clone();
    let (dataset, _) = read.dataset(py, strict, limit, &mut warnings)?;
    let document = on_thread(py, move |stop| {
        embed::perf(&s, sweep, &builder, &dataset, label, stop)
    })?
    .map_err(|e| failed(py, e))?;
    Ok((from_json(py, &document)?, warnings))
}

/// `Client.tune`: tune.json's document, and the data's warnings.
#[pyfunction]
#[pyo3(signature = (urls, model, client, data, output_dir, progress, options=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn tune<'py>(
    py: Python<'py>,
    urls: Vec<String>,
    model: String,
    client: &Bound<'py, PyDict>,
    data: Data,
    output_dir: PathBuf,
    progress: bool,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Vec<String>)> {
    let mut o = keywords(py, "Client.tune", client, options)?;
    // tune has no flag of these: it pads and places tensors as the command does.
    for name in ["shared_memory", "fixed_seq_len", "model_version"] {
        o.drop(name);
    }
    let mut s = TuneSettings {
        output_dir,
        quiet: !progress,
        ..TuneSettings::default()
    };
    s.step = o.text("step")?;
    s.control_url = o.text("control_url")?;
    for (name, value) in [
        ("max_batch_sizes", &mut s.max_batch_sizes),
        ("queue_delays_us", &mut s.queue_delays_us),
        ("instances", &mut s.instances),
        ("preferred_batch_sizes", &mut s.preferred_batch_sizes),
    ] {
        if let Some(text) = o.words(name)? {
            *value = text;
        }
    }
    s.exhaustive = o.switch("exhaustive")?;
    if let Some(n) = o.parsed("remeasure", "a whole number, 0 or more")? {
        s.remeasure = n;
    }
    s.keep_best = o.switch("keep_best")?;
    // The client's batch size is the windows per request of each candidate's sweep.
    if let Some(n) = o.parsed("batch_size", "a whole number, 0 or more")? {
        s.batch_size = n;
    }
    if o.has("concurrency") && o.has("concurrency_range") {
        return Err(o.usage(
            "Client.tune(): concurrency and concurrency_range: give one (a level, or levels \
             to search)",
        ));
    }
    s.concurrency = o.parsed("concurrency", "a whole number, 0 or more")?;
    if let Some(text) = o.words("concurrency_range")? {
        s.concurrency_range = text;
    }
    if let Some(n) = o.parsed("warmup", "a whole number, 0 or more")? {
        s.warmup = n;
    }
    s.latency_threshold = o.parsed("latency_threshold", "a number")?;
    if let Some(p) = o.parsed("percentile", "a number")? {
        s.percentile = p;
    }
    measure(&mut o, &mut s.measure, &mut s.metrics)?;
    s.write_config = o.path("write_config")?;
    s.html = o.path("html")?;
    let strict = o.switch("strict")?;
    let limit = o.parsed("limit", "a whole number, 0 or more")?;
    let server = settings::server(&mut o, urls)?;
    let builder = settings::pipeline(&mut o, &server, &model)?;
    o.finish()?;
    let checked = embed::tune_check(&s).map_err(|e| failed(py, e))?;
    let mut warnings = Vec::new();
    let read = read(py, data)?;
    let label = read.label.clone();
    let (dataset, _) = read.dataset(py, strict, limit, &mut warnings)?;
    let document = on_thread(py, move |stop| {
        embed::tune(&s, checked, builder, &dataset, label, stop)
    })?
    .map_err(|e| failed(py, e))?;
    Ok((from_json(py, &document)?, warnings))
}

/// The client's settings that `Client.perf` and `Client.tune` take (never options of
/// theirs), for the docstrings and the tests.
#[pyfunction]
pub(crate) fn client_settings() -> Vec<&'static str> {
    CLIENT_SETTINGS.to_vec()
}
