//! One 2026-07-28 request, by method: discovery and lists answered from the
//! catalog or one upstream request, calls relayed with their notifications,
//! subscriptions held open.

use std::collections::HashMap;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::body::Outgoing;
use super::request::ClientRequest;
use super::shape::{self, Stamp};
use super::{Gateway, Route, listen, params, relay};
use crate::auth::Principal;
use crate::error::{IntoReject, Reject};
use crate::jsonrpc::{ErrorObject, Id, code, error_response, result_response};
use crate::upstream::UpstreamError;
use crate::upstream::catalog::ToolMap;
use crate::upstream::pool::{Lease, PoolKey};
use crate::upstream::session::Session;

/// How a request is answered.
pub enum Reply {
    Json {
        status: StatusCode,
        body: Value,
    },
    /// An SSE stream: `first`, then whatever arrives on `rx`.
    Stream {
        first: Value,
        rx: mpsc::Receiver<Outgoing>,
    },
}

impl Reply {
    pub fn reject(id: &Id, reject: &Reject) -> Reply {
        Reply::Json {
            status: reject.status,
            body: error_response(Some(id), &reject.error_object()),
        }
    }

    pub fn result(id: &Id, result: Value) -> Reply {
        Reply::Json {
            status: StatusCode::OK,
            body: result_response(id, result),
        }
    }
}

/// The answer to an upstream error: its JSON-RPC body and HTTP status.
pub fn upstream_error_reply(id: &Id, error: ErrorObject) -> (StatusCode, Value) {
    let error = shape::upstream_error(error);
    // spec streamable-http.mdx "Protocol Version Header": a method the server
    // does not implement is 404 with -32601.
    let status = if error.code == code::METHOD_NOT_FOUND {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    (status, error_response(Some(id), &error))
}

impl Route {
    pub fn stamp(&self, session_server_info: &Value) -> Stamp {
        Stamp {
            server_info: session_server_info.clone(),
            ttl_ms: u64::try_from(self.cache_ttl.as_millis()).unwrap_or(u64::MAX),
            scope: self.cache_scope,
        }
    }

    pub async fn lease(
        &self,
        principal: &Principal,
        req: &ClientRequest,
    ) -> Result<Lease, UpstreamError> {
        let lease = self.pool.acquire(&principal.name, req.ctx.profile).await?;
        self.catalog
            .put_init(req.ctx.profile, lease.session().init.clone());
        Ok(lease)
    }
}

pub async fn dispatch(
    gw: &Arc<Gateway>,
    route: &Arc<Route>,
    principal: Principal,
    req: ClientRequest,
) -> Reply {
    match req.method.as_str() {
        "server/discover" => discover(route, &principal, &req).await,
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            list(route, &principal, &req).await
        }
        "completion/complete" => simple(route, &principal, &req).await,
        "tools/call" => match check_tool_call(route, &principal, &req).await {
            Ok(()) => relay::start(gw, route.clone(), principal, req).await,
            Err(reject) => Reply::reject(&req.id, &reject),
        },
        "prompts/get" | "resources/read" => relay::start(gw, route.clone(), principal, req).await,
        "subscriptions/listen" => listen::start(gw, route.clone(), principal, req).await,
        // `request::parse` admits only the methods above.
        _ => Reply::reject(
            &req.id,
            &Reject::new(
                StatusCode::NOT_FOUND,
                code::METHOD_NOT_FOUND,
                "method_not_found",
                "Method not found",
            ),
        ),
    }
}

async fn discover(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let init = match route.catalog.init(&req.ctx.profile) {
        Some(init) => init,
        None => match route.lease(principal, req).await {
            Ok(lease) => lease.session().init.clone(),
            Err(e) => return Reply::reject(&req.id, &e.into_reject()),
        },
    };
    let stamp = route.stamp(&init.server_info);
    Reply::result(
        &req.id,
        shape::discover(&init.capabilities, init.instructions.as_deref(), &stamp),
    )
}

async fn list(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let key = PoolKey {
        principal: principal.name.clone(),
        profile: req.ctx.profile,
    };
    let cursor = req.params.get("cursor").and_then(Value::as_str);
    if let Some(cached) = route.catalog.list(&key, &req.method, cursor) {
        return Reply::result(&req.id, cached);
    }
    let lease = match route.lease(principal, req).await {
        Ok(l) => l,
        Err(e) => return Reply::reject(&req.id, &e.into_reject()),
    };
    match request_once(lease.session(), route, req).await {
        Ok(Ok(result)) => {
            let shaped = shape::complete(
                &req.method,
                result,
                &route.stamp(&lease.session().init.server_info),
            );
            route
                .catalog
                .put_list(&key, &req.method, cursor, shaped.clone());
            Reply::result(&req.id, shaped)
        }
        Ok(Err(e)) => {
            let (status, body) = upstream_error_reply(&req.id, e);
            Reply::Json { status, body }
        }
        Err(e) => Reply::reject(&req.id, &e.into_reject()),
    }
}

/// A request that can involve no person (`completion/complete`).
async fn simple(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
    let lease = match route.lease(principal, req).await {
        Ok(l) => l,
        Err(e) => return Reply::reject(&req.id, &e.into_reject()),
    };
    match request_once(lease.session(), route, req).await {
        Ok(Ok(result)) => Reply::result(
            &req.id,
            shape::complete(
                &req.method,
                result,
                &route.stamp(&lease.session().init.server_info),
            ),
        ),
        Ok(Err(e)) => {
            let (status, body) = upstream_error_reply(&req.id, e);
            Reply::Json { status, body }
        }
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
            &req.method,
            Some(shape::upstream_params(&req.params)),
            route.pool.request_timeout(),
        )
        .await
}

/// `{"jsonrpc": "2.0", "method": ..., "params": ...}`
pub fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(p) => json!({"jsonrpc": "2.0", "method": method, "params": p}),
        None => json!({"jsonrpc": "2.0", "method": method}),
    }
}

/// Most pages read when collecting every tool definition.
const MAX_TOOL_PAGES: usize = 20;

/// Every tool definition the route's server lists for this caller, by name;
/// `None` when the server cannot list its tools. `fresh` skips the cache.
async fn tool_definitions(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    fresh: bool,
) -> Result<Option<ToolMap>, Reject> {
    let key = PoolKey {
        principal: principal.name.clone(),
        profile: req.ctx.profile,
    };
    if !fresh && let Some(tools) = route.catalog.tools(&key) {
        return Ok(Some(tools));
    }
    let lease = route
        .lease(principal, req)
        .await
        .map_err(IntoReject::into_reject)?;
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let page = match lease
            .session()
            .request("tools/list", params, route.pool.request_timeout())
            .await
        {
            Ok(Ok(page)) => page,
            Ok(Err(_)) => return Ok(None),
            Err(e) => return Err(e.into_reject()),
        };
        for tool in page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                tools.insert(name.to_owned(), tool.clone());
            }
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(Some(route.catalog.put_tools(&key, tools)))
}

/// Checks a `tools/call` against the server's tool list before relaying it:
/// the tool must exist (spec 2026-07-28 server/tools.mdx "Error Handling":
/// unknown tools are -32602, which legacy SDKs often answer as an `isError`
/// result instead), and mirrored parameters must match their headers (spec
/// streamable-http.mdx "Server Behavior for Custom Headers": 400 and
/// HeaderMismatch otherwise).
async fn check_tool_call(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Result<(), Reject> {
    let name = req
        .params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut tools = tool_definitions(route, principal, req, false).await?;
    if tools.as_ref().is_some_and(|t| !t.contains_key(name)) {
        // The cache may predate the tool; ask once more before refusing.
        tools = tool_definitions(route, principal, req, true).await?;
    }
    let Some(tools) = tools else {
        return Ok(());
    };
    let Some(tool) = tools.get(name) else {
        return Err(Reject::new(
            StatusCode::OK,
            code::INVALID_PARAMS,
            "unknown_tool",
            format!("Unknown tool: `{name}`"),
        )
        .with("tool", name));
    };
    let mirrored = tool
        .get("inputSchema")
        .map(params::mirrored)
        .unwrap_or_default();
    if mirrored.is_empty() {
        return Ok(());
    }
    let empty = serde_json::Map::new();
    let arguments = req
        .params
        .get("arguments")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    params::check(&mirrored, &req.param_headers, arguments).map_err(|e| {
        let reason = match e {
            params::ParamMismatch::Missing(_) => "header_missing",
            params::ParamMismatch::Invalid(_) => "header_invalid",
            params::ParamMismatch::Mismatch(_) => "header_mismatch",
        };
        Reject::new(
            StatusCode::BAD_REQUEST,
            code::HEADER_MISMATCH,
            reason,
            e.to_string(),
        )
    })
}
