//! A pool of Triton endpoints that share a run's requests and outlive a lost one, with the retry
//! policy of `retry`.
//!
//! Contract:
//! - Each request goes to the healthy endpoint with the fewest outstanding requests
//!   (ties: the one after the last chosen), and within it to its connections in turn
//!   (`connections` HTTP/2 connections per endpoint; one connection caps throughput).
//! - A failed attempt is classified by the [`RetryPolicy`]. An endpoint that looks unwell
//!   (unreachable, UNAVAILABLE) is taken out; a background health check
//!   (`ServerReady` and `ModelReady`, every `HEALTH_INTERVAL`) lets it rejoin. The
//!   attempt is retried at once on another healthy endpoint, or after a jittered backoff
//!   when there is none (so a single server that restarts is waited for; tonic's channel
//!   reconnects on the next call).
//! - With every endpoint out, requests still go to the least-loaded one after a backoff:
//!   the retry budget, not the health check, decides when to give up.
//! - Latency recorded per endpoint is that of the successful attempt (send to response),
//!   never the backoff.
//! - A request placed in a shared memory region that the server lost
//!   (`shm::lost_region`) is not retried: the error goes back to the caller, which
//!   sends it again with its tensors in the message. A retry asks for its outputs in the
//!   message (the failed attempt may still write them into its slot).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::{ClientConfig, GrpcCall, TritonClient};
use super::proto::ModelInferResponse;
use super::request::InferRequest;
use super::retry::{RetryPolicy, RetryStats};
use super::shm;
use crate::error::{Error, Result, Unreachable};

/// How often an endpoint that was taken out is checked.
pub(crate) const HEALTH_INTERVAL: Duration = Duration::from_millis(250);

/// Something that can run one inference request: a plain [`TritonClient`] (no retries),
/// or a [`Pool`], or an in-process fake in tests. Returns the response and when the
/// successful attempt was sent.
pub trait Infer: Clone + Send + Sync + 'static {
    /// Sends `request` (encoded on the way out, see [`InferRequest`]).
    fn infer_timed(
        &self,
        request: InferRequest,
    ) -> impl Future<Output = Result<(ModelInferResponse, Instant)>> + Send;

    /// The server every request goes to, when there is exactly one (a shared memory
    /// region is registered with it); `None` for several endpoints and for fakes.
    fn single_server(&self) -> Option<&TritonClient> {
        None
    }
}

impl Infer for TritonClient {
    async fn infer_timed(&self, request: InferRequest) -> Result<(ModelInferResponse, Instant)> {
        let sent = Instant::now();
        Ok((self.infer(request).await?, sent))
    }

    fn single_server(&self) -> Option<&TritonClient> {
        Some(self)
    }
}

/// Settings of a pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Endpoints, `HOST:PORT` each (at least one).
    pub urls: Vec<String>,
    /// HTTP/2 connections per endpoint (at least one).
    pub connections: usize,
    /// Timeouts; its `url` is ignored.
    pub client: ClientConfig,
    pub retry: RetryPolicy,
    /// Before connecting, wait up to this long for every endpoint to be live and ready
    /// (and the model, when named); zero: do not wait.
    pub wait_ready: Duration,
}

impl EndpointReport {
    /// How many latencies were recorded (one a successful request).
    pub fn latency_count(&self) -> u64 {
        self.latency_us.len()
    }

    /// The latency at `percentile` (0 to 100) of the recorded ones, microseconds (0 when
    /// none was recorded).
    pub fn latency_percentile_us(&self, percentile: f64) -> u64 {
        self.latency_us.value_at_quantile(percentile / 100.0)
    }

    /// What the endpoint did after `before` (an earlier reading of the same endpoint):
    /// its requests, features, errors, take-outs and latencies since then.
    pub fn since(&self, before: &EndpointReport) -> EndpointReport {
        let mut latency_us = self.latency_us.clone();
        // The earlier counts are part of today's: the subtraction cannot fail.
        let _ = latency_us.subtract(&before.latency_us);
        EndpointReport {
            requests: self.requests.saturating_sub(before.requests),
            features: self.features.saturating_sub(before.features),
            errors: super::retry::counts_since(&self.errors, &before.errors),
            taken_out: self.taken_out.saturating_sub(before.taken_out),
            latency_us,
            ..self.clone()
        }
    }
}

/// What one endpoint did, for the report.
#[derive(Debug, Clone)]
pub struct EndpointReport {
    pub url: String,
    pub connections: usize,
    /// How its requests travelled (`--transport`), and how many of its connections went
    /// unary after a stream error.
    pub transport: GrpcCall,
    pub unary_connections: usize,
    /// Successful requests and the features they carried.
    pub requests: u64,
    pub features: u64,
    /// Failed attempts by code.
    pub errors: BTreeMap<String, u64>,
    /// Times the endpoint was taken out after a failure.
    pub taken_out: u64,
    /// Whether it was in the pool at the end.
    pub healthy: bool,
    /// Latency of its successful requests, microseconds.
    pub(crate) latency_us: Histogram<u64>,
}

#[derive(Debug)]
struct Endpoint {
    url: String,
    conns: Vec<TritonClient>,
    next_conn: AtomicUsize,
    outstanding: AtomicUsize,
    healthy: AtomicBool,
    checking: AtomicBool,
    stats: Mutex<EndpointStats>,
}

#[derive(Debug)]
struct EndpointStats {
    requests: u64,
    features: u64,
    errors: BTreeMap<String, u64>,
    taken_out: u64,
    latency_us: Histogram<u64>,
}

#[derive(Debug)]
struct Inner {
    endpoints: Vec<Endpoint>,
    retry: RetryPolicy,
    /// Model (and version) the health check asks about; empty: the server only.
    model: Mutex<(String, String)>,
    last_pick: AtomicUsize,
    stats: Mutex<RetryStats>,
}

/// A set of endpoints with least-outstanding balancing, health checks and retries.
/// Cheap to clone (shared state).
#[derive(Debug, Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

/// Decrements an endpoint's outstanding count when the attempt ends, even if the
/// request's future is dropped.
struct Outstanding<'a>(&'a AtomicUsize);

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Pool {
    /// Connects `connections` channels to every endpoint (after `wait_ready`, when set).
    /// `model`/`version` name what the readiness wait and health checks ask about.
    pub async fn connect(config: &PoolConfig, model: &str, version: &str) -> Result<Pool> {
        if config.urls.is_empty() {
            return Err(Error::Config("no server URL given".into()));
        }
        let mut endpoints = Vec::with_capacity(config.urls.len());
        // Endpoints that could not be reached at start (with other endpoints to go on
        // with): connected lazily, taken out, and let in by their health check.
        let mut down: Vec<(usize, Error)> = Vec::new();
        for url in &config.urls {
            let client_config = ClientConfig {
                url: url.clone(),
                ..config.client.clone()
            };
            if !config.wait_ready.is_zero() {
                wait_ready(&client_config, model, version, config.wait_ready).await?;
            }
            let mut conns = Vec::with_capacity(config.connections.max(1));
            for _ in 0..config.connections.max(1) {
                let conn = match TritonClient::connect(&client_config).await {
                    Err(e @ Error::Unavailable { .. }) if config.urls.len() > 1 => {
                        if down.last().map(|d| d.0) != Some(endpoints.len()) {
                            down.push((endpoints.len(), e));
                        }
                        TritonClient::connect_lazy(&client_config).await?
                    }
                    answer => answer?,
                };
                // Asked now so that later messages name the server (best effort: a
                // server that cannot say is called Triton); not of one that is down.
                if down.last().map(|d| d.0) != Some(endpoints.len()) {
                    let _ = conn.server_info().await;
                }
                conns.push(conn);
            }
            endpoints.push(Endpoint {
                url: url.clone(),
                conns,
                next_conn: AtomicUsize::new(0),
                outstanding: AtomicUsize::new(0),
                healthy: AtomicBool::new(true),
                checking: AtomicBool::new(false),
                stats: Mutex::new(EndpointStats {
                    requests: 0,
                    features: 0,
                    errors: BTreeMap::new(),
                    taken_out: 0,
                    latency_us: crate::latency::histogram(),
                }),
            });
        }
        if down.len() == endpoints.len() {
            return Err(down.swap_remove(0).1);
        }
        let pool = Pool {
            inner: Arc::new(Inner {
                endpoints,
                retry: config.retry.clone(),
                model: Mutex::new((model.to_string(), version.to_string())),
                last_pick: AtomicUsize::new(usize::MAX),
                stats: Mutex::new(RetryStats::default()),
            }),
        };
        for (i, _) in down {
            pool.take_out(i);
        }
        Ok(pool)
    }

    /// One connection to the server of `client.url`, without retries: a request's error
    /// is the caller's (`perf` counts it, `tune`'s repository calls report it).
    pub async fn single(client: &ClientConfig) -> Result<Pool> {
        let config = PoolConfig {
            urls: vec![client.url.clone()],
            connections: 1,
            client: client.clone(),
            retry: RetryPolicy {
                retries: 0,
                ..RetryPolicy::default()
            },
            wait_ready: Duration::ZERO,
        };
        Pool::connect(&config, "", "").await
    }

    /// A client of the first endpoint, for metadata calls (binding, statistics).
    pub fn first_client(&self) -> &TritonClient {
        &self.inner.endpoints[0].conns[0]
    }

    /// Looks at `model` ([`super::look`]) on the first endpoint that can be reached, in
    /// the order given: a run goes on without an endpoint that is down, so its first
    /// look does too. Any other failure is the answer; with none reachable, the first
    /// endpoint's failure.
    pub async fn look(
        &self,
        model: &str,
        version: &str,
        tokens: &super::BindingOverrides,
        text: &super::TextOverrides,
    ) -> Result<super::Model> {
        let mut first = None;
        for endpoint in &self.inner.endpoints {
            match super::look(&endpoint.conns[0], model, version, tokens, text).await {
                Err(e @ Error::Unavailable { .. }) => {
                    first.get_or_insert(e);
                }
                answer => return answer,
            }
        }
        Err(first.expect("a pool has at least one endpoint"))
    }

    /// The endpoints' URLs, in the order given.
    pub fn urls(&self) -> Vec<String> {
        self.inner.endpoints.iter().map(|e| e.url.clone()).collect()
    }

    /// Retries and failures so far.
    pub fn retry_stats(&self) -> RetryStats {
        self.inner.stats.lock().expect("stats lock").clone()
    }

    /// Each endpoint's figures so far.
    pub fn endpoint_reports(&self) -> Vec<EndpointReport> {
        self.inner
            .endpoints
            .iter()
            .map(|e| {
                let s = e.stats.lock().expect("stats lock");
                EndpointReport {
                    url: e.url.clone(),
                    connections: e.conns.len(),
                    transport: e.conns[0].transport(),
                    unary_connections: e.conns.iter().filter(|c| c.went_unary()).count(),
                    requests: s.requests,
                    features: s.features,
                    errors: s.errors.clone(),
                    taken_out: s.taken_out,
                    healthy: e.healthy.load(Ordering::Relaxed),
                    latency_us: s.latency_us.clone(),
                }
            })
            .collect()
    }

    /// The healthy endpoint with the fewest outstanding requests; with none healthy, the
    /// least loaded of all. Ties go to the first after the last pick (round robin).
    fn pick(&self, avoid: Option<usize>) -> usize {
        let eps = &self.inner.endpoints;
        let n = eps.len();
        let start = self.inner.last_pick.load(Ordering::Relaxed).wrapping_add(1) % n;
        let choose = |healthy_only: bool, avoid: Option<usize>| {
            (0..n)
                .map(|k| (start + k) % n)
                .filter(|&i| !healthy_only || eps[i].healthy.load(Ordering::Relaxed))
                .filter(|&i| Some(i) != avoid)
                .min_by_key(|&i| eps[i].outstanding.load(Ordering::Relaxed))
        };
        let i = choose(true, avoid)
            .or_else(|| choose(true, None))
            .or_else(|| choose(false, None))
            .expect("at least one endpoint");
        self.inner.last_pick.store(i, Ordering::Relaxed);
        i
    }

    fn any_other_healthy(&self, i: usize) -> bool {
        self.inner
            .endpoints
            .iter()
            .enumerate()
            .any(|(j, e)| j != i && e.healthy.load(Ordering::Relaxed))
    }

    /// Takes endpoint `i` out and starts its health check (once).
    fn take_out(&self, i: usize) {
        let e = &self.inner.endpoints[i];
        if e.healthy.swap(false, Ordering::Relaxed) {
            e.stats.lock().expect("stats lock").taken_out += 1;
        }
        if e.checking.swap(true, Ordering::Relaxed) {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(HEALTH_INTERVAL).await;
                let Some(inner) = weak.upgrade() else { return };
                let e = &inner.endpoints[i];
                let (model, version) = inner.model.lock().expect("model lock").clone();
                if healthy(&e.conns[0], &model, &version).await {
                    e.healthy.store(true, Ordering::Relaxed);
                    e.checking.store(false, Ordering::Relaxed);
                    return;
                }
            }
        });
    }

    /// Sends `request` with retries; see the module header.
    pub async fn infer(&self, request: InferRequest) -> Result<(ModelInferResponse, Instant)> {
        let rows = request.rows();
        let lost = |e: &Error| shm::lost_region(&request, e);
        self.with_retries(rows, &lost, |conn, attempt| {
            // The failed attempt may still run and write its outputs into shared memory
            // later: a retry gets its outputs in the message (and the caller retires the
            // slot, see `shm::Slot`).
            let request = if attempt == 0 {
                request.clone()
            } else {
                request.clone().without_shm_outputs()
            };
            async move { conn.infer(request).await }
        })
        .await
    }

    /// Runs `send` (given the connection and the attempt's number, from 0) until it
    /// succeeds or the retry policy gives up; `rows` counts toward the endpoint's
    /// features. An error `give_back` accepts goes back to the caller at once.
    async fn with_retries<'c, F, Fut>(
        &'c self,
        rows: usize,
        give_back: &(dyn Fn(&Error) -> bool + Sync),
        mut send: F,
    ) -> Result<(ModelInferResponse, Instant)>
    where
        F: FnMut(&'c TritonClient, u32) -> Fut,
        Fut: Future<Output = Result<ModelInferResponse>>,
    {
        let policy = &self.inner.retry;
        let mut codes: BTreeMap<&'static str, u32> = BTreeMap::new();
        let mut attempt: u32 = 0;
        let mut last_endpoint = None;
        loop {
            let i = self.pick(last_endpoint);
            let e = &self.inner.endpoints[i];
            let conn = &e.conns[e.next_conn.fetch_add(1, Ordering::Relaxed) % e.conns.len()];
            e.outstanding.fetch_add(1, Ordering::Relaxed);
            let guard = Outstanding(&e.outstanding);
            let sent = Instant::now();
            let result = send(conn, attempt).await;
            drop(guard);
            let error = match result {
                Ok(response) => {
                    let us = crate::latency::micros(sent.elapsed());
                    let mut s = e.stats.lock().expect("stats lock");
                    s.requests += 1;
                    s.features += rows as u64;
                    s.latency_us.saturating_record(us);
                    return Ok((response, sent));
                }
                Err(error) => error,
            };
            // Not a failure of the request: the caller sends it again with its tensors
            // in the message (a restarted server forgot the shared memory region).
            if give_back(&error) {
                return Err(error);
            }
            let verdict = policy.classify(&error);
            *codes.entry(verdict.code).or_default() += 1;
            *e.stats
                .lock()
                .expect("stats lock")
                .errors
                .entry(verdict.code.to_string())
                .or_default() += 1;
            if verdict.endpoint_suspect {
                self.take_out(i);
            }
            if !verdict.retryable || attempt >= policy.retries {
                *self
                    .inner
                    .stats
                    .lock()
                    .expect("stats lock")
                    .failures
                    .entry(verdict.code.to_string())
                    .or_default() += 1;
                if !verdict.retryable {
                    return Err(error);
                }
                return Err(Error::RetriesExhausted {
                    attempts: attempt + 1,
                    retries: policy.retries,
                    codes,
                    last: Box::new(error),
                });
            }
            *self
                .inner
                .stats
                .lock()
                .expect("stats lock")
                .retries
                .entry(verdict.code.to_string())
                .or_default() += 1;
            attempt += 1;
            last_endpoint = Some(i);
            // Another endpoint can take it now; the same one needs time.
            if !(verdict.endpoint_suspect && self.any_other_healthy(i)) {
                tokio::time::sleep(policy.backoff(attempt)).await;
            }
        }
    }
}

impl Infer for Pool {
    fn infer_timed(
        &self,
        request: InferRequest,
    ) -> impl Future<Output = Result<(ModelInferResponse, Instant)>> + Send {
        self.infer(request)
    }

    fn single_server(&self) -> Option<&TritonClient> {
        (self.inner.endpoints.len() == 1).then(|| self.first_client())
    }
}

/// Live, ready, and (when named) the model ready; each call bounded by two seconds.
async fn healthy(client: &TritonClient, model: &str, version: &str) -> bool {
    let check = async {
        client.server_ready().await.unwrap_or(false)
            && (model.is_empty() || client.model_ready(model, version).await.unwrap_or(false))
    };
    tokio::time::timeout(Duration::from_secs(2), check)
        .await
        .unwrap_or(false)
}

/// Polls a server until it accepts connections and it (and `model`, when named) is
/// ready, for at most `limit`. The error says what was last seen.
pub(crate) async fn wait_ready(
    config: &ClientConfig,
    model: &str,
    version: &str,
    limit: Duration,
) -> Result<()> {
    let deadline = Instant::now() + limit;
    let probe = ClientConfig {
        connect_timeout: config.connect_timeout.min(Duration::from_secs(2)),
        ..config.clone()
    };
    loop {
        let last = match TritonClient::connect(&probe).await {
            Ok(client) => {
                if healthy(&client, model, version).await {
                    return Ok(());
                }
                if model.is_empty() {
                    "the server is not ready".to_string()
                } else {
                    format!("the server or model {model:?} is not ready")
                }
            }
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(Error::unavailable(
                &config.url,
                Unreachable::NotReady,
                format!(
                    "not ready within `wait_ready` {} s: {last}",
                    limit.as_secs_f64()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
