//! The servers a sweep loads: one client per server (`--url`, repeated). Requests go to
//! them in turn, each request to one server, without retries (an error is a figure of the
//! sweep); the servers' statistics are summed.

use crate::backend::TritonClient;
use crate::error::{Error, Result};
use crate::metrics::ServerCounters;

/// One or more servers of the same model.
#[derive(Debug, Clone)]
pub struct Servers {
    clients: Vec<TritonClient>,
}

impl Servers {
    /// The servers of `clients` (at least one).
    pub fn new(clients: Vec<TritonClient>) -> Result<Servers> {
        if clients.is_empty() {
            return Err(Error::Config("no server URL given".into()));
        }
        Ok(Servers { clients })
    }

    /// One server.
    pub fn one(client: TritonClient) -> Servers {
        Servers {
            clients: vec![client],
        }
    }

    /// The first server: the one a single-server setting (shared memory) talks to.
    pub fn first(&self) -> &TritonClient {
        &self.clients[0]
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Always false: there is at least one server.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The servers' addresses, in order.
    pub fn urls(&self) -> Vec<&str> {
        self.clients.iter().map(|c| c.url()).collect()
    }

    /// The server of the `n`-th request: each in turn.
    pub(crate) fn pick(&self, n: usize) -> &TritonClient {
        &self.clients[n % self.clients.len()]
    }

    /// The model's statistics summed over the servers (`None`: a server does not report
    /// them).
    pub(crate) async fn statistics(
        &self,
        model: &str,
        version: &str,
    ) -> Result<Option<ServerCounters>> {
        let mut total: Option<ServerCounters> = None;
        for client in &self.clients {
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
