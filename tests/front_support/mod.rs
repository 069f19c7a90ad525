//! Helpers shared by `front_rules.rs` and `front_results.rs`: POSTs with
//! exactly the headers a test chooses, and one assertion for error answers.
#![allow(dead_code)]

use serde_json::{Value, json};

use crate::common::{Resp, TestGateway, VERSION, assert_schema, meta, read_resp};

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
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    post(
        gw,
        &headers(method, name.as_deref()),
        body(id, method, with_meta(params)),
    )
    .await
}

/// Asserts an error answer: HTTP status, JSON-RPC code, `data.reason`, the
/// echoed id (`None`: no id at all), and the schema of the envelope and of
/// the specific error definition for `code`.
pub fn expect_error(r: &Resp, status: u16, code: i64, reason: &str, id: Option<Value>) {
    assert_eq!(r.status, status, "HTTP status; body: {}", r.raw);
    assert!(
        r.content_type.starts_with("application/json"),
        "content type {:?}; body: {}",
        r.content_type,
        r.raw
    );
    let msg = r.last();
    assert_schema("JSONRPCErrorResponse", msg);
    let err = r.error();
    assert_eq!(err["code"], code, "code; body: {msg}");
    assert_eq!(err["data"]["reason"], reason, "data.reason; body: {msg}");
    assert_eq!(msg.get("id"), id.as_ref(), "echoed id; body: {msg}");
    match code {
        -32020 => assert_schema("HeaderMismatchError", msg),
        -32022 => assert_schema("UnsupportedProtocolVersionError", msg),
        -32700 => assert_schema("ParseError", err),
        -32600 => assert_schema("InvalidRequestError", err),
        -32601 => assert_schema("MethodNotFoundError", err),
        -32602 => assert_schema("InvalidParamsError", err),
        _ => {}
    }
}
