//! A plain HTTP GET of one page beside the server (Triton's Prometheus `/metrics`), sent
//! with the server's TLS configuration and headers, so that a metrics endpoint behind
//! TLS or a key works with the flags of the server's.
//!
//! URLs: `HOST:PORT`, `http(s)://HOST:PORT[/PATH]`; without a path, `/metrics`;
//! without a scheme, `https://` when the server's configuration has TLS. The server's
//! `authority` is not sent: a metrics endpoint is reached by its own address.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};

use super::http::HttpClient;
use super::peer::Peer;
use super::security::TlsConfig;
use super::ClientConfig;
use crate::error::{Error, Result};

/// Triton's metrics port.
pub(crate) const TRITON_METRICS_PORT: u16 = 8002;

/// One page's address and the client that fetches it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PageClient {
    /// The URL as fetched (`http://host:port/metrics`), for messages.
    pub url: String,
    http: HttpClient,
}

impl PageClient {
    /// A client of `url` with `server`'s TLS and headers; each GET ends at `timeout`.
    pub fn new(url: &str, server: &ClientConfig, timeout: Duration) -> Result<PageClient> {
        let url = page_url(url, server.security.tls.is_some())?;
        let tls = match (&server.security.tls, url.starts_with("https://")) {
            (Some(tls), true) => Some(tls.clone()),
            (None, true) => Some(TlsConfig::default()),
            (_, false) => None,
        };
        let peer = Arc::new(Peer {
            url: url.clone(),
            request_timeout: timeout,
            headers: server.security.headers.clone().into(),
            tls,
            server: Default::default(),
            routed_by: None,
        });
        let http = HttpClient::new(&url, None, timeout, peer)?;
        Ok(PageClient { url, http })
    }

    /// The page's body; any status but 200 is an error naming it.
    pub(crate) async fn get(&self) -> Result<Bytes> {
        let answer = self.http.call(Method::GET, "", None).await?;
        if answer.status != StatusCode::OK {
            return Err(self.http.status_error(answer.status, &answer.body, None));
        }
        Ok(answer.body)
    }
}

/// `url` as `scheme://host:port/path` (see the module's contract).
pub fn page_url(url: &str, tls: bool) -> Result<String> {
    let trimmed = url.trim();
    let (scheme, rest) = if let Some(r) = trimmed.strip_prefix("http://") {
        ("http", r)
    } else if let Some(r) = trimmed.strip_prefix("https://") {
        ("https", r)
    } else if let Some((scheme, _)) = trimmed.split_once("://") {
        return Err(Error::Config(format!(
            "{url}: unsupported scheme {scheme:?} (use HOST:PORT or http://HOST:PORT/metrics)"
        )));
    } else if tls {
        ("https", trimmed)
    } else {
        ("http", trimmed)
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    if authority.is_empty() {
        return Err(Error::Config(format!("{url}: no host in the metrics URL")));
    }
    Ok(format!("{scheme}://{authority}{path}"))
}

/// Where Triton serves the metrics of the server at `server_url`: its host, port 8002,
/// `/metrics`, in the server's scheme.
pub fn triton_metrics_url(server_url: &str, tls: bool) -> String {
    let rest = server_url
        .trim()
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let authority = rest.split('/').next().unwrap_or(rest);
    // `[v6]:port`, `host:port` or `host`.
    let host = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => &authority[..i],
        _ => authority,
    };
    let https = tls || server_url.trim().starts_with("https://");
    let scheme = if https { "https" } else { "http" };
    format!("{scheme}://{host}:{TRITON_METRICS_PORT}/metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_get_a_scheme_and_the_metrics_path() {
        let u = |s: &str, tls: bool| page_url(s, tls).unwrap();
        assert_eq!(u("localhost:8002", false), "http://localhost:8002/metrics");
        assert_eq!(u("localhost:8002", true), "https://localhost:8002/metrics");
        assert_eq!(u("http://h:9/m", true), "http://h:9/m");
        assert_eq!(u("https://h/metrics", false), "https://h/metrics");
        assert!(page_url("ftp://h", false).is_err());
        assert!(page_url("http:///metrics", false).is_err());
    }

    #[test]
    fn triton_serves_metrics_on_port_8002_of_the_servers_host() {
        assert_eq!(
            triton_metrics_url("127.0.0.1:8001", false),
            "http://127.0.0.1:8002/metrics"
        );
        assert_eq!(
            triton_metrics_url("https://triton.example/v2", false),
            "https://triton.example:8002/metrics"
        );
        assert_eq!(
            triton_metrics_url("[::1]:8001", true),
            "https://[::1]:8002/metrics"
        );
        assert_eq!(
            triton_metrics_url("gpu-box", false),
            "http://gpu-box:8002/metrics"
        );
    }
}
