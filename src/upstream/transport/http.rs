//! A legacy Streamable HTTP server (spec 2025-06-18/2025-11-25
//! `basic/transports.mdx` "Streamable HTTP"): every message is a POST whose
//! answer is JSON or an SSE stream, the session id rides in `Mcp-Session-Id`,
//! and a standalone GET stream carries what the server sends outside a POST.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode, Uri};
use hyper::body::Incoming;
use tokio::sync::{mpsc, oneshot};

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::{ErrorObject, Id, Message, code};
use crate::sse;
use crate::upstream::UpstreamError;
use crate::upstream::client::{self, HttpClient, next_chunk, read_limited};

static SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
static VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// How long the standalone GET stream may take to open before it is skipped.
const STANDALONE_OPEN_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a POST's answer is read: in the task that sent it (already its
/// own), or in a task of its own (the link task's ordered POSTs must not wait
/// for a body).
#[derive(Clone, Copy)]
enum Body {
    Inline,
    Spawned,
}

/// What every request of the session needs; each POST task holds it by `Arc`.
struct Shared {
    client: HttpClient,
    /// Parsed once, for every request of the session.
    url: Uri,
    extra: HeaderMap,
    session_id: Arc<Mutex<Option<String>>>,
    protocol_version: Arc<Mutex<Option<String>>>,
    /// The two as header values, made once rather than on every POST.
    session_value: CachedValue,
    version_value: CachedValue,
    inbound: mpsc::Sender<Inbound>,
    max_message_bytes: usize,
    route: Arc<str>,
}

pub fn connect(
    client: HttpClient,
    url: &str,
    headers: &BTreeMap<String, String>,
    route: Arc<str>,
    max_message_bytes: usize,
) -> Result<Link, UpstreamError> {
    let mut extra = HeaderMap::new();
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| UpstreamError::Unavailable(format!("header `{k}`: {e}")))?;
        let value = HeaderValue::from_str(v)
            .map_err(|e| UpstreamError::Unavailable(format!("header `{k}`: {e}")))?;
        extra.insert(name, value);
    }
    let url = client::parse_url(url).map_err(UpstreamError::Unavailable)?;
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(QUEUE_DEPTH);
    let (in_tx, in_rx) = mpsc::channel::<Inbound>(QUEUE_DEPTH);
    let (shutdown_tx, mut shutdown_rx) = oneshot::channel::<()>();
    let (ended_tx, ended_rx) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        client,
        url,
        extra,
        session_id: Arc::new(Mutex::new(None)),
        protocol_version: Arc::new(Mutex::new(None)),
        session_value: CachedValue::default(),
        version_value: CachedValue::default(),
        inbound: in_tx,
        max_message_bytes,
        route,
    });
    let link = Link {
        outbound: out_tx,
        inbound: in_rx,
        session_id: shared.session_id.clone(),
        protocol_version: shared.protocol_version.clone(),
        shutdown: shutdown_tx,
        ended: ended_rx,
    };

    tokio::spawn(async move {
        let mut get_stream: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            tokio::select! {
                // Messages queued before shutdown (a `notifications/cancelled`
                // for the call that made us retire the session) go out first.
                biased;
                msg = out_rx.recv() => {
                    let Some(msg) = msg else { break };
                    let (is_initialize, is_notification, is_initialized) = match &msg {
                        Message::Request { method, .. } => (method == "initialize", false, false),
                        Message::Notification { method, .. } => {
                            (false, true, method == "notifications/initialized")
                        }
                        Message::Response { .. } => (false, false, false),
                    };
                    if is_initialize || is_notification {
                        // The handshake is ordered: the session id comes back on
                        // initialize's answer and every later POST needs it.
                        // Notifications get a bare 202 at once, and awaiting it
                        // keeps a cancellation ahead of the DELETE that may follow.
                        shared.post(msg, Body::Spawned).await;
                    } else {
                        // Everything else runs concurrently: a call whose answer is
                        // a plain JSON body stays open while the answers to its
                        // pushed questions are POSTed. One task per POST reads its
                        // answer too (a task hop less per call).
                        let shared = Arc::clone(&shared);
                        // Boxed: the POST's future (the client's included) is large, and
                        // a task's future is moved by value (see `mrtr::start::call`).
                        tokio::spawn(Box::pin(async move { shared.post(msg, Body::Inline).await }));
                    }
                    if is_initialized && get_stream.is_none() {
                        get_stream = shared.open_standalone_stream().await;
                    }
                }
                _ = &mut shutdown_rx => break,
            }
        }
        if let Some(task) = get_stream {
            task.abort();
        }
        shared.end_session().await;
        ended_tx.send_replace(true);
    });
    Ok(link)
}

impl Shared {
    fn headers(&self, accept: &'static str) -> HeaderMap {
        let mut h = self.extra.clone();
        h.insert(ACCEPT, HeaderValue::from_static(accept));
        if let Some(id) = self.session_value.of(lock(&self.session_id).as_deref()) {
            h.insert(&SESSION_HEADER, id);
        }
        if let Some(v) = self
            .version_value
            .of(lock(&self.protocol_version).as_deref())
        {
            h.insert(&VERSION_HEADER, v);
        }
        h
    }

    async fn closed(&self, why: String) {
        let _ = self.inbound.send(Inbound::Closed(why)).await;
    }

    /// Fails one request locally, so its caller hears why instead of waiting.
    async fn fail_request(&self, id: Option<Id>, error: ErrorObject) {
        if let Some(id) = id {
            let _ = self
                .inbound
                .send(Inbound::Message(Message::Response {
                    id,
                    outcome: Err(error),
                }))
                .await;
        }
    }

    async fn post(self: &Arc<Self>, msg: Message, body: Body) {
        let (request_id, is_initialize) = match &msg {
            Message::Request { id, method, .. } => (Some(id.clone()), method == "initialize"),
            _ => (None, false),
        };
        // `to_vec`, not `to_string`: Display writes through `fmt` a token at a
        // time. The message itself is dropped now, not held while a call waits.
        let bytes = serde_json::to_vec(&msg).unwrap_or_default();
        drop(msg);
        let had_session = lock(&self.session_id).is_some();
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // Boxed: the request future is large and done once the head is in,
        // while this task lives on for as long as the call's stream stays
        // open (a question waiting for a person).
        let sending =
            Box::pin(
                self.client
                    .send(Method::POST, &self.url, headers, Bytes::from(bytes)),
            );
        let resp = match sending.await {
            Ok(r) => r,
            Err(e) => {
                self.closed(format!("POST {} failed: {e}", self.url)).await;
                return;
            }
        };
        let status = resp.status();
        if is_initialize
            && let Some(id) = resp
                .headers()
                .get(&SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            *lock(&self.session_id) = Some(id.to_owned());
        }
        // spec 2025-06-18 transports.mdx "Session Management": a 404 for a
        // request carrying a session id means the session is gone.
        if status == StatusCode::NOT_FOUND && had_session {
            self.closed("the server ended the HTTP session (404)".into())
                .await;
            return;
        }
        if status == StatusCode::ACCEPTED {
            return;
        }
        if !status.is_success() {
            // Boxed, as the other rare or short steps: this task's future is
            // as large as its largest await, and lives as long as the call.
            Box::pin(self.refused(resp, had_session, request_id)).await;
            return;
        }
        let is_sse = client::is_event_stream(resp.headers());
        // The head is done with: only the body is read on, for as long as the call waits.
        let resp = resp.into_body();
        match body {
            Body::Inline => self.read_answer(resp, is_sse, request_id).await,
            Body::Spawned => {
                let this = Arc::clone(self);
                tokio::spawn(Box::pin(async move {
                    this.read_answer(resp, is_sse, request_id).await;
                }));
            }
        }
    }

    /// The answer to a POST: an SSE stream (a tool call's stays open while
    /// the answers to its pushed questions are POSTed) or one JSON message.
    async fn read_answer(&self, resp: Incoming, is_sse: bool, request_id: Option<Id>) {
        if is_sse {
            self.pump_sse(resp, request_id).await;
        } else {
            match read_limited(resp, self.max_message_bytes).await {
                Ok(body) if body.is_empty() => {}
                Ok(body) => self.deliver(&body).await,
                Err(e) => {
                    self.fail_request(
                        request_id,
                        ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                    )
                    .await;
                }
            }
        }
    }

    /// A non-2xx answer to a POST: the session is gone, the server's own
    /// JSON-RPC error, or an HTTP failure of the request.
    async fn refused(
        &self,
        resp: http::Response<Incoming>,
        had_session: bool,
        request_id: Option<Id>,
    ) {
        let status = resp.status();
        let body = read_limited(resp.into_body(), 4096)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        // Some servers (server-everything among them) answer an unknown or
        // expired session with 400 instead of 404.
        if had_session
            && status == StatusCode::BAD_REQUEST
            && text.to_ascii_lowercase().contains("session")
        {
            self.closed(format!(
                "the server no longer knows the HTTP session: {}",
                text.trim()
            ))
            .await;
            return;
        }
        // A JSON-RPC error body is the server's own answer: pass it on as is.
        if let Ok(Message::Response {
            id,
            outcome: Err(e),
        }) = message_from_body(&body)
        {
            let _ = self
                .inbound
                .send(Inbound::Message(Message::Response {
                    id,
                    outcome: Err(e),
                }))
                .await;
            return;
        }
        self.fail_request(
            request_id,
            ErrorObject::new(
                code::INTERNAL_ERROR,
                format!("upstream HTTP {status}: {}", text.trim()),
            ),
        )
        .await;
    }

    async fn deliver(&self, data: &[u8]) {
        self.deliver_on(None, data).await;
    }

    /// Hands up one message; `stream` is the request whose POST answer carried it.
    async fn deliver_on(&self, stream: Option<&Id>, data: &[u8]) {
        match message_from_body(data) {
            Ok(msg) => {
                let item = match stream {
                    Some(id) => Inbound::OnStream(id.clone(), msg),
                    None => Inbound::Message(msg),
                };
                let _ = self.inbound.send(item).await;
            }
            Err(e) => {
                tracing::warn!(route = %self.route, error = %e, "upstream sent a message that is not JSON-RPC");
            }
        }
    }

    async fn pump_sse(&self, mut body: Incoming, request_id: Option<Id>) {
        let mut decoder = sse::Decoder::new(self.max_message_bytes);
        while let Some(chunk) = next_chunk(&mut body).await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(route = %self.route, error = %e, "upstream SSE stream broke");
                    break;
                }
            };
            match decoder.feed(&chunk) {
                Ok(events) => {
                    for ev in events.iter().filter(|e| carries_message(e)) {
                        Box::pin(self.deliver_on(request_id.as_ref(), ev.data.as_bytes())).await;
                    }
                }
                Err(e) => {
                    Box::pin(self.fail_request(
                        request_id.clone(),
                        ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                    ))
                    .await;
                    return;
                }
            }
        }
    }

    /// Opens the GET stream before any call, so pushes a server sends there
    /// (for example without `relatedRequestId`) are not lost.
    async fn open_standalone_stream(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        // Bounded: a server that never answers the GET must not hold up the session.
        let opening = self.client.send(
            Method::GET,
            &self.url,
            self.headers("text/event-stream"),
            Bytes::new(),
        );
        let resp = tokio::time::timeout(STANDALONE_OPEN_TIMEOUT, opening)
            .await
            .ok()?
            .ok()?;
        if !resp.status().is_success() {
            // 405: the server offers no standalone stream, which is allowed.
            return None;
        }
        let this = Arc::clone(self);
        Some(tokio::spawn(async move {
            this.pump_sse(resp.into_body(), None).await;
            let mut failures = 0u32;
            // Servers may close the stream at any time; reopen it while the session lives.
            while failures < 5 && !this.inbound.is_closed() {
                tokio::time::sleep(Duration::from_millis(500 * u64::from(failures + 1))).await;
                match this
                    .client
                    .send(
                        Method::GET,
                        &this.url,
                        this.headers("text/event-stream"),
                        Bytes::new(),
                    )
                    .await
                {
                    Ok(resp) if resp.status().is_success() => {
                        failures = 0;
                        this.pump_sse(resp.into_body(), None).await;
                    }
                    _ => failures += 1,
                }
            }
        }))
    }

    async fn end_session(&self) {
        if lock(&self.session_id).is_none() {
            return;
        }
        // spec 2025-06-18 transports.mdx "Session Management": clients SHOULD DELETE the session they no longer need.
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.client.send(
                Method::DELETE,
                &self.url,
                self.headers("application/json"),
                Bytes::new(),
            ),
        )
        .await;
    }
}

/// One JSON-RPC message: a JSON answer's body, or an SSE event's data.
pub fn message_from_body(data: &[u8]) -> Result<Message, String> {
    Message::from_slice(data).map_err(|e| e.to_string())
}

/// Whether an SSE event carries a message: events with blank data (a server's
/// priming event, say) are skipped.
pub fn carries_message(event: &sse::Event) -> bool {
    !event.data.trim().is_empty()
}

/// A header value kept beside the text it was made from: made again only
/// when the text changes.
#[derive(Default)]
struct CachedValue(Mutex<Option<(String, HeaderValue)>>);

impl CachedValue {
    /// The value for `text`; `None` for no text, or text no header can carry.
    fn of(&self, text: Option<&str>) -> Option<HeaderValue> {
        let text = text?;
        let mut cached = lock(&self.0);
        if let Some((made_from, value)) = cached.as_ref()
            && made_from == text
        {
            return Some(value.clone());
        }
        let value = HeaderValue::from_str(text).ok()?;
        *cached = Some((text.to_owned(), value.clone()));
        Some(value)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_header_value_follows_its_text() {
        let cached = CachedValue::default();
        assert_eq!(cached.of(None), None);
        assert_eq!(
            cached.of(Some("abc")),
            Some(HeaderValue::from_static("abc"))
        );
        assert_eq!(
            cached.of(Some("abc")),
            Some(HeaderValue::from_static("abc"))
        );
        assert_eq!(
            cached.of(Some("def")),
            Some(HeaderValue::from_static("def"))
        );
        // A session id no header can carry is left off, as before.
        assert_eq!(cached.of(Some("bad\nid")), None);
        assert_eq!(
            cached.of(Some("def")),
            Some(HeaderValue::from_static("def"))
        );
    }
}
