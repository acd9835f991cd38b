//! What a run measured: the inference report (requests, latency, busy time, padding,
//! shared memory), the time per stage, and the union of request intervals that gives
//! the time with at least one request in flight.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::padding::PaddingReport;
use super::shared_memory::SharedMemoryReport;

#[derive(Debug, Clone)]
pub struct InferReport {
    pub requests: u64,
    pub features: u64,
    /// Per-request latency, microseconds.
    pub(crate) latency_us: Histogram<u64>,
    /// From the first send to the last response.
    pub wall: Duration,
    /// Time with at least one request in flight.
    pub busy: Duration,
    /// Time the sender waited for features to be built.
    pub starved: Duration,
    /// Time spent on the warm-up requests (not part of any other figure).
    pub warmup: Duration,
    /// NaN or infinite logits the model returned (decoded as −∞).
    pub non_finite: crate::decode::non_finite::NonFinite,
    /// Time from the last response to the last question decoded: decoding that could
    /// not keep up with the server (set by [`Run`](super::Run); zero from [`infer_all`](super::infer_all) alone).
    pub decode_lag: Duration,
    /// How requests were padded.
    pub padding: PaddingReport,
    /// How tensors travelled: shared memory or the messages.
    pub shared_memory: SharedMemoryReport,
}

impl InferReport {
    /// How many latencies were recorded (one a successful request).
    pub fn latency_count(&self) -> u64 {
        self.latency_us.len()
    }

    /// The latency at `percentile` (0 to 100) of the recorded ones, microseconds (0 when
    /// none was recorded).
    pub fn latency_percentile_us(&self, percentile: f64) -> u64 {
        self.latency_us.value_at_quantile(percentile / 100.0)
    }

    /// A report of no requests.
    pub fn empty() -> Self {
        InferReport {
            requests: 0,
            features: 0,
            latency_us: crate::latency::histogram(),
            wall: Duration::ZERO,
            busy: Duration::ZERO,
            starved: Duration::ZERO,
            warmup: Duration::ZERO,
            non_finite: Default::default(),
            decode_lag: Duration::ZERO,
            padding: PaddingReport::default(),
            shared_memory: SharedMemoryReport::default(),
        }
    }

    /// Time bertqa's own work held the run back: the sender waiting for features to be
    /// built, plus decoding left over after the last response.
    pub fn client_limited(&self) -> Duration {
        self.starved + self.decode_lag
    }

    /// A warning when bertqa's own CPU, not the server, limited this run: the client-
    /// limited time is over a quarter of a wall time of at least half a second (shorter
    /// runs are dominated by start-up). Against the `null` model this is expected: it
    /// measures the client.
    pub fn client_bound_warning(&self) -> Option<String> {
        let wall = self.wall.as_secs_f64();
        let limited = self.client_limited().as_secs_f64();
        if wall < 0.5 || limited <= 0.25 * wall {
            return None;
        }
        Some(format!(
            "bertqa's own CPU was the limit for {:.0}% of the run ({limited:.2} s of \
             {wall:.2} s: the sender waited {:.2} s for features, decoding finished {:.2} s \
             after the last response); the server could go faster than these figures",
            100.0 * limited / wall,
            self.starved.as_secs_f64(),
            self.decode_lag.as_secs_f64()
        ))
    }

    /// A latency percentile in milliseconds (0 when nothing was measured).
    pub fn latency_ms(&self, quantile: f64) -> f64 {
        if self.latency_us.is_empty() {
            return 0.0;
        }
        self.latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// Seconds spent in each stage (stages overlap, so they do not add up to the wall time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Building features (tokenizing, windows), summed on the producer thread.
    pub features_s: f64,
    /// With at least one request in flight.
    pub inference_s: f64,
    /// Decoding spans, summed on the decoder thread.
    pub decode_s: f64,
}

/// The intervals during which requests were in flight, kept compact: merged, the
/// intervals of a busy pipeline collapse to a handful, so memory stays flat however
/// long the run.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    intervals: Vec<(Instant, Instant)>,
}

impl InFlight {
    /// One request, from its send to its response.
    pub(crate) fn push(&mut self, interval: (Instant, Instant)) {
        self.intervals.push(interval);
        if self.intervals.len() >= COMPACT_INTERVALS {
            compact(&mut self.intervals);
        }
    }

    /// Time with at least one request in flight.
    pub(crate) fn busy(mut self) -> Duration {
        union_length(&mut self.intervals)
    }
}

/// Request intervals kept before they are merged ([`compact`]).
const COMPACT_INTERVALS: usize = 4096;

/// Replaces `intervals` by their union as disjoint intervals (same [`union_length`]).
pub(super) fn compact(intervals: &mut Vec<(Instant, Instant)>) {
    intervals.sort_by_key(|i| i.0);
    let mut merged: Vec<(Instant, Instant)> = Vec::with_capacity(16);
    for &(s, e) in intervals.iter() {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    *intervals = merged;
}

/// Total length of the union of time intervals (time with ≥ 1 request in flight).
pub(super) fn union_length(intervals: &mut [(Instant, Instant)]) -> Duration {
    intervals.sort_by_key(|i| i.0);
    let mut total = Duration::ZERO;
    let mut current: Option<(Instant, Instant)> = None;
    for &(s, e) in intervals.iter() {
        current = match current {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}
