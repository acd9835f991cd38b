//! `bertqa features` (being written by the tokenizer/features work).

use super::Outcome;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// SQuAD-format file.
    #[arg(long)]
    pub data: std::path::PathBuf,
}

pub fn run(_args: Args) -> anyhow::Result<Outcome> {
    anyhow::bail!("bertqa features: not built yet")
}
