//! Latency histograms: request latencies in microseconds, recorded the same way by the
//! pool (per endpoint), the pipeline's dispatch stage and `perf`.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest latency a histogram holds, microseconds (an hour); longer ones are
/// recorded as this.
const MAX_US: u64 = 3_600_000_000;

/// An empty latency histogram: 1 µs to an hour, three significant digits.
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid bounds")
}

/// `d` in whole microseconds, within the histogram's bounds.
pub(crate) fn micros(d: Duration) -> u64 {
    d.as_micros().clamp(1, u128::from(MAX_US)) as u64
}
