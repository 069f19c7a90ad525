//! `subscriptions/listen` (spec 2026-07-28 `basic/patterns/subscriptions.mdx`):
//! acknowledged first, then the route's list-changed and resource-updated
//! notices the client opted into, each tagged with the subscription id.
//!
//! A listen holds no upstream session of its own. Its list-changed notices
//! are the route's (`upstream::notices`: every session of the route feeds
//! them), and its resource subscriptions are held on the route's shared
//! holder (`upstream::subscriptions`: one upstream session per principal and
//! profile that has any, each URI subscribed once for all its listeners).
//! So a thousand idle listens cost the route no session, and one with
//! subscriptions shares its session with every other listen and 2025-era
//! stream of the same principal and profile.

use std::collections::HashSet;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use super::Gateway;
use super::dispatch::Reply;
use crate::jsonrpc::Id;
use crate::mrtr::{Outcome, Outgoing};
use crate::protocol::shape::notification;
use crate::protocol::{ClientRequest, IntoReject, Principal, Reason, Reject, meta};
use crate::route::Route;

/// The filter the client sent, reduced to what the server can honour.
#[derive(Debug, Default, PartialEq)]
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: HashSet<String>,
}

impl Filter {
    fn ack(&self) -> Value {
        let mut o = Map::new();
        if self.tools {
            o.insert("toolsListChanged".into(), true.into());
        }
        if self.prompts {
            o.insert("promptsListChanged".into(), true.into());
        }
        if self.resources {
            o.insert("resourcesListChanged".into(), true.into());
        }
        if !self.uris.is_empty() {
            let mut uris: Vec<&String> = self.uris.iter().collect();
            uris.sort();
            o.insert("resourceSubscriptions".into(), json!(uris));
        }
        Value::Object(o)
    }

    fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        match method {
            "notifications/tools/list_changed" => self.tools,
            "notifications/prompts/list_changed" => self.prompts,
            "notifications/resources/list_changed" => self.resources,
            "notifications/resources/updated" => params
                .and_then(|p| p.get("uri"))
                .and_then(Value::as_str)
                .is_some_and(|u| self.uris.contains(u)),
            _ => false,
        }
    }
}

/// `params` with the subscription id in `_meta` (every notice of a listen).
pub(crate) fn tag(id: &Id, params: Option<Value>) -> Value {
    let mut p = match params {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    let m = p.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(m) = m {
        m.insert(meta::SUBSCRIPTION_ID.into(), id.to_value());
    }
    Value::Object(p)
}

pub async fn start(
    gw: &Gateway,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> Reply {
    let Some(requested) = req.params.get("notifications").and_then(Value::as_object) else {
        return Reply::reject(
            &req.id,
            &Reject::new(
                Reason::InvalidParams,
                "`params.notifications` (the subscription filter) is required",
            ),
        );
    };
    let caps = match server_capabilities(&route, &principal, req.ctx.profile).await {
        Ok(caps) => caps,
        Err(e) => return Reply::reject(&req.id, &e.into_reject()),
    };
    let flag = |name: &str| {
        requested
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let listed = |cap: &str| {
        caps.get(cap)
            .and_then(|c| c.get("listChanged"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let mut filter = Filter {
        tools: flag("toolsListChanged") && listed("tools"),
        prompts: flag("promptsListChanged") && listed("prompts"),
        resources: flag("resourcesListChanged") && listed("resources"),
        uris: HashSet::new(),
    };
    let can_subscribe = caps
        .get("resources")
        .and_then(|c| c.get("subscribe"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let wanted: Vec<&str> = requested
        .get("resourceSubscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Err(reject) = within_bounds(&wanted) {
        return Reply::reject(&req.id, &reject);
    }
    // The listen's holds on the route's shared subscriptions: released (the
    // server unsubscribed where it was the last listener) when it ends.
    let mut held = Vec::new();
    if can_subscribe {
        for uri in wanted {
            if filter.uris.contains(uri) {
                continue;
            }
            match route
                .pool
                .subscribe(&principal.name, req.ctx.profile, uri)
                .await
            {
                Ok(h) => {
                    held.push(h);
                    filter.uris.insert(uri.to_owned());
                }
                // Not acknowledged: the client sees which URIs it has.
                Err(e) => {
                    tracing::debug!(route = %route.name, uri, error = ?e, "a listen's resource subscription was not made");
                }
            }
        }
    }
    let mut notices = route.pool.notices();
    let (tx, rx) = mpsc::channel(64);
    // spec subscriptions.mdx "Acknowledgment": the acknowledgement MUST be the first message.
    let ack = notification(
        "notifications/subscriptions/acknowledged",
        Some(tag(&req.id, Some(json!({"notifications": filter.ack()})))),
    );
    let id = req.id.clone();
    let route_name = route.name.clone();
    let mut shutdown = gw.shutdown_signal();
    tokio::spawn(async move {
        let _held = held;
        loop {
            tokio::select! {
                notice = notices.recv() => match notice {
                    Ok(n) if filter.wants(&n.method, n.params.as_ref()) => {
                        let out = notification(&n.method, Some(tag(&id, n.params)));
                        if tx.send(Outgoing::Notification(out)).await.is_err() { break; }
                    }
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => break,
                },
                () = tx.closed() => break,
                _ = shutdown.changed() => {
                    // spec subscriptions.mdx "Graceful Closure": the server SHOULD answer the
                    // listen request before closing; cancellation.mdx asks for the notice too.
                    let cancelled = notification("notifications/cancelled", Some(json!({"requestId": id.to_value(), "reason": "redmark is shutting down"})));
                    let _ = tx.send(Outgoing::Notification(cancelled)).await;
                    let body = crate::jsonrpc::result_response(&id, json!({"resultType": "complete", "_meta": {meta::SUBSCRIPTION_ID: id.to_value()}}));
                    let _ = tx.send(Outgoing::Final { status: StatusCode::OK, body: body.into(), outcome: Outcome::Ok }).await;
                    break;
                }
            }
        }
        tracing::debug!(route = %route_name, "subscription ended");
    });
    Reply::Stream { first: ack, rx }
}

/// The server's capabilities as its `initialize` told the route: known
/// once any session of this profile started; otherwise a session is
/// leased just long enough to learn them.
async fn server_capabilities(
    route: &Route,
    principal: &Principal,
    profile: crate::protocol::profile::Profile,
) -> Result<Value, crate::upstream::UpstreamError> {
    if let Some(init) = route.catalog.init(&profile) {
        return Ok(init.capabilities.clone());
    }
    let lease = route.lease(principal, profile).await?;
    Ok(lease.session().init.capabilities.clone())
}

/// A listen's `resourceSubscriptions` within the bounds a 2025-era
/// session's subscriptions have (`era2025::session::MAX_SUBSCRIPTIONS`).
fn within_bounds(uris: &[&str]) -> Result<(), Reject> {
    use crate::front::era2025::session::{MAX_SUBSCRIPTIONS, check_subscription_uri};
    if uris.len() > MAX_SUBSCRIPTIONS {
        return Err(Reject::new(
            Reason::TooManySubscriptions,
            format!(
                "`resourceSubscriptions` names {} URIs; a listen may hold at most {MAX_SUBSCRIPTIONS}",
                uris.len()
            ),
        ));
    }
    uris.iter().try_for_each(|u| check_subscription_uri(u))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_matches_only_what_was_asked() {
        let f = Filter {
            tools: true,
            uris: HashSet::from(["file:///a".to_string()]),
            ..Filter::default()
        };
        assert!(f.wants("notifications/tools/list_changed", None));
        assert!(!f.wants("notifications/prompts/list_changed", None));
        assert!(f.wants(
            "notifications/resources/updated",
            Some(&json!({"uri": "file:///a"}))
        ));
        assert!(!f.wants(
            "notifications/resources/updated",
            Some(&json!({"uri": "file:///b"}))
        ));
        assert_eq!(
            f.ack(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
    }

    #[test]
    fn tags_with_the_subscription_id() {
        assert_eq!(
            tag(&Id::Number(4), None),
            json!({"_meta": {meta::SUBSCRIPTION_ID: 4}})
        );
        assert_eq!(
            tag(&Id::String("s".into()), Some(json!({"uri": "u"}))),
            json!({"uri": "u", "_meta": {meta::SUBSCRIPTION_ID: "s"}})
        );
    }
}
