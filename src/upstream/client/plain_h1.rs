//! HTTP/1.1 over plain TCP (`http://` upstreams that do not speak HTTP/2),
//! with redmark's own keep-alive pool: idle connections per event loop, the
//! most recently used first, each given back the moment its response body
//! ends.
//!
//! hyper-util's pool does the same for every scheme and version, and pays
//! for that generality on every request: it hashes its `(scheme,
//! authority)` key twice, formats the `Host` header, moves a large checkout
//! future, and spawns a task per request that waits for the connection to
//! be idle again before it goes back (about 9k instructions of a
//! passthrough call's 105k; benches/WHERE_THE_TIME_GOES.md). TLS and HTTP/2
//! still go through hyper-util.

use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

use super::{ClientError, IDLE_TIMEOUT, TCP_KEEP_ALIVE, causes};
use crate::upstream::lock;

type Sender = SendRequest<Full<Bytes>>;

/// The idle connections of one event loop to one upstream host.
pub(super) struct PlainH1 {
    /// Oldest first: a request takes the last, the reaper drops from the front.
    idle: Mutex<Vec<Idle>>,
    max_idle: usize,
    /// A reaper task is running (at most one per pool).
    reaping: std::sync::atomic::AtomicBool,
}

struct Idle {
    sender: Sender,
    since: tokio::time::Instant,
}

/// The body of an upstream response: hyper's, plus the connection it came
/// on, given back to its pool when the body has ended (a connection whose
/// body was dropped half-read is closed by hyper, never reused).
pub struct ResponseBody {
    inner: Incoming,
    give_back: Option<(Weak<PlainH1>, Sender)>,
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("pooled", &self.give_back.is_some())
            .finish_non_exhaustive()
    }
}

impl ResponseBody {
    pub(super) fn of(inner: Incoming) -> Self {
        ResponseBody {
            inner,
            give_back: None,
        }
    }

    fn give_back(&mut self) {
        if let Some((pool, sender)) = self.give_back.take()
            && let Some(pool) = pool.upgrade()
        {
            pool.put(sender);
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.give_back();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        // A body with nothing in it (a 202, a 204) is over without a read.
        if self.inner.is_end_stream() {
            self.give_back();
        }
    }
}

impl PlainH1 {
    pub(super) fn new(max_idle: usize) -> Arc<Self> {
        Arc::new(PlainH1 {
            idle: Mutex::new(Vec::new()),
            max_idle,
            reaping: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Sends `req` on an idle connection, or a new one. A request that a
    /// reused connection closed under before it was written goes out again
    /// on the next (the server may close an idle connection at any time:
    /// RFC 9112 section 9.6); one that was written is never resent.
    /// `req` is ready to be written (origin-form target, `Host` set);
    /// `to` is the URL whose host and port a new connection goes to.
    pub(super) async fn send(
        self: &Arc<Self>,
        to: &http::Uri,
        mut req: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<ResponseBody>, ClientError> {
        loop {
            let (mut sender, reused) = match self.take().await {
                Some(sender) => (sender, true),
                None => (connect(to).await?, false),
            };
            match sender.try_send_request(req).await {
                Ok(resp) => {
                    let (head, body) = resp.into_parts();
                    let mut body = ResponseBody::of(body);
                    body.give_back = Some((Arc::downgrade(self), sender));
                    return Ok(http::Response::from_parts(head, body));
                }
                Err(mut e) => match e.take_message() {
                    Some(unsent) if reused => req = unsent,
                    _ => return Err(ClientError(causes(e.error()))),
                },
            }
        }
    }

    /// The most recently idle connection still open and ready.
    async fn take(&self) -> Option<Sender> {
        loop {
            let Idle { mut sender, since } = lock(&self.idle).pop()?;
            if sender.is_closed() || since.elapsed() >= IDLE_TIMEOUT {
                continue;
            }
            // Given back at its body's end, it is ready as soon as its
            // connection task has seen that end: at most a poll away.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    fn put(self: &Arc<Self>, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = lock(&self.idle);
        if idle.len() >= self.max_idle {
            idle.remove(0);
        }
        idle.push(Idle {
            sender,
            since: tokio::time::Instant::now(),
        });
        drop(idle);
        self.reap_later();
    }

    /// Closes connections idle longer than [`IDLE_TIMEOUT`]: one task per
    /// pool while it has any, gone when the pool is empty or dropped.
    fn reap_later(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.reaping.store(false, Ordering::Release);
            return;
        };
        let pool = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut wait = IDLE_TIMEOUT;
            loop {
                tokio::time::sleep(wait).await;
                let Some(pool) = pool.upgrade() else { return };
                let mut idle = lock(&pool.idle);
                idle.retain(|c| !c.sender.is_closed() && c.since.elapsed() < IDLE_TIMEOUT);
                let Some(oldest) = idle.first() else {
                    pool.reaping.store(false, Ordering::Release);
                    return;
                };
                wait =
                    IDLE_TIMEOUT.saturating_sub(oldest.since.elapsed()) + Duration::from_millis(1);
            }
        });
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        lock(&self.idle).len()
    }
}

/// A new connection to `uri`'s host and port, its task on this event loop.
async fn connect(uri: &http::Uri) -> Result<Sender, ClientError> {
    let host = uri.host().unwrap_or_default();
    // `[::1]` in a URL, `::1` to a resolver.
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = uri.port_u16().unwrap_or(80);
    let connect_error =
        |e: &dyn std::error::Error| ClientError(format!("client error (Connect): {}", causes(e)));
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| connect_error(&e))?;
    // A request is one or two small writes: Nagle would hold the second.
    stream.set_nodelay(true).map_err(|e| connect_error(&e))?;
    let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEP_ALIVE);
    socket2::SockRef::from(&stream)
        .set_tcp_keepalive(&keepalive)
        .map_err(|e| connect_error(&e))?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| connect_error(&e))?;
    tokio::spawn(async move {
        // Its end (the server closed it, or every sender is gone) is the
        // pool's business only through `is_closed`.
        let _ = connection.await;
    });
    Ok(sender)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server answering every request on a connection with `body`, and
    /// closing each connection after `per_connection` requests; counts
    /// the connections it accepted.
    async fn server(body: &'static str, per_connection: usize) -> (http::Uri, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for _ in 0..per_connection {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            let mut chunk = [0u8; 1024];
                            let n = sock.read(&mut chunk).await.unwrap_or(0);
                            if n == 0 {
                                return;
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                        buf.clear();
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        sock.write_all(head.as_bytes()).await.unwrap();
                    }
                    // Closed without a word, as a server's idle timeout does.
                });
            }
        });
        (
            format!("http://127.0.0.1:{port}/mcp").parse().unwrap(),
            accepted,
        )
    }

    fn post(uri: &http::Uri) -> http::Request<Full<Bytes>> {
        let mut req = http::Request::new(Full::new(Bytes::from_static(b"{}")));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = uri.clone();
        req.headers_mut()
            .insert(http::header::HOST, http::HeaderValue::from_static("h"));
        req
    }

    async fn text(resp: http::Response<ResponseBody>) -> String {
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn a_connection_is_reused_once_its_body_is_read() {
        let (uri, accepted) = server("hello", 100).await;
        let pool = PlainH1::new(4);
        for _ in 0..5 {
            let resp = pool.send(&uri, post(&uri)).await.unwrap();
            assert_eq!(
                pool.idle_count(),
                0,
                "out of the pool while its body is unread"
            );
            assert_eq!(text(resp).await, "hello");
            assert_eq!(pool.idle_count(), 1);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_body_dropped_half_read_takes_its_connection_with_it() {
        let (uri, accepted) = server("hello", 100).await;
        let pool = PlainH1::new(4);
        let resp = pool.send(&uri, post(&uri)).await.unwrap();
        drop(resp);
        assert_eq!(pool.idle_count(), 0);
        assert_eq!(
            text(pool.send(&uri, post(&uri)).await.unwrap()).await,
            "hello"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_not_used_again() {
        // One request per connection, then the server closes it: every
        // request after the first finds its idle connection gone and
        // opens another, without an error.
        let (uri, accepted) = server("ok", 1).await;
        let pool = PlainH1::new(4);
        for _ in 0..4 {
            assert_eq!(text(pool.send(&uri, post(&uri)).await.unwrap()).await, "ok");
            // Let the connection's task see the close.
            while !lock(&pool.idle).iter().all(|c| c.sender.is_closed()) {
                tokio::task::yield_now().await;
            }
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_request_on_a_connection_closing_under_it_goes_out_on_another() {
        // No wait for the close this time: a request either skips the
        // closed connection or, written to none, goes out on a new one.
        let (uri, accepted) = server("ok", 1).await;
        let pool = PlainH1::new(4);
        for _ in 0..20 {
            assert_eq!(text(pool.send(&uri, post(&uri)).await.unwrap()).await, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 20);
    }

    #[tokio::test]
    async fn the_pool_keeps_at_most_its_bound_of_idle_connections() {
        let (uri, accepted) = server("x", 100).await;
        let pool = PlainH1::new(2);
        let resps = futures::future::join_all((0..3).map(|_| pool.send(&uri, post(&uri)))).await;
        for resp in resps {
            assert_eq!(text(resp.unwrap()).await, "x");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        assert_eq!(pool.idle_count(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_connections_are_closed_after_the_idle_timeout() {
        let (uri, _) = server("x", 100).await;
        let pool = PlainH1::new(4);
        assert_eq!(text(pool.send(&uri, post(&uri)).await.unwrap()).await, "x");
        assert_eq!(pool.idle_count(), 1);
        tokio::time::sleep(IDLE_TIMEOUT + Duration::from_secs(1)).await;
        assert_eq!(pool.idle_count(), 0);
    }

    #[tokio::test]
    async fn a_refused_connection_says_so() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let uri: http::Uri = format!("http://127.0.0.1:{port}/").parse().unwrap();
        let err = PlainH1::new(1)
            .send(&uri, post(&uri))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("client error (Connect)"), "{err}");
        assert!(err.to_ascii_lowercase().contains("refused"), "{err}");
    }
}
