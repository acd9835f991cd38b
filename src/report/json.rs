//! The JSON format of the reports: the one writer every document goes through, and how
//! the library's own types appear in the documents (`#[serde(with = "…")]` modules).

use serde::{Deserialize, Serialize};

/// A report document as the commands write it, on stdout and to their files:
/// serde_json's pretty layout (two-space indent), keys in field order, floats as ryu
/// writes them (`null` when not finite), and a final newline.
pub fn to_string(doc: &impl Serialize) -> String {
    // The documents are structs, strings, numbers and string-keyed maps: they always
    // serialize.
    let mut text = serde_json::to_string_pretty(doc).expect("a report serializes");
    text.push('\n');
    text
}

/// A report document as a value, exactly as [`to_string`] writes it: a single-precision
/// field is the decimal printed (0.9), not its widening to double (0.8999999761581421),
/// which `serde_json::to_value` would give.
pub fn to_value(doc: &impl Serialize) -> serde_json::Value {
    // The writer's own text reads back: it is JSON with floats as ryu writes them.
    serde_json::from_str(&to_string(doc)).expect("a report reads back")
}

/// A float the document may hold as `null` (it was not finite), read back as NaN: for
/// the floats that come from the user (a gate's threshold) or may be undefined (a
/// metric).
pub(crate) fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// [`Metrics`](crate::evaluate::Metrics) as the official scripts write them: their keys
/// in their order ([`Metrics::official`](crate::evaluate::Metrics::official)), counts as
/// integers, floats that are not finite as `null` (read back as NaN).
pub(crate) mod metrics {
    use serde::de::Error as _;
    use serde::ser::SerializeMap;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::evaluate::{BestThresholds, Breakdown, MetricValue, Metrics};

    pub(crate) fn serialize<S: Serializer>(metrics: &Metrics, s: S) -> Result<S::Ok, S::Error> {
        let official = metrics.official();
        let mut map = s.serialize_map(Some(official.len()))?;
        for (key, value) in official {
            match value {
                MetricValue::Float(x) => map.serialize_entry(key, &x)?,
                MetricValue::Count(n) => map.serialize_entry(key, &n)?,
            }
        }
        map.end()
    }

    /// The official keys; a float key present as `null` is NaN.
    #[derive(Deserialize)]
    #[allow(non_snake_case)]
    struct Official {
        #[serde(default, deserialize_with = "float")]
        exact_match: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        exact: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        f1: Option<f64>,
        total: Option<usize>,
        #[serde(default, deserialize_with = "float")]
        HasAns_exact: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        HasAns_f1: Option<f64>,
        HasAns_total: Option<usize>,
        #[serde(default, deserialize_with = "float")]
        NoAns_exact: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        NoAns_f1: Option<f64>,
        NoAns_total: Option<usize>,
        #[serde(default, deserialize_with = "float")]
        best_exact: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        best_exact_thresh: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        best_f1: Option<f64>,
        #[serde(default, deserialize_with = "float")]
        best_f1_thresh: Option<f64>,
    }

    fn float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        super::nan_if_null(d).map(Some)
    }

    fn breakdown(exact: Option<f64>, f1: Option<f64>, total: Option<usize>) -> Option<Breakdown> {
        Some(Breakdown {
            exact: exact?,
            f1: f1?,
            total: total?,
        })
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Metrics, D::Error> {
        let o = Official::deserialize(d)?;
        let f1 = o.f1.ok_or_else(|| D::Error::missing_field("f1"))?;
        // v1.1 has `exact_match`; v2.0 has `exact` and `total`.
        match (o.exact_match, o.exact, o.total) {
            (Some(exact_match), None, None) => Ok(Metrics::V1 { exact_match, f1 }),
            (None, Some(exact), Some(total)) => Ok(Metrics::V2 {
                exact,
                f1,
                total,
                has_ans: breakdown(o.HasAns_exact, o.HasAns_f1, o.HasAns_total),
                no_ans: breakdown(o.NoAns_exact, o.NoAns_f1, o.NoAns_total),
                best: (|| {
                    Some(BestThresholds {
                        best_exact: o.best_exact?,
                        best_exact_thresh: o.best_exact_thresh?,
                        best_f1: o.best_f1?,
                        best_f1_thresh: o.best_f1_thresh?,
                    })
                })(),
            }),
            _ => Err(D::Error::custom(
                "metrics of neither SQuAD v1.1 (exact_match) nor v2.0 (exact, total)",
            )),
        }
    }
}

/// A run's [`Fingerprint`](crate::journal::Fingerprint) as an object of strings, keys in
/// the fingerprint's order.
pub(crate) mod fingerprint {
    use std::fmt;

    use serde::de::{MapAccess, Visitor};
    use serde::{Deserializer, Serializer};

    use crate::journal::Fingerprint;

    pub(crate) fn serialize<S: Serializer>(run: &Fingerprint, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(run.0.iter().map(|(k, v)| (k, v)))
    }

    struct Pairs;

    impl<'de> Visitor<'de> for Pairs {
        type Value = Fingerprint;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a run record (an object of strings)")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fingerprint, A::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some(pair) = map.next_entry::<String, String>()? {
                pairs.push(pair);
            }
            Ok(Fingerprint(pairs))
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        d.deserialize_map(Pairs)
    }
}

/// A [`Protocol`](crate::backend::Protocol) as `--protocol` names it (`grpc`, `http`).
pub(crate) mod protocol {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::backend::Protocol;

    pub(crate) fn serialize<S: Serializer>(protocol: &Protocol, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(protocol.as_str())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Protocol, D::Error> {
        let name = String::deserialize(d)?;
        [Protocol::Grpc, Protocol::Http]
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| D::Error::unknown_variant(&name, &["grpc", "http"]))
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use crate::evaluate::{BestThresholds, Breakdown, Metrics};
    use crate::journal::Fingerprint;

    #[derive(Debug, Serialize, Deserialize)]
    struct Doc {
        #[serde(with = "super::metrics")]
        metrics: Metrics,
        #[serde(with = "super::fingerprint")]
        run: Fingerprint,
        #[serde(with = "super::protocol")]
        protocol: crate::backend::Protocol,
    }

    /// Each form writes what `to_json` of the library type writes, and reads back the
    /// same value.
    #[test]
    fn library_types_round_trip_as_their_json() {
        let v2 = Metrics::V2 {
            exact: 50.0,
            f1: 2.0 / 3.0 * 100.0,
            total: 4,
            has_ans: Some(Breakdown {
                exact: 25.0,
                f1: 1e-7,
                total: 2,
            }),
            no_ans: None,
            best: Some(BestThresholds {
                best_exact: 75.0,
                best_exact_thresh: -1.5,
                best_f1: 80.0,
                best_f1_thresh: 0.0,
            }),
        };
        let v1 = Metrics::V1 {
            exact_match: 100.0,
            f1: 99.5,
        };
        let run = Fingerprint::default()
            .with("model", "m")
            .with("data_sha256", "ab")
            .with("limit", "all");
        for metrics in [v1, v2] {
            let doc = Doc {
                metrics: metrics.clone(),
                run: run.clone(),
                protocol: crate::backend::Protocol::Http,
            };
            let text = super::to_string(&doc);
            let want = serde_json::json!({
                "metrics": metrics.to_json(),
                "run": run.to_json(),
                "protocol": "http",
            });
            assert_eq!(text, format!("{want:#}\n"));
            let back: Doc = serde_json::from_str(&text).unwrap();
            assert_eq!(back.metrics, metrics);
            assert_eq!(back.run.0, run.0);
            assert_eq!(back.protocol, crate::backend::Protocol::Http);
        }
    }

    #[test]
    fn null_metrics_read_as_nan_and_other_shapes_are_refused() {
        let m: Metrics = super::metrics::deserialize(&serde_json::json!({
            "exact_match": null, "f1": 1.0
        }))
        .unwrap();
        assert!(m.exact().is_nan());
        assert!(super::metrics::deserialize(&serde_json::json!({"f1": 1.0})).is_err());
        assert!(super::fingerprint::deserialize(&serde_json::json!({"a": 1})).is_err());
        assert!(super::protocol::deserialize(&serde_json::json!("ftp")).is_err());
    }
}
