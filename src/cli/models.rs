//! `bertqa models`.
use super::Outcome;
#[derive(Debug, clap::Args)]
pub struct Args {}
pub fn run(_args: Args) -> anyhow::Result<Outcome> {
    Ok(Outcome::Success)
}
