//! Step 9: a `tools/call` names a tool the server has (spec 2026-07-28
//! server/tools.mdx "Error Handling": unknown tools are -32602, which legacy
//! SDKs often answer as an `isError` result instead), and mirrored parameters
//! match their headers (spec streamable-http.mdx "Server Behavior for Custom
//! Headers": 400 and HeaderMismatch otherwise).

use foldhash::{HashMap, HashMapExt};

use serde_json::{Value, json};

use super::params::{self, ParamMismatch};
use super::{Halt, RequestCx, Step};
use std::sync::Arc;

use crate::protocol::tool::Tool;
use crate::protocol::{ClientRequest, IntoReject, Method, Principal, Reason, Reject};
use crate::route::Route;
use crate::upstream::catalog::ToolMap;
use crate::upstream::pool::PoolKey;

pub struct KnownTool;

#[async_trait::async_trait]
impl Step for KnownTool {
    /// The verdict when nothing needs asking: not a call, or a tool the
    /// catalog already lists for this caller (every call after the first).
    /// A tool not in the cache is left to [`Step::on_request`], which asks
    /// the server once more before refusing it.
    fn now(&self, cx: &mut RequestCx) -> Option<Result<(), Halt>> {
        let req = match cx.request() {
            Ok(req) => req,
            Err(halt) => return Some(Err(halt)),
        };
        if req.method != Method::ToolsCall {
            return Some(Ok(()));
        }
        let tools = cx.route.catalog.tools(&catalog_key(&cx.principal, req))?;
        let tool = tools.get(req.target()).cloned()?;
        if let Err(reject) = mirrored(&tool, req) {
            return Some(Err(Halt::refuse(Some(&req.id), reject)));
        }
        if let Some(req) = cx.request.as_mut() {
            req.tool = Some(tool);
        }
        Some(Ok(()))
    }

    async fn on_request(&self, cx: &mut RequestCx) -> Result<(), Halt> {
        let req = cx.request()?;
        if req.method != Method::ToolsCall {
            return Ok(());
        }
        let tool = check(&cx.route, &cx.principal, req)
            .await
            .map_err(|reject| Halt::refuse(Some(&req.id), reject))?;
        if let Some(req) = cx.request.as_mut() {
            req.tool = tool;
        }
        Ok(())
    }
}

/// The tool, as the server lists it; `None` when the server cannot list its tools.
async fn check(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
) -> Result<Option<Arc<Tool>>, Reject> {
    let name = req.target();
    let Some(mut tools) = tool_definitions(route, principal, req, false).await? else {
        // A server that cannot list its tools is left to answer the call itself.
        return Ok(None);
    };
    let mut tool = tools.get(name).cloned();
    if tool.is_none() {
        // The cache may predate the tool; ask once more before refusing.
        match tool_definitions(route, principal, req, true).await? {
            Some(fresh) => tools = fresh,
            None => return Ok(None),
        }
        tool = tools.get(name).cloned();
    }
    let Some(tool) = tool else {
        return Err(
            Reject::new(Reason::UnknownTool, format!("Unknown tool: `{name}`")).with("tool", name),
        );
    };
    mirrored(&tool, req)?;
    Ok(Some(tool))
}

/// The tool's mirrored parameters against their `Mcp-Param-*` headers.
fn mirrored(tool: &Tool, req: &ClientRequest) -> Result<(), Reject> {
    // `Mcp-Param-*` headers are 2026-07-28's: a 2025-era client sends none.
    if req.is_2025_era() {
        return Ok(());
    }
    if tool.mirrored.is_empty() {
        return Ok(());
    }
    params::check(&tool.mirrored, &req.param_headers, req.arguments()).map_err(|e| {
        let reason = match e {
            ParamMismatch::Missing(_) => Reason::HeaderMissing,
            ParamMismatch::Invalid(_) => Reason::HeaderInvalid,
            ParamMismatch::Mismatch(_) | ParamMismatch::Conflicting(_) => Reason::HeaderMismatch,
        };
        Reject::new(reason, e.to_string())
    })
}

/// Where the catalog keeps this caller's tools.
fn catalog_key(principal: &Principal, req: &ClientRequest) -> PoolKey {
    PoolKey {
        principal: principal.name.clone(),
        profile: req.ctx.profile,
    }
}

/// Most pages read when collecting every tool definition.
pub(crate) const MAX_TOOL_PAGES: usize = 20;

/// Adds the tools of one `tools/list` page to `tools`, by name, and returns
/// the page's `nextCursor`.
pub(crate) fn take_tools_page(tools: &mut HashMap<String, Value>, page: &Value) -> Option<String> {
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
    page.get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Every tool definition the route's server lists for this caller, by name;
/// `None` when the server cannot list its tools. `fresh` skips the cache.
async fn tool_definitions(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    fresh: bool,
) -> Result<Option<ToolMap>, Reject> {
    let key = catalog_key(principal, req);
    if !fresh && let Some(tools) = route.catalog.tools(&key) {
        return Ok(Some(tools));
    }
    // Boxed: listing is rare and its future over 3 KiB, which inline would
    // be carried by the future of every call (hyper and tokio move it by value).
    Box::pin(list_tools(route, principal, req, key)).await
}

/// Every tool definition the route's server lists for this caller, asked
/// of the server and cached.
async fn list_tools(
    route: &Route,
    principal: &Principal,
    req: &ClientRequest,
    key: PoolKey,
) -> Result<Option<ToolMap>, Reject> {
    let epoch = route.catalog.epoch("tools/list");
    if route.native.is_native().await {
        return Ok(crate::front::native::tools(route, req)
            .await?
            .map(|tools| route.catalog.put_tools(&key, tools, epoch)));
    }
    let lease = route
        .lease(principal, req.ctx.profile)
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
        cursor = take_tools_page(&mut tools, &page);
        if cursor.is_none() {
            break;
        }
    }
    Ok(Some(route.catalog.put_tools(&key, tools, epoch)))
}
