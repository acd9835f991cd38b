//! `bertqa perf`: a perf_analyzer-class load sweep with real BERT-QA features.
//!
//! Contract:
//! - Requests carry real features (built from a SQuAD file by `crate::features`),
//!   grouped into full batches of `batch_size` and cycled for as long as a level runs;
//!   those of a model that takes text carry question and context pairs ([`text`]), its
//!   ensemble's steps reported one by one.
//! - Load is either closed-loop (`Load::Concurrency`: N requests always in flight, each
//!   worker sending its next request when the previous one is answered) or open-loop
//!   (`Load::RequestRate`: sends scheduled at a constant or seeded Poisson rate,
//!   whatever the answers do).
//! - Each level is measured in windows (a time or a request count). A level is done
//!   when the last three windows agree within `stability_percent` on throughput and
//!   average latency (perf_analyzer's rule), or after `max_trials` windows; it then
//!   reports those three windows merged, marked unstable in the second case.
//! - A request's client latency runs from the start of its encoding to the end of its
//!   response's decoding. It is split into parts that are each measured, not inferred
//!   as one residual: encoding (client send), decoding (client recv), and the gRPC
//!   round trip, itself split by the server's `ModelStatistics` deltas over the same
//!   window into queue, compute input, compute infer, compute output and the server's
//!   other request time; the network/gRPC part is the round trip minus the server's
//!   request time.
//! - Server busy time comes from `batch_stats` (once per execution); `inference_stats`
//!   count a batched execution once per request, which is right for per-request latency
//!   but overstates how busy the server was.
//! - The process's own CPU time is measured per window, so a level where bertqa itself
//!   is the limit is reported as such (and a request rate the client could not keep).

pub(crate) mod budget;
mod decide;
pub mod export;
mod level;
mod requests;
pub(crate) mod requests_log;
mod run;
mod servers;
pub(crate) mod stats;
pub mod text;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::shm::{self, SharedMemory};
use crate::backend::Infer;
use crate::error::{Error, Result};
use crate::metrics::counters::us;
use crate::metrics::scraper::Scraper;
use crate::metrics::{ServerCounters, SpanMetrics};
use crate::pipeline::{Padding, SharedMemoryReport, SharedRegion};
use crate::types::Feature;
use budget::Plan;
pub use budget::{Budget, LevelBudget};
use level::{measure, new_shared, start_load, statistics, summarize, Source};
pub use requests::Requests;
pub use requests_log::RequestLog;
pub use run::{input_data, run, InputData, PerfOptions};
pub(crate) use run::{padding, token_features};
pub use servers::Servers;
pub use stats::{Distribution, Range, ServerBreakdown};
pub use text::{StepResult, TextLoad};

/// How load is generated, and at which levels.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// Closed loop: this many requests in flight, one level per value.
    Concurrency(Vec<usize>),
    /// Open loop: requests sent at these rates (per second), one level per value.
    RequestRate {
        /// Each level's rate, requests per second, in order.
        rates: Vec<f64>,
        /// How sends are spaced in time.
        distribution: Distribution,
        /// Seed of the Poisson gaps: level `i` draws from `seed + i` (wrapping), so a
        /// sweep sends on the same schedule each time; unused by `Constant`.
        seed: u64,
    },
}

impl Load {
    /// Levels in the range.
    pub(crate) fn len(&self) -> usize {
        match self {
            Load::Concurrency(v) => v.len(),
            Load::RequestRate { rates, .. } => rates.len(),
        }
    }

    /// `"concurrency"` or `"request_rate"`.
    pub(crate) fn mode(&self) -> &'static str {
        match self {
            Load::Concurrency(_) => "concurrency",
            Load::RequestRate { .. } => "request_rate",
        }
    }
}

/// One measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// A fixed time.
    Time(Duration),
    /// Until this many requests have been answered.
    Count(u64),
}

/// Settings of a sweep.
#[derive(Debug, Clone)]
pub struct PerfConfig {
    /// The levels, and whether load is closed-loop or open-loop.
    pub load: Load,
    /// What one measurement window is: a fixed time, or a count of answered requests.
    pub window: Window,
    /// Stability tolerance, percent (perf_analyzer: 10).
    pub stability_percent: f64,
    /// Most windows per level (at least 3).
    pub max_trials: usize,
    /// Requests sent (and ignored) before the first level.
    pub warmup: usize,
    /// Most requests in flight in request-rate mode; sends wait for a free slot.
    pub max_inflight: usize,
    /// Tensors through system shared memory (`crate::backend::shm`).
    pub shared_memory: SharedMemory,
    /// A latency budget: which levels are measured, and each level's goodput.
    pub budget: Option<Budget>,
    /// Where a JSON line per request is written, as requests complete (`None`: no log).
    pub requests_log: Option<Arc<RequestLog>>,
    /// The server's Prometheus metrics, read through the sweep.
    pub metrics: Option<Arc<Scraper>>,
    /// Once cancelled, the level under way is drained and the sweep ends with
    /// [`Error::Stopped`].
    pub stop: Option<tokio_util::sync::CancellationToken>,
    /// When a level has been measured enough.
    pub until: Until,
    /// A binary search's first level, an index into the load's values (tune starts a
    /// candidate where a similar one's best was); `None`: the range's first.
    pub start_at: Option<usize>,
}

/// When a level has been measured enough.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Until {
    /// perf_analyzer's rule: the last three windows agree within `stability_percent`.
    #[default]
    Stable,
    /// tune's rule (needs a budget): as soon as the level is clearly over the budget,
    /// clearly below `beat` features/s, or its throughput is known within `precision`
    /// (a fraction of it); see `perf/decide.rs`. A binary search then also ends at a
    /// level over the budget below `beat`: no load of the range can beat it within the
    /// budget (less load, less throughput; more, more latency).
    Decided {
        /// Features per second of the best so far: a level that cannot reach it is done.
        beat: f64,
        /// The relative half-width (a fraction of the mean, not percent) of the
        /// interval of the windows' mean throughput (Student's t, `perf/decide.rs`) at
        /// which a level is known well enough.
        precision: f64,
    },
}

impl Default for PerfConfig {
    fn default() -> Self {
        PerfConfig {
            load: Load::Concurrency(vec![1]),
            window: Window::Time(Duration::from_millis(5000)),
            stability_percent: 10.0,
            max_trials: 10,
            warmup: 0,
            max_inflight: 4096,
            shared_memory: SharedMemory::None,
            budget: None,
            requests_log: None,
            metrics: None,
            stop: None,
            until: Until::Stable,
            start_at: None,
        }
    }
}

/// One request's worth of features, padded to `seq_len`.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The request's features, `batch_size` of them, in file order.
    pub features: Vec<Arc<Feature>>,
    /// The length in tokens every feature of the batch is padded to.
    pub seq_len: usize,
}

/// Groups features into full batches of `batch_size` in file order, wrapping around to
/// the first features to fill the last batch, so every request has the same size; each
/// padded as the pipeline pads (`Padding::length`).
pub fn make_batches(features: &[Feature], batch_size: usize, padding: Padding) -> Vec<Batch> {
    let n = features.len();
    if n == 0 || batch_size == 0 {
        return Vec::new();
    }
    let shared: Vec<Arc<Feature>> = features.iter().cloned().map(Arc::new).collect();
    (0..n.div_ceil(batch_size))
        .map(|k| {
            let features: Vec<Arc<Feature>> = (0..batch_size)
                .map(|j| shared[(k * batch_size + j) % n].clone())
                .collect();
            let seq_len = padding.length(&features);
            Batch { features, seq_len }
        })
        .collect()
}

/// Which level a result is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// Closed loop: this many requests always in flight.
    Concurrency(usize),
    /// Open loop: requests sent at this rate, per second.
    RequestRate(f64),
}

impl Level {
    /// The level's value as perf_analyzer's first CSV column shows it.
    pub(crate) fn value(&self) -> f64 {
        match *self {
            Level::Concurrency(n) => n as f64,
            Level::RequestRate(r) => r,
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Level::Concurrency(n) => write!(f, "concurrency {n}"),
            Level::RequestRate(r) => write!(f, "request rate {r}/s"),
        }
    }
}

/// Client latency percentiles and mean, microseconds, over the requests answered in the
/// reported windows (all 0 when none was answered).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Median, µs.
    pub p50_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 95th percentile, µs.
    pub p95_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Mean, µs.
    pub avg_us: f64,
    /// Slowest request, µs.
    pub max_us: f64,
}

/// Client-side parts of the latency, averaged per request, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ClientBreakdown {
    /// Preparing the request (perf_analyzer's "Client Send"); the tensors themselves are
    /// serialized into the send buffer by the transport, inside the response wait.
    pub send_us: f64,
    /// Decoding the response into logits ("Client Recv").
    pub recv_us: f64,
    /// From handing the request to gRPC to having the response ("response wait").
    pub response_wait_us: f64,
    /// `response_wait_us` minus the server's request time: the network and both gRPC
    /// stacks ("Network+Server Send/Recv").
    pub network_us: f64,
}

/// What one level measured (the last three windows merged).
#[derive(Debug, Clone, PartialEq)]
pub struct LevelResult {
    /// The load this result is for.
    pub level: Level,
    /// The level's rule ended it ([`Until`]: three windows agreed, or tune's rule
    /// decided), not the most windows allowed.
    pub stable: bool,
    /// Windows measured.
    pub trials: usize,
    /// Each window's features per second, in order (the spread of a level).
    pub window_features_per_s: Vec<f64>,
    /// Length of the reported windows.
    pub window_s: f64,
    /// Requests answered in the reported windows.
    pub requests: u64,
    /// Features those requests carried (questions for a model that takes text).
    pub features: u64,
    /// `requests` per second of the reported windows.
    pub requests_per_s: f64,
    /// `features` per second of the reported windows (perf_analyzer's
    /// Inferences/Second; questions per second for a model that takes text).
    pub features_per_s: f64,
    /// Client latency: from the start of a request's encoding to the end of its
    /// response's decoding.
    pub latency: Latency,
    /// The client's parts of that latency, per request.
    pub client: ClientBreakdown,
    /// Zeros when `server_reported` is false.
    pub server: ServerBreakdown,
    /// The server reported its statistics (Triton's extension) for the level.
    pub server_reported: bool,
    /// An ensemble's steps, in order, each from its own statistics (empty: not an
    /// ensemble of a text model, or not reported).
    pub steps: Vec<StepResult>,
    /// The process's CPU time (user and system) over the reported windows, seconds.
    pub client_cpu_s: f64,
    /// `client_cpu_s` per second of the reported windows, over the number of CPUs: a
    /// fraction, 1 when every CPU was busy.
    pub client_cpu_fraction: f64,
    /// Requests sent per second (in request-rate mode: the rate bertqa kept).
    pub sent_per_s: f64,
    /// Request-rate mode: mean delay of a send behind its schedule, microseconds.
    pub send_delay_us: f64,
    /// How the level did against the latency budget, when there is one.
    pub budget: Option<LevelBudget>,
    /// The server's metrics over the level (`None`: not read).
    pub metrics: Option<SpanMetrics>,
    /// Honest notes: unstable, client-bound, rate not kept.
    pub warnings: Vec<String>,
}

impl LevelResult {
    /// The share of the reported windows the model's instances were executing
    /// (`batch_stats`, once per execution); 0 without statistics.
    pub(crate) fn busy_fraction(&self) -> f64 {
        if self.window_s > 0.0 {
            self.server.busy_us / 1e6 / self.window_s
        } else {
            0.0
        }
    }

    /// Inferences (batch rows) per model execution; 0 without executions.
    pub(crate) fn inferences_per_execution(&self) -> f64 {
        if self.server.executions > 0 {
            self.server.inferences as f64 / self.server.executions as f64
        } else {
            0.0
        }
    }
}

/// Progress callbacks (the library never prints).
pub trait PerfProgress: Sync {
    /// Something the caller's user should know before the sweep (a tokenizer's casing
    /// that looks wrong), in words that name settings.
    fn warning(&self, _text: &str) {}
    /// The sweep is about to start; each request carries `rows` features (questions
    /// for a model that takes text), whose throughput is counted in `unit` (`infer/s`,
    /// or `questions/s`).
    fn sending(&self, _rows: usize, _unit: &'static str) {}
    /// A level starts.
    fn level(&self, _level: Level) {}
    /// A window of `level` was measured.
    fn window(&self, _level: Level, _trial: usize, _requests_per_s: f64, _avg_latency_us: f64) {}
}

/// Runs the sweep of `requests`, any kind of model: every level of `config.load` in
/// order, each until stable or `max_trials` windows. Requests go through shared memory
/// as `config.shared_memory` says (slots for the largest request); an ensemble's steps
/// are reported one by one. The first request error ends the sweep with that error.
pub async fn sweep(
    servers: &Servers,
    requests: &Requests,
    config: &PerfConfig,
    progress: &dyn PerfProgress,
) -> Result<(Vec<LevelResult>, SharedMemoryReport)> {
    check(config)?;
    let shm = SharedRegion::open_slots(
        shared_memory(config, servers)?,
        servers.first().single_server(),
        most_inflight(config),
        requests.slot_bytes(),
    )
    .await?;
    let source = Source {
        shm: shm.clone(),
        requests: Arc::new(requests.clone()),
    };
    let swept = sweep_levels(servers, source, config, progress).await;
    let report = shm.close().await;
    Ok((swept?, report))
}

/// The most requests a sweep has in flight, at most [`shm::MAX_SLOTS`] under a
/// request rate (the shared memory region has a slot for each).
fn most_inflight(config: &PerfConfig) -> usize {
    match &config.load {
        Load::Concurrency(v) => v.iter().copied().max().unwrap_or(1),
        Load::RequestRate { .. } => config.max_inflight.min(shm::MAX_SLOTS),
    }
}

/// Shared memory is one server's: with several, tensors travel in the messages
/// (`SharedMemory::Auto`), and asking for system shared memory is an error.
fn shared_memory(config: &PerfConfig, servers: &Servers) -> Result<SharedMemory> {
    match config.shared_memory {
        _ if servers.len() == 1 => Ok(config.shared_memory),
        SharedMemory::System => Err(Error::Config(format!(
            "`SharedMemory::System` is one server's memory: with {} servers the tensors \
             travel in the messages (leave it out)",
            servers.len()
        ))),
        _ => Ok(SharedMemory::None),
    }
}

/// The settings every sweep checks.
fn check(config: &PerfConfig) -> Result<()> {
    if config.max_trials < 3 {
        return Err(Error::Config(format!(
            "`max_trials` {} is below 3 (the stability rule compares three windows)",
            config.max_trials
        )));
    }
    if let Window::Count(0) = config.window {
        return Err(Error::Config("`Window::Count` must be at least 1".into()));
    }
    Ok(())
}

/// A sweep of `source` (the shared memory region, if any, open).
async fn sweep_levels(
    servers: &Servers,
    source: Source,
    config: &PerfConfig,
    progress: &dyn PerfProgress,
) -> Result<Vec<LevelResult>> {
    let stopped = || config.stop.as_ref().is_some_and(|t| t.is_cancelled());
    // One warm-up for every server: its requests go to each in turn.
    let warmup = new_shared(servers, &source, None, config);
    for _ in 0..config.warmup * servers.len() {
        if stopped() {
            return Err(Error::Stopped);
        }
        warmup.one_request().await?;
    }
    let levels: Vec<Level> = match &config.load {
        Load::Concurrency(v) => v.iter().map(|&n| Level::Concurrency(n.max(1))).collect(),
        Load::RequestRate { rates, .. } => rates.iter().map(|&r| Level::RequestRate(r)).collect(),
    };
    let mut plan = Plan::new(levels.len(), config.budget.as_ref());
    if let Some(start) = config.start_at {
        plan = plan.starting_at(start);
    }
    let mut results = Vec::with_capacity(plan.most_levels());
    while let Some(i) = plan.next() {
        if stopped() {
            return Err(Error::Stopped);
        }
        let level = levels[i];
        progress.level(level);
        let shared = new_shared(servers, &source, Some(level), config);
        // Nothing is in flight here and after the drain: counters read at both points
        // cover the same requests.
        let opened = match &config.metrics {
            Some(m) => Some((m.now().await, statistics(&shared).await?)),
            None => None,
        };
        // Every level starts from the first batch, so levels send the same features.
        let generator = start_load(&shared, level, config, i as u64);
        // However the level ends (a panic in a progress callback included), its load
        // stops.
        let _stop_load = level::StopOnDrop(&shared);
        let measured = match &config.stop {
            Some(stop) => tokio::select! {
                m = measure(&shared, level, config, progress) => m,
                _ = stop.cancelled() => Err(Error::Stopped),
            },
            None => measure(&shared, level, config, progress).await,
        };
        shared.stop.store(true, Ordering::SeqCst);
        // Drain what is in flight so it does not count in the next level's server
        // statistics.
        let _ = generator.await;
        if let Some(e) = shared.take_error() {
            return Err(e);
        }
        let measured = measured?;
        let metrics = match (&config.metrics, opened) {
            (Some(m), Some((open, stats_open))) => {
                let close = m.now().await;
                let stats_close = statistics(&shared).await?;
                let last = &measured.0[measured.0.len().saturating_sub(3)..];
                let from = last.first().map_or(open.at, |w| w.from);
                let to = last.last().map_or(close.at, |w| w.from + w.duration);
                let span = m.span(&open, &close, from, to);
                let stats = stats_close.zip(stats_open).map(|(b, a)| b.since(&a));
                Some((span, stats))
            }
            _ => None,
        };
        let mut result = summarize(level, config, measured);
        if let Some((span, stats)) = metrics {
            // The metrics read one server's counters only where the statistics are too.
            let comparable = servers.len() == 1 || span.endpoints.len() == servers.len();
            if let (Some(counted), Some(stats), true) = (span.inference, stats, comparable) {
                result
                    .warnings
                    .extend(disagreement(level, &counted, &stats));
            }
            result.metrics = Some(span);
        }
        let within = result.budget.is_some_and(|b| b.within);
        plan.record(i, within);
        let cannot_win = match config.until {
            Until::Decided { beat, .. } => !within && result.features_per_s < beat,
            Until::Stable => false,
        };
        results.push(result);
        if cannot_win {
            break;
        }
    }
    Ok(results)
}

/// Where the `nv_inference_*` counters of a level disagree with the model statistics
/// over the same span: counts exactly; times within one whole microsecond per request
/// (the metrics add each request's time truncated to microseconds) plus
/// [`TIME_SLACK_FRACTION`] of the total.
pub(crate) fn disagreement(level: Level, m: &ServerCounters, s: &ServerCounters) -> Vec<String> {
    let counts = [
        ("nv_inference_request_success", m.requests, s.requests),
        ("nv_inference_count", m.inferences, s.inferences),
        ("nv_inference_exec_count", m.executions, s.executions),
    ];
    let times = [
        ("nv_inference_queue_duration_us", m.queue_ns, s.queue_ns),
        (
            "nv_inference_compute_infer_duration_us",
            m.compute_infer_ns,
            s.compute_infer_ns,
        ),
    ];
    let mut out = Vec::new();
    for (name, metric, stat) in counts {
        if metric != stat {
            out.push(format!(
                "{level}: metrics {name} rose by {metric}, the model statistics by {stat}"
            ));
        }
    }
    let requests = s.requests as f64;
    for (name, metric, stat) in times {
        let (metric, us) = (us(metric), us(stat));
        if (metric - us).abs() > requests + TIME_SLACK_FRACTION * us {
            out.push(format!(
                "{level}: metrics {name} rose by {metric}, the model statistics by {us:.0} us"
            ));
        }
    }
    out
}

/// The honest notes on a level: not stable; bertqa's own CPU near its limit; in
/// request-rate mode, a rate bertqa could not keep, or one the server could not.
pub(crate) fn warnings(l: &LevelResult, stability_percent: f64, cores: usize) -> Vec<String> {
    let level = l.level;
    let mut out = Vec::new();
    if !l.stable {
        out.push(format!(
            "{level}: not stable after {} windows (the last 3 differ by more than {}% \
             in throughput or latency); figures are of the last 3",
            l.trials, stability_percent
        ));
    }
    if l.client_cpu_fraction >= CPU_LIMIT_FRACTION {
        out.push(format!(
            "{level}: bertqa used {:.0}% of the {cores} CPUs: the client, not the server, \
             may be the limit",
            l.client_cpu_fraction * 100.0
        ));
    }
    if let Level::RequestRate(r) = level {
        if l.sent_per_s < r * RATE_KEPT_FRACTION {
            out.push(format!(
                "{level}: bertqa sent only {:.1} requests/s of the {r} requested (mean send \
                 delay {:.0} us): the client could not keep the rate (its CPU, or all \
                 `max_inflight` slots busy)",
                l.sent_per_s, l.send_delay_us
            ));
        } else if l.requests_per_s < r * RATE_KEPT_FRACTION {
            out.push(format!(
                "{level}: the server answered {:.1} requests/s of the {r} sent: requests are \
                 queueing",
                l.requests_per_s
            ));
        }
    }
    out
}

/// Relative slack allowed between the metrics' and the statistics' total times.
pub(crate) const TIME_SLACK_FRACTION: f64 = 0.01;
/// Above this share of all CPUs, bertqa itself is reported as a possible limit.
pub(crate) const CPU_LIMIT_FRACTION: f64 = 0.8;
/// Below this share of the requested rate, a rate counts as not kept.
pub(crate) const RATE_KEPT_FRACTION: f64 = 0.95;

#[cfg(test)]
mod tests;
