//! The standalone stream a 2025-era client opens with `GET` (spec
//! 2025-11-25 basic/transports.mdx "Listening for Messages from the
//! Server"): the notices that belong to no request, the list-changed ones
//! and `notifications/resources/updated` for the URIs the session
//! subscribed to.
//!
//! It is a 2026 `subscriptions/listen` underneath (`front::listen` for a
//! legacy server, the server's own for a native one), asking for every
//! list-changed notice and the session's subscriptions; when the session
//! subscribes or unsubscribes, the listen is started again with the new
//! URIs. The notices reach the client as the server sent them, without the
//! subscription id 2026-07-28 tags them with.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::session::Session;
use crate::front::Gateway;
use crate::front::dispatch::{self, Reply};
use crate::jsonrpc::Id;
use crate::mrtr::Outgoing;
use crate::mrtr::start::STREAM_DEPTH;
use crate::protocol::{ClientRequest, Method, Principal, meta};
use crate::route::Route;

/// Why a `GET` gets no stream.
pub enum Refused {
    /// The session has one open already (409).
    AlreadyOpen,
}

/// Opens the session's standalone stream: its first message (a comment-free
/// SSE needs one: the first notice, or nothing until one comes) is sent by
/// the task that relays the listen.
pub fn open(
    gw: Arc<Gateway>,
    route: Arc<Route>,
    principal: Principal,
    session: Arc<Session>,
) -> Result<mpsc::Receiver<Outgoing>, Refused> {
    if session
        .standalone
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(Refused::AlreadyOpen);
    }
    let (tx, rx) = mpsc::channel(STREAM_DEPTH);
    tokio::spawn(async move {
        relay(&gw, &route, &principal, &session, &tx).await;
        session.standalone.store(false, Ordering::Release);
    });
    Ok(rx)
}

async fn relay(
    gw: &Gateway,
    route: &Arc<Route>,
    principal: &Principal,
    session: &Session,
    tx: &mpsc::Sender<Outgoing>,
) {
    let mut changed = session.watch_subscriptions();
    let mut shutdown = gw.shutdown_signal();
    loop {
        changed.borrow_and_update();
        let listen = listen_request(session);
        let mut upstream = match dispatch::dispatch(
            gw,
            route.clone(),
            principal.clone(),
            Box::new(listen),
            None,
        )
        .await
        {
            // The acknowledgement is 2026-07-28's own: not for this client.
            Reply::Stream { rx, .. } => rx,
            Reply::Json(out) => {
                tracing::debug!(session = %session.name, answer = ?out, "the standalone stream's listen was refused");
                return;
            }
        };
        loop {
            tokio::select! {
                out = upstream.recv() => match out {
                    Some(Outgoing::Notification(n)) => {
                        if n.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
                            continue;
                        }
                        if tx.send(Outgoing::Notification(untagged(n))).await.is_err() {
                            return;
                        }
                    }
                    // The listen ended (the server closed it, or shutdown).
                    Some(Outgoing::Final { .. }) | None => return,
                },
                // New subscriptions: listen again with them (dropping this
                // listen ends it upstream).
                Ok(()) = changed.changed() => break,
                () = tx.closed() => return,
                () = session.ended.cancelled() => return,
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// The `subscriptions/listen` the stream rides on: every list-changed
/// notice and the session's subscribed URIs.
fn listen_request(session: &Session) -> ClientRequest {
    let mut members = Map::new();
    members.insert(
        "notifications".into(),
        json!({
            "toolsListChanged": true,
            "promptsListChanged": true,
            "resourcesListChanged": true,
            "resourceSubscriptions": session.subscriptions(),
        }),
    );
    super::on_behalf(
        Id::String(format!("standalone-{}", session.name)),
        Method::SubscriptionsListen,
        members,
        session.capabilities.clone(),
        session.client_info.clone(),
    )
}

/// A notice without the subscription id (and without a `_meta` left empty).
fn untagged(mut n: Value) -> Value {
    let empty = n
        .get_mut("params")
        .and_then(|p| p.get_mut("_meta"))
        .and_then(Value::as_object_mut)
        .map(|m| {
            m.shift_remove(meta::SUBSCRIPTION_ID);
            m.is_empty()
        });
    if empty == Some(true)
        && let Some(p) = n.get_mut("params").and_then(Value::as_object_mut)
    {
        p.shift_remove("_meta");
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_loses_its_subscription_id() {
        let n = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": "u", "_meta": {meta::SUBSCRIPTION_ID: "s"}}});
        assert_eq!(
            untagged(n),
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "u"}})
        );
        let kept = json!({"method": "m", "params": {"_meta": {meta::SUBSCRIPTION_ID: 1, "x": 2}}});
        assert_eq!(untagged(kept)["params"]["_meta"], json!({"x": 2}));
    }
}
