//! The HTTP clients that carry upstream traffic, per `[route.upstream]
//! http2`: which HTTP version, how many idle connections are kept, and which
//! sessions get a connection of their own.
//!
//! hyper-util's client, not reqwest's: redmark sends one POST to a URL it
//! parsed once and reads the body itself, so reqwest's layers (its redirect
//! and retry towers, the URL it parses again for every request, the response
//! wrapper that keeps a copy of it) were about 30k instructions of a
//! passthrough call and a part of every waiting call's memory
//! (`benches/WHERE_THE_TIME_GOES.md`).
//!
//! `http://` upstreams spoken to over HTTP/1.1 (most servers behind a
//! gateway, on its own network) skip hyper-util's pool for redmark's own
//! ([`plain_h1`]); TLS and HTTP/2 keep hyper-util's.
//!
//! HTTP/2 multiplexes, so a hold-mode call waiting for a person is one stream
//! instead of one HTTP/1.1 connection (its socket, buffers and connection
//! task). But hyper's client never opens a second HTTP/2 connection to a host
//! (RFC 9113 section 9.1: "Clients SHOULD NOT open more than one HTTP/2
//! connection to a given host and port pair"): once the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` are all held by waiting calls, every
//! further request, the answers that would release them included, queues
//! behind them. So a session that may speak HTTP/2 gets a client (hence a
//! connection) of its own, and its streams are bounded by the pool's
//! `max_operations_per_session` plus the few short requests beside them.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::config::UpstreamHttp2;

mod plain_h1;

use plain_h1::PlainH1;
pub use plain_h1::ResponseBody;

/// Idle keep-alive connections kept per upstream host and client, at most.
pub const IDLE_CONNECTIONS: usize = 64;

/// Idle HTTP/1.1 connections a session's own client keeps (an `https://`
/// server that did not agree on `h2`): the session's short requests reuse
/// them; its calls in flight hold their own.
pub const SESSION_IDLE_CONNECTIONS: usize = 4;

/// How long an idle upstream connection is kept for reuse.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an HTTP/2 connection with streams open is pinged, so a peer that
/// vanished without a FIN is noticed while calls wait on it for minutes.
const H2_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(30);
const H2_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keep-alive probes on idle upstream sockets (reqwest's default, kept).
const TCP_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The TLS settings of every upstream client: rustls with the platform's
/// verifier (the system's roots), as reqwest had. Built once.
static TLS: LazyLock<Result<rustls::ClientConfig, String>> = LazyLock::new(|| {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .and_then(|b| {
            use rustls_platform_verifier::BuilderVerifierExt;
            b.with_platform_verifier().map_err(|e| e.to_string())
        })
        .map(rustls::ConfigBuilder::<rustls::ClientConfig, _>::with_no_client_auth)
        .map_err(|e| format!("the TLS settings for upstream servers cannot be built: {e}"))
});

type Inner = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A pool of upstream connections (cheap to clone: clones share the pool).
/// Behind an `Arc`: hyper-util's client is about 500 bytes of settings, and
/// every session and call in flight holds one.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Clients>,
}

/// One client off the event loops, and (a route's shared client) one per
/// loop, made on first use: a pooled connection's task runs on the loop
/// that opened it, so a request from another loop would wake that loop's
/// thread twice (`crate::event_loops`).
struct Clients {
    off_loop: Inner,
    per_loop: Box<[std::sync::OnceLock<Inner>]>,
    /// `http://` over HTTP/1.1 ([`plain_h1`]): off the loops, and one per loop.
    plain_off_loop: Arc<PlainH1>,
    plain_per_loop: Box<[Arc<PlainH1>]>,
    http2: UpstreamHttp2,
    idle: usize,
}

impl Clients {
    /// The plain HTTP/1.1 pool of this event loop, when `uri` goes through one.
    fn plain_here(&self, uri: &Uri) -> Option<&Arc<PlainH1>> {
        if self.http2 == UpstreamHttp2::PriorKnowledge
            || uri.scheme() != Some(&http::uri::Scheme::HTTP)
        {
            return None;
        }
        let here = crate::event_loops::current().and_then(|i| self.plain_per_loop.get(i));
        Some(here.unwrap_or(&self.plain_off_loop))
    }

    fn here(&self) -> &Inner {
        let Some(slot) = crate::event_loops::current().and_then(|i| self.per_loop.get(i)) else {
            return &self.off_loop;
        };
        // Made as the first one was, so it cannot fail; if it did, the
        // off-loop client still carries the request.
        if let Some(c) = slot.get() {
            return c;
        }
        match build_one(self.http2, self.idle) {
            Ok(c) => slot.get_or_init(|| c),
            Err(_) => &self.off_loop,
        }
    }
}

/// Why a request got no response head: connecting, writing or reading the
/// head failed. The text names every cause.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(String);

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl HttpClient {
    /// Sends one request; the body of the response is the caller's to read.
    pub async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<http::Response<ResponseBody>, ClientError> {
        let mut req = http::Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.headers_mut() = headers;
        if let Some(plain) = self.inner.plain_here(&url.uri) {
            // What hyper-util would add, made once with the URL: the
            // origin-form target, the `Host`.
            *req.uri_mut() = url.origin.clone();
            if let http::header::Entry::Vacant(host) = req.headers_mut().entry(http::header::HOST)
                && let Some(value) = &url.host
            {
                host.insert(value.clone());
            }
            return plain.send(&url.uri, req).await;
        }
        *req.uri_mut() = url.uri.clone();
        let resp = self
            .inner
            .here()
            .request(req)
            .await
            .map_err(|e| ClientError(causes(&e)))?;
        Ok(resp.map(ResponseBody::of))
    }
}

/// `uri` as an HTTP/1.1 request target: its path and query only (RFC 9112
/// section 3.2.1), `/` for none.
fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

/// `host[:port]` of `uri`, the port only when it is not the scheme's default
/// (as hyper-util writes it).
fn host_value(uri: &Uri) -> Option<http::HeaderValue> {
    let host = uri.host()?;
    let default_port = match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    };
    let text = match uri.port_u16() {
        Some(port) if Some(port) != default_port => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    http::HeaderValue::from_str(&text).ok()
}

/// An error and its sources, one after the other: hyper-util's own text
/// ("client error (Connect)") alone does not say what failed.
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// Why a response body could not be read whole.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("upstream message larger than {0} bytes")]
    TooLarge(usize),
    #[error("reading upstream body: {0}")]
    Broken(String),
}

/// Reads a whole body, refusing one larger than `limit` bytes as soon as it is.
pub async fn read_limited(mut body: ResponseBody, limit: usize) -> Result<Vec<u8>, BodyError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Broken(causes(&e)))?;
        let Ok(chunk) = frame.into_data() else {
            continue; // trailers
        };
        if out.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The next data chunk of a streamed body (an SSE stream); `None` at its
/// end, `Err` when it broke.
pub async fn next_chunk(body: &mut ResponseBody) -> Option<Result<Bytes, String>> {
    loop {
        match body.frame().await? {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    return Some(Ok(data));
                }
            }
            Err(e) => return Some(Err(causes(&e))),
        }
    }
}

/// Whether a response's `Content-Type` is an SSE stream.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// An upstream URL, parsed once for every request of a session or route,
/// with what an HTTP/1.1 request to it needs made once too: the
/// origin-form target and the `Host` value (hyper-util formatted both on
/// every request, about 2k instructions a call).
#[derive(Debug, Clone)]
pub struct Url {
    uri: Uri,
    origin: Uri,
    host: Option<http::HeaderValue>,
}

impl Url {
    pub fn uri(&self) -> &Uri {
        &self.uri
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.uri.fmt(f)
    }
}

/// Parses an upstream URL once, for every request of a session or route.
pub fn parse_url(url: &str) -> Result<Url, String> {
    let uri: Uri = url.parse().map_err(|e| format!("url `{url}`: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => Ok(Url {
            origin: origin_form(&uri),
            host: host_value(&uri),
            uri,
        }),
        _ => Err(format!("url `{url}`: not an http:// or https:// URL")),
    }
}

/// A client for traffic of the whole route (short requests: the stateless
/// protocol's, and every legacy session's unless [`for_session`] gives it
/// its own). Its idle pool is bounded: keeping every connection ever opened
/// (one per hold-mode call in flight, so thousands after a burst of waiting
/// questions) for minutes is what the soak (examples/soak/) found with
/// reqwest's defaults: 196 of them left at rest after 1,000 questions.
///
/// Fails only if the TLS settings cannot be built: the gateway then refuses
/// to start rather than carry traffic with weaker ones.
/// `loops`: the event loops it is used from (each gets its own pool).
pub fn shared(http2: UpstreamHttp2, loops: usize) -> Result<HttpClient, String> {
    build(http2, IDLE_CONNECTIONS, loops)
}

/// A client of its own for one legacy session to `url`, when that session
/// may speak HTTP/2 (`prior_knowledge`, or `auto` over `https://`); `None`:
/// use the route's shared client (HTTP/1.1 only, a connection per request in
/// flight anyway).
pub fn for_session(http2: UpstreamHttp2, url: &str) -> Option<Result<HttpClient, String>> {
    let https = url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"));
    match http2 {
        // A session's own client is used from the session's tasks, on one loop.
        UpstreamHttp2::PriorKnowledge => Some(build(http2, 1, 0)),
        UpstreamHttp2::Auto if https => Some(build(http2, SESSION_IDLE_CONNECTIONS, 0)),
        UpstreamHttp2::Auto | UpstreamHttp2::Off => None,
    }
}

fn build(http2: UpstreamHttp2, idle: usize, loops: usize) -> Result<HttpClient, String> {
    Ok(HttpClient {
        inner: Arc::new(Clients {
            off_loop: build_one(http2, idle)?,
            per_loop: (0..loops).map(|_| std::sync::OnceLock::new()).collect(),
            plain_off_loop: PlainH1::new(idle),
            plain_per_loop: (0..loops).map(|_| PlainH1::new(idle)).collect(),
            http2,
            idle,
        }),
    })
}

fn build_one(http2: UpstreamHttp2, idle: usize) -> Result<Inner, String> {
    let mut tcp = HttpConnector::new();
    // The TLS layer above takes `https://`; without this the TCP connector
    // would refuse every URL that is not `http://`.
    tcp.enforce_http(false);
    // A request is one or two small writes: Nagle would hold the second.
    tcp.set_nodelay(true);
    tcp.set_keepalive(Some(TCP_KEEP_ALIVE));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(TLS.clone()?)
        .https_or_http();
    let connector = match http2 {
        // ALPN offers `h2` and `http/1.1`; the server picks.
        UpstreamHttp2::Auto | UpstreamHttp2::PriorKnowledge => {
            connector.enable_all_versions().wrap_connector(tcp)
        }
        UpstreamHttp2::Off => connector.enable_http1().wrap_connector(tcp),
    };
    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    builder
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(H2_KEEP_ALIVE_INTERVAL)
        .http2_keep_alive_timeout(H2_KEEP_ALIVE_TIMEOUT);
    if http2 == UpstreamHttp2::PriorKnowledge {
        builder.http2_only(true);
    }
    Ok(builder.build(connector))
}

/// A client for tests and in-process routes, which never reach TLS.
#[cfg(test)]
pub fn for_tests() -> HttpClient {
    shared(UpstreamHttp2::Auto, 0).unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sessions_that_may_speak_http2_get_a_client_of_their_own() {
        let own = |mode, url| for_session(mode, url).is_some();
        assert!(own(UpstreamHttp2::PriorKnowledge, "http://127.0.0.1:1/mcp"));
        assert!(own(UpstreamHttp2::Auto, "https://example.com/mcp"));
        assert!(own(UpstreamHttp2::Auto, "HTTPS://example.com/mcp"));
        assert!(!own(UpstreamHttp2::Auto, "http://127.0.0.1:1/mcp"));
        assert!(!own(UpstreamHttp2::Off, "https://example.com/mcp"));
    }

    #[test]
    fn the_host_header_has_the_port_unless_default_and_is_added_only_on_plain_http1() {
        let host = |url: &str| {
            parse_url(url)
                .unwrap()
                .host
                .map(|v| v.to_str().unwrap().to_owned())
        };
        for (url, want) in [
            ("http://127.0.0.1:8080/mcp", "127.0.0.1:8080"),
            ("http://example.com/mcp", "example.com"),
            ("http://example.com:80/mcp", "example.com"),
            ("http://u:p@[::1]:9/mcp", "[::1]:9"),
            ("https://example.com:443/mcp", "example.com"),
            ("https://example.com:8443/mcp", "example.com:8443"),
        ] {
            assert_eq!(host(url).as_deref(), Some(want), "{url}");
        }
        // Where HTTP/2 may be spoken (or TLS is), hyper-util carries the
        // request: `:authority` holds the authority, and redmark adds no `Host`.
        let plain = |mode, url: &str| {
            let client = build(mode, 1, 0).unwrap();
            client
                .inner
                .plain_here(parse_url(url).unwrap().uri())
                .is_some()
        };
        assert!(plain(UpstreamHttp2::Auto, "http://127.0.0.1:1/mcp"));
        assert!(plain(UpstreamHttp2::Off, "http://127.0.0.1:1/mcp"));
        assert!(!plain(UpstreamHttp2::Auto, "https://example.com/mcp"));
        assert!(!plain(
            UpstreamHttp2::PriorKnowledge,
            "http://127.0.0.1:1/mcp"
        ));
    }

    #[tokio::test]
    async fn plain_http1_writes_the_request_head_hyper_util_would() {
        // What reaches a server: a request through hyper-util's client, and
        // through redmark's plain HTTP/1.1 pool, with no `Host` and with the
        // one made with the URL set by the caller, head for head.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let mut heads = Vec::new();
            for _ in 0..3 {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let mut n = 0;
                while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    n += sock.read(&mut buf[n..]).await.unwrap();
                }
                heads.push(String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase());
                sock.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                    .await
                    .unwrap();
            }
            heads
        });
        let uri = parse_url(&format!("http://127.0.0.1:{port}/mcp?x=1")).unwrap();
        let request = |headers: HeaderMap| {
            let mut req = http::Request::new(Full::new(Bytes::new()));
            *req.method_mut() = Method::POST;
            *req.uri_mut() = uri.uri().clone();
            *req.headers_mut() = headers;
            req
        };
        let hyper_util_client = build_one(UpstreamHttp2::Auto, 1).unwrap();
        hyper_util_client
            .request(request(HeaderMap::new()))
            .await
            .unwrap();
        let client = shared(UpstreamHttp2::Auto, 0).unwrap();
        assert!(client.inner.plain_here(uri.uri()).is_some());
        let mut ours = HeaderMap::new();
        ours.insert(http::header::HOST, uri.host.clone().unwrap());
        for headers in [HeaderMap::new(), ours] {
            client
                .send(Method::POST, &uri, headers, Bytes::new())
                .await
                .unwrap();
        }
        let heads = server.await.unwrap();
        assert!(
            heads[0].starts_with("post /mcp?x=1 http/1.1\r\n"),
            "{}",
            heads[0]
        );
        assert!(
            heads[0].contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")),
            "{}",
            heads[0]
        );
        assert_eq!(heads[1], heads[0]);
        assert_eq!(heads[2], heads[0]);
    }

    #[test]
    fn only_http_urls_with_a_host_are_upstreams() {
        assert!(parse_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(parse_url("https://example.com/mcp").is_ok());
        let err = parse_url("ftp://example.com/mcp").unwrap_err();
        assert!(err.contains("not an http:// or https:// URL"), "{err}");
        assert!(parse_url("/mcp").is_err());
        assert!(parse_url("http://exa mple.com/").is_err());
    }

    #[tokio::test]
    async fn a_refused_connection_names_its_cause() {
        // A port nothing listens on: bind one, learn it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri = parse_url(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
        let err = shared(UpstreamHttp2::Off, 0)
            .unwrap()
            .send(Method::POST, &uri, HeaderMap::new(), Bytes::new())
            .await
            .unwrap_err()
            .to_string();
        assert!(err.to_ascii_lowercase().contains("refused"), "{err}");
    }
}
