//! A model's server-side counters, whichever source they come from: Triton's
//! statistics extension (`ModelStatistics`, read by `perf` between its windows) or its
//! Prometheus `nv_inference_*` metrics (read by `perf` per level and `eval` over its
//! run). One type, so that both are read, subtracted and summed the same way.
//!
//! Contract:
//! - Counts are whole numbers and times whole nanoseconds (Prometheus's microseconds ×
//!   1000), so the deltas of both sources' cumulative counters lose nothing, and a
//!   Prometheus figure renders as the page gave it.
//! - A figure only one source gives is an `Option`, `None` from the other: failures
//!   (`nv_inference_request_failure`; bertqa reads only successes from the
//!   statistics) and busy time (the statistics' `batch_stats`, once per execution;
//!   Prometheus has no such counter).
//! - [`ServerCounters::since`] of a counter that went down (a restarted server) is 0,
//!   never a wrap-around; an `Option` figure is known over a span or a sum only where
//!   both sides know it.

use crate::backend::proto::{InferBatchStatistics, ModelStatistics, StatisticDuration};

/// A model's cumulative counters, or their difference over a span (summed over the
/// versions read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// Successful requests (statistics' `success.count`, `nv_inference_request_success`).
    pub requests: u64,
    /// Failed requests, every reason (`nv_inference_request_failure`); `None` from the
    /// statistics.
    pub failures: Option<u64>,
    /// Inferences (batch rows) and model executions.
    pub inferences: u64,
    pub executions: u64,
    /// The successful requests' total time, receipt to response (statistics'
    /// `success.ns`, `nv_inference_request_duration_us`).
    pub request_ns: u64,
    /// Per-request times, counted once per request even when requests share a batched
    /// execution (so their sum overstates the server's busy time).
    pub queue_ns: u64,
    pub compute_input_ns: u64,
    pub compute_infer_ns: u64,
    pub compute_output_ns: u64,
    /// Time the model instances executed, from `batch_stats` (once per execution);
    /// `None` from Prometheus.
    pub busy_ns: Option<u64>,
}

/// Nanoseconds as (fractional) microseconds.
pub(crate) fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

fn ns(d: &Option<StatisticDuration>) -> u64 {
    d.as_ref().map_or(0, |d| d.ns)
}

fn batch_ns(b: &InferBatchStatistics) -> u64 {
    ns(&b.compute_input) + ns(&b.compute_infer) + ns(&b.compute_output)
}

impl ServerCounters {
    /// The counters of a Prometheus page before its first sample: failures are one of
    /// its counters, so they start known (at 0).
    pub(crate) fn prometheus() -> ServerCounters {
        ServerCounters {
            failures: Some(0),
            ..ServerCounters::default()
        }
    }

    /// Sums the entries (one per version) of a `ModelStatistics` answer.
    pub(crate) fn from_stats(stats: &[ModelStatistics]) -> ServerCounters {
        let mut c = ServerCounters {
            busy_ns: Some(0),
            ..ServerCounters::default()
        };
        for s in stats {
            if let Some(i) = &s.inference_stats {
                let success = i.success.unwrap_or_default();
                c.requests += success.count;
                c.request_ns += success.ns;
                c.queue_ns += ns(&i.queue);
                c.compute_input_ns += ns(&i.compute_input);
                c.compute_infer_ns += ns(&i.compute_infer);
                c.compute_output_ns += ns(&i.compute_output);
            }
            c.inferences += s.inference_count;
            c.executions += s.execution_count;
            c.busy_ns = c
                .busy_ns
                .map(|b| b + s.batch_stats.iter().map(batch_ns).sum::<u64>());
        }
        c
    }

    /// Adds one Prometheus sample of the model (counts, or times in microseconds,
    /// rounded to whole nanoseconds); false when `name` is no counter read here.
    pub(crate) fn add_metric(&mut self, name: &str, value: f64) -> bool {
        // `as` saturates: a negative sample adds nothing.
        let count = value.round() as u64;
        let ns = (value * 1000.0).round() as u64;
        let (slot, add) = match name {
            "nv_inference_request_success" => (&mut self.requests, count),
            "nv_inference_request_failure" => (self.failures.get_or_insert(0), count),
            "nv_inference_count" => (&mut self.inferences, count),
            "nv_inference_exec_count" => (&mut self.executions, count),
            "nv_inference_request_duration_us" => (&mut self.request_ns, ns),
            "nv_inference_queue_duration_us" => (&mut self.queue_ns, ns),
            "nv_inference_compute_input_duration_us" => (&mut self.compute_input_ns, ns),
            "nv_inference_compute_infer_duration_us" => (&mut self.compute_infer_ns, ns),
            "nv_inference_compute_output_duration_us" => (&mut self.compute_output_ns, ns),
            _ => return false,
        };
        *slot = slot.saturating_add(add);
        true
    }

    /// `self − earlier` (see the module's contract).
    pub(crate) fn since(&self, earlier: &ServerCounters) -> ServerCounters {
        self.combine(earlier, u64::saturating_sub)
    }

    /// The sum of two spans' counters (see the module's contract).
    pub(crate) fn plus(&self, other: &ServerCounters) -> ServerCounters {
        self.combine(other, u64::saturating_add)
    }

    /// `f` applied figure by figure.
    fn combine(&self, b: &ServerCounters, f: fn(u64, u64) -> u64) -> ServerCounters {
        let both = |x: Option<u64>, y: Option<u64>| Some(f(x?, y?));
        ServerCounters {
            requests: f(self.requests, b.requests),
            failures: both(self.failures, b.failures),
            inferences: f(self.inferences, b.inferences),
            executions: f(self.executions, b.executions),
            request_ns: f(self.request_ns, b.request_ns),
            queue_ns: f(self.queue_ns, b.queue_ns),
            compute_input_ns: f(self.compute_input_ns, b.compute_input_ns),
            compute_infer_ns: f(self.compute_infer_ns, b.compute_infer_ns),
            compute_output_ns: f(self.compute_output_ns, b.compute_output_ns),
            busy_ns: both(self.busy_ns, b.busy_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_microseconds_become_whole_nanoseconds_and_render_back_exactly() {
        let mut c = ServerCounters::prometheus();
        assert!(c.add_metric("nv_inference_queue_duration_us", 600_003.0));
        assert!(c.add_metric("nv_inference_queue_duration_us", 7.0));
        assert!(c.add_metric("nv_inference_request_success", 12.0));
        assert!(!c.add_metric("nv_inference_pending_request_count", 5.0));
        assert_eq!(c.queue_ns, 600_010_000);
        assert_eq!(us(c.queue_ns), 600_010.0);
        assert_eq!((c.requests, c.failures, c.busy_ns), (12, Some(0), None));
        assert!(c.add_metric("nv_inference_request_failure", 2.0));
        assert_eq!(c.failures, Some(2));
        // A negative sample adds nothing.
        assert!(c.add_metric("nv_inference_count", -4.0));
        assert_eq!(c.inferences, 0);
    }

    #[test]
    fn a_figure_one_side_lacks_is_unknown_over_a_span_and_in_a_sum() {
        let prom = ServerCounters {
            requests: 10,
            failures: Some(1),
            ..Default::default()
        };
        let stats = ServerCounters {
            requests: 4,
            busy_ns: Some(900),
            ..Default::default()
        };
        let sum = prom.plus(&stats);
        assert_eq!((sum.requests, sum.failures, sum.busy_ns), (14, None, None));
        let later = ServerCounters {
            requests: 30,
            failures: Some(3),
            ..Default::default()
        };
        let d = later.since(&prom);
        assert_eq!((d.requests, d.failures), (20, Some(2)));
        // A restarted server: counters went down, the span counts nothing.
        let d = prom.since(&later);
        assert_eq!((d.requests, d.failures), (0, Some(0)));
    }
}
