//! `bertqa perf`: a perf_analyzer-class load sweep with real BERT-QA features.
//!
//! Contract:
//! - Requests carry real features (built from a SQuAD file by [`crate::features`]),
//!   grouped into full batches of `batch_size` and cycled for as long as a level runs.
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
pub(crate) mod export;
pub(crate) mod requests_log;
pub(crate) mod stats;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::backend::shm::{self, SharedMemory};
use crate::backend::{prepare_request, Binding, TritonClient};
use crate::error::{Error, Result};
use crate::pipeline::{Padding, SharedMemoryReport, SharedRegion};
use crate::types::Feature;
use budget::Plan;
pub(crate) use budget::{Budget, LevelBudget};
use requests_log::LevelKey;
pub(crate) use requests_log::RequestLog;
use stats::{Arrivals, ServerCounters};
pub(crate) use stats::{Distribution, Range, ServerBreakdown};

/// How load is generated, and at which levels.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Load {
    /// Closed loop: this many requests in flight, one level per value.
    Concurrency(Vec<usize>),
    /// Open loop: requests sent at these rates (per second), one level per value.
    RequestRate {
        rates: Vec<f64>,
        distribution: Distribution,
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
pub(crate) enum Window {
    /// A fixed time.
    Time(Duration),
    /// Until this many requests have been answered.
    Count(u64),
}

/// Settings of a sweep.
#[derive(Debug, Clone)]
pub(crate) struct PerfConfig {
    pub load: Load,
    pub window: Window,
    /// Stability tolerance, percent (perf_analyzer: 10).
    pub stability_percent: f64,
    /// Most windows per level (at least 3).
    pub max_trials: usize,
    /// Requests sent (and ignored) before the first level.
    pub warmup: usize,
    /// Most requests in flight in request-rate mode; sends wait for a free slot.
    pub max_inflight: usize,
    /// Tensors through system shared memory ([`crate::backend::shm`]).
    pub shared_memory: SharedMemory,
    /// A latency budget: which levels are measured, and each level's goodput.
    pub budget: Option<Budget>,
    /// `--requests-jsonl`: a line per request, as requests complete.
    pub requests_log: Option<Arc<RequestLog>>,
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
        }
    }
}

/// One request's worth of features, padded to `seq_len`.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    pub features: Vec<Arc<Feature>>,
    pub seq_len: usize,
}

/// Groups features into full batches of `batch_size` in file order, wrapping around to
/// the first features to fill the last batch, so every request has the same size; each
/// padded as the pipeline pads ([`Padding::length`]).
pub(crate) fn make_batches(
    features: &[Feature],
    batch_size: usize,
    padding: Padding,
) -> Vec<Batch> {
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
pub(crate) enum Level {
    Concurrency(usize),
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

/// Client latency percentiles and mean, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Latency {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub avg_us: f64,
    pub max_us: f64,
}

/// Client-side parts of the latency, averaged per request, microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ClientBreakdown {
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
pub(crate) struct LevelResult {
    pub level: Level,
    /// The last three windows agreed within the stability tolerance.
    pub stable: bool,
    /// Windows measured.
    pub trials: usize,
    /// Length of the reported windows.
    pub window_s: f64,
    pub requests: u64,
    pub features: u64,
    pub requests_per_s: f64,
    pub features_per_s: f64,
    pub latency: Latency,
    pub client: ClientBreakdown,
    /// Zeros when `server_reported` is false.
    pub server: ServerBreakdown,
    /// The server reported its statistics (Triton's extension) for the level.
    pub server_reported: bool,
    /// bertqa's CPU time over the reported windows, and as a fraction of all CPUs.
    pub client_cpu_s: f64,
    pub client_cpu_fraction: f64,
    /// Requests sent per second (in request-rate mode: the rate bertqa kept).
    pub sent_per_s: f64,
    /// Request-rate mode: mean delay of a send behind its schedule, microseconds.
    pub send_delay_us: f64,
    /// How the level did against the latency budget, when there is one.
    pub budget: Option<LevelBudget>,
    /// Honest notes: unstable, client-bound, rate not kept.
    pub warnings: Vec<String>,
}

/// Progress callbacks (the library never prints).
pub(crate) trait PerfProgress: Sync {
    /// A level starts.
    fn level(&self, _level: Level) {}
    /// A window of `level` was measured.
    fn window(&self, _level: Level, _trial: usize, _requests_per_s: f64, _avg_latency_us: f64) {}
}

/// One answered request.
#[derive(Debug, Clone, Copy)]
struct Record {
    encode_ns: u64,
    wait_ns: u64,
    decode_ns: u64,
    features: u32,
}

impl Record {
    fn latency_ns(&self) -> u64 {
        self.encode_ns + self.wait_ns + self.decode_ns
    }
}

/// State shared by the load generators of one level and the measuring loop.
struct Shared {
    client: TritonClient,
    /// The level being measured (`None`: warm-up).
    level: Option<Level>,
    /// The window requests now complete in (see [`requests_log`]); changed under the
    /// `records` lock, so a request's line and the window it is counted in agree.
    window: AtomicU64,
    requests_log: Option<Arc<RequestLog>>,
    /// The tensors' shared memory region, if any.
    shm: SharedRegion,
    binding: Arc<Binding>,
    batches: Arc<Vec<Batch>>,
    next_batch: AtomicUsize,
    records: Mutex<Vec<Record>>,
    completed: AtomicU64,
    /// The measuring loop is woken when `completed` reaches this.
    wake_at: AtomicU64,
    sent: AtomicU64,
    /// Total delay of sends behind schedule (request-rate mode), ns.
    late_ns: AtomicU64,
    stop: AtomicBool,
    error: Mutex<Option<Error>>,
    notify: Notify,
}

impl Shared {
    fn fail(&self, e: Error) {
        let mut slot = self.error.lock().expect("error lock");
        if slot.is_none() {
            *slot = Some(e);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    fn take_error(&self) -> Option<Error> {
        self.error.lock().expect("error lock").take()
    }

    /// Prepares, sends and decodes one batch as the pipeline's dispatch stage does
    /// ([`SharedRegion`]), recording the three times. The tensors are serialized by the
    /// transport as the request is sent, so that time counts in the response wait, not
    /// in the preparation.
    async fn one_request(&self) -> Result<()> {
        let i = self.next_batch.fetch_add(1, Ordering::Relaxed) % self.batches.len();
        let batch = &self.batches[i];
        let wall = self.requests_log.is_some().then(std::time::SystemTime::now);
        let t0 = Instant::now();
        let mut t = [t0; 3];
        let answered = self.send_and_read(batch, &mut t).await;
        let t3 = Instant::now();
        let record = Record {
            encode_ns: (t[1] - t0).as_nanos() as u64,
            wait_ns: (t[2] - t[1]).as_nanos() as u64,
            decode_ns: (t3 - t[2]).as_nanos() as u64,
            features: batch.features.len() as u32,
        };
        let mut records = self.records.lock().expect("records lock");
        if let (Some(log), Some(wall)) = (&self.requests_log, wall) {
            self.log(log, wall, batch, &record, answered.as_ref().err());
        }
        answered?;
        records.push(record);
        drop(records);
        let done = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        if done == self.wake_at.load(Ordering::SeqCst) {
            self.notify.notify_one();
        }
        Ok(())
    }

    /// Prepares, sends and decodes `batch`; `t` gets the instants the request was
    /// prepared (1) and answered (2), as far as it got.
    async fn send_and_read(&self, batch: &Batch, t: &mut [Instant; 3]) -> Result<()> {
        let request = prepare_request(&self.binding, batch.features.clone(), batch.seq_len)?;
        // Writing the tensors into shared memory is preparation, as building them is.
        let placed = self.shm.place(request);
        t[1] = Instant::now();
        t[2] = t[1];
        self.sent.fetch_add(1, Ordering::Relaxed);
        let (response, _, in_shm) = placed.send(&self.client).await?;
        t[2] = Instant::now();
        let (logits, _) = placed.read(&response, in_shm, |checked, features| {
            checked.logits(features.iter().map(|f| f.unique_id))
        })?;
        drop(std::hint::black_box(logits));
        Ok(())
    }

    /// Writes a request's line (called under the `records` lock).
    fn log(
        &self,
        log: &RequestLog,
        wall: std::time::SystemTime,
        batch: &Batch,
        r: &Record,
        error: Option<&Error>,
    ) {
        let ms = |ns: u64| ns as f64 / 1e6;
        log.write(&requests_log::Line {
            level: self.level.map(LevelKey::from),
            window: self.level.map(|_| self.window.load(Ordering::SeqCst)),
            send_unix_s: wall
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            latency_ms: ms(r.latency_ns()),
            send_ms: ms(r.encode_ns),
            wait_ms: ms(r.wait_ns),
            recv_ms: ms(r.decode_ns),
            batch_size: batch.features.len(),
            seq_len: batch.seq_len,
            features: batch.features.iter().map(|f| f.unique_id).collect(),
            endpoint: self.client.url(),
            outcome: if error.is_some() { "error" } else { "ok" },
            code: error.map(|e| crate::backend::RetryPolicy::default().classify(e).code),
            retries: 0,
        });
    }
}

/// A point between windows: what had happened by then.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    /// `None`: the server does not report statistics.
    server: Option<ServerCounters>,
    cpu: Duration,
    sent: u64,
    late_ns: u64,
}

/// One measured window.
#[derive(Debug, Clone)]
struct Measured {
    duration: Duration,
    records: Vec<Record>,
    server: Option<ServerCounters>,
    cpu: Duration,
    sent: u64,
    late_ns: u64,
}

impl Measured {
    fn requests_per_s(&self) -> f64 {
        rate(self.records.len() as f64, self.duration)
    }

    fn avg_latency_us(&self) -> f64 {
        if self.records.is_empty() {
            return 0.0;
        }
        self.records
            .iter()
            .map(|r| r.latency_ns() as f64)
            .sum::<f64>()
            / self.records.len() as f64
            / 1000.0
    }
}

fn rate(n: f64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

/// Runs the sweep: every level of `config.load` in order, each until stable or
/// `max_trials` windows. The first request error ends the sweep with that error.
pub(crate) async fn sweep(
    client: &TritonClient,
    binding: Arc<Binding>,
    batches: Vec<Batch>,
    config: &PerfConfig,
    progress: &dyn PerfProgress,
) -> Result<(Vec<LevelResult>, SharedMemoryReport)> {
    if batches.is_empty() {
        return Err(Error::Config(
            "no features to send (the data produced no windows)".into(),
        ));
    }
    if config.max_trials < 3 {
        return Err(Error::Config(format!(
            "`max_trials` {} is below 3 (the stability rule compares three windows)",
            config.max_trials
        )));
    }
    if let Window::Count(0) = config.window {
        return Err(Error::Config("`Window::Count` must be at least 1".into()));
    }
    // Slots for the sweep's requests in flight, each for the largest batch.
    let most_inflight = match &config.load {
        Load::Concurrency(v) => v.iter().copied().max().unwrap_or(1),
        Load::RequestRate { .. } => config.max_inflight.min(shm::MAX_SLOTS),
    };
    let rows = batches.iter().map(|b| b.features.len()).max().unwrap_or(1);
    let seq_len = batches.iter().map(|b| b.seq_len).max().unwrap_or(1);
    let shm = SharedRegion::open(
        config.shared_memory,
        Some(client),
        most_inflight,
        &binding,
        rows,
        seq_len,
    )
    .await?;
    let swept = sweep_levels(client, &shm, binding, batches, config, progress).await;
    let report = shm.close().await;
    Ok((swept?, report))
}

/// [`sweep`] once the shared memory region (if any) is open.
async fn sweep_levels(
    client: &TritonClient,
    shm: &SharedRegion,
    binding: Arc<Binding>,
    batches: Vec<Batch>,
    config: &PerfConfig,
    progress: &dyn PerfProgress,
) -> Result<Vec<LevelResult>> {
    let batches = Arc::new(batches);
    for _ in 0..config.warmup {
        let shared = new_shared(client, shm, &binding, &batches, None, config);
        shared.one_request().await?;
    }
    let levels: Vec<Level> = match &config.load {
        Load::Concurrency(v) => v.iter().map(|&n| Level::Concurrency(n.max(1))).collect(),
        Load::RequestRate { rates, .. } => rates.iter().map(|&r| Level::RequestRate(r)).collect(),
    };
    let mut plan = Plan::new(levels.len(), config.budget.as_ref());
    let mut results = Vec::with_capacity(plan.most_levels());
    while let Some(i) = plan.next() {
        let level = levels[i];
        progress.level(level);
        let shared = new_shared(client, shm, &binding, &batches, Some(level), config);
        // Every level starts from the first batch, so levels send the same features.
        let generator = start_load(&shared, level, config, i as u64);
        let measured = measure(&shared, level, config, progress).await;
        shared.stop.store(true, Ordering::SeqCst);
        // Drain what is in flight so it does not count in the next level's server
        // statistics.
        let _ = generator.await;
        if let Some(e) = shared.take_error() {
            return Err(e);
        }
        let result = summarize(level, config, measured?);
        plan.record(i, result.budget.is_some_and(|b| b.within));
        results.push(result);
    }
    Ok(results)
}

fn new_shared(
    client: &TritonClient,
    shm: &SharedRegion,
    binding: &Arc<Binding>,
    batches: &Arc<Vec<Batch>>,
    level: Option<Level>,
    config: &PerfConfig,
) -> Arc<Shared> {
    Arc::new(Shared {
        client: client.clone(),
        level,
        window: AtomicU64::new(0),
        requests_log: config.requests_log.clone(),
        shm: shm.clone(),
        binding: binding.clone(),
        batches: batches.clone(),
        next_batch: AtomicUsize::new(0),
        records: Mutex::new(Vec::new()),
        completed: AtomicU64::new(0),
        wake_at: AtomicU64::new(u64::MAX),
        sent: AtomicU64::new(0),
        late_ns: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        error: Mutex::new(None),
        notify: Notify::new(),
    })
}

/// Starts the load of one level; the handle finishes once the load has stopped and
/// every request it sent is answered.
fn start_load(
    shared: &Arc<Shared>,
    level: Level,
    config: &PerfConfig,
    level_index: u64,
) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    match level {
        Level::Concurrency(n) => tokio::spawn(async move {
            let mut workers = JoinSet::new();
            for _ in 0..n {
                let s = shared.clone();
                workers.spawn(async move {
                    while !s.stop.load(Ordering::SeqCst) {
                        if let Err(e) = s.one_request().await {
                            s.fail(e);
                        }
                    }
                });
            }
            while workers.join_next().await.is_some() {}
        }),
        Level::RequestRate(rate_per_s) => {
            let (distribution, seed) = match &config.load {
                Load::RequestRate {
                    distribution, seed, ..
                } => (*distribution, *seed),
                Load::Concurrency(_) => (Distribution::Constant, 0),
            };
            // Each level has its own reproducible sequence of gaps.
            let mut arrivals =
                Arrivals::new(distribution, rate_per_s, seed.wrapping_add(level_index));
            let max_inflight = config.max_inflight.max(1);
            tokio::spawn(async move {
                let mut inflight = JoinSet::new();
                let mut due = Instant::now();
                while !shared.stop.load(Ordering::SeqCst) {
                    due += Duration::from_secs_f64(arrivals.next_gap_s());
                    let now = Instant::now();
                    if due > now {
                        tokio::time::sleep_until(due.into()).await;
                    } else {
                        // Behind schedule: send at once, but let other tasks run.
                        tokio::task::yield_now().await;
                    }
                    while inflight.try_join_next().is_some() {}
                    while inflight.len() >= max_inflight {
                        inflight.join_next().await;
                    }
                    if shared.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let late = Instant::now().saturating_duration_since(due);
                    shared
                        .late_ns
                        .fetch_add(late.as_nanos() as u64, Ordering::Relaxed);
                    let s = shared.clone();
                    inflight.spawn(async move {
                        if let Err(e) = s.one_request().await {
                            s.fail(e);
                        }
                    });
                }
                while inflight.join_next().await.is_some() {}
            })
        }
    }
}

async fn mark(shared: &Shared) -> Result<Mark> {
    let at = Instant::now();
    let cpu = stats::process_cpu();
    let sent = shared.sent.load(Ordering::SeqCst);
    let late_ns = shared.late_ns.load(Ordering::SeqCst);
    let stats = shared
        .client
        .model_statistics_if_any(&shared.binding.model, &shared.binding.version)
        .await?;
    Ok(Mark {
        at,
        server: stats.map(|s| ServerCounters::from_stats(&s)),
        cpu,
        sent,
        late_ns,
    })
}

/// Measures windows of one level until stable or out of trials.
async fn measure(
    shared: &Arc<Shared>,
    level: Level,
    config: &PerfConfig,
    progress: &dyn PerfProgress,
) -> Result<(Vec<Measured>, bool)> {
    let mut windows: Vec<Measured> = Vec::new();
    let mut before = mark(shared).await?;
    // Records of requests answered before the first mark belong to no window.
    {
        let mut records = shared.records.lock().expect("records lock");
        records.clear();
        shared.window.store(1, Ordering::SeqCst);
    }
    for trial in 1..=config.max_trials {
        match config.window {
            Window::Time(d) => {
                let until = tokio::time::Instant::from_std(before.at + d);
                while !shared.stop.load(Ordering::SeqCst) {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        _ = shared.notify.notified() => {}
                    }
                }
            }
            Window::Count(n) => {
                let target = shared.completed.load(Ordering::SeqCst) + n;
                shared.wake_at.store(target, Ordering::SeqCst);
                while shared.completed.load(Ordering::SeqCst) < target
                    && !shared.stop.load(Ordering::SeqCst)
                {
                    // The timeout only guards against a missed wake-up.
                    let _ =
                        tokio::time::timeout(Duration::from_millis(100), shared.notify.notified())
                            .await;
                }
            }
        }
        if shared.stop.load(Ordering::SeqCst) {
            return Err(shared
                .take_error()
                .unwrap_or_else(|| Error::Internal("the load stopped unexpectedly".into())));
        }
        let records = {
            let mut records = shared.records.lock().expect("records lock");
            shared.window.fetch_add(1, Ordering::SeqCst);
            std::mem::take(&mut *records)
        };
        let after = mark(shared).await?;
        let window = Measured {
            duration: after.at - before.at,
            records,
            server: after.server.zip(before.server).map(|(a, b)| a.since(&b)),
            cpu: after.cpu.saturating_sub(before.cpu),
            sent: after.sent - before.sent,
            late_ns: after.late_ns - before.late_ns,
        };
        progress.window(
            level,
            trial,
            window.requests_per_s(),
            window.avg_latency_us(),
        );
        windows.push(window);
        before = after;
        let points: Vec<(f64, f64)> = windows
            .iter()
            .map(|w| (w.requests_per_s(), w.avg_latency_us()))
            .collect();
        if stats::is_stable(&points, config.stability_percent) {
            return Ok((windows, true));
        }
    }
    Ok((windows, false))
}

/// Merges the last three windows of a level into its result.
fn summarize(
    level: Level,
    config: &PerfConfig,
    (windows, stable): (Vec<Measured>, bool),
) -> LevelResult {
    let trials = windows.len();
    let last = &windows[trials.saturating_sub(3)..];
    let duration: Duration = last.iter().map(|w| w.duration).sum();
    let records: Vec<Record> = last
        .iter()
        .flat_map(|w| w.records.iter().copied())
        .collect();
    let server_reported = last.iter().all(|w| w.server.is_some());
    let mut server = ServerCounters::default();
    for w in last.iter().filter_map(|w| w.server.as_ref()) {
        server = server.plus(w);
    }
    let cpu: Duration = last.iter().map(|w| w.cpu).sum();
    let sent: u64 = last.iter().map(|w| w.sent).sum();
    let late_ns: u64 = last.iter().map(|w| w.late_ns).sum();

    let n = records.len() as f64;
    let mean = |f: fn(&Record) -> u64| {
        if records.is_empty() {
            0.0
        } else {
            records.iter().map(|r| f(r) as f64).sum::<f64>() / n / 1000.0
        }
    };
    let mut hist = crate::latency::histogram();
    for r in &records {
        hist.saturating_record(crate::latency::micros(Duration::from_nanos(r.latency_ns())));
    }
    let q = |x: f64| {
        if hist.is_empty() {
            0.0
        } else {
            hist.value_at_quantile(x) as f64
        }
    };
    let latency = Latency {
        p50_us: q(0.50),
        p90_us: q(0.90),
        p95_us: q(0.95),
        p99_us: q(0.99),
        avg_us: mean(Record::latency_ns),
        max_us: if hist.is_empty() {
            0.0
        } else {
            hist.max() as f64
        },
    };
    let server = ServerBreakdown::from_delta(&server);
    let response_wait_us = mean(|r| r.wait_ns);
    let client = ClientBreakdown {
        send_us: mean(|r| r.encode_ns),
        recv_us: mean(|r| r.decode_ns),
        response_wait_us,
        network_us: response_wait_us - server.request_us,
    };
    let features: u64 = records.iter().map(|r| u64::from(r.features)).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    // Stored as a fraction of all CPUs: the tokio runtime uses every core.
    let client_cpu_s = cpu.as_secs_f64();
    let client_cpu_fraction = rate(client_cpu_s, duration) / cores;
    let sent_per_s = rate(sent as f64, duration);
    let send_delay_us = if sent == 0 {
        0.0
    } else {
        late_ns as f64 / sent as f64 / 1000.0
    };
    let requests_per_s = rate(n, duration);
    let budget = config.budget.map(|b| {
        b.judge(
            records.iter().map(|r| r.latency_ns() as f64 / 1000.0),
            duration.as_secs_f64(),
            q(b.percentile / 100.0),
        )
    });

    let mut result = LevelResult {
        level,
        stable,
        trials,
        window_s: duration.as_secs_f64(),
        requests: records.len() as u64,
        features,
        requests_per_s,
        features_per_s: rate(features as f64, duration),
        latency,
        client,
        server,
        server_reported,
        client_cpu_s,
        client_cpu_fraction,
        sent_per_s,
        send_delay_us,
        budget,
        warnings: Vec::new(),
    };
    result.warnings = warnings(&result, config.stability_percent, cores as usize);
    result
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

/// Above this share of all CPUs, bertqa itself is reported as a possible limit.
pub(crate) const CPU_LIMIT_FRACTION: f64 = 0.8;
/// Below this share of the requested rate, a rate counts as not kept.
pub(crate) const RATE_KEPT_FRACTION: f64 = 0.95;

#[cfg(test)]
mod tests;
