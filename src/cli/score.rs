//! `bertqa score`: the offline evaluator. Reads a SQuAD file and a predictions file
//! (and optionally a na-prob file such as `null_odds.json`) and prints the official
//! SQuAD v1.1 or v2.0 metrics (algorithm §8), as a text table or, with `--json`, as
//! `{"schema": 1, "version", "metrics": {official keys}, "questions",
//! "missing_predictions": {"count", "first_ids"}, "unknown_predictions"}`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

use super::args::{FILES, OUTPUT, SCORING};
use super::common::Outcome;
use bertqa::evaluate::{self, ScoreConfig, Scores};

/// How many ids of questions without a prediction are named.
const FIRST_IDS: usize = 5;

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

pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
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
    if !scores.missing.is_empty() {
        eprintln!("warning: {}", missing_line(&scores));
    }
    let text = if args.json {
        render_json(&scores, v2, mrqa)
    } else {
        render_text(&scores, v2, mrqa)
    };
    super::common::print_stdout(&text)?;
    Ok(Outcome::Success)
}

fn version_name(v2: bool) -> &'static str {
    if v2 {
        "v2.0"
    } else {
        "v1.1"
    }
}

fn missing_line(s: &Scores) -> String {
    let first: Vec<String> = s
        .missing
        .iter()
        .take(FIRST_IDS)
        .map(|id| format!("{id:?}"))
        .collect();
    format!(
        "{} of {} questions have no prediction and score 0 (first: {}{})",
        s.missing.len(),
        s.questions.len(),
        first.join(", "),
        if s.missing.len() > FIRST_IDS {
            ", …"
        } else {
            ""
        }
    )
}

/// The `--json` document (`"rules": "mrqa"` for MRQA gold data).
pub(crate) fn render_json(s: &Scores, v2: bool, mrqa: bool) -> String {
    let mut doc = serde_json::json!({
        "schema": 1,
        "version": version_name(v2),
        "metrics": s.metrics.to_json(),
        "questions": s.questions.len(),
        "missing_predictions": {
            "count": s.missing.len(),
            "first_ids": s.missing.iter().take(FIRST_IDS).collect::<Vec<_>>(),
        },
        "unknown_predictions": s.unknown_predictions,
    });
    if mrqa {
        doc["rules"] = "mrqa".into();
    }
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

/// The text table: the official keys, their values as every text report shows them
/// (`--json` has them in full).
pub(crate) fn render_text(s: &Scores, v2: bool, mrqa: bool) -> String {
    let mut out = String::new();
    if mrqa {
        let _ = writeln!(
            out,
            "MRQA (the official MRQA evaluator's rules: SQuAD v1.1's), {} questions",
            s.questions.len()
        );
    } else {
        let _ = writeln!(
            out,
            "SQuAD {} (official evaluate-{} rules), {} questions",
            version_name(v2),
            version_name(v2),
            s.questions.len()
        );
    }
    out.push_str(&super::common::metric_lines(&s.metrics, "  "));
    if !s.missing.is_empty() {
        let _ = writeln!(out, "missing: {}", missing_line(s));
    }
    if s.unknown_predictions > 0 {
        let _ = writeln!(
            out,
            "ignored: {} predictions for ids not in the data file",
            s.unknown_predictions
        );
    }
    out
}
