//! The numbers of a load sweep: sweep ranges, the seeded arrival process, the server's
//! counters over a window ([`ServerCounters`]) averaged per request, the stability
//! rule, and the process's own CPU time.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::metrics::ServerCounters;

/// `start:end:step` of a sweep's concurrency or request-rate range (perf_analyzer's
/// syntax: `start`, `start:end` with step 1, or `start:end:step`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The first value.
    pub start: f64,
    /// The last value, inclusive (`start` when only it was given).
    pub end: f64,
    /// The gap between successive values (1 when not given).
    pub step: f64,
}

impl Range {
    /// Parses a range; `integer` ranges (concurrency) take whole numbers ≥ 1. Errors
    /// begin with `name`, the setting as the caller's user gives it (the command: its
    /// flag).
    pub fn parse(name: &str, text: &str, integer: bool) -> Result<Range> {
        let bad = |why: String| Error::Config(format!("{name} {text}: {why}"));
        let parts: Vec<&str> = text.split(':').collect();
        if parts.is_empty() || parts.len() > 3 || parts.iter().any(|p| p.trim().is_empty()) {
            return Err(bad("expected START, START:END or START:END:STEP".into()));
        }
        let mut v = [0.0f64; 3];
        for (i, p) in parts.iter().enumerate() {
            let x: f64 = p
                .trim()
                .parse()
                .map_err(|_| bad(format!("{p:?} is not a number")))?;
            if !x.is_finite() || x <= 0.0 {
                return Err(bad(format!("{p} must be above 0")));
            }
            if integer && x.fract() != 0.0 {
                return Err(bad(format!("{p} must be a whole number")));
            }
            v[i] = x;
        }
        let start = v[0];
        let end = if parts.len() >= 2 { v[1] } else { start };
        let step = if parts.len() == 3 { v[2] } else { 1.0 };
        if end < start {
            return Err(bad(format!("end {end} is below start {start}")));
        }
        let r = Range { start, end, step };
        if r.values().len() > MAX_LEVELS {
            return Err(bad(format!(
                "{} levels; at most {MAX_LEVELS} per sweep",
                r.values().len()
            )));
        }
        Ok(r)
    }

    /// The levels: start, start + step, … up to end (inclusive, with float slack).
    pub fn values(&self) -> Vec<f64> {
        let mut out = Vec::new();
        let mut i = 0u32;
        loop {
            let x = self.start + f64::from(i) * self.step;
            if x > self.end * (1.0 + 1e-9) || out.len() > MAX_LEVELS {
                break;
            }
            out.push(x);
            i += 1;
        }
        out
    }
}

/// Most levels a sweep may have.
pub(crate) const MAX_LEVELS: usize = 1000;

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.start, self.end, self.step)
    }
}

/// How requests are spaced in request-rate mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Evenly, `1 / rate` apart.
    Constant,
    /// Exponential gaps (a Poisson process), seeded.
    Poisson,
}

impl Distribution {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Distribution::Constant => "constant",
            Distribution::Poisson => "poisson",
        }
    }
}

/// Gaps between sends, in seconds.
#[derive(Debug, Clone)]
pub(crate) struct Arrivals {
    distribution: Distribution,
    rate_per_s: f64,
    /// Seeded: the same seed gives the same gaps.
    rng: fastrand::Rng,
}

impl Arrivals {
    pub(crate) fn new(distribution: Distribution, rate_per_s: f64, seed: u64) -> Arrivals {
        Arrivals {
            distribution,
            rate_per_s,
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The gap before the next send.
    pub(crate) fn next_gap_s(&mut self) -> f64 {
        match self.distribution {
            Distribution::Constant => 1.0 / self.rate_per_s,
            // An exponential gap with mean `1 / rate`: `1 − u` is in (0, 1], so `ln` is
            // finite.
            Distribution::Poisson => -(1.0 - self.rng.f64()).ln() / self.rate_per_s,
        }
    }
}

/// Server-side time per request over a window, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerBreakdown {
    /// Successful requests the server counted (`inference_stats.success`).
    pub requests: u64,
    /// Inferences: batch rows, a request of n features counting n.
    pub inferences: u64,
    /// Model executions: a batched execution of several requests counts once.
    pub executions: u64,
    /// Receipt to response, averaged per request (`inference_stats.success`).
    pub request_us: f64,
    /// Waiting in the scheduler's queue, averaged per request.
    pub queue_us: f64,
    /// Preparing the inputs for the model, averaged per request.
    pub compute_input_us: f64,
    /// Running the model, averaged per request (a batched execution counted once per
    /// request it serves).
    pub compute_infer_us: f64,
    /// Extracting the outputs from the model, averaged per request.
    pub compute_output_us: f64,
    /// Request time not in the queue or compute (scheduling, response assembly).
    pub other_us: f64,
    /// Execution time per model execution (`batch_stats`), a batched execution once.
    pub compute_per_execution_us: f64,
    /// Total execution time over the window (`batch_stats`).
    pub busy_us: f64,
}

impl ServerBreakdown {
    /// Averages a window's counter delta per request; the busy figures are 0 where the
    /// counters have no busy time (not from the statistics).
    pub(crate) fn from_delta(d: &ServerCounters) -> ServerBreakdown {
        let per = |ns: u64, n: u64| {
            if n == 0 {
                0.0
            } else {
                ns as f64 / n as f64 / 1000.0
            }
        };
        let n = d.requests;
        let busy_ns = d.busy_ns.unwrap_or(0);
        let request_us = per(d.request_ns, n);
        let queue_us = per(d.queue_ns, n);
        let compute_input_us = per(d.compute_input_ns, n);
        let compute_infer_us = per(d.compute_infer_ns, n);
        let compute_output_us = per(d.compute_output_ns, n);
        ServerBreakdown {
            requests: n,
            inferences: d.inferences,
            executions: d.executions,
            request_us,
            queue_us,
            compute_input_us,
            compute_infer_us,
            compute_output_us,
            other_us: request_us
                - queue_us
                - compute_input_us
                - compute_infer_us
                - compute_output_us,
            compute_per_execution_us: per(busy_ns, d.executions),
            busy_us: busy_ns as f64 / 1000.0,
        }
    }
}

/// perf_analyzer's stability rule: each of the last three windows' throughput and
/// latency lies within `percent` % of the three windows' mean.
pub(crate) fn is_stable(windows: &[(f64, f64)], percent: f64) -> bool {
    if windows.len() < 3 {
        return false;
    }
    let last = &windows[windows.len() - 3..];
    let within = |values: [f64; 3]| {
        let mean = values.iter().sum::<f64>() / 3.0;
        // A window without answers is never stable.
        if values.iter().any(|&v| v <= 0.0) {
            return false;
        }
        values
            .iter()
            .all(|&v| (v - mean).abs() <= mean * percent / 100.0)
    };
    within([last[0].0, last[1].0, last[2].0]) && within([last[0].1, last[1].1, last[2].1])
}

/// User + system CPU time of this whole process so far.
pub(crate) fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::proto::{
        InferBatchStatistics, InferStatistics, ModelStatistics, StatisticDuration,
    };

    #[test]
    fn ranges_parse_like_perf_analyzer() {
        let r = Range::parse("`concurrency_range`", "1:8:1", true).unwrap();
        assert_eq!(r.values(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let r = Range::parse("`concurrency_range`", "2:8:3", true).unwrap();
        assert_eq!(r.values(), [2.0, 5.0, 8.0]);
        let r = Range::parse("`concurrency_range`", "4", true).unwrap();
        assert_eq!(r.values(), [4.0]);
        let r = Range::parse("`concurrency_range`", "1:3", true).unwrap();
        assert_eq!(r.values(), [1.0, 2.0, 3.0]);
        let r = Range::parse("`request_rate_range`", "10:20:2.5", false).unwrap();
        assert_eq!(r.values(), [10.0, 12.5, 15.0, 17.5, 20.0]);
        let r = Range::parse("`request_rate_range`", "0.1:0.3:0.1", false).unwrap();
        assert_eq!(r.values().len(), 3);
    }

    #[test]
    fn bad_ranges_say_why() {
        let e = |t: &str, int: bool| {
            Range::parse("`concurrency_range`", t, int)
                .unwrap_err()
                .to_string()
        };
        assert!(
            e("8:1", true).contains("end 1 is below start 8"),
            "{}",
            e("8:1", true)
        );
        assert!(e("0:4", true).contains("must be above 0"));
        assert!(e("1:4:0", true).contains("must be above 0"));
        assert!(e("1.5:4", true).contains("whole number"));
        assert!(e("a:4", true).contains("\"a\" is not a number"));
        assert!(e("1:2:3:4", true).contains("START:END:STEP"));
        assert!(e("1::2", true).contains("START:END:STEP"));
        assert!(e("1:100000", true).contains("at most"));
        assert!(e("-1:4", false).contains("above 0"));
    }

    #[test]
    fn poisson_gaps_are_seeded_and_have_the_right_mean() {
        let mut a = Arrivals::new(Distribution::Poisson, 200.0, 7);
        let mut b = Arrivals::new(Distribution::Poisson, 200.0, 7);
        let xs: Vec<f64> = (0..20_000).map(|_| a.next_gap_s()).collect();
        let ys: Vec<f64> = (0..20_000).map(|_| b.next_gap_s()).collect();
        assert_eq!(xs, ys);
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.005).abs() < 0.0002, "mean gap {mean}");
        // Exponential: the standard deviation equals the mean.
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.05,
            "cv {}",
            var.sqrt() / mean
        );
        let mut c = Arrivals::new(Distribution::Poisson, 200.0, 8);
        assert_ne!(c.next_gap_s(), xs[0]);
        let mut k = Arrivals::new(Distribution::Constant, 250.0, 0);
        assert_eq!(k.next_gap_s(), 0.004);
    }

    #[test]
    fn stability_needs_three_close_windows() {
        assert!(!is_stable(&[(100.0, 5.0), (100.0, 5.0)], 10.0));
        assert!(is_stable(
            &[(50.0, 9.0), (100.0, 5.0), (104.0, 5.2), (97.0, 4.9)],
            10.0
        ));
        assert!(!is_stable(
            &[(100.0, 5.0), (130.0, 5.0), (100.0, 5.0)],
            10.0
        ));
        assert!(!is_stable(
            &[(100.0, 5.0), (100.0, 7.0), (100.0, 5.0)],
            10.0
        ));
        assert!(is_stable(&[(100.0, 5.0), (130.0, 5.0), (100.0, 5.0)], 30.0));
        assert!(!is_stable(&[(0.0, 0.0), (0.0, 0.0), (0.0, 0.0)], 10.0));
    }

    fn sd(count: u64, ns: u64) -> Option<StatisticDuration> {
        Some(StatisticDuration { count, ns })
    }

    fn stats(n: u64, scale: u64) -> ModelStatistics {
        ModelStatistics {
            name: "m".into(),
            inference_count: 2 * n,
            execution_count: n / 2,
            inference_stats: Some(InferStatistics {
                success: sd(n, 1000 * scale),
                queue: sd(n, 100 * scale),
                compute_input: sd(n, 50 * scale),
                compute_infer: sd(n, 700 * scale),
                compute_output: sd(n, 50 * scale),
                ..Default::default()
            }),
            batch_stats: vec![
                InferBatchStatistics {
                    batch_size: 2,
                    compute_input: sd(n / 4, 20 * scale),
                    compute_infer: sd(n / 4, 300 * scale),
                    compute_output: sd(n / 4, 30 * scale),
                },
                InferBatchStatistics {
                    batch_size: 4,
                    compute_input: sd(n / 4, 0),
                    compute_infer: sd(n / 4, 50 * scale),
                    compute_output: sd(n / 4, 0),
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn server_deltas_average_per_request_and_busy_time_per_execution() {
        let before = ServerCounters::from_stats(&[stats(10, 10)]);
        let after = ServerCounters::from_stats(&[stats(30, 30)]);
        let d = after.since(&before);
        assert_eq!((d.requests, d.request_ns), (20, 20_000));
        let b = ServerBreakdown::from_delta(&d);
        assert_eq!(b.requests, 20);
        assert_eq!(b.inferences, 40);
        assert_eq!(b.executions, 10);
        assert!((b.request_us - 1.0).abs() < 1e-12);
        assert!((b.queue_us - 0.1).abs() < 1e-12);
        assert!((b.compute_infer_us - 0.7).abs() < 1e-12);
        assert!((b.other_us - 0.1).abs() < 1e-9);
        // batch_stats: (20 + 300 + 30 + 50) × 20 ns over 10 executions.
        assert!((b.busy_us - 8.0).abs() < 1e-12);
        assert!((b.compute_per_execution_us - 0.8).abs() < 1e-12);
        // Two versions are summed; an empty window averages to zero.
        let two = ServerCounters::from_stats(&[stats(10, 10), stats(10, 10)]);
        assert_eq!(two.requests, 20);
        let zero = ServerBreakdown::from_delta(&before.since(&before));
        assert_eq!(zero.request_us, 0.0);
        assert_eq!(zero.compute_per_execution_us, 0.0);
        // A restarted server (counters went down) gives zeros, not a wrap-around.
        assert_eq!(
            (
                before.since(&after).requests,
                before.since(&after).request_ns
            ),
            (0, 0)
        );
    }

    #[test]
    fn process_cpu_advances_with_work() {
        let a = process_cpu();
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(process_cpu() > a);
    }
}
