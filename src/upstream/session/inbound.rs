//! What a legacy server sends, routed: responses to their waiters, pushed
//! requests and request-scoped notifications to the one call in flight,
//! list-changed notices to the route, `ping` answered here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::{CallEvent, Notice, State, lock};
use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::protocol::Reason;
use crate::upstream::transport::Inbound;

/// Answers a request the server sent, if the session can still write.
pub(super) async fn answer(
    outbound: &mpsc::WeakSender<Value>,
    id: Id,
    outcome: Result<Value, ErrorObject>,
) {
    if let Some(outbound) = outbound.upgrade() {
        let _ = outbound
            .send(Message::Response { id, outcome }.to_value())
            .await;
    }
}

/// Routes everything the server sends until the transport ends, then marks
/// the session lost and releases every waiter.
pub(super) async fn dispatch(
    mut inbound: mpsc::Receiver<Inbound>,
    state: Arc<State>,
    outbound: mpsc::WeakSender<Value>,
    notices: broadcast::Sender<Notice>,
    route: Arc<str>,
) {
    let reason = loop {
        let Some(item) = inbound.recv().await else {
            break "the transport ended".to_owned();
        };
        let msg = match item {
            Inbound::Message(m) => m,
            Inbound::Closed(why) => break why,
        };
        match msg {
            Message::Response {
                id: Id::Number(n),
                outcome,
            } => {
                if let Some(waiter) = lock(&state.pending).remove(&n) {
                    let _ = waiter.send(outcome);
                }
            }
            Message::Response { .. } => {}
            Message::Request { id, method, .. } if method == "ping" => {
                answer(&outbound, id, Ok(json!({}))).await;
            }
            Message::Request { id, method, params } => {
                let sink = lock(&state.call_sink).clone();
                let delivered = match sink {
                    Some(sink) => sink
                        .tx
                        .send(CallEvent::ServerRequest {
                            id: id.clone(),
                            method: method.clone(),
                            params,
                        })
                        .await
                        .is_ok(),
                    None => false,
                };
                if !delivered {
                    // spec 2025-11-25 SEP-2260: server requests belong to a client
                    // request; with none in flight there is nobody to ask.
                    tracing::info!(route = %route, %method, "upstream pushed a request with no call in flight; refused");
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
                    let _ = notices.send(Notice { method, params });
                    continue;
                }
                let sink = lock(&state.call_sink).clone();
                match sink {
                    Some(sink) => {
                        if sink
                            .tx
                            .try_send(CallEvent::Notification {
                                method: method.clone(),
                                params,
                            })
                            .is_err()
                            // Once per call: a flood of notifications must not become a flood of log lines.
                            && sink.dropped.fetch_add(1, Ordering::Relaxed) == 0
                        {
                            tracing::warn!(route = %route, %method, "call event queue full; dropping notifications (counted in the operation's end line)");
                        }
                    }
                    None => {
                        tracing::debug!(route = %route, %method, "upstream notification outside any call");
                    }
                }
            }
        }
    };
    state.alive.store(false, Ordering::Release);
    tracing::info!(route = %route, reason = %reason, "upstream session lost");
    // The first reason stands (a session closed for not reading says so).
    lock(&state.lost_reason).get_or_insert(reason);
    // Dropping the waiters tells every caller the session is gone.
    lock(&state.pending).clear();
    lock(&state.call_sink).take();
}
