//! The reports of `models`, `eval`, `merge`, `compare`, `score` and `perf`, in one shape.
//!
//! Each command's report implements [`Render`]: it gives its JSON document (`"schema":
//! 1`; `schema/*.schema.json`), a plain struct whose keys are its fields in order, and
//! its human text, rendered from the typed report (never from its JSON). [`Render::render`]
//! turns either into the bytes the command prints or writes, the JSON of every report
//! through the one writer of [`json`]. The documents of `models`, `eval`, `merge`,
//! `compare` and `score` are here ([`models`], [`eval`], [`merge`], [`compare`],
//! [`score`]; pure data, checked against the committed schemas by the unit tests);
//! `perf`'s is in [`crate::perf::export`], with its CSV and SVG renderers.
//!
//! The two formats each have a file: [`json`] (the writer, and how the library's own
//! types appear in the documents) and [`text`] (what the text reports share). The HTML
//! pages (`--html`) are in `html`. The gates of eval and compare, and the flags their
//! documents name them by (the library's only flag text), are in [`gates`].

pub mod ask;
pub mod compare;
pub mod eval;
pub mod flips;
pub mod gates;
internal! { pub mod html; }
pub mod json;
pub mod merge;
pub mod models;
pub mod score;
pub mod text;

use serde::{Deserialize, Serialize};

pub use text::protocol_words;

/// How a report is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The human text.
    Text {
        /// Adds the lines on bertqa's own workings, where the report has any.
        verbose: bool,
    },
    /// The JSON document.
    Json,
}

/// A command's finished report.
pub trait Render {
    /// The JSON document: keys in field order, snake_case.
    type Json<'a>: Serialize
    where
        Self: 'a;

    /// The JSON document of this report.
    fn json(&self) -> Self::Json<'_>;

    /// The human text (see [`Format::Text`]).
    fn text(&self, verbose: bool) -> String;

    /// The report as printed (and, in JSON, as written to the command's files).
    fn render(&self, format: Format) -> String {
        match format {
            Format::Text { verbose } => self.text(verbose),
            Format::Json => json::to_string(&self.json()),
        }
    }
}

/// How a report names the batch size: `batch 8`; for a model whose batching the server
/// does not declare, also who chose it (`` `batch_size` `` or bertqa's default).
pub fn batch_words(batch_size: usize, model: &crate::backend::Model, given: bool) -> String {
    if model.declares_batching() {
        return format!("batch {batch_size}");
    }
    let who = if given {
        "`batch_size`"
    } else {
        "bertqa's default"
    };
    format!("batch {batch_size} ({who}: the server declares no batching)")
}

/// How many question ids a report lists where it counts them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountedIds {
    /// How many questions there are in all (not only those listed).
    pub count: usize,
    /// The ids of the first of them, in the data's order (at most [`eval::FIRST_IDS`]
    /// in the reports).
    pub first_ids: Vec<String>,
}

impl CountedIds {
    /// The count of `ids` and the first `n` of them.
    pub fn first<'a, I: IntoIterator<Item = &'a String>>(ids: I, count: usize, n: usize) -> Self {
        CountedIds {
            count,
            first_ids: ids.into_iter().take(n).cloned().collect(),
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
