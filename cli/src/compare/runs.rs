//! `compare --runs DIR DIR... --data F`: finished runs compared without a server (a CI
//! job's run against a stored baseline): `ClientBuilder::compare_runs`, the windows of
//! the runs' saved logits cut again from the data with the tokenizer and window flags
//! given here. The report is the live comparison's, with the runs' directories under
//! `runs`.

use anyhow::bail;

use super::super::common::{data_label, load_data, pipeline_builder, Outcome};
use super::super::session::Session;
use super::{options, output, Args};

pub(super) fn run(args: &Args, session: &mut Session) -> anyhow::Result<Outcome> {
    if args.runs.len() < 2 {
        bail!(
            "--runs needs at least two finished runs to compare (got {})",
            args.runs.len()
        );
    }
    let dataset = load_data(&args.data, args.run.window.strict, args.limit)?;
    let data = bertqa::EvalData::new(dataset, data_label(&args.data), "", Default::default());
    let options = options(args, args.output_dir.clone());
    let compared = pipeline_builder(&args.run, "", "", &args.text)?
        .na_prob_thresh(args.scoring.na_prob_thresh)
        .compare_runs(&args.runs, &data, &options)?;
    output::report(args, session, &compared.report)
}
