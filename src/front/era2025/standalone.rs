//! The standalone stream a 2025-era client opens with `GET` (spec
//! 2025-11-25 basic/transports.mdx "Listening for Messages from the
//! Server"): the notices that belong to no request, the list-changed ones
//! and `notifications/resources/updated` for the URIs the session
//! subscribed to.
//!
//! On a legacy server the stream costs no upstream session: it hears the
//! route's notices (`upstream::notices`: what every session of the route
//! was told), the list-changed ones, and `notifications/resources/updated`
//! for the URIs this session subscribed to; the subscriptions themselves
//! live on the route's shared holder (`upstream::subscriptions`, one
//! upstream session per principal and profile with any), made when the
//! client subscribes, not when it opens the stream. Every real 2025-era
//! client opens this stream right after `notifications/initialized` and
//! leaves it open while idle: a session per stream would let idle clients
//! exhaust the route's pool.
//!
//! On a native server it is the server's own `subscriptions/listen`
//! (`front::native`), asking for every list-changed notice and the session's
//! subscriptions; when the session subscribes or unsubscribes, the listen
//! is started again with the new URIs (2026-07-28 has no other way to
//! change a listen's filter). The notices reach the client as the server
//! sent them, without the subscription id 2026-07-28 tags them with.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use super::session::Session;
use crate::front::Gateway;
use crate::front::dispatch::{self, Reply};
use crate::jsonrpc::Id;
use crate::mrtr::Outgoing;
use crate::mrtr::start::STREAM_DEPTH;
use crate::protocol::shape::notification;
use crate::protocol::{ClientRequest, Method, Principal, meta};
use crate::route::Route;
use crate::upstream::notices::Notice;

/// Why a `GET` gets no stream.
pub enum Refused {
    /// The session has one open already (409).
    AlreadyOpen,
}

/// Opens the session's standalone stream: its first message (a comment-free
/// SSE needs one: the first notice, or nothing until one comes) is sent by
/// the task that relays the notices. On a legacy route the stream hears
/// the route's notices from the moment this returns (before the client
/// has the response), so nothing sent after the `GET` is answered is missed.
pub async fn open(
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
    if route.native.is_native().await {
        tokio::spawn(async move {
            relay(&gw, &route, &principal, &session, &tx).await;
            session.standalone.store(false, Ordering::Release);
        });
    } else {
        let notices = route.pool.notices();
        tokio::spawn(async move {
            relay_notices(&gw, notices, &session, &tx).await;
            session.standalone.store(false, Ordering::Release);
        });
    }
    Ok(rx)
}

/// A legacy route's stream: the route's notices this session wants,
/// leasing nothing.
async fn relay_notices(
    gw: &Gateway,
    mut notices: broadcast::Receiver<Notice>,
    session: &Session,
    tx: &mpsc::Sender<Outgoing>,
) {
    let mut shutdown = gw.shutdown_signal();
    loop {
        tokio::select! {
            notice = notices.recv() => match notice {
                Ok(n) if wanted(session, &n) => {
                    let out = notification(&n.method, n.params);
                    if tx.send(Outgoing::Notification(out)).await.is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(session = %session.name, missed, "the standalone stream fell behind the route's notices");
                }
                Err(RecvError::Closed) => return,
            },
            () = tx.closed() => return,
            () = session.ended.cancelled() => return,
            _ = shutdown.changed() => return,
        }
    }
}

/// Whether a route notice is for this session: every list change the
/// server sends (it sends only those its `initialize` promised, which the
/// client was told), and the updates of the URIs the session subscribed to.
fn wanted(session: &Session, n: &Notice) -> bool {
    match n.method.as_str() {
        "notifications/tools/list_changed"
        | "notifications/prompts/list_changed"
        | "notifications/resources/list_changed" => true,
        "notifications/resources/updated" => n
            .params
            .as_ref()
            .and_then(|p| p.get("uri"))
            .and_then(Value::as_str)
            .is_some_and(|uri| session.is_subscribed(uri)),
        _ => false,
    }
}

/// A native route's stream: the server's own listen, started again when the
/// session's subscriptions change.
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
