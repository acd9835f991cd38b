//! `bertqa score`: the offline evaluator. Reads a SQuAD file and a predictions file
//! (and optionally a na-prob file such as `null_odds.json`) and prints the official
//! SQuAD v1.1 or v2.0 metrics (algorithm §8), as a text table or, with `--json`, as
//! `{"schema": 1, "version", "metrics": {official keys}, "questions",
//! "missing_predictions": {"count", "first_ids"}, "unknown_predictions"}`
//! (`bertqa::report::score`, `schema/score.schema.json`).

use std::path::PathBuf;

use anyhow::Context as _;

use super::args::{FILES, OUTPUT, SCORING};
use super::common::Outcome;
use super::session::Session;
use bertqa::evaluate::{self, ScoreConfig};
use bertqa::report::score::{Rules, ScoreJson, SquadVersion};

/// Score a predictions file with the official SQuAD evaluators (v1.1 or v2.0 by the data
/// file). Unlike the v2.0 script, a question without a prediction scores 0 and is named.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Gold data: SQuAD JSON, Hugging Face rows or MRQA (gzipped or not); repeatable
    #[arg(long, value_name = "PATH", help_heading = FILES, required = true, action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,
    /// Answers by question id, as in predictions.json
    #[arg(long, value_name = "PATH", help_heading = FILES)]
    pub predictions: PathBuf,
    /// SQuAD 2.0: no-answer odds by question id, as in null_odds.json
    #[arg(long, value_name = "PATH", help_heading = FILES)]
    pub na_prob_file: Option<PathBuf>,
    /// SQuAD 2.0 rules (no answer allowed); on by itself for a v2 file
    #[arg(long, help_heading = SCORING)]
    pub version_2_with_negative: bool,
    #[command(flatten, next_help_heading = SCORING)]
    pub scoring: super::args::ScoringArgs,
    /// Machine-readable JSON on stdout ("schema": 1)
    #[arg(long, help_heading = OUTPUT)]
    pub json: bool,
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    let (loaded, format) = bertqa::data::load(&args.data, false)?;
    let mrqa = format == bertqa::data::Format::Mrqa;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let dataset = loaded.dataset;
    let v2 = args.version_2_with_negative || dataset.looks_like_v2();
    if args.na_prob_file.is_some() && !v2 {
        anyhow::bail!(
            "--na-prob-file needs the SQuAD 2.0 rules, but {} looks like SQuAD v1.1 \
             (pass --version-2-with-negative to force them)",
            super::common::data_label(&args.data)
        );
    }
    if !args.scoring.na_prob_thresh.is_finite() {
        anyhow::bail!("--na-prob-thresh must be a finite number");
    }
    let predictions = evaluate::read_predictions(&args.predictions)?;
    let na_probs = match &args.na_prob_file {
        Some(p) => Some(evaluate::read_na_probs(p)?),
        None => None,
    };
    let config = ScoreConfig {
        version_2_with_negative: v2,
        na_prob_thresh: args.scoring.na_prob_thresh,
    };
    let scores = evaluate::score(&dataset, &predictions, na_probs.as_ref(), &config)
        .with_context(|| format!("scoring {}", args.predictions.display()))?;
    let report = ScoreJson::new(&scores, SquadVersion::new(v2), mrqa.then_some(Rules::Mrqa));
    if let Some(line) = report.missing_line() {
        eprintln!("warning: {line}");
    }
    session.report(&report, args.json)?;
    Ok(Outcome::Success)
}
