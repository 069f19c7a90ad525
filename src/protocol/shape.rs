//! Turning a legacy server's answers into 2026-07-28 answers: `resultType`,
//! caching hints, `serverInfo` in `_meta`, legacy-only fields removed, and
//! error codes this revision no longer allows rewritten; the notifications
//! redmark sends. The other way, a client's params as a legacy server gets
//! them: `shape::legacy_params`.

use std::sync::Arc;

use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::meta;
use super::reason::Reason;
use super::request::Method;
use crate::jsonrpc::{ErrorObject, Id, Payload, code, error_response};

mod legacy_params;

pub(crate) use legacy_params::is_withheld_member;
pub use legacy_params::{call_params, into_upstream_params};

/// The `cacheScope` hint (spec 2026-07-28 `server/utilities/caching.mdx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client may be served the cached result.
    Public,
    /// Only the principal the result was made for.
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

/// A server's `serverInfo`, stamped on every result it answers: read as a
/// tree where redmark looks into it, written from its text, made once per
/// session (writing the tree was a walk of its map on every response).
#[derive(Debug)]
pub struct ServerInfo {
    tree: Value,
    /// `None` only if the tree could not be written, which a `Value` always can.
    text: Option<Box<RawValue>>,
}

impl ServerInfo {
    pub fn new(tree: Value) -> ServerInfo {
        let text = serde_json::value::to_raw_value(&tree).ok();
        ServerInfo { tree, text }
    }
}

impl std::ops::Deref for ServerInfo {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.tree
    }
}

impl PartialEq for ServerInfo {
    fn eq(&self, other: &Self) -> bool {
        self.tree == other.tree
    }
}

impl Serialize for ServerInfo {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.text {
            Some(text) => text.serialize(serializer),
            None => self.tree.serialize(serializer),
        }
    }
}

/// How to stamp results of one route.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamp {
    /// The session's `serverInfo`, shared: stamped on every result, copied on none.
    pub server_info: Arc<ServerInfo>,
    pub ttl_ms: u64,
    pub scope: CacheScope,
}

/// A legacy result for `method`, as a 2026-07-28 result with `resultType: "complete"`.
pub fn complete(method: Method, result: Value, stamp: &Stamp) -> Value {
    Stamped::new(method, result, stamp).to_value()
}

/// A legacy server's result with what 2026-07-28 adds, added as it is
/// written: the relay's hot path neither inserts into the server's map
/// (each insert and removal hashes its key) nor copies `serverInfo` into it.
/// A result kept as the server's text ([`Payload::Text`]) is written member
/// by member from that text; only its `_meta` is read.
///
/// Written: the server's members (without `task`, and without the members
/// redmark sets), then `resultType`, the caching hints of a cacheable
/// method, and `_meta` with `serverInfo` last (without `relatedTask`).
#[derive(Debug, Clone)]
pub struct Stamped {
    method: Method,
    result: Members,
    stamp: Stamp,
    /// Written for a 2025-era client: nothing 2026-07-28 adds (no
    /// `resultType`, caching hints or `serverInfo`), the server's `_meta` kept.
    for_2025: bool,
}

/// The server's result object.
#[derive(Debug, Clone)]
enum Members {
    Tree(Map<String, Value>),
    /// An object, as the server sent it.
    Text(Box<RawValue>),
}

impl Stamped {
    pub fn new(method: Method, result: impl Into<Payload>, stamp: &Stamp) -> Stamped {
        let result = match result.into() {
            // A list's tools lose their `execution`: read them.
            Payload::Text(raw) if method != Method::ToolsList && is_object(&raw) => {
                Members::Text(raw)
            }
            other => {
                let mut result = match other.into_value() {
                    Value::Object(o) => o,
                    // A non-object result is a server bug; keep it visible rather than guess.
                    other => Map::from_iter([("value".to_owned(), other)]),
                };
                strip_tool_execution(method, &mut result);
                Members::Tree(result)
            }
        };
        Stamped {
            method,
            result,
            stamp: stamp.clone(),
            for_2025: false,
        }
    }

    /// The same result, written as a 2025-era client reads it.
    #[must_use]
    pub fn for_2025_client(mut self) -> Stamped {
        self.for_2025 = true;
        self
    }

    /// The result as a JSON tree (for the paths that read it back).
    pub fn to_value(&self) -> Value {
        // A `Map` of `Value`s, or checked JSON text, always serialises.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether `key` of the server's result is written as the server sent it.
    fn relayed(&self, key: &str) -> bool {
        match key {
            // spec 2026-07-28 moved `task` to the tasks extension.
            "task" | "resultType" | "_meta" => false,
            "ttlMs" | "cacheScope" => !self.method.cacheable(),
            _ => true,
        }
    }

    /// Writes `resultType`, the caching hints and `_meta` after the server's members.
    fn stamp_into<M, T>(&self, map: &mut M, meta: MetaOf<'_, T>) -> Result<(), M::Error>
    where
        M: serde::ser::SerializeMap,
        T: Serialize + ?Sized,
    {
        if self.for_2025 {
            return match meta {
                MetaOf::Object(kept) => {
                    let kept: Map<String, Value> = kept
                        .iter()
                        .filter(|(k, _)| *k != meta::RELATED_TASK && *k != meta::SERVER_INFO)
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    if kept.is_empty() {
                        Ok(())
                    } else {
                        map.serialize_entry("_meta", &kept)
                    }
                }
                MetaOf::Absent => Ok(()),
                MetaOf::Other(other) => map.serialize_entry("_meta", other),
            };
        }
        // spec 2026-07-28 basic/index.mdx "Result Responses": "The `result` MUST include a `resultType` field".
        map.serialize_entry("resultType", "complete")?;
        if self.method.cacheable() {
            map.serialize_entry("ttlMs", &self.stamp.ttl_ms)?;
            map.serialize_entry("cacheScope", self.stamp.scope.as_str())?;
        }
        match meta {
            MetaOf::Object(kept) => {
                map.serialize_entry("_meta", &StampedMeta(Some(kept), &self.stamp))
            }
            MetaOf::Absent => map.serialize_entry("_meta", &StampedMeta(None, &self.stamp)),
            // A `_meta` that is not an object is the server's own mistake: relayed as sent.
            MetaOf::Other(other) => map.serialize_entry("_meta", other),
        }
    }
}

/// The server's own `_meta`, as found in its result.
enum MetaOf<'a, T: ?Sized> {
    Absent,
    Object(&'a Map<String, Value>),
    Other(&'a T),
}

/// Whether the text is an object (checked JSON: its first byte tells).
fn is_object(raw: &RawValue) -> bool {
    raw.get().trim_start().starts_with('{')
}

/// Equal when the same JSON would be written.
impl PartialEq for Stamped {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}

impl Serialize for Stamped {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut map = serializer.serialize_map(None)?;
        match &self.result {
            Members::Tree(result) => {
                for (k, v) in result.iter().filter(|(k, _)| self.relayed(k)) {
                    map.serialize_entry(k, v)?;
                }
                let meta = match result.get("_meta") {
                    Some(Value::Object(kept)) => MetaOf::Object(kept),
                    None => MetaOf::Absent,
                    Some(other) => MetaOf::Other(other),
                };
                self.stamp_into(&mut map, meta)?;
            }
            Members::Text(raw) => {
                let members = Payload::text_members(raw)
                    .ok_or_else(|| S::Error::custom("a relayed result is not an object"))?;
                let mut meta = None;
                for (k, v) in &members {
                    if k == "_meta" {
                        meta = Some(*v);
                    } else if self.relayed(k) {
                        map.serialize_entry(k, v)?;
                    }
                }
                // Only `_meta` is read: redmark edits it.
                let kept = meta.map(|raw| serde_json::from_str::<Map<String, Value>>(raw.get()));
                match (&kept, meta) {
                    (Some(Ok(kept)), _) => {
                        self.stamp_into::<_, Value>(&mut map, MetaOf::Object(kept))?;
                    }
                    (_, Some(raw)) => self.stamp_into(&mut map, MetaOf::Other(raw))?,
                    (_, None) => self.stamp_into::<_, Value>(&mut map, MetaOf::Absent)?,
                }
            }
        }
        map.end()
    }
}

/// A result's `_meta` with `serverInfo` set and the legacy `relatedTask` left out.
struct StampedMeta<'a>(Option<&'a Map<String, Value>>, &'a Stamp);

impl Serialize for StampedMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        let kept = self.0.into_iter().flatten();
        for (k, v) in kept.filter(|(k, _)| *k != meta::RELATED_TASK && *k != meta::SERVER_INFO) {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry(meta::SERVER_INFO, &*self.1.server_info)?;
        map.end()
    }
}

/// `tools/list`: each tool's `execution` moved to the tasks extension.
fn strip_tool_execution(method: Method, obj: &mut Map<String, Value>) {
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
    // 2025-11-25's `tasks` is gone from 2026-07-28; the extension that
    // replaced it is offered only where redmark routes it.
    caps.remove("tasks");
    crate::protocol::tasks::withhold(&mut caps);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> Stamp {
        Stamp {
            server_info: Arc::new(ServerInfo::new(json!({"name": "s", "version": "1"}))),
            ttl_ms: 60000,
            scope: CacheScope::Public,
        }
    }

    /// `serverInfo` is written from the text made with the session, and
    /// reads as the server sent it.
    #[test]
    fn server_info_is_written_as_its_tree_would_be() {
        let tree = json!({"name": "s", "version": "1", "title": "Ünïcode \"q\""});
        let info = ServerInfo::new(tree.clone());
        assert_eq!(serde_json::to_string(&info).unwrap(), tree.to_string());
        assert_eq!(*info, tree);
        let stamp = Stamp {
            server_info: Arc::new(info),
            ttl_ms: 1,
            scope: CacheScope::Private,
        };
        let written = serde_json::to_vec(&Stamped::new(
            Method::ToolsCall,
            json!({"content": []}),
            &stamp,
        ))
        .unwrap();
        let read: Value = serde_json::from_slice(&written).unwrap();
        assert_eq!(read["_meta"][meta::SERVER_INFO], tree);
    }

    /// A legacy server's 2025-11-25 `tasks`, and the extension that replaced
    /// it, are not offered: no route serves tasks.
    #[test]
    fn discover_offers_no_tasks() {
        let stamp = Stamp {
            server_info: Arc::new(ServerInfo::new(json!({"name": "s", "version": "1"}))),
            ttl_ms: 0,
            scope: CacheScope::Private,
        };
        let caps = json!({"tools": {}, "tasks": {"requests": {}},
            "extensions": {crate::protocol::tasks::EXTENSION: {}, "com.example/x": {}}});
        let r = serde_json::to_value(discover(&caps, None, &stamp)).unwrap();
        assert_eq!(
            r["capabilities"],
            json!({"tools": {}, "extensions": {"com.example/x": {}}})
        );
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
    fn what_redmark_sets_replaces_what_the_server_sent_once() {
        let r = complete(
            Method::ToolsList,
            json!({"tools": [], "task": {"taskId": "t"}, "resultType": "incomplete", "ttlMs": 5,
                   "cacheScope": "private", "_meta": {meta::SERVER_INFO: "forged", "k": 1}}),
            &stamp(),
        );
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            json!({"tools": [], "resultType": "complete", "ttlMs": 60000, "cacheScope": "public",
                   "_meta": {"k": 1, meta::SERVER_INFO: {"name": "s", "version": "1"}}})
            .to_string()
        );
        // A call's result carries no caching hints: the server's own are its business.
        let r = complete(
            Method::ToolsCall,
            json!({"ttlMs": 5, "content": []}),
            &stamp(),
        );
        assert_eq!(r["ttlMs"], 5);
        assert!(r.get("cacheScope").is_none());
    }

    #[test]
    fn an_odd_result_or_meta_stays_visible() {
        let r = complete(Method::ToolsCall, json!([1, 2]), &stamp());
        assert_eq!(r["value"], json!([1, 2]));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"][meta::SERVER_INFO]["name"], "s");
        let r = complete(Method::ToolsCall, json!({"_meta": "text"}), &stamp());
        assert_eq!(r["_meta"], "text");
    }

    #[test]
    fn a_stamped_result_writes_what_its_value_holds() {
        let stamped = Stamped::new(
            Method::ResourcesRead,
            json!({"contents": [{"uri": "u", "text": "t"}], "_meta": {"z": 1, "a": 2}}),
            &stamp(),
        );
        assert_eq!(
            serde_json::to_string(&stamped).unwrap(),
            serde_json::to_string(&stamped.to_value()).unwrap()
        );
    }

    /// A result kept as the server's text is written exactly as the same
    /// result read into a tree would be, byte for byte.
    #[test]
    fn a_result_kept_as_text_is_stamped_as_its_tree_is() {
        let results = [
            (
                Method::ToolsCall,
                json!({"content": [{"type": "text", "text": "hé \" \n"}], "isError": false}),
            ),
            (
                Method::ToolsCall,
                json!({"content": [], "_meta": {meta::RELATED_TASK: {"taskId": "x"}, "k": 1, meta::SERVER_INFO: "forged"}}),
            ),
            (
                Method::ToolsCall,
                json!({"ttlMs": 5, "task": {"taskId": "t"}, "resultType": "incomplete", "z": null}),
            ),
            (
                Method::ResourcesRead,
                json!({"contents": [{"uri": "u", "text": "t"}], "ttlMs": 5, "cacheScope": "private"}),
            ),
            (Method::PromptsGet, json!({"messages": [], "_meta": "text"})),
            (Method::PromptsGet, json!({"_meta": [1]})),
            (Method::ToolsCall, json!([1, 2])),
            (Method::ToolsCall, json!("x")),
            (
                Method::ToolsList,
                json!({"tools": [{"name": "t", "execution": {}}]}),
            ),
        ];
        for (method, result) in results {
            let raw = serde_json::value::to_raw_value(&result).unwrap();
            let from_text = Stamped::new(method, Payload::Text(raw), &stamp());
            let from_tree = Stamped::new(method, result.clone(), &stamp());
            assert_eq!(
                serde_json::to_string(&from_text).unwrap(),
                serde_json::to_string(&from_tree).unwrap(),
                "{method} {result}"
            );
            assert_eq!(from_text, from_tree);
        }
    }

    /// What a `Value` cannot hold (module note of `jsonrpc::payload`) still
    /// goes out as the server wrote it.
    #[test]
    fn a_result_kept_as_text_is_relayed_as_sent() {
        let raw = RawValue::from_string(r#"{"n":1e400,"content":[]}"#.to_owned()).unwrap();
        let stamped = Stamped::new(Method::ToolsCall, Payload::Text(raw), &stamp());
        assert_eq!(
            serde_json::to_string(&stamped).unwrap(),
            r#"{"n":1e400,"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#
        );
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
}
