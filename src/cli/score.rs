//! `bertqa score` (being written by the decoding/evaluator work).

use super::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// SQuAD-format file.
    #[arg(long)]
    pub data: std::path::PathBuf,
}

pub fn run(_args: Args) -> anyhow::Result<Outcome> {
    anyhow::bail!("bertqa score: not built yet")
}
