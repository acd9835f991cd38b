//! The JSON reports of `eval`, `merge` and `compare` (`"schema": 1`; `schema/*.schema.json`)
//! as plain structs: keys in field order, snake_case, the same values the commands
//! computed. Pure data: the commands fill them in, `serde_json` writes them, and the
//! unit tests here check what they produce against the committed schemas.

pub mod compare;
pub mod eval;
pub mod merge;

use serde::Serialize;

use crate::backend::Protocol;

/// The protocol as the text reports name it (the JSON reports write
/// [`Protocol::as_str`], the `--protocol` value).
pub fn protocol_words(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::Grpc => "gRPC",
        Protocol::Http => "HTTP",
    }
}

/// How many question ids a report lists where it counts them.
#[derive(Debug, Clone, Serialize)]
pub struct CountedIds<'a> {
    pub count: usize,
    pub first_ids: Vec<&'a str>,
}

impl<'a> CountedIds<'a> {
    /// The count of `ids` and the first `n` of them.
    pub fn first<I: IntoIterator<Item = &'a String>>(ids: I, count: usize, n: usize) -> Self {
        CountedIds {
            count,
            first_ids: ids.into_iter().take(n).map(String::as_str).collect(),
        }
    }
}

/// Validates `value` against the schema text `schema` (tests).
#[cfg(test)]
pub(crate) fn assert_follows(schema: &str, value: &serde_json::Value) {
    let schema: serde_json::Value = serde_json::from_str(schema).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("valid schema");
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?} in {value:#}");
}
