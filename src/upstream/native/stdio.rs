//! A native server as one child process on stdio: every request is written
//! at once under redmark's own id and its answer matched back by that id, so
//! one process serves any number of concurrent requests. A process that
//! exits fails what is in flight and is started again on the next request.
//!
//! Progress is the one notification a stdio server can tie to a request: it
//! names the request's `progressToken` (spec 2026-07-28
//! basic/utilities/progress.mdx). Tokens from different clients could collide
//! on the one process, so each request carries redmark's own id as its token,
//! and the client's token is put back on what is relayed.
//!
//! A log message names no request, but only a request that asked for logs
//! may have one (spec 2026-07-28 server/utilities/logging.mdx "Per-request
//! log level": "The server MUST NOT emit notifications/message for a request
//! that does not include this field"). So while exactly one request in
//! flight carries `io.modelcontextprotocol/logLevel`, every log message is
//! that request's, and it is relayed to it; while several do, which one a
//! message belongs to cannot be known, and none is relayed.
//!
//! A `subscriptions/listen` is one more request in flight: its notifications
//! carry its id as `io.modelcontextprotocol/subscriptionId` (spec 2026-07-28
//! basic/patterns/subscriptions.mdx "On stdio, where all messages share a
//! single channel, clients MUST use this field to correlate notifications"),
//! and the client leaving sends `notifications/cancelled` for it.

use std::collections::BTreeMap;

use foldhash::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::upstream::UpstreamError;
use crate::upstream::lock;
use crate::upstream::transport::{Inbound, stdio};

/// A request in flight: where its answer goes, and where its progress goes
/// (with the client's own token) if the client asked for progress.
struct Waiter {
    answer: oneshot::Sender<Result<Value, ErrorObject>>,
    progress: Option<(Value, mpsc::Sender<Value>)>,
    /// Set when the request asked for log messages (`_meta` logLevel).
    logs: Option<mpsc::Sender<Value>>,
}

type Waiters = Arc<Mutex<HashMap<i64, Waiter>>>;

/// The listen streams open on one process, by redmark's id for each.
type Listens = Arc<Mutex<HashMap<i64, mpsc::Sender<Message>>>>;

/// Messages one listen stream may have queued for a slow client; beyond it
/// notifications are dropped (a list-changed is a hint to re-read, not data).
const LISTEN_QUEUE: usize = 64;

/// Requests in flight on one process, at most (a bound, not a pool).
const MAX_IN_FLIGHT: usize = 1024;

struct Process {
    outbound: mpsc::Sender<Message>,
    waiters: Waiters,
    listens: Listens,
    /// Dropping it stops the process.
    _shutdown: oneshot::Sender<()>,
    alive: Arc<std::sync::atomic::AtomicBool>,
    /// Set when redmark lets go of the process (the protocol probe's
    /// throwaway process, a closed route): its end is then expected and
    /// logged at DEBUG, where a server that ends on its own is INFO.
    stopped_by_us: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Process {
    fn drop(&mut self) {
        // Runs before the fields drop, so the flag is set before
        // `_shutdown` tells the process to stop.
        self.stopped_by_us.store(true, Ordering::Release);
    }
}

pub struct StdioNative {
    route: Arc<str>,
    program: PathBuf,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
    max_message_bytes: usize,
    process: tokio::sync::Mutex<Option<Arc<Process>>>,
    next_id: AtomicI64,
}

impl StdioNative {
    pub fn new(
        route: Arc<str>,
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: PathBuf,
        max_message_bytes: usize,
    ) -> Self {
        Self {
            route,
            program,
            args,
            env,
            cwd,
            max_message_bytes,
            process: tokio::sync::Mutex::new(None),
            next_id: AtomicI64::new(1),
        }
    }

    async fn process(&self) -> Result<Arc<Process>, UpstreamError> {
        let mut slot = self.process.lock().await;
        if let Some(p) = slot.as_ref()
            && p.alive.load(Ordering::Relaxed)
        {
            return Ok(p.clone());
        }
        let link = stdio::spawn(
            &self.program,
            &self.args,
            &self.env,
            &self.cwd,
            self.route.clone(),
            self.max_message_bytes,
        )?;
        let waiters: Waiters = Arc::default();
        let listens: Listens = Arc::default();
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let stopped_by_us = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (w, l, a, stopped, route) = (
            waiters.clone(),
            listens.clone(),
            alive.clone(),
            stopped_by_us.clone(),
            self.route.clone(),
        );
        let mut inbound = link.inbound;
        tokio::spawn(async move {
            while let Some(msg) = inbound.recv().await {
                match msg {
                    Inbound::Message(Message::Response {
                        id: Id::Number(n),
                        outcome,
                    })
                    | Inbound::OnStream(
                        _,
                        Message::Response {
                            id: Id::Number(n),
                            outcome,
                        },
                    ) => {
                        if let Some(waiter) = lock(&w).remove(&n) {
                            let _ = waiter.answer.send(outcome);
                        } else if let Some(stream) = lock(&l).remove(&n) {
                            // The server ended the listen (graceful closure).
                            let _ = stream.try_send(Message::Response {
                                id: Id::Number(n),
                                outcome,
                            });
                        }
                    }
                    Inbound::Message(Message::Notification { method, params })
                        if method == "notifications/progress" =>
                    {
                        relay_progress(&w, params);
                    }
                    Inbound::Message(Message::Notification { method, params })
                        if method == "notifications/message" =>
                    {
                        relay_log(&w, params);
                    }
                    Inbound::Message(Message::Notification { method, params }) => {
                        relay_listen(&l, method, params);
                    }
                    Inbound::Closed(why) => {
                        if stopped.load(Ordering::Acquire) {
                            // Every start under `protocol = "auto"` probes a
                            // legacy server with a process it then stops:
                            // nothing an operator needs to see.
                            tracing::debug!(route = %route, why, "native stdio server ended (stopped by redmark)");
                        } else {
                            tracing::info!(route = %route, why, "native stdio server ended");
                        }
                        break;
                    }
                    // A 2026-07-28 server pushes no requests; its other
                    // notifications name no request and are not relayed.
                    _ => {}
                }
            }
            a.store(false, Ordering::Relaxed);
            // Every request in flight and every listen hears that the server went away.
            lock(&w).clear();
            lock(&l).clear();
        });
        let p = Arc::new(Process {
            outbound: link.outbound,
            waiters,
            listens,
            _shutdown: link.shutdown,
            alive,
            stopped_by_us,
        });
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Sends one request and waits for its answer. With `notify`, the
    /// server's progress for this request (under the client's
    /// `_meta.progressToken`) goes there as it arrives.
    pub async fn send(
        &self,
        method: &str,
        mut params: Value,
        notify: Option<mpsc::Sender<Value>>,
    ) -> Result<Result<Value, ErrorObject>, UpstreamError> {
        let p = self.process().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let token = params
            .get_mut("_meta")
            .and_then(|m| m.get_mut("progressToken"))
            .map(|t| std::mem::replace(t, json!(id)));
        let wants_logs = params
            .get("_meta")
            .and_then(|m| m.get(crate::protocol::meta::LOG_LEVEL))
            .is_some();
        let logs = notify.clone().filter(|_| wants_logs);
        let (answer, rx) = oneshot::channel();
        {
            let mut w = lock(&p.waiters);
            if w.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::Busy(std::time::Duration::ZERO));
            }
            let progress = token.zip(notify);
            w.insert(
                id,
                Waiter {
                    answer,
                    progress,
                    logs,
                },
            );
        }
        // Removed again however this request ends (answer, timeout, caller gone).
        let _forget = Forget(&p.waiters, id);
        let msg = Message::Request {
            id: Id::Number(id),
            method: method.to_owned(),
            params: Some(params.into()),
        };
        if p.outbound.send(msg).await.is_err() {
            return Err(UpstreamError::Lost("the server's stdin is closed".into()));
        }
        rx.await
            .map_err(|_| UpstreamError::Lost("the server process exited".into()))
    }

    /// Opens a `subscriptions/listen` on the process: the acknowledgement,
    /// the notifications naming it and the server's final answer go to the
    /// receiver. Dropping the receiver cancels the subscription at the server
    /// (spec subscriptions.mdx "Cancellation": `notifications/cancelled`
    /// referencing the listen's id, on stdio).
    pub async fn listen(&self, params: Value) -> Result<mpsc::Receiver<Message>, UpstreamError> {
        let p = self.process().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(LISTEN_QUEUE);
        {
            let mut l = lock(&p.listens);
            if l.len() >= MAX_IN_FLIGHT {
                return Err(UpstreamError::Busy(std::time::Duration::ZERO));
            }
            l.insert(id, tx.clone());
        }
        let msg = Message::Request {
            id: Id::Number(id),
            method: "subscriptions/listen".into(),
            params: Some(params.into()),
        };
        if p.outbound.send(msg).await.is_err() {
            lock(&p.listens).remove(&id);
            return Err(UpstreamError::Lost("the server's stdin is closed".into()));
        }
        let process = p.clone();
        tokio::spawn(async move {
            tx.closed().await;
            // Still open at the server: the client went away first.
            if lock(&process.listens).remove(&id).is_some() {
                let cancel = Message::Notification {
                    method: "notifications/cancelled".into(),
                    params: Some(
                        json!({"requestId": id, "reason": "the client stopped listening"}),
                    ),
                };
                let _ = process.outbound.send(cancel).await;
            }
        });
        Ok(rx)
    }

    pub fn close(&self) {
        if let Ok(mut slot) = self.process.try_lock() {
            slot.take();
        }
    }
}

/// Hands a progress notification to the request whose token (redmark's id
/// for it) it names, with the client's own token put back; never waits: a
/// full queue drops it.
fn relay_progress(waiters: &Waiters, params: Option<Value>) {
    let Some(mut params) = params else { return };
    let Some(id) = params.get("progressToken").and_then(Value::as_i64) else {
        return;
    };
    let w = lock(waiters);
    let Some((token, tx)) = w.get(&id).and_then(|w| w.progress.as_ref()) else {
        return;
    };
    params["progressToken"] = token.clone();
    let _ = tx.try_send(json!({"method": "notifications/progress", "params": params}));
}

/// Hands a log message to the one request in flight that asked for logs;
/// with none or several, to nobody (see the module doc). Never waits: a full
/// queue drops it.
fn relay_log(waiters: &Waiters, params: Option<Value>) {
    let w = lock(waiters);
    let mut asking = w.values().filter_map(|w| w.logs.as_ref());
    let (Some(tx), None) = (asking.next(), asking.next()) else {
        return;
    };
    let mut message = serde_json::Map::new();
    message.insert("method".into(), "notifications/message".into());
    if let Some(p) = params {
        message.insert("params".into(), p);
    }
    let _ = tx.try_send(Value::Object(message));
}

/// Hands a notification to the listen stream its `subscriptionId` (redmark's
/// id for the listen) names; never waits: a full queue drops it.
fn relay_listen(listens: &Listens, method: String, params: Option<Value>) {
    let Some(id) = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(crate::protocol::meta::SUBSCRIPTION_ID))
        .and_then(Value::as_i64)
    else {
        return;
    };
    if let Some(stream) = lock(listens).get(&id) {
        let _ = stream.try_send(Message::Notification { method, params });
    }
}

struct Forget<'a>(&'a Waiters, i64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.0).remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_reaches_the_listen_its_subscription_id_names() {
        let listens: Listens = Arc::default();
        let (tx, mut rx) = mpsc::channel(4);
        lock(&listens).insert(3, tx);
        let on = |id: i64| json!({"_meta": {"io.modelcontextprotocol/subscriptionId": id}});
        relay_listen(
            &listens,
            "notifications/tools/list_changed".into(),
            Some(on(3)),
        );
        relay_listen(
            &listens,
            "notifications/tools/list_changed".into(),
            Some(on(4)),
        );
        relay_listen(&listens, "notifications/message".into(), None);
        match rx.try_recv() {
            Ok(Message::Notification { method, params }) => {
                assert_eq!(method, "notifications/tools/list_changed");
                assert_eq!(params, Some(on(3)));
            }
            other => panic!("{other:?}"),
        }
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_log_message_reaches_the_one_request_that_asked_for_logs() {
        let waiters: Waiters = Arc::default();
        let waiter = |logs: Option<mpsc::Sender<Value>>| Waiter {
            answer: oneshot::channel().0,
            progress: None,
            logs,
        };
        let (tx, mut rx) = mpsc::channel(4);
        lock(&waiters).insert(1, waiter(Some(tx)));
        lock(&waiters).insert(2, waiter(None));
        relay_log(&waiters, Some(json!({"level": "info", "data": "one"})));
        assert_eq!(
            rx.try_recv().ok(),
            Some(
                json!({"method": "notifications/message", "params": {"level": "info", "data": "one"}})
            )
        );
        // Two requests that asked: whose message it is cannot be known.
        let (other, mut other_rx) = mpsc::channel(4);
        lock(&waiters).insert(3, waiter(Some(other)));
        relay_log(&waiters, Some(json!({"level": "info", "data": "two"})));
        assert!(rx.try_recv().is_err());
        assert!(other_rx.try_recv().is_err());
    }

    #[test]
    fn progress_reaches_its_request_under_the_clients_own_token() {
        let waiters: Waiters = Arc::default();
        let (tx, mut rx) = mpsc::channel(4);
        let (answer, _rx) = oneshot::channel();
        lock(&waiters).insert(
            7,
            Waiter {
                answer,
                progress: Some((json!("client-token"), tx)),
                logs: None,
            },
        );
        relay_progress(&waiters, Some(json!({"progressToken": 7, "progress": 1})));
        // Another request's token, or none, reaches nobody.
        relay_progress(&waiters, Some(json!({"progressToken": 8, "progress": 2})));
        relay_progress(&waiters, Some(json!({"progress": 3})));
        assert_eq!(
            rx.try_recv().ok(),
            Some(json!({
                "method": "notifications/progress",
                "params": {"progressToken": "client-token", "progress": 1}
            }))
        );
        assert!(rx.try_recv().is_err());
    }
}
