//! `--metrics-url`, `--no-metrics`, `--metrics-interval-ms`: which Prometheus endpoints
//! a run reads, and the words its report gives for that choice.

use std::sync::Arc;
use std::time::Duration;

use super::args::{MetricsArgs, ServerArgs};
use bertqa::backend::page::{self, PageClient};
use bertqa::metrics::scraper::{Scraper, MOST_WAIT};
use bertqa::metrics::{Choice, ModelKey};
use bertqa::TritonClient;

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

/// Starts reading the metrics, when the flags and the server call for it:
/// `--metrics-url` always; otherwise, given the `client` of a command that reads them
/// by default (`perf`), Triton's endpoint on the host of `--url` unless
/// `--no-metrics`. Must run inside the runtime.
pub(crate) async fn start(
    args: &MetricsArgs,
    server: &ServerArgs,
    by_default: Option<&TritonClient>,
    model: ModelKey,
) -> anyhow::Result<(Option<Arc<Scraper>>, Choice)> {
    let config = super::common::client_config(server)?;
    let urls: Vec<String> = if !args.metrics_url.is_empty() {
        args.metrics_url.clone()
    } else if args.no_metrics {
        return Ok((None, Choice::NotRead("--no-metrics".into())));
    } else if let Some(client) = by_default {
        match client.server_info().await {
            Ok(info) if info.is_triton() => vec![page::triton_metrics_url(
                server.first_url(),
                config.security.tls.is_some(),
            )],
            Ok(info) => {
                return Ok((
                    None,
                    Choice::NotRead(format!(
                        "{} is not Triton: give its Prometheus endpoint with --metrics-url",
                        info.label()
                    )),
                ))
            }
            Err(e) => return Err(e.into()),
        }
    } else {
        return Ok((None, Choice::NotRead("no --metrics-url".into())));
    };
    let interval = Duration::from_millis(args.metrics_interval_ms);
    let wait = interval.min(MOST_WAIT);
    let endpoints = urls
        .iter()
        .map(|u| PageClient::new(u, &config, wait))
        .collect::<bertqa::Result<Vec<_>>>()?;
    let scraper = Scraper::start(endpoints, model, interval);
    let urls = scraper.urls();
    Ok((
        Some(Arc::new(scraper)),
        Choice::Read {
            urls,
            interval_ms: args.metrics_interval_ms,
        },
    ))
}
