//! The parsing steps (6–9) together, in pipeline order: each kind of mistake
//! gets its own error.

use super::*;
use crate::jsonrpc::Id;
use http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

#[derive(Debug, PartialEq)]
enum Parsed {
    Request(Box<ClientRequest>),
    Notification { method: String },
}

async fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Parsed, Box<Refusal>> {
    let mut head = http::Request::post("/mcp").body(()).unwrap().into_parts().0;
    head.headers = headers.clone();
    let mut cx = RequestCx::new(Route::detached("t"), head, empty_body());
    cx.bytes = bytes::Bytes::copy_from_slice(body);
    match Pipeline::parsing().run(&mut cx).await {
        Ok(()) => Ok(Parsed::Request(Box::new(cx.request.unwrap()))),
        Err(Halt::Respond { status, .. }) => {
            assert_eq!(status, StatusCode::ACCEPTED);
            Ok(Parsed::Notification {
                method: cx.method_label.unwrap(),
            })
        }
        Err(Halt::Refuse(r)) => Err(r),
    }
}

fn empty_body() -> RequestBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::<bytes::Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn good_headers(method: &str) -> HeaderMap {
    headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ])
}

fn body(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .unwrap()
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

fn reason(r: Result<Parsed, Box<Refusal>>) -> (&'static str, i64, StatusCode) {
    let Err(r) = r else { panic!("accepted") };
    (r.reject.reason.as_str(), r.reject.code(), r.reject.status())
}

#[tokio::test]
async fn accepts_a_well_formed_request_and_reads_its_context() {
    let mut params = json!({"_meta": meta()});
    params["_meta"]["progressToken"] = json!("p1");
    params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
    let Parsed::Request(req) = parse(&good_headers("tools/list"), &body("tools/list", params))
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(req.id, Id::Number(1));
    assert_eq!(req.ctx.progress_token, Some(json!("p1")));
    assert_eq!(req.ctx.log_level.as_deref(), Some("info"));
    assert!(req.ctx.profile.elicitation_form);
    assert!(req.ctx.client_info.is_none(), "clientInfo is optional");
}

#[tokio::test]
async fn malformed_json_and_batches() {
    assert_eq!(
        reason(parse(&good_headers("x"), b"{nope").await),
        ("parse_error", -32700, StatusCode::BAD_REQUEST)
    );
    assert_eq!(
        reason(parse(&good_headers("x"), b"[]").await),
        ("not_a_single_message", -32600, StatusCode::BAD_REQUEST)
    );
    let resp = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
    assert_eq!(
        reason(parse(&good_headers("x"), &resp).await).0,
        "response_not_allowed"
    );
}

#[tokio::test]
async fn notifications_are_recognised() {
    let b = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .unwrap();
    assert_eq!(
        parse(&HeaderMap::new(), &b).await.unwrap(),
        Parsed::Notification {
            method: "notifications/cancelled".into()
        }
    );
}

#[tokio::test]
async fn header_rules() {
    let b = body("tools/list", json!({"_meta": meta()}));
    assert_eq!(
        reason(parse(&headers(&[("mcp-method", "tools/list")]), &b).await),
        ("header_missing", -32020, StatusCode::BAD_REQUEST)
    );
    assert_eq!(
        reason(parse(&headers(&[("mcp-protocol-version", "2026-07-28")]), &b).await).0,
        "header_missing"
    );
    assert_eq!(
        reason(parse(&good_headers("tools/call"), &b).await).0,
        "header_mismatch"
    );
    let mut wrong_meta = meta();
    wrong_meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-29");
    assert_eq!(
        reason(
            parse(
                &good_headers("tools/list"),
                &body("tools/list", json!({"_meta": wrong_meta}))
            )
            .await
        )
        .0,
        "header_mismatch"
    );
}

#[tokio::test]
async fn header_values_are_case_sensitive() {
    let b = body("tools/list", json!({"_meta": meta()}));
    assert_eq!(
        reason(parse(&good_headers("TOOLS/LIST"), &b).await).0,
        "header_mismatch"
    );
}

#[tokio::test]
async fn mcp_name_must_match_and_may_be_base64() {
    let b = body(
        "tools/call",
        json!({"_meta": meta(), "name": "héllo", "arguments": {}}),
    );
    let mut h = good_headers("tools/call");
    assert_eq!(reason(parse(&h, &b).await).0, "header_missing");
    h.insert("mcp-name", HeaderValue::from_static("=?base64?aMOpbGxv?="));
    assert!(parse(&h, &b).await.is_ok());
    h.insert("mcp-name", HeaderValue::from_static("other"));
    assert_eq!(reason(parse(&h, &b).await).0, "header_mismatch");
    h.insert("mcp-name", HeaderValue::from_static("=?base64?!!!?="));
    assert_eq!(reason(parse(&h, &b).await).0, "header_invalid");
    let uri = body(
        "resources/read",
        json!({"_meta": meta(), "uri": "file:///a b"}),
    );
    let mut h = good_headers("resources/read");
    h.insert("mcp-name", HeaderValue::from_static("file:///a b"));
    assert!(parse(&h, &uri).await.is_ok());
}

#[tokio::test]
async fn unsupported_version_names_supported_and_requested() {
    let h = headers(&[
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-method", "tools/list"),
    ]);
    let r = parse(&h, &body("tools/list", json!({"_meta": meta()})))
        .await
        .unwrap_err();
    assert_eq!(r.reject.code(), -32022);
    assert_eq!(r.reject.data["supported"], json!(["2026-07-28"]));
    assert_eq!(r.reject.data["requested"], json!("2025-06-18"));
    assert_eq!(r.id, Some(Id::Number(1)));
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404() {
    for m in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    ] {
        assert_eq!(
            reason(parse(&good_headers(m), &body(m, json!({"_meta": meta()}))).await),
            ("method_removed", -32601, StatusCode::NOT_FOUND),
            "{m}"
        );
    }
    assert_eq!(
        reason(
            parse(
                &good_headers("foo/bar"),
                &body("foo/bar", json!({"_meta": meta()}))
            )
            .await
        )
        .0,
        "method_not_found"
    );
}

#[tokio::test]
async fn missing_meta_fields_are_invalid_params() {
    let h = good_headers("tools/list");
    assert_eq!(
        reason(parse(&h, &body("tools/list", json!({}))).await),
        ("missing_meta", -32602, StatusCode::BAD_REQUEST)
    );
    let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
    assert_eq!(
        reason(parse(&h, &body("tools/list", no_caps)).await).0,
        "missing_meta"
    );
    let no_version = json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}});
    assert_eq!(
        reason(parse(&h, &body("tools/list", no_version)).await).0,
        "missing_meta"
    );
    let b =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": "s", "method": "tools/list"})).unwrap();
    let r = parse(&h, &b).await.unwrap_err();
    assert_eq!(r.id, Some(Id::String("s".into())));
}

#[tokio::test]
async fn bad_log_level_is_invalid_params() {
    let mut m = meta();
    m["io.modelcontextprotocol/logLevel"] = json!("loud");
    assert_eq!(
        reason(
            parse(
                &good_headers("tools/list"),
                &body("tools/list", json!({"_meta": m}))
            )
            .await
        )
        .0,
        "invalid_log_level"
    );
}
