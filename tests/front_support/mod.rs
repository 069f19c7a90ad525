//! Helpers shared by `front_rules.rs` and `front_results.rs`: POSTs with
//! exactly the headers a test chooses, and bodies built piece by piece.
#![allow(dead_code)]

use serde_json::{Value, json};

use crate::common::{Resp, TestGateway, VERSION, meta, read_resp};

/// Request headers as `(lower-case name, value)`.
pub type Headers = Vec<(&'static str, String)>;

/// The headers of a well-formed POST for `method`, with `Mcp-Name` when given.
pub fn headers(method: &str, name: Option<&str>) -> Headers {
    let mut h = vec![
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", VERSION.to_owned()),
        ("mcp-method", method.to_owned()),
    ];
    if let Some(n) = name {
        h.push(("mcp-name", n.to_owned()));
    }
    h
}

pub fn without(mut h: Headers, name: &str) -> Headers {
    h.retain(|(k, _)| *k != name);
    h
}

/// `h` with `name` set to `value` (replacing any previous value).
pub fn set(h: Headers, name: &'static str, value: &str) -> Headers {
    let mut h = without(h, name);
    h.push((name, value.to_owned()));
    h
}

/// `params` with a well-formed `_meta` (empty client capabilities) added.
pub fn with_meta(mut params: Value) -> Value {
    params
        .as_object_mut()
        .expect("params object")
        .insert("_meta".into(), meta(json!({})));
    params
}

/// `_meta` of `params` without `key` (a short name under `io.modelcontextprotocol/`).
pub fn drop_meta(mut params: Value, key: &str) -> Value {
    let meta = params["_meta"].as_object_mut().expect("_meta");
    meta.remove(&format!("io.modelcontextprotocol/{key}"))
        .expect("key present");
    params
}

/// A JSON-RPC request body.
pub fn body(id: Value, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// The headers of a well-formed `tools/list`.
pub fn list_headers() -> Headers {
    headers("tools/list", None)
}

/// A well-formed `tools/list` body.
pub fn list_body(id: Value) -> String {
    body(id, "tools/list", with_meta(json!({})))
}

/// POSTs `body` to the gateway's `/mcp` with exactly `headers`.
pub async fn post(gw: &TestGateway, headers: &Headers, body: impl Into<reqwest::Body>) -> Resp {
    let mut rb = gw.http.post(&gw.url);
    for (k, v) in headers {
        rb = rb.header(*k, v);
    }
    read_resp(rb.body(body).send().await.expect("POST")).await
}

/// A well-formed request: headers mirrored from the body, `_meta` added to `params`.
pub async fn call(gw: &TestGateway, id: Value, method: &str, params: Value) -> Resp {
    let rb = gw.request_with_id(id, method, &with_meta(params));
    read_resp(gw.send(rb).await).await
}
