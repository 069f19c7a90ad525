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

mod answers;
mod streams;

use super::{Inbound, Link, QUEUE_DEPTH};
use crate::jsonrpc::{ErrorObject, Id, Message, Payload, Relayable};
use crate::sse;
use crate::upstream::UpstreamError;
use crate::upstream::client::{self, HttpClient, ResponseBody};
use crate::upstream::lock;

static SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
static VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// Where a POST's answer is read: in the task that sent it (already its
/// own), or in a task of its own (the link task's ordered POSTs must not wait
/// for a body).
#[derive(Clone, Copy)]
enum Body {
    Inline,
    Spawned,
}

/// What became of a request POSTed from the caller's task ([`Direct::request`]).
#[derive(Debug)]
pub enum Posted {
    /// Answered with the POST's own JSON body.
    Answered(Result<Payload, ErrorObject>),
    /// The answer reaches the session through `inbound` (an SSE stream, a
    /// failure, or an answer behind the standalone stream's traffic).
    Elsewhere,
    /// The server no longer knew the session (404) and so never processed
    /// the request: it may go out again on another session.
    NotSent,
}

/// What the head of a POST's answer left to do.
enum Head {
    /// A body to read.
    Answer(PostAnswer),
    /// Nothing left to read: a 202, or a failure already handed up.
    Done,
    /// 404 for a request carrying the session id: the session is gone (and
    /// already handed up as closed); the message was not processed.
    SessionGone,
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
    /// The session is closed or the server ended it ([`Direct::is_gone`]).
    gone: AtomicBool,
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

    /// POSTs `msg` (an answer to a pushed request) in this task, until the
    /// server has taken it (its 202). Awaited, not spawned, so that whatever
    /// the caller sends next (a `notifications/cancelled` for the call, the
    /// next call on the session) reaches the server after it: a cancellation
    /// that overtakes the answer cuts the tool off instead of letting it end
    /// on the answer.
    pub async fn answer(&self, msg: Message) {
        // Only the head is awaited: a server that answers with a body (it
        // should not: spec 2025-11-25 basic/transports.mdx, a response POSTed
        // is answered 202) has it read by a task of its own.
        self.0.post(msg, Body::Spawned).await;
    }

    /// Whether the server ended the HTTP session (or it failed): set at
    /// once, before the session's dispatcher hears of it, so no lease takes
    /// a session a 404 already retired.
    pub fn is_gone(&self) -> bool {
        self.0.gone.load(Ordering::Acquire)
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
    pub async fn request(&self, msg: Message, expect: i64) -> Posted {
        let shared = &self.0;
        let answer = match shared.send_post(msg).await {
            Head::Answer(answer) => answer,
            Head::Done => return Posted::Elsewhere,
            Head::SessionGone => return Posted::NotSent,
        };
        if answer.is_sse {
            let this = Arc::clone(shared);
            tokio::spawn(Box::pin(async move { this.read_answer(answer).await }));
            return Posted::Elsewhere;
        }
        let Some(body) = shared.read_body(answer.body, answer.request_id).await else {
            return Posted::Elsewhere;
        };
        let up = match Relayable::from_slice(&body) {
            Ok(Relayable::Response {
                id: Id::Number(n),
                outcome,
            }) if n == expect && !shared.standalone_open.load(Ordering::Acquire) => {
                return Posted::Answered(outcome);
            }
            // Still the server's text: the session hands it to its waiter as it is.
            Ok(Relayable::Response { id, outcome }) => Inbound::Answer(id, outcome),
            Ok(Relayable::Message(m)) => Inbound::Message(m),
            Err(e) => {
                shared.not_json_rpc(&e.to_string());
                return Posted::Elsewhere;
            }
        };
        let _ = shared.inbound.send(up).await;
        Posted::Elsewhere
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
        gone: AtomicBool::new(false),
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
        self.gone.store(true, Ordering::Release);
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
        let Head::Answer(answer) = self.send_post(msg).await else {
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

    /// POSTs one message and deals with its answer's head.
    async fn send_post(&self, msg: Message) -> Head {
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
                return Head::Done;
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
        // spec 2025-06-18 transports.mdx "Session Management": "When a client
        // receives HTTP 404 in response to a request containing an
        // `Mcp-Session-Id`, it MUST start a new session": the server no longer
        // has this one, and did not process what this POST carried.
        if status == StatusCode::NOT_FOUND && had_session {
            self.closed("the server ended the HTTP session (404)".into())
                .await;
            return Head::SessionGone;
        }
        if status == StatusCode::ACCEPTED {
            return Head::Done;
        }
        if !status.is_success() {
            // Boxed, as the other rare or short steps: the reading task's
            // future is as large as its largest await, and lives as long as the call.
            Box::pin(self.refused(resp, had_session, request_id)).await;
            return Head::Done;
        }
        Head::Answer(PostAnswer {
            is_sse: client::is_event_stream(resp.headers()),
            // The head is done with: only the body is read on, for as long as the call waits.
            body: resp.into_body(),
            request_id,
        })
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
mod tests;
