//! Triton's KServe v2 HTTP/REST protocol: one server's REST calls over HTTP/1.1
//! keep-alive connections (hyper-util's pooled client; TLS for `https://` with bertqa's
//! rustls configuration, `connect.rs`), their failures mapped into the
//! same [`Error`]s as gRPC's, and inference with the binary tensor data extension
//! ([`HttpTransport`]).
//!
//! Contract:
//! - Connections: the client opens one more connection whenever every open one is busy
//!   (an HTTP/1.1 connection carries one request at a time) and keeps them open between
//!   requests, so the requests in flight never queue behind one another; a connection
//!   the server closed is replaced on the next request.
//! - Every request carries the configured headers as plain HTTP headers (Triton's
//!   `--http-restricted-api` keys are such headers), and ends at the request deadline.
//! - Failures by meaning, as gRPC's: a refused, reset or closed connection and HTTP 502
//!   and 503 are [`Error::Unavailable`]; the deadline, HTTP 408 and 504 are
//!   [`Error::Timeout`]; HTTP 401 and 403 are [`Error::PermissionDenied`] (naming the
//!   headers sent, never their values); any other error status is [`Error::Server`]
//!   with the gRPC code of the same meaning first (`Internal (HTTP 500)`,
//!   `ResourceExhausted (HTTP 429)`), so that the retry policy classifies both
//!   protocols alike. The message is the answer's `{"error": "…"}` text, trimmed.
//! - A server that answers in HTTP/2 only (Triton's gRPC port) is named as such, with
//!   the flag to use.

mod connect;
mod infer;
mod json;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::de::DeserializeOwned;

use connect::Connector;
pub(crate) use infer::HttpTransport;

use super::api::ServerApi;
use super::extensions::{self, ServerInfo};
use super::peer::Peer;
use super::proto::repository_index_response::ModelIndex;
use super::proto::{ModelConfig, ModelMetadataResponse, ModelStatistics, ServerMetadataResponse};
use super::security::{self, tls_errors::TlsFailure};
use super::status::{cause_of, chain, root_cause};
use crate::error::{AnswerTo, Code, Error, Result, Unreachable};

/// The hint for a server that answers HTTP/1.1 requests in HTTP/2 only.
pub(crate) const GRPC_PORT_HINT: &str = "this looks like a gRPC port (HTTP/2 only): use \
     `Protocol::Grpc`, or Triton's HTTP port (usually 8000)";

/// Characters of a model name or region name that are escaped in a URL path.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

/// One server spoken to over HTTP/1.1 (TLS for an `https://` server, or with the
/// peer's TLS configuration). Cheap to clone: clones share the connections.
#[derive(Clone)]
pub(crate) struct HttpClient {
    hyper: Client<Connector, Full<Bytes>>,
    /// `http://host:port`, without a trailing slash.
    base: Arc<str>,
    /// The configured headers, values marked sensitive.
    headers: Arc<HeaderMap>,
    peer: Arc<Peer>,
}

/// An answer: its status, headers and whole body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("base", &self.base)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client of the server at `base` (`http://host:port` or `https://host:port`,
    /// perhaps with a base path every call goes under), sending `authority` as the
    /// `Host` of every request when given, with TLS when the peer has a TLS
    /// configuration. Nothing is sent until the first
    /// call; [`connect`](Self::connect) checks that the server is there. A TLS
    /// configuration that cannot serve (files) is an error naming the file.
    pub(crate) fn new(
        base: &str,
        authority: Option<&str>,
        connect_timeout: Duration,
        peer: Arc<Peer>,
    ) -> Result<HttpClient> {
        let base = base.trim_end_matches('/');
        let uri: http::Uri = base
            .parse()
            .map_err(|e| Error::Config(format!("{}: invalid URL: {e}", peer.url)))?;
        let connector = Connector::new(&uri, peer.tls.as_ref(), connect_timeout)?;
        let hyper = Client::builder(TokioExecutor::new()).build(connector);
        let mut headers = HeaderMap::new();
        for h in peer.headers.iter() {
            let (name, value) = h.to_http();
            headers.insert(name, value);
        }
        if let Some(authority) = authority {
            let value = HeaderValue::from_str(authority).map_err(|_| {
                Error::Config(format!("`authority` {authority:?} is not a valid Host"))
            })?;
            headers.insert(http::header::HOST, value);
        }
        Ok(HttpClient {
            hyper,
            base: base.into(),
            headers: Arc::new(headers),
            peer,
        })
    }

    /// [`new`](Self::new), then one request (`GET /v2/health/live`) within
    /// `connect_timeout`: a server that cannot be reached, or that does not speak
    /// HTTP/1.1, is an error now. Any HTTP answer will do (the health API may be
    /// restricted to a header this client does not send).
    pub(crate) async fn connect(
        base: &str,
        authority: Option<&str>,
        connect_timeout: Duration,
        peer: Arc<Peer>,
    ) -> Result<HttpClient> {
        let client = HttpClient::new(base, authority, connect_timeout, peer)?;
        match tokio::time::timeout(
            connect_timeout,
            client.call(Method::GET, "/v2/health/live", None),
        )
        .await
        {
            Ok(Ok(_)) => Ok(client),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::unavailable(
                &client.peer.url,
                Unreachable::ConnectTimeout,
                format!("no connection within {} ms", connect_timeout.as_millis()),
            )),
        }
    }

    /// Whether tensors go as binary data (Triton's extension, when the server lists it)
    /// rather than JSON numbers. The server's metadata is asked once per client.
    pub(crate) async fn binary_tensor_data(&self) -> Result<bool> {
        let info = self
            .peer
            .server
            .get_or_try_init(|| async {
                let answer = self.server_metadata().await;
                let answer = answer.map_err(|e| {
                    extensions::no_server(e, "server metadata", self.peer.routed_by.as_deref())
                });
                answer.map(ServerInfo::from)
            })
            .await?;
        Ok(info.lists(extensions::BINARY_TENSOR_DATA))
    }

    /// Sends one request and reads the whole answer, bounded by the request deadline.
    /// `body` is `(bytes, JSON header length)` for an inference request, or a JSON
    /// body for other POSTs (header length `None`).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(Vec<u8>, Option<usize>)>,
    ) -> Result<Answer> {
        let uri = format!("{}{path}", self.base);
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(headers) = builder.headers_mut() {
            headers.extend(self.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let body = match body {
            Some((bytes, Some(json_len))) => {
                builder = builder
                    .header(
                        CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    )
                    .header("inference-header-content-length", json_len);
                Full::new(Bytes::from(bytes))
            }
            Some((bytes, None)) => {
                builder =
                    builder.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let request = builder.body(body).map_err(|e| {
            Error::Config(format!("{}: invalid request {path}: {e}", self.peer.url))
        })?;
        let exchange = async {
            let response = self
                .hyper
                .request(request)
                .await
                .map_err(|e| self.transport_error(&e))?;
            let (parts, body) = response.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| self.transport_error(&e))?
                .to_bytes();
            Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(self.peer.request_timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(self.peer.timeout()),
        }
    }

    /// A failure to exchange a request and its answer, by meaning.
    fn transport_error(&self, e: &(dyn std::error::Error + 'static)) -> Error {
        let url = &self.peer.url;
        if let Some(failure) = chain(Some(e)).find_map(|s| s.downcast_ref::<TlsFailure>()) {
            return Error::unavailable(url, Unreachable::Transport, failure.to_string());
        }
        let cause = root_cause(e);
        let lower = cause.to_ascii_lowercase();
        // A gRPC server sends its HTTP/2 settings at once: hyper sees bytes before its
        // request went out, or a status line that is not HTTP/1.x. hyper's words: it
        // has no public test for either.
        let http2_only = lower.contains("invalid http version")
            || lower.contains("received unexpected message from connection");
        // The server closed the connection before answering, or while it was idle.
        let closed = chain(Some(e))
            .filter_map(|s| s.downcast_ref::<hyper::Error>())
            .any(|h| h.is_incomplete_message() || h.is_canceled());
        let error = if http2_only {
            Error::unavailable(
                url,
                Unreachable::WrongProtocol,
                format!("{cause} ({GRPC_PORT_HINT})"),
            )
        } else if closed {
            Error::unavailable(
                url,
                Unreachable::Closed,
                format!("connection closed by the server ({cause})"),
            )
        } else {
            Error::unavailable(url, cause_of(e), cause)
        };
        security::annotate(error, &self.peer.headers, self.peer.tls.as_ref())
    }

    /// An error status, by meaning (see the module's contract); `model` names the model
    /// of a model-specific call.
    pub(crate) fn status_error(
        &self,
        status: StatusCode,
        body: &[u8],
        model: Option<&str>,
    ) -> Error {
        let url = self.peer.url.clone();
        let message = json::error_text(body);
        let code = status.as_u16();
        let error = match code {
            401 | 403 => Error::PermissionDenied {
                url,
                message: format!("HTTP {code}: {message}"),
            },
            502 | 503 => Error::unavailable(
                url,
                Unreachable::Answered,
                format!("HTTP {code}: {message}"),
            ),
            408 | 504 => self.peer.timeout(),
            _ => Error::Server {
                server: None,
                url,
                code: match code {
                    400 => Code::InvalidArgument,
                    // A 404 in the protocol's error form is about something the call
                    // named (a model, a region); any other is a route the server does
                    // not have, gRPC's UNIMPLEMENTED.
                    404 if json::is_protocol_error(body) => Code::NotFound,
                    404 => Code::Unimplemented,
                    409 => Code::AlreadyExists,
                    429 => Code::ResourceExhausted,
                    500 => Code::Internal,
                    501 => Code::Unimplemented,
                    _ => Code::Unknown,
                },
                http: Some(code),
                model: model.map(str::to_string),
                message,
            },
        };
        security::annotate(error, &self.peer.headers, self.peer.tls.as_ref())
            .answered_by(self.peer.who())
    }

    /// A GET (or a POST of `body`) whose answer is JSON of type `T`.
    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        model: Option<&str>,
    ) -> Result<T> {
        let answer = self.call(method, path, body.map(|b| (b, None))).await?;
        if !answer.status.is_success() {
            return Err(self.status_error(answer.status, &answer.body, model));
        }
        json::read(&answer.body).map_err(|e| Error::InvalidAnswer {
            server: self.peer.who(),
            url: self.peer.url.clone(),
            answer: AnswerTo::Call { path: path.into() },
            message: e.to_string(),
        })
    }

    /// Whether a GET of `path` (about `model`, if any) answers 200; 400, 503 and a 404
    /// in the protocol's error form mean no (Triton's "not ready", an unknown model); a
    /// 404 of a route the server does not have and any other status are errors.
    async fn yes_or_no(&self, path: &str, model: Option<&str>) -> Result<bool> {
        let answer = self.call(Method::GET, path, None).await?;
        match answer.status.as_u16() {
            200 => Ok(true),
            400 | 503 => Ok(false),
            404 => {
                // "No such model" is a no; "no such route" is no answer at all.
                let e = self.status_error(answer.status, &answer.body, model);
                if extensions::absent(&e) {
                    Err(e)
                } else {
                    Ok(false)
                }
            }
            _ => Err(self.status_error(answer.status, &answer.body, model)),
        }
    }

    /// `GET /v2/models`: the names of the models the server has, in its order (KServe's
    /// model server; not a call of the protocol, and Triton's repository index, which
    /// has states and versions, is asked first). A server without the route answers as
    /// for an absent extension ([`extensions::absent`]).
    pub(crate) async fn model_names(&self) -> Result<Vec<String>> {
        let list: ModelNames = self.json(Method::GET, "/v2/models", None, None).await?;
        Ok(list.models)
    }

    /// `GET /v2/models/M/config` as the server wrote it, every field kept (`tune` loads
    /// it back as it was read).
    pub(crate) async fn model_config_json(&self, model: &str) -> Result<serde_json::Value> {
        let path = format!("{}/config", model_path(model, ""));
        self.json(Method::GET, &path, None, Some(model)).await
    }

    /// `POST /v2/repository/models/M/load`: (re)loads `model`, with `config` (a whole
    /// configuration, JSON text) as the override when given.
    pub(crate) async fn load_model(&self, model: &str, config: Option<&str>) -> Result<()> {
        let body = match config {
            Some(c) => serde_json::json!({"parameters": {"config": c}}),
            None => serde_json::json!({}),
        };
        let path = format!("/v2/repository/models/{}/load", segment(model));
        self.post_model(&path, body.to_string().into_bytes(), model)
            .await
    }

    /// `POST /v2/repository/models/M/unload`.
    pub(crate) async fn unload_model(&self, model: &str) -> Result<()> {
        let path = format!("/v2/repository/models/{}/unload", segment(model));
        self.post_model(&path, b"{}".to_vec(), model).await
    }

    async fn post_model(&self, path: &str, body: Vec<u8>, model: &str) -> Result<()> {
        let answer = self.call(Method::POST, path, Some((body, None))).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(self.status_error(answer.status, &answer.body, Some(model)))
        }
    }

    async fn post_ok(&self, path: &str, body: Vec<u8>) -> Result<()> {
        let answer = self.call(Method::POST, path, Some((body, None))).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(self.status_error(answer.status, &answer.body, None))
        }
    }
}

impl ServerApi for HttpClient {
    /// `GET /v2/health/live`.
    async fn server_live(&self) -> Result<bool> {
        self.yes_or_no("/v2/health/live", None).await
    }

    /// `GET /v2/health/ready`.
    async fn server_ready(&self) -> Result<bool> {
        self.yes_or_no("/v2/health/ready", None).await
    }

    /// `GET /v2/models/M[/versions/V]/ready`.
    async fn model_ready(&self, model: &str, version: &str) -> Result<bool> {
        self.yes_or_no(
            &format!("{}/ready", model_path(model, version)),
            Some(model),
        )
        .await
    }

    /// `GET /v2`.
    async fn server_metadata(&self) -> Result<ServerMetadataResponse> {
        let m: json::ServerMetadata = self.json(Method::GET, "/v2", None, None).await?;
        Ok(m.into())
    }

    /// `POST /v2/repository/index`: every model version and its state.
    async fn repository_index(&self) -> Result<Vec<ModelIndex>> {
        let index: Vec<json::IndexEntry> = self
            .json(
                Method::POST,
                "/v2/repository/index",
                Some(b"{}".to_vec()),
                None,
            )
            .await?;
        Ok(index.into_iter().map(Into::into).collect())
    }

    /// `GET /v2/models/M[/versions/V]`.
    async fn model_metadata(&self, model: &str, version: &str) -> Result<ModelMetadataResponse> {
        let m: json::ModelMetadata = self
            .json(Method::GET, &model_path(model, version), None, Some(model))
            .await?;
        Ok(m.into())
    }

    /// `GET /v2/models/M[/versions/V]/config`.
    async fn model_config(&self, model: &str, version: &str) -> Result<ModelConfig> {
        let path = format!("{}/config", model_path(model, version));
        let c: json::Config = self.json(Method::GET, &path, None, Some(model)).await?;
        Ok(c.into())
    }

    /// `GET /v2/models/M[/versions/V]/stats` (empty model: `/v2/models/stats`, all).
    async fn model_statistics(&self, model: &str, version: &str) -> Result<Vec<ModelStatistics>> {
        let (path, model) = if model.is_empty() {
            ("/v2/models/stats".to_string(), None)
        } else {
            (format!("{}/stats", model_path(model, version)), Some(model))
        };
        let s: json::Statistics = self.json(Method::GET, &path, None, model).await?;
        Ok(s.into())
    }

    /// `POST /v2/systemsharedmemory/region/R/register`.
    async fn register_system_shared_memory(
        &self,
        name: &str,
        key: &str,
        byte_size: u64,
    ) -> Result<()> {
        let body = serde_json::json!({"key": key, "offset": 0, "byte_size": byte_size});
        let path = format!("/v2/systemsharedmemory/region/{}/register", segment(name));
        self.post_ok(&path, body.to_string().into_bytes()).await
    }

    /// `POST /v2/systemsharedmemory/region/R/unregister`.
    async fn unregister_system_shared_memory(&self, name: &str) -> Result<()> {
        let path = format!("/v2/systemsharedmemory/region/{}/unregister", segment(name));
        self.post_ok(&path, Vec::new()).await
    }
}

/// `GET /v2/models`'s answer: `{"models": ["name", ...]}`.
#[derive(serde::Deserialize)]
struct ModelNames {
    models: Vec<String>,
}

/// `/v2/models/M` or `/v2/models/M/versions/V`.
fn model_path(model: &str, version: &str) -> String {
    if version.is_empty() {
        format!("/v2/models/{}", segment(model))
    } else {
        format!(
            "/v2/models/{}/versions/{}",
            segment(model),
            segment(version)
        )
    }
}

/// A name as one URL path segment.
fn segment(name: &str) -> impl std::fmt::Display + '_ {
    utf8_percent_encode(name, PATH_SEGMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> HttpClient {
        let peer = Arc::new(Peer {
            url: "h:8000".into(),
            request_timeout: Duration::from_millis(7),
            headers: Arc::from(Vec::new()),
            tls: None,
            server: Default::default(),
            routed_by: None,
        });
        HttpClient::new("http://h:8000/", None, Duration::from_secs(1), peer).unwrap()
    }

    #[test]
    fn paths_escape_names() {
        assert_eq!(model_path("tiny-bert", ""), "/v2/models/tiny-bert");
        assert_eq!(model_path("a b/c", "2"), "/v2/models/a%20b%2Fc/versions/2");
    }

    #[tokio::test]
    async fn statuses_map_to_the_errors_of_grpc() {
        let c = client();
        let body = br#"{"error":"injected fault: model exploded"}"#;
        let e = c.status_error(StatusCode::INTERNAL_SERVER_ERROR, body, Some("m"));
        assert!(
            matches!(
                &e,
                Error::Server { code: Code::Internal, http: Some(500), model: Some(m), message, .. }
                    if m == "m" && message == "injected fault: model exploded"
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "Triton at h:8000 answered Internal (HTTP 500) for model \"m\": injected fault: model exploded"
        );
        let e = c.status_error(StatusCode::SERVICE_UNAVAILABLE, b"{\"error\":\"x\"}", None);
        assert!(
            matches!(
                e,
                Error::Unavailable {
                    cause: Unreachable::Answered,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(e.server_message(), Some("HTTP 503: x"));
        let e = c.status_error(StatusCode::IM_A_TEAPOT, b"", None);
        assert!(
            matches!(
                e,
                Error::Server {
                    code: Code::Unknown,
                    http: Some(418),
                    ..
                }
            ),
            "{e}"
        );
        let e = c.status_error(StatusCode::GATEWAY_TIMEOUT, b"", None);
        assert!(matches!(e, Error::Timeout { timeout_ms: 7, .. }), "{e}");
        let e = c.status_error(
            StatusCode::FORBIDDEN,
            b"{\"error\":\"expecting header 'k'\"}",
            None,
        );
        assert!(matches!(e, Error::PermissionDenied { .. }), "{e}");
        let e = c.status_error(StatusCode::TOO_MANY_REQUESTS, b"slow down", None);
        assert_eq!(
            e.to_string(),
            "Triton at h:8000 answered ResourceExhausted (HTTP 429): slow down"
        );
    }
}
