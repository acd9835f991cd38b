//! `--metrics-url`, `--no-metrics`, `--metrics-interval-ms`: the flags' own checks
//! (the library reads the endpoints: `bertqa::metrics::MetricsOptions`).

use super::args::MetricsArgs;
use bertqa::backend::page;

/// Validates the flags (before any server is contacted).
pub(crate) fn check(args: &MetricsArgs) -> anyhow::Result<()> {
    if args.metrics_interval_ms == 0 {
        anyhow::bail!("--metrics-interval-ms must be at least 1");
    }
    for url in &args.metrics_url {
        page::page_url(url, false).map_err(|e| anyhow::anyhow!("--metrics-url {e}"))?;
    }
    Ok(())
}
