//! Accept loops for the client and admin listeners, with a cap on open
//! connections, timeouts for slow and greedy clients, and a graceful
//! shutdown: stop accepting, let in-flight requests finish up to a deadline,
//! then cut what is left. An accepted connection is served on one of the
//! [`EventLoops`] when the listener has them (the client listener), else on
//! the runtime that accepted it.
//!
//! The bounds on one connection ([`Limits`]; docs/src/reference/limits.md):
//! - **Connections**: at most `max_connections` are served; one beyond is
//!   accepted, answered `503` `too_many_connections` with `Retry-After`, and
//!   closed (at most [`REFUSALS_IN_FLIGHT`] such answers at once; past that
//!   the connection is closed without one). Waiting in the accept queue for a
//!   permit instead would let idle sockets lock everyone out.
//! - **Idle and slow heads**: a connection with no request in flight for
//!   `header_read_timeout` is closed: one that never sends anything, one that
//!   trickles its request head, one kept alive and unused. hyper's own
//!   header-read timer (it needs the [`TokioTimer`]) does this for HTTP/1.1
//!   heads; the connection's own idle watch covers what hyper does not: the
//!   protocol sniffing before HTTP/1.1 or HTTP/2 is chosen, and idle HTTP/2.
//! - **Slow readers**: a write to the client that makes no progress for
//!   `send_timeout` fails, and the connection closes ([`Stalled`]). With the
//!   bounded queues behind the SSE body (`mrtr::start::STREAM_DEPTH`), a
//!   client that never reads its response costs a bounded amount of memory for
//!   at most `send_timeout` after its last successful write.
//! - Request bodies are bounded in the pipeline's `body` step
//!   (`max_body_bytes`, `body_read_timeout`), and what they hold in memory
//!   per connection (HTTP/2 streams) and in all by the listener's
//!   [`BodyBudget`](super::body_budget::BodyBudget), whose share each
//!   request carries as an extension.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};

use super::response::Body;
use crate::event_loops::EventLoops;
use crate::protocol::{Reason, Reject};
use crate::telemetry::metrics::Metrics;

/// Refusals (`503 too_many_connections`) being written at once; beyond them a
/// connection over the cap is closed without an answer.
pub const REFUSALS_IN_FLIGHT: usize = 128;

/// How long a refusal waits for the client's request head before answering
/// anyway: a real client sends it at once, an idle socket must not hold one
/// of the few refusal slots for long.
const REFUSAL_HEAD_WAIT: Duration = Duration::from_millis(250);

/// How long a refusal may take to write its answer and read what the client
/// sends after it (so closing does not reset the connection under the answer).
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// How much of a refused connection's request is read before it is answered.
const REFUSAL_READ_BYTES: usize = 16 * 1024;

/// The bounds of one listener.
#[derive(Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub send_timeout: Duration,
    /// After shutdown begins, how long open connections may still run.
    pub grace: Duration,
    /// Where open and refused connections are counted (the client listener).
    pub metrics: Option<Arc<Metrics>>,
    /// HTTPS (`[server.tls]`); plain HTTP when `None`.
    pub tls: Option<Arc<super::tls::Tls>>,
    /// The event loops connections are served on; `None`: the runtime that accepts.
    pub loops: Option<Arc<EventLoops>>,
    /// What request bodies may hold in memory, per connection and in all
    /// (the client listener's; each request carries its connection's).
    pub body_budget: Option<super::body_budget::BodyBudget>,
}

/// Serves `handler` on `listener` until `shutdown` resolves, then waits up to
/// `limits.grace` for open connections to finish.
pub async fn serve<H, F>(
    listener: TcpListener,
    handler: H,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let refusal = Bytes::from(refusal_bytes(limits.max_connections));
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let mut saturated = false;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if !saturated {
                // Once per episode, not per connection: a flood must not flood the log.
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection limit reached; refusing new connections with 503"
                );
                saturated = true;
            }
            if let Some(m) = &limits.metrics {
                m.record_connection_refused();
            }
            refuse(stream, &refusals, refusal.clone());
            continue;
        };
        if saturated {
            tracing::info!("below the connection limit again");
            saturated = false;
        }
        let _ = stream.set_nodelay(true);
        let conn = Connection {
            builder: builder.clone(),
            watcher: graceful.watcher(),
            handler: handler.clone(),
            header_read_timeout: limits.header_read_timeout,
            send_timeout: limits.send_timeout,
            peer,
            client: None,
            body_budget: limits
                .body_budget
                .as_ref()
                .map(super::body_budget::BodyBudget::connection),
        };
        let tls = limits.tls.clone();
        let metrics = limits.metrics.clone();
        // Counted where it is served: a connection that never reaches its
        // loop is neither counted nor left counted.
        let serve = move |stream: TcpStream| async move {
            if let Some(m) = &metrics {
                m.add_client_connection(1);
            }
            match tls {
                None => conn.serve(stream).await,
                Some(tls) => {
                    // The handshake counts against the head's time: a client
                    // that opens TLS and stops is an idle connection too.
                    let handshake = tls.acceptor().accept(stream);
                    match tokio::time::timeout(conn.header_read_timeout, handshake).await {
                        Ok(Ok(stream)) => {
                            let client = tls.client_principal(stream.get_ref().1);
                            Connection { client, ..conn }.serve(stream).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, listener = tls.listener, error = %e, "TLS handshake failed");
                        }
                        Err(_) => {
                            tracing::debug!(%peer, listener = tls.listener, "TLS handshake not done within header_read_timeout; closed");
                        }
                    }
                }
            }
            if let Some(m) = &metrics {
                m.add_client_connection(-1);
            }
            drop(permit);
        };
        match &limits.loops {
            None => {
                tokio::spawn(serve(stream));
            }
            Some(loops) => match stream.into_std() {
                // The socket leaves this runtime's reactor for the loop's.
                Ok(std) => loops.spawn(move || async move {
                    match TcpStream::from_std(std) {
                        Ok(stream) => serve(stream).await,
                        Err(e) => tracing::warn!(%peer, error = %e, "handing the connection to its event loop failed"),
                    }
                }),
                Err(e) => tracing::warn!(%peer, error = %e, "handing the connection to its event loop failed"),
            },
        }
    }
    drop(listener);
    if tokio::time::timeout(limits.grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?limits.grace,
            "shutdown grace period over; cutting remaining connections"
        );
    }
}

/// One accepted connection, served over plain TCP or TLS alike.
struct Connection<H> {
    builder: Builder<TokioExecutor>,
    watcher: hyper_util::server::graceful::Watcher,
    handler: H,
    header_read_timeout: Duration,
    send_timeout: Duration,
    peer: std::net::SocketAddr,
    /// The principal of the client certificate (`[server.tls] client_principal`).
    client: Option<super::client_cert::CertPrincipal>,
    /// This connection's share of the listener's request-body memory.
    body_budget: Option<super::body_budget::ConnectionBudget>,
}

impl<H, F> Connection<H>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    async fn serve<S>(self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Activity::new();
        let idle = activity.clone();
        let handler = self.handler;
        let client = self.client;
        let body_budget = self.body_budget;
        let service = service_fn(move |mut req: Request<Incoming>| {
            if let Some(c) = &client {
                req.extensions_mut().insert(c.clone());
            }
            if let Some(b) = &body_budget {
                req.extensions_mut().insert(b.clone());
            }
            let handler = handler.clone();
            let busy = InFlight::start(activity.clone());
            async move {
                let resp = handler(req).await;
                // In flight until the body is written (or dropped): SSE streams count.
                Ok::<_, std::convert::Infallible>(
                    resp.map(|body| Tracked { body, _busy: busy }.boxed_unsync()),
                )
            }
        });
        let io = TokioIo::new(Stalled::new(stream, self.send_timeout));
        let conn = self
            .builder
            .serve_connection_with_upgrades(io, service)
            .into_owned();
        let conn = self.watcher.watch(conn);
        let peer = self.peer;
        tokio::select! {
            ended = conn => if let Err(e) = ended {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            },
            () = idle_for(idle, self.header_read_timeout) => {
                tracing::debug!(%peer, "connection idle for header_read_timeout; closed");
            }
        }
    }
}

/// The answer to a connection over the cap: a complete HTTP/1.1 response,
/// written before anything is read, so it costs no parsing.
fn refusal_bytes(max_connections: usize) -> Vec<u8> {
    let reject = Reject::new(
        Reason::TooManyConnections,
        format!("redmark is serving its maximum of {max_connections} connections; retry shortly"),
    );
    let body = reject.response(None).to_string();
    let status = reject.status();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap and closes it, within
/// [`REFUSAL_HEAD_WAIT`] + [`REFUSAL_LINGER`]: first what the client sends is
/// read (up to the end of a request head, [`REFUSAL_READ_BYTES`], or the wait) so that a client is answered after
/// its request as HTTP clients expect, then the answer is written, and what
/// else comes is read and discarded until the client closes or the linger
/// ends (closing with unread data would reset the connection under the answer).
fn refuse(mut stream: TcpStream, refusals: &Arc<Semaphore>, answer: Bytes) {
    let Ok(permit) = refusals.clone().try_acquire_owned() else {
        return; // Dropped: closed at once.
    };
    tokio::spawn(async move {
        let _permit = permit;
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        let _ = tokio::time::timeout(REFUSAL_HEAD_WAIT, async {
            while seen.len() < REFUSAL_READ_BYTES && !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            if stream.write_all(&answer).await.is_err() {
                return;
            }
            let _ = stream.shutdown().await;
            while let Ok(n) = stream.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
            }
        })
        .await;
    });
}

/// Requests in flight on one connection, and when the last one ended.
/// Requests only touch two atomics; nothing is woken per request. The idle
/// watch looks at them when its timer fires (a watch channel woke the
/// connection's idle task twice per request and re-armed a timer each time:
/// about 3k instructions of a passthrough call).
struct Activity {
    in_flight: AtomicUsize,
    /// When the connection last had nothing in flight, as time since `epoch`.
    idle_since_nanos: AtomicU64,
    epoch: Instant,
}

impl Activity {
    fn new() -> Arc<Activity> {
        Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            idle_since_nanos: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    fn idle_since(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.idle_since_nanos.load(Ordering::Acquire))
    }
}

/// Resolves once no request has been in flight for `timeout` in a row.
async fn idle_for(activity: Arc<Activity>, timeout: Duration) {
    let mut deadline = activity.idle_since() + timeout;
    loop {
        tokio::time::sleep_until(deadline).await;
        if activity.in_flight.load(Ordering::Acquire) > 0 {
            // Busy: look again in `timeout`; the request's end moves the mark.
            deadline = Instant::now() + timeout;
            continue;
        }
        let due = activity.idle_since() + timeout;
        if Instant::now() >= due {
            return;
        }
        deadline = due;
    }
}

/// A response body that keeps its request counted as in flight until it is
/// written or dropped (an SSE stream is in flight while it is open).
struct Tracked {
    body: Body,
    _busy: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// One request in flight on a connection, until dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        // The mark first: whoever sees nothing in flight sees when it ended.
        let since = u64::try_from(a.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        a.idle_since_nanos.store(since, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream whose writes fail once one has made no progress for `timeout`:
/// a client that stops reading cannot hold a connection (and what is queued
/// for it) forever. Progress of any write resets the clock.
/// The connection then closes, which drops the response stream: the operation
/// behind it ends as `client_disconnected` and cancels its upstream call
/// (spec 2026-07-28 basic/patterns/cancellation.mdx: "The server MUST treat a
/// client disconnect as cancellation of that request").
pub struct Stalled<T> {
    io: T,
    timeout: Duration,
    stall: Pin<Box<Sleep>>,
    armed: bool,
}

impl<T> Stalled<T> {
    pub fn new(io: T, timeout: Duration) -> Self {
        Self {
            io,
            timeout,
            stall: Box::pin(tokio::time::sleep(timeout)),
            armed: false,
        }
    }

    fn progress<R>(
        &mut self,
        poll: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        match poll {
            Poll::Ready(r) => {
                self.armed = false;
                Poll::Ready(r)
            }
            Poll::Pending => {
                if !self.armed {
                    self.armed = true;
                    let deadline = tokio::time::Instant::now() + self.timeout;
                    self.stall.as_mut().reset(deadline);
                }
                match self.stall.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client read nothing for send_timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stalled<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stalled<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progress(poll, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progress(poll, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(poll, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_shutdown(cx);
        self.progress(poll, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_503_with_retry_after() {
        let text = String::from_utf8(refusal_bytes(8)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nretry-after: 1"), "{head}");
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["data"]["reason"], "too_many_connections");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_that_makes_no_progress_fails_after_the_timeout() {
        // A pipe whose reader never reads: writes block once its buffer is full.
        let (writer, _reader) = tokio::io::duplex(16);
        let mut io = Stalled::new(writer, Duration::from_secs(5));
        io.write_all(&[0; 16]).await.unwrap();
        let started = tokio::time::Instant::now();
        let err = io.write_all(&[0; 1]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_counts_only_time_with_nothing_in_flight() {
        let activity = Activity::new();
        let busy = InFlight::start(activity.clone());
        let started = tokio::time::Instant::now();
        let idle = tokio::spawn(idle_for(activity.clone(), Duration::from_secs(2)));
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!idle.is_finished(), "a request in flight is not idle");
        drop(busy);
        idle.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(12));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_between_two_looks_restarts_the_idle_time() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        let idle = tokio::spawn(idle_for(activity.clone(), Duration::from_secs(2)));
        // A short request that starts and ends between the watch's looks.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        drop(InFlight::start(activity.clone()));
        idle.await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(3500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_never_sends_is_idle_from_its_start() {
        let activity = Activity::new();
        let started = tokio::time::Instant::now();
        idle_for(activity, Duration::from_secs(2)).await;
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
