//! Which Prometheus endpoints a sweep reads ([`MetricsOptions`]), and starting to read
//! them: the endpoints given, else Triton's own on the host of the first server.

use std::sync::Arc;
use std::time::Duration;

use super::scraper::{Scraper, MOST_WAIT};
use super::{Choice, ModelKey};
use crate::backend::page::{self, PageClient};
use crate::backend::{ClientConfig, TritonClient};
use crate::error::Result;

/// Which Prometheus endpoints a sweep (`perf`, `tune`) reads while it runs, and how
/// often. By default Triton's own endpoint on the host of the first server, when the
/// server says it is Triton.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsOptions {
    /// These endpoints (`metrics_url`); empty: Triton's own.
    pub urls: Vec<String>,
    /// Read none (`no_metrics`); ignored when `urls` are given.
    pub off: bool,
    /// Between two readings (at least a millisecond).
    pub interval: Duration,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        MetricsOptions {
            urls: Vec::new(),
            off: false,
            interval: Duration::from_millis(1000),
        }
    }
}

/// Starts reading the metrics `options` ask for, of `model`: the endpoints given, else
/// (unless off) Triton's on the host of `first_url` when `client`'s server is Triton.
/// The choice's words for the report name settings.
pub(crate) async fn start(
    options: &MetricsOptions,
    config: &ClientConfig,
    first_url: &str,
    client: &TritonClient,
    model: ModelKey,
) -> Result<(Option<Arc<Scraper>>, Choice)> {
    let urls: Vec<String> = if !options.urls.is_empty() {
        options.urls.clone()
    } else if options.off {
        return Ok((None, Choice::NotRead("`no_metrics`".into())));
    } else {
        let info = client.server_info().await?;
        if !info.is_triton() {
            return Ok((
                None,
                Choice::NotRead(format!(
                    "{} is not Triton: give its Prometheus endpoint with `metrics_url`",
                    info.label()
                )),
            ));
        }
        vec![page::triton_metrics_url(
            first_url,
            config.security.tls.is_some(),
        )]
    };
    let interval = options.interval.max(Duration::from_millis(1));
    let wait = interval.min(MOST_WAIT);
    let endpoints = urls
        .iter()
        .map(|u| PageClient::new(u, config, wait))
        .collect::<Result<Vec<_>>>()?;
    let scraper = Scraper::start(endpoints, model, interval);
    let urls = scraper.urls();
    Ok((
        Some(Arc::new(scraper)),
        Choice::Read {
            urls,
            interval_ms: interval.as_millis() as u64,
        },
    ))
}
