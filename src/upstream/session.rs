//! One legacy MCP session: the `initialize` handshake declaring exactly one
//! capability profile, request/response correlation, and the routing of what
//! the server sends: responses to their waiters, request-scoped traffic
//! (progress, log messages, pushed requests) to the call it belongs to (by
//! the stream it came on, or the one call in flight), and list-changed
//! notices to the route.

use foldhash::{HashMap, HashMapExt};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

mod call;
mod inbound;

use super::UpstreamError;
use super::mode::RouteMode;
pub use super::notices::Notice;
use super::notices::Notices;
use super::transport::Link;
use super::transport::http::{Direct, Posted};
use crate::jsonrpc::{ErrorObject, Id, Message, Payload};
use crate::protocol::profile::Profile;
use crate::upstream::lock;
pub use call::{Call, CallEvent, CallStep, END_GRACE};
use inbound::dispatch;

/// Legacy protocol versions redmark speaks to servers, newest first
/// (spec 2025-11-25 `basic/lifecycle.mdx` "Version Negotiation").
pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Where a call in flight receives its events, and how many it missed.
#[derive(Clone)]
struct CallSink {
    /// A `futures` channel of boxes, not tokio's: tokio's allocates its
    /// slots 32 at a time and pads its halves to cache lines (about 800
    /// bytes before any message), and a call waiting for a person keeps its
    /// queue for as long as it waits.
    tx: futures::channel::mpsc::Sender<Box<CallEvent>>,
    dropped: Arc<AtomicU64>,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// What the server told us in `initialize`.
#[derive(Debug, Clone, PartialEq)]
pub struct InitInfo {
    pub protocol_version: String,
    pub capabilities: Value,
    /// Shared with every result it is stamped on.
    pub server_info: Arc<crate::protocol::shape::ServerInfo>,
    pub instructions: Option<String>,
}

type Waiter = oneshot::Sender<Result<Payload, ErrorObject>>;

/// What a timed-out request leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnTimeout {
    /// `notifications/cancelled` for it (and the session is not reused).
    Cancel,
    /// Nothing: `initialize` is never cancelled; its session is closed instead.
    Forget,
}

struct State {
    pending: Mutex<HashMap<i64, Waiter>>,
    /// The calls in flight, by upstream request id: one on an exclusive
    /// session, up to `max_operations_per_session` on a multiplexed one.
    calls: Mutex<HashMap<i64, CallSink>>,
    alive: AtomicBool,
    /// A call was abandoned mid-flight. Where traffic is attributed by "the
    /// one call in flight", late traffic for it could be mistaken for another
    /// operation's, so the session is not reused unless the route is
    /// multiplexed (attribution by stream, where late traffic has no owner).
    abandoned: AtomicBool,
    /// What the route learned about its server's pushes; the dispatcher teaches it.
    mode: Arc<RouteMode>,
    lost_reason: Mutex<Option<String>>,
    next_id: AtomicI64,
}

pub struct Session {
    pub local_id: u64,
    pub route: Arc<str>,
    pub profile: Profile,
    /// Shared: the catalog keeps the latest session's for `server/discover`
    /// without a copy per lease.
    pub init: Arc<InitInfo>,
    pub created: Instant,
    outbound: mpsc::Sender<Message>,
    /// Requests POSTed from the caller's task (HTTP): see [`Direct`].
    direct: Option<Direct>,
    state: Arc<State>,
    upstream_session_id: Arc<Mutex<Option<String>>>,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    ended: tokio::sync::watch::Receiver<bool>,
    /// How long a message may wait for room in the outbound queue.
    write_timeout: Duration,
    /// Leased at least once ([`Session::first_lease`]).
    leased: AtomicBool,
}

/// The bounds of a session's waits on its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// For the answer to `initialize` (`init_timeout`).
    pub init: Duration,
    /// For the server to take what redmark sends (`request_timeout`): a
    /// server that stops reading is lost, not waited on forever.
    pub write: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("local_id", &self.local_id)
            .field("route", &self.route)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Runs the legacy handshake over a fresh transport.
    pub async fn start(
        link: Link,
        route: Arc<str>,
        profile: Profile,
        notices: Notices,
        timeouts: Timeouts,
        mode: Arc<RouteMode>,
    ) -> Result<Arc<Session>, UpstreamError> {
        let init_timeout = timeouts.init;
        let Link {
            direct,
            outbound,
            inbound,
            session_id,
            protocol_version,
            shutdown,
            ended,
        } = link;
        let state = Arc::new(State {
            pending: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            alive: AtomicBool::new(true),
            abandoned: AtomicBool::new(false),
            mode,
            lost_reason: Mutex::new(None),
            next_id: AtomicI64::new(1),
        });
        // The dispatcher only holds a weak sender: the session alone keeps the
        // outbound queue open, so dropping it closes a stdio server's stdin,
        // its cue to exit (spec 2025-11-25 transports.mdx "stdio").
        tokio::spawn(dispatch(
            inbound,
            state.clone(),
            outbound.downgrade(),
            notices,
            route.clone(),
        ));

        let local_id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        let mut session = Session {
            local_id,
            route,
            profile,
            init: Arc::new(InitInfo {
                protocol_version: String::new(),
                capabilities: json!({}),
                server_info: Arc::new(crate::protocol::shape::ServerInfo::new(json!({}))),
                instructions: None,
            }),
            created: Instant::now(),
            outbound,
            direct,
            state,
            upstream_session_id: session_id,
            shutdown: Mutex::new(Some(shutdown)),
            ended,
            write_timeout: timeouts.write,
            leased: AtomicBool::new(false),
        };
        let params = json!({
            "protocolVersion": LEGACY_VERSIONS[0],
            "capabilities": profile.initialize_capabilities(),
            "clientInfo": {"name": "redmark", "title": "redmark MCP gateway", "version": env!("CARGO_PKG_VERSION")},
        });
        // A transport that ends before `initialize` is answered never gave us a
        // session to lose, and a server that never answers it never gave us one
        // to time out on: either way the server is unavailable.
        // spec 2025-11-25 basic/utilities/cancellation.mdx: "The `initialize`
        // request MUST NOT be cancelled by clients", so a timeout here sends no
        // `notifications/cancelled`: the session is closed (dropped) instead.
        let answer = match session
            .request_with("initialize", Some(params), init_timeout, OnTimeout::Forget)
            .await
        {
            Ok(answer) => answer,
            Err(UpstreamError::Lost(why)) => return Err(UpstreamError::Unavailable(why)),
            Err(UpstreamError::Timeout(after)) => {
                session.close();
                return Err(UpstreamError::Unavailable(format!(
                    "the server did not answer initialize within {after:?}"
                )));
            }
            Err(other) => return Err(other),
        };
        let result = match answer {
            Ok(result) => result,
            Err(e) => {
                return Err(UpstreamError::Unavailable(format!(
                    "initialize was refused: {} ({})",
                    e.message, e.code
                )));
            }
        };
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // spec 2025-11-25 lifecycle.mdx "Version Negotiation": a client that does not
        // support the server's version SHOULD disconnect.
        if !LEGACY_VERSIONS.contains(&version.as_str()) {
            session.close();
            return Err(UpstreamError::Incompatible(version));
        }
        *lock(&protocol_version) = Some(version.clone());
        session.init = Arc::new(InitInfo {
            protocol_version: version,
            capabilities: result
                .get("capabilities")
                .cloned()
                .unwrap_or_else(|| json!({})),
            server_info: Arc::new(crate::protocol::shape::ServerInfo::new(
                result
                    .get("serverInfo")
                    .cloned()
                    .unwrap_or_else(|| json!({"name": "unknown", "version": "0"})),
            )),
            instructions: result
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_owned),
        });
        // spec 2025-11-25 lifecycle.mdx "Initialization": "the client MUST send an initialized notification".
        session.notify("notifications/initialized", None).await?;
        Ok(Arc::new(session))
    }

    /// True for the first lease of this session only (its route then
    /// publishes what the session's `initialize` told it).
    pub fn first_lease(&self) -> bool {
        !self.leased.load(Ordering::Relaxed) && !self.leased.swap(true, Ordering::Relaxed)
    }

    pub fn is_alive(&self) -> bool {
        self.state.alive.load(Ordering::Acquire)
            && !self.direct.as_ref().is_some_and(Direct::is_gone)
    }

    /// Alive, and either never left with a half-finished call or attributing
    /// traffic by stream (multiplexed), where a half-finished call's late
    /// traffic reaches nobody.
    pub fn is_reusable(&self) -> bool {
        self.is_alive()
            && (!self.state.abandoned.load(Ordering::Acquire) || self.state.mode.is_multiplexed())
    }

    /// Calls in flight on this session right now.
    pub fn calls_in_flight(&self) -> usize {
        lock(&self.state.calls).len()
    }

    pub fn upstream_session_id(&self) -> Option<String> {
        lock(&self.upstream_session_id).clone()
    }

    fn lost(&self) -> UpstreamError {
        UpstreamError::Lost(
            lock(&self.state.lost_reason)
                .clone()
                .unwrap_or_else(|| "the session closed".into()),
        )
    }

    async fn send(&self, msg: Message) -> Result<(), UpstreamError> {
        if !self.is_alive() {
            return Err(self.lost());
        }
        match tokio::time::timeout(self.write_timeout, self.outbound.send(msg)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(self.lost()),
            Err(_) => {
                // The queue stayed full: the server stopped reading. Waiting
                // longer would only hold the operation (and its memory) forever.
                lock(&self.state.lost_reason).get_or_insert_with(|| {
                    format!(
                        "the server stopped reading its input (nothing taken for {:?})",
                        self.write_timeout
                    )
                });
                tracing::warn!(route = %self.route, session = self.local_id, "upstream stopped reading; session closed");
                self.close();
                Err(self.lost())
            }
        }
    }

    pub async fn notify(&self, method: &str, params: Option<Value>) -> Result<(), UpstreamError> {
        self.send(Message::Notification {
            method: method.into(),
            params,
        })
        .await
    }

    /// Answers a request the server pushed.
    pub async fn respond(
        &self,
        id: Id,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), UpstreamError> {
        let msg = Message::Response { id, outcome };
        match self.ready_direct() {
            Some(direct) => {
                // Bounded like a queued message: a server that does not take
                // its answer within `request_timeout` has stopped reading.
                match tokio::time::timeout(self.write_timeout, direct.answer(msg)).await {
                    Ok(()) => Ok(()),
                    Err(_) => Err(UpstreamError::Timeout(self.write_timeout)),
                }
            }
            None => self.send(msg).await,
        }
    }

    /// The transport's direct requests, once the handshake is over and
    /// while the session lives.
    fn ready_direct(&self) -> Option<&Direct> {
        self.direct
            .as_ref()
            .filter(|d| d.ready() && self.is_alive())
    }

    fn register(&self) -> (i64, oneshot::Receiver<Result<Payload, ErrorObject>>) {
        let id = self.state.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.state.pending).insert(id, tx);
        (id, rx)
    }

    /// A request that involves no person: waits at most `timeout`, then
    /// cancels it upstream.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        self.request_with(method, params, timeout, OnTimeout::Cancel)
            .await
    }

    async fn request_with(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        on_timeout: OnTimeout,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let (id, mut rx) = self.register();
        // Whatever way this future ends (answered, lost, timed out, or
        // dropped by a caller that went away), the waiter goes with it.
        let waiting = Waiting::new(self, id, on_timeout);
        let msg = Message::Request {
            id: Id::Number(id),
            method: method.into(),
            params: params.map(Payload::from),
        };
        let mut posting = match self.ready_direct() {
            // Boxed: the POST's future is large, and this one is part of
            // every future that awaits a request.
            Some(direct) => Some(Box::pin(direct.request(msg, id))),
            None => {
                if let Err(e) = self.send(msg).await {
                    waiting.settled();
                    return Err(e);
                }
                None
            }
        };
        match tokio::time::timeout(timeout, outcome(&mut posting, &mut rx)).await {
            Ok(Outcome::Answered(outcome)) => {
                waiting.settled();
                // Read here: a request's result is read by redmark, not relayed.
                Ok(outcome.map(Payload::into_value))
            }
            // A request redmark makes itself (tools/list, ...) is not sent
            // again: its caller hears the session is gone.
            Ok(Outcome::Lost | Outcome::NotSent) => {
                waiting.settled();
                Err(self.lost())
            }
            Err(_) => {
                waiting.timed_out();
                Err(UpstreamError::Timeout(timeout))
            }
        }
    }

    /// `notifications/cancelled` for a call still in flight, sent (or the
    /// session found lost) before this returns; the call's waiter stays.
    async fn cancel_now(&self, id: i64, reason: &str) {
        let _ = self
            .notify(
                "notifications/cancelled",
                Some(json!({"requestId": id, "reason": reason})),
            )
            .await;
    }

    /// Tells the server to stop working on one of our requests (never `initialize`).
    fn cancel(&self, id: i64, reason: &str) {
        let msg = Message::Notification {
            method: "notifications/cancelled".into(),
            params: Some(json!({"requestId": id, "reason": reason})),
        };
        // Best effort from synchronous contexts (drop): a full queue means the
        // session is in trouble anyway, and it is retired below.
        let _ = self.outbound.try_send(msg);
        // A server need not answer a cancelled request: a long-lived shared
        // session must not keep its waiter forever.
        lock(&self.state.pending).remove(&id);
        self.state.abandoned.store(true, Ordering::Release);
    }

    /// Resolves once the peer is fully gone after [`Session::close`].
    pub fn ended(&self) -> tokio::sync::watch::Receiver<bool> {
        self.ended.clone()
    }

    /// Ends the session: closes stdin / deletes the HTTP session.
    pub fn close(&self) {
        self.state.alive.store(false, Ordering::Release);
        if let Some(tx) = lock(&self.shutdown).take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

/// A request's waiter while its caller waits. Settled: removed. Dropped
/// unsettled (timed out, or the caller's future dropped): removed, and the
/// request cancelled upstream unless it is `initialize` ([`OnTimeout`]).
struct Waiting<'a> {
    session: &'a Session,
    id: i64,
    on_abandon: OnTimeout,
    /// What the cancellation tells the server.
    reason: &'static str,
    settled: bool,
}

impl<'a> Waiting<'a> {
    fn new(session: &'a Session, id: i64, on_abandon: OnTimeout) -> Self {
        Waiting {
            session,
            id,
            on_abandon,
            reason: "redmark: the client went away",
            settled: false,
        }
    }

    /// Answered, or nothing left to cancel: only the waiter goes.
    fn settled(mut self) {
        self.settled = true;
    }

    fn timed_out(mut self) {
        self.reason = "redmark: request timed out";
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.settled && self.on_abandon == OnTimeout::Cancel {
            self.session.cancel(self.id, self.reason);
        } else {
            lock(&self.session.state.pending).remove(&self.id);
        }
    }
}

/// What became of a request.
enum Outcome {
    Answered(Result<Payload, ErrorObject>),
    /// The session was lost first.
    Lost,
    /// The session was gone before the server processed it ([`Posted::NotSent`]).
    NotSent,
}

/// A request's outcome: from its POST when that answers it, else from the
/// dispatcher. Cancel-safe: the POST stays in `posting` until it is done.
async fn outcome<P>(
    posting: &mut Option<P>,
    response: &mut oneshot::Receiver<Result<Payload, ErrorObject>>,
) -> Outcome
where
    P: Future<Output = Posted> + Unpin,
{
    if let Some(post) = posting {
        let posted = post.await;
        *posting = None;
        match posted {
            Posted::Answered(answer) => return Outcome::Answered(answer),
            Posted::NotSent => return Outcome::NotSent,
            Posted::Elsewhere => {}
        }
    }
    match response.await {
        Ok(answer) => Outcome::Answered(answer),
        Err(_) => Outcome::Lost,
    }
}

#[cfg(test)]
mod tests;
