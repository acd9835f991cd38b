//! What every comparison ends with, live or of finished runs: the statistics' and the
//! gates' flags, and the printed report.

use bertqa::report::compare::{CompareJson, GateJson, Gates};

use super::super::common::Outcome;
use super::super::session::Session;
use super::Args;

/// The gates the flags ask for.
pub(crate) fn gates(args: &Args) -> Gates {
    Gates {
        min_agreement: args.min_agreement,
        max_logit_diff: args.max_logit_diff,
        max_f1_drop: args.max_f1_drop,
        fail_on_significant_drop: args.fail_on_significant_drop,
        max_flip_rate: args.max_flip_rate,
        fail_if_concentrated: args.fail_if_concentrated,
    }
}

/// Prints the report and says how the gates went.
pub(crate) fn report(
    args: &Args,
    session: &mut Session,
    doc: &CompareJson,
) -> anyhow::Result<Outcome> {
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
