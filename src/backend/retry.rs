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
use std::time::Duration;

use super::status::is_dropped_connection;
use crate::error::{Code, Error};

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

impl RetryPolicy {
    /// Classifies a failed attempt under this policy, by the error's variant and code.
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
            Error::TensorMismatch { .. } | Error::InvalidAnswer { .. } => {
                v("INVALID_RESPONSE", false, false)
            }
            Error::ModelNotFound { .. } => v("NOT_FOUND", false, false),
            Error::ModelNotReady { .. } => v("UNAVAILABLE", true, true),
            Error::Server {
                code,
                http,
                message,
                ..
            } => {
                let name = code.as_str();
                match code {
                    Code::ResourceExhausted | Code::DeadlineExceeded => v(name, true, false),
                    // A gRPC connection lost mid-call, which tonic reports without a
                    // transport source (see `status::is_dropped_connection`).
                    Code::Unknown | Code::Cancelled
                        if http.is_none() && is_dropped_connection(message) =>
                    {
                        v(name, true, true)
                    }
                    _ => v(name, self.retry_model_errors, false),
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

/// A uniform number in [0, 1) from the thread's generator, seeded at random: jitter
/// needs spread, not reproducibility or cryptographic quality.
fn jitter() -> f64 {
    fastrand::f64()
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

    /// What was counted after `before` (an earlier reading of the same pool).
    pub fn since(&self, before: &RetryStats) -> RetryStats {
        RetryStats {
            retries: counts_since(&self.retries, &before.retries),
            failures: counts_since(&self.failures, &before.failures),
        }
    }
}

/// `now` less `before`, code by code; codes that did not grow are left out.
pub(crate) fn counts_since(
    now: &std::collections::BTreeMap<String, u64>,
    before: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    now.iter()
        .map(|(code, n)| {
            (
                code.clone(),
                n.saturating_sub(before.get(code).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{AnswerTo, Unreachable};

    use crate::error::tests::server;

    #[test]
    fn counts_since_an_earlier_reading_are_the_growth_by_code() {
        let codes = |pairs: &[(&str, u64)]| {
            pairs
                .iter()
                .map(|(c, n)| (c.to_string(), *n))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let before = RetryStats {
            retries: codes(&[("UNAVAILABLE", 2), ("INTERNAL", 1)]),
            failures: codes(&[]),
        };
        let now = RetryStats {
            retries: codes(&[
                ("UNAVAILABLE", 5),
                ("INTERNAL", 1),
                ("DEADLINE_EXCEEDED", 1),
            ]),
            failures: codes(&[("UNAVAILABLE", 1)]),
        };
        let since = now.since(&before);
        assert_eq!(
            since.retries,
            codes(&[("UNAVAILABLE", 3), ("DEADLINE_EXCEEDED", 1)])
        );
        assert_eq!(since.failures, codes(&[("UNAVAILABLE", 1)]));
        assert_eq!(now.since(&now), RetryStats::default());
    }

    /// (code, retryable, endpoint suspect) of `e` under the default policy and under
    /// one that retries model errors.
    fn verdicts(e: &Error) -> [(&'static str, bool, bool); 2] {
        let lenient = RetryPolicy {
            retry_model_errors: true,
            ..RetryPolicy::default()
        };
        [RetryPolicy::default(), lenient].map(|p| {
            let v = p.classify(e);
            (v.code, v.retryable, v.endpoint_suspect)
        })
    }

    #[test]
    fn transient_codes_are_retried_and_model_errors_only_on_request() {
        let unreachable = [
            Unreachable::Refused,
            Unreachable::ConnectTimeout,
            Unreachable::Transport,
            Unreachable::Closed,
            Unreachable::Answered,
            Unreachable::WrongProtocol,
            Unreachable::NotReady,
        ];
        for cause in unreachable {
            let e = Error::unavailable("h:1", cause, "whatever the words");
            assert_eq!(verdicts(&e), [("UNAVAILABLE", true, true); 2], "{cause:?}");
        }
        let timeout = Error::Timeout {
            url: "h:1".into(),
            timeout_ms: 5,
        };
        assert_eq!(verdicts(&timeout), [("DEADLINE_EXCEEDED", true, false); 2]);
        let not_ready = Error::ModelNotReady {
            url: "h:1".into(),
            model: "m".into(),
            state: "UNAVAILABLE".into(),
            ready: vec![],
        };
        assert_eq!(verdicts(&not_ready), [("UNAVAILABLE", true, true); 2]);
        for code in [Code::ResourceExhausted, Code::DeadlineExceeded] {
            for http in [None, Some(429)] {
                let e = server(code, http, "slow down");
                assert_eq!(verdicts(&e), [(code.as_str(), true, false); 2], "{e}");
            }
        }
        for code in [Code::Internal, Code::InvalidArgument, Code::Unknown] {
            let e = server(code, Some(500), "injected fault");
            assert_eq!(
                verdicts(&e),
                [(code.as_str(), false, false), (code.as_str(), true, false)],
                "{e}"
            );
        }
    }

    #[test]
    fn a_grpc_connection_lost_mid_call_is_transient_whatever_its_code() {
        for code in [Code::Unknown, Code::Cancelled] {
            let e = server(code, None, "h2 protocol error: connection reset");
            assert_eq!(verdicts(&e), [(code.as_str(), true, true); 2], "{e}");
            // Over HTTP the message is the server's answer, not a lost connection.
            let e = server(code, Some(499), "connection reset");
            assert!(!RetryPolicy::default().classify(&e).retryable, "{e}");
        }
        // Only those codes: an INTERNAL that says so is the model's error.
        let e = server(Code::Internal, None, "connection reset");
        assert!(!RetryPolicy::default().classify(&e).retryable);
    }

    #[test]
    fn malformed_answers_and_refusals_are_never_retried() {
        let never = [
            Error::TensorMismatch {
                model: "m".into(),
                tensor: "t".into(),
                expected: "FP32".into(),
                actual: "FP64".into(),
            },
            Error::InvalidAnswer {
                server: None,
                url: "h:1".into(),
                answer: AnswerTo::Inference { model: "m".into() },
                message: "short".into(),
            },
        ];
        for e in &never {
            assert_eq!(verdicts(e), [("INVALID_RESPONSE", false, false); 2], "{e}");
        }
        let denied = Error::PermissionDenied {
            url: "h:1".into(),
            message: "no".into(),
        };
        assert_eq!(verdicts(&denied), [("PERMISSION_DENIED", false, false); 2]);
        let unknown = Error::ModelNotFound {
            url: "h:1".into(),
            model: "m".into(),
            available: Some(vec![]),
        };
        assert_eq!(verdicts(&unknown), [("NOT_FOUND", false, false); 2]);
        for e in [
            Error::Config("`batch_size` must be at least 1".into()),
            Error::NotDecoded { qas_id: "q".into() },
        ] {
            assert_eq!(verdicts(&e), [("OTHER", false, false); 2], "{e}");
        }
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
}
