//! tune's rule for ending a level ([`Until::Decided`](super::Until)): measure where it
//! decides something, stop where nothing more would change the answer.
//!
//! After each window, the level is done when it is
//! - clearly over the budget: the window's latency at the budget's percentile is more
//!   than [`CLEARLY_OVER`] times the threshold, or the last two windows are both over it;
//! - clearly below the best so far: after two windows, even the best window's throughput
//!   with [`BELOW_MARGIN`] added is below `beat`;
//! - known well enough: after three windows, the 95% interval of the mean of the
//!   windows' throughputs (Student's t) is within `precision` of the mean, and the last
//!   three windows lie on one side of the threshold.
//!
//! Otherwise another window is measured, up to `max_trials` (then the level is reported
//! as not decided, its figures those of its last three windows).

use super::Budget;

/// A window's latency at the percentile this many times the threshold ends the level.
pub(crate) const CLEARLY_OVER: f64 = 1.5;
/// Headroom given to a level's best window before it counts as below the best so far.
pub(crate) const BELOW_MARGIN: f64 = 0.10;

/// What the rule reads of one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WindowFigures {
    pub(crate) features_per_s: f64,
    /// Latency at the budget's percentile, microseconds.
    pub(crate) latency_us: f64,
}

/// Whether `windows` (in order) decide the level.
pub(crate) fn decided(
    windows: &[WindowFigures],
    budget: &Budget,
    beat: f64,
    precision: f64,
) -> bool {
    let Some(last) = windows.last() else {
        return false;
    };
    let over = |w: &WindowFigures| w.latency_us > budget.threshold_us;
    if last.latency_us > CLEARLY_OVER * budget.threshold_us {
        return true;
    }
    let n = windows.len();
    if n >= 2 && windows[n - 2..].iter().all(over) {
        return true;
    }
    let best = windows.iter().map(|w| w.features_per_s).fold(0.0, f64::max);
    if n >= 2 && best * (1.0 + BELOW_MARGIN) < beat {
        return true;
    }
    if n < 3 {
        return false;
    }
    let recent = &windows[n - 3..];
    let one_side = recent.iter().all(over) || !recent.iter().any(over);
    one_side && relative_half_width(windows) <= precision
}

/// The half-width of the 95% interval of the mean of the windows' throughputs, as a
/// fraction of the mean (infinite for a mean of 0).
pub(crate) fn relative_half_width(windows: &[WindowFigures]) -> f64 {
    let n = windows.len();
    if n < 2 {
        return f64::INFINITY;
    }
    let mean = windows.iter().map(|w| w.features_per_s).sum::<f64>() / n as f64;
    if mean <= 0.0 {
        return f64::INFINITY;
    }
    let var = windows
        .iter()
        .map(|w| (w.features_per_s - mean).powi(2))
        .sum::<f64>()
        / (n - 1) as f64;
    t95(n - 1) * (var / n as f64).sqrt() / mean
}

/// Student's t at 97.5% for `df` degrees of freedom.
fn t95(df: usize) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        11..=20 => 2.086,
        21..=30 => 2.042,
        _ => 1.96,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            threshold_us: 500_000.0,
            percentile: 99.0,
            binary_search: true,
        }
    }

    fn w(features_per_s: f64, latency_ms: f64) -> WindowFigures {
        WindowFigures {
            features_per_s,
            latency_us: latency_ms * 1000.0,
        }
    }

    #[test]
    fn a_level_far_over_the_budget_ends_after_one_window() {
        assert!(decided(&[w(100.0, 800.0)], &budget(), 0.0, 0.03));
        assert!(!decided(&[w(100.0, 600.0)], &budget(), 0.0, 0.03));
        assert!(decided(
            &[w(100.0, 600.0), w(100.0, 520.0)],
            &budget(),
            0.0,
            0.03
        ));
    }

    #[test]
    fn a_level_well_below_the_best_ends_after_two_windows() {
        let two = [w(100.0, 50.0), w(104.0, 50.0)];
        assert!(decided(&two, &budget(), 120.0, 0.03));
        assert!(!decided(&two, &budget(), 110.0, 0.03), "within the margin");
        assert!(
            !decided(&two[..1], &budget(), 1000.0, 0.03),
            "one window says little"
        );
    }

    #[test]
    fn a_level_ends_when_its_throughput_is_known_within_the_precision() {
        let steady = [w(100.0, 50.0), w(101.0, 50.0), w(99.0, 50.0)];
        assert!(decided(&steady, &budget(), 0.0, 0.03));
        let noisy = [w(80.0, 50.0), w(120.0, 50.0), w(100.0, 50.0)];
        assert!(!decided(&noisy, &budget(), 0.0, 0.03));
        // Steady throughput, but latencies either side of the threshold: not yet.
        let torn = [w(100.0, 450.0), w(101.0, 510.0), w(99.0, 490.0)];
        assert!(!decided(&torn, &budget(), 0.0, 0.03));
        assert!(relative_half_width(&steady) < 0.03);
    }
}
