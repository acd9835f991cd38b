//! The files a comparison writes besides each model's: `flips.jsonl` (every question
//! that flipped, one JSON line each), `compare.json` (the `--json` document) and the
//! HTML page.

use std::path::Path;

use super::compare::CompareJson;
use super::{Format, Render as _};
use crate::error::Result;

/// A line of flips.jsonl: a question that flipped from the first model to `model`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlipLine {
    /// The model it flipped in (its name in the comparison).
    pub model: String,
    /// The first model, the one it is compared against.
    pub against: String,
    /// The question and how it flipped: its keys (`id`, `flips`, `answers`, `exact`,
    /// `f1`) are the line's own.
    #[serde(flatten)]
    pub flip: crate::compare::Flip,
    /// The question's slice in each dimension of the first model's run
    /// (`{"question_type": "when", ...}`); left out when not known.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub slices: serde_json::Map<String, serde_json::Value>,
}

impl FlipLine {
    /// The line of `flip`, a question that flipped from `against`'s evaluation `first`
    /// to `model`'s, with its slices in `first`.
    pub fn new(
        model: &str,
        against: &str,
        flip: &crate::compare::Flip,
        first: &crate::Evaluation,
    ) -> FlipLine {
        FlipLine {
            model: model.to_string(),
            against: against.to_string(),
            flip: flip.clone(),
            slices: crate::compare::slice_names(first, flip.index),
        }
    }
}

/// Writes `dir`'s compare.json and flips.jsonl (no `dir`: neither) and the HTML page at
/// `html` (when given) of `doc` with the questions of `flips` (of `dataset`).
pub fn write(
    dir: Option<&Path>,
    html: Option<&Path>,
    doc: &CompareJson,
    flips: &[FlipLine],
    dataset: &crate::types::Dataset,
) -> Result<()> {
    if let Some(dir) = dir {
        let mut out = Vec::new();
        for line in flips {
            // Strings and finite numbers: serializing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, line);
            out.push(b'\n');
        }
        crate::output_file::write_atomic(&dir.join("flips.jsonl"), &out)?;
        let json = doc.render(Format::Json);
        crate::output_file::write_atomic(&dir.join("compare.json"), json.as_bytes())?;
    }
    if let Some(path) = html {
        let flips: Vec<super::html::compare::FlipsOf<'_>> = doc
            .comparisons
            .iter()
            .map(|c| super::html::compare::FlipsOf {
                model: &c.model,
                lines: flips
                    .iter()
                    .filter(|l| l.model == c.model)
                    .map(|l| (&l.flip, &l.slices))
                    .collect(),
            })
            .collect();
        let page = super::html::compare::render(doc, &flips, dataset);
        crate::output_file::write_atomic(path, &page)?;
    }
    Ok(())
}
