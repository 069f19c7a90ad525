//! One checked 2026-07-28 request, by method: discovery and lists answered
//! from the catalog or one upstream request, calls handed to the operation
//! engine, subscriptions held open.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{Gateway, listen};
use crate::jsonrpc::{ErrorObject, Id};
use crate::mrtr::state::Claims;
use crate::mrtr::{Outcome, Outgoing, start};
use crate::policy::call::filter_tool_list;
use crate::protocol::shape;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject};
use crate::route::Route;
use crate::upstream::UpstreamError;
use crate::upstream::pool::PoolKey;
use crate::upstream::session::Session;

/// How a request is answered.
pub enum Reply {
    /// One JSON-RPC response (`Outgoing::Final`).
    Json(Outgoing),
    /// An SSE stream: `first`, then whatever arrives on `rx`.
    Stream {
        first: Value,
        rx: mpsc::Receiver<Outgoing>,
    },
}

impl Reply {
    pub fn reject(id: &Id, reject: &Reject) -> Reply {
        Reply::Json(Outgoing::reject(Some(id), reject))
    }

    pub fn result(id: &Id, result: Value) -> Reply {
        Reply::Json(Outgoing::result(id, result))
    }

    pub(super) fn upstream_error(id: &Id, error: ErrorObject) -> Reply {
        let (status, body, reason) = shape::upstream_error_reply(id, error);
        Reply::Json(Outgoing::Final {
            status,
            body: body.into(),
            outcome: Outcome::Error(reason),
        })
    }
}

/// `verified`: the retry's state as the pipeline's `owner` step opened and
/// checked it (`None`: the engine checks it).
pub async fn dispatch(
    gw: &Gateway,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    verified: Option<Box<Claims>>,
) -> Reply {
    // Every branch but the calls' is boxed: a future is as large as its
    // largest await, and hyper moves the request's future by value a few
    // times per request, so an upstream request inlined here (a list's)
    // was copied on every call too (benches/WHERE_THE_TIME_GOES.md).
    if route.native.is_native().await {
        return Box::pin(super::native::dispatch(gw, route, principal, *req)).await;
    }
    match req.method {
        Method::Discover => Box::pin(discover(&route, &principal, &req)).await,
        Method::ToolsList
        | Method::PromptsList
        | Method::ResourcesList
        | Method::ResourcesTemplatesList => Box::pin(list(&route, &principal, &req)).await,
        Method::CompletionComplete => Box::pin(simple(&route, &principal, &req)).await,
        Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead => {
            operation(gw, route, principal, req, verified).await
        }
        Method::SubscriptionsListen => Box::pin(listen::start(gw, route, principal, *req)).await,
        // Served by `front::tasks` on a route that serves tasks; here, on
        // any other, not a method the route has.
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => {
            Reply::reject(&req.id, &super::tasks::not_served(req.method.as_str()))
        }
    }
}

/// A call that may involve a person: the engine's first output decides the
/// response (a final answer as JSON, a notification opens an SSE stream).
async fn operation(
    gw: &Gateway,
    route: Arc<Route>,
    principal: Principal,
    req: Box<ClientRequest>,
    verified: Option<Box<Claims>>,
) -> Reply {
    let id = req.id.clone();
    let mut rx = start::call(gw.engine.clone(), route, principal, req, verified);
    match rx.recv().await {
        Some(Outgoing::Notification(first)) => Reply::Stream { first, rx },
        Some(done) => Reply::Json(done),
        None => Reply::reject(
            &id,
            &Reject::new(
                Reason::InternalError,
                "the operation ended without an answer",
            ),
        ),
    }
}

async fn discover(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let init = match route.catalog.init(&req.ctx.profile) {
        Some(init) => init,
        None => match route.lease(principal, req.ctx.profile).await {
            Ok(lease) => lease.session().init.clone(),
            Err(e) => return Reply::reject(&req.id, &e.into_reject()),
        },
    };
    let stamp = route.stamp(&init.server_info);
    let mut result = shape::discover(&init.capabilities, init.instructions.as_deref(), &stamp);
    if route.tasks.is_some() {
        // A route with `[route.tasks]` serves the extension itself (the
        // server behind it has none), so it offers it (ext-tasks
        // "Capability Negotiation": the server declares it in its
        // `server/discover` capabilities).
        crate::protocol::tasks::offer(&mut result);
    }
    Reply::result(&req.id, result)
}

async fn list(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let key = PoolKey {
        principal: principal.name.clone(),
        profile: req.ctx.profile,
    };
    let method = req.method.as_str();
    let cursor = req.params.get("cursor").and_then(Value::as_str);
    // Cached as the server sent it; what this principal may see is decided
    // on every answer, so a reloaded policy applies at once.
    let visible = |result: Value| {
        if req.method == Method::ToolsList {
            filter_tool_list(&route.policy.current(), principal, result)
        } else {
            result
        }
    };
    // Read before the server is asked: a list-changed notice that comes
    // while the answer is on its way makes that answer not worth keeping.
    let epoch = route.catalog.epoch(method);
    if let Some(cached) = route.catalog.list(&key, method, cursor) {
        return Reply::result(&req.id, visible(cached));
    }
    once(route, principal, req, |shaped| {
        route
            .catalog
            .put_list(&key, method, cursor, shaped.clone(), epoch);
        visible(shaped)
    })
    .await
}

/// A request that can involve no person (`completion/complete`).
async fn simple(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    once(route, principal, req, |shaped| shaped).await
}

/// One upstream request on a leased session, its result shaped, then passed
/// through `keep` (which may cache it) into the reply.
async fn once(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    keep: impl FnOnce(Value) -> Value,
) -> Reply {
    let lease = match route.lease(principal, req.ctx.profile).await {
        Ok(l) => l,
        Err(e) => return Reply::reject(&req.id, &e.into_reject()),
    };
    match request_once(lease.session(), route, req).await {
        Ok(Ok(result)) => {
            let shaped = shape::complete(
                req.method,
                result,
                &route.stamp(&lease.session().init.server_info),
            );
            Reply::result(&req.id, keep(shaped))
        }
        Ok(Err(e)) => Reply::upstream_error(&req.id, e),
        Err(e) => Reply::reject(&req.id, &e.into_reject()),
    }
}

async fn request_once(
    session: &Session,
    route: &Route,
    req: &ClientRequest,
) -> Result<Result<Value, ErrorObject>, UpstreamError> {
    session
        .request(
            req.method.as_str(),
            Some(Value::Object(shape::into_upstream_params(
                req.full_params(),
            ))),
            route.pool.request_timeout(),
        )
        .await
}
