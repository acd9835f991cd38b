//! What the human reports share: the official metrics table, the protocol in words, and
//! numbers shown as the JSON document has them.

use std::fmt::Write as _;

use crate::backend::Protocol;
use crate::evaluate::{MetricValue, Metrics};

/// The protocol as the text reports name it (the JSON reports write
/// [`Protocol::as_str`], the `--protocol` value).
pub fn protocol_words(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Grpc => "gRPC",
        Protocol::Http => "HTTP",
    }
}

/// The official metrics as every text report shows them (`eval`, `merge`, `score`): one
/// line each, the key, then the value right-aligned, percentages and thresholds to three
/// decimals (the JSON and the files keep full precision). `indent` leads each line.
pub fn metric_lines(metrics: &Metrics, indent: &str) -> String {
    let mut s = String::new();
    for (k, v) in metrics.official() {
        let v = match v {
            MetricValue::Float(x) => format!("{x:.3}"),
            MetricValue::Count(n) => n.to_string(),
        };
        let _ = writeln!(s, "{indent}{k:<18} {v:>10}");
    }
    s
}

/// A float as the JSON document writes it (`0.9`, `1e-7`, `null` when not finite), for
/// text that quotes a value the user gave or a gate measured.
pub(crate) fn json_number(x: f64) -> String {
    serde_json::to_string(&x).expect("a float serializes")
}

/// A float as the JSON document holds it: one that is not finite is `null` there, and
/// shown as NaN.
pub(crate) fn as_in_json(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        f64::NAN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_the_json_has_them() {
        assert_eq!(json_number(0.9), "0.9");
        assert_eq!(json_number(1.0), "1.0");
        assert_eq!(json_number(1e-5), "0.00001");
        assert_eq!(json_number(1e-7), "1e-7");
        assert_eq!(json_number(f64::INFINITY), "null");
        assert_eq!(json_number(3.0), serde_json::Value::from(3.0).to_string());
        assert!(as_in_json(f64::NEG_INFINITY).is_nan());
        assert_eq!(as_in_json(-2.5), -2.5);
    }
}
