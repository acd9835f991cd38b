//! Reads every endpoint's page on a steady interval through a run, and on demand at
//! the points that bound a span (so that counters are read where nothing is in
//! flight).
//!
//! Each read of an endpoint ends at the interval (at most [`MOST_WAIT`]): a slow page
//! is a missing reading, never a delayed run.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::{EndpointMetrics, ModelKey, Reading, SpanMetrics};
use crate::backend::page::PageClient;

/// The longest a read may take.
pub const MOST_WAIT: Duration = Duration::from_secs(5);

/// One read of every endpoint (in the endpoints' order).
#[derive(Debug, Clone)]
pub struct Sampled {
    pub at: Instant,
    pub readings: Vec<Result<Reading, String>>,
}

/// The endpoints, the periodic readings, and the task that takes them.
#[derive(Debug)]
pub struct Scraper {
    endpoints: Arc<Vec<PageClient>>,
    model: ModelKey,
    periodic: Arc<Mutex<Vec<Sampled>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Scraper {
    /// Starts reading every `interval` (a first read at once). Must be called inside a
    /// tokio runtime.
    pub fn start(endpoints: Vec<PageClient>, model: ModelKey, interval: Duration) -> Scraper {
        let endpoints = Arc::new(endpoints);
        let periodic = Arc::new(Mutex::new(Vec::new()));
        let task = {
            let (endpoints, periodic, model) = (endpoints.clone(), periodic.clone(), model.clone());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let sampled = read_all(&endpoints, &model).await;
                    periodic.lock().expect("metrics lock").push(sampled);
                }
            })
        };
        Scraper {
            endpoints,
            model,
            periodic,
            task: Mutex::new(Some(task)),
        }
    }

    /// The endpoints' URLs.
    pub fn urls(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.url.clone()).collect()
    }

    /// Reads every endpoint now (not kept with the periodic readings).
    pub async fn now(&self) -> Sampled {
        read_all(&self.endpoints, &self.model).await
    }

    /// The span from `open` to `close`: gauges from the periodic readings taken between
    /// `from` and `to` (the measured part of it), or, when none was, from those between
    /// `open` and `close`, or from `open` and `close` themselves; counters from `open`
    /// to `close`.
    pub fn span(&self, open: &Sampled, close: &Sampled, from: Instant, to: Instant) -> SpanMetrics {
        let periodic = self.periodic.lock().expect("metrics lock");
        let within = |a: Instant, b: Instant| -> Vec<&Sampled> {
            periodic.iter().filter(|s| s.at >= a && s.at <= b).collect()
        };
        let measured = within(from, to);
        let whole = within(open.at, close.at);
        let endpoints = self
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, endpoint)| {
                let ok = |samples: &[&Sampled]| -> Vec<Reading> {
                    samples
                        .iter()
                        .filter_map(|s| s.readings[i].as_ref().ok().cloned())
                        .collect()
                };
                let mut gauges = ok(&measured);
                if gauges.is_empty() {
                    gauges = ok(&whole);
                }
                if gauges.is_empty() {
                    gauges = ok(&[open, close]);
                }
                let error = std::iter::once(open)
                    .chain(whole.iter().copied())
                    .chain(std::iter::once(close))
                    .find_map(|s| s.readings[i].as_ref().err().cloned());
                let gauges: Vec<&Reading> = gauges.iter().collect();
                EndpointMetrics::over(
                    &endpoint.url,
                    &gauges,
                    open.readings[i].as_ref().ok(),
                    close.readings[i].as_ref().ok(),
                    error,
                )
            })
            .collect();
        SpanMetrics::total(endpoints)
    }

    /// Stops the periodic reads.
    pub fn stop(&self) {
        if let Some(task) = self.task.lock().expect("metrics lock").take() {
            task.abort();
        }
    }
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads every endpoint at once.
async fn read_all(endpoints: &Arc<Vec<PageClient>>, model: &ModelKey) -> Sampled {
    let at = Instant::now();
    let mut reads = JoinSet::new();
    for (i, endpoint) in endpoints.iter().enumerate() {
        let (endpoint, model) = (endpoint.clone(), model.clone());
        reads.spawn(async move { (i, read_one(&endpoint, &model).await) });
    }
    let mut readings: Vec<Result<Reading, String>> =
        vec![Err("not read".to_string()); endpoints.len()];
    while let Some(done) = reads.join_next().await {
        if let Ok((i, reading)) = done {
            readings[i] = reading;
        }
    }
    Sampled { at, readings }
}

async fn read_one(endpoint: &PageClient, model: &ModelKey) -> Result<Reading, String> {
    // The endpoint's client ends each read at its timeouts (`cli/metrics.rs` sets
    // them to the interval, at most `MOST_WAIT`).
    match endpoint.get().await {
        Ok(page) => Reading::parse(&page, model),
        Err(e) => Err(e.to_string()),
    }
}
