//! A checked request for a route whose server speaks 2026-07-28 itself:
//! discovery, lists and completion relayed statelessly (the server's own
//! caching hints kept), calls handed to the native operation engine
//! ([`crate::mrtr::native`]), which holds the server's questions to the policy.

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Gateway;
use super::dispatch::Reply;
use super::pipeline::known_tool;
use crate::jsonrpc::{Id, Message};
use crate::mrtr::native::{self, upstream_params};
use crate::mrtr::outgoing::Outgoing;
use crate::policy::call::filter_tool_list;
use crate::protocol::shape::notification;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject, meta};
use crate::route::Route;
use crate::upstream::native::NativeRequest;
use crate::upstream::pool::PoolKey;

pub async fn dispatch(
    gw: &Gateway,
    route: Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> Reply {
    match req.method {
        Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead => {
            // The first output decides the response: a final answer as JSON,
            // a notification the server streamed opens an SSE stream.
            let id = req.id.clone();
            let mut rx = native::start(gw.engine.clone(), route, principal, req);
            match rx.recv().await {
                Some(Outgoing::Notification(first)) => Reply::Stream { first, rx },
                Some(done) => Reply::Json(done),
                None => Reply::reject(
                    &id,
                    &Reject::new(Reason::InternalError, "the call ended without an answer"),
                ),
            }
        }
        Method::SubscriptionsListen => listen(gw, &route, &req).await,
        // A native server's own tasks are relayed only on a route with
        // `[route.tasks]` (`front::tasks` routes them before this): never
        // half-supported.
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Reply::reject(
            &req.id,
            &crate::front::tasks::not_served(req.method.as_str()),
        ),
        _ => relay(&route, &principal, &req).await,
    }
}

/// `subscriptions/listen` relayed to the server's own stream (spec 2026-07-28
/// basic/patterns/subscriptions.mdx): its acknowledgement, its change
/// notifications and its final answer, each under the client's request id
/// as the subscription id; requests and anything request-scoped are not for
/// this stream. The client leaving closes the server's stream; redmark
/// shutting down ends it as a legacy listen does.
async fn listen(gw: &Gateway, route: &Route, req: &ClientRequest) -> Reply {
    let mut params = upstream_params(req, None);
    params.remove("name");
    // Task status notifications (ext-tasks "Task Status Notifications") are
    // never asked of the server: on a route without `[route.tasks]` the
    // extension is withheld (the server would refuse the whole listen), and
    // on one with it the client names redmark's wrapped ids, which
    // `front::tasks::notify` serves itself. Not acknowledged from the
    // server either (`subscription_notice`).
    if let Some(Value::Object(wanted)) = params.get_mut("notifications") {
        wanted.remove("taskIds");
    }
    let mut upstream = match route.native.listen(Value::Object(params)).await {
        Some(Ok(rx)) => rx,
        Some(Err(e)) => return Reply::reject(&req.id, &e.into_reject()),
        None => {
            return Reply::reject(
                &req.id,
                &Reject::new(Reason::InternalError, "this route cannot listen natively"),
            );
        }
    };
    let id = req.id.clone();
    let first = loop {
        match upstream.recv().await {
            Some(Message::Notification { method, params }) => {
                if let Some(n) = subscription_notice(&id, &method, params) {
                    break n;
                }
            }
            Some(Message::Response { outcome, .. }) => return listen_end(&id, outcome),
            Some(Message::Request { .. }) => {}
            None => {
                return Reply::reject(
                    &id,
                    &Reject::new(
                        Reason::UpstreamLost,
                        "the server's listen stream ended before its acknowledgement",
                    ),
                );
            }
        }
    };
    let (tx, rx) = mpsc::channel(64);
    let mut shutdown = gw.shutdown_signal();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                m = upstream.recv() => match m {
                    Some(Message::Notification { method, params }) => {
                        if let Some(n) = subscription_notice(&id, &method, params)
                            && tx.send(Outgoing::Notification(n)).await.is_err()
                        {
                            break;
                        }
                    }
                    Some(Message::Response { outcome, .. }) => {
                        if let Reply::Json(done) = listen_end(&id, outcome) {
                            let _ = tx.send(done).await;
                        }
                        break;
                    }
                    Some(Message::Request { .. }) => {}
                    None => {
                        let r = Reject::new(Reason::UpstreamLost, "the server closed its listen stream");
                        let _ = tx.send(Outgoing::reject(Some(&id), &r)).await;
                        break;
                    }
                },
                () = tx.closed() => break,
                _ = shutdown.changed() => {
                    // spec subscriptions.mdx "Graceful Closure", as for a legacy listen.
                    let cancelled = notification("notifications/cancelled", Some(json!({"requestId": id.to_value(), "reason": "redmark is shutting down"})));
                    let _ = tx.send(Outgoing::Notification(cancelled)).await;
                    let _ = tx.send(Outgoing::result(&id, json!({"resultType": "complete", "_meta": {meta::SUBSCRIPTION_ID: id.to_value()}}))).await;
                    break;
                }
            }
        }
    });
    Reply::Stream { first, rx }
}

/// The notifications a listen stream carries, retagged with the client's id.
fn subscription_notice(id: &Id, method: &str, params: Option<Value>) -> Option<Value> {
    const ON_LISTEN: [&str; 5] = [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    ];
    if !ON_LISTEN.contains(&method) {
        return None;
    }
    let mut p = match params {
        Some(Value::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    if let Some(Value::Object(agreed)) = p.get_mut("notifications") {
        agreed.remove("taskIds");
    }
    let m = p.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(m) = m {
        m.insert(meta::SUBSCRIPTION_ID.into(), id.to_value());
    }
    Some(notification(method, Some(Value::Object(p))))
}

/// The server's final answer to the listen, under the client's id.
fn listen_end(id: &Id, outcome: Result<Value, crate::jsonrpc::ErrorObject>) -> Reply {
    match outcome {
        Ok(mut result) => {
            if let Err(reject) = only_complete("subscriptions/listen", &mut result) {
                return Reply::reject(id, &reject);
            }
            if let Some(Value::Object(m)) = result.get_mut("_meta") {
                m.insert(meta::SUBSCRIPTION_ID.into(), id.to_value());
            }
            Reply::result(id, result)
        }
        Err(e) => Reply::upstream_error(id, e),
    }
}

/// One request that involves no person, relayed as the server answers it.
async fn relay(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let tools_epoch = route.catalog.epoch("tools/list");
    let sent = route
        .native
        .request(NativeRequest {
            method: req.method.as_str(),
            params: Value::Object(upstream_params(req, None)),
            name: None,
            param_headers: Vec::new(),
            timeout: route.pool.request_timeout(),
            notify: None,
        })
        .await;
    let mut result = match sent {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => return Reply::upstream_error(&req.id, e),
        Err(e) => return Reply::reject(&req.id, &e.into_reject()),
    };
    if let Err(reject) = only_complete(req.method.as_str(), &mut result) {
        return Reply::reject(&req.id, &reject);
    }
    if req.method == Method::Discover
        && let Some(o) = result.as_object_mut()
    {
        // The versions a client may speak are redmark's to say.
        o.insert(
            "supportedVersions".into(),
            json!(crate::protocol::SUPPORTED_VERSIONS),
        );
        // So are the extensions: tasks, where redmark does not relay them
        // (no `[route.tasks]`), are not offered, whatever the server serves;
        // where it does, they are offered as the server offers them.
        if route.tasks.is_none()
            && let Some(Value::Object(caps)) = o.get_mut("capabilities")
        {
            crate::protocol::tasks::withhold(caps);
        }
    }
    if req.method == Method::ToolsList {
        remember_tools(
            route,
            principal,
            req,
            &result,
            req.params.get("cursor").is_none(),
            tools_epoch,
        );
        result = filter_tool_list(&route.policy.current(), principal, result);
    }
    Reply::result(&req.id, result)
}

/// A result relayed without an operation must be a complete one: spec
/// 2026-07-28 basic/patterns/mrtr.mdx, "Servers MUST NOT send
/// `InputRequiredResult` responses on any other client requests" than
/// `prompts/get`, `resources/read` and `tools/call`. Relayed, its questions
/// would reach the client unguarded and its own `requestState` unsealed
/// (issue 42), so any other `resultType` is an invalid answer of the
/// server's. A complete result keeps no `requestState` or `inputRequests`
/// either: those belong to an `InputRequiredResult` only, and a server's
/// state reaches a client only sealed in redmark's.
pub(crate) fn only_complete(method: &str, result: &mut Value) -> Result<(), Reject> {
    let Some(o) = result.as_object_mut() else {
        return Ok(());
    };
    match o.get("resultType") {
        None => {
            // Absent means complete (schema `Result.resultType`).
            o.insert("resultType".into(), "complete".into());
        }
        Some(Value::String(t)) if t == "complete" => {}
        Some(other) => {
            let shown = match other {
                Value::String(t) => t.chars().take(64).collect::<String>(),
                _ => "a non-string".to_owned(),
            };
            return Err(Reject::new(
                Reason::UpstreamInvalidResult,
                format!(
                    "the server answered {method} with resultType `{shown}`; 2026-07-28 allows only `complete` there (input_required only on tools/call, prompts/get and resources/read)"
                ),
            )
            .with("method", method));
        }
    }
    o.remove("requestState");
    o.remove("inputRequests");
    Ok(())
}

/// The tool definitions of a first page, for the known-tool step, the call's
/// mode and the `Mcp-Param-*` headers of calls.
fn remember_tools(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    page: &Value,
    first: bool,
    epoch: crate::upstream::catalog::Epoch,
) {
    if !first || page.get("nextCursor").is_some() {
        return;
    }
    let tools: HashMap<String, Value> = page
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| Some((t.get("name")?.as_str()?.to_owned(), t.clone())))
        .collect();
    route.catalog.put_tools(
        &PoolKey {
            principal: principal.name.clone(),
            profile: req.ctx.profile,
        },
        tools,
        epoch,
    );
}

/// Every tool a native server lists for this caller, by name; `None` when it
/// cannot list them (the call is then left to the server).
pub async fn tools(
    route: &Route,
    req: &ClientRequest,
) -> Result<Option<HashMap<String, Value>>, Reject> {
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..known_tool::MAX_TOOL_PAGES {
        let mut list = req.clone();
        list.method = Method::ToolsList;
        let mut params = upstream_params(&list, None);
        params.remove("name");
        params.remove("arguments");
        if let Some(c) = &cursor {
            params.insert("cursor".into(), Value::String(c.clone()));
        }
        let page = match route
            .native
            .request(NativeRequest {
                method: "tools/list",
                params: Value::Object(params),
                name: None,
                param_headers: Vec::new(),
                timeout: route.pool.request_timeout(),
                notify: None,
            })
            .await
        {
            Ok(Ok(page)) => page,
            Ok(Err(_)) => return Ok(None),
            Err(e) => return Err(e.into_reject()),
        };
        cursor = known_tool::take_tools_page(&mut tools, &page);
        if cursor.is_none() {
            break;
        }
    }
    Ok(Some(tools))
}
