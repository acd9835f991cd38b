//! The servers a sweep loads: one connection per server (`--url`, repeated), each a
//! [`Pool`] of one endpoint without retries (an error is a figure of the sweep), so
//! that a sweep sends through [`Infer`](crate::backend::Infer) as a run does. Requests
//! go to the servers in turn, each request to one server; the servers' statistics are
//! summed.

use crate::backend::{distinct_urls, ClientConfig, Pool};
use crate::error::{Error, Result};
use crate::metrics::ServerCounters;

/// One or more servers of the same model.
#[derive(Debug, Clone)]
pub struct Servers {
    pools: Vec<Pool>,
    urls: Vec<String>,
}

impl Servers {
    /// Connects to each of `urls` (each address once) with `client`'s settings (its
    /// `url` is ignored).
    pub async fn connect(urls: &[String], client: &ClientConfig) -> Result<Servers> {
        let mut pools = Vec::new();
        for url in distinct_urls(urls) {
            let config = ClientConfig {
                url,
                ..client.clone()
            };
            pools.push(Pool::single(&config).await?);
        }
        Servers::new(pools)
    }

    /// The servers of `pools` (at least one), each of one endpoint.
    pub(crate) fn new(pools: Vec<Pool>) -> Result<Servers> {
        if pools.is_empty() {
            return Err(Error::Config("no server URL given".into()));
        }
        let urls = pools
            .iter()
            .map(|p| p.first_client().url().to_string())
            .collect();
        Ok(Servers { pools, urls })
    }

    /// One server.
    pub(crate) fn one(pool: Pool) -> Servers {
        Servers {
            urls: vec![pool.first_client().url().to_string()],
            pools: vec![pool],
        }
    }

    /// The first server: the one a single-server setting (shared memory) talks to.
    pub(crate) fn first(&self) -> &Pool {
        &self.pools[0]
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.pools.len()
    }

    /// Always false: there is at least one server.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The servers' addresses, in order.
    pub fn urls(&self) -> Vec<&str> {
        self.urls.iter().map(String::as_str).collect()
    }

    /// The server of the `n`-th request, each in turn, and its address.
    pub(crate) fn pick(&self, n: usize) -> (&Pool, &str) {
        let i = n % self.pools.len();
        (&self.pools[i], &self.urls[i])
    }

    /// The model's statistics summed over the servers (`None`: a server does not report
    /// them).
    pub(crate) async fn statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Option<ServerCounters>> {
        let mut total: Option<ServerCounters> = None;
        for pool in &self.pools {
            let client = pool.first_client();
            let Some(stats) = client.model_statistics_if_any(model, version).await? else {
                return Ok(None);
            };
            let counters = ServerCounters::from_stats(&stats);
            total = Some(match total {
                Some(t) => t.plus(&counters),
                None => counters,
            });
        }
        Ok(total)
    }
}
