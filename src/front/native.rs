//! A checked request for a route whose server speaks 2026-07-28 itself:
//! discovery, lists and completion relayed statelessly (the server's own
//! caching hints kept), calls handed to the native operation engine
//! ([`crate::mrtr::native`]), which holds the server's questions to the policy.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Gateway;
use super::dispatch::Reply;
use crate::mrtr::native::{self, upstream_params};
use crate::mrtr::outgoing::Outgoing;
use crate::policy::call::filter_tool_list;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject};
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
        _ => relay(&route, &principal, &req).await,
    }
}

/// One request that involves no person, relayed as the server answers it.
async fn relay(route: &Route, principal: &Principal, req: &ClientRequest) -> Reply {
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
    if let Some(o) = result.as_object_mut() {
        o.entry("resultType").or_insert_with(|| "complete".into());
        if req.method == Method::Discover {
            // The versions a client may speak are redmark's to say.
            o.insert(
                "supportedVersions".into(),
                json!(crate::protocol::SUPPORTED_VERSIONS),
            );
        }
    }
    if req.method == Method::ToolsList {
        remember_tools(
            route,
            principal,
            req,
            &result,
            req.params.get("cursor").is_none(),
        );
        result = filter_tool_list(&route.policy.current(), principal, result);
    }
    Reply::result(&req.id, result)
}

/// The tool definitions of a first page, for the known-tool step, the call's
/// mode and the `Mcp-Param-*` headers of calls.
fn remember_tools(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    page: &Value,
    first: bool,
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
    );
}

/// Most pages read when collecting every tool definition.
const MAX_TOOL_PAGES: usize = 20;

/// Every tool a native server lists for this caller, by name; `None` when it
/// cannot list them (the call is then left to the server).
pub async fn tools(
    route: &Route,
    req: &ClientRequest,
) -> Result<Option<HashMap<String, Value>>, Reject> {
    let mut tools = HashMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_TOOL_PAGES {
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
    Ok(Some(tools))
}
