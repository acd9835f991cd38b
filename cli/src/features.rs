//! `bertqa features`: one JSON line per feature on stdout (the CLI contract, README.md),
//! written by the library (`bertqa::features::json_lines`, whose documentation lists the
//! keys), with `--max-seq-length` the padded length.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use super::args::{Postprocess, TokenizerArgs, WindowArgs, INPUT};
use super::common::{feature_config, load_data, load_tokenizer, Outcome};
use bertqa::features::json_lines;

/// Build the features (windows) of a data file, one JSON line per feature; or convert
/// the data to SQuAD JSON (`--to squad`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Data: SQuAD JSON, Hugging Face rows (JSON Lines, Parquet) or MRQA, gzipped or
    /// not, - for stdin; repeat for several files read as one
    #[arg(long, value_name = "FILE", help_heading = INPUT, required = true, action = clap::ArgAction::Append)]
    pub data: Vec<PathBuf>,

    /// First N questions only
    #[arg(long, value_name = "N", help_heading = INPUT)]
    pub limit: Option<usize>,

    /// Write the data itself in this format instead of its features (squad: SQuAD JSON,
    /// for other tools)
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = INPUT)]
    pub to: Option<ConvertTo>,

    #[command(flatten)]
    pub tokenizer: TokenizerArgs,

    #[command(flatten)]
    pub window: WindowArgs,

    /// Windows of run_squad (nvidia, hf: the same windows) or of run_qa [default: run-qa
    /// for a tokenizer that is not WordPiece, else nvidia]
    #[arg(long, value_enum, help_heading = INPUT)]
    pub postprocess: Option<Postprocess>,
}

/// `--to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConvertTo {
    Squad,
}

pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.to == Some(ConvertTo::Squad) {
        let dataset = load_data(&args.data, args.window.strict, args.limit)?;
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        bertqa::data::write_squad(&dataset, &mut out).context("writing SQuAD JSON to stdout")?;
        out.flush().context("writing SQuAD JSON to stdout")?;
        return Ok(Outcome::Success);
    }
    let loaded = load_tokenizer(&args.tokenizer, args.postprocess)?;
    let config = feature_config(&args.window, loaded.postprocess, None)?;
    let dataset = load_data(&args.data, args.window.strict, args.limit)?;

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let featureless = json_lines(
        &dataset,
        loaded.tokenizer.as_ref(),
        loaded.postprocess,
        config,
    )?
    .write_to(&mut out)
    .context("writing features to stdout")?;
    for index in featureless {
        let example = &dataset.examples[index];
        let message = format!(
            "{} (question id {:?}): the context has no word pieces (only characters the \
             tokenizer removes), so the question gets no features and no answer \
             (docs/algorithm.md §10.18)",
            super::common::data_label(&args.data),
            example.qas_id
        );
        if args.window.strict {
            anyhow::bail!(message);
        }
        eprintln!("warning: {message}");
    }
    Ok(Outcome::Success)
}
