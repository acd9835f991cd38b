//! The connections of the HTTP client: TCP (hyper-util's connector), then for an
//! `https://` server a TLS handshake with bertqa's own rustls configuration
//! ([`security::tls`](crate::backend::security::tls), the same as gRPC's, offering
//! ALPN `http/1.1`), checking the server name it gives.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::backend::security::tls::{rustls_client_config, server_name};
use crate::backend::security::tls_errors::{handshake_error, TlsFailure};
use crate::backend::security::TlsConfig;
use crate::error::Result;

/// The ALPN protocol of HTTP/1.1.
const ALPN_HTTP1: &[u8] = b"http/1.1";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Opens plain-text or TLS connections to one server.
#[derive(Clone)]
pub(crate) struct Connector {
    tcp: HttpConnector,
    tls: Option<Tls>,
}

#[derive(Clone)]
struct Tls {
    config: Arc<TlsConfig>,
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl Connector {
    /// The connector for the server at `base` (`http://` or `https://host:port`); TLS
    /// with `tls`.
    pub(crate) fn new(
        base: &Uri,
        tls: Option<&TlsConfig>,
        connect_timeout: std::time::Duration,
    ) -> Result<Connector> {
        let mut tcp = HttpConnector::new();
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.enforce_http(false);
        let tls = match tls {
            Some(config) => Some(Tls {
                connector: tokio_rustls::TlsConnector::from(rustls_client_config(
                    config,
                    &[ALPN_HTTP1],
                )?),
                name: server_name(config, base.host().unwrap_or_default())?,
                config: Arc::new(config.clone()),
            }),
            None => None,
        };
        Ok(Connector { tcp, tls })
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = std::result::Result<Stream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), BoxError>> {
        self.tcp.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let tcp = self.tcp.call(uri);
        let tls = self.tls.clone();
        Box::pin(async move {
            let io = tcp.await?;
            let Some(tls) = tls else {
                return Ok(Stream::Plain(io));
            };
            let stream = tls
                .connector
                .connect(tls.name, io.into_inner())
                .await
                .map_err(|e| match handshake_error(&e, &tls.config) {
                    Some(sentence) => BoxError::from(TlsFailure(sentence)),
                    None => BoxError::from(e),
                })?;
            Ok(Stream::Tls(Box::new(TokioIo::new(stream))))
        })
    }
}

/// A connection, plain or TLS (boxed: a TLS session is large, and made once per
/// connection).
pub(crate) enum Stream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        match self {
            Stream::Plain(s) => s.connected(),
            Stream::Tls(s) => s.inner().get_ref().0.connected(),
        }
    }
}

impl Read for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}
