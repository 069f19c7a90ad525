//! What a legacy server sends, routed: responses to their waiters, pushed
//! requests and request-scoped notifications to the call whose stream carried
//! them (or the one call in flight, when nothing else can own them),
//! list-changed notices to the route, `ping` answered here. Where pushes
//! arrive teaches the route its [`crate::upstream::mode::Mode`].

use foldhash::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{CallEvent, CallSink, Notice, Notices, State, lock};
use crate::jsonrpc::{ErrorObject, Id, Message, Payload};
use crate::protocol::Reason;
use crate::upstream::transport::Inbound;

/// Answers a request the server sent, if the session can still write.
pub(super) async fn answer(
    outbound: &mpsc::WeakSender<Message>,
    id: Id,
    outcome: Result<Value, ErrorObject>,
) {
    if let Some(outbound) = outbound.upgrade() {
        let _ = outbound.send(Message::Response { id, outcome }).await;
    }
}

/// Where a request-scoped message goes: the call whose stream carried it,
/// or, with no stream to tell, the one call in flight. `None`: nobody (or
/// more than one call could own it, and redmark does not guess).
fn owner(state: &State, stream: Option<&Id>) -> Option<CallSink> {
    let calls = lock(&state.calls);
    owner_id(state, &calls, stream).and_then(|id| calls.get(&id).cloned())
}

/// The id of the call [`owner`] names, with the calls already locked.
fn owner_id(state: &State, calls: &HashMap<i64, CallSink>, stream: Option<&Id>) -> Option<i64> {
    if let Some(Id::Number(n)) = stream
        && calls.contains_key(n)
    {
        return Some(*n);
    }
    if stream.is_some() && state.mode.is_multiplexed() {
        // The stream of a request that is no call (or a call already over):
        // on a shared session nothing else can claim it.
        return None;
    }
    if stream.is_none() && state.abandoned.load(Ordering::Acquire) {
        // An abandoned call's late push could look like the one in flight's.
        return None;
    }
    match calls.len() {
        1 => calls.keys().next().copied(),
        _ => None,
    }
}

/// Whether `stream` is the stream of a call in flight.
fn on_call_stream(state: &State, stream: Option<&Id>) -> bool {
    matches!(stream, Some(Id::Number(n)) if lock(&state.calls).contains_key(n))
}

/// Hands an answer to the request waiting for it (none: a late answer to a
/// request given up on, or an id redmark never used).
fn answered(state: &State, id: &Id, outcome: Result<Payload, ErrorObject>) {
    if let Id::Number(n) = id
        && let Some(waiter) = lock(&state.pending).remove(n)
    {
        let _ = waiter.send(outcome);
    }
}

/// Routes everything the server sends until the transport ends, then marks
/// the session lost and releases every waiter.
pub(super) async fn dispatch(
    mut inbound: mpsc::Receiver<Inbound>,
    state: Arc<State>,
    outbound: mpsc::WeakSender<Message>,
    notices: Notices,
    route: Arc<str>,
) {
    let reason = loop {
        let Some(item) = inbound.recv().await else {
            break "the transport ended".to_owned();
        };
        let (stream, msg) = match item {
            Inbound::Message(m) => (None, m),
            Inbound::OnStream(id, m) => (Some(id), m),
            Inbound::Answer(id, outcome) => {
                answered(&state, &id, outcome);
                continue;
            }
            Inbound::Closed(why) => break why,
        };
        match msg {
            Message::Response { id, outcome } => {
                answered(&state, &id, outcome.map(Payload::Tree));
            }
            Message::Request { id, method, .. } if method == "ping" => {
                answer(&outbound, id, Ok(json!({}))).await;
            }
            Message::Request { id, method, params } => {
                let params = params.map(Payload::into_value);
                // What the route learns: a push on its own call's stream
                // means the server names the call each push belongs to; one
                // on no call's stream means it does not (and never will be
                // trusted to).
                if on_call_stream(&state, stream.as_ref()) {
                    state.mode.saw_push_on_call_stream();
                } else if stream.is_none() {
                    state.mode.saw_push_on_standalone();
                }
                let delivered = match owner(&state, stream.as_ref()) {
                    Some(mut sink) => futures::SinkExt::send(
                        &mut sink.tx,
                        Box::new(CallEvent::ServerRequest {
                            id: id.clone(),
                            method: method.clone(),
                            params,
                        }),
                    )
                    .await
                    .is_ok(),
                    None => false,
                };
                if !delivered {
                    // spec 2025-11-25 SEP-2260: server requests belong to a client
                    // request; with none in flight (or none it names) there is nobody to ask.
                    tracing::info!(route = %route, %method, "upstream pushed a request with no call in flight to carry it; refused");
                    let err = ErrorObject::new(
                        Reason::NoRequestInFlight.code(),
                        format!("redmark: no client request is in flight to carry `{method}`"),
                    )
                    .with_data(json!({"reason": Reason::NoRequestInFlight}));
                    answer(&outbound, id, Err(err)).await;
                }
            }
            Message::Notification { method, params } => {
                if method.ends_with("/list_changed") || method == "notifications/resources/updated"
                {
                    notices.send(Notice { method, params });
                    continue;
                }
                // Sent on the sink's own sender, under the lock: a `futures`
                // sender that was cloned could always put one more message in
                // (the channel holds `buffer` plus one per sender), and a
                // clone per notification would make the queue unbounded.
                let mut calls = lock(&state.calls);
                let sink =
                    owner_id(&state, &calls, stream.as_ref()).and_then(|id| calls.get_mut(&id));
                match sink {
                    Some(sink) => {
                        if sink
                            .tx
                            .try_send(Box::new(CallEvent::Notification {
                                method: method.clone(),
                                params,
                            }))
                            .is_err()
                            // Once per call: a flood of notifications must not become a flood of log lines.
                            && sink.dropped.fetch_add(1, Ordering::Relaxed) == 0
                        {
                            tracing::warn!(route = %route, %method, "call event queue full; dropping notifications (counted in the operation's end line)");
                        }
                    }
                    None => {
                        tracing::debug!(route = %route, %method, "upstream notification no call in flight owns");
                    }
                }
            }
        }
    };
    // Redmark closed the session itself when `Session::close` marked it
    // dead first (shutdown, idle, retired, a server that stopped reading,
    // which has its own WARN line), or when the session is gone (it alone
    // holds the outbound queue's sender). Then the transport's end (a stdio
    // server exiting on its closed stdin) is that close, not a fault an
    // operator must look at.
    let closed_here = !state.alive.swap(false, Ordering::AcqRel) || outbound.upgrade().is_none();
    if closed_here {
        tracing::debug!(route = %route, reason = %reason, "upstream session closed");
    } else {
        tracing::info!(route = %route, reason = %reason, "upstream session lost");
    }
    // The first reason stands (a session closed for not reading says so).
    lock(&state.lost_reason).get_or_insert(reason);
    // Dropping the waiters tells every caller the session is gone: every
    // operation on a shared session ends with its own `upstream_lost`.
    lock(&state.pending).clear();
    lock(&state.calls).clear();
}
