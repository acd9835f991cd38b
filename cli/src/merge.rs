//! `bertqa merge DIR... --output-dir D`: combines the output directories of
//! `eval --shard I/N` runs into the files a single run writes (`bertqa::shard::merge`,
//! whose documentation says what is checked and how).

use std::path::PathBuf;

use super::args::{FILES, OUTPUT, SCORING};
use super::common::Outcome;
use super::session::Session;

/// Combine `eval --shard I/N` output directories into one run's files and metrics.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shards' output directories (all N of them, any order)
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The SQuAD file, when it has moved since the shards ran (same contents)
    #[arg(long, value_name = "FILE", help_heading = FILES)]
    pub data: Option<PathBuf>,
    #[command(flatten, next_help_heading = SCORING)]
    pub scoring: super::args::ScoringArgs,
    /// Where the merged files are written
    #[arg(long, value_name = "DIR", help_heading = OUTPUT)]
    pub output_dir: PathBuf,
    /// Machine-readable JSON on stdout (the merged metrics.json)
    #[arg(long, help_heading = OUTPUT)]
    pub json: bool,
}

pub(crate) fn run(args: Args, session: &mut Session) -> anyhow::Result<Outcome> {
    // Held until the merge ends; before anything is read or written.
    let _dir = super::outdir::OutputDir::claim(&args.output_dir)?;
    if let Some(data) = &args.data {
        super::common::huge_pages_for(data);
    }
    let doc = bertqa::shard::merge(
        &args.dirs,
        args.data.as_deref(),
        args.scoring.na_prob_thresh,
        &args.output_dir,
    )?;
    for w in &doc.warnings {
        eprintln!("warning: {w}");
    }
    session.report(&doc, args.json)?;
    Ok(Outcome::Success)
}
