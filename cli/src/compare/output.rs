//! What every comparison ends with, live or of finished runs: the statistics' and the
//! gates' flags, and the printed report.

use bertqa::report::compare::{CompareJson, GateJson, Gates};

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

/// The gates the flags ask for.
pub(crate) fn gates(args: &Args) -> Gates {
    Gates {
        min_agreement: args.min_agreement,
        max_logit_diff: args.max_logit_diff,
        max_f1_drop: args.max_f1_drop,
        fail_on_significant_drop: args.fail_on_significant_drop,
        max_flip_rate: args.max_flip_rate,
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
