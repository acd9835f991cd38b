//! One level of a sweep: the load that runs it (closed or open loop), the requests it
//! sends and records, the windows it is measured in, and their merge into a
//! [`LevelResult`] (the contract is the module's above).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use super::decide::WindowFigures;
use super::requests::{Planned, Requests};
use super::requests_log::{self, LevelKey, RequestLog};
use super::stats::{self, Arrivals};
use super::text::{self, Steps};
use super::Servers;
use super::{
    warnings, ClientBreakdown, Distribution, Latency, Level, LevelResult, Load, PerfConfig,
    PerfProgress, ServerBreakdown, Window,
};
use crate::backend::{InferRequest, Pool};
use crate::error::{Error, Result};
use crate::metrics::ServerCounters;
use crate::pipeline::SharedRegion;

/// One answered request.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
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

/// What a sweep sends: its requests, through the sweep's shared memory region (if any).
#[derive(Clone)]
pub(super) struct Source {
    pub(super) shm: SharedRegion,
    pub(super) requests: Arc<Requests>,
}

/// State shared by the load generators of one level and the measuring loop.
pub(super) struct Shared {
    servers: Servers,
    /// The level being measured (`None`: warm-up).
    level: Option<Level>,
    /// The window requests now complete in (see [`requests_log`]); changed under the
    /// `records` lock, so a request's line and the window it is counted in agree.
    window: AtomicU64,
    requests_log: Option<Arc<RequestLog>>,
    source: Source,
    next_batch: AtomicUsize,
    records: Mutex<Vec<Record>>,
    completed: AtomicU64,
    /// The measuring loop is woken when `completed` reaches this.
    wake_at: AtomicU64,
    sent: AtomicU64,
    /// Total delay of sends behind schedule (request-rate mode), ns.
    late_ns: AtomicU64,
    pub(super) stop: AtomicBool,
    error: Mutex<Option<Error>>,
    notify: Notify,
}

impl Shared {
    pub(super) fn fail(&self, e: Error) {
        let mut slot = self.error.lock().expect("error lock");
        if slot.is_none() {
            *slot = Some(e);
        }
        self.stop.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }

    pub(super) fn take_error(&self) -> Option<Error> {
        self.error.lock().expect("error lock").take()
    }

    /// Prepares, sends and decodes one batch as the pipeline's dispatch stage does
    /// ([`SharedRegion`]), recording the three times. The tensors are serialized by the
    /// transport as the request is sent, so that time counts in the response wait, not
    /// in the preparation. A text model's pairs go the same way, as BYTES tensors.
    pub(super) async fn one_request(&self) -> Result<()> {
        let n = self.next_batch.fetch_add(1, Ordering::Relaxed);
        let sent = self.source.requests.get(n);
        let (server, url) = self.servers.pick(n);
        let wall = self.requests_log.is_some().then(std::time::SystemTime::now);
        let t0 = Instant::now();
        let mut t = [t0; 3];
        let request = sent.request.clone();
        let rows = request.rows();
        let answered = self.send_and_read(server, request, &mut t).await;
        let t3 = Instant::now();
        let record = Record {
            encode_ns: (t[1] - t0).as_nanos() as u64,
            wait_ns: (t[2] - t[1]).as_nanos() as u64,
            decode_ns: (t3 - t[2]).as_nanos() as u64,
            features: rows as u32,
        };
        let mut records = self.records.lock().expect("records lock");
        if let (Some(log), Some(wall)) = (&self.requests_log, wall) {
            let error = answered.as_ref().err();
            self.log(log, wall, url, sent, &record, error);
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

    /// Sends `request` as the run's dispatch stage does and reads its answer (a token
    /// model's logits, or a text model's answer by its contract, [`text::read_response`]);
    /// `t` gets the instants the request was prepared (1) and answered (2), as far as it
    /// got. Writing the inputs into shared memory is preparation, as building them is; a
    /// message is built by the transport as it is sent, so that counts in the wait.
    async fn send_and_read(
        &self,
        server: &Pool,
        request: InferRequest,
        t: &mut [Instant; 3],
    ) -> Result<()> {
        let rows = request.rows();
        let placed = self.source.shm.place(request);
        t[1] = Instant::now();
        t[2] = t[1];
        self.sent.fetch_add(1, Ordering::Relaxed);
        let (response, _, in_shm) = placed.send(server).await?;
        t[2] = Instant::now();
        let model = self.source.requests.model();
        if model.takes_text() {
            placed.answered_text(in_shm);
            return text::read_response(model, &response, rows);
        }
        let (logits, _) = placed.read(&response, in_shm, |checked, features| {
            checked.logits(features.iter().map(|f| f.unique_id))
        })?;
        drop(std::hint::black_box(logits));
        Ok(())
    }

    /// Writes a request's line (called under the `records` lock); `endpoint`: the
    /// server it went to.
    fn log(
        &self,
        log: &RequestLog,
        wall: std::time::SystemTime,
        endpoint: &str,
        sent: &Planned,
        r: &Record,
        error: Option<&Error>,
    ) {
        let ms = |ns: u64| ns as f64 / 1e6;
        let request = &sent.request;
        let (batch_size, features) = (request.rows(), sent.ids.clone());
        // A text model's requests have no sequence length of ours: the server tokenizes.
        let seq_len = (request.seq_len() > 0).then_some(request.seq_len());
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
            batch_size,
            seq_len,
            features,
            endpoint,
            outcome: if error.is_some() { "error" } else { "ok" },
            code: error.map(|e| crate::backend::RetryPolicy::default().classify(e).code),
            retries: 0,
        });
    }
}

/// Stops a level's load when dropped.
pub(super) struct StopOnDrop<'a>(pub(super) &'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
    }
}

/// A point between windows: what had happened by then.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    at: Instant,
    /// `None`: the server does not report statistics.
    server: Option<ServerCounters>,
    steps: Steps,
    cpu: Duration,
    sent: u64,
    late_ns: u64,
}

/// One measured window.
#[derive(Debug, Clone)]
pub(super) struct Measured {
    pub(super) from: Instant,
    pub(super) duration: Duration,
    records: Vec<Record>,
    server: Option<ServerCounters>,
    steps: Steps,
    cpu: Duration,
    sent: u64,
    late_ns: u64,
}

impl Measured {
    fn requests_per_s(&self) -> f64 {
        rate(self.records.len() as f64, self.duration)
    }

    fn features_per_s(&self) -> f64 {
        let features: u64 = self.records.iter().map(|r| u64::from(r.features)).sum();
        rate(features as f64, self.duration)
    }

    /// Its throughput and its latency at `percentile` (nearest rank), for tune's rule.
    fn figures(&self, percentile: f64) -> WindowFigures {
        let mut latencies: Vec<u64> = self.records.iter().map(Record::latency_ns).collect();
        latencies.sort_unstable();
        let latency_us = match latencies.len() {
            0 => f64::INFINITY,
            n => {
                let rank = ((percentile / 100.0 * n as f64).ceil() as usize).clamp(1, n);
                latencies[rank - 1] as f64 / 1000.0
            }
        };
        WindowFigures {
            features_per_s: self.features_per_s(),
            latency_us,
        }
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

pub(super) fn rate(n: f64, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n / s
    } else {
        0.0
    }
}

pub(super) fn new_shared(
    servers: &Servers,
    source: &Source,
    level: Option<Level>,
    config: &PerfConfig,
) -> Arc<Shared> {
    Arc::new(Shared {
        servers: servers.clone(),
        level,
        window: AtomicU64::new(0),
        requests_log: config.requests_log.clone(),
        source: source.clone(),
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
pub(super) fn start_load(
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

/// The model's statistics now (`None`: the server does not report them).
pub(super) async fn statistics(shared: &Shared) -> Result<Option<ServerCounters>> {
    let (model, version) = shared.source.requests.statistics_of();
    shared.servers.statistics(model, version).await
}

/// The statistics of an ensemble's steps now, latest versions (empty: no steps; `None`:
/// a step not reported).
async fn step_statistics(shared: &Shared) -> Result<Steps> {
    let steps_of = shared.source.requests.steps();
    let mut steps = Vec::with_capacity(steps_of.len());
    for step in steps_of {
        match shared.servers.statistics(step, "").await? {
            Some(s) => steps.push((step.clone(), s)),
            None => return Ok(None),
        }
    }
    Ok(Some(steps))
}

pub(super) async fn mark(shared: &Shared) -> Result<Mark> {
    let at = Instant::now();
    let cpu = stats::process_cpu();
    let sent = shared.sent.load(Ordering::SeqCst);
    let late_ns = shared.late_ns.load(Ordering::SeqCst);
    let server = statistics(shared).await?;
    let steps = step_statistics(shared).await?;
    Ok(Mark {
        at,
        server,
        steps,
        cpu,
        sent,
        late_ns,
    })
}

/// Measures windows of one level until stable or out of trials.
pub(super) async fn measure(
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
            from: before.at,
            duration: after.at - before.at,
            records,
            server: after.server.zip(before.server).map(|(a, b)| a.since(&b)),
            steps: text::step_by_step(&after.steps, &before.steps, ServerCounters::since),
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
        let done = match (config.until, &config.budget) {
            (super::Until::Decided { beat, precision }, Some(budget)) => {
                let figures: Vec<WindowFigures> = windows
                    .iter()
                    .map(|w| w.figures(budget.percentile))
                    .collect();
                super::decide::decided(&figures, budget, beat, precision)
            }
            _ => stats::is_stable(&points, config.stability_percent),
        };
        if done {
            return Ok((windows, true));
        }
    }
    Ok((windows, false))
}

/// Merges the last three windows of a level into its result.
pub(super) fn summarize(
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
    let steps = text::step_results(last.iter().map(|w| &w.steps));
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

    let window_features_per_s = windows.iter().map(Measured::features_per_s).collect();
    let mut result = LevelResult {
        level,
        stable,
        trials,
        window_features_per_s,
        window_s: duration.as_secs_f64(),
        requests: records.len() as u64,
        features,
        requests_per_s,
        features_per_s: rate(features as f64, duration),
        latency,
        client,
        server,
        server_reported,
        steps,
        client_cpu_s,
        client_cpu_fraction,
        sent_per_s,
        send_delay_us,
        budget,
        metrics: None,
        warnings: Vec::new(),
    };
    result.warnings = warnings(&result, config.stability_percent, cores as usize);
    result
}
