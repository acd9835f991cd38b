//! What every comparison ends with, live or of finished runs: each model against the
//! first as the report gives it, the gates, and the files (`compare.json`,
//! `flips.jsonl`, the `--html` page) and the printed report.

use std::path::Path;

use bertqa::report::compare::{CompareJson, ComparisonJson, GateJson, Gates, StatisticsJson};
use bertqa::report::{Format, Render as _};

use super::super::common::Outcome;
use super::super::session::Session;
use super::Args;

/// How the intervals and p-values are drawn.
#[derive(Debug, Clone, clap::Args)]
pub struct StatisticsArgs {
    /// Bootstrap resamples of the questions for each interval (also the rounds of F1's
    /// randomization test)
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub bootstrap: u64,
    /// Seed of the resampling (the same seed gives the same intervals on every machine)
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Coverage of the intervals, between 0 and 1
    #[arg(long, default_value_t = 0.95, value_name = "C", value_parser = confidence)]
    pub confidence: f64,
}

impl StatisticsArgs {
    pub(crate) fn statistics(&self) -> bertqa::compare::Statistics {
        bertqa::compare::Statistics {
            rounds: self.bootstrap as usize,
            seed: self.seed,
            confidence: self.confidence,
        }
    }
}

fn confidence(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        Ok(_) => Err("give a fraction between 0 and 1 (0.95 for 95%)".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The statistics' settings as the report gives them.
pub(crate) fn statistics_json(args: &StatisticsArgs) -> StatisticsJson {
    StatisticsJson {
        bootstrap: args.bootstrap as usize,
        seed: args.seed,
        confidence: args.confidence,
        p_values_corrected: false,
    }
}

/// A line of flips.jsonl: a question that flipped from the first model to `model`.
#[derive(serde::Serialize)]
pub(crate) struct FlipLine {
    pub(crate) model: String,
    pub(crate) against: String,
    #[serde(flatten)]
    pub(crate) flip: bertqa::compare::Flip,
}

/// Writes DIR/flips.jsonl: every flipped question of every comparison.
pub(crate) fn write_flips(dir: &std::path::Path, lines: &[FlipLine]) -> bertqa::Result<()> {
    let mut out = Vec::new();
    for line in lines {
        // Strings and finite numbers: serializing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, line);
        out.push(b'\n');
    }
    bertqa::output_file::write_atomic(&dir.join("flips.jsonl"), &out)
}

/// Writes the `--html` page of `doc` with the questions of `lines`.
pub(crate) fn write_html(
    path: &std::path::Path,
    doc: &CompareJson,
    lines: &[FlipLine],
) -> bertqa::Result<()> {
    let per_model: Vec<(String, Vec<bertqa::compare::Flip>)> = doc
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
    let flips: Vec<bertqa::report::html::compare::FlipsOf<'_>> = per_model
        .iter()
        .map(|(model, flips)| bertqa::report::html::compare::FlipsOf { model, flips })
        .collect();
    let page = bertqa::report::html::compare::render(doc, &flips);
    bertqa::output_file::write_atomic(path, &page)
}

/// The gates the flags ask for on one comparison of `questions`, and how they went.
pub(crate) fn gates_of(args: &Args, c: &ComparisonJson, questions: usize) -> Vec<GateJson> {
    let gates = Gates {
        min_agreement: args.min_agreement,
        max_logit_diff: args.max_logit_diff,
        max_f1_drop: args.max_f1_drop,
        fail_on_significant_drop: args.fail_on_significant_drop,
        max_flip_rate: args.max_flip_rate,
    };
    gates.check(c, questions)
}

/// Writes the report's files (`dir`: compare.json and flips.jsonl; `--html`'s page),
/// prints it, and says how the gates went.
pub(crate) fn finish(
    args: &Args,
    session: &mut Session,
    dir: Option<&Path>,
    doc: &CompareJson,
    flipped: &[FlipLine],
) -> anyhow::Result<Outcome> {
    let json = doc.render(Format::Json);
    if let Some(dir) = dir {
        write_flips(dir, flipped)?;
        bertqa::output_file::write_atomic(&dir.join("compare.json"), json.as_bytes())?;
    }
    if let Some(path) = &args.html {
        write_html(path, doc, flipped)?;
    }
    session.report(doc, args.run.output.json)?;
    let failed: Vec<String> = doc
        .gates
        .iter()
        .filter(|g| !g.passed)
        .map(GateJson::describe)
        .collect();
    Ok(if failed.is_empty() {
        Outcome::Success
    } else {
        Outcome::GateFailed(failed)
    })
}
