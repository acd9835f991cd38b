//! Retry policy of the inference path: which errors are transient, how long to back off,
//! and the counts the reports show: a server's brief outage costs a run time, not its answers.
//!
//! Contract:
//! - Transient, retried up to `retries` times: UNAVAILABLE (which includes a refused or
//!   reset connection: a server restarting), RESOURCE_EXHAUSTED and DEADLINE_EXCEEDED.
//!   INTERNAL and other model errors are deterministic and fail at once unless
//!   `retry_model_errors`. Malformed responses (shape, dtype, missing output), permission
//!   errors and unknown models never are retried.
//! - Backoff before retry `n` (1-based) is drawn uniformly from `[d/2, d]` with
//!   `d = min(max_backoff, base_backoff · 2^(n−1))` ("equal jitter"): concurrent requests
//!   that failed together do not come back together, and the wait still grows.
//! - A request that still fails once the budget is spent becomes
//!   [`Error::RetriesExhausted`] with a summary of the attempts' codes and the last error.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::Error;

/// How the inference path retries.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `retries + 1` attempts at most).
    pub retries: u32,
    /// Backoff before the first retry (upper bound; see the module header).
    pub base_backoff: Duration,
    /// Cap of the backoff: long enough in total to outlast a server restart when
    /// `retries` is raised, short enough to notice the server is back soon.
    pub max_backoff: Duration,
    /// Retry INTERNAL and other model errors too (normally deterministic).
    pub retry_model_errors: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 3,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(2_000),
            retry_model_errors: false,
        }
    }
}

/// What one failed attempt means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The gRPC code in SCREAMING_SNAKE_CASE (`UNAVAILABLE`), or a bertqa name for
    /// failures that are not a status (`INVALID_RESPONSE`, `OTHER`).
    pub code: &'static str,
    /// Worth another attempt.
    pub retryable: bool,
    /// The endpoint itself looks unwell (unreachable, refusing): take it out of the
    /// pool until a health check passes.
    pub endpoint_suspect: bool,
}

/// gRPC codes as written in reports (tonic's `Code` Debug names → the proto names).
const CODES: [(&str, &str); 16] = [
    ("Cancelled", "CANCELLED"),
    ("Unknown", "UNKNOWN"),
    ("InvalidArgument", "INVALID_ARGUMENT"),
    ("DeadlineExceeded", "DEADLINE_EXCEEDED"),
    ("NotFound", "NOT_FOUND"),
    ("AlreadyExists", "ALREADY_EXISTS"),
    ("PermissionDenied", "PERMISSION_DENIED"),
    ("ResourceExhausted", "RESOURCE_EXHAUSTED"),
    ("FailedPrecondition", "FAILED_PRECONDITION"),
    ("Aborted", "ABORTED"),
    ("OutOfRange", "OUT_OF_RANGE"),
    ("Unimplemented", "UNIMPLEMENTED"),
    ("Internal", "INTERNAL"),
    ("Unavailable", "UNAVAILABLE"),
    ("DataLoss", "DATA_LOSS"),
    ("Unauthenticated", "UNAUTHENTICATED"),
];

impl RetryPolicy {
    /// Classifies a failed attempt under this policy.
    pub fn classify(&self, error: &Error) -> Verdict {
        let v = |code, retryable, endpoint_suspect| Verdict {
            code,
            retryable,
            endpoint_suspect,
        };
        match error {
            Error::Unavailable { .. } => v("UNAVAILABLE", true, true),
            Error::Timeout { .. } => v("DEADLINE_EXCEEDED", true, false),
            Error::PermissionDenied { .. } => v("PERMISSION_DENIED", false, false),
            Error::TensorMismatch { .. } => v("INVALID_RESPONSE", false, false),
            Error::ModelNotFound { .. } => v("NOT_FOUND", false, false),
            Error::ModelNotReady { .. } => v("UNAVAILABLE", true, true),
            Error::Server { code, message, .. } => {
                let name = code.split_whitespace().next().unwrap_or("");
                let code = CODES
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map_or("OTHER", |(_, v)| *v);
                match code {
                    "RESOURCE_EXHAUSTED" | "DEADLINE_EXCEEDED" => v(code, true, false),
                    // hyper's "connection reset" without a transport source.
                    "UNKNOWN" | "CANCELLED" if is_reset(message) => v(code, true, true),
                    _ => v(code, self.retry_model_errors, false),
                }
            }
            _ => v("OTHER", false, false),
        }
    }

    /// The wait before retry `n` (1-based), jittered.
    pub fn backoff(&self, n: u32) -> Duration {
        let exp = self
            .base_backoff
            .saturating_mul(1u32 << n.saturating_sub(1).min(20));
        let d = exp.min(self.max_backoff);
        let half = d / 2;
        half + half.mul_f64(jitter())
    }
}

fn is_reset(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "connection reset",
        "broken pipe",
        "connection closed",
        "h2 protocol error",
    ]
    .iter()
    .any(|s| m.contains(s))
}

/// A uniform number in [0, 1) from a process-wide splitmix64 sequence seeded by the
/// clock: jitter needs spread, not cryptographic quality.
fn jitter() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(seed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Retries and final failures of a run, by code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Failed attempts that were retried.
    pub retries: BTreeMap<String, u64>,
    /// Requests that failed for good (budget spent, or an error not retried).
    pub failures: BTreeMap<String, u64>,
}

impl RetryStats {
    /// All retries.
    pub fn total_retries(&self) -> u64 {
        self.retries.values().sum()
    }

    /// All requests that failed for good.
    pub fn total_failures(&self) -> u64 {
        self.failures.values().sum()
    }
}

/// `UNAVAILABLE ×3, DEADLINE_EXCEEDED ×1`.
pub fn summarize(codes: &BTreeMap<&'static str, u32>) -> String {
    codes
        .iter()
        .map(|(c, n)| format!("{c} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str) -> Error {
        Error::Server {
            url: "h:1".into(),
            code: format!("{code} for model \"m\""),
            message: "boom".into(),
        }
    }

    #[test]
    fn transient_codes_are_retried_and_model_errors_only_on_request() {
        let p = RetryPolicy::default();
        let unavailable = Error::Unavailable {
            url: "h:1".into(),
            message: "Connection refused (os error 111)".into(),
        };
        let c = p.classify(&unavailable);
        assert_eq!(
            (c.code, c.retryable, c.endpoint_suspect),
            ("UNAVAILABLE", true, true)
        );
        let timeout = Error::Timeout {
            url: "h:1".into(),
            timeout_ms: 5,
        };
        assert_eq!(p.classify(&timeout).code, "DEADLINE_EXCEEDED");
        assert!(p.classify(&timeout).retryable);
        let exhausted = p.classify(&server("ResourceExhausted"));
        assert_eq!(exhausted.code, "RESOURCE_EXHAUSTED");
        assert!(exhausted.retryable && !exhausted.endpoint_suspect);
        let internal = p.classify(&server("Internal"));
        assert_eq!(internal.code, "INTERNAL");
        assert!(!internal.retryable);
        let lenient = RetryPolicy {
            retry_model_errors: true,
            ..RetryPolicy::default()
        };
        assert!(lenient.classify(&server("Internal")).retryable);
        let mismatch = Error::TensorMismatch {
            model: "m".into(),
            tensor: "t".into(),
            expected: "FP32".into(),
            actual: "FP64".into(),
        };
        assert!(!lenient.classify(&mismatch).retryable);
        let denied = Error::PermissionDenied {
            url: "h:1".into(),
            message: "no".into(),
        };
        assert!(!lenient.classify(&denied).retryable);
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered_within_half() {
        let p = RetryPolicy {
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1_000),
            ..RetryPolicy::default()
        };
        for n in 1..=12 {
            let d =
                Duration::from_millis(100 * (1u64 << (n - 1))).min(Duration::from_millis(1_000));
            for _ in 0..50 {
                let b = p.backoff(n);
                assert!(
                    b >= d / 2 && b <= d,
                    "retry {n}: {b:?} outside [{:?}, {d:?}]",
                    d / 2
                );
            }
        }
        let draws: std::collections::BTreeSet<_> = (0..20).map(|_| p.backoff(3)).collect();
        assert!(draws.len() > 1, "jitter spreads the waits");
    }

    #[test]
    fn summaries_list_codes_with_counts() {
        let mut m = BTreeMap::new();
        m.insert("UNAVAILABLE", 3);
        m.insert("DEADLINE_EXCEEDED", 1);
        assert_eq!(summarize(&m), "DEADLINE_EXCEEDED ×1, UNAVAILABLE ×3");
    }
}
