//! Server URLs as users write them (`HOST`, `HOST:PORT`, `http(s)://HOST[:PORT][/PATH]`)
//! and the URI every call is made against.
//!
//! A port is added to the authority only, and only when there is none: the scheme's (80
//! for `http://`, 443 for `https://`) when the URL has a scheme, the protocol's (Triton's
//! 8001 for gRPC, 8000 for HTTP) for a bare host. Over HTTP a path is the base every call
//! goes under (`http://gateway/seldon/ns/bert` → `…/seldon/ns/bert/v2/models/M/infer`, with
//! or without a trailing slash: Seldon Core and API gateways route so); gRPC calls go to
//! fixed paths, so a gRPC URL with a path is refused.

use super::protocol::Protocol;
use crate::error::{Error, Result};

/// `url` as `scheme://host:port[/path]` (no trailing slash): `https://` turns TLS on.
pub(crate) fn normalize_url(url: &str, protocol: Protocol) -> Result<String> {
    let trimmed = url.trim();
    let (scheme, explicit, rest) = if let Some(r) = trimmed.strip_prefix("http://") {
        ("http", true, r)
    } else if let Some(r) = trimmed.strip_prefix("https://") {
        ("https", true, r)
    } else if let Some((scheme, _)) = trimmed.split_once("://") {
        return Err(Error::Config(format!(
            "{url}: unsupported scheme {scheme:?} (use HOST:PORT or http://HOST:PORT)"
        )));
    } else {
        ("http", false, trimmed)
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return Err(Error::Config(if trimmed.is_empty() {
            "empty server URL".into()
        } else {
            format!("{url}: no host in the server URL")
        }));
    }
    if !path.is_empty() && protocol == Protocol::Grpc {
        return Err(Error::Config(format!(
            "{url}: a gRPC server URL has no path (gRPC calls go to fixed paths): \
             give HOST:PORT, and route by host name with `authority`; a path prefix \
             needs `Protocol::Http`"
        )));
    }
    let port = match (explicit, scheme) {
        (false, _) => protocol.default_port(),
        (true, "https") => 443,
        (true, _) => 80,
    };
    let authority = if has_port(authority) {
        authority.to_string()
    } else {
        format!("{authority}:{port}")
    };
    Ok(format!("{scheme}://{authority}{path}"))
}

/// Whether an authority (`host:port`, `[v6]:port`, `host`) names a port.
fn has_port(authority: &str) -> bool {
    authority.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.ends_with('[') && port.parse::<u16>().is_ok()
    })
}

/// The host of a URL as [`normalize_url`] accepts it (over HTTP, so a path is allowed),
/// without brackets or port.
fn host(url: &str) -> Option<String> {
    let uri = normalize_url(url, Protocol::Http).ok()?;
    let rest = uri.split_once("://").map_or(uri.as_str(), |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => authority,
    };
    Some(
        host.trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
    )
}

/// Whether `url` names a loopback host (`localhost`, 127.0.0.0/8, `::1`).
pub(crate) fn is_loopback_url(url: &str) -> bool {
    let Some(host) = host(url) else {
        return false;
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Server addresses as `--url` takes them: comma lists split, each trimmed, empty ones
/// dropped, each address once, in the order given.
pub fn distinct_urls<S: AsRef<str>>(urls: &[S]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for url in urls
        .iter()
        .flat_map(|u| u.as_ref().split(','))
        .map(str::trim)
    {
        if !url.is_empty() && !out.iter().any(|u| u == url) {
            out.push(url.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_go_on_the_authority_only_when_there_is_none() {
        let grpc = |u| normalize_url(u, Protocol::Grpc).unwrap();
        let http = |u| normalize_url(u, Protocol::Http).unwrap();
        assert_eq!(grpc("localhost:8001"), "http://localhost:8001");
        assert_eq!(grpc("http://10.0.0.1:9"), "http://10.0.0.1:9");
        assert_eq!(grpc("http://h:1/"), "http://h:1");
        assert_eq!(grpc("[::1]:8001"), "http://[::1]:8001");
        assert_eq!(
            grpc("https://triton.example:443"),
            "https://triton.example:443"
        );
        // A bare host gets Triton's port for the protocol; a scheme gets the scheme's.
        assert_eq!(grpc("triton"), "http://triton:8001");
        assert_eq!(http("triton"), "http://triton:8000");
        assert_eq!(grpc("https://h"), "https://h:443");
        assert_eq!(http("http://h"), "http://h:80");
        assert_eq!(http("http://h:8001"), "http://h:8001");
        assert!(normalize_url("ftp://h:1", Protocol::Grpc).is_err());
        assert!(normalize_url("", Protocol::Grpc).is_err());
        assert!(normalize_url("http:///v2", Protocol::Http).is_err());
    }

    #[test]
    fn a_path_is_the_base_of_every_http_call() {
        let http = |u| normalize_url(u, Protocol::Http).unwrap();
        assert_eq!(
            http("http://gateway/seldon/ns/bert"),
            "http://gateway:80/seldon/ns/bert"
        );
        assert_eq!(
            http("http://gateway/seldon/ns/bert/"),
            "http://gateway:80/seldon/ns/bert"
        );
        assert_eq!(http("https://gw:8443/a"), "https://gw:8443/a");
        assert_eq!(http("gw/a/b"), "http://gw:8000/a/b");
        let e = normalize_url("http://gw/seldon/ns/bert", Protocol::Grpc).unwrap_err();
        assert!(
            e.to_string().contains("a gRPC server URL has no path"),
            "{e}"
        );
    }

    #[test]
    fn loopback_hosts() {
        for url in [
            "localhost:8001",
            "http://LOCALHOST",
            "127.0.0.1:18521",
            "http://127.3.2.1:1/",
            "[::1]:8001",
            "https://[::1]",
            "http://127.0.0.1:8000/prefix",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "10.0.0.1:8001",
            "example.com:8001",
            "http://[::2]:8001",
            "localhost.example.com",
            "ftp://127.0.0.1",
            "",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
