//! A legacy Streamable HTTP server (spec 2025-06-18/2025-11-25
//! `basic/transports.mdx` "Streamable HTTP"): every message is a POST whose
//! answer is JSON or an SSE stream, the session id rides in `Mcp-Session-Id`,
//! and a standalone GET stream carries what the server sends outside a POST.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tokio::sync::{mpsc, oneshot};

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::{ErrorObject, Id, Message, Payload, Relayable, code};
use crate::sse;
use crate::upstream::UpstreamError;
use crate::upstream::client::{self, HttpClient, ResponseBody, next_chunk, read_limited};
use crate::upstream::lock;

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

/// A successful POST's answer, still to be read.
struct PostAnswer {
    body: ResponseBody,
    is_sse: bool,
    /// The request the POST carried, if it was one.
    request_id: Option<Id>,
}

/// What every request of the session needs; each POST task holds it by `Arc`.
struct Shared {
    client: HttpClient,
    /// Parsed once, for every request of the session.
    url: client::Url,
    extra: HeaderMap,
    session_id: Arc<Mutex<Option<String>>>,
    protocol_version: Arc<Mutex<Option<String>>>,
    /// The two as header values, made once rather than on every POST.
    session_value: CachedValue,
    version_value: CachedValue,
    /// A POST's headers once the handshake is over, when the session id and
    /// version no longer change: cloned, not rebuilt, for every call.
    post_headers: OnceLock<HeaderMap>,
    inbound: mpsc::Sender<Inbound>,
    max_message_bytes: usize,
    route: Arc<str>,
    /// The handshake is over: `initialized` is sent and the standalone
    /// stream open (or refused), so requests may skip the link's queue.
    ready: AtomicBool,
    /// The standalone GET stream is open: what the server sends there (a
    /// call's progress, say) may still be on its way through `inbound`
    /// when the call's own JSON answer is in.
    standalone_open: AtomicBool,
}

/// Requests POSTed from the caller's own task once the session is set up:
/// no hop through the link's queue and task, and a plain JSON answer comes
/// straight back instead of through `inbound` and the session's dispatcher
/// (two of a passthrough call's task hand-offs; benches/WHERE_THE_TIME_GOES.md).
#[derive(Clone)]
pub struct Direct(Arc<Shared>);

impl Direct {
    /// Whether the handshake is over. Until then requests go through the
    /// link's queue, which keeps them behind `notifications/initialized`
    /// and the opening of the standalone stream (spec 2025-11-25
    /// lifecycle.mdx "Initialization": the client sends `initialized`
    /// before other requests; pushes on the stream must not be missed).
    pub fn ready(&self) -> bool {
        self.0.ready.load(Ordering::Acquire)
    }

    /// POSTs `msg` (an answer to a pushed request) from a task of its own,
    /// started here instead of by the link's task.
    pub fn post(&self, msg: Message) {
        let shared = Arc::clone(&self.0);
        // Boxed: see the link task's POSTs.
        tokio::spawn(Box::pin(
            async move { shared.post(msg, Body::Inline).await },
        ));
    }

    /// POSTs the request `msg`, whose id is `expect`, in this task. Its
    /// outcome is returned when the server answers it with the POST's JSON
    /// body; `None` when the answer reaches the session through `inbound`
    /// as it would from [`Link::outbound`]: an SSE stream (read from here on
    /// by a task of its own, so the call's pushes flow whoever polls), a
    /// failure, any other message, or any answer while the standalone
    /// stream is open (behind whatever that stream already handed up for
    /// the call: its answer must not overtake them).
    /// A result comes back as the text the server sent ([`Payload::Text`]).
    pub async fn request(&self, msg: Message, expect: i64) -> Option<Result<Payload, ErrorObject>> {
        let shared = &self.0;
        let answer = shared.send_post(msg).await?;
        if answer.is_sse {
            let this = Arc::clone(shared);
            tokio::spawn(Box::pin(async move { this.read_answer(answer).await }));
            return None;
        }
        let body = shared.read_body(answer.body, answer.request_id).await?;
        let up = match Relayable::from_slice(&body) {
            Ok(Relayable::Response {
                id: Id::Number(n),
                outcome,
            }) if n == expect && !shared.standalone_open.load(Ordering::Acquire) => {
                return Some(outcome);
            }
            // Still the server's text: the session hands it to its waiter as it is.
            Ok(Relayable::Response { id, outcome }) => Inbound::Answer(id, outcome),
            Ok(Relayable::Message(m)) => Inbound::Message(m),
            Err(e) => {
                shared.not_json_rpc(&e.to_string());
                return None;
            }
        };
        let _ = shared.inbound.send(up).await;
        None
    }
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
        post_headers: OnceLock::new(),
        inbound: in_tx,
        max_message_bytes,
        route,
        ready: AtomicBool::new(false),
        standalone_open: AtomicBool::new(false),
    });
    let link = Link {
        direct: Some(Direct(Arc::clone(&shared))),
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
                        let _ = shared.post_headers.set(shared.post_headers_now());
                        shared.ready.store(true, Ordering::Release);
                    }
                }
                _ = &mut shutdown_rx => break,
            }
        }
        if let Some(task) = get_stream {
            task.abort();
        }
        shared.standalone_open.store(false, Ordering::Release);
        // The session's `Direct` keeps `inbound` open for as long as the
        // session lives, so its dispatcher must be told: calls still in
        // flight end as `upstream_lost` now, not at their timeout.
        shared.closed("the session was closed".into()).await;
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

    /// The headers of a POST as the session stands now.
    fn post_headers_now(&self) -> HeaderMap {
        let mut headers = self.headers("application/json, text/event-stream");
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers
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
        let Some(answer) = self.send_post(msg).await else {
            return;
        };
        match body {
            Body::Inline => self.read_answer(answer).await,
            Body::Spawned => {
                let this = Arc::clone(self);
                tokio::spawn(Box::pin(async move { this.read_answer(answer).await }));
            }
        }
    }

    /// POSTs one message and deals with its answer's head; `None` when
    /// nothing is left to read (a 202, a failure already handed up).
    async fn send_post(&self, msg: Message) -> Option<PostAnswer> {
        let (request_id, is_initialize) = match &msg {
            Message::Request { id, method, .. } => (Some(id.clone()), method == "initialize"),
            _ => (None, false),
        };
        // `to_vec`, not `to_string`: Display writes through `fmt` a token at a
        // time. The message itself is dropped now, not held while a call waits.
        let bytes = serde_json::to_vec(&msg).unwrap_or_default();
        drop(msg);
        let had_session = lock(&self.session_id).is_some();
        let headers = match self.post_headers.get() {
            Some(ready) => ready.clone(),
            None => self.post_headers_now(),
        };
        // Boxed: the request future is large and done once the head is in,
        // while the task reading the answer lives on for as long as the
        // call's stream stays open (a question waiting for a person).
        let sending =
            Box::pin(
                self.client
                    .send(Method::POST, &self.url, headers, Bytes::from(bytes)),
            );
        let resp = match sending.await {
            Ok(r) => r,
            Err(e) => {
                self.closed(format!("POST {} failed: {e}", self.url)).await;
                return None;
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
            return None;
        }
        if status == StatusCode::ACCEPTED {
            return None;
        }
        if !status.is_success() {
            // Boxed, as the other rare or short steps: the reading task's
            // future is as large as its largest await, and lives as long as the call.
            Box::pin(self.refused(resp, had_session, request_id)).await;
            return None;
        }
        Some(PostAnswer {
            is_sse: client::is_event_stream(resp.headers()),
            // The head is done with: only the body is read on, for as long as the call waits.
            body: resp.into_body(),
            request_id,
        })
    }

    /// The answer to a POST: an SSE stream (a tool call's stays open while
    /// the answers to its pushed questions are POSTed) or one JSON message.
    async fn read_answer(&self, answer: PostAnswer) {
        let PostAnswer {
            body,
            is_sse,
            request_id,
        } = answer;
        if is_sse {
            self.pump_sse(body, request_id).await;
        } else if let Some(msg) = self.read_json(body, request_id).await {
            let _ = self.inbound.send(Inbound::Message(msg)).await;
        }
    }

    /// A JSON answer's one message; `None` for an empty body, or when the
    /// body could not be read (the request is failed) or is no JSON-RPC
    /// message (logged).
    async fn read_json(&self, body: ResponseBody, request_id: Option<Id>) -> Option<Message> {
        let body = self.read_body(body, request_id).await?;
        match message_from_body(&body) {
            Ok(msg) => Some(msg),
            Err(e) => {
                self.not_json_rpc(&e);
                None
            }
        }
    }

    /// A JSON answer's bytes; `None` for an empty body, or when the body
    /// could not be read (the request is failed).
    async fn read_body(&self, body: ResponseBody, request_id: Option<Id>) -> Option<Vec<u8>> {
        match read_limited(body, self.max_message_bytes).await {
            Ok(body) if body.is_empty() => None,
            Ok(body) => Some(body),
            Err(e) => {
                self.fail_request(
                    request_id,
                    ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                )
                .await;
                None
            }
        }
    }

    /// A non-2xx answer to a POST: the session is gone, the server's own
    /// JSON-RPC error, or an HTTP failure of the request.
    async fn refused(
        &self,
        resp: http::Response<ResponseBody>,
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

    /// Hands up one message; `stream` is the request whose POST answer
    /// carried it. A result is handed up as the server sent it.
    async fn deliver_on(&self, stream: Option<&Id>, data: &[u8]) {
        let item = match Relayable::from_slice(data) {
            Ok(Relayable::Response { id, outcome }) => Inbound::Answer(id, outcome),
            Ok(Relayable::Message(msg)) => match stream {
                Some(id) => Inbound::OnStream(id.clone(), msg),
                None => Inbound::Message(msg),
            },
            Err(e) => return self.not_json_rpc(&e.to_string()),
        };
        let _ = self.inbound.send(item).await;
    }

    fn not_json_rpc(&self, error: &str) {
        tracing::warn!(route = %self.route, %error, "upstream sent a message that is not JSON-RPC");
    }

    async fn pump_sse(&self, mut body: ResponseBody, request_id: Option<Id>) {
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
        // Flagged before `ready`, not when the pump's task first runs.
        self.standalone_open.store(true, Ordering::Release);
        let this = Arc::clone(self);
        Some(tokio::spawn(async move {
            this.pump_standalone(resp.into_body()).await;
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
                        this.pump_standalone(resp.into_body()).await;
                    }
                    _ => failures += 1,
                }
            }
        }))
    }

    /// Reads the standalone stream until it ends, flagged open meanwhile.
    async fn pump_standalone(&self, body: ResponseBody) {
        self.standalone_open.store(true, Ordering::Release);
        self.pump_sse(body, None).await;
        self.standalone_open.store(false, Ordering::Release);
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use serde_json::{Value, json};

    /// A legacy server in the test: `initialize` gives a session id, the
    /// standalone GET is refused (or, with `standalone`, kept open and
    /// silent), and `tools/call` answers by its tool's name: `json` with its
    /// JSON body, `other` with another request's answer, `sse` with a
    /// notification and then its answer on a stream, `hang` with a stream
    /// that never answers.
    async fn server(standalone: bool) -> String {
        use http_body_util::combinators::BoxBody;
        use http_body_util::{Full, StreamBody};
        type Body = BoxBody<Bytes, std::convert::Infallible>;
        fn full(text: String) -> Body {
            BodyExt::boxed(Full::new(Bytes::from(text)))
        }
        fn open_forever() -> Body {
            let never = futures::stream::pending::<
                Result<hyper::body::Frame<Bytes>, std::convert::Infallible>,
            >();
            BodyExt::boxed(StreamBody::new(never))
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| async move {
                            let method = req.method().clone();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let mut resp = http::Response::new(full(String::new()));
                            if method == Method::GET || method == Method::DELETE {
                                if method == Method::GET && standalone {
                                    resp.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("text/event-stream"),
                                    );
                                    *resp.body_mut() = open_forever();
                                } else {
                                    *resp.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                                }
                                return Ok::<_, std::convert::Infallible>(resp);
                            }
                            let msg: Value = serde_json::from_slice(&body).unwrap();
                            let id = msg["id"].clone();
                            let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
                            let (kind, text) = match (
                                msg["method"].as_str(),
                                msg["params"]["name"].as_str(),
                            ) {
                                (Some("initialize"), _) => {
                                    resp.headers_mut()
                                        .insert("mcp-session-id", HeaderValue::from_static("s-1"));
                                    (
                                        "application/json",
                                        answer(json!({"protocolVersion": "2025-11-25"}))
                                            .to_string(),
                                    )
                                }
                                (Some("tools/call"), Some("json")) => (
                                    "application/json",
                                    answer(json!({"content": []})).to_string(),
                                ),
                                (Some("tools/call"), Some("other")) => (
                                    "application/json",
                                    json!({"jsonrpc": "2.0", "id": 999, "result": {}}).to_string(),
                                ),
                                (Some("tools/call"), Some("sse")) => (
                                    "text/event-stream",
                                    format!(
                                        "data: {}\n\ndata: {}\n\n",
                                        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}),
                                        answer(json!({"content": []})),
                                    ),
                                ),
                                (Some("tools/call"), Some("hang")) => {
                                    resp.headers_mut().insert(
                                        CONTENT_TYPE,
                                        HeaderValue::from_static("text/event-stream"),
                                    );
                                    *resp.body_mut() = open_forever();
                                    return Ok(resp);
                                }
                                _ => {
                                    *resp.status_mut() = StatusCode::ACCEPTED;
                                    return Ok(resp);
                                }
                            };
                            resp.headers_mut()
                                .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
                            *resp.body_mut() = full(text);
                            Ok(resp)
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        format!("http://{addr}/mcp")
    }

    fn call(id: i64, tool: &str) -> Message {
        Message::Request {
            id: Id::Number(id),
            method: "tools/call".into(),
            params: Some(json!({"name": tool})),
        }
    }

    /// A link past its handshake, and its direct requests.
    async fn ready_link(standalone: bool) -> (Link, Direct) {
        let url = server(standalone).await;
        let mut link = connect(
            client::for_tests(),
            &url,
            &BTreeMap::new(),
            "r".into(),
            1 << 20,
        )
        .unwrap();
        let direct = link.direct.clone().unwrap();
        link.outbound
            .send(Message::Request {
                id: Id::Number(0),
                method: "initialize".into(),
                params: None,
            })
            .await
            .unwrap();
        assert!(matches!(
            link.inbound.recv().await,
            Some(Inbound::Message(Message::Response { .. }))
        ));
        assert!(!direct.ready(), "requests wait behind the handshake");
        link.outbound
            .send(Message::Notification {
                method: "notifications/initialized".into(),
                params: None,
            })
            .await
            .unwrap();
        // Bounded: a `ready` that never turns fails the test instead of hanging it.
        tokio::time::timeout(Duration::from_secs(10), async {
            while !direct.ready() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("ready once initialized is sent");
        (link, direct)
    }

    #[tokio::test]
    async fn a_json_answer_to_a_direct_request_comes_back_to_its_caller() {
        let (mut link, direct) = ready_link(false).await;
        let outcome = direct.request(call(7, "json"), 7).await;
        assert!(
            matches!(&outcome, Some(Ok(Payload::Text(_)))),
            "kept as the server's text: {outcome:?}"
        );
        assert_eq!(
            outcome.map(|o| o.map(Payload::into_value)),
            Some(Ok(json!({"content": []})))
        );
        assert!(
            link.inbound.try_recv().is_err(),
            "nothing else is handed up"
        );
    }

    #[tokio::test]
    async fn any_other_json_answer_is_handed_up_to_the_session() {
        let (mut link, direct) = ready_link(false).await;
        assert_eq!(direct.request(call(7, "other"), 7).await, None);
        match link.inbound.recv().await {
            Some(Inbound::Answer(id, _)) => assert_eq!(id, Id::Number(999)),
            other => panic!("expected the stray answer handed up, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_streamed_answer_reaches_the_session_on_its_requests_stream() {
        let (mut link, direct) = ready_link(false).await;
        assert_eq!(direct.request(call(7, "sse"), 7).await, None);
        match link.inbound.recv().await {
            Some(Inbound::OnStream(id, Message::Notification { method, .. })) => {
                assert_eq!(
                    (id, method.as_str()),
                    (Id::Number(7), "notifications/progress")
                );
            }
            other => panic!("expected the notification on call 7's stream, got {other:?}"),
        }
        match link.inbound.recv().await {
            Some(Inbound::Answer(answered, Ok(Payload::Text(result)))) => {
                assert_eq!(answered, Id::Number(7));
                assert_eq!(result.get(), r#"{"content":[]}"#, "as the server sent it");
            }
            other => panic!("expected call 7's answer, kept as text, got {other:?}"),
        }
    }

    /// Whatever the standalone stream handed up for a call is dispatched
    /// before the call's own answer: the answer goes the same way.
    #[tokio::test]
    async fn with_a_standalone_stream_open_a_json_answer_goes_through_the_session() {
        let (mut link, direct) = ready_link(true).await;
        assert_eq!(direct.request(call(7, "json"), 7).await, None);
        match link.inbound.recv().await {
            Some(Inbound::Answer(id, Ok(Payload::Text(result)))) => {
                assert_eq!(id, Id::Number(7));
                assert_eq!(result.get(), r#"{"content":[]}"#, "as the server sent it");
            }
            other => panic!("expected call 7's answer handed up, got {other:?}"),
        }
    }

    /// The session keeps a `Direct` (and so a sender of `inbound`) for as
    /// long as it lives: closing the link must still tell its dispatcher,
    /// or a call in flight would wait for its timeout.
    #[tokio::test]
    async fn closing_the_link_tells_the_session_while_a_call_waits() {
        let (mut link, direct) = ready_link(false).await;
        assert_eq!(direct.request(call(7, "hang"), 7).await, None);
        let _ = link.shutdown.send(());
        let closed = tokio::time::timeout(Duration::from_secs(10), link.inbound.recv())
            .await
            .expect("the link hands up its end without waiting for the call");
        match closed {
            Some(Inbound::Closed(why)) => assert!(why.contains("closed"), "{why}"),
            other => panic!("expected Closed, got {other:?}"),
        }
        drop(direct);
    }

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
