//! Turning a legacy server's answers into 2026-07-28 answers: `resultType`,
//! caching hints, `serverInfo` in `_meta`, legacy-only fields removed, and
//! error codes this revision no longer allows rewritten; the notifications
//! redmark sends.

use http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::meta;
use super::reason::Reason;
use super::request::Method;
use crate::jsonrpc::{ErrorObject, Id, code, error_response};

/// The `cacheScope` hint (spec 2026-07-28 `server/utilities/caching.mdx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    Public,
    Private,
}

impl CacheScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// How to stamp results of one route.
#[derive(Debug, Clone)]
pub struct Stamp {
    pub server_info: Value,
    pub ttl_ms: u64,
    pub scope: CacheScope,
}

/// A legacy result for `method`, as a 2026-07-28 result with `resultType: "complete"`.
pub fn complete(method: Method, result: Value, stamp: &Stamp) -> Value {
    let mut obj = match result {
        Value::Object(o) => o,
        // A non-object result is a server bug; keep it visible rather than guess.
        other => Map::from_iter([("value".to_owned(), other)]),
    };
    // spec 2026-07-28 basic/index.mdx "Result Responses": "The `result` MUST include a `resultType` field".
    obj.insert("resultType".into(), "complete".into());
    strip_legacy(method, &mut obj);
    if method.cacheable() {
        obj.insert("ttlMs".into(), stamp.ttl_ms.into());
        obj.insert("cacheScope".into(), stamp.scope.as_str().into());
    }
    let meta_obj = obj.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(m) = meta_obj {
        m.remove(meta::RELATED_TASK);
        m.insert(meta::SERVER_INFO.into(), stamp.server_info.clone());
    }
    Value::Object(obj)
}

/// Removes what 2025-11-25 had and 2026-07-28 moved to the tasks extension.
fn strip_legacy(method: Method, obj: &mut Map<String, Value>) {
    obj.remove("task");
    if method == Method::ToolsList
        && let Some(Value::Array(tools)) = obj.get_mut("tools")
    {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            tool.remove("execution");
        }
    }
}

/// The `server/discover` result, built from the server's `initialize` answer.
pub fn discover(capabilities: &Value, instructions: Option<&str>, stamp: &Stamp) -> Value {
    let mut caps = capabilities.as_object().cloned().unwrap_or_default();
    caps.remove("tasks");
    // Requests never reach the server's `logging/setLevel`; 2026 clients opt in per request.
    let mut result = json!({
        "supportedVersions": crate::protocol::SUPPORTED_VERSIONS,
        "capabilities": Value::Object(caps),
    });
    if let (Some(text), Value::Object(o)) = (instructions, &mut result) {
        o.insert("instructions".into(), text.into());
    }
    complete(Method::Discover, result, stamp)
}

/// Where the server's own `data` goes in a relayed error: redmark owns
/// `data.reason`, so no server can send a reason that looks like redmark's.
pub const UPSTREAM_DATA: &str = "upstream";

/// An upstream error, made legal for a 2026-07-28 client: the server's code
/// and message, `data.reason` redmark's own, the server's `data` under
/// [`UPSTREAM_DATA`].
pub fn upstream_error(error: ErrorObject) -> (Reason, ErrorObject) {
    let ErrorObject {
        mut code,
        message,
        data,
    } = error;
    let mut reason = Reason::UpstreamError;
    let mut out = Map::new();
    if code == code::LEGACY_RESOURCE_NOT_FOUND {
        // spec 2026-07-28 basic/index.mdx "Error Codes": implementations MUST NOT emit -32002;
        // server/resources.mdx: resource not found is -32602, with the URI in `data.uri`.
        code = code::INVALID_PARAMS;
        reason = Reason::ResourceNotFound;
        if let Some(uri) = data
            .as_ref()
            .and_then(|d| d.get("uri"))
            .filter(|u| u.is_string())
        {
            out.insert("uri".into(), uri.clone());
        }
    } else if (-32099..=-32020).contains(&code) {
        // The MCP-reserved range may only carry codes this revision defines
        // (-32042 URL elicitation required, for one, no longer exists).
        code = code::INTERNAL_ERROR;
    }
    out.insert("reason".into(), reason.as_str().into());
    if let Some(d) = data {
        out.insert(UPSTREAM_DATA.into(), d);
    }
    (
        reason,
        ErrorObject::new(code, message).with_data(Value::Object(out)),
    )
}

/// The response to an upstream error: its HTTP status, JSON-RPC body and reason.
pub fn upstream_error_reply(id: &Id, error: ErrorObject) -> (StatusCode, Value, Reason) {
    let (reason, error) = upstream_error(error);
    // spec streamable-http.mdx "Protocol Version Header": a method the server
    // does not implement is 404 with -32601.
    let status = if error.code == code::METHOD_NOT_FOUND {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    (status, error_response(Some(id), &error), reason)
}

/// `{"jsonrpc": "2.0", "method": ..., "params": ...}`
pub fn notification(method: &str, params: Option<Value>) -> Value {
    // Not `json!`: it would serialise `params` into a copy of itself.
    let mut obj = Map::with_capacity(3);
    obj.insert("jsonrpc".into(), "2.0".into());
    obj.insert("method".into(), method.into());
    if let Some(p) = params {
        obj.insert("params".into(), p);
    }
    Value::Object(obj)
}

/// Params for the upstream: the client's params without 2026-only fields.
pub fn upstream_params(params: &Map<String, Value>) -> Value {
    into_upstream_params(params.clone())
}

/// [`upstream_params`], moving the client's params instead of copying them.
pub fn into_upstream_params(params: Map<String, Value>) -> Value {
    let mut out = params;
    out.remove("inputResponses");
    out.remove("requestState");
    if let Some(Value::Object(m)) = out.get_mut("_meta") {
        m.retain(|k, _| !k.starts_with(meta::RESERVED_PREFIX));
        if m.is_empty() {
            out.remove("_meta");
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> Stamp {
        Stamp {
            server_info: json!({"name": "s", "version": "1"}),
            ttl_ms: 60000,
            scope: CacheScope::Public,
        }
    }

    #[test]
    fn lists_get_type_cache_hints_and_server_info() {
        let r = complete(
            Method::ToolsList,
            json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}),
            &stamp(),
        );
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 60000);
        assert_eq!(r["cacheScope"], "public");
        assert_eq!(r["_meta"][meta::SERVER_INFO]["name"], "s");
        assert!(r["tools"][0].get("execution").is_none());
    }

    #[test]
    fn calls_get_no_cache_hints() {
        let r = complete(
            Method::ToolsCall,
            json!({"content": [], "_meta": {meta::RELATED_TASK: {"taskId": "x"}, "k": 1}}),
            &stamp(),
        );
        assert!(r.get("ttlMs").is_none() && r.get("cacheScope").is_none());
        assert_eq!(r["_meta"]["k"], 1);
        assert!(r["_meta"].get(meta::RELATED_TASK).is_none());
    }

    #[test]
    fn legacy_codes_are_rewritten() {
        let (reason, e) = upstream_error(
            ErrorObject::new(-32002, "Resource not found").with_data(json!({"uri": "x"})),
        );
        assert_eq!((reason, e.code), (Reason::ResourceNotFound, -32602));
        assert_eq!(
            e.data.unwrap(),
            json!({"uri": "x", "reason": "resource_not_found", "upstream": {"uri": "x"}})
        );
        let (_, e) = upstream_error(ErrorObject::new(-32042, "url needed"));
        assert_eq!(e.code, -32603);
        assert_eq!(e.data.unwrap(), json!({"reason": "upstream_error"}));
    }

    #[test]
    fn a_server_cannot_send_a_reason_of_redmarks() {
        let (reason, e) = upstream_error(
            ErrorObject::new(-32602, "bad").with_data(json!({"reason": "state_replayed", "n": 1})),
        );
        assert_eq!(reason, Reason::UpstreamError);
        assert_eq!((e.code, e.message.as_str()), (-32602, "bad"));
        assert_eq!(
            e.data.unwrap(),
            json!({"reason": "upstream_error", "upstream": {"reason": "state_replayed", "n": 1}})
        );
        let (_, e) = upstream_error(ErrorObject::new(-32602, "bad").with_data(json!("text")));
        assert_eq!(
            e.data.unwrap(),
            json!({"reason": "upstream_error", "upstream": "text"})
        );
    }

    #[test]
    fn upstream_params_drop_2026_fields() {
        let p = json!({"name": "t", "inputResponses": {}, "requestState": "s", "_meta": {meta::PROTOCOL_VERSION: "2026-07-28", "progressToken": 3}});
        let out = upstream_params(p.as_object().unwrap());
        assert_eq!(out, json!({"name": "t", "_meta": {"progressToken": 3}}));
    }
}
