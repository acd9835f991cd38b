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
}

/// Writes `dir`'s compare.json and flips.jsonl (no `dir`: neither) and the HTML page at
/// `html` (when given) of `doc` with the questions of `flips`.
pub fn write(
    dir: Option<&Path>,
    html: Option<&Path>,
    doc: &CompareJson,
    flips: &[FlipLine],
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
        write_html(path, doc, flips)?;
    }
    Ok(())
}

/// Writes the HTML page of `doc` with the questions of `lines`.
fn write_html(path: &Path, doc: &CompareJson, lines: &[FlipLine]) -> Result<()> {
    let per_model: Vec<(String, Vec<crate::compare::Flip>)> = doc
        .comparisons
        .iter()
        .map(|c| {
            let flips = lines
                .iter()
                .filter(|l| l.model == c.model)
                .map(|l| l.flip.clone())
                .collect();
            (c.model.clone(), flips)
        })
        .collect();
    let flips: Vec<super::html::compare::FlipsOf<'_>> = per_model
        .iter()
        .map(|(model, flips)| super::html::compare::FlipsOf { model, flips })
        .collect();
    let page = super::html::compare::render(doc, &flips);
    crate::output_file::write_atomic(path, &page)
}
